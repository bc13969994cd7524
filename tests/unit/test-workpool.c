/* Unit tests for common/workpool.c: one lane runs its works in order, each
 * after the previous one's done; a long work of one lane does not delay
 * another lane's; a cancelled lane's works end with their done. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>

#include "workpool.h"

typedef struct TestWork {
        Work w;
        int id;
        sem_t *gate;            /* run waits on it, if set */
        int *log;               /* ids: start as id, done as 100 + id */
        size_t *n_log;
        int done_r;
        bool done_cancelled;
        bool done;
} TestWork;

static int test_start(Work *w) {
        TestWork *t = (TestWork *) w;
        t->log[(*t->n_log)++] = t->id;
        return 0;
}

static int test_run(Work *w) {
        TestWork *t = (TestWork *) w;
        if (t->gate)
                sem_wait(t->gate);
        return t->id;
}

static void test_done(Work *w, int r, void *userdata) {
        TestWork *t = (TestWork *) w;
        t->log[(*t->n_log)++] = 100 + t->id;
        t->done_r = r;
        t->done_cancelled = work_cancelled(w);
        t->done = true;
}

static void init_work(TestWork *t, int id, int *log, size_t *n_log) {
        *t = (TestWork) { .id = id, .log = log, .n_log = n_log };
        t->w.start = test_start;
        t->w.run = test_run;
        t->w.done = test_done;
}

/* Collect until t is done (up to 5 s). */
static void collect_until(WorkPool *p, TestWork *t) {
        for (int i = 0; i < 500 && !t->done; i++) {
                struct pollfd pfd = { .fd = work_pool_fd(p), .events = POLLIN };
                (void) poll(&pfd, 1, 10);
                work_pool_collect(p, NULL);
        }
        assert_true(t->done);
}

static void test_lane_order(void **state) {
        WorkPool *p = NULL;
        WorkLane lane = {};
        TestWork t[3];
        int log[6];
        size_t n = 0;

        assert_int_equal(work_pool_new(4, &p), 0);
        for (int i = 0; i < 3; i++) {
                init_work(&t[i], i + 1, log, &n);
                work_submit(p, &lane, &t[i].w);
        }
        collect_until(p, &t[2]);
        /* Each starts only after the one before it is done. */
        int expected[] = { 1, 101, 2, 102, 3, 103 };
        assert_int_equal(n, 6);
        assert_memory_equal(log, expected, sizeof(expected));
        assert_int_equal(t[1].done_r, 2);
        assert_false(work_lane_busy(&lane));
        work_pool_free(p, 1000, NULL);
}

static void test_lanes_apart(void **state) {
        WorkPool *p = NULL;
        WorkLane a = {}, b = {};
        TestWork slow, quick;
        sem_t gate;
        int log[4];
        size_t n = 0;

        assert_int_equal(sem_init(&gate, 0, 0), 0);
        assert_int_equal(work_pool_new(4, &p), 0);
        init_work(&slow, 1, log, &n);
        slow.gate = &gate;
        init_work(&quick, 2, log, &n);
        work_submit(p, &a, &slow.w);
        work_submit(p, &b, &quick.w);
        /* Lane b's work is done while lane a's still runs. */
        collect_until(p, &quick);
        assert_false(slow.done);
        assert_true(work_lane_busy(&a));
        sem_post(&gate);
        collect_until(p, &slow);
        assert_int_equal(slow.done_r, 1);
        work_pool_free(p, 1000, NULL);
        sem_destroy(&gate);
}

static void test_cancel(void **state) {
        WorkPool *p = NULL;
        WorkLane lane = {};
        TestWork running, queued;
        sem_t gate;
        int log[4];
        size_t n = 0;

        assert_int_equal(sem_init(&gate, 0, 0), 0);
        assert_int_equal(work_pool_new(2, &p), 0);
        init_work(&running, 1, log, &n);
        running.gate = &gate;
        init_work(&queued, 2, log, &n);
        work_submit(p, &lane, &running.w);
        work_submit(p, &lane, &queued.w);
        work_lane_cancel(p, &lane);
        assert_false(work_lane_busy(&lane));
        /* The queued one never starts; it is done, cancelled. */
        collect_until(p, &queued);
        assert_int_equal(queued.done_r, -ECANCELED);
        assert_true(queued.done_cancelled);
        assert_false(running.done);
        /* The running one finishes on its own, and its done knows its owner went. */
        sem_post(&gate);
        collect_until(p, &running);
        assert_true(running.done_cancelled);
        int expected[] = { 1, 102, 101 };
        assert_int_equal(n, 3);
        assert_memory_equal(log, expected, sizeof(expected));
        work_pool_free(p, 1000, NULL);
        sem_destroy(&gate);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lane_order),
                cmocka_unit_test(test_lanes_apart),
                cmocka_unit_test(test_cancel),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
