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
#include "core/egress.h"
#include "core/server.h"
#include "core/snapshot.h"
#include "data/store.h"
#include "os/cgroup.h"

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
        EgressPolicy egress;        /* its sessions' network (core/egress.h) */
        CgroupSandbox *cgroup;      /* above its sessions' (os/cgroup.h): made for its first session
                                       (core/session.c), freed with the sandbox */
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
        uint64_t transcript_bytes;  /* what its commands' transcripts kept store (core/transcripts.h) */
        uint64_t transcript_files;
        uint64_t disk_bytes;        /* its sessions' tmpfs size; 0: session_disk_bytes (a claim's template) */
        Claim *claim;               /* the lifecycle set's claim it is (core/claim.h), or NULL */
        Secrets *secrets;           /* a box's (core/secret.h): in its commands' environment, redacted
                                       from their output; owned; NULL: none */
        WorkLane lane;              /* its works off the loop, in order (common/workpool.h) */
        /* The transcript the last runtime_query_output of its lane read, kept open with
         * its last decompressed frames for the next page (control-runtime.c); owned. */
        struct Transcript *query_kept;
        char query_kept_id[48];     /* its command */
};

/* Called when a claim's sandbox is made (sandbox_create_for_claim, below). */
typedef void (*SandboxMade)(Server *s, Sandbox *sb, int err, const char *why, void *userdata);

/* A sandbox being created: sbx-worker --import builds its layer 0 (owner
 * quotas count it). */
struct Import {
        TAILQ_ENTRY(Import) link;
        Sandbox *sandbox;           /* not in Server.sandboxes until the import succeeded */
        EventSource pidfd_src;      /* the helper's pidfd: readable once it exited */
        int sock;                   /* its answer, an ImportResult, waits here */
        Pending creator;            /* answered when it is done */
        unsigned long long deadline_usec; /* then the helper is killed (import_timeout_seconds) */
        bool timed_out;
        SandboxMade made;           /* or: called when it is done (a claim's sandbox) */
        void *userdata;
};

int sandboxes_load(Server *s);
/* The earliest import deadline (~0: none); the imports past theirs are killed,
 * and answered as timed out once their helper is gone. */
unsigned long long imports_next_deadline(Server *s);
void imports_run_deadlines(Server *s);
/* Free the host id ranges of sandboxes without a record, after their files;
 * returns how many were freed. */
unsigned sandbox_ranges_collect(Server *s);
Sandbox *sandbox_find(Server *s, const char *name);
/* Whether uid may use sb: its owner and root may. */
static inline bool sandbox_allows(const Sandbox *sb, uid_t uid) {
        return uid == 0 || uid == sb->owner_uid;
}
/* For a client: a claim's sandbox (core/claim.h) only for the MCP session
 * that owns the claim (and sbxctl as root); warm claims for nobody but root. */
bool sandbox_allows_client(const Sandbox *sb, const Client *c);
/* Start creating a sandbox for the client c (uid its caller); once its source
 * is imported c is answered (seq). Fails at once with ret_error set. */
int sandbox_create(Server *s, const Sbx__SandboxCreate *req, Client *c, uint32_t seq, char *ret_error,
                   size_t error_size);
/* A claim's sandbox (core/claim.h): an empty workspace or an import of
 * source_dir (read as owner_uid). made(sb) runs once it exists (at once for
 * an empty one), or made(NULL, err, why) if it could not be made
 * (SandboxMade, above). */
typedef struct SandboxSpec {
        const char *name;
        const char *source_dir;         /* NULL: an empty workspace */
        const char *image;              /* NULL or "": the default image */
        uid_t owner_uid;
        uint64_t memory_bytes;          /* 0: the configured default (so pids_max) */
        uint32_t pids_max;
        uint32_t cpu_weight;
        uint64_t disk_bytes;
        const char *egress;             /* a policy's name (core/egress.h); NULL or "": none */
} SandboxSpec;
int sandbox_create_for_claim(Server *s, const SandboxSpec *spec, SandboxMade made, void *userdata, char *errmsg,
                             size_t errmsg_size);
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
