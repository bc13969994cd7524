/* Requests about workspace sessions and layers: create, finalize, list and
 * diff managed sessions; list a sandbox's layers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "control.h"
#include "core/publish.h"
#include "core/session.h"
#include "core/spare.h"
#include "log.h"
#include "sbx-limits.h"

int handle_session_create(Request *rq) {
        const Sbx__SessionCreate *req = rq->msg->session_create;
        WorkspaceSession *ws;
        char errmsg[512] = "";
        int r;

        spare_make_room(rq->server, rq->sandbox);
        r = session_new(rq->server, rq->sandbox, false, strcmp(req->finalize_policy, "destroy") != 0, &ws, errmsg,
                        sizeof(errmsg));
        if (r < 0)
                return request_error(rq, r, "%s", errmsg[0] ? errmsg : strerror(-r));
        log_info("Created managed workspace session %s of sandbox '%s'", ws->id, rq->sandbox->name);
        /* The answer waits until the session can be used. */
        session_answer_when_ready(ws, rq->client, rq->seq);
        return REPLY_DEFERRED;
}

static int find_session(Request *rq, const char *id, WorkspaceSession **ret) {
        *ret = session_find(rq->server, rq->sandbox, id);
        if (!*ret)
                return request_error(rq, -ENOENT, "no workspace session '%.80s' in sandbox '%s'", id,
                                     rq->sandbox->name);
        return 0;
}

/* What finalize answers, once the publication is done (off the loop); the
 * session may be gone by then, and the request too: the answer keeps copies. */
typedef struct FinalizeAnswer {
        Pending pending;
        Sbx__SessionFinalizeReply o;
        Sbx__SessionInfo info;
        Sbx__Publication pub;
        PublishResult res;
        bool publish;
        char id[33];
        char sandbox[65];
        char owner[64];
} FinalizeAnswer;

static void finalize_publication(FinalizeAnswer *a) {
        a->pub.published = a->res.published;
        a->pub.layer = a->res.layer;
        a->pub.owner = a->owner;
        a->pub.changed_paths = a->res.changed_paths;
        a->pub.n_conflicts = a->res.n_conflicts;
        a->pub.conflicts = a->res.conflicts;
        if (a->res.n_conflicts > 0)
                a->pub.error = (char *) "not published: these paths were changed by layers published after the "
                                        "session started; finalize again with overwrite, or discard";
        a->o.publication = &a->pub;
}

static void finalize_answered(Server *s, WorkspaceSession *ws, int r, PublishResult *res, void *userdata) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        FinalizeAnswer *a = userdata;

        a->res = *res;
        if (r == -ECANCELED)
                pending_answer_error(s, &a->pending, r, "workspace session %s was not published: %s", a->id,
                                     "its sandbox or sbxd went while it was being published");
        else if (r < 0)
                pending_answer_error(s, &a->pending, r, "cannot publish workspace session %s: %s; it is kept", a->id,
                                     a->res.error[0] ? a->res.error : strerror(-r));
        else {
                /* Refused: the session lives on, stopped, "conflicted". */
                if (a->res.n_conflicts > 0)
                        a->info.state = (char *) "conflicted";
                a->o.action = (char *) (a->res.n_conflicts > 0 ? "conflict" : a->publish ? "published" : "discarded");
                if (a->publish)
                        finalize_publication(a);
                a->o.session = &a->info;
                msg_reply_set(&reply, SBX__REPLY__BODY_SESSION_FINALIZE, &a->o);
                pending_answer(s, &a->pending, &reply);
        }
        pending_stop(&a->pending);
        publish_result_done(&a->res);
        free(a);
}

static void finalize_abandon(Server *s, Pending *p, bool cancelled) {
        /* The publication goes on; nobody waits for its answer any more. */
}

int handle_session_finalize(Request *rq) {
        const Sbx__SessionFinalize *req = rq->msg->session_finalize;
        FinalizeAnswer *a;
        WorkspaceSession *ws;
        int r;

        r = find_session(rq, req->workspace_session, &ws);
        if (r < 0)
                return r;
        if (ws->running > 0)
                return request_error(rq, -EBUSY,
                                     "workspace session %s still runs %u command(s); wait for them or cancel them "
                                     "with cancel_command, then finalize",
                                     ws->id, ws->running);
        if (ws->publishing)
                return request_error(rq, -EBUSY, "workspace session %s is being published; wait for its answer",
                                     ws->id);
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->publish = req->action[0] ? req->action[0] == 'p' : ws->publish_policy;
        a->o = (Sbx__SessionFinalizeReply) SBX__SESSION_FINALIZE_REPLY__INIT;
        a->info = (Sbx__SessionInfo) SBX__SESSION_INFO__INIT;
        a->pub = (Sbx__Publication) SBX__PUBLICATION__INIT;
        snprintf(a->owner, sizeof(a->owner), "workspace_session:%s", ws->id);
        strlcpy(a->id, ws->id, sizeof(a->id));
        strlcpy(a->sandbox, rq->sandbox->name, sizeof(a->sandbox));
        session_info(ws, &a->info);
        a->info.workspace_session = a->id;
        a->info.sandbox = a->sandbox;
        a->info.state = (char *) "finalized";
        /* Answered when the publication is done (at once for a discard). */
        pending_start(&a->pending, rq->client, rq->seq, finalize_abandon);
        r = session_finalize(rq->server, ws, a->publish, req->overwrite, finalize_answered, a);
        if (r < 0) {
                pending_stop(&a->pending);
                free(a);
                return request_error(rq, r, "cannot finalize workspace session %s: %s", req->workspace_session,
                                     strerror(-r));
        }
        return REPLY_DEFERRED;
}

int handle_session_list(Request *rq) {
        Server *s = rq->server;
        Sandbox *sb = rq->sandbox;
        Sbx__SessionListReply *o = REQUEST_NEW(rq, Sbx__SessionListReply, SBX__SESSION_LIST_REPLY__INIT);
        Sbx__SessionInfo *infos = request_alloc(rq, (sb->live_sessions + 1) * sizeof(*infos));
        Sbx__SessionInfo **ptrs = request_alloc(rq, (sb->live_sessions + 1) * sizeof(*ptrs));
        WorkspaceSession *ws;
        size_t n = 0;

        if (!o || !infos || !ptrs)
                return -ENOMEM;
        TAILQ_FOREACH(ws, &s->sessions, link) {
                if (ws->sandbox != sb || ws->spare || n >= sb->live_sessions)
                        continue;
                sbx__session_info__init(&infos[n]);
                session_info(ws, &infos[n]);
                ptrs[n] = &infos[n];
                n++;
        }
        o->n_sessions = n;
        o->sessions = ptrs;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_SESSION_LIST, o);
}

/* A diff is answered once it is computed, off the loop. */
typedef struct DiffAnswer {
        Pending pending;
        char id[33];
} DiffAnswer;

static void diff_answered(Server *s, int r, const ChangesDiff *d, const char *why, void *userdata) {
        DiffAnswer *a = userdata;
        Sbx__Reply reply = SBX__REPLY__INIT;

        if (r < 0)
                pending_answer_error(s, &a->pending, r, "cannot compute the changes of %s: %s", a->id,
                                     why[0] ? why : strerror(-r));
        else {
                msg_reply_set(&reply, SBX__REPLY__BODY_SESSION_DIFF, (void *) &d->reply);
                pending_answer(s, &a->pending, &reply);
        }
        pending_stop(&a->pending);
        free(a);
}

static void diff_abandon(Server *s, Pending *p, bool cancelled) {
        /* Nobody waits for the diff any more; it is dropped when computed. */
}

int handle_session_diff(Request *rq) {
        WorkspaceSession *ws;
        DiffAnswer *a;
        int r;

        r = find_session(rq, rq->msg->session_diff->workspace_session, &ws);
        if (r < 0)
                return r;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        strlcpy(a->id, ws->id, sizeof(a->id));
        pending_start(&a->pending, rq->client, rq->seq, diff_abandon);
        r = session_diff(rq->server, rq->sandbox, ws->id, diff_answered, a);
        if (r < 0) {
                pending_stop(&a->pending);
                free(a);
                return r;
        }
        return REPLY_DEFERRED;
}

static int listing_add_layer(uint32_t layer, const char *owner, uint32_t changed, int64_t created, void *userdata) {
        Sbx__LayerInfo info = SBX__LAYER_INFO__INIT;

        info.layer = layer;
        info.changed_paths = changed;
        info.created_unix = created;
        return listing_add(userdata, &info, owner);
}

int handle_layer_list(Request *rq) {
        Sbx__LayerListReply *o = REQUEST_NEW(rq, Sbx__LayerListReply, SBX__LAYER_LIST_REPLY__INIT);
        Listing *l = listing_new(sizeof(Sbx__LayerInfo));
        Sbx__LayerInfo **ptrs;
        size_t first = 0, n = 0;
        int r;

        if (l)
                request_own(rq, listing_free, l);
        if (!o || !l)
                return -ENOMEM;
        r = store_layer_foreach(rq->server->store, rq->sandbox->id, listing_add_layer, l);
        if (r < 0)
                return request_error(rq, r, "cannot list layers: %s", strerror(-r));
        ptrs = request_alloc(rq, (l->n + 1) * sizeof(*ptrs));
        if (!ptrs)
                return -ENOMEM;
        /* A page that fits in one frame; the client asks for the rest. */
        while (first < l->n && ((Sbx__LayerInfo *) listing_item(l, first))->layer < rq->msg->layer_list->start_layer)
                first++;
        for (size_t i = first; i < l->n && n < SBX_LAYERS_LISTED; i++) {
                Sbx__LayerInfo *info = listing_item(l, i);
                info->owner = l->strings[i];
                ptrs[n++] = info;
        }
        o->n_layers = n;
        o->layers = ptrs;
        o->more = first + n < l->n;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_LAYER_LIST, o);
}
