#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fd-util.h"
#include "data/layer.h"
#include "macro.h"

#define OVL_OPAQUE_XATTR "trusted.overlay.opaque"


static int copy_data(int in, int out) {
        char buf[65536];

        for (;;) {
                ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
                if (n == 0)
                        return 0;
                if (n > 0)
                        continue;
                if (errno == EINTR)
                        continue;
                if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
                        return -errno;
                break;
        }
        for (;;) {
                ssize_t n = loop_read(in, buf, sizeof(buf));
                if (n <= 0)
                        return (int) n;
                int r = loop_write(out, buf, (size_t) n);
                if (r < 0)
                        return r;
        }
}

static int set_owner_mode_times(int fd, const struct stat *st, int force_uid, unsigned flags) {
        uid_t uid = force_uid >= 0 ? (uid_t) force_uid : st->st_uid;
        gid_t gid = force_uid >= 0 ? (gid_t) force_uid : st->st_gid;
        struct timespec ts[2] = { st->st_atim, st->st_mtim };
        mode_t mode = st->st_mode & 07777;

        /* A directory's setgid bit only picks the group of new files: it stays. */
        if ((flags & TREE_COPY_CLEAR_SETID) && !S_ISDIR(st->st_mode))
                mode &= ~(mode_t) (S_ISUID | S_ISGID);
        if (fchown(fd, uid, gid) < 0)
                return -errno;
        /* After chown, which clears set-id bits. */
        if (fchmod(fd, mode) < 0)
                return -errno;
        if (futimens(fd, ts) < 0)
                return -errno;
        return 0;
}

typedef struct CopyContext {
        int force_uid;
        unsigned flags;
        const TreeSource *source;
        uid_t own_uid;                  /* the filesystem ids to come back to from the source's */
        gid_t own_gid;
        TreeReport *report;             /* its where is the path of the entry being copied */
} CopyContext;

/* Append name to the path being copied (unless it would not fit); returns the
 * length to cut it back to. */
static size_t path_push(TreeReport *rep, const char *name) {
        size_t len = strlen(rep->where), n = strlen(name), sep = len ? 1 : 0;

        if (len + sep + n <= SBX_PATH_MAX) {
                rep->where[len] = '/';
                memcpy(rep->where + len + sep, name, n + 1);
        }
        return len;
}

static int set_fs_ids(uid_t uid, gid_t gid) {
        (void) setfsgid(gid);
        (void) setfsuid(uid);
        /* Both return the previous id whether they worked or not: ask again. */
        if ((uid_t) setfsuid(uid) != uid || (gid_t) setfsgid(gid) != gid)
                return -EPERM;
        return 0;
}

/* Enter (or leave) the source's filesystem ids around a lookup in the source. */
static int as_source(const CopyContext *ctx, bool enter) {
        if (!ctx->source)
                return 0;
        return enter ? set_fs_ids(ctx->source->uid, ctx->source->gid) : set_fs_ids(ctx->own_uid, ctx->own_gid);
}

/* The three kinds of lookup in the source; each returns -errno on failure. */
static int source_stat(const CopyContext *ctx, int dirfd, const char *name, struct stat *ret) {
        int r = as_source(ctx, true);
        if (r >= 0 && fstatat(dirfd, name, ret, AT_SYMLINK_NOFOLLOW) < 0)
                r = -errno;
        return as_source(ctx, false) < 0 ? -EPERM : r;
}

static int source_open(const CopyContext *ctx, int dirfd, const char *name, int flags) {
        int r = as_source(ctx, true), fd = -EBADF;
        if (r >= 0 && (fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0)
                r = -errno;
        if (as_source(ctx, false) < 0) {
                safe_close(fd);
                return -EPERM;
        }
        return r < 0 ? r : fd;
}

static ssize_t source_readlink(const CopyContext *ctx, int dirfd, const char *name, char *buf, size_t size) {
        int r = as_source(ctx, true);
        ssize_t n = -1;
        if (r >= 0 && (n = readlinkat(dirfd, name, buf, size)) < 0)
                r = -errno;
        return as_source(ctx, false) < 0 ? -EPERM : r < 0 ? r : n;
}

/* A failed lookup in the source: with a source reader, one it may not
 * read is left out and counted, the first ones named; others fail. */
static int source_failed(const CopyContext *ctx, int r) {
        TreeReport *rep = ctx->report;

        if (!ctx->source || (r != -EACCES && r != -EPERM))
                return r;
        if (rep->unreadable < SBX_IMPORT_UNREADABLE_SHOWN)
                path_shown(rep->where, rep->unreadable_paths[rep->unreadable], sizeof(rep->unreadable_paths[0]));
        rep->unreadable++;
        return 0;
}

static int copy_entry(int src_dirfd, int dst_dirfd, const char *name, CopyContext *ctx, unsigned depth);

static int copy_dir_contents(int src_fd, int dst_fd, CopyContext *ctx, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        int r;

        if (depth > SBX_TREE_DEPTH_MAX) {
                ctx->report->too_deep = true;
                return -ELOOP;
        }
        /* The reader opened src_fd: reading the directory it names needs nothing more. */
        d = opendir_at(src_fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                size_t len = path_push(ctx->report, de->d_name);
                r = copy_entry(dirfd(d), dst_fd, de->d_name, ctx, depth);
                if (r < 0)
                        return r;
                ctx->report->where[len] = '\0';
        }
        return errno ? -errno : 0;
}

static int copy_dir(int src_dirfd, int dst_dirfd, const char *name, CopyContext *ctx, unsigned depth) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        const TreeSource *src = ctx->source;
        struct stat st;
        char opaque[4];
        ssize_t n;
        int r;

        in = source_open(ctx, src_dirfd, name, O_RDONLY | O_DIRECTORY);
        if (in < 0)
                return source_failed(ctx, in);
        if (fstat(in, &st) < 0)
                return -errno;
        if (src && st.st_dev == src->excluded_dev && st.st_ino == src->excluded_ino) {
                ctx->report->excluded = true;
                return -EXDEV;
        }
        if (mkdirat(dst_dirfd, name, 0700) < 0)
                return -errno;
        out = openat(dst_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (out < 0)
                return -errno;
        n = fgetxattr(in, OVL_OPAQUE_XATTR, opaque, sizeof(opaque));
        if (n > 0 && !(ctx->flags & TREE_COPY_DROP_WHITEOUTS)) {
                if (fsetxattr(out, OVL_OPAQUE_XATTR, opaque, (size_t) n, 0) < 0)
                        return -errno;
                ctx->report->entries++;
        }
        r = copy_dir_contents(in, out, ctx, depth + 1);
        if (r < 0)
                return r;
        r = set_owner_mode_times(out, &st, ctx->force_uid, ctx->flags);
        if (r >= 0 && (ctx->flags & TREE_COPY_FSYNC) && fsync(out) < 0)
                r = -errno;
        return r;
}

/* Layers are immutable: a merged base may share their files. */
static int link_file(int src_dirfd, int dst_dirfd, const char *name, const struct stat *st, CopyContext *ctx) {
        _cleanup_close_ int out = -EBADF;

        ctx->report->entries++;
        if (!(ctx->flags & TREE_COPY_FSYNC) && !((ctx->flags & TREE_COPY_CLEAR_SETID) && (st->st_mode & 06000)))
                return 0;
        out = openat(dst_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (out < 0)
                return -errno;
        /* The inode is shared: its other names lose the bits too, which is what we want. */
        if ((ctx->flags & TREE_COPY_CLEAR_SETID) && (st->st_mode & 06000) &&
            fchmod(out, st->st_mode & 01777) < 0)
                return -errno;
        if ((ctx->flags & TREE_COPY_FSYNC) && fsync(out) < 0)
                return -errno;
        return 0;
}

static int copy_file(int src_dirfd, int dst_dirfd, const char *name, const struct stat *lst, CopyContext *ctx) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        struct stat st;
        int r;

        if ((ctx->flags & TREE_COPY_HARDLINK) && linkat(src_dirfd, name, dst_dirfd, name, 0) == 0)
                return link_file(src_dirfd, dst_dirfd, name, lst, ctx);
        if ((ctx->flags & TREE_COPY_HARDLINK) && errno != EXDEV)
                return -errno;
        in = source_open(ctx, src_dirfd, name, O_RDONLY);
        if (in < 0)
                return source_failed(ctx, in);
        if (fstat(in, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return 0; /* replaced since it was listed: nothing to copy */
        out = openat(dst_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        r = copy_data(in, out);
        if (r < 0)
                return r;
        ctx->report->entries++;
        r = set_owner_mode_times(out, &st, ctx->force_uid, ctx->flags);
        if (r >= 0 && (ctx->flags & TREE_COPY_FSYNC) && fsync(out) < 0)
                r = -errno;
        return r;
}

static int copy_entry(int src_dirfd, int dst_dirfd, const char *name, CopyContext *ctx, unsigned depth) {
        int force_uid = ctx->force_uid;
        struct stat st;
        int r;

        r = source_stat(ctx, src_dirfd, name, &st);
        if (r < 0)
                return source_failed(ctx, r);
        uid_t uid = force_uid >= 0 ? (uid_t) force_uid : st.st_uid;
        gid_t gid = force_uid >= 0 ? (gid_t) force_uid : st.st_gid;

        switch (st.st_mode & S_IFMT) {
        case S_IFDIR:
                return copy_dir(src_dirfd, dst_dirfd, name, ctx, depth);
        case S_IFREG:
                return copy_file(src_dirfd, dst_dirfd, name, &st, ctx);
        case S_IFLNK: {
                char target[4096];
                ssize_t n = source_readlink(ctx, src_dirfd, name, target, sizeof(target) - 1);

                if (n < 0)
                        return source_failed(ctx, (int) n);
                target[n] = '\0';
                if (symlinkat(target, dst_dirfd, name) < 0)
                        return -errno;
                break;
        }
        case S_IFCHR:
                /* Only the overlayfs whiteout (0/0) is meaningful in a layer. */
                if (major(st.st_rdev) != 0 || minor(st.st_rdev) != 0 || (ctx->flags & TREE_COPY_DROP_WHITEOUTS))
                        return 0;
                _fallthrough_;
        case S_IFIFO:
                if (mknodat(dst_dirfd, name, st.st_mode & (S_IFMT | 0777), st.st_rdev) < 0)
                        return -errno;
                break;
        default:
                return 0; /* sockets, block devices */
        }
        if (fchownat(dst_dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        ctx->report->entries++;
        return 0;
}

int tree_copy(int src_dirfd, int dst_dirfd, int force_uid, unsigned flags, const TreeSource *source,
              TreeReport *report) {
        TreeReport own = {};
        CopyContext ctx = {
                .force_uid = force_uid, .flags = flags, .source = source,
                .own_uid = geteuid(), .own_gid = getegid(), .report = report ?: &own,
        };
        int r;

        *ctx.report = (TreeReport) {};
        r = copy_dir_contents(src_dirfd, dst_dirfd, &ctx, 0);
        if (r >= 0)
                ctx.report->where[0] = '\0';
        return r;
}

int tree_copy_entry(int src_dirfd, int dst_dirfd, const char *name, unsigned flags) {
        TreeReport report = {};
        CopyContext ctx = { .force_uid = -1, .flags = flags, .report = &report };
        return copy_entry(src_dirfd, dst_dirfd, name, &ctx, 0);
}

static int remove_contents(int fd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;

        if (depth > SBX_TREE_DEPTH_MAX * 4)
                return -ELOOP;
        d = opendir_at(fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_type == DT_DIR) {
                        _cleanup_close_ int sub = openat(dirfd(d), de->d_name,
                                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return -errno;
                        /* Directories may be read-only; we are removing them anyway. */
                        (void) fchmod(sub, 0700);
                        int r = remove_contents(sub, depth + 1);
                        if (r < 0)
                                return r;
                        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
                                return -errno;
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0)
                        return -errno;
        }
        return errno ? -errno : 0;
}

int tree_remove_at(int dirfd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOTDIR || errno == ELOOP)
                        return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
                return -errno;
        }
        (void) fchmod(fd, 0700);
        r = remove_contents(fd, 0);
        if (r < 0)
                return r;
        return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

int tree_is_empty(int dirfd) {
        _cleanup_(closedirp) DIR *d = NULL;

        d = opendir_at(dirfd);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));)
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        return 0;
        return errno ? -errno : 1;
}

int layer_create(int layers_dirfd, uint32_t seq, int src_dirfd, int force_uid, unsigned flags,
                 const TreeSource *source, TreeReport *report) {
        bool whole_fs = flags & LAYER_SYNC_FILESYSTEM;
        unsigned copy_flags = TREE_COPY_CLEAR_SETID | (whole_fs ? 0 : TREE_COPY_FSYNC) |
                              (flags & LAYER_LINK_FILES ? TREE_COPY_HARDLINK : 0);
        char tmp[32], final[16];
        _cleanup_close_ int dst = -EBADF;
        int r;

        snprintf(tmp, sizeof(tmp), ".tmp-%u", seq);
        snprintf(final, sizeof(final), "%u", seq);
        (void) tree_remove_at(layers_dirfd, tmp);
        if (mkdirat(layers_dirfd, tmp, 0755) < 0)
                return -errno;
        dst = openat(layers_dirfd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dst < 0) {
                r = -errno;
                goto fail;
        }
        r = tree_copy(src_dirfd, dst, force_uid, copy_flags, source, report);
        if (r < 0)
                goto fail;
        if (force_uid >= 0 && fchown(dst, (uid_t) force_uid, (gid_t) force_uid) < 0) {
                r = -errno;
                goto fail;
        }
        /* Everything of the layer reaches the disk before its name does: its own
         * files one by one, or, for a big import, the filesystem at once. */
        if ((whole_fs ? syncfs(dst) : fsync(dst)) < 0) {
                r = -errno;
                goto fail;
        }
        if (renameat(layers_dirfd, tmp, layers_dirfd, final) < 0) {
                r = -errno;
                goto fail;
        }
        if (fsync(layers_dirfd) < 0)
                return -errno;
        return 0;
fail:
        (void) tree_remove_at(layers_dirfd, tmp);
        return r;
}

int tree_source_open(const TreeSource *source, const char *path, int *ret_fd) {
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY,
                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        uid_t own_uid = geteuid();
        gid_t own_gid = getegid();
        int fd = -EBADF, r;

        r = set_fs_ids(source->uid, source->gid);
        if (r >= 0 && (fd = (int) syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how))) < 0)
                r = -errno;
        if (set_fs_ids(own_uid, own_gid) < 0) {
                if (r >= 0)
                        safe_close(fd);
                return -EPERM;
        }
        if (r < 0)
                return r;
        *ret_fd = fd;
        return 0;
}

static bool utf8_continuation(char c) {
        return ((unsigned char) c & 0xc0) == 0x80;
}

void path_shown(const char *path, char *buf, size_t size) {
        size_t len = strlen(path), head = SBX_PATH_SHOWN_MAX / 2 - 2, tail = len - head;

        if (len <= SBX_PATH_SHOWN_MAX) {
                snprintf(buf, size, "%s", path);
                return;
        }
        /* Cut between characters, not inside one. */
        while (head > 0 && utf8_continuation(path[head]))
                head--;
        while (path[tail] && utf8_continuation(path[tail]))
                tail++;
        snprintf(buf, size, "%.*s...%s", (int) head, path, path + tail);
}

void tree_depth_message(const char *where, char *buf, size_t size) {
        char shown[SBX_PATH_SHOWN_MAX + 1];

        path_shown(where, shown, sizeof(shown));
        snprintf(buf, size, "the tree is deeper than the layer depth limit of %u directory levels at '%s'",
                 SBX_TREE_DEPTH_MAX, shown);
}

int layer_remove_unrecorded(int layers_dirfd, uint32_t top, const char *keep) {
        _cleanup_(closedirp) DIR *d = NULL;
        int r = 0;

        d = opendir_at(layers_dirfd);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                char *end;
                unsigned long v;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    (keep && strcmp(de->d_name, keep) == 0))
                        continue;
                errno = 0;
                v = strtoul(de->d_name, &end, 10);
                if (*end == '\0' && errno == 0 && v <= top)
                        continue;
                int k = tree_remove_at(dirfd(d), de->d_name);
                if (k < 0 && r == 0)
                        r = k;
        }
        return r;
}
