/* Requests about the boxes set's versions (core/version.h): publish one
 * (sandbox_publish_version), list them (sandbox_versions, sbxctl version
 * list) and remove one (sbxctl version rm). Each user sees and removes
 * their own; root all. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>

#include "control.h"
#include "core/box.h"
#include "core/version.h"
#include "fd-util.h"
#include "log.h"
#include "sbx-limits.h"

typedef struct VersionListing {
        Request *rq;
        Sbx__VersionListReply *l;
} VersionListing;

static void version_info_free(void *p) {
        sbx__version_info__free_unpacked(p, NULL);
}

/* A copy of v (freed after the call) in the reply, made by packing it. */
static int version_listed(const Sbx__VersionInfo *v, void *userdata) {
        VersionListing *vl = userdata;
        size_t len = sbx__version_info__get_packed_size(v);
        uint8_t *buf = request_alloc(vl->rq, len ?: 1);
        Sbx__VersionInfo *copy;

        if (!buf)
                return -ENOMEM;
        if (vl->l->n_versions >= SBX_VERSIONS_LISTED_MAX)
                return 0;
        sbx__version_info__pack(v, buf);
        copy = sbx__version_info__unpack(NULL, len, buf);
        if (!copy)
                return -ENOMEM;
        request_own(vl->rq, version_info_free, copy);
        vl->l->versions[vl->l->n_versions++] = copy;
        return 0;
}

/* image names the caller's running box: what of its /work a version records,
 * read-only, into *ret_tree: the upper of its /work overlay when it was
 * started from a version's layers (*ret_parent: that version), else its
 * /work whole. */
static int publish_source(Request *rq, const char *image, Box **ret_box, int *ret_tree,
                          Sbx__VersionInfo **ret_parent) {
        WorkspaceSession *ws;
        Box *box;
        int r = find_box(rq, image, true, &box), fd;

        if (r < 0)
                return r;
        ws = box_session(rq->server, box);
        if (box->state != BOX_READY || !ws)
                return request_error(rq, -EAGAIN, "Box '%s' is %s: only a ready box can be published", box->id,
                                     box_state_name(box));
        if (ws->work_upper_fd >= 0) {
                r = version_get(rq->server, box->uid, box->version, ret_parent);
                if (r < 0)
                        return request_error(rq, r, "cannot read version %s, which box %s was started from: %s",
                                             box->version, box->id, strerror(-r));
                request_own(rq, version_info_free, *ret_parent);
                fd = openat(ws->work_upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                fd = fd < 0 ? -errno : fd;
        } else
                fd = openat2_fd(ws->root_fd, "work", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                                RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
        if (fd < 0)
                return request_error(rq, fd, "cannot open /work of box %s: %s", box->id, strerror(-fd));
        *ret_box = box;
        *ret_tree = fd;
        return 0;
}

/* A publication's client, answered once its layer is built (core/version.h). */
typedef struct PublishAnswer {
        Pending pending;
        char from[SBX_NAME_MAX + 1];    /* the box id or box_image */
        uid_t uid;
} PublishAnswer;

static void version_publish_abandon(Server *s, Pending *p, bool cancelled) {
        /* The version is recorded anyway; sandbox_versions lists it. */
}

static void version_publish_answer(Server *s, int r, const Sbx__VersionInfo *v, void *userdata) {
        PublishAnswer *a = userdata;
        Sbx__Reply reply = SBX__REPLY__INIT;

        if (r == -ECANCELED)
                pending_answer_error(s, &a->pending, r, "cannot record the version: box %s stopped meanwhile", a->from);
        else if (r == -E2BIG)
                pending_answer_error(s, &a->pending, r, "cannot record the version: its box's version has %u layers "
                                     "already, the most one version may have; publish from a box started afresh",
                                     SBX_VERSION_LAYERS_MAX);
        else if (r < 0)
                pending_answer_error(s, &a->pending, r, "cannot record the version: %s", strerror(-r));
        else {
                log_info("Version %s of service '%s' published by uid %u from %s (%zu layers)", v->id, v->service,
                         (unsigned) a->uid, a->from, v->n_layers);
                msg_reply_set(&reply, SBX__REPLY__BODY_VERSION, (void *) v);
                pending_answer(s, &a->pending, &reply);
        }
        pending_stop(&a->pending);
        free(a);
}

int handle_version_publish(Request *rq) {
        const Sbx__VersionPublish *m = rq->msg->version_publish;
        const char *box_image = rq->server->cfg.box_image;
        _cleanup_close_ int tree = -EBADF;
        Sbx__VersionInfo *parent = NULL;
        PublishAnswer *a;
        Box *box = NULL;
        int r;

        if (box_id_is_valid(m->image)) {
                r = publish_source(rq, m->image, &box, &tree, &parent);
                if (r < 0)
                        return r;
        } else if (strcmp(m->image, box_image) != 0)
                return request_error(rq, -EINVAL, "invalid arguments: image: '%.80s' is neither a box id nor "
                                     "box_image '%s' (the image every box here runs on, sbxd.conf(5))", m->image,
                                     box_image);
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->uid = rq->client->uid;
        snprintf(a->from, sizeof(a->from), "%s", box ? box->id : box_image);
        pending_start(&a->pending, rq->client, rq->seq, version_publish_abandon);
        r = version_publish(rq->server, rq->client->uid, m, &(VersionSource) {
                        .tree_fd = tree, .parent = parent, .lane = box ? &box->claim->sandbox->lane : NULL,
                        .box_image = box_image, .from_box = box ? box->id : "",
                }, version_publish_answer, a);
        if (r < 0) {
                pending_stop(&a->pending);
                free(a);
                return request_error(rq, r, "cannot record the version: %s", strerror(-r));
        }
        return REPLY_DEFERRED;
}

int handle_version_list(Request *rq) {
        VersionListing vl = { rq, REQUEST_NEW(rq, Sbx__VersionListReply, SBX__VERSION_LIST_REPLY__INIT) };
        int r;

        if (!vl.l || !(vl.l->versions = request_alloc(rq, SBX_VERSIONS_LISTED_MAX * sizeof(*vl.l->versions))))
                return -ENOMEM;
        r = versions_foreach(rq->server, rq->client->uid, version_listed, &vl);
        if (r < 0)
                return request_error(rq, r, "cannot read the versions: %s", strerror(-r));
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_VERSION_LIST, vl.l);
}

/* A live box started from version id: its layers are the lowers of that box's /work. */
static const Box *version_user(Server *s, const char *id) {
        const Box *box;

        TAILQ_FOREACH(box, &s->boxes, link)
                if (box->state != BOX_TERMINATED && strcmp(box->version, id) == 0)
                        return box;
        return NULL;
}

int handle_version_rm(Request *rq) {
        const char *id = rq->msg->version_rm->id;
        const Box *box = version_user(rq->server, id);
        int r;

        if (box && (rq->client->uid == 0 || rq->client->uid == box->uid))
                return request_error(rq, -EBUSY, "version %s is in use: box %s was started from it and runs on its "
                                     "layers; stop the box first (sbxctl box stop %s)", id, box->id, box->id);
        r = version_remove(rq->server, rq->client->uid, id);

        if (r == -ENOENT)
                return request_error(rq, r, "no version '%s'", id);
        if (r < 0)
                return request_error(rq, r, "cannot remove version %s: %s", id, strerror(-r));
        log_info("Version %s removed", id);
        return 0;
}
