/* sbxctl's rows for the lifecycle set (issue 16): template list|show and
 * claim list|show|delete. Root (without an MCP session) sees every claim.
 * A claim is named NAME (namespace "default") or NAMESPACE/NAME. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "msg-json.h"
#include "sbx-limits.h"
#include "sbxctl.h"

#define CTL_TEXT MSG_JSON_TEXT_ASCII

static const MsgJsonMap label_map = MSG_JSON_MAP_INIT(sbx__label__descriptor, MSG_JSON_NAMES("key value"));

static const MsgJsonMap template_map = MSG_JSON_MAP_INIT(sbx__template_info__descriptor,
        MSG_JSON_NAMES("name image source memory_bytes pids_max cpu_weight disk_bytes egress warm warm_ready "
                       "has_shutdown shutdown_after_seconds claims warm_failures warm_error warm_retry_unix"));

static const MsgJsonMap claim_map = MSG_JSON_MAP_INIT(sbx__claim_info__descriptor,
        MSG_JSON_NAMES("namespace name template sandbox uid mcp_session status ready message started_from "
                       "ready_seconds created_unix last_used_unix expires_unix has_shutdown shutdown_after_seconds"),
        MSG_JSON_FIELD("labels", "labels", .sub = &label_map),
        MSG_JSON_FIELD("pod_labels", "pod_labels", .sub = &label_map),
        MSG_JSON_FIELD("pod_annotations", "pod_annotations", .sub = &label_map));

int ctl_set_label(Args *a, const char *arg) {
        const char *eq = strchr(arg, '=');

        if (!eq || eq == arg)
                return usage_error("invalid --label '%s': expected KEY=VALUE", arg);
        if (a->n_labels >= CTL_LABELS_MAX)
                return usage_error("at most %u --label options", CTL_LABELS_MAX);
        a->labels[a->n_labels++] = arg;
        return EXIT_OK;
}

int ctl_build_template_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_TEMPLATE_LIST, &sbx__template_list__descriptor);
        req->expect = SBX__REPLY__BODY_TEMPLATE_LIST;
        return EXIT_OK;
}

static void shutdown_text(bool has, uint32_t s, char *buf, size_t size) {
        if (has)
                snprintf(buf, size, "%" PRIu32 " s", s);
        else
                snprintf(buf, size, "never");
}

int ctl_print_template_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "NAME", "WARM", "READY", "CLAIMS", "MEMORY", "PIDS", "SHUTDOWN", "SOURCE" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__TemplateListReply *l = reply->template_list;

        if (a->json)
                return print_json(msg_json_array(&template_map, (void *const *) l->templates, l->n_templates, CTL_TEXT));
        for (size_t i = 0; i < l->n_templates; i++) {
                const Sbx__TemplateInfo *x = l->templates[i];
                char warm[16], ready[16], claims[16], memory[24], pids[16], shutdown[24];

                snprintf(warm, sizeof(warm), "%" PRIu32, x->warm);
                snprintf(ready, sizeof(ready), "%" PRIu32, x->warm_ready);
                snprintf(claims, sizeof(claims), "%" PRIu32, x->claims);
                format_size(x->memory_bytes, memory, sizeof(memory));
                snprintf(pids, sizeof(pids), "%" PRIu32, x->pids_max);
                shutdown_text(x->has_shutdown, x->shutdown_after_seconds, shutdown, sizeof(shutdown));
                table_add(&t, x->name, warm, ready, claims, memory, pids, shutdown, x->source[0] ? x->source : "(empty)");
        }
        return table_print(&t);
}

int ctl_print_template_show(const Args *a, const Sbx__Reply *reply) {
        const Sbx__TemplateListReply *l = reply->template_list;
        char size[24], shutdown[24];

        for (size_t i = 0; i < l->n_templates; i++) {
                const Sbx__TemplateInfo *x = l->templates[i];

                if (strcmp(x->name, a->name) != 0)
                        continue;
                if (a->json)
                        return print_json(msg_json_object(&template_map, x, CTL_TEXT));
                fputs("name: ", stdout);
                fputs_safe(x->name, stdout);
                fputs("\nimage: ", stdout);
                fputs_safe(x->image, stdout);
                fputs("\nsource: ", stdout);
                fputs_safe(x->source[0] ? x->source : "(an empty workspace)", stdout);
                format_size(x->memory_bytes, size, sizeof(size));
                printf("\nmemory: %s\npids: %" PRIu32 "\ncpu weight: %" PRIu32 "\n", size, x->pids_max, x->cpu_weight);
                format_size(x->disk_bytes, size, sizeof(size));
                shutdown_text(x->has_shutdown, x->shutdown_after_seconds, shutdown, sizeof(shutdown));
                printf("disk: %s\negress: ", size);
                fputs_safe(x->egress, stdout);
                printf("\nwarm: %" PRIu32 " kept, %" PRIu32 " ready now\nshutdown after: %s\nclaims: %" PRIu32 "\n",
                       x->warm, x->warm_ready, shutdown, x->claims);
                if (x->warm_failures > 0) {
                        printf("warm claims failing: %" PRIu32 " in a row, next try in %" PRId64 " s\nlast error: ",
                               x->warm_failures, MAX(x->warm_retry_unix - (int64_t) time(NULL), (int64_t) 0));
                        fputs_safe(x->warm_error, stdout);
                        fputc('\n', stdout);
                }
                return EXIT_OK;
        }
        fprintf(stderr, "%s: no template '", program);
        fputs_safe(a->name, stderr);
        fprintf(stderr, "'; 'sbxctl template list' shows them\n");
        return EXIT_NOT_FOUND;
}

int ctl_build_claim_list(Args *a, CtlRequest *req) {
        Sbx__ClaimList *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_LIST, &sbx__claim_list__descriptor);

        for (size_t i = 0; i < a->n_labels; i++) {
                const char *eq = strchr(a->labels[i], '=');

                sbx__label__init(&a->label_msgs[i]);
                snprintf(a->label_keys[i], sizeof(a->label_keys[i]), "%.*s", (int) (eq - a->labels[i]), a->labels[i]);
                a->label_msgs[i].key = a->label_keys[i];
                a->label_msgs[i].value = (char *) eq + 1;
                a->label_ptrs[i] = &a->label_msgs[i];
        }
        m->n_labels = a->n_labels;
        m->labels = a->label_ptrs;
        req->expect = SBX__REPLY__BODY_CLAIM_LIST;
        return EXIT_OK;
}

static void expiry_text(const Sbx__ClaimInfo *c, char *buf, size_t size) {
        if (c->expires_unix > 0)
                format_time(c->expires_unix, buf, size);
        else
                snprintf(buf, size, "never");
}

int ctl_print_claim_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "NAMESPACE", "NAME", "TEMPLATE", "UID", "STATUS", "EXPIRES", "SANDBOX" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__ClaimListReply *l = reply->claim_list;

        if (a->json)
                return print_json(msg_json_array(&claim_map, (void *const *) l->claims, l->n_claims, CTL_TEXT));
        for (size_t i = 0; i < l->n_claims; i++) {
                const Sbx__ClaimInfo *c = l->claims[i];
                char uid[16], expires[32];

                snprintf(uid, sizeof(uid), "%" PRIu32, c->uid);
                expiry_text(c, expires, sizeof(expires));
                table_add(&t, c->namespace_, c->name, c->template_, uid, c->status, expires, c->sandbox);
        }
        return table_print(&t);
}

/* NAMESPACE/NAME or NAME into ref (borrowing a->name; a->claim_ns holds the namespace). */
static int claim_ref_of(Args *a, Sbx__ClaimRef *ref) {
        const char *slash = strchr(a->name, '/');

        sbx__claim_ref__init(ref);
        if (slash) {
                if ((size_t) (slash - a->name) > SBX_CLAIM_NAME_MAX)
                        return usage_error("invalid claim '%s': the namespace has more than %u characters", a->name,
                                           SBX_CLAIM_NAME_MAX);
                snprintf(a->claim_ns, sizeof(a->claim_ns), "%.*s", (int) (slash - a->name), a->name);
                ref->namespace_ = a->claim_ns;
                ref->name = (char *) slash + 1;
        } else {
                ref->namespace_ = (char *) "default";
                ref->name = (char *) a->name;
        }
        return EXIT_OK;
}

int ctl_build_claim_show(Args *a, CtlRequest *req) {
        Sbx__ClaimRef *ref = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_STATUS, &sbx__claim_ref__descriptor);

        req->expect = SBX__REPLY__BODY_CLAIM;
        return claim_ref_of(a, ref);
}

static void print_labels(const char *what, Sbx__Label **l, size_t n) {
        for (size_t i = 0; i < n; i++) {
                printf("%s: ", what);
                fputs_safe(l[i]->key, stdout);
                putchar('=');
                fputs_safe(l[i]->value, stdout);
                putchar('\n');
        }
}

int ctl_print_claim_show(const Args *a, const Sbx__Reply *reply) {
        const Sbx__ClaimInfo *c = reply->claim;
        char created[32], used[32], expires[32];

        if (strcmp(c->status, "SandboxNotFound") == 0) {
                fputs_safe(c->message, stderr);
                fputc('\n', stderr);
                return EXIT_NOT_FOUND;
        }
        if (a->json)
                return print_json(msg_json_object(&claim_map, c, CTL_TEXT));
        format_time(c->created_unix, created, sizeof(created));
        format_time(c->last_used_unix, used, sizeof(used));
        expiry_text(c, expires, sizeof(expires));
        fputs("namespace: ", stdout);
        fputs_safe(c->namespace_, stdout);
        fputs("\nname: ", stdout);
        fputs_safe(c->name, stdout);
        fputs("\ntemplate: ", stdout);
        fputs_safe(c->template_, stdout);
        fputs("\nsandbox: ", stdout);
        fputs_safe(c->sandbox, stdout);
        printf("\nuid: %" PRIu32 "\nmcp session: ", c->uid);
        fputs_safe(c->mcp_session, stdout);
        fputs("\nstatus: ", stdout);
        fputs_safe(c->status, stdout);
        printf("\nstarted from: %s (%.3f s)\ncreated: %s\nlast used: %s\nexpires: %s\n", c->started_from,
               c->ready_seconds, created, used, expires);
        print_labels("label", c->labels, c->n_labels);
        print_labels("pod label", c->pod_labels, c->n_pod_labels);
        print_labels("pod annotation", c->pod_annotations, c->n_pod_annotations);
        return EXIT_OK;
}

int ctl_build_claim_delete(Args *a, CtlRequest *req) {
        Sbx__ClaimRef *ref = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_CLAIM_DELETE, &sbx__claim_ref__descriptor);

        return claim_ref_of(a, ref);
}

int ctl_print_claim_delete(const Args *a, const Sbx__Reply *reply) {
        fputs("deleted claim ", stdout);
        fputs_safe(a->name, stdout);
        putchar('\n');
        return EXIT_OK;
}
