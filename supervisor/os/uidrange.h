/* Host id ranges of sandboxes (issue 13). Each sandbox owns the host uids
 * and gids [base, base + count): root inside its sessions is host uid base,
 * its sessions create their user namespace as that uid (so the kernel
 * charges their per-user budgets, /proc/sys/user and RLIMIT_MSGQUEUE,
 * RLIMIT_SIGPENDING, to it) and its layers' files carry ids of that range.
 * The pool is [uid_base, SBX_IMAGE_BUILD_UID_BASE) of sbxd.conf (the ids
 * above, to SBX_UID_POOL_END, are the image builds'), cut in ranges of
 * uid_count ids; sbx.db records which sandbox has which range (store.h),
 * from before its first file exists until after its last one is gone. A
 * sandbox created before ranges were recorded had the pool's first range
 * like every other: one of them keeps it, the others move to a new range.
 * Non-logging. */
#pragma once

#include <stdint.h>

#include "data/store.h"

/* The lowest range uid_base + k * count (k >= 0) that ends at or below
 * SBX_IMAGE_BUILD_UID_BASE and overlaps no recorded range; -ENOSPC if there is none. */
int uid_range_find_free(Store *st, uint32_t uid_base, uint32_t count, uint32_t *ret_base);

/* Move every owner and group in [from, from + count) found below dirfd
 * (dirfd itself is left alone) to the same offset from to; modes stay. Ids
 * outside the range are kept, so after a crash it can run again over a
 * half-moved tree. (Layers carry no ACLs or file capabilities: tree_copy
 * copies none.) depth_max bounds the directory nesting (-ELOOP beyond). */
int uid_tree_shift(int dirfd, uint32_t from, uint32_t to, uint32_t count, unsigned depth_max);
