#include <errno.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

#include "core/client.h"
#include "core/token.h"
#include "data/store.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"

static void token_hash(const char *secret, uint8_t ret[TOKEN_HASH_SIZE]) {
        struct sha256_ctx ctx;

        sha256_init(&ctx);
        sha256_update(&ctx, strlen(secret), (const uint8_t *) secret);
        sha256_digest(&ctx, TOKEN_HASH_SIZE, ret);
}

bool token_expired(const Token *t, int64_t now_unix) {
        return t->expires_unix > 0 && now_unix >= t->expires_unix;
}

static int token_add(Server *s, const StoreToken *st) {
        Token *t;

        if (st->hash_len != TOKEN_HASH_SIZE || strlen(st->id) >= TOKEN_ID_SIZE ||
            strlen(st->name) > SBX_TOKEN_NAME_MAX || strlen(st->sets) > SBX_TOKEN_SETS_MAX)
                return -EBADMSG;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        strcpy(t->id, st->id);
        strcpy(t->name, st->name);
        strcpy(t->sets, st->sets);
        memcpy(t->hash, st->hash, TOKEN_HASH_SIZE);
        t->owner = (uid_t) st->owner_uid;
        t->created_unix = st->created_unix;
        t->expires_unix = st->expires_unix;
        TAILQ_INSERT_TAIL(&s->tokens, t, link);
        s->n_tokens++;
        return 0;
}

static int token_loaded(const StoreToken *st, void *userdata) {
        Server *s = userdata;
        int r = token_add(s, st);

        if (r == -EBADMSG) {
                log_warning("Ignoring the malformed record of token %s in sbx.db", st->id);
                return 0;
        }
        return r;
}

int tokens_load(Server *s) {
        return store_token_foreach(s->store, token_loaded, s);
}

static void token_free(Server *s, Token *t) {
        TAILQ_REMOVE(&s->tokens, t, link);
        s->n_tokens--;
        explicit_bzero(t->hash, sizeof(t->hash));
        free(t);
}

void tokens_free(Server *s) {
        Token *t;

        while ((t = TAILQ_FIRST(&s->tokens)))
                token_free(s, t);
}

static Token *token_find_name(Server *s, const char *name) {
        Token *t;

        TAILQ_FOREACH(t, &s->tokens, link)
                if (strcmp(t->name, name) == 0)
                        return t;
        return NULL;
}

Token *token_find(Server *s, const char *id) {
        Token *t;

        TAILQ_FOREACH(t, &s->tokens, link)
                if (strcmp(t->id, id) == 0)
                        return t;
        return NULL;
}

int token_create(Server *s, uid_t owner, const char *name, int64_t expires_seconds, const char *sets,
                 char ret_secret[TOKEN_SECRET_SIZE], Token **ret) {
        char id[TOKEN_ID_SIZE], secret[TOKEN_SECRET_SIZE];
        uint8_t hash[TOKEN_HASH_SIZE];
        int64_t now = now_unix_usec() / 1000000;
        StoreToken st;
        int r;

        if (s->n_tokens >= SBX_TOKENS_MAX)
                return -ENOSPC;
        r = random_id("tok-", id, sizeof(id));
        if (r < 0)
                return r;
        memcpy(secret, SBX_TOKEN_PREFIX, sizeof(SBX_TOKEN_PREFIX) - 1);
        r = random_hex(secret + sizeof(SBX_TOKEN_PREFIX) - 1, SBX_TOKEN_SECRET_HEX);
        if (r < 0)
                return r;
        if (token_find_name(s, name[0] ? name : id))
                return -EEXIST;
        token_hash(secret, hash);
        st = (StoreToken) {
                .id = id,
                .name = name[0] ? name : id,
                .owner_uid = owner,
                .hash = hash,
                .hash_len = sizeof(hash),
                .sets = sets,
                .created_unix = now,
                .expires_unix = expires_seconds > 0 ? now + expires_seconds : 0,
        };
        r = store_token_insert(s->store, &st);
        if (r < 0)
                return r;
        r = token_add(s, &st);
        if (r < 0) {
                (void) store_token_delete(s->store, id);
                return r;
        }
        memcpy(ret_secret, secret, sizeof(secret));
        explicit_bzero(secret, sizeof(secret));
        *ret = token_find(s, id);
        return 0;
}

int token_revoke(Server *s, const char *id_or_name) {
        Token *t = token_find(s, id_or_name) ?: token_find_name(s, id_or_name);
        Client *c;
        int r;

        if (!t)
                return -ENOENT;
        r = store_token_delete(s->store, t->id);
        if (r < 0)
                return r;
        TAILQ_FOREACH(c, &s->clients, link)
                if (strcmp(c->token_id, t->id) == 0)
                        client_drop(s, c, "its token was revoked");
        token_free(s, t);
        return 0;
}

int token_verify(Server *s, const char *secret, Token **ret) {
        uint8_t hash[TOKEN_HASH_SIZE];
        Token *t, *found = NULL;

        if (strlen(secret) != TOKEN_SECRET_SIZE - 1 || strncmp(secret, SBX_TOKEN_PREFIX, sizeof(SBX_TOKEN_PREFIX) - 1))
                return -EACCES;
        token_hash(secret, hash);
        /* Every token's hash is compared, each in constant time. */
        TAILQ_FOREACH(t, &s->tokens, link)
                if (memeql_sec(t->hash, hash, TOKEN_HASH_SIZE) && !found)
                        found = t;
        if (!found)
                return -EACCES;
        if (token_expired(found, now_unix_usec() / 1000000))
                return -EKEYEXPIRED;
        *ret = found;
        return 0;
}
