#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "msg.h"
#include "sbx-limits.h"

/* The field of a oneof member: its pointer slot (offset) and the case (quantifier_offset). */
static void oneof_set(ProtobufCMessage *m, unsigned id, void *body) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(m->descriptor, id);

        assert(f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF));
        *(uint32_t *) ((char *) m + f->quantifier_offset) = id;
        *(void **) ((char *) m + f->offset) = body;
}

void msg_init(Sbx__Msg *m, Sbx__MsgType type, void *body) {
        int body_case = wire_body_case_for_type(type);

        assert(body_case > 0);
        *m = (Sbx__Msg) SBX__MSG__INIT;
        m->type = type;
        oneof_set(&m->base, (unsigned) body_case, body);
}

const ProtobufCMessage *msg_body(const Sbx__Msg *m) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(&sbx__msg__descriptor,
                                                                                    m->body_case);
        return f ? *(const ProtobufCMessage *const *) ((const char *) m + f->offset) : NULL;
}

static const void *field_at(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
        return (const char *) m + f->offset;
}

static const ProtobufCFieldDescriptor *scalar_field(const ProtobufCMessage *body, const char *field,
                                                    ProtobufCType type) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(body->descriptor, field);
        return f && f->type == type && f->label != PROTOBUF_C_LABEL_REPEATED ? f : NULL;
}

const char *msg_string(const ProtobufCMessage *body, const char *field) {
        const ProtobufCFieldDescriptor *f = scalar_field(body, field, PROTOBUF_C_TYPE_STRING);
        return f ? *(const char *const *) field_at(body, f) : NULL;
}

bool msg_uint32(const ProtobufCMessage *body, const char *field, uint32_t *ret) {
        const ProtobufCFieldDescriptor *f = scalar_field(body, field, PROTOBUF_C_TYPE_UINT32);

        if (!f)
                return false;
        *ret = *(const uint32_t *) field_at(body, f);
        return true;
}

int msg_reply_set(Sbx__Reply *reply, Sbx__Reply__BodyCase body_case, void *body) {
        oneof_set(&reply->base, body_case, body);
        return 0;
}

static const ProtobufCFieldDescriptor *check_field(const ProtobufCMessageDescriptor *d, const MsgCheck *c) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, c->field);
        const ProtobufCFieldDescriptor *has;

        if (!f || f->label == PROTOBUF_C_LABEL_REPEATED)
                return NULL;
        switch (c->kind) {
        case MSG_CHECK_NAME:
        case MSG_CHECK_ONE_OF:
                return f->type == PROTOBUF_C_TYPE_STRING && (c->kind != MSG_CHECK_ONE_OF || c->values) ? f : NULL;
        case MSG_CHECK_LENGTH:
                return f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES ? f : NULL;
        case MSG_CHECK_RANGE:
                if (c->present) {
                        has = protobuf_c_message_descriptor_get_field_by_name(d, c->present);
                        if (!has || has->type != PROTOBUF_C_TYPE_BOOL || has->label == PROTOBUF_C_LABEL_REPEATED)
                                return NULL;
                }
                return f->type == PROTOBUF_C_TYPE_UINT32 || f->type == PROTOBUF_C_TYPE_UINT64 ||
                                       f->type == PROTOBUF_C_TYPE_INT32
                               ? f
                               : NULL;
        }
        return NULL;
}

bool msg_checks_valid(const ProtobufCMessageDescriptor *d, const MsgCheck *checks) {
        for (const MsgCheck *c = checks; c && c->field; c++)
                if (!check_field(d, c))
                        return false;
        return true;
}

/* A number field's value; negative int32 values are below every minimum. */
static bool number_of(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, uint64_t *ret) {
        const void *p = field_at(m, f);

        switch (f->type) {
        case PROTOBUF_C_TYPE_UINT32: *ret = *(const uint32_t *) p; return true;
        case PROTOBUF_C_TYPE_UINT64: *ret = *(const uint64_t *) p; return true;
        case PROTOBUF_C_TYPE_INT32:
                *ret = (uint64_t) *(const int32_t *) p;
                return *(const int32_t *) p >= 0;
        default: return false;
        }
}

static int one_of_error(const MsgCheck *c, const char *name, const char *v, char *buf, size_t size) {
        size_t n = (size_t) snprintf(buf, size, "%s must be ", name);

        for (size_t i = 0; c->values[i] && n < size; i++)
                n += (size_t) snprintf(buf + n, size - n, "%s%s", i == 0 ? "" : c->values[i + 1] ? ", " : " or ",
                                       c->values[i]);
        if (n < size)
                snprintf(buf + n, size - n, ", not '%.40s'", v);
        return -EINVAL;
}

/* "NAME must be MIN to MAX UNIT", or "at most MAX" when there is no minimum. */
static int range_error(const MsgCheck *c, const char *name, const char *unit, char *buf, size_t size, int err) {
        if (c->min > 0)
                snprintf(buf, size, "%s must be %llu to %llu%s", name, (unsigned long long) c->min,
                         (unsigned long long) c->max, unit);
        else
                snprintf(buf, size, "%s must be at most %llu%s", name, (unsigned long long) c->max, unit);
        return err;
}

static int check_one(const ProtobufCMessage *m, const MsgCheck *c, char *buf, size_t size) {
        const ProtobufCFieldDescriptor *f = check_field(m->descriptor, c);
        const char *name = c->label ?: c->field;
        uint64_t v = 0;

        if (!f) {
                snprintf(buf, size, "%s: cannot check this field", name);
                return -EINVAL;
        }
        switch (c->kind) {
        case MSG_CHECK_NAME:
                if (strnlen(*(const char *const *) field_at(m, f), SBX_NAME_MAX + 1) <= SBX_NAME_MAX)
                        return 0;
                snprintf(buf, size, "no such %s (names are at most %u bytes)", name, SBX_NAME_MAX);
                return -ENOENT;
        case MSG_CHECK_LENGTH:
                v = f->type == PROTOBUF_C_TYPE_BYTES ? ((const ProtobufCBinaryData *) field_at(m, f))->len
                                                     : strnlen(*(const char *const *) field_at(m, f), c->max + 1);
                if (v >= c->min && v <= c->max)
                        return 0;
                return range_error(c, name, " bytes", buf, size, c->err ?: -EINVAL);
        case MSG_CHECK_RANGE:
                if (c->present &&
                    !*(const protobuf_c_boolean *) field_at(
                            m, protobuf_c_message_descriptor_get_field_by_name(m->descriptor, c->present)))
                        return 0;
                if (number_of(m, f, &v) && v >= c->min && v <= c->max)
                        return 0;
                return range_error(c, name, "", buf, size, -EINVAL);
        case MSG_CHECK_ONE_OF: {
                const char *s = *(const char *const *) field_at(m, f);
                if (s[0] == '\0')
                        return 0;
                for (size_t i = 0; c->values[i]; i++)
                        if (strcmp(s, c->values[i]) == 0)
                                return 0;
                return one_of_error(c, name, s, buf, size);
        }
        }
        return -EINVAL;
}

int msg_check(const ProtobufCMessage *body, const MsgCheck *checks, char *ret_error, size_t error_size) {
        for (const MsgCheck *c = checks; c && c->field; c++) {
                int r = check_one(body, c, ret_error, error_size);
                if (r < 0)
                        return r;
        }
        return 0;
}
