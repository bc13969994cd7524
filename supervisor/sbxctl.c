/* sbxctl: the administrator's client of sbxd. A thin client (R16): it parses
 * the command line, sends one request on sbxd.sock after the hello, prints
 * the reply, and turns the server's err into an exit status. */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "sbx-limits.h"
#include "macro.h"
#include "wire.h"

#define SBX_SOCKET_DEFAULT "/run/sbx/sbxd.sock"

/* Exit statuses, documented in sbxctl(8). */
enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1,        /* the request failed, or a bad reply */
        EXIT_USAGE = 2,
        EXIT_UNREACHABLE = 3,   /* cannot connect to sbxd */
        EXIT_NOT_FOUND = 4,     /* err == -ENOENT */
        EXIT_DENIED = 5,        /* err == -EPERM or -EACCES */
};

typedef enum Verb {
        VERB_HELP,
        VERB_VERSION,
        VERB_SANDBOX_CREATE,
        VERB_SANDBOX_LIST,
        VERB_SANDBOX_DELETE,
        VERB_STATUS,
} Verb;

enum {
        OPT_SOCKET = 0x100,
        OPT_JSON,
        OPT_SOURCE,
        OPT_MEMORY,
        OPT_PIDS,
        OPT_OWNER,
        OPT_VERSION,
};

typedef struct Args {
        Verb verb;
        const char *socket_path;
        bool json;
        const char *name;
        char *source_dir;       /* realpath() result, owned */
        uint64_t memory_bytes;
        uint32_t pids_max;
        bool has_owner;
        uint32_t owner_uid;
        /* which create-only option was given last, for the usage error */
        const char *create_option;
} Args;

static void args_done(Args *a) {
        free(a->source_dir);
}

static const char *program = "sbxctl";

#ifndef assert_not_reached
#define assert_not_reached() do { assert(!"reached"); abort(); } while (0)
#endif

static bool str_eq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

static void help(void) {
        printf("Usage: %1$s [--socket PATH] [--json] COMMAND\n"
               "\n"
               "Administer the sbx sandbox service through sbxd.\n"
               "\n"
               "Commands:\n"
               "  sandbox create NAME --source DIR [--memory BYTES] [--pids N] [--owner UID]\n"
               "                          import DIR as a new sandbox\n"
               "  sandbox list            list sandboxes\n"
               "  sandbox delete NAME     delete a sandbox and its layers\n"
               "  status                  show the state of sbxd\n"
               "\n"
               "Options:\n"
               "  --socket PATH   sbxd socket (default: $SBX_SOCKET or %2$s)\n"
               "  --json          print the reply as JSON\n"
               "  --source DIR    directory to import (made absolute)\n"
               "  --memory BYTES  memory limit; K, M and G suffixes are powers of 1024\n"
               "  --pids N        maximum number of processes\n"
               "  --owner UID     owner of the new sandbox, a uid or user name (root only)\n"
               "  -h, --help      show this help\n"
               "  --version       show the version\n"
               "\n"
               "Exit status: 0 success, 1 request failed, 2 usage error, 3 cannot reach sbxd,\n"
               "4 not found, 5 permission denied. See sbxctl(8).\n",
               program, SBX_SOCKET_DEFAULT);
}

static int usage_error(const char *fmt, ...) _printf_(1, 2);
static int usage_error(const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "%s: ", program);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nTry '%s --help' for more information.\n", program);
        return EXIT_USAGE;
}

/* Print a server- or host-supplied string with control characters replaced,
 * so that a reply cannot drive the terminal. Keeps the byte count. */
static void fputs_safe(const char *s, FILE *f) {
        for (; *s; s++)
                fputc((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

/* ---- option values ----------------------------------------------------- */

static int parse_u64(const char *s, uint64_t *ret, const char **ret_end) {
        unsigned long long v;
        char *end;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        *ret = v;
        *ret_end = end;
        return 0;
}

/* BYTES, or a number with a K, M or G suffix (powers of 1024); positive. */
static int parse_size(const char *s, uint64_t *ret) {
        const char *end;
        unsigned shift = 0;
        uint64_t v;
        int r;

        r = parse_u64(s, &v, &end);
        if (r < 0)
                return r;
        switch (*end) {
        case '\0': break;
        case 'k': case 'K': shift = 10; end++; break;
        case 'm': case 'M': shift = 20; end++; break;
        case 'g': case 'G': shift = 30; end++; break;
        default: return -EINVAL;
        }
        if (*end != '\0' || v == 0)
                return -EINVAL;
        if (v > (UINT64_MAX >> shift))
                return -ERANGE;
        *ret = v << shift;
        return 0;
}

static int parse_positive_u32(const char *s, uint32_t *ret) {
        const char *end;
        uint64_t v;
        int r;

        r = parse_u64(s, &v, &end);
        if (r < 0)
                return r;
        if (*end != '\0' || v == 0)
                return -EINVAL;
        if (v > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

/* A numeric uid or a user name. */
static int parse_owner(const char *s, uint32_t *ret) {
        const struct passwd *pw;
        const char *end;
        uint64_t v;

        if (parse_u64(s, &v, &end) >= 0 && *end == '\0') {
                if (v >= UINT32_MAX)    /* (uid_t) -1 is not a uid */
                        return -ERANGE;
                *ret = (uint32_t) v;
                return 0;
        }
        errno = 0;
        pw = getpwnam(s);
        if (!pw)
                return errno > 0 ? -errno : -ESRCH;
        *ret = (uint32_t) pw->pw_uid;
        return 0;
}

static int parse_source(const char *s, char **ret) {
        _cleanup_free_ char *p = NULL;
        struct stat st;

        if (*s == '\0')
                return -EINVAL;
        p = realpath(s, NULL);
        if (!p)
                return -errno;
        if (stat(p, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        *ret = TAKE_PTR(p);
        return 0;
}

/* ---- command line -------------------------------------------------------- */

/* Fills *a; returns 0, or EXIT_USAGE after saying why on stderr. */
static int parse_argv(int argc, char *argv[], Args *a) {
        static const struct option options[] = {
                { "socket",  required_argument, NULL, OPT_SOCKET },
                { "json",    no_argument,       NULL, OPT_JSON },
                { "source",  required_argument, NULL, OPT_SOURCE },
                { "memory",  required_argument, NULL, OPT_MEMORY },
                { "pids",    required_argument, NULL, OPT_PIDS },
                { "owner",   required_argument, NULL, OPT_OWNER },
                { "help",    no_argument,       NULL, 'h' },
                { "version", no_argument,       NULL, OPT_VERSION },
                {}
        };
        const char *pos[4];
        size_t n_pos = 0, need;
        const char *source = NULL;
        bool want_help = false, want_version = false;
        int c, r;

        opterr = 0;
        /* "-": positional arguments come back as 1, in order, so options may
         * follow the subcommand even with POSIXLY_CORRECT set. */
        while ((c = getopt_long(argc, argv, "-:h", options, NULL)) >= 0) {
                switch (c) {
                case 1:
                        /* pos holds one more than any command takes, enough
                         * for the check below to name the first extra one. */
                        if (n_pos < ELEMENTSOF(pos))
                                pos[n_pos++] = optarg;
                        break;
                case OPT_SOCKET:
                        if (*optarg == '\0')
                                return usage_error("--socket needs a path");
                        a->socket_path = optarg;
                        break;
                case OPT_JSON:
                        a->json = true;
                        break;
                case OPT_SOURCE:
                        source = optarg;
                        a->create_option = "--source";
                        break;
                case OPT_MEMORY:
                        r = parse_size(optarg, &a->memory_bytes);
                        if (r < 0)
                                return usage_error("invalid --memory '%s': expected a positive number of bytes, "
                                                   "optionally with a K, M or G suffix", optarg);
                        a->create_option = "--memory";
                        break;
                case OPT_PIDS:
                        r = parse_positive_u32(optarg, &a->pids_max);
                        if (r < 0)
                                return usage_error("invalid --pids '%s': expected a positive integer up to %" PRIu32,
                                                   optarg, UINT32_MAX);
                        a->create_option = "--pids";
                        break;
                case OPT_OWNER:
                        r = parse_owner(optarg, &a->owner_uid);
                        if (r < 0)
                                return usage_error("invalid --owner '%s': expected a uid or a user name", optarg);
                        a->has_owner = true;
                        a->create_option = "--owner";
                        break;
                case 'h':
                        want_help = true;
                        break;
                case OPT_VERSION:
                        want_version = true;
                        break;
                case ':':
                        return usage_error("option '%s' needs an argument", argv[optind - 1]);
                default:
                        if (optopt >= 0x100)
                                return usage_error("option '%s' does not take an argument", argv[optind - 1]);
                        if (optopt > 0)
                                return usage_error("unknown option '-%c'", optopt);
                        return usage_error("unknown option '%s'", argv[optind - 1]);
                }
        }
        /* After "--", getopt leaves the rest in argv[optind..]. */
        for (; optind < argc && n_pos < ELEMENTSOF(pos); optind++)
                pos[n_pos++] = argv[optind];

        if (want_help || want_version) {
                a->verb = want_help ? VERB_HELP : VERB_VERSION;
                return 0;
        }

        if (n_pos == 0)
                return usage_error("missing command");
        if (str_eq(pos[0], "status")) {
                a->verb = VERB_STATUS;
                need = 1;
        } else if (str_eq(pos[0], "sandbox")) {
                if (n_pos < 2)
                        return usage_error("missing sandbox command (create, list or delete)");
                if (str_eq(pos[1], "create")) {
                        a->verb = VERB_SANDBOX_CREATE;
                        need = 3;
                } else if (str_eq(pos[1], "list")) {
                        a->verb = VERB_SANDBOX_LIST;
                        need = 2;
                } else if (str_eq(pos[1], "delete")) {
                        a->verb = VERB_SANDBOX_DELETE;
                        need = 3;
                } else
                        return usage_error("unknown sandbox command '%s'", pos[1]);
        } else
                return usage_error("unknown command '%s'", pos[0]);

        if (n_pos > need)
                return usage_error("unexpected argument '%s'", pos[need]);
        if (n_pos < need)
                return usage_error("missing sandbox NAME");
        if (need == 3) {
                a->name = pos[2];
                if (*a->name == '\0')
                        return usage_error("sandbox NAME must not be empty");
        }

        if (a->verb != VERB_SANDBOX_CREATE && a->create_option)
                return usage_error("%s is only valid with 'sandbox create'", a->create_option);
        if (a->verb == VERB_SANDBOX_DELETE && a->json)
                return usage_error("--json is not valid with 'sandbox delete'");
        if (a->verb == VERB_SANDBOX_CREATE) {
                if (!source)
                        return usage_error("'sandbox create' needs --source DIR");
                r = parse_source(source, &a->source_dir);
                if (r < 0)
                        return usage_error("invalid --source '%s': %s", source, strerror(-r));
        }

        if (!a->socket_path) {
                const char *e = getenv("SBX_SOCKET");
                a->socket_path = e && *e ? e : SBX_SOCKET_DEFAULT;
        }
        return 0;
}

/* ---- talking to sbxd ----------------------------------------------------- */

static int connect_sbxd(const char *path, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strlen(path);

        if (len >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, len + 1);

        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
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

/* The one request/reply round trip: send req with seq, wait for the
 * MSG_REPLY carrying the same seq (other frames are skipped), and check it.
 * A refusal (err < 0) prints errmsg and maps err to an exit status when
 * map_err is set, otherwise exits EXIT_FAILED. On success the reply carries
 * the body `expect` (unless BODY__NOT_SET) and *ret_msg owns it.
 * Returns EXIT_OK or the exit status, having said why on stderr. */
static int transact(int fd, const char *what, const Sbx__Msg *req, uint32_t seq,
                    Sbx__Reply__BodyCase expect, bool map_err, Sbx__Msg **ret_msg) {
        _cleanup_msg_ Sbx__Msg *msg = NULL;
        const Sbx__Reply *reply;
        uint32_t rseq;
        int r;

        r = wire_send(fd, req, seq, NULL, 0);
        if (r < 0) {
                fprintf(stderr, "%s: failed to send %s request to sbxd: %s\n", program, what, strerror(-r));
                return EXIT_FAILED;
        }

        for (;;) {
                r = wire_recv(fd, &msg, &rseq, NULL, NULL);
                if (r == -ECONNRESET) {
                        fprintf(stderr, "%s: sbxd closed the connection before answering the %s request\n",
                                program, what);
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

        reply = msg->reply;
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
        *ret_msg = TAKE_PTR(msg);
        return EXIT_OK;
}

/* ---- printing ------------------------------------------------------------ */

static void format_size(uint64_t bytes, char *buf, size_t size) {
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

static void format_uptime(double seconds, char *buf, size_t size) {
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

/* A JSON string that jansson accepts even if the reply's bytes are not UTF-8. */
static json_t *json_str(const char *s) {
        _cleanup_free_ char *copy = NULL;
        json_t *j;

        j = json_string(s);
        if (j)
                return j;
        copy = strdup(s);
        if (!copy)
                return NULL;
        for (char *p = copy; *p; p++)
                if ((unsigned char) *p >= 0x80)
                        *p = '?';
        return json_string(copy);
}

static json_int_t json_u64(uint64_t v) {
        return v > (uint64_t) INT64_MAX ? INT64_MAX : (json_int_t) v;
}

static json_t *sandbox_to_json(const Sbx__SandboxInfo *s) {
        return json_pack("{s:o, s:I, s:o, s:I, s:I, s:I, s:I, s:I}",
                         "name", json_str(s->name),
                         "owner_uid", (json_int_t) s->owner_uid,
                         "source_dir", json_str(s->source_dir),
                         "memory_bytes", json_u64(s->memory_bytes),
                         "pids_max", (json_int_t) s->pids_max,
                         "layer_count", (json_int_t) s->layer_count,
                         "live_sessions", (json_int_t) s->live_sessions,
                         "created_unix", (json_int_t) s->created_unix);
}

static json_t *status_to_json(const Sbx__StatusReply *s) {
        return json_pack("{s:o, s:I, s:I, s:f, s:o, s:I, s:I, s:I, s:I, s:o, s:o}",
                         "version", json_str(s->version),
                         "proto_version", (json_int_t) s->proto_version,
                         "pid", (json_int_t) s->pid,
                         "uptime_seconds", s->uptime_seconds,
                         "cgroup_backend", json_str(s->cgroup_backend),
                         "sandboxes", (json_int_t) s->sandboxes,
                         "live_sessions", (json_int_t) s->live_sessions,
                         "running_commands", (json_int_t) s->running_commands,
                         "clients", (json_int_t) s->clients,
                         "state_dir", json_str(s->state_dir),
                         "run_dir", json_str(s->run_dir));
}

/* Print j (taking ownership) on stdout, followed by a newline. */
static int print_json(json_t *j) {
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

static int print_sandbox_list(const Sbx__SandboxListReply *l, bool json) {
        enum { C_NAME, C_OWNER, C_LAYERS, C_SESSIONS, C_MEMORY, C_PIDS, C_SOURCE, N_COLS };
        static const char *const header[N_COLS] = {
                "NAME", "OWNER", "LAYERS", "SESSIONS", "MEMORY", "PIDS", "SOURCE",
        };
        _cleanup_free_ char (*cells)[N_COLS][24] = NULL;
        size_t width[N_COLS];

        if (json) {
                json_t *a = json_array();

                for (size_t i = 0; a && i < l->n_sandboxes; i++)
                        if (json_array_append_new(a, sandbox_to_json(l->sandboxes[i])) < 0) {
                                json_decref(a);
                                a = NULL;
                        }
                return print_json(a);
        }

        /* Numeric cells are formatted once; NAME and SOURCE come from the reply. */
        cells = calloc(l->n_sandboxes ?: 1, sizeof(*cells));
        if (!cells) {
                fprintf(stderr, "%s: out of memory\n", program);
                return EXIT_FAILED;
        }
        for (size_t c = 0; c < N_COLS; c++)
                width[c] = strlen(header[c]);
        for (size_t i = 0; i < l->n_sandboxes; i++) {
                const Sbx__SandboxInfo *s = l->sandboxes[i];

                snprintf(cells[i][C_OWNER], sizeof(cells[i][C_OWNER]), "%" PRIu32, s->owner_uid);
                snprintf(cells[i][C_LAYERS], sizeof(cells[i][C_LAYERS]), "%" PRIu32, s->layer_count);
                snprintf(cells[i][C_SESSIONS], sizeof(cells[i][C_SESSIONS]), "%" PRIu32, s->live_sessions);
                format_size(s->memory_bytes, cells[i][C_MEMORY], sizeof(cells[i][C_MEMORY]));
                if (s->pids_max == 0)
                        snprintf(cells[i][C_PIDS], sizeof(cells[i][C_PIDS]), "default");
                else
                        snprintf(cells[i][C_PIDS], sizeof(cells[i][C_PIDS]), "%" PRIu32, s->pids_max);
                width[C_NAME] = MAX(width[C_NAME], strlen(s->name));
                for (size_t c = C_OWNER; c < C_SOURCE; c++)
                        width[c] = MAX(width[c], strlen(cells[i][c]));
        }

        for (size_t c = 0; c < C_SOURCE; c++)
                printf("%-*s  ", (int) width[c], header[c]);
        printf("%s\n", header[C_SOURCE]);
        for (size_t i = 0; i < l->n_sandboxes; i++) {
                const Sbx__SandboxInfo *s = l->sandboxes[i];

                fputs_safe(s->name, stdout);
                printf("%*s  ", (int) (width[C_NAME] - strlen(s->name)), "");
                for (size_t c = C_OWNER; c < C_SOURCE; c++)
                        printf("%-*s  ", (int) width[c], cells[i][c]);
                fputs_safe(s->source_dir, stdout);
                putchar('\n');
        }
        return EXIT_OK;
}

static int print_status(const Sbx__StatusReply *s, bool json) {
        char uptime[64];

        if (json)
                return print_json(status_to_json(s));

        format_uptime(s->uptime_seconds, uptime, sizeof(uptime));
        fputs("version: ", stdout);
        fputs_safe(s->version, stdout);
        printf("\nprotocol: %" PRIu32 "\n", s->proto_version);
        printf("pid: %" PRId64 "\n", s->pid);
        printf("uptime: %s\n", uptime);
        fputs("cgroup backend: ", stdout);
        fputs_safe(s->cgroup_backend, stdout);
        printf("\nsandboxes: %" PRIu32 "\n", s->sandboxes);
        printf("live sessions: %" PRIu32 "\n", s->live_sessions);
        printf("running commands: %" PRIu32 "\n", s->running_commands);
        printf("clients: %" PRIu32 "\n", s->clients);
        fputs("state dir: ", stdout);
        fputs_safe(s->state_dir, stdout);
        fputs("\nrun dir: ", stdout);
        fputs_safe(s->run_dir, stdout);
        putchar('\n');
        return EXIT_OK;
}

/* ---- main ---------------------------------------------------------------- */

static int run(const Args *a) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_msg_ Sbx__Msg *hello_reply = NULL, *reply = NULL;
        Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
        Sbx__SandboxCreate create = SBX__SANDBOX_CREATE__INIT;
        Sbx__SandboxList list = SBX__SANDBOX_LIST__INIT;
        Sbx__SandboxDelete del = SBX__SANDBOX_DELETE__INIT;
        Sbx__Status status = SBX__STATUS__INIT;
        Sbx__Msg req = SBX__MSG__INIT;
        Sbx__Reply__BodyCase expect = SBX__REPLY__BODY__NOT_SET;
        const char *what = NULL;
        int r;

        req.type = SBX__MSG_TYPE__MSG_CLIENT_HELLO;
        req.body_case = SBX__MSG__BODY_HELLO;
        req.hello = &hello;
        hello.client_name = (char *) "sbxctl";

        r = connect_sbxd(a->socket_path, &fd);
        if (r == -ENAMETOOLONG)
                return usage_error("socket path '%s' is too long", a->socket_path);
        if (r < 0) {
                fprintf(stderr, "%s: cannot reach sbxd at %s: %s; is sbxd running?\n",
                        program, a->socket_path, strerror(-r));
                return EXIT_UNREACHABLE;
        }

        r = transact(fd, "hello", &req, 0, SBX__REPLY__BODY__NOT_SET, false, &hello_reply);
        if (r != EXIT_OK)
                return r;

        req = (Sbx__Msg) SBX__MSG__INIT;
        switch (a->verb) {
        case VERB_SANDBOX_CREATE:
                create.name = (char *) a->name;
                create.source_dir = a->source_dir;
                create.memory_bytes = a->memory_bytes;
                create.pids_max = a->pids_max;
                create.has_owner = a->has_owner;
                create.owner_uid = a->owner_uid;
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_CREATE;
                req.body_case = SBX__MSG__BODY_SANDBOX_CREATE;
                req.sandbox_create = &create;
                what = "sandbox create";
                if (a->json)
                        expect = SBX__REPLY__BODY_SANDBOX;
                break;
        case VERB_SANDBOX_LIST:
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST;
                req.body_case = SBX__MSG__BODY_SANDBOX_LIST;
                req.sandbox_list = &list;
                what = "sandbox list";
                expect = SBX__REPLY__BODY_SANDBOX_LIST;
                break;
        case VERB_SANDBOX_DELETE:
                del.name = (char *) a->name;
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_DELETE;
                req.body_case = SBX__MSG__BODY_SANDBOX_DELETE;
                req.sandbox_delete = &del;
                what = "sandbox delete";
                break;
        case VERB_STATUS:
                req.type = SBX__MSG_TYPE__MSG_CLIENT_STATUS;
                req.body_case = SBX__MSG__BODY_STATUS;
                req.status = &status;
                what = "status";
                expect = SBX__REPLY__BODY_STATUS;
                break;
        case VERB_HELP:
        case VERB_VERSION:
                assert_not_reached();
        }

        r = transact(fd, what, &req, 1, expect, true, &reply);
        if (r != EXIT_OK)
                return r;

        switch (a->verb) {
        case VERB_SANDBOX_CREATE:
                if (a->json)
                        return print_json(sandbox_to_json(reply->reply->sandbox));
                fputs("created sandbox ", stdout);
                fputs_safe(a->name, stdout);
                putchar('\n');
                return EXIT_OK;
        case VERB_SANDBOX_LIST:
                return print_sandbox_list(reply->reply->sandbox_list, a->json);
        case VERB_SANDBOX_DELETE:
                fputs("deleted sandbox ", stdout);
                fputs_safe(a->name, stdout);
                putchar('\n');
                return EXIT_OK;
        case VERB_STATUS:
                return print_status(reply->reply->status, a->json);
        case VERB_HELP:
        case VERB_VERSION:
                break;
        }
        assert_not_reached();
}

int main(int argc, char *argv[]) {
        _cleanup_(args_done) Args args = {};
        int r;

        r = parse_argv(argc, argv, &args);
        if (r != EXIT_OK)
                return r;
        switch (args.verb) {
        case VERB_HELP:
                help();
                break;
        case VERB_VERSION:
                printf("%s %s (protocol %u)\n", program, SBX_VERSION, SBX_PROTO_VERSION);
                break;
        case VERB_SANDBOX_CREATE:
        case VERB_SANDBOX_LIST:
        case VERB_SANDBOX_DELETE:
        case VERB_STATUS:
                r = run(&args);
                break;
        }

        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "%s: failed to write output: %s\n", program, strerror(errno));
                if (r == EXIT_OK)
                        r = EXIT_FAILED;
        }
        return r;
}
