/* Base64 (RFC 4648, standard alphabet, padded) for upload_file and
 * download_file's binary content. Decoding is strict: only the alphabet,
 * '=' padding at the end, and no other byte (line breaks included) is
 * accepted. Non-logging. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Bytes that len base64 characters decode to, or -EINVAL if len is not a
 * multiple of 4 or the padding is wrong. */
int64_t base64_decoded_size(const char *s, size_t len);
/* Decode s (len characters, a multiple of 4) into out, which has room for
 * base64_decoded_size bytes; returns that many, or -EINVAL with *ret_at the
 * offset of the first bad character. Works on any run of whole quads, so a
 * long text may be decoded piece by piece. */
int64_t base64_decode(const char *s, size_t len, uint8_t *out, size_t *ret_at);
/* Encode len bytes into out (room for 4 * ((len + 2) / 3) characters; no NUL). */
size_t base64_encode(const uint8_t *in, size_t len, char *out);
