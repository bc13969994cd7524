/* sbxd.sock: accepting clients (sandbox-mcp, sbxctl), authenticating them by
 * SO_PEERCRED, and dispatching their requests. A bad frame drops that client;
 * an invalid request gets an error reply. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "sbx-limits.h"
#include "log.h"
#include "sbxd.h"

#define CLIENT_OUTQ_MAX 64u   /* frames queued for a client that does not read */

static void client_dispatch(Server *s, EventSource *src, uint32_t events);

void client_free(Server *s, Client *c) {
        Waiter *w;
        OutFrame *f;

        if (!c)
                return;
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

static void client_drop(Server *s, Client *c, const char *why) {
        if (c->dead)
                return;
        log_info("Dropping client pid %d uid %u: %s", (int) c->pid, c->uid, why);
        c->dead = true;
        (void) shutdown(c->src.fd, SHUT_RDWR);
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
        if (len < 0) {
                free(f);
                log_error_errno((int) len, "Failed to pack a reply: %m");
                return;
        }
        f->len = (size_t) len;
        TAILQ_INSERT_TAIL(&c->outq, f, link);
        c->queued++;
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
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        reply.err = err < 0 ? err : -EIO;
        reply.errmsg = msg;
        client_reply(s, c, seq, &reply);
}

void control_accept(Server *s, EventSource *src, uint32_t events) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        unsigned same_uid = 0;
        Client *c, *other;
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
        TAILQ_FOREACH(other, &s->clients, link)
                if (other->uid == cred.uid)
                        same_uid++;
        if (s->n_clients >= SBX_MAX_CLIENTS || same_uid >= SBX_MAX_CLIENTS_PER_UID) {
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

/* The sandbox named in a request, if this client may use it; else replies. */
static Sandbox *authorize(Server *s, Client *c, uint32_t seq, const char *name) {
        Sandbox *sb = sandbox_find(s, name);

        if (!sb || (c->uid != 0 && c->uid != sb->owner_uid)) {
                if (sb)
                        client_reply_error(s, c, seq, -EPERM, "permission denied: sandbox '%.80s' belongs to another user",
                                           name);
                else
                        client_reply_error(s, c, seq, -ENOENT, "no sandbox named '%.80s'", name);
                return NULL;
        }
        return sb;
}

static void handle_sandbox_create(Server *s, Client *c, uint32_t seq, const Sbx__SandboxCreate *req) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SandboxInfo info = SBX__SANDBOX_INFO__INIT;
        char errmsg[400] = "";
        Sandbox *sb;
        int r;

        if (c->uid != 0) {
                client_reply_error(s, c, seq, -EPERM, "only root may create sandboxes");
                return;
        }
        r = sandbox_create(s, req, c->uid, &sb, errmsg, sizeof(errmsg));
        if (r < 0) {
                client_reply_error(s, c, seq, r, "%s", errmsg[0] ? errmsg : strerror(-r));
                return;
        }
        sandbox_info(s, sb, &info);
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

static void handle_status(Server *s, Client *c, uint32_t seq) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__StatusReply st = SBX__STATUS_REPLY__INIT;
        WorkspaceSession *ws;
        Command *cmd;
        Sandbox *sb;

        st.version = (char *) SBX_VERSION;
        st.proto_version = SBX_PROTO_VERSION;
        st.pid = getpid();
        st.uptime_seconds = (double) (now_usec() - s->started_usec) / 1e6;
        st.cgroup_backend = (char *) (s->cgroups ? cgroup_backend_to_string(cgroup_manager_backend(s->cgroups)) : "none");
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                st.sandboxes++;
        TAILQ_FOREACH(ws, &s->sessions, link)
                st.live_sessions++;
        TAILQ_FOREACH(cmd, &s->commands, link)
                if (!cmd->finished)
                        st.running_commands++;
        st.clients = s->n_clients;
        st.state_dir = s->cfg.state_dir;
        st.run_dir = s->cfg.run_dir;
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
        } else {
                r = session_new(s, sb, true, true, &ws, errmsg, sizeof(errmsg));
                if (r < 0) {
                        client_reply_error(s, c, seq, r, "%s", errmsg[0] ? errmsg : strerror(-r));
                        return;
                }
        }
        r = command_start(s, ws, req->cmd, timeout_ms, &cmd);
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
        if (!cmd || strcmp(cmd->rec.sandbox, sb->name) != 0) {
                StoreCommand rec;
                if (store_command_get(s->store, req->command_session, &rec) >= 0 &&
                    strcmp(rec.sandbox, sb->name) == 0)
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
        r = command_read_reply(s, req->command_session, sb, req->start_offset, limit, c, seq);
        if (r == -ENOENT)
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

static bool string_ok(const char *str, size_t max) {
        return strnlen(str, max + 1) <= max;
}

/* Field checks common to all requests: bounded strings. Returns false after replying. */
static bool request_valid(Server *s, Client *c, uint32_t seq, const Sbx__Msg *m) {
        const char *sandbox = NULL, *session = NULL;

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
        default:
                break;
        }
        if ((sandbox && !string_ok(sandbox, SBX_NAME_MAX)) || (session && !string_ok(session, SBX_NAME_MAX))) {
                client_reply_error(s, c, seq, -ENOENT, "no such sandbox or session (names are at most %u bytes)",
                                   SBX_NAME_MAX);
                return false;
        }
        return true;
}

static void client_handle(Server *s, Client *c, uint32_t seq, Sbx__Msg *m) {
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
        default:
                client_drop(s, c, "message type not allowed from a client");
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
        uint32_t seq;
        int r = wire_recv(src->fd, &m, &seq, NULL, NULL);
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
        TAILQ_FOREACH(w, &c->waiters, client_link)
                pending++;
        if (pending >= SBX_MAX_PENDING_PER_CLIENT) {
                client_reply_error(s, c, seq, -EBUSY, "too many unanswered requests on this connection (limit %u)",
                                   SBX_MAX_PENDING_PER_CLIENT);
                return;
        }
        client_handle(s, c, seq, m);
}
