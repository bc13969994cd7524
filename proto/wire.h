/* Framing of every sbx message: one SOCK_SEQPACKET datagram per frame,
 * a 16-byte little-endian header, then a packed sbx.Msg of at most
 * SBX_FRAME_MAX bytes. fds travel only by SCM_RIGHTS, their number is in
 * the header, and a frame whose fds do not match is refused. Non-logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "sbx.pb-c.h"

#define SBX_PROTO_VERSION 14u
#define SBX_WIRE_MAGIC 0x53425800u                 /* "SBX\0" | version */
#define SBX_WIRE_HEADER_SIZE 16u
#define SBX_WIRE_MAX_FDS 16u               /* = SBX_SCRIPT_INPUTS_MAX: a JOB_START's inputs */

typedef struct WireHeader {
        uint32_t magic_version;
        uint32_t len;
        uint16_t type;
        uint16_t flags;     /* low 8 bits: number of fds attached */
        uint32_t seq;
} WireHeader;

/* Pack msg with a header into buf (at least SBX_WIRE_HEADER_SIZE + SBX_FRAME_MAX
 * bytes); returns the frame size or -EMSGSIZE/-EINVAL. */
ssize_t wire_pack(const Sbx__Msg *msg, uint32_t seq, size_t n_fds, uint8_t *buf, size_t size);

/* Parse a received frame (header + body, exactly len bytes) that arrived with
 * n_fds fds. Checks version, sizes, that the body unpacks, that its type is
 * known and that the oneof body matches the type. Returns 0, -EPROTO on a
 * version mismatch, or -EBADMSG. *ret_msg is freed with sbx__msg__free_unpacked. */
int wire_parse(const uint8_t *buf, size_t len, size_t n_fds, Sbx__Msg **ret_msg, uint32_t *ret_seq);

/* Send one frame (MSG_NOSIGNAL). Returns 0, -EAGAIN if the socket is full, or -errno. */
int wire_send(int fd, const Sbx__Msg *msg, uint32_t seq, const int *fds, size_t n_fds);

/* Receive one frame. Received fds are close-on-exec and returned in ret_fds
 * (up to SBX_WIRE_MAX_FDS; the caller owns them); on any error they are closed.
 * Returns 0, -EAGAIN, -ECONNRESET on orderly EOF, -EBADMSG/-EPROTO on a bad frame. */
int wire_recv(int fd, Sbx__Msg **ret_msg, uint32_t *ret_seq, int *ret_fds, size_t *ret_n_fds);

/* A reply that came packed in a memfd (Reply.in_fd): read and unpack it, at
 * most max bytes. -EBADMSG if it does not unpack. */
int wire_reply_from_fd(int fd, size_t max, Sbx__Reply **ret);

/* The oneof body case a message type must carry, or 0 for unknown types. */
int wire_body_case_for_type(Sbx__MsgType type);

/* Make *m a message of this type carrying body (a message of the body case
 * the type must carry): the type/body pair set in one place. */
void wire_msg_set(Sbx__Msg *m, Sbx__MsgType type, void *body);

/* wire_msg_set() with a new body of message type desc, initialized in
 * storage (size bytes, suitably aligned; it must hold desc's message).
 * Returns the body. */
void *wire_msg_body(Sbx__Msg *m, Sbx__MsgType type, const ProtobufCMessageDescriptor *desc, void *storage,
                    size_t size);

static inline void sbx_msg_freep(Sbx__Msg **m) {
        if (*m)
                sbx__msg__free_unpacked(*m, NULL);
}
#define _cleanup_msg_ _cleanup_(sbx_msg_freep)

/* A blocking SOCK_SEQPACKET connection to the unix socket at path. */
int wire_connect(const char *path, int *ret_fd);
