#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "control.h"
#include "core/token.h"
#include "fd-util.h"
#include "log.h"
#include "sbx-limits.h"

/* ---- the table ---------------------------------------------------------------- */

static int handle_hello(Request *rq) {
        const char *id = rq->msg->hello->mcp_session;

        /* Made by the broker: 32 hex digits, or none (sbxctl). */
        if (id[0] && (strlen(id) != 32 || strspn(id, "0123456789abcdef") != 32)) {
                client_drop(rq->server, rq->client, "malformed MCP session identity in HELLO");
                return REPLY_DEFERRED;
        }
        if (rq->msg->hello->gateway_url[0] && !rq->client->gateway)
                return request_error(rq, -EPERM, "only sbxd.conf's gateway_user may give a gateway_url");
        strlcpy(rq->client->mcp_session, id, sizeof(rq->client->mcp_session));
        rq->client->hello = true;
        strlcpy(rq->client->gateway_url, rq->msg->hello->gateway_url, sizeof(rq->client->gateway_url));
        if (rq->msg->hello->token[0]) {
                int r = control_token_hello(rq, rq->msg->hello->token);
                if (r < 0)
                        /* Answered, then closed: a refused token gets nothing more. */
                        rq->client->hello = false;
                return r;
        }
        return 0;
}

static int handle_cancel(Request *rq) {
        client_cancel(rq->server, rq->client, rq->msg->cancel->request_seq);
        return REPLY_DEFERRED; /* a cancel has no answer */
}

#define CHECKS(...) ((const MsgCheck[]) { __VA_ARGS__, {} })
#define ANYONE(t, d, h, ...) { SBX__MSG_TYPE__MSG_CLIENT_##t, &sbx__##d##__descriptor, PERM_ANYONE, NULL, NULL, 0, __VA_ARGS__, h }
#define ROOT(t, d, what, h, checks) { SBX__MSG_TYPE__MSG_CLIENT_##t, &sbx__##d##__descriptor, PERM_ROOT, NULL, what, 0, checks, h }
#define OWNER(t, d, field, fds, h, checks) \
        { SBX__MSG_TYPE__MSG_CLIENT_##t, &sbx__##d##__descriptor, PERM_OWNER, field, NULL, fds, checks, h }

#define NAME(f) MSG_CHECK_NAME(f)
#define PATH(f) MSG_CHECK_LENGTH(f, 0, SBX_PATH_MAX, -ENAMETOOLONG)

const RequestType request_types[] = {
        ANYONE(HELLO, client_hello, handle_hello,
               CHECKS(MSG_CHECK_LENGTH("gateway_url", 0, SBX_GATEWAY_URL_MAX, -EINVAL))),
        ANYONE(CANCEL, cancel, handle_cancel, NULL),
        ANYONE(STATUS, status, handle_status, NULL),
        ANYONE(SANDBOX_LIST, sandbox_list, handle_sandbox_list, NULL),
        ROOT(SANDBOX_CREATE, sandbox_create, "create sandboxes", handle_sandbox_create,
             CHECKS(MSG_CHECK_LENGTH("name", 0, SBX_NAME_MAX, -EINVAL),
                    MSG_CHECK_LENGTH("source_dir", 0, SBX_SOURCE_DIR_MAX, -ENAMETOOLONG), NAME("image"),
                    MSG_CHECK_RANGE("cpu_weight", NULL, 0, SBX_CPU_WEIGHT_MAX))),
        OWNER(SANDBOX_DELETE, sandbox_delete, "name", 0, handle_sandbox_delete, CHECKS(NAME("name"))),
        ROOT(GC, gc, "collect garbage", handle_gc, NULL),
        ANYONE(OWNER_LIST, owner_list, handle_owner_list, NULL),
        /* Claims: found among the caller's own by namespace and name (core/claim.h). */
        ANYONE(CLAIM_CREATE, claim_create, handle_claim_create,
               CHECKS(MSG_CHECK_LENGTH("template", 0, SBX_CLAIM_NAME_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("namespace", 0, SBX_CLAIM_NAME_MAX, -EINVAL),
                      MSG_CHECK_RANGE("ready_timeout_seconds", NULL, 0, SBX_CLAIM_READY_TIMEOUT_MAX_S))),
        ANYONE(CLAIM_DELETE, claim_ref, handle_claim_delete, NULL),
        ANYONE(CLAIM_STATUS, claim_ref, handle_claim_status, NULL),
        ANYONE(CLAIM_LIST, claim_list, handle_claim_list, CHECKS(MSG_CHECK_LENGTH("namespace", 0, SBX_CLAIM_NAME_MAX, -EINVAL))),
        ANYONE(CLAIM_EXEC, claim_exec, handle_claim_exec,
               CHECKS(MSG_CHECK_LENGTH("cmd", 1, SBX_CMD_MAX, -EINVAL),
                      MSG_CHECK_RANGE("timeout_seconds", NULL, 1, SBX_CLAIM_EXEC_TIMEOUT_MAX_S),
                      MSG_CHECK_RANGE("max_output_chars", NULL, SBX_CLAIM_OUTPUT_MIN, SBX_CLAIM_OUTPUT_MAX))),
        /* The content in a sealed memfd. */
        { SBX__MSG_TYPE__MSG_CLIENT_CLAIM_PUT, &sbx__claim_put__descriptor, PERM_ANYONE, NULL, NULL, 1,
          CHECKS(PATH("path")), handle_claim_put },
        ANYONE(CLAIM_GET, claim_path, handle_claim_get, CHECKS(PATH("path"))),
        ANYONE(CLAIM_LIST_FILES, claim_path, handle_claim_list_files,
               CHECKS(PATH("path"), MSG_CHECK_RANGE("max_entries", NULL, 1, SBX_CLAIM_LIST_MAX))),
        ANYONE(CLAIM_STAT, claim_path, handle_claim_stat, CHECKS(PATH("path"))),
        ANYONE(TEMPLATE_LIST, template_list, handle_template_list, NULL),
        /* Boxes: found among the caller's own by id (core/box.h). */
        ANYONE(BOX_START, box_start, handle_box_start,
               CHECKS(MSG_CHECK_LENGTH("version", 0, SBX_VERSION_ID_SIZE - 1, -EINVAL),
                      MSG_CHECK_LENGTH("external_base_url", 0, SBX_BOX_URL_MAX, -EINVAL),
                      MSG_CHECK_RANGE("ready_timeout_seconds", NULL, 0, SBX_CLAIM_READY_TIMEOUT_MAX_S))),
        ANYONE(BOX_EXEC, box_exec, handle_box_exec,
               CHECKS(MSG_CHECK_LENGTH("id", 1, SBX_NAME_MAX, -EINVAL), MSG_CHECK_LENGTH("cmd", 1, SBX_CMD_MAX, -EINVAL),
                      PATH("cwd"), MSG_CHECK_RANGE("timeout_seconds", NULL, 0, SBX_CLAIM_EXEC_TIMEOUT_MAX_S))),
        ANYONE(BOX_STATUS, box_ref, handle_box_status, CHECKS(MSG_CHECK_LENGTH("id", 1, SBX_NAME_MAX, -EINVAL))),
        ANYONE(BOX_STOP, box_ref, handle_box_stop, CHECKS(MSG_CHECK_LENGTH("id", 1, SBX_NAME_MAX, -EINVAL))),
        ANYONE(BOX_LIST, box_list, handle_box_list, NULL),
        /* A person's takeover of a box (core/takeover.h): sandbox_takeover, then sbxctl. */
        ANYONE(TAKEOVER, takeover_request, handle_takeover,
               CHECKS(MSG_CHECK_LENGTH("box", 1, SBX_NAME_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("note", 0, SBX_TAKEOVER_NOTE_MAX, -E2BIG))),
        ANYONE(TAKEOVER_LIST, takeover_list, handle_takeover_list, NULL),
        ANYONE(TAKEOVER_ATTACH, takeover_attach, handle_takeover_attach,
               CHECKS(MSG_CHECK_LENGTH("box", 1, SBX_NAME_MAX, -EINVAL),
                      MSG_CHECK_RANGE("rows", NULL, 0, SBX_TERMINAL_SIZE_MAX),
                      MSG_CHECK_RANGE("cols", NULL, 0, SBX_TERMINAL_SIZE_MAX),
                      MSG_CHECK_LENGTH("capability", 0, SBX_TAKEOVER_CAP_HEX, -ENOENT))),
        ANYONE(TAKEOVER_RETURN, takeover_return, handle_takeover_return,
               CHECKS(MSG_CHECK_LENGTH("box", 1, SBX_NAME_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("note", 0, SBX_TAKEOVER_NOTE_MAX, -E2BIG),
                      MSG_CHECK_LENGTH("capability", 0, SBX_TAKEOVER_CAP_HEX, -ENOENT))),
        ANYONE(TAKEOVER_CHECK, takeover_capability, handle_takeover_check,
               CHECKS(MSG_CHECK_LENGTH("box", 1, SBX_NAME_MAX, -ENOENT),
                      MSG_CHECK_LENGTH("capability", 0, SBX_TAKEOVER_CAP_HEX, -ENOENT))),
        ANYONE(TERMINAL, terminal, handle_terminal,
               CHECKS(MSG_CHECK_LENGTH("data", 0, SBX_TERMINAL_INPUT_MAX, -E2BIG),
                      MSG_CHECK_RANGE("rows", NULL, 0, SBX_TERMINAL_SIZE_MAX),
                      MSG_CHECK_RANGE("cols", NULL, 0, SBX_TERMINAL_SIZE_MAX))),
        /* Jobs: the caller's own (core/job.h); JOB_START carries one fd per host input. */
        { SBX__MSG_TYPE__MSG_CLIENT_JOB_START, &sbx__job_start__descriptor, PERM_ANYONE, NULL, NULL,
          SBX_SCRIPT_INPUTS_MAX,
          CHECKS(MSG_CHECK_LENGTH("command", 1, SBX_CMD_MAX, -EINVAL), MSG_CHECK_LENGTH("image", 0, SBX_NAME_MAX, -EINVAL),
                 MSG_CHECK_LENGTH("egress", 0, 64, -EINVAL)),
          handle_job_start },
        ANYONE(JOB_STATUS, job_ref, handle_job_status, CHECKS(MSG_CHECK_LENGTH("job_id", 1, 64, -EINVAL))),
        ANYONE(JOB_WAIT, job_wait, handle_job_wait,
               CHECKS(MSG_CHECK_LENGTH("job_id", 1, 64, -EINVAL),
                      MSG_CHECK_RANGE("timeout_seconds", NULL, 0, SBX_SCRIPT_WAIT_MAX_S))),
        ANYONE(JOB_CANCEL, job_ref, handle_job_cancel, CHECKS(MSG_CHECK_LENGTH("job_id", 1, 64, -EINVAL))),
        ANYONE(JOB_RM, job_ref, handle_job_rm, CHECKS(MSG_CHECK_LENGTH("job_id", 1, 64, -EINVAL))),
        ANYONE(JOB_LIST, job_list, handle_job_list, NULL),
        ANYONE(SCRIPT_ROOTS, script_roots, handle_script_roots, NULL),
        ANYONE(IMAGE_LIST, image_list, handle_image_list, NULL),
        ROOT(IMAGE_BUILD, image_build, "build images", handle_image_build, CHECKS(NAME("name"))),
        ROOT(IMAGE_RM, image_rm, "remove images", handle_image_rm, CHECKS(NAME("name"))),
        /* Bearer tokens of sbx-gateway (core/token.h) */
        ROOT(TOKEN_CREATE, token_create, "create tokens", handle_token_create,
             CHECKS(MSG_CHECK_LENGTH("name", 0, SBX_TOKEN_NAME_MAX, -EINVAL),
                    MSG_CHECK_LENGTH("sets", 0, SBX_TOKEN_SETS_MAX, -EINVAL))),
        ANYONE(TOKEN_LIST, token_list, handle_token_list, NULL),
        ROOT(TOKEN_REVOKE, token_ref, "revoke tokens", handle_token_revoke,
             CHECKS(MSG_CHECK_LENGTH("id_or_name", 1, SBX_TOKEN_NAME_MAX, -EINVAL))),
        ANYONE(TOKEN_CHECK, token_check, handle_token_check,
               CHECKS(MSG_CHECK_LENGTH("token", 1, TOKEN_SECRET_SIZE, -EACCES))),
        /* The boxes set's files and pictures (control-boxfiles.c); sandbox_sync's tar in a sealed memfd. */
        { SBX__MSG_TYPE__MSG_CLIENT_BOX_SYNC, &sbx__box_sync__descriptor, PERM_ANYONE, NULL, NULL, 1,
          CHECKS(NAME("box"), PATH("dest")), handle_box_sync },
        ANYONE(BOX_GET, box_get, handle_box_get, CHECKS(NAME("box"), MSG_CHECK_LENGTH("path", 1, SBX_PATH_MAX, -EINVAL))),
        ANYONE(BOX_SHOT, box_shot, handle_box_shot,
               CHECKS(NAME("box"), MSG_CHECK_LENGTH("target", 0, 16, -EINVAL), MSG_CHECK_LENGTH("url", 0, SBX_PATH_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("record", 0, 16, -EINVAL))),
        ANYONE(BOX_FILE_OPEN, box_file_open, handle_box_file_open, CHECKS(MSG_CHECK_LENGTH("id", 1, 64, -ENOENT))),
        ANYONE(BOX_WIRE, box_wire, handle_box_wire,
               CHECKS(NAME("box"), MSG_CHECK_LENGTH("service", 1, SBX_NAME_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("mode", 1, 16, -EINVAL))),
        /* Secrets of the boxes set (core/secret.h): each user their own, root anyone's */
        ANYONE(SECRET_SET, secret_set, handle_secret_set,
               CHECKS(MSG_CHECK_LENGTH("name", 1, SBX_SECRET_NAME_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("value", 0, SBX_SECRET_VALUE_MAX, -EINVAL))),
        ANYONE(SECRET_LIST, secret_list, handle_secret_list, NULL),
        /* Versions of the boxes set (core/version.h): each user their own, root all */
        ANYONE(VERSION_PUBLISH, version_publish, handle_version_publish,
               CHECKS(MSG_CHECK_LENGTH("service", 0, SBX_VERSION_TEXT_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("label", 0, SBX_VERSION_TEXT_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("image", 1, SBX_VERSION_TEXT_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("git_sha", 0, SBX_VERSION_TEXT_MAX, -EINVAL),
                      MSG_CHECK_LENGTH("note", 0, SBX_VERSION_TEXT_MAX, -EINVAL))),
        ANYONE(VERSION_LIST, version_list, handle_version_list, NULL),
        ANYONE(VERSION_RM, version_ref, handle_version_rm, CHECKS(MSG_CHECK_LENGTH("id", 1, SBX_VERSION_ID_SIZE - 1, -ENOENT))),
        OWNER(EXEC, exec, "sandbox", 0, handle_exec,
              CHECKS(NAME("sandbox"), NAME("workspace_session"), MSG_CHECK_LENGTH("cmd", 1, SBX_CMD_MAX, -EINVAL),
                     MSG_CHECK_RANGE("timeout_ms", "has_timeout", 1, SBX_TIMEOUT_MAX_MS))),
        OWNER(STDIN, stdin, "sandbox", 0, handle_stdin,
              CHECKS(NAME("sandbox"), NAME("command_session"),
                     { .field = "data", .kind = MSG_CHECK_LENGTH, .max = SBX_STDIN_MAX, .label = "stdin", .err = -E2BIG })),
        OWNER(READ_LINES, read_lines, "sandbox", 0, handle_read_lines,
              CHECKS(NAME("sandbox"), NAME("command_session"),
                     MSG_CHECK_RANGE("limit", "has_limit", 0, SBX_READ_MAX_LINES))),
        OWNER(COMMAND_LIST, command_list, "sandbox", 0, handle_command_list,
              CHECKS(NAME("sandbox"), NAME("workspace_session"))),
        OWNER(COMMAND_CANCEL, command_cancel, "sandbox", 0, handle_command_cancel,
              CHECKS(NAME("sandbox"), NAME("command_session"))),
        OWNER(SESSION_CREATE, session_create, "sandbox", 0, handle_session_create,
              CHECKS(NAME("sandbox"), MSG_CHECK_ONE_OF("finalize_policy", "publish_then_destroy", "destroy"))),
        OWNER(SESSION_FINALIZE, session_finalize, "sandbox", 0, handle_session_finalize,
              CHECKS(NAME("sandbox"), NAME("workspace_session"), MSG_CHECK_ONE_OF("action", "publish", "discard"))),
        OWNER(SESSION_LIST, session_list, "sandbox", 0, handle_session_list, CHECKS(NAME("sandbox"))),
        OWNER(SESSION_DIFF, session_diff, "sandbox", 0, handle_session_diff,
              CHECKS(NAME("sandbox"), NAME("workspace_session"))),
        OWNER(LAYER_LIST, layer_list, "sandbox", 0, handle_layer_list, CHECKS(NAME("sandbox"))),
        OWNER(FILE_READ, file_read, "sandbox", 0, handle_file_read,
              CHECKS(NAME("sandbox"), NAME("workspace_session"), PATH("path"))),
        /* The content, or the packed EditList, in a sealed memfd. */
        OWNER(FILE_WRITE, file_write, "sandbox", 1, handle_file_write,
              CHECKS(NAME("sandbox"), NAME("workspace_session"), PATH("path"))),
        OWNER(FILE_EDIT, file_edit, "sandbox", 1, handle_file_edit,
              CHECKS(NAME("sandbox"), NAME("workspace_session"), PATH("path"))),
        OWNER(FILE_BLAME, file_blame, "sandbox", 0, handle_file_blame, CHECKS(NAME("sandbox"), PATH("path"))),
        /* The artifacts set (issue 19): stdin, when given, in a sealed memfd. */
        OWNER(RUNTIME_EXECUTE, runtime_execute, "sandbox", 1, handle_runtime_execute,
              CHECKS(NAME("sandbox"), NAME("workspace_session"), MSG_CHECK_LENGTH("runtime", 1, SBX_NAME_MAX, -EINVAL),
                     MSG_CHECK_LENGTH("executable", 0, SBX_RUNTIME_EXE_MAX, -EINVAL),
                     MSG_CHECK_LENGTH("code", 0, SBX_CMD_MAX, -E2BIG))),
        /* An artifact handle or a command session id: found among the caller's own. */
        ANYONE(RUNTIME_QUERY, runtime_query, handle_runtime_query,
               CHECKS(MSG_CHECK_LENGTH("handle", 1, SBX_NAME_MAX, -EINVAL),
                      MSG_CHECK_RANGE("max_excerpts", NULL, 0, SBX_QUERY_EXCERPTS_MAX),
                      MSG_CHECK_RANGE("context_lines", NULL, 0, SBX_QUERY_CONTEXT_MAX))),
};

const size_t n_request_types = ELEMENTSOF(request_types);

const RequestType *request_type(Sbx__MsgType type) {
        for (size_t i = 0; i < ELEMENTSOF(request_types); i++)
                if (request_types[i].type == type)
                        return &request_types[i];
        return NULL;
}

/* ---- the checks before a handler runs ---------------------------------------------- */

/* "yours: a, b (and N more)" or "you have none", for an unknown sandbox name:
 * the names the client may use, at most SBX_SANDBOXES_NAMED of them. */
static void caller_sandboxes(Server *s, const Client *c, char *buf, size_t size) {
        unsigned n = 0;
        size_t len = 0;
        Sandbox *sb;

        buf[0] = '\0';
        TAILQ_FOREACH(sb, &s->sandboxes, link) {
                if (!sandbox_allows_client(sb, c))
                        continue;
                if (n < SBX_SANDBOXES_NAMED && len < size)
                        len += (size_t) snprintf(buf + len, size - len, "%s%s", n ? ", " : "yours: ", sb->name);
                n++;
        }
        if (n == 0)
                snprintf(buf, size, "you have none");
        else if (n > SBX_SANDBOXES_NAMED && len < size)
                snprintf(buf + len, size - len, " (and %u more)", n - SBX_SANDBOXES_NAMED);
}

/* The sandbox a PERM_OWNER request names, if the caller may use it. */
static int request_authorize(Request *rq, const RequestType *t) {
        const char *name = msg_string(msg_body(rq->msg), t->sandbox_field);
        Sandbox *sb = name ? sandbox_find(rq->server, name) : NULL;
        char mine[SBX_SANDBOXES_NAMED * (SBX_NAME_MAX + 2) + 64];

        if (!name)
                return request_error(rq, -EINVAL, "the request names no sandbox");
        if (sb && sandbox_allows_client(sb, rq->client)) {
                rq->sandbox = sb;
                return 0;
        }
        if (sb && !sb->claim)
                return request_error(rq, -EPERM, "permission denied: sandbox '%.80s' belongs to another user", name);
        caller_sandboxes(rq->server, rq->client, mine, sizeof(mine));
        return request_error(rq, -ENOENT, "no sandbox named '%.80s' (%s)", name, mine);
}

static int request_allowed(Request *rq, const RequestType *t) {
        int r;

        r = msg_check(msg_body(rq->msg), t->checks, rq->error, sizeof(rq->error));
        if (r < 0)
                return r;
        switch (t->permission) {
        case PERM_ANYONE:
                return 0;
        case PERM_ROOT:
                return rq->client->uid == 0 ? 0 : request_error(rq, -EPERM, "only root may %s", t->root_may);
        case PERM_OWNER:
                return request_authorize(rq, t);
        }
        return -EINVAL;
}

/* ---- the dispatcher ------------------------------------------------------------------ */

/* Why a client that sent m with n_fds descriptors goes, or NULL. */
static const char *request_refused(const Client *c, const RequestType *t, const Sbx__Msg *m, size_t n_fds) {
        if (!c->hello && m->type != SBX__MSG_TYPE__MSG_CLIENT_HELLO)
                return "first message is not HELLO";
        if (!t || (c->hello && m->type == SBX__MSG_TYPE__MSG_CLIENT_HELLO))
                return "message type not allowed from a client (or a second HELLO)";
        if (n_fds > t->fds)
                return "more file descriptors attached to a message than it takes";
        return NULL;
}

/* Run one request through its row and answer it. */
static void request_dispatch(Server *s, Client *c, uint32_t seq, const Sbx__Msg *m, int *fds, size_t n_fds) {
        const RequestType *t = request_type(m->type);
        const char *refused = request_refused(c, t, m, n_fds);
        Request rq = { .server = s, .client = c, .seq = seq, .msg = m, .fd = -EBADF, .reply_fd = -EBADF,
                       .reply = SBX__REPLY__INIT };
        int r;

        for (size_t i = 0; i < n_fds; i++)
                if (refused)
                        safe_close(fds[i]);
                else if (i == 0)
                        rq.fd = fds[0];
                else
                        rq.more_fds[rq.n_more_fds++] = fds[i];
        if (refused) {
                client_drop(s, c, refused);
                return;
        }
        if (c->n_pending >= SBX_MAX_PENDING_PER_CLIENT)
                r = request_error(&rq, -EBUSY, "too many unanswered requests on this connection (limit %u)",
                                  SBX_MAX_PENDING_PER_CLIENT);
        else if (c->token_id[0] && (r = control_token_still_valid(&rq)) < 0)
                c->hello = false;       /* answered, then closed */
        else {
                r = request_allowed(&rq, t);
                if (r >= 0)
                        r = t->handler(&rq);
        }
        if (r < 0) {
                /* The one message is in rq.error, set by whatever refused the request. */
                rq.reply = (Sbx__Reply) SBX__REPLY__INIT;
                rq.reply.err = r;
                rq.reply.errmsg = rq.error[0] ? rq.error : (char *) strerror(-r);
        }
        if (r != REPLY_DEFERRED)
                client_reply_fd(s, c, seq, &rq.reply, r < 0 ? -EBADF : TAKE_FD(rq.reply_fd));
        request_done(&rq);
        if (!c->hello)
                client_drop(s, c, "its token was refused, revoked or expired");
}

static void client_dispatch(Server *s, EventSource *src, uint32_t events) {
        Client *c = container_of(src, Client, src);
        _cleanup_msg_ Sbx__Msg *m = NULL;
        int fds[SBX_WIRE_MAX_FDS];
        size_t n_fds = 0;
        uint32_t seq;
        int r;

        if (c->dead)
                return;
        if (events & EPOLLOUT)
                client_flush(s, c);
        if (c->dead || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return;
        r = wire_recv(src->fd, &m, &seq, fds, &n_fds);
        if (r == -EAGAIN)
                return;
        if (r == -ECONNRESET) {
                log_debug("Client pid %d disconnected", (int) c->pid);
                c->dead = true;
                return;
        }
        if (r == -EPROTO) {
                client_reply_error(s, c, 0, -EPROTO, "protocol version mismatch: sbxd speaks version %u",
                                   SBX_PROTO_VERSION);
                client_drop(s, c, "wrong protocol version");
                return;
        }
        if (r < 0) {
                client_drop(s, c, "malformed frame");
                return;
        }
        c->active_usec = now_usec();
        request_dispatch(s, c, seq, m, fds, n_fds);
}

/* ---- accepting clients ------------------------------------------------------------------ */

/* Whether the peer on fd is in socket_group (its primary group at connect
 * time, or one of its supplementary groups). */
static bool peer_in_group(int fd, gid_t primary, gid_t group) {
        gid_t groups[SBX_PEER_GROUPS_MAX];
        socklen_t len = sizeof(groups);

        if (group == (gid_t) -1)
                return false;
        if (primary == group)
                return true;
        /* More groups than fit: ERANGE, and the peer counts as not a member. */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
                return false;
        for (size_t i = 0; i < len / sizeof(gid_t); i++)
                if (groups[i] == group)
                        return true;
        return false;
}

/* Root may take every slot; socket_group's members all but the last
 * SBX_CLIENTS_RESERVED_ROOT; anyone else (who may connect with socket_mode
 * 0666) all but those and, with socket_group set, SBX_CLIENTS_RESERVED_GROUP
 * more. Each uid but root holds at most SBX_MAX_CLIENTS_PER_UID. */
static bool client_slot_free(Server *s, uid_t uid, bool in_group) {
        unsigned same_uid = 0, max = SBX_MAX_CLIENTS;
        Client *other;

        if (uid != 0) {
                max -= SBX_CLIENTS_RESERVED_ROOT;
                if (!in_group && s->cfg.socket_gid != (gid_t) -1)
                        max -= SBX_CLIENTS_RESERVED_GROUP;
                TAILQ_FOREACH(other, &s->clients, link)
                        if (other->uid == uid && !other->gateway)
                                same_uid++;
                if (same_uid >= SBX_MAX_CLIENTS_PER_UID)
                        return false;
        }
        return s->n_clients < max;
}

int control_client_new(Server *s, int fd, const struct ucred *cred, Client **ret) {
        return client_new(s, fd, cred, client_dispatch, ret);
}

void control_accept(Server *s, EventSource *src, uint32_t events) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        bool gateway;
        Client *c;
        int fd;

        fd = accept4(src->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        log_warning_errno(-errno, "Failed to accept a client, ignoring: %m");
                return;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                log_warning_errno(-errno, "Failed to read client credentials, dropping it: %m");
                safe_close(fd);
                return;
        }
        gateway = s->cfg.gateway_uid != (uid_t) -1 && cred.uid == s->cfg.gateway_uid;
        /* The gateway's connections, one per MCP session, have their own limit. */
        if (gateway ? s->n_gateway_clients >= SBX_GATEWAY_CLIENTS_MAX
                    : !client_slot_free(s, cred.uid, peer_in_group(fd, cred.gid, s->cfg.socket_gid))) {
                log_warning("Refusing client pid %d uid %u: too many connections", (int) cred.pid, cred.uid);
                safe_close(fd);
                return;
        }
        if (control_client_new(s, fd, &cred, &c) < 0)
                return;
        c->gateway = gateway;
        if (gateway) {
                s->n_clients--;
                s->n_gateway_clients++;
        }
        log_debug("Client pid %d uid %u connected", (int) c->pid, c->uid);
}
