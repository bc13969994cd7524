#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array.h"
#include "macro.h"
#include "data/store.h"
#include "sbx-limits.h"

/* The statements every command runs at its start and end (and a claim's at
 * each use), prepared once: parsing them anew was a third of sbxd's time
 * for an execute_command. */
typedef enum HotStatement {
        HOT_COMMAND_INSERT,
        HOT_COMMAND_FINISH,
        HOT_CLAIM_TOUCH,
        _HOT_MAX,
} HotStatement;

struct Store {
        sqlite3 *db;
        sqlite3_stmt *hot[_HOT_MAX];    /* prepare_hot: NULL until first used */
        unsigned migrated_from;         /* the schema version store_open migrated from, or 0 */
        unsigned checkpoint_pages;      /* store_checkpoint_elsewhere */
        void (*checkpoint)(void *userdata);
        void *checkpoint_userdata;
        bool writer;                    /* store_open_writer's (StoreConns: which list it goes back to) */
        Store *next;                    /* in a StoreConns list */
};

/* Schema 2: every record of a sandbox is keyed by its immutable id (a name
 * may be reused after a delete) and goes with it (ON DELETE CASCADE).
 * Schema 3: a command's transcript size (bytes, files; -1 files: not known
 * yet) and, once it was evicted, the budget it was evicted for; each
 * layer's allocated bytes and inodes (layer quotas).
 * Schema 4: a sandbox's egress policy (docs/egress.md; before: none), each
 * ended command's egress audit (table command_egress), and the bearer
 * tokens of sbx-gateway (only each token's SHA-256). */
#define SCHEMA_VERSION 4
static const char schema[] =
        "CREATE TABLE IF NOT EXISTS sandboxes ("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, owner_uid INTEGER NOT NULL, source_dir TEXT NOT NULL,"
        "  memory_bytes INTEGER NOT NULL, pids_max INTEGER NOT NULL,"
        "  created_unix INTEGER NOT NULL, cpu_weight INTEGER NOT NULL DEFAULT 100,"
        "  egress TEXT NOT NULL DEFAULT 'none');"
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
        /* A layer whose record is being written, in steps, off the loop (store_layer_begin):
         * nothing reads its rows until store_layer_commit; a start removes what one left. */
        "CREATE TABLE IF NOT EXISTS layers_pending ("
        "  sandbox TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (sandbox, seq),"
        "  FOREIGN KEY (sandbox, seq) REFERENCES layers(sandbox, seq) ON DELETE CASCADE);"
        "CREATE TRIGGER IF NOT EXISTS layer_totals_sub AFTER DELETE ON layers WHEN OLD.seq > 0 BEGIN"
        "  UPDATE layer_totals SET bytes = bytes - OLD.bytes, inodes = inodes - OLD.inodes"
        "  WHERE sandbox = OLD.sandbox; END;"
        /* Attribution changes of recorded layers not folded into blame yet, in
         * order (seq, i): they count before blame's rows (store_blame_get). */
        "CREATE TABLE IF NOT EXISTS blame_pending ("
        "  sandbox TEXT NOT NULL, seq INTEGER NOT NULL, i INTEGER NOT NULL, path TEXT NOT NULL, ranges TEXT,"
        "  tree INTEGER NOT NULL, PRIMARY KEY (sandbox, seq, i),"
        "  FOREIGN KEY (sandbox, seq) REFERENCES layers(sandbox, seq) ON DELETE CASCADE);"
        "CREATE INDEX IF NOT EXISTS blame_pending_by_path ON blame_pending(sandbox, path);"
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
        /* A command's egress audit (docs/egress.md), a packed sbx.EgressAudit, once it ended. */
        "CREATE TABLE IF NOT EXISTS command_egress ("
        "  command TEXT PRIMARY KEY REFERENCES commands(id) ON DELETE CASCADE, audit BLOB NOT NULL);"
        /* Claims that went (expired, deleted): get_sandbox_status says why. */
        "CREATE TABLE IF NOT EXISTS claim_tombstones ("
        "  namespace TEXT NOT NULL, name TEXT NOT NULL, uid INTEGER NOT NULL, mcp_session TEXT NOT NULL,"
        "  reason TEXT NOT NULL, at_unix INTEGER NOT NULL, PRIMARY KEY (namespace, name));"
        /* Jobs (issue 18): a sandbox_script call, its owner and the rest of it
         * as a packed sbx.JobInfo. Created in existing databases too. */
        "CREATE TABLE IF NOT EXISTS jobs ("
        "  id TEXT PRIMARY KEY, uid INTEGER NOT NULL, info BLOB NOT NULL);"
        /* Artifacts (issue 19): a persisted runtime_execute's transcript, kept under a handle until
         * expires_usec; a new table, made at any schema's open. */
        "CREATE TABLE IF NOT EXISTS artifacts ("
        "  handle TEXT PRIMARY KEY, owner_uid INTEGER NOT NULL,"
        "  sandbox TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE, command TEXT NOT NULL,"
        "  created_usec INTEGER NOT NULL, expires_usec INTEGER NOT NULL, bytes INTEGER NOT NULL);"
        "CREATE INDEX IF NOT EXISTS artifacts_by_age ON artifacts(created_usec);"
        /* Artifacts compressed at rest (issue 19, data/zframes.h): what one stores now;
         * artifacts.bytes stays its uncompressed size. A new table, made at any schema's open. */
        "CREATE TABLE IF NOT EXISTS artifact_packed ("
        "  handle TEXT PRIMARY KEY REFERENCES artifacts(handle) ON DELETE CASCADE, bytes INTEGER NOT NULL);"
        /* Bearer tokens (core/token.h): the hash of the secret, never the secret. */
        "CREATE TABLE IF NOT EXISTS tokens ("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, owner_uid INTEGER NOT NULL, hash BLOB NOT NULL,"
        "  sets TEXT NOT NULL, created_unix INTEGER NOT NULL, expires_unix INTEGER NOT NULL);"
        /* Secrets of the boxes set (core/secret.h): an owner's named values. sbx.db is
         * root's alone (0600 in a 0711 state directory), as the values must be. */
        "CREATE TABLE IF NOT EXISTS secrets ("
        "  owner_uid INTEGER NOT NULL, name TEXT NOT NULL, value BLOB NOT NULL, updated_unix INTEGER NOT NULL,"
        "  PRIMARY KEY (owner_uid, name));"
        /* Versions of the boxes set (core/version.h): a packed sbx.VersionInfo each. */
        "CREATE TABLE IF NOT EXISTS versions ("
        "  id TEXT PRIMARY KEY, owner_uid INTEGER NOT NULL, info BLOB NOT NULL);"
        /* Boxes (issue 21, core/box.h): a packed sbx.BoxInfo; the row goes with the box's sandbox. */
        "CREATE TABLE IF NOT EXISTS boxes ("
        "  id TEXT PRIMARY KEY, uid INTEGER NOT NULL,"
        "  sandbox TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE, info BLOB NOT NULL);";

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
        "INSERT INTO sandboxes (id, name, owner_uid, source_dir, memory_bytes, pids_max, created_unix, cpu_weight)"
        "  SELECT 'sb-' || lower(hex(randomblob(8))), name, owner_uid, source_dir,"
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
/* Schema 3 to 4: every sandbox made before had no network but loopback. */
static const char migrate_from_3[] = "ALTER TABLE sandboxes ADD COLUMN egress TEXT NOT NULL DEFAULT 'none';";

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

/* A hot statement goes back to the Store, reset, for its next use. */
static void stmt_resetp(sqlite3_stmt **st) {
        if (*st) {
                (void) sqlite3_reset(*st);
                (void) sqlite3_clear_bindings(*st);
        }
}
#define _cleanup_hot_ _cleanup_(stmt_resetp)

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
        if (has_tables)
                r = exec_sql(s, version < 2 ? migrate_from_1 : version < 3 ? migrate_from_2 : migrate_from_3);
        if (r >= 0 && has_tables && version == 2)
                r = exec_sql(s, migrate_from_3);
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

/* While another connection writes: looked at again every SBX_STORE_BUSY_POLL_US
 * (SQLite's own wait backs off to 100 ms between looks), SBX_STORE_BUSY_MS in all. */
static int busy_wait(void *userdata, int tries) {
        if ((unsigned) tries >= SBX_STORE_BUSY_MS * 1000u / SBX_STORE_BUSY_POLL_US)
                return 0;
        (void) usleep(SBX_STORE_BUSY_POLL_US);
        return 1;
}

static int wal_hook(void *userdata, sqlite3 *db, const char *name, int pages) {
        Store *s = userdata;

        if ((unsigned) pages >= s->checkpoint_pages)
                s->checkpoint(s->checkpoint_userdata);
        return SQLITE_OK;
}

void store_checkpoint_elsewhere(Store *s, unsigned pages, void (*checkpoint)(void *userdata), void *userdata) {
        s->checkpoint_pages = pages;
        s->checkpoint = checkpoint;
        s->checkpoint_userdata = userdata;
        /* Replaces SQLite's checkpoint at commit, which would run on this connection's thread. */
        sqlite3_wal_hook(s->db, wal_hook, s);
}

/* A connection to sbx.db below state_dirfd (SQLite wants a path: /proc/self/fd
 * keeps it anchored to the directory fd), waiting for others' writes. */
static int store_connect(int state_dirfd, int flags, Store **ret) {
        char path[64];
        Store *s;
        int rc;

        snprintf(path, sizeof(path), "/proc/self/fd/%d/sbx.db", state_dirfd);
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        rc = sqlite3_open_v2(path, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK) {
                store_close(s);
                return sql_err(rc) ?: -EIO;
        }
        sqlite3_busy_handler(s->db, busy_wait, NULL);
        *ret = s;
        return 0;
}

/* A connection, then sql; closed if sql fails. */
static int store_connect_with(int state_dirfd, int flags, const char *sql, Store **ret) {
        Store *s;
        int r = store_connect(state_dirfd, flags, &s);

        if (r < 0)
                return r;
        r = exec_sql(s, sql);
        if (r < 0) {
                store_close(s);
                return r;
        }
        *ret = s;
        return 0;
}

int store_open(int state_dirfd, Store **ret) {
        Store *s;
        int r;

        /* Command records need not survive a power loss; publications do (store_begin_durable).
         * A publication's transaction may hold 1,000,000 paths: a page cache of
         * SBX_STORE_CACHE_KIB keeps it from spilling to the WAL page by page. */
        r = store_connect_with(state_dirfd, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                               "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-"
                               STRINGIFY(SBX_STORE_CACHE_KIB) ";", &s);
        if (r < 0)
                return r;
        r = schema_update(s);
        if (r >= 0)
                r = exec_sql(s, "PRAGMA foreign_keys=ON");
        /* Records an earlier sbxd was writing when it ended: their layers were never published. */
        if (r >= 0)
                r = exec_sql(s, "DELETE FROM layers WHERE (sandbox, seq) IN (SELECT sandbox, seq FROM layers_pending)");
        if (r < 0) {
                store_close(s);
                return r;
        }
        *ret = s;
        return 0;
}

static int store_open_writer(int state_dirfd, Store **ret) {
        return store_connect_with(state_dirfd, SQLITE_OPEN_READWRITE,
                                  "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-"
                                  STRINGIFY(SBX_STORE_CACHE_KIB) ";", ret);
}

static int store_open_reader(int state_dirfd, Store **ret) {
        return store_connect(state_dirfd, SQLITE_OPEN_READONLY, ret);
}

/* ---- connections kept for the work pool's threads ------------------------------------ */

struct StoreConns {
        pthread_mutex_t lock;
        int state_fd;
        Store *kept[2];                 /* readers, writers */
        unsigned n_kept[2];
        unsigned refs;
};

int store_conns_new(int state_dirfd, StoreConns **ret) {
        StoreConns *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->state_fd = fcntl(state_dirfd, F_DUPFD_CLOEXEC, 3);
        if (c->state_fd < 0) {
                free(c);
                return -errno;
        }
        pthread_mutex_init(&c->lock, NULL);
        c->refs = 1;
        *ret = c;
        return 0;
}

StoreConns *store_conns_ref(StoreConns *c) {
        pthread_mutex_lock(&c->lock);
        c->refs++;
        pthread_mutex_unlock(&c->lock);
        return c;
}

StoreConns *store_conns_unref(StoreConns *c) {
        bool last;

        if (!c)
                return NULL;
        pthread_mutex_lock(&c->lock);
        last = --c->refs == 0;
        pthread_mutex_unlock(&c->lock);
        if (!last)
                return NULL;
        for (unsigned k = 0; k < 2; k++)
                while (c->kept[k]) {
                        Store *s = c->kept[k];
                        c->kept[k] = s->next;
                        store_close(s);
                }
        close(c->state_fd);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}

int store_conns_take(StoreConns *c, bool writer, Store **ret) {
        Store *s;
        int r;

        pthread_mutex_lock(&c->lock);
        s = c->kept[writer];
        if (s) {
                c->kept[writer] = s->next;
                c->n_kept[writer]--;
        }
        pthread_mutex_unlock(&c->lock);
        if (!s) {
                r = (writer ? store_open_writer : store_open_reader)(c->state_fd, &s);
                if (r < 0)
                        return r;
                s->writer = writer;
        }
        s->next = NULL;
        *ret = s;
        return 0;
}

void store_conns_put(StoreConns *c, Store *s) {
        if (!s)
                return;
        pthread_mutex_lock(&c->lock);
        /* One left inside a transaction is closed: its next user would find it open. */
        if (c->n_kept[s->writer] < SBX_STORE_CONNS_KEPT && sqlite3_get_autocommit(s->db)) {
                s->next = c->kept[s->writer];
                c->kept[s->writer] = s;
                c->n_kept[s->writer]++;
                s = NULL;
        }
        pthread_mutex_unlock(&c->lock);
        store_close(s);
}

unsigned store_migrated_from(const Store *s) {
        return s->migrated_from;
}

Store *store_close(Store *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(s->hot); i++)
                sqlite3_finalize(s->hot[i]);
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

/* s->hot[which] (of sql, always the same for it), prepared on first use;
 * the caller holds it with _cleanup_hot_. */
static int prepare_hot(Store *s, HotStatement which, const char *sql, sqlite3_stmt **ret) {
        int r;

        if (!s->hot[which]) {
                r = sql_err(sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->hot[which], NULL));
                if (r < 0)
                        return r;
        }
        *ret = s->hot[which];
        return 0;
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
        r = prepare(s, "INSERT INTO sandboxes VALUES (?,?,?,?,?,?,?,?,?)", &st);
        if (r >= 0) {
                sqlite3_bind_text(st, 1, sb->id, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 2, sb->name, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 3, sb->owner_uid);
                sqlite3_bind_text(st, 4, sb->source_dir, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 5, (sqlite3_int64) sb->memory_bytes);
                sqlite3_bind_int64(st, 6, sb->pids_max);
                sqlite3_bind_int64(st, 7, sb->created_unix);
                sqlite3_bind_int64(st, 8, sb->cpu_weight);
                sqlite3_bind_text(st, 9, sb->egress[0] ? sb->egress : "none", -1, SQLITE_STATIC);
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
                    " s.created_unix, (SELECT MAX(seq) FROM layers l WHERE l.sandbox = s.id), s.cpu_weight, s.id,"
                    " s.egress FROM sandboxes s ORDER BY s.name",
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
                strlcpy(sb.egress, (const char *) sqlite3_column_text(st, 9), sizeof(sb.egress));
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

/* The rows of table (sandbox ?1) whose layer's record is whole. */
#define LAYER_COMMITTED(table) \
        "NOT EXISTS (SELECT 1 FROM layers_pending p WHERE p.sandbox = ?1 AND p.seq = " table ".seq)"

/* sql, its first two parameters the (sandbox, seq) of a layer. */
static int prepare_for_layer(Store *s, const char *sql, const char *sandbox, uint32_t seq, sqlite3_stmt **ret) {
        int r = prepare(s, sql, ret);

        if (r < 0)
                return r;
        sqlite3_bind_text(*ret, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(*ret, 2, seq);
        return 0;
}

/* One statement on the (sandbox, seq) of a layer. */
static int layer_statement(Store *s, const char *sql, const char *sandbox, uint32_t seq) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare_for_layer(s, sql, sandbox, seq, &st);

        return r < 0 ? r : step_done(st);
}

int store_layer_begin(Store *s, const char *sandbox, uint32_t seq, const char *owner, uint32_t changed_paths,
                      int64_t created_unix, const StoreLayerSize *size) {
        int r = store_layer_insert(s, sandbox, seq, owner, changed_paths, created_unix, size);

        if (r < 0)
                return r;
        return layer_statement(s, "INSERT INTO layers_pending VALUES (?,?)", sandbox, seq);
}

int store_layer_commit(Store *s, const char *sandbox, uint32_t seq) {
        return layer_statement(s, "DELETE FROM layers_pending WHERE sandbox = ? AND seq = ?", sandbox, seq);
}

int store_layer_discard(Store *s, const char *sandbox, uint32_t seq) {
        return layer_statement(s, "DELETE FROM layers WHERE sandbox = ? AND seq = ?", sandbox, seq);
}

/* The one row sql (its parameter the sandbox) yields, in *st. */
static int row_of_sandbox(Store *s, const char *sql, const char *sandbox, sqlite3_stmt **st) {
        int r = prepare(s, sql, st), rc;

        if (r < 0)
                return r;
        sqlite3_bind_text(*st, 1, sandbox, -1, SQLITE_STATIC);
        rc = sqlite3_step(*st);
        return rc == SQLITE_ROW ? 0 : (sql_err(rc) ?: -EIO);
}

int store_layer_top(Store *s, const char *sandbox, uint32_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = row_of_sandbox(s, "SELECT COALESCE(MAX(seq), 0) FROM layers WHERE sandbox = ?", sandbox, &st);

        if (r < 0)
                return r;
        *ret = (uint32_t) sqlite3_column_int64(st, 0);
        return 0;
}

int store_sandbox_layers_size(Store *s, const char *sandbox, StoreLayerSize *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = row_of_sandbox(s,
                               "SELECT COALESCE(SUM(bytes), 0), COALESCE(SUM(inodes), 0) FROM layer_totals"
                               " WHERE sandbox = ?",
                               sandbox, &st);

        if (r < 0)
                return r;
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
        _cleanup_hot_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_hot(s, HOT_COMMAND_INSERT,
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
        _cleanup_hot_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare_hot(s, HOT_COMMAND_FINISH,
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

int store_command_egress_set(Store *s, const char *id, const void *audit, size_t len) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "INSERT OR REPLACE INTO command_egress VALUES (?, ?)", &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, audit, (int) len, SQLITE_STATIC);
        return step_done(st);
}

int store_command_egress_get(Store *s, const char *id, void **ret, size_t *ret_len) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        const void *blob;
        void *copy;
        int r, rc, n;

        r = prepare(s, "SELECT audit FROM command_egress WHERE command = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        blob = sqlite3_column_blob(st, 0);
        n = sqlite3_column_bytes(st, 0);
        copy = malloc(n > 0 ? (size_t) n : 1);
        if (!copy)
                return -ENOMEM;
        if (n > 0)
                memcpy(copy, blob, (size_t) n);
        *ret = copy;
        *ret_len = (size_t) n;
        return 0;
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

int store_command_set_session(Store *s, const char *id, const char *workspace_session) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "UPDATE commands SET workspace_session = ? WHERE id = ?", &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, workspace_session, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
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

int store_sync(Store *s) {
        return exec_sql(s, "PRAGMA wal_checkpoint(PASSIVE)");
}

int store_begin(Store *s) {
        return exec_sql(s, "BEGIN IMMEDIATE");
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
        int r = prepare_for_layer(s, "INSERT INTO layer_paths VALUES (?,?,?)", sandbox, seq, &st);

        if (r < 0)
                return r;
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

        r = prepare(s,
                    "SELECT DISTINCT path FROM layer_paths WHERE sandbox = ?1 AND seq > ?2 AND "
                    LAYER_COMMITTED("layer_paths"),
                    &st);
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
                    " (path = ?2 OR substr(?2, 1, length(path) + 1) = path || '/') AND " LAYER_COMMITTED("layer_paths")
                    " LIMIT 1",
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

        r = prepare(s,
                    "SELECT seq, owner, changed_paths, created_unix FROM layers WHERE sandbox = ?1 AND "
                    LAYER_COMMITTED("layers") " ORDER BY seq",
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

/* The newest pending change of a recorded layer to path's record: 1 and
 * *ret_ranges (NULL: the record went), or 0 if none. */
static int blame_pending_get(Store *s, const char *sandbox, const char *path, char **ret_ranges) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        char buf[SBX_PATH_MAX + 1];
        int64_t best_seq = -1, best_i = -1;
        bool best_set = false;
        size_t len = strlen(path);
        int r, rc;

        if (len > SBX_PATH_MAX)
                return 0;
        /* At path itself any change; at an ancestor, one that took its tree. */
        r = prepare(s,
                    "SELECT seq, i, ranges IS NOT NULL FROM blame_pending WHERE sandbox = ?1 AND path = ?2 AND"
                    " (tree OR ?3) AND " LAYER_COMMITTED("blame_pending") " ORDER BY seq DESC, i DESC LIMIT 1",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        memcpy(buf, path, len + 1);
        for (bool self = true;; self = false) {
                char *slash;

                sqlite3_bind_text(st, 2, buf, -1, SQLITE_STATIC);
                sqlite3_bind_int(st, 3, self);
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW) {
                        int64_t seq = sqlite3_column_int64(st, 0), i = sqlite3_column_int64(st, 1);
                        if (seq > best_seq || (seq == best_seq && i > best_i)) {
                                best_seq = seq;
                                best_i = i;
                                best_set = self && sqlite3_column_int(st, 2);
                        }
                } else if (rc != SQLITE_DONE)
                        return sql_err(rc) ?: -EIO;
                sqlite3_reset(st);
                slash = strrchr(buf, '/');
                if (!slash)
                        break;
                *slash = '\0';
        }
        if (best_seq < 0)
                return 0;
        *ret_ranges = NULL;
        if (!best_set)
                return 1;
        sqlite3_finalize(TAKE_PTR(st));
        r = prepare(s, "SELECT ranges FROM blame_pending WHERE sandbox = ? AND seq = ? AND i = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, best_seq);
        sqlite3_bind_int64(st, 3, best_i);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        *ret_ranges = strdup((const char *) sqlite3_column_text(st, 0));
        return *ret_ranges ? 1 : -ENOMEM;
}

int store_blame_get(Store *s, const char *sandbox, const char *path, char **ret_ranges) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        char *copy = NULL;
        int r, rc;

        r = blame_pending_get(s, sandbox, path, &copy);
        if (r != 0) {
                if (r < 0)
                        return r;
                if (!copy)
                        return -ENOENT;
                *ret_ranges = copy;
                return 0;
        }
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

int store_blame_pending_insert(Store *s, const char *sandbox, uint32_t seq, size_t first, const StoreBlameOp *ops,
                               size_t n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare_for_layer(s, "INSERT INTO blame_pending VALUES (?,?,?,?,?,?)", sandbox, seq, &st);

        if (r < 0)
                return r;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                sqlite3_bind_int64(st, 3, (sqlite3_int64) (first + i));
                sqlite3_bind_text(st, 4, ops[i].path, -1, SQLITE_STATIC);
                if (ops[i].ranges)
                        sqlite3_bind_text(st, 5, ops[i].ranges, -1, SQLITE_STATIC);
                else
                        sqlite3_bind_null(st, 5);
                sqlite3_bind_int(st, 6, ops[i].tree);
                r = step_done(st);
                sqlite3_reset(st);
        }
        return r;
}

static void blame_ops_free(StoreBlameOp *ops, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(ops[i].path);
                free(ops[i].ranges);
        }
        free(ops);
}

int store_blame_fold(Store *s, const char *sandbox, size_t max, size_t *ret_folded) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL, *del = NULL;
        StoreBlameOp *ops = calloc(max ?: 1, sizeof(*ops));
        int64_t last_seq = 0, last_i = 0;
        size_t n = 0;
        int r, rc;

        if (!ops)
                return -ENOMEM;
        r = prepare(s,
                    "SELECT seq, i, path, ranges, tree FROM blame_pending WHERE sandbox = ?1 AND "
                    LAYER_COMMITTED("blame_pending") " ORDER BY seq, i LIMIT ?2",
                    &st);
        if (r >= 0) {
                sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, (sqlite3_int64) max);
        }
        while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *ranges = (const char *) sqlite3_column_text(st, 3);
                last_seq = sqlite3_column_int64(st, 0);
                last_i = sqlite3_column_int64(st, 1);
                ops[n].path = strdup((const char *) sqlite3_column_text(st, 2));
                ops[n].ranges = ranges ? strdup(ranges) : NULL;
                ops[n].tree = sqlite3_column_int(st, 4);
                if (!ops[n].path || (ranges && !ops[n].ranges))
                        r = -ENOMEM;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = sql_err(rc) ?: -EIO;
        /* Applied in their order, then gone: a crash between leaves them both, and folding again is the same. */
        if (r >= 0 && n > 0)
                r = store_blame_apply(s, sandbox, ops, n);
        if (r >= 0 && n > 0)
                r = prepare(s, "DELETE FROM blame_pending WHERE sandbox = ? AND (seq, i) <= (?, ?)", &del);
        if (r >= 0 && n > 0) {
                sqlite3_bind_text(del, 1, sandbox, -1, SQLITE_STATIC);
                sqlite3_bind_int64(del, 2, last_seq);
                sqlite3_bind_int64(del, 3, last_i);
                r = step_done(del);
        }
        blame_ops_free(ops, n);
        if (r < 0)
                return r;
        *ret_folded = n;
        return 0;
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
/* st's "SET x = ?1 WHERE y = ?2" with value and key. */
static int step_update_int(sqlite3_stmt *st, int64_t value, const char *key) {
        sqlite3_bind_int64(st, 1, value);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        return step_done(st);
}

static int update_int(Store *s, const char *sql, int64_t value, const char *key) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, sql, &st);

        return r < 0 ? r : step_update_int(st, value, key);
}

int store_claim_touch(Store *s, const char *sandbox, int64_t last_used_unix) {
        _cleanup_hot_ sqlite3_stmt *st = NULL;
        int r = prepare_hot(s, HOT_CLAIM_TOUCH, "UPDATE claims SET last_used_unix = ? WHERE sandbox = ?", &st);

        return r < 0 ? r : step_update_int(st, last_used_unix, sandbox);
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

/* ---- jobs (issue 18) -------------------------------------------------------------- */

/* A row (id, uid, info) of the table sql inserts into (jobs, versions). */
static int put_id_uid_info(Store *s, const char *sql, const char *id, int64_t uid, const void *info, size_t info_len) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, sql, &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, uid);
        sqlite3_bind_blob(st, 3, info, (int) info_len, SQLITE_STATIC);
        return step_done(st);
}

/* The row that sql deletes, by its id. */
static int delete_id(Store *s, const char *sql, const char *id) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, sql, &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_job_put(Store *s, const char *id, int64_t uid, const void *info, size_t info_len) {
        return put_id_uid_info(s, "INSERT OR REPLACE INTO jobs VALUES (?,?,?)", id, uid, info, info_len);
}

int store_job_delete(Store *s, const char *id) {
        return delete_id(s, "DELETE FROM jobs WHERE id = ?", id);
}

/* The rows (id, uid, info) that sql selects, to cb. */
static int foreach_id_uid_info(Store *s, const char *sql, StoreRowFn cb, void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, sql, &st), rc;

        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = cb((const char *) sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1),
                       sqlite3_column_blob(st, 2), (size_t) sqlite3_column_bytes(st, 2), userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

int store_job_foreach(Store *s, StoreRowFn cb, void *userdata) {
        return foreach_id_uid_info(s, "SELECT id, uid, info FROM jobs", cb, userdata);
}

/* ---- boxes ---------------------------------------------------------------------- */

int store_box_put(Store *s, const char *id, int64_t uid, const char *sandbox, const void *info, size_t info_len) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "INSERT OR REPLACE INTO boxes VALUES (?,?,?,?)", &st);

        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, uid);
        sqlite3_bind_text(st, 3, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 4, info, (int) info_len, SQLITE_STATIC);
        return step_done(st);
}

int store_box_foreach(Store *s, StoreRowFn cb, void *userdata) {
        return foreach_id_uid_info(s, "SELECT id, uid, info FROM boxes", cb, userdata);
}

/* ---- artifacts ------------------------------------------------------------------ */

#define ARTIFACT_COLUMNS "handle, owner_uid, sandbox, command, created_usec, expires_usec, bytes"

int store_artifact_insert(Store *s, const StoreArtifact *a) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "INSERT INTO artifacts (" ARTIFACT_COLUMNS ") VALUES (?,?,?,?,?,?,?)", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, a->handle, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (sqlite3_int64) a->owner_uid);
        sqlite3_bind_text(st, 3, a->sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, a->command, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, a->created_usec);
        sqlite3_bind_int64(st, 6, a->expires_usec);
        sqlite3_bind_int64(st, 7, (sqlite3_int64) a->bytes);
        return step_done(st);
}

/* The one artifact st selects (ARTIFACT_COLUMNS), or -ENOENT. */
static int step_artifact(sqlite3_stmt *st, StoreArtifact *ret) {
        int rc = sqlite3_step(st);

        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        *ret = (StoreArtifact) {
                .owner_uid = (uid_t) sqlite3_column_int64(st, 1),
                .created_usec = sqlite3_column_int64(st, 4),
                .expires_usec = sqlite3_column_int64(st, 5),
                .bytes = (uint64_t) sqlite3_column_int64(st, 6),
        };
        strlcpy(ret->handle, (const char *) sqlite3_column_text(st, 0), sizeof(ret->handle));
        strlcpy(ret->sandbox, (const char *) sqlite3_column_text(st, 2), sizeof(ret->sandbox));
        strlcpy(ret->command, (const char *) sqlite3_column_text(st, 3), sizeof(ret->command));
        return 0;
}

int store_artifact_get(Store *s, const char *handle, StoreArtifact *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE handle = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, handle, -1, SQLITE_STATIC);
        return step_artifact(st, ret);
}

int store_artifact_oldest(Store *s, int64_t expired_before_usec, StoreArtifact *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE expires_usec <= ?"
                       " ORDER BY created_usec LIMIT 1", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, expired_before_usec);
        return step_artifact(st, ret);
}

int store_artifact_delete(Store *s, const char *handle) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "DELETE FROM artifacts WHERE handle = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, handle, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_artifact_unpacked_foreach(Store *s, int (*cb)(const StoreArtifact *a, void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        StoreArtifact a;
        int r;

        r = prepare(s, "SELECT " ARTIFACT_COLUMNS " FROM artifacts WHERE handle NOT IN (SELECT handle FROM artifact_packed)"
                       " ORDER BY created_usec", &st);
        if (r < 0)
                return r;
        while ((r = step_artifact(st, &a)) >= 0) {
                r = cb(&a, userdata);
                if (r < 0)
                        return r;
        }
        return r == -ENOENT ? 0 : r;
}

int store_artifact_set_packed(Store *s, const char *handle, uint64_t bytes) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = prepare(s, "INSERT OR REPLACE INTO artifact_packed (handle, bytes) "
                       "SELECT handle, ? FROM artifacts WHERE handle = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, (sqlite3_int64) bytes);
        sqlite3_bind_text(st, 2, handle, -1, SQLITE_STATIC);
        return step_done(st);
}

int store_artifacts_usage(Store *s, int64_t owner_uid, unsigned *ret_count, uint64_t *ret_bytes,
                          uint64_t *ret_raw_bytes) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r, rc;

        r = prepare(s, "SELECT count(*), coalesce(sum(coalesce(p.bytes, a.bytes)), 0), coalesce(sum(a.bytes), 0) "
                       "FROM artifacts a LEFT JOIN artifact_packed p USING (handle) WHERE ?1 < 0 OR owner_uid = ?1",
                    &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, owner_uid);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return sql_err(rc) ?: -EIO;
        *ret_count = (unsigned) sqlite3_column_int64(st, 0);
        *ret_bytes = (uint64_t) sqlite3_column_int64(st, 1);
        if (ret_raw_bytes)
                *ret_raw_bytes = (uint64_t) sqlite3_column_int64(st, 2);
        return 0;
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

/* ---- secrets of the boxes set (issue 21) ------------------------------------------- */

int store_secret_put(Store *s, int64_t owner_uid, const char *name, const void *value, size_t len,
                     int64_t updated_unix) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "INSERT OR REPLACE INTO secrets VALUES (?,?,?,?)", &st);

        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, owner_uid);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 3, value, (int) len, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, updated_unix);
        return step_done(st);
}

int store_secret_delete(Store *s, int64_t owner_uid, const char *name) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, "DELETE FROM secrets WHERE owner_uid = ? AND name = ?", &st);

        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, owner_uid);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        r = step_done(st);
        if (r < 0)
                return r;
        return sqlite3_changes(s->db) > 0 ? 0 : -ENOENT;
}

int store_secret_foreach(Store *s, int64_t owner_uid, bool values,
                         int (*cb)(const StoreSecret *secret, void *userdata), void *userdata) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(s, values ? "SELECT name, length(value), updated_unix, value FROM secrets "
                                    "WHERE owner_uid = ? ORDER BY name"
                                  : "SELECT name, length(value), updated_unix FROM secrets "
                                    "WHERE owner_uid = ? ORDER BY name", &st), rc;

        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, owner_uid);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                StoreSecret x = {
                        .name = (const char *) sqlite3_column_text(st, 0),
                        .len = (size_t) sqlite3_column_int64(st, 1),
                        .updated_unix = sqlite3_column_int64(st, 2),
                        .value = values ? sqlite3_column_blob(st, 3) : NULL,
                };
                r = cb(&x, userdata);
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : (sql_err(rc) ?: -EIO);
}

/* ---- versions of the boxes set (issue 21) ------------------------------------------ */

int store_version_put(Store *s, const char *id, int64_t owner_uid, const void *info, size_t len) {
        return put_id_uid_info(s, "INSERT INTO versions VALUES (?,?,?)", id, owner_uid, info, len);
}

int store_version_delete(Store *s, const char *id) {
        return delete_id(s, "DELETE FROM versions WHERE id = ?", id);
}

int store_version_foreach(Store *s, StoreRowFn cb, void *userdata) {
        return foreach_id_uid_info(s, "SELECT id, owner_uid, info FROM versions ORDER BY rowid", cb, userdata);
}
