/* Requests about the boxes set's versions (core/version.h): list them
 * (sandbox_versions, sbxctl version list) and remove one (sbxctl version
 * rm). Each user sees and removes their own; root all. */
#include <errno.h>
#include <string.h>

#include "control.h"
#include "core/version.h"
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

int handle_version_rm(Request *rq) {
        const char *id = rq->msg->version_rm->id;
        int r = version_remove(rq->server, rq->client->uid, id);

        if (r == -ENOENT)
                return request_error(rq, r, "no version '%s'", id);
        if (r < 0)
                return request_error(rq, r, "cannot remove version %s: %s", id, strerror(-r));
        log_info("Version %s removed", id);
        return 0;
}
