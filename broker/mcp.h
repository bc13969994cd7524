/* MCP lifecycle pieces that need no I/O: protocol version negotiation and
 * the initialize result. Non-logging. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#define MCP_LATEST_VERSION "2025-11-25"
#define MCP_SERVER_NAME "sandbox-mcp"
#define MCP_SERVER_TITLE "sbx sandbox"

/* Every revision sandbox-mcp answers with, newest first; NULL-terminated.
 * A tools-only server behaves the same under each. */
extern const char *const mcp_supported_versions[];

/* The revision to answer for the requested one (NULL: not given): the same
 * if supported, otherwise the latest. Never fails. */
const char *mcp_negotiate_version(const char *requested);

/* The result of "initialize" for its params (may be NULL or malformed: a
 * missing or odd protocolVersion gets the latest). status, when not NULL, is
 * appended to the instructions: what sandbox-mcp found at start-up (the
 * caller's sandboxes, or why sbxd is unreachable and how to fix it). NULL on
 * ENOMEM. */
json_t *mcp_initialize_result(const json_t *params, const char *version, const char *status);
/* The same for a server whose tools are those of the lifecycle set alone
 * (lifecycle: other instructions) and that offers the sandboxes://
 * resource template (resources: the capability). */
json_t *mcp_initialize_result_for(const json_t *params, const char *version, const char *status, bool lifecycle,
                                  bool resources);
