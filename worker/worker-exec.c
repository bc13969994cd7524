/* The pre-exec side of a command: wire the pipes, exec /bin/sh. The child
 * shares the worker's memory until it execs (clone_vfork, as posix_spawn
 * does): copying the worker's page tables and taking its copy-on-write faults
 * cost ~2 ms a command on a virtualized host. The worker is single-threaded
 * and waits meanwhile; the child touches nothing of the worker's but the
 * SpawnError it fills in when a step fails, then exits 127 (style R9 sends
 * that record on a sync socket; in shared memory it needs none), and the
 * worker installs no signal handlers that could run in it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <termios.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"
#include "worker.h"

typedef struct ChildArgs {
        const char *cmd;
        char *const *env;
        const char *cwd;
        pid_t parent;
        int stdin_fd, output_fd, error_fd;      /* error_fd == output_fd: one pipe for both */
        bool ctty;                              /* all three are a pty's terminal: make it ours */
        SpawnError *error;      /* the worker's: written only on failure */
} ChildArgs;

_noreturn_ _printf_(3, 4)
static void child_fail(SpawnError *error, int err, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(error->msg, sizeof(error->msg), fmt, ap);
        va_end(ap);
        error->err = err < 0 ? err : -EIO;
        _exit(127);
}

static int reset_signals(void) {
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigset_t none;

        /* Dispositions first, so nothing the worker ignores (SIGPIPE) stays ignored. */
        for (int sig = 1; sig < _NSIG; sig++) {
                /* The kernel's layout; glibc's sigaction refuses its reserved RT signals
                 * (32, 33), which make(1), for one, passes on ignored. */
                struct {
                        void (*handler)(int);
                        unsigned long flags;
                        void (*restorer)(void);
                        uint64_t mask;
                } kernel_default = { .handler = SIG_DFL };

                if (sig == SIGKILL || sig == SIGSTOP)
                        continue;
                if (sigaction(sig, &sa, NULL) < 0)
                        (void) syscall(SYS_rt_sigaction, sig, &kernel_default, NULL, sizeof(uint64_t));
        }
        sigemptyset(&none);
        return RET_NERRNO(sigprocmask(SIG_SETMASK, &none, NULL));
}

/* The command's own limits: no core dumps, a bounded number of open files.
 * (Its OOM score comes from the worker: see command_spawn.) */
static int set_command_limits(void) {
        static const struct {
                int resource;
                rlim_t value;
        } limits[] = {
                { RLIMIT_CORE, 0 },
                { RLIMIT_NOFILE, SBX_COMMAND_NOFILE },
        };

        for (size_t i = 0; i < ELEMENTSOF(limits); i++) {
                struct rlimit rl = { .rlim_cur = limits[i].value, .rlim_max = limits[i].value };
                if (setrlimit(limits[i].resource, &rl) < 0)
                        return -errno;
        }
        return 0;
}

static int command_child(void *userdata) {
        const ChildArgs *a = userdata;
        char *const argv[] = { (char *) "sh", (char *) "-c", (char *) a->cmd, NULL };
        int r;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                child_fail(a->error, -errno, "Failed to set the parent death signal");
        if (getppid() != a->parent)
                child_fail(a->error, -ESRCH, "Worker exited before the command started");
        if (setsid() < 0)
                child_fail(a->error, -errno, "Failed to start a new session");
        if (a->ctty && ioctl(a->stdin_fd, TIOCSCTTY, 0) < 0)
                child_fail(a->error, -errno, "Failed to make the pty the controlling terminal");
        /* The pipe ends are >= 4 (0-3 are taken), so these never clobber each other. */
        r = fd_move_to(a->stdin_fd, STDIN_FILENO);
        if (r >= 0)
                r = fd_move_to(a->output_fd, STDOUT_FILENO);
        if (r >= 0)
                r = fd_move_to(a->error_fd, STDERR_FILENO);
        if (r < 0)
                child_fail(a->error, r, "Failed to set up standard input and output");
        /* Everything above 2 is close-on-exec already; make sure of it. */
        if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                child_fail(a->error, -errno, "Failed to mark descriptors close-on-exec");
        if (chdir(a->cwd) < 0)
                child_fail(a->error, -errno, "Failed to change directory to '%s'", a->cwd);
        r = set_command_limits();
        if (r < 0)
                child_fail(a->error, r, "Failed to set the command's resource limits");
        r = reset_signals();
        if (r < 0)
                child_fail(a->error, r, "Failed to reset the signal mask");
        execve("/bin/sh", argv, a->env);
        child_fail(a->error, -errno, "Failed to execute /bin/sh");
}

#define OUTPUT_PIPE_SIZE (1 << 20)

static int pipe_cloexec(int *ret_read, int *ret_write) {
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        *ret_read = p[0];
        *ret_write = p[1];
        return 0;
}

static int write_oom_score_adj(int fd, int value) {
        char buf[16];
        int n = snprintf(buf, sizeof(buf), "%d\n", value);

        return pwrite(fd, buf, (size_t) n, 0) == n ? 0 : -errno;
}

/* A new pty of the session's devpts (/dev/ptmx -> pts/ptmx, session-init.c)
 * of size ws: its master (non-blocking) and its terminal, opened through
 * the master (TIOCGPTPEER), never by a path under /dev/pts. */
static int pty_open(const struct winsize *ws, int *ret_master, int *ret_terminal) {
        _cleanup_close_ int master = -EBADF, terminal = -EBADF;
        int unlock = 0;

        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (master < 0)
                return -errno;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0 || ioctl(master, TIOCSWINSZ, ws) < 0)
                return -errno;
        terminal = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (terminal < 0)
                return -errno;
        *ret_master = TAKE_FD(master);
        *ret_terminal = TAKE_FD(terminal);
        return 0;
}

/* The fds of a command on a pty: the child gets the terminal as 0, 1 and 2;
 * the worker writes its input to one dup of the master and reads its output
 * from another (so that closing "stdin" leaves the output open). */
static int pty_fds(const struct winsize *ws, ChildArgs *args, int *ret_in_w, int *ret_out_r, int *ret_terminal) {
        _cleanup_close_ int master = -EBADF, terminal = -EBADF, in_w = -EBADF;
        int r;

        r = pty_open(ws, &master, &terminal);
        if (r < 0)
                return r;
        in_w = fcntl(master, F_DUPFD_CLOEXEC, 3);
        if (in_w < 0)
                return -errno;
        args->stdin_fd = args->output_fd = args->error_fd = terminal;
        args->ctty = true;
        *ret_in_w = TAKE_FD(in_w);
        *ret_out_r = TAKE_FD(master);
        *ret_terminal = TAKE_FD(terminal);
        return 0;
}

/* The pipes of a command: the child's ends go in args; ours (in_w, out_r,
 * err_r) are non-blocking. The child's ends are closed by the caller after
 * the spawn (in_r, out_w, err_w). */
static int pipe_fds(bool separate_streams, ChildArgs *args, int *in_w, int *out_r, int *err_r, int *in_r, int *out_w,
                    int *err_w) {
        int r;

        r = pipe_cloexec(in_r, in_w);
        if (r >= 0)
                r = pipe_cloexec(out_r, out_w);
        if (r >= 0 && separate_streams)
                r = pipe_cloexec(err_r, err_w);
        if (r >= 0)
                r = fd_nonblock(*in_w, true);
        if (r >= 0)
                r = fd_nonblock(*out_r, true);
        if (r >= 0 && separate_streams)
                r = fd_nonblock(*err_r, true);
        if (r < 0)
                return r;
        /* A bigger pipe lets a chatty command write on while the worker relays
         * (bounded by the system's pipe-max-size; failing is harmless). A
         * separate stderr keeps the default size: it rarely carries the bulk,
         * and every pipe counts against the sandbox user's pipe-user-pages. */
        (void) fcntl(*out_r, F_SETPIPE_SZ, OUTPUT_PIPE_SIZE);

        args->stdin_fd = *in_r;
        args->output_fd = *out_w;
        args->error_fd = separate_streams ? *err_w : *out_w;
        return 0;
}

int command_spawn(const char *cmd, char *const env[], const char *cwd, const OomScore *oom, bool separate_streams,
                  const struct winsize *pty, SpawnError *error, pid_t *ret_pid, int *ret_stdin_fd, int *ret_output_fd,
                  int *ret_error_fd) {
        _cleanup_close_ int in_r = -EBADF, in_w = -EBADF, out_r = -EBADF, out_w = -EBADF,
                            err_r = -EBADF, err_w = -EBADF;
        ChildArgs args = { .cmd = cmd, .env = env, .cwd = cwd, .parent = getpid(), .error = error };
        pid_t pid;
        int r;

        error->err = 0;
        error->msg[0] = '\0';
        r = pty ? pty_fds(pty, &args, &in_w, &out_r, &in_r) :
                  pipe_fds(separate_streams, &args, &in_w, &out_r, &err_r, &in_r, &out_w, &err_w);
        if (r < 0)
                return r;
        /* An OOM in the session's cgroup must take a command before the worker
         * (PID 1 of the session). Without CAP_SYS_RESOURCE the worker cannot
         * lower its own score below where it started, but it may raise it and
         * go back: the child is made with the raised score, which its exec
         * keeps. (The worker is not dumpable, so the child, sharing its memory,
         * could not open its own /proc/self/oom_score_adj.) */
        r = write_oom_score_adj(oom->fd, SBX_COMMAND_OOM_SCORE_ADJ);
        if (r < 0)
                return r;
        /* Returns once the child has exec'd or exited. */
        pid = clone_vfork(command_child, 0, &args, NULL);
        r = write_oom_score_adj(oom->fd, oom->base);
        if (pid < 0)
                return pid;
        if (r < 0)
                return r;
        if (error->err < 0)
                return error->err;

        *ret_pid = pid;
        *ret_stdin_fd = TAKE_FD(in_w);
        *ret_output_fd = TAKE_FD(out_r);
        *ret_error_fd = TAKE_FD(err_r);         /* -EBADF with one pipe for both */
        return 0;
}
