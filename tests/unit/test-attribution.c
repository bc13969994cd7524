/* Line attribution: ranges after updates by several owners, the storage
 * format and its strict parser, and unified diffs. Ranges are compared in
 * their serialized form ("start count owner\n" per range). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/attribution.h"
#include "macro.h"
#include "sbx-limits.h"

static void blame_donep(Blame *b) {
        blame_done(b);
}
#define _cleanup_blame_ _cleanup_(blame_donep)

static void assert_ranges(const Blame *b, const char *expected) {
        _cleanup_free_ char *s = NULL;
        size_t len;

        assert_int_equal(blame_serialize(b, &s, &len), 0);
        assert_int_equal(len, strlen(s));
        assert_string_equal(s, expected);
}

/* Replace *b by its update from old_text to new_text by owner. */
static void update(Blame *b, const char *old_text, const char *new_text, const char *owner) {
        Blame n = {};

        assert_int_equal(blame_update(b, old_text, strlen(old_text), new_text, strlen(new_text), owner, &n), 0);
        blame_done(b);
        *b = n;
}

static void test_new(void **state) {
        _cleanup_blame_ Blame b = {};
        char long_owner[130];

        assert_int_equal(blame_new("a\nb\nc\n", 6, "original", &b), 0);
        assert_ranges(&b, "1 3 original\n");
        blame_done(&b);
        assert_int_equal(blame_new("a\nb", 3, "original", &b), 0);
        assert_ranges(&b, "1 2 original\n");
        blame_done(&b);
        assert_int_equal(blame_new("a\r\nb\r\n\n", 7, "operation:1", &b), 0);
        assert_ranges(&b, "1 3 operation:1\n");
        blame_done(&b);
        assert_int_equal(blame_new("", 0, "original", &b), 0);
        assert_int_equal(b.n_ranges, 0);
        blame_done(&b);
        assert_int_equal(blame_new(NULL, 0, "original", &b), 0);
        assert_int_equal(b.n_ranges, 0);

        memset(long_owner, 'x', 129);
        long_owner[129] = '\0';
        assert_int_equal(blame_new("a\n", 2, long_owner, &b), -EINVAL);
        long_owner[128] = '\0';
        assert_int_equal(blame_new("a\n", 2, long_owner, &b), 0);
        blame_done(&b);
        assert_int_equal(blame_new("a\n", 2, "", &b), -EINVAL);
        assert_int_equal(blame_new("a\n", 2, "a\nb", &b), -EINVAL);
        assert_int_equal(blame_new("a\n", 2, NULL, &b), -EINVAL);
        blame_done(NULL);
}

static void test_update_basic(void **state) {
        _cleanup_blame_ Blame b = {};

        assert_int_equal(blame_new("one\ntwo\nthree\n", 14, "original", &b), 0);
        update(&b, "one\ntwo\nthree\n", "one\nTWO\nthree\nfour\n", "operation:7");
        assert_ranges(&b, "1 1 original\n2 1 operation:7\n3 1 original\n4 1 operation:7\n");
}

static void test_update_sequence(void **state) {
        static const char *const v[] = {
                "l1\nl2\nl3\nl4\nl5\n",
                "t\nl1\nl2\nl3\nl4\nl5\n",              /* B: insert at top */
                "t\nl1\nl2\nl3\nm\nl4\nl5\n",           /* C: insert in the middle */
                "t\nl1\nl2\nl3\nm\nl4\nl5\ne\n",        /* B: append */
                "t\nl2\nl3\nl4\nl5\ne\n",               /* A: delete l1 and m */
                "t\nl2\nl3\nL4\nl5\ne\n",               /* C: change l4 */
                "l2\nl3\nL4\nl5\ne\n",                  /* B: delete t */
                "l2\nl3\nL4\nl5\ne\nf\ng\n",            /* B: append after own line */
        };
        _cleanup_blame_ Blame b = {};

        assert_int_equal(blame_new(v[0], strlen(v[0]), "A", &b), 0);
        update(&b, v[0], v[1], "B");
        assert_ranges(&b, "1 1 B\n2 5 A\n");
        update(&b, v[1], v[2], "C");
        assert_ranges(&b, "1 1 B\n2 3 A\n5 1 C\n6 2 A\n");
        update(&b, v[2], v[3], "B");
        assert_ranges(&b, "1 1 B\n2 3 A\n5 1 C\n6 2 A\n8 1 B\n");
        update(&b, v[3], v[4], "A");
        assert_ranges(&b, "1 1 B\n2 4 A\n6 1 B\n");
        update(&b, v[4], v[5], "C");
        assert_ranges(&b, "1 1 B\n2 2 A\n4 1 C\n5 1 A\n6 1 B\n");
        update(&b, v[5], v[6], "B");
        assert_ranges(&b, "1 2 A\n3 1 C\n4 1 A\n5 1 B\n");
        update(&b, v[6], v[7], "B");
        assert_ranges(&b, "1 2 A\n3 1 C\n4 1 A\n5 3 B\n");
}

static void test_merge_adjacent(void **state) {
        _cleanup_blame_ Blame b = {};

        assert_int_equal(blame_new("a\nb\nc\n", 6, "A", &b), 0);
        update(&b, "a\nb\nc\n", "a\nB\nc\n", "B");
        assert_ranges(&b, "1 1 A\n2 1 B\n3 1 A\n");
        /* A takes the line back: one range again. */
        update(&b, "a\nB\nc\n", "a\nb2\nc\n", "A");
        assert_ranges(&b, "1 3 A\n");
        /* B changes the first line and inserts after it: one B range. */
        update(&b, "a\nb2\nc\n", "x\ny\nb2\nc\n", "B");
        assert_ranges(&b, "1 2 B\n3 2 A\n");
}

static void test_empty_and_refill(void **state) {
        _cleanup_blame_ Blame b = {};

        assert_int_equal(blame_new("a\nb\n", 4, "A", &b), 0);
        update(&b, "a\nb\n", "", "B");
        assert_int_equal(b.n_ranges, 0);
        assert_ranges(&b, "");
        update(&b, "", "", "C");
        assert_int_equal(b.n_ranges, 0);
        update(&b, "", "x\ny\n", "C");
        assert_ranges(&b, "1 2 C\n");
        update(&b, "x\ny\n", "x\ny\nz", "A");
        assert_ranges(&b, "1 2 C\n3 1 A\n");
}

static void test_crlf_one_line(void **state) {
        _cleanup_blame_ Blame b = {};

        assert_int_equal(blame_new("a\r\nb\r\nc\r\n", 9, "A", &b), 0);
        update(&b, "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n", "B");
        assert_ranges(&b, "1 1 A\n2 1 B\n3 1 A\n");
        /* Only the line ending of the last line changes. */
        update(&b, "a\r\nB\r\nc\r\n", "a\r\nB\r\nc\n", "C");
        assert_ranges(&b, "1 1 A\n2 1 B\n3 1 C\n");
}

static void test_crlf_conversion(void **state) {
        _cleanup_blame_ Blame b = {};

        assert_int_equal(blame_new("a\r\nb\r\nc\r\n", 9, "A", &b), 0);
        update(&b, "a\r\nb\r\nc\r\n", "a\nb\nc\n", "B");
        assert_ranges(&b, "1 3 B\n");
        update(&b, "a\nb\nc\n", "a\r\nb\r\nc\r\n", "C");
        assert_ranges(&b, "1 3 C\n");
}

static void test_final_newline(void **state) {
        _cleanup_blame_ Blame b = {};

        assert_int_equal(blame_new("a\nb", 3, "A", &b), 0);
        update(&b, "a\nb", "a\nb\n", "B");
        assert_ranges(&b, "1 1 A\n2 1 B\n");
        update(&b, "a\nb\n", "a\nb", "C");
        assert_ranges(&b, "1 1 A\n2 1 C\n");
        /* Appending to a text without final newline changes its last line. */
        update(&b, "a\nb", "a\nb\nc", "A");
        assert_ranges(&b, "1 3 A\n");
        blame_done(&b);

        /* Unchanged lines of a text without final newline keep their owner. */
        assert_int_equal(blame_new("a\nb\nc", 5, "A", &b), 0);
        update(&b, "a\nb\nc", "a\nX\nc", "B");
        assert_ranges(&b, "1 1 A\n2 1 B\n3 1 A\n");
        update(&b, "a\nX\nc", "new\na\nX\nc", "C");
        assert_ranges(&b, "1 1 C\n2 1 A\n3 1 B\n4 1 A\n");
}

static void test_identical(void **state) {
        static const char *const text = "a\nb\nc\nd";
        _cleanup_blame_ Blame b = {};

        assert_int_equal(blame_new(text, strlen(text), "A", &b), 0);
        update(&b, text, "a\nB\nc\nd", "B");
        update(&b, "a\nB\nc\nd", "a\nB\nc\nd", "C");
        assert_ranges(&b, "1 1 A\n2 1 B\n3 2 A\n");
}

static double now(void) {
        struct timespec ts;

        assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void test_large(void **state) {
        enum { LINES = 100000 };
        _cleanup_free_ char *old_text = malloc(LINES * 16), *new_text = NULL;
        _cleanup_blame_ Blame b = {};
        size_t len = 0;
        double t;

        assert_non_null(old_text);
        for (int i = 1; i <= LINES; i++)
                len += (size_t) sprintf(old_text + len, "line %d\n", i);
        new_text = strdup(old_text);
        assert_non_null(new_text);
        memcpy(strstr(new_text, "\nline 50000\n") + 1, "LINE", 4);

        assert_int_equal(blame_new(old_text, len, "original", &b), 0);
        t = now();
        update(&b, old_text, new_text, "operation:big");
        t = now() - t;
        print_message("100000-line update, one line changed: %.1f ms\n", t * 1000);
        assert_ranges(&b, "1 49999 original\n50000 1 operation:big\n50001 50000 original\n");
        assert_true(t < 2.0);
}

static void test_update_rejects(void **state) {
        _cleanup_blame_ Blame b = {}, n = {};
        BlameRange gap[] = {
                { .start_line = 1, .line_count = 1, .owner = (char *) "A" },
                { .start_line = 3, .line_count = 1, .owner = (char *) "B" },
        };
        Blame bad = { .ranges = gap, .n_ranges = 2 };

        assert_int_equal(blame_new("a\nb\n", 4, "A", &b), 0);
        /* The old attribution must tile the old text. */
        assert_int_equal(blame_update(&b, "a\n", 2, "a\n", 2, "B", &n), -EINVAL);
        assert_int_equal(blame_update(&b, "a\nb\nc", 5, "a\n", 2, "B", &n), -EINVAL);
        assert_int_equal(blame_update(&bad, "a\nb\nc\n", 6, "a\n", 2, "B", &n), -EINVAL);
        assert_int_equal(blame_update(&b, "a\nb\n", 4, "a\n", 2, "B\x7f", &n), -EINVAL);
        assert_int_equal(blame_update(&b, "a\nb\n", 4, NULL, 2, "B", &n), -EINVAL);
        assert_null(n.ranges);
        assert_int_equal(blame_update(&b, "a\nb\n", 4, NULL, 0, "B", &n), 0);
        assert_int_equal(n.n_ranges, 0);
}

/* Random edits over a small alphabet: every result tiles the new text and
 * its ranges name only owners that took part. */
static void test_random_updates(void **state) {
        static const char *const owners[] = { "A", "B", "C" };
        char old_text[256] = "", new_text[256];
        _cleanup_blame_ Blame b = {};
        unsigned seed = 12345;

        assert_int_equal(blame_new("", 0, "A", &b), 0);
        for (int round = 0; round < 2000; round++) {
                size_t n = 0, lines = 0;
                uint64_t total = 0;
                int nl = rand_r(&seed) % 20;

                for (int i = 0; i < nl; i++) {
                        new_text[n++] = (char) ('a' + rand_r(&seed) % 3);
                        if (rand_r(&seed) % 4 == 0)
                                new_text[n++] = '\r';
                        if (i + 1 < nl || rand_r(&seed) % 2)
                                new_text[n++] = '\n';
                        lines++;
                }
                new_text[n] = '\0';
                update(&b, old_text, new_text, owners[rand_r(&seed) % 3]);
                for (size_t i = 0; i < b.n_ranges; i++) {
                        assert_int_equal(b.ranges[i].start_line, total + 1);
                        total += b.ranges[i].line_count;
                        if (i > 0)
                                assert_string_not_equal(b.ranges[i].owner, b.ranges[i - 1].owner);
                }
                assert_int_equal(total, lines);
                memcpy(old_text, new_text, n + 1);
        }
}

/* blame_update must give what the diff of the whole texts gives. Each text
 * is attributed line by line to owners that alternate, so that any other
 * pairing of old and new lines would show. */
static void check_same_as_diff(const char *old_text, const char *new_text) {
        _cleanup_blame_ Blame old = {}, by_region = {}, by_diff = {};
        _cleanup_free_ char *rec = NULL, *a = NULL, *b = NULL;
        size_t rec_len = 0, a_len, b_len, lines = 0;
        FILE *f = open_memstream(&rec, &rec_len);

        assert_non_null(f);
        for (const char *p = old_text; *p; lines++) {
                const char *nl = strchr(p, '\n');
                fprintf(f, "%zu 1 o%zu\n", lines + 1, lines % 7);
                p = nl ? nl + 1 : p + strlen(p);
        }
        assert_int_equal(fclose(f), 0);
        assert_int_equal(blame_parse(rec, rec_len, &old), 0);
        assert_int_equal(blame_update(&old, old_text, strlen(old_text), new_text, strlen(new_text), "N", &by_region),
                         0);
        assert_int_equal(blame_update_by_diff(&old, old_text, strlen(old_text), new_text, strlen(new_text), "N",
                                              &by_diff),
                         0);
        assert_int_equal(blame_serialize(&by_region, &a, &a_len), 0);
        assert_int_equal(blame_serialize(&by_diff, &b, &b_len), 0);
        if (strcmp(a, b) != 0)
                fail_msg("'%s' -> '%s': by region\n%sby diff\n%s", old_text, new_text, a, b);
}

static void expect_range(const Blame *b, size_t i, uint64_t start, uint64_t count, const char *owner) {
        assert_true(i < b->n_ranges);
        assert_int_equal(b->ranges[i].start_line, start);
        assert_int_equal(b->ranges[i].line_count, count);
        assert_string_equal(b->ranges[i].owner, owner);
}

/* A text of n lines "line I" between two fixed lines at each end; with
 * swapped, the first and the last of those n lines trade places, so the
 * changed region is all n of them while a diff matches the n - 2 between. */
static char *swap_text(size_t n, bool swapped) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        assert_non_null(f);
        fprintf(f, "head 1\nhead 2\n");
        for (size_t i = 0; i < n; i++)
                fprintf(f, "line %zu\n", swapped && i == 0 ? n - 1 : swapped && i == n - 1 ? 0 : i);
        fprintf(f, "tail 1\ntail 2\n");
        assert_int_equal(fclose(f), 0);
        return text;
}

/* Past SBX_BLAME_DIFF_LINES_MAX lines in the changed region (old and new
 * together), the region is not diffed: it is the publisher's as a whole, and
 * the attribution still tiles the text. Just under it, the diff runs. */
static void test_diff_budget(void **state) {
        const size_t under = SBX_BLAME_DIFF_LINES_MAX / 2 - 2, over = SBX_BLAME_DIFF_LINES_MAX / 2 + 1;
        size_t sizes[] = { under, over };

        for (size_t k = 0; k < ELEMENTSOF(sizes); k++) {
                size_t n = sizes[k];
                _cleanup_free_ char *old_text = swap_text(n, false), *new_text = swap_text(n, true);
                _cleanup_blame_ Blame old = {}, b = {};

                assert_int_equal(blame_new(old_text, strlen(old_text), "A", &old), 0);
                assert_int_equal(blame_update(&old, old_text, strlen(old_text), new_text, strlen(new_text), "B", &b),
                                 0);
                if (n == under) {
                        /* B A B between the heads and tails: the unchanged lines kept A. */
                        assert_int_equal(b.n_ranges, 5);
                        expect_range(&b, 1, 3, 1, "B");
                        expect_range(&b, 2, 4, n - 2, "A");
                } else {
                        assert_int_equal(b.n_ranges, 3);
                        expect_range(&b, 0, 1, 2, "A");
                        expect_range(&b, 1, 3, n, "B");
                        expect_range(&b, 2, n + 3, 2, "A");
                }
        }
}

static void test_region_cases(void **state) {
        static const char *const cases[][2] = {
                /* one line changed: middle, first, last, last without '\n' */
                { "a\nb\nc\nd\n", "a\nb\nX\nd\n" },
                { "a\nb\nc\nd\n", "X\nb\nc\nd\n" },
                { "a\nb\nc\nd\n", "a\nb\nc\nX\n" },
                { "a\nb\nc\nd", "a\nb\nc\ndX" },
                { "a\nb\nc\nd", "a\nb\nc\nd\n" },
                { "a\nb\nc\nd\n", "a\nb\nc\nd" },
                { "a\r\nb\r\n", "a\nb\r\n" },
                /* part of a line, the same line elsewhere */
                { "|row 1| x\n|row 2| x\n|row 3| x\n", "|row 1| x\n|row 2|e x\n|row 3| x\n" },
                { "x\nx\nx\n", "x\nX\nx\n" },
                { "x\ny\nx\ny\n", "x\ny\nx\nY\n" },
                /* lines inserted: middle, top, end, next to equal lines (slid down) */
                { "a\nb\nc\n", "a\nb\nnew\nc\n" },
                { "a\nb\nc\n", "new\nnew2\na\nb\nc\n" },
                { "a\nb\nc\n", "a\nb\nc\nnew\n" },
                { "a\nb\nc", "a\nb\nc\nnew" },
                { "a\nb\nb\nc\n", "a\nb\nb\nb\nc\n" },
                { "a\nb\nc\nb\nc\nd\n", "a\nb\nc\nb\nc\nb\nc\nd\n" },
                { "x\n", "x\nx\n" },
                { "", "a\nb\n" },
                /* lines deleted */
                { "a\nb\nc\nd\n", "a\nd\n" },
                { "a\nb\nc\nd\n", "b\nc\nd\n" },
                { "a\nb\nc\nd\n", "a\nb\nc\n" },
                { "a\nb\nb\nb\nc\n", "a\nb\nb\nc\n" },
                { "a\nb\n", "" },
                /* several lines replaced, with and without a line in common */
                { "a\nb\nc\nd\ne\n", "a\nB\nC\nD\ne\n" },
                { "a\nb\nc\nd\ne\n", "a\nB\nc\nD\ne\n" },
                { "a\nb\nc\nd\ne\n", "a\nB\nB2\nB3\nB4\nB5\ne\n" },
                { "a\nb\nc\nd\ne\n", "a\nc\nb\ne\n" },
                /* several edits apart, and next to each other */
                { "a\nb\nc\nd\ne\nf\n", "A\nb\nc\nd\ne\nF\n" },
                { "a\nb\nc\nd\ne\nf\n", "a\nB\nc\nD\ne\nf\n" },
                { "a\nb\nc\nd\ne\nf\n", "a\nB\nC\nd\ne\nf\n" },
                { "a\nb\na\nb\n", "b\na\nb\na\n" },
                { "x\ny\nM\n", "M\nx\ny\n" },
                /* nothing changed */
                { "a\nb\n", "a\nb\n" },
                { "", "" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check_same_as_diff(cases[i][0], cases[i][1]);
}

/* 20,000 random texts over a few short lines (repeated lines, no final
 * newline) and random edits of them, one to three at a time, each pair
 * given to check. */
static void random_edits(unsigned seed, void (*check)(const char *old_text, const char *new_text)) {
        static const char *const pieces[] = { "a\n", "b\n", "c\n", "\n", "a\r\n", "ab\n", "a", "b" };

        for (int round = 0; round < 20000; round++) {
                char old_text[128] = "", new_text[256];
                int n = rand_r(&seed) % 12, edits = 1 + rand_r(&seed) % 3;

                for (int i = 0; i < n; i++)
                        strcat(old_text, pieces[rand_r(&seed) % ELEMENTSOF(pieces)]);
                strcpy(new_text, old_text);
                for (int e = 0; e < edits; e++) {
                        size_t len = strlen(new_text), at = (size_t) rand_r(&seed) % (len + 1);
                        size_t cut = (size_t) rand_r(&seed) % 4;
                        char repl[16] = "";

                        for (int k = rand_r(&seed) % 3; k > 0; k--)
                                strcat(repl, pieces[rand_r(&seed) % ELEMENTSOF(pieces)]);
                        cut = MIN(cut, len - at);
                        if (len - cut + strlen(repl) >= 200)
                                continue;
                        memmove(new_text + at + strlen(repl), new_text + at + cut, len - at - cut + 1);
                        memcpy(new_text + at, repl, strlen(repl));
                }
                check(old_text, new_text);
        }
}

/* The changed region's blame: the same result as the diff every time. */
static void test_region_random(void **state) {
        random_edits(4242, check_same_as_diff);
}

static void test_round_trip(void **state) {
        _cleanup_blame_ Blame b = {}, p = {};
        _cleanup_free_ char *s = NULL, *s2 = NULL;
        char owner[129];
        size_t len, len2;

        memset(owner, '~', 128);
        owner[128] = '\0';
        owner[5] = ' ';
        assert_int_equal(blame_new("a\nb\nc\n", 6, "original", &b), 0);
        update(&b, "a\nb\nc\n", "a\nB\nc\n", owner);
        update(&b, "a\nB\nc\n", "a\nB\nc\nd\n", "workspace_session:ws-1");
        assert_int_equal(blame_serialize(&b, &s, &len), 0);
        assert_int_equal(blame_parse(s, len, &p), 0);
        assert_int_equal(p.n_ranges, 4);
        assert_string_equal(p.ranges[1].owner, owner);
        assert_int_equal(p.ranges[3].start_line, 4);
        assert_int_equal(blame_serialize(&p, &s2, &len2), 0);
        assert_int_equal(len2, len);
        assert_memory_equal(s, s2, len);
        blame_done(&p);

        assert_int_equal(blame_parse("", 0, &p), 0);
        assert_int_equal(p.n_ranges, 0);
        assert_int_equal(blame_parse(NULL, 0, &p), 0);
        assert_int_equal(blame_parse("1 4294967295 A\n", 15, &p), 0);
        assert_int_equal(p.ranges[0].line_count, 4294967295u);
}

static void test_parse_rejects(void **state) {
        static const struct {
                const char *text;
                size_t len;
        } bad[] = {
#define BAD(s) { s, sizeof(s) - 1 }
                BAD("1 2 A\n4 1 B\n"),                  /* gap */
                BAD("1 2 A\n2 1 B\n"),                  /* overlap */
                BAD("1 0 A\n"),                         /* zero count */
                BAD("0 1 A\n"),                         /* zero start */
                BAD("2 1 A\n"),                         /* does not start at 1 */
                BAD("1 1 A\n3 1 C\n2 1 B\n"),           /* unordered */
                BAD("1 1 A\n2 1 A\n"),                  /* adjacent same owner */
                BAD("1 1 A\x01\n"),                     /* control character */
                BAD("1 1 A\tB\n"),
                BAD("1 1 A\x7f\n"),
                BAD("1 1 \xc3\xa9\n"),                  /* not ASCII */
                BAD("1 1 A\0B\n"),                      /* NUL */
                BAD("1 1 \n"),                          /* empty owner */
                BAD("1 1 A\r\n"),
                BAD("1 1 A"),                           /* no final newline */
                BAD("\n"),
                BAD("1 1 A\n\n"),
                BAD("hello\n"),
                BAD("1 1\n"),
                BAD("1  1 A\n"),
                BAD(" 1 1 A\n"),
                BAD("+1 1 A\n"),
                BAD("-1 1 A\n"),
                BAD("01 1 A\n"),
                BAD("1 01 A\n"),
                BAD("1 1x A\n"),
                BAD("0x1 1 A\n"),
                BAD("1 18446744073709551616 A\n"),      /* huge counts */
                BAD("1 18446744073709551615 A\n"),
                BAD("1 99999999999 A\n"),
                BAD("1 4294967296 A\n"),
                BAD("1 4294967295 A\n4294967296 1 B\n"),
                BAD("1 2147483648 A\n2147483649 2147483648 B\n"),
                BAD("\xff\xfe\xfd\n"),
#undef BAD
        };
        _cleanup_free_ char *big = NULL;
        char owner_line[160];
        Blame b = {};
        size_t len = 0;
        int n;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = blame_parse(bad[i].text, bad[i].len, &b);
                if (r != -EBADMSG)
                        fail_msg("input %zu: blame_parse() = %d", i, r);
                assert_null(b.ranges);
        }
        assert_int_equal(blame_parse(NULL, 3, &b), -EINVAL);

        /* Owner of 129 bytes. */
        n = snprintf(owner_line, sizeof(owner_line), "1 1 %0129d\n", 0);
        assert_int_equal(blame_parse(owner_line, (size_t) n, &b), -EBADMSG);
        n = snprintf(owner_line, sizeof(owner_line), "1 1 %0128d\n", 0);
        assert_int_equal(blame_parse(owner_line, (size_t) n, &b), 0);
        blame_done(&b);

        /* 1,000,000 ranges parse, one more does not. */
        big = malloc(1000001u * 20u);
        assert_non_null(big);
        for (unsigned i = 1; i <= 1000000u; i++)
                len += (size_t) sprintf(big + len, "%u 1 %c\n", i, i % 2 ? 'A' : 'B');
        assert_int_equal(blame_parse(big, len, &b), 0);
        assert_int_equal(b.n_ranges, 1000000u);
        blame_done(&b);
        len += (size_t) sprintf(big + len, "1000001 1 A\n");
        assert_int_equal(blame_parse(big, len, &b), -EBADMSG);
}

static void test_serialize_rejects(void **state) {
        BlameRange ranges[] = {
                { .start_line = 1, .line_count = 2, .owner = (char *) "A" },
                { .start_line = 3, .line_count = 1, .owner = (char *) "A" },
        };
        Blame b = { .ranges = ranges, .n_ranges = 2 };
        char *s = NULL;
        size_t len = 0;

        assert_int_equal(blame_serialize(&b, &s, &len), -EINVAL);      /* adjacent same owner */
        ranges[1].owner = (char *) "B";
        ranges[1].start_line = 2;
        assert_int_equal(blame_serialize(&b, &s, &len), -EINVAL);      /* overlap */
        ranges[1].start_line = 3;
        ranges[1].line_count = 0;
        assert_int_equal(blame_serialize(&b, &s, &len), -EINVAL);      /* zero count */
        ranges[1].line_count = UINT64_C(4294967294);
        assert_int_equal(blame_serialize(&b, &s, &len), -E2BIG);       /* more lines than storable */
        ranges[1].line_count = 1;
        ranges[1].owner = (char *) "B\n";
        assert_int_equal(blame_serialize(&b, &s, &len), -EINVAL);
        assert_null(s);
        ranges[1].owner = (char *) "B";
        assert_int_equal(blame_serialize(&b, &s, &len), 0);
        assert_string_equal(s, "1 2 A\n3 1 B\n");
        free(s);
}

static void assert_diff(const char *path, const char *old_text, const char *new_text, size_t max_bytes,
                        const char *expected, bool truncated) {
        _cleanup_free_ char *d = NULL;
        size_t len;
        bool t = !truncated;

        assert_int_equal(text_unified_diff(path, old_text, old_text ? strlen(old_text) : 0, new_text,
                                           new_text ? strlen(new_text) : 0, max_bytes, &d, &len, &t),
                         0);
        assert_string_equal(d, expected);
        assert_int_equal(len, strlen(expected));
        assert_int_equal(t, truncated);
}

static void test_diff_change(void **state) {
        assert_diff("src/f.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\n", "a\nb\nc\nd\nE\nf\ng\nh\ni\n", 4096,
                    "--- a/src/f.txt\n"
                    "+++ b/src/f.txt\n"
                    "@@ -2,7 +2,7 @@\n"
                    " b\n c\n d\n-e\n+E\n f\n g\n h\n",
                    false);
        /* Two hunks, a pure insertion and a pure deletion. */
        assert_diff("f", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n",
                    4096,
                    "--- a/f\n+++ b/f\n"
                    "@@ -1,3 +1,4 @@\n+0\n 1\n 2\n 3\n"
                    "@@ -9,4 +10,3 @@\n 9\n 10\n 11\n-12\n",
                    false);
        /* Identical texts: no diff at all. */
        assert_diff("f", "a\n", "a\n", 4096, "", false);
        /* A name that needs quoting. */
        assert_diff("we\"ird\nname", "a\n", "b\n", 4096,
                    "--- \"a/we\\\"ird\\nname\"\n+++ \"b/we\\\"ird\\nname\"\n@@ -1 +1 @@\n-a\n+b\n", false);
}

static void test_diff_added_deleted(void **state) {
        assert_diff("new.txt", NULL, "x\ny\n", 4096, "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n",
                    false);
        assert_diff("old.txt", "x\ny\n", NULL, 4096, "--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n",
                    false);
        assert_diff("empty", NULL, "", 4096, "--- /dev/null\n+++ b/empty\n", false);
        assert_diff("empty", "", NULL, 4096, "--- a/empty\n+++ /dev/null\n", false);
}

static void test_diff_no_newline(void **state) {
        assert_diff("f", "a\nb", "a\nc", 4096,
                    "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
                    "\\ No newline at end of file\n",
                    false);
        assert_diff("f", "a\nb", "a\nb\n", 4096,
                    "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n", false);
        assert_diff("f", "a\nb\nc", "X\nb\nc", 4096,
                    "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n-a\n+X\n b\n c\n\\ No newline at end of file\n",
                    false);
        assert_diff("f", NULL, "x", 4096, "--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n",
                    false);
}

static void test_diff_truncated(void **state) {
        static const char *const full = "--- /dev/null\n+++ b/n\n@@ -0,0 +1,5 @@\n+1\n+2\n+3\n+4\n+5\n";
        size_t full_len = strlen(full);

        assert_diff("n", NULL, "1\n2\n3\n4\n5\n", full_len, full, false);
        assert_diff("n", NULL, "1\n2\n3\n4\n5\n", full_len - 1,
                    "--- /dev/null\n+++ b/n\n@@ -0,0 +1,5 @@\n+1\n+2\n+3\n+4\n", true);
        assert_diff("n", NULL, "1\n2\n3\n4\n5\n", strlen("--- /dev/null\n+++ b/n\n@@ -0,0 +1,5 @@\n+1\n+2"),
                    "--- /dev/null\n+++ b/n\n@@ -0,0 +1,5 @@\n+1\n", true);
        assert_diff("n", NULL, "1\n2\n3\n4\n5\n", 5, "", true);
        assert_diff("n", NULL, "1\n2\n3\n4\n5\n", 0, "", true);
}

/* The length of the line at p (with its '\n', if it has one). */
static size_t line_len(const char *p) {
        const char *nl = strchr(p, '\n');

        return nl ? (size_t) (nl - p) + 1 : strlen(p);
}

/* Applies a unified diff of one file to old_text into out (of size
 * out_size); false if it does not apply. *ret_changed: its - and + lines. */
static bool diff_applies(const char *old_text, const char *diff, char *out, size_t out_size, size_t *ret_changed) {
        const char *o = old_text, *d = diff;
        size_t out_len = 0, changed = 0;
        uint64_t old_line = 1;

        out[0] = '\0';
        for (int i = 0; i < 2 && *d; i++)
                d += line_len(d); /* the --- and +++ headers */
        while (*d) {
                unsigned long start, count = 1;
                size_t n = line_len(d);

                if (sscanf(d, "@@ -%lu,%lu", &start, &count) < 1)
                        return false;
                if (count == 0)
                        start++; /* the line before the hunk */
                for (; old_line < start && *o; old_line++, o += line_len(o)) {
                        memcpy(out + out_len, o, line_len(o));
                        out_len += line_len(o);
                }
                for (d += n; *d && *d != '@'; d += n) {
                        size_t len;
                        n = line_len(d);
                        len = n - 1 - (d[n] == '\\' ? 1 : 0); /* without the origin, and a marked last '\n' */
                        if (*d == '\\')
                                continue;
                        if (*d != '+' && (line_len(o) != len || memcmp(o, d + 1, len) != 0))
                                return false;
                        if (*d != '-') {
                                memcpy(out + out_len, d + 1, len);
                                out_len += len;
                        }
                        if (*d != ' ')
                                changed++;
                        if (*d != '+') {
                                o += len;
                                old_line++;
                        }
                }
        }
        assert_true(out_len + strlen(o) < out_size);
        strcpy(out + out_len, o);
        *ret_changed = changed;
        return true;
}

/* text_unified_diff diffs only where the texts differ, with its context: a
 * diff that turns old_text into new_text, as short as the whole texts' diff
 * (which may pair repeated lines otherwise). */
static void check_diff_window(const char *old_text, const char *new_text) {
        _cleanup_free_ char *a = NULL, *b = NULL;
        size_t a_len = 0, b_len = 0, a_changed = 0, b_changed = 0;
        bool a_cut = true, b_cut = true;
        char out[512], whole_out[512];

        assert_int_equal(text_unified_diff("f", old_text, strlen(old_text), new_text, strlen(new_text), 1u << 20, &a,
                                           &a_len, &a_cut),
                         0);
        assert_int_equal(text_unified_diff_whole("f", old_text, strlen(old_text), new_text, strlen(new_text),
                                                 1u << 20, &b, &b_len, &b_cut),
                         0);
        assert_false(a_cut);
        assert_true(diff_applies(old_text, b, whole_out, sizeof(whole_out), &b_changed));
        assert_string_equal(whole_out, new_text);
        if (!diff_applies(old_text, a, out, sizeof(out), &a_changed) || strcmp(out, new_text) != 0 ||
            a_changed != b_changed)
                fail_msg("'%s' -> '%s': windowed\n%swhole\n%s", old_text, new_text, a, b);
}

/* One changed line in the middle of 10,000: its hunk says where it is. */
static void test_diff_large(void **state) {
        _cleanup_free_ char *old_text = NULL, *new_text = NULL, *d = NULL;
        size_t old_len = 0, new_len = 0, len = 0;
        FILE *o = open_memstream(&old_text, &old_len), *n = open_memstream(&new_text, &new_len);
        bool cut = true;

        assert_non_null(o);
        assert_non_null(n);
        for (int i = 1; i <= 10000; i++) {
                fprintf(o, "row %d\n", i);
                fprintf(n, i == 5000 ? "row %d changed\n" : "row %d\n", i);
        }
        assert_int_equal(fclose(o), 0);
        assert_int_equal(fclose(n), 0);
        assert_int_equal(text_unified_diff("big", old_text, old_len, new_text, new_len, 4096, &d, &len, &cut), 0);
        assert_string_equal(d, "--- a/big\n+++ b/big\n@@ -4997,7 +4997,7 @@\n"
                               " row 4997\n row 4998\n row 4999\n-row 5000\n+row 5000 changed\n row 5001\n"
                               " row 5002\n row 5003\n");
        assert_false(cut);
}

/* The windowed unified diff of random edits: as the whole-text one. */
static void test_diff_random(void **state) {
        random_edits(1717, check_diff_window);
}

static void test_diff_rejects(void **state) {
        char *d = NULL;
        size_t len = 0;
        bool t = false;

        assert_int_equal(text_unified_diff(NULL, "a", 1, "b", 1, 100, &d, &len, &t), -EINVAL);
        assert_int_equal(text_unified_diff("f", NULL, 0, NULL, 0, 100, &d, &len, &t), -EINVAL);
        assert_int_equal(text_unified_diff("f", NULL, 1, "b", 1, 100, &d, &len, &t), -EINVAL);
        assert_null(d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_new),
                cmocka_unit_test(test_update_basic),
                cmocka_unit_test(test_update_sequence),
                cmocka_unit_test(test_merge_adjacent),
                cmocka_unit_test(test_empty_and_refill),
                cmocka_unit_test(test_crlf_one_line),
                cmocka_unit_test(test_crlf_conversion),
                cmocka_unit_test(test_final_newline),
                cmocka_unit_test(test_identical),
                cmocka_unit_test(test_large),
                cmocka_unit_test(test_update_rejects),
                cmocka_unit_test(test_random_updates),
                cmocka_unit_test(test_region_cases),
                cmocka_unit_test(test_region_random),
                cmocka_unit_test(test_diff_large),
                cmocka_unit_test(test_diff_random),
                cmocka_unit_test(test_diff_budget),
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_parse_rejects),
                cmocka_unit_test(test_serialize_rejects),
                cmocka_unit_test(test_diff_change),
                cmocka_unit_test(test_diff_added_deleted),
                cmocka_unit_test(test_diff_no_newline),
                cmocka_unit_test(test_diff_truncated),
                cmocka_unit_test(test_diff_rejects),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
