/* The JSON texts of the tools' published contract: input and output
 * schemas and annotations, each one string, published as it is (tools/list
 * parses them once at start-up). The input schemas are the seed's
 * (shared/seeds/000) byte for byte. The set modules (set-*.c) name them in
 * their tool rows. */
#pragma once

extern const char exec_command_input[];
extern const char write_command_stdin_input[];
extern const char read_command_lines_input[];
extern const char command_output_schema[];
extern const char annotations_mutating[];
extern const char annotations_read_only[];
extern const char annotations_write[];
extern const char annotations_create[];
extern const char file_read_input[];
extern const char file_write_input[];
extern const char file_edit_input[];
extern const char file_edit_items_schema[];
extern const char file_blame_input[];
extern const char file_read_output[];
extern const char file_write_output[];
extern const char file_edit_output[];
extern const char file_blame_output[];
extern const char create_workspace_session_input[];
extern const char finalize_workspace_session_input[];
extern const char list_workspace_sessions_input[];
extern const char diff_workspace_session_input[];
extern const char list_command_sessions_input[];
extern const char cancel_command_input[];
extern const char list_sandboxes_input[];
extern const char list_sandboxes_output[];
extern const char session_info_output[];
extern const char finalize_workspace_session_output[];
extern const char list_workspace_sessions_output[];
extern const char diff_workspace_session_output[];
extern const char list_command_sessions_output[];

/* A command's egress audit (docs/egress.md): only for a sandbox whose policy is not none. */
#define EGRESS_AUDIT_PROPERTY \
        "    \"egress\": {\"type\": \"object\"," \
        "      \"description\": \"Present when the sandbox's egress policy is not none: the policy, and the host:port targets the command reached (contacted) and was refused through the sandbox's proxy, each list without repeats and at most 64 long (truncated: more were left out).\"," \
        "      \"properties\": {" \
        "        \"policy\": {\"type\": \"string\", \"enum\": [\"package-managers\", \"open\"]}," \
        "        \"contacted\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}," \
        "        \"refused\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}," \
        "        \"truncated\": {\"type\": \"boolean\"}" \
        "      }," \
        "      \"required\": [\"policy\", \"contacted\", \"refused\"]" \
        "    }"
