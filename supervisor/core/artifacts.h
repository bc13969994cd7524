/* runtime_execute's runs and the artifact store (the artifacts set, issue 19,
 * docs/artifacts.md).
 *
 * A run is a command (core/session.h) that runtime_execute started from the
 * runtime table (core/runtime.h): with stdout and stderr apart, each kept for
 * the result up to runtime_max_stdout_bytes / _stderr_bytes (data/capture.h),
 * the allowlisted environment, and the caller's stdin written once it starts
 * and then closed. At most runtime_max_concurrent_jobs run per owner.
 *
 * The artifact of a persisted run IS its transcript (data/transcript.h): it
 * is on disk already, with a sparse line index per stream, so it is not
 * copied; once the run ends its text is compressed in place
 * (transcript_compress), off the loop in its sandbox's lane, and then
 * counts compressed. The store records it under an unguessable handle ("art-" and 32
 * hex digits) bound to the owner's uid, with an expiry
 * (runtime_artifact_ttl_hours) and its size (its transcript is limited to
 * runtime_max_artifact_bytes). Expired artifacts, and then the oldest, go
 * once all of them together would pass runtime_artifacts_max_bytes: the
 * record and the transcript with it. Records are in the SQLite store, so
 * handles survive a restart; an artifact goes with its sandbox. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/client.h"
#include "core/runtime.h"
#include "sbx-limits.h"
#include "sbx.pb-c.h"

typedef struct Server Server;
typedef struct Command Command;

/* A JUnit XML report the run's arguments name (core/runtime.h), read once it
 * ended for the broker's digest. */
typedef struct RunReport {
        char *path;                     /* as the argument names it */
        char *data;                     /* its first len bytes, or NULL */
        size_t len;
        uint64_t size;                  /* the file's */
        bool found, truncated;
        char error[96];                 /* when not found: why */
} RunReport;

typedef struct RuntimeRun {
        uid_t owner;
        bool persist;
        char executable[SBX_RUNTIME_EXE_MAX + 1];
        const char *env[SBX_RUNTIME_ENV_MAX];   /* borrowed from environ */
        size_t n_env;
        uint8_t *stdin_data;                    /* written once the command starts, then closed */
        size_t stdin_len;
        bool has_stdin;
        uint64_t bytes[2];                      /* raw stdout, stderr */
        RunReport reports[SBX_DIGEST_JUNIT_FILES];
        size_t n_reports;
        bool reports_read;
} RuntimeRun;

/* Running runs of owner's sandboxes (runtime_max_concurrent_jobs counts them). */
unsigned runtime_runs_running(Server *s, uid_t owner);
void runtime_run_free(RuntimeRun *run);
/* The run's reports (once: its first end), each resolved in root_fd (the
 * session's /, O_PATH) from cwd (the command's, absolute) with openat2
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS: regular files only, at most
 * SBX_DIGEST_JUNIT_MAX bytes each and SBX_DIGEST_JUNIT_FILES_BYTES together
 * (the rest cut). One that cannot be read says why; root_fd < 0: the
 * session's files are gone. */
void runtime_run_read_reports(RuntimeRun *run, int root_fd, const char *cwd);
/* Answer p for c's ended run: ClaimExecReply o (its streams) inside a
 * RuntimeExecuteReply, with its artifact when persisted; or the error of a
 * missing toolchain. */
void runtime_run_answer(Server *s, Pending *p, Command *c, Sbx__ClaimExecReply *o);

/* At start, once the sandboxes and the work pool are there: compress (off the loop) the artifacts that
 * are not, those of an sbxd before compression and those a crash or a
 * failure left so. */
void artifacts_load(Server *s);
/* Remove expired artifacts, then the oldest while all of them store more than
 * runtime_artifacts_max_bytes. */
void artifacts_sweep(Server *s);
/* The command of handle for uid: -ENOENT when there is none, it is
 * another's (root sees all) or has expired (ret_expired then says so). */
int artifacts_lookup(Server *s, const char *handle, uid_t uid, char *ret_command, size_t size, bool *ret_expired);
