/* The rename check of a publication: a file that appears where none was,
 * with the very content of a file the same publication deletes, was renamed
 * (its lines keep their owners). Linear in the files involved: the deleted
 * files are sorted by size once, and only those of a new file's size are
 * compared, by a content hash computed at most once per file, then byte for
 * byte on a hash match. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct RenameCandidate {
        const char *path;       /* borrowed: lives as long as the set */
        uint64_t size;
        size_t order;           /* when it was added: the first added wins */
        uint64_t hash;
        bool hashed;
        bool unreadable;
} RenameCandidate;

/* Reads the whole file at path (as the candidates' source sees it). */
typedef int (*RenameRead)(void *userdata, const char *path, char **ret, size_t *ret_len);

typedef struct Renames {
        RenameCandidate *candidates;
        size_t n, cap;
        bool sorted;
        RenameRead read;
        void *userdata;
        uint64_t reads;         /* files read so far (tests check linearity with it) */
} Renames;

void renames_init(Renames *r, RenameRead read, void *userdata);
/* A deleted file of size bytes at path. */
int renames_add(Renames *r, const char *path, uint64_t size);
/* The first deleted file (in the order added) whose content is text:
 * 1 with *ret_path set, 0 if there is none, or -errno. */
int renames_find(Renames *r, const char *text, size_t len, const char **ret_path);
void renames_done(Renames *r);
