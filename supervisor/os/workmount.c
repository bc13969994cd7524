/* See workmount.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "os/workmount.h"
#include "sbx-limits.h"

/* A read-only idmapped clone of the layer directory fd. */
static int layer_idmapped(int fd, int userns_fd, int *ret) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                .userns_fd = (uint64_t) userns_fd,
        };
        _cleanup_close_ int m = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

        if (m < 0)
                return -errno;
        if (mount_setattr(m, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -errno;
        *ret = TAKE_FD(m);
        return 0;
}

/* A detached tmpfs of size_bytes (*ret_mount: its mount, which must stay open
 * until overlayfs has taken its layers: closing it dissolves the mount) with
 * WORK_UPPER (uid's) and "work". */
static int upper_tmpfs(uint64_t size_bytes, uid_t uid, int *ret_mount) {
        _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC), m = -EBADF;
        char opt[32];

        if (fs < 0)
                return -errno;
        snprintf(opt, sizeof(opt), "%llu", (unsigned long long) size_bytes);
        if (fsconfig(fs, FSCONFIG_SET_STRING, "size", opt, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (m < 0)
                return -errno;
        if (mkdirat(m, WORK_UPPER, 0755) < 0 || fchownat(m, WORK_UPPER, uid, uid, AT_SYMLINK_NOFOLLOW) < 0 ||
            mkdirat(m, "work", 0700) < 0)
                return -errno;
        *ret_mount = TAKE_FD(m);
        return 0;
}

/* The upper and work directories of the tmpfs mount m (upper_tmpfs's). */
static int upper_dirs(int m, int *ret_upper, int *ret_work) {
        _cleanup_close_ int upper = openat(m, WORK_UPPER, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (upper < 0)
                return -errno;
        *ret_work = openat(m, "work", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (*ret_work < 0)
                return -errno;
        *ret_upper = TAKE_FD(upper);
        return 0;
}

static int overlay_make(const int *lowers, size_t n, int upper, int work, int *ret) {
        _cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
        int m;

        if (fs < 0)
                return -errno;
        for (size_t i = 0; i < n; i++)
                if (fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lowers[i]) < 0)
                        return -errno;
        /* As the workspace's: a renamed directory is copied up whole, so its upper is a layer as data/layer.h says. */
        if (fsconfig(fs, FSCONFIG_SET_FD, "upperdir", NULL, upper) < 0 ||
            fsconfig(fs, FSCONFIG_SET_FD, "workdir", NULL, work) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "redirect_dir", "off", 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (m < 0)
                return -errno;
        *ret = m;
        return 0;
}

/* Attach mount_fd at target_fd in the mount namespace of pidfd's process:
 * this thread joins it for the one call and comes back. First this thread
 * gets a filesystem context of its own (setns(2) refuses one that other
 * threads share; sbxd's pool threads keep theirs); joining resets its root and
 * cwd, which are put back. */
static int mount_move_into(int pidfd, int mount_fd, int target_fd) {
        static int home = -EBADF;
        _cleanup_close_ int cwd = -EBADF;
        int r = 0;

        /* Each time: threads started since share it again (a context nobody shares is kept as is). */
        if (unshare(CLONE_FS) < 0)
                return -errno;
        if (home < 0 && (home = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0)
                return -errno;
        cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cwd < 0)
                return -errno;
        if (setns(pidfd, CLONE_NEWNS) < 0)
                return -errno;
        if (move_mount(mount_fd, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                r = -errno;
        /* sbxd must never resolve a path in a session's namespace: not coming back is fatal. */
        if (setns(home, CLONE_NEWNS) < 0 || fchdir(cwd) < 0)
                abort();
        return r;
}

int work_overlay_supported(void) {
        static int known = -1;
        _cleanup_close_ int tmpfs = -EBADF, upper = -EBADF, work = -EBADF, lower = -EBADF, overlay = -EBADF;

        if (known >= 0)
                return known;
        /* The same steps on a small tmpfs of its own, with a detached clone of one of its directories as the lower. */
        if (upper_tmpfs(1u << 20, 0, &tmpfs) < 0 || upper_dirs(tmpfs, &upper, &work) < 0 ||
            mkdirat(tmpfs, "lower", 0755) < 0)
                return 0;               /* not known: tried again next time */
        lower = open_tree(tmpfs, "lower", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        known = lower >= 0 && overlay_make(&lower, 1, upper, work, &overlay) >= 0;
        return known;
}

int work_overlay_attach(pid_t pid, int pidfd, int target_fd, const int *layer_fds, size_t n_layers,
                        uint64_t size_bytes, uid_t uid, int upper_mount, int *ret_upper_fd, int *ret_mount_fd) {
        _cleanup_close_ int userns = -EBADF, tmpfs = -EBADF, upper = -EBADF, work = -EBADF, overlay = -EBADF;
        int lowers[SBX_VERSION_LAYERS_MAX];
        char path[64];
        size_t made = 0;
        int r = 0;

        if (n_layers == 0 || n_layers > SBX_VERSION_LAYERS_MAX)
                return -EINVAL;
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) pid);
        userns = open(path, O_RDONLY | O_CLOEXEC);
        if (userns < 0)
                return -errno;
        /* Still the session's PID 1, not a process that took its pid since. */
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
                return -errno;
        for (; r >= 0 && made < n_layers; made++)
                r = layer_idmapped(layer_fds[made], userns, &lowers[made]);
        if (r < 0)
                made--;
        if (r >= 0 && upper_mount >= 0 && (tmpfs = fcntl(upper_mount, F_DUPFD_CLOEXEC, 3)) < 0)
                r = -errno;
        else if (r >= 0 && upper_mount < 0)
                r = upper_tmpfs(size_bytes, uid, &tmpfs);
        if (r >= 0)
                r = upper_dirs(tmpfs, &upper, &work);
        if (r >= 0)
                r = overlay_make(lowers, n_layers, upper, work, &overlay);
        for (size_t i = 0; i < made; i++)
                (void) close(lowers[i]);
        if (r >= 0)
                r = mount_move_into(pidfd, overlay, target_fd);
        if (r < 0)
                return r;
        *ret_upper_fd = TAKE_FD(upper);
        *ret_mount_fd = TAKE_FD(tmpfs);
        return 0;
}
