/* What a request's handler uses: its error message, and memory that lives
 * until its reply is sent (control.h). */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "control.h"
#include "macro.h"

int request_error(Request *rq, int err, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(rq->error, sizeof(rq->error), fmt, ap);
        va_end(ap);
        return err < 0 ? err : -EIO;
}

void request_own(Request *rq, void (*done)(void *p), void *p) {
        /* A handler owns a few things at most; more is a bug in it. */
        assert(rq->n_owned < REQUEST_OWNED_MAX);
        rq->owned[rq->n_owned].done = done;
        rq->owned[rq->n_owned++].p = p;
}

int request_disown(Request *rq, void *p) {
        for (size_t i = 0; i < rq->n_owned; i++)
                if (rq->owned[i].p == p) {
                        rq->owned[i] = rq->owned[--rq->n_owned];
                        return 0;
                }
        return -ENOENT;
}

void *request_alloc(Request *rq, size_t size) {
        void *p = calloc(1, size);

        if (p)
                request_own(rq, free, p);
        return p;
}

void request_done(Request *rq) {
        while (rq->n_owned > 0) {
                rq->n_owned--;
                rq->owned[rq->n_owned].done(rq->owned[rq->n_owned].p);
        }
        rq->fd = safe_close(rq->fd);
        for (; rq->n_more_fds > 0; rq->n_more_fds--)
                (void) safe_close(rq->more_fds[rq->n_more_fds - 1]);
        rq->reply_fd = safe_close(rq->reply_fd);
}
