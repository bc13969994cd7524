/* Layers on disk: immutable directories of workspace changes, in overlayfs
 * format (whiteouts are 0/0 character devices, opaque directories carry
 * trusted.overlay.opaque=y). A layer is built under a temporary name, synced,
 * then renamed to its sequence number, so after a crash it is either wholly
 * present or absent. Non-logging. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx-limits.h"

typedef enum TreeCopyFlags {
        TREE_COPY_HARDLINK = 1 << 0,        /* link regular files instead of copying them (they keep their
                                               inode's owner, mode and times; copied across filesystems) */
        TREE_COPY_DROP_WHITEOUTS = 1 << 1,  /* for a bottom layer: no whiteouts, no opaque marks */
        TREE_COPY_CLEAR_SETID = 1 << 2,     /* no setuid or setgid bit on a copied or linked file */
        TREE_COPY_FSYNC_FEW = 1 << 3,       /* fsync each file and directory written, up to
                                               SBX_LAYER_FSYNC_MAX; past them none (TreeReport.unsynced) */
} TreeCopyFlags;

/* What a copy may write, checked as it goes: the allocated bytes (st_blocks)
 * and inodes it adds, and the free space (fstatvfs(2) f_bavail) it must leave
 * on the destination's filesystem, looked at every SBX_RESERVE_CHECK_BYTES
 * written and every SBX_RESERVE_CHECK_ENTRIES entries. */
typedef struct TreeBudget {
        uint64_t max_bytes;             /* UINT64_MAX: any */
        uint64_t max_inodes;
        uint64_t reserve_bytes;         /* 0: no reserve */
        const atomic_bool *cancelled;   /* NULL: never; once set, the copy stops (-ECANCELED) at its next entry */
} TreeBudget;

/* Why a copy stopped before its end (TreeReport.stopped). */
typedef enum TreeStop {
        TREE_STOP_NONE,
        TREE_STOP_BYTES,                /* -EDQUOT: it would pass max_bytes */
        TREE_STOP_INODES,               /* -EDQUOT: it would pass max_inodes */
        TREE_STOP_RESERVE,              /* -ENOSPC: the filesystem fell below reserve_bytes */
} TreeStop;

/* What a tree costs: allocated bytes (st_blocks * 512) and inodes, each
 * inode once however many names it has. */
typedef struct TreeUsage {
        uint64_t bytes;
        uint64_t inodes;
} TreeUsage;

/* How a source tree is read. Every lookup in it (stat, open, readlink) runs
 * with the filesystem uid and gid given here (setfsuid(2), setfsgid(2); the
 * caller has set the supplementary groups and is single-threaded), so that
 * only what that user may read is copied; the rest is left out and counted.
 * Everything written runs as the caller. The copy refuses to enter the
 * directory excluded_dev/excluded_ino (sbxd's state directory). */
typedef struct TreeSource {
        uid_t uid;
        gid_t gid;
        dev_t excluded_dev;
        ino_t excluded_ino;
} TreeSource;

/* What a copy found besides its result. */
typedef struct TreeReport {
        uint32_t entries;               /* non-directory entries and opaque directories copied */
        TreeUsage written;              /* what the copy wrote (hard links: the inode once) */
        TreeStop stopped;
        bool unsynced;                  /* TREE_COPY_FSYNC_FEW: more were written than it fsyncs */
        uint64_t free_bytes;            /* TREE_STOP_RESERVE: what the filesystem had left */
        uint32_t unreadable;            /* entries the reader may not read, left out */
        char unreadable_paths[SBX_IMPORT_UNREADABLE_SHOWN][SBX_PATH_SHOWN_MAX + 1]; /* the first of them */
        bool too_deep;                  /* failed: the tree is deeper than SBX_TREE_DEPTH_MAX */
        bool excluded;                  /* failed: the tree holds the excluded directory */
        char where[SBX_PATH_MAX + 1];   /* on failure: the path it stopped at, relative ("" = the top) */
} TreeReport;

/* Copy the tree under src_dirfd into the existing empty dst_dirfd. With
 * force_uid set (>= 0), every entry gets that owner; otherwise ownership is
 * kept. Regular files, directories, symlinks, fifos and whiteouts are copied;
 * sockets and devices are skipped. A sparse file stays sparse (only its data
 * is copied, SEEK_DATA/SEEK_HOLE), and the names of one regular file in the
 * tree stay names of one file (hard links). source, budget and report may
 * be NULL; report counts non-directory entries and opaque directories (the
 * changed paths of a layer) and what was written and, on failure, says where
 * (and, past the budget, which bound stopped it). */
int tree_copy(int src_dirfd, int dst_dirfd, int force_uid, unsigned flags, const TreeSource *source,
              const TreeBudget *budget, TreeReport *report);
/* What copying the tree under dirfd would write, each directory counted as
 * dir_bytes (the destination's block: a tmpfs directory allocates none). */
int tree_usage(int dirfd, uint64_t dir_bytes, TreeUsage *ret);
/* Copy one entry (and what is below it) as tree_copy does; dst must not have it. */
int tree_copy_entry(int src_dirfd, int dst_dirfd, const char *name, unsigned flags);
/* Remove name below dirfd, recursively. */
int tree_remove_at(int dirfd, const char *name);
/* Give name below dirfd (a directory) and everything in it to uid:gid,
 * without following a symlink anywhere; name itself becomes 0700. */
int tree_chown_at(int dirfd, const char *name, uid_t uid, gid_t gid);
/* true if the directory has no entry besides . and .. */
int tree_is_empty(int dirfd);

/* Build layer `seq` in layers_dirfd from the tree under src_dirfd (see
 * tree_copy, within budget), durably before its name appears: a small layer
 * (SBX_LAYER_FSYNC_MAX files and directories) fsyncs what it wrote, a larger
 * one syncs the layers' filesystem once (syncfs(2)), never an fsync per file.
 * LAYER_LINK_FILES: the tree is sbxd's own and nothing writes to it any
 * more, so its regular files become the layer's (hard links). No file of a
 * layer is setuid or setgid. A copy that fails or stops is removed. */
#define LAYER_LINK_FILES 1u
int layer_create(int layers_dirfd, uint32_t seq, int src_dirfd, int force_uid, unsigned flags,
                 const TreeSource *source, const TreeBudget *budget, TreeReport *report);

/* Open the directory at the absolute path with the source's filesystem ids
 * (see TreeSource), following no symlink on the way (openat2(2)
 * RESOLVE_NO_SYMLINKS: -ELOOP if there is one). */
int tree_source_open(const TreeSource *source, const char *path, int *ret_fd);

/* path (relative, possibly long) as quoted in a message: whole if it has at
 * most SBX_PATH_SHOWN_MAX bytes, else its start and its end around "...". */
void path_shown(const char *path, char *buf, size_t size);
/* The message for a tree deeper than SBX_TREE_DEPTH_MAX, naming the limit and
 * the directory `where` (relative) that passed it. */
void tree_depth_message(const char *where, char *buf, size_t size);
/* Remove directories of layers above top (left by a crash before their record was written),
 * temporary build directories, and anything else but keep (the squashed base). */
int layer_remove_unrecorded(int layers_dirfd, uint32_t top, const char *keep);
