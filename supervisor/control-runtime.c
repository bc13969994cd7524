/* Requests of the artifacts set (issue 19): runtime_execute and
 * runtime_query_output. The policy a hostile broker must not get around
 * (runtimes, executables, durations, concurrency, sizes) is checked here. */
#include <errno.h>
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

/* The job of req: its policy checks, environment and stdin. */
static int job_new(Request *rq, const Sbx__RuntimeExecute *req, const char *exe, RuntimeJob **ret) {
        const Config *cfg = &rq->server->cfg;
        _cleanup_free_ RuntimeJob *j = NULL;
        _cleanup_free_ char *in = NULL;
        int r;

        if (req->timeout_ms > cfg->runtime_max_duration_ms)
                return request_error(rq, -EINVAL, "invalid arguments: timeoutMs: %llu is over runtime_max_duration_ms "
                                     "(%llu, sbxd.conf(5)); ask for at most that",
                                     (unsigned long long) req->timeout_ms,
                                     (unsigned long long) cfg->runtime_max_duration_ms);
        if (runtime_jobs_running(rq->server, rq->sandbox->owner_uid) >= cfg->runtime_max_concurrent_jobs)
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
        RuntimeJob *job = NULL;
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
        r = job_new(rq, req, exe, &job);
        if (r >= 0)
                r = command_session_for(rq, req->workspace_session, &ws);
        if (r < 0) {
                runtime_job_free(job);
                return r;
        }
        r = command_start_job(s, ws, cmd, timeout_ms,
                              req->persist ? cfg->runtime_max_artifact_bytes : cfg->transcript_cap_bytes, job, &c);
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

typedef struct QueryAnswer {
        Sbx__RuntimeQueryReply o;
        Transcript *owned;              /* opened for the query (a command that ended) */
        OutResult res;
        Sbx__RuntimeExcerpt *ex;
        Sbx__RuntimeExcerpt **ptrs;
        char *streams[2];
        char command[48];               /* the command whose transcript is read */
} QueryAnswer;

static void query_answer_free(void *p) {
        QueryAnswer *a = p;

        transcript_free(a->owned);
        outquery_result_done(&a->res);
        free(a->ex);
        free(a->ptrs);
        free(a);
}

/* The transcript of handle (an artifact, or a command session of a sandbox of
 * the caller's), borrowed from its live command or opened into a->owned. */
static int query_transcript(Request *rq, const char *handle, QueryAnswer *a, Transcript **ret) {
        Server *s = rq->server;
        char *id = a->command;
        StoreCommand rec;
        const Sandbox *sb;
        Command *c;
        bool expired = false;
        int r;

        if (strncmp(handle, "art-", 4) == 0) {
                r = artifacts_lookup(s, handle, rq->client->uid, id, sizeof(a->command), &expired);
                if (r == -ENOENT)
                        return request_error(rq, r, "artifactHandle: '%.80s' not found%s", handle,
                                             expired ? ": it expired (runtime_artifact_ttl_hours); run the command "
                                                       "again with persistOutput" : "; use a handle runtime_execute "
                                                       "returned to you, or a command_session_id of your sandboxes");
                if (r < 0)
                        return request_error(rq, r, "cannot look up the artifact: %s", strerror(-r));
        } else
                strlcpy(id, handle, sizeof(a->command));
        r = store_command_get(s->store, id, &rec);
        sb = r >= 0 ? sandbox_find_id(s, rec.sandbox) : NULL;
        if (!sb || !sandbox_allows_client(sb, rq->client))
                return request_error(rq, -ENOENT, "artifactHandle: '%.80s' not found; use a handle runtime_execute "
                                     "returned to you, or a command_session_id of your sandboxes", handle);
        if (rec.evicted[0])
                return request_error(rq, -ESTALE, "artifactHandle: the output of '%.80s' was removed to stay within "
                                     "%s (sbxd.conf(5)); its record is kept", handle, rec.evicted);
        c = command_find_live(s, id);
        if (c && c->transcript) {
                *ret = c->transcript;
                return 0;
        }
        r = transcript_open(s->transcripts_fd, id, &a->owned);
        if (r < 0)
                return request_error(rq, r, "cannot open the output of '%.80s': %s", handle, strerror(-r));
        *ret = a->owned;
        return 0;
}

static const char *stream_name(TranscriptStream s) {
        return s == TRANSCRIPT_STDOUT ? "stdout" : s == TRANSCRIPT_STDERR ? "stderr" : "merged";
}

/* The streams a query reads: stdout and stderr (or merged, if the transcript
 * has them together), or one. */
static int query_streams(Request *rq, Transcript *t, Sbx__Stream want, OutQuery *q) {
        if (!transcript_has_streams(t)) {
                if (want != SBX__STREAM__STREAM_MERGED)
                        return request_error(rq, -ENODATA, "invalid arguments: stream: this command kept stdout and "
                                             "stderr together (exec_command); use stream both");
                q->streams[0] = TRANSCRIPT_MERGED;
                q->n_streams = 1;
        } else if (want == SBX__STREAM__STREAM_MERGED) {
                q->streams[0] = TRANSCRIPT_STDOUT;
                q->streams[1] = TRANSCRIPT_STDERR;
                q->n_streams = 2;
        } else {
                q->streams[0] = (TranscriptStream) want;
                q->n_streams = 1;
        }
        return 0;
}

static int query_reply(Request *rq, QueryAnswer *a, const OutQuery *q, Transcript *t, uint64_t bytes) {
        Sbx__RuntimeQueryReply *o = &a->o;

        a->ex = calloc(MAX(a->res.n_excerpts, (size_t) 1), sizeof(*a->ex));
        a->ptrs = calloc(MAX(a->res.n_excerpts, (size_t) 1), sizeof(*a->ptrs));
        if (!a->ex || !a->ptrs)
                return -ENOMEM;
        for (size_t i = 0; i < a->res.n_excerpts; i++) {
                const OutExcerpt *e = &a->res.excerpts[i];

                sbx__runtime_excerpt__init(&a->ex[i]);
                a->ex[i].line_start = e->start;
                a->ex[i].line_end = e->end;
                a->ex[i].content.data = (uint8_t *) e->content;
                a->ex[i].content.len = e->len;
                a->ex[i].source = (Sbx__Stream) e->source;
                a->ptrs[i] = &a->ex[i];
        }
        o->n_excerpts = a->res.n_excerpts;
        o->excerpts = a->ptrs;
        for (size_t i = 0; i < q->n_streams; i++) {
                a->streams[i] = (char *) stream_name(q->streams[i]);
                o->total_lines += outquery_lines(t, q->streams[i]);
        }
        o->n_searched_streams = q->n_streams;
        o->searched_streams = a->streams;
        o->total_bytes = bytes;
        o->match_count = a->res.match_count;
        o->match_count_complete = a->res.count_complete || a->res.fallback;
        o->has_next_cursor = a->res.has_next;
        o->next_stream = (Sbx__Stream) a->res.next_stream;
        o->next_after_line = a->res.next_after_line;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_RUNTIME_QUERY, o);
}

/* Raw bytes of the command's output, both streams (as its record or live transcript counts them). */
static uint64_t query_bytes(Request *rq, const char *command, Transcript *t) {
        StoreCommand rec;

        if (store_command_get(rq->server->store, command, &rec) >= 0 && rec.raw_bytes > 0)
                return rec.raw_bytes;
        return transcript_raw_bytes(t);
}

int handle_runtime_query(Request *rq) {
        const Sbx__RuntimeQuery *req = rq->msg->runtime_query;
        QueryAnswer *a = calloc(1, sizeof(*a));
        OutQuery q = {
                .terms = (const char *const *) req->terms, .n_terms = req->n_terms,
                .has_cursor = req->has_cursor, .cursor_stream = (TranscriptStream) req->cursor_stream,
                .after_line = req->cursor_after_line,
                .max_excerpts = req->max_excerpts ?: SBX_QUERY_EXCERPTS_DEFAULT,
                .context = req->context_lines, .budget = SBX_QUERY_TEXT_BUDGET,
        };
        Transcript *t = NULL;
        int r;

        if (!a)
                return -ENOMEM;
        request_own(rq, query_answer_free, a);
        sbx__runtime_query_reply__init(&a->o);
        a->o.handle = req->handle;
        r = query_transcript(rq, req->handle, a, &t);
        if (r < 0)
                return r;
        r = query_streams(rq, t, req->has_range ? req->range_stream : req->stream, &q);
        if (r < 0)
                return r;
        if (req->has_range) {
                uint64_t n = outquery_lines(t, q.streams[0]);

                if (q.n_streams != 1)
                        return request_error(rq, -EINVAL, "invalid arguments: lineRange.stream: name stdout or stderr");
                if (req->range_end >= req->range_start && req->range_end - req->range_start >= SBX_QUERY_RANGE_MAX_LINES)
                        return request_error(rq, -E2BIG, "invalid arguments: lineRange: at most %u lines at once; "
                                             "ask for the rest in another call", SBX_QUERY_RANGE_MAX_LINES);
                r = outquery_range(t, q.streams[0], req->range_start, req->range_end, q.budget, &a->res);
                if (r == -ERANGE)
                        return request_error(rq, r, "invalid arguments: lineRange: %llu-%llu is outside %s, which has "
                                             "lines 1-%llu", (unsigned long long) req->range_start,
                                             (unsigned long long) req->range_end, stream_name(q.streams[0]),
                                             (unsigned long long) n);
                a->o.match_status = (char *) "lineRange";
        } else {
                r = outquery_search(t, &q, &a->res);
                if (r == -EINVAL && q.has_cursor)
                        return request_error(rq, r, "invalid arguments: cursor.stream: %s is not searched; pass the "
                                             "nextCursor of the previous result as it is", stream_name(q.cursor_stream));
                if (r == -ERANGE)
                        return request_error(rq, r, "invalid arguments: cursor.afterLine: %llu is past the end of %s "
                                             "(%llu lines); pass the nextCursor of the previous result as it is",
                                             (unsigned long long) q.after_line, stream_name(q.cursor_stream),
                                             (unsigned long long) outquery_lines(t, q.cursor_stream));
                if (r == -EINVAL)
                        return request_error(rq, r, "invalid arguments: queryTerms: give at least one non-empty "
                                             "term, or a lineRange");
                a->o.match_status = (char *) (a->res.fallback ? "noMatchFallback" : "matched");
        }
        if (r < 0)
                return request_error(rq, r, "cannot read the output: %s", strerror(-r));
        return query_reply(rq, a, &q, t, query_bytes(rq, a->command, t));
}
