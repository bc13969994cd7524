#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "core/client.h"
#include "fd-util.h"
#include "memfd-util.h"
#include "log.h"
#include "msg.h"
#include "sbx-limits.h"

struct OutFrame {
        TAILQ_ENTRY(OutFrame) link;
        int fd;                 /* sent with the frame (SCM_RIGHTS), or -EBADF */
        size_t len;
        uint8_t data[];
};

int client_new(Server *s, int fd, const struct ucred *cred, void (*dispatch)(Server *, EventSource *, uint32_t),
               Client **ret) {
        Client *c = calloc(1, sizeof(*c));
        int r;

        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        c->uid = cred->uid;
        c->gid = cred->gid;
        c->pid = cred->pid;
        c->active_usec = now_usec();
        c->src.dispatch = dispatch;
        TAILQ_INIT(&c->outq);
        TAILQ_INIT(&c->pending);
        r = server_watch(s, &c->src, fd, EPOLLIN);
        if (r < 0) {
                safe_close(fd);
                free(c);
                return r;
        }
        TAILQ_INSERT_TAIL(&s->clients, c, link);
        s->n_clients++;
        *ret = c;
        return 0;
}

static void pending_abandon(Server *s, Pending *p, bool cancelled) {
        pending_stop(p);
        p->abandon(s, p, cancelled);
}

static void client_free(Server *s, Client *c) {
        Pending *p;
        OutFrame *f;

        while ((p = TAILQ_FIRST(&c->pending)))
                pending_abandon(s, p, false);
        while ((f = TAILQ_FIRST(&c->outq))) {
                TAILQ_REMOVE(&c->outq, f, link);
                safe_close(f->fd);
                free(f);
        }
        server_unwatch(s, &c->src);
        TAILQ_REMOVE(&s->clients, c, link);
        if (c->gateway)
                s->n_gateway_clients--;
        else
                s->n_clients--;
        free(c);
}

void clients_reap(Server *s, bool all) {
        Client *c, *next;

        TAILQ_FOREACH_SAFE(c, &s->clients, link, next)
                if (c->dead || all)
                        client_free(s, c);
}

static void client_close(Client *c) {
        c->dead = true;
        (void) shutdown(c->src.fd, SHUT_RDWR);
}

void client_drop(Server *s, Client *c, const char *why) {
        if (c->dead)
                return;
        log_info("Dropping client pid %d uid %u: %s", (int) c->pid, c->uid, why);
        client_close(c);
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
                if (c->n_pending > 0 || c->queued > 0 || recv(c->src.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
                        c->active_usec = now;
                        continue;
                }
                /* A broker connects again with its next call: not worth more than a debug line. */
                log_debug("Closing client pid %d uid %u: no request for %u s", (int) c->pid, c->uid,
                          s->cfg.client_idle_seconds);
                client_close(c);
        }
}

/* A reply too large for a frame, packed into a sealed memfd (Reply.in_fd). */
static int reply_to_memfd(const Sbx__Reply *reply, int *ret_fd) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t n = sbx__reply__get_packed_size(reply);

        if (n > SBX_REPLY_IN_FD_MAX)
                return -EMSGSIZE;
        buf = malloc(n ?: 1);
        if (!buf)
                return -ENOMEM;
        sbx__reply__pack(reply, buf);
        return sealed_memfd_new("sbx-reply", buf, n, ret_fd);
}

static int client_send_queued(Client *c) {
        OutFrame *f;

        while ((f = TAILQ_FIRST(&c->outq))) {
                ssize_t n = sendmsg_with_fds(c->src.fd, f->data, f->len, &f->fd, f->fd >= 0,
                                             MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return 0;
                        return -errno;
                }
                TAILQ_REMOVE(&c->outq, f, link);
                c->queued--;
                safe_close(f->fd);
                free(f);
        }
        return 0;
}

void client_flush(Server *s, Client *c) {
        if (c->dead)
                return;
        if (client_send_queued(c) < 0) {
                client_drop(s, c, "send failed");
                return;
        }
        /* Wake up for writing only while something waits. */
        (void) server_rewatch(s, &c->src, EPOLLIN | (c->queued ? EPOLLOUT : 0));
}

/* fd (>= 0: sent with the frame) is taken in every case. */
static void client_send(Server *s, Client *c, Sbx__Msg *m, uint32_t seq, int fd) {
        _cleanup_close_ int owned = fd;
        Sbx__Reply small = SBX__REPLY__INIT;
        OutFrame *f;
        ssize_t len;
        int r;

        if (c->dead)
                return;
        if (c->queued >= SBX_CLIENT_OUTQ_MAX) {
                client_drop(s, c, "not reading its replies");
                return;
        }
        f = malloc(sizeof(*f) + SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
        if (!f) {
                client_drop(s, c, "out of memory");
                return;
        }
        len = wire_pack(m, seq, owned >= 0, f->data, SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
        if (len < 0 && owned < 0 && m->type == SBX__MSG_TYPE__MSG_REPLY &&
            m->reply->body_case != SBX__REPLY__BODY__NOT_SET) {
                /* Too big for one frame: the whole reply in a memfd, or (larger still) say so. */
                r = reply_to_memfd(m->reply, &owned);
                if (r >= 0)
                        small.in_fd = true;
                else {
                        small.err = r == -EMSGSIZE ? -EMSGSIZE : r;
                        small.errmsg = (char *) "the reply is larger than a frame; ask for less (a smaller window or limit)";
                }
                m->reply = &small;
                len = wire_pack(m, seq, owned >= 0, f->data, SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
        }
        if (len < 0) {
                free(f);
                log_error_errno((int) len, "Failed to pack a reply: %m");
                return;
        }
        f->fd = TAKE_FD(owned);
        f->len = (size_t) len;
        TAILQ_INSERT_TAIL(&c->outq, f, link);
        c->queued++;
        c->active_usec = now_usec();
        client_flush(s, c);
}

void client_reply_fd(Server *s, Client *c, uint32_t seq, Sbx__Reply *reply, int fd) {
        Sbx__Msg m;

        msg_init(&m, SBX__MSG_TYPE__MSG_REPLY, reply);
        client_send(s, c, &m, seq, fd);
}

void client_reply(Server *s, Client *c, uint32_t seq, Sbx__Reply *reply) {
        client_reply_fd(s, c, seq, reply, -EBADF);
}

static void client_reply_errorv(Server *s, Client *c, uint32_t seq, int err, const char *fmt, va_list ap) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        char msg[1024];        /* an unknown sandbox names the caller's: SBX_SANDBOXES_NAMED of them */

        vsnprintf(msg, sizeof(msg), fmt, ap);
        reply.err = err < 0 ? err : -EIO;
        reply.errmsg = msg;
        client_reply(s, c, seq, &reply);
}

void client_reply_error(Server *s, Client *c, uint32_t seq, int err, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        client_reply_errorv(s, c, seq, err, fmt, ap);
        va_end(ap);
}

void client_cancel(Server *s, Client *c, uint32_t seq) {
        Pending *p;

        TAILQ_FOREACH(p, &c->pending, link)
                if (p->seq == seq) {
                        pending_abandon(s, p, true);
                        return;
                }
}

void pending_start(Pending *p, Client *c, uint32_t seq, void (*abandon)(Server *, Pending *, bool)) {
        p->client = c;
        p->seq = seq;
        p->abandon = abandon;
        TAILQ_INSERT_TAIL(&c->pending, p, link);
        c->n_pending++;
}

void pending_stop(Pending *p) {
        Client *c = TAKE_PTR(p->client);

        if (!c)
                return;
        TAILQ_REMOVE(&c->pending, p, link);
        c->n_pending--;
}

void pending_answer_fd(Server *s, Pending *p, Sbx__Reply *reply, int fd) {
        Client *c = p->client;

        if (!c) {
                safe_close(fd);
                return;
        }
        pending_stop(p);
        client_reply_fd(s, c, p->seq, reply, fd);
}

void pending_answer(Server *s, Pending *p, Sbx__Reply *reply) {
        pending_answer_fd(s, p, reply, -EBADF);
}

void pending_answer_error(Server *s, Pending *p, int err, const char *fmt, ...) {
        Client *c = p->client;
        va_list ap;

        if (!c)
                return;
        pending_stop(p);
        va_start(ap, fmt);
        client_reply_errorv(s, c, p->seq, err, fmt, ap);
        va_end(ap);
}

void pending_send(Server *s, Pending *p, Sbx__MsgType type, void *body) {
        Sbx__Msg m;

        if (!pending_active(p))
                return;
        msg_init(&m, type, body);
        client_send(s, p->client, &m, p->seq, -EBADF);
}

void pending_progress(Server *s, Pending *p, const char *message, uint32_t n) {
        Sbx__Progress body = SBX__PROGRESS__INIT;

        body.message = (char *) message;
        body.progress = n;
        pending_send(s, p, SBX__MSG_TYPE__MSG_PROGRESS, &body);
}
