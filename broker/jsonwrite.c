#include "jsonwrite.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* JSON nests at most this deep in anything sandbox-mcp sends. */
#define JSON_WRITE_DEPTH_MAX 64

typedef struct JsonBuffer {
        char *data;
        size_t len, cap, max;
} JsonBuffer;

/* Capacity for more bytes and a "\n" and NUL after them; no limit check. */
static int buffer_grow(JsonBuffer *b, size_t more) {
        size_t need, cap;
        char *p;

        if (more > SIZE_MAX / 4 - b->len)
                return -ENOMEM;
        need = b->len + more + 2;
        if (need <= b->cap)
                return 0;
        cap = MAX(need, b->cap * 2);
        p = realloc(b->data, cap);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->cap = cap;
        return 0;
}

static int buffer_put(JsonBuffer *b, const void *p, size_t n) {
        int r;

        if (n >= b->max || b->len + n + 1 >= b->max)
                return -EMSGSIZE;
        r = buffer_grow(b, n);
        if (r < 0)
                return r;
        memcpy(b->data + b->len, p, n);
        b->len += n;
        return 0;
}

static int buffer_puts(JsonBuffer *b, const char *s) {
        return buffer_put(b, s, strlen(s));
}

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Whether any of the 8 bytes of w is '"', '\\' or below 0x20. */
static bool word_needs_escape(uint64_t w) {
        uint64_t quote = w ^ (ONES * '"'), backslash = w ^ (ONES * '\\');

        return (((w - ONES * 0x20) & ~w) | ((quote - ONES) & ~quote) | ((backslash - ONES) & ~backslash)) & HIGHS;
}

static bool byte_needs_escape(unsigned char c) {
        return c < 0x20 || c == '"' || c == '\\';
}

static int put_escaped_byte(JsonBuffer *b, unsigned char c) {
        static const char short_form[0x20] = {
                ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't',
        };
        char esc[8];

        if (c == '"' || c == '\\') {
                esc[0] = '\\';
                esc[1] = (char) c;
                return buffer_put(b, esc, 2);
        }
        if (short_form[c]) {
                esc[0] = '\\';
                esc[1] = short_form[c];
                return buffer_put(b, esc, 2);
        }
        snprintf(esc, sizeof(esc), "\\u%04X", c);
        return buffer_put(b, esc, 6);
}

static int put_string(JsonBuffer *b, const char *s, size_t n) {
        size_t i = 0, run = 0;
        int r;

        /* Most text needs few escapes: grow once for the common case. */
        if (n < b->max) {
                r = buffer_grow(b, n + 2);
                if (r < 0)
                        return r;
        }
        r = buffer_put(b, "\"", 1);
        while (r >= 0 && i < n) {
                uint64_t w;

                if (i + 8 <= n) {
                        memcpy(&w, s + i, 8);
                        if (!word_needs_escape(w)) {
                                i += 8;
                                continue;
                        }
                }
                if (!byte_needs_escape((unsigned char) s[i])) {
                        i++;
                        continue;
                }
                r = buffer_put(b, s + run, i - run);
                if (r >= 0)
                        r = put_escaped_byte(b, (unsigned char) s[i]);
                run = ++i;
        }
        if (r >= 0)
                r = buffer_put(b, s + run, n - run);
        if (r >= 0)
                r = buffer_put(b, "\"", 1);
        return r;
}

static int put_value(JsonBuffer *b, const json_t *v, unsigned depth) {
        char num[32];
        int r = 0;

        if (depth > JSON_WRITE_DEPTH_MAX)
                return -ELOOP;
        switch (json_typeof(v)) {
        case JSON_OBJECT: {
                const char *key;
                json_t *member;
                bool first = true;

                r = buffer_put(b, "{", 1);
                json_object_foreach((json_t *) v, key, member) {
                        if (r >= 0 && !first)
                                r = buffer_put(b, ",", 1);
                        first = false;
                        if (r >= 0)
                                r = put_string(b, key, strlen(key));
                        if (r >= 0)
                                r = buffer_put(b, ":", 1);
                        if (r >= 0)
                                r = put_value(b, member, depth + 1);
                        if (r < 0)
                                return r;
                }
                return r < 0 ? r : buffer_put(b, "}", 1);
        }
        case JSON_ARRAY: {
                size_t i;
                json_t *item;

                r = buffer_put(b, "[", 1);
                json_array_foreach(v, i, item) {
                        if (r >= 0 && i > 0)
                                r = buffer_put(b, ",", 1);
                        if (r >= 0)
                                r = put_value(b, item, depth + 1);
                        if (r < 0)
                                return r;
                }
                return r < 0 ? r : buffer_put(b, "]", 1);
        }
        case JSON_STRING:
                return put_string(b, json_string_value(v), json_string_length(v));
        case JSON_INTEGER:
                snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return buffer_puts(b, num);
        case JSON_REAL: {
                /* Rare (durations); jansson's own format keeps the text identical. */
                _cleanup_free_ char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(16));

                return text ? buffer_puts(b, text) : -EINVAL;
        }
        case JSON_TRUE:
                return buffer_puts(b, "true");
        case JSON_FALSE:
                return buffer_puts(b, "false");
        case JSON_NULL:
                return buffer_puts(b, "null");
        }
        return -EINVAL;
}

int json_write(const json_t *v, size_t max, char **ret_text, size_t *ret_len) {
        JsonBuffer b = { .max = max };
        int r;

        if (!v)
                return -EINVAL;
        r = put_value(&b, v, 0);
        if (r >= 0)
                r = buffer_grow(&b, 0);
        if (r < 0) {
                free(b.data);
                return r;
        }
        b.data[b.len] = '\0';
        *ret_text = b.data;
        *ret_len = b.len;
        return 0;
}
