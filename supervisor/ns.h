/* Creating a workspace session's isolation: a child in new mount, pid, ipc,
 * uts, net and cgroup namespaces builds the session's root (image overlay,
 * host /usr read-only, the workspace overlay of the published layers at
 * /workspace, /proc, a minimal /dev), pivots into it, enters a new user
 * namespace whose root is an unprivileged host uid, sets no_new_privs and
 * execs sbx-worker as PID 1. The session's writable layer lives on a tmpfs
 * that is mounted only in the session's mount namespace; the supervisor keeps
 * an fd to its upper directory to publish from. Nothing is mounted on the host.
 * Non-logging. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "seccomp.h"

typedef struct SpawnParams {
        const char *session_id;
        const char *run_dir;            /* absolute, holds the "session-root" mount point */
        const char *image_dir;          /* absolute, the root image's lower directory */
        const char *layers_dir;         /* absolute path of the sandbox's layers/ directory */
        const char *lowerdirs;          /* "N:N-1:…" relative to layers_dir, newest first */
        uid_t uid_base;                 /* host uid of root inside */
        uint32_t uid_count;
        uint64_t disk_bytes;            /* size of the session tmpfs */
        int worker_exe_fd;              /* O_PATH fd of sbx-worker */
        CgroupSession *cgroup;
        const SeccompProgram *seccomp;  /* installed last, before the exec */
} SpawnParams;

/* A session child being set up; sbxd serves others meanwhile. */
typedef struct SpawnState {
        pid_t pid;
        int pidfd;
        int sync;                       /* set-up channel: readable when the child has news */
        int sock;                       /* SOCK_SEQPACKET to the worker */
        int upper_fd;                   /* the workspace overlay's upper directory (once mapped) */
        int workspace_fd;               /* O_PATH: the session's merged /workspace (once mapped) */
        uid_t uid_base;
        uint32_t uid_count;
        bool mapped;                    /* user namespace maps written; waiting for the exec */
} SpawnState;

/* Start the session child (namespaces, cgroup attach); on failure ret_errmsg
 * (if given) says which step failed. */
int session_spawn_begin(const SpawnParams *p, SpawnState *ret, char *ret_errmsg, size_t errmsg_size);
/* Advance when st->sync is readable: 1 while set-up goes on, 0 once the worker
 * runs (the caller then closes st->sync), or a negative errno with ret_errmsg. */
int session_spawn_continue(SpawnState *st, char *ret_errmsg, size_t errmsg_size);
/* Close what is left; a child whose set-up did not finish is killed and reaped. */
void spawn_state_done(SpawnState *st);
