/* Unit tests for supervisor/data/indexcache.c: a kept index is found again under
 * its key, never under the key of a changed file, and the least recently used
 * entries go when either bound (entries, bytes of marks) would be exceeded. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "data/indexcache.h"

static void index_cache_freep(IndexCache **c) {
        index_cache_free(*c);
}

/* An index with n marks (they need not describe a file here), total_lines tagging it. */
static FileIndex make_index(size_t n, uint64_t tag) {
        FileIndex index = { .total_lines = tag, .n_marks = n };

        index.marks = n ? calloc(n, sizeof(FileIndexMark)) : NULL;
        assert_true(n == 0 || index.marks);
        return index;
}

static FileKey key_of(uint64_t ino) {
        struct stat st = { .st_ino = ino, .st_size = 100 };

        return file_key(&st, 1);
}

static void put(IndexCache *c, uint64_t ino, size_t marks) {
        FileKey key = key_of(ino);
        FileIndex index = make_index(marks, ino);
        const FileIndex *kept = NULL;

        assert_int_equal(index_cache_put(c, &key, &index, &kept), 0);
        assert_null(index.marks);
        assert_non_null(kept);
        assert_int_equal(kept->total_lines, ino);
        assert_int_equal(kept->n_marks, marks);
}

static bool has(IndexCache *c, uint64_t ino) {
        FileKey key = key_of(ino);
        const FileIndex *found = index_cache_get(c, &key);

        if (found)
                assert_int_equal(found->total_lines, ino);
        return found;
}

static void test_hit_and_replace(void **state) {
        _cleanup_(index_cache_freep) IndexCache *c = NULL;
        FileKey key = key_of(7);

        assert_int_equal(index_cache_new(0, 1024, &c), -EINVAL);
        assert_int_equal(index_cache_new(4, 1024, &c), 0);
        assert_null(index_cache_get(c, &key));
        put(c, 7, 3);
        assert_true(has(c, 7));
        assert_false(has(c, 8));
        /* The same key again: replaced, not duplicated. */
        put(c, 7, 5);
        assert_int_equal(index_cache_get(c, &key)->n_marks, 5);
        put(c, 8, 0);
        put(c, 9, 0);
        put(c, 10, 0);
        assert_true(has(c, 7) && has(c, 8) && has(c, 9) && has(c, 10));
        index_cache_free(NULL);
}

/* Every part of the key tells files apart: a file written to or touched
 * since gets another key. */
static void test_changed_file_misses(void **state) {
        _cleanup_(index_cache_freep) IndexCache *c = NULL;
        char path[] = "/tmp/test-indexcache.XXXXXX";
        _cleanup_close_ int fd = mkostemp(path, O_CLOEXEC);
        struct timespec times[2] = { { .tv_sec = 1000 }, { .tv_sec = 1000 } };
        FileIndex index = make_index(2, 1);
        const FileIndex *kept;
        FileKey key, other;
        struct stat st;

        assert_true(fd >= 0);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(write(fd, "a\n", 2), 2);
        assert_int_equal(index_cache_new(8, 1024, &c), 0);
        assert_int_equal(fstat(fd, &st), 0);
        key = file_key(&st, st.st_dev);
        assert_int_equal(index_cache_put(c, &key, &index, &kept), 0);
        assert_ptr_equal(index_cache_get(c, &key), kept);

        /* Appended to. */
        assert_int_equal(write(fd, "b\n", 2), 2);
        assert_int_equal(fstat(fd, &st), 0);
        other = file_key(&st, st.st_dev);
        assert_null(index_cache_get(c, &other));
        /* Its times set by hand. */
        assert_int_equal(futimens(fd, times), 0);
        assert_int_equal(fstat(fd, &st), 0);
        other = file_key(&st, st.st_dev);
        assert_null(index_cache_get(c, &other));

        /* Each field on its own. */
        other = key;
        other.dev++;
        assert_null(index_cache_get(c, &other));
        other = key;
        other.ino++;
        assert_null(index_cache_get(c, &other));
        other = key;
        other.size++;
        assert_null(index_cache_get(c, &other));
        other = key;
        other.mtim.tv_nsec ^= 1;
        assert_null(index_cache_get(c, &other));
        other = key;
        other.ctim.tv_sec++;
        assert_null(index_cache_get(c, &other));
        /* The same file seen by a live session is another entry (another scope). */
        other = key;
        other.scope = 1;
        assert_null(index_cache_get(c, &other));
        assert_ptr_equal(index_cache_get(c, &key), kept);
}

static void test_evict_entries(void **state) {
        _cleanup_(index_cache_freep) IndexCache *c = NULL;

        assert_int_equal(index_cache_new(3, 1 << 20, &c), 0);
        put(c, 1, 1);
        put(c, 2, 1);
        put(c, 3, 1);
        /* 1 is used again: 2 is now the least recently used. */
        assert_true(has(c, 1));
        put(c, 4, 1);
        assert_false(has(c, 2));
        assert_true(has(c, 1) && has(c, 3) && has(c, 4));
        put(c, 5, 1);
        assert_false(has(c, 1));
        assert_true(has(c, 3) && has(c, 4) && has(c, 5));
}

static void test_evict_bytes(void **state) {
        _cleanup_(index_cache_freep) IndexCache *c = NULL;
        size_t mark = sizeof(FileIndexMark);
        FileIndex big = make_index(11, 99);
        FileKey key = key_of(99);
        const FileIndex *kept = NULL;

        assert_int_equal(index_cache_new(100, 10 * mark, &c), 0);
        put(c, 1, 4);
        put(c, 2, 4);
        assert_true(has(c, 1));
        /* 4 + 4 + 4 > 10 marks: the least recently used (2) goes. */
        put(c, 3, 4);
        assert_false(has(c, 2));
        assert_true(has(c, 1) && has(c, 3));
        /* As many as it takes. */
        put(c, 4, 10);
        assert_false(has(c, 1) || has(c, 3));
        assert_true(has(c, 4));
        /* Indexes without marks cost nothing but a slot. */
        put(c, 5, 0);
        assert_true(has(c, 4) && has(c, 5));

        /* One index above the bound is not kept, and stays the caller's. */
        assert_int_equal(index_cache_put(c, &key, &big, &kept), -EFBIG);
        assert_null(kept);
        assert_non_null(big.marks);
        assert_true(has(c, 4) && has(c, 5));
        file_index_done(&big);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hit_and_replace),
                cmocka_unit_test(test_changed_file_misses),
                cmocka_unit_test(test_evict_entries),
                cmocka_unit_test(test_evict_bytes),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
