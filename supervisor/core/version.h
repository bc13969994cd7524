/* Versions of the boxes set (issue 21, docs/boxes.md): a named record
 * (service, label, gitSha, note) of a box's /work as it was, or of an image
 * alone, that later boxes start from (sandbox_start's version: startedFrom
 * snapshot). Its files are a chain of layers, bottom first, each a directory
 * STATE/versions/ID/layers/N of the version ID that built it, owned by root
 * there, immutable, and shared: a version published from a box that was
 * started from a version refers to that version's layers and adds one, the
 * box's changes over them (the upper of its /work, whiteouts and opaque
 * directories as data/layer.h keeps them). A box started from a version
 * mounts its layers read-only as the lowers of its /work (os/workmount.h),
 * so two boxes from one version share them and diverge in their uppers. A
 * layer is removed once no recorded version refers to it; a version a live
 * box was started from is not removed (control-versions.c says so). The
 * record is a packed sbx.VersionInfo in sbx.db. Owned by the uid that
 * published it; root sees all. Non-logging. */
#pragma once

#include <sys/types.h>

#include "core/server.h"
#include "core/session.h"
#include "sbx.pb-c.h"

/* Where a version's files come from. */
typedef struct VersionSource {
        int tree_fd;                            /* read: a box's /work whole (parent NULL), or the upper of
                                                 * its /work overlay (parent set); -EBADF: an image alone */
        const Sbx__VersionInfo *parent;         /* the version the box was started from, or NULL */
        WorkLane *lane;                         /* the box's sandbox's: the tree is copied there, off the loop */
        const char *box_image;
        const char *from_box;                   /* the box's id, or "" */
} VersionSource;

/* Its end, on the loop: the record (borrowed for the call), or r < 0. */
typedef void (*VersionPublished)(Server *s, int r, const Sbx__VersionInfo *v, void *userdata);

/* Record a version for owner: parent's layers (referred to, not copied) and
 * the tree as a new layer over them, minus its .sbx (the box's logs), copied
 * off the loop on src->lane; -E2BIG past SBX_VERSION_LAYERS_MAX. 0: done
 * is called later; 1: it was called already (an image alone: nothing to
 * copy); < 0: nothing was started, done is not called. */
int version_publish(Server *s, uid_t owner, const Sbx__VersionPublish *m, const VersionSource *src,
                    VersionPublished done, void *userdata);
/* The version id that caller may use (its owner's, or root's any): -ENOENT. */
int version_get(Server *s, uid_t caller, const char *id, Sbx__VersionInfo **ret);
/* The versions caller may use, oldest first. */
int versions_foreach(Server *s, uid_t caller, int (*cb)(const Sbx__VersionInfo *v, void *userdata), void *userdata);
/* Forget it, and remove the layers no other version refers to: -ENOENT if
 * caller may not use it. */
int version_remove(Server *s, uid_t caller, const char *id);
/* Whether caller may start a box from version id: -ENOENT with err saying why. */
int version_check(Server *s, uid_t caller, const char *id, char *err, size_t errsize);
/* Mount caller's version id as the lowers of /work of ws (a box's running
 * session; its /work exists), with a new upper in ws->work_upper_fd (on the
 * kept tmpfs upper_mount mounts if >= 0, os/workmount.h). Nothing to do for a
 * version of an image alone, or if ws has its overlay already. */
int version_attach_box(Server *s, uid_t caller, const char *id, WorkspaceSession *ws, int upper_mount);
