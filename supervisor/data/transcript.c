/* Transcript: render raw command output as a terminal would show it and keep
 * it on disk as committed lines with a sparse index (see transcript.h).
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
 * Cap: a line is stored only while what the transcript stores with it and a
 * marker line after it (.log, .lix and .str, each in whole blocks) stays
 * within cap_bytes and the caller's limit, so the transcript never takes more
 * (unless the cap is smaller than the marker itself). The line that does not
 * fit is replaced by the marker (the cap's, or the limit's naming its
 * reason); afterwards output is only counted.
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
 * transcript_feed call (.str before .log before .lix, so every written line
 * has its stream and an entry never points past written text); never fsync
 * (see transcript_finish).
 *
 * Index: entry k of .lix is written once line (k + 1) * STRIDE is committed.
 * Line n is found at entry n / STRIDE - 1 (or offset 0) and fewer than
 * STRIDE lines further; transcript_open counts the lines after the last entry
 * (fewer than STRIDE, else a crash lost entries: the log is cut back there).
 *
 * Streams apart (transcript_create_streams): stdout and stderr each have
 * their own renderer, so a line never mixes the two (nor is it cut where the
 * worker's reads of one pipe happened to end). Each committed line goes to the
 * one .log in the order it was committed, which is the merged view, and its
 * stream to one bit of "<id>.str" (1: stderr); each .lix entry also counts
 * the stderr lines up to it. A line of one stream is found by a binary search
 * of the entries and a scan of one block's bits; a window follows the bits
 * from there (by the index again past STRIDE lines of the other stream). The
 * cap counts both streams together; its marker line (a stdout bit) ends both
 * streams. The merged view
 * shows one pending line, the one whose first byte came first (the other
 * stream's is in its own view until it is committed), so that total_lines
 * never decreases in either view. A transcript without .str (merged, or from
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
#include "data/zframes.h"

#define ID_MAX (NAME_MAX - 4)              /* "<id>.log" must be a valid file name */
#define LOGBUF_SIZE (1024u * 1024u)
#define IDXBUF_WORDS 1024u
#define BITBUF_BYTES 4096u
#define CSI_MAX 256u                        /* longer CSI sequences are dropped */
#define STR_MAX 8192u                       /* longer OSC/DCS strings end early */
#define STRIDE SBX_TRANSCRIPT_INDEX_LINES
#define MARKER_PREFIX "[sbx: transcript "
#define MARKER_SUFFIX "; further output is not kept]\n"
#define MARKER_MAX 256u                     /* bytes of a marker line, '\n' included */
#define REASON_MAX 128u

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

/* .lix: little-endian u64 words, appended through a buffer. */
typedef struct EntryFile {
        int fd;
        uint64_t *buf;
        size_t buf_len;
        uint64_t disk;          /* words written */
        uint64_t streamed;      /* bytes below this were handed to writeback (stream_behind) */
} EntryFile;

/* .str: one bit per merged line (1: stderr), appended through a buffer that
 * starts at byte base of the file; its last byte may be partial. */
typedef struct BitFile {
        int fd;
        uint8_t *buf;
        uint64_t base;
        uint64_t bits;          /* appended, buffered ones included */
} BitFile;

struct Transcript {
        int log_fd;             /* .log, or .zst when compressed (z) */
        ZFrames *z;             /* compressed text (transcript_compress): read through it */
        /* A new one's files are made when its first line is written out
         * (files_create): a command without output costs no inode. */
        int dirfd;              /* where they go (dup'ed), until made; else -EBADF */
        char id[ID_MAX + 1];
        bool writable;
        bool finished;
        bool capped;
        bool apart;             /* stdout and stderr kept apart: .str */

        uint64_t cap;
        uint64_t limit;         /* of the stored bytes, set by the caller's budgets */
        char limit_reason[REASON_MAX];
        uint64_t raw_bytes;
        uint64_t committed;     /* lines, including buffered ones */
        uint64_t err_lines;     /* of them from stderr (streams apart; the marker is not one) */
        uint64_t log_size;      /* bytes of committed lines, including buffered ones */
        uint64_t log_disk;      /* bytes written to .log */
        uint64_t log_streamed;  /* .log below this was handed to writeback (stream_behind) */
        size_t marker_len;      /* room kept for the longer marker, '\n' included */

        char *logbuf;
        size_t logbuf_len;
        EntryFile idx;          /* per STRIDE lines: the offset past them (and streams apart: stderr lines among them) */
        BitFile bits;

        uint64_t pieces;        /* fed so far */
        Renderer rend[2];       /* [0]: both streams merged, or stdout; [1]: stderr */
};

/* File name suffixes, all four characters long: the files of a transcript,
 * then those of the format before the sparse index (converted by
 * transcript_open), then the conversion's temporary index, then the
 * compressed text that replaces .log (transcript_compress) and its
 * temporary file. */
static const char *const suffixes[] = { ".log", ".lix", ".str", ".idx", ".out", ".err", ".lit", ".zst", ".ztm" };
enum { FILE_LOG, FILE_LIX, FILE_STR, FILE_OLD_IDX, FILE_OLD_OUT, FILE_OLD_ERR, FILE_LIX_TMP, FILE_ZST, FILE_ZTM };

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

/* Read exactly len bytes of the text at off, compressed or not. */
static int log_pread(const Transcript *t, void *buf, size_t len, uint64_t off) {
        return t->z ? zframes_pread(t->z, buf, len, off) : pread_all(t->log_fd, buf, len, off);
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

/* Write out the buffered words of f. */
static int entries_flush(EntryFile *f) {
        size_t done;
        int r;

        if (f->buf_len == 0)
                return 0;
        r = pwrite_all(f->fd, f->buf, f->buf_len * sizeof(uint64_t), f->disk * sizeof(uint64_t), &done);
        /* A torn word is rewritten whole next time. */
        done /= sizeof(uint64_t);
        f->disk += done;
        if (done < f->buf_len)
                memmove(f->buf, f->buf + done, (f->buf_len - done) * sizeof(uint64_t));
        f->buf_len -= done;
        stream_behind(f->fd, f->disk * sizeof(uint64_t), &f->streamed);
        return r;
}

/* Bytes of b's buffer in use (the last one maybe partial). */
static size_t bits_used(const BitFile *b) {
        return (size_t) ((b->bits + 7) / 8 - b->base);
}

/* Write out b's buffer; its partial last byte stays, to be rewritten whole. */
static int bits_flush(BitFile *b) {
        size_t used = bits_used(b), whole = (size_t) (b->bits / 8 - b->base), done;
        int r;

        if (used == 0)
                return 0;
        r = pwrite_all(b->fd, b->buf, used, b->base, &done);
        if (r < 0)
                return r;
        if (whole > 0) {
                b->buf[0] = whole < used ? b->buf[whole] : 0;
                b->base += whole;
        }
        return 0;
}

static void bits_append(BitFile *b, bool set) {
        size_t at = (size_t) (b->bits / 8 - b->base);
        uint8_t mask = (uint8_t) (1u << (b->bits % 8));

        if (b->bits % 8 == 0)
                b->buf[at] = 0;
        if (set)
                b->buf[at] |= mask;
        b->bits++;
}

static int create_file(int dirfd, const char *id, unsigned which);

/* The files of a new transcript, once: .log, .lix and (streams apart) .str;
 * after a failure the missing ones are tried again at the next flush. */
static int files_create(Transcript *t) {
        int *fds[3] = { &t->log_fd, &t->idx.fd, &t->bits.fd };

        if (t->dirfd < 0)
                return 0;
        for (unsigned i = FILE_LOG; i <= (t->apart ? FILE_STR : FILE_LIX); i++)
                if (*fds[i] < 0) {
                        int fd = create_file(t->dirfd, t->id, i);
                        if (fd < 0)
                                return fd;
                        *fds[i] = fd;
                }
        t->dirfd = safe_close(t->dirfd);
        return 0;
}

static int flush_log(Transcript *t) {
        size_t done;
        int r;

        if (t->logbuf_len == 0)
                return 0;
        r = files_create(t);
        if (r < 0)
                return r;
        r = pwrite_all(t->log_fd, t->logbuf, t->logbuf_len, t->log_disk, &done);
        t->log_disk += done;
        if (done < t->logbuf_len)
                memmove(t->logbuf, t->logbuf + done, t->logbuf_len - done);
        t->logbuf_len -= done;
        stream_behind(t->log_fd, t->log_disk, &t->log_streamed);
        return r;
}

/* .str first, then .log, then .lix, so that every written line has its
 * stream and every written entry points at written lines. */
static int flush_all(Transcript *t) {
        int r = 0;

        if (t->logbuf_len == 0 && t->idx.buf_len == 0 && (!t->apart || bits_used(&t->bits) == 0))
                return 0;
        r = files_create(t);
        if (r >= 0 && t->apart)
                r = bits_flush(&t->bits);
        if (r >= 0)
                r = flush_log(t);
        if (r >= 0)
                r = entries_flush(&t->idx);
        return r;
}

/* What a file of n bytes takes on disk: whole blocks. */
static uint64_t blocks_of(uint64_t n) {
        return (n + SBX_TRANSCRIPT_BLOCK - 1) / SBX_TRANSCRIPT_BLOCK * SBX_TRANSCRIPT_BLOCK;
}

/* The bytes stored for lines lines of log_size bytes: .log, .lix and .str. */
static uint64_t stored_bytes(bool apart, uint64_t log_size, uint64_t lines) {
        uint64_t b = blocks_of(log_size) + blocks_of(lines / STRIDE * (apart ? 2 : 1) * sizeof(uint64_t));

        return apart ? b + blocks_of((lines + 7) / 8) : b;
}

/* The marker line (with '\n'): the cap, or (budget) the caller's limit, reached. */
static size_t format_marker(const Transcript *t, bool budget, char buf[static MARKER_MAX]) {
        int n;

        if (budget)
                n = snprintf(buf, MARKER_MAX, MARKER_PREFIX "cut at %" PRIu64 " bytes stored to stay within %s"
                             MARKER_SUFFIX, t->limit, t->limit_reason);
        else
                n = snprintf(buf, MARKER_MAX, MARKER_PREFIX "cap of %" PRIu64 " bytes reached" MARKER_SUFFIX,
                             t->cap);
        if (n >= (int) MARKER_MAX) {
                /* A reason too long for the line: cut, still ending as a marker. */
                n = (int) MARKER_MAX - 1;
                memcpy(buf + n - strlen(MARKER_SUFFIX), MARKER_SUFFIX, strlen(MARKER_SUFFIX));
        }
        return (size_t) n;
}

static void line_reset(Renderer *rd) {
        rd->len = rd->cur = rd->vis = 0;
        rd->dirty = false;
}

/* Append one line (text without '\n') to the buffers; err: it came from stderr. */
static int append_line(Transcript *t, bool err, const char *text, size_t n) {
        size_t need = n + 1;
        int r;

        if (t->logbuf_len + need > LOGBUF_SIZE) {
                r = flush_log(t);
                if (r < 0)
                        return r;
        }
        if (t->idx.buf_len + 2 > IDXBUF_WORDS || (t->apart && bits_used(&t->bits) == BITBUF_BYTES)) {
                r = flush_all(t);
                if (r < 0)
                        return r;
        }
        memcpy(t->logbuf + t->logbuf_len, text, n);
        t->logbuf[t->logbuf_len + n] = '\n';
        t->logbuf_len += need;
        t->log_size += need;
        if (t->apart)
                bits_append(&t->bits, err);
        t->err_lines += err;
        t->committed++;
        if (t->committed % STRIDE == 0) {
                t->idx.buf[t->idx.buf_len++] = htole64(t->log_size);
                if (t->apart)
                        t->idx.buf[t->idx.buf_len++] = htole64(t->err_lines);
        }
        return 0;
}

/* The marker ends every stream: pending lines are dropped, later output only counted. */
static int commit_marker(Transcript *t, bool budget) {
        char buf[MARKER_MAX];
        size_t n;
        int r;

        n = format_marker(t, budget, buf);
        r = append_line(t, false, buf, n - 1);
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

/* Commit text as the next line of rd (text may be rd->line), or the marker:
 * a line is stored while what is stored with it and a marker after it stays
 * within the cap and the limit. */
static int commit_line(Transcript *t, Renderer *rd, const char *text, size_t n) {
        uint64_t need = stored_bytes(t->apart, t->log_size + n + 1 + t->marker_len, t->committed + 2);
        int r;

        if (need > t->cap || need > t->limit)
                return commit_marker(t, need <= t->cap);
        r = append_line(t, t->apart && rd == &t->rend[1], text, n);
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

static int ensure_buffers(Transcript *t) {
        if (!t->logbuf) {
                t->logbuf = malloc(LOGBUF_SIZE);
                if (!t->logbuf)
                        return -ENOMEM;
        }
        if (!t->idx.buf) {
                t->idx.buf = malloc(IDXBUF_WORDS * sizeof(uint64_t));
                if (!t->idx.buf)
                        return -ENOMEM;
        }
        if (t->apart && !t->bits.buf) {
                t->bits.buf = calloc(1, BITBUF_BYTES);
                if (!t->bits.buf)
                        return -ENOMEM;
        }
        return 0;
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
        free(t->bits.buf);
        t->bits.buf = NULL;
        return 0;
}

static Transcript *transcript_new(void) {
        Transcript *t = calloc(1, sizeof(Transcript));
        if (!t)
                return NULL;
        t->log_fd = t->idx.fd = t->bits.fd = t->dirfd = -EBADF;
        t->limit = UINT64_MAX;
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
        char marker[MARKER_MAX];

        if (!id_valid(id) || !ret)
                return -EINVAL;
        t = transcript_new();
        if (!t)
                return -ENOMEM;
        t->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        if (t->dirfd < 0)
                return -errno;
        strlcpy(t->id, id, sizeof(t->id));
        t->writable = true;
        t->apart = apart;
        t->cap = cap_bytes;
        t->marker_len = format_marker(t, false, marker);
        *ret = TAKE_PTR(t);
        return 0;
}

int transcript_create(int dirfd, const char *id, uint64_t cap_bytes, Transcript **ret) {
        return create_full(dirfd, id, cap_bytes, false, ret);
}

int transcript_create_streams(int dirfd, const char *id, uint64_t cap_bytes, Transcript **ret) {
        return create_full(dirfd, id, cap_bytes, true, ret);
}

void transcript_set_limit(Transcript *t, uint64_t limit_bytes, const char *reason) {
        char marker[MARKER_MAX];

        reason = reason ?: "";
        if (limit_bytes == t->limit && strcmp(reason, t->limit_reason) == 0)
                return;         /* the usual case: only this transcript grew since */
        t->limit = limit_bytes;
        strlcpy(t->limit_reason, reason, sizeof(t->limit_reason));
        t->marker_len = MAX(format_marker(t, false, marker), format_marker(t, true, marker));
}

uint64_t transcript_stored_bytes(const Transcript *t) {
        return stored_bytes(t->apart, t->log_size, t->committed);
}

unsigned transcript_files_new(bool streams_apart) {
        return streams_apart ? 3 : 2;
}

unsigned transcript_files(const Transcript *t) {
        return transcript_files_new(t->apart);
}

int transcript_usage(int dirfd, const char *id, uint64_t *ret_bytes, unsigned *ret_files) {
        uint64_t bytes = 0;
        unsigned files = 0;

        if (!id_valid(id))
                return -EINVAL;
        for (unsigned i = 0; i < ELEMENTSOF(suffixes); i++) {
                char name[NAME_MAX + 1];
                struct stat st;

                file_name(id, i, name);
                if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT)
                                return -errno;
                        continue;
                }
                bytes += blocks_of((uint64_t) st.st_size);
                files++;
        }
        *ret_bytes = bytes;
        *ret_files = files;
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

/* Entry k of the index: the offset past line (k + 1) * STRIDE - 1 and, with
 * streams apart, how many of the lines up to there came from stderr. */
static int read_entry(const Transcript *t, uint64_t k, uint64_t *ret_off, uint64_t *ret_err) {
        uint64_t e[2] = {}, w = t->apart ? 2 : 1;
        int r;

        r = pread_all(t->idx.fd, e, (size_t) w * sizeof(uint64_t), k * w * sizeof(uint64_t));
        if (r < 0)
                return r;
        *ret_off = le64toh(e[0]);
        if (ret_err)
                *ret_err = le64toh(e[1]);
        return 0;
}

/* Count the complete lines of .log in [off, end), at most max of them;
 * *ret_end is the offset past the last one counted. Compressed text is read
 * a line's most at a time: a read past what is needed could cost a frame's
 * decompression, where a plain file's costs a copy from the page cache. */
static int count_lines(const Transcript *t, uint64_t off, uint64_t end, uint64_t max, uint64_t *ret_n,
                       uint64_t *ret_end) {
        size_t chunk = t->z ? SBX_LINE_MAX : SBX_TRANSCRIPT_SCAN_CHUNK;
        _cleanup_free_ char *buf = NULL;
        uint64_t n = 0, pos = off, last = off;

        if (max > 0 && off < end) {
                buf = malloc(chunk);
                if (!buf)
                        return -ENOMEM;
        }
        while (n < max && pos < end) {
                size_t want = (size_t) MIN(end - pos, (uint64_t) chunk), at = 0;
                int r = log_pread(t, buf, want, pos);
                char *nl;

                if (r < 0)
                        return r;
                while (n < max && (nl = memchr(buf + at, '\n', want - at))) {
                        at = (size_t) (nl - buf) + 1;
                        last = pos + at;
                        n++;
                }
                pos += want;
        }
        *ret_n = n;
        *ret_end = last;
        return 0;
}

/* The number of index entries that end complete lines, from the end back. */
static int valid_entries(const Transcript *t, uint64_t n, uint64_t log_file_size, uint64_t *ret_n) {
        for (; n > 0; n--) {
                uint64_t e, err, prev = 0, prev_err = 0;
                char c;
                int r;

                r = read_entry(t, n - 1, &e, &err);
                if (r >= 0 && n > 1)
                        r = read_entry(t, n - 2, &prev, &prev_err);
                if (r < 0)
                        return r;
                if (e > log_file_size || e <= prev || err < prev_err || err - prev_err > STRIDE)
                        continue;
                r = log_pread(t, &c, 1, e - 1);
                if (r < 0)
                        return r;
                if (c == '\n')
                        break;
        }
        *ret_n = n;
        return 0;
}

/* Cut a torn tail (crash mid-write) of .log and .lix back to n entries and
 * the last complete line, ending at last. If they cannot be written, the
 * tail is ignored. */
static void repair_tail(const Transcript *t, int dirfd, const char *id, uint64_t n, uint64_t last) {
        _cleanup_close_ int wi = -EBADF, wl = -EBADF;
        char log[NAME_MAX + 1], idx[NAME_MAX + 1];

        file_name(id, FILE_LOG, log);
        file_name(id, FILE_LIX, idx);
        wi = openat(dirfd, idx, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        wl = openat(dirfd, log, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (wi >= 0 && wl >= 0 &&
            ftruncate(wi, (off_t) (n * (t->apart ? 2 : 1) * sizeof(uint64_t))) == 0 &&
            ftruncate(wl, (off_t) last) == 0) {
                (void) fsync(wl);
                (void) fsync(wi);
        }
}

/* Whether the last line (ending at t->log_size) is a marker. */
static int last_line_marker(const Transcript *t, bool *ret) {
        char buf[MARKER_MAX + 1];
        size_t n = (size_t) MIN(t->log_size, (uint64_t) sizeof(buf)), start = 0;
        const char *nl;
        int r;

        *ret = false;
        if (n < sizeof(MARKER_PREFIX MARKER_SUFFIX) - 1)
                return 0;
        r = log_pread(t, buf, n, t->log_size - n);
        if (r < 0)
                return r;
        nl = memrchr(buf, '\n', n - 1);
        if (nl)
                start = (size_t) (nl - buf) + 1;
        else if (n < t->log_size)
                return 0;       /* longer than any marker */
        *ret = n - start >= sizeof(MARKER_PREFIX MARKER_SUFFIX) - 1 &&
               memcmp(buf + start, MARKER_PREFIX, strlen(MARKER_PREFIX)) == 0 &&
               memcmp(buf + n - strlen(MARKER_SUFFIX), MARKER_SUFFIX, strlen(MARKER_SUFFIX)) == 0;
        return 0;
}

/* Streams apart: the stderr lines among the committed ones, from the last
 * entry's count (base, for lines before first) and the bits after it. */
static int count_err_lines(Transcript *t, uint64_t first, uint64_t base) {
        uint8_t buf[STRIDE / 8 + 2];
        size_t from = (size_t) (first / 8), n;
        ssize_t got;

        t->err_lines = base;
        if (first >= t->committed)
                return 0;
        n = (size_t) ((t->committed + 7) / 8 - from);
        got = loop_pread(t->bits.fd, buf, n, from);
        if (got < 0)
                return (int) got;
        /* A line without its bit (damage) reads as stdout. */
        for (uint64_t m = first; m < t->committed && m / 8 - from < (uint64_t) got; m++)
                t->err_lines += !!(buf[m / 8 - from] & (1u << (m % 8)));
        return 0;
}

/* Convert a transcript of the format before the sparse index (a .idx entry
 * per line; with streams apart, .out and .err list each stream's merged line
 * numbers) to the sparse index, written beside it and renamed into place;
 * the old files go after. */
static int convert_old(int dirfd, const char *id);

/* The text of transcript id into t: compressed (.zst) when it is, else
 * .log. A .log beside a .zst is what a crash in transcript_compress left
 * after the rename: it goes. */
static int open_text(Transcript *t, int dirfd, const char *id, uint64_t *ret_size) {
        char name[NAME_MAX + 1];
        uint64_t size;
        int r;

        t->log_fd = open_file(dirfd, id, FILE_ZST, &size);
        if (t->log_fd == -ENOENT) {
                t->log_fd = open_file(dirfd, id, FILE_LOG, ret_size);
                return MIN(t->log_fd, 0);
        }
        if (t->log_fd < 0)
                return t->log_fd;
        r = zframes_open(t->log_fd, &t->z);
        if (r < 0)
                return r;
        file_name(id, FILE_LOG, name);
        (void) unlinkat(dirfd, name, 0);
        *ret_size = zframes_size(t->z);
        return 0;
}

int transcript_open(int dirfd, const char *id, Transcript **ret) {
        _cleanup_(transcript_freep) Transcript *t = NULL;
        uint64_t log_file_size, lix_size, str_size, n, e = 0, err = 0, tail, last;
        int r;

        if (!id_valid(id) || !ret)
                return -EINVAL;
        t = transcript_new();
        if (!t)
                return -ENOMEM;
        r = open_text(t, dirfd, id, &log_file_size);
        if (r < 0)
                return r;
        t->idx.fd = open_file(dirfd, id, FILE_LIX, &lix_size);
        if (t->idx.fd == -ENOENT) {
                r = convert_old(dirfd, id);
                if (r < 0)
                        return r;
                t->idx.fd = open_file(dirfd, id, FILE_LIX, &lix_size);
        }
        if (t->idx.fd < 0)
                return t->idx.fd;
        t->bits.fd = open_file(dirfd, id, FILE_STR, &str_size);
        if (t->bits.fd < 0 && t->bits.fd != -ENOENT)
                return t->bits.fd;
        t->apart = t->bits.fd >= 0;

        r = valid_entries(t, lix_size / ((t->apart ? 2 : 1) * sizeof(uint64_t)), log_file_size, &n);
        if (r >= 0 && n > 0)
                r = read_entry(t, n - 1, &e, &err);
        /* Lines after the last entry: fewer than STRIDE, or a crash lost entries. */
        if (r >= 0)
                r = count_lines(t, e, log_file_size, STRIDE - 1, &tail, &last);
        if (r < 0)
                return r;
        /* A compressed text was a finished transcript's, whole: each of its lines is committed. */
        if (t->z && (last != log_file_size || zframes_lines(t->z) != n * STRIDE + tail))
                return -EBADMSG;
        if (n * (t->apart ? 2 : 1) * sizeof(uint64_t) != lix_size || last != log_file_size)
                repair_tail(t, dirfd, id, n, last);

        t->committed = n * STRIDE + tail;
        t->log_size = t->log_disk = last;
        t->idx.disk = n * (t->apart ? 2 : 1);
        t->raw_bytes = last;    /* unknown after the fact: the stored bytes */
        t->finished = true;
        if (t->apart) {
                r = count_err_lines(t, n * STRIDE, err);
                if (r < 0)
                        return r;
        }
        r = last_line_marker(t, &t->capped);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

/* The conversion: the old index is read a chunk at a time. */
typedef struct OldList {
        int fd;
        uint64_t n, at, pos;    /* entries in the file, read so far, used of buf */
        size_t len;
        uint64_t buf[1024];
} OldList;

/* The next entry of l, or UINT64_MAX at its end. */
static int old_next(OldList *l, uint64_t *ret) {
        if (l->fd < 0 || (l->pos == l->len && l->at == l->n)) {
                *ret = UINT64_MAX;
                return 0;
        }
        if (l->pos == l->len) {
                size_t k = (size_t) MIN(l->n - l->at, (uint64_t) ELEMENTSOF(l->buf));
                int r = pread_all(l->fd, l->buf, k * sizeof(uint64_t), l->at * sizeof(uint64_t));
                if (r < 0)
                        return r;
                l->at += k;
                l->len = k;
                l->pos = 0;
        }
        *ret = le64toh(l->buf[l->pos++]);
        return 0;
}

static int old_list_open(int dirfd, const char *id, unsigned which, OldList *ret) {
        uint64_t size;

        *ret = (OldList) { .fd = open_file(dirfd, id, which, &size) };
        if (ret->fd < 0)
                return ret->fd == -ENOENT ? 0 : ret->fd;
        ret->n = size / sizeof(uint64_t);
        return 0;
}

/* Is merged line j in the old sorted list l (whose next entry is *next)? */
static int old_member(OldList *l, uint64_t *next, uint64_t j, bool *ret) {
        int r = 0;

        while (*next < j && r >= 0)
                r = old_next(l, next);
        *ret = *next == j;
        return r;
}

/* Write the new index and stream bits of the old lists into t (fds open). */
static int convert_lines(Transcript *t, OldList *idx, OldList *out, OldList *err, uint64_t log_size) {
        uint64_t prev = 0, next_out = 0, next_err = 0, e;
        int r;

        r = old_next(out, &next_out);
        if (r >= 0)
                r = old_next(err, &next_err);
        for (uint64_t j = 0; r >= 0; j++) {
                bool in_out = false, in_err = false;

                r = old_next(idx, &e);
                if (r < 0 || e == UINT64_MAX || e <= prev || e > log_size)
                        break;  /* the end, or a torn tail that open cuts */
                prev = e;
                if (t->apart) {
                        r = old_member(out, &next_out, j, &in_out);
                        if (r >= 0)
                                r = old_member(err, &next_err, j, &in_err);
                }
                /* The old marker was on both lists; the new one is a stdout bit. */
                t->log_size = e;
                if (r >= 0 && (t->idx.buf_len + 2 > IDXBUF_WORDS || (t->apart && bits_used(&t->bits) == BITBUF_BYTES)))
                        r = flush_all(t);
                if (r < 0)
                        break;
                if (t->apart)
                        bits_append(&t->bits, in_err && !in_out);
                t->err_lines += in_err && !in_out;
                if (++t->committed % STRIDE == 0) {
                        t->idx.buf[t->idx.buf_len++] = htole64(e);
                        if (t->apart)
                                t->idx.buf[t->idx.buf_len++] = htole64(t->err_lines);
                }
        }
        return r < 0 ? r : flush_all(t);
}

static int convert_old(int dirfd, const char *id) {
        _cleanup_(transcript_freep) Transcript *t = transcript_new();
        OldList idx = { .fd = -EBADF }, out = { .fd = -EBADF }, err = { .fd = -EBADF };
        char tmp[NAME_MAX + 1], lix[NAME_MAX + 1];
        uint64_t log_size;
        int r;

        if (!t)
                return -ENOMEM;
        t->log_fd = open_file(dirfd, id, FILE_LOG, &log_size);
        r = t->log_fd < 0 ? t->log_fd : old_list_open(dirfd, id, FILE_OLD_IDX, &idx);
        if (r >= 0 && idx.fd < 0)
                r = -ENOENT;    /* neither format: damage */
        if (r >= 0)
                r = old_list_open(dirfd, id, FILE_OLD_OUT, &out);
        if (r >= 0)
                r = old_list_open(dirfd, id, FILE_OLD_ERR, &err);
        t->apart = out.fd >= 0 && err.fd >= 0;
        t->idx.fd = r < 0 ? r : create_file(dirfd, id, FILE_LIX_TMP);
        r = t->idx.fd < 0 ? t->idx.fd : 0;
        if (r >= 0 && t->apart) {
                t->bits.fd = create_file(dirfd, id, FILE_STR);
                r = t->bits.fd < 0 ? t->bits.fd : 0;
        }
        t->log_disk = log_size;         /* nothing of .log is written */
        if (r >= 0)
                r = ensure_buffers(t);
        if (r >= 0)
                r = convert_lines(t, &idx, &out, &err, log_size);
        file_name(id, FILE_LIX_TMP, tmp);
        file_name(id, FILE_LIX, lix);
        if (r >= 0 && renameat(dirfd, tmp, dirfd, lix) < 0)
                r = -errno;
        (void) safe_close(idx.fd);
        (void) safe_close(out.fd);
        (void) safe_close(err.fd);
        if (r < 0) {
                (void) unlinkat(dirfd, tmp, 0);
                return r;
        }
        for (unsigned i = FILE_OLD_IDX; i <= FILE_OLD_ERR; i++) {
                file_name(id, i, tmp);
                (void) unlinkat(dirfd, tmp, 0);
        }
        t->finished = true;     /* nothing more to write */
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

/* Committed lines of stream i (0 stdout, 1 stderr) of a transcript with
 * streams apart: the marker ends both. */
static uint64_t stream_committed(const Transcript *t, unsigned i) {
        return i == 0 ? t->committed - t->err_lines : t->err_lines + t->capped;
}

uint64_t transcript_stream_total_lines(const Transcript *t, TranscriptStream s) {
        unsigned i = s == TRANSCRIPT_STDERR;

        if (s == TRANSCRIPT_MERGED)
                return transcript_total_lines(t);
        if (!t->apart || (s != TRANSCRIPT_STDOUT && s != TRANSCRIPT_STDERR))
                return 0;
        return stream_committed(t, i) + !!stream_pending(t, i);
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

/* The offset in .log of merged line `line` (< committed): its block's
 * entry, then fewer than STRIDE lines skipped. */
static int line_offset(const Transcript *t, uint64_t line, uint64_t *ret) {
        uint64_t k = line / STRIDE, off = 0, n;
        int r;

        if (k > 0) {
                r = read_entry(t, k - 1, &off, NULL);
                if (r < 0)
                        return r;
                if (off > t->log_size)
                        return -EBADMSG;
        }
        r = count_lines(t, off, t->log_size, line - k * STRIDE, &n, &off);
        if (r < 0)
                return r;
        if (n != line - k * STRIDE)
                return -EBADMSG;
        *ret = off;
        return 0;
}

/* Append merged lines [first, first + count) to w, as many as their raw size
 * lets within w->budget (at least one line in w); *ret_taken says how many.
 * One read: what fits the budget, and one line more. Compressed, it stops
 * at the run's end too (one more index lookup): the frames past it are not
 * decompressed for nothing (a cursor page of short lines needs one or two
 * frames, not the budget's worth). */
static int window_add_run(Transcript *t, Window *w, uint64_t first, uint64_t count, uint64_t *ret_taken) {
        uint64_t base, stop = t->log_size, k = 0;
        size_t room = w->len < w->budget ? w->budget - w->len : 0, want, used = 0;
        char *text, *nl;
        int r;

        r = line_offset(t, first, &base);
        if (r >= 0 && t->z && first + count < t->committed)
                r = line_offset(t, first + count, &stop);
        if (r < 0)
                return r;
        if (stop < base)
                return -EBADMSG;
        want = (size_t) MIN(stop - base, room > SIZE_MAX - SBX_LINE_MAX - 1 ? SIZE_MAX : room + SBX_LINE_MAX + 1);
        text = realloc(w->text, w->len + want + 1);
        if (!text)
                return -ENOMEM;
        w->text = text;
        r = log_pread(t, w->text + w->len, want, base);
        if (r < 0)
                return r;
        /* Escaping only adds bytes: the raw size bounds what can fit. */
        while (k < count && (nl = memchr(w->text + w->len + used, '\n', want - used))) {
                size_t end = (size_t) (nl - (w->text + w->len)) + 1;

                if (end > room && w->lines + k > 0)
                        break;
                used = end;
                k++;
        }
        if (k == 0 && w->lines == 0 && count > 0)
                return -EBADMSG;
        w->len += used;
        w->lines += k;
        *ret_taken = k;
        return 0;
}

/* A piece of .str, read once for many lookups. */
typedef struct BitReader {
        uint64_t base;
        size_t len;
        uint8_t buf[512];
} BitReader;

/* Is merged line m in stream view x (0 stdout, 1 stderr)? The marker ends both. */
static int in_view(const Transcript *t, BitReader *br, unsigned x, uint64_t m, bool *ret) {
        uint64_t byte = m / 8;

        if (t->capped && m + 1 == t->committed) {
                *ret = true;
                return 0;
        }
        if (byte < br->base || byte >= br->base + br->len) {
                ssize_t n = loop_pread(t->bits.fd, br->buf, sizeof(br->buf), byte);

                if (n < 0)
                        return (int) n;
                if (n == 0)
                        return -EBADMSG;
                br->base = byte;
                br->len = (size_t) n;
        }
        *ret = !!(br->buf[byte - br->base] & (1u << (m % 8))) == (x == 1);
        return 0;
}

/* Lines of view x among the merged lines up to the end of block k. */
static int view_lines_to(const Transcript *t, unsigned x, uint64_t k, uint64_t *ret) {
        uint64_t off, err;
        int r = read_entry(t, k, &off, &err);

        if (r < 0)
                return r;
        *ret = x == 1 ? err : (k + 1) * STRIDE - err;
        return 0;
}

/* The merged line of line s of view x: the first block that ends past it
 * (a binary search of the index), then its bits. */
static int view_locate(const Transcript *t, BitReader *br, unsigned x, uint64_t s, uint64_t *ret) {
        uint64_t lo = 0, hi = t->committed / STRIDE, before = 0;
        int r;

        if (x == 1 && t->capped && s == t->err_lines) {
                *ret = t->committed - 1;
                return 0;
        }
        while (lo < hi) {
                uint64_t mid = lo + (hi - lo) / 2, n;

                r = view_lines_to(t, x, mid, &n);
                if (r < 0)
                        return r;
                if (n > s)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        if (lo > 0) {
                r = view_lines_to(t, x, lo - 1, &before);
                if (r < 0)
                        return r;
        }
        for (uint64_t m = lo * STRIDE; m < t->committed && before <= s; m++) {
                bool in = false;

                r = in_view(t, br, x, m, &in);
                if (r < 0)
                        return r;
                if (in && before++ == s) {
                        *ret = m;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* The merged line numbers of lines [start, start + count) of view x: the
 * next one is looked for in the bits after the last, for up to STRIDE lines
 * of the other stream, then in the index. */
static int view_collect(const Transcript *t, unsigned x, uint64_t start, uint64_t count, uint64_t *e) {
        BitReader br = {};
        int r;

        for (uint64_t i = 0; i < count; i++) {
                bool in = false;
                uint64_t m = i > 0 ? e[i - 1] + 1 : 0;

                for (unsigned gap = 0; i > 0 && gap < STRIDE && m < t->committed; gap++, m++) {
                        r = in_view(t, &br, x, m, &in);
                        if (r < 0)
                                return r;
                        if (in)
                                break;
                }
                if (!in) {
                        r = view_locate(t, &br, x, start + i, &m);
                        if (r < 0)
                                return r;
                }
                e[i] = m;
        }
        return 0;
}

/* Append lines [start, start + count) of view x to w: runs of consecutive
 * merged lines are read at once. */
static int window_add_stream(Transcript *t, Window *w, unsigned x, uint64_t start, uint64_t count) {
        _cleanup_free_ uint64_t *e = NULL;
        uint64_t taken = 0;
        int r;

        e = malloc(count * sizeof(uint64_t));
        if (!e)
                return -ENOMEM;
        r = view_collect(t, x, start, count, e);
        if (r < 0)
                return r;
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

/* transcript_read_stream, with budget counting JSON-escaped bytes (escaped) or raw ones. */
static int read_view(Transcript *t, TranscriptStream s, uint64_t start, uint64_t limit, size_t budget, bool escaped,
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

        committed = s == TRANSCRIPT_MERGED ? t->committed : stream_committed(t, s == TRANSCRIPT_STDERR);
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
                r = window_add_stream(t, &w, s == TRANSCRIPT_STDERR, start, c);
        if (r < 0) {
                free(w.text);
                return r;
        }
        k = w.lines;
        if (w.len > 0 && escaped)
                w.len = lines_within_budget(w.text, w.len, &k, budget, &text_cost);
        else
                text_cost = w.len;      /* window_add_* kept it within the raw budget */

        text = realloc(w.text, w.len + (pend ? pend->vis : 0) + 2);
        if (!text) {
                free(w.text);
                return -ENOMEM;
        }
        if (pend && start + k == committed && k < want &&
            (k == 0 || text_cost + (escaped ? json_escaped_size(pend->line, pend->vis) : pend->vis) + 2 <= budget)) {
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

int transcript_read_stream(Transcript *t, TranscriptStream s, uint64_t start, uint64_t limit, size_t budget,
                           char **ret_text, size_t *ret_len, uint64_t *ret_end) {
        return read_view(t, s, start, limit, budget, true, ret_text, ret_len, ret_end);
}

int transcript_scan_stream(Transcript *t, TranscriptStream s, uint64_t start, uint64_t limit, size_t max_bytes,
                           char **ret_text, size_t *ret_len, uint64_t *ret_end) {
        return read_view(t, s, start, limit, max_bytes, false, ret_text, ret_len, ret_end);
}

int transcript_read(Transcript *t, uint64_t start, uint64_t limit, size_t budget,
                    char **ret_text, size_t *ret_len, uint64_t *ret_end) {
        return transcript_read_stream(t, TRANSCRIPT_MERGED, start, limit, budget, ret_text, ret_len, ret_end);
}

int transcript_remove(int dirfd, const char *id) {
        bool found = false;

        if (!id_valid(id))
                return -EINVAL;
        for (unsigned i = 0; i < ELEMENTSOF(suffixes); i++) {
                char name[NAME_MAX + 1];

                file_name(id, i, name);
                if (unlinkat(dirfd, name, 0) == 0)
                        found = true;
                else if (errno != ENOENT)
                        return -errno;
        }
        return found ? 0 : -ENOENT;
}

int transcript_compress(int dirfd, const char *id, uint64_t *ret_text, uint64_t *ret_packed) {
        _cleanup_close_ int src = -EBADF, dst = -EBADF;
        char log[NAME_MAX + 1], tmp[NAME_MAX + 1], zst[NAME_MAX + 1];
        uint64_t size, written;
        int r;

        if (!id_valid(id))
                return -EINVAL;
        src = open_file(dirfd, id, FILE_LOG, &size);
        if (src < 0)
                return src;
        dst = create_file(dirfd, id, FILE_ZTM);
        if (dst < 0)
                return dst;
        file_name(id, FILE_LOG, log);
        file_name(id, FILE_ZTM, tmp);
        file_name(id, FILE_ZST, zst);
        r = zframes_write(src, size, dst, &written);
        if (r < 0) {
                (void) unlinkat(dirfd, tmp, 0);
                return r;
        }
        /* Durable before the plain text goes: a crash leaves one of the two whole. */
        r = file_commit_at(dst, dirfd, tmp, zst);
        if (r < 0)
                return r;
        if (unlinkat(dirfd, log, 0) < 0 && errno != ENOENT)
                return -errno;
        *ret_text = size;
        *ret_packed = written;
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

                /* "<id>.log" and the other suffixes; the rest of one whose .log
                 * a crash removed goes too. */
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
                if (kind == FILE_LOG || kind == FILE_ZST)
                        removed++;
        }
        if (errno)
                return -errno;
        *ret_removed = removed;
        *ret_bytes = bytes;
        return 0;
}

int transcript_empty(bool apart, Transcript **ret) {
        Transcript *t = transcript_new();

        if (!t)
                return -ENOMEM;
        t->apart = apart;
        t->finished = true;
        *ret = t;
        return 0;
}

Transcript *transcript_free(Transcript *t) {
        if (!t)
                return NULL;
        if (t->writable && !t->finished)
                (void) flush_all(t);    /* keep what was committed; the pending line is lost */
        (void) safe_close(t->dirfd);
        zframes_free(t->z);
        (void) safe_close(t->log_fd);
        (void) safe_close(t->idx.fd);
        (void) safe_close(t->bits.fd);
        free(t->idx.buf);
        free(t->bits.buf);
        free(t->logbuf);
        free(t);
        return NULL;
}
