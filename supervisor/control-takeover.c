/* Requests of a person's takeover of a box (core/takeover.h): the agent's
 * sandbox_takeover, and sbxctl takeover list|attach|return with the
 * attached terminal's TERMINAL frames. */
#include <errno.h>
#include <nettle/memops.h>
#include <string.h>

#include "control.h"
#include "core/box.h"
#include "core/takeover.h"
#include "log.h"
#include "sbx-limits.h"

/* The takeover of box id that the caller may attach to or return: by its
 * uid, or (the gateway) by the box's capability. */
static int find_takeover(Request *rq, const char *id, const char *cap, Takeover **ret) {
        Takeover *t = takeover_find(rq->server, id);
        Box *box = box_by_id(rq->server, id);

        if (cap[0]) {
                if (!rq->client->gateway)
                        return request_error(rq, -EPERM, "only sbxd.conf's gateway_user may use a takeover capability");
                /* A wrong capability and a box not taken over look the same. */
                if (!t || !box || strlen(cap) != SBX_TAKEOVER_CAP_HEX ||
                    !memeql_sec(cap, box->takeover_cap, SBX_TAKEOVER_CAP_HEX))
                        return request_error(rq, -ENOENT, "no such takeover");
                *ret = t;
                return 0;
        }
        if (!t)
                return request_error(rq, -ENOENT, "box %.80s is not taken over (sbxctl takeover list shows those that are)",
                                     id);
        if (!takeover_permitted(t, rq->client->uid))
                return request_error(rq, -EPERM, "only root and the owner of box %.80s (uid %u) may take it over", id,
                                     (unsigned) t->owner);
        *ret = t;
        return 0;
}

int handle_takeover(Request *rq) {
        const Sbx__TakeoverRequest *req = rq->msg->takeover;
        Box *box;
        int r = find_box(rq, req->box, true, &box);

        if (r < 0)
                return r;
        if (box->state == BOX_TAKEOVER)
                return request_error(rq, -EBUSY, "box %s is taken over already; wait for it to be handed back",
                                     box->id);
        if (box->state != BOX_READY)
                return request_error(rq, -EAGAIN, "box %s is %s: only a ready box can be taken over", box->id,
                                     box_state_name(box));
        r = takeover_begin(rq->server, rq->client, rq->seq, box->id, &box->state, box->takeover_cap, box->uid,
                           req->note, req->progress);
        if (r < 0)
                return request_error(rq, r, "cannot take box %s over: %s", box->id, strerror(-r));
        return REPLY_DEFERRED;
}

int handle_takeover_list(Request *rq) {
        Sbx__TakeoverListReply *l = REQUEST_NEW(rq, Sbx__TakeoverListReply, SBX__TAKEOVER_LIST_REPLY__INIT);
        size_t n = 0;
        Takeover *t;

        if (!l)
                return -ENOMEM;
        TAILQ_FOREACH(t, &rq->server->takeovers, link)
                n++;
        l->takeovers = request_alloc(rq, (n ?: 1) * sizeof(*l->takeovers));
        if (!l->takeovers)
                return -ENOMEM;
        /* Root sees every one, anyone else those of their boxes. */
        TAILQ_FOREACH(t, &rq->server->takeovers, link) {
                Sbx__TakeoverInfo *i;

                if (!takeover_permitted(t, rq->client->uid))
                        continue;
                i = REQUEST_NEW(rq, Sbx__TakeoverInfo, SBX__TAKEOVER_INFO__INIT);
                if (!i)
                        return -ENOMEM;
                i->box = t->box;
                i->owner_uid = (uint32_t) t->owner;
                i->note = t->note;
                i->since_unix = t->since_unix;
                i->expires_unix = t->since_unix + rq->server->cfg.takeover_max_seconds;
                i->attached = t->shell != NULL;
                l->takeovers[l->n_takeovers++] = i;
        }
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_TAKEOVER_LIST, l);
}

int handle_takeover_attach(Request *rq) {
        const Sbx__TakeoverAttach *req = rq->msg->takeover_attach;
        TerminalSize size = { req->rows ?: SBX_TERMINAL_DEFAULT_ROWS, req->cols ?: SBX_TERMINAL_DEFAULT_COLS };
        char err[300] = "";
        Command *shell;
        Takeover *t;
        Box *box;
        int r = find_takeover(rq, req->box, req->capability, &t);

        if (r < 0)
                return r;
        if (takeover_attached(t))
                return request_error(rq, -EBUSY, "a terminal is attached to box %s already", t->box);
        box = box_by_id(rq->server, t->box);
        r = box ? box_use(rq->server, box) : -ENOENT;
        if (r >= 0)
                box_no_proxy_ensure(rq->server, box);
        if (r >= 0)
                r = box_terminal_start(rq->server, box, TAKEOVER_SHELL, takeover_left_ms(t), size, &shell, err,
                                       sizeof(err));
        if (r < 0)
                return request_error(rq, r, "cannot start a terminal in box %s: %s", t->box, err[0] ? err : strerror(-r));
        r = takeover_attach(rq->server, t, shell, rq->client, rq->seq);
        if (r < 0) {
                command_cancel(rq->server, shell);
                return request_error(rq, r, "cannot attach to box %s: %s", t->box, strerror(-r));
        }
        return REPLY_DEFERRED;
}

int handle_takeover_return(Request *rq) {
        const Sbx__TakeoverReturn *req = rq->msg->takeover_return;
        Takeover *t;
        int r = find_takeover(rq, req->box, req->capability, &t);

        if (r < 0)
                return r;
        log_info("Box %s handed back by %s%u", t->box, req->capability[0] ? "the gateway's page, uid " : "uid ",
                 (unsigned) rq->client->uid);
        takeover_return(rq->server, t, req->note);
        return 0;
}

int handle_takeover_check(Request *rq) {
        const Sbx__TakeoverCapability *req = rq->msg->takeover_check;
        Takeover *t;

        if (!req->capability[0])
                return request_error(rq, -ENOENT, "no such takeover");
        return find_takeover(rq, req->box, req->capability, &t);
}

int handle_terminal(Request *rq) {
        const Sbx__Terminal *m = rq->msg->terminal;
        TerminalSize size = { m->rows, m->cols };
        int r;

        if (!!m->rows != !!m->cols || m->ended)
                return request_error(rq, -EINVAL, "a TERMINAL frame carries keys and a size (rows and cols) only");
        r = takeover_input(rq->server, rq->client, rq->seq, m->data.data, m->data.len, size);
        if (r < 0 && r != -ENOENT && r != -EPIPE)
                log_debug_errno(r, "Terminal input of uid %u not delivered: %m", (unsigned) rq->client->uid);
        return REPLY_DEFERRED; /* keys have no answer; the attach's comes at its end */
}
