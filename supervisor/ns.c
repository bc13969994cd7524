#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "netns.h"
#include "ns.h"
#include "spawner.h"
#include "seccomp.h"

/* Between the supervisor and its own fork only: not a protocol between programs. */
typedef struct ChildError {
        int err;
        char step[120];
} ChildError;

enum { SYNC_GO = 'G', SYNC_USERNS = 'U', SYNC_MAPPED = 'M', SYNC_SPAWNED = 'P' };

/* The spawner's report of the child it made (with its pidfd). */
typedef struct SpawnReport {
        char tag;
        pid_t pid;
} SpawnReport;

static _noreturn_ void child_fail(int sync, int err, const char *step) {
        (void) spawn_report_error(sync, err, step);
        _exit(127);
}

#define CHECK(sync, expr, step)                              \
        do {                                                 \
                if ((expr) < 0)                              \
                        child_fail((sync), errno, (step));   \
        } while (0)

static void sync_expect(int sync, char want) {
        char c;
        ssize_t n = recv(sync, &c, 1, 0);
        if (n != 1 || c != want)
                child_fail(sync, n < 0 ? errno : EPIPE, "waiting for the supervisor");
}

static void child_setup_dev(int sync, const char *dev) {
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

        CHECK(sync, mount("sbx-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"), "mount /dev");
        fd = open(dev, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(sync, fd, "open /dev");
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                CHECK(sync, mknodat(fd, nodes[i].name, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)),
                      "mknod in /dev");
                CHECK(sync, fchmodat(fd, nodes[i].name, 0666, 0), "chmod in /dev");
        }
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                CHECK(sync, symlinkat(links[i].target, fd, links[i].name), "symlink in /dev");
        CHECK(sync, mkdirat(fd, "pts", 0755), "mkdir /dev/pts");
        CHECK(sync, mkdirat(fd, "shm", 01777), "mkdir /dev/shm");
        CHECK(sync, fchmodat(fd, "shm", 01777, 0), "chmod /dev/shm");
}

/* runc's masked and read-only /proc paths: a file masked by /dev/null, a
 * directory by an empty read-only tmpfs, the rest bound read-only onto
 * itself. Absent entries are skipped. */
static const char *const proc_masked[] = {
        "kcore", "keys", "key-users", "kmsg", "timer_list", "timer_stats", "sched_debug",
        "latency_stats", "sysrq-trigger", "acpi", "asound", "scsi", "driver",
};
static const char *const proc_readonly[] = { "sys", "irq", "bus", "fs" };

static void child_harden_proc(int sync, const char *proc) {
        char path[8192 + 64];
        struct stat st;

        for (size_t i = 0; i < ELEMENTSOF(proc_masked); i++) {
                snprintf(path, sizeof(path), "%s/%s", proc, proc_masked[i]);
                if (lstat(path, &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode))
                        CHECK(sync, mount("sbx-masked", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                          "size=4k,nr_inodes=1,mode=0555"),
                              "mask a /proc directory");
                else {
                        CHECK(sync, mount("/dev/null", path, NULL, MS_BIND, NULL), "mask a /proc file");
                        CHECK(sync, mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
                              "remount a masked /proc file read-only");
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(proc_readonly); i++) {
                snprintf(path, sizeof(path), "%s/%s", proc, proc_readonly[i]);
                if (lstat(path, &st) < 0)
                        continue;
                CHECK(sync, mount(path, path, NULL, MS_BIND | MS_REC, NULL), "bind a /proc path");
                CHECK(sync, mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
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

static void child_drop_bounding_set(int sync) {
        for (int cap = 0;; cap++) {
                bool keep = false;
                if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
                        break; /* past the kernel's last capability */
                for (size_t i = 0; i < ELEMENTSOF(caps_kept); i++)
                        keep = keep || caps_kept[i] == cap;
                if (!keep)
                        CHECK(sync, prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop the capability bounding set");
        }
        CHECK(sync, prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities");
}

static void bind_readonly(int sync, const char *src, const char *dst) {
        CHECK(sync, mount(src, dst, NULL, MS_BIND | MS_REC, NULL), "bind host system directory");
        CHECK(sync, mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL),
              "remount host system directory read-only");
}

static int send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(2 * sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > 2)
                return -EINVAL;
        if (n_fds > 0) {
                struct cmsghdr *cm;
                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
                memcpy(CMSG_DATA(cm), fds, n_fds * sizeof(int));
        }
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) < 0)
                return -errno;
        return 0;
}

_noreturn_ void session_child_main(const SpawnParams *p, const SeccompProgram *seccomp, int worker_exe_fd,
                                   int netns_fd, int sync, int worker_sock) {
        char T[4096], path[4096 + 64], opts[8192];
        static const char *const system_dirs[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
        _cleanup_close_ int tfd = -EBADF;
        int fds[2], n;

        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* The spawner ignores these; an ignored signal would stay ignored across the exec. */
        (void) signal(SIGCHLD, SIG_DFL);
        (void) signal(SIGPIPE, SIG_DFL);
        (void) fd_nonblock(sync, false);
        sync_expect(sync, SYNC_GO);

        CHECK(sync, unshare(CLONE_NEWCGROUP), "unshare cgroup namespace");
        CHECK(sync, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "make / private");

        /* The session's writable layer: a tmpfs sized by the disk limit. */
        snprintf(T, sizeof(T), "%s/session-root", p->run_dir);
        snprintf(opts, sizeof(opts), "size=%llu,mode=0755,uid=%u,gid=%u",
                 (unsigned long long) p->disk_bytes, p->uid_base, p->uid_base);
        CHECK(sync, mount("sbx-session", T, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount session tmpfs");
        tfd = open(T, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(sync, tfd, "open session tmpfs");
        static const char *const dirs[] = { "ws", "ws/upper", "ws/work", "sys", "sys/upper", "sys/work", "root" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                CHECK(sync, mkdirat(tfd, dirs[i], 0755), "create session directories");
        CHECK(sync, fchownat(tfd, "ws/upper", p->uid_base, p->uid_base, 0), "chown workspace upper");
        CHECK(sync, fchownat(tfd, "sys/upper", p->uid_base, p->uid_base, 0), "chown root upper");

        /* Root: the image, with private writes; host system directories read-only. */
        n = snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/sys/upper,workdir=%s/sys/work,redirect_dir=off",
                     p->image_dir, T, T);
        if ((size_t) n >= sizeof(opts))
                child_fail(sync, ENAMETOOLONG, "root overlay options");
        snprintf(path, sizeof(path), "%s/root", T);
        CHECK(sync, mount("sbx-root", path, "overlay", MS_NOSUID | MS_NODEV, opts), "mount root overlay");
        for (size_t i = 0; i < ELEMENTSOF(system_dirs); i++) {
                char host[64];
                struct stat st;
                snprintf(host, sizeof(host), "/%s", system_dirs[i]);
                if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
                        continue; /* absent, or a merged-usr symlink the image mirrors */
                snprintf(path, sizeof(path), "%s/root/%s", T, system_dirs[i]);
                bind_readonly(sync, host, path);
        }

        /* Workspace: the published layers, newest first, under the session's upper. */
        /* By path: an fd opened in the supervisor's namespace would name the host's
         * mount, which overlayfs refuses to clone into this namespace. */
        CHECK(sync, chdir(p->layers_dir), "enter layers directory");
        n = snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/ws/upper,workdir=%s/ws/work,redirect_dir=off",
                     p->lowerdirs, T, T);
        if ((size_t) n >= sizeof(opts))
                child_fail(sync, E2BIG, "too many layers for one overlay mount");
        snprintf(path, sizeof(path), "%s/root/workspace", T);
        CHECK(sync, mount("sbx-workspace", path, "overlay", MS_NOSUID | MS_NODEV, opts), "mount workspace overlay");

        snprintf(path, sizeof(path), "%s/root/proc", T);
        CHECK(sync, mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "mount /proc");
        child_harden_proc(sync, path);
        /* A fresh /tmp of its own, sized like the session's writable layer. */
        snprintf(path, sizeof(path), "%s/root/tmp", T);
        snprintf(opts, sizeof(opts), "size=%llu,mode=1777,uid=%u,gid=%u", (unsigned long long) p->disk_bytes,
                 p->uid_base, p->uid_base);
        CHECK(sync, mount("sbx-tmp", path, "tmpfs", MS_NOSUID | MS_NODEV, opts), "mount /tmp");
        snprintf(path, sizeof(path), "%s/root/dev", T);
        child_setup_dev(sync, path);
        snprintf(path, sizeof(path), "%s/root/dev/pts", T);
        CHECK(sync, mount("devpts", path, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"),
              "mount /dev/pts");
        snprintf(path, sizeof(path), "%s/root/dev/shm", T);
        CHECK(sync, mount("shm", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m"), "mount /dev/shm");

        CHECK(sync, sethostname("sbx", 3), "set hostname");
        if (netns_fd >= 0) {
                CHECK(sync, setns(netns_fd, CLONE_NEWNET), "join the network namespace");
                netns_fd = safe_close(netns_fd);
        } else if (netns_loopback_up() < 0)
                child_fail(sync, EIO, "bring loopback up");

        snprintf(path, sizeof(path), "%s/ws/upper", T);
        fds[0] = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(sync, fds[0], "open workspace upper");
        snprintf(path, sizeof(path), "%s/root/workspace", T);
        fds[1] = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        CHECK(sync, fds[1], "open workspace");

        snprintf(path, sizeof(path), "%s/root", T);
        CHECK(sync, chdir(path), "enter new root");
        CHECK(sync, syscall(SYS_pivot_root, ".", "."), "pivot_root");
        CHECK(sync, umount2(".", MNT_DETACH), "detach old root");
        CHECK(sync, chdir("/workspace"), "enter /workspace");

        /* From here on nothing we hold is a capability on the host. */
        CHECK(sync, unshare(CLONE_NEWUSER), "unshare user namespace");
        {
                char c = SYNC_USERNS;
                int r = send_with_fds(sync, &c, 1, fds, 2);
                if (r < 0)
                        child_fail(sync, r, "send workspace fds");
        }
        fds[0] = safe_close(fds[0]);
        fds[1] = safe_close(fds[1]);
        sync_expect(sync, SYNC_MAPPED);

        CHECK(sync, setgroups(0, NULL), "setgroups");
        CHECK(sync, setresgid(0, 0, 0), "setresgid");
        CHECK(sync, setresuid(0, 0, 0), "setresuid");
        /* Changing credentials cleared the parent-death signal: set it again. */
        CHECK(sync, prctl(PR_SET_PDEATHSIG, SIGKILL), "parent-death signal");
        child_drop_bounding_set(sync);
        CHECK(sync, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");

        /* fd 3: worker socket; 4: worker executable; 5: sync (close-on-exec: EOF = exec ok). */
        {
                int sock = fcntl(worker_sock, F_DUPFD_CLOEXEC, 10);
                int exe = fcntl(worker_exe_fd, F_DUPFD_CLOEXEC, 10);
                int syn = fcntl(sync, F_DUPFD_CLOEXEC, 10);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (sock < 0 || exe < 0 || syn < 0 || null < 0)
                        child_fail(sync, errno, "arrange worker fds");
                if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(sock, 3) < 0 ||
                    dup3(exe, 4, O_CLOEXEC) < 0 || dup3(syn, 5, O_CLOEXEC) < 0)
                        child_fail(syn, errno, "arrange worker fds");
                sync = 5;
                if (syscall(SYS_close_range, 6, ~0U, 0) < 0)
                        child_fail(sync, errno, "close inherited fds");
        }
        {
                sigset_t none;
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
        }
        {
                /* Last, so that nothing above needs what it denies. */
                int r = sandbox_seccomp_install(seccomp);
                if (r < 0)
                        child_fail(sync, r, "seccomp");
        }
        {
                char *const argv[] = { (char *) "sbx-worker", (char *) "--session", (char *) p->session_id, NULL };
                char *const envp[] = { NULL };
                syscall(SYS_execveat, 4, "", argv, envp, AT_EMPTY_PATH);
                child_fail(sync, errno, "exec sbx-worker");
        }
}



int spawn_report_child(int sync, pid_t pid, int pidfd) {
        SpawnReport rep = { .tag = SYNC_SPAWNED, .pid = pid };
        return send_with_fds(sync, &rep, sizeof(rep), &pidfd, 1);
}

int spawn_report_error(int sync, int err, const char *step) {
        ChildError e = { .err = err < 0 ? err : -err };
        strlcpy(e.step, step, sizeof(e.step));
        return send_with_fds(sync, &e, sizeof(e), NULL, 0);
}

static int write_map(pid_t pid, const char *file, uid_t base, uint32_t count) {
        char path[64], line[64];
        _cleanup_close_ int fd = -EBADF;
        int len;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, file);
        len = snprintf(line, sizeof(line), "0 %u %u\n", base, count);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (write(fd, line, (size_t) len) != len)
                return -errno;
        return 0;
}

/* One message of the set-up channel: a byte (ret_c), a report (ret_rep), or
 * an error (ret_err, returned as its errno). ret_fds receives the fds that
 * came with it (up to want_fds of them; the rest -EBADF); any other fds are
 * closed. -ECONNRESET at EOF. */
static int recv_child(int sync, char *ret_c, SpawnReport *ret_rep, int *ret_fds, size_t want_fds,
                      ChildError *ret_err) {
        union {
                ChildError e;
                SpawnReport rep;
                char c;
        } buf;
        union {
                struct cmsghdr align;
                char b[CMSG_SPACE(2 * sizeof(int))];
        } control;
        struct iovec iov = { .iov_base = &buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.b,
                             .msg_controllen = sizeof(control.b) };
        int fds[2] = { -EBADF, -EBADF };
        size_t n_fds = 0;
        ssize_t n;

        n = recvmsg(sync, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int *in = (int *) CMSG_DATA(cm);
                        for (size_t i = 0; i < k; i++) {
                                int fd;
                                memcpy(&fd, &in[i], sizeof(int));
                                if (n_fds < MIN(want_fds, ELEMENTSOF(fds)))
                                        fds[n_fds++] = fd;
                                else
                                        safe_close(fd);
                        }
                }
        for (size_t i = 0; i < want_fds; i++)
                ret_fds[i] = i < ELEMENTSOF(fds) ? fds[i] : -EBADF;
        if (n == sizeof(ChildError)) {
                *ret_err = buf.e;
                ret_err->step[sizeof(ret_err->step) - 1] = '\0';
                return ret_err->err < 0 ? ret_err->err : -EIO;
        }
        if (n == 0)
                return -ECONNRESET;
        if (n == sizeof(SpawnReport) && ret_rep) {
                *ret_rep = buf.rep;
                return 0;
        }
        if (n != 1)
                return -EPROTO;
        *ret_c = buf.c;
        return 0;
}

static int send_byte(int sock, char c) {
        if (send(sock, &c, 1, MSG_NOSIGNAL) != 1)
                return -errno;
        return 0;
}

void pidfd_kill_wait(int pidfd) {
        struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

        if (pidfd < 0)
                return;
        (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
                ;
}

void spawn_state_done(SpawnState *st) {
        if (st->sync >= 0 && st->pidfd >= 0)
                pidfd_kill_wait(st->pidfd); /* set-up never finished: the child goes */
        st->pid = 0;
        st->sync = safe_close(st->sync);
        st->pidfd = safe_close(st->pidfd);
        st->sock = safe_close(st->sock);
        st->upper_fd = safe_close(st->upper_fd);
        st->workspace_fd = safe_close(st->workspace_fd);
}

int session_spawn_begin(Spawner *sp, const SpawnParams *p, CgroupSession *cgroup, SpawnState *ret,
                        char *ret_errmsg, size_t errmsg_size) {
        int sync[2] = { -EBADF, -EBADF }, wsock[2] = { -EBADF, -EBADF };
        int r;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sync) < 0 ||
            socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, wsock) < 0) {
                r = -errno;
                goto fail;
        }
        /* The child's ends go to the spawner, which hands them to the child. */
        r = spawner_send(sp, p, sync[1], wsock[1]);
        if (r < 0)
                goto fail;
        safe_close(sync[1]);
        safe_close(wsock[1]);
        *ret = (SpawnState) {
                .pidfd = -EBADF, .sync = sync[0], .sock = wsock[0], .upper_fd = -EBADF, .workspace_fd = -EBADF,
                .cgroup = cgroup, .uid_base = p->uid_base, .uid_count = p->uid_count,
        };
        return 0;
fail:
        if (ret_errmsg)
                snprintf(ret_errmsg, errmsg_size, "spawn: %s", strerror(-r));
        safe_close(sync[0]);
        safe_close(sync[1]);
        safe_close(wsock[0]);
        safe_close(wsock[1]);
        return r;
}

int session_spawn_continue(SpawnState *st, char *ret_errmsg, size_t errmsg_size) {
        ChildError cerr = {};
        SpawnReport rep = {};
        const char *step;
        int fds[2] = { -EBADF, -EBADF };
        char c = 0;
        int r;

        if (st->pid == 0) {
                step = "spawn";
                r = recv_child(st->sync, &c, &rep, fds, 1, &cerr);
                if (r == -EAGAIN)
                        return 1;
                if (r < 0 || rep.tag != SYNC_SPAWNED || rep.pid <= 0 || fds[0] < 0) {
                        safe_close(fds[0]);
                        r = r < 0 ? r : -EPROTO;
                        goto fail;
                }
                st->pid = rep.pid;
                st->pidfd = fds[0];
                if (st->cgroup) {
                        step = "attach to cgroup";
                        r = cgroup_session_attach(st->cgroup, st->pid);
                        if (r < 0)
                                goto fail;
                }
                r = send_byte(st->sync, SYNC_GO);
                if (r < 0)
                        goto fail;
                return 1;
        }
        if (!st->mapped) {
                step = "session set-up";
                r = recv_child(st->sync, &c, NULL, fds, 2, &cerr);
                if (r == -EAGAIN)
                        return 1;
                if (r < 0 || c != SYNC_USERNS || fds[0] < 0 || fds[1] < 0) {
                        safe_close(fds[0]);
                        safe_close(fds[1]);
                        r = r < 0 ? r : -EPROTO;
                        goto fail;
                }
                st->upper_fd = fds[0];
                st->workspace_fd = fds[1];
                step = "write user namespace maps";
                r = write_map(st->pid, "uid_map", st->uid_base, st->uid_count);
                if (r >= 0)
                        r = write_map(st->pid, "gid_map", st->uid_base, st->uid_count);
                if (r < 0)
                        goto fail;
                r = send_byte(st->sync, SYNC_MAPPED);
                if (r < 0)
                        goto fail;
                st->mapped = true;
                return 1;
        }
        /* EOF means the exec happened (the child's end is close-on-exec). */
        step = "exec worker";
        r = recv_child(st->sync, &c, NULL, NULL, 0, &cerr);
        if (r == -EAGAIN)
                return 1;
        if (r != -ECONNRESET) {
                r = r < 0 ? r : -EPROTO;
                goto fail;
        }
        return 0;
fail:
        if (ret_errmsg)
                snprintf(ret_errmsg, errmsg_size, "%s: %s", cerr.step[0] ? cerr.step : step, strerror(-r));
        return r;
}
