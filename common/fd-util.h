#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <dirent.h>

#include "sbx-limits.h"

int fd_nonblock(int fd, bool nonblock);
/* Move fd to number target (clearing close-on-exec there); used right before exec. */
int fd_move_to(int fd, int target);
/* Write all of buf (blocking fd). */
int loop_write(int fd, const void *buf, size_t len);

/* clone(fn, CLONE_VM | CLONE_VFORK | flags | SIGCHLD, arg), as posix_spawn
 * does: the child shares the caller's memory until it execs or exits, and the
 * caller waits until then, so no page tables are copied and neither side
 * takes copy-on-write faults. The child runs on a stack of its own with a
 * guard page (one per process, made at first use: the caller must be
 * single-threaded) and must touch nothing of the caller's memory but what
 * arg points to; it shares errno with the caller, whose errno is restored.
 * With ret_pidfd, the child's pidfd comes with it (CLONE_PIDFD), valid even
 * if the child is gone and reaped by then. Returns the pid or -errno. */
pid_t clone_vfork(int (*fn)(void *), int flags, void *arg, int *ret_pidfd);

/* fds one datagram carries at most: a job's inputs and its /out (core/job.h). */
#define SEND_FDS_MAX (SBX_SCRIPT_INPUTS_MAX + 1u)
/* One datagram of len bytes with up to SEND_FDS_MAX fds attached (SCM_RIGHTS), MSG_NOSIGNAL. */
int send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds);
/* The same with these sendmsg(2) flags, returning what sendmsg returns (errno set). */
ssize_t sendmsg_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds, int flags);
/* Read up to len bytes until EOF (blocking fd); returns bytes read. */
ssize_t loop_read(int fd, void *buf, size_t len);
/* The same from offset off on (pread(2)): returns bytes read, fewer only at EOF. */
ssize_t loop_pread(int fd, void *buf, size_t len, uint64_t off);
/* Monotonic and wall clocks in microseconds. */
unsigned long long now_usec(void);
long long now_unix_usec(void);
/* Keep up to `bytes` of freed heap memory mapped instead of returning it to
 * the kernel, and take allocations up to that size from the heap: a process
 * that handles big buffers request after request then reuses pages already
 * mapped instead of taking a page fault for every page of every buffer. */
void heap_keep_freed(size_t bytes);
/* Fill buf with n random lowercase hex characters and a NUL. */
int random_hex(char *buf, size_t n);
/* prefix and 12 random hex digits into buf (size bytes): "ws-3f9c0a1b2c4d". */
int random_id(const char *prefix, char *buf, size_t size);
/* Write a whole file atomically and durably below dirfd (tmp + fsync + rename). */
int write_file_atomic_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode);
/* The file tmp below dirfd, written through fd, made durable and renamed to
 * name (tmp removed if that fails), then the directory synced. */
int file_commit_at(int fd, int dirfd, const char *tmp, const char *name);
/* openat2(2) with O_CLOEXEC added to flags; resolve is RESOLVE_* flags. The fd or -errno. */
int openat2_fd(int dirfd, const char *path, int flags, uint64_t resolve);
/* The whole regular file at path below dirfd, NUL-terminated, if it holds at
 * most max bytes (-EFBIG otherwise; -EISDIR if it is not a regular file).
 * path is resolved beneath dirfd, following no symlink and crossing no mount
 * (openat2). Reads until EOF, so files whose size the kernel does not report
 * (cgroup and proc files say 0) come whole too. ret_len may be NULL. */
int read_file_bounded_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len);
/* The same of the file open on fd (an administrator's path, opened as given). */
int read_fd_bounded(int fd, size_t max, char **ret, size_t *ret_len);
/* read_file_bounded_at() of at most SBX_READ_FILE_MAX bytes: a kernel
 * interface or small state file, read as text. */
int read_file_at(int dirfd, const char *path, char **ret);
/* A decimal number: one or more digits and nothing else (no sign, no space);
 * -EINVAL otherwise, -ERANGE beyond UINT64_MAX. */
int parse_u64(const char *s, uint64_t *ret);
/* parse_u64() with an optional suffix K, M or G (either case): times 2^10,
 * 2^20 or 2^30; -ERANGE if that passes UINT64_MAX. */
int parse_size(const char *s, uint64_t *ret);
/* A directory stream of its own over dirfd's directory (a new open file
 * description: reading it never moves dirfd's offset). NULL with errno set. */
DIR *opendir_at(int dirfd);
/* Create the directory name below dirfd unless it exists (ret_created, if
 * given, says which) and open it without following a symlink. Returns the fd
 * (close-on-exec) or -errno. */
int dir_make_open_at(int dirfd, const char *name, mode_t mode, bool *ret_created);
static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

/* Whether fd is a regular file that root owns and only root may write, in
 * directories (up its real path) that are root's and writable by nobody
 * else (a sticky one, such as /tmp, may be writable by all: others cannot
 * replace what is root's in it). What sbxd runs or reads as root must be:
 * -EPERM with ret_why saying why not. */
int fd_trusted(int fd, char *ret_why, size_t why_size);
