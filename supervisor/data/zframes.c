/* Compressed text in independent zstd frames with an index (see zframes.h). */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"
#include "data/zframes.h"

#define FRAME SBX_ARTIFACT_FRAME_BYTES
#define SKIPPABLE_MAGIC 0x184D2A5Eu             /* zstd's skippable frames are 0x184D2A50..5F */
#define INDEX_MAGIC "SBXZFRM1"
#define ENTRY_BYTES 24u                         /* lines, text offset, file offset */
#define FOOTER_BYTES 32u                        /* frames, text size, lines, magic */

typedef struct ZEntry {
        uint64_t lines, text_off, file_off;
} ZEntry;

/* One decompressed frame. */
typedef struct ZSlot {
        char *text;
        uint64_t frame;         /* UINT64_MAX: empty */
        size_t len;
        uint64_t used;          /* z->clock when last read; 0: never */
} ZSlot;

struct ZFrames {
        int fd;
        ZEntry *e;
        uint64_t n, size, lines, index_off;
        ZSTD_DCtx *dctx;
        void *packed;           /* one compressed frame */
        ZSlot slot[SBX_ARTIFACT_FRAMES_KEPT];
        uint64_t clock;         /* reads so far: the least recently read slot is reused */
};

static void put_le64(uint8_t *p, uint64_t v) {
        v = htole64(v);
        memcpy(p, &v, sizeof(v));
}

static uint64_t get_le64(const uint8_t *p) {
        uint64_t v;

        memcpy(&v, p, sizeof(v));
        return le64toh(v);
}

static int read_exact(int fd, void *buf, size_t len, uint64_t off) {
        ssize_t n = loop_pread(fd, buf, len, off);

        if (n < 0)
                return (int) n;
        return (size_t) n == len ? 0 : -EIO;
}

/* The skippable frame of the index, entries given, at the end of dst_fd. */
static int write_index(int dst_fd, const ZEntry *e, uint64_t n, uint64_t size, uint64_t lines) {
        size_t payload = (size_t) n * ENTRY_BYTES + FOOTER_BYTES;
        _cleanup_free_ uint8_t *buf = malloc(8 + payload);
        uint32_t hdr[2] = { htole32(SKIPPABLE_MAGIC), htole32((uint32_t) payload) };
        uint8_t *p;

        if (!buf)
                return -ENOMEM;
        memcpy(buf, hdr, sizeof(hdr));
        p = buf + 8;
        for (uint64_t i = 0; i < n; i++, p += ENTRY_BYTES) {
                put_le64(p, e[i].lines);
                put_le64(p + 8, e[i].text_off);
                put_le64(p + 16, e[i].file_off);
        }
        put_le64(p, n);
        put_le64(p + 8, size);
        put_le64(p + 16, lines);
        memcpy(p + 24, INDEX_MAGIC, 8);
        return loop_write(dst_fd, buf, 8 + payload);
}

/* Lines of p[0..len): its '\n' bytes. */
static uint64_t count_nl(const char *p, size_t len) {
        uint64_t n = 0;

        for (const char *end = p + len; (p = memchr(p, '\n', (size_t) (end - p))); p++)
                n++;
        return n;
}

int zframes_write(int src_fd, uint64_t size, int dst_fd, uint64_t *ret_written) {
        uint64_t n = (size + FRAME - 1) / FRAME, at = 0, lines = 0;
        size_t bound = ZSTD_compressBound(FRAME);
        _cleanup_free_ ZEntry *e = NULL;
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ void *packed = NULL;
        ZSTD_CCtx *cctx = NULL;
        int r = 0;

        if (n > SBX_ARTIFACT_FRAMES_MAX)
                return -EFBIG;
        e = calloc(MAX(n, (uint64_t) 1), sizeof(*e));
        text = malloc(FRAME);
        packed = malloc(bound);
        cctx = ZSTD_createCCtx();
        if (!e || !text || !packed || !cctx) {
                ZSTD_freeCCtx(cctx);
                return -ENOMEM;
        }
        if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, SBX_ARTIFACT_ZSTD_LEVEL)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)))
                r = -EINVAL;
        for (uint64_t i = 0; r >= 0 && i < n; i++) {
                size_t len = (size_t) MIN(size - i * FRAME, (uint64_t) FRAME), c;

                e[i] = (ZEntry) { .lines = lines, .text_off = i * FRAME, .file_off = at };
                r = read_exact(src_fd, text, len, i * FRAME);
                if (r < 0)
                        break;
                c = ZSTD_compress2(cctx, packed, bound, text, len);
                if (ZSTD_isError(c)) {
                        r = -EIO;
                        break;
                }
                r = loop_write(dst_fd, packed, c);
                lines += count_nl(text, len);
                at += c;
        }
        ZSTD_freeCCtx(cctx);
        if (r >= 0)
                r = write_index(dst_fd, e, n, size, lines);
        if (r < 0)
                return r;
        *ret_written = at + 8 + n * ENTRY_BYTES + FOOTER_BYTES;
        return 0;
}

/* Whether the entries make a file of this format: frame i holds text
 * [i * FRAME, ...), frames follow each other from offset 0 up to the index,
 * and lines only grow. */
static bool entries_valid(const ZFrames *z) {
        if (z->n == 0)
                return z->size == 0 && z->lines == 0 && z->index_off == 0;
        if (z->size <= (z->n - 1) * FRAME || z->size > z->n * FRAME || z->e[0].file_off != 0)
                return false;
        for (uint64_t i = 0; i < z->n; i++) {
                uint64_t next = i + 1 < z->n ? z->e[i + 1].file_off : z->index_off;
                uint64_t next_lines = i + 1 < z->n ? z->e[i + 1].lines : z->lines;

                if (z->e[i].text_off != i * FRAME || next <= z->e[i].file_off ||
                    next - z->e[i].file_off > ZSTD_compressBound(FRAME) || next_lines < z->e[i].lines ||
                    next_lines - z->e[i].lines > FRAME)
                        return false;
        }
        return true;
}

/* The index at the end of z->fd, of a file of file_size bytes. */
static int read_index(ZFrames *z, uint64_t file_size) {
        _cleanup_free_ uint8_t *buf = NULL;
        uint8_t foot[FOOTER_BYTES];
        uint32_t hdr[2];
        uint64_t payload;
        int r;

        if (file_size < 8 + FOOTER_BYTES)
                return -EBADMSG;
        r = read_exact(z->fd, foot, sizeof(foot), file_size - FOOTER_BYTES);
        if (r < 0)
                return r;
        z->n = get_le64(foot);
        z->size = get_le64(foot + 8);
        z->lines = get_le64(foot + 16);
        if (memcmp(foot + 24, INDEX_MAGIC, 8) != 0 || z->n > SBX_ARTIFACT_FRAMES_MAX)
                return -EBADMSG;
        payload = z->n * ENTRY_BYTES + FOOTER_BYTES;
        if (file_size < 8 + payload)
                return -EBADMSG;
        z->index_off = file_size - 8 - payload;
        buf = malloc(8 + payload);
        z->e = calloc(MAX(z->n, (uint64_t) 1), sizeof(*z->e));
        if (!buf || !z->e)
                return -ENOMEM;
        r = read_exact(z->fd, buf, 8 + payload, z->index_off);
        if (r < 0)
                return r;
        memcpy(hdr, buf, sizeof(hdr));
        if (le32toh(hdr[0]) != SKIPPABLE_MAGIC || le32toh(hdr[1]) != payload)
                return -EBADMSG;
        for (uint64_t i = 0; i < z->n; i++) {
                const uint8_t *p = buf + 8 + i * ENTRY_BYTES;

                z->e[i] = (ZEntry) { get_le64(p), get_le64(p + 8), get_le64(p + 16) };
        }
        return entries_valid(z) ? 0 : -EBADMSG;
}

int zframes_open(int fd, ZFrames **ret) {
        _cleanup_(zframes_freep) ZFrames *z = NULL;
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        z = calloc(1, sizeof(*z));
        if (!z)
                return -ENOMEM;
        z->fd = fd;
        for (unsigned k = 0; k < ELEMENTSOF(z->slot); k++)
                z->slot[k].frame = UINT64_MAX;
        r = read_index(z, (uint64_t) st.st_size);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(z);
        return 0;
}

uint64_t zframes_size(const ZFrames *z) {
        return z->size;
}

uint64_t zframes_lines(const ZFrames *z) {
        return z->lines;
}

/* Frame i decompressed, from those kept or into the least recently read slot. */
static int frame_get(ZFrames *z, uint64_t i, const ZSlot **ret) {
        uint64_t end = i + 1 < z->n ? z->e[i + 1].file_off : z->index_off;
        size_t want = (size_t) MIN(z->size - i * FRAME, (uint64_t) FRAME), got;
        ZSlot *s = &z->slot[0];
        int r;

        for (unsigned k = 0; k < ELEMENTSOF(z->slot); k++) {
                if (z->slot[k].frame == i) {
                        z->slot[k].used = ++z->clock;
                        *ret = &z->slot[k];
                        return 0;
                }
                if (z->slot[k].used < s->used)
                        s = &z->slot[k];
        }
        if (!z->dctx)
                z->dctx = ZSTD_createDCtx();
        if (!z->packed)
                z->packed = malloc(ZSTD_compressBound(FRAME));
        if (!s->text)
                s->text = malloc(FRAME);
        if (!z->dctx || !z->packed || !s->text)
                return -ENOMEM;
        s->frame = UINT64_MAX;
        r = read_exact(z->fd, z->packed, (size_t) (end - z->e[i].file_off), z->e[i].file_off);
        if (r < 0)
                return r == -EIO ? -EBADMSG : r;
        got = ZSTD_decompressDCtx(z->dctx, s->text, FRAME, z->packed, (size_t) (end - z->e[i].file_off));
        if (ZSTD_isError(got) || got != want)
                return -EBADMSG;
        s->frame = i;
        s->len = got;
        s->used = ++z->clock;
        *ret = s;
        return 0;
}

int zframes_pread(ZFrames *z, void *buf, size_t len, uint64_t off) {
        char *p = buf;

        if (off > z->size || len > z->size - off)
                return -EIO;
        while (len > 0) {
                uint64_t i = off / FRAME;
                size_t at = (size_t) (off - i * FRAME), n;
                const ZSlot *s;
                int r = frame_get(z, i, &s);

                if (r < 0)
                        return r;
                n = MIN(len, s->len - at);
                memcpy(p, s->text + at, n);
                p += n;
                off += n;
                len -= n;
        }
        return 0;
}

ZFrames *zframes_free(ZFrames *z) {
        if (!z)
                return NULL;
        ZSTD_freeDCtx(z->dctx);
        free(z->packed);
        for (unsigned k = 0; k < ELEMENTSOF(z->slot); k++)
                free(z->slot[k].text);
        free(z->e);
        free(z);
        return NULL;
}
