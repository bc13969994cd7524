/* Workspace sessions (a worker inside its namespaces) and the commands they
 * run: starting, output into the transcript, yields, timeouts, cancellation,
 * and the publish-then-destroy end of automatic sessions.
 *
 * The worker's messages go through one table (session.c: worker_messages):
 * per type the session states it may come in, whether it names a command,
 * bounds of its fields, and its handler; anything else ends the session.
 *
 * A session that ends is marked SESSION_DEAD at once (its sources are no
 * longer watched, its commands are answered), waits in Server.ending until
 * its PID 1 is gone, then in Server.dead until sessions_reap frees it at the
 * end of the loop pass: no handler frees memory another event of the same
 * batch may still point to. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/client.h"
#include "core/egress.h"
#include "core/imagebuild.h"
#include "core/publish.h"
#include "core/sandbox.h"
#include "core/server.h"
#include "core/snapshot.h"
#include "data/capture.h"
#include "data/store.h"
#include "data/transcript.h"
#include "os/cgroup.h"
#include "os/ns.h"
#include "redact.h"

typedef enum SessionState {
        SESSION_SETUP,              /* the child builds the session's namespaces and mounts */
        SESSION_SPAWNING,           /* set up; the worker has not said READY yet */
        SESSION_READY,
        SESSION_STOPPED,            /* no worker; its changes wait to be finalized */
        SESSION_DEAD,               /* ended: in Server.ending or Server.dead */
        _SESSION_STATE_MAX,
} SessionState;

typedef struct Waiter Waiter;

/* A job's session (core/job.h): its mounts (os/ns.h: SpawnMounts) and the
 * detached mounts themselves, in order. Its commands run in SESSION_JOB_CWD. */
#define SESSION_JOB_CWD "/out"
typedef struct SessionMounts {
        SpawnMounts names;
        int fds[SPAWN_MOUNTS_MAX];
} SessionMounts;

/* Told of a command's output as it arrives (each stream, setup failures
 * included) and of its end, once, after its record is stored; neither may
 * free anything of the session (the job's tick does that). */
typedef struct CommandObserver {
        void (*output)(void *userdata, TranscriptStream stream, const void *data, size_t len);
        void (*ended)(Command *c, void *userdata);
} CommandObserver;
/* TERM of a command on a pty: what the shells of the images know. */
#define TERMINAL_TERM "xterm-256color"
/* Rows and columns of a command on a pty (both 0: on pipes). */
typedef struct TerminalSize {
        uint32_t rows, cols;
} TerminalSize;
typedef struct SessionPublish SessionPublish;
typedef struct RuntimeRun RuntimeRun;

struct WorkspaceSession {
        TAILQ_ENTRY(WorkspaceSession) link;
        char id[33];
        uint64_t serial;            /* unique in this sbxd's life (keys its files' indexes) */
        Sandbox *sandbox;           /* NULL once dead and released (its sandbox may be gone) */
        bool automatic;
        bool publish_policy;        /* finalize policy publish_then_destroy (else destroy) */
        bool conflicted;            /* its last publication was refused */
        SessionPublish *publishing; /* its publication, running off the loop (stopped meanwhile) */
        bool spare;                 /* set up ahead, not handed out yet (core/spare.h) */
        bool was_spare;             /* handed out by spare_take: its first command may move (retry_fresh) */
        /* An automatic session whose publication failed (not a conflict):
         * kept stopped for inspection until then, and discarded (0: none). */
        unsigned long long discard_usec;
        int64_t discard_unix;
        unsigned long long spare_until_usec;
        int64_t created_unix;
        SessionState state;
        EventSource sock_src;
        EventSource pidfd_src;
        EventSource setup_src;      /* the child's set-up channel, while SESSION_SETUP */
        SpawnState spawn;
        unsigned long long start_usec;
        Pending creator;            /* create_workspace_session, answered once it runs */
        pid_t pid;
        int upper_fd;
        /* A stopped session with a kept copy (core/kept.h) whose files fill
         * this one before its worker starts; NULL once it went. */
        WorkspaceSession *seed;
        /* If set, called while it is set up, its overlays mounted and nothing
         * in it started yet (upper_fd: its workspace upper, root_fd: its
         * merged root, both O_PATH); a negative errno fails the set-up. */
        int (*fill)(const WorkspaceSession *ws, int upper_fd, int root_fd);
        int kept_fd;                /* its upper is a kept copy (core/kept.h) named by its id in this
                                       directory, removed once it is finalized; else -EBADF */
        bool kept_live;             /* that copy is the session's own tmpfs, mounted there (RUN_DIR/live) */
        /* sbxd's clones of the session tmpfs and of a claim's /tmp (os/livemount.h),
         * for a session that may be kept (core/kept.h); else -EBADF */
        int live_fds[SETUP_TMPFS_MAX];
        int workspace_fd;           /* O_PATH, the merged /workspace: resolve with openat2 only */
        int root_fd;                /* O_PATH, the merged /: resolve with openat2 only (data/claimfs.h) */
        int work_upper_fd;          /* a box started from a version: the upper of its /work overlay, on a
                                       tmpfs of its own (os/workmount.h); kept as kept.h says; else -EBADF */
        int work_live_fd;           /* then sbxd's mount of that tmpfs, kept in place at a stop (core/kept.h) */
        int egress_fd;              /* listening at 127.0.0.1:SBX_EGRESS_PORT inside it, served by
                                       sbx-egress (core/egress-proxy.h); -EBADF: none */
        CgroupSession *cgroup;
        SnapshotHold base;          /* the layers its overlay is built on */
        uint32_t next_command;
        unsigned running;
        TAILQ_HEAD(CommandList, Command) commands;
        /* A built image (not the default): its build is waited for, then held. */
        ImageWaiter image_wait;
        ImageUse image;
        bool job;                   /* a job's (core/job.h): commands in SESSION_JOB_CWD */
        const SessionMounts *mounts; /* a job's, borrowed until its sandbox goes (core/job.h); else NULL */
};

struct Command {
        TAILQ_ENTRY(Command) link;          /* Server.commands: every live command */
        TAILQ_ENTRY(Command) session_link;
        StoreCommand rec;                   /* id, status, exit, end reason, as stored */
        WorkspaceSession *session;
        uint32_t number;                    /* the worker's command number */
        bool sent;                          /* to the worker (sent to none if the send failed) */
        bool retry_fresh;                   /* the first of a spare: moves once to a new session if
                                             * that one dies before the command reached its worker */
        char *cmd;
        Transcript *transcript;             /* NULL once evicted (rec.evicted says why) */
        uint64_t charged_bytes;             /* of it, counted in the budgets (core/transcripts.h) */
        uint64_t charged_files;
        unsigned long long start_usec, end_usec, deadline_usec, kill_deadline_usec;
        bool finished, timed_out, cancelled, supervisor_lost;
        bool in_ended;                      /* in s->ended_commands, not s->commands */
        uint64_t delivered;                 /* lines already given to a yielding caller */
        bool has_publication;
        Sbx__Publication publication;
        char publication_owner[64];
        char publication_error[1024];   /* why nothing was published, and what became of the changes */
        TAILQ_HEAD(, Waiter) waiters;
        OutputCapture *capture;             /* [stdout, stderr] of an execute_command, or NULL */
        EgressAudit egress;                 /* what it reached through sbx-egress (core/egress.h) */
        const CommandObserver *observer;    /* a job's (core/job.h), or NULL */
        void *observer_data;
        RuntimeRun *run;                    /* runtime_execute's (core/artifacts.h), or NULL; owned */
        char *cwd;                          /* a box's (command_start_at), or NULL: the session's */
        char **env;                         /* a box's variables, over the fixed ones; owned */
        size_t n_env;
        TerminalSize pty;                   /* a takeover terminal's size (core/takeover.h); 0x0: no pty */
        Redactor *redact[3];                /* per Stream, when its sandbox has secrets (core/secret.h):
                                               output passes through them before anything keeps it */
};

/* A new session of sb (spare.h: spare_make_room first, for one someone asked
 * for); it sets itself up while sbxd serves others. On failure ret_error
 * (if not empty) says why. */
int session_new(Server *s, Sandbox *sb, bool automatic, bool publish_policy, WorkspaceSession **ret,
                char *ret_error, size_t error_size);
/* A job's session (core/job.h): managed, discarded at its end, with mounts
 * (borrowed: they outlive the session); a spare's are its /out alone. */
int session_new_job(Server *s, Sandbox *sb, const SessionMounts *mounts, WorkspaceSession **ret, char *ret_error,
                    size_t error_size);
/* A job's host inputs ("d:in/NAME", "f:in/NAME") into its spare session ws,
 * which runs (-EBUSY while it is being set up): os/ns.h,
 * session_attach_mounts. Their detached mounts are spent. */
int session_job_attach(WorkspaceSession *ws, const SessionMounts *inputs);
/* Live sessions, spares included. */
unsigned sessions_live(Server *s);
WorkspaceSession *session_find(Server *s, const Sandbox *sb, const char *id);
/* c is answered (seq) once ws runs, or with the reason it did not start. */
void session_answer_when_ready(WorkspaceSession *ws, Client *c, uint32_t seq);
void session_destroy(Server *s, WorkspaceSession *ws);
/* Kill its worker (and every process of it): its upper stays, as after a stop. */
void session_stop_worker(Server *s, WorkspaceSession *ws);
/* A managed session of an earlier sbxd, stopped, back in sb's sessions:
 * id, policy, creation and base (squashed, top) as it had them, its upper
 * upper_fd (taken) in the kept directory kept_fd (taken); kept_live: that is
 * its own tmpfs, mounted below RUN_DIR/live (core/kept.h). */
int session_restore(Server *s, Sandbox *sb, const char *id, bool publish_policy, int64_t created_unix,
                    uint32_t squashed, uint32_t top, int upper_fd, int kept_fd, bool kept_live);
/* Wait until the ending sessions (of sb, or all if NULL) are gone. */
void sessions_wait_ended(Server *s, const Sandbox *sb);
/* Free the dead sessions: at the end of each loop pass. */
void sessions_reap(Server *s);
/* How a finalize ended: r, and the publication (taken: publish_result_done).
 * ws is the session after a conflict or a failed publication (it stays,
 * stopped), else NULL (it ended, or went while it published: -ECANCELED). */
typedef void (*FinalizeDone)(Server *s, WorkspaceSession *ws, int r, PublishResult *res, void *userdata);
/* Publish (or discard) and end the session. The publication runs off the
 * loop, in the sandbox's lane, and answer is called when it is done (at once
 * when there is nothing to publish). -EBUSY while commands run or it is being
 * published (then answer is not called). */
int session_finalize(Server *s, WorkspaceSession *ws, bool publish, bool overwrite, FinalizeDone answer,
                     void *userdata);
/* What session ws_id of sb would publish (core/publish.h: changes_diff),
 * computed off the loop in the sandbox's lane; done runs on the loop with
 * the diff (NULL on failure; why says more, if not empty), borrowed for the
 * call. */
typedef void (*SessionDiffDone)(Server *s, int r, const ChangesDiff *diff, const char *why, void *userdata);
int session_diff(Server *s, Sandbox *sb, const char *ws_id, SessionDiffDone done, void *userdata);
/* The session as listings show it (strings borrowed from ws). */
void session_info(const WorkspaceSession *ws, Sbx__SessionInfo *ret);
/* Bytes its changes hold in memory: its tmpfs (charged to its cgroup, under its sandbox's). */
uint64_t session_memory_bytes(const WorkspaceSession *ws);
/* Discard the sessions kept after a failed publication whose grace time
 * (failed_session_grace_seconds) passed: once per loop pass. */
unsigned long long failed_sessions_next_deadline(Server *s);
void failed_sessions_run_deadlines(Server *s);

int command_start(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, bool separate_streams,
                  Command **ret);
/* The same for runtime_execute: stdout and stderr apart, a transcript of at
 * most cap_bytes, and run (taken, also on failure) attached before the
 * command goes to the worker. */
int command_start_runtime(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, uint64_t cap_bytes,
                          RuntimeRun *run, Command **ret);
/* The same in directory cwd (absolute, inside the session's root) with the
 * n_env KEY=VALUE variables of env (copied; at most SBX_BOX_ENV_MAX) over the
 * fixed ones: a box's command (core/box.h). */
int command_start_at(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, const char *cwd,
                     char *const *env, size_t n_env, Command **ret);
/* The same on a pty of the session's devpts, of size pty (rows and cols
 * between 1 and SBX_TERMINAL_SIZE_MAX), with TERM=TERMINAL_TERM: the
 * command's controlling terminal, its output one stream (a takeover's
 * shell, core/takeover.h). */
int command_start_pty(Server *s, WorkspaceSession *ws, const char *cmd, uint64_t timeout_ms, const char *cwd,
                      char *const *env, size_t n_env, TerminalSize pty, Command **ret);
/* A new size for c's pty: the kernel tells its foreground process group (SIGWINCH). */
int command_resize(Command *c, TerminalSize size);
Command *command_find_live(Server *s, const char *id);
/* Keep c's stdout and stderr (separate streams) cut to max_chars each, head
 * and tail (data/capture.h): its waiters are then answered with a
 * ClaimExecReply once it ends, not with transcript windows. */
int command_capture(Command *c, uint32_t max_stdout_chars, uint32_t max_stderr_chars);
int command_send_stdin(Command *c, const void *data, size_t len, bool close_stdin);
void command_cancel(Server *s, Command *c);
/* Answer client (seq) with c's new output once it ends or yield_ms after
 * call_start, whichever comes first. -ENOMEM: nothing was arranged. */
int command_add_waiter(Server *s, Command *c, Client *client, uint32_t seq, unsigned long long call_start,
                       uint64_t yield_ms);
/* The same, and Progress frames to client (seq) while its session waits for its image. */
int command_add_progress_waiter(Server *s, Command *c, Client *client, uint32_t seq, unsigned long long call_start,
                                uint64_t yield_ms);

/* The fields of a command's record that a CommandOutput and a CommandInfo
 * share, into o (either of them); strings borrowed from rec. */
#define COMMAND_RECORD_TO(o, rec)                                       \
        do {                                                            \
                (o)->command_session = (char *) (rec)->id;              \
                (o)->workspace_session = (char *) (rec)->workspace_session; \
                (o)->status = (char *) (rec)->status;                   \
                (o)->has_exit_code = (rec)->has_exit_code;              \
                (o)->exit_code = (rec)->exit_code;                      \
                (o)->signal = (rec)->signal;                            \
                (o)->end_reason = (char *) (rec)->end_reason;           \
        } while (0)

/* A command's output record with a window of its transcript, as a reply
 * carries it: o points into the rest; command_view_done frees it. */
typedef struct CommandView {
        Sbx__CommandOutput o;
        Sbx__Publication publication;
        Sbx__EgressAudit egress;
        Sbx__EgressAudit *stored_egress; /* a recorded command's, unpacked */
        StoreCommand rec;               /* of a command no session runs any more */
        char owner[64];
        char *text;
} CommandView;

/* The output of command id of sb (live, or recorded), lines [start, start + limit)
 * of view stream; -ENODATA for one stream of a command whose streams are not apart. */
int command_view(Server *s, const Sandbox *sb, const char *id, TranscriptStream stream, uint64_t start, uint64_t limit,
                 CommandView *ret);
void command_view_done(CommandView *v);

/* A stored record of a command no session runs any more, as it is: an end
 * the store could not take (a full state filesystem) is kept in memory and
 * given here instead of the stored "running", and a record that still says
 * "running" otherwise was lost by an earlier sbxd (error, supervisor_lost;
 * sbxd could not mark it at start). */
void command_record_fix(Server *s, StoreCommand *rec);
/* Store the ends kept in memory, at most once per SBX_UNRECORDED_RETRY_MS
 * (now: whatever the time); those stored are dropped from memory. */
void commands_store_unrecorded(Server *s, bool now);
/* Frees the oldest ended commands of long-lived sessions beyond SBX_ENDED_COMMANDS_KEPT:
 * their records and transcripts are on disk, where their readers find them. */
void commands_trim_ended(Server *s);

unsigned long long commands_next_deadline(Server *s);
void commands_run_deadlines(Server *s);
