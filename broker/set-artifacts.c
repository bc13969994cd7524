/* The artifacts tool set (issue 19, seed 004, docs/artifacts.md):
 * runtime_execute runs a runtime with code or arguments and answers with a
 * digest of its output (broker/digest.c) and an artifact handle;
 * runtime_query_output searches an artifact, or any command session's
 * transcript, by terms, cursor or line range. sbxd composes the command and
 * enforces the runtime_* policy; this module shapes arguments and results. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "memfd-util.h"
#include "sbx-limits.h"
#include "sha256.h"
#include "tool-set.h"

_Static_assert(SBX_RUNTIME_STDIN_MAX == 512 * 1024 && SBX_QUERY_EXCERPTS_DEFAULT == 10 &&
               SBX_QUERY_CONTEXT_DEFAULT == 3 && SBX_QUERY_EXCERPTS_MAX == 50 && SBX_QUERY_CONTEXT_MAX == 20 &&
               SBX_RUNTIME_SUMMARY_LINES == 20 && SBX_QUERY_RANGE_MAX_LINES == 1000, "schemas and descriptions");

/* ---- schemas --------------------------------------------------------------------- */

#define A_OBJ(props, required) \
        "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "], \"additionalProperties\": false}"
#define A_STRING(n, d) "\"" n "\": {\"type\": \"string\", \"description\": \"" d "\"}"
#define A_STRINGS(n, d) "\"" n "\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"" d "\"}"
#define A_INT(n, d, lo, hi) \
        "\"" n "\": {\"type\": \"integer\", \"description\": \"" d "\", \"minimum\": " lo ", \"maximum\": " hi "}"
#define A_INT_DEFAULT(n, d, lo, hi, v) \
        "\"" n "\": {\"type\": \"integer\", \"description\": \"" d "\", \"minimum\": " lo ", \"maximum\": " hi \
        ", \"default\": " v "}"
#define A_STREAM(n, d, v) \
        "\"" n "\": {\"type\": \"string\", \"enum\": [\"stdout\", \"stderr\", \"both\"], \"description\": \"" d "\"" v "}"
#define RUNTIMES "node, typescript, python, shell, powershell, ruby, php, perl, r, elixir, go, java, kotlin, rust, c, cpp, csharp"

static const char execute_input[] = A_OBJ(
        A_STRING("sandbox_id", "Target sandbox id.") ", "
        A_STRING("runtime", "One of " RUNTIMES "; the administrator allows some (runtime_allowed).") ", "
        A_STRING("executable", "Another executable of the runtime (such as cargo for rust, npm for node) or one the administrator allowed (runtime_allowed_executables). Omit for the runtime's own.") ", "
        A_STRINGS("args", "Arguments: after the code file for inline code, else to the executable itself.") ", "
        A_STRING("code", "Inline code, written to a temporary file (node: ESM, piped to node --input-type=module, or a temp .mjs when stdin is given); compiled runtimes compile it, run the binary and remove it.") ", "
        A_STRING("stdin", "UTF-8 text written to the program's stdin, which is then closed; at most 512 KiB. Reported as stdinBytes and stdinSha256, never echoed.") ", "
        "\"outputMode\": {\"type\": \"string\", \"enum\": [\"digest\", \"minimal\", \"intent\"], \"default\": \"digest\","
        " \"description\": \"digest: a parsed digest of the output and short summaries; minimal: status and metadata only; intent: summaries of the lines holding queryTerms.\"}, "
        A_STRINGS("queryTerms", "Terms for outputMode intent (case-insensitive).") ", "
        A_INT("timeoutMs", "Timeout in milliseconds; default and maximum runtime_max_duration_ms.", "1", "86400000") ", "
        "\"persistOutput\": {\"type\": \"boolean\", \"default\": true, \"description\": \"Keep the full stdout and stderr behind artifactHandle for runtime_query_output.\"}, "
        A_INT_DEFAULT("maxResponseLines", "Lines of each summary at most.", "1", "200", "20") ", "
        A_STRING("workspace_session_id", "Existing workspace session id to run inside. Omit for an automatic session that publishes the workspace changes."),
        "\"sandbox_id\", \"runtime\"");

#define CURSOR_PROPS \
        A_STREAM("stream", "Stream of the cursor.", "") ", " \
        A_INT("afterLine", "Continue after this line (1-based).", "0", "9007199254740991")

static const char query_input[] = A_OBJ(
        A_STRING("artifactHandle", "Handle runtime_execute returned, or a command_session_id of one of your sandboxes.") ", "
        A_STRINGS("queryTerms", "Terms to search for (case-insensitive); required unless lineRange is given.") ", "
        "\"cursor\": {\"type\": \"object\", \"description\": \"nextCursor of the previous result, to continue.\","
        " \"properties\": {" CURSOR_PROPS "}, \"required\": [\"stream\", \"afterLine\"], \"additionalProperties\": false}, "
        "\"lineRange\": {\"type\": \"object\", \"description\": \"Exact lines startLine..endLine (1-based, inclusive; at most 1000) of stream.\","
        " \"properties\": {" A_STREAM("stream", "stdout or stderr (both: the merged view of a command that kept them together).", "") ", "
        A_INT("startLine", "First line, 1-based.", "1", "9007199254740991") ", "
        A_INT("endLine", "Last line, inclusive.", "1", "9007199254740991") "},"
        " \"required\": [\"stream\", \"startLine\", \"endLine\"], \"additionalProperties\": false}, "
        A_INT_DEFAULT("maxExcerpts", "Excerpt windows at most.", "1", "50", "10") ", "
        A_INT_DEFAULT("contextLines", "Lines of context around each match.", "0", "20", "3") ", "
        A_STREAM("stream", "Which streams to search.", ", \"default\": \"both\""),
        "\"artifactHandle\"");

static const char execute_output[] =
        "{\"type\": \"object\", \"properties\": {"
        "\"status\": {\"type\": \"string\", \"enum\": [\"success\", \"failure\", \"timeout\", \"cancelled\"]},"
        "\"exitCode\": {\"type\": [\"integer\", \"null\"]},"
        "\"signal\": {\"type\": [\"integer\", \"null\"]},"
        "\"durationMs\": {\"type\": \"integer\", \"minimum\": 0},"
        "\"stdoutSummary\": {\"type\": \"string\"},"
        "\"stderrSummary\": {\"type\": \"string\"},"
        "\"digest\": {\"type\": [\"object\", \"null\"], \"description\": \"kind, parser, ok, summary, failures ({name, message, file, line}), failureCount, counts.\","
        "  \"properties\": {\"kind\": {\"type\": \"string\"}, \"parser\": {\"type\": \"string\"}, \"ok\": {\"type\": \"boolean\"},"
        "   \"summary\": {\"type\": \"string\"}, \"failures\": {\"type\": \"array\", \"items\": {\"type\": \"object\","
        "    \"properties\": {\"name\": {\"type\": \"string\"}, \"message\": {\"type\": \"string\"}, \"file\": {\"type\": \"string\"},"
        "     \"line\": {\"type\": \"integer\"}}, \"required\": [\"name\", \"message\"]}},"
        "   \"failureCount\": {\"type\": \"integer\", \"minimum\": 0}, \"counts\": {\"type\": \"object\"}},"
        "  \"required\": [\"kind\", \"parser\", \"ok\", \"summary\", \"failures\"]},"
        "\"artifactHandle\": {\"type\": [\"string\", \"null\"]},"
        "\"truncation\": {\"type\": \"object\", \"properties\": {\"stdoutTruncated\": {\"type\": \"boolean\"},"
        "  \"stderrTruncated\": {\"type\": \"boolean\"}, \"totalStdoutBytes\": {\"type\": \"integer\"},"
        "  \"totalStderrBytes\": {\"type\": \"integer\"}},"
        "  \"required\": [\"stdoutTruncated\", \"stderrTruncated\", \"totalStdoutBytes\", \"totalStderrBytes\"]},"
        "\"nextAction\": {\"type\": [\"object\", \"null\"], \"properties\": {\"kind\": {\"type\": \"string\"},"
        "  \"action\": {\"type\": \"string\"}, \"message\": {\"type\": \"string\"}, \"artifactHandle\": {\"type\": \"string\"},"
        "  \"queryTerms\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}},"
        "\"stdinBytes\": {\"type\": \"integer\", \"minimum\": 0},"
        "\"stdinSha256\": {\"type\": \"string\"},"
        "\"executable\": {\"type\": \"string\"},"
        "\"end_reason\": {\"type\": [\"string\", \"null\"]},"
        "\"command_session_id\": {\"type\": \"string\"},"
        "\"workspace_session_id\": {\"type\": \"string\"}"
        "}, \"required\": [\"status\", \"exitCode\", \"signal\", \"durationMs\", \"stdoutSummary\", \"stderrSummary\","
        " \"digest\", \"artifactHandle\", \"truncation\", \"nextAction\", \"end_reason\", \"command_session_id\"]}";

static const char query_output[] =
        "{\"type\": \"object\", \"properties\": {"
        "\"artifactHandle\": {\"type\": \"string\"},"
        "\"excerpts\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {"
        "  \"lineStart\": {\"type\": \"integer\", \"minimum\": 1}, \"lineEnd\": {\"type\": \"integer\", \"minimum\": 0},"
        "  \"content\": {\"type\": \"string\"}, \"source\": {\"type\": \"string\", \"enum\": [\"stdout\", \"stderr\", \"merged\"]}},"
        "  \"required\": [\"lineStart\", \"lineEnd\", \"content\", \"source\"]}},"
        "\"totalLines\": {\"type\": \"integer\", \"minimum\": 0},"
        "\"totalBytes\": {\"type\": \"integer\", \"minimum\": 0},"
        "\"searchedStreams\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
        "\"matchStatus\": {\"type\": \"string\", \"enum\": [\"matched\", \"noMatchFallback\", \"lineRange\"]},"
        "\"matchCount\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Matching lines read after the cursor: all of them when matchCountComplete.\"},"
        "\"matchCountComplete\": {\"type\": \"boolean\", \"description\": \"false when the page filled before the end: more matches may follow nextCursor.\"},"
        "\"nextCursor\": {\"type\": [\"object\", \"null\"], \"properties\": {" CURSOR_PROPS "}}"
        "}, \"required\": [\"artifactHandle\", \"excerpts\", \"totalLines\", \"totalBytes\", \"searchedStreams\","
        " \"matchStatus\", \"matchCount\", \"nextCursor\"]}";

static const char annotations_execute[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": false, \"openWorldHint\": false}";

/* ---- runtime_execute -------------------------------------------------------------- */

/* A string array argument into *ret (heap, owned by req), each item checked. */
static int string_items(json_t *args, const char *name, size_t max_items, size_t max_len, char ***ret, size_t *ret_n,
                        void **heap, char **ret_error) {
        json_t *a = json_object_get(args, name), *v;
        size_t i, n = json_array_size(a);
        char **items;

        if (n > max_items)
                return tool_arg_invalid(ret_error, "%s: at most %zu items", name, max_items);
        items = calloc(MAX(n, (size_t) 1), sizeof(char *));
        if (!items)
                return -ENOMEM;
        *heap = items;
        json_array_foreach(a, i, v) {
                if (json_string_length(v) > max_len || memchr(json_string_value(v), '\0', json_string_length(v)))
                        return tool_arg_invalid(ret_error, "%s[%zu]: at most %zu bytes, without NUL characters", name,
                                                i, max_len);
                items[i] = (char *) json_string_value(v);
        }
        *ret = items;
        *ret_n = n;
        return 0;
}

static int prepare_execute(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__RuntimeExecute *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_RUNTIME_EXECUTE,
                                                   &sbx__runtime_execute__descriptor);
        const char *sandbox, *runtime, *exe, *code, *session, *in, *mode;
        size_t in_len = 0;
        uint64_t v;
        int r;

        r = tool_arg_id(args, "sandbox_id", &sandbox, ret_error);
        if (r >= 0)
                r = tool_arg_id(args, "runtime", &runtime, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "executable", 0, SBX_RUNTIME_EXE_MAX, &exe, NULL, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "code", 0, SBX_CMD_MAX, &code, NULL, ret_error);
        if (r >= 0)
                r = tool_arg_session(args, &session, ret_error);
        if (r >= 0)
                r = string_items(args, "args", SBX_RUNTIME_ARGS_MAX, SBX_CMD_MAX, &m->args, &m->n_args, &req->heap,
                                 ret_error);
        if (r < 0)
                return r;
        mode = tool_arg_str(args, "outputMode");
        if (strcmp(mode, "intent") == 0 && json_array_size(json_object_get(args, "queryTerms")) == 0)
                return tool_arg_invalid(ret_error, "queryTerms: outputMode intent needs at least one term; or use "
                                        "outputMode digest");
        in = json_string_value(json_object_get(args, "stdin"));
        if (in) {
                in_len = json_string_length(json_object_get(args, "stdin"));
                if (in_len > SBX_RUNTIME_STDIN_MAX)
                        return tool_arg_invalid(ret_error, "stdin: %zu bytes is over 512 KiB (%u bytes); write larger "
                                                "input to a file of the workspace (file_write) instead", in_len,
                                                SBX_RUNTIME_STDIN_MAX);
                r = sealed_memfd_new("sbx-runtime-stdin", in, in_len, &req->fd);
                if (r < 0)
                        return r;
                m->has_stdin = true;
                m->stdin_size = in_len;
        }
        m->sandbox = (char *) sandbox;
        m->runtime = (char *) runtime;
        m->executable = (char *) (exe ?: "");
        m->code = (char *) (code ?: "");
        m->workspace_session = (char *) session;
        if (tool_arg_int(args, "timeoutMs", &v))
                m->timeout_ms = v;
        m->persist = !json_is_false(json_object_get(args, "persistOutput"));
        return 0;
}

/* The text of a stream for a summary: its last max_lines lines, or (intent)
 * the lines holding one of terms (the last lines if none does), within
 * SBX_RUNTIME_SUMMARY_BYTES. */
static json_t *summary_of(const char *text, size_t len, size_t max_lines, const json_t *terms) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, lines = 0, start = len;
        size_t i;
        json_t *t;

        buf = malloc(SBX_RUNTIME_SUMMARY_BYTES + 1);
        if (!buf)
                return NULL;
        for (const char *p = text; terms && p < text + len && lines < max_lines;) {
                const char *nl = memchr(p, '\n', (size_t) (text + len - p));
                size_t k = nl ? (size_t) (nl - p) : (size_t) (text + len - p);
                bool hit = false;

                json_array_foreach(terms, i, t)
                        hit |= json_string_length(t) > 0 && k >= json_string_length(t) &&
                               memmem(p, k, json_string_value(t), json_string_length(t)) != NULL;
                if (hit && n + k + 1 <= SBX_RUNTIME_SUMMARY_BYTES) {
                        memcpy(buf + n, p, k);
                        n += k;
                        buf[n++] = '\n';
                        lines++;
                }
                p += k + 1;
        }
        if (lines == 0) {
                while (start > 0 && text[start - 1] == '\n')
                        start--;
                for (size_t end = start; start > 0 && lines < max_lines && end - start < SBX_RUNTIME_SUMMARY_BYTES;) {
                        start--;
                        if (start == 0 || text[start - 1] == '\n')
                                lines++;
                }
                n = MIN(len - start, (size_t) SBX_RUNTIME_SUMMARY_BYTES);
                memcpy(buf, text + len - n, n);
        }
        while (n > 0 && buf[n - 1] == '\n')
                n--;
        return msg_json_string(buf, n, TOOL_TEXT);
}

/* What detection reads of the command: runtime, executable and args. */
static char *command_line(const json_t *args, const char *exe) {
        char *buf = NULL;
        size_t len = 0, i;
        json_t *a;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return NULL;
        fprintf(f, "%s %s", tool_arg_str(args, "runtime"), exe);
        json_array_foreach(json_object_get(args, "args"), i, a)
                fprintf(f, " %s", json_string_value(a));
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

static json_t *next_action(const Sbx__RuntimeExecuteReply *r, const json_t *digest) {
        const json_t *failures = json_object_get(digest, "failures"), *f;
        const char *handle = r->artifact[0] ? r->artifact : r->run->command_session;
        json_t *terms = json_array();
        size_t i;

        json_array_foreach(failures, i, f)
                if (i < 2 && json_string_length(json_object_get(f, "name")) > 0)
                        json_array_append(terms, json_object_get(f, "name"));
        json_array_append_new(terms, json_string("error"));
        json_array_append_new(terms, json_string("failed"));
        json_array_append_new(terms, json_string("exception"));
        return json_pack("{s:s, s:s, s:s, s:s, s:o}", "kind", "queryOutput", "action", "runtime_query_output",
                         "message", "Query the output with runtime_query_output (artifactHandle, queryTerms or "
                                    "lineRange) instead of running the command again.",
                         "artifactHandle", handle, "queryTerms", terms);
}

static const char *status_of(const Sbx__RuntimeExecuteReply *r) {
        const Sbx__ClaimExecReply *e = r->run;

        return e->timed_out ? "timeout" : r->cancelled ? "cancelled"
               : e->has_exit_code && e->exit_code == 0 ? "success" : "failure";
}

static int render_execute(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__RuntimeExecuteReply *r = reply->runtime_execute;
        const Sbx__ClaimExecReply *e = r ? r->run : NULL;
        const char *mode = tool_arg_str(args, "outputMode"), *in;
        const json_t *terms = strcmp(mode, "intent") == 0 ? json_object_get(args, "queryTerms") : NULL;
        json_t *lines = json_object_get(args, "maxResponseLines"), *digest = json_null(), *o;
        size_t max_lines = json_is_integer(lines) ? (size_t) json_integer_value(lines) : SBX_RUNTIME_SUMMARY_LINES;
        bool minimal = strcmp(mode, "minimal") == 0;

        if (reply->body_case != SBX__REPLY__BODY_RUNTIME_EXECUTE || !e)
                return -EBADMSG;
        if (!minimal) {
                _cleanup_free_ char *cmd = command_line(args, r->executable);
                DigestReport rep[SBX_DIGEST_JUNIT_FILES];
                size_t n = MIN(r->n_reports, ELEMENTSOF(rep));

                for (size_t i = 0; i < n; i++)
                        rep[i] = (DigestReport) {
                                .path = r->reports[i]->path, .found = r->reports[i]->found,
                                .data = (const char *) r->reports[i]->content.data,
                                .len = r->reports[i]->content.len, .truncated = r->reports[i]->truncated,
                                .size = r->reports[i]->size, .error = r->reports[i]->error,
                        };
                digest = digest_make_reports(cmd, (const char *) e->stdout.data, e->stdout.len,
                                             (const char *) e->stderr.data, e->stderr.len,
                                             e->has_exit_code && e->exit_code == 0, rep, n);
        }
        o = json_pack("{s:s, s:o, s:o, s:I, s:o, s:o, s:o, s:o, s:{s:b, s:b, s:I, s:I}, s:o, s:s, s:o, s:s, s:s}",
                      "status", status_of(r),
                      "exitCode", e->has_exit_code ? json_integer(e->exit_code) : json_null(),
                      "signal", e->signal ? json_integer(e->signal) : json_null(),
                      "durationMs", (json_int_t) r->duration_ms,
                      "stdoutSummary", minimal ? json_string("") : summary_of((const char *) e->stdout.data, e->stdout.len, max_lines, terms),
                      "stderrSummary", minimal ? json_string("") : summary_of((const char *) e->stderr.data, e->stderr.len, max_lines, terms),
                      "digest", digest,
                      "artifactHandle", r->artifact[0] ? json_string(r->artifact) : json_null(),
                      "truncation", "stdoutTruncated", e->stdout_truncated, "stderrTruncated", e->stderr_truncated,
                      "totalStdoutBytes", (json_int_t) r->stdout_bytes, "totalStderrBytes", (json_int_t) r->stderr_bytes,
                      "nextAction", strcmp(status_of(r), "success") == 0 ? json_null() : next_action(r, digest),
                      "executable", r->executable,
                      "end_reason", e->end_reason[0] ? json_string(e->end_reason) : json_null(),
                      "command_session_id", e->command_session, "workspace_session_id", r->workspace_session);
        in = json_string_value(json_object_get(args, "stdin"));
        if (o && in) {
                char hex[SHA256_HEX_SIZE];
                size_t n = json_string_length(json_object_get(args, "stdin"));

                sha256_hex(in, n, hex);
                json_object_set_new(o, "stdinBytes", json_integer((json_int_t) n));
                json_object_set_new(o, "stdinSha256", json_string(hex));
        }
        *ret = o;
        return o ? 0 : -ENOMEM;
}

static void text_execute(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const json_t *digest = json_object_get(sc, "digest"), *failures = json_object_get(digest, "failures"), *x;
        const json_t *handle = json_object_get(sc, "artifactHandle");
        size_t i;

        fprintf(f, "%s", tool_sc_str(sc, "status"));
        if (json_is_integer(json_object_get(sc, "exitCode")))
                fprintf(f, " (exit %lld)", (long long) json_integer_value(json_object_get(sc, "exitCode")));
        fprintf(f, " in %llu ms; command session %s", tool_sc_uint(sc, "durationMs"), tool_sc_str(sc, "command_session_id"));
        if (json_is_string(handle))
                fprintf(f, "; artifact %s", json_string_value(handle));
        fputc('\n', f);
        if (json_is_object(digest))
                fprintf(f, "digest (%s): %s\n", tool_sc_str(digest, "parser"), tool_sc_str(digest, "summary"));
        json_array_foreach(failures, i, x) {
                fprintf(f, "- %s: %s", tool_sc_str(x, "name"), tool_sc_str(x, "message"));
                if (json_is_string(json_object_get(x, "file")))
                        fprintf(f, " (%s:%llu)", tool_sc_str(x, "file"), tool_sc_uint(x, "line"));
                fputc('\n', f);
        }
        if (tool_sc_str(sc, "stdoutSummary")[0])
                fprintf(f, "--- stdout (last lines) ---\n%s\n", tool_sc_str(sc, "stdoutSummary"));
        if (tool_sc_str(sc, "stderrSummary")[0])
                fprintf(f, "--- stderr (last lines) ---\n%s\n", tool_sc_str(sc, "stderrSummary"));
}

/* ---- runtime_query_output ------------------------------------------------------------ */

static Sbx__Stream stream_arg(const json_t *v) {
        const char *s = json_string_value(v);

        return s && strcmp(s, "stdout") == 0   ? SBX__STREAM__STREAM_STDOUT
               : s && strcmp(s, "stderr") == 0 ? SBX__STREAM__STREAM_STDERR
                                               : SBX__STREAM__STREAM_MERGED;
}

static int prepare_query(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__RuntimeQuery *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_RUNTIME_QUERY,
                                                 &sbx__runtime_query__descriptor);
        json_t *cursor = json_object_get(args, "cursor"), *range = json_object_get(args, "lineRange");
        const char *handle;
        size_t n_terms = 0;
        uint64_t v;
        int r;

        r = tool_arg_string(args, "artifactHandle", 1, SBX_NAME_MAX, &handle, NULL, ret_error);
        if (r >= 0)
                r = string_items(args, "queryTerms", SBX_QUERY_TERMS_MAX, SBX_DIGEST_FIELD_MAX, &m->terms, &n_terms,
                                 &req->heap, ret_error);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_terms; i++)
                if (!m->terms[i][0])
                        return tool_arg_invalid(ret_error, "queryTerms[%zu]: must not be empty", i);
        if (n_terms == 0 && !range)
                return tool_arg_invalid(ret_error, "queryTerms: give at least one term, or a lineRange "
                                        "{stream, startLine, endLine}");
        m->n_terms = n_terms;
        m->handle = (char *) handle;
        m->stream = stream_arg(json_object_get(args, "stream"));
        if (cursor) {
                m->has_cursor = true;
                m->cursor_stream = stream_arg(json_object_get(cursor, "stream"));
                m->cursor_after_line = (uint64_t) json_integer_value(json_object_get(cursor, "afterLine"));
        }
        if (range) {
                m->has_range = true;
                m->range_stream = stream_arg(json_object_get(range, "stream"));
                m->range_start = (uint64_t) json_integer_value(json_object_get(range, "startLine"));
                m->range_end = (uint64_t) json_integer_value(json_object_get(range, "endLine"));
        }
        if (tool_arg_int(args, "maxExcerpts", &v))
                m->max_excerpts = (uint32_t) v;
        if (tool_arg_int(args, "contextLines", &v))
                m->context_lines = (uint32_t) v;
        return 0;
}

static const char *stream_name(Sbx__Stream s) {
        return s == SBX__STREAM__STREAM_STDOUT ? "stdout" : s == SBX__STREAM__STREAM_STDERR ? "stderr" : "merged";
}

static int render_query(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__RuntimeQueryReply *q = reply->runtime_query;
        json_t *excerpts, *streams, *o;

        if (reply->body_case != SBX__REPLY__BODY_RUNTIME_QUERY || !q)
                return -EBADMSG;
        excerpts = json_array();
        streams = json_array();
        for (size_t i = 0; excerpts && i < q->n_excerpts; i++) {
                const Sbx__RuntimeExcerpt *e = q->excerpts[i];
                json_array_append_new(excerpts, json_pack("{s:I, s:I, s:o, s:s}", "lineStart", (json_int_t) e->line_start,
                                                          "lineEnd", (json_int_t) e->line_end, "content",
                                                          msg_json_string((const char *) e->content.data, e->content.len,
                                                                          TOOL_TEXT),
                                                          "source", stream_name(e->source)));
        }
        for (size_t i = 0; streams && i < q->n_searched_streams; i++)
                json_array_append_new(streams, json_string(q->searched_streams[i]));
        o = json_pack("{s:s, s:o, s:I, s:I, s:o, s:s, s:I, s:b, s:o}", "artifactHandle", q->handle, "excerpts", excerpts,
                      "totalLines", (json_int_t) q->total_lines, "totalBytes", (json_int_t) q->total_bytes,
                      "searchedStreams", streams, "matchStatus", q->match_status, "matchCount",
                      (json_int_t) q->match_count, "matchCountComplete", q->match_count_complete, "nextCursor",
                      /* a merged transcript's cursor names "both", as the argument does */
                      q->has_next_cursor ? json_pack("{s:s, s:I}", "stream", q->next_stream == SBX__STREAM__STREAM_MERGED
                                                                              ? "both" : stream_name(q->next_stream), "afterLine",
                                                     (json_int_t) q->next_after_line)
                                         : json_null());
        *ret = o;
        return o ? 0 : -ENOMEM;
}

static void text_query(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const json_t *excerpts = json_object_get(sc, "excerpts"), *e, *next = json_object_get(sc, "nextCursor");
        size_t i;

        fprintf(f, "%s: %llu matching line%s; %llu lines, %llu bytes\n", tool_sc_str(sc, "matchStatus"),
                tool_sc_uint(sc, "matchCount"), tool_plural(tool_sc_uint(sc, "matchCount")),
                tool_sc_uint(sc, "totalLines"), tool_sc_uint(sc, "totalBytes"));
        json_array_foreach(excerpts, i, e)
                fprintf(f, "--- %s lines %llu-%llu ---\n%s", tool_sc_str(e, "source"), tool_sc_uint(e, "lineStart"),
                        tool_sc_uint(e, "lineEnd"), tool_sc_str(e, "content"));
        if (json_is_object(next))
                fprintf(f, "more: cursor {stream: %s, afterLine: %llu}\n", tool_sc_str(next, "stream"),
                        tool_sc_uint(next, "afterLine"));
}

/* ---- the table ------------------------------------------------------------------------ */

static const ToolDef artifacts_tools[] = {
        {
                .name = "runtime_execute",
                .title = "Run a runtime and digest its output",
                .description =
                        "Run inline code or arguments with one of the runtimes " RUNTIMES " (those the "
                        "administrator allows: runtime_allowed) in the sandbox's /workspace, and wait until it "
                        "ends (timeoutMs, at most runtime_max_duration_ms). The answer is a digest of the output "
                        "(the tool detected: node --test, TAP, pytest, go test, cargo test, jest, vitest, tsc, "
                        "ESLint, gcc/clang, make, JUnit XML printed or named in args (--junitxml and the like), else "
                        "generic; its failures with file and line), the last "
                        "maxResponseLines lines of stdout and stderr (default 20), and, with persistOutput "
                        "(default true), an artifactHandle: query the full output with runtime_query_output "
                        "instead of running the command again. A toolchain missing from the sandbox's image is an "
                        "error naming the executable and the image that has it. stdin (UTF-8, at most 512 KiB) is "
                        "written then closed. The command runs in a workspace session (workspace_session_id, or an "
                        "automatic one that publishes its changes).",
                .input_schema = execute_input,
                .output_schema = execute_output,
                .annotations = annotations_execute,
                .prepare = prepare_execute,
                .render = render_execute,
                .text = text_execute,
        },
        {
                .name = "runtime_query_output",
                .title = "Search a run's stored output",
                .description =
                        "Search the stdout and stderr kept behind an artifactHandle of runtime_execute, or of any "
                        "command session (command_session_id) of your sandboxes, for queryTerms "
                        "(case-insensitive): excerpts of at most maxExcerpts (default 10) windows with contextLines "
                        "(default 3) around the matches (adjacent ones join, up to 50 lines), numbered lines (1-based), and a "
                        "nextCursor when more remain (pass it back as cursor): a page reads only up to the match "
                        "after it, so matchCount counts every match after the cursor only when matchCountComplete. With no match the last "
                        "lines come back (noMatchFallback). lineRange returns exact lines (inclusive, at most 1000). "
                        "Another user's handle and a made-up one are both not found.",
                .input_schema = query_input,
                .output_schema = query_output,
                .annotations = annotations_read_only,
                .prepare = prepare_query,
                .render = render_query,
                .text = text_query,
        },
};

TOOL_SET_DEFINE(artifacts);
