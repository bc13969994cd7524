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
        TOOL_SET_SESSIONS = 1u << 1,
} ToolSet;

#define TOOL_SETS_KNOWN "runtime, sessions"

/* Parse a comma-separated list of set names ("runtime,sessions"). -EINVAL for an
 * empty list or an unknown name (then *ret_bad points into list at it). */
int tool_sets_parse(const char *list, unsigned *ret_sets, const char **ret_bad);

/* A request for sbxd built from a tool call. Strings borrow from the
 * arguments object, which must outlive the request. fd, when >= 0, is a
 * sealed memfd owned by the request (file_write content, file_edit's packed
 * EditList) to attach to the frame as its one SCM_RIGHTS fd; take it with
 * TAKE_FD or release it with tool_request_done(). */
typedef struct ToolRequest {
        Sbx__Msg msg;
        union {
                Sbx__Exec exec;
                Sbx__Stdin stdin_;
                Sbx__ReadLines read_lines;
                Sbx__FileRead file_read;
                Sbx__FileWrite file_write;
                Sbx__FileEdit file_edit;
                Sbx__FileBlame file_blame;
                Sbx__SessionCreate session_create;
                Sbx__SessionFinalize session_finalize;
                Sbx__SessionList session_list;
                Sbx__SessionDiff session_diff;
                Sbx__CommandList command_list;
                Sbx__CommandCancel command_cancel;
                Sbx__SandboxList sandbox_list;
        } body;
        int fd;
} ToolRequest;

void tool_request_done(ToolRequest *req);

/* A memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING) holding exactly size bytes of
 * data, sealed with F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE,
 * its offset back at 0. Returns 0 or -errno. */
int sealed_memfd_new(const char *name, const void *data, size_t size, int *ret_fd);

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
 * NULL), for result fields sbxd does not echo. Returns 0 or -ENOMEM. */
int tool_result_from_reply(const Tool *tool, const json_t *args, const Sbx__Reply *reply, ContentMode mode,
                           json_t **ret_result);

/* Copy bytes to valid UTF-8, each invalid byte becoming U+FFFD. */
int utf8_sanitize(const void *data, size_t len, char **ret_str, size_t *ret_len);
