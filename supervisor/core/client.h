/* A client of sbxd.sock (sandbox-mcp, sbxctl) as the model sees it: its
 * kernel credentials, its queue of replies, and the requests it waits on.
 * This file is the one place that sends a reply: the request layer's
 * dispatcher sends each handler's answer through client_reply, and an answer
 * that comes later (a command's yield, a session or a sandbox once it is
 * made) goes through a Pending, which the client keeps until it is answered,
 * cancelled (MSG_CLIENT_CANCEL) or the client goes. A client that misbehaves
 * or goes is marked dead and freed by clients_reap, once per loop pass. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "core/server.h"
#include "macro.h"
#include "sbx-limits.h"
#include "wire.h"

typedef struct Pending Pending;
typedef struct OutFrame OutFrame;

struct Client {
        TAILQ_ENTRY(Client) link;
        EventSource src;
        uid_t uid;
        gid_t gid;              /* its primary group at connect (SO_PEERCRED) */
        pid_t pid;
        unsigned long long active_usec; /* its last request or answer; idle from then on */
        bool hello;
        char mcp_session[33];   /* ClientHello.mcp_session: "" for sbxctl */
        bool gateway;           /* connected as sbxd.conf's gateway_user */
        char token_id[17];      /* acting for this token's owner (ClientHello.token), or "" */
        char gateway_url[SBX_GATEWAY_URL_MAX + 1]; /* ClientHello.gateway_url (the gateway's), or "" */
        bool dead;              /* dropped; freed by clients_reap once no handler holds it */
        unsigned queued;
        unsigned n_pending;
        TAILQ_HEAD(, OutFrame) outq;
        TAILQ_HEAD(, Pending) pending;
};

/* A request whose answer comes after its handler returned. Its owner embeds
 * it; abandon runs (after the Pending is detached) when the client goes
 * (cancelled false) or sends MSG_CLIENT_CANCEL for its seq (cancelled true). */
struct Pending {
        TAILQ_ENTRY(Pending) link;
        Client *client;                 /* NULL: answered or abandoned */
        uint32_t seq;
        void (*abandon)(Server *s, Pending *p, bool cancelled);
};

/* A connected client on fd (taken, also on failure) whose frames go to dispatch. */
int client_new(Server *s, int fd, const struct ucred *cred, void (*dispatch)(Server *, EventSource *, uint32_t),
               Client **ret);
/* Mark c dead: it gets nothing more, and clients_reap frees it. */
void client_drop(Server *s, Client *c, const char *why);
/* Free the dead clients (once per loop pass; or all of them, sbxd stopping). */
void clients_reap(Server *s, bool all);
/* Send what waits in c's queue (its socket became writable). */
void client_flush(Server *s, Client *c);
void client_reply(Server *s, Client *c, uint32_t seq, Sbx__Reply *reply);
/* The same with fd (taken; -EBADF: none) attached to the frame. A reply too
 * large for a frame goes packed in a memfd instead (Reply.in_fd). */
void client_reply_fd(Server *s, Client *c, uint32_t seq, Sbx__Reply *reply, int fd);
void client_reply_error(Server *s, Client *c, uint32_t seq, int err, const char *fmt, ...) _printf_(5, 6);
/* MSG_CLIENT_CANCEL: abandon c's pending request seq, if there is one. */
void client_cancel(Server *s, Client *c, uint32_t seq);
/* Clients idle for client_idle_seconds are closed (they reconnect when they need to). */
unsigned long long clients_next_deadline(Server *s);
void clients_run_deadlines(Server *s);

void pending_start(Pending *p, Client *c, uint32_t seq, void (*abandon)(Server *, Pending *, bool));
static inline bool pending_active(const Pending *p) {
        return p->client;
}
/* Answer and detach (nothing if it is not active). */
void pending_answer(Server *s, Pending *p, Sbx__Reply *reply);
/* The same with fd attached (taken; closed if nobody waits any more). */
void pending_answer_fd(Server *s, Pending *p, Sbx__Reply *reply, int fd);
void pending_answer_error(Server *s, Pending *p, int err, const char *fmt, ...) _printf_(4, 5);
/* Detach without answering. */
void pending_stop(Pending *p);
/* A frame of this type with body to p's client (seq p's), if it still
 * waits; p stays active. */
void pending_send(Server *s, Pending *p, Sbx__MsgType type, void *body);
/* A Progress frame to p's client (seq p's), if it still waits. */
void pending_progress(Server *s, Pending *p, const char *message, uint32_t n);
