/* Bearer tokens of sbx-gateway (issue 20, sbx-gateway(8)): made by root
 * (sbxctl token create), each acting for one owner (never root) with a set
 * list. sbxd keeps every token in memory and in sbx.db, the secret only as
 * its SHA-256: the secret is 256 random bits, so a hash without a salt or
 * key stretching cannot be reversed or guessed from the database, and it is
 * the same hash every time, which is what lets sbxd find a token by its
 * secret. A lookup compares the hash with every token's, each in constant
 * time, so how long it takes says nothing about how close a guess was. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "core/server.h"
#include "sbx-limits.h"

#define TOKEN_HASH_SIZE 32u             /* SHA-256 */
#define TOKEN_ID_SIZE 17u               /* "tok-" and 12 hex digits, NUL */
#define TOKEN_SECRET_SIZE (sizeof(SBX_TOKEN_PREFIX) + SBX_TOKEN_SECRET_HEX) /* with the NUL */

typedef struct Token {
        TAILQ_ENTRY(Token) link;
        char id[TOKEN_ID_SIZE];
        char name[SBX_TOKEN_NAME_MAX + 1];
        char sets[SBX_TOKEN_SETS_MAX + 1];
        uint8_t hash[TOKEN_HASH_SIZE];
        uid_t owner;
        int64_t created_unix;
        int64_t expires_unix;           /* 0: never */
} Token;

/* The tokens of sbx.db into s->tokens (at start). */
int tokens_load(Server *s);
void tokens_free(Server *s);

/* A new token, stored; its secret (TOKEN_SECRET_SIZE bytes) in ret_secret.
 * name "" becomes the id. -EEXIST: a token has that name; -ENOSPC: SBX_TOKENS_MAX. */
int token_create(Server *s, uid_t owner, const char *name, int64_t expires_seconds, const char *sets,
                 char ret_secret[TOKEN_SECRET_SIZE], Token **ret);
/* Forget the token with this id or name (and close the connections that act
 * for it); -ENOENT. */
int token_revoke(Server *s, const char *id_or_name);
/* The token whose secret this is: -EACCES for none (or a malformed one),
 * -EKEYEXPIRED for one that expired. */
int token_verify(Server *s, const char *secret, Token **ret);
/* The token with this id, NULL if revoked; expired ones too. */
Token *token_find(Server *s, const char *id);
bool token_expired(const Token *t, int64_t now_unix);
