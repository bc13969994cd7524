/* Sandboxes: their records, their directories (STATE/sandboxes/ID/layers/N),
 * their creation and deletion. A new sandbox's source is imported by a helper
 * process, sbx-worker --import, which reads it with the owner's filesystem
 * ids and groups and never follows a symlink in it (data/layer.h:
 * TreeSource); sbxd answers the creator once the helper is done, and serves
 * everyone else meanwhile. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "core/client.h"
#include "core/server.h"
#include "core/snapshot.h"
#include "data/store.h"

struct Sandbox {
        TAILQ_ENTRY(Sandbox) link;
        char id[SBX_SANDBOX_ID_SIZE];   /* immutable: keys its records and names STATE/sandboxes/ID */
        char name[65];
        char image[65];             /* "default" or an image's name (core/imagebuild.h); file STATE/sandboxes/ID/image */
        uid_t owner_uid;
        uid_t uid_base;             /* its host ids: [uid_base, uid_base + uid_count) (os/uidrange.h) */
        uint32_t uid_count;
        char *source_dir;
        char *layers_path;          /* STATE/sandboxes/ID/layers: overlay options name layers by path */
        uint64_t memory_bytes;
        uint32_t pids_max;
        uint32_t cpu_weight;        /* 1..10000, cgroup CPU share (100 = default) */
        uint32_t top_layer;
        int64_t created_unix;
        int dirfd;
        int layers_fd;
        unsigned live_sessions;     /* including spares */
        unsigned spares;            /* spare sessions set up ahead (core/spare.h) */
        bool refill_spares;         /* an automatic session ended without publishing: spares next tick */
        uint32_t squashed;          /* layers 0..squashed live merged in layers/squash-N */
        int view_fd;                /* detached read-only overlay of the snapshot at view_top */
        uint32_t view_top;
        dev_t view_dev;             /* st_dev of the view's files, shown with their real inode numbers; 0: unknown */
        dev_t layers_dev;           /* st_dev of the layers' filesystem */
        TAILQ_HEAD(, SnapshotHold) holds; /* of its sessions, live and ending */
};

int sandboxes_load(Server *s);
/* Free the host id ranges of sandboxes without a record, after their files;
 * returns how many were freed. */
unsigned sandbox_ranges_collect(Server *s);
Sandbox *sandbox_find(Server *s, const char *name);
/* Whether uid may use sb: its owner and root may. */
static inline bool sandbox_allows(const Sandbox *sb, uid_t uid) {
        return uid == 0 || uid == sb->owner_uid;
}
/* Start creating a sandbox for the client c (uid its caller); once its source
 * is imported c is answered (seq). Fails at once with ret_error set. */
int sandbox_create(Server *s, const Sbx__SandboxCreate *req, Client *c, uint32_t seq, char *ret_error,
                   size_t error_size);
/* Delete the sandbox and all its records; its files go after the commit. */
int sandbox_delete(Server *s, Sandbox *sb);
void sandbox_info(const Sandbox *sb, Sbx__SandboxInfo *ret);
/* Remove directories of sandboxes that have no record (a crash during a
 * delete or a create); returns how many went. */
unsigned sandbox_dirs_collect(Server *s);
/* Stop the imports still running (sbxd is stopping); nothing of them stays. */
void imports_free(Server *s);
void sandboxes_free(Server *s);
bool name_is_valid(const char *name);
