/* runtime_execute's runs and the artifact store (see artifacts.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/artifacts.h"
#include "core/sandbox.h"
#include "core/server.h"
#include "core/session.h"
#include "core/transcripts.h"
#include "data/transcript.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "msg.h"
#include "sbx-limits.h"

unsigned runtime_runs_running(Server *s, uid_t owner) {
        const Command *c;
        unsigned n = 0;

        TAILQ_FOREACH(c, &s->commands, link)
                n += c->run && !c->finished && c->run->owner == owner;
        return n;
}

void runtime_run_free(RuntimeRun *j) {
        if (!j)
                return;
        for (size_t i = 0; i < j->n_reports; i++) {
                free(j->reports[i].path);
                free(j->reports[i].data);
        }
        free(j->stdin_data);
        free(j);
}

/* At most max bytes of report rp into its data (the rest cut); -errno. */
static int report_read(RunReport *rp, int root_fd, const char *cwd, size_t max) {
        _cleanup_free_ char *full = NULL, *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        size_t len = 0;

        if (asprintf(&full, "%s/%s", rp->path[0] == '/' ? "" : cwd, rp->path) < 0)
                return -ENOMEM;
        /* O_NONBLOCK: a FIFO does not hold the loop (and is refused below). */
        fd = openat2_fd(root_fd, full, O_RDONLY | O_NOCTTY | O_NONBLOCK, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        max = (size_t) MIN((uint64_t) max, (uint64_t) st.st_size);
        buf = malloc(MAX(max, (size_t) 1));
        if (!buf)
                return -ENOMEM;
        while (len < max) {
                ssize_t n = read(fd, buf + len, max - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        rp->size = (uint64_t) st.st_size;
        rp->truncated = (uint64_t) len < rp->size;
        rp->len = len;
        rp->data = TAKE_PTR(buf);
        return 0;
}

void runtime_run_read_reports(RuntimeRun *j, int root_fd, const char *cwd) {
        size_t left = SBX_DIGEST_JUNIT_FILES_BYTES;

        if (j->reports_read)
                return;
        j->reports_read = true;
        for (size_t i = 0; i < j->n_reports; i++) {
                RunReport *rp = &j->reports[i];
                int r = root_fd < 0 ? -ESTALE : report_read(rp, root_fd, cwd, MIN(left, (size_t) SBX_DIGEST_JUNIT_MAX));

                rp->found = r >= 0;
                if (r >= 0)
                        left -= rp->len;
                else
                        snprintf(rp->error, sizeof(rp->error), "%s",
                                 r == -ENOENT ? "no such file" : r == -EISDIR ? "a directory, not a file"
                                 : r == -EINVAL ? "not a regular file" : r == -ESTALE ? "the session's files are gone"
                                 : r == -EXDEV ? "a symlink leaves the sandbox" : strerror(-r));
        }
}

static int artifact_remove(Server *s, const StoreArtifact *a, const char *reason) {
        int r = store_artifact_delete(s->store, a->handle);

        if (r < 0)
                return r;
        r = transcripts_evict(s, a->command, reason);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Failed to remove the transcript of artifact %s, ignoring: %m", a->handle);
        log_info("Removed artifact %s of %s (%" PRIu64 " bytes): %s", a->handle, a->command, a->bytes, reason);
        return 0;
}

void artifacts_sweep(Server *s) {
        char reason[96];
        StoreArtifact a;
        unsigned n;
        uint64_t bytes;

        while (store_artifact_oldest(s->store, now_unix_usec(), &a) >= 0)
                if (artifact_remove(s, &a, "runtime_artifact_ttl_hours") < 0)
                        return;
        snprintf(reason, sizeof(reason), "runtime_artifacts_max_bytes = %" PRIu64, s->cfg.runtime_artifacts_max_bytes);
        while (store_artifacts_usage(s->store, -1, &n, &bytes, NULL) >= 0 && bytes > s->cfg.runtime_artifacts_max_bytes &&
               store_artifact_oldest(s->store, INT64_MAX, &a) >= 0)
                if (artifact_remove(s, &a, reason) < 0)
                        return;
}

/* Compressing an artifact's transcript (data/zframes.h), in its sandbox's
 * lane: after the reads queued before it, before those queued after. */
typedef struct Packing {
        Work work;
        int dirfd;
        char handle[48];
        char command[33];
        uint64_t text, packed;          /* bytes: the text, its compressed file */
        uint64_t bytes;                 /* what the transcript stores now (transcript_usage) */
        unsigned files;
        Transcript *t;                  /* reopened, for the command while it is in memory */
} Packing;

static Packing *packing_free(Packing *p) {
        if (!p)
                return NULL;
        (void) safe_close(p->dirfd);
        transcript_free(p->t);
        free(p);
        return NULL;
}

static int packing_run(Work *w) {
        Packing *p = container_of(w, Packing, work);
        int r = transcript_compress(p->dirfd, p->command, &p->text, &p->packed);

        if (r >= 0)
                r = transcript_usage(p->dirfd, p->command, &p->bytes, &p->files);
        if (r >= 0)
                r = transcript_open(p->dirfd, p->command, &p->t);
        return r;
}

/* Count what the transcript stores now: the artifact's, and (core/transcripts.h)
 * its command's. */
static void packing_record(Server *s, Packing *p) {
        int r = transcripts_compressed(s, p->command, p->bytes, p->files, &p->t);

        if (r == -ESTALE)
                return;
        if (r >= 0)
                r = store_artifact_set_packed(s->store, p->handle, p->bytes);
        if (r < 0)
                log_warning_errno(r, "Failed to record the compressed size of artifact %s, ignoring: %m", p->handle);
        log_info("Compressed artifact %s: %" PRIu64 " bytes of text in %" PRIu64 " (%" PRIu64 " stored)", p->handle,
                 p->text, p->packed, p->bytes);
}

static void packing_done(Work *w, int r, void *userdata) {
        Packing *p = container_of(w, Packing, work);

        if (work_cancelled(w))
                ;       /* its sandbox went, with its transcripts */
        else if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Failed to compress artifact %s, keeping it uncompressed: %m", p->handle);
        else if (r >= 0)
                packing_record(userdata, p);
        if (!work_cancelled(w))
                artifacts_sweep(userdata);
        packing_free(p);
}

/* Compress the transcript of artifact handle (of command) off the loop. */
static int artifact_pack(Server *s, const char *handle, const char *command, const char *sandbox) {
        Sandbox *sb = sandbox_find_id(s, sandbox);
        Packing *p;

        if (!sb)
                return -ENOENT;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (Packing) { .work = { .run = packing_run, .done = packing_done } };
        p->dirfd = fcntl(s->transcripts_fd, F_DUPFD_CLOEXEC, 3);
        if (p->dirfd < 0) {
                free(p);
                return -errno;
        }
        strlcpy(p->handle, handle, sizeof(p->handle));
        strlcpy(p->command, command, sizeof(p->command));
        work_submit(s->work, &sb->lane, &p->work);
        return 0;
}

static int pack_unpacked(const StoreArtifact *a, void *userdata) {
        Server *s = userdata;
        int r = artifact_pack(s, a->handle, a->command, a->sandbox);

        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Failed to queue the compression of artifact %s, ignoring: %m", a->handle);
        return 0;
}

void artifacts_load(Server *s) {
        int r = store_artifact_unpacked_foreach(s->store, pack_unpacked, s);

        if (r < 0)
                log_warning_errno(r, "Cannot list the artifacts to compress, ignoring: %m");
}

static int artifact_add(Server *s, const Command *c, char *ret_handle, size_t size) {
        StoreArtifact a = {
                .owner_uid = c->run->owner,
                .created_usec = now_unix_usec(),
                .bytes = transcript_stored_bytes(c->transcript),
        };
        char hex[33];
        int r;

        r = random_hex(hex, 32);
        if (r < 0)
                return r;
        snprintf(a.handle, sizeof(a.handle), "art-%s", hex);
        a.expires_usec = a.created_usec + (int64_t) MIN(s->cfg.runtime_artifact_ttl_ms, (uint64_t) SBX_RUNTIME_TTL_MAX_MS) * 1000;
        strlcpy(a.sandbox, c->rec.sandbox, sizeof(a.sandbox));
        strlcpy(a.command, c->rec.id, sizeof(a.command));
        r = store_artifact_insert(s->store, &a);
        if (r < 0)
                return r;
        strlcpy(ret_handle, a.handle, size);
        /* Over the budget, the oldest go first, this one last: once it is
         * compressed, as the budget counts compressed bytes. */
        r = artifact_pack(s, a.handle, a.command, a.sandbox);
        if (r < 0) {
                log_warning_errno(r, "Failed to queue the compression of artifact %s, keeping it uncompressed: %m",
                                  a.handle);
                artifacts_sweep(s);
        }
        return 0;
}

/* "sbx-runtime: ..." first on stderr and status 127: the toolchain is not in the image. */
static bool toolchain_missing(const Sbx__ClaimExecReply *o, size_t *ret_len) {
        size_t mark = strlen(RUNTIME_MISSING_MARK);
        const char *nl;

        if (!o->has_exit_code || o->exit_code != 127 || o->stderr.len < mark ||
            memcmp(o->stderr.data, RUNTIME_MISSING_MARK, mark) != 0)
                return false;
        nl = memchr(o->stderr.data, '\n', o->stderr.len);
        *ret_len = nl ? (size_t) (nl - (const char *) o->stderr.data) : o->stderr.len;
        return true;
}

void runtime_run_answer(Server *s, Pending *p, Command *c, Sbx__ClaimExecReply *o) {
        Sbx__RuntimeExecuteReply x = SBX__RUNTIME_EXECUTE_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;
        Sbx__RuntimeReport rep[SBX_DIGEST_JUNIT_FILES], *reps[SBX_DIGEST_JUNIT_FILES];
        RuntimeRun *j = c->run;
        char handle[48] = "";
        size_t len;
        int r;

        if (toolchain_missing(o, &len)) {
                pending_answer_error(s, p, -ENOENT, "%.*s", (int) MIN(len, (size_t) 600),
                                     (const char *) o->stderr.data + strlen(RUNTIME_MISSING_MARK));
                return;
        }
        runtime_run_read_reports(j, -EBADF, NULL);     /* read at its end (core/session.c), else: gone */
        for (size_t i = 0; i < j->n_reports; i++) {
                const RunReport *rp = &j->reports[i];

                sbx__runtime_report__init(&rep[i]);
                rep[i].path = rp->path;
                rep[i].found = rp->found;
                rep[i].content.data = (uint8_t *) rp->data;
                rep[i].content.len = rp->len;
                rep[i].truncated = rp->truncated;
                rep[i].size = rp->size;
                rep[i].error = (char *) rp->error;
                reps[i] = &rep[i];
        }
        x.n_reports = j->n_reports;
        x.reports = reps;
        if (j->persist && c->finished && c->transcript) {
                r = artifact_add(s, c, handle, sizeof(handle));
                if (r < 0)
                        log_warning_errno(r, "Failed to record the artifact of %s, answering without: %m", c->rec.id);
        }
        x.run = o;
        x.artifact = handle;
        x.duration_ms = c->finished && c->end_usec > c->start_usec ? (c->end_usec - c->start_usec) / 1000 : 0;
        x.workspace_session = c->rec.workspace_session;
        x.executable = j->executable;
        x.stdout_bytes = j->bytes[0];
        x.stderr_bytes = j->bytes[1];
        x.cancelled = c->cancelled;
        msg_reply_set(&reply, SBX__REPLY__BODY_RUNTIME_EXECUTE, &x);
        pending_answer(s, p, &reply);
}

int artifacts_lookup(Server *s, const char *handle, uid_t uid, char *ret_command, size_t size, bool *ret_expired) {
        StoreArtifact a;
        int r;

        *ret_expired = false;
        r = store_artifact_get(s->store, handle, &a);
        if (r < 0)
                return r;
        if (uid != 0 && a.owner_uid != uid)
                return -ENOENT;
        if (a.expires_usec <= now_unix_usec()) {
                *ret_expired = true;
                artifacts_sweep(s);
                return -ENOENT;
        }
        strlcpy(ret_command, a.command, size);
        return 0;
}
