#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mcp.h"

const char *const mcp_supported_versions[] = {
        "2025-11-25",
        "2025-06-18",
        "2025-03-26",
        "2024-11-05",
        NULL,
};

static const char instructions[] =
        "Runs shell commands in sbx sandboxes. Every tool needs a sandbox_id. "
        "exec_command starts a command and returns when it ends or when yield_time_ms passes "
        "(status \"running\"); then keep its command_session_id, send input with "
        "write_command_stdin and page the full transcript by line offset with read_command_lines. "
        "Without workspace_session_id a command gets its own session, whose workspace changes "
        "are published when the command ends.";

static const char lifecycle_instructions[] =
        "Creates and runs your own sandboxes. create_sandbox returns a sandbox_claim_name; pass it (and its "
        "namespace) to execute_command, upload_file, download_file, list_files, file_exists, "
        "get_sandbox_status and delete_sandbox. A sandbox keeps its files and background processes between "
        "calls until you delete it or it expires (shutdown_after_seconds without a call naming it). Sandboxes "
        "are this session's own. The resource template sandboxes://{namespace} lists them.";

const char *mcp_negotiate_version(const char *requested) {
        if (requested)
                for (size_t i = 0; mcp_supported_versions[i]; i++)
                        if (strcmp(requested, mcp_supported_versions[i]) == 0)
                                return mcp_supported_versions[i];
        return MCP_LATEST_VERSION;
}

json_t *mcp_initialize_result_for(const json_t *params, const char *version, const char *status, bool lifecycle,
                                  bool resources) {
        const json_t *requested = json_is_object(params) ? json_object_get(params, "protocolVersion") : NULL;
        _cleanup_free_ char *text = NULL;
        json_t *r;

        if (asprintf(&text, "%s%s%s", lifecycle ? lifecycle_instructions : instructions,
                     status && !lifecycle ? " " : "", status && !lifecycle ? status : "") < 0)
                return NULL;
        r = json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
                      "protocolVersion",
                      mcp_negotiate_version(json_is_string(requested) ? json_string_value(requested) : NULL),
                      "capabilities", "tools", "listChanged", 0,
                      "serverInfo", "name", MCP_SERVER_NAME, "title", MCP_SERVER_TITLE, "version", version,
                      "instructions", text);
        if (r && resources &&
            json_object_set_new(json_object_get(r, "capabilities"), "resources",
                                json_pack("{s:b, s:b}", "subscribe", 0, "listChanged", 0)) < 0) {
                json_decref(r);
                return NULL;
        }
        return r;
}

json_t *mcp_initialize_result(const json_t *params, const char *version, const char *status) {
        return mcp_initialize_result_for(params, version, status, false, false);
}
