/* What a tool set module (broker/set-NAME.c) is made of, and the helpers
 * its tools share: argument checks and request building (tool-args.c),
 * reply rendering and text blocks (tool-render.c), the schemas
 * (tool-schemas.h). Internal to sandbox-mcp; non-logging. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "macro.h"
#include "msg-json.h"
#include "tool-schemas.h"
#include "tools.h"

#define _cleanup_json_ _cleanup_(json_decrefp)

/* Validated arguments -> the request for sbxd (req->msg); -EINVAL with
 * *ret_error for a limit the schema cannot say. */
typedef int (*tool_prepare_t)(json_t *args, ToolRequest *req, char **ret_error);
/* structuredContent for a successful reply; -EBADMSG if its body is not the
 * one this tool expects. args: the validated call arguments, or NULL. */
typedef int (*tool_render_t)(const Sbx__Reply *reply, const json_t *args, json_t **ret);
/* The text block of --content=text for a successful reply, written to f;
 * sc is the validated structuredContent. NULL: tool_text_generic. */
typedef void (*tool_text_t)(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc);
/* structuredContent for a successful reply that carries its content in fd
 * (download_file); -EILSEQ: the content is not UTF-8 text. splice: as for
 * tool_result_from_reply (NULL: put all of the content in *ret). */
typedef int (*tool_render_fd_t)(const Sbx__Reply *reply, const json_t *args, int fd, JsonSplice *splice, json_t **ret);

/* Blocks appended to the result's content after its text (every --content
 * mode): sandbox_shot's image. sc is the validated structuredContent; fd what
 * came with the reply (sandbox_shot: its picture), or -EBADF; not taken. */
typedef int (*tool_content_t)(const json_t *sc, int fd, json_t *content);

/* One tool: a row of its set's table, in tools/list order. */
struct ToolDef {
        const char *name;
        const char *title;
        const char *description;
        const char *input_schema;       /* JSON text, published as is */
        const char *output_schema;      /* JSON text */
        const char *annotations;        /* JSON text */
        tool_prepare_t prepare;
        tool_render_t render;
        tool_text_t text;
        tool_render_fd_t render_fd;     /* instead of render, for a reply with a descriptor */
        size_t result_max;              /* bytes of its result line at most; 0: JSONRPC_OUT_MAX */
        tool_content_t content;         /* more content blocks, or NULL */
};

typedef struct ToolSetDef {
        const char *name;
        const ToolDef *tools;
        size_t n_tools;
} ToolSetDef;

/* In set-NAME.c, after its table `static const ToolDef NAME_tools[]`. */
#define TOOL_SET_DEFINE(name) \
        const ToolSetDef tool_set_##name = { #name, name##_tools, ELEMENTSOF(name##_tools) }

#define TOOL_SET_DECLARE_(name, NAME) extern const ToolSetDef tool_set_##name;
TOOL_SETS(TOOL_SET_DECLARE_)
#undef TOOL_SET_DECLARE_

/* ---- arguments and requests (tool-args.c) ---------------------------------- */

/* *ret_error = "invalid arguments: <why>"; returns -EINVAL (-ENOMEM). */
_printf_(2, 3) int tool_arg_invalid(char **ret_error, const char *fmt, ...);
/* A string argument: NULL if absent. Rejects NUL bytes and lengths outside
 * [min_len, max_len]. */
int tool_arg_string(json_t *args, const char *name, size_t min_len, size_t max_len, const char **ret,
                    size_t *ret_len, char **ret_error);
/* A required id: 1..SBX_NAME_MAX bytes. */
int tool_arg_id(json_t *args, const char *name, const char **ret, char **ret_error);
/* path: 1..SBX_PATH_MAX bytes. */
int tool_arg_path(json_t *args, const char **ret, char **ret_error);
/* An optional workspace_session_id; "" when absent (as when given empty). */
int tool_arg_session(json_t *args, const char **ret, char **ret_error);
/* An integer argument the schema made >= 0; false when absent. */
bool tool_arg_int(json_t *args, const char *name, uint64_t *ret);
/* The string argument's value, "" when absent (for results). */
const char *tool_arg_str(const json_t *args, const char *key);

/* req->msg: a message of this type carrying a new body of message type desc,
 * initialized inside req; returns the body. */
void *tool_request_body(ToolRequest *req, Sbx__MsgType type, const ProtobufCMessageDescriptor *desc);

/* A request whose fields are all strings taken from the arguments; the
 * checks differ only in the kind, the fields are found by name. */
typedef enum ToolArgKind {
        TOOL_ARG_ID,            /* required id (1..SBX_NAME_MAX) */
        TOOL_ARG_SESSION,       /* optional workspace session id */
        TOOL_ARG_PATH,          /* required path (1..SBX_PATH_MAX) */
} ToolArgKind;

typedef struct ToolArgField {
        const char *arg;
        const char *field;
        ToolArgKind kind;
} ToolArgField;

int tool_prepare_strings(json_t *args, ToolRequest *req, char **ret_error, const ProtobufCMessageDescriptor *desc,
                         Sbx__MsgType type, const ToolArgField *fields, size_t n);

#define TOOL_PREPARE_STRINGS(fn, msg, TYPE, ...)                                                        \
        static int fn(json_t *args, ToolRequest *req, char **ret_error) {                             \
                static const ToolArgField fields[] = { __VA_ARGS__ };                                 \
                return tool_prepare_strings(args, req, ret_error, &msg##__descriptor,                 \
                                            SBX__MSG_TYPE__MSG_CLIENT_##TYPE, fields, ELEMENTSOF(fields)); \
        }

/* ---- results (tool-render.c) -------------------------------------------------- */

/* structuredContent's text: bytes that are not UTF-8 become U+FFFD. */
#define TOOL_TEXT MSG_JSON_TEXT_REPLACE

/* A Publication as the tools show it: error and conflicts only when set. */
extern const MsgJsonMap tool_publication_map;
extern const MsgJsonMap tool_egress_audit_map;

/* The keys a command's record starts with, in CommandOutput (the command
 * tools) and CommandInfo (list_command_sessions) alike. */
#define TOOL_COMMAND_FIELDS                                                             \
        MSG_JSON_FIELD("command_session_id", "command_session"),                        \
        MSG_JSON_FIELD("workspace_session_id", "workspace_session"),                    \
        MSG_JSON_NAMES("status exit_code"),                                             \
        MSG_JSON_FIELD("signal", "signal", .flags = MSG_JSON_NULL_EMPTY),               \
        MSG_JSON_FIELD("end_reason", "end_reason", .flags = MSG_JSON_NULL_EMPTY)

/* *ret = map's object of body (a reply body of that message), -ENOMEM. */
int tool_render_object(const MsgJsonMap *map, const void *body, json_t **ret);

/* The command-output shape (exec_command, write_command_stdin,
 * read_command_lines, cancel_command) and its text block. */
int tool_render_command(const Sbx__Reply *reply, const json_t *args, json_t **ret);
void tool_text_command(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc);

/* The text block of a tool without one of its own: "key: value" lines. */
void tool_text_generic(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc);

/* For text blocks: a string or "" and an integer >= 0 or 0 of a
 * structuredContent object, "s" unless n is 1, and a publication as
 * "; published layer 7 (3 changed paths, owner ...)" or why nothing was. */
const char *tool_sc_str(const json_t *o, const char *key);
unsigned long long tool_sc_uint(const json_t *o, const char *key);
const char *tool_plural(unsigned long long n);
void tool_put_publication(FILE *f, const json_t *p);
