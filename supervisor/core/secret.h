/* Secrets of the boxes set (issue 21, docs/boxes.md): named values of an
 * owner (a uid), kept in sbx.db (root's alone). A box of uid U may name only
 * U's secrets at sandbox_start; their values are read then (a Secrets), put
 * in the environment of every command of the box, and replaced by
 * "[secret:NAME]" in everything its commands print (common/redact.h) before
 * sbxd stores or sends any of it. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/sandbox.h"
#include "core/server.h"
#include "redact.h"

typedef struct Secrets {
        size_t n;
        char **names;
        char **env;                     /* "NAME=value", for the commands' environment */
        RedactSecret *redact;           /* name and value, pointing into env */
} Secrets;

/* [A-Za-z_][A-Za-z0-9_]*, at most SBX_SECRET_NAME_MAX bytes: an environment variable's name. */
bool secret_name_valid(const char *name);
/* Why value[0..len) cannot be a secret's value, or NULL if it can. */
const char *secret_value_invalid(const void *value, size_t len);
/* Sets (or replaces) owner's secret: -ENOSPC past SBX_SECRETS_PER_OWNER_MAX. */
int secret_set(Server *s, uid_t owner, const char *name, const void *value, size_t len);
/* -ENOENT: owner has none of that name. */
int secret_remove(Server *s, uid_t owner, const char *name);
/* owner's secrets (names and lengths, no values): cb per secret. */
int secrets_foreach(Server *s, uid_t owner, int (*cb)(const StoreSecret *secret, void *userdata), void *userdata);
/* The values of owner's secrets names[0..n): -ENOENT names the first unknown
 * in ret_unknown (size SBX_SECRET_NAME_MAX + 1); -E2BIG past SBX_BOX_SECRET_VALUES_MAX. */
int secrets_load(Server *s, uid_t owner, const char *const *names, size_t n, Secrets **ret, char *ret_unknown);
Secrets *secrets_free(Secrets *x);
/* Whether owner has every secret of names[0..n) (a box's sandbox_start):
 * -ENOENT or -E2BIG with err saying why. */
int secrets_check(Server *s, uid_t owner, const char *const *names, size_t n, char *err, size_t errsize);
/* The values of owner's secrets names[0..n) become sb's (core/sandbox.h: in
 * its commands' environment, redacted from their output). */
int secrets_attach(Server *s, Sandbox *sb, uid_t owner, const char *const *names, size_t n);
/* A redactor of x's values (NULL x: one that passes everything on). */
int secrets_redactor(const Secrets *x, Redactor **ret);
