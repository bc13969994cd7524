/* sandbox_sync's tar (the boxes set, docs/boxes.md): the caller's directory
 * localPath, walked by sandbox-mcp as the caller's user with openat(2)
 * (O_NOFOLLOW) against directory fds, written as a pax tar (libarchive) into
 * a sealed memfd for sbxd, which unpacks it in the box as the box's root.
 * Names of box_sync_excluded are left out at every depth; a symlink is kept
 * as a symlink, its target never opened, so nothing outside localPath is
 * read; fifos, sockets and devices are left out (counted). Bounded by
 * SBX_BOX_SYNC_MAX bytes, SBX_BOX_SYNC_ENTRIES_MAX entries and
 * SBX_BOX_SYNC_DEPTH_MAX levels. Non-logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* node_modules, .git, dist, build and the like (docs/boxes.md lists them). */
extern const char *const box_sync_excluded[];
extern const size_t box_sync_n_excluded;

typedef struct BoxSyncTar {
        int fd;                 /* sealed memfd, at offset 0 */
        uint64_t size;
        uint32_t entries;       /* files, directories and symlinks in it */
        uint32_t excluded;      /* entries left out by name */
        uint32_t special;       /* fifos, sockets, devices left out */
} BoxSyncTar;

/* The tar of local_path (relative to dirfd, AT_FDCWD: the working
 * directory; a directory, or one regular file). On failure err says why
 * (naming the path that failed). */
int box_sync_tar(int dirfd, const char *local_path, BoxSyncTar *ret, char *err, size_t errsize);
