/* Digests of build and test output (runtime_execute, the artifacts set):
 * the kind of tool detected from the command and the output, which parser
 * matched, whether it passed, a one-line summary and the failures (name,
 * message, and file and line where the tool prints them). The text is the
 * sandbox's, so it is less-privileged input: every parser reads it within
 * its length, and the digest is bounded (SBX_DIGEST_MAX_FAILURES failures of
 * SBX_DIGEST_FIELD_MAX bytes per field) whatever the output's size. It runs
 * in sandbox-mcp, never in sbxd. Non-logging.
 *
 * Parsers: node-test (node --test, spec and TAP reporters), tap, pytest,
 * go-test (plain and -json), cargo-test, jest, vitest, tsc, eslint, gcc
 * (gcc and clang diagnostics), make (GNU make failures), junit-xml (a JUnit
 * XML report in the output, read with libxml2's streaming reader: no
 * network, no DTD, no entity substitution, at most SBX_DIGEST_JUNIT_MAX
 * bytes), generic (the first error-looking lines and the last lines). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A JUnit XML file the command named, as sbxd read it (RuntimeReport). */
typedef struct DigestReport {
        const char *path;
        bool found;                     /* false: error says why */
        const char *data;               /* its first len bytes */
        size_t len;
        bool truncated;                 /* cut at its limit: the cases before the cut count */
        unsigned long long size;        /* the file's */
        const char *error;
} DigestReport;

/* {kind, parser, ok, summary, failures: [{name, message, file?, line?}],
 * failureCount} of the output. command is what ran (runtime, executable,
 * args), for detection; exited_ok whether it exited with status 0 (the
 * verdict when a parser cannot tell). NULL if out of memory. */
json_t *digest_make(const char *command, const char *out, size_t out_len, const char *err, size_t err_len,
                    bool exited_ok);
/* The same with the n (at most SBX_DIGEST_JUNIT_FILES) report files the
 * command named, parsed as printed JUnit XML is; the digest then has
 * reports: [{path, read, bytes, size, truncated, error?}], read saying
 * whether its test cases were read. */
json_t *digest_make_reports(const char *command, const char *out, size_t out_len, const char *err, size_t err_len,
                            bool exited_ok, const DigestReport *reports, size_t n);
