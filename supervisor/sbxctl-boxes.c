/* sbxctl's rows for the boxes set (issue 21, core/box.h): box list|show|stop.
 * Root (without an MCP session) sees and stops every box. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "msg-json.h"
#include "sbxctl.h"

#define CTL_TEXT MSG_JSON_TEXT_ASCII

static const MsgJsonMap service_map = MSG_JSON_MAP_INIT(sbx__box_service__descriptor, MSG_JSON_NAMES("name port"));

static const MsgJsonMap box_map = MSG_JSON_MAP_INIT(sbx__box_info__descriptor,
        MSG_JSON_NAMES("id status started_from takeover_url interrupted_reason health external_base_url secrets "
                       "idle_timeout_min sandbox uid mcp_session created_unix last_used_unix image display "
                       "ready_seconds"),
        MSG_JSON_FIELD("services", "services", .sub = &service_map));

int ctl_build_box_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_BOX_LIST, &sbx__box_list__descriptor);
        req->expect = SBX__REPLY__BODY_BOX_LIST;
        return EXIT_OK;
}

int ctl_print_box_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "ID", "STATUS", "UID", "FROM", "LAST USED", "SANDBOX" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__BoxListReply *l = reply->box_list;

        if (a->json)
                return print_json(msg_json_array(&box_map, (void *const *) l->boxes, l->n_boxes, CTL_TEXT));
        for (size_t i = 0; i < l->n_boxes; i++) {
                const Sbx__BoxInfo *b = l->boxes[i];
                char uid[16], used[32];

                snprintf(uid, sizeof(uid), "%" PRIu32, b->uid);
                format_time(b->last_used_unix, used, sizeof(used));
                table_add(&t, b->id, b->status, uid, b->started_from, used, b->sandbox[0] ? b->sandbox : "-");
        }
        return table_print(&t);
}

static int box_ref(Args *a, CtlRequest *req, Sbx__MsgType type) {
        Sbx__BoxRef *ref = ctl_request_body(req, type, &sbx__box_ref__descriptor);

        ref->id = (char *) a->name;
        req->expect = SBX__REPLY__BODY_BOX;
        return EXIT_OK;
}

int ctl_build_box_show(Args *a, CtlRequest *req) {
        return box_ref(a, req, SBX__MSG_TYPE__MSG_CLIENT_BOX_STATUS);
}

int ctl_build_box_stop(Args *a, CtlRequest *req) {
        return box_ref(a, req, SBX__MSG_TYPE__MSG_CLIENT_BOX_STOP);
}

int ctl_print_box_show(const Args *a, const Sbx__Reply *reply) {
        const Sbx__BoxInfo *b = reply->box;
        char created[32], used[32];

        if (a->json)
                return print_json(msg_json_object(&box_map, b, CTL_TEXT));
        format_time(b->created_unix, created, sizeof(created));
        format_time(b->last_used_unix, used, sizeof(used));
        print_line("id", b->id);
        print_line("status", b->status);
        print_line("health", b->health);
        print_line("interrupted", b->interrupted_reason);
        print_line("sandbox", b->sandbox);
        print_line("image", b->image);
        print_line("display", b->display);
        printf("uid: %" PRIu32 "\nstarted from: %s (%.3f s)\nidle timeout: %g min\ncreated: %s\nlast used: %s\n",
               b->uid, b->started_from, b->ready_seconds, b->idle_timeout_min, created, used);
        print_line("takeover", b->takeover_url);
        print_line("external base url", b->external_base_url);
        for (size_t i = 0; i < b->n_services; i++) {
                fputs("service: ", stdout);
                fputs_safe(b->services[i]->name, stdout);
                printf(" port %" PRIu32 "\n", b->services[i]->port);
        }
        for (size_t i = 0; i < b->n_secrets; i++)
                print_line("secret", b->secrets[i]);
        return EXIT_OK;
}

int ctl_print_box_stop(const Args *a, const Sbx__Reply *reply) {
        fputs("stopped box ", stdout);
        fputs_safe(reply->box->id, stdout);
        putchar('\n');
        return EXIT_OK;
}
