/* Unit tests for supervisor/data/transcript.c: rendering, storage, paging, cap,
 * reopen and repair. Each test works in its own mkdtemp directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx-limits.h"
#include "json-escape.h"
#include "macro.h"
#include "data/transcript.h"

#define FFFD "\xef\xbf\xbd"

typedef struct Fixture {
        char path[64];
        int dirfd;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(Fixture));

        assert_non_null(f);
        strcpy(f->path, "/tmp/test-transcript.XXXXXX");
        assert_non_null(mkdtemp(f->path));
        f->dirfd = open(f->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(f->dirfd >= 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;
        DIR *d = fdopendir(f->dirfd);
        struct dirent *de;

        assert_non_null(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        assert_int_equal(unlinkat(dirfd(d), de->d_name, 0), 0);
        closedir(d);
        assert_int_equal(rmdir(f->path), 0);
        free(f);
        return 0;
}

static Transcript *new_transcript(Fixture *f, const char *id, uint64_t cap) {
        Transcript *t = NULL;
        assert_int_equal(transcript_create(f->dirfd, id, cap, &t), 0);
        assert_non_null(t);
        return t;
}

static void feed_str(Transcript *t, const char *s) {
        assert_int_equal(transcript_feed(t, s, strlen(s)), 0);
}

/* All lines of t (pending included) as one string. */
static char *read_all(Transcript *t) {
        char *text = NULL;
        size_t len = 0;
        uint64_t end = 0;

        assert_int_equal(transcript_read(t, 0, UINT64_MAX, SIZE_MAX, &text, &len, &end), 0);
        assert_int_equal(strlen(text), len);
        assert_int_equal(end, transcript_total_lines(t));
        return text;
}

static char *read_range(Transcript *t, uint64_t start, uint64_t limit, size_t max_bytes, uint64_t *ret_end) {
        char *text = NULL;
        size_t len = 0;

        assert_int_equal(transcript_read(t, start, limit, max_bytes, &text, &len, ret_end), 0);
        assert_int_equal(strlen(text), len);
        return text;
}

static unsigned counter;

/* Render input fed in the given chunk sizes (0 = one piece) and finished. */
static char *render_chunks(Fixture *f, const char *in, size_t in_len, size_t split, size_t step) {
        char id[32];
        Transcript *t;
        char *text;

        snprintf(id, sizeof(id), "r%u", counter++);
        t = new_transcript(f, id, SBX_TRANSCRIPT_CAP_DEFAULT);
        if (step > 0) {
                for (size_t i = 0; i < in_len; i += step)
                        assert_int_equal(transcript_feed(t, in + i, MIN(step, in_len - i)), 0);
        } else {
                assert_int_equal(transcript_feed(t, in, split), 0);
                assert_int_equal(transcript_feed(t, in + split, in_len - split), 0);
        }
        assert_int_equal(transcript_finish(t), 0);
        assert_int_equal(transcript_raw_bytes(t), in_len);
        text = read_all(t);
        transcript_free(t);
        assert_int_equal(transcript_remove(f->dirfd, id), 0);
        return text;
}

static char *render(Fixture *f, const char *in) {
        return render_chunks(f, in, strlen(in), strlen(in), 0);
}

static void check_render(Fixture *f, const char *in, const char *want) {
        _cleanup_free_ char *got = render(f, in);
        assert_string_equal(got, want);
}

static bool utf8_valid(const char *s, size_t n) {
        const uint8_t *p = (const uint8_t *) s;
        size_t i = 0;

        while (i < n) {
                uint8_t c = p[i];
                size_t k;
                uint32_t cp;

                if (c < 0x80) {
                        i++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf)
                        k = 1, cp = c & 0x1f;
                else if (c >= 0xe0 && c <= 0xef)
                        k = 2, cp = c & 0x0f;
                else if (c >= 0xf0 && c <= 0xf4)
                        k = 3, cp = c & 0x07;
                else
                        return false;
                if (i + k >= n)
                        return false;
                for (size_t j = 1; j <= k; j++) {
                        if ((p[i + j] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (p[i + j] & 0x3f);
                }
                if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
                    (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                i += k + 1;
        }
        return true;
}

static void test_names(void **state) {
        Fixture *f = *state;
        Transcript *t = NULL;
        const char *bad[] = { "", "a/b", "..", ".x", "a b", "a.log", "é" };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(transcript_create(f->dirfd, bad[i], 100, &t), -EINVAL);
                assert_int_equal(transcript_open(f->dirfd, bad[i], &t), -EINVAL);
                assert_int_equal(transcript_remove(f->dirfd, bad[i]), -EINVAL);
        }
        assert_null(t);
        assert_int_equal(transcript_open(f->dirfd, "missing", &t), -ENOENT);
        assert_int_equal(transcript_remove(f->dirfd, "missing"), -ENOENT);

        t = new_transcript(f, "Ok_name-1", 4096);
        feed_str(t, "x\n");
        assert_int_equal(transcript_finish(t), 0);
        assert_int_equal(transcript_feed(t, "x", 1), -EBADF);
        transcript_free(t);
        assert_int_equal(transcript_remove(f->dirfd, "Ok_name-1"), 0);
        assert_int_equal(faccessat(f->dirfd, "Ok_name-1.log", F_OK, 0), -1);
}

static int keep_one(const char *id, void *userdata) {
        return strcmp(id, userdata) == 0;
}

/* What has no record goes (sbxctl gc): both files of a transcript, an .lix
 * left alone by a crash, nothing that is not a transcript's. */
static void test_collect(void **state) {
        Fixture *f = *state;
        unsigned removed = 0;
        uint64_t bytes = 0;

        {
                Transcript *t = new_transcript(f, "kept", 4096);
                feed_str(t, "k\n");
                transcript_free(t);
        }
        {
                Transcript *t = new_transcript(f, "gone", 4096);
                assert_int_equal(transcript_feed(t, "line\n", 5), 0);
                assert_int_equal(transcript_finish(t), 0);
                transcript_free(t);
        }
        {
                Transcript *t = new_transcript(f, "half", 4096);
                feed_str(t, "h\n");
                transcript_free(t);
        }
        assert_int_equal(unlinkat(f->dirfd, "half.log", 0), 0);
        {
                _cleanup_close_ int fd = openat(f->dirfd, "other.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                assert_true(fd >= 0);
        }
        assert_int_equal(transcripts_collect(f->dirfd, keep_one, (void *) "kept", &removed, &bytes), 0);
        assert_int_equal(removed, 1);
        assert_true(bytes >= 5);
        assert_int_equal(faccessat(f->dirfd, "gone.log", F_OK, 0), -1);
        assert_int_equal(faccessat(f->dirfd, "gone.lix", F_OK, 0), -1);
        assert_int_equal(faccessat(f->dirfd, "half.lix", F_OK, 0), -1);
        assert_int_equal(faccessat(f->dirfd, "kept.log", F_OK, 0), 0);
        assert_int_equal(faccessat(f->dirfd, "kept.lix", F_OK, 0), 0);
        assert_int_equal(faccessat(f->dirfd, "other.txt", F_OK, 0), 0);
}

static void test_files_cloexec(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "fds", 4096);
        int n = 0;

        /* Its files are made with its first line. */
        assert_int_equal(transcript_feed(t, "x\n", 2), 0);
        /* Every fd above 2 that points into our directory must be close-on-exec. */
        for (int fd = 3; fd < 256; fd++) {
                char link[64], target[256];
                ssize_t k;

                snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
                k = readlink(link, target, sizeof(target) - 1);
                if (k < 0)
                        continue;
                target[k] = '\0';
                if (strncmp(target, f->path, strlen(f->path)) != 0 || strcmp(target, f->path) == 0)
                        continue;
                assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
                n++;
        }
        assert_int_equal(n, 2);
        transcript_free(t);
}

static void test_offsets_stable(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "stable", SBX_TRANSCRIPT_CAP_DEFAULT);
        char buf[64];

        for (unsigned i = 0; i < 500; i++) {
                /* Each line arrives in two pieces; the first piece leaves a pending line. */
                snprintf(buf, sizeof(buf), "line %u", i);
                feed_str(t, buf);
                assert_int_equal(transcript_committed_lines(t), i);
                assert_int_equal(transcript_total_lines(t), i + 1);
                feed_str(t, "\n");
                assert_int_equal(transcript_committed_lines(t), i + 1);
                if (i % 37 == 0) {
                        for (unsigned j = 0; j <= i; j += 7) {
                                _cleanup_free_ char *text = NULL;
                                char want[64];
                                uint64_t end;

                                text = read_range(t, j, 1, SIZE_MAX, &end);
                                snprintf(want, sizeof(want), "line %u\n", j);
                                assert_string_equal(text, want);
                                assert_int_equal(end, j + 1);
                        }
                }
        }
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
}

static void test_pending(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "pend", SBX_TRANSCRIPT_CAP_DEFAULT);
        char *text;

        assert_int_equal(transcript_total_lines(t), 0);
        feed_str(t, "first\nsec");
        assert_int_equal(transcript_committed_lines(t), 1);
        assert_int_equal(transcript_total_lines(t), 2);
        text = read_all(t);
        assert_string_equal(text, "first\nsec\n");
        free(text);

        feed_str(t, "ond\rS");
        text = read_all(t);
        assert_string_equal(text, "first\nSecond\n");
        free(text);

        feed_str(t, "\nthird");
        assert_int_equal(transcript_committed_lines(t), 2);
        assert_int_equal(transcript_total_lines(t), 3);
        assert_int_equal(transcript_finish(t), 0);
        assert_int_equal(transcript_committed_lines(t), 3);
        assert_int_equal(transcript_total_lines(t), 3);
        text = read_all(t);
        assert_string_equal(text, "first\nSecond\nthird\n");
        free(text);
        assert_int_equal(transcript_finish(t), 0);  /* idempotent */
        transcript_free(t);

        /* A finish without pending text adds no line. */
        t = new_transcript(f, "pend2", SBX_TRANSCRIPT_CAP_DEFAULT);
        feed_str(t, "a\n\033[31m\r");
        assert_int_equal(transcript_total_lines(t), 1);
        assert_int_equal(transcript_finish(t), 0);
        assert_int_equal(transcript_total_lines(t), 1);
        transcript_free(t);

        /* Erasing the pending line keeps it counted: total never decreases. */
        t = new_transcript(f, "pend3", SBX_TRANSCRIPT_CAP_DEFAULT);
        feed_str(t, "50%");
        assert_int_equal(transcript_total_lines(t), 1);
        feed_str(t, "\r\033[K");
        assert_int_equal(transcript_total_lines(t), 1);
        text = read_all(t);
        assert_string_equal(text, "\n");
        free(text);
        feed_str(t, "done\n");
        text = read_all(t);
        assert_string_equal(text, "done\n");
        free(text);
        transcript_free(t);
}

static void test_cr_bs(void **state) {
        Fixture *f = *state;

        check_render(f, "abc\rX\n", "Xbc\n");
        check_render(f, "abc\r\n", "abc\n");
        check_render(f, "one\r\ntwo\r\n", "one\ntwo\n");
        check_render(f, "10%\r20%\r100%\n", "100%\n");
        check_render(f, "\n\n", "\n\n");
        check_render(f, "abc\b\bX\n", "aXc\n");
        check_render(f, "\b\bab\bc\n", "ac\n");
        check_render(f, "ab\b\b\b\bc\n", "cb\n");
        check_render(f, "a\tb\n", "a\tb\n");
        check_render(f, "a\tb\r\tX\n", "\tXb\n");
        /* Columns are characters: overwriting replaces whole characters. */
        check_render(f, "héllo\rHE\n", "HEllo\n");
        check_render(f, "abc\r€\n", "€bc\n");
        check_render(f, "€€€\rx\n", "x€€\n");
        check_render(f, "a€b\b\bé\n", "aéb\n");
        check_render(f, "😀x\b\by\n", "yx\n");
        /* Other controls and DEL are dropped. */
        check_render(f, "a\x01\x02\x07\x0b\x0c\x7f" "bc\n", "abc\n");
        {
                _cleanup_free_ char *got = render_chunks(f, "a\0b\0\n", 5, 2, 0);
                assert_string_equal(got, "ab\n");
        }
        /* C1 controls as characters are invisible too. */
        check_render(f, "a\xc2\x9b" "b\n", "ab\n");
}

static void test_csi(void **state) {
        Fixture *f = *state;

        check_render(f, "\033[31mred\033[0m plain\n", "red plain\n");
        check_render(f, "\033[1;32;48;5;200mok\033[m\n", "ok\n");
        check_render(f, "\033[?25lhidden cursor\033[?25h\n", "hidden cursor\n");
        check_render(f, "a\033[2Cb\033[1Ac\033[H\033[2J\n", "abc\n");
        check_render(f, "\033(Bx\033=y\0337z\n", "xyz\n");
        /* EL */
        check_render(f, "abcdef\r\033[Kxy\n", "xy\n");
        check_render(f, "abcdef\rab\033[K\n", "ab\n");
        check_render(f, "abcdef\rab\033[0K\n", "ab\n");
        check_render(f, "abcdef\rab\033[0Kc\n", "abc\n");
        check_render(f, "abcdef\033[2K\n", "\n");
        check_render(f, "abc\033[2Kx\n", "   x\n");
        check_render(f, "abc\033[2K\rxy\n", "xy\n");
        check_render(f, "abcdef\rabc\033[2K\n", "\n");
        check_render(f, "abcdef\r\033[2Kxy\n", "xy\n");
        check_render(f, "abcdef\b\b\b\033[1K\n", "    ef\n");
        check_render(f, "ab\033[1Kc\n", "  c\n");
        /* Progress bar idiom. */
        check_render(f, "[##  ] 50%\r\033[K[####] 100%\ndone\n", "[####] 100%\ndone\n");
        /* Non-EL with K final but private/extra params are ignored. */
        check_render(f, "abc\r\033[?2Kx\n", "xbc\n");
        check_render(f, "abc\r\033[1;2Kx\n", "xbc\n");
        /* A newline inside a CSI is executed. */
        check_render(f, "a\033[3\n1mb\n", "a\nb\n");
        /* ESC aborts a CSI and starts a new sequence; CAN cancels. */
        check_render(f, "a\033[12\033[31mb\033[5\x18" "c\n", "abc\n");
        /* An 8-bit byte ends a CSI and is rendered. */
        check_render(f, "a\033[1é\n", "aé\n");
}

static void test_osc(void **state) {
        Fixture *f = *state;

        check_render(f, "\033]0;window title\007text\n", "text\n");
        check_render(f, "\033]0;title\033\\text\n", "text\n");
        check_render(f, "\033]8;;http://example.com\033\\link\033]8;;\033\\ after\n", "link after\n");
        check_render(f, "\033P1$r0m\033\\dcs\n", "dcs\n");
        check_render(f, "\033_apc\007x\n", "x\n");
        /* ESC not followed by '\\' ends the string and starts a new sequence. */
        check_render(f, "\033]0;t\033[31mred\n", "red\n");
}

/* Every split point of every input renders like the whole input, and so does
 * feeding one byte at a time. */
static void test_split(void **state) {
        Fixture *f = *state;
        const char *inputs[] = {
                "\033[31mred\033[0m\n",
                "ab\033[2Kc\n",
                "xyz\r\033[Kq\n",
                "\033]0;title\033\\t\n",
                "\033]0;title\007t\n",
                "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80!\n",
                "bad \xe2\x82\n\xf0\x9f\x98 \xff\xc3\n",
                "a\r\nb\b\bc\td\n",
                "\033(B\0337x\033[?25l\n",
                "abc\r\xe2\x82\xac\n",
                "tail without newline \xe2\x82",
                "pending \033[3",
        };

        for (size_t i = 0; i < ELEMENTSOF(inputs); i++) {
                size_t n = strlen(inputs[i]);
                _cleanup_free_ char *whole = render(f, inputs[i]);
                _cleanup_free_ char *bytes = render_chunks(f, inputs[i], n, 0, 1);

                assert_true(utf8_valid(whole, strlen(whole)));
                assert_string_equal(bytes, whole);
                for (size_t s = 0; s <= n; s++) {
                        _cleanup_free_ char *split = render_chunks(f, inputs[i], n, s, 0);
                        assert_string_equal(split, whole);
                }
        }
}

/* Random mixes of controls, escapes and UTF-8 fragments render the same
 * whatever the chunking, and always as valid UTF-8. */
static void test_split_random(void **state) {
        Fixture *f = *state;
        static const char alphabet[] = "aaaaabbbbb     \n\r\b\t\033[]K02;\\\x07\xe2\x82\xac\xc3\xa9\xff\x80m?P";
        uint32_t x = 42;
        char in[12000];

        for (int round = 0; round < 40; round++) {
                size_t n = sizeof(in);
                char *whole, *chunked, *bytes;

                for (size_t i = 0; i < n; i++) {
                        x = x * 1103515245u + 12345u;
                        in[i] = alphabet[(x >> 16) % (sizeof(alphabet) - 1)];
                }
                /* Some rounds get a long plain stretch, to wrap mid-sequence. */
                if (round % 4 == 0)
                        memset(in + 100, 'z', 2 * SBX_LINE_MAX > n - 200 ? n - 200 : 2 * SBX_LINE_MAX);
                whole = render_chunks(f, in, n, n, 0);
                assert_true(utf8_valid(whole, strlen(whole)));
                chunked = render_chunks(f, in, n, 0, 1 + (size_t) round % 37);
                assert_string_equal(chunked, whole);
                bytes = render_chunks(f, in, n, 0, 1);
                assert_string_equal(bytes, whole);
                free(whole);
                free(chunked);
                free(bytes);
        }
}

static void test_invalid_utf8(void **state) {
        Fixture *f = *state;

        check_render(f, "\xff\n", FFFD "\n");
        check_render(f, "a\x80z\n", "a" FFFD "z\n");
        check_render(f, "\xe2\x82\n", FFFD "\n");
        check_render(f, "\xe2\x82x\n", FFFD "x\n");
        check_render(f, "\xc0\xaf\n", FFFD FFFD "\n");
        check_render(f, "\xed\xa0\x80\n", FFFD FFFD FFFD "\n");  /* surrogate */
        check_render(f, "\xf4\x90\x80\x80\n", FFFD FFFD FFFD FFFD "\n");  /* > U+10FFFF */
        check_render(f, "\xe0\x80\xaf\n", FFFD FFFD FFFD "\n");  /* overlong */
        check_render(f, "\xf0\x9f\x98\033[31m\n", FFFD "\n");
        check_render(f, "\xef\xbf\xbd\n", FFFD "\n");
        check_render(f, "ok\xe2\x82", "ok" FFFD "\n");  /* partial at finish */

        /* Random bytes always give valid UTF-8. */
        {
                Transcript *t = new_transcript(f, "random", SBX_TRANSCRIPT_CAP_DEFAULT);
                uint8_t buf[4096];
                uint32_t x = 12345;
                _cleanup_free_ char *text = NULL;

                for (int round = 0; round < 64; round++) {
                        for (size_t i = 0; i < sizeof(buf); i++) {
                                x = x * 1103515245u + 12345u;
                                buf[i] = (uint8_t) (x >> 16);
                        }
                        assert_int_equal(transcript_feed(t, buf, sizeof(buf)), 0);
                }
                assert_int_equal(transcript_finish(t), 0);
                text = read_all(t);
                assert_true(utf8_valid(text, strlen(text)));
                transcript_free(t);
        }
}

static void test_long_lines(void **state) {
        Fixture *f = *state;
        size_t n = 10000;
        _cleanup_free_ char *in = malloc(3 * n + 2);
        _cleanup_free_ char *want = malloc(3 * n + 16);
        char *got;

        /* ASCII wraps at exactly SBX_LINE_MAX bytes. */
        memset(in, 'a', n);
        strcpy(in + n, "\n");
        got = render(f, in);
        assert_int_equal(strlen(got), n + 3);
        for (size_t i = 0, pos = 0; i < 3; i++) {
                size_t len = MIN((size_t) SBX_LINE_MAX, n - i * SBX_LINE_MAX);
                assert_int_equal(strspn(got + pos, "a"), len);
                assert_int_equal(got[pos + len], '\n');
                pos += len + 1;
        }
        free(got);

        /* Multi-byte characters are never cut: 1365 * 3 = 4095 bytes per line. */
        for (size_t i = 0; i < n; i++)
                memcpy(in + 3 * i, "\xe2\x82\xac", 3);
        strcpy(in + 3 * n, "\n");
        got = render(f, in);
        {
                char *p = got;
                size_t chars = 0;
                while (*p) {
                        char *nl = strchr(p, '\n');
                        assert_non_null(nl);
                        assert_true((size_t) (nl - p) <= SBX_LINE_MAX);
                        assert_int_equal((nl - p) % 3, 0);
                        if (nl[1])
                                assert_int_equal(nl - p, 4095);
                        chars += (size_t) (nl - p) / 3;
                        p = nl + 1;
                }
                assert_int_equal(chars, n);
                assert_true(utf8_valid(got, strlen(got)));
        }
        free(got);

        /* A line of exactly SBX_LINE_MAX bytes is one line; one more byte wraps. */
        memset(in, 'b', SBX_LINE_MAX);
        strcpy(in + SBX_LINE_MAX, "\n");
        got = render(f, in);
        assert_int_equal(strlen(got), SBX_LINE_MAX + 1);
        free(got);
        memset(in, 'b', SBX_LINE_MAX + 1);
        strcpy(in + SBX_LINE_MAX + 1, "\n");
        got = render(f, in);
        memset(want, 'b', SBX_LINE_MAX);
        strcpy(want + SBX_LINE_MAX, "\nb\n");
        assert_string_equal(got, want);
        free(got);
}

static off_t file_size(Fixture *f, const char *name) {
        struct stat st;
        assert_int_equal(fstatat(f->dirfd, name, &st, 0), 0);
        return st.st_size;
}

/* Bytes the files of transcript id take on disk (du). */
static uint64_t disk_bytes(Fixture *f, const char *id) {
        static const char *const sfx[] = { "log", "lix", "str" };
        uint64_t sum = 0;

        for (size_t i = 0; i < ELEMENTSOF(sfx); i++) {
                char name[64];
                struct stat st;

                snprintf(name, sizeof(name), "%s.%s", id, sfx[i]);
                if (fstatat(f->dirfd, name, &st, 0) == 0)
                        sum += (uint64_t) st.st_blocks * 512;
        }
        return sum;
}

/* The cap counts what is stored in whole blocks, the index's too. */
static void test_cap(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "cap", 16384);
        const char *marker = "[sbx: transcript cap of 16384 bytes reached; further output is not kept]\n";
        uint64_t total, bytes;
        unsigned files;
        char *text;

        for (int i = 0; i < 2000; i++)
                feed_str(t, "123456789\n");
        assert_true(transcript_capped(t));
        assert_int_equal(transcript_raw_bytes(t), 20000);
        total = transcript_total_lines(t);
        assert_int_equal(total, transcript_committed_lines(t));
        /* Room for the marker is kept; past 64 lines the index takes a block. */
        assert_int_equal(total, (16384 - SBX_TRANSCRIPT_BLOCK - strlen(marker)) / 10 + 1);
        text = read_all(t);
        assert_int_equal(strlen(text), (total - 1) * 10 + strlen(marker));
        assert_string_equal(text + (total - 1) * 10, marker);
        assert_memory_equal(text, "123456789\n", 10);
        free(text);

        /* After the cap output is only counted. */
        feed_str(t, "more\npending");
        assert_int_equal(transcript_raw_bytes(t), 20012);
        assert_int_equal(transcript_total_lines(t), total);
        assert_int_equal(transcript_finish(t), 0);
        assert_int_equal(transcript_total_lines(t), total);
        assert_true(transcript_stored_bytes(t) <= 16384);
        assert_int_equal(transcript_usage(f->dirfd, "cap", &bytes, &files), 0);
        assert_int_equal(bytes, transcript_stored_bytes(t));
        assert_int_equal(files, 2);
        transcript_free(t);
        assert_true(disk_bytes(f, "cap") <= 16384);

        /* The capped state survives a reopen. */
        assert_int_equal(transcript_open(f->dirfd, "cap", &t), 0);
        assert_true(transcript_capped(t));
        assert_int_equal(transcript_total_lines(t), total);
        transcript_free(t);

        /* A long pending line that does not fit is replaced by the marker too. */
        t = new_transcript(f, "cap2", 4096);
        feed_str(t, "short\n");
        for (int i = 0; i < 405; i++)
                feed_str(t, "0123456789");
        assert_false(transcript_capped(t));
        assert_int_equal(transcript_finish(t), 0);
        assert_true(transcript_capped(t));
        text = read_all(t);
        assert_string_equal(text, "short\n[sbx: transcript cap of 4096 bytes reached; further output is not kept]\n");
        free(text);
        transcript_free(t);
}

/* A `yes ''` flood: one byte per line. The index costs 8 bytes per
 * SBX_TRANSCRIPT_INDEX_LINES lines (it cost 8 per line: 8 times the text),
 * and text and index together stay within the cap. */
static void test_flood(void **state) {
        Fixture *f = *state;
        const uint64_t cap = 1u << 20;
        Transcript *t = new_transcript(f, "yes", cap);
        _cleanup_free_ char *nl = malloc(65536);
        uint64_t lines, end;
        char *text;

        memset(nl, '\n', 65536);
        for (int i = 0; i < 64; i++)    /* 4 MiB of empty lines */
                assert_int_equal(transcript_feed(t, nl, 65536), 0);
        assert_true(transcript_capped(t));
        assert_int_equal(transcript_finish(t), 0);
        lines = transcript_total_lines(t);
        assert_true(lines > cap * 8 / 10);
        assert_true(transcript_stored_bytes(t) <= cap);
        assert_int_equal(file_size(f, "yes.lix"), (off_t) ((lines / SBX_TRANSCRIPT_INDEX_LINES) * 8));
        text = read_range(t, lines - 3, 10, SIZE_MAX, &end);
        assert_int_equal(end, lines);
        assert_memory_equal(text, "\n\n[sbx: transcript cap of", 25);
        free(text);
        transcript_free(t);
        assert_true(disk_bytes(f, "yes") <= cap);
}

/* A budget's limit cuts like the cap, and its marker names the budget. */
static void test_limit(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "lim", SBX_TRANSCRIPT_CAP_DEFAULT), *o = NULL;
        char *text;
        uint64_t total;

        transcript_set_limit(t, 8192, "sandbox_transcripts_max_bytes = 8192");
        for (int i = 0; i < 2000; i++)
                feed_str(t, "123456789\n");
        assert_true(transcript_capped(t));
        assert_true(transcript_stored_bytes(t) <= 8192);
        total = transcript_total_lines(t);
        text = read_range(t, total - 1, 1, SIZE_MAX, NULL);
        assert_string_equal(text, "[sbx: transcript cut at 8192 bytes stored to stay within "
                                  "sandbox_transcripts_max_bytes = 8192; further output is not kept]\n");
        free(text);
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
        assert_int_equal(transcript_open(f->dirfd, "lim", &o), 0);
        assert_true(transcript_capped(o));
        assert_int_equal(transcript_total_lines(o), total);
        transcript_free(o);

        /* Raised again (others were evicted), output is stored again until the new limit. */
        t = new_transcript(f, "lim2", SBX_TRANSCRIPT_CAP_DEFAULT);
        transcript_set_limit(t, 4096, "transcripts_max_bytes = 4096");
        feed_str(t, "a\n");
        transcript_set_limit(t, UINT64_MAX, "");
        for (int i = 0; i < 1000; i++)
                feed_str(t, "123456789\n");
        assert_false(transcript_capped(t));
        assert_int_equal(transcript_total_lines(t), 1001);
        transcript_free(t);
}

static void test_read_limits(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "limits", SBX_TRANSCRIPT_CAP_DEFAULT);
        char *text;
        uint64_t end;

        feed_str(t, "zero\none\ntwo\nthree\nfour\npend");
        assert_int_equal(transcript_total_lines(t), 6);

        text = read_range(t, 1, 2, SIZE_MAX, &end);
        assert_string_equal(text, "one\ntwo\n");
        assert_int_equal(end, 3);
        free(text);

        text = read_range(t, 4, 10, SIZE_MAX, &end);
        assert_string_equal(text, "four\npend\n");
        assert_int_equal(end, 6);
        free(text);

        text = read_range(t, 5, 1, SIZE_MAX, &end);
        assert_string_equal(text, "pend\n");
        assert_int_equal(end, 6);
        free(text);

        /* The budget: whole lines only, at least one, counted as escaped in a
         * JSON string ("zero\none\n" takes 11 bytes there). */
        text = read_range(t, 0, 100, 11, &end);
        assert_string_equal(text, "zero\none\n");
        assert_int_equal(end, 2);
        free(text);
        text = read_range(t, 0, 100, 10, &end);
        assert_string_equal(text, "zero\n");
        assert_int_equal(end, 1);
        free(text);
        text = read_range(t, 3, 100, 1, &end);
        assert_string_equal(text, "three\n");
        assert_int_equal(end, 4);
        free(text);
        text = read_range(t, 4, 100, 0, &end);
        assert_string_equal(text, "four\n");
        assert_int_equal(end, 5);
        free(text);
        text = read_range(t, 4, 100, 12, &end);    /* "four\npend\n" is 12 escaped */
        assert_string_equal(text, "four\npend\n");
        assert_int_equal(end, 6);
        free(text);
        text = read_range(t, 4, 100, 11, &end);
        assert_string_equal(text, "four\n");
        assert_int_equal(end, 5);
        free(text);
        text = read_range(t, 5, 100, 1, &end);
        assert_string_equal(text, "pend\n");
        assert_int_equal(end, 6);
        free(text);

        /* Escapes count: a line of quotes takes twice its bytes. */
        assert_int_equal(json_escaped_size("\"\"\"\n", 4), 8);
        assert_int_equal(json_escaped_size("a\x01\t", 3), 9);

        /* limit 0 returns nothing. */
        text = read_range(t, 2, 0, SIZE_MAX, &end);
        assert_string_equal(text, "");
        assert_int_equal(end, 2);
        free(text);

        /* Start at or beyond the end. */
        text = read_range(t, 6, 10, SIZE_MAX, &end);
        assert_string_equal(text, "");
        assert_int_equal(end, 6);
        free(text);
        text = read_range(t, 1000000, 10, SIZE_MAX, &end);
        assert_string_equal(text, "");
        assert_int_equal(end, 6);
        free(text);

        assert_int_equal(transcript_finish(t), 0);
        text = read_range(t, 5, 10, SIZE_MAX, &end);
        assert_string_equal(text, "pend\n");
        assert_int_equal(end, 6);
        free(text);
        transcript_free(t);
}

static void test_reopen(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "reopen", SBX_TRANSCRIPT_CAP_DEFAULT);
        Transcript *o = NULL;
        char *a, *b, *c;
        uint64_t end;

        feed_str(t, "\033[32mgreen\033[0m\nprog 1%\rprog 100%\nh\xc3\xa9\n\nlast");
        assert_int_equal(transcript_finish(t), 0);
        a = read_all(t);

        assert_int_equal(transcript_open(f->dirfd, "reopen", &o), 0);
        assert_int_equal(transcript_total_lines(o), 5);
        assert_int_equal(transcript_committed_lines(o), 5);
        assert_false(transcript_capped(o));
        assert_int_equal(transcript_feed(o, "x", 1), -EBADF);
        assert_int_equal(transcript_finish(o), 0);
        b = read_all(o);
        assert_string_equal(a, b);
        assert_string_equal(b, "green\nprog 100%\nhé\n\nlast\n");
        c = read_range(o, 2, 2, SIZE_MAX, &end);
        assert_string_equal(c, "hé\n\n");
        assert_int_equal(end, 4);
        free(a);
        free(b);
        free(c);
        transcript_free(o);
        transcript_free(t);

        /* An empty transcript has no files; it reads as transcript_empty. */
        t = new_transcript(f, "empty", 4096);
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
        assert_int_equal(transcript_open(f->dirfd, "empty", &o), -ENOENT);
        assert_int_equal(transcript_empty(false, &o), 0);
        assert_int_equal(transcript_total_lines(o), 0);
        a = read_all(o);
        assert_string_equal(a, "");
        free(a);
        transcript_free(o);
}

static void append_file(Fixture *f, const char *name, const void *data, size_t len) {
        int fd = openat(f->dirfd, name, O_WRONLY | O_APPEND | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t) len);
        close(fd);
}

static void truncate_file(Fixture *f, const char *name, off_t size) {
        int fd = openat(f->dirfd, name, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, size), 0);
        close(fd);
}

static void test_torn(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "torn", SBX_TRANSCRIPT_CAP_DEFAULT);
        Transcript *o = NULL;
        uint64_t huge = UINT64_MAX / 2, zero = 0, end;
        char *text, line[32];

        feed_str(t, "one\ntwo\nthree\n");
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);

        /* A partial entry at the end of .lix. */
        append_file(f, "torn.lix", "\x20\x00\x00", 3);
        assert_int_equal(transcript_open(f->dirfd, "torn", &o), 0);
        assert_int_equal(transcript_total_lines(o), 3);
        text = read_all(o);
        assert_string_equal(text, "one\ntwo\nthree\n");
        free(text);
        transcript_free(o);
        assert_int_equal(file_size(f, "torn.lix"), 0);

        /* Entries past the end of .log, zero-filled entries and a torn line of text. */
        append_file(f, "torn.log", "four", 4);
        append_file(f, "torn.lix", &huge, 8);
        append_file(f, "torn.lix", &zero, 8);
        append_file(f, "torn.lix", &zero, 8);
        assert_int_equal(transcript_open(f->dirfd, "torn", &o), 0);
        assert_int_equal(transcript_total_lines(o), 3);
        text = read_all(o);
        assert_string_equal(text, "one\ntwo\nthree\n");
        free(text);
        transcript_free(o);
        assert_int_equal(file_size(f, "torn.lix"), 0);
        assert_int_equal(file_size(f, "torn.log"), 14);

        /* .log cut short: the line it no longer holds is dropped. */
        truncate_file(f, "torn.log", 11);
        assert_int_equal(transcript_open(f->dirfd, "torn", &o), 0);
        assert_int_equal(transcript_total_lines(o), 2);
        text = read_all(o);
        assert_string_equal(text, "one\ntwo\n");
        free(text);
        transcript_free(o);
        assert_int_equal(file_size(f, "torn.log"), 8);

        /* Lines whose entries a crash lost: those past one block without an entry go. */
        t = new_transcript(f, "lost", SBX_TRANSCRIPT_CAP_DEFAULT);
        for (unsigned i = 0; i < 5 * SBX_TRANSCRIPT_INDEX_LINES; i++) {
                snprintf(line, sizeof(line), "l%u\n", i);
                feed_str(t, line);
        }
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
        assert_int_equal(file_size(f, "lost.lix"), 5 * 8);
        truncate_file(f, "lost.lix", 8 + 3);
        assert_int_equal(transcript_open(f->dirfd, "lost", &o), 0);
        assert_int_equal(transcript_total_lines(o), 2 * SBX_TRANSCRIPT_INDEX_LINES - 1);
        text = read_range(o, 2 * SBX_TRANSCRIPT_INDEX_LINES - 2, 5, SIZE_MAX, &end);
        snprintf(line, sizeof(line), "l%u\n", 2 * SBX_TRANSCRIPT_INDEX_LINES - 2);
        assert_string_equal(text, line);
        assert_int_equal(end, 2 * SBX_TRANSCRIPT_INDEX_LINES - 1);
        free(text);
        transcript_free(o);
        assert_int_equal(file_size(f, "lost.lix"), 8);
}

static void test_big(void **state) {
        Fixture *f = *state;
        Transcript *t = new_transcript(f, "big", SBX_TRANSCRIPT_CAP_DEFAULT);
        Transcript *o = NULL;
        const size_t lines = 1000000, chunk_lines = 5000;
        _cleanup_free_ char *buf = malloc(chunk_lines * 32);
        char *text, *p;
        uint64_t end;

        for (size_t i = 0; i < lines; i += chunk_lines) {
                size_t n = 0;
                for (size_t j = i; j < i + chunk_lines; j++)
                        n += (size_t) sprintf(buf + n, "line %zu of the big one\n", j);
                assert_int_equal(transcript_feed(t, buf, n), 0);
        }
        assert_int_equal(transcript_total_lines(t), lines);
        text = read_range(t, 999000, 1000, SIZE_MAX, &end);
        assert_int_equal(end, 1000000);
        p = text;
        for (size_t j = 999000; j < 1000000; j++) {
                char want[64];
                int n = sprintf(want, "line %zu of the big one\n", j);
                assert_memory_equal(p, want, (size_t) n);
                p += n;
        }
        assert_int_equal(*p, '\0');
        free(text);
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);

        assert_int_equal(transcript_open(f->dirfd, "big", &o), 0);
        assert_int_equal(transcript_total_lines(o), lines);
        text = read_range(o, 999000, 1000, SBX_RESULT_TEXT_BUDGET, &end);
        assert_int_equal(end, 1000000);
        assert_memory_equal(text, "line 999000 of the big one\n", 27);
        free(text);
        text = read_range(o, 123456, 3, SIZE_MAX, &end);
        assert_string_equal(text, "line 123456 of the big one\nline 123457 of the big one\nline 123458 of the big one\n");
        assert_int_equal(end, 123459);
        free(text);
        transcript_free(o);
}

/* ---- stdout and stderr apart ---------------------------------------------- */

#define OUT TRANSCRIPT_STDOUT
#define ERR TRANSCRIPT_STDERR

static Transcript *new_apart(Fixture *f, const char *id, uint64_t cap) {
        Transcript *t = NULL;
        assert_int_equal(transcript_create_streams(f->dirfd, id, cap, &t), 0);
        assert_non_null(t);
        assert_true(transcript_has_streams(t));
        return t;
}

static void feed_on(Transcript *t, TranscriptStream s, const char *text) {
        assert_int_equal(transcript_feed_stream(t, s, text, strlen(text)), 0);
}

/* A transcript's files come with its first written line; one without output
 * has none, and reads as transcript_empty. */
static void test_lazy_files(void **state) {
        Fixture *f = *state;
        Transcript *t = new_apart(f, "quiet", 4096);
        char *text = NULL;
        size_t len = 9;
        uint64_t n = 9;

        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
        assert_int_equal(faccessat(f->dirfd, "quiet.log", F_OK, 0), -1);
        assert_int_equal(transcript_open(f->dirfd, "quiet", &t), -ENOENT);
        assert_int_equal(transcript_empty(true, &t), 0);
        assert_int_equal(transcript_total_lines(t), 0);
        assert_int_equal(transcript_read_stream(t, OUT, 0, 10, 4096, &text, &len, &n), 0);
        assert_int_equal(len, 0);
        assert_int_equal(n, 0);
        free(text);
        transcript_free(t);

        t = new_transcript(f, "talks", 4096);
        assert_int_equal(faccessat(f->dirfd, "talks.log", F_OK, 0), -1);
        feed_str(t, "one\n");
        assert_int_equal(faccessat(f->dirfd, "talks.log", F_OK, 0), 0);
        assert_int_equal(faccessat(f->dirfd, "talks.lix", F_OK, 0), 0);
        transcript_free(t);
}


/* Lines [start, start + limit) of view s within budget, checked against its total. */
static char *read_view(Transcript *t, TranscriptStream s, uint64_t start, uint64_t limit, size_t budget,
                       uint64_t *ret_end) {
        char *text = NULL;
        size_t len = 0;
        uint64_t end = 0;

        assert_int_equal(transcript_read_stream(t, s, start, limit, budget, &text, &len, &end), 0);
        assert_int_equal(strlen(text), len);
        assert_true(end <= transcript_stream_total_lines(t, s));
        if (ret_end)
                *ret_end = end;
        return text;
}

static void check_view(Transcript *t, TranscriptStream s, const char *want) {
        uint64_t end;
        _cleanup_free_ char *got = read_view(t, s, 0, UINT64_MAX, SIZE_MAX, &end);

        assert_string_equal(got, want);
        assert_int_equal(end, transcript_stream_total_lines(t, s));
}

static char *file_text(Fixture *f, const char *name, size_t *ret_len) {
        int fd = openat(f->dirfd, name, O_RDONLY | O_CLOEXEC);
        off_t n = file_size(f, name);
        char *buf = malloc((size_t) n + 1);

        assert_true(fd >= 0);
        assert_non_null(buf);
        assert_int_equal(pread(fd, buf, (size_t) n, 0), n);
        close(fd);
        buf[n] = '\0';
        *ret_len = (size_t) n;
        return buf;
}

static void check_entries(Fixture *f, const char *name, const uint64_t *want, size_t n) {
        size_t len;
        _cleanup_free_ char *got = file_text(f, name, &len);

        assert_int_equal(len, n * sizeof(uint64_t));
        for (size_t i = 0; i < n; i++) {
                uint64_t e;
                memcpy(&e, got + i * sizeof(uint64_t), sizeof(e));
                assert_int_equal(le64toh(e), want[i]);
        }
}

/* The files: .log exactly as a merged transcript of the same lines would
 * have it, .str one bit per line (1: stderr), and per 64 lines an entry of
 * the offset and the stderr lines up to there. */
static void test_streams_format(void **state) {
        Fixture *f = *state;
        Transcript *a = new_apart(f, "ap", SBX_TRANSCRIPT_CAP_DEFAULT), *m = new_transcript(f, "mg", SBX_TRANSCRIPT_CAP_DEFAULT);
        const char *pieces[] = { "out1\n", "err1\n", "out2\n", "err2\n" };
        _cleanup_free_ char *alog = NULL, *astr = NULL, *mlog = NULL;
        size_t al, as, ml;
        char *text = NULL;

        for (size_t i = 0; i < ELEMENTSOF(pieces); i++) {
                feed_on(a, i % 2 ? ERR : OUT, pieces[i]);
                feed_str(m, pieces[i]);
        }
        assert_int_equal(transcript_finish(a), 0);
        assert_int_equal(transcript_finish(m), 0);
        check_view(a, TRANSCRIPT_MERGED, "out1\nerr1\nout2\nerr2\n");
        check_view(a, OUT, "out1\nout2\n");
        check_view(a, ERR, "err1\nerr2\n");
        assert_int_equal(transcript_total_lines(a), 4);
        assert_int_equal(transcript_stream_total_lines(a, OUT), 2);
        assert_int_equal(transcript_stream_total_lines(a, ERR), 2);
        assert_int_equal(transcript_raw_bytes(a), 20);

        alog = file_text(f, "ap.log", &al);
        astr = file_text(f, "ap.str", &as);
        mlog = file_text(f, "mg.log", &ml);
        assert_int_equal(al, ml);
        assert_memory_equal(alog, mlog, al);
        assert_int_equal(as, 1);
        assert_int_equal((uint8_t) astr[0], 0x0a);
        assert_int_equal(file_size(f, "ap.lix"), 0);
        assert_int_equal(file_size(f, "mg.lix"), 0);

        /* A merged transcript has no single-stream view and no .str. */
        assert_false(transcript_has_streams(m));
        assert_int_equal(transcript_read_stream(m, OUT, 0, 10, SIZE_MAX, &text, NULL, NULL), -ENODATA);
        assert_int_equal(transcript_read_stream(m, ERR, 0, 10, SIZE_MAX, &text, NULL, NULL), -ENODATA);
        assert_null(text);
        assert_int_equal(transcript_stream_total_lines(m, OUT), 0);
        assert_int_equal(transcript_stream_total_lines(m, TRANSCRIPT_MERGED), 4);
        assert_int_equal(faccessat(f->dirfd, "mg.str", F_OK, 0), -1);
        transcript_free(m);
        transcript_free(a);

        /* 130 lines, every third from stderr: two entries. */
        a = new_apart(f, "ap3", SBX_TRANSCRIPT_CAP_DEFAULT);
        for (unsigned i = 0; i < 130; i++)
                feed_on(a, i % 3 == 2 ? ERR : OUT, "xy\n");
        assert_int_equal(transcript_finish(a), 0);
        {
                const uint64_t want[] = { 64 * 3, 21, 128 * 3, 42 };
                check_entries(f, "ap3.lix", want, ELEMENTSOF(want));
        }
        assert_int_equal(transcript_stream_total_lines(a, ERR), 43);
        assert_int_equal(transcript_stream_total_lines(a, OUT), 87);
        transcript_free(a);

        /* What each kind takes: a merged one every stream into its one, one apart no merged piece. */
        m = new_transcript(f, "mg2", 4096);
        a = new_apart(f, "ap2", 8192);
        feed_on(m, ERR, "e\n");
        feed_on(m, OUT, "o\n");
        check_view(m, TRANSCRIPT_MERGED, "e\no\n");
        assert_int_equal(transcript_feed_stream(a, TRANSCRIPT_MERGED, "x\n", 2), -EINVAL);
        assert_int_equal(transcript_feed_stream(a, (TranscriptStream) 7, "x\n", 2), -EINVAL);
        assert_int_equal(transcript_feed_stream(m, (TranscriptStream) 7, "x\n", 2), -EINVAL);
        assert_int_equal(transcript_read_stream(a, (TranscriptStream) 7, 0, 1, 100, &text, NULL, NULL), -EINVAL);
        assert_int_equal(transcript_raw_bytes(a), 0);
        transcript_free(m);
        transcript_free(a);
}

static void check_totals(Transcript *t, uint64_t *last) {
        for (TranscriptStream s = TRANSCRIPT_MERGED; s <= TRANSCRIPT_STDERR; s++) {
                uint64_t n = transcript_stream_total_lines(t, s);
                assert_true(n >= last[s]);
                last[s] = n;
        }
}

/* Lines never mix the streams; each view's pending line; the merged view's
 * order (by commit) and its one pending line (the older); totals never drop. */
static void test_streams_interleave(void **state) {
        Fixture *f = *state;
        Transcript *t = new_apart(f, "il", SBX_TRANSCRIPT_CAP_DEFAULT);
        uint64_t last[3] = {};
        uint64_t end;
        char *text;

        /* A stdout line cut where a read ended, with stderr in between, stays whole. */
        feed_on(t, OUT, "abc");
        check_totals(t, last);
        feed_on(t, ERR, "E1\n");
        check_totals(t, last);
        feed_on(t, OUT, "def\n");
        check_totals(t, last);
        check_view(t, TRANSCRIPT_MERGED, "E1\nabcdef\n");
        check_view(t, OUT, "abcdef\n");
        check_view(t, ERR, "E1\n");

        /* Two pending lines: the merged view shows the one begun first. */
        feed_on(t, OUT, "prog 10%");
        check_totals(t, last);
        feed_on(t, ERR, "Password: ");
        check_totals(t, last);
        assert_int_equal(transcript_total_lines(t), 3);
        assert_int_equal(transcript_committed_lines(t), 2);
        check_view(t, TRANSCRIPT_MERGED, "E1\nabcdef\nprog 10%\n");
        check_view(t, OUT, "abcdef\nprog 10%\n");
        check_view(t, ERR, "E1\nPassword: \n");
        /* A CR on stdout rewrites its own pending line only. */
        feed_on(t, OUT, "\rprog 50%");
        check_totals(t, last);
        check_view(t, OUT, "abcdef\nprog 50%\n");
        check_view(t, ERR, "E1\nPassword: \n");

        /* stderr commits first: it takes offset 2, stdout's pending moves to 3. */
        feed_on(t, ERR, "secret\n");
        check_totals(t, last);
        check_view(t, TRANSCRIPT_MERGED, "E1\nabcdef\nPassword: secret\nprog 50%\n");
        text = read_view(t, TRANSCRIPT_MERGED, 3, 10, SIZE_MAX, &end);
        assert_string_equal(text, "prog 50%\n");
        assert_int_equal(end, 4);
        free(text);
        feed_on(t, OUT, "\rprog 100%\n");
        check_totals(t, last);
        check_view(t, TRANSCRIPT_MERGED, "E1\nabcdef\nPassword: secret\nprog 100%\n");

        /* At the end the older pending line is committed first, whichever stream. */
        feed_on(t, ERR, "e-tail");
        feed_on(t, OUT, "o-tail");
        check_totals(t, last);
        assert_int_equal(transcript_finish(t), 0);
        check_totals(t, last);
        check_view(t, TRANSCRIPT_MERGED, "E1\nabcdef\nPassword: secret\nprog 100%\ne-tail\no-tail\n");
        check_view(t, OUT, "abcdef\nprog 100%\no-tail\n");
        check_view(t, ERR, "E1\nPassword: secret\ne-tail\n");
        transcript_free(t);

        /* Each stream has its own parser: an escape sequence cut on stdout is not
         * ended by stderr bytes, and a cut UTF-8 character stays whole. */
        t = new_apart(f, "il2", SBX_TRANSCRIPT_CAP_DEFAULT);
        feed_on(t, OUT, "\033[3");
        feed_on(t, ERR, "x\xc3");
        feed_on(t, OUT, "1mred\n");
        feed_on(t, ERR, "\xa9\n");
        assert_int_equal(transcript_finish(t), 0);
        check_view(t, OUT, "red\n");
        check_view(t, ERR, "x\xc3\xa9\n");
        check_view(t, TRANSCRIPT_MERGED, "red\nx\xc3\xa9\n");
        transcript_free(t);
}

/* Per-stream offsets over many lines: windows by limit and by budget, runs of
 * consecutive merged lines and scattered ones, a live transcript and a reopened one. */
static void test_streams_offsets(void **state) {
        Fixture *f = *state;
        Transcript *t = new_apart(f, "off", SBX_TRANSCRIPT_CAP_DEFAULT), *o = NULL;
        uint64_t n_out = 0, n_err = 0;
        char line[64];

        for (unsigned i = 0; i < 3000; i++) {
                snprintf(line, sizeof(line), "o%u\n", i);
                feed_on(t, OUT, line);
                n_out++;
                /* stderr: bursts of 5 lines every 50, one line every 7 otherwise */
                if (i % 50 == 0)
                        for (unsigned j = 0; j < 5; j++) {
                                snprintf(line, sizeof(line), "e%" PRIu64 "\n", n_err++);
                                feed_on(t, ERR, line);
                        }
                else if (i % 7 == 0) {
                        snprintf(line, sizeof(line), "e%" PRIu64 "\n", n_err++);
                        feed_on(t, ERR, line);
                }
        }
        for (int pass = 0; pass < 2; pass++) {
                Transcript *r = pass == 0 ? t : o;

                assert_int_equal(transcript_stream_total_lines(r, OUT), n_out);
                assert_int_equal(transcript_stream_total_lines(r, ERR), n_err);
                assert_int_equal(transcript_total_lines(r), n_out + n_err);
                for (TranscriptStream s = OUT; s <= ERR; s++) {
                        uint64_t total = s == OUT ? n_out : n_err;

                        for (uint64_t start = 0; start < total + 2; start += 97) {
                                uint64_t end, want = MIN(start + 40, total);
                                _cleanup_free_ char *got = read_view(r, s, start, 40, SIZE_MAX, &end);
                                char expect[40 * 16] = "";

                                for (uint64_t k = start; k < want; k++) {
                                        snprintf(line, sizeof(line), "%c%" PRIu64 "\n", s == OUT ? 'o' : 'e', k);
                                        strcat(expect, line);
                                }
                                assert_string_equal(got, expect);
                                assert_int_equal(end, start < total ? want : total);
                        }
                        /* A budget of 20 bytes: whole lines only, at least one, in order. */
                        for (uint64_t start = 0; start < total; start += 301) {
                                uint64_t end;
                                _cleanup_free_ char *got = read_view(r, s, start, 1000, 20, &end);
                                size_t nl = 0;

                                assert_true(end > start);
                                for (const char *p = got; *p; p++)
                                        nl += *p == '\n';
                                assert_int_equal(nl, end - start);
                                assert_true(json_escaped_size(got, strlen(got)) <= 20 || end == start + 1);
                                snprintf(line, sizeof(line), "%c%" PRIu64 "\n", s == OUT ? 'o' : 'e', start);
                                assert_memory_equal(got, line, strlen(line));
                        }
                }
                if (pass == 0) {
                        assert_int_equal(transcript_finish(t), 0);
                        assert_int_equal(transcript_open(f->dirfd, "off", &o), 0);
                        assert_true(transcript_has_streams(o));
                }
        }
        transcript_free(o);
        transcript_free(t);
}

/* The cap counts both streams in the one .log; its marker ends all three
 * views, also when both streams had a pending line; later output is counted. */
static void test_streams_cap(void **state) {
        Fixture *f = *state;
        Transcript *t = new_apart(f, "scap", 12288), *o = NULL;
        const char *marker = "[sbx: transcript cap of 12288 bytes reached; further output is not kept]\n";
        uint64_t last[3] = {}, out_lines, err_lines, total;
        char *text;

        for (int i = 0; i < 1000 && !transcript_capped(t); i++) {
                feed_on(t, OUT, "stdout--\n");
                feed_on(t, ERR, "stderr--\n");
                feed_on(t, OUT, "pend");
                feed_on(t, ERR, "pend");
                check_totals(t, last);
                feed_on(t, OUT, "\n");
                feed_on(t, ERR, "\n");
                check_totals(t, last);
        }
        assert_true(transcript_capped(t));
        assert_true(transcript_stored_bytes(t) <= 12288);
        assert_true(disk_bytes(f, "scap") <= 12288);
        total = transcript_total_lines(t);
        out_lines = transcript_stream_total_lines(t, OUT);
        err_lines = transcript_stream_total_lines(t, ERR);
        /* The marker is one merged line and the last line of each stream. */
        assert_int_equal(out_lines + err_lines, total + 1);
        text = read_view(t, TRANSCRIPT_MERGED, total - 1, 1, SIZE_MAX, NULL);
        assert_string_equal(text, marker);
        free(text);
        text = read_view(t, OUT, out_lines - 1, 1, SIZE_MAX, NULL);
        assert_string_equal(text, marker);
        free(text);
        text = read_view(t, ERR, err_lines - 1, 1, SIZE_MAX, NULL);
        assert_string_equal(text, marker);
        free(text);

        feed_on(t, ERR, "more\n");
        feed_on(t, OUT, "pending");
        check_totals(t, last);
        assert_int_equal(transcript_finish(t), 0);
        check_totals(t, last);
        assert_int_equal(transcript_total_lines(t), total);
        transcript_free(t);

        assert_int_equal(transcript_open(f->dirfd, "scap", &o), 0);
        assert_true(transcript_capped(o));
        assert_int_equal(transcript_stream_total_lines(o, OUT), out_lines);
        assert_int_equal(transcript_stream_total_lines(o, ERR), err_lines);
        text = read_view(o, ERR, err_lines - 1, 1, SIZE_MAX, NULL);
        assert_string_equal(text, marker);
        free(text);
        transcript_free(o);

        /* Both streams pending when the cap is hit: each view keeps its count. */
        t = new_apart(f, "scap2", 8192);
        memset(last, 0, sizeof(last));
        feed_on(t, OUT, "short\n");
        feed_on(t, ERR, "e-pending");
        check_totals(t, last);
        for (int i = 0; i < 405; i++)
                feed_on(t, OUT, "0123456789");
        check_totals(t, last);
        assert_int_equal(transcript_finish(t), 0);
        check_totals(t, last);
        assert_true(transcript_capped(t));
        check_view(t, TRANSCRIPT_MERGED, "short\ne-pending\n[sbx: transcript cap of 8192 bytes reached; further output is not kept]\n");
        transcript_free(t);
}

static void write_file(Fixture *f, const char *name, const void *data, size_t len) {
        int fd = openat(f->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t) len);
        close(fd);
}

/* Reopening: streams survive; a stray tail of .str is ignored, a .str cut
 * short reads as stdout; a .log cut back takes the streams' lines with it. */
static void test_streams_reopen(void **state) {
        Fixture *f = *state;
        Transcript *t = new_apart(f, "sr", SBX_TRANSCRIPT_CAP_DEFAULT), *o = NULL;

        feed_on(t, OUT, "one\n");
        feed_on(t, ERR, "two\n");
        feed_on(t, OUT, "three\n");
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);

        append_file(f, "sr.str", "\xff\xff", 2);
        assert_int_equal(transcript_open(f->dirfd, "sr", &o), 0);
        assert_true(transcript_has_streams(o));
        check_view(o, TRANSCRIPT_MERGED, "one\ntwo\nthree\n");
        check_view(o, OUT, "one\nthree\n");
        check_view(o, ERR, "two\n");
        transcript_free(o);

        /* .log cut back by a crash: stream lines past the merged ones go too. */
        truncate_file(f, "sr.log", 10);
        assert_int_equal(transcript_open(f->dirfd, "sr", &o), 0);
        check_view(o, TRANSCRIPT_MERGED, "one\ntwo\n");
        check_view(o, OUT, "one\n");
        check_view(o, ERR, "two\n");
        transcript_free(o);

        truncate_file(f, "sr.str", 0);
        assert_int_equal(transcript_open(f->dirfd, "sr", &o), 0);
        assert_int_equal(transcript_stream_total_lines(o, OUT), 2);
        assert_int_equal(transcript_stream_total_lines(o, ERR), 0);
        transcript_free(o);
}

/* The format before the sparse index (an .idx entry per line; .out and .err
 * listing each stream's merged line numbers, the marker on both) is
 * converted when opened, and its old files go. */
static void test_old_format(void **state) {
        Fixture *f = *state;
        const char *marker = "[sbx: transcript cap of 9 bytes reached; further output is not kept]\n";
        uint64_t idx[200], out[200], err[200];
        size_t n_out = 0, n_err = 0, len = 0;
        _cleanup_free_ char *log = malloc(200 * 8 + 128), *want_out = malloc(4096), *want_err = malloc(4096);
        Transcript *o = NULL;
        char *text = NULL;

        want_out[0] = want_err[0] = '\0';
        /* 199 lines "o<i>" or "e<i>" (every fifth from stderr), then the marker. */
        for (unsigned i = 0; i < 199; i++) {
                int n = sprintf(log + len, "%c%u\n", i % 5 == 4 ? 'e' : 'o', i);
                strncat(i % 5 == 4 ? want_err : want_out, log + len, (size_t) n);
                if (i % 5 == 4)
                        err[n_err++] = htole64(i);
                else
                        out[n_out++] = htole64(i);
                len += (size_t) n;
                idx[i] = htole64(len);
        }
        strcpy(log + len, marker);
        len += strlen(marker);
        idx[199] = htole64(len);
        out[n_out++] = err[n_err++] = htole64(199);
        strcat(want_out, marker);
        strcat(want_err, marker);

        write_file(f, "old.log", log, len);
        write_file(f, "old.idx", idx, sizeof(idx));
        write_file(f, "old.out", out, n_out * 8);
        write_file(f, "old.err", err, n_err * 8);
        assert_int_equal(transcript_open(f->dirfd, "old", &o), 0);
        assert_true(transcript_has_streams(o));
        assert_true(transcript_capped(o));
        assert_int_equal(transcript_total_lines(o), 200);
        assert_int_equal(transcript_stream_total_lines(o, OUT), n_out);
        assert_int_equal(transcript_stream_total_lines(o, ERR), n_err);
        check_view(o, OUT, want_out);
        check_view(o, ERR, want_err);
        log[len] = '\0';
        check_view(o, TRANSCRIPT_MERGED, log);
        transcript_free(o);
        assert_int_equal(faccessat(f->dirfd, "old.idx", F_OK, 0), -1);
        assert_int_equal(faccessat(f->dirfd, "old.out", F_OK, 0), -1);
        assert_int_equal(faccessat(f->dirfd, "old.err", F_OK, 0), -1);
        assert_int_equal(faccessat(f->dirfd, "old.lit", F_OK, 0), -1);
        assert_int_equal(file_size(f, "old.lix"), 3 * 2 * 8);
        /* Opened again, it is of the new format. */
        assert_int_equal(transcript_open(f->dirfd, "old", &o), 0);
        check_view(o, ERR, want_err);
        transcript_free(o);

        /* Merged, written by hand: "a\nbb\n" with its index; a torn tail is left out. */
        {
                uint64_t e[3] = { htole64(2), htole64(5), htole64(900) };
                write_file(f, "mg.log", "a\nbb\nc", 6);
                write_file(f, "mg.idx", e, sizeof(e));
        }
        assert_int_equal(transcript_open(f->dirfd, "mg", &o), 0);
        assert_false(transcript_has_streams(o));
        check_view(o, TRANSCRIPT_MERGED, "a\nbb\n");
        assert_int_equal(transcript_stream_total_lines(o, ERR), 0);
        assert_int_equal(transcript_read_stream(o, OUT, 0, 10, SIZE_MAX, &text, NULL, NULL), -ENODATA);
        transcript_free(o);

        /* A .log with neither index is damage. */
        write_file(f, "bare.log", "x\n", 2);
        assert_int_equal(transcript_open(f->dirfd, "bare", &o), -ENOENT);
}

/* Removal and collection take .str too, and count a transcript once. */
static void test_streams_remove(void **state) {
        Fixture *f = *state;
        unsigned removed = 0;
        uint64_t bytes = 0;
        Transcript *t = new_apart(f, "rm", 8192);

        feed_on(t, ERR, "x\n");
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
        assert_int_equal(transcript_remove(f->dirfd, "rm"), 0);
        for (size_t i = 0; i < 3; i++) {
                char name[16];
                snprintf(name, sizeof(name), "rm.%s", (const char *[]) { "log", "lix", "str" }[i]);
                assert_int_equal(faccessat(f->dirfd, name, F_OK, 0), -1);
        }

        t = new_apart(f, "kept", 8192);
        feed_on(t, OUT, "k\n");
        transcript_free(t);
        t = new_apart(f, "gone", 8192);
        feed_on(t, OUT, "line\n");
        assert_int_equal(transcript_finish(t), 0);
        transcript_free(t);
        t = new_apart(f, "half", 8192);
        feed_on(t, OUT, "h\n");
        transcript_free(t);
        assert_int_equal(unlinkat(f->dirfd, "half.log", 0), 0);
        assert_int_equal(unlinkat(f->dirfd, "half.lix", 0), 0);
        assert_int_equal(transcripts_collect(f->dirfd, keep_one, (void *) "kept", &removed, &bytes), 0);
        assert_int_equal(removed, 1);
        assert_int_equal(bytes, 5 + 0 + 1 + 1);     /* gone's .log, .lix and .str, half's .str */
        assert_int_equal(faccessat(f->dirfd, "gone.str", F_OK, 0), -1);
        assert_int_equal(faccessat(f->dirfd, "half.str", F_OK, 0), -1);
        assert_int_equal(faccessat(f->dirfd, "kept.str", F_OK, 0), 0);
}

/* Lines [start, start + limit) of lines[] within budget, as transcript_read gives them. */
static char *expect_window(char **lines, uint64_t n, uint64_t start, uint64_t limit, size_t budget, uint64_t *ret_end) {
        size_t cap = 1, len = 0, cost = 0;
        char *out = malloc(cap);
        uint64_t k = 0;

        for (uint64_t i = start; i < n && k < limit; i++, k++) {
                size_t l = strlen(lines[i]), c = json_escaped_size(lines[i], l);

                if (k > 0 && cost + c > budget)
                        break;
                cost += c;
                out = realloc(out, cap += l);
                memcpy(out + len, lines[i], l);
                len += l;
        }
        out[len] = '\0';
        *ret_end = start >= n ? n : start + k;
        return out;
}

/* Paging across the sparse index gives exactly the lines of every offset,
 * window and budget, in each view, live and reopened: lines of random
 * lengths up to SBX_LINE_MAX and random streams, compared with the lines
 * kept aside. */
static void test_sparse_paging(void **state) {
        Fixture *f = *state;
        enum { N = 3000 };
        Transcript *t = new_apart(f, "sp", SBX_TRANSCRIPT_CAP_DEFAULT), *o = NULL;
        char **lines[3];
        uint64_t n[3] = {};
        uint32_t x = 777;

        for (int v = 0; v < 3; v++)
                lines[v] = calloc(N, sizeof(char *));
        for (unsigned i = 0; i < N; i++) {
                size_t l;
                char *line;
                int v;

                x = x * 1103515245u + 12345u;
                l = (x >> 8) % 23 == 0 ? SBX_LINE_MAX : (x >> 8) % 40;
                v = (x >> 20) % 3 == 0 ? 2 : 1;
                line = malloc(l + 2);
                for (size_t j = 0; j < l; j++)
                        line[j] = (char) ('a' + (i + j) % 26);
                if (l > 3)
                        memcpy(line, "\"\\", 2);       /* escaped: two bytes each */
                line[l] = '\n';
                line[l + 1] = '\0';
                assert_int_equal(transcript_feed_stream(t, v == 2 ? ERR : OUT, line, l + 1), 0);
                lines[0][n[0]++] = line;
                lines[v][n[v]++] = line;
        }
        assert_int_equal(transcript_finish(t), 0);
        assert_int_equal(transcript_open(f->dirfd, "sp", &o), 0);
        for (int round = 0; round < 2000; round++) {
                Transcript *r = round % 2 ? o : t;
                TranscriptStream s = (TranscriptStream) (round % 3);
                uint64_t start, limit, end, want_end;
                size_t budget;
                char *got, *want;

                x = x * 1103515245u + 12345u;
                start = (x >> 4) % (n[s] + 2);
                limit = 1 + (x >> 14) % 1000;
                budget = (x >> 24) % 4 == 0 ? SIZE_MAX : 64 + (x >> 10) % SBX_RESULT_TEXT_BUDGET;
                assert_int_equal(transcript_stream_total_lines(r, s), n[s]);
                got = read_view(r, s, start, limit, budget, &end);
                want = expect_window(lines[s], n[s], start, limit, budget, &want_end);
                assert_string_equal(got, want);
                assert_int_equal(end, want_end);
                free(got);
                free(want);
        }
        transcript_free(o);
        transcript_free(t);
        for (uint64_t i = 0; i < n[0]; i++)
                free(lines[0][i]);
        for (int v = 0; v < 3; v++)
                free(lines[v]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_names, setup, teardown),
                cmocka_unit_test_setup_teardown(test_collect, setup, teardown),
                cmocka_unit_test_setup_teardown(test_files_cloexec, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lazy_files, setup, teardown),
                cmocka_unit_test_setup_teardown(test_offsets_stable, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pending, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cr_bs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_csi, setup, teardown),
                cmocka_unit_test_setup_teardown(test_osc, setup, teardown),
                cmocka_unit_test_setup_teardown(test_split, setup, teardown),
                cmocka_unit_test_setup_teardown(test_split_random, setup, teardown),
                cmocka_unit_test_setup_teardown(test_invalid_utf8, setup, teardown),
                cmocka_unit_test_setup_teardown(test_long_lines, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_limits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
                cmocka_unit_test_setup_teardown(test_torn, setup, teardown),
                cmocka_unit_test_setup_teardown(test_big, setup, teardown),
                cmocka_unit_test_setup_teardown(test_streams_format, setup, teardown),
                cmocka_unit_test_setup_teardown(test_streams_interleave, setup, teardown),
                cmocka_unit_test_setup_teardown(test_streams_offsets, setup, teardown),
                cmocka_unit_test_setup_teardown(test_streams_cap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_streams_reopen, setup, teardown),
                cmocka_unit_test_setup_teardown(test_streams_remove, setup, teardown),
                cmocka_unit_test_setup_teardown(test_flood, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_old_format, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sparse_paging, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
