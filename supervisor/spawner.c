/* See spawner.h. Between sbxd and its own fork only: the request is the
 * SpawnParams struct as is, not a protocol between programs. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "netns.h"
#include "spawner.h"

struct Spawner {
        pid_t pid;
        int sock;                       /* SOCK_SEQPACKET to the spawner */
        int worker_exe_fd;              /* borrowed from sbxd */
        const SeccompProgram *seccomp;  /* borrowed; the spawner has its copy */
};

/* Room for a burst of requests while the spawner is busy cloning. */
#define SPAWNER_SNDBUF (4u << 20)

enum { SPAWNER_SOCK_FD = 3, SPAWNER_EXE_FD = 4 };

/* Network namespaces made while no request waits: creating one is the largest
 * single kernel cost of a session (about a millisecond). Each is used once. */
#define NETNS_POOL 4

typedef struct NetnsPool {
        int home_fd;                    /* the spawner's own network namespace */
        int fds[NETNS_POOL];
        unsigned n;
        bool broken;                    /* making one failed: clone makes them from now on */
} NetnsPool;

static bool request_waiting(int sock) {
        struct pollfd pfd = { .fd = sock, .events = POLLIN };
        return poll(&pfd, 1, 0) != 0;
}

/* Fill the pool while sbxd has nothing to ask. */
static void netns_pool_fill(NetnsPool *pool, int sock) {
        while (!pool->broken && pool->n < NETNS_POOL && !request_waiting(sock)) {
                int fd;
                if (netns_new_with_loopback(pool->home_fd, &fd) < 0) {
                        pool->broken = true;
                        return;
                }
                pool->fds[pool->n++] = fd;
        }
}

static int netns_pool_take(NetnsPool *pool) {
        return pool->n > 0 ? pool->fds[--pool->n] : -EBADF;
}

static void terminate_strings(SpawnParams *p) {
        p->session_id[sizeof(p->session_id) - 1] = '\0';
        p->run_dir[sizeof(p->run_dir) - 1] = '\0';
        p->image_dir[sizeof(p->image_dir) - 1] = '\0';
        p->layers_dir[sizeof(p->layers_dir) - 1] = '\0';
        p->lowerdirs[sizeof(p->lowerdirs) - 1] = '\0';
}

/* One request: SpawnParams and the child's two socket ends. */
static int recv_request(int sock, SpawnParams *ret, int ret_fds[2]) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(2 * sizeof(int))];
        } control;
        struct iovec iov = { .iov_base = ret, .iov_len = sizeof(*ret) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf) };
        struct cmsghdr *cm;
        ssize_t n;

        ret_fds[0] = ret_fds[1] = -EBADF;
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        if (n == 0)
                return -ECONNRESET;
        cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len == CMSG_LEN(2 * sizeof(int)))
                memcpy(ret_fds, CMSG_DATA(cm), 2 * sizeof(int));
        if ((size_t) n != sizeof(*ret) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || ret_fds[0] < 0 ||
            ret_fds[1] < 0)
                return -EBADMSG;
        terminate_strings(ret);
        return 0;
}

static _noreturn_ void spawner_main(pid_t parent, const SeccompProgram *seccomp) {
        NetnsPool pool = { .home_fd = -EBADF };
        sigset_t none;

        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(0);
        (void) prctl(PR_SET_NAME, "sbxd-spawner");
        setproctitle("[spawner]");
        /* The kernel reaps the session children; sbxd waits on their pidfds. */
        (void) signal(SIGCHLD, SIG_IGN);
        (void) signal(SIGPIPE, SIG_IGN);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        /* Nothing of sbxd's stays open here (clients, the database). */
        if (syscall(SYS_close_range, SPAWNER_EXE_FD + 1, ~0U, 0) < 0)
                _exit(1);
        pool.home_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        pool.broken = pool.home_fd < 0;

        for (;;) {
                SpawnParams p;
                int fds[2], pidfd, netns_fd, r;
                pid_t pid;

                netns_pool_fill(&pool, SPAWNER_SOCK_FD);
                r = recv_request(SPAWNER_SOCK_FD, &p, fds);
                if (r == -EINTR)
                        continue;
                if (r == -ECONNRESET || r == -EBADF || r == -ENOTSOCK)
                        _exit(0); /* sbxd is gone */
                if (r < 0) {
                        if (fds[0] >= 0)
                                (void) spawn_report_error(fds[0], r, "spawner request");
                        safe_close(fds[0]);
                        safe_close(fds[1]);
                        continue;
                }
                netns_fd = netns_pool_take(&pool);
                pid = (pid_t) syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                                                         (netns_fd >= 0 ? 0 : CLONE_NEWNET) | SIGCHLD,
                                      NULL, NULL, NULL, 0);
                if (pid == 0) {
                        (void) close(SPAWNER_SOCK_FD);
                        session_child_main(&p, seccomp, SPAWNER_EXE_FD, netns_fd, fds[0], fds[1]);
                }
                safe_close(netns_fd);
                if (pid < 0)
                        (void) spawn_report_error(fds[0], -errno, "clone");
                else {
                        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
                        if (pidfd < 0) {
                                (void) spawn_report_error(fds[0], -errno, "pidfd_open");
                                (void) kill(pid, SIGKILL);
                        } else {
                                /* The child waits for sbxd's go, so this comes first. */
                                (void) spawn_report_child(fds[0], pid, pidfd);
                                safe_close(pidfd);
                        }
                }
                safe_close(fds[0]);
                safe_close(fds[1]);
        }
}

static int spawner_fork(Spawner *sp) {
        int pair[2];
        int sndbuf = SPAWNER_SNDBUF;
        pid_t parent = getpid(), pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        if (setsockopt(pair[0], SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
                (void) setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                safe_close(pair[0]);
                safe_close(pair[1]);
                return r;
        }
        if (pid == 0) {
                /* Its two fds at fixed places (above them everything is closed). */
                int sock = fcntl(pair[1], F_DUPFD_CLOEXEC, 10);
                int exe = fcntl(sp->worker_exe_fd, F_DUPFD_CLOEXEC, 10);
                if (sock < 0 || exe < 0 || dup3(sock, SPAWNER_SOCK_FD, O_CLOEXEC) < 0 ||
                    dup3(exe, SPAWNER_EXE_FD, O_CLOEXEC) < 0)
                        _exit(1);
                spawner_main(parent, sp->seccomp);
        }
        safe_close(pair[1]);
        sp->sock = pair[0];
        sp->pid = pid;
        return 0;
}

static void spawner_stop(Spawner *sp) {
        sp->sock = safe_close(sp->sock);
        if (sp->pid > 0) {
                (void) kill(sp->pid, SIGKILL);
                (void) waitpid(sp->pid, NULL, 0);
        }
        sp->pid = 0;
}

int spawner_start(int worker_exe_fd, const SeccompProgram *seccomp, Spawner **ret) {
        Spawner *sp;
        int r;

        sp = calloc(1, sizeof(*sp));
        if (!sp)
                return -ENOMEM;
        sp->sock = -EBADF;
        sp->worker_exe_fd = worker_exe_fd;
        sp->seccomp = seccomp;
        r = spawner_fork(sp);
        if (r < 0) {
                free(sp);
                return r;
        }
        *ret = sp;
        return 0;
}

static int send_request(Spawner *sp, const SpawnParams *p, int sync, int worker_sock) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(2 * sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = (void *) p, .iov_len = sizeof(*p) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf) };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        int fds[2] = { sync, worker_sock };

        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(cm), fds, sizeof(fds));
        while (sendmsg(sp->sock, &mh, MSG_NOSIGNAL) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

int spawner_send(Spawner *sp, const SpawnParams *p, int sync, int worker_sock) {
        int r = sp->sock >= 0 ? send_request(sp, p, sync, worker_sock) : -EPIPE;

        if (r != -EPIPE && r != -ECONNRESET && r != -ENOTCONN)
                return r;
        /* It died (its sessions died with it): a new one, this once. */
        spawner_stop(sp);
        r = spawner_fork(sp);
        if (r < 0)
                return r;
        return send_request(sp, p, sync, worker_sock);
}

Spawner *spawner_free(Spawner *sp) {
        if (!sp)
                return NULL;
        spawner_stop(sp);
        free(sp);
        return NULL;
}
