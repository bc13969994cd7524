#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "fd-util.h"
#include "macro.h"
#include "proxy.h"
#include "request.h"
#include "sbx-limits.h"

/* What an epoll event is for. */
typedef enum WatchKind { WATCH_LISTENER, WATCH_CLIENT, WATCH_UPSTREAM, WATCH_LOOKUPS, WATCH_CONTROL } WatchKind;
typedef struct Watch {
        WatchKind kind;
        void *owner;
} Watch;

typedef struct Listener {
        TAILQ_ENTRY(Listener) link;
        Watch watch;
        int fd;
        char key[48], sandbox[48];
        EgressPolicy policy;
        ProxyAlias aliases[SBX_EGRESS_ALIASES_MAX];
        size_t n_aliases;
} Listener;

typedef enum ConnState { CONN_HEAD, CONN_RESOLVING, CONN_CONNECTING, CONN_RELAY } ConnState;

/* One direction of a relay: src -> pipe -> dst, and bytes to send before. */
typedef struct Pump {
        int pipe[2];
        size_t fill, cap;
        char *pending;                  /* sent to dst first (the forwarded head, the 200 answer) */
        size_t pending_len, pending_off;
        bool eof, shut;
} Pump;

typedef struct Lookup Lookup;

typedef struct Conn {
        TAILQ_ENTRY(Conn) link;
        Proxy *proxy;
        Listener *listener;
        Watch client_watch, upstream_watch;
        int client, upstream;
        uint32_t client_events, upstream_events; /* registered; ~0u: not yet */
        ConnState state;
        char head[SBX_EGRESS_HEADER_MAX];
        size_t head_len;
        EgressRequest req;
        char target[SBX_EGRESS_HOST_MAX + 16];
        Lookup *lookup;
        struct addrinfo *addrs, *next_addr;
        char refused_why[80];           /* the last address's refusal, if all are refused */
        time_t deadline;                /* handshake deadline, then idle deadline */
        Pump up, down;                  /* client -> upstream, upstream -> client */
        bool dead;                      /* closed; freed after the batch of events it may still be in */
} Conn;

struct Lookup {
        Conn *conn;                     /* NULL once the connection went */
        Proxy *proxy;
        char host[SBX_EGRESS_HOST_MAX + 1], port[8];
        struct addrinfo *result;
        int err;
};

struct Proxy {
        int epfd, lookup_pipe[2];
        Watch lookup_watch, control_watch;
        void (*on_control)(void *userdata);
        void *control_userdata;
        ProxyVerdict verdict;
        void *userdata;
        bool allow_private, stop;
        EgressHosts package_hosts;
        TAILQ_HEAD(, Listener) listeners;
        TAILQ_HEAD(, Conn) conns;
        TAILQ_HEAD(, Conn) dead;
        unsigned n_conns;
};

static time_t now_s(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec;
}

static int watch_set(Proxy *p, int fd, Watch *w, uint32_t events, uint32_t *registered) {
        struct epoll_event ev = { .events = events, .data.ptr = w };
        int op = *registered == ~0u ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;

        if (*registered == events)
                return 0;
        if (epoll_ctl(p->epfd, op, fd, &ev) < 0)
                return -errno;
        *registered = events;
        return 0;
}

int proxy_new(ProxyVerdict verdict, void *userdata, Proxy **ret) {
        Proxy *p = calloc(1, sizeof(*p));
        struct epoll_event ev = { .events = EPOLLIN };

        if (!p)
                return -ENOMEM;
        TAILQ_INIT(&p->listeners);
        TAILQ_INIT(&p->conns);
        TAILQ_INIT(&p->dead);
        p->verdict = verdict;
        p->userdata = userdata;
        p->lookup_pipe[0] = p->lookup_pipe[1] = -EBADF;
        p->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (p->epfd < 0 || pipe2(p->lookup_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
                int r = -errno;
                proxy_free(p);
                return r;
        }
        p->lookup_watch = (Watch) { WATCH_LOOKUPS, p };
        ev.data.ptr = &p->lookup_watch;
        if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->lookup_pipe[0], &ev) < 0) {
                int r = -errno;
                proxy_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void proxy_configure(Proxy *p, bool allow_private, EgressHosts *package_hosts) {
        p->allow_private = allow_private;
        egress_hosts_done(&p->package_hosts);
        p->package_hosts = *package_hosts;
        *package_hosts = (EgressHosts) {};
}

static void pump_done(Pump *pm) {
        safe_close(pm->pipe[0]);
        safe_close(pm->pipe[1]);
        free(pm->pending);
}

/* Close c now; its memory goes in conns_reap, after the current batch. */
static void conn_free(Conn *c) {
        Proxy *p = c->proxy;

        TAILQ_REMOVE(&p->conns, c, link);
        TAILQ_INSERT_TAIL(&p->dead, c, link);
        p->n_conns--;
        c->dead = true;
        if (c->lookup)
                c->lookup->conn = NULL; /* its thread's answer is dropped when it comes */
        c->lookup = NULL;
        c->client = safe_close(c->client);
        c->upstream = safe_close(c->upstream);
}

static void conns_reap(Proxy *p) {
        Conn *c;

        while ((c = TAILQ_FIRST(&p->dead))) {
                TAILQ_REMOVE(&p->dead, c, link);
                if (c->addrs)
                        freeaddrinfo(c->addrs);
                egress_request_done(&c->req);
                pump_done(&c->up);
                pump_done(&c->down);
                free(c);
        }
}

/* Answer the client with an error status and close (best effort: the
 * answer is small and the socket new). */
static void conn_fail(Conn *c, const char *status, const char *why) {
        char buf[256];
        int n = snprintf(buf, sizeof(buf), "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                         "Content-Length: %zu\r\n\r\nsbx-egress: %s\n", status, strlen(why) + 13, why);

        if (n > 0)
                (void) send(c->client, buf, MIN((size_t) n, sizeof(buf) - 1), MSG_NOSIGNAL | MSG_DONTWAIT);
        conn_free(c);
}

static void conn_refuse(Conn *c, const char *status, const char *why) {
        c->proxy->verdict(c->proxy->userdata, c->listener->key, c->target, false, why);
        conn_fail(c, status, why);
}

static unsigned sandbox_conns(Proxy *p, const char *sandbox) {
        unsigned n = 0;
        Conn *c;

        TAILQ_FOREACH(c, &p->conns, link)
                n += strcmp(c->listener->sandbox, sandbox) == 0;
        return n;
}

static void on_accept(Proxy *p, Listener *l) {
        for (unsigned i = 0; i < 16; i++) {
                int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                Conn *c;

                if (fd < 0)
                        return;
                /* Over a limit: closed at once, the client sees a reset or EOF. */
                if (p->n_conns >= SBX_EGRESS_CONNS_MAX || sandbox_conns(p, l->sandbox) >= SBX_EGRESS_CONNS_PER_SANDBOX ||
                    !(c = calloc(1, sizeof(*c)))) {
                        safe_close(fd);
                        continue;
                }
                *c = (Conn) { .proxy = p, .listener = l, .client = fd, .upstream = -EBADF,
                              .client_events = ~0u, .upstream_events = ~0u,
                              .deadline = now_s() + SBX_EGRESS_HANDSHAKE_S,
                              .up.pipe = { -EBADF, -EBADF }, .down.pipe = { -EBADF, -EBADF } };
                c->client_watch = (Watch) { WATCH_CLIENT, c };
                c->upstream_watch = (Watch) { WATCH_UPSTREAM, c };
                TAILQ_INSERT_TAIL(&p->conns, c, link);
                p->n_conns++;
                if (watch_set(p, fd, &c->client_watch, EPOLLIN, &c->client_events) < 0)
                        conn_free(c);
        }
}

static void *lookup_thread(void *userdata) {
        Lookup *lk = userdata;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_NUMERICSERV };

        lk->err = getaddrinfo(lk->host, lk->port, &hints, &lk->result);
        /* A pointer is written whole to a pipe (PIPE_BUF). */
        if (write(lk->proxy->lookup_pipe[1], &lk, sizeof(lk)) != sizeof(lk))
                abort();
        return NULL;
}

static int lookup_start(Conn *c) {
        Lookup *lk = calloc(1, sizeof(*lk));
        pthread_attr_t attr;
        pthread_t t;
        int r;

        if (!lk)
                return -ENOMEM;
        *lk = (Lookup) { .conn = c, .proxy = c->proxy };
        strlcpy(lk->host, c->req.host, sizeof(lk->host));
        snprintf(lk->port, sizeof(lk->port), "%u", c->req.port);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256u << 10);
        r = -pthread_create(&t, &attr, lookup_thread, lk);
        pthread_attr_destroy(&attr);
        if (r < 0) {
                free(lk);
                return r;
        }
        c->lookup = lk;
        c->state = CONN_RESOLVING;
        return 0;
}

static bool policy_allows(const Proxy *p, const Conn *c) {
        switch (c->listener->policy) {
        case EGRESS_OPEN:
                return true;
        case EGRESS_PACKAGE_MANAGERS:
                return egress_hosts_allow(&p->package_hosts, c->req.host, c->req.port);
        default:
                return false;
        }
}

/* An aliased name:port is its alias's host:to_port from here on (the
 * policy, the lookup, the verdict); a plain request's Host stays the name. */
static void alias_apply(Conn *c) {
        const Listener *l = c->listener;

        for (size_t i = 0; i < l->n_aliases; i++)
                if (c->req.port == l->aliases[i].port && strcmp(c->req.host, l->aliases[i].name) == 0) {
                        strlcpy(c->req.host, l->aliases[i].host, sizeof(c->req.host));
                        c->req.port = l->aliases[i].to_port;
                        return;
                }
}

static void on_head(Conn *c) {
        ssize_t n = recv(c->client, c->head + c->head_len, sizeof(c->head) - c->head_len, 0);
        int r;

        if (n <= 0) {
                if (n == 0 || (errno != EAGAIN && errno != EINTR))
                        conn_free(c);
                return;
        }
        c->head_len += (size_t) n;
        r = egress_request_parse(c->head, c->head_len, &c->req);
        if (r == -EAGAIN)
                return;
        if (r < 0) {
                conn_fail(c, r == -E2BIG ? "431 Request Header Fields Too Large" : "400 Bad Request",
                          r == -E2BIG ? "request head too large" : "not a proxy request this proxy takes");
                return;
        }
        alias_apply(c);
        snprintf(c->target, sizeof(c->target), strchr(c->req.host, ':') ? "[%s]:%u" : "%s:%u", c->req.host,
                 c->req.port);
        if (!policy_allows(c->proxy, c)) {
                conn_refuse(c, "403 Forbidden", "not allowed by the sandbox's egress policy");
                return;
        }
        /* Nothing more is read from the client until the upstream is there. */
        if (watch_set(c->proxy, c->client, &c->client_watch, 0, &c->client_events) < 0 || lookup_start(c) < 0)
                conn_refuse(c, "503 Service Unavailable", "cannot resolve now");
}

static int pump_open(Pump *pm) {
        if (pipe2(pm->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        (void) fcntl(pm->pipe[1], F_SETPIPE_SZ, (int) SBX_EGRESS_PIPE_BYTES);
        pm->cap = (size_t) MAX(fcntl(pm->pipe[1], F_GETPIPE_SZ), 4096);
        return 0;
}

static int pump_pending(Pump *pm, const void *data, size_t len) {
        pm->pending = malloc(len ?: 1);
        if (!pm->pending)
                return -ENOMEM;
        memcpy(pm->pending, data, len);
        pm->pending_len = len;
        return 0;
}

static void conn_update(Conn *c);

/* Connected: the verdict, then the relay (CONNECT: the 200 answer first;
 * plain HTTP: the rewritten head and what the client sent after it). */
static void conn_relay(Conn *c) {
        static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        size_t extra = c->head_len - c->req.head_len;
        int r;

        c->proxy->verdict(c->proxy->userdata, c->listener->key, c->target, true, NULL);
        r = pump_open(&c->up);
        if (r >= 0)
                r = pump_open(&c->down);
        if (r >= 0 && c->req.connect)
                r = pump_pending(&c->down, established, sizeof(established) - 1);
        if (r >= 0 && c->req.connect && extra)
                r = pump_pending(&c->up, c->head + c->req.head_len, extra);
        if (r >= 0 && !c->req.connect) {
                char *fwd = realloc(c->req.forward, c->req.forward_len + extra + 1);

                r = fwd ? 0 : -ENOMEM;
                if (fwd) {
                        memcpy(fwd + c->req.forward_len, c->head + c->req.head_len, extra);
                        c->up.pending = fwd;
                        c->up.pending_len = c->req.forward_len + extra;
                        c->req.forward = NULL;
                }
        }
        if (r < 0) {
                conn_free(c);
                return;
        }
        c->state = CONN_RELAY;
        c->deadline = now_s() + SBX_EGRESS_IDLE_S;
        conn_update(c);
}

/* The next resolved address the policy allows, connecting; refused when none is left. */
static void conn_connect_next(Conn *c) {
        for (; c->next_addr; c->next_addr = c->next_addr->ai_next) {
                struct addrinfo *ai = c->next_addr;
                int fd;

                if (!egress_addr_allowed(ai->ai_addr, c->proxy->allow_private)) {
                        snprintf(c->refused_why, sizeof(c->refused_why), "%s",
                                 egress_addr_class(ai->ai_addr) == ADDR_NEVER ? "a reserved address"
                                 : "a loopback, link-local, private or this host's address");
                        continue;
                }
                fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        continue;
                if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
                        snprintf(c->refused_why, sizeof(c->refused_why), "connect: %s", strerror(errno));
                        safe_close(fd);
                        continue;
                }
                c->next_addr = ai->ai_next;
                c->upstream = fd;
                c->upstream_events = ~0u;
                c->state = CONN_CONNECTING;
                if (watch_set(c->proxy, fd, &c->upstream_watch, EPOLLOUT, &c->upstream_events) < 0)
                        conn_refuse(c, "503 Service Unavailable", "out of resources");
                return;
        }
        if (strncmp(c->refused_why, "connect", 7) == 0)
                conn_refuse(c, "502 Bad Gateway", c->refused_why);
        else
                conn_refuse(c, "403 Forbidden", c->refused_why[0] ? c->refused_why : "no address");
}

static void on_connected(Conn *c) {
        int err = 0;
        socklen_t len = sizeof(err);

        if (getsockopt(c->upstream, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        if (err == 0) {
                conn_relay(c);
                return;
        }
        snprintf(c->refused_why, sizeof(c->refused_why), "connect: %s", strerror(err));
        (void) epoll_ctl(c->proxy->epfd, EPOLL_CTL_DEL, c->upstream, NULL);
        c->upstream = safe_close(c->upstream);
        conn_connect_next(c);
}

static void on_lookups(Proxy *p) {
        Lookup *lk;

        while (read(p->lookup_pipe[0], &lk, sizeof(lk)) == sizeof(lk)) {
                Conn *c = lk->conn;

                if (!c) {
                        if (lk->result)
                                freeaddrinfo(lk->result);
                        free(lk);
                        continue;
                }
                c->lookup = NULL;
                c->addrs = c->next_addr = lk->result;
                if (lk->err)
                        snprintf(c->refused_why, sizeof(c->refused_why), "connect: cannot resolve: %s",
                                 gai_strerror(lk->err));
                free(lk);
                conn_connect_next(c);
        }
}

/* Move what can move from src to dst; -errno when the relay is broken. */
static int pump_run(int src, int dst, Pump *pm, bool *ret_moved) {
        for (unsigned i = 0; i < 16; i++) {
                ssize_t n;

                if (pm->pending_off < pm->pending_len) {
                        n = send(dst, pm->pending + pm->pending_off, pm->pending_len - pm->pending_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (n < 0)
                                return errno == EAGAIN ? 0 : -errno;
                        pm->pending_off += (size_t) n;
                        *ret_moved = true;
                        continue;
                }
                if (pm->fill > 0) {
                        n = splice(pm->pipe[0], NULL, dst, NULL, pm->fill, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n < 0 && errno != EAGAIN)
                                return -errno;
                        if (n > 0) {
                                pm->fill -= (size_t) n;
                                *ret_moved = true;
                        }
                        if (n < 0 && pm->fill == pm->cap)
                                return 0;       /* dst is full and so is the pipe */
                }
                if (pm->eof || pm->fill >= pm->cap)
                        break;
                n = splice(src, NULL, pm->pipe[1], NULL, pm->cap - pm->fill, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                if (n == 0)
                        pm->eof = true;
                pm->fill += (size_t) n;
                *ret_moved = true;
        }
        if (pm->eof && pm->fill == 0 && pm->pending_off == pm->pending_len && !pm->shut) {
                (void) shutdown(dst, SHUT_WR);
                pm->shut = true;
        }
        return 0;
}

static uint32_t pump_events_src(const Pump *pm) {
        return pm->eof || pm->fill >= pm->cap ? 0 : EPOLLIN;
}

static uint32_t pump_events_dst(const Pump *pm) {
        return pm->fill > 0 || pm->pending_off < pm->pending_len ? EPOLLOUT : 0;
}

/* A relay's events from its pumps' state; both directions done: it ends. */
static void conn_update(Conn *c) {
        bool moved = false;
        int r;

        r = pump_run(c->client, c->upstream, &c->up, &moved);
        if (r >= 0)
                r = pump_run(c->upstream, c->client, &c->down, &moved);
        if (r < 0 || (c->up.shut && c->down.shut)) {
                conn_free(c);
                return;
        }
        if (moved)
                c->deadline = now_s() + SBX_EGRESS_IDLE_S;
        r = watch_set(c->proxy, c->client, &c->client_watch, pump_events_src(&c->up) | pump_events_dst(&c->down),
                      &c->client_events);
        if (r >= 0)
                r = watch_set(c->proxy, c->upstream, &c->upstream_watch,
                              pump_events_src(&c->down) | pump_events_dst(&c->up), &c->upstream_events);
        if (r < 0)
                conn_free(c);
}

int proxy_attach(Proxy *p, const char *key, const char *sandbox, EgressPolicy policy, const ProxyAlias *aliases,
                 size_t n_aliases, int fd) {
        struct epoll_event ev = { .events = EPOLLIN };
        Listener *l;

        proxy_detach(p, key);
        l = n_aliases <= SBX_EGRESS_ALIASES_MAX ? calloc(1, sizeof(*l)) : NULL;
        if (!l) {
                safe_close(fd);
                return n_aliases <= SBX_EGRESS_ALIASES_MAX ? -ENOMEM : -E2BIG;
        }
        memcpy(l->aliases, aliases, n_aliases * sizeof(*aliases));
        l->n_aliases = n_aliases;
        l->fd = fd;
        l->policy = policy;
        strlcpy(l->key, key, sizeof(l->key));
        strlcpy(l->sandbox, sandbox, sizeof(l->sandbox));
        l->watch = (Watch) { WATCH_LISTENER, l };
        ev.data.ptr = &l->watch;
        if (fd_nonblock(fd, true) < 0 || epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                int r = -errno;
                safe_close(fd);
                free(l);
                return r;
        }
        TAILQ_INSERT_TAIL(&p->listeners, l, link);
        return 0;
}

static void listener_free(Proxy *p, Listener *l) {
        Conn *c, *next;

        for (c = TAILQ_FIRST(&p->conns); c; c = next) {
                next = TAILQ_NEXT(c, link);
                if (c->listener == l)
                        conn_free(c);
        }
        TAILQ_REMOVE(&p->listeners, l, link);
        safe_close(l->fd);
        free(l);
}

void proxy_detach(Proxy *p, const char *key) {
        Listener *l;

        TAILQ_FOREACH(l, &p->listeners, link)
                if (strcmp(l->key, key) == 0) {
                        listener_free(p, l);
                        return;
                }
}

int proxy_watch_control(Proxy *p, int fd, void (*on_ready)(void *userdata), void *userdata) {
        struct epoll_event ev = { .events = EPOLLIN };

        p->control_watch = (Watch) { WATCH_CONTROL, p };
        p->on_control = on_ready;
        p->control_userdata = userdata;
        ev.data.ptr = &p->control_watch;
        return epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* Handshakes past SBX_EGRESS_HANDSHAKE_S and relays idle for SBX_EGRESS_IDLE_S go. */
static void expire(Proxy *p) {
        time_t now = now_s();
        Conn *c, *next;

        for (c = TAILQ_FIRST(&p->conns); c; c = next) {
                next = TAILQ_NEXT(c, link);
                if (now < c->deadline)
                        continue;
                if (c->state == CONN_HEAD || c->state == CONN_RELAY)
                        conn_free(c);
                else
                        conn_refuse(c, "504 Gateway Timeout", "timed out connecting");
        }
}

static void on_conn_event(Conn *c, WatchKind kind, uint32_t events) {
        if (c->dead)
                return;
        switch (c->state) {
        case CONN_HEAD:
                on_head(c);
                break;
        case CONN_CONNECTING:
                if (kind == WATCH_UPSTREAM) {
                        on_connected(c);
                        break;
                }
                _fallthrough_;
        case CONN_RESOLVING:
                /* Not read meanwhile: only a hang-up or error comes, and ends it. */
                if (events & (EPOLLHUP | EPOLLERR))
                        conn_free(c);
                break;
        case CONN_RELAY:
                conn_update(c);
                break;
        }
}

int proxy_run(Proxy *p) {
        struct epoll_event evs[64];

        while (!p->stop) {
                int n = epoll_wait(p->epfd, evs, (int) ELEMENTSOF(evs), 1000);

                if (n < 0 && errno != EINTR)
                        return -errno;
                for (int i = 0; i < n && !p->stop; i++) {
                        Watch *w = evs[i].data.ptr;

                        switch (w->kind) {
                        case WATCH_LISTENER:
                                on_accept(p, w->owner);
                                break;
                        case WATCH_LOOKUPS:
                                on_lookups(p);
                                break;
                        case WATCH_CONTROL:
                                p->on_control(p->control_userdata);
                                break;
                        default:
                                on_conn_event(w->owner, w->kind, evs[i].events);
                                break;
                        }
                        /* sbxd's messages may have closed listeners of this batch: start over. */
                        if (w->kind == WATCH_CONTROL)
                                break;
                }
                expire(p);
                conns_reap(p);
        }
        return 0;
}

void proxy_stop(Proxy *p) {
        p->stop = true;
}

Proxy *proxy_free(Proxy *p) {
        Listener *l;

        if (!p)
                return NULL;
        while ((l = TAILQ_FIRST(&p->listeners)))
                listener_free(p, l);
        conns_reap(p);
        safe_close(p->epfd);
        /* The lookup pipe stays open: threads still resolving write to it before the process exits. */
        egress_hosts_done(&p->package_hosts);
        free(p);
        return NULL;
}
