/* The request layer: sbxd.sock's clients (sandbox-mcp, sbxctl), authenticated
 * by SO_PEERCRED, and their requests, dispatched through one table
 * (control.c: request_types[]). A row gives a message type its body, who may
 * send it (anyone, root only, or the owner of the sandbox it names), how
 * many descriptors it carries, the bounds of its fields and its handler. The
 * dispatcher checks all of that before the handler runs. A handler returns
 * 0 with rq->reply filled, REPLY_DEFERRED if the model answers later (a
 * Pending, core/client.h), or -errno with rq->error set; the dispatcher then
 * sends the reply. Whatever the reply points to lives until it is sent
 * (request_alloc, request_own).
 *
 * Adding a request: its messages in proto/sbx.proto (and its body in
 * proto/wire.c's table), a row in request_types[], a handler here. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/client.h"
#include "core/sandbox.h"
#include "core/server.h"
#include "macro.h"
#include "msg.h"

typedef enum Permission {
        PERM_ANYONE,            /* what it shows is limited to the caller's own */
        PERM_ROOT,
        PERM_OWNER,             /* the sandbox it names: its owner, and root */
} Permission;

typedef struct Request Request;

typedef struct RequestType {
        Sbx__MsgType type;
        const ProtobufCMessageDescriptor *body;
        Permission permission;
        const char *sandbox_field;      /* PERM_OWNER: the body's field that names the sandbox */
        const char *root_may;           /* PERM_ROOT: what "only root may ..." says */
        unsigned fds;                   /* descriptors it may carry (SCM_RIGHTS) */
        const MsgCheck *checks;         /* bounds of its fields */
        int (*handler)(Request *rq);
} RequestType;

extern const RequestType request_types[];
extern const size_t n_request_types;

#define REPLY_DEFERRED 1        /* a handler's result: answered later, or (a cancel) never */
#define REQUEST_OWNED_MAX 8u
#define REQUEST_ERROR_MAX 1024u /* an unknown sandbox names the caller's: SBX_SANDBOXES_NAMED of them */

struct Request {
        Server *server;
        Client *client;
        uint32_t seq;
        const Sbx__Msg *msg;
        Sandbox *sandbox;               /* PERM_OWNER: the sandbox named, which the caller may use */
        int fd;                         /* the descriptor it carried, or -EBADF */
        int more_fds[SBX_WIRE_MAX_FDS - 1]; /* the ones after it (a JOB_START's inputs); -EBADF once taken */
        size_t n_more_fds;
        int reply_fd;                   /* a descriptor the reply carries (taken when sent), or -EBADF */
        Sbx__Reply reply;
        char error[REQUEST_ERROR_MAX];
        size_t n_owned;
        struct {
                void (*done)(void *p);
                void *p;
        } owned[REQUEST_OWNED_MAX];
};

/* The row of a message type, or NULL if a client may not send it. */
const RequestType *request_type(Sbx__MsgType type);

void control_accept(Server *s, EventSource *src, uint32_t events);
/* A client on fd (taken) whose requests go through the table. */
int control_client_new(Server *s, int fd, const struct ucred *cred, Client **ret);

/* control-request.c, for handlers: rq->error is the message; returns err, for "return request_error(…)". */
int request_error(Request *rq, int err, const char *fmt, ...) _printf_(3, 4);
/* The payload of a request's frame (FILE_WRITE, FILE_EDIT, RUNTIME_EXECUTE's
 * stdin): a sealed memfd of exactly size bytes, read NUL-terminated into
 * *ret (malloc'd); -EBADMSG if it is not that, -EFBIG over max. */
int request_payload(int fd, uint64_t size, uint64_t max, char **ret);
/* done(p) once the reply is sent (or not sent). */
void request_own(Request *rq, void (*done)(void *p), void *p);
/* p outlives the request (an answer that comes later): its owner frees it. */
int request_disown(Request *rq, void *p);
/* Zeroed memory that lives until the reply is sent; NULL if out of memory. */
void *request_alloc(Request *rq, size_t size);
/* Run what the request owns (done callbacks), once its reply is sent. */
void request_done(Request *rq);
#define REQUEST_NEW(rq, type, init) ({                                  \
                type *_rn_ = request_alloc((rq), sizeof(type));         \
                if (_rn_)                                               \
                        *_rn_ = (type) init;                            \
                _rn_;                                                   \
        })

/* control-sandboxes.c */
int handle_sandbox_create(Request *rq);
int handle_sandbox_list(Request *rq);
int handle_sandbox_delete(Request *rq);
int handle_status(Request *rq);
int handle_gc(Request *rq);
int handle_owner_list(Request *rq);
/* control-images.c */
int handle_image_list(Request *rq);
int handle_image_build(Request *rq);
int handle_image_rm(Request *rq);
/* control-commands.c */
int handle_exec(Request *rq);
int handle_stdin(Request *rq);
int handle_read_lines(Request *rq);
int handle_command_list(Request *rq);
int handle_command_cancel(Request *rq);
/* control-sessions.c */
int handle_session_create(Request *rq);
int handle_session_finalize(Request *rq);
int handle_session_list(Request *rq);
int handle_session_diff(Request *rq);
int handle_layer_list(Request *rq);
/* control-runtime.c (the artifacts set) */
int handle_runtime_execute(Request *rq);
int handle_runtime_query(Request *rq);
/* The session a command runs in: the one named (workspace_session), or a
 * spare or new automatic one if that is empty (control-commands.c). */
int command_session_for(Request *rq, const char *workspace_session, WorkspaceSession **ret);
/* control-files.c */
int handle_file_read(Request *rq);
int handle_file_write(Request *rq);
int handle_file_edit(Request *rq);
int handle_file_blame(Request *rq);
/* control-claims.c: the lifecycle set */
/* control-jobs.c: the script set's jobs (core/job.h) */
int handle_job_start(Request *rq);
int handle_job_status(Request *rq);
int handle_job_wait(Request *rq);
int handle_job_cancel(Request *rq);
int handle_job_list(Request *rq);
int handle_job_rm(Request *rq);
int handle_script_roots(Request *rq);
int handle_claim_create(Request *rq);
int handle_claim_delete(Request *rq);
int handle_claim_status(Request *rq);
int handle_claim_list(Request *rq);
int handle_claim_exec(Request *rq);
int handle_claim_put(Request *rq);
int handle_claim_get(Request *rq);
int handle_claim_list_files(Request *rq);
int handle_claim_stat(Request *rq);
int handle_template_list(Request *rq);
/* control-boxes.c: the boxes set (core/box.h) */
int handle_box_start(Request *rq);
int handle_box_exec(Request *rq);
int handle_box_status(Request *rq);
int handle_box_stop(Request *rq);
int handle_box_list(Request *rq);
/* control-boxes.c, for the other box requests: the caller's box id names
 * (else the error, -errno with rq->error set; used, so thawed, if use: a
 * tool call other than sandbox_status), and whether it can run a command now. */
int find_box(Request *rq, const char *id, bool use, Box **ret);
int box_runnable(Request *rq, Box *box);
/* sandbox_wire's table of box's services from hosts (its /etc/hosts; NULL: none wired), in rq's memory. */
int box_wiring_rows(Request *rq, const Box *box, const char *hosts, Sbx__BoxWiring ***ret, size_t *ret_n);
/* The table into info (sandbox_status), read from the box's /etc/hosts. */
int box_wiring_info(Request *rq, const Box *box, Sbx__BoxInfo *info);
/* control-takeover.c: a person's takeover of a box (core/takeover.h). */
int handle_takeover(Request *rq);
int handle_takeover_list(Request *rq);
int handle_takeover_attach(Request *rq);
int handle_takeover_return(Request *rq);
int handle_terminal(Request *rq);
/* control-tokens.c: sbx-gateway's bearer tokens */
int handle_token_create(Request *rq);
int handle_token_list(Request *rq);
int handle_token_revoke(Request *rq);
int handle_token_check(Request *rq);
/* control-secrets.c: the boxes set's secrets (names out, never values) */
int handle_secret_set(Request *rq);
int handle_secret_list(Request *rq);
/* control-versions.c: the boxes set's versions */
int handle_version_publish(Request *rq);
int handle_version_list(Request *rq);
int handle_version_rm(Request *rq);
/* A HELLO with a token: act for its owner from now on (the gateway user only). */
int control_token_hello(Request *rq, const char *secret);
/* A token connection's token is neither revoked nor expired (else the error). */
int control_token_still_valid(Request *rq);
/* control-boxfiles.c: the boxes set's sandbox_sync, sandbox_get, sandbox_shot */
int handle_box_sync(Request *rq);
int handle_box_get(Request *rq);
int handle_box_file_open(Request *rq);
/* The box's commands' no_proxy from its /etc/hosts, if it has egress and it is not set (core/box.h; control-boxes.c). */
void box_no_proxy_ensure(Server *s, Box *box);
int handle_takeover_check(Request *rq);
int handle_box_shot(Request *rq);
int handle_box_wire(Request *rq);
