#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/claim.h"
#include "core/kept.h"
#include "data/layer.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "sbx-limits.h"

#define KEPT_DIR "kept"
/* A claim's session keeps its root's upper and its /tmp too (core/claim.h). */
#define KEPT_SYS "sys"
#define KEPT_TMP "tmp"
#define KEPT_WORK "work"
#define KEPT_TREES 4                    /* upper, sys, tmp, work */
/* The session tmpfs holds ws/upper and sys/upper side by side (worker/session-init.c). */
#define SYS_UPPER_FROM_WS_UPPER "../../sys/upper"

/* Where kept sessions of sb are: STATE/sandboxes/ID/kept, or (in_run_dir)
 * RUN_DIR/kept/ID; made if create. */
static int dir_open(int dirfd, const char *name, bool create) {
        int fd;

        if (create)
                return dir_make_open_at(dirfd, name, 0700, NULL);
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int kept_dir_open(Server *s, const Sandbox *sb, bool in_run_dir, bool create, int *ret) {
        _cleanup_close_ int run = -EBADF, top = -EBADF;
        int fd;

        if (!in_run_dir)
                fd = dir_open(sb->dirfd, KEPT_DIR, create);
        else {
                run = open(s->cfg.run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (run < 0)
                        return -errno;
                top = dir_open(run, KEPT_DIR, create);
                if (top < 0)
                        return top;
                fd = dir_open(top, sb->id, create);
        }
        if (fd < 0)
                return fd;
        *ret = fd;
        return 0;
}

/* "id ID\npolicy publish|destroy\ncreated N\nsquashed N\ntop N\n" */
static int meta_write(int dirfd, const WorkspaceSession *ws) {
        char buf[256];
        int n = snprintf(buf, sizeof(buf), "id %s\npolicy %s\ncreated %" PRId64 "\nsquashed %" PRIu32 "\ntop %" PRIu32 "\n",
                         ws->id, ws->publish_policy ? "publish" : "destroy", ws->created_unix, ws->base.squashed,
                         ws->base.top);

        return write_file_atomic_at(dirfd, "meta", buf, (size_t) n, 0600);
}

/* Copy the tree under src into a new directory name below dirfd. */
static int copy_into(int dirfd, const char *name, int src) {
        _cleanup_close_ int dst = dir_open(dirfd, name, true);

        if (dst < 0)
                return dst;
        return tree_copy(src, dst, -1, 0, NULL, NULL, NULL);
}

/* Copy the upper (and a claim's sys upper, /tmp and /work upper, when >= 0) and the note
 * to kept/.tmp-WS, sync, then name it kept/WS. */
static int save(Server *s, WorkspaceSession *ws, const int trees[KEPT_TREES], bool in_run_dir) {
        static const char *const names[KEPT_TREES] = { "upper", KEPT_SYS, KEPT_TMP, KEPT_WORK };
        _cleanup_close_ int kept = -EBADF, tmp = -EBADF;
        char tmp_name[48];
        int r = 0;

        r = kept_dir_open(s, ws->sandbox, in_run_dir, true, &kept);
        if (r < 0)
                return r;
        snprintf(tmp_name, sizeof(tmp_name), ".tmp-%s", ws->id);
        (void) tree_remove_at(kept, tmp_name);
        r = dir_open(kept, tmp_name, true);
        if (r < 0)
                return r;
        tmp = r;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(names); i++)
                if (trees[i] >= 0)
                        r = copy_into(tmp, names[i], trees[i]);
        if (r >= 0)
                r = meta_write(tmp, ws);
        if (r >= 0 && syncfs(tmp) < 0)
                r = -errno;
        if (r >= 0 && renameat(kept, tmp_name, kept, ws->id) < 0)
                r = -errno;
        if (r < 0) {
                (void) tree_remove_at(kept, tmp_name);
                return r;
        }
        (void) fsync(kept);
        return 0;
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
        r = save(s, ws, trees, false);
        if (r < 0) {
                log_warning_errno(r, "Cannot keep the changes of workspace session %s of sandbox '%s' in %s (%m), "
                                  "keeping them in %s", ws->id, ws->sandbox->name, s->cfg.state_dir, s->cfg.run_dir);
                r = save(s, ws, trees, true);
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
static int load_one(Server *s, Sandbox *sb, int kept, const char *name) {
        _cleanup_close_ int dir = -EBADF, upper = -EBADF;
        Meta m;
        int r;

        dir = openat(kept, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        r = meta_read(dir, &m);
        if (r >= 0 && (strcmp(m.id, name) != 0 || m.squashed > m.top || m.top > sb->top_layer))
                r = -EBADMSG;
        if (r >= 0 && (upper = openat(dir, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                r = -errno;
        if (r < 0)
                return r;
        int kept_fd = fcntl(kept, F_DUPFD_CLOEXEC, 3);
        if (kept_fd < 0)
                return -errno;
        r = session_restore(s, sb, m.id, strcmp(m.policy, "publish") == 0, m.created, m.squashed, m.top,
                            TAKE_FD(upper), kept_fd);
        if (r >= 0)
                log_info("Workspace session %s of sandbox '%s' is back, stopped, with its kept changes", m.id,
                         sb->name);
        return r;
}

static int load_dir(Server *s, Sandbox *sb, bool in_run_dir) {
        _cleanup_(closedirp) DIR *d = NULL;
        int kept, r;

        r = kept_dir_open(s, sb, in_run_dir, false, &kept);
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
                int k = de->d_name[0] == '.' ? -EBADMSG : load_one(s, sb, dirfd(d), de->d_name);
                if (k == -ENOMEM)
                        return k;
                if (k < 0) {
                        log_warning_errno(k, "Removing kept changes '%s' of sandbox '%s' that cannot come back: %m",
                                          de->d_name, sb->name);
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

        from = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (from < 0)
                return errno == ENOENT ? 0 : -errno;
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
        r = seed_tree(src, "upper", upper_fd, ".");
        if (r >= 0)
                r = seed_tree(src, KEPT_SYS, upper_fd, SYS_UPPER_FROM_WS_UPPER);
        if (r >= 0)
                r = seed_tree(src, KEPT_TMP, root_fd, "tmp");
        return r;
}

int kept_work_seed(const WorkspaceSession *from, int dst_fd) {
        _cleanup_close_ int src = openat(from->kept_fd, from->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (src < 0)
                return -errno;
        return seed_tree(src, KEPT_WORK, dst_fd, ".");
}

int kept_sessions_load(Server *s, Sandbox *sb) {
        int r = load_dir(s, sb, false);
        return r < 0 ? r : load_dir(s, sb, true);
}
