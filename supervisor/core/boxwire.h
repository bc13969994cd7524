/* sandbox_wire's table (issue 21, docs/boxes.md "Wiring"): a box's wired
 * services are lines of its own /etc/hosts, so the table is what the box
 * resolves, kept with its files (after an sbxd restart too):
 *
 *   127.0.0.1\t<service>\t# sbx-wire box        the name is the box itself
 *   #\t<service>\t# sbx-wire external           a comment: the name goes to sbx-egress
 *
 * A service wired external is aliased in sbx-egress (EgressAttach.aliases):
 * a proxied request for <service>:<port> goes to externalBaseUrl's host and
 * port, checked against the box's egress policy (box_egress) and audited as
 * that host. Only the box's own services (sandbox_start's) are read from
 * the file, whatever else it holds. Non-logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/box.h"
#include "core/server.h"
#include "core/session.h"
#include "sbx.pb-c.h"

#define BOX_WIRE_HOSTS_MAX (256u * 1024u) /* the box's /etc/hosts, read at most */

/* The mode service has in hosts (the text of the box's /etc/hosts): "box",
 * "external" or "" (not wired). */
const char *box_wired_mode(const char *hosts, const char *service);
/* hosts without service's wired line, and with its line for mode ("box" or
 * "external"); NULL if out of memory. */
char *box_hosts_wired(const char *hosts, const char *service, const char *mode);
/* externalBaseUrl's host (lower case, an IPv6 literal without brackets, into
 * host: SBX_EGRESS_HOST_MAX + 1) and port (its own, else 80 or 443);
 * -EINVAL if it has none or it is not an http(s) URL of a host. */
int box_url_target(const char *url, char *host, uint16_t *ret_port);
/* no_proxy's value for the box's commands: localhost, 127.0.0.1 and its
 * services wired box in hosts (those names are the box itself: never the
 * egress proxy's). NULL if out of memory. */
char *box_no_proxy(const Box *box, const char *hosts);
/* The box's /etc/hosts (NUL-terminated) through its session's root fd. */
int box_hosts_read(const WorkspaceSession *ws, char **ret);
/* The aliases of ws's box's services wired external, for its EgressAttach:
 * *ret_n of them in *ret (one allocation, freed with free()), or none. */
int box_egress_aliases(Server *s, const WorkspaceSession *ws, Sbx__EgressAlias ***ret, size_t *ret_n);
