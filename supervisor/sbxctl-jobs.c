/* sbxctl's rows for the script set (issue 18): job list|show|rm. Root sees
 * every user's jobs; another user sees their own. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "msg-json.h"
#include "sbxctl.h"

#define CTL_TEXT MSG_JSON_TEXT_ASCII

static const MsgJsonMap job_map = MSG_JSON_MAP_INIT(sbx__job_info__descriptor,
        MSG_JSON_NAMES("job_id status has_exit_code exit_code signal output_dir ended command image egress uid gid "
                       "started_unix ended_unix"));
static const MsgJsonMap job_detail_map = MSG_JSON_MAP_INIT(sbx__job_info__descriptor,
        MSG_JSON_NAMES("stdout_bytes stderr_bytes"),
        MSG_JSON_FIELD("egress_audit", "audit", .flags = MSG_JSON_OMIT_EMPTY, .sub = &ctl_egress_audit_map),
        MSG_JSON_FIELD("stdout", "stdout"),
        MSG_JSON_FIELD("stderr", "stderr"));

int ctl_build_job_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_JOB_LIST, &sbx__job_list__descriptor);
        req->expect = SBX__REPLY__BODY_JOB_LIST;
        return EXIT_OK;
}

static void exit_text(const Sbx__JobInfo *j, char *buf, size_t size) {
        if (j->ended && j->has_exit_code)
                snprintf(buf, size, "%" PRId32, j->exit_code);
        else
                snprintf(buf, size, "-");
}

int ctl_print_job_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "JOB", "UID", "STATUS", "EXIT", "IMAGE", "STARTED", "COMMAND" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__JobListReply *l = reply->job_list;

        if (a->json)
                return print_json(msg_json_array(&job_map, (void *const *) l->jobs, l->n_jobs, CTL_TEXT));
        for (size_t i = 0; i < l->n_jobs; i++) {
                const Sbx__JobInfo *j = l->jobs[i];
                char uid[16], code[16], started[32], cmd[48];

                snprintf(uid, sizeof(uid), "%" PRIu32, j->uid);
                exit_text(j, code, sizeof(code));
                format_time(j->started_unix, started, sizeof(started));
                snprintf(cmd, sizeof(cmd), "%.40s%s", j->command, strlen(j->command) > 40 ? "..." : "");
                table_add(&t, j->job_id, uid, j->status, code, j->image, started, cmd);
        }
        return table_print(&t);
}

int ctl_build_job_show(Args *a, CtlRequest *req) {
        Sbx__JobRef *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_JOB_STATUS, &sbx__job_ref__descriptor);

        m->job_id = (char *) a->name;
        req->expect = SBX__REPLY__BODY_JOB;
        return EXIT_OK;
}

int ctl_print_job_show(const Args *a, const Sbx__Reply *reply) {
        const Sbx__JobInfo *j = reply->job;
        char code[16], started[32], ended[32];

        if (a->json) {
                json_t *o = msg_json_object(&job_map, j, CTL_TEXT);
                if (o && msg_json_append(o, &job_detail_map, j, CTL_TEXT) < 0) {
                        json_decref(o);
                        o = NULL;
                }
                return print_json(o);
        }
        exit_text(j, code, sizeof(code));
        format_time(j->started_unix, started, sizeof(started));
        if (j->ended)
                format_time(j->ended_unix, ended, sizeof(ended));
        else
                snprintf(ended, sizeof(ended), "-");
        printf("job: %s\nuid: %" PRIu32 "\nstatus: ", j->job_id, j->uid);
        fputs_safe(j->status, stdout);
        printf("\nexit code: %s\nimage: ", code);
        fputs_safe(j->image, stdout);
        fputs("\negress: ", stdout);
        fputs_safe(j->egress, stdout);
        putchar('\n');
        if (j->audit)
                ctl_print_egress_audit(j->audit);
        fputs("command: ", stdout);
        fputs_safe(j->command, stdout);
        fputs("\noutput dir: ", stdout);
        fputs_safe(j->output_dir, stdout);
        printf("\nstarted: %s\nended: %s\n", started, ended);
        if (j->ended)
                printf("stdout.log: %" PRIu64 " bytes\nstderr.log: %" PRIu64 " bytes\n", j->stdout_bytes,
                       j->stderr_bytes);
        return EXIT_OK;
}

int ctl_build_job_rm(Args *a, CtlRequest *req) {
        Sbx__JobRef *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_JOB_RM, &sbx__job_ref__descriptor);

        m->job_id = (char *) a->name;
        return EXIT_OK;
}

int ctl_print_job_rm(const Args *a, const Sbx__Reply *reply) {
        fputs("removed job ", stdout);
        fputs_safe(a->name, stdout);
        fputs(" and its output directory\n", stdout);
        return EXIT_OK;
}
