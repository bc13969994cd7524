#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/secret.h"
#include "data/store.h"
#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"

bool secret_name_valid(const char *name) {
        static const char first[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
        size_t n = strlen(name);

        return n > 0 && n <= SBX_SECRET_NAME_MAX && strchr(first, name[0]) &&
               strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789") == n;
}

const char *secret_value_invalid(const void *value, size_t len) {
        if (len < SBX_SECRET_VALUE_MIN)
                return "is too short";
        if (len > SBX_SECRET_VALUE_MAX)
                return "is too long";
        if (memchr(value, '\0', len))
                return "holds a NUL byte (an environment variable cannot)";
        return NULL;
}

static int count_one(const StoreSecret *x, void *userdata) {
        size_t *n = userdata;

        (*n)++;
        return 0;
}

static int secret_exists(const StoreSecret *x, void *userdata) {
        const char *name = userdata;

        return strcmp(x->name, name) == 0 ? -EEXIST : 0;
}

int secret_set(Server *s, uid_t owner, const char *name, const void *value, size_t len) {
        size_t n = 0;
        int r;

        if (!secret_name_valid(name) || secret_value_invalid(value, len))
                return -EINVAL;
        r = store_secret_foreach(s->store, owner, false, count_one, &n);
        if (r < 0)
                return r;
        if (n >= SBX_SECRETS_PER_OWNER_MAX) {
                /* Full: a new name is refused, a replaced value is not. */
                r = store_secret_foreach(s->store, owner, false, secret_exists, (void *) name);
                if (r != -EEXIST)
                        return r < 0 ? r : -ENOSPC;
        }
        return store_secret_put(s->store, owner, name, value, len, now_unix_usec() / 1000000);
}

int secret_remove(Server *s, uid_t owner, const char *name) {
        return store_secret_delete(s->store, owner, name);
}

int secrets_foreach(Server *s, uid_t owner, int (*cb)(const StoreSecret *secret, void *userdata), void *userdata) {
        return store_secret_foreach(s->store, owner, false, cb, userdata);
}

Secrets *secrets_free(Secrets *x) {
        if (!x)
                return NULL;
        for (size_t i = 0; i < x->n; i++) {
                free(x->names[i]);
                if (x->env[i]) {
                        explicit_bzero(x->env[i], strlen(x->env[i]));
                        free(x->env[i]);
                }
        }
        free(x->names);
        free(x->env);
        free(x->redact);
        free(x);
        return NULL;
}


/* Fills the slot of the name this stored secret has, if it was asked for. */
static int secret_take(const StoreSecret *st, void *userdata) {
        Secrets *x = userdata;
        size_t nlen = strlen(st->name);

        for (size_t i = 0; i < x->n; i++) {
                char *e;

                if (x->env[i] || strcmp(x->names[i], st->name) != 0)
                        continue;
                e = malloc(nlen + 1 + st->len + 1);
                if (!e)
                        return -ENOMEM;
                memcpy(e, st->name, nlen);
                e[nlen] = '=';
                memcpy(e + nlen + 1, st->value, st->len);
                e[nlen + 1 + st->len] = '\0';
                x->env[i] = e;
                x->redact[i] = (RedactSecret) { x->names[i], e + nlen + 1, st->len };
        }
        return 0;
}

static int secrets_alloc(const char *const *names, size_t n, Secrets **ret) {
        Secrets *x = calloc(1, sizeof(*x));

        if (!x)
                return -ENOMEM;
        x->names = calloc(n ?: 1, sizeof(*x->names));
        x->env = calloc(n ?: 1, sizeof(*x->env));
        x->redact = calloc(n ?: 1, sizeof(*x->redact));
        if (!x->names || !x->env || !x->redact) {
                secrets_free(x);
                return -ENOMEM;
        }
        for (; x->n < n; x->n++)
                if (!(x->names[x->n] = strdup(names[x->n]))) {
                        secrets_free(x);
                        return -ENOMEM;
                }
        *ret = x;
        return 0;
}

int secrets_load(Server *s, uid_t owner, const char *const *names, size_t n, Secrets **ret, char *ret_unknown) {
        Secrets *x = NULL;
        int r;

        if (n > SBX_BOX_SECRET_VALUES_MAX)
                return -E2BIG;
        for (size_t i = 0; i < n; i++)
                if (!secret_name_valid(names[i])) {
                        strlcpy(ret_unknown, names[i], SBX_SECRET_NAME_MAX + 1);
                        return -ENOENT;
                }
        r = secrets_alloc(names, n, &x);
        if (r < 0)
                return r;
        r = store_secret_foreach(s->store, owner, true, secret_take, x);
        for (size_t i = 0; r >= 0 && i < n; i++)
                if (!x->env[i]) {
                        strlcpy(ret_unknown, names[i], SBX_SECRET_NAME_MAX + 1);
                        r = -ENOENT;
                }
        if (r < 0) {
                secrets_free(x);
                return r;
        }
        *ret = x;
        return 0;
}

int secrets_redactor(const Secrets *x, Redactor **ret) {
        return redactor_new(x ? x->redact : NULL, x ? x->n : 0, ret);
}

int secrets_check(Server *s, uid_t owner, const char *const *names, size_t n, char *err, size_t errsize) {
        char unknown[SBX_SECRET_NAME_MAX + 1] = "";
        Secrets *x = NULL;
        int r = secrets_load(s, owner, names, n, &x, unknown);

        secrets_free(x);
        if (r == -ENOENT)
                snprintf(err, errsize, "invalid arguments: secrets: no secret named '%.64s' (sbxctl secret list "
                         "shows yours; sbxctl secret set NAME adds one)", unknown);
        else if (r == -E2BIG)
                snprintf(err, errsize, "invalid arguments: secrets: a box may have at most %u", SBX_BOX_SECRET_VALUES_MAX);
        else if (r < 0)
                snprintf(err, errsize, "cannot read the secrets: %s", strerror(-r));
        return r;
}

int secrets_attach(Server *s, Sandbox *sb, uid_t owner, const char *const *names, size_t n) {
        char unknown[SBX_SECRET_NAME_MAX + 1];
        Secrets *x = NULL;
        int r;

        if (n == 0)
                return 0;
        r = secrets_load(s, owner, names, n, &x, unknown);
        if (r < 0)
                return r;
        secrets_free(sb->secrets);
        sb->secrets = x;
        return 0;
}
