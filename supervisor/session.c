/* Workspace sessions (a worker inside its namespaces) and the commands they
 * run: starting, output into the transcript, yields, timeouts, cancellation,
 * and the publish-then-destroy end of automatic sessions. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "sbx-limits.h"
#include "log.h"
#include "ns.h"
#include "publish.h"
#include "sbxd.h"
#include "snapshot.h"

#define KILL_GRACE_USEC (2ull * 1000000ull)   /* a killed group that lingers costs its session */

static const char *const command_env[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root", "USER=root", "LOGNAME=root", "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1",
        "PAGER=cat", "GIT_PAGER=cat", "PYTHONDONTWRITEBYTECODE=1",
};

static void session_dispatch_worker(Server *s, EventSource *src, uint32_t events);
static void session_dispatch_pidfd(Server *s, EventSource *src, uint32_t events);
static void session_dispatch_setup(Server *s, EventSource *src, uint32_t events);
static void session_setup_done(Server *s, WorkspaceSession *ws);
static void command_finish(Server *s, Command *c, bool exited, int exit_code, int sig);

static int make_id(const char *prefix, char *buf, size_t size) {
        char hex[17];
        int r = random_hex(hex, 12);
        if (r < 0)
                return r;
        snprintf(buf, size, "%s%s", prefix, hex);
        return 0;
}

static int worker_send(WorkspaceSession *ws, Sbx__Msg *m) {
        /* The worker reads promptly; a full socket means a wedged worker. */
        return wire_send(ws->sock_src.fd, m, 0, NULL, 0);
}

int session_new(Server *s, Sandbox *sb, bool automatic, bool publish_policy, WorkspaceSession **ret, char *errmsg,
                size_t errmsg_size) {
        _cleanup_free_ char *lowerdirs = NULL;
        WorkspaceSession *ws;
        SpawnState st;
        CgroupLimits limits = {
                .memory_bytes = sb->memory_bytes,
                .pids_max = sb->pids_max,
                .cpu_weight = sb->cpu_weight,
        };
        unsigned live = 0;
        int r;

        TAILQ_FOREACH(ws, &s->sessions, link)
                live++;
        /* Spares give way to sessions someone asked for. */
        if (live >= SBX_MAX_LIVE_SESSIONS && spare_evict(s, NULL))
                live--;
        if (sb->live_sessions >= SBX_MAX_SESSIONS_PER_SANDBOX)
                (void) spare_evict(s, sb);
        if (live >= SBX_MAX_LIVE_SESSIONS) {
                snprintf(errmsg, errmsg_size, "too many live workspace sessions (limit %u)", SBX_MAX_LIVE_SESSIONS);
                return -EAGAIN;
        }
        if (sb->live_sessions >= SBX_MAX_SESSIONS_PER_SANDBOX) {
                snprintf(errmsg, errmsg_size, "sandbox '%s' has too many workspace sessions (limit %u); finalize some",
                         sb->name, SBX_MAX_SESSIONS_PER_SANDBOX);
                return -EAGAIN;
        }

        ws = calloc(1, sizeof(*ws));
        if (!ws)
                return -ENOMEM;
        ws->sandbox = sb;
        ws->automatic = automatic;
        ws->publish_policy = publish_policy;
        ws->created_unix = time(NULL);
        ws->upper_fd = ws->workspace_fd = -EBADF;
        ws->sock_src.fd = ws->pidfd_src.fd = ws->setup_src.fd = -EBADF;
        ws->base_layer = sb->top_layer;
        ws->base_squashed = sb->squashed;
        TAILQ_INIT(&ws->commands);
        r = make_id("ws-", ws->id, sizeof(ws->id));
        if (r < 0)
                goto fail;

        if (s->cgroups) {
                r = cgroup_session_new(s->cgroups, &limits, &ws->cgroup);
                if (r < 0) {
                        snprintf(errmsg, errmsg_size, "cannot create the session's cgroup: %s", strerror(-r));
                        goto fail;
                }
        }

        r = snapshot_lowerdirs(sb->squashed, sb->top_layer, &lowerdirs);
        if (r < 0)
                goto fail;
        SpawnParams p = {
                .uid_base = sb->uid_base,
                .uid_count = sb->uid_count,
                .disk_bytes = s->cfg.session_disk_bytes,
        };
        if (strlcpy(p.session_id, ws->id, sizeof(p.session_id)) >= sizeof(p.session_id) ||
            strlcpy(p.run_dir, s->cfg.run_dir, sizeof(p.run_dir)) >= sizeof(p.run_dir) ||
            strlcpy(p.image_dir, s->image_dir, sizeof(p.image_dir)) >= sizeof(p.image_dir) ||
            strlcpy(p.lowerdirs, lowerdirs, sizeof(p.lowerdirs)) >= sizeof(p.lowerdirs) ||
            (size_t) snprintf(p.layers_dir, sizeof(p.layers_dir), "%s/sandboxes/%s/layers", s->cfg.state_dir,
                              sb->id) >= sizeof(p.layers_dir)) {
                r = -ENAMETOOLONG;
                snprintf(errmsg, errmsg_size, "cannot start a workspace session: a path or the layer list is too long");
                goto fail;
        }
        char why[200] = "";
        r = session_spawn_begin(s->spawner, &p, ws->cgroup, &st, why, sizeof(why));
        if (r < 0) {
                log_error_errno(r, "Failed to start workspace session %s of sandbox '%s': %s", ws->id, sb->name, why);
                snprintf(errmsg, errmsg_size, "cannot start a workspace session: %s", why);
                goto fail;
        }
        /* The child sets itself up while sbxd serves others; commands wait for READY. */
        ws->start_usec = now_usec();
        ws->state = SESSION_SETUP;
        ws->sock_src.dispatch = session_dispatch_worker;
        ws->pidfd_src.dispatch = session_dispatch_pidfd;
        ws->setup_src.dispatch = session_dispatch_setup;
        (void) fd_nonblock(st.sock, true);
        r = server_watch(s, &ws->sock_src, TAKE_FD(st.sock), EPOLLIN);
        if (r >= 0)
                r = server_watch(s, &ws->setup_src, TAKE_FD(st.sync), EPOLLIN);
        ws->spawn = st;
        TAILQ_INSERT_TAIL(&s->sessions, ws, link);
        sb->live_sessions++;
        if (r < 0) {
                snprintf(errmsg, errmsg_size, "cannot watch the session: %s", strerror(-r));
                session_destroy(s, ws);
                return r;
        }
        *ret = ws;
        return 0;
fail:
        if (ws->cgroup)
                cgroup_session_release(ws->cgroup);
        free(ws);
        return r < 0 ? r : -EIO;
}

WorkspaceSession *session_find(Server *s, const Sandbox *sb, const char *id) {
        WorkspaceSession *ws;
        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->sandbox == sb && !ws->spare && ws->state != SESSION_DEAD && strcmp(ws->id, id) == 0)
                        return ws;
        return NULL;
}

static void session_kill_worker(Server *s, WorkspaceSession *ws) {
        if (ws->pidfd_src.fd < 0)
                return;
        pidfd_kill_wait(ws->pidfd_src.fd);
        server_unwatch(s, &ws->pidfd_src);
}

/* No worker any more: whatever still ran died with it. The changes stay (upper_fd).
 * keep_worker: the worker alone is left; it is ended later (session_free), and
 * no more events of it are handled. */
static void session_stop(Server *s, WorkspaceSession *ws, bool keep_worker) {
        Command *c;

        session_answer_creator(s, ws, -ECANCELED, "it stopped before it was ready");
        if (!keep_worker)
                session_kill_worker(s, ws);
        server_unwatch(s, &ws->sock_src);
        server_unwatch(s, &ws->setup_src);
        ws->spawn.sync = ws->spawn.pidfd = ws->spawn.sock = -EBADF; /* watched, now closed */
        ws->spawn.pid = 0;
        /* Stopped during set-up: whatever upper it got is still its upper. */
        if (ws->upper_fd < 0 && ws->spawn.upper_fd >= 0) {
                ws->upper_fd = TAKE_FD(ws->spawn.upper_fd);
                ws->workspace_fd = TAKE_FD(ws->spawn.workspace_fd);
        }
        spawn_state_done(&ws->spawn);
        TAILQ_FOREACH(c, &ws->commands, session_link)
                if (!c->finished)
                        command_finish(s, c, false, 0, SIGKILL);
        if (ws->state != SESSION_DEAD)
                ws->state = SESSION_STOPPED;
}

/* The last of a session: its PID 1 is gone (or is waited for here). */
static void session_release(Server *s, WorkspaceSession *ws) {
        unsigned removed;

        session_kill_worker(s, ws);
        if (ws->cgroup)
                ws->cgroup = cgroup_session_release(ws->cgroup);
        /* Layers it kept from compaction may go now. */
        (void) snapshot_collect(s, ws->sandbox, &removed);
        log_debug("Workspace session %s is gone", ws->id);
        free(ws);
}

/* refill_spares: after the answers, start the sandbox's spares (spare.c).
 * A worker still running is killed; the kernel's teardown of the session's
 * namespaces and mounts is then not waited for here: the session waits in
 * s->ending until its pidfd says PID 1 is gone (session_dispatch_pidfd). */
static void session_free(Server *s, WorkspaceSession *ws, bool refill_spares) {
        Command *c;

        session_answer_creator(s, ws, -ECANCELED, "it ended before it was ready");
        ws->state = SESSION_DEAD;
        /* Answer the waiters only now, so the answer carries the publication. */
        while ((c = TAILQ_FIRST(&ws->commands))) {
                Waiter *w;
                TAILQ_REMOVE(&ws->commands, c, session_link);
                while ((w = TAILQ_FIRST(&c->waiters)))
                        waiter_answer(s, w);
                c->session = NULL;
                TAILQ_REMOVE(&s->commands, c, link);
                transcript_free(c->transcript);
                free(c->cmd);
                free(c);
        }
        ws->upper_fd = safe_close(ws->upper_fd);
        ws->workspace_fd = safe_close(ws->workspace_fd);
        ws->sandbox->live_sessions--;
        if (ws->spare)
                ws->sandbox->spares--;
        ws->spare = false;
        TAILQ_REMOVE(&s->sessions, ws, link);
        if (refill_spares)
                spares_refill(s, ws->sandbox);
        if (ws->pidfd_src.fd >= 0 &&
            syscall(SYS_pidfd_send_signal, ws->pidfd_src.fd, SIGKILL, NULL, 0) >= 0) {
                TAILQ_INSERT_TAIL(&s->ending, ws, link);
                return;
        }
        session_release(s, ws);
}

void session_destroy(Server *s, WorkspaceSession *ws) {
        /* Nothing to publish: the worker and everything else are killed in session_free. */
        session_stop(s, ws, true);
        session_free(s, ws, false);
}

void sessions_wait_ended(Server *s, const Sandbox *sb) {
        WorkspaceSession *ws, *next;

        TAILQ_FOREACH_SAFE(ws, &s->ending, link, next)
                if (!sb || ws->sandbox == sb) {
                        TAILQ_REMOVE(&s->ending, ws, link);
                        session_release(s, ws);
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

int session_finalize(Server *s, WorkspaceSession *ws, bool publish, bool overwrite, PublishResult *ret) {
        char owner[64];
        PublishResult res = {};
        bool worker_alone = false;
        size_t procs;
        int r = 0;

        if (ws->running > 0)
                return -EBUSY;
        /* Nothing the commands started lives on, only the worker, which never
         * writes to /workspace: publish first and end it after the answer. */
        if (publish && ws->automatic && ws->cgroup && ws->state == SESSION_READY &&
            cgroup_session_processes(ws->cgroup, &procs) >= 0 && procs <= 1)
                worker_alone = true;
        session_stop(s, ws, worker_alone);
        /* A session that never got an upper has nothing to publish. */
        if (publish && ws->upper_fd >= 0) {
                _cleanup_close_ int upper = openat(ws->upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                snprintf(owner, sizeof(owner), "workspace_session:%s", ws->id);
                r = upper < 0 ? -errno
                              : publish_tree(s, ws->sandbox, upper, owner, ws->base_layer, overwrite, -1, NULL, &res);
                if (r < 0)
                        log_error_errno(r, "Failed to publish workspace session %s of sandbox '%s': %s", ws->id,
                                        ws->sandbox->name, res.error[0] ? res.error : strerror(-r));
                else if (res.n_conflicts > 0)
                        log_info("Publication of %s refused: %zu conflicting paths", ws->id, res.n_conflicts);
                else if (res.published)
                        log_info("Published layer %u of sandbox '%s' from %s (%u paths)", res.layer,
                                 ws->sandbox->name, ws->id, res.changed_paths);
                /* The command that ended an automatic session answers with the publication. */
                if (ws->automatic && !TAILQ_EMPTY(&ws->commands))
                        publication_to_command(ws, TAILQ_LAST(&ws->commands, CommandList), r, &res);
                if (r < 0 || res.n_conflicts > 0) {
                        /* Nothing is lost: the session stays, to retry with overwrite or discard. */
                        session_kill_worker(s, ws);
                        ws->conflicted = r >= 0;
                        *ret = res;
                        return r;
                }
        }
        *ret = res;
        /* The next automatic command of a read-only stream finds a spare. */
        session_free(s, ws, ws->automatic && publish && !res.published);
        return 0;
}

static int command_send_exec(WorkspaceSession *ws, Command *c) {
        Sbx__Msg m = SBX__MSG__INIT;
        Sbx__SupervisorExec e = SBX__SUPERVISOR_EXEC__INIT;

        e.command = c->number;
        e.cmd = c->cmd;
        e.n_env = ELEMENTSOF(command_env);
        e.env = (char **) command_env;
        e.cwd = (char *) "/workspace";
        e.separate_streams = transcript_has_streams(c->transcript);
        m.type = SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC;
        m.body_case = SBX__MSG__BODY_SUPERVISOR_EXEC;
        m.supervisor_exec = &e;
        c->sent = true;
        c->start_usec = now_usec();
        return worker_send(ws, &m);
}

int command_start(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, bool separate_streams,
                  Command **ret) {
        Command *c;
        unsigned running = 0;
        int r;

        TAILQ_FOREACH(c, &ws->commands, session_link)
                if (!c->finished)
                        running++;
        if (running >= SBX_MAX_COMMANDS_PER_SESSION)
                return -EAGAIN;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        TAILQ_INIT(&c->waiters);
        sbx__publication__init(&c->publication);
        c->cmd = strdup(cmd);
        if (!c->cmd) {
                free(c);
                return -ENOMEM;
        }
        r = make_id("cmd-", c->rec.id, sizeof(c->rec.id));
        if (r >= 0 && separate_streams)
                r = transcript_create_streams(s->transcripts_fd, c->rec.id, s->cfg.transcript_cap_bytes, &c->transcript);
        else if (r >= 0)
                r = transcript_create(s->transcripts_fd, c->rec.id, s->cfg.transcript_cap_bytes, &c->transcript);
        if (r < 0) {
                free(c->cmd);
                free(c);
                return r;
        }
        strlcpy(c->rec.sandbox, ws->sandbox->id, sizeof(c->rec.sandbox));
        strlcpy(c->rec.workspace_session, ws->id, sizeof(c->rec.workspace_session));
        strlcpy(c->rec.status, "running", sizeof(c->rec.status));
        c->rec.started_unix_usec = now_unix_usec();
        c->session = ws;
        c->number = ++ws->next_command;
        c->start_usec = now_usec();
        c->deadline_usec = c->start_usec + timeout_ms * 1000ull;

        r = store_command_insert(s->store, &c->rec, cmd);
        if (r < 0) {
                transcript_free(c->transcript);
                (void) transcript_remove(s->transcripts_fd, c->rec.id);
                free(c->cmd);
                free(c);
                return r;
        }
        TAILQ_INSERT_TAIL(&s->commands, c, link);
        TAILQ_INSERT_TAIL(&ws->commands, c, session_link);
        ws->running++;
        if (ws->state == SESSION_READY) {
                r = command_send_exec(ws, c);
                if (r < 0) {
                        log_error_errno(r, "Failed to send command %s to worker of %s: %m", c->rec.id, ws->id);
                        command_finish(s, c, false, 0, SIGKILL);
                }
        }
        log_info("Command %s started in %s of sandbox '%s'", c->rec.id, ws->id, ws->sandbox->name);
        *ret = c;
        return 0;
}

Command *command_find_live(Server *s, const char *id) {
        Command *c;
        TAILQ_FOREACH(c, &s->commands, link)
                if (strcmp(c->rec.id, id) == 0)
                        return c;
        return NULL;
}

static int command_signal(Command *c, int sig) {
        Sbx__Msg m = SBX__MSG__INIT;
        Sbx__SupervisorSignal sg = SBX__SUPERVISOR_SIGNAL__INIT;

        if (!c->session || c->session->state != SESSION_READY || !c->sent)
                return -ESRCH;
        sg.command = c->number;
        sg.signal = sig;
        m.type = SBX__MSG_TYPE__MSG_SUPERVISOR_SIGNAL;
        m.body_case = SBX__MSG__BODY_SUPERVISOR_SIGNAL;
        m.supervisor_signal = &sg;
        return worker_send(c->session, &m);
}

int command_write_stdin(Server *s, Command *c, const void *data, size_t len, bool close_stdin) {
        Sbx__Msg m = SBX__MSG__INIT;
        Sbx__SupervisorStdin in = SBX__SUPERVISOR_STDIN__INIT;

        if (c->finished)
                return -EPIPE;
        if (!c->session || c->session->state != SESSION_READY || !c->sent)
                return -EAGAIN;
        in.command = c->number;
        in.data.data = (uint8_t *) data;
        in.data.len = len;
        in.close = close_stdin;
        m.type = SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN;
        m.body_case = SBX__MSG__BODY_SUPERVISOR_STDIN;
        m.supervisor_stdin = &in;
        return worker_send(c->session, &m);
}

static void command_kill(Server *s, Command *c) {
        if (command_signal(c, SIGKILL) < 0 && c->session)
                c->kill_deadline_usec = now_usec(); /* no worker to ask: end the session now */
        else
                c->kill_deadline_usec = now_usec() + KILL_GRACE_USEC;
}

void command_cancel(Server *s, Command *c) {
        if (c->finished)
                return;
        c->cancelled = true;
        log_info("Command %s cancelled", c->rec.id);
        command_kill(s, c);
}

/* Record how the command ended, durably; an automatic session ends with its last command. */
static void command_finish(Server *s, Command *c, bool exited, int exit_code, int sig) {
        WorkspaceSession *ws = c->session;
        uint64_t oom = 0, pids = 0;
        int r;

        if (c->finished)
                return;
        c->finished = true;
        c->end_usec = now_usec();
        r = transcript_finish(c->transcript);
        if (r < 0)
                log_warning_errno(r, "Failed to flush transcript of %s, ignoring: %m", c->rec.id);
        if (ws && ws->cgroup) {
                (void) cgroup_session_oom_kills(ws->cgroup, &oom);
                (void) cgroup_session_pids_max_hits(ws->cgroup, &pids);
        }
        c->rec.has_exit_code = exited;
        c->rec.exit_code = exit_code;
        c->rec.signal = exited ? 0 : sig;
        if (c->supervisor_lost) {
                strlcpy(c->rec.status, "error", sizeof(c->rec.status));
                strlcpy(c->rec.end_reason, "supervisor_lost", sizeof(c->rec.end_reason));
        } else if (c->cancelled) {
                strlcpy(c->rec.status, "cancelled", sizeof(c->rec.status));
                strlcpy(c->rec.end_reason, "cancelled", sizeof(c->rec.end_reason));
        } else if (c->timed_out) {
                strlcpy(c->rec.status, "timed_out", sizeof(c->rec.status));
                strlcpy(c->rec.end_reason, "timeout", sizeof(c->rec.end_reason));
        } else {
                strlcpy(c->rec.status, exited && exit_code == 0 ? "ok" : "error", sizeof(c->rec.status));
                /* The cgroup counts events since the session got it (pooled cgroups). */
                if (oom > 0)
                        strlcpy(c->rec.end_reason, "out_of_memory", sizeof(c->rec.end_reason));
                else if (pids > 0 && !(exited && exit_code == 0))
                        strlcpy(c->rec.end_reason, "pids_limit", sizeof(c->rec.end_reason));
                else
                        strlcpy(c->rec.end_reason, exited ? "exit" : "signal", sizeof(c->rec.end_reason));
        }
        c->rec.ended_unix_usec = now_unix_usec();
        c->rec.raw_bytes = transcript_raw_bytes(c->transcript);
        r = store_command_finish(s->store, &c->rec);
        if (r < 0)
                log_error_errno(r, "Failed to record the end of command %s: %m", c->rec.id);
        log_info("Command %s ended: %s (%s %d)", c->rec.id, c->rec.status, c->rec.end_reason,
                 exited ? exit_code : sig);
        if (ws)
                ws->running--;
}

/* After a command ended: an automatic session with nothing left running publishes and goes.
 * Returns true if the session was destroyed. */
static bool command_settle(Server *s, Command *c) {
        WorkspaceSession *ws = c->session;
        Waiter *w;

        if (ws && ws->automatic && ws->running == 0 && ws->state != SESSION_DEAD) {
                PublishResult res = {};
                int r = session_finalize(s, ws, true, false, &res);
                bool kept = r < 0 || res.n_conflicts > 0;

                if (kept) {
                        c->publication.n_conflicts = res.n_conflicts;
                        c->publication.conflicts = res.conflicts;
                        while ((w = TAILQ_FIRST(&c->waiters)))
                                waiter_answer(s, w);
                        c->publication.n_conflicts = 0;
                        c->publication.conflicts = NULL;
                } else {
                        /* Freed with its session: nothing to answer here. */
                }
                publish_result_done(&res);
                return !kept;
        }
        while ((w = TAILQ_FIRST(&c->waiters)))
                waiter_answer(s, w);
        return false;
}

/* The worker is gone or misbehaved: an automatic session publishes what it has
 * and ends; a managed one keeps its changes until it is finalized. Returns true:
 * the session's socket is no longer watched. */
static bool session_worker_lost(Server *s, WorkspaceSession *ws, const char *why) {
        Command *c, *last = NULL;

        log_warning("Lost worker of %s: %s", ws->id, why);
        if (ws->spare) {
                session_destroy(s, ws);
                return true;
        }
        session_stop(s, ws, false);
        TAILQ_FOREACH(c, &ws->commands, session_link)
                last = c;
        if (ws->automatic && last) {
                (void) command_settle(s, last);
                return true;
        }
        TAILQ_FOREACH(c, &ws->commands, session_link) {
                Waiter *w;
                while ((w = TAILQ_FIRST(&c->waiters)))
                        waiter_answer(s, w);
        }
        return true;
}

/* Returns true if the session was destroyed. */
static bool on_worker_message(Server *s, WorkspaceSession *ws, Sbx__Msg *m) {
        Command *c = NULL;
        uint32_t number = 0;

        switch (m->type) {
        case SBX__MSG_TYPE__MSG_WORKER_READY:
                /* It can overtake the set-up channel's EOF: the exec happened. */
                if (ws->state == SESSION_SETUP && ws->spawn.mapped)
                        session_setup_done(s, ws);
                if (ws->state != SESSION_SPAWNING)
                        return session_worker_lost(s, ws, "unexpected READY");
                ws->state = SESSION_READY;
                session_answer_creator(s, ws, 0, NULL);
                TAILQ_FOREACH(c, &ws->commands, session_link)
                        if (!c->sent && !c->finished && command_send_exec(ws, c) < 0)
                                return session_worker_lost(s, ws, "cannot send a command");
                return false;
        case SBX__MSG_TYPE__MSG_WORKER_OUTPUT:
                number = m->worker_output->command;
                break;
        case SBX__MSG_TYPE__MSG_WORKER_EXITED:
                number = m->worker_exited->command;
                break;
        case SBX__MSG_TYPE__MSG_WORKER_EXEC_FAILED:
                number = m->worker_exec_failed->command;
                break;
        default:
                return session_worker_lost(s, ws, "message type not allowed from a worker");
        }
        if (ws->state != SESSION_READY)
                return session_worker_lost(s, ws, "message before READY");
        TAILQ_FOREACH(c, &ws->commands, session_link)
                if (c->number == number)
                        break;
        if (!c || c->finished)
                return session_worker_lost(s, ws, "message for an unknown or finished command");
        switch (m->type) {
        case SBX__MSG_TYPE__MSG_WORKER_OUTPUT: {
                /* The same numbers (static asserts below): a tag the transcript does not take is -EINVAL. */
                int r = transcript_feed_stream(c->transcript, (TranscriptStream) m->worker_output->stream,
                                               m->worker_output->data.data, m->worker_output->data.len);
                if (r < 0)
                        log_warning_errno(r, "Failed to store output of %s, ignoring: %m", c->rec.id);
                return false;
        }
        case SBX__MSG_TYPE__MSG_WORKER_EXITED:
                if (m->worker_exited->signal)
                        command_finish(s, c, false, 0, m->worker_exited->signal);
                else
                        command_finish(s, c, true, m->worker_exited->exit_code, 0);
                return command_settle(s, c);
        case SBX__MSG_TYPE__MSG_WORKER_EXEC_FAILED: {
                char line[320];
                int n = snprintf(line, sizeof(line), "[sbx: cannot start the command: %s]\n",
                                 m->worker_exec_failed->errmsg);
                (void) transcript_feed_stream(c->transcript, TRANSCRIPT_STDERR, line,
                                              (size_t) MIN(n, (int) sizeof(line) - 1));
                command_finish(s, c, true, 127, 0);
                return command_settle(s, c);
        }
        default:
                return false;
        }
}

static void session_dispatch_worker(Server *s, EventSource *src, uint32_t events) {
        WorkspaceSession *ws = (WorkspaceSession *) ((char *) src - offsetof(WorkspaceSession, sock_src));

        /* Bounded per wakeup, so one chatty worker cannot starve the others. */
        for (unsigned i = 0; i < 64; i++) {
                _cleanup_msg_ Sbx__Msg *m = NULL;
                uint32_t seq;
                int r = wire_recv(src->fd, &m, &seq, NULL, NULL);
                if (r == -EAGAIN)
                        return;
                if (r < 0) {
                        (void) session_worker_lost(s, ws, r == -ECONNRESET ? "worker closed its socket"
                                                                           : "malformed frame from worker");
                        return;
                }
                log_set_context(ws->id);
                bool gone = on_worker_message(s, ws, m);
                log_set_context(NULL);
                /* Freed, or stopped (its socket no longer watched). */
                if (gone || ws->sock_src.fd < 0)
                        return;
        }
}

static void session_dispatch_pidfd(Server *s, EventSource *src, uint32_t events) {
        WorkspaceSession *ws = (WorkspaceSession *) ((char *) src - offsetof(WorkspaceSession, pidfd_src));

        if (ws->state == SESSION_DEAD) {
                /* An ending session's PID 1 is gone, and with it its namespaces. */
                TAILQ_REMOVE(&s->ending, ws, link);
                session_release(s, ws);
                return;
        }
        (void) session_worker_lost(s, ws, "worker exited");
}

/* ---- waiters and replies ---------------------------------------------------- */

void waiter_free(Waiter *w) {
        if (!w)
                return;
        if (w->command)
                TAILQ_REMOVE(&w->command->waiters, w, command_link);
        if (w->client)
                TAILQ_REMOVE(&w->client->waiters, w, client_link);
        free(w);
}

void command_add_waiter(Server *s, Command *c, Client *client, uint32_t seq, unsigned long long call_start,
                        uint64_t yield_ms) {
        Waiter *w = calloc(1, sizeof(*w));
        if (!w) {
                client_reply_error(s, client, seq, -ENOMEM, "out of memory");
                return;
        }
        w->client = client;
        w->command = c;
        w->seq = seq;
        w->call_start_usec = call_start;
        w->deadline_usec = call_start + yield_ms * 1000ull;
        TAILQ_INSERT_TAIL(&c->waiters, w, command_link);
        TAILQ_INSERT_TAIL(&client->waiters, w, client_link);
        if (c->finished)
                waiter_answer(s, w);
}

static void fill_output(Sbx__CommandOutput *o, const StoreCommand *rec, double total_seconds) {
        o->command_session = (char *) rec->id;
        o->workspace_session = (char *) rec->workspace_session;
        o->status = (char *) rec->status;
        o->has_exit_code = rec->has_exit_code;
        o->exit_code = rec->exit_code;
        o->signal = rec->signal;
        o->end_reason = (char *) rec->end_reason;
        o->command_total_time_seconds = total_seconds;
}

_Static_assert((int) TRANSCRIPT_MERGED == SBX__STREAM__STREAM_MERGED &&
               (int) TRANSCRIPT_STDOUT == SBX__STREAM__STREAM_STDOUT &&
               (int) TRANSCRIPT_STDERR == SBX__STREAM__STREAM_STDERR, "one numbering of streams");

static int read_window(Transcript *t, TranscriptStream stream, uint64_t start, uint64_t limit, Sbx__CommandOutput *o,
                       char **ret_text) {
        char *text = NULL;
        size_t len = 0;
        uint64_t end = 0, total;
        int r;

        r = transcript_read_stream(t, stream, start, limit, SBX_RESULT_TEXT_BUDGET, &text, &len, &end);
        if (r < 0)
                return r;
        total = transcript_stream_total_lines(t, stream);
        o->start_offset = MIN(start, total);
        o->end_offset = end;
        o->total_lines = total;
        o->output.data = (uint8_t *) text;
        o->output.len = len;
        *ret_text = text;
        return 0;
}

static uint64_t token_count(uint64_t raw_bytes) {
        return (raw_bytes + 3) / 4;
}

/* The publication of a terminal command of an automatic session, as sbxd holds it. */
static void command_publication(Command *c, Sbx__CommandOutput *o) {
        if (!c->has_publication)
                return;
        c->publication.owner = c->publication_owner;
        c->publication.error = c->publication_error;
        o->publication = &c->publication;
}

/* A yield: the lines this caller has not been given, at most SBX_WINDOW_MAX_LINES, the newest. */
void waiter_answer(Server *s, Waiter *w) {
        Command *c = w->command;
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__CommandOutput o = SBX__COMMAND_OUTPUT__INIT;
        _cleanup_free_ char *text = NULL;
        unsigned long long now = now_usec();
        uint64_t total = transcript_total_lines(c->transcript), start;
        int r;

        start = c->delivered;
        if (total > start + SBX_WINDOW_MAX_LINES)
                start = total - SBX_WINDOW_MAX_LINES;
        fill_output(&o, &c->rec, (double) ((c->finished ? c->end_usec : now) - c->start_usec) / 1e6);
        o.wall_time_seconds = (double) (now - w->call_start_usec) / 1e6;
        o.original_token_count = token_count(transcript_raw_bytes(c->transcript));
        r = read_window(c->transcript, TRANSCRIPT_MERGED, start, SBX_WINDOW_MAX_LINES, &o, &text);
        if (r < 0) {
                client_reply_error(s, w->client, w->seq, r, "cannot read the transcript of %s: %s", c->rec.id,
                                   strerror(-r));
                waiter_free(w);
                return;
        }
        /* A pending last line may still change: it is given again next time. */
        c->delivered = MAX(c->delivered, MIN(o.end_offset, transcript_committed_lines(c->transcript)));
        command_publication(c, &o);
        reply.body_case = SBX__REPLY__BODY_COMMAND;
        reply.command = &o;
        client_reply(s, w->client, w->seq, &reply);
        waiter_free(w);
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
 * nothing published. Null (no change to o) while the session lives. */
static int stored_publication(Server *s, const Sandbox *sb, const StoreCommand *rec, Sbx__Publication *p,
                              char *owner, size_t owner_size, Sbx__CommandOutput *o) {
        OwnedLayer l = { .owner = owner };
        int r;

        if (strcmp(rec->status, "running") == 0 || session_find(s, sb, rec->workspace_session))
                return 0;
        snprintf(owner, owner_size, "workspace_session:%s", rec->workspace_session);
        r = store_layer_foreach(s->store, sb->id, owned_layer_cb, &l);
        if (r < 0)
                return r;
        p->published = l.found;
        p->layer = l.found ? l.layer : sb->top_layer;
        p->changed_paths = l.changed_paths;
        p->owner = owner;
        o->publication = p;
        return 0;
}

int command_read_reply(Server *s, const char *id, const Sandbox *sb, TranscriptStream stream, uint64_t start,
                       uint64_t limit, Client *client, uint32_t seq) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__CommandOutput o = SBX__COMMAND_OUTPUT__INIT;
        Sbx__Publication pub = SBX__PUBLICATION__INIT;
        char owner[64];
        _cleanup_free_ char *text = NULL;
        _cleanup_(transcript_freep) Transcript *opened = NULL;
        Transcript *t;
        StoreCommand rec;
        Command *c = command_find_live(s, id);
        double total_seconds;
        int r;

        if (c) {
                if (strcmp(c->rec.sandbox, sb->id) != 0)
                        return -ENOENT;
                rec = c->rec;
                t = c->transcript;
                total_seconds = (double) ((c->finished ? c->end_usec : now_usec()) - c->start_usec) / 1e6;
                o.original_token_count = token_count(transcript_raw_bytes(t));
        } else {
                r = store_command_get(s->store, id, &rec);
                if (r < 0)
                        return r;
                if (strcmp(rec.sandbox, sb->id) != 0)
                        return -ENOENT;
                r = transcript_open(s->transcripts_fd, id, &opened);
                if (r < 0)
                        return r;
                t = opened;
                total_seconds = rec.ended_unix_usec > rec.started_unix_usec
                                        ? (double) (rec.ended_unix_usec - rec.started_unix_usec) / 1e6
                                        : 0.0;
                o.original_token_count = token_count(rec.raw_bytes);
        }
        fill_output(&o, &rec, total_seconds);
        if (c)
                command_publication(c, &o);
        else {
                r = stored_publication(s, sb, &rec, &pub, owner, sizeof(owner), &o);
                if (r < 0)
                        return r;
        }
        r = read_window(t, stream, start, limit, &o, &text);
        if (r < 0)
                return r;
        reply.body_case = SBX__REPLY__BODY_COMMAND;
        reply.command = &o;
        client_reply(s, client, seq, &reply);
        return 0;
}

/* ---- deadlines ------------------------------------------------------------------ */

unsigned long long commands_next_deadline(Server *s) {
        unsigned long long next = ~0ull;
        Command *c;
        Waiter *w;

        TAILQ_FOREACH(c, &s->commands, link) {
                TAILQ_FOREACH(w, &c->waiters, command_link)
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
                        if (w->deadline_usec <= now)
                                waiter_answer(s, w);
                if (c->finished)
                        continue;
                if (!c->timed_out && !c->kill_deadline_usec && c->deadline_usec <= now) {
                        c->timed_out = true;
                        log_info("Command %s timed out", c->rec.id);
                        command_kill(s, c);
                }
                if (c->kill_deadline_usec && c->kill_deadline_usec <= now && c->session) {
                        /* The group did not die (or escaped it): the session goes. */
                        log_warning("Command %s outlived SIGKILL of its process group, ending session %s",
                                    c->rec.id, c->session->id);
                        (void) session_worker_lost(s, c->session, "a killed command outlived its grace time");
                        goto restart; /* the lists changed under us */
                }
        }
}

/* The session's set-up channel: maps to write, then EOF once the init runs as the worker. */
static void session_setup_done(Server *s, WorkspaceSession *ws) {
        ws->upper_fd = TAKE_FD(ws->spawn.upper_fd);
        ws->workspace_fd = TAKE_FD(ws->spawn.workspace_fd);
        server_unwatch(s, &ws->setup_src);
        ws->spawn.sync = -EBADF;
        if (ws->state == SESSION_SETUP)
                ws->state = SESSION_SPAWNING;
        log_debug("Workspace session %s of sandbox '%s' set up in %llu us (worker pid %d, base layer %u)", ws->id,
                  ws->sandbox->name, now_usec() - ws->start_usec, (int) ws->pid, ws->base_layer);
}

static void session_dispatch_setup(Server *s, EventSource *src, uint32_t events) {
        WorkspaceSession *ws = (WorkspaceSession *) ((char *) src - offsetof(WorkspaceSession, setup_src));
        char why[200] = "";
        Command *c;
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
        if (r == 0) {
                session_setup_done(s, ws);
                return;
        }
        log_error_errno(r, "Failed to start workspace session %s of sandbox '%s': %s", ws->id, ws->sandbox->name,
                        why);
        session_answer_creator(s, ws, r, why);
        /* Its commands end with the reason in their transcript. */
        TAILQ_FOREACH(c, &ws->commands, session_link) {
                char line[300];
                int n;
                if (c->finished)
                        continue;
                n = snprintf(line, sizeof(line), "[sbx: cannot start the workspace session: %s]\n", why);
                (void) transcript_feed_stream(c->transcript, TRANSCRIPT_STDERR, line,
                                              (size_t) MIN(n, (int) sizeof(line) - 1));
                command_finish(s, c, true, 127, 0);
        }
        session_destroy(s, ws);
}
