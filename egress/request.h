/* The request head a sandbox's client sends sbx-egress: "CONNECT host:port
 * HTTP/1.x" or an absolute-URI request "METHOD http://host[:port]/path
 * HTTP/1.x", then header lines and an empty line. A small strict parser:
 * CRLF line ends only, no obsolete line folding, token methods and header
 * names, visible ASCII targets, no userinfo, at most SBX_EGRESS_HEADER_MAX
 * bytes and SBX_EGRESS_HEADERS_MAX lines; anything else is refused.
 * Non-logging; fuzzed by tests/fuzz/fuzz-egress-request.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx-limits.h"

typedef struct EgressRequest {
        bool connect;                   /* CONNECT: a tunnel; else plain HTTP */
        char host[SBX_EGRESS_HOST_MAX + 1]; /* lower case; an IPv6 literal without brackets */
        uint16_t port;
        size_t head_len;                /* bytes of the head, its empty line included */
        /* Plain HTTP: the head to send upstream, in origin form, without the
         * proxy's headers (Proxy-*, Connection, Keep-Alive), with Host set to
         * the URI's authority and "Connection: close". */
        char *forward;                  /* NUL-terminated; the caller frees it */
        size_t forward_len;
} EgressRequest;

/* Parse the head at the start of buf (len bytes). 0 with ret set; -EAGAIN
 * if the head is not complete yet; -E2BIG if it cannot be within
 * SBX_EGRESS_HEADER_MAX; -EINVAL if it is malformed; -ENOMEM. */
int egress_request_parse(const char *buf, size_t len, EgressRequest *ret);
void egress_request_done(EgressRequest *req);
