/* Jobs: the script set's sandbox_script calls (sandbox-mcp --set script,
 * issue 18). A job is one command, /bin/sh -c COMMAND in /out, in a fresh
 * sandbox of its own (an empty workspace on the image asked for) that is
 * deleted, with every process of it, when the command ends, is cancelled or
 * runs out of SBX_SCRIPT_RUNTIME_MAX_S.
 *
 * Outputs: STATE/jobs/ID/out is the session's /out (a bind mount made from
 * its descriptor, os/ns.h: SpawnMounts), with stdout.log and stderr.log,
 * the complete streams, which sbxd writes as the output arrives. While the
 * job runs, out belongs to the sandbox's root (its host uid); when it ends,
 * everything in it is given to the caller's uid and group by a walk that
 * never follows a symlink, and STATE/jobs/ID and out become 0700. The
 * record stays in sbx.db (table jobs) and the directory on disk for
 * script_output_ttl after the end; a sweep removes both.
 *
 * Host inputs: the broker, as the caller, opened each path (files O_RDONLY,
 * directories O_RDONLY|O_DIRECTORY) and sent the descriptors; sbxd checks
 * each descriptor's type and its real path (/proc/self/fd) against
 * script_allowed_paths, clones the mount tree from the descriptor
 * (open_tree, read-only, nosuid, nodev) and the session's init attaches it
 * at /in/NAME: what is mounted is what the caller opened, whatever the path
 * names by then.
 *
 * Ownership: a job is its uid's (root sees every job); any other caller is
 * told it is not found. Status and its answers survive the broker (a
 * background job's starter gets one MSG_JOB_ENDED if it is still
 * connected) and sbxd: a job that ran when sbxd stopped reads
 * supervisor_lost after the restart and its sandbox is deleted.
 *
 * Egress: the job's policy (JobStart.egress) is its sandbox's (core/
 * sandbox.h: SandboxSpec.egress), which sbx-egress applies to its session;
 * for a policy other than none, its command's audit (core/egress.h) is kept
 * with the job when it ends (JobInfo.audit, in sbx.db too) and every answer
 * carries it, the running command's so far while it runs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "core/client.h"
#include "core/server.h"
#include "core/session.h"

#define JOB_ID_SIZE 37                  /* a UUID and its NUL */

typedef struct JobWaiter JobWaiter;

struct Job {
        TAILQ_ENTRY(Job) link;
        char id[JOB_ID_SIZE];
        uid_t uid;
        gid_t gid;
        char image[SBX_NAME_MAX + 1];
        EgressPolicy egress;            /* its sandbox's (JobSpec.egress, parsed) */
        EgressAudit audit;              /* its ended command's (see Egress above) */
        Sbx__EgressAudit audit_view;    /* what job_record_of lends the record */
        char *command;
        char status[24];                /* running exited cancelled timed_out supervisor_lost */
        bool ended;
        bool has_exit_code;
        int exit_code;                  /* 128 + signal for a signal */
        int signal;
        int64_t started_unix, ended_unix;
        char *output_dir;               /* STATE/jobs/ID/out */
        bool has_sandbox;               /* its sandbox (job-HEX) exists, or is being made */
        Command *cmd;                   /* while its command runs */
        SessionMounts *mounts;          /* its session's, until the sandbox goes */
        int log_fds[2];                 /* stdout.log, stderr.log while it runs */
        bool cancelling;                /* sandbox_cancel or notifications/cancelled: status cancelled */
        bool finishing;                 /* its command ended: the tick tears it down */
        bool start_failed;              /* the session never ran the command (start_error says why) */
        bool refill_spares;             /* it ended: the tick makes spares of its image and policy */
        char start_error[300];
        Pending answer;                 /* a synchronous sandbox_script, answered at the end */
        Pending notify;                 /* a background one's starter: MSG_JOB_ENDED at the end */
        TAILQ_HEAD(, JobWaiter) waiters; /* sandbox_wait calls */
};

/* What a job is made of: the request's fields, checked. */
typedef struct JobSpec {
        const char *command;
        const char *image;              /* one of script_images (common/allowlist.h) */
        const char *egress;             /* a policy's name (common/egress-policy.h): the sandbox's */
        bool background;
        const Sbx__JobInput *const *inputs;
        size_t n_inputs;
        const int *input_fds;           /* one per input, borrowed */
} JobSpec;

/* Start a job for c (seq: its request). 0 with *ret answered at once
 * (background: running), JOB_DEFERRED when the end answers it, or -errno
 * with err set (the seed's wording for inputs). */
#define JOB_DEFERRED 1
int job_start(Server *s, Client *c, uint32_t seq, const JobSpec *spec, Job **ret, char *err, size_t size);
/* c's job id (root: anyone's), or NULL. */
Job *job_find(Server *s, const Client *c, const char *id);
/* Kill its process tree and end it cancelled (nothing if it ended). */
void job_cancel(Server *s, Job *job);
/* Answer c (seq) with the job once it ends or after timeout_s, running then. */
int job_add_waiter(Server *s, Job *job, Client *c, uint32_t seq, uint32_t timeout_s);
/* Cancel it if it runs, then remove its record and output_dir. */
int job_remove(Server *s, Job *job);

/* Its record without the tails (listings, sbx.db; strings and the egress
 * audit borrowed from job, valid until it changes). */
void job_record_of(Job *job, Sbx__JobInfo *ret);
/* The job as replies carry it, its tails read from its logs once it ended
 * (strings borrowed from job, tails malloc'd: job_info_done). */
int job_info(Server *s, Job *job, Sbx__JobInfo *ret);
void job_info_done(Sbx__JobInfo *info);

/* Running jobs, of all owners or of one uid (inline: owner.c, which job.c
 * calls, counts with it). */
static inline unsigned jobs_running(const Server *s, bool any_uid, uid_t uid) {
        const Job *job;
        unsigned n = 0;

        TAILQ_FOREACH(job, &s->jobs, link)
                n += !job->ended && (any_uid || job->uid == uid);
        return n;
}

/* After sandboxes_load: the jobs of sbx.db; those that ran are lost. */
int jobs_load(Server *s);
void jobs_free(Server *s);
unsigned long long jobs_next_deadline(Server *s);
/* Once per loop pass: tear down ended jobs, answer waits that ran out,
 * sweep outputs older than script_output_ttl. */
void jobs_run_deadlines(Server *s);
