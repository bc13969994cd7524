#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress-policy.h"
#include "fd-util.h"
#include "macro.h"

static const char *const policy_names[_EGRESS_POLICY_MAX] = {
        [EGRESS_NONE] = "none",
        [EGRESS_PACKAGE_MANAGERS] = "package-managers",
        [EGRESS_OPEN] = "open",
};

const char *egress_policy_to_string(EgressPolicy p) {
        return p >= 0 && p < _EGRESS_POLICY_MAX ? policy_names[p] : NULL;
}

int egress_policy_from_string(const char *name, EgressPolicy *ret) {
        for (EgressPolicy p = 0; p < _EGRESS_POLICY_MAX; p++)
                if (strcmp(name, policy_names[p]) == 0) {
                        *ret = p;
                        return 0;
                }
        return -EINVAL;
}

void egress_policy_error(const char *mode, char ret_message[static EGRESS_ERROR_MAX]) {
        snprintf(ret_message, EGRESS_ERROR_MAX, "egress mode \"%.64s\" is not in the allowlist (" EGRESS_POLICY_NAMES ")",
                 mode);
}

void egress_hosts_done(EgressHosts *hosts) {
        free(hosts->hosts);
        *hosts = (EgressHosts) {};
}

/* A host name of letters, digits, '-', '.' and '_' (some registries' CNAMEs
 * have one), or an IPv6 literal of hex digits, ':' and '.'. */
static bool host_valid(const char *name, bool v6) {
        size_t n = strlen(name);

        if (n == 0 || n > SBX_EGRESS_HOST_MAX || name[0] == '-' || name[0] == '.')
                return false;
        return strspn(name, v6 ? "0123456789abcdef:." : "abcdefghijklmnopqrstuvwxyz0123456789-._") == n;
}

int egress_hosts_add(EgressHosts *hosts, const char *name, size_t len, uint16_t port) {
        EgressHost *h;

        for (size_t i = 0; i < hosts->n; i++)
                if (hosts->hosts[i].port == port && strlen(hosts->hosts[i].name) == len &&
                    strncmp(hosts->hosts[i].name, name, len) == 0)
                        return 0;
        if (hosts->n >= SBX_EGRESS_HOSTS_MAX)
                return -E2BIG;
        h = reallocarray(hosts->hosts, hosts->n + 1, sizeof(EgressHost));
        if (!h)
                return -ENOMEM;
        hosts->hosts = h;
        h = &h[hosts->n];
        *h = (EgressHost) { .port = port };
        memcpy(h->name, name, len);
        h->name[len] = '\0';
        hosts->n++;
        return 0;
}

int egress_host_port_parse(const char *s, size_t len, char ret_name[static SBX_EGRESS_HOST_MAX + 1],
                           uint16_t *ret_port) {
        char buf[SBX_EGRESS_HOST_MAX + 16], *name = buf, *port = NULL;
        uint64_t p = 0;
        bool v6 = false;

        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                buf[i] = (char) tolower((unsigned char) s[i]);
        buf[len] = '\0';
        if (buf[0] == '[') {
                char *end = strchr(buf, ']');

                if (!end || (end[1] && end[1] != ':'))
                        return -EINVAL;
                *end = '\0';
                name = buf + 1;
                port = end[1] ? end + 2 : NULL;
                v6 = true;
        } else if ((port = strchr(buf, ':'))) {
                *port++ = '\0';
        }
        if (port && (parse_u64(port, &p) < 0 || p == 0 || p > 65535))
                return -EINVAL;
        if (!host_valid(name, v6))
                return -EINVAL;
        strlcpy(ret_name, name, SBX_EGRESS_HOST_MAX + 1);
        *ret_port = (uint16_t) p;
        return 0;
}

int egress_hosts_parse(const char *value, EgressHosts *ret, char ret_error[static EGRESS_ERROR_MAX]) {
        _cleanup_(egress_hosts_done) EgressHosts hosts = {};
        const char *p = value;

        for (;;) {
                char name[SBX_EGRESS_HOST_MAX + 1];
                uint16_t port;
                size_t n;
                int r;

                p += strspn(p, " \t");
                n = strcspn(p, " \t");
                if (n == 0)
                        break;
                if (n == 4 && strncmp(p, "auto", 4) == 0) {
                        hosts.discover = true;
                } else if (egress_host_port_parse(p, n, name, &port) < 0) {
                        snprintf(ret_error, EGRESS_ERROR_MAX, "'%.*s' is not host, host:port or auto", (int) MIN(n, 80),
                                 p);
                        return -EINVAL;
                } else if ((r = egress_hosts_add(&hosts, name, strlen(name), port)) < 0) {
                        snprintf(ret_error, EGRESS_ERROR_MAX, "more than %u hosts", SBX_EGRESS_HOSTS_MAX);
                        return r;
                }
                p += n;
        }
        *ret = hosts;
        hosts = (EgressHosts) {};
        return 0;
}

bool egress_hosts_allow(const EgressHosts *hosts, const char *host, uint16_t port) {
        for (size_t i = 0; i < hosts->n; i++) {
                const EgressHost *h = &hosts->hosts[i];

                if (strcasecmp(h->name, host) == 0 && (h->port ? h->port == port : port == 80 || port == 443))
                        return true;
        }
        return false;
}
