#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd-util.h"
#include "array.h"
#include "jsonrpc.h"
#include "jsonwrite.h"
#include "macro.h"
#include "utf8.h"

/* A buffer that grew past this for one long line is released afterwards. */
#define LINE_READER_KEEP (64u * 1024u)

JsonRpcMessage *jsonrpc_message_free(JsonRpcMessage *m) {
        if (!m)
                return NULL;
        json_decref(m->id);
        json_decref(m->root);
        free(m);
        return NULL;
}

static bool is_blank(const char *s, size_t len) {
        for (size_t i = 0; i < len; i++)
                if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
                        return false;
        return true;
}

_printf_(3, 4)
static void set_invalid(JsonRpcMessage *m, int code, const char *fmt, ...) {
        va_list ap;

        m->kind = JSONRPC_INVALID;
        m->error_code = code;
        va_start(ap, fmt);
        vsnprintf(m->error_message, sizeof(m->error_message), fmt, ap);
        va_end(ap);
}

/* A real that holds an integral value representable as int64. */
static bool real_is_int64(double d) {
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
                return false;
        return (double) (long long) d == d;
}

static int hex4(const char *p, const char *end) {
        int v = 0;
        if (end - p < 4)
                return -1;
        for (int i = 0; i < 4; i++) {
                char c = p[i];
                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= c - '0';
                else if (c >= 'a' && c <= 'f')
                        v |= c - 'a' + 10;
                else if (c >= 'A' && c <= 'F')
                        v |= c - 'A' + 10;
                else
                        return -1;
        }
        return v;
}

/* A copy of line with every unpaired \uD800-\uDFFF escape replaced by \uFFFD
 * (same length), or NULL if there is none. */
static char *repair_lone_surrogates(const char *line, size_t len) {
        const char *end = line + len;
        char *copy = NULL;

        for (const char *p = line; p < end; p++) {
                int v, w;
                if (*p != '\\')
                        continue;
                if (p + 1 >= end || p[1] != 'u') {
                        p++; /* any other escape: skip its character */
                        continue;
                }
                v = hex4(p + 2, end);
                if (v < 0xd800 || v > 0xdfff) {
                        p += 1;
                        continue;
                }
                if (v <= 0xdbff && end - p >= 12 && p[6] == '\\' && p[7] == 'u' &&
                    (w = hex4(p + 8, end)) >= 0xdc00 && w <= 0xdfff) {
                        p += 11; /* a proper pair */
                        continue;
                }
                if (!copy) {
                        copy = malloc(len);
                        if (!copy)
                                return NULL;
                        memcpy(copy, line, len);
                }
                memcpy(copy + (p - line), "\\ufffd", 6);
                p += 5;
        }
        return copy;
}

/* ---- long plain strings --------------------------------------------------------
 * jansson reads a string a byte at a time (about 40 MB/s); an upload_file of
 * 64 MiB is one string of 89 MB. A value string of at least BIG_STRING_MIN
 * bytes without an escape or a control character is cut out of the line
 * before jansson parses it, replaced by a placeholder (a random token of
 * this process and its number), and put back as a string made directly from
 * the line's bytes (valid UTF-8 checked) after the parse. */
#define BIG_STRING_MIN (64u * 1024u)
#define BIG_STRINGS_MAX 8u

typedef struct BigStrings {
        size_t n;
        size_t start[BIG_STRINGS_MAX], len[BIG_STRINGS_MAX];   /* of the content, between the quotes */
        char token[33];
} BigStrings;

/* The end of the string whose content starts at p (its closing quote), and
 * whether it is plain (no backslash, no control character). */
static const char *string_end(const char *p, const char *end, bool *ret_plain) {
        bool plain = true;

        while (p < end && *p != '"') {
                if (*p == '\\') {
                        plain = false;
                        p += 2;
                        continue;
                }
                plain &= (unsigned char) *p >= 0x20;
                p++;
        }
        *ret_plain = plain;
        return p;
}

/* The plain value strings of line worth cutting out, and the line without them. */
static int big_strings_cut(const char *line, size_t len, BigStrings *b, char **ret, size_t *ret_len) {
        const char *end = line + len, *p = line, *from = line;
        char *out = NULL, *o = NULL;
        int r;

        b->n = 0;
        while (p < end && (p = memchr(p, '"', (size_t) (end - p)))) {
                const char *q, *after;
                bool plain;

                q = string_end(p + 1, end, &plain);
                if (q >= end)
                        break;
                for (after = q + 1; after < end && strchr(" \t\r\n", *after); after++)
                        ;
                size_t n = (size_t) (q - p - 1);

                if (plain && n >= BIG_STRING_MIN && b->n < BIG_STRINGS_MAX && (after >= end || *after != ':') &&
                    utf8_valid_prefix(p + 1, n) == n) {
                        if (!out) {
                                r = random_hex(b->token, 32);
                                if (r < 0)
                                        return r;
                                out = o = malloc(len + 1);
                                if (!out)
                                        return -ENOMEM;
                        }
                        memcpy(o, from, (size_t) (p - from));
                        o += p - from;
                        o += sprintf(o, "\"%s-%zu\"", b->token, b->n);
                        b->start[b->n] = (size_t) (p + 1 - line);
                        b->len[b->n++] = n;
                        from = q + 1;
                }
                p = q + 1;
        }
        if (!out) {
                *ret = NULL;
                return 0;
        }
        memcpy(o, from, (size_t) (end - from));
        o += end - from;
        *ret = out;
        *ret_len = (size_t) (o - out);
        return 0;
}

/* Whether x is a placeholder, and of which string. */
static bool big_string_index(const json_t *x, const BigStrings *b, size_t *ret) {
        const char *s = json_string_value(x);
        size_t tlen = strlen(b->token), i;

        if (!s || strncmp(s, b->token, tlen) != 0 || s[tlen] != '-')
                return false;
        i = strtoul(s + tlen + 1, NULL, 10);
        if (i >= b->n)
                return false;
        *ret = i;
        return true;
}

/* Put the strings back where their placeholders are in v (values, not keys). */
static int big_strings_put(json_t *v, const char *line, const BigStrings *b) {
        const char *k;
        json_t *x;
        void *tmp;
        size_t i, n;
        int r = 0;

        json_object_foreach_safe(v, tmp, k, x) {
                if (big_string_index(x, b, &n))
                        r = json_object_set_new(v, k, json_stringn_nocheck(line + b->start[n], b->len[n]));
                else if (json_is_object(x) || json_is_array(x))
                        r = big_strings_put(x, line, b);
                if (r < 0)
                        return -ENOMEM;
        }
        json_array_foreach(v, i, x) {
                if (big_string_index(x, b, &n))
                        r = json_array_set_new(v, i, json_stringn_nocheck(line + b->start[n], b->len[n]));
                else if (json_is_object(x) || json_is_array(x))
                        r = big_strings_put(x, line, b);
                if (r < 0)
                        return -ENOMEM;
        }
        return 0;
}

int jsonrpc_parse(const char *line, size_t len, JsonRpcMessage **ret_msg) {
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = NULL;
        const size_t flags = JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
        json_t *id, *version, *method, *params;
        _cleanup_free_ char *repaired = NULL, *cut = NULL;
        const char *original = line;
        bool ints_as_real = false;
        BigStrings big = {};
        size_t cut_len = 0;
        json_error_t err;
        int r;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;

        if (len > 0 && line[len - 1] == '\r')
                len--;
        if (is_blank(line, len)) {
                m->kind = JSONRPC_EMPTY;
                *ret_msg = TAKE_PTR(m);
                return 0;
        }

        r = big_strings_cut(line, len, &big, &cut, &cut_len);
        if (r < 0)
                return r;
        if (cut) {
                line = cut;
                len = cut_len;
        }
        /* JSON allows "\ud800" alone; jansson does not: make it U+FFFD. */
        repaired = repair_lone_surrogates(line, len);
        if (repaired)
                line = repaired;
        m->root = json_loadb(line, len, flags, &err);
        if (!m->root && json_error_code(&err) == json_error_numeric_overflow) {
                /* An integer beyond int64 (say a huge timeout_ms) is a bad
                 * argument, not bad JSON: read the numbers as reals and let the
                 * schema validator name the argument. Integral reals become
                 * integers again there, and for the id below. */
                m->root = json_loadb(line, len, flags | JSON_DECODE_INT_AS_REAL, &err);
                ints_as_real = true;
        }
        if (m->root && big.n > 0 && big_strings_put(m->root, original, &big) < 0)
                return -ENOMEM;
        if (!m->root) {
                if (json_error_code(&err) == json_error_out_of_memory)
                        return -ENOMEM;
                set_invalid(m, JSONRPC_PARSE_ERROR, "Parse error: %s (at byte %d)", err.text, err.position);
                *ret_msg = TAKE_PTR(m);
                return 0;
        }

        if (json_is_array(m->root)) {
                set_invalid(m, JSONRPC_INVALID_REQUEST, "Invalid Request: batch requests are not supported");
                *ret_msg = TAKE_PTR(m);
                return 0;
        }
        if (!json_is_object(m->root)) {
                set_invalid(m, JSONRPC_INVALID_REQUEST, "Invalid Request: a request must be a JSON object");
                *ret_msg = TAKE_PTR(m);
                return 0;
        }

        id = json_object_get(m->root, "id");
        version = json_object_get(m->root, "jsonrpc");
        method = json_object_get(m->root, "method");
        params = json_object_get(m->root, "params");

        /* A response to a request of ours. We send none, so it is ignored. */
        if (!method && (json_object_get(m->root, "result") || json_object_get(m->root, "error"))) {
                m->kind = JSONRPC_RESPONSE;
                *ret_msg = TAKE_PTR(m);
                return 0;
        }

        if (id) {
                if (json_is_string(id) || json_is_integer(id))
                        m->id = json_incref(id);
                else if (ints_as_real && json_is_real(id) && real_is_int64(json_real_value(id))) {
                        m->id = json_integer((json_int_t) json_real_value(id));
                        if (!m->id)
                                return -ENOMEM;
                } else {
                        set_invalid(m, JSONRPC_INVALID_REQUEST,
                                    "Invalid Request: id must be a string or an integer");
                        *ret_msg = TAKE_PTR(m);
                        return 0;
                }
        }

        if (!json_is_string(version) || json_string_length(version) != 3 ||
            memcmp(json_string_value(version), "2.0", 3) != 0) {
                set_invalid(m, JSONRPC_INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"");
                *ret_msg = TAKE_PTR(m);
                return 0;
        }
        if (!json_is_string(method)) {
                set_invalid(m, JSONRPC_INVALID_REQUEST, "Invalid Request: method must be a string");
                *ret_msg = TAKE_PTR(m);
                return 0;
        }
        if (memchr(json_string_value(method), '\0', json_string_length(method))) {
                set_invalid(m, JSONRPC_INVALID_REQUEST, "Invalid Request: method must not contain NUL");
                *ret_msg = TAKE_PTR(m);
                return 0;
        }
        if (params && !json_is_object(params) && !json_is_array(params)) {
                set_invalid(m, JSONRPC_INVALID_REQUEST, "Invalid Request: params must be an object or an array");
                *ret_msg = TAKE_PTR(m);
                return 0;
        }

        m->kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
        m->method = json_string_value(method);
        m->params = params;
        *ret_msg = TAKE_PTR(m);
        return 0;
}

static json_t *id_or_null(const json_t *id) {
        if (!id)
                return json_null();
        return json_incref((json_t *) id);
}

json_t *jsonrpc_result(const json_t *id, json_t *result) {
        json_t *msg;

        if (!result)
                return NULL;
        msg = json_pack("{s:s, s:o, s:o}", "jsonrpc", "2.0", "id", id_or_null(id), "result", result);
        return msg;
}

json_t *jsonrpc_error(const json_t *id, int code, const char *message) {
        return json_pack("{s:s, s:o, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id_or_null(id),
                         "error", "code", code, "message", message);
}

int jsonrpc_serialize(const json_t *msg, size_t max, char **ret_line, size_t *ret_len) {
        return jsonrpc_serialize_parts(msg, NULL, max, NULL, NULL, ret_line, ret_len);
}

int jsonrpc_serialize_parts(const json_t *msg, const JsonSplice *splice, size_t max, json_part_t part, void *userdata,
                            char **ret_line, size_t *ret_len) {
        char *line;
        size_t len;
        int r;

        r = json_write_parts(msg, splice, max, part, userdata, &line, &len);
        if (r < 0)
                return r;
        line[len] = '\n';
        line[len + 1] = '\0';
        *ret_line = line;
        *ret_len = len + 1;
        return 0;
}

json_t *jsonrpc_id_from_tail(const char *tail, size_t len) {
        char buf[LINE_TAIL_MAX + 1];
        const char *key, *v, *end;
        json_t *id;

        if (len > LINE_TAIL_MAX)
                return NULL;
        memcpy(buf, tail, len);
        buf[len] = '\0';
        while (len > 0 && (buf[len - 1] == '\r' || buf[len - 1] == ' '))
                buf[--len] = '\0';
        key = NULL;
        for (const char *p = buf; (p = strstr(p, "\"id\"")); p++)
                key = p;
        if (!key || len == 0 || buf[len - 1] != '}')
                return NULL;
        v = key + 4;
        while (*v == ' ' || *v == ':')
                v++;
        end = strpbrk(v, ",}");
        if (!end)
                return NULL;
        /* A number or a string without escapes, nothing else. */
        id = json_loadb(v, (size_t) (end - v), JSON_DECODE_ANY, NULL);
        if (id && !json_is_integer(id) && !json_is_string(id)) {
                json_decref(id);
                return NULL;
        }
        return id;
}

void line_reader_init(LineReader *lr, size_t max) {
        *lr = (LineReader) { .max = max };
}

void line_reader_done(LineReader *lr) {
        free(lr->buf);
        *lr = (LineReader) { .max = lr->max };
}

static void line_reader_release(LineReader *lr) {
        free(lr->buf);
        lr->buf = NULL;
        lr->len = lr->size = 0;
}

static int line_reader_append(LineReader *lr, const char *data, size_t n) {
        size_t need = lr->len + n + 1;

        if (need > lr->size) {
                size_t size = MAX(lr->size * 2, MAX(need, (size_t) 4096));
                char *p;

                size = MIN(size, lr->max + 1);
                p = realloc(lr->buf, size);
                if (!p)
                        return -ENOMEM;
                lr->buf = p;
                lr->size = size;
        }
        memcpy(lr->buf + lr->len, data, n);
        lr->len += n;
        lr->buf[lr->len] = '\0';
        return 0;
}

int line_reader_feed(LineReader *lr, const char *data, size_t n, line_handler_t handler, void *userdata) {
        int r;

        while (n > 0) {
                const char *nl = memchr(data, '\n', n);
                size_t seg = nl ? (size_t) (nl - data) : n;
                size_t used = seg + (nl ? 1 : 0);

                if (!lr->discarding && lr->len + seg > lr->max) {
                        /* Too long: drop what we have and skip to the newline. */
                        lr->discarding = true;
                        lr->tail_len = MIN(lr->len, (size_t) LINE_TAIL_MAX);
                        if (lr->tail_len > 0)
                                memcpy(lr->tail, lr->buf + lr->len - lr->tail_len, lr->tail_len);
                        line_reader_release(lr);
                }

                if (lr->discarding) {
                        /* Keep the last bytes: they name the request. */
                        tail_keep(lr->tail, &lr->tail_len, LINE_TAIL_MAX, data, seg);
                        if (nl) {
                                lr->discarding = false;
                                r = handler(lr->tail, lr->tail_len, true, userdata);
                                lr->tail_len = 0;
                                if (r < 0)
                                        return r;
                        }
                } else if (nl && lr->len == 0) {
                        /* The whole line is in this chunk: no copy. */
                        r = handler(data, seg, false, userdata);
                        if (r < 0)
                                return r;
                } else {
                        r = line_reader_append(lr, data, seg);
                        if (r < 0)
                                return r;
                        if (nl) {
                                r = handler(lr->buf, lr->len, false, userdata);
                                lr->len = 0;
                                if (lr->size > LINE_READER_KEEP)
                                        line_reader_release(lr);
                                if (r < 0)
                                        return r;
                        }
                }
                data += used;
                n -= used;
        }
        return 0;
}

int line_reader_finish(LineReader *lr, line_handler_t handler, void *userdata) {
        int r = 0;

        if (lr->discarding) {
                r = handler(lr->tail, lr->tail_len, true, userdata);
                lr->tail_len = 0;
        } else if (lr->len > 0)
                r = handler(lr->buf, lr->len, false, userdata);
        lr->discarding = false;
        line_reader_release(lr);
        return r;
}
