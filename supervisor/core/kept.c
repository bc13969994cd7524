#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/claim.h"
#include "core/kept.h"
#include "data/layer.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "os/livemount.h"
#include "os/workmount.h"
#include "sbx-limits.h"

#define KEPT_DIR "kept"
/* A claim's session keeps its root's upper and its /tmp too (core/claim.h). */
#define KEPT_SYS "sys"
#define KEPT_TMP "tmp"
#define KEPT_WORK "work"
#define KEPT_TREES 4                    /* upper, sys, tmp, work */
/* The session tmpfs holds ws/upper and sys/upper side by side (worker/session-init.c). */
#define SYS_UPPER_FROM_WS_UPPER "../../sys/upper"

/* Where kept sessions of sb are: STATE/sandboxes/ID/kept, RUN_DIR/kept/ID
 * (the state filesystem was full), or RUN_DIR/live/ID (their own tmpfs). */
typedef enum KeptWhere { KEPT_IN_STATE, KEPT_IN_RUN_DIR, KEPT_LIVE } KeptWhere;

/* The trees of a kept session, in its directory: a copy's, and a live one's
 * (its session tmpfs at s, a claim's /tmp at tmp, a box's /work tmpfs at work). */
static const char *const copy_names[KEPT_TREES] = { "upper", KEPT_SYS, KEPT_TMP, KEPT_WORK };
static const char *const live_names[KEPT_TREES] = { LIVE_SESSION "/ws/upper", LIVE_SESSION "/sys/upper", LIVE_TMP,
                                                    LIVE_WORK "/" WORK_UPPER };

static int dir_open(int dirfd, const char *name, bool create) {
        int fd;

        if (create)
                return dir_make_open_at(dirfd, name, 0700, NULL);
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int kept_dir_open(Server *s, const Sandbox *sb, KeptWhere where, bool create, int *ret) {
        _cleanup_close_ int run = -EBADF, top = -EBADF;
        int fd;

        if (where == KEPT_IN_STATE)
                fd = dir_open(sb->dirfd, KEPT_DIR, create);
        else {
                run = open(s->cfg.run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (run < 0)
                        return -errno;
                top = dir_open(run, where == KEPT_LIVE ? LIVE_DIR : KEPT_DIR, create);
                if (top < 0)
                        return top;
                fd = dir_open(top, sb->id, create);
        }
        if (fd < 0)
                return fd;
        *ret = fd;
        return 0;
}

#define META_MAX 256
/* "id ID\npolicy publish|destroy\ncreated N\nsquashed N\ntop N\n", in buf of META_MAX; its length */
static size_t meta_format(const WorkspaceSession *ws, char *buf) {
        int n = snprintf(buf, META_MAX, "id %s\npolicy %s\ncreated %" PRId64 "\nsquashed %" PRIu32 "\ntop %" PRIu32 "\n",
                         ws->id, ws->publish_policy ? "publish" : "destroy", ws->created_unix, ws->base.squashed,
                         ws->base.top);

        return (size_t) MIN(n, META_MAX - 1);
}

/* Copy the tree under src into a new directory name below dirfd. */
static int copy_into(int dirfd, const char *name, int src) {
        _cleanup_close_ int dst = dir_open(dirfd, name, true);

        if (dst < 0)
                return dst;
        return tree_copy(src, dst, -1, 0, NULL, NULL, NULL);
}

/* Copy the upper (and a claim's sys upper, /tmp and /work upper, when >= 0)
 * and the note (meta, len bytes) to kept/.tmp-ID, sync, then name it kept/ID. */
static int save_into(int kept, const char *id, const int trees[KEPT_TREES], const char *meta, size_t len) {
        _cleanup_close_ int tmp = -EBADF;
        char tmp_name[48];
        int r = 0;

        snprintf(tmp_name, sizeof(tmp_name), ".tmp-%s", id);
        (void) tree_remove_at(kept, tmp_name);
        r = dir_open(kept, tmp_name, true);
        if (r < 0)
                return r;
        tmp = r;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(copy_names); i++)
                if (trees[i] >= 0)
                        r = copy_into(tmp, copy_names[i], trees[i]);
        if (r >= 0)
                r = write_file_atomic_at(tmp, "meta", meta, len, 0600);
        if (r >= 0 && syncfs(tmp) < 0)
                r = -errno;
        if (r >= 0 && renameat(kept, tmp_name, kept, id) < 0)
                r = -errno;
        if (r < 0) {
                (void) tree_remove_at(kept, tmp_name);
                return r;
        }
        (void) fsync(kept);
        return 0;
}

/* save_into the kept directory of where, with ws's note. */
static int save(Server *s, WorkspaceSession *ws, const int trees[KEPT_TREES], KeptWhere where) {
        _cleanup_close_ int kept = -EBADF;
        char meta[META_MAX];
        int r = kept_dir_open(s, ws->sandbox, where, true, &kept);

        if (r < 0)
                return r;
        return save_into(kept, ws->id, trees, meta, meta_format(ws, meta));
}

/* The directory path below dirfd, following no symlink, not above dirfd. */
static int subdir_open(int dirfd, const char *path) {
        return openat2_fd(dirfd, path, O_RDONLY | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
}

/* Keep ws in place: sbxd's clones of its tmpfs (and a claim's /tmp, and a
 * box's /work upper tmpfs) mounted at RUN_DIR/live/SANDBOX/WS/{s,tmp,work} in
 * the host's mount namespace, with the note beside them. No copy, no sync:
 * RUN_DIR outlives sbxd (not a reboot: sbxd --save-kept copies them to the
 * state directory before one, sbxd(8)). */
static int live_save(Server *s, WorkspaceSession *ws) {
        const struct { const char *name; int fd; } mounts[] = {
                { LIVE_SESSION, ws->live_fds[0] }, { LIVE_TMP, ws->live_fds[1] }, { LIVE_WORK, ws->work_live_fd },
        };
        _cleanup_close_ int live = -EBADF, dir = -EBADF;
        char path[PATH_MAX], meta[META_MAX];
        int r = kept_dir_open(s, ws->sandbox, KEPT_LIVE, true, &live);

        if (r < 0)
                return r;
        if (mkdirat(live, ws->id, 0700) < 0)
                return -errno;
        dir = openat(live, ws->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                r = -errno;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(mounts); i++) {
                if (mounts[i].fd < 0)
                        continue;
                if (mkdirat(dir, mounts[i].name, 0700) < 0)
                        r = -errno;
                if (r >= 0)
                        r = live_session_path(s->cfg.run_dir, ws->sandbox->id, ws->id, mounts[i].name, path);
                if (r >= 0)
                        r = live_mount_attach(mounts[i].fd, path);
        }
        if (r >= 0)
                r = write_file_atomic_at(dir, "meta", meta, meta_format(ws, meta), 0600);
        if (r < 0)
                (void) live_session_remove(s->cfg.run_dir, ws->sandbox->id, live, ws->id);
        return r;
}

/* A claim's root upper as set-up made it: only its own empty /root and /run
 * (worker/session-init.c), nothing the claim wrote. */
static bool sys_upper_untouched(int sys) {
        _cleanup_(closedirp) DIR *d = opendir_at(sys);

        if (!d)
                return false;
        for (struct dirent *de; (de = readdir(d));) {
                _cleanup_close_ int fd = -EBADF;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (strcmp(de->d_name, "root") != 0 && strcmp(de->d_name, "run") != 0)
                        return false;
                fd = openat(sys, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || tree_is_empty(fd) <= 0)
                        return false;
        }
        return true;
}

/* Nothing to keep of a claim's session: no file in its workspace, root, /tmp or /work upper. */
static bool claim_trees_untouched(const int trees[KEPT_TREES]) {
        return tree_is_empty(trees[0]) > 0 && (trees[1] < 0 || sys_upper_untouched(trees[1])) &&
               (trees[2] < 0 || tree_is_empty(trees[2]) > 0) && (trees[3] < 0 || tree_is_empty(trees[3]) > 0);
}

static void trees_close(int (*trees)[KEPT_TREES]) {
        for (size_t i = 0; i < KEPT_TREES; i++)
                safe_close((*trees)[i]);
}

void kept_session_save(Server *s, WorkspaceSession *ws) {
        _cleanup_(trees_close) int trees[KEPT_TREES] = { -EBADF, -EBADF, -EBADF, -EBADF };
        bool claim = ws->sandbox->claim != NULL;
        int r;

        /* A warm claim is nobody's yet: nothing of it to keep. */
        if (sandbox_is_warm_claim(ws->sandbox))
                return;

        if (ws->kept_fd >= 0) {
                /* Already a kept copy, still not finalized: it stays. */
                ws->kept_fd = safe_close(ws->kept_fd);
                return;
        }
        /* Being filled from a kept copy: that copy stays. */
        if (ws->automatic || ws->spare || ws->upper_fd < 0 || ws->state == SESSION_DEAD ||
            (ws->seed && ws->state != SESSION_READY))
                return;
        /* A claim's /tmp is a mount of the session's namespace: held open before it goes with the worker. */
        if (claim && ws->root_fd >= 0 &&
            (trees[2] = openat(ws->root_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                log_warning_errno(-errno, "Cannot read /tmp of claim session %s, it is lost: %m", ws->id);
        /* A box's /work over its version's layers: the upper of that overlay, its own tmpfs. */
        if (ws->work_upper_fd >= 0 &&
            (trees[3] = openat(ws->work_upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                log_warning_errno(-errno, "Cannot read /work of claim session %s, it is lost: %m", ws->id);
        session_stop_worker(s, ws);
        trees[0] = openat(ws->upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (trees[0] < 0 || (!claim && tree_is_empty(trees[0]) != 0)) {
                if (trees[0] < 0)
                        log_error_errno(-errno, "Cannot read the changes of workspace session %s: %m", ws->id);
                return;
        }
        if (claim && (trees[1] = openat(ws->upper_fd, SYS_UPPER_FROM_WS_UPPER,
                                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                log_warning_errno(-errno, "Cannot read the root's changes of claim session %s, they are lost: %m",
                                  ws->id);
        /* Not even a sync of the state filesystem for a claim that wrote nothing. */
        if (claim && claim_trees_untouched(trees))
                return;
        if (ws->live_fds[0] >= 0) {
                r = live_save(s, ws);
                if (r >= 0) {
                        log_info("Kept the changes of workspace session %s of sandbox '%s' in place (%s/" LIVE_DIR
                                 ") until it is finalized", ws->id, ws->sandbox->name, s->cfg.run_dir);
                        return;
                }
                log_warning_errno(r, "Cannot keep workspace session %s of sandbox '%s' in place (%m), copying it",
                                  ws->id, ws->sandbox->name);
        }
        r = save(s, ws, trees, KEPT_IN_STATE);
        if (r < 0) {
                log_warning_errno(r, "Cannot keep the changes of workspace session %s of sandbox '%s' in %s (%m), "
                                  "keeping them in %s", ws->id, ws->sandbox->name, s->cfg.state_dir, s->cfg.run_dir);
                r = save(s, ws, trees, KEPT_IN_RUN_DIR);
        }
        if (r < 0)
                log_error_errno(r, "Cannot keep the changes of workspace session %s of sandbox '%s': %m; they are lost",
                                ws->id, ws->sandbox->name);
        else
                log_info("Kept the changes of workspace session %s of sandbox '%s' until it is finalized", ws->id,
                         ws->sandbox->name);
}

typedef struct Meta {
        char id[33];
        char policy[16];
        int64_t created;
        uint32_t squashed, top;
} Meta;

static int meta_read(int dirfd, Meta *ret) {
        _cleanup_free_ char *text = NULL;
        size_t len;
        int r = read_file_bounded_at(dirfd, "meta", 1024, &text, &len);

        if (r < 0)
                return r;
        if (sscanf(text, "id %32s\npolicy %15s\ncreated %" SCNd64 "\nsquashed %" SCNu32 "\ntop %" SCNu32, ret->id,
                   ret->policy, &ret->created, &ret->squashed, &ret->top) != 5)
                return -EBADMSG;
        return 0;
}

/* One kept session: back, or (left half written by a crash, or of no use) gone. */
static int load_one(Server *s, Sandbox *sb, int kept, const char *name, KeptWhere where) {
        _cleanup_close_ int dir = -EBADF, upper = -EBADF;
        Meta m;
        int r;

        dir = openat(kept, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        r = meta_read(dir, &m);
        if (r >= 0 && (strcmp(m.id, name) != 0 || m.squashed > m.top || m.top > sb->top_layer))
                r = -EBADMSG;
        if (r >= 0 && (upper = subdir_open(dir, where == KEPT_LIVE ? live_names[0] : copy_names[0])) < 0)
                r = upper;
        if (r < 0)
                return r;
        int kept_fd = fcntl(kept, F_DUPFD_CLOEXEC, 3);
        if (kept_fd < 0)
                return -errno;
        r = session_restore(s, sb, m.id, strcmp(m.policy, "publish") == 0, m.created, m.squashed, m.top,
                            TAKE_FD(upper), kept_fd, where == KEPT_LIVE);
        if (r >= 0)
                log_info("Workspace session %s of sandbox '%s' is back, stopped, with its kept changes%s", m.id,
                         sb->name, where == KEPT_LIVE ? " (in place)" : "");
        return r;
}

static int load_dir(Server *s, Sandbox *sb, KeptWhere where) {
        _cleanup_(closedirp) DIR *d = NULL;
        int kept, r;

        r = kept_dir_open(s, sb, where, false, &kept);
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        d = fdopendir(kept);
        if (!d) {
                safe_close(kept);
                return -errno;
        }
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int k = de->d_name[0] == '.' ? -EBADMSG : load_one(s, sb, dirfd(d), de->d_name, where);
                if (k == -ENOMEM)
                        return k;
                if (k < 0) {
                        log_warning_errno(k, "Removing kept changes '%s' of sandbox '%s' that cannot come back: %m",
                                          de->d_name, sb->name);
                        if (where == KEPT_LIVE)
                                (void) live_session_remove(s->cfg.run_dir, sb->id, dirfd(d), de->d_name);
                        else
                                (void) tree_remove_at(dirfd(d), de->d_name);
                }
        }
        return errno ? -errno : 0;
}

/* Copy each entry of from over dst: a directory both have is merged (its
 * entries copied into the one dst has: set-up may have looked it up, and
 * overlayfs holds on to what it found), anything else is copied anew. */
static int seed_merge(int from, int dst, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;

        if (depth > SBX_TREE_DEPTH_MAX)
                return -ELOOP;
        d = opendir_at(from);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                _cleanup_close_ int sub_from = -EBADF, sub_dst = -EBADF;
                struct stat a, b;
                int r;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(from, de->d_name, &a, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (fstatat(dst, de->d_name, &b, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT)
                                return -errno;
                } else if (S_ISDIR(a.st_mode) && S_ISDIR(b.st_mode)) {
                        sub_from = openat(from, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        sub_dst = openat(dst, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub_from < 0 || sub_dst < 0)
                                return -errno;
                        r = seed_merge(sub_from, sub_dst, depth + 1);
                        if (r < 0)
                                return r;
                        continue;
                } else if ((r = tree_remove_at(dst, de->d_name)) < 0)
                        return r;
                r = tree_copy_entry(from, dst, de->d_name, 0);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

/* The kept tree name below src, merged into dst_path below dst_at. */
static int seed_tree(int src, const char *name, int dst_at, const char *dst_path) {
        _cleanup_close_ int from = -EBADF, dst = -EBADF;

        from = subdir_open(src, name);
        if (from < 0)
                return from == -ENOENT ? 0 : from;
        dst = openat(dst_at, dst_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dst < 0)
                return -errno;
        return seed_merge(from, dst, 0);
}

int kept_session_seed(const WorkspaceSession *from, int upper_fd, int root_fd) {
        _cleanup_close_ int src = -EBADF;
        int r;

        src = openat(from->kept_fd, from->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return -errno;
        const char *const *names = from->kept_live ? live_names : copy_names;
        r = seed_tree(src, names[0], upper_fd, ".");
        if (r >= 0)
                r = seed_tree(src, names[1], upper_fd, SYS_UPPER_FROM_WS_UPPER);
        if (r >= 0)
                r = seed_tree(src, names[2], root_fd, "tmp");
        return r;
}

int kept_work_seed(const WorkspaceSession *from, int dst_fd) {
        _cleanup_close_ int src = openat(from->kept_fd, from->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (src < 0)
                return -errno;
        return seed_tree(src, (from->kept_live ? live_names : copy_names)[3], dst_fd, ".");
}

int kept_work_mount(const WorkspaceSession *from, int *ret) {
        _cleanup_close_ int src = -EBADF, m = -EBADF;
        struct statx stx;

        if (!from->kept_live)
                return -ENOENT;
        src = openat(from->kept_fd, from->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return -errno;
        /* Only the tmpfs mounted there: never a bind of the run directory's own directory. */
        if (statx(src, LIVE_WORK, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &stx) < 0)
                return -errno;
        if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) || !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
                return -ENOENT;
        m = open_tree(src, LIVE_WORK, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (m < 0)
                return -errno;
        *ret = TAKE_FD(m);
        return 0;
}

int kept_sessions_load(Server *s, Sandbox *sb) {
        static const KeptWhere wheres[] = { KEPT_IN_STATE, KEPT_IN_RUN_DIR, KEPT_LIVE };

        for (size_t i = 0; i < ELEMENTSOF(wheres); i++) {
                int r = load_dir(s, sb, wheres[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A directory stream over the directory name below dirfd (no symlink); NULL with errno set. */
static DIR *dir_stream(int dirfd, const char *name) {
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        return fd < 0 ? NULL : opendir_at(fd);
}

/* The live kept session name below live (RUN_DIR/live/SANDBOX) copied to
 * kept (STATE/sandboxes/SANDBOX/kept) as a stop copies one, then unmounted
 * and removed. A claim's has its /tmp (and a box's its /work upper) mounted
 * beside it. */
static int save_live_one(const char *run_dir, const char *sb_id, int live, int kept, const char *name) {
        _cleanup_(trees_close) int trees[KEPT_TREES] = { -EBADF, -EBADF, -EBADF, -EBADF };
        _cleanup_close_ int dir = -EBADF;
        _cleanup_free_ char *meta = NULL;
        size_t len;
        int r;

        dir = openat(live, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        /* No note: a stop that did not finish attaching it; nothing of it to keep. */
        r = read_file_bounded_at(dir, "meta", META_MAX, &meta, &len);
        if (r == -ENOENT)
                return live_session_remove(run_dir, sb_id, live, name);
        if (r < 0)
                return r;
        trees[0] = subdir_open(dir, live_names[0]);
        if (trees[0] < 0)
                return trees[0];
        if (faccessat(dir, LIVE_TMP, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
                trees[1] = subdir_open(dir, live_names[1]);
                trees[2] = subdir_open(dir, live_names[2]);
                if (trees[1] < 0 || trees[2] < 0)
                        return trees[1] < 0 ? trees[1] : trees[2];
        }
        if (faccessat(dir, LIVE_WORK, F_OK, AT_SYMLINK_NOFOLLOW) == 0 && (trees[3] = subdir_open(dir, live_names[3])) < 0)
                return trees[3];
        r = save_into(kept, name, (const int *) trees, meta, len);
        if (r < 0)
                return r;
        trees_close(&trees);
        return live_session_remove(run_dir, sb_id, live, name);
}

/* Every live kept session of the sandbox sb_id (its directory below top, RUN_DIR/live). */
static int save_live_sandbox(const Config *cfg, int state, int top, const char *sb_id) {
        _cleanup_close_ int sb = -EBADF, kept = -EBADF;
        _cleanup_(closedirp) DIR *d = NULL;
        char path[PATH_MAX];
        int r = 0;

        if (snprintf(path, sizeof(path), "sandboxes/%s", sb_id) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        sb = openat2_fd(state, path, O_RDONLY | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        kept = sb < 0 ? sb : dir_open(sb, KEPT_DIR, true);
        d = dir_stream(top, sb_id);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                int k;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                /* Its sandbox is gone: so is what it kept. */
                if (sb == -ENOENT)
                        k = live_session_remove(cfg->run_dir, sb_id, dirfd(d), de->d_name);
                else
                        k = kept < 0 ? kept : save_live_one(cfg->run_dir, sb_id, dirfd(d), kept, de->d_name);
                if (k < 0) {
                        log_error_errno(k, "Cannot save kept workspace session %s of sandbox %s to %s: %m; it stays "
                                        "in %s/" LIVE_DIR, de->d_name, sb_id, cfg->state_dir, cfg->run_dir);
                        r = k;
                } else
                        log_info("Saved kept workspace session %s of sandbox %s", de->d_name, sb_id);
        }
        if (errno)
                return -errno;
        if (kept >= 0)
                (void) fsync(kept);
        if (r >= 0)
                (void) unlinkat(top, sb_id, AT_REMOVEDIR);
        return r;
}

int kept_save_live(const Config *cfg) {
        _cleanup_close_ int state = -EBADF, run = -EBADF;
        _cleanup_(closedirp) DIR *d = NULL;
        int r = 0;

        state = open(cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        run = open(cfg->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (state < 0 || run < 0)
                return -errno;
        d = dir_stream(run, LIVE_DIR);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int k = save_live_sandbox(cfg, state, dirfd(d), de->d_name);
                if (k < 0)
                        r = k;
        }
        return errno ? -errno : r;
}
