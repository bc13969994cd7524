#include <errno.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/version.h"
#include "data/layer.h"
#include "data/store.h"
#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"

/* STATE/versions, made at first use (root's alone, as the state directory's other parts). */
static int versions_dir(Server *s, int *ret) {
        int fd = dir_make_open_at(s->state_fd, "versions", 0700, NULL);

        if (fd < 0)
                return fd;
        *ret = fd;
        return 0;
}

static int version_store(Server *s, const Sbx__VersionInfo *v) {
        size_t len = sbx__version_info__get_packed_size(v);
        _cleanup_free_ uint8_t *buf = malloc(len ?: 1);

        if (!buf)
                return -ENOMEM;
        sbx__version_info__pack(v, buf);
        return store_version_put(s->store, v->id, v->owner_uid, buf, len);
}

/* STATE/versions/ID/layers/0 from the tree under work_fd, its files root's, without .sbx. */
static int version_build(int vdir, const char *id, int work_fd, uint32_t *ret_layers) {
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
        if (work_fd < 0) {
                *ret_layers = 0;
                return 0;
        }
        r = layer_create(layers, 0, work_fd, 0, 0, NULL, NULL, &rep);
        if (r < 0)
                return r;
        top = openat(layers, "0", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return -errno;
        r = tree_remove_at(top, ".sbx");
        if (r < 0 && r != -ENOENT)
                return r;
        *ret_layers = 1;
        return 0;
}

int version_publish(Server *s, uid_t owner, const Sbx__VersionPublish *m, int work_fd, const char *box_image,
                    const char *from_box, Sbx__VersionInfo **ret) {
        _cleanup_close_ int vdir = -EBADF;
        char id[SBX_VERSION_ID_SIZE];
        Sbx__VersionInfo v = SBX__VERSION_INFO__INIT;
        char *names[1];
        uint32_t n_layers = 0;
        int r = random_id("ver-", id, sizeof(id));

        if (r >= 0)
                r = versions_dir(s, &vdir);
        if (r < 0)
                return r;
        r = version_build(vdir, id, work_fd, &n_layers);
        if (r < 0) {
                (void) tree_remove_at(vdir, id);
                return r;
        }
        names[0] = "0";
        v.id = id;
        v.service = m->service;
        v.label = m->label;
        v.image = m->image;
        v.git_sha = m->git_sha;
        v.note = m->note;
        v.owner_uid = owner;
        v.created_unix = now_unix_usec() / 1000000;
        v.box_image = (char *) box_image;
        v.from_box = (char *) from_box;
        v.layers = names;
        v.n_layers = n_layers;
        r = version_store(s, &v);
        if (r < 0) {
                (void) tree_remove_at(vdir, id);
                return r;
        }
        return version_get(s, owner, id, ret);
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
                r = tree_remove_at(vdir, id);
        return r == -ENOENT ? 0 : r;
}

int version_fill(Server *s, const Sbx__VersionInfo *v, int dst_fd, uid_t uid) {
        _cleanup_close_ int vdir = -EBADF, dir = -EBADF;
        int r = versions_dir(s, &vdir);

        if (r < 0)
                return r;
        dir = openat(vdir, v->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        for (size_t i = 0; i < v->n_layers; i++) {
                _cleanup_close_ int layer = -EBADF;
                char path[32];

                snprintf(path, sizeof(path), "layers/%zu", i);
                layer = openat(dir, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (layer < 0)
                        return -errno;
                r = tree_copy(layer, dst_fd, (int) uid, 0, NULL, NULL, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int version_check(Server *s, uid_t caller, const char *id, char *err, size_t errsize) {
        Sbx__VersionInfo *v = NULL;
        int r = version_get(s, caller, id, &v);

        if (v)
                sbx__version_info__free_unpacked(v, NULL);
        if (r == -ENOENT)
                snprintf(err, errsize, "invalid arguments: version: no version '%.80s' (sandbox_versions lists them)",
                         id);
        else if (r < 0)
                snprintf(err, errsize, "cannot read version %.80s: %s", id, strerror(-r));
        return r;
}

int version_fill_box(Server *s, uid_t caller, const char *id, int root_fd, uid_t uid) {
        _cleanup_close_ int work = -EBADF;
        Sbx__VersionInfo *v = NULL;
        int r = version_get(s, caller, id, &v);

        if (r < 0)
                return r;
        work = openat2_fd(root_fd, "work", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                          RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        r = work < 0 ? work : version_fill(s, v, work, uid);
        sbx__version_info__free_unpacked(v, NULL);
        return r;
}
