/* Versions of the boxes set (issue 21, docs/boxes.md): a named record
 * (service, label, gitSha, note) of a box's /work as it was, or of an image
 * alone, that later boxes start from (sandbox_start's version: startedFrom
 * snapshot). Its files are a layer chain under STATE/versions/ID/layers/N
 * (bottom first), built once at publication, owned by root there, and
 * recorded in sbx.db (a packed sbx.VersionInfo). A box started from it gets
 * its own copy in /work, owned by the box's root, so two boxes from one
 * version diverge and the version stays as it was; it may be removed while
 * such boxes run. Owned by the uid that published it; root sees all.
 * Non-logging. */
#pragma once

#include <sys/types.h>

#include "core/server.h"
#include "sbx.pb-c.h"

/* Record a version for owner: the tree under work_fd (a box's /work, read;
 * -EBADF: an image alone) as its layer 0, minus its .sbx (the box's logs).
 * *ret (free with sbx__version_info__free_unpacked) is what was recorded. */
int version_publish(Server *s, uid_t owner, const Sbx__VersionPublish *m, int work_fd, const char *box_image,
                    const char *from_box, Sbx__VersionInfo **ret);
/* The version id that caller may use (its owner's, or root's any): -ENOENT. */
int version_get(Server *s, uid_t caller, const char *id, Sbx__VersionInfo **ret);
/* The versions caller may use, oldest first. */
int versions_foreach(Server *s, uid_t caller, int (*cb)(const Sbx__VersionInfo *v, void *userdata), void *userdata);
/* Forget it and remove its files: -ENOENT if caller may not use it. */
int version_remove(Server *s, uid_t caller, const char *id);
/* Whether caller may start a box from version id: -ENOENT with err saying why. */
int version_check(Server *s, uid_t caller, const char *id, char *err, size_t errsize);
/* Fill the /work of a box just claimed (root_fd: its session's merged root,
 * O_PATH; uid: its root's host uid) from caller's version id. */
int version_fill_box(Server *s, uid_t caller, const char *id, int root_fd, uid_t uid);
/* Copy v's layers, bottom first, into the directory dst_fd (a new box's
 * /work), every entry owned by uid. */
int version_fill(Server *s, const Sbx__VersionInfo *v, int dst_fd, uid_t uid);
