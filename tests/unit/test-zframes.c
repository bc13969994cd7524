/* Unit tests for supervisor/data/zframes.c, the compressed text of persisted
 * artifacts, and its use by data/transcript.c (transcript_compress): round
 * trips over several frames, a line across a frame boundary, the empty
 * text, damaged and cut files (a clear -EBADMSG, never a crash), and a
 * transcript that reads and searches the same compressed as before. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/outquery.h"
#include "data/transcript.h"
#include "data/zframes.h"
#include "macro.h"
#include "sbx-limits.h"

#define FRAME SBX_ARTIFACT_FRAME_BYTES

#include "tmpdir.h"

/* A memfd holding len bytes of text. */
static int text_fd(const char *text, size_t len) {
        int fd = memfd_create("text", MFD_CLOEXEC);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, len), (ssize_t) len);
        return fd;
}

/* text compressed into a new memfd. */
static int packed_fd(const char *text, size_t len, uint64_t *ret_written) {
        int src = text_fd(text, len), dst = memfd_create("packed", MFD_CLOEXEC);
        struct stat st;

        assert_true(dst >= 0);
        assert_int_equal(zframes_write(src, len, dst, ret_written), 0);
        assert_int_equal(fstat(dst, &st), 0);
        assert_int_equal((uint64_t) st.st_size, *ret_written);
        close(src);
        return dst;
}

/* About 2.5 frames of numbered lines, one of them long and across the first boundary. */
static char *sample(size_t *ret_len, uint64_t *ret_lines) {
        size_t cap = FRAME * 5 / 2, len = 0;
        char *t = malloc(cap + 1);
        uint64_t lines = 0;

        assert_non_null(t);
        while (len + 64 < cap) {
                if (len < FRAME && len + 100 > FRAME - 1000) {
                        /* 3000 bytes: from before the boundary to after it */
                        memset(t + len, 'x', 3000);
                        len += 3000;
                } else
                        len += (size_t) snprintf(t + len, cap - len, "line %" PRIu64 " of the sample\n", lines);
                if (t[len - 1] != '\n')
                        t[len++] = '\n';
                lines++;
        }
        *ret_len = len;
        *ret_lines = lines;
        return t;
}

/* The sample, compressed in a memfd (returned), and its sizes. */
static int sample_packed(char **ret_text, size_t *ret_len, uint64_t *ret_lines, uint64_t *ret_written) {
        *ret_text = sample(ret_len, ret_lines);
        return packed_fd(*ret_text, *ret_len, ret_written);
}

static void test_round_trip(void **state) {
        _cleanup_free_ char *text = NULL, *buf = NULL;
        ZFrames *z = NULL;
        uint64_t lines, written;
        size_t len;
        int fd = sample_packed(&text, &len, &lines, &written);

        assert_true(written < len / 4);
        assert_int_equal(zframes_open(fd, &z), 0);
        assert_int_equal(zframes_size(z), len);
        assert_int_equal(zframes_lines(z), lines);
        buf = malloc(len);
        assert_non_null(buf);
        /* the whole, then pieces: across each boundary, inside a frame, the last byte */
        assert_int_equal(zframes_pread(z, buf, len, 0), 0);
        assert_memory_equal(buf, text, len);
        for (uint64_t off = FRAME - 2000; off < len; off += FRAME) {
                assert_int_equal(zframes_pread(z, buf, 4000, off), 0);
                assert_memory_equal(buf, text + off, 4000);
        }
        assert_int_equal(zframes_pread(z, buf, 10, 12345), 0);
        assert_memory_equal(buf, text + 12345, 10);
        assert_int_equal(zframes_pread(z, buf, 1, len - 1), 0);
        assert_int_equal(buf[0], '\n');
        /* past the end, as a short file */
        assert_int_equal(zframes_pread(z, buf, 2, len - 1), -EIO);
        assert_int_equal(zframes_pread(z, buf, 1, len + 5), -EIO);
        zframes_free(z);
        close(fd);
}

static void test_empty(void **state) {
        ZFrames *z = NULL;
        uint64_t written;
        char c;
        int fd = packed_fd("", 0, &written);

        assert_int_equal(zframes_open(fd, &z), 0);
        assert_int_equal(zframes_size(z), 0);
        assert_int_equal(zframes_lines(z), 0);
        assert_int_equal(zframes_pread(z, &c, 0, 0), 0);
        assert_int_equal(zframes_pread(z, &c, 1, 0), -EIO);
        zframes_free(z);
        close(fd);
}

/* Byte at of fd xor'ed with 0x5a. */
static void flip(int fd, uint64_t at) {
        uint8_t b;

        assert_int_equal(pread(fd, &b, 1, (off_t) at), 1);
        b ^= 0x5a;
        assert_int_equal(pwrite(fd, &b, 1, (off_t) at), 1);
}

static void test_damage(void **state) {
        _cleanup_free_ char *text = NULL, *buf = malloc(FRAME);
        ZFrames *z = NULL;
        uint64_t lines, written;
        size_t len;
        int fd = sample_packed(&text, &len, &lines, &written);

        assert_non_null(buf);

        /* a damaged last frame (its end, before the index of 3 entries): its reads
         * fail, the first frame's still work */
        assert_int_equal(zframes_open(fd, &z), 0);
        flip(fd, written - 32 - 24 * 3 - 8 - 6);
        assert_int_equal(zframes_pread(z, buf, 100, 2 * FRAME + 10), -EBADMSG);
        assert_int_equal(zframes_pread(z, buf, 100, 10), 0);
        assert_memory_equal(buf, text + 10, 100);
        zframes_free(z);
        flip(fd, written - 32 - 24 * 3 - 8 - 6);

        /* a damaged index: the top byte of entry 1's file offset, then the magic */
        flip(fd, written - 32 - 24 * 2 + 23);
        assert_int_equal(zframes_open(fd, &z), -EBADMSG);
        flip(fd, written - 32 - 24 * 2 + 23);
        flip(fd, written - 3);
        assert_int_equal(zframes_open(fd, &z), -EBADMSG);
        flip(fd, written - 3);
        assert_int_equal(zframes_open(fd, &z), 0);
        zframes_free(z);

        /* cut short, anywhere: no index, or a frame gone */
        for (uint64_t cut = 0; cut < written; cut += written / 7 + 1) {
                assert_int_equal(ftruncate(fd, (off_t) cut), 0);
                assert_int_equal(zframes_open(fd, &z), -EBADMSG);
        }
        close(fd);

        /* not of this format at all */
        fd = text_fd(text, 4096);
        assert_int_equal(zframes_open(fd, &z), -EBADMSG);
        close(fd);
}

/* A transcript with streams apart over three frames, then its reads and a
 * search: the same before and after transcript_compress, and after a reopen. */
static void test_transcript(void **state) {
        static const char *const terms[] = { "needle" };
        OutQuery q = { .terms = terms, .n_terms = 1, .streams = { TRANSCRIPT_STDOUT, TRANSCRIPT_STDERR },
                       .n_streams = 2, .max_excerpts = 5, .context = 2, .budget = 1u << 16 };
        Transcript *t = NULL;
        char line[96], *before[3] = {}, *after = NULL;
        size_t blen[3], alen;
        uint64_t end, text, packed, bytes_before, bytes_after;
        unsigned files;
        OutResult r1, r2;
        struct stat st;

        assert_int_equal(transcript_create_streams(dirfd_, "cmd-zframes00000", 1ull << 30, &t), 0);
        for (int i = 0; i < 100000; i++) {
                int n = snprintf(line, sizeof(line), "%s line %d: some build output%s\n", i % 7 ? "out" : "err", i,
                                 i % 25000 == 24999 ? " needle" : "");
                assert_int_equal(transcript_feed_stream(t, i % 7 ? TRANSCRIPT_STDOUT : TRANSCRIPT_STDERR, line,
                                                        (size_t) n), 0);
        }
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
        assert_int_equal(transcript_open(dirfd_, "cmd-zframes00000", &t), 0);
        assert_int_equal(transcript_read_stream(t, TRANSCRIPT_STDOUT, 50000, 500, 1u << 20, &before[0], &blen[0], &end), 0);
        assert_int_equal(transcript_read_stream(t, TRANSCRIPT_STDERR, 9000, 500, 1u << 20, &before[1], &blen[1], &end), 0);
        assert_int_equal(transcript_read(t, 99900, 500, 1u << 20, &before[2], &blen[2], &end), 0);
        assert_int_equal(outquery_search(t, &q, &r1), 0);
        transcript_free(t);
        assert_int_equal(transcript_usage(dirfd_, "cmd-zframes00000", &bytes_before, &files), 0);

        assert_int_equal(transcript_compress(dirfd_, "cmd-zframes00000", &text, &packed), 0);
        assert_true(text > 2 * FRAME);
        assert_true(packed < text / 4);
        assert_int_equal(fstatat(dirfd_, "cmd-zframes00000.log", &st, 0), -1);
        assert_int_equal(fstatat(dirfd_, "cmd-zframes00000.zst", &st, 0), 0);
        assert_int_equal(transcript_usage(dirfd_, "cmd-zframes00000", &bytes_after, &files), 0);
        assert_true(bytes_after < bytes_before / 2);
        assert_int_equal(files, 3);
        /* nothing left to compress */
        assert_int_equal(transcript_compress(dirfd_, "cmd-zframes00000", &text, &packed), -ENOENT);

        assert_int_equal(transcript_open(dirfd_, "cmd-zframes00000", &t), 0);
        assert_int_equal(transcript_total_lines(t), 100000);
        assert_int_equal(transcript_read_stream(t, TRANSCRIPT_STDOUT, 50000, 500, 1u << 20, &after, &alen, &end), 0);
        assert_int_equal(alen, blen[0]);
        assert_memory_equal(after, before[0], alen);
        free(after);
        assert_int_equal(transcript_read_stream(t, TRANSCRIPT_STDERR, 9000, 500, 1u << 20, &after, &alen, &end), 0);
        assert_int_equal(alen, blen[1]);
        assert_memory_equal(after, before[1], alen);
        free(after);
        assert_int_equal(transcript_read(t, 99900, 500, 1u << 20, &after, &alen, &end), 0);
        assert_int_equal(alen, blen[2]);
        assert_memory_equal(after, before[2], alen);
        free(after);
        assert_int_equal(outquery_search(t, &q, &r2), 0);
        assert_int_equal(r2.n_excerpts, r1.n_excerpts);
        assert_int_equal(r2.match_count, r1.match_count);
        assert_true(r1.n_excerpts == 4);
        for (size_t i = 0; i < r1.n_excerpts; i++) {
                assert_int_equal(r2.excerpts[i].start, r1.excerpts[i].start);
                assert_int_equal(r2.excerpts[i].len, r1.excerpts[i].len);
                assert_memory_equal(r2.excerpts[i].content, r1.excerpts[i].content, r1.excerpts[i].len);
        }
        outquery_result_done(&r1);
        outquery_result_done(&r2);
        transcript_free(t);
        for (size_t i = 0; i < ELEMENTSOF(before); i++)
                free(before[i]);
}

/* A damaged compressed transcript is an error to open or read, not a crash. */
static void test_transcript_damaged(void **state) {
        Transcript *t = NULL;
        char line[64], *text = NULL;
        uint64_t total, packed, end;
        size_t len;
        int fd, r;

        assert_int_equal(transcript_create(dirfd_, "cmd-zdamaged0000", 1ull << 30, &t), 0);
        for (int i = 0; i < 60000; i++) {
                int n = snprintf(line, sizeof(line), "line %d of a long log %d\n", i, i * 7919);
                assert_int_equal(transcript_feed(t, line, (size_t) n), 0);
        }
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
        assert_int_equal(transcript_compress(dirfd_, "cmd-zdamaged0000", &total, &packed), 0);
        fd = openat(dirfd_, "cmd-zdamaged0000.zst", O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        flip(fd, 100);
        assert_int_equal(transcript_open(dirfd_, "cmd-zdamaged0000", &t), 0);
        assert_int_equal(transcript_read(t, 10, 5, 1u << 20, &text, &len, &end), -EBADMSG);
        transcript_free(t);
        flip(fd, 100);
        assert_int_equal(ftruncate(fd, (off_t) (packed - 1)), 0);
        r = transcript_open(dirfd_, "cmd-zdamaged0000", &t);
        assert_int_equal(r, -EBADMSG);
        close(fd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_empty),
                cmocka_unit_test(test_damage),
                cmocka_unit_test_setup_teardown(test_transcript, setup, teardown),
                cmocka_unit_test_setup_teardown(test_transcript_damaged, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
