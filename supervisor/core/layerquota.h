/* Layer quotas (sbxd.conf(5)): a publication is refused before anything is
 * copied when what its tree would write (st_blocks and inodes, each inode
 * once) passes sandbox_layers_max_bytes for its sandbox, owner_layers_max_bytes
 * for all sandboxes of the sandbox's owner, layers_max_inodes for all
 * sandboxes, or would leave the state filesystem with less free space than
 * state_reserve; the copy keeps within the same bounds as it goes (it may
 * race with other writers of the state filesystem) and, stopped, is removed.
 * A refusal names the limit, its value and how much was asked and used. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/config.h"
#include "data/layer.h"
#include "data/store.h"
#include "sbx.pb-c.h"

typedef struct Sandbox Sandbox;

typedef struct LayerLimits {
        uint64_t sandbox_max_bytes;     /* sandbox_layers_max_bytes */
        uint64_t owner_max_bytes;       /* owner_layers_max_bytes */
        uint64_t max_inodes;            /* layers_max_inodes */
        uint64_t state_reserve;         /* state_reserve: bytes */
        const char *state_dir;          /* named in messages; borrowed */
} LayerLimits;

/* The limits of cfg (sbxd.conf's); l borrows cfg's state_dir. The server
 * keeps them (Server.layer_limits) and passes them to each function below. */
void layer_limits_from_config(const Config *cfg, LayerLimits *l);

/* The use of sb's published layers against its quota, into its info. */
int layer_quota_info(Store *store, const LayerLimits *l, const Sandbox *sb, Sbx__SandboxInfo *ret);

/* Whether the state filesystem (fd's) keeps l's state_reserve free after want
 * bytes more; -ENOSPC with why naming it if not. */
int state_room_check(const LayerLimits *l, int fd, uint64_t want, char *why, size_t why_size);
/* why for a write that failed with -ENOSPC on the state filesystem. */
void state_full_message(const LayerLimits *l, char *why, size_t why_size);

/* The sandbox a layer is built for: copies of its fields, so that any thread
 * may build it (core/publish.h's publish_run, with its own store connection). */
typedef struct LayerTarget {
        const LayerLimits *limits;      /* borrowed; read-only once sbxd runs */
        const char *sandbox_id;
        uid_t owner_uid;
        int layers_fd;
        const atomic_bool *cancelled;   /* NULL: never; set (sbxd stops): the copy ends at its next entry */
} LayerTarget;

/* Build layer seq of t from the tree under src_dirfd (layer_create's
 * force_uid and flags) within the limits; ret_size is what it wrote. On a
 * refusal (-EDQUOT: a quota; -ENOSPC: the reserve or a full filesystem) why
 * says which limit and how much. */
int layer_create_within_quota(Store *store, const LayerTarget *t, uint32_t seq, int src_dirfd, int force_uid,
                              unsigned flags, StoreLayerSize *ret_size, char *why, size_t why_size);

/* Whether a layer of ret_size built so keeps within the quotas as they are
 * now: publications in other sandboxes of the owner may have been recorded
 * while it was built (off the loop); the same refusals. */
int layer_quota_recheck(Store *store, const LayerTarget *t, const StoreLayerSize *size, char *why, size_t why_size);
