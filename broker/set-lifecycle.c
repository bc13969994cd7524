/* The lifecycle tool set (shared/seeds/002): agents create, use and delete
 * their own sandboxes ("claims", supervisor/core/claim.h). The tools, their
 * arguments, defaults, bounds and result fields are the seed's; what sbx
 * adds is marked in the descriptions. Claims are owned by this broker's MCP
 * session identity, made at initialize (broker.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "fd-util.h"
#include "memfd-util.h"
#include "sbx-limits.h"
#include "tool-set.h"
#include "utf8.h"

_Static_assert(SBX_CLAIM_FILE_MAX == 64ull << 20, "upload_file/download_file descriptions say 64 MiB");
_Static_assert(SBX_CLAIM_OUTPUT_MAX == 300000 && SBX_CLAIM_OUTPUT_MIN == 128 && SBX_CLAIM_OUTPUT_DEFAULT == 30000,
               "execute_command schema");
_Static_assert(SBX_CLAIM_EXEC_TIMEOUT_MAX_S == 600 && SBX_CLAIM_LIST_MAX == 10000, "schemas");

#define BASE64_CHUNK (3u * 64u * 1024u)         /* decoded bytes per write into the upload memfd */

/* ---- schemas -------------------------------------------------------------------- */

#define OBJ(props, required) \
        "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "], \"additionalProperties\": false}"
#define P_STRING(n, d) "\"" n "\": {\"type\": \"string\", \"description\": \"" d "\"}"
#define P_STRING_DEFAULT(n, d, v) "\"" n "\": {\"type\": \"string\", \"description\": \"" d "\", \"default\": \"" v "\"}"
#define P_INT(n, d, lo, hi, v) \
        "\"" n "\": {\"type\": \"integer\", \"description\": \"" d "\", \"minimum\": " lo ", \"maximum\": " hi ", \"default\": " v "}"
#define P_BOOL(n, d) "\"" n "\": {\"type\": \"boolean\", \"description\": \"" d "\", \"default\": false}"
#define P_MAP(n, d) "\"" n "\": {\"type\": \"object\", \"description\": \"" d "\", \"additionalProperties\": {\"type\": \"string\"}}"
#define P_CLAIM \
        P_STRING("sandbox_claim_name", "Name of the sandbox claim, as create_sandbox returned it.") ", " \
        P_STRING_DEFAULT("namespace", "Namespace of the claim.", "default")
#define P_PATH(d) P_STRING("path", d " Relative paths are relative to /workspace; absolute paths name any place of the sandbox.")
#define P_TIMEOUT P_INT("timeout", "Timeout in seconds.", "1", "600", "60")

static const char create_input[] = OBJ(
        P_STRING_DEFAULT("warmpool", "Template (warm pool) to create the sandbox from; sbxctl template list names them.", "default") ", "
        P_STRING_DEFAULT("namespace", "Namespace to create the claim in.", "default") ", "
        P_INT("sandbox_ready_timeout", "Seconds to wait for the sandbox to be ready.", "1", "3600", "180") ", "
        P_MAP("labels", "Labels stored with the claim (sbxctl claim list --label k=v).") ", "
        "\"shutdown_after_seconds\": {\"type\": [\"integer\", \"null\"], \"minimum\": 1, \"default\": 300,"
        " \"description\": \"Delete the sandbox after this many seconds without a tool call naming it; null disables.\"}, "
        P_MAP("pod_labels", "Stored with the claim (there are no pods here).") ", "
        P_MAP("pod_annotations", "Stored with the claim (there are no pods here)."),
        "");
static const char claim_input[] = OBJ(P_CLAIM, "\"sandbox_claim_name\"");
static const char execute_input[] = OBJ(
        P_CLAIM ", "
        P_STRING("command", "Shell command, run as /bin/sh -c command in /workspace.") ", "
        P_TIMEOUT ", "
        P_INT("max_output_chars", "Characters kept of stdout and of stderr each.", "128", "300000", "30000"),
        "\"sandbox_claim_name\", \"command\"");
static const char upload_input[] = OBJ(
        P_CLAIM ", " P_PATH("File to write.") ", "
        P_STRING("content", "File content: text, or base64 when binary is true.") ", "
        P_BOOL("binary", "content is base64.") ", " P_TIMEOUT,
        "\"sandbox_claim_name\", \"path\", \"content\"");
static const char download_input[] = OBJ(
        P_CLAIM ", " P_PATH("File to read.") ", " P_BOOL("binary", "Return the content as base64.") ", " P_TIMEOUT,
        "\"sandbox_claim_name\", \"path\"");
static const char list_input[] = OBJ(
        P_CLAIM ", " P_PATH("Directory to list.") ", " P_TIMEOUT ", "
        P_INT("max_entries", "Entries returned at most (the first by name).", "1", "10000", "1000"),
        "\"sandbox_claim_name\", \"path\"");
static const char exists_input[] = OBJ(P_CLAIM ", " P_PATH("Path to look for.") ", " P_TIMEOUT,
                                       "\"sandbox_claim_name\", \"path\"");

#define O_STRING(n, d) "\"" n "\": {\"type\": \"string\", \"description\": \"" d "\"}"
#define O_INT(n, d) "\"" n "\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"" d "\"}"
#define O_BOOL(n, d) "\"" n "\": {\"type\": \"boolean\", \"description\": \"" d "\"}"
#define OUT(props, required) "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "]}"
#define O_CLAIM O_STRING("sandbox_claim_name", "Name of the claim.") ", " O_STRING("namespace", "Its namespace.")

static const char create_output[] = OUT(
        O_CLAIM ", "
        "\"started_from\": {\"type\": \"string\", \"enum\": [\"warm\", \"cold\"], \"description\": \"warm: taken from the template's warm pool; cold: made for this call.\"}, "
        "\"ready_seconds\": {\"type\": \"number\", \"description\": \"Seconds until it was ready.\"}, "
        O_STRING("sandbox_id", "The claim's sandbox, for the runtime set's tools (read_command_lines).") ", "
        O_STRING("template", "The template it was made from.") ", "
        "\"shutdown_after_seconds\": {\"type\": [\"integer\", \"null\"], \"description\": \"Seconds without use before it is deleted; null: never.\"}, "
        "\"expires_unix\": {\"type\": [\"number\", \"null\"], \"description\": \"When it is deleted if it is not used before (seconds since the epoch).\"}, "
        O_STRING("note", "How the claim differs from a Kubernetes one."),
        "\"sandbox_claim_name\", \"namespace\", \"started_from\", \"ready_seconds\"");
static const char delete_output[] = OUT(
        O_CLAIM ", " "\"deleted\": {\"type\": \"boolean\", \"enum\": [true]}", "\"sandbox_claim_name\", \"deleted\"");
static const char execute_output[] = OUT(
        "\"exit_code\": {\"type\": [\"integer\", \"null\"], \"description\": \"Exit status; null on a timeout or a signal.\"}, "
        O_STRING("stdout", "Standard output, cut to max_output_chars (head and tail around a marker).") ", "
        O_STRING("stderr", "Standard error, cut the same way.") ", "
        O_INT("stdout_total_chars", "Characters the command wrote to stdout.") ", "
        O_INT("stderr_total_chars", "Characters the command wrote to stderr.") ", "
        O_BOOL("stdout_truncated", "stdout was cut.") ", " O_BOOL("stderr_truncated", "stderr was cut.") ", "
        O_BOOL("timed_out", "The command ran out of time and its process group was killed.") ", "
        O_STRING("command_session_id", "Its transcript, which read_command_lines (runtime set) pages in full.") ", "
        O_STRING("sandbox_id", "The claim's sandbox, for read_command_lines.") ", "
        "\"signal\": {\"type\": [\"integer\", \"null\"], \"description\": \"The signal that ended it, or null.\"}, "
        EGRESS_AUDIT_PROPERTY,
        "\"exit_code\", \"stdout\", \"stderr\", \"stdout_total_chars\", \"stderr_total_chars\", \"stdout_truncated\", "
        "\"stderr_truncated\", \"timed_out\", \"command_session_id\"");
static const char upload_output[] = OUT(O_STRING("path", "Absolute path written in the sandbox.") ", "
                                        O_INT("bytes_written", "Bytes written."), "\"path\", \"bytes_written\"");
static const char download_output[] = OUT(
        O_STRING("path", "Absolute path read in the sandbox.") ", " O_STRING("content", "Text, or base64 if binary.") ", "
        O_BOOL("binary", "content is base64.") ", " O_INT("bytes_read", "Bytes of the file."),
        "\"path\", \"content\", \"binary\", \"bytes_read\"");
static const char list_output[] = OUT(
        O_STRING("path", "Absolute path of the directory.") ", "
        "\"entries\": {\"type\": \"array\", \"description\": \"Sorted by name.\", \"items\": {\"type\": \"object\", \"properties\": {"
        O_STRING("name", "Entry name.") ", " O_INT("size", "Bytes (regular files and symlinks).") ", "
        "\"type\": {\"type\": \"string\", \"enum\": [\"file\", \"directory\", \"symlink\", \"other\"]}, "
        "\"mod_time\": {\"type\": \"number\", \"description\": \"Modification time, seconds since the epoch.\"}},"
        " \"required\": [\"name\", \"size\", \"type\", \"mod_time\"]}}, "
        O_INT("total_entries", "Entries in the directory.") ", " O_BOOL("truncated", "More entries than max_entries."),
        "\"entries\", \"total_entries\", \"truncated\"");
static const char exists_output[] = OUT(
        O_BOOL("exists", "Whether the path exists.") ", " O_STRING("path", "Absolute path looked at.") ", "
        "\"type\": {\"type\": [\"string\", \"null\"], \"description\": \"file, directory, symlink or other; null if it does not exist.\"}",
        "\"exists\"");
static const char status_output[] = OUT(
        O_CLAIM ", "
        "\"status\": {\"type\": \"string\", \"enum\": [\"SandboxReady\", \"SandboxNotReady\", \"SandboxNotFound\"]}, "
        O_BOOL("ready", "status is SandboxReady.") ", " O_STRING("message", "Why, in words (for SandboxNotFound: what happened to it).") ", "
        "\"expires_unix\": {\"type\": [\"number\", \"null\"], \"description\": \"When it is deleted if unused (seconds since the epoch).\"}",
        "\"status\", \"ready\", \"message\"");

static const char annotations_delete[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": true, \"openWorldHint\": false}";
static const char annotations_exec[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": false, \"openWorldHint\": false}";

/* ---- prepare -------------------------------------------------------------------- */

/* A body of desc, and the ClaimRef it points to after it in the request's room. */
static void *claim_body(ToolRequest *req, Sbx__MsgType type, const ProtobufCMessageDescriptor *desc, json_t *args,
                        Sbx__ClaimRef **ret_ref) {
        size_t off = (desc->sizeof_message + 15) & ~(size_t) 15;
        void *m = tool_request_body(req, type, desc);
        Sbx__ClaimRef *ref = (Sbx__ClaimRef *) (req->body.bytes + off);

        _Static_assert(sizeof(Sbx__ClaimExec) + 16 + sizeof(Sbx__ClaimRef) <= TOOL_REQUEST_BODY_SIZE, "room");
        sbx__claim_ref__init(ref);
        ref->namespace_ = (char *) tool_arg_str(args, "namespace");
        ref->name = (char *) tool_arg_str(args, "sandbox_claim_name");
        *ret_ref = ref;
        return m;
}

/* The file tools' timeout: the broker's wait for sbxd (broker.c), and the
 * deadline sbxd keeps to (it does not start, or stops, past it). */
static uint64_t file_timeout(json_t *args, ToolRequest *req) {
        struct timespec ts;

        req->timeout_s = SBX_CLAIM_FILE_TIMEOUT_DEFAULT_S;
        (void) tool_arg_int(args, "timeout", &req->timeout_s);
        (void) clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u + req->timeout_s * 1000u;
}

/* Names and paths: what sbxd checks too, said here with the fix. */
static int check_claim_args(json_t *args, char **ret_error) {
        const char *s;
        int r;

        r = tool_arg_string(args, "sandbox_claim_name", 1, SBX_CLAIM_NAME_MAX, &s, NULL, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "namespace", 1, SBX_CLAIM_NAME_MAX, &s, NULL, ret_error);
        if (r >= 0 && json_object_get(args, "path"))
                r = tool_arg_path(args, &s, ret_error);
        return r;
}

static int prepare_claim_ref(json_t *args, ToolRequest *req, Sbx__MsgType type, char **ret_error) {
        Sbx__ClaimRef *ref = tool_request_body(req, type, &sbx__claim_ref__descriptor);
        int r = check_claim_args(args, ret_error);

        ref->namespace_ = (char *) tool_arg_str(args, "namespace");
        ref->name = (char *) tool_arg_str(args, "sandbox_claim_name");
        return r;
}

static int prepare_delete(json_t *args, ToolRequest *req, char **ret_error) {
        return prepare_claim_ref(args, req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_DELETE, ret_error);
}

static int prepare_status(json_t *args, ToolRequest *req, char **ret_error) {
        return prepare_claim_ref(args, req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_STATUS, ret_error);
}

/* labels-like arguments (validated as objects of strings) as Label lists in heap. */
static int labels_of(json_t *args, const char *name, Sbx__Label **labels, Sbx__Label ***ptrs, size_t *n,
                     char **ret_error) {
        json_t *o = json_object_get(args, name), *v;
        const char *k;

        *n = 0;
        if (json_object_size(o) > SBX_CLAIM_LABELS_MAX)
                return tool_arg_invalid(ret_error, "%s: more than %u entries; give fewer", name, SBX_CLAIM_LABELS_MAX);
        json_object_foreach(o, k, v) {
                Sbx__Label *l = &(*labels)[*n];

                sbx__label__init(l);
                l->key = (char *) k;
                l->value = (char *) json_string_value(v);
                (*ptrs)[(*n)++] = l;
        }
        *labels += *n;
        *ptrs += *n;
        return 0;
}

static int prepare_create(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__ClaimCreate *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_CREATE,
                                                &sbx__claim_create__descriptor);
        json_t *shutdown = json_object_get(args, "shutdown_after_seconds");
        size_t total = json_object_size(json_object_get(args, "labels")) +
                       json_object_size(json_object_get(args, "pod_labels")) +
                       json_object_size(json_object_get(args, "pod_annotations"));
        Sbx__Label *labels, **ptrs;
        uint64_t timeout = SBX_CLAIM_READY_TIMEOUT_DEFAULT_S;
        const char *s;
        int r;

        r = tool_arg_string(args, "warmpool", 1, SBX_CLAIM_NAME_MAX, &s, NULL, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "namespace", 1, SBX_CLAIM_NAME_MAX, &s, NULL, ret_error);
        if (r < 0)
                return r;
        m->template_ = (char *) tool_arg_str(args, "warmpool");
        m->namespace_ = (char *) tool_arg_str(args, "namespace");
        (void) tool_arg_int(args, "sandbox_ready_timeout", &timeout);
        m->ready_timeout_seconds = (uint32_t) timeout;
        m->no_expiry = json_is_null(shutdown);
        m->has_shutdown = json_is_integer(shutdown);
        m->shutdown_after_seconds = m->has_shutdown ? (uint32_t) MIN(json_integer_value(shutdown), (json_int_t) UINT32_MAX) : 0;
        req->heap = calloc(total + 1, sizeof(Sbx__Label) + sizeof(Sbx__Label *));
        if (!req->heap)
                return -ENOMEM;
        labels = req->heap;
        ptrs = (Sbx__Label **) (labels + total + 1);
        m->labels = ptrs;
        r = labels_of(args, "labels", &labels, &ptrs, &m->n_labels, ret_error);
        m->pod_labels = ptrs;
        if (r >= 0)
                r = labels_of(args, "pod_labels", &labels, &ptrs, &m->n_pod_labels, ret_error);
        m->pod_annotations = ptrs;
        if (r >= 0)
                r = labels_of(args, "pod_annotations", &labels, &ptrs, &m->n_pod_annotations, ret_error);
        return r;
}

static int prepare_execute(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__ClaimRef *ref;
        Sbx__ClaimExec *m = claim_body(req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_EXEC, &sbx__claim_exec__descriptor, args,
                                       &ref);
        uint64_t timeout = SBX_CLAIM_EXEC_TIMEOUT_DEFAULT_S, max = SBX_CLAIM_OUTPUT_DEFAULT;
        const char *cmd;
        int r;

        m->claim = ref;
        r = check_claim_args(args, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "command", 1, SBX_CMD_MAX, &cmd, NULL, ret_error);
        if (r < 0)
                return r;
        (void) tool_arg_int(args, "timeout", &timeout);
        (void) tool_arg_int(args, "max_output_chars", &max);
        m->cmd = (char *) cmd;
        m->timeout_seconds = (uint32_t) timeout;
        m->max_output_chars = (uint32_t) max;
        return 0;
}

/* base64 text -> a sealed memfd of its bytes, a chunk at a time. */
static int base64_to_memfd(const char *text, size_t len, int *ret_fd, uint64_t *ret_size, char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ uint8_t *buf = NULL;
        int64_t size = base64_decoded_size(text, len);
        size_t in_chunk = BASE64_CHUNK / 3 * 4;

        if (size < 0)
                return tool_arg_invalid(ret_error, "content: not base64 (its length, %zu, is not a multiple of 4); "
                                        "send standard padded base64 without line breaks, or binary false for text", len);
        if ((uint64_t) size > SBX_CLAIM_FILE_MAX)
                return tool_arg_invalid(ret_error, "content: decodes to %lld bytes, more than %llu (64 MiB); upload "
                                        "it in parts and join them with execute_command (cat)", (long long) size,
                                        (unsigned long long) SBX_CLAIM_FILE_MAX);
        fd = memfd_create("sbx-upload", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        buf = malloc(BASE64_CHUNK);
        if (fd < 0 || !buf)
                return fd < 0 ? -errno : -ENOMEM;
        for (size_t off = 0; off < len; off += in_chunk) {
                size_t n = MIN(in_chunk, len - off), at = 0;
                int64_t k = base64_decode(text + off, n, buf, &at);
                int r;

                if (k < 0)
                        return tool_arg_invalid(ret_error, "content: invalid base64 at character %zu; send standard "
                                                "padded base64 (A-Z a-z 0-9 + /, '=' at the end), or binary false "
                                                "for text", off + at);
                r = loop_write(fd, buf, (size_t) k);
                if (r < 0)
                        return r;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0 ||
            lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        *ret_size = (uint64_t) size;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int prepare_upload(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__ClaimRef *ref;
        Sbx__ClaimPut *m = claim_body(req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_PUT, &sbx__claim_put__descriptor, args, &ref);
        json_t *content = json_object_get(args, "content");
        size_t len = json_string_length(content);
        int r;

        m->claim = ref;
        m->path = (char *) tool_arg_str(args, "path");
        m->deadline_unix_ms = file_timeout(args, req);
        r = check_claim_args(args, ret_error);
        if (r < 0)
                return r;
        if (json_is_true(json_object_get(args, "binary")))
                return base64_to_memfd(json_string_value(content), len, &req->fd, &m->content_size, ret_error);
        if (len > SBX_CLAIM_FILE_MAX)
                return tool_arg_invalid(ret_error, "content: %zu bytes, more than %llu (64 MiB); upload it in parts "
                                        "and join them with execute_command (cat)", len,
                                        (unsigned long long) SBX_CLAIM_FILE_MAX);
        r = sealed_memfd_new("sbx-upload", json_string_value(content), len, &req->fd);
        if (r < 0)
                return r;
        m->content_size = len;
        return 0;
}

static int prepare_path(json_t *args, ToolRequest *req, Sbx__MsgType type, char **ret_error) {
        Sbx__ClaimRef *ref;
        Sbx__ClaimPath *m = claim_body(req, type, &sbx__claim_path__descriptor, args, &ref);
        uint64_t max = SBX_CLAIM_LIST_DEFAULT;

        m->claim = ref;
        m->path = (char *) tool_arg_str(args, "path");
        m->deadline_unix_ms = file_timeout(args, req);
        if (type == SBX__MSG_TYPE__MSG_CLIENT_CLAIM_LIST_FILES) {
                (void) tool_arg_int(args, "max_entries", &max);
                m->max_entries = (uint32_t) max;
        }
        return check_claim_args(args, ret_error);
}

static int prepare_download(json_t *args, ToolRequest *req, char **ret_error) {
        return prepare_path(args, req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_GET, ret_error);
}

static int prepare_list(json_t *args, ToolRequest *req, char **ret_error) {
        return prepare_path(args, req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_LIST_FILES, ret_error);
}

static int prepare_exists(json_t *args, ToolRequest *req, char **ret_error) {
        return prepare_path(args, req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_STAT, ret_error);
}

/* ---- results -------------------------------------------------------------------- */

static json_t *text_of(const uint8_t *data, size_t len) {
        return msg_json_string((const char *) data, len, TOOL_TEXT);
}

static json_t *expiry_of(const Sbx__ClaimInfo *c) {
        return c->expires_unix > 0 ? json_real((double) c->expires_unix) : json_null();
}

static int render_create(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__ClaimInfo *c = reply->claim;

        if (reply->body_case != SBX__REPLY__BODY_CLAIM || !c)
                return -EBADMSG;
        *ret = json_pack("{s:s, s:s, s:s, s:f, s:s, s:s, s:o, s:o, s:s}",
                         "sandbox_claim_name", c->name, "namespace", c->namespace_, "started_from", c->started_from,
                         "ready_seconds", c->ready_seconds, "sandbox_id", c->sandbox, "template", c->template_,
                         "shutdown_after_seconds",
                         c->has_shutdown ? json_integer(c->shutdown_after_seconds) : json_null(),
                         "expires_unix", expiry_of(c),
                         "note", "No pod exists here: the claim is a workspace session of its own sandbox on this "
                                 "host; labels, pod_labels and pod_annotations are stored with it.");
        return *ret ? 0 : -ENOMEM;
}

static int render_delete(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY__NOT_SET)
                return -EBADMSG;
        *ret = json_pack("{s:s, s:s, s:b}", "sandbox_claim_name", tool_arg_str(args, "sandbox_claim_name"),
                         "namespace", tool_arg_str(args, "namespace"), "deleted", 1);
        return *ret ? 0 : -ENOMEM;
}

static int render_status(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__ClaimInfo *c = reply->claim;

        if (reply->body_case != SBX__REPLY__BODY_CLAIM || !c)
                return -EBADMSG;
        *ret = json_pack("{s:s, s:s, s:s, s:b, s:o, s:o}", "sandbox_claim_name",
                         tool_arg_str(args, "sandbox_claim_name"), "namespace", tool_arg_str(args, "namespace"),
                         "status", c->status, "ready", c->ready, "message", text_of((const uint8_t *) c->message,
                                                                                   strlen(c->message)),
                         "expires_unix", expiry_of(c));
        return *ret ? 0 : -ENOMEM;
}

static int render_execute(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__ClaimExecReply *e = reply->claim_exec;

        if (reply->body_case != SBX__REPLY__BODY_CLAIM_EXEC || !e)
                return -EBADMSG;
        *ret = json_pack("{s:o, s:o, s:o, s:I, s:I, s:b, s:b, s:b, s:s, s:s, s:o}",
                         "exit_code", e->has_exit_code ? json_integer(e->exit_code) : json_null(),
                         "stdout", text_of(e->stdout.data, e->stdout.len),
                         "stderr", text_of(e->stderr.data, e->stderr.len),
                         "stdout_total_chars", (json_int_t) e->stdout_total_chars,
                         "stderr_total_chars", (json_int_t) e->stderr_total_chars,
                         "stdout_truncated", e->stdout_truncated, "stderr_truncated", e->stderr_truncated,
                         "timed_out", e->timed_out, "command_session_id", e->command_session,
                         "sandbox_id", e->sandbox,
                         "signal", e->signal ? json_integer(e->signal) : json_null());
        if (*ret && e->egress &&
            json_object_set_new(*ret, "egress", msg_json_object(&tool_egress_audit_map, e->egress, TOOL_TEXT)) < 0) {
                json_decref(*ret);
                *ret = NULL;
        }
        return *ret ? 0 : -ENOMEM;
}

static void text_execute(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const json_t *code = json_object_get(sc, "exit_code");

        if (json_is_true(json_object_get(sc, "timed_out")))
                fprintf(f, "timed out after %llu s (process group killed)", tool_sc_uint(args, "timeout"));
        else if (json_is_integer(code))
                fprintf(f, "exit code %lld", (long long) json_integer_value(code));
        else
                fprintf(f, "ended by signal %llu", tool_sc_uint(sc, "signal"));
        fprintf(f, "; transcript %s\n", tool_sc_str(sc, "command_session_id"));
        for (int i = 0; i < 2; i++) {
                const char *name = i ? "stderr" : "stdout";
                char key[32];

                snprintf(key, sizeof(key), "%s_total_chars", name);
                fprintf(f, "--- %s (%llu characters%s) ---\n%s\n", name, tool_sc_uint(sc, key),
                        json_is_true(json_object_get(sc, i ? "stderr_truncated" : "stdout_truncated")) ? ", cut" : "",
                        tool_sc_str(sc, name));
        }
}

static int render_upload(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__ClaimFileReply *o = reply->claim_file;

        if (reply->body_case != SBX__REPLY__BODY_CLAIM_FILE || !o)
                return -EBADMSG;
        *ret = json_pack("{s:s, s:I}", "path", o->path, "bytes_written", (json_int_t) o->bytes);
        return *ret ? 0 : -ENOMEM;
}

static int download_object(const Sbx__ClaimFileReply *o, json_t *content, bool binary, json_t **ret) {
        *ret = json_pack("{s:s, s:o, s:b, s:I}", "path", o->path, "content", content, "binary", binary, "bytes_read",
                         (json_int_t) o->bytes);
        return *ret ? 0 : -ENOMEM;
}

/* The memfd's bytes as text (valid UTF-8) or base64. Binary content with a
 * splice stays in the memfd: it is encoded as the result is written. */
static int render_download(const Sbx__Reply *reply, const json_t *args, int fd, JsonSplice *splice, json_t **ret) {
        const Sbx__ClaimFileReply *o = reply->claim_file;
        bool binary = json_is_true(json_object_get(args, "binary"));
        _cleanup_free_ char *out = NULL;
        uint8_t *map;
        struct stat st;
        size_t n;
        int r;

        if (reply->body_case != SBX__REPLY__BODY_CLAIM_FILE || !o)
                return -EBADMSG;
        if (fstat(fd, &st) < 0 || (uint64_t) st.st_size != o->bytes || o->bytes > SBX_CLAIM_FILE_MAX)
                return -EBADMSG;
        if (binary && splice) {
                json_t *at = json_string("");

                if (!at)
                        return -ENOMEM;
                r = download_object(o, at, binary, ret);
                if (r >= 0)
                        *splice = (JsonSplice) { .at = at, .fd = fd, .size = o->bytes };
                return r;
        }
        map = o->bytes ? mmap(NULL, o->bytes, PROT_READ, MAP_PRIVATE, fd, 0) : (uint8_t *) "";
        if (map == MAP_FAILED)
                return -errno;
        if (!binary && utf8_valid_prefix(map, o->bytes) != o->bytes) {
                if (o->bytes)
                        munmap(map, o->bytes);
                return -EILSEQ;
        }
        n = binary ? 4 * ((o->bytes + 2) / 3) : o->bytes;
        out = malloc(n + 1);
        if (out) {
                if (binary)
                        (void) base64_encode(map, o->bytes, out);
                else
                        memcpy(out, map, n);
        }
        if (o->bytes)
                munmap(map, o->bytes);
        if (!out)
                return -ENOMEM;
        return download_object(o, json_stringn_nocheck(out, n), binary, ret);
}

/* Text as it is, up to SBX_CLAIM_TEXT_BLOCK_MAX bytes; base64 only in structuredContent. */
static void text_download(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        unsigned long long n = tool_sc_uint(sc, "bytes_read");

        if (json_is_true(json_object_get(sc, "binary")) || n > SBX_CLAIM_TEXT_BLOCK_MAX) {
                fprintf(f, "%s: %llu bytes; the content (%s) is in structuredContent.content", tool_sc_str(sc, "path"),
                        n, json_is_true(json_object_get(sc, "binary")) ? "base64" : "text");
                return;
        }
        fprintf(f, "%s: %llu bytes\n%s", tool_sc_str(sc, "path"), n, tool_sc_str(sc, "content"));
}

static int render_list(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__ClaimListFilesReply *l = reply->claim_list_files;
        _cleanup_json_ json_t *entries = json_array();

        if (reply->body_case != SBX__REPLY__BODY_CLAIM_LIST_FILES || !l)
                return -EBADMSG;
        if (!entries)
                return -ENOMEM;
        for (size_t i = 0; i < l->n_entries; i++) {
                const Sbx__FileEntry *e = l->entries[i];
                if (json_array_append_new(entries, json_pack("{s:o, s:I, s:s, s:f}", "name",
                                                             text_of((const uint8_t *) e->name, strlen(e->name)),
                                                             "size", (json_int_t) e->size, "type", e->type,
                                                             "mod_time", (double) e->mod_time_usec / 1e6)) < 0)
                        return -ENOMEM;
        }
        *ret = json_pack("{s:s, s:O, s:I, s:b}", "path", l->path, "entries", entries, "total_entries",
                         (json_int_t) l->total_entries, "truncated", l->truncated);
        return *ret ? 0 : -ENOMEM;
}

static void text_list(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const json_t *entries = json_object_get(sc, "entries");
        size_t i;
        json_t *e;

        fprintf(f, "%s: %llu entr%s%s\n", tool_sc_str(sc, "path"), tool_sc_uint(sc, "total_entries"),
                tool_sc_uint(sc, "total_entries") == 1 ? "y" : "ies",
                json_is_true(json_object_get(sc, "truncated")) ? " (list cut at max_entries)" : "");
        json_array_foreach(entries, i, e)
                fprintf(f, "%-9s %12llu %s\n", tool_sc_str(e, "type"), tool_sc_uint(e, "size"), tool_sc_str(e, "name"));
}

static int render_exists(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__ClaimFileReply *o = reply->claim_file;

        if (reply->body_case != SBX__REPLY__BODY_CLAIM_FILE || !o)
                return -EBADMSG;
        *ret = json_pack("{s:b, s:s, s:o}", "exists", o->exists, "path", o->path, "type",
                         o->exists ? json_string(o->type) : json_null());
        return *ret ? 0 : -ENOMEM;
}

/* ---- the resource template sandboxes://{namespace} ------------------------------- */

#define RESOURCE_SCHEME "sandboxes://"

json_t *lifecycle_resource_templates(void) {
        return json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}]}", "resourceTemplates",
                         "uriTemplate", RESOURCE_SCHEME "{namespace}", "name", "sandboxes",
                         "title", "Your sandboxes in a namespace",
                         "description", "The sandbox claims this MCP session created in the namespace: name, status, "
                                        "template, expiry and labels, as JSON.",
                         "mimeType", "application/json");
}

int lifecycle_resource_prepare(const char *uri, ToolRequest *req, char **ret_error) {
        Sbx__ClaimList *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_LIST, &sbx__claim_list__descriptor);
        const char *ns = uri + strlen(RESOURCE_SCHEME);
        size_t n = strlen(ns);

        if (strncmp(uri, RESOURCE_SCHEME, strlen(RESOURCE_SCHEME)) != 0 || n == 0 || n > SBX_CLAIM_NAME_MAX ||
            strspn(ns, "abcdefghijklmnopqrstuvwxyz0123456789-") != n || ns[0] == '-' || ns[n - 1] == '-')
                return asprintf(ret_error, "Invalid params: uri must be sandboxes://NAMESPACE, a namespace of 1-%u "
                                "of a-z 0-9 -", SBX_CLAIM_NAME_MAX) < 0 ? -ENOMEM : -EINVAL;
        m->namespace_ = (char *) ns;
        return 0;
}

static json_t *labels_json(Sbx__Label **l, size_t n) {
        json_t *o = json_object();

        for (size_t i = 0; o && i < n; i++)
                if (json_object_set_new(o, l[i]->key, json_string(l[i]->value)) < 0) {
                        json_decref(o);
                        return NULL;
                }
        return o;
}

int lifecycle_resource_render(const Sbx__Reply *reply, const char *uri, json_t **ret) {
        const Sbx__ClaimListReply *l = reply->claim_list;
        _cleanup_json_ json_t *claims = json_array();
        _cleanup_free_ char *text = NULL;

        if (reply->err < 0)
                return reply->err == -ENOENT ? -ENOENT : -EBADMSG;
        if (reply->body_case != SBX__REPLY__BODY_CLAIM_LIST || !l)
                return -EBADMSG;
        if (!claims)
                return -ENOMEM;
        for (size_t i = 0; i < l->n_claims; i++) {
                const Sbx__ClaimInfo *c = l->claims[i];
                if (json_array_append_new(claims, json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:o, s:o}",
                                                            "sandbox_claim_name", c->name, "namespace", c->namespace_,
                                                            "status", c->status, "ready", c->ready,
                                                            "template", c->template_, "sandbox_id", c->sandbox,
                                                            "expires_unix", expiry_of(c),
                                                            "labels", labels_json(c->labels, c->n_labels))) < 0)
                        return -ENOMEM;
        }
        text = json_dumps(claims, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        *ret = json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType", "application/json", "text", text);
        return *ret ? 0 : -ENOMEM;
}

/* ---- the table ------------------------------------------------------------------ */

#define CLAIM_NOTE \
        " Claims are this MCP session's own: another session, of this user or another, is told \\\"Sandbox claim " \
        "'<name>' is not found in namespace '<ns>'\\\"."

#define FILE_TIMEOUT_NOTE                                                                                  \
        "timeout (seconds, default 60, at most 600) bounds the wait: past it the call is an error naming it and " \
        "nothing is changed."

static const ToolDef lifecycle_tools[] = {
        {
                .name = "create_sandbox",
                .title = "Create a sandbox",
                .description =
                        "Create a sandbox (a claim) from a template (warmpool, default \"default\"; an unknown name "
                        "is an error listing the valid ones) and return its sandbox_claim_name. It is a long-lived "
                        "workspace: files written anywhere in it (/workspace, /tmp, ...) and background processes "
                        "persist between execute_command calls until delete_sandbox or expiry. A warm pool answers "
                        "at once (started_from warm); otherwise it is made now (cold). shutdown_after_seconds "
                        "(default 300, null: never) counts from the last tool call naming the claim; the "
                        "administrator may cap it. Each user has at most claims_per_user claims (default 16)." CLAIM_NOTE,
                .input_schema = create_input,
                .output_schema = create_output,
                .annotations = annotations_create,
                .prepare = prepare_create,
                .render = render_create,
        },
        {
                .name = "delete_sandbox",
                .title = "Delete a sandbox",
                .description = "Delete the claim and everything of it: its files, processes and transcripts." CLAIM_NOTE,
                .input_schema = claim_input,
                .output_schema = delete_output,
                .annotations = annotations_delete,
                .prepare = prepare_delete,
                .render = render_delete,
        },
        {
                .name = "execute_command",
                .title = "Run a command in a sandbox",
                .description =
                        "Run /bin/sh -c command in /workspace of the claim and wait until it ends, at most timeout "
                        "seconds (default 60, at most 600; then its process group is killed, timed_out is true and "
                        "exit_code null). stdout and stderr come back separately, each cut to max_output_chars "
                        "characters (default 30,000; 128 to 300,000), the cut marker included: when a stream is "
                        "longer, its first 40 % and its last 60 % are kept around a line \"[... N characters cut "
                        "...]\" (errors are usually at the end), with the totals and the truncation flags. The full "
                        "output is kept in the transcript command_session_id, which read_command_lines (runtime set, "
                        "sandbox_id of this result) pages by line, stream stdout or stderr.",
                .input_schema = execute_input,
                .output_schema = execute_output,
                .annotations = annotations_exec,
                .prepare = prepare_execute,
                .render = render_execute,
                .text = text_execute,
        },
        {
                .name = "upload_file",
                .title = "Write a file into a sandbox",
                .description =
                        "Write content to path in the claim (missing parent directories are created; an existing "
                        "file is replaced). content is text, or base64 when binary is true; at most 64 MiB decoded "
                        "(SBX_CLAIM_FILE_MAX). Binary content round-trips byte for byte. The file is written under a "
                        "temporary name and renamed when whole, so it is never seen half written. " FILE_TIMEOUT_NOTE,
                .input_schema = upload_input,
                .output_schema = upload_output,
                .annotations = annotations_write,
                .prepare = prepare_upload,
                .render = render_upload,
        },
        {
                .name = "download_file",
                .title = "Read a file from a sandbox",
                .description =
                        "Return the file at path in the claim: as text (it must be UTF-8), or base64 when binary is "
                        "true; at most 64 MiB (SBX_CLAIM_FILE_MAX). A directory is an error: list it with list_files. "
                        FILE_TIMEOUT_NOTE,
                .input_schema = download_input,
                .output_schema = download_output,
                .annotations = annotations_read_only,
                .prepare = prepare_download,
                .render_fd = render_download,
                .text = text_download,
                .result_max = SBX_CLAIM_RESULT_MAX,
        },
        {
                .name = "list_files",
                .title = "List a directory in a sandbox",
                .description =
                        "List the directory at path: entries sorted by name (name, size, type file, directory, "
                        "symlink or other, mod_time in seconds since the epoch), at most max_entries (default 1000, "
                        "at most 10,000; the first by name), total_entries and truncated. " FILE_TIMEOUT_NOTE,
                .input_schema = list_input,
                .output_schema = list_output,
                .annotations = annotations_read_only,
                .prepare = prepare_list,
                .render = render_list,
                .text = text_list,
        },
        {
                .name = "file_exists",
                .title = "Check a path in a sandbox",
                .description = "Whether path exists in the claim, and its type; a missing path is not an error. "
                               FILE_TIMEOUT_NOTE,
                .input_schema = exists_input,
                .output_schema = exists_output,
                .annotations = annotations_read_only,
                .prepare = prepare_exists,
                .render = render_exists,
        },
        {
                .name = "get_sandbox_status",
                .title = "Show a sandbox's status",
                .description =
                        "SandboxReady, SandboxNotReady (being made or restarted) or SandboxNotFound (never existed "
                        "for this session, deleted, or expired: message says which), with ready and message. It "
                        "counts as a use: expiry counts from now.",
                .input_schema = claim_input,
                .output_schema = status_output,
                .annotations = annotations_read_only,
                .prepare = prepare_status,
                .render = render_status,
        },
};

TOOL_SET_DEFINE(lifecycle);
