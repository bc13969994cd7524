#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/spare.h"
#include "data/layer.h"
#include "fake-sbxd.h"
#include "fd-util.h"
#include "log.h"
#include "msg.h"
#include "sbx-limits.h"

#define FAKE_MAX 64

static char root[64];
static FakeSession fakes[FAKE_MAX];
static size_t n_fakes;
static unsigned n_sandboxes;

int __wrap_session_spawn_begin(Spawner *sp, const SpawnParams *p, CgroupSession *cgroup, SpawnState *ret,
                               char *ret_errmsg, size_t errmsg_size);
int __wrap_session_spawn_continue(SpawnState *st, char *ret_errmsg, size_t errmsg_size);

int __wrap_session_spawn_begin(Spawner *sp, const SpawnParams *p, CgroupSession *cgroup, SpawnState *ret,
                               char *ret_errmsg, size_t errmsg_size) {
        FakeSession *f = &fakes[n_fakes++];
        char upper[128];
        int wsock[2], sync[2];

        assert_true(n_fakes <= FAKE_MAX);
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, wsock), 0);
        assert_int_equal(pipe2(sync, O_CLOEXEC | O_NONBLOCK), 0);
        snprintf(upper, sizeof(upper), "%s/upper-%s", root, p->session_id);
        assert_int_equal(mkdir(upper, 0755), 0);
        strlcpy(f->id, p->session_id, sizeof(f->id));
        f->worker = wsock[1];
        f->sync = sync[1];
        *ret = (SpawnState) {
                .sock = wsock[0],
                .sync = sync[0],
                .pidfd = -EBADF,
                .egress_fd = -EBADF,
                .tmpfs_fds = { -EBADF, -EBADF },
                .upper_fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
                .workspace_fd = open(upper, O_PATH | O_DIRECTORY | O_CLOEXEC),
                .cgroup = cgroup,
        };
        assert_true(ret->upper_fd >= 0 && ret->workspace_fd >= 0);
        return 0;
}

int __wrap_session_spawn_continue(SpawnState *st, char *ret_errmsg, size_t errmsg_size) {
        char step;
        pid_t pid;

        if (read(st->sync, &step, 1) != 1)
                return 1;
        switch (step) {
        case FAKE_PID:
                pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        /* Holds nothing of the test's: closing the worker's end is an EOF. */
                        (void) syscall(SYS_close_range, 3, ~0U, 0);
                        for (;;)
                                pause();
                }
                /* The only caller is session.c, with its session's SpawnState. */
                fake_session(container_of(st, WorkspaceSession, spawn)->id)->child = pid;
                st->pid = pid;
                st->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
                assert_true(st->pidfd >= 0);
                return 1;
        case FAKE_MAPPED:
                st->mapped = true;
                return 1;
        case FAKE_DONE:
                return 0;
        default:
                snprintf(ret_errmsg, errmsg_size, "the fake set-up failed");
                return -EIO;
        }
}

void fake_server_init(Server *s) {
        int r;

        log_set_level(LOG_WARNING);
        strcpy(root, "/tmp/sbx-test-unit-XXXXXX");
        assert_non_null(mkdtemp(root));
        n_fakes = 0;
        server_init(s);
        assert_true(asprintf(&s->cfg.state_dir, "%s/state", root) > 0);
        layer_limits_from_config(&s->cfg, &s->layer_limits);
        assert_true(asprintf(&s->cfg.run_dir, "%s/run", root) > 0);
        assert_true(asprintf(&s->image_dir, "%s/image", root) > 0);
        assert_int_equal(mkdir(s->cfg.state_dir, 0700), 0);
        s->state_fd = open(s->cfg.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(s->state_fd >= 0);
        assert_int_equal(server_open_state_dirs(s), 0);
        r = store_open(s->state_fd, &s->store);
        assert_int_equal(r, 0);
        assert_int_equal(index_cache_new(16, 1 << 20, &s->file_indexes), 0);
        s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        assert_true(s->epoll_fd >= 0);
        assert_int_equal(server_open_work(s), 0);
}

void fake_server_done(Server *s) {
        WorkspaceSession *ws;
        Sandbox *sb;

        TAILQ_FOREACH(sb, &s->sandboxes, link)
                work_lane_cancel(s->work, &sb->lane);
        server_stop_work(s);

        while ((ws = TAILQ_FIRST(&s->sessions)))
                session_destroy(s, ws);
        sessions_wait_ended(s, NULL);
        sessions_reap(s);
        clients_reap(s, true);
        while ((sb = TAILQ_FIRST(&s->sandboxes))) {
                TAILQ_REMOVE(&s->sandboxes, sb, link);
                assert_true(TAILQ_EMPTY(&sb->holds));
                safe_close(sb->layers_fd);
                safe_close(sb->dirfd);
                free(sb->layers_path);
                free(sb->source_dir);
                free(sb);
        }
        for (size_t i = 0; i < n_fakes; i++) {
                safe_close(fakes[i].worker);
                safe_close(fakes[i].sync);
                if (fakes[i].child > 0) {
                        (void) kill(fakes[i].child, SIGKILL);
                        (void) waitpid(fakes[i].child, NULL, 0);
                }
                fakes[i] = (FakeSession) {};
        }
        n_fakes = 0;
        server_close(s);
        assert_int_equal(tree_remove_at(AT_FDCWD, root), 0);
}

Sandbox *fake_sandbox(Server *s, const char *name, uid_t owner) {
        Sandbox *sb = calloc(1, sizeof(*sb));

        assert_non_null(sb);
        snprintf(sb->id, sizeof(sb->id), "sb-%016x", ++n_sandboxes);
        strlcpy(sb->name, name, sizeof(sb->name));
        sb->owner_uid = owner;
        sb->uid_base = 100000;
        sb->uid_count = 65536;
        sb->source_dir = strdup("/nowhere");
        sb->memory_bytes = SBX_MEMORY_DEFAULT;
        sb->pids_max = SBX_PIDS_DEFAULT;
        sb->cpu_weight = 100;
        sb->view_fd = -EBADF;
        TAILQ_INIT(&sb->holds);
        assert_int_equal(mkdirat(s->sandboxes_fd, sb->id, 0700), 0);
        sb->dirfd = openat(s->sandboxes_fd, sb->id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(mkdirat(sb->dirfd, "layers", 0711), 0);
        sb->layers_fd = openat(sb->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(sb->dirfd >= 0 && sb->layers_fd >= 0);
        assert_int_equal(mkdirat(sb->layers_fd, "0", 0755), 0);
        assert_true(asprintf(&sb->layers_path, "%s/sandboxes/%s/layers", s->cfg.state_dir, sb->id) > 0);
        {
                StoreSandbox rec = { .owner_uid = owner, .source_dir = sb->source_dir, .cpu_weight = 100 };
                strlcpy(rec.id, sb->id, sizeof(rec.id));
                strlcpy(rec.name, name, sizeof(rec.name));
                assert_int_equal(store_sandbox_insert(s->store, &rec, "original"), 0);
        }
        TAILQ_INSERT_TAIL(&s->sandboxes, sb, link);
        return sb;
}

Client *fake_client(Server *s, uid_t uid, int *ret_peer) {
        struct ucred cred = { .pid = getpid(), .uid = uid, .gid = uid };
        Client *c;
        int sv[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
        assert_int_equal(control_client_new(s, sv[0], &cred, &c), 0);
        *ret_peer = sv[1];
        return c;
}

/* The loop's tick, as sbxd.c runs it after each batch. */
static void fake_tick(Server *s) {
        commands_run_deadlines(s);
        spares_run_deadlines(s);
        sessions_reap(s);
        clients_reap(s, false);
}

void fake_pump(Server *s, int wait_ms) {
        while (server_dispatch(s, wait_ms) > 0)
                fake_tick(s);
        fake_tick(s);
}

void fake_pump_until_readable(Server *s, int fd) {
        for (int waited = 0; fake_nothing_to_read(fd); waited += 10) {
                assert_true(waited < 2000);
                fake_pump(s, 10);
        }
}

FakeSession *fake_session(const char *id) {
        for (size_t i = 0; i < n_fakes; i++)
                if (strcmp(fakes[i].id, id) == 0)
                        return &fakes[i];
        return NULL;
}

void fake_setup(Server *s, const char *id, const char *steps) {
        FakeSession *f = fake_session(id);

        assert_non_null(f);
        for (const char *p = steps; *p; p++) {
                assert_int_equal(write(f->sync, p, 1), 1);
                fake_pump(s, 10);
        }
}

void fake_worker_send(const char *id, Sbx__MsgType type, void *body) {
        FakeSession *f = fake_session(id);
        Sbx__Msg m;

        assert_non_null(f);
        msg_init(&m, type, body);
        assert_int_equal(wire_send(f->worker, &m, 0, NULL, 0), 0);
}

static void wait_readable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        assert_int_equal(poll(&p, 1, 2000), 1);
}

Sbx__Msg *fake_worker_recv(const char *id) {
        FakeSession *f = fake_session(id);
        Sbx__Msg *m = NULL;
        uint32_t seq;

        assert_non_null(f);
        wait_readable(f->worker);
        assert_int_equal(wire_recv(f->worker, &m, &seq, NULL, NULL), 0);
        return m;
}

Sbx__Msg *fake_reply(int peer, uint32_t *ret_seq) {
        Sbx__Msg *m = NULL;
        uint32_t seq;

        wait_readable(peer);
        assert_int_equal(wire_recv(peer, &m, &seq, NULL, NULL), 0);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_REPLY);
        if (ret_seq)
                *ret_seq = seq;
        return m;
}

bool fake_nothing_to_read(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        return poll(&p, 1, 0) == 0;
}

WorkspaceSession *fake_find(Server *s, const char *id) {
        WorkspaceSession *ws = TAILQ_FIRST(&s->sessions);

        while (ws && strcmp(ws->id, id) != 0)
                ws = TAILQ_NEXT(ws, link);
        return ws;
}

void fake_ready(Server *s, WorkspaceSession *ws) {
        Sbx__WorkerReady ready = SBX__WORKER_READY__INIT;
        char id[sizeof(ws->id)];

        strlcpy(id, ws->id, sizeof(id));
        fake_setup(s, id, "pmd");
        assert_int_equal(ws->state, SESSION_SPAWNING);
        fake_worker_send(id, SBX__MSG_TYPE__MSG_WORKER_READY, &ready);
        fake_pump(s, 10);
        assert_int_equal(ws->state, SESSION_READY);
}
