/* Unit tests for supervisor/data/fileops.c: line windows over files (counting,
 * paging, max_bytes cuts, UTF-8 validation across read buffers, large files),
 * the file indexes windows are read through, and ordered exact-string edits.
 * Files are unlinked right after creation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx-limits.h"
#include "macro.h"
#include "data/fileops.h"
#include "json-escape.h"

#define READ_BUF 65536u         /* fileops.c reads the file in blocks of this size */
#define EURO "\xe2\x82\xac"     /* U+20AC, 3 bytes */
#define GRIN "\xf0\x9f\x98\x80" /* U+1F600, 4 bytes */

static int make_file(const char *data, size_t len) {
        char path[] = "/tmp/test-fileops.XXXXXX";
        int fd = mkostemp(path, O_CLOEXEC);

        assert_true(fd >= 0);
        assert_int_equal(unlink(path), 0);
        for (size_t done = 0; done < len;) {
                ssize_t n = write(fd, data + done, len - done);
                assert_true(n > 0);
                done += (size_t) n;
        }
        return fd;
}

/* Index the file and read a window of it, as file_read does. */
static int read_fd(int fd, uint64_t offset, uint32_t limit, size_t max_bytes, FileWindow *ret, char *errmsg,
                   size_t errmsg_size) {
        _cleanup_(file_index_done) FileIndex index = {};
        int r;

        r = file_index_build(fd, &index, errmsg, errmsg_size);
        if (r < 0)
                return r;
        return file_read_window(fd, &index, offset, limit, max_bytes, ret, errmsg, errmsg_size);
}

static int read_buf(const char *data, size_t len, uint64_t offset, uint32_t limit, size_t max_bytes,
                    FileWindow *ret, char *errmsg, size_t errmsg_size) {
        _cleanup_close_ int fd = make_file(data, len);

        return read_fd(fd, offset, limit, max_bytes, ret, errmsg, errmsg_size);
}

/* Read a window of a string that must succeed; checks the invariants. */
static FileWindow read_ok(const char *data, uint64_t offset, uint32_t limit, size_t max_bytes) {
        FileWindow w = {};
        char err[256] = "";

        assert_int_equal(read_buf(data, strlen(data), offset, limit, max_bytes, &w, err, sizeof(err)), 0);
        assert_non_null(w.content);
        assert_int_equal(strlen(w.content), w.len);
        assert_int_equal(w.bytes_read, w.len);
        assert_true(w.len <= max_bytes);
        assert_int_equal(w.total_bytes, strlen(data));
        assert_int_equal(w.total_lines, text_count_lines(data, strlen(data)));
        /* truncated: more lines follow, or the window's only line was cut. */
        if (w.has_next_offset)
                assert_true(w.truncated);
        if (!w.has_next_offset)
                assert_int_equal(w.next_offset, 0);
        return w;
}

static void check_window(const char *data, uint64_t offset, uint32_t limit, size_t max_bytes,
                         const char *content, uint64_t start, uint64_t num_lines, uint64_t next) {
        FileWindow w = read_ok(data, offset, limit, max_bytes);

        assert_string_equal(w.content, content);
        assert_int_equal(w.start_line, start);
        assert_int_equal(w.num_lines, num_lines);
        assert_int_equal(w.has_next_offset, next != 0);
        assert_int_equal(w.next_offset, next);
        file_window_done(&w);
}

static void test_line_counts(void **state) {
        static const struct {
                const char *data;
                uint64_t lines;
        } cases[] = {
                { "", 0 },       { "a", 1 },         { "a\n", 1 },     { "a\nb", 2 },
                { "a\nb\n", 2 }, { "\n", 1 },        { "\n\n", 2 },    { "a\r\nb\r\n", 2 },
                { "a\r", 1 },    { "x\n\ny", 3 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                FileWindow w = read_ok(cases[i].data, 1, 2000, SBX_RESULT_TEXT_BUDGET);

                assert_int_equal(text_count_lines(cases[i].data, strlen(cases[i].data)), cases[i].lines);
                assert_int_equal(w.total_lines, cases[i].lines);
                assert_int_equal(w.num_lines, cases[i].lines);
                assert_string_equal(w.content, cases[i].data);
                assert_int_equal(w.start_line, 1);
                assert_false(w.truncated);
                file_window_done(&w);
        }
}

static void test_empty_file(void **state) {
        FileWindow w = read_ok("", 1, 2000, SBX_RESULT_TEXT_BUDGET);

        assert_string_equal(w.content, "");
        assert_int_equal(w.len, 0);
        assert_int_equal(w.num_lines, 0);
        assert_int_equal(w.total_lines, 0);
        assert_int_equal(w.total_bytes, 0);
        assert_false(w.has_next_offset);
        assert_false(w.truncated);
        file_window_done(&w);
        assert_null(w.content);
        file_window_done(NULL);
}

static void test_crlf(void **state) {
        check_window("x\r\ny\r\nz", 1, 2000, 100, "x\r\ny\r\nz", 1, 3, 0);
        check_window("x\r\ny\r\nz", 2, 1, 100, "y\r\n", 2, 1, 3);
        check_window("x\r\ny\r\nz", 3, 1, 100, "z", 3, 1, 0);
}

static void test_paging(void **state) {
        char data[256] = "", expect[64];
        uint64_t offset = 1, pages = 0;

        for (int i = 1; i <= 10; i++)
                snprintf(data + strlen(data), sizeof(data) - strlen(data), "line %d\n", i);

        check_window(data, 1, 3, 1000, "line 1\nline 2\nline 3\n", 1, 3, 4);
        check_window(data, 4, 3, 1000, "line 4\nline 5\nline 6\n", 4, 3, 7);
        check_window(data, 8, 3, 1000, "line 8\nline 9\nline 10\n", 8, 3, 0);
        check_window(data, 10, 1, 1000, "line 10\n", 10, 1, 0);
        check_window(data, 9, 1, 1000, "line 9\n", 9, 1, 10);

        /* Follow next_offset to the end, two lines a page. */
        for (;;) {
                FileWindow w = read_ok(data, offset, 2, 1000);

                snprintf(expect, sizeof(expect), "line %d\nline %d\n", (int) offset, (int) offset + 1);
                assert_string_equal(w.content, expect);
                assert_int_equal(w.start_line, offset);
                assert_int_equal(w.total_lines, 10);
                pages++;
                if (!w.truncated) {
                        assert_int_equal(offset, 9);
                        file_window_done(&w);
                        break;
                }
                assert_int_equal(w.next_offset, offset + 2);
                offset = w.next_offset;
                file_window_done(&w);
        }
        assert_int_equal(pages, 5);

        /* Pages by escaped bytes: each line is 8 ("line N\\n"). */
        check_window(data, 1, 2000, 23, "line 1\nline 2\n", 1, 2, 3);
        check_window(data, 1, 2000, 24, "line 1\nline 2\nline 3\n", 1, 3, 4);
}

static void test_offsets(void **state) {
        const char *data = "one\ntwo\nthree";

        check_window(data, 0, 2000, 100, data, 1, 3, 0);
        check_window(data, 0, 1, 100, "one\n", 1, 1, 2);
        check_window(data, 3, 2000, 100, "three", 3, 1, 0);
        check_window(data, 4, 2000, 100, "", 4, 0, 0);
        check_window(data, 1000000, 5, 100, "", 1000000, 0, 0);
        check_window("", 2, 5, 100, "", 2, 0, 0);
        check_window("a\n", 2, 5, 100, "", 2, 0, 0);
}

static void test_bad_args(void **state) {
        FileWindow w = { .content = (char *) 1 };
        char err[128] = "";

        assert_int_equal(read_buf("a\n", 2, 1, 0, 100, &w, err, sizeof(err)), -EINVAL);
        assert_string_equal(err, "limit must be between 1 and 2000");
        assert_int_equal(read_buf("a\n", 2, 1, SBX_FILE_READ_MAX_LINES + 1, 100, &w, err, sizeof(err)), -EINVAL);
        assert_int_equal(read_buf("a\n", 2, 1, 1, 0, &w, err, sizeof(err)), -EINVAL);
        assert_int_equal(read_buf("a\n", 2, 1, 1, 3, &w, NULL, 0), -EINVAL);
        assert_ptr_equal(w.content, (char *) 1);
        assert_int_equal(read_fd(-1, 1, 1, 100, &w, err, sizeof(err)), -EBADF);
        assert_ptr_equal(w.content, (char *) 1);

        check_window("a\n", 1, SBX_FILE_READ_MAX_LINES, 4, "a\n", 1, 1, 0);
}

static void test_max_bytes_cut(void **state) {
        /* A first line longer than max_bytes: its head; paging moves on to the next line. */
        check_window("abcdefghij\nxy\n", 1, 2000, 4, "abcd", 1, 1, 2);
        check_window("abcdefghij\nxy\n", 2, 2000, 4, "xy\n", 2, 1, 0);
        /* The budget counts bytes as a JSON string takes them: '\n' is two, so an
         * 11-byte line needs 12. */
        check_window("abcdefghij\nxy\n", 1, 2000, 10, "abcdefghij", 1, 1, 2);
        check_window("abcdefghij\nxy\n", 1, 2000, 11, "abcdefghij", 1, 1, 2);
        check_window("abcdefghij\nxy\n", 1, 2000, 12, "abcdefghij\n", 1, 1, 2);
        /* Quotes and tabs take two bytes, other control characters six. */
        check_window("\"\"\"\"\nx\n", 1, 5, 6, "\"\"\"", 1, 1, 2);
        check_window("\"\"\"\"\nx\n", 1, 5, 10, "\"\"\"\"\n", 1, 1, 2);
        check_window("a\tb\n", 1, 5, 5, "a\tb", 1, 1, 0);
        check_window("a\x01" "b\n", 1, 5, 7, "a\x01", 1, 1, 0);
        check_window("a\nb\x01\n", 1, 5, 8, "a\n", 1, 1, 2);
        /* The last line, without '\n': cut, and nothing after it. */
        check_window("x\nabcdef", 2, 2000, 4, "abcd", 2, 1, 0);
        check_window("x\nabcdef", 2, 2000, 6, "abcdef", 2, 1, 0);
        /* Cut on a character boundary: EURO is bytes 2..4. */
        check_window("ab" EURO "cd\n", 1, 5, 4, "ab", 1, 1, 0);
        check_window("ab" EURO "cd\n", 1, 5, 5, "ab" EURO, 1, 1, 0);
        check_window("ab" EURO "cd\n", 1, 5, 6, "ab" EURO "c", 1, 1, 0);
        check_window("a" GRIN "b", 1, 5, 4, "a", 1, 1, 0);
        check_window(GRIN GRIN, 1, 5, 7, GRIN, 1, 1, 0);
        check_window(GRIN "\n", 1, 5, 4, GRIN, 1, 1, 0);
        /* A later line that does not fit ends the window before it, whole. */
        check_window("ab\n" EURO EURO "\n", 1, 5, 6, "ab\n", 1, 1, 2);
        /* A cut line is reported as truncated even when it is the last one. */
        {
                FileWindow w = read_ok("x\nabcdef", 2, 2000, 4);
                assert_true(w.truncated);
                file_window_done(&w);
        }
}

static void check_not_text(const char *data, size_t len, const char *what, uint64_t line, uint64_t offset) {
        FileWindow w = { .content = (char *) 1 };
        char err[256] = "", expect[256];

        snprintf(expect, sizeof(expect), "not a UTF-8 text file (%s at line %llu, byte offset %llu)", what,
                 (unsigned long long) line, (unsigned long long) offset);
        assert_false(text_is_utf8(data, len));
        /* The verdict does not depend on the window. */
        assert_int_equal(read_buf(data, len, 1, 1, 100, &w, err, sizeof(err)), -EILSEQ);
        assert_string_equal(err, expect);
        assert_int_equal(read_buf(data, len, 1000, 1, 100, &w, err, sizeof(err)), -EILSEQ);
        assert_string_equal(err, expect);
        assert_ptr_equal(w.content, (char *) 1);
}

#define NOT_TEXT(s, what, line, offset) check_not_text(s, sizeof(s) - 1, what, line, offset)

static void test_invalid_utf8(void **state) {
        NOT_TEXT("\x80", "invalid byte", 1, 0);                     /* lone continuation */
        NOT_TEXT("ab\n\xc0\x80", "invalid byte", 2, 3);             /* overlong NUL */
        NOT_TEXT("\xc1\xbf", "invalid byte", 1, 0);                 /* overlong 2-byte */
        NOT_TEXT("x\n\n\xe0\x80\x80", "invalid byte", 3, 3);        /* overlong 3-byte */
        NOT_TEXT("\xe0\x9f\xbf", "invalid byte", 1, 0);             /* overlong U+07FF */
        NOT_TEXT("\xf0\x80\x80\x80", "invalid byte", 1, 0);         /* overlong 4-byte */
        NOT_TEXT("\xf0\x8f\xbf\xbf", "invalid byte", 1, 0);         /* overlong U+FFFF */
        NOT_TEXT("x\xed\xa0\x80", "invalid byte", 1, 1);            /* U+D800 */
        NOT_TEXT("x\xed\xbf\xbf", "invalid byte", 1, 1);            /* U+DFFF */
        NOT_TEXT("\xf4\x90\x80\x80", "invalid byte", 1, 0);         /* U+110000 */
        NOT_TEXT("\xf5\x80\x80\x80", "invalid byte", 1, 0);
        NOT_TEXT("ok\xff", "invalid byte", 1, 2);
        NOT_TEXT("ok\xfe", "invalid byte", 1, 2);
        NOT_TEXT("a\nb\nc\xe2\x82", "invalid byte", 3, 5);          /* cut at EOF */
        NOT_TEXT("a\n\xf0\x9f\x98", "invalid byte", 2, 2);
        NOT_TEXT("ok\n\xc3", "invalid byte", 2, 3);
        NOT_TEXT("\xe2\x82" "A\n", "invalid byte", 1, 0);           /* cut by ASCII */
        NOT_TEXT("\xe2\x82\n", "invalid byte", 1, 0);               /* cut by '\n' */
        NOT_TEXT("a\n" EURO "\n\xc3\x28", "invalid byte", 3, 6);
        NOT_TEXT("a\nb\0c", "NUL byte", 2, 3);
        NOT_TEXT("\0", "NUL byte", 1, 0);
        NOT_TEXT("\xc3\0", "invalid byte", 1, 0);

        /* Valid edge cases. */
        assert_true(text_is_utf8("", 0));
        assert_true(text_is_utf8("a" EURO GRIN "\r\n\t", strlen("a" EURO GRIN "\r\n\t")));
        assert_true(text_is_utf8("\xc2\x80", 2));               /* U+0080 */
        assert_true(text_is_utf8("\xe0\xa0\x80", 3));           /* U+0800 */
        assert_true(text_is_utf8("\xed\x9f\xbf", 3));           /* U+D7FF */
        assert_true(text_is_utf8("\xee\x80\x80", 3));           /* U+E000 */
        assert_true(text_is_utf8("\xef\xbf\xbf", 3));           /* U+FFFF */
        assert_true(text_is_utf8("\xf0\x90\x80\x80", 4));       /* U+10000 */
        assert_true(text_is_utf8("\xf4\x8f\xbf\xbf", 4));       /* U+10FFFF */
        check_window("\xf4\x8f\xbf\xbf\n", 1, 1, 100, "\xf4\x8f\xbf\xbf\n", 1, 1, 0);
}

/* A character at every position across the end of the first read block. */
static void test_buffer_boundary(void **state) {
        static const char *const chars[] = { EURO, GRIN, "\xc3\xa9" };
        size_t size = 3 * READ_BUF;
        _cleanup_free_ char *data = malloc(size + 1);

        assert_non_null(data);
        for (size_t c = 0; c < ELEMENTSOF(chars); c++) {
                size_t clen = strlen(chars[c]);

                for (size_t at = READ_BUF - clen; at <= READ_BUF; at++) {
                        FileWindow w = {};
                        char err[256] = "", expect[256];
                        size_t len;

                        /* Line 1 is "a...a<char>b...b\n" around the boundary, line 2 follows. */
                        memset(data, 'a', at);
                        memcpy(data + at, chars[c], clen);
                        memset(data + at + clen, 'b', 100);
                        len = at + clen + 100;
                        memcpy(data + len, "\nend\n", 5);
                        len += 5;
                        data[len] = '\0';

                        w = read_ok(data, 1, 2000, size);
                        assert_memory_equal(w.content, data, len);
                        assert_int_equal(w.num_lines, 2);
                        file_window_done(&w);
                        check_window(data, 2, 1, 100, "end\n", 2, 1, 0);

                        /* Cut at max_bytes inside the character: back to its start,
                         * also when its lead byte came in the previous block. */
                        for (size_t cut = at + 1; cut < at + clen; cut++) {
                                w = read_ok(data, 1, 2000, cut);
                                assert_int_equal(w.len, at);
                                assert_true(w.truncated);
                                assert_int_equal(w.next_offset, 2);
                                file_window_done(&w);
                        }
                        w = read_ok(data, 1, 2000, at + clen);
                        assert_int_equal(w.len, at + clen);
                        file_window_done(&w);

                        /* The same character cut by an ASCII byte: invalid at its lead. */
                        data[at + clen - 1] = 'X';
                        assert_int_equal(read_buf(data, len, 1, 1, 100, &w, err, sizeof(err)), -EILSEQ);
                        snprintf(expect, sizeof(expect),
                                 "not a UTF-8 text file (invalid byte at line 1, byte offset %zu)", at);
                        assert_string_equal(err, expect);

                        /* And at the end of the file. */
                        assert_int_equal(read_buf(data, at + clen - 1, 1, 1, 100, &w, err, sizeof(err)), -EILSEQ);
                        assert_string_equal(err, expect);
                }
        }

        /* Lines spread over several blocks: the window starts in the third one. */
        for (size_t i = 0; i < size; i++)
                data[i] = (i % 100 == 99) ? '\n' : (char) ('a' + (i / 100) % 26);
        data[size] = '\0';
        {
                FileWindow w = read_ok(data, 1500, 3, 1000);

                assert_int_equal(w.total_lines, (size + 99) / 100);
                assert_memory_equal(w.content, data + 1499 * 100, 300);
                assert_int_equal(w.len, 300);
                assert_int_equal(w.next_offset, 1503);
                file_window_done(&w);
        }
        /* A NUL in the second block. */
        data[READ_BUF + 250] = '\0';
        {
                FileWindow w = {};
                char err[256] = "", expect[256];

                assert_int_equal(read_buf(data, size, 1, 1, 100, &w, err, sizeof(err)), -EILSEQ);
                snprintf(expect, sizeof(expect), "not a UTF-8 text file (NUL byte at line %u, byte offset %u)",
                         (READ_BUF + 250) / 100 + 1, READ_BUF + 250);
                assert_string_equal(err, expect);
        }
}

/* The fd's position is neither used nor moved. */
static void test_fd_position(void **state) {
        _cleanup_close_ int fd = make_file("a\nb\n", 4);
        FileWindow w = {};

        assert_int_equal(lseek(fd, 3, SEEK_SET), 3);
        assert_int_equal(read_fd(fd, 1, 10, 100, &w, NULL, 0), 0);
        assert_string_equal(w.content, "a\nb\n");
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 3);
        file_window_done(&w);
}

static void test_large_file(void **state) {
        size_t size = 10u << 20, len = 0, line_len = 0;
        _cleanup_free_ char *data = malloc(size + 128);
        _cleanup_(file_index_done) FileIndex index = {};
        uint64_t lines = 0;
        struct timespec t0, t1;
        FileWindow w = {};
        int fd;

        assert_non_null(data);
        while (len < size) {
                int n = sprintf(data + len, "%08llu some text of a source line, with " EURO " in it\n",
                                (unsigned long long) ++lines);
                len += (size_t) n;
                line_len = (size_t) n;
        }
        fd = make_file(data, len);

        assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t0), 0);
        assert_int_equal(file_index_build(fd, &index, NULL, 0), 0);
        assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t1), 0);
        print_message("10 MB index: %.1f ms\n",
                      (double) (t1.tv_sec - t0.tv_sec) * 1e3 + (double) (t1.tv_nsec - t0.tv_nsec) / 1e6);
        assert_int_equal(index.total_lines, lines);
        assert_int_equal(index.total_bytes, len);
        /* A mark a read block, but maybe for the last one (which may hold only the end of a line). */
        assert_true(index.n_marks + 1 >= (len + READ_BUF - 1) / READ_BUF);
        assert_true(index.n_marks <= (len + READ_BUF - 1) / READ_BUF);

        assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t0), 0);
        assert_int_equal(file_read_window(fd, &index, lines / 2, SBX_FILE_READ_MAX_LINES, SBX_RESULT_TEXT_BUDGET, &w,
                                          NULL, 0),
                         0);
        assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t1), 0);
        print_message("10 MB window (offset %llu, limit 2000), indexed: %.3f ms\n", (unsigned long long) lines / 2,
                      (double) (t1.tv_sec - t0.tv_sec) * 1e3 + (double) (t1.tv_nsec - t0.tv_nsec) / 1e6);
        assert_memory_equal(w.content, data + (lines / 2 - 1) * line_len, w.len);
        file_window_done(&w);

        assert_int_equal(file_read_window(fd, &index, 1, SBX_FILE_READ_MAX_LINES, SBX_RESULT_TEXT_BUDGET, &w, NULL,
                                          0),
                         0);

        /* 52-byte lines, 53 escaped (the '\n' takes two): 64 KiB holds 1236 of them, fewer than 2000. */
        assert_int_equal(line_len, 52);
        assert_int_equal(json_escaped_size(data, line_len), 53);
        assert_int_equal(w.total_lines, lines);
        assert_int_equal(w.total_bytes, len);
        assert_int_equal(w.num_lines, SBX_RESULT_TEXT_BUDGET / 53);
        assert_int_equal(w.len, w.num_lines * line_len);
        assert_memory_equal(w.content, data, w.len);
        assert_true(w.truncated);
        assert_int_equal(w.next_offset, w.num_lines + 1);
        file_window_done(&w);

        assert_int_equal(file_read_window(fd, &index, lines - 1, 2000, SBX_RESULT_TEXT_BUDGET, &w, NULL, 0), 0);
        assert_int_equal(w.num_lines, 2);
        assert_memory_equal(w.content, data + len - 2 * line_len, 2 * line_len);
        assert_false(w.truncated);
        file_window_done(&w);
        close(fd);
}

static void assert_same_window(const FileWindow *a, const FileWindow *b) {
        assert_int_equal(a->len, b->len);
        assert_memory_equal(a->content, b->content, a->len);
        assert_int_equal(a->start_line, b->start_line);
        assert_int_equal(a->num_lines, b->num_lines);
        assert_int_equal(a->total_lines, b->total_lines);
        assert_int_equal(a->total_bytes, b->total_bytes);
        assert_int_equal(a->has_next_offset, b->has_next_offset);
        assert_int_equal(a->next_offset, b->next_offset);
        assert_int_equal(a->truncated, b->truncated);
}

/* Marks sit where lines begin, one in each block that has a line beginning
 * in it; a window read from the mark before it is the window read from the
 * start of the file. */
static void test_index_marks(void **state) {
        size_t size = 4 * READ_BUF, len = 0;
        _cleanup_free_ char *data = malloc(size + 200);
        _cleanup_(file_index_done) FileIndex index = {};
        _cleanup_close_ int fd = -EBADF;
        FileIndex from_start;
        uint64_t lines = 0;

        assert_non_null(data);
        /* Short lines with a character across every block end, then one line
         * longer than a whole block (no line begins in the third block). */
        while (len < READ_BUF * 2 - 100) {
                lines++;
                len += (size_t) sprintf(data + len, "%llu %.*s" EURO "\n", (unsigned long long) lines,
                                        (int) (lines % 37), "abcdefghijklmnopqrstuvwxyz0123456789xyz");
        }
        memset(data + len, 'L', READ_BUF + 300);
        len += READ_BUF + 300;
        data[len++] = '\n';
        lines++;
        while (len < size) {
                len += (size_t) sprintf(data + len, "tail %llu\n", (unsigned long long) ++lines);
        }
        len += (size_t) sprintf(data + len, "last, without a newline");
        lines++;
        fd = make_file(data, len);

        assert_int_equal(file_index_build(fd, &index, NULL, 0), 0);
        assert_int_equal(index.total_bytes, len);
        assert_int_equal(index.total_lines, lines);
        assert_int_equal(file_index_size(&index), index.n_marks * sizeof(FileIndexMark));
        assert_int_equal(index.n_marks, (len + READ_BUF - 1) / READ_BUF - 1);
        assert_int_equal(index.marks[0].line, 1);
        assert_int_equal(index.marks[0].offset, 0);
        for (size_t i = 1; i < index.n_marks; i++) {
                const FileIndexMark *m = &index.marks[i];
                uint64_t before = 0;

                assert_true(m->offset > index.marks[i - 1].offset);
                assert_int_equal(data[m->offset - 1], '\n');
                for (size_t k = 0; k < m->offset; k++)
                        before += data[k] == '\n';
                assert_int_equal(m->line, before + 1);
        }

        from_start = (FileIndex) {
                .total_bytes = index.total_bytes,
                .total_lines = index.total_lines,
                .marks = index.marks,
                .n_marks = 1,
        };
        for (size_t i = 0; i < index.n_marks; i++)
                for (int64_t d = -2; d <= 2; d++) {
                        static const uint32_t limits[] = { 1, 3, 2000 };
                        static const size_t max_bytes[] = { 5, 100, SBX_RESULT_TEXT_BUDGET };
                        uint64_t offset = (uint64_t) MAX((int64_t) index.marks[i].line + d, (int64_t) 0);

                        for (size_t l = 0; l < ELEMENTSOF(limits); l++)
                                for (size_t b = 0; b < ELEMENTSOF(max_bytes); b++) {
                                        FileWindow w = {}, ref = {};

                                        assert_int_equal(file_read_window(fd, &index, offset, limits[l], max_bytes[b],
                                                                          &w, NULL, 0),
                                                         0);
                                        assert_int_equal(file_read_window(fd, &from_start, offset, limits[l],
                                                                          max_bytes[b], &ref, NULL, 0),
                                                         0);
                                        assert_same_window(&w, &ref);
                                        file_window_done(&w);
                                        file_window_done(&ref);
                                }
                }
        /* The long line, its neighbours, the last line and past the end. */
        for (uint64_t offset = lines - 2; offset <= lines + 1; offset++) {
                FileWindow w = {}, ref = {};

                assert_int_equal(file_read_window(fd, &index, offset, 2, 1000, &w, NULL, 0), 0);
                assert_int_equal(file_read_window(fd, &from_start, offset, 2, 1000, &ref, NULL, 0), 0);
                assert_same_window(&w, &ref);
                file_window_done(&w);
                file_window_done(&ref);
        }

        /* An empty file has no marks. */
        {
                _cleanup_(file_index_done) FileIndex empty = {};
                _cleanup_close_ int efd = make_file("", 0);
                FileWindow w = {};

                assert_int_equal(file_index_build(efd, &empty, NULL, 0), 0);
                assert_int_equal(empty.n_marks, 0);
                assert_null(empty.marks);
                assert_int_equal(file_index_size(&empty), 0);
                assert_int_equal(file_read_window(efd, &empty, 1, 10, 100, &w, NULL, 0), 0);
                assert_int_equal(w.len, 0);
                file_window_done(&w);
        }
        file_index_done(NULL);
}

/* What a window reads is checked again (whole read blocks): a file that
 * stopped being text after it was indexed gives an error, one that got
 * shorter a shorter window. */
static void test_window_after_change(void **state) {
        static const char text[] = "one\ntwo\nthree\nfour\n";
        _cleanup_(file_index_done) FileIndex index = {};
        _cleanup_close_ int fd = make_file(text, strlen(text));
        FileWindow w = { .content = (char *) 1 };
        char err[256] = "";

        assert_int_equal(file_index_build(fd, &index, NULL, 0), 0);
        assert_int_equal(pwrite(fd, "\xff", 1, 9), 1);
        assert_int_equal(file_read_window(fd, &index, 2, 10, 100, &w, err, sizeof(err)), -EILSEQ);
        assert_string_equal(err, "not a UTF-8 text file (invalid byte at line 3, byte offset 9)");
        assert_ptr_equal(w.content, (char *) 1);

        assert_int_equal(ftruncate(fd, 6), 0);
        assert_int_equal(file_read_window(fd, &index, 1, 10, 100, &w, err, sizeof(err)), 0);
        assert_string_equal(w.content, "one\ntw");
        assert_int_equal(w.num_lines, 2);
        file_window_done(&w);
        /* Cut inside a character at the end. */
        assert_int_equal(pwrite(fd, "\xe2\x82", 2, 4), 2);
        assert_int_equal(file_read_window(fd, &index, 1, 10, 100, &w, err, sizeof(err)), -EILSEQ);
}

static int edit(const char *content, const FileEditSpec *edits, size_t n, char **ret, uint64_t *ret_count,
                char *err, size_t err_size) {
        size_t len = (size_t) -1;
        int r;

        r = file_apply_edits(content, strlen(content), edits, n, ret, &len, ret_count, err, err_size);
        if (r == 0)
                assert_int_equal(strlen(*ret), len);
        return r;
}

#define SPEC(o, n, all) { .old_string = (o), .old_len = strlen(o), .new_string = (n), .new_len = strlen(n), .replace_all = (all) }

static void check_edit_error(const char *content, const FileEditSpec *edits, size_t n, int error, const char *msg) {
        char *out = (char *) 1;
        size_t len = 7;
        uint64_t count = 7;
        char err[256] = "";

        assert_int_equal(file_apply_edits(content, strlen(content), edits, n, &out, &len, &count, err, sizeof(err)), error);
        assert_string_equal(err, msg);
        assert_ptr_equal(out, (char *) 1);
        assert_int_equal(len, 7);
        assert_int_equal(count, 7);
}

/* The FILE_EDIT payload: a packed EditList; garbage and an empty list are
 * -EBADMSG, and the specs point at the unpacked strings. */
static void test_edit_list_parse(void **state) {
        Sbx__Edit e1 = SBX__EDIT__INIT, e2 = SBX__EDIT__INIT, *edits[] = { &e1, &e2 };
        Sbx__EditList list = SBX__EDIT_LIST__INIT;
        FileEditList parsed = {};
        uint8_t buf[256];
        size_t len;

        e1.old_string = (ProtobufCBinaryData) { .data = (uint8_t *) "a\0b", .len = 3 };
        e1.new_string = (ProtobufCBinaryData) { .data = (uint8_t *) "c", .len = 1 };
        e2.old_string = (ProtobufCBinaryData) { .data = (uint8_t *) "x", .len = 1 };
        e2.replace_all = true;
        assert_int_equal(file_edit_list_parse(buf, sbx__edit_list__pack(&list, buf), &parsed), -EBADMSG);
        assert_int_equal(file_edit_list_parse("\xff\xff\xff", 3, &parsed), -EBADMSG);
        list.edits = edits;
        list.n_edits = 2;
        len = sbx__edit_list__pack(&list, buf);
        assert_int_equal(file_edit_list_parse(buf, len, &parsed), 0);
        assert_int_equal(parsed.n, 2);
        assert_int_equal(parsed.specs[0].old_len, 3);
        assert_memory_equal(parsed.specs[0].old_string, "a\0b", 3);
        assert_int_equal(parsed.specs[0].new_len, 1);
        assert_false(parsed.specs[0].replace_all);
        assert_int_equal(parsed.specs[1].new_len, 0);
        assert_true(parsed.specs[1].replace_all);
        file_edit_list_done(&parsed);
        assert_null(parsed.list);
        file_edit_list_done(&parsed);  /* twice is harmless */
}

static void test_edit_errors(void **state) {
        const FileEditSpec empty[] = { SPEC("foo", "bar", false), SPEC("", "x", false) };
        const FileEditSpec missing[] = { SPEC("nope", "x", false) };
        const FileEditSpec ambiguous[] = { SPEC("one", "1", false), SPEC("two", "2", false), SPEC("x", "y", false) };
        const FileEditSpec noop[] = { SPEC("foo", "foo", false) };
        const FileEditSpec noop_all[] = { SPEC("x", "y", true), SPEC("y", "y", true) };
        /* Edit 2 matches text made by edit 1; edit 3 fails, so nothing is returned. */
        const FileEditSpec later[] = { SPEC("foo", "foo bar", false), SPEC("bar", "baz", false), SPEC("zzz", "q", false) };
        const char *content = "one two foo x x x x";

        check_edit_error(content, empty, 2, -EINVAL, "edits[1]: old_string is empty");
        check_edit_error(content, missing, 1, -EINVAL, "edits[0]: old_string not found in the file");
        check_edit_error(content, ambiguous, 3, -EINVAL,
                         "edits[2]: old_string occurs 4 times; add context to make it unique or set replace_all");
        check_edit_error(content, noop, 1, -EINVAL, "edits[0]: old_string and new_string are identical (no-op)");
        check_edit_error(content, noop_all, 2, -EINVAL, "edits[1]: old_string and new_string are identical (no-op)");
        check_edit_error(content, later, 3, -EINVAL, "edits[2]: old_string not found in the file");
        check_edit_error(content, NULL, 0, -EINVAL, "no edits given");
        check_edit_error("", missing, 1, -EINVAL, "edits[0]: old_string not found in the file");
        /* Overlapping occurrences do not count twice. */
        check_edit_error("aaaa", (const FileEditSpec[]) { SPEC("aa", "b", false) }, 1, -EINVAL,
                         "edits[0]: old_string occurs 2 times; add context to make it unique or set replace_all");
}

static void test_edit_sequential(void **state) {
        const FileEditSpec edits[] = {
                SPEC("foo", "baz qux", false),
                SPEC("qux bar", "end", false),   /* matches text made by edit 1 */
                SPEC("\r\n", "\n", true),
                SPEC("gone\n", "", false),
        };
        char *out = NULL, err[256] = "";
        uint64_t count = 0;

        assert_int_equal(edit("foo bar\r\ngone\nx\r\n", edits, ELEMENTSOF(edits), &out, &count, err, sizeof(err)), 0);
        assert_string_equal(out, "baz end\nx\n");
        assert_int_equal(count, 5);
        free(out);
}

static void test_edit_replace_all(void **state) {
        char *out = NULL;
        uint64_t count = 0;

        assert_int_equal(edit("a.b.c.d", (const FileEditSpec[]) { SPEC(".", "::", true), SPEC("d", "e", false) }, 2,
                              &out, &count, NULL, 0), 0);
        assert_string_equal(out, "a::b::c::e");
        assert_int_equal(count, 4);
        free(out);

        /* replace_all with one occurrence. */
        assert_int_equal(edit("abc", (const FileEditSpec[]) { SPEC("b", "", true) }, 1, &out, &count, NULL, 0), 0);
        assert_string_equal(out, "ac");
        assert_int_equal(count, 1);
        free(out);

        /* The replacement is not searched again. */
        assert_int_equal(edit("xx", (const FileEditSpec[]) { SPEC("x", "xx", true) }, 1, &out, &count, NULL, 0), 0);
        assert_string_equal(out, "xxxx");
        assert_int_equal(count, 2);
        free(out);
}

static void test_edit_overlap(void **state) {
        char *out = NULL;
        uint64_t count = 0;

        assert_int_equal(edit("aaa", (const FileEditSpec[]) { SPEC("aa", "b", true) }, 1, &out, &count, NULL, 0), 0);
        assert_string_equal(out, "ba");
        assert_int_equal(count, 1);
        free(out);

        assert_int_equal(edit("aaaaa", (const FileEditSpec[]) { SPEC("aa", "b", true) }, 1, &out, &count, NULL, 0), 0);
        assert_string_equal(out, "bba");
        assert_int_equal(count, 2);
        free(out);

        /* Without replace_all, "aa" occurs once in "aaa": the leftmost is replaced. */
        assert_int_equal(edit("aaa", (const FileEditSpec[]) { SPEC("aa", "b", false) }, 1, &out, &count, NULL, 0), 0);
        assert_string_equal(out, "ba");
        assert_int_equal(count, 1);
        free(out);
}

static void test_edit_bytes(void **state) {
        const char content[] = "a\0b\r\nc";
        const FileEditSpec e = { .old_string = "\0b\r", .old_len = 3, .new_string = "\xe2\x82", .new_len = 2 };
        char *out = NULL;
        size_t len = 0;
        uint64_t count = 0;

        assert_int_equal(file_apply_edits(content, sizeof(content) - 1, &e, 1, &out, &len, &count, NULL, 0), 0);
        assert_int_equal(len, 5);
        assert_memory_equal(out, "a\xe2\x82\nc", 6);
        assert_int_equal(count, 1);
        free(out);
}

static void test_edit_efbig(void **state) {
        size_t max = SBX_FILE_MAX;
        _cleanup_free_ char *big = malloc(max + 1);
        _cleanup_free_ char *huge = NULL;
        char *out = (char *) 1, err[256] = "";
        size_t len = 0;
        uint64_t count = 0;

        assert_non_null(big);
        memset(big, 'a', max);
        big[max / 2] = 'X';
        big[max] = '\0';

        /* Exactly SBX_FILE_MAX is allowed; one more byte is not. */
        assert_int_equal(file_apply_edits(big, max, (const FileEditSpec[]) { SPEC("X", "Y", false) }, 1, &out, &len,
                                          &count, err, sizeof(err)), 0);
        assert_int_equal(len, max);
        assert_int_equal(out[max / 2], 'Y');
        free(out);
        out = (char *) 1;
        check_edit_error(big, (const FileEditSpec[]) { SPEC("X", "YZ", false) }, 1, -EFBIG,
                         "edits[0]: the result would exceed 16777216 bytes");
        /* Shrinking a file is fine. */
        assert_int_equal(file_apply_edits(big, max, (const FileEditSpec[]) { SPEC("aX", "", false) }, 1, &out, &len,
                                          &count, NULL, 0), 0);
        assert_int_equal(len, max - 2);
        free(out);

        /* Growth by replace_all: 4 occurrences of a quarter of the limit, plus the rest. */
        huge = malloc(max / 4 + 1);
        assert_non_null(huge);
        memset(huge, 'h', max / 4 + 1);
        {
                FileEditSpec e = { .old_string = "a", .old_len = 1, .new_string = huge, .new_len = max / 4, .replace_all = true };
                char *o = NULL;

                assert_int_equal(file_apply_edits("aaaa", 4, &e, 1, &o, &len, &count, NULL, 0), 0);
                assert_int_equal(len, max);
                assert_int_equal(count, 4);
                free(o);
                o = NULL;
                e.new_len++;
                assert_int_equal(file_apply_edits("aaaa", 4, &e, 1, &o, &len, &count, err, sizeof(err)), -EFBIG);
                assert_string_equal(err, "edits[0]: the result would exceed 16777216 bytes");
                assert_null(o);
                /* A size that wraps around stays an error. */
                e.new_len = SIZE_MAX / 2;
                assert_int_equal(file_apply_edits("aaaa", 4, &e, 1, &o, &len, &count, NULL, 0), -EFBIG);
        }
}

static void test_text_helpers(void **state) {
        assert_int_equal(text_count_lines("", 0), 0);
        assert_int_equal(text_count_lines("a", 1), 1);
        assert_int_equal(text_count_lines("a\n", 2), 1);
        assert_int_equal(text_count_lines("a\nb", 3), 2);
        assert_int_equal(text_count_lines("a\r\nb\r\n", 6), 2);
        assert_int_equal(text_count_lines("a\0\nb", 4), 2);
        assert_false(text_is_utf8("a\0", 2));
        assert_true(text_is_utf8("a\0", 1));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_line_counts),
                cmocka_unit_test(test_empty_file),
                cmocka_unit_test(test_crlf),
                cmocka_unit_test(test_paging),
                cmocka_unit_test(test_offsets),
                cmocka_unit_test(test_bad_args),
                cmocka_unit_test(test_max_bytes_cut),
                cmocka_unit_test(test_invalid_utf8),
                cmocka_unit_test(test_buffer_boundary),
                cmocka_unit_test(test_fd_position),
                cmocka_unit_test(test_large_file),
                cmocka_unit_test(test_index_marks),
                cmocka_unit_test(test_window_after_change),
                cmocka_unit_test(test_edit_list_parse),
                cmocka_unit_test(test_edit_errors),
                cmocka_unit_test(test_edit_sequential),
                cmocka_unit_test(test_edit_replace_all),
                cmocka_unit_test(test_edit_overlap),
                cmocka_unit_test(test_edit_bytes),
                cmocka_unit_test(test_edit_efbig),
                cmocka_unit_test(test_text_helpers),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
