/* The file tools' requests: file_read, file_write, file_edit, file_blame, on
 * the published snapshot (writes publish a one-operation layer) or inside a
 * live workspace session (core/workspace.h resolves and writes). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control.h"
#include "core/publish.h"
#include "core/workspace.h"
#include "data/attribution.h"
#include "data/fileops.h"
#include "fd-util.h"
#include "log.h"
#include "sbx-limits.h"

/* A file_read is answered once its window is read (in the sandbox's lane,
 * off the loop when the file needs indexing): the answer keeps its path. */
typedef struct ReadAnswer {
        Pending pending;
        char path[SBX_PATH_MAX + 1];
} ReadAnswer;

static void read_answered(Server *s, int r, const FileWindow *w, const char *err, void *userdata) {
        Sbx__FileReadReply o = SBX__FILE_READ_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        ReadAnswer *a = userdata;

        if (r < 0)
                pending_answer_error(s, &a->pending, r, "%s: %s", a->path, err[0] ? err : strerror(-r));
        else {
                o.path = a->path;
                o.content.data = (uint8_t *) w->content;
                o.content.len = w->len;
                o.start_line = w->start_line;
                o.num_lines = w->num_lines;
                o.total_lines = w->total_lines;
                o.bytes_read = w->bytes_read;
                o.total_bytes = w->total_bytes;
                o.has_next_offset = w->has_next_offset;
                o.next_offset = w->next_offset;
                o.truncated = w->truncated;
                msg_reply_set(&reply, SBX__REPLY__BODY_FILE_READ, &o);
                pending_answer(s, &a->pending, &reply);
        }
        pending_stop(&a->pending);
        free(a);
}

static void read_abandon(Server *s, Pending *p, bool cancelled) {
        /* Nobody waits for the window any more; it is dropped when read. */
}

int handle_file_read(Request *rq) {
        const Sbx__FileRead *req = rq->msg->file_read;
        char rel[SBX_PATH_MAX + 1];
        _cleanup_close_ int fd = -EBADF;
        WorkspaceSession *ws;
        ReadAnswer *a;
        struct stat st;
        int root, r;

        r = workspace_path(req->path, rel, rq->error, sizeof(rq->error));
        if (r < 0)
                return r;
        r = workspace_root(rq->server, rq->sandbox, req->workspace_session, &ws, &root, rq->error,
                           sizeof(rq->error));
        if (r < 0)
                return r;
        fd = workspace_open(root, rel);
        if (fd < 0)
                return request_error(rq, fd, "%s: %s", req->path, workspace_open_error(fd));
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return request_error(rq, -EINVAL, "%s: not a regular file", req->path);
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        strlcpy(a->path, req->path, sizeof(a->path));
        pending_start(&a->pending, rq->client, rq->seq, read_abandon);
        r = workspace_read(rq->server, rq->sandbox, ws, TAKE_FD(fd), &st, req->has_offset ? req->offset : 1,
                           req->has_limit ? req->limit : SBX_FILE_READ_DEFAULT_LINES, read_answered, a);
        if (r < 0) {
                pending_stop(&a->pending);
                free(a);
                return r;
        }
        return REPLY_DEFERRED;
}


/* What file_write and file_edit answer: the change, the texts it needs, the
 * reply. A write to the published snapshot is answered later (its
 * publication waits for its turn in the sandbox's lane and runs off the
 * loop): then the answer leaves the request and keeps its own copies. */
typedef struct ChangeAnswer {
        Pending pending;
        FileChange ch;
        FileEditList edits;
        Sbx__FileChangeReply o;
        Sbx__Publication pub;
        char rel[SBX_PATH_MAX + 1];
        char path[SBX_PATH_MAX + 1];    /* as the client gave it */
        char ws_id[65];
        char *payload, *old, *updated, *diff;
        const char *type;       /* "edit", or NULL: create or update */
        Sandbox *sandbox;       /* whose snapshot view is mounted again after the reply */
        Store *store;           /* which records its compaction, if the view needs one */
} ChangeAnswer;

static void change_answer_free(void *p) {
        ChangeAnswer *a = p;

        /* The next file operation needs the new snapshot's view: mount it while the client reads the answer. */
        if (a->sandbox) {
                int view;
                (void) snapshot_current(a->store, a->sandbox, &view);
        }
        pending_stop(&a->pending);
        file_change_done(&a->ch);
        file_edit_list_done(&a->edits);
        free(a->payload);
        free(a->old);
        free(a->updated);
        free(a->diff);
        free(a);
}

/* The answer of a write to path (normalized into a->rel: on failure rq->error says why). */
static int change_answer_new(Request *rq, const char *path, const char *ws_id, ChangeAnswer **ret) {
        ChangeAnswer *a = calloc(1, sizeof(*a));

        if (!a)
                return -ENOMEM;
        request_own(rq, change_answer_free, a);
        a->o = (Sbx__FileChangeReply) SBX__FILE_CHANGE_REPLY__INIT;
        a->pub = (Sbx__Publication) SBX__PUBLICATION__INIT;
        strlcpy(a->path, path, sizeof(a->path));
        strlcpy(a->ws_id, ws_id, sizeof(a->ws_id));
        *ret = a;
        return workspace_path(path, a->rel, rq->error, sizeof(rq->error));
}

/* The reply to a->ch, written (its type, diff and edit counts set by the caller). */
static int change_reply(Server *s, Sandbox *sb, ChangeAnswer *a, Sbx__Reply *reply) {
        FileChange *ch = &a->ch;

        if (!ch->in_session && ch->pub.published)
                log_info("File operation %s on '%s' of sandbox '%s' published layer %u", ch->owner, ch->rel,
                         sb->name, ch->pub.layer);
        a->o.type = (char *) (a->type ?: ch->created ? "create" : "update");
        a->o.path = a->path;
        a->o.bytes_written = ch->len;
        a->o.unchanged = ch->unchanged;
        if (!ch->in_session) {
                a->pub.published = ch->pub.published;
                a->pub.layer = ch->pub.layer;
                a->pub.owner = ch->owner;
                a->pub.changed_paths = ch->pub.changed_paths;
                a->o.publication = &a->pub;
        }
        if (ch->pub.published) {
                a->sandbox = sb;
                a->store = s->store;
        }
        return msg_reply_set(reply, SBX__REPLY__BODY_FILE_CHANGE, &a->o);
}

static void change_published(Server *s, FileChange *ch, int r, const char *err, void *userdata) {
        ChangeAnswer *a = container_of(ch, ChangeAnswer, ch);
        Sbx__Reply reply = SBX__REPLY__INIT;

        if (r == -ECANCELED)
                pending_answer_error(s, &a->pending, r, "%s: not written: %s", a->path, err);
        else if (r < 0)
                pending_answer_error(s, &a->pending, r, "%s: %s", a->path, err[0] ? err : strerror(-r));
        else if (change_reply(s, (Sandbox *) userdata, a, &reply) >= 0)
                pending_answer(s, &a->pending, &reply);
        else
                pending_answer_error(s, &a->pending, -ENOMEM, "out of memory");
        change_answer_free(a);
}

static void change_abandon(Server *s, Pending *p, bool cancelled) {
        /* The write goes on; nobody waits for its answer any more. */
}

/* Write a->ch: inside a session at once; to the published snapshot in its
 * turn (prepare makes the content then), answered later. */
static int write_change(Request *rq, ChangeAnswer *a, WorkspacePrepare prepare) {
        FileChange *ch = &a->ch;
        WorkspaceSession *ws;
        char err[400] = "";
        int root, r;

        ch->rel = a->rel;
        ch->ws_id = a->ws_id;
        if (!a->ws_id[0]) {
                r = request_disown(rq, a);
                if (r < 0)
                        return r;
                pending_start(&a->pending, rq->client, rq->seq, change_abandon);
                r = workspace_write_published(rq->server, rq->sandbox, ch, prepare, change_published, rq->sandbox);
                if (r < 0) {
                        change_answer_free(a);
                        return r;
                }
                return REPLY_DEFERRED;
        }
        r = workspace_root(rq->server, rq->sandbox, a->ws_id, &ws, &root, rq->error, sizeof(rq->error));
        if (r < 0)
                return r;
        if (prepare) {
                r = prepare(rq->server, rq->sandbox, ch, a, err, sizeof(err));
                if (r < 0)
                        return rq->error[0] ? r : request_error(rq, r, "%s: %s", a->path, err[0] ? err : strerror(-r));
        }
        r = workspace_write(rq->server, rq->sandbox, ch, rq->error, sizeof(rq->error));
        if (r < 0)
                return rq->error[0] ? r : request_error(rq, r, "%s: %s", a->path, strerror(-r));
        return change_reply(rq->server, rq->sandbox, a, &rq->reply);
}

int handle_file_write(Request *rq) {
        const Sbx__FileWrite *req = rq->msg->file_write;
        ChangeAnswer *a;
        int r;

        r = change_answer_new(rq, req->path, req->workspace_session, &a);
        if (r < 0)
                return r;
        r = request_payload(rq->fd, req->content_size, SBX_FILE_MAX, &a->payload);
        if (r < 0)
                return request_error(rq, r, "file content: %s",
                                     r == -EFBIG ? "larger than the file size limit" : "malformed payload");
        a->ch = (FileChange) { .content = a->payload, .len = req->content_size };
        return write_change(rq, a, NULL);
}

/* The file's text before an edit, from the root the edit writes in. */
static int edit_old_text(Server *s, Sandbox *sb, ChangeAnswer *a, size_t *ret_len, char *err, size_t errsize) {
        WorkspaceSession *ws;
        int root, r;

        r = workspace_root(s, sb, a->ws_id, &ws, &root, err, errsize);
        if (r < 0)
                return r;
        r = read_file_bounded_at(root, a->rel, SBX_FILE_MAX, &a->old, ret_len);
        if (r < 0) {
                snprintf(err, errsize, "%s", r == -EFBIG    ? "larger than the file size limit"
                                             : r == -EISDIR ? "not a regular file"
                                                            : workspace_open_error(r));
                return r;
        }
        if (!text_is_utf8(a->old, *ret_len)) {
                snprintf(err, errsize, "not a UTF-8 text file");
                return -EILSEQ;
        }
        return 0;
}

/* An edit's content, from the file's text where it writes (the snapshot as it is in the edit's turn). */
static int edit_prepare(Server *s, Sandbox *sb, FileChange *ch, void *userdata, char *err, size_t errsize) {
        ChangeAnswer *a = container_of(ch, ChangeAnswer, ch);
        size_t old_len = 0, new_len = 0, diff_len = 0;
        bool diff_truncated = false;
        uint64_t replacements = 0;
        int r;

        r = edit_old_text(s, sb, a, &old_len, err, errsize);
        if (r < 0)
                return r;
        r = file_apply_edits(a->old, old_len, a->edits.specs, a->edits.n, &a->updated, &new_len, &replacements, err,
                             errsize);
        if (r < 0)
                return r;
        r = text_unified_diff(a->path, a->old, old_len, a->updated, new_len, SBX_EDIT_DIFF_MAX_BYTES, &a->diff,
                              &diff_len, &diff_truncated);
        if (r < 0)
                log_debug_errno(r, "No diff of the edit of '%s', ignoring: %m", a->rel);
        ch->old_text = a->old;
        ch->old_len = old_len;
        ch->content = a->updated;
        ch->len = new_len;
        a->o.edits_applied = (uint32_t) a->edits.n;
        a->o.replacements = replacements;
        a->o.diff.data = (uint8_t *) a->diff;
        a->o.diff.len = r < 0 ? 0 : diff_len;
        a->o.diff_truncated = r >= 0 && diff_truncated;
        return 0;
}

int handle_file_edit(Request *rq) {
        const Sbx__FileEdit *req = rq->msg->file_edit;
        ChangeAnswer *a;
        int r;

        r = change_answer_new(rq, req->path, req->workspace_session, &a);
        if (r < 0)
                return r;
        r = request_payload(rq->fd, req->edits_size, SBX_FILE_MAX, &a->payload);
        if (r >= 0)
                r = file_edit_list_parse(a->payload, req->edits_size, &a->edits);
        if (r < 0)
                return request_error(rq, r, r == -ENOMEM ? "out of memory" : "edits: malformed payload");
        a->type = "edit";
        return write_change(rq, a, edit_prepare);
}

/* What file_blame answers. */
typedef struct BlameAnswer {
        Sbx__FileBlameReply o;
        Blame b;
        Sbx__BlameRange *ranges;
        Sbx__BlameRange **ptrs;
} BlameAnswer;

static void blame_answer_free(void *p) {
        BlameAnswer *a = p;

        blame_done(&a->b);
        free(a->ranges);
        free(a->ptrs);
        free(a);
}

/* The attribution of the published file at rel. */
static int published_blame(Request *rq, const char *rel, Blame *ret) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int view, r;

        r = snapshot_current(rq->server->store, rq->sandbox, &view);
        if (r >= 0)
                r = read_file_bounded_at(view, rel, SBX_FILE_MAX, &text, &len);
        if (r >= 0 && !text_is_utf8(text, len))
                r = -EILSEQ;
        if (r >= 0)
                r = blame_of_published(rq->server->store, rq->sandbox->id, rel, text, len, ret);
        return r;
}

int handle_file_blame(Request *rq) {
        const Sbx__FileBlame *req = rq->msg->file_blame;
        BlameAnswer *a = calloc(1, sizeof(*a));
        char rel[SBX_PATH_MAX + 1];
        int r;

        if (!a)
                return -ENOMEM;
        request_own(rq, blame_answer_free, a);
        r = workspace_path(req->path, rel, rq->error, sizeof(rq->error));
        if (r < 0)
                return r;
        r = published_blame(rq, rel, &a->b);
        if (r < 0)
                return request_error(rq, -ENOENT, "not_found: no auditability record for '%s' (%s)", req->path,
                                     r == -EILSEQ   ? "not a UTF-8 text file"
                                     : r == -EFBIG  ? "larger than the file size limit"
                                     : r == -EISDIR ? "not a regular file"
                                                    : workspace_open_error(r));
        a->ranges = calloc(a->b.n_ranges ?: 1, sizeof(*a->ranges));
        a->ptrs = calloc(a->b.n_ranges ?: 1, sizeof(*a->ptrs));
        if (!a->ranges || !a->ptrs)
                return -ENOMEM;
        for (size_t i = 0; i < a->b.n_ranges; i++) {
                sbx__blame_range__init(&a->ranges[i]);
                a->ranges[i].start_line = a->b.ranges[i].start_line;
                a->ranges[i].line_count = a->b.ranges[i].line_count;
                a->ranges[i].owner = a->b.ranges[i].owner;
                a->ptrs[i] = &a->ranges[i];
        }
        a->o = (Sbx__FileBlameReply) SBX__FILE_BLAME_REPLY__INIT;
        a->o.path = req->path;
        a->o.n_ranges = a->b.n_ranges;
        a->o.ranges = a->ptrs;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_FILE_BLAME, &a->o);
}
