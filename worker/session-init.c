/* A session's init: sbx-worker --session-init, started by sbxd's spawner as
 * root in fresh mount, pid, ipc and uts namespaces (supervisor/os/spawner.c). It
 * builds the session's root as supervisor/os/ns.h describes, enters its user
 * namespace, gives up everything it does not need and then carries on as the
 * session's worker, PID 1. Being a fresh exec of this small static program
 * rather than a fork of sbxd, it copies no page tables and takes no
 * copy-on-write faults, and nothing of sbxd's memory is ever in the session.
 *
 * No second exec follows (one measured 5 ms of CPU per session here), so this
 * file does what it would have done: the kept capabilities are set, its stdin
 * and stdout are the session's /dev/null, and the set-up's parameters are
 * wiped from memory. It is made dumpable last, so that the worker can open
 * its /proc/self/oom_score_adj; the worker then makes itself non-dumpable,
 * out of its commands' reach (worker.c). Of the host paths among the
 * parameters, only links in the session tmpfs keep a copy, which nothing in
 * the session can reach after pivot_root: the mount table names only paths
 * relative to that tmpfs.
 *
 * The set-up channel (proto/setup.h) is fd 4, the SessionSetup frame comes on
 * a pipe at fd 5, the network namespace to join is fd 6. A failed step is
 * reported on the channel and the process exits 127. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"
#include "setup.h"
#include "wire.h"
#include "worker.h"

enum { INIT_SYNC_FD = 4, INIT_SETUP_FD = 5, INIT_NETNS_FD = 6 };

/* The kernel copies a mount's options into one page. */
#define MOUNT_OPTIONS_MAX 4096
/* Session ids are "ws-" and 12 hex digits; anything much longer is no id. */
#define SESSION_ID_MAX 64
/* The session tmpfs' path, <run_dir>/session-root, and the paths below it. */
#define SESSION_PATH_MAX 4096

/* The SessionSetup frame as read (setup_frame_len bytes), wiped once used. */
static uint8_t setup_frame[SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX + 1];
static size_t setup_frame_len;

static _noreturn_ void init_fail(int err, const char *step) {
        (void) setup_report_error(INIT_SYNC_FD, err, step);
        _exit(127);
}

#define CHECK(expr, step)                                    \
        do {                                                 \
                if ((expr) < 0)                              \
                        init_fail(errno, (step));            \
        } while (0)

static void sync_expect(char want) {
        char c;
        ssize_t n = recv(INIT_SYNC_FD, &c, 1, 0);
        if (n != 1 || c != want)
                init_fail(n < 0 ? errno : EPIPE, "waiting for the supervisor");
}

/* SETUP_GO (go) and the job's detached mounts with it, one per name of
 * go->mounts, in order, then go->n_tmpfs tmpfs mounts sbxd made: ret_fds
 * holds go->n_mounts + go->n_tmpfs of them, exactly. */
static void sync_expect_go(SetupGo *go, int *ret_fds) {
        union {
                struct cmsghdr align;
                char b[CMSG_SPACE(SEND_FDS_MAX * sizeof(int))];
        } control;
        struct iovec iov = { .iov_base = go, .iov_len = sizeof(*go) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.b,
                             .msg_controllen = sizeof(control.b) };
        struct cmsghdr *cm;
        ssize_t k = recvmsg(INIT_SYNC_FD, &mh, MSG_CMSG_CLOEXEC);
        size_t n;

        if (k != (ssize_t) sizeof(*go) || go->tag != SETUP_GO || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
                init_fail(k < 0 ? errno : EPIPE, "waiting for the supervisor");
        n = (size_t) go->n_mounts + go->n_tmpfs;
        cm = CMSG_FIRSTHDR(&mh);
        if (n == 0 && !cm)
                return;
        if (n > SEND_FDS_MAX || go->n_mounts > SETUP_MOUNTS_MAX || go->n_tmpfs > SETUP_TMPFS_MAX || !cm ||
            cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(n * sizeof(int)))
                init_fail(EBADMSG, "receive the job's mounts");
        memcpy(ret_fds, CMSG_DATA(cm), n * sizeof(int));
        for (size_t i = 0; i < go->n_mounts; i++)
                go->mounts[i][SETUP_MOUNT_PATH_MAX - 1] = '\0';
}

/* A job's mounts (proto/setup.h: SetupGo) at their places under root/,
 * before pivot_root: "d:out", "f:in/NAME", "d:in/NAME". */
static void attach_job_mounts(const SetupGo *go, const int *fds) {
        char target[SESSION_PATH_MAX];

        if (go->n_mounts == 0)
                return;
        if (mkdir("root/in", 0755) < 0 && errno != EEXIST)
                init_fail(errno, "create /in");
        for (size_t i = 0; i < go->n_mounts; i++) {
                const char *m = go->mounts[i], *name = m + 2;
                bool dir = m[0] == 'd';
                int r;

                if ((m[0] != 'd' && m[0] != 'f') || m[1] != ':' ||
                    (strcmp(name, "out") != 0 && (strncmp(name, "in/", 3) != 0 || !name[3] || strchr(name + 3, '/') ||
                                                  !strcmp(name + 3, ".") || !strcmp(name + 3, ".."))))
                        init_fail(EINVAL, "check the job's mounts");
                snprintf(target, sizeof(target), "root/%s", name);
                r = dir ? mkdir(target, 0755) : mknod(target, S_IFREG | 0444, 0);
                if (r < 0 && errno != EEXIST)
                        init_fail(errno, "create a job mount point");
                CHECK(move_mount(fds[i], "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH), "attach a job mount");
                (void) close(fds[i]);
        }
        explicit_bzero(target, sizeof(target));
}

/* The SessionSetup frame, whole, from the pipe the spawner filled. */
static Sbx__Msg *read_setup(void) {
        uint8_t *buf = setup_frame;
        size_t size = sizeof(setup_frame);
        Sbx__Msg *msg = NULL;
        size_t len = 0;
        uint32_t seq;
        int r;

        for (;;) {
                ssize_t n = read(INIT_SETUP_FD, buf + len, size - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        init_fail(errno, "read the session's parameters");
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len == size)
                        init_fail(EMSGSIZE, "read the session's parameters");
        }
        (void) close(INIT_SETUP_FD);
        setup_frame_len = len;
        r = wire_parse(buf, len, 0, &msg, &seq);
        if (r < 0)
                init_fail(r, "parse the session's parameters");
        if (msg->type != SBX__MSG_TYPE__MSG_SESSION_SETUP)
                init_fail(EBADMSG, "parse the session's parameters");
        return msg;
}

static void setup_dev(const char *dev) {
        static const struct {
                const char *name;
                unsigned maj, min;
        } nodes[] = {
                { "null", 1, 3 }, { "zero", 1, 5 }, { "full", 1, 7 },
                { "random", 1, 8 }, { "urandom", 1, 9 }, { "tty", 5, 0 },
        };
        static const struct {
                const char *name, *target;
        } links[] = {
                { "ptmx", "pts/ptmx" }, { "fd", "/proc/self/fd" }, { "stdin", "/proc/self/fd/0" },
                { "stdout", "/proc/self/fd/1" }, { "stderr", "/proc/self/fd/2" },
        };
        _cleanup_close_ int fd = -EBADF;

        CHECK(mount("sbx-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"), "mount /dev");
        fd = open(dev, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd, "open /dev");
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                CHECK(mknodat(fd, nodes[i].name, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)),
                      "mknod in /dev");
                CHECK(fchmodat(fd, nodes[i].name, 0666, 0), "chmod in /dev");
        }
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                CHECK(symlinkat(links[i].target, fd, links[i].name), "symlink in /dev");
        CHECK(mkdirat(fd, "pts", 0755), "mkdir /dev/pts");
        CHECK(mkdirat(fd, "shm", 01777), "mkdir /dev/shm");
        CHECK(fchmodat(fd, "shm", 01777, 0), "chmod /dev/shm");
}

/* /proc paths masked: a file by an empty file of the session, a
 * directory by an empty read-only tmpfs; absent entries are skipped. First
 * what runc and Docker mask by default, then what else shows the host: its
 * boot command line, disks, swap, RAID, kernel modules and symbols, memory
 * and port maps (sbx-security(7) says what stays visible, and why). */
static const char *const proc_masked[] = {
        "acpi", "asound", "interrupts", "kcore", "keys", "latency_stats", "timer_list", "timer_stats",
        "sched_debug", "scsi", "key-users", "kmsg", "sysrq-trigger", "driver",
        "cmdline", "partitions", "diskstats", "swaps", "mdstat", "modules", "kallsyms", "config.gz",
        "iomem", "ioports",
};
/* Bound read-only onto themselves (runc's list), after the masks, which their
 * recursive binds carry along. */
static const char *const proc_readonly[] = { "sys", "irq", "bus", "fs" };

/* proc is relative to the session tmpfs, which holds "masked" (an empty file)
 * and "boot_id" (the session's own). Both are host root's and 0444, so that
 * the sandbox's root, whose capabilities do not apply to an owner its user
 * namespace does not map, can neither write nor chmod them: a bind of each is
 * enough, as in runc (a read-only remount would double the mounts). */
static void harden_proc(const char *proc) {
        char path[256];
        struct stat st;

        for (size_t i = 0; i < ELEMENTSOF(proc_masked); i++) {
                snprintf(path, sizeof(path), "%s/%s", proc, proc_masked[i]);
                if (lstat(path, &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode))
                        CHECK(mount("sbx-masked", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                    "size=4k,nr_inodes=1,mode=0555"),
                              "mask a /proc directory");
                else
                        CHECK(mount("masked", path, NULL, MS_BIND, NULL), "mask a /proc file");
        }
        /* A boot id of its own: the host's would tell sessions apart by host boot. */
        snprintf(path, sizeof(path), "%s/sys/kernel/random/boot_id", proc);
        if (lstat(path, &st) == 0)
                CHECK(mount("boot_id", path, NULL, MS_BIND, NULL), "replace the boot id");
        for (size_t i = 0; i < ELEMENTSOF(proc_readonly); i++) {
                snprintf(path, sizeof(path), "%s/%s", proc, proc_readonly[i]);
                if (lstat(path, &st) < 0)
                        continue;
                CHECK(mount(path, path, NULL, MS_BIND | MS_REC, NULL), "bind a /proc path");
                CHECK(mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
                      "remount a /proc path read-only");
        }
}

/* Capabilities the sandbox's root keeps in its own user namespace (enough for
 * package managers: ownership, modes, dropping to a service user); every
 * other one leaves the bounding set. None of them means anything on the host. */
static const int caps_kept[] = {
        CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID, CAP_SETUID,
        CAP_SETPCAP, CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_SETFCAP,
};

/* The bounding set, and what an exec as root would have left of the
 * capabilities: the kept ones permitted and effective, none inheritable or
 * ambient. */
static void drop_capabilities(void) {
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        for (int cap = 0;; cap++) {
                bool keep = false;
                if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
                        break; /* past the kernel's last capability */
                for (size_t i = 0; i < ELEMENTSOF(caps_kept); i++)
                        keep = keep || caps_kept[i] == cap;
                if (!keep)
                        CHECK(prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop the capability bounding set");
        }
        CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities");
        for (size_t i = 0; i < ELEMENTSOF(caps_kept); i++) {
                data[CAP_TO_INDEX(caps_kept[i])].permitted |= CAP_TO_MASK(caps_kept[i]);
                data[CAP_TO_INDEX(caps_kept[i])].effective |= CAP_TO_MASK(caps_kept[i]);
        }
        CHECK(syscall(SYS_capset, &header, data), "set capabilities");
}

/* The parameters' strings, before their memory goes back to the heap. */
static void wipe_setup(Sbx__Msg *msg) {
        Sbx__SessionSetup *p = msg->session_setup;
        char *strings[] = { p->session_id, p->run_dir, p->image_dir, p->layers_dir, p->lowerdirs };

        for (size_t i = 0; i < ELEMENTSOF(strings); i++)
                explicit_bzero(strings[i], strlen(strings[i]));
        /* Only what was read: the rest was never touched (each page is a fault). */
        explicit_bzero(setup_frame, setup_frame_len);
}

/* Append the printf-formatted text to opts (MOUNT_OPTIONS_MAX bytes, *len
 * used so far); E2BIG for step when the options do not fit the page the
 * kernel takes for them. */
static void _printf_(4, 5) opts_add(char *opts, size_t *len, const char *step, const char *fmt, ...) {
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(opts + *len, MOUNT_OPTIONS_MAX - *len, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t) n >= MOUNT_OPTIONS_MAX - *len)
                init_fail(E2BIG, step);
        *len += (size_t) n;
}

/* An overlay at target of lowers (":"-separated, newest first, each put
 * after prefix) with its writes in <area>/upper, or read-only without area.
 * Every path is relative to the session tmpfs, the cwd: the options, which
 * /proc/self/mountinfo shows, name no host path. */
static void mount_overlay(const char *area, const char *prefix, const char *lowers, const char *target,
                          const char *source, const char *step) {
        char opts[MOUNT_OPTIONS_MAX];
        size_t len = 0;

        opts_add(opts, &len, step, "lowerdir=");
        for (const char *p = lowers, *colon; p; p = colon ? colon + 1 : NULL) {
                colon = strchr(p, ':');
                opts_add(opts, &len, step, "%s%s%.*s", p == lowers ? "" : ":", prefix,
                         colon ? (int) (colon - p) : (int) strlen(p), p);
        }
        /* Read-only: redirects in the host's directories (there should be none) are not followed. */
        if (area)
                opts_add(opts, &len, step, ",upperdir=%s/upper,workdir=%s/work,redirect_dir=off", area, area);
        else
                opts_add(opts, &len, step, ",redirect_dir=nofollow");
        CHECK(mount(source, target, "overlay", MS_NOSUID | MS_NODEV | (area ? 0 : MS_RDONLY), opts), step);
        explicit_bzero(opts, sizeof(opts));
}

/* The host's system directories, read-only, each through an overlay of its
 * own whose top layer is the empty "e" of the session tmpfs: its files are
 * inodes of the session, so an inotify watch or a lock on one of them sees
 * and blocks this session only, never the host or another sandbox (a bind
 * would share the host's inodes), and statfs(2) reports the session tmpfs,
 * not the host's disk. Absent ones, and merged-usr symlinks (which the image
 * mirrors), are skipped. */
static void mount_system_dirs(void) {
        static const char *const system_dirs[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
        char lowers[64], target[64];
        struct stat st;

        for (size_t i = 0; i < ELEMENTSOF(system_dirs); i++) {
                snprintf(lowers, sizeof(lowers), "e:/%s", system_dirs[i]);
                if (lstat(lowers + 2, &st) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                snprintf(target, sizeof(target), "root/%s", system_dirs[i]);
                mount_overlay(NULL, "", lowers, target, "sbx-system", "mount host system directory");
        }
}

static void install_seccomp(const ProtobufCBinaryData *filter) {
        struct sock_fprog prog = {
                .len = (unsigned short) (filter->len / sizeof(struct sock_filter)),
                .filter = (struct sock_filter *) filter->data,
        };

        if (filter->len == 0 || filter->len % sizeof(struct sock_filter) != 0 ||
            filter->len / sizeof(struct sock_filter) > BPF_MAXINSNS)
                init_fail(EINVAL, "seccomp filter");
        CHECK(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog), "seccomp");
}

/* A tmpfs at target: the one sbxd made (fd >= 0, os/livemount.h: sbxd keeps
 * a clone of it so that it can outlive the session), else a new one. */
static void mount_tmpfs(int fd, const char *source, const char *target, const char *opts, const char *step) {
        if (fd < 0)
                CHECK(mount(source, target, "tmpfs", MS_NOSUID | MS_NODEV, opts), step);
        else {
                CHECK(move_mount(fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH), step);
                (void) close(fd);
        }
}

/* The session's writable layer, a tmpfs sized by the disk limit, becomes the
 * cwd. It holds the upper and work directories of / and /workspace (the
 * sandbox's root owns /root and /run there, over the image's), "root" (the
 * mount point of /), "e" (an empty directory, whose mode and owner the
 * system directories' roots show), "masked" (an empty file),
 * the session's boot id, and links "i" to the image and "l" to the layers
 * directory: the overlays' options name these instead of host paths. */
static void setup_session_tmpfs(const Sbx__SessionSetup *p, const char *T, int tmpfs_fd) {
        static const struct {
                const char *path;
                mode_t mode;
                bool sandbox_owned;
        } dirs[] = {
                { "ws", 0755, false },         { "ws/upper", 0755, true },       { "ws/work", 0755, false },
                { "sys", 0755, false },        { "sys/upper", 0755, true },      { "sys/work", 0755, false },
                { "sys/upper/root", 0700, true }, { "sys/upper/run", 0755, true }, { "root", 0755, false },
                { "e", 0755, false },
        };
        char opts[128], hex[33], uuid[40];
        _cleanup_close_ int fd = -EBADF;
        mode_t umask_kept;

        snprintf(opts, sizeof(opts), "size=%llu,mode=0755,uid=%u,gid=%u", (unsigned long long) p->disk_bytes,
                 p->uid_base, p->uid_base);
        mount_tmpfs(tmpfs_fd, "sbx-session", T, opts, "mount session tmpfs");
        CHECK(chdir(T), "enter session tmpfs");
        /* The modes as given (the worker's commands get the umask back). */
        umask_kept = umask(0);
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                CHECK(mkdir(dirs[i].path, dirs[i].mode), "create session directories");
                if (dirs[i].sandbox_owned)
                        CHECK(chown(dirs[i].path, p->uid_base, p->uid_base), "create session directories");
        }
        CHECK(symlink(p->image_dir, "i"), "link the image");
        CHECK(symlink(p->layers_dir, "l"), "link the layers");
        /* A random (version 4) UUID, as the kernel's is. */
        CHECK(random_hex(hex, 32), "make a boot id");
        snprintf(uuid, sizeof(uuid), "%.8s-%.4s-4%.3s-%c%.3s-%.12s\n", hex, hex + 8, hex + 13, "89ab"[hex[16] % 4],
                 hex + 17, hex + 20);
        fd = open("boot_id", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        CHECK(fd, "write the boot id");
        CHECK(loop_write(fd, uuid, strlen(uuid)), "write the boot id");
        CHECK(mknod("masked", S_IFREG | 0444, 0), "create the /proc mask");
        (void) umask(umask_kept);
}

/* The user namespace, made as the sandbox's own host uid: what its processes
 * hold of per-user kernel budgets (inotify instances and watches, fanotify
 * groups and marks, message queue bytes, pending signals, user namespaces)
 * is charged to that uid, never to host root's or another sandbox's. The
 * capabilities stay across the uid change (SECBIT_NO_SETUID_FIXUP), so that
 * hosts which let only privileged processes make user namespaces let this
 * one; the kernel gives them up when the namespace is entered. fds (the
 * workspace upper and /workspace) go to sbxd, which writes the maps. */
static void enter_user_namespace(const Sbx__SessionSetup *p, int fds[3]) {
        char c = SETUP_USERNS;
        int r;

        CHECK(setgroups(0, NULL), "setgroups");
        CHECK(prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0), "keep capabilities across setuid");
        CHECK(setresgid(p->uid_base, p->uid_base, p->uid_base), "setresgid to the sandbox's host gid");
        CHECK(setresuid(p->uid_base, p->uid_base, p->uid_base), "setresuid to the sandbox's host uid");
        /* From here on nothing we hold is a capability on the host. */
        CHECK(unshare(CLONE_NEWUSER), "unshare user namespace");
        r = send_with_fds(INIT_SYNC_FD, &c, 1, fds, 3);
        if (r < 0)
                init_fail(r, "send workspace fds");
        (void) close(fds[0]);
        (void) close(fds[1]);
        (void) close(fds[2]);
        sync_expect(SETUP_MAPPED);
        CHECK(setgroups(0, NULL), "setgroups");
        CHECK(setresgid(0, 0, 0), "setresgid");
        CHECK(setresuid(0, 0, 0), "setresuid");
}

/* Everything from sbxd's go to the seccomp filter. Each function that held a
 * host path wipes it before it returns. */
static void build_session(const Sbx__SessionSetup *p) {
        char T[SESSION_PATH_MAX], opts[128];
        int fds[3], mount_fds[SEND_FDS_MAX];
        static SetupGo go;              /* 4.6 KiB: not on the init's stack */

        CHECK(fd_nonblock(INIT_SYNC_FD, false), "set-up channel");
        sync_expect_go(&go, mount_fds);

        CHECK(unshare(CLONE_NEWCGROUP), "unshare cgroup namespace");
        CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make / private");
        snprintf(T, sizeof(T), "%s/session-root", p->run_dir);
        setup_session_tmpfs(p, T, go.n_tmpfs > 0 ? mount_fds[go.n_mounts] : -EBADF);
        explicit_bzero(T, sizeof(T));

        /* Root: the image, with private writes; host system directories read-only
         * unless the image is a build with its own (sbx-images(7)). */
        mount_overlay("sys", "", "i", "root", "sbx-root", "mount root overlay");
        if (!p->own_system)
                mount_system_dirs();
        /* Workspace: the published layers, newest first, under the session's upper.
         * By path: an fd opened in sbxd's namespace would name the host's mount,
         * which overlayfs refuses to clone into this namespace. */
        mount_overlay("ws", "l/", p->lowerdirs, "root/workspace", "sbx-workspace", "mount workspace overlay");
        attach_job_mounts(&go, mount_fds);

        CHECK(mount("proc", "root/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "mount /proc");
        harden_proc("root/proc");
        /* A fresh /tmp of its own, sized like the session's writable layer. */
        snprintf(opts, sizeof(opts), "size=%llu,mode=1777,uid=%u,gid=%u", (unsigned long long) p->disk_bytes,
                 p->uid_base, p->uid_base);
        mount_tmpfs(go.n_tmpfs > 1 ? mount_fds[go.n_mounts + 1] : -EBADF, "sbx-tmp", "root/tmp", opts, "mount /tmp");
        setup_dev("root/dev");
        CHECK(mount("devpts", "root/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"),
              "mount /dev/pts");
        CHECK(mount("shm", "root/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m"), "mount /dev/shm");

        CHECK(sethostname("sbx", 3), "set hostname");
        CHECK(setns(INIT_NETNS_FD, CLONE_NEWNET), "join the network namespace");
        (void) close(INIT_NETNS_FD);

        fds[0] = open("ws/upper", O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(fds[0], "open workspace upper");
        fds[1] = open("root/workspace", O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(fds[1], "open workspace");
        /* The merged root, for the lifecycle set's file tools (supervisor/data/claimfs.h). */
        fds[2] = open("root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(fds[2], "open root");

        CHECK(chdir("root"), "enter new root");
        CHECK(syscall(SYS_pivot_root, ".", "."), "pivot_root");
        CHECK(umount2(".", MNT_DETACH), "detach old root");
        CHECK(chdir(p->cwd[0] ? p->cwd : "/workspace"), "enter the working directory");
        {
                /* The worker's stdin and stdout: the session's /dev/null, not the host's. */
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0)
                        init_fail(errno, "open /dev/null");
                (void) close(null);
        }

        enter_user_namespace(p, fds);
        /* Changing credentials cleared the parent-death signal: set it again. */
        CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL), "parent-death signal");
        drop_capabilities();
        CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
        /* Last, so that nothing above needs what it denies. */
        install_seccomp(&p->seccomp_filter);
        explicit_bzero(opts, sizeof(opts));
}

int session_init(char **ret_session_id) {
        const Sbx__SessionSetup *p;
        Sbx__Msg *msg;
        char *session_id;

        msg = read_setup();
        p = msg->session_setup;
        if (!p->session_id[0] || strlen(p->session_id) > SESSION_ID_MAX || p->run_dir[0] != '/' ||
            strlen(p->run_dir) >= SESSION_PATH_MAX - 32 || p->image_dir[0] != '/' || p->layers_dir[0] != '/' ||
            !p->lowerdirs[0] || p->uid_base == 0 || p->uid_count == 0 || p->uid_count > UINT32_MAX - p->uid_base ||
            p->disk_bytes == 0)
                init_fail(EINVAL, "check the session's parameters");
        build_session(p);

        session_id = strdup(p->session_id);
        if (!session_id)
                init_fail(ENOMEM, "copy the session id");
        wipe_setup(msg);
        sbx__msg__free_unpacked(msg, NULL);
        /* Changing credentials made the process non-dumpable; an exec would have
         * made it dumpable again (the worker opens /proc/self files, then drops it). */
        CHECK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable");

        /* EOF on the set-up channel: sbxd now waits for READY from the worker. */
        (void) close(INIT_SYNC_FD);
        *ret_session_id = session_id;
        return 0;
}
