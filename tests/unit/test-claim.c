/* Unit tests for the lifecycle set's pieces without a sandbox: the head and
 * tail cut of execute_command output (supervisor/data/capture.c), claim path
 * normalization (supervisor/data/claimfs.c: claim_path) and base64
 * (common/base64.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "data/capture.h"
#include "data/claimfs.h"
#include "macro.h"
#include "sbx-limits.h"

#define EURO "\xe2\x82\xac"

static char *result(OutputCapture *c, size_t *len, bool *cut) {
        char *r = NULL;

        assert_int_equal(output_capture_result(c, &r, len, cut), 0);
        return r;
}

static void test_capture_short(void **state) {
        OutputCapture c;
        size_t len;
        bool cut;
        char *out;

        output_capture_init(&c, 128);
        assert_int_equal(output_capture_feed(&c, "hello ", 6), 0);
        assert_int_equal(output_capture_feed(&c, EURO "\n", 4), 0);
        out = result(&c, &len, &cut);
        assert_false(cut);
        assert_int_equal(c.total_chars, 8);
        assert_int_equal(len, 10);
        assert_memory_equal(out, "hello " EURO "\n", 10);
        free(out);
        output_capture_done(&c);
}

/* Fed a byte at a time or in big pieces, the cut is the same, at most max characters. */
static void test_capture_cut(void **state) {
        for (int way = 0; way < 2; way++) {
                OutputCapture c;
                size_t len, n = 100000;
                char *in = malloc(n), *out;
                bool cut;
                unsigned long long cutn;
                int k;

                for (size_t i = 0; i < n; i++)
                        in[i] = (char) ('a' + i % 26);
                output_capture_init(&c, 200);
                for (size_t i = 0; i < n; i += way ? 7919 : 1)
                        assert_int_equal(output_capture_feed(&c, in + i, way ? MIN((size_t) 7919, n - i) : 1), 0);
                out = result(&c, &len, &cut);
                assert_true(cut);
                assert_true(len <= 200);
                assert_int_equal(c.total_chars, n);
                /* head: the first characters; tail: the last ones; the marker counts what is between */
                assert_memory_equal(out, in, 10);
                assert_memory_equal(out + len - 10, in + n - 10, 10);
                {
                        char *text = strndup(out, len);
                        const char *from = strstr(text, "\n[... "), *to = strstr(text, "...]\n");

                        assert_non_null(from);
                        assert_non_null(to);
                        k = sscanf(from + 6, "%llu", &cutn);
                        assert_int_equal(k, 1);
                        assert_int_equal(len - (size_t) (to + 5 - from) + cutn, n);
                        free(text);
                }
                free(out);
                free(in);
                output_capture_done(&c);
        }
}

/* A cut never splits a character. */
static void test_capture_utf8(void **state) {
        OutputCapture c;
        size_t len;
        bool cut;
        char *out;

        output_capture_init(&c, 128);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(output_capture_feed(&c, EURO, 3), 0);
        out = result(&c, &len, &cut);
        assert_true(cut);
        assert_int_equal(c.total_chars, 1000);
        assert_memory_equal(out, EURO, 3);
        assert_memory_equal(out + len - 3, EURO, 3);
        free(out);
        output_capture_done(&c);
}

static void test_claim_path(void **state) {
        char out[SBX_PATH_MAX + 1], err[300];

        assert_int_equal(claim_path("a/b", out, err, sizeof(err)), 0);
        assert_string_equal(out, "workspace/a/b");
        assert_int_equal(claim_path("/tmp/./x//y", out, err, sizeof(err)), 0);
        assert_string_equal(out, "tmp/x/y");
        assert_int_equal(claim_path("../etc/passwd", out, err, sizeof(err)), 0);
        assert_string_equal(out, "etc/passwd");
        assert_int_equal(claim_path("/", out, err, sizeof(err)), 0);
        assert_string_equal(out, "");
        assert_int_equal(claim_path("../../x", out, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "climbs out"));
        assert_int_equal(claim_path("/proc/1/root", out, err, sizeof(err)), -EINVAL);
        assert_int_equal(claim_path("/sys", out, err, sizeof(err)), -EINVAL);
        assert_int_equal(claim_path("/dev/../dev/mem", out, err, sizeof(err)), -EINVAL);
        assert_int_equal(claim_path("/devices", out, err, sizeof(err)), 0);
        assert_int_equal(claim_path("", out, err, sizeof(err)), -EINVAL);
}

static void test_base64(void **state) {
        const uint8_t in[] = { 0, 1, 2, 253, 254, 255, 'x' };
        char enc[16];
        uint8_t dec[16];
        size_t at = 0;

        for (size_t n = 0; n <= sizeof(in); n++) {
                size_t m = base64_encode(in, n, enc);
                assert_int_equal(m, 4 * ((n + 2) / 3));
                assert_int_equal(base64_decoded_size(enc, m), (int64_t) n);
                assert_int_equal(base64_decode(enc, m, dec, &at), (int64_t) n);
                assert_memory_equal(dec, in, n);
        }
        assert_int_equal(base64_decode("QUJD", 4, dec, &at), 3);
        assert_memory_equal(dec, "ABC", 3);
        assert_int_equal(base64_decoded_size("QUJ", 3), -EINVAL);
        assert_int_equal(base64_decode("QU*D", 4, dec, &at), -EINVAL);
        assert_int_equal(at, 2);
        assert_int_equal(base64_decode("Q=JD", 4, dec, &at), -EINVAL);
        assert_int_equal(base64_decode("QQ==QUJD", 8, dec, &at), -EINVAL);
        assert_int_equal(base64_decode("QUJ\n", 4, dec, &at), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_capture_short),
                cmocka_unit_test(test_capture_cut),
                cmocka_unit_test(test_capture_utf8),
                cmocka_unit_test(test_claim_path),
                cmocka_unit_test(test_base64),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
