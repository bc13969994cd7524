/* One HTTP request to sbx-gateway (MCP Streamable HTTP, one endpoint
 * /mcp): its checks in this order, each with its status and nothing more
 * than needed to fix it: the path (404) and method (405), Host and Origin
 * (403, DNS rebinding), the bearer token as sbxd sees it (401 with
 * "WWW-Authenticate: Bearer" and an empty body), the rate limit of the
 * token (429 with Retry-After), the body size (413); then POST hands the
 * message to its MCP session (a new one for initialize), GET opens the
 * session's stream of notifications (SSE), DELETE ends the session.
 * GET /files/ID serves a file sandbox_get or sandbox_shot placed for the
 * token's owner (404 for any other id), streamed from the descriptor sbxd
 * hands over. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "fd-util.h"
#include "gateway-page.h"
#include "gateway.h"
#include "jsonrpc.h"
#include "log.h"
#include "macro.h"
#include "mcp.h"

#define ENDPOINT "/mcp"
#define JSON_TYPE "application/json"
#define SSE_TYPE "text/event-stream"
#define SSE_CHUNK (64u * 1024u)
#define TAKEOVER_PATH "/takeover/"

typedef struct Req {
        char *body;
        size_t len;
        bool too_large;
        bool takeover;          /* /takeover/...: the box's capability, no bearer token */
        TokenAuth auth;
        char *token;
} Req;

static void req_free(Req *q) {
        if (!q)
                return;
        free(q->body);
        if (q->token)
                explicit_bzero(q->token, strlen(q->token));
        free(q->token);
        free(q);
}

/* Queue status with body (may be NULL) and extra headers (name, value pairs, NULL-ended). */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type, const char *body,
                               size_t len, ...) {
        struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *) (body ?: ""), MHD_RESPMEM_MUST_COPY);
        enum MHD_Result ret;
        const char *name;
        va_list ap;

        if (!r)
                return MHD_NO;
        if (type)
                MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        va_start(ap, len);
        while ((name = va_arg(ap, const char *)))
                MHD_add_response_header(r, name, va_arg(ap, const char *));
        va_end(ap);
        ret = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return ret;
}

/* A JSON-RPC error as the body of an HTTP error (no id: the request was not
 * taken); retry_after: the Retry-After header's seconds, or NULL. */
static enum MHD_Result respond_error_retry(struct MHD_Connection *c, unsigned status, int code, const char *message,
                                           const char *retry_after) {
        _cleanup_free_ char *line = NULL;
        json_t *e = jsonrpc_error(NULL, code, message);
        size_t len = 0;
        int r;

        r = e ? jsonrpc_serialize(e, JSONRPC_OUT_MAX, &line, &len) : -ENOMEM;
        json_decref(e);
        if (r < 0)
                return respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, NULL, 0, NULL);
        return respond(c, status, JSON_TYPE, line, len, retry_after ? MHD_HTTP_HEADER_RETRY_AFTER : NULL,
                       retry_after, NULL);
}

static enum MHD_Result respond_error(struct MHD_Connection *c, unsigned status, int code, const char *message) {
        return respond_error_retry(c, status, code, message, NULL);
}

static const char *header(struct MHD_Connection *c, const char *name) {
        return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* host of "host", "host:port", "[v6]:port" or "scheme://host[:port]" is a loopback name. */
static bool is_loopback_host(const char *v) {
        static const char *const names[] = { "localhost", "127.0.0.1", "[::1]" };
        const char *h = strstr(v, "://");

        h = h ? h + 3 : v;
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                size_t n = strlen(names[i]);
                if (strncasecmp(h, names[i], n) == 0 && (h[n] == '\0' || h[n] == ':' || h[n] == '/'))
                        return true;
        }
        return false;
}

/* Origin (sent by browsers): a loopback origin or one of allowed_origin;
 * Host: on a loopback listener, a loopback name. A page of another site
 * that a rebound DNS name leads to 127.0.0.1 fails one or the other. */
static bool origin_allowed(Gateway *g, struct MHD_Connection *c) {
        const GatewayConfig *cfg = gateway_config(g);
        const char *origin = header(c, "Origin"), *host = header(c, MHD_HTTP_HEADER_HOST);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        bool loopback_peer = false;

        if (ci && ci->client_addr->sa_family == AF_INET)
                loopback_peer = (ntohl(((const struct sockaddr_in *) ci->client_addr)->sin_addr.s_addr) >> 24) == 127;
        else if (ci && ci->client_addr->sa_family == AF_INET6)
                loopback_peer = IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *) ci->client_addr)->sin6_addr);
        if (loopback_peer && host && !is_loopback_host(host)) {
                bool listed = false;
                for (size_t i = 0; i < cfg->n_origins && !listed; i++)
                        listed = strstr(cfg->origins[i], host) != NULL;
                if (!listed)
                        return false;
        }
        if (!origin)
                return true;
        if (is_loopback_host(origin))
                return true;
        /* The gateway's own origin (its takeover page's requests). */
        if (cfg->public_url && strncasecmp(cfg->public_url, origin, strlen(origin)) == 0 &&
            (cfg->public_url[strlen(origin)] == '\0' || cfg->public_url[strlen(origin)] == '/'))
                return true;
        for (size_t i = 0; i < cfg->n_origins; i++)
                if (strcasecmp(cfg->origins[i], origin) == 0)
                        return true;
        return false;
}

/* ---- GET /files/ID: a placed file of the token's owner ------------------------------------------ */

static const char *file_type(const char *name) {
        static const char *const types[][2] = {
                { ".tar.gz", "application/gzip" }, { ".png", "image/png" }, { ".mp4", "video/mp4" },
        };
        size_t n = strlen(name);

        for (size_t i = 0; i < ELEMENTSOF(types); i++) {
                size_t k = strlen(types[i][0]);
                if (n > k && strcmp(name + n - k, types[i][0]) == 0)
                        return types[i][1];
        }
        return "application/octet-stream";
}

/* The file streamed from sbxd's descriptor (sendfile without TLS): never read whole into memory. */
static enum MHD_Result handle_file(Gateway *g, struct MHD_Connection *c, const Req *q, const char *id) {
        char disposition[sizeof(((GatewayFile *) 0)->name) + 32];
        struct MHD_Response *resp;
        enum MHD_Result ret;
        GatewayFile f;
        int fd = -EBADF, r;

        r = gateway_file_open(g, q->token, id, &fd, &f);
        if (r == -ENOENT || r == -EINVAL)
                return respond(c, MHD_HTTP_NOT_FOUND, NULL, NULL, 0, NULL);
        if (r == -EACCES)
                return respond(c, MHD_HTTP_UNAUTHORIZED, NULL, NULL, 0, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer", NULL);
        if (r < 0) {
                log_warning_errno(r, "Cannot open a placed file with sbxd: %m");
                return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, NULL, 0, NULL);
        }
        /* The name as a quoted-string: only what needs no escaping. */
        for (char *p = f.name; *p; p++)
                if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f || *p == '"' || *p == '\\')
                        *p = '_';
        snprintf(disposition, sizeof(disposition), "attachment; filename=\"%s\"", f.name);
        resp = MHD_create_response_from_fd64(f.bytes, fd);
        if (!resp) {
                safe_close(fd);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, file_type(f.name));
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, disposition);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* The URL the client reached the gateway at: public_url, or scheme://Host of
 * this request (a Host of other characters than a name's or an address's: ""). */
static void gateway_url_of(Gateway *g, struct MHD_Connection *c, char *buf, size_t size) {
        static const char host_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]";
        const GatewayConfig *cfg = gateway_config(g);
        const char *host = header(c, MHD_HTTP_HEADER_HOST);

        buf[0] = '\0';
        if (cfg->public_url)
                snprintf(buf, size, "%s", cfg->public_url);
        else if (host && host[0] && strspn(host, host_chars) == strlen(host) && strlen(host) <= SBX_GATEWAY_PUBLIC_URL_MAX)
                snprintf(buf, size, "%s://%s", cfg->tls_cert ? "https" : "http", host);
}

static enum MHD_Result respond_asset(struct MHD_Connection *c, const char *url);

/* The checks of the first call; MHD_YES with *ret_q to go on, or the response queued. */
static enum MHD_Result request_start(Gateway *g, struct MHD_Connection *c, const char *url, const char *method,
                                     Req **ret_q) {
        const char *auth = header(c, MHD_HTTP_HEADER_AUTHORIZATION), *length, *sid;
        const GatewayConfig *cfg = gateway_config(g);
        unsigned retry;
        char retry_s[16];
        Req *q;
        int r;

        bool files = strncmp(url, GATEWAY_FILES_PATH, strlen(GATEWAY_FILES_PATH)) == 0;
        bool takeover = strncmp(url, TAKEOVER_PATH, strlen(TAKEOVER_PATH)) == 0;

        if (strcmp(method, "GET") == 0 && (strcmp(url, "/takeover-page.js") == 0 || strcmp(url, "/takeover-page.css") == 0))
                return respond_asset(c, url);
        if (takeover) {
                /* The capability in the URL is the right: checked by sbxd, no bearer token. */
                if (!origin_allowed(g, c))
                        return respond(c, MHD_HTTP_FORBIDDEN, NULL, NULL, 0, NULL);
                q = calloc(1, sizeof(*q));
                if (!q)
                        return MHD_NO;
                q->takeover = true;
                *ret_q = q;
                return MHD_YES;
        }
        if (strcmp(url, ENDPOINT) != 0 && !files)
                return respond(c, MHD_HTTP_NOT_FOUND, NULL, NULL, 0, NULL);
        if (files ? strcmp(method, "GET") != 0 : strcmp(method, "POST") && strcmp(method, "GET") && strcmp(method, "DELETE"))
                return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, NULL, 0, MHD_HTTP_HEADER_ALLOW,
                               files ? "GET" : "GET, POST, DELETE", NULL);
        if (!origin_allowed(g, c))
                return respond_error(c, MHD_HTTP_FORBIDDEN, JSONRPC_INVALID_REQUEST, "Forbidden: Origin or Host not allowed");
        if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
                return respond(c, MHD_HTTP_UNAUTHORIZED, NULL, NULL, 0, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer", NULL);
        q = calloc(1, sizeof(*q));
        if (!q || !(q->token = strdup(auth + 7))) {
                req_free(q);
                return MHD_NO;
        }
        /* A session's request is vouched for by its sbxd connection, which sbxd checks
         * the token on at every request; anything else asks sbxd (TOKEN_CHECK). */
        sid = header(c, "Mcp-Session-Id");
        r = sid && gateway_session_vouch(g, sid, q->token, &q->auth) ? 0 : gateway_check_token(g, q->token, &q->auth);
        if (r == -EACCES) {
                req_free(q);
                return respond(c, MHD_HTTP_UNAUTHORIZED, NULL, NULL, 0, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer", NULL);
        }
        if (r < 0) {
                log_warning_errno(r, "Cannot check a token with sbxd at %s: %m", cfg->socket_path);
                req_free(q);
                return respond_error(c, r == -ENOMEDIUM ? MHD_HTTP_FORBIDDEN : MHD_HTTP_SERVICE_UNAVAILABLE,
                                     JSONRPC_INTERNAL_ERROR, r == -ENOMEDIUM ? "the token names a tool set this gateway "
                                     "does not know" : r == -EPERM ? "sbxd does not take this gateway's user as its "
                                     "gateway_user" : "sbxd is not reachable");
        }
        if (gateway_rate_take(g, q->auth.id, &retry) < 0) {
                req_free(q);
                snprintf(retry_s, sizeof(retry_s), "%u", retry);
                return respond_error_retry(c, MHD_HTTP_TOO_MANY_REQUESTS, JSONRPC_INTERNAL_ERROR,
                                           "Too many requests for this token", retry_s);
        }
        length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length && strtoull(length, NULL, 10) > cfg->body_max) {
                req_free(q);
                return respond_error(c, MHD_HTTP_CONTENT_TOO_LARGE, JSONRPC_INVALID_REQUEST, "Request body too large");
        }
        if (files) {
                enum MHD_Result ret = handle_file(g, c, q, url + strlen(GATEWAY_FILES_PATH));

                req_free(q);
                return ret;
        }
        *ret_q = q;
        return MHD_YES;
}

/* An SSE response: the session's GET stream (s), or the answer to one POST (call). */
/* An SSE event being written, in as many reads as the client takes. */
typedef struct SseLine {
        char *line;
        size_t len, off;
} SseLine;

static ssize_t sse_keepalive(char *buf, size_t max) {
        static const char keepalive[] = ": keepalive\n\n";

        memcpy(buf, keepalive, MIN(max, sizeof(keepalive) - 1));
        return (ssize_t) MIN(max, sizeof(keepalive) - 1);
}

/* The next bytes of l->line (which goes once written). */
static ssize_t sse_copy(SseLine *l, char *buf, size_t max) {
        size_t n = MIN(max, l->len - l->off);

        memcpy(buf, l->line + l->off, n);
        l->off += n;
        if (l->off == l->len) {
                free(l->line);
                l->line = NULL;
        }
        return (ssize_t) n;
}

static int sse_set(SseLine *l, char *line) {
        if (!line)
                return -ENOMEM;
        *l = (SseLine) { .line = line, .len = strlen(line) };
        return 0;
}

typedef struct Stream {
        Gateway *g;
        GwSession *s;
        GwCall *call;
        int client_fd;          /* its client: a hang-up ends a GET stream, cancels a call */
        bool last;              /* call: its answer was the event being written */
        SseLine out;            /* the event being written */
        unsigned long long cursor;      /* the id of the last event taken */
        unsigned gen;
} Stream;

static int client_fd_of(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

        return ci ? ci->connect_fd : -1;
}

static enum MHD_Result respond_stream(struct MHD_Connection *c, Stream *st);

/* An SSE answer to this POST: a tools/call with a progressToken from a
 * client that accepts text/event-stream. Only then can notifications belong
 * to the call; any other answer is one JSON object, which costs less. */
static bool post_streams(struct MHD_Connection *c, const JsonRpcMessage *m) {
        const char *accept = header(c, MHD_HTTP_HEADER_ACCEPT);

        return m->kind == JSONRPC_REQUEST && strcmp(m->method, "tools/call") == 0 && accept &&
               strstr(accept, SSE_TYPE) && json_object_get(json_object_get(m->params, "_meta"), "progressToken");
}

static enum MHD_Result post_to(struct MHD_Connection *c, GwSession *s, const Req *q, const JsonRpcMessage *m,
                               bool new_session) {
        _cleanup_free_ char *line = NULL;
        bool request = m->kind == JSONRPC_REQUEST, stream = post_streams(c, m);
        unsigned long long event;
        GwCall *call = NULL;
        Stream *st;
        size_t len = 0;
        int r;

        r = gateway_call_start(s, q->body, q->len, request ? (m->id ?: json_null()) : NULL, stream, &call);
        if (r >= 0 && stream) {
                st = calloc(1, sizeof(*st));
                if (!st) {
                        gateway_call_free(call);
                        return MHD_NO;
                }
                *st = (Stream) { .call = call, .client_fd = client_fd_of(c) };
                return respond_stream(c, st);
        }
        if (r >= 0 && request)
                r = gateway_call_next(call, client_fd_of(c), &line, &len, &event);
        gateway_call_free(call);
        if (r == -ECONNRESET)
                return MHD_NO;
        if (r == -ESHUTDOWN)
                return respond_error(c, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Session ended");
        if (r < 0) {
                log_warning_errno(r, "MCP session %s: %m", gateway_session_id(s));
                return respond_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR, strerror(-r));
        }
        if (!request)
                return respond(c, MHD_HTTP_ACCEPTED, NULL, NULL, 0, NULL);
        return respond(c, MHD_HTTP_OK, JSON_TYPE, line, len, new_session ? "Mcp-Session-Id" : NULL,
                       gateway_session_id(s), NULL);
}

static enum MHD_Result handle_post(Gateway *g, struct MHD_Connection *c, Req *q) {
        _cleanup_jsonrpc_message_ JsonRpcMessage *m = NULL;
        const char *sid = header(c, "Mcp-Session-Id"), *version = header(c, "MCP-Protocol-Version");
        enum MHD_Result ret;
        GwSession *s;
        int r;

        if (q->too_large)
                return respond_error(c, MHD_HTTP_CONTENT_TOO_LARGE, JSONRPC_INVALID_REQUEST, "Request body too large");
        if (version && strcmp(mcp_negotiate_version(version), version) != 0)
                return respond_error(c, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                                     "Bad Request: unsupported MCP-Protocol-Version");
        r = jsonrpc_parse(q->body ?: "", q->len, &m);
        if (r < 0)
                return MHD_NO;
        if (m->kind == JSONRPC_INVALID || m->kind == JSONRPC_EMPTY)
                return respond_error(c, MHD_HTTP_BAD_REQUEST, m->kind == JSONRPC_EMPTY ? JSONRPC_INVALID_REQUEST
                                     : m->error_code, m->kind == JSONRPC_EMPTY ? "empty body" : m->error_message);
        if (!sid) {
                if (m->kind != JSONRPC_REQUEST || strcmp(m->method, "initialize") != 0)
                        return respond_error(c, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                                             "Bad Request: Mcp-Session-Id header is required");
                char url[SBX_GATEWAY_URL_MAX + 1];

                gateway_url_of(g, c, url, sizeof(url));
                r = gateway_session_new(g, &q->auth, q->token, url, &s);
                if (r == -EUSERS || r == -ENOSPC)
                        return respond_error_retry(c, MHD_HTTP_TOO_MANY_REQUESTS, JSONRPC_INTERNAL_ERROR,
                                                   r == -EUSERS ? "Too many sessions for this token"
                                                                : "Too many sessions", "60");
                if (r < 0)
                        return MHD_NO;
                log_debug("MCP session %s opened for token %s (uid %u)", gateway_session_id(s), q->auth.id,
                          q->auth.owner_uid);
                ret = post_to(c, s, q, m, true);
        } else {
                s = gateway_session_get(g, sid, &q->auth);
                if (!s)
                        return respond_error(c, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Session not found");
                ret = post_to(c, s, q, m, false);
        }
        gateway_session_unref(g, s);
        return ret;
}

/* The session the request's Mcp-Session-Id names, with a reference; NULL
 * with the refusal queued in *ret (400 without the header, 404 unknown). */
static GwSession *session_of(Gateway *g, struct MHD_Connection *c, const Req *q, enum MHD_Result *ret) {
        const char *sid = header(c, "Mcp-Session-Id");
        GwSession *s;

        if (!sid) {
                *ret = respond_error(c, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                                     "Bad Request: Mcp-Session-Id header is required");
                return NULL;
        }
        s = gateway_session_get(g, sid, &q->auth);
        if (!s)
                *ret = respond_error(c, MHD_HTTP_NOT_FOUND, JSONRPC_INVALID_REQUEST, "Session not found");
        return s;
}

/* ---- GET: the session's notifications as SSE --------------------------------------------------- */

/* The stream's next message, waiting for it: 0 with *ret_line and its
 * event id in st->cursor; -ETIMEDOUT (a GET stream's keepalive); another
 * negative errno ends the stream. */
static int stream_next(Stream *st, char **ret_line, size_t *ret_len) {
        int r;

        if (!st->call)
                return gateway_stream_next(st->s, st->gen, GATEWAY_SSE_KEEPALIVE_S * 1000u, st->client_fd,
                                           &st->cursor, ret_line, ret_len);
        if (st->last)
                return -ENODATA;        /* the answer was the last event */
        r = gateway_call_next(st->call, st->client_fd, ret_line, ret_len, &st->cursor);
        st->last = r == 0;
        return MIN(r, 0);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        Stream *st = cls;

        while (!st->out.line) {
                _cleanup_free_ char *note = NULL;
                char *line;
                size_t len;
                int r = stream_next(st, &note, &len);

                if (r == -ETIMEDOUT)
                        return sse_keepalive(buf, max);
                if (r == -ENODATA)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (r < 0)
                        return st->call ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
                /* note ends in "\n": "id: N\nevent: message\ndata: <json>\n\n" */
                if (asprintf(&line, "id: %llu\nevent: message\ndata: %.*s\n\n", st->cursor, (int) (len - 1), note) < 0)
                        line = NULL;
                if (sse_set(&st->out, line) < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        return sse_copy(&st->out, buf, max);
}

static void stream_free(void *cls) {
        Stream *st = cls;

        if (st->call)
                gateway_call_free(st->call);
        else {
                gateway_stream_close(st->s);
                gateway_session_unref(st->g, st->s);
        }
        free(st->out.line);
        free(st);
}

/* Queue an SSE response read by reader from cls, which free_cls frees with
 * the response (also when that fails). */
static enum MHD_Result respond_sse(struct MHD_Connection *c, MHD_ContentReaderCallback reader, void *cls,
                                   MHD_ContentReaderFreeCallback free_cls) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_CHUNK, reader, cls, free_cls);
        enum MHD_Result ret;

        if (!r) {
                free_cls(cls);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, SSE_TYPE);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result respond_stream(struct MHD_Connection *c, Stream *st) {
        return respond_sse(c, stream_read, st, stream_free);
}

/* Last-Event-ID: absent (false), or the decimal event id in *ret (-EINVAL if not one). */
static int last_event_id(struct MHD_Connection *c, unsigned long long *ret) {
        const char *v = header(c, "Last-Event-ID");
        char *end;

        if (!v)
                return false;
        errno = 0;
        *ret = strtoull(v, &end, 10);
        return v[0] >= '0' && v[0] <= '9' && *end == '\0' && errno == 0 ? true : -EINVAL;
}

static enum MHD_Result handle_get(Gateway *g, struct MHD_Connection *c, Req *q) {
        const char *accept = header(c, MHD_HTTP_HEADER_ACCEPT);
        unsigned long long cursor = 0;
        enum MHD_Result ret;
        GwSession *s;
        Stream *st;
        unsigned gen;
        int resume, k;

        if (!accept || !strstr(accept, SSE_TYPE))
                return respond_error(c, MHD_HTTP_NOT_ACCEPTABLE, JSONRPC_INVALID_REQUEST,
                                     "Not Acceptable: the stream is " SSE_TYPE);
        resume = last_event_id(c, &cursor);
        if (resume < 0)
                return respond_error(c, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                                     "Bad Request: Last-Event-ID is not an event id of this server");
        s = session_of(g, c, q, &ret);
        if (!s)
                return ret;
        k = gateway_stream_open(s, resume, &cursor, &gen);
        if (k < 0) {
                gateway_session_unref(g, s);
                return k == -EINVAL ? respond_error(c, MHD_HTTP_BAD_REQUEST, JSONRPC_INVALID_REQUEST,
                                                    "Bad Request: Last-Event-ID names an event not sent yet")
                                    : respond_error(c, MHD_HTTP_CONFLICT, JSONRPC_INVALID_REQUEST,
                                                    "Conflict: this session has its stream open already");
        }
        st = calloc(1, sizeof(*st));
        if (!st) {
                gateway_stream_close(s);
                gateway_session_unref(g, s);
                return MHD_NO;
        }
        *st = (Stream) { .g = g, .s = s, .client_fd = client_fd_of(c), .cursor = cursor, .gen = gen };
        return respond_stream(c, st);
}

static enum MHD_Result handle_delete(Gateway *g, struct MHD_Connection *c, Req *q) {
        enum MHD_Result ret;
        GwSession *s = session_of(g, c, q, &ret);

        if (!s)
                return ret;
        gateway_session_end(g, s);
        gateway_session_unref(g, s);
        return respond(c, MHD_HTTP_OK, NULL, NULL, 0, NULL);
}

/* ---- /takeover/BOX: a person's terminal on a box, with its capability ------------------------------ */

#define PAGE_CSP "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " \
                 "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

/* The page's files, static and without secrets: served to anyone. */
static enum MHD_Result respond_page_file(struct MHD_Connection *c, const char *type, const char *body) {
        return respond(c, MHD_HTTP_OK, type, body, strlen(body), "Content-Security-Policy", PAGE_CSP,
                       "X-Content-Type-Options", "nosniff", "Referrer-Policy", "no-referrer", NULL);
}

static enum MHD_Result respond_asset(struct MHD_Connection *c, const char *url) {
        if (strcmp(url, "/takeover-page.js") == 0)
                return respond_page_file(c, "text/javascript; charset=utf-8", takeover_page_js);
        return respond_page_file(c, "text/css; charset=utf-8", takeover_page_css);
}

/* A TERMINAL's output and its end as SSE: "output" (base64 of the bytes), then "end". */
typedef struct TermStream {
        GwTerm *term;
        SseLine out;
        bool ended;
} TermStream;

static char *term_event(const GwTermEvent *ev) {
        _cleanup_free_ char *b64 = NULL, *json = NULL;
        char *line = NULL;

        if (ev->ended) {
                json_t *end = json_pack("{s:s, s:i, s:i}", "reason", ev->reason, "exitCode", ev->exit_code, "signal",
                                        ev->signal);

                json = end ? json_dumps(end, JSON_COMPACT) : NULL;
                json_decref(end);
                if (json && asprintf(&line, "event: end\ndata: %s\n\n", json) < 0)
                        line = NULL;
                return line;
        }
        b64 = malloc(4 * ((ev->len + 2) / 3) + 1);
        if (!b64)
                return NULL;
        b64[base64_encode((const uint8_t *) ev->data, ev->len, b64)] = '\0';
        if (asprintf(&line, "event: output\ndata: %s\n\n", b64) < 0)
                line = NULL;
        return line;
}

static ssize_t term_read(void *cls, uint64_t pos, char *buf, size_t max) {
        TermStream *st = cls;

        while (!st->out.line) {
                GwTermEvent ev;
                int r;

                if (st->ended)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                r = gateway_term_next(st->term, GATEWAY_SSE_KEEPALIVE_S * 1000u, &ev);
                if (r == -ETIMEDOUT)
                        return sse_keepalive(buf, max);
                if (r < 0)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                st->ended = ev.ended;
                r = sse_set(&st->out, term_event(&ev));
                free(ev.data);
                if (r < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        return sse_copy(&st->out, buf, max);
}

static void term_free(void *cls) {
        TermStream *st = cls;

        gateway_term_close(st->term);
        free(st->out.line);
        free(st);
}

static unsigned query_u32(struct MHD_Connection *c, const char *key) {
        const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
        unsigned long n = v ? strtoul(v, NULL, 10) : 0;

        return n <= SBX_TERMINAL_SIZE_MAX ? (unsigned) n : 0;
}

static enum MHD_Result takeover_events(Gateway *g, struct MHD_Connection *c, const char *box, const char *cap) {
        unsigned rows = query_u32(c, "rows"), cols = query_u32(c, "cols");
        TermStream *st;
        int r;

        st = calloc(1, sizeof(*st));
        if (!st)
                return MHD_NO;
        r = gateway_term_attach(g, box, cap, rows && cols ? rows : 0, rows && cols ? cols : 0, &st->term);
        if (r < 0) {
                free(st);
                return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, NULL, 0, NULL);
        }
        return respond_sse(c, term_read, st, term_free);
}

/* POST input {"keys": "...", "rows": n, "cols": n} (each optional) or return {"note": "..."}. */
static enum MHD_Result takeover_post(Gateway *g, struct MHD_Connection *c, const char *box, const char *cap,
                                     const char *action, const Req *q) {
        json_t *body = json_loadb(q->body ?: "", q->len, JSON_REJECT_DUPLICATES, NULL);
        const char *keys = NULL, *note = "";
        json_int_t rows = 0, cols = 0;
        size_t n_keys = 0;
        int r;

        if (!json_is_object(body) ||
            json_unpack(body, "{s?s%, s?I, s?I, s?s}", "keys", &keys, &n_keys, "rows", &rows, "cols", &cols, "note",
                        &note) < 0 ||
            rows < 0 || cols < 0 || rows > SBX_TERMINAL_SIZE_MAX || cols > SBX_TERMINAL_SIZE_MAX || !rows != !cols ||
            n_keys > SBX_TERMINAL_INPUT_MAX || strlen(note) > SBX_TAKEOVER_NOTE_MAX) {
                json_decref(body);
                return respond(c, MHD_HTTP_BAD_REQUEST, NULL, NULL, 0, NULL);
        }
        r = strcmp(action, "return") == 0 ? gateway_takeover_return(g, box, cap, note)
                                           : gateway_term_input(box, cap, keys, n_keys, (unsigned) rows, (unsigned) cols);
        json_decref(body);
        if (r == -ENOENT)
                return respond(c, MHD_HTTP_NOT_FOUND, NULL, NULL, 0, NULL);
        if (r < 0)
                return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, NULL, 0, NULL);
        return respond(c, MHD_HTTP_NO_CONTENT, NULL, NULL, 0, NULL);
}

/* GET /takeover/BOX (the page), GET .../events, POST .../input, POST .../return; ?c= the capability.
 * A wrong capability, a box not taken over and an unknown path all get 404. */
static enum MHD_Result handle_takeover(Gateway *g, struct MHD_Connection *c, const char *url, const char *method,
                                       const Req *q) {
        const char *cap = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "c") ?: "";
        const char *rest = url + strlen(TAKEOVER_PATH), *slash = strchr(rest, '/');
        const char *action = slash ? slash + 1 : "";
        size_t n = slash ? (size_t) (slash - rest) : strlen(rest);
        bool get = strcmp(method, "GET") == 0, post = strcmp(action, "input") == 0 || strcmp(action, "return") == 0;
        char box[SBX_NAME_MAX + 1];
        int r;

        if (n >= sizeof(box) || (action[0] && strcmp(action, "events") != 0 && !post))
                return respond(c, MHD_HTTP_NOT_FOUND, NULL, NULL, 0, NULL);
        if (get == post || (!get && strcmp(method, "POST") != 0))
                return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, NULL, 0, MHD_HTTP_HEADER_ALLOW, post ? "POST" : "GET",
                               NULL);
        snprintf(box, sizeof(box), "%.*s", (int) n, rest);
        if (!get)
                return q->too_large ? respond(c, MHD_HTTP_CONTENT_TOO_LARGE, NULL, NULL, 0, NULL)
                                    : takeover_post(g, c, box, cap, action, q);
        r = gateway_takeover_check(g, box, cap);
        if (r == -ENOENT)
                return respond(c, MHD_HTTP_NOT_FOUND, NULL, NULL, 0, NULL);
        if (r < 0) {
                log_warning_errno(r, "Cannot check a takeover with sbxd: %m");
                return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, NULL, NULL, 0, NULL);
        }
        if (action[0])
                return takeover_events(g, c, box, cap);
        return respond(c, MHD_HTTP_OK, "text/html; charset=utf-8", takeover_page_html, strlen(takeover_page_html),
                       "Content-Security-Policy", PAGE_CSP, "Referrer-Policy", "no-referrer", MHD_HTTP_HEADER_CACHE_CONTROL,
                       "no-store", NULL);
}

enum MHD_Result gateway_http_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                     const char *version, const char *upload_data, size_t *upload_data_size,
                                     void **con_cls) {
        Gateway *g = cls;
        Req *q = *con_cls;

        if (!q)
                return request_start(g, c, url, method, (Req **) con_cls);
        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;

                *upload_data_size = 0;
                if (q->too_large || q->len + n > gateway_config(g)->body_max) {
                        q->too_large = true;
                        return MHD_YES;
                }
                char *b = realloc(q->body, q->len + n + 1);
                if (!b)
                        return MHD_NO;
                memcpy(b + q->len, upload_data, n);
                q->body = b;
                q->len += n;
                q->body[q->len] = '\0';
                return MHD_YES;
        }
        if (q->takeover)
                return handle_takeover(g, c, url, method, q);
        if (strcmp(method, "POST") == 0)
                return handle_post(g, c, q);
        if (strcmp(method, "GET") == 0)
                return handle_get(g, c, q);
        return handle_delete(g, c, q);
}

void gateway_http_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
        req_free(*con_cls);
        *con_cls = NULL;
}
