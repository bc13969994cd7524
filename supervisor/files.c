/* The file tools: file_read, file_write, file_edit, file_blame, on the published
 * snapshot (writes publish a one-operation layer) or inside a live workspace
 * session. Every client path is normalized lexically, then resolved only with
 * openat2 below the workspace root fd: never as a string in sbxd's namespace. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attribution.h"
#include "fd-util.h"
#include "fileops.h"
#include "layer.h"
#include "log.h"
#include "publish.h"
#include "sbx-limits.h"
#include "sbxd.h"
#include "snapshot.h"

#define WORKSPACE_ROOT "/workspace"

/* Relative to the workspace root, without "", "." or ".." components. */
static int path_normalize(const char *in, char *out, size_t size, char *errmsg, size_t errsize) {
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

static int openat2_fd(int dirfd, const char *path, int flags, unsigned long long resolve) {
        struct open_how how = { .flags = (unsigned long long) flags | O_CLOEXEC, .resolve = resolve };
        int fd = (int) syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

#define RESOLVE_READ (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
/* Writes never go through a symlink: what we write must be the path we publish. */
#define RESOLVE_WRITE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static const char *open_error(int r) {
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

/* The workspace root to resolve in: a live session's, or the published snapshot. */
static int file_root(Server *s, Client *c, uint32_t seq, Sandbox *sb, const char *ws_id, WorkspaceSession **ret_ws,
                     int *ret_root) {
        int r;

        *ret_ws = NULL;
        if (ws_id[0]) {
                WorkspaceSession *ws = session_find(s, sb, ws_id);
                if (!ws || ws->workspace_fd < 0) {
                        client_reply_error(s, c, seq, -ENOENT, "no live workspace session '%.80s' in sandbox '%s'",
                                           ws_id, sb->name);
                        return -ENOENT;
                }
                *ret_ws = ws;
                *ret_root = ws->workspace_fd;
                return 0;
        }
        r = snapshot_current(s, sb, ret_root);
        if (r < 0)
                client_reply_error(s, c, seq, r, "cannot open the published snapshot of '%s': %s", sb->name,
                                   strerror(-r));
        return r;
}

/* The index of the file open at fd (st its fstat): from the cache for a file
 * of the published snapshot, else built into *built (and then kept in the
 * cache, for the snapshot). */
static int file_index(Server *s, Sandbox *sb, bool snapshot, int fd, const struct stat *st, FileIndex *built,
                      const FileIndex **ret, char *err, size_t errsize) {
        FileKey key;
        bool keyed;
        int r;

        keyed = snapshot && snapshot_file_key(sb, st, &key) >= 0;
        if (keyed) {
                const FileIndex *cached = index_cache_get(s->file_indexes, &key);

                if (cached) {
                        *ret = cached;
                        return 0;
                }
        }
        r = file_index_build(fd, built, err, errsize);
        if (r < 0)
                return r;
        if (!keyed || index_cache_put(s->file_indexes, &key, built, ret) < 0)
                *ret = built;
        return 0;
}

void handle_file_read(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__FileRead *req) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__FileReadReply o = SBX__FILE_READ_REPLY__INIT;
        char rel[SBX_PATH_MAX + 1], err[400];
        _cleanup_(file_index_done) FileIndex built = {};
        const FileIndex *index;
        FileWindow w = {};
        WorkspaceSession *ws;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int root, r;

        r = path_normalize(req->path, rel, sizeof(rel), err, sizeof(err));
        if (r < 0)
                return client_reply_error(s, c, seq, r, "%s", err);
        if (file_root(s, c, seq, sb, req->workspace_session, &ws, &root) < 0)
                return;
        fd = openat2_fd(root, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, RESOLVE_READ);
        if (fd < 0)
                return client_reply_error(s, c, seq, fd, "%s: %s", req->path, open_error(fd));
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return client_reply_error(s, c, seq, -EINVAL, "%s: not a regular file", req->path);
        err[0] = '\0';
        r = file_index(s, sb, !ws, fd, &st, &built, &index, err, sizeof(err));
        if (r >= 0)
                r = file_read_window(fd, index, req->has_offset ? req->offset : 1,
                                     req->has_limit ? req->limit : SBX_FILE_READ_DEFAULT_LINES,
                                     SBX_RESULT_TEXT_BUDGET, &w, err, sizeof(err));
        if (r < 0)
                return client_reply_error(s, c, seq, r, "%s: %s", req->path, err[0] ? err : strerror(-r));
        o.path = req->path;
        o.content.data = (uint8_t *) w.content;
        o.content.len = w.len;
        o.start_line = w.start_line;
        o.num_lines = w.num_lines;
        o.total_lines = w.total_lines;
        o.bytes_read = w.bytes_read;
        o.total_bytes = w.total_bytes;
        o.has_next_offset = w.has_next_offset;
        o.next_offset = w.next_offset;
        o.truncated = w.truncated;
        reply.body_case = SBX__REPLY__BODY_FILE_READ;
        reply.file_read = &o;
        client_reply(s, c, seq, &reply);
        file_window_done(&w);
}

/* The payload of a FILE_WRITE/FILE_EDIT frame: a sealed memfd of exactly size bytes. */
static int read_payload(int fd, uint64_t size, char **ret) {
        int seals, need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
        struct stat st;
        char *buf;
        ssize_t n;

        if (fd < 0)
                return -EBADMSG;
        seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || (seals & need) != need)
                return -EBADMSG; /* it could change under us */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t) st.st_size != size)
                return -EBADMSG;
        if (size > SBX_FILE_MAX)
                return -EFBIG;
        buf = malloc(size + 1);
        if (!buf)
                return -ENOMEM;
        n = pread(fd, buf, size, 0);
        if (n < 0 || (uint64_t) n != size) {
                free(buf);
                return n < 0 ? -errno : -EBADMSG;
        }
        buf[size] = '\0';
        *ret = buf;
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
                        snprintf(err, errsize, "'%.200s': %s", p, open_error(next));
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

/* Replace (or create) name in parent with content, atomically; keeps an existing
 * file's owner and mode. *ret_created says whether it was new. */
static int write_at(int parent, const char *name, const char *content, size_t len, uid_t uid, bool *ret_created,
                    char *err, size_t errsize) {
        char tmp[64], hex[17];
        struct stat st;
        bool exists;
        mode_t mode = 0644;
        uid_t owner = uid;
        gid_t group = uid;
        _cleanup_close_ int fd = -EBADF;
        int r;

        exists = fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (exists) {
                if (S_ISLNK(st.st_mode)) {
                        snprintf(err, errsize, "it is a symbolic link (file tools do not write through symlinks)");
                        return -ELOOP;
                }
                if (!S_ISREG(st.st_mode)) {
                        snprintf(err, errsize, "it exists and is not a regular file");
                        return -EISDIR;
                }
                mode = st.st_mode & 07777;
                owner = st.st_uid;
                group = st.st_gid;
        }
        r = random_hex(hex, 12);
        if (r < 0)
                return r;
        snprintf(tmp, sizeof(tmp), ".sbx-write-%s", hex);
        fd = openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, content, len);
        if (r >= 0 && (fchown(fd, owner, group) < 0 || fchmod(fd, mode) < 0))
                r = -errno;
        if (r >= 0 && renameat(parent, tmp, parent, name) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(parent, tmp, 0);
                return r;
        }
        *ret_created = !exists;
        return 0;
}

/* A file operation without a session: stage the file (parents mirroring the
 * snapshot's), publish it as a layer owned by operation:ID. old_text is the
 * file's published text, if the caller read it (else NULL). */
static int publish_operation(Server *s, Sandbox *sb, const char *rel, const char *old_text, size_t old_len,
                             const char *content, size_t len, bool *ret_created, PublishResult *ret_pub, char *owner,
                             size_t owner_size, char *err, size_t errsize) {
        const PublishOperation op = {
                .path = rel,
                .old_text = old_text,
                .old_len = old_len,
                .new_text = content,
                .new_len = len,
        };
        char stage[48], hex[17];
        _cleanup_close_ int stage_fd = -EBADF, parent = -EBADF, view_parent = -EBADF;
        const char *name;
        int view, r;

        r = snapshot_current(s, sb, &view);
        if (r < 0)
                return r;
        /* Where it lands in the snapshot: no symlinks, parents are directories. */
        r = open_parent(view, rel, false, sb->uid_base, &view_parent, &name, err, errsize);
        if (r < 0 && r != -ENOENT)
                return r;
        r = random_hex(hex, 12);
        if (r < 0)
                return r;
        snprintf(owner, owner_size, "operation:op-%s", hex);
        snprintf(stage, sizeof(stage), "op-%s", hex);
        if (mkdirat(s->staging_fd, stage, 0755) < 0)
                return -errno;
        stage_fd = openat(s->staging_fd, stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (stage_fd < 0) {
                r = -errno;
                goto out;
        }
        r = open_parent(stage_fd, rel, true, sb->uid_base, &parent, &name, err, errsize);
        if (r < 0)
                goto out;
        /* The staged parents take the snapshot's attributes, which the layer then carries. */
        {
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
                                    utimensat(stage_fd, buf, ts, AT_SYMLINK_NOFOLLOW) < 0) {
                                        r = -errno;
                                        goto out;
                                }
                        }
                }
        }
        /* Keep the published file's owner and mode when it exists. */
        if (view_parent >= 0) {
                struct stat st;
                if (fstatat(view_parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                        if (S_ISLNK(st.st_mode)) {
                                snprintf(err, errsize, "it is a symbolic link (file tools do not write through symlinks)");
                                r = -ELOOP;
                                goto out;
                        }
                        if (!S_ISREG(st.st_mode)) {
                                snprintf(err, errsize, "it exists and is not a regular file");
                                r = -EISDIR;
                                goto out;
                        }
                        _cleanup_close_ int f = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                                       st.st_mode & 07777);
                        if (f < 0 || fchown(f, st.st_uid, st.st_gid) < 0 || fchmod(f, st.st_mode & 07777) < 0) {
                                r = -errno;
                                goto out;
                        }
                }
        }
        {
                bool created_in_stage;
                r = write_at(parent, name, content, len, sb->uid_base, &created_in_stage, err, errsize);
                if (r < 0)
                        goto out;
                *ret_created = created_in_stage;
        }
        r = publish_tree(s, sb, stage_fd, owner, sb->top_layer, true, -1, &op, ret_pub);
out:
        (void) tree_remove_at(s->staging_fd, stage);
        return r;
}

/* What a file_write or file_edit asks to write, and what it reports. */
typedef struct FileChange {
        const char *path;               /* as given */
        const char *rel;                /* normalized */
        const char *ws_id;
        const char *old_text;           /* the file's text before, if the caller read it */
        size_t old_len;
        const char *content;
        size_t len;
        const char *type;               /* "edit", or NULL: create or update */
        uint32_t edits;
        uint64_t replacements;
        const char *diff;               /* file_edit: unified diff of the change */
        size_t diff_len;
        bool diff_truncated;
} FileChange;

static void reply_change(Server *s, Client *c, uint32_t seq, const FileChange *ch, bool created, bool unchanged,
                         const PublishResult *pub, const char *owner) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__FileChangeReply o = SBX__FILE_CHANGE_REPLY__INIT;
        Sbx__Publication p = SBX__PUBLICATION__INIT;

        o.type = (char *) (ch->type ?: (created ? "create" : "update"));
        o.path = (char *) ch->path;
        o.bytes_written = ch->len;
        o.edits_applied = ch->edits;
        o.replacements = ch->replacements;
        o.diff.data = (uint8_t *) ch->diff;
        o.diff.len = ch->diff_len;
        o.diff_truncated = ch->diff_truncated;
        o.unchanged = unchanged;
        if (pub) {
                p.published = pub->published;
                p.layer = pub->layer;
                p.owner = (char *) owner;
                p.changed_paths = pub->changed_paths;
                o.publication = &p;
        }
        reply.body_case = SBX__REPLY__BODY_FILE_CHANGE;
        reply.file_change = &o;
        client_reply(s, c, seq, &reply);
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

/* Write ch->content at ch->rel, in the session or as a published operation. */
static void write_file(Server *s, Client *c, uint32_t seq, Sandbox *sb, const FileChange *ch) {
        char err[300] = "", owner[64] = "";
        PublishResult pub = {};
        WorkspaceSession *ws;
        bool created = false;
        int root, r;

        if (file_root(s, c, seq, sb, ch->ws_id, &ws, &root) < 0)
                return;
        if (file_unchanged(root, ch)) {
                pub.layer = sb->top_layer;
                reply_change(s, c, seq, ch, false, true, ws ? NULL : &pub, owner);
                return;
        }
        if (ws) {
                _cleanup_close_ int parent = -EBADF;
                const char *name;
                r = open_parent(root, ch->rel, true, sb->uid_base, &parent, &name, err, sizeof(err));
                if (r >= 0)
                        r = write_at(parent, name, ch->content, ch->len, sb->uid_base, &created, err, sizeof(err));
        } else
                r = publish_operation(s, sb, ch->rel, ch->old_text, ch->old_len, ch->content, ch->len, &created, &pub,
                                      owner, sizeof(owner), err, sizeof(err));
        if (r < 0) {
                client_reply_error(s, c, seq, r, "%s: %s", ch->path, err[0] ? err : strerror(-r));
                return;
        }
        if (!ws)
                log_info("File operation %s on '%s' of sandbox '%s' published layer %u", owner, ch->rel, sb->name,
                         pub.layer);
        reply_change(s, c, seq, ch, created, false, ws ? NULL : &pub, owner);
        /* The next file operation needs the new snapshot's view: mount it while the client reads the answer. */
        if (pub.published) {
                int view;
                (void) snapshot_current(s, sb, &view);
        }
        publish_result_done(&pub);
}

void handle_file_write(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__FileWrite *req, int payload_fd) {
        char rel[SBX_PATH_MAX + 1], err[400];
        _cleanup_free_ char *content = NULL;
        int r;

        r = path_normalize(req->path, rel, sizeof(rel), err, sizeof(err));
        if (r < 0)
                return client_reply_error(s, c, seq, r, "%s", err);
        r = read_payload(payload_fd, req->content_size, &content);
        if (r < 0)
                return client_reply_error(s, c, seq, r, "file content: %s",
                                          r == -EFBIG ? "larger than the file size limit" : "malformed payload");
        write_file(s, c, seq, sb, &(FileChange) {
                .path = req->path, .rel = rel, .ws_id = req->workspace_session,
                .content = content, .len = req->content_size,
        });
}

void handle_file_edit(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__FileEdit *req, int payload_fd) {
        char rel[SBX_PATH_MAX + 1], err[400] = "";
        _cleanup_free_ char *payload = NULL, *old = NULL, *updated = NULL, *diff = NULL;
        FileEditList edits = {};
        size_t old_len = 0, new_len = 0, diff_len = 0;
        bool diff_truncated = false;
        uint64_t replacements = 0;
        WorkspaceSession *ws;
        int root, r;

        r = path_normalize(req->path, rel, sizeof(rel), err, sizeof(err));
        if (r < 0)
                return client_reply_error(s, c, seq, r, "%s", err);
        r = read_payload(payload_fd, req->edits_size, &payload);
        if (r >= 0)
                r = file_edit_list_parse(payload, req->edits_size, &edits);
        if (r < 0)
                return client_reply_error(s, c, seq, r, r == -ENOMEM ? "out of memory" : "edits: malformed payload");
        if (file_root(s, c, seq, sb, req->workspace_session, &ws, &root) < 0)
                goto out;
        r = read_file_bounded_at(root, rel, SBX_FILE_MAX, &old, &old_len);
        if (r < 0) {
                client_reply_error(s, c, seq, r, "%s: %s", req->path,
                                   r == -EFBIG ? "larger than the file size limit" :
                                   r == -EISDIR ? "not a regular file" : open_error(r));
                goto out;
        }
        if (!text_is_utf8(old, old_len)) {
                client_reply_error(s, c, seq, -EILSEQ, "%s: not a UTF-8 text file", req->path);
                goto out;
        }
        r = file_apply_edits(old, old_len, edits.specs, edits.n, &updated, &new_len, &replacements, err, sizeof(err));
        if (r < 0) {
                client_reply_error(s, c, seq, r, "%s: %s", req->path, err[0] ? err : strerror(-r));
                goto out;
        }
        r = text_unified_diff(req->path, old, old_len, updated, new_len, SBX_EDIT_DIFF_MAX_BYTES, &diff, &diff_len,
                              &diff_truncated);
        if (r < 0)
                log_debug_errno(r, "No diff of the edit of '%s', ignoring: %m", rel);
        write_file(s, c, seq, sb, &(FileChange) {
                .path = req->path, .rel = rel, .ws_id = req->workspace_session,
                .old_text = old, .old_len = old_len, .content = updated, .len = new_len,
                .type = "edit", .edits = (uint32_t) edits.n, .replacements = replacements,
                .diff = diff, .diff_len = r < 0 ? 0 : diff_len, .diff_truncated = r >= 0 && diff_truncated,
        });
out:
        file_edit_list_done(&edits);
}

void handle_file_blame(Server *s, Client *c, uint32_t seq, Sandbox *sb, const Sbx__FileBlame *req) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__FileBlameReply o = SBX__FILE_BLAME_REPLY__INIT;
        char rel[SBX_PATH_MAX + 1], err[400];
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ Sbx__BlameRange *ranges = NULL;
        _cleanup_free_ Sbx__BlameRange **ptrs = NULL;
        size_t len = 0;
        Blame b = {};
        int view, r;

        r = path_normalize(req->path, rel, sizeof(rel), err, sizeof(err));
        if (r < 0)
                return client_reply_error(s, c, seq, r, "%s", err);
        r = snapshot_current(s, sb, &view);
        if (r >= 0)
                r = read_file_bounded_at(view, rel, SBX_FILE_MAX, &text, &len);
        if (r >= 0 && !text_is_utf8(text, len))
                r = -EILSEQ;
        if (r >= 0)
                r = blame_of_published(s, sb, rel, text, len, &b);
        if (r < 0)
                return client_reply_error(s, c, seq, -ENOENT,
                                          "not_found: no auditability record for '%s' (%s)", req->path,
                                          r == -EILSEQ ? "not a UTF-8 text file" :
                                          r == -EFBIG ? "larger than the file size limit" :
                                          r == -EISDIR ? "not a regular file" : open_error(r));
        ranges = calloc(b.n_ranges ?: 1, sizeof(*ranges));
        ptrs = calloc(b.n_ranges ?: 1, sizeof(*ptrs));
        if (!ranges || !ptrs) {
                blame_done(&b);
                return client_reply_error(s, c, seq, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < b.n_ranges; i++) {
                sbx__blame_range__init(&ranges[i]);
                ranges[i].start_line = b.ranges[i].start_line;
                ranges[i].line_count = b.ranges[i].line_count;
                ranges[i].owner = b.ranges[i].owner;
                ptrs[i] = &ranges[i];
        }
        o.path = req->path;
        o.n_ranges = b.n_ranges;
        o.ranges = ptrs;
        reply.body_case = SBX__REPLY__BODY_FILE_BLAME;
        reply.file_blame = &o;
        client_reply(s, c, seq, &reply);
        blame_done(&b);
}
