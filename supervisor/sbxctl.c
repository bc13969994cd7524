/* sbxctl: the administrator's client of sbxd. A thin client (R16): it parses
 * the command line, sends one request on sbxd.sock after the hello, prints
 * the reply, and turns the server's err into an exit status. `image list`
 * alone is answered locally: the only image is built into sbxd. */
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
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "fd-util.h"
#include "os/image.h"
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
        EXIT_CONFLICT = 6,      /* session finalize refused: conflicting paths */
};

typedef enum Verb {
        VERB_HELP,
        VERB_VERSION,
        VERB_SANDBOX_CREATE,
        VERB_SANDBOX_LIST,
        VERB_SANDBOX_SHOW,
        VERB_SANDBOX_DELETE,
        VERB_IMAGE_LIST,
        VERB_SESSION_LIST,
        VERB_SESSION_CREATE,
        VERB_SESSION_FINALIZE,
        VERB_SESSION_DIFF,
        VERB_COMMAND_LIST,
        VERB_COMMAND_CANCEL,
        VERB_LAYER_LIST,
        VERB_GC,
        VERB_STATUS,
} Verb;

/* The command table: "NOUN VERB ARGS..." (or "NOUN ARGS..." when verb is NULL). */
static const struct {
        const char *noun, *verb;
        Verb id;
        unsigned n_args;        /* positional arguments after the command words */
        const char *args;       /* their names, for "missing ..." */
} commands[] = {
        { "sandbox", "create",   VERB_SANDBOX_CREATE,   1, "sandbox NAME" },
        { "sandbox", "list",     VERB_SANDBOX_LIST,     0, NULL },
        { "sandbox", "show",     VERB_SANDBOX_SHOW,     1, "sandbox NAME" },
        { "sandbox", "delete",   VERB_SANDBOX_DELETE,   1, "sandbox NAME" },
        { "image",   "list",     VERB_IMAGE_LIST,       0, NULL },
        { "session", "list",     VERB_SESSION_LIST,     1, "SANDBOX" },
        { "session", "create",   VERB_SESSION_CREATE,   1, "SANDBOX" },
        { "session", "finalize", VERB_SESSION_FINALIZE, 2, "SANDBOX and session ID" },
        { "session", "diff",     VERB_SESSION_DIFF,     2, "SANDBOX and session ID" },
        { "command", "list",     VERB_COMMAND_LIST,     1, "SANDBOX" },
        { "command", "cancel",   VERB_COMMAND_CANCEL,   2, "SANDBOX and command ID" },
        { "layer",   "list",     VERB_LAYER_LIST,       1, "SANDBOX" },
        { "gc",      NULL,       VERB_GC,               0, NULL },
        { "status",  NULL,       VERB_STATUS,           0, NULL },
};

enum {
        OPT_SOCKET = 0x100,
        OPT_JSON,
        OPT_SOURCE,
        OPT_MEMORY,
        OPT_PIDS,
        OPT_CPU_WEIGHT,
        OPT_OWNER,
        OPT_VERSION,
        OPT_SESSION,
        OPT_POLICY,
        OPT_PUBLISH,
        OPT_DISCARD,
        OPT_OVERWRITE,
};

typedef struct Args {
        Verb verb;
        const char *socket_path;
        bool json;
        const char *name;       /* the sandbox */
        const char *id;         /* the session or command */
        char *source_dir;       /* absolute, owned */
        uint64_t memory_bytes;
        uint32_t pids_max;
        uint32_t cpu_weight;
        bool has_owner;
        uint32_t owner_uid;
        const char *session;    /* command list --session */
        const char *policy;     /* session create --policy */
        const char *action;     /* session finalize --publish/--discard */
        bool overwrite;
        /* the last option given that only one command takes, for the usage error */
        const char *create_option, *session_option, *policy_option, *finalize_option;
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
               "  sandbox create NAME --source DIR [--memory BYTES] [--pids N] [--cpu-weight N] [--owner UID]\n"
               "                                 import DIR as a new sandbox\n"
               "  sandbox list                   list sandboxes\n"
               "  sandbox show NAME              show one sandbox\n"
               "  sandbox delete NAME            delete a sandbox and its layers\n"
               "  image list                     list images (no round trip to sbxd)\n"
               "  session list SANDBOX           list a sandbox's workspace sessions\n"
               "  session create SANDBOX [--policy publish_then_destroy|destroy]\n"
               "                                 start a managed workspace session\n"
               "  session finalize SANDBOX ID [--publish [--overwrite] | --discard]\n"
               "                                 publish or discard a session and end it\n"
               "  session diff SANDBOX ID        show what a session changed\n"
               "  command list SANDBOX [--session ID]\n"
               "                                 list commands and how they ended\n"
               "  command cancel SANDBOX ID      cancel a running command\n"
               "  layer list SANDBOX             list a sandbox's published layers\n"
               "  gc                             remove what nothing uses any more\n"
               "  status                         show the state of sbxd\n"
               "\n"
               "Options:\n"
               "  --socket PATH   sbxd socket (default: $SBX_SOCKET or %2$s)\n"
               "  --json          print the reply as JSON\n"
               "  --source DIR    directory to import (made absolute, no symlink followed)\n"
               "  --memory BYTES  memory limit; K, M and G suffixes are powers of 1024\n"
               "  --cpu-weight N  relative CPU share, 1 to 10000 (default 100)\n"
               "  --pids N        maximum number of processes\n"
               "  --owner UID     owner of the new sandbox, a uid or user name (root only)\n"
               "  --session ID    only the commands of this workspace session\n"
               "  --policy P      finalize policy of a new session\n"
               "  --publish, --discard, --overwrite\n"
               "                  how to finalize (default: the session's policy)\n"
               "  -h, --help      show this help\n"
               "  --version       show the version\n"
               "\n"
               "Exit status: 0 success, 1 request failed, 2 usage error, 3 cannot reach sbxd,\n"
               "4 not found, 5 permission denied, 6 publication refused by conflicts.\n"
               "See sbxctl(8).\n",
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

/* The same for multi-line text (a diff): newlines and tabs pass. */
static void fwrite_text_safe(const uint8_t *s, size_t n, FILE *f) {
        for (size_t i = 0; i < n; i++)
                fputc((s[i] < 0x20 && s[i] != '\n' && s[i] != '\t') || s[i] == 0x7f ? '?' : s[i], f);
}

/* ---- option values ----------------------------------------------------- */

/* BYTES, or a number with a K, M or G suffix (powers of 1024); positive. */
static int parse_positive_size(const char *s, uint64_t *ret) {
        int r = parse_size(s, ret);

        return r < 0 ? r : *ret == 0 ? -EINVAL : 0;
}

static int parse_positive_u32(const char *s, uint32_t *ret) {
        uint64_t v;
        int r;

        r = parse_u64(s, &v);
        if (r < 0)
                return r;
        if (v == 0)
                return -EINVAL;
        if (v > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

/* A numeric uid or a user name. */
static int parse_owner(const char *s, uint32_t *ret) {
        const struct passwd *pw;
        uint64_t v;

        if (parse_u64(s, &v) >= 0) {
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

/* Made absolute against the working directory, but not resolved: sbxd
 * follows no symlink on the way to a source, and a root sbxctl must not
 * follow them for it either. */
static int parse_source(const char *s, char **ret) {
        _cleanup_free_ char *cwd = NULL;
        char *p;

        if (*s == '\0')
                return -EINVAL;
        if (s[0] == '/')
                p = strdup(s);
        else if (!(cwd = getcwd(NULL, 0)) || asprintf(&p, "%s/%s", cwd, s) < 0)
                p = NULL;
        if (!p)
                return errno > 0 ? -errno : -ENOMEM;
        *ret = p;
        return 0;
}

/* ---- command line -------------------------------------------------------- */

/* A session or command id from the command line: non-empty and short; what
 * ids look like is the supervisor's business. */
static int check_id(const char *what, const char *s) {
        if (*s == '\0')
                return usage_error("%s must not be empty", what);
        if (strlen(s) > SBX_NAME_MAX)
                return usage_error("%s '%.20s...' is longer than %u bytes", what, s, SBX_NAME_MAX);
        return EXIT_OK;
}

/* Fills *a; returns 0, or EXIT_USAGE after saying why on stderr. */
static int parse_argv(int argc, char *argv[], Args *a) {
        static const struct option options[] = {
                { "socket",    required_argument, NULL, OPT_SOCKET },
                { "json",      no_argument,       NULL, OPT_JSON },
                { "source",    required_argument, NULL, OPT_SOURCE },
                { "memory",    required_argument, NULL, OPT_MEMORY },
                { "pids",      required_argument, NULL, OPT_PIDS },
                { "cpu-weight", required_argument, NULL, OPT_CPU_WEIGHT },
                { "owner",     required_argument, NULL, OPT_OWNER },
                { "session",   required_argument, NULL, OPT_SESSION },
                { "policy",    required_argument, NULL, OPT_POLICY },
                { "publish",   no_argument,       NULL, OPT_PUBLISH },
                { "discard",   no_argument,       NULL, OPT_DISCARD },
                { "overwrite", no_argument,       NULL, OPT_OVERWRITE },
                { "help",      no_argument,       NULL, 'h' },
                { "version",   no_argument,       NULL, OPT_VERSION },
                {}
        };
        const char *pos[5];
        size_t n_pos = 0, words, need;
        const char *source = NULL;
        bool want_help = false, want_version = false, found = false;
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
                        r = parse_positive_size(optarg, &a->memory_bytes);
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
                case OPT_CPU_WEIGHT:
                        r = parse_positive_u32(optarg, &a->cpu_weight);
                        if (r < 0 || a->cpu_weight > 10000)
                                return usage_error("invalid --cpu-weight '%s': expected 1 to 10000 (100 is the default share)",
                                                   optarg);
                        a->create_option = "--cpu-weight";
                        break;
                case OPT_OWNER:
                        r = parse_owner(optarg, &a->owner_uid);
                        if (r < 0)
                                return usage_error("invalid --owner '%s': expected a uid or a user name", optarg);
                        a->has_owner = true;
                        a->create_option = "--owner";
                        break;
                case OPT_SESSION:
                        if (check_id("--session", optarg) != EXIT_OK)
                                return EXIT_USAGE;
                        a->session = optarg;
                        a->session_option = "--session";
                        break;
                case OPT_POLICY:
                        if (!str_eq(optarg, "publish_then_destroy") && !str_eq(optarg, "destroy"))
                                return usage_error("invalid --policy '%s': expected publish_then_destroy or destroy",
                                                   optarg);
                        a->policy = optarg;
                        a->policy_option = "--policy";
                        break;
                case OPT_PUBLISH:
                case OPT_DISCARD:
                        if (a->action && !str_eq(a->action, c == OPT_PUBLISH ? "publish" : "discard"))
                                return usage_error("--publish and --discard exclude each other");
                        a->action = c == OPT_PUBLISH ? "publish" : "discard";
                        a->finalize_option = c == OPT_PUBLISH ? "--publish" : "--discard";
                        break;
                case OPT_OVERWRITE:
                        a->overwrite = true;
                        a->finalize_option = "--overwrite";
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
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                if (!str_eq(pos[0], commands[i].noun))
                        continue;
                found = true;   /* a known noun */
                if (commands[i].verb && (n_pos < 2 || !str_eq(pos[1], commands[i].verb)))
                        continue;
                a->verb = commands[i].id;
                words = commands[i].verb ? 2 : 1;
                need = words + commands[i].n_args;
                if (n_pos > need)
                        return usage_error("unexpected argument '%s'", pos[need]);
                if (n_pos < need)
                        return usage_error("missing %s", commands[i].args);
                if (commands[i].n_args >= 1) {
                        a->name = pos[words];
                        if (*a->name == '\0')
                                return usage_error("sandbox NAME must not be empty");
                }
                if (commands[i].n_args >= 2 &&
                    check_id(commands[i].id == VERB_COMMAND_CANCEL ? "command ID" : "session ID", pos[words + 1]) != EXIT_OK)
                        return EXIT_USAGE;
                if (commands[i].n_args >= 2)
                        a->id = pos[words + 1];
                goto known;
        }
        if (!found)
                return usage_error("unknown command '%s'", pos[0]);
        {
                /* A known noun with a missing or unknown verb: list the verbs. */
                char verbs[128] = "";

                for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                        if (str_eq(pos[0], commands[i].noun) && commands[i].verb) {
                                if (verbs[0])
                                        strlcat(verbs, ", ", sizeof(verbs));
                                strlcat(verbs, commands[i].verb, sizeof(verbs));
                        }
                if (n_pos < 2)
                        return usage_error("missing %s command (%s)", pos[0], verbs);
                return usage_error("unknown %s command '%s' (%s)", pos[0], pos[1], verbs);
        }

known:
        if (a->verb != VERB_SANDBOX_CREATE && a->create_option)
                return usage_error("%s is only valid with 'sandbox create'", a->create_option);
        if (a->verb != VERB_COMMAND_LIST && a->session_option)
                return usage_error("%s is only valid with 'command list'", a->session_option);
        if (a->verb != VERB_SESSION_CREATE && a->policy_option)
                return usage_error("%s is only valid with 'session create'", a->policy_option);
        if (a->verb != VERB_SESSION_FINALIZE && a->finalize_option)
                return usage_error("%s is only valid with 'session finalize'", a->finalize_option);
        if (a->overwrite && a->action && str_eq(a->action, "discard"))
                return usage_error("--overwrite is only valid when publishing");
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
        return json_pack("{s:o, s:o, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                         "name", json_str(s->name),
                         "id", json_str(s->id),
                         "owner_uid", (json_int_t) s->owner_uid,
                         "source_dir", json_str(s->source_dir),
                         "memory_bytes", json_u64(s->memory_bytes),
                         "pids_max", (json_int_t) s->pids_max,
                         "cpu_weight", (json_int_t) s->cpu_weight,
                         "layer_count", (json_int_t) s->layer_count,
                         "live_sessions", (json_int_t) s->live_sessions,
                         "created_unix", (json_int_t) s->created_unix,
                         "uid_base", (json_int_t) s->uid_base,
                         "uid_count", (json_int_t) s->uid_count);
}

static json_t *status_to_json(const Sbx__StatusReply *s) {
        return json_pack("{s:o, s:I, s:I, s:f, s:o, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:b}",
                         "version", json_str(s->version),
                         "proto_version", (json_int_t) s->proto_version,
                         "pid", (json_int_t) s->pid,
                         "uptime_seconds", s->uptime_seconds,
                         "cgroup_backend", json_str(s->cgroup_backend),
                         "sandboxes", (json_int_t) s->sandboxes,
                         "live_sessions", (json_int_t) s->live_sessions,
                         "spare_sessions", (json_int_t) s->spare_sessions,
                         "running_commands", (json_int_t) s->running_commands,
                         "clients", (json_int_t) s->clients,
                         "state_dir", json_str(s->state_dir),
                         "run_dir", json_str(s->run_dir),
                         "caller_only", (int) s->caller_only);
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

/* ---- tables ---------------------------------------------------------------- */

/* A table of text cells: columns padded to their widest cell and separated by
 * two spaces, the last column unpadded. Cells are copied with control
 * characters replaced, so a reply cannot drive the terminal. */
typedef struct Table {
        size_t n_cols, n_rows, allocated;
        const char *const *header;
        char **cells;           /* n_rows * n_cols */
        bool oom;
} Table;

static void table_done(Table *t) {
        for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
                free(t->cells[i]);
        free(t->cells);
}

/* Adds one row of n_cols strings (NULL is printed as "-"). */
static void table_add(Table *t, ...) {
        va_list ap;

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
        va_start(ap, t);
        for (size_t i = 0; i < t->n_cols; i++) {
                const char *v = va_arg(ap, const char *);
                char *copy = strdup(v ?: "-");

                if (copy)
                        for (char *q = copy; *q; q++)
                                if ((unsigned char) *q < 0x20 || *q == 0x7f)
                                        *q = '?';
                t->cells[t->n_rows * t->n_cols + i] = copy;
                if (!copy)
                        t->oom = true;
        }
        va_end(ap);
        t->n_rows++;
}

static int table_print(Table *t) {
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

static void format_time(int64_t unix_seconds, char *buf, size_t size) {
        time_t t = (time_t) unix_seconds;
        struct tm tm;

        if (unix_seconds <= 0 || !localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                snprintf(buf, size, "-");
}

/* "1.2s", "3m04s"; the interval between two unix microsecond stamps. */
static void format_duration(int64_t from_usec, int64_t to_usec, char *buf, size_t size) {
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

static json_t *json_array_of(void **items, size_t n, json_t *(*to_json)(const void *)) {
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, to_json(items[i])) < 0) {
                        json_decref(a);
                        a = NULL;
                }
        return a;
}

/* ---- sandboxes and images ---------------------------------------------------- */

static json_t *sandbox_to_json_v(const void *p) {
        return sandbox_to_json(p);
}

static int print_sandbox_list(const Sbx__SandboxListReply *l, bool json) {
        static const char *const header[] = { "NAME", "OWNER", "LAYERS", "SESSIONS", "MEMORY", "PIDS", "SOURCE" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };

        if (json)
                return print_json(json_array_of((void **) l->sandboxes, l->n_sandboxes, sandbox_to_json_v));

        for (size_t i = 0; i < l->n_sandboxes; i++) {
                const Sbx__SandboxInfo *s = l->sandboxes[i];
                char owner[16], layers[16], sessions[16], memory[24], pids[16];

                snprintf(owner, sizeof(owner), "%" PRIu32, s->owner_uid);
                snprintf(layers, sizeof(layers), "%" PRIu32, s->layer_count);
                snprintf(sessions, sizeof(sessions), "%" PRIu32, s->live_sessions);
                format_size(s->memory_bytes, memory, sizeof(memory));
                if (s->pids_max == 0)
                        snprintf(pids, sizeof(pids), "default");
                else
                        snprintf(pids, sizeof(pids), "%" PRIu32, s->pids_max);
                table_add(&t, s->name, owner, layers, sessions, memory, pids, s->source_dir);
        }
        return table_print(&t);
}

static int print_sandbox_show(const Sbx__SandboxListReply *l, const char *name, bool json) {
        const Sbx__SandboxInfo *s = NULL;
        char memory[24], created[32];

        for (size_t i = 0; i < l->n_sandboxes && !s; i++)
                if (str_eq(l->sandboxes[i]->name, name))
                        s = l->sandboxes[i];
        if (!s) {
                fprintf(stderr, "%s: no sandbox '", program);
                fputs_safe(name, stderr);
                fprintf(stderr, "' that you may see; 'sbxctl sandbox list' shows them\n");
                return EXIT_NOT_FOUND;
        }
        if (json)
                return print_json(sandbox_to_json(s));

        format_size(s->memory_bytes, memory, sizeof(memory));
        format_time(s->created_unix, created, sizeof(created));
        fputs("name: ", stdout);
        fputs_safe(s->name, stdout);
        fputs("\nid: ", stdout);
        fputs_safe(s->id, stdout);
        printf("\nowner: %" PRIu32 "\n", s->owner_uid);
        fputs("source: ", stdout);
        fputs_safe(s->source_dir, stdout);
        printf("\nimage: default\n");
        printf("memory: %s\n", memory);
        if (s->pids_max == 0)
                printf("pids: default\n");
        else
                printf("pids: %" PRIu32 "\n", s->pids_max);
        printf("cpu weight: %" PRIu32 "\n", s->cpu_weight);
        if (s->uid_count > 0)
                printf("host ids: %" PRIu32 "-%" PRIu32 "\n", s->uid_base, s->uid_base + s->uid_count - 1);
        printf("layers: %" PRIu32 "\n", s->layer_count);
        printf("live sessions: %" PRIu32 "\n", s->live_sessions);
        printf("created: %s\n", created);
        return EXIT_OK;
}

/* The new sandbox, and what of its source the owner may not read (left out). */
static int print_sandbox_created(const Sbx__SandboxInfo *s, bool json) {
        if (json) {
                json_t *j = sandbox_to_json(s), *paths = json_array();
                bool ok = j && paths;

                for (size_t i = 0; ok && i < s->n_unreadable_paths; i++)
                        ok = json_array_append_new(paths, json_str(s->unreadable_paths[i])) == 0;
                ok = ok && json_object_set_new(j, "unreadable", json_integer(s->unreadable)) == 0;
                /* set_new takes the value, whether it succeeds or not */
                ok = ok && json_object_set_new(j, "unreadable_paths", TAKE_PTR(paths)) == 0;
                json_decref(paths);
                if (!ok) {
                        json_decref(j);
                        j = NULL;
                }
                return print_json(j);
        }
        fputs("created sandbox ", stdout);
        fputs_safe(s->name, stdout);
        putchar('\n');
        if (s->unreadable == 0)
                return EXIT_OK;
        printf("not imported: %" PRIu32 " entr%s of the source that the owner (uid %" PRIu32 ") may not read:",
               s->unreadable, s->unreadable == 1 ? "y" : "ies", s->owner_uid);
        for (size_t i = 0; i < s->n_unreadable_paths; i++) {
                fputs(i ? ", " : " ", stdout);
                fputs_safe(s->unreadable_paths[i], stdout);
        }
        puts(s->unreadable > s->n_unreadable_paths ? ", ..." : "");
        return EXIT_OK;
}

/* sbxd has one image, built in: answered here without a round trip. */
static int print_image_list(bool json) {
        static const char *const header[] = { "NAME", "KIND", "DESCRIPTION" };
        static const char name[] = SBX_IMAGE_DEFAULT_NAME, kind[] = "host",
                description[] = "the host's /usr (and merged-usr links) and the parts of /etc programs need, "
                                "read-only, without host secrets";
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };

        if (json)
                return print_json(json_pack("[{s:s, s:s, s:s}]", "name", name, "kind", kind,
                                            "description", description));
        table_add(&t, name, kind, description);
        return table_print(&t);
}

/* ---- sessions ------------------------------------------------------------------ */

static json_t *session_to_json(const void *p) {
        const Sbx__SessionInfo *s = p;

        return json_pack("{s:o, s:o, s:o, s:b, s:o, s:I, s:I, s:I}",
                         "workspace_session", json_str(s->workspace_session),
                         "sandbox", json_str(s->sandbox),
                         "finalize_policy", json_str(s->finalize_policy),
                         "automatic", (int) s->automatic,
                         "state", json_str(s->state),
                         "base_layer", (json_int_t) s->base_layer,
                         "created_unix", (json_int_t) s->created_unix,
                         "running_commands", (json_int_t) s->running_commands);
}

static int print_session_list(const Sbx__SessionListReply *l, bool json) {
        static const char *const header[] = { "ID", "STATE", "POLICY", "KIND", "BASE", "RUNNING", "CREATED" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };

        if (json)
                return print_json(json_array_of((void **) l->sessions, l->n_sessions, session_to_json));
        for (size_t i = 0; i < l->n_sessions; i++) {
                const Sbx__SessionInfo *s = l->sessions[i];
                char base[16], running[16], created[32];

                snprintf(base, sizeof(base), "%" PRIu32, s->base_layer);
                snprintf(running, sizeof(running), "%" PRIu32, s->running_commands);
                format_time(s->created_unix, created, sizeof(created));
                table_add(&t, s->workspace_session, s->state, s->finalize_policy,
                          s->automatic ? "automatic" : "managed", base, running, created);
        }
        return table_print(&t);
}

static json_t *publication_to_json(const Sbx__Publication *p) {
        json_t *conflicts;

        if (!p)
                return json_null();
        conflicts = json_array();
        for (size_t i = 0; conflicts && i < p->n_conflicts; i++)
                if (json_array_append_new(conflicts, json_str(p->conflicts[i])) < 0) {
                        json_decref(conflicts);
                        conflicts = NULL;
                }
        return json_pack("{s:b, s:I, s:o, s:I, s:o, s:o}",
                         "published", (int) p->published,
                         "layer", (json_int_t) p->layer,
                         "owner", json_str(p->owner),
                         "changed_paths", (json_int_t) p->changed_paths,
                         "error", json_str(p->error),
                         "conflicts", conflicts);
}

static int print_session_finalize(const Sbx__SessionFinalizeReply *f, bool json) {
        bool conflict = f->action && str_eq(f->action, "conflict");
        const Sbx__Publication *p = f->publication;
        int r = EXIT_OK;

        if (json) {
                r = print_json(json_pack("{s:o, s:o, s:o}",
                                         "session", f->session ? session_to_json(f->session) : json_null(),
                                         "action", json_str(f->action ?: ""),
                                         "publication", publication_to_json(p)));
                return r == EXIT_OK && conflict ? EXIT_CONFLICT : r;
        }
        if (conflict) {
                fprintf(stderr, "%s: publication refused: %zu path(s) changed by layers published after the "
                        "session started:\n", program, p ? p->n_conflicts : 0);
                for (size_t i = 0; p && i < p->n_conflicts; i++) {
                        fputs("  ", stderr);
                        fputs_safe(p->conflicts[i], stderr);
                        fputc('\n', stderr);
                }
                fprintf(stderr, "%s: the session is kept; retry with --publish --overwrite, or --discard\n", program);
                return EXIT_CONFLICT;
        }
        fputs(f->action && *f->action ? f->action : "finalized", stdout);
        if (f->session) {
                fputs(" session ", stdout);
                fputs_safe(f->session->workspace_session, stdout);
        }
        if (p && p->published) {
                printf(": layer %" PRIu32 ", %" PRIu32 " changed path(s), owner ", p->layer, p->changed_paths);
                fputs_safe(p->owner, stdout);
        } else if (p && p->error && *p->error) {
                fputs(": publication failed: ", stdout);
                fputs_safe(p->error, stdout);
                r = EXIT_FAILED;
        } else if (p)
                fputs(": nothing changed", stdout);
        putchar('\n');
        return r;
}

static int print_session_diff(const Sbx__SessionDiffReply *d, bool json) {
        if (json) {
                json_t *changes = json_array();

                for (size_t i = 0; changes && i < d->n_changes; i++)
                        if (json_array_append_new(changes, json_pack("{s:o, s:o}",
                                                                     "path", json_str(d->changes[i]->path),
                                                                     "change", json_str(d->changes[i]->change))) < 0) {
                                json_decref(changes);
                                changes = NULL;
                        }
                /* the diff is file content: bytes that are not UTF-8 become '?' */
                _cleanup_free_ char *text = malloc(d->diff.len + 1);
                if (!text)
                        return print_json(NULL);
                memcpy(text, d->diff.data ?: (uint8_t *) "", d->diff.len);
                text[d->diff.len] = '\0';
                for (size_t i = 0; i < d->diff.len; i++)
                        if (text[i] == '\0')
                                text[i] = '?';
                return print_json(json_pack("{s:o, s:o, s:b}", "changes", changes, "diff", json_str(text),
                                            "truncated", (int) d->truncated));
        }
        for (size_t i = 0; i < d->n_changes; i++) {
                const char *c = d->changes[i]->change;
                putchar(str_eq(c, "added") ? 'A' : str_eq(c, "deleted") ? 'D' : str_eq(c, "modified") ? 'M' : '?');
                putchar(' ');
                fputs_safe(d->changes[i]->path, stdout);
                putchar('\n');
        }
        if (d->diff.len > 0) {
                putchar('\n');
                fwrite_text_safe(d->diff.data, d->diff.len, stdout);
                if (d->diff.data[d->diff.len - 1] != '\n')
                        putchar('\n');
        }
        if (d->truncated)
                printf("(diff truncated)\n");
        return EXIT_OK;
}

/* ---- commands, layers, gc -------------------------------------------------------- */

static json_t *command_to_json(const void *p) {
        const Sbx__CommandInfo *c = p;

        return json_pack("{s:o, s:o, s:o, s:o, s:i, s:o, s:I, s:I, s:o}",
                         "command_session", json_str(c->command_session),
                         "workspace_session", json_str(c->workspace_session),
                         "status", json_str(c->status),
                         "exit_code", c->has_exit_code ? json_integer(c->exit_code) : json_null(),
                         "signal", (int) c->signal,
                         "end_reason", json_str(c->end_reason),
                         "started_unix_usec", (json_int_t) c->started_unix_usec,
                         "ended_unix_usec", (json_int_t) c->ended_unix_usec,
                         "cmd", json_str(c->cmd));
}

static int print_command_list(const Sbx__CommandListReply *l, bool json) {
        static const char *const header[] = { "ID", "SESSION", "STATUS", "EXIT", "END", "STARTED", "TIME", "COMMAND" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };

        if (json)
                return print_json(json_array_of((void **) l->commands, l->n_commands, command_to_json));
        for (size_t i = 0; i < l->n_commands; i++) {
                const Sbx__CommandInfo *c = l->commands[i];
                char exit_code[16] = "-", started[32], took[24], cmd[64];

                if (c->has_exit_code)
                        snprintf(exit_code, sizeof(exit_code), "%" PRId32, c->exit_code);
                else if (c->signal)
                        snprintf(exit_code, sizeof(exit_code), "sig %" PRId32, c->signal);
                format_time(c->started_unix_usec / 1000000, started, sizeof(started));
                format_duration(c->started_unix_usec, c->ended_unix_usec, took, sizeof(took));
                /* the full command line is in --json */
                if (strlen(c->cmd) >= sizeof(cmd))
                        snprintf(cmd, sizeof(cmd), "%.*s...", (int) sizeof(cmd) - 4, c->cmd);
                else
                        strlcpy(cmd, c->cmd, sizeof(cmd));
                table_add(&t, c->command_session, c->workspace_session, c->status, exit_code,
                          *c->end_reason ? c->end_reason : NULL, started, took, cmd);
        }
        return table_print(&t);
}

static json_t *layer_to_json(const void *p) {
        const Sbx__LayerInfo *l = p;

        return json_pack("{s:I, s:o, s:I, s:I}",
                         "layer", (json_int_t) l->layer,
                         "owner", json_str(l->owner),
                         "changed_paths", (json_int_t) l->changed_paths,
                         "created_unix", (json_int_t) l->created_unix);
}

static int print_layer_list(const Sbx__LayerListReply *l, bool json) {
        static const char *const header[] = { "LAYER", "OWNER", "CHANGED", "CREATED" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };

        if (json)
                return print_json(json_array_of((void **) l->layers, l->n_layers, layer_to_json));
        for (size_t i = 0; i < l->n_layers; i++) {
                const Sbx__LayerInfo *y = l->layers[i];
                char layer[16], changed[16], created[32];

                snprintf(layer, sizeof(layer), "%" PRIu32, y->layer);
                snprintf(changed, sizeof(changed), "%" PRIu32, y->changed_paths);
                format_time(y->created_unix, created, sizeof(created));
                table_add(&t, layer, y->owner, changed, created);
        }
        return table_print(&t);
}

/* Every layer, page after page (a reply holds a bounded number). */
static int layer_list_all(int fd, Sbx__Msg *req, bool json) {
        Sbx__LayerListReply all = SBX__LAYER_LIST_REPLY__INIT;
        Sbx__Msg **pages = NULL;
        size_t n_pages = 0;
        int r = EXIT_OK;

        for (uint32_t seq = 1;; seq++) {
                Sbx__Msg *reply = NULL, **np;
                const Sbx__LayerListReply *l;
                Sbx__LayerInfo **layers;

                r = transact(fd, "layer list", req, seq, SBX__REPLY__BODY_LAYER_LIST, true, &reply);
                if (r != EXIT_OK)
                        break;
                np = realloc(pages, (n_pages + 1) * sizeof(*pages));
                l = reply->reply->layer_list;
                layers = np ? realloc(all.layers, (all.n_layers + l->n_layers + 1) * sizeof(*layers)) : NULL;
                if (np)
                        pages = np;
                if (!np || !layers) {
                        sbx__msg__free_unpacked(reply, NULL);
                        fprintf(stderr, "%s: out of memory\n", program);
                        r = EXIT_FAILED;
                        break;
                }
                pages[n_pages++] = reply;
                all.layers = layers;
                memcpy(all.layers + all.n_layers, l->layers, l->n_layers * sizeof(*layers));
                all.n_layers += l->n_layers;
                if (!l->more || l->n_layers == 0)
                        break;
                req->layer_list->start_layer = l->layers[l->n_layers - 1]->layer + 1;
        }
        if (r == EXIT_OK)
                r = print_layer_list(&all, json);
        for (size_t i = 0; i < n_pages; i++)
                sbx__msg__free_unpacked(pages[i], NULL);
        free(pages);
        free(all.layers);
        return r;
}

static int print_gc(const Sbx__GcReply *g, bool json) {
        char freed[24];

        if (json)
                return print_json(json_pack("{s:I, s:I, s:I, s:I}",
                                            "transcripts_removed", (json_int_t) g->transcripts_removed,
                                            "layers_removed", (json_int_t) g->layers_removed,
                                            "sandboxes_removed", (json_int_t) g->sandboxes_removed,
                                            "bytes_freed", json_u64(g->bytes_freed)));
        if (g->bytes_freed == 0)
                snprintf(freed, sizeof(freed), "0B");
        else
                format_size(g->bytes_freed, freed, sizeof(freed));
        printf("removed %" PRIu32 " transcript(s), %" PRIu32 " layer(s) and the files of %" PRIu32
               " deleted sandbox(es), freed %s\n",
               g->transcripts_removed, g->layers_removed, g->sandboxes_removed, freed);
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
        if (!s->caller_only)
                printf("pid: %" PRId64 "\n", s->pid);
        printf("uptime: %s\n", uptime);
        fputs("cgroup backend: ", stdout);
        fputs_safe(s->cgroup_backend, stdout);
        printf("\nsandboxes: %" PRIu32 "\n", s->sandboxes);
        printf("live sessions: %" PRIu32 "\n", s->live_sessions);
        printf("spare sessions: %" PRIu32 "\n", s->spare_sessions);
        printf("running commands: %" PRIu32 "\n", s->running_commands);
        printf("clients: %" PRIu32 "\n", s->clients);
        if (s->caller_only) {
                /* sbxd answers anyone but root with their own figures only */
                puts("(the counts are of your own sandboxes and connections)");
                return EXIT_OK;
        }
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
        Sbx__SessionList session_list = SBX__SESSION_LIST__INIT;
        Sbx__SessionCreate session_create = SBX__SESSION_CREATE__INIT;
        Sbx__SessionFinalize session_finalize = SBX__SESSION_FINALIZE__INIT;
        Sbx__SessionDiff session_diff = SBX__SESSION_DIFF__INIT;
        Sbx__CommandList command_list = SBX__COMMAND_LIST__INIT;
        Sbx__CommandCancel command_cancel = SBX__COMMAND_CANCEL__INIT;
        Sbx__LayerList layer_list = SBX__LAYER_LIST__INIT;
        Sbx__Gc gc = SBX__GC__INIT;
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
        if (r == -EACCES || r == -EPERM) {
                fprintf(stderr, "%s: not allowed to connect to sbxd at %s: %s; ask an administrator to add "
                        "you to the socket's group (e.g. usermod -aG sbx $USER, then log in again)\n",
                        program, a->socket_path, strerror(-r));
                return EXIT_UNREACHABLE;
        }
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
                create.cpu_weight = a->cpu_weight;
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
        case VERB_SANDBOX_SHOW:
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST;
                req.body_case = SBX__MSG__BODY_SANDBOX_LIST;
                req.sandbox_list = &list;
                what = a->verb == VERB_SANDBOX_SHOW ? "sandbox show" : "sandbox list";
                expect = SBX__REPLY__BODY_SANDBOX_LIST;
                break;
        case VERB_SANDBOX_DELETE:
                del.name = (char *) a->name;
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_DELETE;
                req.body_case = SBX__MSG__BODY_SANDBOX_DELETE;
                req.sandbox_delete = &del;
                what = "sandbox delete";
                break;
        case VERB_SESSION_LIST:
                session_list.sandbox = (char *) a->name;
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SESSION_LIST;
                req.body_case = SBX__MSG__BODY_SESSION_LIST;
                req.session_list = &session_list;
                what = "session list";
                expect = SBX__REPLY__BODY_SESSION_LIST;
                break;
        case VERB_SESSION_CREATE:
                session_create.sandbox = (char *) a->name;
                session_create.finalize_policy = (char *) (a->policy ?: "");
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SESSION_CREATE;
                req.body_case = SBX__MSG__BODY_SESSION_CREATE;
                req.session_create = &session_create;
                what = "session create";
                expect = SBX__REPLY__BODY_SESSION;
                break;
        case VERB_SESSION_FINALIZE:
                session_finalize.sandbox = (char *) a->name;
                session_finalize.workspace_session = (char *) a->id;
                session_finalize.action = (char *) (a->action ?: "");
                session_finalize.overwrite = a->overwrite;
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SESSION_FINALIZE;
                req.body_case = SBX__MSG__BODY_SESSION_FINALIZE;
                req.session_finalize = &session_finalize;
                what = "session finalize";
                expect = SBX__REPLY__BODY_SESSION_FINALIZE;
                break;
        case VERB_SESSION_DIFF:
                session_diff.sandbox = (char *) a->name;
                session_diff.workspace_session = (char *) a->id;
                req.type = SBX__MSG_TYPE__MSG_CLIENT_SESSION_DIFF;
                req.body_case = SBX__MSG__BODY_SESSION_DIFF;
                req.session_diff = &session_diff;
                what = "session diff";
                expect = SBX__REPLY__BODY_SESSION_DIFF;
                break;
        case VERB_COMMAND_LIST:
                command_list.sandbox = (char *) a->name;
                command_list.workspace_session = (char *) (a->session ?: "");
                req.type = SBX__MSG_TYPE__MSG_CLIENT_COMMAND_LIST;
                req.body_case = SBX__MSG__BODY_COMMAND_LIST;
                req.command_list = &command_list;
                what = "command list";
                expect = SBX__REPLY__BODY_COMMAND_LIST;
                break;
        case VERB_COMMAND_CANCEL:
                command_cancel.sandbox = (char *) a->name;
                command_cancel.command_session = (char *) a->id;
                req.type = SBX__MSG_TYPE__MSG_CLIENT_COMMAND_CANCEL;
                req.body_case = SBX__MSG__BODY_COMMAND_CANCEL;
                req.command_cancel = &command_cancel;
                what = "command cancel";
                break;
        case VERB_LAYER_LIST:
                layer_list.sandbox = (char *) a->name;
                req.type = SBX__MSG_TYPE__MSG_CLIENT_LAYER_LIST;
                req.body_case = SBX__MSG__BODY_LAYER_LIST;
                req.layer_list = &layer_list;
                what = "layer list";
                expect = SBX__REPLY__BODY_LAYER_LIST;
                break;
        case VERB_GC:
                req.type = SBX__MSG_TYPE__MSG_CLIENT_GC;
                req.body_case = SBX__MSG__BODY_GC;
                req.gc = &gc;
                what = "gc";
                expect = SBX__REPLY__BODY_GC;
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
        case VERB_IMAGE_LIST:
                assert_not_reached();
        }

        if (a->verb == VERB_LAYER_LIST)
                return layer_list_all(fd, &req, a->json);
        r = transact(fd, what, &req, 1, expect, true, &reply);
        if (r != EXIT_OK)
                return r;

        switch (a->verb) {
        case VERB_SANDBOX_CREATE:
                return print_sandbox_created(reply->reply->sandbox, a->json);
        case VERB_SANDBOX_LIST:
                return print_sandbox_list(reply->reply->sandbox_list, a->json);
        case VERB_SANDBOX_SHOW:
                return print_sandbox_show(reply->reply->sandbox_list, a->name, a->json);
        case VERB_SANDBOX_DELETE:
                fputs("deleted sandbox ", stdout);
                fputs_safe(a->name, stdout);
                putchar('\n');
                return EXIT_OK;
        case VERB_SESSION_LIST:
                return print_session_list(reply->reply->session_list, a->json);
        case VERB_SESSION_CREATE:
                if (a->json)
                        return print_json(session_to_json(reply->reply->session));
                /* the id alone, so that ID=$(sbxctl session create web) works */
                fputs_safe(reply->reply->session->workspace_session, stdout);
                putchar('\n');
                return EXIT_OK;
        case VERB_SESSION_FINALIZE:
                return print_session_finalize(reply->reply->session_finalize, a->json);
        case VERB_SESSION_DIFF:
                return print_session_diff(reply->reply->session_diff, a->json);
        case VERB_COMMAND_LIST:
                return print_command_list(reply->reply->command_list, a->json);
        case VERB_COMMAND_CANCEL:
                if (a->json)
                        return print_json(json_pack("{s:o, s:b}", "command_session", json_str(a->id),
                                                    "cancelled", 1));
                fputs("cancelled command ", stdout);
                fputs_safe(a->id, stdout);
                putchar('\n');
                return EXIT_OK;
        case VERB_LAYER_LIST:
                return print_layer_list(reply->reply->layer_list, a->json);
        case VERB_GC:
                return print_gc(reply->reply->gc, a->json);
        case VERB_STATUS:
                return print_status(reply->reply->status, a->json);
        case VERB_HELP:
        case VERB_VERSION:
        case VERB_IMAGE_LIST:
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
        case VERB_IMAGE_LIST:
                r = print_image_list(args.json);
                break;
        default:
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
