/* The set-up channel of a session: a SOCK_SEQPACKET pair between sbxd
 * (supervisor/os/ns.c) and the session's init (worker/session-init.c), which
 * sbxd's spawner (supervisor/os/spawner.c) also uses to report the process it
 * started. One datagram per message, each of one fixed size, so a message is
 * told apart by its length:
 *
 *   spawner -> sbxd  SetupReport (tag SETUP_SPAWNED) with the pidfd attached
 *                    (and the session's egress listening socket, if asked)
 *   sbxd -> init     SetupGo (tag SETUP_GO): the init is in the session's cgroup;
 *                    with a job's mount names and their detached mounts
 *                    attached, one per name, in order (a job's spare session
 *                    gets its /out only, supervisor/core/job.h),
 *                    then, if n_tmpfs, the session tmpfs sbxd made (and a
 *                    claim's /tmp), detached (supervisor/os/livemount.h)
 *   init -> sbxd     SETUP_USERNS with three O_PATH fds: the workspace upper
 *                    directory, the merged /workspace and the merged /; the init has
 *                    entered its user namespace, whose maps sbxd writes
 *   sbxd -> init     SETUP_MAPPED
 *   init -> sbxd     EOF: set up, the init is the worker now
 *   either -> sbxd   SetupError instead, at any step, then EOF
 *
 * sbxd and sbx-worker are installed together; the channel's layout goes with
 * SBX_PROTO_VERSION (wire.h). The session's parameters travel as a
 * SessionSetup frame (sbx.proto) on a pipe of their own. Non-logging. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "sbx-limits.h"

enum { SETUP_GO = 'G', SETUP_USERNS = 'U', SETUP_MAPPED = 'M', SETUP_SPAWNED = 'P' };

/* A job's mounts: its /out and its host inputs at /in/NAME. */
#define SETUP_MOUNTS_MAX (SBX_SCRIPT_INPUTS_MAX + 1u)
#define SETUP_MOUNT_PATH_MAX 272u
/* The session tmpfs and /tmp's, when sbxd makes them. */
#define SETUP_TMPFS_MAX 2u       /* "f:in/" and a name of up to NAME_MAX bytes */

typedef struct SetupGo {
        char tag;               /* SETUP_GO */
        uint32_t n_mounts;
        /* "d:out", "f:in/NAME", "d:in/NAME": where each mount goes, NUL-terminated */
        char mounts[SETUP_MOUNTS_MAX][SETUP_MOUNT_PATH_MAX];
        /* 0: the init mounts its tmpfs itself; 1: the session tmpfs comes
         * after the mounts; 2: then /tmp's too */
        uint32_t n_tmpfs;
} SetupGo;

typedef struct SetupError {
        int err;                /* negative errno */
        char step[120];         /* "mount /proc" */
} SetupError;

typedef struct SetupReport {
        char tag;               /* SETUP_SPAWNED */
        pid_t pid;
} SetupReport;

/* The spawner's report of the process it started, with its pidfd and, for
 * a session with an egress policy, the socket listening inside it (else
 * egress_fd is -EBADF). */
int setup_report_spawned(int sync, pid_t pid, int pidfd, int egress_fd);
/* A failed step; err may be given with either sign. */
int setup_report_error(int sync, int err, const char *step);
