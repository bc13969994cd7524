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

/* -EMSGSIZE unless the text and a "\n" after it stay below max bytes. On
 * success ret_text is NUL-terminated with room for that "\n" before the NUL. */
int json_write(const json_t *v, size_t max, char **ret_text, size_t *ret_len);
