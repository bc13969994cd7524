/* Requests about sandboxes and sbxd itself: create, list and delete
 * sandboxes, status, garbage collection, owners' quotas. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "core/artifacts.h"
#include "core/claim.h"
#include "core/owner.h"
#include "core/layerquota.h"
#include "core/imagebuild.h"
#include "core/session.h"
#include "core/transcripts.h"
#include "data/transcript.h"
#include "fd-util.h"
#include "log.h"

int handle_sandbox_create(Request *rq) {
        char errmsg[400] = "";
        int r;

        /* The answer waits until the source is imported (core/sandbox.h). */
        r = sandbox_create(rq->server, rq->msg->sandbox_create, rq->client, rq->seq, errmsg, sizeof(errmsg));
        if (r < 0)
                return request_error(rq, r, "%s", errmsg[0] ? errmsg : strerror(-r));
        return REPLY_DEFERRED;
}

/* The transcript budgets as sb sees them; those of all only for root. */
static void sandbox_transcripts(const Server *s, const Sandbox *sb, bool root, Sbx__SandboxInfo *info) {
        info->transcript_bytes = sb->transcript_bytes;
        info->transcript_files = sb->transcript_files;
        info->transcripts_max_bytes = s->cfg.sandbox_transcripts_max_bytes;
        info->owner_transcript_bytes = transcripts_owner_bytes(s, sb->owner_uid);
        info->owner_transcripts_max_bytes = s->cfg.owner_transcripts_max_bytes;
        if (!root)
                return;
        info->all_transcript_bytes = s->transcript_bytes;
        info->all_transcripts_max_bytes = s->transcripts_max_bytes;
        info->all_transcript_files = s->transcript_files;
        info->all_transcripts_max_inodes = s->cfg.transcripts_max_inodes;
}

int handle_sandbox_list(Request *rq) {
        Server *s = rq->server;
        Sbx__SandboxListReply *list = REQUEST_NEW(rq, Sbx__SandboxListReply, SBX__SANDBOX_LIST_REPLY__INIT);
        Sbx__SandboxInfo *infos;
        Sbx__SandboxInfo **ptrs;
        Sandbox *sb;
        size_t n = 0, i = 0;
        int r;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                n++;
        infos = request_alloc(rq, (n ?: 1) * sizeof(*infos));
        ptrs = request_alloc(rq, (n ?: 1) * sizeof(*ptrs));
        if (!list || !infos || !ptrs)
                return -ENOMEM;
        TAILQ_FOREACH(sb, &s->sandboxes, link) {
                if (!sandbox_allows_client(sb, rq->client))
                        continue;
                sbx__sandbox_info__init(&infos[i]);
                sandbox_info(sb, &infos[i]);
                sandbox_transcripts(s, sb, rq->client->uid == 0, &infos[i]);
                r = layer_quota_info(s->store, &s->layer_limits, sb, &infos[i]);
                if (r < 0)
                        return request_error(rq, r, "cannot read the layer sizes of '%s': %s", sb->name, strerror(-r));
                ptrs[i] = &infos[i];
                i++;
        }
        list->n_sandboxes = i;
        list->sandboxes = ptrs;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_SANDBOX_LIST, list);
}

int handle_sandbox_delete(Request *rq) {
        const char *name = rq->msg->sandbox_delete->name;
        int r = sandbox_delete(rq->server, rq->sandbox);

        if (r < 0)
                return request_error(rq, r, "cannot delete sandbox '%s': %s", name, strerror(-r));
        return 0;
}

int handle_status(Request *rq) {
        Server *s = rq->server;
        Sbx__StatusReply *st = REQUEST_NEW(rq, Sbx__StatusReply, SBX__STATUS_REPLY__INIT);
        uid_t uid = rq->client->uid;
        bool all = uid == 0;
        const WorkspaceSession *ws;
        const Command *cmd;
        const Sandbox *sb;
        const Client *other;

        if (!st)
                return -ENOMEM;
        /* Anyone else gets the figures of their own sandboxes and connections, no more. */
        st->version = (char *) SBX_VERSION;
        st->proto_version = SBX_PROTO_VERSION;
        st->pid = all ? getpid() : 0;
        st->uptime_seconds = (double) (now_usec() - s->started_usec) / 1e6;
        st->cgroup_backend = (char *) (s->cgroups ? cgroup_backend_to_string(cgroup_manager_backend(s->cgroups)) : "none");
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                st->sandboxes += sandbox_allows(sb, uid) && !sandbox_is_warm_claim(sb);
        TAILQ_FOREACH(ws, &s->sessions, link)
                if (sandbox_allows(ws->sandbox, uid) && !sandbox_is_warm_claim(ws->sandbox)) {
                        st->spare_sessions += ws->spare;
                        st->live_sessions += !ws->spare;
                }
        TAILQ_FOREACH(cmd, &s->commands, link)
                st->running_commands += !cmd->finished && cmd->session && sandbox_allows(cmd->session->sandbox, uid);
        TAILQ_FOREACH(other, &s->clients, link)
                st->clients += all || other->uid == uid;
        st->state_dir = (char *) (all ? s->cfg.state_dir : "");
        st->run_dir = (char *) (all ? s->cfg.run_dir : "");
        st->caller_only = !all;
        artifacts_sweep(s);
        (void) store_artifacts_usage(s->store, all ? -1 : (int64_t) uid, &st->artifacts, &st->artifact_bytes,
                                     &st->artifact_raw_bytes);
        st->artifacts_max_bytes = s->cfg.runtime_artifacts_max_bytes;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_STATUS, st);
}

/* A transcript stays while its command is recorded and it was not evicted
 * (a deleted sandbox's go after the commit of the delete, an evicted one's
 * after the record says so; a crash in between leaves them). */
static int transcript_recorded(const char *id, void *userdata) {
        Server *s = userdata;
        return store_transcript_kept(s->store, id);
}

int handle_gc(Request *rq) {
        Server *s = rq->server;
        Sbx__GcReply *o = REQUEST_NEW(rq, Sbx__GcReply, SBX__GC_REPLY__INIT);
        unsigned layers = 0, transcripts = 0, sandboxes, ranges;
        uint64_t bytes = 0, image_bytes = 0;
        Sandbox *sb;
        int r;

        if (!o)
                return -ENOMEM;
        r = transcripts_collect(s->transcripts_fd, transcript_recorded, s, &transcripts, &bytes);
        if (r < 0)
                return request_error(rq, r, "cannot collect transcripts: %s", strerror(-r));
        sandboxes = sandbox_dirs_collect(s);
        TAILQ_FOREACH(sb, &s->sandboxes, link) {
                unsigned removed = 0;
                if (snapshot_collect(sb, &removed) >= 0)
                        layers += removed;
                /* Removed now, as gc says (a publication would remove them later, off the loop). */
                (void) snapshot_trash_empty(sb->layers_fd);
        }
        ranges = sandbox_ranges_collect(s);
        o->images_removed = images_collect(s, &image_bytes);
        bytes += image_bytes;
        log_info("Garbage collection: %u transcripts (%llu bytes), %u directories of deleted sandboxes, %u layer "
                 "directories and %u image builds removed, %u host id ranges freed",
                 transcripts, (unsigned long long) bytes, sandboxes, layers, o->images_removed, ranges);
        o->transcripts_removed = transcripts;
        o->layers_removed = layers;
        o->bytes_freed = bytes;
        o->sandboxes_removed = sandboxes;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_GC, o);
}

static int cmp_uid(const void *a, const void *b) {
        uid_t x = *(const uid_t *) a, y = *(const uid_t *) b;
        return x < y ? -1 : x > y;
}

/* The owners of all sandboxes (and imports), each once, in order. */
static size_t owners_all(Server *s, uid_t *uids) {
        const Sandbox *sb;
        const Import *imp;
        size_t n = 0, k = 0;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                uids[n++] = sb->owner_uid;
        TAILQ_FOREACH(imp, &s->imports, link)
                uids[n++] = imp->sandbox->owner_uid;
        qsort(uids, n, sizeof(*uids), cmp_uid);
        for (size_t i = 0; i < n; i++)
                if (k == 0 || uids[k - 1] != uids[i])
                        uids[k++] = uids[i];
        return k;
}

/* One owner's use against every row of owner_quotas[] (core/owner.h). */
static void owner_usage(Server *s, uid_t uid, Sbx__OwnerUsage *o, Sbx__OwnerQuota *q, Sbx__OwnerQuota **ptrs) {
        sbx__owner_usage__init(o);
        o->uid = uid;
        o->exempt = owner_exempt(uid);
        for (size_t i = 0; i < n_owner_quotas; i++) {
                const OwnerQuota *row = &owner_quotas[i];
                sbx__owner_quota__init(&q[i]);
                q[i].name = (char *) row->key;
                q[i].what = (char *) row->what;
                q[i].used = row->used(s, uid);
                q[i].limit = owner_quota_limit(s, row);
                q[i].bytes = row->bytes;
                ptrs[i] = &q[i];
        }
        o->n_quotas = n_owner_quotas;
        o->quotas = ptrs;
}

int handle_owner_list(Request *rq) {
        const Sbx__OwnerList *req = rq->msg->owner_list;
        Server *s = rq->server;
        uid_t caller = rq->client->uid;
        Sbx__OwnerListReply *o = REQUEST_NEW(rq, Sbx__OwnerListReply, SBX__OWNER_LIST_REPLY__INIT);
        size_t n = 1, room = 1;
        const Sandbox *sb;
        const Import *imp;
        Sbx__OwnerUsage *usage, **ptrs;
        Sbx__OwnerQuota *quotas, **quota_ptrs;
        uid_t *uids;

        if (req->has_uid && req->uid != caller && caller != 0)
                return request_error(rq, -EPERM, "permission denied: only root may see the quotas of another owner "
                                     "(uid %u); yours are uid %u's", req->uid, (unsigned) caller);
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                room++;
        TAILQ_FOREACH(imp, &s->imports, link)
                room++;
        uids = request_alloc(rq, room * sizeof(*uids));
        if (!o || !uids)
                return -ENOMEM;
        /* Root sees every owner; anyone else, and owner show, one. */
        if (req->has_uid || caller != 0)
                uids[0] = req->has_uid ? req->uid : caller;
        else
                n = owners_all(s, uids);
        usage = request_alloc(rq, (n ?: 1) * sizeof(*usage));
        ptrs = request_alloc(rq, (n ?: 1) * sizeof(*ptrs));
        quotas = request_alloc(rq, (n ?: 1) * n_owner_quotas * sizeof(*quotas));
        quota_ptrs = request_alloc(rq, (n ?: 1) * n_owner_quotas * sizeof(*quota_ptrs));
        if (!usage || !ptrs || !quotas || !quota_ptrs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                owner_usage(s, uids[i], &usage[i], quotas + i * n_owner_quotas, quota_ptrs + i * n_owner_quotas);
                ptrs[i] = &usage[i];
        }
        o->n_owners = n;
        o->owners = ptrs;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_OWNER_LIST, o);
}
