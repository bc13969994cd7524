/* sandbox_secrets, sandbox_publish_version and sandbox_versions of the
 * boxes set (shared/seeds/003; supervisor/core/secret.h, version.h), and
 * sandbox_start's version argument. Secrets are the caller's (their uid):
 * only names ever come back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx-limits.h"
#include "set-boxes-b.h"

#define P_TEXT(n, d) "\"" n "\": {\"type\": \"string\", \"maxLength\": 1024, \"description\": \"" d "\"}"

const char boxes_secrets_input[] =
        "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}";
const char boxes_secrets_output[] =
        "{\"type\": \"object\", \"properties\": {\"secrets\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, "
        "\"description\": \"The names of your secrets (sbxctl secret set NAME), never their values.\"}}, "
        "\"required\": [\"secrets\"]}";
const char boxes_publish_input[] =
        "{\"type\": \"object\", \"properties\": {"
        P_TEXT("service", "The service this is a version of.") ", "
        P_TEXT("label", "A name for the version, for example v1.2 or before-migration.") ", "
        P_TEXT("image", "A box id (box- and 12 hex digits): its /work now becomes the version; or box_image "
               "(sbxd.conf): the image alone, with an empty /work.") ", "
        P_TEXT("gitSha", "The commit it was built from, if any.") ", "
        P_TEXT("note", "Anything else worth knowing.")
        "}, \"required\": [\"image\"], \"additionalProperties\": false}";
const char boxes_publish_output[] =
        "{\"type\": \"object\", \"properties\": {\"versionId\": {\"type\": \"string\", \"description\": \"ver- and 12 "
        "hex digits: give it to sandbox_start as version.\"}}, \"required\": [\"versionId\"]}";
const char boxes_versions_output[] =
        "{\"type\": \"object\", \"properties\": {\"versions\": {\"type\": \"array\", \"items\": {\"type\": \"object\", "
        "\"properties\": {\"versionId\": {\"type\": \"string\"}, \"service\": {\"type\": \"string\"}, "
        "\"label\": {\"type\": \"string\"}, \"image\": {\"type\": \"string\"}, \"gitSha\": {\"type\": \"string\"}, "
        "\"note\": {\"type\": \"string\"}, \"boxImage\": {\"type\": \"string\"}, "
        "\"fromBox\": {\"type\": [\"string\", \"null\"]}, \"createdAt\": {\"type\": \"integer\", "
        "\"description\": \"Unix seconds.\"}}, \"required\": [\"versionId\", \"service\", \"label\", \"image\"]}}}, "
        "\"required\": [\"versions\"]}";
int boxes_prepare_secrets(json_t *args, ToolRequest *req, char **ret_error) {
        (void) tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SECRET_LIST, &sbx__secret_list__descriptor);
        return 0;
}

int boxes_render_secrets(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__SecretListReply *l = reply->secret_list;
        json_t *names;

        if (reply->body_case != SBX__REPLY__BODY_SECRET_LIST || !l)
                return -EBADMSG;
        names = json_array();
        for (size_t i = 0; names && i < l->n_secrets; i++)
                (void) json_array_append_new(names, json_string(l->secrets[i]->name));
        *ret = names ? json_pack("{s:o}", "secrets", names) : NULL;
        return *ret ? 0 : -ENOMEM;
}

int boxes_prepare_publish(json_t *args, ToolRequest *req, char **ret_error) {
        Sbx__VersionPublish *m = tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_VERSION_PUBLISH,
                                                   &sbx__version_publish__descriptor);
        static const struct { const char *arg; size_t offset; } fields[] = {
                { "service", offsetof(Sbx__VersionPublish, service) },
                { "label", offsetof(Sbx__VersionPublish, label) },
                { "image", offsetof(Sbx__VersionPublish, image) },
                { "gitSha", offsetof(Sbx__VersionPublish, git_sha) },
                { "note", offsetof(Sbx__VersionPublish, note) },
        };

        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                const char *v = NULL;
                int r = tool_arg_string(args, fields[i].arg, strcmp(fields[i].arg, "image") == 0, SBX_VERSION_TEXT_MAX,
                                        &v, NULL, ret_error);

                if (r < 0)
                        return r;
                *(char **) ((char *) m + fields[i].offset) = (char *) (v ?: "");
        }
        return 0;
}

int boxes_render_publish(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        if (reply->body_case != SBX__REPLY__BODY_VERSION || !reply->version)
                return -EBADMSG;
        *ret = json_pack("{s:s}", "versionId", reply->version->id);
        return *ret ? 0 : -ENOMEM;
}

int boxes_prepare_versions(json_t *args, ToolRequest *req, char **ret_error) {
        (void) tool_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_VERSION_LIST, &sbx__version_list__descriptor);
        return 0;
}

int boxes_render_versions(const Sbx__Reply *reply, const json_t *args, json_t **ret) {
        const Sbx__VersionListReply *l = reply->version_list;
        json_t *list;

        if (reply->body_case != SBX__REPLY__BODY_VERSION_LIST || !l)
                return -EBADMSG;
        list = json_array();
        for (size_t i = 0; list && i < l->n_versions; i++) {
                const Sbx__VersionInfo *v = l->versions[i];

                (void) json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:I}",
                        "versionId", v->id, "service", v->service, "label", v->label, "image", v->image,
                        "gitSha", v->git_sha, "note", v->note, "boxImage", v->box_image,
                        "fromBox", v->from_box[0] ? json_string(v->from_box) : json_null(),
                        "createdAt", (json_int_t) v->created_unix));
        }
        *ret = list ? json_pack("{s:o}", "versions", list) : NULL;
        return *ret ? 0 : -ENOMEM;
}

int boxes_prepare_start_version(json_t *args, Sbx__BoxStart *m, char **ret_error) {
        const char *v = NULL;
        int r = tool_arg_string(args, "version", 1, SBX_VERSION_ID_SIZE - 1, &v, NULL, ret_error);

        m->version = (char *) (v ?: "");
        return r;
}
