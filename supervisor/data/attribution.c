/* Line attribution and unified diffs over libgit2's buffer diff (xdiff, Myers).
 * xdiff splits text into '\n'-terminated records, keeps a last record without
 * '\n' and compares records byte for byte, which is exactly the line rule of
 * fileops.h: "b" and "b\n" differ, "a\r\n" and "a\n" differ. */
#include <errno.h>
#include <git2.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/attribution.h"
#include "macro.h"
#include "sbx-limits.h"

#define BLAME_OWNER_MAX 128u
#define BLAME_RANGES_MAX 1000000u
/* A stored attribution describes at most this many lines (parse and
 * serialize); no diffable text comes near it. */
#define BLAME_LINES_MAX UINT64_C(4294967295)
#define BLAME_NUMBER_DIGITS_MAX 10u
/* libgit2 refuses to diff a buffer above GIT_XDIFF_MAX_SIZE (1 GiB). */
#define DIFF_TEXT_MAX (UINT64_C(1) << 30)
#define NO_NEWLINE_MARKER "\\ No newline at end of file\n"
#define DIFF_CONTEXT_LINES 3u

static int git_ready(void) {
        static bool ready;

        if (!ready) {
                if (git_libgit2_init() < 0)
                        return -ENOMEM;
                ready = true;
        }
        return 0;
}

static int git_errno(void) {
        const git_error *e = git_error_last();

        return e && e->klass == GIT_ERROR_NOMEMORY ? -ENOMEM : -EIO;
}

static uint64_t count_lines(const char *text, size_t len) {
        uint64_t n = 0;

        if (len == 0)
                return 0;
        for (const char *p = text, *end = text + len; p < end; p++) {
                p = memchr(p, '\n', (size_t) (end - p));
                if (!p)
                        return n + 1;
                n++;
        }
        return n;
}

static bool owner_valid(const char *owner, size_t len) {
        if (len == 0 || len > BLAME_OWNER_MAX)
                return false;
        for (size_t i = 0; i < len; i++)
                if (owner[i] < 0x20 || owner[i] > 0x7e)
                        return false;
        return true;
}

static bool owner_string_valid(const char *owner) {
        return owner && owner_valid(owner, strnlen(owner, BLAME_OWNER_MAX + 1));
}

void blame_done(Blame *b) {
        if (!b)
                return;
        for (size_t i = 0; i < b->n_ranges; i++)
                free(b->ranges[i].owner);
        free(b->ranges);
        b->ranges = NULL;
        b->n_ranges = 0;
}

/* A Blame being built, with its allocated size. */
typedef struct BlameBuilder {
        Blame blame;
        size_t allocated;
} BlameBuilder;

static void blame_builder_done(BlameBuilder *bb) {
        blame_done(&bb->blame);
}

/* Append count lines owned by owner (length owner_len), merging with the last
 * range when it has the same owner. */
static int builder_append(BlameBuilder *bb, const char *owner, size_t owner_len, uint64_t count) {
        Blame *b = &bb->blame;
        BlameRange *last = b->n_ranges > 0 ? &b->ranges[b->n_ranges - 1] : NULL;
        uint64_t start = last ? last->start_line + last->line_count : 1;
        char *copy;

        if (count == 0)
                return 0;
        if (last && strlen(last->owner) == owner_len && memcmp(last->owner, owner, owner_len) == 0) {
                last->line_count += count;
                return 0;
        }
        /* last is invalid from here on: the array may move. */
        if (b->n_ranges == bb->allocated) {
                size_t n = bb->allocated > 0 ? bb->allocated * 2 : 16;
                BlameRange *ranges = reallocarray(b->ranges, n, sizeof(*ranges));
                if (!ranges)
                        return -ENOMEM;
                b->ranges = ranges;
                bb->allocated = n;
        }
        copy = strndup(owner, owner_len);
        if (!copy)
                return -ENOMEM;
        b->ranges[b->n_ranges++] = (BlameRange) {
                .start_line = start,
                .line_count = count,
                .owner = copy,
        };
        return 0;
}

/* Check that b tiles lines 1..N in order with valid, adjacent-distinct owners. */
static int blame_check(const Blame *b, uint64_t *ret_lines) {
        uint64_t next = 1;

        if (b->n_ranges > 0 && !b->ranges)
                return -EINVAL;
        for (size_t i = 0; i < b->n_ranges; i++) {
                const BlameRange *r = &b->ranges[i];

                if (r->start_line != next || r->line_count == 0 || r->line_count > UINT64_MAX - next)
                        return -EINVAL;
                if (!owner_string_valid(r->owner))
                        return -EINVAL;
                if (i > 0 && strcmp(r->owner, b->ranges[i - 1].owner) == 0)
                        return -EINVAL;
                next += r->line_count;
        }
        *ret_lines = next - 1;
        return 0;
}

int blame_new(const char *text, size_t len, const char *owner, Blame *ret) {
        _cleanup_(blame_builder_done) BlameBuilder bb = {};
        int r;

        if ((!text && len > 0) || !owner_string_valid(owner))
                return -EINVAL;
        r = builder_append(&bb, owner, strlen(owner), count_lines(text, len));
        if (r < 0)
                return r;
        *ret = bb.blame;
        bb.blame = (Blame) {};
        return 0;
}

typedef struct UpdateState {
        const Blame *old;
        const char *owner;
        size_t owner_len;
        size_t old_index;       /* the old range holding old_line */
        uint64_t old_line;      /* next old line not yet mapped, 1-based */
        uint64_t new_line;      /* next new line not yet attributed, 1-based */
        BlameBuilder out;
        int error;
} UpdateState;

static void update_state_done(UpdateState *s) {
        blame_builder_done(&s->out);
}

/* The next n old lines are unchanged: they keep their owners. */
static int update_keep(UpdateState *s, uint64_t n) {
        while (n > 0) {
                const BlameRange *range;
                uint64_t end, take;
                int r;

                if (s->old_index >= s->old->n_ranges)
                        return -EIO;
                range = &s->old->ranges[s->old_index];
                end = range->start_line + range->line_count;
                take = MIN(end - s->old_line, n);
                r = builder_append(&s->out, range->owner, strlen(range->owner), take);
                if (r < 0)
                        return r;
                s->old_line += take;
                s->new_line += take;
                n -= take;
                if (s->old_line == end)
                        s->old_index++;
        }
        return 0;
}

/* The next n old lines are gone. */
static void update_drop(UpdateState *s, uint64_t n) {
        s->old_line += n;
        while (s->old_index < s->old->n_ranges &&
               s->old->ranges[s->old_index].start_line + s->old->ranges[s->old_index].line_count <= s->old_line)
                s->old_index++;
}

/* The next change: old lines [old_pos, old_pos + old_lines) became new_lines
 * lines owned by s->owner (with no old lines, they come before old_pos); the
 * old lines between the previous change and old_pos are unchanged. */
static int update_apply(UpdateState *s, uint64_t old_pos, uint64_t old_lines, uint64_t new_lines) {
        int r;

        if (old_pos < s->old_line)
                return -EIO;
        r = update_keep(s, old_pos - s->old_line);
        if (r < 0)
                return r;
        r = builder_append(&s->out, s->owner, s->owner_len, new_lines);
        if (r < 0)
                return r;
        update_drop(s, old_lines);
        s->new_line += new_lines;
        return 0;
}

/* Where a hunk side begins: a side with no lines names the line before it. */
static uint64_t hunk_side_start(int start, int lines) {
        return lines > 0 ? (uint64_t) start : (uint64_t) start + 1;
}

static int update_hunk(const git_diff_delta *delta, const git_diff_hunk *hunk, void *payload) {
        UpdateState *s = payload;
        uint64_t old_pos, new_pos;
        int r;

        if (hunk->old_start < 0 || hunk->old_lines < 0 || hunk->new_start < 0 || hunk->new_lines < 0) {
                s->error = -EIO;
                return -1;
        }
        old_pos = hunk_side_start(hunk->old_start, hunk->old_lines);
        new_pos = hunk_side_start(hunk->new_start, hunk->new_lines);
        if (old_pos < s->old_line || new_pos < s->new_line || old_pos - s->old_line != new_pos - s->new_line) {
                s->error = -EIO;
                return -1;
        }
        r = update_apply(s, old_pos, (uint64_t) hunk->old_lines, (uint64_t) hunk->new_lines);
        if (r < 0) {
                s->error = r;
                return -1;
        }
        return 0;
}

static void diff_options_init(git_diff_options *opts, uint32_t context_lines) {
        (void) git_diff_options_init(opts, GIT_DIFF_OPTIONS_VERSION);
        opts->flags = GIT_DIFF_FORCE_TEXT;
        opts->context_lines = context_lines;
        opts->interhunk_lines = 0;
}

static int update_by_diff(UpdateState *s, const char *old_text, size_t old_len, const char *new_text,
                          size_t new_len) {
        git_diff_options opts;
        int r;

        r = git_ready();
        if (r < 0)
                return r;
        diff_options_init(&opts, 0);
        r = git_diff_buffers(old_text, old_len, NULL, new_text, new_len, NULL, &opts, NULL, NULL, update_hunk,
                             NULL, s);
        if (s->error < 0)
                return s->error;
        return r < 0 ? git_errno() : 0;
}

/* ---- the changed region, without a diff ----------------------------------------------
 *
 * xdiff (libgit2's diff) first drops the lines the two texts share at their
 * start, then those they share at their end (never more than the shorter
 * text has left), and diffs only the region in between, whose first lines
 * and whose last lines differ. When that region is empty on one side (lines
 * inserted or deleted), the only diff is "all of the other side", which xdiff
 * then slides down past the lines equal to its first one, as far as it goes.
 * When the two sides share no line at all, the only diff is again "all of
 * both sides", and xdiff keeps the deleted and inserted groups lined up where
 * they are (they can line up nowhere else: there is no other change). In both
 * cases the result is known without diffing; in the others (the region has a
 * line on both sides, e.g. two edits far apart), the diff decides which lines
 * match and blame_update runs it, unless the region holds more than
 * SBX_BLAME_DIFF_LINES_MAX lines on its two sides together: the diff's cost
 * grows faster than the region (a 16 MB file with its lines shuffled took 18 s),
 * so such a region is owned by the new owner as a whole, which is still a
 * tiling (unchanged lines before and after it keep their owners). */

#define REGION_COMPARES_MAX 65536u      /* line pairs compared to show the sides share no line */
#define COMPARE_BLOCK 4096u

/* Bytes at the start of a and b that are the same, at most n. */
static size_t common_prefix(const char *a, const char *b, size_t n) {
        size_t i = 0;

        while (n - i >= COMPARE_BLOCK && memcmp(a + i, b + i, COMPARE_BLOCK) == 0)
                i += COMPARE_BLOCK;
        while (i < n && a[i] == b[i])
                i++;
        return i;
}

/* Bytes at the end of a and b that are the same, at most n. */
static size_t common_suffix(const char *a, size_t a_len, const char *b, size_t b_len, size_t n) {
        size_t i = 0;

        while (n - i >= COMPARE_BLOCK &&
               memcmp(a + a_len - i - COMPARE_BLOCK, b + b_len - i - COMPARE_BLOCK, COMPARE_BLOCK) == 0)
                i += COMPARE_BLOCK;
        while (i < n && a[a_len - i - 1] == b[b_len - i - 1])
                i++;
        return i;
}

/* The end of the line that begins at `at` (after its '\n'). */
static size_t line_end(const char *text, size_t len, size_t at) {
        const char *nl = memchr(text + at, '\n', len - at);

        return nl ? (size_t) (nl - text) + 1 : len;
}

/* The start of the line that holds byte `at` (or begins there). */
static size_t line_start(const char *text, size_t at) {
        const char *nl = at > 0 ? memrchr(text, '\n', at) : NULL;

        return nl ? (size_t) (nl - text) + 1 : 0;
}

/* The start of the last line of text[from, to) (from is a line start). */
static size_t last_line_start(const char *text, size_t from, size_t to) {
        const char *nl = to - from > 1 ? memrchr(text + from, '\n', to - 1 - from) : NULL;

        return nl ? (size_t) (nl - text) + 1 : from;
}

static bool lines_equal(const char *a, size_t a_start, size_t a_end, const char *b, size_t b_start, size_t b_end) {
        return a_end - a_start == b_end - b_start && memcmp(a + a_start, b + b_start, a_end - a_start) == 0;
}

/* No line of a[a_start, a_end) is a line of b[b_start, b_end) (both whole lines);
 * false also when that would take too many comparisons. */
static bool lines_disjoint(const char *a, size_t a_start, size_t a_end, uint64_t a_lines, const char *b,
                           size_t b_start, size_t b_end, uint64_t b_lines) {
        if (a_lines > REGION_COMPARES_MAX / b_lines)
                return false;
        for (size_t i = a_start, i_end; i < a_end; i = i_end) {
                i_end = line_end(a, a_end, i);
                for (size_t j = b_start, j_end; j < b_end; j = j_end) {
                        j_end = line_end(b, b_end, j);
                        if (lines_equal(a, i, i_end, b, j, j_end))
                                return false;
                }
        }
        return true;
}

/* Slide a group of lines text[*start, *end) down past the lines equal to its
 * first one, as xdiff does; returns by how many lines it moved. */
static uint64_t slide_down(const char *text, size_t len, size_t *start, size_t *end) {
        uint64_t moved = 0;

        while (*end < len) {
                size_t first_end = line_end(text, len, *start), next_end = line_end(text, len, *end);

                if (!lines_equal(text, *start, first_end, text, *end, next_end))
                        break;
                *start = first_end;
                *end = next_end;
                moved++;
        }
        return moved;
}

/* Lines of text[from, to) (from is a line start; a last line may lack '\n'). */
static uint64_t lines_in(const char *text, size_t from, size_t to) {
        return count_lines(text + from, to - from);
}

/* Where two texts differ, in whole lines: the same lines_before lines (bytes
 * [0, start) of both) come first, then old[start, old_end) (old_lines lines)
 * became new[start, new_end) (new_lines lines), then the rest of both is the
 * same. Where both sides have lines, their first lines differ, and so do
 * their last lines. */
typedef struct ChangedRegion {
        size_t start, old_end, new_end;
        uint64_t lines_before, old_lines, new_lines;
} ChangedRegion;

static void changed_region(const char *old_text, size_t old_len, const char *new_text, size_t new_len,
                           ChangedRegion *ret) {
        size_t head, tail, start, old_end, new_end;
        uint64_t old_lines, new_lines, before;

        /* Whole lines in the common prefix are the same in both; the next line differs
         * (or ends one of the texts). */
        head = common_prefix(old_text, new_text, MIN(old_len, new_len));
        tail = common_suffix(old_text, old_len, new_text, new_len, MIN(old_len, new_len) - head);
        start = line_start(old_text, head);

        /* The common suffix from the first line that begins at the same place in both. */
        old_end = old_len - tail;
        new_end = new_len - tail;
        if (!((old_end == 0 || old_text[old_end - 1] == '\n') && (new_end == 0 || new_text[new_end - 1] == '\n'))) {
                old_end = line_end(old_text, old_len, old_end);
                new_end = new_len - (old_len - old_end);
        }
        /* Then whole lines the region's two sides end with. */
        old_lines = lines_in(old_text, start, old_end);
        new_lines = lines_in(new_text, start, new_end);
        while (old_lines > 0 && new_lines > 0) {
                size_t old_last = last_line_start(old_text, start, old_end);
                size_t new_last = last_line_start(new_text, start, new_end);

                if (!lines_equal(old_text, old_last, old_end, new_text, new_last, new_end))
                        break;
                old_end = old_last;
                new_end = new_last;
                old_lines--;
                new_lines--;
        }
        before = lines_in(old_text, 0, start);
        /* Lines only inserted or only deleted sit as low as they can, as xdiff puts them. */
        if (old_lines == 0 && new_lines > 0) {
                before += slide_down(new_text, new_len, &start, &new_end);
                old_end = start;
        } else if (new_lines == 0 && old_lines > 0) {
                before += slide_down(old_text, old_len, &start, &old_end);
                new_end = start;
        }
        *ret = (ChangedRegion) {
                .start = start, .old_end = old_end, .new_end = new_end,
                .lines_before = before, .old_lines = old_lines, .new_lines = new_lines,
        };
}

/* The change from old_text (old_total lines) to new_text as at most one hunk,
 * when it is known without a diff (see above): 1, the hunk applied and
 * *ret_new_total set, or 0 (nothing done). */
static int update_by_region(UpdateState *s, const char *old_text, size_t old_len, const char *new_text,
                            size_t new_len, uint64_t old_total, uint64_t *ret_new_total) {
        ChangedRegion g;
        int r;

        changed_region(old_text, old_len, new_text, new_len, &g);
        if (g.old_lines > 0 && g.new_lines > 0 && g.old_lines + g.new_lines <= SBX_BLAME_DIFF_LINES_MAX &&
            !lines_disjoint(old_text, g.start, g.old_end, g.old_lines, new_text, g.start, g.new_end, g.new_lines))
                return 0;
        /* Past the diff budget the changed region is the new owner's as a whole. */

        r = update_apply(s, g.lines_before + 1, g.old_lines, g.new_lines);
        if (r < 0)
                return r;
        *ret_new_total = old_total - g.old_lines + g.new_lines;
        return 1;
}

static int update(const Blame *old, const char *old_text, size_t old_len, const char *new_text, size_t new_len,
                  const char *owner, bool by_region, Blame *ret) {
        _cleanup_(update_state_done) UpdateState s = {
                .old = old,
                .owner = owner,
                .old_line = 1,
                .new_line = 1,
        };
        uint64_t old_lines, new_lines;
        int r;

        if (!old || (!old_text && old_len > 0) || (!new_text && new_len > 0) || !owner_string_valid(owner))
                return -EINVAL;
        r = blame_check(old, &old_lines);
        if (r < 0)
                return r;
        if (old_lines != count_lines(old_text, old_len))
                return -EINVAL;
        if (old_len > DIFF_TEXT_MAX || new_len > DIFF_TEXT_MAX)
                return -EFBIG;

        s.owner_len = strlen(owner);
        r = by_region ? update_by_region(&s, old_text, old_len, new_text, new_len, old_lines, &new_lines) : 0;
        if (r == 0) {
                r = update_by_diff(&s, old_text, old_len, new_text, new_len);
                new_lines = count_lines(new_text, new_len);
        }
        if (r < 0)
                return r;

        if (old_lines + 1 < s.old_line || new_lines + 1 < s.new_line ||
            old_lines + 1 - s.old_line != new_lines + 1 - s.new_line)
                return -EIO;
        r = update_keep(&s, old_lines + 1 - s.old_line);
        if (r < 0)
                return r;

        *ret = s.out.blame;
        s.out.blame = (Blame) {};
        return 0;
}

int blame_update(const Blame *old, const char *old_text, size_t old_len, const char *new_text,
                 size_t new_len, const char *owner, Blame *ret) {
        return update(old, old_text, old_len, new_text, new_len, owner, true, ret);
}

int blame_update_by_diff(const Blame *old, const char *old_text, size_t old_len, const char *new_text,
                         size_t new_len, const char *owner, Blame *ret) {
        return update(old, old_text, old_len, new_text, new_len, owner, false, ret);
}

int blame_serialize(const Blame *b, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        uint64_t lines;
        size_t size = 1, len = 0;
        int r;

        if (!b)
                return -EINVAL;
        r = blame_check(b, &lines);
        if (r < 0)
                return r;
        if (lines > BLAME_LINES_MAX || b->n_ranges > BLAME_RANGES_MAX)
                return -E2BIG;

        /* Two numbers of at most 10 digits, two spaces, owner, newline. */
        for (size_t i = 0; i < b->n_ranges; i++)
                size += 2 * BLAME_NUMBER_DIGITS_MAX + 3 + strlen(b->ranges[i].owner);
        buf = malloc(size);
        if (!buf)
                return -ENOMEM;
        buf[0] = '\0';
        for (size_t i = 0; i < b->n_ranges; i++) {
                int n = snprintf(buf + len, size - len, "%" PRIu64 " %" PRIu64 " %s\n",
                                 b->ranges[i].start_line, b->ranges[i].line_count, b->ranges[i].owner);
                if (n < 0 || (size_t) n >= size - len)
                        return -EIO;
                len += (size_t) n;
        }
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

/* A decimal number from 1 to BLAME_LINES_MAX without sign or leading zeros,
 * followed by a space. */
static int parse_number(const char **p, const char *end, uint64_t *ret) {
        const char *q = *p;
        uint64_t v = 0;

        if (q >= end || *q < '1' || *q > '9')
                return -EBADMSG;
        while (q < end && *q >= '0' && *q <= '9') {
                if ((size_t) (q - *p) >= BLAME_NUMBER_DIGITS_MAX)
                        return -EBADMSG;
                v = v * 10 + (uint64_t) (*q - '0');
                q++;
        }
        if (v > BLAME_LINES_MAX || q >= end || *q != ' ')
                return -EBADMSG;
        *p = q + 1;
        *ret = v;
        return 0;
}

int blame_parse(const char *buf, size_t len, Blame *ret) {
        _cleanup_(blame_builder_done) BlameBuilder bb = {};
        const char *p, *end;
        uint64_t next = 1;
        int r;

        if (!buf && len > 0)
                return -EINVAL;
        if (len == 0) {
                *ret = (Blame) {};
                return 0;
        }
        if (buf[len - 1] != '\n')
                return -EBADMSG;
        for (p = buf, end = buf + len; p < end;) {
                const BlameRange *last = bb.blame.n_ranges > 0 ? &bb.blame.ranges[bb.blame.n_ranges - 1] : NULL;
                uint64_t start, count;
                const char *nl;
                size_t owner_len;

                if (bb.blame.n_ranges >= BLAME_RANGES_MAX)
                        return -EBADMSG;
                r = parse_number(&p, end, &start);
                if (r < 0)
                        return r;
                r = parse_number(&p, end, &count);
                if (r < 0)
                        return r;
                nl = memchr(p, '\n', (size_t) (end - p));
                owner_len = (size_t) (nl - p);
                if (!owner_valid(p, owner_len))
                        return -EBADMSG;
                if (start != next || count > BLAME_LINES_MAX + 1 - next)
                        return -EBADMSG;
                if (last && strlen(last->owner) == owner_len && memcmp(last->owner, p, owner_len) == 0)
                        return -EBADMSG;
                r = builder_append(&bb, p, owner_len, count);
                if (r < 0)
                        return r;
                next += count;
                p = nl + 1;
        }
        *ret = bb.blame;
        bb.blame = (Blame) {};
        return 0;
}

typedef struct DiffOutput {
        char *buf;
        size_t len;
        size_t allocated;
        size_t max_bytes;
        const char *old_header;
        const char *new_header;
        uint64_t lines_skipped; /* before the part of both texts that was diffed */
        bool headers_done;
        bool truncated;
        int error;
} DiffOutput;

static void diff_output_done(DiffOutput *o) {
        free(o->buf);
}

/* Append one line made of up to three pieces; refuse (and mark the output
 * truncated) if it would not fit in max_bytes. Returns 1 when full. */
static int output_line(DiffOutput *o, const char *a, size_t a_len, const char *b, size_t b_len,
                       const char *c, size_t c_len) {
        size_t need;

        if (o->truncated)
                return 1;
        if (b_len > SIZE_MAX - a_len - c_len || a_len + b_len + c_len > o->max_bytes - o->len) {
                o->truncated = true;
                return 1;
        }
        need = o->len + a_len + b_len + c_len + 1;
        if (need > o->allocated) {
                size_t n = MAX(need, MIN(o->allocated * 2, o->max_bytes + 1));
                char *nb = realloc(o->buf, n);
                if (!nb)
                        return -ENOMEM;
                o->buf = nb;
                o->allocated = n;
        }
        memcpy(o->buf + o->len, a, a_len);
        memcpy(o->buf + o->len + a_len, b, b_len);
        memcpy(o->buf + o->len + a_len + b_len, c, c_len);
        o->len += a_len + b_len + c_len;
        o->buf[o->len] = '\0';
        return 0;
}

static int output_headers(DiffOutput *o) {
        int r;

        if (o->headers_done)
                return 0;
        o->headers_done = true;
        r = output_line(o, "--- ", 4, o->old_header, strlen(o->old_header), "\n", 1);
        if (r != 0)
                return r;
        return output_line(o, "+++ ", 4, o->new_header, strlen(o->new_header), "\n", 1);
}

/* "start,count" as diff -u and git print it: ",1" is left out. */
static void format_hunk_side(char *buf, size_t size, uint64_t start, int lines) {
        if (lines == 1)
                (void) snprintf(buf, size, "%" PRIu64, start);
        else
                (void) snprintf(buf, size, "%" PRIu64 ",%d", start, lines);
}

static int diff_hunk(const git_diff_delta *delta, const git_diff_hunk *hunk, void *payload) {
        DiffOutput *o = payload;
        char old_side[32], new_side[32], header[80];
        int r, n;

        r = output_headers(o);
        if (r == 0) {
                format_hunk_side(old_side, sizeof(old_side), o->lines_skipped + (uint64_t) hunk->old_start,
                                 hunk->old_lines);
                format_hunk_side(new_side, sizeof(new_side), o->lines_skipped + (uint64_t) hunk->new_start,
                                 hunk->new_lines);
                n = snprintf(header, sizeof(header), "@@ -%s +%s @@\n", old_side, new_side);
                r = output_line(o, header, (size_t) n, "", 0, "", 0);
        }
        if (r < 0)
                o->error = r;
        return r != 0 ? -1 : 0;
}

static int diff_line(const git_diff_delta *delta, const git_diff_hunk *hunk, const git_diff_line *line,
                     void *payload) {
        DiffOutput *o = payload;
        int r = 0;

        switch (line->origin) {
        case GIT_DIFF_LINE_CONTEXT:
        case GIT_DIFF_LINE_ADDITION:
        case GIT_DIFF_LINE_DELETION: {
                bool has_nl = line->content_len > 0 && line->content[line->content_len - 1] == '\n';
                r = output_line(o, &line->origin, 1, line->content, line->content_len, "\n", has_nl ? 0 : 1);
                break;
        }
        case GIT_DIFF_LINE_CONTEXT_EOFNL:
        case GIT_DIFF_LINE_ADD_EOFNL:
        case GIT_DIFF_LINE_DEL_EOFNL:
                r = output_line(o, NO_NEWLINE_MARKER, strlen(NO_NEWLINE_MARKER), "", 0, "", 0);
                break;
        default:
                break;
        }
        if (r < 0)
                o->error = r;
        return r != 0 ? -1 : 0;
}

/* A C-style escape for c, as git writes it in a quoted name, or 0. */
static char path_escape(unsigned char c) {
        switch (c) {
        case '\a': return 'a';
        case '\b': return 'b';
        case '\t': return 't';
        case '\n': return 'n';
        case '\v': return 'v';
        case '\f': return 'f';
        case '\r': return 'r';
        case '"': return '"';
        case '\\': return '\\';
        default: return 0;
        }
}

/* PATH with prefix, quoted as git quotes names with control characters,
 * '"' or '\\' (other bytes, UTF-8 included, stay as they are). */
static int diff_path(const char *prefix, const char *path, char **ret) {
        size_t plen = strlen(prefix), len = strlen(path), n = 0;
        bool quote = false;
        char *buf;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) path[i];
                if (c < 0x20 || c == 0x7f || path_escape(c))
                        quote = true;
        }
        buf = malloc(plen + 4 * len + 3);
        if (!buf)
                return -ENOMEM;
        if (quote)
                buf[n++] = '"';
        memcpy(buf + n, prefix, plen);
        n += plen;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) path[i];
                char esc = path_escape(c);

                if (esc) {
                        buf[n++] = '\\';
                        buf[n++] = esc;
                } else if (c < 0x20 || c == 0x7f)
                        n += (size_t) sprintf(buf + n, "\\%03o", c);
                else
                        buf[n++] = (char) c;
        }
        if (quote)
                buf[n++] = '"';
        buf[n] = '\0';
        *ret = buf;
        return 0;
}

/* The part of two texts a diff with `context` lines of context needs: the
 * lines where they differ (changed_region) and up to `context` lines before
 * and after them, which are the same in both. xdiff would hash every line of
 * both texts to find the same region (a one-line edit of a 1 MB file cost
 * more than the rest of its publication); what lies outside is only counted.
 * Both texts begin the part at *ret_start, after *ret_lines_before lines. */
static void diff_window(const char *old_text, size_t old_len, const char *new_text, size_t new_len,
                        unsigned context, size_t *ret_start, size_t *ret_old_end, size_t *ret_new_end,
                        uint64_t *ret_lines_before) {
        ChangedRegion g;
        size_t start, old_end;
        uint64_t before;

        changed_region(old_text, old_len, new_text, new_len, &g);
        start = g.start;
        before = g.lines_before;
        for (unsigned i = 0; i < context && start > 0; i++, before--)
                start = line_start(old_text, start - 1);
        old_end = g.old_end;
        for (unsigned i = 0; i < context && old_end < old_len; i++)
                old_end = line_end(old_text, old_len, old_end);
        *ret_start = start;
        *ret_old_end = old_end;
        *ret_new_end = g.new_end + (old_end - g.old_end);
        *ret_lines_before = before;
}

static int unified_diff(const char *path, const char *old_text, size_t old_len, const char *new_text,
                        size_t new_len, bool windowed, size_t max_bytes, char **ret, size_t *ret_len,
                        bool *ret_truncated) {
        _cleanup_free_ char *old_header = NULL, *new_header = NULL;
        _cleanup_(diff_output_done) DiffOutput o = { .max_bytes = max_bytes };
        git_diff_options opts;
        int r;

        if (!path || (!old_text && !new_text) || (!old_text && old_len > 0) || (!new_text && new_len > 0))
                return -EINVAL;
        if (old_len > DIFF_TEXT_MAX || new_len > DIFF_TEXT_MAX)
                return -EFBIG;
        if (old_text)
                r = diff_path("a/", path, &old_header);
        else
                r = (old_header = strdup("/dev/null")) ? 0 : -ENOMEM;
        if (r < 0)
                return r;
        if (new_text)
                r = diff_path("b/", path, &new_header);
        else
                r = (new_header = strdup("/dev/null")) ? 0 : -ENOMEM;
        if (r < 0)
                return r;
        r = git_ready();
        if (r < 0)
                return r;

        o.old_header = old_header;
        o.new_header = new_header;
        o.buf = strdup("");
        if (!o.buf)
                return -ENOMEM;
        o.allocated = 1;

        diff_options_init(&opts, DIFF_CONTEXT_LINES);
        if (windowed && old_text && new_text) {
                size_t start, old_end, new_end;
                diff_window(old_text, old_len, new_text, new_len, DIFF_CONTEXT_LINES, &start, &old_end, &new_end,
                            &o.lines_skipped);
                r = git_diff_buffers(old_text + start, old_end - start, NULL, new_text + start, new_end - start,
                                     NULL, &opts, NULL, NULL, diff_hunk, diff_line, &o);
        } else
                r = git_diff_buffers(old_text, old_len, NULL, new_text, new_len, NULL, &opts, NULL, NULL,
                                     diff_hunk, diff_line, &o);
        if (o.error < 0)
                return o.error;
        if (r < 0 && !o.truncated)
                return git_errno();
        /* An added or deleted empty file still shows its headers. */
        if (!old_text || !new_text) {
                r = output_headers(&o);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(o.buf);
        *ret_len = o.len;
        *ret_truncated = o.truncated;
        return 0;
}

int text_unified_diff(const char *path, const char *old_text, size_t old_len, const char *new_text,
                      size_t new_len, size_t max_bytes, char **ret, size_t *ret_len, bool *ret_truncated) {
        return unified_diff(path, old_text, old_len, new_text, new_len, true, max_bytes, ret, ret_len,
                            ret_truncated);
}

int text_unified_diff_whole(const char *path, const char *old_text, size_t old_len, const char *new_text,
                            size_t new_len, size_t max_bytes, char **ret, size_t *ret_len, bool *ret_truncated) {
        return unified_diff(path, old_text, old_len, new_text, new_len, false, max_bytes, ret, ret_len,
                            ret_truncated);
}
