/* The spawner: a small process forked from sbxd at start-up that makes the
 * session children (clone(2) into new namespaces). Forking sbxd itself for
 * every session copied its page tables and made every later write of sbxd a
 * copy-on-write fault with a TLB shoot-down on the other CPUs: about half of
 * sbxd's time per session. The spawner's address space is small and it never
 * writes much, so its clones are cheap and sbxd no longer forks at all.
 *
 * sbxd sends a SpawnParams with the two child ends of the session's
 * socketpairs; the spawner writes the session's SessionSetup on a pipe, takes
 * a network namespace, and clones into new namespaces a child that shares its
 * memory only until it execs sbx-worker --session-init (CLONE_VM |
 * CLONE_VFORK: no page tables copied, no copy-on-write faults on either
 * side). It then reports the child's pid and pidfd on the set-up channel
 * (ns.c continues from there); the kernel reaps it when it exits. The
 * spawner dies with sbxd (parent-death signal), and the session inits with
 * the spawner. Non-logging. */
#pragma once

#include "os/ns.h"

/* Fork the spawner; worker_exe_fd is what it execs for every session, seccomp
 * the filter each session's init installs (the spawner keeps its own copies). */
int spawner_start(int worker_exe_fd, const SeccompProgram *seccomp, Spawner **ret);
/* Ask for a session child; the spawner answers on sync. If the spawner is
 * gone it is started again (once). */
int spawner_send(Spawner *sp, const SpawnParams *p, int sync, int worker_sock);
Spawner *spawner_free(Spawner *sp);
