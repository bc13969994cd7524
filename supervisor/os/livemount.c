#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/layer.h"
#include "fd-util.h"
#include "macro.h"
#include "os/livemount.h"

typedef struct CloneArgs {
        int mnt;
        int fds[2];
        int err;
} CloneArgs;

/* In a child of a mount namespace of its own, made private: a->mnt attached
 * on /tmp there, then two detached clones of it into a->fds (the fd table is
 * the caller's, CLONE_FILES). */
static int clone_in_private_ns(void *userdata) {
        CloneArgs *a = userdata;

        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            move_mount(a->mnt, "", AT_FDCWD, "/tmp", MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                a->err = -errno;
                return 1;
        }
        for (size_t i = 0; i < ELEMENTSOF(a->fds); i++) {
                a->fds[i] = open_tree(AT_FDCWD, "/tmp", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (a->fds[i] < 0) {
                        a->err = -errno;
                        return 1;
                }
        }
        return 0;
}

/* Two detached clones of the detached mount mnt, which it consumes. Kernels
 * before 6.15 (Debian 12's 6.1) clone only a mount of the caller's own
 * namespace, not a detached one (open_tree(2) fails with EINVAL), so the
 * clones are made where mnt is attached, in a throw-away namespace. */
static int tmpfs_clones(int mnt, int ret_fds[2]) {
        CloneArgs a = { .mnt = mnt, .fds = { -EBADF, -EBADF } };
        int status = 0;
        pid_t pid = clone_vfork(clone_in_private_ns, CLONE_NEWNS | CLONE_FILES, &a, NULL);

        safe_close(mnt);
        if (pid < 0)
                return pid;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR) {
                        a.err = -errno;
                        break;
                }
        if (a.err == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
                a.err = -ECHILD;
        if (a.err < 0) {
                safe_close(a.fds[0]);
                safe_close(a.fds[1]);
                return a.err;
        }
        ret_fds[0] = a.fds[0];
        ret_fds[1] = a.fds[1];
        return 0;
}

int session_tmpfs_new(const char *source, uint64_t size, uid_t uid, mode_t mode, int *ret_mnt, int *ret_keep) {
        _cleanup_close_ int fs = -EBADF, mnt = -EBADF;
        int clones[2] = { -EBADF, -EBADF }, r;
        char size_s[24], uid_s[16], mode_s[8];

        snprintf(size_s, sizeof(size_s), "%" PRIu64, size);
        snprintf(uid_s, sizeof(uid_s), "%u", (unsigned) uid);
        snprintf(mode_s, sizeof(mode_s), "%04o", (unsigned) mode);
        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        if (fsconfig(fs, FSCONFIG_SET_STRING, "source", source, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "size", size_s, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "mode", mode_s, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "uid", uid_s, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "gid", uid_s, 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return -errno;
        r = tmpfs_clones(TAKE_FD(mnt), clones);
        if (r < 0)
                return r;
        *ret_mnt = clones[0];
        *ret_keep = clones[1];
        return 0;
}

/* PID 1's mount namespace if it is not sbxd's (*ret an nsfs fd), else *ret
 * -EBADF. One sbxd cannot open (a container's) is taken as not the host's. */
static int host_mntns(int *ret) {
        _cleanup_close_ int host = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
        struct stat a, b;

        *ret = -EBADF;
        if (host < 0)
                return errno == EACCES || errno == EPERM || errno == ENOENT ? 0 : -errno;
        if (fstat(host, &a) < 0 || stat("/proc/self/ns/mnt", &b) < 0)
                return -errno;
        if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
                *ret = TAKE_FD(host);
        return 0;
}

static int do_attach(int mnt, const char *path) {
        return move_mount(mnt, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0 ? -errno : 0;
}

static int do_detach(int unused, const char *path) {
        return umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT ? -errno : 0;
}

/* op(fd, path) in the host's mount namespace: in a child (setns(2) of a
 * mount namespace needs a process that shares no fs_struct with threads). */
static int in_host_ns(int (*op)(int, const char *), int fd, const char *path, bool also_here) {
        _cleanup_close_ int host = -EBADF;
        int r, status;
        pid_t pid;

        r = host_mntns(&host);
        if (r < 0)
                return r;
        if (host < 0)
                return op(fd, path);
        if (also_here && (r = op(fd, path)) < 0)
                return r;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0)
                _exit(setns(host, CLONE_NEWNS) < 0 ? errno : -op(fd, path));
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status))
                return -ECHILD;
        return -WEXITSTATUS(status);
}

int live_mount_attach(int mnt, const char *path) {
        return in_host_ns(do_attach, mnt, path, false);
}

int live_mount_detach(const char *path) {
        return in_host_ns(do_detach, -EBADF, path, true);
}

int live_session_path(const char *run_dir, const char *sb_id, const char *ws_id, const char *sub, char *buf) {
        int n = snprintf(buf, PATH_MAX, "%s/" LIVE_DIR "/%s/%s/%s", run_dir, sb_id, ws_id, sub);
        return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

int live_session_remove(const char *run_dir, const char *sb_id, int live, const char *ws_id) {
        static const char *const mounts[] = { LIVE_SESSION, LIVE_TMP, LIVE_WORK };
        char path[PATH_MAX];

        for (size_t i = 0; i < ELEMENTSOF(mounts); i++) {
                int r = live_session_path(run_dir, sb_id, ws_id, mounts[i], path);
                if (r >= 0)
                        r = live_mount_detach(path);
                if (r < 0)
                        return r;
        }
        return tree_remove_at(live, ws_id);
}
