/* Layers on disk: immutable directories of workspace changes, in overlayfs
 * format (whiteouts are 0/0 character devices, opaque directories carry
 * trusted.overlay.opaque=y). A layer is built under a temporary name, synced,
 * then renamed to its sequence number, so after a crash it is either wholly
 * present or absent. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SBX_TREE_DEPTH_MAX 256u   /* deeper trees are refused, not recursed into */

typedef enum TreeCopyFlags {
        TREE_COPY_HARDLINK = 1 << 0,        /* link regular files instead of copying them (they keep their
                                               inode's owner, mode and times; copied across filesystems) */
        TREE_COPY_DROP_WHITEOUTS = 1 << 1,  /* for a bottom layer: no whiteouts, no opaque marks */
        TREE_COPY_FSYNC = 1 << 2,           /* fsync each file and directory written */
} TreeCopyFlags;

/* Copy the tree under src_dirfd into the existing empty dst_dirfd. With
 * force_uid set (>= 0), every entry gets that owner; otherwise ownership is
 * kept. Regular files, directories, symlinks, fifos and whiteouts are copied;
 * sockets and devices are skipped. ret_entries counts non-directory entries
 * and opaque directories (the changed paths of a layer). */
int tree_copy(int src_dirfd, int dst_dirfd, int force_uid, unsigned flags, uint32_t *ret_entries);
/* Copy one entry (and what is below it) as tree_copy does; dst must not have it. */
int tree_copy_entry(int src_dirfd, int dst_dirfd, const char *name, unsigned flags);
/* Remove name below dirfd, recursively. */
int tree_remove_at(int dirfd, const char *name);
/* true if the directory has no entry besides . and .. */
int tree_is_empty(int dirfd);

/* Build layer `seq` in layers_dirfd from the tree under src_dirfd (see tree_copy),
 * durably before its name appears. Small layers (publications) fsync what they
 * write; LAYER_SYNC_FILESYSTEM (an imported tree of any size) syncs the whole
 * filesystem once instead. LAYER_LINK_FILES: the tree is sbxd's own and
 * nothing writes to it any more, so its regular files become the layer's
 * (hard links, fsynced like copies). */
#define LAYER_SYNC_FILESYSTEM 1u
#define LAYER_LINK_FILES 2u
int layer_create(int layers_dirfd, uint32_t seq, int src_dirfd, int force_uid, unsigned flags,
                 uint32_t *ret_entries);
/* Remove directories of layers above top (left by a crash before their record was written),
 * temporary build directories, and anything else but keep (the squashed base). */
int layer_remove_unrecorded(int layers_dirfd, uint32_t top, const char *keep);
