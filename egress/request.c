#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress-policy.h"
#include "macro.h"
#include "request.h"

/* RFC 9110 tchar. */
static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_visible(char c) {
        return c > 0x20 && c < 0x7f;
}

/* The end of the line at p (its CR), or NULL if there is no CRLF before
 * end or a bare CR or LF comes first. */
static const char *line_end(const char *p, const char *end, bool *ret_bad) {
        for (const char *q = p; q < end; q++) {
                if (*q == '\n') {
                        *ret_bad = true;
                        return NULL;
                }
                if (*q == '\r') {
                        if (q + 1 == end)
                                return NULL;
                        if (q[1] != '\n') {
                                *ret_bad = true;
                                return NULL;
                        }
                        return q;
                }
        }
        return NULL;
}

/* "host:port" (port required) or, for a URI, "host[:port]" (default 80). */
static int authority_parse(const char *s, size_t len, bool need_port, EgressRequest *req) {
        if (memchr(s, '@', len))
                return -EINVAL;
        if (egress_host_port_parse(s, len, req->host, &req->port) < 0)
                return -EINVAL;
        if (req->port == 0) {
                if (need_port)
                        return -EINVAL;
                req->port = 80;
        }
        return 0;
}

typedef struct RequestLine {
        const char *method, *target, *version;
        size_t method_len, target_len;
        const char *path;               /* plain HTTP: origin form, or NULL for "/" */
        size_t path_len;
        const char *authority;
        size_t authority_len;
} RequestLine;

static int request_line_parse(const char *p, const char *eol, RequestLine *rl, EgressRequest *req) {
        const char *sp1 = memchr(p, ' ', (size_t) (eol - p)), *sp2;

        if (!sp1 || sp1 == p || sp1 - p > 16)
                return -EINVAL;
        for (const char *q = p; q < sp1; q++)
                if (*q < 'A' || *q > 'Z')
                        return -EINVAL;
        sp2 = memchr(sp1 + 1, ' ', (size_t) (eol - sp1 - 1));
        if (!sp2 || sp2 == sp1 + 1)
                return -EINVAL;
        for (const char *q = sp1 + 1; q < sp2; q++)
                if (!is_visible(*q))
                        return -EINVAL;
        if (eol - sp2 - 1 != 8 || (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0))
                return -EINVAL;
        *rl = (RequestLine) { .method = p, .method_len = (size_t) (sp1 - p), .target = sp1 + 1,
                              .target_len = (size_t) (sp2 - sp1 - 1), .version = sp2 + 1 };
        req->connect = rl->method_len == 7 && memcmp(p, "CONNECT", 7) == 0;
        if (req->connect)
                return authority_parse(rl->target, rl->target_len, true, req);
        if (rl->target_len < 8 || strncasecmp(rl->target, "http://", 7) != 0)
                return -EINVAL;
        rl->authority = rl->target + 7;
        rl->path = memchr(rl->authority, '/', rl->target_len - 7);
        rl->authority_len = rl->path ? (size_t) (rl->path - rl->authority) : rl->target_len - 7;
        rl->path_len = rl->path ? rl->target_len - 7 - rl->authority_len : 0;
        /* No query or fragment in the authority: "http://h?x" names no path. */
        if (memchr(rl->authority, '?', rl->authority_len) || memchr(rl->authority, '#', rl->authority_len))
                return -EINVAL;
        return authority_parse(rl->authority, rl->authority_len, false, req);
}

/* Headers the proxy answers for itself and never forwards. */
static bool header_dropped(const char *name, size_t len) {
        static const char *const dropped[] = { "proxy-connection", "proxy-authorization", "connection",
                                               "keep-alive", "host" };

        for (size_t i = 0; i < ELEMENTSOF(dropped); i++)
                if (strlen(dropped[i]) == len && strncasecmp(name, dropped[i], len) == 0)
                        return true;
        return false;
}

static int header_check(const char *p, const char *eol, size_t *ret_name_len) {
        const char *colon = memchr(p, ':', (size_t) (eol - p));

        if (!colon || colon == p)
                return -EINVAL;
        for (const char *q = p; q < colon; q++)
                if (!is_tchar(*q))
                        return -EINVAL;
        for (const char *q = colon + 1; q < eol; q++)
                if ((unsigned char) *q < 0x20 ? *q != '\t' : *q == 0x7f)
                        return -EINVAL;
        *ret_name_len = (size_t) (colon - p);
        return 0;
}

static int forward_build(const RequestLine *rl, const char *headers, const char *headers_end, EgressRequest *req) {
        size_t cap = (size_t) (headers_end - rl->method) + SBX_EGRESS_HOST_MAX + 64, n;
        char *out = malloc(cap);
        const char *p = headers;

        if (!out)
                return -ENOMEM;
        n = (size_t) snprintf(out, cap, "%.*s %.*s %.8s\r\nHost: %.*s\r\n", (int) rl->method_len, rl->method,
                              rl->path ? (int) rl->path_len : 1, rl->path ?: "/", rl->version,
                              (int) rl->authority_len, rl->authority);
        while (p < headers_end) {
                const char *eol = memmem(p, (size_t) (headers_end - p), "\r\n", 2);
                size_t name_len = (size_t) ((const char *) memchr(p, ':', (size_t) (eol - p)) - p);

                if (!header_dropped(p, name_len)) {
                        memcpy(out + n, p, (size_t) (eol + 2 - p));
                        n += (size_t) (eol + 2 - p);
                }
                p = eol + 2;
        }
        n += (size_t) snprintf(out + n, cap - n, "Connection: close\r\n\r\n");
        req->forward = out;
        req->forward_len = n;
        return 0;
}

int egress_request_parse(const char *buf, size_t len, EgressRequest *ret) {
        EgressRequest req = {};
        const char *end = buf + MIN(len, (size_t) SBX_EGRESS_HEADER_MAX), *p = buf, *eol, *headers;
        unsigned lines = 0;
        bool bad = false;
        RequestLine rl;
        int r;

        eol = line_end(p, end, &bad);
        if (!eol)
                return bad ? -EINVAL : len >= SBX_EGRESS_HEADER_MAX ? -E2BIG : -EAGAIN;
        r = request_line_parse(p, eol, &rl, &req);
        if (r < 0)
                return r;
        headers = p = eol + 2;
        for (;;) {
                size_t name_len;

                eol = line_end(p, end, &bad);
                if (!eol)
                        return bad ? -EINVAL : len >= SBX_EGRESS_HEADER_MAX ? -E2BIG : -EAGAIN;
                if (eol == p)
                        break;
                if (++lines > SBX_EGRESS_HEADERS_MAX || header_check(p, eol, &name_len) < 0)
                        return -EINVAL;
                p = eol + 2;
        }
        req.head_len = (size_t) (eol + 2 - buf);
        if (!req.connect) {
                r = forward_build(&rl, headers, p, &req);
                if (r < 0)
                        return r;
        }
        *ret = req;
        return 0;
}

void egress_request_done(EgressRequest *req) {
        free(req->forward);
        req->forward = NULL;
}
