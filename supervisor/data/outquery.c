/* runtime_query_output over a transcript (see outquery.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/outquery.h"
#include "macro.h"
#include "sbx-limits.h"

uint64_t outquery_lines(Transcript *t, TranscriptStream s) {
        return s == TRANSCRIPT_MERGED ? transcript_total_lines(t) : transcript_stream_total_lines(t, s);
}

static char ascii_lower(char c) {
        return c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

/* Lines start..end of stream s (1-based, inclusive); last_hit is its last matching line. */
typedef struct Window {
        TranscriptStream s;
        uint64_t start, end, last_hit;
} Window;

typedef struct Scan {
        const OutQuery *q;
        char *terms[SBX_QUERY_TERMS_MAX];       /* lower-cased */
        size_t term_len[SBX_QUERY_TERMS_MAX];
        size_t next[SBX_QUERY_TERMS_MAX];       /* in the chunk: offset of the term's next occurrence */
        Window *w;
        size_t n_w;
        uint64_t count;
        bool full;
        OutResult *res;
} Scan;

static void scan_done(Scan *sc) {
        for (size_t i = 0; i < SBX_QUERY_TERMS_MAX; i++)
                free(sc->terms[i]);
        free(sc->w);
}

static void scan_hit(Scan *sc, TranscriptStream s, uint64_t line, uint64_t total) {
        uint64_t lo = line > sc->q->context ? line - sc->q->context : 1, hi = MIN(line + sc->q->context, total);
        Window *last = sc->n_w > 0 ? &sc->w[sc->n_w - 1] : NULL;

        sc->count++;
        if (sc->full)
                return;
        if (last && last->s == s && lo <= last->end + 1 && hi - last->start < SBX_QUERY_WINDOW_MAX_LINES) {
                last->end = MAX(last->end, hi);
                last->last_hit = line;
                return;
        }
        if (sc->n_w == sc->q->max_excerpts) {
                sc->full = true;
                sc->res->has_next = true;
                sc->res->next_stream = last->s;
                sc->res->next_after_line = last->last_hit;
                return;
        }
        sc->w[sc->n_w++] = (Window) { s, lo, hi, line };
}

/* The offset of the earliest occurrence of any term in text[pos..len), or len. */
static size_t earliest(Scan *sc, const char *text, size_t pos, size_t len) {
        size_t best = len;

        for (size_t i = 0; i < sc->q->n_terms; i++) {
                if (sc->next[i] < pos) {
                        const char *h = memmem(text + pos, len - pos, sc->terms[i], sc->term_len[i]);
                        sc->next[i] = h ? (size_t) (h - text) : len;
                }
                best = MIN(best, sc->next[i]);
        }
        return best;
}

/* One chunk (lowered in place) whose first line is line: its matching lines. */
static void scan_chunk(Scan *sc, TranscriptStream s, char *text, size_t len, uint64_t line, uint64_t total) {
        size_t pos = 0;

        for (size_t i = 0; i < len; i++)
                text[i] = ascii_lower(text[i]);
        for (size_t i = 0; i < sc->q->n_terms; i++) {
                const char *h = memmem(text, len, sc->terms[i], sc->term_len[i]);
                sc->next[i] = h ? (size_t) (h - text) : len;
        }
        while (pos < len) {
                size_t hit = earliest(sc, text, pos, len);
                const char *nl;

                if (hit >= len || sc->full)
                        return;
                for (const char *p = text + pos; (p = memchr(p, '\n', (size_t) (text + hit - p))); p++)
                        line++;
                scan_hit(sc, s, line, total);
                nl = memchr(text + hit, '\n', len - hit);
                if (!nl)
                        return;
                pos = (size_t) (nl - text) + 1;
                line++;
        }
}

/* Scan stream s from line from (1-based) to its end. */
static int scan_stream(Transcript *t, Scan *sc, TranscriptStream s, uint64_t from) {
        uint64_t total = outquery_lines(t, s), off = from - 1;

        while (off < total && !sc->full) {
                _cleanup_free_ char *text = NULL;
                size_t len = 0;
                uint64_t end = off;
                int r = transcript_scan_stream(t, s, off, SBX_QUERY_CHUNK_LINES, SBX_QUERY_CHUNK_BYTES, &text, &len,
                                               &end);

                if (r < 0)
                        return r;
                if (end <= off)
                        break;
                scan_chunk(sc, s, text, len, off + 1, total);
                off = end;
        }
        return 0;
}

/* The excerpt of lines start..end of s, numbered, within *budget (which it reduces). */
static int excerpt_read(Transcript *t, TranscriptStream s, uint64_t start, uint64_t end, size_t *budget,
                        OutExcerpt *ret) {
        _cleanup_free_ char *text = NULL, *out = NULL;
        size_t len = 0, out_len = 0;
        uint64_t got = start - 1, line = start;
        int width = 4, r;
        FILE *f;

        r = transcript_read_stream(t, s, start - 1, end - start + 1, MAX(*budget, (size_t) 1), &text, &len, &got);
        if (r < 0)
                return r;
        for (uint64_t v = end; v >= 10000; v /= 10)
                width++;
        f = open_memstream(&out, &out_len);
        if (!f)
                return -ENOMEM;
        for (const char *p = text; p < text + len; line++) {
                const char *nl = memchr(p, '\n', (size_t) (text + len - p));
                size_t n = nl ? (size_t) (nl - p) : (size_t) (text + len - p);

                fprintf(f, "%*llu| %.*s\n", width, (unsigned long long) line, (int) n, p);
                p += n + 1;
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        *budget -= MIN(*budget, out_len);
        *ret = (OutExcerpt) { .source = s, .start = start, .end = MAX(got, start), .len = out_len,
                              .content = TAKE_PTR(out) };
        if (got < start) /* nothing fitted */
                ret->end = start - 1;
        return 0;
}

static int windows_read(Transcript *t, const Window *w, size_t n, size_t budget, OutResult *res) {
        res->excerpts = calloc(MAX(n, (size_t) 1), sizeof(OutExcerpt));
        if (!res->excerpts)
                return -ENOMEM;
        for (size_t i = 0; i < n && budget > 0; i++) {
                int r = excerpt_read(t, w[i].s, w[i].start, w[i].end, &budget, &res->excerpts[res->n_excerpts]);
                if (r < 0)
                        return r;
                res->n_excerpts++;
        }
        return 0;
}

static int scan_setup(Scan *sc, const OutQuery *q, OutResult *res) {
        *sc = (Scan) { .q = q, .res = res };
        if (q->n_terms == 0 || q->n_terms > SBX_QUERY_TERMS_MAX || q->max_excerpts == 0)
                return -EINVAL;
        for (size_t i = 0; i < q->n_terms; i++) {
                size_t n = strlen(q->terms[i]);

                if (n == 0)
                        return -EINVAL;
                sc->terms[i] = strdup(q->terms[i]);
                if (!sc->terms[i])
                        return -ENOMEM;
                for (size_t k = 0; k < n; k++)
                        sc->terms[i][k] = ascii_lower(sc->terms[i][k]);
                sc->term_len[i] = n;
        }
        sc->w = calloc(q->max_excerpts, sizeof(Window));
        return sc->w ? 0 : -ENOMEM;
}

int outquery_search(Transcript *t, const OutQuery *q, OutResult *ret) {
        _cleanup_(scan_done) Scan sc;
        OutResult res = {};
        size_t first = 0;
        int r;

        r = scan_setup(&sc, q, &res);
        if (r < 0)
                return r;
        if (q->has_cursor) {
                while (first < q->n_streams && q->streams[first] != q->cursor_stream)
                        first++;
                if (first == q->n_streams)
                        return -EINVAL;
                if (q->after_line > outquery_lines(t, q->cursor_stream))
                        return -ERANGE;
        }
        for (size_t i = first; i < q->n_streams && !sc.full; i++) {
                r = scan_stream(t, &sc, q->streams[i], q->has_cursor && i == first ? q->after_line + 1 : 1);
                if (r < 0)
                        return r;
        }
        res.match_count = sc.count;
        res.count_complete = !sc.full;
        if (sc.n_w == 0) {
                /* No match: the last lines of each stream searched, as a preview. */
                res.fallback = true;
                for (size_t i = 0; i < q->n_streams; i++) {
                        uint64_t total = outquery_lines(t, q->streams[i]);
                        if (total > 0)
                                sc.w[sc.n_w++] = (Window) { q->streams[i],
                                        total > SBX_QUERY_FALLBACK_LINES ? total - SBX_QUERY_FALLBACK_LINES + 1 : 1,
                                        total, 0 };
                        if (sc.n_w == q->max_excerpts)
                                break;
                }
        }
        r = windows_read(t, sc.w, sc.n_w, q->budget, &res);
        if (r < 0) {
                outquery_result_done(&res);
                return r;
        }
        *ret = res;
        return 0;
}

int outquery_range(Transcript *t, TranscriptStream s, uint64_t start, uint64_t end, size_t budget, OutResult *ret) {
        Window w = { s, start, end, end };
        OutResult res = {};
        int r;

        if (start == 0 || end < start || end > outquery_lines(t, s))
                return -ERANGE;
        r = windows_read(t, &w, 1, budget, &res);
        if (r < 0) {
                outquery_result_done(&res);
                return r;
        }
        *ret = res;
        return 0;
}

void outquery_result_done(OutResult *r) {
        for (size_t i = 0; i < r->n_excerpts; i++)
                free(r->excerpts[i].content);
        free(r->excerpts);
        *r = (OutResult) {};
}
