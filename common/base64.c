#include <errno.h>
#include <string.h>

#include "base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* A character's 6 bits, or 0xff for one outside the alphabet. */
#define R16(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
static const uint8_t values[256] = {
        R16(0xff), R16(0xff),
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 62, 0xff, 0xff, 0xff, 63,
        52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
        15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
        41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 0xff, 0xff, 0xff, 0xff, 0xff,
        R16(0xff), R16(0xff), R16(0xff), R16(0xff), R16(0xff), R16(0xff), R16(0xff), R16(0xff),
};

static int value_of(char c) {
        uint8_t v = values[(unsigned char) c];
        return v == 0xff ? -1 : v;
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
                const unsigned char *q = (const unsigned char *) s + i;
                uint32_t w;
                int v[4];

                /* The common case: four characters of the alphabet. */
                w = (uint32_t) values[q[0]] << 18 | (uint32_t) values[q[1]] << 12 | (uint32_t) values[q[2]] << 6 |
                    values[q[3]];
                if (!((values[q[0]] | values[q[1]] | values[q[2]] | values[q[3]]) & 0xc0)) {
                        out[n++] = (uint8_t) (w >> 16);
                        out[n++] = (uint8_t) (w >> 8);
                        out[n++] = (uint8_t) w;
                        continue;
                }
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

/* Two characters for each 12 bits: a 3-byte group is two lookups, not four. */
#define PAIR_ROW(x)                                                                                     \
        x "A" x "B" x "C" x "D" x "E" x "F" x "G" x "H" x "I" x "J" x "K" x "L" x "M" x "N" x "O" x "P" \
        x "Q" x "R" x "S" x "T" x "U" x "V" x "W" x "X" x "Y" x "Z" x "a" x "b" x "c" x "d" x "e" x "f" \
        x "g" x "h" x "i" x "j" x "k" x "l" x "m" x "n" x "o" x "p" x "q" x "r" x "s" x "t" x "u" x "v" \
        x "w" x "x" x "y" x "z" x "0" x "1" x "2" x "3" x "4" x "5" x "6" x "7" x "8" x "9" x "+" x "/"
static const char pairs[] = PAIR_ROW("A") PAIR_ROW("B") PAIR_ROW("C") PAIR_ROW("D") PAIR_ROW("E") PAIR_ROW("F")
        PAIR_ROW("G") PAIR_ROW("H") PAIR_ROW("I") PAIR_ROW("J") PAIR_ROW("K") PAIR_ROW("L") PAIR_ROW("M") PAIR_ROW("N")
        PAIR_ROW("O") PAIR_ROW("P") PAIR_ROW("Q") PAIR_ROW("R") PAIR_ROW("S") PAIR_ROW("T") PAIR_ROW("U") PAIR_ROW("V")
        PAIR_ROW("W") PAIR_ROW("X") PAIR_ROW("Y") PAIR_ROW("Z") PAIR_ROW("a") PAIR_ROW("b") PAIR_ROW("c") PAIR_ROW("d")
        PAIR_ROW("e") PAIR_ROW("f") PAIR_ROW("g") PAIR_ROW("h") PAIR_ROW("i") PAIR_ROW("j") PAIR_ROW("k") PAIR_ROW("l")
        PAIR_ROW("m") PAIR_ROW("n") PAIR_ROW("o") PAIR_ROW("p") PAIR_ROW("q") PAIR_ROW("r") PAIR_ROW("s") PAIR_ROW("t")
        PAIR_ROW("u") PAIR_ROW("v") PAIR_ROW("w") PAIR_ROW("x") PAIR_ROW("y") PAIR_ROW("z") PAIR_ROW("0") PAIR_ROW("1")
        PAIR_ROW("2") PAIR_ROW("3") PAIR_ROW("4") PAIR_ROW("5") PAIR_ROW("6") PAIR_ROW("7") PAIR_ROW("8") PAIR_ROW("9")
        PAIR_ROW("+") PAIR_ROW("/");
_Static_assert(sizeof(pairs) == 2 * 4096 + 1, "one pair of characters for each 12-bit value");

size_t base64_encode(const uint8_t *in, size_t len, char *out) {
        size_t n = 0, i = 0;

        for (; i + 2 < len; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8 | in[i + 2];
                memcpy(out + n, pairs + 2 * (v >> 12), 2);
                memcpy(out + n + 2, pairs + 2 * (v & 4095), 2);
                n += 4;
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
