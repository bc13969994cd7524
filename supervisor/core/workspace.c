#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/layerquota.h"
#include "core/snapshot.h"
#include "macro.h"
#include "core/workspace.h"
#include "data/layer.h"
#include "fd-util.h"
#include "sbx-limits.h"

#define RESOLVE_READ (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
/* Writes never go through a symlink: what we write must be the path we publish. */
#define RESOLVE_WRITE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* Relative to the workspace root, without "", "." or ".." components. */
int workspace_path(const char *in, char *out, char *errmsg, size_t errsize) {
        const size_t size = SBX_PATH_MAX + 1;
        const char *p = in;
        size_t n = 0;

        if (in[0] == '\0') {
                snprintf(errmsg, errsize, "path is empty");
                return -EINVAL;
        }
        if (strlen(in) > SBX_PATH_MAX) {
                snprintf(errmsg, errsize, "path is longer than %u bytes", SBX_PATH_MAX);
                return -ENAMETOOLONG;
        }
        if (in[0] == '/') {
                size_t k = strlen(WORKSPACE_ROOT);
                if (strncmp(in, WORKSPACE_ROOT, k) != 0 || (in[k] != '/' && in[k] != '\0')) {
                        snprintf(errmsg, errsize,
                                 "path '%.200s' is outside the workspace: use a path relative to the workspace "
                                 "root or an absolute path under " WORKSPACE_ROOT,
                                 in);
                        return -EINVAL;
                }
                p = in + k;
        }
        while (*p) {
                const char *end;
                size_t len;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                end = strchrnul(p, '/');
                len = (size_t) (end - p);
                if (len == 1 && p[0] == '.') {
                        /* nothing */
                } else if (len == 2 && p[0] == '.' && p[1] == '.') {
                        char *slash;
                        if (n == 0) {
                                snprintf(errmsg, errsize, "path '%.200s' escapes the workspace", in);
                                return -EINVAL;
                        }
                        out[n] = '\0';
                        slash = strrchr(out, '/');
                        n = slash ? (size_t) (slash - out) : 0;
                } else {
                        if (n + len + 2 > size)
                                return -ENAMETOOLONG;
                        if (n)
                                out[n++] = '/';
                        memcpy(out + n, p, len);
                        n += len;
                }
                p = end;
        }
        out[n] = '\0';
        if (n == 0) {
                snprintf(errmsg, errsize, "path '%.200s' names the workspace root, not a file", in);
                return -EISDIR;
        }
        /* "dir/" names a directory: never quietly the file "dir". */
        if (in[strlen(in) - 1] == '/') {
                snprintf(errmsg, errsize, "path '%.200s' ends with '/': it names a directory, not a file", in);
                return -EISDIR;
        }
        return 0;
}

#define RESOLVE_READ (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
/* Writes never go through a symlink: what we write must be the path we publish. */
#define RESOLVE_WRITE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

const char *workspace_open_error(int r) {
        switch (-r) {
        case ENOENT:
                return "no such file";
        case ELOOP:
                return "a component of the path is a symbolic link (file tools do not write through symlinks)";
        case EXDEV:
                return "the path leaves the workspace";
        case ENOTDIR:
                return "a component of the path is not a directory";
        default:
                return strerror(-r);
        }
}

int workspace_root(Server *s, Sandbox *sb, const char *ws_id, WorkspaceSession **ret_ws, int *ret_root,
                   char *ret_error, size_t error_size) {
        int r;

        *ret_ws = NULL;
        if (ws_id[0]) {
                WorkspaceSession *ws = session_find(s, sb, ws_id);
                if (!ws || ws->workspace_fd < 0) {
                        snprintf(ret_error, error_size, "no live workspace session '%.80s' in sandbox '%s'", ws_id,
                                 sb->name);
                        return -ENOENT;
                }
                if (ws->publishing) {
                        /* Its upper is being copied into a layer: nothing reads or writes it meanwhile. */
                        snprintf(ret_error, error_size, "workspace session '%s' is being published", ws->id);
                        return -EBUSY;
                }
                *ret_ws = ws;
                *ret_root = ws->workspace_fd;
                return 0;
        }
        r = snapshot_current(s->store, sb, ret_root);
        if (r < 0)
                snprintf(ret_error, error_size, "cannot open the published snapshot of '%s': %s", sb->name,
                         strerror(-r));
        return r;
}

int workspace_open(int root, const char *rel) {
        return openat2_fd(root, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, RESOLVE_READ);
}

/* A file_read off the loop when it needs a line index (core/workspace.h). */
typedef struct ReadWork {
        Work work;
        Server *server;
        int fd;
        struct stat st;
        FileKey key;
        bool keyed;                     /* cleared by run if the file changed while it was indexed */
        uint64_t offset;
        uint32_t limit;
        FileIndex built;
        FileWindow window;
        char error[400];
        WorkspaceReadDone done;
        void *userdata;
} ReadWork;

/* An index kept from an earlier read of the same file: the window is read at once, on the loop. */
static int read_start(Work *w) {
        ReadWork *rw = container_of(w, ReadWork, work);
        const FileIndex *cached = rw->keyed ? index_cache_get(rw->server->file_indexes, &rw->key) : NULL;
        int r;

        if (!cached)
                return 0;
        r = file_read_window(rw->fd, cached, rw->offset, rw->limit, SBX_RESULT_TEXT_BUDGET, &rw->window, rw->error,
                             sizeof(rw->error));
        return r < 0 ? r : 1;
}

static bool same_content_key(const struct stat *a, const struct stat *b) {
        return a->st_size == b->st_size && a->st_ino == b->st_ino && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
               a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
               a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int read_run(Work *w) {
        ReadWork *rw = container_of(w, ReadWork, work);
        struct stat after;
        int r;

        r = file_index_build(rw->fd, &rw->built, rw->error, sizeof(rw->error));
        if (r < 0)
                return r;
        /* Written to while it was read: the index is good for this answer at most. */
        if (fstat(rw->fd, &after) < 0 || !same_content_key(&rw->st, &after))
                rw->keyed = false;
        return file_read_window(rw->fd, &rw->built, rw->offset, rw->limit, SBX_RESULT_TEXT_BUDGET, &rw->window,
                                rw->error, sizeof(rw->error));
}

static void read_done(Work *w, int r, void *userdata) {
        ReadWork *rw = container_of(w, ReadWork, work);
        Server *s = userdata;
        const FileIndex *kept;

        if (work_cancelled(w)) {
                r = -ECANCELED;
                snprintf(rw->error, sizeof(rw->error), "its sandbox or sbxd went first");
        }
        if (r >= 0 && rw->keyed && rw->built.n_marks > 0)
                (void) index_cache_put(s->file_indexes, &rw->key, &rw->built, &kept);
        rw->done(s, r, &rw->window, rw->error, rw->userdata);
        file_window_done(&rw->window);
        file_index_done(&rw->built);
        safe_close(rw->fd);
        free(rw);
}

int workspace_read(Server *s, Sandbox *sb, const WorkspaceSession *ws, int fd, const struct stat *st, uint64_t offset,
                   uint32_t limit, WorkspaceReadDone done, void *userdata) {
        ReadWork *rw = calloc(1, sizeof(*rw));

        if (!rw) {
                safe_close(fd);
                return -ENOMEM;
        }
        *rw = (ReadWork) {
                .work = { .start = read_start, .run = read_run, .done = read_done },
                .server = s, .fd = fd, .st = *st, .offset = offset, .limit = limit, .done = done,
                .userdata = userdata,
        };
        /* A snapshot file by its place in the layers; a live session's by the session, with its times. */
        if (!ws)
                rw->keyed = snapshot_file_key(sb, st, &rw->key) >= 0;
        else {
                rw->key = file_key(st, st->st_dev);
                rw->key.scope = ws->serial;
                rw->keyed = true;
        }
        work_submit(s->work, &sb->lane, &rw->work);
        return 0;
}

/* A path a file tool may write: a regular file, or nothing yet. */
static int writable_file(const struct stat *st, char *err, size_t errsize) {
        if (S_ISLNK(st->st_mode)) {
                snprintf(err, errsize, "it is a symbolic link (file tools do not write through symlinks)");
                return -ELOOP;
        }
        if (!S_ISREG(st->st_mode)) {
                snprintf(err, errsize, "it exists and is not a regular file");
                return -EISDIR;
        }
        return 0;
}

/* Create the parent directories of rel below root (owned by the sandbox's root)
 * and return the parent's fd and the last component. */
static int open_parent(int root, const char *rel, bool create, uid_t uid, int *ret_parent, const char **ret_name,
                       char *err, size_t errsize) {
        _cleanup_close_ int cur = -EBADF;
        char buf[SBX_PATH_MAX + 1];
        char *p = buf, *slash;
        int r;

        strcpy(buf, rel);
        cur = openat2_fd(root, ".", O_PATH | O_DIRECTORY, RESOLVE_WRITE);
        if (cur < 0)
                return cur;
        while ((slash = strchr(p, '/'))) {
                int next;
                *slash = '\0';
                next = openat2_fd(cur, p, O_PATH | O_DIRECTORY, RESOLVE_WRITE);
                if (next == -ENOENT && create) {
                        if (mkdirat(cur, p, 0755) < 0 && errno != EEXIST)
                                return -errno;
                        next = openat2_fd(cur, p, O_PATH | O_DIRECTORY, RESOLVE_WRITE);
                        if (next >= 0 && fchownat(next, "", uid, uid, AT_EMPTY_PATH) < 0) {
                                r = -errno;
                                safe_close(next);
                                return r;
                        }
                }
                if (next < 0) {
                        snprintf(err, errsize, "'%.200s': %s", p, workspace_open_error(next));
                        return next;
                }
                safe_close(cur);
                cur = next;
                p = slash + 1;
        }
        *ret_parent = TAKE_FD(cur);
        *ret_name = rel + (p - buf);
        return 0;
}

/* The owner and mode of a file written at name in parent: those of the
 * regular file there, or a new file's (0644, uid). *ret_exists says which. */
typedef struct FileAttributes {
        mode_t mode;
        uid_t owner;
        gid_t group;
} FileAttributes;

static int file_attributes(int parent, const char *name, uid_t uid, FileAttributes *ret, bool *ret_exists,
                           char *err, size_t errsize) {
        struct stat st;
        int r;

        if (parent < 0 || fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                *ret = (FileAttributes) { .mode = 0644, .owner = uid, .group = uid };
                *ret_exists = false;
                return 0;
        }
        r = writable_file(&st, err, errsize);
        if (r < 0)
                return r;
        *ret = (FileAttributes) { .mode = st.st_mode & 07777, .owner = st.st_uid, .group = st.st_gid };
        *ret_exists = true;
        return 0;
}

/* name, which must not exist in parent, made with content and attributes a. */
static int write_new_at(int parent, const char *name, const char *content, size_t len, const FileAttributes *a) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, content, len);
        if (r >= 0 && (fchown(fd, a->owner, a->group) < 0 || fchmod(fd, a->mode) < 0))
                r = -errno;
        if (r < 0)
                (void) unlinkat(parent, name, 0);
        return r;
}

/* Replace (or create) name in parent with content, atomically; keeps an existing
 * file's owner and mode. *ret_created says whether it was new. */
static int write_at(int parent, const char *name, const char *content, size_t len, uid_t uid, bool *ret_created,
                    char *err, size_t errsize) {
        char tmp[64], hex[17];
        FileAttributes a;
        bool exists;
        int r;

        r = file_attributes(parent, name, uid, &a, &exists, err, errsize);
        if (r < 0)
                return r;
        r = random_hex(hex, 12);
        if (r < 0)
                return r;
        snprintf(tmp, sizeof(tmp), ".sbx-write-%s", hex);
        r = write_new_at(parent, tmp, content, len, &a);
        if (r < 0)
                return r;
        if (renameat(parent, tmp, parent, name) < 0) {
                r = -errno;
                (void) unlinkat(parent, tmp, 0);
                return r;
        }
        *ret_created = !exists;
        return 0;
}

/* The staged parents of rel take the snapshot's attributes, which the layer then carries. */
static int stage_parents_like(int view, int stage_fd, const char *rel) {
        char buf[SBX_PATH_MAX + 1];
        char *slash;

        strcpy(buf, rel);
        while ((slash = strrchr(buf, '/'))) {
                struct stat st;
                *slash = '\0';
                if (fstatat(view, buf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                        struct timespec ts[2] = { st.st_atim, st.st_mtim };
                        if (fchownat(stage_fd, buf, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
                            fchmodat(stage_fd, buf, st.st_mode & 07777, 0) < 0 ||
                            utimensat(stage_fd, buf, ts, AT_SYMLINK_NOFOLLOW) < 0)
                                return -errno;
                }
        }
        return 0;
}

/* The staged file, written once in the new staging directory (nothing else
 * sees it: no temporary name), with the published file's owner and mode if
 * there is one. *ret_created: there is none. */
static int stage_file(int view_parent, int parent, const char *name, const FileChange *ch, uid_t uid,
                      bool *ret_created, char *err, size_t errsize) {
        FileAttributes a;
        bool exists;
        int r;

        r = file_attributes(view_parent, name, uid, &a, &exists, err, errsize);
        if (r >= 0)
                r = write_new_at(parent, name, ch->content, ch->len, &a);
        if (r < 0)
                return r;
        *ret_created = !exists;
        return 0;
}

/* Whether the file at ch->rel below root already holds exactly ch->content:
 * then nothing is written and nothing published. */
static bool file_unchanged(int root, const FileChange *ch) {
        _cleanup_free_ char *cur = NULL;
        size_t cur_len = 0;

        if (ch->old_text)
                return ch->old_len == ch->len && memcmp(ch->old_text, ch->content, ch->len) == 0;
        if (read_file_bounded_at(root, ch->rel, ch->len, &cur, &cur_len) < 0)
                return false;
        return cur_len == ch->len && memcmp(cur, ch->content, ch->len) == 0;
}

/* A file operation without a session, in its turn in the sandbox's lane:
 * made by its prepare (on the loop, against the snapshot as it is then),
 * staged (parents mirroring the snapshot's), published off the loop as a
 * layer owned by operation:ID, answered by its done. */
typedef struct OperationWork {
        Work work;
        Server *server;
        Sandbox *sandbox;               /* not touched once cancelled (the sandbox may be gone) */
        FileChange *ch;
        WorkspacePrepare prepare;
        WorkspaceDone done;
        void *userdata;
        char stage[48];
        Publication *pub;
        char error[400];
} OperationWork;

/* Stage ch below staging/STAGE and begin its publication. */
static int operation_stage(OperationWork *o, int view) {
        FileChange *ch = o->ch;
        Server *s = o->server;
        Sandbox *sb = o->sandbox;
        const PublishOperation op = {
                .path = ch->rel, .old_text = ch->old_text, .old_len = ch->old_len,
                .new_text = ch->content, .new_len = ch->len,
        };
        _cleanup_close_ int stage_fd = -EBADF, parent = -EBADF, view_parent = -EBADF;
        char hex[17];
        const char *name;
        int r;

        /* Where it lands in the snapshot: no symlinks, parents are directories. */
        r = open_parent(view, ch->rel, false, sb->uid_base, &view_parent, &name, o->error, sizeof(o->error));
        if (r < 0 && r != -ENOENT)
                return r;
        o->error[0] = '\0'; /* parents not in the snapshot yet are made: no error */
        r = random_hex(hex, 12);
        if (r < 0)
                return r;
        snprintf(ch->owner, sizeof(ch->owner), "operation:op-%s", hex);
        snprintf(o->stage, sizeof(o->stage), "op-%s", hex);
        /* Staged on the state filesystem: refused there first when it is (nearly) full. */
        r = state_room_check(&s->layer_limits, s->staging_fd, ch->len, o->error, sizeof(o->error));
        if (r < 0)
                return r;
        if (mkdirat(s->staging_fd, o->stage, 0755) < 0)
                return -errno;
        stage_fd = openat(s->staging_fd, o->stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (stage_fd < 0)
                return -errno;
        r = open_parent(stage_fd, ch->rel, true, sb->uid_base, &parent, &name, o->error, sizeof(o->error));
        if (r >= 0)
                r = stage_parents_like(view, stage_fd, ch->rel);
        if (r >= 0)
                r = stage_file(view_parent, parent, name, ch, sb->uid_base, &ch->created, o->error,
                               sizeof(o->error));
        if (r >= 0)
                r = publish_begin(s->store, &s->layer_limits, sb, s->store_conns, stage_fd, ch->owner, sb->top_layer, true,
                                  -1, &op, &o->pub);
        return r;
}


static int operation_start(Work *w) {
        OperationWork *o = container_of(w, OperationWork, work);
        FileChange *ch = o->ch;
        int view, r;

        ch->in_session = false;
        ch->pub.layer = o->sandbox->top_layer;
        r = o->prepare ? o->prepare(o->server, o->sandbox, ch, o->userdata, o->error, sizeof(o->error)) : 0;
        if (r >= 0)
                r = snapshot_current(o->server->store, o->sandbox, &view);
        if (r < 0)
                return r;
        if (file_unchanged(view, ch)) {
                ch->unchanged = true;
                return 1; /* nothing to publish */
        }
        return operation_stage(o, view);
}

static int operation_run(Work *w) {
        return publish_run(container_of(w, OperationWork, work)->pub, &w->cancelled);
}

static void operation_done(Work *w, int r, void *userdata) {
        OperationWork *o = container_of(w, OperationWork, work);
        Server *s = userdata;

        if (work_cancelled(w)) {
                publish_abandon(o->pub);
                r = -ECANCELED;
                snprintf(o->error, sizeof(o->error), "its sandbox or sbxd went before it was published");
        } else if (o->pub) {
                r = publish_finish(s->store, o->sandbox, o->pub, r, &o->ch->pub);
                if (r < 0 && o->ch->pub.error[0])
                        strlcpy(o->error, o->ch->pub.error, sizeof(o->error));
        }
        if (r == -ENOSPC && !o->error[0])
                state_full_message(&s->layer_limits, o->error, sizeof(o->error));
        if (o->stage[0])
                (void) tree_remove_at(s->staging_fd, o->stage);
        o->done(s, o->ch, r, o->error, o->userdata);
        free(o);
}

int workspace_write_published(Server *s, Sandbox *sb, FileChange *ch, WorkspacePrepare prepare, WorkspaceDone done,
                              void *userdata) {
        OperationWork *o = calloc(1, sizeof(*o));

        if (!o)
                return -ENOMEM;
        *o = (OperationWork) {
                .work = { .start = operation_start, .run = operation_run, .done = operation_done },
                .server = s, .sandbox = sb, .ch = ch, .prepare = prepare, .done = done, .userdata = userdata,
        };
        work_submit(s->work, &sb->lane, &o->work);
        return 0;
}

int workspace_write(Server *s, Sandbox *sb, FileChange *ch, char *ret_error, size_t error_size) {
        _cleanup_close_ int parent = -EBADF;
        WorkspaceSession *ws;
        const char *name;
        int root, r;

        r = workspace_root(s, sb, ch->ws_id, &ws, &root, ret_error, error_size);
        if (r < 0)
                return r;
        ch->in_session = true;
        if (file_unchanged(root, ch)) {
                ch->unchanged = true;
                return 0;
        }
        r = open_parent(root, ch->rel, true, sb->uid_base, &parent, &name, ret_error, error_size);
        if (r >= 0)
                r = write_at(parent, name, ch->content, ch->len, sb->uid_base, &ch->created, ret_error, error_size);
        return r;
}

void file_change_done(FileChange *ch) {
        publish_result_done(&ch->pub);
}
