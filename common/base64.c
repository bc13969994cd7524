#include <errno.h>

#include "base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int value_of(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int64_t base64_decoded_size(const char *s, size_t len) {
        size_t pad = 0;

        if (len % 4 != 0)
                return -EINVAL;
        if (len > 0 && s[len - 1] == '=')
                pad++;
        if (len > 1 && s[len - 2] == '=')
                pad++;
        return (int64_t) (len / 4 * 3 - pad);
}

int64_t base64_decode(const char *s, size_t len, uint8_t *out, size_t *ret_at) {
        size_t n = 0;

        if (len % 4 != 0) {
                *ret_at = len;
                return -EINVAL;
        }
        for (size_t i = 0; i < len; i += 4) {
                int v[4];
                size_t pad = 0;

                for (size_t k = 0; k < 4; k++) {
                        char c = s[i + k];
                        /* '=' only as the last one or two of the last quad. */
                        if (c == '=' && i + 4 == len && k >= 2 && (k == 3 || s[i + 3] == '=')) {
                                v[k] = 0;
                                pad++;
                                continue;
                        }
                        v[k] = value_of(c);
                        if (v[k] < 0 || pad > 0) {
                                *ret_at = i + k;
                                return -EINVAL;
                        }
                }
                out[n++] = (uint8_t) (v[0] << 2 | v[1] >> 4);
                if (pad < 2)
                        out[n++] = (uint8_t) ((v[1] & 15) << 4 | v[2] >> 2);
                if (pad < 1)
                        out[n++] = (uint8_t) ((v[2] & 3) << 6 | v[3]);
        }
        return (int64_t) n;
}

size_t base64_encode(const uint8_t *in, size_t len, char *out) {
        size_t n = 0, i = 0;

        for (; i + 2 < len; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8 | in[i + 2];
                out[n++] = alphabet[v >> 18];
                out[n++] = alphabet[(v >> 12) & 63];
                out[n++] = alphabet[(v >> 6) & 63];
                out[n++] = alphabet[v & 63];
        }
        if (i < len) {
                uint32_t v = (uint32_t) in[i] << 16 | (i + 1 < len ? (uint32_t) in[i + 1] << 8 : 0);
                out[n++] = alphabet[v >> 18];
                out[n++] = alphabet[(v >> 12) & 63];
                out[n++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
                out[n++] = '=';
        }
        return n;
}
