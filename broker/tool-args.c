/* The argument checks the tools share, beyond what their input schemas say,
 * and the building of their requests for sbxd. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx-limits.h"
#include "tool-set.h"
#include "wire.h"

int tool_arg_invalid(char **ret_error, const char *fmt, ...) {
        _cleanup_free_ char *why = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&why, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (asprintf(ret_error, "invalid arguments: %s", why) < 0)
                return -ENOMEM;
        return -EINVAL;
}

int tool_arg_string(json_t *args, const char *name, size_t min_len, size_t max_len, const char **ret,
                    size_t *ret_len, char **ret_error) {
        json_t *v = json_object_get(args, name);
        const char *s;
        size_t len;

        if (!v) {
                *ret = NULL;
                if (ret_len)
                        *ret_len = 0;
                return 0;
        }
        s = json_string_value(v);
        len = json_string_length(v);
        if (len < min_len)
                return tool_arg_invalid(ret_error, "%s: must not be empty", name);
        if (len > max_len)
                return tool_arg_invalid(ret_error, "%s: must be at most %zu bytes", name, max_len);
        if (memchr(s, '\0', len))
                return tool_arg_invalid(ret_error, "%s: must not contain NUL characters", name);
        *ret = s;
        if (ret_len)
                *ret_len = len;
        return 0;
}

int tool_arg_id(json_t *args, const char *name, const char **ret, char **ret_error) {
        return tool_arg_string(args, name, 1, SBX_NAME_MAX, ret, NULL, ret_error);
}

int tool_arg_path(json_t *args, const char **ret, char **ret_error) {
        return tool_arg_string(args, "path", 1, SBX_PATH_MAX, ret, NULL, ret_error);
}

/* "" is taken as omitted (the snapshot, or an automatic session). */
int tool_arg_session(json_t *args, const char **ret, char **ret_error) {
        int r = tool_arg_string(args, "workspace_session_id", 0, SBX_NAME_MAX, ret, NULL, ret_error);

        if (r >= 0 && !*ret)
                *ret = "";
        return r;
}

bool tool_arg_int(json_t *args, const char *name, uint64_t *ret) {
        json_t *v = json_object_get(args, name);

        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return false;
        *ret = (uint64_t) json_integer_value(v);
        return true;
}

const char *tool_arg_str(const json_t *args, const char *key) {
        const char *s = json_string_value(json_object_get(args, key));
        return s ? s : "";
}

void tool_request_done(ToolRequest *req) {
        if (!req)
                return;
        req->fd = safe_close(req->fd);
        for (; req->n_more_fds > 0; req->n_more_fds--)
                (void) safe_close(req->more_fds[req->n_more_fds - 1]);
        free(req->heap);
        req->heap = NULL;
}

void *tool_request_body(ToolRequest *req, Sbx__MsgType type, const ProtobufCMessageDescriptor *desc) {
        return wire_msg_body(&req->msg, type, desc, req->body.bytes, sizeof(req->body));
}

int tool_prepare_strings(json_t *args, ToolRequest *req, char **ret_error, const ProtobufCMessageDescriptor *desc,
                         Sbx__MsgType type, const ToolArgField *fields, size_t n) {
        char *m = tool_request_body(req, type, desc);

        for (size_t i = 0; i < n; i++) {
                const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(desc, fields[i].field);
                const char *v;
                int r;

                assert(f && f->type == PROTOBUF_C_TYPE_STRING);
                r = fields[i].kind == TOOL_ARG_PATH      ? tool_arg_path(args, &v, ret_error)
                    : fields[i].kind == TOOL_ARG_SESSION ? tool_arg_session(args, &v, ret_error)
                                                         : tool_arg_id(args, fields[i].arg, &v, ret_error);
                if (r < 0)
                        return r;
                *(const char **) (m + f->offset) = v;
        }
        return 0;
}
