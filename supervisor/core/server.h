/* The supervisor's state, and the registry of its one event loop: every
 * object of core/ hangs off Server, and every fd sbxd waits on (sbxd.sock
 * and its clients, each workspace session's socket, set-up channel and
 * pidfd, each import helper's pidfd, a signalfd) is an EventSource in its
 * epoll set. The loop (sbxd.c) dispatches each ready source; an object that
 * goes away mid-batch unwatches its sources (fd -EBADF, which the loop then
 * skips) and is freed only once the batch is served (clients_reap,
 * sessions_reap), so every event of a batch is served. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/config.h"
#include "core/layerquota.h"
#include "data/indexcache.h"
#include "data/store.h"
#include "os/cgroup.h"
#include "os/seccomp.h"
#include "os/spawner.h"
#include "workpool.h"

typedef struct Server Server;
typedef struct EventSource EventSource;
typedef struct Client Client;
typedef struct Sandbox Sandbox;
typedef struct Import Import;
typedef struct WorkspaceSession WorkspaceSession;
typedef struct Command Command;
typedef struct Secrets Secrets;
typedef struct Claim Claim;
typedef struct Box Box;
typedef struct EgressProxy EgressProxy;
typedef struct Job Job;
typedef struct JobSpare JobSpare;
typedef struct Token Token;
typedef struct Takeover Takeover;

struct EventSource {
        int fd;                 /* -EBADF while not watched */
        void (*dispatch)(Server *s, EventSource *src, uint32_t events);
};

TAILQ_HEAD(SessionList, WorkspaceSession);

/* A template whose warm claims fail (its image does not build, its source is
 * gone): the next one is made after SBX_WARM_RETRY_MIN_S, doubled at each
 * failure in a row up to SBX_WARM_RETRY_MAX_S; a warm claim made resets it. */
typedef struct WarmBackoff {
        char template_[64];             /* "" for a free entry */
        uint32_t failures;              /* in a row */
        unsigned long long retry_usec;  /* no warm claim of it is made before this */
        int64_t retry_unix;
        char error[300];                /* why the last one failed */
} WarmBackoff;

struct Server {
        Config cfg;
        LayerLimits layer_limits;       /* cfg's layer quotas and reserve (core/layerquota.h) */
        int epoll_fd;
        EventSource listen_src;
        EventSource signal_src;
        int state_fd, sandboxes_fd, transcripts_fd, staging_fd;
        int worker_exe_fd;
        SeccompProgram *seccomp;        /* the sessions' filter, built once */
        Spawner *spawner;               /* makes the session children (os/spawner.h) */
        char *image_dir;
        struct ImageSet *images;        /* definitions and builds (core/imagebuild.h) */
        Store *store;
        StoreConns *store_conns;        /* sbx.db connections of the works off the loop (data/store.h) */
        CgroupManager *cgroups;
        IndexCache *file_indexes;       /* line indexes of snapshot and live files (file_read) */
        WorkPool *work;                 /* publications, diffs and file indexes, off the loop (one lane per sandbox) */
        EventSource work_src;           /* readable when works wait for their done */
        WorkLane close_lane;            /* fds closed off the loop (server_close_later), WAL checkpoints */
        bool checkpointing;             /* one is queued or running (server_checkpoint_off_loop) */
        unsigned long long started_usec;
        bool quit;
        unsigned n_clients;
        TAILQ_HEAD(, Client) clients;
        TAILQ_HEAD(, Sandbox) sandboxes;
        TAILQ_HEAD(, Import) imports;
        struct SessionList sessions;    /* live: set up, running or stopped (core/session.h) */
        struct SessionList ending;      /* killed; their PID 1 is not gone yet */
        struct SessionList dead;        /* nothing left but memory: freed by sessions_reap */
        TAILQ_HEAD(, Command) commands; /* of every live session */
        /* Of them, the ended ones nobody waits on (core/session.c: command_file), kept
         * for their transcripts' readers: the loop's deadline scans skip them, so a
         * long-lived claim's thousands of commands do not slow every wake-up. */
        TAILQ_HEAD(, Command) ended_commands;
        unsigned n_ended_commands;      /* in it; at most SBX_ENDED_COMMANDS_KEPT after each tick */
        uint64_t transcript_bytes;      /* what all transcripts kept store (core/transcripts.h) */
        uint64_t transcript_files;
        uint64_t transcripts_max_bytes; /* the global budget in force */
        StoreCommand *unrecorded;       /* ends the store could not take (core/session.h: command_record_fix) */
        size_t n_unrecorded, unrecorded_cap;
        unsigned long long unrecorded_retry_usec;
        TAILQ_HEAD(, Claim) claims;     /* the lifecycle set's, warm ones included (core/claim.h) */
        EgressProxy *egress;            /* sbx-egress (core/egress-proxy.h) */
        /* A box's services wired external, for its session's attach to sbx-egress:
         * core/boxwire.h's box_egress_aliases, set by sbxd.c (the boxes are above the
         * egress proxy, which calls up only through this). NULL: no aliases. */
        int (*egress_aliases)(Server *s, const WorkspaceSession *ws, Sbx__EgressAlias ***ret, size_t *ret_n);
        /* Per template whose warm claims failed: when to try again (core/claim.h). */
        WarmBackoff warm_backoff[SBX_TEMPLATES_MAX];
        TAILQ_HEAD(, Job) jobs;         /* the script set's, running and kept (core/job.h) */
        int jobs_fd;                    /* STATE/jobs */
        unsigned long long jobs_sweep_usec; /* expired outputs are looked for next then */
        TAILQ_HEAD(, JobSpare) job_spares; /* made ahead for the next jobs (core/job.h) */
        TAILQ_HEAD(, Token) tokens;     /* sbx-gateway's bearer tokens (core/token.h) */
        unsigned n_tokens;
        unsigned n_gateway_clients;     /* connections of the gateway user (SBX_GATEWAY_CLIENTS_MAX) */
        TAILQ_HEAD(, Takeover) takeovers; /* boxes a person holds now (core/takeover.h) */
        TAILQ_HEAD(, Box) boxes;        /* the boxes set's (core/box.h), terminated ones remembered */
        unsigned n_boxes;
        bool boxes_wanted;              /* a box was asked for: box spares are kept (core/box.h) */
        unsigned versions_publishing;   /* version layers being built off the loop (core/version.c) */
        bool versions_collect_due;      /* a removal's layer collection waits for them */
        unsigned long long box_files_sweep_usec; /* expired placed files are looked for next then (core/boxfiles.h) */
};

/* No object yet, no fd open, sbxd.conf's defaults. */
void server_init(Server *s);
/* sandboxes/, transcripts/ and a fresh staging/ below the open state directory. */
int server_open_state_dirs(Server *s);
/* STATE becomes 0711 so that a job's owner reaches STATE/jobs/ID/out (core/
 * job.h) and the caller of a box tool its STATE/box-files/UID (core/
 * boxfiles.h); every other entry in it (the database, sandboxes, transcripts,
 * images...) loses its group and other bits, so nothing else is reachable.
 * After everything sbxd makes there at start-up. */
int server_seal_state_dir(Server *s);
/* Close what server_init's fields hold (the objects of core/ are gone by then). */
void server_close(Server *s);
/* Wait up to timeout_ms (-1: no limit) and dispatch every ready source of
 * the batch, skipping those an earlier handler of it unwatched. Returns how
 * many were ready, or -errno (-EINTR included). */
int server_dispatch(Server *s, int timeout_ms);

/* The work pool, its place in the epoll set and its sbx.db connections (store_conns). */
int server_open_work(Server *s);
/* Stop it: every sandbox's lane is cancelled first; works still running are
 * left to their threads (data/layer.h: what they leave is what a crash leaves). */
void server_stop_work(Server *s);

/* Close fd (taken) on a thread of the work pool: the last reference to a
 * session's upper directory frees its tmpfs with every file in it, which
 * takes the closer 130 ms for 20,000 files. At once if that cannot be. */
void server_close_later(Server *s, int fd);
/* The store's WAL is checkpointed off the loop, by another connection (data/store.h). */
void server_checkpoint_off_loop(Server *s);

/* Watch fd (src takes it) for events; src->dispatch runs when it is ready. */
int server_watch(Server *s, EventSource *src, int fd, uint32_t events);
/* Watch src for other events (EPOLLOUT while replies wait, say). */
int server_rewatch(Server *s, EventSource *src, uint32_t events);
/* Stop watching src and close its fd; events of it still in this batch are skipped. */
void server_unwatch(Server *s, EventSource *src);
