/* The gateway's MCP sessions and its questions to sbxd. Each session is a
 * broker session (broker/session.h) with its own sbxd connection, made with
 * the bearer token so that sbxd treats it as the token's owner; the HTTP
 * threads that wait for answers on it take turns reading that connection
 * (one reads, the others wait on the condition variable). While no call
 * waits, the gateway's event loop reads it (gateway_sessions_dispatch), so
 * that what sbxd sends between calls (a job's end) reaches the GET stream
 * when it happens: the loop's epoll set holds every session's connection,
 * armed (EPOLLONESHOT) only while no HTTP thread waits on it. Tokens are
 * checked on a connection of the gateway's own (TOKEN_CHECK), one request
 * at a time, unless the session's own connection vouches for the request
 * (gateway_session_vouch). */
#include <errno.h>
#include <nettle/memops.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "gateway.h"
#include "jsonrpc.h"
#include "log.h"
#include "macro.h"
#include "wire.h"

#define POLL_SLICE_MS 1000      /* a waiting thread looks at its client this often */

typedef struct Note {
        struct Note *next;
        unsigned long long id;          /* the SSE event id: 1, 2, ... in the session */
        char *line;
        size_t len;
} Note;

/* A request waiting for its answer. A streamed one (an SSE answer to its
 * POST) also takes the notifications that belong to it (its progress). */
struct GwCall {
        GwCall *next;
        GwSession *session;             /* a reference of the call's own */
        json_t *id;
        char *line;
        size_t len;
        bool done;
        bool stream;
        Note *notes, *notes_tail;       /* not yet taken by gateway_call_next() */
};

struct GwSession {
        GwSession *next;
        Gateway *gateway;
        pthread_mutex_t lock;
        pthread_cond_t cond;            /* the calls' answers, and the reader's turn */
        pthread_cond_t stream_cond;     /* the GET stream's notifications */
        McpSession *mcp;
        uint64_t serial;                /* its key in the event loop's epoll set */
        int watched_fd;                 /* the sbxd connection that set holds, or -EBADF */
        bool watch_armed;               /* and whether it is armed */
        char id[GATEWAY_SESSION_ID_SIZE];
        TokenAuth auth;                 /* what sbxd said of its token when the session began */
        char *token;                    /* the bearer its sbxd connection acts for */
        char gateway_url[SBX_GATEWAY_URL_MAX + 1]; /* for sbxd (ClientHello.gateway_url) */
        int wake_fd;                    /* eventfd: the reader polls it with the socket */
        bool reading;                   /* a thread polls the socket */
        bool ended;
        unsigned refs;                  /* the table's and each request's */
        unsigned streams;
        unsigned stream_gen;            /* the GET stream that reads: a resuming one takes over */
        bool streamed;                  /* a GET stream was opened: notifications are kept for it */
        unsigned long long last_id;     /* of the newest notification */
        unsigned long long used_usec;
        GwCall *waiters;
        Note *notes, *notes_tail;       /* the last SBX_GATEWAY_STREAM_EVENTS, sent or not (replay) */
        size_t n_notes;
};

typedef struct Bucket {
        char id[sizeof(((TokenAuth *) 0)->id)];
        double tokens;
        unsigned long long at_usec;
} Bucket;

struct Gateway {
        GatewayConfig cfg;
        pthread_mutex_t lock;           /* sessions, buckets, tools */
        GwSession *sessions;
        size_t n_sessions;
        Tools *tools[1u << TOOL_SET_COUNT_];
        Bucket buckets[SBX_TOKENS_MAX];
        size_t n_buckets;
        pthread_mutex_t auth_lock;      /* the TOKEN_CHECK connection */
        int auth_fd;
        uint32_t auth_seq;
        int epoll_fd;                   /* the sessions' sbxd connections, for the event loop */
        uint64_t next_serial;
};

int gateway_state_new(const GatewayConfig *cfg, Gateway **ret) {
        Gateway *g = calloc(1, sizeof(*g));

        if (!g)
                return -ENOMEM;
        g->cfg = *cfg;
        g->auth_fd = -EBADF;
        g->auth_seq = 1;
        g->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (g->epoll_fd < 0) {
                int r = -errno;

                free(g);
                return r;
        }
        pthread_mutex_init(&g->lock, NULL);
        pthread_mutex_init(&g->auth_lock, NULL);
        *ret = g;
        return 0;
}

static void session_free(GwSession *s);

void gateway_state_free(Gateway *g) {
        if (!g)
                return;
        while (g->sessions) {
                GwSession *s = g->sessions;
                g->sessions = s->next;
                session_free(s);
        }
        for (size_t i = 0; i < ELEMENTSOF(g->tools); i++)
                tools_free(g->tools[i]);
        safe_close(g->auth_fd);
        safe_close(g->epoll_fd);
        free(g);
}

const GatewayConfig *gateway_config(const Gateway *g) {
        return &g->cfg;
}

/* ---- tokens --------------------------------------------------------------------- */

int gateway_sbxd_connect(Gateway *g, const char *token, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
        Sbx__Msg m = SBX__MSG__INIT;
        int r;

        r = wire_connect(g->cfg.socket_path, &fd);
        if (r < 0)
                return r;
        hello.client_name = (char *) "sbx-gateway";
        hello.token = (char *) (token ?: "");
        wire_msg_set(&m, SBX__MSG_TYPE__MSG_CLIENT_HELLO, &hello);
        r = wire_send(fd, &m, 0, NULL, 0);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Send req as seq on fd and wait for its reply; the hello's refusal ends the
 * wait with its error. ret_fd: the reply's first descriptor (-EBADF if none),
 * else every descriptor that comes is closed. */
static int round_trip(int fd, Sbx__Msg *req, uint32_t seq, Sbx__Msg **ret, int *ret_fd) {
        int r = wire_send(fd, req, seq, NULL, 0);

        if (r < 0)
                return r;
        for (;;) {
                _cleanup_msg_ Sbx__Msg *m = NULL;
                int fds[SBX_WIRE_MAX_FDS];
                size_t n_fds = 0;
                uint32_t got;
                bool mine;

                r = wire_recv(fd, &m, &got, fds, &n_fds);
                mine = r >= 0 && m->type == SBX__MSG_TYPE__MSG_REPLY && got == seq && ret_fd;
                for (size_t i = mine ? 1 : 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (r < 0)
                        return r;
                if (m->type != SBX__MSG_TYPE__MSG_REPLY)
                        continue;
                if (got == 0 && m->reply->err < 0)
                        return m->reply->err;   /* the hello refused: not the gateway user, or the token */
                if (got == seq) {
                        if (ret_fd)
                                *ret_fd = n_fds > 0 ? fds[0] : -EBADF;
                        *ret = TAKE_PTR(m);
                        return 0;
                }
        }
}

/* One request on the auth connection, connecting (with its hello) if needed. */
static int auth_round_trip(Gateway *g, Sbx__Msg *req, Sbx__Msg **ret) {
        uint32_t seq;
        int r;

        if (g->auth_fd < 0) {
                r = gateway_sbxd_connect(g, NULL, &g->auth_fd);
                if (r < 0)
                        return r;
        }
        seq = g->auth_seq++ ?: g->auth_seq++;
        return round_trip(g->auth_fd, req, seq, ret, NULL);
}

int gateway_file_open(Gateway *g, const char *token, const char *id, int *ret_fd, GatewayFile *ret) {
        _cleanup_close_ int fd = -EBADF, file = -EBADF;
        _cleanup_msg_ Sbx__Msg *reply = NULL;
        Sbx__BoxFileOpen open_req = SBX__BOX_FILE_OPEN__INIT;
        Sbx__Msg req = SBX__MSG__INIT;
        const Sbx__BoxFileReply *o;
        int r;

        /* A connection of its own that acts for the token's owner: sbxd looks among that uid's files only. */
        r = gateway_sbxd_connect(g, token, &fd);
        if (r < 0)
                return r;
        open_req.id = (char *) id;
        wire_msg_set(&req, SBX__MSG_TYPE__MSG_CLIENT_BOX_FILE_OPEN, &open_req);
        r = round_trip(fd, &req, 1, &reply, &file);
        if (r < 0)
                return r == -EKEYEXPIRED || r == -EKEYREVOKED ? -EACCES : r;
        if (reply->reply->err < 0)
                return reply->reply->err;
        if (reply->reply->body_case != SBX__REPLY__BODY_BOX_FILE || file < 0)
                return -EBADMSG;
        o = reply->reply->box_file;
        *ret = (GatewayFile) { .bytes = o->bytes };
        strlcpy(ret->name, o->path, sizeof(ret->name));
        *ret_fd = TAKE_FD(file);
        return 0;
}

int gateway_ask(Gateway *g, Sbx__Msg *req, Sbx__Msg **ret) {
        int r = -ENOTCONN;

        pthread_mutex_lock(&g->auth_lock);
        /* sbxd closes an idle connection (client_idle_seconds): one more try on a new one. */
        for (int attempt = 0; attempt < 2; attempt++) {
                r = auth_round_trip(g, req, ret);
                if (r >= 0 || r == -EPERM)
                        break;
                g->auth_fd = safe_close(g->auth_fd);
        }
        pthread_mutex_unlock(&g->auth_lock);
        return r;
}

int gateway_check_token(Gateway *g, const char *token, TokenAuth *ret) {
        _cleanup_msg_ Sbx__Msg *reply = NULL;
        Sbx__TokenCheck check = SBX__TOKEN_CHECK__INIT;
        Sbx__Msg req = SBX__MSG__INIT;
        const Sbx__TokenInfo *t;
        const char *bad = NULL;
        unsigned sets = 0;
        int r;

        check.token = (char *) token;
        wire_msg_set(&req, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CHECK, &check);
        r = gateway_ask(g, &req, &reply);
        if (r < 0)
                return r;
        if (reply->reply->err < 0)
                return reply->reply->err == -EACCES || reply->reply->err == -EKEYEXPIRED ? -EACCES : reply->reply->err;
        if (reply->reply->body_case != SBX__REPLY__BODY_TOKEN)
                return -EBADMSG;
        t = reply->reply->token;
        if (t->sets[0] && tool_sets_parse(t->sets, &sets, &bad) < 0)
                return -ENOMEDIUM;      /* a set this gateway does not know */
        *ret = (TokenAuth) { .owner_uid = t->owner_uid, .sets = t->sets[0] ? sets : tool_sets_all(),
                             .expires_unix = t->expires_unix };
        strlcpy(ret->id, t->id, sizeof(ret->id));
        return 0;
}

/* The session's sbxd connection is open and sbxd has not shut it down (s->lock held). */
static bool session_connection_open(const GwSession *s) {
        struct pollfd p = { .fd = mcp_session_fd(s->mcp), .events = POLLRDHUP };

        return p.fd >= 0 && poll(&p, 1, 0) == 0;
}

bool gateway_session_vouch(Gateway *g, const char *id, const char *token, TokenAuth *ret) {
        size_t len = strlen(token);
        bool ok = false;
        GwSession *s;

        pthread_mutex_lock(&g->lock);
        for (s = g->sessions; s; s = s->next)
                if (strcmp(s->id, id) == 0)
                        break;
        if (s) {
                pthread_mutex_lock(&s->lock);
                ok = !s->ended && strlen(s->token) == len && memeql_sec(s->token, token, len) &&
                     (s->auth.expires_unix == 0 || (int64_t) time(NULL) < s->auth.expires_unix) &&
                     session_connection_open(s);
                if (ok)
                        *ret = s->auth;
                pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_unlock(&g->lock);
        return ok;
}

int gateway_rate_take(Gateway *g, const char *token_id, unsigned *ret_retry_s) {
        double rate = g->cfg.requests_per_second, burst = 2.0 * rate;
        unsigned long long now = now_usec();
        Bucket *b = NULL;
        int r = 0;

        if (rate <= 0)
                return 0;
        pthread_mutex_lock(&g->lock);
        for (size_t i = 0; i < g->n_buckets && !b; i++)
                if (strcmp(g->buckets[i].id, token_id) == 0)
                        b = &g->buckets[i];
        if (!b) {
                /* A token not seen yet takes a free bucket, or the one used longest ago
                 * (a revoked token's): a full bucket again, the same as after that long. */
                b = &g->buckets[g->n_buckets < ELEMENTSOF(g->buckets) ? g->n_buckets++ : 0];
                for (size_t i = 0; g->n_buckets == ELEMENTSOF(g->buckets) && i < g->n_buckets; i++)
                        if (g->buckets[i].at_usec < b->at_usec)
                                b = &g->buckets[i];
                *b = (Bucket) { .tokens = burst, .at_usec = now };
                strlcpy(b->id, token_id, sizeof(b->id));
        }
        b->tokens = MIN(burst, b->tokens + (double) (now - b->at_usec) / 1e6 * rate);
        b->at_usec = now;
        if (b->tokens >= 1.0)
                b->tokens -= 1.0;
        else {
                *ret_retry_s = (unsigned) ((1.0 - b->tokens) / rate) + 1;
                r = -EAGAIN;
        }
        pthread_mutex_unlock(&g->lock);
        return r;
}

/* ---- sessions -------------------------------------------------------------------- */

static void notes_free(Note *n) {
        while (n) {
                Note *next = n->next;
                free(n->line);
                free(n);
                n = next;
        }
}

static void session_free(GwSession *s) {
        notes_free(s->notes);
        mcp_session_free(s->mcp);       /* its socket leaves the epoll set as it closes */
        safe_close(s->wake_fd);
        if (s->token)
                explicit_bzero(s->token, strlen(s->token));
        free(s->token);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        pthread_cond_destroy(&s->stream_cond);
        free(s);
}

/* A copy of line as the session's next event (s->lock held): the GET
 * stream's and the streamed calls' events share one sequence of ids, so a
 * Last-Event-ID of either names a point in the session. */
static int note_append(GwSession *s, const char *line, size_t len, Note **head, Note **tail) {
        Note *n = calloc(1, sizeof(*n));

        if (!n || !(n->line = strndup(line, len))) {
                free(n);
                return -ENOMEM;
        }
        n->len = len;
        n->id = ++s->last_id;
        if (*tail)
                (*tail)->next = n;
        else
                *head = n;
        *tail = n;
        return 0;
}

/* The broker session's output (under s->lock): to the request waiting for
 * it; a notification that belongs to a streamed call to that call, any
 * other to the GET stream's queue. */
static int session_send(void *userdata, const char *line, size_t len, const json_t *id, bool response) {
        GwSession *s = userdata;
        int r;

        for (GwCall *w = s->waiters; w && id; w = w->next) {
                if (w->done || !json_equal(w->id, (json_t *) id) || (!response && !w->stream))
                        continue;
                if (response) {
                        w->line = strndup(line, len);
                        if (!w->line)
                                return -ENOMEM;
                        w->len = len;
                        w->done = true;
                } else if ((r = note_append(s, line, len, &w->notes, &w->notes_tail)) < 0)
                        return r;
                pthread_cond_broadcast(&s->cond);
                return 0;
        }
        if (response)
                return 0;       /* its client went away */
        if (!s->streamed)
                return 0;       /* no GET stream ever asked for notifications */
        r = note_append(s, line, len, &s->notes, &s->notes_tail);
        if (r < 0)
                return r;
        if (++s->n_notes > SBX_GATEWAY_STREAM_EVENTS) {
                Note *old = s->notes;   /* the oldest leaves the replay buffer */

                s->notes = old->next;
                s->n_notes--;
                old->next = NULL;
                notes_free(old);
        }
        pthread_cond_broadcast(&s->stream_cond);
        return 0;
}

static const Tools *gateway_tools(Gateway *g, unsigned sets) {
        Tools *t;

        pthread_mutex_lock(&g->lock);
        if (!g->tools[sets] && tools_new(sets, &g->tools[sets]) < 0)
                g->tools[sets] = NULL;
        t = g->tools[sets];
        pthread_mutex_unlock(&g->lock);
        return t;
}

int gateway_session_new(Gateway *g, const TokenAuth *auth, const char *token, const char *gateway_url,
                        GwSession **ret) {
        GwSession *s = calloc(1, sizeof(*s));
        const Tools *tools = gateway_tools(g, auth->sets);
        size_t of_token = 0;
        int r;

        if (!s || !tools) {
                free(s);
                return -ENOMEM;
        }
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        pthread_cond_init(&s->stream_cond, NULL);
        s->gateway = g;
        s->watched_fd = -EBADF;
        s->refs = 2;
        s->used_usec = now_usec();
        s->auth = *auth;
        s->token = strdup(token);
        strlcpy(s->gateway_url, gateway_url, sizeof(s->gateway_url));
        s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        r = random_hex(s->id, 32);
        if (r >= 0 && (!s->token || s->wake_fd < 0))
                r = s->token ? -errno : -ENOMEM;
        if (r >= 0)
                r = mcp_session_new(&(McpSessionConfig) {
                                .socket_path = g->cfg.socket_path,
                                .client_name = "sbx-gateway",
                                .content = CONTENT_TEXT,
                                .tools = tools,
                                .token = s->token,
                                .identity = s->id,
                                .gateway_url = s->gateway_url,
                                .send = session_send,
                                .userdata = s,
                        }, &s->mcp);
        if (r < 0) {
                session_free(s);
                return r;
        }
        pthread_mutex_lock(&g->lock);
        for (GwSession *o = g->sessions; o; o = o->next)
                of_token += strcmp(o->auth.id, auth->id) == 0;
        if (g->n_sessions >= SBX_GATEWAY_SESSIONS_MAX)
                r = -ENOSPC;
        else if (of_token >= g->cfg.sessions_per_token)
                r = -EUSERS;
        else {
                s->serial = ++g->next_serial;
                s->next = g->sessions;
                g->sessions = s;
                g->n_sessions++;
        }
        pthread_mutex_unlock(&g->lock);
        if (r < 0) {
                session_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

GwSession *gateway_session_get(Gateway *g, const char *id, const TokenAuth *auth) {
        GwSession *s;

        pthread_mutex_lock(&g->lock);
        for (s = g->sessions; s; s = s->next)
                if (strcmp(s->id, id) == 0)
                        break;
        /* Another token's session is as unknown as one that never was. */
        if (s && strcmp(s->auth.id, auth->id) != 0)
                s = NULL;
        if (s) {
                pthread_mutex_lock(&s->lock);
                s->refs++;
                s->used_usec = now_usec();
                pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_unlock(&g->lock);
        return s;
}

void gateway_session_unref(Gateway *g, GwSession *s) {
        bool last;

        pthread_mutex_lock(&s->lock);
        last = --s->refs == 0;
        s->used_usec = now_usec();
        pthread_mutex_unlock(&s->lock);
        if (last)
                session_free(s);
}

/* Take s out of the table (g->lock held); the table's reference is the caller's. */
static bool session_unlink(Gateway *g, GwSession *s) {
        for (GwSession **p = &g->sessions; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        g->n_sessions--;
                        return true;
                }
        return false;
}

static void session_mark_ended(GwSession *s) {
        uint64_t one = 1;

        pthread_mutex_lock(&s->lock);
        s->ended = true;
        pthread_cond_broadcast(&s->cond);
        pthread_cond_broadcast(&s->stream_cond);
        pthread_mutex_unlock(&s->lock);
        (void) !write(s->wake_fd, &one, sizeof(one));
}

void gateway_session_end(Gateway *g, GwSession *s) {
        bool linked;

        pthread_mutex_lock(&g->lock);
        linked = session_unlink(g, s);
        pthread_mutex_unlock(&g->lock);
        if (!linked)
                return;
        log_debug("MCP session %s ended", s->id);
        session_mark_ended(s);
        gateway_session_unref(g, s);
}

void gateway_sessions_expire(Gateway *g) {
        unsigned long long idle = g->cfg.session_idle_seconds * 1000000ull, now = now_usec();

        for (;;) {
                GwSession *s, *found = NULL;

                pthread_mutex_lock(&g->lock);
                for (s = g->sessions; s && !found; s = s->next) {
                        pthread_mutex_lock(&s->lock);
                        /* refs 1: only the table holds it, no request is on it. */
                        if (s->refs == 1 && now > s->used_usec + idle)
                                found = s;
                        pthread_mutex_unlock(&s->lock);
                }
                pthread_mutex_unlock(&g->lock);
                if (!found)
                        return;
                log_info("MCP session %s idle for %u s, ending it", found->id, g->cfg.session_idle_seconds);
                gateway_session_end(g, found);
        }
}

void gateway_sessions_end_all(Gateway *g) {
        for (;;) {
                GwSession *s;

                pthread_mutex_lock(&g->lock);
                s = g->sessions;
                pthread_mutex_unlock(&g->lock);
                if (!s)
                        return;
                gateway_session_end(g, s);
        }
}

const char *gateway_session_id(const GwSession *s) {
        return s->id;
}

/* ---- the event loop's watch of idle sessions ----------------------------------------------- */

/* Arm (on) or disarm the event loop's watch of the session's sbxd
 * connection (s->lock held). Disarmed while an HTTP thread waits on the
 * session (that thread reads it); armed again when the last one leaves. A
 * socket the broker closed has left the epoll set with its close, so a new
 * one, even on the same number, is added. */
static void session_watch(GwSession *s, bool on) {
        int fd = mcp_session_fd(s->mcp), epfd = s->gateway->epoll_fd;
        struct epoll_event ev = {
                .events = EPOLLONESHOT | (on ? EPOLLIN | (mcp_session_wants_write(s->mcp) ? EPOLLOUT : 0) : 0),
                .data.u64 = s->serial,
        };

        if (fd < 0 || s->ended) {
                s->watched_fd = -EBADF;
                s->watch_armed = false;
                return;
        }
        if (fd == s->watched_fd && s->watch_armed == on && !(on && mcp_session_wants_write(s->mcp)))
                return;         /* as it is (a call answered without sbxd, such as ping, costs no syscall) */
        if (fd == s->watched_fd && epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0) {
                s->watch_armed = on;
                return;
        }
        if (!on)
                return;         /* not in the set: nothing to disarm */
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 || (errno == EEXIST && epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) == 0)) {
                s->watched_fd = fd;
                s->watch_armed = true;
        } else
                log_warning_errno(-errno, "MCP session %s: cannot watch its sbxd connection: %m", s->id);
}

int gateway_watch_fd(const Gateway *g) {
        return g->epoll_fd;
}

/* The session with this serial, with a reference; NULL once it left the table. */
static GwSession *session_by_serial(Gateway *g, uint64_t serial) {
        GwSession *s;

        pthread_mutex_lock(&g->lock);
        for (s = g->sessions; s && s->serial != serial; s = s->next)
                ;
        if (s) {
                pthread_mutex_lock(&s->lock);
                s->refs++;
                pthread_mutex_unlock(&s->lock);
        }
        pthread_mutex_unlock(&g->lock);
        return s;
}

/* A ready connection of an idle session (s->lock held): what sbxd sent goes
 * to the GET stream's queue (session_send), and the watch is armed again. */
static void session_on_ready(GwSession *s, uint32_t events) {
        /* epoll's EPOLLIN, EPOLLOUT, EPOLLERR and EPOLLHUP are poll's bits */
        short revents = (short) (events & (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP));
        int r;

        s->watch_armed = false;         /* EPOLLONESHOT: disabled by this event */
        if (s->waiters || s->reading || s->ended)
                return;         /* an HTTP thread reads it, and arms the watch when it leaves */
        if (mcp_session_fd(s->mcp) == s->watched_fd) {
                r = mcp_session_on_socket(s->mcp, revents);
                if (r < 0)
                        log_warning_errno(r, "MCP session %s: %m", s->id);
                if (mcp_session_expire(s->mcp) < 0)
                        log_warning("MCP session %s: cannot answer a call past its timeout", s->id);
        }
        session_watch(s, true);
}

void gateway_sessions_dispatch(Gateway *g) {
        struct epoll_event ev[SBX_GATEWAY_EVENTS_BATCH];
        int n = epoll_wait(g->epoll_fd, ev, ELEMENTSOF(ev), 0);

        for (int i = 0; i < n; i++) {
                GwSession *s = session_by_serial(g, ev[i].data.u64);

                if (!s)
                        continue;
                pthread_mutex_lock(&s->lock);
                session_on_ready(s, ev[i].events);
                pthread_mutex_unlock(&s->lock);
                gateway_session_unref(g, s);
        }
}

/* ---- waiting for answers -------------------------------------------------------------- */

static void wake(GwSession *s) {
        uint64_t one = 1;

        (void) !write(s->wake_fd, &one, sizeof(one));
}

static bool client_gone(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLRDHUP };

        return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Read the session's socket once (s->lock held, dropped while polling). */
static void session_read_once(GwSession *s, int client_fd) {
        int fd = mcp_session_fd(s->mcp);
        struct pollfd p[3] = {
                { .fd = fd, .events = POLLIN | (mcp_session_wants_write(s->mcp) ? POLLOUT : 0) },
                { .fd = s->wake_fd, .events = POLLIN },
                { .fd = client_fd, .events = POLLRDHUP },
        };
        uint64_t v;

        s->reading = true;
        pthread_mutex_unlock(&s->lock);
        (void) poll(p, ELEMENTSOF(p), POLL_SLICE_MS);
        if (p[1].revents)
                (void) !read(s->wake_fd, &v, sizeof(v));
        pthread_mutex_lock(&s->lock);
        s->reading = false;
        if (p[0].revents && fd == mcp_session_fd(s->mcp)) {
                int r = mcp_session_on_socket(s->mcp, p[0].revents);
                if (r < 0)
                        log_warning_errno(r, "MCP session %s: %m", s->id);
        }
        /* Calls past their timeout argument (lifecycle file tools): answered here, within a slice. */
        if (mcp_session_expire(s->mcp) < 0)
                log_warning("MCP session %s: cannot answer a call past its timeout", s->id);
        pthread_cond_broadcast(&s->cond);
}

/* Until the call's answer or, for a streamed call, a notification of it (s->lock held). */
static int wait_answer(GwSession *s, GwCall *w, int client_fd) {
        while (!w->done && !w->notes) {
                if (s->ended)
                        return -ESHUTDOWN;
                if (client_gone(client_fd)) {
                        log_debug("MCP session %s: the client of a call went away, cancelling it", s->id);
                        (void) mcp_session_cancel(s->mcp, w->id);
                        return -ECONNRESET;
                }
                if (mcp_session_fd(s->mcp) < 0)
                        return -ENOTCONN;       /* answered with an error by the drop, or never sent */
                if (!s->reading)
                        session_read_once(s, client_fd);
                else {
                        struct timespec ts;

                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_sec += POLL_SLICE_MS / 1000;
                        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
                }
        }
        return 0;
}

int gateway_call_start(GwSession *s, const char *body, size_t len, const json_t *id, bool stream, GwCall **ret) {
        json_t *copy = id ? json_deep_copy(id) : NULL;
        GwCall *w = NULL;
        int r;

        if (id && (!copy || !(w = calloc(1, sizeof(*w))))) {
                json_decref(copy);
                return -ENOMEM;
        }
        pthread_mutex_lock(&s->lock);
        if (s->ended) {
                pthread_mutex_unlock(&s->lock);
                json_decref(copy);
                free(w);
                return -ESHUTDOWN;
        }
        if (w) {
                *w = (GwCall) { .session = s, .id = copy, .stream = stream, .next = s->waiters };
                s->refs++;
                s->waiters = w;
        }
        r = mcp_session_handle_line(body, len, false, s->mcp);
        if (r >= 0 && w && !w->done)
                session_watch(s, false);        /* the call's thread reads until its answer */
        if (r >= 0 && !w && !s->waiters)
                session_watch(s, true);         /* a notification (a cancel) may have frames to write */
        if (r >= 0 && s->reading && mcp_session_wants_write(s->mcp))
                wake(s);        /* the reader polls for writing too now */
        s->used_usec = now_usec();
        pthread_mutex_unlock(&s->lock);
        if (r < 0 || !w) {
                gateway_call_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

int gateway_call_next(GwCall *w, int client_fd, char **ret_line, size_t *ret_len, unsigned long long *ret_event) {
        GwSession *s = w->session;
        Note *n;
        int r;

        pthread_mutex_lock(&s->lock);
        r = wait_answer(s, w, client_fd);
        n = r >= 0 ? w->notes : NULL;
        if (n) {
                w->notes = n->next;
                if (!w->notes)
                        w->notes_tail = NULL;
                *ret_line = TAKE_PTR(n->line);
                *ret_len = n->len;
                *ret_event = n->id;
                r = 1;
        } else if (r >= 0) {
                *ret_event = w->stream ? ++s->last_id : 0;
                *ret_line = TAKE_PTR(w->line);
                *ret_len = w->len;
        }
        s->used_usec = now_usec();
        pthread_mutex_unlock(&s->lock);
        free(n);
        return r;
}

void gateway_call_free(GwCall *w) {
        GwSession *s;

        if (!w)
                return;
        s = w->session;
        pthread_mutex_lock(&s->lock);
        for (GwCall **p = &s->waiters; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        s->used_usec = now_usec();
        if (!s->waiters)
                session_watch(s, true);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        notes_free(w->notes);
        free(w->line);
        json_decref(w->id);
        free(w);
        gateway_session_unref(s->gateway, s);
}

/* ---- the GET stream ------------------------------------------------------------------------ */

int gateway_stream_open(GwSession *s, bool resume, unsigned long long *io_cursor, unsigned *ret_gen) {
        int r = 0;

        pthread_mutex_lock(&s->lock);
        if (!resume && s->streams >= SBX_GATEWAY_STREAMS_PER_SESSION)
                r = -EBUSY;
        else if (resume && *io_cursor > s->last_id)
                r = -EINVAL;
        else {
                /* A resuming stream replaces the one it resumes (the client lost it; the
                 * server may not have noticed yet): that one ends at its next event. */
                s->streams++;
                s->streamed = true;
                if (!resume)
                        *io_cursor = s->last_id;
                *ret_gen = ++s->stream_gen;
                pthread_cond_broadcast(&s->stream_cond);
        }
        pthread_mutex_unlock(&s->lock);
        return r;
}

void gateway_stream_close(GwSession *s) {
        pthread_mutex_lock(&s->lock);
        s->streams--;
        pthread_mutex_unlock(&s->lock);
}

/* The first kept notification after cursor (s->lock held), or NULL. */
static const Note *note_after(const GwSession *s, unsigned long long cursor) {
        for (const Note *n = s->notes; n; n = n->next)
                if (n->id > cursor)
                        return n;
        return NULL;
}

int gateway_stream_next(GwSession *s, unsigned gen, unsigned timeout_ms, int client_fd,
                        unsigned long long *io_cursor, char **ret_line, size_t *ret_len) {
        unsigned long long until = now_usec() + timeout_ms * 1000ull;
        const Note *n;
        int r = 0;

        pthread_mutex_lock(&s->lock);
        /* In slices, to see a client gone (a write to its socket would show it only at
         * the keepalive, and the stream holds the session off its idle expiry). */
        while (!(n = note_after(s, *io_cursor)) && !s->ended && gen == s->stream_gen && r == 0) {
                struct timespec ts;

                if (client_gone(client_fd))
                        r = -ECONNRESET;
                else if (now_usec() >= until)
                        r = -ETIMEDOUT;
                else {
                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_sec += POLL_SLICE_MS / 1000;
                        (void) pthread_cond_timedwait(&s->stream_cond, &s->lock, &ts);
                }
        }
        if (s->ended || gen != s->stream_gen)
                r = -ESHUTDOWN;
        else if (n) {
                char *line = strndup(n->line, n->len);

                r = line ? 0 : -ENOMEM;
                if (line) {
                        *io_cursor = n->id;
                        *ret_line = line;
                        *ret_len = n->len;
                }
        }
        s->used_usec = now_usec();
        pthread_mutex_unlock(&s->lock);
        return r;
}
