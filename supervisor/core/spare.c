#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "core/owner.h"
#include "core/spare.h"
#include "fd-util.h"
#include "log.h"
#include "sbx-limits.h"

static bool spare_current(const WorkspaceSession *ws) {
        return ws->base.top == ws->sandbox->top_layer && ws->base.squashed == ws->sandbox->squashed &&
               (ws->state == SESSION_SETUP || ws->state == SESSION_SPAWNING || ws->state == SESSION_READY);
}

/* Its worker exited, and the loop has not handled that yet. */
static bool spare_dead(const WorkspaceSession *ws) {
        struct pollfd p = { .fd = ws->pidfd_src.fd, .events = POLLIN };

        return ws->pidfd_src.fd >= 0 && poll(&p, 1, 0) > 0;
}

WorkspaceSession *spare_take(Server *s, Sandbox *sb) {
        WorkspaceSession *ws;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->spare && ws->sandbox == sb && spare_current(ws) && !spare_dead(ws)) {
                        ws->spare = false;
                        ws->was_spare = true;
                        sb->spares--;
                        ws->created_unix = time(NULL);
                        return ws;
                }
        return NULL;
}

/* Destroy one spare of sb, else of a sandbox of owner, else of any sandbox
 * (sb NULL, owner -1); false if there is none. */
static bool spare_evict(Server *s, const Sandbox *sb, uid_t owner) {
        WorkspaceSession *ws;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->spare && (sb ? ws->sandbox == sb : owner == (uid_t) -1 || ws->sandbox->owner_uid == owner)) {
                        session_destroy(s, ws);
                        return true;
                }
        return false;
}

void spare_make_room(Server *s, Sandbox *sb) {
        /* Spares give way to sessions someone asked for. */
        if (sessions_live(s) >= SBX_MAX_LIVE_SESSIONS)
                (void) spare_evict(s, NULL, (uid_t) -1);
        if (sb->live_sessions >= SBX_MAX_SESSIONS_PER_SANDBOX)
                (void) spare_evict(s, sb, (uid_t) -1);
        if (owner_quota_check(s, "owner_sessions_max", sb->owner_uid, 1, NULL, 0) < 0)
                (void) spare_evict(s, NULL, sb->owner_uid);
}

static void spares_refill(Server *s, Sandbox *sb) {
        char errmsg[256] = "";
        unsigned live = sessions_live(s);
        WorkspaceSession *ws;

        /* Spares never take the last places: a real session would evict them first anyway. */
        while (sb->spares < s->cfg.session_spares && live + 1 < SBX_MAX_LIVE_SESSIONS &&
               sb->live_sessions + 1 < SBX_MAX_SESSIONS_PER_SANDBOX &&
               owner_quota_check(s, "owner_sessions_max", sb->owner_uid, 2, NULL, 0) >= 0) {
                int r = session_new(s, sb, true, true, &ws, errmsg, sizeof(errmsg));
                if (r < 0) {
                        log_warning("Cannot make a spare session for sandbox '%s', ignoring: %s", sb->name,
                                    errmsg[0] ? errmsg : strerror(-r));
                        return;
                }
                ws->spare = true;
                ws->spare_until_usec = now_usec() + s->cfg.spare_idle_seconds * 1000000ull;
                sb->spares++;
                live++;
                log_debug("Made spare session %s of sandbox '%s' at layer %u", ws->id, sb->name, ws->base.top);
        }
}

unsigned long long spares_next_deadline(Server *s) {
        unsigned long long next = ~0ull;
        WorkspaceSession *ws;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->spare)
                        next = MIN(next, ws->spare_until_usec);
        return next;
}

void spares_run_deadlines(Server *s) {
        unsigned long long now = now_usec();
        WorkspaceSession *ws, *next;
        Sandbox *sb;

        /* A publication made them stale (spare_take would refuse them), or nobody wanted them. */
        TAILQ_FOREACH_SAFE(ws, &s->sessions, link, next)
                if (ws->spare && (!spare_current(ws) || ws->spare_until_usec <= now))
                        session_destroy(s, ws);
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (sb->refill_spares) {
                        sb->refill_spares = false;
                        spares_refill(s, sb);
                }
}
