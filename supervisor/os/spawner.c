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
#include "msg.h"
#include "os/netns.h"
#include "sbx-limits.h"
#include "setup.h"
#include "os/spawner.h"
#include "wire.h"

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
} NetnsPool;

static bool request_waiting(int sock) {
        struct pollfd pfd = { .fd = sock, .events = POLLIN };
        return poll(&pfd, 1, 0) != 0;
}

/* Fill the pool while sbxd has nothing to ask; a failure ends this round
 * (a request then makes its own, and says so if it cannot). */
static void netns_pool_fill(NetnsPool *pool, int sock) {
        while (pool->home_fd >= 0 && pool->n < NETNS_POOL && !request_waiting(sock)) {
                int fd;
                if (netns_new_with_loopback(pool->home_fd, &fd) < 0)
                        return;
                pool->fds[pool->n++] = fd;
        }
}

/* One from the pool, else a new one now. */
static int netns_pool_take(NetnsPool *pool, int *ret) {
        if (pool->n > 0) {
                *ret = pool->fds[--pool->n];
                return 0;
        }
        return pool->home_fd >= 0 ? netns_new_with_loopback(pool->home_fd, ret) : -EBADF;
}

static void terminate_strings(SpawnParams *p) {
        p->session_id[sizeof(p->session_id) - 1] = '\0';
        p->run_dir[sizeof(p->run_dir) - 1] = '\0';
        p->image_dir[sizeof(p->image_dir) - 1] = '\0';
        p->layers_dir[sizeof(p->layers_dir) - 1] = '\0';
        p->lowerdirs[sizeof(p->lowerdirs) - 1] = '\0';
        p->cwd[sizeof(p->cwd) - 1] = '\0';
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

/* The session's parameters as a SessionSetup frame on a pipe for its init. */
static int setup_pipe(const SpawnParams *p, const SeccompProgram *seccomp, int *ret_read) {
        static uint8_t frame[SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX];
        Sbx__SessionSetup setup = SBX__SESSION_SETUP__INIT;
        Sbx__Msg msg;
        _cleanup_close_ int rd = -EBADF, wr = -EBADF;
        int pipefd[2], r;
        ssize_t len;

        setup.session_id = (char *) p->session_id;
        setup.run_dir = (char *) p->run_dir;
        setup.image_dir = (char *) p->image_dir;
        setup.own_system = p->own_system;
        setup.layers_dir = (char *) p->layers_dir;
        setup.lowerdirs = (char *) p->lowerdirs;
        setup.uid_base = p->uid_base;
        setup.uid_count = p->uid_count;
        setup.disk_bytes = p->disk_bytes;
        setup.cwd = (char *) p->cwd;
        setup.seccomp_filter.data = (uint8_t *) seccomp->insns;
        setup.seccomp_filter.len = seccomp->fprog.len * sizeof(struct sock_filter);
        msg_init(&msg, SBX__MSG_TYPE__MSG_SESSION_SETUP, &setup);
        len = wire_pack(&msg, 0, 0, frame, sizeof(frame));
        if (len < 0)
                return (int) len;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        rd = pipefd[0];
        wr = pipefd[1];
        /* Room for the whole frame: the write below never waits for a reader. */
        if (fcntl(wr, F_GETPIPE_SZ) < len && fcntl(wr, F_SETPIPE_SZ, (int) len) < 0)
                return -errno;
        r = loop_write(wr, frame, (size_t) len);
        if (r < 0)
                return r;
        *ret_read = TAKE_FD(rd);
        return 0;
}

/* What the short-lived child needs until its exec; it shares our memory. */
typedef struct ExecArgs {
        int sync, worker_sock, setup, netns;
        int err;                        /* set by the child if it fails before the exec */
} ExecArgs;

/* Runs by clone_vfork in the session's new namespaces: puts the fds where
 * sbx-worker --session-init expects them and execs it. Touches nothing of
 * the spawner's memory but args->err. */
static int exec_session_init(void *userdata) {
        ExecArgs *a = userdata;
        char *const argv[] = { (char *) "sbx-worker", (char *) "--session-init", NULL };
        char *const envp[] = { NULL };
        int sock, sync = -EBADF, setup, netns, exe, null;

        /* (getppid() is 0 here: the spawner is outside the new pid namespace.) */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                goto fail;
        /* We ignore these; an ignored signal would stay ignored across the exec. */
        (void) signal(SIGCHLD, SIG_DFL);
        (void) signal(SIGPIPE, SIG_DFL);
        /* Above 10 first, so that no target clobbers a source. */
        sock = fcntl(a->worker_sock, F_DUPFD, 10);
        sync = fcntl(a->sync, F_DUPFD, 10);
        setup = fcntl(a->setup, F_DUPFD, 10);
        netns = fcntl(a->netns, F_DUPFD, 10);
        exe = fcntl(SPAWNER_EXE_FD, F_DUPFD_CLOEXEC, 10);
        null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (sock < 0 || sync < 0 || setup < 0 || netns < 0 || exe < 0 || null < 0)
                goto fail;
        /* 0 and 1 until the init has the session's own /dev/null. */
        if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(sock, 3) < 0 || dup2(sync, 4) < 0 ||
            dup2(setup, 5) < 0 || dup2(netns, 6) < 0)
                goto fail;
        /* Everything else goes at the exec (the executable's fd is needed for it). */
        if (syscall(SYS_close_range, 7, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                goto fail;
        syscall(SYS_execveat, exe, "", argv, envp, AT_EMPTY_PATH);
fail:
        a->err = errno > 0 ? -errno : -EIO;
        /* On our own copy of the channel: the one we were given may be overwritten. */
        (void) setup_report_error(sync >= 0 ? sync : a->sync, a->err, "start sbx-worker --session-init");
        _exit(127);
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

        for (;;) {
                SpawnParams p;
                ExecArgs args = { .setup = -EBADF, .netns = -EBADF };
                int fds[2], pidfd = -EBADF, egress = -EBADF, r;
                const char *step;
                pid_t pid = 0;

                netns_pool_fill(&pool, SPAWNER_SOCK_FD);
                r = recv_request(SPAWNER_SOCK_FD, &p, fds);
                if (r == -EINTR)
                        continue;
                if (r == -ECONNRESET || r == -EBADF || r == -ENOTSOCK)
                        _exit(0); /* sbxd is gone */
                args.sync = fds[0];
                args.worker_sock = fds[1];
                step = "spawner request";
                if (r >= 0) {
                        step = "network namespace";
                        r = netns_pool_take(&pool, &args.netns);
                }
                if (r >= 0 && p.egress_listen) {
                        step = "egress listening socket";
                        r = netns_listen_loopback(args.netns, pool.home_fd, SBX_EGRESS_PORT, &egress);
                }
                if (r >= 0) {
                        step = "session parameters";
                        r = setup_pipe(&p, seccomp, &args.setup);
                }
                if (r >= 0) {
                        /* Returns once the child has exec'd, or failed and said so. */
                        pid = clone_vfork(exec_session_init,
                                          CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS, &args, &pidfd);
                        step = "clone";
                        r = pid < 0 ? (int) pid : args.err;
                        if (pid > 0 && r >= 0)
                                /* The init waits for sbxd's go, so this comes first. */
                                (void) setup_report_spawned(args.sync, pid, pidfd, egress);
                        if (pid > 0)
                                safe_close(pidfd);
                }
                /* The child reported its own failure before the exec. */
                if (r < 0 && args.err == 0 && fds[0] >= 0)
                        (void) setup_report_error(fds[0], r, step);
                safe_close(args.netns);
                safe_close(egress);
                safe_close(args.setup);
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
        int fds[2] = { sync, worker_sock }, r;

        do
                r = send_with_fds(sp->sock, p, sizeof(*p), fds, 2);
        while (r == -EINTR);
        return r;
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
