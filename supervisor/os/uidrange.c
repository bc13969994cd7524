/* See uidrange.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"
#include "os/uidrange.h"

/* ---- allocation ---------------------------------------------------------------------- */

typedef struct FreeSearch {
        uint64_t uid_base, count;
        uint64_t candidate;             /* the lowest range not yet known to overlap one */
        bool found;
} FreeSearch;

/* Ranges come lowest base first: the candidate only ever moves up. */
static int free_search_step(const StoreUidRange *u, void *userdata) {
        FreeSearch *f = userdata;
        uint64_t end = (uint64_t) u->base + u->count;

        if (f->found || end <= f->candidate)
                return 0;
        if (u->base >= f->candidate + f->count) {
                f->found = true;        /* the gap below this range fits */
                return 0;
        }
        /* Overlap: the next range of the pool's grid at or above its end. */
        f->candidate = f->uid_base + (end - f->uid_base + f->count - 1) / f->count * f->count;
        return 0;
}

int uid_range_find_free(Store *st, uint32_t uid_base, uint32_t count, uint32_t *ret_base) {
        FreeSearch f = { .uid_base = uid_base, .count = count, .candidate = uid_base };
        int r;

        if (count == 0)
                return -EINVAL;
        r = store_uid_range_foreach(st, false, free_search_step, &f);
        if (r < 0)
                return r;
        if (f.candidate + count > SBX_IMAGE_BUILD_UID_BASE) /* the top range is the image builds' */
                return -ENOSPC;
        *ret_base = (uint32_t) f.candidate;
        return 0;
}

/* ---- moving a tree's ids ------------------------------------------------------------- */

typedef struct Shift {
        uint32_t from, to, count;
        unsigned depth_max;
} Shift;

static bool shift_id(const Shift *sh, uint32_t id, uint32_t *ret) {
        if (id < sh->from || id - sh->from >= sh->count) {
                *ret = id;
                return false;
        }
        *ret = sh->to + (id - sh->from);
        return true;
}

static int shift_dir(int fd, const Shift *sh, unsigned depth);

/* An entry's owner and group; the mode is put back, as chown drops set-id bits. */
static int shift_entry(int dirfd, const char *name, const Shift *sh, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        uid_t uid;
        gid_t gid;
        bool moved;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        moved = shift_id(sh, st.st_uid, &uid);
        moved = shift_id(sh, st.st_gid, &gid) || moved;
        if (!S_ISDIR(st.st_mode)) {
                if (moved && fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (moved && !S_ISLNK(st.st_mode) && fchmodat(dirfd, name, st.st_mode & 07777, 0) < 0)
                        return -errno;
                return 0;
        }
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (moved && (fchown(fd, uid, gid) < 0 || fchmod(fd, st.st_mode & 07777) < 0))
                return -errno;
        return shift_dir(fd, sh, depth + 1);
}

static int shift_dir(int fd, const Shift *sh, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;

        if (depth > sh->depth_max)
                return -ELOOP;
        d = opendir_at(fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                int r;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                r = shift_entry(dirfd(d), de->d_name, sh, depth);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

int uid_tree_shift(int dirfd, uint32_t from, uint32_t to, uint32_t count, unsigned depth_max) {
        const Shift sh = { .from = from, .to = to, .count = count, .depth_max = depth_max };

        if (count == 0 || (uint64_t) from + count > UINT32_MAX || (uint64_t) to + count > UINT32_MAX ||
            (from < to ? to - from : from - to) < count)
                return -EINVAL; /* the ranges must not overlap, or a rerun would move ids twice */
        return shift_dir(dirfd, &sh, 0);
}
