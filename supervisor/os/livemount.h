/* Session tmpfs mounts that sbxd makes and holds, so that a managed
 * session's writable layer can outlive sbxd without a copy (core/kept.h).
 * sbxd makes the tmpfs detached (fsopen(2), fsmount(2)) and two detached
 * clones of it (open_tree(2) OPEN_TREE_CLONE, made where it is attached in a
 * throw-away private mount namespace, as Debian 12's kernel clones no
 * detached mount): one for the worker to attach in its own namespace, one
 * sbxd keeps. The superblock lives as long as either mount does. At a stop the clone is attached below
 * RUN_DIR/live in the host's mount namespace: PID 1's when sbxd runs in one
 * of its own (systemd's ProtectSystem= gives it one, whose mounts vanish with
 * the service), else sbxd's. Non-logging. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* A session kept in place is RUN_DIR/live/SANDBOX/WS: its tmpfs mounted at
 * s, a claim's /tmp at tmp, a box's /work upper tmpfs (os/workmount.h) at
 * work, and its note (core/kept.h). */
#define LIVE_DIR "live"
#define LIVE_SESSION "s"
#define LIVE_TMP "tmp"
#define LIVE_WORK "work"

/* A new detached tmpfs named source, of size bytes, nosuid and nodev, its
 * root owned by uid:uid with mode: *ret_mnt for the worker, *ret_keep a
 * clone for sbxd. */
int session_tmpfs_new(const char *source, uint64_t size, uid_t uid, mode_t mode, int *ret_mnt, int *ret_keep);
/* Attach the detached mount mnt at the directory path (absolute) in the
 * host's mount namespace. */
int live_mount_attach(int mnt, const char *path);
/* Detach whatever is mounted at path (absolute; nothing is fine), in the
 * host's mount namespace and in sbxd's. */
int live_mount_detach(const char *path);
/* RUN_DIR/live/SANDBOX/WS/sub into buf (PATH_MAX bytes). */
int live_session_path(const char *run_dir, const char *sb_id, const char *ws_id, const char *sub, char *buf);
/* The session ws_id kept in place for sandbox sb_id (live: an fd of
 * RUN_DIR/live/SANDBOX): its mounts detached, then its directory removed;
 * nothing is removed while a mount may still be there. */
int live_session_remove(const char *run_dir, const char *sb_id, int live, const char *ws_id);
