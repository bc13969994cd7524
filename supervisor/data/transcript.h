/* A command's transcript on disk: raw output is rendered as a terminal would
 * show it (CR overwrites, backspace, ANSI CSI/OSC removed, invalid UTF-8 as
 * U+FFFD, lines longer than SBX_LINE_MAX wrapped) and stored as committed lines
 * with a sparse index, so any line offset is found by one index read and a
 * scan of fewer than SBX_TRANSCRIPT_INDEX_LINES lines.
 *
 * Files in dirfd: "<id>.log" (rendered lines, each ending in '\n') and
 * "<id>.lix" (per SBX_TRANSCRIPT_INDEX_LINES committed lines, one
 * little-endian u64: the byte offset in .log just past them). Offsets are
 * 0-based and never shift. A line not yet ended by '\n' is "pending": it
 * counts in total_lines and is readable, but its text may still change until
 * it is committed. Non-logging.
 *
 * With stdout and stderr apart (transcript_create_streams), each stream is
 * rendered on its own, .log holds the lines of both in the order they were
 * committed (the merged view), "<id>.str" holds one bit per merged line (1:
 * stderr), and each .lix entry is two u64: the offset, and how many of the
 * lines up to there came from stderr. Either stream reads alone, with its own
 * 0-based offsets. Without .str (a transcript of one merged stream) only the
 * merged view exists. A transcript of the format before the sparse index
 * (".idx" with an entry per line, ".out" and ".err" with each stream's
 * merged line numbers) is converted by transcript_open.
 *
 * The files of a new transcript are made when its first line is written
 * out, not at transcript_create: a command that prints nothing (an
 * execute_command `true`) costs no inode allocation, which on a busy ext4
 * was most of such a command's time in sbxd; it has no files at all
 * (transcript_open: -ENOENT, read as transcript_empty).
 *
 * A finished transcript may be compressed (transcript_compress): "<id>.zst"
 * then holds the text of .log (which goes), readable as before.
 *
 * Stored bytes are counted in whole SBX_TRANSCRIPT_BLOCK blocks per file
 * (as du counts them), index and stream bits included; the cap and the limit
 * bound that count. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Transcript Transcript;

/* Where a piece of output came from, or which view to read. */
typedef enum TranscriptStream {
        TRANSCRIPT_MERGED,      /* the one pipe of both; the merged view */
        TRANSCRIPT_STDOUT,
        TRANSCRIPT_STDERR,
} TranscriptStream;

/* New, empty transcript of one merged stream. cap_bytes bounds the bytes it
 * stores (transcript_stored_bytes); on reaching it one marker line is
 * committed saying so, and later output is counted (raw bytes) but not
 * stored. */
int transcript_create(int dirfd, const char *id, uint64_t cap_bytes, Transcript **ret);
/* The same with stdout and stderr apart; cap_bytes counts both together, and
 * the marker line ends both. */
int transcript_create_streams(int dirfd, const char *id, uint64_t cap_bytes, Transcript **ret);
/* A further bound on the stored bytes, from the caller's budgets: reaching
 * it commits a marker naming reason (say "sandbox_transcripts_max_bytes =
 * 1073741824"), as the cap does. */
void transcript_set_limit(Transcript *t, uint64_t limit_bytes, const char *reason);
/* What t stores, as counted against its cap, and in how many files. */
uint64_t transcript_stored_bytes(const Transcript *t);
unsigned transcript_files(const Transcript *t);
/* The files a new transcript takes (streams_apart: transcript_create_streams). */
unsigned transcript_files_new(bool streams_apart);
/* The same of a transcript on disk, counted from its files (0 if none). */
int transcript_usage(int dirfd, const char *id, uint64_t *ret_bytes, unsigned *ret_files);
/* Existing transcript, read-only (finished commands, after a restart). */
int transcript_open(int dirfd, const char *id, Transcript **ret);
/* Render and append raw command output (transcript_feed: TRANSCRIPT_MERGED).
 * A merged transcript takes every stream into its one; one with streams
 * apart takes TRANSCRIPT_STDOUT and TRANSCRIPT_STDERR only (else -EINVAL),
 * and orders its lines in the order of the calls that ended them. */
int transcript_feed(Transcript *t, const void *data, size_t len);
int transcript_feed_stream(Transcript *t, TranscriptStream s, const void *data, size_t len);
/* The command ended: commit the pending line, if any, and write everything out (no fsync). */
int transcript_finish(Transcript *t);
/* A new transcript's files are made when its first line is written out: a
 * command that printed nothing has none (transcript_open: -ENOENT), and reads
 * as this, an empty read-only transcript (apart: of streams kept apart). */
int transcript_empty(bool apart, Transcript **ret);

uint64_t transcript_total_lines(const Transcript *t);   /* committed + pending, merged view */
/* Lines of one view (0 for a single stream of a merged transcript). */
uint64_t transcript_stream_total_lines(const Transcript *t, TranscriptStream s);
bool transcript_has_streams(const Transcript *t);         /* stdout and stderr kept apart */
uint64_t transcript_committed_lines(const Transcript *t);
uint64_t transcript_raw_bytes(const Transcript *t);     /* fed since create */
bool transcript_capped(const Transcript *t);

/* Lines [start, start + limit), stopping early so that the text, escaped as
 * a JSON string (json_escaped_size), stays within budget bytes (but at least
 * one line when start < total). Returns the text
 * (malloc'd, NUL-terminated, each line ending in '\n') and the offset after
 * the last line returned. start >= total gives "" and end = total. */
int transcript_read(Transcript *t, uint64_t start, uint64_t limit, size_t budget,
                    char **ret_text, size_t *ret_len, uint64_t *ret_end);
/* The same for view s, with its own offsets; a single stream of a transcript
 * without streams apart is -ENODATA. */
int transcript_read_stream(Transcript *t, TranscriptStream s, uint64_t start, uint64_t limit, size_t budget,
                           char **ret_text, size_t *ret_len, uint64_t *ret_end);

/* At most limit lines of view s from start that fit in max_bytes of raw
 * text (at least one), for scanning (runtime_query_output, data/outquery.h):
 * as transcript_read_stream, without the cost of counting escaped bytes. */
int transcript_scan_stream(Transcript *t, TranscriptStream s, uint64_t start, uint64_t limit, size_t max_bytes,
                           char **ret_text, size_t *ret_len, uint64_t *ret_end);

/* Compress the text of a finished transcript on disk (a persisted
 * artifact's, core/artifacts.h): "<id>.log" becomes "<id>.zst" of
 * data/zframes.h, written beside it as "<id>.ztm", synced and renamed into
 * place before .log goes; .lix and .str stay as they are. transcript_open
 * reads either, decompressing only the frames a read needs. ret_text: the
 * text's bytes; ret_packed: the compressed file's. -ENOENT when there is no
 * .log (compressed already, or no output). Run it off the event loop. */
int transcript_compress(int dirfd, const char *id, uint64_t *ret_text, uint64_t *ret_packed);
/* Remove the files of a transcript. */
int transcript_remove(int dirfd, const char *id);
/* Remove the files of every transcript in dirfd whose id keep() refuses
 * (keep returns > 0 to keep, 0 to remove, < 0 to stop with that error);
 * counts the transcripts and bytes removed. */
int transcripts_collect(int dirfd, int (*keep)(const char *id, void *userdata), void *userdata,
                        unsigned *ret_removed, uint64_t *ret_bytes);

Transcript *transcript_free(Transcript *t);
static inline void transcript_freep(Transcript **t) {
        transcript_free(*t);
}
