/* One MCP session of the broker: the JSON-RPC methods (initialize,
 * tools/list, tools/call, resources (list, read, templates), ping, cancellation), the tools of its
 * sets, and its connection to sbxd, on which each call is one request. The
 * front end (sandbox-mcp on stdio, sbx-gateway over HTTP) hands it the
 * client's messages, polls its socket and takes what it sends back through
 * the send callback. One session object per MCP session: sandbox-mcp has
 * one, the gateway one per Mcp-Session-Id. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tools.h"

#define MCP_DEFAULT_SOCKET "/run/sbx/sbxd.sock"

typedef struct McpSession McpSession;

/* A message for the client, len bytes ending in "\n". id: the request it
 * answers (response) or belongs to (a progress notification), or NULL.
 * A negative return ends the front end's loop (stdout gone). */
typedef int (*mcp_send_t)(void *userdata, const char *line, size_t len, const json_t *id, bool response);
/* A front end that can take a long response in parts gets its first parts
 * this way, as they are written (a binary download_file's), then the last
 * one through send. NULL: every message comes whole through send. */
typedef int (*mcp_send_part_t)(void *userdata, const char *data, size_t len);

typedef struct McpSessionConfig {
        const char *socket_path;        /* sbxd.sock */
        const char *client_name;        /* HELLO's: "sandbox-mcp", "sbx-gateway" */
        ContentMode content;
        const Tools *tools;             /* borrowed, outlives the session */
        const char *token;              /* NULL: the peer's own uid; else the bearer token to act for (gateway) */
        const char *identity;           /* NULL: made at initialize; else the MCP session identity (32 hex) */
        const char *gateway_url;        /* NULL; gateway: the URL its clients reach it at (ClientHello's) */
        mcp_send_t send;
        mcp_send_part_t send_part;
        void *userdata;
} McpSessionConfig;

int mcp_session_new(const McpSessionConfig *cfg, McpSession **ret);
McpSession *mcp_session_free(McpSession *b);
static inline void mcp_session_freep(McpSession **b) {
        (void) mcp_session_free(*b);
}

/* Ask sbxd for the caller's sandboxes, waiting up to SBX_MCP_PROBE_MS; what
 * it learns goes into the initialize instructions. Never fails for sbxd being
 * unreachable (that too is said there). */
int mcp_session_probe(McpSession *b);
/* One message from the client (a line_handler_t; userdata: the session). */
int mcp_session_handle_line(const char *line, size_t len, bool oversize, void *userdata);
/* The client gave up on a request (notifications/cancelled, or the HTTP
 * request that carried it went away): sbxd abandons it, it is never answered. */
int mcp_session_cancel(McpSession *b, const json_t *request_id);
/* Its connection to sbxd (-EBADF: none), whether it has frames to write, and
 * what to do when poll() says it is ready. */
int mcp_session_fd(const McpSession *b);
bool mcp_session_wants_write(const McpSession *b);
int mcp_session_on_socket(McpSession *b, short revents);
size_t mcp_session_n_pending(const McpSession *b);
/* Milliseconds until the first call in flight reaches its timeout argument
 * (for poll(); -1: none has one), and what to do then: each such call gets an
 * error result naming its timeout and sbxd is told to abandon it. */
int mcp_session_next_timeout_ms(const McpSession *b);
int mcp_session_expire(McpSession *b);
const char *mcp_session_identity(const McpSession *b);
