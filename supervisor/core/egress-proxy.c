#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/egress-proxy.h"
#include "core/egress.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "msg.h"
#include "sbx-limits.h"
#include "wire.h"

struct EgressProxy {
        EventSource sock_src;           /* the socketpair to sbx-egress */
        EventSource pidfd_src;
        unsigned long long restart_usec; /* a restart is due then; 0: none */
        unsigned long long started_usec;
        unsigned backoff_s;
        char why[200];                  /* why it does not run; "" while it does */
};

#define EGRESS_PROXY_FD 3               /* sbx-egress finds its socket there */

typedef struct EgressExec {
        int exe;                        /* opened by root: the egress user need not reach its directory */
        int sock;
        uid_t uid;
        gid_t gid;
        int err;
} EgressExec;

/* By clone_vfork: the egress user's ids (no capabilities remain after
 * setresuid from root to another user), no_new_privs, the socket at fd 3,
 * an empty environment. Touches nothing of sbxd's memory but a->err. */
static int exec_egress(void *userdata) {
        EgressExec *a = userdata;
        char *const argv[] = { (char *) "sbx-egress", NULL };
        char *const envp[] = { NULL };
        sigset_t none;
        int null, sock, exe;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                goto fail;
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        (void) signal(SIGPIPE, SIG_DFL);
        /* Above 10 first, so that no target clobbers a source (and dup2 clears close-on-exec). */
        sock = fcntl(a->sock, F_DUPFD_CLOEXEC, 10);
        exe = fcntl(a->exe, F_DUPFD_CLOEXEC, 10);
        null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (sock < 0 || exe < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
            dup2(sock, EGRESS_PROXY_FD) < 0 || dup3(exe, EGRESS_PROXY_FD + 1, O_CLOEXEC) < 0)
                goto fail;
        if (syscall(SYS_close_range, EGRESS_PROXY_FD + 2, ~0U, 0) < 0)
                goto fail;
        if (setgroups(0, NULL) < 0 || setresgid(a->gid, a->gid, a->gid) < 0 || setresuid(a->uid, a->uid, a->uid) < 0)
                goto fail;
        if (setresuid(0, 0, 0) >= 0) {  /* must be impossible now */
                errno = EPERM;
                goto fail;
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                goto fail;
        syscall(SYS_execveat, EGRESS_PROXY_FD + 1, "", argv, envp, AT_EMPTY_PATH);
fail:
        a->err = errno > 0 ? -errno : -EIO;
        _exit(127);
}

/* sbx-egress beside sbxd (a build tree), else in LIBEXECDIR/sbx; root's
 * alone. Its fd (close-on-exec) into *ret_fd. */
static int egress_binary(char *path, size_t size, int *ret_fd, char *why, size_t why_size) {
        char self[PATH_MAX], beside[PATH_MAX + 16];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        _cleanup_close_ int fd = -EBADF;
        char trust[200] = "";
        int r;

        snprintf(path, size, "%s/sbx/sbx-egress", SBX_LIBEXECDIR);
        if (n > 0) {
                self[n] = '\0';
                *strrchr(self, '/') = '\0';
                snprintf(beside, sizeof(beside), "%s/sbx-egress", self);
                if (access(beside, X_OK) >= 0)
                        strlcpy(path, beside, size);
        }
        fd = open(path, O_RDONLY | O_CLOEXEC);
        r = fd < 0 ? -errno : fd_trusted(fd, trust, sizeof(trust));
        if (r < 0) {
                snprintf(why, why_size, "sbx-egress %.100s is refused: %.60s", path, trust[0] ? trust : strerror(-r));
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static void on_egress_message(Server *s, EventSource *src, uint32_t events);
static void on_egress_exit(Server *s, EventSource *src, uint32_t events);

static int send_config(Server *s) {
        const EgressHosts *hosts = &s->cfg.egress_package_hosts;
        Sbx__EgressConfig c = SBX__EGRESS_CONFIG__INIT;
        _cleanup_free_ Sbx__EgressHostEntry *entries = calloc(hosts->n ?: 1, sizeof(*entries));
        _cleanup_free_ Sbx__EgressHostEntry **ptrs = calloc(hosts->n ?: 1, sizeof(*ptrs));
        Sbx__Msg msg;

        if (!entries || !ptrs)
                return -ENOMEM;
        for (size_t i = 0; i < hosts->n; i++) {
                sbx__egress_host_entry__init(&entries[i]);
                entries[i].name = (char *) hosts->hosts[i].name;
                entries[i].port = hosts->hosts[i].port;
                ptrs[i] = &entries[i];
        }
        c.allow_private = s->cfg.egress_allow_private;
        c.n_package_hosts = hosts->n;
        c.package_hosts = ptrs;
        msg_init(&msg, SBX__MSG_TYPE__MSG_EGRESS_CONFIG, &c);
        return wire_send(s->egress->sock_src.fd, &msg, 0, NULL, 0);
}

static int egress_spawn(Server *s) {
        EgressProxy *e = s->egress;
        const char *user = s->cfg.egress_user ?: CONFIG_EGRESS_USER_DEFAULT;
        char path[PATH_MAX];
        EgressExec a = { .exe = -EBADF };
        _cleanup_close_ int exe = -EBADF;
        const struct passwd *pw;
        int pair[2], pidfd = -EBADF, r;
        WorkspaceSession *ws;
        pid_t pid;

        errno = 0;
        pw = getpwnam(user);
        if (!pw || pw->pw_uid == 0 || pw->pw_gid == 0) {
                snprintf(e->why, sizeof(e->why), "egress_user '%s' %s (sbxd.conf(5), dist/sbx.sysusers.conf)", user,
                         pw ? "is root" : "does not exist");
                return -ESRCH;
        }
        a.uid = pw->pw_uid;
        a.gid = pw->pw_gid;
        r = egress_binary(path, sizeof(path), &exe, e->why, sizeof(e->why));
        if (r < 0)
                return r;
        a.exe = exe;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        a.sock = pair[1];
        pid = clone_vfork(exec_egress, 0, &a, &pidfd);
        safe_close(pair[1]);
        if (pid >= 0 && a.err < 0) {
                (void) waitid((idtype_t) P_PIDFD, (id_t) pidfd, &(siginfo_t) {}, WEXITED);
                pidfd = safe_close(pidfd);
                pid = a.err;
        }
        if (pid < 0) {
                safe_close(pair[0]);
                snprintf(e->why, sizeof(e->why), "cannot start sbx-egress: %s", strerror((int) -pid));
                return (int) pid;
        }
        (void) fd_nonblock(pair[0], true);
        e->sock_src.dispatch = on_egress_message;
        e->pidfd_src.dispatch = on_egress_exit;
        r = server_watch(s, &e->sock_src, pair[0], EPOLLIN);
        if (r < 0)
                safe_close(pair[0]);
        if (r >= 0)
                r = server_watch(s, &e->pidfd_src, pidfd, EPOLLIN);
        else
                safe_close(pidfd);
        if (r >= 0)
                r = send_config(s);
        if (r < 0) {
                snprintf(e->why, sizeof(e->why), "cannot set up sbx-egress: %s", strerror(-r));
                return r;
        }
        e->why[0] = '\0';
        e->started_usec = now_usec();
        log_info("Started sbx-egress (pid %d, user %s)", (int) pid, user);
        /* After a restart: the sessions it served before. */
        TAILQ_FOREACH(ws, &s->sessions, link)
                egress_proxy_attach(s, ws);
        return 0;
}

/* Gone, or misbehaving: stop it; it is started again after the backoff. */
static void egress_lost(Server *s, const char *why) {
        EgressProxy *e = s->egress;

        if (e->pidfd_src.fd >= 0) {
                pidfd_kill_wait(e->pidfd_src.fd);
                (void) waitid((idtype_t) P_PIDFD, (id_t) e->pidfd_src.fd, &(siginfo_t) {}, WEXITED | WNOHANG);
        }
        server_unwatch(s, &e->pidfd_src);
        server_unwatch(s, &e->sock_src);
        if (now_usec() - e->started_usec > SBX_EGRESS_RESTART_MAX_S * 2000000ull)
                e->backoff_s = 0;       /* it ran a good while: start again soon */
        e->backoff_s = e->backoff_s ? MIN(e->backoff_s * 2, SBX_EGRESS_RESTART_MAX_S) : 1;
        e->restart_usec = now_usec() + e->backoff_s * 1000000ull;
        snprintf(e->why, sizeof(e->why), "sbx-egress is restarting (%s)", why);
        log_warning("sbx-egress %s; starting it again in %u s", why, e->backoff_s);
}

static void on_egress_exit(Server *s, EventSource *src, uint32_t events) {
        egress_lost(s, "exited");
}

/* A verdict goes to the audit of every command running in its session. */
static void verdict_take(Server *s, const Sbx__EgressVerdict *v) {
        WorkspaceSession *ws;
        Command *c;

        TAILQ_FOREACH(ws, &s->sessions, link) {
                if (strcmp(ws->id, v->key) != 0)
                        continue;
                TAILQ_FOREACH(c, &ws->commands, session_link)
                        if (!c->finished && egress_audit_add(&c->egress, v->target, v->allowed) < 0)
                                log_warning("Out of memory for the egress audit of %s", c->rec.id);
                log_debug("sbx-egress: %s %s for session %s%s%s", v->allowed ? "connected" : "refused", v->target,
                          ws->id, v->reason[0] ? ": " : "", v->reason);
                return;
        }
}

static void on_egress_message(Server *s, EventSource *src, uint32_t events) {
        for (unsigned i = 0; i < SBX_EGRESS_MESSAGES_PER_WAKE; i++) {
                _cleanup_msg_ Sbx__Msg *m = NULL;
                int fds[SBX_WIRE_MAX_FDS], r;
                size_t n_fds = 0;
                uint32_t seq;

                r = wire_recv(src->fd, &m, &seq, fds, &n_fds);
                if (r == -EAGAIN)
                        return;
                for (size_t k = 0; k < n_fds; k++)
                        safe_close(fds[k]);
                if (r == -ECONNRESET) {
                        egress_lost(s, "closed its socket");
                        return;
                }
                if (r < 0 || n_fds > 0 || m->type != SBX__MSG_TYPE__MSG_EGRESS_VERDICT ||
                    !egress_verdict_check(m->egress_verdict)) {
                        egress_lost(s, "sent a message it may not send");
                        return;
                }
                verdict_take(s, m->egress_verdict);
        }
}

void egress_proxy_drain(Server *s) {
        if (s->egress && s->egress->sock_src.fd >= 0)
                on_egress_message(s, &s->egress->sock_src, EPOLLIN);
}

void egress_proxy_start(Server *s) {
        s->egress = calloc(1, sizeof(*s->egress));
        if (!s->egress) {
                log_error("Out of memory for sbx-egress");
                return;
        }
        s->egress->sock_src.fd = s->egress->pidfd_src.fd = -EBADF;
        if (egress_spawn(s) < 0)
                log_warning("sbx-egress does not run, sandboxes with an egress policy other than none cannot start "
                            "sessions: %s", s->egress->why);
}

void egress_proxy_stop(Server *s) {
        if (!s->egress)
                return;
        if (s->egress->pidfd_src.fd >= 0)
                pidfd_kill_wait(s->egress->pidfd_src.fd);
        server_unwatch(s, &s->egress->pidfd_src);
        server_unwatch(s, &s->egress->sock_src);
        free(s->egress);
        s->egress = NULL;
}

bool egress_proxy_available(Server *s, char *ret_why, size_t why_size) {
        if (!s->egress) {
                snprintf(ret_why, why_size, "sbx-egress does not run");
                return false;
        }
        /* A restart due soon serves the session once it is up again. */
        if (s->egress->sock_src.fd >= 0 || s->egress->restart_usec)
                return true;
        snprintf(ret_why, why_size, "%s", s->egress->why);
        return false;
}

void egress_proxy_attach(Server *s, WorkspaceSession *ws) {
        Sbx__EgressAttach a = SBX__EGRESS_ATTACH__INIT;
        _cleanup_free_ Sbx__EgressAlias **aliases = NULL;
        Sbx__Msg msg;
        int r;

        if (ws->egress_fd < 0 || !ws->sandbox || !s->egress || s->egress->sock_src.fd < 0)
                return;
        /* A box's services wired external (Server.egress_aliases). */
        r = s->egress_aliases ? s->egress_aliases(s, ws, &aliases, &a.n_aliases) : 0;
        if (r < 0)
                log_warning_errno(r, "Cannot read the wiring of session %s's box, its external services are not "
                                  "aliased: %m", ws->id);
        a.aliases = aliases;
        a.key = ws->id;
        a.policy = (char *) egress_policy_to_string(ws->sandbox->egress);
        a.sandbox = ws->sandbox->id;
        msg_init(&msg, SBX__MSG_TYPE__MSG_EGRESS_ATTACH, &a);
        r = wire_send(s->egress->sock_src.fd, &msg, 0, &ws->egress_fd, 1);
        if (r < 0)
                log_warning_errno(r, "Cannot give session %s's listening socket to sbx-egress: %m", ws->id);
}

void egress_proxy_detach(Server *s, WorkspaceSession *ws) {
        Sbx__EgressDetach d = SBX__EGRESS_DETACH__INIT;
        Sbx__Msg msg;

        if (ws->egress_fd < 0)
                return;
        ws->egress_fd = safe_close(ws->egress_fd);
        if (!s->egress || s->egress->sock_src.fd < 0)
                return;
        d.key = ws->id;
        msg_init(&msg, SBX__MSG_TYPE__MSG_EGRESS_DETACH, &d);
        (void) wire_send(s->egress->sock_src.fd, &msg, 0, NULL, 0);
}

unsigned long long egress_proxy_next_deadline(Server *s) {
        return s->egress && s->egress->restart_usec ? s->egress->restart_usec : ~0ull;
}

void egress_proxy_run_deadlines(Server *s) {
        EgressProxy *e = s->egress;

        if (!e || !e->restart_usec || e->restart_usec > now_usec())
                return;
        e->restart_usec = 0;
        if (egress_spawn(s) < 0) {
                char why[sizeof(e->why)];

                strlcpy(why, e->why, sizeof(why));
                egress_lost(s, why);
        }
}
