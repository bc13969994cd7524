/* Requests about sandboxes and sbxd itself: create, list and delete
 * sandboxes, status, garbage collection. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "core/imagebuild.h"
#include "core/session.h"
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

int handle_sandbox_list(Request *rq) {
        Server *s = rq->server;
        Sbx__SandboxListReply *list = REQUEST_NEW(rq, Sbx__SandboxListReply, SBX__SANDBOX_LIST_REPLY__INIT);
        Sbx__SandboxInfo *infos;
        Sbx__SandboxInfo **ptrs;
        Sandbox *sb;
        size_t n = 0, i = 0;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                n++;
        infos = request_alloc(rq, (n ?: 1) * sizeof(*infos));
        ptrs = request_alloc(rq, (n ?: 1) * sizeof(*ptrs));
        if (!list || !infos || !ptrs)
                return -ENOMEM;
        TAILQ_FOREACH(sb, &s->sandboxes, link) {
                if (!sandbox_allows(sb, rq->client->uid))
                        continue;
                sbx__sandbox_info__init(&infos[i]);
                sandbox_info(sb, &infos[i]);
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
                st->sandboxes += sandbox_allows(sb, uid);
        TAILQ_FOREACH(ws, &s->sessions, link)
                if (sandbox_allows(ws->sandbox, uid)) {
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
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_STATUS, st);
}

/* A transcript stays while its command is recorded (a deleted sandbox's go
 * after the commit of the delete; a crash in between leaves them). */
static int transcript_recorded(const char *id, void *userdata) {
        Server *s = userdata;
        return store_command_exists(s->store, id);
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
