/* Requests of the script set: jobs (core/job.h). A job is found among the
 * caller's own (root: among all); any other id is answered
 * job "<id>" not found, whether it exists or not. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allowlist.h"
#include "control.h"
#include "core/job.h"
#include "log.h"
#include "sbx-limits.h"

#define NOT_FOUND "job \"%.64s\" not found (sandbox_script returns job_id; a job is its owner's alone)"

static void job_info_free(void *p) {
        job_info_done(p);
}

/* The job as the reply body, its tails owned by the request. */
static int reply_job(Request *rq, Job *job) {
        Sbx__JobInfo *o = request_alloc(rq, sizeof(Sbx__JobInfo));
        int r;

        if (!o)
                return request_error(rq, -ENOMEM, "out of memory");
        r = job_info(rq->server, job, o);
        if (r < 0)
                return request_error(rq, r, "cannot read the job's output: %s", strerror(-r));
        request_own(rq, job_info_free, o);
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_JOB, o);
}

static int find_job(Request *rq, const char *id, Job **ret) {
        Job *job = job_find(rq->server, rq->client, id);

        if (!job)
                return request_error(rq, -ENOENT, NOT_FOUND, id);
        *ret = job;
        return 0;
}

int handle_job_start(Request *rq) {
        const Sbx__JobStart *req = rq->msg->job_start;
        size_t n_fds = (rq->fd >= 0) + rq->n_more_fds;
        int fds[SBX_WIRE_MAX_FDS];
        Job *job = NULL;
        int r;

        if (req->n_inputs != n_fds)
                return request_error(rq, -EINVAL, "%zu host inputs named and %zu descriptors sent: they must match",
                                     req->n_inputs, n_fds);
        fds[0] = rq->fd;
        memcpy(fds + 1, rq->more_fds, rq->n_more_fds * sizeof(int));
        r = job_start(rq->server, rq->client, rq->seq, &(JobSpec) {
                .command = req->command,
                .image = req->image[0] ? req->image : SCRIPT_IMAGE_DEFAULT,
                .egress = req->egress[0] ? req->egress : SCRIPT_EGRESS_DEFAULT,
                .background = req->background,
                .inputs = (const Sbx__JobInput *const *) req->inputs,
                .n_inputs = req->n_inputs,
                .input_fds = fds,
        }, &job, rq->error, sizeof(rq->error));
        if (r < 0)
                return r;
        /* Synchronous: answered when it ends; background: at once, running. */
        return r == JOB_DEFERRED ? REPLY_DEFERRED : reply_job(rq, job);
}

int handle_job_status(Request *rq) {
        Job *job = NULL;
        int r = find_job(rq, rq->msg->job_status->job_id, &job);

        return r < 0 ? r : reply_job(rq, job);
}

int handle_job_wait(Request *rq) {
        const Sbx__JobWait *req = rq->msg->job_wait;
        Job *job = NULL;
        int r = find_job(rq, req->job_id, &job);

        if (r < 0)
                return r;
        if (job->ended && !job->finishing)
                return reply_job(rq, job);
        r = job_add_waiter(rq->server, job, rq->client, rq->seq,
                           req->timeout_seconds ?: SBX_SCRIPT_WAIT_DEFAULT_S);
        return r < 0 ? request_error(rq, r, "out of memory") : REPLY_DEFERRED;
}

int handle_job_cancel(Request *rq) {
        Job *job = NULL;
        int r = find_job(rq, rq->msg->job_cancel->job_id, &job);

        if (r < 0)
                return r;
        /* The sandbox goes with its whole process tree before the answer. */
        job_cancel(rq->server, job);
        return reply_job(rq, job);
}

int handle_job_rm(Request *rq) {
        Job *job = NULL;
        int r = find_job(rq, rq->msg->job_rm->job_id, &job);

        if (r < 0)
                return r;
        log_info("Removing job %s (uid %u asked)", job->id, (unsigned) rq->client->uid);
        return job_remove(rq->server, job);
}

int handle_job_list(Request *rq) {
        Sbx__JobListReply *l = request_alloc(rq, sizeof(Sbx__JobListReply));
        Job *job;
        size_t n = 0;

        if (!l)
                return request_error(rq, -ENOMEM, "out of memory");
        sbx__job_list_reply__init(l);
        TAILQ_FOREACH(job, &rq->server->jobs, link)
                n += rq->client->uid == 0 || job->uid == rq->client->uid;
        l->jobs = request_alloc(rq, (n ?: 1) * (sizeof(Sbx__JobInfo *) + sizeof(Sbx__JobInfo)));
        if (!l->jobs)
                return request_error(rq, -ENOMEM, "out of memory");
        TAILQ_FOREACH(job, &rq->server->jobs, link) {
                Sbx__JobInfo *o = (Sbx__JobInfo *) (l->jobs + n) + l->n_jobs;

                if (rq->client->uid != 0 && job->uid != rq->client->uid)
                        continue;
                /* Listings carry no tails: sbxctl job show does. */
                job_record_of(job, o);
                l->jobs[l->n_jobs++] = o;
        }
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_JOB_LIST, l);
}

int handle_script_roots(Request *rq) {
        const char *roots = rq->server->cfg.script_allowed_paths ?: "";
        Sbx__ScriptRootsReply *l = request_alloc(rq, sizeof(Sbx__ScriptRootsReply));
        char *copy = request_alloc(rq, strlen(roots) + 1);
        char **v = request_alloc(rq, (SBX_SCRIPT_ROOTS_MAX + 1) * sizeof(char *));

        if (!l || !copy || !v)
                return request_error(rq, -ENOMEM, "out of memory");
        sbx__script_roots_reply__init(l);
        strcpy(copy, roots);
        l->roots = v;
        for (char *p = strtok(copy, " "); p && l->n_roots < SBX_SCRIPT_ROOTS_MAX; p = strtok(NULL, " "))
                v[l->n_roots++] = p;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_SCRIPT_ROOTS, l);
}
