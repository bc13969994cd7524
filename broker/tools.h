/* The MCP tools sandbox-mcp offers, as one data table (tools.c): name, set,
 * title, description, the published input and output schemas, annotations,
 * and how validated arguments become a request to sbxd. Also the rendering
 * of sbxd's replies into tool results. Non-logging. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "sbx.pb-c.h"

/* Tool sets, selected with --set; each tool belongs to one. */
typedef enum ToolSet {
        TOOL_SET_RUNTIME = 1u << 0,
} ToolSet;

/* Parse a comma-separated list of set names ("runtime"). -EINVAL for an
 * empty list or an unknown name (then *ret_bad points into list at it). */
int tool_sets_parse(const char *list, unsigned *ret_sets, const char **ret_bad);

/* A request for sbxd built from a tool call. Strings borrow from the
 * arguments object, which must outlive the request. */
typedef struct ToolRequest {
        Sbx__Msg msg;
        union {
                Sbx__Exec exec;
                Sbx__Stdin stdin_;
                Sbx__ReadLines read_lines;
        } body;
} ToolRequest;

typedef struct ToolDef ToolDef;

typedef struct Tool {
        const ToolDef *def;
        json_t *input_schema;
        json_t *output_schema;
} Tool;

typedef struct Tools {
        unsigned sets;
        size_t n;
        Tool *tools;
        json_t *list;           /* the tools/list result */
} Tools;

int tools_new(unsigned sets, Tools **ret_tools);
Tools *tools_free(Tools *t);
static inline void tools_freep(Tools **t) {
        (void) tools_free(*t);
}

/* The "tools/list" result, {"tools":[...]}, borrowed. */
const json_t *tools_list_result(const Tools *t);
/* The enabled tool with this name (len bytes, may hold NUL), or NULL. */
const Tool *tools_find(const Tools *t, const char *name, size_t len);
const char *tool_name(const Tool *tool);

/* Validate arguments (NULL: none given; modified: defaults applied) against
 * the tool's input schema and its further limits, and build the request.
 * Returns 0; -EINVAL with *ret_error = "invalid arguments: <argument>: <why>";
 * -ENOMEM. */
int tool_prepare(const Tool *tool, json_t *arguments, ToolRequest *ret_req, char **ret_error);

/* {content:[{type:text,text}], isError:true}; NULL on ENOMEM. */
json_t *tool_error_result(const char *text);

/* The tool result for sbxd's reply to one of this tool's requests: an error
 * result for err < 0 or a malformed reply, else structuredContent plus (with
 * content_text) a text block of the same JSON. Returns 0 or -ENOMEM. */
int tool_result_from_reply(const Tool *tool, const Sbx__Reply *reply, bool content_text, json_t **ret_result);

/* Copy bytes to valid UTF-8, each invalid byte becoming U+FFFD. */
int utf8_sanitize(const void *data, size_t len, char **ret_str, size_t *ret_len);
