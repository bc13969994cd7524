/* The output of an execute_command (the lifecycle set) as its result shows
 * it: each stream cut to max_chars characters, its head and its tail around
 * a marker that says how much was cut. What arrives is kept in two bounded
 * buffers per stream, the first max_chars characters and a ring of the last
 * 4 * max_chars bytes, never the whole output (the transcript has that).
 * Characters are UTF-8 code points: bytes that are not continuation bytes.
 * Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct OutputCapture {
        uint32_t max_chars;
        uint64_t total_chars;
        char *head;                     /* the first max_chars characters */
        size_t head_len, head_cap;
        uint64_t head_chars;
        bool head_full;
        char *ring;                     /* the bytes after the head, the last ring_cap of them */
        size_t ring_cap, ring_len, ring_pos;
} OutputCapture;

void output_capture_init(OutputCapture *c, uint32_t max_chars);
int output_capture_feed(OutputCapture *c, const void *data, size_t len);
/* The stream as the result gives it: whole if it has at most max_chars
 * characters, else its first 40 % and its last 60 % (of what the marker
 * leaves) around "\n[... N characters cut ...]\n". *ret is malloc'd. */
int output_capture_result(const OutputCapture *c, char **ret, size_t *ret_len, bool *ret_truncated);
void output_capture_done(OutputCapture *c);
