/* Managed sessions kept across a stop of sbxd: a managed session's upper
 * (on the session's tmpfs) is never lost while it is not finalized. When
 * sbxd stops, each managed session with changes is stopped and its upper
 * copied (sparse, hard links kept, whiteouts and opaque directories as they
 * are) to STATE/sandboxes/ID/kept/WS/upper with a note of its id, policy,
 * creation and base (kept/WS/meta), synced, then named; at the next start it
 * is back, stopped, with the same id, and is finalized as any stopped
 * session: publish from the kept copy, or discard; either removes it. A
 * session restored so and still not finalized at the next stop stays where
 * it is. The copy may use state_reserve (that is what the reserve is for);
 * only a copy the filesystem cannot hold at all fails, and says so in the log.
 *
 * A claim's session (core/claim.h) is kept whole: besides the workspace's
 * upper, its root's upper (/usr/local, /root, /etc...) as kept/WS/sys, its
 * /tmp as kept/WS/tmp and, for a box started from a version, the upper of its
 * /work overlay as kept/WS/work (not a warm claim's, nor one that wrote nothing).
 * Its claim does not finalize it:
 * the claim's next session is filled from it (kept_session_seed) before that
 * session's worker starts, and it goes once the new one runs. Processes do
 * not survive: only files do. */
#pragma once

#include "core/sandbox.h"
#include "core/server.h"
#include "core/session.h"

/* At stop, before ws is destroyed: keep its changes if it is a managed
 * session that has some (its worker is stopped first). */
void kept_session_save(Server *s, WorkspaceSession *ws);
/* Fill a new session being set up (upper_fd: its workspace upper, O_PATH;
 * root_fd: its merged root, O_PATH) with the files kept of the stopped
 * session from, before anything in the session looked at them. */
int kept_session_seed(const WorkspaceSession *from, int upper_fd, int root_fd);
/* Merge the kept /work upper of from (if it has one) into dst_fd, the upper of
 * the /work overlay of a box's session that runs again (core/box.c), before
 * anything in it looked at /work. */
int kept_work_seed(const WorkspaceSession *from, int dst_fd);
/* At start, once sb is loaded and before its layers are collected: its kept
 * sessions, back as stopped sessions. */
int kept_sessions_load(Server *s, Sandbox *sb);
