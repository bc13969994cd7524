#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/statvfs.h>

#include "core/layerquota.h"
#include "core/sandbox.h"
#include "macro.h"
#include "sbx-limits.h"

void layer_limits_from_config(const Config *cfg, LayerLimits *l) {
        *l = (LayerLimits) {
                .sandbox_max_bytes = cfg->sandbox_layers_max_bytes, .owner_max_bytes = cfg->owner_layers_max_bytes,
                .max_inodes = cfg->layers_max_inodes, .state_reserve = cfg->state_reserve,
                .state_dir = cfg->state_dir,
        };
}

int layer_quota_info(Store *store, const LayerLimits *l, const Sandbox *sb, Sbx__SandboxInfo *ret) {
        StoreLayerSize size;
        int r = store_sandbox_layers_size(store, sb->id, &size);

        if (r < 0)
                return r;
        ret->layers_bytes = size.bytes;
        ret->layers_inodes = size.inodes;
        ret->layers_max_bytes = l->sandbox_max_bytes;
        return 0;
}

static uint64_t room(uint64_t max, uint64_t used) {
        return used >= max ? 0 : max - used;
}

/* The refusal of a tree of `want` against a limit of value max with `used` taken. */
static int refuse(int err, char *why, size_t size, const char *what, const char *key, uint64_t max, uint64_t used,
                  uint64_t want, const char *unit) {
        snprintf(why, size, "%s would pass %s (%" PRIu64 " %s): %" PRIu64 " %s used, this publication adds %" PRIu64
                 " %s", what, key, max, unit, used, unit, want, unit);
        return err;
}

static int room_check(const LayerLimits *l, uint64_t free_bytes, uint64_t want, char *why, size_t size) {
        if (want <= room(free_bytes, l->state_reserve))
                return 0;
        snprintf(why, size, "the state filesystem (%.100s) would fall below state_reserve (%" PRIu64 " bytes): %" PRIu64
                 " bytes free, this publication adds %" PRIu64 " bytes", l->state_dir, l->state_reserve,
                 free_bytes, want);
        return -ENOSPC;
}

int state_room_check(const LayerLimits *l, int fd, uint64_t want, char *why, size_t why_size) {
        struct statvfs sv;

        if (fstatvfs(fd, &sv) < 0)
                return -errno;
        return room_check(l, (uint64_t) sv.f_bavail * sv.f_frsize, want, why, why_size);
}

void state_full_message(const LayerLimits *l, char *why, size_t why_size) {
        snprintf(why, why_size, "the state filesystem (%.100s) is full", l->state_dir);
}

/* Whether a tree that writes want keeps within the quotas, or a refusal. */
static int quota_check(const LayerLimits *l, const StoreLayersSize *used, const TreeUsage *want, char *why,
                       size_t size) {
        if (want->bytes > room(l->sandbox_max_bytes, used->sandbox.bytes))
                return refuse(-EDQUOT, why, size, "the sandbox's layers", "sandbox_layers_max_bytes",
                              l->sandbox_max_bytes, used->sandbox.bytes, want->bytes, "bytes");
        if (want->bytes > room(l->owner_max_bytes, used->owner.bytes))
                return refuse(-EDQUOT, why, size, "the layers of the owner's sandboxes", "owner_layers_max_bytes",
                              l->owner_max_bytes, used->owner.bytes, want->bytes, "bytes");
        if (want->inodes > room(l->max_inodes, used->all.inodes))
                return refuse(-EDQUOT, why, size, "the layers of all sandboxes", "layers_max_inodes", l->max_inodes,
                              used->all.inodes, want->inodes, "inodes");
        return 0;
}

/* The budget of a tree that writes want, or a refusal. */
static int budget_for(const LayerLimits *l, const StoreLayersSize *used, const TreeUsage *want, uint64_t free_bytes,
                      TreeBudget *ret, char *why, size_t size) {
        int r = quota_check(l, used, want, why, size);

        if (r < 0)
                return r;
        if (room_check(l, free_bytes, want->bytes, why, size) < 0)
                return -ENOSPC;
        *ret = (TreeBudget) {
                .max_bytes = MIN(room(l->sandbox_max_bytes, used->sandbox.bytes),
                                 room(l->owner_max_bytes, used->owner.bytes)),
                .max_inodes = room(l->max_inodes, used->all.inodes),
                .reserve_bytes = l->state_reserve,
        };
        return 0;
}

/* Why a copy that failed within budget did. */
static void stopped_message(const LayerLimits *l, int r, const TreeReport *rep, const TreeBudget *b,
                            const StoreLayersSize *used, const TreeUsage *want, char *why, size_t size) {
        switch (rep->stopped) {
        case TREE_STOP_BYTES:
                snprintf(why, size, "the layer passed its quota while it was copied: sandbox_layers_max_bytes %" PRIu64
                         ", owner_layers_max_bytes %" PRIu64 " (%" PRIu64 " and %" PRIu64 " bytes used before, %" PRIu64
                         " allowed)", l->sandbox_max_bytes, l->owner_max_bytes, used->sandbox.bytes,
                         used->owner.bytes, b->max_bytes);
                break;
        case TREE_STOP_INODES:
                snprintf(why, size, "the layer passed layers_max_inodes (%" PRIu64 ") while it was copied: %" PRIu64
                         " inodes used before", l->max_inodes, used->all.inodes);
                break;
        case TREE_STOP_RESERVE:
                snprintf(why, size, "the state filesystem (%.100s) fell below state_reserve (%" PRIu64
                         " bytes) while the layer was copied: %" PRIu64 " bytes free, this publication adds %" PRIu64
                         " bytes; the copy was removed", l->state_dir, l->state_reserve, rep->free_bytes,
                         want->bytes);
                break;
        case TREE_STOP_NONE:
                if (r == -ENOSPC || r == -EDQUOT)
                        state_full_message(l, why, size);
                break;
        }
}

int layer_create_within_quota(Store *store, const LayerTarget *t, uint32_t seq, int src_dirfd, int force_uid,
                              unsigned flags, StoreLayerSize *ret_size, char *why, size_t why_size) {
        StoreLayersSize used;
        TreeUsage want;
        TreeBudget budget;
        TreeReport rep;
        struct statvfs sv;
        int r;

        if (fstatvfs(t->layers_fd, &sv) < 0)
                return -errno;
        r = tree_usage(src_dirfd, sv.f_bsize, &want);
        if (r >= 0)
                r = store_layers_size(store, t->sandbox_id, t->owner_uid, &used);
        if (r >= 0)
                r = budget_for(t->limits, &used, &want, (uint64_t) sv.f_bavail * sv.f_frsize, &budget, why, why_size);
        if (r < 0)
                return r;
        budget.cancelled = t->cancelled;
        r = layer_create(t->layers_fd, seq, src_dirfd, force_uid, flags, NULL, &budget, &rep);
        if (r < 0) {
                stopped_message(t->limits, r, &rep, &budget, &used, &want, why, why_size);
                return r;
        }
        *ret_size = (StoreLayerSize) { .bytes = rep.written.bytes, .inodes = rep.written.inodes };
        return 0;
}

int layer_quota_recheck(Store *store, const LayerTarget *t, const StoreLayerSize *size, char *why, size_t why_size) {
        StoreLayersSize used;
        int r = store_layers_size(store, t->sandbox_id, t->owner_uid, &used);

        if (r < 0)
                return r;
        return quota_check(t->limits, &used, &(TreeUsage) { .bytes = size->bytes, .inodes = size->inodes }, why,
                           why_size);
}
