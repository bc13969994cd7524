/* sbxctl's rows for sbx-gateway's bearer tokens (issue 20): token create
 * prints the secret alone on stdout, the one time it is shown (--json:
 * {id, name, token}); token list never shows a secret, sbxd has none. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg-json.h"
#include "sbx-limits.h"
#include "sbxctl.h"
#include "tools.h"

static const MsgJsonMap token_map = MSG_JSON_MAP_INIT(sbx__token_info__descriptor,
        MSG_JSON_NAMES("id name owner_uid sets created_unix expires_unix expired"));

int ctl_set_token_name(Args *a, const char *arg) {
        if (arg[0] == '\0' || strlen(arg) > SBX_TOKEN_NAME_MAX)
                return usage_error("invalid --name '%s': 1 to %u bytes", arg, SBX_TOKEN_NAME_MAX);
        a->token_name = arg;
        return EXIT_OK;
}

/* 30s, 10m, 2h, 7d: a positive number and one unit. */
int ctl_set_expires(Args *a, const char *arg) {
        static const struct { char unit; int64_t seconds; } units[] = {
                { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 },
        };
        char *end;
        long long n;

        n = strtoll(arg, &end, 10);
        if (arg[0] >= '1' && arg[0] <= '9' && end[0] && !end[1])
                for (size_t i = 0; i < ELEMENTSOF(units); i++)
                        if (end[0] == units[i].unit && n <= SBX_TOKEN_EXPIRES_MAX_S / units[i].seconds) {
                                a->expires_seconds = n * units[i].seconds;
                                return EXIT_OK;
                        }
        return usage_error("invalid --expires '%s': expected a number and s, m, h or d (30s, 10m, 2h, 7d), "
                           "at most %lld days", arg, SBX_TOKEN_EXPIRES_MAX_S / 86400);
}

/* The sets as sandbox-mcp --set takes them (broker/tools.h): known names,
 * and no two of them with the same tool, which no session could list. */
int ctl_set_sets(Args *a, const char *arg) {
        const char *bad = NULL, *tool, *x, *y;
        unsigned sets;

        if (arg[0] == '\0' || strlen(arg) > SBX_TOKEN_SETS_MAX)
                return usage_error("invalid --sets '%s': a comma-separated list of tool sets", arg);
        if (tool_sets_parse(arg, &sets, &bad) < 0)
                return usage_error("unknown tool set '%.*s' in --sets (known: %s)", (int) strcspn(bad, ","), bad,
                                   TOOL_SETS_KNOWN);
        if (tool_sets_conflict(sets, &tool, &x, &y) < 0)
                return usage_error("--sets: the sets %s and %s both define the tool %s; a token may have one of them",
                                   x, y, tool);
        a->sets = arg;
        return EXIT_OK;
}

int ctl_build_token_create(Args *a, CtlRequest *req) {
        Sbx__TokenCreate *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_CREATE,
                                               &sbx__token_create__descriptor);

        if (!a->has_owner)
                return usage_error("token create needs --owner USER");
        m->owner_uid = a->owner_uid;
        m->name = (char *) (a->token_name ?: "");
        m->expires_seconds = a->expires_seconds;
        m->sets = (char *) (a->sets ?: "");
        req->expect = SBX__REPLY__BODY_TOKEN;
        return EXIT_OK;
}

int ctl_print_token_create(const Args *a, const Sbx__Reply *reply) {
        const Sbx__TokenInfo *t = reply->token;

        if (a->json)
                return print_json(json_pack("{s:s, s:s, s:s}", "id", t->id, "name", t->name, "token", t->token));
        fputs_safe(t->token, stdout);
        putchar('\n');
        return EXIT_OK;
}

int ctl_build_token_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_LIST, &sbx__token_list__descriptor);
        req->expect = SBX__REPLY__BODY_TOKEN_LIST;
        return EXIT_OK;
}

int ctl_print_token_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "ID", "NAME", "OWNER", "SETS", "CREATED", "EXPIRES" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__TokenListReply *l = reply->token_list;

        if (a->json)
                return print_json(msg_json_array(&token_map, (void *const *) l->tokens, l->n_tokens,
                                                 MSG_JSON_TEXT_ASCII));
        for (size_t i = 0; i < l->n_tokens; i++) {
                const Sbx__TokenInfo *x = l->tokens[i];
                char owner[16], created[32], expires[48];

                snprintf(owner, sizeof(owner), "%" PRIu32, x->owner_uid);
                format_time(x->created_unix, created, sizeof(created));
                if (x->expires_unix == 0)
                        snprintf(expires, sizeof(expires), "never");
                else
                        format_time(x->expires_unix, expires, sizeof(expires));
                if (x->expired)
                        strncat(expires, " (expired)", sizeof(expires) - strlen(expires) - 1);
                table_add(&t, x->id, x->name, owner, x->sets[0] ? x->sets : "(all)", created, expires);
        }
        return table_print(&t);
}

int ctl_build_token_revoke(Args *a, CtlRequest *req) {
        Sbx__TokenRef *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_TOKEN_REVOKE, &sbx__token_ref__descriptor);

        m->id_or_name = (char *) a->name;
        return EXIT_OK;
}

int ctl_print_token_revoke(const Args *a, const Sbx__Reply *reply) {
        fputs("revoked token ", stdout);
        fputs_safe(a->name, stdout);
        putchar('\n');
        return EXIT_OK;
}
