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

int sandboxes_load(Server *s) {
        return store_sandbox_foreach(s->store, load_one, s);
}

Sandbox *sandbox_find(Server *s, const char *name) {
        Sandbox *sb;
        TAILQ_FOREACH(sb, &s->sandboxes, link)
                if (strcmp(sb->name, name) == 0)
                        return sb;
        return NULL;
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
        (void) tree_remove_at(s->sandboxes_fd, sb->name);
        r = sandbox_open_dirs(s, sb, true);
        if (r < 0) {
                snprintf(errmsg, errmsg_size, "cannot create the sandbox directory: %s", strerror(-r));
                goto fail;
        }
        /* The imported tree belongs to root inside the sandbox; the source is only read. */
        r = layer_create(sb->layers_fd, 0, src, (int) s->cfg.uid_base, LAYER_SYNC_FILESYSTEM, NULL, NULL);
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
        sandbox_free(sb);
        (void) tree_remove_at(s->sandboxes_fd, req->name);
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
        r = tree_remove_at(s->sandboxes_fd, sb->name);
        if (r < 0)
                log_warning_errno(r, "Failed to remove the files of sandbox '%s', ignoring: %m", sb->name);
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
