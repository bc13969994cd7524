#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sbx-limits.h"
#include "macro.h"
#include "jsonrpc.h"
#include "jsonwrite.h"
#include "schema.h"
#include "tools.h"

typedef int (*tool_prepare_t)(json_t *args, ToolRequest *req, char **ret_error);
/* structuredContent for a successful reply; -EBADMSG if its body is not the
 * one this tool expects. args: the validated call arguments, or NULL. */
typedef int (*tool_render_t)(const Sbx__Reply *reply, const json_t *args, json_t **ret);
/* The text block of --content=text for a successful reply, written to f;
 * sc is the validated structuredContent. NULL: text_generic. */
typedef void (*tool_text_t)(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc);

struct ToolDef {
        const char *name;
        ToolSet set;
        const char *title;
        const char *description;
        const char *input_schema;       /* JSON text, published as is */
        const char *output_schema;      /* JSON text */
        const char *annotations;        /* JSON text */
        tool_prepare_t prepare;
        tool_render_t render;
        tool_text_t text;
};

static const struct {
        const char *name;
        ToolSet set;
} tool_sets[] = {
        { "runtime", TOOL_SET_RUNTIME },
        { "sessions", TOOL_SET_SESSIONS },
};

/* ---- schemas ----------------------------------------------------------------
 * The input schemas are the published contract (shared/seeds/000): same
 * properties, types, descriptions, minimum, default, required and
 * additionalProperties. Limits the contract does not spell out are checked in
 * the prepare functions below and documented in the tool descriptions. */

#define SANDBOX_ID_PROPERTY \
        "\"sandbox_id\": {" \
        "  \"type\": \"string\"," \
        "  \"description\": \"Target sandbox id (selects the daemon to query).\"" \
        "}"

#define COMMAND_SESSION_ID_PROPERTY \
        "\"command_session_id\": {" \
        "  \"type\": \"string\"," \
        "  \"description\": \"Command session id returned by exec_command.\"" \
        "}"

static const char exec_command_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        "    \"workspace_session_id\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Existing workspace session id to run inside. Omit to create a session with finalize policy publish_then_destroy.\""
        "    },"
        "    \"cmd\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Shell command text.\""
        "    },"
        "    \"timeout_ms\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Command timeout in milliseconds.\","
        "      \"minimum\": 0"
        "    },"
        "    \"yield_time_ms\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Initial output wait in milliseconds.\","
        "      \"minimum\": 0"
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"cmd\"],"
        "  \"additionalProperties\": false"
        "}";

static const char write_command_stdin_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        COMMAND_SESSION_ID_PROPERTY ","
        "    \"stdin\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Text to write to stdin.\""
        "    },"
        "    \"yield_time_ms\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Output wait after writing stdin.\","
        "      \"minimum\": 0"
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"command_session_id\", \"stdin\"],"
        "  \"additionalProperties\": false"
        "}";

static const char read_command_lines_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        COMMAND_SESSION_ID_PROPERTY ","
        "    \"start_offset\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"First transcript line offset. Defaults to 0.\","
        "      \"minimum\": 0,"
        "      \"default\": 0"
        "    },"
        "    \"limit\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Maximum transcript rows to return. Defaults to 200; maximum 1000.\","
        "      \"minimum\": 0,"
        "      \"default\": 200"
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"command_session_id\"],"
        "  \"additionalProperties\": false"
        "}";

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
static const char command_output_schema[] =
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
        "    }"
        "  },"
        "  \"required\": [\"command_session_id\", \"workspace_session_id\", \"status\", \"exit_code\","
        "                \"wall_time_seconds\", \"command_total_time_seconds\", \"start_offset\", \"end_offset\","
        "                \"total_lines\", \"original_token_count\", \"output\"]"
        "}";

static const char annotations_mutating[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": false, \"openWorldHint\": false}";
static const char annotations_read_only[] =
        "{\"readOnlyHint\": true, \"openWorldHint\": false}";

static const char annotations_write[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": true, \"openWorldHint\": false}";
static const char annotations_create[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": false, \"idempotentHint\": false, \"openWorldHint\": false}";

/* ---- file tools (shared/seeds/000, byte for byte) ---------------------------- */

static const char file_read_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        "    \"path\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Repository-relative or workspace-root-absolute path to read.\""
        "    },"
        "    \"offset\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"1-indexed line number to start reading from. Defaults to 1.\","
        "      \"minimum\": 0,"
        "      \"default\": 1"
        "    },"
        "    \"limit\": {"
        "      \"type\": \"integer\","
        "      \"description\": \"Maximum number of lines to read. Defaults to 2000; must be 1..=2000.\","
        "      \"minimum\": 0,"
        "      \"default\": 2000"
        "    },"
        "    \"workspace_session_id\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Existing workspace session id to read inside. Omit to read the snapshot.\""
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"path\"],"
        "  \"additionalProperties\": false"
        "}";

static const char file_write_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        "    \"path\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Repository-relative or workspace-root-absolute path to write.\""
        "    },"
        "    \"content\": {"
        "      \"type\": \"string\","
        "      \"description\": \"File content to write.\""
        "    },"
        "    \"workspace_session_id\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Existing workspace session id to write inside. Omit to publish a layer.\""
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"path\", \"content\"],"
        "  \"additionalProperties\": false"
        "}";

static const char file_edit_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        "    \"path\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Repository-relative or workspace-root-absolute path to edit.\""
        "    },"
        "    \"edits\": {"
        "      \"type\": \"array\","
        "      \"description\": \"JSON array of { old_string, new_string, replace_all? } edits, applied in order.\""
        "    },"
        "    \"workspace_session_id\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Existing workspace session id to edit inside. Omit to publish a layer.\""
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"path\", \"edits\"],"
        "  \"additionalProperties\": false"
        "}";

/* Not published (the seed's edits schema is a bare array): the items'
 * shape, checked in prepare_file_edit so that errors name "edits[N].key". */
static const char file_edit_items_schema[] =
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

static const char file_blame_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        "    \"path\": {"
        "      \"type\": \"string\","
        "      \"description\": \"Repository-relative path to blame.\""
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"path\"],"
        "  \"additionalProperties\": false"
        "}";

static const char file_read_output[] =
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

static const char file_write_output[] =
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

static const char file_edit_output[] =
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

static const char file_blame_output[] =
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

#define WORKSPACE_SESSION_ID_PROPERTY(what) \
        "\"workspace_session_id\": {" \
        "  \"type\": \"string\"," \
        "  \"description\": \"" what "\"" \
        "}"

static const char create_workspace_session_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        "    \"finalize_policy\": {"
        "      \"type\": \"string\","
        "      \"description\": \"What finalize_workspace_session does when it names no action: publish_then_destroy publishes the session's workspace changes as a layer, destroy discards them. Defaults to publish_then_destroy.\","
        "      \"enum\": [\"publish_then_destroy\", \"destroy\"],"
        "      \"default\": \"publish_then_destroy\""
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\"],"
        "  \"additionalProperties\": false"
        "}";

static const char finalize_workspace_session_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        WORKSPACE_SESSION_ID_PROPERTY("Workspace session id returned by create_workspace_session.") ","
        "    \"action\": {"
        "      \"type\": \"string\","
        "      \"description\": \"publish or discard. Defaults to the session's finalize policy: publish for publish_then_destroy, discard for destroy.\","
        "      \"enum\": [\"publish\", \"discard\"]"
        "    },"
        "    \"overwrite\": {"
        "      \"type\": \"boolean\","
        "      \"description\": \"Publish even over paths that layers published after the session's base also changed. Defaults to false.\","
        "      \"default\": false"
        "    }"
        "  },"
        "  \"required\": [\"sandbox_id\", \"workspace_session_id\"],"
        "  \"additionalProperties\": false"
        "}";

static const char list_workspace_sessions_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY
        "  },"
        "  \"required\": [\"sandbox_id\"],"
        "  \"additionalProperties\": false"
        "}";

static const char diff_workspace_session_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        WORKSPACE_SESSION_ID_PROPERTY("Workspace session id whose changes to show.")
        "  },"
        "  \"required\": [\"sandbox_id\", \"workspace_session_id\"],"
        "  \"additionalProperties\": false"
        "}";

static const char list_command_sessions_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        WORKSPACE_SESSION_ID_PROPERTY("Only commands of this workspace session. Omit for all of the sandbox's commands.")
        "  },"
        "  \"required\": [\"sandbox_id\"],"
        "  \"additionalProperties\": false"
        "}";

static const char cancel_command_input[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        SANDBOX_ID_PROPERTY ","
        COMMAND_SESSION_ID_PROPERTY
        "  },"
        "  \"required\": [\"sandbox_id\", \"command_session_id\"],"
        "  \"additionalProperties\": false"
        "}";

static const char list_sandboxes_input[] =
        "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}";

static const char list_sandboxes_output[] =
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

static const char session_info_output[] = SESSION_INFO_SCHEMA;

static const char finalize_workspace_session_output[] =
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

static const char list_workspace_sessions_output[] =
        "{"
        "  \"type\": \"object\","
        "  \"properties\": {"
        "    \"sessions\": {\"type\": \"array\", \"description\": \"The sandbox's live workspace sessions.\","
        "      \"items\": " SESSION_INFO_SCHEMA "}"
        "  },"
        "  \"required\": [\"sessions\"]"
        "}";

static const char diff_workspace_session_output[] =
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

static const char list_command_sessions_output[] =
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
        "          \"cmd\": {\"type\": \"string\", \"description\": \"The shell command text.\"}"
        "        },"
        "        \"required\": [\"command_session_id\", \"workspace_session_id\", \"status\", \"exit_code\", \"signal\","
        "                      \"end_reason\", \"started_unix\", \"ended_unix\", \"cmd\"]"
        "      }"
        "    }"
        "  },"
        "  \"required\": [\"commands\"]"
        "}";

/* The numbers the descriptions below quote. */
_Static_assert(SBX_YIELD_DEFAULT_MS == 10000, "exec_command description");
_Static_assert(SBX_STDIN_YIELD_DEFAULT_MS == 1000, "write_command_stdin description");
_Static_assert(SBX_YIELD_MAX_MS == 30000, "tool descriptions");
_Static_assert(SBX_TIMEOUT_DEFAULT_MS == 600000, "exec_command description");
_Static_assert(SBX_TIMEOUT_MAX_MS == 86400000, "exec_command description");
_Static_assert(SBX_WINDOW_MAX_LINES == 200 && SBX_RESULT_TEXT_BUDGET == 52 * 1024, "tool descriptions");
_Static_assert(SBX_READ_DEFAULT_LINES == 200 && SBX_READ_MAX_LINES == 1000, "read_command_lines schema");
_Static_assert(SBX_STDIN_MAX == 65536, "write_command_stdin description");
_Static_assert(SBX_FILE_READ_DEFAULT_LINES == 2000 && SBX_FILE_READ_MAX_LINES == 2000, "file_read schema");
_Static_assert(SBX_FILE_MAX == 16 << 20, "file_write, file_edit descriptions");
_Static_assert(SBX_DIFF_MAX_BYTES == 96 * 1024, "diff_workspace_session description");

static int prepare_exec(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_stdin(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_read_lines(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_file_read(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_file_write(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_file_edit(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_file_blame(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_session_create(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_session_finalize(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_session_list(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_session_diff(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_command_list(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_command_cancel(json_t *args, ToolRequest *req, char **ret_error);
static int prepare_sandbox_list(json_t *args, ToolRequest *req, char **ret_error);

static int render_command(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_file_read(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_file_change(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_file_blame(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_session(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_session_finalize(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_session_list(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_session_diff(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_command_list(const Sbx__Reply *reply, const json_t *args, json_t **ret);
static int render_sandbox_list(const Sbx__Reply *reply, const json_t *args, json_t **ret);

static void text_command(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc);
static void text_file_read(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc);
static void text_file_change(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc);
static void text_file_blame(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc);

/* ---- the table: one entry per tool, in tools/list order -------------------- */

static const ToolDef tool_table[] = {
        {
                .name = "exec_command",
                .set = TOOL_SET_RUNTIME,
                .title = "Start a sandbox shell command",
                .description =
                        "Start a shell command in a workspace session. Omit workspace_session_id to use an "
                        "automatic publish_then_destroy session. Use workspace_session_id only when an existing "
                        "managed session is available.\n\n"
                        "cmd runs as /bin/sh -c in the workspace root, with a clean fixed environment (PATH, HOME, "
                        "LANG=C.UTF-8, TERM=dumb, NO_COLOR=1, PAGER=cat, GIT_PAGER=cat); stdout and stderr are "
                        "merged. The call returns when the command ends, or when yield_time_ms (default 10000; "
                        "larger values are clamped to 30000) has passed "
                        "with the command still running. If status is running, retain command_session_id for "
                        "read_command_lines or write_command_stdin; the command's stdin stays open for "
                        "write_command_stdin. timeout_ms (default 600000, at most 86400000; 0 means the default) "
                        "is a hard limit: the whole process group is killed and status becomes timed_out, with the "
                        "output kept.\n\n"
                        "A terminal automatic command captures and publishes filesystem changes before destroying "
                        "its session; publication then tells the layer, its owner and the number of changed paths, "
                        "or why nothing was published (a conflict keeps the session).\n\n"
                        "The result holds a bounded window of rendered transcript lines (at most 200 lines and "
                        "52 KiB of JSON-escaped text, at most about 19k tokens): when more are waiting, the most recent "
                        "ones, and start_offset shows what was skipped, still readable with read_command_lines; a "
                        "window that ends before total_lines continues from end_offset. original_token_count "
                        "estimates tokens of the untruncated output as ceil(bytes / 4).",
                .input_schema = exec_command_input,
                .output_schema = command_output_schema,
                .annotations = annotations_mutating,
                .prepare = prepare_exec,
                .render = render_command,
                .text = text_command,
        },
        {
                .name = "write_command_stdin",
                .set = TOOL_SET_RUNTIME,
                .title = "Write to a running command",
                .description =
                        "Append text to the stdin stream of a running command session and return a bounded output "
                        "yield. Use a command_session_id returned while exec_command is still running.\n\n"
                        "stdin is written exactly as supplied; include a newline for line-oriented programs "
                        "(at most 65536 bytes per call). To close the command's stdin (end of input, as Ctrl-D "
                        "at a terminal), end the text with the character U+0004 (\"\\u0004\" in JSON): the text "
                        "before it is written, then stdin is closed; \"\\u0004\" alone only closes it.\n\n"
                        "yield_time_ms (default 1000; larger values are clamped to 30000) is how "
                        "long to wait for output after writing. The result uses the command-output shape, holds "
                        "output not yet returned in a bounded window, and may become terminal after the write.",
                .input_schema = write_command_stdin_input,
                .output_schema = command_output_schema,
                .annotations = annotations_mutating,
                .prepare = prepare_stdin,
                .render = render_command,
                .text = text_command,
        },
        {
                .name = "read_command_lines",
                .set = TOOL_SET_RUNTIME,
                .title = "Page a command transcript",
                .description =
                        "Read rendered command output for a command session using stable line offsets.\n\n"
                        "Start at offset 0, then continue from end_offset until it reaches total_lines. The command "
                        "may still be running; status and offsets are a point-in-time snapshot. Reading output does "
                        "not extend or trigger workspace-session lifecycle behavior.\n\n"
                        "limit defaults to 200 and may be at most 1000; a window also ends before 52 KiB of JSON-escaped "
                        "text (at most about 19k tokens), so it may hold fewer lines: continue from end_offset. "
                        "Lines are rendered as a terminal shows them: carriage returns overwrite, backspaces erase, "
                        "ANSI escape sequences are removed. Transcripts stay readable after the command and its "
                        "session are gone.",
                .input_schema = read_command_lines_input,
                .output_schema = command_output_schema,
                .annotations = annotations_read_only,
                .prepare = prepare_read_lines,
                .render = render_command,
                .text = text_command,
        },
        {
                .name = "file_read",
                .set = TOOL_SET_RUNTIME,
                .title = "Read a UTF-8 text window",
                .description =
                        "Read a UTF-8 window from a repository-relative or workspace-root-absolute path in the "
                        "published snapshot or a live session. Omit workspace_session_id for the published "
                        "snapshot; include it for uncommitted session content. Follow next_offset while truncated "
                        "is true to page long files. Only UTF-8 regular files are supported.\n\n"
                        "offset is the 1-indexed first line (default 1; 0 is taken as 1; past the end gives an "
                        "empty window). limit is the most lines to return (default 2000, must be 1..=2000). A "
                        "window also ends before its content, escaped as JSON, exceeds 52 KiB (at most about 19k tokens, under the "
                        "25,000-token limit of some clients), so it may hold fewer lines than limit: "
                        "continue from next_offset. Lines keep their line ends (\\n or \\r\\n). Files that are not "
                        "UTF-8 text (invalid UTF-8 or NUL bytes), directories and other non-regular files give an "
                        "error result. Paths are resolved inside the sandbox: .. and symlinks never leave the "
                        "workspace.",
                .input_schema = file_read_input,
                .output_schema = file_read_output,
                .annotations = annotations_read_only,
                .prepare = prepare_file_read,
                .render = render_file_read,
                .text = text_file_read,
        },
        {
                .name = "file_write",
                .set = TOOL_SET_RUNTIME,
                .title = "Create or overwrite a file",
                .description =
                        "Write content to a path in a live session, or publish a new attributed layer when no "
                        "session is supplied. Use only when overwriting the complete target file is intended. A "
                        "session-scoped write stays private until that session resolves. Without a session, the "
                        "runtime publishes a layer owned by operation:<request_id>, where the id is unique to this "
                        "call; publication then tells the layer and its owner, or the conflicting paths.\n\n"
                        "type is create for a new path or update for an existing regular file. content is written exactly (at most 16 MiB). bytes_written is "
                        "the file's new size. Paths are resolved inside the sandbox: .. and symlinks never leave "
                        "the workspace.",
                .input_schema = file_write_input,
                .output_schema = file_write_output,
                .annotations = annotations_write,
                .prepare = prepare_file_write,
                .render = render_file_change,
                .text = text_file_change,
        },
        {
                .name = "file_edit",
                .set = TOOL_SET_RUNTIME,
                .title = "Apply ordered exact replacements",
                .description =
                        "Apply ordered exact-string replacements in a live session, or publish one attributed layer "
                        "when no session is supplied. Each item requires old_string and new_string; replace_all "
                        "defaults to false. Without replace_all, old_string must occur exactly once. Empty, "
                        "missing, ambiguous, and no-op edits fail. Edits run in array order; omitting a session "
                        "publishes a durable layer immediately (owned by operation:<request_id>).\n\n"
                        "Each edit applies to the content as the edits before it left it. The call is "
                        "all-or-nothing: if any edit fails, the file is unchanged and the error names the edit and "
                        "why. edits_applied counts edit objects; replacements counts occurrences changed; "
                        "bytes_written is the file's new size. The file must be UTF-8 text of at most 16 MiB, and "
                        "the edits together at most 16 MiB.",
                .input_schema = file_edit_input,
                .output_schema = file_edit_output,
                .annotations = annotations_mutating,
                .prepare = prepare_file_edit,
                .render = render_file_change,
                .text = text_file_change,
        },
        {
                .name = "file_blame",
                .set = TOOL_SET_RUNTIME,
                .title = "Inspect per-line published ownership",
                .description =
                        "Return each line owner for a published path from the latest auditability event. Use this "
                        "after commands, writes, or edits have created auditability events. Ranges are 1-indexed "
                        "and tile the latest known file content. Treat owner strings as opaque. A missing "
                        "auditability record returns not_found.\n\n"
                        "owner is workspace_session:<id> (published by a workspace session), operation:<id> "
                        "(file_write or file_edit without a session), original (imported with the sandbox) or "
                        "unknown. Each publication updates ownership from a line diff: unchanged lines keep their "
                        "owner, changed and inserted lines take the publisher.",
                .input_schema = file_blame_input,
                .output_schema = file_blame_output,
                .annotations = annotations_read_only,
                .prepare = prepare_file_blame,
                .render = render_file_blame,
                .text = text_file_blame,
        },
        {
                .name = "create_workspace_session",
                .set = TOOL_SET_SESSIONS,
                .title = "Create a managed workspace session",
                .description =
                        "Create a managed workspace session: a private writable view of the workspace on top of "
                        "the published snapshot as it is now. Pass its workspace_session_id to exec_command and "
                        "the file tools; their changes stay private to the session until "
                        "finalize_workspace_session publishes or discards them.\n\n"
                        "finalize_policy (default publish_then_destroy) is what finalizing without an action "
                        "does: publish_then_destroy publishes the changes as one layer owned by "
                        "workspace_session:<id>; destroy discards them. Changes outside the workspace are always "
                        "discarded.",
                .input_schema = create_workspace_session_input,
                .output_schema = session_info_output,
                .annotations = annotations_create,
                .prepare = prepare_session_create,
                .render = render_session,
        },
        {
                .name = "finalize_workspace_session",
                .set = TOOL_SET_SESSIONS,
                .title = "Publish or discard a workspace session",
                .description =
                        "Finalize a managed workspace session now: publish its workspace changes as one layer "
                        "owned by workspace_session:<id>, or discard them, then destroy the session. action "
                        "defaults to the session's finalize policy (publish for publish_then_destroy, discard for "
                        "destroy).\n\n"
                        "Conflicts: when the session changed a path that a layer published after the session "
                        "started also changed, nothing is published and nothing is overwritten. This is not an "
                        "error: the result has action conflict and publication.conflicts lists the paths; the "
                        "session and its changes are kept. Inspect with diff_workspace_session, then call again "
                        "with overwrite true to publish over the later changes, or with action discard.",
                .input_schema = finalize_workspace_session_input,
                .output_schema = finalize_workspace_session_output,
                .annotations = annotations_mutating,
                .prepare = prepare_session_finalize,
                .render = render_session_finalize,
        },
        {
                .name = "list_workspace_sessions",
                .set = TOOL_SET_SESSIONS,
                .title = "List workspace sessions",
                .description =
                        "List the sandbox's live workspace sessions, managed and automatic, with their finalize "
                        "policy, state (starting, live, stopped, or conflicted after a refused publication), base layer, creation "
                        "time and running commands.",
                .input_schema = list_workspace_sessions_input,
                .output_schema = list_workspace_sessions_output,
                .annotations = annotations_read_only,
                .prepare = prepare_session_list,
                .render = render_session_list,
        },
        {
                .name = "diff_workspace_session",
                .set = TOOL_SET_SESSIONS,
                .title = "Show a workspace session's changes",
                .description =
                        "Show what a workspace session changed in the workspace against the snapshot it started "
                        "from: every changed path (added, modified or deleted) and a unified diff of the text "
                        "files. The diff is cut at 96 KiB (truncated is then true); use file_read with the "
                        "workspace_session_id for more.",
                .input_schema = diff_workspace_session_input,
                .output_schema = diff_workspace_session_output,
                .annotations = annotations_read_only,
                .prepare = prepare_session_diff,
                .render = render_session_diff,
        },
        {
                .name = "list_command_sessions",
                .set = TOOL_SET_SESSIONS,
                .title = "List command sessions",
                .description =
                        "List the sandbox's command sessions, or those of one workspace session, with their status "
                        "(running, ok, error, timed_out, cancelled), exit code or signal, end reason, start and "
                        "end times (seconds since the Unix epoch) and command text. Read a command's output with "
                        "read_command_lines.",
                .input_schema = list_command_sessions_input,
                .output_schema = list_command_sessions_output,
                .annotations = annotations_read_only,
                .prepare = prepare_command_list,
                .render = render_command_list,
        },
        {
                .name = "cancel_command",
                .set = TOOL_SET_SESSIONS,
                .title = "Cancel a running command",
                .description =
                        "Cancel a running command: its whole process group is killed with SIGKILL and the command "
                        "ends with status cancelled (end_reason cancelled), its output kept. The result uses the "
                        "command-output shape of exec_command, given once the command has ended (status cancelled) "
                        "or after 2 s if it has not (status running; read_command_lines shows the end). A command of an "
                        "automatic session then publishes what it changed, as any ended command does.",
                .input_schema = cancel_command_input,
                .output_schema = command_output_schema,
                .annotations = annotations_mutating,
                .prepare = prepare_command_cancel,
                .render = render_command,
                .text = text_command,
        },
        {
                .name = "list_sandboxes",
                .set = TOOL_SET_SESSIONS,
                .title = "List your sandboxes",
                .description =
                        "List the sandboxes this user may use (every sandbox for root): the sandbox_id to pass to "
                        "the other tools, the host directory its workspace was imported from, its image, its "
                        "number of published layers and its live workspace sessions. Read-only.",
                .input_schema = list_sandboxes_input,
                .output_schema = list_sandboxes_output,
                .annotations = annotations_read_only,
                .prepare = prepare_sandbox_list,
                .render = render_sandbox_list,
        },
};

/* ---- helpers ------------------------------------------------------------- */

#define _cleanup_json_ _cleanup_(json_decrefp)

_printf_(2, 3)
static int invalid(char **ret_error, const char *fmt, ...) {
        _cleanup_free_ char *why = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&why, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (asprintf(ret_error, "invalid arguments: %s", why) < 0)
                return -ENOMEM;
        return -EINVAL;
}

/* A validated string argument: NULL if absent. Rejects NUL bytes, and
 * lengths outside [min_len, max_len]. */
static int string_arg(json_t *args, const char *name, size_t min_len, size_t max_len, const char *max_what,
                      const char **ret, size_t *ret_len, char **ret_error) {
        json_t *v = json_object_get(args, name);
        const char *s;
        size_t len;

        if (!v) {
                *ret = NULL;
                if (ret_len)
                        *ret_len = 0;
                return 0;
        }
        s = json_string_value(v);
        len = json_string_length(v);
        if (len < min_len)
                return invalid(ret_error, "%s: must not be empty", name);
        if (len > max_len)
                return invalid(ret_error, "%s: must be at most %zu bytes%s", name, max_len, max_what);
        if (memchr(s, '\0', len))
                return invalid(ret_error, "%s: must not contain NUL characters", name);
        *ret = s;
        if (ret_len)
                *ret_len = len;
        return 0;
}

static int id_arg(json_t *args, const char *name, const char **ret, char **ret_error) {
        return string_arg(args, name, 1, SBX_NAME_MAX, "", ret, NULL, ret_error);
}

/* A validated integer argument (the schema made it an integer >= 0). */
static bool int_arg(json_t *args, const char *name, uint64_t *ret) {
        json_t *v = json_object_get(args, name);

        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return false;
        *ret = (uint64_t) json_integer_value(v);
        return true;
}

/* ---- prepare: validated arguments -> request ----------------------------- */

static int prepare_exec(json_t *args, ToolRequest *req, char **ret_error) {
        const char *sandbox, *session, *cmd;
        uint64_t v;
        int r;

        req->body.exec = (Sbx__Exec) SBX__EXEC__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        /* "" is taken as omitted: no session named, an automatic one. */
        r = string_arg(args, "workspace_session_id", 0, SBX_NAME_MAX, "", &session, NULL, ret_error);
        if (r < 0)
                return r;
        r = string_arg(args, "cmd", 1, SBX_CMD_MAX, "", &cmd, NULL, ret_error);
        if (r < 0)
                return r;

        req->body.exec.sandbox = (char *) sandbox;
        if (session)
                req->body.exec.workspace_session = (char *) session;
        req->body.exec.cmd = (char *) cmd;
        if (int_arg(args, "timeout_ms", &v) && v > 0) {
                if (v > SBX_TIMEOUT_MAX_MS)
                        return invalid(ret_error, "timeout_ms: must be at most %llu (24 hours)",
                                       (unsigned long long) SBX_TIMEOUT_MAX_MS);
                req->body.exec.has_timeout = true;
                req->body.exec.timeout_ms = v;
        }
        if (int_arg(args, "yield_time_ms", &v)) {
                req->body.exec.has_yield = true;
                req->body.exec.yield_ms = MIN(v, (uint64_t) SBX_YIELD_MAX_MS);
        }

        req->msg = (Sbx__Msg) SBX__MSG__INIT;
        req->msg.type = SBX__MSG_TYPE__MSG_CLIENT_EXEC;
        req->msg.body_case = SBX__MSG__BODY_EXEC;
        req->msg.exec = &req->body.exec;
        return 0;
}

static int prepare_stdin(json_t *args, ToolRequest *req, char **ret_error) {
        const char *sandbox, *command;
        json_t *data = json_object_get(args, "stdin");
        size_t len = json_string_length(data);
        bool close = false;
        uint64_t v;
        int r;

        req->body.stdin_ = (Sbx__Stdin) SBX__STDIN__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = id_arg(args, "command_session_id", &command, ret_error);
        if (r < 0)
                return r;

        /* A trailing U+0004 (EOT, Ctrl-D) closes stdin after the text before it. */
        if (len > 0 && json_string_value(data)[len - 1] == '\x04') {
                close = true;
                len--;
        }
        if (len > SBX_STDIN_MAX)
                return invalid(ret_error, "stdin: must be at most %u bytes per call", SBX_STDIN_MAX);

        req->body.stdin_.sandbox = (char *) sandbox;
        req->body.stdin_.command_session = (char *) command;
        req->body.stdin_.data.len = len;
        req->body.stdin_.data.data = (uint8_t *) json_string_value(data);
        req->body.stdin_.close = close;
        if (int_arg(args, "yield_time_ms", &v)) {
                req->body.stdin_.has_yield = true;
                req->body.stdin_.yield_ms = MIN(v, (uint64_t) SBX_YIELD_MAX_MS);
        }

        req->msg = (Sbx__Msg) SBX__MSG__INIT;
        req->msg.type = SBX__MSG_TYPE__MSG_CLIENT_STDIN;
        req->msg.body_case = SBX__MSG__BODY_STDIN;
        req->msg.stdin = &req->body.stdin_;
        return 0;
}

static int prepare_read_lines(json_t *args, ToolRequest *req, char **ret_error) {
        const char *sandbox, *command;
        uint64_t start = 0, limit = SBX_READ_DEFAULT_LINES;
        int r;

        req->body.read_lines = (Sbx__ReadLines) SBX__READ_LINES__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = id_arg(args, "command_session_id", &command, ret_error);
        if (r < 0)
                return r;
        (void) int_arg(args, "start_offset", &start);
        (void) int_arg(args, "limit", &limit);
        if (limit > SBX_READ_MAX_LINES)
                return invalid(ret_error, "limit: must be at most %u", SBX_READ_MAX_LINES);

        req->body.read_lines.sandbox = (char *) sandbox;
        req->body.read_lines.command_session = (char *) command;
        req->body.read_lines.start_offset = start;
        req->body.read_lines.has_limit = true;
        req->body.read_lines.limit = (uint32_t) limit;

        req->msg = (Sbx__Msg) SBX__MSG__INIT;
        req->msg.type = SBX__MSG_TYPE__MSG_CLIENT_READ_LINES;
        req->msg.body_case = SBX__MSG__BODY_READ_LINES;
        req->msg.read_lines = &req->body.read_lines;
        return 0;
}

/* ---- prepare: files and sessions ------------------------------------------------ */

void tool_request_done(ToolRequest *req) {
        if (req)
                req->fd = safe_close(req->fd);
}

int sealed_memfd_new(const char *name, const void *data, size_t size, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        const uint8_t *p = data;
        size_t done = 0;

        fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        /* Sized first, so a full tmpfs fails here and not halfway through. */
        if (ftruncate(fd, (off_t) size) < 0)
                return -errno;
        while (done < size) {
                ssize_t n = pwrite(fd, p + done, size - done, (off_t) done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                done += (size_t) n;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int path_arg(json_t *args, const char **ret, char **ret_error) {
        return string_arg(args, "path", 1, SBX_PATH_MAX, "", ret, NULL, ret_error);
}

/* An optional session id; "" is taken as omitted (the snapshot), as for exec_command. */
static int session_arg(json_t *args, const char **ret, char **ret_error) {
        int r = string_arg(args, "workspace_session_id", 0, SBX_NAME_MAX, "", ret, NULL, ret_error);

        if (r >= 0 && !*ret)
                *ret = "";
        return r;
}

static void request_set(ToolRequest *req, Sbx__MsgType type, Sbx__Msg__BodyCase body_case, void *body) {
        req->msg = (Sbx__Msg) SBX__MSG__INIT;
        req->msg.type = type;
        req->msg.body_case = body_case;
        /* Every body member of the oneof shares one pointer slot. */
        req->msg.hello = body;
}

static int prepare_file_read(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__FileRead *m = &req->body.file_read;
        const char *sandbox, *path, *session;
        uint64_t offset = 1, limit = SBX_FILE_READ_DEFAULT_LINES;
        int r;

        *m = (Sbx__FileRead) SBX__FILE_READ__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = path_arg(args, &path, ret_error);
        if (r < 0)
                return r;
        r = session_arg(args, &session, ret_error);
        if (r < 0)
                return r;
        (void) int_arg(args, "offset", &offset);
        (void) int_arg(args, "limit", &limit);
        /* The seed: "must be 1..=2000"; its schema only says minimum 0. */
        if (limit < 1 || limit > SBX_FILE_READ_MAX_LINES)
                return invalid(ret_error, "limit: must be 1..=%u", SBX_FILE_READ_MAX_LINES);

        m->sandbox = (char *) sandbox;
        m->path = (char *) path;
        m->workspace_session = (char *) session;
        m->has_offset = true;
        m->offset = MAX(offset, (uint64_t) 1);  /* 0 is taken as 1 */
        m->has_limit = true;
        m->limit = (uint32_t) limit;
        request_set(req, SBX__MSG_TYPE__MSG_CLIENT_FILE_READ, SBX__MSG__BODY_FILE_READ, m);
        return 0;
}

static int prepare_file_write(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__FileWrite *m = &req->body.file_write;
        const char *sandbox, *path, *session;
        json_t *content = json_object_get(args, "content");
        size_t len = json_string_length(content);
        int r;

        *m = (Sbx__FileWrite) SBX__FILE_WRITE__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = path_arg(args, &path, ret_error);
        if (r < 0)
                return r;
        r = session_arg(args, &session, ret_error);
        if (r < 0)
                return r;
        if (len > SBX_FILE_MAX)
                return invalid(ret_error, "content: must be at most %llu bytes (16 MiB)",
                               (unsigned long long) SBX_FILE_MAX);

        r = sealed_memfd_new("sbx-file-write", json_string_value(content), len, &req->fd);
        if (r < 0)
                return r;
        m->sandbox = (char *) sandbox;
        m->path = (char *) path;
        m->workspace_session = (char *) session;
        m->content_size = len;
        request_set(req, SBX__MSG_TYPE__MSG_CLIENT_FILE_WRITE, SBX__MSG__BODY_FILE_WRITE, m);
        return 0;
}

/* Check the items of edits (non-empty; objects with string old_string and
 * new_string, optional boolean replace_all, nothing else), naming each
 * offender as edits[N].key. Applies replace_all's default. */
static int check_edits(json_t *args, char **ret_error) {
        _cleanup_json_ json_t *schema = NULL, *wrapper = NULL;
        _cleanup_free_ char *why = NULL;
        json_t *edits = json_object_get(args, "edits");
        int r;

        if (json_array_size(edits) == 0)
                return invalid(ret_error, "edits: must not be empty");
        schema = json_loads(file_edit_items_schema, 0, NULL);
        wrapper = json_pack("{s:O}", "edits", edits);     /* shares edits: defaults land in args */
        if (!schema || !wrapper)
                return -ENOMEM;
        r = schema_validate(schema, wrapper, &why);
        if (r == -EINVAL)
                return invalid(ret_error, "%s", why);
        return r;
}

static int prepare_file_edit(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__FileEdit *m = &req->body.file_edit;
        Sbx__EditList list = SBX__EDIT_LIST__INIT;
        _cleanup_free_ Sbx__Edit *items = NULL;
        _cleanup_free_ Sbx__Edit **ptrs = NULL;
        _cleanup_free_ uint8_t *packed = NULL;
        const char *sandbox, *path, *session;
        json_t *edits, *e;
        size_t n, i, size;
        int r;

        *m = (Sbx__FileEdit) SBX__FILE_EDIT__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = path_arg(args, &path, ret_error);
        if (r < 0)
                return r;
        r = session_arg(args, &session, ret_error);
        if (r < 0)
                return r;
        r = check_edits(args, ret_error);
        if (r < 0)
                return r;

        edits = json_object_get(args, "edits");
        n = json_array_size(edits);
        items = calloc(n, sizeof(*items));
        ptrs = calloc(n, sizeof(*ptrs));
        if (!items || !ptrs)
                return -ENOMEM;
        json_array_foreach(edits, i, e) {
                json_t *o = json_object_get(e, "old_string"), *nw = json_object_get(e, "new_string");

                items[i] = (Sbx__Edit) SBX__EDIT__INIT;
                items[i].old_string.data = (uint8_t *) json_string_value(o);
                items[i].old_string.len = json_string_length(o);
                items[i].new_string.data = (uint8_t *) json_string_value(nw);
                items[i].new_string.len = json_string_length(nw);
                items[i].replace_all = json_is_true(json_object_get(e, "replace_all"));
                ptrs[i] = &items[i];
        }
        list.n_edits = n;
        list.edits = ptrs;
        size = sbx__edit_list__get_packed_size(&list);
        if (size > SBX_FILE_MAX)
                return invalid(ret_error, "edits: must total at most %llu bytes (16 MiB)",
                               (unsigned long long) SBX_FILE_MAX);
        packed = malloc(MAX(size, (size_t) 1));
        if (!packed)
                return -ENOMEM;
        if (sbx__edit_list__pack(&list, packed) != size)
                return -EINVAL;
        r = sealed_memfd_new("sbx-file-edit", packed, size, &req->fd);
        if (r < 0)
                return r;

        m->sandbox = (char *) sandbox;
        m->path = (char *) path;
        m->workspace_session = (char *) session;
        m->edits_size = size;
        request_set(req, SBX__MSG_TYPE__MSG_CLIENT_FILE_EDIT, SBX__MSG__BODY_FILE_EDIT, m);
        return 0;
}


/* A request whose fields are all strings taken from the arguments: the
 * argument checks differ only in their kind, the fields are found by name. */
typedef enum ArgKind {
        ARG_ID,             /* required id (1..SBX_NAME_MAX) */
        ARG_SESSION,        /* optional workspace session id */
        ARG_PATH,           /* required path (1..SBX_PATH_MAX) */
} ArgKind;

typedef struct ArgField {
        const char *arg;
        const char *field;
        ArgKind kind;
} ArgField;

static int prepare_strings(json_t *args, ToolRequest *req, char **ret_error, const ProtobufCMessageDescriptor *desc,
                           Sbx__MsgType type, Sbx__Msg__BodyCase body_case, const ArgField *fields, size_t n) {
        ProtobufCMessage *m = (ProtobufCMessage *) &req->body;

        protobuf_c_message_init(desc, m);
        for (size_t i = 0; i < n; i++) {
                const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(desc, fields[i].field);
                const char *v;
                int r;

                assert(f && f->type == PROTOBUF_C_TYPE_STRING);
                r = fields[i].kind == ARG_PATH    ? path_arg(args, &v, ret_error)
                    : fields[i].kind == ARG_SESSION ? session_arg(args, &v, ret_error)
                                                    : id_arg(args, fields[i].arg, &v, ret_error);
                if (r < 0)
                        return r;
                *(const char **) ((char *) m + f->offset) = v;
        }
        request_set(req, type, body_case, m);
        return 0;
}

#define PREPARE_STRINGS(fn, msg, TYPE, BODY, ...)                                                               \
        static int fn(json_t *args, ToolRequest *req, char **ret_error) {                                     \
                static const ArgField fields[] = { __VA_ARGS__ };                                             \
                return prepare_strings(args, req, ret_error, &msg##__descriptor, SBX__MSG_TYPE__MSG_CLIENT_##TYPE, \
                                       SBX__MSG__BODY_##BODY, fields, ELEMENTSOF(fields));                    \
        }

PREPARE_STRINGS(prepare_file_blame, sbx__file_blame, FILE_BLAME, FILE_BLAME,
                { "sandbox_id", "sandbox", ARG_ID }, { "path", "path", ARG_PATH })
PREPARE_STRINGS(prepare_session_list, sbx__session_list, SESSION_LIST, SESSION_LIST,
                { "sandbox_id", "sandbox", ARG_ID })
PREPARE_STRINGS(prepare_session_diff, sbx__session_diff, SESSION_DIFF, SESSION_DIFF,
                { "sandbox_id", "sandbox", ARG_ID }, { "workspace_session_id", "workspace_session", ARG_ID })
PREPARE_STRINGS(prepare_command_list, sbx__command_list, COMMAND_LIST, COMMAND_LIST,
                { "sandbox_id", "sandbox", ARG_ID }, { "workspace_session_id", "workspace_session", ARG_SESSION })
PREPARE_STRINGS(prepare_command_cancel, sbx__command_cancel, COMMAND_CANCEL, COMMAND_CANCEL,
                { "sandbox_id", "sandbox", ARG_ID }, { "command_session_id", "command_session", ARG_ID })

static int prepare_sandbox_list(json_t *args, ToolRequest *req, char **ret_error) {
        req->body.sandbox_list = (Sbx__SandboxList) SBX__SANDBOX_LIST__INIT;
        request_set(req, SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST, SBX__MSG__BODY_SANDBOX_LIST, &req->body.sandbox_list);
        return 0;
}

static int prepare_session_create(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__SessionCreate *m = &req->body.session_create;
        const char *sandbox;
        json_t *policy = json_object_get(args, "finalize_policy");
        int r;

        *m = (Sbx__SessionCreate) SBX__SESSION_CREATE__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        m->sandbox = (char *) sandbox;
        /* The schema's enum and default made it one of the two. */
        m->finalize_policy = (char *) (json_is_string(policy) ? json_string_value(policy) : "publish_then_destroy");
        request_set(req, SBX__MSG_TYPE__MSG_CLIENT_SESSION_CREATE, SBX__MSG__BODY_SESSION_CREATE, m);
        return 0;
}

static int prepare_session_finalize(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__SessionFinalize *m = &req->body.session_finalize;
        const char *sandbox, *session;
        json_t *action = json_object_get(args, "action");
        int r;

        *m = (Sbx__SessionFinalize) SBX__SESSION_FINALIZE__INIT;
        r = id_arg(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = id_arg(args, "workspace_session_id", &session, ret_error);
        if (r < 0)
                return r;
        m->sandbox = (char *) sandbox;
        m->workspace_session = (char *) session;
        if (json_is_string(action))
                m->action = (char *) json_string_value(action);   /* "" (absent): the session's policy */
        m->overwrite = json_is_true(json_object_get(args, "overwrite"));
        request_set(req, SBX__MSG_TYPE__MSG_CLIENT_SESSION_FINALIZE, SBX__MSG__BODY_SESSION_FINALIZE, m);
        return 0;
}





/* ---- registry -------------------------------------------------------------- */

int tool_sets_parse(const char *list, unsigned *ret_sets, const char **ret_bad) {
        unsigned sets = 0;
        const char *p = list;

        for (;;) {
                size_t n = strcspn(p, ",");
                bool found = false;

                for (size_t i = 0; i < ELEMENTSOF(tool_sets); i++)
                        if (n == strlen(tool_sets[i].name) && strncmp(p, tool_sets[i].name, n) == 0) {
                                sets |= tool_sets[i].set;
                                found = true;
                        }
                if (!found) {
                        if (ret_bad)
                                *ret_bad = p;
                        return -EINVAL;
                }
                if (p[n] == '\0')
                        break;
                p += n + 1;
        }
        *ret_sets = sets;
        return 0;
}

Tools *tools_free(Tools *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n; i++) {
                json_decref(t->tools[i].input_schema);
                json_decref(t->tools[i].output_schema);
        }
        free(t->tools);
        json_decref(t->list);
        free(t);
        return NULL;
}

static json_t *load_schema(const char *text) {
        json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);

        /* Published schemas have an object root (MCP requires type "object"). */
        if (j && (!json_is_object(j) || !json_is_string(json_object_get(j, "type")) ||
                  strcmp(json_string_value(json_object_get(j, "type")), "object") != 0)) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int tools_new(unsigned sets, Tools **ret_tools) {
        _cleanup_(tools_freep) Tools *t = NULL;
        json_t *array;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->sets = sets;
        t->tools = calloc(ELEMENTSOF(tool_table), sizeof(Tool));
        t->list = json_pack("{s:[]}", "tools");
        if (!t->tools || !t->list)
                return -ENOMEM;
        array = json_object_get(t->list, "tools");

        for (size_t i = 0; i < ELEMENTSOF(tool_table); i++) {
                const ToolDef *d = &tool_table[i];
                Tool *tool;
                json_t *entry, *annotations;

                if (!(d->set & sets))
                        continue;
                tool = &t->tools[t->n++];
                tool->def = d;
                tool->input_schema = load_schema(d->input_schema);
                tool->output_schema = load_schema(d->output_schema);
                annotations = json_loads(d->annotations, 0, NULL);
                if (!tool->input_schema || !tool->output_schema || !annotations) {
                        json_decref(annotations);
                        return -EINVAL;
                }
                entry = json_pack("{s:s, s:s, s:s, s:O, s:O, s:o}",
                                  "name", d->name, "title", d->title, "description", d->description,
                                  "inputSchema", tool->input_schema, "outputSchema", tool->output_schema,
                                  "annotations", annotations);
                if (!entry || json_array_append_new(array, entry) < 0)
                        return -ENOMEM;
        }
        *ret_tools = TAKE_PTR(t);
        return 0;
}

const json_t *tools_list_result(const Tools *t) {
        return t->list;
}

const Tool *tools_find(const Tools *t, const char *name, size_t len) {
        for (size_t i = 0; i < t->n; i++)
                if (strlen(t->tools[i].def->name) == len && memcmp(t->tools[i].def->name, name, len) == 0)
                        return &t->tools[i];
        return NULL;
}

const char *tool_name(const Tool *tool) {
        return tool->def->name;
}

int tool_prepare(const Tool *tool, json_t *arguments, ToolRequest *ret_req, char **ret_error) {
        _cleanup_free_ char *why = NULL;
        int r;

        ret_req->fd = -EBADF;
        r = schema_validate(tool->input_schema, arguments, &why);
        if (r == -EINVAL) {
                if (asprintf(ret_error, "invalid arguments: %s", why) < 0)
                        return -ENOMEM;
                return -EINVAL;
        }
        if (r < 0)
                return r;
        r = tool->def->prepare(arguments, ret_req, ret_error);
        if (r < 0)
                tool_request_done(ret_req);
        return r;
}

/* ---- results ----------------------------------------------------------------- */

json_t *tool_error_result(const char *text) {
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError", 1);
}

/* Length of the UTF-8 sequence at p (at most len bytes), 0 if it is not a
 * valid one: no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_sequence_length(const uint8_t *p, size_t len) {
        uint8_t c = p[0], lo = 0x80, hi = 0xbf;
        size_t n = 0;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                n = 2;
        else if (c >= 0xe0 && c <= 0xef) {
                n = 3;
                if (c == 0xe0)
                        lo = 0xa0;
                else if (c == 0xed)
                        hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                n = 4;
                if (c == 0xf0)
                        lo = 0x90;
                else if (c == 0xf4)
                        hi = 0x8f;
        }
        if (n == 0 || n > len || p[1] < lo || p[1] > hi)
                return 0;
        for (size_t k = 2; k < n; k++)
                if ((p[k] & 0xc0) != 0x80)
                        return 0;
        return n;
}

/* Length of the longest valid UTF-8 prefix; ASCII is taken 8 bytes at a time. */
static size_t utf8_valid_prefix(const uint8_t *p, size_t len) {
        size_t i = 0, n;

        while (i < len) {
                uint64_t w;

                if (i + 8 <= len) {
                        memcpy(&w, p + i, 8);
                        if (!(w & UINT64_C(0x8080808080808080))) {
                                i += 8;
                                continue;
                        }
                }
                n = utf8_sequence_length(p + i, len - i);
                if (n == 0)
                        return i;
                i += n;
        }
        return len;
}

int utf8_sanitize(const void *data, size_t len, char **ret_str, size_t *ret_len) {
        const uint8_t *p = data;
        char *out, *o;

        if (len > (SIZE_MAX - 1) / 3)
                return -ENOMEM;
        out = o = malloc(len * 3 + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len;) {
                size_t valid = utf8_valid_prefix(p + i, len - i);

                memcpy(o, p + i, valid);
                o += valid;
                i += valid;
                if (i < len) {
                        memcpy(o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                }
        }
        *o = '\0';
        *ret_str = out;
        *ret_len = (size_t) (o - out);
        return 0;
}

static json_t *string_from(const char *s, size_t len) {
        _cleanup_free_ char *clean = NULL;
        size_t n;

        if (!s)
                return json_string("");
        if (utf8_valid_prefix((const uint8_t *) s, len) == len)
                return json_stringn_nocheck(s, len);
        if (utf8_sanitize(s, len, &clean, &n) < 0)
                return NULL;
        return json_stringn_nocheck(clean, n);
}

static json_t *cstring_from(const char *s) {
        return string_from(s, s ? strlen(s) : 0);
}

static json_t *uint_from(uint64_t v) {
        return json_integer((json_int_t) MIN(v, (uint64_t) INT64_MAX));
}

static json_t *real_from(double d) {
        return json_real(isfinite(d) ? d : 0.0);
}

static int set_new(json_t *o, const char *key, json_t *v) {
        if (!v)
                return -ENOMEM;
        return json_object_set_new(o, key, v) < 0 ? -ENOMEM : 0;
}

static json_t *int_from(int64_t v) {
        return json_integer((json_int_t) v);
}

/* A Publication as JSON; conflicts only when there are some. */
static json_t *publication_to_json(const Sbx__Publication *p) {
        _cleanup_json_ json_t *pub = json_object();
        int r = 0;

        if (!pub)
                return NULL;
        r |= set_new(pub, "published", json_boolean(p->published));
        r |= set_new(pub, "layer", json_integer(p->layer));
        r |= set_new(pub, "owner", cstring_from(p->owner));
        r |= set_new(pub, "changed_paths", json_integer(p->changed_paths));
        if (p->error && p->error[0])
                r |= set_new(pub, "error", cstring_from(p->error));
        if (p->n_conflicts > 0) {
                json_t *list = json_array();

                r |= set_new(pub, "conflicts", list);
                for (size_t i = 0; list && i < p->n_conflicts; i++) {
                        json_t *s = cstring_from(p->conflicts[i]);
                        if (!s || json_array_append_new(list, s) < 0)
                                r = -ENOMEM;
                }
        }
        return r == 0 ? TAKE_PTR(pub) : NULL;
}

static int command_output_to_json(const Sbx__CommandOutput *c, json_t **ret) {
        _cleanup_json_ json_t *o = json_object();
        int r = 0;

        if (!o)
                return -ENOMEM;
        r |= set_new(o, "command_session_id", cstring_from(c->command_session));
        r |= set_new(o, "workspace_session_id", cstring_from(c->workspace_session));
        r |= set_new(o, "status", cstring_from(c->status));
        r |= set_new(o, "exit_code", c->has_exit_code ? json_integer(c->exit_code) : json_null());
        r |= set_new(o, "signal", c->signal != 0 ? json_integer(c->signal) : json_null());
        r |= set_new(o, "end_reason",
                     c->end_reason && c->end_reason[0] ? cstring_from(c->end_reason) : json_null());
        r |= set_new(o, "wall_time_seconds", real_from(c->wall_time_seconds));
        r |= set_new(o, "command_total_time_seconds", real_from(c->command_total_time_seconds));
        r |= set_new(o, "start_offset", uint_from(c->start_offset));
        r |= set_new(o, "end_offset", uint_from(c->end_offset));
        r |= set_new(o, "total_lines", uint_from(c->total_lines));
        r |= set_new(o, "original_token_count", uint_from(c->original_token_count));
        r |= set_new(o, "output", string_from((const char *) c->output.data, c->output.len));
        r |= set_new(o, "publication", c->publication ? publication_to_json(c->publication) : json_null());
        if (r != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* ---- rendering replies ---------------------------------------------------------- */

static int render_command(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_COMMAND || !reply->command)
                return -EBADMSG;
        return command_output_to_json(reply->command, ret);
}

static int render_file_read(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__FileReadReply *f = reply->file_read;
        _cleanup_json_ json_t *o = NULL;
        int r = 0;

        if (reply->body_case != SBX__REPLY__BODY_FILE_READ || !f)
                return -EBADMSG;
        o = json_object();
        if (!o)
                return -ENOMEM;
        r |= set_new(o, "path", cstring_from(f->path));
        r |= set_new(o, "content", string_from((const char *) f->content.data, f->content.len));
        r |= set_new(o, "start_line", uint_from(f->start_line));
        r |= set_new(o, "num_lines", uint_from(f->num_lines));
        r |= set_new(o, "total_lines", uint_from(f->total_lines));
        r |= set_new(o, "bytes_read", uint_from(f->bytes_read));
        r |= set_new(o, "total_bytes", uint_from(f->total_bytes));
        r |= set_new(o, "next_offset", f->has_next_offset ? uint_from(f->next_offset) : json_null());
        r |= set_new(o, "truncated", json_boolean(f->truncated));
        if (r != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* file_write: type, path, bytes_written; file_edit adds edits_applied and
 * replacements. publication only when sbxd sent one (no session). */
static int render_file_change(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__FileChangeReply *f = reply->file_change;
        _cleanup_json_ json_t *o = NULL;
        bool edit;
        int r = 0;

        if (reply->body_case != SBX__REPLY__BODY_FILE_CHANGE || !f)
                return -EBADMSG;
        edit = f->type && strcmp(f->type, "edit") == 0;
        o = json_object();
        if (!o)
                return -ENOMEM;
        r |= set_new(o, "type", cstring_from(f->type));
        r |= set_new(o, "path", cstring_from(f->path));
        if (edit) {
                r |= set_new(o, "edits_applied", json_integer(f->edits_applied));
                r |= set_new(o, "replacements", uint_from(f->replacements));
        }
        r |= set_new(o, "bytes_written", uint_from(f->bytes_written));
        if (f->publication)
                r |= set_new(o, "publication", publication_to_json(f->publication));
        if (r != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int render_file_blame(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__FileBlameReply *f = reply->file_blame;
        _cleanup_json_ json_t *o = NULL;
        json_t *ranges;
        int r = 0;

        if (reply->body_case != SBX__REPLY__BODY_FILE_BLAME || !f)
                return -EBADMSG;
        o = json_object();
        ranges = json_array();
        if (!o)
                return -ENOMEM;
        r |= set_new(o, "path", cstring_from(f->path));
        r |= set_new(o, "ranges", ranges);
        for (size_t i = 0; r == 0 && i < f->n_ranges; i++) {
                const Sbx__BlameRange *b = f->ranges[i];
                json_t *x = json_object();

                if (!x || json_array_append_new(ranges, x) < 0)
                        return -ENOMEM;
                r |= set_new(x, "start_line", uint_from(b->start_line));
                r |= set_new(x, "line_count", uint_from(b->line_count));
                r |= set_new(x, "owner", cstring_from(b->owner));
        }
        if (r != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static json_t *session_info_to_json(const Sbx__SessionInfo *s) {
        _cleanup_json_ json_t *o = json_object();
        int r = 0;

        if (!o)
                return NULL;
        r |= set_new(o, "workspace_session_id", cstring_from(s->workspace_session));
        r |= set_new(o, "sandbox_id", cstring_from(s->sandbox));
        r |= set_new(o, "finalize_policy", cstring_from(s->finalize_policy));
        r |= set_new(o, "automatic", json_boolean(s->automatic));
        r |= set_new(o, "state", cstring_from(s->state));
        r |= set_new(o, "base_layer", json_integer(s->base_layer));
        r |= set_new(o, "created_unix", int_from(s->created_unix));
        r |= set_new(o, "running_commands", json_integer(s->running_commands));
        return r == 0 ? TAKE_PTR(o) : NULL;
}

static int render_session(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_SESSION || !reply->session)
                return -EBADMSG;
        *ret = session_info_to_json(reply->session);
        return *ret ? 0 : -ENOMEM;
}

static const char *args_string(const json_t *args, const char *key) {
        const char *s = json_string_value(json_object_get(args, key));
        return s ? s : "";
}

static int render_session_finalize(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__SessionFinalizeReply *f = reply->session_finalize;
        _cleanup_json_ json_t *o = NULL;
        const char *id;
        int r = 0;

        if (reply->body_case != SBX__REPLY__BODY_SESSION_FINALIZE || !f)
                return -EBADMSG;
        id = f->session && f->session->workspace_session && f->session->workspace_session[0]
                ? f->session->workspace_session : args_string(args, "workspace_session_id");
        o = json_object();
        if (!o)
                return -ENOMEM;
        r |= set_new(o, "workspace_session_id", cstring_from(id));
        r |= set_new(o, "action", cstring_from(f->action));
        r |= set_new(o, "publication", f->publication ? publication_to_json(f->publication) : json_null());
        if (r != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* {key: [one(items[0]), ...]}: a listing, each item made by one (NULL on ENOMEM). */
static int render_list(const char *key, size_t n, void *const *items, json_t *(*one)(const void *item),
                       json_t **ret) {
        _cleanup_json_ json_t *o = json_object();
        json_t *list = json_array();

        if (!o || set_new(o, key, list) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_t *x = one(items[i]);
                if (!x || json_array_append_new(list, x) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

static json_t *session_item_to_json(const void *item) {
        return session_info_to_json(item);
}

static int render_session_list(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__SessionListReply *l = reply->session_list;

        if (reply->body_case != SBX__REPLY__BODY_SESSION_LIST || !l)
                return -EBADMSG;
        return render_list("sessions", l->n_sessions, (void *const *) l->sessions, session_item_to_json, ret);
}

static int render_session_diff(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__SessionDiffReply *d = reply->session_diff;
        _cleanup_json_ json_t *o = NULL;
        json_t *changes;
        int r = 0;

        if (reply->body_case != SBX__REPLY__BODY_SESSION_DIFF || !d)
                return -EBADMSG;
        o = json_object();
        changes = json_array();
        if (!o)
                return -ENOMEM;
        r |= set_new(o, "workspace_session_id", cstring_from(args_string(args, "workspace_session_id")));
        r |= set_new(o, "changes", changes);
        for (size_t i = 0; r == 0 && i < d->n_changes; i++) {
                json_t *x = json_object();

                if (!x || json_array_append_new(changes, x) < 0)
                        return -ENOMEM;
                r |= set_new(x, "path", cstring_from(d->changes[i]->path));
                r |= set_new(x, "change", cstring_from(d->changes[i]->change));
        }
        r |= set_new(o, "diff", string_from((const char *) d->diff.data, d->diff.len));
        r |= set_new(o, "truncated", json_boolean(d->truncated));
        if (r != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static json_t *unix_usec_from(int64_t usec) {
        return json_real((double) usec / 1e6);
}

static json_t *command_info_to_json(const void *item) {
        const Sbx__CommandInfo *c = item;
        _cleanup_json_ json_t *x = json_object();
        int r = 0;

        if (!x)
                return NULL;
        r |= set_new(x, "command_session_id", cstring_from(c->command_session));
        r |= set_new(x, "workspace_session_id", cstring_from(c->workspace_session));
        r |= set_new(x, "status", cstring_from(c->status));
        r |= set_new(x, "exit_code", c->has_exit_code ? json_integer(c->exit_code) : json_null());
        r |= set_new(x, "signal", c->signal != 0 ? json_integer(c->signal) : json_null());
        r |= set_new(x, "end_reason", c->end_reason && c->end_reason[0] ? cstring_from(c->end_reason) : json_null());
        r |= set_new(x, "started_unix", unix_usec_from(c->started_unix_usec));
        r |= set_new(x, "ended_unix", c->ended_unix_usec != 0 ? unix_usec_from(c->ended_unix_usec) : json_null());
        r |= set_new(x, "cmd", cstring_from(c->cmd));
        return r == 0 ? TAKE_PTR(x) : NULL;
}

static int render_command_list(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__CommandListReply *l = reply->command_list;

        if (reply->body_case != SBX__REPLY__BODY_COMMAND_LIST || !l)
                return -EBADMSG;
        return render_list("commands", l->n_commands, (void *const *) l->commands, command_info_to_json, ret);
}

static json_t *sandbox_info_to_json(const void *item) {
        const Sbx__SandboxInfo *sb = item;
        _cleanup_json_ json_t *x = json_object();
        int r = 0;

        if (!x)
                return NULL;
        r |= set_new(x, "sandbox_id", cstring_from(sb->name));
        r |= set_new(x, "source", cstring_from(sb->source_dir));
        r |= set_new(x, "image", cstring_from(sb->image && sb->image[0] ? sb->image : "default"));
        r |= set_new(x, "layers", json_integer(sb->layer_count));
        r |= set_new(x, "live_sessions", json_integer(sb->live_sessions));
        return r == 0 ? TAKE_PTR(x) : NULL;
}

static int render_sandbox_list(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__SandboxListReply *l = reply->sandbox_list;

        if (reply->body_case != SBX__REPLY__BODY_SANDBOX_LIST || !l)
                return -EBADMSG;
        return render_list("sandboxes", l->n_sandboxes, (void *const *) l->sandboxes, sandbox_info_to_json, ret);
}

/* ---- the rendered text block -------------------------------------------------
 * --content=text (the default): one header line that says what happened, what
 * is shown of how much and how to get the rest, then the text itself as it is
 * (no JSON escaping). Only what structuredContent (and the reply) hold, in a
 * fixed order and format: the same result always renders the same text.
 * structuredContent keeps every field; the header leaves out what an agent
 * does not need (an ended automatic session's id, a token estimate when
 * nothing was cut, six decimals of seconds). */

static const char *sc_str(const json_t *o, const char *key) {
        const char *v = json_string_value(json_object_get(o, key));
        return v ? v : "";
}

static unsigned long long sc_uint(const json_t *o, const char *key) {
        const json_t *v = json_object_get(o, key);
        return json_is_integer(v) && json_integer_value(v) > 0 ? (unsigned long long) json_integer_value(v) : 0;
}

/* Seconds with as many decimals as matter: 0.03, 2.5, 120. */
static void put_seconds(FILE *f, double t) {
        fprintf(f, t < 1 ? "%.2f s" : t < 100 ? "%.1f s" : "%.0f s", t);
}

static const char *plural(unsigned long long n) {
        return n == 1 ? "" : "s";
}

/* "; published layer 7 (3 changed paths)", or why nothing was. */
static void put_publication(FILE *f, const json_t *p) {
        const json_t *conflicts = json_object_get(p, "conflicts");
        size_t i;
        json_t *c;

        if (json_is_true(json_object_get(p, "published"))) {
                fprintf(f, "; published layer %llu (%llu changed path%s, owner %s)", sc_uint(p, "layer"),
                        sc_uint(p, "changed_paths"), plural(sc_uint(p, "changed_paths")), sc_str(p, "owner"));
                return;
        }
        if (!sc_str(p, "error")[0]) {
                fputs("; nothing to publish (nothing changed)", f);
                return;
        }
        fprintf(f, "; %s", sc_str(p, "error"));
        json_array_foreach(conflicts, i, c) {
                if (i == SBX_TEXT_PATHS_SHOWN) {
                        fprintf(f, " and %zu more", json_array_size(conflicts) - i);
                        break;
                }
                fprintf(f, "%s%s", i ? ", " : " (conflicting: ", json_string_value(c));
        }
        if (json_array_size(conflicts) > 0)
                fputc(')', f);
}

/* Status, exit, signal and end reason: "ok, exit 0", "timed_out, signal 9 (SIGKILL), timeout". */
static void put_command_status(FILE *f, const json_t *sc) {
        const json_t *sig = json_object_get(sc, "signal");
        const char *end = sc_str(sc, "end_reason");

        fputs(sc_str(sc, "status"), f);
        if (json_is_integer(json_object_get(sc, "exit_code")))
                fprintf(f, ", exit %" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(sc, "exit_code")));
        if (json_is_integer(sig)) {
                const char *name = sigabbrev_np((int) json_integer_value(sig));
                fprintf(f, ", signal %" JSON_INTEGER_FORMAT "%s%s%s", json_integer_value(sig), name ? " (SIG" : "",
                        name ?: "", name ? ")" : "");
        }
        if (end[0] && strcmp(end, "exit") != 0 && strcmp(end, "signal") != 0)
                fprintf(f, ", %s", end);
}

static void text_command(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        unsigned long long start = sc_uint(sc, "start_offset"), end = sc_uint(sc, "end_offset"),
                           total = sc_uint(sc, "total_lines");
        const json_t *pub = json_object_get(sc, "publication");
        bool running = strcmp(sc_str(sc, "status"), "running") == 0, cut = start > 0 || end < total;
        /* A session that still exists: running, managed (no publication), or kept after a refusal. */
        bool session_lives = running || !json_is_object(pub) || sc_str(pub, "error")[0];

        put_command_status(f, sc);
        fputs(", ", f);
        put_seconds(f, json_number_value(json_object_get(sc, "command_total_time_seconds")));
        if (running)
                fputs(" so far", f);
        if (total == 0)
                fputs("; no output", f);
        else if (!cut)
                fprintf(f, "; %llu line%s", total, plural(total));
        else
                fprintf(f, "; lines %llu-%llu of %llu shown", start, end, total);
        if (start > 0)
                fprintf(f, "; %llu earlier line%s not shown; read_command_lines start_offset=0", start, plural(start));
        if (end < total)
                fprintf(f, "; %llu later line%s not shown; read_command_lines start_offset=%llu", total - end,
                        plural(total - end), end);
        if (cut)
                fprintf(f, "; whole output ~%llu tokens", sc_uint(sc, "original_token_count"));
        if (json_is_object(pub))
                put_publication(f, pub);
        if (running)
                fprintf(f, "; command_session_id %s (write_command_stdin, read_command_lines)",
                        sc_str(sc, "command_session_id"));
        else if (cut)
                fprintf(f, "; command_session_id %s", sc_str(sc, "command_session_id"));
        if (session_lives)
                fprintf(f, "; workspace_session_id %s", sc_str(sc, "workspace_session_id"));
        fputc('\n', f);
        fputs(sc_str(sc, "output"), f);
}

static void text_file_read(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        unsigned long long first = sc_uint(sc, "start_line"), n = sc_uint(sc, "num_lines");
        const char *content = sc_str(sc, "content");
        size_t len = strlen(content);

        if (n == 0)
                fprintf(f, "%s: no lines from line %llu (the file has %llu)", sc_str(sc, "path"), first,
                        sc_uint(sc, "total_lines"));
        else if (n == 1)
                fprintf(f, "%s: line %llu of %llu", sc_str(sc, "path"), first, sc_uint(sc, "total_lines"));
        else
                fprintf(f, "%s: lines %llu-%llu of %llu", sc_str(sc, "path"), first, first + n - 1,
                        sc_uint(sc, "total_lines"));
        if (n > 0 && len > 0 && content[len - 1] != '\n' && json_is_true(json_object_get(sc, "truncated")))
                fprintf(f, "; line %llu is longer than a window: its first %zu bytes", first, len);
        if (json_is_integer(json_object_get(sc, "next_offset")))
                fprintf(f, "; more: file_read offset=%llu", sc_uint(sc, "next_offset"));
        fputc('\n', f);
        fputs(content, f);
}

static void text_file_change(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const Sbx__FileChangeReply *c = reply->file_change;
        const json_t *pub = json_object_get(sc, "publication");
        const char *type = sc_str(sc, "type"), *path = sc_str(sc, "path");
        bool edit = strcmp(type, "edit") == 0;

        if (c->unchanged)
                fprintf(f, "%s unchanged: %s (%llu bytes); nothing written%s\n", path,
                        edit ? "the edits leave its content as it was" : "it already has this content",
                        sc_uint(sc, "bytes_written"), json_is_object(pub) ? ", nothing published" : "");
        else {
                if (edit)
                        fprintf(f, "edited %s: %llu edit%s, %llu replacement%s, %llu bytes now", path,
                                sc_uint(sc, "edits_applied"), plural(sc_uint(sc, "edits_applied")),
                                sc_uint(sc, "replacements"), plural(sc_uint(sc, "replacements")),
                                sc_uint(sc, "bytes_written"));
                else
                        fprintf(f, "%s %s (%llu bytes)", strcmp(type, "create") == 0 ? "created" : "updated", path,
                                sc_uint(sc, "bytes_written"));
                if (json_is_object(pub))
                        put_publication(f, pub);
                else
                        fprintf(f, "; in workspace session %s, private until it is finalized",
                                args_string(args, "workspace_session_id"));
                fputc('\n', f);
        }
        fwrite(c->diff.data, 1, c->diff.len, f);
        if (c->diff_truncated)
                fprintf(f, "(the diff stops at %u bytes: read the file for the rest)\n", SBX_EDIT_DIFF_MAX_BYTES);
}

static void text_file_blame(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const json_t *ranges = json_object_get(sc, "ranges");
        size_t i;
        json_t *x;

        fprintf(f, "%s: %zu range%s (lines, owner)\n", sc_str(sc, "path"), json_array_size(ranges),
                plural(json_array_size(ranges)));
        json_array_foreach(ranges, i, x) {
                unsigned long long first = sc_uint(x, "start_line"), n = sc_uint(x, "line_count");

                if (n == 1)
                        fprintf(f, "%llu %s\n", first, sc_str(x, "owner"));
                else
                        fprintf(f, "%llu-%llu %s\n", first, first + n - 1, sc_str(x, "owner"));
        }
}

/* A scalar as text: strings as they are, numbers as put_seconds rounds them. */
static void put_scalar(FILE *f, const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_STRING:
                fputs(json_string_value(v), f);
                break;
        case JSON_INTEGER:
                fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                break;
        case JSON_REAL:
                fprintf(f, fabs(json_real_value(v)) < 100 ? "%.2f" : "%.0f", json_real_value(v));
                break;
        case JSON_TRUE:
        case JSON_FALSE:
                fputs(json_is_true(v) ? "true" : "false", f);
                break;
        default:
                fputs(json_is_null(v) ? "null" : "...", f);
                break;
        }
}

/* An object on one line: "key=value key.sub=value list=a,b". */
static void put_flat(FILE *f, const char *prefix, const json_t *o, bool *first) {
        const char *key;
        json_t *v;

        json_object_foreach((json_t *) o, key, v) {
                if (json_is_object(v)) {
                        _cleanup_free_ char *sub = NULL;
                        if (asprintf(&sub, "%s%s.", prefix, key) >= 0)
                                put_flat(f, sub, v, first);
                        continue;
                }
                fprintf(f, "%s%s%s=", *first ? "" : " ", prefix, key);
                *first = false;
                if (json_is_array(v)) {
                        size_t i;
                        json_t *x;
                        json_array_foreach(v, i, x) {
                                if (i > 0)
                                        fputc(',', f);
                                put_scalar(f, x);
                        }
                } else
                        put_scalar(f, v);
        }
}

/* The other tools: "key: value" lines, an array as one line per item, and a
 * text of several lines (a diff) last, as it is. */
static void text_generic(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const char *key;
        json_t *v;

        json_object_foreach((json_t *) sc, key, v) {
                bool first = true;

                if (json_is_string(v) && strchr(json_string_value(v), '\n'))
                        continue;
                fprintf(f, "%s:", key);
                if (json_is_array(v)) {
                        size_t i;
                        json_t *x;
                        fprintf(f, " %zu\n", json_array_size(v));
                        json_array_foreach(v, i, x) {
                                first = true;
                                fputs("- ", f);
                                if (json_is_object(x))
                                        put_flat(f, "", x, &first);
                                else
                                        put_scalar(f, x);
                                fputc('\n', f);
                        }
                        continue;
                }
                fputc(' ', f);
                if (json_is_object(v))
                        put_flat(f, "", v, &first);
                else
                        put_scalar(f, v);
                fputc('\n', f);
        }
        json_object_foreach((json_t *) sc, key, v)
                if (json_is_string(v) && strchr(json_string_value(v), '\n'))
                        fprintf(f, "%s:\n%s", key, json_string_value(v));
}

/* The content array for mode: the rendered text, the JSON, or nothing. */
static int result_content(const Tool *tool, const json_t *args, const Sbx__Reply *reply, ContentMode mode,
                          const json_t *sc, json_t **ret_content) {
        _cleanup_json_ json_t *content = json_array();
        _cleanup_free_ char *text = NULL;
        json_t *block;
        size_t len = 0;
        int r;

        if (!content)
                return -ENOMEM;
        if (mode == CONTENT_JSON) {
                r = json_write(sc, JSONRPC_OUT_MAX, &text, &len);
                if (r < 0)
                        return r;
                /* Written from valid UTF-8 strings: no second check of a large reply. */
                block = json_stringn_nocheck(text, len);
        } else if (mode == CONTENT_TEXT) {
                FILE *f = open_memstream(&text, &len);

                if (!f)
                        return -ENOMEM;
                (tool->def->text ?: text_generic)(f, reply, args, sc);
                if (fclose(f) != 0 || !text)
                        return -ENOMEM;
                block = string_from(text, len);
        } else {
                *ret_content = TAKE_PTR(content);
                return 0;
        }
        if (!block || json_array_append_new(content, json_pack("{s:s, s:o}", "type", "text", "text", block)) < 0)
                return -ENOMEM;
        *ret_content = TAKE_PTR(content);
        return 0;
}

static int error_result(const char *text, json_t **ret_result) {
        *ret_result = tool_error_result(text);
        return *ret_result ? 0 : -ENOMEM;
}

int tool_result_from_reply(const Tool *tool, const json_t *args, const Sbx__Reply *reply, ContentMode mode,
                           json_t **ret_result) {
        _cleanup_json_ json_t *sc = NULL, *content = NULL;
        _cleanup_free_ char *why = NULL;
        int r;

        if (reply->err < 0) {
                _cleanup_free_ char *msg = NULL;
                size_t n;

                if (!reply->errmsg || !reply->errmsg[0])
                        return error_result(strerror(-reply->err), ret_result);
                r = utf8_sanitize(reply->errmsg, strlen(reply->errmsg), &msg, &n);
                if (r < 0)
                        return r;
                return error_result(msg, ret_result);
        }
        r = tool->def->render(reply, args, &sc);
        if (r == -EBADMSG)
                return error_result("sbxd sent an unexpected reply", ret_result);
        if (r < 0)
                return r;
        /* What we promise in outputSchema, clients check: never send a violation. */
        r = schema_validate(tool->output_schema, sc, &why);
        if (r == -EINVAL) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "sbxd sent an invalid reply: %s", why) < 0)
                        return -ENOMEM;
                return error_result(msg, ret_result);
        }
        if (r < 0)
                return r;

        r = result_content(tool, args, reply, mode, sc, &content);
        if (r == -EMSGSIZE || r == -ELOOP)
                return error_result(r == -ELOOP ? "the reply nests too deep to send" : "the reply is too large to send",
                                    ret_result);
        if (r < 0)
                return r;
        *ret_result = json_pack("{s:O, s:O, s:b}", "content", content, "structuredContent", sc, "isError", 0);
        return *ret_result ? 0 : -ENOMEM;
}
