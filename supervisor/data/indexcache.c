/* The index cache: a fixed array of max_entries slots, searched linearly (a
 * few hundred keys compare in well under a microsecond, far less than one
 * pread), each stamped with a use counter for least-recently-used eviction. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "data/indexcache.h"
#include "macro.h"

typedef struct IndexCacheEntry {
        FileKey key;
        FileIndex index;
        uint64_t used;          /* the clock at the last get or put; 0: free slot */
} IndexCacheEntry;

struct IndexCache {
        IndexCacheEntry *entries;
        size_t max_entries;
        size_t max_bytes;
        size_t bytes;           /* file_index_size() of every kept index */
        uint64_t clock;
};

FileKey file_key(const struct stat *st, dev_t dev) {
        return (FileKey) {
                .dev = dev,
                .ino = st->st_ino,
                .size = st->st_size,
                .mtim = st->st_mtim,
                .ctim = st->st_ctim,
        };
}

static bool key_equal(const FileKey *a, const FileKey *b) {
        return a->scope == b->scope && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
               a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}

int index_cache_new(size_t max_entries, size_t max_bytes, IndexCache **ret) {
        _cleanup_free_ IndexCache *c = NULL;

        if (max_entries == 0)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->entries = calloc(max_entries, sizeof(*c->entries));
        if (!c->entries)
                return -ENOMEM;
        c->max_entries = max_entries;
        c->max_bytes = max_bytes;
        *ret = TAKE_PTR(c);
        return 0;
}

static void entry_drop(IndexCache *c, IndexCacheEntry *e) {
        c->bytes -= file_index_size(&e->index);
        file_index_done(&e->index);
        *e = (IndexCacheEntry) {};
}

IndexCache *index_cache_free(IndexCache *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->max_entries; i++)
                file_index_done(&c->entries[i].index);
        free(c->entries);
        free(c);
        return NULL;
}

static IndexCacheEntry *find(IndexCache *c, const FileKey *key) {
        for (size_t i = 0; i < c->max_entries; i++)
                if (c->entries[i].used && key_equal(&c->entries[i].key, key))
                        return &c->entries[i];
        return NULL;
}

const FileIndex *index_cache_get(IndexCache *c, const FileKey *key) {
        IndexCacheEntry *e = find(c, key);

        if (!e)
                return NULL;
        e->used = ++c->clock;
        return &e->index;
}

/* The least recently used entry; NULL if the cache is empty. */
static IndexCacheEntry *least_recent(IndexCache *c) {
        IndexCacheEntry *o = NULL;

        for (size_t i = 0; i < c->max_entries; i++)
                if (c->entries[i].used && (!o || c->entries[i].used < o->used))
                        o = &c->entries[i];
        return o;
}

static IndexCacheEntry *free_slot(IndexCache *c) {
        for (size_t i = 0; i < c->max_entries; i++)
                if (!c->entries[i].used)
                        return &c->entries[i];
        return NULL;
}

int index_cache_put(IndexCache *c, const FileKey *key, FileIndex *index, const FileIndex **ret) {
        size_t size = file_index_size(index);
        IndexCacheEntry *e;

        if (size > c->max_bytes)
                return -EFBIG;
        e = find(c, key);
        if (e)
                entry_drop(c, e);
        /* Make room for the bytes (some entry holds them while bytes > 0), then take a slot. */
        while (c->bytes + size > c->max_bytes)
                entry_drop(c, least_recent(c));
        e = free_slot(c);
        if (!e) {
                e = least_recent(c);
                entry_drop(c, e);
        }
        *e = (IndexCacheEntry) {
                .key = *key,
                .index = *index,
                .used = ++c->clock,
        };
        *index = (FileIndex) {};
        c->bytes += size;
        *ret = &e->index;
        return 0;
}
