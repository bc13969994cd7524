#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* Length of the UTF-8 sequence at p (at most len bytes), 0 if it is not a
 * valid one. */
static size_t utf8_sequence_length(const uint8_t *p, size_t len) {
        uint8_t c = p[0], lo = 0x80, hi = 0xbf;
        size_t n = 0;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                n = 2;
        else if (c >= 0xe0 && c <= 0xef) {
                n = 3;
                if (c == 0xe0)
                        lo = 0xa0;
                else if (c == 0xed)
                        hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                n = 4;
                if (c == 0xf0)
                        lo = 0x90;
                else if (c == 0xf4)
                        hi = 0x8f;
        }
        if (n == 0 || n > len || p[1] < lo || p[1] > hi)
                return 0;
        for (size_t k = 2; k < n; k++)
                if ((p[k] & 0xc0) != 0x80)
                        return 0;
        return n;
}

size_t utf8_valid_prefix(const void *data, size_t len) {
        const uint8_t *p = data;
        size_t i = 0, n;

        while (i < len) {
                uint64_t w;

                if (i + 8 <= len) {
                        memcpy(&w, p + i, 8);
                        if (!(w & UINT64_C(0x8080808080808080))) {
                                i += 8;
                                continue;
                        }
                }
                n = utf8_sequence_length(p + i, len - i);
                if (n == 0)
                        return i;
                i += n;
        }
        return len;
}

int utf8_sanitize(const void *data, size_t len, char **ret_str, size_t *ret_len) {
        const uint8_t *p = data;
        char *out, *o;

        if (len > (SIZE_MAX - 1) / 3)
                return -ENOMEM;
        out = o = malloc(len * 3 + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len;) {
                size_t valid = utf8_valid_prefix(p + i, len - i);

                memcpy(o, p + i, valid);
                o += valid;
                i += valid;
                if (i < len) {
                        memcpy(o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                }
        }
        *o = '\0';
        *ret_str = out;
        *ret_len = (size_t) (o - out);
        return 0;
}
