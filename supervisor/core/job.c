#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "allowlist.h"
#include "core/job.h"
#include "core/owner.h"
#include "core/sandbox.h"
#include "core/spare.h"
#include "data/layer.h"
#include "fd-util.h"
#include "log.h"
#include "msg.h"
#include "sbx-limits.h"

_Static_assert(SBX_WIRE_MAX_FDS >= SBX_SCRIPT_INPUTS_MAX, "a JOB_START carries one fd per input");
_Static_assert(SPAWN_MOUNTS_MAX <= SEND_FDS_MAX, "SETUP_GO carries a job's mounts");

#define JOB_SANDBOX_PREFIX "job-"
#define CUT_MARKER "\n[... %llu bytes cut ...]\n"
#define CUT_MARKER_MAX 48u              /* bytes of CUT_MARKER with its number, and its NUL */

struct JobWaiter {
        TAILQ_ENTRY(JobWaiter) link;
        Job *job;
        Pending pending;
        unsigned long long deadline_usec;
};

Job *job_find(Server *s, const Client *c, const char *id) {
        Job *job;

        TAILQ_FOREACH(job, &s->jobs, link)
                if (strcmp(job->id, id) == 0 && (c->uid == 0 || c->uid == job->uid))
                        return job;
        return NULL;
}

/* ---- the record ------------------------------------------------------------------ */

void job_record_of(Job *job, Sbx__JobInfo *o) {
        sbx__job_info__init(o);
        if (job->egress != EGRESS_NONE) {
                egress_audit_view(job->cmd ? &job->cmd->egress : &job->audit, job->egress, &job->audit_view);
                o->audit = &job->audit_view;
        }
        o->job_id = (char *) job->id;
        o->status = (char *) job->status;
        o->has_exit_code = job->has_exit_code;
        o->exit_code = job->exit_code;
        o->signal = job->signal;
        o->output_dir = job->output_dir;
        o->ended = job->ended;
        o->command = job->command;
        o->image = (char *) job->image;
        o->egress = (char *) egress_policy_to_string(job->egress);
        o->uid = job->uid;
        o->gid = job->gid;
        o->started_unix = job->started_unix;
        o->ended_unix = job->ended_unix;
}

static void job_save(Server *s, Job *job) {
        _cleanup_free_ uint8_t *buf = NULL;
        Sbx__JobInfo o;
        size_t len;
        int r;

        job_record_of(job, &o);
        len = sbx__job_info__get_packed_size(&o);
        buf = malloc(len ?: 1);
        if (!buf)
                r = -ENOMEM;
        else {
                (void) sbx__job_info__pack(&o, buf);
                r = store_job_put(s->store, job->id, job->uid, buf, len);
        }
        if (r < 0)
                log_warning_errno(r, "Failed to record job %s, ignoring: %m", job->id);
}

/* ---- tails of the logs ------------------------------------------------------------ */

/* Bytes [off, off + len) of fd into buf + *at. */
static int read_part(int fd, uint64_t off, size_t len, char *buf, size_t *at) {
        ssize_t n = loop_pread(fd, buf + *at, len, off);

        if (n < 0)
                return (int) n;
        *at += (size_t) n;
        return 0;
}

/* Where a UTF-8 character starts at or after p (at most 3 bytes on). */
static size_t char_start(const char *b, size_t p, size_t len) {
        for (size_t k = 0; k < 3 && p < len && ((unsigned char) b[p] & 0xc0) == 0x80; k++)
                p++;
        return p;
}

/* Where the last whole UTF-8 character of b[0, len) ends. */
static size_t char_end(const char *b, size_t len) {
        size_t p = len, need;
        unsigned char lead;

        while (p > 0 && len - p < 3 && ((unsigned char) b[p - 1] & 0xc0) == 0x80)
                p--;
        if (p == 0)
                return len;
        lead = (unsigned char) b[p - 1];
        need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
        return p - 1 + need > len ? p - 1 : len;
}

/* A log as results show it: whole up to max bytes, else (head) its first
 * 40 % and last part around the cut marker, or (no head) its last max bytes. */
static int log_tail(const Job *job, const char *name, size_t max, bool head, ProtobufCBinaryData *ret,
                    uint64_t *ret_size) {
        _cleanup_close_ int dir = -EBADF, fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t at = 0, buf_start = 0, start;
        struct stat st;
        int r;

        dir = open(job->output_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        fd = dir < 0 ? -EBADF : openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                *ret = (ProtobufCBinaryData) {};
                *ret_size = 0;
                return 0;               /* removed or replaced from inside: nothing to show */
        }
        buf = malloc(max);
        if (!buf)
                return -ENOMEM;
        if ((uint64_t) st.st_size <= max)
                r = read_part(fd, 0, (size_t) st.st_size, buf, &at);
        else if (!head)
                r = read_part(fd, (uint64_t) st.st_size - max, max, buf, &at);
        else {
                /* The marker's room (at most CUT_MARKER_MAX) is taken from the head and tail. */
                size_t room = max - CUT_MARKER_MAX, h = room * 2 / 5, t = room - h;

                r = read_part(fd, 0, h, buf, &at);
                at = char_end(buf, at);
                at += (size_t) snprintf(buf + at, CUT_MARKER_MAX, CUT_MARKER,
                                        (unsigned long long) ((uint64_t) st.st_size - at - t));
                buf_start = at;
                if (r >= 0)
                        r = read_part(fd, (uint64_t) st.st_size - t, t, buf, &at);
        }
        if (r < 0)
                return r;
        /* A character cut at the start of the tail goes whole. */
        start = char_start(buf, buf_start, at) - buf_start;
        memmove(buf + buf_start, buf + buf_start + start, at - buf_start - start);
        at -= start;
        *ret = (ProtobufCBinaryData) { .len = at, .data = (uint8_t *) TAKE_PTR(buf) };
        *ret_size = (uint64_t) st.st_size;
        return 0;
}

int job_info(Server *s, Job *job, Sbx__JobInfo *o) {
        int r;

        job_record_of(job, o);
        if (!job->ended)
                return 0;
        r = log_tail(job, "stdout.log", s->cfg.script_stdout_max, true, &o->stdout, &o->stdout_bytes);
        if (r >= 0)
                r = log_tail(job, "stderr.log", SBX_SCRIPT_STDERR_TAIL, false, &o->stderr, &o->stderr_bytes);
        if (r < 0)
                job_info_done(o);
        return r;
}

void job_info_done(Sbx__JobInfo *o) {
        free(o->stdout.data);
        free(o->stderr.data);
        o->stdout = o->stderr = (ProtobufCBinaryData) {};
}

/* ---- answers ---------------------------------------------------------------------- */

static void job_answer(Server *s, Job *job, Pending *p) {
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__JobInfo o;
        int r;

        if (!pending_active(p))
                return;
        r = job_info(s, job, &o);
        if (r < 0) {
                pending_answer_error(s, p, r, "cannot read the job's output: %s", strerror(-r));
                return;
        }
        msg_reply_set(&reply, SBX__REPLY__BODY_JOB, &o);
        pending_answer(s, p, &reply);
        job_info_done(&o);
}

static void waiter_free(JobWaiter *w) {
        pending_stop(&w->pending);
        TAILQ_REMOVE(&w->job->waiters, w, link);
        free(w);
}

static void waiter_abandon(Server *s, Pending *p, bool cancelled) {
        waiter_free(container_of(p, JobWaiter, pending));
}

int job_add_waiter(Server *s, Job *job, Client *c, uint32_t seq, uint32_t timeout_s) {
        JobWaiter *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->job = job;
        w->deadline_usec = now_usec() + timeout_s * 1000000ull;
        TAILQ_INSERT_TAIL(&job->waiters, w, link);
        pending_start(&w->pending, c, seq, waiter_abandon);
        return 0;
}

/* Its end to everyone who waits: the synchronous caller, the waiters, and
 * the background starter (one MSG_JOB_ENDED, the seq of its JOB_START). */
static void job_answer_all(Server *s, Job *job) {
        JobWaiter *w;
        Sbx__JobInfo o;

        if (job->start_failed && pending_active(&job->answer))
                pending_answer_error(s, &job->answer, -EIO, "create sandbox: %s", job->start_error);
        job_answer(s, job, &job->answer);
        while ((w = TAILQ_FIRST(&job->waiters))) {
                job_answer(s, job, &w->pending);
                waiter_free(w);
        }
        if (pending_active(&job->notify)) {
                job_record_of(job, &o);
                pending_send(s, &job->notify, SBX__MSG_TYPE__MSG_JOB_ENDED, &o);
                pending_stop(&job->notify);
        }
}

/* ---- the end ---------------------------------------------------------------------- */

/* "job-" and the 32 hex digits of a job's id. */
static void job_sandbox_name(const char *id, char name[static SBX_NAME_MAX + 1]) {
        size_t k = strlen(JOB_SANDBOX_PREFIX);

        strlcpy(name, JOB_SANDBOX_PREFIX, SBX_NAME_MAX + 1);
        for (const char *p = id; *p && k < SBX_NAME_MAX; p++)
                if (*p != '-')
                        name[k++] = *p;
        name[k] = '\0';
}


static void mounts_free(SessionMounts *m) {
        if (!m)
                return;
        for (size_t i = 0; i < m->names.n; i++)
                safe_close(m->fds[i]);
        free(m);
}

/* Everything in out becomes the owner's, then out and its job directory 0700. */
static void job_hand_over(Server *s, Job *job) {
        _cleanup_close_ int dir = openat(s->jobs_fd, job->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r;

        r = dir < 0 ? -errno : tree_chown_at(dir, "out", job->uid, job->gid);
        if (r >= 0 && (fchown(dir, job->uid, job->gid) < 0 || fchmod(dir, 0700) < 0))
                r = -errno;
        if (r < 0)
                log_warning_errno(r, "Failed to give the output of job %s to uid %u, ignoring: %m", job->id,
                                  (unsigned) job->uid);
}

static void job_end_status(Job *job, const Command *c) {
        const char *status = job->cancelling ? "cancelled" : c && c->timed_out ? "timed_out" : "exited";

        strlcpy(job->status, status, sizeof(job->status));
        if (c) {
                job->has_exit_code = true;
                job->signal = c->rec.has_exit_code ? 0 : c->rec.signal;
                job->exit_code = c->rec.has_exit_code ? c->rec.exit_code : 128 + c->rec.signal;
        }
}

/* Every process of the sandbox goes (its command, if it still ran, ends
 * killed), then the output is handed over, everyone is answered, and only
 * then the sandbox is deleted (its records and files). */
static void job_finish(Server *s, Job *job) {
        char name[SBX_NAME_MAX + 1];
        WorkspaceSession *ws, *next;
        Sandbox *sb = NULL;
        int r;

        /* By name: its owner may have deleted it meanwhile (sbxctl sandbox delete). */
        if (job->has_sandbox) {
                job_sandbox_name(job->id, name);
                sb = sandbox_find(s, name);
                job->has_sandbox = false;
        }

        if (sb) {
                TAILQ_FOREACH_SAFE(ws, &s->sessions, link, next)
                        if (ws->sandbox == sb)
                                session_destroy(s, ws);
                sessions_wait_ended(s, sb);
        }
        job->finishing = false;         /* the sessions' end ended its command, if it still ran */
        if (job->cmd) {
                /* Not ended by the deletion (it never got to a session): it ends here. */
                job->cmd->observer = NULL;
                job->cmd = NULL;
        }
        mounts_free(TAKE_PTR(job->mounts));
        job->log_fds[0] = safe_close(job->log_fds[0]);
        job->log_fds[1] = safe_close(job->log_fds[1]);
        if (!job->ended) {
                job->ended = true;
                job->ended_unix = time(NULL);
                if (!job->status[0] || strcmp(job->status, "running") == 0)
                        job_end_status(job, NULL);
        }
        job_hand_over(s, job);
        job_save(s, job);
        log_info("Job %s of uid %u ended: %s (%d)", job->id, (unsigned) job->uid, job->status, job->exit_code);
        job_answer_all(s, job);
        if (sb) {
                r = sandbox_delete(s, sb);
                if (r < 0)
                        log_error_errno(r, "Failed to delete sandbox '%s' of job %s: %m", name, job->id);
        }
        job->refill_spares = true;
}

static void job_on_output(void *userdata, TranscriptStream stream, const void *data, size_t len) {
        Job *job = userdata;
        int fd = job->log_fds[stream == TRANSCRIPT_STDERR];
        int r;

        if (job->cmd && !job->cmd->sent && stream == TRANSCRIPT_STDERR)
                snprintf(job->start_error, sizeof(job->start_error), "%.*s", (int) MIN(len, (size_t) 299),
                         (const char *) data);
        if (fd < 0 || (stream != TRANSCRIPT_STDOUT && stream != TRANSCRIPT_STDERR))
                return;
        r = loop_write(fd, data, len);
        if (r < 0)
                log_warning_errno_ratelimited(r, "Failed to write the output of job %s, ignoring: %m", job->id);
}

/* A copy of the audit src (a command's, or a record's) into the empty dst. */
static int audit_copy(EgressAudit *dst, char *const *contacted, size_t n_contacted, char *const *refused,
                      size_t n_refused, bool truncated) {
        int r = 0;

        for (size_t i = 0; i < n_contacted && r >= 0; i++)
                r = egress_audit_add(dst, contacted[i], true);
        for (size_t i = 0; i < n_refused && r >= 0; i++)
                r = egress_audit_add(dst, refused[i], false);
        dst->truncated = dst->truncated || truncated;
        return r;
}

static void job_on_ended(Command *c, void *userdata) {
        Job *job = userdata;
        int r;

        egress_audit_done(&job->audit);
        r = audit_copy(&job->audit, c->egress.contacted, c->egress.n_contacted, c->egress.refused,
                       c->egress.n_refused, c->egress.truncated);
        if (r < 0)
                log_warning_errno(r, "Failed to keep the egress audit of job %s, ignoring: %m", job->id);

        job->start_failed = !c->sent && !job->cancelling;
        if (job->start_failed) {
                size_t n = strlen(job->start_error);
                /* "[sbx: cannot start the workspace session: why]\n": why. */
                const char *why = strstr(job->start_error, "session: ");
                if (n > 0 && job->start_error[n - 1] == '\n')
                        job->start_error[--n] = '\0';
                if (n > 0 && job->start_error[n - 1] == ']')
                        job->start_error[--n] = '\0';
                if (why)
                        memmove(job->start_error, why + 9, strlen(why + 9) + 1);
        }
        job->ended = true;
        job->ended_unix = time(NULL);
        job_end_status(job, c);
        job->cmd = NULL;
        c->observer = NULL;
        job->finishing = true;  /* the tick deletes the sandbox */
}

static const CommandObserver job_observer = {
        .output = job_on_output,
        .ended = job_on_ended,
};

void job_cancel(Server *s, Job *job) {
        if (job->ended && !job->finishing)
                return;
        if (!job->ended)
                job->cancelling = true;
        job_finish(s, job);
}

/* ---- the start -------------------------------------------------------------------- */

/* Whether path is root or below it (both without a trailing slash, but "/"). */
static bool path_within(const char *path, const char *root) {
        size_t n = strlen(root);

        if (strcmp(root, "/") == 0)
                return true;
        return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool within_roots(const char *roots, const char *path) {
        for (const char *p = roots ?: ""; *p; p += strspn(p, " ")) {
                size_t k = strcspn(p, " ");
                char root[PATH_MAX], real[PATH_MAX];

                snprintf(root, sizeof(root), "%.*s", (int) MIN(k, sizeof(root) - 1), p);
                /* A root that is itself a link names where it leads. */
                if (path_within(path, root) || (realpath(root, real) && path_within(path, real)))
                        return true;
                p += k;
        }
        return false;
}

/* A read-only (or, for out, writable) detached copy of the mount tree at fd. */
static int detached_mount(int fd, bool read_only, int *ret) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0),
        };
        _cleanup_close_ int m = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                                                       (read_only ? AT_RECURSIVE : 0));

        if (m < 0)
                return -errno;
        if (mount_setattr(m, "", AT_EMPTY_PATH | (read_only ? AT_RECURSIVE : 0), &attr, sizeof(attr)) < 0)
                return -errno;
        *ret = TAKE_FD(m);
        return 0;
}

/* The file fd is, opened here by its real path (no symlink on it), if it is
 * the same inode: sbxd under systemd (ProtectSystem=) has a mount namespace
 * of its own, and open_tree clones no mount of another namespace. */
static int reopen_here(int fd, const char *real, int *ret) {
        _cleanup_close_ int own = openat2_fd(AT_FDCWD, real, O_PATH, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        struct stat a, b;

        if (own < 0)
                return own;
        if (fstat(fd, &a) < 0 || fstat(own, &b) < 0)
                return -errno;
        if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
                return -ESTALE;
        *ret = TAKE_FD(own);
        return 0;
}

/* Input i: its descriptor is what the broker opened as the caller; its type
 * and its real path are checked here again, and it becomes mount i. */
static int job_input(Server *s, const JobSpec *spec, size_t i, SessionMounts *m, char *err, size_t size) {
        const Sbx__JobInput *in = spec->inputs[i];
        char proc[64], real[PATH_MAX];
        const char *name = in->name;
        struct stat st;
        ssize_t n;
        int r;

        if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
            strlen(name) > NAME_MAX) {
                snprintf(err, size, "mount path %.200s: its basename cannot name /in/<basename>", in->path);
                return -EINVAL;
        }
        for (size_t k = 0; k < i; k++)
                if (strcmp(spec->inputs[k]->name, name) == 0) {
                        snprintf(err, size, "mount basename \"%s\" would collide: %.200s and %.200s", name,
                                 spec->inputs[k]->path, in->path);
                        return -EINVAL;
                }
        if (fstat(spec->input_fds[i], &st) < 0)
                return -errno;
        if (in->directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
                snprintf(err, size, "%.200s is not a %s", in->path, in->directory ? "directory" : "regular file");
                return -EINVAL;
        }
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", spec->input_fds[i]);
        n = readlink(proc, real, sizeof(real) - 1);
        if (n < 0)
                return -errno;
        real[n] = '\0';
        if (real[0] != '/' || !within_roots(s->cfg.script_allowed_paths, real)) {
                snprintf(err, size, "mount path %.200s is not within script_allowed_paths", in->path);
                return -EACCES;
        }
        r = detached_mount(spec->input_fds[i], true, &m->fds[m->names.n]);
        if (r == -EINVAL) {
                _cleanup_close_ int own = -EBADF;

                r = reopen_here(spec->input_fds[i], real, &own);
                if (r >= 0)
                        r = detached_mount(own, true, &m->fds[m->names.n]);
        }
        if (r < 0) {
                snprintf(err, size, "mount path %.200s: cannot mount it: %s", in->path, strerror(-r));
                return r;
        }
        snprintf(m->names.paths[m->names.n++], SPAWN_MOUNT_PATH_MAX, "%c:in/%s", in->directory ? 'd' : 'f', name);
        return 0;
}

/* STATE/jobs/ID/out with its two logs (log_fds), out owned by the sandbox's root. */
static int job_dirs(Server *s, const char *id, uid_t sandbox_root, int log_fds[static 2], int *ret_out) {
        _cleanup_close_ int dir = -EBADF, out = -EBADF;
        static const char *const logs[2] = { "stdout.log", "stderr.log" };

        if (mkdirat(s->jobs_fd, id, 0700) < 0)
                return -errno;
        dir = openat(s->jobs_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0 || mkdirat(dir, "out", 0755) < 0)
                return -errno;
        out = openat(dir, "out", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (out < 0)
                return -errno;
        for (size_t i = 0; i < 2; i++) {
                log_fds[i] = openat(out, logs[i], O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
                                    0644);
                if (log_fds[i] < 0)
                        return -errno;
        }
        if (fchown(out, sandbox_root, sandbox_root) < 0)
                return -errno;
        *ret_out = TAKE_FD(out);
        return 0;
}

/* The job directory of id (job_dirs) and its out as the next mount of m, "d:out". */
static int job_out_mount(Server *s, const char *id, uid_t sandbox_root, int log_fds[static 2], SessionMounts *m,
                         char *err, size_t size) {
        _cleanup_close_ int out = -EBADF;
        int r;

        r = job_dirs(s, id, sandbox_root, log_fds, &out);
        if (r >= 0)
                r = detached_mount(out, false, &m->fds[m->names.n]);
        if (r < 0) {
                snprintf(err, size, "cannot make the output directory: %s", strerror(-r));
                return r;
        }
        strlcpy(m->names.paths[m->names.n++], "d:out", SPAWN_MOUNT_PATH_MAX);
        return 0;
}

static void sandbox_made_now(Server *s, Sandbox *sb, int err, const char *why, void *userdata) {
        *(Sandbox **) userdata = sb;
}

/* A random (version 4) UUID. */
static int job_new_id(char id[static JOB_ID_SIZE]) {
        char hex[33];
        int r = random_hex(hex, 32);

        if (r < 0)
                return r;
        snprintf(id, JOB_ID_SIZE, "%.8s-%.4s-4%.3s-%c%.3s-%.12s", hex, hex + 8, hex + 13, "89ab"[hex[16] % 4],
                 hex + 17, hex + 20);
        return 0;
}

/* ---- spares ---------------------------------------------------------------------- */

/* A job's sandbox and session made ahead, for the next job of its image and
 * policy: the sandbox job-HEX of the id that job will take, root's until
 * then, its job directory with /out and the two logs, and its session, set
 * up whole with /out mounted (its worker waits for a command). The job that
 * takes it brings its host inputs (session_job_attach) and its command. Used
 * once: the job's end deletes it as any job's sandbox. */
struct JobSpare {
        TAILQ_ENTRY(JobSpare) link;
        char id[JOB_ID_SIZE];
        char image[SBX_NAME_MAX + 1];
        EgressPolicy egress;
        char session_id[33];
        SessionMounts *mounts;          /* "d:out", which its session borrows */
        int log_fds[2];                 /* stdout.log, stderr.log */
        unsigned long long until_usec;  /* dropped then if nobody took it */
};

static void job_spare_free(JobSpare *sp) {
        mounts_free(sp->mounts);
        safe_close(sp->log_fds[0]);
        safe_close(sp->log_fds[1]);
        free(sp);
}

/* Its sandbox goes (with its session), then its job directory, and it is freed. */
static void job_spare_drop(Server *s, JobSpare *sp) {
        char name[SBX_NAME_MAX + 1];
        Sandbox *sb;
        int r;

        job_sandbox_name(sp->id, name);
        sb = sandbox_find(s, name);
        if (sb && sandbox_delete(s, sb) < 0)
                log_warning("Failed to delete sandbox '%s' of a spare job sandbox, ignoring", name);
        r = tree_remove_at(s->jobs_fd, sp->id);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Failed to remove the job directory of spare '%s', ignoring: %m", name);
        TAILQ_REMOVE(&s->job_spares, sp, link);
        job_spare_free(sp);
}

/* Its sandbox and session, if both are still there and the session is
 * being set up or waits for a command. */
static bool job_spare_usable(Server *s, const JobSpare *sp, Sandbox **ret_sb, WorkspaceSession **ret_ws) {
        char name[SBX_NAME_MAX + 1];
        WorkspaceSession *ws;
        Sandbox *sb;

        job_sandbox_name(sp->id, name);
        sb = sandbox_find(s, name);
        ws = sb ? session_find(s, sb, sp->session_id) : NULL;
        if (!ws || (ws->state != SESSION_SETUP && ws->state != SESSION_SPAWNING && ws->state != SESSION_READY) ||
            ws->running > 0 || !TAILQ_EMPTY(&ws->commands))
                return false;
        *ret_sb = sb;
        *ret_ws = ws;
        return true;
}

/* The spare's sandbox, job directory and session (sp's id, image, egress). */
static int job_spare_build(Server *s, JobSpare *sp, char *err, size_t size) {
        char name[SBX_NAME_MAX + 1];
        WorkspaceSession *ws;
        Sandbox *sb = NULL;
        int r;

        job_sandbox_name(sp->id, name);
        r = sandbox_create_for_claim(s, &(SandboxSpec) { .name = name, .image = sp->image, .owner_uid = 0,
                                                         .egress = egress_policy_to_string(sp->egress) },
                                     sandbox_made_now, &sb, err, size);
        if (r < 0 || !sb)
                return r < 0 ? r : -EIO;
        r = job_out_mount(s, sp->id, sb->uid_base, sp->log_fds, sp->mounts, err, size);
        if (r >= 0)
                r = session_new_job(s, sb, sp->mounts, &ws, err, size);
        if (r < 0) {
                (void) sandbox_delete(s, sb);
                (void) tree_remove_at(s->jobs_fd, sp->id);
                return r;
        }
        strlcpy(sp->session_id, ws->id, sizeof(sp->session_id));
        return 0;
}

static int job_spare_make(Server *s, const char *image, EgressPolicy egress, char *err, size_t size) {
        JobSpare *sp = calloc(1, sizeof(*sp));
        int r;

        if (!sp)
                return -ENOMEM;
        sp->log_fds[0] = sp->log_fds[1] = -EBADF;
        sp->mounts = calloc(1, sizeof(SessionMounts));
        strlcpy(sp->image, image, sizeof(sp->image));
        sp->egress = egress;
        r = sp->mounts ? job_new_id(sp->id) : -ENOMEM;
        if (r >= 0)
                r = job_spare_build(s, sp, err, size);
        if (r < 0) {
                job_spare_free(sp);
                return r;
        }
        sp->until_usec = now_usec() + s->cfg.spare_idle_seconds * 1000000ull;
        log_debug("Made spare job sandbox job-%s (image %s, egress %s)", sp->id, image, egress_policy_to_string(egress));
        TAILQ_INSERT_TAIL(&s->job_spares, sp, link);
        return 0;
}

/* Spares of image and egress up to script_spares, while there is room:
 * they never take the last live session nor pass SBX_SCRIPT_SPARES_TOTAL_MAX. */
static void job_spares_refill(Server *s, const char *image, EgressPolicy egress) {
        unsigned mine = 0, all = 0;
        char err[300] = "";
        const JobSpare *sp;

        TAILQ_FOREACH(sp, &s->job_spares, link) {
                all++;
                mine += sp->egress == egress && strcmp(sp->image, image) == 0;
        }
        for (; mine < s->cfg.script_spares && all < SBX_SCRIPT_SPARES_TOTAL_MAX &&
               sessions_live(s) + 1 < SBX_MAX_LIVE_SESSIONS; mine++, all++) {
                int r = job_spare_make(s, image, egress, err, sizeof(err));
                if (r < 0) {
                        log_warning("Cannot make a spare job sandbox (image %s, egress %s), ignoring: %s", image,
                                    egress_policy_to_string(egress), err[0] ? err : strerror(-r));
                        return;
                }
        }
}

/* A spare for job (its image and policy), now the job's: the job takes its
 * id, job directory and logs, its sandbox becomes the job owner's, and the
 * job's host inputs are mounted into its session, which must run for that
 * (one still being set up is left for a job without inputs). 0 if there is none. */
static int job_spare_take(Server *s, Job *job, Sandbox **ret_sb, WorkspaceSession **ret_ws, char *err, size_t size) {
        bool inputs = job->mounts->names.n > 0;
        WorkspaceSession *ws;
        JobSpare *sp, *next;
        Sandbox *sb;
        int r;

        TAILQ_FOREACH_SAFE(sp, &s->job_spares, link, next) {
                if (sp->egress != job->egress || strcmp(sp->image, job->image) != 0)
                        continue;
                if (!job_spare_usable(s, sp, &sb, &ws)) {
                        job_spare_drop(s, sp);
                        continue;
                }
                if (inputs && ws->state != SESSION_READY)
                        continue;
                /* What making a sandbox and a session for the owner would have checked. */
                r = owner_quota_check(s, "owner_sandboxes_max", job->uid, 1, err, size);
                if (r >= 0)
                        r = owner_quota_check(s, "owner_sessions_max", job->uid, 1, err, size);
                if (r < 0)
                        return r;
                r = session_job_attach(ws, job->mounts);
                if (r < 0) {
                        snprintf(err, size, "cannot mount the inputs in the sandbox: %s", strerror(-r));
                        job_spare_drop(s, sp);
                        return r;
                }
                free(job->output_dir);
                if (asprintf(&job->output_dir, "%s/jobs/%s/out", s->cfg.state_dir, sp->id) < 0) {
                        job->output_dir = NULL;
                        job_spare_drop(s, sp);
                        return -ENOMEM;
                }
                strlcpy(job->id, sp->id, sizeof(job->id));
                sb->owner_uid = job->uid;
                /* The inputs are mounted: their detached copies go, and the session's /out stays the job's. */
                mounts_free(job->mounts);
                job->mounts = TAKE_PTR(sp->mounts);
                job->log_fds[0] = TAKE_FD(sp->log_fds[0]);
                job->log_fds[1] = TAKE_FD(sp->log_fds[1]);
                TAILQ_REMOVE(&s->job_spares, sp, link);
                job_spare_free(sp);
                *ret_sb = sb;
                *ret_ws = ws;
                return 1;
        }
        return 0;
}

/* The job's sandbox (an empty workspace on its image), /out and its session
 * (a spare's if there is one, which runs already); its command waits there
 * until the session runs. */
static int job_launch(Server *s, Job *job, const JobSpec *spec, char *err, size_t size) {
        char name[SBX_NAME_MAX + 1];
        WorkspaceSession *ws = NULL;
        Sandbox *sb = NULL;
        int r;

        r = job_spare_take(s, job, &sb, &ws, err, size);
        if (r < 0)
                return r;
        job->has_sandbox = r > 0;
        if (r == 0) {
                job_sandbox_name(job->id, name);
                r = sandbox_create_for_claim(s, &(SandboxSpec) { .name = name, .image = job->image,
                                                                 .owner_uid = job->uid,
                                                                 .egress = egress_policy_to_string(job->egress) },
                                             sandbox_made_now, &sb, err, size);
                if (r < 0 || !sb)
                        return r < 0 ? r : -EIO;
                job->has_sandbox = true;
                r = job_out_mount(s, job->id, sb->uid_base, job->log_fds, job->mounts, err, size);
                if (r < 0)
                        return r;
                spare_make_room(s, sb);
                r = session_new_job(s, sb, job->mounts, &ws, err, size);
                if (r < 0)
                        return r;
        }
        r = command_start(s, ws, job->command, SBX_SCRIPT_RUNTIME_MAX_S * 1000ull, true, &job->cmd);
        if (r < 0) {
                snprintf(err, size, "cannot start the command: %s", strerror(-r));
                return r;
        }
        job->cmd->observer = &job_observer;
        job->cmd->observer_data = job;
        return 0;
}

static Job *job_alloc(const Client *c, const JobSpec *spec, const char *state_dir) {
        Job *job = calloc(1, sizeof(*job));

        if (!job)
                return NULL;
        job->log_fds[0] = job->log_fds[1] = -EBADF;
        TAILQ_INIT(&job->waiters);
        job->uid = c->uid;
        job->gid = c->gid;
        job->started_unix = time(NULL);
        strlcpy(job->image, spec->image, sizeof(job->image));
        strlcpy(job->status, "running", sizeof(job->status));
        job->command = strdup(spec->command);
        job->mounts = calloc(1, sizeof(SessionMounts));
        /* Checked by job_start (script_check_args): it parses. */
        if (egress_policy_from_string(spec->egress, &job->egress) < 0 || job_new_id(job->id) < 0 || !job->command ||
            !job->mounts) {
                free(job->command);
                free(job->mounts);
                free(job);
                return NULL;
        }
        if (asprintf(&job->output_dir, "%s/jobs/%s/out", state_dir, job->id) < 0) {
                free(job->command);
                free(job->mounts);
                free(job);
                return NULL;
        }
        return job;
}

static void job_free(Job *job) {
        while (!TAILQ_EMPTY(&job->waiters))
                waiter_free(TAILQ_FIRST(&job->waiters));
        pending_stop(&job->answer);
        pending_stop(&job->notify);
        mounts_free(job->mounts);
        egress_audit_done(&job->audit);
        safe_close(job->log_fds[0]);
        safe_close(job->log_fds[1]);
        free(job->command);
        free(job->output_dir);
        free(job);
}

/* A synchronous caller that cancelled (notifications/cancelled) ends the
 * job; one that went leaves it running (its owner finds it by job_id). */
static void answer_abandon(Server *s, Pending *p, bool cancelled) {
        Job *job = container_of(p, Job, answer);

        if (cancelled)
                job_cancel(s, job);
}

static void notify_abandon(Server *s, Pending *p, bool cancelled) {
        /* The starter went: the job goes on, unannounced. */
}

/* The oldest ended jobs of uid go while it keeps more than SBX_OWNER_JOBS_KEPT_MAX. */
static void jobs_trim(Server *s, uid_t uid) {
        unsigned n = 0;
        Job *job, *next;

        TAILQ_FOREACH(job, &s->jobs, link)
                n += job->uid == uid && job->ended;
        for (job = TAILQ_FIRST(&s->jobs); job && n >= SBX_OWNER_JOBS_KEPT_MAX; job = next) {
                next = TAILQ_NEXT(job, link);
                if (job->uid == uid && job->ended && !job->finishing) {
                        (void) job_remove(s, job);
                        n--;
                }
        }
}

int job_start(Server *s, Client *c, uint32_t seq, const JobSpec *spec, Job **ret, char *err, size_t size) {
        char name[SBX_NAME_MAX + 1];
        Job *job;
        int r;

        r = script_check_args(spec->image, spec->egress, err, size);
        if (r < 0)
                return r;
        if (jobs_running(s, true, 0) >= s->cfg.jobs_max) {
                snprintf(err, size, "too many running jobs: %u (jobs_max in sbxd.conf); wait for some to end",
                         s->cfg.jobs_max);
                return -EAGAIN;
        }
        r = owner_quota_check(s, "owner_jobs_max", c->uid, 1, err, size);
        if (r < 0)
                return r;
        jobs_trim(s, c->uid);
        job = job_alloc(c, spec, s->cfg.state_dir);
        if (!job)
                return -ENOMEM;
        for (size_t i = 0; i < spec->n_inputs && r >= 0; i++)
                r = job_input(s, spec, i, job->mounts, err, size);
        if (r < 0) {
                job_free(job);
                return r;
        }
        TAILQ_INSERT_TAIL(&s->jobs, job, link);
        r = job_launch(s, job, spec, err, size);
        if (r < 0) {
                /* Nothing ran: nothing of it stays. */
                char why[300];
                snprintf(why, sizeof(why), "%s", err);
                snprintf(err, size, "create sandbox: %s", why[0] ? why : strerror(-r));
                (void) job_remove(s, job);
                return r;
        }
        job_save(s, job);
        job_sandbox_name(job->id, name);
        log_info("Job %s of uid %u started in sandbox '%s' (image %s, egress %s%s)", job->id, (unsigned) c->uid,
                 name, job->image, egress_policy_to_string(job->egress), spec->background ? ", background" : "");
        *ret = job;
        if (spec->background) {
                pending_start(&job->notify, c, seq, notify_abandon);
                return 0;
        }
        pending_start(&job->answer, c, seq, answer_abandon);
        return JOB_DEFERRED;
}

int job_remove(Server *s, Job *job) {
        int r;

        if (!job->ended || job->finishing) {
                job->cancelling = !job->ended;
                job_finish(s, job);
        }
        r = tree_remove_at(s->jobs_fd, job->id);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Failed to remove the output of job %s, ignoring: %m", job->id);
        r = store_job_delete(s->store, job->id);
        if (r < 0)
                log_warning_errno(r, "Failed to remove the record of job %s, ignoring: %m", job->id);
        TAILQ_REMOVE(&s->jobs, job, link);
        job_free(job);
        return 0;
}

/* ---- load, tick ------------------------------------------------------------------- */

static int load_one(const char *id, int64_t uid, const void *info, size_t len, void *userdata) {
        Server *s = userdata;
        Sbx__JobInfo *o = sbx__job_info__unpack(NULL, len, info);
        EgressPolicy egress = EGRESS_NONE;
        Job *job;

        if (!o || strlen(o->job_id) >= JOB_ID_SIZE || strcmp(o->job_id, id) != 0 ||
            egress_policy_from_string(o->egress, &egress) < 0) {
                log_warning("Job record %s does not unpack, ignoring it", id);
                if (o)
                        sbx__job_info__free_unpacked(o, NULL);
                return 0;
        }
        job = calloc(1, sizeof(*job));
        if (job) {
                job->log_fds[0] = job->log_fds[1] = -EBADF;
                TAILQ_INIT(&job->waiters);
                strlcpy(job->id, o->job_id, sizeof(job->id));
                job->uid = (uid_t) uid;
                job->gid = o->gid;
                strlcpy(job->image, o->image, sizeof(job->image));
                job->egress = egress;
                strlcpy(job->status, o->status, sizeof(job->status));
                job->ended = o->ended;
                job->has_exit_code = o->has_exit_code;
                job->exit_code = o->exit_code;
                job->signal = o->signal;
                job->started_unix = o->started_unix;
                job->ended_unix = o->ended_unix;
                job->command = strdup(o->command);
                job->output_dir = strdup(o->output_dir);
                if (o->audit && audit_copy(&job->audit, o->audit->contacted, o->audit->n_contacted,
                                           o->audit->refused, o->audit->n_refused, o->audit->truncated) < 0)
                        log_warning("Job record %s: its egress audit does not fit, keeping part of it", id);
        }
        sbx__job_info__free_unpacked(o, NULL);
        if (!job || !job->command || !job->output_dir) {
                if (job)
                        job_free(job);
                return -ENOMEM;
        }
        TAILQ_INSERT_TAIL(&s->jobs, job, link);
        return 0;
}

/* A job that ran when the last sbxd stopped: its sandbox goes, it is lost. */
static void job_lost(Server *s, Job *job) {
        char name[SBX_NAME_MAX + 1];
        Sandbox *sb;

        job_sandbox_name(job->id, name);
        sb = sandbox_find(s, name);
        if (sb && sandbox_delete(s, sb) < 0)
                log_warning("Failed to delete sandbox '%s' of lost job %s, ignoring", name, job->id);
        job->ended = true;
        job->ended_unix = time(NULL);
        job->has_exit_code = false;
        strlcpy(job->status, "supervisor_lost", sizeof(job->status));
        job_hand_over(s, job);
        job_save(s, job);
        log_notice("Job %s of uid %u was lost with the previous sbxd", job->id, (unsigned) job->uid);
}

/* A spare of the last sbxd: job-HEX, root's (a job that took one was lost above). */
static bool job_spare_left(const Sandbox *sb) {
        const char *hex = sb->name + strlen(JOB_SANDBOX_PREFIX);

        return sb->owner_uid == 0 && strncmp(sb->name, JOB_SANDBOX_PREFIX, strlen(JOB_SANDBOX_PREFIX)) == 0 &&
               strlen(hex) == 32 && strspn(hex, "0123456789abcdef") == 32;
}

/* A spare of the last sbxd goes: its sandbox, and its job directory if no job has its id. */
static void job_spare_left_delete(Server *s, Sandbox *sb) {
        const char *h = sb->name + strlen(JOB_SANDBOX_PREFIX);
        char id[JOB_ID_SIZE];
        const Job *job;
        int r;

        snprintf(id, sizeof(id), "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
        if (sandbox_delete(s, sb) < 0)
                log_warning("Failed to delete spare job sandbox '%s' of the previous sbxd, ignoring", sb->name);
        TAILQ_FOREACH(job, &s->jobs, link)
                if (strcmp(job->id, id) == 0)
                        return;
        r = tree_remove_at(s->jobs_fd, id);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Failed to remove the job directory %s of a spare of the previous sbxd, ignoring: %m",
                                  id);
}

int jobs_load(Server *s) {
        Sandbox *sb, *next;
        Job *job;
        int r;

        r = store_job_foreach(s->store, load_one, s);
        if (r < 0)
                return r;
        TAILQ_FOREACH(job, &s->jobs, link)
                if (!job->ended)
                        job_lost(s, job);
        TAILQ_FOREACH_SAFE(sb, &s->sandboxes, link, next)
                if (job_spare_left(sb))
                        job_spare_left_delete(s, sb);
        return 0;
}

void jobs_free(Server *s) {
        Job *job;

        JobSpare *sp;

        /* Their sandboxes and job directories stay: the next sbxd deletes them (jobs_load). */
        while ((sp = TAILQ_FIRST(&s->job_spares))) {
                TAILQ_REMOVE(&s->job_spares, sp, link);
                job_spare_free(sp);
        }
        while ((job = TAILQ_FIRST(&s->jobs))) {
                TAILQ_REMOVE(&s->jobs, job, link);
                if (job->cmd)
                        job->cmd->observer = NULL;
                job_free(job);
        }
}

unsigned long long jobs_next_deadline(Server *s) {
        unsigned long long next = s->jobs_sweep_usec ?: 1;
        const JobSpare *sp;
        const JobWaiter *w;
        const Job *job;

        TAILQ_FOREACH(sp, &s->job_spares, link)
                next = MIN(next, sp->until_usec);
        TAILQ_FOREACH(job, &s->jobs, link) {
                if (job->finishing || job->refill_spares)
                        return 1;
                TAILQ_FOREACH(w, &job->waiters, link)
                        next = MIN(next, w->deadline_usec);
        }
        return next;
}

void jobs_run_deadlines(Server *s) {
        unsigned long long now = now_usec();
        int64_t expired = (int64_t) time(NULL) - s->cfg.script_output_ttl;
        Job *job, *next;
        JobWaiter *w, *wn;
        JobSpare *sp, *sp_next;

        TAILQ_FOREACH_SAFE(sp, &s->job_spares, link, sp_next)
                if (sp->until_usec <= now)
                        job_spare_drop(s, sp);
        TAILQ_FOREACH(job, &s->jobs, link) {
                if (job->finishing)
                        job_finish(s, job);
                for (w = TAILQ_FIRST(&job->waiters); w; w = wn) {
                        wn = TAILQ_NEXT(w, link);
                        if (w->deadline_usec <= now) {
                                job_answer(s, job, &w->pending);
                                waiter_free(w);
                        }
                }
        }
        /* After the answers: what was used is made again, off their way. */
        TAILQ_FOREACH(job, &s->jobs, link)
                if (job->refill_spares) {
                        job->refill_spares = false;
                        job_spares_refill(s, job->image, job->egress);
                }
        if (now < s->jobs_sweep_usec)
                return;
        s->jobs_sweep_usec = now + SBX_JOB_SWEEP_S * 1000000ull;
        for (job = TAILQ_FIRST(&s->jobs); job; job = next) {
                next = TAILQ_NEXT(job, link);
                if (job->ended && !job->finishing && job->ended_unix <= expired) {
                        log_info("Job %s: its output is older than script_output_ttl, removing it", job->id);
                        (void) job_remove(s, job);
                }
        }
}
