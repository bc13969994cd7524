#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "msg-json.h"
#include "utf8.h"

#define _cleanup_json_ _cleanup_(json_decrefp)

static json_t *string_replace(const char *s, size_t len) {
        _cleanup_free_ char *clean = NULL;
        size_t n;

        if (utf8_valid_prefix(s, len) == len)
                return json_stringn_nocheck(s, len);
        if (utf8_sanitize(s, len, &clean, &n) < 0)
                return NULL;
        return json_stringn_nocheck(clean, n);
}

static json_t *string_ascii(const char *s, size_t len) {
        _cleanup_free_ char *copy = malloc(len + 1);
        json_t *j;

        if (!copy)
                return NULL;
        for (size_t i = 0; i < len; i++)
                copy[i] = s[i] == '\0' ? '?' : s[i];
        copy[len] = '\0';
        j = json_stringn(copy, len);    /* jansson checks the UTF-8 */
        if (j)
                return j;
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) copy[i] >= 0x80)
                        copy[i] = '?';
        return json_stringn(copy, len);
}

json_t *msg_json_string(const char *s, size_t len, MsgJsonText text) {
        if (!s)
                return json_string("");
        return text == MSG_JSON_TEXT_ASCII ? string_ascii(s, len) : string_replace(s, len);
}

/* The field of map's message named by the len bytes at name. */
static const ProtobufCFieldDescriptor *field_of(const MsgJsonMap *map, const char *name, size_t len) {
        for (unsigned i = 0; i < map->desc->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &map->desc->fields[i];

                if (strlen(f->name) == len && memcmp(f->name, name, len) == 0)
                        return f;
        }
        assert(!"a map names a field its message does not have");
        return NULL;
}

/* Whether f is X with a bool has_X beside it that is false. */
static bool absent(const MsgJsonMap *map, const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m) {
        for (unsigned i = 0; i < map->desc->n_fields; i++) {
                const ProtobufCFieldDescriptor *h = &map->desc->fields[i];

                if (h->type == PROTOBUF_C_TYPE_BOOL && strncmp(h->name, "has_", 4) == 0 &&
                    strcmp(h->name + 4, f->name) == 0)
                        return !*(const protobuf_c_boolean *) ((const char *) m + h->offset);
        }
        return false;
}

/* An integer field as int64 (uint64 above INT64_MAX as INT64_MAX). */
static int64_t integer_of(const ProtobufCFieldDescriptor *f, const void *p) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_ENUM:
                return *(const int32_t *) p;
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
                return *(const uint32_t *) p;
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
                return *(const int64_t *) p;
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                return (int64_t) MIN(*(const uint64_t *) p, (uint64_t) INT64_MAX);
        default:
                assert(!"not an integer field");
                return 0;
        }
}

/* The JSON of one value of field f at p. *ret_empty says whether it is the
 * empty value ("", 0, false, absent), for the flags; the caller decides. */
static json_t *value_of(const MsgJsonField *mf, const ProtobufCFieldDescriptor *f, const void *p, MsgJsonText text,
                        bool *ret_empty) {
        switch (f->type) {
        case PROTOBUF_C_TYPE_STRING: {
                const char *s = *(char *const *) p;

                *ret_empty = !s || !*s;
                if (*ret_empty && mf->fallback)
                        return json_string(mf->fallback);
                return msg_json_string(s, s ? strlen(s) : 0, text);
        }
        case PROTOBUF_C_TYPE_BYTES: {
                const ProtobufCBinaryData *b = p;

                *ret_empty = b->len == 0;
                return msg_json_string((const char *) b->data, b->len, text);
        }
        case PROTOBUF_C_TYPE_BOOL:
                *ret_empty = !*(const protobuf_c_boolean *) p;
                return json_boolean(!*ret_empty);
        case PROTOBUF_C_TYPE_DOUBLE: {
                double d = *(const double *) p;

                *ret_empty = d == 0;
                return json_real(isfinite(d) ? d : 0.0);
        }
        case PROTOBUF_C_TYPE_MESSAGE: {
                const ProtobufCMessage *sub = *(ProtobufCMessage *const *) p;

                *ret_empty = !sub;
                return sub ? msg_json_object(mf->sub, sub, text) : json_null();
        }
        default: {
                int64_t v = integer_of(f, p);

                *ret_empty = v == 0;
                if (mf->flags & MSG_JSON_USEC_AS_SECONDS)
                        return json_real((double) v / 1e6);
                return json_integer((json_int_t) v);
        }
        }
}

/* A repeated field as an array; *ret_empty when it has no item. */
static json_t *array_of(const MsgJsonField *mf, const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m,
                        MsgJsonText text, bool *ret_empty) {
        size_t n = *(const size_t *) ((const char *) m + f->quantifier_offset);
        void *const *items = *(void *const *const *) ((const char *) m + f->offset);
        _cleanup_json_ json_t *a = NULL;

        /* Items of pointer size only: strings and messages. */
        assert(f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE);
        *ret_empty = n == 0;
        if (f->type == PROTOBUF_C_TYPE_MESSAGE)
                return msg_json_array(mf->sub, items, n, text);
        a = json_array();
        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                bool empty;

                if (json_array_append_new(a, value_of(mf, f, &items[i], text, &empty)) < 0)
                        return NULL;
        }
        return TAKE_PTR(a);
}

/* Set key to the JSON of field f of m, as mf says. */
static int append_field(json_t *o, const MsgJsonMap *map, const MsgJsonField *mf, const char *key,
                        const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m, MsgJsonText text) {
        _cleanup_json_ json_t *v = NULL;
        bool empty;

        if (f->label == PROTOBUF_C_LABEL_REPEATED)
                v = array_of(mf, f, m, text, &empty);
        else
                v = value_of(mf, f, (const char *) m + f->offset, text, &empty);
        if (!v)
                return -ENOMEM;
        if (empty && (mf->flags & MSG_JSON_OMIT_EMPTY))
                return 0;
        if ((empty && (mf->flags & MSG_JSON_NULL_EMPTY)) || absent(map, f, m))
                json_decref(TAKE_PTR(v));
        return json_object_set_new(o, key, v ? TAKE_PTR(v) : json_null()) < 0 ? -ENOMEM : 0;
}

int msg_json_append(json_t *o, const MsgJsonMap *map, const void *msg, MsgJsonText text) {
        const ProtobufCMessage *m = msg;
        int r;

        assert(m->descriptor == map->desc);
        for (size_t i = 0; i < map->n_fields; i++) {
                const MsgJsonField *mf = &map->fields[i];
                const char *p = mf->field;

                if (mf->key) {
                        r = append_field(o, map, mf, mf->key, field_of(map, p, strlen(p)), m, text);
                        if (r < 0)
                                return r;
                        continue;
                }
                while (*p) {
                        size_t n = strcspn(p, " ");
                        const ProtobufCFieldDescriptor *f = field_of(map, p, n);

                        r = append_field(o, map, mf, f->name, f, m, text);
                        if (r < 0)
                                return r;
                        p += n + strspn(p + n, " ");
                }
        }
        return 0;
}

json_t *msg_json_object(const MsgJsonMap *map, const void *msg, MsgJsonText text) {
        _cleanup_json_ json_t *o = json_object();

        if (!o || msg_json_append(o, map, msg, text) < 0)
                return NULL;
        return TAKE_PTR(o);
}

json_t *msg_json_array(const MsgJsonMap *map, void *const *items, size_t n, MsgJsonText text) {
        _cleanup_json_ json_t *a = json_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (json_array_append_new(a, msg_json_object(map, items[i], text)) < 0)
                        return NULL;
        return TAKE_PTR(a);
}
