/* sbxd's side of sbx-egress (sbx-egress(8), docs/egress.md): it starts the
 * proxy as egress_user (no capabilities, no_new_privs) with a socketpair,
 * restarts it with a backoff when it dies, gives it the configuration and
 * the listening socket of every session whose sandbox's policy is not none
 * (made inside the session's network namespace by the spawner), and takes
 * its verdicts into the audits of the commands that run in those sessions.
 * sbx-egress is less privileged than sbxd: each of its messages is checked
 * (core/egress.h: egress_verdict_check, fuzzed), and a bad one ends it. */
#pragma once

#include <stdbool.h>

#include "core/server.h"
#include "core/session.h"
#include "sbx.pb-c.h"

/* Start sbx-egress, or say why it cannot run (logged; sessions of sandboxes
 * with a policy other than none are then refused with that reason). */
void egress_proxy_start(Server *s);
void egress_proxy_stop(Server *s);
/* Whether sessions of sandboxes with a policy other than none can start;
 * if not, ret_why says why. */
bool egress_proxy_available(Server *s, char *ret_why, size_t why_size);
/* ws is set up with its listening socket (ws->egress_fd): sbx-egress serves it. */
void egress_proxy_attach(Server *s, WorkspaceSession *ws);
/* ws ends: sbx-egress closes its listener and connections; its fd goes. */
void egress_proxy_detach(Server *s, WorkspaceSession *ws);
/* Take the verdicts that wait now (before a command's end is recorded). */
void egress_proxy_drain(Server *s);
/* The restart due after a backoff; the earliest such deadline (~0: none). */
void egress_proxy_run_deadlines(Server *s);
unsigned long long egress_proxy_next_deadline(Server *s);
