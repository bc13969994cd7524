/* Unit tests for broker/boxsync.c (sandbox_sync's tar): what goes in, what
 * is left out by name, symlinks kept as symlinks (a link out of localPath
 * is never followed), one file alone, the errors; and tail_keep
 * (common/array.h), which keeps a command's last output bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <archive.h>
#include <errno.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../broker/boxsync.h"
#include "array.h"
#include "macro.h"

static char root[] = "/tmp/sbx-unit-boxsync-XXXXXX";

static void put(const char *rel, const char *content) {
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        f = fopen(path, "we");
        assert_non_null(f);
        fputs(content, f);
        fclose(f);
}

static void dir(const char *rel) {
        char path[512];

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        assert_int_equal(mkdir(path, 0755), 0);
}

/* The tar's entries as "path" or "path -> target", one a line, in order. */
static char *listing(int fd) {
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        archive_read_support_format_tar(a);
        assert_int_equal(archive_read_open_fd(a, fd, 10240), ARCHIVE_OK);
        while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
                if (archive_entry_symlink(e))
                        fprintf(f, "%s -> %s\n", archive_entry_pathname(e), archive_entry_symlink(e));
                else
                        fprintf(f, "%s %o\n", archive_entry_pathname(e), (unsigned) archive_entry_perm(e));
        }
        archive_read_free(a);
        fclose(f);
        return out;
}

static int has(const char *text, const char *line) {
        return strstr(text, line) != NULL;
}

static void test_tree(void **state) {
        char err[600] = "";
        BoxSyncTar t;
        char *l;

        assert_non_null(mkdtemp(root));
        dir("src");
        dir("node_modules");
        dir("src/.git");
        dir("dist");
        put("a.txt", "alpha\n");
        put("src/b.txt", "beta\n");
        put("node_modules/x", "no\n");
        put("src/.git/config", "no\n");
        put("dist/out.js", "no\n");
        {
                char path[512];

                snprintf(path, sizeof(path), "%s/src/evil", root);
                assert_int_equal(symlink("/etc/passwd", path), 0);
                snprintf(path, sizeof(path), "%s/fifo", root);
                assert_int_equal(mkfifo(path, 0644), 0);
        }
        assert_int_equal(box_sync_tar(AT_FDCWD, root, &t, err, sizeof(err)), 0);
        assert_int_equal(t.entries, 4);         /* a.txt src src/b.txt src/evil */
        assert_int_equal(t.excluded, 3);
        assert_int_equal(t.special, 1);
        l = listing(t.fd);
        assert_true(has(l, "a.txt 644\n"));
        assert_true(has(l, "src/b.txt 644\n"));
        assert_true(has(l, "src/evil -> /etc/passwd\n"));
        assert_false(has(l, "node_modules"));
        assert_false(has(l, "root:"));          /* the link's target was never read */
        free(l);
        assert_true(fcntl(t.fd, F_GET_SEALS) & F_SEAL_WRITE);
        close(t.fd);
}

static void test_one_file_and_errors(void **state) {
        char err[600] = "", path[512];
        BoxSyncTar t;
        char *l;

        snprintf(path, sizeof(path), "%s/src/b.txt", root);
        assert_int_equal(box_sync_tar(AT_FDCWD, path, &t, err, sizeof(err)), 0);
        assert_int_equal(t.entries, 1);
        l = listing(t.fd);
        assert_string_equal(l, "b.txt 644\n");
        free(l);
        close(t.fd);
        snprintf(path, sizeof(path), "%s/none", root);
        assert_int_equal(box_sync_tar(AT_FDCWD, path, &t, err, sizeof(err)), -ENOENT);
        assert_non_null(strstr(err, "localPath: cannot open"));
        snprintf(path, sizeof(path), "%s/fifo", root);
        assert_int_equal(box_sync_tar(AT_FDCWD, path, &t, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "neither a directory nor a regular file"));
        snprintf(path, sizeof(path), "rm -rf %s", root);
        assert_int_equal(system(path), 0);
}

static void test_tail_keep(void **state) {
        char buf[8];
        size_t n = 0;

        tail_keep(buf, &n, sizeof(buf), "abc", 3);
        assert_int_equal(n, 3);
        tail_keep(buf, &n, sizeof(buf), "defgh", 5);
        assert_memory_equal(buf, "abcdefgh", 8);
        tail_keep(buf, &n, sizeof(buf), "ij", 2);
        assert_int_equal(n, 8);
        assert_memory_equal(buf, "cdefghij", 8);
        tail_keep(buf, &n, sizeof(buf), "0123456789", 10);
        assert_memory_equal(buf, "23456789", 8);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tree),
                cmocka_unit_test(test_one_file_and_errors),
                cmocka_unit_test(test_tail_keep),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
