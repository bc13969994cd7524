/* Unit tests for common/redact.c, the streaming redactor of box output:
 * values split across chunks at every position, values longer than a chunk,
 * overlapping and self-overlapping values, the bound on what is held back,
 * and random inputs in random chunks against tests/unit/redact-naive.h. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "redact-naive.h"
#include "redact.h"

typedef struct Out {
        char buf[1 << 16];
        size_t len;
} Out;

static int collect(const void *data, size_t len, void *userdata) {
        Out *o = userdata;

        assert_true(len > 0);
        assert_true(o->len + len <= sizeof(o->buf));
        memcpy(o->buf + o->len, data, len);
        o->len += len;
        return 0;
}

/* in, fed in chunks of `chunk` bytes (0: each cut in cuts[]), equals the naive redaction. */
static void check_chunked(const RedactSecret *s, size_t n, const char *in, size_t len, size_t chunk) {
        Redactor *r = NULL;
        static Out o;
        size_t want_len, longest = 0;
        char *want = redact_naive(s, n, in, len, &want_len);

        for (size_t i = 0; i < n; i++)
                longest = MAX(longest, s[i].len);
        o.len = 0;
        assert_int_equal(redactor_new(s, n, &r), 0);
        for (size_t off = 0; off < len; off += chunk) {
                assert_int_equal(redactor_feed(r, in + off, MIN(chunk, len - off), collect, &o), 0);
                assert_true(redactor_held(r) + 1 <= MAX(longest, 1));
        }
        assert_int_equal(redactor_flush(r, collect, &o), 0);
        assert_int_equal(o.len, want_len);
        assert_memory_equal(o.buf, want, want_len);
        redactor_free(r);
        free(want);
}

static void test_split_everywhere(void **state) {
        const RedactSecret s[] = { { "TOKEN", "hunter2-secret", 14 } };
        const char *in = "before hunter2-secret after hunter2-secrethunter2-secret end";
        Redactor *r = NULL;
        static Out o;

        (void) state;
        /* Two chunks, cut at every position. */
        for (size_t cut = 0; cut <= strlen(in); cut++) {
                o.len = 0;
                assert_int_equal(redactor_new(s, 1, &r), 0);
                assert_int_equal(redactor_feed(r, in, cut, collect, &o), 0);
                assert_int_equal(redactor_feed(r, in + cut, strlen(in) - cut, collect, &o), 0);
                assert_int_equal(redactor_flush(r, collect, &o), 0);
                o.buf[o.len] = '\0';
                assert_string_equal(o.buf, "before [secret:TOKEN] after [secret:TOKEN][secret:TOKEN] end");
                r = redactor_free(r);
        }
        for (size_t chunk = 1; chunk < 20; chunk++)
                check_chunked(s, 1, in, strlen(in), chunk);
}

static void test_longer_than_chunk(void **state) {
        static char value[5000], in[12000];
        RedactSecret s[] = { { "BIG", value, sizeof(value) } };
        Redactor *r = NULL;
        static Out o;

        (void) state;
        for (size_t i = 0; i < sizeof(value); i++)
                value[i] = (char) ('a' + i * 7 % 26);
        memset(in, '.', sizeof(in));
        memcpy(in + 3000, value, sizeof(value));
        check_chunked(s, 1, in, sizeof(in), 1000);
        check_chunked(s, 1, in, sizeof(in), 4999);
        /* A prefix of the value then something else: all of it comes out, none is lost. */
        o.len = 0;
        assert_int_equal(redactor_new(s, 1, &r), 0);
        assert_int_equal(redactor_feed(r, value, 4000, collect, &o), 0);
        assert_int_equal(o.len, 0);
        assert_int_equal(redactor_held(r), 4000);
        assert_int_equal(redactor_feed(r, "!", 1, collect, &o), 0);
        assert_int_equal(o.len, 4001);
        assert_memory_equal(o.buf, value, 4000);
        redactor_free(r);
}

static void test_overlaps(void **state) {
        const RedactSecret s[] = {
                { "A", "aaab", 4 },     /* self-overlapping prefix: KMP must fall back */
                { "B", "abcd", 4 },
                { "C", "bc", 2 },
                { "D", "xyzxyz", 6 },
        };
        const char *ins[] = {
                "aaaab", "aaaaaab aab", "abcd", "xabcdy", "bc", "xyzxyzxyz", "xyzxy", "aaa", "",
                "aaabcd", "zzxyzxyzxyzxyzz",
        };

        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(ins); i++)
                for (size_t chunk = 1; chunk <= 8; chunk++)
                        check_chunked(s, ELEMENTSOF(s), ins[i], strlen(ins[i]), chunk);
}

static void test_no_secrets_and_errors(void **state) {
        const RedactSecret empty[] = { { "E", "", 0 } };
        Redactor *r = NULL;
        static Out o;

        (void) state;
        assert_int_equal(redactor_new(empty, 1, &r), -EINVAL);
        assert_int_equal(redactor_new(NULL, 0, &r), 0);
        o.len = 0;
        assert_int_equal(redactor_feed(r, "abc", 3, collect, &o), 0);
        assert_int_equal(o.len, 3);
        assert_int_equal(redactor_held(r), 0);
        redactor_free(r);
}

static void test_random(void **state) {
        static char in[4096];
        const RedactSecret s[] = { { "X", "abab", 4 }, { "Y", "ba", 2 }, { "Z", "aabba", 5 }, { "W", "b", 1 } };

        (void) state;
        srand(21);
        for (int round = 0; round < 2000; round++) {
                size_t len = (size_t) rand() % sizeof(in);

                for (size_t i = 0; i < len; i++)
                        in[i] = "abc"[rand() % 3];
                check_chunked(s, 1 + (size_t) round % ELEMENTSOF(s), in, len, 1 + (size_t) rand() % 64);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_split_everywhere),
                cmocka_unit_test(test_longer_than_chunk),
                cmocka_unit_test(test_overlaps),
                cmocka_unit_test(test_no_secrets_and_errors),
                cmocka_unit_test(test_random),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
