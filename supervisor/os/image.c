#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fd-util.h"
#include "os/image.h"
#include "data/layer.h"
#include "macro.h"
#include "sbx-limits.h"

/* All root's: the image is every sandbox's. A session's init gives /root and
 * /run to the sandbox's root in the session's own upper directory, and
 * /workspace is a mount point (worker/session-init.c). */
static const struct {
        const char *path;
        mode_t mode;
} image_dirs[] = {
        { "usr", 0755 },  { "etc", 0755 },       { "tmp", 01777 },  { "var", 0755 }, { "var/tmp", 01777 },
        { "root", 0700 }, { "home", 0755 },      { "workspace", 0755 }, { "proc", 0555 }, { "dev", 0755 },
        { "run", 0755 },  { "opt", 0755 },       { "mnt", 0755 },   { "srv", 0755 },
};

/* Only what programs need: loader, alternatives, locale and certificate data. */
static const char *const etc_copies[] = {
        "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone",
        "profile", "profile.d", "bash.bashrc", "inputrc", "mime.types", "protocols", "services",
        "os-release", "debian_version", "shells", "login.defs", "environment", "ssl/certs",
        "ssl/openssl.cnf", "ca-certificates.conf", "magic", "magic.mime", "gai.conf", "host.conf",
        "locale.alias", "gitconfig", "mke2fs.conf", "skel", "lsb-release", "issue",
};

static const struct {
        const char *name, *content;
} etc_generated[] = {
        { "passwd", "root:x:0:0:root:/root:/bin/sh\n"
                    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" },
        { "group", "root:x:0:\nnogroup:x:65534:\n" },
        { "hostname", "sbx\n" },
        { "hosts", "127.0.0.1\tlocalhost sbx\n::1\tlocalhost ip6-localhost ip6-loopback\n" },
        { "nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n" },
        { "resolv.conf", "" },
};

static int copy_host_etc(int host_etc, int etc, const char *rel) {
        struct stat st;
        char parent[256];
        const char *slash = strrchr(rel, '/');
        _cleanup_close_ int dst_parent = -EBADF;
        const char *name = slash ? slash + 1 : rel;

        if (fstatat(host_etc, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (slash) {
                snprintf(parent, sizeof(parent), "%.*s", (int) (slash - rel), rel);
                if (mkdirat(etc, parent, 0755) < 0 && errno != EEXIST)
                        return -errno;
                dst_parent = openat(etc, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } else
                dst_parent = openat(etc, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dst_parent < 0)
                return -errno;

        if (S_ISLNK(st.st_mode)) {
                char target[4096];
                ssize_t n = readlinkat(host_etc, rel, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                return symlinkat(target, dst_parent, name) < 0 ? -errno : 0;
        }
        if (S_ISDIR(st.st_mode)) {
                _cleanup_close_ int src = -EBADF, dst = -EBADF;
                src = openat(host_etc, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (src < 0)
                        return -errno;
                if (mkdirat(dst_parent, name, 0755) < 0)
                        return -errno;
                dst = openat(dst_parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dst < 0)
                        return -errno;
                return tree_copy(src, dst, 0, 0, NULL, NULL, NULL);
        }
        if (S_ISREG(st.st_mode)) {
                _cleanup_close_ int src = -EBADF, tmpdir = -EBADF;
                char buf[1 << 16];
                ssize_t n;
                /* Small regular files: those we copy are world-readable configuration. */
                if (!(st.st_mode & S_IROTH))
                        return 0;
                src = openat(host_etc, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (src < 0)
                        return -errno;
                n = loop_read(src, buf, sizeof(buf));
                if (n < 0)
                        return (int) n;
                return write_file_atomic_at(dst_parent, name, buf, (size_t) n, 0644);
        }
        return 0;
}

static const char *const system_links[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

/* ---- the stamp of the image's inputs ------------------------------------------ */

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
        const unsigned char *p = data;

        for (size_t i = 0; i < len; i++)
                h = (h ^ p[i]) * 0x100000001b3ull;
        return h;
}

/* What identifies one input: its path and its inode's type, size, times and number. */
static uint64_t entry_hash(const char *path, const struct stat *st) {
        uint64_t v[] = { st->st_mode, (uint64_t) st->st_size, (uint64_t) st->st_mtim.tv_sec,
                         (uint64_t) st->st_mtim.tv_nsec, (uint64_t) st->st_ctim.tv_sec,
                         (uint64_t) st->st_ctim.tv_nsec, st->st_ino, st->st_dev };

        return fnv1a(fnv1a(0xcbf29ce484222325ull, path, strlen(path) + 1), v, sizeof(v));
}

/* The sum of the hashes of rel below dirfd and of everything under it (any order). */
static int inputs_hash(int dirfd, const char *rel, unsigned depth, uint64_t *sum) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct stat st;

        if (fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        *sum += entry_hash(rel, &st);
        if (!S_ISDIR(st.st_mode))
                return 0;
        if (depth > SBX_TREE_DEPTH_MAX)
                return -ELOOP;
        int fd = openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                char sub[SBX_PATH_MAX + 1];

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if ((size_t) snprintf(sub, sizeof(sub), "%s/%s", rel, de->d_name) >= sizeof(sub))
                        return -ENAMETOOLONG;
                int r = inputs_hash(dirfd, sub, depth + 1, sum);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

/* "sbx-image IMAGE_FORMAT HASH": the tables above, the host's /etc inputs and system links. */
#define IMAGE_FORMAT 1
static int image_stamp(char *buf, size_t size) {
        _cleanup_close_ int host_etc = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int host_root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t sum = 0, h = 0xcbf29ce484222325ull;
        int r;

        if (host_etc < 0 || host_root < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(image_dirs); i++)
                h = fnv1a(fnv1a(h, image_dirs[i].path, strlen(image_dirs[i].path) + 1), &image_dirs[i].mode,
                          sizeof(image_dirs[i].mode));
        for (size_t i = 0; i < ELEMENTSOF(etc_generated); i++)
                h = fnv1a(fnv1a(h, etc_generated[i].name, strlen(etc_generated[i].name) + 1),
                          etc_generated[i].content, strlen(etc_generated[i].content) + 1);
        for (size_t i = 0; i < ELEMENTSOF(etc_copies); i++) {
                r = inputs_hash(host_etc, etc_copies[i], 0, &sum);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(system_links); i++) {
                struct stat st;
                if (fstatat(host_root, system_links[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
                        sum += entry_hash(system_links[i], &st); /* the link or directory itself */
        }
        snprintf(buf, size, "sbx-image %d %016llx\n", IMAGE_FORMAT, (unsigned long long) (h + sum));
        return 0;
}

/* ---- building it -------------------------------------------------------------- */

static int image_build(int state_dirfd) {
        _cleanup_close_ int img = -EBADF, etc = -EBADF, host_etc = -EBADF;
        int r;

        (void) tree_remove_at(state_dirfd, "image-default.tmp");
        if (mkdirat(state_dirfd, "image-default.tmp", 0755) < 0)
                return -errno;
        img = openat(state_dirfd, "image-default.tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (img < 0)
                return -errno;

        for (size_t i = 0; i < ELEMENTSOF(image_dirs); i++) {
                if (mkdirat(img, image_dirs[i].path, 0755) < 0)
                        return -errno;
                if (fchmodat(img, image_dirs[i].path, image_dirs[i].mode, 0) < 0)
                        return -errno;
        }
        /* Mirror the host's merged-usr layout: links stay links, real directories get bound. */
        for (size_t i = 0; i < ELEMENTSOF(system_links); i++) {
                char host[32], target[256];
                struct stat st;
                snprintf(host, sizeof(host), "/%s", system_links[i]);
                if (lstat(host, &st) < 0)
                        continue;
                if (S_ISLNK(st.st_mode)) {
                        ssize_t n = readlink(host, target, sizeof(target) - 1);
                        if (n < 0)
                                return -errno;
                        target[n] = '\0';
                        if (symlinkat(target, img, system_links[i]) < 0)
                                return -errno;
                } else if (S_ISDIR(st.st_mode) && mkdirat(img, system_links[i], 0755) < 0)
                        return -errno;
        }

        etc = openat(img, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        host_etc = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (etc < 0 || host_etc < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(etc_copies); i++) {
                r = copy_host_etc(host_etc, etc, etc_copies[i]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(etc_generated); i++) {
                r = write_file_atomic_at(etc, etc_generated[i].name, etc_generated[i].content,
                                         strlen(etc_generated[i].content), 0644);
                if (r < 0)
                        return r;
        }
        if (syncfs(img) < 0)
                return -errno;
        (void) tree_remove_at(state_dirfd, "image-default");
        if (renameat(state_dirfd, "image-default.tmp", state_dirfd, "image-default") < 0)
                return -errno;
        return 0;
}

/* Whether a new image fits beside the old one (and what it takes, once more, to spare). */
static bool room_beside(int state_dirfd) {
        _cleanup_close_ int old = openat(state_dirfd, "image-default", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        TreeUsage use = { .bytes = SBX_IMAGE_ROOM_MIN };
        struct statvfs sv;

        if (old >= 0 && tree_usage(old, 4096, &use) >= 0)
                use.bytes = MAX(use.bytes, (uint64_t) SBX_IMAGE_ROOM_MIN);
        if (fstatvfs(state_dirfd, &sv) < 0)
                return false;
        return (uint64_t) sv.f_bavail * sv.f_frsize >= 2 * use.bytes &&
               (uint64_t) sv.f_favail >= 2 * use.inodes + 64;
}

int image_build_default(int state_dirfd, ImageBuild *ret) {
        char stamp[64], *old = NULL;
        struct stat st;
        int r;

        r = image_stamp(stamp, sizeof(stamp));
        if (r < 0)
                return r;
        bool present = fstatat(state_dirfd, "image-default", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (present && read_file_bounded_at(state_dirfd, "image-default.stamp", sizeof(stamp), &old, &(size_t) { 0 }) >= 0 &&
            strcmp(old, stamp) == 0) {
                free(old);
                *ret = IMAGE_UP_TO_DATE;
                return 0;
        }
        free(old);
        /* Not beside the old one on a (nearly) full disk: in its place. */
        bool beside = !present || room_beside(state_dirfd);
        if (!beside)
                (void) tree_remove_at(state_dirfd, "image-default");
        (void) unlinkat(state_dirfd, "image-default.stamp", 0);
        r = image_build(state_dirfd);
        if (r < 0)
                return r;
        /* After the image: a crash between them rebuilds it. */
        r = write_file_atomic_at(state_dirfd, "image-default.stamp", stamp, strlen(stamp), 0644);
        if (r < 0)
                return r;
        *ret = beside ? IMAGE_BUILT : IMAGE_BUILT_IN_PLACE;
        return 0;
}

void image_default_info(Sbx__ImageInfo *o) {
        o->name = (char *) SBX_IMAGE_DEFAULT_NAME;
        o->kind = (char *) "host";
        o->state = (char *) "built";
        o->description = (char *) "the host's /usr (and merged-usr links) and the parts of /etc programs need, "
                                  "read-only, without host secrets";
}
