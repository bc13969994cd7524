/* Transcript: render raw command output as a terminal would show it and keep
 * it on disk as committed lines with a fixed-width index (see transcript.h).
 *
 * Rendering model (per stream: stdout and stderr merged in one, or each apart):
 *   '\n' commits the line; '\r' moves the cursor to column 0; '\b' moves it
 *   one character left; '\t' is an ordinary character; CSI sequences are
 *   removed except EL ("ESC[K", "ESC[0K", "ESC[1K", "ESC[2K"), which erases;
 *   OSC/DCS/SOS/PM/APC strings (ended by BEL or ESC '\\') and other ESC
 *   sequences are removed; other C0 controls, DEL and C1 controls are removed;
 *   invalid UTF-8 becomes U+FFFD (one per maximal ill-formed subpart). The
 *   parser keeps its state between transcript_feed calls, so a sequence cut
 *   across calls renders as if it came whole.
 *
 * The line buffer holds the current line as UTF-8; the cursor is a byte
 * offset on a character boundary, one column per character. Cells erased
 * by EL are blanks: they render as spaces when text follows them, and
 * trailing blanks are not stored ("vis" is the end of the written text).
 *
 * Cap: a line is stored only while .log plus that line plus the marker line
 * stays within cap_bytes, so .log never exceeds the cap (unless the cap is
 * smaller than the marker itself). The line that does not fit is replaced by
 * the marker; afterwards output is only counted.
 *
 * Pending line: it exists once something was written since the last commit
 * and stays counted even if erased again, so total_lines never decreases;
 * transcript_finish commits it (an unfinished UTF-8 character becomes U+FFFD,
 * an unfinished escape sequence is dropped).
 *
 * transcript_open: raw output size is not stored, so transcript_raw_bytes()
 * of an opened transcript is the size of the stored text; capped is found
 * from the marker as the last line.
 *
 * Writes: committed lines are buffered and written at the end of every
 * transcript_feed call (.log before .idx before .out and .err, so an entry
 * never points past written text or lines); never fsync (see
 * transcript_finish).
 *
 * Streams apart (transcript_create_streams): stdout and stderr each have
 * their own renderer, so a line never mixes the two (nor is it cut where the
 * worker's reads of one pipe happened to end). Each committed line goes to the
 * one .log/.idx in the order it was committed, which is the merged view, and
 * its merged line number to "<id>.out" or "<id>.err" (one little-endian u64
 * per line of that stream), which is that stream's view with its own offsets:
 * 8 index bytes more per line, no text twice. The cap counts the one .log, so
 * both streams together; its marker line ends both streams. The merged view
 * shows one pending line, the one whose first byte came first (the other
 * stream's is in its own view until it is committed), so that total_lines
 * never decreases in either view. A transcript without .out (merged, or from
 * before streams were kept) has no single-stream views: reading one is
 * -ENODATA. */

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "sbx-limits.h"
#include "json-escape.h"
#include "macro.h"
#include "data/transcript.h"

#define ID_MAX (NAME_MAX - 4)              /* "<id>.log" must be a valid file name */
#define LOGBUF_SIZE (1024u * 1024u)
#define IDXBUF_ENTRIES 16384u
#define CSI_MAX 256u                        /* longer CSI sequences are dropped */
#define STR_MAX 8192u                       /* longer OSC/DCS strings end early */
#define OPEN_SCAN_ENTRIES 1024u
#define MARKER_PREFIX "[sbx: transcript cap of "

enum {
        ST_GROUND,
        ST_ESC,
        ST_ESC_INTER,
        ST_CSI,
        ST_STR,         /* OSC, DCS, SOS, PM, APC payload */
        ST_STR_ESC,     /* ESC seen inside a string: '\\' ends it */
};

/* The renderer of one stream: the parser's state and the current line. */
typedef struct Renderer {
        uint8_t state;
        uint8_t u8_need;        /* continuation bytes still expected */
        uint8_t u8_have;
        uint8_t u8_lo, u8_hi;   /* allowed range of the next continuation byte */
        uint8_t u8_buf[4];
        bool csi_private;
        bool csi_inter;
        unsigned csi_nparams;   /* separators seen + 1 once a parameter byte came */
        unsigned csi_param;     /* value of the first parameter */
        size_t seq_len;
        bool dirty;             /* something was written since the last commit */
        uint64_t dirty_piece;   /* streams apart: the piece that began the pending line */
        size_t len, cur, vis;
        char line[SBX_LINE_MAX + 8];
} Renderer;

/* A file of little-endian u64 entries, appended through a buffer. */
typedef struct EntryFile {
        int fd;
        uint64_t *buf;
        size_t buf_len;
        uint64_t disk;          /* entries written */
        uint64_t streamed;      /* bytes below this were handed to writeback (stream_behind) */
} EntryFile;

struct Transcript {
        int log_fd;
        bool writable;
        bool finished;
        bool capped;
        bool apart;             /* stdout and stderr kept apart: .out and .err */

        uint64_t cap;
        uint64_t raw_bytes;
        uint64_t committed;     /* lines, including buffered ones */
        uint64_t log_size;      /* bytes of committed lines, including buffered ones */
        uint64_t log_disk;      /* bytes written to .log */
        uint64_t log_streamed;  /* .log below this was handed to writeback (stream_behind) */
        size_t marker_len;      /* including '\n' */

        char *logbuf;
        size_t logbuf_len;
        EntryFile idx;          /* per line: the offset just past it in .log */

        /* streams apart: per stdout and stderr line, its merged line number */
        EntryFile stream_idx[2];
        uint64_t stream_lines[2];       /* including buffered ones */
        uint64_t pieces;                /* fed so far */

        Renderer rend[2];       /* [0]: both streams merged, or stdout; [1]: stderr */
};

/* File name suffixes, all four characters long. */
static const char *const suffixes[] = { ".log", ".idx", ".out", ".err" };
enum { FILE_LOG, FILE_IDX, FILE_OUT, FILE_ERR };

/* Bytes that render as themselves in the ground state: printable ASCII and TAB. */
static const bool plain_byte[256] = {
        ['\t'] = true,
        [0x20 ... 0x7e] = true,
};

static bool id_valid(const char *id) {
        size_t n;

        if (!id)
                return false;
        n = strlen(id);
        if (n == 0 || n > ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = id[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-'))
                        return false;
        }
        return true;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off, size_t *ret_done) {
        const char *p = buf;
        size_t done = 0;
        int r = 0;

        while (done < len) {
                ssize_t n = pwrite(fd, p + done, len - done, (off_t) (off + done));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                done += (size_t) n;
        }
        *ret_done = done;
        return r;
}

/* Read exactly len bytes at off; a short file is -EIO. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off) {
        ssize_t n = loop_pread(fd, buf, len, off);

        if (n < 0)
                return (int) n;
        return (size_t) n == len ? 0 : -EIO;
}

/* A long transcript is written once and then read in windows. What lies well
 * behind the end is handed to writeback and, once written, dropped from the
 * page cache: a command printing gigabytes then neither fills the host's
 * memory with its output nor makes the kernel find fresh pages for all of it
 * (on a VM the first touch of a page is expensive: 1 GiB transcripts ran at
 * half speed once the cache had grown by a few GiB). Best effort: pages not
 * yet written stay cached. The last STREAM_KEEP bytes, which readers want
 * first, are never dropped. */
#define STREAM_STEP (8ull << 20)
#define STREAM_KEEP (64ull << 20)

static void stream_behind(int fd, uint64_t end, uint64_t *streamed) {
        if (end < *streamed + STREAM_KEEP + STREAM_STEP)
                return;
        (void) sync_file_range(fd, (off_t) *streamed, (off_t) (end - STREAM_KEEP / 2 - *streamed),
                               SYNC_FILE_RANGE_WRITE);
        *streamed = end - STREAM_KEEP / 2;
        /* Everything older than STREAM_KEEP had at least STREAM_KEEP/2 of writing to get out. */
        (void) posix_fadvise(fd, 0, (off_t) (end - STREAM_KEEP), POSIX_FADV_DONTNEED);
}

/* Write out the buffered entries of f. */
static int entries_flush(EntryFile *f) {
        size_t done;
        int r;

        if (f->buf_len == 0)
                return 0;
        r = pwrite_all(f->fd, f->buf, f->buf_len * sizeof(uint64_t), f->disk * sizeof(uint64_t), &done);
        /* A torn entry is rewritten whole next time. */
        done /= sizeof(uint64_t);
        f->disk += done;
        if (done < f->buf_len)
                memmove(f->buf, f->buf + done, (f->buf_len - done) * sizeof(uint64_t));
        f->buf_len -= done;
        stream_behind(f->fd, f->disk * sizeof(uint64_t), &f->streamed);
        return r;
}

static int flush_log(Transcript *t) {
        size_t done;
        int r;

        if (t->logbuf_len == 0)
                return 0;
        r = pwrite_all(t->log_fd, t->logbuf, t->logbuf_len, t->log_disk, &done);
        t->log_disk += done;
        if (done < t->logbuf_len)
                memmove(t->logbuf, t->logbuf + done, t->logbuf_len - done);
        t->logbuf_len -= done;
        stream_behind(t->log_fd, t->log_disk, &t->log_streamed);
        return r;
}

/* .log first, then .idx, then the streams' line lists, so every written
 * entry points at written text and lines. */
static int flush_all(Transcript *t) {
        int r;

        r = flush_log(t);
        if (r >= 0)
                r = entries_flush(&t->idx);
        for (size_t i = 0; i < ELEMENTSOF(t->stream_idx) && r >= 0 && t->apart; i++)
                r = entries_flush(&t->stream_idx[i]);
        return r;
}

static size_t format_marker(uint64_t cap, char *buf, size_t size) {
        int n = snprintf(buf, size, MARKER_PREFIX "%" PRIu64 " bytes reached; further output is not kept]\n",
                         cap);
        return (size_t) n;
}

static void line_reset(Renderer *rd) {
        rd->len = rd->cur = rd->vis = 0;
        rd->dirty = false;
}

/* The streams a line of rd belongs to, as a mask of stream_idx (0: none kept apart). */
static unsigned stream_mask(const Transcript *t, const Renderer *rd) {
        return t->apart ? 1u << (rd - t->rend) : 0;
}

static bool streams_full(const Transcript *t, unsigned mask) {
        for (size_t i = 0; i < ELEMENTSOF(t->stream_idx); i++)
                if ((mask & (1u << i)) && t->stream_idx[i].buf_len == IDXBUF_ENTRIES)
                        return true;
        return false;
}

/* Append one line (text without '\n') to the buffers, and to the line lists
 * of the streams in mask. */
static int append_line(Transcript *t, unsigned mask, const char *text, size_t n) {
        size_t need = n + 1;
        int r;

        if (t->logbuf_len + need > LOGBUF_SIZE) {
                r = flush_log(t);
                if (r < 0)
                        return r;
        }
        if (t->idx.buf_len == IDXBUF_ENTRIES || (mask && streams_full(t, mask))) {
                r = flush_all(t);
                if (r < 0)
                        return r;
        }
        memcpy(t->logbuf + t->logbuf_len, text, n);
        t->logbuf[t->logbuf_len + n] = '\n';
        t->logbuf_len += need;
        t->log_size += need;
        t->idx.buf[t->idx.buf_len++] = htole64(t->log_size);
        for (size_t i = 0; mask && i < ELEMENTSOF(t->stream_idx); i++)
                if (mask & (1u << i)) {
                        t->stream_idx[i].buf[t->stream_idx[i].buf_len++] = htole64(t->committed);
                        t->stream_lines[i]++;
                }
        t->committed++;
        return 0;
}

/* The marker ends every stream: pending lines are dropped, later output only counted. */
static int commit_marker(Transcript *t) {
        char buf[128];
        size_t n;
        int r;

        n = format_marker(t->cap, buf, sizeof(buf));
        r = append_line(t, t->apart ? 3u : 0u, buf, n - 1);
        if (r < 0)
                return r;
        t->capped = true;
        for (size_t i = 0; i < ELEMENTSOF(t->rend); i++) {
                t->rend[i].state = ST_GROUND;
                t->rend[i].u8_need = 0;
                line_reset(&t->rend[i]);
        }
        return 0;
}

/* Commit text as the next line of rd (text may be rd->line), or the cap marker. */
static int commit_line(Transcript *t, Renderer *rd, const char *text, size_t n) {
        int r;

        if (t->cap < t->marker_len || t->log_size + n + 1 > t->cap - t->marker_len)
                return commit_marker(t);
        r = append_line(t, stream_mask(t, rd), text, n);
        if (r < 0)
                return r;
        line_reset(rd);
        return 0;
}

static int commit_current(Transcript *t, Renderer *rd) {
        return commit_line(t, rd, rd->line, rd->vis);
}

static size_t u8_len(uint8_t lead) {
        if (lead < 0x80)
                return 1;
        if (lead < 0xe0)
                return 2;
        if (lead < 0xf0)
                return 3;
        return 4;
}

static size_t columns_before(const Renderer *rd, size_t end) {
        size_t cols = 0;
        for (size_t i = 0; i < end; i++)
                cols += ((uint8_t) rd->line[i] & 0xc0) != 0x80;
        return cols;
}

/* Write one valid UTF-8 character (n bytes) at the cursor. */
static int line_put_char(Transcript *t, Renderer *rd, const char *s, size_t n) {
        int r;

        if (rd->cur == rd->len) {
                if (rd->len + n > SBX_LINE_MAX) {
                        r = commit_current(t, rd);
                        if (r < 0 || t->capped)
                                return r;
                }
                memcpy(rd->line + rd->len, s, n);
                rd->len += n;
                rd->cur = rd->vis = rd->len;
        } else {
                size_t m = u8_len((uint8_t) rd->line[rd->cur]);

                if (rd->len - m + n > SBX_LINE_MAX) {
                        /* Overwriting with a wider character overflows: wrap here. */
                        r = commit_current(t, rd);
                        if (r < 0 || t->capped)
                                return r;
                        return line_put_char(t, rd, s, n);
                }
                if (m != n) {
                        memmove(rd->line + rd->cur + n, rd->line + rd->cur + m, rd->len - rd->cur - m);
                        rd->len = rd->len - m + n;
                        if (rd->vis > rd->cur)
                                rd->vis = rd->vis - m + n;
                }
                memcpy(rd->line + rd->cur, s, n);
                rd->cur += n;
                rd->vis = MAX(rd->vis, rd->cur);
        }
        rd->dirty = true;
        return 0;
}

/* Write a run of plain bytes (printable ASCII and TAB) at the cursor. */
static int line_put_plain(Transcript *t, Renderer *rd, const uint8_t *s, size_t n) {
        int r;

        while (n > 0) {
                if (rd->cur == rd->len) {
                        size_t room = SBX_LINE_MAX - rd->len, k;

                        if (room == 0) {
                                r = commit_current(t, rd);
                                if (r < 0 || t->capped)
                                        return r;
                                continue;
                        }
                        k = MIN(room, n);
                        memcpy(rd->line + rd->len, s, k);
                        rd->len += k;
                        rd->cur = rd->vis = rd->len;
                        rd->dirty = true;
                        s += k;
                        n -= k;
                } else if (((uint8_t) rd->line[rd->cur] & 0x80) == 0) {
                        rd->line[rd->cur++] = (char) *s++;
                        rd->vis = MAX(rd->vis, rd->cur);
                        rd->dirty = true;
                        n--;
                } else {
                        r = line_put_char(t, rd, (const char *) s, 1);
                        if (r < 0 || t->capped)
                                return r;
                        s++;
                        n--;
                }
        }
        return 0;
}

static int put_replacement(Transcript *t, Renderer *rd) {
        return line_put_char(t, rd, "\xef\xbf\xbd", 3);
}

static void line_backspace(Renderer *rd) {
        if (rd->cur == 0)
                return;
        rd->cur--;
        while (rd->cur > 0 && ((uint8_t) rd->line[rd->cur] & 0xc0) == 0x80)
                rd->cur--;
}

/* EL: 0 cursor to end, 1 start through cursor, 2 whole line; the cursor stays. */
static void line_erase(Renderer *rd, unsigned mode) {
        size_t cols, e, k;

        switch (mode) {
        case 0:
                rd->len = rd->cur;
                rd->vis = MIN(rd->vis, rd->cur);
                break;
        case 1:
                cols = columns_before(rd, rd->cur);
                e = rd->cur < rd->len ? rd->cur + u8_len((uint8_t) rd->line[rd->cur]) : rd->cur;
                k = cols + (rd->cur < rd->len);
                memmove(rd->line + k, rd->line + e, rd->len - e);
                memset(rd->line, ' ', k);
                rd->len = rd->len - e + k;
                rd->vis = rd->vis <= e ? 0 : rd->vis - e + k;
                rd->cur = cols;
                break;
        case 2:
                cols = columns_before(rd, rd->cur);
                memset(rd->line, ' ', cols);
                rd->len = rd->cur = cols;
                rd->vis = 0;
                break;
        default:
                break;
        }
}

static void csi_reset(Renderer *rd) {
        rd->csi_private = rd->csi_inter = false;
        rd->csi_nparams = 0;
        rd->csi_param = 0;
        rd->seq_len = 0;
}

static int render_byte(Transcript *t, Renderer *rd, uint8_t c);

/* A control byte in the ground state (or executed inside a sequence). */
static int render_control(Transcript *t, Renderer *rd, uint8_t c) {
        switch (c) {
        case '\n':
                return commit_current(t, rd);
        case '\r':
                rd->cur = 0;
                return 0;
        case '\b':
                line_backspace(rd);
                return 0;
        case '\t':
                return line_put_char(t, rd, "\t", 1);
        case 0x1b:
                rd->state = ST_ESC;
                return 0;
        default:
                return 0;        /* other C0 controls and DEL are dropped */
        }
}

static int render_ground(Transcript *t, Renderer *rd, uint8_t c) {
        int r;

        if (rd->u8_need > 0) {
                if (c >= rd->u8_lo && c <= rd->u8_hi) {
                        rd->u8_buf[rd->u8_have++] = c;
                        rd->u8_lo = 0x80;
                        rd->u8_hi = 0xbf;
                        if (--rd->u8_need > 0)
                                return 0;
                        /* C1 controls (U+0080..U+009F) are invisible: drop them. */
                        if (rd->u8_have == 2 && rd->u8_buf[0] == 0xc2 && rd->u8_buf[1] < 0xa0)
                                return 0;
                        return line_put_char(t, rd, (const char *) rd->u8_buf, rd->u8_have);
                }
                /* Ill-formed: the partial sequence is one U+FFFD, then c anew. */
                rd->u8_need = 0;
                r = put_replacement(t, rd);
                if (r < 0 || t->capped)
                        return r;
        }

        if (plain_byte[c])
                return line_put_plain(t, rd, &c, 1);
        if (c < 0x20 || c == 0x7f)
                return render_control(t, rd, c);

        rd->u8_have = 1;
        rd->u8_buf[0] = c;
        rd->u8_lo = 0x80;
        rd->u8_hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
                rd->u8_need = 1;
        else if (c >= 0xe0 && c <= 0xef) {
                rd->u8_need = 2;
                if (c == 0xe0)
                        rd->u8_lo = 0xa0;
                else if (c == 0xed)
                        rd->u8_hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                rd->u8_need = 3;
                if (c == 0xf0)
                        rd->u8_lo = 0x90;
                else if (c == 0xf4)
                        rd->u8_hi = 0x8f;
        } else
                return put_replacement(t, rd);      /* 80..BF, C0, C1, F5..FF */
        return 0;
}

static int render_byte(Transcript *t, Renderer *rd, uint8_t c) {
        switch (rd->state) {
        case ST_GROUND:
                return render_ground(t, rd, c);

        case ST_ESC:
        case ST_ESC_INTER:
                if (c == 0x1b) {
                        rd->state = ST_ESC;
                        return 0;
                }
                if (c == 0x18 || c == 0x1a) {
                        rd->state = ST_GROUND;
                        return 0;
                }
                if (c < 0x20 || c >= 0x7f) {
                        /* Not an escape sequence after all: drop the ESC, keep c. */
                        rd->state = ST_GROUND;
                        return render_ground(t, rd, c);
                }
                if (c <= 0x2f) {
                        if (rd->state == ST_ESC)
                                rd->seq_len = 0;
                        rd->state = ST_ESC_INTER;
                        if (++rd->seq_len > CSI_MAX)
                                rd->state = ST_GROUND;
                        return 0;
                }
                if (rd->state == ST_ESC) {
                        if (c == '[') {
                                csi_reset(rd);
                                rd->state = ST_CSI;
                                return 0;
                        }
                        if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
                                rd->seq_len = 0;
                                rd->state = ST_STR;
                                return 0;
                        }
                }
                rd->state = ST_GROUND;   /* final byte: the sequence is dropped */
                return 0;

        case ST_CSI:
                if (c >= 0x40 && c <= 0x7e) {
                        rd->state = ST_GROUND;
                        if (c == 'K' && !rd->csi_private && !rd->csi_inter && rd->csi_nparams <= 1)
                                line_erase(rd, rd->csi_param);
                        return 0;
                }
                if (c >= 0x30 && c <= 0x3f) {
                        if (c >= '0' && c <= '9') {
                                if (rd->csi_nparams == 0)
                                        rd->csi_nparams = 1;
                                if (rd->csi_nparams == 1 && rd->csi_param < 10000)
                                        rd->csi_param = rd->csi_param * 10 + (unsigned) (c - '0');
                        } else if (c == ';' || c == ':')
                                rd->csi_nparams = MAX(rd->csi_nparams, 1u) + 1;
                        else
                                rd->csi_private = true;
                } else if (c >= 0x20 && c <= 0x2f)
                        rd->csi_inter = true;
                else if (c == 0x1b) {
                        rd->state = ST_ESC;
                        return 0;
                } else if (c == 0x18 || c == 0x1a) {
                        rd->state = ST_GROUND;
                        return 0;
                } else if (c < 0x20 || c == 0x7f)
                        return render_control(t, rd, c);    /* executed, the CSI goes on */
                else {
                        rd->state = ST_GROUND;           /* 8-bit byte: not a CSI */
                        return render_ground(t, rd, c);
                }
                if (++rd->seq_len > CSI_MAX)
                        rd->state = ST_GROUND;
                return 0;

        case ST_STR:
                if (c == 0x07 || c == 0x18 || c == 0x1a)
                        rd->state = ST_GROUND;
                else if (c == 0x1b)
                        rd->state = ST_STR_ESC;
                else if (++rd->seq_len > STR_MAX)
                        rd->state = ST_GROUND;
                return 0;

        case ST_STR_ESC:
                if (c == '\\') {
                        rd->state = ST_GROUND;
                        return 0;
                }
                /* The ESC starts a new sequence and ends the string. */
                rd->state = ST_ESC;
                return render_byte(t, rd, c);

        default:
                rd->state = ST_GROUND;
                return 0;
        }
}

#define REPEAT8(b) (0x0101010101010101ull * (b))

/* Length of the leading run of plain bytes; 8 bytes per step while none is special. */
static size_t scan_plain(const uint8_t *p, size_t n) {
        size_t i = 0;

        for (;;) {
                size_t lim;

                while (i + 8 <= n) {
                        uint64_t x, below, above;

                        memcpy(&x, p + i, 8);
                        below = (x - REPEAT8(0x20)) & ~x & REPEAT8(0x80);   /* some byte < 0x20 */
                        above = ((x + REPEAT8(0x01)) | x) & REPEAT8(0x80);  /* some byte >= 0x7f */
                        if (below | above)
                                break;
                        i += 8;
                }
                lim = MIN(i + 8, n);
                for (; i < lim; i++)
                        if (!plain_byte[p[i]])
                                return i;
                if (i >= n)
                        return n;
        }
}

static int entries_alloc(EntryFile *f) {
        if (!f->buf) {
                f->buf = malloc(IDXBUF_ENTRIES * sizeof(uint64_t));
                if (!f->buf)
                        return -ENOMEM;
        }
        return 0;
}

static void entries_done(EntryFile *f) {
        f->fd = safe_close(f->fd);
        free(f->buf);
        f->buf = NULL;
}

static int ensure_buffers(Transcript *t) {
        int r;

        if (!t->logbuf) {
                t->logbuf = malloc(LOGBUF_SIZE);
                if (!t->logbuf)
                        return -ENOMEM;
        }
        r = entries_alloc(&t->idx);
        for (size_t i = 0; i < ELEMENTSOF(t->stream_idx) && r >= 0 && t->apart; i++)
                r = entries_alloc(&t->stream_idx[i]);
        return r;
}

/* Render [p, end) with rd. */
static int render(Transcript *t, Renderer *rd, const uint8_t *p, const uint8_t *end) {
        int r = 0;

        while (p < end && !t->capped) {
                if (rd->state == ST_GROUND && rd->u8_need == 0) {
                        size_t run = scan_plain(p, (size_t) (end - p));

                        /* Fast path: a whole plain line into an empty line buffer. */
                        if (rd->len == 0 && run < (size_t) (end - p) && p[run] == '\n' &&
                            run <= SBX_LINE_MAX) {
                                r = commit_line(t, rd, (const char *) p, run);
                                if (r < 0)
                                        break;
                                p += run + 1;
                                continue;
                        }
                        if (run > 0) {
                                r = line_put_plain(t, rd, p, run);
                                if (r < 0)
                                        break;
                                p += run;
                                continue;
                        }
                }
                r = render_byte(t, rd, *p++);
                if (r < 0)
                        break;
        }
        return r;
}

/* The renderer of stream s, or NULL if t does not take it. */
static Renderer *stream_renderer(Transcript *t, TranscriptStream s) {
        switch (s) {
        case TRANSCRIPT_MERGED:
                return t->apart ? NULL : &t->rend[0];
        case TRANSCRIPT_STDOUT:
                return &t->rend[0];
        case TRANSCRIPT_STDERR:
                return &t->rend[t->apart];
        default:
                return NULL;
        }
}

int transcript_feed_stream(Transcript *t, TranscriptStream s, const void *data, size_t size) {
        Renderer *rd;
        int r, q;

        if (!t || (!data && size > 0))
                return -EINVAL;
        if (!t->writable || t->finished)
                return -EBADF;
        rd = stream_renderer(t, s);
        if (!rd)
                return -EINVAL;
        t->raw_bytes += size;
        if (t->capped || size == 0)
                return 0;
        r = ensure_buffers(t);
        if (r < 0)
                return r;

        if (t->apart) {
                bool was_dirty = rd->dirty;
                uint64_t before = t->committed;

                r = render(t, rd, data, (const uint8_t *) data + size);
                /* A pending line begun by this piece: it is ordered after the other stream's. */
                if (rd->dirty && (!was_dirty || t->committed != before))
                        rd->dirty_piece = t->pieces;
                t->pieces++;
        } else
                r = render(t, rd, data, (const uint8_t *) data + size);

        q = flush_all(t);
        return r < 0 ? r : q;
}

int transcript_feed(Transcript *t, const void *data, size_t size) {
        return transcript_feed_stream(t, TRANSCRIPT_MERGED, data, size);
}

/* The end of the output: commit rd's pending line, if any. */
static int renderer_finish(Transcript *t, Renderer *rd) {
        int r;

        if (t->capped)
                return 0;
        if (rd->state == ST_GROUND && rd->u8_need > 0) {
                rd->u8_need = 0;
                r = put_replacement(t, rd);
                if (r < 0)
                        return r;
        }
        rd->state = ST_GROUND;
        rd->u8_need = 0;
        if (rd->dirty && !t->capped)
                return commit_current(t, rd);
        return 0;
}

int transcript_finish(Transcript *t) {
        Renderer *first, *second;
        int r;

        if (!t)
                return -EINVAL;
        if (!t->writable || t->finished)
                return 0;
        r = ensure_buffers(t);
        if (r < 0)
                return r;
        /* The older pending line first, as the merged view shows it. */
        first = &t->rend[0];
        second = &t->rend[1];
        if (t->apart && second->dirty && (!first->dirty || second->dirty_piece < first->dirty_piece)) {
                first = &t->rend[1];
                second = &t->rend[0];
        }
        r = renderer_finish(t, first);
        if (r >= 0 && t->apart)
                r = renderer_finish(t, second);
        if (r < 0)
                return r;
        /* Written, not synced: a transcript survives any sbxd crash or restart from
         * the page cache; only a power loss may cost its last lines (layers, by
         * contrast, are synced). An fsync per command would double its cost. */
        r = flush_all(t);
        if (r < 0)
                return r;
        t->finished = true;
        free(t->logbuf);
        t->logbuf = NULL;
        free(t->idx.buf);
        t->idx.buf = NULL;
        for (size_t i = 0; i < ELEMENTSOF(t->stream_idx); i++) {
                free(t->stream_idx[i].buf);
                t->stream_idx[i].buf = NULL;
        }
        return 0;
}

static Transcript *transcript_new(void) {
        Transcript *t = calloc(1, sizeof(Transcript));
        if (!t)
                return NULL;
        t->log_fd = t->idx.fd = t->stream_idx[0].fd = t->stream_idx[1].fd = -EBADF;
        return t;
}

static void file_name(const char *id, unsigned which, char name[static NAME_MAX + 1]) {
        (void) snprintf(name, NAME_MAX + 1, "%s%s", id, suffixes[which]);
}

static int create_file(int dirfd, const char *id, unsigned which) {
        char name[NAME_MAX + 1];

        file_name(id, which, name);
        return RET_NERRNO(openat(dirfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
}

static int create_full(int dirfd, const char *id, uint64_t cap_bytes, bool apart, Transcript **ret) {
        _cleanup_(transcript_freep) Transcript *t = NULL;
        char marker[128];

        if (!id_valid(id) || !ret)
                return -EINVAL;
        t = transcript_new();
        if (!t)
                return -ENOMEM;
        t->log_fd = create_file(dirfd, id, FILE_LOG);
        if (t->log_fd < 0)
                return t->log_fd;
        t->idx.fd = create_file(dirfd, id, FILE_IDX);
        if (t->idx.fd < 0)
                return t->idx.fd;
        for (unsigned i = 0; apart && i < ELEMENTSOF(t->stream_idx); i++) {
                t->stream_idx[i].fd = create_file(dirfd, id, FILE_OUT + i);
                if (t->stream_idx[i].fd < 0)
                        return t->stream_idx[i].fd;
        }
        t->writable = true;
        t->apart = apart;
        t->cap = cap_bytes;
        t->marker_len = format_marker(cap_bytes, marker, sizeof(marker));
        *ret = TAKE_PTR(t);
        return 0;
}

int transcript_create(int dirfd, const char *id, uint64_t cap_bytes, Transcript **ret) {
        return create_full(dirfd, id, cap_bytes, false, ret);
}

int transcript_create_streams(int dirfd, const char *id, uint64_t cap_bytes, Transcript **ret) {
        return create_full(dirfd, id, cap_bytes, true, ret);
}

/* Is entry j (value e, predecessor prev) the end of a complete line? */
static int entry_consistent(Transcript *t, uint64_t e, uint64_t prev, uint64_t log_file_size) {
        char c;
        int r;

        if (e > log_file_size || e <= prev)
                return 0;
        r = pread_all(t->log_fd, &c, 1, e - 1);
        if (r < 0)
                return r;
        return c == '\n';
}

/* Find the number of consistent index entries (and the last one's value),
 * scanning back from entry n - 1. */
static int scan_index(Transcript *t, uint64_t n, uint64_t log_file_size, uint64_t *ret_n, uint64_t *ret_last) {
        _cleanup_free_ uint64_t *e = NULL;
        uint64_t hi = n;

        e = malloc((OPEN_SCAN_ENTRIES + 1) * sizeof(uint64_t));
        if (!e)
                return -ENOMEM;
        while (hi > 0) {
                /* Candidates [lo, hi); read from rd so that each has its predecessor. */
                uint64_t lo = hi > OPEN_SCAN_ENTRIES ? hi - OPEN_SCAN_ENTRIES : 0;
                uint64_t rd = lo > 0 ? lo - 1 : 0;
                size_t k = (size_t) (hi - rd);
                int r;

                r = pread_all(t->idx.fd, e, k * sizeof(uint64_t), rd * sizeof(uint64_t));
                if (r < 0)
                        return r;
                for (size_t i = 0; i < k; i++)
                        e[i] = le64toh(e[i]);
                for (uint64_t j = hi; j-- > lo;) {
                        uint64_t v = e[j - rd], prev = j > 0 ? e[j - rd - 1] : 0;

                        r = entry_consistent(t, v, prev, log_file_size);
                        if (r < 0)
                                return r;
                        if (r > 0) {
                                *ret_n = j + 1;
                                *ret_last = v;
                                return 0;
                        }
                }
                hi = lo;
        }
        *ret_n = 0;
        *ret_last = 0;
        return 0;
}

/* The number of leading entries of f (n of them on disk) that name one of
 * the first committed merged lines: a crash may have left later ones. */
static int stream_scan(const EntryFile *f, uint64_t n, uint64_t committed, uint64_t *ret_n) {
        uint64_t e[OPEN_SCAN_ENTRIES];

        while (n > 0) {
                uint64_t lo = n > OPEN_SCAN_ENTRIES ? n - OPEN_SCAN_ENTRIES : 0;
                int r = pread_all(f->fd, e, (size_t) (n - lo) * sizeof(uint64_t), lo * sizeof(uint64_t));

                if (r < 0)
                        return r;
                for (; n > lo; n--)
                        if (le64toh(e[n - 1 - lo]) < committed) {
                                *ret_n = n;
                                return 0;
                        }
        }
        *ret_n = 0;
        return 0;
}

static int open_file(int dirfd, const char *id, unsigned which, uint64_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        char name[NAME_MAX + 1];
        struct stat st;

        file_name(id, which, name);
        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        *ret_size = (uint64_t) st.st_size;
        return TAKE_FD(fd);
}

/* The line lists of stdout and stderr, if t keeps them (.out exists). */
static int open_streams(Transcript *t, int dirfd, const char *id) {
        for (unsigned i = 0; i < ELEMENTSOF(t->stream_idx); i++) {
                EntryFile *f = &t->stream_idx[i];
                uint64_t size, n;
                int r;

                f->fd = open_file(dirfd, id, FILE_OUT + i, &size);
                if (f->fd == -ENOENT && i == 0)
                        return 0;       /* merged, or written before streams were kept */
                if (f->fd < 0)
                        return f->fd;
                r = stream_scan(f, size / sizeof(uint64_t), t->committed, &n);
                if (r < 0)
                        return r;
                f->disk = t->stream_lines[i] = n;
        }
        t->apart = true;
        return 0;
}

/* Cut a torn tail (crash mid-write) of both files back to the last complete
 * line n, ending at last. If they cannot be written, the tail is ignored. */
static void repair_tail(int dirfd, const char *id, uint64_t n, uint64_t last) {
        _cleanup_close_ int wi = -EBADF, wl = -EBADF;
        char log[NAME_MAX + 1], idx[NAME_MAX + 1];

        file_name(id, FILE_LOG, log);
        file_name(id, FILE_IDX, idx);
        wi = openat(dirfd, idx, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        wl = openat(dirfd, log, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (wi >= 0 && wl >= 0 &&
            ftruncate(wi, (off_t) (n * sizeof(uint64_t))) == 0 &&
            ftruncate(wl, (off_t) last) == 0) {
                (void) fsync(wl);
                (void) fsync(wi);
        }
}

int transcript_open(int dirfd, const char *id, Transcript **ret) {
        _cleanup_(transcript_freep) Transcript *t = NULL;
        uint64_t log_size, idx_size, n, last;
        int r;

        if (!id_valid(id) || !ret)
                return -EINVAL;
        t = transcript_new();
        if (!t)
                return -ENOMEM;
        t->log_fd = open_file(dirfd, id, FILE_LOG, &log_size);
        if (t->log_fd < 0)
                return t->log_fd;
        t->idx.fd = open_file(dirfd, id, FILE_IDX, &idx_size);
        if (t->idx.fd < 0)
                return t->idx.fd;

        n = idx_size / sizeof(uint64_t);
        r = scan_index(t, n, log_size, &n, &last);
        if (r < 0)
                return r;
        if (n * sizeof(uint64_t) != idx_size)
                repair_tail(dirfd, id, n, last);

        t->committed = n;
        t->log_size = t->log_disk = last;
        t->idx.disk = n;
        t->raw_bytes = last;    /* unknown after the fact: the stored bytes */
        t->finished = true;
        r = open_streams(t, dirfd, id);
        if (r < 0)
                return r;

        if (n > 0) {
                char head[sizeof(MARKER_PREFIX) - 1];
                uint64_t first = 0;

                if (n > 1) {
                        r = pread_all(t->idx.fd, &first, sizeof(first), (n - 2) * sizeof(uint64_t));
                        if (r < 0)
                                return r;
                        first = le64toh(first);
                }
                if (last - first >= sizeof(head)) {
                        r = pread_all(t->log_fd, head, sizeof(head), first);
                        if (r < 0)
                                return r;
                        t->capped = memcmp(head, MARKER_PREFIX, sizeof(head)) == 0;
                }
        }

        *ret = TAKE_PTR(t);
        return 0;
}

/* The pending line the merged view shows, or NULL: with streams apart, the
 * one begun first. */
static const Renderer *merged_pending(const Transcript *t) {
        const Renderer *a = &t->rend[0], *b = &t->rend[1];

        if (!t->writable || t->finished || t->capped)
                return NULL;
        if (t->apart && b->dirty && (!a->dirty || b->dirty_piece < a->dirty_piece))
                return b;
        return a->dirty ? a : NULL;
}

/* The pending line of stream i (0 stdout, 1 stderr) of a transcript with streams apart, or NULL. */
static const Renderer *stream_pending(const Transcript *t, unsigned i) {
        if (!t->writable || t->finished || t->capped)
                return NULL;
        return t->rend[i].dirty ? &t->rend[i] : NULL;
}

uint64_t transcript_total_lines(const Transcript *t) {
        return t->committed + !!merged_pending(t);
}

uint64_t transcript_stream_total_lines(const Transcript *t, TranscriptStream s) {
        unsigned i = s == TRANSCRIPT_STDERR;

        if (s == TRANSCRIPT_MERGED)
                return transcript_total_lines(t);
        if (!t->apart || (s != TRANSCRIPT_STDOUT && s != TRANSCRIPT_STDERR))
                return 0;
        return t->stream_lines[i] + !!stream_pending(t, i);
}

bool transcript_has_streams(const Transcript *t) {
        return t->apart;
}

uint64_t transcript_committed_lines(const Transcript *t) {
        return t->committed;
}

uint64_t transcript_raw_bytes(const Transcript *t) {
        return t->raw_bytes;
}

bool transcript_capped(const Transcript *t) {
        return t->capped;
}

/* Of the k lines in text (each ending in '\n'), keep the first ones whose
 * escaped size stays within budget, at least one; returns their bytes. */
static size_t lines_within_budget(const char *text, size_t len, uint64_t *k, size_t budget, size_t *ret_cost) {
        size_t used = 0, cost = 0;
        uint64_t kept = 0;

        while (kept < *k) {
                const char *nl = memchr(text + used, '\n', len - used);
                size_t n = nl ? (size_t) (nl - (text + used)) + 1 : len - used;
                size_t c = json_escaped_size(text + used, n);

                if (kept > 0 && cost + c > budget)
                        break;
                cost += c;
                used += n;
                kept++;
        }
        *k = kept;
        *ret_cost = cost;
        return used;
}

/* A window being read: raw committed lines, within a budget. */
typedef struct Window {
        char *text;
        size_t len;
        uint64_t lines;
        size_t budget;
} Window;

/* Append merged lines [first, first + count) to w, as many as their raw size
 * lets within w->budget (at least one line in w); *ret_taken says how many. */
static int window_add_run(Transcript *t, Window *w, uint64_t first, uint64_t count, uint64_t *ret_taken) {
        _cleanup_free_ uint64_t *e = NULL;
        uint64_t rd = first > 0 ? first - 1 : 0, base = 0, prev, k = 0;
        size_t n = (size_t) (first + count - rd), len;
        char *text;
        int r;

        e = malloc(n * sizeof(uint64_t));
        if (!e)
                return -ENOMEM;
        r = pread_all(t->idx.fd, e, n * sizeof(uint64_t), rd * sizeof(uint64_t));
        if (r < 0)
                return r;
        if (first > 0)
                base = le64toh(e[0]);
        prev = base;
        /* Escaping only adds bytes: the raw size bounds what can fit. */
        for (uint64_t i = 0; i < count; i++) {
                uint64_t end = le64toh(e[first > 0 ? i + 1 : i]);

                if (end <= prev || end > t->log_size)
                        return -EBADMSG;
                if (w->len + (end - base) > w->budget && w->lines + k > 0)
                        break;
                k = i + 1;
                prev = end;
        }
        len = (size_t) (prev - base);
        if (len > 0) {
                text = realloc(w->text, w->len + len);
                if (!text)
                        return -ENOMEM;
                w->text = text;
                r = pread_all(t->log_fd, w->text + w->len, len, base);
                if (r < 0)
                        return r;
                w->len += len;
                w->lines += k;
        }
        *ret_taken = k;
        return 0;
}

/* Append lines [start, start + count) of a stream, whose line list is f, to w:
 * runs of consecutive merged lines are read at once. */
static int window_add_stream(Transcript *t, Window *w, const EntryFile *f, uint64_t start, uint64_t count) {
        _cleanup_free_ uint64_t *e = NULL;
        uint64_t taken = 0;
        int r;

        e = malloc(count * sizeof(uint64_t));
        if (!e)
                return -ENOMEM;
        r = pread_all(f->fd, e, count * sizeof(uint64_t), start * sizeof(uint64_t));
        if (r < 0)
                return r;
        for (uint64_t i = 0; i < count; i++) {
                e[i] = le64toh(e[i]);
                if (e[i] >= t->committed || (i > 0 && e[i] <= e[i - 1]))
                        return -EBADMSG;
        }
        for (uint64_t i = 0, j; i < count; i = j) {
                j = i + 1;
                while (j < count && e[j] == e[j - 1] + 1)
                        j++;
                r = window_add_run(t, w, e[i], j - i, &taken);
                if (r < 0)
                        return r;
                if (taken < j - i)
                        break;
        }
        return 0;
}

int transcript_read_stream(Transcript *t, TranscriptStream s, uint64_t start, uint64_t limit, size_t budget,
                           char **ret_text, size_t *ret_len, uint64_t *ret_end) {
        Window w = { .budget = budget };
        _cleanup_free_ char *text = NULL;
        const Renderer *pend;
        uint64_t total, committed, want, c = 0, k;
        size_t text_cost = 0, pending_len = 0;
        bool pending = false;
        int r = 0;

        if (!t || !ret_text || (s != TRANSCRIPT_MERGED && s != TRANSCRIPT_STDOUT && s != TRANSCRIPT_STDERR))
                return -EINVAL;
        if (s != TRANSCRIPT_MERGED && !t->apart)
                return -ENODATA;
        if (t->writable && !t->finished) {
                r = flush_all(t);
                if (r < 0)
                        return r;
        }

        committed = s == TRANSCRIPT_MERGED ? t->committed : t->stream_lines[s == TRANSCRIPT_STDERR];
        pend = s == TRANSCRIPT_MERGED ? merged_pending(t) : stream_pending(t, s == TRANSCRIPT_STDERR);
        total = committed + !!pend;
        want = start < total ? MIN(limit, total - start) : 0;

        if (start < committed) {
                /* Every line takes at least one byte, so no more than budget fit. */
                c = MIN(want, committed - start);
                c = MIN(c, (uint64_t) MAX(budget, (size_t) 1));
        }
        if (c > 0 && s == TRANSCRIPT_MERGED)
                r = window_add_run(t, &w, start, c, &k);
        else if (c > 0)
                r = window_add_stream(t, &w, &t->stream_idx[s == TRANSCRIPT_STDERR], start, c);
        if (r < 0) {
                free(w.text);
                return r;
        }
        k = w.lines;
        if (w.len > 0)
                w.len = lines_within_budget(w.text, w.len, &k, budget, &text_cost);

        text = realloc(w.text, w.len + (pend ? pend->vis : 0) + 2);
        if (!text) {
                free(w.text);
                return -ENOMEM;
        }
        if (pend && start + k == committed && k < want &&
            (k == 0 || text_cost + json_escaped_size(pend->line, pend->vis) + 2 <= budget)) {
                pending = true;
                pending_len = pend->vis + 1;
                memcpy(text + w.len, pend->line, pend->vis);
                text[w.len + pend->vis] = '\n';
        }
        text[w.len + pending_len] = '\0';

        if (ret_len)
                *ret_len = w.len + pending_len;
        if (ret_end)
                *ret_end = start >= total ? total : start + k + pending;
        *ret_text = TAKE_PTR(text);
        return 0;
}

int transcript_read(Transcript *t, uint64_t start, uint64_t limit, size_t budget,
                    char **ret_text, size_t *ret_len, uint64_t *ret_end) {
        return transcript_read_stream(t, TRANSCRIPT_MERGED, start, limit, budget, ret_text, ret_len, ret_end);
}

int transcript_remove(int dirfd, const char *id) {
        int rl = 0, ri = 0;

        if (!id_valid(id))
                return -EINVAL;
        for (unsigned i = 0; i < ELEMENTSOF(suffixes); i++) {
                char name[NAME_MAX + 1];
                int k;

                file_name(id, i, name);
                k = unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
                if (i == FILE_LOG)
                        rl = k;
                else if (i == FILE_IDX)
                        ri = k;
                else if (k < 0 && k != -ENOENT)
                        return k;
        }
        if (ri == -ENOENT && rl == -ENOENT)
                return -ENOENT;
        if (ri < 0 && ri != -ENOENT)
                return ri;
        if (rl < 0 && rl != -ENOENT)
                return rl;
        return 0;
}

/* The suffix of a transcript file name (index into suffixes[]), or -1. */
static int file_kind(const char *name, size_t len) {
        if (len < 5)
                return -1;
        for (unsigned i = 0; i < ELEMENTSOF(suffixes); i++)
                if (strcmp(name + len - 4, suffixes[i]) == 0)
                        return (int) i;
        return -1;
}

int transcripts_collect(int dirfd, int (*keep)(const char *id, void *userdata), void *userdata,
                        unsigned *ret_removed, uint64_t *ret_bytes) {
        _cleanup_(closedirp) DIR *d = NULL;
        unsigned removed = 0;
        uint64_t bytes = 0;
        int r;

        d = opendir_at(dirfd);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                char id[NAME_MAX + 1];
                size_t len = strlen(de->d_name);
                int kind = file_kind(de->d_name, len);
                struct stat st;

                /* "<id>.log", "<id>.idx", "<id>.out", "<id>.err"; the rest of one
                 * whose .log a crash removed goes too. */
                if (kind < 0)
                        continue;
                memcpy(id, de->d_name, len - 4);
                id[len - 4] = '\0';
                if (!id_valid(id))
                        continue;
                r = keep(id, userdata);
                if (r != 0) {
                        if (r < 0)
                                return r;
                        continue;
                }
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        bytes += (uint64_t) st.st_size;
                if (unlinkat(dirfd, de->d_name, 0) < 0 && errno != ENOENT)
                        return -errno;
                if (kind == FILE_LOG)
                        removed++;
        }
        if (errno)
                return -errno;
        *ret_removed = removed;
        *ret_bytes = bytes;
        return 0;
}

Transcript *transcript_free(Transcript *t) {
        if (!t)
                return NULL;
        if (t->writable && !t->finished)
                (void) flush_all(t);    /* keep what was committed; the pending line is lost */
        (void) safe_close(t->log_fd);
        entries_done(&t->idx);
        for (size_t i = 0; i < ELEMENTSOF(t->stream_idx); i++)
                entries_done(&t->stream_idx[i]);
        free(t->logbuf);
        free(t);
        return NULL;
}
