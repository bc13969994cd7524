/* sbx-worker --import: builds a new sandbox's layer 0 for sbxd
 * (supervisor/core/sandbox.c). sbxd starts it as root with a socket at fd 3 and
 * the sandbox's layers directory at fd 4; it reads one ImportRequest and
 * answers one ImportResult. The source is opened without following any
 * symlink on its path, and every lookup in it is made with the owner's
 * filesystem ids and groups (supervisor/data/layer.h: TreeSource), so that
 * nothing the owner could not read is imported: what is left out is counted
 * and named. sbxd's state directory is never a source and never entered. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/layer.h"
#include "log.h"
#include "sbx-limits.h"
#include "wire.h"
#include "worker.h"

enum { IMPORT_SOCK_FD = 3, IMPORT_LAYERS_FD = 4 };

/* 1 if the directory fd is the one of dev/ino or below it, else 0. Walks up
 * with "..", as the caller (root), to the root of the mount namespace. */
static int dir_within(int fd, dev_t dev, ino_t ino) {
        _cleanup_close_ int cur = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        struct stat st, up;

        if (cur < 0 || fstat(cur, &st) < 0)
                return -errno;
        for (unsigned i = 0; i <= SBX_PATH_MAX; i++) {
                int parent;

                if (st.st_dev == dev && st.st_ino == ino)
                        return 1;
                parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (parent < 0 || fstat(parent, &up) < 0) {
                        int r = -errno;
                        safe_close(parent);
                        return r;
                }
                safe_close(cur);
                cur = parent;
                if (up.st_dev == st.st_dev && up.st_ino == st.st_ino)
                        return 0; /* the root */
                st = up;
        }
        return -ELOOP;
}

static void copy_failed(const char *src, int r, const TreeReport *rep, char *why, size_t size) {
        char shown[SBX_PATH_SHOWN_MAX + 1], depth[300];

        path_shown(rep->where, shown, sizeof(shown));
        if (rep->too_deep) {
                tree_depth_message(rep->where, depth, sizeof(depth));
                snprintf(why, size, "cannot import '%s': %s", src, depth);
        } else if (rep->excluded)
                snprintf(why, size, "cannot import '%s': it holds sbxd's state directory (at '%s')", src, shown);
        else if (rep->where[0])
                snprintf(why, size, "cannot import '%s': %s at '%s'", src, strerror(-r), shown);
        else
                snprintf(why, size, "cannot import '%s': %s", src, strerror(-r));
}

static int import_tree(const Sbx__ImportRequest *req, TreeReport *rep, char *why, size_t size) {
        TreeSource source = {
                .uid = req->reader_uid, .gid = req->reader_gid,
                .excluded_dev = (dev_t) req->state_dev, .excluded_ino = (ino_t) req->state_ino,
        };
        const char *src = req->source_dir;
        gid_t groups[SBX_IMPORT_GROUPS_MAX];
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (req->n_reader_groups > SBX_IMPORT_GROUPS_MAX || src[0] != '/')
                return -EINVAL;
        for (size_t i = 0; i < req->n_reader_groups; i++)
                groups[i] = req->reader_groups[i];
        if (setgroups(req->n_reader_groups, groups) < 0) {
                r = -errno;
                snprintf(why, size, "cannot take the owner's groups: %s", strerror(-r));
                return r;
        }
        r = tree_source_open(&source, src, &fd);
        if (r == -ELOOP)
                snprintf(why, size, "cannot import '%s': a symbolic link is on its path, and sbx follows none "
                         "there; give the path without links", src);
        else if (r == -EACCES || r == -EPERM)
                snprintf(why, size, "cannot import '%s': its owner (uid %u) may not read it", src, req->reader_uid);
        else if (r < 0)
                snprintf(why, size, "cannot open source directory '%s': %s", src, strerror(-r));
        if (r < 0)
                return r;
        r = dir_within(fd, source.excluded_dev, source.excluded_ino);
        if (r != 0) {
                snprintf(why, size, "cannot import '%s': %s", src,
                         r > 0 ? "it is sbxd's state directory or inside it" : strerror(-r));
                return r > 0 ? -EPERM : r;
        }
        r = layer_create(IMPORT_LAYERS_FD, 0, fd, (int) req->force_uid, 0, &source, NULL, rep);
        if (r < 0)
                copy_failed(src, r, rep, why, size);
        return r;
}

int import_run(void) {
        _cleanup_msg_ Sbx__Msg *m = NULL;
        Sbx__ImportResult res = SBX__IMPORT_RESULT__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;
        char why[800] = "", *paths[SBX_IMPORT_UNREADABLE_SHOWN];
        TreeReport rep = {};
        uint32_t seq;
        int r;

        log_set_context("import");
        r = wire_recv(IMPORT_SOCK_FD, &m, &seq, NULL, NULL);
        if (r >= 0 && m->type != SBX__MSG_TYPE__MSG_IMPORT_REQUEST)
                r = -EBADMSG;
        if (r < 0)
                return log_error_errno(r, "No import request from sbxd: %m");
        r = import_tree(m->import_request, &rep, why, sizeof(why));
        res.err = r < 0 ? r : 0;
        res.errmsg = why[0] ? why : (char *) (r < 0 ? strerror(-r) : "");
        res.entries = rep.entries;
        res.unreadable = rep.unreadable;
        res.n_unreadable_paths = MIN(rep.unreadable, SBX_IMPORT_UNREADABLE_SHOWN);
        for (size_t i = 0; i < res.n_unreadable_paths; i++)
                paths[i] = rep.unreadable_paths[i];
        res.unreadable_paths = paths;
        msg.type = SBX__MSG_TYPE__MSG_IMPORT_RESULT;
        msg.body_case = SBX__MSG__BODY_IMPORT_RESULT;
        msg.import_result = &res;
        r = wire_send(IMPORT_SOCK_FD, &msg, 0, NULL, 0);
        if (r < 0)
                return log_error_errno(r, "Failed to answer sbxd: %m");
        return 0;
}
