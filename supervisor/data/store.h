/* Durable metadata of sbxd in SQLite (STATE_DIR/sbx.db): sandboxes, their
 * published layers and command sessions. Every record of a sandbox is keyed
 * by the sandbox's id, which is never reused (its name may be, after a
 * delete). Transactions make a publication appear wholly or not at all, and
 * a sandbox's records go wholly with it. Non-logging: returns -errno (-EIO
 * for SQLite errors, -ENOENT for missing rows, -EEXIST for duplicates). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Store Store;

#define SBX_SANDBOX_ID_SIZE 20  /* "sb-" and 16 hex digits, and the NUL */

typedef struct StoreSandbox {
        char id[SBX_SANDBOX_ID_SIZE];
        char name[65];
        uid_t owner_uid;
        char *source_dir;
        uint64_t memory_bytes;
        uint32_t pids_max;
        uint32_t cpu_weight;
        uint32_t top_layer;
        int64_t created_unix;
        char egress[24];                /* its network policy's name; "": none */
} StoreSandbox;

/* A sandbox's host id range (uidrange.h). */
typedef struct StoreUidRange {
        char sandbox[SBX_SANDBOX_ID_SIZE];     /* the sandbox's id */
        uint32_t base, count;
        bool shifting;                  /* its files still move from shift_from */
        uint32_t shift_from;
} StoreUidRange;

typedef struct StoreCommand {
        char id[33];
        char sandbox[SBX_SANDBOX_ID_SIZE];     /* the sandbox's id */
        char workspace_session[33];
        char status[16];
        bool has_exit_code;
        int exit_code;
        int signal;
        char end_reason[24];
        int64_t started_unix_usec;
        int64_t ended_unix_usec;
        uint64_t raw_bytes;
        uint64_t transcript_bytes;      /* what its transcript stores (transcript_stored_bytes) */
        int transcript_files;           /* its files; -1: not counted yet */
        char evicted[128];              /* "": its transcript is kept; else the budget it was evicted for */
} StoreCommand;

/* Opens (or creates) sbx.db; a database of an older schema is migrated first. */
int store_open(int state_dirfd, Store **ret);
/* The schema version store_open migrated from, or 0 if it did not migrate. */
unsigned store_migrated_from(const Store *s);
Store *store_close(Store *s);
static inline void store_closep(Store **s) {
        *s = store_close(*s);
}
/* Connections kept for work off the loop (the publications' records, the
 * checkpoints), so that one does not pay for opening one (the schema read,
 * and a writer's first durable commit syncing the state directory): at most
 * SBX_STORE_CONNS_KEPT of each kind wait for reuse. Thread-safe; a
 * connection is used by one thread at a time. Counted references: each work
 * that may outlive the loop's (a run left at exit) holds one. */
typedef struct StoreConns StoreConns;
/* The first reference is the caller's. */
int store_conns_new(int state_dirfd, StoreConns **ret);
StoreConns *store_conns_ref(StoreConns *c);
/* NULL-safe; returns NULL. The last closes the kept connections. */
StoreConns *store_conns_unref(StoreConns *c);
/* A kept connection, or a new one: with writer, writable (the publication's
 * record, core/publish.h, in transactions short enough that the loop's own
 * writes wait at most one of them), else read-only; either sees what the
 * loop's connection committed. */
int store_conns_take(StoreConns *c, bool writer, Store **ret);
/* s (NULL-safe) goes back to be kept, or is closed. */
void store_conns_put(StoreConns *c, Store *s);

int store_sandbox_insert(Store *s, const StoreSandbox *sb, const char *layer0_owner);
/* In one transaction: the sandbox and all its records. cb gets the id of each
 * of its commands first (their transcripts are the caller's to remove, after). */
int store_sandbox_delete(Store *s, const char *id, int (*cb)(const char *command, void *userdata),
                         void *userdata);
/* Calls cb for every sandbox; cb returning < 0 stops and is returned. */
int store_sandbox_foreach(Store *s, int (*cb)(const StoreSandbox *sb, void *userdata), void *userdata);

/* What a layer takes on disk: allocated bytes (st_blocks) and inodes. */
typedef struct StoreLayerSize {
        uint64_t bytes;
        uint64_t inodes;
} StoreLayerSize;

/* Below, `sandbox` is a sandbox's id. size NULL: 0 and 0. */
int store_layer_insert(Store *s, const char *sandbox, uint32_t seq, const char *owner, uint32_t changed_paths,
                       int64_t created_unix, const StoreLayerSize *size);
/* The sizes of the published layers (all but each sandbox's imported layer
 * 0) of one sandbox, of all sandboxes of one owner, and of all sandboxes. */
typedef struct StoreLayersSize {
        StoreLayerSize sandbox, owner, all;
} StoreLayersSize;
int store_layers_size(Store *s, const char *sandbox, uid_t owner, StoreLayersSize *ret);
/* The first of those alone (cheaper: one sandbox's rows). */
int store_sandbox_layers_size(Store *s, const char *sandbox, StoreLayerSize *ret);

int store_command_insert(Store *s, const StoreCommand *c, const char *cmd);
int store_command_finish(Store *s, const StoreCommand *c);
/* An ended command's egress audit (core/egress.h), as bytes the caller packs;
 * get gives a copy (malloc'ed), or -ENOENT if it has none. */
int store_command_egress_set(Store *s, const char *id, const void *audit, size_t len);
int store_command_egress_get(Store *s, const char *id, void **ret, size_t *ret_len);
int store_command_get(Store *s, const char *id, StoreCommand *ret);
/* Commands of a sandbox (or of one workspace session when ws is non-NULL), oldest first. */
int store_command_foreach(Store *s, const char *sandbox, const char *ws,
                          int (*cb)(const StoreCommand *c, const char *cmd, void *userdata), void *userdata);
/* Ids of commands, collected by a foreach callback: store_id_list_add. */
typedef struct StoreIdList {
        char (*ids)[sizeof(((StoreCommand *) NULL)->id)];
        size_t n, cap;
} StoreIdList;
int store_id_list_add(const char *id, void *userdata);

/* A command's transcript: its size, counted; evicted for the budget reason
 * (its size then 0). */
int store_command_set_transcript(Store *s, const char *id, uint64_t bytes, int files);
int store_command_evict(Store *s, const char *id, const char *reason);
/* A command that never ran moved to another session (core/session.h). */
int store_command_set_session(Store *s, const char *id, const char *workspace_session);
/* The oldest ended command whose transcript is kept: of sandbox if not NULL,
 * else of the sandboxes of owner if owner >= 0, else of all; -ENOENT if none. */
int store_transcript_oldest(Store *s, const char *sandbox, int64_t owner, StoreCommand *ret);
/* Per sandbox, the bytes and files of the transcripts kept, as recorded. */
int store_transcript_usage_foreach(Store *s, int (*cb)(const char *sandbox, uint64_t bytes, uint64_t files,
                                                       void *userdata), void *userdata);
/* The commands whose transcript is kept but not counted (running when an
 * earlier sbxd stopped, or from before sizes were recorded). */
int store_transcript_unknown_foreach(Store *s, int (*cb)(const char *id, void *userdata), void *userdata);
/* 1 if a command of that id is recorded, else 0. */
int store_command_exists(Store *s, const char *id);
/* 1 if it is recorded and its transcript was not evicted, else 0. */
int store_transcript_kept(Store *s, const char *id);
/* Artifacts (issue 19, core/artifacts.h): a persisted runtime_execute's
 * command, whose transcript is kept under an unguessable handle until
 * expires_usec (wall clock), bound to its owner's uid. */
typedef struct StoreArtifact {
        char handle[48];
        uid_t owner_uid;
        char sandbox[SBX_SANDBOX_ID_SIZE];
        char command[33];
        int64_t created_usec, expires_usec;
        uint64_t bytes;                 /* its transcript's stored bytes, uncompressed */
} StoreArtifact;

int store_artifact_insert(Store *s, const StoreArtifact *a);
/* -ENOENT if there is none of that handle. */
int store_artifact_get(Store *s, const char *handle, StoreArtifact *ret);
/* The oldest artifact that expires at or before expired_before_usec
 * (INT64_MAX: the oldest of all), or -ENOENT. */
int store_artifact_oldest(Store *s, int64_t expired_before_usec, StoreArtifact *ret);
int store_artifact_delete(Store *s, const char *handle);
/* The artifact's transcript was compressed: it stores bytes now (a new table,
 * artifact_packed, that goes with the artifact). */
int store_artifact_set_packed(Store *s, const char *handle, uint64_t bytes);
/* Every artifact not compressed yet, oldest first; cb < 0 stops with it. */
int store_artifact_unpacked_foreach(Store *s, int (*cb)(const StoreArtifact *a, void *userdata), void *userdata);
/* How many artifacts (of owner_uid, or of all if < 0), the bytes they store
 * (compressed, where they are) and the same uncompressed (ret_raw_bytes may be NULL). */
int store_artifacts_usage(Store *s, int64_t owner_uid, unsigned *ret_count, uint64_t *ret_bytes,
                          uint64_t *ret_raw_bytes);

/* 1 if a sandbox of that id, or of that name, is recorded, else 0. */
int store_sandbox_known(Store *s, const char *id_or_name);

/* A write transaction; _durable: one that reaches the disk before its commit
 * returns (what makes a publication's layer count). Both end in store_commit
 * or store_rollback. */
int store_begin(Store *s);
int store_begin_durable(Store *s);
/* Outside a transaction: what was committed is copied from the WAL into the
 * database (a passive checkpoint), without holding the write lock. */
int store_sync(Store *s);
/* Once a commit of s left pages or more in the WAL, checkpoint(userdata) is
 * called (from that commit) instead of s checkpointing there itself: the
 * caller has another connection do it (store_sync) on another thread. */
void store_checkpoint_elsewhere(Store *s, unsigned pages, void (*checkpoint)(void *userdata), void *userdata);
int store_commit(Store *s);
void store_rollback(Store *s);
/* A layer's record in steps: store_layer_begin writes its row, pending, and
 * everything else of it (paths, store_blame_pending_insert) may follow in
 * later transactions; no reader sees any of it (its paths, its attribution,
 * in store_layer_foreach) until store_layer_commit. store_layer_discard
 * removes a layer above 0 (pending or not) and all its rows; store_open,
 * the pending ones an earlier sbxd left. Its size counts in the quotas from store_layer_begin on. */
int store_layer_begin(Store *s, const char *sandbox, uint32_t seq, const char *owner, uint32_t changed_paths,
                      int64_t created_unix, const StoreLayerSize *size);
int store_layer_commit(Store *s, const char *sandbox, uint32_t seq);
int store_layer_discard(Store *s, const char *sandbox, uint32_t seq);
/* The sandbox's highest layer recorded, pending ones included. */
int store_layer_top(Store *s, const char *sandbox, uint32_t *ret);
/* The n paths layer seq changed (one prepared statement for all of them). */
int store_layer_paths_insert(Store *s, const char *sandbox, uint32_t seq, const char *const *paths, size_t n);
/* Paths changed by layers above seq, each once. */
int store_paths_changed_after(Store *s, const char *sandbox, uint32_t seq,
                              int (*cb)(const char *path, void *userdata), void *userdata);
/* Whether any layer above 0 changed path or an ancestor of it. */
int store_path_changed_since_import(Store *s, const char *sandbox, const char *path);
int store_layer_foreach(Store *s, const char *sandbox,
                        int (*cb)(uint32_t seq, const char *owner, uint32_t changed, int64_t created, void *userdata),
                        void *userdata);

/* Attribution records: the serialized ranges of attribution.h. */
int store_blame_get(Store *s, const char *sandbox, const char *path, char **ret_ranges);
/* A publication's changes to them, applied in order: ranges set (the
 * record of path is replaced), or NULL: the record of path goes, and with
 * tree, every record below path too. */
typedef struct StoreBlameOp {
        char *path;
        char *ranges;
        bool tree;
} StoreBlameOp;
int store_blame_apply(Store *s, const char *sandbox, const StoreBlameOp *ops, size_t n);
/* A pending layer's changes to them, ops[0] being its change number first:
 * once the layer is committed, store_blame_get reads them before the
 * records, until store_blame_fold applied them (at most max, the oldest
 * first; *ret_folded: how many; 0: none left). */
int store_blame_pending_insert(Store *s, const char *sandbox, uint32_t seq, size_t first, const StoreBlameOp *ops,
                               size_t n);
int store_blame_fold(Store *s, const char *sandbox, size_t max, size_t *ret_folded);

int store_squash_get(Store *s, const char *sandbox, uint32_t *ret);
int store_squash_set(Store *s, const char *sandbox, uint32_t squashed);

/* Host id ranges, lowest base first; orphans_only: those whose sandbox has no record. */
int store_uid_range_foreach(Store *s, bool orphans_only, int (*cb)(const StoreUidRange *r, void *userdata),
                            void *userdata);
/* Each durable on return: insert (-EEXIST if the sandbox or the base has one),
 * end the shift, delete (-ENOENT if there is no row). */
int store_uid_range_insert(Store *s, const StoreUidRange *u);
int store_uid_range_shifted(Store *s, const char *sandbox);
int store_uid_range_delete(Store *s, const char *sandbox);

/* Running commands of a previous sbxd are ended as supervisor_lost. */
int store_commands_mark_lost(Store *s, int64_t now_unix_usec, unsigned *ret_count);

/* ---- claims (issue 16): the lifecycle set's sandboxes --------------------------- */

/* A claim's row; strings and info borrowed. info is a packed sbx.ClaimInfo
 * (the store does not look into it). uid -1: a warm claim, nobody's yet. */
typedef struct StoreClaim {
        const char *sandbox;            /* the sandbox's id: the claim goes with the sandbox */
        const char *namespace_;
        const char *name;
        int64_t uid;
        int64_t last_used_unix;
        const void *info;
        size_t info_len;
} StoreClaim;

int store_claim_put(Store *s, const StoreClaim *c);
int store_claim_touch(Store *s, const char *sandbox, int64_t last_used_unix);
int store_claim_foreach(Store *s, int (*cb)(const StoreClaim *c, void *userdata), void *userdata);
/* Why a claim of that owner went; -ENOENT if none is remembered. */
int store_claim_tombstone_put(Store *s, const char *ns, const char *name, int64_t uid, const char *mcp_session,
                              const char *reason, int64_t at_unix);
int store_claim_tombstone_get(Store *s, const char *ns, const char *name, int64_t uid, const char *mcp_session,
                              char *ret_reason, size_t size);
int store_sandbox_set_owner(Store *s, const char *id, uid_t owner_uid);

/* ---- jobs (issue 18): the script set's sandbox_script calls ------------------------ */

/* A job's row: info is a packed sbx.JobInfo (the store does not look into it). */
int store_job_put(Store *s, const char *id, int64_t uid, const void *info, size_t info_len);
int store_job_delete(Store *s, const char *id);
/* A row of jobs or boxes (id, uid, packed info), to a foreach's callback. */
typedef int (*StoreRowFn)(const char *id, int64_t uid, const void *info, size_t info_len, void *userdata);
int store_job_foreach(Store *s, StoreRowFn cb, void *userdata);
/* A box's row (core/box.h): info is a packed sbx.BoxInfo; it goes with the sandbox. */
int store_box_put(Store *s, const char *id, int64_t uid, const char *sandbox, const void *info, size_t info_len);
int store_box_foreach(Store *s, StoreRowFn cb, void *userdata);
/* Bearer tokens of sbx-gateway (core/token.h): hash is the SHA-256 of the
 * secret; expires_unix 0: never. A name is unique (-EEXIST). */
typedef struct StoreToken {
        const char *id;
        const char *name;
        int64_t owner_uid;
        const void *hash;
        size_t hash_len;
        const char *sets;
        int64_t created_unix;
        int64_t expires_unix;
} StoreToken;

int store_token_insert(Store *s, const StoreToken *t);
int store_token_delete(Store *s, const char *id);
int store_token_foreach(Store *s, int (*cb)(const StoreToken *t, void *userdata), void *userdata);

/* Secrets of the boxes set (core/secret.h), per owner uid. */
typedef struct StoreSecret {
        const char *name;
        const void *value;              /* store_secret_foreach with values only */
        size_t len;
        int64_t updated_unix;
} StoreSecret;

/* Sets (or replaces) owner_uid's secret name. */
int store_secret_put(Store *s, int64_t owner_uid, const char *name, const void *value, size_t len,
                     int64_t updated_unix);
/* -ENOENT: owner_uid has no secret name. */
int store_secret_delete(Store *s, int64_t owner_uid, const char *name);
/* owner_uid's secrets by name; their values only with values (borrowed for the call). */
int store_secret_foreach(Store *s, int64_t owner_uid, bool values,
                         int (*cb)(const StoreSecret *secret, void *userdata), void *userdata);

/* Versions of the boxes set (core/version.h): info is a packed sbx.VersionInfo. */
int store_version_put(Store *s, const char *id, int64_t owner_uid, const void *info, size_t len);
int store_version_delete(Store *s, const char *id);
/* Every version, oldest first. */
int store_version_foreach(Store *s, StoreRowFn cb, void *userdata);
