/* sbxd's replies as JSON: the one converter from protobuf-c messages
 * (Publication, SandboxInfo, CommandInfo, ...) to jansson values, used by
 * sandbox-mcp for structuredContent and by sbxctl for --json. Each caller
 * keeps its own public contract as a table of fields (MsgJsonMap: which
 * protobuf field goes under which key, in which order, and what an empty
 * one becomes); the walking of messages, the integer ranges and the repair
 * of text that is not UTF-8 are done here once. Non-logging. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "sbx.pb-c.h"

typedef enum MsgJsonFlags {
        MSG_JSON_OMIT_EMPTY = 1u << 0,  /* no key for "", an empty repeated field or an absent message */
        MSG_JSON_NULL_EMPTY = 1u << 1,  /* null for "", for 0, or for an absent message (the default for messages) */
        MSG_JSON_USEC_AS_SECONDS = 1u << 2, /* an integer of microseconds written as seconds (a real) */
} MsgJsonFlags;

typedef struct MsgJsonMap MsgJsonMap;

/* A row of a map: one key of the JSON object and the protobuf field it
 * comes from, by name; or, with key NULL, several fields (space-separated
 * in field), each under its own name and without flags. Strings and bytes
 * become JSON strings, bools booleans, integers integers (uint64 above
 * INT64_MAX is written as INT64_MAX), doubles reals (a value that is not
 * finite as 0), messages objects (sub), repeated fields arrays. A field X
 * with a bool field has_X beside it (exit_code and has_exit_code: protobuf-c's
 * convention for optional values) is null unless has_X is true. */
typedef struct MsgJsonField {
        const char *key;
        const char *field;
        unsigned flags;                 /* MsgJsonFlags */
        const char *fallback;           /* written for an empty string */
        const MsgJsonMap *sub;          /* the fields of a message (or of each item of a repeated one) */
} MsgJsonField;

struct MsgJsonMap {
        const ProtobufCMessageDescriptor *desc;
        const MsgJsonField *fields;
        size_t n_fields;
};

/* One key: MSG_JSON_FIELD("key", "field"[, .flags = ..., .fallback = ..., .sub = ...]). */
#define MSG_JSON_FIELD(k, f, ...) { .key = (k), .field = (f), __VA_ARGS__ }
/* Fields under their own names: MSG_JSON_NAMES("path change"). */
#define MSG_JSON_NAMES(names) { .key = NULL, .field = (names) }

/* A map's initializer: MSG_JSON_MAP_INIT(sbx__publication__descriptor,
 *         MSG_JSON_FIELD("published", "published"), ...) */
#define MSG_JSON_MAP_INIT(descriptor, ...)                                              \
        {                                                                               \
                .desc = &(descriptor),                                                  \
                .fields = (const MsgJsonField[]) { __VA_ARGS__ },                       \
                .n_fields = sizeof((const MsgJsonField[]) { __VA_ARGS__ }) / sizeof(MsgJsonField), \
        }

/* How bytes that are not valid UTF-8 (and NUL bytes) become a JSON string. */
typedef enum MsgJsonText {
        MSG_JSON_TEXT_REPLACE,  /* each invalid byte becomes U+FFFD; NUL bytes are kept (sandbox-mcp) */
        MSG_JSON_TEXT_ASCII,    /* NUL bytes become '?'; if the rest is not valid UTF-8, so does every
                                 * byte >= 0x80 (sbxctl: what a terminal and jq show alike) */
} MsgJsonText;

/* A JSON string of len bytes at s (NULL: ""), repaired as text says; NULL on ENOMEM. */
json_t *msg_json_string(const char *s, size_t len, MsgJsonText text);

/* Set map's keys of the message msg (a protobuf-c message of map->desc) in the object o, in the map's order, after
 * what o holds already. Returns 0 or -ENOMEM. */
int msg_json_append(json_t *o, const MsgJsonMap *map, const void *msg, MsgJsonText text);

/* A new object of map's keys of msg; NULL on ENOMEM. */
json_t *msg_json_object(const MsgJsonMap *map, const void *msg, MsgJsonText text);

/* An array of n objects, one per message of items; NULL on ENOMEM. */
json_t *msg_json_array(const MsgJsonMap *map, void *const *items, size_t n, MsgJsonText text);
