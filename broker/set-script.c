/* The script tool set (shared/seeds/001): sandbox_script runs one command
 * in a fresh sandbox of an image and returns its output; sandbox_status,
 * sandbox_wait and sandbox_cancel follow a background one. sbxd's jobs
 * (supervisor/core/job.h) do the work. The names, arguments, defaults,
 * annotations, result fields, the text payload and the error wordings are
 * the seed's, with script_allowed_paths (sbxd.conf) in place of its
 * DEMESNE_ALLOWED_PATHS.
 *
 * Host inputs: this broker runs as the calling user; it resolves each path
 * of files and directories and opens it itself (files O_RDONLY, directories
 * O_RDONLY|O_DIRECTORY), so a path the user could not open never reaches
 * sbxd, and sends the descriptors; sbxd checks them against the roots and
 * mounts from them. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allowlist.h"
#include "sbx-limits.h"
#include "tool-schemas.h"
#include "tool-set.h"

_Static_assert(SBX_SCRIPT_WAIT_DEFAULT_S == 1800 && SBX_SCRIPT_WAIT_MAX_S == 172800, "sandbox_wait schema");
_Static_assert(SBX_SCRIPT_STDERR_TAIL == 16384 && SBX_SCRIPT_RUNTIME_MAX_S == 48 * 3600, "descriptions");
_Static_assert(SBX_SCRIPT_INPUTS_MAX == 16, "descriptions");

/* ---- schemas -------------------------------------------------------------------- */

#define OBJ(props, required) \
        "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "], \"additionalProperties\": false}"
#define P_JOB "\"job_id\": {\"type\": \"string\", \"description\": \"The job_id sandbox_script returned.\"}"
#define INPUTS_DOC(kind) \
        "Host " kind " paths to mount read-only into /in/<basename>. Each path must be absolute and inside " \
        "script_allowed_paths (sbxd.conf); 16 files and directories together at most."

static const char script_input[] = OBJ(
        "\"command\": {\"type\": \"string\", \"description\": \"Shell command to run inside the sandbox. Executed "
        "with /bin/sh -c. Working directory is /out.\"}, "
        "\"image\": {\"type\": \"string\", \"default\": \"anaconda\", \"description\": \"Container image. One of: "
        "node, python, go, anaconda (default), browser, media, twine, webgamedev (sbx-images(7); built lazily on "
        "first use).\"}, "
        "\"egress\": {\"type\": \"string\", \"default\": \"package-managers\", \"description\": \"Outbound network "
        "policy: none, package-managers or open. package-managers allows npm, PyPI, and conda registries; none "
        "denies all egress.\"}, "
        "\"files\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"" INPUTS_DOC("file") "\"}, "
        "\"directories\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \""
        INPUTS_DOC("directory") "\"}, "
        "\"background\": {\"type\": \"boolean\", \"default\": false, \"description\": \"When true, returns "
        "immediately and automatically attempts one advisory terminal MCP logging notification. Client "
        "display/wake is not guaranteed; poll with sandbox_status / sandbox_wait, cancel with sandbox_cancel.\"}",
        "\"command\"");
static const char job_input[] = OBJ(P_JOB, "\"job_id\"");
static const char wait_input[] = OBJ(
        P_JOB ", \"timeout_seconds\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 172800, \"default\": 1800, "
        "\"description\": \"Seconds to wait for the end at most (30 minutes by default, up to 48 hours); then "
        "status is still running.\"}",
        "\"job_id\"");

#define O_STRING(n, d) "\"" n "\": {\"type\": \"string\", \"description\": \"" d "\"}"
#define OUT(props, required) "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "]}"
#define O_STATUS \
        "\"status\": {\"type\": \"string\", \"enum\": [\"running\", \"exited\", \"cancelled\", \"timed_out\", " \
        "\"supervisor_lost\"]}"
#define O_EXIT "\"exit_code\": {\"type\": [\"integer\", \"null\"], \"description\": \"Exit status (128 + N for " \
        "signal N); null while it runs or when it was lost.\"}"

static const char script_output[] = OUT(
        "\"exit_code\": {\"type\": \"integer\"}, "
        O_STRING("output_dir", "Host directory of /out, kept after the sandbox is gone.") ", "
        O_STRING("job_id", "The job (a UUID).") ", "
        O_STRING("stdout", "stdout, bounded: its head and tail around a cut marker when longer.") ", "
        O_STRING("stderr", "The last 16 KiB of stderr.") ", " O_STATUS ", " EGRESS_AUDIT_PROPERTY,
        "\"job_id\"");
static const char job_output[] = OUT(
        O_STRING("job_id", "The job.") ", " O_STATUS ", " O_EXIT ", "
        O_STRING("output_dir", "Host directory of /out.") ", "
        O_STRING("stdout", "Once ended: stdout, bounded as sandbox_script's.") ", "
        O_STRING("stderr", "Once ended: the last 16 KiB of stderr.") ", " EGRESS_AUDIT_PROPERTY,
        "\"job_id\", \"status\", \"exit_code\", \"output_dir\"");

static const char annotations_script[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": false, \"idempotentHint\": false, \"openWorldHint\": true}";
static const char annotations_look[] =
        "{\"readOnlyHint\": true, \"destructiveHint\": false, \"idempotentHint\": true, \"openWorldHint\": false}";
static const char annotations_cancel[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": true, \"openWorldHint\": false}";

/* ---- prepare -------------------------------------------------------------------- */

/* *ret_error in the seed's words (no "invalid arguments:" prefix); -EINVAL. */
_printf_(2, 3) static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(ret_error, fmt, ap);
        va_end(ap);
        return r < 0 ? -ENOMEM : -EINVAL;
}

/* The last component of path (trailing slashes ignored) into name. */
static void base_name(const char *path, char name[static NAME_MAX + 1]) {
        size_t n = strlen(path), start;

        while (n > 1 && path[n - 1] == '/')
                n--;
        start = n;
        while (start > 0 && path[start - 1] != '/')
                start--;
        snprintf(name, NAME_MAX + 1, "%.*s", (int) MIN(n - start, (size_t) NAME_MAX), path + start);
}

/* One host input, resolved and opened as the caller: its fd and its entry. */
static int open_input(const char *path, bool directory, Sbx__JobInput *in, char *resolved, char *name, int *ret_fd,
                      char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (!path[0])
                return fail(ret_error, "mount path is empty");
        if (path[0] != '/')
                return fail(ret_error, "mount path must be absolute: %s", path);
        if (!realpath(path, resolved))
                return fail(ret_error, "resolve mount path %s: %s", path, strerror(errno));
        fd = open(resolved, directory ? O_RDONLY | O_DIRECTORY | O_CLOEXEC
                                      : O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno == ENOTDIR)
                return fail(ret_error, "%s is not a directory", path);
        if (fd < 0)
                return fail(ret_error, "open mount path %s: %s", path, strerror(errno));
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!directory && !S_ISREG(st.st_mode))
                return fail(ret_error, "%s is not a regular file", path);
        base_name(resolved, name);
        sbx__job_input__init(in);
        in->name = name;
        in->path = (char *) path;
        in->directory = directory;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* What the heap of a sandbox_script request holds. */
typedef struct ScriptHeap {
        Sbx__JobInput inputs[SBX_SCRIPT_INPUTS_MAX];
        Sbx__JobInput *ptrs[SBX_SCRIPT_INPUTS_MAX];
        char resolved[SBX_SCRIPT_INPUTS_MAX][PATH_MAX];
        char names[SBX_SCRIPT_INPUTS_MAX][NAME_MAX + 1];
} ScriptHeap;

/* files, then directories: each opened, their basenames distinct. */
static int prepare_inputs(json_t *args, ToolRequest *req, Sbx__JobStart *m, char **ret_error) {
        json_t *files = json_object_get(args, "files"), *dirs = json_object_get(args, "directories");
        size_t n = json_array_size(files) + json_array_size(dirs);
        ScriptHeap *h;

        if (n == 0)
                return 0;
        if (n > SBX_SCRIPT_INPUTS_MAX)
                return tool_arg_invalid(ret_error, "files and directories: %zu paths, more than %u; put them in "
                                        "fewer directories", n, SBX_SCRIPT_INPUTS_MAX);
        h = req->heap = calloc(1, sizeof(ScriptHeap));
        if (!h)
                return -ENOMEM;
        m->inputs = h->ptrs;
        for (size_t i = 0; i < n; i++) {
                bool dir = i >= json_array_size(files);
                const char *path = json_string_value(json_array_get(dir ? dirs : files, dir ? i - json_array_size(files) : i));
                int fd = -EBADF, r;

                r = open_input(path, dir, &h->inputs[i], h->resolved[i], h->names[i], &fd, ret_error);
                if (r < 0)
                        return r;
                if (i == 0)
                        req->fd = fd;
                else
                        req->more_fds[req->n_more_fds++] = fd;
                for (size_t k = 0; k < i; k++)
                        if (strcmp(h->names[k], h->names[i]) == 0)
                                return fail(ret_error, "mount basename \"%s\" would collide: %s and %s", h->names[i],
                                            h->inputs[k].path, path);
                h->ptrs[m->n_inputs++] = &h->inputs[i];
        }
        return 0;
}

static int prepare_script(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__JobStart *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_JOB_START, &sbx__job_start__descriptor);
        const char *image = json_string_value(json_object_get(args, "image")) ?: SCRIPT_IMAGE_DEFAULT;
        const char *egress = json_string_value(json_object_get(args, "egress")) ?: SCRIPT_EGRESS_DEFAULT;
        char err[256];
        int r;

        r = tool_arg_string(args, "command", 1, SBX_CMD_MAX, (const char **) &m->command, NULL, ret_error);
        if (r < 0)
                return r;
        if (script_check_args(image, egress, err, sizeof(err)) < 0)
                return (*ret_error = strdup(err)) ? -EINVAL : -ENOMEM;
        m->image = (char *) image;
        m->egress = (char *) egress;
        m->background = json_is_true(json_object_get(args, "background"));
        return prepare_inputs(args, req, m, ret_error);
}

TOOL_PREPARE_STRINGS(prepare_status, sbx__job_ref, JOB_STATUS, { "job_id", "job_id", TOOL_ARG_ID })
TOOL_PREPARE_STRINGS(prepare_cancel, sbx__job_ref, JOB_CANCEL, { "job_id", "job_id", TOOL_ARG_ID })

static int prepare_wait(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__JobWait *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_JOB_WAIT, &sbx__job_wait__descriptor);
        uint64_t timeout = SBX_SCRIPT_WAIT_DEFAULT_S;
        const char *id;
        int r = tool_arg_id(args, "job_id", &id, ret_error);

        m->job_id = (char *) id;
        (void) tool_arg_int(args, "timeout_seconds", &timeout);
        m->timeout_seconds = (uint32_t) timeout;
        return r;
}

/* ---- results -------------------------------------------------------------------- */

static json_t *bytes_text(ProtobufCBinaryData b) {
        return msg_json_string((const char *) b.data, b.len, TOOL_TEXT);
}

/* The job's egress audit into *ret (its policy is not none), or *ret freed. */
static int add_audit(const Sbx__JobInfo *o, json_t **ret) {
        if (*ret && o->audit &&
            json_object_set_new(*ret, "egress", msg_json_object(&tool_egress_audit_map, o->audit, TOOL_TEXT)) < 0) {
                json_decref(*ret);
                *ret = NULL;
        }
        return *ret ? 0 : -ENOMEM;
}

static int render_script(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__JobInfo *o = reply->job;

        if (reply->body_case != SBX__REPLY__BODY_JOB || !o)
                return -EBADMSG;
        if (!o->ended)
                *ret = json_pack("{s:s, s:s}", "job_id", o->job_id, "status", o->status);
        else
                *ret = json_pack("{s:I, s:s, s:s, s:o, s:o}", "exit_code", (json_int_t) o->exit_code, "output_dir",
                                 o->output_dir, "job_id", o->job_id, "stdout", bytes_text(o->stdout), "stderr",
                                 bytes_text(o->stderr));
        return o->ended ? add_audit(o, ret) : *ret ? 0 : -ENOMEM;
}

static int render_job(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__JobInfo *o = reply->job;

        if (reply->body_case != SBX__REPLY__BODY_JOB || !o)
                return -EBADMSG;
        *ret = json_pack("{s:s, s:s, s:o, s:s}", "job_id", o->job_id, "status", o->status, "exit_code",
                         o->ended && o->has_exit_code ? json_integer(o->exit_code) : json_null(), "output_dir",
                         o->output_dir);
        if (*ret && o->ended && (json_object_set_new(*ret, "stdout", bytes_text(o->stdout)) < 0 ||
                                 json_object_set_new(*ret, "stderr", bytes_text(o->stderr)) < 0)) {
                json_decref(*ret);
                *ret = NULL;
        }
        return add_audit(o, ret);
}

/* The seed's payload (format.go): a newline after stdout only when it has none. */
static void put_streams(FILE *f, const json_t *sc) {
        const char *out = tool_sc_str(sc, "stdout");
        size_t n = strlen(out);

        fprintf(f, "---\n%s%s---stderr---\n%s\n", out, n > 0 && out[n - 1] == '\n' ? "" : "\n",
                tool_sc_str(sc, "stderr"));
}

static void text_script(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        if (!json_object_get(sc, "exit_code")) {
                fprintf(f, "job_id: %s\nstatus: %s\n", tool_sc_str(sc, "job_id"), tool_sc_str(sc, "status"));
                return;
        }
        fprintf(f, "exit_code: %lld\noutput_dir: %s\njob_id: %s\n",
                (long long) json_integer_value(json_object_get(sc, "exit_code")), tool_sc_str(sc, "output_dir"),
                tool_sc_str(sc, "job_id"));
        put_streams(f, sc);
}

static void text_job(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const json_t *code = json_object_get(sc, "exit_code");

        fprintf(f, "job_id: %s\nstatus: %s\n", tool_sc_str(sc, "job_id"), tool_sc_str(sc, "status"));
        if (json_is_integer(code))
                fprintf(f, "exit_code: %lld\n", (long long) json_integer_value(code));
        fprintf(f, "output_dir: %s\n", tool_sc_str(sc, "output_dir"));
        if (json_object_get(sc, "stdout"))
                put_streams(f, sc);
}

/* ---- the live descriptions of files and directories ------------------------------ */

int script_set_roots(Tools *t, char **roots, size_t n, bool known) {
        static const char *const params[2][2] = { { "files", "file" }, { "directories", "directory" } };
        const Tool *tool = tools_find(t, "sandbox_script", strlen("sandbox_script"));
        _cleanup_free_ char *list = NULL;
        size_t len = 0;
        FILE *f;

        if (!tool)
                return 0;
        f = open_memstream(&list, &len);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s", i ? ", " : "", roots[i]);
        if (fclose(f) != 0)
                return -ENOMEM;
        for (size_t i = 0; i < 2; i++) {
                json_t *p = json_object_get(json_object_get(tool->input_schema, "properties"), params[i][0]);
                _cleanup_free_ char *text = NULL;
                int r;

                if (!known)
                        r = asprintf(&text, "Host %s paths to mount read-only into /in/<basename>; absolute, inside "
                                     "script_allowed_paths (sbxd.conf), which sbxd did not tell at start-up.",
                                     params[i][1]);
                else if (n == 0)
                        r = asprintf(&text, "Host %s paths to mount read-only into /in/<basename>. Warning: no host "
                                     "inputs are configured (script_allowed_paths in sbxd.conf is empty), so every "
                                     "path is refused.", params[i][1]);
                else
                        r = asprintf(&text, "Host %s paths to mount read-only into /in/<basename>. Each path must be "
                                     "absolute and inside one of these roots (script_allowed_paths): %s. 16 files "
                                     "and directories together at most.", params[i][1], list);
                if (r < 0)
                        return -ENOMEM;
                if (json_object_set_new(p, "description", json_string(text)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* ---- the table ------------------------------------------------------------------ */

#define JOB_NOTE " A job is its user's own: another user's job_id is not found."

static const ToolDef script_tools[] = {
        {
                .name = "sandbox_script",
                .title = "Run a script in a fresh sandbox",
                .description =
                        "Run a single shell command in a fresh sandbox and return its stdout and stderr. The "
                        "sandbox (image, default anaconda) is made for this call and destroyed afterwards; /out is "
                        "kept on the host as output_dir (readable only by you, kept for script_output_ttl, 7 days "
                        "by default) with stdout.log and stderr.log, the complete streams. The result's stderr is "
                        "the last 16 KiB; stdout is bounded by script_stdout_max (64 KiB by default): when longer, "
                        "its head and tail around a line \\\"[... N bytes cut ...]\\\". files and directories are "
                        "mounted read-only at /in/<basename>. Synchronous commands may run to completion (subject "
                        "to the explicit 48h runtime limit) and remain cancellable. Pass background: true for "
                        "concurrent work, detachment, status/progress polling, or deliberate job control. The "
                        "response is {job_id, status: \\\"running\\\"}; inspect it with sandbox_status or block "
                        "(30-minute default, up to 48 hours) with sandbox_wait, and cancel its descendant subtree "
                        "with sandbox_cancel." JOB_NOTE,
                .input_schema = script_input,
                .output_schema = script_output,
                .annotations = annotations_script,
                .prepare = prepare_script,
                .render = render_script,
                .text = text_script,
        },
        {
                .name = "sandbox_status",
                .title = "Show a sandbox_script job",
                .description =
                        "The job's status (running, exited, cancelled, timed_out, supervisor_lost), exit_code and "
                        "output_dir, and once it ended the stdout and stderr tails." JOB_NOTE,
                .input_schema = job_input,
                .output_schema = job_output,
                .annotations = annotations_look,
                .prepare = prepare_status,
                .render = render_job,
                .text = text_job,
        },
        {
                .name = "sandbox_wait",
                .title = "Wait for a sandbox_script job",
                .description =
                        "Wait until the job ends, at most timeout_seconds (default 1800, at most 172800), and "
                        "answer as sandbox_status does; still running when the time ran out." JOB_NOTE,
                .input_schema = wait_input,
                .output_schema = job_output,
                .annotations = annotations_look,
                .prepare = prepare_wait,
                .render = render_job,
                .text = text_job,
        },
        {
                .name = "sandbox_cancel",
                .title = "Cancel a sandbox_script job",
                .description =
                        "Kill the job's whole process tree (its sandbox goes), then report it as sandbox_status "
                        "does: cancelled, or how it had ended before." JOB_NOTE,
                .input_schema = job_input,
                .output_schema = job_output,
                .annotations = annotations_cancel,
                .prepare = prepare_cancel,
                .render = render_job,
                .text = text_job,
        },
};

TOOL_SET_DEFINE(script);
