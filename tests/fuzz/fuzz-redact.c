/* libFuzzer target over the streaming redactor (common/redact.c), which
 * sees everything a box command prints. The input's first byte gives the
 * number of values (1-4) and the chunk size; then each value is one length
 * byte and its bytes; the rest is the text. Fed in chunks, the result must
 * equal the whole-text reference (tests/unit/redact-naive.h), and what is
 * held back must stay below the longest value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/redact-naive.h"
#include "macro.h"
#include "redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Out {
        uint8_t *buf;
        size_t len, cap;
} Out;

static int collect(const void *d, size_t len, void *userdata) {
        Out *o = userdata;

        if (o->len + len > o->cap)
                abort();
        memcpy(o->buf + o->len, d, len);
        o->len += len;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const names[] = { "A", "B", "C", "D" };
        RedactSecret s[4];
        size_t n, chunk, off = 1, longest = 0, want_len;
        Redactor *r = NULL;
        Out o = { 0 };
        char *want;

        if (size < 1 || size > 65536)
                return 0;
        n = 1 + data[0] % 4;
        chunk = 1 + data[0] / 4;
        for (size_t i = 0; i < n; i++) {
                size_t len = off < size ? 1 + data[off] % 32 : 0;

                if (off + 1 + len > size)
                        return 0;
                s[i] = (RedactSecret) { names[i], data + off + 1, len };
                longest = MAX(longest, len);
                off += 1 + len;
        }
        want = redact_naive(s, n, (const char *) data + off, size - off, &want_len);
        o.cap = want_len;
        o.buf = malloc(o.cap ?: 1);
        if (!o.buf || redactor_new(s, n, &r) < 0)
                abort();
        for (size_t p = off; p < size; p += chunk) {
                if (redactor_feed(r, data + p, MIN(chunk, size - p), collect, &o) < 0)
                        abort();
                if (redactor_held(r) >= longest)
                        abort();
        }
        if (redactor_flush(r, collect, &o) < 0 || o.len != want_len || memcmp(o.buf, want, want_len) != 0)
                abort();
        redactor_free(r);
        free(o.buf);
        free(want);
        return 0;
}
