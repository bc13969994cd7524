#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fd-util.h"
#include "data/layer.h"
#include "macro.h"

#define OVL_OPAQUE_XATTR "trusted.overlay.opaque"


static int set_owner_mode_times(int fd, const struct stat *st, int force_uid, unsigned flags) {
        uid_t uid = force_uid >= 0 ? (uid_t) force_uid : st->st_uid;
        gid_t gid = force_uid >= 0 ? (gid_t) force_uid : st->st_gid;
        struct timespec ts[2] = { st->st_atim, st->st_mtim };
        mode_t mode = st->st_mode & 07777;

        /* A directory's setgid bit only picks the group of new files: it stays. */
        if ((flags & TREE_COPY_CLEAR_SETID) && !S_ISDIR(st->st_mode))
                mode &= ~(mode_t) (S_ISUID | S_ISGID);
        if (fchown(fd, uid, gid) < 0)
                return -errno;
        /* After chown, which clears set-id bits. */
        if (fchmod(fd, mode) < 0)
                return -errno;
        if (futimens(fd, ts) < 0)
                return -errno;
        return 0;
}

/* The regular files of a tree with more than one name, by inode: the path
 * (relative to the top) of the first name met, which later names link to.
 * Open addressing, at most half full. */
typedef struct LinkEntry {
        dev_t dev;
        ino_t ino;
        char *path;                     /* NULL: a free slot */
} LinkEntry;

typedef struct LinkTable {
        LinkEntry *slots;
        size_t n, cap;                  /* cap: 0 or a power of 2 */
} LinkTable;

static void link_table_done(LinkTable *t) {
        for (size_t i = 0; i < t->cap; i++)
                free(t->slots[i].path);
        free(t->slots);
        *t = (LinkTable) {};
}

static LinkEntry *link_table_slot(LinkEntry *slots, size_t cap, dev_t dev, ino_t ino) {
        size_t i = (size_t) ((ino * 0x9e3779b97f4a7c15ull) ^ dev) & (cap - 1);

        while (slots[i].path && (slots[i].dev != dev || slots[i].ino != ino))
                i = (i + 1) & (cap - 1);
        return &slots[i];
}

/* The first name of the inode, or NULL if it has none in the table yet. */
static const char *link_table_find(const LinkTable *t, const struct stat *st) {
        return t->cap ? link_table_slot(t->slots, t->cap, st->st_dev, st->st_ino)->path : NULL;
}

static int link_table_add(LinkTable *t, const struct stat *st, const char *path) {
        char *copy;

        if ((t->n + 1) * 2 > t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 64;
                LinkEntry *slots = calloc(cap, sizeof(*slots));
                if (!slots)
                        return -ENOMEM;
                for (size_t i = 0; i < t->cap; i++)
                        if (t->slots[i].path)
                                *link_table_slot(slots, cap, t->slots[i].dev, t->slots[i].ino) = t->slots[i];
                free(t->slots);
                t->slots = slots;
                t->cap = cap;
        }
        copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        *link_table_slot(t->slots, t->cap, st->st_dev, st->st_ino) =
                (LinkEntry) { .dev = st->st_dev, .ino = st->st_ino, .path = copy };
        t->n++;
        return 0;
}

typedef struct CopyContext {
        int force_uid;
        unsigned flags;
        const TreeSource *source;
        uid_t own_uid;                  /* the filesystem ids to come back to from the source's */
        gid_t own_gid;
        TreeReport *report;             /* its where is the path of the entry being copied */
        bool where_whole;               /* where names it whole (it was not too long to append) */
        int dst_top;                    /* the destination's top: later names of a file link to its first */
        LinkTable links;
        const TreeBudget *budget;       /* NULL: none */
        unsigned fsyncs;                /* TREE_COPY_FSYNC_FEW: done so far */
        uint64_t unchecked_bytes;       /* written since the free space was last looked at */
        uint32_t unchecked_entries;
} CopyContext;

/* Whether the free space of fd's filesystem is still above the reserve. */
static int reserve_check(CopyContext *ctx, int fd) {
        const TreeBudget *b = ctx->budget;
        struct statvfs sv;

        ctx->unchecked_bytes = 0;
        ctx->unchecked_entries = 0;
        if (!b || b->reserve_bytes == 0)
                return 0;
        if (fstatvfs(fd, &sv) < 0)
                return -errno;
        if ((uint64_t) sv.f_bavail * sv.f_frsize >= b->reserve_bytes)
                return 0;
        ctx->report->stopped = TREE_STOP_RESERVE;
        ctx->report->free_bytes = (uint64_t) sv.f_bavail * sv.f_frsize;
        return -ENOSPC;
}

/* Before an entry that will take bytes and one inode more: within the budget? */
static int budget_take(CopyContext *ctx, int fd, uint64_t bytes, uint64_t inodes) {
        const TreeBudget *b = ctx->budget;
        TreeUsage *w = &ctx->report->written;

        if (!b)
                return 0;
        if (b->cancelled && atomic_load(b->cancelled))
                return -ECANCELED;
        if (bytes > b->max_bytes || w->bytes > b->max_bytes - bytes) {
                ctx->report->stopped = TREE_STOP_BYTES;
                return -EDQUOT;
        }
        if (inodes > b->max_inodes || w->inodes > b->max_inodes - inodes) {
                ctx->report->stopped = TREE_STOP_INODES;
                return -EDQUOT;
        }
        ctx->unchecked_entries++; /* the bytes are counted as copy_range writes them */
        if (ctx->unchecked_bytes >= SBX_RESERVE_CHECK_BYTES || ctx->unchecked_entries >= SBX_RESERVE_CHECK_ENTRIES)
                return reserve_check(ctx, fd);
        return 0;
}

/* fd was written: fsynced while the copy is small (TREE_COPY_FSYNC_FEW). */
static int sync_written(CopyContext *ctx, int fd) {
        if (!(ctx->flags & TREE_COPY_FSYNC_FEW) || ctx->report->unsynced)
                return 0;
        if (++ctx->fsyncs > SBX_LAYER_FSYNC_MAX) {
                ctx->report->unsynced = true; /* the caller syncs the filesystem once */
                return 0;
        }
        return fsync(fd) < 0 ? -errno : 0;
}

/* What fd, just written, allocated: counted in the report. */
static int account(CopyContext *ctx, int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        ctx->report->written.bytes += (uint64_t) st.st_blocks * 512;
        ctx->report->written.inodes++;
        return 0;
}

/* One buffer of in at off, written to out at off: how much, 0 at the end. */
static ssize_t copy_plain(int in, int out, off_t off, size_t want) {
        char buf[65536];
        ssize_t n = loop_pread(in, buf, MIN(sizeof(buf), want), (uint64_t) off);

        if (n <= 0)
                return n;
        /* A short write (the target filling up) is written on: the next one says why
         * (errno here would still be copy_file_range's EXDEV). */
        for (ssize_t done = 0; done < n;) {
                ssize_t w = pwrite(out, buf + done, (size_t) (n - done), off + done);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                if (w == 0)
                        return -EIO;
                done += w;
        }
        return n;
}

/* Copy bytes [off, end) of in to out at the same offsets, the reserve looked
 * at every SBX_RESERVE_CHECK_BYTES. */
static int copy_range(CopyContext *ctx, int in, int out, off_t off, off_t end) {
        bool plain = false;

        while (off < end) {
                size_t want = (size_t) MIN((uint64_t) (end - off), (uint64_t) SBX_RESERVE_CHECK_BYTES);
                loff_t in_off = off, out_off = off;
                ssize_t n = plain ? 0 : copy_file_range(in, &in_off, out, &out_off, want, 0);

                if (!plain && n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
                                return -errno;
                        plain = true;
                }
                if (plain)
                        n = copy_plain(in, out, off, want);
                if (n <= 0)
                        return (int) n; /* 0: shorter than it was, what there is is copied */
                off += n;
                ctx->unchecked_bytes += (uint64_t) n;
                if (ctx->unchecked_bytes >= SBX_RESERVE_CHECK_BYTES) {
                        int r = reserve_check(ctx, out);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* Copy the data of in (st: its size and blocks) into the empty out, its
 * holes left holes. A file with as many blocks as bytes has no hole to look
 * for (what it allocated ahead reads as zeros and is copied as such), and
 * out is sized only for a trailing hole: ext4 truncates (a journal handle
 * and the orphan list) even to the size a file has, once per file of an
 * import. */
static int copy_data(CopyContext *ctx, int in, int out, const struct stat *st) {
        off_t size = st->st_size, pos = 0, end = 0;

        if ((uint64_t) st->st_blocks * 512 >= (uint64_t) size)
                return copy_range(ctx, in, out, 0, size);
        while (pos < size) {
                off_t data = lseek(in, pos, SEEK_DATA), hole;
                if (data < 0 && errno == ENXIO)
                        break; /* only a hole from here */
                if (data < 0) {
                        if (errno != EINVAL && errno != EOPNOTSUPP)
                                return -errno;
                        /* No hole finding here: copy it all. */
                        data = pos;
                        hole = size;
                } else {
                        hole = lseek(in, data, SEEK_HOLE);
                        if (hole < 0)
                                return -errno;
                }
                int r = copy_range(ctx, in, out, data, MIN(hole, size));
                if (r < 0)
                        return r;
                pos = hole;
                end = MIN(hole, size);
        }
        /* A trailing hole, or a file of holes only. */
        return end < size && ftruncate(out, size) < 0 ? -errno : 0;
}

/* Append name to the path being copied (unless it would not fit); returns the
 * length to cut it back to. */
static size_t path_push(TreeReport *rep, const char *name, bool *ret_whole) {
        size_t len = strlen(rep->where), n = strlen(name), sep = len ? 1 : 0;

        *ret_whole = len + sep + n <= SBX_PATH_MAX;
        if (*ret_whole) {
                rep->where[len] = '/';
                memcpy(rep->where + len + sep, name, n + 1);
        }
        return len;
}

static int set_fs_ids(uid_t uid, gid_t gid) {
        (void) setfsgid(gid);
        (void) setfsuid(uid);
        /* Both return the previous id whether they worked or not: ask again. */
        if ((uid_t) setfsuid(uid) != uid || (gid_t) setfsgid(gid) != gid)
                return -EPERM;
        return 0;
}

/* Enter (or leave) the source's filesystem ids around a lookup in the source. */
static int as_source(const CopyContext *ctx, bool enter) {
        if (!ctx->source)
                return 0;
        return enter ? set_fs_ids(ctx->source->uid, ctx->source->gid) : set_fs_ids(ctx->own_uid, ctx->own_gid);
}

/* The three kinds of lookup in the source; each returns -errno on failure. */
static int source_stat(const CopyContext *ctx, int dirfd, const char *name, struct stat *ret) {
        int r = as_source(ctx, true);
        if (r >= 0 && fstatat(dirfd, name, ret, AT_SYMLINK_NOFOLLOW) < 0)
                r = -errno;
        return as_source(ctx, false) < 0 ? -EPERM : r;
}

static int source_open(const CopyContext *ctx, int dirfd, const char *name, int flags) {
        int r = as_source(ctx, true), fd = -EBADF;
        if (r >= 0 && (fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0)
                r = -errno;
        if (as_source(ctx, false) < 0) {
                safe_close(fd);
                return -EPERM;
        }
        return r < 0 ? r : fd;
}

static ssize_t source_readlink(const CopyContext *ctx, int dirfd, const char *name, char *buf, size_t size) {
        int r = as_source(ctx, true);
        ssize_t n = -1;
        if (r >= 0 && (n = readlinkat(dirfd, name, buf, size)) < 0)
                r = -errno;
        return as_source(ctx, false) < 0 ? -EPERM : r < 0 ? r : n;
}

/* A failed lookup in the source: with a source reader, one it may not
 * read is left out and counted, the first ones named; others fail. */
static int source_failed(const CopyContext *ctx, int r) {
        TreeReport *rep = ctx->report;

        if (!ctx->source || (r != -EACCES && r != -EPERM))
                return r;
        if (rep->unreadable < SBX_IMPORT_UNREADABLE_SHOWN)
                path_shown(rep->where, rep->unreadable_paths[rep->unreadable], sizeof(rep->unreadable_paths[0]));
        rep->unreadable++;
        return 0;
}

static int copy_entry(int src_dirfd, int dst_dirfd, const char *name, CopyContext *ctx, unsigned depth);

static int copy_dir_contents(int src_fd, int dst_fd, CopyContext *ctx, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        int r;

        if (depth > SBX_TREE_DEPTH_MAX) {
                ctx->report->too_deep = true;
                return -ELOOP;
        }
        /* The reader opened src_fd: reading the directory it names needs nothing more. */
        d = opendir_at(src_fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                bool whole_before = ctx->where_whole;
                size_t len = path_push(ctx->report, de->d_name, &ctx->where_whole);
                ctx->where_whole = ctx->where_whole && whole_before;
                r = copy_entry(dirfd(d), dst_fd, de->d_name, ctx, depth);
                if (r < 0)
                        return r;
                ctx->report->where[len] = '\0';
                ctx->where_whole = whole_before;
        }
        return errno ? -errno : 0;
}

static int copy_dir(int src_dirfd, int dst_dirfd, const char *name, CopyContext *ctx, unsigned depth) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        const TreeSource *src = ctx->source;
        struct stat st;
        char opaque[4];
        ssize_t n;
        int r;

        in = source_open(ctx, src_dirfd, name, O_RDONLY | O_DIRECTORY);
        if (in < 0)
                return source_failed(ctx, in);
        if (fstat(in, &st) < 0)
                return -errno;
        if (src && st.st_dev == src->excluded_dev && st.st_ino == src->excluded_ino) {
                ctx->report->excluded = true;
                return -EXDEV;
        }
        r = budget_take(ctx, dst_dirfd, 0, 1); /* its block is counted once it is made */
        if (r < 0)
                return r;
        if (mkdirat(dst_dirfd, name, 0700) < 0)
                return -errno;
        out = openat(dst_dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (out < 0)
                return -errno;
        r = account(ctx, out);
        if (r < 0)
                return r;
        n = fgetxattr(in, OVL_OPAQUE_XATTR, opaque, sizeof(opaque));
        if (n > 0 && !(ctx->flags & TREE_COPY_DROP_WHITEOUTS)) {
                if (fsetxattr(out, OVL_OPAQUE_XATTR, opaque, (size_t) n, 0) < 0)
                        return -errno;
                ctx->report->entries++;
        }
        r = copy_dir_contents(in, out, ctx, depth + 1);
        if (r >= 0)
                r = set_owner_mode_times(out, &st, ctx->force_uid, ctx->flags);
        return r < 0 ? r : sync_written(ctx, out);
}

/* Layers are immutable: a merged base may share their files. */
static int link_file(int src_dirfd, int dst_dirfd, const char *name, const struct stat *st, CopyContext *ctx) {
        _cleanup_close_ int out = -EBADF;

        ctx->report->entries++;
        ctx->report->written.bytes += (uint64_t) st->st_blocks * 512; /* the layer holds it now */
        ctx->report->written.inodes++;
        bool clear = (ctx->flags & TREE_COPY_CLEAR_SETID) && (st->st_mode & 06000);
        if (!clear && (!(ctx->flags & TREE_COPY_FSYNC_FEW) || ctx->report->unsynced))
                return 0;
        out = openat(dst_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (out < 0)
                return -errno;
        /* The inode is shared: its other names lose the bits too, which is what we want. */
        if (clear && fchmod(out, st->st_mode & 01777) < 0)
                return -errno;
        return sync_written(ctx, out);
}

/* A further name of a file already copied: a link to its first. */
static int link_again(int dst_dirfd, const char *name, const char *first, CopyContext *ctx) {
        if (linkat(ctx->dst_top, first, dst_dirfd, name, 0) < 0)
                return -errno;
        ctx->report->entries++;
        return 0;
}

static int copy_file(int src_dirfd, int dst_dirfd, const char *name, const struct stat *lst, CopyContext *ctx) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        struct stat st;
        int r;

        if ((ctx->flags & TREE_COPY_HARDLINK) && linkat(src_dirfd, name, dst_dirfd, name, 0) == 0)
                return link_file(src_dirfd, dst_dirfd, name, lst, ctx);
        if ((ctx->flags & TREE_COPY_HARDLINK) && errno != EXDEV)
                return -errno;
        in = source_open(ctx, src_dirfd, name, O_RDONLY);
        if (in < 0)
                return source_failed(ctx, in);
        if (fstat(in, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return 0; /* replaced since it was listed: nothing to copy */
        const char *first = st.st_nlink > 1 ? link_table_find(&ctx->links, &st) : NULL;
        if (first)
                return link_again(dst_dirfd, name, first, ctx);
        r = budget_take(ctx, dst_dirfd, (uint64_t) st.st_blocks * 512, 1);
        if (r < 0)
                return r;
        out = openat(dst_dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        r = copy_data(ctx, in, out, &st);
        if (r >= 0)
                r = account(ctx, out);
        if (r < 0)
                return r;
        ctx->report->entries++;
        r = set_owner_mode_times(out, &st, ctx->force_uid, ctx->flags);
        if (r >= 0)
                r = sync_written(ctx, out);
        if (r >= 0 && st.st_nlink > 1 && ctx->where_whole)
                r = link_table_add(&ctx->links, &st, ctx->report->where);
        return r;
}

static int copy_entry(int src_dirfd, int dst_dirfd, const char *name, CopyContext *ctx, unsigned depth) {
        int force_uid = ctx->force_uid;
        struct stat st;
        int r;

        r = source_stat(ctx, src_dirfd, name, &st);
        if (r < 0)
                return source_failed(ctx, r);
        uid_t uid = force_uid >= 0 ? (uid_t) force_uid : st.st_uid;
        gid_t gid = force_uid >= 0 ? (gid_t) force_uid : st.st_gid;

        switch (st.st_mode & S_IFMT) {
        case S_IFDIR:
                return copy_dir(src_dirfd, dst_dirfd, name, ctx, depth);
        case S_IFREG:
                return copy_file(src_dirfd, dst_dirfd, name, &st, ctx);
        case S_IFLNK:
        case S_IFCHR:
        case S_IFIFO:
                r = budget_take(ctx, dst_dirfd, 0, 1);
                if (r < 0)
                        return r;
                break;
        default:
                return 0; /* sockets, block devices */
        }
        switch (st.st_mode & S_IFMT) {
        case S_IFLNK: {
                char target[4096];
                ssize_t n = source_readlink(ctx, src_dirfd, name, target, sizeof(target) - 1);

                if (n < 0)
                        return source_failed(ctx, (int) n);
                target[n] = '\0';
                if (symlinkat(target, dst_dirfd, name) < 0)
                        return -errno;
                break;
        }
        case S_IFCHR:
                /* Only the overlayfs whiteout (0/0) is meaningful in a layer. */
                if (major(st.st_rdev) != 0 || minor(st.st_rdev) != 0 || (ctx->flags & TREE_COPY_DROP_WHITEOUTS))
                        return 0;
                _fallthrough_;
        case S_IFIFO:
                if (mknodat(dst_dirfd, name, st.st_mode & (S_IFMT | 0777), st.st_rdev) < 0)
                        return -errno;
                break;
        default:
                break;
        }
        if (fchownat(dst_dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        ctx->report->entries++;
        ctx->report->written.inodes++; /* a fast symlink, a whiteout, a fifo: no block */
        return 0;
}

int tree_copy(int src_dirfd, int dst_dirfd, int force_uid, unsigned flags, const TreeSource *source,
              const TreeBudget *budget, TreeReport *report) {
        TreeReport own = {};
        CopyContext ctx = {
                .force_uid = force_uid, .flags = flags, .source = source,
                .own_uid = geteuid(), .own_gid = getegid(), .report = report ?: &own,
                .where_whole = true, .dst_top = dst_dirfd, .budget = budget,
        };
        int r;

        *ctx.report = (TreeReport) {};
        r = copy_dir_contents(src_dirfd, dst_dirfd, &ctx, 0);
        /* The end of the copy is looked at too, however little it wrote since. */
        if (r >= 0 && (ctx.unchecked_bytes || ctx.unchecked_entries))
                r = reserve_check(&ctx, dst_dirfd);
        if (r >= 0)
                ctx.report->where[0] = '\0';
        link_table_done(&ctx.links);
        return r;
}

int tree_copy_entry(int src_dirfd, int dst_dirfd, const char *name, unsigned flags) {
        TreeReport report = {};
        CopyContext ctx = { .force_uid = -1, .flags = flags, .report = &report, .dst_top = dst_dirfd };
        int r = copy_entry(src_dirfd, dst_dirfd, name, &ctx, 0);

        link_table_done(&ctx.links);
        return r;
}

typedef struct UsageWalk {
        uint64_t dir_bytes;
        LinkTable seen;
        TreeUsage usage;
} UsageWalk;

static int usage_walk(int fd, UsageWalk *w, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;

        if (depth > SBX_TREE_DEPTH_MAX)
                return -ELOOP;
        d = opendir_at(fd);
        if (!d)
                return -errno;
        w->usage.bytes += w->dir_bytes;
        w->usage.inodes++;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                struct stat st;
                int r;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = openat(dirfd(d), de->d_name,
                                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return -errno;
                        r = usage_walk(sub, w, depth + 1);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (st.st_nlink > 1 && S_ISREG(st.st_mode)) {
                        if (link_table_find(&w->seen, &st))
                                continue;
                        r = link_table_add(&w->seen, &st, "");
                        if (r < 0)
                                return r;
                }
                w->usage.bytes += (uint64_t) st.st_blocks * 512;
                w->usage.inodes++;
        }
        return errno ? -errno : 0;
}

int tree_usage(int dirfd, uint64_t dir_bytes, TreeUsage *ret) {
        UsageWalk w = { .dir_bytes = dir_bytes };
        int r = usage_walk(dirfd, &w, 0);

        link_table_done(&w.seen);
        if (r < 0)
                return r;
        /* The top directory is the layer's own, counted once it is made. */
        w.usage.bytes -= dir_bytes;
        w.usage.inodes--;
        *ret = w.usage;
        return 0;
}

/* What walk_contents does at each entry: pre before it descends into a
 * directory (sub: the directory, opened without following a symlink;
 * -EBADF for anything else), post after; either may be NULL. */
typedef struct TreeVisitor {
        int (*pre)(int dirfd, const char *name, int sub, void *userdata);
        int (*post)(int dirfd, const char *name, bool dir, void *userdata);
        void *userdata;
} TreeVisitor;

/* Every entry below fd (. and .. skipped), depth first. */
static int walk_contents(int fd, unsigned depth, const TreeVisitor *v) {
        _cleanup_(closedirp) DIR *d = NULL;

        if (depth > SBX_TREE_DEPTH_MAX * 4)
                return -ELOOP;
        d = opendir_at(fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                _cleanup_close_ int sub = -EBADF;
                int r = 0;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_type == DT_DIR) {
                        sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                return -errno;
                }
                if (v->pre)
                        r = v->pre(dirfd(d), de->d_name, sub, v->userdata);
                if (r >= 0 && sub >= 0)
                        r = walk_contents(sub, depth + 1, v);
                if (r >= 0 && v->post)
                        r = v->post(dirfd(d), de->d_name, sub >= 0, v->userdata);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

static int remove_pre(int dirfd, const char *name, int sub, void *userdata) {
        /* Directories may be read-only; we are removing them anyway. */
        if (sub >= 0)
                (void) fchmod(sub, 0700);
        return 0;
}

static int remove_post(int dirfd, const char *name, bool dir, void *userdata) {
        return unlinkat(dirfd, name, dir ? AT_REMOVEDIR : 0) < 0 ? -errno : 0;
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
        r = walk_contents(fd, 0, &(TreeVisitor) { .pre = remove_pre, .post = remove_post });
        if (r < 0)
                return r;
        return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* An entry to the owner (TreeVisitor.userdata): a symlink itself, never
 * what it points to; chown clears setuid and setgid bits of files. */
static int chown_pre(int dirfd, const char *name, int sub, void *userdata) {
        const uid_t *ids = userdata;

        return fchownat(dirfd, name, ids[0], (gid_t) ids[1], AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

int tree_chown_at(int dirfd, const char *name, uid_t uid, gid_t gid) {
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r;

        if (fd < 0)
                return -errno;
        r = walk_contents(fd, 0, &(TreeVisitor) { .pre = chown_pre, .userdata = (uid_t[2]) { uid, (uid_t) gid } });
        if (r >= 0 && (fchown(fd, uid, gid) < 0 || fchmod(fd, 0700) < 0))
                r = -errno;
        return r;
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
                 const TreeSource *source, const TreeBudget *budget, TreeReport *report) {
        unsigned copy_flags = TREE_COPY_CLEAR_SETID | TREE_COPY_FSYNC_FEW |
                              (flags & LAYER_LINK_FILES ? TREE_COPY_HARDLINK : 0);
        TreeReport own = {};
        char tmp[32], final[16];
        _cleanup_close_ int dst = -EBADF;
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
        report = report ?: &own;
        r = tree_copy(src_dirfd, dst, force_uid, copy_flags, source, budget, report);
        if (r < 0)
                goto fail;
        if (force_uid >= 0 && fchown(dst, (uid_t) force_uid, (gid_t) force_uid) < 0) {
                r = -errno;
                goto fail;
        }
        /* Everything of the layer reaches the disk before its name does: what
         * a small one wrote is fsynced, a larger one syncs the filesystem once
         * (docs/benchmarks.md: 20,000 small files). */
        if ((report->unsynced ? syncfs(dst) : fsync(dst)) < 0) {
                r = -errno;
                goto fail;
        }
        if (renameat(layers_dirfd, tmp, layers_dirfd, final) < 0) {
                r = -errno;
                goto fail;
        }
        if (fsync(layers_dirfd) < 0)
                return -errno;
        return 0;
fail:
        (void) tree_remove_at(layers_dirfd, tmp);
        return r;
}

int tree_source_open(const TreeSource *source, const char *path, int *ret_fd) {
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY,
                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        uid_t own_uid = geteuid();
        gid_t own_gid = getegid();
        int fd = -EBADF, r;

        r = set_fs_ids(source->uid, source->gid);
        if (r >= 0 && (fd = (int) syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how))) < 0)
                r = -errno;
        if (set_fs_ids(own_uid, own_gid) < 0) {
                if (r >= 0)
                        safe_close(fd);
                return -EPERM;
        }
        if (r < 0)
                return r;
        *ret_fd = fd;
        return 0;
}

static bool utf8_continuation(char c) {
        return ((unsigned char) c & 0xc0) == 0x80;
}

void path_shown(const char *path, char *buf, size_t size) {
        size_t len = strlen(path), head = SBX_PATH_SHOWN_MAX / 2 - 2, tail = len - head;

        if (len <= SBX_PATH_SHOWN_MAX) {
                snprintf(buf, size, "%s", path);
                return;
        }
        /* Cut between characters, not inside one. */
        while (head > 0 && utf8_continuation(path[head]))
                head--;
        while (path[tail] && utf8_continuation(path[tail]))
                tail++;
        snprintf(buf, size, "%.*s...%s", (int) head, path, path + tail);
}

void tree_depth_message(const char *where, char *buf, size_t size) {
        char shown[SBX_PATH_SHOWN_MAX + 1];

        path_shown(where, shown, sizeof(shown));
        snprintf(buf, size, "the tree is deeper than the layer depth limit of %u directory levels at '%s'",
                 SBX_TREE_DEPTH_MAX, shown);
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
