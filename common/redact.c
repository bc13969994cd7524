#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "redact.h"

typedef struct Pattern {
        char *marker;                   /* "[secret:NAME]" */
        size_t marker_len;
        uint8_t *value;
        size_t len;
        size_t *fail;                   /* KMP: fail[i] = longest proper border of value[0..i] */
        size_t state;                   /* bytes of value matched at the end of the input */
} Pattern;

struct Redactor {
        Pattern *p;
        size_t n;
        uint8_t *held;                  /* the unemitted bytes of earlier chunks */
        size_t n_held;
        size_t max_len;
};

Redactor *redactor_free(Redactor *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n; i++) {
                free(r->p[i].marker);
                if (r->p[i].value)
                        explicit_bzero(r->p[i].value, r->p[i].len);
                free(r->p[i].value);
                free(r->p[i].fail);
        }
        free(r->p);
        if (r->held)
                explicit_bzero(r->held, r->max_len - 1);
        free(r->held);
        free(r);
        return NULL;
}

static int pattern_init(Pattern *p, const RedactSecret *s) {
        size_t k = 0;

        if (s->len == 0)
                return -EINVAL;
        if (asprintf(&p->marker, "[secret:%s]", s->name) < 0) {
                p->marker = NULL;
                return -ENOMEM;
        }
        p->marker_len = strlen(p->marker);
        p->value = malloc(s->len);
        p->fail = calloc(s->len, sizeof(*p->fail));
        if (!p->value || !p->fail)
                return -ENOMEM;
        memcpy(p->value, s->value, s->len);
        p->len = s->len;
        for (size_t i = 1; i < p->len; i++) {
                while (k > 0 && p->value[i] != p->value[k])
                        k = p->fail[k - 1];
                if (p->value[i] == p->value[k])
                        k++;
                p->fail[i] = k;
        }
        return 0;
}

int redactor_new(const RedactSecret *secrets, size_t n, Redactor **ret) {
        Redactor *r = calloc(1, sizeof(*r));
        int e = 0;

        if (!r)
                return -ENOMEM;
        r->p = calloc(n ?: 1, sizeof(*r->p));
        if (!r->p)
                e = -ENOMEM;
        for (size_t i = 0; i < n && e == 0; i++, r->n++) {
                e = pattern_init(&r->p[i], &secrets[i]);
                r->max_len = MAX(r->max_len, secrets[i].len);
        }
        if (e == 0 && r->max_len > 1 && !(r->held = malloc(r->max_len - 1)))
                e = -ENOMEM;
        if (e < 0) {
                redactor_free(r);
                return e;
        }
        *ret = r;
        return 0;
}

size_t redactor_held(const Redactor *r) {
        return r->n_held;
}

/* Advances every automaton by byte c; the longest value completed, or NULL. */
static Pattern *step(Redactor *r, uint8_t c) {
        Pattern *done = NULL;

        for (size_t i = 0; i < r->n; i++) {
                Pattern *p = &r->p[i];

                while (p->state > 0 && p->value[p->state] != c)
                        p->state = p->fail[p->state - 1];
                if (p->value[p->state] == c)
                        p->state++;
                if (p->state == p->len && (!done || p->len > done->len))
                        done = p;
        }
        return done;
}

static size_t longest_state(const Redactor *r) {
        size_t m = 0;

        for (size_t i = 0; i < r->n; i++)
                m = MAX(m, r->p[i].state);
        return m;
}

/* Emits the first n of the unemitted bytes: held[] first, then data[*start..). */
static int emit_front(Redactor *r, const uint8_t *data, size_t *start, size_t n, redact_emit_t emit, void *ud) {
        size_t from_held = MIN(n, r->n_held);
        int e;

        if (from_held > 0) {
                e = emit(r->held, from_held, ud);
                if (e < 0)
                        return e;
                memmove(r->held, r->held + from_held, r->n_held - from_held);
                r->n_held -= from_held;
        }
        if (n > from_held) {
                e = emit(data + *start, n - from_held, ud);
                if (e < 0)
                        return e;
                *start += n - from_held;
        }
        return 0;
}

int redactor_feed(Redactor *r, const void *data, size_t len, redact_emit_t emit, void *userdata) {
        const uint8_t *d = data;
        size_t start = 0, keep, unemitted;
        int e;

        if (r->n == 0)
                return len > 0 ? emit(data, len, userdata) : 0;
        for (size_t i = 0; i < len; i++) {
                Pattern *done = step(r, d[i]);

                if (!done)
                        continue;
                /* Every state <= the unemitted bytes: the value is their last done->len. */
                unemitted = r->n_held + (i + 1 - start);
                e = emit_front(r, d, &start, unemitted - done->len, emit, userdata);
                if (e < 0)
                        return e;
                e = emit(done->marker, done->marker_len, userdata);
                if (e < 0)
                        return e;
                r->n_held = 0;
                start = i + 1;
                for (size_t j = 0; j < r->n; j++)
                        r->p[j].state = 0;
        }
        /* Keep what may still begin a value: the longest partial match. */
        keep = longest_state(r);
        unemitted = r->n_held + (len - start);
        e = emit_front(r, d, &start, unemitted - keep, emit, userdata);
        if (e < 0)
                return e;
        if (len > start) {
                memcpy(r->held + r->n_held, d + start, len - start);
                r->n_held += len - start;
        }
        return 0;
}

int redactor_flush(Redactor *r, redact_emit_t emit, void *userdata) {
        int e = 0;

        if (r->n_held > 0)
                e = emit(r->held, r->n_held, userdata);
        r->n_held = 0;
        for (size_t i = 0; i < r->n; i++)
                r->p[i].state = 0;
        return e;
}
