/* sbx-gateway: sandbox-mcp's tools over MCP Streamable HTTP (gateway.h).
 * This file: the command line and gateway.conf, the listening sockets
 * (given by systemd, LISTEN_FDS, or bound to --listen / listen), one
 * libmicrohttpd daemon per socket (a thread per connection, optionally TLS
 * with the certificate reloaded on SIGHUP), and the event loop that reads
 * the sbxd connections of sessions no call waits on, ends idle sessions and
 * waits for SIGTERM. It runs as its own unprivileged user
 * (sbxd.conf gateway_user), with no capability. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ini.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"
#include "fd-util.h"
#include "gateway.h"
#include "log.h"
#include "macro.h"

#define SD_LISTEN_FDS_START 3
#define EXPIRE_INTERVAL_MS 1000

typedef struct Listener {
        int fd;
        struct MHD_Daemon *daemon;
} Listener;

typedef struct Main {
        GatewayConfig cfg;
        Gateway *g;
        Listener listeners[SBX_GATEWAY_LISTEN_MAX];
        size_t n_listeners;
        char *cert, *key;               /* the PEM files' contents, with TLS */
        const char *config_path;
        bool listen_given;              /* --listen replaces the config's listen lines */
} Main;

/* ---- configuration ---------------------------------------------------------------- */

static int add_string(char **v, size_t *n, size_t max, const char *value) {
        if (*n >= max)
                return -E2BIG;
        v[*n] = strdup(value);
        if (!v[*n])
                return -ENOMEM;
        (*n)++;
        return 0;
}

static int set_string(char **dst, const char *value) {
        char *c = strdup(value);

        if (!c)
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

static int parse_u32(const char *value, uint64_t max, uint32_t *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(value, &end, 10);
        if (!value[0] || *end || errno || v > max)
                return -EINVAL;
        *ret = (uint32_t) v;
        return 0;
}

/* public_url: http:// or https://, then a host and an optional port and
 * path, no trailing slash, no query, no blank or control character. */
static bool public_url_valid(const char *v) {
        const char *rest = strncmp(v, "https://", 8) == 0 ? v + 8 : strncmp(v, "http://", 7) == 0 ? v + 7 : NULL;
        size_t n = strlen(v);

        if (!rest || !rest[0] || rest[0] == '/' || v[n - 1] == '/' || n > SBX_GATEWAY_PUBLIC_URL_MAX)
                return false;
        for (const char *p = v; *p; p++)
                if ((unsigned char) *p <= ' ' || *p == 0x7f || *p == '?' || *p == '#' || *p == '"' || *p == '\\')
                        return false;
        return true;
}

typedef struct ConfigParse {
        Main *m;
        char error[256];
} ConfigParse;

static int config_key(void *user, const char *section, const char *key, const char *value) {
        ConfigParse *p = user;
        GatewayConfig *c = &p->m->cfg;
        uint32_t v;
        int r = -EINVAL;

        if (strcmp(section, "gateway") != 0)
                r = -ENOENT;
        else if (strcmp(key, "listen") == 0)
                r = p->m->listen_given ? 0 : add_string(c->listen, &c->n_listen, SBX_GATEWAY_LISTEN_MAX, value);
        else if (strcmp(key, "socket") == 0)
                r = value[0] == '/' ? set_string(&c->socket_path, value) : -EINVAL;
        else if (strcmp(key, "allowed_origin") == 0)
                r = add_string(c->origins, &c->n_origins, SBX_GATEWAY_ORIGINS_MAX, value);
        else if (strcmp(key, "sessions_per_token") == 0)
                r = parse_u32(value, SBX_GATEWAY_SESSIONS_MAX, &c->sessions_per_token);
        else if (strcmp(key, "session_idle_seconds") == 0)
                r = parse_u32(value, 7 * 86400, &c->session_idle_seconds);
        else if (strcmp(key, "requests_per_second") == 0)
                r = parse_u32(value, 100000, &c->requests_per_second);
        else if (strcmp(key, "max_body_bytes") == 0 && (r = parse_u32(value, SBX_GATEWAY_BODY_MAX, &v)) >= 0)
                c->body_max = v;
        else if (strcmp(key, "tls_certificate") == 0)
                r = set_string(&c->tls_cert, value);
        else if (strcmp(key, "tls_key") == 0)
                r = set_string(&c->tls_key, value);
        else if (strcmp(key, "public_url") == 0)
                r = public_url_valid(value) ? set_string(&c->public_url, value) : -EINVAL;
        else
                r = -ENOENT;
        if (r >= 0)
                return 1;
        snprintf(p->error, sizeof(p->error), r == -ENOENT ? "unknown key '%s' in [%s]" : "invalid value for %s%.0s",
                 key, section);
        return 0;
}

static int config_load(Main *m, char *ret_error, size_t size) {
        ConfigParse p = { .m = m };
        FILE *f = fopen(m->config_path, "re");
        int line;

        if (!f) {
                if (errno == ENOENT)
                        return 0;       /* every key at its default */
                snprintf(ret_error, size, "%s: %s", m->config_path, strerror(errno));
                return -errno;
        }
        line = ini_parse_file(f, config_key, &p);
        fclose(f);
        if (line != 0) {
                snprintf(ret_error, size, "%s:%d: %s", m->config_path, line, p.error[0] ? p.error : "syntax error");
                return -EINVAL;
        }
        if (!m->cfg.tls_cert != !m->cfg.tls_key) {
                snprintf(ret_error, size, "%s: tls_certificate and tls_key go together", m->config_path);
                return -EINVAL;
        }
        return 0;
}

/* ---- listening sockets --------------------------------------------------------------- */

/* "127.0.0.1:8765", "[::1]:8765", "0.0.0.0:443" */
static int listen_on(const char *spec, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_storage sa = {};
        const char *colon = strrchr(spec, ':');
        char host[64];
        uint32_t port;
        socklen_t len;
        int one = 1;

        /* Port 0: one the kernel picks, which the log line names. */
        if (!colon || (size_t) (colon - spec) >= sizeof(host) || parse_u32(colon + 1, 65535, &port) < 0)
                return -EINVAL;
        snprintf(host, sizeof(host), "%.*s", (int) (colon - spec), spec);
        if (host[0] == '[' && host[strlen(host) - 1] == ']') {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) &sa;

                host[strlen(host) - 1] = '\0';
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons((uint16_t) port);
                if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
                        return -EINVAL;
                len = sizeof(*s6);
        } else {
                struct sockaddr_in *s4 = (struct sockaddr_in *) &sa;

                s4->sin_family = AF_INET;
                s4->sin_port = htons((uint16_t) port);
                if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
                        return -EINVAL;
                len = sizeof(*s4);
        }
        fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &sa, len) < 0 || listen(fd, SOMAXCONN) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* systemd's LISTEN_FDS (sd_listen_fds(3)): the number of sockets from fd 3 on, for this process. */
static int listen_fds_passed(void) {
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        uint32_t n;

        if (!pid || !fds || strtol(pid, NULL, 10) != getpid() || parse_u32(fds, SBX_GATEWAY_LISTEN_MAX, &n) < 0)
                return 0;
        for (uint32_t i = 0; i < n; i++)
                (void) fcntl(SD_LISTEN_FDS_START + (int) i, F_SETFD, FD_CLOEXEC);
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        return (int) n;
}

static const char *v6_open(const char *addr) {
        return strchr(addr, ':') ? "[" : "";
}

static const char *v6_close(const char *addr) {
        return strchr(addr, ':') ? "]" : "";
}

static int listeners_open(Main *m) {
        int n = listen_fds_passed(), r;

        for (int i = 0; i < n; i++)
                m->listeners[m->n_listeners++] = (Listener) { .fd = SD_LISTEN_FDS_START + i };
        if (n > 0) {
                log_info("Serving on %d socket(s) from systemd", n);
                return 0;
        }
        if (m->cfg.n_listen == 0 && add_string(m->cfg.listen, &m->cfg.n_listen, SBX_GATEWAY_LISTEN_MAX,
                                               GATEWAY_DEFAULT_LISTEN) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < m->cfg.n_listen; i++) {
                Listener *l = &m->listeners[m->n_listeners];

                struct sockaddr_storage sa;
                socklen_t len = sizeof(sa);
                char addr[INET6_ADDRSTRLEN] = "?";
                unsigned port = 0;

                r = listen_on(m->cfg.listen[i], &l->fd);
                if (r < 0)
                        return log_error_errno(r, "Cannot listen on %s: %m", m->cfg.listen[i]);
                m->n_listeners++;
                if (getsockname(l->fd, (struct sockaddr *) &sa, &len) == 0) {
                        bool v6 = sa.ss_family == AF_INET6;
                        const struct sockaddr_in *s4 = (const struct sockaddr_in *) &sa;
                        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *) &sa;

                        inet_ntop(sa.ss_family, v6 ? (const void *) &s6->sin6_addr : (const void *) &s4->sin_addr,
                                  addr, sizeof(addr));
                        port = ntohs(v6 ? s6->sin6_port : s4->sin_port);
                }
                log_info("Listening on %s%s%s:%u%s", v6_open(addr), addr, v6_close(addr), port,
                         m->cfg.tls_cert ? " (TLS)" : "");
        }
        return 0;
}

/* ---- daemons ------------------------------------------------------------------------- */

/* A PEM file of gateway.conf: the administrator's path, symlinks followed (certbot's live/ links). */
static int read_pem(const char *key, const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        int r = fd < 0 ? -errno : read_fd_bounded(fd, SBX_GATEWAY_PEM_MAX, ret, NULL);

        if (r < 0)
                return log_error_errno(r, "Cannot read %s %s: %m", key, path);
        return 0;
}

static int tls_load(Main *m) {
        _cleanup_free_ char *cert = NULL, *key = NULL;

        if (!m->cfg.tls_cert)
                return 0;
        if (read_pem("tls_certificate", m->cfg.tls_cert, &cert) < 0 || read_pem("tls_key", m->cfg.tls_key, &key) < 0)
                return -EINVAL;
        free(m->cert);
        if (m->key)
                explicit_bzero(m->key, strlen(m->key));
        free(m->key);
        m->cert = TAKE_PTR(cert);
        m->key = TAKE_PTR(key);
        return 0;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
        char text[512];

        vsnprintf(text, sizeof(text), fmt, ap);
        text[strcspn(text, "\n")] = '\0';
        log_debug("libmicrohttpd: %s", text);
}

static struct MHD_Daemon *daemon_start(Main *m, int fd) {
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | MHD_USE_POLL | (m->cert ? MHD_USE_TLS : 0);
        struct MHD_OptionItem tls[] = {
                { MHD_OPTION_HTTPS_MEM_CERT, 0, m->cert },
                { MHD_OPTION_HTTPS_MEM_KEY, 0, m->key },
                { MHD_OPTION_END, 0, NULL },
        };

        return MHD_start_daemon(flags, 0, NULL, NULL, gateway_http_handler, m->g,
                                MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                MHD_OPTION_LISTEN_SOCKET, fd,
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned) SBX_GATEWAY_THREADS_MAX,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) SBX_GATEWAY_CONNECTION_TIMEOUT_S,
                                MHD_OPTION_NOTIFY_COMPLETED, gateway_http_completed, m->g,
                                MHD_OPTION_ARRAY, m->cert ? tls : tls + 2,
                                MHD_OPTION_END);
}

static void *daemon_stop_thread(void *d) {
        MHD_stop_daemon(d);
        return NULL;
}

/* SIGHUP: the certificate and key read again; each socket goes to a new
 * daemon with them, the old one finishes its connections and stops. */
static void tls_reload(Main *m) {
        if (!m->cfg.tls_cert) {
                log_info("SIGHUP: no TLS configured, nothing to reload");
                return;
        }
        if (tls_load(m) < 0)
                return;         /* the old certificate stays in use */
        for (size_t i = 0; i < m->n_listeners; i++) {
                Listener *l = &m->listeners[i];
                struct MHD_Daemon *old = l->daemon, *d;
                pthread_t t;
                int fd = MHD_quiesce_daemon(old);

                if (fd < 0)
                        continue;
                d = daemon_start(m, fd);
                if (!d) {
                        log_error("SIGHUP: cannot start a daemon with the new certificate; this socket is closed");
                        continue;
                }
                l->daemon = d;
                if (pthread_create(&t, NULL, daemon_stop_thread, old) == 0)
                        pthread_detach(t);
        }
        log_info("SIGHUP: reloaded %s", m->cfg.tls_cert);
}

static int run(Main *m) {
        sigset_t mask;
        int sfd;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0)
                return -EINVAL;
        sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0)
                return -errno;
        for (size_t i = 0; i < m->n_listeners; i++) {
                m->listeners[i].daemon = daemon_start(m, m->listeners[i].fd);
                if (!m->listeners[i].daemon) {
                        safe_close(sfd);
                        return log_error_errno(-EINVAL, "Cannot start the HTTP server (libmicrohttpd)");
                }
        }
        log_info("sbx-gateway %s serving, sbxd at %s", SBX_VERSION, m->cfg.socket_path);
        for (unsigned long long expire_at = now_usec() + EXPIRE_INTERVAL_MS * 1000ull;;) {
                struct pollfd p[2] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = gateway_watch_fd(m->g), .events = POLLIN },
                };
                struct signalfd_siginfo si;

                (void) poll(p, ELEMENTSOF(p), EXPIRE_INTERVAL_MS);
                if (p[0].revents && read(sfd, &si, sizeof(si)) == sizeof(si)) {
                        if (si.ssi_signo != SIGHUP) {
                                log_info("Got signal %u, stopping", si.ssi_signo);
                                break;
                        }
                        tls_reload(m);
                }
                if (p[1].revents)
                        gateway_sessions_dispatch(m->g);
                if (now_usec() >= expire_at) {
                        gateway_sessions_expire(m->g);
                        expire_at = now_usec() + EXPIRE_INTERVAL_MS * 1000ull;
                }
        }
        /* Streams and waits end first, so the connections' threads do. */
        for (size_t i = 0; i < m->n_listeners; i++)
                MHD_quiesce_daemon(m->listeners[i].daemon);
        gateway_sessions_end_all(m->g);
        for (size_t i = 0; i < m->n_listeners; i++)
                MHD_stop_daemon(m->listeners[i].daemon);
        safe_close(sfd);
        return 0;
}

/* Each session holds its client's socket, its sbxd connection, an eventfd
 * and, for a moment, the descriptors replies carry: 1024 is too few for
 * SBX_GATEWAY_SESSIONS_MAX of them. */
static void raise_fd_limit(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
}

/* ---- command line ------------------------------------------------------------------ */

static void help(void) {
        printf("Usage: sbx-gateway [--config FILE] [--listen ADDR:PORT]... [--socket PATH] [--log-level LEVEL]\n"
               "       sbx-gateway --help | --version\n\n"
               "sandbox-mcp's tools over MCP Streamable HTTP, for clients with a bearer token.\n\n"
               "  --config FILE      gateway.conf (default " GATEWAY_DEFAULT_CONFIG ")\n"
               "  --listen ADDR:PORT address to serve on, repeatable (default " GATEWAY_DEFAULT_LISTEN ")\n"
               "  --socket PATH      sbxd socket (default " MCP_DEFAULT_SOCKET ")\n"
               "  --log-level LEVEL  error, warning, notice, info (default) or debug\n"
               "  -h, --help         show this help\n"
               "  -V, --version      show the version\n\n"
               "See sbx-gateway(8).\n");
}

_printf_(1, 2) _noreturn_
static void usage_error(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        cli_usage_errorv("sbx-gateway", fmt, ap);
}

static void parse_argv(int argc, char **argv, Main *m, const char **ret_socket) {
        enum { OPT_CONFIG = 0x100, OPT_LISTEN, OPT_SOCKET, OPT_LOG_LEVEL };
        static const struct option options[] = {
                { "config", required_argument, NULL, OPT_CONFIG },
                { "listen", required_argument, NULL, OPT_LISTEN },
                { "socket", required_argument, NULL, OPT_SOCKET },
                { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        int c;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":hV", options, NULL)) >= 0) {
                switch (c) {
                case OPT_CONFIG:
                        m->config_path = optarg;
                        break;
                case OPT_LISTEN:
                        if (add_string(m->cfg.listen, &m->cfg.n_listen, SBX_GATEWAY_LISTEN_MAX, optarg) < 0)
                                usage_error("at most %u --listen", SBX_GATEWAY_LISTEN_MAX);
                        m->listen_given = true;
                        break;
                case OPT_SOCKET:
                        if (optarg[0] != '/')
                                usage_error("--socket needs an absolute path");
                        *ret_socket = optarg;
                        break;
                default:
                        cli_common_option("sbx-gateway", c, OPT_LOG_LEVEL, help, argv);
                }
        }
        cli_no_arguments("sbx-gateway", argc, argv);
}

int main(int argc, char **argv) {
        Main m = {
                .config_path = GATEWAY_DEFAULT_CONFIG,
                .cfg = {
                        .sessions_per_token = SBX_GATEWAY_SESSIONS_PER_TOKEN_DEFAULT,
                        .session_idle_seconds = SBX_GATEWAY_IDLE_DEFAULT_S,
                        .requests_per_second = SBX_GATEWAY_RATE_DEFAULT,
                        .body_max = SBX_GATEWAY_BODY_MAX,
                },
        };
        const char *socket_path = NULL;
        char error[512];
        int r;

        log_open("sbx-gateway");
        parse_argv(argc, argv, &m, &socket_path);
        raise_fd_limit();
        if (config_load(&m, error, sizeof(error)) < 0) {
                log_error("Bad configuration: %s", error);
                return 1;
        }
        if ((socket_path || !m.cfg.socket_path) && set_string(&m.cfg.socket_path, socket_path ?: MCP_DEFAULT_SOCKET) < 0)
                return 1;
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR || tls_load(&m) < 0 || listeners_open(&m) < 0)
                return 1;
        r = gateway_state_new(&m.cfg, &m.g);
        if (r >= 0)
                r = run(&m);
        if (r < 0)
                log_error_errno(r, "Exiting: %m");
        gateway_state_free(m.g);
        return r < 0 ? 1 : 0;
}
