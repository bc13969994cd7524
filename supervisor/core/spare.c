/* Spare sessions: an automatic session set up ahead of the command that will
 * use it, so that exec_command without a session pays for a command and a
 * publication check, not for namespaces, mounts and a worker's start.
 *
 * A spare is an ordinary automatic session nobody has asked for yet. It is
 * built on the sandbox's snapshot of the time; it is only handed out while
 * that is still the snapshot (nothing was published since), so what the
 * command sees is exactly what a session made on the spot would see: the
 * same layers, a fresh upper, /tmp and process tree. Spares are made after
 * an automatic session of the sandbox ended without publishing anything
 * (read-only commands: tests, builds into /tmp, searches), since after a
 * publication the next spare would be stale before it is used. They are
 * dropped when a publication makes them stale, when they idle for
 * session_spare_idle_seconds, and before any limit would refuse a real session. */
#include <errno.h>
#include <time.h>

#include "fd-util.h"
#include "log.h"
#include "sbx-limits.h"
#include "core/sbxd.h"

static bool spare_current(const WorkspaceSession *ws) {
        return ws->base_layer == ws->sandbox->top_layer && ws->base_squashed == ws->sandbox->squashed &&
               (ws->state == SESSION_SETUP || ws->state == SESSION_SPAWNING || ws->state == SESSION_READY);
}

WorkspaceSession *spare_take(Server *s, Sandbox *sb) {
        WorkspaceSession *ws;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->spare && ws->sandbox == sb && spare_current(ws)) {
                        ws->spare = false;
                        sb->spares--;
                        ws->created_unix = time(NULL);
                        return ws;
                }
        return NULL;
}

void spares_refill(Server *s, Sandbox *sb) {
        char errmsg[256];
        unsigned live = 0;
        WorkspaceSession *ws;

        TAILQ_FOREACH(ws, &s->sessions, link)
                live++;
        /* Spares never take the last places: a real session would evict them first anyway. */
        while (sb->spares < s->cfg.session_spares && live + 1 < SBX_MAX_LIVE_SESSIONS &&
               sb->live_sessions + 1 < SBX_MAX_SESSIONS_PER_SANDBOX) {
                int r = session_new(s, sb, true, true, &ws, errmsg, sizeof(errmsg));
                if (r < 0) {
                        log_warning("Cannot make a spare session for sandbox '%s', ignoring: %s", sb->name, errmsg);
                        return;
                }
                ws->spare = true;
                ws->spare_until_usec = now_usec() + s->cfg.spare_idle_seconds * 1000000ull;
                sb->spares++;
                live++;
                log_debug("Made spare session %s of sandbox '%s' at layer %u", ws->id, sb->name, ws->base_layer);
        }
}

/* Destroy the spares of sb (any sandbox if NULL) that match; returns how many. */
static unsigned spares_drop_if(Server *s, Sandbox *sb, bool stale_only, unsigned long long expired_before) {
        WorkspaceSession *ws, *next;
        unsigned n = 0;

        TAILQ_FOREACH_SAFE(ws, &s->sessions, link, next) {
                if (!ws->spare || (sb && ws->sandbox != sb))
                        continue;
                if (stale_only && spare_current(ws))
                        continue;
                if (expired_before && ws->spare_until_usec > expired_before)
                        continue;
                session_destroy(s, ws);
                n++;
        }
        return n;
}

void spares_drop_stale(Server *s, Sandbox *sb) {
        (void) spares_drop_if(s, sb, true, 0);
}

bool spare_evict(Server *s, Sandbox *sb) {
        WorkspaceSession *ws;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->spare && (!sb || ws->sandbox == sb)) {
                        session_destroy(s, ws);
                        return true;
                }
        return false;
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
        (void) spares_drop_if(s, NULL, false, now_usec());
}
