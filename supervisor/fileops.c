/* The text side of the file tools (see fileops.h).
 *
 * Text: one incremental validator (Utf8Scan) serves text_is_utf8 and
 * file_read_window, so "text" means the same everywhere: well-formed UTF-8
 * as in Unicode Table 3-7 (no overlong forms, no surrogates, nothing above
 * U+10FFFF, no character cut by the end of the data) and no NUL byte. An
 * error names the first byte of the ill-formed sequence (its lead byte, as a
 * 0-based file offset) and the 1-based line holding it.
 *
 * Windows: file_read_window reads the file from offset 0 with pread (the fd's
 * position is neither used nor moved) through one READ_BUF_SIZE buffer,
 * validates and counts every byte, and copies only the window's lines, so
 * memory stays under READ_BUF_SIZE plus twice max_bytes whatever the file's
 * size. When the first line of the window alone exceeds max_bytes, its head
 * is returned (num_lines 1, cut before the character that does not fit) with
 * truncated set and next_offset naming the next line: paging always moves on,
 * and the rest of an overlong line is not shown (the agent can look at it
 * with a command).
 *
 * Edits: occurrences are exact byte matches, counted and replaced left to
 * right without overlap ("aa" occurs once in "aaa"); "exactly once" uses the
 * same count. Each edit builds its result in one pass into a buffer of the
 * exact size, after the size was checked against SBX_FILE_MAX. */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sbx-limits.h"
#include "macro.h"
#include "fileops.h"

#define READ_BUF_SIZE (64u * 1024u)
#define UTF8_CHAR_MAX 4u

typedef struct Utf8Scan {
        uint64_t offset;        /* bytes fed so far */
        uint64_t seq_start;     /* offset of the lead byte of the current character */
        unsigned need;          /* continuation bytes still expected */
        unsigned char lo, hi;   /* allowed range of the next continuation byte */
        uint64_t bad;           /* after -EILSEQ: offset where the text stops being valid */
        bool bad_nul;           /* after -EILSEQ: that byte is NUL */
} Utf8Scan;

typedef struct Window {
        uint64_t start;         /* first line wanted, 1-based */
        uint32_t limit;
        size_t max_bytes;
        char *buf;
        size_t len, cap;
        size_t committed;       /* bytes of whole lines in buf */
        uint64_t num_lines;
        bool done;              /* the window is complete: take no more bytes */
        bool cut;               /* the window is the head of one line longer than max_bytes */
} Window;

_printf_(3, 4) static void set_errmsg(char *errmsg, size_t errmsg_size, const char *fmt, ...) {
        va_list ap;

        if (!errmsg || errmsg_size == 0)
                return;
        va_start(ap, fmt);
        (void) vsnprintf(errmsg, errmsg_size, fmt, ap);
        va_end(ap);
}

static int utf8_fail(Utf8Scan *s, uint64_t at, bool nul) {
        s->bad = at;
        s->bad_nul = nul;
        return -EILSEQ;
}

/* Feed the next n bytes; -EILSEQ (with s->bad set) at the first invalid one. */
static int utf8_feed(Utf8Scan *s, const char *buf, size_t n) {
        const unsigned char *p = (const unsigned char *) buf;

        for (size_t i = 0; i < n; i++) {
                unsigned char c;

                /* Plain ASCII without NUL, eight bytes at a time: most of any source file. */
                if (s->need == 0) {
                        while (i + 8 <= n) {
                                uint64_t w;
                                memcpy(&w, p + i, 8);
                                if ((w & 0x8080808080808080ull) ||
                                    ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull))
                                        break;
                                i += 8;
                        }
                        if (i >= n)
                                break;
                }
                c = p[i];
                if (s->need > 0) {
                        if (c < s->lo || c > s->hi)
                                return utf8_fail(s, s->seq_start, false);
                        s->need--;
                        s->lo = 0x80;
                        s->hi = 0xBF;
                        continue;
                }
                if (c >= 0x01 && c <= 0x7F)
                        continue;

                s->seq_start = s->offset + i;
                s->lo = 0x80;
                s->hi = 0xBF;
                if (c == 0x00)
                        return utf8_fail(s, s->seq_start, true);
                else if (c >= 0xC2 && c <= 0xDF)
                        s->need = 1;
                else if (c == 0xE0) {
                        s->need = 2;
                        s->lo = 0xA0;           /* overlong below U+0800 */
                } else if (c == 0xED) {
                        s->need = 2;
                        s->hi = 0x9F;           /* surrogates U+D800..U+DFFF */
                } else if (c >= 0xE1 && c <= 0xEF)
                        s->need = 2;
                else if (c == 0xF0) {
                        s->need = 3;
                        s->lo = 0x90;           /* overlong below U+10000 */
                } else if (c >= 0xF1 && c <= 0xF3)
                        s->need = 3;
                else if (c == 0xF4) {
                        s->need = 3;
                        s->hi = 0x8F;           /* above U+10FFFF */
                } else
                        return utf8_fail(s, s->seq_start, false);
        }
        s->offset += n;
        return 0;
}

/* The data ended: a character still open is cut. */
static int utf8_end(Utf8Scan *s) {
        if (s->need > 0)
                return utf8_fail(s, s->seq_start, false);
        return 0;
}

static uint64_t count_newlines(const char *buf, size_t len) {
        const char *end = buf + len;
        uint64_t n = 0;

        for (const char *p = buf; (p = memchr(p, '\n', (size_t) (end - p))); p++)
                n++;
        return n;
}

bool text_is_utf8(const char *buf, size_t len) {
        Utf8Scan s = {};

        return utf8_feed(&s, buf, len) >= 0 && utf8_end(&s) >= 0;
}

uint64_t text_count_lines(const char *buf, size_t len) {
        if (len == 0)
                return 0;
        return count_newlines(buf, len) + (buf[len - 1] != '\n');
}

static void window_free_buf(Window *w) {
        free(w->buf);
}

static int window_append(Window *w, const char *p, size_t n) {
        if (w->len + n + 1 > w->cap) {
                size_t cap = MAX(MAX(w->cap * 2, w->len + n + 1), (size_t) 4096);
                char *b = realloc(w->buf, cap);

                if (!b)
                        return -ENOMEM;
                w->buf = b;
                w->cap = cap;
        }
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        return 0;
}

/* Take the next n bytes of a line of the window; ends_line if they end with its '\n'. */
static int window_take(Window *w, const char *seg, size_t n, bool ends_line) {
        size_t room = w->max_bytes - w->len;
        int r;

        if (n > room) {
                if (w->num_lines > 0) {
                        /* The line does not fit: the window ends before it. */
                        w->len = w->committed;
                        w->done = true;
                        return 0;
                }
                /* The first line alone is too long: keep its head, ending before the
                 * character that crosses max_bytes (the bytes before seg are that line's). */
                r = window_append(w, seg, room);
                if (r < 0)
                        return r;
                if (((unsigned char) seg[room] & 0xC0) == 0x80)
                        while (w->len > 0 && ((unsigned char) w->buf[--w->len] & 0xC0) == 0x80)
                                ;
                w->num_lines = 1;
                w->cut = w->done = true;
                return 0;
        }

        r = window_append(w, seg, n);
        if (r < 0)
                return r;
        if (ends_line) {
                w->committed = w->len;
                w->num_lines++;
                w->done = w->num_lines == w->limit;
        }
        return 0;
}

static int not_text(const Utf8Scan *s, uint64_t line, char *errmsg, size_t errmsg_size) {
        set_errmsg(errmsg, errmsg_size, "not a UTF-8 text file (%s at line %llu, byte offset %llu)",
                   s->bad_nul ? "NUL byte" : "invalid byte", (unsigned long long) line,
                   (unsigned long long) s->bad);
        return -EILSEQ;
}

int file_read_window(int fd, uint64_t offset, uint32_t limit, size_t max_bytes, FileWindow *ret,
                     char *errmsg, size_t errmsg_size) {
        _cleanup_free_ char *rbuf = NULL;
        _cleanup_(window_free_buf) Window w = {
                .start = MAX(offset, (uint64_t) 1),
                .limit = limit,
                .max_bytes = max_bytes,
        };
        Utf8Scan scan = {};
        uint64_t newlines = 0, total = 0, total_lines, next;
        bool ends_with_newline = true, has_next;
        int r;

        if (limit == 0 || limit > SBX_FILE_READ_MAX_LINES) {
                set_errmsg(errmsg, errmsg_size, "limit must be between 1 and %u", SBX_FILE_READ_MAX_LINES);
                return -EINVAL;
        }
        /* Room for one character, so that a cut line still shows something. */
        if (max_bytes < UTF8_CHAR_MAX) {
                set_errmsg(errmsg, errmsg_size, "max_bytes must be at least %u", UTF8_CHAR_MAX);
                return -EINVAL;
        }

        rbuf = malloc(READ_BUF_SIZE);
        if (!rbuf)
                return -ENOMEM;

        for (;;) {
                ssize_t n = pread(fd, rbuf, READ_BUF_SIZE, (off_t) total);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;

                r = utf8_feed(&scan, rbuf, (size_t) n);
                if (r < 0) {
                        /* A character begun in an earlier read has no '\n' after its start. */
                        uint64_t before = scan.bad > total ? count_newlines(rbuf, scan.bad - total) : 0;
                        return not_text(&scan, newlines + before + 1, errmsg, errmsg_size);
                }

                for (size_t pos = 0; pos < (size_t) n;) {
                        const char *nl = memchr(rbuf + pos, '\n', (size_t) n - pos);
                        size_t end = nl ? (size_t) (nl - rbuf) + 1 : (size_t) n;

                        if (!w.done && newlines + 1 >= w.start) {
                                r = window_take(&w, rbuf + pos, end - pos, nl != NULL);
                                if (r < 0)
                                        return r;
                        }
                        if (nl)
                                newlines++;
                        pos = end;
                }
                ends_with_newline = rbuf[n - 1] == '\n';
                total += (uint64_t) n;
        }

        r = utf8_end(&scan);
        if (r < 0)
                return not_text(&scan, newlines + 1, errmsg, errmsg_size);

        /* A last line without '\n' that fit. */
        if (!w.done && w.len > w.committed) {
                w.committed = w.len;
                w.num_lines++;
        }
        if (!w.buf) {
                w.buf = malloc(1);
                if (!w.buf)
                        return -ENOMEM;
        }
        w.buf[w.len] = '\0';

        total_lines = newlines + !ends_with_newline;
        next = w.start + w.num_lines;
        has_next = next <= total_lines;

        *ret = (FileWindow) {
                .content = TAKE_PTR(w.buf),
                .len = w.len,
                .start_line = w.start,
                .num_lines = w.num_lines,
                .total_lines = total_lines,
                .bytes_read = w.len,
                .total_bytes = total,
                .has_next_offset = has_next,
                .next_offset = has_next ? next : 0,
                .truncated = has_next || w.cut,
        };
        return 0;
}

void file_window_done(FileWindow *w) {
        if (!w)
                return;
        free(w->content);
        *w = (FileWindow) {};
}

/* Occurrences of e->old_string in buf, left to right, without overlap. */
static size_t count_occurrences(const char *buf, size_t len, const FileEditSpec *e) {
        const char *end = buf + len;
        size_t n = 0;

        for (const char *p = buf, *q; (q = memmem(p, (size_t) (end - p), e->old_string, e->old_len));
             p = q + e->old_len)
                n++;
        return n;
}

/* Write buf with every occurrence (as counted above) replaced into dst. */
static void replace_occurrences(const char *buf, size_t len, const FileEditSpec *e, char *dst) {
        const char *end = buf + len, *p = buf, *q;

        /* An empty new_string may come as a NULL pointer: never hand it to mempcpy. */
        while ((q = memmem(p, (size_t) (end - p), e->old_string, e->old_len))) {
                dst = mempcpy(dst, p, (size_t) (q - p));
                if (e->new_len > 0)
                        dst = mempcpy(dst, e->new_string, e->new_len);
                p = q + e->old_len;
        }
        if (end > p)
                memcpy(dst, p, (size_t) (end - p));
}

int file_apply_edits(const char *content, size_t len, const FileEditSpec *edits, size_t n_edits,
                     char **ret_content, size_t *ret_len, uint64_t *ret_replacements,
                     char *errmsg, size_t errmsg_size) {
        _cleanup_free_ char *cur = NULL;
        const char *text = content;
        size_t text_len = len;
        uint64_t replacements = 0;

        if (n_edits == 0) {
                set_errmsg(errmsg, errmsg_size, "no edits given");
                return -EINVAL;
        }

        for (size_t i = 0; i < n_edits; i++) {
                const FileEditSpec *e = &edits[i];
                size_t count, grown, next_len;
                char *next;

                if (e->old_len == 0) {
                        set_errmsg(errmsg, errmsg_size, "edit %zu: old_string is empty", i + 1);
                        return -EINVAL;
                }
                if (e->old_len == e->new_len && memcmp(e->old_string, e->new_string, e->old_len) == 0) {
                        set_errmsg(errmsg, errmsg_size,
                                   "edit %zu: old_string and new_string are identical (no-op)", i + 1);
                        return -EINVAL;
                }
                count = count_occurrences(text, text_len, e);
                if (count == 0) {
                        set_errmsg(errmsg, errmsg_size, "edit %zu: old_string not found in the file", i + 1);
                        return -EINVAL;
                }
                if (count > 1 && !e->replace_all) {
                        set_errmsg(errmsg, errmsg_size,
                                   "edit %zu: old_string occurs %zu times; add context to make it unique or set replace_all",
                                   i + 1, count);
                        return -EINVAL;
                }

                /* count * old_len <= text_len, so only the additions can overflow. */
                if (__builtin_mul_overflow(count, e->new_len, &grown) ||
                    __builtin_add_overflow(text_len - count * e->old_len, grown, &next_len) ||
                    next_len > SBX_FILE_MAX) {
                        set_errmsg(errmsg, errmsg_size, "edit %zu: the result would exceed %llu bytes", i + 1,
                                   (unsigned long long) SBX_FILE_MAX);
                        return -EFBIG;
                }

                next = malloc(next_len + 1);
                if (!next)
                        return -ENOMEM;
                replace_occurrences(text, text_len, e, next);
                next[next_len] = '\0';

                free(cur);
                text = cur = next;
                text_len = next_len;
                replacements += count;
        }

        *ret_content = TAKE_PTR(cur);
        *ret_len = text_len;
        *ret_replacements = replacements;
        return 0;
}
