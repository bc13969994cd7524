/* Requests of the boxes set (core/box.h): start, exec, status, stop and the
 * caller's list. Every box request names a box by id; one the caller may
 * not use is answered "Box '<id>' is not found". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "core/box.h"
#include "core/boxwire.h"
#include "data/claimfs.h"
#include "fd-util.h"
#include "log.h"
#include "memfd-util.h"
#include "sbx-limits.h"

#define NOT_FOUND "Box '%s' is not found: use the id sandbox_start returned (sandbox_status of a box of another " \
                  "MCP session or user says the same)"

/* ---- the wiring table (sandbox_status here, sandbox_wire in control-boxfiles.c) ---- */

int box_wiring_rows(Request *rq, const Box *box, const char *hosts, Sbx__BoxWiring ***ret, size_t *ret_n) {
        Sbx__BoxWiring *rows = request_alloc(rq, (box->n_services ?: 1) * sizeof(*rows));
        Sbx__BoxWiring **ptrs = request_alloc(rq, (box->n_services ?: 1) * sizeof(*ptrs));
        char ext[SBX_EGRESS_HOST_MAX + 1] = "";
        uint16_t ext_port = 0;

        if (!rows || !ptrs)
                return -ENOMEM;
        if (box->external_base_url[0] && box_url_target(box->external_base_url, ext, &ext_port) < 0)
                ext[0] = '\0';
        for (size_t i = 0; i < box->n_services; i++) {
                const Sbx__BoxService *sv = box->services[i];
                char *target = request_alloc(rq, sizeof(ext) + 16);

                if (!target)
                        return -ENOMEM;
                sbx__box_wiring__init(&rows[i]);
                rows[i].service = sv->name;
                rows[i].port = sv->port;
                rows[i].mode = (char *) box_wired_mode(hosts ?: "", sv->name);
                if (strcmp(rows[i].mode, "box") == 0)
                        snprintf(target, sizeof(ext) + 16, "127.0.0.1:%u", (unsigned) sv->port);
                else
                        snprintf(target, sizeof(ext) + 16, strchr(ext, ':') ? "[%s]:%u" : "%s:%u", ext,
                                 (unsigned) ext_port);
                /* External without a host (a line the box wrote itself, no externalBaseUrl): no target. */
                rows[i].target = rows[i].mode[0] == 'b' || (rows[i].mode[0] && ext[0]) ? target : (char *) "";
                ptrs[i] = &rows[i];
        }
        *ret = ptrs;
        *ret_n = box->n_services;
        return 0;
}

int box_wiring_info(Request *rq, const Box *box, Sbx__BoxInfo *info) {
        _cleanup_free_ char *hosts = NULL;
        WorkspaceSession *ws = box_session(rq->server, box);

        /* A box without a session (terminated, starting) shows its services unwired. */
        if (ws && box_hosts_read(ws, &hosts) < 0)
                hosts = NULL;
        return box_wiring_rows(rq, box, hosts, &info->wiring, &info->n_wiring);
}

static int reply_box(Request *rq, const Box *box) {
        Sbx__BoxInfo *info = REQUEST_NEW(rq, Sbx__BoxInfo, SBX__BOX_INFO__INIT);
        char *url = request_alloc(rq, BOX_TAKEOVER_URL_MAX);

        if (!info || !url)
                return -ENOMEM;
        box_info(rq->server, box, info);
        info->takeover_url = (char *) box_takeover_url(box, rq->client, url, BOX_TAKEOVER_URL_MAX);
        if (box_wiring_info(rq, box, info) < 0)
                return -ENOMEM;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_BOX, info);
}

/* The caller's box id names; for a tool call other than sandbox_status, used (thawed). */
int find_box(Request *rq, const char *id, bool use, Box **ret) {
        Box *box;
        int r;

        if (rq->client->uid != 0 && !rq->client->mcp_session[0])
                return request_error(rq, -EPERM, "this connection has no MCP session identity: use sandbox-mcp");
        if (!box_id_is_valid(id))
                return request_error(rq, -EINVAL, "invalid arguments: id: '%.80s' is not a box id: use the id "
                                     "sandbox_start returned (%s and %u hex digits)", id, SBX_BOX_ID_PREFIX,
                                     SBX_BOX_ID_HEX);
        box = box_find(rq->server, rq->client, id);
        if (!box)
                return request_error(rq, -ENOENT, NOT_FOUND, id);
        if (use && rq->client->mcp_session[0]) {
                r = box_use(rq->server, box);
                if (r < 0)
                        return request_error(rq, r, "cannot thaw box %s: %s", id, strerror(-r));
        }
        *ret = box;
        return 0;
}

void box_no_proxy_ensure(Server *s, Box *box) {
        _cleanup_free_ char *hosts = NULL, *value = NULL;
        WorkspaceSession *ws = box_session(s, box);
        int r;

        if (box->no_proxy[0] || !ws || !ws->sandbox || ws->sandbox->egress == EGRESS_NONE)
                return;
        r = box_hosts_read(ws, &hosts);
        if (r >= 0)
                r = (value = box_no_proxy(box, hosts)) ? box_set_no_proxy(box, value) : -ENOMEM;
        if (r < 0)
                log_warning_errno(r, "Box %s: its services wired box go to the egress proxy: %m", box->id);
}

/* The box can run a command now, or the error that says why not. */
int box_runnable(Request *rq, Box *box) {
        switch (box->state) {
        case BOX_READY:
                box_no_proxy_ensure(rq->server, box);
                return 0;
        case BOX_CLAIMED:
                return request_error(rq, -EAGAIN, "Box '%s' is not ready yet (it is being started); wait for "
                                     "sandbox_status to say ready", box->id);
        case BOX_TAKEOVER:
                return request_error(rq, -EBUSY, "locked: a person has taken over box '%s'; wait and retry",
                                     box->id);
        case BOX_INTERRUPTED:
                /* Said once (the seed: the next tool call returns the reason); then it runs again. */
                box->state = BOX_READY;
                return request_error(rq, -EIO, "Box '%s' was interrupted: %s; what it ran is gone, call again to "
                                     "use it", box->id, box->interrupted);
        default:
                return request_error(rq, -ENOENT, "Box '%s' is %s: start a new box with sandbox_start", box->id,
                                     box_state_name(box));
        }
}

static bool name_ok(const char *s, size_t max, const char *first, const char *rest) {
        size_t n = strlen(s);

        return n > 0 && n <= max && strchr(first, s[0]) && strspn(s, rest) == n;
}

#define LOWER "abcdefghijklmnopqrstuvwxyz"
#define UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define DIGITS "0123456789"

/* services, externalBaseUrl, secrets and idleTimeoutMin, checked: each error names the argument. */
static int check_start(Request *rq, const Sbx__BoxStart *req) {
        const char *url = req->external_base_url;

        if (req->n_services > SBX_BOX_SERVICES_MAX)
                return request_error(rq, -EINVAL, "invalid arguments: services: more than %u", SBX_BOX_SERVICES_MAX);
        for (size_t i = 0; i < req->n_services; i++) {
                const Sbx__BoxService *sv = req->services[i];

                if (!name_ok(sv->name, 63, LOWER DIGITS, LOWER DIGITS "-"))
                        return request_error(rq, -EINVAL, "invalid arguments: services[%zu].name: '%.80s' is not a "
                                             "service name: use 1-63 of a-z 0-9 -, starting with a letter or digit",
                                             i, sv->name);
                if (sv->port < 1 || sv->port > 65535)
                        return request_error(rq, -EINVAL, "invalid arguments: services[%zu].port: %u is not a port "
                                             "(1-65535)", i, sv->port);
                for (size_t k = 0; k < i; k++)
                        if (strcmp(req->services[k]->name, sv->name) == 0)
                                return request_error(rq, -EINVAL, "invalid arguments: services: '%s' is named twice",
                                                     sv->name);
        }
        if (url[0] && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
                return request_error(rq, -EINVAL, "invalid arguments: externalBaseUrl: '%.200s' is not an http:// or "
                                     "https:// URL", url);
        if (req->n_secrets > SBX_BOX_SECRETS_MAX)
                return request_error(rq, -EINVAL, "invalid arguments: secrets: more than %u", SBX_BOX_SECRETS_MAX);
        for (size_t i = 0; i < req->n_secrets; i++)
                if (!name_ok(req->secrets[i], SBX_BOX_SECRET_NAME_MAX, UPPER LOWER "_", UPPER LOWER DIGITS "_"))
                        return request_error(rq, -EINVAL, "invalid arguments: secrets[%zu]: '%.80s' is not a secret "
                                             "name (an environment variable's: A-Z a-z 0-9 _, not starting with a "
                                             "digit; sandbox_secrets lists them)", i, req->secrets[i]);
        if (req->has_idle_timeout &&
            !(req->idle_timeout_min >= 0 && req->idle_timeout_min * 60e3 <= (double) SBX_BOX_IDLE_TIMEOUT_MAX_MS))
                return request_error(rq, -EINVAL, "invalid arguments: idleTimeoutMin: must be from 0 (never freeze) "
                                     "to %u minutes", SBX_BOX_IDLE_TIMEOUT_MAX_MS / 60000u);
        return 0;
}

int handle_box_start(Request *rq) {
        const Sbx__BoxStart *req = rq->msg->box_start;
        const Config *cfg = &rq->server->cfg;
        char err[512] = "";
        Box *box;
        int r;

        r = check_start(rq, req);
        if (r < 0)
                return r;
        if (rq->client->uid != 0 && !rq->client->mcp_session[0])
                return request_error(rq, -EPERM, "this connection has no MCP session identity: use sandbox-mcp");
        if (rq->client->uid != 0 && boxes_of_uid(rq->server, rq->client->uid) >= cfg->boxes_per_user)
                return request_error(rq, -EUSERS, "too many boxes: this user runs %u boxes, the limit "
                                     "(boxes_per_user in sbxd.conf); stop one with sandbox_stop first",
                                     cfg->boxes_per_user);
        r = box_start(rq->server, rq->client, rq->seq, req, &box, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "cannot start the box: %s", err[0] ? err : strerror(-r));
        if (r == BOX_DEFERRED)
                return REPLY_DEFERRED;
        return reply_box(rq, box);
}

/* s as one single-quoted word of sh into f. */
static void put_quoted(FILE *f, const char *s) {
        fputc('\'', f);
        for (; *s; s++)
                fputs(*s == '\'' ? "'\\''" : (char[]) { *s, '\0' }, f);
        fputc('\'', f);
}

/* A background command: its log /work/.sbx/<bg>.log made empty (so it can be
 * read at once), then a launcher that starts it detached from the call. */
static int exec_background(Request *rq, Box *box, const Sbx__BoxExec *req) {
        Sbx__BoxExecReply *o = REQUEST_NEW(rq, Sbx__BoxExecReply, SBX__BOX_EXEC_REPLY__INIT);
        WorkspaceSession *ws = box_session(rq->server, box);
        char *bg = request_alloc(rq, SBX_NAME_MAX + 1), log_rel[128], err[512] = "";
        _cleanup_free_ char *launcher = NULL;
        _cleanup_close_ int empty = -EBADF;
        size_t len = 0;
        Command *cmd;
        FILE *f;
        int r;

        if (!o || !bg)
                return -ENOMEM;
        r = random_id("bg-", bg, SBX_NAME_MAX + 1);
        if (r >= 0)
                r = sealed_memfd_new("box-log", "", 0, &empty);
        if (r < 0)
                return r;
        snprintf(log_rel, sizeof(log_rel), "work/.sbx/%s.log", bg);
        r = claimfs_put(ws->root_fd, box->claim->sandbox->uid_base, log_rel, empty, 0, 0, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "cannot make the log /%s: %s", log_rel, err[0] ? err : strerror(-r));
        f = open_memstream(&launcher, &len);
        if (!f)
                return -ENOMEM;
        fputs("sh -c ", f);
        put_quoted(f, req->cmd);
        fprintf(f, " </dev/null >>/%s 2>&1 &", log_rel);
        if (fclose(f) != 0)
                return -ENOMEM;
        r = box_command_start(rq->server, box, launcher, req->cwd, SBX_BOX_LAUNCH_TIMEOUT_S * 1000ull, &cmd, err,
                              sizeof(err));
        if (r < 0)
                return request_error(rq, r, "%s", err);
        log_info("Box %s: background command %s (%s) logs to /%s", box->id, bg, cmd->rec.id, log_rel);
        o->bg_id = bg;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_BOX_EXEC, o);
}

int handle_box_exec(Request *rq) {
        const Sbx__BoxExec *req = rq->msg->box_exec;
        uint64_t timeout_ms = (req->timeout_seconds ?: SBX_BOX_EXEC_TIMEOUT_DEFAULT_S) * 1000ull;
        char err[512] = "";
        Command *cmd;
        Box *box;
        int r;

        r = find_box(rq, req->id, true, &box);
        if (r >= 0)
                r = box_runnable(rq, box);
        if (r < 0)
                return r;
        if (req->background)
                return exec_background(rq, box, req);
        r = box_command_start(rq->server, box, req->cmd, req->cwd, timeout_ms, &cmd, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "%s", err);
        r = command_capture(cmd, SBX_CLAIM_OUTPUT_DEFAULT, SBX_CLAIM_OUTPUT_DEFAULT);
        if (r >= 0)
                /* Answered when it ends, as execute_command of the lifecycle set. */
                r = command_add_waiter(rq->server, cmd, rq->client, rq->seq, now_usec(),
                                       timeout_ms + 2 * SBX_KILL_GRACE_MS);
        if (r < 0) {
                command_cancel(rq->server, cmd);
                return request_error(rq, r, "out of memory");
        }
        return REPLY_DEFERRED;
}

int handle_box_status(Request *rq) {
        Box *box;
        int r;

        /* sandbox_status looks without thawing. */
        r = find_box(rq, rq->msg->box_status->id, false, &box);
        return r < 0 ? r : reply_box(rq, box);
}

int handle_box_stop(Request *rq) {
        char why[128];
        Box *box;
        int r;

        r = find_box(rq, rq->msg->box_stop->id, false, &box);
        if (r < 0)
                return r;
        if (box->state != BOX_TERMINATED) {
                snprintf(why, sizeof(why), "stopped by uid %u", rq->client->uid);
                box_stop(rq->server, box, why);
        }
        return reply_box(rq, box);
}

int handle_box_list(Request *rq) {
        Sbx__BoxListReply *o = REQUEST_NEW(rq, Sbx__BoxListReply, SBX__BOX_LIST_REPLY__INIT);
        size_t n = rq->server->n_boxes, i = 0;
        Sbx__BoxInfo *infos = request_alloc(rq, (n ?: 1) * sizeof(*infos));
        Sbx__BoxInfo **ptrs = request_alloc(rq, (n ?: 1) * sizeof(*ptrs));
        Box *box;

        if (!o || !infos || !ptrs)
                return -ENOMEM;
        TAILQ_FOREACH(box, &rq->server->boxes, link) {
                if (box_find(rq->server, rq->client, box->id) != box)
                        continue;
                sbx__box_info__init(&infos[i]);
                box_info(rq->server, box, &infos[i]);
                ptrs[i] = &infos[i];
                i++;
        }
        o->n_boxes = i;
        o->boxes = ptrs;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_BOX_LIST, o);
}
