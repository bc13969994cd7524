/* Managed sessions kept across a stop of sbxd: a managed session's upper
 * (on the session's tmpfs) is never lost while it is not finalized. When
 * sbxd stops, each managed session with changes is stopped and kept in
 * place: sbxd's clone of its tmpfs (os/livemount.h) mounted at
 * RUN_DIR/live/ID/WS/s with a note of its id, policy, creation and base
 * (live/ID/WS/meta), which costs no copy. Only if that fails is its upper
 * copied (sparse, hard links kept, whiteouts and opaque directories as they
 * are) to STATE/sandboxes/ID/kept/WS/upper with the note (kept/WS/meta),
 * synced, then named; sbxd --save-kept (kept_save_live) copies the live
 * ones so before a reboot. At the next start either is back, stopped, with
 * the same id, read in place, and is finalized as any stopped session:
 * publish from the kept upper, or discard; either removes it (a live one
 * unmounted first). A
 * session restored so and still not finalized at the next stop stays where
 * it is. The copy may use state_reserve (that is what the reserve is for);
 * only a copy the filesystem cannot hold at all fails, and says so in the log.
 *
 * A claim's session (core/claim.h) is kept whole: besides the workspace's
 * upper, its root's upper (/usr/local, /root, /etc...) on the same tmpfs
 * (copied as kept/WS/sys), its /tmp, a tmpfs sbxd made too, mounted at
 * live/ID/WS/tmp (copied as kept/WS/tmp) and, for a box started from a
 * version, the tmpfs of the upper of its /work overlay, mounted at
 * live/ID/WS/work (copied as kept/WS/work); not a warm claim's, nor one that
 * wrote nothing.
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
/* *ret: a detached clone of the /work upper tmpfs of from kept in place
 * (RUN_DIR/live/SANDBOX/WS/work), to be that overlay's upper again; -ENOENT
 * if from has none there (a copy, or not a box's from a version). */
int kept_work_mount(const WorkspaceSession *from, int *ret);
/* At start, once sb is loaded and before its layers are collected: its kept
 * sessions, back as stopped sessions. */
int kept_sessions_load(Server *s, Sandbox *sb);
/* sbxd --save-kept (sbxd is not running): each session kept in place in
 * cfg's RUN_DIR/live copied to the state directory as a stop without them
 * would (STATE/sandboxes/ID/kept/WS), then unmounted and removed. One that
 * cannot be saved stays and is logged; the last error is returned. */
int kept_save_live(const Config *cfg);
