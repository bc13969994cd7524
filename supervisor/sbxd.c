/* sbxd: the supervisor. Owns all durable state, creates and destroys
 * workspace sessions, and serves sbxd.sock. See sbxd(8). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
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
#include <sys/sysinfo.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control.h"
#include "core/artifacts.h"
#include "core/egress-proxy.h"
#include "core/boxfiles.h"
#include "core/client.h"
#include "core/config.h"
#include "core/kept.h"
#include "core/layerquota.h"
#include "core/imagebuild.h"
#include "core/sandbox.h"
#include "core/server.h"
#include "core/session.h"
#include "core/claim.h"
#include "core/box.h"
#include "core/boxwire.h"
#include "core/job.h"
#include "core/takeover.h"
#include "core/token.h"
#include "core/spare.h"
#include "core/transcripts.h"
#include "data/layer.h"
#include "fd-util.h"
#include "log.h"
#include "os/image.h"
#include "os/spawner.h"
#include "sbx-limits.h"

extern char **environ;

#define DEFAULT_CONFIG SBX_SYSCONFDIR "/sbx/sbxd.conf"

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
        r = fd_trusted(fd, why, sizeof(why));
        if (r < 0) {
                (void) close(fd);
                if (r == -EPERM)
                        return log_error_errno(r, "Refusing the worker binary '%s': %s", path, why);
                return log_error_errno(r, "Cannot check the worker binary '%s': %m", path);
        }
        *ret = fd;
        return 0;
}

/* A socket for RUN_DIR/sbxd.sock, whose address is *sa; the fd or -errno (logged). */
static int socket_open(const Server *s, struct sockaddr_un *sa) {
        int fd;

        *sa = (struct sockaddr_un) { .sun_family = AF_UNIX };
        if ((size_t) snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/sbxd.sock", s->cfg.run_dir) >= sizeof(sa->sun_path))
                return log_error_errno(-ENAMETOOLONG, "Run directory path too long for a socket");
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(-errno, "Cannot create the socket: %m");
        return fd;
}

/* A live sbxd on the same run directory keeps it. A socket that a killed
 * sbxd left behind is removed first thing at start, so that nobody takes it
 * for this sbxd's while it sets up (clients wait for `sbxctl status`). */
static int socket_claim(const Server *s) {
        struct sockaddr_un sa;
        int fd = socket_open(s, &sa);

        if (fd < 0)
                return fd;
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
        int fd = socket_open(s, &sa), r;

        if (fd < 0)
                return fd;
        /* chown before chmod: until both are done the socket keeps bind's umask mode. */
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            (gid != (gid_t) -1 && chown(sa.sun_path, (uid_t) -1, gid) < 0) || chmod(sa.sun_path, mode) < 0 ||
            listen(fd, SBX_LISTEN_BACKLOG) < 0) {
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

/* The state directory, its database and its sandboxes. */
static int server_open_state(Server *s) {
        unsigned lost = 0, unrecorded;
        int fd, r;

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
        r = server_open_state_dirs(s);
        if (r < 0)
                return log_error_errno(r, "Cannot create directories in '%s': %m", s->cfg.state_dir);
        r = store_open(s->state_fd, &s->store);
        if (r == -EPROTONOSUPPORT)
                return log_error_errno(r, "Cannot open %s/sbx.db: it was written by a newer sbxd", s->cfg.state_dir);
        if (r < 0)
                return log_error_errno(r, "Cannot open %s/sbx.db: %m", s->cfg.state_dir);
        server_checkpoint_off_loop(s);
        if (store_migrated_from(s->store))
                log_notice("Migrated %s/sbx.db from schema %u: records are kept by sandbox id", s->cfg.state_dir,
                           store_migrated_from(s->store));
        /* On a full state filesystem this cannot be stored: such records read
         * supervisor_lost anyway (command_record_fix), and sbxd starts. */
        r = store_commands_mark_lost(s->store, now_unix_usec(), &lost);
        if (r < 0)
                log_warning_errno(r, "Cannot mark the commands of a previous sbxd ended, ignoring: %m");
        else if (lost)
                log_notice("%u commands of a previous sbxd were running; marked supervisor_lost", lost);
        r = sandboxes_load(s);
        if (r < 0)
                return log_error_errno(r, "Cannot load sandboxes: %m");
        r = transcripts_load(s, &unrecorded);
        if (r < 0)
                return log_error_errno(r, "Cannot count the transcripts: %m");
        if (unrecorded > 0)
                log_warning("Counted %u transcripts whose sizes the full state filesystem cannot record yet",
                            unrecorded);
        log_info("Transcripts store %" PRIu64 " bytes in %" PRIu64 " files (transcripts_max_bytes %" PRIu64
                 ", transcripts_max_inodes %" PRIu64 ")", s->transcript_bytes, s->transcript_files,
                 s->transcripts_max_bytes, s->cfg.transcripts_max_inodes);
        r = claims_load(s);
        if (r < 0)
                return log_error_errno(r, "Cannot load claims: %m");
        s->egress_aliases = box_egress_aliases;
        r = boxes_load(s);
        if (r < 0)
                return log_error_errno(r, "Cannot load boxes: %m");
        r = jobs_load(s);
        if (r < 0)
                return log_error_errno(r, "Cannot load jobs: %m");
        r = tokens_load(s);
        if (r < 0)
                return log_error_errno(r, "Cannot load the tokens: %m");
        return 0;
}

/* The share of the host all sandboxes may take together (sbxd.conf
 * sandboxes_*): percentages of its RAM and of kernel.pid_max. */
static int sandboxes_limits(const Config *cfg, CgroupLimits *ret) {
        _cleanup_close_ int kernel_fd = open("/proc/sys/kernel", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *text = NULL;
        struct sysinfo si;
        uint64_t pid_max;
        int r;

        if (sysinfo(&si) < 0)
                return log_error_errno(-errno, "Cannot read the host's memory size: %m");
        r = kernel_fd < 0 ? -errno : read_file_at(kernel_fd, "pid_max", &text);
        if (r >= 0) {
                text[strcspn(text, "\n")] = '\0';
                r = parse_u64(text, &pid_max);
        }
        if (r < 0)
                return log_error_errno(r, "Cannot read /proc/sys/kernel/pid_max: %m");
        *ret = (CgroupLimits) {
                .memory_bytes = config_share_resolve(&cfg->sandboxes_memory_max, (uint64_t) si.totalram * si.mem_unit),
                .pids_max = config_share_resolve(&cfg->sandboxes_pids_max, pid_max),
                .cpu_weight = cfg->sandboxes_cpu_weight,
        };
        return 0;
}

/* The sandboxes' and sessions' cgroups. Before the spawner: on cgroup v2 sbxd
 * moves itself into the supervisor/ leaf of the delegated cgroup, which must
 * hold no other process then; the spawner, forked next, is born in that leaf. */
static int server_open_cgroups(Server *s) {
        char cgroup_self[4096], instance[32];
        CgroupLimits all;
        int r;

        r = read_self_cgroup(cgroup_self, sizeof(cgroup_self));
        if (r < 0)
                return log_error_errno(r, "Cannot read /proc/self/cgroup: %m");
        r = sandboxes_limits(&s->cfg, &all);
        if (r < 0)
                return r;
        snprintf(instance, sizeof(instance), "sbxd-%d", (int) getpid());
        r = cgroup_manager_new("/sys/fs/cgroup", cgroup_self, instance, &all, &s->cgroups);
        if (r < 0)
                return log_error_errno(r, "Cannot set up cgroups (v2 needs Delegate=yes; v1 needs memory and pids): %m");
        r = cgroup_manager_cleanup_stale(s->cgroups);
        if (r < 0)
                log_warning_errno(r, "Failed to remove cgroups of dead supervisors, ignoring: %m");
        log_info("Using cgroup %s; all sandboxes together: memory %llu MiB, %llu pids, cpu weight %u (0: no limit)",
                 cgroup_backend_to_string(cgroup_manager_backend(s->cgroups)),
                 (unsigned long long) (all.memory_bytes >> 20), (unsigned long long) all.pids_max,
                 s->cfg.sandboxes_cpu_weight);
        return 0;
}

/* The default image and the file index cache. */
static int server_open_resources(Server *s) {
        ImageBuild built;
        int r;

        r = image_build_default(s->state_fd, &built);
        if (r < 0)
                return log_error_errno(r, "Cannot build the default image: %m");
        if (built == IMAGE_BUILT_IN_PLACE)
                log_notice("Rebuilt the default image in place of the old one: no room for both in %s",
                           s->cfg.state_dir);
        else if (built == IMAGE_BUILT)
                log_info("Built the default image (its inputs changed)");
        if (asprintf(&s->image_dir, "%s/image-default", s->cfg.state_dir) < 0) {
                s->image_dir = NULL;
                return -ENOMEM;
        }
        r = images_init(s);
        if (r < 0)
                return log_error_errno(r, "Cannot open %s/images: %m", s->cfg.state_dir);
        r = server_seal_state_dir(s);
        if (r < 0)
                return log_error_errno(r, "Cannot restrict the modes in %s: %m", s->cfg.state_dir);
        r = index_cache_new(SBX_FILE_INDEX_CACHE_ENTRIES, SBX_FILE_INDEX_CACHE_BYTES, &s->file_indexes);
        if (r < 0)
                return log_error_errno(r, "Cannot allocate the file index cache: %m");
        return 0;
}

/* The epoll set with the signals, the work pool and sbxd.sock in it. */
static int server_open_events(Server *s) {
        sigset_t mask;
        int fd, r;

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
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        /* After the signal mask: its threads block every signal anyway. */
        r = server_open_work(s);
        if (r < 0)
                return log_error_errno(r, "Cannot start the work pool: %m");
        return listen_socket(s);
}

static int server_open(Server *s) {
        SandboxSeccompOptions so = { .allow_io_uring = s->cfg.allow_io_uring };
        const char *step = "seccomp";
        int r;

        if (!path_is_mount_safe(s->cfg.state_dir) || !path_is_mount_safe(s->cfg.run_dir))
                return log_error_errno(-EINVAL, "State and run directories may not contain ',', ':' or '\\'");
        r = socket_claim(s);
        if (r < 0)
                return r;
        r = open_worker(&s->cfg, &s->worker_exe_fd);
        if (r < 0)
                return r;
        r = sandbox_seccomp_compile(&so, &s->seccomp, &step);
        if (r < 0)
                return log_error_errno(r, "Cannot build the sessions' seccomp filter (%s): %m", step);
        r = server_open_cgroups(s);
        if (r < 0)
                return r;
        /* Before the database and the sandboxes are loaded: the smaller sbxd is
         * now, the less the spawner carries. */
        r = spawner_start(s->worker_exe_fd, s->seccomp, &s->spawner);
        if (r < 0)
                return log_error_errno(r, "Cannot start the session spawner: %m");
        r = server_open_state(s);
        if (r >= 0)
                r = server_open_resources(s);
        if (r >= 0)
                r = server_open_events(s);
        if (r >= 0) {
                egress_proxy_start(s);
                artifacts_load(s);      /* needs the work pool */
        }
        return r;
}

static void server_done(Server *s) {
        WorkspaceSession *ws;
        Sandbox *sb;
        char path[PATH_MAX];

        /* Work off the loop first: what still runs is left (no half layer is
         * ever recorded; the sessions' uppers are only read by it). */
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                work_lane_cancel(s->work, &sb->lane);
        server_stop_work(s);

        /* No process of a session outlives the supervisor: its commands are
         * supervisor_lost. The changes of a managed session are kept (core/kept.h). */
        while ((ws = TAILQ_FIRST(&s->sessions))) {
                Command *cmd;
                TAILQ_FOREACH(cmd, &ws->commands, session_link)
                        cmd->supervisor_lost = true;
                kept_session_save(s, ws);
                session_destroy(s, ws);
        }
        sessions_wait_ended(s, NULL);
        sessions_reap(s);
        /* A last try; what still fails is marked supervisor_lost at the next start. */
        commands_store_unrecorded(s, true);
        egress_proxy_stop(s);
        takeovers_free(s);
        jobs_free(s);
        boxes_free(s);
        claims_free(s);
        tokens_free(s);
        imports_free(s);
        images_free(s);
        s->spawner = spawner_free(s->spawner);
        clients_reap(s, true);
        if (s->listen_src.fd >= 0) {
                snprintf(path, sizeof(path), "%s/sbxd.sock", s->cfg.run_dir);
                (void) unlink(path);
        }
        server_unwatch(s, &s->listen_src);
        server_unwatch(s, &s->signal_src);
        sandboxes_free(s);      /* with their cgroups */
        s->cgroups = cgroup_manager_free(s->cgroups);
        server_close(s);
}

/* Milliseconds until the earliest deadline of commands, spares, failed sessions and clients. */
static int server_timeout(Server *s) {
        unsigned long long deadline = MIN(MIN(commands_next_deadline(s), spares_next_deadline(s)),
                                          MIN(MIN(failed_sessions_next_deadline(s), clients_next_deadline(s)),
                                              MIN(MIN(claims_next_deadline(s), boxes_next_deadline(s)),
                                                  MIN(egress_proxy_next_deadline(s), jobs_next_deadline(s)))));
        deadline = MIN(deadline, box_files_next_deadline(s));
        deadline = MIN(deadline, takeovers_next_deadline(s));
        deadline = MIN(deadline, imports_next_deadline(s));
        unsigned long long now = now_usec();

        if (deadline == ~0ull)
                return -1;
        return deadline <= now ? 0 : (int) MIN((deadline - now + 999) / 1000, 60000ull);
}

/* What the loop does after each batch. */
static void server_tick(Server *s) {
        commands_run_deadlines(s);
        commands_store_unrecorded(s, false);
        commands_trim_ended(s);
        spares_run_deadlines(s);
        failed_sessions_run_deadlines(s);
        claims_run_deadlines(s);
        boxes_run_deadlines(s);
        jobs_run_deadlines(s);
        takeovers_run_deadlines(s);
        imports_run_deadlines(s);
        clients_run_deadlines(s);
        egress_proxy_run_deadlines(s);
        box_files_run_deadlines(s);
        sessions_reap(s);
        clients_reap(s, false);
}

static int server_run(Server *s) {
        while (!s->quit) {
                int r = server_dispatch(s, server_timeout(s));

                if (r < 0 && r != -EINTR)
                        return log_error_errno(r, "epoll_wait failed: %m");
                server_tick(s);
        }
        return 0;
}

static _noreturn_ void usage(int status) {
        fprintf(status ? stderr : stdout,
                "Usage: sbxd [--config FILE] [--state-dir DIR] [--run-dir DIR] [--log-level LEVEL]\n"
                "            [--check-config] [--save-kept] [--help] [--version]\n"
                "The sbx supervisor; see sbxd(8).\n");
        exit(status);
}

typedef struct Options {
        const char *config, *state_dir, *run_dir, *log_level;
        bool check_only, save_kept;
} Options;

static void parse_argv(int argc, char **argv, Options *ret) {
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },    { "state-dir", required_argument, NULL, 's' },
                { "run-dir", required_argument, NULL, 'r' },   { "log-level", required_argument, NULL, 'l' },
                { "check-config", no_argument, NULL, 'C' },    { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },         { "save-kept", no_argument, NULL, 'K' },
                {},
        };
        int c;

        *ret = (Options) {};
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case 'c': ret->config = optarg; break;
                case 's': ret->state_dir = optarg; break;
                case 'r': ret->run_dir = optarg; break;
                case 'l': ret->log_level = optarg; break;
                case 'C': ret->check_only = true; break;
                case 'K': ret->save_kept = true; break;
                case 'h': usage(0);
                case 'V': printf("sbxd %s\n", SBX_VERSION); exit(0);
                default: usage(2);
                }
        }
        if (optind < argc)
                usage(2);
}

/* The configuration file, then the command line, which wins. Returns an exit status, or -1 to go on. */
static int configure(Config *cfg, const Options *o) {
        const char *path = o->config ?: DEFAULT_CONFIG;
        char err[CONFIG_ERROR_MAX];

        if (config_load(cfg, path, o->config != NULL, err) < 0) {
                log_error("%s", err);
                return 1;
        }
        if (o->check_only) {
                printf("%s: configuration OK\n", path);
                return 0;
        }
        if ((o->state_dir && config_set(cfg, "state_dir", o->state_dir, err) < 0) ||
            (o->run_dir && config_set(cfg, "run_dir", o->run_dir, err) < 0) ||
            (o->log_level && config_set(cfg, "log_level", o->log_level, err) < 0)) {
                fprintf(stderr, "sbxd: %s\n", err);
                return 2;
        }
        if (config_finish(cfg) < 0)
                return 1;
        return -1;
}

int main(int argc, char **argv) {
        Server s;
        Options o;
        int r;

        log_open("sbxd");
        heap_keep_freed(SBX_HEAP_KEEP_BYTES);
        setproctitle_init(argc, argv, environ);
        parse_argv(argc, argv, &o);
        server_init(&s);
        r = configure(&s.cfg, &o);
        if (r < 0 && geteuid() != 0) {
                log_error("sbxd must run as root: it creates namespaces, mounts and cgroups");
                r = 1;
        }
        if (r >= 0) {
                server_close(&s);
                return r;
        }
        log_set_level(s.cfg.log_level);
        /* Before a reboot (sbxd.service's ExecStopPost, sbxd(8)): no supervisor, only the copy. */
        if (o.save_kept) {
                /* Only while no sbxd serves the run directory: not under a running one. */
                r = socket_claim(&s);
                if (r >= 0)
                        r = kept_save_live(&s.cfg);
                if (r < 0)
                        log_error_errno(r, "Kept workspace sessions not saved (all or some): %m");
                server_close(&s);
                return r < 0 ? 1 : 0;
        }
        setproctitle("[priv]");
        layer_limits_from_config(&s.cfg, &s.layer_limits);

        r = server_open(&s);
        if (r >= 0) {
                log_info("sbxd %s ready on %s/sbxd.sock (state in %s)", SBX_VERSION, s.cfg.run_dir, s.cfg.state_dir);
                notify_ready();
                r = server_run(&s);
        }
        server_done(&s);
        log_info("sbxd stopped");
        return r < 0 ? 1 : 0;
}
