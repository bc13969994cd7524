/* Drive build/bin/sbx-worker directly over a socketpair, as sbxd would, and
 * print TAP. Usage: drive-worker PATH-TO-SBX-WORKER
 * WORKER_WRAPPER="valgrind -q ..." prefixes the worker command line; then the
 * memory bound of the flood test is reported, not enforced. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "sbx-limits.h"
#include "macro.h"
#include "wire.h"

#define MAX_IDS 256u
#define FLOOD_BYTES 50000000ull
#define RSS_LIMIT_KB (20u * 1024u)
#define REQUEST_SEQ 7u

typedef struct Text {
        char *s;
        size_t len, cap;
} Text;

typedef struct Result {
        char *out;
        size_t len, cap;
        Text stream[3];                 /* by Sbx__Stream: what came tagged merged, stdout, stderr */
        char pieces[64];                /* the tag of each frame, in order: 'M', 'O', 'E' */
        unsigned long long stream_counted[3];
        unsigned long long counted;     /* count_only: bytes seen */
        bool count_only, all_a;
        bool exited, failed;
        int exit_code, sig, err;
        uint32_t seq;                   /* of EXEC_FAILED */
        char errmsg[256];
} Result;

static const char *worker_path;
static char *wrapper;                   /* WORKER_WRAPPER, split into wrapper_argv */
static char *wrapper_words;             /* wrapper_argv points into it */
static char *wrapper_argv[32];
static size_t wrapper_n;
static int timeout_ms = 10000;
static int sock = -EBADF;
static pid_t worker_pid;
static Result results[MAX_IDS];
static unsigned tests, failures, protocol_violations;
static uint32_t last_seq;

_printf_(2, 3)
static bool ok(bool cond, const char *fmt, ...) {
        va_list ap;

        printf("%s %u - ", cond ? "ok" : "not ok", ++tests);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
        if (!cond)
                failures++;
        return cond;
}

_printf_(1, 2)
static void diag(const char *fmt, ...) {
        va_list ap;

        printf("# ");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        fflush(stdout);
}

static pid_t spawn_worker(int *ret_sock) {
        char *argv[64];
        size_t n = 0;
        int sv[2];
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                perror("socketpair");
                exit(2);
        }
        for (size_t i = 0; i < wrapper_n; i++)
                argv[n++] = wrapper_argv[i];
        argv[n++] = (char *) worker_path;
        argv[n++] = (char *) "--session";
        argv[n++] = (char *) "test";
        argv[n] = NULL;

        pid = fork();
        if (pid < 0) {
                perror("fork");
                exit(2);
        }
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0 || fd_move_to(null, 0) < 0 || fd_move_to(null, 1) < 0 ||
                    fd_move_to(sv[1], 3) < 0)
                        _exit(126);
                execvp(argv[0], argv);
                _exit(127);
        }
        close(sv[1]);
        *ret_sock = sv[0];
        return pid;
}

static Sbx__Msg *recv_frame(int fd, int ms) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        Sbx__Msg *msg = NULL;
        uint32_t seq;
        int r;

        r = poll(&p, 1, ms);
        if (r <= 0)
                return NULL;
        r = wire_recv(fd, &msg, &seq, NULL, NULL);
        if (r < 0)
                return NULL;
        last_seq = seq;
        return msg;
}

/* Append to a NUL-terminated growable string. */
static void append(char **s, size_t *n, size_t *cap, const uint8_t *data, size_t len) {
        if (*n + len + 1 > *cap) {
                *cap = (*n + len + 1) * 2;
                *s = realloc(*s, *cap);
                if (!*s)
                        abort();
        }
        memcpy(*s + *n, data, len);
        *n += len;
        (*s)[*n] = '\0';
}

static void result_append(Result *res, Sbx__Stream stream, const uint8_t *data, size_t len) {
        size_t np = strlen(res->pieces);

        if ((unsigned) stream > SBX__STREAM__STREAM_STDERR) {
                diag("protocol violation: output frame with stream %d", (int) stream);
                protocol_violations++;
                return;
        }
        if (np + 1 < sizeof(res->pieces))
                res->pieces[np] = "MOE"[stream];
        res->stream_counted[stream] += len;
        if (res->count_only) {
                for (size_t i = 0; i < len; i++)
                        if (data[i] != 'a')
                                res->all_a = false;
                res->counted += len;
                return;
        }
        append(&res->stream[stream].s, &res->stream[stream].len, &res->stream[stream].cap, data, len);
        append(&res->out, &res->len, &res->cap, data, len);
}

/* The text of command id that came tagged stream ("" if none). */
static const char *stream_text(uint32_t id, Sbx__Stream stream) {
        return results[id].stream[stream].s ? results[id].stream[stream].s : "";
}

static void handle(Sbx__Msg *m) {
        Result *res;

        switch (m->type) {
        case SBX__MSG_TYPE__MSG_WORKER_OUTPUT:
                res = &results[m->worker_output->command % MAX_IDS];
                if (res->exited || res->failed || m->worker_output->data.len > SBX_OUTPUT_CHUNK_MAX) {
                        diag("protocol violation: output for command %u after its end or oversized",
                             m->worker_output->command);
                        protocol_violations++;
                }
                result_append(res, m->worker_output->stream, m->worker_output->data.data, m->worker_output->data.len);
                break;
        case SBX__MSG_TYPE__MSG_WORKER_EXITED:
                res = &results[m->worker_exited->command % MAX_IDS];
                if (res->exited || res->failed)
                        protocol_violations++;
                res->exited = true;
                res->exit_code = m->worker_exited->exit_code;
                res->sig = m->worker_exited->signal;
                break;
        case SBX__MSG_TYPE__MSG_WORKER_EXEC_FAILED:
                res = &results[m->worker_exec_failed->command % MAX_IDS];
                res->failed = true;
                res->seq = last_seq;
                res->err = m->worker_exec_failed->err;
                snprintf(res->errmsg, sizeof(res->errmsg), "%s", m->worker_exec_failed->errmsg);
                break;
        default:
                diag("protocol violation: unexpected frame type %d", (int) m->type);
                protocol_violations++;
        }
        sbx__msg__free_unpacked(m, NULL);
}

/* Take one frame; false on timeout or connection loss. */
static bool pump(int ms) {
        Sbx__Msg *m = recv_frame(sock, ms);

        if (!m)
                return false;
        handle(m);
        return true;
}

static bool wait_done(uint32_t id) {
        while (!results[id].exited && !results[id].failed)
                if (!pump(timeout_ms))
                        return false;
        return true;
}

static bool wait_output(uint32_t id, const char *needle) {
        while (!results[id].out || !strstr(results[id].out, needle))
                if (results[id].exited || !pump(timeout_ms))
                        return false;
        return true;
}

static void send_msg(Sbx__Msg *msg) {
        int r = wire_send(sock, msg, REQUEST_SEQ, NULL, 0);
        if (r < 0) {
                fprintf(stderr, "wire_send: %s\n", strerror(-r));
                exit(2);
        }
}

static void send_exec_full(uint32_t id, const char *cmd, const char *const *env, const char *cwd, bool apart) {
        Sbx__SupervisorExec e = SBX__SUPERVISOR_EXEC__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        e.command = id;
        e.separate_streams = apart;
        e.cmd = (char *) cmd;
        e.cwd = (char *) cwd;
        while (env[e.n_env])
                e.n_env++;
        e.env = (char **) env;
        msg.type = SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC;
        msg.body_case = SBX__MSG__BODY_SUPERVISOR_EXEC;
        msg.supervisor_exec = &e;
        send_msg(&msg);
}

static void send_exec_env(uint32_t id, const char *cmd, const char *const *env, const char *cwd) {
        send_exec_full(id, cmd, env, cwd, false);
}

static const char *const default_env[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL };

static void send_exec(uint32_t id, const char *cmd) {
        send_exec_env(id, cmd, default_env, "/");
}

/* With stdout and stderr on a pipe each. */
static void send_exec_apart(uint32_t id, const char *cmd) {
        send_exec_full(id, cmd, default_env, "/", true);
}

static void send_stdin(uint32_t id, const void *data, size_t len, bool close_it) {
        Sbx__SupervisorStdin s = SBX__SUPERVISOR_STDIN__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        s.command = id;
        s.data.data = (uint8_t *) data;
        s.data.len = len;
        s.close = close_it;
        msg.type = SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN;
        msg.body_case = SBX__MSG__BODY_SUPERVISOR_STDIN;
        msg.supervisor_stdin = &s;
        send_msg(&msg);
}

/* On a pty of rows x cols (a takeover terminal's). */
static void send_exec_pty(uint32_t id, const char *cmd, uint32_t rows, uint32_t cols) {
        Sbx__SupervisorExec e = SBX__SUPERVISOR_EXEC__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        e.command = id;
        e.cmd = (char *) cmd;
        e.cwd = (char *) "/";
        e.env = (char **) default_env;
        while (default_env[e.n_env])
                e.n_env++;
        e.pty = true;
        e.rows = rows;
        e.cols = cols;
        msg.type = SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC;
        msg.body_case = SBX__MSG__BODY_SUPERVISOR_EXEC;
        msg.supervisor_exec = &e;
        send_msg(&msg);
}

static void send_resize(uint32_t id, uint32_t rows, uint32_t cols) {
        Sbx__SupervisorStdin s = SBX__SUPERVISOR_STDIN__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        s.command = id;
        s.rows = rows;
        s.cols = cols;
        msg.type = SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN;
        msg.body_case = SBX__MSG__BODY_SUPERVISOR_STDIN;
        msg.supervisor_stdin = &s;
        send_msg(&msg);
}

static void send_signal(uint32_t id, int sig) {
        Sbx__SupervisorSignal s = SBX__SUPERVISOR_SIGNAL__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        s.command = id;
        s.signal = sig;
        msg.type = SBX__MSG_TYPE__MSG_SUPERVISOR_SIGNAL;
        msg.body_case = SBX__MSG__BODY_SUPERVISOR_SIGNAL;
        msg.supervisor_signal = &s;
        send_msg(&msg);
}

static bool exited_with(uint32_t id, int code, const char *out) {
        Result *res = &results[id];
        bool good = wait_done(id) && res->exited && res->sig == 0 && res->exit_code == code &&
                    (!out || (res->out ? strcmp(res->out, out) == 0 : out[0] == '\0'));
        if (!good)
                diag("command %u: exited=%d failed=%d code=%d signal=%d err=%d '%s' output '%s'",
                     id, res->exited, res->failed, res->exit_code, res->sig, res->err, res->errmsg,
                     res->out ? res->out : "");
        return good;
}

static long proc_status_kb(pid_t pid, const char *field) {
        char path[64], line[256];
        size_t flen = strlen(field);
        long kb = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, flen) == 0 && line[flen] == ':')
                        kb = strtol(line + flen + 1, NULL, 10);
        fclose(f);
        return kb;
}

/* utime + stime of pid in clock ticks, -1 if unknown. */
static long cpu_ticks(pid_t pid) {
        char path[64], buf[1024], *p;
        unsigned long utime, stime;
        FILE *f;
        bool good;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        good = fgets(buf, sizeof(buf), f) != NULL;
        fclose(f);
        p = good ? strrchr(buf, ')') : NULL;
        /* After "pid (comm)": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime */
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
                return -1;
        return (long) (utime + stime);
}

/* Wait until pid is gone (pidfd readable), or timeout. */
static bool pid_gone(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        return poll(&p, 1, timeout_ms) == 1;
}

static int first_pid(uint32_t id) {
        return results[id].out ? atoi(results[id].out) : 0;
}

static void sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int wait_worker(pid_t pid) {
        struct pollfd p;
        int status, pidfd;

        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        p = (struct pollfd) { .fd = pidfd, .events = POLLIN };
        if (pidfd < 0 || poll(&p, 1, timeout_ms) != 1) {
                diag("worker %d did not exit, killing it", (int) pid);
                kill(pid, SIGKILL);
        }
        if (pidfd >= 0)
                close(pidfd);
        if (waitpid(pid, &status, 0) != pid)
                return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- scenarios ------------------------------------------------------------- */

static void test_ready(void) {
        Sbx__Msg *m = recv_frame(sock, timeout_ms);
        bool good = m && m->type == SBX__MSG_TYPE__MSG_WORKER_READY &&
                    (m->worker_ready->pid == worker_pid || (wrapper && m->worker_ready->pid > 0));

        /* A wrapper such as "unshare -p -f" makes the worker another pid (1). */
        ok(good, "worker sends READY with its pid (%lld)", m ? (long long) m->worker_ready->pid : -1LL);
        if (m)
                sbx__msg__free_unpacked(m, NULL);
        if (!good)
                exit(1);
}

static void test_basics(void) {
        send_exec(1, "echo hello");
        ok(exited_with(1, 0, "hello\n"), "echo: output and exit code 0");

        send_exec(2, "echo before; exit 3");
        ok(exited_with(2, 3, "before\n"), "exit 3 gives exit_code 3");

        send_exec(3, "echo a; echo b >&2; echo c");
        ok(exited_with(3, 0, "a\nb\nc\n"), "stdout and stderr merged in order");

        send_exec(4, "exec ls /proc/self/fd");
        ok(exited_with(4, 0, "0\n1\n2\n3\n"), "command inherits only fds 0, 1, 2");

        /* The mask is read by the shell's own process after an exec: a child reading
         * the shell's status races with dash, which blocks all signals while it waits. */
        send_exec(5, "awk '{print ($1 == $5 && $1 == $6) ? \"leader\" : \"not leader\"}' /proc/$$/stat; "
                     "exec grep -E '^Sig(Blk|Ign)' /proc/self/status");
        ok(exited_with(5, 0, "leader\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"),
           "command leads its own session and process group, with a clean signal mask");
}

static void test_stdin(void) {
        /* 4 x 32 KiB: more than the pipe holds, within what the worker queues. */
        char big[4][32 * 1024];
        bool same;

        send_exec(10, "cat");
        send_stdin(10, "hello\n", 6, false);
        ok(wait_output(10, "hello\n"), "stdin relayed to cat while it runs");
        send_stdin(10, NULL, 0, true);
        ok(exited_with(10, 0, "hello\n"), "closing stdin ends cat with exit 0");

        send_exec(11, "read x; echo got $x");
        send_stdin(11, "world\n", 6, false);
        ok(exited_with(11, 0, "got world\n"), "read x; echo got $x");

        /* More than one pipe's worth at once: the worker queues and writes on POLLOUT. */
        for (size_t i = 0; i < 4; i++)
                for (size_t j = 0; j < sizeof(big[i]); j++)
                        big[i][j] = (char) ('A' + (i * 7 + j) % 26);
        send_exec(12, "cat");
        for (size_t i = 0; i < 4; i++)
                send_stdin(12, big[i], sizeof(big[i]), i == 3);
        same = wait_done(12) && results[12].len == sizeof(big) &&
               memcmp(results[12].out, big, sizeof(big)) == 0;
        ok(same && results[12].exit_code == 0, "128 KiB of stdin queued and echoed intact (%zu bytes back)",
           results[12].len);

        send_stdin(12, "late\n", 5, true);
        send_stdin(999, "x", 1, true);
        send_signal(999, SIGKILL);
        send_exec(13, "echo alive");
        ok(exited_with(13, 0, "alive\n"), "stdin/signal for ended or unknown commands are ignored");
}

static void test_signals(void) {
        int bg, pidfd;

        bool good;

        send_exec(20, "sleep 100");
        send_signal(20, SIGKILL);
        good = wait_done(20) && results[20].exited && results[20].sig == SIGKILL;
        ok(good, "SIGKILL to sleep 100 gives EXITED with signal 9 (got %d)", results[20].sig);

        send_exec(21, "sleep 100 & echo $!; sleep 100");
        if (!wait_output(21, "\n")) {
                ok(false, "background child reported its pid");
                return;
        }
        bg = first_pid(21);
        pidfd = (int) syscall(SYS_pidfd_open, bg, 0);
        send_signal(21, SIGKILL);
        good = wait_done(21) && results[21].sig == SIGKILL;
        ok(good, "process group: sh killed by signal 9");
        ok(pidfd >= 0 && pid_gone(pidfd), "process group: background sleep %d killed too", bg);
        if (pidfd >= 0)
                close(pidfd);

        send_exec(22, "trap 'echo term; exit 7' TERM; echo armed; while :; do sleep 0.05; done");
        if (wait_output(22, "armed\n"))
                send_signal(22, SIGTERM);
        /* The whole group gets it: sh reports its sleep child "Terminated". */
        good = exited_with(22, 7, NULL) && results[22].len >= 5 &&
               strcmp(results[22].out + results[22].len - 5, "term\n") == 0;
        ok(good, "SIGTERM reaches the trap of sh, its last output precedes EXITED");
}

static void test_background(void) {
        int bg;

        /* sh ends while its background child still holds the output pipe. */
        send_exec(23, "sleep 100 & echo $!");
        ok(wait_done(23) && results[23].exited && results[23].exit_code == 0 && results[23].len > 0,
           "EXITED does not wait for a background child that keeps the output open");
        bg = first_pid(23);
        if (bg > 0)
                kill(bg, SIGKILL);
}

static void test_exec_failures(void) {
        static const char *const env[] = { "PATH=/usr/bin:/bin", NULL };
        bool good;

        send_exec_env(30, "echo never", env, "/nonexistent");
        good = wait_done(30) && results[30].failed && results[30].err == -ENOENT &&
               strstr(results[30].errmsg, "/nonexistent") && results[30].seq == REQUEST_SEQ;
        ok(good, "bad cwd gives EXEC_FAILED -ENOENT echoing the request seq ('%s')", results[30].errmsg);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void test_env(void) {
        static const char *const env[] = { "FOO=bar baz", "PATH=/usr/bin:/bin", NULL };
        char *lines[16], *save = NULL;
        size_t n = 0;
        bool good;

        send_exec_env(40, "env", env, "/tmp");
        good = wait_done(40) && results[40].exited && results[40].exit_code == 0 && results[40].out;
        if (good) {
                for (char *t = strtok_r(results[40].out, "\n", &save); t && n < ELEMENTSOF(lines);
                     t = strtok_r(NULL, "\n", &save))
                        lines[n++] = t;
                qsort(lines, n, sizeof(lines[0]), cmp_str);
                /* PWD is set by sh itself. */
                good = n == 3 && strcmp(lines[0], "FOO=bar baz") == 0 &&
                       strcmp(lines[1], "PATH=/usr/bin:/bin") == 0 && strcmp(lines[2], "PWD=/tmp") == 0;
        }
        ok(good, "environment is exactly the one given (plus sh's PWD), cwd applied");
}

static void test_concurrent(void) {
        send_exec(50, "cat");
        send_exec(51, "echo b");
        ok(exited_with(51, 0, "b\n") && !results[50].exited, "second command ends while the first runs");
        send_stdin(50, "x\n", 2, true);
        ok(exited_with(50, 0, "x\n"), "first command still takes stdin and ends");
}

static void test_too_many(void) {
        const uint32_t base = 100;
        bool good = true;

        for (uint32_t i = 0; i < SBX_MAX_COMMANDS_PER_SESSION; i++)
                send_exec(base + i, "cat");
        send_exec(base + SBX_MAX_COMMANDS_PER_SESSION, "true");
        good = wait_done(base + SBX_MAX_COMMANDS_PER_SESSION) &&
               results[base + SBX_MAX_COMMANDS_PER_SESSION].failed &&
               results[base + SBX_MAX_COMMANDS_PER_SESSION].err == -EAGAIN;
        ok(good, "command %u beyond the limit gives EXEC_FAILED -EAGAIN ('%s')",
           SBX_MAX_COMMANDS_PER_SESSION + 1, results[base + SBX_MAX_COMMANDS_PER_SESSION].errmsg);

        send_exec(base, "true");
        good = wait_done(base) && results[base].failed && results[base].err == -EEXIST;
        ok(good, "a command number in use gives EXEC_FAILED -EEXIST ('%s')", results[base].errmsg);
        results[base].failed = false;
        good = true;
        for (uint32_t i = 0; i < SBX_MAX_COMMANDS_PER_SESSION; i++)
                send_stdin(base + i, NULL, 0, true);
        for (uint32_t i = 0; i < SBX_MAX_COMMANDS_PER_SESSION; i++)
                good = exited_with(base + i, 0, "") && good;
        ok(good, "all %u commands end when their stdin closes", SBX_MAX_COMMANDS_PER_SESSION);
}

static void test_flood(void) {
        const uint32_t id = 60;
        long rss_paused, hwm, ticks;
        Result *res = &results[id];

        res->count_only = true;
        res->all_a = true;
        send_exec(id, "head -c 50000000 /dev/zero | tr '\\0' 'a'");
        /* Do not read for a while: the worker must slow the command down. */
        ticks = cpu_ticks(worker_pid);
        sleep_ms(1500);
        rss_paused = proc_status_kb(worker_pid, "VmRSS");
        ticks = cpu_ticks(worker_pid) - ticks;
        /* Then read slowly, then at full speed. */
        for (int i = 0; i < 40 && !res->exited; i++) {
                pump(timeout_ms);
                sleep_ms(10);
        }
        while (!res->exited)
                if (!pump(timeout_ms))
                        break;
        hwm = proc_status_kb(worker_pid, "VmHWM");
        diag("flood: worker VmRSS %ld kB after 1.5 s unread, VmHWM %ld kB at the end", rss_paused, hwm);
        ok(ticks >= 0 && ticks < sysconf(_SC_CLK_TCK) / 2,
           "flood: worker waits while the reader does not read (%ld ticks of CPU in 1.5 s)", ticks);
        ok(res->exited && res->exit_code == 0 && res->counted == FLOOD_BYTES && res->all_a,
           "flood: all %llu bytes arrive, exit 0 (got %llu)", FLOOD_BYTES, res->counted);
        if (wrapper)
                ok(true, "# SKIP worker memory bound not meaningful under '%s' (VmHWM %ld kB)", wrapper, hwm);
        else
                ok(hwm > 0 && hwm < RSS_LIMIT_KB && rss_paused < RSS_LIMIT_KB,
                   "worker peak RSS stays under %u kB (VmHWM %ld kB)", RSS_LIMIT_KB, hwm);
}

static void test_streams(void) {
        Result *res;
        int bg;

        ok(strspn(results[3].pieces, "M") == strlen(results[3].pieces) && results[3].pieces[0],
           "without separate streams every frame says STREAM_MERGED ('%s')", results[3].pieces);

        send_exec_apart(80, "echo out1; echo err1 >&2; echo out2; echo err2 >&2");
        ok(exited_with(80, 0, NULL) && strcmp(stream_text(80, SBX__STREAM__STREAM_STDOUT), "out1\nout2\n") == 0 &&
           strcmp(stream_text(80, SBX__STREAM__STREAM_STDERR), "err1\nerr2\n") == 0 &&
           !results[80].stream[SBX__STREAM__STREAM_MERGED].s && results[80].len == 20,
           "separate streams: stdout and stderr frames apart, each in order, all sent before EXITED ('%s')",
           results[80].pieces);

        /* Each piece is read before the next one is written: the frames keep the writes' order. */
        send_exec_apart(81, "echo a; read x; echo b >&2; read x; echo c");
        if (wait_output(81, "a\n"))
                send_stdin(81, "\n", 1, false);
        if (wait_output(81, "b\n"))
                send_stdin(81, "\n", 1, false);
        ok(exited_with(81, 0, "a\nb\nc\n") && strcmp(results[81].pieces, "OEO") == 0,
           "separate streams: frames in the order the worker read them ('%s')", results[81].pieces);

        send_exec_apart(82, "[ \"$(readlink /proc/$$/fd/1)\" != \"$(readlink /proc/$$/fd/2)\" ] && echo apart; "
                            "exec ls /proc/self/fd");
        ok(exited_with(82, 0, "apart\n0\n1\n2\n3\n"), "separate streams: fds 1 and 2 are two pipes, nothing else leaks");

        /* sh ends while its background child still holds stderr. */
        send_exec_apart(83, "sleep 100 >/dev/null & echo $!");
        ok(wait_done(83) && results[83].exited && results[83].exit_code == 0,
           "separate streams: EXITED does not wait for a child that keeps stderr open");
        bg = first_pid(83);
        if (bg > 0)
                kill(bg, SIGKILL);

        res = &results[84];
        res->count_only = true;
        res->all_a = true;
        send_exec_apart(84, "head -c 20000000 /dev/zero | tr '\\0' 'a' >&2; printf aaaaa");
        (void) wait_done(84);
        ok(res->exited && res->exit_code == 0 && res->all_a &&
           res->stream_counted[SBX__STREAM__STREAM_STDERR] == 20000000ull &&
           res->stream_counted[SBX__STREAM__STREAM_STDOUT] == 5,
           "separate streams: 20 MB on stderr arrive as stderr, stdout's 5 bytes as stdout (%llu, %llu)",
           res->stream_counted[SBX__STREAM__STREAM_STDERR], res->stream_counted[SBX__STREAM__STREAM_STDOUT]);
}

/* A command on a pty: its controlling terminal, of the size asked, one
 * stream; Ctrl-C typed is SIGINT for its foreground job (the line
 * discipline's doing), a resize is seen by stty; the end of the pty is the
 * end of its output, not an error. */
static void test_pty(void) {
        send_exec_pty(90, "stty size; tty >/dev/null && echo tty; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all; "
                          "ps -o tpgid= -p $$ >/dev/null 2>&1; echo end", 30, 100);
        ok(exited_with(90, 0, NULL) && strstr(results[90].out, "30 100\r\n") && strstr(results[90].out, "tty\r\nall\r\n") &&
           strspn(results[90].pieces, "M") == strlen(results[90].pieces),
           "pty: stty size says 30 100, stdin/stdout/stderr are the terminal, one stream ('%s')",
           results[90].out ? results[90].out : "");

        /* "ready" comes from the sh that then becomes the sleep: a Ctrl-C from then on ends it. */
        send_exec_pty(91, "trap 'echo parent-lives' INT; sh -c 'echo ready; exec sleep 100'; echo after-sleep; read x; "
                          "echo got-$x; stty size", 24, 80);
        if (wait_output(91, "ready"))
                send_stdin(91, "\003", 1, false);
        ok(wait_output(91, "after-sleep"), "pty: Ctrl-C (byte 3) interrupts the foreground sleep, the shell goes on");
        send_resize(91, 50, 132);
        send_stdin(91, "line\r", 5, false);
        ok(exited_with(91, 0, NULL) && strstr(results[91].out, "got-line") && strstr(results[91].out, "50 132"),
           "pty: keys are read as a line, a resize is what stty size then says ('%s')",
           results[91].out ? results[91].out : "");
}

static void test_eof(void) {
        int bg, pidfd, status;

        send_exec(70, "sleep 100 & echo $!; wait");
        if (!wait_output(70, "\n")) {
                ok(false, "background sleep reported its pid");
                return;
        }
        bg = first_pid(70);
        pidfd = (int) syscall(SYS_pidfd_open, bg, 0);
        ok(protocol_violations == 0, "no output frame after EXITED, no oversized frame, no stray frame");
        sock = safe_close(sock);
        status = wait_worker(worker_pid);
        ok(status == 0, "EOF on fd 3: worker exits 0 (status %d)", status);
        ok(pidfd >= 0 && pid_gone(pidfd), "EOF on fd 3: running sleep %d is killed", bg);
        if (pidfd >= 0)
                close(pidfd);
}

static void test_malformed(void) {
        static const char garbage[] = "definitely not a frame";
        Sbx__WorkerReady ready = SBX__WORKER_READY__INIT;
        Sbx__Msg msg = SBX__MSG__INIT, *m;
        int status, s;
        pid_t pid;

        pid = spawn_worker(&s);
        m = recv_frame(s, timeout_ms);
        if (m)
                sbx__msg__free_unpacked(m, NULL);
        (void) send(s, garbage, sizeof(garbage), MSG_NOSIGNAL);
        status = wait_worker(pid);
        ok(status == 1, "garbage frame: worker exits 1 (status %d)", status);
        close(s);

        pid = spawn_worker(&s);
        m = recv_frame(s, timeout_ms);
        if (m)
                sbx__msg__free_unpacked(m, NULL);
        msg.type = SBX__MSG_TYPE__MSG_WORKER_READY;
        msg.body_case = SBX__MSG__BODY_WORKER_READY;
        msg.worker_ready = &ready;
        (void) wire_send(s, &msg, 0, NULL, 0);
        status = wait_worker(pid);
        ok(status == 1, "well-formed frame of a type the worker does not take: exits 1 (status %d)", status);
        close(s);

        pid = spawn_worker(&s);
        m = recv_frame(s, timeout_ms);
        if (m)
                sbx__msg__free_unpacked(m, NULL);
        {
                int main_sock = sock;

                sock = s;
                send_exec_pty(1, "true", 0, 80);
                sock = main_sock;
        }
        status = wait_worker(pid);
        ok(status == 1, "an exec on a pty of 0 rows is malformed: exits 1 (status %d)", status);
        close(s);
}

int main(int argc, char *argv[]) {
        const char *w = getenv("WORKER_WRAPPER");

        if (argc != 2) {
                fprintf(stderr, "Usage: %s PATH-TO-SBX-WORKER\n", argv[0]);
                return 2;
        }
        worker_path = argv[1];
        if (w && *w) {
                wrapper = strdup(w);
                wrapper_words = strdup(w);
                for (char *t = strtok(wrapper_words, " "); t && wrapper_n < ELEMENTSOF(wrapper_argv); t = strtok(NULL, " "))
                        wrapper_argv[wrapper_n++] = t;
                timeout_ms *= 6;
        }
        signal(SIGPIPE, SIG_IGN);

        worker_pid = spawn_worker(&sock);
        test_ready();
        test_basics();
        test_stdin();
        test_signals();
        test_background();
        test_exec_failures();
        test_env();
        test_concurrent();
        test_too_many();
        test_flood();
        test_streams();
        test_pty();
        test_eof();
        test_malformed();

        printf("1..%u\n", tests);
        for (uint32_t i = 0; i < MAX_IDS; i++)
                free(results[i].out);
        free(wrapper);
        free(wrapper_words);
        return failures ? 1 : 0;
}
