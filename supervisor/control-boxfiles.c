/* The boxes set's files and pictures (issue 21 part D, docs/boxes.md):
 * sandbox_sync (a tar from sandbox-mcp unpacked in the box by tar, as the
 * box's root), sandbox_get (a file copied out with the box's root's
 * filesystem ids, or a tar.gz made by tar in the box), sandbox_shot (a PNG
 * or an mp4 made by ffmpeg or Chromium in the box). Whatever comes out is
 * placed for the caller (core/boxfiles.h). The box's own files are reached
 * only through its session's root fd (data/claimfs.h), and what runs in the
 * box runs as the box's commands do. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control.h"
#include "core/box.h"
#include "core/boxfiles.h"
#include "core/boxwire.h"
#include "core/egress-proxy.h"
#include "core/session.h"
#include "data/claimfs.h"
#include "fd-util.h"
#include "memfd-util.h"
#include "sbx-limits.h"

#define BOX_WORK "work"
#define BOX_TMP_HEX 16u

typedef enum BoxOpKind {
        BOX_OP_SYNC,
        BOX_OP_GET_DIR,
        BOX_OP_SHOT,
        BOX_OP_RECORD_START,
        BOX_OP_RECORD_STOP,
} BoxOpKind;

/* A request answered once its command in the box ended. */
typedef struct BoxOp {
        Pending pending;
        BoxOpKind kind;
        uid_t caller_uid;
        gid_t caller_gid;
        uid_t box_uid;                  /* the box's root's host uid */
        uint64_t bytes;                 /* sandbox_sync: of the tar, and what sandbox-mcp counted */
        uint32_t entries, excluded, special;
        char tmp[SBX_PATH_MAX + 1];     /* relative to the box's root: what the command leaves, or "" */
        char box_path[SBX_PATH_MAX + 2]; /* what the caller named, as "/work/..." */
        char name[NAME_MAX + 1];        /* the placed file's name */
} BoxOp;

/* The caller's box id, used (a frozen one thawed) and ready: it, its session and its root's host uid. */
static int box_target(Request *rq, const char *id, Box **ret, WorkspaceSession **ret_ws, uid_t *ret_uid) {
        WorkspaceSession *ws;
        Box *box;
        int r;

        r = find_box(rq, id, true, &box);
        if (r >= 0)
                r = box_runnable(rq, box);
        if (r < 0)
                return r;
        ws = box_session(rq->server, box);
        if (!ws)
                return request_error(rq, -EAGAIN, "Box '%s' is not ready (%s)", box->id, box_state_name(box));
        *ret = box;
        *ret_ws = ws;
        *ret_uid = box->claim->sandbox->uid_base;
        return 0;
}

static void op_abandon(Server *s, Pending *p, bool cancelled) {
        /* The command goes on; its end finds the op detached and frees it. */
}

/* in (relative to /work, or absolute below it) as a path relative to the
 * box's root ("work/..."), and as the caller sees it ("/work/..."). */
static int box_rel(Request *rq, const char *what, const char *in, char *rel, char *shown) {
        char err[300];
        int r = box_path(in, rel, err, sizeof(err));

        if (r < 0)
                return request_error(rq, r, "invalid arguments: %s: %s", what,
                                     strncmp(err, "cwd: ", 5) == 0 ? err + 5 : err);
        snprintf(shown, SBX_PATH_MAX + 2, "/%s", rel);
        return 0;
}

static int op_new(Request *rq, BoxOpKind kind, uid_t box_uid, BoxOp **ret) {
        BoxOp *op = calloc(1, sizeof(*op));
        char hex[BOX_TMP_HEX + 1];
        int r;

        if (!op)
                return -ENOMEM;
        r = random_hex(hex, BOX_TMP_HEX);
        if (r < 0) {
                free(op);
                return r;
        }
        hex[BOX_TMP_HEX] = '\0';
        op->kind = kind;
        op->caller_uid = rq->client->uid;
        op->caller_gid = rq->client->gid;
        op->box_uid = box_uid;
        snprintf(op->tmp, sizeof(op->tmp), BOX_WORK "/.sbx/.sbx-%s.%s", hex,
                 kind == BOX_OP_SYNC ? "tar" : kind == BOX_OP_GET_DIR ? "tar.gz" : kind == BOX_OP_RECORD_STOP ? "mp4" : "png");
        *ret = op;
        return 0;
}

static void reply_placed(Server *s, const BoxOp *op, Pending *p, const BoxPlaced *placed, const char *kind,
                         bool recording) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__BoxFileReply o = SBX__BOX_FILE_REPLY__INIT;
        const char *gateway_url = p->client ? p->client->gateway_url : "";
        char url[MAX(SBX_PATH_MAX, SBX_GATEWAY_URL_MAX) + BOX_PLACED_ID_HEX + 16];
        _cleanup_close_ int shot = -EBADF;
        BoxPlaced again;

        /* Through sbx-gateway: its URL of the file, which it serves to the owner's tokens (BOX_FILE_OPEN). */
        if (placed && gateway_url[0])
                snprintf(url, sizeof(url), "%s/files/%s", gateway_url, placed->id);
        else
                snprintf(url, sizeof(url), "file://%s", placed ? placed->path : "");
        o.path = placed ? (char *) placed->path : (char *) "";
        o.url = placed ? url : (char *) "";
        o.file_id = placed ? (char *) placed->id : (char *) "";
        o.bytes = placed ? placed->bytes : 0;
        o.expires_unix = placed ? placed->expires_unix : 0;
        o.kind = (char *) kind;
        o.box_path = (char *) op->box_path;
        o.recording = recording;
        if (op->kind == BOX_OP_SYNC) {
                o.bytes = op->bytes;
                o.entries = op->entries;
                o.excluded = op->excluded;
                o.special = op->special;
        }
        msg_reply_set(&reply, SBX__REPLY__BODY_BOX_FILE, &o);
        /* A picture goes with its file open, for the image content: the broker
         * (sbx-gateway's included, which cannot read the caller's files) reads that. */
        if (placed && op->kind == BOX_OP_SHOT && box_files_open(s, op->caller_uid, placed->id, &shot, &again) < 0)
                shot = -EBADF;
        pending_answer_fd(s, p, &reply, TAKE_FD(shot));
}

/* The box's file rel, placed for the caller as name. */
static int place_from_box(Server *s, int root, const BoxOp *op, const char *rel, BoxPlaced *ret, char *err,
                          size_t errsize) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t size = 0;
        int r;

        r = claimfs_get(root, op->box_uid, rel, SBX_BOX_FILE_MAX, 0, &fd, &size, err, errsize);
        if (r < 0)
                return r;
        r = box_files_place(s, op->caller_uid, op->caller_gid, fd, size, op->name, ret);
        if (r < 0)
                snprintf(err, errsize, "cannot place the file for you: %s", strerror(-r));
        return r;
}

static const char *op_kind(const BoxOp *op) {
        static const char *const kinds[] = {
                [BOX_OP_SYNC] = "synced", [BOX_OP_GET_DIR] = "tar.gz", [BOX_OP_SHOT] = "png",
                [BOX_OP_RECORD_START] = "recording", [BOX_OP_RECORD_STOP] = "mp4",
        };
        return kinds[op->kind];
}

static void op_done(Server *s, WorkspaceSession *ws, const StoreCommand *rec, const char *tail, void *userdata) {
        _cleanup_free_ BoxOp *op = userdata;
        char err[600] = "";
        BoxPlaced placed;
        bool ok = rec && rec->has_exit_code && rec->exit_code == 0 && ws;
        bool keeps = op->kind == BOX_OP_SHOT || op->kind == BOX_OP_GET_DIR || op->kind == BOX_OP_RECORD_STOP;
        int r = 0;

        if (ok && keeps)
                r = place_from_box(s, ws->root_fd, op, op->tmp, &placed, err, sizeof(err));
        if (ws && op->tmp[0] && op->kind != BOX_OP_RECORD_START)
                (void) claimfs_remove(ws->root_fd, op->box_uid, op->tmp);
        if (!pending_active(&op->pending))
                return;
        if (!ws)
                pending_answer_error(s, &op->pending, -ESHUTDOWN, "the box stopped before %s was done",
                                     op->box_path[0] ? op->box_path : "it");
        else if (!ok)
                pending_answer_error(s, &op->pending, -EIO, "%s failed in the box (%s %d): %.400s",
                                     op_kind(op), rec ? rec->end_reason : "not started",
                                     rec ? (rec->has_exit_code ? rec->exit_code : rec->signal) : 0, tail);
        else if (r < 0)
                pending_answer_error(s, &op->pending, r, "%s", err);
        else
                reply_placed(s, op, &op->pending, keeps ? &placed : NULL, op_kind(op), op->kind == BOX_OP_RECORD_START);
}

/* Run cmd in the box for op (taken); answered by op_done. */
static int op_run(Request *rq, Box *box, BoxOp *op, const char *cmd) {
        char err[400] = "";
        int r = box_run(rq->server, box, cmd, op_done, op, err, sizeof(err));

        if (r < 0) {
                WorkspaceSession *ws = box_session(rq->server, box);

                if (ws && op->tmp[0] && op->kind == BOX_OP_SYNC)
                        (void) claimfs_remove(ws->root_fd, op->box_uid, op->tmp);
                free(op);
                return request_error(rq, r, "cannot run in the box: %s", err[0] ? err : strerror(-r));
        }
        pending_start(&op->pending, rq->client, rq->seq, op_abandon);
        return REPLY_DEFERRED;
}

/* "/" rel as one shell word, in memory of rq. */
static char *quoted(Request *rq, const char *prefix, const char *rel) {
        size_t n = 4 * (strlen(prefix) + strlen(rel)) + 8;
        _cleanup_free_ char *path = NULL;
        char *q = request_alloc(rq, n);

        if (!q || asprintf(&path, "%s%s", prefix, rel) < 0)
                return NULL;
        return box_shell_quote(path, q, n) < 0 ? NULL : q;
}

static int run_formatted(Request *rq, Box *box, BoxOp *op, const char *fmt, ...) _printf_(4, 5);
static int run_formatted(Request *rq, Box *box, BoxOp *op, const char *fmt, ...) {
        _cleanup_free_ char *cmd = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&cmd, fmt, ap);
        va_end(ap);
        if (n < 0) {
                free(op);
                return -ENOMEM;
        }
        return op_run(rq, box, op, cmd);
}

int handle_box_sync(Request *rq) {
        const Sbx__BoxSync *req = rq->msg->box_sync;
        int need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW, seals, r;
        char rel[SBX_PATH_MAX + 1], err[400] = "";
        _cleanup_free_ BoxOp *op = NULL;
        const char *dest, *tar;
        WorkspaceSession *ws;
        struct stat st;
        Box *box;
        uid_t uid;

        r = box_target(rq, req->box, &box, &ws, &uid);
        if (r < 0)
                return r;
        seals = rq->fd >= 0 ? fcntl(rq->fd, F_GET_SEALS) : -1;
        if (seals < 0 || (seals & need) != need || fstat(rq->fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            (uint64_t) st.st_size != req->tar_size || req->tar_size > SBX_BOX_SYNC_MAX)
                return request_error(rq, -EBADMSG, "the tar must come as a sealed memfd of tar_size bytes, "
                                     "at most %llu (SBX_BOX_SYNC_MAX)", (unsigned long long) SBX_BOX_SYNC_MAX);
        r = op_new(rq, BOX_OP_SYNC, uid, &op);
        if (r < 0)
                return r;
        r = box_rel(rq, "dest", req->dest[0] ? req->dest : ".", rel, op->box_path);
        if (r < 0)
                return r;
        dest = quoted(rq, "/", rel);
        tar = quoted(rq, "/", op->tmp);
        if (!dest || !tar)
                return -ENOMEM;
        op->bytes = req->tar_size;
        op->entries = req->entries;
        op->excluded = req->excluded;
        op->special = req->special;
        r = claimfs_put(ws->root_fd, uid, op->tmp, rq->fd, req->tar_size, 0, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "cannot copy the tar into the box: %s", err);
        return run_formatted(rq, box, TAKE_PTR(op), "mkdir -p %s && tar -xf %s -C %s --no-same-owner", dest, tar,
                             dest);
}

/* A file of the box placed at once: answered before the handler returns. */
static int get_file(Request *rq, WorkspaceSession *ws, BoxOp *op, const char *rel) {
        char err[400] = "";
        BoxPlaced placed;
        const char *slash = strrchr(rel, '/');
        int r;

        snprintf(op->name, sizeof(op->name), "%.200s", slash ? slash + 1 : rel);
        r = place_from_box(rq->server, ws->root_fd, op, rel, &placed, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "%s", err);
        pending_start(&op->pending, rq->client, rq->seq, op_abandon);
        reply_placed(rq->server, op, &op->pending, &placed, "file", false);
        return REPLY_DEFERRED;
}

int handle_box_get(Request *rq) {
        const Sbx__BoxGet *req = rq->msg->box_get;
        char rel[SBX_PATH_MAX + 1];
        _cleanup_free_ BoxOp *op = NULL;
        const char *type = NULL, *dir, *tmp, *slash, *self;
        WorkspaceSession *ws;
        Box *box;
        uid_t uid;
        int r;

        r = box_target(rq, req->box, &box, &ws, &uid);
        if (r < 0)
                return r;
        r = op_new(rq, BOX_OP_GET_DIR, uid, &op);
        if (r >= 0)
                r = box_rel(rq, "path", req->path, rel, op->box_path);
        if (r < 0)
                return r;
        r = claimfs_stat(ws->root_fd, uid, rel, &type);
        if (r <= 0)
                return request_error(rq, r < 0 ? r : -ENOENT, "cannot get '%s': %s", op->box_path,
                                     r < 0 ? strerror(-r) : "no such file or directory");
        if (strcmp(type, "file") == 0)
                return get_file(rq, ws, op, rel);
        if (strcmp(type, "directory") != 0)
                return request_error(rq, -EINVAL, "cannot get '%s': it is a %s, not a file or a directory",
                                     op->box_path, type);
        slash = strrchr(rel, '/');
        snprintf(op->name, sizeof(op->name), "%.200s.tar.gz", slash ? slash + 1 : rel);
        dir = quoted(rq, "/", rel);
        tmp = quoted(rq, "/", op->tmp);
        self = quoted(rq, "", strrchr(op->tmp, '/') + 1);
        if (!dir || !tmp || !self)
                return -ENOMEM;
        /* The archive is made in /work/.sbx: left out of itself by its name. */
        return run_formatted(rq, box, TAKE_PTR(op), "mkdir -p /work/.sbx && tar -czf %s --exclude=%s -C %s .", tmp,
                             self, dir);
}

int handle_box_file_open(Request *rq) {
        Sbx__BoxFileReply *o = REQUEST_NEW(rq, Sbx__BoxFileReply, SBX__BOX_FILE_REPLY__INIT);
        BoxPlaced *placed = request_alloc(rq, sizeof(*placed));
        int r;

        if (!o || !placed)
                return -ENOMEM;
        /* Another uid's id, an expired one and one never made look the same. */
        r = box_files_open(rq->server, rq->client->uid, rq->msg->box_file_open->id, &rq->reply_fd, placed);
        if (r < 0)
                return request_error(rq, r, "no such file (unknown, expired or not yours)");
        o->path = placed->name;
        o->file_id = placed->id;
        o->bytes = placed->bytes;
        o->expires_unix = placed->expires_unix;
        o->kind = (char *) "file";
        o->box_path = (char *) "";
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_BOX_FILE, o);
}

/* What sandbox_shot runs in the box (the recording's files are in /work/.sbx). */
#define SHOT_DISPLAY_CHECK                                                                              \
        "[ -S /tmp/.X11-unix/X99 ] || { echo 'the box has no display :99 (its image has no Xvfb)' >&2; exit 1; }; " \
        "command -v ffmpeg >/dev/null || { echo 'ffmpeg is not in the box image' >&2; exit 1; }; "
#define REC "/work/.sbx/.sbx-recording"

static int shot_record(Request *rq, Box *box, BoxOp *op, bool start) {
        const char *tmp = quoted(rq, "/", op->tmp);

        if (!tmp)
                return -ENOMEM;
        if (start)
                return run_formatted(rq, box, op, SHOT_DISPLAY_CHECK
                        "mkdir -p /work/.sbx && if [ -s " REC ".pid ] && kill -0 \"$(cat " REC ".pid)\" 2>/dev/null; "
                        "then echo 'a recording already runs: stop it first (record stop)' >&2; exit 1; fi; "
                        "rm -f " REC ".mp4; setsid -f sh -c 'echo $$ >" REC ".pid; exec ffmpeg -nostdin -loglevel "
                        "error -y -f x11grab -framerate 15 -i :99 -c:v libx264 -preset ultrafast -pix_fmt yuv420p "
                        "-vf \"pad=ceil(iw/2)*2:ceil(ih/2)*2\" " REC ".mp4 </dev/null >" REC ".log 2>&1'; sleep 1; "
                        "[ -s " REC ".pid ] && kill -0 \"$(cat " REC ".pid)\" 2>/dev/null || "
                        "{ cat " REC ".log >&2; exit 1; }");
        return run_formatted(rq, box, op,
                "[ -s " REC ".pid ] || { echo 'no recording runs: start one with record start' >&2; exit 1; }; "
                "p=$(cat " REC ".pid); rm -f " REC ".pid; kill -INT \"$p\" 2>/dev/null; i=0; "
                "while [ -d /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null && [ $i -lt 100 ]; "
                "do sleep 0.1; i=$((i+1)); done; [ -s " REC ".mp4 ] || { cat " REC ".log >&2; exit 1; }; "
                "mv " REC ".mp4 %s", tmp);
}

int handle_box_shot(Request *rq) {
        const Sbx__BoxShot *req = rq->msg->box_shot;
        bool url = strcmp(req->target, "url") == 0;
        _cleanup_free_ BoxOp *op = NULL;
        const char *tmp, *u;
        WorkspaceSession *ws;
        Box *box;
        uid_t uid;
        int r;

        if (req->target[0] && !url && strcmp(req->target, "screen") != 0)
                return request_error(rq, -EINVAL, "invalid arguments: target: screen or url");
        if (req->record[0] && strcmp(req->record, "start") != 0 && strcmp(req->record, "stop") != 0)
                return request_error(rq, -EINVAL, "invalid arguments: record: start or stop");
        if (url && !req->record[0] && strncmp(req->url, "http://", 7) != 0 && strncmp(req->url, "https://", 8) != 0 &&
            strncmp(req->url, "file://", 7) != 0)
                return request_error(rq, -EINVAL, "invalid arguments: url: target url needs an http://, https:// "
                                     "or file:// URL");
        r = box_target(rq, req->box, &box, &ws, &uid);
        if (r < 0)
                return r;
        r = op_new(rq, !req->record[0] ? BOX_OP_SHOT : req->record[2] == 'a' ? BOX_OP_RECORD_START
                                                                             : BOX_OP_RECORD_STOP, uid, &op);
        if (r < 0)
                return r;
        snprintf(op->name, sizeof(op->name), "%s", op->kind == BOX_OP_RECORD_STOP ? "recording.mp4" : "shot.png");
        if (op->kind != BOX_OP_SHOT) {
                bool start = op->kind == BOX_OP_RECORD_START;
                return shot_record(rq, box, TAKE_PTR(op), start);
        }
        tmp = quoted(rq, "/", op->tmp);
        u = quoted(rq, "", req->url);
        if (!tmp || !u)
                return -ENOMEM;
        if (url)
                return run_formatted(rq, box, TAKE_PTR(op),
                        "command -v chromium >/dev/null || { echo 'chromium is not in the box image' >&2; exit 1; }; "
                        "mkdir -p /work/.sbx && d=$(mktemp -d) && HOME=$d chromium --headless --no-sandbox "
                        "--disable-gpu --hide-scrollbars --no-first-run --user-data-dir=$d --window-size=%u,%u "
                        "--screenshot=%s %s 2>$d/log; r=$?; [ -s %s ] || { tail -n 20 $d/log >&2; r=1; }; "
                        "rm -rf $d; exit $r", SBX_BOX_SHOT_WIDTH, SBX_BOX_SHOT_HEIGHT, tmp, u, tmp);
        return run_formatted(rq, box, TAKE_PTR(op), SHOT_DISPLAY_CHECK
                             "mkdir -p /work/.sbx && ffmpeg -nostdin -loglevel error -y -f x11grab -i :99 "
                             "-frames:v 1 %s", tmp);
}

/* ---- sandbox_wire (core/boxwire.h) -------------------------------------------------- */

static int wire_reply(Request *rq, const Box *box, const char *hosts) {
        Sbx__BoxWireReply *o = REQUEST_NEW(rq, Sbx__BoxWireReply, SBX__BOX_WIRE_REPLY__INIT);
        int r;

        if (!o)
                return -ENOMEM;
        r = box_wiring_rows(rq, box, hosts, &o->wiring, &o->n_wiring);
        return r < 0 ? r : msg_reply_set(&rq->reply, SBX__REPLY__BODY_BOX_WIRE, o);
}

/* External: the box must reach externalBaseUrl's host through sbx-egress. */
static int wire_external_check(Request *rq, const Box *box, const WorkspaceSession *ws) {
        char host[SBX_EGRESS_HOST_MAX + 1];
        uint16_t port;

        if (!box->external_base_url[0])
                return request_error(rq, -EINVAL, "invalid arguments: mode external: the box has no externalBaseUrl "
                                     "(sandbox_start's)");
        if (box_url_target(box->external_base_url, host, &port) < 0)
                return request_error(rq, -EINVAL, "mode external: externalBaseUrl '%.200s' names no host",
                                     box->external_base_url);
        if (ws->egress_fd < 0)
                return request_error(rq, -EOPNOTSUPP, "mode external: this box reaches no host outside (its egress "
                                     "policy is none: box_egress in sbxd.conf, docs/boxes.md)");
        return 0;
}

int handle_box_wire(Request *rq) {
        const Sbx__BoxWire *req = rq->msg->box_wire;
        _cleanup_free_ char *hosts = NULL, *wired = NULL;
        _cleanup_close_ int mem = -EBADF;
        char err[400] = "";
        const Sbx__BoxService *sv = NULL;
        bool external = strcmp(req->mode, "external") == 0;
        WorkspaceSession *ws;
        Box *box;
        uid_t uid;
        int r;

        r = box_target(rq, req->box, &box, &ws, &uid);
        if (r < 0)
                return r;
        for (size_t i = 0; i < box->n_services && !sv; i++)
                if (strcmp(box->services[i]->name, req->service) == 0)
                        sv = box->services[i];
        if (!sv)
                return request_error(rq, -ENOENT, "invalid arguments: service: '%.80s' is not one of the box's "
                                     "services (sandbox_start's services[])", req->service);
        if (strcmp(req->mode, "box") != 0 && !external)
                return request_error(rq, -EINVAL, "invalid arguments: mode: box or external");
        r = external ? wire_external_check(rq, box, ws) : 0;
        if (r < 0)
                return r;
        r = box_hosts_read(ws, &hosts);
        if (r < 0)
                return request_error(rq, r, "cannot read the box's /etc/hosts: %s", strerror(-r));
        wired = box_hosts_wired(hosts, sv->name, req->mode);
        if (!wired)
                return -ENOMEM;
        r = sealed_memfd_new("sbx-hosts", wired, strlen(wired), &mem);
        if (r < 0)
                return r;
        /* As root: the default image's /etc is the host root's (the box's root may not write it). */
        r = claimfs_put(ws->root_fd, 0, "etc/hosts", mem, strlen(wired), 0, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "cannot write the box's /etc/hosts: %s", err);
        /* sbx-egress takes the session's aliases again (its open connections end), and the
         * box's commands get a no_proxy with its names wired box. */
        egress_proxy_attach(rq->server, ws);
        box_wiring_changed(box);
        box_no_proxy_ensure(rq->server, box);
        return wire_reply(rq, box, wired);
}
