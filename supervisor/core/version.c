#include <dirent.h>
#include <errno.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/version.h"
#include "data/layer.h"
#include "data/store.h"
#include "workpool.h"
#include "fd-util.h"
#include "macro.h"
#include "os/workmount.h"
#include "sbx-limits.h"

/* "ID/N": layer N of version ID. */
#define LAYER_NAME_SIZE (SBX_VERSION_ID_SIZE + 8)

/* STATE/versions, made at first use (root's alone, as the state directory's other parts). */
static int versions_dir(Server *s, int *ret) {
        int fd = dir_make_open_at(s->state_fd, "versions", 0700, NULL);

        if (fd < 0)
                return fd;
        *ret = fd;
        return 0;
}

/* Layer i of v, bottom first: layer *ret_n of the version *ret_id that built
 * it. Its name is "ID/N"; a name without '/' is v's own (recorded before
 * versions shared layers). Its directory is STATE/versions/ID/layers/N. */
static int layer_ref(const Sbx__VersionInfo *v, size_t i, char ret_id[SBX_VERSION_ID_SIZE], unsigned *ret_n) {
        const char *name = v->layers[i], *slash = strchr(name, '/');
        const char *id = slash ? name : v->id, *n = slash ? slash + 1 : name;
        size_t id_len = slash ? (size_t) (slash - name) : strlen(v->id);

        if (id_len + 1 != SBX_VERSION_ID_SIZE || strncmp(id, "ver-", 4) != 0 || !n[0] || strlen(n) > 4 ||
            strspn(n, "0123456789") != strlen(n))
                return -EBADMSG;
        snprintf(ret_id, SBX_VERSION_ID_SIZE, "%.*s", (int) id_len, id);
        *ret_n = (unsigned) atoi(n);
        return 0;
}

/* STATE/versions/ID/layers/0 from the tree under src_fd (a box's /work, or
 * the upper of its /work overlay with its whiteouts and opaque directories),
 * its files root's, without .sbx; src_fd < 0: no layer (ret_built false). */
static int version_build(int vdir, const char *id, int src_fd, bool *ret_built) {
        _cleanup_close_ int dir = -EBADF, layers = -EBADF, top = -EBADF;
        TreeReport rep = {};
        int r;

        if (mkdirat(vdir, id, 0700) < 0)
                return -errno;
        dir = openat(vdir, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0 || mkdirat(dir, "layers", 0711) < 0)
                return -errno;
        layers = openat(dir, "layers", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (layers < 0)
                return -errno;
        *ret_built = false;
        if (src_fd < 0)
                return 0;
        r = layer_create(layers, 0, src_fd, 0, 0, NULL, NULL, &rep);
        if (r < 0)
                return r;
        top = openat(layers, "0", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return -errno;
        r = tree_remove_at(top, ".sbx");
        if (r < 0 && r != -ENOENT)
                return r;
        *ret_built = true;
        return 0;
}

/* v's layer names: its parent's, bottom first, then its own "ID/0" if built,
 * in names (ret points at them). */
static int layer_names(const Sbx__VersionInfo *parent, const char *id, bool built, char names[][LAYER_NAME_SIZE],
                       char **ret, size_t *ret_n) {
        size_t n = 0;

        for (size_t i = 0; parent && i < parent->n_layers; i++, n++) {
                char from[SBX_VERSION_ID_SIZE];
                unsigned k;
                int r = layer_ref(parent, i, from, &k);

                if (r < 0)
                        return r;
                if (n + built >= SBX_VERSION_LAYERS_MAX)
                        return -E2BIG;
                snprintf(names[n], LAYER_NAME_SIZE, "%s/%u", from, k);
                ret[n] = names[n];
        }
        if (built) {
                snprintf(names[n], LAYER_NAME_SIZE, "%s/0", id);
                ret[n] = names[n];
                n++;
        }
        *ret_n = n;
        return 0;
}

static int versions_collect(Server *s, int vdir);

/* A publication whose layer is built off the loop (the tree may hold many
 * files): the record is packed on the loop at its start, stored at its done. */
typedef struct VersionPublication {
        Work work;
        Server *server;
        int vdir, tree_fd;              /* owned; the tree read on a pool thread */
        char id[SBX_VERSION_ID_SIZE];
        uid_t owner;
        uint8_t *record;                /* the packed VersionInfo */
        size_t record_len;
        VersionPublished done;
        void *userdata;
} VersionPublication;

static void publication_free(VersionPublication *p) {
        safe_close(p->vdir);
        safe_close(p->tree_fd);
        free(p->record);
        free(p);
}

static int publication_run(Work *w) {
        VersionPublication *p = container_of(w, VersionPublication, work);
        bool built;

        return version_build(p->vdir, p->id, p->tree_fd, &built);
}

static void publication_done(Work *w, int r, void *userdata) {
        VersionPublication *p = container_of(w, VersionPublication, work);
        Sbx__VersionInfo *v = NULL;

        if (r >= 0 && work_cancelled(w))
                r = -ECANCELED;         /* the box went meanwhile */
        if (r >= 0)
                r = store_version_put(p->server->store, p->id, p->owner, p->record, p->record_len);
        if (r >= 0)
                r = version_get(p->server, p->owner, p->id, &v);
        if (r < 0)
                (void) tree_remove_at(p->vdir, p->id);
        p->done(p->server, r, v, p->userdata);
        if (v)
                sbx__version_info__free_unpacked(v, NULL);
        if (--p->server->versions_publishing == 0 && p->server->versions_collect_due &&
            versions_collect(p->server, p->vdir) < 0)
                p->server->versions_collect_due = true; /* the next removal tries again */
        publication_free(p);
}

/* The record of version id as src and m make it, packed into p. */
static int publication_pack(VersionPublication *p, const Sbx__VersionPublish *m, const VersionSource *src) {
        char names[SBX_VERSION_LAYERS_MAX][LAYER_NAME_SIZE], *layers[SBX_VERSION_LAYERS_MAX];
        Sbx__VersionInfo v = SBX__VERSION_INFO__INIT;
        int r = layer_names(src->parent, p->id, src->tree_fd >= 0, names, layers, &v.n_layers);

        if (r < 0)
                return r;
        v.id = p->id;
        v.service = m->service;
        v.label = m->label;
        v.image = m->image;
        v.git_sha = m->git_sha;
        v.note = m->note;
        v.owner_uid = p->owner;
        v.created_unix = now_unix_usec() / 1000000;
        v.box_image = (char *) src->box_image;
        v.from_box = (char *) src->from_box;
        v.layers = layers;
        p->record_len = sbx__version_info__get_packed_size(&v);
        p->record = malloc(p->record_len ?: 1);
        if (!p->record)
                return -ENOMEM;
        sbx__version_info__pack(&v, p->record);
        return 0;
}

int version_publish(Server *s, uid_t owner, const Sbx__VersionPublish *m, const VersionSource *src,
                    VersionPublished done, void *userdata) {
        VersionPublication *p = calloc(1, sizeof(*p));
        int r;

        if (!p)
                return -ENOMEM;
        *p = (VersionPublication) { .server = s, .vdir = -EBADF, .tree_fd = -EBADF, .owner = owner, .done = done,
                                    .userdata = userdata };
        r = random_id("ver-", p->id, sizeof(p->id));
        if (r >= 0)
                r = versions_dir(s, &p->vdir);
        if (r >= 0)
                r = publication_pack(p, m, src);
        if (r >= 0 && src->tree_fd >= 0 && (p->tree_fd = fcntl(src->tree_fd, F_DUPFD_CLOEXEC, 3)) < 0)
                r = -errno;
        if (r < 0) {
                publication_free(p);
                return r;
        }
        p->work.run = publication_run;
        p->work.done = publication_done;
        s->versions_publishing++;
        if (src->lane) {
                work_submit(s->work, src->lane, &p->work);
                return 0;
        }
        /* An image alone: nothing to copy. */
        publication_done(&p->work, publication_run(&p->work), s);
        return 1;
}

typedef struct VersionFind {
        uid_t caller;
        const char *id;
        Sbx__VersionInfo *found;
        int (*cb)(const Sbx__VersionInfo *v, void *userdata);
        void *userdata;
} VersionFind;

static int version_row(const char *id, int64_t owner_uid, const void *info, size_t len, void *userdata) {
        VersionFind *f = userdata;
        Sbx__VersionInfo *v;
        int r = 0;

        if ((f->caller != 0 && owner_uid != (int64_t) f->caller) || (f->id && strcmp(f->id, id) != 0))
                return 0;
        v = sbx__version_info__unpack(NULL, len, info);
        if (!v)
                return 0;               /* a malformed row is nobody's */
        if (f->cb)
                r = f->cb(v, f->userdata);
        if (f->id && !f->found) {
                f->found = v;
                return r;
        }
        sbx__version_info__free_unpacked(v, NULL);
        return r;
}

int version_get(Server *s, uid_t caller, const char *id, Sbx__VersionInfo **ret) {
        VersionFind f = { .caller = caller, .id = id };
        int r = store_version_foreach(s->store, version_row, &f);

        if (r < 0) {
                if (f.found)
                        sbx__version_info__free_unpacked(f.found, NULL);
                return r;
        }
        if (!f.found)
                return -ENOENT;
        *ret = f.found;
        return 0;
}

int versions_foreach(Server *s, uid_t caller, int (*cb)(const Sbx__VersionInfo *v, void *userdata), void *userdata) {
        VersionFind f = { .caller = caller, .cb = cb, .userdata = userdata };

        return store_version_foreach(s->store, version_row, &f);
}

/* The version directories some recorded version uses: its own and those its layers are in. */
typedef struct VersionRefs {
        char (*ids)[SBX_VERSION_ID_SIZE];
        size_t n, size;
} VersionRefs;

static int refs_add(VersionRefs *refs, const char *id, size_t len) {
        if (refs->n == refs->size) {
                size_t size = refs->size ? refs->size * 2 : 64;
                void *p = reallocarray(refs->ids, size, sizeof(*refs->ids));

                if (!p)
                        return -ENOMEM;
                refs->ids = p;
                refs->size = size;
        }
        snprintf(refs->ids[refs->n++], SBX_VERSION_ID_SIZE, "%.*s", (int) len, id);
        return 0;
}

static int refs_row(const char *id, int64_t owner_uid, const void *info, size_t len, void *userdata) {
        VersionRefs *refs = userdata;
        Sbx__VersionInfo *v = sbx__version_info__unpack(NULL, len, info);
        int r = refs_add(refs, id, strlen(id));

        for (size_t i = 0; v && r >= 0 && i < v->n_layers; i++) {
                const char *slash = strchr(v->layers[i], '/');

                if (slash)
                        r = refs_add(refs, v->layers[i], (size_t) (slash - v->layers[i]));
        }
        if (v)
                sbx__version_info__free_unpacked(v, NULL);
        return r;
}

static bool refs_have(const VersionRefs *refs, const char *id) {
        for (size_t i = 0; i < refs->n; i++)
                if (strcmp(refs->ids[i], id) == 0)
                        return true;
        return false;
}

/* Remove the directories of STATE/versions no recorded version uses; while a
 * layer is built (its version not recorded yet), once the last one is done. */
static int versions_collect(Server *s, int vdir) {
        _cleanup_(closedirp) DIR *d = NULL;
        VersionRefs refs = {};
        int r;

        s->versions_collect_due = s->versions_publishing > 0;
        if (s->versions_collect_due)
                return 0;
        r = store_version_foreach(s->store, refs_row, &refs);

        if (r >= 0 && !(d = opendir_at(vdir)))
                r = -errno;
        for (struct dirent *de; r >= 0 && (de = readdir(d));)
                if (strncmp(de->d_name, "ver-", 4) == 0 && !refs_have(&refs, de->d_name))
                        r = tree_remove_at(vdir, de->d_name);
        free(refs.ids);
        return r;
}

int version_remove(Server *s, uid_t caller, const char *id) {
        _cleanup_close_ int vdir = -EBADF;
        Sbx__VersionInfo *v = NULL;
        int r = version_get(s, caller, id, &v);

        if (r < 0)
                return r;
        sbx__version_info__free_unpacked(v, NULL);
        r = store_version_delete(s->store, id);
        if (r >= 0)
                r = versions_dir(s, &vdir);
        if (r >= 0)
                r = versions_collect(s, vdir);
        return r == -ENOENT ? 0 : r;
}

int version_attach_box(Server *s, uid_t caller, const char *id, WorkspaceSession *ws, int upper_mount) {
        _cleanup_close_ int vdir = -EBADF, target = -EBADF;
        int layers[SBX_VERSION_LAYERS_MAX];
        Sbx__VersionInfo *v = NULL;
        size_t n = 0;
        int r = version_get(s, caller, id, &v);

        if (r >= 0)
                r = versions_dir(s, &vdir);
        if (r < 0)
                goto out;
        if (v->n_layers == 0 || ws->work_upper_fd >= 0)
                goto out;               /* an image alone: /work stays the root's; or attached already */
        if (v->n_layers > SBX_VERSION_LAYERS_MAX) {
                r = -E2BIG;
                goto out;
        }
        /* Newest first, as overlayfs stacks them. */
        for (; r >= 0 && n < v->n_layers; n++) {
                char from[SBX_VERSION_ID_SIZE], path[LAYER_NAME_SIZE + 8];
                unsigned k;

                r = layer_ref(v, v->n_layers - 1 - n, from, &k);
                snprintf(path, sizeof(path), "%s/layers/%u", from, k);
                if (r >= 0 && (layers[n] = openat(vdir, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                        r = -errno;
                if (r < 0)
                        break;
        }
        target = r < 0 ? -EBADF : openat2_fd(ws->root_fd, "work", O_PATH | O_DIRECTORY | O_CLOEXEC,
                                             RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (r >= 0 && target < 0)
                r = target;
        if (r >= 0)
                r = work_overlay_attach(ws->pid, ws->pidfd_src.fd, target, layers, n,
                                        ws->sandbox->disk_bytes ?: s->cfg.session_disk_bytes, ws->sandbox->uid_base,
                                        upper_mount, &ws->work_upper_fd, &ws->work_live_fd);
        for (size_t i = 0; i < n; i++)
                (void) close(layers[i]);
out:
        if (v)
                sbx__version_info__free_unpacked(v, NULL);
        return r;
}

int version_check(Server *s, uid_t caller, const char *id, char *err, size_t errsize) {
        Sbx__VersionInfo *v = NULL;
        int r = version_get(s, caller, id, &v);
        size_t v_layers = v ? v->n_layers : 0;

        if (v)
                sbx__version_info__free_unpacked(v, NULL);
        if (r == -ENOENT)
                snprintf(err, errsize, "invalid arguments: version: no version '%.80s' (sandbox_versions lists them)",
                         id);
        else if (r >= 0 && v_layers > 0 && !work_overlay_supported()) {
                struct utsname u;

                r = -EOPNOTSUPP;
                snprintf(err, errsize, "cannot start a box from version %.80s: its /work would be an overlay of the "
                         "version's layers, which this kernel (Linux %s) cannot build: it needs Linux 6.15 or later "
                         "(overlayfs layers given as file descriptors and detached mounts)", id,
                         uname(&u) == 0 ? u.release : "?");
        } else if (r < 0)
                snprintf(err, errsize, "cannot read version %.80s: %s", id, strerror(-r));
        return r;
}
