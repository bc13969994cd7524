#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fd-util.h"
#include "data/layer.h"
#include "log.h"
#include "sbx-limits.h"
#include "core/sandbox.h"
#include "core/snapshot.h"

static void base_name(uint32_t squashed, char *buf, size_t size) {
        if (squashed == 0)
                snprintf(buf, size, "0");
        else
                snprintf(buf, size, "squash-%u", squashed);
}

int snapshot_lowerdirs(uint32_t squashed, uint32_t top, char **ret) {
        size_t size = (size_t) (top - squashed + 1) * 12 + 32, n = 0;
        char *buf = malloc(size);

        if (!buf)
                return -ENOMEM;
        for (uint32_t i = top; i > squashed; i--)
                n += (size_t) snprintf(buf + n, size - n, "%u:", i);
        base_name(squashed, buf + n, size - n);
        *ret = buf;
        return 0;
}

/* Whether overlayfs takes "lowerdir+" (one lower per call, 6.8): -1 not known
 * yet, then 0 or 1 for as long as sbxd runs. */
static int lowerdir_append = -1;

/* The lowers ("top:…:bottom" of names in the current directory) into an
 * overlay context: one "lowerdir+" each, or the classic "lowerdir" string. */
static int overlay_set_lowers(int fs, const char *lowers, bool append) {
        char name[32];

        if (!append)
                return fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", lowers, 0) < 0 ? -errno : 0;
        for (const char *p = lowers, *colon; p; p = colon ? colon + 1 : NULL) {
                colon = strchr(p, ':');
                snprintf(name, sizeof(name), "%.*s", colon ? (int) (colon - p) : (int) strlen(p), p);
                if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", name, 0) < 0)
                        return -errno;
        }
        return 0;
}

static int overlay_create(const char *lowers, bool append, int *ret_fd) {
        _cleanup_close_ int fs = -EBADF;
        int mfd, r;

        fs = fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        r = overlay_set_lowers(fs, lowers, append);
        if (r < 0)
                return r;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        mfd = fsmount(fs, FSMOUNT_CLOEXEC,
                      MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (mfd < 0)
                return -errno;
        *ret_fd = mfd;
        return 0;
}

/* The overlay of lowers, names in layers_fd, which is the current directory
 * while the kernel resolves them: the classic string then holds names only,
 * not paths, and so fits the most layers into fsconfig()'s bound. */
static int overlay_mount(int layers_fd, const char *lowers, bool append, int *ret_fd) {
        _cleanup_close_ int cwd = -EBADF;
        int r;

        if (!append && strlen(lowers) > SBX_OVERLAY_LOWERS_STRING_MAX)
                return -E2BIG;
        cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cwd < 0)
                return -errno;
        if (fchdir(layers_fd) < 0)
                return -errno;
        r = overlay_create(lowers, append, ret_fd);
        if (fchdir(cwd) < 0 && r >= 0) {
                r = -errno;
                *ret_fd = safe_close(*ret_fd);
        }
        return r;
}

int snapshot_mount(const Sandbox *sb, uint32_t squashed, uint32_t top, int *ret_fd) {
        _cleanup_free_ char *lowers = NULL;
        char path[4096];
        int mfd, r;

        r = snapshot_lowerdirs(squashed, top, &lowers);
        if (r < 0)
                return r;
        if (!strchr(lowers, ':')) {
                /* One layer: overlayfs wants two lowers without an upper; a read-only
                 * detached bind mount of the layer is the same view. */
                struct mount_attr attr = {
                        .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                };
                snprintf(path, sizeof(path), "%s/%s", sb->layers_path, lowers);
                mfd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (mfd < 0)
                        return -errno;
                if (mount_setattr(mfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
                        r = -errno;
                        safe_close(mfd);
                        return r;
                }
                *ret_fd = mfd;
                return 0;
        }
        /* "lowerdir+" has no length limit. Kernels 6.5-6.7 refuse it at once; before
         * 6.5 overlayfs had no mount context of its own and the generic one takes any
         * key, so the refusal (EINVAL) only comes with FSCONFIG_CMD_CREATE. Either
         * way the classic string is tried next; once it works, or is only too long,
         * the answer is kept (snapshot_compact() then bounds the string). */
        if (lowerdir_append != 0) {
                r = overlay_mount(sb->layers_fd, lowers, true, ret_fd);
                if (r >= 0)
                        lowerdir_append = 1;
                if (r != -EINVAL || lowerdir_append == 1)
                        return r;
        }
        r = overlay_mount(sb->layers_fd, lowers, false, ret_fd);
        if (r >= 0 || r == -E2BIG)
                lowerdir_append = 0;
        return r;
}

void snapshot_forget(Sandbox *sb) {
        sb->view_fd = safe_close(sb->view_fd);
        sb->view_dev = 0;
}

/* An overlay whose layers are all on one filesystem shows its own device with
 * the real inode numbers of its files; a single layer is bind-mounted and
 * shows its own device. Then (layers' device, inode) names a file in every
 * view. Layers spanning filesystems (something mounted on a layer) may have
 * their inode numbers remapped: view_dev stays 0, and nothing is named. */
static void view_identify(Sandbox *sb) {
        struct stat st;
        char name[32];

        if (fstat(sb->layers_fd, &st) < 0)
                return;
        sb->layers_dev = st.st_dev;
        for (uint32_t i = sb->top_layer; i > sb->squashed; i--) {
                snprintf(name, sizeof(name), "%u", i);
                if (fstatat(sb->layers_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != sb->layers_dev)
                        return;
        }
        base_name(sb->squashed, name, sizeof(name));
        if (fstatat(sb->layers_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != sb->layers_dev)
                return;
        if (fstat(sb->view_fd, &st) < 0)
                return;
        sb->view_dev = st.st_dev;
}

int snapshot_current(Store *store, Sandbox *sb, int *ret_fd) {
        int r;

        if (sb->view_fd >= 0 && sb->view_top == sb->top_layer) {
                *ret_fd = sb->view_fd;
                return 0;
        }
        snapshot_forget(sb);
        r = snapshot_mount(sb, sb->squashed, sb->top_layer, &sb->view_fd);
        if (r == -E2BIG) {
                /* Deeper than the classic lowerdir string holds: merge, then mount. */
                r = snapshot_compact(store, sb);
                if (r >= 0)
                        r = snapshot_mount(sb, sb->squashed, sb->top_layer, &sb->view_fd);
        }
        if (r < 0)
                return r;
        view_identify(sb);
        sb->view_top = sb->top_layer;
        *ret_fd = sb->view_fd;
        return 0;
}

int snapshot_file_key(const Sandbox *sb, const struct stat *st, FileKey *ret) {
        if (sb->view_dev == 0 || st->st_dev != sb->view_dev)
                return -EXDEV;
        *ret = file_key(st, sb->layers_dev);
        return 0;
}

/* ---- compaction --------------------------------------------------------------------- */

static int remove_entry(int dirfd, const char *name) {
        if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno == EISDIR || errno == EPERM)
                return tree_remove_at(dirfd, name);
        return -errno;
}

static int copy_dir_attributes(int src, int dst) {
        struct stat st;
        struct timespec ts[2];

        if (fstat(src, &st) < 0)
                return -errno;
        ts[0] = st.st_atim;
        ts[1] = st.st_mtim;
        if (fchown(dst, st.st_uid, st.st_gid) < 0 || fchmod(dst, st.st_mode & 07777) < 0 || futimens(dst, ts) < 0)
                return -errno;
        return 0;
}

/* Apply one layer (overlayfs format) onto a merged tree, as overlayfs would show it. */
static int apply_layer(int src, int dst, unsigned depth) {
        DIR *d;
        int r = 0;

        if (depth > SBX_TREE_DEPTH_MAX)
                return -ELOOP;
        d = opendir_at(src);
        if (!d)
                return -errno;
        for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));) {
                struct stat st, dst_st;
                const char *name = de->d_name;

                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = -errno;
                        break;
                }
                if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
                        r = remove_entry(dst, name); /* whiteout */
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        char opaque[4];
                        bool is_opaque;

                        if (sub < 0) {
                                r = -errno;
                                break;
                        }
                        is_opaque = fgetxattr(sub, "trusted.overlay.opaque", opaque, sizeof(opaque)) > 0;
                        if (!is_opaque && fstatat(dst, name, &dst_st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            S_ISDIR(dst_st.st_mode)) {
                                _cleanup_close_ int sub_dst =
                                        openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                if (sub_dst < 0) {
                                        r = -errno;
                                        break;
                                }
                                r = apply_layer(sub, sub_dst, depth + 1);
                                if (r >= 0)
                                        r = copy_dir_attributes(sub, sub_dst);
                                continue;
                        }
                }
                /* Anything else replaces what was there. */
                r = remove_entry(dst, name);
                if (r >= 0)
                        r = tree_copy_entry(dirfd(d), dst, name,
                                             TREE_COPY_HARDLINK | TREE_COPY_DROP_WHITEOUTS | TREE_COPY_CLEAR_SETID);
        }
        if (r >= 0 && errno != 0)
                r = -errno;
        closedir(d);
        return r;
}

/* Whether the layers above squashed up to top are more than one overlay
 * should stack: SBX_STACK_MAX_LAYERS, or where the kernel takes only the
 * classic lowerdir string, more than that string holds. */
static bool stack_too_deep(uint32_t squashed, uint32_t top) {
        _cleanup_free_ char *lowers = NULL;

        if (top - squashed > SBX_STACK_MAX_LAYERS)
                return true;
        if (lowerdir_append != 0 || snapshot_lowerdirs(squashed, top, &lowers) < 0)
                return false;
        return strlen(lowers) > SBX_OVERLAY_LOWERS_STRING_MAX;
}

bool snapshot_compact_due(uint32_t squashed, uint32_t top) {
        return stack_too_deep(squashed, top);
}

int snapshot_compact_build(int layers_fd, uint32_t squashed, uint32_t target) {
        char old_base[32], new_base[32], tmp[40], name[16];
        _cleanup_close_ int dst = -EBADF, src = -EBADF;
        int r;

        base_name(squashed, old_base, sizeof(old_base));
        base_name(target, new_base, sizeof(new_base));
        snprintf(tmp, sizeof(tmp), ".tmp-%s", new_base);
        (void) tree_remove_at(layers_fd, tmp);
        if (mkdirat(layers_fd, tmp, 0755) < 0)
                return -errno;
        dst = openat(layers_fd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        src = openat(layers_fd, old_base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dst < 0 || src < 0) {
                r = -errno;
                goto fail;
        }
        r = tree_copy(src, dst, -1, TREE_COPY_HARDLINK | TREE_COPY_DROP_WHITEOUTS | TREE_COPY_CLEAR_SETID, NULL, NULL,
                      NULL);
        if (r >= 0)
                r = copy_dir_attributes(src, dst);
        for (uint32_t i = squashed + 1; r >= 0 && i <= target; i++) {
                _cleanup_close_ int layer = -EBADF;
                snprintf(name, sizeof(name), "%u", i);
                layer = openat(layers_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (layer < 0) {
                        r = -errno;
                        break;
                }
                r = apply_layer(layer, dst, 0);
                if (r >= 0)
                        r = copy_dir_attributes(layer, dst);
        }
        if (r >= 0 && syncfs(dst) < 0)
                r = -errno;
        if (r >= 0 && renameat(layers_fd, tmp, layers_fd, new_base) < 0)
                r = -errno;
        if (r < 0)
                goto fail;
        (void) fsync(layers_fd);
        return 0;
fail:
        (void) tree_remove_at(layers_fd, tmp);
        return r;
}

int snapshot_compact_adopt(Store *store, Sandbox *sb, uint32_t target) {
        char new_base[32];
        unsigned removed = 0;
        int r;

        /* The record makes it the base; before it, startup removes it as unrecorded. */
        r = store_squash_set(store, sb->id, target);
        if (r < 0) {
                base_name(target, new_base, sizeof(new_base));
                (void) tree_remove_at(sb->layers_fd, new_base);
                return r;
        }
        sb->squashed = target;
        snapshot_forget(sb);
        (void) snapshot_collect(sb, &removed);
        log_info("Compacted sandbox '%s': layers 0..%u merged, %u old directories removed", sb->name, target,
                 removed);
        return 0;
}

int snapshot_compact(Store *store, Sandbox *sb) {
        uint32_t target = sb->top_layer;
        int r;

        if (!stack_too_deep(sb->squashed, target))
                return 0;
        r = snapshot_compact_build(sb->layers_fd, sb->squashed, target);
        return r < 0 ? r : snapshot_compact_adopt(store, sb, target);
}

void snapshot_hold(Sandbox *sb, SnapshotHold *h) {
        h->squashed = sb->squashed;
        h->top = sb->top_layer;
        TAILQ_INSERT_TAIL(&sb->holds, h, link);
}

void snapshot_release(Sandbox *sb, SnapshotHold *h) {
        TAILQ_REMOVE(&sb->holds, h, link);
}

/* Whether a hold of sb keeps the layer (or, base_only, the squashed base numbered layer). */
static bool layer_held(const Sandbox *sb, uint32_t layer, bool base_only) {
        const SnapshotHold *h;

        TAILQ_FOREACH(h, &sb->holds, link)
                if (base_only ? h->squashed == layer : h->squashed < layer && layer <= h->top)
                        return true;
        return false;
}

#define TRASH_PREFIX ".trash-"

/* name out of the stack at once (renamed), its tree removed later, off the
 * loop (snapshot_trash_empty); removed here if that name is taken. */
static int trash_move(int dirfd, const char *name) {
        char trash[sizeof(TRASH_PREFIX) + NAME_MAX];

        snprintf(trash, sizeof(trash), TRASH_PREFIX "%s", name);
        if (renameat(dirfd, name, dirfd, trash) == 0)
                return 0;
        return tree_remove_at(dirfd, name);
}

int snapshot_trash_empty(int layers_fd) {
        _cleanup_close_ int fd = openat(layers_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        int r = 0;

        if (fd < 0)
                return -errno;
        d = opendir_at(fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d));)
                if (strncmp(de->d_name, TRASH_PREFIX, strlen(TRASH_PREFIX)) == 0) {
                        int k = tree_remove_at(dirfd(d), de->d_name);
                        if (k < 0 && r == 0)
                                r = k;
                }
        closedir(d);
        return r;
}

int snapshot_collect(Sandbox *sb, unsigned *ret_removed) {
        DIR *d;
        int r = 0;
        unsigned removed = 0;

        if (sb->squashed == 0) {
                *ret_removed = 0;
                return 0;
        }
        d = opendir_at(sb->layers_fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                unsigned long v;
                char *end;
                bool drop = false;

                if (de->d_name[0] == '.')
                        continue;
                if (strncmp(de->d_name, "squash-", 7) == 0) {
                        v = strtoul(de->d_name + 7, &end, 10);
                        drop = *end == '\0' && v != sb->squashed && !layer_held(sb, (uint32_t) v, true);
                } else {
                        v = strtoul(de->d_name, &end, 10);
                        drop = *end == '\0' && v <= sb->squashed &&
                               (v == 0 ? !layer_held(sb, 0, true) : !layer_held(sb, (uint32_t) v, false));
                }
                if (!drop)
                        continue;
                int k = trash_move(dirfd(d), de->d_name);
                if (k < 0 && r == 0)
                        r = k;
                if (k >= 0)
                        removed++;
        }
        closedir(d);
        *ret_removed = removed;
        return r;
}
