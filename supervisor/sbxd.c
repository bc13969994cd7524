/* sbxd: the supervisor. Owns all durable state, creates and destroys
 * workspace sessions, and serves sbxd.sock. See sbxd(8). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "image.h"
#include "layer.h"
#include "sbx-limits.h"
#include "log.h"
#include "sbxd.h"
#include "spawner.h"

extern char **environ;

#define DEFAULT_CONFIG SBX_SYSCONFDIR "/sbx/sbxd.conf"

int server_watch(Server *s, EventSource *src, int fd, uint32_t events) {
        src->fd = fd;
        if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &(struct epoll_event){ .events = events, .data.ptr = src }) < 0) {
                src->fd = -EBADF;
                return -errno;
        }
        return 0;
}

void server_unwatch(Server *s, EventSource *src) {
        if (src->fd < 0)
                return;
        (void) epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, src->fd, NULL);
        src->fd = safe_close(src->fd);
}

/* ---- configuration ---------------------------------------------------------- */

typedef struct ConfigParse {
        Config *cfg;
        FILE *f;
        int lines;              /* lines read so far: the handler's current line */
        int error_line;         /* line of the first handler error, 0 if none */
        char error[256];
} ConfigParse;

/* inih reader that counts lines, so that "FILE:LINE: reason" pairs the first
 * error's line with its own reason even when later lines are also wrong. */
static char *config_read_line(char *buf, int size, void *stream) {
        ConfigParse *p = stream;
        char *l = fgets(buf, size, p->f);

        if (l)
                p->lines++;
        return l;
}

static int config_parse_u64(const char *v, uint64_t *ret) {
        char *end;
        unsigned long long x;
        unsigned shift = 0;

        errno = 0;
        x = strtoull(v, &end, 10);
        if (errno || end == v || v[0] == '-')
                return -EINVAL;
        switch (*end) {
        case 'K': shift = 10; end++; break;
        case 'M': shift = 20; end++; break;
        case 'G': shift = 30; end++; break;
        default: break;
        }
        if (*end || x > (ULLONG_MAX >> shift))
                return -EINVAL;
        x <<= shift;
        *ret = x;
        return 0;
}

static int parse_group(const char *value, gid_t *ret) {
        const struct group *gr;
        char *end;
        unsigned long g;

        errno = 0;
        g = strtoul(value, &end, 10);
        if (value[0] >= '0' && value[0] <= '9' && !*end && !errno && g < (gid_t) -1) {
                *ret = (gid_t) g;
                return 0;
        }
        errno = 0;
        gr = getgrnam(value);
        if (!gr)
                return errno > 0 ? -errno : -ESRCH;
        *ret = gr->gr_gid;
        return 0;
}

/* 0600, 0660 or 0666: connecting needs read and write, and root always may. */
static int parse_socket_mode(const char *value, mode_t *ret) {
        char *end;
        unsigned long m;

        errno = 0;
        m = strtoul(value, &end, 8);
        if (errno || end == value || *end || (m != 0600 && m != 0660 && m != 0666))
                return -EINVAL;
        *ret = (mode_t) m;
        return 0;
}

static int config_set(Config *cfg, const char *key, const char *value, char *err, size_t err_size) {
        uint64_t v = 0;

        /* socket_group: its members may connect to sbxd.sock (group-owned, 0660
         * by default); unset, only root may (0600) unless socket_mode says
         * otherwise. Either way every request is authorized by SO_PEERCRED
         * against the sandbox's owner. */
        if (strcmp(key, "socket_group") == 0) {
                if (value[0] == '\0') {
                        cfg->socket_gid = (gid_t) -1;
                        return 0;
                }
                if (parse_group(value, &cfg->socket_gid) < 0) {
                        snprintf(err, err_size, "socket_group: no such group '%.40s' (create it, e.g. with systemd-sysusers)", value);
                        return -EINVAL;
                }
                return 0;
        }
        if (strcmp(key, "socket_mode") == 0) {
                if (parse_socket_mode(value, &cfg->socket_mode) < 0) {
                        snprintf(err, err_size, "socket_mode: '%.40s' is not 0600, 0660 or 0666", value);
                        return -EINVAL;
                }
                return 0;
        }

        if (strcmp(key, "state_dir") == 0 || strcmp(key, "run_dir") == 0 || strcmp(key, "worker_path") == 0) {
                char **dst = key[0] == 's' ? &cfg->state_dir : key[0] == 'r' ? &cfg->run_dir : &cfg->worker_path;
                if (value[0] != '/') {
                        snprintf(err, err_size, "%s must be an absolute path", key);
                        return -EINVAL;
                }
                free(*dst);
                *dst = strdup(value);
                return *dst ? 0 : -ENOMEM;
        }
        if (strcmp(key, "allow_io_uring") == 0) { /* boolean; see sbx-security(7) */
                bool yes = !strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "1");
                if (!yes && strcmp(value, "no") && strcmp(value, "false") && strcmp(value, "0")) {
                        snprintf(err, err_size, "allow_io_uring must be yes or no");
                        return -EINVAL;
                }
                cfg->allow_io_uring = yes;
                return 0;
        }
        if (strcmp(key, "log_level") == 0) {
                int l = log_level_from_string(value);
                if (l < 0) {
                        snprintf(err, err_size, "log_level must be one of error, warning, notice, info, debug");
                        return -EINVAL;
                }
                cfg->log_level = l;
                return 0;
        }
        /* Numeric keys and their ranges, documented in sbxd.conf(5). */
        static const struct {
                const char *key;
                uint64_t min, max;
        } numeric[] = {
                { "transcript_cap_bytes", 4096, UINT64_MAX },
                { "default_memory_bytes", 16u << 20, UINT64_MAX },
                { "default_pids_max", 8, 1u << 22 },
                { "session_disk_bytes", 1u << 20, UINT64_MAX },
                { "uid_base", 1000, SBX_UID_POOL_END - SBX_UID_COUNT_DEFAULT },
                { "uid_count", 1, SBX_UID_COUNT_DEFAULT },
                { "session_spares", 0, SBX_SPARES_MAX },
                { "session_spare_idle_seconds", 1, 86400 },
                { "client_idle_seconds", 1, 86400 },
        };
        size_t i;

        for (i = 0; i < ELEMENTSOF(numeric) && strcmp(key, numeric[i].key) != 0; i++)
                ;
        if (i == ELEMENTSOF(numeric)) {
                snprintf(err, err_size, "unknown key '%.40s' (see sbxd.conf(5))", key);
                return -EINVAL;
        }
        if (config_parse_u64(value, &v) < 0) {
                snprintf(err, err_size, "%s: '%.40s' is not a number (suffixes K, M, G allowed)", key, value);
                return -EINVAL;
        }
        if (v < numeric[i].min || v > numeric[i].max) {
                if (numeric[i].max == UINT64_MAX)
                        snprintf(err, err_size, "%s: %llu is out of range (at least %llu)", key,
                                 (unsigned long long) v, (unsigned long long) numeric[i].min);
                else
                        snprintf(err, err_size, "%s: %llu is out of range (%llu to %llu)", key, (unsigned long long) v,
                                 (unsigned long long) numeric[i].min, (unsigned long long) numeric[i].max);
                return -EINVAL;
        }
        if (strcmp(key, "transcript_cap_bytes") == 0)
                cfg->transcript_cap_bytes = v;
        else if (strcmp(key, "default_memory_bytes") == 0)
                cfg->default_memory_bytes = v;
        else if (strcmp(key, "default_pids_max") == 0)
                cfg->default_pids_max = (uint32_t) v;
        else if (strcmp(key, "session_disk_bytes") == 0)
                cfg->session_disk_bytes = v;
        else if (strcmp(key, "uid_base") == 0)
                cfg->uid_base = (uid_t) v;
        else if (strcmp(key, "uid_count") == 0)
                cfg->uid_count = (uint32_t) v;
        else if (strcmp(key, "session_spares") == 0)
                cfg->session_spares = (uint32_t) v;
        else if (strcmp(key, "session_spare_idle_seconds") == 0)
                cfg->spare_idle_seconds = (uint32_t) v;
        else if (strcmp(key, "client_idle_seconds") == 0)
                cfg->client_idle_seconds = (uint32_t) v;
        return 0;
}

static int config_handler(void *user, const char *section, const char *name, const char *value) {
        ConfigParse *p = user;
        char err[sizeof(p->error)];

        if (strcmp(section, "sbxd") != 0)
                snprintf(err, sizeof(err), "unknown section [%.40s] (the only section is [sbxd])", section);
        else if (config_set(p->cfg, name, value, err, sizeof(err)) >= 0)
                return 1;
        if (p->error_line == 0) {
                p->error_line = p->lines;
                memcpy(p->error, err, sizeof(err));
        }
        return 0;
}

static int config_load(Config *cfg, const char *path, bool required) {
        ConfigParse p = { .cfg = cfg };
        int line;

        if (access(path, F_OK) < 0 && !required)
                return 0;
        p.f = fopen(path, "re");
        if (!p.f) {
                log_error("%s: cannot read: %s", path, strerror(errno));
                return -EINVAL;
        }
        line = ini_parse_stream(config_read_line, &p, config_handler, &p);
        fclose(p.f);
        if (line < 0) {
                log_error("%s: cannot read: %s", path, strerror(errno));
                return -EINVAL;
        }
        if (line > 0) {
                log_error("%s:%d: %s", path, line,
                          line == p.error_line ? p.error : "syntax error: expected 'key = value', '[sbxd]' or a comment");
                return -EINVAL;
        }
        return 0;
}

/* ---- start-up ---------------------------------------------------------------- */

static int open_dir(const char *path, mode_t mode, int *ret) {
        int fd;

        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return -errno;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

/* sbx-worker runs as root while it sets a session up: it and every directory
 * above it must be root's and writable by nobody else (a sticky directory,
 * such as /tmp, may be writable by all: others cannot replace what is root's
 * in it). Checked on the file sbxd keeps open, then up its real path. */
static int worker_trusted(int fd, char *ret_why, size_t why_size) {
        char path[PATH_MAX], proc[64];
        struct stat st;
        ssize_t n;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
                snprintf(ret_why, why_size, "not a regular file owned by root and writable only by it");
                return -EPERM;
        }
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        n = readlink(proc, path, sizeof(path) - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        path[n] = '\0';
        for (char *slash = strrchr(path, '/'); slash; slash = strrchr(path, '/')) {
                slash[slash == path ? 1 : 0] = '\0';
                if (stat(path, &st) < 0)
                        return -errno;
                if (st.st_uid != 0 || ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
                        snprintf(ret_why, why_size, "its directory %s is not root's or is writable by others", path);
                        return -EPERM;
                }
                if (slash == path)
                        break;
        }
        return 0;
}

static int open_worker(const Config *cfg, int *ret) {
        char self[PATH_MAX], path[PATH_MAX + 16], why[PATH_MAX + 96];
        ssize_t n;
        int fd, r;

        if (cfg->worker_path)
                strlcpy(path, cfg->worker_path, sizeof(path));
        else {
                /* Beside sbxd in a build tree, else the installed libexec path. */
                n = readlink("/proc/self/exe", self, sizeof(self) - 1);
                if (n < 0)
                        return -errno;
                self[n] = '\0';
                *strrchr(self, '/') = '\0';
                snprintf(path, sizeof(path), "%s/sbx-worker", self);
                if (access(path, X_OK) < 0)
                        snprintf(path, sizeof(path), "%s/sbx/sbx-worker", SBX_LIBEXECDIR);
        }
        fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(-errno, "Cannot open the worker binary '%s': %m", path);
        r = worker_trusted(fd, why, sizeof(why));
        if (r < 0) {
                (void) close(fd);
                if (r == -EPERM)
                        return log_error_errno(r, "Refusing the worker binary '%s': %s", path, why);
                return log_error_errno(r, "Cannot check the worker binary '%s': %m", path);
        }
        *ret = fd;
        return 0;
}

static int socket_address(const Server *s, struct sockaddr_un *sa) {
        *sa = (struct sockaddr_un) { .sun_family = AF_UNIX };
        if ((size_t) snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/sbxd.sock", s->cfg.run_dir) >= sizeof(sa->sun_path))
                return log_error_errno(-ENAMETOOLONG, "Run directory path too long for a socket");
        return 0;
}

/* A live sbxd on the same run directory keeps it. A socket that a killed
 * sbxd left behind is removed first thing at start, so that nobody takes it
 * for this sbxd's while it sets up (clients wait for `sbxctl status`). */
static int socket_claim(const Server *s) {
        struct sockaddr_un sa;
        int fd, r;

        r = socket_address(s, &sa);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(-errno, "Cannot create the socket: %m");
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 || errno == EAGAIN) {
                safe_close(fd);
                return log_error_errno(-EADDRINUSE, "Another sbxd is serving %s", sa.sun_path);
        }
        safe_close(fd);
        if (unlink(sa.sun_path) == 0)
                log_info("Removed the stale socket %s", sa.sun_path);
        return 0;
}

static int listen_socket(Server *s) {
        struct sockaddr_un sa;
        gid_t gid = s->cfg.socket_gid;
        mode_t mode = s->cfg.socket_mode ?: gid != (gid_t) -1 ? 0660 : 0600;
        int fd, r;

        r = socket_address(s, &sa);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(-errno, "Cannot create the socket: %m");
        /* chown before chmod: until both are done the socket keeps bind's umask mode. */
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            (gid != (gid_t) -1 && chown(sa.sun_path, (uid_t) -1, gid) < 0) || chmod(sa.sun_path, mode) < 0 ||
            listen(fd, 64) < 0) {
                r = -errno;
                safe_close(fd);
                return log_error_errno(r, "Cannot listen on %s: %m", sa.sun_path);
        }
        s->listen_src.dispatch = control_accept;
        r = server_watch(s, &s->listen_src, fd, EPOLLIN);
        if (r < 0)
                safe_close(fd);
        return r;
}

static void notify_ready(void) {
        const char *path = getenv("NOTIFY_SOCKET");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        socklen_t len;
        int fd;

        if (!path || (path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof(sa.sun_path))
                return;
        strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
        if (sa.sun_path[0] == '@')
                sa.sun_path[0] = '\0';
        len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(path));
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return;
        (void) sendto(fd, "READY=1", 7, MSG_NOSIGNAL, (struct sockaddr *) &sa, len);
        safe_close(fd);
}

static void on_signal(Server *s, EventSource *src, uint32_t events) {
        struct signalfd_siginfo si;

        while (read(src->fd, &si, sizeof(si)) == sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGTERM:
                case SIGINT:
                        log_info("Received %s, stopping", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
                        s->quit = true;
                        break;
                default:
                        break;
                }
        }
}

static int read_self_cgroup(char *buf, size_t size) {
        _cleanup_close_ int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = loop_read(fd, buf, size - 1);
        if (n < 0)
                return (int) n;
        buf[n] = '\0';
        return 0;
}

static bool path_is_mount_safe(const char *p) {
        /* These directories end up in overlayfs option strings. */
        return !strpbrk(p, ",:\\\n");
}

static int server_init(Server *s) {
        char cgroup_self[4096], instance[32], image[PATH_MAX];
        sigset_t mask;
        unsigned lost = 0;
        int fd, r;

        TAILQ_INIT(&s->clients);
        TAILQ_INIT(&s->sandboxes);
        TAILQ_INIT(&s->imports);
        TAILQ_INIT(&s->sessions);
        TAILQ_INIT(&s->ending);
        TAILQ_INIT(&s->commands);
        s->started_usec = now_usec();

        if (!path_is_mount_safe(s->cfg.state_dir) || !path_is_mount_safe(s->cfg.run_dir))
                return log_error_errno(-EINVAL, "State and run directories may not contain ',', ':' or '\\'");
        r = socket_claim(s);
        if (r < 0)
                return r;
        r = open_worker(&s->cfg, &s->worker_exe_fd);
        if (r < 0)
                return r;
        {
                SandboxSeccompOptions so = { .allow_io_uring = s->cfg.allow_io_uring };
                const char *step = "seccomp";
                r = sandbox_seccomp_compile(&so, &s->seccomp, &step);
                if (r < 0)
                        return log_error_errno(r, "Cannot build the sessions' seccomp filter (%s): %m", step);
        }
        /* Before the spawner: on cgroup v2 sbxd moves itself into the
         * supervisor/ leaf of the delegated cgroup, which must hold no other
         * process then; the spawner, forked next, is born in that leaf. */
        r = read_self_cgroup(cgroup_self, sizeof(cgroup_self));
        if (r < 0)
                return log_error_errno(r, "Cannot read /proc/self/cgroup: %m");
        snprintf(instance, sizeof(instance), "sbxd-%d", (int) getpid());
        r = cgroup_manager_new("/sys/fs/cgroup", cgroup_self, instance, &s->cgroups);
        if (r < 0)
                return log_error_errno(r, "Cannot set up cgroups (v2 needs Delegate=yes; v1 needs memory and pids): %m");
        r = cgroup_manager_cleanup_stale(s->cgroups);
        if (r < 0)
                log_warning_errno(r, "Failed to remove cgroups of dead supervisors, ignoring: %m");
        log_info("Using cgroup %s", cgroup_backend_to_string(cgroup_manager_backend(s->cgroups)));
        /* Before the database and the sandboxes are loaded: the smaller sbxd is
         * now, the less the spawner carries. */
        r = spawner_start(s->worker_exe_fd, s->seccomp, &s->spawner);
        if (r < 0)
                return log_error_errno(r, "Cannot start the session spawner: %m");
        r = open_dir(s->cfg.state_dir, 0700, &s->state_fd);
        if (r < 0)
                return log_error_errno(r, "Cannot open state directory '%s': %m", s->cfg.state_dir);
        r = open_dir(s->cfg.run_dir, 0755, &fd);
        if (r < 0)
                return log_error_errno(r, "Cannot open run directory '%s': %m", s->cfg.run_dir);
        if (mkdirat(fd, "session-root", 0700) < 0 && errno != EEXIST)
                r = -errno;
        safe_close(fd);
        if (r < 0)
                return log_error_errno(r, "Cannot create %s/session-root: %m", s->cfg.run_dir);
        r = s->sandboxes_fd = dir_make_open_at(s->state_fd, "sandboxes", 0700, NULL);
        if (r >= 0)
                r = s->transcripts_fd = dir_make_open_at(s->state_fd, "transcripts", 0700, NULL);
        /* Staged file operations of a previous run were never published. */
        if (r >= 0)
                (void) tree_remove_at(s->state_fd, "staging");
        if (r >= 0)
                r = s->staging_fd = dir_make_open_at(s->state_fd, "staging", 0700, NULL);
        if (r < 0)
                return log_error_errno(r, "Cannot create directories in '%s': %m", s->cfg.state_dir);

        r = index_cache_new(SBX_FILE_INDEX_CACHE_ENTRIES, SBX_FILE_INDEX_CACHE_BYTES, &s->file_indexes);
        if (r < 0)
                return log_error_errno(r, "Cannot allocate the file index cache: %m");
        r = store_open(s->state_fd, &s->store);
        if (r == -EPROTONOSUPPORT)
                return log_error_errno(r, "Cannot open %s/sbx.db: it was written by a newer sbxd", s->cfg.state_dir);
        if (r < 0)
                return log_error_errno(r, "Cannot open %s/sbx.db: %m", s->cfg.state_dir);
        if (store_migrated_from(s->store))
                log_notice("Migrated %s/sbx.db from schema %u: records are kept by sandbox id", s->cfg.state_dir,
                           store_migrated_from(s->store));
        r = store_commands_mark_lost(s->store, now_unix_usec(), &lost);
        if (r < 0)
                return log_error_errno(r, "Cannot update command records: %m");
        if (lost)
                log_notice("%u commands of a previous sbxd were running; marked supervisor_lost", lost);
        r = sandboxes_load(s);
        if (r < 0)
                return log_error_errno(r, "Cannot load sandboxes: %m");

        r = image_build_default(s->state_fd);
        if (r < 0)
                return log_error_errno(r, "Cannot build the default image: %m");
        snprintf(image, sizeof(image), "%s/image-default", s->cfg.state_dir);
        s->image_dir = strdup(image);
        if (!s->image_dir)
                return -ENOMEM;


        s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (s->epoll_fd < 0)
                return -errno;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        s->signal_src.dispatch = on_signal;
        r = server_watch(s, &s->signal_src, fd, EPOLLIN);
        if (r < 0)
                return r;
        return listen_socket(s);
}

static void server_done(Server *s) {
        WorkspaceSession *ws;
        Client *c;
        char path[PATH_MAX];

        /* Nothing of a session outlives the supervisor: its commands are supervisor_lost. */
        while ((ws = TAILQ_FIRST(&s->sessions))) {
                Command *cmd;
                TAILQ_FOREACH(cmd, &ws->commands, session_link)
                        cmd->supervisor_lost = true;
                session_destroy(s, ws);
        }
        sessions_wait_ended(s, NULL);
        imports_free(s);
        s->spawner = spawner_free(s->spawner);
        while ((c = TAILQ_FIRST(&s->clients)))
                client_free(s, c);
        if (s->listen_src.fd >= 0) {
                snprintf(path, sizeof(path), "%s/sbxd.sock", s->cfg.run_dir);
                (void) unlink(path);
        }
        server_unwatch(s, &s->listen_src);
        server_unwatch(s, &s->signal_src);
        s->cgroups = cgroup_manager_free(s->cgroups);
        sandboxes_free(s);
        s->store = store_close(s->store);
        s->file_indexes = index_cache_free(s->file_indexes);
        safe_close(s->worker_exe_fd);
        free(s->seccomp);
        safe_close(s->transcripts_fd);
        safe_close(s->staging_fd);
        safe_close(s->sandboxes_fd);
        safe_close(s->state_fd);
        safe_close(s->epoll_fd);
        free(s->image_dir);
}

static int server_run(Server *s) {
        struct epoll_event events[32];

        while (!s->quit) {
                unsigned long long deadline =
                        MIN(MIN(commands_next_deadline(s), spares_next_deadline(s)), clients_next_deadline(s));
                unsigned long long now = now_usec();
                int timeout = deadline == ~0ull ? -1 : deadline <= now ? 0 : (int) MIN((deadline - now + 999) / 1000, 60000ull);
                int n = epoll_wait(s->epoll_fd, events, ELEMENTSOF(events), timeout);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(-errno, "epoll_wait failed: %m");
                }
                for (int i = 0; i < n; i++) {
                        EventSource *src = events[i].data.ptr;
                        src->dispatch(s, src, events[i].events);
                        /* A handler may have freed other sources of this batch: start over. */
                        if (src == &s->listen_src || src == &s->signal_src)
                                continue;
                        break;
                }
                commands_run_deadlines(s);
                spares_run_deadlines(s);
                clients_run_deadlines(s);
                clients_reap(s);
        }
        return 0;
}

static _noreturn_ void usage(int status) {
        fprintf(status ? stderr : stdout,
                "Usage: sbxd [--config FILE] [--state-dir DIR] [--run-dir DIR] [--log-level LEVEL]\n"
                "            [--check-config] [--help] [--version]\n"
                "The sbx supervisor; see sbxd(8).\n");
        exit(status);
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },    { "state-dir", required_argument, NULL, 's' },
                { "run-dir", required_argument, NULL, 'r' },   { "log-level", required_argument, NULL, 'l' },
                { "check-config", no_argument, NULL, 'C' },    { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },         {},
        };
        Server s = {
                .cfg = {
                        .log_level = LOG_INFO,
                        .transcript_cap_bytes = SBX_TRANSCRIPT_CAP_DEFAULT,
                        .default_memory_bytes = SBX_MEMORY_DEFAULT,
                        .default_pids_max = SBX_PIDS_DEFAULT,
                        .session_disk_bytes = SBX_SESSION_DISK_DEFAULT,
                        .session_spares = SBX_SPARES_DEFAULT,
                        .spare_idle_seconds = SBX_SPARE_IDLE_DEFAULT_S,
                        .uid_base = SBX_UID_BASE_DEFAULT,
                        .uid_count = SBX_UID_COUNT_DEFAULT,
                        .socket_gid = (gid_t) -1,
                        .client_idle_seconds = SBX_CLIENT_IDLE_DEFAULT_S,
                },
                .epoll_fd = -EBADF, .state_fd = -EBADF, .sandboxes_fd = -EBADF, .transcripts_fd = -EBADF, .staging_fd = -EBADF,
                .worker_exe_fd = -EBADF, .listen_src.fd = -EBADF, .signal_src.fd = -EBADF,
        };
        const char *config = NULL, *state_dir = NULL, *run_dir = NULL, *log_level = NULL;
        bool check_only = false;
        int c, r;

        log_open("sbxd");
        heap_keep_freed(SBX_HEAP_KEEP_BYTES);
        setproctitle_init(argc, argv, environ);
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case 'c': config = optarg; break;
                case 's': state_dir = optarg; break;
                case 'r': run_dir = optarg; break;
                case 'l': log_level = optarg; break;
                case 'C': check_only = true; break;
                case 'h': usage(0);
                case 'V': printf("sbxd %s\n", SBX_VERSION); return 0;
                default: usage(2);
                }
        }
        if (optind < argc)
                usage(2);

        r = config_load(&s.cfg, config ?: DEFAULT_CONFIG, config != NULL);
        if (r < 0)
                return 1;
        if (check_only) {
                printf("%s: configuration OK\n", config ?: DEFAULT_CONFIG);
                return 0;
        }
        /* The command line wins over the configuration file. */
        {
                char err[256];
                if ((state_dir && config_set(&s.cfg, "state_dir", state_dir, err, sizeof(err)) < 0) ||
                    (run_dir && config_set(&s.cfg, "run_dir", run_dir, err, sizeof(err)) < 0) ||
                    (log_level && config_set(&s.cfg, "log_level", log_level, err, sizeof(err)) < 0)) {
                        fprintf(stderr, "sbxd: %s\n", err);
                        return 2;
                }
        }
        if (!s.cfg.state_dir)
                s.cfg.state_dir = strdup("/var/lib/sbx");
        if (!s.cfg.run_dir)
                s.cfg.run_dir = strdup("/run/sbx");
        if (!s.cfg.state_dir || !s.cfg.run_dir)
                return 1;
        log_set_level(s.cfg.log_level);
        if (geteuid() != 0) {
                log_error("sbxd must run as root: it creates namespaces, mounts and cgroups");
                return 1;
        }
        setproctitle("[priv]");

        r = server_init(&s);
        if (r >= 0) {
                log_info("sbxd %s ready on %s/sbxd.sock (state in %s)", SBX_VERSION, s.cfg.run_dir, s.cfg.state_dir);
                notify_ready();
                r = server_run(&s);
        }
        server_done(&s);
        free(s.cfg.state_dir);
        free(s.cfg.run_dir);
        free(s.cfg.worker_path);
        log_info("sbxd stopped");
        return r < 0 ? 1 : 0;
}
