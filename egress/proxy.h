/* sbx-egress's proxy (sbx-egress(8), docs/egress.md): one epoll loop over
 * the listening sockets sbxd attached (each inside a session's network
 * namespace), their accepted connections and the upstream connections made
 * in sbx-egress's own (the host's) namespace. A connection reads one request
 * head (CONNECT or an absolute-URI request, egress/request.h) within
 * SBX_EGRESS_HANDSHAKE_S, is checked against its session's policy, resolved
 * on a thread of its own (getaddrinfo; the loop never waits), connected to
 * the first resolved address egress/addr.h allows, and relayed with
 * splice(2) through a pipe per direction. Each verdict goes to sbxd. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "egress-policy.h"
#include "sbx-limits.h"

typedef struct Proxy Proxy;

/* A connection's outcome: target is "host:port", reason why it was refused
 * (NULL when allowed). The proxy's owner sends it to sbxd. */
typedef void (*ProxyVerdict)(void *userdata, const char *key, const char *target, bool allowed, const char *reason);

int proxy_new(ProxyVerdict verdict, void *userdata, Proxy **ret);
Proxy *proxy_free(Proxy *p);
/* The settings of all sessions: whether private addresses may be reached,
 * and the hosts of package-managers (taken over). */
void proxy_configure(Proxy *p, bool allow_private, EgressHosts *package_hosts);
/* A request for name:port goes to host:to_port (a box's service wired
 * external, docs/boxes.md), checked and reported as that host. */
typedef struct ProxyAlias {
        char name[SBX_EGRESS_HOST_MAX + 1];     /* lower case */
        char host[SBX_EGRESS_HOST_MAX + 1];     /* lower case; an IPv6 literal without brackets */
        uint16_t port, to_port;
} ProxyAlias;

/* Serve the listening socket fd (taken over) of session key in sandbox under
 * policy, with n_aliases (at most SBX_EGRESS_ALIASES_MAX) aliases (copied).
 * A session attached again keeps only its new listener and aliases. */
int proxy_attach(Proxy *p, const char *key, const char *sandbox, EgressPolicy policy, const ProxyAlias *aliases,
                 size_t n_aliases, int fd);
/* Close session key's listener and its connections. */
void proxy_detach(Proxy *p, const char *key);
/* Watch fd (sbxd's channel) too: on_ready(userdata) when it is readable. */
int proxy_watch_control(Proxy *p, int fd, void (*on_ready)(void *userdata), void *userdata);
/* Run until proxy_stop. */
int proxy_run(Proxy *p);
void proxy_stop(Proxy *p);
