/* Publication: a tree of workspace changes (an overlayfs upper directory, or
 * the staging directory of one file operation) becomes the sandbox's next
 * layer, with its manifest of changed paths, refused as a whole if it touches
 * a path that a layer published after its base also touched (unless
 * overwrite), and with the line attribution of every changed text file
 * updated in the same SQLite transaction as the layer's record. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/layerquota.h"
#include "data/attribution.h"
#include "data/store.h"
#include "sbx.pb-c.h"

typedef struct Sandbox Sandbox;

typedef struct PublishResult {
        bool published;
        uint32_t layer;
        uint32_t changed_paths;
        char **conflicts;                /* NULL-terminated when n_conflicts > 0 */
        size_t n_conflicts;
        char error[256];                 /* set by a failed publication that can say more than its errno */
} PublishResult;

void publish_result_done(PublishResult *r);

/* A file operation's tree: sbxd's own staging directory, holding the one
 * file the operation writes (at path), whose texts the caller already has:
 * old_text as published before (NULL if it was not read) and new_text. */
typedef struct PublishOperation {
        const char *path;
        const char *old_text;
        size_t old_len;
        const char *new_text;
        size_t new_len;
} PublishOperation;

/* A publication, in three steps, so that its heavy part runs off the loop:
 * - publish_begin, on the loop: copies what the rest needs (the sandbox's id
 *   and top layer, dup'ed fds of the tree, the layers, the state directory and
 *   the snapshot's view, op's texts); touches nothing of sb afterwards.
 * - publish_run, on any thread (common/workpool.h): the manifest, the
 *   conflict check and the attribution (read with a store connection of its
 *   own), the layer's directory (data/layer.h), then its record, with a
 *   writable connection of its own, in transactions of at most
 *   SBX_STORE_WRITE_ROWS rows (data/store.h: store_layer_begin): the row,
 *   pending, if the sandbox's top is still the one begin saw and the quotas
 *   still allow it; the paths; the attribution changes; then durably the
 *   commit, after which the layer counts. It first folds into the records
 *   what the sandbox's earlier publications left (store_blame_fold). Once
 *   *cancelled is set it stops at its next check (-ECANCELED) and removes
 *   what it recorded.
 * - publish_finish, on the loop, with run's result: the sandbox's new top
 *   layer, and compaction; or, on failure, the layer's directory removed.
 *   publish_abandon instead when the sandbox is gone or sbxd stops (a layer
 *   recorded meanwhile is removed with its record).
 * Nothing else may publish in sb between begin and finish (one lane per
 * sandbox: common/workpool.h). limits stay valid until finish; p holds a
 * reference to conns (the sbx.db connections run takes). force_uid >= 0 gives every entry that owner. With
 * op, src_dirfd is op's staged tree: its files become the layer's (hard
 * links, not copies), and the texts of op->path are not read again. On
 * failure ret->error may say why. */
typedef struct Publication Publication;
int publish_begin(Store *store, const LayerLimits *limits, Sandbox *sb, StoreConns *conns, int src_dirfd, const char *owner,
                  uint32_t base_layer, bool overwrite, int force_uid, const PublishOperation *op, Publication **ret);
int publish_run(Publication *p, const atomic_bool *cancelled);
/* Takes p (freed, also on failure). */
int publish_finish(Store *store, Sandbox *sb, Publication *p, int run_result, PublishResult *ret);
void publish_abandon(Publication *p);

/* The changed paths of a tree, in walk order (parents before children). */
typedef enum ChangeKind {
        CHANGE_FILE,
        CHANGE_SYMLINK,
        CHANGE_OTHER,       /* fifo */
        CHANGE_WHITEOUT,    /* deletion */
        CHANGE_OPAQUE_DIR,  /* a directory replacing whatever was there */
} ChangeKind;

typedef struct Change {
        char *path;
        ChangeKind kind;
} Change;

typedef struct Manifest {
        Change *changes;
        size_t n;
} Manifest;

/* On -ELOOP (a tree deeper than SBX_TREE_DEPTH_MAX), ret_too_deep (if not
 * NULL, SBX_PATH_MAX + 1 bytes) names the directory that passed the limit. */
int manifest_build(int dirfd, Manifest *ret, char *ret_too_deep);
void manifest_done(Manifest *m);

/* The attribution of a published text file: its record, "original" for a file
 * untouched since import, else "unknown". */
int blame_of_published(Store *store, const char *sandbox_id, const char *path, const char *text, size_t len,
                       Blame *ret);

/* What a session's changes (its upper directory) are against its base
 * snapshot: each changed path (added, modified or deleted) and a unified
 * diff of the UTF-8 text files, cut before SBX_DIFF_MAX_BYTES (truncated).
 * reply points into the rest; changes_diff_done frees it all. */
typedef struct ChangesDiff {
        Sbx__SessionDiffReply reply;
        Manifest manifest;
        Sbx__ChangedPath *changes;
        Sbx__ChangedPath **ptrs;
        char *diff;
} ChangesDiff;

/* view: the base snapshot's (snapshot_mount); any thread may run it. On
 * failure ret_why says why when it can say more than the errno. */
int changes_diff(int view, int upper_fd, ChangesDiff *ret, char *ret_why, size_t why_size);
void changes_diff_done(ChangesDiff *d);
