/* A sandbox's published snapshot: the stack of its layer directories, as
 * lower directories of a session's workspace overlay or as a read-only
 * overlay mounted detached (fsmount: in no mount namespace, reachable only by
 * its fd), which the file tools read and resolve paths in with openat2.
 * Compaction merges the oldest layers into one directory (hardlinks: layers
 * are immutable) so that no stack reaches overlayfs' lower-layer limit; a
 * layer goes once no session holds it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "data/indexcache.h"
#include "data/store.h"

typedef struct Sandbox Sandbox;

/* The layers a session's overlay is built on, from its creation until its
 * PID 1 is gone: the squashed base and the layers above it up to top. */
typedef struct SnapshotHold {
        TAILQ_ENTRY(SnapshotHold) link;
        uint32_t squashed, top;
} SnapshotHold;

/* "top:top-1:…:bottom", relative to the sandbox's layers/ directory. */
int snapshot_lowerdirs(uint32_t squashed, uint32_t top, char **ret);
/* A read-only detached overlay of the squashed base and the layers above it
 * up to top. On the loop only: it changes the working directory meanwhile. */
int snapshot_mount(const Sandbox *sb, uint32_t squashed, uint32_t top, int *ret_fd);
/* The cached view of the current snapshot; the fd is borrowed. A stack too
 * deep for the kernel to mount is compacted first, recorded in store. */
int snapshot_current(Store *store, Sandbox *sb, int *ret_fd);
/* The key (data/indexcache.h) of a file of the current view, st its fstat:
 * the same in every later view that shows the same file. -EXDEV if the view
 * cannot name its files so. */
int snapshot_file_key(const Sandbox *sb, const struct stat *st, FileKey *ret);
void snapshot_forget(Sandbox *sb);
/* Merge layers into the squashed base if the stack is too deep (on the loop). */
int snapshot_compact(Store *store, Sandbox *sb);
/* The same in two steps, so that the merge runs off the loop (core/publish.h):
 * whether a stack squashed..top is too deep; the merged base of the layers
 * squashed..target built in layers_fd (any thread; the layers only read);
 * then, on the loop, recorded and made sb's base (sb->squashed must still
 * be the squashed it was built from). */
bool snapshot_compact_due(uint32_t squashed, uint32_t top);
int snapshot_compact_build(int layers_fd, uint32_t squashed, uint32_t target);
int snapshot_compact_adopt(Store *store, Sandbox *sb, uint32_t target);
/* Remove layer directories below the squashed base that nothing holds: out
 * of sight at once, their trees by snapshot_trash_empty (any thread; the
 * sandbox's next publication runs it) or at sbxd's next start. */
int snapshot_collect(Sandbox *sb, unsigned *ret_removed);
int snapshot_trash_empty(int layers_fd);
/* h holds sb's current snapshot until snapshot_release. */
void snapshot_hold(Sandbox *sb, SnapshotHold *h);
void snapshot_release(Sandbox *sb, SnapshotHold *h);
