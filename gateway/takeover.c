/* A person's takeover of a box from a browser (gateway.h, docs/boxes.md
 * "Takeover"): sbxd's TAKEOVER_CHECK, TAKEOVER_ATTACH and TAKEOVER_RETURN
 * with the box's capability (its takeoverUrl's c=) in place of a uid, and
 * the attached terminals. Each terminal is a connection of its own to sbxd
 * (the gateway user's) with its TAKEOVER_ATTACH as seq 1: the thread of the
 * page's event stream reads its output there, the page's key and size
 * POSTs write TERMINAL frames on it, found in a table by box. */
#include <errno.h>
#include <nettle/memops.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fd-util.h"
#include "gateway.h"
#include "macro.h"
#include "wire.h"

#define ATTACH_SEQ 1u

struct GwTerm {
        GwTerm *next;
        char box[SBX_NAME_MAX + 1];
        char cap[SBX_TAKEOVER_CAP_HEX + 1];
        int fd;
        pthread_mutex_t write_lock;     /* TERMINAL frames of keys and sizes */
        unsigned refs;                  /* the stream's and each POST's */
        bool linked;
};

static pthread_mutex_t terms_lock = PTHREAD_MUTEX_INITIALIZER;
static GwTerm *terms;

static bool cap_valid(const char *cap) {
        return strlen(cap) == SBX_TAKEOVER_CAP_HEX && strspn(cap, "0123456789abcdef") == SBX_TAKEOVER_CAP_HEX;
}

/* A request about box's takeover with cap whose answer is only an error or
 * not: 0, or sbxd's -errno (-ENOENT without asking for a malformed cap). */
static int takeover_ask(Gateway *g, const char *box, const char *cap, Sbx__MsgType type, void *body) {
        _cleanup_msg_ Sbx__Msg *reply = NULL;
        Sbx__Msg req = SBX__MSG__INIT;
        int r;

        if (!cap_valid(cap) || strlen(box) > SBX_NAME_MAX)
                return -ENOENT;
        wire_msg_set(&req, type, body);
        r = gateway_ask(g, &req, &reply);
        return r < 0 ? r : reply->reply->err;
}

int gateway_takeover_check(Gateway *g, const char *box, const char *cap) {
        Sbx__TakeoverCapability check = SBX__TAKEOVER_CAPABILITY__INIT;

        check.box = (char *) box;
        check.capability = (char *) cap;
        return takeover_ask(g, box, cap, SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_CHECK, &check);
}

int gateway_takeover_return(Gateway *g, const char *box, const char *cap, const char *note) {
        Sbx__TakeoverReturn ret = SBX__TAKEOVER_RETURN__INIT;

        ret.box = (char *) box;
        ret.capability = (char *) cap;
        ret.note = (char *) note;
        return takeover_ask(g, box, cap, SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_RETURN, &ret);
}

static void term_unref(GwTerm *t) {
        bool last;

        pthread_mutex_lock(&terms_lock);
        last = --t->refs == 0;
        pthread_mutex_unlock(&terms_lock);
        if (!last)
                return;
        safe_close(t->fd);
        pthread_mutex_destroy(&t->write_lock);
        free(t);
}

int gateway_term_attach(Gateway *g, const char *box, const char *cap, unsigned rows, unsigned cols, GwTerm **ret) {
        Sbx__TakeoverAttach attach = SBX__TAKEOVER_ATTACH__INIT;
        Sbx__Msg req = SBX__MSG__INIT;
        GwTerm *t;
        int r;

        if (!cap_valid(cap) || strlen(box) > SBX_NAME_MAX)
                return -ENOENT;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        strlcpy(t->box, box, sizeof(t->box));
        strlcpy(t->cap, cap, sizeof(t->cap));
        pthread_mutex_init(&t->write_lock, NULL);
        t->refs = 1;
        t->fd = -EBADF;
        r = gateway_sbxd_connect(g, NULL, &t->fd);
        if (r >= 0) {
                attach.box = t->box;
                attach.capability = t->cap;
                attach.rows = rows;
                attach.cols = cols;
                wire_msg_set(&req, SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_ATTACH, &attach);
                r = wire_send(t->fd, &req, ATTACH_SEQ, NULL, 0);
        }
        if (r < 0) {
                term_unref(t);
                return r;
        }
        /* The newest terminal of a box takes its keys (sbxd refuses a second attach anyway). */
        pthread_mutex_lock(&terms_lock);
        t->next = terms;
        terms = t;
        t->linked = true;
        t->refs++;
        pthread_mutex_unlock(&terms_lock);
        *ret = t;
        return 0;
}

void gateway_term_close(GwTerm *t) {
        pthread_mutex_lock(&terms_lock);
        for (GwTerm **p = &terms; t->linked && *p; p = &(*p)->next)
                if (*p == t) {
                        *p = t->next;
                        t->linked = false;
                        t->refs--;      /* the table's */
                        break;
                }
        pthread_mutex_unlock(&terms_lock);
        /* sbxd sees the connection go: the shell ends, the takeover stays. */
        term_unref(t);
}

int gateway_term_next(GwTerm *t, unsigned timeout_ms, GwTermEvent *ret) {
        for (;;) {
                _cleanup_msg_ Sbx__Msg *m = NULL;
                struct pollfd p = { .fd = t->fd, .events = POLLIN };
                int fds[SBX_WIRE_MAX_FDS];
                size_t n_fds = 0;
                uint32_t seq;
                int r = poll(&p, 1, (int) timeout_ms);

                if (r == 0)
                        return -ETIMEDOUT;
                r = r < 0 ? -errno : wire_recv(t->fd, &m, &seq, fds, &n_fds);
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (r < 0)
                        return r;
                *ret = (GwTermEvent) { .ended = true };
                if (m->type == SBX__MSG_TYPE__MSG_REPLY && m->reply->err < 0) {
                        /* The hello's or the attach's refusal. */
                        strlcpy(ret->reason, m->reply->errmsg ?: "refused", sizeof(ret->reason));
                        return 0;
                }
                if (m->type != SBX__MSG_TYPE__MSG_CLIENT_TERMINAL || seq != ATTACH_SEQ)
                        continue;
                if (m->terminal->ended) {
                        strlcpy(ret->reason, m->terminal->reason, sizeof(ret->reason));
                        ret->exit_code = m->terminal->exit_code;
                        ret->signal = m->terminal->signal;
                        return 0;
                }
                if (m->terminal->data.len == 0)
                        continue;
                ret->ended = false;
                ret->data = malloc(m->terminal->data.len);
                if (!ret->data)
                        return -ENOMEM;
                memcpy(ret->data, m->terminal->data.data, m->terminal->data.len);
                ret->len = m->terminal->data.len;
                return 0;
        }
}

int gateway_term_input(const char *box, const char *cap, const void *keys, size_t len, unsigned rows, unsigned cols) {
        Sbx__Terminal frame = SBX__TERMINAL__INIT;
        Sbx__Msg m = SBX__MSG__INIT;
        GwTerm *t;
        int r;

        if (!cap_valid(cap))
                return -ENOENT;
        pthread_mutex_lock(&terms_lock);
        for (t = terms; t; t = t->next)
                if (strcmp(t->box, box) == 0)
                        break;
        /* The capability the attach was made with, which sbxd checked. */
        if (t && !memeql_sec(t->cap, cap, SBX_TAKEOVER_CAP_HEX))
                t = NULL;
        if (t)
                t->refs++;
        pthread_mutex_unlock(&terms_lock);
        if (!t)
                return -ENOENT;
        frame.data.data = (uint8_t *) keys;
        frame.data.len = len;
        frame.rows = rows;
        frame.cols = cols;
        wire_msg_set(&m, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, &frame);
        pthread_mutex_lock(&t->write_lock);
        r = wire_send(t->fd, &m, ATTACH_SEQ, NULL, 0);
        pthread_mutex_unlock(&t->write_lock);
        term_unref(t);
        return r;
}
