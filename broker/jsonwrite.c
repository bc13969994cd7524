#include "jsonwrite.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base64.h"
#include "json-escape.h"
#include "macro.h"
#include "sbx-limits.h"

typedef struct JsonBuffer {
        char *data;
        size_t len, cap, max;
        size_t sent;                    /* bytes handed to part() before data */
        const JsonSplice *splice;
        json_part_t part;               /* NULL: the whole text stays in data */
        void *userdata;
} JsonBuffer;

/* Hands what data holds to part() once it is SBX_JSON_WRITE_PART bytes. */
static int buffer_flush(JsonBuffer *b) {
        int r;

        if (!b->part || b->len < SBX_JSON_WRITE_PART)
                return 0;
        r = b->part(b->userdata, b->data, b->len);
        if (r < 0)
                return r;
        b->sent += b->len;
        b->len = 0;
        return 0;
}

/* Capacity for more bytes and a "\n" and NUL after them; no limit check.
 * data may be handed on first: pointers into it are taken after this. */
static int buffer_grow(JsonBuffer *b, size_t more) {
        size_t need, cap;
        char *p;
        int r;

        r = buffer_flush(b);
        if (r < 0)
                return r;
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

        if (n >= b->max || b->sent + b->len + n + 1 >= b->max)
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


/* Input bytes per step: room for the longest escape of each is made first. */
#define STRING_STEP 4096u

static int put_string(JsonBuffer *b, const char *s, size_t n) {
        int r = buffer_put(b, "\"", 1);

        for (size_t done = 0; r >= 0 && done < n;) {
                size_t step = MIN(n - done, (size_t) STRING_STEP), i = 0;
                char *o;

                r = buffer_grow(b, step * JSON_ESCAPE_MAX);
                if (r < 0)
                        return r;
                o = b->data + b->len;
                while (i < step) {
                        const char *e;
                        uint64_t w;

                        if (i + 8 <= step) {
                                memcpy(&w, s + done + i, 8);
                                if (!word_needs_escape(w)) {
                                        memcpy(o, &w, 8);
                                        o += 8;
                                        i += 8;
                                        continue;
                                }
                        }
                        e = json_escapes[(unsigned char) s[done + i]];
                        if (e) {
                                size_t k = strlen(e);
                                memcpy(o, e, k);
                                o += k;
                        } else
                                *o++ = s[done + i];
                        i++;
                }
                done += step;
                /* The limit is checked per step: the buffer had room for it. */
                if (b->sent + (size_t) (o - b->data) + 1 >= b->max)
                        return -EMSGSIZE;
                b->len = (size_t) (o - b->data);
        }
        return r < 0 ? r : buffer_put(b, "\"", 1);
}

_Static_assert(SBX_JSON_SPLICE_READ % 3 == 0, "each read is whole base64 groups: no padding inside the string");

/* The splice's string: base64 of its descriptor's bytes, read a part at a time. */
static int put_splice(JsonBuffer *b) {
        const JsonSplice *sp = b->splice;
        _cleanup_free_ uint8_t *in = NULL;
        int r = buffer_put(b, "\"", 1);

        if (r < 0)
                return r;
        if (4 * ((sp->size + 2) / 3) >= b->max - b->sent - b->len)
                return -EMSGSIZE;
        in = malloc(SBX_JSON_SPLICE_READ);
        if (!in)
                return -ENOMEM;
        for (uint64_t off = 0; off < sp->size;) {
                size_t want = (size_t) MIN(sp->size - off, (uint64_t) SBX_JSON_SPLICE_READ);
                ssize_t n = pread(sp->fd, in, want, (off_t) off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                /* Shorter than its size said: the text would not match it. */
                if ((size_t) n != want)
                        return -EBADMSG;
                r = buffer_grow(b, 4 * ((want + 2) / 3));
                if (r < 0)
                        return r;
                b->len += base64_encode(in, want, b->data + b->len);
                off += want;
        }
        return buffer_put(b, "\"", 1);
}

static int put_value(JsonBuffer *b, const json_t *v, unsigned depth) {
        char num[32];
        int r = 0;

        if (depth > SBX_JSON_DEPTH_MAX)
                return -ELOOP;
        switch (json_typeof(v)) {
        case JSON_OBJECT: {
                const char *key;
                size_t key_len;
                json_t *member;
                bool first = true;

                r = buffer_put(b, "{", 1);
                json_object_keylen_foreach((json_t *) v, key, key_len, member) {
                        if (r >= 0 && !first)
                                r = buffer_put(b, ",", 1);
                        first = false;
                        if (r >= 0)
                                r = put_string(b, key, key_len);
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
                if (b->splice && v == b->splice->at)
                        return put_splice(b);
                return put_string(b, json_string_value(v), json_string_length(v));
        case JSON_INTEGER:
                snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return buffer_puts(b, num);
        case JSON_REAL: {
                /* Rare (durations); jansson's own format keeps the text identical. */
                _cleanup_free_ char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(16));

                return text ? buffer_puts(b, text) : -ENOMEM;
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

int json_write_parts(const json_t *v, const JsonSplice *splice, size_t max, json_part_t part, void *userdata,
                     char **ret_text, size_t *ret_len) {
        JsonBuffer b = { .max = max, .splice = splice, .part = part, .userdata = userdata };
        int r;

        if (!v)
                return -EINVAL;
        r = put_value(&b, v, 0);
        if (r >= 0) {
                /* The tail is the caller's to send: nothing handed on here. */
                b.part = NULL;
                r = buffer_grow(&b, 0);
        }
        if (r < 0) {
                free(b.data);
                /* Part of the text is out: it cannot be replaced by another one. */
                return b.sent > 0 && r != -ENOMEM ? -EPIPE : r;
        }
        b.data[b.len] = '\0';
        *ret_text = b.data;
        *ret_len = b.len;
        return 0;
}

int json_write(const json_t *v, size_t max, char **ret_text, size_t *ret_len) {
        return json_write_parts(v, NULL, max, NULL, NULL, ret_text, ret_len);
}
