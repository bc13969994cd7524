/* A session's init: sbx-worker --session-init, started by sbxd's spawner as
 * root in fresh mount, pid, ipc and uts namespaces (supervisor/spawner.c). It
 * builds the session's root as supervisor/ns.h describes, enters its user
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
 * out of its commands' reach (worker.c). The host paths among the parameters
 * are no secret anyway: the session's mount table shows them.
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
#include <sched.h>
#include <signal.h>
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

/* runc's masked and read-only /proc paths: a file masked by /dev/null, a
 * directory by an empty read-only tmpfs, the rest bound read-only onto
 * itself. Absent entries are skipped. */
static const char *const proc_masked[] = {
        "kcore", "keys", "key-users", "kmsg", "timer_list", "timer_stats", "sched_debug",
        "latency_stats", "sysrq-trigger", "acpi", "asound", "scsi", "driver",
};
static const char *const proc_readonly[] = { "sys", "irq", "bus", "fs" };

static void harden_proc(const char *proc) {
        char path[8192 + 64];
        struct stat st;

        for (size_t i = 0; i < ELEMENTSOF(proc_masked); i++) {
                snprintf(path, sizeof(path), "%s/%s", proc, proc_masked[i]);
                if (lstat(path, &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode))
                        CHECK(mount("sbx-masked", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                    "size=4k,nr_inodes=1,mode=0555"),
                              "mask a /proc directory");
                else {
                        CHECK(mount("/dev/null", path, NULL, MS_BIND, NULL), "mask a /proc file");
                        CHECK(mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                    NULL),
                              "remount a masked /proc file read-only");
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(proc_readonly); i++) {
                snprintf(path, sizeof(path), "%s/%s", proc, proc_readonly[i]);
                if (lstat(path, &st) < 0)
                        continue;
                CHECK(mount(path, path, NULL, MS_BIND | MS_REC, NULL), "bind a /proc path");
                CHECK(mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
                      "remount a /proc path read-only");
        }
        explicit_bzero(path, sizeof(path));
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

static void bind_readonly(const char *src, const char *dst) {
        CHECK(mount(src, dst, NULL, MS_BIND | MS_REC, NULL), "bind host system directory");
        CHECK(mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL),
              "remount host system directory read-only");
}

/* An overlay at T/<target> of lowers (":"-separated, newest first) with its
 * writes in T/<area>/upper; E2BIG when its options do not fit the page the
 * kernel takes for them. */
static void mount_overlay(const char *T, const char *area, const char *lowers, const char *target,
                          const char *source, const char *step) {
        char opts[8192], path[SESSION_PATH_MAX + 64];
        int n;

        n = snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/%s/upper,workdir=%s/%s/work,redirect_dir=off",
                     lowers, T, area, T, area);
        if (n < 0 || n >= MOUNT_OPTIONS_MAX)
                init_fail(E2BIG, step);
        snprintf(path, sizeof(path), "%s/%s", T, target);
        CHECK(mount(source, path, "overlay", MS_NOSUID | MS_NODEV, opts), step);
        explicit_bzero(opts, sizeof(opts));
        explicit_bzero(path, sizeof(path));
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

/* Everything from sbxd's go to the seccomp filter. Each function that held a
 * host path wipes it before it returns. */
static void build_session(const Sbx__SessionSetup *p) {
        static const char *const system_dirs[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
        static const char *const dirs[] = { "ws", "ws/upper", "ws/work", "sys", "sys/upper", "sys/work", "root" };
        char T[SESSION_PATH_MAX], path[SESSION_PATH_MAX + 64], opts[8192];
        _cleanup_close_ int tfd = -EBADF;
        int fds[2];

        CHECK(fd_nonblock(INIT_SYNC_FD, false), "set-up channel");
        sync_expect(SETUP_GO);

        CHECK(unshare(CLONE_NEWCGROUP), "unshare cgroup namespace");
        CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make / private");

        /* The session's writable layer: a tmpfs sized by the disk limit. */
        snprintf(T, sizeof(T), "%s/session-root", p->run_dir);
        snprintf(opts, sizeof(opts), "size=%llu,mode=0755,uid=%u,gid=%u", (unsigned long long) p->disk_bytes,
                 p->uid_base, p->uid_base);
        CHECK(mount("sbx-session", T, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount session tmpfs");
        tfd = open(T, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(tfd, "open session tmpfs");
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                CHECK(mkdirat(tfd, dirs[i], 0755), "create session directories");
        CHECK(fchownat(tfd, "ws/upper", p->uid_base, p->uid_base, 0), "chown workspace upper");
        CHECK(fchownat(tfd, "sys/upper", p->uid_base, p->uid_base, 0), "chown root upper");

        /* Root: the image, with private writes; host system directories read-only. */
        mount_overlay(T, "sys", p->image_dir, "root", "sbx-root", "mount root overlay");
        for (size_t i = 0; i < ELEMENTSOF(system_dirs); i++) {
                char host[64];
                struct stat st;
                snprintf(host, sizeof(host), "/%s", system_dirs[i]);
                if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
                        continue; /* absent, or a merged-usr symlink the image mirrors */
                snprintf(path, sizeof(path), "%s/root/%s", T, system_dirs[i]);
                bind_readonly(host, path);
        }

        /* Workspace: the published layers, newest first, under the session's upper.
         * By path: an fd opened in sbxd's namespace would name the host's mount,
         * which overlayfs refuses to clone into this namespace. */
        CHECK(chdir(p->layers_dir), "enter layers directory");
        mount_overlay(T, "ws", p->lowerdirs, "root/workspace", "sbx-workspace", "mount workspace overlay");

        snprintf(path, sizeof(path), "%s/root/proc", T);
        CHECK(mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "mount /proc");
        harden_proc(path);
        /* A fresh /tmp of its own, sized like the session's writable layer. */
        snprintf(path, sizeof(path), "%s/root/tmp", T);
        snprintf(opts, sizeof(opts), "size=%llu,mode=1777,uid=%u,gid=%u", (unsigned long long) p->disk_bytes,
                 p->uid_base, p->uid_base);
        CHECK(mount("sbx-tmp", path, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount /tmp");
        snprintf(path, sizeof(path), "%s/root/dev", T);
        setup_dev(path);
        snprintf(path, sizeof(path), "%s/root/dev/pts", T);
        CHECK(mount("devpts", path, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"),
              "mount /dev/pts");
        snprintf(path, sizeof(path), "%s/root/dev/shm", T);
        CHECK(mount("shm", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m"), "mount /dev/shm");

        CHECK(sethostname("sbx", 3), "set hostname");
        CHECK(setns(INIT_NETNS_FD, CLONE_NEWNET), "join the network namespace");
        (void) close(INIT_NETNS_FD);

        snprintf(path, sizeof(path), "%s/ws/upper", T);
        fds[0] = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(fds[0], "open workspace upper");
        snprintf(path, sizeof(path), "%s/root/workspace", T);
        fds[1] = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(fds[1], "open workspace");

        snprintf(path, sizeof(path), "%s/root", T);
        CHECK(chdir(path), "enter new root");
        CHECK(syscall(SYS_pivot_root, ".", "."), "pivot_root");
        CHECK(umount2(".", MNT_DETACH), "detach old root");
        CHECK(chdir("/workspace"), "enter /workspace");
        {
                /* The worker's stdin and stdout: the session's /dev/null, not the host's. */
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0)
                        init_fail(errno, "open /dev/null");
                (void) close(null);
        }

        /* From here on nothing we hold is a capability on the host. */
        CHECK(unshare(CLONE_NEWUSER), "unshare user namespace");
        {
                char c = SETUP_USERNS;
                int r = send_with_fds(INIT_SYNC_FD, &c, 1, fds, 2);
                if (r < 0)
                        init_fail(r, "send workspace fds");
        }
        (void) close(fds[0]);
        (void) close(fds[1]);
        sync_expect(SETUP_MAPPED);

        CHECK(setgroups(0, NULL), "setgroups");
        CHECK(setresgid(0, 0, 0), "setresgid");
        CHECK(setresuid(0, 0, 0), "setresuid");
        /* Changing credentials cleared the parent-death signal: set it again. */
        CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL), "parent-death signal");
        drop_capabilities();
        CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
        /* Last, so that nothing above needs what it denies. */
        install_seccomp(&p->seccomp_filter);
        explicit_bzero(T, sizeof(T));
        explicit_bzero(path, sizeof(path));
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
