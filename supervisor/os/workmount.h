/* A box's /work over shared, read-only layers (issue 21, versions): an
 * overlay whose lowers are layer directories stored root's on sbxd's state
 * filesystem, each seen through an idmapped mount of the session's user
 * namespace (the session's root owns their files there; the stored layers
 * are never written), and whose upper is a tmpfs of its own, sized like the
 * session's writable layer. Two boxes over the same layers share their
 * directories on disk and diverge in their uppers.
 *
 * The overlay is made in sbxd's mount namespace from fds (overlayfs takes its
 * layers as fds and accepts detached mounts as layers: Linux 6.15), so no
 * host path is in its options, and is then moved onto the target inside the
 * session's mount namespace by the calling thread, which joins that namespace
 * for the one call and comes back (a child process to do it would wait to be
 * scheduled: milliseconds on a loaded machine). Its cost does not depend on
 * the layers' sizes. Call it from one thread only (sbxd's loop); that thread
 * gets a filesystem context of its own (unshare(2) CLONE_FS). Non-logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The overlay's upper directory in its tmpfs (beside its work directory). */
#define WORK_UPPER "upper"

/* Mount the overlay of layer_fds (n_layers directories, newest first) with a
 * new tmpfs of size_bytes as its upper (its root and upper owned by uid), or
 * the one upper_mount mounts (>= 0: a detached mount of such a tmpfs that an
 * earlier overlay used, whose upper it is again, nothing copied), on
 * the directory target_fd (O_PATH, in the session's mount namespace) of the
 * session whose PID 1 is pid (pidfd: its pidfd; the layers are idmapped with
 * its user namespace). *ret_upper_fd: the upper, O_RDONLY, which keeps its
 * tmpfs alive; *ret_mount_fd: sbxd's detached mount of that tmpfs, attached
 * nowhere (a stop keeps it in place with os/livemount.h). */
int work_overlay_attach(pid_t pid, int pidfd, int target_fd, const int *layer_fds, size_t n_layers,
                        uint64_t size_bytes, uid_t uid, int upper_mount, int *ret_upper_fd, int *ret_mount_fd);
/* 1 if this kernel builds such an overlay (overlayfs layers as fds, detached
 * mounts as layers: Linux 6.15), else 0; probed once. */
int work_overlay_supported(void);
