/* A sandbox's workspace as the file tools see it (file_read, file_write,
 * file_edit, file_blame): client paths normalized lexically, then resolved
 * only with openat2 below a workspace root fd (a live session's merged
 * /workspace, or the published snapshot's view), never as a string in
 * sbxd's mount namespace; line indexes of snapshot files from the cache; and
 * writes, inside a live session or staged and published as a layer owned by
 * operation:ID. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "core/publish.h"
#include "core/sandbox.h"
#include "core/server.h"
#include "core/session.h"
#include "data/fileops.h"

#define WORKSPACE_ROOT "/workspace"

/* in relative to the workspace root, without "", "." or ".." components,
 * into out (SBX_PATH_MAX + 1 bytes); on failure ret_error says why. */
int workspace_path(const char *in, char *out, char *ret_error, size_t error_size);
/* What an error of opening a workspace path means, for a message. */
const char *workspace_open_error(int r);
/* The root to resolve in: the live session ws_id's, or ("") the published
 * snapshot's (the fd is borrowed). On failure ret_error says why. */
int workspace_root(Server *s, Sandbox *sb, const char *ws_id, WorkspaceSession **ret_ws, int *ret_root,
                   char *ret_error, size_t error_size);
/* Open rel below root for reading, in the root's own view of its symlinks. */
int workspace_open(int root, const char *rel);
/* A window of lines [offset, offset + limit) of the file open at fd (taken;
 * st its fstat) below the root of ws (NULL: the published snapshot), in its
 * turn in the sandbox's lane: with the file's line index from the cache
 * (snapshot files, and a live session's files while their size and times
 * stay), read at once on the loop; else indexed off the loop and then kept.
 * done runs on the loop with the window (borrowed for the call; err says
 * more on failure, if not empty). */
typedef void (*WorkspaceReadDone)(Server *s, int r, const FileWindow *w, const char *err, void *userdata);
int workspace_read(Server *s, Sandbox *sb, const WorkspaceSession *ws, int fd, const struct stat *st, uint64_t offset,
                   uint32_t limit, WorkspaceReadDone done, void *userdata);

/* A file_write or file_edit: what to write, and what happened. */
typedef struct FileChange {
        const char *rel;                /* normalized (workspace_path) */
        const char *ws_id;              /* "": the published snapshot */
        const char *old_text;           /* the file's text before, if the caller read it (else NULL) */
        size_t old_len;
        const char *content;
        size_t len;
        bool unchanged;                 /* it held content already: nothing written or published */
        bool created;
        bool in_session;
        PublishResult pub;              /* without a session: the layer owned by `owner` */
        char owner[64];
} FileChange;

/* Write ch->content at ch->rel inside the live session ch->ws_id
 * (atomically, keeping an existing file's owner and mode). On failure
 * ret_error says why (if not empty). */
int workspace_write(Server *s, Sandbox *sb, FileChange *ch, char *ret_error, size_t error_size);

/* A write to the published snapshot: it waits for its turn in the sandbox's
 * lane (core/publish.h: nothing else publishes meanwhile), then prepare (if
 * not NULL, on the loop) gives ch its content from the snapshot as it is
 * then (an edit reads the file's text there), the file is staged, and it is
 * published off the loop as a layer owned by ch->owner. done runs on the loop
 * with the result (err says more, if not empty; -ECANCELED: the sandbox or
 * sbxd went first), and ch (with ch->pub) lives until then. */
typedef int (*WorkspacePrepare)(Server *s, Sandbox *sb, FileChange *ch, void *userdata, char *err, size_t errsize);
typedef void (*WorkspaceDone)(Server *s, FileChange *ch, int r, const char *err, void *userdata);
int workspace_write_published(Server *s, Sandbox *sb, FileChange *ch, WorkspacePrepare prepare, WorkspaceDone done,
                              void *userdata);
void file_change_done(FileChange *ch);
