/* How a byte is written inside a JSON string: the escapes of '"', '\\' and
 * the control characters, as sandbox-mcp writes them (broker/jsonwrite.c),
 * and the size a text takes once escaped. sbxd uses the size to end
 * transcript and file windows before their text exceeds the budget of one
 * tool result (SBX_RESULT_TEXT_BUDGET). Non-logging, no allocation. */
#pragma once

#include <stddef.h>

#define JSON_ESCAPE_MAX 6u      /* bytes of the longest escape of one byte (\u001F) */

/* The escape of each byte (NUL-terminated); NULL for bytes written as they are. */
extern const char *const json_escapes[0x100];

/* Bytes of buf[0..len) once escaped, without the surrounding quotes. */
size_t json_escaped_size(const char *buf, size_t len);
