/* Unit tests for proto/wire.c: frame packing and parsing, and send/receive
 * with fd passing over a real SOCK_SEQPACKET socketpair. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "sbx-limits.h"
#include "macro.h"
#include "wire.h"

#define FRAME_BUF (SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX)

static uint8_t frame[FRAME_BUF + 64];

static void put_le32(uint8_t *p, uint32_t v) {
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t) (v >> (8 * i));
}

static void put_le16(uint8_t *p, uint16_t v) {
        p[0] = (uint8_t) v;
        p[1] = (uint8_t) (v >> 8);
}

static uint32_t get_le32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static void socketpair_seqpacket(int sv[2]) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

/* A header for a frame built by hand. */
static void put_header(uint8_t *p, uint32_t magic_version, uint32_t len, uint16_t type, uint16_t flags, uint32_t seq) {
        put_le32(p, magic_version);
        put_le32(p + 4, len);
        put_le16(p + 8, type);
        put_le16(p + 10, flags);
        put_le32(p + 12, seq);
}

/* Pack a message without any checks (so that wire_pack's refusals can be bypassed). */
static size_t raw_frame(const Sbx__Msg *m, uint16_t header_type, uint16_t flags, uint32_t seq) {
        size_t body = sbx__msg__get_packed_size(m);

        assert_true(body <= SBX_FRAME_MAX);
        put_header(frame, SBX_WIRE_MAGIC | SBX_PROTO_VERSION, (uint32_t) body, header_type, flags, seq);
        sbx__msg__pack(m, frame + SBX_WIRE_HEADER_SIZE);
        return SBX_WIRE_HEADER_SIZE + body;
}

static ssize_t pack_hello(uint32_t seq, size_t n_fds) {
        Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
        Sbx__Msg m = SBX__MSG__INIT;

        hello.client_name = (char *) "sbxctl";
        m.type = SBX__MSG_TYPE__MSG_CLIENT_HELLO;
        m.body_case = SBX__MSG__BODY_HELLO;
        m.hello = &hello;
        return wire_pack(&m, seq, n_fds, frame, FRAME_BUF);
}

static int parse(size_t len, size_t n_fds, uint32_t *ret_seq) {
        Sbx__Msg *m = NULL;
        uint32_t seq = 0;
        int r;

        r = wire_parse(frame, len, n_fds, &m, &seq);
        if (r == 0) {
                assert_non_null(m);
                sbx__msg__free_unpacked(m, NULL);
                if (ret_seq)
                        *ret_seq = seq;
        } else
                assert_null(m);
        return r;
}

static void test_roundtrip(void **state) {
        /* hello */
        {
                _cleanup_msg_ Sbx__Msg *m = NULL;
                uint32_t seq = 0;
                ssize_t n = pack_hello(7, 0);

                assert_true(n > (ssize_t) SBX_WIRE_HEADER_SIZE);
                assert_int_equal(get_le32(frame), SBX_WIRE_MAGIC | SBX_PROTO_VERSION);
                assert_int_equal(get_le32(frame + 4), (uint32_t) n - SBX_WIRE_HEADER_SIZE);
                assert_int_equal(wire_parse(frame, (size_t) n, 0, &m, &seq), 0);
                assert_int_equal(seq, 7);
                assert_int_equal(m->type, SBX__MSG_TYPE__MSG_CLIENT_HELLO);
                assert_int_equal(m->body_case, SBX__MSG__BODY_HELLO);
                assert_string_equal(m->hello->client_name, "sbxctl");
        }
        /* exec, with optional fields */
        {
                Sbx__Exec exec = SBX__EXEC__INIT;
                Sbx__Msg in = SBX__MSG__INIT;
                _cleanup_msg_ Sbx__Msg *m = NULL;
                uint32_t seq = 0;
                ssize_t n;

                exec.sandbox = (char *) "box";
                exec.workspace_session = (char *) "";
                exec.cmd = (char *) "echo hi; exit 3";
                exec.has_timeout = true;
                exec.timeout_ms = 1234;
                in.type = SBX__MSG_TYPE__MSG_CLIENT_EXEC;
                in.body_case = SBX__MSG__BODY_EXEC;
                in.exec = &exec;
                n = wire_pack(&in, UINT32_MAX, 0, frame, FRAME_BUF);
                assert_true(n > 0);
                assert_int_equal(wire_parse(frame, (size_t) n, 0, &m, &seq), 0);
                assert_int_equal(seq, UINT32_MAX);
                assert_string_equal(m->exec->sandbox, "box");
                assert_string_equal(m->exec->cmd, "echo hi; exit 3");
                assert_true(m->exec->has_timeout);
                assert_int_equal(m->exec->timeout_ms, 1234);
                assert_false(m->exec->has_yield);
        }
        /* worker output: binary data with NULs */
        {
                Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;
                Sbx__Msg in = SBX__MSG__INIT;
                _cleanup_msg_ Sbx__Msg *m = NULL;
                uint8_t data[] = { 0, 1, 2, 0xff, 0, '\n' };
                uint32_t seq = 0;
                ssize_t n;

                out.command = 3;
                out.data.data = data;
                out.data.len = sizeof(data);
                in.type = SBX__MSG_TYPE__MSG_WORKER_OUTPUT;
                in.body_case = SBX__MSG__BODY_WORKER_OUTPUT;
                in.worker_output = &out;
                n = wire_pack(&in, 0, 0, frame, FRAME_BUF);
                assert_true(n > 0);
                assert_int_equal(wire_parse(frame, (size_t) n, 0, &m, &seq), 0);
                assert_int_equal(m->worker_output->command, 3);
                assert_int_equal(m->worker_output->data.len, sizeof(data));
                assert_memory_equal(m->worker_output->data.data, data, sizeof(data));
        }
        /* reply with a nested command output */
        {
                Sbx__CommandOutput co = SBX__COMMAND_OUTPUT__INIT;
                Sbx__Reply reply = SBX__REPLY__INIT;
                Sbx__Msg in = SBX__MSG__INIT;
                _cleanup_msg_ Sbx__Msg *m = NULL;
                uint32_t seq = 0;
                ssize_t n;

                co.command_session = (char *) "c1";
                co.status = (char *) "ok";
                co.has_exit_code = true;
                co.exit_code = -1;
                co.total_lines = 1ull << 40;
                co.output.data = (uint8_t *) "a\nb\n";
                co.output.len = 4;
                reply.err = -ENOENT;
                reply.errmsg = (char *) "no such sandbox";
                reply.body_case = SBX__REPLY__BODY_COMMAND;
                reply.command = &co;
                in.type = SBX__MSG_TYPE__MSG_REPLY;
                in.body_case = SBX__MSG__BODY_REPLY;
                in.reply = &reply;
                n = wire_pack(&in, 42, 0, frame, FRAME_BUF);
                assert_true(n > 0);
                assert_int_equal(wire_parse(frame, (size_t) n, 0, &m, &seq), 0);
                assert_int_equal(seq, 42);
                assert_int_equal(m->reply->err, -ENOENT);
                assert_string_equal(m->reply->errmsg, "no such sandbox");
                assert_int_equal(m->reply->body_case, SBX__REPLY__BODY_COMMAND);
                assert_int_equal(m->reply->command->exit_code, -1);
                assert_int_equal(m->reply->command->total_lines, 1ull << 40);
                assert_memory_equal(m->reply->command->output.data, "a\nb\n", 4);
        }
        /* an empty body message still carries its oneof case */
        {
                Sbx__Status st = SBX__STATUS__INIT;
                Sbx__Msg in = SBX__MSG__INIT;
                _cleanup_msg_ Sbx__Msg *m = NULL;
                uint32_t seq = 0;
                ssize_t n;

                in.type = SBX__MSG_TYPE__MSG_CLIENT_STATUS;
                in.body_case = SBX__MSG__BODY_STATUS;
                in.status = &st;
                n = wire_pack(&in, 1, 0, frame, FRAME_BUF);
                assert_true(n > 0);
                assert_int_equal(wire_parse(frame, (size_t) n, 0, &m, &seq), 0);
                assert_int_equal(m->body_case, SBX__MSG__BODY_STATUS);
        }
}

static void test_pack_refusals(void **state) {
        Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;
        Sbx__Msg m = SBX__MSG__INIT;
        _cleanup_free_ uint8_t *big = calloc(1, SBX_FRAME_MAX + 1);

        assert_int_equal(pack_hello(1, SBX_WIRE_MAX_FDS + 1), -EINVAL);

        /* type and body disagree */
        hello.client_name = (char *) "x";
        m.type = SBX__MSG_TYPE__MSG_CLIENT_STATUS;
        m.body_case = SBX__MSG__BODY_HELLO;
        m.hello = &hello;
        assert_int_equal(wire_pack(&m, 1, 0, frame, FRAME_BUF), -EINVAL);
        m.type = SBX__MSG_TYPE__MSG_INVALID;
        assert_int_equal(wire_pack(&m, 1, 0, frame, FRAME_BUF), -EINVAL);

        /* buffer too small */
        m.type = SBX__MSG_TYPE__MSG_CLIENT_HELLO;
        assert_int_equal(wire_pack(&m, 1, 0, frame, SBX_WIRE_HEADER_SIZE + 2), -EMSGSIZE);

        /* body larger than SBX_FRAME_MAX */
        assert_non_null(big);
        out.data.data = big;
        out.data.len = SBX_FRAME_MAX + 1;
        m.type = SBX__MSG_TYPE__MSG_WORKER_OUTPUT;
        m.body_case = SBX__MSG__BODY_WORKER_OUTPUT;
        m.worker_output = &out;
        assert_int_equal(wire_pack(&m, 1, 0, frame, sizeof(frame)), -EMSGSIZE);
}

static void test_parse_errors(void **state) {
        ssize_t n;
        uint32_t seq = 0;

        n = pack_hello(9, 0);
        assert_true(n > 0);
        assert_int_equal(parse((size_t) n, 0, &seq), 0);
        assert_int_equal(seq, 9);

        /* too short for a header */
        assert_int_equal(parse(0, 0, NULL), -EBADMSG);
        assert_int_equal(parse(SBX_WIRE_HEADER_SIZE - 1, 0, NULL), -EBADMSG);

        /* wrong magic */
        frame[1] ^= 0x40;
        assert_int_equal(parse((size_t) n, 0, NULL), -EBADMSG);
        frame[1] ^= 0x40;

        /* wrong version */
        put_le32(frame, SBX_WIRE_MAGIC | (SBX_PROTO_VERSION + 1));
        assert_int_equal(parse((size_t) n, 0, NULL), -EPROTO);
        put_le32(frame, SBX_WIRE_MAGIC);
        assert_int_equal(parse((size_t) n, 0, NULL), -EPROTO);
        put_le32(frame, SBX_WIRE_MAGIC | SBX_PROTO_VERSION);
        assert_int_equal(parse((size_t) n, 0, NULL), 0);

        /* header len and datagram size disagree */
        assert_int_equal(parse((size_t) n - 1, 0, NULL), -EBADMSG);
        frame[n] = 0;
        assert_int_equal(parse((size_t) n + 1, 0, NULL), -EBADMSG);
        put_le32(frame + 4, (uint32_t) n - SBX_WIRE_HEADER_SIZE + 1);
        assert_int_equal(parse((size_t) n, 0, NULL), -EBADMSG);
        put_le32(frame + 4, (uint32_t) n - SBX_WIRE_HEADER_SIZE);

        /* len > SBX_FRAME_MAX, even when the buffer really is that long */
        memset(frame + SBX_WIRE_HEADER_SIZE, 0, SBX_FRAME_MAX + 1);
        put_le32(frame + 4, SBX_FRAME_MAX + 1);
        assert_int_equal(parse(SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX + 1, 0, NULL), -EBADMSG);
        put_le32(frame + 4, UINT32_MAX);
        assert_int_equal(parse(SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX + 1, 0, NULL), -EBADMSG);

        /* unknown types */
        n = pack_hello(9, 0);
        put_le16(frame + 8, 999);
        assert_int_equal(parse((size_t) n, 0, NULL), -EBADMSG);
        put_le16(frame + 8, SBX__MSG_TYPE__MSG_INVALID);
        assert_int_equal(parse((size_t) n, 0, NULL), -EBADMSG);
        /* a known type in the header that differs from the body's type */
        put_le16(frame + 8, SBX__MSG_TYPE__MSG_CLIENT_STATUS);
        assert_int_equal(parse((size_t) n, 0, NULL), -EBADMSG);
        put_le16(frame + 8, SBX__MSG_TYPE__MSG_CLIENT_HELLO);
        assert_int_equal(parse((size_t) n, 0, NULL), 0);

        /* fd count in the header vs fds that arrived; unknown flag bits */
        n = pack_hello(9, 2);
        assert_true(n > 0);
        assert_int_equal(parse((size_t) n, 2, NULL), 0);
        assert_int_equal(parse((size_t) n, 1, NULL), -EBADMSG);
        assert_int_equal(parse((size_t) n, 0, NULL), -EBADMSG);
        assert_int_equal(parse((size_t) n, 3, NULL), -EBADMSG);
        n = pack_hello(9, 0);
        assert_int_equal(parse((size_t) n, 1, NULL), -EBADMSG);
        put_le16(frame + 10, 0x100);
        assert_int_equal(parse((size_t) n, 0, NULL), -EBADMSG);
        put_le16(frame + 10, 0x100 | 1);
        assert_int_equal(parse((size_t) n, 1, NULL), -EBADMSG);
}

static void test_parse_body(void **state) {
        Sbx__Status st = SBX__STATUS__INIT;
        Sbx__Msg m = SBX__MSG__INIT;
        static const uint8_t garbage[][6] = {
                { 0x0f, 0, 0, 0, 0, 0 },                      /* wire type 7 */
                { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff },       /* unterminated varint */
                { 0x52, 0x10, 'a', 'b', 'c', 'd' },           /* hello: length past the end */
                { 0x08, 0x01, 0x52, 0x02, 0x0a, 0x05 },       /* nested string past the end */
        };
        size_t n;

        /* type field and oneof disagree (built by hand; wire_pack refuses) */
        m.type = SBX__MSG_TYPE__MSG_CLIENT_HELLO;
        m.body_case = SBX__MSG__BODY_STATUS;
        m.status = &st;
        n = raw_frame(&m, SBX__MSG_TYPE__MSG_CLIENT_HELLO, 0, 1);
        assert_int_equal(parse(n, 0, NULL), -EBADMSG);

        /* no body at all */
        m.body_case = SBX__MSG__BODY__NOT_SET;
        n = raw_frame(&m, SBX__MSG_TYPE__MSG_CLIENT_HELLO, 0, 1);
        assert_int_equal(parse(n, 0, NULL), -EBADMSG);

        /* an empty body (type 0 in the message, header says HELLO) */
        put_header(frame, SBX_WIRE_MAGIC | SBX_PROTO_VERSION, 0, SBX__MSG_TYPE__MSG_CLIENT_HELLO, 0, 1);
        assert_int_equal(parse(SBX_WIRE_HEADER_SIZE, 0, NULL), -EBADMSG);

        /* garbage bodies */
        for (size_t i = 0; i < ELEMENTSOF(garbage); i++) {
                put_header(frame, SBX_WIRE_MAGIC | SBX_PROTO_VERSION, sizeof(garbage[i]),
                           SBX__MSG_TYPE__MSG_CLIENT_HELLO, 0, 1);
                memcpy(frame + SBX_WIRE_HEADER_SIZE, garbage[i], sizeof(garbage[i]));
                assert_int_equal(parse(SBX_WIRE_HEADER_SIZE + sizeof(garbage[i]), 0, NULL), -EBADMSG);
        }

        /* body case for every known type */
        assert_int_equal(wire_body_case_for_type(SBX__MSG_TYPE__MSG_WORKER_EXEC_FAILED),
                         SBX__MSG__BODY_WORKER_EXEC_FAILED);
        assert_int_equal(wire_body_case_for_type(SBX__MSG_TYPE__MSG_REPLY), SBX__MSG__BODY_REPLY);
        assert_int_equal(wire_body_case_for_type(SBX__MSG_TYPE__MSG_INVALID), 0);
        assert_int_equal(wire_body_case_for_type((Sbx__MsgType) 12345), 0);
}

static void send_hello(int fd, uint32_t seq, const int *fds, size_t n_fds) {
        Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
        Sbx__Msg m = SBX__MSG__INIT;

        hello.client_name = (char *) "sandbox-mcp";
        m.type = SBX__MSG_TYPE__MSG_CLIENT_HELLO;
        m.body_case = SBX__MSG__BODY_HELLO;
        m.hello = &hello;
        assert_int_equal(wire_send(fd, &m, seq, fds, n_fds), 0);
}

/* Send raw bytes with fds attached, bypassing wire_send. */
static void send_raw(int fd, const void *buf, size_t len, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 8)];
        } control;
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        assert_true(n_fds <= 8);
        if (n_fds > 0) {
                struct cmsghdr *c;

                memset(&control, 0, sizeof(control));
                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        assert_int_equal(sendmsg(fd, &mh, MSG_NOSIGNAL), (ssize_t) len);
}

/* True when every write end of the pipe is closed (read gives EOF). */
static bool pipe_writers_gone(int rfd) {
        char c;
        assert_int_equal(fd_nonblock(rfd, true), 0);
        return read(rfd, &c, 1) == 0;
}

static void test_socket_fd(void **state) {
        _cleanup_close_ int a = -EBADF, b = -EBADF;
        int sv[2], p[2], q[2], fds[SBX_WIRE_MAX_FDS];
        _cleanup_msg_ Sbx__Msg *m = NULL;
        size_t n_fds = 99;
        uint32_t seq = 0;
        char c = 0;

        socketpair_seqpacket(sv);
        a = sv[0];
        b = sv[1];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(pipe2(q, O_CLOEXEC), 0);

        /* two fds attached; our copies of the write ends are closed afterwards */
        send_hello(a, 5, (int[]) { p[1], q[1] }, 2);
        close(p[1]);
        close(q[1]);
        assert_int_equal(wire_recv(b, &m, &seq, fds, &n_fds), 0);
        assert_int_equal(seq, 5);
        assert_int_equal(n_fds, 2);
        assert_string_equal(m->hello->client_name, "sandbox-mcp");
        for (size_t i = 0; i < 2; i++) {
                int flags = fcntl(fds[i], F_GETFD);
                assert_true(flags >= 0);
                assert_true(flags & FD_CLOEXEC);
        }
        /* the received fds work */
        assert_int_equal(write(fds[0], "x", 1), 1);
        assert_int_equal(read(p[0], &c, 1), 1);
        assert_int_equal(c, 'x');
        assert_int_equal(write(fds[1], "y", 1), 1);
        assert_int_equal(read(q[0], &c, 1), 1);
        assert_int_equal(c, 'y');
        close(fds[0]);
        close(fds[1]);
        assert_true(pipe_writers_gone(p[0]));
        assert_true(pipe_writers_gone(q[0]));
        close(p[0]);
        close(q[0]);

        /* a frame without fds, on the same socket */
        sbx__msg__free_unpacked(TAKE_PTR(m), NULL);
        send_hello(b, 6, NULL, 0);
        assert_int_equal(wire_recv(a, &m, &seq, fds, &n_fds), 0);
        assert_int_equal(seq, 6);
        assert_int_equal(n_fds, 0);

        /* more fds than SBX_WIRE_MAX_FDS are refused by the sender */
        {
                Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
                Sbx__Msg out = SBX__MSG__INIT;
                int many[SBX_WIRE_MAX_FDS + 1] = { 0 };

                hello.client_name = (char *) "x";
                out.type = SBX__MSG_TYPE__MSG_CLIENT_HELLO;
                out.body_case = SBX__MSG__BODY_HELLO;
                out.hello = &hello;
                assert_int_equal(wire_send(a, &out, 1, many, ELEMENTSOF(many)), -EINVAL);
        }
}

/* The largest frame the protocol allows goes through; one byte more is truncated and refused. */
static void test_socket_sizes(void **state) {
        _cleanup_close_ int a = -EBADF, b = -EBADF;
        _cleanup_free_ uint8_t *big = calloc(1, SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX + 4096);
        Sbx__WorkerOutput out = SBX__WORKER_OUTPUT__INIT;
        Sbx__Msg m = SBX__MSG__INIT;
        _cleanup_msg_ Sbx__Msg *got = NULL;
        int sv[2], p[2], fds[SBX_WIRE_MAX_FDS];
        size_t n_fds = 0, len;
        uint32_t seq = 0;

        assert_non_null(big);
        socketpair_seqpacket(sv);
        a = sv[0];
        b = sv[1];

        /* find a data size whose packed body is exactly SBX_FRAME_MAX */
        out.data.data = big;
        m.type = SBX__MSG_TYPE__MSG_WORKER_OUTPUT;
        m.body_case = SBX__MSG__BODY_WORKER_OUTPUT;
        m.worker_output = &out;
        for (len = SBX_FRAME_MAX - 32; len < SBX_FRAME_MAX; len++) {
                out.data.len = len;
                if (sbx__msg__get_packed_size(&m) == SBX_FRAME_MAX)
                        break;
        }
        assert_int_equal(sbx__msg__get_packed_size(&m), SBX_FRAME_MAX);
        assert_int_equal(wire_send(a, &m, 77, NULL, 0), 0);
        assert_int_equal(wire_recv(b, &got, &seq, fds, &n_fds), 0);
        assert_int_equal(seq, 77);
        assert_int_equal(got->worker_output->data.len, len);

        /* oversize datagram (valid-looking header) with an fd: MSG_TRUNC, refused, fd closed */
        put_header(big, SBX_WIRE_MAGIC | SBX_PROTO_VERSION, SBX_FRAME_MAX + 4000,
                   SBX__MSG_TYPE__MSG_WORKER_OUTPUT, 1, 1);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        send_raw(a, big, SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX + 4000, &p[1], 1);
        close(p[1]);
        {
                Sbx__Msg *bad = NULL;
                assert_int_equal(wire_recv(b, &bad, &seq, fds, &n_fds), -EBADMSG);
                assert_null(bad);
        }
        assert_true(pipe_writers_gone(p[0]));
        close(p[0]);

        /* a datagram one byte over the limit fits the receive buffer but fails the size check */
        put_header(big, SBX_WIRE_MAGIC | SBX_PROTO_VERSION, SBX_FRAME_MAX + 1,
                   SBX__MSG_TYPE__MSG_WORKER_OUTPUT, 0, 1);
        send_raw(a, big, SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX + 1, NULL, 0);
        {
                Sbx__Msg *bad = NULL;
                assert_int_equal(wire_recv(b, &bad, &seq, fds, &n_fds), -EBADMSG);
                assert_null(bad);
        }

        /* fds arriving without a header count are closed and the frame refused */
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_true(pack_hello(3, 0) > 0);
        send_raw(a, frame, (size_t) pack_hello(3, 0), &p[1], 1);
        close(p[1]);
        {
                Sbx__Msg *bad = NULL;
                assert_int_equal(wire_recv(b, &bad, &seq, fds, &n_fds), -EBADMSG);
                assert_null(bad);
        }
        assert_true(pipe_writers_gone(p[0]));
        close(p[0]);

        /* nothing queued on a non-blocking socket */
        assert_int_equal(fcntl(b, F_SETFL, O_NONBLOCK), 0);
        {
                Sbx__Msg *none = NULL;
                assert_int_equal(wire_recv(b, &none, &seq, fds, &n_fds), -EAGAIN);
                assert_null(none);
        }
}

static void test_socket_no_fd_slot(void **state) {
        _cleanup_close_ int a = -EBADF, b = -EBADF;
        int sv[2], p[2];
        Sbx__Msg *m = NULL;
        uint32_t seq = 0;
        size_t n_fds = 99;

        socketpair_seqpacket(sv);
        a = sv[0];
        b = sv[1];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);

        /* A well-formed frame with an fd, received with ret_fds NULL: the fd is
         * closed, the frame refused, and no output is written. */
        send_hello(a, 11, &p[1], 1);
        close(p[1]);
        assert_int_equal(wire_recv(b, &m, &seq, NULL, &n_fds), -EBADMSG);
        assert_null(m);
        assert_int_equal(seq, 0);
        assert_true(pipe_writers_gone(p[0]));
        close(p[0]);

        /* without fds, ret_fds NULL is fine */
        send_hello(a, 12, NULL, 0);
        assert_int_equal(wire_recv(b, &m, &seq, NULL, &n_fds), 0);
        assert_int_equal(seq, 12);
        assert_int_equal(n_fds, 0);
        sbx__msg__free_unpacked(m, NULL);
}

static void test_socket_eof(void **state) {
        _cleanup_close_ int b = -EBADF;
        int sv[2], fds[SBX_WIRE_MAX_FDS];
        Sbx__Msg *m = NULL;
        uint32_t seq = 0;
        size_t n_fds = 0;

        socketpair_seqpacket(sv);
        b = sv[1];
        send_hello(sv[0], 1, NULL, 0);
        close(sv[0]);
        /* queued frames are still delivered, then EOF */
        assert_int_equal(wire_recv(b, &m, &seq, fds, &n_fds), 0);
        sbx__msg__free_unpacked(m, NULL);
        m = NULL;
        assert_int_equal(wire_recv(b, &m, &seq, fds, &n_fds), -ECONNRESET);
        assert_null(m);
        assert_int_equal(wire_recv(b, &m, &seq, fds, &n_fds), -ECONNRESET);

        /* sending to a closed peer fails with EPIPE and no SIGPIPE */
        {
                Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
                Sbx__Msg out = SBX__MSG__INIT;

                hello.client_name = (char *) "x";
                out.type = SBX__MSG_TYPE__MSG_CLIENT_HELLO;
                out.body_case = SBX__MSG__BODY_HELLO;
                out.hello = &hello;
                assert_int_equal(wire_send(b, &out, 1, NULL, 0), -EPIPE);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip),
                cmocka_unit_test(test_pack_refusals),
                cmocka_unit_test(test_parse_errors),
                cmocka_unit_test(test_parse_body),
                cmocka_unit_test(test_socket_fd),
                cmocka_unit_test(test_socket_sizes),
                cmocka_unit_test(test_socket_no_fd_slot),
                cmocka_unit_test(test_socket_eof),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
