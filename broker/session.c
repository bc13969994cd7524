/* One MCP session of the broker (session.h): its JSON-RPC methods, its
 * connection to sbxd and the calls in flight on it. Both front ends drive it:
 * sandbox-mcp on stdio (broker.c) and sbx-gateway over HTTP (gateway/), each
 * handing it the client's messages and polling its socket; what goes to the
 * client leaves through the front end's send callback. Logs to stderr, as
 * both programs do. Not thread-safe: the gateway holds a lock around it. */
#include <errno.h>
#include <poll.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "jsonrpc.h"
#include "log.h"
#include "macro.h"
#include "mcp.h"
#include "sbx-limits.h"
#include "session.h"
#include "wire.h"

#define TOOL_NAME_SHOWN 128u            /* bytes of an unknown tool name echoed back */
/* Frames waiting for sbxd to read: the hello, one request per call in flight
 * and cancellations. More means sbxd stopped reading; memory stays bounded. */
#define QUEUE_MAX (2u * SBX_MCP_MAX_PENDING + 1u)

typedef struct Pending {
        uint32_t seq;                   /* of the request sent to sbxd */
        json_t *id;                     /* JSON-RPC id to answer */
        json_t *args;                   /* the validated arguments, for rendering the reply */
        const Tool *tool;
        json_t *progress_token;         /* params._meta.progressToken of the call, or NULL */
        uint64_t timeout_s;             /* the call's timeout argument (0: none) */
        unsigned long long deadline_usec; /* it is given up then, if sbxd has not answered */
} Pending;

/* A packed frame waiting for room in the socket, with the fd (or -EBADF)
 * that goes with it as SCM_RIGHTS. */
typedef struct Frame {
        struct Frame *next;
        int fds[SBX_WIRE_MAX_FDS];
        size_t n_fds;
        size_t len;
        uint8_t data[];
} Frame;

struct McpSession {
        McpSessionConfig cfg;
        int sock;                       /* -EBADF while not connected */
        uint32_t next_seq;
        Frame *out_head, *out_tail;
        size_t n_out;
        Pending pending[SBX_MCP_MAX_PENDING];
        size_t n_pending;
        uint32_t probe_seq;             /* the start-up SANDBOX_LIST, until answered */
        uint32_t roots_seq;             /* the start-up SCRIPT_ROOTS (script set), until answered */
        bool logging_quiet;             /* logging/setLevel above info: no job notifications */
        char *lost;                     /* why the connection to sbxd was last lost or refused */
        char *status;                   /* for the initialize instructions: what the start-up found */
        char mcp_session[33];           /* the MCP session identity, made at initialize ("" before) */
};

#define _cleanup_json_ _cleanup_(json_decrefp)

/* ---- to the client ----------------------------------------------------------------
 * id: the request a message answers (response) or belongs to (a progress
 * notification), or NULL. */

/* A message of at most max bytes (JSONRPC_OUT_MAX, or a tool's larger
 * result_max); splice: its string written from a descriptor, in parts (NULL:
 * none, the message goes whole). */
static int send_message_max(McpSession *b, json_t *msg, const json_t *id, bool response, size_t max,
                            const JsonSplice *splice) {
        _cleanup_json_ json_t *m = msg;
        _cleanup_free_ char *line = NULL;
        size_t len;
        int r;

        if (!m)
                return -ENOMEM;
        r = jsonrpc_serialize_parts(m, splice, max, splice ? b->cfg.send_part : NULL, b->cfg.userdata, &line, &len);
        if (r == -EPIPE) {
                /* Part of the line is out: nothing can follow it on this stream. */
                log_error("A download_file result broke off after its first parts, exiting");
                return r;
        }
        if (r == -EMSGSIZE) {
                _cleanup_json_ json_t *e = NULL;
                char text[96];

                log_warning("Response to a request exceeds %zu bytes, sending an error instead", max);
                snprintf(text, sizeof(text), "response exceeds %zu bytes", max);
                e = jsonrpc_error(json_object_get(m, "id"), JSONRPC_INTERNAL_ERROR, text);
                if (!e)
                        return -ENOMEM;
                r = jsonrpc_serialize(e, JSONRPC_OUT_MAX, &line, &len);
        }
        if (r < 0)
                return r;
        return b->cfg.send(b->cfg.userdata, line, len, id, response);
}

static int send_message(McpSession *b, json_t *msg, const json_t *id) {
        return send_message_max(b, msg, id, true, JSONRPC_OUT_MAX, NULL);
}

static int send_error(McpSession *b, const json_t *id, int code, const char *message) {
        return send_message(b, jsonrpc_error(id, code, message), id);
}

static int send_tool_error(McpSession *b, const json_t *id, const char *text) {
        return send_message(b, jsonrpc_result(id, tool_error_result(text)), id);
}

/* ---- the supervisor connection ---------------------------------------------------- */

static Pending *pending_find_seq(McpSession *b, uint32_t seq) {
        for (size_t i = 0; i < b->n_pending; i++)
                if (b->pending[i].seq == seq)
                        return &b->pending[i];
        return NULL;
}

static Pending *pending_find_id(McpSession *b, const json_t *id) {
        for (size_t i = 0; i < b->n_pending; i++)
                if (json_equal(b->pending[i].id, (json_t *) id))
                        return &b->pending[i];
        return NULL;
}

/* Forget p; returns its id, owned by the caller. */
static json_t *pending_remove(McpSession *b, Pending *p) {
        json_t *id = p->id;

        json_decref(p->args);
        json_decref(p->progress_token);
        *p = b->pending[--b->n_pending];
        return id;
}

static uint32_t broker_next_seq(McpSession *b) {
        uint32_t seq;

        do
                seq = b->next_seq++;
        while (seq == 0 || pending_find_seq(b, seq));   /* 0 is the hello's */
        return seq;
}

static void broker_clear_queue(McpSession *b) {
        while (b->out_head) {
                Frame *f = b->out_head;
                b->out_head = f->next;
                for (size_t i = 0; i < f->n_fds; i++)
                        (void) safe_close(f->fds[i]);
                free(f);
        }
        b->out_tail = NULL;
        b->n_out = 0;
}

/* Close the connection; every call in flight gets an error result. */
static int broker_drop(McpSession *b, const char *text) {
        int r = 0;

        free(b->lost);
        b->lost = strdup(text);
        b->sock = safe_close(b->sock);
        broker_clear_queue(b);
        while (b->n_pending > 0) {
                _cleanup_json_ json_t *id = pending_remove(b, &b->pending[b->n_pending - 1]);
                int k = send_tool_error(b, id, text);
                if (k < 0 && r == 0)
                        r = k;
        }
        return r;
}

/* Queue msg with n_fds fds (attached as SCM_RIGHTS, in order), which are
 * taken in every case. */
static int broker_queue_fds(McpSession *b, const Sbx__Msg *msg, uint32_t seq, int *fds, size_t n_fds) {
        size_t body = sbx__msg__get_packed_size(msg);
        ssize_t len = -EMSGSIZE;
        Frame *f = NULL;

        if (body <= SBX_FRAME_MAX && b->n_out < QUEUE_MAX && n_fds <= SBX_WIRE_MAX_FDS) {
                f = malloc(sizeof(Frame) + SBX_WIRE_HEADER_SIZE + body);
                len = f ? wire_pack(msg, seq, n_fds, f->data, SBX_WIRE_HEADER_SIZE + body) : -ENOMEM;
        } else if (b->n_out >= QUEUE_MAX)
                len = -ENOBUFS;
        if (len < 0) {
                free(f);
                for (size_t i = 0; i < n_fds; i++)
                        (void) safe_close(fds[i]);
                return (int) len;
        }
        memcpy(f->fds, fds, n_fds * sizeof(int));
        f->n_fds = n_fds;
        f->len = (size_t) len;
        f->next = NULL;
        if (b->out_tail)
                b->out_tail->next = f;
        else
                b->out_head = f;
        b->out_tail = f;
        b->n_out++;
        return 0;
}

/* The same with fd (>= 0: the frame's one SCM_RIGHTS fd), taken in every case. */
static int broker_queue(McpSession *b, const Sbx__Msg *msg, uint32_t seq, int fd) {
        return broker_queue_fds(b, msg, seq, &fd, fd >= 0);
}

/* Send what the socket takes. A failed socket is dropped (r < 0 only when
 * stdout failed while telling the calls). */
static int broker_flush(McpSession *b) {
        while (b->sock >= 0 && b->out_head) {
                Frame *f = b->out_head;
                ssize_t n = sendmsg_with_fds(b->sock, f->data, f->len, f->fds, f->n_fds,
                                             MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                return 0;
                        log_warning_errno(-errno, "Lost connection to sbxd at %s: %m", b->cfg.socket_path);
                        return broker_drop(b, "lost connection to sbxd");
                }
                b->out_head = f->next;
                if (!b->out_head)
                        b->out_tail = NULL;
                b->n_out--;
                for (size_t i = 0; i < f->n_fds; i++)
                        (void) safe_close(f->fds[i]); /* sbxd has its own reference now */
                free(f);
        }
        return 0;
}

static int broker_connect(McpSession *b) {
        _cleanup_close_ int fd = -EBADF;
        Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;
        int r;

        if (b->sock >= 0)
                return 0;
        r = wire_connect(b->cfg.socket_path, &fd);
        if (r < 0)
                return r;
        r = fd_nonblock(fd, true);
        if (r < 0)
                return r;

        hello.client_name = (char *) b->cfg.client_name;
        hello.mcp_session = b->mcp_session;
        hello.token = (char *) (b->cfg.token ?: "");
        hello.gateway_url = (char *) (b->cfg.gateway_url ?: "");
        msg.type = SBX__MSG_TYPE__MSG_CLIENT_HELLO;
        msg.body_case = SBX__MSG__BODY_HELLO;
        msg.hello = &hello;
        r = broker_queue(b, &msg, 0, -EBADF);
        if (r < 0)
                return r;
        b->sock = TAKE_FD(fd);
        log_debug("Connected to sbxd at %s", b->cfg.socket_path);
        return 0;
}

static int broker_on_probe(McpSession *b, const Sbx__Reply *reply);

static void reply_freep(Sbx__Reply **r) {
        if (*r)
                sbx__reply__free_unpacked(*r, NULL);
}

/* A call that waits (for its image's build): an MCP progress notification to
 * a client that sent a progressToken (sbxd sends these only then). */
static int broker_on_progress(McpSession *b, const Sbx__Progress *pr, uint32_t seq) {
        Pending *p = pending_find_seq(b, seq);
        json_t *n;

        if (!p || !p->progress_token)
                return 0;
        n = json_pack("{s:s, s:s, s:{s:O, s:i, s:s}}", "jsonrpc", "2.0", "method", "notifications/progress",
                      "params", "progressToken", p->progress_token, "progress", (json_int_t) pr->progress,
                      "message", pr->message);
        return n ? send_message_max(b, n, p->id, false, JSONRPC_OUT_MAX, NULL) : -ENOMEM;
}

/* A background job ended (the script set): one advisory MCP logging
 * notification, unless the client asked for warnings and worse only. */
static int broker_on_job_ended(McpSession *b, const Sbx__JobInfo *o) {
        json_t *n;

        if (b->logging_quiet)
                return 0;
        n = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:o}}}", "jsonrpc", "2.0", "method",
                      "notifications/message", "params", "level", "info", "logger", "sandbox_script", "data",
                      "job_id", o->job_id, "status", o->status, "exit_code",
                      o->has_exit_code ? json_integer(o->exit_code) : json_null());
        /* A notification, not an answer: sbx-gateway puts it on the session's GET stream. */
        return n ? send_message_max(b, n, NULL, false, JSONRPC_OUT_MAX, NULL) : -ENOMEM;
}

/* The start-up SCRIPT_ROOTS: the live descriptions of sandbox_script's inputs. */
static int broker_on_roots(McpSession *b, const Sbx__Reply *reply) {
        const Sbx__ScriptRootsReply *l = reply->body_case == SBX__REPLY__BODY_SCRIPT_ROOTS ? reply->script_roots : NULL;

        b->roots_seq = 0;
        if (!l)
                log_warning("sbxd did not tell script_allowed_paths: %s", reply->errmsg ? reply->errmsg : "unexpected reply");
        return script_set_roots((Tools *) b->cfg.tools, l ? l->roots : NULL, l ? l->n_roots : 0, l != NULL);
}

/* fd: the one descriptor that came with the frame, or -EBADF. */
static int broker_on_frame(McpSession *b, const Sbx__Msg *msg, uint32_t seq, int fd) {
        _cleanup_json_ json_t *id = NULL, *result = NULL;
        JsonSplice splice = { .fd = -EBADF };
        _cleanup_(reply_freep) Sbx__Reply *unpacked = NULL;
        const Sbx__Reply *reply = msg->reply;
        Pending *p;
        int r;

        if (msg->type == SBX__MSG_TYPE__MSG_PROGRESS)
                return broker_on_progress(b, msg->progress, seq);
        if (msg->type == SBX__MSG_TYPE__MSG_JOB_ENDED)
                return broker_on_job_ended(b, msg->job_ended);
        if (msg->type != SBX__MSG_TYPE__MSG_REPLY) {
                log_warning("sbxd sent unexpected message type %d, dropping the connection", (int) msg->type);
                return broker_drop(b, "lost connection to sbxd");
        }
        if (seq == 0) {
                if (reply->err < 0) {
                        _cleanup_free_ char *text = NULL;

                        log_warning("sbxd refused the connection: %s", reply->errmsg);
                        if (asprintf(&text, "sbxd refused the connection: %s",
                                     reply->errmsg && reply->errmsg[0] ? reply->errmsg : strerror(-reply->err)) < 0)
                                return -ENOMEM;
                        return broker_drop(b, text);
                }
                return 0;
        }
        if (seq == b->probe_seq)
                return broker_on_probe(b, reply);
        if (seq == b->roots_seq)
                return broker_on_roots(b, reply);
        p = pending_find_seq(b, seq);
        if (!p) {
                log_debug("Reply to seq %u, which is no longer pending, ignoring", seq);
                return 0;
        }
        if (msg->type == SBX__MSG_TYPE__MSG_REPLY && reply->in_fd) {
                /* Larger than a frame: the whole reply came in the memfd. */
                r = fd >= 0 ? wire_reply_from_fd(fd, SBX_REPLY_IN_FD_MAX, &unpacked) : -EBADMSG;
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        log_warning("sbxd sent a reply in a memfd that does not unpack, dropping the connection");
                        return broker_drop(b, "lost connection to sbxd");
                }
                reply = unpacked;
                fd = -EBADF;
        }
        if (!p->tool) {
                /* resources/read: its contents, or a JSON-RPC error */
                json_t *msg_out;

                r = lifecycle_resource_render(reply, json_string_value(p->args), &result);
                if (r == -ENOMEM)
                        return r;
                id = pending_remove(b, p);
                if (r < 0)
                        msg_out = jsonrpc_error(id, r == -ENOENT ? MCP_RESOURCE_NOT_FOUND : JSONRPC_INTERNAL_ERROR,
                                                reply->err < 0 && reply->errmsg ? reply->errmsg
                                                                                : "sbxd sent an unexpected reply");
                else
                        msg_out = jsonrpc_result(id, TAKE_PTR(result));
                return send_message(b, msg_out, id);
        }
        r = tool_result_from_reply(p->tool, p->args, reply, fd, b->cfg.content, b->cfg.send_part ? &splice : NULL,
                                   &result);
        if (r < 0)
                return r;
        id = pending_remove(b, p);
        return send_message_max(b, jsonrpc_result(id, TAKE_PTR(result)), id, true, tool_result_max(p->tool),
                                splice.at ? &splice : NULL);
}

int mcp_session_on_socket(McpSession *b, short revents) {
        int r;

        if (revents & POLLOUT) {
                r = broker_flush(b);
                if (r < 0)
                        return r;
        }
        while (b->sock >= 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
                _cleanup_msg_ Sbx__Msg *msg = NULL;
                int fds[SBX_WIRE_MAX_FDS];
                size_t n_fds = 0;
                uint32_t seq;

                r = wire_recv(b->sock, &msg, &seq, fds, &n_fds);
                if (r == -EAGAIN)
                        break;
                if (r < 0) {
                        /* sbxd closes an idle connection; the next call connects again. */
                        if (r == -ECONNRESET && b->n_pending == 0)
                                log_debug("sbxd at %s closed the idle connection", b->cfg.socket_path);
                        else if (r == -ECONNRESET)
                                log_warning("sbxd at %s closed the connection", b->cfg.socket_path);
                        else if (r == -EPROTO)
                                log_warning("sbxd at %s speaks another protocol version", b->cfg.socket_path);
                        else
                                log_warning_errno(r, "Failed to receive from sbxd at %s: %m", b->cfg.socket_path);
                        return broker_drop(b, "lost connection to sbxd");
                }
                for (size_t i = 1; i < n_fds; i++)
                        safe_close(fds[i]);
                r = broker_on_frame(b, msg, seq, n_fds > 0 ? fds[0] : -EBADF);
                if (n_fds > 0)
                        safe_close(fds[0]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- start-up ----------------------------------------------------------------
 * sandbox-mcp tries sbxd at once rather than at the first call: a client shows
 * a server as connected whatever its configuration, so a wrong SBX_SOCKET
 * would otherwise go unnoticed until an agent's first call fails. It asks for
 * the caller's sandboxes and waits at most SBX_MCP_PROBE_MS for the answer;
 * what it learns becomes the last sentence of the initialize instructions,
 * and a failure is also one line on stderr (where clients show server logs).
 * Either way it serves, and each call connects again if needed. */

static int broker_on_probe(McpSession *b, const Sbx__Reply *reply) {
        const Sbx__SandboxListReply *l = reply->body_case == SBX__REPLY__BODY_SANDBOX_LIST ? reply->sandbox_list : NULL;
        _cleanup_free_ char *names = NULL;
        size_t len = 0, n = l ? l->n_sandboxes : 0;
        FILE *f;
        int r;

        b->probe_seq = 0;
        free(b->status);
        b->status = NULL;
        if (reply->err < 0 || !l) {
                log_warning("sbxd did not list the sandboxes: %s", reply->errmsg ? reply->errmsg : "unexpected reply");
                return 0;
        }
        f = open_memstream(&names, &len);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < n && i < SBX_SANDBOXES_NAMED; i++)
                fprintf(f, "%s%s", i ? ", " : "", l->sandboxes[i]->name);
        if (fclose(f) != 0)
                return -ENOMEM;
        if (n == 0)
                r = asprintf(&b->status, "sbxd has no sandbox for this user yet: an administrator creates one with "
                             "'sbxctl sandbox create NAME --source DIR --owner USER'.");
        else if (n <= SBX_SANDBOXES_NAMED)
                r = asprintf(&b->status, "Your sandbox%s (sandbox_id): %s.", n == 1 ? "" : "es", names);
        else
                r = asprintf(&b->status, "You have %zu sandboxes (sandbox_id), among them %s; list_sandboxes "
                             "(sandbox-mcp --set runtime,sessions) lists them all.", n, names);
        if (r < 0) {
                b->status = NULL;
                return -ENOMEM;
        }
        log_debug("Start-up: %s", b->status);
        return 0;
}

static int broker_unreachable(McpSession *b, const char *why) {
        log_error("Cannot reach sbxd at %s: %s; start sbxd, or set SBX_SOCKET (or --socket) to its socket. "
                  "Serving anyway: every call tries again.", b->cfg.socket_path, why);
        free(b->status);
        b->status = NULL;
        if (asprintf(&b->status, "sbxd is not reachable at %s (%s), so every call fails for now: start sbxd "
                     "(systemctl start sbxd), or set SBX_SOCKET in this server's environment (or --socket) to "
                     "the socket sbxd listens on (default " MCP_DEFAULT_SOCKET "). Each call connects again.",
                     b->cfg.socket_path, why) < 0)
                return -ENOMEM;
        return 0;
}

int mcp_session_probe(McpSession *b) {
        Sbx__SandboxList list = SBX__SANDBOX_LIST__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;
        unsigned long long deadline = now_usec() + SBX_MCP_PROBE_MS * 1000ull;
        int r;

        r = broker_connect(b);
        if (r < 0)
                return broker_unreachable(b, strerror(-r));
        msg.type = SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST;
        msg.body_case = SBX__MSG__BODY_SANDBOX_LIST;
        msg.sandbox_list = &list;
        b->probe_seq = broker_next_seq(b);
        r = broker_queue(b, &msg, b->probe_seq, -EBADF);
        /* sandbox-mcp's own tools only: the gateway's sessions share theirs (the
         * static descriptions name script_allowed_paths; docs/gateway.md). */
        if (r >= 0 && !b->cfg.token && (tools_sets(b->cfg.tools) & TOOL_SET_SCRIPT)) {
                Sbx__ScriptRoots roots = SBX__SCRIPT_ROOTS__INIT;

                wire_msg_set(&msg, SBX__MSG_TYPE__MSG_CLIENT_SCRIPT_ROOTS, &roots);
                b->roots_seq = broker_next_seq(b);
                r = broker_queue(b, &msg, b->roots_seq, -EBADF);
        }
        if (r >= 0)
                r = broker_flush(b);
        while (r >= 0 && b->sock >= 0 && (b->probe_seq != 0 || b->roots_seq != 0)) {
                struct pollfd p = { .fd = b->sock, .events = POLLIN | (b->out_head ? POLLOUT : 0) };
                unsigned long long now = now_usec();

                if (now >= deadline) {
                        char why[64];

                        b->probe_seq = b->roots_seq = 0;
                        snprintf(why, sizeof(why), "it did not answer within %u ms", SBX_MCP_PROBE_MS);
                        return broker_unreachable(b, why);
                }
                r = poll(&p, 1, (int) ((deadline - now + 999) / 1000));
                if (r < 0 && errno == EINTR)
                        r = 0;
                else if (r < 0)
                        r = -errno;
                else if (r > 0)
                        r = mcp_session_on_socket(b, p.revents);
        }
        if (r < 0)
                return r;
        if (b->sock < 0)
                return broker_unreachable(b, b->lost ?: "the connection was closed");
        return 0;
}

/* ---- MCP methods --------------------------------------------------------------- */

/* "Unknown tool: X" with X shortened at a character boundary. */
static int send_unknown_tool(McpSession *b, const json_t *id, const char *name, size_t len) {
        char text[TOOL_NAME_SHOWN + 64];
        size_t n = strnlen(name, MIN(len, (size_t) TOOL_NAME_SHOWN));

        while (n < len && n > 0 && ((unsigned char) name[n] & 0xc0) == 0x80)
                n--;
        snprintf(text, sizeof(text), "Unknown tool: %.*s%s", (int) n, name, n < len ? "…" : "");
        return send_error(b, id, JSONRPC_INVALID_PARAMS, text);
}

/* Send req for the request id (args kept for rendering; tool NULL: a
 * resources/read of the URI args; token: the call's progressToken, or NULL).
 * On a failure to send, *ret_text says why for the caller's error answer, and
 * 0 is returned. */
static int broker_send(McpSession *b, const json_t *id, ToolRequest *req, json_t *args, const Tool *tool,
                       json_t *token, char **ret_text) {
        uint32_t seq;
        int r;

        if (b->n_pending >= SBX_MCP_MAX_PENDING)
                return (*ret_text = strdup("too many concurrent calls")) ? 0 : -ENOMEM;
        r = broker_connect(b);
        if (r < 0) {
                log_debug("Cannot reach sbxd at %s: %s", b->cfg.socket_path, strerror(-r));
                if (asprintf(ret_text, "cannot reach sbxd at %s: %s; is sbxd running?", b->cfg.socket_path,
                             strerror(-r)) < 0)
                        return -ENOMEM;
                return 0;
        }
        seq = broker_next_seq(b);
        {
                int fds[SBX_WIRE_MAX_FDS];
                size_t n = 0;

                if (req->fd >= 0)
                        fds[n++] = TAKE_FD(req->fd);
                for (size_t i = 0; i < req->n_more_fds; i++)
                        fds[n++] = TAKE_FD(req->more_fds[i]);
                req->n_more_fds = 0;
                r = broker_queue_fds(b, &req->msg, seq, fds, n);
        }
        if (r == -EMSGSIZE || r == -EINVAL)
                return (*ret_text = strdup("request too large for sbxd")) ? 0 : -ENOMEM;
        if (r == -ENOBUFS) {
                log_warning("sbxd at %s is not reading requests", b->cfg.socket_path);
                return (*ret_text = strdup("too many concurrent calls")) ? 0 : -ENOMEM;
        }
        if (r < 0)
                return r;
        b->pending[b->n_pending++] = (Pending) {
                .seq = seq,
                .id = json_incref((json_t *) id),
                .args = json_incref(args),
                .tool = tool,
                .progress_token = json_incref(token),
                .timeout_s = req->timeout_s,
                .deadline_usec = req->timeout_s ? now_usec() + req->timeout_s * 1000000ull : 0,
        };
        log_debug("%s: sent as seq %u", tool ? tool_name(tool) : "resources/read", seq);
        return broker_flush(b);
}

static int handle_tools_call(McpSession *b, const JsonRpcMessage *m) {
        _cleanup_json_ json_t *empty = NULL;
        _cleanup_free_ char *error = NULL;
        _cleanup_(tool_request_done) ToolRequest req = { .fd = -EBADF };
        json_t *name, *args, *token;
        const Tool *tool;
        int r;

        if (!json_is_object(m->params))
                return send_error(b, m->id, JSONRPC_INVALID_PARAMS, "Invalid params: params must be an object");
        name = json_object_get(m->params, "name");
        if (!json_is_string(name))
                return send_error(b, m->id, JSONRPC_INVALID_PARAMS, "Invalid params: name must be a string");
        tool = tools_find(b->cfg.tools, json_string_value(name), json_string_length(name));
        if (!tool)
                return send_unknown_tool(b, m->id, json_string_value(name), json_string_length(name));
        token = json_object_get(json_object_get(m->params, "_meta"), "progressToken");
        if (token && !json_is_string(token) && !json_is_integer(token))
                token = NULL;

        args = json_object_get(m->params, "arguments");
        if (!args) {
                args = empty = json_object();
                if (!args)
                        return -ENOMEM;
        }
        r = tool_prepare(tool, args, &req, &error);
        if (r >= 0 && req.msg.body_case == SBX__MSG__BODY_EXEC && token)
                req.msg.exec->progress = true;
        if (r >= 0 && req.msg.body_case == SBX__MSG__BODY_RUNTIME_EXECUTE && token)
                req.msg.runtime_execute->progress = true;
        if (r >= 0 && req.msg.body_case == SBX__MSG__BODY_TAKEOVER && token)
                req.msg.takeover->progress = true;
        if (r == -EINVAL) {
                log_debug("%s: %s", tool_name(tool), error);
                return send_tool_error(b, m->id, error);
        }
        if (r < 0) {
                _cleanup_free_ char *text = NULL;

                /* Not a protocol failure: memfd_create or its tmpfs failed. */
                if (r == -ENOMEM)
                        return r;
                if (asprintf(&text, "cannot prepare the request: %s", strerror(-r)) < 0)
                        return -ENOMEM;
                return send_tool_error(b, m->id, text);
        }

        r = broker_send(b, m->id, &req, args, tool, token, &error);
        if (r < 0 || !error)
                return r;
        return send_tool_error(b, m->id, error);
}

/* resources/read of sandboxes://{namespace} (the lifecycle set): a CLAIM_LIST. */
static int handle_resource_read(McpSession *b, const JsonRpcMessage *m) {
        _cleanup_free_ char *error = NULL;
        _cleanup_(tool_request_done) ToolRequest req = { .fd = -EBADF };
        json_t *uri = json_is_object(m->params) ? json_object_get(m->params, "uri") : NULL;
        int r;

        if (!json_is_string(uri))
                return send_error(b, m->id, JSONRPC_INVALID_PARAMS, "Invalid params: uri must be a string");
        r = lifecycle_resource_prepare(json_string_value(uri), &req, &error);
        if (r == -EINVAL)
                return send_error(b, m->id, JSONRPC_INVALID_PARAMS, error);
        if (r < 0)
                return r;
        r = broker_send(b, m->id, &req, uri, NULL, NULL, &error);
        if (r < 0 || !error)
                return r;
        return send_error(b, m->id, JSONRPC_INTERNAL_ERROR, error);
}

/* p is never answered: sbxd is told to drop it. */
static int pending_cancel(McpSession *b, Pending *p) {
        Sbx__Cancel cancel = SBX__CANCEL__INIT;
        Sbx__Msg msg = SBX__MSG__INIT;
        int r;

        cancel.request_seq = p->seq;
        msg.type = SBX__MSG_TYPE__MSG_CLIENT_CANCEL;
        msg.body_case = SBX__MSG__BODY_CANCEL;
        msg.cancel = &cancel;
        json_decref(pending_remove(b, p));
        r = broker_queue(b, &msg, broker_next_seq(b), -EBADF);
        if (r == -ENOBUFS) {
                log_warning("sbxd at %s is not reading requests, not sending a cancellation", b->cfg.socket_path);
                return 0;
        }
        if (r < 0)
                return r;
        return broker_flush(b);
}

int mcp_session_cancel(McpSession *b, const json_t *request_id) {
        Pending *p = request_id ? pending_find_id(b, request_id) : NULL;

        if (!p) {
                log_debug("Cancellation of a request not in flight, ignoring");
                return 0;
        }
        return pending_cancel(b, p);
}

static int handle_cancelled(McpSession *b, const JsonRpcMessage *m) {
        return mcp_session_cancel(b, json_is_object(m->params) ? json_object_get(m->params, "requestId") : NULL);
}

/* Milliseconds until the first call's timeout, for poll(): -1 if none has one. */
int mcp_session_next_timeout_ms(const McpSession *b) {
        unsigned long long next = 0, now = now_usec();

        for (size_t i = 0; i < b->n_pending; i++)
                if (b->pending[i].deadline_usec && (!next || b->pending[i].deadline_usec < next))
                        next = b->pending[i].deadline_usec;
        if (!next)
                return -1;
        return next <= now ? 0 : (int) MIN((next - now + 999) / 1000, (unsigned long long) INT_MAX);
}

/* Calls whose timeout passed: an error result naming it, and a cancellation to sbxd. */
int mcp_session_expire(McpSession *b) {
        unsigned long long now = now_usec();

        for (size_t i = 0; i < b->n_pending;) {
                Pending *p = &b->pending[i];
                _cleanup_json_ json_t *id = NULL;
                _cleanup_free_ char *text = NULL;
                int r;

                if (!p->deadline_usec || p->deadline_usec > now) {
                        i++;
                        continue;
                }
                if (asprintf(&text, "%s: sbxd did not answer within timeout (%llu s); the request was abandoned and "
                             "nothing was changed (a file is written under a temporary name and renamed when whole); "
                             "raise timeout or try again", p->tool ? tool_name(p->tool) : "request",
                             (unsigned long long) p->timeout_s) < 0)
                        return -ENOMEM;
                log_debug("%s", text);
                id = json_incref(p->id);
                r = pending_cancel(b, p);       /* p is gone, another call is at i */
                if (r < 0)
                        return r;
                r = send_tool_error(b, id, text);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The MCP session identity: random, made at initialize (or at the first
 * call, for a client that sends none), the same for the rest of this
 * process. sbxd learns it from the hello: a connection made before it
 * existed (the start-up probe) is closed, and the next call connects with it. */
static int broker_session_identity(McpSession *b) {
        int r;

        if (b->mcp_session[0])
                return 0;
        r = random_hex(b->mcp_session, 32);
        if (r < 0)
                return r;
        if (b->sock >= 0 && b->n_pending == 0) {
                b->probe_seq = 0;
                b->sock = safe_close(b->sock);
                broker_clear_queue(b);
        }
        log_debug("MCP session identity %s", b->mcp_session);
        return 0;
}

static int handle_request(McpSession *b, const JsonRpcMessage *m) {
        int r;

        if (strcmp(m->method, "initialize") == 0 || strcmp(m->method, "tools/call") == 0) {
                r = broker_session_identity(b);
                if (r < 0)
                        return r;
        }
        if (strcmp(m->method, "initialize") == 0) {
                json_t *res = mcp_initialize_result_for(m->params, SBX_VERSION, b->status,
                                                        tools_sets(b->cfg.tools) == TOOL_SET_LIFECYCLE,
                                                        tools_sets(b->cfg.tools) & TOOL_SET_LIFECYCLE);
                /* The script set's background jobs end with a notifications/message. */
                if (res && (tools_sets(b->cfg.tools) & TOOL_SET_SCRIPT) &&
                    json_object_set_new(json_object_get(res, "capabilities"), "logging", json_object()) < 0) {
                        json_decref(res);
                        res = NULL;
                }
                return send_message(b, jsonrpc_result(m->id, res), m->id);
        }
        if (strcmp(m->method, "logging/setLevel") == 0 && (tools_sets(b->cfg.tools) & TOOL_SET_SCRIPT)) {
                const char *level = json_string_value(json_object_get(m->params, "level"));

                if (!level)
                        return send_error(b, m->id, JSONRPC_INVALID_PARAMS, "Invalid params: level must be a string");
                /* The notifications are of level info: any higher level asked for silences them. */
                b->logging_quiet = strcmp(level, "debug") != 0 && strcmp(level, "info") != 0;
                return send_message(b, jsonrpc_result(m->id, json_object()), m->id);
        }
        if (strncmp(m->method, "resources/", 10) == 0 && (tools_sets(b->cfg.tools) & TOOL_SET_LIFECYCLE)) {
                if (strcmp(m->method, "resources/templates/list") == 0)
                        return send_message(b, jsonrpc_result(m->id, lifecycle_resource_templates()), m->id);
                if (strcmp(m->method, "resources/list") == 0)
                        return send_message(b, jsonrpc_result(m->id, json_pack("{s:[]}", "resources")), m->id);
                if (strcmp(m->method, "resources/read") == 0)
                        return handle_resource_read(b, m);
        }
        if (strcmp(m->method, "ping") == 0)
                return send_message(b, jsonrpc_result(m->id, json_object()), m->id);
        if (strcmp(m->method, "tools/list") == 0)
                return send_message(b, jsonrpc_result(m->id, json_incref((json_t *) tools_list_result(b->cfg.tools))), m->id);
        if (strcmp(m->method, "tools/call") == 0)
                return handle_tools_call(b, m);
        return send_error(b, m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found");
}

int mcp_session_handle_line(const char *line, size_t len, bool oversize, void *userdata) {
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = NULL;
        McpSession *b = userdata;
        int r;

        if (oversize) {
                char text[96];
                json_t *id = jsonrpc_id_from_tail(line, len);

                log_warning("Discarded an input line longer than %u bytes", SBX_MCP_LINE_MAX);
                snprintf(text, sizeof(text), "request line exceeds %u bytes", SBX_MCP_LINE_MAX);
                r = send_error(b, id, JSONRPC_INVALID_REQUEST, text);
                json_decref(id);
                return r;
        }
        r = jsonrpc_parse(line, len, &m);
        if (r < 0)
                return r;
        switch (m->kind) {
        case JSONRPC_EMPTY:
                return 0;
        case JSONRPC_INVALID:
                log_debug("Invalid input line: %s", m->error_message);
                return send_error(b, m->id, m->error_code, m->error_message);
        case JSONRPC_RESPONSE:
                log_debug("Ignoring a response: this server sends no requests");
                return 0;
        case JSONRPC_NOTIFICATION:
                if (strcmp(m->method, "notifications/cancelled") == 0)
                        return handle_cancelled(b, m);
                return 0;       /* notifications/initialized and anything else */
        case JSONRPC_REQUEST:
                return handle_request(b, m);
        }
        return 0;
}

/* ---- the session ----------------------------------------------------------------- */

int mcp_session_new(const McpSessionConfig *cfg, McpSession **ret) {
        McpSession *b = calloc(1, sizeof(*b));

        if (!b)
                return -ENOMEM;
        b->cfg = *cfg;
        b->sock = -EBADF;
        b->next_seq = 1;
        if (cfg->identity)
                strlcpy(b->mcp_session, cfg->identity, sizeof(b->mcp_session));
        *ret = b;
        return 0;
}

McpSession *mcp_session_free(McpSession *b) {
        if (!b)
                return NULL;
        /* Calls still in flight are abandoned; sbxd sees the connection close. */
        for (size_t i = 0; i < b->n_pending; i++) {
                json_decref(b->pending[i].id);
                json_decref(b->pending[i].args);
                json_decref(b->pending[i].progress_token);
        }
        broker_clear_queue(b);
        (void) safe_close(b->sock);
        free(b->lost);
        free(b->status);
        free(b);
        return NULL;
}

int mcp_session_fd(const McpSession *b) {
        return b->sock;
}

bool mcp_session_wants_write(const McpSession *b) {
        return b->out_head;
}

size_t mcp_session_n_pending(const McpSession *b) {
        return b->n_pending;
}

const char *mcp_session_identity(const McpSession *b) {
        return b->mcp_session;
}
