/* Unit tests for broker/digest.c: every parser against the fixtures of real
 * runs in tests/fixtures/digest (gen.sh made them), a failing and a passing
 * run each, and the bounds on hostile output. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/digest.h"
#include "macro.h"
#include "sbx-limits.h"

#define FIXTURES "tests/fixtures/digest/"

static char *slurp(const char *name, const char *ext, size_t *ret_len) {
        char path[256];
        FILE *f;
        char *buf;
        long n;

        snprintf(path, sizeof(path), FIXTURES "%s.%s", name, ext);
        f = fopen(path, "re");
        if (!f)
                fail_msg("missing fixture %s", path);
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        rewind(f);
        buf = malloc((size_t) n + 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t) n, f), (size_t) n);
        buf[n] = '\0';
        fclose(f);
        *ret_len = (size_t) n;
        return buf;
}

typedef struct Expect {
        const char *fixture, *kind, *parser;
        bool ok;
        unsigned failures;
        const char *name;       /* of the first failure */
        const char *message;    /* a part of its message */
        const char *file;
        long line;
} Expect;

#define PASS(fixture, kind, parser) { fixture, kind, parser, true, 0, NULL, NULL, NULL, 0 }

static const Expect expects[] = {
        { "node-spec-fail", "node-test", "node-test-spec", false, 1, "rejects expired tokens", "expected 401 but got 200", "t.test.mjs", 5 },
        PASS("node-spec-pass", "node-test", "node-test-spec"),
        { "node-tap-fail", "node-test", "node-test-tap", false, 1, "rejects expired tokens", "expected 401 but got 200", "/project/t.test.mjs", 5 },
        PASS("node-tap-pass", "node-test", "node-test-tap"),
        { "tap-fail", "tap", "tap", false, 1, "two is three", NULL, NULL, 0 },
        PASS("tap-pass", "tap", "tap"),
        { "pytest-fail", "pytest", "pytest", false, 2, "test_calc.py::test_add", "assert 0 == 4", "test_calc.py", 5 },
        PASS("pytest-pass", "pytest", "pytest"),
        { "go-fail", "go-test", "go-test", false, 1, "TestAdd", "Add(2, 2) = 4, want 5", "calc_test.go", 7 },
        PASS("go-pass", "go-test", "go-test"),
        { "go-json-fail", "go-test", "go-test-json", false, 1, "TestAdd", "Add(2, 2) = 4, want 5", "calc_test.go", 7 },
        PASS("go-json-pass", "go-test", "go-test-json"),
        { "cargo-fail", "cargo-test", "cargo-test", false, 1, "tests::adds", "assertion failed", "src/lib.rs", 6 },
        PASS("cargo-pass", "cargo-test", "cargo-test"),
        { "jest-fail", "jest", "jest", false, 1, "adds 2 + 2 to equal 5", "expect(received).toBe(expected)", "sum.test.js", 3 },
        PASS("jest-pass", "jest", "jest"),
        { "vitest-fail", "vitest", "vitest", false, 1, "adds 2 + 2 to equal 5", "expected 4 to be 5", "sum.test.mjs", 4 },
        PASS("vitest-pass", "vitest", "vitest"),
        { "tsc-fail", "tsc", "tsc", false, 2, "TS2322", "Type 'string' is not assignable", "a.ts", 1 },
        PASS("tsc-pass", "tsc", "tsc"),
        { "eslint-fail", "eslint", "eslint", false, 2, "no-unused-vars", "'unused' is assigned a value", "/project/app.js", 1 },
        PASS("eslint-pass", "eslint", "eslint"),
        { "gcc-fail", "gcc", "gcc", false, 2, "main.c:4", "undeclared", "main.c", 4 },
        PASS("gcc-pass", "gcc", "gcc"),
        { "clang-fail", "gcc", "gcc", false, 2, "main.c:4", "undeclared identifier 'missing'", "main.c", 4 },
        PASS("clang-pass", "gcc", "gcc"),
        { "make-fail", "make", "make", false, 3, "main.c:4", "undeclared", "main.c", 4 },
        PASS("make-pass", "make", "make"),
        { "generic-fail", "generic", "generic", false, 2, "stderr line 1", "Error: record 2 has no id", NULL, 0 },
        PASS("generic-pass", "generic", "generic"),
        { "junit-fail", "junit", "junit-xml", false, 2, "test_calc.test_add", "assert 0 == 4", "test_calc.py", 5 },
        PASS("junit-pass", "junit", "junit-xml"),
};

static json_t *digest_of(const char *fixture) {
        size_t out_len, err_len, cmd_len, exit_len;
        char *out = slurp(fixture, "out", &out_len), *err = slurp(fixture, "err", &err_len);
        char *cmd = slurp(fixture, "cmd", &cmd_len), *status = slurp(fixture, "exit", &exit_len);
        json_t *d = digest_make(cmd, out, out_len, err, err_len, atoi(status) == 0);

        free(out);
        free(err);
        free(cmd);
        free(status);
        assert_non_null(d);
        return d;
}

static void test_fixtures(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(expects); i++) {
                const Expect *e = &expects[i];
                json_t *d = digest_of(e->fixture), *failures = json_object_get(d, "failures"), *f;
                char *dump = json_dumps(d, JSON_COMPACT);

                print_message("%s: %s\n", e->fixture, dump);
                assert_string_equal(json_string_value(json_object_get(d, "kind")), e->kind);
                assert_string_equal(json_string_value(json_object_get(d, "parser")), e->parser);
                assert_int_equal(json_is_true(json_object_get(d, "ok")), e->ok);
                assert_int_equal(json_integer_value(json_object_get(d, "failureCount")), e->failures);
                assert_true(strlen(json_string_value(json_object_get(d, "summary"))) > 0);
                if (e->failures > 0) {
                        f = json_array_get(failures, 0);
                        assert_string_equal(json_string_value(json_object_get(f, "name")), e->name);
                        if (e->message && !strstr(json_string_value(json_object_get(f, "message")), e->message))
                                fail_msg("%s: message '%s' lacks '%s'", e->fixture,
                                         json_string_value(json_object_get(f, "message")), e->message);
                        if (e->file) {
                                assert_string_equal(json_string_value(json_object_get(f, "file")), e->file);
                                assert_int_equal(json_integer_value(json_object_get(f, "line")), e->line);
                        }
                }
                free(dump);
                json_decref(d);
        }
}

/* Output of any size and shape: a bounded digest, never a read past the end. */
static void test_bounds(void **state) {
        size_t n = 4u << 20;
        char *big = malloc(n);
        json_t *d;

        assert_non_null(big);
        for (size_t i = 0; i < n; i++)
                big[i] = "not ok 1 - x\n--- FAIL: T\nmain.c:1:1: error: e\n"[i % 45];
        d = digest_make("sh", big, n, big, n, false);
        assert_non_null(d);
        assert_true(json_array_size(json_object_get(d, "failures")) <= SBX_DIGEST_MAX_FAILURES);
        {
                char *dump = json_dumps(d, JSON_COMPACT);
                assert_true(strlen(dump) < SBX_DIGEST_MAX_FAILURES * 3 * SBX_DIGEST_FIELD_MAX * 2);
                free(dump);
        }
        json_decref(d);
        /* No newline at all, and a lone '\r', and an empty output. */
        memset(big, 'a', n);
        d = digest_make(NULL, big, n, "\r", 1, true);
        assert_non_null(d);
        json_decref(d);
        d = digest_make("", "", 0, "", 0, true);
        assert_non_null(d);
        assert_true(json_is_true(json_object_get(d, "ok")));
        json_decref(d);
        free(big);
}

/* JUnit XML of a hostile sandbox: an external entity is not read, nested
 * entities do not blow up, a cut report keeps the cases before the cut. */
static void test_junit_hostile(void **state) {
        static const char external[] =
                "<?xml version=\"1.0\"?><!DOCTYPE t [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
                "<testsuite><testcase classname=\"c\" name=\"n\"><failure message=\"m\">&x;</failure></testcase></testsuite>";
        static const char cut[] = "<testsuites><testsuite><testcase name=\"a\"><failure message=\"boom\"/></testcase>"
                                  "<testcase name=\"b\"/><testcase name=";
        char bomb[4096] = "<?xml version=\"1.0\"?><!DOCTYPE t [<!ENTITY e0 \"xxxxxxxxxx\">";
        json_t *d;
        char *dump;

        d = digest_make("sh", external, sizeof(external) - 1, "", 0, false);
        assert_non_null(d);
        dump = json_dumps(d, JSON_COMPACT);
        assert_string_equal(json_string_value(json_object_get(d, "parser")), "junit-xml");
        assert_null(strstr(dump, "root:"));
        free(dump);
        json_decref(d);
        for (int i = 1; i < 10; i++)
                snprintf(bomb + strlen(bomb), sizeof(bomb) - strlen(bomb),
                         "<!ENTITY e%d \"&e%d;&e%d;&e%d;&e%d;&e%d;&e%d;&e%d;&e%d;&e%d;&e%d;\">", i, i - 1, i - 1, i - 1,
                         i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        strcat(bomb, "]><testsuite><testcase name=\"t\"><failure>&e9;</failure></testcase></testsuite>");
        d = digest_make("sh", bomb, strlen(bomb), "", 0, false);
        assert_non_null(d);
        dump = json_dumps(d, JSON_COMPACT);
        assert_true(strlen(dump) < 4 * SBX_DIGEST_FIELD_MAX * SBX_DIGEST_MAX_FAILURES);
        free(dump);
        json_decref(d);
        d = digest_make("sh", cut, sizeof(cut) - 1, "", 0, false);
        assert_non_null(d);
        assert_string_equal(json_string_value(json_object_get(d, "parser")), "junit-xml");
        assert_int_equal(json_integer_value(json_object_get(d, "failureCount")), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(d, "failures"), 0),
                                                              "message")), "boom");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "counts"), "passed")), 1);
        json_decref(d);
}

/* Report files the command named: the cases of a read one count, a missing
 * one and one that is not JUnit XML are said so, a cut one keeps its cases
 * before the cut and says it was cut. */
static void test_junit_reports(void **state) {
        static const char report[] = "<?xml version=\"1.0\"?><testsuites><testsuite name=\"pytest\"><testcase "
                                     "classname=\"t\" name=\"a\"><failure message=\"boom\">t.py:7: boom</failure>"
                                     "</testcase><testcase classname=\"t\" name=\"b\"/></testsuite></testsuites>";
        const DigestReport reports[] = {
                { .path = "r.xml", .found = true, .data = report, .len = sizeof(report) - 1, .size = sizeof(report) - 1 },
                { .path = "gone.xml", .error = "no such file" },
                { .path = "p.xml", .found = true, .data = "not xml", .len = 7, .size = 7 },
                { .path = "cut.xml", .found = true, .data = report, .len = 180, .size = sizeof(report) - 1,
                  .truncated = true },
        };
        json_t *d = digest_make_reports("python python3 -m pytest --junitxml=r.xml", "", 0, "", 0, false, reports,
                                        ELEMENTSOF(reports));
        json_t *f, *rs;

        assert_non_null(d);
        assert_string_equal(json_string_value(json_object_get(d, "parser")), "junit-xml");
        f = json_array_get(json_object_get(d, "failures"), 0);
        assert_string_equal(json_string_value(json_object_get(f, "name")), "t.a");
        assert_string_equal(json_string_value(json_object_get(f, "file")), "t.py");
        assert_int_equal(json_integer_value(json_object_get(f, "line")), 7);
        /* r.xml's two cases and cut.xml's first: the second is past its cut */
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "counts"), "failed")), 2);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "counts"), "passed")), 1);
        rs = json_object_get(d, "reports");
        assert_int_equal(json_array_size(rs), 4);
        assert_true(json_is_true(json_object_get(json_array_get(rs, 0), "read")));
        assert_null(json_object_get(json_array_get(rs, 0), "error"));
        assert_true(json_is_false(json_object_get(json_array_get(rs, 1), "read")));
        assert_string_equal(json_string_value(json_object_get(json_array_get(rs, 1), "error")), "no such file");
        assert_string_equal(json_string_value(json_object_get(json_array_get(rs, 2), "error")), "not a JUnit XML report");
        assert_true(json_is_true(json_object_get(json_array_get(rs, 3), "read")));
        assert_true(json_is_true(json_object_get(json_array_get(rs, 3), "truncated")));
        json_decref(d);
        /* None read: another parser's digest, which still says what became of the files. */
        d = digest_make_reports("sh", "error: x\n", 9, "", 0, false, reports + 1, 1);
        assert_string_equal(json_string_value(json_object_get(d, "parser")), "generic");
        assert_int_equal(json_array_size(json_object_get(d, "reports")), 1);
        json_decref(d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_junit_reports),
                cmocka_unit_test(test_fixtures),
                cmocka_unit_test(test_bounds),
                cmocka_unit_test(test_junit_hostile),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
