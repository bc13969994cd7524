#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "macro.h"
#include "data/store.h"
#include "sbx-limits.h"

struct Store {
        sqlite3 *db;
        unsigned migrated_from;         /* the schema version store_open migrated from, or 0 */
};

/* Schema 2: every record of a sandbox is keyed by its immutable id (a name
 * may be reused after a delete) and goes with it (ON DELETE CASCADE).
 * Schema 3: a command's transcript size (bytes, files; -1 files: not known
 * yet) and, once it was evicted, the budget it was evicted for; each
 * layer's allocated bytes and inodes (layer quotas).
 * Schema 4: the bearer tokens of sbx-gateway (only each token's SHA-256). */
#define SCHEMA_VERSION 4
static const char schema[] =
        "CREATE TABLE IF NOT EXISTS sandboxes ("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, owner_uid INTEGER NOT NULL, source_dir TEXT NOT NULL,"
        "  memory_bytes INTEGER NOT NULL, pids_max INTEGER NOT NULL,"
        "  created_unix INTEGER NOT NULL, cpu_weight INTEGER NOT NULL DEFAULT 100);"
        "CREATE TABLE IF NOT EXISTS layers ("
        "  sandbox TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL, owner TEXT NOT NULL, changed_paths INTEGER NOT NULL,"
        "  created_unix INTEGER NOT NULL, bytes INTEGER NOT NULL DEFAULT 0, inodes INTEGER NOT NULL DEFAULT 0,"
        "  PRIMARY KEY (sandbox, seq));"
        "CREATE TABLE IF NOT EXISTS commands ("
        "  id TEXT PRIMARY KEY, sandbox TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  workspace_session TEXT NOT NULL,"
        "  status TEXT NOT NULL, exit_code INTEGER, signal INTEGER NOT NULL DEFAULT 0,"
        "  end_reason TEXT NOT NULL DEFAULT '', started_usec INTEGER NOT NULL,"
        "  ended_usec INTEGER NOT NULL DEFAULT 0, raw_bytes INTEGER NOT NULL DEFAULT 0,"
        "  cmd TEXT NOT NULL DEFAULT '',"
        "  transcript_bytes INTEGER NOT NULL DEFAULT 0, transcript_files INTEGER NOT NULL DEFAULT -1,"
        "  evicted TEXT NOT NULL DEFAULT '');"
        "CREATE INDEX IF NOT EXISTS commands_by_sandbox ON commands(sandbox, started_usec);"
        /* Eviction candidates, oldest first: ended commands whose transcript is kept. */
        "CREATE INDEX IF NOT EXISTS commands_kept ON commands(started_usec)"
        "  WHERE evicted = '' AND status != 'running';"
        "CREATE INDEX IF NOT EXISTS commands_kept_by_sandbox ON commands(sandbox, started_usec)"
        "  WHERE evicted = '' AND status != 'running';"
        /* The sizes of each sandbox's layers above 0 together, kept by a trigger:
         * quota checks read one row per sandbox, not every layer. */
        "CREATE TABLE IF NOT EXISTS layer_totals ("
        "  sandbox TEXT PRIMARY KEY REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  bytes INTEGER NOT NULL, inodes INTEGER NOT NULL);"
        "CREATE TRIGGER IF NOT EXISTS layer_totals_add AFTER INSERT ON layers WHEN NEW.seq > 0 BEGIN"
        "  INSERT INTO layer_totals VALUES (NEW.sandbox, NEW.bytes, NEW.inodes) ON CONFLICT (sandbox) DO"
        "  UPDATE SET bytes = bytes + excluded.bytes, inodes = inodes + excluded.inodes; END;"
        /* The paths each layer changed: conflict checks and the original/unknown decision of blame. */
        "CREATE TABLE IF NOT EXISTS layer_paths ("
        "  sandbox TEXT NOT NULL, seq INTEGER NOT NULL, path TEXT NOT NULL,"
        "  FOREIGN KEY (sandbox, seq) REFERENCES layers(sandbox, seq) ON DELETE CASCADE);"
        "CREATE INDEX IF NOT EXISTS layer_paths_by_seq ON layer_paths(sandbox, seq);"
        "CREATE INDEX IF NOT EXISTS layer_paths_by_path ON layer_paths(sandbox, path);"
        /* Current line attribution of each published text file. */
        "CREATE TABLE IF NOT EXISTS blame ("
        "  sandbox TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  path TEXT NOT NULL, ranges TEXT NOT NULL, PRIMARY KEY (sandbox, path));"
        /* Layers 0..squashed are merged into one directory (compaction). */
        "CREATE TABLE IF NOT EXISTS squashes ("
        "  sandbox TEXT PRIMARY KEY REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  squashed INTEGER NOT NULL);"
        /* Host id ranges (uidrange.c), by sandbox id: a row outlives its sandbox's
         * record until the sandbox's files are gone; shift_from is set while its
         * files move from there. */
        "CREATE TABLE IF NOT EXISTS uid_ranges ("
        "  sandbox TEXT PRIMARY KEY, base INTEGER NOT NULL UNIQUE, count INTEGER NOT NULL,"
        "  shift_from INTEGER);"
        /* Claims (issue 16): a sandbox of the lifecycle set, its owner (uid and MCP
         * session) and the rest of it as a packed sbx.ClaimInfo; a warm claim has
         * no owner yet (uid -1). Created in existing schema-2 databases too. */
        "CREATE TABLE IF NOT EXISTS claims ("
        "  sandbox TEXT PRIMARY KEY REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  namespace TEXT NOT NULL, name TEXT NOT NULL, uid INTEGER NOT NULL,"
        "  last_used_unix INTEGER NOT NULL, info BLOB NOT NULL, UNIQUE (namespace, name));"
        /* Claims that went (expired, deleted): get_sandbox_status says why. */
        "CREATE TABLE IF NOT EXISTS claim_tombstones ("
        "  namespace TEXT NOT NULL, name TEXT NOT NULL, uid INTEGER NOT NULL, mcp_session TEXT NOT NULL,"
        "  reason TEXT NOT NULL, at_unix INTEGER NOT NULL, PRIMARY KEY (namespace, name));"
        /* Bearer tokens (core/token.h): the hash of the secret, never the secret. */
        "CREATE TABLE IF NOT EXISTS tokens ("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, owner_uid INTEGER NOT NULL, hash BLOB NOT NULL,"
        "  sets TEXT NOT NULL, created_unix INTEGER NOT NULL, expires_unix INTEGER NOT NULL);";

/* Schema 1 (user_version 0) keyed everything by the sandbox's name, and a
 * deleted sandbox's commands stayed. Its tables are renamed away, the rows
 * move to schema 2 under a new id per sandbox, and a command older than its
 * sandbox's record, left by an earlier sandbox of that name, is not carried
 * over (sbxctl gc removes its transcript). One transaction: a crash leaves
 * schema 1 as it was. */
static const char migrate_from_1[] =
        "DROP INDEX IF EXISTS commands_by_sandbox;"
        "DROP INDEX IF EXISTS layer_paths_by_seq;"
        "DROP INDEX IF EXISTS layer_paths_by_path;"
        "ALTER TABLE sandboxes RENAME TO v1_sandboxes;"
        "ALTER TABLE layers RENAME TO v1_layers;"
        "ALTER TABLE commands RENAME TO v1_commands;"
        "ALTER TABLE layer_paths RENAME TO v1_layer_paths;"
        "ALTER TABLE blame RENAME TO v1_blame;"
        "ALTER TABLE squashes RENAME TO v1_squashes;";
static const char migrate_from_1_rows[] =
        "INSERT INTO sandboxes SELECT 'sb-' || lower(hex(randomblob(8))), name, owner_uid, source_dir,"
        "  memory_bytes, pids_max, created_unix, cpu_weight FROM v1_sandboxes;"
        "INSERT INTO layers (sandbox, seq, owner, changed_paths, created_unix)"
        "  SELECT s.id, l.seq, l.owner, l.changed_paths, l.created_unix"
        "  FROM v1_layers l JOIN sandboxes s ON s.name = l.sandbox;"
        "INSERT INTO layer_paths SELECT s.id, p.seq, p.path FROM v1_layer_paths p JOIN sandboxes s ON s.name = p.sandbox;"
        "INSERT INTO blame SELECT s.id, b.path, b.ranges FROM v1_blame b JOIN sandboxes s ON s.name = b.sandbox;"
        "INSERT INTO squashes SELECT s.id, q.squashed FROM v1_squashes q JOIN sandboxes s ON s.name = q.sandbox;"
        "INSERT INTO commands (id, sandbox, workspace_session, status, exit_code, signal, end_reason,"
        "  started_usec, ended_usec, raw_bytes, cmd)"
        "  SELECT c.id, s.id, c.workspace_session, c.status, c.exit_code, c.signal, c.end_reason,"
        "  c.started_usec, c.ended_usec, c.raw_bytes, c.cmd"
        "  FROM v1_commands c JOIN sandboxes s ON s.name = c.sandbox WHERE c.started_usec >= s.created_unix * 1000000;"
        "DROP TABLE v1_layer_paths; DROP TABLE v1_layers; DROP TABLE v1_commands;"
        "DROP TABLE v1_blame; DROP TABLE v1_squashes; DROP TABLE v1_sandboxes;";

/* Schema 2 to 3: the transcript columns (sizes counted at the next start);
 * schema 2 had no layer sizes: its layers count as 0 bytes and 0 inodes
 * (sbxd.conf(5)). */
static const char migrate_from_2[] =
        "ALTER TABLE commands ADD COLUMN transcript_bytes INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE commands ADD COLUMN transcript_files INTEGER NOT NULL DEFAULT -1;"
        "ALTER TABLE commands ADD COLUMN evicted TEXT NOT NULL DEFAULT '';"
        "ALTER TABLE layers ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE layers ADD COLUMN inodes INTEGER NOT NULL DEFAULT 0;";

static int sql_err(int rc) {
        switch (rc) {
        case SQLITE_OK:
        case SQLITE_DONE:
        case SQLITE_ROW:
                return 0;
        case SQLITE_CONSTRAINT:
                return -EEXIST;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        default:
                return -EIO;
        }
}

static void stmt_finalizep(sqlite3_stmt **st) {
        if (*st)
                sqlite3_finalize(*st);
}
#define _cleanup_stmt_ _cleanup_(stmt_finalizep)

static int exec_sql(Store *s, const char *sql);
static int query_int(Store *s, const char *sql, int *ret);

/* Bring the schema to SCHEMA_VERSION: create it in a new database, migrate an older one. */
static int schema_update(Store *s) {
        int version, has_tables, r;

        r = query_int(s, "PRAGMA user_version", &version);
        if (r < 0)
                return r;
        if (version > SCHEMA_VERSION)
                return -EPROTONOSUPPORT; /* made by a newer sbxd */
        if (version == SCHEMA_VERSION)
                return exec_sql(s, schema);
        r = query_int(s, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sandboxes'",
                      &has_tables);
        if (r < 0)
                return r;
        /* Foreign keys cannot change inside a transaction; the old tables' rows move as a whole. */
        r = exec_sql(s, "PRAGMA foreign_keys=OFF");
        if (r >= 0)
                r = exec_sql(s, "BEGIN IMMEDIATE");
        if (r < 0)
                return r;
        /* Schema 3 to 4 adds a table, which schema's CREATE makes. */
        if (has_tables && version < 3)
                r = exec_sql(s, version < 2 ? migrate_from_1 : migrate_from_2);
        if (r >= 0)
                r = exec_sql(s, schema);
        if (r >= 0 && has_tables && version < 2)
                r = exec_sql(s, migrate_from_1_rows);
        if (r >= 0)
                r = exec_sql(s, "PRAGMA user_version = " STRINGIFY(SCHEMA_VERSION));
        if (r >= 0)
                r = exec_sql(s, "COMMIT");
        if (r < 0) {
                (void) exec_sql(s, "ROLLBACK");
                return r;
        }
        if (has_tables)
                s->migrated_from = version ?: 1;
        return 0;
}

int store_open(int state_dirfd, Store **ret) {
        char path[64];
        Store *s;
        int rc, r;

        /* SQLite wants a path; /proc/self/fd keeps us anchored to the dir fd. */
        snprintf(path, sizeof(path), "/proc/self/fd/%d/sbx.db", state_dirfd);
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                           SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK) {
                store_close(s);
                return sql_err(rc) ?: -EIO;
        }
        sqlite3_busy_timeout(s->db, 2000);
        /* Command records need not survive a power loss; publications do (store_begin_durable).
         * A publication's transaction may hold 1,000,000 paths: a page cache of
         * SBX_STORE_CACHE_KIB keeps it from spilling to the WAL page by page. */
        r = exec_sql(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-" STRINGIFY(SBX_STORE_CACHE_KIB) ";");
        if (r >= 0)
                r = schema_update(s);
        if (r >= 0)
                r = exec_sql(s, "PRAGMA foreign_keys=ON");
        if (r < 0) {
                store_close(s);
                return r;
        }
        *ret = s;
        return 0;
}

int store_open_reader(int state_dirfd, Store **ret) {
        char path[64];
        Store *s;
        int rc;

        snprintf(path, sizeof(path), "/proc/self/fd/%d/sbx.db", state_dirfd);
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK) {
                store_close(s);
                return sql_err(rc) ?: -EIO;
        }
        sqlite3_busy_timeout(s->db, 2000);
        *ret = s;
        return 0;
}

unsigned store_migrated_from(const Store *s) {
        return s->migrated_from;
}

Store *store_close(Store *s) {
        if (!s)
                return NULL;
        sqlite3_close(s->db);
        free(s);
        return NULL;
}

static void fill_command(sqlite3_stmt *st, StoreCommand *c);
#define COMMAND_COLUMNS \
        "id, sandbox, workspace_session, status, exit_code, signal, end_reason, started_usec, ended_usec, raw_bytes," \
        " transcript_bytes, transcript_files, evicted"

static int prepare(Store *s, const char *sql, sqlite3_stmt **ret) {
        return sql_err(sqlite3_prepare_v2(s->db, sql, -1, ret, NULL)) ?: 0;
}

static int step_done(sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

static int exec_sql(Store *s, const char *sql) {
        return sql_err(sqlite3_exec(s->db, sql, NULL, NULL, NULL));
}

/* The integer the one-row query sql yields. */
static int query_int(Store *s, const char *sql, int *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, sql, &st), rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        *ret = sqlite3_column_int(st, 0);
        return 0;
}

int store_sandbox_insert(Store *s, const StoreSandbox *sb, const char *layer0_owner) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = store_begin_durable(s);
        if (r < 0)
                return r;
        r = prepare(s, "INSERT INTO sandboxes VALUES (?,?,?,?,?,?,?,?)", &st);
        if (r >= 0) {
                sqlite3_bind_text(st, 1, sb->id, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 2, sb->name, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 3, sb->owner_uid);
                sqlite3_bind_text(st, 4, sb->source_dir, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 5, (sqlite3_int64) sb->memory_bytes);
                sqlite3_bind_int64(st, 6, sb->pids_max);
                sqlite3_bind_int64(st, 7, sb->created_unix);
                sqlite3_bind_int64(st, 8, sb->cpu_weight);
                r = step_done(st);
        }
        if (r >= 0)
                r = store_layer_insert(s, sb->id, 0, layer0_owner, 0, sb->created_unix, NULL);
        if (r < 0) {
                store_rollback(s);
                return r;
        }
        return store_commit(s);
}

/* Calls cb with the first column of each row of st (bound), until cb fails. */
static int each_text(sqlite3_stmt *st, int (*cb)(const char *text, void *userdata), void *userdata) {
        int r, rc;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = cb((const char *) sqlite3_column_text(st, 0), userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

static int sandbox_delete_rows(Store *s, const char *id, int (*cb)(const char *command, void *userdata),
                               void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *ids = NULL, *del = NULL;
        int r;

        r = prepare(s, "SELECT id FROM commands WHERE sandbox = ?", &ids);
        if (r < 0)
                return r;
        sqlite3_bind_text(ids, 1, id, -1, SQLITE_STATIC);
        r = each_text(ids, cb, userdata);
        if (r < 0)
                return r;
        /* Its layers, their paths, attribution, squash record and commands go with it. */
        r = prepare(s, "DELETE FROM sandboxes WHERE id = ?", &del);
        if (r < 0)
                return r;
        sqlite3_bind_text(del, 1, id, -1, SQLITE_STATIC);
        r = step_done(del);
        if (r < 0)
                return r;
        return sqlite3_changes(s->db) > 0 ? 0 : -ENOENT;
}

int store_sandbox_delete(Store *s, const char *id, int (*cb)(const char *command, void *userdata),
                         void *userdata) {
        int r = store_begin_durable(s);

        if (r < 0)
                return r;
        r = sandbox_delete_rows(s, id, cb, userdata);
        if (r < 0) {
                store_rollback(s);
                return r;
        }
        return store_commit(s);
}

int store_sandbox_foreach(Store *s, int (*cb)(const StoreSandbox *sb, void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s,
                    "SELECT s.name, s.owner_uid, s.source_dir, s.memory_bytes, s.pids_max,"
                    " s.created_unix, (SELECT MAX(seq) FROM layers l WHERE l.sandbox = s.id), s.cpu_weight, s.id"
                    " FROM sandboxes s ORDER BY s.name",
                    &st);
        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                StoreSandbox sb = {
                        .owner_uid = (uid_t) sqlite3_column_int64(st, 1),
                        .source_dir = (char *) sqlite3_column_text(st, 2),
                        .memory_bytes = (uint64_t) sqlite3_column_int64(st, 3),
                        .pids_max = (uint32_t) sqlite3_column_int64(st, 4),
                        .created_unix = sqlite3_column_int64(st, 5),
                        .top_layer = (uint32_t) sqlite3_column_int64(st, 6),
                        .cpu_weight = (uint32_t) sqlite3_column_int64(st, 7),
                };
                strlcpy(sb.name, (const char *) sqlite3_column_text(st, 0), sizeof(sb.name));
                strlcpy(sb.id, (const char *) sqlite3_column_text(st, 8), sizeof(sb.id));
                r = cb(&sb, userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

int store_layer_insert(Store *s, const char *sandbox, uint32_t seq, const char *owner, uint32_t changed_paths,
                       int64_t created_unix, const StoreLayerSize *size) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "INSERT INTO layers VALUES (?,?,?,?,?,?,?)", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, seq);
        sqlite3_bind_text(st, 3, owner, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, changed_paths);
        sqlite3_bind_int64(st, 5, created_unix);
        sqlite3_bind_int64(st, 6, size ? (int64_t) size->bytes : 0);
        sqlite3_bind_int64(st, 7, size ? (int64_t) size->inodes : 0);
        return step_done(st);
}

int store_sandbox_layers_size(Store *s, const char *sandbox, StoreLayerSize *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s, "SELECT COALESCE(SUM(bytes), 0), COALESCE(SUM(inodes), 0) FROM layer_totals WHERE sandbox = ?",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        *ret = (StoreLayerSize) { .bytes = (uint64_t) sqlite3_column_int64(st, 0),
                                  .inodes = (uint64_t) sqlite3_column_int64(st, 1) };
        return 0;
}

int store_layers_size(Store *s, const char *sandbox, uid_t owner, StoreLayersSize *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        StoreLayerSize *out[] = { &ret->sandbox, &ret->owner, &ret->all };
        int r, rc;

        r = prepare(s,
                    "SELECT COALESCE(SUM(CASE WHEN l.sandbox = ?1 THEN l.bytes END), 0),"
                    " COALESCE(SUM(CASE WHEN l.sandbox = ?1 THEN l.inodes END), 0),"
                    " COALESCE(SUM(CASE WHEN s.owner_uid = ?2 THEN l.bytes END), 0),"
                    " COALESCE(SUM(CASE WHEN s.owner_uid = ?2 THEN l.inodes END), 0),"
                    " COALESCE(SUM(l.bytes), 0), COALESCE(SUM(l.inodes), 0)"
                    " FROM layer_totals l JOIN sandboxes s ON s.id = l.sandbox",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, owner);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        for (size_t i = 0; i < ELEMENTSOF(out); i++)
                *out[i] = (StoreLayerSize) { .bytes = (uint64_t) sqlite3_column_int64(st, (int) (2 * i)),
                                             .inodes = (uint64_t) sqlite3_column_int64(st, (int) (2 * i + 1)) };
        return 0;
}

int store_command_insert(Store *s, const StoreCommand *c, const char *cmd) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s,
                    "INSERT INTO commands (id, sandbox, workspace_session, status, started_usec, cmd)"
                    " VALUES (?,?,?,?,?,substr(?, 1, 4096))",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, c->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, c->sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, c->workspace_session, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, c->status, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, c->started_unix_usec);
        sqlite3_bind_text(st, 6, cmd, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_command_finish(Store *s, const StoreCommand *c) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s,
                    "UPDATE commands SET status = ?, exit_code = ?, signal = ?, end_reason = ?,"
                    " ended_usec = ?, raw_bytes = ?, transcript_bytes = ?, transcript_files = ? WHERE id = ?",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, c->status, -1, SQLITE_STATIC);
        if (c->has_exit_code)
                sqlite3_bind_int(st, 2, c->exit_code);
        else
                sqlite3_bind_null(st, 2);
        sqlite3_bind_int(st, 3, c->signal);
        sqlite3_bind_text(st, 4, c->end_reason, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, c->ended_unix_usec);
        sqlite3_bind_int64(st, 6, (sqlite3_int64) c->raw_bytes);
        sqlite3_bind_int64(st, 7, (sqlite3_int64) c->transcript_bytes);
        sqlite3_bind_int(st, 8, c->transcript_files);
        sqlite3_bind_text(st, 9, c->id, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_id_list_add(const char *id, void *userdata) {
        StoreIdList *l = userdata;
        int r = ARRAY_RESERVE(l->ids, l->cap, l->n + 1);

        if (r < 0)
                return r;
        strlcpy(l->ids[l->n++], id, sizeof(*l->ids));
        return 0;
}

int store_command_set_transcript(Store *s, const char *id, uint64_t bytes, int files) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "UPDATE commands SET transcript_bytes = ?, transcript_files = ? WHERE id = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) bytes);
        sqlite3_bind_int(st, 2, files);
        sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_command_evict(Store *s, const char *id, const char *reason) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "UPDATE commands SET evicted = ?, transcript_bytes = 0, transcript_files = 0 WHERE id = ?",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, reason, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
        return step_done(st);
}

/* The one command st selects (COMMAND_COLUMNS), or -ENOENT. */
static int step_command(sqlite3_stmt *st, StoreCommand *ret) {
        int rc = sqlite3_step(st);

        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        fill_command(st, ret);
        return 0;
}

int store_transcript_oldest(Store *s, const char *sandbox, int64_t owner, StoreCommand *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (sandbox)
                r = prepare(s, "SELECT " COMMAND_COLUMNS " FROM commands WHERE sandbox = ?1 AND evicted = ''"
                               " AND status != 'running' AND transcript_files > 0 ORDER BY started_usec LIMIT 1", &st);
        else
                r = prepare(s, "SELECT " COMMAND_COLUMNS " FROM commands WHERE evicted = '' AND status != 'running'"
                               " AND transcript_files > 0 AND (?2 < 0 OR sandbox IN"
                               " (SELECT id FROM sandboxes WHERE owner_uid = ?2)) ORDER BY started_usec LIMIT 1", &st);
        if (r < 0)
                return r;
        if (sandbox)
                sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        else
                sqlite3_bind_int64(st, 2, owner);
        return step_command(st, ret);
}

int store_transcript_usage_foreach(Store *s, int (*cb)(const char *sandbox, uint64_t bytes, uint64_t files,
                                                       void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s, "SELECT sandbox, sum(transcript_bytes), sum(transcript_files) FROM commands"
                       " WHERE transcript_files > 0 GROUP BY sandbox", &st);
        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = cb((const char *) sqlite3_column_text(st, 0), (uint64_t) sqlite3_column_int64(st, 1),
                       (uint64_t) sqlite3_column_int64(st, 2), userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

int store_transcript_unknown_foreach(Store *s, int (*cb)(const char *id, void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s, "SELECT id FROM commands WHERE transcript_files < 0 AND evicted = ''", &st);
        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = cb((const char *) sqlite3_column_text(st, 0), userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

int store_command_get(Store *s, const char *id, StoreCommand *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "SELECT " COMMAND_COLUMNS " FROM commands WHERE id = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        return step_command(st, ret);
}

int store_commands_mark_lost(Store *s, int64_t now_unix_usec, unsigned *ret_count) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s,
                    "UPDATE commands SET status = 'error', end_reason = 'supervisor_lost',"
                    " ended_usec = ? WHERE status = 'running'",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, now_unix_usec);
        r = step_done(st);
        if (r < 0)
                return r;
        *ret_count = (unsigned) sqlite3_changes(s->db);
        return 0;
}

/* A publication's transaction reaches the disk before COMMIT returns. */
int store_begin_durable(Store *s) {
        int r = exec_sql(s, "PRAGMA synchronous=FULL");
        if (r < 0)
                return r;
        r = exec_sql(s, "BEGIN IMMEDIATE");
        if (r < 0)
                (void) exec_sql(s, "PRAGMA synchronous=NORMAL");
        return r;
}

int store_commit(Store *s) {
        int r = exec_sql(s, "COMMIT");
        (void) exec_sql(s, "PRAGMA synchronous=NORMAL");
        return r;
}

void store_rollback(Store *s) {
        (void) exec_sql(s, "ROLLBACK");
        (void) exec_sql(s, "PRAGMA synchronous=NORMAL");
}

int store_layer_paths_insert(Store *s, const char *sandbox, uint32_t seq, const char *const *paths, size_t n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "INSERT INTO layer_paths VALUES (?,?,?)", &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, seq);
        /* One statement for all: a publication may record 1,000,000 paths. */
        for (size_t i = 0; r >= 0 && i < n; i++) {
                sqlite3_bind_text(st, 3, paths[i], -1, SQLITE_STATIC);
                r = step_done(st);
                sqlite3_reset(st);
        }
        return r;
}

int store_paths_changed_after(Store *s, const char *sandbox, uint32_t seq,
                              int (*cb)(const char *path, void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "SELECT DISTINCT path FROM layer_paths WHERE sandbox = ? AND seq > ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, seq);
        return each_text(st, cb, userdata);
}

int store_path_changed_since_import(Store *s, const char *sandbox, const char *path) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        /* The path itself, or a directory above it replaced or deleted as a whole. */
        r = prepare(s,
                    "SELECT 1 FROM layer_paths WHERE sandbox = ?1 AND seq > 0 AND"
                    " (path = ?2 OR substr(?2, 1, length(path) + 1) = path || '/') LIMIT 1",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                return 1;
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

int store_layer_foreach(Store *s, const char *sandbox,
                        int (*cb)(uint32_t seq, const char *owner, uint32_t changed, int64_t created, void *userdata),
                        void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s, "SELECT seq, owner, changed_paths, created_unix FROM layers WHERE sandbox = ? ORDER BY seq",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = cb((uint32_t) sqlite3_column_int64(st, 0), (const char *) sqlite3_column_text(st, 1),
                       (uint32_t) sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3), userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

int store_blame_get(Store *s, const char *sandbox, const char *path, char **ret_ranges) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        char *copy;
        int r, rc;

        r = prepare(s, "SELECT ranges FROM blame WHERE sandbox = ? AND path = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        copy = strdup((const char *) sqlite3_column_text(st, 0));
        if (!copy)
                return -ENOMEM;
        *ret_ranges = copy;
        return 0;
}

int store_blame_apply(Store *s, const char *sandbox, const StoreBlameOp *ops, size_t n) {
        static const char *const sql[] = {
                "INSERT OR REPLACE INTO blame VALUES (?1, ?2, ?3)",
                "DELETE FROM blame WHERE sandbox = ?1 AND path = ?2",
                /* Every path below it, by a range of the primary key (an OR with the
                 * line above would scan the table): those between "PATH/" and
                 * "PATH0" ('0' is the byte after '/'). */
                "DELETE FROM blame WHERE sandbox = ?1 AND path >= (?2 || '/') AND path < (?2 || '0')",
        };
        sqlite3_stmt *st[ELEMENTSOF(sql)] = {};
        int r = 0;

        for (size_t k = 0; r >= 0 && k < ELEMENTSOF(sql); k++) {
                r = prepare(s, sql[k], &st[k]);
                if (r >= 0)
                        sqlite3_bind_text(st[k], 1, sandbox, -1, SQLITE_STATIC);
        }
        for (size_t i = 0; r >= 0 && i < n; i++)
                /* A record set; or deleted, and with tree those below it too. */
                for (size_t k = ops[i].ranges ? 0 : 1; r >= 0 && k < (ops[i].ranges ? 1 : ops[i].tree ? 3 : 2); k++) {
                        sqlite3_bind_text(st[k], 2, ops[i].path, -1, SQLITE_STATIC);
                        if (ops[i].ranges)
                                sqlite3_bind_text(st[k], 3, ops[i].ranges, -1, SQLITE_STATIC);
                        r = step_done(st[k]);
                        sqlite3_reset(st[k]);
                }
        for (size_t k = 0; k < ELEMENTSOF(sql); k++)
                sqlite3_finalize(st[k]);
        return r;
}

int store_squash_get(Store *s, const char *sandbox, uint32_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s, "SELECT squashed FROM squashes WHERE sandbox = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
                *ret = 0;
                return 0;
        }
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        *ret = (uint32_t) sqlite3_column_int64(st, 0);
        return 0;
}

int store_squash_set(Store *s, const char *sandbox, uint32_t squashed) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "INSERT OR REPLACE INTO squashes VALUES (?,?)", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, squashed);
        return step_done(st);
}

static void fill_command(sqlite3_stmt *st, StoreCommand *c) {
        memset(c, 0, sizeof(*c));
        strlcpy(c->id, (const char *) sqlite3_column_text(st, 0), sizeof(c->id));
        strlcpy(c->sandbox, (const char *) sqlite3_column_text(st, 1), sizeof(c->sandbox));
        strlcpy(c->workspace_session, (const char *) sqlite3_column_text(st, 2), sizeof(c->workspace_session));
        strlcpy(c->status, (const char *) sqlite3_column_text(st, 3), sizeof(c->status));
        c->has_exit_code = sqlite3_column_type(st, 4) != SQLITE_NULL;
        c->exit_code = sqlite3_column_int(st, 4);
        c->signal = sqlite3_column_int(st, 5);
        strlcpy(c->end_reason, (const char *) sqlite3_column_text(st, 6), sizeof(c->end_reason));
        c->started_unix_usec = sqlite3_column_int64(st, 7);
        c->ended_unix_usec = sqlite3_column_int64(st, 8);
        c->raw_bytes = (uint64_t) sqlite3_column_int64(st, 9);
        c->transcript_bytes = (uint64_t) sqlite3_column_int64(st, 10);
        c->transcript_files = sqlite3_column_int(st, 11);
        strlcpy(c->evicted, (const char *) sqlite3_column_text(st, 12), sizeof(c->evicted));
}

int store_command_foreach(Store *s, const char *sandbox, const char *ws,
                          int (*cb)(const StoreCommand *c, const char *cmd, void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s,
                    "SELECT " COMMAND_COLUMNS ", cmd FROM commands WHERE sandbox = ?1 AND"
                    " (?2 IS NULL OR workspace_session = ?2) ORDER BY started_usec",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        if (ws)
                sqlite3_bind_text(st, 2, ws, -1, SQLITE_STATIC);
        else
                sqlite3_bind_null(st, 2);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                StoreCommand c;
                fill_command(st, &c);
                r = cb(&c, (const char *) sqlite3_column_text(st, 13), userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

/* 1 if the query sql, with text bound to ?1, yields a row, else 0. */
static int exists_text(Store *s, const char *sql, const char *text) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s, sql, &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                return 1;
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

int store_command_exists(Store *s, const char *id) {
        return exists_text(s, "SELECT 1 FROM commands WHERE id = ?1", id);
}

int store_transcript_kept(Store *s, const char *id) {
        return exists_text(s, "SELECT 1 FROM commands WHERE id = ?1 AND evicted = ''", id);
}

int store_sandbox_known(Store *s, const char *id_or_name) {
        return exists_text(s, "SELECT 1 FROM sandboxes WHERE id = ?1 OR name = ?1", id_or_name);
}

static void fill_uid_range(sqlite3_stmt *st, StoreUidRange *r) {
        memset(r, 0, sizeof(*r));
        strlcpy(r->sandbox, (const char *) sqlite3_column_text(st, 0), sizeof(r->sandbox));
        r->base = (uint32_t) sqlite3_column_int64(st, 1);
        r->count = (uint32_t) sqlite3_column_int64(st, 2);
        r->shifting = sqlite3_column_type(st, 3) != SQLITE_NULL;
        r->shift_from = (uint32_t) sqlite3_column_int64(st, 3);
}

int store_uid_range_foreach(Store *s, bool orphans_only, int (*cb)(const StoreUidRange *r, void *userdata),
                            void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s,
                    orphans_only ? "SELECT sandbox, base, count, shift_from FROM uid_ranges"
                                   " WHERE sandbox NOT IN (SELECT id FROM sandboxes) ORDER BY base"
                                 : "SELECT sandbox, base, count, shift_from FROM uid_ranges ORDER BY base",
                    &st);
        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                StoreUidRange u;
                fill_uid_range(st, &u);
                r = cb(&u, userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

/* One statement in a durable transaction of its own: a range is on the disk
 * before a file has its ids, and is gone only after its files are. The
 * statement takes ?1 sandbox and, if it has them, ?2 base ?3 count ?4 shift_from. */
static int uid_range_write(Store *s, const char *sql, const StoreUidRange *u) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = store_begin_durable(s);
        if (r < 0)
                return r;
        r = prepare(s, sql, &st);
        if (r >= 0) {
                sqlite3_bind_text(st, 1, u->sandbox, -1, SQLITE_STATIC);
                if (sqlite3_bind_parameter_count(st) >= 4) {
                        sqlite3_bind_int64(st, 2, u->base);
                        sqlite3_bind_int64(st, 3, u->count);
                        if (u->shifting)
                                sqlite3_bind_int64(st, 4, u->shift_from);
                        else
                                sqlite3_bind_null(st, 4);
                }
                r = step_done(st);
        }
        if (r >= 0 && sqlite3_changes(s->db) == 0)
                r = -ENOENT;
        if (r < 0) {
                store_rollback(s);
                return r;
        }
        return store_commit(s);
}

int store_uid_range_insert(Store *s, const StoreUidRange *u) {
        return uid_range_write(s, "INSERT INTO uid_ranges VALUES (?1, ?2, ?3, ?4)", u);
}

int store_uid_range_shifted(Store *s, const char *sandbox) {
        StoreUidRange u = {};
        strlcpy(u.sandbox, sandbox, sizeof(u.sandbox));
        return uid_range_write(s, "UPDATE uid_ranges SET shift_from = NULL WHERE sandbox = ?1", &u);
}

int store_uid_range_delete(Store *s, const char *sandbox) {
        StoreUidRange u = {};
        strlcpy(u.sandbox, sandbox, sizeof(u.sandbox));
        return uid_range_write(s, "DELETE FROM uid_ranges WHERE sandbox = ?1", &u);
}

/* ---- claims (issue 16) ------------------------------------------------------------ */

int store_claim_put(Store *s, const StoreClaim *c) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?,?)", &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, c->sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, c->namespace_, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, c->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, c->uid);
        sqlite3_bind_int64(st, 5, c->last_used_unix);
        sqlite3_bind_blob(st, 6, c->info, (int) c->info_len, SQLITE_STATIC);
        return step_done(st);
}

/* sql, an UPDATE of one integer (?1) of the row whose key is ?2. */
static int update_int(Store *s, const char *sql, int64_t value, const char *key) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, sql, &st);

        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, value);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_claim_touch(Store *s, const char *sandbox, int64_t last_used_unix) {
        return update_int(s, "UPDATE claims SET last_used_unix = ? WHERE sandbox = ?", last_used_unix, sandbox);
}

int store_claim_foreach(Store *s, int (*cb)(const StoreClaim *c, void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "SELECT sandbox, namespace, name, uid, last_used_unix, info FROM claims", &st), rc;

        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                StoreClaim c = {
                        .sandbox = (const char *) sqlite3_column_text(st, 0),
                        .namespace_ = (const char *) sqlite3_column_text(st, 1),
                        .name = (const char *) sqlite3_column_text(st, 2),
                        .uid = sqlite3_column_int64(st, 3),
                        .last_used_unix = sqlite3_column_int64(st, 4),
                        .info = sqlite3_column_blob(st, 5),
                        .info_len = (size_t) sqlite3_column_bytes(st, 5),
                };
                r = cb(&c, userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

/* A tombstone's key, the parameters 1 to 4 of st. */
static int prepare_tombstone(Store *s, const char *sql, const char *ns, const char *name, int64_t uid,
                             const char *mcp_session, sqlite3_stmt **ret) {
        int r = prepare(s, sql, ret);

        if (r < 0)
                return r;
        sqlite3_bind_text(*ret, 1, ns, -1, SQLITE_STATIC);
        sqlite3_bind_text(*ret, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(*ret, 3, uid);
        sqlite3_bind_text(*ret, 4, mcp_session, -1, SQLITE_STATIC);
        return 0;
}

int store_claim_tombstone_put(Store *s, const char *ns, const char *name, int64_t uid, const char *mcp_session,
                              const char *reason, int64_t at_unix) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL, *trim = NULL;
        int r = prepare_tombstone(s, "INSERT OR REPLACE INTO claim_tombstones VALUES (?,?,?,?,?,?)", ns, name, uid,
                                  mcp_session, &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 5, reason, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, at_unix);
        r = step_done(st);
        if (r < 0)
                return r;
        /* The newest SBX_CLAIM_TOMBSTONES_MAX are remembered. */
        r = prepare(s, "DELETE FROM claim_tombstones WHERE rowid NOT IN "
                       "(SELECT rowid FROM claim_tombstones ORDER BY at_unix DESC LIMIT ?)", &trim);
        if (r < 0)
                return r;
        sqlite3_bind_int64(trim, 1, SBX_CLAIM_TOMBSTONES_MAX);
        return step_done(trim);
}

int store_claim_tombstone_get(Store *s, const char *ns, const char *name, int64_t uid, const char *mcp_session,
                              char *ret_reason, size_t size) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare_tombstone(s, "SELECT reason FROM claim_tombstones WHERE namespace = ? AND name = ? AND uid = ? "
                                     "AND mcp_session = ?", ns, name, uid, mcp_session, &st), rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        snprintf(ret_reason, size, "%s", (const char *) sqlite3_column_text(st, 0));
        return 0;
}

int store_sandbox_set_owner(Store *s, const char *id, uid_t owner_uid) {
        return update_int(s, "UPDATE sandboxes SET owner_uid = ? WHERE id = ?", owner_uid, id);
}

/* ---- bearer tokens (issue 20) ------------------------------------------------------- */

int store_token_insert(Store *s, const StoreToken *t) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "INSERT INTO tokens VALUES (?,?,?,?,?,?,?)", &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, t->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, t->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, t->owner_uid);
        sqlite3_bind_blob(st, 4, t->hash, (int) t->hash_len, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, t->sets, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, t->created_unix);
        sqlite3_bind_int64(st, 7, t->expires_unix);
        return step_done(st);
}

int store_token_delete(Store *s, const char *id) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "DELETE FROM tokens WHERE id = ?", &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_token_foreach(Store *s, int (*cb)(const StoreToken *t, void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "SELECT id, name, owner_uid, hash, sets, created_unix, expires_unix FROM tokens", &st), rc;

        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                StoreToken t = {
                        .id = (const char *) sqlite3_column_text(st, 0),
                        .name = (const char *) sqlite3_column_text(st, 1),
                        .owner_uid = sqlite3_column_int64(st, 2),
                        .hash = sqlite3_column_blob(st, 3),
                        .hash_len = (size_t) sqlite3_column_bytes(st, 3),
                        .sets = (const char *) sqlite3_column_text(st, 4),
                        .created_unix = sqlite3_column_int64(st, 5),
                        .expires_unix = sqlite3_column_int64(st, 6),
                };
                r = cb(&t, userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}
