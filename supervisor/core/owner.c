#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/claim.h"
#include "core/job.h"
#include "core/owner.h"
#include "core/sandbox.h"
#include "core/session.h"
#include "core/transcripts.h"
#include "data/store.h"
#include "macro.h"

static uint64_t sessions_of(const Server *s, uid_t owner) {
        const WorkspaceSession *ws;
        uint64_t n = 0;

        /* Spares and stopped sessions too: each holds a worker or a tmpfs.
         * Warm claims are nobody's (root's by their ids, exempt anyway). */
        TAILQ_FOREACH(ws, &s->sessions, link)
                n += ws->sandbox->owner_uid == owner && !sandbox_is_warm_claim(ws->sandbox);
        return n;
}

static uint64_t sandboxes_of(const Server *s, uid_t owner) {
        const Sandbox *sb;
        const Import *imp;
        uint64_t n = 0;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                n += sb->owner_uid == owner && !sandbox_is_warm_claim(sb);
        TAILQ_FOREACH(imp, &s->imports, link)
                n += imp->sandbox->owner_uid == owner && !sandbox_is_warm_claim(imp->sandbox);
        return n;
}

static uint64_t commands_of(const Server *s, uid_t owner) {
        const WorkspaceSession *ws;
        uint64_t n = 0;

        TAILQ_FOREACH(ws, &s->sessions, link)
                if (ws->sandbox->owner_uid == owner && !sandbox_is_warm_claim(ws->sandbox))
                        n += ws->running;
        return n;
}

static uint64_t layer_bytes_of(const Server *s, uid_t owner) {
        StoreLayersSize sum = {};

        /* A store that cannot answer shows 0 here; the quota check at publication reports it. */
        (void) store_layers_size(s->store, "", owner, &sum);
        return sum.owner.bytes;
}

static uint64_t jobs_of(const Server *s, uid_t owner) {
        return jobs_running(s, false, owner);
}

#define QUOTA(k, w, remedy, field, b, fn) \
        { k, w, remedy, offsetof(Config, field), sizeof(((Config *) NULL)->field), b, fn }

const OwnerQuota owner_quotas[] = {
        QUOTA("owner_sessions_max", "live workspace sessions", "finalize or discard some", owner_sessions_max, false,
              sessions_of),
        QUOTA("owner_sandboxes_max", "sandboxes", "delete some", owner_sandboxes_max, false, sandboxes_of),
        QUOTA("owner_commands_max", "running commands", "wait for some to end or cancel them", owner_commands_max,
              false, commands_of),
        QUOTA("owner_transcripts_max_bytes", "transcripts", "oldest ended commands' transcripts are evicted first",
              owner_transcripts_max_bytes, true, transcripts_owner_bytes),
        QUOTA("owner_layers_max_bytes", "published layers", "publish less, or delete sandboxes", owner_layers_max_bytes,
              true, layer_bytes_of),
        QUOTA("owner_jobs_max", "running jobs (sandbox_script)", "wait for some to end or cancel them",
              owner_jobs_max, false, jobs_of),
};

const size_t n_owner_quotas = ELEMENTSOF(owner_quotas);

const OwnerQuota *owner_quota(const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(owner_quotas); i++)
                if (strcmp(owner_quotas[i].key, key) == 0)
                        return &owner_quotas[i];
        assert(!"no such owner quota");
        return NULL;
}

uint64_t owner_quota_limit(const Server *s, const OwnerQuota *q) {
        const char *field = (const char *) &s->cfg + q->limit_offset;

        return q->limit_size == sizeof(uint64_t) ? *(const uint64_t *) field : *(const uint32_t *) field;
}

int owner_quota_check(const Server *s, const char *key, uid_t owner, uint64_t more, char *ret_error,
                      size_t error_size) {
        const OwnerQuota *q = owner_quota(key);
        uint64_t limit, used;

        if (owner_exempt(owner))
                return 0;
        limit = owner_quota_limit(s, q);
        used = q->used(s, owner);
        if (used + more <= limit)
                return 0;
        if (ret_error)
                snprintf(ret_error, error_size,
                         "owner quota %s reached: the sandboxes of owner uid %u have %llu %s%s, %llu more asked "
                         "(limit %llu%s); %s, or ask the administrator to raise %s in sbxd.conf",
                         q->key, (unsigned) owner, (unsigned long long) used, q->bytes ? "bytes of " : "", q->what,
                         (unsigned long long) more, (unsigned long long) limit, q->bytes ? " bytes" : "", q->remedy, q->key);
        return -EDQUOT;
}
