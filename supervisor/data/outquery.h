/* runtime_query_output over a transcript (data/transcript.h): the lines of
 * one or both streams that hold any of a set of terms (ASCII case-insensitive
 * substrings), grouped into excerpts with context lines, or an exact line
 * range. Lines are 1-based and ranges inclusive, as the tool shows them.
 *
 * A search reads the streams after its cursor in chunks of
 * SBX_QUERY_CHUNK_BYTES (or SBX_QUERY_CHUNK_LINES), starting at the cursor through the sparse
 * index (no line before it is read again), until its page is full (the
 * match after the last excerpt is found) or the streams end: a page costs
 * what it reads, wherever the cursor is, and the match count is of every
 * matching line after the cursor only when the scan reached the end
 * (count_complete). An excerpt spans at most SBX_QUERY_WINDOW_MAX_LINES lines
 * (matches next to each other join one). Only the excerpts' lines are kept.
 * Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/transcript.h"

typedef struct OutQuery {
        const char *const *terms;
        size_t n_terms;
        TranscriptStream streams[2];    /* searched, in this order */
        size_t n_streams;
        bool has_cursor;                /* continue after line after_line of cursor_stream */
        TranscriptStream cursor_stream;
        uint64_t after_line;
        unsigned max_excerpts;
        unsigned context;
        size_t budget;                  /* bytes of excerpt text at most */
} OutQuery;

typedef struct OutExcerpt {
        TranscriptStream source;
        uint64_t start, end;            /* 1-based, inclusive */
        char *content;                  /* "  45| text\n" per line */
        size_t len;
} OutExcerpt;

typedef struct OutResult {
        OutExcerpt *excerpts;
        size_t n_excerpts;
        uint64_t match_count;           /* matching lines read after the cursor */
        bool count_complete;            /* the read reached the end: match_count is all of them */
        bool fallback;                  /* no match: the excerpts are the streams' last lines */
        bool has_next;                  /* more matches: continue after next_after_line of next_stream */
        TranscriptStream next_stream;
        uint64_t next_after_line;
} OutResult;

/* Lines of view s of t (stdout, stderr, or merged for a transcript without
 * streams apart). */
uint64_t outquery_lines(Transcript *t, TranscriptStream s);

/* Search t as q says. -EINVAL: no terms, or a cursor on a stream not
 * searched; -ERANGE: a cursor past the stream's end. */
int outquery_search(Transcript *t, const OutQuery *q, OutResult *ret);

/* Lines start..end (1-based, inclusive; at most max_lines) of view s as one
 * excerpt. -ERANGE if start is 0, end < start, or end is past the view. */
int outquery_range(Transcript *t, TranscriptStream s, uint64_t start, uint64_t end, size_t budget, OutResult *ret);

void outquery_result_done(OutResult *r);
