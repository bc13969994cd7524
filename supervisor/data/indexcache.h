/* A bounded cache of file indexes (fileops.h) for files whose content never
 * changes under the same key: the published snapshot's, whose layers are
 * immutable, and a live session's (scope), whose files change only with their
 * ctime. The key is the file's identity and everything that changes with
 * its content: a file rewritten in place changes its size or its ctime (which
 * no caller can set; the kernel gives a changed file a fine-grained ctime once
 * its ctime was looked at), so an entry is never used for other content. At most
 * max_entries indexes holding at most max_bytes of marks together are kept;
 * the least recently used go first. Non-logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "data/fileops.h"

typedef struct FileKey {
        uint64_t scope;         /* 0: the published snapshot; else the live session whose file it is */
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtim;
        struct timespec ctim;
} FileKey;

typedef struct IndexCache IndexCache;

/* The key of the file st describes, on device dev. */
FileKey file_key(const struct stat *st, dev_t dev);

int index_cache_new(size_t max_entries, size_t max_bytes, IndexCache **ret);
IndexCache *index_cache_free(IndexCache *c);
/* The index kept for key (now the most recently used), borrowed until the
 * next index_cache_put; NULL if there is none. */
const FileIndex *index_cache_get(IndexCache *c, const FileKey *key);
/* Keep *index under key (replacing an entry of the same key), evicting the
 * least recently used entries until both bounds hold. *index is taken (left
 * empty); *ret borrows the kept index as index_cache_get does. -EFBIG if the
 * index alone is above the byte bound (then *index is left to the caller). */
int index_cache_put(IndexCache *c, const FileKey *key, FileIndex *index, const FileIndex **ret);
