/*
 * mcpdrive: a small MCP round-trip driver for the sbx benchmarks.
 *
 *   mcpdrive SCRIPT.json [-- SERVER ARGV...]
 *
 * Spawns the MCP server (SERVER ARGV, or the script's "server" array) with
 * stdin/stdout on pipes, does initialize + notifications/initialized, then
 * runs the script's steps and prints one JSON object on stdout:
 *
 *   {"t0": <monotonic s>, "t1": <monotonic s>, "loop_s": <seconds of the
 *    timed loop>, "samples": {"TAG": [µs, ...], ...}, "vars": {...}}
 *
 * Script (JSON):
 *   {"server": [...],                 optional
 *    "setup":    [STEP...],           run once, not timed
 *    "warmup":   W,                   loop iterations before timing
 *    "n":        N,                   timed loop iterations
 *    "max_seconds": S,                stop the timed loop early after S s
 *    "loop":     [STEP...],           each step is timed on its own
 *    "teardown": [STEP...]}
 * STEP:
 *   {"tag": "x", "tool": "exec_command", "args": {...},
 *    "save": {"var": "field.sub"},    from structuredContent
 *    "expect": "ok",                  structuredContent.status must equal this
 *    "until_done": true,              poll read_command_lines until not running
 *    "allow_error": true}             an isError result is not fatal
 *   {"tag": "y", "exec": ["/bin/true", ...], "stdout": "/dev/null"}
 *                                     fork + execv + waitpid
 *   {"tag": "z", "sleep_ms": 10}
 * In every string of "args" and "exec", ${var} is replaced by a saved
 * variable and ${i} by the iteration number, counting the warm-up ones first
 * (setup/teardown: 0).
 *
 * Latency is CLOCK_MONOTONIC from just before the request is written to just
 * after the last byte of its response line has been read: the round trip.
 * Parsing that line is the client's own work, the same for every server; the
 * time including it is recorded too, as "<tag>@parsed".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static FILE *srv_in, *srv_out;
static pid_t srv_pid;
static long next_id = 1;
static json_t *vars;
static char *line;
static size_t line_cap;
static double reply_read_at; /* when the last matching response line was read */
static double request_sent_at; /* just before the last request's line was written (it is built by then) */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mcpdrive: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (srv_pid > 0)
        kill(srv_pid, SIGTERM);
    exit(1);
}

static void spawn_server(char **argv)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
        die("pipe: %m");
    srv_pid = fork();
    if (srv_pid < 0)
        die("fork: %m");
    if (srv_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %m\n", argv[0]);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    srv_in = fdopen(in[1], "w");
    srv_out = fdopen(out[0], "r");
    setvbuf(srv_out, NULL, _IOFBF, 1 << 20);
}

/* Send one request, wait for the reply with its id; returns the reply. */
static json_t *rpc(const char *method, json_t *params)
{
    long id = next_id++;
    json_t *req = json_pack("{s:s,s:I,s:s}", "jsonrpc", "2.0", "id", (json_int_t)id, "method", method);
    if (params)
        json_object_set(req, "params", params);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    request_sent_at = now_s();
    fputs(text, srv_in);
    fputc('\n', srv_in);
    free(text);
    if (fflush(srv_in))
        die("write to server: %m");
    for (;;) {
        ssize_t n = getline(&line, &line_cap, srv_out);
        if (n < 0)
            die("server closed stdout while %s (id %ld) was pending", method, id);
        double read_at = now_s();
        json_error_t err;
        json_t *m = json_loadb(line, n, 0, &err);
        if (!m)
            continue;
        json_t *mid = json_object_get(m, "id");
        if (mid && json_is_integer(mid) && json_integer_value(mid) == id &&
            !json_object_get(m, "method")) {
            reply_read_at = read_at;
            return m;
        }
        json_decref(m);
    }
}

static void notify(const char *method)
{
    fprintf(srv_in, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\"}\n", method);
    fflush(srv_in);
}

/* Replace ${var} in s; returns a malloc'd string. */
static char *subst(const char *s, long i)
{
    size_t cap = strlen(s) + 64, len = 0;
    char *o = malloc(cap);
    while (*s) {
        const char *val = NULL;
        char num[32];
        size_t skip = 1;
        if (s[0] == '$' && s[1] == '{') {
            const char *e = strchr(s, '}');
            if (e) {
                char name[128];
                size_t nl = (size_t)(e - s - 2);
                if (nl < sizeof name) {
                    memcpy(name, s + 2, nl);
                    name[nl] = 0;
                    if (!strcmp(name, "i")) {
                        snprintf(num, sizeof num, "%ld", i);
                        val = num;
                    } else {
                        json_t *v = json_object_get(vars, name);
                        if (!v)
                            die("unknown variable ${%s}", name);
                        if (json_is_string(v))
                            val = json_string_value(v);
                        else {
                            snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                            val = num;
                        }
                    }
                    skip = nl + 3;
                }
            }
        }
        size_t add = val ? strlen(val) : 1;
        if (len + add + 1 > cap) {
            cap = (len + add + 1) * 2;
            o = realloc(o, cap);
        }
        if (val)
            memcpy(o + len, val, add);
        else
            o[len] = *s;
        len += add;
        s += skip;
    }
    o[len] = 0;
    return o;
}

static json_t *subst_json(json_t *j, long i)
{
    if (json_is_string(j)) {
        char *s = subst(json_string_value(j), i);
        json_t *r = json_string(s);
        free(s);
        return r;
    }
    if (json_is_object(j)) {
        json_t *r = json_object();
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) json_object_set_new(r, k, subst_json(v, i));
        return r;
    }
    if (json_is_array(j)) {
        json_t *r = json_array();
        size_t idx;
        json_t *v;
        json_array_foreach(j, idx, v) json_array_append_new(r, subst_json(v, i));
        return r;
    }
    return json_deep_copy(j);
}

static json_t *get_path(json_t *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *p = strtok_r(buf, ".", &save); p && o; p = strtok_r(NULL, ".", &save)) {
        if (json_is_array(o)) {
            long k = strtol(p, NULL, 10);
            o = json_array_get(o, k < 0 ? json_array_size(o) + k : (size_t)k);
        } else
            o = json_object_get(o, p);
    }
    return o;
}

static json_t *samples;

static void record(const char *tag, double us)
{
    json_t *a = json_object_get(samples, tag);
    if (!a) {
        a = json_array();
        json_object_set_new(samples, tag, a);
    }
    json_array_append_new(a, json_real(us));
}

static void do_exec(json_t *step, long i)
{
    json_t *argv_j = subst_json(json_object_get(step, "exec"), i);
    size_t n = json_array_size(argv_j);
    char **argv = calloc(n + 1, sizeof *argv);
    for (size_t k = 0; k < n; k++)
        argv[k] = (char *)json_string_value(json_array_get(argv_j, k));
    const char *out = json_string_value(json_object_get(step, "stdout"));
    pid_t p = fork();
    if (p < 0)
        die("fork: %m");
    if (p == 0) {
        int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && !json_is_true(json_object_get(step, "allow_fail"))))
        die("%s exited with status %d", argv[0], st);
    free(argv);
    json_decref(argv_j);
}

static void do_call(json_t *step, long i)
{
    const char *tool = json_string_value(json_object_get(step, "tool"));
    json_t *args = subst_json(json_object_get(step, "args"), i);
    /* args outlives params: until_done reads its sandbox_id. */
    json_t *params = json_pack("{s:s,s:O}", "name", tool, "arguments", args);
    json_t *r = rpc("tools/call", params);
    json_decref(params);
    json_t *res = json_object_get(r, "result");
    if (!res) {
        char *t = json_dumps(r, 0);
        die("%s: JSON-RPC error: %.600s", tool, t);
    }
    json_t *sc = json_object_get(res, "structuredContent");
    if (json_is_true(json_object_get(res, "isError"))) {
        if (json_is_true(json_object_get(step, "allow_error"))) {
            json_decref(r);
            json_decref(args);
            return;
        }
        char *t = json_dumps(res, 0);
        die("%s (step %s, i=%ld): isError: %.800s", tool, json_string_value(json_object_get(step, "tag")), i, t);
    }
    if (json_is_true(json_object_get(step, "until_done"))) {
        const char *st = json_string_value(json_object_get(sc, "status"));
        json_t *cs = json_incref(json_object_get(sc, "command_session_id"));
        json_t *sbid = json_incref(json_object_get(args, "sandbox_id"));
        while (st && !strcmp(st, "running")) {
            struct timespec d = {0, 2 * 1000 * 1000};
            nanosleep(&d, NULL);
            json_t *p2 = json_pack("{s:s,s:{s:O,s:O,s:I,s:i}}", "name", "read_command_lines", "arguments",
                                   "sandbox_id", sbid, "command_session_id", cs, "start_offset",
                                   (json_int_t)0, "limit", 0);
            json_decref(r);
            r = rpc("tools/call", p2);
            json_decref(p2);
            res = json_object_get(r, "result");
            if (!res || json_is_true(json_object_get(res, "isError")))
                die("read_command_lines while polling failed: %.600s", json_dumps(res ? res : r, 0));
            sc = json_object_get(res, "structuredContent");
            st = json_string_value(json_object_get(sc, "status"));
        }
        json_decref(cs);
        json_decref(sbid);
    }
    const char *expect = json_string_value(json_object_get(step, "expect"));
    if (expect) {
        const char *st = json_string_value(json_object_get(sc, "status"));
        if (!st || strcmp(st, expect)) {
            char *t = json_dumps(sc, 0);
            die("%s: status %s, expected %s: %.600s", tool, st ? st : "(none)", expect, t);
        }
    }
    json_t *save = json_object_get(step, "save");
    const char *var;
    json_t *field;
    json_object_foreach(save, var, field)
    {
        json_t *v = get_path(sc, json_string_value(field));
        if (!v)
            die("%s: no field %s to save", tool, json_string_value(field));
        json_object_set(vars, var, v);
    }
    json_decref(r);
    json_decref(args);
}

static void run_step(json_t *step, long i, int timed)
{
    const char *tag = json_string_value(json_object_get(step, "tag"));
    double t0 = now_s(), t1;
    if (json_object_get(step, "exec")) {
        do_exec(step, i);
        t1 = now_s();
    } else if (json_object_get(step, "sleep_ms")) {
        long ms = json_integer_value(json_object_get(step, "sleep_ms"));
        struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
        t1 = now_s();
    } else {
        do_call(step, i);
        /* From the write: building the request (a 64 MiB upload's 89 MB of JSON) is the client's work. */
        t0 = request_sent_at;
        t1 = reply_read_at;
        if (timed && tag) {
            char parsed[128];
            snprintf(parsed, sizeof parsed, "%s@parsed", tag);
            record(parsed, (now_s() - t0) * 1e6);
        }
    }
    if (timed && tag)
        record(tag, (t1 - t0) * 1e6);
}

static void run_list(json_t *list, long i, int timed)
{
    size_t k;
    json_t *s;
    json_array_foreach(list, k, s) run_step(s, i, timed);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        die("usage: mcpdrive SCRIPT.json [-- SERVER ARGV...]");
    signal(SIGPIPE, SIG_IGN);
    json_error_t err;
    json_t *script = json_load_file(argv[1], 0, &err);
    if (!script)
        die("%s:%d: %s", argv[1], err.line, err.text);
    vars = json_object();
    samples = json_object();
    json_t *init_vars = json_object_get(script, "vars");
    if (init_vars)
        json_object_update(vars, init_vars);

    char **sargv = NULL;
    if (argc > 3 && !strcmp(argv[2], "--"))
        sargv = argv + 3;
    else {
        json_t *s = json_object_get(script, "server");
        size_t n = json_array_size(s);
        if (!n)
            die("no server command");
        sargv = calloc(n + 1, sizeof *sargv);
        for (size_t k = 0; k < n; k++)
            sargv[k] = (char *)json_string_value(json_array_get(s, k));
    }
    spawn_server(sargv);

    json_t *ip = json_pack("{s:s,s:{},s:{s:s,s:s}}", "protocolVersion", "2025-06-18", "capabilities",
                           "clientInfo", "name", "sbx-bench", "version", "0");
    json_t *r = rpc("initialize", ip);
    json_decref(ip);
    if (!json_object_get(r, "result"))
        die("initialize failed");
    json_decref(r);
    notify("notifications/initialized");

    run_list(json_object_get(script, "setup"), 0, 0);
    long warm = json_integer_value(json_object_get(script, "warmup"));
    long n = json_integer_value(json_object_get(script, "n"));
    json_t *loop = json_object_get(script, "loop");
    for (long i = 0; i < warm; i++)
        run_list(loop, i, 0);
    double max_s = json_number_value(json_object_get(script, "max_seconds"));
    double t0 = now_s();
    for (long i = warm; i < warm + n; i++) {
        run_list(loop, i, 1);
        if (max_s > 0 && now_s() - t0 > max_s) {
            fprintf(stderr, "mcpdrive: stopping after %ld of %ld iterations (max_seconds %.0f)\n", i - warm + 1,
                    n, max_s);
            n = i - warm + 1;
            break;
        }
    }
    double t1 = now_s();
    run_list(json_object_get(script, "teardown"), 0, 0);

    fclose(srv_in);
    int st;
    waitpid(srv_pid, &st, 0);
    json_t *outj = json_pack("{s:f,s:f,s:f,s:I,s:O,s:O}", "t0", t0, "t1", t1, "loop_s", t1 - t0, "n",
                             (json_int_t)n, "samples", samples, "vars", vars);
    json_dumpf(outj, stdout, JSON_COMPACT);
    fputc('\n', stdout);
    return 0;
}
