/* JSON-RPC 2.0 over newline-delimited stdio, as MCP uses it: a bounded line
 * reader, a pure line parser (bytes in, a classified message out, no I/O, no
 * logging, so it can be unit-tested and fuzzed), and the response builders.
 * Non-logging; fallible functions return -errno. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "jsonwrite.h"

#define JSONRPC_PARSE_ERROR (-32700)
#define JSONRPC_INVALID_REQUEST (-32600)
#define JSONRPC_METHOD_NOT_FOUND (-32601)
#define JSONRPC_INVALID_PARAMS (-32602)
#define JSONRPC_INTERNAL_ERROR (-32603)

/* Every outgoing line, newline included, stays below this: the SDK's stdio
 * client drops the connection at a 10 MiB line. */
#define JSONRPC_OUT_MAX (10u * 1024u * 1024u - 1u)

typedef enum JsonRpcKind {
        JSONRPC_EMPTY,          /* blank line (or only whitespace / "\r"): ignore */
        JSONRPC_REQUEST,        /* method and id: must be answered */
        JSONRPC_NOTIFICATION,   /* method, no id: never answered */
        JSONRPC_RESPONSE,       /* result or error from the peer; we send no requests */
        JSONRPC_INVALID,        /* answer with error_code, error_message and id */
} JsonRpcKind;

typedef struct JsonRpcMessage {
        JsonRpcKind kind;
        json_t *root;           /* the parsed line; method and params borrow from it */
        json_t *id;             /* own reference: string or integer; NULL means null */
        const char *method;     /* REQUEST, NOTIFICATION; contains no NUL */
        json_t *params;         /* borrowed; NULL when absent */
        int error_code;         /* INVALID */
        char error_message[256];
} JsonRpcMessage;

/* Parse one line (without its "\n"; one trailing "\r" is dropped). Any
 * content is accepted: malformed input yields kind JSONRPC_INVALID with the
 * JSON-RPC error to send. Returns 0, or -ENOMEM. */
int jsonrpc_parse(const char *line, size_t len, JsonRpcMessage **ret_msg);
JsonRpcMessage *jsonrpc_message_free(JsonRpcMessage *m);
static inline void jsonrpc_message_freep(JsonRpcMessage **m) {
        (void) jsonrpc_message_free(*m);
}
#define _cleanup_jsonrpc_message_ __attribute__((cleanup(jsonrpc_message_freep)))

/* Responses. id NULL or json null gives "id": null. Result is stolen. NULL on ENOMEM. */
json_t *jsonrpc_result(const json_t *id, json_t *result);
json_t *jsonrpc_error(const json_t *id, int code, const char *message);

/* Serialize msg as one compact line ending in "\n". -EMSGSIZE if the line
 * would reach max bytes, -ENOMEM. */
int jsonrpc_serialize(const json_t *msg, size_t max, char **ret_line, size_t *ret_len);
/* The same with json_write_parts' splice and parts: ret_line is the line's
 * last part, with its "\n". */
int jsonrpc_serialize_parts(const json_t *msg, const JsonSplice *splice, size_t max, json_part_t part, void *userdata,
                            char **ret_line, size_t *ret_len);
/* The id of a request from the end of its text ("...,"id":7}"), or NULL. */
json_t *jsonrpc_id_from_tail(const char *tail, size_t len);

/* Bounded line splitter. A line longer than max bytes (the "\n" not counted)
 * is discarded as it arrives, so memory stays near max; when its "\n" comes,
 * the handler is called once with oversize set and the line's last
 * LINE_TAIL_MAX bytes (clients such as the MCP SDK write "id" last, so the
 * answer can still name the request). */
#define LINE_TAIL_MAX 128u
typedef int (*line_handler_t)(const char *line, size_t len, bool oversize, void *userdata);

typedef struct LineReader {
        char *buf;
        size_t len;
        size_t size;
        size_t max;
        bool discarding;
        char tail[LINE_TAIL_MAX];
        size_t tail_len;
} LineReader;

void line_reader_init(LineReader *lr, size_t max);
void line_reader_done(LineReader *lr);
/* Split data into lines and call handler for each complete one. Stops at and
 * returns the first negative handler return value; -ENOMEM. */
int line_reader_feed(LineReader *lr, const char *data, size_t n, line_handler_t handler, void *userdata);
/* End of input: a final line without "\n" is handed over as if terminated. */
int line_reader_finish(LineReader *lr, line_handler_t handler, void *userdata);
