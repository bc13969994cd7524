/* The text side of the file tools, independent of where the file lives:
 * windows of UTF-8 text by line, and ordered exact-string edits. Lines are
 * '\n'-terminated; a last line without '\n' is a line; "\r\n" is one line end
 * whose '\r' stays part of the line's text. Non-logging; errors return -errno
 * and, where a person needs to know why, a sentence in errmsg. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx.pb-c.h"

typedef struct FileWindow {
        char *content;           /* malloc'd, NUL-terminated, the lines of the window */
        size_t len;
        uint64_t start_line;     /* 1-based */
        uint64_t num_lines;
        uint64_t total_lines;
        uint64_t bytes_read;     /* == len */
        uint64_t total_bytes;
        bool has_next_offset;
        uint64_t next_offset;    /* 1-based line to continue from */
        bool truncated;          /* a next window exists */
} FileWindow;

typedef struct FileIndexMark {
        uint64_t line;          /* 1-based */
        uint64_t offset;        /* where that line begins */
} FileIndexMark;

/* What one pass over a whole text file learns: its size and lines, and where
 * some of its lines begin (about one a read block, at most a fixed number of
 * marks whatever the file's size), so that a window is read from the mark
 * before it instead of from the start of the file. */
typedef struct FileIndex {
        uint64_t total_bytes;
        uint64_t total_lines;
        FileIndexMark *marks;   /* ascending; marks[0] is line 1 at offset 0 (none for an empty file) */
        size_t n_marks;
} FileIndex;

/* Read the regular file open at fd from offset 0 with pread (the fd's
 * position is neither used nor moved), streaming it with a bounded buffer: the
 * file is never held in memory whole. Fails with -EILSEQ if the file is not
 * UTF-8 (or contains NUL; errmsg says where). Files of any size are indexed. */
int file_index_build(int fd, FileIndex *ret, char *errmsg, size_t errmsg_size);
void file_index_done(FileIndex *index);
/* Bytes the index holds besides the struct itself. */
size_t file_index_size(const FileIndex *index);

/* Read lines [offset, offset + limit) of the file that index describes
 * (offset 0 is taken as 1), from the mark before offset up to the end of the
 * window only. The window also stops before its text, escaped as a JSON
 * string (json_escaped_size), exceeds budget bytes (but holds at least one
 * line, cut on a UTF-8 boundary where its escaped size reaches budget if that
 * line alone is larger; then truncated is set and next_offset is the line
 * after it).
 * total_lines and total_bytes are the index's. The bytes read are validated
 * again (-EILSEQ if the file changed into something else than text since the
 * index was built). Fails with -EINVAL for limit 0 or above
 * SBX_FILE_READ_MAX_LINES. An offset past the end gives an empty window (not
 * an error). */
int file_read_window(int fd, const FileIndex *index, uint64_t offset, uint32_t limit, size_t budget,
                     FileWindow *ret, char *errmsg, size_t errmsg_size);
void file_window_done(FileWindow *w);

typedef struct FileEditSpec {
        const char *old_string;
        size_t old_len;
        const char *new_string;
        size_t new_len;
        bool replace_all;
} FileEditSpec;

typedef struct FileEditList {
        Sbx__EditList *list;            /* the unpacked payload the specs point into */
        FileEditSpec *specs;
        size_t n;                       /* at least 1 */
} FileEditList;

/* The edits of a FILE_EDIT payload (a packed sbx.EditList from the broker's
 * memfd): -EBADMSG if it does not unpack or holds no edit. Free with
 * file_edit_list_done(). */
int file_edit_list_parse(const void *payload, size_t size, FileEditList *ret);
void file_edit_list_done(FileEditList *l);

/* Apply edits in order to content. Without replace_all, old_string must occur
 * exactly once in the content as it is at that edit. Fails, changing nothing,
 * with -EINVAL and errmsg naming the edit (1-based) and why: empty
 * old_string, old_string not found, found N times (ambiguous) without
 * replace_all, or new_string equal to old_string (no-op); -EFBIG if the result
 * would exceed SBX_FILE_MAX. */
int file_apply_edits(const char *content, size_t len, const FileEditSpec *edits, size_t n_edits,
                     char **ret_content, size_t *ret_len, uint64_t *ret_replacements,
                     char *errmsg, size_t errmsg_size);

/* true if buf is valid UTF-8 without NUL bytes (what the file tools call text). */
bool text_is_utf8(const char *buf, size_t len);
/* Number of lines in buf, by the rule above. */
uint64_t text_count_lines(const char *buf, size_t len);
