/* Unit tests for supervisor/data/outquery.c: runtime_query_output's search
 * and line ranges over real transcripts (data/transcript.c) with stdout and
 * stderr apart, and over a merged one: 1-based inclusive lines, context and
 * joined windows, the page's stop and cursor, the fallback, the errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/outquery.h"
#include "macro.h"
#include "sbx-limits.h"

#include "tmpdir.h"

/* 300 stdout lines ("out N", "HIT" on every 50th) and 5 stderr lines ("err N", "hit" on the 3rd), interleaved. */
static Transcript *streams(void) {
        Transcript *t = NULL;
        char line[64];

        assert_int_equal(transcript_create_streams(dirfd_, "cmd-0123456789ab", 1u << 30, &t), 0);
        for (int i = 1; i <= 300; i++) {
                snprintf(line, sizeof(line), "out %d%s\n", i, i % 50 == 0 ? " HIT" : "");
                assert_int_equal(transcript_feed_stream(t, TRANSCRIPT_STDOUT, line, strlen(line)), 0);
                if (i % 60 == 0) {
                        snprintf(line, sizeof(line), "err %d%s\n", i / 60, i / 60 == 3 ? " hit" : "");
                        assert_int_equal(transcript_feed_stream(t, TRANSCRIPT_STDERR, line, strlen(line)), 0);
                }
        }
        assert_int_equal(transcript_finish(t), 0);
        return t;
}

static OutQuery both(const char *const *terms, size_t n, unsigned max, unsigned ctx) {
        return (OutQuery) { .terms = terms, .n_terms = n, .streams = { TRANSCRIPT_STDOUT, TRANSCRIPT_STDERR },
                            .n_streams = 2, .max_excerpts = max, .context = ctx, .budget = SBX_QUERY_TEXT_BUDGET };
}

static void test_search(void **state) {
        static const char *const hit[] = { "hit" };
        Transcript *t = streams();
        OutQuery q = both(hit, 1, 10, 1);
        OutResult r;

        assert_int_equal(outquery_search(t, &q, &r), 0);
        assert_int_equal(r.match_count, 7);
        assert_true(r.count_complete);
        assert_false(r.has_next);
        assert_false(r.fallback);
        assert_int_equal(r.n_excerpts, 7);
        assert_int_equal(r.excerpts[0].source, TRANSCRIPT_STDOUT);
        assert_int_equal(r.excerpts[0].start, 49);
        assert_int_equal(r.excerpts[0].end, 51);
        assert_string_equal(r.excerpts[0].content, "  49| out 49\n  50| out 50 HIT\n  51| out 51\n");
        assert_int_equal(r.excerpts[6].source, TRANSCRIPT_STDERR);
        assert_int_equal(r.excerpts[6].start, 2);
        assert_int_equal(r.excerpts[6].end, 4);
        assert_string_equal(r.excerpts[6].content, "   2| err 2\n   3| err 3 hit\n   4| err 4\n");
        outquery_result_done(&r);
        transcript_free(t);
}

/* Pages of 2: the page stops at the match after it; every match once, in order, to the end. */
static void test_cursor_pages(void **state) {
        static const char *const hit[] = { "HIT" };
        Transcript *t = streams();
        OutQuery q = both(hit, 1, 2, 0);
        uint64_t seen[16];
        size_t n = 0;
        OutResult r;

        for (int page = 0; page < 10; page++) {
                assert_int_equal(outquery_search(t, &q, &r), 0);
                for (size_t i = 0; i < r.n_excerpts; i++)
                        seen[n++] = r.excerpts[i].source == TRANSCRIPT_STDERR ? 1000 + r.excerpts[i].start
                                                                                 : r.excerpts[i].start;
                if (!r.has_next) {
                        assert_true(r.count_complete);
                        outquery_result_done(&r);
                        break;
                }
                assert_false(r.count_complete);
                assert_int_equal(r.match_count, 3);     /* the page's two and the one after */
                q.has_cursor = true;
                q.cursor_stream = r.next_stream;
                q.after_line = r.next_after_line;
                outquery_result_done(&r);
        }
        assert_int_equal(n, 7);
        assert_int_equal(seen[0], 50);
        assert_int_equal(seen[5], 300);
        assert_int_equal(seen[6], 1003);
        transcript_free(t);
}

static void test_fallback_range_errors(void **state) {
        static const char *const none[] = { "absent" }, *const hit[] = { "hit" };
        Transcript *t = streams();
        OutQuery q = both(none, 1, 10, 3);
        OutResult r;

        assert_int_equal(outquery_search(t, &q, &r), 0);
        assert_true(r.fallback);
        assert_int_equal(r.match_count, 0);
        assert_int_equal(r.n_excerpts, 2);
        assert_int_equal(r.excerpts[0].start, 300 - SBX_QUERY_FALLBACK_LINES + 1);
        assert_int_equal(r.excerpts[0].end, 300);
        assert_int_equal(r.excerpts[1].start, 1);
        assert_int_equal(r.excerpts[1].end, 5);
        outquery_result_done(&r);

        assert_int_equal(outquery_range(t, TRANSCRIPT_STDERR, 5, 5, SBX_QUERY_TEXT_BUDGET, &r), 0);
        assert_string_equal(r.excerpts[0].content, "   5| err 5\n");
        outquery_result_done(&r);
        assert_int_equal(outquery_range(t, TRANSCRIPT_STDERR, 5, 6, SBX_QUERY_TEXT_BUDGET, &r), -ERANGE);
        assert_int_equal(outquery_range(t, TRANSCRIPT_STDOUT, 0, 1, SBX_QUERY_TEXT_BUDGET, &r), -ERANGE);
        assert_int_equal(outquery_range(t, TRANSCRIPT_STDOUT, 3, 2, SBX_QUERY_TEXT_BUDGET, &r), -ERANGE);

        q = both(hit, 1, 10, 0);
        q.has_cursor = true;
        q.cursor_stream = TRANSCRIPT_STDOUT;
        q.after_line = 301;
        assert_int_equal(outquery_search(t, &q, &r), -ERANGE);
        q.streams[0] = TRANSCRIPT_STDERR;
        q.n_streams = 1;
        q.after_line = 1;
        assert_int_equal(outquery_search(t, &q, &r), -EINVAL);    /* cursor on a stream not searched */
        q.n_terms = 0;
        q.has_cursor = false;
        assert_int_equal(outquery_search(t, &q, &r), -EINVAL);
        transcript_free(t);
}

/* Adjacent matches join one excerpt, up to SBX_QUERY_WINDOW_MAX_LINES lines; a merged transcript reads as one view. */
static void test_windows_merged(void **state) {
        static const char *const every[] = { "line" };
        Transcript *t = NULL;
        OutQuery q = { .terms = every, .n_terms = 1, .streams = { TRANSCRIPT_MERGED }, .n_streams = 1,
                       .max_excerpts = 3, .context = 0, .budget = SBX_QUERY_TEXT_BUDGET };
        OutResult r;
        char line[32];

        assert_int_equal(transcript_create(dirfd_, "cmd-merged000000", 1u << 30, &t), 0);
        for (int i = 1; i <= 500; i++) {
                snprintf(line, sizeof(line), "line %d\n", i);
                assert_int_equal(transcript_feed(t, line, strlen(line)), 0);
        }
        assert_int_equal(transcript_finish(t), 0);
        assert_int_equal(outquery_search(t, &q, &r), 0);
        assert_int_equal(r.n_excerpts, 3);
        assert_int_equal(r.excerpts[0].source, TRANSCRIPT_MERGED);
        assert_int_equal(r.excerpts[0].start, 1);
        assert_int_equal(r.excerpts[0].end, SBX_QUERY_WINDOW_MAX_LINES);
        assert_int_equal(r.excerpts[2].end, 3 * SBX_QUERY_WINDOW_MAX_LINES);
        assert_true(r.has_next);
        assert_int_equal(r.next_after_line, 3 * SBX_QUERY_WINDOW_MAX_LINES);
        outquery_result_done(&r);
        transcript_free(t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_search, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cursor_pages, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fallback_range_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_windows_merged, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
