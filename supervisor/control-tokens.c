/* Requests about sbx-gateway's bearer tokens (core/token.h): create, list
 * and revoke (sbxctl token), the hello that makes a connection act for a
 * token's owner, and the check the gateway makes for every HTTP request
 * (on a connection of its own, which acts for nobody). A connection that acts for a token is its owner's in
 * every other check (uid), as a local sandbox-mcp of that user would be; its
 * token is checked again before each of its requests, so a revoked or
 * expired token stops working at once. */
#include <errno.h>
#include <string.h>

#include "control.h"
#include "core/token.h"
#include "fd-util.h"
#include "log.h"
#include "sbx-limits.h"

/* A comma-separated list of names of a-z, 0-9 and -; "" is every set. */
static bool sets_valid(const char *sets) {
        size_t n = strlen(sets);

        if (n == 0)
                return true;
        if (strspn(sets, "abcdefghijklmnopqrstuvwxyz0123456789-,") != n || sets[0] == ',' || sets[n - 1] == ',')
                return false;
        return !strstr(sets, ",,");
}

/* Fill i (the caller's memory: a request owns only REQUEST_OWNED_MAX blocks,
 * so a list takes one block for all its tokens). */
static void token_info_fill(const Token *t, Sbx__TokenInfo *i) {
        *i = (Sbx__TokenInfo) SBX__TOKEN_INFO__INIT;
        i->id = (char *) t->id;
        i->name = (char *) t->name;
        i->owner_uid = t->owner;
        i->sets = (char *) t->sets;
        i->created_unix = t->created_unix;
        i->expires_unix = t->expires_unix;
        i->expired = token_expired(t, now_unix_usec() / 1000000);
}

static int token_info(Request *rq, const Token *t, Sbx__TokenInfo **ret) {
        Sbx__TokenInfo *i = request_alloc(rq, sizeof(*i));

        if (!i)
                return -ENOMEM;
        token_info_fill(t, i);
        *ret = i;
        return 0;
}

int handle_token_create(Request *rq) {
        const Sbx__TokenCreate *m = rq->msg->token_create;
        char *secret = request_alloc(rq, TOKEN_SECRET_SIZE);
        Sbx__TokenInfo *i;
        Token *t;
        int r;

        if (!secret)
                return -ENOMEM;
        if (m->owner_uid == 0)
                return request_error(rq, -EINVAL, "a token may not act for root: name an unprivileged --owner");
        if (m->expires_seconds < 0 || m->expires_seconds > SBX_TOKEN_EXPIRES_MAX_S)
                return request_error(rq, -EINVAL, "--expires must be between 1 second and %lld days",
                                     SBX_TOKEN_EXPIRES_MAX_S / 86400);
        if (!sets_valid(m->sets))
                return request_error(rq, -EINVAL, "--sets '%.80s' is not a comma-separated list of set names", m->sets);
        r = token_create(rq->server, m->owner_uid, m->name, m->expires_seconds, m->sets, secret, &t);
        if (r == -EEXIST)
                return request_error(rq, r, "a token named '%.80s' exists already", m->name);
        if (r == -ENOSPC)
                return request_error(rq, r, "sbxd keeps at most %u tokens: revoke some first", SBX_TOKENS_MAX);
        if (r < 0)
                return request_error(rq, r, "cannot store the token: %s", strerror(-r));
        log_info("Token %s (%s) created for uid %u", t->id, t->name, (unsigned) t->owner);
        r = token_info(rq, t, &i);
        if (r < 0)
                return r;
        i->token = secret;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_TOKEN, i);
}

int handle_token_list(Request *rq) {
        Sbx__TokenListReply *l = REQUEST_NEW(rq, Sbx__TokenListReply, SBX__TOKEN_LIST_REPLY__INIT);
        size_t n = rq->server->n_tokens ?: 1;
        Sbx__TokenInfo **v = request_alloc(rq, n * sizeof(*v)), *infos = request_alloc(rq, n * sizeof(*infos));
        uid_t caller = rq->client->uid;
        Token *t;

        if (!l || !v || !infos)
                return -ENOMEM;
        /* Root sees every token, anyone else their own. */
        TAILQ_FOREACH(t, &rq->server->tokens, link) {
                if (caller != 0 && t->owner != caller)
                        continue;
                token_info_fill(t, &infos[l->n_tokens]);
                v[l->n_tokens] = &infos[l->n_tokens];
                l->n_tokens++;
        }
        l->tokens = v;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_TOKEN_LIST, l);
}

int handle_token_revoke(Request *rq) {
        const char *which = rq->msg->token_revoke->id_or_name;
        int r = token_revoke(rq->server, which);

        if (r == -ENOENT)
                return request_error(rq, r, "no token with the id or name '%.80s'", which);
        if (r < 0)
                return request_error(rq, r, "cannot forget the token: %s", strerror(-r));
        log_info("Token %s revoked", which);
        return 0;
}

/* The same answer for every refusal: the gateway shows only 401 anyway. */
static int token_refused(Request *rq, int r) {
        return request_error(rq, r == -EKEYEXPIRED ? r : -EACCES,
                             r == -EKEYEXPIRED ? "the token expired" : "not a valid token");
}

int handle_token_check(Request *rq) {
        Sbx__TokenInfo *i;
        Token *t;
        int r;

        if (!rq->client->gateway)
                return request_error(rq, -EPERM, "only sbxd.conf's gateway_user may check tokens");
        r = token_verify(rq->server, rq->msg->token_check->token, &t);
        if (r < 0)
                return token_refused(rq, r);
        r = token_info(rq, t, &i);
        if (r < 0)
                return r;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_TOKEN, i);
}

int control_token_hello(Request *rq, const char *secret) {
        Client *c = rq->client;
        Sbx__TokenInfo *i;
        Token *t;
        int r;

        if (!c->gateway)
                return request_error(rq, -EPERM, "only sbxd.conf's gateway_user may act for a token");
        r = token_verify(rq->server, secret, &t);
        if (r < 0)
                return token_refused(rq, r);
        r = token_info(rq, t, &i);
        if (r < 0)
                return r;
        strcpy(c->token_id, t->id);
        c->uid = t->owner;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_TOKEN, i);
}

int control_token_still_valid(Request *rq) {
        Token *t = token_find(rq->server, rq->client->token_id);

        if (!t)
                return request_error(rq, -EKEYREVOKED, "the token was revoked");
        if (token_expired(t, now_unix_usec() / 1000000))
                return request_error(rq, -EKEYEXPIRED, "the token expired");
        return 0;
}
