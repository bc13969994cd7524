/* The runtime tool set: run commands (exec_command, write_command_stdin,
 * read_command_lines) and work on files (file_read, file_write, file_edit,
 * file_blame) in a sandbox's workspace. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memfd-util.h"
#include "sbx-limits.h"
#include "schema.h"
#include "tool-set.h"

/* The numbers the descriptions quote. */
/* The numbers the descriptions below quote. */
_Static_assert(SBX_YIELD_DEFAULT_MS == 10000, "exec_command description");
_Static_assert(SBX_STDIN_YIELD_DEFAULT_MS == 1000, "write_command_stdin description");
_Static_assert(SBX_YIELD_MAX_MS == 30000, "tool descriptions");
_Static_assert(SBX_EGRESS_AUDIT_MAX == 64, "exec_command output schema (egress)");
_Static_assert(SBX_TIMEOUT_DEFAULT_MS == 600000, "exec_command description");
_Static_assert(SBX_TIMEOUT_MAX_MS == 86400000, "exec_command description");
_Static_assert(SBX_WINDOW_MAX_LINES == 200 && SBX_RESULT_TEXT_BUDGET == 52 * 1024, "tool descriptions");
_Static_assert(SBX_STDIN_MAX == 65536, "write_command_stdin description");
_Static_assert(SBX_FILE_MAX == 16 << 20, "file_write, file_edit descriptions");

/* ---- prepare: validated arguments -> request ----------------------------- */

/* sandbox_id and command_session_id, as the request's strings. */
static int command_target(json_t *args, char **ret_sandbox, char **ret_command, char **ret_error) {
        const char *sandbox, *command;
        int r;

        r = tool_arg_id(args, "sandbox_id", &sandbox, ret_error);
        if (r >= 0)
                r = tool_arg_id(args, "command_session_id", &command, ret_error);
        if (r < 0)
                return r;
        *ret_sandbox = (char *) sandbox;
        *ret_command = (char *) command;
        return 0;
}

/* sandbox_id, path and the optional workspace_session_id, as the request's strings. */
static int file_target(json_t *args, char **ret_sandbox, char **ret_path, char **ret_session, char **ret_error) {
        const char *sandbox, *path, *session;
        int r;

        r = tool_arg_id(args, "sandbox_id", &sandbox, ret_error);
        if (r >= 0)
                r = tool_arg_path(args, &path, ret_error);
        if (r >= 0)
                r = tool_arg_session(args, &session, ret_error);
        if (r < 0)
                return r;
        *ret_sandbox = (char *) sandbox;
        *ret_path = (char *) path;
        *ret_session = (char *) session;
        return 0;
}

/* yield_time_ms, clamped to SBX_YIELD_MAX_MS. */
static void yield_arg(json_t *args, protobuf_c_boolean *ret_has, uint64_t *ret_ms) {
        uint64_t v;

        if (tool_arg_int(args, "yield_time_ms", &v)) {
                *ret_has = true;
                *ret_ms = MIN(v, (uint64_t) SBX_YIELD_MAX_MS);
        }
}

static int prepare_exec(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__Exec *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_EXEC, &sbx__exec__descriptor);
        const char *sandbox, *session, *cmd;
        uint64_t v;
        int r;

        r = tool_arg_id(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        /* "" is taken as omitted: no session named, an automatic one. */
        r = tool_arg_string(args, "workspace_session_id", 0, SBX_NAME_MAX, &session, NULL, ret_error);
        if (r < 0)
                return r;
        r = tool_arg_string(args, "cmd", 1, SBX_CMD_MAX, &cmd, NULL, ret_error);
        if (r < 0)
                return r;

        m->sandbox = (char *) sandbox;
        if (session)
                m->workspace_session = (char *) session;
        m->cmd = (char *) cmd;
        if (tool_arg_int(args, "timeout_ms", &v) && v > 0) {
                if (v > SBX_TIMEOUT_MAX_MS)
                        return tool_arg_invalid(ret_error, "timeout_ms: must be at most %llu (24 hours)",
                                       (unsigned long long) SBX_TIMEOUT_MAX_MS);
                m->has_timeout = true;
                m->timeout_ms = v;
        }
        yield_arg(args, &m->has_yield, &m->yield_ms);
        return 0;
}

static int prepare_stdin(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__Stdin *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_STDIN, &sbx__stdin__descriptor);
        json_t *data = json_object_get(args, "stdin");
        size_t len = json_string_length(data);
        bool close = false;
        int r;

        r = command_target(args, &m->sandbox, &m->command_session, ret_error);
        if (r < 0)
                return r;

        /* A trailing U+0004 (EOT, Ctrl-D) closes stdin after the text before it. */
        if (len > 0 && json_string_value(data)[len - 1] == '\x04') {
                close = true;
                len--;
        }
        if (len > SBX_STDIN_MAX)
                return tool_arg_invalid(ret_error, "stdin: must be at most %u bytes per call", SBX_STDIN_MAX);

        m->data.len = len;
        m->data.data = (uint8_t *) json_string_value(data);
        m->close = close;
        yield_arg(args, &m->has_yield, &m->yield_ms);
        return 0;
}

static int prepare_read_lines(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__ReadLines *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_READ_LINES, &sbx__read_lines__descriptor);
        uint64_t start = 0, limit = SBX_READ_DEFAULT_LINES;
        int r;

        r = command_target(args, &m->sandbox, &m->command_session, ret_error);
        if (r < 0)
                return r;
        (void) tool_arg_int(args, "start_offset", &start);
        (void) tool_arg_int(args, "limit", &limit);
        if (limit > SBX_READ_MAX_LINES)
                return tool_arg_invalid(ret_error, "limit: must be at most %u", SBX_READ_MAX_LINES);

        m->start_offset = start;
        m->has_limit = true;
        m->limit = (uint32_t) limit;
        return 0;
}

static int prepare_file_read(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__FileRead *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_FILE_READ, &sbx__file_read__descriptor);
        uint64_t offset = 1, limit = SBX_FILE_READ_DEFAULT_LINES;
        int r;

        r = file_target(args, &m->sandbox, &m->path, &m->workspace_session, ret_error);
        if (r < 0)
                return r;
        (void) tool_arg_int(args, "offset", &offset);
        (void) tool_arg_int(args, "limit", &limit);
        /* The seed: "must be 1..=2000"; its schema only says minimum 0. */
        if (limit < 1 || limit > SBX_FILE_READ_MAX_LINES)
                return tool_arg_invalid(ret_error, "limit: must be 1..=%u", SBX_FILE_READ_MAX_LINES);

        m->has_offset = true;
        m->offset = MAX(offset, (uint64_t) 1);  /* 0 is taken as 1 */
        m->has_limit = true;
        m->limit = (uint32_t) limit;
        return 0;
}

static int prepare_file_write(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__FileWrite *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_FILE_WRITE, &sbx__file_write__descriptor);
        json_t *content = json_object_get(args, "content");
        size_t len = json_string_length(content);
        int r;

        r = file_target(args, &m->sandbox, &m->path, &m->workspace_session, ret_error);
        if (r < 0)
                return r;
        if (len > SBX_FILE_MAX)
                return tool_arg_invalid(ret_error, "content: must be at most %llu bytes (16 MiB)",
                               (unsigned long long) SBX_FILE_MAX);

        r = sealed_memfd_new("sbx-file-write", json_string_value(content), len, &req->fd);
        if (r < 0)
                return r;
        m->content_size = len;
        return 0;
}

/* Check the items of edits (non-empty; objects with string old_string and
 * new_string, optional boolean replace_all, nothing else), naming each
 * offender as edits[N].key. Applies replace_all's default. */
static int check_edits(json_t *args, char **ret_error) {
        _cleanup_json_ json_t *schema = NULL, *wrapper = NULL;
        _cleanup_free_ char *why = NULL;
        json_t *edits = json_object_get(args, "edits");
        int r;

        if (json_array_size(edits) == 0)
                return tool_arg_invalid(ret_error, "edits: must not be empty");
        schema = json_loads(file_edit_items_schema, 0, NULL);
        wrapper = json_pack("{s:O}", "edits", edits);     /* shares edits: defaults land in args */
        if (!schema || !wrapper)
                return -ENOMEM;
        r = schema_validate(schema, wrapper, &why);
        if (r == -EINVAL)
                return tool_arg_invalid(ret_error, "%s", why);
        return r;
}

static int prepare_file_edit(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__FileEdit *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_FILE_EDIT, &sbx__file_edit__descriptor);
        Sbx__EditList list = SBX__EDIT_LIST__INIT;
        _cleanup_free_ Sbx__Edit *items = NULL;
        _cleanup_free_ Sbx__Edit **ptrs = NULL;
        _cleanup_free_ uint8_t *packed = NULL;
        json_t *edits, *e;
        size_t n, i, size;
        int r;

        r = file_target(args, &m->sandbox, &m->path, &m->workspace_session, ret_error);
        if (r < 0)
                return r;
        r = check_edits(args, ret_error);
        if (r < 0)
                return r;

        edits = json_object_get(args, "edits");
        n = json_array_size(edits);
        items = calloc(n, sizeof(*items));
        ptrs = calloc(n, sizeof(*ptrs));
        if (!items || !ptrs)
                return -ENOMEM;
        json_array_foreach(edits, i, e) {
                json_t *o = json_object_get(e, "old_string"), *nw = json_object_get(e, "new_string");

                items[i] = (Sbx__Edit) SBX__EDIT__INIT;
                items[i].old_string.data = (uint8_t *) json_string_value(o);
                items[i].old_string.len = json_string_length(o);
                items[i].new_string.data = (uint8_t *) json_string_value(nw);
                items[i].new_string.len = json_string_length(nw);
                items[i].replace_all = json_is_true(json_object_get(e, "replace_all"));
                ptrs[i] = &items[i];
        }
        list.n_edits = n;
        list.edits = ptrs;
        size = sbx__edit_list__get_packed_size(&list);
        if (size > SBX_FILE_MAX)
                return tool_arg_invalid(ret_error, "edits: must total at most %llu bytes (16 MiB)",
                               (unsigned long long) SBX_FILE_MAX);
        packed = malloc(MAX(size, (size_t) 1));
        if (!packed)
                return -ENOMEM;
        if (sbx__edit_list__pack(&list, packed) != size)
                return -EINVAL;
        r = sealed_memfd_new("sbx-file-edit", packed, size, &req->fd);
        if (r < 0)
                return r;

        m->edits_size = size;
        return 0;
}


TOOL_PREPARE_STRINGS(prepare_file_blame, sbx__file_blame, FILE_BLAME,
                { "sandbox_id", "sandbox", TOOL_ARG_ID }, { "path", "path", TOOL_ARG_PATH })

/* ---- results ---------------------------------------------------------------- */

static const MsgJsonMap file_read_map = MSG_JSON_MAP_INIT(sbx__file_read_reply__descriptor,
        MSG_JSON_NAMES("path content start_line num_lines total_lines bytes_read total_bytes next_offset truncated"));

/* file_write: type, path, bytes_written; file_edit adds edits_applied and
 * replacements. publication only when sbxd sent one (no session). */
#define FILE_CHANGE_MAP(names)                                                          \
        MSG_JSON_MAP_INIT(sbx__file_change_reply__descriptor, MSG_JSON_NAMES(names),   \
                MSG_JSON_FIELD("publication", "publication", .flags = MSG_JSON_OMIT_EMPTY, \
                               .sub = &tool_publication_map))
static const MsgJsonMap file_write_map = FILE_CHANGE_MAP("type path bytes_written");
static const MsgJsonMap file_edit_map = FILE_CHANGE_MAP("type path edits_applied replacements bytes_written");

static const MsgJsonMap blame_range_map = MSG_JSON_MAP_INIT(sbx__blame_range__descriptor,
        MSG_JSON_NAMES("start_line line_count owner"));

static const MsgJsonMap file_blame_map = MSG_JSON_MAP_INIT(sbx__file_blame_reply__descriptor,
        MSG_JSON_NAMES("path"),
        MSG_JSON_FIELD("ranges", "ranges", .sub = &blame_range_map));

static int render_file_read(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_FILE_READ || !reply->file_read)
                return -EBADMSG;
        return tool_render_object(&file_read_map, reply->file_read, ret);
}

static int render_file_change(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__FileChangeReply *f = reply->file_change;

        if (reply->body_case != SBX__REPLY__BODY_FILE_CHANGE || !f)
                return -EBADMSG;
        return tool_render_object(f->type && strcmp(f->type, "edit") == 0 ? &file_edit_map : &file_write_map, f, ret);
}

static int render_file_blame(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_FILE_BLAME || !reply->file_blame)
                return -EBADMSG;
        return tool_render_object(&file_blame_map, reply->file_blame, ret);
}

static void text_file_read(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        unsigned long long first = tool_sc_uint(sc, "start_line"), n = tool_sc_uint(sc, "num_lines");
        const char *content = tool_sc_str(sc, "content");
        size_t len = strlen(content);

        if (n == 0)
                fprintf(f, "%s: no lines from line %llu (the file has %llu)", tool_sc_str(sc, "path"), first,
                        tool_sc_uint(sc, "total_lines"));
        else if (n == 1)
                fprintf(f, "%s: line %llu of %llu", tool_sc_str(sc, "path"), first, tool_sc_uint(sc, "total_lines"));
        else
                fprintf(f, "%s: lines %llu-%llu of %llu", tool_sc_str(sc, "path"), first, first + n - 1,
                        tool_sc_uint(sc, "total_lines"));
        if (n > 0 && len > 0 && content[len - 1] != '\n' && json_is_true(json_object_get(sc, "truncated")))
                fprintf(f, "; line %llu is longer than a window: its first %zu bytes", first, len);
        if (json_is_integer(json_object_get(sc, "next_offset")))
                fprintf(f, "; more: file_read offset=%llu", tool_sc_uint(sc, "next_offset"));
        fputc('\n', f);
        fputs(content, f);
}

static void text_file_change(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const Sbx__FileChangeReply *c = reply->file_change;
        const json_t *pub = json_object_get(sc, "publication");
        const char *type = tool_sc_str(sc, "type"), *path = tool_sc_str(sc, "path");
        bool edit = strcmp(type, "edit") == 0;

        if (c->unchanged)
                fprintf(f, "%s unchanged: %s (%llu bytes); nothing written%s\n", path,
                        edit ? "the edits leave its content as it was" : "it already has this content",
                        tool_sc_uint(sc, "bytes_written"), json_is_object(pub) ? ", nothing published" : "");
        else {
                if (edit)
                        fprintf(f, "edited %s: %llu edit%s, %llu replacement%s, %llu bytes now", path,
                                tool_sc_uint(sc, "edits_applied"), tool_plural(tool_sc_uint(sc, "edits_applied")),
                                tool_sc_uint(sc, "replacements"), tool_plural(tool_sc_uint(sc, "replacements")),
                                tool_sc_uint(sc, "bytes_written"));
                else
                        fprintf(f, "%s %s (%llu bytes)", strcmp(type, "create") == 0 ? "created" : "updated", path,
                                tool_sc_uint(sc, "bytes_written"));
                if (json_is_object(pub))
                        tool_put_publication(f, pub);
                else
                        fprintf(f, "; in workspace session %s, private until it is finalized",
                                tool_arg_str(args, "workspace_session_id"));
                fputc('\n', f);
        }
        fwrite(c->diff.data, 1, c->diff.len, f);
        if (c->diff_truncated)
                fprintf(f, "(the diff stops at %u bytes: read the file for the rest)\n", SBX_EDIT_DIFF_MAX_BYTES);
}

static void text_file_blame(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const json_t *ranges = json_object_get(sc, "ranges");
        size_t i;
        json_t *x;

        fprintf(f, "%s: %zu range%s (lines, owner)\n", tool_sc_str(sc, "path"), json_array_size(ranges),
                tool_plural(json_array_size(ranges)));
        json_array_foreach(ranges, i, x) {
                unsigned long long first = tool_sc_uint(x, "start_line"), n = tool_sc_uint(x, "line_count");

                if (n == 1)
                        fprintf(f, "%llu %s\n", first, tool_sc_str(x, "owner"));
                else
                        fprintf(f, "%llu-%llu %s\n", first, first + n - 1, tool_sc_str(x, "owner"));
        }
}


/* ---- the table: one row per tool, in tools/list order ------------------------ */

static const ToolDef runtime_tools[] = {
        {
                .name = "exec_command",
                .title = "Start a sandbox shell command",
                .description =
                        "Start a shell command in a workspace session. Omit workspace_session_id to use an "
                        "automatic publish_then_destroy session. Use workspace_session_id only when an existing "
                        "managed session is available.\n\n"
                        "cmd runs as /bin/sh -c in the workspace root, with a clean fixed environment (PATH, HOME, "
                        "LANG=C.UTF-8, TERM=dumb, NO_COLOR=1, PAGER=cat, GIT_PAGER=cat); stdout and stderr are "
                        "merged. The call returns when the command ends, or when yield_time_ms (default 10000; "
                        "larger values are clamped to 30000) has passed "
                        "with the command still running. If status is running, retain command_session_id for "
                        "read_command_lines or write_command_stdin; the command's stdin stays open for "
                        "write_command_stdin. timeout_ms (default 600000, at most 86400000; 0 means the default) "
                        "is a hard limit: the whole process group is killed and status becomes timed_out, with the "
                        "output kept.\n\n"
                        "A terminal automatic command captures and publishes filesystem changes before destroying "
                        "its session; publication then tells the layer, its owner and the number of changed paths, "
                        "or why nothing was published (a conflict keeps the session).\n\n"
                        "The result holds a bounded window of rendered transcript lines (at most 200 lines and "
                        "52 KiB of JSON-escaped text, at most about 19k tokens): when more are waiting, the most recent "
                        "ones, and start_offset shows what was skipped, still readable with read_command_lines; a "
                        "window that ends before total_lines continues from end_offset. original_token_count "
                        "estimates tokens of the untruncated output as ceil(bytes / 4).",
                .input_schema = exec_command_input,
                .output_schema = command_output_schema,
                .annotations = annotations_mutating,
                .prepare = prepare_exec,
                .render = tool_render_command,
                .text = tool_text_command,
        },
        {
                .name = "write_command_stdin",
                .title = "Write to a running command",
                .description =
                        "Append text to the stdin stream of a running command session and return a bounded output "
                        "yield. Use a command_session_id returned while exec_command is still running.\n\n"
                        "stdin is written exactly as supplied; include a newline for line-oriented programs "
                        "(at most 65536 bytes per call). To close the command's stdin (end of input, as Ctrl-D "
                        "at a terminal), end the text with the character U+0004 (\"\\u0004\" in JSON): the text "
                        "before it is written, then stdin is closed; \"\\u0004\" alone only closes it.\n\n"
                        "yield_time_ms (default 1000; larger values are clamped to 30000) is how "
                        "long to wait for output after writing. The result uses the command-output shape, holds "
                        "output not yet returned in a bounded window, and may become terminal after the write.",
                .input_schema = write_command_stdin_input,
                .output_schema = command_output_schema,
                .annotations = annotations_mutating,
                .prepare = prepare_stdin,
                .render = tool_render_command,
                .text = tool_text_command,
        },
        {
                .name = "read_command_lines",
                .title = "Page a command transcript",
                .description =
                        "Read rendered command output for a command session using stable line offsets.\n\n"
                        "Start at offset 0, then continue from end_offset until it reaches total_lines. The command "
                        "may still be running; status and offsets are a point-in-time snapshot. Reading output does "
                        "not extend or trigger workspace-session lifecycle behavior.\n\n"
                        "limit defaults to 200 and may be at most 1000; a window also ends before 52 KiB of JSON-escaped "
                        "text (at most about 19k tokens), so it may hold fewer lines: continue from end_offset. "
                        "Lines are rendered as a terminal shows them: carriage returns overwrite, backspaces erase, "
                        "ANSI escape sequences are removed. Transcripts stay readable after the command and its "
                        "session are gone.",
                .input_schema = read_command_lines_input,
                .output_schema = command_output_schema,
                .annotations = annotations_read_only,
                .prepare = prepare_read_lines,
                .render = tool_render_command,
                .text = tool_text_command,
        },
        {
                .name = "file_read",
                .title = "Read a UTF-8 text window",
                .description =
                        "Read a UTF-8 window from a repository-relative or workspace-root-absolute path in the "
                        "published snapshot or a live session. Omit workspace_session_id for the published "
                        "snapshot; include it for uncommitted session content. Follow next_offset while truncated "
                        "is true to page long files. Only UTF-8 regular files are supported.\n\n"
                        "offset is the 1-indexed first line (default 1; 0 is taken as 1; past the end gives an "
                        "empty window). limit is the most lines to return (default 2000, must be 1..=2000). A "
                        "window also ends before its content, escaped as JSON, exceeds 52 KiB (at most about 19k tokens, under the "
                        "25,000-token limit of some clients), so it may hold fewer lines than limit: "
                        "continue from next_offset. Lines keep their line ends (\\n or \\r\\n). Files that are not "
                        "UTF-8 text (invalid UTF-8 or NUL bytes), directories and other non-regular files give an "
                        "error result. Paths are resolved inside the sandbox: .. and symlinks never leave the "
                        "workspace.",
                .input_schema = file_read_input,
                .output_schema = file_read_output,
                .annotations = annotations_read_only,
                .prepare = prepare_file_read,
                .render = render_file_read,
                .text = text_file_read,
        },
        {
                .name = "file_write",
                .title = "Create or overwrite a file",
                .description =
                        "Write content to a path in a live session, or publish a new attributed layer when no "
                        "session is supplied. Use only when overwriting the complete target file is intended. A "
                        "session-scoped write stays private until that session resolves. Without a session, the "
                        "runtime publishes a layer owned by operation:<request_id>, where the id is unique to this "
                        "call; publication then tells the layer and its owner, or the conflicting paths.\n\n"
                        "type is create for a new path or update for an existing regular file. content is written exactly (at most 16 MiB). bytes_written is "
                        "the file's new size. Paths are resolved inside the sandbox: .. and symlinks never leave "
                        "the workspace.",
                .input_schema = file_write_input,
                .output_schema = file_write_output,
                .annotations = annotations_write,
                .prepare = prepare_file_write,
                .render = render_file_change,
                .text = text_file_change,
        },
        {
                .name = "file_edit",
                .title = "Apply ordered exact replacements",
                .description =
                        "Apply ordered exact-string replacements in a live session, or publish one attributed layer "
                        "when no session is supplied. Each item requires old_string and new_string; replace_all "
                        "defaults to false. Without replace_all, old_string must occur exactly once. Empty, "
                        "missing, ambiguous, and no-op edits fail. Edits run in array order; omitting a session "
                        "publishes a durable layer immediately (owned by operation:<request_id>).\n\n"
                        "Each edit applies to the content as the edits before it left it. The call is "
                        "all-or-nothing: if any edit fails, the file is unchanged and the error names the edit and "
                        "why. edits_applied counts edit objects; replacements counts occurrences changed; "
                        "bytes_written is the file's new size. The file must be UTF-8 text of at most 16 MiB, and "
                        "the edits together at most 16 MiB.",
                .input_schema = file_edit_input,
                .output_schema = file_edit_output,
                .annotations = annotations_mutating,
                .prepare = prepare_file_edit,
                .render = render_file_change,
                .text = text_file_change,
        },
        {
                .name = "file_blame",
                .title = "Inspect per-line published ownership",
                .description =
                        "Return each line owner for a published path from the latest auditability event. Use this "
                        "after commands, writes, or edits have created auditability events. Ranges are 1-indexed "
                        "and tile the latest known file content. Treat owner strings as opaque. A missing "
                        "auditability record returns not_found.\n\n"
                        "owner is workspace_session:<id> (published by a workspace session), operation:<id> "
                        "(file_write or file_edit without a session), original (imported with the sandbox) or "
                        "unknown. Each publication updates ownership from a line diff: unchanged lines keep their "
                        "owner, changed and inserted lines take the publisher.",
                .input_schema = file_blame_input,
                .output_schema = file_blame_output,
                .annotations = annotations_read_only,
                .prepare = prepare_file_blame,
                .render = render_file_blame,
                .text = text_file_blame,
        },
};

TOOL_SET_DEFINE(runtime);
