/* Unit tests for supervisor/core/spare.c: the pool of spare automatic
 * sessions, with the fake spawner of tests/unit/fake-sbxd.h. Spares are
 * made by the loop's tick after an automatic session ended without
 * publishing, handed out only while current, dropped when a publication made
 * them stale or they idled, and give way to sessions someone asked for. */
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

#include "core/spare.h"
#include "fake-sbxd.h"
#include "fd-util.h"
#include "sbx-limits.h"

typedef struct Fixture {
        Server s;
        Sandbox *sb;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));

        fake_server_init(&f->s);
        f->s.cfg.session_spares = 2;
        f->sb = fake_sandbox(&f->s, "box", 1000);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        fake_server_done(&f->s);
        free(f);
        return 0;
}

static unsigned spares_of(Server *s, const Sandbox *sb) {
        WorkspaceSession *ws;
        unsigned n = 0;

        TAILQ_FOREACH(ws, &s->sessions, link)
                n += ws->sandbox == sb && ws->spare;
        return n;
}

typedef struct Finalized {
        bool done;
        int r;
        bool published;
} Finalized;

static void finalized(Server *s, WorkspaceSession *ws, int r, PublishResult *res, void *userdata) {
        Finalized *f = userdata;

        f->done = true;
        f->r = r;
        f->published = res->published;
        publish_result_done(res);
}

/* An automatic session that ends without publishing asks for spares. */
static void end_read_only_session(Fixture *f) {
        WorkspaceSession *ws;
        Finalized fin = {};
        char err[256];

        assert_int_equal(session_new(&f->s, f->sb, true, true, &ws, err, sizeof(err)), 0);
        fake_ready(&f->s, ws);
        assert_int_equal(session_finalize(&f->s, ws, true, false, finalized, &fin), 0);
        /* Its publication (of nothing) runs off the loop; collect it, without the loop's tick. */
        for (int i = 0; i < 200 && !fin.done; i++) {
                struct pollfd pfd = { .fd = work_pool_fd(f->s.work), .events = POLLIN };
                (void) poll(&pfd, 1, 10);
                work_pool_collect(f->s.work, &f->s);
        }
        assert_true(fin.done);
        assert_int_equal(fin.r, 0);
        assert_false(fin.published);
        /* Not from inside the session's end: the tick makes them. */
        assert_true(f->sb->refill_spares);
        assert_int_equal(spares_of(&f->s, f->sb), 0);
        spares_run_deadlines(&f->s);
        assert_false(f->sb->refill_spares);
}

static void test_refilled_by_the_tick(void **state) {
        Fixture *f = *state;

        end_read_only_session(f);
        assert_int_equal(spares_of(&f->s, f->sb), 2);
        assert_int_equal(f->sb->spares, 2);
        assert_int_equal(f->sb->live_sessions, 2);
        /* Another tick makes no more. */
        spares_run_deadlines(&f->s);
        assert_int_equal(spares_of(&f->s, f->sb), 2);
}

static void test_take_current(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws;

        end_read_only_session(f);
        ws = spare_take(&f->s, f->sb);
        assert_non_null(ws);
        assert_false(ws->spare);
        assert_true(ws->automatic);
        assert_int_equal(f->sb->spares, 1);
        assert_int_equal(spares_of(&f->s, f->sb), 1);
        /* A session someone has now is none of the pool's business. */
        assert_ptr_not_equal(spare_take(&f->s, f->sb), ws);
}

static void test_stale_after_a_publication(void **state) {
        Fixture *f = *state;

        end_read_only_session(f);
        /* What a publication does to the sandbox: its snapshot moved on. */
        f->sb->top_layer++;
        assert_null(spare_take(&f->s, f->sb));
        assert_int_equal(f->sb->spares, 2);
        spares_run_deadlines(&f->s);
        assert_int_equal(spares_of(&f->s, f->sb), 0);
        assert_int_equal(f->sb->spares, 0);
        assert_int_equal(f->sb->live_sessions, 0);
        fake_pump(&f->s, 100);
        assert_true(TAILQ_EMPTY(&f->s.ending));
}

static void test_idle_spares_go(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws;
        unsigned long long next;

        end_read_only_session(f);
        next = spares_next_deadline(&f->s);
        assert_true(next > now_usec() && next <= now_usec() + f->s.cfg.spare_idle_seconds * 1000000ull);
        ws = TAILQ_FIRST(&f->s.sessions);
        ws->spare_until_usec = now_usec() - 1;
        spares_run_deadlines(&f->s);
        assert_int_equal(spares_of(&f->s, f->sb), 1);
        assert_int_equal(f->sb->spares, 1);
}

static void test_room_for_a_real_session(void **state) {
        Fixture *f = *state;
        Sandbox *other = fake_sandbox(&f->s, "other", 1000);
        unsigned real = SBX_MAX_SESSIONS_PER_SANDBOX - 2;

        end_read_only_session(f);
        /* Counted as if the sandbox held that many more sessions: one more fills it. */
        f->sb->live_sessions += real;
        assert_int_equal(f->sb->live_sessions, SBX_MAX_SESSIONS_PER_SANDBOX);
        spare_make_room(&f->s, other);
        assert_int_equal(f->sb->spares, 2); /* another sandbox's need evicts none of these */
        spare_make_room(&f->s, f->sb);
        assert_int_equal(f->sb->spares, 1);
        assert_int_equal(f->sb->live_sessions, SBX_MAX_SESSIONS_PER_SANDBOX - 1);
        /* Spares never take the last places. */
        f->sb->refill_spares = true;
        spares_run_deadlines(&f->s);
        assert_int_equal(f->sb->spares, 1);
        f->sb->live_sessions -= real;
}

/* owner_sessions_max: spares count, never take an owner's last place, and
 * give way to the owner's own sessions; another owner and root are not held. */
static void test_owner_quota(void **state) {
        Fixture *f = *state;
        Sandbox *same = fake_sandbox(&f->s, "same", 1000), *theirs = fake_sandbox(&f->s, "theirs", 2000);
        Sandbox *roots = fake_sandbox(&f->s, "roots", 0);
        static const unsigned spares_left[] = { 2, 1, 0 };
        WorkspaceSession *ws;
        char err[400] = "";

        f->s.cfg.owner_sessions_max = 3;
        end_read_only_session(f);
        assert_int_equal(f->sb->spares, 2);     /* 2 of 3: the last place is left */
        /* The first session fits beside both spares; each later one evicts one. */
        for (size_t i = 0; i < ELEMENTSOF(spares_left); i++) {
                spare_make_room(&f->s, same);
                assert_int_equal(f->sb->spares, spares_left[i]);
                assert_int_equal(session_new(&f->s, same, false, true, &ws, err, sizeof(err)), 0);
        }
        spare_make_room(&f->s, same);
        assert_int_equal(session_new(&f->s, same, false, true, &ws, err, sizeof(err)), -EDQUOT);
        assert_non_null(strstr(err, "owner quota owner_sessions_max reached: the sandboxes of owner uid 1000 have 3 "
                                    "live workspace sessions, 1 more asked (limit 3)"));
        assert_int_equal(session_new(&f->s, theirs, false, true, &ws, err, sizeof(err)), 0);
        for (unsigned i = 0; i < 4; i++)
                assert_int_equal(session_new(&f->s, roots, false, true, &ws, err, sizeof(err)), 0);
}

/* A spare handed out whose set-up then fails (its spawner died, say): its
 * first command, which never reached a worker, moves to a new session and
 * runs there; once: if that one fails too, the command ends with why. */
static void test_dead_spare_retried(void **state) {
        Fixture *f = *state;
        char id[sizeof(((StoreCommand *) NULL)->id)], old_id[40], new_id[40];
        WorkspaceSession *ws;
        StoreCommand rec;
        Command *c;
        Sbx__Msg *m;

        end_read_only_session(f);
        ws = spare_take(&f->s, f->sb);
        assert_non_null(ws);
        assert_int_equal(ws->state, SESSION_SETUP);
        strlcpy(old_id, ws->id, sizeof(old_id));
        assert_int_equal(command_start(&f->s, ws, "echo hi", 10000, false, &c), 0);
        strlcpy(id, c->rec.id, sizeof(id));
        fake_setup(&f->s, old_id, "f");
        assert_null(fake_find(&f->s, old_id));
        c = command_find_live(&f->s, id);
        assert_non_null(c);
        assert_false(c->finished);
        assert_non_null(c->session);
        assert_string_not_equal(c->session->id, old_id);
        assert_string_equal(c->rec.workspace_session, c->session->id);
        assert_int_equal(store_command_get(f->s.store, id, &rec), 0);
        assert_string_equal(rec.workspace_session, c->session->id);
        /* It runs there once that one is ready. */
        ws = c->session;
        strlcpy(new_id, ws->id, sizeof(new_id));
        fake_ready(&f->s, ws);
        m = fake_worker_recv(new_id);
        assert_non_null(m);
        assert_int_equal(m->type, SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC);
        assert_string_equal(m->supervisor_exec->cmd, "echo hi");
        sbx__msg__free_unpacked(m, NULL);

        /* Once only: the next spare's command, moved, fails with its new session. */
        ws = spare_take(&f->s, f->sb);
        assert_non_null(ws);
        strlcpy(old_id, ws->id, sizeof(old_id));
        assert_int_equal(command_start(&f->s, ws, "echo again", 10000, false, &c), 0);
        strlcpy(id, c->rec.id, sizeof(id));
        fake_setup(&f->s, old_id, "f");
        c = command_find_live(&f->s, id);
        assert_non_null(c);
        strlcpy(new_id, c->session->id, sizeof(new_id));
        fake_setup(&f->s, new_id, "f");
        assert_null(command_find_live(&f->s, id));
        assert_int_equal(store_command_get(f->s.store, id, &rec), 0);
        assert_string_not_equal(rec.status, "running");
        assert_true(rec.has_exit_code);
        assert_int_equal(rec.exit_code, 127);
}

/* A ready spare whose worker is gone, before the loop saw it, is not handed out. */
static void test_dead_spare_passed_over(void **state) {
        Fixture *f = *state;
        WorkspaceSession *ws, *first = NULL, *taken;
        struct pollfd p;

        end_read_only_session(f);
        TAILQ_FOREACH(ws, &f->s.sessions, link)
                if (ws->spare) {
                        fake_ready(&f->s, ws);
                        first = first ?: ws;
                }
        assert_non_null(first);
        assert_int_equal(kill(fake_session(first->id)->child, SIGKILL), 0);
        p = (struct pollfd) { .fd = first->pidfd_src.fd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 2000), 1);
        taken = spare_take(&f->s, f->sb);
        assert_non_null(taken);
        assert_ptr_not_equal(taken, first);
        assert_true(first->spare);
}

#define T(test) cmocka_unit_test_setup_teardown(test, setup, teardown)

int main(void) {
        const struct CMUnitTest tests[] = {
                T(test_refilled_by_the_tick), T(test_take_current), T(test_stale_after_a_publication),
                T(test_idle_spares_go), T(test_room_for_a_real_session), T(test_owner_quota),
                T(test_dead_spare_retried), T(test_dead_spare_passed_over),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
