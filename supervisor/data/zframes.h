/* Text kept compressed at rest and readable at any offset: the text of a
 * persisted artifact's transcript (data/transcript.h, "<id>.zst").
 *
 * The file is a run of independent zstd frames (each with its checksum),
 * each of SBX_ARTIFACT_FRAME_BYTES of text but the last, which is shorter,
 * then one zstd skippable frame holding the index: per frame three
 * little-endian u64 (the lines before it, that is the '\n' bytes of the text
 * before it; its offset in the text; its offset in the file), then the frame
 * count, the text's size, its lines and the magic "SBXZFRM1". `zstd -d`
 * reads such a file as the plain text (it skips the index). A read finds its
 * frames from the index and decompresses only those, keeping the last
 * SBX_ARTIFACT_FRAMES_KEPT read decompressed (the least recently read is
 * reused), so reading a line that spans two frames, or a window
 * after another, decompresses each frame once. Memory: the index and
 * SBX_ARTIFACT_FRAMES_KEPT frames. Non-logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct ZFrames ZFrames;

/* Compress the size bytes of text at offset 0 of src_fd into dst_fd (empty),
 * frames and index, and return the bytes written. */
int zframes_write(int src_fd, uint64_t size, int dst_fd, uint64_t *ret_written);
/* Read the index of such a file (fd is the caller's, and must stay open
 * while the result is used): -EBADMSG when it is not one or is damaged. */
int zframes_open(int fd, ZFrames **ret);
uint64_t zframes_size(const ZFrames *z);        /* bytes of text */
uint64_t zframes_lines(const ZFrames *z);       /* '\n' bytes in the text */
/* Exactly len bytes of text at off: -EIO when that passes the end (as a
 * short file), -EBADMSG when a frame it needs is damaged. */
int zframes_pread(ZFrames *z, void *buf, size_t len, uint64_t off);
ZFrames *zframes_free(ZFrames *z);
static inline void zframes_freep(ZFrames **z) {
        zframes_free(*z);
}
