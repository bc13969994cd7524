/* Unit tests for common/fd-util.c's readers and parsers, common/array.c and
 * proto/msg.c: numbers with and without size suffixes, whole files below a
 * directory fd (bounded, no symlinks), growable arrays and listings, a
 * message's type and body in one call, and field checks from data. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array.h"
#include "data/layer.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "msg.h"
#include "sbx-limits.h"

static void test_parse_u64(void **state) {
        uint64_t v = 7;

        assert_int_equal(parse_u64("0", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(parse_u64("18446744073709551615", &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(parse_u64("18446744073709551616", &v), -ERANGE);
        assert_int_equal(parse_u64("", &v), -EINVAL);
        assert_int_equal(parse_u64("-1", &v), -EINVAL);
        assert_int_equal(parse_u64("+1", &v), -EINVAL);
        assert_int_equal(parse_u64(" 1", &v), -EINVAL);
        assert_int_equal(parse_u64("1 ", &v), -EINVAL);
        assert_int_equal(parse_u64("12x", &v), -EINVAL);
}

static void test_parse_size(void **state) {
        uint64_t v = 0;

        assert_int_equal(parse_size("512", &v), 0);
        assert_int_equal(v, 512);
        assert_int_equal(parse_size("4K", &v), 0);
        assert_int_equal(v, 4096);
        assert_int_equal(parse_size("16m", &v), 0);
        assert_int_equal(v, 16u << 20);
        assert_int_equal(parse_size("2G", &v), 0);
        assert_true(v == 2ull << 30);
        assert_int_equal(parse_size("17179869184G", &v), -ERANGE);
        assert_int_equal(parse_size("K", &v), -EINVAL);
        assert_int_equal(parse_size("1T", &v), -EINVAL);
        assert_int_equal(parse_size("1KK", &v), -EINVAL);
        assert_int_equal(parse_size("-1K", &v), -EINVAL);
}

static int make_dir(char *tmpl) {
        int fd;

        assert_non_null(mkdtemp(tmpl));
        fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        return fd;
}

static void put(int dirfd, const char *name, const char *text, size_t len) {
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, text, len), 0);
        close(fd);
}

static void test_read_file(void **state) {
        char tmpl[] = "/tmp/sbx-test-common-XXXXXX";
        int dirfd = make_dir(tmpl);
        _cleanup_free_ char *big = malloc(100000);
        char *text = NULL;
        size_t len = 0;

        assert_non_null(big);
        memset(big, 'x', 100000);
        put(dirfd, "small", "hello\n", 6);
        put(dirfd, "big", big, 100000);
        assert_int_equal(mkdirat(dirfd, "dir", 0755), 0);
        assert_int_equal(symlinkat("small", dirfd, "link"), 0);

        assert_int_equal(read_file_at(dirfd, "small", &text), 0);
        assert_string_equal(text, "hello\n");
        free(text);
        assert_int_equal(read_file_bounded_at(dirfd, "big", 100000, &text, &len), 0);
        assert_int_equal(len, 100000);
        assert_int_equal(text[len], '\0');
        assert_memory_equal(text, big, len);
        free(text);
        assert_int_equal(read_file_bounded_at(dirfd, "big", 99999, &text, &len), -EFBIG);
        assert_int_equal(read_file_at(dirfd, "dir", &text), -EISDIR);
        assert_int_equal(read_file_at(dirfd, "link", &text), -ELOOP);
        assert_int_equal(read_file_at(dirfd, "../etc/passwd", &text), -EXDEV);
        assert_int_equal(read_file_at(dirfd, "missing", &text), -ENOENT);
        /* A file that says it has no size (procfs) still comes whole. */
        assert_int_equal(read_file_at(AT_FDCWD, "/proc/self/status", &text), -EXDEV);
        {
                int proc = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(proc >= 0);
                assert_int_equal(read_file_bounded_at(proc, "status", SBX_READ_FILE_MAX, &text, &len), 0);
                assert_true(len > 0 && strstr(text, "Pid:") != NULL);
                free(text);
                close(proc);
        }
        assert_int_equal(tree_remove_at(AT_FDCWD, tmpl), 0);
        close(dirfd);
}

static void test_array_reserve(void **state) {
        _cleanup_free_ int *v = NULL;
        size_t cap = 0;

        assert_int_equal(ARRAY_RESERVE(v, cap, 1), 0);
        assert_int_equal(cap, 16);
        for (int i = 0; i < 1000; i++) {
                assert_int_equal(ARRAY_RESERVE(v, cap, (size_t) i + 1), 0);
                v[i] = i;
        }
        assert_true(cap >= 1000 && cap < 2048);
        assert_int_equal(v[999], 999);
        assert_int_equal(array_reserve((void **) &v, &cap, SIZE_MAX / 2 + 2, 1), -E2BIG);
        assert_true(cap >= 1000 && cap < 2048);
}

typedef struct Rec {
        int number;
        char tag[16];
} Rec;

static void test_listing(void **state) {
        Listing *heap = listing_new(sizeof(Rec)), l = { .item_size = sizeof(Rec) };
        char name[32];

        assert_non_null(heap);
        assert_int_equal(listing_add(heap, &(Rec) { .number = 1 }, "one"), 0);
        listing_free(heap);
        listing_free(NULL);

        for (int i = 0; i < 100; i++) {
                Rec r = { .number = i };
                snprintf(r.tag, sizeof(r.tag), "t%d", i);
                snprintf(name, sizeof(name), "string %d", i);
                assert_int_equal(listing_add(&l, &r, name), 0);
        }
        assert_int_equal(l.n, 100);
        assert_int_equal(((Rec *) listing_item(&l, 57))->number, 57);
        assert_string_equal(((Rec *) listing_item(&l, 99))->tag, "t99");
        assert_string_equal(l.strings[42], "string 42");
        listing_done(&l);
        assert_int_equal(l.n, 0);
        assert_null(l.items);
        assert_int_equal(l.item_size, sizeof(Rec));
}

static void test_msg_init(void **state) {
        Sbx__Exec e = SBX__EXEC__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__GcReply gc = SBX__GC_REPLY__INIT;
        Sbx__Msg m;

        msg_init(&m, SBX__MSG_TYPE__MSG_CLIENT_EXEC, &e);
        assert_int_equal(m.type, SBX__MSG_TYPE__MSG_CLIENT_EXEC);
        assert_int_equal(m.body_case, SBX__MSG__BODY_EXEC);
        assert_ptr_equal(m.exec, &e);
        assert_ptr_equal(msg_body(&m), &e.base);
        assert_int_equal(msg_reply_set(&reply, SBX__REPLY__BODY_GC, &gc), 0);
        assert_int_equal(reply.body_case, SBX__REPLY__BODY_GC);
        assert_ptr_equal(reply.gc, &gc);
}

static const MsgCheck exec_checks[] = {
        MSG_CHECK_NAME("sandbox"),
        MSG_CHECK_LENGTH("cmd", 1, 8, 0),
        MSG_CHECK_RANGE("timeout_ms", "has_timeout", 1, 1000),
        {},
};

static void test_msg_check(void **state) {
        Sbx__Exec e = SBX__EXEC__INIT;
        char err[256], long_name[SBX_NAME_MAX + 2];

        memset(long_name, 'n', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        assert_true(msg_checks_valid(&sbx__exec__descriptor, exec_checks));
        e.sandbox = (char *) "s";
        e.cmd = (char *) "true";
        assert_int_equal(msg_check(&e.base, exec_checks, err, sizeof(err)), 0);
        e.timeout_ms = 5000; /* not set: not checked */
        assert_int_equal(msg_check(&e.base, exec_checks, err, sizeof(err)), 0);
        e.has_timeout = true;
        assert_int_equal(msg_check(&e.base, exec_checks, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "timeout_ms must be 1 to 1000");
        e.timeout_ms = 1000;
        e.cmd = (char *) "";
        assert_int_equal(msg_check(&e.base, exec_checks, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "cmd must be 1 to 8 bytes");
        e.cmd = (char *) "123456789";
        assert_int_equal(msg_check(&e.base, exec_checks, err, sizeof(err)), -EINVAL);
        e.cmd = (char *) "true";
        e.sandbox = long_name;
        assert_int_equal(msg_check(&e.base, exec_checks, err, sizeof(err)), -ENOENT);
        assert_string_equal(err, "no such sandbox (names are at most 64 bytes)");
}

/* At file scope: the value lists are compound literals of static storage. */
static const MsgCheck finalize[] = {
        MSG_CHECK_ONE_OF("action", "publish", "discard"),
        {},
};
static const MsgCheck three[] = {
        MSG_CHECK_ONE_OF("action", "a", "b", "c"),
        {},
};

static void test_msg_check_kinds(void **state) {
        static const MsgCheck stdin_len[] = {
                { .field = "data", .kind = MSG_CHECK_LENGTH, .max = 4, .label = "stdin", .err = -E2BIG },
                {},
        };
        static const MsgCheck wrong[][2] = {
                { MSG_CHECK_NAME("no_such_field"), {} },
                { MSG_CHECK_NAME("close"), {} },                        /* a bool */
                { MSG_CHECK_RANGE("data", NULL, 0, 1), {} },            /* bytes */
                { MSG_CHECK_RANGE("yield_ms", "sandbox", 0, 1), {} },   /* present is no bool */
        };
        Sbx__SessionFinalize f = SBX__SESSION_FINALIZE__INIT;
        Sbx__Stdin in = SBX__STDIN__INIT;
        char err[256];

        assert_int_equal(msg_check(&f.base, finalize, err, sizeof(err)), 0); /* "": the default */
        f.action = (char *) "discard";
        assert_int_equal(msg_check(&f.base, finalize, err, sizeof(err)), 0);
        f.action = (char *) "keep";
        assert_int_equal(msg_check(&f.base, finalize, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "action must be publish or discard, not 'keep'");
        assert_int_equal(msg_check(&f.base, three, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "action must be a, b or c, not 'keep'");
        in.data.len = 5;
        assert_int_equal(msg_check(&in.base, stdin_len, err, sizeof(err)), -E2BIG);
        assert_string_equal(err, "stdin must be at most 4 bytes");
        for (size_t i = 0; i < ELEMENTSOF(wrong); i++) {
                assert_false(msg_checks_valid(&sbx__stdin__descriptor, wrong[i]));
                assert_int_equal(msg_check(&in.base, wrong[i], err, sizeof(err)), -EINVAL);
        }
        assert_true(msg_checks_valid(&sbx__stdin__descriptor, stdin_len));
}

/* A flood of one message: SBX_LOG_BURST, then one per interval with the
 * count of those left out; after a quiet interval, a new burst. */
static void test_log_ratelimit(void **state) {
        const unsigned long long interval = SBX_LOG_INTERVAL_MS * 1000ull;
        LogRatelimit rl = {};
        unsigned logged = 0, left = 0, n;
        unsigned long long t = 1000000;

        for (unsigned i = 0; i < 100000; i++, t += 10)
                if (log_ratelimit_pass(&rl, t, &n)) {
                        logged++;
                        left += n;
                }
        /* 1 s of messages: the burst only. */
        assert_int_equal(logged, SBX_LOG_BURST);
        t = 1000000 + (SBX_LOG_BURST - 1) * 10 + interval; /* an interval after the last one logged, flooding on */
        assert_true(log_ratelimit_pass(&rl, t, &n));
        assert_int_equal(n, 100000 - SBX_LOG_BURST);
        assert_false(log_ratelimit_pass(&rl, t + 10, &n));
        /* Quiet for an interval: a new burst, the one left out counted in its first. */
        t += 10 + interval;
        for (unsigned i = 0; i < SBX_LOG_BURST; i++, t += 10) {
                assert_true(log_ratelimit_pass(&rl, t, &n));
                assert_int_equal(n, i == 0 ? 1 : 0);
        }
        assert_false(log_ratelimit_pass(&rl, t, &n));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_u64),
                cmocka_unit_test(test_parse_size),
                cmocka_unit_test(test_read_file),
                cmocka_unit_test(test_array_reserve),
                cmocka_unit_test(test_listing),
                cmocka_unit_test(test_msg_init),
                cmocka_unit_test(test_msg_check),
                cmocka_unit_test(test_msg_check_kinds),
                cmocka_unit_test(test_log_ratelimit),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
