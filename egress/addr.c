#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "addr.h"
#include "macro.h"

typedef struct Range4 {
        uint32_t net;
        unsigned bits;
        AddrClass cls;
} Range4;

/* IANA's special-purpose IPv4 registry, the parts that matter here. */
static const Range4 ranges4[] = {
        { 0x00000000, 8, ADDR_NEVER },          /* 0/8 "this network" */
        { 0x0a000000, 8, ADDR_PRIVATE },        /* 10/8 */
        { 0x64400000, 10, ADDR_PRIVATE },       /* 100.64/10 shared (CGNAT) */
        { 0x7f000000, 8, ADDR_PRIVATE },        /* 127/8 loopback */
        { 0xa9fe0000, 16, ADDR_PRIVATE },       /* 169.254/16 link-local, cloud metadata */
        { 0xac100000, 12, ADDR_PRIVATE },       /* 172.16/12 */
        { 0xc0000000, 24, ADDR_NEVER },         /* 192.0.0/24 protocol assignments */
        { 0xc0000200, 24, ADDR_NEVER },         /* 192.0.2/24 TEST-NET-1 */
        { 0xc0a80000, 16, ADDR_PRIVATE },       /* 192.168/16 */
        { 0xc6120000, 15, ADDR_PRIVATE },       /* 198.18/15 benchmarking */
        { 0xc6336400, 24, ADDR_NEVER },         /* 198.51.100/24 TEST-NET-2 */
        { 0xcb007100, 24, ADDR_NEVER },         /* 203.0.113/24 TEST-NET-3 */
        { 0xe0000000, 4, ADDR_NEVER },          /* 224/4 multicast */
        { 0xf0000000, 4, ADDR_NEVER },          /* 240/4 reserved, and the broadcast address */
};

static AddrClass class4(uint32_t a) {
        for (size_t i = 0; i < ELEMENTSOF(ranges4); i++)
                if ((a >> (32 - ranges4[i].bits)) == (ranges4[i].net >> (32 - ranges4[i].bits)))
                        return ranges4[i].cls;
        return ADDR_PUBLIC;
}

static AddrClass class6(const struct in6_addr *a) {
        const uint8_t *b = a->s6_addr;
        static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
        uint32_t v4;

        if (IN6_IS_ADDR_V4MAPPED(a) || memcmp(b, nat64, 12) == 0) {
                memcpy(&v4, b + 12, 4);
                return class4(ntohl(v4));
        }
        if (IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_V4COMPAT(a) || b[0] == 0xff)
                return ADDR_NEVER;      /* ::, ::a.b.c.d, multicast */
        if (IN6_IS_ADDR_LOOPBACK(a) || (b[0] & 0xfe) == 0xfc || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) ||
            (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0))
                return ADDR_PRIVATE;    /* ::1, fc00::/7, fe80::/10, fec0::/10 (site-local) */
        if ((b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) || (b[0] == 0x01 && b[1] == 0x00 &&
            !memcmp(b + 2, "\0\0\0\0\0\0", 6)))
                return ADDR_NEVER;      /* 2001:db8::/32 documentation, 100::/64 discard */
        if (b[0] == 0x20 && b[1] == 0x02) {
                memcpy(&v4, b + 2, 4);  /* 6to4: as its IPv4 address */
                return class4(ntohl(v4));
        }
        return ADDR_PUBLIC;
}

AddrClass egress_addr_class(const struct sockaddr *sa) {
        if (sa->sa_family == AF_INET)
                return class4(ntohl(((const struct sockaddr_in *) sa)->sin_addr.s_addr));
        if (sa->sa_family == AF_INET6)
                return class6(&((const struct sockaddr_in6 *) sa)->sin6_addr);
        return ADDR_NEVER;
}

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b) {
        if (a->sa_family != b->sa_family)
                return false;
        if (a->sa_family == AF_INET)
                return ((const struct sockaddr_in *) a)->sin_addr.s_addr ==
                       ((const struct sockaddr_in *) b)->sin_addr.s_addr;
        return memcmp(&((const struct sockaddr_in6 *) a)->sin6_addr, &((const struct sockaddr_in6 *) b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
}

bool egress_addr_is_local(const struct sockaddr *sa) {
        struct ifaddrs *list, *i;
        bool found = false;

        if (getifaddrs(&list) < 0)
                return true;            /* not known: taken as the host's own */
        for (i = list; i && !found; i = i->ifa_next)
                found = i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6) &&
                        same_addr(i->ifa_addr, sa);
        freeifaddrs(list);
        return found;
}

bool egress_addr_allowed(const struct sockaddr *sa, bool allow_private) {
        AddrClass c = egress_addr_class(sa);

        if (c == ADDR_NEVER)
                return false;
        if (allow_private)
                return true;
        return c == ADDR_PUBLIC && !egress_addr_is_local(sa);
}
