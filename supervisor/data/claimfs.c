#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "data/claimfs.h"
#include "fd-util.h"
#include "macro.h"

#define CLAIM_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
#define SENDFILE_CHUNK (1u << 20)

static const char *const kernel_dirs[] = { "proc", "sys", "dev" };

int claim_path(const char *in, char *out, char *err, size_t errsize) {
        char buf[SBX_PATH_MAX + 16];
        size_t len = 0;
        char *save = NULL;

        if (!in[0]) {
                snprintf(err, errsize, "path must not be empty: give a file below /workspace or an absolute path");
                return -EINVAL;
        }
        snprintf(buf, sizeof(buf), "%s%s", in[0] == '/' ? "" : "workspace/", in);
        out[0] = '\0';
        for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (strcmp(c, ".") == 0)
                        continue;
                if (strcmp(c, "..") == 0) {
                        char *slash;

                        if (len == 0) {
                                snprintf(err, errsize, "path '%.200s' climbs out of the sandbox ('..' above /): "
                                         "name a place inside it", in);
                                return -EINVAL;
                        }
                        slash = strrchr(out, '/');
                        len = slash ? (size_t) (slash - out) : 0;
                        out[len] = '\0';
                        continue;
                }
                if (len + strlen(c) + 2 > SBX_PATH_MAX) {
                        snprintf(err, errsize, "path is longer than %u bytes", SBX_PATH_MAX);
                        return -ENAMETOOLONG;
                }
                len += (size_t) sprintf(out + len, "%s%s", len ? "/" : "", c);
        }
        for (size_t i = 0; i < ELEMENTSOF(kernel_dirs); i++) {
                size_t k = strlen(kernel_dirs[i]);
                if (strncmp(out, kernel_dirs[i], k) == 0 && (out[k] == '\0' || out[k] == '/')) {
                        snprintf(err, errsize, "path '%.200s' is in /%s, the kernel's, not the sandbox's files: "
                                 "use execute_command to read it", in, kernel_dirs[i]);
                        return -EINVAL;
                }
        }
        return 0;
}

/* Filesystem ids of the claim's root for what follows; restore with fs_ids_back. */
static void fs_ids_to(uid_t uid) {
        (void) setfsgid(uid);
        (void) setfsuid(uid);
}

static void fs_ids_back(void) {
        (void) setfsuid(0);
        (void) setfsgid(0);
}

static const char *mode_type(mode_t m) {
        return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : "other";
}

static const char *open_error(int r) {
        switch (r) {
        case -ENOENT:
                return "no such file or directory";
        case -ENOTDIR:
                return "a component of the path is not a directory";
        case -EACCES:
        case -EPERM:
                return "permission denied (the sandbox's root may not)";
        case -EROFS:
                return "read-only here (the host's system directories are read-only in a sandbox)";
        case -ELOOP:
                return "too many levels of symbolic links";
        default:
                return strerror(-r);
        }
}

/* The directory rel below root, made (with its parents) if create. */
static int open_dir(int root, const char *rel, bool create, int *ret) {
        char prefix[SBX_PATH_MAX + 1];
        const char *p = rel;
        int fd, r;

        if (!rel[0]) {
                fd = openat2_fd(root, ".", O_PATH | O_DIRECTORY, CLAIM_RESOLVE);
                if (fd < 0)
                        return fd;
                *ret = fd;
                return 0;
        }
        for (;;) {
                const char *slash = strchr(p, '/');
                size_t n = slash ? (size_t) (slash - rel) : strlen(rel);

                memcpy(prefix, rel, n);
                prefix[n] = '\0';
                fd = openat2_fd(root, prefix, O_PATH | O_DIRECTORY, CLAIM_RESOLVE);
                if (fd == -ENOENT && create) {
                        _cleanup_close_ int parent = -EBADF;
                        char *last = strrchr(prefix, '/');

                        if (last)
                                *last = '\0';
                        r = open_dir(root, last ? prefix : "", false, &parent);
                        if (r < 0)
                                return r;
                        if (mkdirat(parent, last ? last + 1 : prefix, 0755) < 0) {
                                if (errno != EEXIST)
                                        return -errno;
                        } else if (fchmodat(parent, last ? last + 1 : prefix, 0755, 0) < 0)
                                return -errno;  /* 0755 whatever sbxd's umask */
                        if (last)
                                *last = '/';
                        fd = openat2_fd(root, prefix, O_PATH | O_DIRECTORY, CLAIM_RESOLVE);
                }
                if (fd < 0)
                        return fd;
                if (!slash) {
                        *ret = fd;
                        return 0;
                }
                safe_close(fd);
                p = slash + 1;
        }
}

static uint64_t now_unix_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

bool claimfs_deadline_passed(uint64_t deadline_unix_ms) {
        return deadline_unix_ms > 0 && now_unix_ms() >= deadline_unix_ms;
}

/* size bytes of in to out, SENDFILE_CHUNK at a time; -ETIMEDOUT once the
 * deadline (if any) passed between two of them. */
static int copy_fd(int out, int in, uint64_t size, uint64_t deadline_unix_ms) {
        off_t off = 0;

        while ((uint64_t) off < size) {
                ssize_t n;

                if (claimfs_deadline_passed(deadline_unix_ms))
                        return -ETIMEDOUT;
                n = sendfile(out, in, &off, (size_t) MIN(size - (uint64_t) off, (uint64_t) SENDFILE_CHUNK));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;    /* the source is shorter than it said */
        }
        return 0;
}

/* name below parent for writing: a new file of mode 0644 (whatever sbxd's
 * umask), or the existing one, truncated. */
static int open_create(int parent, const char *name) {
        struct open_how how = { .flags = O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
                                .mode = 0644, .resolve = CLAIM_RESOLVE };
        int fd = (int) syscall(SYS_openat2, parent, name, &how, sizeof(how));

        if (fd >= 0) {
                if (fchmod(fd, 0644) < 0) {
                        int r = -errno;
                        safe_close(fd);
                        return r;
                }
                return fd;
        }
        if (errno != EEXIST)
                return -errno;
        return openat2_fd(parent, name, O_WRONLY | O_TRUNC | O_NOCTTY | O_NONBLOCK, CLAIM_RESOLVE);
}

static const char *write_error(int r) {
        return r == -ENOSPC || r == -EDQUOT ? "the sandbox's disk is full"
               : r == -ETIMEDOUT            ? "its timeout passed (nothing was written)"
                                            : strerror(-r);
}

/* The content into a new file beside name (CLAIMFS_TEMP_PREFIX and random
 * hex, mode mode), renamed over name once whole: a failure, a timeout or a
 * crash never leaves a half-written name (a crash may leave the temporary
 * file). */
static int put_replace(int parent, const char *name, mode_t mode, int memfd, uint64_t size,
                       uint64_t deadline_unix_ms) {
        char tmp[sizeof(CLAIMFS_TEMP_PREFIX) + 16];
        struct open_how how = { .flags = O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
                                .mode = mode, .resolve = CLAIM_RESOLVE };
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = random_id(CLAIMFS_TEMP_PREFIX, tmp, sizeof(tmp));
        if (r < 0)
                return r;
        fd = (int) syscall(SYS_openat2, parent, tmp, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        r = fchmod(fd, mode) < 0 ? -errno : 0;     /* the mode whatever sbxd's umask */
        if (r >= 0)
                r = copy_fd(fd, memfd, size, deadline_unix_ms);
        if (r >= 0 && claimfs_deadline_passed(deadline_unix_ms))
                r = -ETIMEDOUT;
        if (r >= 0 && renameat(parent, tmp, parent, name) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(parent, tmp, 0);
        return r;
}

static int put_locked(int root, const char *rel, int memfd, uint64_t size, uint64_t deadline_unix_ms, char *err,
                      size_t errsize) {
        _cleanup_close_ int parent = -EBADF, fd = -EBADF;
        char dir[SBX_PATH_MAX + 1];
        const char *slash = strrchr(rel, '/'), *name = slash ? slash + 1 : rel;
        struct stat st;
        int r;

        if (!rel[0]) {
                snprintf(err, errsize, "path names the sandbox's root directory, not a file");
                return -EISDIR;
        }
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int) (slash - rel) : 0, rel);
        r = open_dir(root, dir, true, &parent);
        if (r < 0) {
                snprintf(err, errsize, "cannot create the directory '/%.200s': %s", dir, open_error(r));
                return r;
        }
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT) {
                        r = -errno;
                        snprintf(err, errsize, "cannot write '/%.200s': %s", rel, open_error(r));
                        return r;
                }
                st.st_mode = S_IFREG | 0644;
        }
        if (S_ISDIR(st.st_mode)) {
                snprintf(err, errsize, "cannot write '/%.200s': it is a directory", rel);
                return -EISDIR;
        }
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
                snprintf(err, errsize, "'/%.200s' is not a regular file", rel);
                return -EINVAL;
        }
        if (S_ISREG(st.st_mode))
                r = put_replace(parent, name, st.st_mode & 07777, memfd, size, deadline_unix_ms);
        else {
                /* Through a symlink (resolved inside the claim): the file it names, rewritten in place. */
                fd = open_create(parent, name);
                if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
                        snprintf(err, errsize, "'/%.200s' is not a regular file", rel);
                        return -EINVAL;
                }
                r = fd < 0 ? fd : copy_fd(fd, memfd, size, deadline_unix_ms);
        }
        if (r < 0)
                snprintf(err, errsize, "cannot write '/%.200s': %s", rel,
                         r == -EISDIR ? "it is a directory" : r == -ENOENT ? open_error(r) : write_error(r));
        return r;
}

int claimfs_put(int root, uid_t uid, const char *rel, int memfd, uint64_t size, uint64_t deadline_unix_ms, char *err,
                size_t errsize) {
        int r;

        fs_ids_to(uid);
        r = put_locked(root, rel, memfd, size, deadline_unix_ms, err, errsize);
        fs_ids_back();
        return r;
}

static int get_locked(int root, const char *rel, uint64_t max, uint64_t deadline_unix_ms, int *ret_memfd,
                      uint64_t *ret_size, char *err, size_t errsize) {
        _cleanup_close_ int fd = -EBADF, mem = -EBADF;
        struct stat st;
        int r;

        fd = openat2_fd(root, rel[0] ? rel : ".", O_RDONLY | O_NOCTTY | O_NONBLOCK, CLAIM_RESOLVE);
        if (fd < 0) {
                snprintf(err, errsize, "cannot read '/%.200s': %s", rel, open_error(fd));
                return fd;
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode)) {
                snprintf(err, errsize, "'/%.200s' is a directory: download_file reads files; list it with list_files",
                         rel);
                return -EISDIR;
        }
        if (!S_ISREG(st.st_mode)) {
                snprintf(err, errsize, "'/%.200s' is not a regular file", rel);
                return -EINVAL;
        }
        if ((uint64_t) st.st_size > max) {
                snprintf(err, errsize, "'/%.200s' has %llu bytes, more than download_file gives (%llu bytes, "
                         "SBX_CLAIM_FILE_MAX): split it in the sandbox (split -b) and download the parts", rel,
                         (unsigned long long) st.st_size, (unsigned long long) max);
                return -EFBIG;
        }
        mem = memfd_create("sbx-download", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (mem < 0)
                return -errno;
        r = copy_fd(mem, fd, (uint64_t) st.st_size, deadline_unix_ms);
        if (r < 0) {
                snprintf(err, errsize, "cannot read '/%.200s': %s", rel,
                         r == -ETIMEDOUT ? "its timeout passed" : strerror(-r));
                return r;
        }
        if (fcntl(mem, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) < 0 ||
            lseek(mem, 0, SEEK_SET) < 0)
                return -errno;
        *ret_size = (uint64_t) st.st_size;
        *ret_memfd = TAKE_FD(mem);
        return 0;
}

int claimfs_get(int root, uid_t uid, const char *rel, uint64_t max, uint64_t deadline_unix_ms, int *ret_memfd,
                uint64_t *ret_size, char *err, size_t errsize) {
        int r;

        fs_ids_to(uid);
        r = get_locked(root, rel, max, deadline_unix_ms, ret_memfd, ret_size, err, errsize);
        fs_ids_back();
        return r;
}

void claimfs_listing_done(ClaimFsListing *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->entries[i].name);
        free(l->entries);
        *l = (ClaimFsListing) {};
}

/* Keep name if it is among the max smallest so far (l->entries sorted, room for max). */
static int listing_offer(ClaimFsListing *l, size_t max, const char *name) {
        size_t lo = 0, hi = l->n;
        char *copy;

        l->total++;
        if (l->n == max && strcmp(name, l->entries[l->n - 1].name) > 0)
                return 0;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (strcmp(l->entries[mid].name, name) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        if (l->n == max)
                free(l->entries[--l->n].name);
        memmove(&l->entries[lo + 1], &l->entries[lo], (l->n - lo) * sizeof(ClaimFsEntry));
        l->entries[lo] = (ClaimFsEntry) { .name = copy };
        l->n++;
        return 0;
}

static int list_locked(int root, const char *rel, size_t max, ClaimFsListing *l, char *err, size_t errsize) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_(closedirp) DIR *d = NULL;
        int r;

        fd = openat2_fd(root, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY, CLAIM_RESOLVE);
        if (fd < 0) {
                snprintf(err, errsize, "cannot list '/%.200s': %s", rel,
                         fd == -ENOTDIR ? "it is not a directory" : open_error(fd));
                return fd;
        }
        l->entries = calloc(max, sizeof(ClaimFsEntry));
        d = opendir_at(fd);
        if (!l->entries || !d)
                return -ENOMEM;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                r = listing_offer(l, max, de->d_name);
                if (r < 0)
                        return r;
        }
        if (errno != 0)
                return -errno;
        for (size_t i = 0; i < l->n; i++) {
                struct stat st;
                ClaimFsEntry *e = &l->entries[i];

                if (fstatat(fd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        e->type = "other";      /* gone since readdir */
                        continue;
                }
                e->size = S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) ? (uint64_t) st.st_size : 0;
                e->type = mode_type(st.st_mode);
                e->mtime_usec = (int64_t) st.st_mtim.tv_sec * 1000000 + st.st_mtim.tv_nsec / 1000;
        }
        l->truncated = l->total > l->n;
        return 0;
}

int claimfs_list(int root, uid_t uid, const char *rel, size_t max, ClaimFsListing *ret, char *err, size_t errsize) {
        ClaimFsListing l = {};
        int r;

        fs_ids_to(uid);
        r = list_locked(root, rel, max, &l, err, errsize);
        fs_ids_back();
        if (r < 0) {
                claimfs_listing_done(&l);
                return r;
        }
        *ret = l;
        return 0;
}

int claimfs_mkdir(int root, uid_t uid, const char *rel, char *err, size_t errsize) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fs_ids_to(uid);
        r = open_dir(root, rel, true, &fd);
        fs_ids_back();
        if (r < 0)
                snprintf(err, errsize, "cannot make '/%.200s': %s", rel, open_error(r));
        return r < 0 ? r : 0;
}

int claimfs_stat(int root, uid_t uid, const char *rel, const char **ret_type) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fs_ids_to(uid);
        fd = openat2_fd(root, rel[0] ? rel : ".", O_PATH | O_NOFOLLOW, CLAIM_RESOLVE);
        fs_ids_back();
        if (fd == -ENOENT || fd == -ENOTDIR)
                return 0;
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        *ret_type = mode_type(st.st_mode);
        return 1;
}
