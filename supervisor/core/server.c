#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include "core/server.h"
#include "data/layer.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "sbx-limits.h"

void server_init(Server *s) {
        *s = (Server) {
                .epoll_fd = -EBADF, .state_fd = -EBADF, .sandboxes_fd = -EBADF, .transcripts_fd = -EBADF,
                .staging_fd = -EBADF, .jobs_fd = -EBADF, .worker_exe_fd = -EBADF, .listen_src.fd = -EBADF, .signal_src.fd = -EBADF,
                .work_src.fd = -EBADF,
                .started_usec = now_usec(),
        };
        config_init(&s->cfg);
        layer_limits_from_config(&s->cfg, &s->layer_limits); /* again once sbxd.conf was read */
        s->transcripts_max_bytes = SBX_TRANSCRIPTS_DEFAULT;    /* transcripts_load fixes it from the configuration */
        TAILQ_INIT(&s->clients);
        TAILQ_INIT(&s->sandboxes);
        TAILQ_INIT(&s->imports);
        TAILQ_INIT(&s->sessions);
        TAILQ_INIT(&s->ending);
        TAILQ_INIT(&s->dead);
        TAILQ_INIT(&s->commands);
        TAILQ_INIT(&s->ended_commands);
        TAILQ_INIT(&s->claims);
        TAILQ_INIT(&s->boxes);
        TAILQ_INIT(&s->jobs);
        TAILQ_INIT(&s->job_spares);
        TAILQ_INIT(&s->tokens);
        TAILQ_INIT(&s->takeovers);
}

int server_open_state_dirs(Server *s) {
        int r;

        r = s->sandboxes_fd = dir_make_open_at(s->state_fd, "sandboxes", 0700, NULL);
        if (r >= 0)
                r = s->transcripts_fd = dir_make_open_at(s->state_fd, "transcripts", 0700, NULL);
        /* Staged file operations of a previous run were never published. */
        if (r >= 0)
                (void) tree_remove_at(s->state_fd, "staging");
        if (r >= 0)
                r = s->staging_fd = dir_make_open_at(s->state_fd, "staging", 0700, NULL);
        /* Jobs' outputs (core/job.h): each STATE/jobs/ID is its owner's, 0700;
         * others may pass through jobs/ to their own, never list it. */
        if (r >= 0)
                r = s->jobs_fd = dir_make_open_at(s->state_fd, "jobs", 0711, NULL);
        if (r >= 0 && fchmod(s->jobs_fd, 0711) < 0)
                r = -errno;
        return r < 0 ? r : 0;
}

int server_seal_state_dir(Server *s) {
        _cleanup_(closedirp) DIR *d = opendir_at(s->state_fd);
        struct dirent *de;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                struct stat st;

                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, "jobs") ||
                    !strcmp(de->d_name, "box-files"))
                        continue;
                if (fstatat(s->state_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (!S_ISLNK(st.st_mode) && (st.st_mode & 077) &&
                    fchmodat(s->state_fd, de->d_name, st.st_mode & 0700, 0) < 0)
                        return -errno;
        }
        return fchmod(s->state_fd, 0711) < 0 ? -errno : 0;
}

void server_close(Server *s) {
        s->store = store_close(s->store);
        s->store_conns = store_conns_unref(s->store_conns);
        s->file_indexes = index_cache_free(s->file_indexes);
        s->worker_exe_fd = safe_close(s->worker_exe_fd);
        s->transcripts_fd = safe_close(s->transcripts_fd);
        s->staging_fd = safe_close(s->staging_fd);
        s->jobs_fd = safe_close(s->jobs_fd);
        s->sandboxes_fd = safe_close(s->sandboxes_fd);
        s->state_fd = safe_close(s->state_fd);
        s->epoll_fd = safe_close(s->epoll_fd);
        free(s->seccomp);
        free(s->image_dir);
        free(s->unrecorded);
        s->unrecorded = NULL;
        s->n_unrecorded = s->unrecorded_cap = 0;
        s->seccomp = NULL;
        s->image_dir = NULL;
        config_done(&s->cfg);
}

static void on_work(Server *s, EventSource *src, uint32_t events) {
        work_pool_collect(s->work, s);
}

int server_open_work(Server *s) {
        int fd, r;

        r = work_pool_new(SBX_WORK_THREADS_MAX, &s->work);
        if (r >= 0)
                r = store_conns_new(s->state_fd, &s->store_conns);
        if (r < 0)
                return r;
        fd = fcntl(work_pool_fd(s->work), F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        s->work_src.dispatch = on_work;
        r = server_watch(s, &s->work_src, fd, EPOLLIN);
        if (r < 0)
                safe_close(fd);
        return r;
}

typedef struct CloseWork {
        Work work;
        int fd;
} CloseWork;

static int close_run(Work *w) {
        CloseWork *c = container_of(w, CloseWork, work);

        c->fd = safe_close(c->fd);
        return 0;
}

static void close_done(Work *w, int r, void *userdata) {
        CloseWork *c = container_of(w, CloseWork, work);

        safe_close(c->fd); /* never ran: sbxd stops */
        free(c);
}

void server_close_later(Server *s, int fd) {
        CloseWork *c;

        if (fd < 0)
                return;
        c = s->work ? calloc(1, sizeof(*c)) : NULL;
        if (!c) {
                safe_close(fd);
                return;
        }
        *c = (CloseWork) { .work = { .run = close_run, .done = close_done }, .fd = fd };
        work_submit(s->work, &s->close_lane, &c->work);
}

/* The loop's connection left a long WAL: another connection checkpoints it
 * on the close lane (one at a time). */
typedef struct CheckpointWork {
        Work work;
        Server *server;
        StoreConns *conns;              /* a reference */
} CheckpointWork;

static int checkpoint_run(Work *w) {
        CheckpointWork *c = container_of(w, CheckpointWork, work);
        Store *writer;
        int r = store_conns_take(c->conns, true, &writer);

        if (r < 0)
                return r;
        r = store_sync(writer);
        store_conns_put(c->conns, writer);
        return r;
}

static void checkpoint_done(Work *w, int r, void *userdata) {
        CheckpointWork *c = container_of(w, CheckpointWork, work);

        if (!work_cancelled(w)) {
                c->server->checkpointing = false;
                if (r < 0)
                        log_warning_errno_ratelimited(r, "Failed to checkpoint sbx.db, ignoring: %m");
        }
        store_conns_unref(c->conns);
        free(c);
}

static void checkpoint_later(void *userdata) {
        Server *s = userdata;
        CheckpointWork *c;

        if (s->checkpointing || !s->work)
                return;
        c = calloc(1, sizeof(*c));
        if (!c)
                return; /* the next commit asks again */
        *c = (CheckpointWork) { .work = { .run = checkpoint_run, .done = checkpoint_done }, .server = s,
                                .conns = store_conns_ref(s->store_conns) };
        s->checkpointing = true;
        work_submit(s->work, &s->close_lane, &c->work);
}

void server_checkpoint_off_loop(Server *s) {
        store_checkpoint_elsewhere(s->store, SBX_STORE_CHECKPOINT_PAGES, checkpoint_later, s);
}

void server_stop_work(Server *s) {
        work_lane_cancel(s->work, &s->close_lane);
        server_unwatch(s, &s->work_src);
        s->work = work_pool_free(s->work, SBX_WORK_STOP_WAIT_MS, s);
}

int server_dispatch(Server *s, int timeout_ms) {
        struct epoll_event events[SBX_EVENTS_PER_WAKEUP];
        int n = epoll_wait(s->epoll_fd, events, ELEMENTSOF(events), timeout_ms);

        if (n < 0)
                return -errno;
        /* Nothing is freed before the pass ends (clients_reap, sessions_reap):
         * a source unwatched by an earlier handler of the batch has fd -EBADF. */
        for (int i = 0; i < n; i++) {
                EventSource *src = events[i].data.ptr;
                if (src->fd >= 0)
                        src->dispatch(s, src, events[i].events);
        }
        return n;
}

int server_watch(Server *s, EventSource *src, int fd, uint32_t events) {
        src->fd = fd;
        if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &(struct epoll_event){ .events = events, .data.ptr = src }) < 0) {
                src->fd = -EBADF;
                return -errno;
        }
        return 0;
}

int server_rewatch(Server *s, EventSource *src, uint32_t events) {
        return RET_NERRNO(epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, src->fd,
                                    &(struct epoll_event){ .events = events, .data.ptr = src }));
}

void server_unwatch(Server *s, EventSource *src) {
        if (src->fd < 0)
                return;
        (void) epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, src->fd, NULL);
        src->fd = safe_close(src->fd);
}
