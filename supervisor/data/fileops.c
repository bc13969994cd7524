/* The text side of the file tools (see fileops.h).
 *
 * Text: one incremental validator (Utf8Scan) serves text_is_utf8 and
 * file_read_window, so "text" means the same everywhere: well-formed UTF-8
 * as in Unicode Table 3-7 (no overlong forms, no surrogates, nothing above
 * U+10FFFF, no character cut by the end of the data) and no NUL byte. An
 * error names the first byte of the ill-formed sequence (its lead byte, as a
 * 0-based file offset) and the 1-based line holding it.
 *
 * Windows: file_index_build reads the whole file from offset 0 with pread
 * through one READ_BUF_SIZE buffer, validates and counts every byte, and
 * notes where the first line beginning in each block starts (at most
 * INDEX_MARKS_MAX marks: when they are all used, every second one is dropped
 * and marks are taken every second block from then on). file_read_window then
 * reads from the mark at or before the window's first line, validates what it
 * reads, and stops when the window is complete, so memory stays under
 * READ_BUF_SIZE plus twice the budget (plus the marks) whatever the file's
 * size. The budget counts the window's bytes as a JSON string takes them
 * (json_escaped_size: a quote or a newline two bytes), the size of the text
 * in the tool result. When the first line of the window alone exceeds it, its head
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx-limits.h"
#include "json-escape.h"
#include "macro.h"
#include "data/fileops.h"
#include "fd-util.h"

#define READ_BUF_SIZE (64u * 1024u)
#define UTF8_CHAR_MAX 4u
#define INDEX_MARKS_MAX 4096u   /* 64 KiB of marks per index */

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
        size_t budget;          /* escaped bytes (json_escaped_size) */
        char *buf;
        size_t len, cap;
        size_t cost;            /* escaped bytes of buf */
        size_t committed;       /* bytes of whole lines in buf */
        size_t committed_cost;
        uint64_t num_lines;
        bool done;              /* the window is complete: take no more bytes */
        bool cut;               /* the window is the head of one line larger than the budget */
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
        size_t room = w->budget - w->cost, cost = json_escaped_size(seg, n);
        int r;

        if (cost > room) {
                size_t head = 0;

                if (w->num_lines > 0) {
                        /* The line does not fit: the window ends before it. */
                        w->len = w->committed;
                        w->cost = w->committed_cost;
                        w->done = true;
                        return 0;
                }
                /* The first line alone is too long: keep its head, ending before the
                 * character that crosses the budget (the bytes before seg are that line's). */
                for (size_t c; head < n && (c = json_escaped_size(seg + head, 1)) <= room; head++)
                        room -= c;
                while (head > 0 && ((unsigned char) seg[head] & 0xC0) == 0x80)
                        head--;
                r = window_append(w, seg, head);
                if (r < 0)
                        return r;
                if (head == 0 && w->len > 0 && ((unsigned char) seg[0] & 0xC0) == 0x80)
                        while (w->len > 0 && ((unsigned char) w->buf[--w->len] & 0xC0) == 0x80)
                                ;
                w->num_lines = 1;
                w->cut = w->done = true;
                return 0;
        }

        r = window_append(w, seg, n);
        if (r < 0)
                return r;
        w->cost += cost;
        if (ends_line) {
                w->committed = w->len;
                w->committed_cost = w->cost;
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

/* Read the block at offset into buf; 0 at the end of the file. */
static ssize_t read_block(int fd, char *buf, uint64_t offset) {
        return loop_pread(fd, buf, READ_BUF_SIZE, offset);
}

/* The text stops being valid in the block read at block_offset, whose first
 * byte is on line `line`. */
static int not_text_in_block(const Utf8Scan *s, const char *block, uint64_t block_offset, uint64_t line,
                             char *errmsg, size_t errmsg_size) {
        /* A character begun in an earlier block has no '\n' after its start. */
        uint64_t before = s->bad > block_offset ? count_newlines(block, s->bad - block_offset) : 0;

        return not_text(s, line + before, errmsg, errmsg_size);
}

void file_index_done(FileIndex *index) {
        if (!index)
                return;
        free(index->marks);
        *index = (FileIndex) {};
}

size_t file_index_size(const FileIndex *index) {
        return index->n_marks * sizeof(FileIndexMark);
}

static int index_add_mark(FileIndex *index, size_t *allocated, uint64_t line, uint64_t offset) {
        if (index->n_marks == *allocated) {
                size_t n = MIN(MAX(*allocated * 2, (size_t) 16), (size_t) INDEX_MARKS_MAX);
                FileIndexMark *marks = reallocarray(index->marks, n, sizeof(*marks));

                if (!marks)
                        return -ENOMEM;
                index->marks = marks;
                *allocated = n;
        }
        index->marks[index->n_marks++] = (FileIndexMark) { .line = line, .offset = offset };
        return 0;
}

int file_index_build(int fd, FileIndex *ret, char *errmsg, size_t errmsg_size) {
        _cleanup_(file_index_done) FileIndex index = {};
        _cleanup_free_ char *rbuf = NULL;
        Utf8Scan scan = {};
        uint64_t newlines = 0, total = 0, block = 0, every = 1;
        size_t allocated = 0;
        bool line_start = true;         /* the next byte begins a line */
        int r;

        rbuf = malloc(READ_BUF_SIZE);
        if (!rbuf)
                return -ENOMEM;

        for (;; block++) {
                ssize_t n = read_block(fd, rbuf, total);
                size_t first;

                if (n < 0)
                        return (int) n;
                if (n == 0)
                        break;
                r = utf8_feed(&scan, rbuf, (size_t) n);
                if (r < 0)
                        return not_text_in_block(&scan, rbuf, total, newlines + 1, errmsg, errmsg_size);

                /* Mark the first line beginning in the block. */
                if (line_start)
                        first = 0;
                else {
                        const char *nl = memchr(rbuf, '\n', (size_t) n);
                        first = nl ? (size_t) (nl - rbuf) + 1 : (size_t) n;
                }
                if (first < (size_t) n && block % every == 0) {
                        if (index.n_marks == INDEX_MARKS_MAX) {
                                /* Full: keep every second mark, and mark half as often. */
                                for (size_t i = 0; 2 * i < index.n_marks; i++)
                                        index.marks[i] = index.marks[2 * i];
                                index.n_marks = (index.n_marks + 1) / 2;
                                every *= 2;
                        }
                        if (block % every == 0) {
                                r = index_add_mark(&index, &allocated, newlines + 1 + !line_start, total + first);
                                if (r < 0)
                                        return r;
                        }
                }
                newlines += count_newlines(rbuf, (size_t) n);
                line_start = rbuf[n - 1] == '\n';
                total += (uint64_t) n;
        }

        r = utf8_end(&scan);
        if (r < 0)
                return not_text(&scan, newlines + 1, errmsg, errmsg_size);

        index.total_bytes = total;
        index.total_lines = newlines + !line_start;
        *ret = index;
        index = (FileIndex) {};
        return 0;
}

/* The last mark at or before line (there is one: marks[0] is line 1). */
static const FileIndexMark *index_find(const FileIndex *index, uint64_t line) {
        size_t lo = 0, hi = index->n_marks;

        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;

                if (index->marks[mid].line <= line)
                        lo = mid;
                else
                        hi = mid;
        }
        return &index->marks[lo];
}

int file_read_window(int fd, const FileIndex *index, uint64_t offset, uint32_t limit, size_t budget,
                     FileWindow *ret, char *errmsg, size_t errmsg_size) {
        _cleanup_free_ char *rbuf = NULL;
        _cleanup_(window_free_buf) Window w = {
                .start = MAX(offset, (uint64_t) 1),
                .limit = limit,
                .budget = budget,
        };
        uint64_t next;
        bool has_next;
        int r;

        if (limit == 0 || limit > SBX_FILE_READ_MAX_LINES) {
                set_errmsg(errmsg, errmsg_size, "limit must be between 1 and %u", SBX_FILE_READ_MAX_LINES);
                return -EINVAL;
        }
        /* Room for one character (unless it is escaped), so that a cut line still shows something. */
        if (budget < UTF8_CHAR_MAX) {
                set_errmsg(errmsg, errmsg_size, "the budget must be at least %u bytes", UTF8_CHAR_MAX);
                return -EINVAL;
        }

        if (w.start <= index->total_lines && index->n_marks > 0) {
                const FileIndexMark *mark = index_find(index, w.start);
                uint64_t pos = mark->offset, line = mark->line;
                Utf8Scan scan = { .offset = pos };

                rbuf = malloc(READ_BUF_SIZE);
                if (!rbuf)
                        return -ENOMEM;
                while (!w.done) {
                        ssize_t n = read_block(fd, rbuf, pos);

                        if (n < 0)
                                return (int) n;
                        if (n == 0) {
                                r = utf8_end(&scan);
                                if (r < 0)
                                        return not_text(&scan, line, errmsg, errmsg_size);
                                /* A last line without '\n' that fit. */
                                if (w.len > w.committed) {
                                        w.committed = w.len;
                                        w.num_lines++;
                                }
                                break;
                        }
                        r = utf8_feed(&scan, rbuf, (size_t) n);
                        if (r < 0)
                                return not_text_in_block(&scan, rbuf, pos, line, errmsg, errmsg_size);

                        for (size_t at = 0; at < (size_t) n && !w.done;) {
                                const char *nl = memchr(rbuf + at, '\n', (size_t) n - at);
                                size_t end = nl ? (size_t) (nl - rbuf) + 1 : (size_t) n;

                                if (line >= w.start) {
                                        r = window_take(&w, rbuf + at, end - at, nl != NULL);
                                        if (r < 0)
                                                return r;
                                }
                                if (nl)
                                        line++;
                                at = end;
                        }
                        pos += (uint64_t) n;
                }
        }
        if (!w.buf) {
                w.buf = malloc(1);
                if (!w.buf)
                        return -ENOMEM;
        }
        w.buf[w.len] = '\0';

        next = w.start + w.num_lines;
        has_next = next <= index->total_lines;

        *ret = (FileWindow) {
                .content = TAKE_PTR(w.buf),
                .len = w.len,
                .start_line = w.start,
                .num_lines = w.num_lines,
                .total_lines = index->total_lines,
                .bytes_read = w.len,
                .total_bytes = index->total_bytes,
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

/* Occurrences of e->old_string in buf, left to right, without overlap; the
 * first one in *ret_first (if there is one). */
static size_t count_occurrences(const char *buf, size_t len, const FileEditSpec *e, const char **ret_first) {
        const char *end = buf + len;
        size_t n = 0;

        for (const char *p = buf, *q; (q = memmem(p, (size_t) (end - p), e->old_string, e->old_len));
             p = q + e->old_len)
                if (n++ == 0)
                        *ret_first = q;
        return n;
}

/* Write buf with its count occurrences (as counted above, the first at first)
 * replaced into dst. */
static void replace_occurrences(const char *buf, size_t len, const FileEditSpec *e, const char *first, size_t count,
                                char *dst) {
        const char *end = buf + len, *p = buf, *q = first;

        /* An empty new_string may come as a NULL pointer: never hand it to mempcpy. */
        for (size_t i = 0; i < count; i++) {
                if (i > 0)
                        q = memmem(p, (size_t) (end - p), e->old_string, e->old_len);
                dst = mempcpy(dst, p, (size_t) (q - p));
                if (e->new_len > 0)
                        dst = mempcpy(dst, e->new_string, e->new_len);
                p = q + e->old_len;
        }
        if (end > p)
                memcpy(dst, p, (size_t) (end - p));
}

int file_edit_list_parse(const void *payload, size_t size, FileEditList *ret) {
        Sbx__EditList *list = sbx__edit_list__unpack(NULL, size, payload);
        FileEditSpec *specs;

        if (!list)
                return -EBADMSG;
        if (list->n_edits == 0) {
                sbx__edit_list__free_unpacked(list, NULL);
                return -EBADMSG;
        }
        specs = calloc(list->n_edits, sizeof(*specs));
        if (!specs) {
                sbx__edit_list__free_unpacked(list, NULL);
                return -ENOMEM;
        }
        for (size_t i = 0; i < list->n_edits; i++)
                specs[i] = (FileEditSpec) {
                        .old_string = (const char *) list->edits[i]->old_string.data,
                        .old_len = list->edits[i]->old_string.len,
                        .new_string = (const char *) list->edits[i]->new_string.data,
                        .new_len = list->edits[i]->new_string.len,
                        .replace_all = list->edits[i]->replace_all,
                };
        *ret = (FileEditList) { .list = list, .specs = specs, .n = list->n_edits };
        return 0;
}

void file_edit_list_done(FileEditList *l) {
        if (l->list)
                sbx__edit_list__free_unpacked(l->list, NULL);
        free(l->specs);
        *l = (FileEditList) {};
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
                const char *first = NULL;
                size_t count, grown, next_len;
                char *next;

                if (e->old_len == 0) {
                        set_errmsg(errmsg, errmsg_size, "edits[%zu]: old_string is empty", i);
                        return -EINVAL;
                }
                if (e->old_len == e->new_len && memcmp(e->old_string, e->new_string, e->old_len) == 0) {
                        set_errmsg(errmsg, errmsg_size,
                                   "edits[%zu]: old_string and new_string are identical (no-op)", i);
                        return -EINVAL;
                }
                count = count_occurrences(text, text_len, e, &first);
                if (count == 0) {
                        set_errmsg(errmsg, errmsg_size, "edits[%zu]: old_string not found in the file", i);
                        return -EINVAL;
                }
                if (count > 1 && !e->replace_all) {
                        set_errmsg(errmsg, errmsg_size,
                                   "edits[%zu]: old_string occurs %zu times; add context to make it unique or set replace_all",
                                   i, count);
                        return -EINVAL;
                }

                /* count * old_len <= text_len, so only the additions can overflow. */
                if (__builtin_mul_overflow(count, e->new_len, &grown) ||
                    __builtin_add_overflow(text_len - count * e->old_len, grown, &next_len) ||
                    next_len > SBX_FILE_MAX) {
                        set_errmsg(errmsg, errmsg_size, "edits[%zu]: the result would exceed %llu bytes", i,
                                   (unsigned long long) SBX_FILE_MAX);
                        return -EFBIG;
                }

                next = malloc(next_len + 1);
                if (!next)
                        return -ENOMEM;
                replace_occurrences(text, text_len, e, first, count, next);
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
