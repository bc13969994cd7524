/* Per-owner quotas: below the global caps of sbx-limits.h, the sandboxes one
 * uid owns (Sandbox.owner_uid, their creator or sbxctl sandbox create
 * --owner) hold together at most owner_*_max of each resource (sbxd.conf(5)).
 * Root, the administrator who sets them, is exempt: its sandboxes meet the
 * global caps alone.
 *
 * One table of rows (owner_quotas[]): per quota its sbxd.conf key, what it
 * counts, where its limit is in Config and its usage function. The refusals
 * and sbxctl owner list / show (which prints every row sbxd sends) come from
 * it, so a new quota is one row and one usage function. The usage functions
 * only read the model's lists: nothing here calls back into session.c or
 * sandbox.c, which call the checks. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/server.h"

typedef struct OwnerQuota {
        const char *key;                /* sbxd.conf: "owner_sessions_max" */
        const char *what;               /* what it counts: "live workspace sessions" */
        const char *remedy;             /* what the owner can do: "finalize or discard some" */
        size_t limit_offset;            /* its uint32_t or uint64_t field of Config */
        size_t limit_size;
        bool bytes;                     /* use and limit are bytes */
        uint64_t (*used)(const Server *s, uid_t owner);
} OwnerQuota;

extern const OwnerQuota owner_quotas[];
extern const size_t n_owner_quotas;

static inline bool owner_exempt(uid_t owner) {
        return owner == 0;
}

/* The row of sbxd.conf key (a programming error if there is none). */
const OwnerQuota *owner_quota(const char *key);
uint64_t owner_quota_limit(const Server *s, const OwnerQuota *q);
/* -EDQUOT if owner's use of quota key plus more would pass its limit, with
 * ret_error (if not NULL) naming the quota, its value, the use and the owner. */
int owner_quota_check(const Server *s, const char *key, uid_t owner, uint64_t more, char *ret_error,
                      size_t error_size);
