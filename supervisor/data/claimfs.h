/* The files of a claim (the lifecycle set's upload_file, download_file,
 * list_files, file_exists), below the O_PATH fd of its session's merged
 * root: client paths normalized lexically (relative ones below /workspace),
 * then resolved only with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
 * below that fd, never as a string in sbxd's mount namespace. Every lookup
 * and write runs with the filesystem ids of the claim's root (its host uid;
 * setfsuid(2), which also drops root's file capabilities), so what sbxd may
 * do there is what the sandbox's root may do, and what it creates is that
 * root's. Content moves between a file and a memfd in the kernel
 * (sendfile(2)), never through a buffer of sbxd's. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx-limits.h"

/* in (relative to /workspace, or absolute) as a path relative to the
 * claim's root ("" is the root), into out (SBX_PATH_MAX + 1 bytes). -EINVAL
 * with err saying why for an empty path, one that climbs above / or one in
 * /proc, /sys or /dev (the kernel's, not the claim's). */
int claim_path(const char *in, char *out, char *err, size_t errsize);

typedef struct ClaimFsEntry {
        char *name;
        uint64_t size;
        const char *type;               /* file directory symlink other */
        int64_t mtime_usec;
} ClaimFsEntry;

typedef struct ClaimFsListing {
        ClaimFsEntry *entries;          /* sorted by name, bytewise */
        size_t n;
        uint64_t total;
        bool truncated;
} ClaimFsListing;

/* The temporary names of claimfs_put, beside the file they become. */
#define CLAIMFS_TEMP_PREFIX ".sbx-upload-"

/* deadline_unix_ms (CLOCK_REALTIME; 0: none) is the caller's timeout:
 * checked between chunks of a copy, -ETIMEDOUT once it passed. */
bool claimfs_deadline_passed(uint64_t deadline_unix_ms);
/* Write the memfd's size bytes to rel, creating missing parent directories
 * (mode 0755): into a temporary name beside it, renamed over rel once whole
 * (an existing file's mode is kept, a new one gets 0644), so a failure or a
 * timeout leaves rel as it was. Through a symlink, the file it names (inside
 * the claim) is rewritten in place. */
int claimfs_put(int root, uid_t uid, const char *rel, int memfd, uint64_t size, uint64_t deadline_unix_ms, char *err,
                size_t errsize);
/* A sealed memfd holding the regular file rel (at most max bytes). */
int claimfs_get(int root, uid_t uid, const char *rel, uint64_t max, uint64_t deadline_unix_ms, int *ret_memfd,
                uint64_t *ret_size, char *err, size_t errsize);
/* The first max entries (by name) of the directory rel, and how many it has. */
int claimfs_list(int root, uid_t uid, const char *rel, size_t max, ClaimFsListing *ret, char *err, size_t errsize);
void claimfs_listing_done(ClaimFsListing *l);
/* Make the directory rel (and its parents, mode 0755) if it is not there. */
int claimfs_mkdir(int root, uid_t uid, const char *rel, char *err, size_t errsize);
/* 1 and the type if rel exists, 0 if it (or a directory on the way) does not. */
int claimfs_stat(int root, uid_t uid, const char *rel, const char **ret_type);
