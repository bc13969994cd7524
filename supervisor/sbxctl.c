/* sbxctl: the administrator's client of sbxd. A thin client (R16): it parses
 * the command line against the command table (sbxctl-verbs.c), sends the
 * row's request on sbxd.sock after the hello, prints the reply with the
 * row's printer, and turns the server's err into an exit status. */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbxctl.h"
#include "wire.h"

#define CTL_OPTIONS_MAX 32      /* entries of ctl_options[], for getopt's table */
#define CTL_POS_MAX 5           /* one more positional word than any command takes */
#define CTL_OPT_FIRST 0x100     /* getopt's value for ctl_options[0], above any character */

static void help(void) {
        printf("Usage: %1$s [--socket PATH] [--json] COMMAND\n"
               "\n"
               "Administer the sbx sandbox service through sbxd.\n"
               "\n"
               "Commands:\n"
               "  sandbox create NAME --source DIR [--image NAME] [--memory BYTES] [--pids N] [--cpu-weight N]\n"
               "                 [--owner UID] [--egress none|package-managers|open]\n"
               "                                 import DIR as a new sandbox\n"
               "  sandbox list                   list sandboxes\n"
               "  sandbox show NAME              show one sandbox\n"
               "  sandbox delete NAME            delete a sandbox and its layers\n"
               "  image list                     list images: state, size, versions\n"
               "  image show NAME                show one image\n"
               "  image build NAME               build an image now (progress on a terminal)\n"
               "  image rm NAME                  remove an image's build\n"
               "  session list SANDBOX           list a sandbox's workspace sessions\n"
               "  session create SANDBOX [--policy publish_then_destroy|destroy]\n"
               "                                 start a managed workspace session\n"
               "  session finalize SANDBOX ID [--publish [--overwrite] | --discard]\n"
               "                                 publish or discard a session and end it\n"
               "  session diff SANDBOX ID        show what a session changed\n"
               "  command list SANDBOX [--session ID]\n"
               "                                 list commands and how they ended\n"
               "  command cancel SANDBOX ID      cancel a running command\n"
               "  command show SANDBOX ID        show how a command ended and its egress audit\n"
               "  command lines SANDBOX ID [--stream merged|stdout|stderr]\n"
               "                                 print the command's output\n"
               "  layer list SANDBOX             list a sandbox's published layers\n"
               "  owner list                     list owners' use of the per-owner quotas\n"
               "  owner show UID                 show one owner's use of each quota\n"
               "  template list                  list the templates of sandbox-mcp's create_sandbox\n"
               "  template show NAME             show one template and its warm claims\n"
               "  box list                       list the boxes (sandboxes of the boxes set)\n"
               "  box show ID                    show one box\n"
               "  box stop ID                    stop a box (frozen or not) and delete its sandbox\n"
               "  claim list [--label K=V]       list the claims (sandboxes of the lifecycle set)\n"
               "  claim show [NS/]NAME           show one claim\n"
               "  claim delete [NS/]NAME         delete a claim and everything of it\n"
               "  job list                       list the jobs (sandbox_script calls) and their status\n"
               "  job show ID                    show one job: status, exit code, output directory\n"
               "  job rm ID                      remove a job (cancelled if it runs) and its output directory\n"
               "  token create --owner USER [--name N] [--expires 30s|10m|2h|7d] [--sets LIST]\n"
               "                                 a bearer token for sbx-gateway, printed once\n"
               "  token list                     list tokens (never their secrets)\n"
               "  token revoke ID|NAME           revoke a token, at once also for open sessions\n"
               "  takeover list                  boxes an agent handed to a person (sandbox_takeover)\n"
               "  takeover attach ID             a terminal in box ID (Ctrl-] detaches)\n"
               "  takeover return ID [--note T]  hand box ID back; T is sandbox_takeover's result\n"
               "  secret set NAME [--owner USER] set a secret of the boxes set, its value from stdin\n"
               "  secret list [--owner USER]     list secrets (names and sizes, never values)\n"
               "  secret rm NAME [--owner USER]  remove a secret\n"
               "  version list                   list the versions of the boxes set\n"
               "  version rm ID                  remove a version (boxes started from it keep their copy)\n"
               "  gc                             remove what nothing uses any more (image builds too)\n"
               "  status                         show the state of sbxd\n"
               "\n"
               "Options:\n"
               "  --socket PATH   sbxd socket (default: $SBX_SOCKET or %2$s)\n"
               "  --json          print the reply as JSON\n"
               "  --source DIR    directory to import (made absolute, no symlink followed)\n"
               "  --image NAME    what / is in the sandbox's sessions (default: default)\n"
               "  --memory BYTES  memory limit; K, M and G suffixes are powers of 1024\n"
               "  --cpu-weight N  relative CPU share, 1 to 10000 (default 100)\n"
               "  --pids N        maximum number of processes\n"
               "  --owner UID     owner of the new sandbox or token, a uid or user name (root only);\n"
               "                  secret: whose secrets (default: the caller's)\n"
               "  --name N        token create: its name (default: its id)\n"
               "  --expires D     token create: expires after D (30s, 10m, 2h, 7d; default never)\n"
               "  --sets LIST     token create: tool sets it may use (default every set)\n"
               "  --note TEXT     takeover return: the note for the agent\n"
               "  --session ID    only the commands of this workspace session\n"
               "  --policy P      finalize policy of a new session\n"
               "  --publish, --discard, --overwrite\n"
               "                  how to finalize (default: the session's policy)\n"
               "  --label K=V     only claims with this label (up to 8)\n"
               "  -h, --help      show this help\n"
               "  --version       show the version\n"
               "\n"
               "Exit status: 0 success, 1 request failed, 2 usage error, 3 cannot reach sbxd,\n"
               "4 not found, 5 permission denied, 6 publication refused by conflicts.\n"
               "See sbxctl(8).\n",
               program, SBX_SOCKET_DEFAULT);
}

/* ---- command line -------------------------------------------------------- */

/* getopt_long over ctl_options[]: each option's setter fills *a, positional
 * words go to pos (at most CTL_POS_MAX, enough to name the first extra one).
 * Returns EXIT_OK, or EXIT_USAGE after saying why. */
static int parse_options(int argc, char *argv[], Args *a, const char **pos, size_t *n_pos) {
        struct option longopts[CTL_OPTIONS_MAX + 1] = {};
        int c;

        assert(ctl_n_options <= CTL_OPTIONS_MAX);
        for (size_t i = 0; i < ctl_n_options; i++)
                longopts[i] = (struct option) { ctl_options[i].name + 2,     /* after "--" */
                                                ctl_options[i].has_arg ? required_argument : no_argument,
                                                NULL, CTL_OPT_FIRST + (int) i };
        opterr = 0;
        /* "-": positional arguments come back as 1, in order, so options may
         * follow the subcommand even with POSIXLY_CORRECT set. */
        while ((c = getopt_long(argc, argv, "-:h", longopts, NULL)) >= 0) {
                const CtlOption *o = c >= CTL_OPT_FIRST && c < CTL_OPT_FIRST + (int) ctl_n_options
                                             ? &ctl_options[c - CTL_OPT_FIRST] : NULL;

                if (o) {
                        if (o->set(a, optarg) != EXIT_OK)
                                return EXIT_USAGE;
                        if (o->group != CTL_GROUP_GLOBAL)
                                a->group_option[o->group] = o->name;
                        continue;
                }
                switch (c) {
                case 1:
                        if (*n_pos < CTL_POS_MAX)
                                pos[(*n_pos)++] = optarg;
                        break;
                case 'h':
                        a->want_help = true;
                        break;
                case ':':
                        return usage_error("option '%s' needs an argument", argv[optind - 1]);
                default:
                        if (optopt >= CTL_OPT_FIRST)
                                return usage_error("option '%s' does not take an argument", argv[optind - 1]);
                        if (optopt > 0)
                                return usage_error("unknown option '-%c'", optopt);
                        return usage_error("unknown option '%s'", argv[optind - 1]);
                }
        }
        /* After "--", getopt leaves the rest in argv[optind..]. */
        for (; optind < argc && *n_pos < CTL_POS_MAX; optind++)
                pos[(*n_pos)++] = argv[optind];
        return EXIT_OK;
}

/* The first word of v's words is word. */
static bool verb_noun_is(const CtlVerb *v, const char *word) {
        size_t n = ctl_noun_len(v->words);

        return strlen(word) == n && strncmp(v->words, word, n) == 0;
}

/* The row that pos names; or EXIT_USAGE after saying why (a known noun
 * with a missing or unknown verb lists its verbs). */
static int find_verb(const char *const *pos, size_t n_pos, const CtlVerb **ret) {
        char verbs[128] = "";
        bool found = false;

        if (n_pos == 0)
                return usage_error("missing command");
        for (size_t i = 0; i < ctl_n_verbs; i++) {
                const char *second = ctl_second_word(ctl_verbs[i].words);

                if (!verb_noun_is(&ctl_verbs[i], pos[0]))
                        continue;
                found = true;
                if (second && (n_pos < 2 || strcmp(pos[1], second) != 0)) {
                        if (verbs[0])
                                strlcat(verbs, ", ", sizeof(verbs));
                        strlcat(verbs, second, sizeof(verbs));
                        continue;
                }
                *ret = &ctl_verbs[i];
                return EXIT_OK;
        }
        if (!found)
                return usage_error("unknown command '%s'", pos[0]);
        if (n_pos < 2)
                return usage_error("missing %s command (%s)", pos[0], verbs);
        return usage_error("unknown %s command '%s' (%s)", pos[0], pos[1], verbs);
}

/* The positional arguments after the command's words. */
static int take_arguments(const CtlVerb *v, const char *const *pos, size_t n_pos, Args *a) {
        size_t words = ctl_second_word(v->words) ? 2 : 1, need = words + v->n_args;

        if (n_pos > need)
                return usage_error("unexpected argument '%s'", pos[need]);
        if (n_pos < need)
                return usage_error("missing %s", v->missing);
        if (v->n_args >= 1) {
                a->name = pos[words];
                if (*a->name == '\0')
                        return usage_error("%s must not be empty",
                                           v->flags & CTL_OWNER_ARG ? "owner UID" : "sandbox NAME");
        }
        if (v->n_args >= 2) {
                if (check_id(v->id_what, pos[words + 1]) != EXIT_OK)
                        return EXIT_USAGE;
                a->id = pos[words + 1];
        }
        return EXIT_OK;
}

/* Options of a group only another command takes, and --json where there is none. */
static int check_options(const CtlVerb *v, const Args *a) {
        for (CtlGroup g = CTL_GROUP_GLOBAL + 1; g < CTL_GROUP_COUNT_; g++) {
                if (!a->group_option[g] || (v->groups & CTL_GROUP(g)))
                        continue;
                for (size_t i = 0; i < ctl_n_verbs; i++)
                        if (ctl_verbs[i].groups & CTL_GROUP(g))
                                return usage_error("%s is only valid with '%s'", a->group_option[g],
                                                   ctl_verbs[i].words);
        }
        if ((v->flags & CTL_NO_JSON) && a->json)
                return usage_error("--json is not valid with '%s'", v->words);
        return EXIT_OK;
}

/* Fills *a; returns EXIT_OK, or EXIT_USAGE after saying why on stderr. */
static int parse_argv(int argc, char *argv[], Args *a) {
        const char *pos[CTL_POS_MAX];
        size_t n_pos = 0;
        int r;

        r = parse_options(argc, argv, a, pos, &n_pos);
        if (r != EXIT_OK || a->want_help || a->want_version)
                return r;
        r = find_verb(pos, n_pos, &a->verb);
        if (r == EXIT_OK)
                r = take_arguments(a->verb, pos, n_pos, a);
        if (r == EXIT_OK)
                r = check_options(a->verb, a);
        if (r != EXIT_OK)
                return r;
        if (!a->socket_path) {
                const char *e = getenv("SBX_SOCKET");
                a->socket_path = e && *e ? e : SBX_SOCKET_DEFAULT;
        }
        return EXIT_OK;
}

/* ---- main ---------------------------------------------------------------- */

/* Connect, say hello, and run the row's request: one round trip and its
 * printer, or the row's own exchange. */
static int run(const Args *a, CtlRequest *req) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_msg_ Sbx__Msg *hello_reply = NULL, *reply = NULL;
        Sbx__ClientHello hello = SBX__CLIENT_HELLO__INIT;
        Sbx__Msg msg;
        int r;

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

        hello.client_name = (char *) "sbxctl";
        wire_msg_set(&msg, SBX__MSG_TYPE__MSG_CLIENT_HELLO, &hello);
        r = transact(fd, "hello", &msg, 0, SBX__REPLY__BODY__NOT_SET, false, &hello_reply);
        if (r != EXIT_OK)
                return r;

        if (a->verb->run)
                return a->verb->run(fd, a, req);
        r = transact(fd, a->verb->words, &req->msg, 1, req->expect, true, &reply);
        if (r != EXIT_OK)
                return r;
        return a->verb->print(a, reply->reply);
}

static void args_done(Args *a) {
        free(a->source_dir);
}

int main(int argc, char *argv[]) {
        _cleanup_(args_done) Args args = {};
        CtlRequest req = {};
        int r;

        r = parse_argv(argc, argv, &args);
        if (r != EXIT_OK)
                return r;
        if (args.want_help)
                help();
        else if (args.want_version)
                printf("%s %s (protocol %u)\n", program, SBX_VERSION, SBX_PROTO_VERSION);
        else {
                r = args.verb->build(&args, &req);
                if (r == EXIT_OK)
                        r = run(&args, &req);
        }

        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "%s: failed to write output: %s\n", program, strerror(errno));
                if (r == EXIT_OK)
                        r = EXIT_FAILED;
        }
        return r;
}
