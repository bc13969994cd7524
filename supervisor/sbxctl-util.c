/* What sbxctl's commands share: usage errors, safe printing, tables and
 * JSON output, and the round trip to sbxd. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "sbx-limits.h"
#include "sbxctl.h"
#include "wire.h"

const char *const program = "sbxctl";

int usage_error(const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "%s: ", program);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nTry '%s --help' for more information.\n", program);
        return EXIT_USAGE;
}

void fputs_safe(const char *s, FILE *f) {
        for (; *s; s++)
                fputc((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

void print_line(const char *key, const char *value) {
        if (!value || !value[0])
                return;
        printf("%s: ", key);
        fputs_safe(value, stdout);
        putchar('\n');
}

void fwrite_text_safe(const uint8_t *s, size_t n, FILE *f) {
        for (size_t i = 0; i < n; i++)
                fputc((s[i] < 0x20 && s[i] != '\n' && s[i] != '\t') || s[i] == 0x7f ? '?' : s[i], f);
}

void format_size(uint64_t bytes, char *buf, size_t size) {
        static const char units[] = "KMGTPE";
        double v = (double) bytes;
        size_t i = 0;

        if (bytes == 0) {
                snprintf(buf, size, "default");
                return;
        }
        if (bytes < 1024) {
                snprintf(buf, size, "%" PRIu64 "B", bytes);
                return;
        }
        v /= 1024;
        while (v >= 1024 && i + 1 < sizeof(units) - 1) {
                v /= 1024;
                i++;
        }
        snprintf(buf, size, "%.1f%c", v, units[i]);
}

void format_uptime(double seconds, char *buf, size_t size) {
        unsigned long long s = seconds > 0 ? (unsigned long long) seconds : 0;
        unsigned long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;

        if (d > 0)
                snprintf(buf, size, "%llud %lluh %llum %llus", d, h, m, s % 60);
        else if (h > 0)
                snprintf(buf, size, "%lluh %llum %llus", h, m, s % 60);
        else if (m > 0)
                snprintf(buf, size, "%llum %llus", m, s % 60);
        else
                snprintf(buf, size, "%llus", s);
}

void format_time(int64_t unix_seconds, char *buf, size_t size) {
        time_t t = (time_t) unix_seconds;
        struct tm tm;

        if (unix_seconds <= 0 || !localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                snprintf(buf, size, "-");
}

/* "1.2s", "3m04s"; the interval between two unix microsecond stamps. */
void format_duration(int64_t from_usec, int64_t to_usec, char *buf, size_t size) {
        double s;

        if (from_usec <= 0 || to_usec < from_usec) {
                snprintf(buf, size, "-");
                return;
        }
        s = (double) (to_usec - from_usec) / 1e6;
        if (s < 60)
                snprintf(buf, size, "%.1fs", s);
        else if (s < 3600)
                snprintf(buf, size, "%dm%02ds", (int) s / 60, (int) s % 60);
        else
                snprintf(buf, size, "%dh%02dm", (int) s / 3600, (int) s / 60 % 60);
}

int print_json(json_t *j) {
        int r;

        if (!j) {
                fprintf(stderr, "%s: failed to build JSON output\n", program);
                return EXIT_FAILED;
        }
        r = json_dumpf(j, stdout, JSON_INDENT(2));
        json_decref(j);
        if (r < 0) {
                fprintf(stderr, "%s: failed to write JSON output\n", program);
                return EXIT_FAILED;
        }
        putchar('\n');
        return EXIT_OK;
}

void table_done(Table *t) {
        for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
                free(t->cells[i]);
        free(t->cells);
}

void table_add_row(Table *t, const char *const *cells) {
        if (t->oom)
                return;
        if (t->n_rows == t->allocated) {
                size_t n = t->allocated ? t->allocated * 2 : 16;
                char **c = reallocarray(t->cells, n * t->n_cols, sizeof(char *));
                if (!c) {
                        t->oom = true;
                        return;
                }
                t->cells = c;
                t->allocated = n;
        }
        for (size_t i = 0; i < t->n_cols; i++) {
                char *copy = strdup(cells[i] ?: "-");

                if (copy)
                        for (char *q = copy; *q; q++)
                                if ((unsigned char) *q < 0x20 || *q == 0x7f)
                                        *q = '?';
                t->cells[t->n_rows * t->n_cols + i] = copy;
                if (!copy)
                        t->oom = true;
        }
        t->n_rows++;
}

void table_add(Table *t, ...) {
        const char *cells[TABLE_COLS_MAX];
        va_list ap;

        assert(t->n_cols <= TABLE_COLS_MAX);
        va_start(ap, t);
        for (size_t i = 0; i < t->n_cols; i++)
                cells[i] = va_arg(ap, const char *);
        va_end(ap);
        table_add_row(t, cells);
}

int table_print(Table *t) {
        size_t width[16];

        assert(t->n_cols <= ELEMENTSOF(width));
        if (t->oom) {
                fprintf(stderr, "%s: out of memory\n", program);
                return EXIT_FAILED;
        }
        for (size_t c = 0; c < t->n_cols; c++) {
                width[c] = strlen(t->header[c]);
                for (size_t r = 0; r < t->n_rows; r++)
                        width[c] = MAX(width[c], strlen(t->cells[r * t->n_cols + c]));
        }
        for (size_t r = 0; r <= t->n_rows; r++)
                for (size_t c = 0; c < t->n_cols; c++) {
                        const char *v = r == 0 ? t->header[c] : t->cells[(r - 1) * t->n_cols + c];
                        if (c + 1 < t->n_cols)
                                printf("%-*s  ", (int) width[c], v);
                        else
                                printf("%s\n", v);
                }
        return EXIT_OK;
}

int connect_sbxd(const char *path, int *ret_fd) {
        return wire_connect(path, ret_fd);
}

static int exit_status_for_err(int err) {
        switch (err) {
        case -ENOENT:
                return EXIT_NOT_FOUND;
        case -EPERM:
        case -EACCES:
                return EXIT_DENIED;
        default:
                return EXIT_FAILED;
        }
}

int ctl_reply_check(const char *what, const Sbx__Reply *reply, Sbx__Reply__BodyCase expect, bool map_err) {
        if (reply->err > 0) {
                fprintf(stderr, "%s: malformed reply from sbxd to the %s request: positive err %" PRId32 "\n",
                        program, what, reply->err);
                return EXIT_FAILED;
        }
        if (reply->err < 0) {
                fprintf(stderr, "%s: ", program);
                if (reply->errmsg && *reply->errmsg)
                        fputs_safe(reply->errmsg, stderr);
                else
                        fprintf(stderr, "%s request failed: %s", what, strerror(-reply->err));
                fputc('\n', stderr);
                return map_err ? exit_status_for_err(reply->err) : EXIT_FAILED;
        }
        if (expect != SBX__REPLY__BODY__NOT_SET && reply->body_case != expect) {
                fprintf(stderr, "%s: malformed reply from sbxd to the %s request: missing or wrong body\n",
                        program, what);
                return EXIT_FAILED;
        }
        return EXIT_OK;
}

int transact(int fd, const char *what, const Sbx__Msg *req, uint32_t seq,
                    Sbx__Reply__BodyCase expect, bool map_err, Sbx__Msg **ret_msg) {
        _cleanup_msg_ Sbx__Msg *msg = NULL;
        uint32_t rseq;
        int r;

        r = wire_send(fd, req, seq, NULL, 0);
        if (r < 0) {
                fprintf(stderr, "%s: failed to send %s request to sbxd: %s\n", program, what, strerror(-r));
                return EXIT_FAILED;
        }

        for (;;) {
                int fds[SBX_WIRE_MAX_FDS];
                size_t n_fds = 0;

                r = wire_recv(fd, &msg, &rseq, fds, &n_fds);
                if (r >= 0 && msg->type == SBX__MSG_TYPE__MSG_REPLY && msg->reply->in_fd) {
                        Sbx__Reply *whole = NULL;

                        /* Larger than a frame: the whole reply came in the memfd. */
                        r = n_fds > 0 ? wire_reply_from_fd(fds[0], SBX_REPLY_IN_FD_MAX, &whole) : -EBADMSG;
                        if (r >= 0) {
                                sbx__reply__free_unpacked(msg->reply, NULL);
                                msg->reply = whole;
                        }
                }
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (r == -ECONNRESET) {
                        fprintf(stderr, "%s: sbxd closed the connection before answering the %s request "
                                "(sbxd drops a client whose request it does not know: is it older than this "
                                "sbxctl? Its log says why)\n", program, what);
                        return EXIT_FAILED;
                }
                if (r == -EPROTO) {
                        fprintf(stderr, "%s: sbxd speaks another protocol version (sbxctl speaks %u)\n",
                                program, SBX_PROTO_VERSION);
                        return EXIT_FAILED;
                }
                if (r == -EBADMSG) {
                        fprintf(stderr, "%s: malformed or oversized reply from sbxd to the %s request\n",
                                program, what);
                        return EXIT_FAILED;
                }
                if (r < 0) {
                        fprintf(stderr, "%s: failed to receive the reply to the %s request: %s\n",
                                program, what, strerror(-r));
                        return EXIT_FAILED;
                }
                if (msg->type == SBX__MSG_TYPE__MSG_REPLY && rseq == seq)
                        break;
                sbx__msg__free_unpacked(TAKE_PTR(msg), NULL);
        }

        r = ctl_reply_check(what, msg->reply, expect, map_err);
        if (r != EXIT_OK)
                return r;
        *ret_msg = TAKE_PTR(msg);
        return EXIT_OK;
}

/* A session or command id from the command line: non-empty and short; what
 * ids look like is the supervisor's business. */
size_t ctl_noun_len(const char *words) {
        return strcspn(words, " ");
}

const char *ctl_second_word(const char *words) {
        const char *sp = strchr(words, ' ');

        return sp ? sp + 1 : NULL;
}

int check_id(const char *what, const char *s) {
        if (*s == '\0')
                return usage_error("%s must not be empty", what);
        if (strlen(s) > SBX_NAME_MAX)
                return usage_error("%s '%.20s...' is longer than %u bytes", what, s, SBX_NAME_MAX);
        return EXIT_OK;
}

void *ctl_request_body(CtlRequest *req, Sbx__MsgType type, const ProtobufCMessageDescriptor *desc) {
        return wire_msg_body(&req->msg, type, desc, req->body.bytes, sizeof(req->body));
}
