/* The metadata store: a database of schema 1 (records keyed by sandbox
 * name, as sbxd wrote it before issue 13) is migrated to schema 2 (keyed by
 * an immutable id) when opened; a sandbox's records go with it in one
 * transaction; commands of an earlier sandbox of the same name are not
 * handed to the new one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/layer.h"
#include "data/store.h"
#include "macro.h"

/* What sbxd wrote before schema versions (user_version 0). */
static const char schema_1[] =
        "CREATE TABLE sandboxes (name TEXT PRIMARY KEY, owner_uid INTEGER NOT NULL, source_dir TEXT NOT NULL,"
        "  memory_bytes INTEGER NOT NULL, pids_max INTEGER NOT NULL, created_unix INTEGER NOT NULL,"
        "  cpu_weight INTEGER NOT NULL DEFAULT 100);"
        "CREATE TABLE layers (sandbox TEXT NOT NULL REFERENCES sandboxes(name) ON DELETE CASCADE,"
        "  seq INTEGER NOT NULL, owner TEXT NOT NULL, changed_paths INTEGER NOT NULL,"
        "  created_unix INTEGER NOT NULL, PRIMARY KEY (sandbox, seq));"
        "CREATE TABLE commands (id TEXT PRIMARY KEY, sandbox TEXT NOT NULL, workspace_session TEXT NOT NULL,"
        "  status TEXT NOT NULL, exit_code INTEGER, signal INTEGER NOT NULL DEFAULT 0,"
        "  end_reason TEXT NOT NULL DEFAULT '', started_usec INTEGER NOT NULL,"
        "  ended_usec INTEGER NOT NULL DEFAULT 0, raw_bytes INTEGER NOT NULL DEFAULT 0, cmd TEXT NOT NULL DEFAULT '');"
        "CREATE INDEX commands_by_sandbox ON commands(sandbox, started_usec);"
        "CREATE TABLE layer_paths (sandbox TEXT NOT NULL, seq INTEGER NOT NULL, path TEXT NOT NULL,"
        "  FOREIGN KEY (sandbox, seq) REFERENCES layers(sandbox, seq) ON DELETE CASCADE);"
        "CREATE INDEX layer_paths_by_seq ON layer_paths(sandbox, seq);"
        "CREATE INDEX layer_paths_by_path ON layer_paths(sandbox, path);"
        "CREATE TABLE blame (sandbox TEXT NOT NULL REFERENCES sandboxes(name) ON DELETE CASCADE,"
        "  path TEXT NOT NULL, ranges TEXT NOT NULL, PRIMARY KEY (sandbox, path));"
        "CREATE TABLE squashes (sandbox TEXT PRIMARY KEY REFERENCES sandboxes(name) ON DELETE CASCADE,"
        "  squashed INTEGER NOT NULL);";

/* proj was created at t=2000 s; cmd-old ran in an earlier sandbox "proj" (t=1000 s),
 * cmd-gone in a sandbox deleted since, cmd-new in this one. */
static const char rows_1[] =
        "INSERT INTO sandboxes VALUES ('proj', 1000, '/src/proj', 1073741824, 512, 2000, 100);"
        "INSERT INTO layers VALUES ('proj', 0, 'original', 0, 2000), ('proj', 1, 'workspace_session:ws-1', 1, 2100);"
        "INSERT INTO layer_paths VALUES ('proj', 1, 'a.txt');"
        "INSERT INTO blame VALUES ('proj', 'a.txt', 'R');"
        "INSERT INTO squashes VALUES ('proj', 0);"
        "INSERT INTO commands (id, sandbox, workspace_session, status, started_usec, cmd) VALUES"
        "  ('cmd-old', 'proj', 'ws-0', 'ok', 1000000000, 'echo old-owner'),"
        "  ('cmd-gone', 'gone', 'ws-9', 'ok', 1500000000, 'echo gone'),"
        "  ('cmd-new', 'proj', 'ws-1', 'ok', 2100000000, 'echo new');";

typedef struct Fixture {
        char dir[64];
        int dirfd;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        strcpy(f->dir, "/tmp/sbx-test-store-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(f->dirfd >= 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;
        assert_int_equal(tree_remove_at(AT_FDCWD, f->dir), 0);
        safe_close(f->dirfd);
        free(f);
        return 0;
}

static void write_schema_1(const Fixture *f) {
        char path[128];
        sqlite3 *db;

        snprintf(path, sizeof(path), "%s/sbx.db", f->dir);
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, schema_1, NULL, NULL, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, rows_1, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
}

static int first_sandbox(const StoreSandbox *sb, void *userdata) {
        StoreSandbox *ret = userdata;
        *ret = *sb;
        ret->source_dir = NULL;
        return 0;
}

static int count_layers(uint32_t seq, const char *owner, uint32_t changed, int64_t created, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

static int note_command(const char *id, void *userdata) {
        strcpy(userdata, id);
        return 0;
}

static void test_migrate_from_schema_1(void **state) {
        Fixture *f = *state;
        StoreSandbox sb = {};
        StoreCommand c;
        Store *s = NULL;
        char *ranges = NULL, deleted[64] = "";
        unsigned layers = 0;
        uint32_t squashed = 99;

        write_schema_1(f);
        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_migrated_from(s), 1);
        assert_int_equal(store_sandbox_foreach(s, first_sandbox, &sb), 0);
        assert_string_equal(sb.name, "proj");
        assert_int_equal(strlen(sb.id), SBX_SANDBOX_ID_SIZE - 1);
        assert_memory_equal(sb.id, "sb-", 3);
        assert_int_equal(sb.owner_uid, 1000);
        assert_int_equal(sb.top_layer, 1);
        /* every record follows the sandbox to its id */
        assert_int_equal(store_layer_foreach(s, sb.id, count_layers, &layers), 0);
        assert_int_equal(layers, 2);
        assert_int_equal(store_path_changed_since_import(s, sb.id, "a.txt"), 1);
        assert_int_equal(store_blame_get(s, sb.id, "a.txt", &ranges), 0);
        assert_string_equal(ranges, "R");
        free(ranges);
        assert_int_equal(store_squash_get(s, sb.id, &squashed), 0);
        assert_int_equal(squashed, 0);
        assert_int_equal(store_command_get(s, "cmd-new", &c), 0);
        assert_string_equal(c.sandbox, sb.id);
        /* a command of an earlier "proj", and one of a deleted sandbox, are not handed over */
        assert_int_equal(store_command_get(s, "cmd-old", &c), -ENOENT);
        assert_int_equal(store_command_get(s, "cmd-gone", &c), -ENOENT);
        assert_int_equal(store_command_exists(s, "cmd-old"), 0);
        assert_int_equal(store_sandbox_known(s, sb.id), 1);
        assert_int_equal(store_sandbox_known(s, "proj"), 1);
        s = store_close(s);

        /* the current schema now: opened again, nothing to migrate */
        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_migrated_from(s), 0);
        /* the delete takes every record, in one transaction, and names the commands */
        assert_int_equal(store_sandbox_delete(s, sb.id, note_command, deleted), 0);
        assert_string_equal(deleted, "cmd-new");
        assert_int_equal(store_command_exists(s, "cmd-new"), 0);
        layers = 0;
        assert_int_equal(store_layer_foreach(s, sb.id, count_layers, &layers), 0);
        assert_int_equal(layers, 0);
        assert_int_equal(store_blame_get(s, sb.id, "a.txt", &ranges), -ENOENT);
        assert_int_equal(store_path_changed_since_import(s, sb.id, "a.txt"), 0);
        assert_int_equal(store_sandbox_known(s, "proj"), 0);
        assert_int_equal(store_sandbox_delete(s, sb.id, note_command, deleted), -ENOENT);
        store_close(s);
}

/* A name used again gets a new id; the new sandbox sees none of the old one's records. */
static void test_reused_name(void **state) {
        Fixture *f = *state;
        StoreSandbox a = { .id = "sb-000000000000000a", .name = "proj", .owner_uid = 1000, .source_dir = (char *) "/a",
                           .created_unix = 10 };
        StoreSandbox b = { .id = "sb-000000000000000b", .name = "proj", .owner_uid = 2000, .source_dir = (char *) "/b",
                           .created_unix = 20 };
        StoreCommand c = { .id = "cmd-a", .workspace_session = "ws-a", .status = "ok" };
        char deleted[64] = "";
        Store *s = NULL;

        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_migrated_from(s), 0);
        assert_int_equal(store_sandbox_insert(s, &a, "original"), 0);
        strcpy(c.sandbox, a.id);
        assert_int_equal(store_command_insert(s, &c, "echo a"), 0);
        /* the name is taken while a lives */
        assert_int_equal(store_sandbox_insert(s, &b, "original"), -EEXIST);
        assert_int_equal(store_sandbox_delete(s, a.id, note_command, deleted), 0);
        assert_string_equal(deleted, "cmd-a");
        assert_int_equal(store_sandbox_insert(s, &b, "original"), 0);
        assert_int_equal(store_command_exists(s, "cmd-a"), 0);
        /* no record may name a sandbox that does not exist */
        strcpy(c.id, "cmd-x");
        assert_int_equal(store_command_insert(s, &c, "echo x"), -EEXIST);
        store_close(s);
}

/* What schema 3 added to schema 2 (transcript sizes and evictions, layer sizes and their totals), taken away. */
static const char back_to_schema_2[] =
        "DROP INDEX commands_kept; DROP INDEX commands_kept_by_sandbox;"
        "ALTER TABLE commands DROP COLUMN transcript_bytes;"
        "ALTER TABLE commands DROP COLUMN transcript_files;"
        "ALTER TABLE commands DROP COLUMN evicted;"
        "DROP TRIGGER layer_totals_add; DROP TRIGGER layer_totals_sub; DROP TABLE layer_totals;"
        "ALTER TABLE layers DROP COLUMN bytes; ALTER TABLE layers DROP COLUMN inodes;"
        "ALTER TABLE sandboxes DROP COLUMN egress;"
        "PRAGMA user_version = 2;";

static void exec_db(const Fixture *f, const char *sql) {
        char path[128];
        sqlite3 *db;

        snprintf(path, sizeof(path), "%s/sbx.db", f->dir);
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
}

static void add_command(Store *s, const char *id, const char *sandbox, int64_t started, const char *status) {
        StoreCommand c = { .started_unix_usec = started };

        strcpy(c.id, id);
        strcpy(c.sandbox, sandbox);
        strcpy(c.workspace_session, "ws-1");
        strcpy(c.status, "running");
        assert_int_equal(store_command_insert(s, &c, "true"), 0);
        if (strcmp(status, "running") == 0)
                return;
        strcpy(c.status, status);
        c.transcript_bytes = 4096;
        c.transcript_files = 2;
        assert_int_equal(store_command_finish(s, &c), 0);
}

static int sum_usage(const char *sandbox, uint64_t bytes, uint64_t files, void *userdata) {
        uint64_t *sum = userdata;

        sum[0] += bytes;
        sum[1] += files;
        return 0;
}

/* Schema 2 (no transcript columns) is migrated to 3: its commands' sizes are
 * unknown until counted; the oldest ended command with a transcript kept is
 * found per sandbox, per owner and of all; an evicted one says why. */
static void test_transcripts(void **state) {
        Fixture *f = *state;
        StoreSandbox a = { .id = "sb-a", .name = "a", .owner_uid = 7, .source_dir = (char *) "/src" };
        StoreSandbox b = { .id = "sb-b", .name = "b", .owner_uid = 8, .source_dir = (char *) "/src" };
        StoreIdList unknown = {};
        uint64_t sum[2] = {};
        StoreCommand c;
        Store *s = NULL;

        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_sandbox_insert(s, &a, "original"), 0);
        assert_int_equal(store_sandbox_insert(s, &b, "original"), 0);
        add_command(s, "cmd-a1", "sb-a", 100, "ok");
        add_command(s, "cmd-b1", "sb-b", 200, "ok");
        s = store_close(s);
        /* back to schema 2, as sbxd wrote it before issue 15 */
        exec_db(f, back_to_schema_2);
        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_migrated_from(s), 2);
        assert_int_equal(store_command_get(s, "cmd-a1", &c), 0);
        assert_int_equal(c.transcript_files, -1);
        assert_string_equal(c.evicted, "");
        assert_int_equal(store_transcript_unknown_foreach(s, store_id_list_add, &unknown), 0);
        assert_int_equal(unknown.n, 2);
        free(unknown.ids);
        /* not counted yet: no candidate */
        assert_int_equal(store_transcript_oldest(s, NULL, -1, &c), -ENOENT);
        assert_int_equal(store_command_set_transcript(s, "cmd-a1", 8192, 2), 0);
        assert_int_equal(store_command_set_transcript(s, "cmd-b1", 4096, 3), 0);

        add_command(s, "cmd-a2", "sb-a", 300, "error");
        add_command(s, "cmd-a3", "sb-a", 50, "running");      /* running: never a candidate */
        assert_int_equal(store_transcript_usage_foreach(s, sum_usage, sum), 0);
        assert_int_equal(sum[0], 8192 + 4096 + 4096);
        assert_int_equal(sum[1], 2 + 3 + 2);

        assert_int_equal(store_transcript_oldest(s, NULL, -1, &c), 0);
        assert_string_equal(c.id, "cmd-a1");
        assert_int_equal(c.transcript_bytes, 8192);
        assert_int_equal(store_transcript_oldest(s, "sb-b", -1, &c), 0);
        assert_string_equal(c.id, "cmd-b1");
        assert_int_equal(store_transcript_oldest(s, NULL, 8, &c), 0);
        assert_string_equal(c.id, "cmd-b1");
        assert_int_equal(store_transcript_oldest(s, NULL, 9, &c), -ENOENT);

        assert_int_equal(store_command_evict(s, "cmd-a1", "sandbox_transcripts_max_bytes = 1048576"), 0);
        assert_int_equal(store_command_get(s, "cmd-a1", &c), 0);
        assert_string_equal(c.evicted, "sandbox_transcripts_max_bytes = 1048576");
        assert_int_equal(c.transcript_bytes, 0);
        assert_int_equal(store_transcript_kept(s, "cmd-a1"), 0);
        assert_int_equal(store_transcript_kept(s, "cmd-a2"), 1);
        assert_int_equal(store_command_exists(s, "cmd-a1"), 1);
        assert_int_equal(store_transcript_oldest(s, "sb-a", -1, &c), 0);
        assert_string_equal(c.id, "cmd-a2");
        store_close(s);
}

static int note_egress(const StoreSandbox *sb, void *userdata) {
        char *out = userdata;

        strcat(out, sb->name);
        strcat(out, "=");
        strcat(out, sb->egress);
        strcat(out, " ");
        return 0;
}

/* A sandbox's egress policy is kept; schema 3's sandboxes get none. */
static void test_egress(void **state) {
        Fixture *f = *state;
        StoreSandbox a = { .id = "sb-a", .name = "a", .source_dir = (char *) "/a", .egress = "open" };
        StoreSandbox b = { .id = "sb-b", .name = "b", .source_dir = (char *) "/b" };
        char seen[64] = "";
        Store *s = NULL;

        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_sandbox_insert(s, &a, "original"), 0);
        assert_int_equal(store_sandbox_insert(s, &b, "original"), 0);
        assert_int_equal(store_sandbox_foreach(s, note_egress, seen), 0);
        assert_string_equal(seen, "a=open b=none ");
        s = store_close(s);
        exec_db(f, "ALTER TABLE sandboxes DROP COLUMN egress; PRAGMA user_version = 3;");
        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_migrated_from(s), 3);
        seen[0] = '\0';
        assert_int_equal(store_sandbox_foreach(s, note_egress, seen), 0);
        assert_string_equal(seen, "a=none b=none ");
        store_close(s);
}

/* Layer sizes: schema 2 gets them as 0; the sums by sandbox, owner and all
 * leave out each sandbox's imported layer 0. */
static void test_layer_sizes(void **state) {
        Fixture *f = *state;
        StoreSandbox a = { .id = "sb-000000000000000a", .name = "a", .owner_uid = 1000, .source_dir = (char *) "/a" };
        StoreSandbox b = { .id = "sb-000000000000000b", .name = "b", .owner_uid = 1000, .source_dir = (char *) "/b" };
        StoreSandbox c = { .id = "sb-000000000000000c", .name = "c", .owner_uid = 2000, .source_dir = (char *) "/c" };
        StoreLayerSize one = { .bytes = 4096, .inodes = 2 }, big = { .bytes = 1 << 20, .inodes = 5 };
        StoreLayersSize sum;
        StoreLayerSize own;
        Store *s = NULL;

        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_sandbox_insert(s, &a, "original"), 0);
        assert_int_equal(store_layer_insert(s, a.id, 1, "w", 1, 0, NULL), 0);
        s = store_close(s);
        /* Back to schema 2: no size columns. */
        exec_db(f, back_to_schema_2);

        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_migrated_from(s), 2);
        assert_int_equal(store_sandbox_layers_size(s, a.id, &own), 0);
        assert_int_equal(own.bytes, 0);
        assert_int_equal(store_sandbox_insert(s, &b, "original"), 0);
        assert_int_equal(store_sandbox_insert(s, &c, "original"), 0);
        assert_int_equal(store_layer_insert(s, a.id, 2, "w", 1, 0, &one), 0);
        assert_int_equal(store_layer_insert(s, b.id, 1, "w", 1, 0, &big), 0);
        assert_int_equal(store_layer_insert(s, c.id, 1, "w", 1, 0, &big), 0);
        assert_int_equal(store_layers_size(s, a.id, 1000, &sum), 0);
        assert_int_equal(sum.sandbox.bytes, 4096);
        assert_int_equal(sum.sandbox.inodes, 2);
        assert_int_equal(sum.owner.bytes, 4096 + (1 << 20));
        assert_int_equal(sum.owner.inodes, 7);
        assert_int_equal(sum.all.bytes, 4096 + 2 * (1 << 20));
        assert_int_equal(sum.all.inodes, 12);
        assert_int_equal(store_sandbox_layers_size(s, b.id, &own), 0);
        assert_int_equal(own.bytes, 1 << 20);
        store_close(s);
}

static int count_layer(uint32_t seq, const char *owner, uint32_t changed, int64_t created, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

static unsigned layers_listed(Store *s, const char *sandbox) {
        unsigned n = 0;

        assert_int_equal(store_layer_foreach(s, sandbox, count_layer, &n), 0);
        return n;
}

static void assert_blame(Store *s, const char *sandbox, const char *path, const char *want) {
        char *got = NULL;
        int r = store_blame_get(s, sandbox, path, &got);

        if (!want) {
                assert_int_equal(r, -ENOENT);
                return;
        }
        assert_int_equal(r, 0);
        assert_string_equal(got, want);
        free(got);
}

static void record_layer(Store *s, const char *sandbox, uint32_t seq, const StoreBlameOp *ops, size_t n,
                         bool commit) {
        const char *paths[8];
        StoreLayerSize size = { .bytes = 8192, .inodes = 3 };

        for (size_t i = 0; i < n; i++)
                paths[i] = ops[i].path;
        /* Each step a transaction of its own, as publish_run writes them. */
        assert_int_equal(store_begin(s), 0);
        assert_int_equal(store_layer_begin(s, sandbox, seq, "w", (uint32_t) n, 0, &size), 0);
        assert_int_equal(store_commit(s), 0);
        assert_int_equal(store_begin(s), 0);
        assert_int_equal(store_layer_paths_insert(s, sandbox, seq, paths, n), 0);
        assert_int_equal(store_commit(s), 0);
        assert_int_equal(store_begin(s), 0);
        assert_int_equal(store_blame_pending_insert(s, sandbox, seq, 0, ops, n), 0);
        assert_int_equal(store_commit(s), 0);
        if (commit) {
                assert_int_equal(store_begin_durable(s), 0);
                assert_int_equal(store_layer_commit(s, sandbox, seq), 0);
                assert_int_equal(store_commit(s), 0);
        }
}

/* A layer recorded in steps counts for nobody until its commit (its size
 * counts in the quotas at once); its attribution changes count before the
 * records until folded into them; one left pending is gone at the next open. */
static void test_pending_layer(void **state) {
        Fixture *f = *state;
        StoreSandbox a = { .id = "sb-000000000000000a", .name = "a", .owner_uid = 1000, .source_dir = (char *) "/a" };
        StoreBlameOp first[] = { { .path = (char *) "d/x", .ranges = (char *) "1:1:w1" },
                                 { .path = (char *) "d/y", .ranges = (char *) "1:1:w1" },
                                 { .path = (char *) "z", .ranges = (char *) "1:2:w1" } };
        StoreBlameOp second[] = { { .path = (char *) "d", .tree = true },
                                  { .path = (char *) "z", .ranges = (char *) "1:3:w2" } };
        StoreLayerSize own;
        uint32_t top;
        size_t n;
        Store *s = NULL;

        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_sandbox_insert(s, &a, "original"), 0);
        record_layer(s, a.id, 1, first, ELEMENTSOF(first), false);
        assert_int_equal(layers_listed(s, a.id), 1);
        assert_int_equal(store_path_changed_since_import(s, a.id, "d/x"), 0);
        assert_blame(s, a.id, "d/x", NULL);
        assert_int_equal(store_layer_top(s, a.id, &top), 0);
        assert_int_equal(top, 1);
        assert_int_equal(store_sandbox_layers_size(s, a.id, &own), 0);
        assert_int_equal(own.bytes, 8192);
        assert_int_equal(store_begin_durable(s), 0);
        assert_int_equal(store_layer_commit(s, a.id, 1), 0);
        assert_int_equal(store_commit(s), 0);
        assert_int_equal(layers_listed(s, a.id), 2);
        assert_int_equal(store_path_changed_since_import(s, a.id, "d/x"), 1);
        assert_blame(s, a.id, "d/x", "1:1:w1");
        /* The next layer takes d's tree and rewrites z, still pending in the records. */
        record_layer(s, a.id, 2, second, ELEMENTSOF(second), true);
        assert_blame(s, a.id, "d/x", NULL);
        assert_blame(s, a.id, "d/y", NULL);
        assert_blame(s, a.id, "z", "1:3:w2");
        /* Folded two at a time: the same answers all along, then nothing is left. */
        do {
                assert_int_equal(store_begin(s), 0);
                assert_int_equal(store_blame_fold(s, a.id, 2, &n), 0);
                assert_int_equal(store_commit(s), 0);
                assert_blame(s, a.id, "d/x", NULL);
                assert_blame(s, a.id, "z", "1:3:w2");
        } while (n > 0);
        /* A layer pending when the store closed is gone, with its size, at the next open. */
        record_layer(s, a.id, 3, first, 1, false);
        s = store_close(s);
        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_layer_top(s, a.id, &top), 0);
        assert_int_equal(top, 2);
        assert_int_equal(store_sandbox_layers_size(s, a.id, &own), 0);
        assert_int_equal(own.bytes, 2 * 8192);
        assert_blame(s, a.id, "d/x", NULL);
        store_close(s);
}

/* Connections off the loop are kept for the next work: a writer put back is
 * the one taken next; one put back inside a transaction is closed instead;
 * the set lives while a reference is held, and a writer from it sees what
 * the loop's connection committed. */
static void test_conns(void **state) {
        Fixture *f = *state;
        StoreSandbox a = { .id = "sb-000000000000000a", .name = "a", .owner_uid = 1000, .source_dir = (char *) "/a" };
        StoreConns *c = NULL, *held;
        Store *s = NULL, *w, *w2, *r;
        uint32_t top;

        assert_int_equal(store_open(f->dirfd, &s), 0);
        assert_int_equal(store_sandbox_insert(s, &a, "original"), 0);
        assert_int_equal(store_conns_new(f->dirfd, &c), 0);
        assert_int_equal(store_conns_take(c, true, &w), 0);
        assert_int_equal(store_layer_top(w, a.id, &top), 0);
        assert_int_equal(top, 0);
        store_conns_put(c, w);
        assert_int_equal(store_conns_take(c, true, &w2), 0);
        assert_ptr_equal(w2, w);
        /* A reader is not a writer. */
        assert_int_equal(store_conns_take(c, false, &r), 0);
        assert_ptr_not_equal(r, w2);
        store_conns_put(c, r);
        assert_int_equal(store_begin(w2), 0);
        store_conns_put(c, w2);
        assert_int_equal(store_conns_take(c, true, &w), 0);
        assert_int_equal(store_begin(w), 0);
        assert_int_equal(store_layer_insert(w, a.id, 1, "operation:1", 1, 1, NULL), 0);
        assert_int_equal(store_commit(w), 0);
        /* The set outlives its first reference while a work holds another. */
        held = store_conns_ref(c);
        c = store_conns_unref(c);
        assert_null(c);
        store_conns_put(held, w);
        assert_int_equal(store_conns_take(held, true, &w), 0);
        store_conns_put(held, w);
        held = store_conns_unref(held);
        assert_int_equal(store_layer_top(s, a.id, &top), 0);
        assert_int_equal(top, 1);
        store_close(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_pending_layer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_conns, setup, teardown),
                cmocka_unit_test_setup_teardown(test_migrate_from_schema_1, setup, teardown),
                cmocka_unit_test_setup_teardown(test_transcripts, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reused_name, setup, teardown),
                cmocka_unit_test_setup_teardown(test_layer_sizes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_egress, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
