/* Digests of build and test output (see digest.h). */
#include <ctype.h>
#include <errno.h>
#include <libxml/xmlreader.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "macro.h"
#include "msg-json.h"
#include "sbx-limits.h"

#define _cleanup_json_ _cleanup_(json_decrefp)
#define GO_JSON_LINE_MAX 65536u         /* bytes of one go test -json line parsed */
#define GENERIC_LAST_LINES 3u           /* generic: the last lines, in the summary */

typedef struct Line {
        const char *p;
        size_t len;
} Line;

typedef struct Failure {
        char name[SBX_DIGEST_FIELD_MAX];
        char message[SBX_DIGEST_FIELD_MAX];
        char file[SBX_DIGEST_FIELD_MAX];
        unsigned long line;
} Failure;

typedef struct Digest {
        const char *kind, *parser;
        const char *out, *err;          /* the streams */
        size_t out_len, err_len;
        const char *command;
        const DigestReport *reports;    /* the JUnit XML files the command named */
        size_t n_reports;
        bool report_read[SBX_DIGEST_JUNIT_FILES];
        bool has_counts;
        unsigned long passed, failed, skipped, warnings;
        Failure f[SBX_DIGEST_MAX_FAILURES];
        unsigned n;
        unsigned long total;            /* failures seen, listed or not */
        char summary[3 * SBX_DIGEST_FIELD_MAX];   /* cut to SBX_DIGEST_FIELD_MAX when output */
} Digest;

/* ---- lines ------------------------------------------------------------------- */

/* The next line of buf from *pos (without '\n' or a trailing '\r'). */
static bool next_line(const char *buf, size_t len, size_t *pos, Line *l) {
        const char *nl;

        if (*pos >= len)
                return false;
        l->p = buf + *pos;
        nl = memchr(l->p, '\n', len - *pos);
        l->len = nl ? (size_t) (nl - l->p) : len - *pos;
        *pos += l->len + 1;
        if (l->len > 0 && l->p[l->len - 1] == '\r')
                l->len--;
        return true;
}

/* Both streams, stdout first: s is 0 or 1, *pos within it. */
#define FOREACH_LINE(d, s, pos, l) \
        for (int s = 0; s < 2; s++) \
                for (size_t pos = 0; next_line(s ? (d)->err : (d)->out, s ? (d)->err_len : (d)->out_len, &pos, &(l));)

static bool starts(Line l, const char *prefix) {
        size_t n = strlen(prefix);
        return l.len >= n && memcmp(l.p, prefix, n) == 0;
}

static const char *find(Line l, const char *needle) {
        return memmem(l.p, l.len, needle, strlen(needle));
}

/* find, from offset off of l on (off <= l.len). */
static const char *find_from(Line l, size_t off, const char *needle) {
        return find((Line) { l.p + off, l.len - off }, needle);
}

static Line skip_space(Line l) {
        while (l.len > 0 && (*l.p == ' ' || *l.p == '\t')) {
                l.p++;
                l.len--;
        }
        return l;
}

static Line rest_after(Line l, const char *at) {
        return (Line) { at, (size_t) (l.p + l.len - at) };
}

static void copy_field(char *dst, const char *src, size_t len) {
        len = MIN(len, (size_t) SBX_DIGEST_FIELD_MAX - 1);
        memcpy(dst, src, len);
        dst[len] = '\0';
}

/* The decimal number at p, read no further than end (the text has no NUL at its end). */
static unsigned long num_at(const char *p, const char *end, const char **ret_end) {
        unsigned long v = 0;

        for (; p < end && isdigit((unsigned char) *p); p++)
                v = v < (unsigned long) -1 / 10 - 1 ? v * 10 + (unsigned long) (*p - '0') : v;
        if (ret_end)
                *ret_end = p;
        return v;
}

/* The number after prefix in l ("# pass 3", "ℹ fail 1"), if l starts so. */
static bool count_after(Line l, const char *prefix, unsigned long *ret) {
        size_t n = strlen(prefix);
        const char *end;
        unsigned long v;

        if (!starts(l, prefix))
                return false;
        v = num_at(l.p + n, l.p + l.len, &end);
        if (end == l.p + n)
                return false;
        *ret = v;
        return true;
}

/* The number just before word in l ("2 failed", "1 passed;"), if there is
 * one (the last such, if word is there more than once). */
static bool count_before(Line l, const char *word, unsigned long *ret) {
        size_t n = strlen(word);
        bool found = false;

        for (const char *p = l.p; p < l.p + l.len && (p = memmem(p, (size_t) (l.p + l.len - p), word, n)); p += n) {
                const char *q = p;

                while (q > l.p && isdigit((unsigned char) q[-1]))
                        q--;
                if (q < p && (q == l.p || q[-1] == ' ')) {
                        *ret = num_at(q, p, NULL);
                        found = true;
                }
        }
        return found;
}

/* "file:LINE" or "file:LINE:COL" at the start of s: the file and line. */
static bool file_line(Line s, char *file, unsigned long *line) {
        for (size_t i = 1; i + 1 < s.len; i++) {
                if (s.p[i] != ':' || !isdigit((unsigned char) s.p[i + 1]) || memchr(s.p, ' ', i))
                        continue;
                copy_field(file, s.p, i);
                *line = num_at(s.p + i + 1, s.p + s.len, NULL);
                return true;
        }
        return false;
}

/* Whether the head or the tail (SBX_DIGEST_DETECT_BYTES each) of text holds needle. */
static bool has_in(const char *text, size_t len, const char *needle, size_t n) {
        size_t w = SBX_DIGEST_DETECT_BYTES;

        if (len <= 2 * w)
                return memmem(text, len, needle, n) != NULL;
        return memmem(text, w + n, needle, n) || memmem(text + len - w, w, needle, n);
}

/* Whether either stream shows needle where tools print their marks (headers
 * and summaries: the head and the tail), so that a parser whose tool's marks
 * are absent reads no line, whatever the output's size. */
static bool has(const Digest *d, const char *needle) {
        size_t n = strlen(needle);

        return has_in(d->out, d->out_len, needle, n) || has_in(d->err, d->err_len, needle, n);
}

static bool has_any(const Digest *d, const char *const *needles) {
        for (; *needles; needles++)
                if (has(d, *needles))
                        return true;
        return false;
}

#define HAS_ANY(d, ...) has_any((d), (const char *const[]) { __VA_ARGS__, NULL })

static Failure *add_failure(Digest *d, const char *name, size_t nlen, const char *msg, size_t mlen) {
        Failure *f;

        d->total++;
        if (d->n >= SBX_DIGEST_MAX_FAILURES)
                return NULL;
        f = &d->f[d->n++];
        *f = (Failure) {};
        copy_field(f->name, name, nlen);
        copy_field(f->message, msg, mlen);
        return f;
}

/* The first non-empty line after pos in stream s, trimmed: a failure's message. */
static Line message_after(const Digest *d, int s, size_t pos, unsigned max_lines) {
        const char *buf = s ? d->err : d->out;
        size_t len = s ? d->err_len : d->out_len;
        Line l;

        for (unsigned i = 0; i < max_lines && next_line(buf, len, &pos, &l); i++) {
                l = skip_space(l);
                if (l.len > 0)
                        return l;
        }
        return (Line) { "", 0 };
}

/* ---- test runners -------------------------------------------------------------- */

/* TAP (node --test's tap reporter and TAP in general): "not ok N - name"
 * with its YAML block's error/message and location. */
static bool parse_tap(Digest *d) {
        bool tap = false, yaml = false;
        Failure *cur = NULL;
        unsigned long ok = 0, notok = 0;
        Line l;

        if (!HAS_ANY(d, "ok ", "1.."))
                return false;
        FOREACH_LINE(d, s, pos, l) {
                Line t = skip_space(l);
                const char *dash;

                if (starts(t, "TAP version") || (starts(t, "1..") && t.len > 3 && isdigit((unsigned char) t.p[3])))
                        tap = true;
                if (starts(t, "---")) {
                        yaml = cur != NULL;
                        continue;
                }
                if (starts(t, "...")) {
                        yaml = false;
                        cur = NULL;
                        continue;
                }
                if (yaml && cur) {
                        if ((starts(t, "error: ") || starts(t, "message: ")) && !cur->message[0]) {
                                Line v = rest_after(t, memchr(t.p, ':', t.len) + 2);
                                if (v.len >= 2 && (v.p[0] == '\'' || v.p[0] == '"'))
                                        v.p++, v.len -= 2;
                                else if (v.len <= 2 && v.len > 0 && (v.p[0] == '|' || v.p[0] == '>'))
                                        v = message_after(d, s, pos, 3);       /* a block scalar: its first line */
                                copy_field(cur->message, v.p, v.len);
                        } else if (starts(t, "location: ")) {
                                Line v = rest_after(t, t.p + 10);
                                if (v.len >= 2 && v.p[0] == '\'')
                                        v.p++, v.len -= 2;
                                if (starts(v, "file://"))
                                        v.p += 7, v.len -= 7;
                                (void) file_line(v, cur->file, &cur->line);
                        }
                        continue;
                }
                if (starts(t, "ok ")) {
                        ok += !find(t, "# SKIP") && l.p == t.p;
                        d->skipped += find(t, "# SKIP") != NULL;
                        continue;
                }
                if (!starts(t, "not ok ") || find(t, "# TODO"))
                        continue;
                notok += l.p == t.p;
                dash = find(t, " - ");
                cur = NULL;
                if (dash)
                        cur = add_failure(d, dash + 3, (size_t) (t.p + t.len - dash - 3), "", 0);
        }
        if (!tap && ok + notok == 0)
                return false;
        /* A suite fails with its subtests: only the subtests count (node: "1 subtest failed"). */
        for (unsigned i = 0; i < d->n; i++)
                if (strstr(d->f[i].message, "subtest") && strstr(d->f[i].message, "failed")) {
                        memmove(&d->f[i], &d->f[i + 1], (d->n - i - 1) * sizeof(Failure));
                        d->n--, d->total--, i--;
                }
        FOREACH_LINE(d, s2, pos2, l) {
                d->has_counts |= count_after(l, "# pass ", &d->passed);
                (void) count_after(l, "# fail ", &d->failed);
        }
        if (!d->has_counts) {
                d->has_counts = true;
                d->passed = ok;
                d->failed = d->total;
        }
        d->kind = strstr(d->command, "--test") ? "node-test" : "tap";
        d->parser = strstr(d->command, "--test") ? "node-test-tap" : "tap";
        return true;
}

/* node --test's spec reporter: "✖ name (1.2ms)" and the message under it;
 * the counts "ℹ pass N", "ℹ fail N". With a "✖ failing tests:" section
 * (node 20 and later) only that is read. */
static bool parse_node_spec(Digest *d) {
        bool section = false, have_section = false;
        Line l;

        if (!has(d, "\xe2\x84\xb9 pass "))
                return false;
        FOREACH_LINE(d, s, pos, l) {
                d->has_counts |= count_after(l, "\xe2\x84\xb9 pass ", &d->passed);
                (void) count_after(l, "\xe2\x84\xb9 fail ", &d->failed);
                (void) count_after(l, "\xe2\x84\xb9 skipped ", &d->skipped);
                have_section |= starts(l, "\xe2\x9c\x96 failing tests:");
        }
        if (!d->has_counts)
                return false;
        FOREACH_LINE(d, s, pos, l) {
                Line t = skip_space(l);
                const char *paren;
                char file[SBX_DIGEST_FIELD_MAX] = "";
                unsigned long line = 0;
                Failure *f;

                if (starts(l, "\xe2\x9c\x96 failing tests:")) {
                        section = true;
                        continue;
                }
                if (have_section != section || !starts(t, "\xe2\x9c\x96 "))
                        continue;
                t.p += 4, t.len -= 4;
                paren = t.len > 0 ? memrchr(t.p, '(', t.len) : NULL;
                if (paren && paren > t.p)
                        t.len = (size_t) (paren - t.p - 1);
                if (section) {
                        /* "test at file:///x.test.mjs:5:3" before it, in this section */
                        const char *buf = s ? d->err : d->out;
                        const char *back = t.p;
                        while (back > buf && back[-1] != '\n')
                                back--;
                        if (back > buf + 1) {
                                const char *prev = back - 1;
                                while (prev > buf && prev[-1] != '\n')
                                        prev--;
                                Line pl = { prev, (size_t) (back - 1 - prev) };
                                if (starts(pl, "test at ")) {
                                        Line v = rest_after(pl, pl.p + 8);
                                        if (starts(v, "file://"))
                                                v.p += 7, v.len -= 7;
                                        (void) file_line(v, file, &line);
                                }
                        }
                }
                Line m = message_after(d, s, pos, 3);
                if (m.len > 0 && find(m, "subtest") && find(m, "failed"))
                        continue;       /* a suite, failed by its tests */
                f = add_failure(d, t.p, t.len, m.p, m.len);
                if (f && file[0]) {
                        strlcpy(f->file, file, sizeof(f->file));
                        f->line = line;
                }
        }
        d->kind = "node-test";
        d->parser = "node-test-spec";
        return true;
}

/* "test_calc.py:5: AssertionError": the first such line of the file in the
 * failure's section ("____ test_add ____"). */
static void pytest_place(Digest *d, Failure *f) {
        const char *colons = strstr(f->name, "::"), *test = colons ? colons + 2 : f->name;
        char header[SBX_DIGEST_FIELD_MAX + 4];
        bool in = false;
        Line l;

        copy_field(f->file, f->name, colons ? (size_t) (colons - f->name) : strlen(f->name));
        snprintf(header, sizeof(header), " %.300s _", test);
        FOREACH_LINE(d, s, pos, l) {
                char file[SBX_DIGEST_FIELD_MAX];
                unsigned long line;

                if (starts(l, "_") && find(l, " _")) {
                        in = find(l, header) != NULL;
                        continue;
                }
                if (in && file_line(l, file, &line) && strcmp(file, f->file) == 0 && find(l, ": ")) {
                        f->line = line;
                        return;
                }
        }
}

/* pytest: "FAILED path::name - message" of its short summary, the file's
 * line from "path:LINE: Error", and the last line's counts. */
static bool parse_pytest(Digest *d) {
        bool seen = false;
        Line l;

        if (!HAS_ANY(d, " passed", " failed", "short test summary info", "test session starts"))
                return false;
        FOREACH_LINE(d, s, pos, l) {

                if (find(l, "short test summary info") || find(l, "test session starts") ||
                    ((find(l, " passed") || find(l, " failed")) && find(l, " in ") && l.len > 0 &&
                     isdigit((unsigned char) skip_space(l).p[0]) && find(l, "s")))
                        seen = true;
                d->has_counts |= count_before(l, " failed", &d->failed);
                d->has_counts |= count_before(l, " passed", &d->passed);
        }
        if (!seen)
                return false;
        FOREACH_LINE(d, s, pos, l) {
                const char *sep;
                Failure *f;

                if (!starts(l, "FAILED ") && !starts(l, "ERROR "))
                        continue;
                l = rest_after(l, memchr(l.p, ' ', l.len) + 1);
                sep = find(l, " - ");
                f = add_failure(d, l.p, sep ? (size_t) (sep - l.p) : l.len, sep ? sep + 3 : "",
                                sep ? (size_t) (l.p + l.len - sep - 3) : 0);
                if (f)
                        pytest_place(d, f);
        }
        d->kind = d->parser = "pytest";
        return true;
}

/* go test's "--- FAIL: TestX (0.00s)" and its "    file.go:N: message"
 * lines: after it (plain go test) or before it (-v and -json, where the
 * test's log comes first); one per failing test, the message of its first. */
typedef struct GoState {
        Failure *cur;
        Failure log;                    /* the first log line since "=== RUN" */
        bool has_log;
} GoState;

static void go_line(Digest *d, Line l, GoState *g) {
        Line t = skip_space(l);

        if (starts(t, "=== RUN")) {
                g->has_log = false;
                g->cur = NULL;
                return;
        }
        if (starts(t, "--- FAIL: ")) {
                const char *sp;
                t = rest_after(t, t.p + 10);
                sp = memchr(t.p, ' ', t.len);
                g->cur = add_failure(d, t.p, sp ? (size_t) (sp - t.p) : t.len, "", 0);
                if (g->cur && g->has_log) {
                        memcpy(g->cur->message, g->log.message, sizeof(g->log.message));
                        memcpy(g->cur->file, g->log.file, sizeof(g->log.file));
                        g->cur->line = g->log.line;
                }
                g->has_log = false;
                d->failed++;
                return;
        }
        if (starts(t, "--- PASS: ") || starts(t, "--- SKIP: ")) {
                d->passed += t.p[4] == 'P';
                d->skipped += t.p[4] == 'S';
                g->cur = NULL;
                g->has_log = false;
                return;
        }
        if (t.len > 0 && t.p > l.p) {
                Failure *f = g->cur && !g->cur->message[0] ? g->cur : !g->has_log && !g->cur ? &g->log : NULL;
                const char *colon = find(t, ": ");

                if (f && colon && file_line(t, f->file, &f->line)) {
                        copy_field(f->message, colon + 2, (size_t) (t.p + t.len - colon - 2));
                        g->has_log |= f == &g->log;
                }
        }
}

static bool parse_go(Digest *d) {
        GoState g = {};
        bool seen = false;
        Line l;

        if (!HAS_ANY(d, "--- FAIL: ", "--- PASS: ", "=== RUN", "ok  \t", "FAIL\t"))
                return false;
        FOREACH_LINE(d, s, pos, l)
                seen |= starts(l, "--- FAIL: ") || starts(l, "--- PASS: ") || starts(l, "=== RUN") ||
                        starts(l, "ok  \t") || (starts(l, "FAIL\t") && find(l, "\t"));
        if (!seen)
                return false;
        FOREACH_LINE(d, s, pos, l)
                go_line(d, l, &g);
        d->has_counts = d->passed + d->failed > 0;
        d->kind = d->parser = "go-test";
        return true;
}

/* go test -json: the "output" events, as go test -v would print them. */
static bool parse_go_json(Digest *d) {
        GoState g = {};
        bool seen = false;
        Line l;

        if (!has(d, "\"Action\":"))
                return false;
        FOREACH_LINE(d, s, pos, l) {
                _cleanup_json_ json_t *ev = NULL;
                const char *out;

                if (!starts(l, "{\"") || l.len > GO_JSON_LINE_MAX)
                        continue;
                ev = json_loadb(l.p, l.len, 0, NULL);
                if (!json_is_string(json_object_get(ev, "Action")))
                        continue;
                seen = true;
                out = json_string_value(json_object_get(ev, "Output"));
                if (out) {
                        size_t n = strlen(out);
                        go_line(d, (Line) { out, n > 0 && out[n - 1] == '\n' ? n - 1 : n }, &g);
                }
        }
        if (!seen)
                return false;
        d->has_counts = d->passed + d->failed > 0;
        d->kind = "go-test";
        d->parser = "go-test-json";
        return true;
}

/* cargo test: "test path ... FAILED", the panic under "---- path stdout ----"
 * (Rust 1.63's "panicked at 'message', file:line:col" and later Rusts'
 * "panicked at file:line:col:" then the message), "test result:". */
static bool parse_cargo(Digest *d) {
        Failure *cur = NULL;
        bool seen = false;
        Line l;

        if (!has(d, "test result: "))
                return false;
        FOREACH_LINE(d, s, pos, l) {
                const char *at;

                if (starts(l, "test result: ")) {
                        unsigned long passed = 0, failed = 0;

                        seen = true;
                        (void) count_before(l, " passed;", &passed);
                        (void) count_before(l, " failed;", &failed);
                        d->passed += passed;
                        d->failed += failed;
                        d->has_counts = true;
                } else if (starts(l, "test ") && find_from(l, 5, " ... FAILED")) {
                        (void) add_failure(d, l.p + 5, (size_t) (find_from(l, 5, " ... FAILED") - l.p - 5), "", 0);
                } else if (starts(l, "---- ") && find_from(l, 5, " stdout ----")) {
                        Line name = { l.p + 5, (size_t) (find_from(l, 5, " stdout ----") - l.p - 5) };
                        cur = NULL;
                        for (unsigned i = 0; i < d->n; i++)
                                if (strlen(d->f[i].name) == name.len && memcmp(d->f[i].name, name.p, name.len) == 0)
                                        cur = &d->f[i];
                } else if (cur && (at = find(l, "panicked at "))) {
                        Line v = rest_after(l, at + 12);
                        const char *end;
                        if (v.len > 0 && v.p[0] == '\'') {
                                /* 'message...', file:line:col: the message may span lines; its first is kept */
                                end = memchr(v.p + 1, '\'', v.len - 1);
                                copy_field(cur->message, v.p + 1, end ? (size_t) (end - v.p - 1) : v.len - 1);
                        } else {
                                (void) file_line(v, cur->file, &cur->line);
                                Line m = message_after(d, s, pos, 1);
                                copy_field(cur->message, m.p, m.len);
                        }
                } else if (cur && !cur->file[0] && (at = find(l, "', "))) {
                        (void) file_line(rest_after(l, at + 3), cur->file, &cur->line);
                }
        }
        if (!seen)
                return false;
        d->kind = d->parser = "cargo-test";
        return true;
}

/* "Tests:       1 failed, 1 passed, 2 total" (jest) and
 * "      Tests  1 failed | 1 passed (2)" (vitest): the counts. */
static bool test_counts(Digest *d, Line l, const char *prefix) {
        Line t = skip_space(l);

        if (!starts(t, prefix))
                return false;
        d->has_counts = true;
        d->failed = d->passed = 0;
        (void) count_before(t, " failed", &d->failed);
        (void) count_before(t, " passed", &d->passed);
        return true;
}

/* jest: "● name" blocks, their first line the message and
 * "at ... (file:line:col)" the place. */
static bool parse_jest(Digest *d) {
        Failure *cur = NULL;
        bool seen = false;
        Line l;

        if (!has(d, "Tests:"))
                return false;
        FOREACH_LINE(d, s, pos, l)
                seen |= test_counts(d, l, "Tests:");
        if (!seen)
                return false;
        FOREACH_LINE(d, s, pos, l) {
                Line t = skip_space(l);
                const char *paren;

                if (starts(t, "\xe2\x97\x8f ") && !find(t, "Test suite failed to run")) {
                        Line m = message_after(d, s, pos, 3);
                        cur = add_failure(d, t.p + 4, t.len - 4, m.p, m.len);
                } else if (cur && !cur->file[0] && starts(t, "at ") && (paren = memrchr(t.p, '(', t.len)))
                        (void) file_line(rest_after(t, paren + 1), cur->file, &cur->line);
        }
        d->kind = d->parser = "jest";
        return true;
}

/* vitest: " FAIL  file > name", the message after it and " ❯ file:line:col". */
static bool parse_vitest(Digest *d) {
        Failure *cur = NULL;
        bool seen = false;
        Line l;

        if (!has(d, "Tests  "))
                return false;
        FOREACH_LINE(d, s, pos, l)
                seen |= test_counts(d, l, "Tests  ");
        FOREACH_LINE(d, s, pos, l)
                seen &= !starts(skip_space(l), "Tests:");   /* jest's */
        if (!seen)
                return false;
        FOREACH_LINE(d, s, pos, l) {
                Line t = skip_space(l);

                const char *gt = starts(t, "FAIL  ") ? find_from(t, 6, " > ") : NULL;

                if (gt) {
                        Line m = message_after(d, s, pos, 2);
                        cur = add_failure(d, gt + 3, (size_t) (t.p + t.len - gt - 3), m.p, m.len);
                        if (cur)
                                copy_field(cur->file, t.p + 6, (size_t) (gt - t.p - 6));
                } else if (cur && !cur->line && starts(t, "\xe2\x9d\xaf "))
                        (void) file_line(rest_after(t, t.p + 4), cur->file, &cur->line);
        }
        d->kind = d->parser = "vitest";
        return true;
}

/* ---- JUnit XML (libxml2's streaming reader) ---------------------------------------- */

/* The span of s's text that looks like a JUnit report: from "<?xml" or the
 * first "<testsuite" to the last '>', if it holds a <testsuite> element and
 * is at most SBX_DIGEST_JUNIT_MAX bytes. */
static bool junit_span(const char *text, size_t len, Line *ret) {
        const char *start = memmem(text, MIN(len, (size_t) SBX_DIGEST_DETECT_BYTES), "<?xml", 5), *end;

        if (!start)
                start = memmem(text, MIN(len, (size_t) SBX_DIGEST_DETECT_BYTES), "<testsuite", 10);
        if (!start || !memmem(start, (size_t) (text + len - start), "<testsuite", 10))
                return false;
        end = memrchr(start, '>', (size_t) (text + len - start));
        if (!end || (size_t) (end + 1 - start) > SBX_DIGEST_JUNIT_MAX)
                return false;
        *ret = (Line) { start, (size_t) (end + 1 - start) };
        return true;
}

static void xml_freep(xmlChar **p) {
        xmlFree(*p);
}

#define _cleanup_xml_ _cleanup_(xml_freep)

/* A <failure> or <error> of the test case the reader is in: name, message
 * (its message attribute, else the first line of its text), and file and
 * line from the case's attributes or the text's last "file:LINE:" line. */
static void junit_failure(Digest *d, xmlTextReaderPtr r, const char *name, const char *file, const char *line) {
        _cleanup_xml_ xmlChar *message = xmlTextReaderGetAttribute(r, BAD_CAST "message");
        _cleanup_xml_ xmlChar *text = xmlTextReaderReadString(r);
        const char *t = text ? (const char *) text : "", *m = message ? (const char *) message : t;
        const char *nl = strchr(m, '\n'), *last;
        Failure *f = add_failure(d, name, strlen(name), m, nl ? (size_t) (nl - m) : strlen(m));

        if (!f)
                return;
        if (file) {
                copy_field(f->file, file, strlen(file));
                f->line = line ? strtoul(line, NULL, 10) : 0;
                return;
        }
        last = strrchr(t, '\n');
        last = last ? last + 1 : t;
        (void) file_line((Line) { last, strlen(last) }, f->file, &f->line);
}

/* A <testcase>: its name (classname.name) and attributes, then its children
 * up to its end: a failure or error fails it, skipped skips it. */
static void junit_case(Digest *d, xmlTextReaderPtr r) {
        _cleanup_xml_ xmlChar *cls = xmlTextReaderGetAttribute(r, BAD_CAST "classname");
        _cleanup_xml_ xmlChar *name = xmlTextReaderGetAttribute(r, BAD_CAST "name");
        _cleanup_xml_ xmlChar *file = xmlTextReaderGetAttribute(r, BAD_CAST "file");
        _cleanup_xml_ xmlChar *line = xmlTextReaderGetAttribute(r, BAD_CAST "line");
        char full[SBX_DIGEST_FIELD_MAX];
        int depth = xmlTextReaderDepth(r);
        bool failed = false, skipped = false;

        snprintf(full, sizeof(full), "%s%s%s", cls ? (const char *) cls : "", cls && name ? "." : "",
                 name ? (const char *) name : "");
        if (!xmlTextReaderIsEmptyElement(r))
                while (xmlTextReaderRead(r) == 1 && xmlTextReaderDepth(r) > depth) {
                        const char *el = (const char *) xmlTextReaderConstLocalName(r);

                        if (xmlTextReaderNodeType(r) != XML_READER_TYPE_ELEMENT || !el)
                                continue;
                        if ((strcmp(el, "failure") == 0 || strcmp(el, "error") == 0) && !failed) {
                                failed = true;
                                junit_failure(d, r, full, (const char *) file, (const char *) line);
                        } else if (strcmp(el, "skipped") == 0)
                                skipped = true;
                }
        if (failed)
                d->failed++;
        else if (skipped)
                d->skipped++;
        else
                d->passed++;
}

static void junit_init(void) {
        xmlInitParser();
}

/* The test cases of the JUnit report x; whether it had a <testsuite>. No
 * network, no DTD, no entity substitution, libxml2's default size limits,
 * no messages. */
static bool junit_read(Digest *d, Line x) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        bool suite = false;

        pthread_once(&once, junit_init);
        xmlTextReaderPtr r = xmlReaderForMemory(x.p, (int) x.len, NULL, NULL,
                                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        if (!r)
                return false;
        while (xmlTextReaderRead(r) == 1) {
                const char *el = (const char *) xmlTextReaderConstLocalName(r);

                if (xmlTextReaderNodeType(r) != XML_READER_TYPE_ELEMENT || !el)
                        continue;
                if (strcmp(el, "testsuite") == 0)
                        suite = true;
                else if (strcmp(el, "testcase") == 0 && suite)
                        junit_case(d, r);
        }
        xmlFreeTextReader(r);
        return suite;
}

/* JUnit XML in either stream (a report the command printed, as `cat
 * report.xml` does) and in the report files it named: their test cases. */
static bool parse_junit(Digest *d) {
        bool suite = false;
        Line x;

        if (junit_span(d->out, d->out_len, &x) || junit_span(d->err, d->err_len, &x))
                suite = junit_read(d, x);
        for (size_t i = 0; i < d->n_reports; i++) {
                const DigestReport *rp = &d->reports[i];

                d->report_read[i] = rp->found && junit_span(rp->data, rp->len, &x) && junit_read(d, x);
                suite |= d->report_read[i];
        }
        if (!suite)
                return false;
        d->has_counts = true;
        d->kind = "junit";
        d->parser = "junit-xml";
        return true;
}

/* ---- compilers and linters ------------------------------------------------------ */

/* tsc: "a.ts(1,7): error TS2322: message" (and the pretty "a.ts:1:7 - error TS2322: message"). */
static bool parse_tsc(Digest *d) {
        Line l;

        if (!has(d, "error TS") && !strstr(d->command, "tsc"))
                return false;
        FOREACH_LINE(d, s, pos, l) {
                const char *e = find(l, "error TS");
                const char *colon;
                Failure *f;

                if (!e || !(colon = memchr(e, ':', (size_t) (l.p + l.len - e))))
                        continue;
                f = add_failure(d, e + 6, (size_t) (colon - e - 6), colon + 2,
                                colon + 2 <= l.p + l.len ? (size_t) (l.p + l.len - colon - 2) : 0);
                if (f) {
                        const char *paren = memchr(l.p, '(', (size_t) (e - l.p));
                        if (paren) {
                                copy_field(f->file, l.p, (size_t) (paren - l.p));
                                f->line = num_at(paren + 1, l.p + l.len, NULL);
                        } else
                                (void) file_line(l, f->file, &f->line);
                }
        }
        if (d->total == 0 && !strstr(d->command, "tsc"))
                return false;
        d->kind = d->parser = "tsc";
        return true;
}

/* ESLint's stylish format: a file's path, then "  L:C  error  message  rule". */
static bool parse_eslint(Digest *d) {
        char file[SBX_DIGEST_FIELD_MAX] = "";
        bool seen = false;
        Line l;

        if (!HAS_ANY(d, "  error  ", "  warning  "))
                return false;
        FOREACH_LINE(d, s, pos, l) {
                Line t = skip_space(l);
                const char *end;
                unsigned long line;
                Failure *f;

                seen |= starts(t, "\xe2\x9c\x96 ") && find(t, " problem");
                if (l.len > 0 && l.p[0] == '/' && !find(l, " ")) {
                        copy_field(file, l.p, l.len);
                        continue;
                }
                if (t.p == l.p || t.len == 0 || !isdigit((unsigned char) t.p[0]))
                        continue;
                line = num_at(t.p, t.p + t.len, &end);
                if (end == t.p + t.len || *end != ':')
                        continue;
                Line rest = skip_space(rest_after(t, memchr(t.p, ' ', t.len) ?: t.p + t.len));
                bool error = starts(rest, "error");
                if (!error && !starts(rest, "warning"))
                        continue;
                seen = true;
                if (!error) {
                        d->warnings++;
                        continue;
                }
                rest = skip_space(rest_after(rest, rest.p + 5));
                /* the rule is the last word, after two spaces */
                const char *gap = rest.len > 2 ? memrchr(rest.p, ' ', rest.len) : NULL;
                f = add_failure(d, gap ? gap + 1 : "", gap ? (size_t) (rest.p + rest.len - gap - 1) : 0, rest.p,
                                gap ? (size_t) (gap - rest.p) : rest.len);
                if (f) {
                        size_t n = strlen(f->message);
                        while (n > 0 && f->message[n - 1] == ' ')
                                f->message[--n] = '\0';
                        strlcpy(f->file, file, sizeof(f->file));
                        f->line = line;
                }
        }
        if (!seen)
                return false;
        d->kind = d->parser = "eslint";
        return true;
}

/* gcc and clang: "file:line:col: error: message" (fatal error too), and the
 * linker's "undefined reference"; warnings are counted. */
static void gcc_lines(Digest *d) {
        Line l;

        FOREACH_LINE(d, s, pos, l) {
                char file[SBX_DIGEST_FIELD_MAX];
                unsigned long line;
                const char *e = find(l, ": error: ") ?: find(l, ": fatal error: ");
                Failure *f;

                if (find(l, ": warning: ") && file_line(l, file, &line)) {
                        d->warnings++;
                        continue;
                }
                if (!e && !find(l, "undefined reference to"))
                        continue;
                if (e && !file_line(l, file, &line))
                        continue;
                e = e ? memchr(e + 2, ':', (size_t) (l.p + l.len - e - 2)) + 2 : l.p;
                f = add_failure(d, "error", 5, e, (size_t) (l.p + l.len - e));
                if (f && file_line(l, f->file, &f->line))
                        snprintf(f->name, sizeof(f->name), "%.300s:%lu", f->file, f->line);
        }
}

static bool parse_gcc(Digest *d) {
        if (!HAS_ANY(d, ": error: ", ": fatal error: ", ": warning: ", "undefined reference to"))
                return false;
        gcc_lines(d);
        if (d->total == 0 && d->warnings == 0)
                return false;
        d->kind = d->parser = "gcc";
        return true;
}

/* GNU make: "make: *** [Makefile:4: main.o] Error 1" (and make[N]:), after the
 * compiler's diagnostics, which come first. */
static bool parse_make(Digest *d) {
        bool seen = false;
        Line l;

        if (!HAS_ANY(d, "make: *** ", "]: *** "))
                return false;
        FOREACH_LINE(d, s, pos, l)
                seen |= (starts(l, "make: *** ") || (starts(l, "make[") && find(l, "]: *** ")));
        if (!seen)
                return false;
        gcc_lines(d);
        FOREACH_LINE(d, s, pos, l) {
                const char *stars = find(l, ": *** ");
                Line what;
                Failure *f;

                if (!stars || !starts(l, "make"))
                        continue;
                what = rest_after(l, stars + 6);
                f = add_failure(d, "make", 4, what.p, what.len);
                if (f && what.len > 1 && what.p[0] == '[') {
                        Line in = rest_after(what, what.p + 1);
                        (void) file_line(in, f->file, &f->line);
                        const char *close = memchr(in.p, ']', in.len), *sp = memrchr(in.p, ' ', close ? (size_t) (close - in.p) : 0);
                        if (close && sp)
                                snprintf(f->name, sizeof(f->name), "make target %.*s", (int) (close - sp - 1), sp + 1);
                }
        }
        d->kind = d->parser = "make";
        return true;
}

/* Anything else: the error-looking lines, found by a pass over the whole
 * text per word (the earliest next hit of any word gives the next line). */
static const char *const error_words[] = { "error", "Error", "ERROR", "FAIL", "fatal", "Fatal", "panic",
                                           "Traceback", "Exception", "exception" };

static void generic_stream(Digest *d, int s) {
        const char *text = s ? d->err : d->out, *counted = text;
        size_t len = s ? d->err_len : d->out_len, next[ELEMENTSOF(error_words)], pos = 0;
        unsigned long line = 1;

        for (size_t i = 0; i < ELEMENTSOF(error_words); i++)
                next[i] = (size_t) -1;         /* not searched yet */
        while (pos < len) {
                size_t best = len;
                const char *start, *end, *p;
                char where[48];
                Line l;

                for (size_t i = 0; i < ELEMENTSOF(error_words); i++) {
                        if (next[i] == (size_t) -1 || next[i] < pos) {
                                const char *h = memmem(text + pos, len - pos, error_words[i], strlen(error_words[i]));
                                next[i] = h ? (size_t) (h - text) : len;
                        }
                        best = MIN(best, next[i]);
                }
                if (best >= len)
                        return;
                for (p = counted; (p = memchr(p, '\n', (size_t) (text + best - p))); p++)
                        line++;
                start = memrchr(text, '\n', best);
                start = start ? start + 1 : text;
                end = memchr(text + best, '\n', len - best);
                end = end ?: text + len;
                l = skip_space((Line) { start, (size_t) (end - start) });
                if (l.len > 0 && l.p[l.len - 1] == '\r')
                        l.len--;
                snprintf(where, sizeof(where), "%s line %lu", s ? "stderr" : "stdout", line);
                (void) add_failure(d, where, strlen(where), l.p, l.len);
                counted = end;
                pos = (size_t) (end - text) + 1;
        }
}

static void parse_generic(Digest *d) {
        generic_stream(d, 0);
        generic_stream(d, 1);
        d->kind = d->parser = "generic";
}

/* ---- the digest ----------------------------------------------------------------- */

/* The last non-empty lines of the output (stderr's if it has any), for the generic summary. */
static void last_lines(const Digest *d, char *buf, size_t size) {
        const char *text = d->err_len > 0 ? d->err : d->out;
        size_t len = d->err_len > 0 ? d->err_len : d->out_len, start = len;
        unsigned k = 0;

        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
                len--;
        start = len;
        while (start > 0 && k < GENERIC_LAST_LINES) {
                start--;
                if (start == 0 || text[start - 1] == '\n')
                        k++;
        }
        snprintf(buf, size, "%.*s", (int) (len - start), text + start);
        for (char *p = buf; *p; p++)
                if (*p == '\n')
                        *p = ' ';
}

static void summarize(Digest *d, bool ok, bool exited_ok) {
        bool tests = d->has_counts;
        const char *what = tests ? "failing test" : "error";
        char last[SBX_DIGEST_FIELD_MAX];

        if (strcmp(d->parser, "generic") == 0) {
                last_lines(d, last, sizeof(last));
                snprintf(d->summary, sizeof(d->summary), "%s; %lu error-looking line%s; last: %s",
                         exited_ok ? "exited 0" : "failed", d->total, d->total == 1 ? "" : "s", last);
        } else if (d->total == 0 && tests)
                snprintf(d->summary, sizeof(d->summary), "%s: %lu passed%s", ok ? "all tests passed" : "no failing test named",
                         d->passed, d->skipped ? ", some skipped" : "");
        else if (d->total == 0)
                snprintf(d->summary, sizeof(d->summary), "%s, %lu warning%s", ok ? "no failures" : "failed, no failure named",
                         d->warnings, d->warnings == 1 ? "" : "s");
        else if (d->total == 1)
                snprintf(d->summary, sizeof(d->summary), "1 %s: %s", what, d->f[0].name[0] ? d->f[0].name : d->f[0].message);
        else
                snprintf(d->summary, sizeof(d->summary), "%lu %ss, first: %s", d->total, what,
                         d->f[0].name[0] ? d->f[0].name : d->f[0].message);
}

static json_t *failure_json(const Failure *f) {
        json_t *o = json_pack("{s:o, s:o}", "name", msg_json_string(f->name, strlen(f->name), MSG_JSON_TEXT_REPLACE),
                              "message", msg_json_string(f->message, strlen(f->message), MSG_JSON_TEXT_REPLACE));

        if (o && f->file[0])
                json_object_set_new(o, "file", msg_json_string(f->file, strlen(f->file), MSG_JSON_TEXT_REPLACE));
        if (o && f->line)
                json_object_set_new(o, "line", json_integer((json_int_t) f->line));
        return o;
}

/* No output a parser knows (a clean compile says nothing): the kind the command names. */
static bool parse_by_command(Digest *d) {
        static const struct {
                const char *needle, *kind, *parser;
        } tools[] = {
                { "go test", "go-test", "go-test" }, { "cargo test", "cargo-test", "cargo-test" },
                { "pytest", "pytest", "pytest" }, { "jest", "jest", "jest" }, { "vitest", "vitest", "vitest" },
                { "--test", "node-test", "node-test-tap" }, { "eslint", "eslint", "eslint" }, { "tsc", "tsc", "tsc" },
                { "make", "make", "make" }, { "gcc", "gcc", "gcc" }, { "clang", "gcc", "gcc" },
                { "g++", "gcc", "gcc" }, { "cc ", "gcc", "gcc" },
        };

        for (size_t i = 0; i < ELEMENTSOF(tools); i++)
                if (strstr(d->command, tools[i].needle)) {
                        d->kind = tools[i].kind;
                        d->parser = tools[i].parser;
                        return true;
                }
        return false;
}

/* What the digest says of each report file: whether its cases were read, or why not. */
static json_t *reports_json(const Digest *d) {
        json_t *a = json_array();

        for (size_t i = 0; a && i < d->n_reports; i++) {
                const DigestReport *rp = &d->reports[i];
                const char *why = !rp->found ? rp->error : d->report_read[i] ? NULL : "not a JUnit XML report";
                json_t *o = json_pack("{s:o, s:b, s:I, s:I, s:b}",
                                      "path", msg_json_string(rp->path, strlen(rp->path), MSG_JSON_TEXT_REPLACE),
                                      "read", d->report_read[i], "bytes", (json_int_t) rp->len,
                                      "size", (json_int_t) rp->size, "truncated", rp->truncated);

                if (o && why)
                        json_object_set_new(o, "error", msg_json_string(why, strlen(why), MSG_JSON_TEXT_REPLACE));
                if (!o || json_array_append_new(a, o) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

json_t *digest_make(const char *command, const char *out, size_t out_len, const char *err, size_t err_len,
                    bool exited_ok) {
        return digest_make_reports(command, out, out_len, err, err_len, exited_ok, NULL, 0);
}

json_t *digest_make_reports(const char *command, const char *out, size_t out_len, const char *err, size_t err_len,
                            bool exited_ok, const DigestReport *reports, size_t n_reports) {
        static bool (*const parsers[])(Digest *) = {
                parse_junit, parse_go_json, parse_go, parse_cargo, parse_pytest, parse_jest, parse_vitest, parse_node_spec,
                parse_tap, parse_eslint, parse_tsc, parse_make, parse_gcc, parse_by_command,
        };
        const Digest in = { .out = out, .out_len = out_len, .err = err, .err_len = err_len, .command = command ?: "",
                            .reports = reports, .n_reports = MIN(n_reports, (size_t) SBX_DIGEST_JUNIT_FILES) };
        Digest *d = calloc(1, sizeof(Digest));
        json_t *failures, *o = NULL;
        bool ok;

        if (!d)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(parsers); i++) {
                *d = in;
                if (parsers[i](d))
                        break;
                d->kind = NULL;
        }
        if (!d->kind) {
                *d = in;        /* no report was read: parse_junit would have matched */
                parse_generic(d);
        }
        ok = exited_ok && (strcmp(d->parser, "generic") == 0 || (d->total == 0 && d->failed == 0));
        summarize(d, ok, exited_ok);
        failures = json_array();
        for (unsigned i = 0; failures && i < d->n; i++)
                if (json_array_append_new(failures, failure_json(&d->f[i])) < 0) {
                        json_decref(failures);
                        failures = NULL;
                }
        if (failures)
                o = json_pack("{s:s, s:s, s:b, s:o, s:o, s:I}", "kind", d->kind, "parser", d->parser, "ok", ok,
                              "summary", msg_json_string(d->summary, MIN(strlen(d->summary), (size_t) SBX_DIGEST_FIELD_MAX - 1), MSG_JSON_TEXT_REPLACE),
                              "failures", failures, "failureCount", (json_int_t) d->total);
        if (o && d->has_counts)
                json_object_set_new(o, "counts", json_pack("{s:I, s:I, s:I}", "passed", (json_int_t) d->passed,
                                                           "failed", (json_int_t) d->failed, "skipped",
                                                           (json_int_t) d->skipped));
        if (o && d->n_reports)
                json_object_set_new(o, "reports", reports_json(d));
        free(d);
        return o;
}
