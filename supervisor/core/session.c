#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/owner.h"
#include "array.h"
#include "core/session.h"
#include "core/egress-proxy.h"
#include "core/artifacts.h"
#include "core/transcripts.h"
#include "core/snapshot.h"
#include "core/secret.h"
#include "data/layer.h"
#include "fd-util.h"
#include "log.h"
#include "msg.h"
#include "os/image.h"
#include "os/livemount.h"
#include "sbx-limits.h"

static const char *const command_env[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root", "USER=root", "LOGNAME=root", "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1",
        "PAGER=cat", "GIT_PAGER=cat", "PYTHONDONTWRITEBYTECODE=1",
};

/* A client waiting on a command: answered when it ends or at deadline_usec. */
struct Waiter {
        Pending pending;
        bool progress;                  /* sent Progress frames while the session waits for its image */
        uint32_t progress_n;
        TAILQ_ENTRY(Waiter) command_link;
        Command *command;
        unsigned long long call_start_usec;
        unsigned long long deadline_usec;
};

/* The publication of a session's upper directory as its sandbox's next
 * layer, off the loop (core/publish.h, common/workpool.h). The session is
 * stopped meanwhile; if it goes (session_end), ws is NULL-ed and the
 * publication is abandoned. */
struct SessionPublish {
        Work work;
        Server *server;
        WorkspaceSession *ws;
        Publication *pub;
        bool overwrite;
        FinalizeDone answer;
        void *userdata;
};

static void session_dispatch_worker(Server *s, EventSource *src, uint32_t events);
static void session_dispatch_pidfd(Server *s, EventSource *src, uint32_t events);
static void session_dispatch_setup(Server *s, EventSource *src, uint32_t events);
static void command_record_end(Server *s, Command *c, bool exited, int exit_code, int sig);
static void command_settle(Server *s, Command *c);
static void waiter_answer(Server *s, Waiter *w);
static void session_setup_failed(Server *s, WorkspaceSession *ws, int r, const char *why);
static void command_redact_flush(Server *s, Command *c);

static int session_send(WorkspaceSession *ws, Sbx__MsgType type, void *body) {
        Sbx__Msg m;

        /* The worker reads promptly; a full socket means a wedged worker. */
        msg_init(&m, type, body);
        return wire_send(ws->sock_src.fd, &m, 0, NULL, 0);
}

unsigned sessions_live(Server *s) {
        WorkspaceSession *ws;
        unsigned n = 0;

        TAILQ_FOREACH(ws, &s->sessions, link)
                n++;
        return n;
}

/* What the sandbox's stopped sessions hold in memory: their tmpfs pages,
 * charged to their cgroups, count against the sandbox's memory limit. */
static uint64_t stopped_memory(Server *s, const Sandbox *sb) {
        const WorkspaceSession *ws;
        uint64_t n = 0;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->sandbox == sb && ws->state == SESSION_STOPPED)
                        n += session_memory_bytes(ws);
        return n;
}

static int session_check_limits(Server *s, const Sandbox *sb, char *err, size_t size) {
        uint64_t held, procs;

        if (sessions_live(s) >= SBX_MAX_LIVE_SESSIONS) {
                snprintf(err, size, "too many live workspace sessions (limit %u)", SBX_MAX_LIVE_SESSIONS);
                return -EAGAIN;
        }
        if (sb->live_sessions >= SBX_MAX_SESSIONS_PER_SANDBOX) {
                snprintf(err, size, "sandbox '%s' has too many workspace sessions (limit %u); finalize some", sb->name,
                         SBX_MAX_SESSIONS_PER_SANDBOX);
                return -EAGAIN;
        }
        /* The sandbox's cgroup holds its stopped sessions' tmpfs pages too: a session
         * started without room would only meet the OOM killer. */
        held = stopped_memory(s, sb);
        if (held + SBX_SESSION_START_MEMORY > sb->memory_bytes) {
                snprintf(err, size, "sandbox '%s' has no memory left for a session: its stopped workspace sessions "
                         "hold %llu bytes of unpublished changes, its memory limit is %llu bytes and a session needs "
                         "%u more; finalize or discard them, or wait until those of failed publications are discarded "
                         "(failed_session_grace_seconds)",
                         sb->name, (unsigned long long) held, (unsigned long long) sb->memory_bytes,
                         SBX_SESSION_START_MEMORY);
                return -ENOMEM;
        }
        /* A new session's first process would not fit (cgroup_session_attach). */
        if (sb->cgroup && cgroup_sandbox_processes(sb->cgroup, &procs) >= 0 && procs >= sb->pids_max) {
                snprintf(err, size,
                         "sandbox '%s' is at its pids limit: %llu of %u processes and threads, its sessions' workers "
                         "included; wait for its commands to end",
                         sb->name, (unsigned long long) procs, sb->pids_max);
                return -EAGAIN;
        }
        if (sb->egress != EGRESS_NONE) {
                char why[200];

                if (!egress_proxy_available(s, why, sizeof(why))) {
                        snprintf(err, size, "sandbox '%s' has egress policy %s, but %s", sb->name,
                                 egress_policy_to_string(sb->egress), why);
                        return -EHOSTUNREACH;
                }
        }
        return owner_quota_check(s, "owner_sessions_max", sb->owner_uid, 1, err, size);
}

/* What the spawner needs to make ws's child. */
static int session_spawn_params(Server *s, const WorkspaceSession *ws, SpawnParams *p, char *err, size_t size) {
        const Sandbox *sb = ws->sandbox;
        _cleanup_free_ char *lowerdirs = NULL;
        int r;

        r = snapshot_lowerdirs(ws->base.squashed, ws->base.top, &lowerdirs);
        if (r < 0)
                return r;
        *p = (SpawnParams) {
                .uid_base = sb->uid_base,
                .uid_count = sb->uid_count,
                .disk_bytes = sb->disk_bytes ?: s->cfg.session_disk_bytes,
                .own_system = ws->image.root_dir != NULL,
                .egress_listen = sb->egress != EGRESS_NONE,
        };
        if (ws->job)
                strlcpy(p->cwd, SESSION_JOB_CWD, sizeof(p->cwd));
        if (strlcpy(p->session_id, ws->id, sizeof(p->session_id)) >= sizeof(p->session_id) ||
            strlcpy(p->run_dir, s->cfg.run_dir, sizeof(p->run_dir)) >= sizeof(p->run_dir) ||
            strlcpy(p->image_dir, ws->image.root_dir ?: s->image_dir, sizeof(p->image_dir)) >= sizeof(p->image_dir) ||
            strlcpy(p->lowerdirs, lowerdirs, sizeof(p->lowerdirs)) >= sizeof(p->lowerdirs) ||
            strlcpy(p->layers_dir, sb->layers_path, sizeof(p->layers_dir)) >= sizeof(p->layers_dir)) {
                snprintf(err, size, "cannot start a workspace session: a path or the layer list is too long");
                return -ENAMETOOLONG;
        }
        return 0;
}

/* sb->cgroup, made with the sandbox's limits for its first session. */
static int sandbox_cgroup(Server *s, Sandbox *sb, char *err, size_t size) {
        CgroupLimits limits = {
                .memory_bytes = sb->memory_bytes,
                .pids_max = sb->pids_max,
                .cpu_weight = sb->cpu_weight,
        };
        int r;

        if (sb->cgroup)
                return 0;
        r = cgroup_sandbox_new(s->cgroups, sb->id, &limits, &sb->cgroup);
        if (r < 0)
                snprintf(err, size, "cannot create the sandbox's cgroup: %s", strerror(-r));
        return r;
}

static WorkspaceSession *session_alloc(Sandbox *sb, bool automatic, bool publish_policy) {
        static uint64_t serial;
        WorkspaceSession *ws = calloc(1, sizeof(*ws));

        if (!ws)
                return NULL;
        ws->serial = ++serial;
        ws->sandbox = sb;
        ws->automatic = automatic;
        ws->publish_policy = publish_policy;
        ws->created_unix = time(NULL);
        ws->upper_fd = ws->workspace_fd = ws->kept_fd = ws->root_fd = ws->work_upper_fd = ws->work_live_fd = -EBADF;
        ws->live_fds[0] = ws->live_fds[1] = -EBADF;
        /* Every fd -EBADF: a session that never spawned (restored) closes its spawn state too. */
        ws->spawn = (SpawnState) { .pidfd = -EBADF, .sync = -EBADF, .sock = -EBADF, .upper_fd = -EBADF,
                                   .workspace_fd = -EBADF, .egress_fd = -EBADF, .root_fd = -EBADF,
                                   .tmpfs_fds = { -EBADF, -EBADF } };
        ws->egress_fd = -EBADF;
        ws->sock_src.fd = ws->pidfd_src.fd = ws->setup_src.fd = -EBADF;
        ws->sock_src.dispatch = session_dispatch_worker;
        ws->pidfd_src.dispatch = session_dispatch_pidfd;
        ws->setup_src.dispatch = session_dispatch_setup;
        TAILQ_INIT(&ws->commands);
        return ws;
}

static int session_prepare(void *userdata, int upper_fd, int root_fd) {
        WorkspaceSession *ws = userdata;

        return ws->fill ? ws->fill(ws, upper_fd, root_fd) : 0;
}

/* A session that may be kept at a stop (core/kept.h: a managed session or
 * a claim's) gets its tmpfs (and a claim's /tmp) from sbxd, which keeps a
 * clone of each (os/livemount.h); an automatic one mounts its own. */
static int session_tmpfs(WorkspaceSession *ws, const SpawnParams *p, int ret_fds[SETUP_TMPFS_MAX]) {
        size_t n = ws->sandbox->claim ? 2 : 1;

        if (ws->automatic || ws->spare || ws->job)
                return 0;
        for (size_t i = 0; i < n; i++) {
                int r = session_tmpfs_new(i == 0 ? "sbx-session" : "sbx-tmp", p->disk_bytes, p->uid_base,
                                          i == 0 ? 0755 : 01777, &ret_fds[i], &ws->live_fds[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The spawner makes ws's child; it sets itself up while sbxd serves others
 * (commands wait for READY). On failure ret_error says why. */
static int session_spawn(Server *s, WorkspaceSession *ws, char *ret_error, size_t error_size) {
        char why[200] = "";
        int tmpfs[SETUP_TMPFS_MAX] = { -EBADF, -EBADF };
        SpawnParams p;
        SpawnState st;
        int r;

        r = session_spawn_params(s, ws, &p, ret_error, error_size);
        if (r < 0)
                return r;
        r = session_tmpfs(ws, &p, tmpfs);
        if (r < 0) {
                safe_close(tmpfs[0]);
                snprintf(ret_error, error_size, "cannot make the session's tmpfs: %s", strerror(-r));
                return r;
        }
        r = session_spawn_begin(s->spawner, &p, ws->cgroup, &st, why, sizeof(why));
        if (r < 0) {
                safe_close(tmpfs[0]);
                safe_close(tmpfs[1]);
                log_error_errno(r, "Failed to start workspace session %s of sandbox '%s': %s", ws->id,
                                ws->sandbox->name, why);
                snprintf(ret_error, error_size, "cannot start a workspace session: %s", why);
                return r;
        }
        ws->start_usec = now_usec();
        memcpy(st.tmpfs_fds, tmpfs, sizeof(tmpfs));
        st.prepare = session_prepare;
        st.prepare_userdata = ws;
        if (ws->mounts) {
                st.mounts = &ws->mounts->names;
                st.mount_fds = ws->mounts->fds;
        }
        (void) fd_nonblock(st.sock, true);
        r = server_watch(s, &ws->sock_src, TAKE_FD(st.sock), EPOLLIN);
        if (r >= 0)
                r = server_watch(s, &ws->setup_src, TAKE_FD(st.sync), EPOLLIN);
        ws->spawn = st;
        if (r < 0)
                snprintf(ret_error, error_size, "cannot watch the session: %s", strerror(-r));
        return r;
}

/* Its image's build is at another step: the waiters that asked are told. */
static void session_image_progress(Server *s, ImageWaiter *w, const char *image, const char *step) {
        WorkspaceSession *ws = container_of(w, WorkspaceSession, image_wait);
        char text[SBX_NAME_MAX + SBX_IMAGE_PROGRESS_MAX + 64];
        Command *c;
        Waiter *wt;

        snprintf(text, sizeof(text), "image '%s': building, step %s", image, step);
        TAILQ_FOREACH(c, &ws->commands, session_link)
                TAILQ_FOREACH(wt, &c->waiters, command_link)
                        if (wt->progress)
                                pending_progress(s, &wt->pending, text, ++wt->progress_n);
}

/* Its image is built (r == 0) or could not be: the session starts or fails. */
static void session_image_done(Server *s, ImageWaiter *w, int r, const char *why) {
        WorkspaceSession *ws = container_of(w, WorkspaceSession, image_wait);
        char err[300] = "";

        if (r >= 0)
                r = image_acquire(s, ws->sandbox->image, w, &ws->image, err, sizeof(err));
        if (r == 0) /* rebuilt meanwhile (its definition changed): waiting again */
                return;
        if (r > 0) {
                image_use_hold(s, ws->image.digest);
                r = session_spawn(s, ws, err, sizeof(err));
        }
        if (r < 0)
                session_setup_failed(s, ws, r, why ? why : err);
}

static int session_new_with(Server *s, Sandbox *sb, bool automatic, bool publish_policy, bool job,
                            const SessionMounts *mounts, WorkspaceSession **ret, char *ret_error, size_t error_size) {
        /* The session's own limits, for its end reasons; the sandbox's
         * cgroup above holds them for all its sessions together, and its CPU
         * weight. */
        CgroupLimits limits = {
                .memory_bytes = sb->memory_bytes,
                .pids_max = sb->pids_max,
        };
        WorkspaceSession *ws;
        int r;

        r = session_check_limits(s, sb, ret_error, error_size);
        if (r < 0)
                return r;
        ws = session_alloc(sb, automatic, publish_policy);
        if (!ws)
                return -ENOMEM;
        ws->base = (SnapshotHold) { .squashed = sb->squashed, .top = sb->top_layer };
        ws->job = job;
        ws->mounts = mounts;
        r = random_id("ws-", ws->id, sizeof(ws->id));
        if (r >= 0 && s->cgroups) {
                r = sandbox_cgroup(s, sb, ret_error, error_size);
                if (r >= 0) {
                        r = cgroup_session_new(sb->cgroup, &limits, &ws->cgroup);
                        if (r < 0)
                                snprintf(ret_error, error_size, "cannot create the session's cgroup: %s", strerror(-r));
                }
        }
        if (r < 0) {
                if (ws->cgroup)
                        cgroup_session_release(ws->cgroup);
                free(ws);
                return r;
        }
        ws->state = SESSION_SETUP;
        snapshot_hold(sb, &ws->base);
        TAILQ_INSERT_TAIL(&s->sessions, ws, link);
        sb->live_sessions++;
        /* A built image first: the session starts once it is built (lazily, here). */
        r = 1;
        if (sb->image[0] && strcmp(sb->image, SBX_IMAGE_DEFAULT_NAME) != 0) {
                ws->image_wait.done = session_image_done;
                ws->image_wait.progress = session_image_progress;
                r = image_acquire(s, sb->image, &ws->image_wait, &ws->image, ret_error, error_size);
                if (r > 0)
                        image_use_hold(s, ws->image.digest);
        }
        if (r > 0)
                r = session_spawn(s, ws, ret_error, error_size);
        if (r < 0) {
                session_destroy(s, ws);
                return r;
        }
        *ret = ws;
        return 0;
}

int session_new(Server *s, Sandbox *sb, bool automatic, bool publish_policy, WorkspaceSession **ret,
                char *ret_error, size_t error_size) {
        return session_new_with(s, sb, automatic, publish_policy, false, NULL, ret, ret_error, error_size);
}

int session_new_job(Server *s, Sandbox *sb, const SessionMounts *mounts, WorkspaceSession **ret, char *ret_error,
                    size_t error_size) {
        return session_new_with(s, sb, false, false, true, mounts, ret, ret_error, error_size);
}

int session_job_attach(WorkspaceSession *ws, const SessionMounts *inputs) {
        /* No inputs: a spare still being set up serves as well. */
        if (inputs->names.n == 0)
                return 0;
        if (ws->state != SESSION_READY)
                return -EBUSY;
        return session_attach_mounts(ws->pidfd_src.fd, &inputs->names, inputs->fds);
}

WorkspaceSession *session_find(Server *s, const Sandbox *sb, const char *id) {
        WorkspaceSession *ws;
        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->sandbox == sb && !ws->spare && strcmp(ws->id, id) == 0)
                        return ws;
        return NULL;
}

static void creator_abandon(Server *s, Pending *p, bool cancelled) {
        /* The session goes on; nobody waits for it any more. */
}

void session_answer_when_ready(WorkspaceSession *ws, Client *c, uint32_t seq) {
        pending_start(&ws->creator, c, seq, creator_abandon);
}

static void session_answer_creator(Server *s, WorkspaceSession *ws) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SessionInfo info = SBX__SESSION_INFO__INIT;

        if (!pending_active(&ws->creator))
                return;
        session_info(ws, &info);
        msg_reply_set(&reply, SBX__REPLY__BODY_SESSION, &info);
        pending_answer(s, &ws->creator, &reply);
}

static const char *session_state_name(const WorkspaceSession *ws) {
        switch (ws->state) {
        case SESSION_SETUP:
        case SESSION_SPAWNING:
                return "starting";
        case SESSION_READY:
                return "live";
        case SESSION_STOPPED:
                return ws->conflicted ? "conflicted" : "stopped";
        default:
                return "finalized";
        }
}

uint64_t session_memory_bytes(const WorkspaceSession *ws) {
        struct statfs st;

        /* The session's own tmpfs; anything else (a unit test's directory) holds no memory of it. */
        if (ws->upper_fd < 0 || fstatfs(ws->upper_fd, &st) < 0 || st.f_type != TMPFS_MAGIC || st.f_blocks < st.f_bfree)
                return 0;
        return (uint64_t) (st.f_blocks - st.f_bfree) * (uint64_t) st.f_bsize;
}

void session_info(const WorkspaceSession *ws, Sbx__SessionInfo *o) {
        o->workspace_session = (char *) ws->id;
        o->sandbox = (char *) ws->sandbox->name;
        o->finalize_policy = (char *) (ws->publish_policy ? "publish_then_destroy" : "destroy");
        o->automatic = ws->automatic;
        o->state = (char *) session_state_name(ws);
        o->base_layer = ws->base.top;
        o->created_unix = ws->created_unix;
        o->running_commands = ws->running;
        o->discard_unix = ws->discard_unix;
        o->memory_bytes = session_memory_bytes(ws);
}

static void session_kill_worker(Server *s, WorkspaceSession *ws) {
        if (ws->pidfd_src.fd < 0)
                return;
        pidfd_kill_wait(ws->pidfd_src.fd);
        server_unwatch(s, &ws->pidfd_src);
}

/* No worker any more: whatever still ran died with it. The changes stay (upper_fd).
 * keep_worker: the worker alone is left; it is ended later (session_end), and
 * no more events of it are handled. */
static void session_stop(Server *s, WorkspaceSession *ws, bool keep_worker) {
        Command *c;

        pending_answer_error(s, &ws->creator, -ECANCELED, "cannot start a workspace session: %s",
                             "it stopped before it was ready");
        if (!keep_worker)
                session_kill_worker(s, ws);
        egress_proxy_detach(s, ws);
        server_unwatch(s, &ws->sock_src);
        server_unwatch(s, &ws->setup_src);
        ws->spawn.sync = ws->spawn.pidfd = ws->spawn.sock = -EBADF; /* watched, now closed */
        ws->spawn.pid = 0;
        /* Stopped during set-up: whatever upper it got is still its upper. */
        if (ws->upper_fd < 0 && ws->spawn.upper_fd >= 0) {
                ws->upper_fd = TAKE_FD(ws->spawn.upper_fd);
                ws->workspace_fd = TAKE_FD(ws->spawn.workspace_fd);
                ws->root_fd = TAKE_FD(ws->spawn.root_fd);
        }
        spawn_state_done(&ws->spawn);
        TAILQ_FOREACH(c, &ws->commands, session_link)
                if (!c->finished)
                        command_record_end(s, c, false, 0, SIGKILL);
        if (ws->state != SESSION_DEAD)
                ws->state = SESSION_STOPPED;
}

/* Its PID 1 is gone (or is waited for here): nothing of the session is left
 * but its memory, which sessions_reap frees. */
static void session_release(Server *s, WorkspaceSession *ws) {
        Sandbox *sb = TAKE_PTR(ws->sandbox);
        unsigned removed;

        session_kill_worker(s, ws);
        if (ws->cgroup)
                ws->cgroup = cgroup_session_release(ws->cgroup);
        if (ws->image.root_dir)
                image_use_release(s, ws->image.digest);
        image_use_done(&ws->image);
        /* Layers it kept from compaction may go now. */
        snapshot_release(sb, &ws->base);
        (void) snapshot_collect(sb, &removed);
        log_debug("Workspace session %s is gone", ws->id);
        TAILQ_INSERT_TAIL(&s->dead, ws, link);
}

/* A box's directory and variables (command_start_at), and its terminal
 * (command_start_pty; 0x0: none). */
typedef struct CommandPlace {
        const char *cwd;
        char *const *env;
        size_t n_env;
        TerminalSize pty;
} CommandPlace;

static void command_place_free(Command *c) {
        for (size_t i = 0; i < c->n_env; i++)
                free(c->env[i]);
        free(c->env);
        free(c->cwd);
}

static int command_place_set(Command *c, const CommandPlace *p) {
        if (!p)
                return 0;
        if (p->n_env > SBX_BOX_ENV_MAX)
                return -E2BIG;
        c->pty = p->pty;
        c->cwd = strdup(p->cwd);
        c->env = calloc(p->n_env ?: 1, sizeof(char *));
        if (!c->cwd || !c->env)
                return -ENOMEM;
        for (; c->n_env < p->n_env; c->n_env++)
                if (!(c->env[c->n_env] = strdup(p->env[c->n_env])))
                        return -ENOMEM;
        return 0;
}

/* c in the server's list it belongs to now: ended and waited on by nobody,
 * or not (core/server.h). */
static void command_file(Server *s, Command *c) {
        bool ended = c->finished && TAILQ_EMPTY(&c->waiters);

        if (ended == c->in_ended)
                return;
        if (ended) {
                TAILQ_REMOVE(&s->commands, c, link);
                TAILQ_INSERT_TAIL(&s->ended_commands, c, link);
                s->n_ended_commands++;
        } else {
                TAILQ_REMOVE(&s->ended_commands, c, link);
                TAILQ_INSERT_TAIL(&s->commands, c, link);
                s->n_ended_commands--;
        }
        c->in_ended = ended;
}

static void command_free(Server *s, Command *c) {
        if (c->in_ended) {
                TAILQ_REMOVE(&s->ended_commands, c, link);
                s->n_ended_commands--;
        } else
                TAILQ_REMOVE(&s->commands, c, link);
        if (c->capture) {
                output_capture_done(&c->capture[0]);
                output_capture_done(&c->capture[1]);
                free(c->capture);
        }
        runtime_run_free(c->run);
        for (size_t i = 0; i < ELEMENTSOF(c->redact); i++)
                redactor_free(c->redact[i]);
        transcript_free(c->transcript);
        egress_audit_done(&c->egress);
        command_place_free(c);
        free(c->cmd);
        free(c);
}

/* The session ends: its waiters are answered (with the publication, if any),
 * its commands go, and a worker still running is killed; the kernel's
 * teardown of the session's namespaces and mounts is not waited for here:
 * the session waits in s->ending until its pidfd says PID 1 is gone.
 * refill_spares: the sandbox's spares are made at the next tick (core/spare.h). */
static void session_end(Server *s, WorkspaceSession *ws, bool refill_spares) {
        WorkspaceSession *other;
        Command *c;

        pending_answer_error(s, &ws->creator, -ECANCELED, "cannot start a workspace session: %s",
                             "it ended before it was ready");
        image_waiter_cancel(&ws->image_wait);
        ws->state = SESSION_DEAD;
        TAILQ_FOREACH(other, &s->sessions, link)
                if (other->seed == ws)
                        other->seed = NULL;
        if (ws->publishing) {
                /* Its publication is abandoned when its work is done. */
                ws->publishing->ws = NULL;
                ws->publishing = NULL;
        }
        while ((c = TAILQ_FIRST(&ws->commands))) {
                Waiter *w;
                TAILQ_REMOVE(&ws->commands, c, session_link);
                while ((w = TAILQ_FIRST(&c->waiters)))
                        waiter_answer(s, w);
                c->session = NULL;
                command_free(s, c);
        }
        /* Their last close frees the session's tmpfs: not on the loop. */
        server_close_later(s, TAKE_FD(ws->upper_fd));
        server_close_later(s, TAKE_FD(ws->workspace_fd));
        for (size_t i = 0; i < ELEMENTSOF(ws->live_fds); i++)
                server_close_later(s, TAKE_FD(ws->live_fds[i]));
        server_close_later(s, TAKE_FD(ws->work_upper_fd));
        server_close_later(s, TAKE_FD(ws->work_live_fd));
        if (ws->kept_fd >= 0) {
                int r = ws->kept_live ? live_session_remove(s->cfg.run_dir, ws->sandbox->id, ws->kept_fd, ws->id)
                                      : tree_remove_at(ws->kept_fd, ws->id);
                if (r < 0)
                        log_warning_errno(r, "Failed to remove the kept changes of %s, 'sbxctl gc' retries: %m",
                                          ws->id);
                ws->kept_fd = safe_close(ws->kept_fd);
        }
        ws->root_fd = safe_close(ws->root_fd);
        ws->sandbox->live_sessions--;
        if (ws->spare)
                ws->sandbox->spares--;
        ws->spare = false;
        ws->sandbox->refill_spares |= refill_spares;
        TAILQ_REMOVE(&s->sessions, ws, link);
        /* A frozen one (a box's, core/box.h) takes SIGKILL only once thawed. */
        if (ws->cgroup)
                (void) cgroup_session_freeze(ws->cgroup, false);
        if (ws->pidfd_src.fd >= 0 && syscall(SYS_pidfd_send_signal, ws->pidfd_src.fd, SIGKILL, NULL, 0) >= 0) {
                TAILQ_INSERT_TAIL(&s->ending, ws, link);
                return;
        }
        session_release(s, ws);
}

void session_destroy(Server *s, WorkspaceSession *ws) {
        if (ws->state == SESSION_DEAD)
                return;
        /* Nothing to publish: the worker and everything else are killed in session_end. */
        session_stop(s, ws, true);
        session_end(s, ws, false);
}

void session_stop_worker(Server *s, WorkspaceSession *ws) {
        session_stop(s, ws, false);
}

int session_restore(Server *s, Sandbox *sb, const char *id, bool publish_policy, int64_t created_unix,
                    uint32_t squashed, uint32_t top, int upper_fd, int kept_fd, bool kept_live) {
        WorkspaceSession *ws = session_alloc(sb, false, publish_policy);

        if (!ws) {
                safe_close(upper_fd);
                safe_close(kept_fd);
                return -ENOMEM;
        }
        strlcpy(ws->id, id, sizeof(ws->id));
        ws->created_unix = created_unix;
        ws->state = SESSION_STOPPED;
        ws->upper_fd = upper_fd;
        ws->kept_fd = kept_fd;
        ws->kept_live = kept_live;
        snapshot_hold(sb, &ws->base);
        ws->base.squashed = squashed;
        ws->base.top = top;
        TAILQ_INSERT_TAIL(&s->sessions, ws, link);
        sb->live_sessions++;
        return 0;
}

void sessions_wait_ended(Server *s, const Sandbox *sb) {
        WorkspaceSession *ws, *next;

        TAILQ_FOREACH_SAFE(ws, &s->ending, link, next)
                if (!sb || ws->sandbox == sb) {
                        TAILQ_REMOVE(&s->ending, ws, link);
                        session_release(s, ws);
                }
}

void sessions_reap(Server *s) {
        WorkspaceSession *ws;

        while ((ws = TAILQ_FIRST(&s->dead))) {
                TAILQ_REMOVE(&s->dead, ws, link);
                free(ws);
        }
}

static void publication_to_command(WorkspaceSession *ws, Command *c, int r, const PublishResult *res) {
        c->has_publication = true;
        sbx__publication__init(&c->publication);
        c->publication.published = r >= 0 && res->published;
        c->publication.layer = r >= 0 ? res->layer : ws->sandbox->top_layer;
        c->publication.changed_paths = r >= 0 ? res->changed_paths : 0;
        snprintf(c->publication_owner, sizeof(c->publication_owner), "workspace_session:%s", ws->id);
        c->publication_error[0] = '\0';
        if (r < 0)
                snprintf(c->publication_error, sizeof(c->publication_error), "publication failed: %s",
                         res->error[0] ? res->error : strerror(-r));
        else if (res->n_conflicts > 0)
                snprintf(c->publication_error, sizeof(c->publication_error),
                         "not published: %zu path(s) were changed by layers published after this session started; "
                         "the session %s is kept: finalize it with overwrite, or discard it",
                         res->n_conflicts, ws->id);
}

static void session_published(Server *s, WorkspaceSession *ws, int r, const PublishResult *res) {
        if (r < 0)
                log_error_errno(r, "Failed to publish workspace session %s of sandbox '%s': %s", ws->id,
                                ws->sandbox->name, res->error[0] ? res->error : strerror(-r));
        else if (res->n_conflicts > 0)
                log_info("Publication of %s refused: %zu conflicting paths", ws->id, res->n_conflicts);
        else if (res->published)
                log_info("Published layer %u of sandbox '%s' from %s (%u paths)", res->layer, ws->sandbox->name,
                         ws->id, res->changed_paths);
        /* The command that ended an automatic session answers with the publication. */
        if (ws->automatic && !TAILQ_EMPTY(&ws->commands))
                publication_to_command(ws, TAILQ_LAST(&ws->commands, CommandList), r, res);
}

/* The end of a finalize: after a failure or a conflict the session stays
 * (nothing is lost: retry with overwrite, or discard); else it ends. */
static void finalize_end(Server *s, WorkspaceSession *ws, bool publish, int r, PublishResult *res,
                         FinalizeDone answer, void *userdata) {
        bool refill;

        if (r < 0 || res->n_conflicts > 0) {
                session_kill_worker(s, ws);
                ws->conflicted = r >= 0;
                answer(s, ws, r, res, userdata);
                return;
        }
        /* The next automatic command of a read-only stream finds a spare. */
        refill = ws->automatic && publish && !res->published;
        answer(s, NULL, 0, res, userdata);
        session_end(s, ws, refill);
}

static int publish_start(Work *w) {
        SessionPublish *j = container_of(w, SessionPublish, work);
        WorkspaceSession *ws = j->ws;
        _cleanup_close_ int upper = -EBADF;
        char owner[64];

        if (!ws)
                return -ECANCELED;
        upper = openat(ws->upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (upper < 0)
                return -errno;
        snprintf(owner, sizeof(owner), "workspace_session:%s", ws->id);
        return publish_begin(j->server->store, &j->server->layer_limits, ws->sandbox, j->server->store_conns, upper, owner,
                             ws->base.top, j->overwrite, -1, NULL, &j->pub);
}

static int publish_work_run(Work *w) {
        return publish_run(container_of(w, SessionPublish, work)->pub, &w->cancelled);
}

static void publish_done(Work *w, int r, void *userdata) {
        SessionPublish *j = container_of(w, SessionPublish, work);
        WorkspaceSession *ws = j->ws;
        PublishResult res = {};
        Server *s = userdata;

        if (ws)
                ws->publishing = NULL;
        if (!ws || work_cancelled(w)) {
                publish_abandon(j->pub);
                j->answer(s, ws, -ECANCELED, &res, j->userdata);
        } else {
                if (j->pub)
                        r = publish_finish(s->store, ws->sandbox, j->pub, r, &res);
                session_published(s, ws, r, &res);
                finalize_end(s, ws, true, r, &res, j->answer, j->userdata);
        }
        free(j);
}

static int session_publish(Server *s, WorkspaceSession *ws, bool overwrite, FinalizeDone answer, void *userdata) {
        SessionPublish *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        *j = (SessionPublish) {
                .work = { .start = publish_start, .run = publish_work_run, .done = publish_done },
                .server = s, .ws = ws, .overwrite = overwrite, .answer = answer, .userdata = userdata,
        };
        ws->publishing = j;
        work_submit(s->work, &ws->sandbox->lane, &j->work);
        return 0;
}

int session_finalize(Server *s, WorkspaceSession *ws, bool publish, bool overwrite, FinalizeDone answer,
                     void *userdata) {
        PublishResult res = {};
        bool worker_alone = false;
        size_t procs;

        if (ws->running > 0 || ws->publishing)
                return -EBUSY;
        /* Nothing the commands started lives on, only the worker, which never
         * writes to /workspace: publish first and end it after the answer. */
        if (publish && ws->automatic && ws->cgroup && ws->state == SESSION_READY &&
            cgroup_session_processes(ws->cgroup, &procs) >= 0 && procs <= 1)
                worker_alone = true;
        session_stop(s, ws, worker_alone);
        /* A session that never got an upper has nothing to publish. */
        if (publish && ws->upper_fd >= 0)
                return session_publish(s, ws, overwrite, answer, userdata);
        res.layer = ws->sandbox->top_layer;
        finalize_end(s, ws, publish, 0, &res, answer, userdata);
        return 0;
}

/* ---- what a session would publish, off the loop ------------------------------------- */

typedef struct DiffWork {
        Work work;
        Server *server;
        Sandbox *sandbox;               /* not touched once cancelled */
        char ws_id[33];
        int upper_fd, view_fd;          /* dup'ed, and the base snapshot mounted, by its start */
        ChangesDiff diff;
        char why[256];
        SessionDiffDone done;
        void *userdata;
} DiffWork;

static int diff_start(Work *w) {
        DiffWork *d = container_of(w, DiffWork, work);
        WorkspaceSession *ws = session_find(d->server, d->sandbox, d->ws_id);

        if (!ws) {
                snprintf(d->why, sizeof(d->why), "no workspace session '%s' in sandbox '%s'", d->ws_id,
                         d->sandbox->name);
                return -ENOENT;
        }
        d->upper_fd = fcntl(ws->upper_fd, F_DUPFD_CLOEXEC, 3);
        if (d->upper_fd < 0)
                return -errno;
        return snapshot_mount(d->sandbox, ws->base.squashed, ws->base.top, &d->view_fd);
}

static int diff_run(Work *w) {
        DiffWork *d = container_of(w, DiffWork, work);
        return changes_diff(d->view_fd, d->upper_fd, &d->diff, d->why, sizeof(d->why));
}

static void diff_done(Work *w, int r, void *userdata) {
        DiffWork *d = container_of(w, DiffWork, work);

        safe_close(d->upper_fd);
        safe_close(d->view_fd);
        if (work_cancelled(w))
                snprintf(d->why, sizeof(d->why), "its sandbox or sbxd went first");
        d->done(userdata, r, r >= 0 ? &d->diff : NULL, d->why, d->userdata);
        if (r >= 0)
                changes_diff_done(&d->diff);
        free(d);
}

int session_diff(Server *s, Sandbox *sb, const char *ws_id, SessionDiffDone done, void *userdata) {
        DiffWork *d = calloc(1, sizeof(*d));

        if (!d)
                return -ENOMEM;
        *d = (DiffWork) {
                .work = { .start = diff_start, .run = diff_run, .done = diff_done },
                .server = s, .sandbox = sb, .upper_fd = -EBADF, .view_fd = -EBADF, .done = done, .userdata = userdata,
        };
        strlcpy(d->ws_id, ws_id, sizeof(d->ws_id));
        work_submit(s->work, &sb->lane, &d->work);
        return 0;
}

/* ---- commands ----------------------------------------------------------------- */

/* The fixed environment with the image's variables over it (theirs first). */
static size_t command_env_of(const WorkspaceSession *ws, char **env) {
        size_t n = 0;

        for (size_t i = 0; i < ws->image.n_env && n < SBX_IMAGE_ENV_MAX; i++)
                env[n++] = ws->image.env[i];
        for (size_t i = 0; i < ELEMENTSOF(command_env); i++) {
                size_t klen = strcspn(command_env[i], "=") + 1;
                bool over = false;
                for (size_t j = 0; j < ws->image.n_env && !over; j++)
                        over = strncmp(ws->image.env[j], command_env[i], klen) == 0;
                if (!over)
                        env[n++] = (char *) command_env[i];
        }
        if (ws->sandbox && ws->sandbox->egress != EGRESS_NONE)
                for (size_t i = 0; i < EGRESS_PROXY_ENV_N; i++)
                        env[n++] = (char *) egress_proxy_env[i];
        return n;
}

/* The directory c runs in. */
static const char *command_cwd(const Command *c, const WorkspaceSession *ws) {
        return c->cwd ?: ws->job ? SESSION_JOB_CWD : "/workspace";
}

/* c (a runtime_execute run) just went to its worker: its stdin, then end of input. */
static int run_send_stdin(Command *c) {
        RuntimeRun *j = c->run;
        size_t off = 0;
        int r;

        if (!j || !j->has_stdin)
                return 0;
        /* In frames of at most SBX_STDIN_MAX; the last one closes stdin (an empty stdin: at once). */
        do {
                size_t n = MIN(j->stdin_len - off, (size_t) SBX_STDIN_MAX);

                r = command_send_stdin(c, j->stdin_data + off, n, off + n == j->stdin_len);
                if (r < 0)
                        return r;
                off += n;
        } while (off < j->stdin_len);
        free(j->stdin_data);
        j->stdin_data = NULL;
        return 0;
}

/* A terminal's environment: a TERM that programs can draw with, and no NO_COLOR. */
static void command_env_pty(char **env, size_t *n) {
        size_t k = 0;

        for (size_t i = 0; i < *n; i++)
                if (strncmp(env[i], "TERM=", 5) != 0 && strncmp(env[i], "NO_COLOR=", 9) != 0)
                        env[k++] = env[i];
        env[k++] = (char *) "TERM=" TERMINAL_TERM;
        *n = k;
}

static int command_send_exec(WorkspaceSession *ws, Command *c) {
        Sbx__SupervisorExec e = SBX__SUPERVISOR_EXEC__INIT;
        char *env[ELEMENTSOF(command_env) + SBX_IMAGE_ENV_MAX + EGRESS_PROXY_ENV_N + SBX_RUNTIME_ENV_MAX +
                  SBX_BOX_ENV_MAX + SBX_BOX_SECRET_VALUES_MAX + 1];
        const Secrets *secrets = ws->sandbox ? ws->sandbox->secrets : NULL;
        int r;

        e.command = c->number;
        e.cmd = c->cmd;
        e.n_env = command_env_of(ws, env);
        if (c->pty.rows) {
                command_env_pty(env, &e.n_env);
                e.pty = true;
                e.rows = c->pty.rows;
                e.cols = c->pty.cols;
        }
        /* runtime_execute's allowlisted variables last: they win over the fixed ones. */
        for (size_t i = 0; c->run && i < c->run->n_env; i++)
                env[e.n_env++] = (char *) c->run->env[i];
        /* A box's last, likewise. */
        for (size_t i = 0; i < c->n_env; i++)
                env[e.n_env++] = c->env[i];
        /* And its secrets, named at sandbox_start (core/secret.h). */
        for (size_t i = 0; secrets && i < secrets->n; i++)
                env[e.n_env++] = secrets->env[i];
        e.env = env;
        e.cwd = (char *) command_cwd(c, ws);
        e.separate_streams = transcript_has_streams(c->transcript);
        c->start_usec = now_usec();
        r = session_send(ws, SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC, &e);
        c->sent = r >= 0;
        return r < 0 ? r : run_send_stdin(c);
}

static int command_new(Server *s, WorkspaceSession *ws, const char *cmd, bool separate_streams, uint64_t cap_bytes,
                       Command **ret) {
        Command *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        TAILQ_INIT(&c->waiters);
        sbx__publication__init(&c->publication);
        c->cmd = strdup(cmd);
        r = c->cmd ? random_id("cmd-", c->rec.id, sizeof(c->rec.id)) : -ENOMEM;
        if (r >= 0 && separate_streams)
                r = transcript_create_streams(s->transcripts_fd, c->rec.id, cap_bytes, &c->transcript);
        else if (r >= 0)
                r = transcript_create(s->transcripts_fd, c->rec.id, cap_bytes, &c->transcript);
        if (r < 0) {
                free(c->cmd);
                free(c);
                return r;
        }
        for (size_t i = 0; r >= 0 && ws->sandbox->secrets && i < ELEMENTSOF(c->redact); i++)
                r = secrets_redactor(ws->sandbox->secrets, &c->redact[i]);
        if (r < 0) {
                for (size_t i = 0; i < ELEMENTSOF(c->redact); i++)
                        redactor_free(c->redact[i]);
                transcript_free(c->transcript);
                free(c->cmd);
                free(c);
                return r;
        }
        strlcpy(c->rec.sandbox, ws->sandbox->id, sizeof(c->rec.sandbox));
        strlcpy(c->rec.workspace_session, ws->id, sizeof(c->rec.workspace_session));
        strlcpy(c->rec.status, "running", sizeof(c->rec.status));
        c->rec.started_unix_usec = now_unix_usec();
        *ret = c;
        return 0;
}

/* c, the first command of a spare that turned out dead before c reached its
 * worker, moves once to a new automatic session of the sandbox (made as an
 * exec would make one); true if it did. The dead spare is left to its end. */
static bool command_move_fresh(Server *s, Command *c) {
        WorkspaceSession *old = c->session, *ws;
        char why[256] = "";
        int r;

        if (!c->retry_fresh || c->sent || c->finished)
                return false;
        c->retry_fresh = false;
        r = session_new(s, old->sandbox, true, true, &ws, why, sizeof(why));
        if (r < 0) {
                log_warning_errno(r, "Cannot retry command %s in a new session: %s", c->rec.id,
                                  why[0] ? why : strerror(-r));
                return false;
        }
        TAILQ_REMOVE(&old->commands, c, session_link);
        old->running--;
        c->session = ws;
        c->number = ++ws->next_command;
        strlcpy(c->rec.workspace_session, ws->id, sizeof(c->rec.workspace_session));
        r = store_command_set_session(s->store, c->rec.id, ws->id);
        if (r < 0)
                log_warning_errno(r, "Failed to record the new session of command %s, ignoring: %m", c->rec.id);
        TAILQ_INSERT_TAIL(&ws->commands, c, session_link);
        ws->running++;
        log_info("Command %s: spare session %s was dead before it ran; it runs in new session %s", c->rec.id,
                 old->id, ws->id);
        return true;
}

/* A command that never started: everything of it goes. */
static void command_discard(Server *s, Command *c) {
        command_place_free(c);
        runtime_run_free(c->run);
        transcript_free(c->transcript);
        (void) transcript_remove(s->transcripts_fd, c->rec.id);
        free(c->cmd);
        free(c);
}

/* run (taken, NULL: none) before the command goes to the worker: its environment and stdin;
 * place (NULL: none), a box's directory and variables. */
static int command_start_with(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms,
                              bool separate_streams, uint64_t cap_bytes, RuntimeRun *run, const CommandPlace *place,
                              Command **ret) {
        Command *c;
        int r;

        if (ws->running >= SBX_MAX_COMMANDS_PER_SESSION) {
                runtime_run_free(run);
                return -EAGAIN;
        }
        r = command_new(s, ws, cmd, separate_streams, cap_bytes, &c);
        if (r < 0) {
                runtime_run_free(run);
                return r;
        }
        c->run = run;
        r = command_place_set(c, place);
        if (r < 0) {
                command_discard(s, c);
                return r;
        }
        c->session = ws;
        c->retry_fresh = ws->was_spare && ws->next_command == 0;
        c->number = ++ws->next_command;
        c->start_usec = now_usec();
        c->deadline_usec = c->start_usec + timeout_ms * 1000ull;
        r = store_command_insert(s->store, &c->rec, cmd);
        if (r < 0) {
                command_discard(s, c);
                return r;
        }
        transcripts_started(s, c);
        TAILQ_INSERT_TAIL(&s->commands, c, link);
        TAILQ_INSERT_TAIL(&ws->commands, c, session_link);
        ws->running++;
        if (ws->state == SESSION_READY) {
                r = command_send_exec(ws, c);
                if (r < 0 && !command_move_fresh(s, c)) {
                        log_error_errno(r, "Failed to send command %s to worker of %s: %m", c->rec.id, ws->id);
                        command_record_end(s, c, false, 0, SIGKILL);
                }
        }
        log_info("Command %s started in %s of sandbox '%s'", c->rec.id, ws->id, ws->sandbox->name);
        *ret = c;
        return 0;
}

int command_start(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, bool separate_streams,
                  Command **ret) {
        return command_start_with(s, ws, cmd, timeout_ms, separate_streams, s->cfg.transcript_cap_bytes, NULL, NULL,
                                  ret);
}

int command_start_at(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, const char *cwd,
                     char *const *env, size_t n_env, Command **ret) {
        return command_start_with(s, ws, cmd, timeout_ms, true, s->cfg.transcript_cap_bytes, NULL,
                                  &(CommandPlace) { .cwd = cwd, .env = env, .n_env = n_env }, ret);
}

int command_start_pty(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, const char *cwd,
                      char *const *env, size_t n_env, TerminalSize pty, Command **ret) {
        if (pty.rows == 0 || pty.cols == 0 || pty.rows > SBX_TERMINAL_SIZE_MAX || pty.cols > SBX_TERMINAL_SIZE_MAX)
                return -EINVAL;
        return command_start_with(s, ws, cmd, timeout_ms, false, s->cfg.transcript_cap_bytes, NULL,
                                  &(CommandPlace) { .cwd = cwd, .env = env, .n_env = n_env, .pty = pty }, ret);
}

int command_start_runtime(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, uint64_t cap_bytes,
                          RuntimeRun *run, Command **ret) {
        return command_start_with(s, ws, cmd, timeout_ms, true, MIN(cap_bytes, s->cfg.transcript_cap_bytes), run, NULL,
                                  ret);
}

Command *command_find_live(Server *s, const char *id) {
        Command *c;
        TAILQ_FOREACH(c, &s->commands, link)
                if (strcmp(c->rec.id, id) == 0)
                        return c;
        TAILQ_FOREACH(c, &s->ended_commands, link)
                if (strcmp(c->rec.id, id) == 0)
                        return c;
        return NULL;
}

static int command_signal(Command *c, int sig) {
        Sbx__SupervisorSignal sg = SBX__SUPERVISOR_SIGNAL__INIT;

        if (!c->session || c->session->state != SESSION_READY || !c->sent)
                return -ESRCH;
        sg.command = c->number;
        sg.signal = sig;
        return session_send(c->session, SBX__MSG_TYPE__MSG_SUPERVISOR_SIGNAL, &sg);
}

int command_send_stdin(Command *c, const void *data, size_t len, bool close_stdin) {
        Sbx__SupervisorStdin in = SBX__SUPERVISOR_STDIN__INIT;

        if (c->finished)
                return -EPIPE;
        if (!c->session || c->session->state != SESSION_READY || !c->sent)
                return -EAGAIN;
        in.command = c->number;
        in.data.data = (uint8_t *) data;
        in.data.len = len;
        in.close = close_stdin;
        return session_send(c->session, SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN, &in);
}

int command_resize(Command *c, TerminalSize size) {
        Sbx__SupervisorStdin in = SBX__SUPERVISOR_STDIN__INIT;

        if (!c->pty.rows)
                return -ENOTTY;
        if (size.rows == 0 || size.cols == 0 || size.rows > SBX_TERMINAL_SIZE_MAX || size.cols > SBX_TERMINAL_SIZE_MAX)
                return -EINVAL;
        c->pty = size;          /* an exec not sent yet starts with it */
        if (c->finished)
                return -EPIPE;
        if (!c->session || c->session->state != SESSION_READY || !c->sent)
                return 0;
        in.command = c->number;
        in.rows = size.rows;
        in.cols = size.cols;
        return session_send(c->session, SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN, &in);
}

static void command_kill(Command *c) {
        if (command_signal(c, SIGKILL) < 0 && c->session)
                c->kill_deadline_usec = now_usec(); /* no worker to ask: end the session now */
        else
                c->kill_deadline_usec = now_usec() + SBX_KILL_GRACE_MS * 1000ull;
}

void command_cancel(Server *s, Command *c) {
        if (c->finished)
                return;
        c->cancelled = true;
        log_info("Command %s cancelled", c->rec.id);
        command_kill(c);
}

/* The status and end reason of c as it ended now. */
static void command_end_reason(Command *c, bool exited, int exit_code, uint64_t oom, uint64_t pids) {
        const char *status, *reason;

        if (c->supervisor_lost)
                status = "error", reason = "supervisor_lost";
        else if (c->cancelled)
                status = "cancelled", reason = "cancelled";
        else if (c->timed_out)
                status = "timed_out", reason = "timeout";
        else {
                status = exited && exit_code == 0 ? "ok" : "error";
                /* The cgroup counts events since the session got it (pooled cgroups). */
                if (oom > 0)
                        reason = "out_of_memory";
                else if (pids > 0 && !(exited && exit_code == 0))
                        reason = "pids_limit";
                else
                        reason = exited ? "exit" : "signal";
        }
        strlcpy(c->rec.status, status, sizeof(c->rec.status));
        strlcpy(c->rec.end_reason, reason, sizeof(c->rec.end_reason));
}

/* ---- ends that the store could not take -------------------------------------- */

static void unrecorded_add(Server *s, const StoreCommand *rec) {
        if (s->n_unrecorded >= SBX_UNRECORDED_ENDS_MAX) {
                /* The oldest goes: its record reads supervisor_lost (command_record_fix). */
                memmove(s->unrecorded, s->unrecorded + 1, (s->n_unrecorded - 1) * sizeof(*s->unrecorded));
                s->n_unrecorded--;
        }
        if (ARRAY_RESERVE(s->unrecorded, s->unrecorded_cap, s->n_unrecorded + 1) < 0)
                return;
        s->unrecorded[s->n_unrecorded++] = *rec;
}

void command_record_fix(Server *s, StoreCommand *rec) {
        if (strcmp(rec->status, "running") != 0 || command_find_live(s, rec->id))
                return;
        for (size_t i = 0; i < s->n_unrecorded; i++)
                if (strcmp(s->unrecorded[i].id, rec->id) == 0) {
                        *rec = s->unrecorded[i];
                        return;
                }
        strlcpy(rec->status, "error", sizeof(rec->status));
        strlcpy(rec->end_reason, "supervisor_lost", sizeof(rec->end_reason));
}

void commands_trim_ended(Server *s) {
        Command *c, *next;

        /* Oldest first; an automatic session's command goes with its session (its publication answers it). */
        TAILQ_FOREACH_SAFE(c, &s->ended_commands, link, next) {
                WorkspaceSession *ws = c->session;

                if (s->n_ended_commands <= SBX_ENDED_COMMANDS_KEPT)
                        return;
                if (!ws || ws->automatic || ws->publishing)
                        continue;
                TAILQ_REMOVE(&ws->commands, c, session_link);
                c->session = NULL;
                command_free(s, c);
        }
}

void commands_store_unrecorded(Server *s, bool now) {
        unsigned long long t = now_usec();
        size_t kept = 0, n = s->n_unrecorded;

        if (n == 0 || (!now && t < s->unrecorded_retry_usec))
                return;
        s->unrecorded_retry_usec = t + SBX_UNRECORDED_RETRY_MS * 1000ull;
        for (size_t i = 0; i < n; i++)
                if (store_command_finish(s->store, &s->unrecorded[i]) < 0)
                        s->unrecorded[kept++] = s->unrecorded[i];
        s->n_unrecorded = kept;
        if (kept < n)
                log_notice("Recorded the ends of %zu commands held in memory; %zu still wait", n - kept, kept);
}

/* Its egress audit, kept with its record (sbxctl command show reads it after its session). */
static void command_record_egress(Server *s, const Command *c, EgressPolicy policy) {
        Sbx__EgressAudit a;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        int r;

        egress_audit_view(&c->egress, policy, &a);
        len = sbx__egress_audit__get_packed_size(&a);
        buf = malloc(len ?: 1);
        r = buf ? store_command_egress_set(s->store, c->rec.id, buf, sbx__egress_audit__pack(&a, buf)) : -ENOMEM;
        if (r < 0)
                log_warning_errno_ratelimited(r, "Failed to record the egress audit of %s, ignoring: %m", c->rec.id);
}

/* c ended: its status, exit and end reason, its transcript flushed and charged (in memory). */
static void command_end(Server *s, Command *c, bool exited, int exit_code, int sig) {
        WorkspaceSession *ws = c->session;
        uint64_t oom = 0, pids = 0;
        int r;

        c->finished = true;
        c->end_usec = now_usec();
        r = transcript_finish(c->transcript);
        if (r < 0)
                log_warning_errno_ratelimited(r, "Failed to flush transcript of %s, ignoring: %m", c->rec.id);
        transcripts_charge(s, c);       /* its pending line, committed */
        c->rec.transcript_bytes = c->charged_bytes;
        c->rec.transcript_files = (int) c->charged_files;
        if (ws && ws->cgroup) {
                (void) cgroup_session_oom_kills(ws->cgroup, &oom);
                (void) cgroup_session_pids_max_hits(ws->cgroup, &pids);
        }
        c->rec.has_exit_code = exited;
        c->rec.exit_code = exit_code;
        c->rec.signal = exited ? 0 : sig;
        command_end_reason(c, exited, exit_code, oom, pids);
        c->rec.ended_unix_usec = now_unix_usec();
        c->rec.raw_bytes = transcript_raw_bytes(c->transcript);
        log_info("Command %s ended: %s (%s %d)", c->rec.id, c->rec.status, c->rec.end_reason,
                 exited ? exit_code : sig);
        if (ws)
                ws->running--;
        if (c->observer)
                c->observer->ended(c, c->observer_data);
        command_file(s, c);
}

/* The end of c, as command_end set it, into the store. */
static void command_end_store(Server *s, Command *c) {
        int r = store_command_finish(s->store, &c->rec);

        if (r < 0) {
                log_error_errno_ratelimited(r, "Failed to record the end of command %s, keeping it in memory to retry: %m",
                                            c->rec.id);
                unrecorded_add(s, &c->rec);
        }
        if (c->session && c->session->sandbox && c->session->sandbox->egress != EGRESS_NONE)
                command_record_egress(s, c, c->session->sandbox->egress);
}

/* Record how the command ended, durably. */
static void command_record_end(Server *s, Command *c, bool exited, int exit_code, int sig) {
        if (c->finished)
                return;
        command_end(s, c, exited, exit_code, sig);
        command_end_store(s, c);
}

/* c ended (as the worker said): a managed session's callers are answered
 * before the end is stored, which they do not wait for (an automatic one
 * publishes first, and its end may free c). */
static void command_ended(Server *s, Command *c, bool exited, int exit_code, int sig) {
        WorkspaceSession *ws = c->session;

        command_redact_flush(s, c);
        /* Its reports, while the session's files are there (an automatic one publishes and goes next). */
        if (c->run && ws)
                runtime_run_read_reports(c->run, ws->root_fd, command_cwd(c, ws));

        if (!ws || ws->automatic || c->finished) {
                command_record_end(s, c, exited, exit_code, sig);
                command_settle(s, c);
                return;
        }
        command_end(s, c, exited, exit_code, sig);
        command_settle(s, c);
        command_end_store(s, c);
}

static void command_answer_waiters(Server *s, Command *c) {
        Waiter *w;

        while ((w = TAILQ_FIRST(&c->waiters)))
                waiter_answer(s, w);
}

/* An automatic session whose publication failed for another reason than a
 * conflict (a tree too deep, a path too long, a quota, a full disk) does not
 * wait for a finalize that the runtime tools cannot send: it is kept stopped,
 * its changes in its tmpfs for inspection or a retry, for
 * failed_session_grace_seconds, then discarded; c (the command that ended
 * it) says so. A conflict keeps its session until it is finalized. */
static void failed_session_keep(Server *s, WorkspaceSession *ws, Command *c) {
        unsigned grace = s->cfg.failed_session_grace_seconds;
        size_t len = strlen(c->publication_error);
        char *end = c->publication_error + len, until[32];
        size_t room = sizeof(c->publication_error) - len;
        time_t t;

        if (grace == 0) {
                snprintf(end, room, "; nothing was published, and the session's changes were discarded with it "
                         "(failed_session_grace_seconds = 0)");
                log_info("Discarding workspace session %s of sandbox '%s': its publication failed", ws->id,
                         ws->sandbox->name);
                return;
        }
        if (ws->discard_usec == 0) {
                ws->discard_usec = now_usec() + grace * 1000000ull;
                ws->discard_unix = time(NULL) + grace;
        }
        t = (time_t) ws->discard_unix;
        strftime(until, sizeof(until), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &(struct tm) {}));
        snprintf(end, room,
                 "; nothing was published. The changes of workspace session %s are kept for inspection until %s "
                 "(failed_session_grace_seconds = %u), then discarded with the session: 'sbxctl session diff %s %s' "
                 "shows them, 'sbxctl session finalize %s %s --publish' retries once the cause is fixed, --discard "
                 "drops them now (or diff_workspace_session and finalize_workspace_session of the sessions tools)",
                 ws->id, until, grace, ws->sandbox->name, ws->id, ws->sandbox->name, ws->id);
        log_info("Keeping workspace session %s of sandbox '%s' after a failed publication until %s", ws->id,
                 ws->sandbox->name, until);
}

unsigned long long failed_sessions_next_deadline(Server *s) {
        unsigned long long next = ~0ull;
        WorkspaceSession *ws;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->discard_usec && !ws->publishing) /* a retry publishes: its end decides */
                        next = MIN(next, ws->discard_usec);
        return next;
}

void failed_sessions_run_deadlines(Server *s) {
        unsigned long long now = now_usec();
        WorkspaceSession *ws, *next;

        TAILQ_FOREACH_SAFE(ws, &s->sessions, link, next)
                if (ws->discard_usec && ws->discard_usec <= now && ws->running == 0 && !ws->publishing) {
                        log_info("Discarding workspace session %s of sandbox '%s' (%llu bytes of changes): its "
                                 "publication failed %u s ago (failed_session_grace_seconds)",
                                 ws->id, ws->sandbox->name, (unsigned long long) session_memory_bytes(ws),
                                 s->cfg.failed_session_grace_seconds);
                        session_destroy(s, ws);
                }
}

/* An automatic session's publication is done: after a refused one the
 * session stays, after a failed one it is kept for the grace time
 * (failed_session_keep) or goes at once, and the waiters of its last command
 * learn why (when it ended, session_end answered them with the publication). */
static void settle_answered(Server *s, WorkspaceSession *ws, int r, PublishResult *res, void *userdata) {
        Command *c;

        if (ws && !TAILQ_EMPTY(&ws->commands)) {
                c = TAILQ_LAST(&ws->commands, CommandList);
                if (r == -ECANCELED)
                        publication_to_command(ws, c, r, res);
                else if (r < 0)
                        failed_session_keep(s, ws, c);
                c->publication.n_conflicts = res->n_conflicts;
                c->publication.conflicts = res->conflicts;
                command_answer_waiters(s, c);
                c->publication.n_conflicts = 0;
                c->publication.conflicts = NULL;
                if (r < 0 && r != -ECANCELED && ws->discard_usec == 0)
                        session_destroy(s, ws); /* failed_session_grace_seconds = 0: nothing is kept */
        }
        publish_result_done(res);
}

/* After a command ended: an automatic session with nothing left running
 * publishes and goes (its end answers the waiters, with the publication);
 * after a refused publication it stays, and the waiters learn the conflicts. */
static void command_settle(Server *s, Command *c) {
        WorkspaceSession *ws = c->session;
        int r;

        if (ws && ws->publishing)
                return; /* its end answers */
        if (!ws || !ws->automatic || ws->running > 0 || ws->state == SESSION_DEAD) {
                command_answer_waiters(s, c);
                return;
        }
        r = session_finalize(s, ws, true, false, settle_answered, NULL);
        if (r < 0) {
                PublishResult res = { .layer = ws->sandbox->top_layer };
                settle_answered(s, ws, r, &res, NULL);
        }
}

/* A spare handed out and dead before its command reached it: the command
 * moves to a new session (command_move_fresh); true if that left ws, an
 * automatic session, without commands (nothing of it is needed). */
static bool session_move_commands(Server *s, WorkspaceSession *ws) {
        Command *c, *next;

        if (!ws->was_spare)
                return false;
        TAILQ_FOREACH_SAFE(c, &ws->commands, session_link, next)
                (void) command_move_fresh(s, c);
        return ws->automatic && TAILQ_EMPTY(&ws->commands);
}

/* The worker is gone or misbehaved: an automatic session publishes what it has
 * and ends; a managed one keeps its changes until it is finalized. */
static void session_worker_lost(Server *s, WorkspaceSession *ws, const char *why) {
        Command *c;

        log_warning("Lost worker of %s: %s", ws->id, why);
        if (ws->spare || session_move_commands(s, ws)) {
                session_destroy(s, ws);
                return;
        }
        session_stop(s, ws, false);
        if (ws->publishing)
                return; /* stopped already; its publication goes on */
        if (ws->automatic && !TAILQ_EMPTY(&ws->commands)) {
                command_settle(s, TAILQ_LAST(&ws->commands, CommandList));
                return;
        }
        TAILQ_FOREACH(c, &ws->commands, session_link)
                command_answer_waiters(s, c);
}

/* ---- waiters and command output ------------------------------------------------- */

/* An ended automatic command answers with its publication, which runs off the loop: until then no yield answers. */
static bool command_awaits_publication(const Command *c) {
        return c->finished && c->session && c->session->publishing;
}

static void waiter_free(Server *s, Waiter *w) {
        Command *c = w->command;

        pending_stop(&w->pending);
        TAILQ_REMOVE(&c->waiters, w, command_link);
        free(w);
        command_file(s, c);
}

static void waiter_abandon(Server *s, Pending *p, bool cancelled) {
        Waiter *w = container_of(p, Waiter, pending);
        Command *c = w->command;

        waiter_free(s, w);
        /* A caller that gave up before learning the command's id leaves nobody who can reach it. */
        if (cancelled)
                command_cancel(s, c);
}

static int waiter_add(Server *s, Command *c, Client *client, uint32_t seq, unsigned long long call_start,
                      uint64_t yield_ms, bool progress) {
        Waiter *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->progress = progress;
        w->command = c;
        w->call_start_usec = call_start;
        w->deadline_usec = call_start + yield_ms * 1000ull;
        pending_start(&w->pending, client, seq, waiter_abandon);
        TAILQ_INSERT_TAIL(&c->waiters, w, command_link);
        command_file(s, c);
        if (c->finished && !command_awaits_publication(c))
                waiter_answer(s, w);
        return 0;
}

int command_add_waiter(Server *s, Command *c, Client *client, uint32_t seq, unsigned long long call_start,
                       uint64_t yield_ms) {
        return waiter_add(s, c, client, seq, call_start, yield_ms, false);
}

int command_add_progress_waiter(Server *s, Command *c, Client *client, uint32_t seq, unsigned long long call_start,
                                uint64_t yield_ms) {
        return waiter_add(s, c, client, seq, call_start, yield_ms, true);
}

static uint64_t token_count(uint64_t raw_bytes) {
        return (raw_bytes + 3) / 4;
}

static void view_of_record(CommandView *v, const StoreCommand *rec, double total_seconds) {
        COMMAND_RECORD_TO(&v->o, rec);
        v->o.command_total_time_seconds = total_seconds;
}

/* A live command's record and its publication (an automatic session's last command), as sbxd holds them. */
static void view_of_live(CommandView *v, Command *c, unsigned long long now) {
        view_of_record(v, &c->rec, (double) ((c->finished ? c->end_usec : now) - c->start_usec) / 1e6);
        if (command_awaits_publication(c)) {
                /* Ended, but done only once its changes are published, as its yields answer:
                 * a caller that sees it done then finds them in the snapshot. */
                v->o.status = (char *) "running";
                v->o.has_exit_code = false;
                v->o.signal = 0;
                v->o.end_reason = (char *) "";
        }
        v->o.original_token_count = token_count(c->transcript ? transcript_raw_bytes(c->transcript) : c->rec.raw_bytes);
        if (c->session && c->session->sandbox && c->session->sandbox->egress != EGRESS_NONE) {
                egress_audit_view(&c->egress, c->session->sandbox->egress, &v->egress);
                v->o.egress = &v->egress;
        }
        if (!c->has_publication)
                return;
        c->publication.owner = c->publication_owner;
        c->publication.error = c->publication_error;
        v->o.publication = &c->publication;
}

_Static_assert((int) TRANSCRIPT_MERGED == SBX__STREAM__STREAM_MERGED &&
               (int) TRANSCRIPT_STDOUT == SBX__STREAM__STREAM_STDOUT &&
               (int) TRANSCRIPT_STDERR == SBX__STREAM__STREAM_STDERR, "one numbering of streams");

static int view_window(CommandView *v, Transcript *t, TranscriptStream stream, uint64_t start, uint64_t limit) {
        size_t len = 0;
        uint64_t end = 0, total;
        int r;

        r = transcript_read_stream(t, stream, start, limit, SBX_RESULT_TEXT_BUDGET, &v->text, &len, &end);
        if (r < 0)
                return r;
        total = transcript_stream_total_lines(t, stream);
        v->o.start_offset = MIN(start, total);
        v->o.end_offset = end;
        v->o.total_lines = total;
        v->o.output.data = (uint8_t *) v->text;
        v->o.output.len = len;
        return 0;
}

void command_view_done(CommandView *v) {
        free(v->text);
        v->text = NULL;
        if (v->stored_egress)
                sbx__egress_audit__free_unpacked(v->stored_egress, NULL);
        v->stored_egress = NULL;
}

int command_capture(Command *c, uint32_t max_stdout_chars, uint32_t max_stderr_chars) {
        c->capture = calloc(2, sizeof(OutputCapture));
        if (!c->capture)
                return -ENOMEM;
        output_capture_init(&c->capture[0], max_stdout_chars);
        output_capture_init(&c->capture[1], max_stderr_chars);
        return 0;
}

/* An execute_command's answer: both streams cut (data/capture.h) and how it ended. */
static void waiter_answer_capture(Server *s, Waiter *w) {
        Command *c = w->command;
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__ClaimExecReply o = SBX__CLAIM_EXEC_REPLY__INIT;
        Sbx__EgressAudit audit;
        _cleanup_free_ char *out = NULL, *err = NULL;
        size_t out_len = 0, err_len = 0;
        bool out_cut = false, err_cut = false;
        int r;

        r = output_capture_result(&c->capture[0], &out, &out_len, &out_cut);
        if (r >= 0)
                r = output_capture_result(&c->capture[1], &err, &err_len, &err_cut);
        if (r < 0) {
                pending_answer_error(s, &w->pending, r, "cannot assemble the output of %s: %s", c->rec.id,
                                     strerror(-r));
                waiter_free(s, w);
                return;
        }
        o.stdout_truncated = out_cut;
        o.stderr_truncated = err_cut;
        o.stdout.data = (uint8_t *) out;
        o.stdout.len = out_len;
        o.stderr.data = (uint8_t *) err;
        o.stderr.len = err_len;
        o.stdout_total_chars = c->capture[0].total_chars;
        o.stderr_total_chars = c->capture[1].total_chars;
        o.has_exit_code = c->finished && c->rec.has_exit_code && !c->timed_out;
        o.exit_code = c->rec.exit_code;
        o.signal = c->rec.signal;
        o.timed_out = c->timed_out;
        o.command_session = c->rec.id;
        o.sandbox = c->session && c->session->sandbox ? c->session->sandbox->name : (char *) "";
        o.status = c->rec.status;
        o.end_reason = c->rec.end_reason;
        if (c->session && c->session->sandbox && c->session->sandbox->egress != EGRESS_NONE) {
                egress_audit_view(&c->egress, c->session->sandbox->egress, &audit);
                o.egress = &audit;
        }
        if (c->run)
                runtime_run_answer(s, &w->pending, c, &o);
        else {
                msg_reply_set(&reply, SBX__REPLY__BODY_CLAIM_EXEC, &o);
                pending_answer(s, &w->pending, &reply);
        }
        waiter_free(s, w);
}

/* A yield: the lines this caller has not been given, at most SBX_WINDOW_MAX_LINES, the newest. */
static void waiter_answer(Server *s, Waiter *w) {
        Command *c = w->command;
        if (c->capture) {
                waiter_answer_capture(s, w);
                return;
        }
        Sbx__Reply reply = SBX__REPLY__INIT;
        CommandView v = { .o = SBX__COMMAND_OUTPUT__INIT };
        unsigned long long now = now_usec();
        uint64_t total, start;
        int r;

        if (!c->transcript) {   /* not while it runs: evicted once it ended and was answered */
                pending_answer_error(s, &w->pending, -ESTALE, "the transcript of %s was evicted to stay within %s",
                                     c->rec.id, c->rec.evicted);
                waiter_free(s, w);
                return;
        }
        total = transcript_total_lines(c->transcript);
        start = c->delivered;
        if (total > start + SBX_WINDOW_MAX_LINES)
                start = total - SBX_WINDOW_MAX_LINES;
        view_of_live(&v, c, now);
        v.o.wall_time_seconds = (double) (now - w->call_start_usec) / 1e6;
        r = view_window(&v, c->transcript, TRANSCRIPT_MERGED, start, SBX_WINDOW_MAX_LINES);
        if (r < 0)
                pending_answer_error(s, &w->pending, r, "cannot read the transcript of %s: %s", c->rec.id,
                                     strerror(-r));
        else {
                /* A pending last line may still change: it is given again next time. */
                c->delivered = MAX(c->delivered, MIN(v.o.end_offset, transcript_committed_lines(c->transcript)));
                msg_reply_set(&reply, SBX__REPLY__BODY_COMMAND, &v.o);
                pending_answer(s, &w->pending, &reply);
        }
        command_view_done(&v);
        waiter_free(s, w);
}

typedef struct OwnedLayer {
        const char *owner;
        bool found;
        uint32_t layer, changed_paths;
} OwnedLayer;

static int owned_layer_cb(uint32_t seq, const char *owner, uint32_t changed, int64_t created, void *userdata) {
        OwnedLayer *l = userdata;

        if (strcmp(owner, l->owner) == 0) {
                l->found = true;
                l->layer = seq;
                l->changed_paths = changed;
        }
        return 0;
}

/* The publication of an ended command's workspace session, once that session
 * is gone (an automatic one ends with its command): the layer it owns, or
 * nothing published. None while the session lives. */
static int view_stored_publication(Server *s, const Sandbox *sb, const StoreCommand *rec, CommandView *v) {
        OwnedLayer l = { .owner = v->owner };
        int r;

        if (strcmp(rec->status, "running") == 0 || session_find(s, sb, rec->workspace_session))
                return 0;
        snprintf(v->owner, sizeof(v->owner), "workspace_session:%s", rec->workspace_session);
        r = store_layer_foreach(s->store, sb->id, owned_layer_cb, &l);
        if (r < 0)
                return r;
        v->publication.published = l.found;
        v->publication.layer = l.found ? l.layer : sb->top_layer;
        v->publication.changed_paths = l.changed_paths;
        v->publication.owner = v->owner;
        v->o.publication = &v->publication;
        return 0;
}

/* The egress audit kept with an ended command's record, if it has one. */
static int view_stored_egress(Server *s, const StoreCommand *rec, CommandView *v) {
        _cleanup_free_ void *buf = NULL;
        size_t len;
        int r = store_command_egress_get(s->store, rec->id, &buf, &len);

        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        v->stored_egress = sbx__egress_audit__unpack(NULL, len, buf);
        if (!v->stored_egress)
                return -EBADMSG;
        v->o.egress = v->stored_egress;
        return 0;
}

/* A command of an earlier session (or sbxd): its record and its transcript on disk. */
static int command_view_recorded(Server *s, const Sandbox *sb, const char *id, TranscriptStream stream,
                                 uint64_t start, uint64_t limit, CommandView *v) {
        _cleanup_(transcript_freep) Transcript *t = NULL;
        StoreCommand *rec = &v->rec;
        int r;

        r = store_command_get(s->store, id, rec);
        if (r < 0)
                return r;
        if (strcmp(rec->sandbox, sb->id) != 0)
                return -ENOENT;
        command_record_fix(s, rec);
        if (rec->evicted[0])
                return -ESTALE;
        r = transcript_open(s->transcripts_fd, id, &t);
        if (r == -ENOENT && rec->raw_bytes == 0)
                /* It printed nothing: no files were made (data/transcript.h). */
                r = transcript_empty(rec->transcript_files == (int) transcript_files_new(true), &t);
        if (r < 0)
                return r;
        view_of_record(v, rec, rec->ended_unix_usec > rec->started_unix_usec
                                       ? (double) (rec->ended_unix_usec - rec->started_unix_usec) / 1e6
                                       : 0.0);
        v->o.original_token_count = token_count(rec->raw_bytes);
        r = view_stored_egress(s, rec, v);
        if (r >= 0)
                r = view_stored_publication(s, sb, rec, v);
        if (r < 0)
                return r;
        return view_window(v, t, stream, start, limit);
}

int command_view(Server *s, const Sandbox *sb, const char *id, TranscriptStream stream, uint64_t start, uint64_t limit,
                 CommandView *ret) {
        Command *c = command_find_live(s, id);
        int r;

        *ret = (CommandView) { .o = SBX__COMMAND_OUTPUT__INIT, .publication = SBX__PUBLICATION__INIT };
        if (!c)
                r = command_view_recorded(s, sb, id, stream, start, limit, ret);
        else if (strcmp(c->rec.sandbox, sb->id) != 0)
                r = -ENOENT;
        else if (!c->transcript) {
                ret->rec = c->rec;
                r = -ESTALE;
        } else {
                view_of_live(ret, c, now_usec());
                r = view_window(ret, c->transcript, stream, start, limit);
        }
        if (r < 0)
                command_view_done(ret);
        return r;
}

/* ---- deadlines ------------------------------------------------------------------ */

unsigned long long commands_next_deadline(Server *s) {
        unsigned long long next = ~0ull;
        Command *c;
        Waiter *w;

        TAILQ_FOREACH(c, &s->commands, link) {
                TAILQ_FOREACH(w, &c->waiters, command_link)
                        if (!command_awaits_publication(c))
                                next = MIN(next, w->deadline_usec);
                if (!c->finished) {
                        if (c->kill_deadline_usec)
                                next = MIN(next, c->kill_deadline_usec);
                        else if (!c->timed_out)
                                next = MIN(next, c->deadline_usec);
                }
        }
        return next;
}

void commands_run_deadlines(Server *s) {
        unsigned long long now = now_usec();
        Command *c, *next;

restart:
        TAILQ_FOREACH_SAFE(c, &s->commands, link, next) {
                Waiter *w, *wn;
                TAILQ_FOREACH_SAFE(w, &c->waiters, command_link, wn)
                        if (w->deadline_usec <= now && !command_awaits_publication(c))
                                waiter_answer(s, w);
                if (c->finished)
                        continue;
                if (!c->timed_out && !c->kill_deadline_usec && c->deadline_usec <= now) {
                        c->timed_out = true;
                        log_info("Command %s timed out", c->rec.id);
                        command_kill(c);
                }
                if (c->kill_deadline_usec && c->kill_deadline_usec <= now && c->session) {
                        /* The group did not die (or escaped it): the session goes. */
                        log_warning("Command %s outlived SIGKILL of its process group, ending session %s",
                                    c->rec.id, c->session->id);
                        session_worker_lost(s, c->session, "a killed command outlived its grace time");
                        goto restart; /* the lists changed under us */
                }
        }
}

/* ---- the worker's messages ------------------------------------------------------ */

/* The session's set-up channel: maps to write, then EOF once the init runs as the worker. */
static void session_setup_done(Server *s, WorkspaceSession *ws) {
        ws->egress_fd = TAKE_FD(ws->spawn.egress_fd);
        egress_proxy_attach(s, ws);
        ws->upper_fd = TAKE_FD(ws->spawn.upper_fd);
        ws->workspace_fd = TAKE_FD(ws->spawn.workspace_fd);
        ws->root_fd = TAKE_FD(ws->spawn.root_fd);
        server_unwatch(s, &ws->setup_src);
        ws->spawn.sync = -EBADF;
        if (ws->state == SESSION_SETUP)
                ws->state = SESSION_SPAWNING;
        log_debug("Workspace session %s of sandbox '%s' set up in %llu us (worker pid %d, base layer %u)", ws->id,
                  ws->sandbox->name, now_usec() - ws->start_usec, (int) ws->pid, ws->base.top);
}

static void on_ready(Server *s, WorkspaceSession *ws, Command *unused, const Sbx__Msg *m) {
        Command *c;

        /* It can overtake the set-up channel's EOF: the exec happened. */
        if (ws->state == SESSION_SETUP) {
                if (!ws->spawn.mapped) {
                        session_worker_lost(s, ws, "READY before its user namespace was mapped");
                        return;
                }
                session_setup_done(s, ws);
        }
        ws->state = SESSION_READY;
        session_answer_creator(s, ws);
        TAILQ_FOREACH(c, &ws->commands, session_link)
                if (!c->sent && !c->finished && command_send_exec(ws, c) < 0) {
                        session_worker_lost(s, ws, "cannot send a command");
                        return;
                }
}

/* Output of the running command c, within the transcripts' budgets. */
static int command_feed(Server *s, Command *c, TranscriptStream stream, const void *data, size_t n) {
        int r;

        transcripts_fit(s, c, n);
        r = transcript_feed_stream(c->transcript, stream, data, n);
        transcripts_charge(s, c);
        if (c->observer)
                c->observer->output(c->observer_data, stream, data, n);
        return r;
}

/* Output as it is kept: in the transcript, the job's counts, the result's capture. */
static void command_take_output(Server *s, Command *c, Sbx__Stream stream, const void *data, size_t len) {
        /* The same numbers (static asserts above): a tag the transcript does not take is -EINVAL. */
        int r = command_feed(s, c, (TranscriptStream) stream, data, len);

        if (r < 0)
                log_warning_errno_ratelimited(r, "Failed to store output of %s, ignoring: %m", c->rec.id);
        if (c->run && (stream == SBX__STREAM__STREAM_STDOUT || stream == SBX__STREAM__STREAM_STDERR))
                c->run->bytes[stream == SBX__STREAM__STREAM_STDERR] += len;
        if (c->capture && (stream == SBX__STREAM__STREAM_STDOUT || stream == SBX__STREAM__STREAM_STDERR)) {
                r = output_capture_feed(&c->capture[stream == SBX__STREAM__STREAM_STDERR], data, len);
                if (r < 0)
                        log_warning_errno(r, "Failed to keep output of %s for its result, ignoring: %m", c->rec.id);
        }
}

typedef struct RedactedOutput {
        Server *s;
        Command *c;
        Sbx__Stream stream;
} RedactedOutput;

static int redacted_output(const void *data, size_t len, void *userdata) {
        RedactedOutput *o = userdata;

        command_take_output(o->s, o->c, o->stream, data, len);
        return 0;
}

static void on_output(Server *s, WorkspaceSession *ws, Command *c, const Sbx__Msg *m) {
        const Sbx__WorkerOutput *o = m->worker_output;
        RedactedOutput ro = { s, c, o->stream };

        /* A box's secret values never get past here (core/secret.h). */
        if ((size_t) o->stream < ELEMENTSOF(c->redact) && c->redact[o->stream])
                (void) redactor_feed(c->redact[o->stream], o->data.data, o->data.len, redacted_output, &ro);
        else
                command_take_output(s, c, o->stream, o->data.data, o->data.len);
}

/* What the redactors held back (no whole value is in it), once the command ended. */
static void command_redact_flush(Server *s, Command *c) {
        for (size_t i = 0; i < ELEMENTSOF(c->redact); i++) {
                RedactedOutput ro = { s, c, (Sbx__Stream) i };

                if (c->redact[i])
                        (void) redactor_flush(c->redact[i], redacted_output, &ro);
        }
}

static void on_exited(Server *s, WorkspaceSession *ws, Command *c, const Sbx__Msg *m) {
        /* The verdicts sbx-egress sent while it ran come first (they may wait in this batch). */
        egress_proxy_drain(s);
        if (m->worker_exited->signal)
                command_ended(s, c, false, 0, m->worker_exited->signal);
        else
                command_ended(s, c, true, m->worker_exited->exit_code, 0);
}

static void on_exec_failed(Server *s, WorkspaceSession *ws, Command *c, const Sbx__Msg *m) {
        char line[320];
        int n = snprintf(line, sizeof(line), "[sbx: cannot start the command: %s]\n", m->worker_exec_failed->errmsg);

        (void) command_feed(s, c, TRANSCRIPT_STDERR, line, (size_t) MIN(n, (int) sizeof(line) - 1));
        command_ended(s, c, true, 127, 0);
}

#define IN(state) (1u << (state))

/* What a worker may send: per type the states it may come in, whether its
 * `command` names one of the session's running commands, and its fields'
 * bounds. Anything else, or a message out of place, ends the session. */
static const struct {
        Sbx__MsgType type;
        unsigned states;
        bool names_command;
        const MsgCheck *checks;
        void (*handle)(Server *s, WorkspaceSession *ws, Command *c, const Sbx__Msg *m);
} worker_messages[] = {
        { SBX__MSG_TYPE__MSG_WORKER_READY, IN(SESSION_SETUP) | IN(SESSION_SPAWNING), false, NULL, on_ready },
        { SBX__MSG_TYPE__MSG_WORKER_OUTPUT, IN(SESSION_READY), true,
          (const MsgCheck[]) { MSG_CHECK_LENGTH("data", 0, SBX_OUTPUT_CHUNK_MAX, 0), {} }, on_output },
        { SBX__MSG_TYPE__MSG_WORKER_EXITED, IN(SESSION_READY), true,
          (const MsgCheck[]) { MSG_CHECK_RANGE("exit_code", NULL, 0, 255), MSG_CHECK_RANGE("signal", NULL, 0, 64), {} },
          on_exited },
        { SBX__MSG_TYPE__MSG_WORKER_EXEC_FAILED, IN(SESSION_READY), true, NULL, on_exec_failed },
};

/* The running command a worker message names. */
static Command *message_command(WorkspaceSession *ws, const Sbx__Msg *m) {
        uint32_t number;
        Command *c;

        if (!msg_uint32(msg_body(m), "command", &number))
                return NULL;
        /* From the newest: a claim's session keeps every command it ran. */
        TAILQ_FOREACH_REVERSE(c, &ws->commands, CommandList, session_link)
                if (c->number == number)
                        return c->finished ? NULL : c;
        return NULL;
}

static void on_worker_message(Server *s, WorkspaceSession *ws, const Sbx__Msg *m) {
        char why[160] = "";
        Command *c = NULL;
        size_t i;

        for (i = 0; i < ELEMENTSOF(worker_messages) && worker_messages[i].type != m->type; i++)
                ;
        if (i == ELEMENTSOF(worker_messages))
                snprintf(why, sizeof(why), "message type not allowed from a worker");
        else if (!(worker_messages[i].states & IN(ws->state)))
                snprintf(why, sizeof(why), "message not allowed in the session's state");
        else if (msg_check(msg_body(m), worker_messages[i].checks, why, sizeof(why)) >= 0 &&
                 worker_messages[i].names_command && !(c = message_command(ws, m)))
                snprintf(why, sizeof(why), "message for an unknown or finished command");
        else if (why[0] == '\0') {
                worker_messages[i].handle(s, ws, c, m);
                return;
        }
        session_worker_lost(s, ws, why);
}

static void session_dispatch_worker(Server *s, EventSource *src, uint32_t events) {
        WorkspaceSession *ws = container_of(src, WorkspaceSession, sock_src);

        for (unsigned i = 0; i < SBX_WORKER_MESSAGES_PER_WAKEUP; i++) {
                _cleanup_msg_ Sbx__Msg *m = NULL;
                uint32_t seq;
                int r = wire_recv(src->fd, &m, &seq, NULL, NULL);
                if (r == -EAGAIN)
                        return;
                if (r < 0) {
                        session_worker_lost(s, ws, r == -ECONNRESET ? "worker closed its socket"
                                                                    : "malformed frame from worker");
                        return;
                }
                log_set_context(ws->id);
                on_worker_message(s, ws, m);
                log_set_context(NULL);
                /* Stopped or ended: its socket is no longer watched. */
                if (ws->sock_src.fd < 0)
                        return;
        }
}

static void session_dispatch_pidfd(Server *s, EventSource *src, uint32_t events) {
        WorkspaceSession *ws = container_of(src, WorkspaceSession, pidfd_src);

        if (ws->state == SESSION_DEAD) {
                /* An ending session's PID 1 is gone, and with it its namespaces. */
                TAILQ_REMOVE(&s->ending, ws, link);
                session_release(s, ws);
                return;
        }
        session_worker_lost(s, ws, "worker exited");
}

/* The set-up failed: its commands end with the reason in their transcript. */
static void session_setup_failed(Server *s, WorkspaceSession *ws, int r, const char *why) {
        Command *c;

        log_error_errno(r, "Failed to start workspace session %s of sandbox '%s': %s", ws->id, ws->sandbox->name,
                        why);
        pending_answer_error(s, &ws->creator, r, "cannot start a workspace session: %s", why);
        (void) session_move_commands(s, ws);
        TAILQ_FOREACH(c, &ws->commands, session_link) {
                char line[300];
                int n;
                if (c->finished)
                        continue;
                n = snprintf(line, sizeof(line), "[sbx: cannot start the workspace session: %s]\n", why);
                (void) command_feed(s, c, TRANSCRIPT_STDERR, line, (size_t) MIN(n, (int) sizeof(line) - 1));
                command_record_end(s, c, true, 127, 0);
        }
        session_destroy(s, ws);
}

static void session_dispatch_setup(Server *s, EventSource *src, uint32_t events) {
        WorkspaceSession *ws = container_of(src, WorkspaceSession, setup_src);
        char why[200] = "";
        int r;

        ws->spawn.sync = src->fd;
        r = session_spawn_continue(&ws->spawn, why, sizeof(why));
        if (r > 0 && ws->spawn.pidfd >= 0) {
                /* The spawner made the child: from now on its end is watched. */
                int k;
                ws->pid = ws->spawn.pid;
                k = server_watch(s, &ws->pidfd_src, TAKE_FD(ws->spawn.pidfd), EPOLLIN);
                if (k < 0) {
                        r = k;
                        snprintf(why, sizeof(why), "cannot watch the session: %s", strerror(-r));
                }
        }
        if (r > 0)
                return;
        if (r == 0)
                session_setup_done(s, ws);
        else
                session_setup_failed(s, ws, r, why);
}
