/* Creating a workspace session's isolation: the spawner (spawner.c) starts
 * sbx-worker --session-init as PID 1 in new mount, pid, ipc and uts
 * namespaces; it joins a network namespace made ahead and a new cgroup
 * namespace, builds the session's root (image overlay, host /usr read-only
 * through an overlay of the session's own, the workspace overlay of the
 * published layers at /workspace, /proc, a minimal /dev), pivots into it,
 * creates, as the sandbox's own host uid, a new user namespace whose root is
 * that uid (uidrange.h), keeps a few capabilities inside it, sets
 * no_new_privs and the seccomp filter, and runs on as the session's worker
 * (worker/session-init.c). sbxd puts it into the session's cgroup and writes
 * its user namespace maps on the set-up channel (proto/setup.h). The
 * session's writable layer lives on a tmpfs that is mounted only in the
 * session's mount namespace (made by the init, or, for a session that may be
 * kept, by sbxd, detached, and sent with SETUP_GO: os/livemount.h); the
 * supervisor keeps an fd to its upper directory to publish from. Nothing is
 * mounted on the host. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "os/cgroup.h"
#include "macro.h"
#include "os/seccomp.h"
#include "sbx-limits.h"
#include "setup.h"

/* A job's mounts (core/job.h): its host inputs at /in/NAME and its /out,
 * each a detached mount sbxd made from a descriptor, sent to the init with
 * SETUP_GO in this order (proto/setup.h: SetupGo, which names them); the
 * init attaches each at its path ("d:out", "f:in/NAME", "d:in/NAME": a
 * directory or a file) before pivot_root. A spare job session gets only
 * "d:out" so; the inputs of the job that takes it are attached into its
 * running session later (session_attach_mounts). */
#define SPAWN_MOUNTS_MAX SETUP_MOUNTS_MAX
#define SPAWN_MOUNT_PATH_MAX SETUP_MOUNT_PATH_MAX
typedef struct SpawnMounts {
        uint32_t n;
        char paths[SPAWN_MOUNTS_MAX][SPAWN_MOUNT_PATH_MAX];
} SpawnMounts;

/* What a session child needs, flat: sbxd sends it to the spawner (spawner.c). */
typedef struct SpawnParams {
        char session_id[40];
        char run_dir[1024];             /* absolute, holds the "session-root" mount point */
        char image_dir[1024];           /* absolute, the root image's lower directory */
        char layers_dir[1200];          /* absolute path of the sandbox's layers/ directory */
        char lowerdirs[4096];           /* "N:N-1:…" relative to layers_dir, newest first */
        uid_t uid_base;                 /* host uid of root inside */
        uint32_t uid_count;
        uint64_t disk_bytes;            /* size of the session tmpfs */
        bool own_system;                /* a built image: its own /usr, no host system directories */
        bool egress_listen;             /* a TCP socket listening at 127.0.0.1:SBX_EGRESS_PORT inside (docs/egress.md) */
        char cwd[16];                   /* where commands run; "" is /workspace (a job's: /out) */
} SpawnParams;

/* A session child being set up; sbxd serves others meanwhile. */
typedef struct SpawnState {
        pid_t pid;                      /* 0 until the spawner reports the child */
        int pidfd;                      /* the child's, once reported; the caller takes it */
        int sync;                       /* set-up channel: readable when the spawner or child has news */
        int sock;                       /* SOCK_SEQPACKET to the worker */
        int upper_fd;                   /* the workspace overlay's upper directory (once mapped) */
        int workspace_fd;               /* O_PATH: the session's merged /workspace (once mapped) */
        int root_fd;                    /* O_PATH: the session's merged / (once mapped) */
        int egress_fd;                  /* egress_listen's socket, with the spawner's report; else -EBADF */
        CgroupSession *cgroup;          /* the child joins it before it starts */
        uid_t uid_base;
        uint32_t uid_count;
        bool mapped;                    /* user namespace maps written; waiting for the init to finish */
        /* If set: called with upper_fd and root_fd once the child mounted them
         * and before it goes on (nothing in the session looked inside yet);
         * a negative errno fails the set-up. */
        int (*prepare)(void *userdata, int upper_fd, int root_fd);
        void *prepare_userdata;
        /* SETUP_GO goes once the child is in its cgroup, with these mounts. */
        const SpawnMounts *mounts;      /* borrowed until SETUP_GO went; NULL: none */
        const int *mount_fds;           /* their detached mounts, one per name (borrowed) */
        /* Owned, sent with SETUP_GO, then closed: the session tmpfs and /tmp's
         * sbxd made (os/livemount.h), or -EBADF: the init mounts its own. */
        int tmpfs_fds[SETUP_TMPFS_MAX];
} SpawnState;

typedef struct Spawner Spawner;

/* Ask the spawner for a session child; on failure ret_errmsg (if given) says
 * which step failed. */
int session_spawn_begin(Spawner *sp, const SpawnParams *p, CgroupSession *cgroup, SpawnState *ret,
                        char *ret_errmsg, size_t errmsg_size);
/* Advance when st->sync is readable: 1 while set-up goes on, 0 once the worker
 * runs (the caller then closes st->sync), or a negative errno with ret_errmsg.
 * Once the spawner reported the child, st->pid is set and st->pidfd valid. */
int session_spawn_continue(SpawnState *st, char *ret_errmsg, size_t errmsg_size);
/* A job's host inputs into the running session whose PID 1 is pidfd (a
 * spare job session a job took, core/job.h): each of mounts ("d:in/NAME",
 * "f:in/NAME") attached at /in/NAME of the session's mount namespace from its
 * detached mount, by a short-lived thread of the caller's that enters it. */
int session_attach_mounts(int pidfd, const SpawnMounts *mounts, const int *mount_fds);
/* Close what is left; a child whose set-up did not finish is killed and waited for. */
void spawn_state_done(SpawnState *st);
/* SIGKILL through the pidfd and wait until the process is gone (not our
 * child: the spawner reaps it). For a session's PID 1 that is when its
 * namespaces are empty and unmounted. */
void pidfd_kill_wait(int pidfd);
