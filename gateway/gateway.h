/* sbx-gateway: the broker's MCP sessions (broker/session.h) over MCP
 * Streamable HTTP (revisions 2025-11-25 and 2025-06-18), for clients
 * elsewhere, with bearer tokens that sbxd, not the gateway, verifies.
 *   gateway.c   main: options, gateway.conf, listeners (socket activation),
 *               the libmicrohttpd daemons, signals, TLS reload, the event loop
 *   http.c      one HTTP request: Origin and Host, the token (sbxd's
 *               TOKEN_CHECK), the rate limit, POST/GET/DELETE /mcp
 *   sessions.c  the table of MCP sessions, each with its own connection to
 *               sbxd acting for the token's owner, and the waits for replies
 *   takeover.c  a person's takeover of a box from a browser: the box's
 *               capability checked by sbxd, the attached terminals
 *   takeover-page.html, .js, .css  the page (GET /takeover/ID), built in
 * libmicrohttpd runs one thread per connection: a call that waits for its
 * command (or a slow client) holds only its own thread. The main thread's
 * event loop takes the signals, ends idle sessions and reads the sbxd
 * connections of sessions no call waits on. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx-limits.h"
#include "session.h"
#include "tools.h"

#define GATEWAY_DEFAULT_LISTEN "127.0.0.1:8765"
#define GATEWAY_DEFAULT_CONFIG SBX_SYSCONFDIR "/sbx/gateway.conf"
#define GATEWAY_SESSION_ID_SIZE 33      /* 32 hex digits: also the MCP session identity sbxd keys claims by */
#define GATEWAY_SSE_KEEPALIVE_S 15u     /* a comment line on an idle GET stream */

typedef struct GatewayConfig {
        char *listen[SBX_GATEWAY_LISTEN_MAX];
        size_t n_listen;
        char *socket_path;
        char *origins[SBX_GATEWAY_ORIGINS_MAX]; /* allowed_origin: besides loopback origins */
        size_t n_origins;
        uint32_t sessions_per_token;
        uint32_t session_idle_seconds;
        uint32_t requests_per_second;
        uint64_t body_max;
        char *tls_cert, *tls_key;       /* both or neither */
        char *public_url;               /* scheme://host[:port][/prefix] clients reach it at, or NULL */
} GatewayConfig;

typedef struct Gateway Gateway;

/* An MCP session (one Mcp-Session-Id): refcounted, its lock guards all of it. */
typedef struct GwSession GwSession;
/* A request of a session waiting for its answer. */
typedef struct GwCall GwCall;

/* What sbxd said of a bearer token (TOKEN_CHECK). */
typedef struct TokenAuth {
        char id[24];
        uint32_t owner_uid;
        unsigned sets;                  /* ToolSet bits */
        int64_t expires_unix;           /* 0: never */
} TokenAuth;

/* A placed file of sandbox_get or sandbox_shot (GET /files/ID). */
typedef struct GatewayFile {
        char name[256];
        uint64_t bytes;
} GatewayFile;

#define GATEWAY_FILES_PATH "/files/"

/* ---- sessions.c ---- */
int gateway_state_new(const GatewayConfig *cfg, Gateway **ret);
void gateway_state_free(Gateway *g);
const GatewayConfig *gateway_config(const Gateway *g);
/* A new connection to sbxd with its hello (token: act for its owner; NULL:
 * as the gateway user). */
int gateway_sbxd_connect(Gateway *g, const char *token, int *ret_fd);
/* One request on the gateway's own sbxd connection (TOKEN_CHECK's), its reply in *ret. */
int gateway_ask(Gateway *g, Sbx__Msg *req, Sbx__Msg **ret);
/* TOKEN_CHECK of a bearer token: 0; -EACCES (invalid, revoked, expired);
 * -ECONNREFUSED etc. when sbxd cannot be asked. */
int gateway_check_token(Gateway *g, const char *token, TokenAuth *ret);
/* A request of session id without TOKEN_CHECK: true, with *ret its token's
 * auth, when token is the bearer the session's sbxd connection was opened
 * with (compared in constant time), that connection is still open (sbxd
 * shuts a token's connections down when it revokes it, before it answers
 * the revoke) and the token is not past its expiry. false: ask sbxd. */
bool gateway_session_vouch(Gateway *g, const char *id, const char *token, TokenAuth *ret);
/* The rate limit of a token: 0, or -EAGAIN with *ret_retry_s. */
int gateway_rate_take(Gateway *g, const char *token_id, unsigned *ret_retry_s);
/* A new session for token: -EUSERS over sessions_per_token, -ENOSPC over
 * SBX_GATEWAY_SESSIONS_MAX. gateway_url: the URL its client reaches the
 * gateway at (sbxd makes the URLs of placed files of it), or "". Returned
 * with a reference. */
int gateway_session_new(Gateway *g, const TokenAuth *auth, const char *token, const char *gateway_url,
                        GwSession **ret);
/* The token owner's placed file id, open for reading in *ret_fd (sbxd's
 * BOX_FILE_OPEN on a connection acting for the token): -ENOENT for an id
 * unknown, expired or another owner's; -EACCES for a token sbxd refuses. */
int gateway_file_open(Gateway *g, const char *token, const char *id, int *ret_fd, GatewayFile *ret);
/* The session with this id whose token is this one, with a reference; NULL if none. */
GwSession *gateway_session_get(Gateway *g, const char *id, const TokenAuth *auth);
void gateway_session_unref(Gateway *g, GwSession *s);
/* DELETE: it leaves the table; calls in flight get their answers or errors. */
void gateway_session_end(Gateway *g, GwSession *s);
const char *gateway_session_id(const GwSession *s);
/* Hand one JSON-RPC message (the POST body) to the session. A
 * notification (id NULL): 0, *ret untouched. A request: *ret is its call,
 * which holds a reference to the session; stream: the notifications that
 * belong to it (its progress) come to the call, not to the GET stream.
 * -ESHUTDOWN for a session ended meanwhile. */
int gateway_call_start(GwSession *s, const char *body, size_t len, const json_t *id, bool stream, GwCall **ret);
/* Wait for the call's next message, *ret_line (malloc'd): 1 for a
 * notification of a streamed call, 0 for its answer, the last. *ret_event:
 * its SSE event id, from the session's sequence (0 for an answer of a call
 * not streamed). client_fd is the HTTP client's socket: its hang-up cancels
 * the call (-ECONNRESET); -ESHUTDOWN for a session ended meanwhile. */
int gateway_call_next(GwCall *c, int client_fd, char **ret_line, size_t *ret_len, unsigned long long *ret_event);
void gateway_call_free(GwCall *c);
/* GET stream: take a stream slot (-EBUSY: SBX_GATEWAY_STREAMS_PER_SESSION)
 * and its generation; *io_cursor is the event id it has seen: the newest
 * one, or with resume (Last-Event-ID) the one given (-EINVAL: never sent),
 * and a resuming stream takes over the slot of the one it resumes. Then wait
 * up to timeout_ms for the next notification after *io_cursor (-ETIMEDOUT;
 * -ESHUTDOWN once the session ended or another stream took over), which
 * moves *io_cursor to its id; -ECONNRESET once client_fd, the stream's
 * client, hung up (seen within a second); give the slot back. The session keeps its last
 * SBX_GATEWAY_STREAM_EVENTS notifications, sent or not, for replay. */
int gateway_stream_open(GwSession *s, bool resume, unsigned long long *io_cursor, unsigned *ret_gen);
int gateway_stream_next(GwSession *s, unsigned gen, unsigned timeout_ms, int client_fd,
                        unsigned long long *io_cursor, char **ret_line, size_t *ret_len);
void gateway_stream_close(GwSession *s);
/* The event loop's fd (epoll): readable when an idle session's sbxd
 * connection is; then gateway_sessions_dispatch() reads those connections
 * (notifications go to their GET streams) without blocking. */
int gateway_watch_fd(const Gateway *g);
void gateway_sessions_dispatch(Gateway *g);
/* End the sessions idle for session_idle_seconds (the event loop). */
void gateway_sessions_expire(Gateway *g);
/* Stopping: every session ends (its waits and its stream return). */
void gateway_sessions_end_all(Gateway *g);

/* ---- takeover.c ---- */
/* An attached terminal of a takeover page. */
typedef struct GwTerm GwTerm;
typedef struct GwTermEvent {
        bool ended;
        char *data;             /* output (malloc'd), when not ended */
        size_t len;
        char reason[256];       /* ended: "returned", "expired", "closed", sbxd's refusal, "" for the shell's exit */
        int exit_code, signal;
} GwTermEvent;
/* TAKEOVER_CHECK: 0 if cap is box's and the box is taken over; -ENOENT otherwise. */
int gateway_takeover_check(Gateway *g, const char *box, const char *cap);
/* TAKEOVER_RETURN with cap: the note becomes sandbox_takeover's result. */
int gateway_takeover_return(Gateway *g, const char *box, const char *cap, const char *note);
/* A terminal on box's takeover: TAKEOVER_ATTACH sent on a new sbxd connection (a
 * refusal comes as the first event). Returned with the stream's reference. */
int gateway_term_attach(Gateway *g, const char *box, const char *cap, unsigned rows, unsigned cols, GwTerm **ret);
/* Its next output or its end, waiting up to timeout_ms (-ETIMEDOUT). */
int gateway_term_next(GwTerm *t, unsigned timeout_ms, GwTermEvent *ret);
/* The stream is done: the terminal leaves the table, its connection closes. */
void gateway_term_close(GwTerm *t);
/* Keys and/or a size (rows and cols, 0: none) for box's terminal attached
 * with cap: -ENOENT if none is. */
int gateway_term_input(const char *box, const char *cap, const void *keys, size_t len, unsigned rows, unsigned cols);

/* ---- http.c ---- */
/* libmicrohttpd's access handler and completion callback (cls: the Gateway). */
enum MHD_Result gateway_http_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                     const char *version, const char *upload_data, size_t *upload_data_size,
                                     void **con_cls);
void gateway_http_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                            enum MHD_RequestTerminationCode toe);
