/* Requests of the lifecycle set: claims (core/claim.h), their commands and
 * files (data/claimfs.h), and the templates they are made from. Every claim
 * request names a claim by namespace and name; one the caller may not use
 * is answered as the seed words it: "Sandbox claim '<name>' is not found in
 * namespace '<ns>'". */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control.h"
#include "core/claim.h"
#include "data/claimfs.h"
#include "fd-util.h"
#include "log.h"
#include "sbx-limits.h"

#define NOT_FOUND "Sandbox claim '%s' is not found in namespace '%s'"

static const char *ref_ns(const Sbx__ClaimRef *ref) {
        return ref && ref->namespace_[0] ? ref->namespace_ : "default";
}

/* The names of a request, checked: each error names the argument and the fix. */
static int check_names(Request *rq, const char *ns, const char *name) {
        if (!claim_name_is_valid(ns))
                return request_error(rq, -EINVAL,
                                     "invalid arguments: namespace: '%.80s' is not a namespace name: use 1-%u of "
                                     "a-z 0-9 -, starting and ending with a letter or digit (default: default)",
                                     ns, SBX_CLAIM_NAME_MAX);
        if (name && !claim_name_is_valid(name))
                return request_error(rq, -EINVAL,
                                     "invalid arguments: sandbox_claim_name: '%.80s' is not a claim name: use the "
                                     "sandbox_claim_name create_sandbox returned (1-%u of a-z 0-9 -)",
                                     name, SBX_CLAIM_NAME_MAX);
        return 0;
}

/* The caller's claim ref names, touched (a tool call named it). */
static int find_claim(Request *rq, const Sbx__ClaimRef *ref, Claim **ret) {
        const char *ns = ref_ns(ref), *name = ref ? ref->name : "";
        Claim *cl;
        int r;

        r = check_names(rq, ns, name);
        if (r < 0)
                return r;
        if (rq->client->uid != 0 && !rq->client->mcp_session[0])
                return request_error(rq, -EPERM, "this connection has no MCP session identity: use sandbox-mcp");
        cl = claim_find(rq->server, rq->client, ns, name);
        if (!cl)
                return request_error(rq, -ENOENT, NOT_FOUND, name, ns);
        /* A tool call named it (sbxctl's look does not count as a use). */
        if (rq->client->mcp_session[0])
                claim_touch(rq->server, cl);
        *ret = cl;
        return 0;
}

/* The claim's running session, or the error that says it is not ready. */
static int claim_ready(Request *rq, Claim *cl, WorkspaceSession **ret) {
        WorkspaceSession *ws = claim_session(rq->server, cl);

        if (!ws || ws->root_fd < 0)
                return request_error(rq, -EAGAIN, "Sandbox claim '%s' is not ready yet (its session is starting); "
                                     "wait for get_sandbox_status to say SandboxReady", cl->name);
        *ret = ws;
        return 0;
}

static void claim_info_free(void *p) {
        claim_info_done(p);
}

static int reply_claim(Request *rq, const Claim *cl) {
        Sbx__ClaimInfo *info = REQUEST_NEW(rq, Sbx__ClaimInfo, SBX__CLAIM_INFO__INIT), *labels = NULL;
        int r;

        if (!info)
                return -ENOMEM;
        r = claim_info(rq->server, cl, info, &labels);
        if (r < 0)
                return r;
        if (labels)
                request_own(rq, claim_info_free, labels);
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_CLAIM, info);
}

static int check_labels(Request *rq, const char *arg, Sbx__Label **l, size_t n, size_t value_max, bool any_value) {
        if (n > SBX_CLAIM_LABELS_MAX)
                return request_error(rq, -EINVAL, "invalid arguments: %s: more than %u entries; give fewer", arg,
                                     SBX_CLAIM_LABELS_MAX);
        for (size_t i = 0; i < n; i++) {
                const char *k = l[i]->key, *v = l[i]->value;
                size_t kn = strlen(k);

                if (kn == 0 || kn > SBX_CLAIM_LABEL_KEY_MAX ||
                    strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./") != kn)
                        return request_error(rq, -EINVAL, "invalid arguments: %s: key '%.80s' is not a label key: "
                                             "use 1-%u of A-Z a-z 0-9 - _ . /", arg, k, SBX_CLAIM_LABEL_KEY_MAX);
                if (strlen(v) > value_max ||
                    (!any_value && strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
                                           strlen(v)))
                        return request_error(rq, -EINVAL, "invalid arguments: %s: the value of '%.80s' must be at "
                                             "most %zu characters%s", arg, k, value_max,
                                             any_value ? "" : " of A-Z a-z 0-9 - _ .");
        }
        return 0;
}

/* The template's names, for an unknown one. */
static void template_names(const Config *cfg, char *buf, size_t size) {
        size_t len = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < cfg->n_templates && len < size; i++)
                if (!cfg->templates[i].box)
                        len += (size_t) snprintf(buf + len, size - len, "%s%s", i ? ", " : "", cfg->templates[i].name);
}

int handle_claim_create(Request *rq) {
        const Sbx__ClaimCreate *req = rq->msg->claim_create;
        const char *ns = req->namespace_[0] ? req->namespace_ : "default";
        const char *tname = req->template_[0] ? req->template_ : TEMPLATE_DEFAULT;
        const Template *t = config_template(&rq->server->cfg, tname);
        char err[512] = "", names[SBX_TEMPLATES_MAX * 66];
        Claim *cl;
        int r;

        r = check_names(rq, ns, NULL);
        if (r >= 0)
                r = check_labels(rq, "labels", req->labels, req->n_labels, SBX_CLAIM_LABEL_VALUE_MAX, false);
        if (r >= 0)
                r = check_labels(rq, "pod_labels", req->pod_labels, req->n_pod_labels, SBX_CLAIM_LABEL_VALUE_MAX, false);
        if (r >= 0)
                r = check_labels(rq, "pod_annotations", req->pod_annotations, req->n_pod_annotations,
                                 SBX_CLAIM_ANNOTATION_MAX, true);
        if (r < 0)
                return r;
        if (!t || t->box) {
                template_names(&rq->server->cfg, names, sizeof(names));
                return request_error(rq, -ENOENT, "invalid arguments: warmpool: no template named '%.80s'; use one of: "
                                     "%s (sbxctl template list)", tname, names);
        }
        if (req->has_shutdown && req->shutdown_after_seconds == 0)
                return request_error(rq, -EINVAL, "invalid arguments: shutdown_after_seconds: must be at least 1, or "
                                     "null for no expiry");
        if (rq->client->uid != 0 && !rq->client->mcp_session[0])
                return request_error(rq, -EPERM, "this connection has no MCP session identity: use sandbox-mcp");
        if (rq->client->uid != 0 && claims_of_uid(rq->server, rq->client->uid) >= rq->server->cfg.claims_per_user)
                return request_error(rq, -EUSERS, "too many sandboxes: this user has %u claims, the limit "
                                     "(claims_per_user in sbxd.conf); delete one with delete_sandbox first",
                                     rq->server->cfg.claims_per_user);
        r = claim_create(rq->server, rq->client, rq->seq, t, req, &cl, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "cannot create the sandbox: %s", err[0] ? err : strerror(-r));
        if (r == CLAIM_DEFERRED)
                return REPLY_DEFERRED;
        return reply_claim(rq, cl);
}

int handle_claim_delete(Request *rq) {
        const Sbx__ClaimRef *ref = rq->msg->claim_delete;
        char reason[200];
        Claim *cl;
        int r;

        r = find_claim(rq, ref, &cl);
        if (r < 0)
                return r;
        snprintf(reason, sizeof(reason), "Sandbox claim '%s' in namespace '%s' was deleted", cl->name, cl->namespace_);
        log_info("%s (by uid %u)", reason, rq->client->uid);
        claim_delete(rq->server, cl, reason);
        return 0;
}

int handle_claim_status(Request *rq) {
        const Sbx__ClaimRef *ref = rq->msg->claim_status;
        Sbx__ClaimInfo *info;
        char *why;
        Claim *cl;
        int r;

        r = find_claim(rq, ref, &cl);
        if (r >= 0)
                return reply_claim(rq, cl);
        if (r != -ENOENT)
                return r;
        /* Not an error: the status says so, and why if it is remembered. */
        info = REQUEST_NEW(rq, Sbx__ClaimInfo, SBX__CLAIM_INFO__INIT);
        why = request_alloc(rq, 256);
        if (!info || !why)
                return -ENOMEM;
        if (claim_tombstone(rq->server, rq->client, ref_ns(ref), ref->name, why, 256) < 0)
                snprintf(why, 256, NOT_FOUND, ref->name, ref_ns(ref));
        info->namespace_ = (char *) ref_ns(ref);
        info->name = ref->name;
        info->status = (char *) "SandboxNotFound";
        info->message = why;
        rq->error[0] = '\0';
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_CLAIM, info);
}

static bool has_labels(Sbx__ClaimInfo *labels, Sbx__Label **want, size_t n) {
        for (size_t i = 0; i < n; i++) {
                bool found = false;

                for (size_t k = 0; labels && k < labels->n_labels && !found; k++)
                        found = strcmp(labels->labels[k]->key, want[i]->key) == 0 &&
                                strcmp(labels->labels[k]->value, want[i]->value) == 0;
                if (!found)
                        return false;
        }
        return true;
}

int handle_claim_list(Request *rq) {
        const Sbx__ClaimList *req = rq->msg->claim_list;
        Sbx__ClaimListReply *o = REQUEST_NEW(rq, Sbx__ClaimListReply, SBX__CLAIM_LIST_REPLY__INIT);
        Sbx__ClaimInfo *infos, **ptrs;
        size_t n = 0, i = 0;
        Claim *cl;

        TAILQ_FOREACH(cl, &rq->server->claims, link)
                n++;
        infos = request_alloc(rq, (n ?: 1) * sizeof(*infos));
        ptrs = request_alloc(rq, (n ?: 1) * sizeof(*ptrs));
        if (!o || !infos || !ptrs)
                return -ENOMEM;
        if (req->namespace_[0] && !claim_name_is_valid(req->namespace_))
                return check_names(rq, req->namespace_, NULL);
        TAILQ_FOREACH(cl, &rq->server->claims, link) {
                Sbx__ClaimInfo *labels = NULL;

                if (cl->state == CLAIM_GONE || cl->warm ||
                    claim_find(rq->server, rq->client, cl->namespace_, cl->name) != cl ||
                    (req->namespace_[0] && strcmp(req->namespace_, cl->namespace_) != 0))
                        continue;
                sbx__claim_info__init(&infos[i]);
                if (claim_info(rq->server, cl, &infos[i], &labels) < 0)
                        return -ENOMEM;
                if (labels)
                        request_own(rq, claim_info_free, labels);
                if (!has_labels(labels, req->labels, req->n_labels))
                        continue;
                ptrs[i] = &infos[i];
                i++;
        }
        o->n_claims = i;
        o->claims = ptrs;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_CLAIM_LIST, o);
}

int handle_claim_exec(Request *rq) {
        const Sbx__ClaimExec *req = rq->msg->claim_exec;
        WorkspaceSession *ws = NULL;
        Command *cmd;
        Claim *cl;
        int r;

        r = find_claim(rq, req->claim, &cl);
        if (r >= 0)
                r = claim_ready(rq, cl, &ws);
        if (r < 0)
                return r;
        r = command_start(rq->server, ws, req->cmd, req->timeout_seconds * 1000ull, true, &cmd);
        if (r < 0)
                return request_error(rq, r, "cannot start the command: %s",
                                     r == -EAGAIN ? "too many running commands in this sandbox" : strerror(-r));
        r = command_capture(cmd, req->max_output_chars, req->max_output_chars);
        if (r >= 0)
                /* Answered when it ends: the timeout kills it, and a group that outlives
                 * SIGKILL costs the session (SBX_KILL_GRACE_MS) and ends it too. */
                r = command_add_waiter(rq->server, cmd, rq->client, rq->seq, now_usec(),
                                       req->timeout_seconds * 1000ull + 2 * SBX_KILL_GRACE_MS);
        if (r < 0) {
                command_cancel(rq->server, cmd);
                return request_error(rq, r, "out of memory");
        }
        return REPLY_DEFERRED;
}

/* The claim's root and its host uid, for a file request naming ref and
 * path; a request whose caller's deadline passed (it waited for sbxd) is
 * not started. */
static int claim_file(Request *rq, const Sbx__ClaimRef *ref, const char *path, uint64_t deadline_unix_ms, char *rel,
                      int *ret_root, uid_t *ret_uid) {
        char err[300];
        WorkspaceSession *ws = NULL;
        Claim *cl;
        int r;

        if (claimfs_deadline_passed(deadline_unix_ms))
                return request_error(rq, -ETIMEDOUT, "its timeout passed before sbxd got to it; nothing was done");
        r = find_claim(rq, ref, &cl);
        if (r >= 0)
                r = claim_ready(rq, cl, &ws);
        if (r < 0)
                return r;
        r = claim_path(path, rel, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "invalid arguments: path: %s", err);
        *ret_root = ws->root_fd;
        *ret_uid = cl->sandbox->uid_base;
        return 0;
}

static char *shown_path(Request *rq, const char *rel) {
        size_t n = strlen(rel) + 2;
        char *p = request_alloc(rq, n);

        if (p)
                snprintf(p, n, "/%s", rel);
        return p;
}

static int reply_file(Request *rq, const char *rel, uint64_t bytes, bool exists, const char *type) {
        Sbx__ClaimFileReply *o = REQUEST_NEW(rq, Sbx__ClaimFileReply, SBX__CLAIM_FILE_REPLY__INIT);

        if (!o || !(o->path = shown_path(rq, rel)))
                return -ENOMEM;
        o->bytes = bytes;
        o->exists = exists;
        o->type = (char *) (type ?: "");
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_CLAIM_FILE, o);
}

int handle_claim_put(Request *rq) {
        const Sbx__ClaimPut *req = rq->msg->claim_put;
        int need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW, seals, root, r;
        char rel[SBX_PATH_MAX + 1], err[400] = "";
        struct stat st;
        uid_t uid;

        r = claim_file(rq, req->claim, req->path, req->deadline_unix_ms, rel, &root, &uid);
        if (r < 0)
                return r;
        seals = rq->fd >= 0 ? fcntl(rq->fd, F_GET_SEALS) : -1;
        if (seals < 0 || (seals & need) != need || fstat(rq->fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            (uint64_t) st.st_size != req->content_size)
                return request_error(rq, -EBADMSG, "the content must come as a sealed memfd of content_size bytes");
        if (req->content_size > SBX_CLAIM_FILE_MAX)
                return request_error(rq, -EFBIG, "invalid arguments: content: %llu bytes is more than %llu "
                                     "(SBX_CLAIM_FILE_MAX); upload it in parts and join them with cat",
                                     (unsigned long long) req->content_size, (unsigned long long) SBX_CLAIM_FILE_MAX);
        r = claimfs_put(root, uid, rel, rq->fd, req->content_size, req->deadline_unix_ms, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "%s", err[0] ? err : strerror(-r));
        return reply_file(rq, rel, req->content_size, true, "file");
}

int handle_claim_get(Request *rq) {
        const Sbx__ClaimPath *req = rq->msg->claim_get;
        char rel[SBX_PATH_MAX + 1], err[400] = "";
        uint64_t size = 0;
        int root, r;
        uid_t uid;

        r = claim_file(rq, req->claim, req->path, req->deadline_unix_ms, rel, &root, &uid);
        if (r < 0)
                return r;
        r = claimfs_get(root, uid, rel, SBX_CLAIM_FILE_MAX, req->deadline_unix_ms, &rq->reply_fd, &size, err,
                        sizeof(err));
        if (r < 0)
                return request_error(rq, r, "%s", err[0] ? err : strerror(-r));
        return reply_file(rq, rel, size, true, "file");
}

static void listing_free(void *p) {
        claimfs_listing_done(p);
        free(p);
}

int handle_claim_list_files(Request *rq) {
        const Sbx__ClaimPath *req = rq->msg->claim_list_files;
        Sbx__ClaimListFilesReply *o = REQUEST_NEW(rq, Sbx__ClaimListFilesReply, SBX__CLAIM_LIST_FILES_REPLY__INIT);
        ClaimFsListing *l = calloc(1, sizeof(*l));
        char rel[SBX_PATH_MAX + 1], err[400] = "";
        Sbx__FileEntry *entries, **ptrs;
        int root, r;
        uid_t uid;

        if (l)
                request_own(rq, free, l);
        if (!o || !l)
                return -ENOMEM;
        r = claim_file(rq, req->claim, req->path, req->deadline_unix_ms, rel, &root, &uid);
        if (r < 0)
                return r;
        r = claimfs_list(root, uid, rel, req->max_entries ?: SBX_CLAIM_LIST_DEFAULT, l, err, sizeof(err));
        if (r < 0)
                return request_error(rq, r, "%s", err[0] ? err : strerror(-r));
        rq->owned[rq->n_owned - 1].done = listing_free;
        entries = request_alloc(rq, (l->n ?: 1) * sizeof(*entries));
        ptrs = request_alloc(rq, (l->n ?: 1) * sizeof(*ptrs));
        if (!entries || !ptrs || !(o->path = shown_path(rq, rel)))
                return -ENOMEM;
        for (size_t i = 0; i < l->n; i++) {
                sbx__file_entry__init(&entries[i]);
                entries[i].name = l->entries[i].name;
                entries[i].size = l->entries[i].size;
                entries[i].type = (char *) l->entries[i].type;
                entries[i].mod_time_usec = l->entries[i].mtime_usec;
                ptrs[i] = &entries[i];
        }
        o->n_entries = l->n;
        o->entries = ptrs;
        o->total_entries = (uint32_t) MIN(l->total, (uint64_t) UINT32_MAX);
        o->truncated = l->truncated;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_CLAIM_LIST_FILES, o);
}

int handle_claim_stat(Request *rq) {
        const Sbx__ClaimPath *req = rq->msg->claim_stat;
        char rel[SBX_PATH_MAX + 1];
        const char *type = NULL;
        int root, r;
        uid_t uid;

        r = claim_file(rq, req->claim, req->path, req->deadline_unix_ms, rel, &root, &uid);
        if (r < 0)
                return r;
        r = claimfs_stat(root, uid, rel, &type);
        if (r < 0)
                return request_error(rq, r, "cannot look at '/%.200s': %s", rel, strerror(-r));
        return reply_file(rq, rel, 0, r > 0, type);
}

int handle_template_list(Request *rq) {
        const Config *cfg = &rq->server->cfg;
        Sbx__TemplateListReply *o = REQUEST_NEW(rq, Sbx__TemplateListReply, SBX__TEMPLATE_LIST_REPLY__INIT);
        Sbx__TemplateInfo *infos = request_alloc(rq, (cfg->n_templates ?: 1) * sizeof(*infos));
        Sbx__TemplateInfo **ptrs = request_alloc(rq, (cfg->n_templates ?: 1) * sizeof(*ptrs));

        if (!o || !infos || !ptrs)
                return -ENOMEM;
        for (size_t i = 0; i < cfg->n_templates; i++) {
                const Template *t = &cfg->templates[i];
                Sbx__TemplateInfo *info = &infos[i];
                const WarmBackoff *b;
                unsigned warm, claimed;

                sbx__template_info__init(info);
                claims_count(rq->server, t->name, &warm, &claimed);
                info->name = (char *) t->name;
                info->image = (char *) t->image;
                info->source = t->source ?: (char *) "";
                info->memory_bytes = t->memory_bytes ?: cfg->default_memory_bytes;
                info->pids_max = t->pids_max ?: cfg->default_pids_max;
                info->cpu_weight = t->cpu_weight;
                info->disk_bytes = t->disk_bytes ?: cfg->session_disk_bytes;
                info->egress = (char *) egress_policy_to_string(t->egress);
                info->warm = t->warm;
                info->warm_ready = warm;
                info->has_shutdown = !t->no_expiry;
                info->shutdown_after_seconds = t->shutdown_after_seconds;
                /* Counts of others' claims are root's to see. */
                info->claims = rq->client->uid == 0 ? claimed : 0;
                b = claim_warm_backoff(rq->server, t->name);
                if (b && b->failures > 0) {
                        info->warm_failures = b->failures;
                        info->warm_error = (char *) b->error;
                        info->warm_retry_unix = b->retry_unix;
                }
                ptrs[i] = info;
        }
        o->n_templates = cfg->n_templates;
        o->templates = ptrs;
        return msg_reply_set(&rq->reply, SBX__REPLY__BODY_TEMPLATE_LIST, o);
}
