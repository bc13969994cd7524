#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "data/renames.h"
#include "macro.h"

/* FNV-1a, 64 bits: equal contents give equal hashes; a match is confirmed byte for byte. */
static uint64_t content_hash(const char *text, size_t len) {
        uint64_t h = UINT64_C(14695981039346656037);

        for (size_t i = 0; i < len; i++) {
                h ^= (unsigned char) text[i];
                h *= UINT64_C(1099511628211);
        }
        return h;
}

void renames_init(Renames *r, RenameRead read, void *userdata) {
        *r = (Renames) { .read = read, .userdata = userdata };
}

int renames_add(Renames *r, const char *path, uint64_t size) {
        int k = ARRAY_RESERVE(r->candidates, r->cap, r->n + 1);

        if (k < 0)
                return k;
        r->candidates[r->n] = (RenameCandidate) { .path = path, .size = size, .order = r->n };
        r->n++;
        r->sorted = false;
        return 0;
}

static int cmp_size_order(const void *a, const void *b) {
        const RenameCandidate *x = a, *y = b;

        if (x->size != y->size)
                return x->size < y->size ? -1 : 1;
        return x->order < y->order ? -1 : x->order > y->order;
}

/* Within a group of one size: by hash, then as added (unreadable ones last). */
static int cmp_hash_order(const void *a, const void *b) {
        const RenameCandidate *x = a, *y = b;

        if (x->unreadable != y->unreadable)
                return x->unreadable ? 1 : -1;
        if (x->hash != y->hash)
                return x->hash < y->hash ? -1 : 1;
        return x->order < y->order ? -1 : x->order > y->order;
}

/* The first candidate in [lo, hi) not below key by cmp (hi if none). */
static size_t lower_bound(const RenameCandidate *c, size_t lo, size_t hi, const RenameCandidate *key,
                          int (*cmp)(const void *, const void *)) {
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (cmp(&c[mid], key) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* Read candidate c whole; a file that cannot be read as it was listed (gone,
 * another size, unreadable) is no rename. 1 with *ret set, 0, or -ENOMEM. */
static int candidate_read(Renames *r, RenameCandidate *c, char **ret, size_t *ret_len) {
        int k;

        r->reads++;
        k = r->read(r->userdata, c->path, ret, ret_len);
        if (k == -ENOMEM)
                return k;
        if (k < 0 || *ret_len != c->size) {
                free(*ret);
                *ret = NULL;
                return 0;
        }
        return 1;
}

/* Hash every candidate of the group [lo, hi) (each read once), then order it by hash. */
static int group_hash(Renames *r, size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; i++) {
                _cleanup_free_ char *buf = NULL;
                size_t len = 0;
                int k = candidate_read(r, &r->candidates[i], &buf, &len);

                if (k < 0)
                        return k;
                r->candidates[i].hashed = true;
                r->candidates[i].unreadable = k == 0;
                if (k > 0)
                        r->candidates[i].hash = content_hash(buf, len);
        }
        qsort(r->candidates + lo, hi - lo, sizeof(*r->candidates), cmp_hash_order);
        return 0;
}

int renames_find(Renames *r, const char *text, size_t len, const char **ret_path) {
        RenameCandidate key = { .size = len };
        size_t lo, hi;
        int k;

        if (!r->sorted) {
                qsort(r->candidates, r->n, sizeof(*r->candidates), cmp_size_order);
                r->sorted = true;
        }
        lo = lower_bound(r->candidates, 0, r->n, &key, cmp_size_order);
        key.order = SIZE_MAX;
        hi = lower_bound(r->candidates, lo, r->n, &key, cmp_size_order);
        if (lo == hi)
                return 0;
        if (!r->candidates[lo].hashed) {
                k = group_hash(r, lo, hi);
                if (k < 0)
                        return k;
        }
        key = (RenameCandidate) { .hash = content_hash(text, len) };
        for (size_t i = lower_bound(r->candidates, lo, hi, &key, cmp_hash_order);
             i < hi && !r->candidates[i].unreadable && r->candidates[i].hash == key.hash; i++) {
                _cleanup_free_ char *buf = NULL;
                size_t buf_len = 0;

                k = candidate_read(r, &r->candidates[i], &buf, &buf_len);
                if (k < 0)
                        return k;
                if (k > 0 && memcmp(buf, text, len) == 0) {
                        *ret_path = r->candidates[i].path;
                        return 1;
                }
        }
        return 0;
}

void renames_done(Renames *r) {
        free(r->candidates);
        r->candidates = NULL;
        r->n = r->cap = 0;
}
