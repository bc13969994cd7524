#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx-limits.h"
#include "macro.h"
#include "schema.h"
#include "tools.h"

typedef int (*tool_prepare_t)(json_t *args, ToolRequest *req, char **ret_error);

struct ToolDef {
        const char *name;
        ToolSet set;
        const char *title;
        const char *description;
        const char *input_schema;       /* JSON text, published as is */
        const char *output_schema;      /* JSON text */
        const char *annotations;        /* JSON text */
        tool_prepare_t prepare;
};

static const struct {
        const char *name;
        ToolSet set;
} tool_sets[] = {
        { "runtime", TOOL_SET_RUNTIME },
};

/* ---- schemas ----------------------------------------------------------------
 * The input schemas are the published contract (shared/seeds/000): same
 * properties, types, descriptions, minimum, default, required and
 * additionalProperties. Limits the contract does not spell out are checked in
 * the prepare functions below and documented in the tool descriptions. */

#define SANDBOX_ID_PROPERTY \
        "\"sandbox_id\": {" \
        "  \"type\": \"string\"," \
        "  \"description\": \"Target sandbox id (selects the daemon to query).\"" \
        "}"

#define COMMAND_SESSION_ID_PROPERTY \
        "\"command_session_id\": {" \
        "  \"type\": \"string\"," \
        "  \"description\": \"Command session id returned by exec_command.\"" \
        "}"

static const char exec_command_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        "    \"workspace_session_id\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Existing workspace session id to run inside. Omit to create a session with finalize policy publish_then_destroy.\""
        "    },"
        "    \"cmd\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Shell command text.\""
        "    },"
        "    \"timeout_ms\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Command timeout in milliseconds.\","
        "      \"minimum\": 0"
        "    },"
        "    \"yield_time_ms\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Initial output wait in milliseconds.\","
        "      \"minimum\": 0"
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"cmd\"],"
        "  \"additionalProperties\": false"
        "}";

static const char write_command_stdin_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        COMMAND_SESSION_ID_PROPERTY ","
        "    \"stdin\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Text to write to stdin.\""
        "    },"
        "    \"yield_time_ms\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Output wait after writing stdin.\","
        "      \"minimum\": 0"
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"command_session_id\", \"stdin\"],"
        "  \"additionalProperties\": false"
        "}";

static const char read_command_lines_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        COMMAND_SESSION_ID_PROPERTY ","
        "    \"start_offset\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"First transcript line offset. Defaults to 0.\","
        "      \"minimum\": 0,"
        "      \"default\": 0"
        "    },"
        "    \"limit\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Maximum transcript rows to return. Defaults to 200; maximum 1000.\","
        "      \"minimum\": 0,"
        "      \"default\": 200"
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"command_session_id\"],"
        "  \"additionalProperties\": false"
        "}";

/* The command-output shape shared by the three command tools. Only keywords
 * that draft-07 and 2020-12 share: clients validate with either. */
static const char command_output_schema[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"command_session_id\": {\"type\": \"string\","
        "      \"description\": \"Command session id; keep it for read_command_lines and write_command_stdin.\"},"
        "    \"workspace_session_id\": {\"type\": \"string\","
        "      \"description\": \"Workspace session the command runs in.\"},"
        "    \"status\": {\"type\": \"string\", \"enum\": [\"running\", \"ok\", \"error\", \"timed_out\", \"cancelled\"],"
        "      \"description\": \"running while the command runs; ok when it exited with status 0; error, timed_out or cancelled otherwise.\"},"
        "    \"exit_code\": {\"type\": [\"integer\", \"null\"],"
        "      \"description\": \"Exit status; null while running or when the command did not exit normally.\"},"
        "    \"signal\": {\"type\": [\"integer\", \"null\"],"
        "      \"description\": \"Number of the signal that ended the command, or null.\"},"
        "    \"end_reason\": {\"type\": [\"string\", \"null\"],"
        "      \"enum\": [\"exit\", \"signal\", \"timeout\", \"out_of_memory\", \"pids_limit\", \"cancelled\", \"supervisor_lost\", null],"
        "      \"description\": \"Why the command ended; null while it runs.\"},"
        "    \"wall_time_seconds\": {\"type\": \"number\","
        "      \"description\": \"Seconds this call waited.\"},"
        "    \"command_total_time_seconds\": {\"type\": \"number\","
        "      \"description\": \"Seconds the command has run (its whole run time once it ended).\"},"
        "    \"start_offset\": {\"type\": \"integer\", \"minimum\": 0,"
        "      \"description\": \"Offset of the first transcript line in output (0-based, stable).\"},"
        "    \"end_offset\": {\"type\": \"integer\", \"minimum\": 0,"
        "      \"description\": \"Offset after the last line in output; continue reading from here.\"},"
        "    \"total_lines\": {\"type\": \"integer\", \"minimum\": 0,"
        "      \"description\": \"Lines in the transcript so far.\"},"
        "    \"original_token_count\": {\"type\": \"integer\", \"minimum\": 0,"
        "      \"description\": \"Estimated tokens of the untruncated output, ceil(bytes / 4).\"},"
        "    \"output\": {\"type\": \"string\","
        "      \"description\": \"Rendered transcript lines start_offset to end_offset, stdout and stderr merged.\"},"
        "    \"publication\": {\"type\": [\"object\", \"null\"],"
        "      \"description\": \"For a terminal command of an automatic session: what was published; null otherwise.\","
        "      \"properties\": {"
        "        \"published\": {\"type\": \"boolean\", \"description\": \"false when nothing changed or publication failed.\"},"
        "        \"layer\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Id of the published layer.\"},"
        "        \"owner\": {\"type\": \"string\", \"description\": \"Owner of the layer, workspace_session:<id>.\"},"
        "        \"changed_paths\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Paths the layer changes.\"},"
        "        \"error\": {\"type\": \"string\", \"description\": \"Why publication failed, such as conflicting paths; the session is kept.\"}"
        "      }"
        "    }"
        "  },"
        "  \"required\": [\"command_session_id\", \"workspace_session_id\", \"status\", \"exit_code\","
        "                \"wall_time_seconds\", \"command_total_time_seconds\", \"start_offset\", \"end_offset\","
        "                \"total_lines\", \"original_token_count\", \"output\"]"
        "}";

static const char annotations_mutating[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": false, \"openWorldHint\": false}";
static const char annotations_read_only[] =
        "{\"readOnlyHint\": true, \"openWorldHint\": false}";

/* The numbers the descriptions below quote. */
_Static_assert(SBX_YIELD_DEFAULT_MS == 10000, "exec_command description");
_Static_assert(SBX_STDIN_YIELD_DEFAULT_MS == 1000, "write_command_stdin description");
_Static_assert(SBX_YIELD_MAX_MS == 30000, "tool descriptions");
_Static_assert(SBX_TIMEOUT_DEFAULT_MS == 600000, "exec_command description");
_Static_assert(SBX_TIMEOUT_MAX_MS == 86400000, "exec_command description");
_Static_assert(SBX_WINDOW_MAX_LINES == 200 && SBX_WINDOW_MAX_BYTES == 96 * 1024, "tool descriptions");
_Static_assert(SBX_READ_DEFAULT_LINES == 200 && SBX_READ_MAX_LINES == 1000, "read_command_lines schema");
_Static_assert(SBX_STDIN_MAX == 65536, "write_command_stdin description");

static int prepare_exec(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_stdin(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_read_lines(json_t *args, ToolRequest *req, char **ret_error);

/* ---- the table: one entry per tool, in tools/list order -------------------- */

static const ToolDef tool_table[] = {
        {
                .name = "exec_command",
                .set = TOOL_SET_RUNTIME,
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
                        "96 KiB): when more are waiting, the most recent ones, and start_offset shows what was "
                        "skipped, still readable with read_command_lines. original_token_count estimates tokens of "
                        "the untruncated output as ceil(bytes / 4).",
                .input_schema = exec_command_input,
                .output_schema = command_output_schema,
                .annotations = annotations_mutating,
                .prepare = prepare_exec,
        },
        {
                .name = "write_command_stdin",
                .set = TOOL_SET_RUNTIME,
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
        },
        {
                .name = "read_command_lines",
                .set = TOOL_SET_RUNTIME,
                .title = "Page a command transcript",
                .description =
                        "Read rendered command output for a command session using stable line offsets.\n\n"
                        "Start at offset 0, then continue from end_offset until it reaches total_lines. The command "
                        "may still be running; status and offsets are a point-in-time snapshot. Reading output does "
                        "not extend or trigger workspace-session lifecycle behavior.\n\n"
                        "limit defaults to 200 and may be at most 1000; a window also ends at 96 KiB of text. "
                        "Lines are rendered as a terminal shows them: carriage returns overwrite, backspaces erase, "
                        "ANSI escape sequences are removed. Transcripts stay readable after the command and its "
                        "session are gone.",
                .input_schema = read_command_lines_input,
                .output_schema = command_output_schema,
                .annotations = annotations_read_only,
                .prepare = prepare_read_lines,
        },
};

/* ---- helpers ------------------------------------------------------------- */

#define _cleanup_json_ _cleanup_(json_decrefp)

_printf_(2, 3)
static int invalid(char **ret_error, const char *fmt, ...) {
        _cleanup_free_ char *why = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&why, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (asprintf(ret_error, "invalid arguments: %s", why) < 0)
                return -ENOMEM;
        return -EINVAL;
}

/* A validated string argument: NULL if absent. Rejects NUL bytes, and
 * lengths outside [min_len, max_len]. */
static int string_arg(json_t *args, const char *name, size_t min_len, size_t max_len, const char *max_what,
                      const char **ret, size_t *ret_len, char **ret_error) {
        json_t *v = json_object_get(args, name);
        const char *s;
        size_t len;

        if (!v) {
                *ret = NULL;
                if (ret_len)
                        *ret_len = 0;
                return 0;
        }
        s = json_string_value(v);
        len = json_string_length(v);
        if (len < min_len)
                return invalid(ret_error, "%s: must not be empty", name);
        if (len > max_len)
                return invalid(ret_error, "%s: must be at most %zu bytes%s", name, max_len, max_what);
        if (memchr(s, '\0', len))
                return invalid(ret_error, "%s: must not contain NUL characters", name);
        *ret = s;
        if (ret_len)
                *ret_len = len;
        return 0;
}

static int id_arg(json_t *args, const char *name, const char **ret, char **ret_error) {
        return string_arg(args, name, 1, SBX_NAME_MAX, "", ret, NULL, ret_error);
}

/* A validated integer argument (the schema made it an integer >= 0). */
static bool int_arg(json_t *args, const char *name, uint64_t *ret) {
        json_t *v = json_object_get(args, name);

        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return false;
        *ret = (uint64_t) json_integer_value(v);
        return true;
}

/* ---- prepare: validated arguments -> request ----------------------------- */

static int prepare_exec(json_t *args, ToolRequest *req, char **ret_error) {
        const char *sandbox, *session, *cmd;
        uint64_t v;
        int r;

        req->body.exec = (Sbx__Exec) SBX__EXEC__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        /* "" is taken as omitted: no session named, an automatic one. */
        r = string_arg(args, "workspace_session_id", 0, SBX_NAME_MAX, "", &session, NULL, ret_error);
        if (r < 0)
                return r;
        r = string_arg(args, "cmd", 1, SBX_CMD_MAX, "", &cmd, NULL, ret_error);
        if (r < 0)
                return r;

        req->body.exec.sandbox = (char *) sandbox;
        if (session)
                req->body.exec.workspace_session = (char *) session;
        req->body.exec.cmd = (char *) cmd;
        if (int_arg(args, "timeout_ms", &v) && v > 0) {
                if (v > SBX_TIMEOUT_MAX_MS)
                        return invalid(ret_error, "timeout_ms: must be at most %llu (24 hours)",
                                       (unsigned long long) SBX_TIMEOUT_MAX_MS);
                req->body.exec.has_timeout = true;
                req->body.exec.timeout_ms = v;
        }
        if (int_arg(args, "yield_time_ms", &v)) {
                req->body.exec.has_yield = true;
                req->body.exec.yield_ms = MIN(v, (uint64_t) SBX_YIELD_MAX_MS);
        }

        req->msg = (Sbx__Msg) SBX__MSG__INIT;
        req->msg.type = SBX__MSG_TYPE__MSG_CLIENT_EXEC;
        req->msg.body_case = SBX__MSG__BODY_EXEC;
        req->msg.exec = &req->body.exec;
        return 0;
}

static int prepare_stdin(json_t *args, ToolRequest *req, char **ret_error) {
        const char *sandbox, *command;
        json_t *data = json_object_get(args, "stdin");
        size_t len = json_string_length(data);
        bool close = false;
        uint64_t v;
        int r;

        req->body.stdin_ = (Sbx__Stdin) SBX__STDIN__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = id_arg(args, "command_session_id", &command, ret_error);
        if (r < 0)
                return r;

        /* A trailing U+0004 (EOT, Ctrl-D) closes stdin after the text before it. */
        if (len > 0 && json_string_value(data)[len - 1] == '\x04') {
                close = true;
                len--;
        }
        if (len > SBX_STDIN_MAX)
                return invalid(ret_error, "stdin: must be at most %u bytes per call", SBX_STDIN_MAX);

        req->body.stdin_.sandbox = (char *) sandbox;
        req->body.stdin_.command_session = (char *) command;
        req->body.stdin_.data.len = len;
        req->body.stdin_.data.data = (uint8_t *) json_string_value(data);
        req->body.stdin_.close = close;
        if (int_arg(args, "yield_time_ms", &v)) {
                req->body.stdin_.has_yield = true;
                req->body.stdin_.yield_ms = MIN(v, (uint64_t) SBX_YIELD_MAX_MS);
        }

        req->msg = (Sbx__Msg) SBX__MSG__INIT;
        req->msg.type = SBX__MSG_TYPE__MSG_CLIENT_STDIN;
        req->msg.body_case = SBX__MSG__BODY_STDIN;
        req->msg.stdin = &req->body.stdin_;
        return 0;
}

static int prepare_read_lines(json_t *args, ToolRequest *req, char **ret_error) {
        const char *sandbox, *command;
        uint64_t start = 0, limit = SBX_READ_DEFAULT_LINES;
        int r;

        req->body.read_lines = (Sbx__ReadLines) SBX__READ_LINES__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = id_arg(args, "command_session_id", &command, ret_error);
        if (r < 0)
                return r;
        (void) int_arg(args, "start_offset", &start);
        (void) int_arg(args, "limit", &limit);
        if (limit > SBX_READ_MAX_LINES)
                return invalid(ret_error, "limit: must be at most %u", SBX_READ_MAX_LINES);

        req->body.read_lines.sandbox = (char *) sandbox;
        req->body.read_lines.command_session = (char *) command;
        req->body.read_lines.start_offset = start;
        req->body.read_lines.has_limit = true;
        req->body.read_lines.limit = (uint32_t) limit;

        req->msg = (Sbx__Msg) SBX__MSG__INIT;
        req->msg.type = SBX__MSG_TYPE__MSG_CLIENT_READ_LINES;
        req->msg.body_case = SBX__MSG__BODY_READ_LINES;
        req->msg.read_lines = &req->body.read_lines;
        return 0;
}

/* ---- registry -------------------------------------------------------------- */

int tool_sets_parse(const char *list, unsigned *ret_sets, const char **ret_bad) {
        unsigned sets = 0;
        const char *p = list;

        for (;;) {
                size_t n = strcspn(p, ",");
                bool found = false;

                for (size_t i = 0; i < ELEMENTSOF(tool_sets); i++)
                        if (n == strlen(tool_sets[i].name) && strncmp(p, tool_sets[i].name, n) == 0) {
                                sets |= tool_sets[i].set;
                                found = true;
                        }
                if (!found) {
                        if (ret_bad)
                                *ret_bad = p;
                        return -EINVAL;
                }
                if (p[n] == '\0')
                        break;
                p += n + 1;
        }
        *ret_sets = sets;
        return 0;
}

Tools *tools_free(Tools *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n; i++) {
                json_decref(t->tools[i].input_schema);
                json_decref(t->tools[i].output_schema);
        }
        free(t->tools);
        json_decref(t->list);
        free(t);
        return NULL;
}

static json_t *load_schema(const char *text) {
        json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);

        /* Published schemas have an object root (MCP requires type "object"). */
        if (j && (!json_is_object(j) || !json_is_string(json_object_get(j, "type")) ||
                  strcmp(json_string_value(json_object_get(j, "type")), "object") != 0)) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int tools_new(unsigned sets, Tools **ret_tools) {
        _cleanup_(tools_freep) Tools *t = NULL;
        json_t *array;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->sets = sets;
        t->tools = calloc(ELEMENTSOF(tool_table), sizeof(Tool));
        t->list = json_pack("{s:[]}", "tools");
        if (!t->tools || !t->list)
                return -ENOMEM;
        array = json_object_get(t->list, "tools");

        for (size_t i = 0; i < ELEMENTSOF(tool_table); i++) {
                const ToolDef *d = &tool_table[i];
                Tool *tool;
                json_t *entry, *annotations;

                if (!(d->set & sets))
                        continue;
                tool = &t->tools[t->n++];
                tool->def = d;
                tool->input_schema = load_schema(d->input_schema);
                tool->output_schema = load_schema(d->output_schema);
                annotations = json_loads(d->annotations, 0, NULL);
                if (!tool->input_schema || !tool->output_schema || !annotations) {
                        json_decref(annotations);
                        return -EINVAL;
                }
                entry = json_pack("{s:s, s:s, s:s, s:O, s:O, s:o}",
                                  "name", d->name, "title", d->title, "description", d->description,
                                  "inputSchema", tool->input_schema, "outputSchema", tool->output_schema,
                                  "annotations", annotations);
                if (!entry || json_array_append_new(array, entry) < 0)
                        return -ENOMEM;
        }
        *ret_tools = TAKE_PTR(t);
        return 0;
}

const json_t *tools_list_result(const Tools *t) {
        return t->list;
}

const Tool *tools_find(const Tools *t, const char *name, size_t len) {
        for (size_t i = 0; i < t->n; i++)
                if (strlen(t->tools[i].def->name) == len && memcmp(t->tools[i].def->name, name, len) == 0)
                        return &t->tools[i];
        return NULL;
}

const char *tool_name(const Tool *tool) {
        return tool->def->name;
}

int tool_prepare(const Tool *tool, json_t *arguments, ToolRequest *ret_req, char **ret_error) {
        _cleanup_free_ char *why = NULL;
        int r;

        r = schema_validate(tool->input_schema, arguments, &why);
        if (r == -EINVAL) {
                if (asprintf(ret_error, "invalid arguments: %s", why) < 0)
                        return -ENOMEM;
                return -EINVAL;
        }
        if (r < 0)
                return r;
        return tool->def->prepare(arguments, ret_req, ret_error);
}

/* ---- results ----------------------------------------------------------------- */

json_t *tool_error_result(const char *text) {
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError", 1);
}

int utf8_sanitize(const void *data, size_t len, char **ret_str, size_t *ret_len) {
        const uint8_t *p = data;
        char *out, *o;

        if (len > (SIZE_MAX - 1) / 3)
                return -ENOMEM;
        out = o = malloc(len * 3 + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len;) {
                uint8_t c = p[i];
                size_t n = 0;
                uint8_t lo = 0x80, hi = 0xbf;

                if (c < 0x80) {
                        *o++ = (char) c;
                        i++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf)
                        n = 2;
                else if (c >= 0xe0 && c <= 0xef) {
                        n = 3;
                        if (c == 0xe0)
                                lo = 0xa0;      /* no overlong forms */
                        else if (c == 0xed)
                                hi = 0x9f;      /* no surrogates */
                } else if (c >= 0xf0 && c <= 0xf4) {
                        n = 4;
                        if (c == 0xf0)
                                lo = 0x90;
                        else if (c == 0xf4)
                                hi = 0x8f;      /* nothing above U+10FFFF */
                }
                bool ok = n > 0 && i + n <= len && p[i + 1] >= lo && p[i + 1] <= hi;
                for (size_t k = 2; ok && k < n; k++)
                        ok = (p[i + k] & 0xc0) == 0x80;
                if (ok) {
                        memcpy(o, p + i, n);
                        o += n;
                        i += n;
                } else {
                        memcpy(o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                }
        }
        *o = '\0';
        *ret_str = out;
        *ret_len = (size_t) (o - out);
        return 0;
}

static json_t *string_from(const char *s, size_t len) {
        _cleanup_free_ char *clean = NULL;
        size_t n;

        if (!s)
                return json_string("");
        if (utf8_sanitize(s, len, &clean, &n) < 0)
                return NULL;
        return json_stringn(clean, n);
}

static json_t *cstring_from(const char *s) {
        return string_from(s, s ? strlen(s) : 0);
}

static json_t *uint_from(uint64_t v) {
        return json_integer((json_int_t) MIN(v, (uint64_t) INT64_MAX));
}

static json_t *real_from(double d) {
        return json_real(isfinite(d) ? d : 0.0);
}

static int set_new(json_t *o, const char *key, json_t *v) {
        if (!v)
                return -ENOMEM;
        return json_object_set_new(o, key, v) < 0 ? -ENOMEM : 0;
}

static int command_output_to_json(const Sbx__CommandOutput *c, json_t **ret) {
        _cleanup_json_ json_t *o = json_object();
        int r = 0;

        if (!o)
                return -ENOMEM;
        r |= set_new(o, "command_session_id", cstring_from(c->command_session));
        r |= set_new(o, "workspace_session_id", cstring_from(c->workspace_session));
        r |= set_new(o, "status", cstring_from(c->status));
        r |= set_new(o, "exit_code", c->has_exit_code ? json_integer(c->exit_code) : json_null());
        r |= set_new(o, "signal", c->signal != 0 ? json_integer(c->signal) : json_null());
        r |= set_new(o, "end_reason",
                     c->end_reason && c->end_reason[0] ? cstring_from(c->end_reason) : json_null());
        r |= set_new(o, "wall_time_seconds", real_from(c->wall_time_seconds));
        r |= set_new(o, "command_total_time_seconds", real_from(c->command_total_time_seconds));
        r |= set_new(o, "start_offset", uint_from(c->start_offset));
        r |= set_new(o, "end_offset", uint_from(c->end_offset));
        r |= set_new(o, "total_lines", uint_from(c->total_lines));
        r |= set_new(o, "original_token_count", uint_from(c->original_token_count));
        r |= set_new(o, "output", string_from((const char *) c->output.data, c->output.len));
        if (c->publication) {
                const Sbx__Publication *p = c->publication;
                json_t *pub = json_object();

                r |= set_new(o, "publication", pub);
                if (pub) {
                        r |= set_new(pub, "published", json_boolean(p->published));
                        r |= set_new(pub, "layer", json_integer(p->layer));
                        r |= set_new(pub, "owner", cstring_from(p->owner));
                        r |= set_new(pub, "changed_paths", json_integer(p->changed_paths));
                        if (p->error && p->error[0])
                                r |= set_new(pub, "error", cstring_from(p->error));
                }
        } else
                r |= set_new(o, "publication", json_null());
        if (r != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int error_result(const char *text, json_t **ret_result) {
        *ret_result = tool_error_result(text);
        return *ret_result ? 0 : -ENOMEM;
}

int tool_result_from_reply(const Tool *tool, const Sbx__Reply *reply, bool content_text, json_t **ret_result) {
        _cleanup_json_ json_t *sc = NULL, *content = NULL;
        _cleanup_free_ char *why = NULL, *text = NULL;
        int r;

        if (reply->err < 0) {
                _cleanup_free_ char *msg = NULL;
                size_t n;

                if (!reply->errmsg || !reply->errmsg[0])
                        return error_result(strerror(-reply->err), ret_result);
                r = utf8_sanitize(reply->errmsg, strlen(reply->errmsg), &msg, &n);
                if (r < 0)
                        return r;
                return error_result(msg, ret_result);
        }
        if (reply->body_case != SBX__REPLY__BODY_COMMAND || !reply->command)
                return error_result("sbxd sent an unexpected reply", ret_result);

        r = command_output_to_json(reply->command, &sc);
        if (r < 0)
                return r;
        /* What we promise in outputSchema, clients check: never send a violation. */
        r = schema_validate(tool->output_schema, sc, &why);
        if (r == -EINVAL) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "sbxd sent an invalid reply: %s", why) < 0)
                        return -ENOMEM;
                return error_result(msg, ret_result);
        }
        if (r < 0)
                return r;

        content = json_array();
        if (!content)
                return -ENOMEM;
        if (content_text) {
                text = json_dumps(sc, JSON_COMPACT | JSON_REAL_PRECISION(9));
                if (!text)
                        return -ENOMEM;
                if (json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text)) < 0)
                        return -ENOMEM;
        }
        *ret_result = json_pack("{s:O, s:O, s:b}", "content", content, "structuredContent", sc, "isError", 0);
        return *ret_result ? 0 : -ENOMEM;
}
