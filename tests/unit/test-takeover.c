/* Unit tests for supervisor/core/takeover.c against a fake worker
 * (tests/unit/fake-sbxd.h): the agent's request waits until the box is
 * handed back (its note) or takeover_max_seconds pass (expired); an attached
 * terminal is a pty command of the box's session (its size and TERM in the
 * exec), its output goes to the person's client as TERMINAL frames, keys and
 * sizes go to the worker, and it ends with the shell or the takeover. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/session.h"
#include "core/takeover.h"
#include "fake-sbxd.h"
#include "fd-util.h"
#include "msg.h"
#include "sbx-limits.h"

typedef struct Fixture {
        Server s;
        Sandbox *sb;
        WorkspaceSession *ws;
        Client *agent, *person;
        int agent_peer, person_peer;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));
        char err[256] = "";

        fake_server_init(&f->s);
        f->s.cfg.session_spares = 0;
        f->sb = fake_sandbox(&f->s, "box", 1000);
        f->agent = fake_client(&f->s, 1000, &f->agent_peer);
        f->person = fake_client(&f->s, 1000, &f->person_peer);
        assert_int_equal(session_new(&f->s, f->sb, false, false, &f->ws, err, sizeof(err)), 0);
        fake_ready(&f->s, f->ws);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        fake_server_done(&f->s);
        close(f->agent_peer);
        close(f->person_peer);
        free(f);
        return 0;
}

static bool env_has(const Sbx__SupervisorExec *e, const char *kv) {
        for (size_t i = 0; i < e->n_env; i++)
                if (strcmp(e->env[i], kv) == 0)
                        return true;
        return false;
}

static bool env_has_key(const Sbx__SupervisorExec *e, const char *key) {
        for (size_t i = 0; i < e->n_env; i++)
                if (strncmp(e->env[i], key, strlen(key)) == 0)
                        return true;
        return false;
}

static Command *shell(Fixture *f, TerminalSize size) {
        Command *c = NULL;

        assert_int_equal(command_start_pty(&f->s, f->ws, TAKEOVER_SHELL, 60000, "/work", NULL, 0, size, &c), 0);
        return c;
}

/* Take box-1 over and attach a terminal of 30x100 (seq 9): the shell's command number. */
static uint32_t take_and_attach(Fixture *f) {
        TerminalSize size = { 30, 100 };
        Takeover *t;
        Sbx__Msg *m;
        uint32_t number;

        assert_int_equal(takeover_begin(&f->s, f->agent, 5, "box-1", NULL, NULL, 1000, "log in, please", false), 0);
        assert_int_equal(takeover_begin(&f->s, f->agent, 6, "box-1", NULL, NULL, 1000, "again", false), -EBUSY);
        assert_non_null(takeover_find(&f->s, "box-1"));
        assert_null(takeover_find(&f->s, "box-2"));
        t = takeover_find(&f->s, "box-1");
        assert_non_null(t);
        assert_false(takeover_attached(t));
        assert_true(takeover_left_ms(t) > 1000);
        assert_int_equal(takeover_attach(&f->s, t, shell(f, size), f->person, 9), 0);
        assert_true(takeover_attached(t));
        assert_int_equal(takeover_attach(&f->s, t, t->shell, f->person, 10), -EBUSY);
        fake_pump(&f->s, 10);
        m = fake_worker_recv(f->ws->id);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC);
        assert_true(m->supervisor_exec->pty);
        assert_int_equal(m->supervisor_exec->rows, 30);
        assert_int_equal(m->supervisor_exec->cols, 100);
        assert_string_equal(m->supervisor_exec->cwd, "/work");
        assert_true(env_has(m->supervisor_exec, "TERM=" TERMINAL_TERM));
        assert_false(env_has(m->supervisor_exec, "TERM=dumb"));
        assert_false(env_has_key(m->supervisor_exec, "NO_COLOR="));
        assert_false(m->supervisor_exec->separate_streams);
        number = m->supervisor_exec->command;
        sbx__msg__free_unpacked(m, NULL);
        return number;
}

static Sbx__Terminal *terminal_frame(Fixture *f, Sbx__Msg **ret) {
        struct pollfd p = { .fd = f->person_peer, .events = POLLIN };
        uint32_t seq = 0;
        Sbx__Msg *m = NULL;

        assert_int_equal(poll(&p, 1, 2000), 1);
        assert_int_equal(wire_recv(f->person_peer, &m, &seq, NULL, NULL), 0);

        assert_int_equal(seq, 9);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL);
        *ret = m;
        return m->terminal;
}

static void expect_reply(int peer, uint32_t want_seq, int err) {
        uint32_t seq = 0;
        Sbx__Msg *m = fake_reply(peer, &seq);

        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_REPLY);
        assert_int_equal(seq, want_seq);
        assert_int_equal(m->reply->err, err);
        sbx__msg__free_unpacked(m, NULL);
}

static void test_terminal_relay_and_return(void **state) {
        Fixture *f = *state;
        uint32_t number = take_and_attach(f);
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;
        TerminalSize bigger = { 40, 120 };
        Sbx__Terminal *t;
        Sbx__Msg *m;
        uint32_t seq = 0;

        /* Output of the shell reaches the person, as it came. */
        out.command = number;
        out.stream = SBX__STREAM__STREAM_MERGED;
        out.data.data = (uint8_t *) "$ ";
        out.data.len = 2;
        fake_worker_send(f->ws->id, SBX__MSG_TYPE__MSG_WORKER_OUTPUT, &out);
        fake_pump(&f->s, 10);
        t = terminal_frame(f, &m);
        assert_false(t->ended);
        assert_int_equal(t->data.len, 2);
        assert_memory_equal(t->data.data, "$ ", 2);
        sbx__msg__free_unpacked(m, NULL);

        /* Keys and a size go to the worker; keys of no terminal are refused. */
        assert_int_equal(takeover_input(&f->s, f->person, 9, "\x03", 1, (TerminalSize) {}), 0);
        assert_int_equal(takeover_input(&f->s, f->person, 9, NULL, 0, bigger), 0);
        assert_int_equal(takeover_input(&f->s, f->person, 8, "x", 1, (TerminalSize) {}), -ENOENT);
        assert_int_equal(takeover_input(&f->s, f->agent, 9, "x", 1, (TerminalSize) {}), -ENOENT);
        fake_pump(&f->s, 10);
        m = fake_worker_recv(f->ws->id);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN);
        assert_int_equal(m->supervisor_stdin->command, number);
        assert_int_equal(m->supervisor_stdin->data.len, 1);
        assert_int_equal(m->supervisor_stdin->data.data[0], 3);
        assert_false(m->supervisor_stdin->close);
        sbx__msg__free_unpacked(m, NULL);
        m = fake_worker_recv(f->ws->id);
        assert_int_equal(m->supervisor_stdin->rows, 40);
        assert_int_equal(m->supervisor_stdin->cols, 120);
        assert_int_equal(m->supervisor_stdin->data.len, 0);
        sbx__msg__free_unpacked(m, NULL);

        /* Handed back: the agent gets the note, the terminal its end, the shell is killed. */
        takeover_return(&f->s, takeover_find(&f->s, "box-1"), "done, logged in");
        fake_pump(&f->s, 10);
        assert_null(takeover_find(&f->s, "box-1"));
        assert_null(takeover_find(&f->s, "box-1"));
        m = fake_reply(f->agent_peer, &seq);
        assert_int_equal(seq, 5);
        assert_int_equal(m->reply->err, 0);
        assert_int_equal(m->reply->body_case, SBX__REPLY__BODY_TAKEOVER);
        assert_string_equal(m->reply->takeover->note, "done, logged in");
        assert_false(m->reply->takeover->expired);
        sbx__msg__free_unpacked(m, NULL);
        t = terminal_frame(f, &m);
        assert_true(t->ended);
        assert_string_equal(t->reason, "returned");
        sbx__msg__free_unpacked(m, NULL);
        expect_reply(f->person_peer, 9, 0);
        m = fake_worker_recv(f->ws->id);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_SUPERVISOR_SIGNAL);
        assert_int_equal(m->supervisor_signal->signal, SIGKILL);
        sbx__msg__free_unpacked(m, NULL);
}

static void person_sends(Fixture *f, Sbx__MsgType type, void *body, uint32_t seq) {
        Sbx__Msg m;

        msg_init(&m, type, body);
        assert_int_equal(wire_send(f->person_peer, &m, seq, NULL, 0), 0);
        fake_pump(&f->s, 10);
}

/* TERMINAL frames through the request table: keys and sizes have no answer;
 * frames over the bounds are refused by the table before any handler. */
static void test_terminal_frames(void **state) {
        Fixture *f = *state;
        Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
        Sbx__Terminal keys = SBX__TERMINAL__INIT, big = SBX__TERMINAL__INIT, wide = SBX__TERMINAL__INIT,
                      half = SBX__TERMINAL__INIT;
        uint8_t buf[SBX_TERMINAL_INPUT_MAX + 1] = { 'x' };
        uint32_t number;
        Sbx__Msg *m;

        person_sends(f, SBX__MSG_TYPE__MSG_CLIENT_HELLO, &hello, 1);
        expect_reply(f->person_peer, 1, 0);
        number = take_and_attach(f);
        keys.data.data = (uint8_t *) "ls\r";
        keys.data.len = 3;
        person_sends(f, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, &keys, 9);
        assert_true(fake_nothing_to_read(f->person_peer));
        m = fake_worker_recv(f->ws->id);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN);
        assert_int_equal(m->supervisor_stdin->command, number);
        assert_memory_equal(m->supervisor_stdin->data.data, "ls\r", 3);
        sbx__msg__free_unpacked(m, NULL);

        big.data.data = buf;
        big.data.len = sizeof(buf);
        person_sends(f, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, &big, 9);
        expect_reply(f->person_peer, 9, -E2BIG);
        wide.rows = 24;
        wide.cols = SBX_TERMINAL_SIZE_MAX + 1;
        person_sends(f, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, &wide, 9);
        expect_reply(f->person_peer, 9, -EINVAL);
        half.rows = 24;
        person_sends(f, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, &half, 9);
        expect_reply(f->person_peer, 9, -EINVAL);
        /* Keys for no terminal of this client: dropped, no answer. */
        person_sends(f, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, &keys, 77);
        assert_true(fake_nothing_to_read(f->person_peer));
        assert_true(fake_nothing_to_read(fake_session(f->ws->id)->worker));
}

/* The shell's exit ends the terminal, not the takeover. */
static void test_shell_exit(void **state) {
        Fixture *f = *state;
        Sbx__WorkerExited ex = SBX__WORKER_EXITED__INIT;
        Sbx__Terminal *t;
        Sbx__Msg *m;

        ex.command = take_and_attach(f);
        ex.exit_code = 7;
        fake_worker_send(f->ws->id, SBX__MSG_TYPE__MSG_WORKER_EXITED, &ex);
        fake_pump(&f->s, 10);
        t = terminal_frame(f, &m);
        assert_true(t->ended);
        assert_string_equal(t->reason, "");
        assert_int_equal(t->exit_code, 7);
        sbx__msg__free_unpacked(m, NULL);
        expect_reply(f->person_peer, 9, 0);
        assert_non_null(takeover_find(&f->s, "box-1"));
        assert_null(takeover_find(&f->s, "box-1")->shell);
        assert_true(fake_nothing_to_read(f->agent_peer));
        /* A new terminal may be attached. */
        assert_int_equal(takeover_attach(&f->s, takeover_find(&f->s, "box-1"), shell(f, (TerminalSize) { 24, 80 }),
                                         f->person, 11), 0);
}

/* Nobody hands it back: after takeover_max_seconds the agent's answer says expired. */
static void test_expiry(void **state) {
        Fixture *f = *state;
        uint32_t seq = 0;
        Sbx__Msg *m;

        f->s.cfg.takeover_max_seconds = 1;
        assert_int_equal(takeover_begin(&f->s, f->agent, 5, "box-1", NULL, NULL, 1000, "", false), 0);
        fake_pump(&f->s, 10);
        assert_true(fake_nothing_to_read(f->agent_peer));
        assert_true(takeovers_next_deadline(&f->s) != ~0ull);
        usleep(1000 * 1000);
        takeovers_run_deadlines(&f->s);         /* sbxd's tick, which fake_pump's does not hold */
        fake_pump(&f->s, 10);
        m = fake_reply(f->agent_peer, &seq);
        assert_int_equal(seq, 5);
        assert_int_equal(m->reply->body_case, SBX__REPLY__BODY_TAKEOVER);
        assert_true(m->reply->takeover->expired);
        assert_string_equal(m->reply->takeover->note, "");
        assert_true(m->reply->takeover->seconds >= 1.0);
        sbx__msg__free_unpacked(m, NULL);
        assert_null(takeover_find(&f->s, "box-1"));
        assert_true(takeovers_next_deadline(&f->s) == ~0ull);
}

/* The agent cancels (or goes): the takeover ends and the terminal says why. */
static void test_agent_cancels(void **state) {
        Fixture *f = *state;
        Sbx__Terminal *t;
        Sbx__Msg *m;

        (void) take_and_attach(f);
        client_cancel(&f->s, f->agent, 5);
        fake_pump(&f->s, 10);
        assert_null(takeover_find(&f->s, "box-1"));
        t = terminal_frame(f, &m);
        assert_true(t->ended);
        assert_string_equal(t->reason, "the agent stopped waiting");
        sbx__msg__free_unpacked(m, NULL);
        expect_reply(f->person_peer, 9, 0);
        assert_true(fake_nothing_to_read(f->agent_peer));
}

/* The box goes: the agent is told why, with an error. */
static void test_box_gone(void **state) {
        Fixture *f = *state;

        assert_int_equal(takeover_begin(&f->s, f->agent, 5, "box-1", NULL, NULL, 1000, "n", false), 0);
        takeover_box_gone(&f->s, "box-1", "box stopped");
        fake_pump(&f->s, 10);
        expect_reply(f->agent_peer, 5, -ECONNABORTED);
        assert_null(takeover_find(&f->s, "box-1"));
}

/* A call with a progressToken hears every SBX_TAKEOVER_PROGRESS_S that it waits; one without, nothing. */
static void test_progress(void **state) {
        Fixture *f = *state;
        uint32_t seq = 0;
        Sbx__Msg *m = NULL;

        assert_int_equal(takeover_begin(&f->s, f->agent, 5, "box-1", NULL, NULL, 1000, "n", true), 0);
        assert_int_equal(takeover_begin(&f->s, f->person, 6, "box-2", NULL, NULL, 1000, "n", false), 0);
        assert_true(takeovers_next_deadline(&f->s) <= takeover_find(&f->s, "box-1")->progress_usec);
        takeover_find(&f->s, "box-1")->progress_usec = 0;     /* as if SBX_TAKEOVER_PROGRESS_S passed */
        takeover_find(&f->s, "box-2")->progress_usec = ~0ull;
        takeovers_run_deadlines(&f->s);
        fake_pump(&f->s, 10);
        assert_int_equal(wire_recv(f->agent_peer, &m, &seq, NULL, NULL), 0);
        assert_int_equal(seq, 5);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_PROGRESS);
        assert_int_equal(m->progress->progress, 1);
        assert_non_null(strstr(m->progress->message, "waiting for a person"));
        sbx__msg__free_unpacked(m, NULL);
        assert_true(takeover_find(&f->s, "box-1")->progress_usec > now_usec());
        assert_true(fake_nothing_to_read(f->agent_peer));
        assert_true(fake_nothing_to_read(f->person_peer));
}

/* Who may attach and return; the box's state is takeover meanwhile, ready
 * after; its capability is new digits after (the takeover's URL is dead). */
static void test_permitted(void **state) {
        Fixture *f = *state;
        BoxState st = BOX_READY;
        char cap[SBX_TAKEOVER_CAP_HEX + 1], before[sizeof(cap)];
        Takeover *t;

        assert_int_equal(random_hex(cap, SBX_TAKEOVER_CAP_HEX), 0);
        memcpy(before, cap, sizeof(cap));
        assert_int_equal(takeover_begin(&f->s, f->agent, 5, "box-1", &st, cap, 1000, "n", false), 0);
        assert_int_equal(st, BOX_TAKEOVER);
        t = takeover_find(&f->s, "box-1");
        assert_true(takeover_permitted(t, 0));
        assert_true(takeover_permitted(t, 1000));
        assert_false(takeover_permitted(t, 2000));
        assert_string_equal(cap, before);
        takeover_return(&f->s, t, "");
        assert_int_equal(st, BOX_READY);
        assert_int_equal(strlen(cap), SBX_TAKEOVER_CAP_HEX);
        assert_string_not_equal(cap, before);
}

int main(void) {
#define T(test) cmocka_unit_test_setup_teardown(test, setup, teardown)
        const struct CMUnitTest tests[] = {
                T(test_terminal_relay_and_return), T(test_terminal_frames), T(test_shell_exit), T(test_expiry), T(test_agent_cancels),
                T(test_box_gone), T(test_progress), T(test_permitted),
        };
#undef T
        return cmocka_run_group_tests(tests, NULL, NULL);
}
