/* sbx-egress (sbx-egress(8)): the sandboxes' HTTP proxy. sbxd starts it as
 * its own unprivileged user, without capabilities and with no_new_privs,
 * with a SOCK_SEQPACKET socket at fd 3 over which it gets its settings
 * (EgressConfig), the listening socket of each session whose sandbox has a
 * policy other than none (EgressAttach, the fd attached) and each session's
 * end (EgressDetach); it answers with one EgressVerdict per connection. It
 * ends when sbxd closes the socket. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress-policy.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "msg.h"
#include "proxy.h"
#include "wire.h"

#define CONTROL_FD 3

typedef struct Egress {
        Proxy *proxy;
        int control;
} Egress;

static void send_verdict(void *userdata, const char *key, const char *target, bool allowed, const char *reason) {
        Egress *e = userdata;
        Sbx__EgressVerdict v = SBX__EGRESS_VERDICT__INIT;
        Sbx__Msg msg;
        int r;

        v.key = (char *) key;
        v.target = (char *) target;
        v.allowed = allowed;
        v.reason = (char *) (reason ?: "");
        msg_init(&msg, SBX__MSG_TYPE__MSG_EGRESS_VERDICT, &v);
        /* sbxd reads its socket on every pass of its loop; a full socket waits a little. */
        for (int tries = 0; (r = wire_send(e->control, &msg, 0, NULL, 0)) == -EAGAIN && tries < 10; tries++)
                (void) poll(&(struct pollfd) { .fd = e->control, .events = POLLOUT }, 1, 100);
        if (r < 0)
                log_warning_errno(r, "Cannot report the verdict on %s to sbxd, ignoring: %m", target);
}

static int configure(Egress *e, const Sbx__EgressConfig *c) {
        EgressHosts hosts = {};
        int r;

        for (size_t i = 0; i < c->n_package_hosts; i++) {
                const Sbx__EgressHostEntry *h = c->package_hosts[i];
                size_t n = strlen(h->name);

                if (n == 0 || n > SBX_EGRESS_HOST_MAX || h->port > 65535) {
                        egress_hosts_done(&hosts);
                        return -EBADMSG;
                }
                r = egress_hosts_add(&hosts, h->name, n, (uint16_t) h->port);
                if (r < 0) {
                        egress_hosts_done(&hosts);
                        return r;
                }
        }
        proxy_configure(e->proxy, c->allow_private, &hosts);
        return 0;
}

/* The attach's aliases into ret (SBX_EGRESS_ALIASES_MAX), each name and host
 * a lower-case host name (or an IPv6 literal) and each port 1-65535. */
static int aliases_take(const Sbx__EgressAttach *a, ProxyAlias *ret) {
        static const char host_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789-.:";

        if (a->n_aliases > SBX_EGRESS_ALIASES_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < a->n_aliases; i++) {
                const Sbx__EgressAlias *al = a->aliases[i];
                size_t name = strlen(al->name), host = strlen(al->host);

                if (name == 0 || name > SBX_EGRESS_HOST_MAX || strspn(al->name, host_chars) != name || host == 0 ||
                    host > SBX_EGRESS_HOST_MAX || strspn(al->host, host_chars) != host || al->port < 1 ||
                    al->port > 65535 || al->to_port < 1 || al->to_port > 65535)
                        return -EBADMSG;
                ret[i] = (ProxyAlias) { .port = (uint16_t) al->port, .to_port = (uint16_t) al->to_port };
                memcpy(ret[i].name, al->name, name + 1);
                memcpy(ret[i].host, al->host, host + 1);
        }
        return 0;
}

static int attach(Egress *e, const Sbx__EgressAttach *a, int fd) {
        ProxyAlias aliases[SBX_EGRESS_ALIASES_MAX];
        EgressPolicy policy;

        if (fd < 0 || egress_policy_from_string(a->policy, &policy) < 0 || policy == EGRESS_NONE ||
            strlen(a->key) >= 48 || strlen(a->sandbox) >= 48 || aliases_take(a, aliases) < 0) {
                safe_close(fd);
                return -EBADMSG;
        }
        return proxy_attach(e->proxy, a->key, a->sandbox, policy, aliases, a->n_aliases, fd);
}

static void on_control(void *userdata) {
        Egress *e = userdata;

        for (;;) {
                _cleanup_msg_ Sbx__Msg *m = NULL;
                int fds[SBX_WIRE_MAX_FDS], r;
                size_t n_fds = 0;
                uint32_t seq;

                r = wire_recv(e->control, &m, &seq, fds, &n_fds);
                if (r == -EAGAIN)
                        return;
                if (r == -ECONNRESET) {
                        proxy_stop(e->proxy); /* sbxd is gone */
                        return;
                }
                if (r < 0) {
                        log_error_errno(r, "Bad message from sbxd: %m");
                        proxy_stop(e->proxy);
                        return;
                }
                for (size_t i = 1; i < n_fds; i++)
                        safe_close(fds[i]);
                switch (m->type) {
                case SBX__MSG_TYPE__MSG_EGRESS_CONFIG:
                        r = configure(e, m->egress_config);
                        break;
                case SBX__MSG_TYPE__MSG_EGRESS_ATTACH:
                        r = attach(e, m->egress_attach, n_fds > 0 ? fds[0] : -EBADF);
                        n_fds = 0;
                        break;
                case SBX__MSG_TYPE__MSG_EGRESS_DETACH:
                        proxy_detach(e->proxy, m->egress_detach->key);
                        break;
                default:
                        r = -EBADMSG;
                        break;
                }
                if (n_fds > 0)
                        safe_close(fds[0]);
                if (r < 0)
                        log_warning_errno(r, "Cannot do sbxd's request %d, ignoring: %m", (int) m->type);
        }
}

int main(int argc, char **argv) {
        Egress e = { .control = CONTROL_FD };
        int r;

        log_open("sbx-egress");
        if (argc > 1) {
                fprintf(stderr, "sbx-egress is started by sbxd (sbx-egress(8)); it takes no arguments\n");
                return 2;
        }
        /* sbxd dropped us to the egress user; never run with root's ids or capabilities. */
        if (getuid() == 0 || geteuid() == 0 || getgid() == 0 || getegid() == 0) {
                log_error("sbx-egress must not run as root (sbxd starts it as egress_user)");
                return 1;
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(-errno, "Cannot set no_new_privs: %m"), 1;
        (void) signal(SIGPIPE, SIG_IGN);
        if (fd_nonblock(CONTROL_FD, true) < 0) {
                log_error("sbx-egress needs sbxd's socket at fd 3");
                return 1;
        }
        r = proxy_new(send_verdict, &e, &e.proxy);
        if (r >= 0)
                r = proxy_watch_control(e.proxy, CONTROL_FD, on_control, &e);
        if (r >= 0)
                r = proxy_run(e.proxy);
        if (r < 0)
                log_error_errno(r, "sbx-egress failed: %m");
        e.proxy = proxy_free(e.proxy);
        return r < 0 ? 1 : 0;
}
