/* sbxd's objects and the functions its files share. One process, one epoll
 * loop: clients on sbxd.sock, one socket and one pidfd per live workspace
 * session, a signalfd. Nothing a peer sends may end this process. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "cgroup.h"
#include "indexcache.h"
#include "ns.h"
#include "store.h"
#include "transcript.h"
#include "wire.h"

typedef struct Server Server;
typedef struct EventSource EventSource;

struct EventSource {
        int fd;
        void (*dispatch)(Server *s, EventSource *src, uint32_t events);
};

typedef struct Config {
        char *state_dir;
        char *run_dir;
        char *worker_path;
        int log_level;
        uint64_t transcript_cap_bytes;
        uint64_t default_memory_bytes;
        uint32_t default_pids_max;
        uint64_t session_disk_bytes;
        uid_t uid_base;                 /* the pool of sandboxes' host ids starts here (uidrange.h) */
        uint32_t uid_count;             /* ids per sandbox */
        bool allow_io_uring;            /* seccomp leaves io_uring_* allowed (sbx-security(7)) */
        uint32_t session_spares;        /* spare automatic sessions per sandbox (spare.c) */
        uint32_t spare_idle_seconds;    /* an unused spare goes after this */
        gid_t socket_gid;               /* socket_group, or (gid_t) -1 */
        mode_t socket_mode;             /* 0: 0660 with socket_group, else 0600 */
        uint32_t client_idle_seconds;   /* a client with no request this long is closed */
} Config;

typedef struct Sandbox {
        TAILQ_ENTRY(Sandbox) link;
        char id[SBX_SANDBOX_ID_SIZE];   /* immutable: keys its records and names STATE/sandboxes/ID */
        char name[65];
        uid_t owner_uid;
        uid_t uid_base;             /* its host ids: [uid_base, uid_base + uid_count) (uidrange.h) */
        uint32_t uid_count;
        char *source_dir;
        uint64_t memory_bytes;
        uint32_t pids_max;
        uint32_t cpu_weight;        /* 1..10000, cgroup CPU share (100 = default) */
        uint32_t top_layer;
        int64_t created_unix;
        int dirfd;
        int layers_fd;
        unsigned live_sessions;     /* including spares */
        unsigned spares;            /* spare sessions set up ahead (spare.c) */
        uint32_t squashed;          /* layers 0..squashed live merged in layers/squash-N */
        int view_fd;                /* detached read-only overlay of the snapshot at view_top */
        uint32_t view_top;
        dev_t view_dev;             /* st_dev of the view's files, shown with their real inode numbers; 0: unknown */
        dev_t layers_dev;           /* st_dev of the layers' filesystem */
} Sandbox;

typedef enum SessionState {
        SESSION_SETUP,              /* the child builds the session's namespaces and mounts */
        SESSION_SPAWNING,
        SESSION_READY,
        SESSION_STOPPED,            /* no worker; its changes wait to be finalized */
        SESSION_DEAD,
} SessionState;

typedef struct Command Command;
typedef struct Client Client;

/* A sandbox being created: sbx-worker --import builds its layer 0 (sandbox.c). */
typedef struct Import {
        TAILQ_ENTRY(Import) link;
        Sandbox *sandbox;           /* not in Server.sandboxes until the import succeeded */
        EventSource pidfd_src;      /* the helper's pidfd: readable once it exited */
        int sock;                   /* its answer, an ImportResult, waits here */
        Client *creator;            /* answered when it is done (NULL: gone) */
        uint32_t creator_seq;
} Import;

typedef struct WorkspaceSession {
        TAILQ_ENTRY(WorkspaceSession) link;
        char id[33];
        Sandbox *sandbox;
        bool automatic;
        bool publish_policy;        /* finalize policy publish_then_destroy (else destroy) */
        bool conflicted;            /* its last publication was refused */
        bool spare;                 /* set up ahead, not handed out yet (spare.c) */
        unsigned long long spare_until_usec;
        int64_t created_unix;
        SessionState state;
        EventSource sock_src;
        EventSource pidfd_src;
        EventSource setup_src;      /* the child's set-up channel, while SESSION_SETUP */
        SpawnState spawn;
        unsigned long long start_usec;
        Client *creator;            /* create_workspace_session answered once it runs */
        uint32_t creator_seq;
        pid_t pid;
        int upper_fd;
        int workspace_fd;           /* O_PATH, the merged /workspace: resolve with openat2 only */
        CgroupSession *cgroup;
        uint32_t base_layer;
        uint32_t base_squashed;     /* the squashed base its overlay was built on */
        uint32_t next_command;
        unsigned running;
        TAILQ_HEAD(CommandList, Command) commands;
} WorkspaceSession;

TAILQ_HEAD(SessionList, WorkspaceSession);

typedef struct Waiter {
        TAILQ_ENTRY(Waiter) command_link;
        TAILQ_ENTRY(Waiter) client_link;
        Client *client;
        Command *command;
        uint32_t seq;
        unsigned long long call_start_usec;
        unsigned long long deadline_usec;
} Waiter;

struct Command {
        TAILQ_ENTRY(Command) link;          /* Server.commands: every live command */
        TAILQ_ENTRY(Command) session_link;
        StoreCommand rec;                   /* id, status, exit, end reason, as stored */
        WorkspaceSession *session;
        uint32_t number;                    /* the worker's command number */
        bool sent;
        char *cmd;
        Transcript *transcript;
        unsigned long long start_usec, end_usec, deadline_usec, kill_deadline_usec;
        bool finished, timed_out, cancelled, supervisor_lost;
        uint64_t delivered;                 /* lines already given to a yielding caller */
        bool has_publication;
        Sbx__Publication publication;
        char publication_owner[64];
        char publication_error[300];
        TAILQ_HEAD(, Waiter) waiters;
};

typedef struct OutFrame {
        TAILQ_ENTRY(OutFrame) link;
        size_t len;
        uint8_t data[];
} OutFrame;

struct Client {
        TAILQ_ENTRY(Client) link;
        EventSource src;
        uid_t uid;
        pid_t pid;
        unsigned long long active_usec; /* its last request or answer; idle from then on */
        bool hello;
        bool dead;              /* dropped; freed by the loop once no handler holds it */
        unsigned queued;
        TAILQ_HEAD(, OutFrame) outq;
        TAILQ_HEAD(, Waiter) waiters;
};

struct Server {
        Config cfg;
        int epoll_fd;
        EventSource listen_src;
        EventSource signal_src;
        int state_fd, sandboxes_fd, transcripts_fd, staging_fd;
        int worker_exe_fd;
        SeccompProgram *seccomp;        /* the sessions' filter, built once */
        Spawner *spawner;               /* makes the session children (spawner.c) */
        char *image_dir;
        Store *store;
        CgroupManager *cgroups;
        IndexCache *file_indexes;       /* line indexes of snapshot files (file_read) */
        unsigned long long started_usec;
        bool quit;
        unsigned n_clients;
        TAILQ_HEAD(, Client) clients;
        TAILQ_HEAD(, Sandbox) sandboxes;
        TAILQ_HEAD(, Import) imports;
        struct SessionList sessions;
        struct SessionList ending;      /* killed; freed once their PID 1 is gone */
        TAILQ_HEAD(, Command) commands;
};

/* sbxd.c */
int server_watch(Server *s, EventSource *src, int fd, uint32_t events);
void server_unwatch(Server *s, EventSource *src);

/* control.c: clients */
void control_accept(Server *s, EventSource *src, uint32_t events);
void client_free(Server *s, Client *c);
void clients_reap(Server *s);
void client_reply_error(Server *s, Client *c, uint32_t seq, int err, const char *fmt, ...) _printf_(5, 6);
void client_reply(Server *s, Client *c, uint32_t seq, Sbx__Reply *reply);
/* Clients idle for client_idle_seconds are closed (they reconnect when they need to). */
unsigned long long clients_next_deadline(Server *s);
void clients_run_deadlines(Server *s);
/* Answer the client that asked for a sandbox (sb NULL: err and why say why not). */
void sandbox_answer_creator(Server *s, Client *c, uint32_t seq, const Sandbox *sb, const Sbx__ImportResult *result,
                            int err, const char *why);

/* sandbox.c */
int sandboxes_load(Server *s);
/* Free the host id ranges of sandboxes without a record, after their files;
 * returns how many were freed. */
unsigned sandbox_ranges_collect(Server *s);
Sandbox *sandbox_find(Server *s, const char *name);
/* Start creating a sandbox; once its source is imported the client is
 * answered (sandbox_answer_creator). Fails at once with errmsg set. */
int sandbox_create(Server *s, const Sbx__SandboxCreate *req, Client *c, uint32_t seq, char *errmsg,
                   size_t errmsg_size);
/* Delete the sandbox and all its records; its files go after the commit. */
int sandbox_delete(Server *s, Sandbox *sb);
void sandbox_info(Server *s, const Sandbox *sb, Sbx__SandboxInfo *ret);
/* Remove directories of sandboxes that have no record (a crash during a
 * delete or a create); returns how many went. */
unsigned sandbox_dirs_collect(Server *s);
/* Stop the imports still running (sbxd is stopping); nothing of them stays. */
void imports_free(Server *s);
void sandboxes_free(Server *s);
bool name_is_valid(const char *name);

/* session.c: workspace sessions and commands */
int session_new(Server *s, Sandbox *sb, bool automatic, bool publish_policy, WorkspaceSession **ret, char *errmsg,
                size_t errmsg_size);
WorkspaceSession *session_find(Server *s, const Sandbox *sb, const char *id);
void session_destroy(Server *s, WorkspaceSession *ws);
/* Wait until the ending sessions (of sb, or all if NULL) are gone, and free them. */
void sessions_wait_ended(Server *s, const Sandbox *sb);
/* Answer the client that created a managed session (once it is ready, or failed). */
void session_answer_creator(Server *s, WorkspaceSession *ws, int err, const char *why);
struct PublishResult;
/* Publish (or discard) and end the session; after a conflict or a failed
 * publication it stays, stopped, and *ret says why. -EBUSY while commands run. */
int session_finalize(Server *s, WorkspaceSession *ws, bool publish, bool overwrite, struct PublishResult *ret);
int command_start(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, bool separate_streams,
                  Command **ret);
Command *command_find_live(Server *s, const char *id);
int command_write_stdin(Server *s, Command *c, const void *data, size_t len, bool close_stdin);
void command_cancel(Server *s, Command *c);
void command_add_waiter(Server *s, Command *c, Client *client, uint32_t seq,
                        unsigned long long call_start, uint64_t yield_ms);
void waiter_free(Waiter *w);
void waiter_answer(Server *s, Waiter *w);
/* Build the command-output reply for a read of [start, start+limit) of view
 * stream; -ENODATA for one stream of a command whose streams are not apart. */
int command_read_reply(Server *s, const char *id, const Sandbox *sb, TranscriptStream stream, uint64_t start,
                       uint64_t limit, Client *client, uint32_t seq);
unsigned long long commands_next_deadline(Server *s);
void waiter_fill_output(Command *c, Sbx__CommandOutput *o, uint64_t start, unsigned long long call_start,
                        char **ret_text);

/* spare.c: automatic sessions set up ahead of their command */
/* A current spare of sb, now an ordinary automatic session, or NULL. */
WorkspaceSession *spare_take(Server *s, Sandbox *sb);
/* Set up spares for sb until it has session_spares (after a read-only automatic session). */
void spares_refill(Server *s, Sandbox *sb);
/* Destroy the spares of sb that a publication made stale. */
void spares_drop_stale(Server *s, Sandbox *sb);
/* Destroy one spare of sb (of any sandbox if NULL) to make room; false if none. */
bool spare_evict(Server *s, Sandbox *sb);
unsigned long long spares_next_deadline(Server *s);
void spares_run_deadlines(Server *s);

/* files.c: the file tools */
void handle_file_read(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__FileRead *req);
void handle_file_write(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__FileWrite *req, int payload_fd);
void handle_file_edit(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__FileEdit *req, int payload_fd);
void handle_file_blame(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__FileBlame *req);
void commands_run_deadlines(Server *s);
