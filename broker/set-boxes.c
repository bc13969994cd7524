/* The boxes tool set (shared/seeds/003): long-lived boxes an agent starts,
 * runs commands in and stops (supervisor/core/box.h). The tool names, inputs
 * and outputs are the seed's (camelCase as it writes them); what sbx adds or
 * leaves out is said in the descriptions and in docs/boxes.md. Boxes are
 * owned by this broker's MCP session identity, made at initialize
 * (broker.c), as the lifecycle set's claims.
 *
 * The parts of issue 21 add their tools as rows of boxes_tools[] below. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boxes-files.h"
#include "sbx-limits.h"
#include "set-boxes-b.h"
#include "tool-set.h"

_Static_assert(SBX_CLAIM_EXEC_TIMEOUT_MAX_S == 600 && SBX_BOX_EXEC_TIMEOUT_DEFAULT_S == 60, "sandbox_exec schema");
_Static_assert(SBX_BOX_SERVICES_MAX == 32 && SBX_BOX_SECRETS_MAX == 64, "sandbox_start schema");
_Static_assert(SBX_BOX_SECRET_VALUES_MAX == 8, "sandbox_start schema: secrets, 8 at most (wt-21b)");

/* ---- schemas -------------------------------------------------------------------- */

#define OBJ(props, required) \
        "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "], \"additionalProperties\": false}"
#define OUT(props, required) "{\"type\": \"object\", \"properties\": {" props "}, \"required\": [" required "]}"
#define P_STRING(n, d) "\"" n "\": {\"type\": \"string\", \"description\": \"" d "\"}"
#define P_ID P_STRING("id", "The box's id, as sandbox_start returned it.")
#define O_STATUS                                                                                              \
        "\"status\": {\"type\": \"string\", \"enum\": [\"claimed\", \"ready\", \"takeover\", \"stopping\", "  \
        "\"terminated\", \"frozen\", \"interrupted\"]}"
#define O_STARTED "\"startedFrom\": {\"type\": \"string\", \"enum\": [\"spare\", \"snapshot\", \"cold\"]}"
#define O_SERVICES                                                                                            \
        "\"services\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {"             \
        "\"name\": {\"type\": \"string\"}, \"port\": {\"type\": \"integer\"}}, \"required\": [\"name\", \"port\"]}}"

static const char start_input[] = OBJ(
        "\"services\": {\"type\": \"array\", \"description\": \"The names and ports your repo exposes on the box "
        "(32 at most); a name becomes wireable with sandbox_wire.\", \"items\": {\"type\": \"object\", "
        "\"properties\": {\"name\": {\"type\": \"string\", \"description\": \"1-63 of a-z 0-9 -.\"}, "
        "\"port\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 65535}}, \"required\": [\"name\", \"port\"], "
        "\"additionalProperties\": false}}, "
        P_STRING("externalBaseUrl", "Where unchanged services live (http:// or https://), for example your staging "
                 "environment. Optional.") ", "
        "\"secrets\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"Names from "
        "sandbox_secrets to inject as environment variables of the box's commands (8 at most). Nothing is "
        "injected unless listed.\"}, "
        "\"idleTimeoutMin\": {\"type\": \"number\", \"minimum\": 0, \"description\": \"Freeze the box (cgroup freezer: "
        "its memory stays, it uses no CPU) after this many minutes without a tool call; fractions allowed; 0 never. "
        "Default: box_idle_timeout_min of sbxd.conf. Any tool call but sandbox_status thaws it.\"}, "
        BOXES_VERSION_INPUT_PROPERTY,
        "");
static const char start_output[] = OUT(
        P_STRING("id", "The box's id (box- and 12 hex digits).") ", " O_STATUS ", " O_STARTED ", "
        P_STRING("takeoverUrl", "Where a person can take over: the sbxctl command line to run on this host, or "
                 "through sbx-gateway a URL of its page (valid while a takeover of this box is pending or held)."),
        "\"id\", \"status\", \"startedFrom\", \"takeoverUrl\"");
static const char exec_input[] = OBJ(
        P_ID ", "
        P_STRING("cmd", "Shell command, run as /bin/sh -c cmd.") ", "
        P_STRING("cwd", "Working directory relative to /work (the default); it must exist and may not climb out "
                 "of /work.") ", "
        "\"timeoutSec\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 600, \"default\": 60, \"description\": "
        "\"Bounds a foreground command: its process group is killed then.\"}, "
        "\"background\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Return at once with a bgId; "
        "the output goes to /work/.sbx/<bgId>.log, to be read with another sandbox_exec. Use it for servers and "
        "long builds.\"}",
        "\"id\", \"cmd\"");
static const char exec_output[] = OUT(
        P_STRING("stdout", "stdout (foreground), its head and tail around a cut marker when longer than 30000 "
                 "characters.") ", "
        P_STRING("stderr", "stderr, likewise.") ", "
        "\"exitCode\": {\"type\": [\"integer\", \"null\"], \"description\": \"Exit status; null when it was killed "
        "(timeout, signal) or when it runs in the background.\"}, "
        "\"bgId\": {\"type\": [\"string\", \"null\"], \"description\": \"A background command's id; null for a "
        "foreground one.\"}, "
        "\"timedOut\": {\"type\": \"boolean\"}",
        "\"stdout\", \"stderr\", \"exitCode\", \"bgId\"");
static const char id_input[] = OBJ(P_ID, "\"id\"");
static const char status_output[] = OUT(
        P_STRING("id", "The box.") ", " O_STATUS ", "
        P_STRING("health", "ok, or what is wrong (the seed's boxd health).") ", "
        O_SERVICES ", " P_STRING("takeoverUrl", "Where a person can take over.") ", "
        "\"interruptedReason\": {\"type\": [\"string\", \"null\"], \"description\": \"Why it was interrupted or "
        "terminated, for example supervisor_lost.\"}, " O_STARTED ", "
        "\"idleTimeoutMin\": {\"type\": \"number\"}, "
        "\"display\": {\"type\": [\"string\", \"null\"], \"description\": \":99 when the box runs Xvfb.\"}, "
        "\"secrets\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": \"Names only.\"}, "
        BOX_WIRING_SCHEMA,
        "\"id\", \"status\", \"health\", \"services\", \"takeoverUrl\", \"interruptedReason\"");
static const char stop_output[] = OUT("\"ok\": {\"type\": \"boolean\"}, " P_STRING("id", "The box."), "\"ok\"");

static const char annotations_start[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": false, \"idempotentHint\": false, \"openWorldHint\": false}";
static const char annotations_exec[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": false, \"openWorldHint\": true}";
static const char annotations_look[] =
        "{\"readOnlyHint\": true, \"destructiveHint\": false, \"idempotentHint\": true, \"openWorldHint\": false}";
static const char annotations_stop[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": true, \"idempotentHint\": true, \"openWorldHint\": false}";

/* ---- prepare -------------------------------------------------------------------- */

/* What the heap of a sandbox_start request holds. */
typedef struct StartHeap {
        Sbx__BoxService services[SBX_BOX_SERVICES_MAX];
        Sbx__BoxService *service_ptrs[SBX_BOX_SERVICES_MAX];
        char *secrets[SBX_BOX_SECRETS_MAX];
} StartHeap;

static int prepare_start(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__BoxStart *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_BOX_START, &sbx__box_start__descriptor);
        json_t *services = json_object_get(args, "services"), *secrets = json_object_get(args, "secrets");
        json_t *idle = json_object_get(args, "idleTimeoutMin");
        const char *url = NULL;
        StartHeap *h;
        int r;

        if (json_array_size(services) > SBX_BOX_SERVICES_MAX)
                return tool_arg_invalid(ret_error, "services: more than %u", SBX_BOX_SERVICES_MAX);
        if (json_array_size(secrets) > SBX_BOX_SECRETS_MAX)
                return tool_arg_invalid(ret_error, "secrets: more than %u", SBX_BOX_SECRETS_MAX);
        r = tool_arg_string(args, "externalBaseUrl", 0, SBX_BOX_URL_MAX, &url, NULL, ret_error);
        if (r < 0)
                return r;
        h = req->heap = calloc(1, sizeof(StartHeap));
        if (!h)
                return -ENOMEM;
        m->external_base_url = (char *) (url ?: "");
        for (size_t i = 0; i < json_array_size(services); i++) {
                json_t *sv = json_array_get(services, i);

                sbx__box_service__init(&h->services[i]);
                r = tool_arg_string(sv, "name", 1, 63, (const char **) &h->services[i].name, NULL, ret_error);
                if (r < 0)
                        return r;
                h->services[i].port = (uint32_t) json_integer_value(json_object_get(sv, "port"));
                h->service_ptrs[m->n_services++] = &h->services[i];
        }
        m->services = h->service_ptrs;
        for (size_t i = 0; i < json_array_size(secrets); i++)
                h->secrets[m->n_secrets++] = (char *) json_string_value(json_array_get(secrets, i));
        m->secrets = h->secrets;
        if (idle) {
                m->has_idle_timeout = true;
                m->idle_timeout_min = json_number_value(idle);
        }
        return boxes_prepare_start_version(args, m, ret_error);
}

static int prepare_exec(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__BoxExec *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_BOX_EXEC, &sbx__box_exec__descriptor);
        uint64_t timeout = SBX_BOX_EXEC_TIMEOUT_DEFAULT_S;
        const char *cwd = NULL;
        int r;

        r = tool_arg_id(args, "id", (const char **) &m->id, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "cmd", 1, SBX_CMD_MAX, (const char **) &m->cmd, NULL, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "cwd", 0, SBX_PATH_MAX, &cwd, NULL, ret_error);
        if (r < 0)
                return r;
        m->cwd = (char *) (cwd ?: "");
        (void) tool_arg_int(args, "timeoutSec", &timeout);
        m->timeout_seconds = (uint32_t) timeout;
        m->background = json_is_true(json_object_get(args, "background"));
        return 0;
}

TOOL_PREPARE_STRINGS(prepare_status, sbx__box_ref, BOX_STATUS, { "id", "id", TOOL_ARG_ID })
TOOL_PREPARE_STRINGS(prepare_stop, sbx__box_ref, BOX_STOP, { "id", "id", TOOL_ARG_ID })

/* ---- results -------------------------------------------------------------------- */

static json_t *bytes_text(ProtobufCBinaryData b) {
        return msg_json_string((const char *) b.data, b.len, TOOL_TEXT);
}

static json_t *null_if_empty(const char *s) {
        return s[0] ? json_string(s) : json_null();
}

static int render_start(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__BoxInfo *o = reply->box;

        if (reply->body_case != SBX__REPLY__BODY_BOX || !o)
                return -EBADMSG;
        *ret = json_pack("{s:s, s:s, s:s, s:s}", "id", o->id, "status", o->status, "startedFrom", o->started_from,
                         "takeoverUrl", o->takeover_url);
        return *ret ? 0 : -ENOMEM;
}

static int render_exec(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__ClaimExecReply *e = reply->claim_exec;

        if (reply->body_case == SBX__REPLY__BODY_BOX_EXEC && reply->box_exec) {
                *ret = json_pack("{s:s, s:s, s:n, s:s, s:b}", "stdout", "", "stderr", "", "exitCode", "bgId",
                                 reply->box_exec->bg_id, "timedOut", 0);
                return *ret ? 0 : -ENOMEM;
        }
        if (reply->body_case != SBX__REPLY__BODY_CLAIM_EXEC || !e)
                return -EBADMSG;
        *ret = json_pack("{s:o, s:o, s:o, s:n, s:b}", "stdout", bytes_text(e->stdout), "stderr", bytes_text(e->stderr),
                         "exitCode", e->has_exit_code ? json_integer(e->exit_code) : json_null(), "bgId", "timedOut",
                         e->timed_out);
        return *ret ? 0 : -ENOMEM;
}

static int render_status(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__BoxInfo *o = reply->box;
        json_t *services, *secrets;

        if (reply->body_case != SBX__REPLY__BODY_BOX || !o)
                return -EBADMSG;
        services = json_array();
        secrets = json_array();
        for (size_t i = 0; services && i < o->n_services; i++)
                (void) json_array_append_new(services, json_pack("{s:s, s:I}", "name", o->services[i]->name, "port",
                                                                 (json_int_t) o->services[i]->port));
        for (size_t i = 0; secrets && i < o->n_secrets; i++)
                (void) json_array_append_new(secrets, json_string(o->secrets[i]));
        *ret = json_pack("{s:s, s:s, s:s, s:o, s:s, s:o, s:s, s:f, s:o, s:o, s:o*}", "id", o->id, "status", o->status,
                         "health", o->health, "services", services, "takeoverUrl", o->takeover_url,
                         "interruptedReason", null_if_empty(o->interrupted_reason), "startedFrom", o->started_from,
                         "idleTimeoutMin", o->idle_timeout_min, "display", null_if_empty(o->display), "secrets",
                         secrets, "wiring", box_wiring_json(o->wiring, o->n_wiring));
        return *ret ? 0 : -ENOMEM;
}

static int render_stop(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_BOX || !reply->box)
                return -EBADMSG;
        *ret = json_pack("{s:b, s:s}", "ok", 1, "id", reply->box->id);
        return *ret ? 0 : -ENOMEM;
}

static void text_exec(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        const json_t *code = json_object_get(sc, "exitCode");

        if (json_is_string(json_object_get(sc, "bgId"))) {
                fprintf(f, "started in the background: bgId %s, output in /work/.sbx/%s.log\n",
                        tool_sc_str(sc, "bgId"), tool_sc_str(sc, "bgId"));
                return;
        }
        if (json_is_true(json_object_get(sc, "timedOut")))
                fprintf(f, "timed out (process group killed)\n");
        else if (json_is_integer(code))
                fprintf(f, "exit code %lld\n", (long long) json_integer_value(code));
        else
                fprintf(f, "killed by a signal\n");
        fprintf(f, "--- stdout ---\n%s\n--- stderr ---\n%s\n", tool_sc_str(sc, "stdout"), tool_sc_str(sc, "stderr"));
}

/* ---- sandbox_takeover (a person's takeover, supervisor/core/takeover.h) ---------- */

_Static_assert(SBX_TAKEOVER_NOTE_MAX == 4096 && SBX_TAKEOVER_MAX_DEFAULT_S == 1800 && SBX_TAKEOVER_PROGRESS_S == 15,
               "sandbox_takeover schema");

static const char takeover_input[] = OBJ(
        P_ID ", "
        "\"note\": {\"type\": \"string\", \"maxLength\": 4096, \"description\": \"For the person: what to do (log "
        "in, solve the CAPTCHA, confirm the payment). sbxctl takeover list shows it.\"}",
        "\"id\"");
static const char takeover_output[] = OUT(
        P_STRING("note", "The person's note from sbxctl takeover return --note (empty if none, or expired).") ", "
        "\"expired\": {\"type\": \"boolean\", \"description\": \"Nobody handed the box back within "
        "takeover_max_seconds (30 minutes by default); the box is yours again.\"}, "
        "\"seconds\": {\"type\": \"number\", \"description\": \"How long the box was taken over.\"}",
        "\"note\", \"expired\"");
static const char annotations_takeover[] =
        "{\"readOnlyHint\": false, \"destructiveHint\": false, \"idempotentHint\": false, \"openWorldHint\": true}";

static int prepare_takeover(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__TakeoverRequest *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER,
                                                    &sbx__takeover_request__descriptor);
        const char *id, *note;
        int r;

        r = tool_arg_id(args, "id", &id, ret_error);
        if (r >= 0)
                r = tool_arg_string(args, "note", 0, SBX_TAKEOVER_NOTE_MAX, &note, NULL, ret_error);
        if (r < 0)
                return r;
        m->box = (char *) id;
        m->note = (char *) (note ?: "");
        return 0;
}

static int render_takeover(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__TakeoverReply *t = reply->takeover;

        if (reply->body_case != SBX__REPLY__BODY_TAKEOVER || !t)
                return -EBADMSG;
        *ret = json_pack("{s:o, s:b, s:f}", "note", msg_json_string(t->note, strlen(t->note), TOOL_TEXT), "expired",
                         t->expired, "seconds", t->seconds);
        return *ret ? 0 : -ENOMEM;
}

static void text_takeover(FILE *f, const Sbx__Reply *reply, const json_t *args, const json_t *sc) {
        if (json_is_true(json_object_get(sc, "expired")))
                fprintf(f, "nobody handed the box back in time: the takeover expired, the box is yours again\n");
        else
                fprintf(f, "handed back after %.0f s; the person's note:\n%s\n",
                        json_real_value(json_object_get(sc, "seconds")), tool_sc_str(sc, "note"));
}

/* ---- the table ------------------------------------------------------------------ */

#define BOX_NOTE " A box is its MCP session's own: another session's id is not found."

static const ToolDef boxes_tools[] = {
        {
                .name = "sandbox_start",
                .title = "Start a box",
                .description =
                        "Start a box: a long-lived sandbox of its own (image box_image of sbxd.conf) with /work as "
                        "its working directory, whose files and background processes persist between calls until "
                        "sandbox_stop. startedFrom is spare when a warm box was claimed (at once), cold when one was "
                        "made for you (seconds). A user may run boxes_per_user boxes at once (3 by default). When "
                        "the image has Xvfb, the virtual display :99 runs in the box and its commands have "
                        "DISPLAY=:99." BOX_NOTE,
                .input_schema = start_input,
                .output_schema = start_output,
                .annotations = annotations_start,
                .prepare = prepare_start,
                .render = render_start,
        },
        {
                .name = "sandbox_exec",
                .title = "Run a command in a box",
                .description =
                        "Run cmd in the box (/bin/sh -c) in cwd, relative to /work, and return its stdout, stderr "
                        "and exitCode; timeoutSec bounds it. background: true returns a bgId at once and writes the "
                        "output to /work/.sbx/<bgId>.log. A frozen box is thawed first. While a person has taken "
                        "the box over, it returns a locked error instead of running: wait and retry." BOX_NOTE,
                .input_schema = exec_input,
                .output_schema = exec_output,
                .annotations = annotations_exec,
                .prepare = prepare_exec,
                .render = render_exec,
                .text = text_exec,
        },
        {
                .name = "sandbox_status",
                .title = "Show a box",
                .description =
                        "The box's status (claimed, ready, takeover, stopping, terminated, frozen, interrupted), "
                        "health, services, takeoverUrl and why it was interrupted (for example supervisor_lost: sbxd "
                        "restarted, its processes are gone, its files are kept). It does not thaw a frozen box "
                        "and does not count as a use." BOX_NOTE,
                .input_schema = id_input,
                .output_schema = status_output,
                .annotations = annotations_look,
                .prepare = prepare_status,
                .render = render_status,
        },
        {
                .name = "sandbox_stop",
                .title = "Stop a box",
                .description =
                        "Stop the box, frozen or not: its processes are killed and its sandbox with its files is "
                        "deleted. sandbox_status then says terminated." BOX_NOTE,
                .input_schema = id_input,
                .output_schema = stop_output,
                .annotations = annotations_stop,
                .prepare = prepare_stop,
                .render = render_stop,
        },
        /* Part D: files and pictures (broker/boxes-files.c) */
        {
                .name = "sandbox_sync",
                .title = "Copy a local directory into a box",
                .description =
                        "Tar localPath (a directory or a file on your side, relative to the agent's working "
                        "directory) and unpack it in the box at /work/<dest>. node_modules, .git, dist, build and "
                        "similar are left out; symlinks are copied as symlinks and never followed, so nothing "
                        "outside localPath is read. Use it for uncommitted work; use git clone in sandbox_exec "
                        "for committed work. At most 256 MiB of tar." BOX_NOTE,
                .input_schema = box_sync_input,
                .output_schema = box_sync_output,
                .annotations = box_annotations_sync,
                .prepare = box_prepare_sync,
                .render = box_render_sync,
        },
        {
                .name = "sandbox_get",
                .title = "Fetch a file or directory from a box",
                .description =
                        "A file under /work, or a directory as a tar.gz, copied to this host where only you can "
                        "read it; returns its file:// URL and path, valid one hour (then it is removed)." BOX_NOTE,
                .input_schema = box_get_input,
                .output_schema = box_get_output,
                .annotations = box_annotations_get,
                .prepare = box_prepare_get,
                .render = box_render_placed,
        },
        {
                .name = "sandbox_wire",
                .title = "Wire a service name inside a box",
                .description =
                        "Make service (one of sandbox_start's services) resolve inside the box: mode box to the box "
                        "itself (127.0.0.1, the box's /etc/hosts), so clients in it reach the service on its "
                        "declared port; mode external to externalBaseUrl's host and port, through the box's egress "
                        "proxy (clients that use its proxy variables; the box's egress policy must allow that host). "
                        "Returns the whole wiring table (sandbox_status shows it too)." BOX_NOTE,
                .input_schema = box_wire_input,
                .output_schema = box_wire_output,
                .annotations = box_annotations_wire,
                .prepare = box_prepare_wire,
                .render = box_render_wire,
        },
        {
                .name = "sandbox_shot",
                .title = "Screenshot or record a box",
                .description =
                        "Without record: a PNG of the box's display :99 (target screen, the default), or of url "
                        "opened in a fresh headless Chromium in the box (target url), returned as image content "
                        "and as a file (file:// URL, valid one hour). record start begins an mp4 recording of "
                        "the display (ffmpeg); record stop ends it and returns the mp4. Needs an image with Xvfb, "
                        "ffmpeg and chromium (the browser image)." BOX_NOTE,
                .input_schema = box_shot_input,
                .output_schema = box_shot_output,
                .annotations = box_annotations_shot,
                .prepare = box_prepare_shot,
                .render = box_render_placed,
                .content = box_shot_content,
        },
        {
                .name = "sandbox_takeover",
                .title = "Hand a box to a person",
                .description =
                        "Ask a person to take the box over, for what you must not do alone (logins, CAPTCHAs, "
                        "payment confirmations), and wait until they hand it back (sbxctl takeover return ID --note "
                        "...: the note is the result) or 30 minutes pass (takeover_max_seconds of sbxd.conf; then "
                        "expired is true). Meanwhile sandbox_exec in the box returns a locked error, and the person "
                        "can open a terminal in it (sbxctl takeover attach ID, the box's takeoverUrl); send a "
                        "progressToken to get a progress notification every 15 s while it waits." BOX_NOTE,
                .input_schema = takeover_input,
                .output_schema = takeover_output,
                .annotations = annotations_takeover,
                .prepare = prepare_takeover,
                .render = render_takeover,
                .text = text_takeover,
        },
        /* wt-21b: secrets and versions (set-boxes-b.c) */
        {
                .name = "sandbox_secrets",
                .title = "List your secrets",
                .description =
                        "The names of your secrets, never their values. An administrator (or you) sets them with "
                        "sbxctl secret set NAME (value on stdin). Name them in sandbox_start's secrets: they become "
                        "environment variables of the box's commands, and every value is shown as [secret:NAME] in "
                        "what those commands print.",
                .input_schema = boxes_secrets_input,
                .output_schema = boxes_secrets_output,
                .annotations = annotations_look,
                .prepare = boxes_prepare_secrets,
                .render = boxes_render_secrets,
        },
        {
                .name = "sandbox_publish_version",
                .title = "Record a version",
                .description =
                        "Record a named version of a service: with image a box id, the box's /work as it is now "
                        "(without /work/.sbx); with image box_image, the image alone. Returns versionId, which "
                        "sandbox_start takes as version to start a box from it. Versions are yours (your uid).",
                .input_schema = boxes_publish_input,
                .output_schema = boxes_publish_output,
                .annotations = annotations_start,
                .prepare = boxes_prepare_publish,
                .render = boxes_render_publish,
        },
        {
                .name = "sandbox_versions",
                .title = "List versions",
                .description = "The versions you recorded with sandbox_publish_version, oldest first.",
                .input_schema = boxes_secrets_input,
                .output_schema = boxes_versions_output,
                .annotations = annotations_look,
                .prepare = boxes_prepare_versions,
                .render = boxes_render_versions,
        },
};

TOOL_SET_DEFINE(boxes);
