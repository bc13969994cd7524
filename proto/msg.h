/* sbx.proto messages beyond framing: a message's type and body set in one
 * call (from wire.c's table of which body each type carries), a parsed
 * message's body, a reply's body, and the bounds of a body's fields checked
 * from data (a list of MsgCheck), so that a dispatcher checks every field
 * once at the boundary. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* *m = a message of type, whose body is body (the body wire.c names for type). */
void msg_init(Sbx__Msg *m, Sbx__MsgType type, void *body);
/* The body of a message that wire_parse accepted (its body matches its type). */
const ProtobufCMessage *msg_body(const Sbx__Msg *m);
/* The value of a string (or uint32) field of body named field; NULL (false) if it has none. */
const char *msg_string(const ProtobufCMessage *body, const char *field);
bool msg_uint32(const ProtobufCMessage *body, const char *field, uint32_t *ret);
/* The reply's body is body, of case body_case. Returns 0, for "return msg_reply_set(…)". */
int msg_reply_set(Sbx__Reply *reply, Sbx__Reply__BodyCase body_case, void *body);

typedef enum MsgCheckKind {
        MSG_CHECK_NAME,         /* string: a sandbox or session name, at most SBX_NAME_MAX bytes
                                   (-ENOENT: there is no such name) */
        MSG_CHECK_LENGTH,       /* string or bytes: min to max bytes */
        MSG_CHECK_RANGE,        /* uint32, uint64 or int32: min to max, if `present` (a bool field) is set */
        MSG_CHECK_ONE_OF,       /* string: empty (the default) or one of values */
} MsgCheckKind;

typedef struct MsgCheck {
        const char *field;              /* its name in the body; NULL ends a list */
        MsgCheckKind kind;
        uint64_t min, max;
        const char *present;            /* MSG_CHECK_RANGE: a bool field; unset, the value is not checked */
        const char *const *values;      /* MSG_CHECK_ONE_OF: NULL-terminated */
        const char *label;              /* the name in the message, if not field's */
        int err;                        /* MSG_CHECK_LENGTH: the error (-EINVAL if 0) */
} MsgCheck;

#define MSG_CHECK_NAME(f) { .field = (f), .kind = MSG_CHECK_NAME }
#define MSG_CHECK_LENGTH(f, lo, hi, e) { .field = (f), .kind = MSG_CHECK_LENGTH, .min = (lo), .max = (hi), .err = (e) }
#define MSG_CHECK_RANGE(f, has, lo, hi) { .field = (f), .kind = MSG_CHECK_RANGE, .present = (has), .min = (lo), .max = (hi) }
#define MSG_CHECK_ONE_OF(f, ...) \
        { .field = (f), .kind = MSG_CHECK_ONE_OF, .values = (const char *const[]) { __VA_ARGS__, NULL } }

/* Apply checks (ended by a NULL field; checks may be NULL) to body: 0, or the
 * first failure's -errno with ret_error saying which field and why. */
int msg_check(const ProtobufCMessage *body, const MsgCheck *checks, char *ret_error, size_t error_size);
/* Whether every check names a field of d whose type its kind applies to. */
bool msg_checks_valid(const ProtobufCMessageDescriptor *d, const MsgCheck *checks);
