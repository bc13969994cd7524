/* The seccomp deny list of every workspace session, as data. See seccomp.h
 * and sbx-security(7), which lists the same entries; keep the two in step.
 *
 * The filter allows by default and refuses what has no business in a
 * sandbox. Most of it is already refused by the kernel because the sandbox's
 * root holds capabilities only in its own user namespace; the filter keeps
 * the kernel code behind these calls out of reach altogether (defence in
 * depth), and closes what capabilities do not (new user namespaces, io_uring,
 * TIOCSTI, rare socket families).
 *
 * ptrace, process_vm_readv/writev and kcmp stay allowed: a command may debug
 * its own processes (strace, gdb), and processes outside the sandbox are out
 * of reach anyway: the pid namespace gives them no name, and
 * ptrace_may_access() wants capabilities in the target's user namespace,
 * which the sandbox does not have. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "macro.h"
#include "os/seccomp.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

enum {
        RULE_IO_URING = 1 << 0,         /* skipped when allow_io_uring is set */
};

typedef struct SeccompRule {
        const char *syscall;
        int err;                        /* the errno the call fails with */
        unsigned flags;
        unsigned n_cmp;                 /* 0: always; else all comparisons must hold */
        struct scmp_arg_cmp cmp[2];
} SeccompRule;

#define DENY(name, e) { .syscall = (name), .err = (e) }
#define DENY_FLAGS(name, e, f) { .syscall = (name), .err = (e), .flags = (f) }
#define CMP(i, o, a) { .arg = (i), .op = SCMP_CMP_##o, .datum_a = (a) }
#define CMP_MASKED(i, mask, value) { .arg = (i), .op = SCMP_CMP_MASKED_EQ, .datum_a = (mask), .datum_b = (value) }

/* The table. ENOSYS where programs probe and fall back (clone3, io_uring);
 * EPERM elsewhere, which is what the kernel itself says without the capability. */
static const SeccompRule rules[] = {
        /* kernel modules */
        DENY("init_module", EPERM), DENY("finit_module", EPERM), DENY("delete_module", EPERM),
        DENY("create_module", ENOSYS), DENY("query_module", ENOSYS), DENY("get_kernel_syms", ENOSYS),
        /* replacing or rebooting the kernel */
        DENY("kexec_load", EPERM), DENY("kexec_file_load", EPERM), DENY("reboot", EPERM),
        /* kernel programs, profiling, keyrings, fault handling in user space */
        DENY("bpf", EPERM), DENY("perf_event_open", EPERM),
        DENY("keyctl", EPERM), DENY("add_key", EPERM), DENY("request_key", EPERM),
        DENY("userfaultfd", EPERM),
        /* file handles bypass path resolution (the "shocker" escape) */
        DENY("open_by_handle_at", EPERM), DENY("name_to_handle_at", EOPNOTSUPP),
        /* mounts: none of them is the sandbox's business */
        DENY("mount", EPERM), DENY("umount", EPERM), DENY("umount2", EPERM), DENY("pivot_root", EPERM),
        DENY("chroot", EPERM), DENY("move_mount", EPERM), DENY("open_tree", EPERM), DENY("fsopen", EPERM),
        DENY("fsconfig", EPERM), DENY("fsmount", EPERM), DENY("fspick", EPERM), DENY("mount_setattr", EPERM),
        /* namespaces: setns always; unshare/clone with namespace flags below; clone3's
         * flags are behind a pointer, so it is refused and libc falls back to clone */
        DENY("setns", EPERM), DENY("clone3", ENOSYS),
        /* io_uring bypasses this filter for the operations it performs */
        DENY_FLAGS("io_uring_setup", ENOSYS, RULE_IO_URING),
        DENY_FLAGS("io_uring_enter", ENOSYS, RULE_IO_URING),
        DENY_FLAGS("io_uring_register", ENOSYS, RULE_IO_URING),
        /* host-wide state: swap, clocks, accounting, kernel log, quotas */
        DENY("swapon", EPERM), DENY("swapoff", EPERM),
        DENY("settimeofday", EPERM), DENY("stime", EPERM), DENY("clock_settime", EPERM),
        DENY("clock_adjtime", EPERM), DENY("adjtimex", EPERM),
        DENY("acct", EPERM), DENY("syslog", EPERM), DENY("quotactl", EPERM), DENY("quotactl_fd", EPERM),
        /* hardware and obsolete interfaces */
        DENY("iopl", EPERM), DENY("ioperm", EPERM), DENY("vm86", ENOSYS), DENY("vm86old", ENOSYS),
        DENY("lookup_dcookie", EPERM), DENY("nfsservctl", ENOSYS), DENY("uselib", ENOSYS),
        DENY("ustat", ENOSYS), DENY("sysfs", ENOSYS), DENY("_sysctl", ENOSYS),
        /* 32-bit x86: socketcall(2) hides its arguments behind a pointer, so the socket
         * family rules below could not apply; programs use the direct calls (Linux >= 4.3) */
        DENY("socketcall", ENOSYS),
        /* raw and packet sockets of the Internet families (type & SOCK_TYPE_MASK) */
        { .syscall = "socket", .err = EPERM, .n_cmp = 2,
          .cmp = { CMP(0, EQ, AF_INET), CMP_MASKED(1, 0xf, SOCK_RAW) } },
        { .syscall = "socket", .err = EPERM, .n_cmp = 2,
          .cmp = { CMP(0, EQ, AF_INET6), CMP_MASKED(1, 0xf, SOCK_RAW) } },
        { .syscall = "socket", .err = EPERM, .n_cmp = 2,
          .cmp = { CMP(0, EQ, AF_INET), CMP_MASKED(1, 0xf, SOCK_PACKET) } },
        { .syscall = "socket", .err = EPERM, .n_cmp = 2,
          .cmp = { CMP(0, EQ, AF_INET6), CMP_MASKED(1, 0xf, SOCK_PACKET) } },
        /* the kernel's device events: it sends them to every network namespace of
         * the host's user namespace, the session's among them (the kernel reads
         * the protocol as an int: the low half is compared) */
        { .syscall = "socket", .err = EPROTONOSUPPORT, .n_cmp = 2,
          .cmp = { CMP(0, EQ, AF_NETLINK), CMP_MASKED(2, 0xffffffffu, NETLINK_KOBJECT_UEVENT) } },
};

/* socket(2): every other address family fails with EAFNOSUPPORT (AF_PACKET,
 * AF_VSOCK, AF_ALG, AF_BLUETOOTH, AF_KEY, ...). */
static const int socket_families_allowed[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };

/* unshare(2) and clone(2) with any of these fail with EPERM. */
static const uint64_t namespace_flags[] = {
        CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
        CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME,
};

/* ioctl(2) requests that fail with EPERM: pushing input into a terminal, and
 * the Linux console's multiplexer (which can do the same). */
static const uint64_t ioctls_denied[] = { TIOCSTI, TIOCLINUX };

/* The ABIs filtered with the table; any other one kills the process. */
static const uint32_t arches[] = { SCMP_ARCH_X86_64, SCMP_ARCH_X86 };

/* libseccomp's pseudo numbers: from -100 to -299 the calls that an ABI
 * multiplexes (socket(2) and SysV IPC behind socketcall(2) and ipc(2) on
 * 32-bit x86), from -10001 down the calls an ABI does not have at all. */
#define PSEUDO_NR_MISSING_MAX (-10001)

static int rule_add(scmp_filter_ctx ctx, uint32_t arch, const char *name, int err, unsigned n,
                    const struct scmp_arg_cmp *cmp) {
        int arch_nr = seccomp_syscall_resolve_name_arch(arch, name);
        if (arch_nr == __NR_SCMP_ERROR || arch_nr <= PSEUDO_NR_MISSING_MAX)
                return 0; /* not a system call of this ABI */
        /* libseccomp takes rule numbers in the native numbering (pseudo numbers
         * for calls the native ABI lacks) and translates them per ABI. */
        int nr = seccomp_syscall_resolve_name(name);
        if (arch_nr < 0)
                /* Multiplexed on this ABI (i386 socket, 359 since Linux 4.3): the
                 * non-exact call adds the rule to the direct system call too,
                 * where the exact one refuses. Its socketcall(2) form loses the
                 * comparisons, which costs nothing: socketcall is denied whole. */
                return seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO((uint32_t) err), nr, n, cmp);
        return seccomp_rule_add_exact_array(ctx, SCMP_ACT_ERRNO((uint32_t) err), nr, n, cmp);
}

static int arch_rules(scmp_filter_ctx ctx, uint32_t arch, const SandboxSeccompOptions *o) {
        int r;

        for (size_t i = 0; i < ELEMENTSOF(rules); i++) {
                if ((rules[i].flags & RULE_IO_URING) && o->allow_io_uring)
                        continue;
                r = rule_add(ctx, arch, rules[i].syscall, rules[i].err, rules[i].n_cmp, rules[i].cmp);
                if (r < 0)
                        return r;
        }

        /* socket families: one equality per denied family below AF_MAX, then >= AF_MAX */
        for (int af = 0; af < AF_MAX; af++) {
                bool allowed = false;
                for (size_t i = 0; i < ELEMENTSOF(socket_families_allowed); i++)
                        allowed = allowed || socket_families_allowed[i] == af;
                if (allowed)
                        continue;
                struct scmp_arg_cmp c = CMP(0, EQ, (uint64_t) af);
                r = rule_add(ctx, arch, "socket", EAFNOSUPPORT, 1, &c);
                if (r < 0)
                        return r;
        }
        {
                struct scmp_arg_cmp c = CMP(0, GE, AF_MAX);
                r = rule_add(ctx, arch, "socket", EAFNOSUPPORT, 1, &c);
                if (r < 0)
                        return r;
        }

        for (size_t i = 0; i < ELEMENTSOF(namespace_flags); i++) {
                struct scmp_arg_cmp c = CMP_MASKED(0, namespace_flags[i], namespace_flags[i]);
                r = rule_add(ctx, arch, "unshare", EPERM, 1, &c);
                /* clone's low byte is the exit signal: CLONE_NEWTIME is unshare-only */
                if (r >= 0 && namespace_flags[i] != CLONE_NEWTIME)
                        r = rule_add(ctx, arch, "clone", EPERM, 1, &c);
                if (r < 0)
                        return r;
        }

        /* The kernel reads the request as a 32-bit int: compare the low half only,
         * so junk in the upper half cannot slip past (CVE-2019-10063). */
        for (size_t i = 0; i < ELEMENTSOF(ioctls_denied); i++) {
                struct scmp_arg_cmp c = CMP_MASKED(1, 0xffffffffu, ioctls_denied[i]);
                r = rule_add(ctx, arch, "ioctl", EPERM, 1, &c);
                if (r < 0)
                        return r;
        }

        /* personality(2): only the query (0xffffffff) and the default (PER_LINUX, 0).
         * "Neither all zeros nor all ones" is "some bit set whose cyclic neighbour
         * is clear", which single masked comparisons can express (one per arg). */
        {
                struct scmp_arg_cmp c = CMP(0, GT, 0xffffffffu);
                r = rule_add(ctx, arch, "personality", EPERM, 1, &c);
                if (r < 0)
                        return r;
        }
        for (unsigned b = 0; b < 32; b++) {
                uint64_t bit = 1ull << b, next = 1ull << ((b + 1) % 32);
                struct scmp_arg_cmp c = CMP_MASKED(0, bit | next, bit);
                r = rule_add(ctx, arch, "personality", EPERM, 1, &c);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int filter_new(const SandboxSeccompOptions *o, scmp_filter_ctx *ret, const char **ret_step) {
        scmp_filter_ctx ctx = NULL;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(arches); i++) {
                scmp_filter_ctx a = seccomp_init(SCMP_ACT_ALLOW);
                if (!a) {
                        r = -ENOMEM;
                        *ret_step = "seccomp_init";
                        goto fail;
                }
                /* Each context holds one ABI, so a name missing on one ABI is no error. */
                r = seccomp_arch_remove(a, SCMP_ARCH_NATIVE);
                if (r >= 0)
                        r = seccomp_arch_add(a, arches[i]);
                if (r >= 0)
                        r = seccomp_attr_set(a, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
                if (r < 0) {
                        *ret_step = "seccomp architecture";
                        seccomp_release(a);
                        goto fail;
                }
                r = arch_rules(a, arches[i], o);
                if (r < 0) {
                        *ret_step = "seccomp rule";
                        seccomp_release(a);
                        goto fail;
                }
                if (!ctx)
                        ctx = a;
                else {
                        r = seccomp_merge(ctx, a); /* releases a on success */
                        if (r < 0) {
                                *ret_step = "seccomp merge";
                                seccomp_release(a);
                                goto fail;
                        }
                }
        }
        *ret = ctx;
        return 0;
fail:
        if (ctx)
                seccomp_release(ctx);
        return r < 0 ? r : -EINVAL;
}

int sandbox_seccomp_compile(const SandboxSeccompOptions *o, SeccompProgram **ret, const char **ret_step) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ SeccompProgram *prog = NULL;
        const char *step = "seccomp";
        scmp_filter_ctx ctx;
        struct stat st;
        int r;

        r = filter_new(o, &ctx, &step);
        if (r < 0)
                goto fail;
        /* libseccomp writes the program to an fd only: a memfd holds it. */
        fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
        r = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
        seccomp_release(ctx);
        step = "seccomp_export_bpf";
        if (r < 0)
                goto fail;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                goto fail;
        }
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
            st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
                r = -E2BIG;
                goto fail;
        }
        prog = malloc(sizeof(*prog) + (size_t) st.st_size);
        if (!prog) {
                r = -ENOMEM;
                goto fail;
        }
        if (pread(fd, prog->insns, (size_t) st.st_size, 0) != st.st_size) {
                r = -EIO;
                goto fail;
        }
        prog->fprog.len = (unsigned short) (st.st_size / sizeof(struct sock_filter));
        prog->fprog.filter = prog->insns;
        *ret = TAKE_PTR(prog);
        return 0;
fail:
        if (ret_step)
                *ret_step = step;
        return r;
}

int sandbox_seccomp_export(const SandboxSeccompOptions *o, int fd) {
        const char *step;
        scmp_filter_ctx ctx;
        int r;

        r = filter_new(o, &ctx, &step);
        if (r < 0)
                return r;
        r = seccomp_export_pfc(ctx, fd);
        seccomp_release(ctx);
        return r;
}
