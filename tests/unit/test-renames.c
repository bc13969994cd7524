/* Unit tests for data/renames.c: the rename check of a publication, linear
 * in the files involved. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/renames.h"
#include "macro.h"

/* The deleted files as the fake source holds them: path i has contents[i]
 * (NULL: it cannot be read). */
typedef struct FakeTree {
        char **paths;
        char **contents;
        size_t n;
} FakeTree;

static int fake_read(void *userdata, const char *path, char **ret, size_t *ret_len) {
        FakeTree *t = userdata;

        for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->paths[i], path) == 0) {
                        if (!t->contents[i])
                                return -EACCES;
                        *ret = strdup(t->contents[i]);
                        *ret_len = strlen(t->contents[i]);
                        return *ret ? 0 : -ENOMEM;
                }
        return -ENOENT;
}

static void test_first_added_wins(void **state) {
        char *paths[] = { (char *) "a", (char *) "b", (char *) "c", (char *) "gone" };
        char *contents[] = { (char *) "x\n", (char *) "yy\n", (char *) "x\n", NULL };
        FakeTree t = { paths, contents, 4 };
        const char *found = NULL;
        Renames r;

        renames_init(&r, fake_read, &t);
        for (size_t i = 0; i < t.n; i++)
                assert_int_equal(renames_add(&r, paths[i], contents[i] ? strlen(contents[i]) : 2), 0);
        assert_int_equal(renames_find(&r, "x\n", 2, &found), 1);
        assert_string_equal(found, "a");
        assert_int_equal(renames_find(&r, "yy\n", 3, &found), 1);
        assert_string_equal(found, "b");
        /* Same size as a, c and the unreadable one, other content. */
        assert_int_equal(renames_find(&r, "z\n", 2, &found), 0);
        /* No deleted file of that size: nothing is read. */
        uint64_t reads = r.reads;
        assert_int_equal(renames_find(&r, "long text\n", 10, &found), 0);
        assert_int_equal(r.reads, reads);
        renames_done(&r);
}

/* A deleted file that is not what it was listed as (another size now) is no rename. */
static void test_changed_size(void **state) {
        char *paths[] = { (char *) "a" };
        char *contents[] = { (char *) "abc\n" };
        FakeTree t = { paths, contents, 1 };
        const char *found = NULL;
        Renames r;

        renames_init(&r, fake_read, &t);
        assert_int_equal(renames_add(&r, "a", 2), 0);
        assert_int_equal(renames_find(&r, "ab", 2, &found), 0);
        renames_done(&r);
}

/* 3,000 deleted and 3,000 created files, all of one size (the attack of issue
 * 15 that held sbxd for 94 s): every deleted file is read once to hash it,
 * and once more for each new file that matches it; nothing is read per pair. */
static void test_linear(void **state) {
        const size_t n = 3000;
        FakeTree t = { calloc(n, sizeof(char *)), calloc(n, sizeof(char *)), n };
        size_t matched = 0;
        Renames r;

        assert_non_null(t.paths);
        assert_non_null(t.contents);
        renames_init(&r, fake_read, &t);
        for (size_t i = 0; i < n; i++) {
                assert_true(asprintf(&t.paths[i], "old/%zu", i) > 0);
                assert_true(asprintf(&t.contents[i], "content %06zu\n", i) > 0);
                assert_int_equal(renames_add(&r, t.paths[i], strlen(t.contents[i])), 0);
        }
        for (size_t i = 0; i < n; i++) {
                char text[32];
                const char *found = NULL;
                int k;

                /* Every other new file is a renamed one; the rest have new content. */
                snprintf(text, sizeof(text), "content %06zu\n", i % 2 ? i : n + i);
                k = renames_find(&r, text, strlen(text), &found);
                assert_true(k >= 0);
                if (k > 0) {
                        assert_string_equal(found, t.paths[i]);
                        matched++;
                }
        }
        assert_int_equal(matched, n / 2);
        assert_int_equal(r.reads, n + matched);
        renames_done(&r);
        for (size_t i = 0; i < n; i++) {
                free(t.paths[i]);
                free(t.contents[i]);
        }
        free(t.paths);
        free(t.contents);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_first_added_wins),
                cmocka_unit_test(test_changed_size),
                cmocka_unit_test(test_linear),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
