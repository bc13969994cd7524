#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/box.h"
#include "core/kept.h"
#include "core/takeover.h"
#include "core/secret.h"
#include "core/version.h"
#include "data/claimfs.h"
#include "data/store.h"
#include "fd-util.h"
#include "log.h"
#include "msg.h"
#include "sbx-limits.h"

#define BOX_SUPERVISOR_LOST "supervisor_lost: sbxd restarted; the box's processes are gone, its files are kept"
#define BOX_SESSION_LOST "session_lost: the box's session ended; it runs again without its processes and files"
#define BOX_NAMESPACE "box"             /* its claim's namespace (claims of the box template are no one else's) */
#define BOXES_GONE_MAX 256u             /* terminated boxes remembered for sandbox_status */

static const char *const box_state_names[] = {
        [BOX_CLAIMED] = "claimed",
        [BOX_READY] = "ready",
        [BOX_TAKEOVER] = "takeover",
        [BOX_STOPPING] = "stopping",
        [BOX_TERMINATED] = "terminated",
        [BOX_INTERRUPTED] = "interrupted",
};

bool box_id_is_valid(const char *id) {
        size_t p = strlen(SBX_BOX_ID_PREFIX);

        return strncmp(id, SBX_BOX_ID_PREFIX, p) == 0 && strlen(id) == p + SBX_BOX_ID_HEX &&
               strspn(id + p, "0123456789abcdef") == SBX_BOX_ID_HEX;
}

static bool box_owned_by(const Box *box, const Client *c) {
        if (c->uid == 0 && !c->mcp_session[0])
                return true;
        return box->uid == c->uid && c->mcp_session[0] && strcmp(box->mcp_session, c->mcp_session) == 0;
}

Box *box_by_id(Server *s, const char *id) {
        Box *box;

        TAILQ_FOREACH(box, &s->boxes, link)
                if (strcmp(box->id, id) == 0)
                        return box;
        return NULL;
}

Box *box_find(Server *s, const Client *c, const char *id) {
        Box *box;

        TAILQ_FOREACH(box, &s->boxes, link)
                if (strcmp(box->id, id) == 0 && box_owned_by(box, c))
                        return box;
        return NULL;
}

unsigned boxes_of_uid(Server *s, uid_t uid) {
        unsigned n = 0;
        Box *box;

        TAILQ_FOREACH(box, &s->boxes, link)
                n += box->state != BOX_TERMINATED && box->uid == uid;
        return n;
}

WorkspaceSession *box_session(Server *s, const Box *box) {
        WorkspaceSession *ws = box->claim && box->state != BOX_TERMINATED ? claim_session(s, box->claim) : NULL;

        return ws && ws->root_fd >= 0 ? ws : NULL;
}

const char *box_state_name(const Box *box) {
        return box->frozen && box->state != BOX_TERMINATED ? "frozen" : box_state_names[box->state];
}

/* ---- life and death ------------------------------------------------------------ */

static void box_free(Box *box) {
        pending_stop(&box->starter);
        for (size_t i = 0; i < box->n_secrets; i++)
                free(box->secrets[i]);
        free(box->secrets);
        for (size_t i = 0; i < box->n_services; i++) {
                free(box->services[i]->name);
                free(box->services[i]);
        }
        free(box->services);
        free(box->external_base_url);
        box_wiring_changed(box);
        free(box);
}

void box_wiring_changed(Box *box) {
        for (size_t i = 0; i < ELEMENTSOF(box->no_proxy); i++) {
                free(box->no_proxy[i]);
                box->no_proxy[i] = NULL;
        }
}

int box_set_no_proxy(Box *box, const char *value) {
        box_wiring_changed(box);
        if (asprintf(&box->no_proxy[0], "no_proxy=%s", value) < 0 ||
            asprintf(&box->no_proxy[1], "NO_PROXY=%s", value) < 0) {
                box->no_proxy[0] = box->no_proxy[1] = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* A takeover capability of its own (the takeover's end renews it: core/takeover.h). */
static int box_takeover_cap_renew(Box *box) {
        return random_hex(box->takeover_cap, SBX_TAKEOVER_CAP_HEX);
}

/* The oldest terminated boxes beyond BOXES_GONE_MAX are forgotten. */
static void boxes_forget_gone(Server *s) {
        unsigned gone = 0;
        Box *box, *next;

        TAILQ_FOREACH(box, &s->boxes, link)
                gone += box->state == BOX_TERMINATED;
        TAILQ_FOREACH_SAFE(box, &s->boxes, link, next) {
                if (gone <= BOXES_GONE_MAX)
                        break;
                if (box->state != BOX_TERMINATED)
                        continue;
                TAILQ_REMOVE(&s->boxes, box, link);
                s->n_boxes--;
                box_free(box);
                gone--;
        }
}

static void box_terminated(Server *s, Box *box, const char *why) {
        takeover_box_gone(s, box->id, why ?: "the box stopped");
        box->state = BOX_TERMINATED;
        box->frozen = false;
        box->claim = NULL;
        snprintf(box->interrupted, sizeof(box->interrupted), "%s", why ?: "");
        boxes_forget_gone(s);
}

/* Its /work in ws (the image has none), over the layers of its version if it
 * started from one, with the kept files of its /work's upper when ws runs again
 * after sbxd restarted (seed: ws's kept session, core/kept.h: its tmpfs kept in
 * place is the upper again, a copy is copied into a new one), then /work/.sbx. */
static int box_attach_work(Server *s, Box *box, WorkspaceSession *ws, const WorkspaceSession *seed) {
        _cleanup_close_ int kept_mount = -EBADF;
        uid_t uid = box->claim->sandbox->uid_base;
        char err[300] = "";
        int r = claimfs_mkdir(ws->root_fd, uid, "work", err, sizeof(err));

        box->work_serial = ws->serial;
        if (r >= 0 && box->version[0]) {
                unsigned long long t0 = now_usec();

                if (seed && kept_work_mount(seed, &kept_mount) < 0)
                        kept_mount = -EBADF;    /* none kept in place: the copy below, if any */
                r = version_attach_box(s, box->uid, box->version, ws, kept_mount);
                if (r < 0)
                        snprintf(err, sizeof(err), "cannot mount the layers of version %s: %s", box->version,
                                 strerror(-r));
                else
                        log_debug("Box %s: /work over the layers of version %s in %llu us%s", box->id, box->version,
                                  now_usec() - t0, kept_mount >= 0 ? ", its upper the one kept in place" : "");
        }
        if (r >= 0 && seed && ws->work_upper_fd >= 0 && kept_mount < 0) {
                r = kept_work_seed(seed, ws->work_upper_fd);
                if (r < 0)
                        snprintf(err, sizeof(err), "cannot put back its kept files: %s", strerror(-r));
        }
        if (r >= 0)
                r = claimfs_mkdir(ws->root_fd, uid, "work/.sbx", err, sizeof(err));
        if (r < 0)
                log_warning("Cannot make /work in box %s: %s", box->id, err[0] ? err : strerror(-r));
        return r;
}

/* Its row in sbx.db (BoxInfo, with its sandbox's id), once it runs. */
static void box_save(Server *s, Box *box) {
        Sbx__BoxInfo info = SBX__BOX_INFO__INIT;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t n;
        int r;

        if (!box->claim || !box->claim->sandbox)
                return;
        box_info(s, box, &info);
        info.sandbox = box->claim->sandbox->id;
        n = sbx__box_info__get_packed_size(&info);
        buf = malloc(n ?: 1);
        r = buf ? 0 : -ENOMEM;
        if (buf) {
                sbx__box_info__pack(&info, buf);
                r = store_box_put(s->store, box->id, box->uid, box->claim->sandbox->id, buf, n);
        }
        if (r < 0)
                log_warning_errno(r, "Failed to record box %s (it will not outlive sbxd), ignoring: %m", box->id);
}

/* Its working directory and its secrets, when it is claimed. */
static int box_make_workdir(Server *s, Box *box) {
        WorkspaceSession *ws = box_session(s, box);
        int r;

        if (!ws)
                return -EAGAIN;
        r = box_attach_work(s, box, ws, NULL);
        /* wt-21b: its secrets (core/secret.h). */
        if (r >= 0) {
                r = secrets_attach(s, box->claim->sandbox, box->uid, (const char *const *) box->secrets,
                                   box->n_secrets);
                if (r < 0)
                        log_warning_errno(r, "Box %s gets none of its secrets: %m", box->id);
        }
        return r;
}

static void box_claim_ready(Server *s, Claim *cl, void *data) {
        Box *box = data;
        char url[BOX_TAKEOVER_URL_MAX];
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__BoxInfo info = SBX__BOX_INFO__INIT;

        box->state = BOX_READY;
        box->ready_seconds = cl->ready_seconds;
        box->last_call_usec = now_usec();
        box->restarts_seen = cl->restarts;
        (void) box_make_workdir(s, box);
        box_save(s, box);
        log_info("Box %s (claim %s, sandbox '%s') is ready, cold, in %.3f s", box->id, cl->name,
                 cl->sandbox ? cl->sandbox->name : "?", box->ready_seconds);
        box_info(s, box, &info);
        info.takeover_url = (char *) box_takeover_url(box, box->starter.client, url, sizeof(url));
        msg_reply_set(&reply, SBX__REPLY__BODY_BOX, &info);
        pending_answer(s, &box->starter, &reply);
}

static void box_claim_gone(Server *s, Claim *cl, void *data, const char *why) {
        Box *box = data;

        if (box->state == BOX_CLAIMED)
                pending_answer_error(s, &box->starter, -EIO, "cannot start the box: %s", why ?: "it was deleted");
        if (box->state != BOX_TERMINATED)
                log_info("Box %s: its claim %s went: %s", box->id, cl->name, why ?: "deleted");
        box_terminated(s, box, why ?: "stopped");
}

/* Its claim's session runs again (sbxd restarted, or it was lost): /work anew. */
static void box_claim_resumed(Server *s, Claim *cl, void *data, WorkspaceSession *ws) {
        Box *box = data;

        if (box->work_serial != ws->serial && box->state != BOX_CLAIMED && box->state != BOX_TERMINATED)
                (void) box_attach_work(s, box, ws, ws->seed);
}

static const ClaimObserver box_claim_observer = {
        .ready = box_claim_ready,
        .gone = box_claim_gone,
        .resumed = box_claim_resumed,
};

static void box_starter_abandon(Server *s, Pending *p, bool cancelled) {
        /* The box is made anyway; sandbox_status finds it once it runs. */
}

/* The options of req copied into box (checked by the request's handler). */
static int box_set_options(Box *box, const Sbx__BoxStart *req, const Config *cfg) {
        box->services = calloc(req->n_services ?: 1, sizeof(Sbx__BoxService *));
        box->secrets = calloc(req->n_secrets ?: 1, sizeof(char *));
        box->external_base_url = strdup(req->external_base_url);
        if (!box->services || !box->secrets || !box->external_base_url)
                return -ENOMEM;
        for (; box->n_services < req->n_services; box->n_services++) {
                Sbx__BoxService *sv = calloc(1, sizeof(*sv));

                if (!sv)
                        return -ENOMEM;
                sbx__box_service__init(sv);
                box->services[box->n_services] = sv;
                sv->port = req->services[box->n_services]->port;
                if (!(sv->name = strdup(req->services[box->n_services]->name)))
                        return -ENOMEM;
        }
        for (; box->n_secrets < req->n_secrets; box->n_secrets++)
                if (!(box->secrets[box->n_secrets] = strdup(req->secrets[box->n_secrets])))
                        return -ENOMEM;
        box->idle_timeout_ms = req->has_idle_timeout || !cfg ? (uint64_t) (req->idle_timeout_min * 60e3)
                                                             : cfg->box_idle_timeout_ms;
        strlcpy(box->version, req->version, sizeof(box->version));
        return 0;
}

int box_start(Server *s, Client *c, uint32_t seq, const Sbx__BoxStart *req, Box **ret, char *err, size_t errsize) {
        const Template *t = config_template(&s->cfg, BOX_TEMPLATE);
        Sbx__ClaimCreate creq = SBX__CLAIM_CREATE__INIT;
        Box *box;
        Claim *cl;
        int r;

        /* From now on box spares are kept (core/claim.c fills the pool in its tick). */
        s->boxes_wanted = true;
        if (!t)
                return -ENOENT;
        /* wt-21b: every secret named is the caller's, the version theirs. */
        r = secrets_check(s, c->uid, (const char *const *) req->secrets, req->n_secrets, err, errsize);
        if (r >= 0 && req->version[0])
                r = version_check(s, c->uid, req->version, err, errsize);
        if (r < 0)
                return r;
        box = calloc(1, sizeof(*box));
        if (!box)
                return -ENOMEM;
        r = random_id(SBX_BOX_ID_PREFIX, box->id, sizeof(box->id));
        snprintf(box->takeover_url, sizeof(box->takeover_url), "sbxctl takeover attach %s", box->id);
        if (r >= 0)
                r = box_takeover_cap_renew(box);
        if (r >= 0)
                r = box_set_options(box, req, &s->cfg);
        if (r < 0) {
                box_free(box);
                return r;
        }
        box->uid = c->uid;
        strlcpy(box->mcp_session, c->mcp_session, sizeof(box->mcp_session));
        box->created_unix = box->last_used_unix = time(NULL);
        box->last_call_usec = now_usec();
        box->state = BOX_CLAIMED;
        creq.namespace_ = (char *) BOX_NAMESPACE;
        creq.no_expiry = true;
        creq.ready_timeout_seconds = req->ready_timeout_seconds;
        /* In the list first: the observer may be told at once. */
        TAILQ_INSERT_TAIL(&s->boxes, box, link);
        s->n_boxes++;
        r = claim_create_observed(s, c, t, &creq, &box_claim_observer, box, &cl, err, errsize);
        if (r < 0) {
                TAILQ_REMOVE(&s->boxes, box, link);
                s->n_boxes--;
                box_free(box);
                return r;
        }
        box->claim = cl;
        box->from_spare = r == 0;
        if (r == CLAIM_DEFERRED) {
                pending_start(&box->starter, c, seq, box_starter_abandon);
                *ret = box;
                return BOX_DEFERRED;
        }
        box->state = BOX_READY;
        box->ready_seconds = cl->ready_seconds;
        box->restarts_seen = cl->restarts;
        (void) box_make_workdir(s, box);
        box_save(s, box);
        log_info("Box %s (claim %s, sandbox '%s') for uid %u from a spare", box->id, cl->name, cl->sandbox->name,
                 c->uid);
        *ret = box;
        return 0;
}

/* Freeze or thaw the cgroup of the box's session. */
static int box_set_frozen(Server *s, Box *box, bool frozen) {
        WorkspaceSession *ws = box->claim ? claim_session(s, box->claim) : NULL;
        int r;

        if (!ws || !ws->cgroup)
                return -ESRCH;
        r = cgroup_session_freeze(ws->cgroup, frozen);
        if (r < 0)
                return r;
        box->frozen = frozen;
        return 0;
}

int box_use(Server *s, Box *box) {
        unsigned long long start = now_usec();
        int r;

        box->last_call_usec = start;
        box->last_used_unix = time(NULL);
        if (box->claim)
                claim_touch(s, box->claim);
        if (!box->frozen)
                return 0;
        r = box_set_frozen(s, box, false);
        if (r < 0) {
                log_warning_errno(r, "Cannot thaw box %s: %m", box->id);
                return r;
        }
        log_info("Box %s thawed in %llu us", box->id, now_usec() - start);
        return 0;
}

void box_stop(Server *s, Box *box, const char *why) {
        Claim *cl = box->claim;

        /* Killing its processes thaws them first (os/cgroup.h). */
        log_info("Box %s: stopping (%s)", box->id, why);
        box->state = BOX_STOPPING;
        pending_answer_error(s, &box->starter, -ECANCELED, "the box was stopped before it was ready");
        if (cl) {
                cl->observer = NULL;
                claim_delete(s, cl, NULL);
        }
        box_terminated(s, box, why);
}

static int box_restore(Box *box, const Sbx__BoxInfo *info) {
        Sbx__BoxStart req = SBX__BOX_START__INIT;

        req.n_services = info->n_services;
        req.services = info->services;
        req.external_base_url = info->external_base_url;
        req.n_secrets = info->n_secrets;
        req.secrets = info->secrets;
        req.has_idle_timeout = true;
        req.idle_timeout_min = info->idle_timeout_min;
        req.version = info->version;    /* its /work goes over that version's layers again */
        return box_set_options(box, &req, NULL);
}

static int load_one(const char *id, int64_t uid, const void *data, size_t len, void *userdata) {
        Server *s = userdata;
        Sbx__BoxInfo *info = sbx__box_info__unpack(NULL, len, data);
        Claim *cl = NULL;
        Box *box;
        int r;

        if (info)
                TAILQ_FOREACH(cl, &s->claims, link)
                        if (cl->sandbox && strcmp(cl->sandbox->id, info->sandbox) == 0)
                                break;
        if (!info || !cl || !box_id_is_valid(id)) {
                log_warning("Box %s has no usable claim or record, skipping it", id);
                if (info)
                        sbx__box_info__free_unpacked(info, NULL);
                return 0;
        }
        box = calloc(1, sizeof(*box));
        r = box ? box_restore(box, info) : -ENOMEM;
        if (r >= 0)
                r = box_takeover_cap_renew(box);
        if (r >= 0) {
                strlcpy(box->id, id, sizeof(box->id));
                snprintf(box->takeover_url, sizeof(box->takeover_url), "sbxctl takeover attach %s", box->id);
                strlcpy(box->mcp_session, info->mcp_session, sizeof(box->mcp_session));
                box->uid = (uid_t) uid;
                box->from_spare = strcmp(info->started_from, "spare") == 0;
                box->created_unix = info->created_unix;
                box->last_used_unix = info->last_used_unix;
                box->ready_seconds = info->ready_seconds;
                box->last_call_usec = now_usec();
                box->claim = cl;
                /* The tick starts its session again (with the files kept): one restart it knows of. */
                box->restarts_seen = cl->restarts + 1;
                box->state = BOX_INTERRUPTED;
                strlcpy(box->interrupted, BOX_SUPERVISOR_LOST, sizeof(box->interrupted));
                cl->observer = &box_claim_observer;
                cl->observer_data = box;
                TAILQ_INSERT_TAIL(&s->boxes, box, link);
                s->n_boxes++;
                s->boxes_wanted = true;
        } else if (box)
                box_free(box);
        sbx__box_info__free_unpacked(info, NULL);
        return r;
}

int boxes_load(Server *s) {
        return store_box_foreach(s->store, load_one, s);
}

void boxes_free(Server *s) {
        Box *box;

        while ((box = TAILQ_FIRST(&s->boxes))) {
                TAILQ_REMOVE(&s->boxes, box, link);
                if (box->claim)
                        box->claim->observer = NULL;
                box_free(box);
        }
        s->n_boxes = 0;
}

/* ---- commands ------------------------------------------------------------------ */

int box_path(const char *cwd_rel, char *out, char *err, size_t errsize) {
        const char *p = cwd_rel;
        size_t len = strlen("work"), depth = 0;

        strlcpy(out, "work", SBX_PATH_MAX + 1);
        /* An absolute one only inside /work. */
        if (p[0] == '/') {
                if (strncmp(p, SBX_BOX_WORKDIR, strlen(SBX_BOX_WORKDIR)) != 0 ||
                    (p[strlen(SBX_BOX_WORKDIR)] != '/' && p[strlen(SBX_BOX_WORKDIR)] != '\0')) {
                        snprintf(err, errsize, "cwd: '%.200s' is outside /work: give a path relative to /work", p);
                        return -EINVAL;
                }
                p += strlen(SBX_BOX_WORKDIR);
        }
        while (*p) {
                size_t n = strcspn(p, "/");

                if (n == 2 && strncmp(p, "..", 2) == 0) {
                        if (depth == 0) {
                                snprintf(err, errsize, "cwd: '%.200s' climbs out of /work", cwd_rel);
                                return -EINVAL;
                        }
                        depth--;
                        while (out[len - 1] != '/')
                                len--;
                        out[--len] = '\0';
                } else if (n > 0 && !(n == 1 && p[0] == '.')) {
                        if (len + 1 + n > SBX_PATH_MAX) {
                                snprintf(err, errsize, "cwd: longer than %u bytes", SBX_PATH_MAX);
                                return -ENAMETOOLONG;
                        }
                        out[len++] = '/';
                        memcpy(out + len, p, n);
                        out[len += n] = '\0';
                        depth++;
                }
                p += n + (p[n] == '/');
        }
        return 0;
}

/* The variables of the box's commands into env (SBX_BOX_ENV_MAX); how many. */
static size_t box_env(const Box *box, const WorkspaceSession *ws, char **env) {
        static char display[] = "DISPLAY=" SBX_BOX_DISPLAY;
        size_t n = 0;

        if (box->has_display)
                env[n++] = display;
        /* After the session's proxy variables: these win (core/session.c). */
        if (ws->sandbox && ws->sandbox->egress != EGRESS_NONE)
                for (size_t i = 0; box->no_proxy[0] && i < ELEMENTSOF(box->no_proxy); i++)
                        env[n++] = box->no_proxy[i];
        return n;
}

/* cmd in the box's session, in /work/<cwd_rel>, with its variables; on a pty of size pty if given. */
static int box_command_start_with(Server *s, Box *box, const char *cmd, const char *cwd_rel, uint64_t timeout_ms,
                                  const TerminalSize *pty, Command **ret, char *err, size_t errsize) {
        WorkspaceSession *ws = box_session(s, box);
        char rel[SBX_PATH_MAX + 1], cwd[SBX_PATH_MAX + 2];
        char *env[SBX_BOX_ENV_MAX];
        const char *type = NULL;
        int r;

        if (!ws) {
                snprintf(err, errsize, "box %s is not ready (%s)", box->id, box_state_name(box));
                return -EAGAIN;
        }
        r = box_path(cwd_rel, rel, err, errsize);
        if (r < 0)
                return r;
        r = claimfs_stat(ws->root_fd, box->claim->sandbox->uid_base, rel, &type);
        if (r <= 0 || strcmp(type, "directory") != 0) {
                snprintf(err, errsize, "cwd: /%s is not a directory in the box", rel);
                return r < 0 ? r : -ENOTDIR;
        }
        snprintf(cwd, sizeof(cwd), "/%s", rel);
        r = pty ? command_start_pty(s, ws, cmd, timeout_ms, cwd, env, box_env(box, ws, env), *pty, ret)
                : command_start_at(s, ws, cmd, timeout_ms, cwd, env, box_env(box, ws, env), ret);
        if (r < 0)
                snprintf(err, errsize, "cannot start the command: %s",
                         r == -EAGAIN ? "too many running commands in this box" : strerror(-r));
        return r;
}

int box_command_start(Server *s, Box *box, const char *cmd, const char *cwd_rel, uint64_t timeout_ms,
                      Command **ret, char *err, size_t errsize) {
        return box_command_start_with(s, box, cmd, cwd_rel, timeout_ms, NULL, ret, err, errsize);
}

int box_terminal_start(Server *s, Box *box, const char *cmd, uint64_t timeout_ms, TerminalSize size, Command **ret,
                       char *err, size_t errsize) {
        return box_command_start_with(s, box, cmd, "", timeout_ms, &size, ret, err, errsize);
}

/* ---- what a reply shows ---------------------------------------------------------- */

const char *box_takeover_url(const Box *box, const Client *c, char *buf, size_t size) {
        if (box->state == BOX_TERMINATED)
                return "";
        if (!c || !c->gateway_url[0])
                return box->takeover_url;
        snprintf(buf, size, "%s/takeover/%s?c=%s", c->gateway_url, box->id, box->takeover_cap);
        return buf;
}

void box_info(Server *s, const Box *box, Sbx__BoxInfo *o) {
        o->id = (char *) box->id;
        o->status = (char *) box_state_name(box);
        o->started_from = (char *) (box->version[0] ? "snapshot" : box->from_spare ? "spare" : "cold");
        o->version = (char *) box->version;
        o->takeover_url = (char *) box_takeover_url(box, NULL, NULL, 0);
        o->interrupted_reason = (char *) box->interrupted;
        o->health = (char *) (box->state == BOX_TERMINATED ? "gone"
                              : box->frozen                ? "ok (frozen: the next tool call thaws it)"
                              : box_session(s, box)        ? "ok"
                                                           : "starting");
        o->n_services = box->n_services;
        o->services = box->services;
        o->external_base_url = box->external_base_url;
        o->n_secrets = box->n_secrets;
        o->secrets = box->secrets;
        o->idle_timeout_min = (double) box->idle_timeout_ms / 60e3;
        o->sandbox = box->claim && box->claim->sandbox ? box->claim->sandbox->name : (char *) "";
        o->uid = box->uid;
        o->mcp_session = (char *) box->mcp_session;
        o->created_unix = box->created_unix;
        o->last_used_unix = box->last_used_unix;
        o->image = (char *) s->cfg.box_image;
        o->display = (char *) (box->has_display ? SBX_BOX_DISPLAY : "");
        o->ready_seconds = box->ready_seconds;
}

/* ---- idle freeze ----------------------------------------------------------------- */

/* A foreground call waits for one of its commands: the box is in use. */
static bool box_busy(Server *s, const Box *box) {
        WorkspaceSession *ws = box_session(s, box);
        Command *c;

        if (!ws)
                return false;
        TAILQ_FOREACH(c, &ws->commands, session_link)
                if (!c->finished && !TAILQ_EMPTY(&c->waiters))
                        return true;
        return false;
}

/* Xvfb on :99, in the background, when the box's image has it. */
static void box_start_display(Server *s, Box *box) {
        WorkspaceSession *ws = box_session(s, box);
        const char *type = NULL;
        char err[300] = "";
        Command *c;
        int r;

        if (!ws)
                return;
        box->display_started = true;
        box->has_display = claimfs_stat(ws->root_fd, box->claim->sandbox->uid_base, "usr/bin/Xvfb", &type) > 0;
        if (!box->has_display)
                return;
        r = box_command_start(s, box, "Xvfb " SBX_BOX_DISPLAY " -screen 0 " SBX_BOX_SCREEN " -nolisten tcp "
                              "</dev/null >/work/.sbx/xvfb.log 2>&1 &", "", SBX_BOX_LAUNCH_TIMEOUT_S * 1000ull, &c,
                              err, sizeof(err));
        if (r < 0)
                log_warning("Box %s: cannot start Xvfb: %s", box->id, err);
}

/* Never while a person holds it (takeover): they make no tool calls, but it is not idle. */
static unsigned long long box_freeze_at(const Box *box) {
        if (box->frozen || box->idle_timeout_ms == 0 || box->state != BOX_READY)
                return ~0ull;
        return box->last_call_usec + box->idle_timeout_ms * 1000ull;
}

unsigned long long boxes_next_deadline(Server *s) {
        unsigned long long next = ~0ull;
        Box *box;

        TAILQ_FOREACH(box, &s->boxes, link)
                next = MIN(next, box_freeze_at(box));
        return next;
}

void boxes_run_deadlines(Server *s) {
        unsigned long long now = now_usec();
        Box *box;
        int r;

        TAILQ_FOREACH(box, &s->boxes, link) {
                if (box->claim && box->state == BOX_READY && box->claim->restarts > box->restarts_seen) {
                        /* Lost while sbxd ran: the claim made its session again. */
                        box->restarts_seen = box->claim->restarts;
                        box->state = BOX_INTERRUPTED;
                        box->frozen = false;
                        box->display_started = false;
                        strlcpy(box->interrupted, BOX_SESSION_LOST, sizeof(box->interrupted));
                        log_notice("Box %s interrupted: %s", box->id, box->interrupted);
                }
                if (box->state == BOX_READY && !box->display_started)
                        box_start_display(s, box);
                if (now < box_freeze_at(box))
                        continue;
                if (box_busy(s, box)) {
                        box->last_call_usec = now;      /* looked at again one idle time later */
                        continue;
                }
                r = box_set_frozen(s, box, true);
                if (r < 0) {
                        log_warning_errno(r, "Cannot freeze idle box %s, leaving it running: %m", box->id);
                        box->idle_timeout_ms = 0;
                        continue;
                }
                log_info("Box %s frozen: no tool call for %.3f min", box->id, (double) box->idle_timeout_ms / 60e3);
        }
}
