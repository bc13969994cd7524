/* Unit tests for broker/jsonrpc.c (the MCP line parser, line reader and
 * response serializer), broker/jsonwrite.c (the JSON writer, checked against
 * jansson's json_dumps) and broker/mcp.c (initialize and version negotiation). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../broker/jsonrpc.h"
#include "../../broker/jsonwrite.h"
#include "base64.h"
#include "macro.h"
#include "../../broker/mcp.h"
#include "sbx-limits.h"

/* Parse a C string; the message is checked by the caller and freed here. */
static JsonRpcMessage *parse(const char *line) {
        JsonRpcMessage *m = NULL;

        assert_int_equal(jsonrpc_parse(line, strlen(line), &m), 0);
        assert_non_null(m);
        return m;
}

/* The serialized error response for an invalid line. */
static char *error_line(const char *line) {
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = parse(line);
        json_t *e;
        char *out;
        size_t len;

        assert_int_equal(m->kind, JSONRPC_INVALID);
        e = jsonrpc_error(m->id, m->error_code, m->error_message);
        assert_non_null(e);
        assert_int_equal(jsonrpc_serialize(e, JSONRPC_OUT_MAX, &out, &len), 0);
        json_decref(e);
        return out;
}

static void assert_invalid(const char *line, int code, bool id_null, const char *message_part) {
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = parse(line);

        assert_int_equal(m->kind, JSONRPC_INVALID);
        assert_int_equal(m->error_code, code);
        if (id_null)
                assert_null(m->id);
        else
                assert_non_null(m->id);
        if (!strstr(m->error_message, message_part))
                fail_msg("'%s': message '%s' lacks '%s'", line, m->error_message, message_part);
}

/* ---- valid messages ------------------------------------------------------------ */

static void test_request(void **state) {
        _cleanup_jsonrpc_message_ JsonRpcMessage *m =
                parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}");

        assert_int_equal(m->kind, JSONRPC_REQUEST);
        assert_string_equal(m->method, "tools/call");
        assert_true(json_is_integer(m->id));
        assert_int_equal(json_integer_value(m->id), 7);
        assert_true(json_is_object(m->params));
        assert_string_equal(json_string_value(json_object_get(m->params, "name")), "x");
}

static void test_request_key_order_and_no_params(void **state) {
        /* The SDK sends "jsonrpc" last. */
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = parse("{\"method\":\"ping\",\"id\":\"a\",\"jsonrpc\":\"2.0\"}");

        assert_int_equal(m->kind, JSONRPC_REQUEST);
        assert_string_equal(m->method, "ping");
        assert_null(m->params);
}

static void test_notification(void **state) {
        _cleanup_jsonrpc_message_ JsonRpcMessage *m =
                parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}");

        assert_int_equal(m->kind, JSONRPC_NOTIFICATION);
        assert_null(m->id);
        assert_string_equal(m->method, "notifications/cancelled");
        assert_int_equal(json_integer_value(json_object_get(m->params, "requestId")), 3);
}

static void test_response_ignored(void **state) {
        JsonRpcMessage *m = parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
        assert_int_equal(m->kind, JSONRPC_RESPONSE);
        jsonrpc_message_free(m);
        m = parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":\"x\"}}");
        assert_int_equal(m->kind, JSONRPC_RESPONSE);
        jsonrpc_message_free(m);
}

static void test_blank_lines(void **state) {
        static const char *const lines[] = { "", "\r", "   ", "\t \r" };

        for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
                _cleanup_jsonrpc_message_ JsonRpcMessage *m = parse(lines[i]);
                assert_int_equal(m->kind, JSONRPC_EMPTY);
        }
}

static void test_trailing_cr(void **state) {
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r");

        assert_int_equal(m->kind, JSONRPC_REQUEST);
        assert_string_equal(m->method, "ping");
}

static void test_line_with_nul_and_length(void **state) {
        /* The parser takes a length, not a C string: bytes past it are not read. */
        static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}garbage";
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = NULL;

        assert_int_equal(jsonrpc_parse(line, strlen(line) - strlen("garbage"), &m), 0);
        assert_int_equal(m->kind, JSONRPC_REQUEST);
}

/* ---- ids are echoed with their exact type and value ------------------------------ */

static void check_echo(const char *id_json, const char *expect) {
        _cleanup_free_ char *line = NULL, *out = NULL;
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = NULL;
        json_t *resp;
        size_t len;

        assert_true(asprintf(&line, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", id_json) > 0);
        m = parse(line);
        assert_int_equal(m->kind, JSONRPC_REQUEST);
        resp = jsonrpc_result(m->id, json_object());
        assert_non_null(resp);
        assert_int_equal(jsonrpc_serialize(resp, JSONRPC_OUT_MAX, &out, &len), 0);
        json_decref(resp);
        assert_string_equal(out, expect);
        assert_int_equal(len, strlen(expect));
}

static void test_id_echo(void **state) {
        check_echo("0", "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n");
        check_echo("-5", "{\"jsonrpc\":\"2.0\",\"id\":-5,\"result\":{}}\n");
        check_echo("9007199254740993", "{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"result\":{}}\n");
        check_echo("9223372036854775807", "{\"jsonrpc\":\"2.0\",\"id\":9223372036854775807,\"result\":{}}\n");
        check_echo("\"1\"", "{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{}}\n");
        check_echo("\"\"", "{\"jsonrpc\":\"2.0\",\"id\":\"\",\"result\":{}}\n");
        check_echo("\"req-\\u00e9\\n\\\"x\\\"\"", "{\"jsonrpc\":\"2.0\",\"id\":\"req-\xc3\xa9\\n\\\"x\\\"\",\"result\":{}}\n");
}

static void test_id_with_huge_argument(void **state) {
        /* An integer argument beyond int64 is not a parse error; the id stays an integer. */
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = parse(
                "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"x\",\"arguments\":{\"limit\":123456789012345678901234567890}}}");

        assert_int_equal(m->kind, JSONRPC_REQUEST);
        assert_true(json_is_integer(m->id));
        assert_int_equal(json_integer_value(m->id), 42);
}

/* ---- every error class ---------------------------------------------------------- */

static void test_parse_errors(void **state) {
        static const char *const lines[] = {
                "not json",
                "{",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} {}",
                "{'jsonrpc':'2.0'}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}",      /* duplicate key */
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}",              /* invalid UTF-8 */
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":1e999}",     /* real overflow */
        };

        for (size_t i = 0; i < ELEMENTSOF(lines); i++)
                assert_invalid(lines[i], JSONRPC_PARSE_ERROR, true, "Parse error");
}

static void test_parse_error_response(void **state) {
        _cleanup_free_ char *out = error_line("not json");

        assert_non_null(strstr(out, "\"id\":null"));
        assert_non_null(strstr(out, "\"code\":-32700"));
        assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1);
}

static void test_not_an_object(void **state) {
        static const char *const lines[] = { "42", "\"ping\"", "null", "true", "1.5" };

        for (size_t i = 0; i < ELEMENTSOF(lines); i++)
                assert_invalid(lines[i], JSONRPC_INVALID_REQUEST, true, "must be a JSON object");
}

static void test_batch_rejected(void **state) {
        assert_invalid("[]", JSONRPC_INVALID_REQUEST, true, "batch");
        assert_invalid("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", JSONRPC_INVALID_REQUEST, true,
                       "batch");
}

static void test_bad_jsonrpc(void **state) {
        assert_invalid("{\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, false, "jsonrpc");
        assert_invalid("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, false,
                       "jsonrpc");
        assert_invalid("{\"jsonrpc\":2.0,\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, false, "jsonrpc");
        assert_invalid("{\"jsonrpc\":\"2.0\\u0000\",\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST,
                       false, "jsonrpc");
        /* Without an id it is still answered, with id null. */
        assert_invalid("{\"jsonrpc\":\"2.1\",\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST, true, "jsonrpc");
}

static void test_bad_id(void **state) {
        static const char *const ids[] = { "null", "1.5", "1.0", "{}", "[]", "true", "[1]" };

        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                _cleanup_free_ char *line = NULL;

                assert_true(asprintf(&line, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", ids[i]) > 0);
                assert_invalid(line, JSONRPC_INVALID_REQUEST, true, "id must be a string or an integer");
        }
}

static void test_bad_method(void **state) {
        assert_invalid("{\"jsonrpc\":\"2.0\",\"id\":1}", JSONRPC_INVALID_REQUEST, false, "method must be a string");
        assert_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", JSONRPC_INVALID_REQUEST, false,
                       "method must be a string");
        assert_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":null}", JSONRPC_INVALID_REQUEST, false,
                       "method must be a string");
        assert_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000x\"}", JSONRPC_INVALID_REQUEST,
                       false, "NUL");
        assert_invalid("{\"jsonrpc\":\"2.0\",\"method\":[]}", JSONRPC_INVALID_REQUEST, true,
                       "method must be a string");
}

static void test_bad_params(void **state) {
        assert_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":3}", JSONRPC_INVALID_REQUEST,
                       false, "params");
        assert_invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":\"x\"}",
                       JSONRPC_INVALID_REQUEST, false, "params");
}

static void test_error_echoes_valid_id(void **state) {
        _cleanup_free_ char *out = error_line("{\"jsonrpc\":\"1.0\",\"id\":\"abc\",\"method\":\"ping\"}");

        assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"error\":{\"code\":-32600,"
                                 "\"message\":\"Invalid Request: jsonrpc must be \\\"2.0\\\"\"}}\n");
}

/* ---- serialization --------------------------------------------------------------- */

static void test_serialize_one_line(void **state) {
        json_t *r = jsonrpc_result(NULL, json_pack("{s:s}", "text", "a\nb\r\nc\x01"));
        _cleanup_free_ char *out = NULL;
        size_t len;

        assert_int_equal(jsonrpc_serialize(r, JSONRPC_OUT_MAX, &out, &len), 0);
        assert_int_equal(len, strlen(out));
        assert_ptr_equal(strchr(out, '\n'), out + len - 1);
        assert_null(strchr(out, '\r'));
        assert_non_null(strstr(out, "\"id\":null"));
        json_decref(r);
}

static void test_serialize_too_big(void **state) {
        json_t *r = jsonrpc_result(NULL, json_pack("{s:s}", "text", "0123456789012345678901234567890123456789"));
        char *out = NULL;
        size_t len;

        assert_int_equal(jsonrpc_serialize(r, 40, &out, &len), -EMSGSIZE);
        assert_null(out);
        json_decref(r);
}

/* json_write must write exactly what json_dumps writes. */
static void assert_writes_as_jansson(const json_t *v) {
        _cleanup_free_ char *ours = NULL, *theirs = NULL;
        size_t len;

        theirs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(16));
        assert_non_null(theirs);
        assert_int_equal(json_write(v, JSONRPC_OUT_MAX, &ours, &len), 0);
        assert_int_equal(len, strlen(theirs));
        assert_string_equal(ours, theirs);
}

static void test_write_matches_jansson(void **state) {
        static const char *const strings[] = {
                "", "plain", "quote \" and backslash \\ and slash /", "\b\f\n\r\t\x01\x1f\x7f",
                "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "12345678\"12345678\\", "1234567\n",
                "\n\n\n\n\n\n\n\n\n", "ends with escape after a clean word: abcdefgh\"",
        };
        json_t *v;

        for (size_t i = 0; i < ELEMENTSOF(strings); i++) {
                v = json_string(strings[i]);
                assert_non_null(v);
                assert_writes_as_jansson(v);
                json_decref(v);
        }
        v = json_stringn("nul\0inside", 11);
        assert_writes_as_jansson(v);
        json_decref(v);
        v = json_pack("{s:i, s:I, s:I, s:f, s:f, s:f, s:b, s:b, s:n, s:[], s:{}, s:[i, s, {s:[n]}], s:s}", "zero", 0,
                      "max", (json_int_t) INT64_MAX, "min", (json_int_t) INT64_MIN, "real", 1.5, "tenth", 0.1,
                      "whole", 3.0, "t", 1, "f", 0, "null", "empty_array", "empty_object", "nested", -7, "x\ty",
                      "deep", "k", "last", "z");
        assert_non_null(v);
        assert_writes_as_jansson(v);
        json_decref(v);
}

/* Random strings over a small alphabet of every kind of byte sequence, in
 * objects and arrays: the same text as jansson's. */
static void test_write_random_matches_jansson(void **state) {
        static const char *const pieces[] = { "a", "Z", " ", "\"", "\\", "/", "\n", "\x01", "\x1f", "\x7f",
                                              "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "abcdefgh" };
        unsigned seed = 1;

        for (int round = 0; round < 2000; round++) {
                char buf[512];
                size_t len = 0;
                json_t *v;

                seed = seed * 1103515245u + 12345u;
                for (unsigned n = (seed >> 16) % 48; n > 0; n--) {
                        seed = seed * 1103515245u + 12345u;
                        const char *p = pieces[(seed >> 16) % ELEMENTSOF(pieces)];
                        memcpy(buf + len, p, strlen(p));
                        len += strlen(p);
                }
                v = json_pack("{s:s%, s:[s%, i]}", "text", buf, len, "list", buf, len, round);
                assert_non_null(v);
                assert_writes_as_jansson(v);
                json_decref(v);
        }
}

static void test_write_limit_and_depth(void **state) {
        json_t *v = json_string("0123456789"), *deep = json_array();
        char *out = NULL;
        size_t len;

        /* "\"0123456789\"" is 12 bytes: with its "\n" it must stay below max. */
        assert_int_equal(json_write(v, 13, &out, &len), -EMSGSIZE);
        assert_null(out);
        assert_int_equal(json_write(v, 14, &out, &len), 0);
        assert_int_equal(len, 12);
        free(out);
        json_decref(v);

        for (int i = 0; i < 100; i++) {
                json_t *outer = json_array();
                json_array_append_new(outer, deep);
                deep = outer;
        }
        out = NULL;
        assert_int_equal(json_write(deep, JSONRPC_OUT_MAX, &out, &len), -ELOOP);
        assert_null(out);
        json_decref(deep);
}

/* ---- parts and a splice (download_file) --------------------------------------------- */

typedef struct Parts {
        char *data;
        size_t len, n, biggest;
        size_t fail_at;         /* return -EIO for this part (0: never) */
} Parts;

static int take_part(void *userdata, const char *data, size_t len) {
        Parts *p = userdata;

        if (++p->n == p->fail_at)
                return -EIO;
        p->data = realloc(p->data, p->len + len);
        assert_non_null(p->data);
        memcpy(p->data + p->len, data, len);
        p->len += len;
        p->biggest = MAX(p->biggest, len);
        return 0;
}

/* size random bytes in a memfd, and their base64 in ret_b64. */
static int random_memfd(size_t size, char **ret_b64) {
        uint8_t *bytes = malloc(size ?: 1);
        int fd = memfd_create("test", MFD_CLOEXEC);

        assert_non_null(bytes);
        assert_true(fd >= 0);
        for (size_t i = 0; i < size; i++)
                bytes[i] = (uint8_t) (rand() >> 7);
        assert_int_equal(write(fd, bytes, size), (ssize_t) size);
        *ret_b64 = malloc(4 * ((size + 2) / 3) + 1);
        assert_non_null(*ret_b64);
        (*ret_b64)[base64_encode(bytes, size, *ret_b64)] = '\0';
        free(bytes);
        return fd;
}

/* The parts and the tail make the same text as json_write of the tree with
 * the content in it, and no part is far over SBX_JSON_WRITE_PART. */
static void test_write_parts_splice(void **state) {
        static const size_t sizes[] = { 0, 1, 2, 3, 4, SBX_JSON_SPLICE_READ - 1, SBX_JSON_SPLICE_READ,
                                        SBX_JSON_SPLICE_READ + 1, 3 * SBX_JSON_SPLICE_READ + 2 };

        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                _cleanup_free_ char *b64 = NULL, *whole = NULL, *tail = NULL;
                _cleanup_close_ int fd = random_memfd(sizes[i], &b64);
                json_t *at = json_string(""), *v, *w;
                Parts p = {};
                size_t whole_len, tail_len;

                v = json_pack("{s:s, s:O, s:i}", "path", "/tmp/f", "content", at, "bytes", (int) sizes[i]);
                w = json_pack("{s:s, s:s, s:i}", "path", "/tmp/f", "content", b64, "bytes", (int) sizes[i]);
                assert_non_null(v);
                assert_non_null(w);
                assert_int_equal(json_write(w, SBX_CLAIM_RESULT_MAX, &whole, &whole_len), 0);
                assert_int_equal(json_write_parts(v, &(JsonSplice) { .at = at, .fd = fd, .size = sizes[i] },
                                                  SBX_CLAIM_RESULT_MAX, take_part, &p, &tail, &tail_len), 0);
                assert_int_equal(p.len + tail_len, whole_len);
                assert_memory_equal(p.data ?: "", whole, p.len);
                assert_memory_equal(tail, whole + p.len, tail_len);
                /* Handed on once full: at most one read's base64 over a part. */
                assert_true(p.biggest < SBX_JSON_WRITE_PART + 4 * SBX_JSON_SPLICE_READ / 3 + 64);
                assert_true(sizes[i] < SBX_JSON_WRITE_PART || p.n > 0);
                free(p.data);
                json_decref(at);
                json_decref(v);
                json_decref(w);
        }
}

/* Too large: -EMSGSIZE before any part; a part refused after others went
 * out: -EPIPE (nothing else may be sent in its place). */
static void test_write_parts_failures(void **state) {
        _cleanup_free_ char *b64 = NULL;
        _cleanup_close_ int fd = random_memfd(3 * SBX_JSON_SPLICE_READ, &b64);
        json_t *at = json_string(""), *v = json_pack("{s:O}", "content", at);
        JsonSplice sp = { .at = at, .fd = fd, .size = 3 * SBX_JSON_SPLICE_READ };
        char *tail = NULL;
        size_t len;
        Parts p = {};

        assert_int_equal(json_write_parts(v, &sp, 4 * SBX_JSON_SPLICE_READ, take_part, &p, &tail, &len), -EMSGSIZE);
        assert_int_equal(p.n, 0);
        p = (Parts) { .fail_at = 2 };
        assert_int_equal(json_write_parts(v, &sp, SBX_CLAIM_RESULT_MAX, take_part, &p, &tail, &len), -EPIPE);
        assert_null(tail);
        free(p.data);
        /* A memfd shorter than the splice says: the text would lie. */
        sp.size++;
        p = (Parts) {};
        assert_int_equal(json_write_parts(v, &sp, SBX_CLAIM_RESULT_MAX, NULL, NULL, &tail, &len), -EBADMSG);
        json_decref(at);
        json_decref(v);
}

/* ---- line reader ------------------------------------------------------------------ */

typedef struct Collected {
        char lines[16][LINE_TAIL_MAX + 1];
        bool oversize[16];
        size_t n;
        int fail_at;    /* return -EIO for this line number, or -1 */
} Collected;

static int collect(const char *line, size_t len, bool oversize, void *userdata) {
        Collected *c = userdata;

        assert_true(c->n < ELEMENTSOF(c->lines));
        assert_true(len < sizeof(c->lines[0]));
        /* An oversize line comes as its tail (at most LINE_TAIL_MAX bytes). */
        if (len > 0)
                memcpy(c->lines[c->n], line, len);
        c->lines[c->n][len] = '\0';
        c->oversize[c->n] = oversize;
        if ((int) c->n++ == c->fail_at)
                return -EIO;
        return 0;
}

static void feed_bytewise(LineReader *lr, const char *s, Collected *c) {
        for (size_t i = 0; s[i]; i++)
                assert_int_equal(line_reader_feed(lr, s + i, 1, collect, c), 0);
}

static void test_reader_lines(void **state) {
        Collected c = { .fail_at = -1 };
        LineReader lr;
        static const char input[] = "one\ntwo\r\n\nthree";

        line_reader_init(&lr, 16);
        assert_int_equal(line_reader_feed(&lr, input, strlen(input), collect, &c), 0);
        assert_int_equal(c.n, 3);
        assert_string_equal(c.lines[0], "one");
        assert_string_equal(c.lines[1], "two\r");      /* the parser drops the "\r" */
        assert_string_equal(c.lines[2], "");
        assert_int_equal(line_reader_finish(&lr, collect, &c), 0);
        assert_int_equal(c.n, 4);
        assert_string_equal(c.lines[3], "three");
        assert_false(c.oversize[3]);
        line_reader_done(&lr);
}

static void test_reader_split_chunks(void **state) {
        Collected c = { .fail_at = -1 };
        LineReader lr;

        line_reader_init(&lr, 16);
        feed_bytewise(&lr, "hello world\nsecond\n", &c);
        assert_int_equal(c.n, 2);
        assert_string_equal(c.lines[0], "hello world");
        assert_string_equal(c.lines[1], "second");
        line_reader_done(&lr);
}

static void test_reader_oversize(void **state) {
        Collected c = { .fail_at = -1 };
        LineReader lr;
        static const char input[] = "0123456789abcdef\n"       /* exactly max: kept */
                                    "0123456789abcdefX\n"      /* max + 1: discarded */
                                    "ok\n";

        line_reader_init(&lr, 16);
        assert_int_equal(line_reader_feed(&lr, input, strlen(input), collect, &c), 0);
        assert_int_equal(c.n, 3);
        assert_string_equal(c.lines[0], "0123456789abcdef");
        assert_false(c.oversize[0]);
        assert_true(c.oversize[1]);
        assert_string_equal(c.lines[2], "ok");
        assert_false(c.oversize[2]);
        line_reader_done(&lr);
}

static void test_reader_oversize_streamed(void **state) {
        /* A long line arriving in pieces never grows the buffer past max. */
        Collected c = { .fail_at = -1 };
        LineReader lr;

        line_reader_init(&lr, 16);
        for (int i = 0; i < 1000; i++) {
                assert_int_equal(line_reader_feed(&lr, "xxxxxxxxxx", 10, collect, &c), 0);
                assert_true(lr.size <= 17);
                assert_int_equal(c.n, 0);
        }
        feed_bytewise(&lr, "yy\nafter\n", &c);
        assert_int_equal(c.n, 2);
        assert_true(c.oversize[0]);
        assert_string_equal(c.lines[1], "after");
        line_reader_done(&lr);
}

static void test_reader_oversize_at_eof(void **state) {
        Collected c = { .fail_at = -1 };
        LineReader lr;

        line_reader_init(&lr, 4);
        assert_int_equal(line_reader_feed(&lr, "toolong", 7, collect, &c), 0);
        assert_int_equal(c.n, 0);
        assert_int_equal(line_reader_finish(&lr, collect, &c), 0);
        assert_int_equal(c.n, 1);
        assert_true(c.oversize[0]);
        /* Nothing left after finish. */
        assert_int_equal(line_reader_finish(&lr, collect, &c), 0);
        assert_int_equal(c.n, 1);
        line_reader_done(&lr);
}

static void test_reader_handler_error_stops(void **state) {
        Collected c = { .fail_at = 1 };
        LineReader lr;

        line_reader_init(&lr, 16);
        assert_int_equal(line_reader_feed(&lr, "a\nb\nc\n", 6, collect, &c), -EIO);
        assert_int_equal(c.n, 2);
        line_reader_done(&lr);
}

static void test_oversize_line_is_not_parsed(void **state) {
        /* A real-size check: SBX_MCP_LINE_MAX + 1 bytes, one JSON value, discarded. */
        const size_t max = SBX_MCP_LINE_MAX;
        Collected c = { .fail_at = -1 };
        char *big = malloc(max + 2);
        LineReader lr;

        assert_non_null(big);
        memset(big, ' ', max + 1);
        big[0] = '{';
        big[max] = '}';
        big[max + 1] = '\n';
        line_reader_init(&lr, max);
        assert_int_equal(line_reader_feed(&lr, big, max + 2, collect, &c), 0);
        assert_int_equal(c.n, 1);
        assert_true(c.oversize[0]);
        assert_true(lr.size <= max + 1);
        line_reader_done(&lr);
        free(big);
}

/* ---- initialize ---------------------------------------------------------------- */

static void test_negotiate_version(void **state) {
        assert_string_equal(mcp_negotiate_version("2025-11-25"), "2025-11-25");
        assert_string_equal(mcp_negotiate_version("2025-06-18"), "2025-06-18");
        assert_string_equal(mcp_negotiate_version("2025-03-26"), "2025-03-26");
        assert_string_equal(mcp_negotiate_version("2024-11-05"), "2024-11-05");
        assert_string_equal(mcp_negotiate_version("2026-07-28"), "2025-11-25");
        assert_string_equal(mcp_negotiate_version("1999-01-01"), "2025-11-25");
        assert_string_equal(mcp_negotiate_version(""), "2025-11-25");
        assert_string_equal(mcp_negotiate_version(NULL), "2025-11-25");
}

static void check_initialize(const char *params_json, const char *expect_version) {
        json_t *params = params_json ? json_loads(params_json, JSON_DECODE_ANY, NULL) : NULL;
        json_t *r = mcp_initialize_result(params, "1.2.3", "Your sandboxes (sandbox_id): a.");
        json_t *info;

        assert_non_null(r);
        assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")), expect_version);
        assert_true(json_is_false(json_object_get(json_object_get(json_object_get(r, "capabilities"), "tools"),
                                                  "listChanged")));
        info = json_object_get(r, "serverInfo");
        assert_string_equal(json_string_value(json_object_get(info, "name")), "sandbox-mcp");
        assert_string_equal(json_string_value(json_object_get(info, "title")), "sbx sandbox");
        assert_string_equal(json_string_value(json_object_get(info, "version")), "1.2.3");
        assert_true(json_is_string(json_object_get(r, "instructions")));
        assert_non_null(strstr(json_string_value(json_object_get(r, "instructions")), " Your sandboxes (sandbox_id): a."));
        json_decref(r);
        json_decref(params);
}

static void test_initialize(void **state) {
        check_initialize("{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                         "\"clientInfo\":{\"name\":\"c\",\"version\":\"0\"}}", "2025-06-18");
        check_initialize("{\"protocolVersion\":\"2025-11-25\"}", "2025-11-25");
        check_initialize("{\"protocolVersion\":\"2025-03-26\"}", "2025-03-26");
        check_initialize("{\"protocolVersion\":\"2024-11-05\"}", "2024-11-05");
        check_initialize("{\"protocolVersion\":\"1.0.0\"}", "2025-11-25");
        check_initialize("{\"protocolVersion\":20250618}", "2025-11-25");
        check_initialize("{}", "2025-11-25");
        check_initialize("[]", "2025-11-25");
        check_initialize(NULL, "2025-11-25");
}

static json_t *tail_id(const char *s) {
        return jsonrpc_id_from_tail(s, strlen(s));
}

static void test_id_from_tail(void **state) {
        json_t *id;
        char big[300];

        id = tail_id("xxxx\"},\"jsonrpc\":\"2.0\",\"id\":42}");
        assert_non_null(id);
        assert_int_equal(json_integer_value(id), 42);
        json_decref(id);
        id = tail_id("\"id\": \"req-7\" }");
        assert_non_null(id);
        assert_string_equal(json_string_value(id), "req-7");
        json_decref(id);
        /* No id, an id that is not a number or string, a cut line: nothing. */
        assert_null(tail_id("aaaa\"}"));
        assert_null(tail_id("\"id\":null}"));
        assert_null(tail_id("\"id\":[1]}"));
        assert_null(tail_id("\"id\":4"));
        memset(big, 'a', sizeof(big));
        assert_null(jsonrpc_id_from_tail(big, sizeof(big)));

        /* Through the reader: an oversize request still gets its id back. */
        {
                LineReader lr;
                Collected c = { .fail_at = -1 };
                char line[600];
                int n = snprintf(line, sizeof(line), "{\"params\":\"%0300d\",\"jsonrpc\":\"2.0\",\"id\":9}\n", 0);
                line_reader_init(&lr, 200);
                assert_int_equal(line_reader_feed(&lr, line, (size_t) n, collect, &c), 0);
                assert_true(c.oversize[0]);
                id = jsonrpc_id_from_tail(c.lines[0], strlen(c.lines[0]));
                assert_non_null(id);
                assert_int_equal(json_integer_value(id), 9);
                json_decref(id);
                line_reader_done(&lr);
        }
}

static void test_lone_surrogates(void **state) {
        static const char line[] =
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"x\\ud800y\\udc00\\ud83d\\ude00\\\\ud800\"}}";
        JsonRpcMessage *m = NULL;
        const char *a;

        assert_int_equal(jsonrpc_parse(line, strlen(line), &m), 0);
        assert_int_equal(m->kind, JSONRPC_REQUEST);
        a = json_string_value(json_object_get(m->params, "a"));
        /* Lone halves became U+FFFD; the pair stays; an escaped backslash is text. */
        assert_string_equal(a, "x\xef\xbf\xbdy\xef\xbf\xbd\xf0\x9f\x98\x80\\ud800");
        jsonrpc_message_free(m);
}

/* Long plain strings skip jansson's lexer (jsonrpc.c: big strings) and come back
 * the same, in objects and arrays; keys, escaped and invalid ones go the usual way. */
static void test_big_strings(void **state) {
        size_t n = 200000;
        char *big = malloc(n + 1), *line = malloc(5 * n + 400);
        JsonRpcMessage *m = NULL;
        json_t *args;

        for (size_t i = 0; i < n; i++)
                big[i] = (char) ('A' + i % 26);
        big[n] = '\0';
        snprintf(line, 5 * n + 400,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"arguments\":"
                 "{\"content\" : \"%s\", \"list\": [\"%s\", 1], \"%s\": 2, \"esc\": \"%s\\n\"}}}", big, big, big, big);
        assert_int_equal(jsonrpc_parse(line, strlen(line), &m), 0);
        assert_int_equal(m->kind, JSONRPC_REQUEST);
        args = json_object_get(m->params, "arguments");
        assert_int_equal(json_string_length(json_object_get(args, "content")), n);
        assert_memory_equal(json_string_value(json_object_get(args, "content")), big, n);
        assert_memory_equal(json_string_value(json_array_get(json_object_get(args, "list"), 0)), big, n);
        assert_int_equal(json_integer_value(json_object_get(args, big)), 2);
        assert_int_equal(json_string_length(json_object_get(args, "esc")), n + 1);
        jsonrpc_message_free(m);
        /* invalid UTF-8 in a long string is still a parse error */
        big[5] = (char) 0xff;
        snprintf(line, 5 * n + 400, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"a\":\"%s\"}}", big);
        assert_int_equal(jsonrpc_parse(line, strlen(line), &m), 0);
        assert_int_equal(m->kind, JSONRPC_INVALID);
        jsonrpc_message_free(m);
        free(big);
        free(line);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_request),
                cmocka_unit_test(test_big_strings),
                cmocka_unit_test(test_request_key_order_and_no_params),
                cmocka_unit_test(test_notification),
                cmocka_unit_test(test_response_ignored),
                cmocka_unit_test(test_blank_lines),
                cmocka_unit_test(test_trailing_cr),
                cmocka_unit_test(test_line_with_nul_and_length),
                cmocka_unit_test(test_id_echo),
                cmocka_unit_test(test_id_with_huge_argument),
                cmocka_unit_test(test_parse_errors),
                cmocka_unit_test(test_parse_error_response),
                cmocka_unit_test(test_not_an_object),
                cmocka_unit_test(test_batch_rejected),
                cmocka_unit_test(test_bad_jsonrpc),
                cmocka_unit_test(test_bad_id),
                cmocka_unit_test(test_bad_method),
                cmocka_unit_test(test_bad_params),
                cmocka_unit_test(test_error_echoes_valid_id),
                cmocka_unit_test(test_serialize_one_line),
                cmocka_unit_test(test_serialize_too_big),
                cmocka_unit_test(test_reader_lines),
                cmocka_unit_test(test_reader_split_chunks),
                cmocka_unit_test(test_reader_oversize),
                cmocka_unit_test(test_reader_oversize_streamed),
                cmocka_unit_test(test_reader_oversize_at_eof),
                cmocka_unit_test(test_reader_handler_error_stops),
                cmocka_unit_test(test_oversize_line_is_not_parsed),
                cmocka_unit_test(test_id_from_tail),
                cmocka_unit_test(test_lone_surrogates),
                cmocka_unit_test(test_write_matches_jansson),
                cmocka_unit_test(test_write_random_matches_jansson),
                cmocka_unit_test(test_write_limit_and_depth),
                cmocka_unit_test(test_write_parts_splice),
                cmocka_unit_test(test_write_parts_failures),
                cmocka_unit_test(test_negotiate_version),
                cmocka_unit_test(test_initialize),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
