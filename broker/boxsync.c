#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boxsync.h"
#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"

#define COPY_CHUNK (256u * 1024u)

const char *const box_sync_excluded[] = {
        "node_modules", ".git", "dist", "build", ".next", ".nuxt", ".svelte-kit", ".turbo", ".parcel-cache",
        ".cache", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".pytest_cache", "coverage", ".DS_Store",
};
const size_t box_sync_n_excluded = ELEMENTSOF(box_sync_excluded);

typedef struct Walk {
        struct archive *a;
        char path[SBX_PATH_MAX + 1];    /* of the entry, relative to localPath */
        uint8_t *buf;
        BoxSyncTar *out;
        char *err;
        size_t errsize;
} Walk;

static void archive_freep(struct archive **a) {
        if (*a)
                archive_write_free(*a);
}

static void entry_freep(struct archive_entry **e) {
        if (*e)
                archive_entry_free(*e);
}

static bool excluded(const char *name) {
        for (size_t i = 0; i < box_sync_n_excluded; i++)
                if (strcmp(name, box_sync_excluded[i]) == 0)
                        return true;
        return false;
}

static int fail(Walk *w, int r, const char *what) {
        snprintf(w->err, w->errsize, "localPath: cannot %s '%.300s': %s", what, w->path[0] ? w->path : ".",
                 strerror(-r));
        return r;
}

static int archive_fail(Walk *w) {
        snprintf(w->err, w->errsize, "localPath: cannot write the tar at '%.300s': %s", w->path,
                 archive_error_string(w->a) ?: "libarchive failed");
        return -EIO;
}

/* The header of the entry w->path of st (and a symlink's target). */
static int put_header(Walk *w, const struct stat *st, const char *target) {
        _cleanup_(entry_freep) struct archive_entry *e = archive_entry_new();

        if (!e)
                return -ENOMEM;
        if (++w->out->entries > SBX_BOX_SYNC_ENTRIES_MAX) {
                snprintf(w->err, w->errsize, "localPath: more than %u files, directories and symlinks "
                         "(SBX_BOX_SYNC_ENTRIES_MAX): sync a smaller directory, or clone it in the box",
                         SBX_BOX_SYNC_ENTRIES_MAX);
                return -E2BIG;
        }
        archive_entry_set_pathname(e, w->path);
        archive_entry_set_filetype(e, st->st_mode & S_IFMT);
        archive_entry_set_perm(e, st->st_mode & 0777);
        archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
        archive_entry_set_size(e, S_ISREG(st->st_mode) ? st->st_size : 0);
        if (target)
                archive_entry_set_symlink(e, target);
        if (archive_write_header(w->a, e) != ARCHIVE_OK)
                return archive_fail(w);
        if ((uint64_t) archive_filter_bytes(w->a, -1) + (S_ISREG(st->st_mode) ? (uint64_t) st->st_size : 0) >
            SBX_BOX_SYNC_MAX) {
                snprintf(w->err, w->errsize, "localPath: its tar would be more than %llu bytes (SBX_BOX_SYNC_MAX) at "
                         "'%.300s': sync a smaller directory, or clone it in the box",
                         (unsigned long long) SBX_BOX_SYNC_MAX, w->path);
                return -EFBIG;
        }
        return 0;
}

/* The regular file fd (st) as the entry w->path: st_size bytes of it. */
static int put_file(Walk *w, int fd, const struct stat *st) {
        off_t left = st->st_size;
        int r = put_header(w, st, NULL);

        while (r >= 0 && left > 0) {
                ssize_t n = read(fd, w->buf, (size_t) MIN((off_t) COPY_CHUNK, left));

                if (n < 0)
                        return fail(w, -errno, "read");
                if (n == 0) {
                        snprintf(w->err, w->errsize, "localPath: '%.300s' shrank while it was read: sync again",
                                 w->path);
                        return -EAGAIN;
                }
                if (archive_write_data(w->a, w->buf, (size_t) n) != n)
                        return archive_fail(w);
                left -= n;
        }
        return r;
}

static int walk_dir(Walk *w, int dfd, unsigned depth);

/* The entry name of the directory dfd, at w->path[0..plen). */
static int walk_entry(Walk *w, int dfd, const char *name, size_t plen, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st, again;
        int n = snprintf(w->path + plen, sizeof(w->path) - plen, "%s%s", plen ? "/" : "", name);

        if (n < 0 || (size_t) n >= sizeof(w->path) - plen)
                return fail(w, -ENAMETOOLONG, "name");
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return fail(w, -errno, "look at");
        if (S_ISLNK(st.st_mode)) {
                char target[SBX_PATH_MAX + 1];
                ssize_t k = readlinkat(dfd, name, target, sizeof(target) - 1);

                if (k < 0)
                        return fail(w, -errno, "read the symlink");
                target[k] = '\0';
                return put_header(w, &st, target);
        }
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
                w->out->special++;
                return 0;
        }
        fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC |
                    (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
        if (fd < 0)
                return fail(w, -errno, "open");
        /* What was opened is what was looked at (not swapped for a symlink meanwhile). */
        if (fstat(fd, &again) < 0 || again.st_ino != st.st_ino || again.st_dev != st.st_dev ||
            (again.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
                snprintf(w->err, w->errsize, "localPath: '%.300s' changed while it was read: sync again", w->path);
                return -EAGAIN;
        }
        if (S_ISREG(again.st_mode))
                return put_file(w, fd, &again);
        return put_header(w, &again, NULL) < 0 ? -EIO : walk_dir(w, fd, depth + 1);
}

static int walk_dir(Walk *w, int dfd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        size_t plen = strlen(w->path);
        struct dirent *de;

        if (depth > SBX_BOX_SYNC_DEPTH_MAX) {
                snprintf(w->err, w->errsize, "localPath: '%.300s' is more than %u directories deep "
                         "(SBX_BOX_SYNC_DEPTH_MAX)", w->path, SBX_BOX_SYNC_DEPTH_MAX);
                return -ELOOP;
        }
        d = opendir_at(dfd);
        if (!d)
                return fail(w, -errno, "list");
        while ((errno = 0, de = readdir(d))) {
                int r;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (excluded(de->d_name)) {
                        w->out->excluded++;
                        continue;
                }
                r = walk_entry(w, dfd, de->d_name, plen, depth);
                w->path[plen] = '\0';
                if (r < 0)
                        return r;
        }
        return errno ? fail(w, -errno, "list") : 0;
}

/* The top: a directory (its contents) or one regular file (by its name). */
static int walk_top(Walk *w, int dirfd, const char *local_path) {
        _cleanup_close_ int fd = openat(dirfd, local_path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        const char *base = strrchr(local_path, '/');
        struct stat st;

        if (fd < 0 || fstat(fd, &st) < 0)
                return fail(w, -errno, "open");
        if (S_ISDIR(st.st_mode))
                return walk_dir(w, fd, 0);
        if (!S_ISREG(st.st_mode)) {
                snprintf(w->err, w->errsize, "localPath: '%.300s' is neither a directory nor a regular file",
                         local_path);
                return -EINVAL;
        }
        snprintf(w->path, sizeof(w->path), "%s", base && base[1] ? base + 1 : local_path);
        return put_file(w, fd, &st);
}

int box_sync_tar(int dirfd, const char *local_path, BoxSyncTar *ret, char *err, size_t errsize) {
        _cleanup_(archive_freep) struct archive *a = archive_write_new();
        _cleanup_close_ int fd = memfd_create("sbx-sync", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        _cleanup_free_ uint8_t *buf = malloc(COPY_CHUNK);
        BoxSyncTar out = { .fd = -EBADF };
        Walk w = { .a = a, .buf = buf, .out = &out, .err = err, .errsize = errsize };
        struct stat st;
        int r;

        if (fd < 0)
                return -errno;
        if (!a || !buf)
                return -ENOMEM;
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK || archive_write_open_fd(a, fd) != ARCHIVE_OK)
                return archive_fail(&w);
        r = walk_top(&w, dirfd, local_path);
        if (r < 0)
                return r;
        if (archive_write_close(a) != ARCHIVE_OK)
                return archive_fail(&w);
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0 ||
            lseek(fd, 0, SEEK_SET) < 0 || fstat(fd, &st) < 0)
                return -errno;
        out.size = (uint64_t) st.st_size;
        out.fd = TAKE_FD(fd);
        *ret = out;
        return 0;
}
