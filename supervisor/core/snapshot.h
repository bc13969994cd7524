/* A sandbox's published snapshot: the stack of its layer directories, as
 * lower directories of a session's workspace overlay or as a read-only
 * overlay mounted detached (fsmount: in no mount namespace, reachable only by
 * its fd), which the file tools read and resolve paths in with openat2.
 * Compaction merges the oldest layers into one directory (hardlinks: layers
 * are immutable) so that no stack reaches overlayfs' lower-layer limit. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "core/sbxd.h"

/* "top:top-1:…:bottom", relative to the sandbox's layers/ directory. */
int snapshot_lowerdirs(uint32_t squashed, uint32_t top, char **ret);
/* A read-only detached overlay of the squashed base and the layers above it up to top. */
int snapshot_mount(Server *s, const Sandbox *sb, uint32_t squashed, uint32_t top, int *ret_fd);
/* The cached view of the current snapshot; the fd is borrowed. */
int snapshot_current(Server *s, Sandbox *sb, int *ret_fd);
/* The key (indexcache.h) of a file of the current view, st its fstat: the same
 * in every later view that shows the same file. -EXDEV if the view cannot
 * name its files so. */
int snapshot_file_key(const Sandbox *sb, const struct stat *st, FileKey *ret);
void snapshot_forget(Sandbox *sb);
/* Merge layers into the squashed base if the stack is too deep. */
int snapshot_compact(Server *s, Sandbox *sb);
/* Remove layer directories below the squashed base that no live session uses. */
int snapshot_collect(Server *s, Sandbox *sb, unsigned *ret_removed);
