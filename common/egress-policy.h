/* Egress policies of sandboxes (docs/egress.md, issue 18): none (loopback
 * only), package-managers (the hosts of egress_package_hosts) and open; and
 * lists of allowed hosts. Shared by sbxd (supervisor/core/egress.h) and
 * sbx-egress. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx-limits.h"

typedef enum EgressPolicy {
        EGRESS_NONE,                    /* no network but the sandbox's loopback */
        EGRESS_PACKAGE_MANAGERS,        /* the package hosts only */
        EGRESS_OPEN,                    /* any public host */
        _EGRESS_POLICY_MAX,
} EgressPolicy;

#define EGRESS_POLICY_NAMES "none, package-managers, open"
#define EGRESS_ERROR_MAX 160            /* bytes of egress_policy_error's message */

/* The policy's name ("none", "package-managers", "open"). */
const char *egress_policy_to_string(EgressPolicy p);
/* The policy called name; -EINVAL if there is none. */
int egress_policy_from_string(const char *name, EgressPolicy *ret);
/* What a request naming an unknown policy is told (the seed's wording):
 * egress mode "<mode>" is not in the allowlist (none, package-managers, open). */
void egress_policy_error(const char *mode, char ret_message[static EGRESS_ERROR_MAX]);

/* One allowed host: port 0 allows 80 and 443. */
typedef struct EgressHost {
        char name[SBX_EGRESS_HOST_MAX + 1];     /* lower case; an IPv6 literal without brackets */
        uint16_t port;
} EgressHost;

typedef struct EgressHosts {
        EgressHost *hosts;
        size_t n;
        bool discover;                  /* "auto" was listed */
} EgressHosts;

/* Parse egress_package_hosts (space-separated host, host:port, [v6]:port
 * and the word auto) into a new list; on -EINVAL ret_error says which word. */
int egress_hosts_parse(const char *value, EgressHosts *ret, char ret_error[static EGRESS_ERROR_MAX]);
/* "host", "host:port" or "[v6]:port" (len bytes at s) into a lower-case name
 * and a port (0: none given); -EINVAL if it is none of them. */
int egress_host_port_parse(const char *s, size_t len, char ret_name[static SBX_EGRESS_HOST_MAX + 1], uint16_t *ret_port);
/* Add name (len bytes) and port unless the list has them; -E2BIG past
 * SBX_EGRESS_HOSTS_MAX. */
int egress_hosts_add(EgressHosts *hosts, const char *name, size_t len, uint16_t port);
/* Whether host:port is on the list (host compared without case). */
bool egress_hosts_allow(const EgressHosts *hosts, const char *host, uint16_t port);
void egress_hosts_done(EgressHosts *hosts);
