/* The package hosts of sbxd.conf's egress_package_hosts = auto: what the
 * host's own apt, npm and pip configuration names (docs/egress.md). The
 * policies themselves are common/egress-policy.h, shared with sbx-egress.
 * Non-logging, Server-free. */
#pragma once

#include "egress-policy.h"
#include "macro.h"
#include "sbx.pb-c.h"

/* Add the registries of the apt (etc/apt/sources.list, sources.list.d *.list
 * and deb822 *.sources), npm (etc/npmrc, usr/etc/npmrc: registry and
 * @scope:registry) and pip (etc/pip.conf, etc/xdg/pip/pip.conf: index-url,
 * extra-index-url) configuration under the directory rootfd ("/" on a
 * host; fixtures in tests). Files that are missing or unreadable add
 * nothing; -E2BIG when the list would pass SBX_EGRESS_HOSTS_MAX. */
int egress_hosts_discover(EgressHosts *hosts, int rootfd);

/* ---- a command's audit ------------------------------------------------------ */

/* What a command's sandbox reached (contacted) and was refused through
 * sbx-egress while it ran: "host:port" entries, each list deduplicated and
 * at most SBX_EGRESS_AUDIT_MAX long (then truncated). */
typedef struct EgressAudit {
        char *contacted[SBX_EGRESS_AUDIT_MAX];
        char *refused[SBX_EGRESS_AUDIT_MAX];
        size_t n_contacted, n_refused;
        bool truncated;
} EgressAudit;

int egress_audit_add(EgressAudit *a, const char *target, bool allowed);
void egress_audit_done(EgressAudit *a);
/* The audit as replies carry it (CommandOutput.egress; the script set's
 * results too), borrowing a's strings: for a command whose sandbox's policy
 * is not none. */
void egress_audit_view(const EgressAudit *a, EgressPolicy policy, Sbx__EgressAudit *ret);

/* Whether a verdict from sbx-egress (less privileged than sbxd) is well
 * formed: a session id, a host:port target and a bounded reason.
 * tests/fuzz/fuzz-egress-verdict.c decodes frames with it. */
bool egress_verdict_check(const Sbx__EgressVerdict *v);

/* The proxy variables of a sandbox with a policy other than none (sbx-egress
 * listens at 127.0.0.1:SBX_EGRESS_PORT in each of its sessions). */
#define EGRESS_PROXY_URL "http://127.0.0.1:" STRINGIFY(SBX_EGRESS_PORT)
#define EGRESS_PROXY_ENV_N 9
extern const char *const egress_proxy_env[EGRESS_PROXY_ENV_N];
