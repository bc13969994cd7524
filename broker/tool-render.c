/* The results the tool sets share: the Publication and command-output
 * shapes of structuredContent, and the text block rendered for reading
 * (--content=text) of command results and of tools without one of their
 * own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx-limits.h"
#include "tool-set.h"

const MsgJsonMap tool_publication_map = MSG_JSON_MAP_INIT(sbx__publication__descriptor,
        MSG_JSON_NAMES("published layer owner changed_paths"),
        MSG_JSON_FIELD("error", "error", .flags = MSG_JSON_OMIT_EMPTY),
        MSG_JSON_FIELD("conflicts", "conflicts", .flags = MSG_JSON_OMIT_EMPTY));

/* What a command of a sandbox with an egress policy other than none reached (docs/egress.md). */
const MsgJsonMap tool_egress_audit_map = MSG_JSON_MAP_INIT(sbx__egress_audit__descriptor,
        MSG_JSON_NAMES("policy contacted refused"),
        MSG_JSON_FIELD("truncated", "truncated", .flags = MSG_JSON_OMIT_EMPTY));

static const MsgJsonMap command_output_map = MSG_JSON_MAP_INIT(sbx__command_output__descriptor,
        TOOL_COMMAND_FIELDS,
        MSG_JSON_NAMES("wall_time_seconds command_total_time_seconds start_offset end_offset total_lines "
                       "original_token_count output"),
        MSG_JSON_FIELD("publication", "publication", .sub = &tool_publication_map),
        MSG_JSON_FIELD("egress", "egress", .flags = MSG_JSON_OMIT_EMPTY, .sub = &tool_egress_audit_map));

int tool_render_object(const MsgJsonMap *map, const void *body, json_t **ret) {
        *ret = msg_json_object(map, body, TOOL_TEXT);
        return *ret ? 0 : -ENOMEM;
}

int tool_render_command(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_COMMAND || !reply->command)
                return -EBADMSG;
        return tool_render_object(&command_output_map, reply->command, ret);
}

/* ---- the rendered text block -------------------------------------------------
 * --content=text (the default): one header line that says what happened, what
 * is shown of how much and how to get the rest, then the text itself as it is
 * (no JSON escaping). Only what structuredContent (and the reply) hold, in a
 * fixed order and format: the same result always renders the same text.
 * structuredContent keeps every field; the header leaves out what an agent
 * does not need (an ended automatic session's id, a token estimate when
 * nothing was cut, six decimals of seconds). */

const char *tool_sc_str(const json_t *o, const char *key) {
        const char *v = json_string_value(json_object_get(o, key));
        return v ? v : "";
}

unsigned long long tool_sc_uint(const json_t *o, const char *key) {
        const json_t *v = json_object_get(o, key);
        return json_is_integer(v) && json_integer_value(v) > 0 ? (unsigned long long) json_integer_value(v) : 0;
}

/* Seconds with as many decimals as matter: 0.03, 2.5, 120. */
static void put_seconds(FILE *f, double t) {
        fprintf(f, t < 1 ? "%.2f s" : t < 100 ? "%.1f s" : "%.0f s", t);
}

const char *tool_plural(unsigned long long n) {
        return n == 1 ? "" : "s";
}

/* "; published layer 7 (3 changed paths)", or why nothing was. */
void tool_put_publication(FILE *f, const json_t *p) {
        const json_t *conflicts = json_object_get(p, "conflicts");
        size_t i;
        json_t *c;

        if (json_is_true(json_object_get(p, "published"))) {
                fprintf(f, "; published layer %llu (%llu changed path%s, owner %s)", tool_sc_uint(p, "layer"),
                        tool_sc_uint(p, "changed_paths"), tool_plural(tool_sc_uint(p, "changed_paths")),
                        tool_sc_str(p, "owner"));
                return;
        }
        if (!tool_sc_str(p, "error")[0]) {
                fputs("; nothing to publish (nothing changed)", f);
                return;
        }
        fprintf(f, "; %s", tool_sc_str(p, "error"));
        json_array_foreach(conflicts, i, c) {
                if (i == SBX_TEXT_PATHS_SHOWN) {
                        fprintf(f, " and %zu more", json_array_size(conflicts) - i);
                        break;
                }
                fprintf(f, "%s%s", i ? ", " : " (conflicting: ", json_string_value(c));
        }
        if (json_array_size(conflicts) > 0)
                fputc(')', f);
}

/* Status, exit, signal and end reason: "ok, exit 0", "timed_out, signal 9 (SIGKILL), timeout". */
static void put_command_status(FILE *f, const json_t *sc) {
        const json_t *sig = json_object_get(sc, "signal");
        const char *end = tool_sc_str(sc, "end_reason");

        fputs(tool_sc_str(sc, "status"), f);
        if (json_is_integer(json_object_get(sc, "exit_code")))
                fprintf(f, ", exit %" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(sc, "exit_code")));
        if (json_is_integer(sig)) {
                const char *name = sigabbrev_np((int) json_integer_value(sig));
                fprintf(f, ", signal %" JSON_INTEGER_FORMAT "%s%s%s", json_integer_value(sig), name ? " (SIG" : "",
                        name ?: "", name ? ")" : "");
        }
        if (end[0] && strcmp(end, "exit") != 0 && strcmp(end, "signal") != 0)
                fprintf(f, ", %s", end);
}

void tool_text_command(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        unsigned long long start = tool_sc_uint(sc, "start_offset"), end = tool_sc_uint(sc, "end_offset"),
                           total = tool_sc_uint(sc, "total_lines");
        const json_t *pub = json_object_get(sc, "publication");
        bool running = strcmp(tool_sc_str(sc, "status"), "running") == 0, cut = start > 0 || end < total;
        /* A session that still exists: running, managed (no publication), or kept after a refusal. */
        bool session_lives = running || !json_is_object(pub) || tool_sc_str(pub, "error")[0];

        put_command_status(f, sc);
        fputs(", ", f);
        put_seconds(f, json_number_value(json_object_get(sc, "command_total_time_seconds")));
        if (running)
                fputs(" so far", f);
        if (total == 0)
                fputs("; no output", f);
        else if (!cut)
                fprintf(f, "; %llu line%s", total, tool_plural(total));
        else
                fprintf(f, "; lines %llu-%llu of %llu shown", start, end, total);
        if (start > 0)
                fprintf(f, "; %llu earlier line%s not shown; read_command_lines start_offset=0", start,
                        tool_plural(start));
        if (end < total)
                fprintf(f, "; %llu later line%s not shown; read_command_lines start_offset=%llu", total - end,
                        tool_plural(total - end), end);
        if (cut)
                fprintf(f, "; whole output ~%llu tokens", tool_sc_uint(sc, "original_token_count"));
        if (json_is_object(pub))
                tool_put_publication(f, pub);
        if (running)
                fprintf(f, "; command_session_id %s (write_command_stdin, read_command_lines)",
                        tool_sc_str(sc, "command_session_id"));
        else if (cut)
                fprintf(f, "; command_session_id %s", tool_sc_str(sc, "command_session_id"));
        if (session_lives)
                fprintf(f, "; workspace_session_id %s", tool_sc_str(sc, "workspace_session_id"));
        fputc('\n', f);
        fputs(tool_sc_str(sc, "output"), f);
}

/* A scalar as text: strings as they are, numbers as put_seconds rounds them. */
static void put_scalar(FILE *f, const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_STRING:
                fputs(json_string_value(v), f);
                break;
        case JSON_INTEGER:
                fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                break;
        case JSON_REAL:
                fprintf(f, fabs(json_real_value(v)) < 100 ? "%.2f" : "%.0f", json_real_value(v));
                break;
        case JSON_TRUE:
        case JSON_FALSE:
                fputs(json_is_true(v) ? "true" : "false", f);
                break;
        default:
                fputs(json_is_null(v) ? "null" : "...", f);
                break;
        }
}

/* An object on one line: "key=value key.sub=value list=a,b". */
static void put_flat(FILE *f, const char *prefix, const json_t *o, bool *first) {
        const char *key;
        json_t *v;

        json_object_foreach((json_t *) o, key, v) {
                if (json_is_object(v)) {
                        _cleanup_free_ char *sub = NULL;
                        if (asprintf(&sub, "%s%s.", prefix, key) >= 0)
                                put_flat(f, sub, v, first);
                        continue;
                }
                fprintf(f, "%s%s%s=", *first ? "" : " ", prefix, key);
                *first = false;
                if (json_is_array(v)) {
                        size_t i;
                        json_t *x;
                        json_array_foreach(v, i, x) {
                                if (i > 0)
                                        fputc(',', f);
                                put_scalar(f, x);
                        }
                } else
                        put_scalar(f, v);
        }
}

/* An object on one line, anything else as a scalar. */
static void put_item(FILE *f, const json_t *v) {
        bool first = true;

        if (json_is_object(v))
                put_flat(f, "", v, &first);
        else
                put_scalar(f, v);
}

/* The other tools: "key: value" lines, an array as one line per item, and a
 * text of several lines (a diff) last, as it is. */
void tool_text_generic(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const char *key;
        json_t *v;

        json_object_foreach((json_t *) sc, key, v) {
                if (json_is_string(v) && strchr(json_string_value(v), '\n'))
                        continue;
                fprintf(f, "%s:", key);
                if (json_is_array(v)) {
                        size_t i;
                        json_t *x;
                        fprintf(f, " %zu\n", json_array_size(v));
                        json_array_foreach(v, i, x) {
                                fputs("- ", f);
                                put_item(f, x);
                                fputc('\n', f);
                        }
                        continue;
                }
                fputc(' ', f);
                put_item(f, v);
                fputc('\n', f);
        }
        json_object_foreach((json_t *) sc, key, v)
                if (json_is_string(v) && strchr(json_string_value(v), '\n'))
                        fprintf(f, "%s:\n%s", key, json_string_value(v));
}

