/* Transcript: render raw command output as a terminal would show it and keep
 * it on disk as committed lines with a fixed-width index (see transcript.h).
 *
 * Rendering model (one byte stream, stdout and stderr merged):
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
 * transcript_feed call (.log before .idx, so an .idx entry never points past
 * written text); never fsync (see transcript_finish). */

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

struct Transcript {
        int log_fd;
        int idx_fd;
        bool writable;
        bool finished;
        bool capped;

        uint64_t cap;
        uint64_t raw_bytes;
        uint64_t committed;     /* lines, including buffered ones */
        uint64_t log_size;      /* bytes of committed lines, including buffered ones */
        uint64_t log_disk;      /* bytes written to .log */
        uint64_t idx_disk;      /* entries written to .idx */
        uint64_t log_streamed;  /* .log below this was handed to writeback (stream_behind) */
        uint64_t idx_streamed;  /* the same for .idx, in bytes */
        size_t marker_len;      /* including '\n' */

        char *logbuf;
        size_t logbuf_len;
        uint64_t *idxbuf;       /* little-endian entries */
        size_t idxbuf_len;

        /* renderer */
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
        size_t len, cur, vis;
        char line[SBX_LINE_MAX + 8];
};

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

/* .log first, so every written index entry points at written text. */
static int flush_all(Transcript *t) {
        size_t done;
        int r;

        r = flush_log(t);
        if (r < 0)
                return r;
        if (t->idxbuf_len == 0)
                return 0;
        r = pwrite_all(t->idx_fd, t->idxbuf, t->idxbuf_len * sizeof(uint64_t),
                       t->idx_disk * sizeof(uint64_t), &done);
        /* A torn entry is rewritten whole next time. */
        done /= sizeof(uint64_t);
        t->idx_disk += done;
        if (done < t->idxbuf_len)
                memmove(t->idxbuf, t->idxbuf + done, (t->idxbuf_len - done) * sizeof(uint64_t));
        t->idxbuf_len -= done;
        stream_behind(t->idx_fd, t->idx_disk * sizeof(uint64_t), &t->idx_streamed);
        return r;
}

static size_t format_marker(uint64_t cap, char *buf, size_t size) {
        int n = snprintf(buf, size, MARKER_PREFIX "%" PRIu64 " bytes reached; further output is not kept]\n",
                         cap);
        return (size_t) n;
}

static void line_reset(Transcript *t) {
        t->len = t->cur = t->vis = 0;
        t->dirty = false;
}

/* Append one line (text without '\n') to the buffers. */
static int append_line(Transcript *t, const char *text, size_t n) {
        size_t need = n + 1;
        int r;

        if (t->logbuf_len + need > LOGBUF_SIZE) {
                r = flush_log(t);
                if (r < 0)
                        return r;
        }
        if (t->idxbuf_len == IDXBUF_ENTRIES) {
                r = flush_all(t);
                if (r < 0)
                        return r;
        }
        memcpy(t->logbuf + t->logbuf_len, text, n);
        t->logbuf[t->logbuf_len + n] = '\n';
        t->logbuf_len += need;
        t->log_size += need;
        t->idxbuf[t->idxbuf_len++] = htole64(t->log_size);
        t->committed++;
        return 0;
}

static int commit_marker(Transcript *t) {
        char buf[128];
        size_t n;
        int r;

        n = format_marker(t->cap, buf, sizeof(buf));
        r = append_line(t, buf, n - 1);
        if (r < 0)
                return r;
        t->capped = true;
        t->state = ST_GROUND;
        t->u8_need = 0;
        line_reset(t);
        return 0;
}

/* Commit text as the next line (text may be t->line), or the cap marker. */
static int commit_line(Transcript *t, const char *text, size_t n) {
        int r;

        if (t->cap < t->marker_len || t->log_size + n + 1 > t->cap - t->marker_len)
                return commit_marker(t);
        r = append_line(t, text, n);
        if (r < 0)
                return r;
        line_reset(t);
        return 0;
}

static int commit_current(Transcript *t) {
        return commit_line(t, t->line, t->vis);
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

static size_t columns_before(const Transcript *t, size_t end) {
        size_t cols = 0;
        for (size_t i = 0; i < end; i++)
                cols += ((uint8_t) t->line[i] & 0xc0) != 0x80;
        return cols;
}

/* Write one valid UTF-8 character (n bytes) at the cursor. */
static int line_put_char(Transcript *t, const char *s, size_t n) {
        int r;

        if (t->cur == t->len) {
                if (t->len + n > SBX_LINE_MAX) {
                        r = commit_current(t);
                        if (r < 0 || t->capped)
                                return r;
                }
                memcpy(t->line + t->len, s, n);
                t->len += n;
                t->cur = t->vis = t->len;
        } else {
                size_t m = u8_len((uint8_t) t->line[t->cur]);

                if (t->len - m + n > SBX_LINE_MAX) {
                        /* Overwriting with a wider character overflows: wrap here. */
                        r = commit_current(t);
                        if (r < 0 || t->capped)
                                return r;
                        return line_put_char(t, s, n);
                }
                if (m != n) {
                        memmove(t->line + t->cur + n, t->line + t->cur + m, t->len - t->cur - m);
                        t->len = t->len - m + n;
                        if (t->vis > t->cur)
                                t->vis = t->vis - m + n;
                }
                memcpy(t->line + t->cur, s, n);
                t->cur += n;
                t->vis = MAX(t->vis, t->cur);
        }
        t->dirty = true;
        return 0;
}

/* Write a run of plain bytes (printable ASCII and TAB) at the cursor. */
static int line_put_plain(Transcript *t, const uint8_t *s, size_t n) {
        int r;

        while (n > 0) {
                if (t->cur == t->len) {
                        size_t room = SBX_LINE_MAX - t->len, k;

                        if (room == 0) {
                                r = commit_current(t);
                                if (r < 0 || t->capped)
                                        return r;
                                continue;
                        }
                        k = MIN(room, n);
                        memcpy(t->line + t->len, s, k);
                        t->len += k;
                        t->cur = t->vis = t->len;
                        t->dirty = true;
                        s += k;
                        n -= k;
                } else if (((uint8_t) t->line[t->cur] & 0x80) == 0) {
                        t->line[t->cur++] = (char) *s++;
                        t->vis = MAX(t->vis, t->cur);
                        t->dirty = true;
                        n--;
                } else {
                        r = line_put_char(t, (const char *) s, 1);
                        if (r < 0 || t->capped)
                                return r;
                        s++;
                        n--;
                }
        }
        return 0;
}

static int put_replacement(Transcript *t) {
        return line_put_char(t, "\xef\xbf\xbd", 3);
}

static void line_backspace(Transcript *t) {
        if (t->cur == 0)
                return;
        t->cur--;
        while (t->cur > 0 && ((uint8_t) t->line[t->cur] & 0xc0) == 0x80)
                t->cur--;
}

/* EL: 0 cursor to end, 1 start through cursor, 2 whole line; the cursor stays. */
static void line_erase(Transcript *t, unsigned mode) {
        size_t cols, e, k;

        switch (mode) {
        case 0:
                t->len = t->cur;
                t->vis = MIN(t->vis, t->cur);
                break;
        case 1:
                cols = columns_before(t, t->cur);
                e = t->cur < t->len ? t->cur + u8_len((uint8_t) t->line[t->cur]) : t->cur;
                k = cols + (t->cur < t->len);
                memmove(t->line + k, t->line + e, t->len - e);
                memset(t->line, ' ', k);
                t->len = t->len - e + k;
                t->vis = t->vis <= e ? 0 : t->vis - e + k;
                t->cur = cols;
                break;
        case 2:
                cols = columns_before(t, t->cur);
                memset(t->line, ' ', cols);
                t->len = t->cur = cols;
                t->vis = 0;
                break;
        default:
                break;
        }
}

static void csi_reset(Transcript *t) {
        t->csi_private = t->csi_inter = false;
        t->csi_nparams = 0;
        t->csi_param = 0;
        t->seq_len = 0;
}

static int render_byte(Transcript *t, uint8_t c);

/* A control byte in the ground state (or executed inside a sequence). */
static int render_control(Transcript *t, uint8_t c) {
        switch (c) {
        case '\n':
                return commit_current(t);
        case '\r':
                t->cur = 0;
                return 0;
        case '\b':
                line_backspace(t);
                return 0;
        case '\t':
                return line_put_char(t, "\t", 1);
        case 0x1b:
                t->state = ST_ESC;
                return 0;
        default:
                return 0;        /* other C0 controls and DEL are dropped */
        }
}

static int render_ground(Transcript *t, uint8_t c) {
        int r;

        if (t->u8_need > 0) {
                if (c >= t->u8_lo && c <= t->u8_hi) {
                        t->u8_buf[t->u8_have++] = c;
                        t->u8_lo = 0x80;
                        t->u8_hi = 0xbf;
                        if (--t->u8_need > 0)
                                return 0;
                        /* C1 controls (U+0080..U+009F) are invisible: drop them. */
                        if (t->u8_have == 2 && t->u8_buf[0] == 0xc2 && t->u8_buf[1] < 0xa0)
                                return 0;
                        return line_put_char(t, (const char *) t->u8_buf, t->u8_have);
                }
                /* Ill-formed: the partial sequence is one U+FFFD, then c anew. */
                t->u8_need = 0;
                r = put_replacement(t);
                if (r < 0 || t->capped)
                        return r;
        }

        if (plain_byte[c])
                return line_put_plain(t, &c, 1);
        if (c < 0x20 || c == 0x7f)
                return render_control(t, c);

        t->u8_have = 1;
        t->u8_buf[0] = c;
        t->u8_lo = 0x80;
        t->u8_hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
                t->u8_need = 1;
        else if (c >= 0xe0 && c <= 0xef) {
                t->u8_need = 2;
                if (c == 0xe0)
                        t->u8_lo = 0xa0;
                else if (c == 0xed)
                        t->u8_hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                t->u8_need = 3;
                if (c == 0xf0)
                        t->u8_lo = 0x90;
                else if (c == 0xf4)
                        t->u8_hi = 0x8f;
        } else
                return put_replacement(t);      /* 80..BF, C0, C1, F5..FF */
        return 0;
}

static int render_byte(Transcript *t, uint8_t c) {
        switch (t->state) {
        case ST_GROUND:
                return render_ground(t, c);

        case ST_ESC:
        case ST_ESC_INTER:
                if (c == 0x1b) {
                        t->state = ST_ESC;
                        return 0;
                }
                if (c == 0x18 || c == 0x1a) {
                        t->state = ST_GROUND;
                        return 0;
                }
                if (c < 0x20 || c >= 0x7f) {
                        /* Not an escape sequence after all: drop the ESC, keep c. */
                        t->state = ST_GROUND;
                        return render_ground(t, c);
                }
                if (c <= 0x2f) {
                        if (t->state == ST_ESC)
                                t->seq_len = 0;
                        t->state = ST_ESC_INTER;
                        if (++t->seq_len > CSI_MAX)
                                t->state = ST_GROUND;
                        return 0;
                }
                if (t->state == ST_ESC) {
                        if (c == '[') {
                                csi_reset(t);
                                t->state = ST_CSI;
                                return 0;
                        }
                        if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
                                t->seq_len = 0;
                                t->state = ST_STR;
                                return 0;
                        }
                }
                t->state = ST_GROUND;   /* final byte: the sequence is dropped */
                return 0;

        case ST_CSI:
                if (c >= 0x40 && c <= 0x7e) {
                        t->state = ST_GROUND;
                        if (c == 'K' && !t->csi_private && !t->csi_inter && t->csi_nparams <= 1)
                                line_erase(t, t->csi_param);
                        return 0;
                }
                if (c >= 0x30 && c <= 0x3f) {
                        if (c >= '0' && c <= '9') {
                                if (t->csi_nparams == 0)
                                        t->csi_nparams = 1;
                                if (t->csi_nparams == 1 && t->csi_param < 10000)
                                        t->csi_param = t->csi_param * 10 + (unsigned) (c - '0');
                        } else if (c == ';' || c == ':')
                                t->csi_nparams = MAX(t->csi_nparams, 1u) + 1;
                        else
                                t->csi_private = true;
                } else if (c >= 0x20 && c <= 0x2f)
                        t->csi_inter = true;
                else if (c == 0x1b) {
                        t->state = ST_ESC;
                        return 0;
                } else if (c == 0x18 || c == 0x1a) {
                        t->state = ST_GROUND;
                        return 0;
                } else if (c < 0x20 || c == 0x7f)
                        return render_control(t, c);    /* executed, the CSI goes on */
                else {
                        t->state = ST_GROUND;           /* 8-bit byte: not a CSI */
                        return render_ground(t, c);
                }
                if (++t->seq_len > CSI_MAX)
                        t->state = ST_GROUND;
                return 0;

        case ST_STR:
                if (c == 0x07 || c == 0x18 || c == 0x1a)
                        t->state = ST_GROUND;
                else if (c == 0x1b)
                        t->state = ST_STR_ESC;
                else if (++t->seq_len > STR_MAX)
                        t->state = ST_GROUND;
                return 0;

        case ST_STR_ESC:
                if (c == '\\') {
                        t->state = ST_GROUND;
                        return 0;
                }
                /* The ESC starts a new sequence and ends the string. */
                t->state = ST_ESC;
                return render_byte(t, c);

        default:
                t->state = ST_GROUND;
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
        if (!t->idxbuf) {
                t->idxbuf = malloc(IDXBUF_ENTRIES * sizeof(uint64_t));
                if (!t->idxbuf)
                        return -ENOMEM;
        }
        return 0;
}

int transcript_feed(Transcript *t, const void *data, size_t size) {
        const uint8_t *p = data, *end = p + size;
        int r = 0, q;

        if (!t || (!data && size > 0))
                return -EINVAL;
        if (!t->writable || t->finished)
                return -EBADF;
        t->raw_bytes += size;
        if (t->capped || size == 0)
                return 0;
        r = ensure_buffers(t);
        if (r < 0)
                return r;

        while (p < end && !t->capped) {
                if (t->state == ST_GROUND && t->u8_need == 0) {
                        size_t run = scan_plain(p, (size_t) (end - p));

                        /* Fast path: a whole plain line into an empty line buffer. */
                        if (t->len == 0 && run < (size_t) (end - p) && p[run] == '\n' &&
                            run <= SBX_LINE_MAX) {
                                r = commit_line(t, (const char *) p, run);
                                if (r < 0)
                                        break;
                                p += run + 1;
                                continue;
                        }
                        if (run > 0) {
                                r = line_put_plain(t, p, run);
                                if (r < 0)
                                        break;
                                p += run;
                                continue;
                        }
                }
                r = render_byte(t, *p++);
                if (r < 0)
                        break;
        }

        q = flush_all(t);
        return r < 0 ? r : q;
}

int transcript_finish(Transcript *t) {
        int r;

        if (!t)
                return -EINVAL;
        if (!t->writable || t->finished)
                return 0;
        r = ensure_buffers(t);
        if (r < 0)
                return r;
        if (!t->capped) {
                if (t->state == ST_GROUND && t->u8_need > 0) {
                        t->u8_need = 0;
                        r = put_replacement(t);
                        if (r < 0)
                                return r;
                }
                t->state = ST_GROUND;
                t->u8_need = 0;
                if (t->dirty && !t->capped) {
                        r = commit_current(t);
                        if (r < 0)
                                return r;
                }
        }
        /* Written, not synced: a transcript survives any sbxd crash or restart from
         * the page cache; only a power loss may cost its last lines (layers, by
         * contrast, are synced). An fsync per command would double its cost. */
        r = flush_all(t);
        if (r < 0)
                return r;
        t->finished = true;
        free(t->logbuf);
        t->logbuf = NULL;
        free(t->idxbuf);
        t->idxbuf = NULL;
        return 0;
}

static Transcript *transcript_new(void) {
        Transcript *t = calloc(1, sizeof(Transcript));
        if (!t)
                return NULL;
        t->log_fd = t->idx_fd = -EBADF;
        return t;
}

static void file_names(const char *id, char log[static NAME_MAX + 1], char idx[static NAME_MAX + 1]) {
        (void) snprintf(log, NAME_MAX + 1, "%s.log", id);
        (void) snprintf(idx, NAME_MAX + 1, "%s.idx", id);
}

int transcript_create(int dirfd, const char *id, uint64_t cap_bytes, Transcript **ret) {
        _cleanup_(transcript_freep) Transcript *t = NULL;
        char log[NAME_MAX + 1], idx[NAME_MAX + 1], marker[128];

        if (!id_valid(id) || !ret)
                return -EINVAL;
        file_names(id, log, idx);
        t = transcript_new();
        if (!t)
                return -ENOMEM;
        t->log_fd = openat(dirfd, log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (t->log_fd < 0)
                return -errno;
        t->idx_fd = openat(dirfd, idx, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (t->idx_fd < 0)
                return -errno;
        t->writable = true;
        t->cap = cap_bytes;
        t->marker_len = format_marker(cap_bytes, marker, sizeof(marker));
        *ret = TAKE_PTR(t);
        return 0;
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

                r = pread_all(t->idx_fd, e, k * sizeof(uint64_t), rd * sizeof(uint64_t));
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

int transcript_open(int dirfd, const char *id, Transcript **ret) {
        _cleanup_(transcript_freep) Transcript *t = NULL;
        char log[NAME_MAX + 1], idx[NAME_MAX + 1];
        struct stat st_log, st_idx;
        uint64_t n, last;
        int r;

        if (!id_valid(id) || !ret)
                return -EINVAL;
        file_names(id, log, idx);
        t = transcript_new();
        if (!t)
                return -ENOMEM;
        t->log_fd = openat(dirfd, log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (t->log_fd < 0)
                return -errno;
        t->idx_fd = openat(dirfd, idx, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (t->idx_fd < 0)
                return -errno;
        if (fstat(t->log_fd, &st_log) < 0 || fstat(t->idx_fd, &st_idx) < 0)
                return -errno;
        if (!S_ISREG(st_log.st_mode) || !S_ISREG(st_idx.st_mode))
                return -EBADMSG;

        n = (uint64_t) st_idx.st_size / sizeof(uint64_t);
        r = scan_index(t, n, (uint64_t) st_log.st_size, &n, &last);
        if (r < 0)
                return r;

        if (n * sizeof(uint64_t) != (uint64_t) st_idx.st_size) {
                /* Torn tail (crash mid-write): cut both files back to the last
                 * complete line. If they cannot be written, ignore the tail. */
                _cleanup_close_ int wi = -EBADF, wl = -EBADF;

                wi = openat(dirfd, idx, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                wl = openat(dirfd, log, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (wi >= 0 && wl >= 0 &&
                    ftruncate(wi, (off_t) (n * sizeof(uint64_t))) == 0 &&
                    ftruncate(wl, (off_t) last) == 0) {
                        (void) fsync(wl);
                        (void) fsync(wi);
                }
        }

        t->committed = n;
        t->log_size = t->log_disk = last;
        t->idx_disk = n;
        t->raw_bytes = last;    /* unknown after the fact: the stored bytes */
        t->finished = true;

        if (n > 0) {
                char head[sizeof(MARKER_PREFIX) - 1];
                uint64_t first = 0;

                if (n > 1) {
                        r = pread_all(t->idx_fd, &first, sizeof(first), (n - 2) * sizeof(uint64_t));
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

static bool has_pending(const Transcript *t) {
        return t->writable && !t->finished && !t->capped && t->dirty;
}

uint64_t transcript_total_lines(const Transcript *t) {
        return t->committed + has_pending(t);
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

int transcript_read(Transcript *t, uint64_t start, uint64_t limit, size_t budget,
                    char **ret_text, size_t *ret_len, uint64_t *ret_end) {
        _cleanup_free_ uint64_t *e = NULL;
        _cleanup_free_ char *text = NULL;
        uint64_t total, want, c = 0, k = 0, base = 0, prev;
        size_t text_len = 0, text_cost = 0, pending_len = 0;
        bool pending = false;
        int r;

        if (!t || !ret_text)
                return -EINVAL;
        if (t->writable && !t->finished) {
                r = flush_all(t);
                if (r < 0)
                        return r;
        }

        total = transcript_total_lines(t);
        want = start < total ? MIN(limit, total - start) : 0;

        if (start < t->committed) {
                /* Every line takes at least one byte, so no more than budget fit. */
                c = MIN(want, t->committed - start);
                c = MIN(c, (uint64_t) MAX(budget, (size_t) 1));
        }
        if (c > 0) {
                uint64_t first = start > 0 ? start - 1 : 0;
                size_t n = (size_t) (start + c - first);

                e = malloc(n * sizeof(uint64_t));
                if (!e)
                        return -ENOMEM;
                r = pread_all(t->idx_fd, e, n * sizeof(uint64_t), first * sizeof(uint64_t));
                if (r < 0)
                        return r;
                if (start > 0)
                        base = le64toh(e[0]);
                prev = base;
                /* Escaping only adds bytes: the raw size bounds what can fit. */
                for (uint64_t i = 0; i < c; i++) {
                        uint64_t end = le64toh(e[start > 0 ? i + 1 : i]);

                        if (end <= prev || end > t->log_size)
                                return -EBADMSG;
                        if (end - base > budget && k > 0)
                                break;
                        k = i + 1;
                        prev = end;
                }
                text_len = (size_t) (prev - base);
        }

        text = malloc(text_len + t->vis + 2);
        if (!text)
                return -ENOMEM;
        if (text_len > 0) {
                r = pread_all(t->log_fd, text, text_len, base);
                if (r < 0)
                        return r;
                text_len = lines_within_budget(text, text_len, &k, budget, &text_cost);
        }

        if (has_pending(t) && start + k == t->committed && k < want &&
            (k == 0 || text_cost + json_escaped_size(t->line, t->vis) + 2 <= budget)) {
                pending = true;
                pending_len = t->vis + 1;
                memcpy(text + text_len, t->line, t->vis);
                text[text_len + t->vis] = '\n';
        }
        text[text_len + pending_len] = '\0';

        if (ret_len)
                *ret_len = text_len + pending_len;
        if (ret_end)
                *ret_end = start >= total ? total : start + k + pending;
        *ret_text = TAKE_PTR(text);
        return 0;
}

int transcript_remove(int dirfd, const char *id) {
        char log[NAME_MAX + 1], idx[NAME_MAX + 1];
        int ri, rl;

        if (!id_valid(id))
                return -EINVAL;
        file_names(id, log, idx);
        ri = unlinkat(dirfd, idx, 0) < 0 ? -errno : 0;
        rl = unlinkat(dirfd, log, 0) < 0 ? -errno : 0;
        if (ri == -ENOENT && rl == -ENOENT)
                return -ENOENT;
        if (ri < 0 && ri != -ENOENT)
                return ri;
        if (rl < 0 && rl != -ENOENT)
                return rl;
        return 0;
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
                struct stat st;

                /* "<id>.log" and "<id>.idx"; an .idx whose .log a crash removed goes too. */
                if (len < 5 || (strcmp(de->d_name + len - 4, ".log") != 0 && strcmp(de->d_name + len - 4, ".idx") != 0))
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
                if (de->d_name[len - 3] == 'l')
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
        (void) safe_close(t->idx_fd);
        free(t->logbuf);
        free(t->idxbuf);
        free(t);
        return NULL;
}
