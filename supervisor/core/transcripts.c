/* Budgets of all transcripts (see transcripts.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "log.h"
#include "macro.h"
#include "sbx-limits.h"
#include "core/sandbox.h"
#include "core/server.h"
#include "core/session.h"
#include "core/transcripts.h"
#include "data/store.h"
#include "data/transcript.h"

/* The most n raw bytes can add to what a transcript stores: 3 bytes each
 * (U+FFFD), index and stream bits of a line each, a block per file, a marker. */
Sandbox *sandbox_find_id(Server *s, const char *id) {
        Sandbox *sb;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (strcmp(sb->id, id) == 0)
                        return sb;
        return NULL;
}

static uint64_t growth_bound(size_t n) {
        return 3 * (uint64_t) n + (uint64_t) n / 2 + 3 * SBX_TRANSCRIPT_BLOCK + 256;
}

/* (Not command_find_live: core/session.c calls this file.) */
static Command *live_of_id(Server *s, const char *id) {
        Command *c;

        TAILQ_FOREACH(c, &s->commands, link)
                if (strcmp(c->rec.id, id) == 0)
                        return c;
        TAILQ_FOREACH(c, &s->ended_commands, link)
                if (strcmp(c->rec.id, id) == 0)
                        return c;
        return NULL;
}

uint64_t transcripts_owner_bytes(const Server *s, uid_t owner) {
        const Sandbox *sb;
        uint64_t sum = 0;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (sb->owner_uid == owner)
                        sum += sb->transcript_bytes;
        return sum;
}

void transcripts_uncount(Server *s, Sandbox *sb, uint64_t bytes, uint64_t files) {
        s->transcript_bytes -= MIN(s->transcript_bytes, bytes);
        s->transcript_files -= MIN(s->transcript_files, files);
        if (sb) {
                sb->transcript_bytes -= MIN(sb->transcript_bytes, bytes);
                sb->transcript_files -= MIN(sb->transcript_files, files);
        }
}

static void count(Server *s, Sandbox *sb, uint64_t bytes, uint64_t files) {
        s->transcript_bytes += bytes;
        s->transcript_files += files;
        if (sb) {
                sb->transcript_bytes += bytes;
                sb->transcript_files += files;
        }
}

void transcripts_forget_kept(Sandbox *sb, const char *id) {
        if (sb && sb->query_kept && strcmp(sb->query_kept_id, id) == 0)
                sb->query_kept = transcript_free(sb->query_kept);
}

/* Evict the transcript of the ended command rec to stay within the budget reason. */
static int evict(Server *s, const StoreCommand *rec, const char *reason) {
        Command *c = live_of_id(s, rec->id);
        uint64_t bytes = rec->transcript_bytes, files = (uint64_t) MAX(rec->transcript_files, 0);
        int r;

        /* The record first: a crash in between leaves files that sbxctl gc removes, never a record of a
         * transcript that is gone. */
        r = store_command_evict(s->store, rec->id, reason);
        if (r < 0)
                return r;
        if (c) {
                c->transcript = transcript_free(c->transcript);
                strlcpy(c->rec.evicted, reason, sizeof(c->rec.evicted));
        }
        transcripts_forget_kept(sandbox_find_id(s, rec->sandbox), rec->id);
        r = transcript_remove(s->transcripts_fd, rec->id);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Failed to remove the transcript of %s, ignoring: %m", rec->id);
        transcripts_uncount(s, sandbox_find_id(s, rec->sandbox), bytes, files);
        log_info("Evicted the transcript of %s (%" PRIu64 " bytes, sandbox %s) to stay within %s", rec->id, bytes,
                 rec->sandbox, reason);
        return 0;
}

int transcripts_compressed(Server *s, const char *id, uint64_t bytes, unsigned files, Transcript **t) {
        Command *c = live_of_id(s, id);
        StoreCommand rec;
        uint64_t before;

        if (store_command_get(s->store, id, &rec) < 0 || rec.evicted[0]) {
                (void) transcript_remove(s->transcripts_fd, id);
                return -ESTALE;
        }
        before = rec.transcript_bytes;
        transcripts_forget_kept(sandbox_find_id(s, rec.sandbox), id);     /* it read the plain text */
        if (c) {
                before = c->charged_bytes;
                c->charged_bytes = c->rec.transcript_bytes = bytes;
                if (c->transcript && c->finished) {
                        transcript_free(c->transcript);
                        c->transcript = TAKE_PTR(*t);
                }
        }
        transcripts_uncount(s, sandbox_find_id(s, rec.sandbox), before - MIN(before, bytes), 0);
        return store_command_set_transcript(s->store, id, bytes, (int) files);
}

int transcripts_evict(Server *s, const char *id, const char *reason) {
        StoreCommand rec;
        int r = store_command_get(s->store, id, &rec);

        if (r < 0)
                return r;
        if (rec.evicted[0] || strcmp(rec.status, "running") == 0)
                return 0;
        return evict(s, &rec, reason);
}

/* Evict the oldest ended transcript of the scope (sandbox, or owner >= 0, or all); -ENOENT if none. */
static int evict_oldest(Server *s, const char *sandbox, int64_t owner, const char *reason) {
        StoreCommand rec;
        int r = store_transcript_oldest(s->store, sandbox, owner, &rec);

        return r < 0 ? r : evict(s, &rec, reason);
}

int transcripts_admit(Server *s, const Sandbox *sb, unsigned files, char *ret_error, size_t error_size) {
        char reason[96];
        int r;

        snprintf(reason, sizeof(reason), "transcripts_max_inodes = %" PRIu64, s->cfg.transcripts_max_inodes);
        while (s->transcript_files + files > s->cfg.transcripts_max_inodes) {
                r = evict_oldest(s, NULL, -1, reason);
                if (r == -ENOENT) {
                        snprintf(ret_error, error_size,
                                 "transcripts_max_inodes (%" PRIu64 ") reached: transcripts use %" PRIu64
                                 " files, %u more asked, and none is of an ended command",
                                 s->cfg.transcripts_max_inodes, s->transcript_files, files);
                        return -ENOSPC;
                }
                if (r < 0) {
                        snprintf(ret_error, error_size, "cannot evict a transcript: %s", strerror(-r));
                        return r;
                }
        }
        return 0;
}

void transcripts_started(Server *s, Command *c) {
        c->charged_files = transcript_files(c->transcript);
        c->charged_bytes = transcript_stored_bytes(c->transcript);
        count(s, c->session->sandbox, c->charged_bytes, c->charged_files);
}

/* One budget: its name and value, what its scope stores, whom it evicts. */
typedef struct Budget {
        const char *key;
        uint64_t max, used;
        const char *sandbox;    /* the scope: this sandbox, */
        int64_t owner;          /* or the sandboxes of this owner, or (both unset) all */
} Budget;

enum { BUDGET_SANDBOX, BUDGET_OWNER, BUDGET_ALL, _BUDGET_MAX };

/* The budgets a command of sb is within, with what their scopes store now. */
static void budgets_of(const Server *s, const Sandbox *sb, Budget b[static _BUDGET_MAX]) {
        b[BUDGET_SANDBOX] = (Budget) { "sandbox_transcripts_max_bytes", s->cfg.sandbox_transcripts_max_bytes,
                                       sb->transcript_bytes, sb->id, -1 };
        b[BUDGET_OWNER] = (Budget) { "owner_transcripts_max_bytes", s->cfg.owner_transcripts_max_bytes,
                                     transcripts_owner_bytes(s, sb->owner_uid), NULL, (int64_t) sb->owner_uid };
        b[BUDGET_ALL] = (Budget) { "transcripts_max_bytes", s->transcripts_max_bytes, s->transcript_bytes, NULL, -1 };
}

static uint64_t budget_room(const Budget *b) {
        return b->used < b->max ? b->max - b->used : 0;
}

static void budget_reason(const Budget *b, char buf[static 96]) {
        snprintf(buf, 96, "%s = %" PRIu64, b->key, b->max);
}

void transcripts_fit(Server *s, Command *c, size_t n) {
        const Sandbox *sb = c->session->sandbox;
        uint64_t want = growth_bound(n), room = UINT64_MAX;
        Budget b[_BUDGET_MAX];
        unsigned tight = 0;
        char reason[96];

        if (!c->transcript || transcript_capped(c->transcript))
                return;
        budgets_of(s, sb, b);
        for (unsigned i = 0; i < _BUDGET_MAX; i++) {
                if (budget_room(&b[i]) >= want)
                        continue;
                budget_reason(&b[i], reason);
                /* An eviction frees room in every scope the evicted one was in. */
                while (budget_room(&b[i]) < want && evict_oldest(s, b[i].sandbox, b[i].owner, reason) >= 0)
                        budgets_of(s, sb, b);
        }
        for (unsigned i = 0; i < _BUDGET_MAX; i++)
                if (budget_room(&b[i]) < room) {
                        room = budget_room(&b[i]);
                        tight = i;
                }
        budget_reason(&b[tight], reason);
        transcript_set_limit(c->transcript, room > UINT64_MAX - c->charged_bytes ? UINT64_MAX : c->charged_bytes + room,
                             reason);
}

void transcripts_charge(Server *s, Command *c) {
        uint64_t now;

        if (!c->transcript)
                return;
        now = transcript_stored_bytes(c->transcript);
        if (now > c->charged_bytes)
                count(s, c->session ? c->session->sandbox : NULL, now - c->charged_bytes, 0);
        c->charged_bytes = MAX(now, c->charged_bytes);
}

static int add_usage(const char *sandbox, uint64_t bytes, uint64_t files, void *userdata) {
        Server *s = userdata;

        count(s, sandbox_find_id(s, sandbox), bytes, files);
        return 0;
}

int transcripts_load(Server *s, unsigned *ret_unrecorded) {
        StoreIdList unknown = {};
        struct statvfs vfs;
        unsigned unrecorded = 0;
        int r;

        r = store_transcript_unknown_foreach(s->store, store_id_list_add, &unknown);
        for (size_t i = 0; r >= 0 && i < unknown.n; i++) {
                StoreCommand rec;
                uint64_t bytes;
                unsigned files;

                r = transcript_usage(s->transcripts_fd, unknown.ids[i], &bytes, &files);
                if (r < 0)
                        break;
                /* On a full state filesystem the size cannot be recorded: count it now
                 * (the sum below leaves unknown sizes out) and record it at a later start. */
                if (store_command_set_transcript(s->store, unknown.ids[i], bytes, (int) files) < 0 &&
                    store_command_get(s->store, unknown.ids[i], &rec) >= 0) {
                        count(s, sandbox_find_id(s, rec.sandbox), bytes, files);
                        unrecorded++;
                }
        }
        free(unknown.ids);
        if (r >= 0)
                r = store_transcript_usage_foreach(s->store, add_usage, s);
        if (r < 0)
                return r;
        s->transcripts_max_bytes = s->cfg.transcripts_max_bytes;
        if (s->transcripts_max_bytes == 0) {
                s->transcripts_max_bytes = SBX_TRANSCRIPTS_DEFAULT;
                if (fstatvfs(s->state_fd, &vfs) == 0)
                        s->transcripts_max_bytes = MIN(s->transcripts_max_bytes,
                                                       (uint64_t) vfs.f_blocks * vfs.f_frsize /
                                                               SBX_TRANSCRIPTS_STATE_SHARE);
        }
        *ret_unrecorded = unrecorded;
        return 0;
}
