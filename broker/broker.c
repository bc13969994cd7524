/* sandbox-mcp: the MCP broker on stdio. Speaks newline-delimited JSON-RPC
 * 2.0 on stdin/stdout for one MCP session (session.h: its methods, tool
 * validation and the requests to sbxd over a SOCK_SEQPACKET socket).
 * Single-threaded: one poll() loop over stdin, the supervisor socket and a
 * signalfd; calls are answered in completion order. Holds no privilege and
 * no sandbox state. Logs go to stderr only. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"
#include "fd-util.h"
#include "jsonrpc.h"
#include "log.h"
#include "macro.h"
#include "sbx-limits.h"
#include "session.h"
#include "tools.h"

#define DEFAULT_SOCKET MCP_DEFAULT_SOCKET
#define STDIN_CHUNK (64u * 1024u)

typedef struct Broker {
        McpSession *session;
        LineReader reader;
        int signal_fd;
        bool stdin_done;                /* end of input: exit once the calls in flight are answered */
        char input[STDIN_CHUNK];        /* one read() of stdin */
} Broker;

/* Writes to stdout block: stdout is shared with the client (and maybe a
 * terminal), so it is not switched to non-blocking mode, and the client is
 * the only reader anyway. */
static int send_stdout(void *userdata, const char *line, size_t len, const json_t *id, bool response) {
        return loop_write(STDOUT_FILENO, line, len);
}

/* ---- main loop ----------------------------------------------------------------- */

static int broker_run(Broker *b) {
        int r;

        for (;;) {
                struct pollfd p[3] = {
                        { .fd = b->stdin_done ? -1 : STDIN_FILENO, .events = POLLIN },
                        { .fd = b->signal_fd, .events = POLLIN },
                        { .fd = mcp_session_fd(b->session),
                          .events = POLLIN | (mcp_session_wants_write(b->session) ? POLLOUT : 0) },
                };
                ssize_t n;

                /* A negative fd (no connection) is skipped by poll(). */
                if (poll(p, ELEMENTSOF(p), mcp_session_next_timeout_ms(b->session)) < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(-errno, "poll() failed: %m");
                }
                r = mcp_session_expire(b->session);
                if (r < 0)
                        return r;
                if (p[1].revents) {
                        struct signalfd_siginfo si;

                        if (read(b->signal_fd, &si, sizeof(si)) == sizeof(si))
                                log_debug("Got signal %u, exiting", si.ssi_signo);
                        return 0;
                }
                if (p[2].fd >= 0 && p[2].revents) {
                        r = mcp_session_on_socket(b->session, p[2].revents);
                        if (r < 0)
                                return r;
                }
                if (b->stdin_done && mcp_session_n_pending(b->session) == 0) {
                        log_debug("End of standard input and every call answered, exiting");
                        return 0;
                }
                if (p[0].fd >= 0 && p[0].revents) {
                        n = read(STDIN_FILENO, b->input, sizeof(b->input));
                        if (n < 0) {
                                if (errno == EINTR || errno == EAGAIN)
                                        continue;
                                return log_error_errno(-errno, "Failed to read standard input: %m");
                        }
                        if (n == 0) {
                                /* A pipeline's last requests are answered before the exit. */
                                b->stdin_done = true;
                                r = line_reader_finish(&b->reader, mcp_session_handle_line, b->session);
                                if (r < 0 || mcp_session_n_pending(b->session) == 0)
                                        return r;
                                log_debug("End of standard input, answering %zu call(s) in flight", mcp_session_n_pending(b->session));
                                continue;
                        }
                        r = line_reader_feed(&b->reader, b->input, (size_t) n, mcp_session_handle_line, b->session);
                        if (r < 0)
                                return r;
                }
        }
}

/* ---- command line ----------------------------------------------------------- */

static void help(void) {
        printf("Usage: sandbox-mcp [--set SET[,SET...]] [--socket PATH] [--content text|json|none]\n"
               "                   [--log-level LEVEL]\n"
               "       sandbox-mcp --help | --version\n\n"
               "MCP server on standard input and output for sbx sandboxes.\n\n"
               "  --set LIST         tool sets to offer (default runtime; known: %s)\n"
               "  --socket PATH      sbxd socket (default $SBX_SOCKET or " DEFAULT_SOCKET ")\n"
               "  --content MODE     text: a text block rendered for reading beside\n"
               "                     structuredContent (default); json: the JSON of\n"
               "                     structuredContent as text; none: empty content array\n"
               "  --log-level LEVEL  error, warning, notice, info (default) or debug\n"
               "  -h, --help         show this help\n"
               "  -V, --version      show the version\n\n"
               "See sandbox-mcp(1).\n", TOOL_SETS_KNOWN);
}

_printf_(1, 2) _noreturn_
static void usage_error(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        cli_usage_errorv("sandbox-mcp", fmt, ap);
}

typedef struct Options {
        unsigned sets;
        const char *socket_path;
        ContentMode content;
} Options;

static void parse_argv(int argc, char **argv, Options *o) {
        enum { OPT_SET = 0x100, OPT_SOCKET, OPT_CONTENT, OPT_LOG_LEVEL };
        static const struct option options[] = {
                { "set", required_argument, NULL, OPT_SET },
                { "socket", required_argument, NULL, OPT_SOCKET },
                { "content", required_argument, NULL, OPT_CONTENT },
                { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *env = getenv("SBX_SOCKET"), *tool, *a, *b;
        int c;

        *o = (Options) {
                .socket_path = env && env[0] ? env : DEFAULT_SOCKET,
                .content = CONTENT_TEXT,
        };
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":hV", options, NULL)) >= 0) {
                switch (c) {
                case OPT_SET: {
                        const char *bad = NULL;
                        unsigned sets;

                        if (tool_sets_parse(optarg, &sets, &bad) < 0)
                                usage_error("unknown tool set '%.*s' in --set (known: %s)", (int) strcspn(bad, ","), bad,
                                            TOOL_SETS_KNOWN);
                        o->sets |= sets;
                        break;
                }
                case OPT_SOCKET:
                        if (!optarg[0])
                                usage_error("--socket needs a path");
                        o->socket_path = optarg;
                        break;
                case OPT_CONTENT:
                        if (strcmp(optarg, "text") == 0)
                                o->content = CONTENT_TEXT;
                        else if (strcmp(optarg, "json") == 0)
                                o->content = CONTENT_JSON;
                        else if (strcmp(optarg, "none") == 0)
                                o->content = CONTENT_NONE;
                        else
                                usage_error("--content must be text, json or none, not '%s'", optarg);
                        break;
                default:
                        cli_common_option("sandbox-mcp", c, OPT_LOG_LEVEL, help, argv);
                }
        }
        cli_no_arguments("sandbox-mcp", argc, argv);
        if (o->sets == 0)
                o->sets = TOOL_SET_RUNTIME;
        if (tool_sets_conflict(o->sets, &tool, &a, &b) < 0)
                usage_error("--set: the sets %s and %s both define the tool %s; enable one of them per sandbox-mcp",
                            a, b, tool);
}

static int setup_signals(int *ret_fd) {
        sigset_t mask;
        int fd;

        /* A client gone from stdout shows as EPIPE from write(), not a signal. */
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
                return -errno;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

int main(int argc, char **argv) {
        _cleanup_(tools_freep) Tools *tools = NULL;
        Broker b = { .signal_fd = -EBADF };
        Options o;
        int r;

        log_open("sandbox-mcp");
        heap_keep_freed(SBX_BROKER_HEAP_KEEP_BYTES);
        parse_argv(argc, argv, &o);
        line_reader_init(&b.reader, SBX_MCP_LINE_MAX);

        r = setup_signals(&b.signal_fd);
        if (r < 0) {
                log_error_errno(r, "Failed to set up signal handling: %m");
                return 1;
        }
        r = tools_new(o.sets, &tools);
        if (r < 0) {
                log_error_errno(r, "Failed to load the tool table: %m");
                return 1;
        }
        r = mcp_session_new(&(McpSessionConfig) {
                                .socket_path = o.socket_path,
                                .client_name = "sandbox-mcp",
                                .content = o.content,
                                .tools = tools,
                                .send = send_stdout,
                        }, &b.session);
        if (r >= 0)
                r = mcp_session_probe(b.session);
        if (r < 0) {
                log_error_errno(r, "Failed to start: %m");
                return 1;
        }
        log_debug("Serving on stdio, sbxd at %s", o.socket_path);

        r = broker_run(&b);
        if (r == -EPIPE) {
                log_debug("Standard output closed, exiting");
                r = 0;
        } else if (r < 0)
                log_error_errno(r, "Exiting: %m");

        mcp_session_free(b.session);
        (void) safe_close(b.signal_fd);
        line_reader_done(&b.reader);
        return r < 0 ? 1 : 0;
}
