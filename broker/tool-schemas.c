#include "sbx-limits.h"
#include "tool-schemas.h"

/* ---- schemas ----------------------------------------------------------------
 * The input schemas are the published contract (shared/seeds/000): same
 * properties, types, descriptions, minimum, default, required and
 * additionalProperties. Limits the contract does not spell out are checked in
 * the prepare functions below and documented in the tool descriptions. */

/* An input schema: an object of these properties, these required, and no other. */
#define INPUT_SCHEMA(properties, required)                                                      \
        "{\"type\": \"object\", \"properties\": {" properties "}, \"required\": [" required "], "     \
        "\"additionalProperties\": false}"
/* Arguments: a string; an integer >= 0, with or without a default. */
#define STRING_ARG(name, description) "\"" name "\": {\"type\": \"string\", \"description\": \"" description "\"}"
#define INTEGER_ARG(name, description) \
        "\"" name "\": {\"type\": \"integer\", \"description\": \"" description "\", \"minimum\": 0}"
#define INTEGER_ARG_DEFAULT(name, description, value) \
        "\"" name "\": {\"type\": \"integer\", \"description\": \"" description "\", \"minimum\": 0, \"default\": " value "}"
#define SANDBOX_ID_PROPERTY STRING_ARG("sandbox_id", "Target sandbox id (selects the daemon to query).")
#define COMMAND_SESSION_ID_PROPERTY STRING_ARG("command_session_id", "Command session id returned by exec_command.")

const char exec_command_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                STRING_ARG("workspace_session_id", "Existing workspace session id to run inside. Omit to create a session with finalize policy publish_then_destroy.") ", "
                STRING_ARG("cmd", "Shell command text.") ", "
                INTEGER_ARG("timeout_ms", "Command timeout in milliseconds.") ", "
                INTEGER_ARG("yield_time_ms", "Initial output wait in milliseconds."),
                "\"sandbox_id\", \"cmd\"");

const char write_command_stdin_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                COMMAND_SESSION_ID_PROPERTY ", "
                STRING_ARG("stdin", "Text to write to stdin.") ", "
                INTEGER_ARG("yield_time_ms", "Output wait after writing stdin."),
                "\"sandbox_id\", \"command_session_id\", \"stdin\"");

const char read_command_lines_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                COMMAND_SESSION_ID_PROPERTY ", "
                INTEGER_ARG_DEFAULT("start_offset", "First transcript line offset. Defaults to 0.", "0") ", "
                INTEGER_ARG_DEFAULT("limit", "Maximum transcript rows to return. Defaults to 200; maximum 1000.", "200"),
                "\"sandbox_id\", \"command_session_id\"");

/* The properties of a Publication (sbx.proto), owner_what naming the owner. */
#define PUBLICATION_PROPERTIES(owner_what) \
        "      \"properties\": {" \
        "        \"published\": {\"type\": \"boolean\", \"description\": \"false when nothing changed or publication failed.\"}," \
        "        \"layer\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Id of the published layer.\"}," \
        "        \"owner\": {\"type\": \"string\", \"description\": \"Owner of the layer, " owner_what ".\"}," \
        "        \"changed_paths\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Paths the layer changes.\"}," \
        "        \"error\": {\"type\": \"string\", \"description\": \"Why publication failed, such as conflicting paths; the session is kept.\"}," \
        "        \"conflicts\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}," \
        "          \"description\": \"Paths that layers published after the session's base also changed: publication was refused as a whole and the session and its changes are kept, to finalize again with overwrite or discard.\"}" \
        "      }"

/* The command-output shape shared by the three command tools. Only keywords
 * that draft-07 and 2020-12 share: clients validate with either. */
const char command_output_schema[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"command_session_id\": {\"type\": \"string\","
        "      \"description\": \"Command session id; keep it for read_command_lines and write_command_stdin.\"},"
        "    \"workspace_session_id\": {\"type\": \"string\","
        "      \"description\": \"Workspace session the command runs in.\"},"
        "    \"status\": {\"type\": \"string\", \"enum\": [\"running\", \"ok\", \"error\", \"timed_out\", \"cancelled\"],"
        "      \"description\": \"running while the command runs; ok when it exited with status 0; error, timed_out or cancelled otherwise.\"},"
        "    \"exit_code\": {\"type\": [\"integer\", \"null\"],"
        "      \"description\": \"Exit status; null while running or when the command did not exit normally.\"},"
        "    \"signal\": {\"type\": [\"integer\", \"null\"],"
        "      \"description\": \"Number of the signal that ended the command, or null.\"},"
        "    \"end_reason\": {\"type\": [\"string\", \"null\"],"
        "      \"enum\": [\"exit\", \"signal\", \"timeout\", \"out_of_memory\", \"pids_limit\", \"cancelled\", \"supervisor_lost\", null],"
        "      \"description\": \"Why the command ended; null while it runs.\"},"
        "    \"wall_time_seconds\": {\"type\": \"number\","
        "      \"description\": \"Seconds this call waited.\"},"
        "    \"command_total_time_seconds\": {\"type\": \"number\","
        "      \"description\": \"Seconds the command has run (its whole run time once it ended).\"},"
        "    \"start_offset\": {\"type\": \"integer\", \"minimum\": 0,"
        "      \"description\": \"Offset of the first transcript line in output (0-based, stable).\"},"
        "    \"end_offset\": {\"type\": \"integer\", \"minimum\": 0,"
        "      \"description\": \"Offset after the last line in output; continue reading from here.\"},"
        "    \"total_lines\": {\"type\": \"integer\", \"minimum\": 0,"
        "      \"description\": \"Lines in the transcript so far.\"},"
        "    \"original_token_count\": {\"type\": \"integer\", \"minimum\": 0,"
        "      \"description\": \"Estimated tokens of the untruncated output, ceil(bytes / 4).\"},"
        "    \"output\": {\"type\": \"string\","
        "      \"description\": \"Rendered transcript lines start_offset to end_offset, stdout and stderr merged.\"},"
        "    \"publication\": {\"type\": [\"object\", \"null\"],"
        "      \"description\": \"For a terminal command of an automatic session, or of a session that has ended: what its session published, or why nothing was; null otherwise.\","
        PUBLICATION_PROPERTIES("workspace_session:<id>")
        "    },"
        EGRESS_AUDIT_PROPERTY
        "  },"
        "  \"required\": [\"command_session_id\", \"workspace_session_id\", \"status\", \"exit_code\","
        "                \"wall_time_seconds\", \"command_total_time_seconds\", \"start_offset\", \"end_offset\","
        "                \"total_lines\", \"original_token_count\", \"output\"]"
        "}";

const char annotations_mutating[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": false, \"openWorldHint\": false}";
const char annotations_read_only[] =
        "{\"readOnlyHint\": true, \"openWorldHint\": false}";

const char annotations_write[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": true, \"openWorldHint\": false}";
const char annotations_create[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": false, \"idempotentHint\": false, \"openWorldHint\": false}";

/* ---- file tools (shared/seeds/000, byte for byte) ---------------------------- */

const char file_read_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                STRING_ARG("path", "Repository-relative or workspace-root-absolute path to read.") ", "
                INTEGER_ARG_DEFAULT("offset", "1-indexed line number to start reading from. Defaults to 1.", "1") ", "
                INTEGER_ARG_DEFAULT("limit", "Maximum number of lines to read. Defaults to 2000; must be 1..=2000.", "2000") ", "
                STRING_ARG("workspace_session_id", "Existing workspace session id to read inside. Omit to read the snapshot."),
                "\"sandbox_id\", \"path\"");

const char file_write_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                STRING_ARG("path", "Repository-relative or workspace-root-absolute path to write.") ", "
                STRING_ARG("content", "File content to write.") ", "
                STRING_ARG("workspace_session_id", "Existing workspace session id to write inside. Omit to publish a layer."),
                "\"sandbox_id\", \"path\", \"content\"");

const char file_edit_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                STRING_ARG("path", "Repository-relative or workspace-root-absolute path to edit.") ", "
                "\"edits\": {\"type\": \"array\", \"description\": \"JSON array of { old_string, new_string, replace_all? } edits, applied in order.\"}" ", "
                STRING_ARG("workspace_session_id", "Existing workspace session id to edit inside. Omit to publish a layer."),
                "\"sandbox_id\", \"path\", \"edits\"");

/* Not published (the seed's edits schema is a bare array): the items'
 * shape, checked in prepare_file_edit so that errors name "edits[N].key". */
const char file_edit_items_schema[] =
        "{\"type\": \"object\", \"properties\": {\"edits\": {\"type\": \"array\", \"items\": {"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"old_string\": {\"type\": \"string\"},"
        "    \"new_string\": {\"type\": \"string\"},"
        "    \"replace_all\": {\"type\": \"boolean\", \"default\": false}"
        "  },"
        "  \"required\": [\"old_string\", \"new_string\"],"
        "  \"additionalProperties\": false"
        "}}}}";

const char file_blame_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                STRING_ARG("path", "Repository-relative path to blame."),
                "\"sandbox_id\", \"path\"");

const char file_read_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"path\": {\"type\": \"string\", \"description\": \"The path as given.\"},"
        "    \"content\": {\"type\": \"string\", \"description\": \"The lines of the window, each with its line end.\"},"
        "    \"start_line\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"1-indexed line number of the first line in content.\"},"
        "    \"num_lines\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Lines in content.\"},"
        "    \"total_lines\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Lines in the whole file.\"},"
        "    \"bytes_read\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Bytes in content.\"},"
        "    \"total_bytes\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Bytes in the whole file.\"},"
        "    \"next_offset\": {\"type\": [\"integer\", \"null\"], \"minimum\": 1,"
        "      \"description\": \"offset to read the next window from; null at the end of the file.\"},"
        "    \"truncated\": {\"type\": \"boolean\", \"description\": \"true when another window follows (next_offset is set).\"}"
        "  },"
        "  \"required\": [\"path\", \"content\", \"start_line\", \"num_lines\", \"total_lines\", \"bytes_read\","
        "                \"total_bytes\", \"next_offset\", \"truncated\"]"
        "}";

#define FILE_PUBLICATION_PROPERTY \
        "    \"publication\": {\"type\": [\"object\", \"null\"]," \
        "      \"description\": \"Without workspace_session_id: the layer this call published, owned by operation:<id>. Absent for a session-scoped change.\"," \
        PUBLICATION_PROPERTIES("operation:<id>") \
        "    }"

const char file_write_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"type\": {\"type\": \"string\", \"enum\": [\"create\", \"update\"],"
        "      \"description\": \"create for a new path, update for an existing regular file.\"},"
        "    \"path\": {\"type\": \"string\", \"description\": \"The path as given.\"},"
        "    \"bytes_written\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Bytes of the file now.\"},"
        FILE_PUBLICATION_PROPERTY
        "  },"
        "  \"required\": [\"type\", \"path\", \"bytes_written\"]"
        "}";

const char file_edit_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"type\": {\"type\": \"string\", \"enum\": [\"edit\"], \"description\": \"Always edit.\"},"
        "    \"path\": {\"type\": \"string\", \"description\": \"The path as given.\"},"
        "    \"edits_applied\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Edit objects applied (all of them).\"},"
        "    \"replacements\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Occurrences replaced over all edits.\"},"
        "    \"bytes_written\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Bytes of the file after the edits.\"},"
        FILE_PUBLICATION_PROPERTY
        "  },"
        "  \"required\": [\"type\", \"path\", \"edits_applied\", \"replacements\", \"bytes_written\"]"
        "}";

const char file_blame_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"path\": {\"type\": \"string\", \"description\": \"The path as given.\"},"
        "    \"ranges\": {\"type\": \"array\","
        "      \"description\": \"Line ranges in order that tile the latest published content.\","
        "      \"items\": {"
        "        \"type\": \"object\","
        "        \"properties\": {"
        "          \"start_line\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"1-indexed first line.\"},"
        "          \"line_count\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"Lines in the range.\"},"
        "          \"owner\": {\"type\": \"string\","
        "            \"description\": \"workspace_session:<id>, operation:<id>, original or unknown; treat as opaque.\"}"
        "        },"
        "        \"required\": [\"start_line\", \"line_count\", \"owner\"]"
        "      }"
        "    }"
        "  },"
        "  \"required\": [\"path\", \"ranges\"]"
        "}";

/* ---- the sessions set ---------------------------------------------------------- */

const char create_workspace_session_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                "\"finalize_policy\": {\"type\": \"string\", \"description\": \"What finalize_workspace_session does when it names no action: publish_then_destroy publishes the session's workspace changes as a layer, destroy discards them. Defaults to publish_then_destroy.\", \"enum\": [\"publish_then_destroy\", \"destroy\"], \"default\": \"publish_then_destroy\"}",
                "\"sandbox_id\"");

const char finalize_workspace_session_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                STRING_ARG("workspace_session_id", "Workspace session id returned by create_workspace_session.") ", "
                "\"action\": {\"type\": \"string\", \"description\": \"publish or discard. Defaults to the session's finalize policy: publish for publish_then_destroy, discard for destroy.\", \"enum\": [\"publish\", \"discard\"]}" ", "
                "\"overwrite\": {\"type\": \"boolean\", \"description\": \"Publish even over paths that layers published after the session's base also changed. Defaults to false.\", \"default\": false}",
                "\"sandbox_id\", \"workspace_session_id\"");

const char list_workspace_sessions_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY,
                "\"sandbox_id\"");

const char diff_workspace_session_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                STRING_ARG("workspace_session_id", "Workspace session id whose changes to show."),
                "\"sandbox_id\", \"workspace_session_id\"");

const char list_command_sessions_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                STRING_ARG("workspace_session_id", "Only commands of this workspace session. Omit for all of the sandbox's commands."),
                "\"sandbox_id\"");

const char cancel_command_input[] = INPUT_SCHEMA(
                SANDBOX_ID_PROPERTY ", "
                COMMAND_SESSION_ID_PROPERTY,
                "\"sandbox_id\", \"command_session_id\"");

const char list_sandboxes_input[] =
        "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}";

const char list_sandboxes_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"sandboxes\": {\"type\": \"array\", \"description\": \"The sandboxes the caller may use, by name.\","
        "      \"items\": {"
        "        \"type\": \"object\","
        "        \"properties\": {"
        "          \"sandbox_id\": {\"type\": \"string\", \"description\": \"The name to pass as sandbox_id.\"},"
        "          \"source\": {\"type\": \"string\", \"description\": \"Host directory the workspace was imported from (never modified).\"},"
        "          \"image\": {\"type\": \"string\", \"description\": \"What / is in its sessions: default is the host's system directories, read-only.\"},"
        "          \"layers\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Published layers, the imported source included.\"},"
        "          \"live_sessions\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Workspace sessions alive now.\"}"
        "        },"
        "        \"required\": [\"sandbox_id\", \"source\", \"image\", \"layers\", \"live_sessions\"]"
        "      }"
        "    }"
        "  },"
        "  \"required\": [\"sandboxes\"]"
        "}";

#define SESSION_INFO_SCHEMA \
        "{" \
        "  \"type\": \"object\"," \
        "  \"properties\": {" \
        "    \"workspace_session_id\": {\"type\": \"string\", \"description\": \"Workspace session id.\"}," \
        "    \"sandbox_id\": {\"type\": \"string\", \"description\": \"Sandbox the session belongs to.\"}," \
        "    \"finalize_policy\": {\"type\": \"string\", \"enum\": [\"publish_then_destroy\", \"destroy\"]," \
        "      \"description\": \"What finalizing without an action does.\"}," \
        "    \"automatic\": {\"type\": \"boolean\"," \
        "      \"description\": \"true for a session exec_command created for one command; false for a managed one.\"}," \
        "    \"state\": {\"type\": \"string\", \"enum\": [\"starting\", \"live\", \"stopped\", \"conflicted\", \"finalized\"]," \
        "      \"description\": \"starting or live (its sandbox processes run); stopped (they ended, the changes are kept until finalized); conflicted after a refused publication (finalize again with overwrite or discard); finalized.\"}," \
        "    \"base_layer\": {\"type\": \"integer\", \"minimum\": 0," \
        "      \"description\": \"Top layer of the snapshot the session started from.\"}," \
        "    \"created_unix\": {\"type\": \"integer\", \"description\": \"Creation time, seconds since the Unix epoch.\"}," \
        "    \"running_commands\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Commands running in it.\"}" \
        "  }," \
        "  \"required\": [\"workspace_session_id\", \"sandbox_id\", \"finalize_policy\", \"automatic\", \"state\"," \
        "                \"base_layer\", \"created_unix\", \"running_commands\"]" \
        "}"

const char session_info_output[] = SESSION_INFO_SCHEMA;

const char finalize_workspace_session_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"workspace_session_id\": {\"type\": \"string\", \"description\": \"The session finalized.\"},"
        "    \"action\": {\"type\": \"string\", \"enum\": [\"published\", \"discarded\", \"conflict\"],"
        "      \"description\": \"published or discarded (the session is gone), or conflict (nothing published, the session is kept).\"},"
        "    \"publication\": {\"type\": [\"object\", \"null\"],"
        "      \"description\": \"What was published, or the conflicting paths; null when discarded.\","
        PUBLICATION_PROPERTIES("workspace_session:<id>")
        "    }"
        "  },"
        "  \"required\": [\"workspace_session_id\", \"action\", \"publication\"]"
        "}";

const char list_workspace_sessions_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"sessions\": {\"type\": \"array\", \"description\": \"The sandbox's live workspace sessions.\","
        "      \"items\": " SESSION_INFO_SCHEMA "}"
        "  },"
        "  \"required\": [\"sessions\"]"
        "}";

const char diff_workspace_session_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"workspace_session_id\": {\"type\": \"string\", \"description\": \"The session.\"},"
        "    \"changes\": {\"type\": \"array\", \"description\": \"Paths the session changed against its base snapshot.\","
        "      \"items\": {"
        "        \"type\": \"object\","
        "        \"properties\": {"
        "          \"path\": {\"type\": \"string\", \"description\": \"Path relative to the workspace root.\"},"
        "          \"change\": {\"type\": \"string\", \"enum\": [\"added\", \"modified\", \"deleted\"]}"
        "        },"
        "        \"required\": [\"path\", \"change\"]"
        "      }"
        "    },"
        "    \"diff\": {\"type\": \"string\", \"description\": \"Unified diff of the changed text files.\"},"
        "    \"truncated\": {\"type\": \"boolean\", \"description\": \"true when diff was cut at 96 KiB.\"}"
        "  },"
        "  \"required\": [\"workspace_session_id\", \"changes\", \"diff\", \"truncated\"]"
        "}";

const char list_command_sessions_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"commands\": {\"type\": \"array\", \"description\": \"Command sessions, oldest first.\","
        "      \"items\": {"
        "        \"type\": \"object\","
        "        \"properties\": {"
        "          \"command_session_id\": {\"type\": \"string\"},"
        "          \"workspace_session_id\": {\"type\": \"string\"},"
        "          \"status\": {\"type\": \"string\", \"enum\": [\"running\", \"ok\", \"error\", \"timed_out\", \"cancelled\"]},"
        "          \"exit_code\": {\"type\": [\"integer\", \"null\"], \"description\": \"Exit status, or null.\"},"
        "          \"signal\": {\"type\": [\"integer\", \"null\"], \"description\": \"Signal that ended it, or null.\"},"
        "          \"end_reason\": {\"type\": [\"string\", \"null\"],"
        "            \"enum\": [\"exit\", \"signal\", \"timeout\", \"out_of_memory\", \"pids_limit\", \"cancelled\", \"supervisor_lost\", null],"
        "            \"description\": \"Why it ended; null while running.\"},"
        "          \"started_unix\": {\"type\": \"number\", \"description\": \"Start time, seconds since the Unix epoch.\"},"
        "          \"ended_unix\": {\"type\": [\"number\", \"null\"], \"description\": \"End time, or null while running.\"},"
        "          \"cmd\": {\"type\": \"string\", \"description\": \"The shell command text.\"},"
        "          \"transcript_evicted\": {\"type\": [\"string\", \"null\"], \"description\": \"null while its transcript"
        " is kept; once it was evicted to stay within a transcript budget, that budget (\\\"KEY = VALUE\\\", see sbxd.conf(5)):"
        " read_command_lines then fails and says so.\"}"
        "        },"
        "        \"required\": [\"command_session_id\", \"workspace_session_id\", \"status\", \"exit_code\", \"signal\","
        "                      \"end_reason\", \"started_unix\", \"ended_unix\", \"cmd\", \"transcript_evicted\"]"
        "      }"
        "    }"
        "  },"
        "  \"required\": [\"commands\"]"
        "}";

/* The numbers the schemas quote. */
_Static_assert(SBX_READ_DEFAULT_LINES == 200 && SBX_READ_MAX_LINES == 1000, "read_command_lines schema");
_Static_assert(SBX_FILE_READ_DEFAULT_LINES == 2000 && SBX_FILE_READ_MAX_LINES == 2000, "file_read schema");
