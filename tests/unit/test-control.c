/* Unit tests for the request table of supervisor/control.c: that every
 * client message type has one consistent row, and that the dispatcher
 * enforces each row before its handler runs: HELLO first and once, the
 * descriptors a message may carry, the bounds of its fields, root-only
 * requests, and requests that name a sandbox (its owner and root may; for
 * anyone else it belongs to another user, or does not exist). Clients are
 * socketpairs with the credentials the test gives them
 * (tests/unit/fake-sbxd.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"
#include "core/owner.h"
#include "core/token.h"
#include "fake-sbxd.h"
#include "fd-util.h"
#include "msg.h"
#include "sbx-limits.h"

typedef struct Fixture {
        Server s;
        int user, root;         /* peers of a client with uid 1000 and one with uid 0 */
        Client *user_client;
} Fixture;

static uint32_t next_seq = 100;

/* Send a request from peer (with n_fds empty memfds), run the loop; the seq it went with. */
static uint32_t send_request(Fixture *f, int peer, Sbx__MsgType type, void *body, size_t n_fds) {
        int fds[SBX_WIRE_MAX_FDS];
        uint32_t seq = next_seq++;
        Sbx__Msg m;

        for (size_t i = 0; i < n_fds; i++)
                fds[i] = memfd_create("payload", MFD_CLOEXEC);
        msg_init(&m, type, body);
        assert_int_equal(wire_send(peer, &m, seq, fds, n_fds), 0);
        for (size_t i = 0; i < n_fds; i++)
                close(fds[i]);
        fake_pump(&f->s, 10);
        return seq;
}

static Sbx__Msg *request(Fixture *f, int peer, Sbx__MsgType type, void *body) {
        uint32_t seq = send_request(f, peer, type, body, 0), got;
        Sbx__Msg *m = fake_reply(peer, &got);

        assert_int_equal(got, seq);
        return m;
}

static void hello(Fixture *f, int peer) {
        Sbx__ClientHello h = SBX__CLIENT_HELLO__INIT;
        Sbx__Msg *m = request(f, peer, SBX__MSG_TYPE__MSG_CLIENT_HELLO, &h);

        assert_int_equal(m->reply->err, 0);
        sbx__msg__free_unpacked(m, NULL);
}

static bool dropped(int peer) {
        char b;

        return recv(peer, &b, 1, MSG_DONTWAIT) == 0;
}

static void expect_error(Sbx__Msg *m, int err, const char *text) {
        assert_int_equal(m->reply->err, err);
        if (!strstr(m->reply->errmsg, text))
                fail_msg("'%s' does not say '%s'", m->reply->errmsg, text);
        sbx__msg__free_unpacked(m, NULL);
}

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));

        fake_server_init(&f->s);
        (void) fake_sandbox(&f->s, "mine", 1000);
        (void) fake_sandbox(&f->s, "theirs", 2000);
        f->user_client = fake_client(&f->s, 1000, &f->user);
        (void) fake_client(&f->s, 0, &f->root);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        fake_server_done(&f->s);
        close(f->user);
        close(f->root);
        free(f);
        return 0;
}

/* Every message type named MSG_CLIENT_* has one row, whose body is the one
 * wire.c pairs with the type and whose checks name fields of that body. */
static void test_table(void **state) {
        const ProtobufCEnumDescriptor *types = &sbx__msg_type__descriptor;
        size_t rows = 0;

        for (unsigned i = 0; i < types->n_values; i++) {
                const ProtobufCEnumValue *v = &types->values[i];
                const RequestType *t = request_type((Sbx__MsgType) v->value);
                const ProtobufCFieldDescriptor *body;

                if (strncmp(v->name, "MSG_CLIENT_", 11) != 0) {
                        if (t)
                                fail_msg("%s has a row, but no client sends it", v->name);
                        continue;
                }
                if (!t)
                        fail_msg("%s has no row in request_types[]", v->name);
                rows++;
                body = protobuf_c_message_descriptor_get_field(&sbx__msg__descriptor,
                                                              (unsigned) wire_body_case_for_type(t->type));
                assert_non_null(body);
                assert_ptr_equal(body->descriptor, t->body);
                assert_true(msg_checks_valid(t->body, t->checks));
                assert_non_null(t->handler);
                if (t->permission == PERM_OWNER) {
                        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field_by_name(
                                t->body, t->sandbox_field);
                        assert_non_null(fd);
                        assert_int_equal(fd->type, PROTOBUF_C_TYPE_STRING);
                }
                if (t->permission == PERM_ROOT)
                        assert_non_null(t->root_may);
        }
        assert_int_equal(rows, n_request_types);
}

/* HELLO first and once, and nothing a client may not send: else the client goes. */
static void test_clients_that_go(void **state) {
        int third;
        Fixture *f = *state;
        Sbx__Status st = SBX__STATUS__INIT;
        Sbx__ClientHello h = SBX__CLIENT_HELLO__INIT;
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;

        (void) fake_client(&f->s, 1000, &third);
        (void) send_request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_STATUS, &st, 0);
        hello(f, f->root);
        (void) send_request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_HELLO, &h, 0);
        /* A worker's message from a client is no request. */
        hello(f, third);
        (void) send_request(f, third, SBX__MSG_TYPE__MSG_WORKER_OUTPUT, &out, 0);
        assert_true(dropped(f->user));
        assert_true(dropped(f->root));
        assert_true(dropped(third));
        close(third);
}

static void test_descriptors(void **state) {
        Fixture *f = *state;
        Sbx__Status st = SBX__STATUS__INIT;
        Sbx__FileWrite w = SBX__FILE_WRITE__INIT;
        uint32_t seq, got;
        Sbx__Msg *m;

        hello(f, f->user);
        hello(f, f->root);
        /* One descriptor where the row says one: the handler sees it (not sealed: refused). */
        w.sandbox = (char *) "mine";
        w.path = (char *) "a.txt";
        seq = send_request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_FILE_WRITE, &w, 1);
        m = fake_reply(f->user, &got);
        assert_int_equal(got, seq);
        expect_error(m, -EBADMSG, "file content: malformed payload");
        /* More than it takes: the client goes. */
        (void) send_request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_FILE_WRITE, &w, 2);
        assert_true(dropped(f->user));
        (void) send_request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_STATUS, &st, 1);
        assert_true(dropped(f->root));
}

/* A default body of row t, naming sandbox, with what its checks need to pass otherwise. */
static void *body_naming(const RequestType *t, const char *sandbox, void *buf) {
        protobuf_c_message_init(t->body, buf);
        for (const MsgCheck *c = t->checks; c && c->field; c++)
                if (c->kind == MSG_CHECK_LENGTH && c->min > 0) {
                        const ProtobufCFieldDescriptor *fd =
                                protobuf_c_message_descriptor_get_field_by_name(t->body, c->field);
                        *(const char **) ((char *) buf + fd->offset) = "x";
                }
        if (sandbox) {
                const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field_by_name(t->body,
                                                                                                   t->sandbox_field);
                *(const char **) ((char *) buf + fd->offset) = sandbox;
        }
        return buf;
}

static void test_permissions(void **state) {
        Fixture *f = *state;
        _Alignas(max_align_t) char buf[1024];
        unsigned owner_rows = 0, root_rows = 0;
        char text[128];

        hello(f, f->user);
        for (size_t i = 0; i < n_request_types; i++) {
                const RequestType *t = &request_types[i];

                assert_true(t->body->sizeof_message <= sizeof(buf));
                if (t->permission == PERM_ROOT) {
                        snprintf(text, sizeof(text), "only root may %s", t->root_may);
                        expect_error(request(f, f->user, t->type, body_naming(t, NULL, buf)), -EPERM, text);
                        root_rows++;
                } else if (t->permission == PERM_OWNER) {
                        expect_error(request(f, f->user, t->type, body_naming(t, "theirs", buf)), -EPERM,
                                     "permission denied: sandbox 'theirs' belongs to another user");
                        expect_error(request(f, f->user, t->type, body_naming(t, "nope", buf)), -ENOENT,
                                     "no sandbox named 'nope' (yours: mine)");
                        owner_rows++;
                }
        }
        assert_int_equal(root_rows, 6); /* sandbox create, gc, image build, image rm, token create, token revoke */
        assert_true(owner_rows >= 15);
}

static void test_owner_and_root_may(void **state) {
        Fixture *f = *state;
        Sbx__SessionList l = SBX__SESSION_LIST__INIT;
        Sbx__Msg *m;

        hello(f, f->user);
        hello(f, f->root);
        l.sandbox = (char *) "mine";
        m = request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_SESSION_LIST, &l);
        assert_int_equal(m->reply->err, 0);
        assert_int_equal(m->reply->body_case, SBX__REPLY__BODY_SESSION_LIST);
        sbx__msg__free_unpacked(m, NULL);
        l.sandbox = (char *) "theirs";
        m = request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_SESSION_LIST, &l);
        assert_int_equal(m->reply->err, 0);
        sbx__msg__free_unpacked(m, NULL);
}

static void test_anyone_sees_their_own(void **state) {
        Fixture *f = *state;
        Sbx__Status st = SBX__STATUS__INIT;
        Sbx__SandboxList l = SBX__SANDBOX_LIST__INIT;
        Sbx__Msg *m;

        hello(f, f->user);
        hello(f, f->root);
        m = request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_STATUS, &st);
        assert_true(m->reply->status->caller_only);
        assert_int_equal(m->reply->status->sandboxes, 1);
        assert_int_equal(m->reply->status->pid, 0);
        sbx__msg__free_unpacked(m, NULL);
        m = request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST, &l);
        assert_int_equal(m->reply->sandbox_list->n_sandboxes, 1);
        assert_string_equal(m->reply->sandbox_list->sandboxes[0]->name, "mine");
        sbx__msg__free_unpacked(m, NULL);
        m = request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST, &l);
        assert_int_equal(m->reply->sandbox_list->n_sandboxes, 2);
        sbx__msg__free_unpacked(m, NULL);
}

/* owner list: root sees every owner of a sandbox, anyone else their own; another's is refused. */
static void test_owner_list(void **state) {
        Fixture *f = *state;
        Sbx__OwnerList l = SBX__OWNER_LIST__INIT;
        Sbx__Msg *m;

        hello(f, f->user);
        hello(f, f->root);
        m = request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_OWNER_LIST, &l);
        assert_int_equal(m->reply->err, 0);
        assert_int_equal(m->reply->owner_list->n_owners, 2);
        assert_int_equal(m->reply->owner_list->owners[0]->uid, 1000);
        assert_int_equal(m->reply->owner_list->owners[1]->uid, 2000);
        assert_int_equal(m->reply->owner_list->owners[0]->n_quotas, n_owner_quotas);
        assert_string_equal(m->reply->owner_list->owners[0]->quotas[1]->name, "owner_sandboxes_max");
        assert_int_equal(m->reply->owner_list->owners[0]->quotas[1]->used, 1);
        assert_int_equal(m->reply->owner_list->owners[0]->quotas[1]->limit, SBX_OWNER_SANDBOXES_MAX_DEFAULT);
        sbx__msg__free_unpacked(m, NULL);
        m = request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_OWNER_LIST, &l);
        assert_int_equal(m->reply->owner_list->n_owners, 1);
        assert_int_equal(m->reply->owner_list->owners[0]->uid, 1000);
        assert_false(m->reply->owner_list->owners[0]->exempt);
        sbx__msg__free_unpacked(m, NULL);
        l.has_uid = true;
        l.uid = 2000;
        expect_error(request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_OWNER_LIST, &l), -EPERM,
                     "only root may see the quotas of another owner (uid 2000)");
        l.uid = 0;
        m = request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_OWNER_LIST, &l);
        assert_int_equal(m->reply->owner_list->n_owners, 1);
        assert_true(m->reply->owner_list->owners[0]->exempt);
        sbx__msg__free_unpacked(m, NULL);
}

/* Bounds are checked at the boundary, before the permission and the handler. */
static void test_field_bounds(void **state) {
        Fixture *f = *state;
        Sbx__Exec e = SBX__EXEC__INIT;
        Sbx__Stdin in = SBX__STDIN__INIT;
        Sbx__SessionFinalize fin = SBX__SESSION_FINALIZE__INIT;
        Sbx__SessionCreate cr = SBX__SESSION_CREATE__INIT;
        char name[SBX_NAME_MAX + 2];
        static uint8_t data[SBX_STDIN_MAX + 1];

        hello(f, f->user);
        memset(name, 'n', sizeof(name) - 1);
        name[sizeof(name) - 1] = '\0';
        e.sandbox = name;
        e.cmd = (char *) "true";
        expect_error(request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_EXEC, &e), -ENOENT,
                     "no such sandbox (names are at most 64 bytes)");
        e.sandbox = (char *) "theirs";
        e.cmd = (char *) "";
        expect_error(request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_EXEC, &e), -EINVAL, "cmd must be 1 to 65536 bytes");
        e.sandbox = (char *) "mine";
        e.cmd = (char *) "true";
        e.has_timeout = true;
        expect_error(request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_EXEC, &e), -EINVAL, "timeout_ms must be 1 to ");
        in.sandbox = (char *) "mine";
        in.command_session = (char *) "cmd-x";
        in.data.data = data;
        in.data.len = sizeof(data);
        expect_error(request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_STDIN, &in), -E2BIG, "stdin must be at most 65536 bytes");
        fin.sandbox = (char *) "mine";
        fin.workspace_session = (char *) "ws-x";
        fin.action = (char *) "keep";
        expect_error(request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_SESSION_FINALIZE, &fin), -EINVAL,
                     "action must be publish or discard, not 'keep'");
        cr.sandbox = (char *) "mine";
        cr.finalize_policy = (char *) "later";
        expect_error(request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_SESSION_CREATE, &cr), -EINVAL,
                     "finalize_policy must be publish_then_destroy or destroy, not 'later'");
}

/* A cancel is never answered; the request after it is. */
static void test_cancel_has_no_reply(void **state) {
        Fixture *f = *state;
        Sbx__Cancel c = SBX__CANCEL__INIT;
        Sbx__Status st = SBX__STATUS__INIT;
        uint32_t seq, got;
        Sbx__Msg *m;

        hello(f, f->user);
        c.request_seq = 12345;
        (void) send_request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_CANCEL, &c, 0);
        seq = send_request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_STATUS, &st, 0);
        m = fake_reply(f->user, &got);
        assert_int_equal(got, seq);
        sbx__msg__free_unpacked(m, NULL);
        assert_false(f->user_client->dead);
}

/* Bearer tokens (core/token.h): root makes one, never for root; only the
 * gateway user may check one or act for one; a revoked token is refused at
 * once, and a connection acting for it is closed. */
static Sbx__Msg *check_token(Fixture *f, const char *secret) {
        Sbx__TokenCheck c = SBX__TOKEN_CHECK__INIT;

        c.token = (char *) secret;
        return request(f, f->user, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CHECK, &c);
}

static void test_tokens(void **state) {
        Fixture *f = *state;
        Sbx__TokenCreate tc = SBX__TOKEN_CREATE__INIT;
        Sbx__TokenRef ref = SBX__TOKEN_REF__INIT;
        Sbx__ClientHello h = SBX__CLIENT_HELLO__INIT;
        char secret[TOKEN_SECRET_SIZE], wrong[TOKEN_SECRET_SIZE];
        Sbx__Msg *m;
        int peer;

        hello(f, f->user);
        hello(f, f->root);
        tc.owner_uid = 0;
        expect_error(request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CREATE, &tc), -EINVAL, "may not act for root");
        tc.owner_uid = 2000;
        tc.name = (char *) "ci";
        tc.sets = (char *) "runtime,,x";
        expect_error(request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CREATE, &tc), -EINVAL, "--sets");
        tc.sets = (char *) "runtime";
        m = request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CREATE, &tc);
        assert_int_equal(m->reply->err, 0);
        assert_int_equal(m->reply->body_case, SBX__REPLY__BODY_TOKEN);
        assert_int_equal(strlen(m->reply->token->token), TOKEN_SECRET_SIZE - 1);
        assert_int_equal(strncmp(m->reply->token->token, SBX_TOKEN_PREFIX, strlen(SBX_TOKEN_PREFIX)), 0);
        strcpy(secret, m->reply->token->token);
        sbx__msg__free_unpacked(m, NULL);
        expect_error(request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CREATE, &tc), -EEXIST, "exists already");

        /* Not the gateway user: no check, no acting. */
        expect_error(check_token(f, secret), -EPERM, "gateway_user");
        f->user_client->gateway = true;
        m = check_token(f, secret);
        assert_int_equal(m->reply->err, 0);
        assert_int_equal(m->reply->token->owner_uid, 2000);
        assert_string_equal(m->reply->token->sets, "runtime");
        sbx__msg__free_unpacked(m, NULL);
        strcpy(wrong, secret);
        wrong[TOKEN_SECRET_SIZE - 2] = wrong[TOKEN_SECRET_SIZE - 2] == '0' ? '1' : '0';
        expect_error(check_token(f, wrong), -EACCES, "not a valid token");
        expect_error(check_token(f, "sbx_pat_short"), -EACCES, "not a valid token");

        /* A connection of the gateway user acting for it is uid 2000's, until the revoke closes it. */
        f->s.cfg.gateway_uid = 1000;
        fake_client(&f->s, 1000, &peer)->gateway = true;
        h.token = secret;
        m = request(f, peer, SBX__MSG_TYPE__MSG_CLIENT_HELLO, &h);
        assert_int_equal(m->reply->err, 0);
        assert_int_equal(m->reply->token->owner_uid, 2000);
        sbx__msg__free_unpacked(m, NULL);
        ref.id_or_name = (char *) "ci";
        m = request(f, f->root, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_REVOKE, &ref);
        assert_int_equal(m->reply->err, 0);
        sbx__msg__free_unpacked(m, NULL);
        assert_true(dropped(peer));
        expect_error(check_token(f, secret), -EACCES, "not a valid token");
        close(peer);
}

#define T(test) cmocka_unit_test_setup_teardown(test, setup, teardown)

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table), T(test_clients_that_go), T(test_descriptors), T(test_permissions),
                T(test_owner_and_root_may), T(test_anyone_sees_their_own), T(test_field_bounds),
                T(test_cancel_has_no_reply), T(test_owner_list), T(test_tokens),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
