/* Which addresses sbx-egress may connect to (docs/egress.md): never
 * unspecified, multicast, broadcast or reserved ones; loopback, link-local
 * (169.254/16, fe80::/10: cloud metadata), private and shared ranges
 * (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, ...) and the host's
 * own addresses only with egress_allow_private. Checked on the resolved
 * address that is connected to. Non-logging. */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>

typedef enum AddrClass {
        ADDR_PUBLIC,
        ADDR_PRIVATE,                   /* loopback, link-local, private, shared, the host's own */
        ADDR_NEVER,                     /* unspecified, multicast, broadcast, reserved, documentation */
} AddrClass;

/* The class of a (AF_INET or AF_INET6) address; IPv4-mapped IPv6 addresses
 * as their IPv4 address. Any other family is ADDR_NEVER. */
AddrClass egress_addr_class(const struct sockaddr *sa);
/* Whether sa is an address of one of the host's interfaces (getifaddrs, in
 * sbx-egress's network namespace, the host's). */
bool egress_addr_is_local(const struct sockaddr *sa);
/* Whether connecting to sa is allowed: public, or private when allow_private. */
bool egress_addr_allowed(const struct sockaddr *sa, bool allow_private);
