/* Requests on images (core/imagebuild.h): list, build (ahead of time, and
 * waited for if asked), remove. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "core/imagebuild.h"
#include "log.h"
#include "sbx-limits.h"

/* The listing's item called name, or NULL. */
static Sbx__ImageInfo *list_pick(Sbx__ImageListReply *l, const char *name) {
        for (size_t i = 0; i < l->n_images; i++)
                if (strcmp(l->images[i]->name, name) == 0)
                        return l->images[i];
        return NULL;
}

int handle_image_list(Request *rq) {
        Sbx__ImageListReply *l = NULL;
        int r = image_list(rq->server, rq->client->uid, &l);

        if (r < 0)
                return request_error(rq, r, "cannot list the images: %s", strerror(-r));
        request_own(rq, image_list_free, l);
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_IMAGE_LIST, l);
}

/* sbxctl image build --wait: answered when the build ends. */
typedef struct BuildWait {
        ImageWaiter waiter;
        Pending pending;
        char name[SBX_NAME_MAX + 1];
} BuildWait;

/* The image as listed now, into reply (the listing is *ret_list's, to free). */
static int image_reply(Server *s, uid_t uid, const char *name, Sbx__Reply *reply, Sbx__ImageListReply **ret_list) {
        Sbx__ImageInfo *info;
        int r = image_list(s, uid, ret_list);

        if (r < 0)
                return r;
        info = list_pick(*ret_list, name);
        if (!info)
                return -ENOENT;
        return msg_reply_set(reply, SBX__REPLY__BODY_IMAGE, info);
}

static void build_wait_done(Server *s, ImageWaiter *w, int r, const char *why) {
        BuildWait *bw = container_of(w, BuildWait, waiter);
        Sbx__ImageListReply *l = NULL;
        Sbx__Reply reply = SBX__REPLY__INIT;

        if (r >= 0)
                r = image_reply(s, 0, bw->name, &reply, &l);
        if (r < 0)
                pending_answer_error(s, &bw->pending, r, "%s", why ? why : strerror(-r));
        else
                pending_answer(s, &bw->pending, &reply);
        image_list_free(l);
        free(bw);
}

static void build_wait_abandon(Server *s, Pending *p, bool cancelled) {
        BuildWait *bw = container_of(p, BuildWait, pending);

        /* The build goes on; nobody waits for it here any more. */
        image_waiter_cancel(&bw->waiter);
        free(bw);
}

int handle_image_build(Request *rq) {
        const Sbx__ImageBuild *m = rq->msg->image_build;
        Sbx__ImageListReply *l = NULL;
        BuildWait *bw = NULL;
        int r;

        if (m->wait) {
                bw = calloc(1, sizeof(*bw));
                if (!bw)
                        return -ENOMEM;
                bw->waiter.done = build_wait_done;
                strlcpy(bw->name, m->name, sizeof(bw->name));
        }
        r = image_build(rq->server, m->name, bw ? &bw->waiter : NULL, rq->error, sizeof(rq->error));
        if (r < 0) {
                free(bw);
                return r;
        }
        if (r == 0 && bw) {
                pending_start(&bw->pending, rq->client, rq->seq, build_wait_abandon);
                return REPLY_DEFERRED;
        }
        free(bw);
        r = image_reply(rq->server, 0, m->name, &rq->reply, &l);
        request_own(rq, image_list_free, l);
        return r < 0 ? request_error(rq, r, "cannot show image '%s': %s", m->name, strerror(-r)) : 0;
}

int handle_image_rm(Request *rq) {
        return image_remove(rq->server, rq->msg->image_rm->name, rq->error, sizeof(rq->error));
}
