#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "workpool.h"

struct WorkPool {
        pthread_mutex_t lock;
        pthread_cond_t wake;            /* a work to run, or stop */
        pthread_cond_t idle;            /* a thread finished a work (work_pool_free waits on it) */
        TAILQ_HEAD(, Work) runnable;    /* started, waiting for a thread */
        TAILQ_HEAD(, Work) finished;    /* waiting for their done */
        unsigned threads, waiting, running, max_threads;
        bool stopping;
        int event_fd;
};

static void *pool_thread(void *arg) {
        WorkPool *p = arg;

        pthread_mutex_lock(&p->lock);
        for (;;) {
                Work *w;
                int r;

                while (!p->stopping && TAILQ_EMPTY(&p->runnable)) {
                        p->waiting++;
                        pthread_cond_wait(&p->wake, &p->lock);
                        p->waiting--;
                }
                if (p->stopping && TAILQ_EMPTY(&p->runnable))
                        break;
                w = TAILQ_FIRST(&p->runnable);
                TAILQ_REMOVE(&p->runnable, w, link);
                p->running++;
                pthread_mutex_unlock(&p->lock);
                r = work_cancelled(w) ? -ECANCELED : w->run(w);
                pthread_mutex_lock(&p->lock);
                w->result = r;
                TAILQ_INSERT_TAIL(&p->finished, w, link);
                p->running--;
                (void) eventfd_write(p->event_fd, 1);
                pthread_cond_broadcast(&p->idle);
        }
        p->threads--;
        pthread_cond_broadcast(&p->idle);
        pthread_mutex_unlock(&p->lock);
        return NULL;
}

int work_pool_new(unsigned max_threads, WorkPool **ret) {
        WorkPool *p;

        if (max_threads == 0)
                return -EINVAL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (p->event_fd < 0) {
                free(p);
                return -errno;
        }
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->wake, NULL);
        pthread_cond_init(&p->idle, NULL);
        TAILQ_INIT(&p->runnable);
        TAILQ_INIT(&p->finished);
        p->max_threads = max_threads;
        *ret = p;
        return 0;
}

int work_pool_fd(const WorkPool *p) {
        return p->event_fd;
}

/* With the lock held: a thread for one more runnable work, if none waits and the bound allows. */
static void thread_for_work(WorkPool *p) {
        sigset_t all, old;
        pthread_t t;

        if (p->waiting > 0 || p->threads >= p->max_threads)
                return;
        /* The thread inherits this mask: signals stay the loop's (its signalfd). */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (pthread_create(&t, NULL, pool_thread, p) == 0) {
                pthread_detach(t);
                p->threads++;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* With the lock held: w is done (its done runs at the next collect). */
static void finish_locked(WorkPool *p, Work *w, int r) {
        w->result = r;
        TAILQ_INSERT_TAIL(&p->finished, w, link);
        (void) eventfd_write(p->event_fd, 1);
}

static void lane_init(WorkLane *lane) {
        if (lane->initialized)
                return;
        TAILQ_INIT(&lane->queued);
        lane->current = NULL;
        lane->initialized = true;
}

/* Start the lane's next work, if it is idle. */
static void lane_next(WorkPool *p, WorkLane *lane) {
        Work *w;
        int r;

        if (lane->current || TAILQ_EMPTY(&lane->queued))
                return;
        w = TAILQ_FIRST(&lane->queued);
        TAILQ_REMOVE(&lane->queued, w, link);
        lane->current = w;
        r = w->start ? w->start(w) : 0;
        pthread_mutex_lock(&p->lock);
        if (r != 0)
                finish_locked(p, w, r > 0 ? 0 : r);
        else {
                TAILQ_INSERT_TAIL(&p->runnable, w, link);
                thread_for_work(p);
                pthread_cond_signal(&p->wake);
        }
        pthread_mutex_unlock(&p->lock);
}

void work_submit(WorkPool *p, WorkLane *lane, Work *w) {
        lane_init(lane);
        w->lane = lane;
        atomic_store(&w->cancelled, false);
        w->result = 0;
        TAILQ_INSERT_TAIL(&lane->queued, w, link);
        lane_next(p, lane);
}

void work_pool_collect(WorkPool *p, void *userdata) {
        TAILQ_HEAD(, Work) done = TAILQ_HEAD_INITIALIZER(done);
        eventfd_t n;
        Work *w;

        (void) eventfd_read(p->event_fd, &n);
        pthread_mutex_lock(&p->lock);
        TAILQ_CONCAT(&done, &p->finished, link);
        pthread_mutex_unlock(&p->lock);
        while ((w = TAILQ_FIRST(&done))) {
                WorkLane *lane = w->lane;

                TAILQ_REMOVE(&done, w, link);
                if (lane)
                        lane->current = NULL;
                w->done(w, w->result, userdata);
                /* Unless done cancelled the lane (its owner went): then lane_next has nothing to do. */
                if (lane && lane->initialized)
                        lane_next(p, lane);
        }
}

void work_lane_cancel(WorkPool *p, WorkLane *lane) {
        Work *w;

        if (!lane->initialized)
                return;
        pthread_mutex_lock(&p->lock);
        while ((w = TAILQ_FIRST(&lane->queued))) {
                TAILQ_REMOVE(&lane->queued, w, link);
                w->lane = NULL;
                atomic_store(&w->cancelled, true);
                finish_locked(p, w, -ECANCELED);
        }
        if (lane->current) {
                lane->current->lane = NULL;
                atomic_store(&lane->current->cancelled, true);
                lane->current = NULL;
        }
        pthread_mutex_unlock(&p->lock);
        lane->initialized = false;
}

bool work_lane_busy(const WorkLane *lane) {
        return lane->initialized && (lane->current || !TAILQ_EMPTY(&lane->queued));
}

WorkPool *work_pool_free(WorkPool *p, unsigned wait_ms, void *userdata) {
        struct timespec until;
        bool left;

        if (!p)
                return NULL;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += wait_ms / 1000;
        until.tv_nsec += (long) (wait_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&p->lock);
        p->stopping = true;
        pthread_cond_broadcast(&p->wake);
        while (p->threads > 0 && pthread_cond_timedwait(&p->idle, &p->lock, &until) == 0)
                ;
        left = p->threads > 0;
        pthread_mutex_unlock(&p->lock);
        work_pool_collect(p, userdata);
        if (left)
                return NULL; /* a thread still uses p: the process's exit ends both */
        safe_close(p->event_fd);
        pthread_cond_destroy(&p->idle);
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
}
