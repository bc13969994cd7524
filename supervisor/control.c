/* sbxd.sock: accepting clients (sandbox-mcp, sbxctl), authenticating them by
 * SO_PEERCRED, and dispatching their requests. A bad frame drops that client;
 * an invalid request gets an error reply. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "layer.h"
#include "sbx-limits.h"
#include "log.h"
#include "publish.h"
#include "sbxd.h"
#include "snapshot.h"
#include "attribution.h"
#include "fileops.h"

#define CLIENT_OUTQ_MAX 64u   /* frames queued for a client that does not read */

static void client_dispatch(Server *s, EventSource *src, uint32_t events);

void client_free(Server *s, Client *c) {
        WorkspaceSession *ws;
        Import *imp;
        Waiter *w;
        OutFrame *f;

        if (!c)
                return;
        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->creator == c)
                        ws->creator = NULL;
        TAILQ_FOREACH(imp, &s->imports, link)
                if (imp->creator == c)
                        imp->creator = NULL;
        while ((w = TAILQ_FIRST(&c->waiters)))
                waiter_free(w);
        while ((f = TAILQ_FIRST(&c->outq))) {
                TAILQ_REMOVE(&c->outq, f, link);
                free(f);
        }
        server_unwatch(s, &c->src);
        TAILQ_REMOVE(&s->clients, c, link);
        s->n_clients--;
        free(c);
}

static void client_close(Client *c) {
        c->dead = true;
        (void) shutdown(c->src.fd, SHUT_RDWR);
}

static void client_drop(Server *s, Client *c, const char *why) {
        if (c->dead)
                return;
        log_info("Dropping client pid %d uid %u: %s", (int) c->pid, c->uid, why);
        client_close(c);
}

/* Whether the client waits for an answer, which makes it no idler. */
static bool client_waiting(Server *s, const Client *c) {
        const WorkspaceSession *ws;
        const Import *imp;

        if (!TAILQ_EMPTY(&c->waiters) || c->queued > 0)
                return true;
        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->creator == c)
                        return true;
        TAILQ_FOREACH(imp, &s->imports, link)
                if (imp->creator == c)
                        return true;
        return false;
}

unsigned long long clients_next_deadline(Server *s) {
        unsigned long long next = ~0ull, idle = s->cfg.client_idle_seconds * 1000000ull;
        const Client *c;

        TAILQ_FOREACH(c, &s->clients, link)
                if (!c->dead)
                        next = MIN(next, c->active_usec + idle);
        return next;
}

void clients_run_deadlines(Server *s) {
        unsigned long long now = now_usec(), idle = s->cfg.client_idle_seconds * 1000000ull;
        Client *c;
        char byte;

        TAILQ_FOREACH(c, &s->clients, link) {
                if (c->dead || now < c->active_usec + idle)
                        continue;
                /* An answer it waits for, or a request already on its way, is activity. */
                if (client_waiting(s, c) || recv(c->src.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
                        c->active_usec = now;
                        continue;
                }
                /* A broker connects again with its next call: not worth more than a debug line. */
                log_debug("Closing client pid %d uid %u: no request for %u s", (int) c->pid, c->uid,
                          s->cfg.client_idle_seconds);
                client_close(c);
        }
}

void clients_reap(Server *s) {
        Client *c, *next;
        TAILQ_FOREACH_SAFE(c, &s->clients, link, next)
                if (c->dead)
                        client_free(s, c);
}

static int client_flush(Client *c) {
        OutFrame *f;

        while ((f = TAILQ_FIRST(&c->outq))) {
                ssize_t n = send(c->src.fd, f->data, f->len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        return -errno;
                }
                TAILQ_REMOVE(&c->outq, f, link);
                c->queued--;
                free(f);
        }
        return 0;
}

static void client_send(Server *s, Client *c, Sbx__Msg *m, uint32_t seq) {
        OutFrame *f;
        ssize_t len;
        int r;

        if (c->dead)
                return;
        if (c->queued >= CLIENT_OUTQ_MAX) {
                client_drop(s, c, "not reading its replies");
                return;
        }
        f = malloc(sizeof(*f) + SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
        if (!f) {
                client_drop(s, c, "out of memory");
                return;
        }
        len = wire_pack(m, seq, 0, f->data, SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
        if (len < 0 && m->type == SBX__MSG_TYPE__MSG_REPLY && m->reply->body_case != SBX__REPLY__BODY__NOT_SET) {
                /* Too big for one frame: say so rather than leave the request unanswered. */
                Sbx__Reply small = SBX__REPLY__INIT;
                small.err = -EMSGSIZE;
                small.errmsg = (char *) "the reply is larger than a frame; ask for less (a smaller window or limit)";
                m->reply = &small;
                len = wire_pack(m, seq, 0, f->data, SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
        }
        if (len < 0) {
                free(f);
                log_error_errno((int) len, "Failed to pack a reply: %m");
                return;
        }
        f->len = (size_t) len;
        TAILQ_INSERT_TAIL(&c->outq, f, link);
        c->queued++;
        c->active_usec = now_usec();
        r = client_flush(c);
        if (r < 0) {
                client_drop(s, c, "send failed");
                return;
        }
        (void) epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, c->src.fd,
                         &(struct epoll_event){ .events = EPOLLIN | (c->queued ? EPOLLOUT : 0),
                                                .data.ptr = &c->src });
}

void client_reply(Server *s, Client *c, uint32_t seq, Sbx__Reply *reply) {
        Sbx__Msg m = SBX__MSG__INIT;

        m.type = SBX__MSG_TYPE__MSG_REPLY;
        m.body_case = SBX__MSG__BODY_REPLY;
        m.reply = reply;
        client_send(s, c, &m, seq);
}

void client_reply_error(Server *s, Client *c, uint32_t seq, int err, const char *fmt, ...) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        char msg[1024];        /* an unknown sandbox names the caller's: SBX_SANDBOXES_NAMED of them */
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        reply.err = err < 0 ? err : -EIO;
        reply.errmsg = msg;
        client_reply(s, c, seq, &reply);
}

/* Whether the peer on fd is in socket_group (its primary group at connect
 * time, or one of its supplementary groups). */
static bool peer_in_group(int fd, gid_t primary, gid_t group) {
        gid_t groups[256];
        socklen_t len = sizeof(groups);

        if (group == (gid_t) -1)
                return false;
        if (primary == group)
                return true;
        /* More groups than fit: ERANGE, and the peer counts as not a member. */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
                return false;
        for (size_t i = 0; i < len / sizeof(gid_t); i++)
                if (groups[i] == group)
                        return true;
        return false;
}

/* Root may take every slot; socket_group's members all but the last
 * SBX_CLIENTS_RESERVED_ROOT; anyone else (who may connect with socket_mode
 * 0666) all but those and, with socket_group set, SBX_CLIENTS_RESERVED_GROUP
 * more. Each uid but root holds at most SBX_MAX_CLIENTS_PER_UID. */
static bool client_slot_free(Server *s, uid_t uid, bool in_group) {
        unsigned same_uid = 0, max = SBX_MAX_CLIENTS;
        Client *other;

        if (uid != 0) {
                max -= SBX_CLIENTS_RESERVED_ROOT;
                if (!in_group && s->cfg.socket_gid != (gid_t) -1)
                        max -= SBX_CLIENTS_RESERVED_GROUP;
                TAILQ_FOREACH(other, &s->clients, link)
                        if (other->uid == uid)
                                same_uid++;
                if (same_uid >= SBX_MAX_CLIENTS_PER_UID)
                        return false;
        }
        return s->n_clients < max;
}

void control_accept(Server *s, EventSource *src, uint32_t events) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        bool in_group;
        Client *c;
        int fd, r;

        fd = accept4(src->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        log_warning_errno(-errno, "Failed to accept a client, ignoring: %m");
                return;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                log_warning_errno(-errno, "Failed to read client credentials, dropping it: %m");
                safe_close(fd);
                return;
        }
        in_group = peer_in_group(fd, cred.gid, s->cfg.socket_gid);
        if (!client_slot_free(s, cred.uid, in_group)) {
                log_warning("Refusing client pid %d uid %u: too many connections", (int) cred.pid, cred.uid);
                safe_close(fd);
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
                safe_close(fd);
                return;
        }
        c->uid = cred.uid;
        c->pid = cred.pid;
        c->active_usec = now_usec();
        c->src.dispatch = client_dispatch;
        TAILQ_INIT(&c->outq);
        TAILQ_INIT(&c->waiters);
        r = server_watch(s, &c->src, fd, EPOLLIN);
        if (r < 0) {
                safe_close(fd);
                free(c);
                return;
        }
        TAILQ_INSERT_TAIL(&s->clients, c, link);
        s->n_clients++;
        log_debug("Client pid %d uid %u connected", (int) c->pid, c->uid);
}

/* "yours: a, b (and N more)" or "you have none", for an unknown sandbox name:
 * the names the client may use, at most SBX_SANDBOXES_NAMED of them. */
static void caller_sandboxes(Server *s, const Client *c, char *buf, size_t size) {
        unsigned n = 0;
        size_t len = 0;
        Sandbox *sb;

        buf[0] = '\0';
        TAILQ_FOREACH(sb, &s->sandboxes, link) {
                if (c->uid != 0 && c->uid != sb->owner_uid)
                        continue;
                if (n < SBX_SANDBOXES_NAMED && len < size)
                        len += (size_t) snprintf(buf + len, size - len, "%s%s", n ? ", " : "yours: ", sb->name);
                n++;
        }
        if (n == 0)
                snprintf(buf, size, "you have none");
        else if (n > SBX_SANDBOXES_NAMED && len < size)
                snprintf(buf + len, size - len, " (and %u more)", n - SBX_SANDBOXES_NAMED);
}

/* The sandbox named in a request, if this client may use it; else replies. */
static Sandbox *authorize(Server *s, Client *c, uint32_t seq, const char *name) {
        Sandbox *sb = sandbox_find(s, name);

        if (!sb || (c->uid != 0 && c->uid != sb->owner_uid)) {
                char mine[SBX_SANDBOXES_NAMED * (SBX_NAME_MAX + 2) + 64];

                if (sb) {
                        client_reply_error(s, c, seq, -EPERM, "permission denied: sandbox '%.80s' belongs to another user",
                                           name);
                        return NULL;
                }
                caller_sandboxes(s, c, mine, sizeof(mine));
                client_reply_error(s, c, seq, -ENOENT, "no sandbox named '%.80s' (%s)", name, mine);
                return NULL;
        }
        return sb;
}

static void handle_sandbox_create(Server *s, Client *c, uint32_t seq, const Sbx__SandboxCreate *req) {
        char errmsg[400] = "";
        int r;

        if (c->uid != 0) {
                client_reply_error(s, c, seq, -EPERM, "only root may create sandboxes");
                return;
        }
        /* The answer waits until the source is imported (sandbox_answer_creator). */
        r = sandbox_create(s, req, c, seq, errmsg, sizeof(errmsg));
        if (r < 0)
                client_reply_error(s, c, seq, r, "%s", errmsg[0] ? errmsg : strerror(-r));
}

void sandbox_answer_creator(Server *s, Client *c, uint32_t seq, const Sandbox *sb, const Sbx__ImportResult *result,
                            int err, const char *why) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SandboxInfo info = SBX__SANDBOX_INFO__INIT;

        if (!c)
                return;
        if (err < 0) {
                client_reply_error(s, c, seq, err, "%s", why);
                return;
        }
        sandbox_info(s, sb, &info);
        info.unreadable = result->unreadable;
        info.n_unreadable_paths = result->n_unreadable_paths;
        info.unreadable_paths = result->unreadable_paths;
        reply.body_case = SBX__REPLY__BODY_SANDBOX;
        reply.sandbox = &info;
        client_reply(s, c, seq, &reply);
}

static void handle_sandbox_list(Server *s, Client *c, uint32_t seq) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SandboxListReply list = SBX__SANDBOX_LIST_REPLY__INIT;
        Sbx__SandboxInfo *infos = NULL, **ptrs = NULL;
        Sandbox *sb;
        size_t n = 0, i = 0;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                n++;
        infos = calloc(n ?: 1, sizeof(*infos));
        ptrs = calloc(n ?: 1, sizeof(*ptrs));
        if (!infos || !ptrs) {
                free(infos);
                free(ptrs);
                client_reply_error(s, c, seq, -ENOMEM, "out of memory");
                return;
        }
        TAILQ_FOREACH(sb, &s->sandboxes, link) {
                if (c->uid != 0 && c->uid != sb->owner_uid)
                        continue;
                sbx__sandbox_info__init(&infos[i]);
                sandbox_info(s, sb, &infos[i]);
                ptrs[i] = &infos[i];
                i++;
        }
        list.n_sandboxes = i;
        list.sandboxes = ptrs;
        reply.body_case = SBX__REPLY__BODY_SANDBOX_LIST;
        reply.sandbox_list = &list;
        client_reply(s, c, seq, &reply);
        free(infos);
        free(ptrs);
}

static void handle_sandbox_delete(Server *s, Client *c, uint32_t seq, const Sbx__SandboxDelete *req) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sandbox *sb = authorize(s, c, seq, req->name);
        int r;

        if (!sb)
                return;
        r = sandbox_delete(s, sb);
        if (r < 0) {
                client_reply_error(s, c, seq, r, "cannot delete sandbox '%s': %s", req->name, strerror(-r));
                return;
        }
        client_reply(s, c, seq, &reply);
}

/* Whether c's status counts what is in sb: root's counts everything. */
static bool status_counts(const Client *c, const Sandbox *sb) {
        return c->uid == 0 || sb->owner_uid == c->uid;
}

static void handle_status(Server *s, Client *c, uint32_t seq) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__StatusReply st = SBX__STATUS_REPLY__INIT;
        bool all = c->uid == 0;
        const WorkspaceSession *ws;
        const Command *cmd;
        const Sandbox *sb;
        const Client *other;

        /* Anyone else gets the figures of their own sandboxes and connections, no more. */
        st.version = (char *) SBX_VERSION;
        st.proto_version = SBX_PROTO_VERSION;
        st.pid = all ? getpid() : 0;
        st.uptime_seconds = (double) (now_usec() - s->started_usec) / 1e6;
        st.cgroup_backend = (char *) (s->cgroups ? cgroup_backend_to_string(cgroup_manager_backend(s->cgroups)) : "none");
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                st.sandboxes += status_counts(c, sb);
        TAILQ_FOREACH(ws, &s->sessions, link)
                if (status_counts(c, ws->sandbox)) {
                        st.spare_sessions += ws->spare;
                        st.live_sessions += !ws->spare;
                }
        TAILQ_FOREACH(cmd, &s->commands, link)
                st.running_commands += !cmd->finished && cmd->session && status_counts(c, cmd->session->sandbox);
        TAILQ_FOREACH(other, &s->clients, link)
                st.clients += all || other->uid == c->uid;
        st.state_dir = (char *) (all ? s->cfg.state_dir : "");
        st.run_dir = (char *) (all ? s->cfg.run_dir : "");
        st.caller_only = !all;
        reply.body_case = SBX__REPLY__BODY_STATUS;
        reply.status = &st;
        client_reply(s, c, seq, &reply);
}

static void handle_exec(Server *s, Client *c, uint32_t seq, const Sbx__Exec *req) {
        unsigned long long call_start = now_usec();
        Sandbox *sb = authorize(s, c, seq, req->sandbox);
        WorkspaceSession *ws;
        Command *cmd;
        char errmsg[300] = "";
        uint64_t timeout_ms = req->has_timeout ? req->timeout_ms : SBX_TIMEOUT_DEFAULT_MS;
        uint64_t yield_ms = req->has_yield ? MIN(req->yield_ms, SBX_YIELD_MAX_MS) : SBX_YIELD_DEFAULT_MS;
        int r;

        if (!sb)
                return;
        if (req->cmd[0] == '\0' || strlen(req->cmd) > SBX_CMD_MAX) {
                client_reply_error(s, c, seq, -EINVAL, "cmd must be 1 to %u bytes", SBX_CMD_MAX);
                return;
        }
        if (timeout_ms == 0 || timeout_ms > SBX_TIMEOUT_MAX_MS) {
                client_reply_error(s, c, seq, -EINVAL, "timeout_ms must be 1 to %llu",
                                   (unsigned long long) SBX_TIMEOUT_MAX_MS);
                return;
        }
        if (req->workspace_session[0]) {
                ws = session_find(s, sb, req->workspace_session);
                if (!ws) {
                        client_reply_error(s, c, seq, -ENOENT, "no live workspace session '%.80s' in sandbox '%s'",
                                           req->workspace_session, sb->name);
                        return;
                }
                if (ws->state == SESSION_STOPPED) {
                        client_reply_error(s, c, seq, -ESHUTDOWN,
                                           "workspace session %s is stopped%s; it runs no more commands: finalize it "
                                           "(publish with overwrite, or discard)",
                                           ws->id, ws->conflicted ? " after a publication conflict" : "");
                        return;
                }
        } else if (!(ws = spare_take(s, sb))) {
                r = session_new(s, sb, true, true, &ws, errmsg, sizeof(errmsg));
                if (r < 0) {
                        client_reply_error(s, c, seq, r, "%s", errmsg[0] ? errmsg : strerror(-r));
                        return;
                }
        }
        r = command_start(s, ws, req->cmd, timeout_ms, req->separate_streams, &cmd);
        if (r < 0) {
                client_reply_error(s, c, seq, r, "cannot start the command: %s",
                                   r == -EAGAIN ? "too many running commands in this session" : strerror(-r));
                if (ws->automatic && TAILQ_EMPTY(&ws->commands))
                        session_destroy(s, ws);
                return;
        }
        command_add_waiter(s, cmd, c, seq, call_start, yield_ms);
}

static void handle_stdin(Server *s, Client *c, uint32_t seq, const Sbx__Stdin *req) {
        unsigned long long call_start = now_usec();
        Sandbox *sb = authorize(s, c, seq, req->sandbox);
        Command *cmd;
        uint64_t yield_ms = req->has_yield ? MIN(req->yield_ms, SBX_YIELD_MAX_MS) : SBX_STDIN_YIELD_DEFAULT_MS;
        int r;

        if (!sb)
                return;
        if (req->data.len > SBX_STDIN_MAX) {
                client_reply_error(s, c, seq, -E2BIG, "stdin must be at most %u bytes", SBX_STDIN_MAX);
                return;
        }
        cmd = command_find_live(s, req->command_session);
        if (!cmd || strcmp(cmd->rec.sandbox, sb->id) != 0) {
                StoreCommand rec;
                if (store_command_get(s->store, req->command_session, &rec) >= 0 &&
                    strcmp(rec.sandbox, sb->id) == 0)
                        client_reply_error(s, c, seq, -EPIPE, "command session '%.80s' has ended (%s); its stdin is closed",
                                           req->command_session, rec.status);
                else
                        client_reply_error(s, c, seq, -ENOENT, "no command session '%.80s' in sandbox '%s'",
                                           req->command_session, sb->name);
                return;
        }
        if (cmd->finished) {
                client_reply_error(s, c, seq, -EPIPE, "command session '%s' has ended (%s); its stdin is closed",
                                   cmd->rec.id, cmd->rec.status);
                return;
        }
        r = command_write_stdin(s, cmd, req->data.data, req->data.len, req->close);
        if (r < 0) {
                client_reply_error(s, c, seq, r, "cannot write to the stdin of '%s': %s", cmd->rec.id,
                                   r == -EAGAIN ? "the command has not started yet" : strerror(-r));
                return;
        }
        command_add_waiter(s, cmd, c, seq, call_start, yield_ms);
}

static void handle_read_lines(Server *s, Client *c, uint32_t seq, const Sbx__ReadLines *req) {
        Sandbox *sb = authorize(s, c, seq, req->sandbox);
        uint64_t limit = req->has_limit ? req->limit : SBX_READ_DEFAULT_LINES;
        int r;

        if (!sb)
                return;
        if (limit > SBX_READ_MAX_LINES) {
                client_reply_error(s, c, seq, -EINVAL, "limit must be at most %u", SBX_READ_MAX_LINES);
                return;
        }
        if ((unsigned) req->stream > SBX__STREAM__STREAM_STDERR) {
                client_reply_error(s, c, seq, -EINVAL, "stream must be merged, stdout or stderr");
                return;
        }
        r = command_read_reply(s, req->command_session, sb, (TranscriptStream) req->stream, req->start_offset, limit,
                               c, seq);
        if (r == -ENODATA)
                client_reply_error(s, c, seq, r, "command session '%.80s' did not keep stdout and stderr apart; "
                                   "read its merged output", req->command_session);
        else if (r == -ENOENT)
                client_reply_error(s, c, seq, r, "no command session '%.80s' in sandbox '%s'", req->command_session,
                                   sb->name);
        else if (r < 0)
                client_reply_error(s, c, seq, r, "cannot read command session '%.80s': %s", req->command_session,
                                   strerror(-r));
}

static void handle_cancel(Server *s, Client *c, const Sbx__Cancel *req) {
        Waiter *w;

        TAILQ_FOREACH(w, &c->waiters, client_link)
                if (w->seq == req->request_seq) {
                        Command *cmd = w->command;
                        /* The caller gave up before learning the command's id: nobody can reach it. */
                        waiter_free(w);
                        command_cancel(s, cmd);
                        return;
                }
}


/* ---- managed sessions, commands, layers, gc ------------------------------------------ */

static const char *session_state(const WorkspaceSession *ws) {
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

static void session_info(const WorkspaceSession *ws, Sbx__SessionInfo *o) {
        o->workspace_session = (char *) ws->id;
        o->sandbox = (char *) ws->sandbox->name;
        o->finalize_policy = (char *) (ws->publish_policy ? "publish_then_destroy" : "destroy");
        o->automatic = ws->automatic;
        o->state = (char *) session_state(ws);
        o->base_layer = ws->base_layer;
        o->created_unix = ws->created_unix;
        o->running_commands = ws->running;
}

static void handle_session_create(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__SessionCreate *req) {
        WorkspaceSession *ws;
        char errmsg[300] = "";
        bool publish;
        int r;

        if (req->finalize_policy[0] == '\0' || strcmp(req->finalize_policy, "publish_then_destroy") == 0)
                publish = true;
        else if (strcmp(req->finalize_policy, "destroy") == 0)
                publish = false;
        else
                return client_reply_error(s, c, seq, -EINVAL,
                                          "finalize_policy must be publish_then_destroy or destroy, not '%.40s'",
                                          req->finalize_policy);
        r = session_new(s, sb, false, publish, &ws, errmsg, sizeof(errmsg));
        if (r < 0)
                return client_reply_error(s, c, seq, r, "%s", errmsg[0] ? errmsg : strerror(-r));
        log_info("Created managed workspace session %s of sandbox '%s'", ws->id, sb->name);
        /* The answer waits until the session can be used (session_answer_creator). */
        ws->creator = c;
        ws->creator_seq = seq;
}

void session_answer_creator(Server *s, WorkspaceSession *ws, int err, const char *why) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SessionInfo info = SBX__SESSION_INFO__INIT;
        Client *c = TAKE_PTR(ws->creator);

        if (!c)
                return;
        if (err < 0)
                return client_reply_error(s, c, ws->creator_seq, err, "cannot start a workspace session: %s", why);
        session_info(ws, &info);
        reply.body_case = SBX__REPLY__BODY_SESSION;
        reply.session = &info;
        client_reply(s, c, ws->creator_seq, &reply);
}

static WorkspaceSession *find_session(Server *s, Client *c, uint32_t seq, Sandbox *sb, const char *id) {
        WorkspaceSession *ws = session_find(s, sb, id);
        if (!ws)
                client_reply_error(s, c, seq, -ENOENT, "no workspace session '%.80s' in sandbox '%s'", id, sb->name);
        return ws;
}

static void handle_session_finalize(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__SessionFinalize *req) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SessionFinalizeReply o = SBX__SESSION_FINALIZE_REPLY__INIT;
        Sbx__SessionInfo info = SBX__SESSION_INFO__INIT;
        Sbx__Publication pub = SBX__PUBLICATION__INIT;
        WorkspaceSession *ws = find_session(s, c, seq, sb, req->workspace_session);
        PublishResult res = {};
        char owner[64], id[sizeof(ws->id)];
        bool publish;
        int r;

        if (!ws)
                return;
        if (req->action[0] == '\0')
                publish = ws->publish_policy;
        else if (strcmp(req->action, "publish") == 0 || strcmp(req->action, "discard") == 0)
                publish = req->action[0] == 'p';
        else
                return client_reply_error(s, c, seq, -EINVAL, "action must be publish or discard, not '%.40s'",
                                          req->action);
        if (ws->running > 0)
                return client_reply_error(s, c, seq, -EBUSY,
                                          "workspace session %s still runs %u command(s); wait for them or cancel them "
                                          "with cancel_command, then finalize",
                                          ws->id, ws->running);
        snprintf(owner, sizeof(owner), "workspace_session:%s", ws->id);
        /* The session may be freed by finalizing it: the answer keeps copies. */
        strlcpy(id, ws->id, sizeof(id));
        session_info(ws, &info);
        info.workspace_session = id;
        info.state = (char *) "finalized";
        r = session_finalize(s, ws, publish, req->overwrite, &res);
        if (r < 0) {
                publish_result_done(&res);
                return client_reply_error(s, c, seq, r, "cannot publish workspace session %s: %s; it is kept",
                                          req->workspace_session, res.error[0] ? res.error : strerror(-r));
        }
        if (res.n_conflicts > 0) {
                /* The session lives on, stopped: its state is "conflicted" now. */
                info.state = (char *) "conflicted";
                o.action = (char *) "conflict";
        } else
                o.action = (char *) (publish ? "published" : "discarded");
        if (publish) {
                pub.published = res.published;
                pub.layer = res.layer;
                pub.owner = owner;
                pub.changed_paths = res.changed_paths;
                pub.n_conflicts = res.n_conflicts;
                pub.conflicts = res.conflicts;
                if (res.n_conflicts > 0)
                        pub.error = (char *) "not published: these paths were changed by layers published after the "
                                             "session started; finalize again with overwrite, or discard";
                o.publication = &pub;
        }
        o.session = &info;
        reply.body_case = SBX__REPLY__BODY_SESSION_FINALIZE;
        reply.session_finalize = &o;
        client_reply(s, c, seq, &reply);
        publish_result_done(&res);
}

static void handle_session_list(Server *s, Client *c, uint32_t seq, Sandbox *sb) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SessionListReply o = SBX__SESSION_LIST_REPLY__INIT;
        _cleanup_free_ Sbx__SessionInfo *infos = NULL;
        _cleanup_free_ Sbx__SessionInfo **ptrs = NULL;
        WorkspaceSession *ws;
        size_t n = 0;

        infos = calloc(sb->live_sessions + 1, sizeof(*infos));
        ptrs = calloc(sb->live_sessions + 1, sizeof(*ptrs));
        if (!infos || !ptrs)
                return client_reply_error(s, c, seq, -ENOMEM, "out of memory");
        TAILQ_FOREACH(ws, &s->sessions, link) {
                if (ws->sandbox != sb || ws->spare || n >= sb->live_sessions)
                        continue;
                sbx__session_info__init(&infos[n]);
                session_info(ws, &infos[n]);
                ptrs[n] = &infos[n];
                n++;
        }
        o.n_sessions = n;
        o.sessions = ptrs;
        reply.body_case = SBX__REPLY__BODY_SESSION_LIST;
        reply.session_list = &o;
        client_reply(s, c, seq, &reply);
}

static const char *change_name(ChangeKind kind, bool existed) {
        if (kind == CHANGE_WHITEOUT)
                return "deleted";
        return existed ? "modified" : "added";
}

static void handle_session_diff(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__SessionDiff *req) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SessionDiffReply o = SBX__SESSION_DIFF_REPLY__INIT;
        WorkspaceSession *ws = find_session(s, c, seq, sb, req->workspace_session);
        _cleanup_close_ int upper = -EBADF, base = -EBADF;
        _cleanup_free_ Sbx__ChangedPath *changes = NULL;
        _cleanup_free_ Sbx__ChangedPath **ptrs = NULL;
        _cleanup_free_ char *diff = NULL;
        char too_deep[SBX_PATH_MAX + 1], why[256] = "";
        size_t diff_len = 0;
        bool truncated = false;
        Manifest m = {};
        int r;

        if (!ws)
                return;
        upper = openat(ws->upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = upper < 0 ? -errno : manifest_build(upper, &m, too_deep);
        if (r == -ELOOP)
                tree_depth_message(too_deep, why, sizeof(why));
        if (r >= 0)
                r = snapshot_mount(s, sb, ws->base_squashed, ws->base_layer, &base);
        if (r < 0) {
                manifest_done(&m);
                return client_reply_error(s, c, seq, r, "cannot compute the changes of %s: %s", ws->id,
                                          why[0] ? why : strerror(-r));
        }
        changes = calloc(m.n + 1, sizeof(*changes));
        ptrs = calloc(m.n + 1, sizeof(*ptrs));
        diff = malloc(SBX_DIFF_MAX_BYTES + 1);
        if (!changes || !ptrs || !diff) {
                manifest_done(&m);
                return client_reply_error(s, c, seq, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < m.n; i++) {
                const Change *ch = &m.changes[i];
                struct stat st;
                bool existed = fstatat(base, ch->path, &st, AT_SYMLINK_NOFOLLOW) == 0;
                _cleanup_free_ char *old = NULL, *new = NULL, *piece = NULL;
                size_t old_len = 0, new_len = 0, piece_len = 0;
                bool cut = false;

                sbx__changed_path__init(&changes[i]);
                changes[i].path = ch->path;
                changes[i].change = (char *) change_name(ch->kind, existed);
                ptrs[i] = &changes[i];
                if (truncated || (ch->kind != CHANGE_FILE && ch->kind != CHANGE_WHITEOUT))
                        continue;
                if (existed && read_file_bounded_at(base, ch->path, SBX_FILE_MAX, &old, &old_len) < 0)
                        continue;
                if (ch->kind == CHANGE_FILE && read_file_bounded_at(upper, ch->path, SBX_FILE_MAX, &new, &new_len) < 0)
                        continue;
                if ((old && !text_is_utf8(old, old_len)) || (new && !text_is_utf8(new, new_len)) || (!old && !new))
                        continue;
                r = text_unified_diff(ch->path, old, old_len, new, new_len, SBX_DIFF_MAX_BYTES - diff_len, &piece,
                                      &piece_len, &cut);
                if (r < 0)
                        continue;
                memcpy(diff + diff_len, piece, piece_len);
                diff_len += piece_len;
                truncated = cut;
        }
        o.n_changes = m.n;
        o.changes = ptrs;
        o.diff.data = (uint8_t *) diff;
        o.diff.len = diff_len;
        o.truncated = truncated;
        reply.body_case = SBX__REPLY__BODY_SESSION_DIFF;
        reply.session_diff = &o;
        client_reply(s, c, seq, &reply);
        manifest_done(&m);
}

typedef struct CommandListing {
        Sbx__CommandInfo *infos;
        Sbx__CommandInfo **ptrs;
        char **cmds;
        StoreCommand *recs;
        size_t n, cap;
} CommandListing;

static int listing_add(const StoreCommand *rec, const char *cmd, void *userdata) {
        CommandListing *l = userdata;

        if (l->n == l->cap) {
                size_t ncap = l->cap ? l->cap * 2 : 32;
                StoreCommand *recs = realloc(l->recs, ncap * sizeof(*recs));
                char **cmds = recs ? realloc(l->cmds, ncap * sizeof(*cmds)) : NULL;
                if (recs)
                        l->recs = recs;
                if (cmds)
                        l->cmds = cmds;
                if (!recs || !cmds)
                        return -ENOMEM;
                l->cap = ncap;
        }
        l->recs[l->n] = *rec;
        l->cmds[l->n] = strdup(cmd);
        if (!l->cmds[l->n])
                return -ENOMEM;
        l->n++;
        return 0;
}

static void handle_command_list(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__CommandList *req) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__CommandListReply o = SBX__COMMAND_LIST_REPLY__INIT;
        CommandListing l = {};
        int r;

        r = store_command_foreach(s->store, sb->id, req->workspace_session[0] ? req->workspace_session : NULL,
                                  listing_add, &l);
        if (r >= 0) {
                l.infos = calloc(l.n + 1, sizeof(*l.infos));
                l.ptrs = calloc(l.n + 1, sizeof(*l.ptrs));
                if (!l.infos || !l.ptrs)
                        r = -ENOMEM;
        }
        if (r < 0)
                client_reply_error(s, c, seq, r, "cannot list commands: %s", strerror(-r));
        else {
                /* Newest last; the reply holds what fits in one frame. */
                size_t first = l.n > 500 ? l.n - 500 : 0;
                for (size_t i = first; i < l.n; i++) {
                        Sbx__CommandInfo *info = &l.infos[i - first];
                        Command *live = command_find_live(s, l.recs[i].id);
                        const StoreCommand *rec = live ? &live->rec : &l.recs[i];
                        sbx__command_info__init(info);
                        info->command_session = (char *) rec->id;
                        info->workspace_session = (char *) rec->workspace_session;
                        info->status = (char *) rec->status;
                        info->has_exit_code = rec->has_exit_code;
                        info->exit_code = rec->exit_code;
                        info->signal = rec->signal;
                        info->end_reason = (char *) rec->end_reason;
                        info->started_unix_usec = rec->started_unix_usec;
                        info->ended_unix_usec = rec->ended_unix_usec;
                        info->cmd = l.cmds[i];
                        l.ptrs[i - first] = info;
                }
                o.n_commands = l.n - first;
                o.commands = l.ptrs;
                reply.body_case = SBX__REPLY__BODY_COMMAND_LIST;
                reply.command_list = &o;
                client_reply(s, c, seq, &reply);
        }
        for (size_t i = 0; i < l.n; i++)
                free(l.cmds[i]);
        free(l.cmds);
        free(l.recs);
        free(l.infos);
        free(l.ptrs);
}

#define CANCEL_WAIT_MS 2000u  /* a cancel answers once the command has ended, or after this */

static void handle_command_cancel(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__CommandCancel *req) {
        Command *cmd = command_find_live(s, req->command_session);
        uint64_t total;
        int r;

        if (cmd && strcmp(cmd->rec.sandbox, sb->id) == 0 && !cmd->finished) {
                command_cancel(s, cmd);
                command_add_waiter(s, cmd, c, seq, now_usec(), CANCEL_WAIT_MS);
                return;
        }
        if (cmd && strcmp(cmd->rec.sandbox, sb->id) != 0)
                cmd = NULL;
        total = cmd ? transcript_total_lines(cmd->transcript) : 0;
        /* The state right after the signal; the end shows in read_command_lines. */
        r = command_read_reply(s, req->command_session, sb, TRANSCRIPT_MERGED,
                               total > SBX_WINDOW_MAX_LINES ? total - SBX_WINDOW_MAX_LINES : 0, SBX_WINDOW_MAX_LINES, c, seq);
        if (r < 0)
                client_reply_error(s, c, seq, r, "no command session '%.80s' in sandbox '%s'", req->command_session,
                                   sb->name);
}

typedef struct LayerListing {
        Sbx__LayerInfo *infos;
        char **owners;
        size_t n, cap;
} LayerListing;

static int layer_listing_add(uint32_t layer, const char *owner, uint32_t changed, int64_t created, void *userdata) {
        LayerListing *l = userdata;
        if (l->n == l->cap) {
                size_t ncap = l->cap ? l->cap * 2 : 64;
                Sbx__LayerInfo *infos = realloc(l->infos, ncap * sizeof(*infos));
                char **owners = infos ? realloc(l->owners, ncap * sizeof(*owners)) : NULL;
                if (infos)
                        l->infos = infos;
                if (owners)
                        l->owners = owners;
                if (!infos || !owners)
                        return -ENOMEM;
                l->cap = ncap;
        }
        sbx__layer_info__init(&l->infos[l->n]);
        l->owners[l->n] = strdup(owner);
        if (!l->owners[l->n])
                return -ENOMEM;
        l->infos[l->n].layer = layer;
        l->infos[l->n].owner = l->owners[l->n];
        l->infos[l->n].changed_paths = changed;
        l->infos[l->n].created_unix = created;
        l->n++;
        return 0;
}

#define SBX_LAYER_PAGE 1000u  /* layers in one reply */

static void handle_layer_list(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__LayerList *req) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__LayerListReply o = SBX__LAYER_LIST_REPLY__INIT;
        LayerListing l = {};
        _cleanup_free_ Sbx__LayerInfo **ptrs = NULL;
        int r;

        r = store_layer_foreach(s->store, sb->id, layer_listing_add, &l);
        if (r >= 0 && !(ptrs = calloc(l.n + 1, sizeof(*ptrs))))
                r = -ENOMEM;
        if (r < 0)
                client_reply_error(s, c, seq, r, "cannot list layers: %s", strerror(-r));
        else {
                /* A page that fits in one frame; the client asks for the rest. */
                size_t first = 0, n = 0;
                while (first < l.n && l.infos[first].layer < req->start_layer)
                        first++;
                for (size_t i = first; i < l.n && n < SBX_LAYER_PAGE; i++)
                        ptrs[n++] = &l.infos[i];
                o.n_layers = n;
                o.layers = ptrs;
                o.more = first + n < l.n;
                reply.body_case = SBX__REPLY__BODY_LAYER_LIST;
                reply.layer_list = &o;
                client_reply(s, c, seq, &reply);
        }
        for (size_t i = 0; i < l.n; i++)
                free(l.owners[i]);
        free(l.owners);
        free(l.infos);
}

/* A transcript stays while its command is recorded (a deleted sandbox's go
 * after the commit of the delete; a crash in between leaves them). */
static int transcript_recorded(const char *id, void *userdata) {
        Server *s = userdata;
        return store_command_exists(s->store, id);
}

static void handle_gc(Server *s, Client *c, uint32_t seq) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__GcReply o = SBX__GC_REPLY__INIT;
        unsigned layers = 0, transcripts = 0, sandboxes, ranges;
        uint64_t bytes = 0;
        Sandbox *sb;
        int r;

        if (c->uid != 0)
                return client_reply_error(s, c, seq, -EPERM, "only root may collect garbage");
        r = transcripts_collect(s->transcripts_fd, transcript_recorded, s, &transcripts, &bytes);
        if (r < 0)
                return client_reply_error(s, c, seq, r, "cannot collect transcripts: %s", strerror(-r));
        sandboxes = sandbox_dirs_collect(s);
        TAILQ_FOREACH(sb, &s->sandboxes, link) {
                unsigned removed = 0;
                if (snapshot_collect(s, sb, &removed) >= 0)
                        layers += removed;
        }
        ranges = sandbox_ranges_collect(s);
        log_info("Garbage collection: %u transcripts (%llu bytes), %u directories of deleted sandboxes and %u layer "
                 "directories removed, %u host id ranges freed",
                 transcripts, (unsigned long long) bytes, sandboxes, layers, ranges);
        o.transcripts_removed = transcripts;
        o.layers_removed = layers;
        o.bytes_freed = bytes;
        o.sandboxes_removed = sandboxes;
        reply.body_case = SBX__REPLY__BODY_GC;
        reply.gc = &o;
        client_reply(s, c, seq, &reply);
}

static bool string_ok(const char *str, size_t max) {
        return strnlen(str, max + 1) <= max;
}

/* Field checks common to all requests: bounded strings. Returns false after replying. */
static bool request_valid(Server *s, Client *c, uint32_t seq, const Sbx__Msg *m) {
        const char *sandbox = NULL, *session = NULL, *path = NULL;

        switch (m->body_case) {
        case SBX__MSG__BODY_EXEC:
                sandbox = m->exec->sandbox;
                session = m->exec->workspace_session;
                break;
        case SBX__MSG__BODY_STDIN:
                sandbox = m->stdin->sandbox;
                session = m->stdin->command_session;
                break;
        case SBX__MSG__BODY_READ_LINES:
                sandbox = m->read_lines->sandbox;
                session = m->read_lines->command_session;
                break;
        case SBX__MSG__BODY_SANDBOX_CREATE:
                sandbox = m->sandbox_create->name;
                if (!string_ok(m->sandbox_create->source_dir, 4095)) {
                        client_reply_error(s, c, seq, -ENAMETOOLONG, "source_dir is too long");
                        return false;
                }
                break;
        case SBX__MSG__BODY_SANDBOX_DELETE:
                sandbox = m->sandbox_delete->name;
                break;
        case SBX__MSG__BODY_FILE_READ:
                sandbox = m->file_read->sandbox;
                session = m->file_read->workspace_session;
                path = m->file_read->path;
                break;
        case SBX__MSG__BODY_FILE_WRITE:
                sandbox = m->file_write->sandbox;
                session = m->file_write->workspace_session;
                path = m->file_write->path;
                break;
        case SBX__MSG__BODY_FILE_EDIT:
                sandbox = m->file_edit->sandbox;
                session = m->file_edit->workspace_session;
                path = m->file_edit->path;
                break;
        case SBX__MSG__BODY_FILE_BLAME:
                sandbox = m->file_blame->sandbox;
                path = m->file_blame->path;
                break;
        case SBX__MSG__BODY_SESSION_CREATE:
                sandbox = m->session_create->sandbox;
                break;
        case SBX__MSG__BODY_SESSION_FINALIZE:
                sandbox = m->session_finalize->sandbox;
                session = m->session_finalize->workspace_session;
                break;
        case SBX__MSG__BODY_SESSION_LIST:
                sandbox = m->session_list->sandbox;
                break;
        case SBX__MSG__BODY_SESSION_DIFF:
                sandbox = m->session_diff->sandbox;
                session = m->session_diff->workspace_session;
                break;
        case SBX__MSG__BODY_COMMAND_LIST:
                sandbox = m->command_list->sandbox;
                session = m->command_list->workspace_session;
                break;
        case SBX__MSG__BODY_COMMAND_CANCEL:
                sandbox = m->command_cancel->sandbox;
                session = m->command_cancel->command_session;
                break;
        case SBX__MSG__BODY_LAYER_LIST:
                sandbox = m->layer_list->sandbox;
                break;
        default:
                break;
        }
        if (path && !string_ok(path, SBX_PATH_MAX)) {
                client_reply_error(s, c, seq, -ENAMETOOLONG, "path is longer than %u bytes", SBX_PATH_MAX);
                return false;
        }
        if ((sandbox && !string_ok(sandbox, SBX_NAME_MAX)) || (session && !string_ok(session, SBX_NAME_MAX))) {
                client_reply_error(s, c, seq, -ENOENT, "no such sandbox or session (names are at most %u bytes)",
                                   SBX_NAME_MAX);
                return false;
        }
        return true;
}

/* The sandbox of a request that names one, authorized; NULL after replying
 * (*ret_known false: the message is no such request). */
static Sandbox *request_sandbox(Server *s, Client *c, uint32_t seq, const Sbx__Msg *m, bool *ret_known) {
        *ret_known = true;
        switch (m->body_case) {
        case SBX__MSG__BODY_FILE_READ: return authorize(s, c, seq, m->file_read->sandbox);
        case SBX__MSG__BODY_FILE_WRITE: return authorize(s, c, seq, m->file_write->sandbox);
        case SBX__MSG__BODY_FILE_EDIT: return authorize(s, c, seq, m->file_edit->sandbox);
        case SBX__MSG__BODY_FILE_BLAME: return authorize(s, c, seq, m->file_blame->sandbox);
        case SBX__MSG__BODY_SESSION_CREATE: return authorize(s, c, seq, m->session_create->sandbox);
        case SBX__MSG__BODY_SESSION_FINALIZE: return authorize(s, c, seq, m->session_finalize->sandbox);
        case SBX__MSG__BODY_SESSION_LIST: return authorize(s, c, seq, m->session_list->sandbox);
        case SBX__MSG__BODY_SESSION_DIFF: return authorize(s, c, seq, m->session_diff->sandbox);
        case SBX__MSG__BODY_COMMAND_LIST: return authorize(s, c, seq, m->command_list->sandbox);
        case SBX__MSG__BODY_COMMAND_CANCEL: return authorize(s, c, seq, m->command_cancel->sandbox);
        case SBX__MSG__BODY_LAYER_LIST: return authorize(s, c, seq, m->layer_list->sandbox);
        default: *ret_known = false; return NULL;
        }
}

static void client_handle(Server *s, Client *c, uint32_t seq, Sbx__Msg *m, int payload_fd) {
        Sandbox *sb;
        bool known;

        if (!c->hello) {
                if (m->type != SBX__MSG_TYPE__MSG_CLIENT_HELLO) {
                        client_drop(s, c, "first message is not HELLO");
                        return;
                }
                c->hello = true;
                client_reply(s, c, seq, &(Sbx__Reply) SBX__REPLY__INIT);
                return;
        }
        if (!request_valid(s, c, seq, m))
                return;
        switch (m->type) {
        case SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_CREATE:
                return handle_sandbox_create(s, c, seq, m->sandbox_create);
        case SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST:
                return handle_sandbox_list(s, c, seq);
        case SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_DELETE:
                return handle_sandbox_delete(s, c, seq, m->sandbox_delete);
        case SBX__MSG_TYPE__MSG_CLIENT_STATUS:
                return handle_status(s, c, seq);
        case SBX__MSG_TYPE__MSG_CLIENT_EXEC:
                return handle_exec(s, c, seq, m->exec);
        case SBX__MSG_TYPE__MSG_CLIENT_STDIN:
                return handle_stdin(s, c, seq, m->stdin);
        case SBX__MSG_TYPE__MSG_CLIENT_READ_LINES:
                return handle_read_lines(s, c, seq, m->read_lines);
        case SBX__MSG_TYPE__MSG_CLIENT_CANCEL:
                return handle_cancel(s, c, m->cancel);
        case SBX__MSG_TYPE__MSG_CLIENT_GC:
                return handle_gc(s, c, seq);
        default:
                break;
        }
        sb = request_sandbox(s, c, seq, m, &known);
        if (!sb) {
                if (!known)
                        client_drop(s, c, "message type not allowed from a client (or a second HELLO)");
                return;
        }
        switch (m->type) {
        case SBX__MSG_TYPE__MSG_CLIENT_FILE_READ:
                return handle_file_read(s, c, seq, sb, m->file_read);
        case SBX__MSG_TYPE__MSG_CLIENT_FILE_WRITE:
                return handle_file_write(s, c, seq, sb, m->file_write, payload_fd);
        case SBX__MSG_TYPE__MSG_CLIENT_FILE_EDIT:
                return handle_file_edit(s, c, seq, sb, m->file_edit, payload_fd);
        case SBX__MSG_TYPE__MSG_CLIENT_FILE_BLAME:
                return handle_file_blame(s, c, seq, sb, m->file_blame);
        case SBX__MSG_TYPE__MSG_CLIENT_SESSION_CREATE:
                return handle_session_create(s, c, seq, sb, m->session_create);
        case SBX__MSG_TYPE__MSG_CLIENT_SESSION_FINALIZE:
                return handle_session_finalize(s, c, seq, sb, m->session_finalize);
        case SBX__MSG_TYPE__MSG_CLIENT_SESSION_LIST:
                return handle_session_list(s, c, seq, sb);
        case SBX__MSG_TYPE__MSG_CLIENT_SESSION_DIFF:
                return handle_session_diff(s, c, seq, sb, m->session_diff);
        case SBX__MSG_TYPE__MSG_CLIENT_COMMAND_LIST:
                return handle_command_list(s, c, seq, sb, m->command_list);
        case SBX__MSG_TYPE__MSG_CLIENT_COMMAND_CANCEL:
                return handle_command_cancel(s, c, seq, sb, m->command_cancel);
        case SBX__MSG_TYPE__MSG_CLIENT_LAYER_LIST:
                return handle_layer_list(s, c, seq, sb, m->layer_list);
        default:
                return;
        }
}

static void client_dispatch(Server *s, EventSource *src, uint32_t events) {
        Client *c = (Client *) ((char *) src - offsetof(Client, src));
        unsigned pending = 0;
        Waiter *w;

        if (c->dead)
                return;
        if (events & EPOLLOUT) {
                if (client_flush(c) < 0) {
                        client_drop(s, c, "send failed");
                        return;
                }
                if (c->queued == 0)
                        (void) epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, c->src.fd,
                                         &(struct epoll_event){ .events = EPOLLIN, .data.ptr = &c->src });
        }
        if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return;

        _cleanup_msg_ Sbx__Msg *m = NULL;
        _cleanup_close_ int payload_fd = -EBADF;
        int fds[SBX_WIRE_MAX_FDS];
        size_t n_fds = 0;
        uint32_t seq;
        int r = wire_recv(src->fd, &m, &seq, fds, &n_fds);
        if (r == -EAGAIN)
                return;
        if (r == -ECONNRESET) {
                log_debug("Client pid %d disconnected", (int) c->pid);
                c->dead = true;
                return;
        }
        if (r == -EPROTO) {
                client_reply_error(s, c, 0, -EPROTO, "protocol version mismatch: sbxd speaks version %u",
                                   SBX_PROTO_VERSION);
                client_drop(s, c, "wrong protocol version");
                return;
        }
        if (r < 0) {
                client_drop(s, c, "malformed frame");
                return;
        }
        /* Only file payloads come with an fd, exactly one. */
        if (n_fds > 0) {
                bool allowed = n_fds == 1 && (m->type == SBX__MSG_TYPE__MSG_CLIENT_FILE_WRITE ||
                                              m->type == SBX__MSG_TYPE__MSG_CLIENT_FILE_EDIT);
                payload_fd = fds[0];
                for (size_t i = 1; i < n_fds; i++)
                        safe_close(fds[i]);
                if (!allowed) {
                        client_drop(s, c, "file descriptors attached to a message that takes none");
                        return;
                }
        }
        c->active_usec = now_usec();
        TAILQ_FOREACH(w, &c->waiters, client_link)
                pending++;
        if (pending >= SBX_MAX_PENDING_PER_CLIENT) {
                client_reply_error(s, c, seq, -EBUSY, "too many unanswered requests on this connection (limit %u)",
                                   SBX_MAX_PENDING_PER_CLIENT);
                return;
        }
        client_handle(s, c, seq, m, payload_fd);
}
