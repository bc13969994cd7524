/* Line attribution (file_blame) and text diffs, built on libgit2's line diff.
 * A Blame is a list of ranges that tile a text's lines exactly (lines counted
 * as in fileops.h), each with an owner string ("original",
 * "workspace_session:ID", "operation:ID", "unknown"). Adjacent ranges never
 * share an owner. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct BlameRange {
        uint64_t start_line;     /* 1-based */
        uint64_t line_count;
        char *owner;
} BlameRange;

typedef struct Blame {
        BlameRange *ranges;
        size_t n_ranges;
} Blame;

void blame_done(Blame *b);
/* Every line of text owned by owner (no ranges for an empty text). */
int blame_new(const char *text, size_t len, const char *owner, Blame *ret);
/* New attribution after old_text (attributed by old, which must tile it)
 * became new_text: unchanged lines keep their owner, inserted and changed
 * lines get owner, as a line diff (libgit2's Myers) of the two texts says; a
 * changed CRLF ending or a missing final newline changes only the line it is
 * on. A change confined to one region (one edit, lines inserted or deleted in
 * one place) is attributed from that region without running the diff, with
 * the same result. A region of more than SBX_BLAME_DIFF_LINES_MAX lines (its
 * old and new lines together) is not diffed: all its new lines get owner. */
int blame_update(const Blame *old, const char *old_text, size_t old_len, const char *new_text,
                 size_t new_len, const char *owner, Blame *ret);
/* The same, always by diffing the whole texts. */
int blame_update_by_diff(const Blame *old, const char *old_text, size_t old_len, const char *new_text,
                         size_t new_len, const char *owner, Blame *ret);
/* Compact text form for storage: one "start count owner\n" per range. Parsing
 * checks that the ranges tile 1..N in order, owners are printable and at most
 * 128 bytes, and there are at most 1,000,000 ranges; else -EBADMSG. */
int blame_serialize(const Blame *b, char **ret, size_t *ret_len);
int blame_parse(const char *buf, size_t len, Blame *ret);

/* Unified diff ("--- a/PATH", "+++ b/PATH", @@ hunks, 3 lines of context) of
 * two texts; at most max_bytes, cut at a line boundary with *ret_truncated set.
 * Either text may be NULL for an added or deleted file. Only the lines from
 * the first that differs to the last that differs, with their context, are
 * diffed (the cost of a small edit of a large file is that of the edit). */
int text_unified_diff(const char *path, const char *old_text, size_t old_len, const char *new_text,
                      size_t new_len, size_t max_bytes, char **ret, size_t *ret_len, bool *ret_truncated);
/* The same, always by diffing the whole texts. */
int text_unified_diff_whole(const char *path, const char *old_text, size_t old_len, const char *new_text,
                            size_t new_len, size_t max_bytes, char **ret, size_t *ret_len, bool *ret_truncated);
