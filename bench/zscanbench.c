/* The scan row of persisted artifacts (issue 19), in-process so that the
 * machine's load does not hide it: what a rare-term query does to a
 * transcript's text, on one core. BYTES of 100-byte lines (as lines.pl
 * writes) and a rare term on the last line, once plain and once compressed
 * in zstd frames (data/zframes.h); each round reads the text in
 * SBX_QUERY_CHUNK_BYTES chunks and searches each (memmem): the plain file
 * with pread (from the page cache), the compressed one with zframes_pread
 * (open, every frame decompressed once). Times are the thread's CPU time.
 * Prints {"samples": {"sbx": [µs
 * compressed...], "base": [µs plain...]}, "vars": {"bytes": N, "packed": M}}.
 *   zscanbench BYTES N */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/zframes.h"
#include "sbx-limits.h"

#define TERM "rare-needle-q19"

static long long now_us(void) {
        struct timespec ts;

        /* CPU time of this thread (user and kernel: pread's copy counts): the
         * load of a shared machine does not stretch it as it does wall time. */
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* Chunks of text from plain (zf NULL) or zf, searched; whether TERM was found. */
static int scan(int fd, ZFrames *zf, size_t bytes, char *buf) {
        int found = 0;

        for (size_t off = 0; off < bytes; off += SBX_QUERY_CHUNK_BYTES) {
                size_t n = bytes - off < SBX_QUERY_CHUNK_BYTES ? bytes - off : SBX_QUERY_CHUNK_BYTES;

                if (zf ? zframes_pread(zf, buf, n, off) < 0 : pread(fd, buf, n, (off_t) off) != (ssize_t) n)
                        return -1;
                found |= memmem(buf, n, TERM, strlen(TERM)) != NULL;
        }
        return found;
}

int main(int argc, char **argv) {
        static const char line[] = "the quick brown fox jumps over the lazy dog, a benchmark line of about one "
                                   "hundred bytes.....\n";
        size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 256u << 20, len = 0;
        int n = argc > 2 ? atoi(argv[2]) : 5;
        int plain = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        int packed = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        char *buf = malloc(SBX_QUERY_CHUNK_BYTES);
        uint64_t written;

        if (plain < 0 || packed < 0 || !buf)
                return 1;
        for (size_t i = 0; i < SBX_QUERY_CHUNK_BYTES / (sizeof(line) - 1); i++)
                memcpy(buf + i * (sizeof(line) - 1), line, sizeof(line) - 1);
        while (len + SBX_QUERY_CHUNK_BYTES < bytes) {
                size_t k = SBX_QUERY_CHUNK_BYTES / (sizeof(line) - 1) * (sizeof(line) - 1);

                if (write(plain, buf, k) != (ssize_t) k)
                        return 1;
                len += k;
        }
        if (write(plain, TERM "\n", sizeof(TERM)) != (ssize_t) sizeof(TERM))
                return 1;
        len += sizeof(TERM);
        if (zframes_write(plain, len, packed, &written) < 0)
                return 1;
        printf("{\"samples\": {");
        for (int kind = 0; kind < 2; kind++) {
                printf("%s\"%s\": [", kind ? "], " : "", kind ? "base" : "sbx");
                for (int r = 0; r < n; r++) {
                        ZFrames *zf = NULL;
                        long long t0 = now_us();

                        if ((!kind && zframes_open(packed, &zf) < 0) || scan(plain, zf, len, buf) != 1)
                                return 1;
                        zframes_free(zf);
                        printf("%s%lld", r ? ", " : "", now_us() - t0);
                }
        }
        printf("]}, \"vars\": {\"bytes\": %zu, \"packed\": %llu}}\n", len, (unsigned long long) written);
        return 0;
}
