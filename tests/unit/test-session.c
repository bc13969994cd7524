/* Unit tests for supervisor/core/session.c: the session state machine
 * driven by a fake spawner and a fake worker (tests/unit/fake-sbxd.h):
 * set-up steps, the worker message table (states, types, command numbers,
 * field bounds), a command from start to its answer, sessions freed only at the
 * end of a loop pass, and one epoll batch holding two events of a session
 * that the first one ends. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/secret.h"
#include "core/session.h"
#include "fake-sbxd.h"
#include "fd-util.h"
#include "msg.h"
#include "sbx-limits.h"

typedef struct Fixture {
        Server s;
        Sandbox *sb;
        Client *client;
        int peer;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));

        fake_server_init(&f->s);
        f->s.cfg.session_spares = 0;
        f->sb = fake_sandbox(&f->s, "box", 1000);
        f->client = fake_client(&f->s, 1000, &f->peer);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        fake_server_done(&f->s);
        close(f->peer);
        free(f);
        return 0;
}

static WorkspaceSession *new_session(Fixture *f, bool automatic) {
        WorkspaceSession *ws = NULL;
        char err[256] = "";

        assert_int_equal(session_new(&f->s, f->sb, automatic, true, &ws, err, sizeof(err)), 0);
        assert_non_null(ws);
        assert_int_equal(ws->state, SESSION_SETUP);
        return ws;
}

static void test_setup_then_ready(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws = new_session(f, false);
        Sbx__WorkerReady ready = SBX__WORKER_READY__INIT;
        uint32_t seq = 0;
        Sbx__Msg *m;

        session_answer_when_ready(ws, f->client, 7);
        fake_setup(&f->s, ws->id, "p");
        assert_int_equal(ws->state, SESSION_SETUP);
        assert_true(ws->pid > 0);
        fake_setup(&f->s, ws->id, "m");
        assert_int_equal(ws->state, SESSION_SETUP);
        assert_true(fake_nothing_to_read(f->peer));
        fake_setup(&f->s, ws->id, "d");
        assert_int_equal(ws->state, SESSION_SPAWNING);
        assert_true(ws->upper_fd >= 0 && ws->workspace_fd >= 0);
        fake_worker_send(ws->id, SBX__MSG_TYPE__MSG_WORKER_READY, &ready);
        fake_pump(&f->s, 10);
        assert_int_equal(ws->state, SESSION_READY);
        /* The creator learns it can use the session. */
        m = fake_reply(f->peer, &seq);
        assert_int_equal(seq, 7);
        assert_int_equal(m->reply->err, 0);
        assert_int_equal(m->reply->body_case, SBX__REPLY__BODY_SESSION);
        assert_string_equal(m->reply->session->state, "live");
        assert_string_equal(m->reply->session->workspace_session, ws->id);
        sbx__msg__free_unpacked(m, NULL);
}

/* A worker message out of place stops a managed session (its changes stay). */
static void lost(Fixture *f, WorkspaceSession *ws, Sbx__MsgType type, void *body) {
        fake_worker_send(ws->id, type, body);
        fake_pump(&f->s, 10);
        assert_int_equal(ws->state, SESSION_STOPPED);
        assert_true(ws->sock_src.fd < 0);
        assert_true(ws->pidfd_src.fd < 0);
        assert_ptr_equal(fake_find(&f->s, ws->id), ws);
}

static void test_ready_before_mapped(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws = new_session(f, false);
        Sbx__WorkerReady ready = SBX__WORKER_READY__INIT;
        Sbx__Msg *m;

        session_answer_when_ready(ws, f->client, 3);
        fake_setup(&f->s, ws->id, "p");
        lost(f, ws, SBX__MSG_TYPE__MSG_WORKER_READY, &ready);
        m = fake_reply(f->peer, NULL);
        assert_int_equal(m->reply->err, -ECANCELED);
        assert_non_null(strstr(m->reply->errmsg, "stopped before it was ready"));
        sbx__msg__free_unpacked(m, NULL);
}

static void test_message_in_wrong_state(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws = new_session(f, false);
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;

        fake_setup(&f->s, ws->id, "pmd");
        assert_int_equal(ws->state, SESSION_SPAWNING);
        out.command = 1;
        lost(f, ws, SBX__MSG_TYPE__MSG_WORKER_OUTPUT, &out);
}

/* A ready session refuses a type no worker sends, the exit of a command it
 * does not run, and the bounds of the table: a signal no process can have,
 * output over a chunk. */
static void test_refused_when_ready(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws[4];
        Sbx__SupervisorSignal sg = SBX__SUPERVISOR_SIGNAL__INIT;
        Sbx__WorkerExited unknown = SBX__WORKER_EXITED__INIT, bad = SBX__WORKER_EXITED__INIT;
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;
        static uint8_t big[SBX_OUTPUT_CHUNK_MAX + 1];
        Command *c[4];

        for (size_t i = 0; i < ELEMENTSOF(ws); i++) {
                ws[i] = new_session(f, false);
                fake_ready(&f->s, ws[i]);
                assert_int_equal(command_start(&f->s, ws[i], "sleep 1", 10000, false, &c[i]), 0);
        }
        lost(f, ws[0], SBX__MSG_TYPE__MSG_SUPERVISOR_SIGNAL, &sg);
        unknown.command = c[1]->number + 5;
        lost(f, ws[1], SBX__MSG_TYPE__MSG_WORKER_EXITED, &unknown);
        bad.command = c[2]->number;
        bad.signal = 99;
        lost(f, ws[2], SBX__MSG_TYPE__MSG_WORKER_EXITED, &bad);
        out.command = c[3]->number;
        out.data.data = big;
        out.data.len = sizeof(big);
        lost(f, ws[3], SBX__MSG_TYPE__MSG_WORKER_OUTPUT, &out);
}

static void test_command_to_answer(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws = new_session(f, true);
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;
        Sbx__WorkerExited ex = SBX__WORKER_EXITED__INIT;
        char id[sizeof(ws->id)], cmd_id[40];
        StoreCommand rec;
        uint32_t seq = 0;
        Command *cmd;
        Sbx__Msg *m;

        strlcpy(id, ws->id, sizeof(id));
        fake_ready(&f->s, ws);
        assert_int_equal(command_start(&f->s, ws, "echo hi", 10000, false, &cmd), 0);
        strlcpy(cmd_id, cmd->rec.id, sizeof(cmd_id));
        assert_int_equal(command_add_waiter(&f->s, cmd, f->client, 9, now_usec(), 10000), 0);
        m = fake_worker_recv(id);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC);
        assert_int_equal(m->supervisor_exec->command, cmd->number);
        assert_string_equal(m->supervisor_exec->cmd, "echo hi");
        assert_string_equal(m->supervisor_exec->cwd, "/workspace");
        sbx__msg__free_unpacked(m, NULL);

        out.command = ex.command = cmd->number;
        out.data.data = (uint8_t *) "hi\n";
        out.data.len = 3;
        fake_worker_send(id, SBX__MSG_TYPE__MSG_WORKER_OUTPUT, &out);
        fake_worker_send(id, SBX__MSG_TYPE__MSG_WORKER_EXITED, &ex);
        /* Its publication (of nothing) runs on the work pool: the answer comes in a later pass. */
        fake_pump_until_readable(&f->s, f->peer);

        /* The automatic session published nothing and ended with its command. */
        m = fake_reply(f->peer, &seq);
        assert_int_equal(seq, 9);
        assert_int_equal(m->reply->body_case, SBX__REPLY__BODY_COMMAND);
        assert_string_equal(m->reply->command->status, "ok");
        assert_true(m->reply->command->has_exit_code);
        assert_int_equal(m->reply->command->exit_code, 0);
        assert_int_equal(m->reply->command->total_lines, 1);
        assert_memory_equal(m->reply->command->output.data, "hi\n", 3);
        assert_non_null(m->reply->command->publication);
        assert_false(m->reply->command->publication->published);
        sbx__msg__free_unpacked(m, NULL);
        assert_null(fake_find(&f->s, id));
        assert_null(command_find_live(&f->s, cmd_id));
        assert_int_equal(f->sb->live_sessions, 0);
        assert_int_equal(store_command_get(f->s.store, cmd_id, &rec), 0);
        assert_string_equal(rec.status, "ok");
        assert_string_equal(rec.end_reason, "exit");
}

/* An ended session waits for its PID 1, then for the end of the loop pass. */
static void test_freed_after_the_pass(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws = new_session(f, false);

        fake_ready(&f->s, ws);
        session_destroy(&f->s, ws);
        /* Still there to look at: marked dead, out of the live list, waiting for its PID 1. */
        assert_int_equal(ws->state, SESSION_DEAD);
        assert_null(fake_find(&f->s, ws->id));
        assert_ptr_equal(TAILQ_FIRST(&f->s.ending), ws);
        assert_true(ws->sock_src.fd < 0 && ws->setup_src.fd < 0);
        assert_true(ws->pidfd_src.fd >= 0);
        assert_int_equal(f->sb->live_sessions, 0);
        assert_false(TAILQ_EMPTY(&f->sb->holds));
        fake_pump(&f->s, 200);
        assert_true(TAILQ_EMPTY(&f->s.ending));
        assert_true(TAILQ_EMPTY(&f->s.dead));
        assert_true(TAILQ_EMPTY(&f->sb->holds));
}

/* The loop serves a whole batch: here the worker's socket and its pidfd are
 * ready together, and whichever comes first ends the session. */
static void test_one_batch_two_events(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws = new_session(f, true);
        FakeSession *fk;
        struct pollfd p;

        fake_ready(&f->s, ws);
        ws->spare = true;
        f->sb->spares++;
        fk = fake_session(ws->id);
        assert_int_equal(send(fk->worker, "x", 1, 0), 1);
        assert_int_equal(kill(fk->child, SIGKILL), 0);
        p = (struct pollfd) { .fd = ws->pidfd_src.fd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 2000), 1);
        fake_pump(&f->s, 200);
        assert_int_equal(f->sb->live_sessions, 0);
        assert_int_equal(f->sb->spares, 0);
        assert_true(TAILQ_EMPTY(&f->s.sessions));
        assert_true(TAILQ_EMPTY(&f->s.ending));
        assert_true(TAILQ_EMPTY(&f->s.dead));
}

static void test_setup_fails(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws = new_session(f, true);
        char id[sizeof(ws->id)];
        Command *cmd;
        Sbx__Msg *m;

        strlcpy(id, ws->id, sizeof(id));
        /* Started while the session is set up: it waits for READY. */
        assert_int_equal(command_start(&f->s, ws, "true", 10000, false, &cmd), 0);
        assert_false(cmd->sent);
        assert_int_equal(command_add_waiter(&f->s, cmd, f->client, 4, now_usec(), 10000), 0);
        fake_setup(&f->s, id, "pf");
        m = fake_reply(f->peer, NULL);
        assert_string_equal(m->reply->command->status, "error");
        assert_int_equal(m->reply->command->exit_code, 127);
        assert_non_null(memmem(m->reply->command->output.data, m->reply->command->output.len,
                               "cannot start the workspace session: the fake set-up failed", 58));
        sbx__msg__free_unpacked(m, NULL);
        assert_null(fake_find(&f->s, id));
}

/* A box's secrets (core/secret.h): in the command's environment, and never
 * in what is kept of its output, also when the worker's chunks split a value. */
static void test_secrets_injected_and_redacted(void **state) {
        static const char *const names[] = { "TOKEN", "KEY" };
        static const char *const chunks[] = { "pre s3cr", "3t-va", "lue and sk-", "1234\nend s3cr" };
        Fixture *f = *state;
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;
        Sbx__WorkerExited ex = SBX__WORKER_EXITED__INIT;
        const char *want = "pre [secret:TOKEN] and [secret:KEY]\nend s3cr\n"; /* the transcript ends the last line */
        char unknown[SBX_SECRET_NAME_MAX + 1] = "", id[40];
        const char *const wrong[] = { "TOKEN", "NOPE" };
        WorkspaceSession *ws;
        Secrets *x = NULL;
        uint32_t seq = 0;
        Command *cmd;
        Sbx__Msg *m;
        size_t found = 0;

        assert_int_equal(secret_set(&f->s, 1000, "TOKEN", "s3cr3t-value", 12), 0);
        assert_int_equal(secret_set(&f->s, 1000, "KEY", "sk-1234", 7), 0);
        assert_int_equal(secret_set(&f->s, 1001, "OTHER", "not-yours", 9), 0);
        assert_int_equal(secrets_load(&f->s, 1000, wrong, 2, &x, unknown), -ENOENT);
        assert_string_equal(unknown, "NOPE");
        assert_int_equal(secrets_load(&f->s, 1000, (const char *const[]) { "OTHER" }, 1, &x, unknown), -ENOENT);
        assert_int_equal(secrets_load(&f->s, 1000, names, 2, &f->sb->secrets, unknown), 0);

        ws = new_session(f, true);
        strlcpy(id, ws->id, sizeof(id));
        fake_ready(&f->s, ws);
        assert_int_equal(command_start(&f->s, ws, "echo $TOKEN", 10000, false, &cmd), 0);
        assert_int_equal(command_add_waiter(&f->s, cmd, f->client, 9, now_usec(), 10000), 0);
        m = fake_worker_recv(id);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC);
        for (size_t i = 0; i < m->supervisor_exec->n_env; i++)
                found += !strcmp(m->supervisor_exec->env[i], "TOKEN=s3cr3t-value") ||
                         !strcmp(m->supervisor_exec->env[i], "KEY=sk-1234");
        assert_int_equal(found, 2);
        sbx__msg__free_unpacked(m, NULL);

        out.command = ex.command = cmd->number;
        for (size_t i = 0; i < ELEMENTSOF(chunks); i++) {
                out.data.data = (uint8_t *) chunks[i];
                out.data.len = strlen(chunks[i]);
                fake_worker_send(id, SBX__MSG_TYPE__MSG_WORKER_OUTPUT, &out);
                fake_pump(&f->s, 0);
        }
        fake_worker_send(id, SBX__MSG_TYPE__MSG_WORKER_EXITED, &ex);
        fake_pump(&f->s, 10);
        /* The held-back "s3cr" (no whole value) comes out at the end. */
        m = fake_reply(f->peer, &seq);
        assert_int_equal(m->reply->body_case, SBX__REPLY__BODY_COMMAND);
        assert_int_equal(m->reply->command->output.len, strlen(want));
        assert_memory_equal(m->reply->command->output.data, want, strlen(want));
        sbx__msg__free_unpacked(m, NULL);
}

#define T(test) cmocka_unit_test_setup_teardown(test, setup, teardown)

int main(void) {
        const struct CMUnitTest tests[] = {
                T(test_setup_then_ready), T(test_ready_before_mapped), T(test_message_in_wrong_state),
                T(test_refused_when_ready), T(test_command_to_answer), T(test_freed_after_the_pass),
                T(test_one_batch_two_events), T(test_setup_fails), T(test_secrets_injected_and_redacted),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
