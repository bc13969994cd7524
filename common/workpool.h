/* Work off the event loop: a pool of threads that runs works, with one lane
 * (a FIFO queue) per owner, such as a sandbox. A lane runs one work at a
 * time, in the order submitted, and its next work starts only after the
 * previous one's done ran on the loop, so what a done changes (a sandbox's
 * top layer, say) is seen by the next work's start. Works of different lanes
 * run side by side, each on a thread of its own (threads are started on
 * demand, up to a maximum, and then kept), so a long work of one lane never
 * delays another lane's. The loop watches work_pool_fd() and calls
 * work_pool_collect() when it is readable.
 *
 * Threads: start and done run on the loop (the caller's thread); run runs on
 * a pool thread and may touch only the work's own data (copies and dup'ed
 * fds, taken by start), never what the loop owns. Every pool thread blocks
 * all signals. Non-logging. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/queue.h>

typedef struct WorkPool WorkPool;
typedef struct Work Work;

/* An owner's queue; embedded in the owner, zeroed (or work_lane_init) before use. */
typedef struct WorkLane {
        TAILQ_HEAD(, Work) queued;
        Work *current;          /* started and not done yet */
        bool initialized;
} WorkLane;

struct Work {
        TAILQ_ENTRY(Work) link;
        WorkLane *lane;                         /* NULL once its lane was cancelled */
        /* On the loop, when its turn comes: copy what run needs. 0: run it; 1: nothing
         * to run (done with 0); < 0: done at once with it. */
        int (*start)(Work *w);
        /* On a pool thread; its result goes to done. */
        int (*run)(Work *w);
        /* On the loop (in work_pool_collect), once: r is run's or start's result, or
         * -ECANCELED if it never ran. With work_cancelled(w), its owner is gone:
         * done touches nothing of it. done may free w, not its lane. */
        void (*done)(Work *w, int r, void *userdata);
        atomic_bool cancelled;
        int result;
};

static inline bool work_cancelled(Work *w) {
        return atomic_load(&w->cancelled);
}

/* A pool of at most max_threads threads (>= 1). */
int work_pool_new(unsigned max_threads, WorkPool **ret);
/* Readable while works wait for their done. */
int work_pool_fd(const WorkPool *p);
/* Append w to lane: started now if the lane is idle, else after the works before it. */
void work_submit(WorkPool *p, WorkLane *lane, Work *w);
/* Run the done of every finished work, then start the next work of each lane. */
void work_pool_collect(WorkPool *p, void *userdata);
/* The lane's owner goes: its works are cancelled (done runs at the next collect,
 * with work_cancelled set); a running one finishes on its own. The lane is
 * free to go at once. */
void work_lane_cancel(WorkPool *p, WorkLane *lane);
/* Whether the lane has works queued or running. */
bool work_lane_busy(const WorkLane *lane);
/* Stop the pool: the works of every lane must be cancelled first. Waits up to
 * wait_ms for running works, runs the done of those finished (cancelled); a
 * work still running then is left to its thread, which the process's exit
 * ends (its done never runs: what it built must be safe to leave, as after
 * a crash). NULL-safe; returns NULL. */
WorkPool *work_pool_free(WorkPool *p, unsigned wait_ms, void *userdata);
