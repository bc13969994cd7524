/* The sessions tool set: managed workspace sessions (create, finalize,
 * list, diff), the commands of a sandbox (list, cancel) and the caller's
 * sandboxes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx-limits.h"
#include "tool-set.h"

/* The numbers the descriptions quote. */
_Static_assert(SBX_DIFF_MAX_BYTES == 96 * 1024, "diff_workspace_session description");

/* ---- prepare: validated arguments -> request ----------------------------- */

TOOL_PREPARE_STRINGS(prepare_session_list, sbx__session_list, SESSION_LIST,
                { "sandbox_id", "sandbox", TOOL_ARG_ID })
TOOL_PREPARE_STRINGS(prepare_session_diff, sbx__session_diff, SESSION_DIFF,
                { "sandbox_id", "sandbox", TOOL_ARG_ID }, { "workspace_session_id", "workspace_session", TOOL_ARG_ID })
TOOL_PREPARE_STRINGS(prepare_command_list, sbx__command_list, COMMAND_LIST,
                { "sandbox_id", "sandbox", TOOL_ARG_ID }, { "workspace_session_id", "workspace_session", TOOL_ARG_SESSION })
TOOL_PREPARE_STRINGS(prepare_command_cancel, sbx__command_cancel, COMMAND_CANCEL,
                { "sandbox_id", "sandbox", TOOL_ARG_ID }, { "command_session_id", "command_session", TOOL_ARG_ID })

static int prepare_sandbox_list(json_t *args, ToolRequest *req, char **ret_error) {
        tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST, &sbx__sandbox_list__descriptor);
        return 0;
}

static int prepare_session_create(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__SessionCreate *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SESSION_CREATE,
                                                  &sbx__session_create__descriptor);
        const char *sandbox;
        json_t *policy = json_object_get(args, "finalize_policy");
        int r;

        r = tool_arg_id(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        m->sandbox = (char *) sandbox;
        /* The schema's enum and default made it one of the two. */
        m->finalize_policy = (char *) (json_is_string(policy) ? json_string_value(policy) : "publish_then_destroy");
        return 0;
}

static int prepare_session_finalize(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__SessionFinalize *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SESSION_FINALIZE,
                                                    &sbx__session_finalize__descriptor);
        const char *sandbox, *session;
        json_t *action = json_object_get(args, "action");
        int r;

        r = tool_arg_id(args, "sandbox_id", &sandbox, ret_error);
        if (r < 0)
                return r;
        r = tool_arg_id(args, "workspace_session_id", &session, ret_error);
        if (r < 0)
                return r;
        m->sandbox = (char *) sandbox;
        m->workspace_session = (char *) session;
        if (json_is_string(action))
                m->action = (char *) json_string_value(action);   /* "" (absent): the session's policy */
        m->overwrite = json_is_true(json_object_get(args, "overwrite"));
        return 0;
}

/* ---- results ---------------------------------------------------------------- */

static const MsgJsonMap session_info_map = MSG_JSON_MAP_INIT(sbx__session_info__descriptor,
        MSG_JSON_FIELD("workspace_session_id", "workspace_session"),
        MSG_JSON_FIELD("sandbox_id", "sandbox"),
        MSG_JSON_NAMES("finalize_policy automatic state base_layer created_unix running_commands"));

static const MsgJsonMap session_list_map = MSG_JSON_MAP_INIT(sbx__session_list_reply__descriptor,
        MSG_JSON_FIELD("sessions", "sessions", .sub = &session_info_map));

/* After workspace_session_id, which the caller sets. */
static const MsgJsonMap session_finalize_map = MSG_JSON_MAP_INIT(sbx__session_finalize_reply__descriptor,
        MSG_JSON_NAMES("action"),
        MSG_JSON_FIELD("publication", "publication", .sub = &tool_publication_map));

static const MsgJsonMap changed_path_map = MSG_JSON_MAP_INIT(sbx__changed_path__descriptor,
        MSG_JSON_NAMES("path change"));

/* After workspace_session_id, which the caller sets. */
static const MsgJsonMap session_diff_map = MSG_JSON_MAP_INIT(sbx__session_diff_reply__descriptor,
        MSG_JSON_FIELD("changes", "changes", .sub = &changed_path_map),
        MSG_JSON_NAMES("diff truncated"));

static const MsgJsonMap command_info_map = MSG_JSON_MAP_INIT(sbx__command_info__descriptor,
        TOOL_COMMAND_FIELDS,
        MSG_JSON_FIELD("started_unix", "started_unix_usec", .flags = MSG_JSON_USEC_AS_SECONDS),
        MSG_JSON_FIELD("ended_unix", "ended_unix_usec", .flags = MSG_JSON_USEC_AS_SECONDS | MSG_JSON_NULL_EMPTY),
        MSG_JSON_NAMES("cmd"),
        MSG_JSON_FIELD("transcript_evicted", "transcript_evicted", .flags = MSG_JSON_NULL_EMPTY));

static const MsgJsonMap command_list_map = MSG_JSON_MAP_INIT(sbx__command_list_reply__descriptor,
        MSG_JSON_FIELD("commands", "commands", .sub = &command_info_map));

static const MsgJsonMap sandbox_info_map = MSG_JSON_MAP_INIT(sbx__sandbox_info__descriptor,
        MSG_JSON_FIELD("sandbox_id", "name"),
        MSG_JSON_FIELD("source", "source_dir"),
        MSG_JSON_FIELD("image", "image", .fallback = "default"),
        MSG_JSON_FIELD("layers", "layer_count"),
        MSG_JSON_NAMES("live_sessions"));

static const MsgJsonMap sandbox_list_map = MSG_JSON_MAP_INIT(sbx__sandbox_list_reply__descriptor,
        MSG_JSON_FIELD("sandboxes", "sandboxes", .sub = &sandbox_info_map));

static int render_session(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_SESSION || !reply->session)
                return -EBADMSG;
        return tool_render_object(&session_info_map, reply->session, ret);
}

/* {"workspace_session_id": id, then map's keys of body}. */
static int render_for_session(const char *id, const MsgJsonMap *map, const void *body, json_t **ret) {
        _cleanup_json_ json_t *o = json_object();

        if (!o || json_object_set_new(o, "workspace_session_id", msg_json_string(id, strlen(id), TOOL_TEXT)) < 0 ||
            msg_json_append(o, map, body, TOOL_TEXT) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

static int render_session_finalize(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__SessionFinalizeReply *f = reply->session_finalize;

        if (reply->body_case != SBX__REPLY__BODY_SESSION_FINALIZE || !f)
                return -EBADMSG;
        return render_for_session(f->session && f->session->workspace_session && f->session->workspace_session[0]
                                          ? f->session->workspace_session
                                          : tool_arg_str(args, "workspace_session_id"),
                                  &session_finalize_map, f, ret);
}

static int render_session_diff(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_SESSION_DIFF || !reply->session_diff)
                return -EBADMSG;
        return render_for_session(tool_arg_str(args, "workspace_session_id"), &session_diff_map,
                                  reply->session_diff, ret);
}

static int render_session_list(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_SESSION_LIST || !reply->session_list)
                return -EBADMSG;
        return tool_render_object(&session_list_map, reply->session_list, ret);
}

static int render_command_list(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_COMMAND_LIST || !reply->command_list)
                return -EBADMSG;
        return tool_render_object(&command_list_map, reply->command_list, ret);
}

static int render_sandbox_list(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_SANDBOX_LIST || !reply->sandbox_list)
                return -EBADMSG;
        return tool_render_object(&sandbox_list_map, reply->sandbox_list, ret);
}

/* ---- the table: one row per tool, in tools/list order ------------------------ */

static const ToolDef sessions_tools[] = {
        {
                .name = "create_workspace_session",
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
                .render = tool_render_command,
                .text = tool_text_command,
        },
        {
                .name = "list_sandboxes",
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

TOOL_SET_DEFINE(sessions);
