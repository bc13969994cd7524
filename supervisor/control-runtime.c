/* Requests of the artifacts set (issue 19): runtime_execute and
 * runtime_query_output. The policy a hostile broker must not get around
 * (runtimes, executables, durations, concurrency, sizes) is checked here. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "core/artifacts.h"
#include "core/owner.h"
#include "core/session.h"
#include "core/transcripts.h"
#include "data/outquery.h"
#include "fd-util.h"
#include "sbx-limits.h"
#include "utf8.h"

/* The run of req: its policy checks, environment and stdin. */
/* The reports call names, copied into j. */
static int run_reports(RuntimeRun *j, const RuntimeCall *call) {
        RuntimeReportPath p[SBX_DIGEST_JUNIT_FILES];
        size_t n = runtime_report_paths(call, p, ELEMENTSOF(p));

        for (; j->n_reports < n; j->n_reports++) {
                j->reports[j->n_reports].path = strndup(p[j->n_reports].path, p[j->n_reports].len);
                if (!j->reports[j->n_reports].path)
                        return -ENOMEM;
        }
        return 0;
}

static int run_new(Request *rq, const Sbx__RuntimeExecute *req, const RuntimeCall *call, const char *exe,
                   RuntimeRun **ret) {
        const Config *cfg = &rq->server->cfg;
        _cleanup_free_ RuntimeRun *j = NULL;
        _cleanup_free_ char *in = NULL;
        int r;

        if (req->timeout_ms > cfg->runtime_max_duration_ms)
                return request_error(rq, -EINVAL, "invalid arguments: timeoutMs: %llu is over runtime_max_duration_ms "
                                     "(%llu, sbxd.conf(5)); ask for at most that",
                                     (unsigned long long) req->timeout_ms,
                                     (unsigned long long) cfg->runtime_max_duration_ms);
        if (runtime_runs_running(rq->server, rq->sandbox->owner_uid) >= cfg->runtime_max_concurrent_jobs)
                return request_error(rq, -EBUSY, "runtime_max_concurrent_jobs (%u, sbxd.conf(5)) runtime_execute jobs "
                                     "of this owner run already; wait for one to end, or cancel_command it",
                                     cfg->runtime_max_concurrent_jobs);
        if (req->has_stdin) {
                if (req->stdin_size > SBX_RUNTIME_STDIN_MAX)
                        return request_error(rq, -E2BIG, "invalid arguments: stdin: %llu bytes is over %u (512 KiB); "
                                             "write larger input to a file of the workspace (file_write) instead",
                                             (unsigned long long) req->stdin_size, SBX_RUNTIME_STDIN_MAX);
                r = request_payload(rq->fd, req->stdin_size, SBX_RUNTIME_STDIN_MAX, &in);
                if (r < 0)
                        return request_error(rq, r, "stdin: malformed payload");
                if (utf8_valid_prefix(in, req->stdin_size) != req->stdin_size)
                        return request_error(rq, -EILSEQ, "invalid arguments: stdin: not valid UTF-8; send text, or "
                                             "write bytes to a file of the workspace");
        }
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->owner = rq->sandbox->owner_uid;
        j->persist = req->persist;
        strlcpy(j->executable, exe, sizeof(j->executable));
        j->n_env = runtime_env(cfg, j->env, ELEMENTSOF(j->env));
        j->has_stdin = req->has_stdin;
        j->stdin_len = req->stdin_size;
        j->stdin_data = (uint8_t *) TAKE_PTR(in);
        r = run_reports(j, call);
        if (r < 0) {
                runtime_run_free(TAKE_PTR(j));
                return r;
        }
        *ret = TAKE_PTR(j);
        return 0;
}

int handle_runtime_execute(Request *rq) {
        const Sbx__RuntimeExecute *req = rq->msg->runtime_execute;
        Server *s = rq->server;
        const Config *cfg = &s->cfg;
        RuntimeCall call = { req->runtime, req->executable, req->args, req->n_args, req->code, req->has_stdin };
        uint64_t timeout_ms = req->timeout_ms ?: cfg->runtime_max_duration_ms;
        _cleanup_free_ char *cmd = NULL;
        WorkspaceSession *ws;
        RuntimeRun *run = NULL;
        const char *exe;
        Command *c;
        char why[600];
        int r;

        r = runtime_compose(cfg, &call, &cmd, &exe, why, sizeof(why));
        if (r < 0)
                return request_error(rq, r, "invalid arguments: %s", why);
        r = owner_quota_check(s, "owner_commands_max", rq->sandbox->owner_uid, 1, why, sizeof(why));
        if (r >= 0)
                r = transcripts_admit(s, rq->sandbox, transcript_files_new(true), why, sizeof(why));
        if (r < 0)
                return request_error(rq, r, "cannot start the command: %s", why);
        r = run_new(rq, req, &call, exe, &run);
        if (r >= 0)
                r = command_session_for(rq, req->workspace_session, &ws);
        if (r < 0) {
                runtime_run_free(run);
                return r;
        }
        r = command_start_runtime(s, ws, cmd, timeout_ms,
                                  req->persist ? cfg->runtime_max_artifact_bytes : cfg->transcript_cap_bytes, run, &c);
        if (r < 0) {
                if (ws->automatic && TAILQ_EMPTY(&ws->commands))
                        session_destroy(s, ws);
                return request_error(rq, r, "cannot start the command: %s",
                                     r == -EAGAIN ? "too many running commands in this session" : strerror(-r));
        }
        r = command_capture(c, (uint32_t) cfg->runtime_max_stdout_bytes, (uint32_t) cfg->runtime_max_stderr_bytes);
        if (r >= 0)
                /* Answered when it ends, as execute_command's: the timeout kills it. */
                r = (req->progress ? command_add_progress_waiter : command_add_waiter)(
                        s, c, rq->client, rq->seq, now_usec(), timeout_ms + 2 * SBX_KILL_GRACE_MS);
        if (r < 0) {
                command_cancel(s, c);
                return request_error(rq, r, "out of memory");
        }
        return REPLY_DEFERRED;
}

/* ---- runtime_query_output ------------------------------------------------------ */

/* A query: its arguments (copied: the request goes before a query off the
 * loop ends), what it read and its reply. */
typedef struct Query {
        Work work;
        Pending pending;
        Server *server;
        Sandbox *sandbox;               /* whose lane it runs in; not touched once cancelled */
        int dirfd;                      /* the transcripts directory, dup'ed for the pool thread */
        char command[48];               /* whose transcript is read */
        char handle[SBX_NAME_MAX + 1];
        char **terms;
        size_t n_terms;
        Sbx__Stream stream, cursor_stream, range_stream;
        bool has_cursor, has_range;
        uint64_t after_line, range_start, range_end;
        unsigned max_excerpts, context;
        uint64_t bytes;                 /* raw bytes of the command's output */
        uid_t uid;                      /* of the caller */
        Transcript *owned;              /* opened for the query (a command that ended) */
        OutResult res;
        Sbx__RuntimeQueryReply o;
        Sbx__RuntimeExcerpt *ex;
        Sbx__RuntimeExcerpt **ptrs;
        char *streams[2];
        char error[600];
} Query;

static void query_free(void *p) {
        Query *q = p;

        if (!q)
                return;
        for (size_t i = 0; i < q->n_terms; i++)
                free(q->terms[i]);
        free(q->terms);
        safe_close(q->dirfd);
        transcript_free(q->owned);
        outquery_result_done(&q->res);
        free(q->ex);
        free(q->ptrs);
        free(q);
}

static const char *stream_name(TranscriptStream s) {
        return s == TRANSCRIPT_STDOUT ? "stdout" : s == TRANSCRIPT_STDERR ? "stderr" : "merged";
}

static int query_fail(Query *q, int r, const char *fmt, ...) _printf_(3, 4);
static int query_fail(Query *q, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(q->error, sizeof(q->error), fmt, ap);
        va_end(ap);
        return r;
}

/* The streams a query reads: stdout and stderr (or merged, if the transcript
 * has them together), or one. */
static int query_streams(Query *q, Transcript *t, Sbx__Stream want, OutQuery *oq) {
        if (!transcript_has_streams(t)) {
                if (want != SBX__STREAM__STREAM_MERGED)
                        return query_fail(q, -ENODATA, "invalid arguments: stream: this command kept stdout and stderr "
                                          "together (exec_command); use stream both");
                oq->streams[0] = TRANSCRIPT_MERGED;
                oq->n_streams = 1;
        } else if (want == SBX__STREAM__STREAM_MERGED) {
                oq->streams[0] = TRANSCRIPT_STDOUT;
                oq->streams[1] = TRANSCRIPT_STDERR;
                oq->n_streams = 2;
        } else {
                oq->streams[0] = (TranscriptStream) want;
                oq->n_streams = 1;
        }
        return 0;
}

static int query_range(Query *q, Transcript *t, const OutQuery *oq) {
        uint64_t n = outquery_lines(t, oq->streams[0]);
        int r;

        if (oq->n_streams != 1)
                return query_fail(q, -EINVAL, "invalid arguments: lineRange.stream: name stdout or stderr");
        if (q->range_end >= q->range_start && q->range_end - q->range_start >= SBX_QUERY_RANGE_MAX_LINES)
                return query_fail(q, -E2BIG, "invalid arguments: lineRange: at most %u lines at once; ask for the "
                                  "rest in another call", SBX_QUERY_RANGE_MAX_LINES);
        r = outquery_range(t, oq->streams[0], q->range_start, q->range_end, oq->budget, &q->res);
        if (r == -ERANGE)
                return query_fail(q, r, "invalid arguments: lineRange: %llu-%llu is outside %s, which has lines 1-%llu",
                                  (unsigned long long) q->range_start, (unsigned long long) q->range_end,
                                  stream_name(oq->streams[0]), (unsigned long long) n);
        q->o.match_status = (char *) "lineRange";
        return r;
}

static int query_search(Query *q, Transcript *t, const OutQuery *oq) {
        int r = outquery_search(t, oq, &q->res);

        if (r == -EINVAL && oq->has_cursor)
                return query_fail(q, r, "invalid arguments: cursor.stream: %s is not searched; pass the nextCursor of "
                                  "the previous result as it is", stream_name(oq->cursor_stream));
        if (r == -ERANGE)
                return query_fail(q, r, "invalid arguments: cursor.afterLine: %llu is past the end of %s (%llu lines); "
                                  "pass the nextCursor of the previous result as it is",
                                  (unsigned long long) oq->after_line, stream_name(oq->cursor_stream),
                                  (unsigned long long) outquery_lines(t, oq->cursor_stream));
        if (r == -EINVAL)
                return query_fail(q, r, "invalid arguments: queryTerms: give at least one non-empty term, or a lineRange");
        q->o.match_status = (char *) (q->res.fallback ? "noMatchFallback" : "matched");
        return r;
}

/* The query on t and its reply in q->o. Touches only q and t: it runs on a
 * pool thread for a command that ended. */
static int query_execute(Query *q, Transcript *t) {
        OutQuery oq = {
                .terms = (const char *const *) q->terms, .n_terms = q->n_terms,
                .has_cursor = q->has_cursor, .cursor_stream = (TranscriptStream) q->cursor_stream,
                .after_line = q->after_line, .max_excerpts = q->max_excerpts ?: SBX_QUERY_EXCERPTS_DEFAULT,
                .context = q->context, .budget = SBX_QUERY_TEXT_BUDGET,
        };
        Sbx__RuntimeQueryReply *o = &q->o;
        int r;

        r = query_streams(q, t, q->has_range ? q->range_stream : q->stream, &oq);
        if (r >= 0)
                r = q->has_range ? query_range(q, t, &oq) : query_search(q, t, &oq);
        if (r < 0)
                return q->error[0] ? r : query_fail(q, r, "cannot read the output: %s", strerror(-r));
        q->ex = calloc(MAX(q->res.n_excerpts, (size_t) 1), sizeof(*q->ex));
        q->ptrs = calloc(MAX(q->res.n_excerpts, (size_t) 1), sizeof(*q->ptrs));
        if (!q->ex || !q->ptrs)
                return query_fail(q, -ENOMEM, "out of memory");
        for (size_t i = 0; i < q->res.n_excerpts; i++) {
                const OutExcerpt *e = &q->res.excerpts[i];

                sbx__runtime_excerpt__init(&q->ex[i]);
                q->ex[i].line_start = e->start;
                q->ex[i].line_end = e->end;
                q->ex[i].content.data = (uint8_t *) e->content;
                q->ex[i].content.len = e->len;
                q->ex[i].source = (Sbx__Stream) e->source;
                q->ptrs[i] = &q->ex[i];
        }
        o->handle = q->handle;
        o->n_excerpts = q->res.n_excerpts;
        o->excerpts = q->ptrs;
        for (size_t i = 0; i < oq.n_streams; i++) {
                q->streams[i] = (char *) stream_name(oq.streams[i]);
                o->total_lines += outquery_lines(t, oq.streams[i]);
        }
        o->n_searched_streams = oq.n_streams;
        o->searched_streams = q->streams;
        o->total_bytes = q->bytes ?: transcript_raw_bytes(t);
        o->match_count = q->res.match_count;
        o->match_count_complete = q->res.count_complete || q->res.fallback;
        o->has_next_cursor = q->res.has_next;
        o->next_stream = (Sbx__Stream) q->res.next_stream;
        o->next_after_line = q->res.next_after_line;
        return 0;
}

#define QUERY_NOT_FOUND "artifactHandle: '%.80s' not found; use a handle runtime_execute returned to you, or a " \
        "command_session_id of your sandboxes"

/* The command of handle into q->command, and its record: an artifact of uid,
 * or a command session (whose sandbox the caller checks); errors in q->error. */
static int query_record(Server *s, Query *q, uid_t uid, StoreCommand *ret) {
        bool expired = false;
        int r;

        if (strncmp(q->handle, "art-", 4) == 0) {
                r = artifacts_lookup(s, q->handle, uid, q->command, sizeof(q->command), &expired);
                if (r == -ENOENT && expired)
                        return query_fail(q, r, "artifactHandle: '%.80s' not found: it expired "
                                          "(runtime_artifact_ttl_hours); run the command again with persistOutput",
                                          q->handle);
                if (r == -ENOENT)
                        return query_fail(q, r, QUERY_NOT_FOUND, q->handle);
                if (r < 0)
                        return query_fail(q, r, "cannot look up the artifact: %s", strerror(-r));
        } else
                strlcpy(q->command, q->handle, sizeof(q->command));
        r = store_command_get(s->store, q->command, ret);
        if (r < 0)
                return query_fail(q, -ENOENT, QUERY_NOT_FOUND, q->handle);
        return 0;
}

static int query_kept(Query *q, const StoreCommand *rec) {
        if (rec->evicted[0])
                return query_fail(q, -ESTALE, "artifactHandle: the output of '%.80s' was removed to stay within "
                                  "%s (sbxd.conf(5)); its record is kept", q->handle, rec->evicted);
        return 0;
}

/* ---- off the loop: a command that ended, in its sandbox's lane ---- */

/* The transcript the previous query of the lane read, if it is the same
 * command's: a cursor's next page finds the frames the last one
 * decompressed, so no page decompresses more than another (only the lane's
 * works touch it, one at a time). */
static int query_work_start(Work *w) {
        Query *q = container_of(w, Query, work);
        Sandbox *sb = q->sandbox;

        if (sb->query_kept && strcmp(sb->query_kept_id, q->command) == 0)
                q->owned = TAKE_PTR(sb->query_kept);
        q->dirfd = fcntl(q->server->transcripts_fd, F_DUPFD_CLOEXEC, 3);
        return q->dirfd < 0 ? -errno : 0;
}

static int query_work_run(Work *w) {
        Query *q = container_of(w, Query, work);
        int r = q->owned ? 0 : transcript_open(q->dirfd, q->command, &q->owned);

        if (r < 0)
                return query_fail(q, r, "cannot open the output of '%.80s': %s", q->handle, strerror(-r));
        return query_execute(q, q->owned);
}

static void query_work_done(Work *w, int r, void *userdata) {
        Query *q = container_of(w, Query, work);
        Sbx__Reply reply = SBX__REPLY__INIT;
        Server *s = userdata;
        StoreCommand rec;

        /* No transcript: the budget's sweep after an earlier work of the lane
         * (an artifact compressed, core/artifacts.h) may have removed it since
         * the request was checked. Say so as the request would have. */
        if (!work_cancelled(w) && r == -ENOENT && !q->owned) {
                q->error[0] = '\0';
                r = query_record(s, q, q->uid, &rec);
                if (r >= 0)
                        r = query_kept(q, &rec);
                if (r >= 0)
                        r = query_fail(q, -ENOENT, "cannot open the output of '%.80s': %s", q->handle,
                                       strerror(ENOENT));
        }
        if (work_cancelled(w))
                pending_answer_error(s, &q->pending, -ECANCELED, "the sandbox of '%.80s' went first", q->handle);
        else if (r < 0)
                pending_answer_error(s, &q->pending, r, "%s", q->error[0] ? q->error : strerror(-r));
        else {
                msg_reply_set(&reply, SBX__REPLY__BODY_RUNTIME_QUERY, &q->o);
                pending_answer(s, &q->pending, &reply);
        }
        if (!work_cancelled(w) && q->owned) {
                transcript_free(q->sandbox->query_kept);
                q->sandbox->query_kept = TAKE_PTR(q->owned);
                strlcpy(q->sandbox->query_kept_id, q->command, sizeof(q->sandbox->query_kept_id));
        }
        pending_stop(&q->pending);
        query_free(q);
}

static void query_abandon(Server *s, Pending *p, bool cancelled) {
        /* Nobody waits any more; the query is dropped when it is done. */
}

/* ---- the request ---- */

/* The command of handle (an artifact of the caller, or a command session of
 * one of the caller's sandboxes) into q->command, and its sandbox. */
static int query_target(Request *rq, Query *q, Sandbox **ret_sandbox) {
        Server *s = rq->server;
        StoreCommand rec;
        Sandbox *sb;
        int r;

        r = query_record(s, q, rq->client->uid, &rec);
        if (r < 0)
                return request_error(rq, r, "%s", q->error);
        sb = sandbox_find_id(s, rec.sandbox);
        if (!sb || !sandbox_allows_client(sb, rq->client))
                return request_error(rq, -ENOENT, QUERY_NOT_FOUND, q->handle);
        r = query_kept(q, &rec);
        if (r < 0)
                return request_error(rq, r, "%s", q->error);
        q->bytes = rec.raw_bytes;
        q->uid = rq->client->uid;
        *ret_sandbox = sb;
        return 0;
}

static int query_new(const Sbx__RuntimeQuery *req, Query **ret) {
        Query *q = calloc(1, sizeof(*q));

        if (!q)
                return -ENOMEM;
        *q = (Query) {
                .work = { .start = query_work_start, .run = query_work_run, .done = query_work_done },
                .dirfd = -EBADF, .stream = req->stream, .cursor_stream = req->cursor_stream,
                .range_stream = req->range_stream, .has_cursor = req->has_cursor, .has_range = req->has_range,
                .after_line = req->cursor_after_line, .range_start = req->range_start, .range_end = req->range_end,
                .max_excerpts = req->max_excerpts, .context = req->context_lines,
        };
        sbx__runtime_query_reply__init(&q->o);
        strlcpy(q->handle, req->handle, sizeof(q->handle));
        q->terms = calloc(MAX(req->n_terms, (size_t) 1), sizeof(char *));
        if (!q->terms) {
                query_free(q);
                return -ENOMEM;
        }
        for (; q->n_terms < req->n_terms; q->n_terms++) {
                q->terms[q->n_terms] = strdup(req->terms[q->n_terms]);
                if (!q->terms[q->n_terms]) {
                        query_free(q);
                        return -ENOMEM;
                }
        }
        *ret = q;
        return 0;
}

int handle_runtime_query(Request *rq) {
        Command *c;
        Sandbox *sb;
        Query *q;
        int r;

        r = query_new(rq->msg->runtime_query, &q);
        if (r < 0)
                return r;
        r = query_target(rq, q, &sb);
        if (r < 0) {
                query_free(q);
                return r;
        }
        c = command_find_live(rq->server, q->command);
        if (c && c->transcript && !c->finished) {
                /* Still written to: read here, where its writer is (its lines so far). */
                request_own(rq, query_free, q);
                r = query_execute(q, c->transcript);
                if (r < 0)
                        return request_error(rq, r, "%s", q->error);
                return msg_reply_set(&rq->reply, SBX__REPLY__BODY_RUNTIME_QUERY, &q->o);
        }
        q->server = rq->server;
        q->sandbox = sb;
        pending_start(&q->pending, rq->client, rq->seq, query_abandon);
        work_submit(rq->server->work, &sb->lane, &q->work);
        return REPLY_DEFERRED;
}
