#include <dirent.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "data/attribution.h"
#include "fd-util.h"
#include "data/fileops.h"
#include "data/layer.h"
#include "core/layerquota.h"
#include "data/renames.h"
#include "log.h"
#include "core/publish.h"
#include "sbx-limits.h"
#include "core/sandbox.h"
#include "core/snapshot.h"

void manifest_done(Manifest *m) {
        for (size_t i = 0; i < m->n; i++)
                free(m->changes[i].path);
        free(m->changes);
        m->changes = NULL;
        m->n = 0;
}

static int manifest_add(Manifest *m, size_t *cap, const char *path, ChangeKind kind) {
        int r;

        if (m->n >= SBX_PUBLISH_MAX_PATHS)
                return -E2BIG;
        r = ARRAY_RESERVE(m->changes, *cap, m->n + 1);
        if (r < 0)
                return r;
        m->changes[m->n].path = strdup(path);
        if (!m->changes[m->n].path)
                return -ENOMEM;
        m->changes[m->n++].kind = kind;
        return 0;
}

static int manifest_walk(int fd, char *path, size_t len, unsigned depth, Manifest *m, size_t *cap) {
        DIR *d;
        int r = 0;

        if (depth > SBX_TREE_DEPTH_MAX)
                return -ELOOP; /* path names this directory */
        d = opendir_at(fd);
        if (!d)
                return -errno;
        for (struct dirent *de; r >= 0 && (errno = 0, de = readdir(d));) {
                struct stat st;
                size_t nlen = strlen(de->d_name);

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (len + nlen + 2 > SBX_PATH_MAX) {
                        r = -ENAMETOOLONG;
                        break;
                }
                if (len)
                        path[len] = '/';
                memcpy(path + len + (len ? 1 : 0), de->d_name, nlen + 1);
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = -errno;
                        break;
                }
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = openat(dirfd(d), de->d_name,
                                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        char v[4];
                        if (sub < 0) {
                                r = -errno;
                                break;
                        }
                        if (fgetxattr(sub, "trusted.overlay.opaque", v, sizeof(v)) > 0)
                                r = manifest_add(m, cap, path, CHANGE_OPAQUE_DIR);
                        if (r >= 0)
                                r = manifest_walk(sub, path, len + (len ? 1 : 0) + nlen, depth + 1, m, cap);
                        if (r == -ELOOP)
                                break; /* path names the directory that passed the limit */
                } else if (S_ISREG(st.st_mode))
                        r = manifest_add(m, cap, path, CHANGE_FILE);
                else if (S_ISLNK(st.st_mode))
                        r = manifest_add(m, cap, path, CHANGE_SYMLINK);
                else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
                        r = manifest_add(m, cap, path, CHANGE_WHITEOUT);
                else if (S_ISFIFO(st.st_mode))
                        r = manifest_add(m, cap, path, CHANGE_OTHER);
                path[len] = '\0';
        }
        if (r >= 0 && errno)
                r = -errno;
        closedir(d);
        return r;
}

int manifest_build(int dirfd, Manifest *ret, char *ret_too_deep) {
        Manifest m = {};
        size_t cap = 0;
        char path[SBX_PATH_MAX + 1] = "";
        int r;

        r = manifest_walk(dirfd, path, 0, 0, &m, &cap);
        if (r < 0) {
                manifest_done(&m);
                if (r == -ELOOP && ret_too_deep)
                        memcpy(ret_too_deep, path, sizeof(path));
                return r;
        }
        *ret = m;
        return 0;
}

void publish_result_done(PublishResult *r) {
        for (size_t i = 0; i < r->n_conflicts; i++)
                free(r->conflicts[i]);
        free(r->conflicts);
        r->conflicts = NULL;
        r->n_conflicts = 0;
}

/* ---- what a session would publish --------------------------------------------------- */

static const char *change_name(ChangeKind kind, bool existed) {
        if (kind == CHANGE_WHITEOUT)
                return "deleted";
        return existed ? "modified" : "added";
}

/* The unified diff of one changed path (if both sides are text) appended to d->diff. */
static void diff_append(ChangesDiff *d, int base, int upper, const Change *ch, bool existed) {
        _cleanup_free_ char *old = NULL, *new = NULL, *piece = NULL;
        size_t old_len = 0, new_len = 0, piece_len = 0, len = d->reply.diff.len;
        bool cut = false;

        if (d->reply.truncated || (ch->kind != CHANGE_FILE && ch->kind != CHANGE_WHITEOUT))
                return;
        if (existed && read_file_bounded_at(base, ch->path, SBX_FILE_MAX, &old, &old_len) < 0)
                return;
        if (ch->kind == CHANGE_FILE && read_file_bounded_at(upper, ch->path, SBX_FILE_MAX, &new, &new_len) < 0)
                return;
        if ((old && !text_is_utf8(old, old_len)) || (new && !text_is_utf8(new, new_len)) || (!old && !new))
                return;
        if (text_unified_diff(ch->path, old, old_len, new, new_len, SBX_DIFF_MAX_BYTES - len, &piece, &piece_len,
                              &cut) < 0)
                return;
        memcpy(d->diff + len, piece, piece_len);
        d->reply.diff.len = len + piece_len;
        d->reply.truncated = cut;
}

int changes_diff(int view, int upper_fd, ChangesDiff *ret, char *ret_why, size_t why_size) {
        _cleanup_close_ int upper = -EBADF;
        ChangesDiff d = { .reply = SBX__SESSION_DIFF_REPLY__INIT };
        char too_deep[SBX_PATH_MAX + 1];
        int r;

        upper = openat(upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = upper < 0 ? -errno : manifest_build(upper, &d.manifest, too_deep);
        if (r == -ELOOP)
                tree_depth_message(too_deep, ret_why, why_size);
        if (r >= 0) {
                d.changes = calloc(d.manifest.n + 1, sizeof(*d.changes));
                d.ptrs = calloc(d.manifest.n + 1, sizeof(*d.ptrs));
                d.diff = malloc(SBX_DIFF_MAX_BYTES + 1);
                if (!d.changes || !d.ptrs || !d.diff)
                        r = -ENOMEM;
        }
        if (r < 0) {
                changes_diff_done(&d);
                return r;
        }
        for (size_t i = 0; i < d.manifest.n; i++) {
                const Change *ch = &d.manifest.changes[i];
                struct stat st;
                bool existed = fstatat(view, ch->path, &st, AT_SYMLINK_NOFOLLOW) == 0;

                sbx__changed_path__init(&d.changes[i]);
                d.changes[i].path = ch->path;
                d.changes[i].change = (char *) change_name(ch->kind, existed);
                d.ptrs[i] = &d.changes[i];
                diff_append(&d, view, upper, ch, existed);
        }
        d.reply.n_changes = d.manifest.n;
        d.reply.changes = d.ptrs;
        d.reply.diff.data = (uint8_t *) d.diff;
        *ret = d;
        return 0;
}

void changes_diff_done(ChangesDiff *d) {
        manifest_done(&d->manifest);
        free(d->changes);
        free(d->ptrs);
        free(d->diff);
        d->changes = NULL;
        d->ptrs = NULL;
        d->diff = NULL;
}

/* ---- conflicts --------------------------------------------------------------------- */

typedef struct PathSet {
        char **paths;
        size_t n, cap;
} PathSet;

static void path_set_done(PathSet *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->paths[i]);
        free(p->paths);
}

static int path_set_add(const char *path, void *userdata) {
        PathSet *p = userdata;
        int r = ARRAY_RESERVE(p->paths, p->cap, p->n + 1);

        if (r < 0)
                return r;
        p->paths[p->n] = strdup(path);
        if (!p->paths[p->n])
                return -ENOMEM;
        p->n++;
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static bool path_set_has(const PathSet *p, const char *path) {
        return p->n && bsearch(&path, p->paths, p->n, sizeof(char *), cmp_str);
}

/* path itself or one of its ancestors is in the set. */
static bool path_set_covers(const PathSet *p, const char *path) {
        char buf[SBX_PATH_MAX + 1];
        size_t len = strlen(path);

        if (len > SBX_PATH_MAX)
                return false;
        memcpy(buf, path, len + 1);
        for (;;) {
                char *slash;
                if (path_set_has(p, buf))
                        return true;
                slash = strrchr(buf, '/');
                if (!slash)
                        return false;
                *slash = '\0';
        }
}

static int conflicts_add(PublishResult *res, const char *path) {
        char **n = realloc(res->conflicts, (res->n_conflicts + 2) * sizeof(char *));
        if (!n)
                return -ENOMEM;
        res->conflicts = n;
        res->conflicts[res->n_conflicts] = strdup(path);
        if (!res->conflicts[res->n_conflicts])
                return -ENOMEM;
        res->conflicts[++res->n_conflicts] = NULL;
        return 0;
}

static int find_conflicts(Store *store, const char *sandbox_id, uint32_t top, uint32_t base, const Manifest *m,
                          PublishResult *res) {
        PathSet later = {}, ours = {};
        int r = 0;

        if (base >= top)
                return 0;
        r = store_paths_changed_after(store, sandbox_id, base, path_set_add, &later);
        for (size_t i = 0; r >= 0 && i < m->n; i++)
                r = path_set_add(m->changes[i].path, &ours);
        if (r < 0)
                goto out;
        qsort(later.paths, later.n, sizeof(char *), cmp_str);
        qsort(ours.paths, ours.n, sizeof(char *), cmp_str);
        /* Same path, or one side replaced a directory the other changed something under. */
        for (size_t i = 0; r >= 0 && i < ours.n && res->n_conflicts < SBX_CONFLICTS_REPORTED; i++)
                if (path_set_covers(&later, ours.paths[i]))
                        r = conflicts_add(res, ours.paths[i]);
        for (size_t i = 0; r >= 0 && i < later.n && res->n_conflicts < SBX_CONFLICTS_REPORTED; i++)
                if (path_set_covers(&ours, later.paths[i]) && !path_set_has(&ours, later.paths[i]))
                        r = conflicts_add(res, later.paths[i]);
out:
        path_set_done(&later);
        path_set_done(&ours);
        return r;
}

/* ---- attribution ------------------------------------------------------------------- */

typedef struct BlameOps {
        StoreBlameOp *ops;
        size_t n, cap;
} BlameOps;

static void blame_ops_done(BlameOps *o) {
        for (size_t i = 0; i < o->n; i++) {
                free(o->ops[i].path);
                free(o->ops[i].ranges);
        }
        free(o->ops);
}

static int blame_ops_add(BlameOps *o, const char *path, char *ranges, bool tree) {
        int r = ARRAY_RESERVE(o->ops, o->cap, o->n + 1);

        if (r < 0) {
                free(ranges);
                return r;
        }
        o->ops[o->n].path = strdup(path);
        if (!o->ops[o->n].path) {
                free(ranges);
                return -ENOMEM;
        }
        o->ops[o->n].ranges = ranges;
        o->ops[o->n++].tree = tree;
        return 0;
}

/* The attribution of the file as published now: its record, or "original"
 * for a file untouched since import, or "unknown". Fails with -ENOENT if the
 * old text is not attributable (absent, binary, too large). */
int blame_of_published(Store *store, const char *sandbox_id, const char *path, const char *text, size_t len,
                       Blame *ret) {
        _cleanup_free_ char *rec = NULL;
        int r;

        r = store_blame_get(store, sandbox_id, path, &rec);
        if (r >= 0) {
                Blame b = {};
                r = blame_parse(rec, strlen(rec), &b);
                if (r >= 0 && (b.n_ranges == 0 ? 0 : b.ranges[b.n_ranges - 1].start_line +
                                                             b.ranges[b.n_ranges - 1].line_count - 1) ==
                                      text_count_lines(text, len)) {
                        *ret = b;
                        return 0;
                }
                blame_done(&b);
                return blame_new(text, len, "unknown", ret);
        }
        if (r != -ENOENT)
                return r;
        r = store_path_changed_since_import(store, sandbox_id, path);
        if (r < 0)
                return r;
        return blame_new(text, len, r ? "unknown" : "original", ret);
}

/* What attribution reads, off the loop: the publication's own store
 * connection and view, and the deleted files it may find renamed. */
typedef struct AttributeContext {
        Store *store;
        const char *sandbox_id;
        int view_fd;
        int src_fd;
        const Manifest *m;
        const char *owner;
        const PublishOperation *op;
        Renames renames;
        bool renames_listed;
} AttributeContext;

static int read_deleted(void *userdata, const char *path, char **ret, size_t *ret_len) {
        const AttributeContext *ctx = userdata;
        return read_file_bounded_at(ctx->view_fd, path, SBX_FILE_MAX, ret, ret_len);
}

/* The files this publication deletes, by size (once, when a new file first needs them). */
static int renames_list(AttributeContext *ctx) {
        if (ctx->renames_listed)
                return 0;
        ctx->renames_listed = true;
        for (size_t i = 0; i < ctx->m->n; i++) {
                const Change *c = &ctx->m->changes[i];
                struct stat st;
                int r;

                if (c->kind != CHANGE_WHITEOUT || fstatat(ctx->view_fd, c->path, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode) || (uint64_t) st.st_size > SBX_FILE_MAX)
                        continue;
                r = renames_add(&ctx->renames, c->path, (uint64_t) st.st_size);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A file that appears where none was, with the very content of a file this
 * publication deletes, was renamed: its lines keep their owners. */
static int blame_of_renamed(AttributeContext *ctx, const char *text, size_t len, Blame *ret) {
        _cleanup_free_ char *old = NULL;
        const char *path = NULL;
        size_t old_len = 0;
        int r;

        r = renames_list(ctx);
        if (r >= 0)
                r = renames_find(&ctx->renames, text, len, &path);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;
        r = read_file_bounded_at(ctx->view_fd, path, SBX_FILE_MAX, &old, &old_len);
        if (r < 0)
                return r;
        return blame_of_published(ctx->store, ctx->sandbox_id, path, old, old_len, ret);
}

/* The text the caller already has (known), else the file's, read into *buf. */
static int text_of(const char *known, size_t known_len, int dirfd, const char *path, char **buf, const char **ret,
                   size_t *ret_len) {
        int r;

        if (known) {
                *ret = known;
                *ret_len = known_len;
                return 0;
        }
        r = read_file_bounded_at(dirfd, path, SBX_FILE_MAX, buf, ret_len);
        *ret = *buf;
        return r;
}

static int attribute_file(AttributeContext *ctx, const char *path, BlameOps *ops) {
        _cleanup_free_ char *new_buf = NULL, *old_buf = NULL, *ser = NULL;
        const PublishOperation *op = ctx->op;
        const char *new_text = NULL, *old_text = NULL;
        size_t new_len = 0, old_len = 0, ser_len;
        bool known = op && strcmp(op->path, path) == 0;
        Blame old = {}, updated = {};
        int r;

        r = text_of(known ? op->new_text : NULL, known ? op->new_len : 0, ctx->src_fd, path, &new_buf, &new_text,
                    &new_len);
        if (r < 0 || !text_is_utf8(new_text, new_len))
                return blame_ops_add(ops, path, NULL, false); /* not attributable: no record */

        r = text_of(known ? op->old_text : NULL, known ? op->old_len : 0, ctx->view_fd, path, &old_buf, &old_text,
                    &old_len);
        if (r >= 0 && text_is_utf8(old_text, old_len) &&
            blame_of_published(ctx->store, ctx->sandbox_id, path, old_text, old_len, &old) >= 0) {
                r = blame_update(&old, old_text, old_len, new_text, new_len, ctx->owner, &updated);
                blame_done(&old);
        } else if (r == -ENOENT && blame_of_renamed(ctx, new_text, new_len, &updated) >= 0)
                r = 0;
        else
                r = blame_new(new_text, new_len, ctx->owner, &updated);
        if (r < 0)
                return r;
        r = blame_serialize(&updated, &ser, &ser_len);
        blame_done(&updated);
        if (r < 0)
                return r;
        return blame_ops_add(ops, path, TAKE_PTR(ser), false);
}

static int attribute(AttributeContext *ctx, const atomic_bool *cancelled, BlameOps *ops) {
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ctx->m->n; i++) {
                const Change *c = &ctx->m->changes[i];

                if (atomic_load(cancelled))
                        return -ECANCELED;
                switch (c->kind) {
                case CHANGE_FILE:
                        r = attribute_file(ctx, c->path, ops);
                        break;
                case CHANGE_WHITEOUT:
                case CHANGE_OPAQUE_DIR:
                        /* Everything that was at or below the path is gone. */
                        r = blame_ops_add(ops, c->path, NULL, true);
                        break;
                default:
                        r = blame_ops_add(ops, c->path, NULL, false);
                        break;
                }
        }
        return r;
}

/* ---- the publication ------------------------------------------------------------------ */

struct Publication {
        /* copied by publish_begin */
        char sandbox_id[SBX_SANDBOX_ID_SIZE];
        uid_t owner_uid;                /* the sandbox's: owner_layers_max_bytes */
        const LayerLimits *limits;      /* borrowed (the server's) */
        StoreConns *conns;              /* a reference */
        char owner[64];
        uint32_t base_layer, top, seq;
        bool overwrite;
        int force_uid;
        bool link_files;
        int src_fd, layers_fd, view_fd;
        PublishOperation op;            /* path and texts owned, when has_op */
        bool has_op;
        /* made by publish_run */
        Manifest m;
        BlameOps ops;
        PublishResult res;
        bool built;                     /* layers/SEQ exists */
        bool recorded;                  /* and its record is committed (publish_run) */
        uint32_t squashed;              /* the sandbox's base when begin ran */
        int compacted;                  /* 0: the merged base of 0..seq was built; 1: none was due; < 0: failed */
        StoreLayerSize size;            /* what layers/SEQ took (core/layerquota.h) */
};

static int dup_fd(int fd) {
        int r = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        return r < 0 ? -errno : r;
}

static int dup_text(const char *text, size_t len, const char **ret) {
        char *copy;

        if (!text) {
                *ret = NULL;
                return 0;
        }
        copy = malloc(len + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, text, len);
        copy[len] = '\0';
        *ret = copy;
        return 0;
}

static int publication_copy_op(Publication *p, const PublishOperation *op) {
        int r;

        p->has_op = true;
        p->op = (PublishOperation) { .old_len = op->old_len, .new_len = op->new_len };
        p->op.path = strdup(op->path);
        if (!p->op.path)
                return -ENOMEM;
        r = dup_text(op->old_text, op->old_len, &p->op.old_text);
        if (r >= 0)
                r = dup_text(op->new_text, op->new_len, &p->op.new_text);
        return r;
}

static void publication_free(Publication *p) {
        if (!p)
                return;
        safe_close(p->src_fd);
        safe_close(p->layers_fd);
        safe_close(p->view_fd);
        store_conns_unref(p->conns);
        if (p->has_op) {
                free((char *) p->op.path);
                free((char *) p->op.old_text);
                free((char *) p->op.new_text);
        }
        manifest_done(&p->m);
        blame_ops_done(&p->ops);
        publish_result_done(&p->res);
        free(p);
}

int publish_begin(Store *store, const LayerLimits *limits, Sandbox *sb, StoreConns *conns, int src_dirfd, const char *owner,
                  uint32_t base_layer, bool overwrite, int force_uid, const PublishOperation *op, Publication **ret) {
        Publication *p = calloc(1, sizeof(*p));
        int view, r;

        if (!p)
                return -ENOMEM;
        p->src_fd = p->layers_fd = p->view_fd = -EBADF;
        strlcpy(p->sandbox_id, sb->id, sizeof(p->sandbox_id));
        p->owner_uid = sb->owner_uid;
        p->limits = limits;
        p->conns = store_conns_ref(conns);
        strlcpy(p->owner, owner, sizeof(p->owner));
        p->base_layer = base_layer;
        p->top = sb->top_layer;
        p->seq = sb->top_layer + 1;
        p->squashed = sb->squashed;
        p->compacted = 1;
        p->overwrite = overwrite;
        p->force_uid = force_uid;
        p->link_files = op != NULL;
        /* The view of the snapshot as it is now: a stack the kernel mounts (compacted if it had to be). */
        r = snapshot_current(store, sb, &view);
        if (r >= 0)
                r = p->view_fd = dup_fd(view);
        if (r >= 0)
                r = p->src_fd = dup_fd(src_dirfd);
        if (r >= 0)
                r = p->layers_fd = dup_fd(sb->layers_fd);
        if (r >= 0 && op)
                r = publication_copy_op(p, op);
        if (r < 0) {
                publication_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

/* ---- the record, off the loop ------------------------------------------------------- */

typedef enum RecordStep {
        RECORD_BEGIN,   /* the layer's row, pending, if the sandbox's top and the quotas allow it now */
        RECORD_PATHS,   /* its changed paths from..from+n */
        RECORD_BLAME,   /* its attribution changes from..from+n */
        RECORD_COMMIT,  /* durably: the layer counts */
        RECORD_DISCARD, /* the pending layer and all its rows go */
        RECORD_FOLD,    /* earlier layers' attribution changes into the records (n at most) */
        RECORD_WHOLE,   /* a small record: its row, paths and attribution, durably, at once */
} RecordStep;

/* The layer's row if the sandbox's top and the quotas allow it now: pending
 * (store_layer_begin), or with pending false, counting at once. */
static int record_begin(Store *w, Publication *p, bool pending) {
        uint32_t top;
        int r = store_layer_top(w, p->sandbox_id, &top);

        if (r >= 0 && top != p->top)
                return -ESTALE;
        /* Publications in other sandboxes of the owner may have been recorded while this one was built. */
        if (r >= 0)
                r = layer_quota_recheck(w, &(LayerTarget) { .limits = p->limits, .sandbox_id = p->sandbox_id,
                                                            .owner_uid = p->owner_uid },
                                        &p->size, p->res.error, sizeof(p->res.error));
        if (r >= 0)
                r = (pending ? store_layer_begin : store_layer_insert)(w, p->sandbox_id, p->seq, p->owner,
                                                                       (uint32_t) p->m.n, time(NULL), &p->size);
        return r;
}

static int record_paths(Store *w, Publication *p, size_t from, size_t n) {
        const char *paths[SBX_STORE_WRITE_ROWS];

        for (size_t i = 0; i < n; i++)
                paths[i] = p->m.changes[from + i].path;
        return store_layer_paths_insert(w, p->sandbox_id, p->seq, paths, n);
}

/* The whole record of a small publication (record_is_small): what earlier
 * layers left to fold was folded first, so its attribution changes go
 * straight into the records. */
static int record_whole(Store *w, Publication *p) {
        int r = record_begin(w, p, false);

        if (r >= 0)
                r = record_paths(w, p, 0, p->m.n);
        if (r >= 0)
                r = store_blame_apply(w, p->sandbox_id, p->ops.ops, p->ops.n);
        return r;
}

/* One step in one transaction; *ret_n (RECORD_FOLD): how many it folded. */
static int record_step(Store *w, Publication *p, RecordStep step, size_t from, size_t n, size_t *ret_n) {
        int r = (step == RECORD_COMMIT || step == RECORD_WHOLE ? store_begin_durable : store_begin)(w);

        if (r < 0)
                return r;
        switch (step) {
        case RECORD_BEGIN:
                r = record_begin(w, p, true);
                break;
        case RECORD_WHOLE:
                r = record_whole(w, p);
                break;
        case RECORD_PATHS:
                r = record_paths(w, p, from, n);
                break;
        case RECORD_BLAME:
                r = store_blame_pending_insert(w, p->sandbox_id, p->seq, from, p->ops.ops + from, n);
                break;
        case RECORD_COMMIT:
                r = store_layer_commit(w, p->sandbox_id, p->seq);
                break;
        case RECORD_DISCARD:
                r = store_layer_discard(w, p->sandbox_id, p->seq);
                break;
        case RECORD_FOLD:
                r = store_blame_fold(w, p->sandbox_id, n, ret_n);
                break;
        }
        if (r < 0) {
                store_rollback(w);
                return r;
        }
        return store_commit(w);
}

/* A step that follows another of the record's transactions leaves a gap
 * before it: a connection waiting to write (the loop's, looking every
 * SBX_STORE_BUSY_POLL_US) gets its turn. */
static int record_step_after(Store *w, Publication *p, RecordStep step, size_t from, size_t n, size_t *ret_n,
                             const atomic_bool *cancelled) {
        (void) usleep(SBX_STORE_WRITE_GAP_US);
        return atomic_load(cancelled) ? -ECANCELED : record_step(w, p, step, from, n, ret_n);
}

/* Steps of rows from..total of one kind, SBX_STORE_WRITE_ROWS at a time. */
static int record_rows(Store *w, Publication *p, RecordStep step, size_t total, const atomic_bool *cancelled) {
        int r = 0;

        for (size_t i = 0; r >= 0 && i < total; i += SBX_STORE_WRITE_ROWS)
                r = record_step_after(w, p, step, i, MIN(SBX_STORE_WRITE_ROWS, total - i), NULL, cancelled);
        return r;
}

/* For tests (stall.test.mjs): while the file SBX_TEST_HOLD_RECORD names
 * exists, a record waits before its commit: a large one with its rows
 * written (pending), a small one before its one transaction. */
static void record_test_hold(const atomic_bool *cancelled) {
        const char *hold = getenv("SBX_TEST_HOLD_RECORD");

        while (hold && access(hold, F_OK) == 0 && !atomic_load(cancelled))
                (void) usleep(SBX_TEST_HOLD_POLL_US);
}

/* A record the loop's writes may wait for whole: its rows (paths and
 * attribution changes) no more than one step of a large record writes. */
static bool record_is_small(const Publication *p) {
        return p->m.n + p->ops.n <= SBX_STORE_WRITE_ROWS;
}

/* The layer's record: a small one in one durable transaction; a large one in
 * steps short enough that the loop's writes never wait long for the
 * database, nothing of it counting before the last. */
static int record(Store *w, Publication *p, const atomic_bool *cancelled) {
        int r;

        if (record_is_small(p)) {
                record_test_hold(cancelled);
                r = atomic_load(cancelled) ? -ECANCELED : record_step(w, p, RECORD_WHOLE, 0, 0, NULL);
                if (r < 0)
                        return r;
                p->recorded = true;
                return 0;
        }
        r = record_step(w, p, RECORD_BEGIN, 0, 0, NULL);
        if (r < 0)
                return r;
        r = record_rows(w, p, RECORD_PATHS, p->m.n, cancelled);
        if (r >= 0)
                r = record_rows(w, p, RECORD_BLAME, p->ops.n, cancelled);
        if (r >= 0)
                record_test_hold(cancelled);
        if (r >= 0 && atomic_load(cancelled))
                r = -ECANCELED;
        if (r >= 0)
                r = record_step_after(w, p, RECORD_COMMIT, 0, 0, NULL, cancelled);
        if (r < 0) {
                (void) record_step(w, p, RECORD_DISCARD, 0, 0, NULL);
                return r;
        }
        p->recorded = true;
        return 0;
}

/* What earlier publications of the sandbox left to fold, folded in steps
 * (one, finding nothing, when there is none). */
static int record_fold(Store *w, Publication *p, const atomic_bool *cancelled) {
        size_t n = 0;
        int r = atomic_load(cancelled) ? -ECANCELED : record_step(w, p, RECORD_FOLD, 0, SBX_STORE_WRITE_ROWS, &n);

        while (r >= 0 && n > 0)
                r = record_step_after(w, p, RECORD_FOLD, 0, SBX_STORE_WRITE_ROWS, &n, cancelled);
        return r;
}

/* With reader: the conflicts (then nothing more), the attribution and the
 * layer, built within the quotas. */
static int publish_build(Publication *p, Store *reader, const atomic_bool *cancelled) {
        AttributeContext ctx;
        int r;

        if (!p->overwrite) {
                r = find_conflicts(reader, p->sandbox_id, p->top, p->base_layer, &p->m, &p->res);
                if (r < 0 || p->res.n_conflicts > 0)
                        return r;
        }
        ctx = (AttributeContext) {
                .store = reader, .sandbox_id = p->sandbox_id, .view_fd = p->view_fd, .src_fd = p->src_fd,
                .m = &p->m, .owner = p->owner, .op = p->has_op ? &p->op : NULL,
        };
        renames_init(&ctx.renames, read_deleted, &ctx);
        r = attribute(&ctx, cancelled, &p->ops);
        renames_done(&ctx.renames);
        if (r < 0)
                return r;
        if (atomic_load(cancelled))
                return -ECANCELED;
        /* The quotas read the sizes the loop committed, with the same connection. */
        r = layer_create_within_quota(reader, &(LayerTarget) {
                        .limits = p->limits, .sandbox_id = p->sandbox_id, .owner_uid = p->owner_uid,
                        .layers_fd = p->layers_fd, .cancelled = cancelled,
                }, p->seq, p->src_fd, p->force_uid, p->link_files ? LAYER_LINK_FILES : 0, &p->size, p->res.error,
                sizeof(p->res.error));
        if (r < 0)
                return r;
        p->built = true;
        return 0;
}

int publish_run(Publication *p, const atomic_bool *cancelled) {
        char too_deep[SBX_PATH_MAX + 1];
        Store *reader, *writer;
        int r;

        r = manifest_build(p->src_fd, &p->m, too_deep);
        if (r == -ELOOP)
                tree_depth_message(too_deep, p->res.error, sizeof(p->res.error));
        else if (r == -ENAMETOOLONG)
                snprintf(p->res.error, sizeof(p->res.error), "a changed path is longer than the path limit of %u bytes",
                         SBX_PATH_MAX);
        else if (r == -E2BIG)
                snprintf(p->res.error, sizeof(p->res.error),
                         "more paths changed than the limit of %u in one publication", SBX_PUBLISH_MAX_PATHS);
        if (r < 0 || p->m.n == 0)
                return r; /* nothing changed: nothing to publish */
        /* Its own connections: SQLite's are one per thread; the reader sees what the loop committed. */
        r = store_conns_take(p->conns, false, &reader);
        if (r < 0)
                return r;
        r = publish_build(p, reader, cancelled);
        store_conns_put(p->conns, reader);
        if (r < 0 || !p->built)
                return r;
        /* Here, not on the loop: it may be the last reference to the session's tmpfs. */
        p->src_fd = safe_close(p->src_fd);
        r = store_conns_take(p->conns, true, &writer);
        if (r < 0)
                return r;
        r = record_fold(writer, p, cancelled);
        if (r >= 0)
                r = record(writer, p, cancelled);
        store_conns_put(p->conns, writer);
        if (r < 0)
                return r;
        /* What compaction removed before; and the merge, if the stack is too deep now (finish makes it the base). */
        (void) snapshot_trash_empty(p->layers_fd);
        if (snapshot_compact_due(p->squashed, p->seq))
                p->compacted = snapshot_compact_build(p->layers_fd, p->squashed, p->seq);
        return 0;
}

/* The layer it built, if any, goes, unless it is recorded. */
static void publication_unbuild(Publication *p) {
        char name[16];

        if (!p->built || p->recorded)
                return;
        snprintf(name, sizeof(name), "%u", p->seq);
        (void) tree_remove_at(p->layers_fd, name);
        p->built = false;
}

int publish_finish(Store *store, Sandbox *sb, Publication *p, int r, PublishResult *ret) {
        PublishResult res = p->res;

        p->res = (PublishResult) {};
        res.layer = sb->top_layer;
        if (r < 0) {
                publication_unbuild(p);
                *ret = (PublishResult) { .layer = sb->top_layer };
                memcpy(ret->error, res.error, sizeof(ret->error));
                publish_result_done(&res);
                publication_free(p);
                return r;
        }
        if (p->recorded) {
                /* Spares built on the layer below are stale now; the loop's tick drops them (core/spare.h). */
                sb->top_layer = p->seq;
                res.published = true;
                res.layer = p->seq;
                res.changed_paths = (uint32_t) p->m.n;
                /* The lane ran nothing else of sb: its base is the one the merge was built on. */
                r = p->compacted == 0 ? snapshot_compact_adopt(store, sb, p->seq) : MIN(p->compacted, 0);
                if (r < 0)
                        log_warning_errno(r, "Failed to compact the layers of '%s', ignoring: %m", sb->name);
        }
        *ret = res;
        publication_free(p);
        return 0;
}

void publish_abandon(Publication *p) {
        Store *writer;

        if (!p)
                return;
        /* Recorded after all, but never the sandbox's top: its record goes first (the loop waits). */
        if (p->recorded && store_conns_take(p->conns, true, &writer) >= 0) {
                if (record_step(writer, p, RECORD_DISCARD, 0, 0, NULL) >= 0)
                        p->recorded = false;
                store_conns_put(p->conns, writer);
        }
        publication_unbuild(p);
        publication_free(p);
}
