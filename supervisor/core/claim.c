#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/claim.h"
#include "core/kept.h"
#include "core/owner.h"
#include "core/spare.h"
#include "fd-util.h"
#include "log.h"
#include "msg.h"
#include "sbx-limits.h"

#define CLAIM_SANDBOX_PREFIX "claim-"
/* The labels, pod_labels and pod_annotations of src into dst (ClaimCreate and ClaimInfo have all three). */
#define LABELS_COPY(dst, src)                                           \
        do {                                                            \
                (dst)->n_labels = (src)->n_labels;                      \
                (dst)->labels = (src)->labels;                          \
                (dst)->n_pod_labels = (src)->n_pod_labels;              \
                (dst)->pod_labels = (src)->pod_labels;                  \
                (dst)->n_pod_annotations = (src)->n_pod_annotations;    \
                (dst)->pod_annotations = (src)->pod_annotations;        \
        } while (0)
#define SESSION_RETRY_USEC (5ull * 1000000ull) /* after a claim's session failed to start */

bool claim_name_is_valid(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > SBX_CLAIM_NAME_MAX || name[0] == '-' || name[n - 1] == '-')
                return false;
        return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

bool sandbox_allows_client(const Sandbox *sb, const Client *c) {
        const Claim *cl = sb->claim;

        if (!cl)
                return sandbox_allows(sb, c->uid);
        if (cl->warm)
                return false;
        if (c->uid == 0 && !c->mcp_session[0])
                return true;
        return !cl->warm && cl->uid == (int64_t) c->uid && strcmp(cl->mcp_session, c->mcp_session) == 0;
}

bool claim_owned_by(const Claim *cl, const Client *c) {
        if (cl->warm || cl->state == CLAIM_GONE)
                return false;
        if (c->uid == 0 && !c->mcp_session[0])
                return true;
        return cl->uid == (int64_t) c->uid && c->mcp_session[0] && strcmp(cl->mcp_session, c->mcp_session) == 0;
}

Claim *claim_find(Server *s, const Client *c, const char *ns, const char *name) {
        Claim *cl;

        TAILQ_FOREACH(cl, &s->claims, link)
                if (strcmp(cl->namespace_, ns) == 0 && strcmp(cl->name, name) == 0 && claim_owned_by(cl, c) &&
                    !claim_is_box(cl))
                        return cl;
        return NULL;
}

WorkspaceSession *claim_session(Server *s, const Claim *cl) {
        WorkspaceSession *ws;

        if (!cl->sandbox)
                return NULL;
        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->sandbox == cl->sandbox && !ws->automatic && ws->state == SESSION_READY)
                        return ws;
        return NULL;
}

/* A session of the claim's that is alive or on its way (not stopped). */
static WorkspaceSession *claim_session_any(Server *s, const Claim *cl) {
        WorkspaceSession *ws;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->sandbox == cl->sandbox && !ws->automatic && ws->state != SESSION_STOPPED &&
                    ws->state != SESSION_DEAD)
                        return ws;
        return NULL;
}

unsigned claims_of_uid(Server *s, uid_t uid) {
        unsigned n = 0;
        Claim *cl;

        TAILQ_FOREACH(cl, &s->claims, link)
                n += !cl->warm && cl->state != CLAIM_GONE && cl->uid == (int64_t) uid && !claim_is_box(cl);
        return n;
}

void claims_count(Server *s, const char *template_name, unsigned *ret_warm, unsigned *ret_claimed) {
        unsigned warm = 0, claimed = 0;
        Claim *cl;

        TAILQ_FOREACH(cl, &s->claims, link) {
                if (strcmp(cl->template_, template_name) != 0 || cl->state == CLAIM_GONE)
                        continue;
                if (cl->warm)
                        warm += cl->state == CLAIM_READY && claim_session(s, cl) != NULL;
                else
                        claimed++;
        }
        *ret_warm = warm;
        *ret_claimed = claimed;
}

/* ---- records ------------------------------------------------------------------ */

static int64_t claim_expiry(const Server *s, const Claim *cl) {
        int64_t at = cl->no_expiry ? 0 : cl->last_used_unix + cl->shutdown_after_seconds;

        /* A box lives until it is stopped (the seed: no maximum lifetime). */
        if (s->cfg.claim_max_lifetime > 0 && !claim_is_box(cl)) {
                int64_t cap = cl->created_unix + s->cfg.claim_max_lifetime;
                at = at == 0 ? cap : MIN(at, cap);
        }
        return at;
}

int claim_info(Server *s, const Claim *cl, Sbx__ClaimInfo *o, Sbx__ClaimInfo **ret_labels) {
        Sbx__ClaimInfo *l = NULL;
        WorkspaceSession *ws = claim_session(s, cl);

        if (cl->labels_len > 0) {
                l = sbx__claim_info__unpack(NULL, cl->labels_len, cl->labels);
                if (!l)
                        return -ENOMEM;
                LABELS_COPY(o, l);
        }
        o->namespace_ = (char *) cl->namespace_;
        o->name = (char *) cl->name;
        o->template_ = (char *) cl->template_;
        o->sandbox = cl->sandbox ? cl->sandbox->name : (char *) "";
        o->uid = cl->uid < 0 ? 0 : (uint32_t) cl->uid;
        o->mcp_session = (char *) cl->mcp_session;
        o->ready = ws != NULL;
        o->status = (char *) (ws ? "SandboxReady" : "SandboxNotReady");
        o->message = (char *) (!ws ? (cl->state == CLAIM_MAKING ? "the sandbox is being made"
                                                                : "the sandbox's session is being started again")
                               : cl->again == CLAIM_AGAIN_KEPT
                                       ? "the sandbox's session runs; it was started again after sbxd restarted: "
                                         "its files were kept, processes started before the restart are gone"
                               : cl->again == CLAIM_AGAIN_LOST
                                       ? "the sandbox's session runs; it was started again after the old one was "
                                         "lost: files it wrote and processes it ran are gone"
                               : cl->again == CLAIM_AGAIN_UNKEPT ? cl->again_message
                                                                 : "the sandbox's session runs");
        o->started_from = (char *) (cl->from_warm ? "warm" : "cold");
        o->ready_seconds = cl->ready_seconds;
        o->created_unix = cl->created_unix;
        o->last_used_unix = cl->last_used_unix;
        o->expires_unix = claim_expiry(s, cl);
        o->has_shutdown = !cl->no_expiry;
        o->shutdown_after_seconds = cl->shutdown_after_seconds;
        *ret_labels = l;
        return 0;
}

void claim_info_done(Sbx__ClaimInfo *labels) {
        if (labels)
                sbx__claim_info__free_unpacked(labels, NULL);
}

/* Its row in sbx.db: the indexed columns and the whole ClaimInfo packed. */
static int claim_save(Server *s, Claim *cl) {
        Sbx__ClaimInfo info = SBX__CLAIM_INFO__INIT, *labels = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t n;
        int r;

        if (!cl->sandbox)
                return 0;
        r = claim_info(s, cl, &info, &labels);
        if (r < 0)
                return r;
        n = sbx__claim_info__get_packed_size(&info);
        buf = malloc(n ?: 1);
        if (buf)
                sbx__claim_info__pack(&info, buf);
        claim_info_done(labels);
        if (!buf)
                return -ENOMEM;
        return store_claim_put(s->store, &(StoreClaim) {
                .sandbox = cl->sandbox->id,
                .namespace_ = cl->namespace_,
                .name = cl->name,
                .uid = cl->uid,
                .last_used_unix = cl->last_used_unix,
                .info = buf,
                .info_len = n,
        });
}

void claim_touch(Server *s, Claim *cl) {
        int r;

        cl->last_used_unix = time(NULL);
        if (!cl->sandbox)
                return;
        r = store_claim_touch(s->store, cl->sandbox->id, cl->last_used_unix);
        if (r < 0)
                log_warning_errno(r, "Failed to record the use of claim %s/%s, ignoring: %m", cl->namespace_, cl->name);
}

/* The three label lists of src (a ClaimCreate or a ClaimInfo), packed as a ClaimInfo. */
#define LABELS_PACK(src, ret, ret_len) ({                       \
                Sbx__ClaimInfo _l_ = SBX__CLAIM_INFO__INIT;     \
                LABELS_COPY(&_l_, (src));                       \
                labels_pack(&_l_, (ret), (ret_len));            \
        })

static int labels_pack(const Sbx__ClaimInfo *l, uint8_t **ret, size_t *ret_len) {
        uint8_t *buf;
        size_t n;

        n = sbx__claim_info__get_packed_size(l);
        buf = malloc(n ?: 1);
        if (!buf)
                return -ENOMEM;
        sbx__claim_info__pack(l, buf);
        *ret = buf;
        *ret_len = n;
        return 0;
}

/* ---- life and death ------------------------------------------------------------ */

static void claim_free(Claim *cl) {
        pending_stop(&cl->creator);
        free(cl->labels);
        free(cl);
}

static void claim_remove(Server *s, Claim *cl, const char *why) {
        if (cl->observer)
                cl->observer->gone(s, cl, cl->observer_data, why);
        TAILQ_REMOVE(&s->claims, cl, link);
        if (cl->sandbox)
                cl->sandbox->claim = NULL;
        claim_free(cl);
}

void claim_delete(Server *s, Claim *cl, const char *reason) {
        Sandbox *sb = cl->sandbox;
        int r;

        if (!cl->warm && reason) {
                r = store_claim_tombstone_put(s->store, cl->namespace_, cl->name, cl->uid, cl->mcp_session, reason,
                                              time(NULL));
                if (r < 0)
                        log_warning_errno(r, "Failed to remember why claim %s/%s went, ignoring: %m", cl->namespace_,
                                          cl->name);
        }
        pending_answer_error(s, &cl->creator, -ECANCELED, "Sandbox claim '%s' was deleted before it was ready: %s",
                             cl->name, reason ?: "deleted");
        if (!sb) {
                /* Its import still runs: the claim goes when the sandbox comes. */
                cl->state = CLAIM_GONE;
                return;
        }
        claim_remove(s, cl, reason);
        r = sandbox_delete(s, sb);
        if (r < 0)
                log_error_errno(r, "Failed to delete sandbox '%s' of a claim: %m", sb->name);
}

static void claim_creator_abandon(Server *s, Pending *p, bool cancelled) {
        /* The claim is made anyway; its owner finds it with the resource or sbxctl. */
}

/* A claim's new session starts with the files of its seed, if that is still
 * there. If they cannot be put back (the session's disk is smaller now than
 * they are, the state filesystem fails), the claim's next session starts
 * without them rather than trying again forever (claim_tick). */
static int claim_session_fill(const WorkspaceSession *ws, int upper_fd, int root_fd) {
        Claim *cl = ws->sandbox->claim;
        int r;

        if (!ws->seed)
                return 0;
        r = kept_session_seed(ws->seed, upper_fd, root_fd);
        if (r < 0 && cl)
                strlcpy(cl->fill_error, strerror(-r), sizeof(cl->fill_error));
        return r;
}

/* Its session; seed (if not NULL): a kept one whose files it starts with. */
static int claim_start_session(Server *s, Claim *cl, WorkspaceSession *seed) {
        WorkspaceSession *ws;
        char err[300] = "";
        int r;

        spare_make_room(s, cl->sandbox);
        r = session_new(s, cl->sandbox, false, false, &ws, err, sizeof(err));
        if (r < 0) {
                strlcpy(cl->start_error, err[0] ? err : strerror(-r), sizeof(cl->start_error));
                log_warning("Cannot start the session of claim %s/%s: %s", cl->namespace_, cl->name, cl->start_error);
        } else if (seed) {
                ws->seed = seed;
                ws->fill = claim_session_fill;
        }
        return r;
}

static void claim_sandbox_made(Server *s, Sandbox *sb, int err, const char *why, void *userdata) {
        Claim *cl = userdata;

        if (cl->state == CLAIM_GONE) {
                claim_remove(s, cl, NULL);
                if (sb)
                        (void) sandbox_delete(s, sb);
                return;
        }
        if (!sb) {
                pending_answer_error(s, &cl->creator, err, "cannot make the sandbox: %s", why ?: strerror(-err));
                claim_remove(s, cl, why ?: strerror(-err));
                return;
        }
        cl->sandbox = sb;
        sb->claim = cl;
        err = claim_save(s, cl);
        if (err < 0)
                log_warning_errno(err, "Failed to record claim %s/%s: %m", cl->namespace_, cl->name);
        /* Without a session the tick answers the creator and deletes the claim. */
        (void) claim_start_session(s, cl, NULL);
}

static Claim *claim_alloc(const Template *t) {
        Claim *cl = calloc(1, sizeof(*cl));

        if (!cl)
                return NULL;
        strlcpy(cl->template_, t->name, sizeof(cl->template_));
        cl->uid = -1;
        cl->created_unix = cl->last_used_unix = time(NULL);
        cl->make_start_usec = now_usec();
        cl->no_expiry = t->no_expiry;
        cl->shutdown_after_seconds = t->shutdown_after_seconds;
        return cl;
}

/* Make the sandbox of cl (new, of template t: warm, or with its owner and
 * names set); the claim is in the list from now on, or freed on failure. */
static int claim_make(Server *s, const Template *t, Claim *cl, char *err, size_t errsize) {
        char name[SBX_NAME_MAX + 1];
        int r;

        r = random_id(CLAIM_SANDBOX_PREFIX, name, sizeof(name));
        if (r < 0) {
                claim_free(cl);
                return r;
        }
        /* A warm claim is recorded under its sandbox's name until it is claimed. */
        if (cl->warm)
                strlcpy(cl->name, name, sizeof(cl->name));
        TAILQ_INSERT_TAIL(&s->claims, cl, link);
        r = sandbox_create_for_claim(s, &(SandboxSpec) {
                .name = name,
                .source_dir = t->source,
                .image = t->image,
                .owner_uid = cl->warm ? 0 : (uid_t) cl->uid,
                .memory_bytes = t->memory_bytes,
                .pids_max = t->pids_max,
                .cpu_weight = t->cpu_weight,
                .disk_bytes = t->disk_bytes,
                .egress = egress_policy_to_string(t->egress),
        }, claim_sandbox_made, cl, err, errsize);
        if (r < 0) {
                TAILQ_REMOVE(&s->claims, cl, link);
                claim_free(cl);
                return r;
        }
        return 0;
}

/* The claim becomes c's: its owner, its names, its labels and its expiry. */
static int claim_assign(Server *s, Claim *cl, const Client *c, const Sbx__ClaimCreate *req) {
        const char *ns = req->namespace_[0] ? req->namespace_ : "default";
        int r;

        r = LABELS_PACK(req, &cl->labels, &cl->labels_len);
        if (r < 0)
                return r;
        r = random_id("sandbox-claim-", cl->name, sizeof(cl->name));
        if (r < 0)
                return r;
        strlcpy(cl->namespace_, ns, sizeof(cl->namespace_));
        strlcpy(cl->mcp_session, c->mcp_session, sizeof(cl->mcp_session));
        cl->uid = c->uid;
        cl->warm = false;
        cl->created_unix = cl->last_used_unix = time(NULL);
        if (req->no_expiry)
                cl->no_expiry = true;
        else if (req->has_shutdown) {
                cl->no_expiry = false;
                cl->shutdown_after_seconds = req->shutdown_after_seconds;
        }
        if (cl->sandbox) {
                cl->sandbox->owner_uid = c->uid;
                r = store_sandbox_set_owner(s->store, cl->sandbox->id, c->uid);
                if (r >= 0)
                        r = claim_save(s, cl);
        }
        return r;
}

static Claim *warm_take(Server *s, const Template *t) {
        Claim *cl;

        TAILQ_FOREACH(cl, &s->claims, link)
                if (cl->warm && cl->state == CLAIM_READY && strcmp(cl->template_, t->name) == 0 &&
                    claim_session(s, cl))
                        return cl;
        return NULL;
}

/* claim_create and claim_create_observed: o (if not NULL) instead of (c, seq). */
static int claim_create_with(Server *s, Client *c, uint32_t seq, const Template *t, const Sbx__ClaimCreate *req,
                             const ClaimObserver *o, void *data, Claim **ret, char *err, size_t errsize) {
        unsigned long long start = now_usec();
        Claim *cl;
        int r;

        /* A claim is a sandbox and its session: the owner quotas hold for it too. */
        r = owner_quota_check(s, "owner_sandboxes_max", c->uid, 1, err, errsize);
        if (r >= 0)
                r = owner_quota_check(s, "owner_sessions_max", c->uid, 1, err, errsize);
        if (r < 0)
                return r;
        cl = warm_take(s, t);
        if (cl) {
                /* Before claim_assign records it. */
                cl->from_warm = true;
                cl->observer = o;
                cl->observer_data = data;
                cl->ready_seconds = (double) (now_usec() - start) / 1e6;
                r = claim_assign(s, cl, c, req);
                if (r < 0) {
                        /* Half given out: it goes, and the pool makes another. */
                        snprintf(err, errsize, "cannot record the claim: %s", strerror(-r));
                        claim_delete(s, cl, NULL);
                        return r;
                }
                log_info("Claim %s/%s (sandbox '%s', template '%s') for uid %u from the warm pool", cl->namespace_,
                         cl->name, cl->sandbox->name, t->name, c->uid);
                *ret = cl;
                return 0;
        }
        cl = claim_alloc(t);
        if (!cl)
                return -ENOMEM;
        cl->observer = o;
        cl->observer_data = data;
        r = claim_assign(s, cl, c, req);
        if (r < 0) {
                claim_free(cl);
                return r;
        }
        r = claim_make(s, t, cl, err, errsize);
        if (r < 0)
                return r;
        cl->make_start_usec = start;
        cl->ready_deadline_usec = start + (req->ready_timeout_seconds ?: SBX_CLAIM_READY_TIMEOUT_DEFAULT_S) * 1000000ull;
        log_info("Claim %s/%s (template '%s') for uid %u made cold", cl->namespace_, cl->name, t->name, c->uid);
        if (cl->state == CLAIM_MAKING && !o)
                pending_start(&cl->creator, c, seq, claim_creator_abandon);
        *ret = cl;
        return CLAIM_DEFERRED;
}

int claim_create(Server *s, Client *c, uint32_t seq, const Template *t, const Sbx__ClaimCreate *req, Claim **ret,
                 char *err, size_t errsize) {
        return claim_create_with(s, c, seq, t, req, NULL, NULL, ret, err, errsize);
}

int claim_create_observed(Server *s, Client *c, const Template *t, const Sbx__ClaimCreate *req,
                          const ClaimObserver *o, void *data, Claim **ret, char *err, size_t errsize) {
        return claim_create_with(s, c, 0, t, req, o, data, ret, err, errsize);
}

int claim_tombstone(Server *s, const Client *c, const char *ns, const char *name, char *ret, size_t size) {
        return store_claim_tombstone_get(s->store, ns, name, c->uid, c->mcp_session, ret, size);
}

/* ---- loading ------------------------------------------------------------------- */

static void claim_info_donep(Sbx__ClaimInfo **p) {
        claim_info_done(*p);
}

static int load_one(const StoreClaim *row, void *userdata) {
        Server *s = userdata;
        _cleanup_(claim_info_donep) Sbx__ClaimInfo *info = NULL;
        Sandbox *sb;
        Claim *cl;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (strcmp(sb->id, row->sandbox) == 0)
                        break;
        info = sbx__claim_info__unpack(NULL, row->info_len, row->info);
        if (!sb || !info) {
                log_warning("Claim %s/%s has no usable sandbox or record, skipping it", row->namespace_, row->name);
                return 0;
        }
        cl = calloc(1, sizeof(*cl));
        if (!cl)
                return -ENOMEM;
        cl->state = CLAIM_READY;
        cl->sandbox = sb;
        sb->claim = cl;
        cl->warm = row->uid < 0;
        cl->uid = row->uid;
        strlcpy(cl->namespace_, row->namespace_, sizeof(cl->namespace_));
        strlcpy(cl->name, row->name, sizeof(cl->name));
        strlcpy(cl->template_, info->template_, sizeof(cl->template_));
        strlcpy(cl->mcp_session, info->mcp_session, sizeof(cl->mcp_session));
        cl->from_warm = strcmp(info->started_from, "warm") == 0;
        cl->no_expiry = !info->has_shutdown;
        cl->shutdown_after_seconds = info->shutdown_after_seconds;
        cl->created_unix = info->created_unix;
        cl->last_used_unix = row->last_used_unix;
        cl->ready_seconds = info->ready_seconds;
        cl->make_start_usec = now_usec();
        if (labels_pack(info, &cl->labels, &cl->labels_len) < 0) {
                free(cl);
                return -ENOMEM;
        }
        /* Warm ones keep their name: they are told apart by uid -1. */
        TAILQ_INSERT_TAIL(&s->claims, cl, link);
        return 0;
}

int claims_load(Server *s) {
        return store_claim_foreach(s->store, load_one, s);
}

void claims_free(Server *s) {
        Claim *cl;

        while ((cl = TAILQ_FIRST(&s->claims)))
                claim_remove(s, cl, NULL);
}

/* ---- the tick -------------------------------------------------------------------- */

const WarmBackoff *claim_warm_backoff(Server *s, const char *template_name) {
        for (size_t i = 0; i < ELEMENTSOF(s->warm_backoff); i++)
                if (strcmp(s->warm_backoff[i].template_, template_name) == 0)
                        return &s->warm_backoff[i];
        return NULL;
}

/* A warm claim of template_name failed (why): the next waits, twice as long as the last. */
static void warm_failed(Server *s, const char *template_name, const char *why) {
        WarmBackoff *b = (WarmBackoff *) claim_warm_backoff(s, template_name);
        unsigned long long delay_s;

        /* A template's first failure takes a free entry (or one whose template went from sbxd.conf). */
        for (size_t i = 0; !b && i < ELEMENTSOF(s->warm_backoff); i++)
                if (!s->warm_backoff[i].template_[0] || !config_template(&s->cfg, s->warm_backoff[i].template_)) {
                        b = &s->warm_backoff[i];
                        *b = (WarmBackoff) {};
                        strlcpy(b->template_, template_name, sizeof(b->template_));
                }
        if (!b)
                return;
        b->failures++;
        delay_s = MIN((unsigned long long) SBX_WARM_RETRY_MIN_S << MIN(b->failures - 1, 20u),
                      (unsigned long long) SBX_WARM_RETRY_MAX_S);
        b->retry_usec = now_usec() + delay_s * 1000000ull;
        b->retry_unix = time(NULL) + (int64_t) delay_s;
        strlcpy(b->error, why, sizeof(b->error));
        log_warning("A warm claim of template '%s' failed (%" PRIu32 " in a row): %s; trying again in %llu s",
                    template_name, b->failures, why, delay_s);
}

static void warm_succeeded(Server *s, const char *template_name) {
        WarmBackoff *b = (WarmBackoff *) claim_warm_backoff(s, template_name);

        if (b && b->failures > 0)
                log_info("A warm claim of template '%s' is ready after %" PRIu32 " failures", template_name,
                         b->failures);
        if (b)
                *b = (WarmBackoff) {};
}

unsigned long long claims_next_deadline(Server *s) {
        unsigned long long next = ~0ull;
        int64_t now = time(NULL);
        Claim *cl;

        TAILQ_FOREACH(cl, &s->claims, link) {
                int64_t at = cl->warm ? 0 : claim_expiry(s, cl);

                if (at > 0)
                        next = MIN(next, now_usec() + (unsigned long long) MAX(at - now, (int64_t) 0) * 1000000ull);
                if (pending_active(&cl->creator))
                        next = MIN(next, cl->ready_deadline_usec);
                /* A claim without its session gets one again (after a failed start, in 5 s). */
                if (cl->state == CLAIM_READY && cl->sandbox && !claim_session_any(s, cl))
                        next = MIN(next, MAX(cl->restart_usec, now_usec() + 100000ull));
        }
        /* A back-off still running (past it, the next try is being made or waits for room). */
        for (size_t i = 0; i < ELEMENTSOF(s->warm_backoff); i++)
                if (s->warm_backoff[i].failures > 0 && s->warm_backoff[i].retry_usec > now_usec())
                        next = MIN(next, s->warm_backoff[i].retry_usec);
        return next;
}

static void claim_answer_creator(Server *s, Claim *cl) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__ClaimInfo info = SBX__CLAIM_INFO__INIT, *labels = NULL;

        if (claim_info(s, cl, &info, &labels) < 0) {
                pending_answer_error(s, &cl->creator, -ENOMEM, "out of memory");
                return;
        }
        msg_reply_set(&reply, SBX__REPLY__BODY_CLAIM, &info);
        pending_answer(s, &cl->creator, &reply);
        claim_info_done(labels);
}

/* One claim's turn; false if it went (the list changed). */
static bool claim_tick(Server *s, Claim *cl, int64_t now) {
        WorkspaceSession *ws = cl->sandbox ? claim_session_any(s, cl) : NULL;
        int64_t at = cl->warm ? 0 : claim_expiry(s, cl);
        char reason[400];

        if (cl->state == CLAIM_GONE || !cl->sandbox)
                return true;
        if (cl->warm && !config_template(&s->cfg, cl->template_)) {
                log_notice("Deleting warm claim '%s': its template '%s' is no longer in sbxd.conf", cl->name,
                           cl->template_);
                claim_delete(s, cl, NULL);
                return false;
        }
        if (at > 0 && now >= at) {
                snprintf(reason, sizeof(reason),
                         "Sandbox claim '%s' in namespace '%s' expired and was deleted: unused for %u s "
                         "(shutdown_after_seconds)%s", cl->name, cl->namespace_, cl->shutdown_after_seconds,
                         s->cfg.claim_max_lifetime && at == cl->created_unix + s->cfg.claim_max_lifetime
                                 ? " or older than claim_max_lifetime" : "");
                log_info("%s", reason);
                claim_delete(s, cl, reason);
                return false;
        }
        if (cl->state == CLAIM_MAKING) {
                if (ws && ws->state == SESSION_READY) {
                        cl->state = CLAIM_READY;
                        cl->ready_seconds = (double) (now_usec() - cl->make_start_usec) / 1e6;
                        if (cl->warm)
                                warm_succeeded(s, cl->template_);
                        (void) claim_save(s, cl);
                        if (cl->observer)
                                cl->observer->ready(s, cl, cl->observer_data);
                        else
                                claim_answer_creator(s, cl);
                } else if (!ws || (pending_active(&cl->creator) && now_usec() >= cl->ready_deadline_usec)) {
                        if (ws)
                                snprintf(reason, sizeof(reason),
                                         "it was not ready within sandbox_ready_timeout; raise it or try again");
                        else
                                snprintf(reason, sizeof(reason), "its session did not start: %s",
                                         cl->start_error[0] ? cl->start_error : "see sbxd's log");
                        if (cl->warm)
                                warm_failed(s, cl->template_, reason);
                        pending_answer_error(s, &cl->creator, -ETIMEDOUT, "Sandbox claim '%s' failed: %s",
                                             cl->name, reason);
                        if (cl->observer)
                                cl->observer->gone(s, cl, cl->observer_data, reason);
                        cl->observer = NULL;
                        claim_delete(s, cl, NULL);
                        return false;
                }
                return true;
        }
        if (ws && ws->state == SESSION_READY && cl->observer && cl->observer->resumed)
                cl->observer->resumed(s, cl, cl->observer_data, ws);
        if (ws && ws->seed && ws->state == SESSION_READY) {
                /* It runs with the kept files: their copy goes. */
                session_destroy(s, TAKE_PTR(ws->seed));
                log_info("The session of claim %s/%s runs again with the files it had before sbxd restarted",
                         cl->namespace_, cl->name);
        }
        if (!ws && now_usec() >= cl->restart_usec) {
                WorkspaceSession *old, *next, *kept = NULL;

                /* Lost (or sbxd restarted): a stopped session of it goes, unless it is the
                 * copy kept at sbxd's stop, whose files the new one starts with. */
                TAILQ_FOREACH_SAFE(old, &s->sessions, link, next) {
                        if (old->sandbox != cl->sandbox || old->automatic)
                                continue;
                        if (!kept && old->state == SESSION_STOPPED && old->kept_fd >= 0 && !cl->fill_error[0])
                                kept = old;
                        else
                                session_destroy(s, old);
                }
                if (claim_start_session(s, cl, kept) < 0)
                        cl->restart_usec = now_usec() + SESSION_RETRY_USEC;
                else {
                        /* Its first one here is after sbxd's restart: whatever it wrote was kept (if anything). */
                        cl->again = kept || cl->restarts == 0 ? CLAIM_AGAIN_KEPT : CLAIM_AGAIN_LOST;
                        if (cl->fill_error[0]) {
                                cl->again = CLAIM_AGAIN_UNKEPT;
                                snprintf(cl->again_message, sizeof(cl->again_message),
                                         "the sandbox's session runs; it was started again after sbxd restarted, "
                                         "without its files: the copy kept at the stop could not be put back (%s) "
                                         "and was removed; processes started before the restart are gone",
                                         cl->fill_error);
                                log_warning("Claim %s/%s starts without its kept files: they could not be put "
                                            "back: %s", cl->namespace_, cl->name, cl->fill_error);
                                cl->fill_error[0] = '\0';
                        }
                        if (cl->restarts++ > 0)
                                log_notice("Started the session of claim %s/%s again", cl->namespace_, cl->name);
                }
        }
        return true;
}

static void warm_pools_fill(Server *s) {
        for (size_t i = 0; i < s->cfg.n_templates; i++) {
                const Template *t = &s->cfg.templates[i];
                const WarmBackoff *b = claim_warm_backoff(s, t->name);
                unsigned warm = 0;
                char err[300] = "";
                Claim *cl;
                int r;

                if ((b && now_usec() < b->retry_usec) || (t->box && !s->boxes_wanted))
                        continue;
                TAILQ_FOREACH(cl, &s->claims, link)
                        warm += cl->warm && cl->state != CLAIM_GONE && strcmp(cl->template_, t->name) == 0;
                if (warm >= t->warm)
                        continue;
                cl = claim_alloc(t);
                if (!cl)
                        return;
                cl->warm = true;
                r = claim_make(s, t, cl, err, sizeof(err));
                if (r < 0)
                        warm_failed(s, t->name, err[0] ? err : strerror(-r));
        }
}

void claims_run_deadlines(Server *s) {
        int64_t now = time(NULL);
        Claim *cl, *next;

restart:
        TAILQ_FOREACH_SAFE(cl, &s->claims, link, next)
                if (!claim_tick(s, cl, now))
                        goto restart;   /* a deletion may have taken others' sessions */
        warm_pools_fill(s);
}
