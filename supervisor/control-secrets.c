/* Requests about the boxes set's secrets (core/secret.h): set or remove one
 * (sbxctl secret set|rm) and list names (sbxctl secret list, the
 * sandbox_secrets tool). Everyone manages their own secrets; root may name
 * another owner. No reply ever carries a value, and nothing here logs one. */
#include <errno.h>
#include <string.h>

#include "control.h"
#include "core/secret.h"
#include "log.h"
#include "sbx-limits.h"

/* The owner a request names: the caller's own, or (root only) another's. */
static int secret_owner(Request *rq, bool has_owner, uint32_t owner_uid, uid_t *ret) {
        uid_t caller = rq->client->uid;

        if (has_owner && owner_uid != caller && caller != 0)
                return request_error(rq, -EPERM, "only root may manage another user's secrets");
        *ret = has_owner ? (uid_t) owner_uid : caller;
        return 0;
}

static int secret_remove_request(Request *rq, uid_t owner, const char *name) {
        int r = secret_remove(rq->server, owner, name);

        if (r == -ENOENT)
                return request_error(rq, r, "uid %u has no secret named '%s'", (unsigned) owner, name);
        if (r < 0)
                return request_error(rq, r, "cannot remove the secret: %s", strerror(-r));
        log_info("Secret %s of uid %u removed", name, (unsigned) owner);
        return 0;
}

int handle_secret_set(Request *rq) {
        const Sbx__SecretSet *m = rq->msg->secret_set;
        const char *bad;
        uid_t owner = (uid_t) -1;
        int r = secret_owner(rq, m->has_owner, m->owner_uid, &owner);

        if (r < 0)
                return r;
        if (!secret_name_valid(m->name))
                return request_error(rq, -EINVAL, "invalid secret name '%s': letters, digits and _, "
                                     "not starting with a digit, at most %u bytes", m->name, SBX_SECRET_NAME_MAX);
        if (m->remove)
                return secret_remove_request(rq, owner, m->name);
        bad = secret_value_invalid(m->value.data, m->value.len);
        if (bad)
                return request_error(rq, -EINVAL, "the value of %s %s: %u to %u bytes, no NUL", m->name, bad,
                                     SBX_SECRET_VALUE_MIN, SBX_SECRET_VALUE_MAX);
        r = secret_set(rq->server, owner, m->name, m->value.data, m->value.len);
        if (r == -ENOSPC)
                return request_error(rq, r, "uid %u has %u secrets already: remove some first", (unsigned) owner,
                                     SBX_SECRETS_PER_OWNER_MAX);
        if (r < 0)
                return request_error(rq, r, "cannot store the secret: %s", strerror(-r));
        log_info("Secret %s of uid %u set (%zu bytes)", m->name, (unsigned) owner, m->value.len);
        return 0;
}

typedef struct SecretListing {
        Request *rq;
        uid_t owner;
        Sbx__SecretListReply *l;
} SecretListing;

static int secret_listed(const StoreSecret *x, void *userdata) {
        SecretListing *sl = userdata;
        Sbx__SecretInfo *i = REQUEST_NEW(sl->rq, Sbx__SecretInfo, SBX__SECRET_INFO__INIT);
        char *name = request_alloc(sl->rq, strlen(x->name) + 1);

        if (!i || !name || sl->l->n_secrets >= SBX_SECRETS_PER_OWNER_MAX)
                return i && name ? 0 : -ENOMEM;
        strcpy(name, x->name);
        i->name = name;
        i->owner_uid = sl->owner;
        i->bytes = (uint32_t) x->len;
        i->updated_unix = x->updated_unix;
        sl->l->secrets[sl->l->n_secrets++] = i;
        return 0;
}

int handle_secret_list(Request *rq) {
        const Sbx__SecretList *m = rq->msg->secret_list;
        SecretListing sl = { .rq = rq, .l = REQUEST_NEW(rq, Sbx__SecretListReply, SBX__SECRET_LIST_REPLY__INIT) };
        int r = secret_owner(rq, m->has_owner, m->owner_uid, &sl.owner);

        if (r < 0)
                return r;
        if (!sl.l || !(sl.l->secrets = request_alloc(rq, SBX_SECRETS_PER_OWNER_MAX * sizeof(*sl.l->secrets))))
                return -ENOMEM;
        r = secrets_foreach(rq->server, sl.owner, secret_listed, &sl);
        if (r < 0)
                return request_error(rq, r, "cannot read the secrets: %s", strerror(-r));
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_SECRET_LIST, sl.l);
}
