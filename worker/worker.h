/* sbx-worker internals shared by worker.c (event loop, supervisor protocol),
 * worker-exec.c (starting a command) and session-init.c (building the
 * session before the worker runs in it). */
#pragma once

#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include "macro.h"

/* What went wrong in a command child before its exec: the step, and its errno. */
typedef struct SpawnError {
        int err;                        /* negative errno */
        char msg[256];                  /* "Failed to change directory to '/x'" */
} SpawnError;

/* The worker's own /proc/self/oom_score_adj, opened while it could, and the
 * score it started with. */
typedef struct OomScore {
        int fd;
        int base;
} OomScore;

/* Start "/bin/sh -c cmd" with exactly env (NULL-terminated) in cwd, as the
 * leader of a new session and process group, stdin from a pipe and stdout and
 * stderr into one other pipe, or with separate_streams stdout and stderr into
 * a pipe each. Returns once the exec happened or failed. On success returns 0
 * with the pid, the write end of its stdin and the read ends of its output
 * and of its stderr (-EBADF without separate_streams); all non-blocking,
 * close-on-exec. On failure returns -errno; if the child itself failed,
 * error->msg says which step (else it is empty). A child that failed exits
 * 127 and is left for the caller's reaper. With pty (its window size;
 * separate_streams is then ignored), stdin, stdout and stderr are a new pty
 * of the session's devpts, the command's controlling terminal: the stdin and
 * output fds returned are two descriptors of its master. */
int command_spawn(const char *cmd, char *const env[], const char *cwd, const OomScore *oom, bool separate_streams,
                  const struct winsize *pty, SpawnError *error, pid_t *ret_pid, int *ret_stdin_fd,
                  int *ret_output_fd, int *ret_error_fd);

/* --session-init: build the session from the spawner's SessionSetup and give
 * up every privilege on the host (session-init.c). Returns 0 with the session
 * id (free it) once the process may run as the session's worker; on any
 * failure it reports the step to sbxd and exits 127. */
int session_init(char **ret_session_id);

/* --import: build a new sandbox's layer 0 for sbxd (import.c); returns < 0
 * if there was no request to answer. */
int import_run(void);
