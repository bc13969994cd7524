/* sbxctl's rows for the boxes set's secrets and versions (issue 21): secret set NAME
 * reads the value from stdin (never from argv, where ps(1) shows it to
 * everyone; one trailing newline dropped; from a terminal: one line, not
 * echoed), secret list shows names and sizes, never values, secret rm NAME.
 * Each user manages their own; root names another with --owner. version
 * list shows the versions (sandbox_publish_version), version rm ID removes one. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "fd-util.h"
#include "msg-json.h"
#include "sbx-limits.h"
#include "sbxctl.h"

static const MsgJsonMap secret_map = MSG_JSON_MAP_INIT(sbx__secret_info__descriptor,
        MSG_JSON_NAMES("name owner_uid bytes updated_unix"));

/* The value, one byte more than allowed so that too long is seen. */
static uint8_t secret_value[SBX_SECRET_VALUE_MAX + 2];

/* A terminal: one line, not echoed. Else all of stdin. The length read, or -errno. */
static ssize_t read_value(void) {
        struct termios old, quiet;
        bool tty = tcgetattr(STDIN_FILENO, &old) == 0;
        size_t n = 0;
        ssize_t k;

        if (tty) {
                quiet = old;
                quiet.c_lflag &= ~(tcflag_t) ECHO;
                fputs("value (not echoed, then Enter): ", stderr);
                (void) tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
        }
        while (n < sizeof(secret_value) && (k = read(STDIN_FILENO, secret_value + n, sizeof(secret_value) - n)) != 0) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        break;
                n += (size_t) k;
                if (tty && secret_value[n - 1] == '\n')
                        break;
        }
        if (tty) {
                (void) tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
                fputc('\n', stderr);
        }
        return k < 0 ? -errno : (ssize_t) n;
}

int ctl_build_secret_set(Args *a, CtlRequest *req) {
        Sbx__SecretSet *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SECRET_SET, &sbx__secret_set__descriptor);
        ssize_t n = read_value();

        if (n < 0)
                return usage_error("cannot read the value from stdin: %s", strerror((int) -n));
        if (n > 0 && secret_value[n - 1] == '\n')
                n--;
        if ((size_t) n > SBX_SECRET_VALUE_MAX)
                return usage_error("the value on stdin is longer than %u bytes", SBX_SECRET_VALUE_MAX);
        m->name = (char *) a->name;
        m->value = (ProtobufCBinaryData) { (size_t) n, secret_value };
        m->has_owner = a->has_owner;
        m->owner_uid = a->owner_uid;
        return EXIT_OK;
}

int ctl_print_secret_set(const Args *a, const Sbx__Reply *reply) {
        explicit_bzero(secret_value, sizeof(secret_value));
        fputs("set secret ", stdout);
        fputs_safe(a->name, stdout);
        putchar('\n');
        return EXIT_OK;
}

int ctl_build_secret_list(Args *a, CtlRequest *req) {
        Sbx__SecretList *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SECRET_LIST,
                                              &sbx__secret_list__descriptor);

        m->has_owner = a->has_owner;
        m->owner_uid = a->owner_uid;
        req->expect = SBX__REPLY__BODY_SECRET_LIST;
        return EXIT_OK;
}

int ctl_print_secret_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "NAME", "OWNER", "BYTES", "UPDATED" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__SecretListReply *l = reply->secret_list;

        if (a->json)
                return print_json(msg_json_array(&secret_map, (void *const *) l->secrets, l->n_secrets,
                                                 MSG_JSON_TEXT_ASCII));
        for (size_t i = 0; i < l->n_secrets; i++) {
                const Sbx__SecretInfo *x = l->secrets[i];
                char owner[16], bytes[16], updated[32];

                snprintf(owner, sizeof(owner), "%" PRIu32, x->owner_uid);
                snprintf(bytes, sizeof(bytes), "%" PRIu32, x->bytes);
                format_time(x->updated_unix, updated, sizeof(updated));
                table_add(&t, x->name, owner, bytes, updated);
        }
        return table_print(&t);
}

int ctl_build_secret_rm(Args *a, CtlRequest *req) {
        Sbx__SecretSet *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SECRET_SET, &sbx__secret_set__descriptor);

        m->name = (char *) a->name;
        m->remove = true;
        m->has_owner = a->has_owner;
        m->owner_uid = a->owner_uid;
        return EXIT_OK;
}

int ctl_print_secret_rm(const Args *a, const Sbx__Reply *reply) {
        fputs("removed secret ", stdout);
        fputs_safe(a->name, stdout);
        putchar('\n');
        return EXIT_OK;
}

/* ---- version list|rm (the boxes set's versions) ------------------------------------- */

static const MsgJsonMap version_map = MSG_JSON_MAP_INIT(sbx__version_info__descriptor,
        MSG_JSON_NAMES("id service label image git_sha note owner_uid created_unix box_image from_box layers"));

int ctl_build_version_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_VERSION_LIST, &sbx__version_list__descriptor);
        req->expect = SBX__REPLY__BODY_VERSION_LIST;
        return EXIT_OK;
}

int ctl_print_version_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "ID", "SERVICE", "LABEL", "FROM", "IMAGE", "OWNER", "CREATED" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__VersionListReply *l = reply->version_list;

        if (a->json)
                return print_json(msg_json_array(&version_map, (void *const *) l->versions, l->n_versions,
                                                 MSG_JSON_TEXT_ASCII));
        for (size_t i = 0; i < l->n_versions; i++) {
                const Sbx__VersionInfo *x = l->versions[i];
                char owner[16], created[32];

                snprintf(owner, sizeof(owner), "%" PRIu32, x->owner_uid);
                format_time(x->created_unix, created, sizeof(created));
                table_add(&t, x->id, x->service, x->label, x->from_box[0] ? x->from_box : "(image)", x->box_image,
                          owner, created);
        }
        return table_print(&t);
}

int ctl_build_version_rm(Args *a, CtlRequest *req) {
        Sbx__VersionRef *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_VERSION_RM, &sbx__version_ref__descriptor);

        m->id = (char *) a->name;
        return EXIT_OK;
}

int ctl_print_version_rm(const Args *a, const Sbx__Reply *reply) {
        fputs("removed version ", stdout);
        fputs_safe(a->name, stdout);
        putchar('\n');
        return EXIT_OK;
}
