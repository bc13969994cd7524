/* Sandboxes: their records, their directories (STATE/sandboxes/NAME/layers/N)
 * and publication of new layers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "layer.h"
#include "sbx-limits.h"
#include "log.h"
#include "sbxd.h"
#include "snapshot.h"
#include "uidrange.h"

bool name_is_valid(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > SBX_NAME_MAX || name[0] == '.' || name[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                      (name[i] >= '0' && name[i] <= '9') || name[i] == '-' || name[i] == '_' || name[i] == '.'))
                        return false;
        return true;
}

static Sandbox *sandbox_free(Sandbox *sb) {
        if (!sb)
                return NULL;
        snapshot_forget(sb);
        safe_close(sb->layers_fd);
        safe_close(sb->dirfd);
        free(sb->source_dir);
        free(sb);
        return NULL;
}

static int sandbox_open_dirs(Server *s, Sandbox *sb, bool create) {
        if (create && mkdirat(s->sandboxes_fd, sb->name, 0700) < 0)
                return -errno;
        sb->dirfd = openat(s->sandboxes_fd, sb->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sb->dirfd < 0)
                return -errno;
        /* Traversable by the sandbox's root (an unprivileged host uid) for overlay lookups. */
        if (create && (mkdirat(sb->dirfd, "layers", 0711) < 0 || fchmod(sb->dirfd, 0711) < 0))
                return -errno;
        sb->layers_fd = openat(sb->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sb->layers_fd < 0)
                return -errno;
        return 0;
}

static int load_one(const StoreSandbox *rec, void *userdata) {
        Server *s = userdata;
        Sandbox *sb;
        int r;

        sb = calloc(1, sizeof(*sb));
        if (!sb)
                return -ENOMEM;
        sb->dirfd = sb->layers_fd = sb->view_fd = -EBADF;
        strlcpy(sb->name, rec->name, sizeof(sb->name));
        sb->owner_uid = rec->owner_uid;
        sb->memory_bytes = rec->memory_bytes;
        sb->pids_max = rec->pids_max;
        sb->cpu_weight = rec->cpu_weight;
        sb->top_layer = rec->top_layer;
        sb->created_unix = rec->created_unix;
        sb->source_dir = strdup(rec->source_dir);
        if (!sb->source_dir) {
                sandbox_free(sb);
                return -ENOMEM;
        }
        r = sandbox_open_dirs(s, sb, false);
        if (r < 0) {
                log_error_errno(r, "Sandbox '%s' has no usable directory, skipping it: %m", sb->name);
                sandbox_free(sb);
                return 0;
        }
        r = store_squash_get(s->store, sb->name, &sb->squashed);
        if (r < 0) {
                sandbox_free(sb);
                return r;
        }
        {
                char keep[32];
                unsigned removed;
                snprintf(keep, sizeof(keep), "squash-%u", sb->squashed);
                r = layer_remove_unrecorded(sb->layers_fd, sb->top_layer, keep);
                if (r < 0)
                        log_warning_errno(r, "Failed to remove unpublished layers of '%s', ignoring: %m", sb->name);
                /* No session lives yet: everything below the squashed base can go. */
                (void) snapshot_collect(s, sb, &removed);
        }
        TAILQ_INSERT_TAIL(&s->sandboxes, sb, link);
        return 0;
}

/* ---- host id ranges (uidrange.h) ---------------------------------------------------- */

typedef struct Ranges {
        StoreUidRange *v;
        size_t n, cap;
} Ranges;

static int ranges_add(const StoreUidRange *u, void *userdata) {
        Ranges *rs = userdata;
        if (rs->n == rs->cap) {
                size_t ncap = rs->cap ? rs->cap * 2 : 16;
                StoreUidRange *v = realloc(rs->v, ncap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                rs->v = v;
                rs->cap = ncap;
        }
        rs->v[rs->n++] = *u;
        return 0;
}

/* Read first, change after: no statement of the store runs while a row is written. */
static int ranges_read(Server *s, bool orphans_only, Ranges *ret) {
        Ranges rs = {};
        int r = store_uid_range_foreach(s->store, orphans_only, ranges_add, &rs);
        if (r < 0) {
                free(rs.v);
                return r;
        }
        *ret = rs;
        return 0;
}

/* Ranges whose sandbox has no record (deleted, or its creation failed): its
 * files go, then the range, which may then be given again. */
unsigned sandbox_ranges_collect(Server *s) {
        _cleanup_free_ StoreUidRange *v = NULL;
        Ranges rs;
        unsigned released = 0;
        int r;

        r = ranges_read(s, true, &rs);
        if (r < 0) {
                log_warning_errno(r, "Failed to read the host id ranges, ignoring: %m");
                return 0;
        }
        v = rs.v;
        for (size_t i = 0; i < rs.n; i++) {
                const StoreUidRange *u = &rs.v[i];
                r = tree_remove_at(s->sandboxes_fd, u->sandbox);
                if (r >= 0 || r == -ENOENT)
                        r = store_uid_range_delete(s->store, u->sandbox);
                if (r < 0) {
                        log_warning_errno(r, "Host ids %u-%u of deleted sandbox '%s' stay reserved: %m", u->base,
                                          u->base + u->count - 1, u->sandbox);
                        continue;
                }
                log_info("Host ids %u-%u of deleted sandbox '%s' are free again", u->base, u->base + u->count - 1,
                         u->sandbox);
                released++;
        }
        return released;
}

/* The files of sb move from the ids at from to its range, then the record says so. */
static int range_shift(Server *s, Sandbox *sb, uint32_t from) {
        int r;

        log_notice("Moving the files of sandbox '%s' from host ids %u-%u to its own range %u-%u", sb->name, from,
                   from + sb->uid_count - 1, sb->uid_base, sb->uid_base + sb->uid_count - 1);
        /* Below the sandbox directory: layers/, a layer, then the layer's tree. */
        r = uid_tree_shift(sb->dirfd, from, sb->uid_base, sb->uid_count, SBX_TREE_DEPTH_MAX + 2);
        if (r < 0)
                return r;
        return store_uid_range_shifted(s->store, sb->name);
}

/* A sandbox of a version without ranges: its files carry the pool's first
 * range. The first such sandbox keeps it, the others get a range of their own. */
static int range_migrate(Server *s, Sandbox *sb) {
        StoreUidRange u = { .count = s->cfg.uid_count, .shift_from = s->cfg.uid_base };
        int r;

        strlcpy(u.sandbox, sb->name, sizeof(u.sandbox));
        r = uid_range_find_free(s->store, s->cfg.uid_base, s->cfg.uid_count, &u.base);
        if (r < 0)
                return r;
        u.shifting = u.base != s->cfg.uid_base;
        r = store_uid_range_insert(s->store, &u);
        if (r < 0)
                return r;
        sb->uid_base = u.base;
        sb->uid_count = u.count;
        r = u.shifting ? range_shift(s, sb, u.shift_from) : 0;
        if (r < 0)
                sb->uid_count = 0; /* half moved: the next start finishes */
        return r;
}

/* Every loaded sandbox gets its recorded range (a move a crash left half done
 * is finished first); one that cannot is not served, and is tried again at
 * the next start. */
static int sandbox_ranges_load(Server *s) {
        _cleanup_free_ StoreUidRange *v = NULL;
        Sandbox *sb, *next;
        Ranges rs;
        int r;

        r = ranges_read(s, false, &rs);
        if (r < 0)
                return r;
        v = rs.v;
        for (size_t i = 0; i < rs.n; i++) {
                sb = sandbox_find(s, rs.v[i].sandbox);
                if (!sb)
                        continue;
                sb->uid_base = rs.v[i].base;
                sb->uid_count = rs.v[i].count;
                r = rs.v[i].shifting ? range_shift(s, sb, rs.v[i].shift_from) : 0;
                if (r < 0) {
                        log_error_errno(r, "Cannot move the files of sandbox '%s' to its host ids: %m", sb->name);
                        sb->uid_count = 0; /* not served: dropped below */
                }
        }
        TAILQ_FOREACH_SAFE(sb, &s->sandboxes, link, next) {
                if (sb->uid_base == 0) {
                        /* No record: a sandbox of an earlier version. */
                        r = range_migrate(s, sb);
                        if (r < 0)
                                log_error_errno(r, "Cannot give sandbox '%s' host ids of its own: %m", sb->name);
                }
                if (sb->uid_count == 0) {
                        log_error("Sandbox '%s' has no usable host id range, skipping it", sb->name);
                        TAILQ_REMOVE(&s->sandboxes, sb, link);
                        sandbox_free(sb);
                }
        }
        (void) sandbox_ranges_collect(s);
        return 0;
}

int sandboxes_load(Server *s) {
        int r = store_sandbox_foreach(s->store, load_one, s);
        if (r < 0)
                return r;
        return sandbox_ranges_load(s);
}

Sandbox *sandbox_find(Server *s, const char *name) {
        Sandbox *sb;
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (strcmp(sb->name, name) == 0)
                        return sb;
        return NULL;
}

/* A range of its own for a new sandbox, on the disk before any file has its ids. */
static int range_allocate(Server *s, Sandbox *sb, char *errmsg, size_t errmsg_size) {
        StoreUidRange u = { .count = s->cfg.uid_count };
        int r;

        strlcpy(u.sandbox, sb->name, sizeof(u.sandbox));
        r = uid_range_find_free(s->store, s->cfg.uid_base, s->cfg.uid_count, &u.base);
        if (r == -ENOSPC)
                snprintf(errmsg, errmsg_size,
                         "no free host id range: from uid_base %u to %u there is room for %u sandboxes of uid_count %u "
                         "ids (sbxd.conf(5))",
                         s->cfg.uid_base, SBX_UID_POOL_END - 1, (SBX_UID_POOL_END - s->cfg.uid_base) / s->cfg.uid_count,
                         s->cfg.uid_count);
        if (r >= 0)
                r = store_uid_range_insert(s->store, &u);
        if (r < 0) {
                if (r != -ENOSPC)
                        snprintf(errmsg, errmsg_size, "cannot record the sandbox's host ids: %s", strerror(-r));
                return r;
        }
        sb->uid_base = u.base;
        sb->uid_count = u.count;
        return 0;
}

int sandbox_create(Server *s, const Sbx__SandboxCreate *req, uid_t caller, Sandbox **ret, char *errmsg,
                   size_t errmsg_size) {
        _cleanup_close_ int src = -EBADF;
        Sandbox *sb;
        unsigned n = 0;
        StoreSandbox rec = {};
        int r;

        if (!name_is_valid(req->name)) {
                snprintf(errmsg, errmsg_size,
                         "invalid sandbox name '%.80s': use 1-%u of A-Z a-z 0-9 . _ -, not starting with . or -",
                         req->name, SBX_NAME_MAX);
                return -EINVAL;
        }
        if (sandbox_find(s, req->name)) {
                snprintf(errmsg, errmsg_size, "sandbox '%s' already exists", req->name);
                return -EEXIST;
        }
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                n++;
        if (n >= SBX_MAX_SANDBOXES) {
                snprintf(errmsg, errmsg_size, "too many sandboxes (limit %u)", SBX_MAX_SANDBOXES);
                return -ENOSPC;
        }
        if (req->cpu_weight > 10000) {
                snprintf(errmsg, errmsg_size, "cpu weight must be 1 to 10000 (100 is the default share)");
                return -EINVAL;
        }
        if (req->source_dir[0] != '/') {
                snprintf(errmsg, errmsg_size, "source directory must be an absolute path");
                return -EINVAL;
        }
        src = open(req->source_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (src < 0) {
                r = -errno;
                snprintf(errmsg, errmsg_size, "cannot open source directory '%.200s': %s", req->source_dir,
                         strerror(errno));
                return r;
        }

        sb = calloc(1, sizeof(*sb));
        if (!sb)
                return -ENOMEM;
        sb->dirfd = sb->layers_fd = sb->view_fd = -EBADF;
        strlcpy(sb->name, req->name, sizeof(sb->name));
        sb->owner_uid = req->has_owner ? req->owner_uid : caller;
        sb->memory_bytes = req->memory_bytes ?: s->cfg.default_memory_bytes;
        sb->pids_max = req->pids_max ?: s->cfg.default_pids_max;
        sb->cpu_weight = req->cpu_weight ?: 100;
        sb->created_unix = time(NULL);
        sb->source_dir = strdup(req->source_dir);
        if (!sb->source_dir) {
                sandbox_free(sb);
                return -ENOMEM;
        }
        /* A half-created sandbox of an earlier crash has no record: clear it. */
        (void) sandbox_ranges_collect(s);
        (void) tree_remove_at(s->sandboxes_fd, sb->name);
        r = range_allocate(s, sb, errmsg, errmsg_size);
        if (r < 0)
                goto fail;
        r = sandbox_open_dirs(s, sb, true);
        if (r < 0) {
                snprintf(errmsg, errmsg_size, "cannot create the sandbox directory: %s", strerror(-r));
                goto fail;
        }
        /* The imported tree belongs to root inside the sandbox; the source is only read. */
        r = layer_create(sb->layers_fd, 0, src, (int) sb->uid_base, LAYER_SYNC_FILESYSTEM, NULL);
        if (r < 0) {
                snprintf(errmsg, errmsg_size, "cannot import '%.200s': %s", req->source_dir, strerror(-r));
                goto fail;
        }
        strlcpy(rec.name, sb->name, sizeof(rec.name));
        rec.owner_uid = sb->owner_uid;
        rec.source_dir = sb->source_dir;
        rec.memory_bytes = sb->memory_bytes;
        rec.pids_max = sb->pids_max;
        rec.cpu_weight = sb->cpu_weight;
        rec.created_unix = sb->created_unix;
        r = store_sandbox_insert(s->store, &rec, "original");
        if (r < 0) {
                snprintf(errmsg, errmsg_size, "cannot record the sandbox: %s", strerror(-r));
                goto fail;
        }
        TAILQ_INSERT_TAIL(&s->sandboxes, sb, link);
        log_info("Created sandbox '%s' from '%s' for uid %u", sb->name, sb->source_dir, sb->owner_uid);
        *ret = sb;
        return 0;
fail:
        if (sb->uid_count > 0) {
                int k = tree_remove_at(s->sandboxes_fd, req->name);
                if (k >= 0 || k == -ENOENT)
                        (void) store_uid_range_delete(s->store, req->name); /* else the next collection does */
        }
        sandbox_free(sb);
        return r;
}

int sandbox_delete(Server *s, Sandbox *sb) {
        WorkspaceSession *ws, *next;
        int r;

        TAILQ_FOREACH_SAFE(ws, &s->sessions, link, next)
                if (ws->sandbox == sb)
                        session_destroy(s, ws);
        /* Their overlays hold the layers about to be removed. */
        sessions_wait_ended(s, sb);
        r = store_sandbox_delete(s->store, sb->name);
        if (r < 0)
                return r;
        TAILQ_REMOVE(&s->sandboxes, sb, link);
        /* Its host ids are free again only once no file of it is left. */
        r = tree_remove_at(s->sandboxes_fd, sb->name);
        if (r >= 0)
                r = store_uid_range_delete(s->store, sb->name);
        if (r < 0)
                log_warning_errno(r, "Failed to remove the files or the host ids of sandbox '%s', 'sbxctl gc' retries: %m",
                                  sb->name);
        log_info("Deleted sandbox '%s'", sb->name);
        sandbox_free(sb);
        return 0;
}

void sandbox_info(Server *s, const Sandbox *sb, Sbx__SandboxInfo *ret) {
        ret->name = (char *) sb->name;
        ret->owner_uid = sb->owner_uid;
        ret->source_dir = sb->source_dir;
        ret->memory_bytes = sb->memory_bytes;
        ret->pids_max = sb->pids_max;
        ret->cpu_weight = sb->cpu_weight;
        ret->uid_base = sb->uid_base;
        ret->uid_count = sb->uid_count;
        ret->layer_count = sb->top_layer + 1;
        ret->live_sessions = sb->live_sessions - sb->spares;
        ret->created_unix = sb->created_unix;
}

void sandboxes_free(Server *s) {
        Sandbox *sb;
        while ((sb = TAILQ_FIRST(&s->sandboxes))) {
                TAILQ_REMOVE(&s->sandboxes, sb, link);
                sandbox_free(sb);
        }
}
