/* SHA-256 (FIPS 180-4), for checksums shown to callers (runtime_execute's
 * stdinSha256). Non-logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA256_HEX_SIZE 65              /* 64 hex digits and NUL */

/* The lower-case hex digest of data[0..len) into hex. */
void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_SIZE]);
