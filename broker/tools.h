/* The MCP tools sandbox-mcp offers. Each tool set is a module (set-*.c)
 * with one table row per tool: name, title, description, the published
 * input and output schemas (tool-schemas.c), annotations, how validated
 * arguments become a request to sbxd, and how sbxd's reply becomes the
 * tool result. This is the registry over them (tools.c): --set, tools/list,
 * lookup, validation and the result envelope. Non-logging. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "sbx.pb-c.h"
#include "wire.h"

/* Every tool set, in tools/list order: X(name, NAME). Its tools are in
 * broker/set-NAME.c, which defines tool_set_NAME (tool-set.h); a new set is
 * that file, its line in broker/module.mk, and one line here. */
#define TOOL_SETS(X)                    \
        X(runtime, RUNTIME)             \
        X(sessions, SESSIONS)           \
        X(lifecycle, LIFECYCLE)         \
        X(script, SCRIPT)               \
        X(artifacts, ARTIFACTS)         \
        X(boxes, BOXES)

enum {
#define TOOL_SET_INDEX_(name, NAME) TOOL_SET_INDEX_##NAME,
        TOOL_SETS(TOOL_SET_INDEX_)
#undef TOOL_SET_INDEX_
        TOOL_SET_COUNT_
};

/* Tool sets as bits, selected with --set. */
typedef enum ToolSet {
#define TOOL_SET_BIT_(name, NAME) TOOL_SET_##NAME = 1u << TOOL_SET_INDEX_##NAME,
        TOOL_SETS(TOOL_SET_BIT_)
#undef TOOL_SET_BIT_
} ToolSet;

/* "runtime, sessions": the names --set knows, for help and errors. */
#define TOOL_SET_NAME_(name, NAME) ", " #name
#define TOOL_SETS_KNOWN (TOOL_SETS(TOOL_SET_NAME_) + 2)

/* Parse a comma-separated list of set names ("runtime,sessions"), any of
 * them in any order. -EINVAL for an empty list, an empty item or an unknown
 * name (then *ret_bad points into list at it). */
int tool_sets_parse(const char *list, unsigned *ret_sets, const char **ret_bad);
/* Two of sets define the same tool name: -ENOTUNIQ with the tool and the
 * two sets' names (static strings); 0 if none do. */
int tool_sets_conflict(unsigned sets, const char **ret_tool, const char **ret_a, const char **ret_b);
/* Every set, in order, but those that would define a tool name an earlier
 * one has (boxes: its sandbox_status is the script set's too): what a
 * gateway token without sets gets. */
unsigned tool_sets_all(void);

/* Room in a ToolRequest for the request message a tool builds; the prepare
 * functions take it with tool_request_body() (tool-set.h), which checks. */
#define TOOL_REQUEST_BODY_SIZE 256

/* A request for sbxd built from a tool call. Strings borrow from the
 * arguments object, which must outlive the request. fd, when >= 0, is a
 * sealed memfd owned by the request (file_write content, file_edit's packed
 * EditList) to attach to the frame as its one SCM_RIGHTS fd; take it with
 * TAKE_FD or release it with tool_request_done(). */
typedef struct ToolRequest {
        Sbx__Msg msg;
        union {
                max_align_t align;
                unsigned char bytes[TOOL_REQUEST_BODY_SIZE];
        } body;                 /* the message msg carries */
        int fd;
        int more_fds[SBX_WIRE_MAX_FDS - 1]; /* after fd, in order: sandbox_script's host inputs */
        size_t n_more_fds;
        void *heap;             /* what the message points to beyond body (labels), freed with it */
        uint64_t timeout_s;     /* the call gives up if sbxd has not answered within this (0: it waits) */
} ToolRequest;

void tool_request_done(ToolRequest *req);

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

unsigned tools_sets(const Tools *t);

/* The lifecycle set's resource template sandboxes://{namespace}
 * (set-lifecycle.c): its resources/templates/list result, a CLAIM_LIST
 * request for a URI (-EINVAL with *ret_error for a bad one), and the
 * resources/read result of the reply (-ENOENT, -EBADMSG: an error). */
#define MCP_RESOURCE_NOT_FOUND (-32002)
json_t *lifecycle_resource_templates(void);
int lifecycle_resource_prepare(const char *uri, ToolRequest *req, char **ret_error);
int lifecycle_resource_render(const Sbx__Reply *reply, const char *uri, json_t **ret);

/* The script set's live input schema (set-script.c): the descriptions of
 * sandbox_script's files and directories name the n roots of
 * script_allowed_paths that sbxd told (known), warn that there are none,
 * or say sbxd did not tell (known false). */
int script_set_roots(Tools *t, char **roots, size_t n, bool known);

/* The "tools/list" result, {"tools":[...]}, borrowed. */
const json_t *tools_list_result(const Tools *t);
/* The enabled tool with this name (len bytes, may hold NUL), or NULL. */
const Tool *tools_find(const Tools *t, const char *name, size_t len);
const char *tool_name(const Tool *tool);
/* Bytes of the JSON-RPC line of a result of this tool at most: JSONRPC_OUT_MAX
 * (what SDK clients read by default), or more for download_file. */
size_t tool_result_max(const Tool *tool);

/* Validate arguments (NULL: none given; modified: defaults applied) against
 * the tool's input schema and its further limits, and build the request.
 * Returns 0; -EINVAL with *ret_error = "invalid arguments: <argument>: <why>";
 * -ENOMEM, or another -errno if a memfd could not be made. On failure
 * ret_req->fd is -EBADF. */
int tool_prepare(const Tool *tool, json_t *arguments, ToolRequest *ret_req, char **ret_error);

/* What a successful result carries in content besides structuredContent
 * (--content). */
typedef enum ContentMode {
        CONTENT_TEXT,           /* one text block rendered for reading: a header line, then the text as it is */
        CONTENT_JSON,           /* one text block with the JSON of structuredContent */
        CONTENT_NONE,           /* an empty array, as the seed's examples show */
} ContentMode;

/* {content:[{type:text,text}], isError:true}; NULL on ENOMEM. */
json_t *tool_error_result(const char *text);

/* The tool result for sbxd's reply to one of this tool's requests: an error
 * result for err < 0 or a malformed reply, else structuredContent plus the
 * content that mode asks for. args are the validated call arguments (may be
 * NULL), for result fields sbxd does not echo; fd the descriptor that came
 * with the reply (download_file's content), or -EBADF. Returns 0 or -ENOMEM. */
int tool_result_from_reply(const Tool *tool, const json_t *args, const Sbx__Reply *reply, int fd, ContentMode mode,
                           json_t **ret_result);
