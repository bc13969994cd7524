#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fd-util.h"
#include "layer.h"
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
                ssize_t n = read(in, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return 0;
                int r = loop_write(out, buf, (size_t) n);
                if (r < 0)
                        return r;
        }
}

static int set_owner_mode_times(int fd, const struct stat *st, int force_uid) {
        uid_t uid = force_uid >= 0 ? (uid_t) force_uid : st->st_uid;
        gid_t gid = force_uid >= 0 ? (gid_t) force_uid : st->st_gid;
        struct timespec ts[2] = { st->st_atim, st->st_mtim };

        if (fchown(fd, uid, gid) < 0)
                return -errno;
        /* After chown, which clears set-id bits. */
        if (fchmod(fd, st->st_mode & 07777) < 0)
                return -errno;
        if (futimens(fd, ts) < 0)
                return -errno;
        return 0;
}

typedef struct CopyContext {
        int force_uid;
        unsigned flags;
        uint32_t entries;
} CopyContext;

static int copy_entry(int src_dirfd, int dst_dirfd, const char *name, CopyContext *ctx, unsigned depth);

static int copy_dir_contents(int src_fd, int dst_fd, CopyContext *ctx, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        int r;

        if (depth > SBX_TREE_DEPTH_MAX)
                return -ELOOP;
        d = opendir_at(src_fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                r = copy_entry(dirfd(d), dst_fd, de->d_name, ctx, depth);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

static int copy_entry(int src_dirfd, int dst_dirfd, const char *name, CopyContext *ctx, unsigned depth) {
        int force_uid = ctx->force_uid;
        struct stat st;
        int r;

        if (fstatat(src_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;

        switch (st.st_mode & S_IFMT) {
        case S_IFDIR: {
                _cleanup_close_ int in = -EBADF, out = -EBADF;
                char opaque[4];
                ssize_t n;

                in = openat(src_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (in < 0)
                        return -errno;
                if (mkdirat(dst_dirfd, name, 0700) < 0)
                        return -errno;
                out = openat(dst_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (out < 0)
                        return -errno;
                n = fgetxattr(in, OVL_OPAQUE_XATTR, opaque, sizeof(opaque));
                if (n > 0 && !(ctx->flags & TREE_COPY_DROP_WHITEOUTS)) {
                        if (fsetxattr(out, OVL_OPAQUE_XATTR, opaque, (size_t) n, 0) < 0)
                                return -errno;
                        ctx->entries++;
                }
                r = copy_dir_contents(in, out, ctx, depth + 1);
                if (r < 0)
                        return r;
                r = set_owner_mode_times(out, &st, force_uid);
                if (r >= 0 && (ctx->flags & TREE_COPY_FSYNC) && fsync(out) < 0)
                        r = -errno;
                return r;
        }
        case S_IFREG: {
                _cleanup_close_ int in = -EBADF, out = -EBADF;

                /* Layers are immutable: a merged base may share their files. */
                if ((ctx->flags & TREE_COPY_HARDLINK) && linkat(src_dirfd, name, dst_dirfd, name, 0) == 0) {
                        ctx->entries++;
                        if (!(ctx->flags & TREE_COPY_FSYNC))
                                return 0;
                        out = openat(dst_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
                        if (out < 0 || fsync(out) < 0)
                                return -errno;
                        return 0;
                }
                if ((ctx->flags & TREE_COPY_HARDLINK) && errno != EXDEV)
                        return -errno;
                in = openat(src_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
                if (in < 0)
                        return -errno;
                out = openat(dst_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (out < 0)
                        return -errno;
                r = copy_data(in, out);
                if (r < 0)
                        return r;
                ctx->entries++;
                r = set_owner_mode_times(out, &st, force_uid);
                if (r >= 0 && (ctx->flags & TREE_COPY_FSYNC) && fsync(out) < 0)
                        r = -errno;
                return r;
        }
        case S_IFLNK: {
                char target[4096];
                ssize_t n = readlinkat(src_dirfd, name, target, sizeof(target) - 1);
                uid_t uid = force_uid >= 0 ? (uid_t) force_uid : st.st_uid;
                gid_t gid = force_uid >= 0 ? (gid_t) force_uid : st.st_gid;

                if (n < 0)
                        return -errno;
                target[n] = '\0';
                if (symlinkat(target, dst_dirfd, name) < 0)
                        return -errno;
                if (fchownat(dst_dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                ctx->entries++;
                return 0;
        }
        case S_IFCHR:
                /* Only the overlayfs whiteout (0/0) is meaningful in a layer. */
                if (major(st.st_rdev) != 0 || minor(st.st_rdev) != 0 || (ctx->flags & TREE_COPY_DROP_WHITEOUTS))
                        return 0;
                _fallthrough_;
        case S_IFIFO:
                if (mknodat(dst_dirfd, name, st.st_mode & (S_IFMT | 0777), st.st_rdev) < 0)
                        return -errno;
                if (fchownat(dst_dirfd, name, force_uid >= 0 ? (uid_t) force_uid : st.st_uid,
                             force_uid >= 0 ? (gid_t) force_uid : st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                ctx->entries++;
                return 0;
        default:
                return 0; /* sockets, block devices */
        }
}

int tree_copy(int src_dirfd, int dst_dirfd, int force_uid, unsigned flags, uint32_t *ret_entries) {
        CopyContext ctx = { .force_uid = force_uid, .flags = flags };
        int r;

        r = copy_dir_contents(src_dirfd, dst_dirfd, &ctx, 0);
        if (r < 0)
                return r;
        if (ret_entries)
                *ret_entries = ctx.entries;
        return 0;
}

int tree_copy_entry(int src_dirfd, int dst_dirfd, const char *name, unsigned flags) {
        CopyContext ctx = { .force_uid = -1, .flags = flags };
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
                 uint32_t *ret_entries) {
        bool whole_fs = flags & LAYER_SYNC_FILESYSTEM;
        unsigned copy_flags = (whole_fs ? 0 : TREE_COPY_FSYNC) | (flags & LAYER_LINK_FILES ? TREE_COPY_HARDLINK : 0);
        char tmp[32], final[16];
        _cleanup_close_ int dst = -EBADF;
        uint32_t entries = 0;
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
        r = tree_copy(src_dirfd, dst, force_uid, copy_flags, &entries);
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
        if (ret_entries)
                *ret_entries = entries;
        return 0;
fail:
        (void) tree_remove_at(layers_dirfd, tmp);
        return r;
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
