/* Spare sessions: an automatic session set up ahead of the command that will
 * use it, so that exec_command without a session pays for a command and a
 * publication check, not for namespaces, mounts and a worker's start.
 *
 * A spare is an ordinary automatic session nobody has asked for yet. It is
 * built on the sandbox's snapshot of the time; it is only handed out while
 * that is still the snapshot (nothing was published since), so what the
 * command sees is exactly what a session made on the spot would see: the
 * same layers, a fresh upper, /tmp and process tree. Spares are made after
 * an automatic session of the sandbox ended without publishing anything
 * (read-only commands: tests, builds into /tmp, searches), since after a
 * publication the next spare would be stale before it is used. They are
 * dropped when a publication made them stale, when they idle for
 * session_spare_idle_seconds, and before any limit would refuse a real
 * session. Making and dropping spares happens in the loop's tick
 * (spares_run_deadlines), never inside a session's end or a publication. */
#pragma once

#include "core/sandbox.h"
#include "core/server.h"
#include "core/session.h"

/* A current spare of sb, now an ordinary automatic session, or NULL. One
 * whose worker is seen gone is passed over (the loop ends it); if it dies
 * before its first command reached it, that command moves to a new session
 * (core/session.c: command_move_fresh). */
WorkspaceSession *spare_take(Server *s, Sandbox *sb);
/* Before a session someone asked for: destroy spares that would make a limit refuse it. */
void spare_make_room(Server *s, Sandbox *sb);
unsigned long long spares_next_deadline(Server *s);
/* Once per loop pass: drop stale and idle spares, refill the sandboxes that want spares. */
void spares_run_deadlines(Server *s);
