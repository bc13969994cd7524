/* Publication: a tree of workspace changes (an overlayfs upper directory, or
 * the staging directory of one file operation) becomes the sandbox's next
 * layer, with its manifest of changed paths, refused as a whole if it touches
 * a path that a layer published after its base also touched (unless
 * overwrite), and with the line attribution of every changed text file
 * updated in the same SQLite transaction as the layer's record. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbxd.h"

#define SBX_PUBLISH_MAX_PATHS 1000000u  /* changed paths in one publication */
#define SBX_CONFLICTS_REPORTED 100u     /* conflicting paths named in one answer */

typedef struct PublishResult {
        bool published;
        uint32_t layer;
        uint32_t changed_paths;
        char **conflicts;                /* NULL-terminated when n_conflicts > 0 */
        size_t n_conflicts;
        char error[256];                 /* set by a failed publication that can say more than its errno */
} PublishResult;

void publish_result_done(PublishResult *r);

/* A file operation's tree: sbxd's own staging directory, holding the one
 * file the operation writes (at path), whose texts the caller already has:
 * old_text as published before (NULL if it was not read) and new_text. */
typedef struct PublishOperation {
        const char *path;
        const char *old_text;
        size_t old_len;
        const char *new_text;
        size_t new_len;
} PublishOperation;

/* force_uid >= 0 gives every entry that owner. With op, src_dirfd is op's
 * staged tree: its files become the layer's (hard links, not copies), and the
 * texts of op->path are not read again. On failure ret->error may say why. */
int publish_tree(Server *s, Sandbox *sb, int src_dirfd, const char *owner, uint32_t base_layer, bool overwrite,
                 int force_uid, const PublishOperation *op, PublishResult *ret);

/* The changed paths of a tree, in walk order (parents before children). */
typedef enum ChangeKind {
        CHANGE_FILE,
        CHANGE_SYMLINK,
        CHANGE_OTHER,       /* fifo */
        CHANGE_WHITEOUT,    /* deletion */
        CHANGE_OPAQUE_DIR,  /* a directory replacing whatever was there */
} ChangeKind;

typedef struct Change {
        char *path;
        ChangeKind kind;
} Change;

typedef struct Manifest {
        Change *changes;
        size_t n;
} Manifest;

/* On -ELOOP (a tree deeper than SBX_TREE_DEPTH_MAX), ret_too_deep (if not
 * NULL, SBX_PATH_MAX + 1 bytes) names the directory that passed the limit. */
int manifest_build(int dirfd, Manifest *ret, char *ret_too_deep);
void manifest_done(Manifest *m);

#include "attribution.h"
/* The attribution of a published text file: its record, "original" for a file
 * untouched since import, else "unknown". */
int blame_of_published(Server *s, Sandbox *sb, const char *path, const char *text, size_t len, Blame *ret);
