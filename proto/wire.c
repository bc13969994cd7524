#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <sys/types.h>

#include "sbx-limits.h"
#include "macro.h"
#include "wire.h"

static const struct {
        Sbx__MsgType type;
        Sbx__Msg__BodyCase body;
} type_bodies[] = {
        { SBX__MSG_TYPE__MSG_CLIENT_HELLO, SBX__MSG__BODY_HELLO },
        { SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_CREATE, SBX__MSG__BODY_SANDBOX_CREATE },
        { SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST, SBX__MSG__BODY_SANDBOX_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_DELETE, SBX__MSG__BODY_SANDBOX_DELETE },
        { SBX__MSG_TYPE__MSG_CLIENT_STATUS, SBX__MSG__BODY_STATUS },
        { SBX__MSG_TYPE__MSG_CLIENT_EXEC, SBX__MSG__BODY_EXEC },
        { SBX__MSG_TYPE__MSG_CLIENT_STDIN, SBX__MSG__BODY_STDIN },
        { SBX__MSG_TYPE__MSG_CLIENT_READ_LINES, SBX__MSG__BODY_READ_LINES },
        { SBX__MSG_TYPE__MSG_CLIENT_CANCEL, SBX__MSG__BODY_CANCEL },
        { SBX__MSG_TYPE__MSG_CLIENT_FILE_READ, SBX__MSG__BODY_FILE_READ },
        { SBX__MSG_TYPE__MSG_CLIENT_FILE_WRITE, SBX__MSG__BODY_FILE_WRITE },
        { SBX__MSG_TYPE__MSG_CLIENT_FILE_EDIT, SBX__MSG__BODY_FILE_EDIT },
        { SBX__MSG_TYPE__MSG_CLIENT_FILE_BLAME, SBX__MSG__BODY_FILE_BLAME },
        { SBX__MSG_TYPE__MSG_CLIENT_SESSION_CREATE, SBX__MSG__BODY_SESSION_CREATE },
        { SBX__MSG_TYPE__MSG_CLIENT_SESSION_FINALIZE, SBX__MSG__BODY_SESSION_FINALIZE },
        { SBX__MSG_TYPE__MSG_CLIENT_SESSION_LIST, SBX__MSG__BODY_SESSION_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_SESSION_DIFF, SBX__MSG__BODY_SESSION_DIFF },
        { SBX__MSG_TYPE__MSG_CLIENT_COMMAND_LIST, SBX__MSG__BODY_COMMAND_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_COMMAND_CANCEL, SBX__MSG__BODY_COMMAND_CANCEL },
        { SBX__MSG_TYPE__MSG_CLIENT_LAYER_LIST, SBX__MSG__BODY_LAYER_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_GC, SBX__MSG__BODY_GC },
        { SBX__MSG_TYPE__MSG_CLIENT_OWNER_LIST, SBX__MSG__BODY_OWNER_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_CREATE, SBX__MSG__BODY_CLAIM_CREATE },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_DELETE, SBX__MSG__BODY_CLAIM_DELETE },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_STATUS, SBX__MSG__BODY_CLAIM_STATUS },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_LIST, SBX__MSG__BODY_CLAIM_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_EXEC, SBX__MSG__BODY_CLAIM_EXEC },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_PUT, SBX__MSG__BODY_CLAIM_PUT },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_GET, SBX__MSG__BODY_CLAIM_GET },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_LIST_FILES, SBX__MSG__BODY_CLAIM_LIST_FILES },
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_STAT, SBX__MSG__BODY_CLAIM_STAT },
        { SBX__MSG_TYPE__MSG_CLIENT_TEMPLATE_LIST, SBX__MSG__BODY_TEMPLATE_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_IMAGE_LIST, SBX__MSG__BODY_IMAGE_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_IMAGE_BUILD, SBX__MSG__BODY_IMAGE_BUILD },
        { SBX__MSG_TYPE__MSG_CLIENT_IMAGE_RM, SBX__MSG__BODY_IMAGE_RM },
        { SBX__MSG_TYPE__MSG_CLIENT_JOB_START, SBX__MSG__BODY_JOB_START },
        { SBX__MSG_TYPE__MSG_CLIENT_JOB_STATUS, SBX__MSG__BODY_JOB_STATUS },
        { SBX__MSG_TYPE__MSG_CLIENT_JOB_WAIT, SBX__MSG__BODY_JOB_WAIT },
        { SBX__MSG_TYPE__MSG_CLIENT_JOB_CANCEL, SBX__MSG__BODY_JOB_CANCEL },
        { SBX__MSG_TYPE__MSG_CLIENT_JOB_LIST, SBX__MSG__BODY_JOB_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_JOB_RM, SBX__MSG__BODY_JOB_RM },
        { SBX__MSG_TYPE__MSG_CLIENT_SCRIPT_ROOTS, SBX__MSG__BODY_SCRIPT_ROOTS },
        { SBX__MSG_TYPE__MSG_JOB_ENDED, SBX__MSG__BODY_JOB_ENDED },
        { SBX__MSG_TYPE__MSG_CLIENT_RUNTIME_EXECUTE, SBX__MSG__BODY_RUNTIME_EXECUTE },
        { SBX__MSG_TYPE__MSG_CLIENT_RUNTIME_QUERY, SBX__MSG__BODY_RUNTIME_QUERY },
        { SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CREATE, SBX__MSG__BODY_TOKEN_CREATE },
        { SBX__MSG_TYPE__MSG_CLIENT_TOKEN_LIST, SBX__MSG__BODY_TOKEN_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_TOKEN_REVOKE, SBX__MSG__BODY_TOKEN_REVOKE },
        { SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CHECK, SBX__MSG__BODY_TOKEN_CHECK },
        { SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER, SBX__MSG__BODY_TAKEOVER },
        { SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_LIST, SBX__MSG__BODY_TAKEOVER_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_ATTACH, SBX__MSG__BODY_TAKEOVER_ATTACH },
        { SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_RETURN, SBX__MSG__BODY_TAKEOVER_RETURN },
        { SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, SBX__MSG__BODY_TERMINAL },
        { SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_CHECK, SBX__MSG__BODY_TAKEOVER_CHECK },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_START, SBX__MSG__BODY_BOX_START },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_EXEC, SBX__MSG__BODY_BOX_EXEC },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_STATUS, SBX__MSG__BODY_BOX_STATUS },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_STOP, SBX__MSG__BODY_BOX_STOP },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_LIST, SBX__MSG__BODY_BOX_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_SYNC, SBX__MSG__BODY_BOX_SYNC },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_GET, SBX__MSG__BODY_BOX_GET },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_WIRE, SBX__MSG__BODY_BOX_WIRE },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_SHOT, SBX__MSG__BODY_BOX_SHOT },
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_FILE_OPEN, SBX__MSG__BODY_BOX_FILE_OPEN },
        { SBX__MSG_TYPE__MSG_CLIENT_SECRET_SET, SBX__MSG__BODY_SECRET_SET },
        { SBX__MSG_TYPE__MSG_CLIENT_SECRET_LIST, SBX__MSG__BODY_SECRET_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_VERSION_PUBLISH, SBX__MSG__BODY_VERSION_PUBLISH },
        { SBX__MSG_TYPE__MSG_CLIENT_VERSION_LIST, SBX__MSG__BODY_VERSION_LIST },
        { SBX__MSG_TYPE__MSG_CLIENT_VERSION_RM, SBX__MSG__BODY_VERSION_RM },
        { SBX__MSG_TYPE__MSG_REPLY, SBX__MSG__BODY_REPLY },
        { SBX__MSG_TYPE__MSG_PROGRESS, SBX__MSG__BODY_PROGRESS },
        { SBX__MSG_TYPE__MSG_SUPERVISOR_EXEC, SBX__MSG__BODY_SUPERVISOR_EXEC },
        { SBX__MSG_TYPE__MSG_SUPERVISOR_STDIN, SBX__MSG__BODY_SUPERVISOR_STDIN },
        { SBX__MSG_TYPE__MSG_SUPERVISOR_SIGNAL, SBX__MSG__BODY_SUPERVISOR_SIGNAL },
        { SBX__MSG_TYPE__MSG_SESSION_SETUP, SBX__MSG__BODY_SESSION_SETUP },
        { SBX__MSG_TYPE__MSG_WORKER_READY, SBX__MSG__BODY_WORKER_READY },
        { SBX__MSG_TYPE__MSG_WORKER_OUTPUT, SBX__MSG__BODY_WORKER_OUTPUT },
        { SBX__MSG_TYPE__MSG_WORKER_EXITED, SBX__MSG__BODY_WORKER_EXITED },
        { SBX__MSG_TYPE__MSG_WORKER_EXEC_FAILED, SBX__MSG__BODY_WORKER_EXEC_FAILED },
        { SBX__MSG_TYPE__MSG_IMPORT_REQUEST, SBX__MSG__BODY_IMPORT_REQUEST },
        { SBX__MSG_TYPE__MSG_IMPORT_RESULT, SBX__MSG__BODY_IMPORT_RESULT },
        { SBX__MSG_TYPE__MSG_EGRESS_CONFIG, SBX__MSG__BODY_EGRESS_CONFIG },
        { SBX__MSG_TYPE__MSG_EGRESS_ATTACH, SBX__MSG__BODY_EGRESS_ATTACH },
        { SBX__MSG_TYPE__MSG_EGRESS_DETACH, SBX__MSG__BODY_EGRESS_DETACH },
        { SBX__MSG_TYPE__MSG_EGRESS_VERDICT, SBX__MSG__BODY_EGRESS_VERDICT },
};

int wire_body_case_for_type(Sbx__MsgType type) {
        for (size_t i = 0; i < ELEMENTSOF(type_bodies); i++)
                if (type_bodies[i].type == type)
                        return (int) type_bodies[i].body;
        return 0;
}

void wire_msg_set(Sbx__Msg *m, Sbx__MsgType type, void *body) {
        *m = (Sbx__Msg) SBX__MSG__INIT;
        m->type = type;
        m->body_case = (Sbx__Msg__BodyCase) wire_body_case_for_type(type);
        /* Every body member of the oneof shares one pointer slot. */
        m->hello = body;
}

void *wire_msg_body(Sbx__Msg *m, Sbx__MsgType type, const ProtobufCMessageDescriptor *desc, void *storage,
                    size_t size) {
        assert(desc->sizeof_message <= size);
        protobuf_c_message_init(desc, storage);
        wire_msg_set(m, type, storage);
        return storage;
}

static void put_le32(uint8_t *p, uint32_t v) {
        v = htole32(v);
        memcpy(p, &v, 4);
}

static void put_le16(uint8_t *p, uint16_t v) {
        v = htole16(v);
        memcpy(p, &v, 2);
}

static uint32_t get_le32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, 4);
        return le32toh(v);
}

static uint16_t get_le16(const uint8_t *p) {
        uint16_t v;
        memcpy(&v, p, 2);
        return le16toh(v);
}

ssize_t wire_pack(const Sbx__Msg *msg, uint32_t seq, size_t n_fds, uint8_t *buf, size_t size) {
        size_t body;

        if (n_fds > SBX_WIRE_MAX_FDS || wire_body_case_for_type(msg->type) != (int) msg->body_case)
                return -EINVAL;
        body = sbx__msg__get_packed_size(msg);
        if (body > SBX_FRAME_MAX || size < SBX_WIRE_HEADER_SIZE + body)
                return -EMSGSIZE;
        put_le32(buf, SBX_WIRE_MAGIC | SBX_PROTO_VERSION);
        put_le32(buf + 4, (uint32_t) body);
        put_le16(buf + 8, (uint16_t) msg->type);
        put_le16(buf + 10, (uint16_t) n_fds);
        put_le32(buf + 12, seq);
        sbx__msg__pack(msg, buf + SBX_WIRE_HEADER_SIZE);
        return (ssize_t) (SBX_WIRE_HEADER_SIZE + body);
}

int wire_parse(const uint8_t *buf, size_t len, size_t n_fds, Sbx__Msg **ret_msg, uint32_t *ret_seq) {
        WireHeader h;
        Sbx__Msg *msg;

        if (len < SBX_WIRE_HEADER_SIZE)
                return -EBADMSG;
        h.magic_version = get_le32(buf);
        h.len = get_le32(buf + 4);
        h.type = get_le16(buf + 8);
        h.flags = get_le16(buf + 10);
        h.seq = get_le32(buf + 12);

        if ((h.magic_version & 0xffffff00u) != SBX_WIRE_MAGIC)
                return -EBADMSG;
        if ((h.magic_version & 0xffu) != SBX_PROTO_VERSION)
                return -EPROTO;
        if (h.len > SBX_FRAME_MAX || h.len != len - SBX_WIRE_HEADER_SIZE)
                return -EBADMSG;
        if ((h.flags & 0xffu) != n_fds || (h.flags & ~0xffu) != 0)
                return -EBADMSG;
        if (wire_body_case_for_type((Sbx__MsgType) h.type) == 0)
                return -EBADMSG;

        msg = sbx__msg__unpack(NULL, h.len, buf + SBX_WIRE_HEADER_SIZE);
        if (!msg)
                return -EBADMSG;
        if ((uint32_t) msg->type != h.type ||
            wire_body_case_for_type(msg->type) != (int) msg->body_case) {
                sbx__msg__free_unpacked(msg, NULL);
                return -EBADMSG;
        }
        *ret_msg = msg;
        *ret_seq = h.seq;
        return 0;
}

int wire_send(int fd, const Sbx__Msg *msg, uint32_t seq, const int *fds, size_t n_fds) {
        uint8_t *buf;
        ssize_t len;
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SBX_WIRE_MAX_FDS)];
        } control;
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        int r = 0;

        buf = malloc(SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
        if (!buf)
                return -ENOMEM;
        len = wire_pack(msg, seq, n_fds, buf, SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX);
        if (len < 0) {
                free(buf);
                return (int) len;
        }
        iov.iov_base = buf;
        iov.iov_len = (size_t) len;
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
        for (;;) {
                if (sendmsg(fd, &mh, MSG_NOSIGNAL) >= 0)
                        break;
                if (errno == EINTR)
                        continue;
                r = errno == EWOULDBLOCK ? -EAGAIN : -errno;
                break;
        }
        free(buf);
        return r;
}

static void close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                fds[i] = safe_close(fds[i]);
}

int wire_recv(int fd, Sbx__Msg **ret_msg, uint32_t *ret_seq, int *ret_fds, size_t *ret_n_fds) {
        /* One byte more than the largest valid frame, so oversize shows as
         * MSG_TRUNC. One per thread: sbx-gateway reads its sessions' sockets
         * from several. */
        static _Thread_local uint8_t buf[SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX + 1];
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * SBX_WIRE_MAX_FDS)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
        struct msghdr mh = {
                .msg_iov = &iov, .msg_iovlen = 1,
                .msg_control = control.buf, .msg_controllen = sizeof(control.buf),
        };
        int fds[SBX_WIRE_MAX_FDS];
        size_t n_fds = 0;
        Sbx__Msg *msg;
        uint32_t seq;
        ssize_t n;
        int r;

        do
                n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;

        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        int *in = (int *) CMSG_DATA(c);
                        for (size_t i = 0; i < k; i++) {
                                if (n_fds < SBX_WIRE_MAX_FDS)
                                        fds[n_fds++] = in[i];
                                else
                                        (void) safe_close(in[i]);
                        }
                }
        }
        /* On SEQPACKET an empty datagram cannot be told from EOF: both end the peer. */
        if (n == 0 && n_fds == 0)
                return -ECONNRESET;
        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                close_fds(fds, n_fds);
                return -EBADMSG;
        }
        /* fds only where the caller takes them. */
        if (n_fds > 0 && (!ret_fds || !ret_n_fds)) {
                close_fds(fds, n_fds);
                return -EBADMSG;
        }
        r = wire_parse(buf, (size_t) n, n_fds, &msg, &seq);
        if (r < 0) {
                close_fds(fds, n_fds);
                return r;
        }
        if (ret_fds)
                memcpy(ret_fds, fds, sizeof(int) * n_fds);
        if (ret_n_fds)
                *ret_n_fds = n_fds;
        *ret_msg = msg;
        *ret_seq = seq;
        return 0;
}

int wire_reply_from_fd(int fd, size_t max, Sbx__Reply **ret) {
        struct stat st;
        uint8_t *buf;
        Sbx__Reply *r;
        ssize_t n;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size > max)
                return -EBADMSG;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        n = pread(fd, buf, (size_t) st.st_size, 0);
        r = n == st.st_size ? sbx__reply__unpack(NULL, (size_t) n, buf) : NULL;
        free(buf);
        if (!r)
                return -EBADMSG;
        *ret = r;
        return 0;
}

int wire_connect(const char *path, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strlen(path);

        if (len >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, len + 1);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        while (connect(fd, (const struct sockaddr *) &sa, sizeof(sa)) < 0)
                if (errno != EINTR)
                        return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}
