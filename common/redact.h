/* A streaming redactor: text goes in as chunks of any size, and comes out
 * with every occurrence of each secret value replaced by "[secret:NAME]",
 * also when a value is split across chunks. At a chunk end it holds back
 * only what could still be the start of a value, so at most (longest value
 * - 1) bytes. Matching is a Knuth-Morris-Pratt automaton per value: linear
 * in the input whatever the values are. When two values overlap, the one
 * that ends first is replaced (the longer one at the same end); no byte of
 * a replaced value is ever passed on. Non-logging, pure (no I/O). */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct RedactSecret {
        const char *name;               /* shown in the marker */
        const void *value;
        size_t len;                     /* >= 1 */
} RedactSecret;

typedef struct Redactor Redactor;

/* Where redacted bytes go, in order; a negative return stops the feed and is returned. */
typedef int (*redact_emit_t)(const void *data, size_t len, void *userdata);

/* A redactor of secrets[0..n) (copied: the caller's may go). n may be 0: it
 * then passes everything on at once. -EINVAL for an empty value. */
int redactor_new(const RedactSecret *secrets, size_t n, Redactor **ret);
Redactor *redactor_free(Redactor *r);
/* Redacts data[0..len) and emits what can no longer be part of a value. */
int redactor_feed(Redactor *r, const void *data, size_t len, redact_emit_t emit, void *userdata);
/* The end of the stream: emits what was held back (no value is complete in it). */
int redactor_flush(Redactor *r, redact_emit_t emit, void *userdata);
/* Bytes held back now (at most the longest value - 1). */
size_t redactor_held(const Redactor *r);
