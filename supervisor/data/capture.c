#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/capture.h"
#include "macro.h"

#define CAPTURE_MARKER "\n[... %llu characters cut ...]\n"

static bool is_lead(unsigned char b) {
        return (b & 0xC0) != 0x80;
}

void output_capture_init(OutputCapture *c, uint32_t max_chars) {
        *c = (OutputCapture) { .max_chars = max_chars };
}

void output_capture_done(OutputCapture *c) {
        free(c->head);
        free(c->ring);
        *c = (OutputCapture) {};
}

static int head_put(OutputCapture *c, const unsigned char *p, size_t n) {
        if (c->head_len + n > c->head_cap) {
                size_t cap = MAX(c->head_cap * 2, c->head_len + n);
                char *h;

                cap = MIN(MAX(cap, (size_t) 4096), (size_t) c->max_chars * 4 + 4);
                if (cap < c->head_len + n)
                        cap = c->head_len + n;
                h = realloc(c->head, cap);
                if (!h)
                        return -ENOMEM;
                c->head = h;
                c->head_cap = cap;
        }
        memcpy(c->head + c->head_len, p, n);
        c->head_len += n;
        return 0;
}

static int ring_put(OutputCapture *c, const unsigned char *p, size_t n) {
        if (!c->ring) {
                c->ring_cap = (size_t) c->max_chars * 4;
                c->ring = malloc(c->ring_cap);
                if (!c->ring)
                        return -ENOMEM;
        }
        if (n >= c->ring_cap) {
                memcpy(c->ring, p + n - c->ring_cap, c->ring_cap);
                c->ring_pos = 0;
                c->ring_len = c->ring_cap;
                return 0;
        }
        for (size_t done = 0; done < n;) {
                size_t k = MIN(n - done, c->ring_cap - c->ring_pos);

                memcpy(c->ring + c->ring_pos, p + done, k);
                c->ring_pos = (c->ring_pos + k) % c->ring_cap;
                done += k;
        }
        c->ring_len = MIN(c->ring_len + n, c->ring_cap);
        return 0;
}

int output_capture_feed(OutputCapture *c, const void *data, size_t len) {
        const unsigned char *p = data;
        size_t i = 0;
        int r;

        /* Into the head up to the lead byte of character max_chars + 1. */
        for (; i < len && !c->head_full; i++) {
                if (is_lead(p[i])) {
                        if (c->head_chars == c->max_chars) {
                                c->head_full = true;
                                break;
                        }
                        c->head_chars++;
                        c->total_chars++;
                }
        }
        if (i > 0) {
                r = head_put(c, p, i);
                if (r < 0)
                        return r;
        }
        if (i == len)
                return 0;
        for (size_t k = i; k < len; k++)
                c->total_chars += is_lead(p[k]);
        return ring_put(c, p + i, len - i);
}

/* The byte offset in buf (len bytes) where its last `chars` characters start. */
static size_t last_chars_start(const char *buf, size_t len, uint64_t chars) {
        size_t i = len;

        while (i > 0 && chars > 0) {
                i--;
                if (is_lead((unsigned char) buf[i]))
                        chars--;
        }
        return i;
}

/* The byte length of the first `chars` characters of buf. */
static size_t first_chars_len(const char *buf, size_t len, uint64_t chars) {
        size_t i = 0;

        for (; i < len; i++)
                if (is_lead((unsigned char) buf[i])) {
                        if (chars == 0)
                                break;
                        chars--;
                }
        return i;
}

int output_capture_result(const OutputCapture *c, char **ret, size_t *ret_len, bool *ret_truncated) {
        _cleanup_free_ char *tail = NULL, *out = NULL;
        char marker[96];
        size_t tail_len = 0, head_bytes, tail_from, n;
        uint64_t budget, head_chars, tail_chars, cut;
        int m;

        if (c->total_chars <= c->max_chars && c->ring_len == 0) {
                out = malloc(c->head_len + 1);
                if (!out)
                        return -ENOMEM;
                if (c->head_len > 0)
                        memcpy(out, c->head, c->head_len);
                *ret_len = c->head_len;
                *ret_truncated = false;
                *ret = TAKE_PTR(out);
                return 0;
        }
        /* The marker's length with the most digits the count can have. */
        m = snprintf(marker, sizeof(marker), CAPTURE_MARKER, (unsigned long long) c->total_chars);
        budget = c->max_chars > (uint64_t) m ? c->max_chars - (uint64_t) m : 0;
        head_chars = budget * 2 / 5;
        tail_chars = budget - head_chars;
        /* The head's bytes, then the ring's in order, as one tail buffer. */
        tail = malloc(c->head_len + c->ring_len + 1);
        if (!tail)
                return -ENOMEM;
        memcpy(tail, c->head, c->head_len);
        tail_len = c->head_len;
        if (c->ring_len == c->ring_cap && c->ring_cap > 0) {
                memcpy(tail + tail_len, c->ring + c->ring_pos, c->ring_cap - c->ring_pos);
                memcpy(tail + tail_len + c->ring_cap - c->ring_pos, c->ring, c->ring_pos);
        } else if (c->ring_len > 0)
                memcpy(tail + tail_len, c->ring, c->ring_len);
        tail_len += c->ring_len;

        head_bytes = first_chars_len(c->head, c->head_len, head_chars);
        tail_from = MAX(last_chars_start(tail, tail_len, tail_chars), head_bytes);
        cut = c->total_chars - head_chars - tail_chars;
        m = snprintf(marker, sizeof(marker), CAPTURE_MARKER, (unsigned long long) cut);
        n = head_bytes + (size_t) m + (tail_len - tail_from);
        out = malloc(n + 1);
        if (!out)
                return -ENOMEM;
        memcpy(out, c->head, head_bytes);
        memcpy(out + head_bytes, marker, (size_t) m);
        memcpy(out + head_bytes + m, tail + tail_from, tail_len - tail_from);
        *ret_len = n;
        *ret_truncated = true;
        *ret = TAKE_PTR(out);
        return 0;
}
