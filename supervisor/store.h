/* Durable metadata of sbxd in SQLite (STATE_DIR/sbx.db): sandboxes, their
 * published layers and command sessions. Transactions make a publication
 * appear wholly or not at all. Non-logging: returns -errno (-EIO for SQLite
 * errors, -ENOENT for missing rows, -EEXIST for duplicates). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Store Store;

typedef struct StoreSandbox {
        char name[65];
        uid_t owner_uid;
        char *source_dir;
        uint64_t memory_bytes;
        uint32_t pids_max;
        uint32_t top_layer;
        int64_t created_unix;
} StoreSandbox;

typedef struct StoreCommand {
        char id[33];
        char sandbox[65];
        char workspace_session[33];
        char status[16];
        bool has_exit_code;
        int exit_code;
        int signal;
        char end_reason[24];
        int64_t started_unix_usec;
        int64_t ended_unix_usec;
        uint64_t raw_bytes;
} StoreCommand;

int store_open(int state_dirfd, Store **ret);
Store *store_close(Store *s);

int store_sandbox_insert(Store *s, const StoreSandbox *sb, const char *layer0_owner);
int store_sandbox_delete(Store *s, const char *name);
/* Calls cb for every sandbox; cb returning < 0 stops and is returned. */
int store_sandbox_foreach(Store *s, int (*cb)(const StoreSandbox *sb, void *userdata), void *userdata);

int store_layer_insert(Store *s, const char *sandbox, uint32_t seq, const char *owner,
                       uint32_t changed_paths, int64_t created_unix);

int store_command_insert(Store *s, const StoreCommand *c);
int store_command_finish(Store *s, const StoreCommand *c);
int store_command_get(Store *s, const char *id, StoreCommand *ret);
/* Running commands of a previous sbxd are ended as supervisor_lost. */
int store_commands_mark_lost(Store *s, int64_t now_unix_usec, unsigned *ret_count);
