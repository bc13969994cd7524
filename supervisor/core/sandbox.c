#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "fd-util.h"
#include "data/layer.h"
#include "data/transcript.h"
#include "sbx-limits.h"
#include "log.h"
#include "msg.h"
#include "os/image.h"
#include "core/owner.h"
#include "core/kept.h"
#include "core/imagebuild.h"
#include "core/sandbox.h"
#include "core/secret.h"
#include "core/session.h"
#include "core/snapshot.h"
#include "core/transcripts.h"
#include "os/uidrange.h"

/* A uid without a passwd entry reads the source with this group and no other. */
#define IMPORT_NOGROUP 65534u

enum { IMPORT_SOCK_FD = 3, IMPORT_LAYERS_FD = 4 };

bool name_is_valid(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > SBX_NAME_MAX || name[0] == '.' || name[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                      (name[i] >= '0' && name[i] <= '9') || name[i] == '-' || name[i] == '_' || name[i] == '.'))
                        return false;
        return true;
}

static Sandbox *sandbox_free(Sandbox *sb) {
        if (!sb)
                return NULL;
        snapshot_forget(sb);
        sb->cgroup = cgroup_sandbox_free(sb->cgroup);
        safe_close(sb->layers_fd);
        safe_close(sb->dirfd);
        free(sb->source_dir);
        free(sb->layers_path);
        secrets_free(sb->secrets);
        transcript_free(sb->query_kept);
        free(sb);
        return NULL;
}

static int sandbox_open_dirs(Server *s, Sandbox *sb, bool create) {
        free(sb->layers_path);
        if (asprintf(&sb->layers_path, "%s/sandboxes/%s/layers", s->cfg.state_dir, sb->id) < 0) {
                sb->layers_path = NULL;
                return -ENOMEM;
        }
        if (create && mkdirat(s->sandboxes_fd, sb->id, 0700) < 0)
                return -errno;
        sb->dirfd = openat(s->sandboxes_fd, sb->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sb->dirfd < 0)
                return -errno;
        /* Traversable by the sandbox's root (an unprivileged host uid) for overlay lookups. */
        if (create && (mkdirat(sb->dirfd, "layers", 0711) < 0 || fchmod(sb->dirfd, 0711) < 0))
                return -errno;
        sb->layers_fd = openat(sb->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sb->layers_fd < 0)
                return -errno;
        return 0;
}

static Sandbox *sandbox_new(const char *source_dir) {
        Sandbox *sb = calloc(1, sizeof(*sb));

        if (!sb)
                return NULL;
        sb->dirfd = sb->layers_fd = sb->view_fd = -EBADF;
        TAILQ_INIT(&sb->holds);
        sb->source_dir = strdup(source_dir);
        if (!sb->source_dir) {
                free(sb);
                return NULL;
        }
        return sb;
}

/* Its image's name, kept in the file "image" of its directory (none: the default). */
static void sandbox_image_read(Sandbox *sb) {
        _cleanup_free_ char *name = NULL;
        size_t len = 0;

        strlcpy(sb->image, SBX_IMAGE_DEFAULT_NAME, sizeof(sb->image));
        if (read_file_bounded_at(sb->dirfd, "image", SBX_NAME_MAX + 1, &name, &len) < 0)
                return;
        if (len > 0 && name[len - 1] == '\n')
                name[len - 1] = '\0';
        if (name[0] && strlen(name) < sizeof(sb->image))
                strlcpy(sb->image, name, sizeof(sb->image));
}

static int load_one(const StoreSandbox *rec, void *userdata) {
        Server *s = userdata;
        Sandbox *sb;
        int r;

        sb = sandbox_new(rec->source_dir);
        if (!sb)
                return -ENOMEM;
        strlcpy(sb->id, rec->id, sizeof(sb->id));
        strlcpy(sb->name, rec->name, sizeof(sb->name));
        sb->owner_uid = rec->owner_uid;
        sb->memory_bytes = rec->memory_bytes;
        sb->pids_max = rec->pids_max;
        sb->cpu_weight = rec->cpu_weight;
        /* A policy this sbxd does not know (a newer one's record) is none: no way out. */
        if (egress_policy_from_string(rec->egress, &sb->egress) < 0)
                sb->egress = EGRESS_NONE;
        sb->top_layer = rec->top_layer;
        sb->created_unix = rec->created_unix;
        r = sandbox_open_dirs(s, sb, false);
        /* Schema 1 named the directory after the sandbox: it takes the id's name once. */
        if (r == -ENOENT && renameat(s->sandboxes_fd, sb->name, s->sandboxes_fd, sb->id) >= 0) {
                log_notice("Renamed the directory of sandbox '%s' to sandboxes/%s", sb->name, sb->id);
                r = sandbox_open_dirs(s, sb, false);
        }
        if (r < 0) {
                log_error_errno(r, "Sandbox '%s' has no usable directory, skipping it: %m", sb->name);
                sandbox_free(sb);
                return 0;
        }
        sandbox_image_read(sb);
        r = store_squash_get(s->store, sb->id, &sb->squashed);
        if (r < 0) {
                sandbox_free(sb);
                return r;
        }
        {
                char keep[32];
                snprintf(keep, sizeof(keep), "squash-%u", sb->squashed);
                r = layer_remove_unrecorded(sb->layers_fd, sb->top_layer, keep);
                if (r < 0)
                        log_warning_errno(r, "Failed to remove unpublished layers of '%s', ignoring: %m", sb->name);
        }
        TAILQ_INSERT_TAIL(&s->sandboxes, sb, link);
        return 0;
}

/* ---- host id ranges (uidrange.h) ---------------------------------------------------- */

typedef struct Ranges {
        StoreUidRange *v;
        size_t n, cap;
} Ranges;

static int ranges_add(const StoreUidRange *u, void *userdata) {
        Ranges *rs = userdata;
        int r = ARRAY_RESERVE(rs->v, rs->cap, rs->n + 1);

        if (r < 0)
                return r;
        rs->v[rs->n++] = *u;
        return 0;
}

/* Read first, change after: no statement of the store runs while a row is written. */
static int ranges_read(Server *s, bool orphans_only, Ranges *ret) {
        Ranges rs = {};
        int r = store_uid_range_foreach(s->store, orphans_only, ranges_add, &rs);
        if (r < 0) {
                free(rs.v);
                return r;
        }
        *ret = rs;
        return 0;
}

/* Ranges whose sandbox has no record (deleted, or its creation failed): its
 * files go, then the range, which may then be given again. */
unsigned sandbox_ranges_collect(Server *s) {
        _cleanup_free_ StoreUidRange *v = NULL;
        Ranges rs;
        unsigned released = 0;
        int r;

        r = ranges_read(s, true, &rs);
        if (r < 0) {
                log_warning_errno(r, "Failed to read the host id ranges, ignoring: %m");
                return 0;
        }
        v = rs.v;
        for (size_t i = 0; i < rs.n; i++) {
                const StoreUidRange *u = &rs.v[i];
                bool importing = false;
                Import *imp;

                /* A sandbox being imported has no record yet, but its range and files are in use. */
                TAILQ_FOREACH(imp, &s->imports, link)
                        importing |= strcmp(imp->sandbox->id, u->sandbox) == 0;
                if (importing)
                        continue;
                r = tree_remove_at(s->sandboxes_fd, u->sandbox);
                if (r >= 0 || r == -ENOENT)
                        r = store_uid_range_delete(s->store, u->sandbox);
                if (r < 0) {
                        log_warning_errno(r, "Host ids %u-%u of deleted sandbox '%s' stay reserved: %m", u->base,
                                          u->base + u->count - 1, u->sandbox);
                        continue;
                }
                log_info("Host ids %u-%u of deleted sandbox '%s' are free again", u->base, u->base + u->count - 1,
                         u->sandbox);
                released++;
        }
        return released;
}

/* The files of sb move from the ids at from to its range, then the record says so. */
static int range_shift(Server *s, Sandbox *sb, uint32_t from) {
        int r;

        log_notice("Moving the files of sandbox '%s' from host ids %u-%u to its own range %u-%u", sb->name, from,
                   from + sb->uid_count - 1, sb->uid_base, sb->uid_base + sb->uid_count - 1);
        /* Below the sandbox directory: layers/, a layer, then the layer's tree. */
        r = uid_tree_shift(sb->dirfd, from, sb->uid_base, sb->uid_count, SBX_TREE_DEPTH_MAX + 2);
        if (r < 0)
                return r;
        return store_uid_range_shifted(s->store, sb->id);
}

/* A sandbox of a version without ranges: its files carry the pool's first
 * range. The first such sandbox keeps it, the others get a range of their own. */
static int range_migrate(Server *s, Sandbox *sb) {
        StoreUidRange u = { .count = s->cfg.uid_count, .shift_from = s->cfg.uid_base };
        int r;

        strlcpy(u.sandbox, sb->id, sizeof(u.sandbox));
        r = uid_range_find_free(s->store, s->cfg.uid_base, s->cfg.uid_count, &u.base);
        if (r < 0)
                return r;
        u.shifting = u.base != s->cfg.uid_base;
        r = store_uid_range_insert(s->store, &u);
        if (r < 0)
                return r;
        sb->uid_base = u.base;
        sb->uid_count = u.count;
        r = u.shifting ? range_shift(s, sb, u.shift_from) : 0;
        if (r < 0)
                sb->uid_count = 0; /* half moved: the next start finishes */
        return r;
}

/* Every loaded sandbox gets its recorded range (a move a crash left half done
 * is finished first); one that cannot is not served, and is tried again at
 * the next start. */
static int sandbox_ranges_load(Server *s) {
        _cleanup_free_ StoreUidRange *v = NULL;
        Sandbox *sb, *next;
        Ranges rs;
        int r;

        r = ranges_read(s, false, &rs);
        if (r < 0)
                return r;
        v = rs.v;
        for (size_t i = 0; i < rs.n; i++) {
                TAILQ_FOREACH(sb, &s->sandboxes, link)
                        if (strcmp(sb->id, rs.v[i].sandbox) == 0)
                                break;
                if (!sb)
                        continue;
                sb->uid_base = rs.v[i].base;
                sb->uid_count = rs.v[i].count;
                r = rs.v[i].shifting ? range_shift(s, sb, rs.v[i].shift_from) : 0;
                if (r < 0) {
                        log_error_errno(r, "Cannot move the files of sandbox '%s' to its host ids: %m", sb->name);
                        sb->uid_count = 0; /* not served: dropped below */
                }
        }
        TAILQ_FOREACH_SAFE(sb, &s->sandboxes, link, next) {
                if (sb->uid_base == 0) {
                        /* No record: a sandbox of an earlier version. */
                        r = range_migrate(s, sb);
                        if (r < 0)
                                log_error_errno(r, "Cannot give sandbox '%s' host ids of its own: %m", sb->name);
                }
                if (sb->uid_count == 0) {
                        log_error("Sandbox '%s' has no usable host id range, skipping it", sb->name);
                        TAILQ_REMOVE(&s->sandboxes, sb, link);
                        sandbox_free(sb);
                }
        }
        (void) sandbox_ranges_collect(s);
        return 0;
}

int sandboxes_load(Server *s) {
        Sandbox *sb;
        int r = store_sandbox_foreach(s->store, load_one, s);

        if (r >= 0)
                r = sandbox_ranges_load(s);
        if (r < 0)
                return r;
        TAILQ_FOREACH(sb, &s->sandboxes, link) {
                unsigned removed;

                /* Kept sessions of the last sbxd come back first: they hold their base layers. */
                r = kept_sessions_load(s, sb);
                if (r < 0)
                        return r;
                /* Nothing else lives yet: everything below the squashed base can go. */
                (void) snapshot_collect(sb, &removed);
        }
        return 0;
}

Sandbox *sandbox_find(Server *s, const char *name) {
        Sandbox *sb;
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (strcmp(sb->name, name) == 0)
                        return sb;
        return NULL;
}

/* A range of its own for a new sandbox, on the disk before any file has its ids. */
static int range_allocate(Server *s, Sandbox *sb, char *errmsg, size_t errmsg_size) {
        StoreUidRange u = { .count = s->cfg.uid_count };
        int r;

        strlcpy(u.sandbox, sb->id, sizeof(u.sandbox));
        r = uid_range_find_free(s->store, s->cfg.uid_base, s->cfg.uid_count, &u.base);
        if (r == -ENOSPC)
                snprintf(errmsg, errmsg_size,
                         "no free host id range: from uid_base %u to %u there is room for %u sandboxes of uid_count %u "
                         "ids (sbxd.conf(5))",
                         s->cfg.uid_base, SBX_IMAGE_BUILD_UID_BASE - 1,
                         (SBX_IMAGE_BUILD_UID_BASE - s->cfg.uid_base) / s->cfg.uid_count,
                         s->cfg.uid_count);
        if (r >= 0)
                r = store_uid_range_insert(s->store, &u);
        if (r < 0) {
                if (r != -ENOSPC)
                        snprintf(errmsg, errmsg_size, "cannot record the sandbox's host ids: %s", strerror(-r));
                return r;
        }
        sb->uid_base = u.base;
        sb->uid_count = u.count;
        return 0;
}

/* The sandbox's directory, then its host ids: they are free again only once no
 * file of it is left. What fails here, sbxctl gc retries. */
static void sandbox_files_remove(Server *s, const Sandbox *sb) {
        int r = tree_remove_at(s->sandboxes_fd, sb->id);
        if (r >= 0 || r == -ENOENT)
                r = store_uid_range_delete(s->store, sb->id);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Failed to remove the files or the host ids of sandbox '%s', 'sbxctl gc' retries: %m",
                                  sb->name);
}

/* ---- creation: the import helper ------------------------------------------------ */

typedef struct ImportExec {
        int exe, sock, layers;
        int err;                        /* set by the child if it fails before the exec */
} ImportExec;

/* Runs by clone_vfork: the helper's fds in place, then sbx-worker --import.
 * Touches nothing of sbxd's memory but a->err. */
static int exec_import(void *userdata) {
        ImportExec *a = userdata;
        char *const argv[] = { (char *) "sbx-worker", (char *) "--import", NULL };
        char *const envp[] = { NULL };
        sigset_t none;
        int sock, layers, exe;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                goto fail;
        /* sbxd blocks and ignores these; neither may carry over the exec. */
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        (void) signal(SIGPIPE, SIG_DFL);
        sock = fcntl(a->sock, F_DUPFD, 10);
        layers = fcntl(a->layers, F_DUPFD, 10);
        exe = fcntl(a->exe, F_DUPFD_CLOEXEC, 10);
        if (sock < 0 || layers < 0 || exe < 0 || dup2(sock, IMPORT_SOCK_FD) < 0 ||
            dup2(layers, IMPORT_LAYERS_FD) < 0)
                goto fail;
        if (syscall(SYS_close_range, IMPORT_LAYERS_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                goto fail;
        syscall(SYS_execveat, exe, "", argv, envp, AT_EMPTY_PATH);
fail:
        a->err = errno > 0 ? -errno : -EIO;
        _exit(127);
}

/* The owner's primary group and supplementary groups (at most
 * SBX_IMPORT_GROUPS_MAX: with fewer, the owner may only read less). */
static int owner_groups(uid_t uid, gid_t *ret_gid, uint32_t *groups, size_t *ret_n) {
        gid_t list[SBX_IMPORT_GROUPS_MAX];
        int n = SBX_IMPORT_GROUPS_MAX;
        const struct passwd *pw;

        errno = 0;
        pw = getpwuid(uid);
        if (!pw) {
                if (errno != 0 && errno != ENOENT && errno != ESRCH)
                        return -errno;
                *ret_gid = IMPORT_NOGROUP;
                *ret_n = 0;
                return 0;
        }
        if (getgrouplist(pw->pw_name, pw->pw_gid, list, &n) < 0) {
                log_warning("The owner uid %u is in more than %u groups; the import reads with the first %u",
                            uid, SBX_IMPORT_GROUPS_MAX, SBX_IMPORT_GROUPS_MAX);
                n = SBX_IMPORT_GROUPS_MAX;
        }
        for (int i = 0; i < n; i++)
                groups[i] = list[i];
        *ret_gid = pw->pw_gid;
        *ret_n = (size_t) n;
        return 0;
}

static int import_send(Server *s, const Sandbox *sb, int sock) {
        Sbx__ImportRequest req = SBX__IMPORT_REQUEST__INIT;
        Sbx__Msg msg;
        uint32_t groups[SBX_IMPORT_GROUPS_MAX];
        struct stat st;
        gid_t gid = IMPORT_NOGROUP;
        size_t n = 0;
        int r;

        if (fstat(s->state_fd, &st) < 0)
                return -errno;
        r = owner_groups(sb->owner_uid, &gid, groups, &n);
        if (r < 0)
                return r;
        req.source_dir = sb->source_dir;
        req.reader_uid = sb->owner_uid;
        req.reader_gid = gid;
        req.n_reader_groups = n;
        req.reader_groups = groups;
        req.force_uid = sb->uid_base;
        req.state_dev = st.st_dev;
        req.state_ino = st.st_ino;
        msg_init(&msg, SBX__MSG_TYPE__MSG_IMPORT_REQUEST, &req);
        return wire_send(sock, &msg, 0, NULL, 0);
}

/* sb's record, with its layer 0 owned by "original". */
static int sandbox_record(Server *s, const Sandbox *sb) {
        StoreSandbox rec = {
                .owner_uid = sb->owner_uid,
                .source_dir = sb->source_dir,
                .memory_bytes = sb->memory_bytes,
                .pids_max = sb->pids_max,
                .cpu_weight = sb->cpu_weight,
                .created_unix = sb->created_unix,
        };

        strlcpy(rec.egress, egress_policy_to_string(sb->egress), sizeof(rec.egress));
        strlcpy(rec.id, sb->id, sizeof(rec.id));
        strlcpy(rec.name, sb->name, sizeof(rec.name));
        return store_sandbox_insert(s->store, &rec, "original");
}

/* The answer to the client that asked for a sandbox (sb NULL: err and why say why not). */
static void import_answer(Server *s, Import *imp, const Sandbox *sb, const Sbx__ImportResult *result, int err,
                          const char *why) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__SandboxInfo info = SBX__SANDBOX_INFO__INIT;

        if (err < 0) {
                pending_answer_error(s, &imp->creator, err, "%s", why);
                return;
        }
        sandbox_info(sb, &info);
        info.unreadable = result->unreadable;
        info.n_unreadable_paths = result->n_unreadable_paths;
        info.unreadable_paths = result->unreadable_paths;
        msg_reply_set(&reply, SBX__REPLY__BODY_SANDBOX, &info);
        pending_answer(s, &imp->creator, &reply);
}

static void import_free(Server *s, Import *imp) {
        pending_stop(&imp->creator);
        server_unwatch(s, &imp->pidfd_src);
        safe_close(imp->sock);
        TAILQ_REMOVE(&s->imports, imp, link);
        free(imp);
}

/* The helper is done: the sandbox is recorded and goes live, or its directory goes. */
static void import_finish(Server *s, Import *imp, int err, const char *why, const Sbx__ImportResult *res) {
        Sandbox *sb = TAKE_PTR(imp->sandbox);
        char reason[600];

        if (err >= 0) {
                err = sandbox_record(s, sb);
                if (err < 0) {
                        snprintf(reason, sizeof(reason), "cannot record the sandbox: %s", strerror(-err));
                        why = reason;
                }
        }
        if (err < 0) {
                log_error("Failed to create sandbox '%s' from '%s': %s", sb->name, sb->source_dir, why);
                sandbox_files_remove(s, sb);
                import_answer(s, imp, NULL, NULL, err, why);
                sandbox_free(sb);
                sb = NULL;
        } else {
                TAILQ_INSERT_TAIL(&s->sandboxes, sb, link);
                log_info("Created sandbox '%s' (%s) from '%s' for uid %u: %u entries, %u the owner may not read "
                         "left out",
                         sb->name, sb->id, sb->source_dir, sb->owner_uid, res->entries, res->unreadable);
                import_answer(s, imp, sb, res, 0, NULL);
        }
        if (imp->made)
                imp->made(s, sb, err, why, imp->userdata);
        import_free(s, imp);
}

static void import_dispatch(Server *s, EventSource *src, uint32_t events) {
        Import *imp = container_of(src, Import, pidfd_src);
        _cleanup_msg_ Sbx__Msg *m = NULL;
        siginfo_t si = {};
        char why[160];
        uint32_t seq;
        int r;

        if (waitid((idtype_t) P_PIDFD, (id_t) src->fd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return; /* not gone yet */
        /* Its answer, if it gave one, waits in the socket. */
        r = wire_recv(imp->sock, &m, &seq, NULL, NULL);
        if (r >= 0 && m->type == SBX__MSG_TYPE__MSG_IMPORT_RESULT) {
                const Sbx__ImportResult *res = m->import_result;
                import_finish(s, imp, res->err < 0 ? res->err : 0, res->errmsg, res);
                return;
        }
        if (imp->timed_out) {
                snprintf(why, sizeof(why), "the import did not finish within %u s (import_timeout_seconds in "
                         "sbxd.conf); nothing of it is kept", s->cfg.import_timeout_seconds);
                import_finish(s, imp, -ETIMEDOUT, why, NULL);
                return;
        }
        snprintf(why, sizeof(why), "the import helper (sbx-worker --import) ended without an answer (%s %d)",
                 si.si_code == CLD_EXITED ? "exit status" : "signal", si.si_status);
        import_finish(s, imp, -EIO, why, NULL);
}

unsigned long long imports_next_deadline(Server *s) {
        unsigned long long next = ~0ull;
        Import *imp;

        TAILQ_FOREACH(imp, &s->imports, link)
                if (!imp->timed_out)
                        next = MIN(next, imp->deadline_usec);
        return next;
}

void imports_run_deadlines(Server *s) {
        unsigned long long now = now_usec();
        Import *imp;

        TAILQ_FOREACH(imp, &s->imports, link) {
                if (imp->timed_out || imp->deadline_usec > now)
                        continue;
                log_warning("Import of sandbox '%s' from '%s' still runs after %u s (import_timeout_seconds): "
                            "killing it", imp->sandbox->name, imp->sandbox->source_dir,
                            s->cfg.import_timeout_seconds);
                /* Its pidfd turns readable once it is gone: import_dispatch answers. */
                imp->timed_out = true;
                if (syscall(SYS_pidfd_send_signal, imp->pidfd_src.fd, SIGKILL, NULL, 0) < 0)
                        log_warning_errno(-errno, "Failed to kill the import helper of '%s': %m", imp->sandbox->name);
        }
}

static void import_abandon(Server *s, Pending *p, bool cancelled) {
        /* The import goes on; nobody waits for its answer any more. */
}

static int import_start(Server *s, Sandbox *sb, Client *c, uint32_t seq, SandboxMade made, void *userdata,
                        char *errmsg, size_t errmsg_size) {
        _cleanup_close_ int pidfd = -EBADF, mine = -EBADF, theirs = -EBADF;
        ImportExec a = { .exe = s->worker_exe_fd, .layers = sb->layers_fd };
        Import *imp;
        int pair[2], r;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        mine = pair[0];
        a.sock = theirs = pair[1];
        pid = clone_vfork(exec_import, 0, &a, &pidfd);
        if (pid < 0 || a.err < 0) {
                r = pid < 0 ? (int) pid : a.err;
                if (pid > 0)
                        (void) waitid((idtype_t) P_PIDFD, (id_t) pidfd, &(siginfo_t) {}, WEXITED);
                snprintf(errmsg, errmsg_size, "cannot start the import helper (sbx-worker --import): %s",
                         strerror(-r));
                return r;
        }
        theirs = safe_close(theirs);
        imp = calloc(1, sizeof(*imp));
        r = imp ? import_send(s, sb, mine) : -ENOMEM;
        if (r >= 0)
                r = server_watch(s, &imp->pidfd_src, pidfd, EPOLLIN);
        if (r < 0) {
                pidfd_kill_wait(pidfd);
                (void) waitid((idtype_t) P_PIDFD, (id_t) pidfd, &(siginfo_t) {}, WEXITED);
                free(imp);
                snprintf(errmsg, errmsg_size, "cannot hand the import to its helper: %s", strerror(-r));
                return r;
        }
        pidfd = -EBADF; /* watched */
        imp->pidfd_src.dispatch = import_dispatch;
        imp->sock = TAKE_FD(mine);
        imp->sandbox = sb;
        imp->made = made;
        imp->userdata = userdata;
        imp->deadline_usec = now_usec() + s->cfg.import_timeout_seconds * 1000000ull;
        if (c)
                pending_start(&imp->creator, c, seq, import_abandon);
        TAILQ_INSERT_TAIL(&s->imports, imp, link);
        return 0;
}

static bool name_taken(Server *s, const char *name) {
        Import *imp;

        if (sandbox_find(s, name))
                return true;
        TAILQ_FOREACH(imp, &s->imports, link)
                if (strcmp(imp->sandbox->name, name) == 0)
                        return true;
        return false;
}

static int create_check(Server *s, const SandboxSpec *spec, char *errmsg, size_t errmsg_size) {
        const char *name = spec->name, *source_dir = spec->source_dir;
        unsigned n = 0;
        Sandbox *sb;
        Import *imp;
        int r;

        if (!name_is_valid(name)) {
                snprintf(errmsg, errmsg_size,
                         "invalid sandbox name '%.80s': use 1-%u of A-Z a-z 0-9 . _ -, not starting with . or -",
                         name, SBX_NAME_MAX);
                return -EINVAL;
        }
        if (name_taken(s, name)) {
                snprintf(errmsg, errmsg_size, "sandbox '%s' already exists", name);
                return -EEXIST;
        }
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                n++;
        TAILQ_FOREACH(imp, &s->imports, link)
                n++;
        if (n >= SBX_MAX_SANDBOXES) {
                snprintf(errmsg, errmsg_size, "too many sandboxes (limit %u)", SBX_MAX_SANDBOXES);
                return -ENOSPC;
        }
        r = owner_quota_check(s, "owner_sandboxes_max", spec->owner_uid, 1, errmsg, errmsg_size);
        if (r < 0)
                return r;
        if (source_dir && source_dir[0] != '/') {
                snprintf(errmsg, errmsg_size, "source directory must be an absolute path");
                return -EINVAL;
        }
        if (spec->egress && spec->egress[0] && egress_policy_from_string(spec->egress, &(EgressPolicy) { 0 }) < 0) {
                char why[EGRESS_ERROR_MAX];

                egress_policy_error(spec->egress, why);
                snprintf(errmsg, errmsg_size, "%s", why);
                return -EINVAL;
        }
        if (spec->image && spec->image[0] && !image_exists(s, spec->image)) {
                snprintf(errmsg, errmsg_size, "image '%.64s' has no definition in %s (sbxctl image list shows the images)",
                         spec->image, s->cfg.images_dir);
                return -ENOENT;
        }
        return 0;
}

/* A sandbox that was being made and is not: its files (and so its host ids) go. */
static void sandbox_abandon(Server *s, Sandbox *sb) {
        sandbox_files_remove(s, sb);
        sandbox_free(sb);
}

/* A new sandbox of spec with its id, host ids and directory, not yet recorded. */
static int sandbox_begin(Server *s, const SandboxSpec *spec, Sandbox **ret, char *errmsg, size_t errmsg_size) {
        char hex[17];
        Sandbox *sb;
        int r;

        r = create_check(s, spec, errmsg, errmsg_size);
        if (r >= 0)
                r = random_hex(hex, 16);
        if (r < 0)
                return r;
        sb = sandbox_new(spec->source_dir ?: "");
        if (!sb)
                return -ENOMEM;
        snprintf(sb->id, sizeof(sb->id), "sb-%s", hex);
        strlcpy(sb->name, spec->name, sizeof(sb->name));
        sb->owner_uid = spec->owner_uid;
        sb->memory_bytes = spec->memory_bytes ?: s->cfg.default_memory_bytes;
        sb->pids_max = spec->pids_max ?: s->cfg.default_pids_max;
        sb->cpu_weight = spec->cpu_weight ?: SBX_CPU_WEIGHT_DEFAULT;
        sb->disk_bytes = spec->disk_bytes;
        if (!spec->egress || egress_policy_from_string(spec->egress, &sb->egress) < 0)
                sb->egress = EGRESS_NONE; /* "" (create_check refused any other name) */
        sb->created_unix = time(NULL);
        /* A half-created sandbox of an earlier crash has no record: free its ids. */
        (void) sandbox_ranges_collect(s);
        r = range_allocate(s, sb, errmsg, errmsg_size);
        if (r < 0) {
                sandbox_free(sb);
                return r;
        }
        strlcpy(sb->image, spec->image && spec->image[0] ? spec->image : SBX_IMAGE_DEFAULT_NAME, sizeof(sb->image));
        r = sandbox_open_dirs(s, sb, true);
        if (r < 0)
                snprintf(errmsg, errmsg_size, "cannot create the sandbox directory: %s", strerror(-r));
        if (r >= 0 && strcmp(sb->image, SBX_IMAGE_DEFAULT_NAME) != 0) {
                r = write_file_atomic_at(sb->dirfd, "image", sb->image, strlen(sb->image), 0644);
                if (r < 0)
                        snprintf(errmsg, errmsg_size, "cannot record the sandbox's image: %s", strerror(-r));
        }
        if (r < 0) {
                sandbox_abandon(s, sb);
                return r;
        }
        *ret = sb;
        return 0;
}

int sandbox_create(Server *s, const Sbx__SandboxCreate *req, Client *c, uint32_t seq, char *errmsg,
                   size_t errmsg_size) {
        Sandbox *sb;
        int r;

        r = sandbox_begin(s, &(SandboxSpec) {
                .name = req->name,
                .source_dir = req->source_dir,
                .image = req->image,
                .owner_uid = req->has_owner ? req->owner_uid : c->uid,
                .memory_bytes = req->memory_bytes,
                .pids_max = req->pids_max,
                .cpu_weight = req->cpu_weight,
                .egress = req->egress,
        }, &sb, errmsg, errmsg_size);
        if (r < 0)
                return r;
        r = import_start(s, sb, c, seq, NULL, NULL, errmsg, errmsg_size);
        if (r < 0) {
                sandbox_abandon(s, sb);
                return r;
        }
        log_info("Creating sandbox '%s' (%s) from '%s' for uid %u", sb->name, sb->id, sb->source_dir, sb->owner_uid);
        return 0;
}

/* Layer 0 of a sandbox with an empty workspace, and its record. */
static int sandbox_create_empty(Server *s, Sandbox *sb) {
        _cleanup_close_ int empty = -EBADF;
        int r;

        if (mkdirat(sb->dirfd, "empty", 0755) < 0)
                return -errno;
        empty = openat(sb->dirfd, "empty", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = empty < 0 ? -errno : layer_create(sb->layers_fd, 0, empty, (int) sb->uid_base, 0, NULL, NULL, NULL);
        (void) unlinkat(sb->dirfd, "empty", AT_REMOVEDIR);
        if (r < 0)
                return r;
        return sandbox_record(s, sb);
}

int sandbox_create_for_claim(Server *s, const SandboxSpec *spec, SandboxMade made, void *userdata, char *errmsg,
                             size_t errmsg_size) {
        Sandbox *sb;
        int r;

        r = sandbox_begin(s, spec, &sb, errmsg, errmsg_size);
        if (r < 0)
                return r;
        if (spec->source_dir)
                r = import_start(s, sb, NULL, 0, made, userdata, errmsg, errmsg_size);
        else {
                r = sandbox_create_empty(s, sb);
                if (r < 0)
                        snprintf(errmsg, errmsg_size, "cannot create the sandbox's empty workspace: %s", strerror(-r));
        }
        if (r < 0) {
                sandbox_abandon(s, sb);
                return r;
        }
        if (!spec->source_dir) {
                TAILQ_INSERT_TAIL(&s->sandboxes, sb, link);
                log_info("Created sandbox '%s' (%s) with an empty workspace", sb->name, sb->id);
                made(s, sb, 0, NULL, userdata);
        }
        return 0;
}

void imports_free(Server *s) {
        Import *imp;

        while ((imp = TAILQ_FIRST(&s->imports))) {
                pidfd_kill_wait(imp->pidfd_src.fd);
                (void) waitid((idtype_t) P_PIDFD, (id_t) imp->pidfd_src.fd, &(siginfo_t) {}, WEXITED);
                sandbox_files_remove(s, imp->sandbox);
                imp->sandbox = sandbox_free(imp->sandbox);
                import_free(s, imp);
        }
}

/* ---- deletion ------------------------------------------------------------------- */

int sandbox_delete(Server *s, Sandbox *sb) {
        WorkspaceSession *ws, *next;
        StoreIdList commands = {};
        int r;

        /* Its works off the loop are cancelled: a running one finishes on its own copies. */
        work_lane_cancel(s->work, &sb->lane);
        TAILQ_FOREACH_SAFE(ws, &s->sessions, link, next)
                if (ws->sandbox == sb)
                        session_destroy(s, ws);
        /* Their overlays hold the layers about to be removed. */
        sessions_wait_ended(s, sb);
        r = store_sandbox_delete(s->store, sb->id, store_id_list_add, &commands);
        if (r < 0) {
                free(commands.ids);
                return r;
        }
        TAILQ_REMOVE(&s->sandboxes, sb, link);
        transcripts_uncount(s, NULL, sb->transcript_bytes, sb->transcript_files);
        /* The files after the commit; what a crash leaves of them, sbxctl gc removes. */
        for (size_t i = 0; i < commands.n; i++) {
                int k = transcript_remove(s->transcripts_fd, commands.ids[i]);
                if (k < 0 && k != -ENOENT)
                        log_warning_errno(k, "Failed to remove the transcript of %s, ignoring: %m", commands.ids[i]);
        }
        sandbox_files_remove(s, sb);
        log_info("Deleted sandbox '%s' (%s) with its %zu commands", sb->name, sb->id, commands.n);
        free(commands.ids);
        sandbox_free(sb);
        return 0;
}

unsigned sandbox_dirs_collect(Server *s) {
        _cleanup_(closedirp) DIR *d = NULL;
        unsigned removed = 0;
        Import *imp;

        d = opendir_at(s->sandboxes_fd);
        if (!d)
                return 0;
        for (struct dirent *de; (de = readdir(d));) {
                bool importing = false;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                TAILQ_FOREACH(imp, &s->imports, link)
                        importing |= strcmp(imp->sandbox->id, de->d_name) == 0;
                /* A record of that id (or, not yet renamed, of that name) keeps it. */
                if (importing || store_sandbox_known(s->store, de->d_name) != 0)
                        continue;
                int r = tree_remove_at(s->sandboxes_fd, de->d_name);
                if (r >= 0)
                        removed++;
                else
                        log_warning_errno(r, "Failed to remove sandboxes/%s, ignoring: %m", de->d_name);
        }
        return removed;
}

void sandbox_info(const Sandbox *sb, Sbx__SandboxInfo *ret) {
        ret->id = (char *) sb->id;
        ret->name = (char *) sb->name;
        ret->owner_uid = sb->owner_uid;
        ret->source_dir = sb->source_dir;
        ret->memory_bytes = sb->memory_bytes;
        ret->pids_max = sb->pids_max;
        ret->cpu_weight = sb->cpu_weight;
        ret->uid_base = sb->uid_base;
        ret->uid_count = sb->uid_count;
        ret->layer_count = sb->top_layer + 1;
        ret->live_sessions = sb->live_sessions - sb->spares;
        ret->created_unix = sb->created_unix;
        ret->image = (char *) sb->image;
        ret->egress = (char *) egress_policy_to_string(sb->egress);
}

void sandboxes_free(Server *s) {
        Sandbox *sb;
        while ((sb = TAILQ_FIRST(&s->sandboxes))) {
                TAILQ_REMOVE(&s->sandboxes, sb, link);
                sandbox_free(sb);
        }
}
