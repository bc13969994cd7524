/* UTF-8 validity and repair for text that arrives as bytes (transcripts,
 * file contents, server messages) on its way into JSON strings, which must
 * be valid UTF-8. Non-logging. */
#pragma once

#include <stddef.h>

/* Length of the longest valid UTF-8 prefix of p[0..len): no overlong forms,
 * no surrogates, nothing above U+10FFFF. ASCII is taken 8 bytes at a time. */
size_t utf8_valid_prefix(const void *p, size_t len);

/* Copy bytes to valid UTF-8, each invalid byte becoming U+FFFD; NUL bytes
 * are kept. *ret_str is NUL-terminated, *ret_len excludes that NUL. Returns
 * 0 or -ENOMEM. */
int utf8_sanitize(const void *data, size_t len, char **ret_str, size_t *ret_len);
