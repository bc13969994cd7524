/* The seccomp filter of a workspace session: a deny list, kept as data in one
 * table in seccomp.c and documented in sbx-security(7). The session's init
 * (worker/session-init.c) loads it last, after no_new_privs, before it runs
 * as the worker, so the worker and every command inherit it; it cannot be
 * removed. Native x86_64
 * and the 32-bit x86 ABI are filtered with the same table; any other ABI
 * (x32 included) kills the process. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <linux/filter.h>

typedef struct SandboxSeccompOptions {
        bool allow_io_uring;    /* sbxd.conf allow_io_uring: io_uring_* are not denied */
} SandboxSeccompOptions;

/* The filter as a BPF program, built once by sbxd and installed by every
 * session's init (building it with libseccomp takes milliseconds). */
typedef struct SeccompProgram {
        struct sock_fprog fprog;
        struct sock_filter insns[];
} SeccompProgram;

/* Build the filter. Returns 0 or -errno; ret_step (if given) names what failed.
 * Free *ret with free(). */
int sandbox_seccomp_compile(const SandboxSeccompOptions *o, SeccompProgram **ret, const char **ret_step);

/* Write the filter as libseccomp pseudo-code (PFC) to fd, for the unit tests
 * (tests/unit/test-seccomp.c), which read each ABI's rules. */
int sandbox_seccomp_export(const SandboxSeccompOptions *o, int fd);
