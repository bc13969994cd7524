/* sbx-worker: one per live workspace session. The supervisor starts it as
 * PID 1 of the session's pid namespace, inside its other namespaces, with the
 * supervisor socket on fd 3. It runs commands for the supervisor, relays their
 * stdin, streams their output back and reaps every process in the namespace.
 *
 * One thread, one poll() loop. Output is read only while the socket takes
 * frames: at most one output frame waits in memory, so a command that writes
 * forever is slowed down by its full pipe, never buffered here. A command's
 * stdout and stderr share one pipe (each frame says STREAM_MERGED), or, when
 * the exec asks for separate streams, have one each (STREAM_STDOUT,
 * STREAM_STDERR), sent in the order they were read. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "sbx-limits.h"
#include "log.h"
#include "macro.h"
#include "wire.h"
#include "worker.h"

#define SUPERVISOR_FD 3
/* Stdin bytes queued per command beyond what its pipe holds; more is dropped. */
#define STDIN_QUEUE_MAX (2u * SBX_STDIN_MAX)
/* Frames waiting for the socket before the worker stops reading requests. */
#define SEND_QUEUE_MAX (2u * SBX_MAX_COMMANDS_PER_SESSION)

/* One output pipe of a command: stdout and stderr together, or one of them. */
typedef struct Output {
        int fd;                         /* its read end, -EBADF once closed (or never opened) */
        Sbx__Stream stream;             /* what its frames say they carry */
        size_t drain_left;              /* bytes still to send after the exit */
} Output;

typedef struct Command {
        struct Command *next;
        uint32_t id;
        pid_t pid;                      /* the sh; also its process group */
        int stdin_fd;                   /* write end of its stdin, -EBADF once closed */
        Output out[2];                  /* [0] stdout (+stderr), [1] stderr when apart */
        uint8_t *stdin_buf;             /* stdin the pipe did not take yet */
        size_t stdin_len;
        bool stdin_close;               /* close stdin once stdin_buf is written */
        bool exited;                    /* the sh was reaped: drain, then report */
        bool pty;                       /* on a pty: out[0].fd is its master */
        int status;                     /* its wait status */
} Command;

typedef struct Frame {
        struct Frame *next;
        Sbx__Msg *msg;                  /* an unpacked copy, owned */
        uint32_t seq;
} Frame;

typedef struct Worker {
        int sock;
        int signal_fd;
        OomScore oom;
        Command *commands;              /* in output service order */
        unsigned n_commands;
        Frame *queue, **queue_tail;     /* frames the socket did not take yet, in order */
        unsigned n_queued;
        bool supervisor_gone;
} Worker;

static void *mfree(void *p) {
        free(p);
        return NULL;
}

static Command *command_free(Command *c) {
        if (!c)
                return NULL;
        (void) safe_close(c->stdin_fd);
        for (size_t i = 0; i < ELEMENTSOF(c->out); i++)
                (void) safe_close(c->out[i].fd);
        free(c->stdin_buf);
        free(c);
        return NULL;
}

static Command *worker_find(Worker *w, uint32_t id) {
        for (Command *c = w->commands; c; c = c->next)
                if (c->id == id)
                        return c;
        return NULL;
}

static Command *worker_find_pid(Worker *w, pid_t pid) {
        for (Command *c = w->commands; c; c = c->next)
                if (c->pid == pid)
                        return c;
        return NULL;
}

static void worker_unlink(Worker *w, Command *c) {
        for (Command **p = &w->commands; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        c->next = NULL;
                        return;
                }
}

/* Serve c last next time, so one busy command cannot starve the others. */
static void worker_move_last(Worker *w, Command *c) {
        Command **p;

        worker_unlink(w, c);
        for (p = &w->commands; *p; p = &(*p)->next)
                ;
        *p = c;
}

static void worker_kill_all(Worker *w) {
        for (Command *c = w->commands; c; c = c->next)
                if (kill(-c->pid, SIGKILL) < 0 && errno != ESRCH)
                        log_warning_errno(-errno, "Failed to kill command %u, ignoring: %m", c->id);
}

static void worker_done(Worker *w) {
        while (w->commands) {
                Command *c = w->commands;
                w->commands = c->next;
                command_free(c);
        }
        while (w->queue) {
                Frame *f = w->queue;
                w->queue = f->next;
                sbx__msg__free_unpacked(f->msg, NULL);
                free(f);
        }
        w->sock = safe_close(w->sock);
        w->signal_fd = safe_close(w->signal_fd);
        w->oom.fd = safe_close(w->oom.fd);
}

/* A socket error means the supervisor is gone: the caller unwinds and the
 * worker exits 0. Anything else is a bug here. */
static int send_failed(Worker *w, int r) {
        if (r == -EMSGSIZE || r == -EINVAL || r == -ENOMEM)
                return log_error_errno(r, "Failed to send frame to supervisor: %m");
        w->supervisor_gone = true;
        return log_debug_errno(r, "Supervisor connection lost: %m");
}

static int queue_append(Worker *w, const Sbx__Msg *msg, uint32_t seq) {
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_free_ Frame *f = NULL;
        size_t len = sbx__msg__get_packed_size(msg);

        buf = malloc(len);
        f = calloc(1, sizeof(*f));
        if (!buf || !f)
                return log_error_errno(-ENOMEM, "Failed to queue frame: %m");
        sbx__msg__pack(msg, buf);
        f->msg = sbx__msg__unpack(NULL, len, buf);
        if (!f->msg)
                return log_error_errno(-ENOMEM, "Failed to queue frame: %m");
        f->seq = seq;
        *w->queue_tail = f;
        w->queue_tail = &f->next;
        w->n_queued++;
        TAKE_PTR(f);
        return 0;
}

/* Send now if nothing is waiting and the socket takes it, else queue it. */
static int worker_send(Worker *w, const Sbx__Msg *msg, uint32_t seq) {
        int r;

        if (w->n_queued == 0) {
                r = wire_send(w->sock, msg, seq, NULL, 0);
                if (r >= 0)
                        return 0;
                if (r != -EAGAIN)
                        return send_failed(w, r);
        }
        return queue_append(w, msg, seq);
}

static int worker_flush(Worker *w) {
        while (w->queue) {
                Frame *f = w->queue;
                int r = wire_send(w->sock, f->msg, f->seq, NULL, 0);

                if (r == -EAGAIN)
                        return 0;
                if (r < 0)
                        return send_failed(w, r);
                w->queue = f->next;
                if (!w->queue)
                        w->queue_tail = &w->queue;
                w->n_queued--;
                sbx__msg__free_unpacked(f->msg, NULL);
                free(f);
        }
        return 0;
}

static int send_output(Worker *w, const Command *c, Sbx__Stream stream, const uint8_t *data, size_t len) {
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        out.command = c->id;
        out.data.data = (uint8_t *) data;
        out.data.len = len;
        out.stream = stream;
        msg.type = SBX__MSG_TYPE__MSG_WORKER_OUTPUT;
        msg.body_case = SBX__MSG__BODY_WORKER_OUTPUT;
        msg.worker_output = &out;
        return worker_send(w, &msg, 0);
}

static int send_exec_failed(Worker *w, uint32_t seq, uint32_t id, int err, const char *errmsg) {
        Sbx__WorkerExecFailed failed = SBX__WORKER_EXEC_FAILED__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        failed.command = id;
        failed.err = err;
        failed.errmsg = (char *) errmsg;
        msg.type = SBX__MSG_TYPE__MSG_WORKER_EXEC_FAILED;
        msg.body_case = SBX__MSG__BODY_WORKER_EXEC_FAILED;
        msg.worker_exec_failed = &failed;
        return worker_send(w, &msg, seq);
}

/* All output is sent or queued: report the exit and forget the command. */
static int command_finish(Worker *w, Command *c) {
        Sbx__WorkerExited exited = SBX__WORKER_EXITED__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        exited.command = c->id;
        if (WIFSIGNALED(c->status))
                exited.signal = WTERMSIG(c->status);
        else
                exited.exit_code = WEXITSTATUS(c->status);
        msg.type = SBX__MSG_TYPE__MSG_WORKER_EXITED;
        msg.body_case = SBX__MSG__BODY_WORKER_EXITED;
        msg.worker_exited = &exited;
        log_debug("Command %u exited (code %d, signal %d)", c->id, exited.exit_code, exited.signal);
        worker_unlink(w, c);
        w->n_commands--;
        command_free(c);
        return worker_send(w, &msg, 0);
}

static void command_close_stdin(Command *c) {
        c->stdin_fd = safe_close(c->stdin_fd);
        c->stdin_buf = mfree(c->stdin_buf);
        c->stdin_len = 0;
}

/* Read one chunk of o and send it: returns 1 if a frame went out (or was
 * queued), 0 if there was nothing to read. After the exit, reads only what was
 * in the pipe when the sh was reaped. */
static int output_pump(Worker *w, Command *c, Output *o) {
        uint8_t buf[SBX_OUTPUT_CHUNK_MAX];
        size_t want = c->exited ? MIN(sizeof(buf), o->drain_left) : sizeof(buf), got = 0;
        ssize_t n = 0;
        int r;

        /* Fill a whole frame while the pipe has data: a frame per read() would
         * cost a message (and a transcript write) per page the command prints. */
        while (got < want) {
                n = read(o->fd, buf + got, want - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t) n;
        }
        /* EIO: a pty whose terminal nobody holds any more, its end of output. */
        if (n < 0 && errno != EAGAIN && !(c->pty && errno == EIO))
                log_warning_errno(-errno, "Failed to read output of command %u, closing it: %m", c->id);
        if (got > 0) {
                if (c->exited)
                        o->drain_left -= got;
                r = send_output(w, c, o->stream, buf, got);
                return r < 0 ? r : 1;
        }
        if (c->exited)
                o->drain_left = 0;
        else if (n == 0 || errno != EAGAIN)
                o->fd = safe_close(o->fd);
        return 0;
}

/* After the exit: send one more chunk of what the pipes held then (stdout's
 * first), or, once all is sent, report the exit and return 1: c is freed then. */
static int command_drain(Worker *w, Command *c) {
        int r;

        for (size_t i = 0; i < ELEMENTSOF(c->out); i++) {
                if (c->out[i].fd < 0 || c->out[i].drain_left == 0)
                        continue;
                r = output_pump(w, c, &c->out[i]);
                if (r != 0)
                        return MIN(r, 0);
        }
        r = command_finish(w, c);
        return r < 0 ? r : 1;
}

static void command_write_stdin(Command *c) {
        while (c->stdin_len > 0) {
                ssize_t n = write(c->stdin_fd, c->stdin_buf, c->stdin_len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0) {
                        log_debug_errno(-errno, "Stdin of command %u is gone, dropping %zu bytes: %m",
                                        c->id, c->stdin_len);
                        command_close_stdin(c);
                        return;
                }
                c->stdin_len -= (size_t) n;
                memmove(c->stdin_buf, c->stdin_buf + n, c->stdin_len);
        }
        c->stdin_buf = mfree(c->stdin_buf);
        if (c->stdin_close)
                c->stdin_fd = safe_close(c->stdin_fd);
}

static int command_exited(Worker *w, Command *c, int status) {
        bool open = false;

        c->exited = true;
        c->status = status;
        command_close_stdin(c);
        for (size_t i = 0; i < ELEMENTSOF(c->out); i++) {
                Output *o = &c->out[i];
                int avail = 0;

                if (o->fd < 0)
                        continue;
                open = true;
                if (ioctl(o->fd, FIONREAD, &avail) < 0)
                        log_warning_errno(-errno, "Failed to size output of command %u, ignoring: %m", c->id);
                o->drain_left = avail > 0 ? (size_t) avail : 0;
        }
        return open ? 0 : command_finish(w, c);
}

/* As PID 1 (or subreaper) every orphan in the namespace ends up here. */
static int worker_reap(Worker *w) {
        struct signalfd_siginfo si;
        int r;

        while (read(w->signal_fd, &si, sizeof(si)) == sizeof(si))
                ;
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);
                Command *c;

                if (pid < 0 && errno == EINTR)
                        continue;
                if (pid < 0 && errno == ECHILD)
                        return 0;
                if (pid < 0)
                        return log_error_errno(-errno, "Failed to reap children: %m");
                if (pid == 0)
                        return 0;
                c = worker_find_pid(w, pid);
                if (!c || c->exited) {
                        log_debug("Reaped process %d", (int) pid);
                        continue;
                }
                r = command_exited(w, c, status);
                if (r < 0)
                        return r;
        }
}

/* ---- requests from the supervisor ------------------------------------------ */

static bool terminal_size_valid(uint32_t rows, uint32_t cols) {
        return rows > 0 && cols > 0 && rows <= SBX_TERMINAL_SIZE_MAX && cols <= SBX_TERMINAL_SIZE_MAX;
}

static int validate_exec(const Sbx__SupervisorExec *m) {
        if (m->pty && !terminal_size_valid(m->rows, m->cols))
                return log_error_errno(-EBADMSG, "Malformed exec from supervisor: terminal size %ux%u",
                                       m->rows, m->cols);
        if (m->cwd[0] != '/')
                return log_error_errno(-EBADMSG, "Malformed exec from supervisor: cwd '%s' is not absolute",
                                       m->cwd);
        for (size_t i = 0; i < m->n_env; i++) {
                const char *eq = strchr(m->env[i], '=');
                if (!eq || eq == m->env[i])
                        return log_error_errno(-EBADMSG, "Malformed exec from supervisor: env entry '%s' is not KEY=VALUE",
                                               m->env[i]);
        }
        return 0;
}

static int on_exec(Worker *w, const Sbx__Msg *msg, uint32_t seq) {
        const Sbx__SupervisorExec *m = msg->supervisor_exec;
        _cleanup_free_ char **env = NULL;
        _cleanup_free_ Command *c = NULL;
        struct winsize ws = { .ws_row = (unsigned short) m->rows, .ws_col = (unsigned short) m->cols };
        char errmsg[512];
        SpawnError error;
        int r;

        r = validate_exec(m);
        if (r < 0)
                return r;
        if (worker_find(w, m->command))
                return send_exec_failed(w, seq, m->command, -EEXIST, "command number already in use");
        if (w->n_commands >= SBX_MAX_COMMANDS_PER_SESSION)
                return send_exec_failed(w, seq, m->command, -EAGAIN, "too many running commands");

        env = calloc(m->n_env + 1, sizeof(char *));
        c = calloc(1, sizeof(*c));
        if (!env || !c)
                return log_error_errno(-ENOMEM, "Failed to start command %u: %m", m->command);
        memcpy(env, m->env, m->n_env * sizeof(char *));
        c->id = m->command;
        c->out[0].stream = m->separate_streams ? SBX__STREAM__STREAM_STDOUT : SBX__STREAM__STREAM_MERGED;
        c->out[1].stream = SBX__STREAM__STREAM_STDERR;
        c->pty = m->pty;
        if (c->pty)
                c->out[0].stream = SBX__STREAM__STREAM_MERGED;
        r = command_spawn(m->cmd, env, m->cwd, &w->oom, m->separate_streams, m->pty ? &ws : NULL, &error, &c->pid,
                          &c->stdin_fd, &c->out[0].fd, &c->out[1].fd);
        if (r < 0) {
                if (error.msg[0])
                        snprintf(errmsg, sizeof(errmsg), "%s: %s", error.msg, strerror(-r));
                else
                        snprintf(errmsg, sizeof(errmsg), "Failed to start command: %s", strerror(-r));
                log_debug("Command %u failed to start: %s", m->command, errmsg);
                return send_exec_failed(w, seq, m->command, r, errmsg);
        }
        log_debug("Command %u started as pid %d", c->id, (int) c->pid);
        worker_move_last(w, c);
        w->n_commands++;
        TAKE_PTR(c);
        return 0;
}

/* The kernel sends SIGWINCH to the terminal's foreground process group. */
static void command_resize(Command *c, uint32_t rows, uint32_t cols) {
        struct winsize ws = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };

        if (!c->pty || c->out[0].fd < 0)
                log_debug("Ignoring a terminal size for command %u: not on a pty, or ended", c->id);
        else if (ioctl(c->out[0].fd, TIOCSWINSZ, &ws) < 0)
                log_debug_errno(-errno, "Failed to resize the terminal of command %u, ignoring: %m", c->id);
}

static int on_stdin(Worker *w, const Sbx__Msg *msg, uint32_t seq) {
        const Sbx__SupervisorStdin *m = msg->supervisor_stdin;
        Command *c;
        uint8_t *buf;

        if (m->data.len > SBX_STDIN_MAX)
                return log_error_errno(-EBADMSG, "Malformed stdin from supervisor: %zu bytes", m->data.len);
        if ((m->rows || m->cols) && !terminal_size_valid(m->rows, m->cols))
                return log_error_errno(-EBADMSG, "Malformed stdin from supervisor: terminal size %ux%u",
                                       m->rows, m->cols);
        c = worker_find(w, m->command);
        if (c && m->rows)
                command_resize(c, m->rows, m->cols);
        if (!c || c->stdin_fd < 0 || c->stdin_close) {
                log_debug("Ignoring stdin for command %u: not running or stdin closed", m->command);
                return 0;
        }
        if (c->stdin_len + m->data.len > STDIN_QUEUE_MAX)
                log_warning("Stdin of command %u is not being read, dropping %zu bytes",
                            c->id, m->data.len);
        else if (m->data.len > 0) {
                buf = realloc(c->stdin_buf, c->stdin_len + m->data.len);
                if (!buf)
                        return log_error_errno(-ENOMEM, "Failed to queue stdin of command %u: %m", c->id);
                memcpy(buf + c->stdin_len, m->data.data, m->data.len);
                c->stdin_buf = buf;
                c->stdin_len += m->data.len;
        }
        c->stdin_close = m->close;
        command_write_stdin(c);
        return 0;
}

static int on_signal(Worker *w, const Sbx__Msg *msg, uint32_t seq) {
        const Sbx__SupervisorSignal *m = msg->supervisor_signal;
        Command *c;

        if (m->signal <= 0 || m->signal >= _NSIG)
                return log_error_errno(-EBADMSG, "Malformed signal from supervisor: %d", m->signal);
        c = worker_find(w, m->command);
        if (!c) {
                log_debug("Ignoring signal %d for unknown command %u", m->signal, m->command);
                return 0;
        }
        if (kill(-c->pid, m->signal) < 0)
                log_debug_errno(-errno, "Failed to signal command %u, ignoring: %m", c->id);
        return 0;
}

static const struct {
        Sbx__MsgType type;
        int (*handler)(Worker *w, const Sbx__Msg *msg, uint32_t seq);
} supervisor_handlers[] = {
        { SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC, on_exec },
        { SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN, on_stdin },
        { SBX__MSG_TYPE__MSG_SUPERVISOR_SIGNAL, on_signal },
};

/* Handle one request. 0 also when the supervisor went away (w->supervisor_gone). */
static int worker_dispatch_supervisor(Worker *w) {
        _cleanup_msg_ Sbx__Msg *msg = NULL;
        uint32_t seq;
        int r;

        r = wire_recv(w->sock, &msg, &seq, NULL, NULL);
        if (r == -EAGAIN)
                return 0;
        if (r == -EBADMSG || r == -EPROTO)
                return log_error_errno(r, "Malformed frame from supervisor: %m");
        if (r < 0) {
                w->supervisor_gone = true;
                return log_debug_errno(r, "Supervisor connection closed: %m");
        }
        for (size_t i = 0; i < ELEMENTSOF(supervisor_handlers); i++)
                if (supervisor_handlers[i].type == msg->type)
                        return supervisor_handlers[i].handler(w, msg, seq);
        return log_error_errno(-EBADMSG, "Unexpected frame of type %d from supervisor", (int) msg->type);
}

/* ---- the loop ---------------------------------------------------------------- */

enum { PFD_SOCK, PFD_SIGNAL, PFD_COMMANDS };
#define PFD_STDIN (-1)          /* what[] of a stdin pollfd; an output's is its index in out[] */

static int worker_run(Worker *w) {
        for (;;) {
                struct pollfd pfd[PFD_COMMANDS + (1 + ELEMENTSOF(((Command *) NULL)->out)) * SBX_MAX_COMMANDS_PER_SESSION];
                Command *owner[ELEMENTSOF(pfd)];
                int what[ELEMENTSOF(pfd)];
                size_t n = PFD_COMMANDS;
                Command *next;
                int r = 0;

                pfd[PFD_SOCK] = (struct pollfd) {
                        .fd = w->sock,
                        .events = (w->n_queued < SEND_QUEUE_MAX ? POLLIN : 0) |
                                  (w->n_queued > 0 ? POLLOUT : 0),
                };
                pfd[PFD_SIGNAL] = (struct pollfd) { .fd = w->signal_fd, .events = POLLIN };
                for (Command *c = w->commands; c; c = c->next) {
                        /* Output only while the socket takes it: this is the backpressure. */
                        for (size_t k = 0; k < ELEMENTSOF(c->out); k++)
                                if (!c->exited && c->out[k].fd >= 0 && w->n_queued == 0) {
                                        owner[n] = c;
                                        what[n] = (int) k;
                                        pfd[n++] = (struct pollfd) { .fd = c->out[k].fd, .events = POLLIN };
                                }
                        if (c->stdin_fd >= 0 && c->stdin_len > 0) {
                                owner[n] = c;
                                what[n] = PFD_STDIN;
                                pfd[n++] = (struct pollfd) { .fd = c->stdin_fd, .events = POLLOUT };
                        }
                }

                if (poll(pfd, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(-errno, "Failed to poll: %m");
                }

                /* Command fds first, while every owner[] is still alive. A
                 * command's pipes are read in the order they were polled, and
                 * what is read is sent in that order: the order of the merged view. */
                for (size_t i = PFD_COMMANDS; i < n && r >= 0; i++) {
                        Command *c = owner[i];

                        if (!pfd[i].revents)
                                continue;
                        if (what[i] == PFD_STDIN)
                                command_write_stdin(c);
                        else if (c->out[what[i]].fd >= 0 && w->n_queued == 0) {
                                r = MIN(output_pump(w, c, &c->out[what[i]]), 0);
                                if (w->n_queued > 0)
                                        worker_move_last(w, c);
                        }
                }
                if (r >= 0 && pfd[PFD_SIGNAL].revents)
                        r = worker_reap(w);
                if (r >= 0 && w->n_queued > 0 && pfd[PFD_SOCK].revents)
                        r = worker_flush(w);
                /* Exited commands drain without waiting for POLLIN. */
                for (Command *c = w->commands; c && r >= 0 && w->n_queued == 0; c = next) {
                        next = c->next;
                        while (r == 0 && c->exited && w->n_queued == 0)
                                r = command_drain(w, c);
                        r = MIN(r, 0);
                }
                if (r >= 0 && (pfd[PFD_SOCK].revents & (POLLIN | POLLHUP | POLLERR)) &&
                    w->n_queued < SEND_QUEUE_MAX)
                        r = worker_dispatch_supervisor(w);
                if (r < 0 || w->supervisor_gone)
                        return w->supervisor_gone ? 0 : r;
        }
}

static int worker_setup(Worker *w) {
        struct stat st;
        sigset_t mask;
        int r;

        /* The supervisor moved the socket here with dup2(): not close-on-exec yet. */
        if (fstat(SUPERVISOR_FD, &st) < 0 || !S_ISSOCK(st.st_mode))
                return log_error_errno(-EBADF, "fd %d is not the supervisor socket", SUPERVISOR_FD);
        if (fcntl(SUPERVISOR_FD, F_SETFD, FD_CLOEXEC) < 0)
                return log_error_errno(-errno, "Failed to set close-on-exec on the supervisor socket: %m");
        r = fd_nonblock(SUPERVISOR_FD, true);
        if (r < 0)
                return log_error_errno(r, "Failed to make the supervisor socket non-blocking: %m");
        w->sock = SUPERVISOR_FD;

        /* PID 1 of the namespace reaps anyway; outside one, orphans come here too. */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                return log_error_errno(-errno, "Failed to become child subreaper: %m");
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
                return log_error_errno(-errno, "Failed to ignore SIGPIPE: %m");
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(-errno, "Failed to block SIGCHLD: %m");
        w->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (w->signal_fd < 0)
                return log_error_errno(-errno, "Failed to create signalfd: %m");

        w->oom.fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
        if (w->oom.fd < 0)
                return log_error_errno(-errno, "Failed to open /proc/self/oom_score_adj: %m");
        {
                char buf[16] = "";
                if (pread(w->oom.fd, buf, sizeof(buf) - 1, 0) <= 0 || sscanf(buf, "%d", &w->oom.base) != 1)
                        return log_error_errno(-EIO, "Failed to read /proc/self/oom_score_adj");
        }
        /* Commands run as the same uid: not dumpable, the worker is out of
         * their reach (ptrace, /proc/1/mem, /proc/1/fd: its socket to sbxd and
         * the stderr it shares with sbxd). Its commands are dumpable again
         * after their exec. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(-errno, "Failed to make the worker non-dumpable: %m");
        return 0;
}

static int send_ready(Worker *w) {
        Sbx__WorkerReady ready = SBX__WORKER_READY__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;

        ready.pid = getpid();
        msg.type = SBX__MSG_TYPE__MSG_WORKER_READY;
        msg.body_case = SBX__MSG__BODY_WORKER_READY;
        msg.worker_ready = &ready;
        return worker_send(w, &msg, 0);
}

static void help(void) {
        printf("Usage: sbx-worker --session ID [--log-level LEVEL]\n"
               "       sbx-worker --session-init [--log-level LEVEL]\n"
               "       sbx-worker --import [--log-level LEVEL]\n"
               "Run commands of one sbx workspace session for sbxd on fd %d;\n"
               "with --session-init, first set the session up (fds 4-6);\n"
               "with --import, build a new sandbox's first layer (fd 4) instead.\n"
               "Started by sbxd(8) only; see sbx-worker(8).\n", SUPERVISOR_FD);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "session", required_argument, NULL, 's' },
                { "session-init", no_argument, NULL, 'i' },
                { "import", no_argument, NULL, 'I' },
                { "log-level", required_argument, NULL, 'l' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        _cleanup_(worker_done) Worker w = {
                .sock = -EBADF, .signal_fd = -EBADF, .oom.fd = -EBADF, .queue_tail = &w.queue,
        };
        _cleanup_free_ char *session = NULL;
        bool init = false, import = false;
        int opt, r;

        log_open("sbx-worker");
        /* Copies argv[1..] away before the title overwrites them. */
        setproctitle_init(argc, argv, environ);

        while ((opt = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (opt) {
                case 's':
                        free(session);
                        session = strdup(optarg);
                        if (!session) {
                                log_error("Out of memory");
                                return EXIT_FAILURE;
                        }
                        break;
                case 'i':
                        init = true;
                        break;
                case 'I':
                        import = true;
                        break;
                case 'l':
                        r = log_level_from_string(optarg);
                        if (r < 0) {
                                log_error("Unknown log level '%s'", optarg);
                                return EXIT_FAILURE;
                        }
                        log_set_level(r);
                        break;
                case 'h':
                        help();
                        return EXIT_SUCCESS;
                case 'V':
                        printf("sbx-worker %s\n", SBX_VERSION);
                        return EXIT_SUCCESS;
                default:
                        return EXIT_FAILURE;
                }
        if (import && !session && !init && optind == argc)
                return import_run() < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        if (import || !!session == init || optind != argc) {
                log_error("Usage: sbx-worker --session ID | --session-init | --import");
                return EXIT_FAILURE;
        }
        if (init)
                (void) session_init(&session);
        /* Exactly 0-3 are meant for us; anything else leaked from the set-up. */
        (void) close_range(4, ~0U, 0);
        log_set_context(session);
        setproctitle("-sbx-worker [session %s]", session);

        r = worker_setup(&w);
        if (r >= 0)
                r = send_ready(&w);
        if (r >= 0) {
                log_debug("Ready as pid %d", (int) getpid());
                r = worker_run(&w);
        }
        worker_kill_all(&w);
        if (w.supervisor_gone)
                return EXIT_SUCCESS;
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
