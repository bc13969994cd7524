/* Compact JSON text of a jansson value, the same text as
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(16)),
 * written in one pass with strings copied in runs. jansson's dump escapes
 * strings a code point at a time: 1-2 ms for a file_read reply, whose window
 * is written twice (structuredContent and its text block). Strings must be
 * valid UTF-8, as every jansson string not made with *_nocheck is; they are
 * written as they are, escaping only '"', '\\' and control characters.
 * Values nested deeper than SBX_JSON_DEPTH_MAX give -ELOOP (nothing
 * sandbox-mcp sends comes near). Non-logging; -errno on failure. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* -EMSGSIZE unless the text and a "\n" after it stay below max bytes. On
 * success ret_text is NUL-terminated with room for that "\n" before the NUL. */
int json_write(const json_t *v, size_t max, char **ret_text, size_t *ret_len);

/* A string of the text that is not in the tree: where json_write_parts
 * meets the string value at (by identity), it writes base64 of the size
 * bytes of fd instead (download_file's content), SBX_JSON_SPLICE_READ
 * bytes at a time. */
typedef struct JsonSplice {
        const json_t *at;
        int fd;
        uint64_t size;
} JsonSplice;

/* Takes the next part of the text; a negative return stops the writing. */
typedef int (*json_part_t)(void *userdata, const char *data, size_t len);

/* json_write with an optional splice, handing the text to part (if not
 * NULL) in parts of about SBX_JSON_WRITE_PART bytes as it is written;
 * ret_text is what remains after them. max counts the whole text. Once a
 * part is out, a failure is -EPIPE (-ENOMEM stays): the text is broken and
 * no other may be sent in its place. */
int json_write_parts(const json_t *v, const JsonSplice *splice, size_t max, json_part_t part, void *userdata,
                     char **ret_text, size_t *ret_len);
