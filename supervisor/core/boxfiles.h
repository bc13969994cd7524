/* The boxes set's files (issue 21 part D, docs/boxes.md): what sandbox_get
 * and sandbox_shot hand back, and the commands sbxd runs in a box for
 * sandbox_sync, sandbox_get and sandbox_shot.
 *
 * Placed files live in STATE/box-files/UID/ (STATE is 0711; box-files is
 * root's, 0711; UID/ is the caller's, 0700), so only the caller (and root)
 * can read them. Each is root's, mode 0444, named
 * "<id>-<name>", the id 32 random hex digits (128 bits: what sbx-gateway's
 * URL of it names, BOX_FILE_OPEN); it is removed SBX_BOX_FILE_TTL_S after it was
 * made (its mtime, which only root can set on a root-owned file) by the tick,
 * and the oldest goes first past SBX_BOX_FILES_PER_UID. */
#pragma once

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/box.h"
#include "core/server.h"
#include "data/store.h"

#define BOX_PLACED_ID_HEX 32u

typedef struct BoxPlaced {
        char id[BOX_PLACED_ID_HEX + 1];
        char name[NAME_MAX + 1];        /* what it is called after its id */
        char path[SBX_PATH_MAX + 1];    /* absolute */
        uint64_t bytes;
        int64_t expires_unix;
} BoxPlaced;

/* size bytes of fd (from its offset 0) as a new placed file of uid's whose
 * name ends in name (a basename). */
int box_files_place(Server *s, uid_t uid, gid_t gid, int fd, uint64_t size, const char *name, BoxPlaced *ret);

/* uid's placed file with this id, not expired, open for reading in *ret_fd,
 * with its facts (path left empty); -ENOENT for any other id. */
int box_files_open(Server *s, uid_t uid, const char *id, int *ret_fd, BoxPlaced *ret);

/* The placed files older than SBX_BOX_FILE_TTL_S go (every SBX_BOX_FILES_SWEEP_S). */
unsigned long long box_files_next_deadline(Server *s);
void box_files_run_deadlines(Server *s);

/* A command sbxd runs in a box's session: done is called once when it ended
 * (rec: its record; tail: the last bytes of its output, NUL-terminated) or
 * could not start (rec NULL), with the session ws if it still runs. */
typedef void (*BoxRunDone)(Server *s, WorkspaceSession *ws, const StoreCommand *rec, const char *tail, void *userdata);
int box_run(Server *s, Box *box, const char *cmd, BoxRunDone done, void *userdata, char *err, size_t errsize);

/* s as one shell word ('...'), into buf; -ENAMETOOLONG if it does not fit. */
int box_shell_quote(const char *s, char *buf, size_t size);
