/* Unit tests for common/fd-util.c's file reading and number parsing:
 * read_file_bounded_at(), read_file_at() and parse_u64(). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"

static char dir[64];
static int dir_fd = -EBADF;

static void put(const char *name, const char *content, size_t len) {
        int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, content, len), 0);
        close(fd);
}

static int rm_cb(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) st;
        (void) ftw;
        return type == FTW_DP ? rmdir(path) : unlink(path);
}

static int setup(void **state) {
        (void) state;
        (void) strcpy(dir, "/tmp/test-fd-util-XXXXXX");
        assert_non_null(mkdtemp(dir));
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dir_fd >= 0);
        return 0;
}

static int teardown(void **state) {
        (void) state;
        dir_fd = safe_close(dir_fd);
        assert_int_equal(nftw(dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS), 0);
        return 0;
}

static void test_read_whole_and_bounded(void **state) {
        _cleanup_free_ char *big = malloc(3 * 4096 + 5);
        char *text = NULL;
        size_t len = 0;

        (void) state;
        put("a", "hello\n", 6);
        assert_int_equal(read_file_bounded_at(dir_fd, "a", 6, &text, &len), 0);
        assert_string_equal(text, "hello\n");
        assert_int_equal(len, 6);
        free(text);
        assert_int_equal(read_file_bounded_at(dir_fd, "a", 5, &text, &len), -EFBIG);
        assert_int_equal(read_file_at(dir_fd, "a", &text), 0);
        assert_string_equal(text, "hello\n");
        free(text);

        put("empty", "", 0);
        assert_int_equal(read_file_bounded_at(dir_fd, "empty", 0, &text, &len), 0);
        assert_string_equal(text, "");
        assert_int_equal(len, 0);
        free(text);

        /* Bytes after a NUL count, and ret_len says how many. */
        put("nul", "a\0b", 3);
        assert_int_equal(read_file_bounded_at(dir_fd, "nul", 3, &text, &len), 0);
        assert_int_equal(len, 3);
        assert_memory_equal(text, "a\0b", 4);
        free(text);

        assert_non_null(big);
        memset(big, 'x', 3 * 4096 + 5);
        put("big", big, 3 * 4096 + 5);
        assert_int_equal(read_file_bounded_at(dir_fd, "big", 3 * 4096 + 5, &text, NULL), 0);
        assert_int_equal(strlen(text), 3 * 4096 + 5);
        free(text);
}

/* Files that report size 0 (proc, cgroup) are read until EOF, past the first
 * buffer, and the bound still holds. */
static void test_read_unsized(void **state) {
        int proc = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);   /* follows the link */
        struct stat st;
        char *text = NULL;
        size_t len = 0;

        (void) state;
        assert_true(proc >= 0);
        assert_int_equal(fstatat(proc, "smaps", &st, 0), 0);
        assert_int_equal(st.st_size, 0);
        assert_int_equal(read_file_bounded_at(proc, "smaps", SBX_READ_FILE_MAX, &text, &len), 0);
        assert_true(len > 4096);        /* some 20 lines per mapping: beyond the first buffer */
        assert_int_equal(strlen(text), len);
        assert_int_equal(text[len - 1], '\n');
        free(text);
        assert_int_equal(read_file_bounded_at(proc, "smaps", 100, &text, &len), -EFBIG);
        close(proc);
}

static void test_read_refuses(void **state) {
        char *text = NULL;
        int root;

        (void) state;
        put("a", "x", 1);
        assert_int_equal(symlinkat("a", dir_fd, "link"), 0);
        assert_int_equal(mkdirat(dir_fd, "sub", 0755), 0);
        assert_int_equal(mkfifoat(dir_fd, "fifo", 0644), 0);
        assert_int_equal(read_file_at(dir_fd, "link", &text), -ELOOP);
        assert_int_equal(read_file_at(dir_fd, "sub", &text), -EISDIR);
        assert_int_equal(read_file_at(dir_fd, "fifo", &text), -EISDIR);    /* and does not block */
        assert_int_equal(read_file_at(dir_fd, "../a", &text), -EXDEV);
        assert_int_equal(read_file_at(dir_fd, "/etc/hostname", &text), -EXDEV);
        assert_int_equal(read_file_at(dir_fd, "missing", &text), -ENOENT);
        /* Below dirfd, but not across a mount: /proc is one. */
        root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(root >= 0);
        assert_int_equal(read_file_at(root, "proc/self/stat", &text), -EXDEV);
        close(root);
        assert_null(text);
}

static void test_parse_u64(void **state) {
        uint64_t v = 7;

        (void) state;
        assert_int_equal(parse_u64("0", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(parse_u64("42", &v), 0);
        assert_int_equal(v, 42);
        assert_int_equal(parse_u64("18446744073709551615", &v), 0);
        assert_true(v == UINT64_MAX);
        v = 7;
        assert_int_equal(parse_u64("18446744073709551616", &v), -ERANGE);
        assert_int_equal(parse_u64("99999999999999999999", &v), -ERANGE);
        assert_int_equal(parse_u64("", &v), -EINVAL);
        assert_int_equal(parse_u64("-1", &v), -EINVAL);
        assert_int_equal(parse_u64("+1", &v), -EINVAL);
        assert_int_equal(parse_u64(" 1", &v), -EINVAL);
        assert_int_equal(parse_u64("1 ", &v), -EINVAL);
        assert_int_equal(parse_u64("1\n", &v), -EINVAL);
        assert_int_equal(parse_u64("12a", &v), -EINVAL);
        assert_int_equal(parse_u64("0x10", &v), -EINVAL);
        assert_int_equal(v, 7);         /* untouched on failure */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_read_whole_and_bounded, setup, teardown),
                cmocka_unit_test(test_read_unsized),
                cmocka_unit_test_setup_teardown(test_read_refuses, setup, teardown),
                cmocka_unit_test(test_parse_u64),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
