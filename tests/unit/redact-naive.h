/* The reference the streaming redactor (common/redact.c) is checked
 * against, for tests/unit/test-redact.c and tests/fuzz/fuzz-redact.c: the
 * whole text at once, by brute force. At each end position, left to right,
 * the longest value that ends there and starts at or after the last
 * replacement is replaced. Returns the malloc'ed result and its length. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"

static inline char *redact_naive(const RedactSecret *s, size_t n, const char *in, size_t len, size_t *ret_len) {
        char *out = NULL;
        size_t out_len = 0, cut = 0;
        FILE *f = open_memstream(&out, &out_len);

        if (!f)
                abort();
        for (size_t j = 1; j <= len; j++) {
                const RedactSecret *best = NULL;

                for (size_t i = 0; i < n; i++)
                        if (s[i].len <= j - cut && memcmp(in + j - s[i].len, s[i].value, s[i].len) == 0 &&
                            (!best || s[i].len > best->len))
                                best = &s[i];
                if (!best)
                        continue;
                fwrite(in + cut, 1, j - best->len - cut, f);
                fprintf(f, "[secret:%s]", best->name);
                cut = j;
        }
        fwrite(in + cut, 1, len - cut, f);
        if (fclose(f) != 0)
                abort();
        *ret_len = out_len;
        return out;
}
