#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"

int fd_nonblock(int fd, bool nonblock) {
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0)
                return -errno;
        flags = nonblock ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
        if (fcntl(fd, F_SETFL, flags) < 0)
                return -errno;
        return 0;
}

int fd_move_to(int fd, int target) {
        if (fd == target) {
                if (fcntl(fd, F_SETFD, 0) < 0)
                        return -errno;
                return 0;
        }
        /* dup2 clears FD_CLOEXEC on the new number, which is what exec needs. */
        if (dup2(fd, target) < 0)
                return -errno;
        return 0;
}

int loop_write(int fd, const void *buf, size_t len) {
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

/* read(2) (off < 0) or pread(2) until len bytes or EOF, through EINTR. */
static ssize_t loop_io(int fd, void *buf, size_t len, int64_t off) {
        char *p = buf;
        size_t done = 0;

        while (done < len) {
                ssize_t n = off < 0 ? read(fd, p + done, len - done)
                                    : pread(fd, p + done, len - done, (off_t) ((uint64_t) off + done));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                done += (size_t) n;
        }
        return (ssize_t) done;
}

ssize_t loop_read(int fd, void *buf, size_t len) {
        return loop_io(fd, buf, len, -1);
}

ssize_t loop_pread(int fd, void *buf, size_t len, uint64_t off) {
        return off > INT64_MAX ? -EOVERFLOW : loop_io(fd, buf, len, (int64_t) off);
}

int openat2_fd(int dirfd, const char *path, int flags, uint64_t resolve) {
        struct open_how how = { .flags = (uint64_t) flags | O_CLOEXEC, .resolve = resolve };
        int fd = (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

int read_file_bounded_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat2_fd(dirfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY,
                        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
        if (fd < 0)
                return fd;
        return read_fd_bounded(fd, max, ret, ret_len);
}

int read_fd_bounded(int fd, size_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t size, len = 0;
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EISDIR;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;
        /* The reported size and a byte more, to see EOF; a file that reports
         * none (cgroupfs, procfs) grows the buffer as it is read. */
        size = MIN(MAX((size_t) st.st_size, (size_t) 4095) + 1, max + 1);
        for (;;) {
                char *p = realloc(buf, size + 1);
                ssize_t n;

                if (!p)
                        return -ENOMEM;
                buf = p;
                n = loop_read(fd, buf + len, size - len);
                if (n < 0)
                        return (int) n;
                len += (size_t) n;
                if (len < size)
                        break; /* EOF */
                if (len > max)
                        return -EFBIG;
                size = MIN(size * 2, max + 1);
        }
        buf[len] = '\0';
        *ret = TAKE_PTR(buf);
        if (ret_len)
                *ret_len = len;
        return 0;
}

int read_file_at(int dirfd, const char *path, char **ret) {
        return read_file_bounded_at(dirfd, path, SBX_READ_FILE_MAX, ret, NULL);
}

int parse_u64(const char *s, uint64_t *ret) {
        unsigned long long v;
        char *end;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

int parse_size(const char *s, uint64_t *ret) {
        char digits[32];
        size_t n = strlen(s);
        unsigned shift = 0;
        uint64_t v;
        int r;

        switch (n ? s[n - 1] : '\0') {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: return parse_u64(s, ret);
        }
        if (n > sizeof(digits))
                return -ERANGE;
        memcpy(digits, s, n - 1);
        digits[n - 1] = '\0';
        r = parse_u64(digits, &v);
        if (r < 0)
                return r;
        if (v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = v << shift;
        return 0;
}

unsigned long long now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (unsigned long long) ts.tv_sec * 1000000ull + (unsigned long long) ts.tv_nsec / 1000u;
}

long long now_unix_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (long long) ts.tv_sec * 1000000ll + ts.tv_nsec / 1000;
}

void heap_keep_freed(size_t bytes) {
        /* glibc takes at most 32 MiB (64-bit) as the mmap threshold; beyond, it keeps its default. */
        (void) mallopt(M_MMAP_THRESHOLD, (int) bytes);
        (void) mallopt(M_TRIM_THRESHOLD, (int) bytes);
}

int random_hex(char *buf, size_t n) {
        unsigned char raw[64];
        if (n > sizeof(raw) * 2)
                return -EINVAL;
        if (getrandom(raw, (n + 1) / 2, 0) < 0)
                return -errno;
        for (size_t i = 0; i < n; i++)
                buf[i] = "0123456789abcdef"[(raw[i / 2] >> ((i % 2) * 4)) & 0xf];
        buf[n] = '\0';
        return 0;
}

int write_file_atomic_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode) {
        char tmp[256];
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (snprintf(tmp, sizeof(tmp), ".%s.tmp", name) >= (int) sizeof(tmp))
                return -ENAMETOOLONG;
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, buf, len);
        if (r < 0) {
                (void) unlinkat(dirfd, tmp, 0);
                return r;
        }
        return file_commit_at(fd, dirfd, tmp, name);
}

int file_commit_at(int fd, int dirfd, const char *tmp, const char *name) {
        int r = 0;

        if (fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dirfd, tmp, 0);
                return r;
        }
        return fsync(dirfd) < 0 && errno != EINVAL && errno != EBADF ? -errno : 0;
}

int dir_make_open_at(int dirfd, const char *name, mode_t mode, bool *ret_created) {
        bool created = mkdirat(dirfd, name, mode) >= 0;
        int fd;

        if (!created && errno != EEXIST)
                return -errno;
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (ret_created)
                *ret_created = created;
        return fd;
}

DIR *opendir_at(int dirfd) {
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;

        if (fd < 0)
                return NULL;
        d = fdopendir(fd);
        if (!d)
                safe_close(fd);
        return d;
}

ssize_t sendmsg_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds, int flags) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(SEND_FDS_MAX * sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > SEND_FDS_MAX) {
                errno = EINVAL;
                return -1;
        }
        if (n_fds > 0) {
                struct cmsghdr *cm;
                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
                memcpy(CMSG_DATA(cm), fds, n_fds * sizeof(int));
        }
        return sendmsg(sock, &mh, flags);
}

int send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds) {
        return sendmsg_with_fds(sock, data, len, fds, n_fds, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

#define VFORK_STACK_SIZE (64u * 1024u)

pid_t clone_vfork(int (*fn)(void *), int flags, void *arg, int *ret_pidfd) {
        static uint8_t *stack_top;
        int saved_errno = errno, pidfd = -EBADF;
        pid_t pid;

        if (!stack_top) {
                size_t page = (size_t) sysconf(_SC_PAGESIZE);
                uint8_t *p = mmap(NULL, VFORK_STACK_SIZE + page, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
                if (p == MAP_FAILED)
                        return -errno;
                /* The stack grows down onto this page: an overflow faults. */
                if (mprotect(p, page, PROT_NONE) < 0) {
                        int r = -errno;
                        (void) munmap(p, VFORK_STACK_SIZE + page);
                        return r;
                }
                stack_top = p + page + VFORK_STACK_SIZE;
        }
        pid = clone(fn, stack_top, CLONE_VM | CLONE_VFORK | flags | (ret_pidfd ? CLONE_PIDFD : 0) | SIGCHLD, arg,
                    &pidfd);
        if (pid < 0)
                return -errno;
        errno = saved_errno;
        if (ret_pidfd)
                *ret_pidfd = pidfd;
        return pid;
}

int random_id(const char *prefix, char *buf, size_t size) {
        char hex[13];
        int r = random_hex(hex, 12);

        if (r < 0)
                return r;
        snprintf(buf, size, "%s%s", prefix, hex);
        return 0;
}

int fd_trusted(int fd, char *ret_why, size_t why_size) {
        char path[PATH_MAX], proc[64];
        struct stat st;
        ssize_t n;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
                snprintf(ret_why, why_size, "not a regular file owned by root and writable only by it");
                return -EPERM;
        }
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        n = readlink(proc, path, sizeof(path) - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        path[n] = '\0';
        for (char *slash = strrchr(path, '/'); slash; slash = strrchr(path, '/')) {
                slash[slash == path ? 1 : 0] = '\0';
                if (stat(path, &st) < 0)
                        return -errno;
                if (st.st_uid != 0 || ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
                        snprintf(ret_why, why_size, "its directory %s is not root's or is writable by others", path);
                        return -EPERM;
                }
                if (slash == path)
                        break;
        }
        return 0;
}
