/* What a request's handler uses: its error message, and memory that lives
 * until its reply is sent (control.h). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "control.h"
#include "fd-util.h"
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

int request_payload(int fd, uint64_t size, uint64_t max, char **ret) {
        int seals, need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
        struct stat st;
        char *buf;
        ssize_t n;

        if (fd < 0)
                return -EBADMSG;
        seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || (seals & need) != need)
                return -EBADMSG; /* it could change under us */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t) st.st_size != size)
                return -EBADMSG;
        if (size > max)
                return -EFBIG;
        buf = malloc(size + 1);
        if (!buf)
                return -ENOMEM;
        n = loop_pread(fd, buf, size, 0);
        if (n < 0 || (uint64_t) n != size) {
                free(buf);
                return n < 0 ? (int) n : -EBADMSG;
        }
        buf[size] = '\0';
        *ret = buf;
        return 0;
}
