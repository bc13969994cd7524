/* sbxd's side of a session's set-up (proto/setup.h); the session's side is
 * worker/session-init.c, started by the spawner (spawner.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "os/ns.h"
#include "setup.h"
#include "os/spawner.h"

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
static int recv_child(int sync, char *ret_c, SetupReport *ret_rep, int *ret_fds, size_t want_fds,
                      SetupError *ret_err) {
        union {
                SetupError e;
                SetupReport rep;
                char c;
        } buf;
        union {
                struct cmsghdr align;
                char b[CMSG_SPACE(3 * sizeof(int))];
        } control;
        struct iovec iov = { .iov_base = &buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.b,
                             .msg_controllen = sizeof(control.b) };
        int fds[3] = { -EBADF, -EBADF, -EBADF };
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
        if (n == sizeof(SetupError)) {
                *ret_err = buf.e;
                ret_err->step[sizeof(ret_err->step) - 1] = '\0';
                return ret_err->err < 0 ? ret_err->err : -EIO;
        }
        if (n == 0)
                return -ECONNRESET;
        if (n == sizeof(SetupReport) && ret_rep) {
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

static void tmpfs_fds_close(SpawnState *st) {
        for (size_t i = 0; i < SETUP_TMPFS_MAX; i++)
                st->tmpfs_fds[i] = safe_close(st->tmpfs_fds[i]);
}

static int send_go(SpawnState *st) {
        static SetupGo go;      /* 4.6 KiB: not on the loop's stack */
        int fds[SEND_FDS_MAX];
        size_t n;
        int r;

        go = (SetupGo) { .tag = SETUP_GO };
        if (st->mounts) {
                go.n_mounts = MIN(st->mounts->n, SPAWN_MOUNTS_MAX);
                memcpy(go.mounts, st->mounts->paths, sizeof(go.mounts));
                memcpy(fds, st->mount_fds, go.n_mounts * sizeof(int));
        }
        n = go.n_mounts;
        for (size_t i = 0; i < SETUP_TMPFS_MAX && st->tmpfs_fds[i] >= 0; i++) {
                if (n >= SEND_FDS_MAX)
                        return -E2BIG;
                fds[n++] = st->tmpfs_fds[i];
                go.n_tmpfs++;
        }
        r = send_with_fds(st->sync, &go, sizeof(go), fds, n);
        tmpfs_fds_close(st);
        return r;
}

/* Where a job mount goes under /in: its NAME of "d:in/NAME" or "f:in/NAME";
 * NULL for any other entry ("d:out" goes with SETUP_GO). */
static const char *input_name(const char *m) {
        const char *name = m + 5;

        if ((m[0] != 'd' && m[0] != 'f') || strncmp(m + 1, ":in/", 4) != 0 || !name[0] || strchr(name, '/') ||
            !strcmp(name, ".") || !strcmp(name, ".."))
                return NULL;
        return name;
}

typedef struct AttachWork {
        int pidfd;
        const SpawnMounts *mounts;
        const int *fds;
        int r;
} AttachWork;

/* On a thread of its own, which takes its own filesystem attributes
 * (unshare CLONE_FS) so that it alone enters the session's mount namespace
 * and leaves it with its end. Each mount point is made in /in, which the init
 * made, and reached without following a link or leaving /'s mount. */
static void *attach_thread(void *userdata) {
        static const uint64_t resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
        AttachWork *w = userdata;
        _cleanup_close_ int in = -EBADF;

        if (unshare(CLONE_FS) < 0 || setns(w->pidfd, CLONE_NEWNS) < 0) {
                w->r = -errno;
                return NULL;
        }
        in = openat2_fd(AT_FDCWD, "/in", O_PATH | O_DIRECTORY, resolve);
        if (in < 0) {
                w->r = in;
                return NULL;
        }
        for (size_t i = 0; i < w->mounts->n; i++) {
                const char *m = w->mounts->paths[i], *name = input_name(m);
                _cleanup_close_ int target = -EBADF;
                int r;

                if (!name) {
                        w->r = -EINVAL;
                        return NULL;
                }
                r = m[0] == 'd' ? mkdirat(in, name, 0755) : mknodat(in, name, S_IFREG | 0444, 0);
                if (r < 0 && errno != EEXIST) {
                        w->r = -errno;
                        return NULL;
                }
                target = openat2_fd(in, name, O_PATH | O_NOFOLLOW, resolve | RESOLVE_BENEATH);
                if (target < 0) {
                        w->r = target;
                        return NULL;
                }
                if (move_mount(w->fds[i], "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
                        w->r = -errno;
                        return NULL;
                }
        }
        w->r = 0;
        return NULL;
}

int session_attach_mounts(int pidfd, const SpawnMounts *mounts, const int *mount_fds) {
        AttachWork w = { .pidfd = pidfd, .mounts = mounts, .fds = mount_fds, .r = -EIO };
        pthread_t t;
        int r;

        if (mounts->n == 0)
                return 0;
        if (pidfd < 0 || mounts->n > SPAWN_MOUNTS_MAX)
                return -EINVAL;
        r = pthread_create(&t, NULL, attach_thread, &w);
        if (r != 0)
                return -r;
        r = pthread_join(t, NULL);
        return r != 0 ? -r : w.r;
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
        st->root_fd = safe_close(st->root_fd);
        st->egress_fd = safe_close(st->egress_fd);
        tmpfs_fds_close(st);
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
                .pidfd = -EBADF, .sync = sync[0], .sock = wsock[0], .upper_fd = -EBADF, .workspace_fd = -EBADF, .root_fd = -EBADF,
                .egress_fd = -EBADF, .tmpfs_fds = { -EBADF, -EBADF },
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
        SetupError cerr = {};
        SetupReport rep = {};
        const char *step;
        int fds[3] = { -EBADF, -EBADF, -EBADF };
        char c = 0;
        int r;

        if (st->pid == 0) {
                step = "spawn";
                r = recv_child(st->sync, &c, &rep, fds, 2, &cerr);
                if (r == -EAGAIN)
                        return 1;
                if (r < 0 || rep.tag != SETUP_SPAWNED || rep.pid <= 0 || fds[0] < 0) {
                        safe_close(fds[0]);
                        safe_close(fds[1]);
                        r = r < 0 ? r : -EPROTO;
                        goto fail;
                }
                st->pid = rep.pid;
                st->pidfd = fds[0];
                st->egress_fd = fds[1];
                if (st->cgroup) {
                        step = "attach to cgroup";
                        r = cgroup_session_attach(st->cgroup, st->pid);
                        if (r == -EAGAIN)
                                step = "the sandbox, or all sandboxes, are at their pids limit";
                        if (r < 0)
                                goto fail;
                }
                r = send_go(st);
                if (r < 0)
                        goto fail;
                return 1;
        }
        if (!st->mapped) {
                step = "session set-up";
                r = recv_child(st->sync, &c, NULL, fds, 3, &cerr);
                if (r == -EAGAIN)
                        return 1;
                if (r < 0 || c != SETUP_USERNS || fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
                        safe_close(fds[0]);
                        safe_close(fds[1]);
                        safe_close(fds[2]);
                        r = r < 0 ? r : -EPROTO;
                        goto fail;
                }
                st->upper_fd = fds[0];
                st->workspace_fd = fds[1];
                st->root_fd = fds[2];
                if (st->prepare) {
                        step = "fill the session with its kept files";
                        r = st->prepare(st->prepare_userdata, st->upper_fd, st->root_fd);
                        if (r < 0)
                                goto fail;
                }
                step = "write user namespace maps";
                r = write_map(st->pid, "uid_map", st->uid_base, st->uid_count);
                if (r >= 0)
                        r = write_map(st->pid, "gid_map", st->uid_base, st->uid_count);
                if (r < 0)
                        goto fail;
                r = send_byte(st->sync, SETUP_MAPPED);
                if (r < 0)
                        goto fail;
                st->mapped = true;
                return 1;
        }
        /* EOF: the init is done and runs as the worker (it closed its end). */
        step = "session set-up";
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
