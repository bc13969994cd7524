/* sbxctl's rows for a person's takeover of a box (issue 21, docs/boxes.md
 * "Takeover"): takeover list, takeover return ID --note TEXT, and takeover
 * attach ID, a terminal in the box: the local terminal in raw mode (so
 * Ctrl-C is a byte for the box's pty, whose line discipline makes it
 * SIGINT there), restored on every way out; its size sent at the start and
 * on every SIGWINCH; Ctrl-] detaches. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include "fd-util.h"
#include "msg-json.h"
#include "sbx-limits.h"
#include "sbxctl.h"
#include "wire.h"

#define DETACH_KEY 0x1d         /* Ctrl-] */

static const MsgJsonMap takeover_map = MSG_JSON_MAP_INIT(sbx__takeover_info__descriptor,
        MSG_JSON_NAMES("box owner_uid note since_unix expires_unix attached"));

int ctl_set_note(Args *a, const char *arg) {
        if (strlen(arg) > SBX_TAKEOVER_NOTE_MAX)
                return usage_error("--note is longer than %u bytes", SBX_TAKEOVER_NOTE_MAX);
        a->note = arg;
        return EXIT_OK;
}

int ctl_build_takeover_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_LIST, &sbx__takeover_list__descriptor);
        req->expect = SBX__REPLY__BODY_TAKEOVER_LIST;
        return EXIT_OK;
}

int ctl_print_takeover_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "BOX", "OWNER", "SINCE", "EXPIRES", "ATTACHED", "NOTE" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__TakeoverListReply *l = reply->takeover_list;

        if (a->json)
                return print_json(msg_json_array(&takeover_map, (void *const *) l->takeovers, l->n_takeovers,
                                                 MSG_JSON_TEXT_ASCII));
        for (size_t i = 0; i < l->n_takeovers; i++) {
                const Sbx__TakeoverInfo *x = l->takeovers[i];
                char owner[16], since[32], expires[32];

                snprintf(owner, sizeof(owner), "%" PRIu32, x->owner_uid);
                format_time(x->since_unix, since, sizeof(since));
                format_time(x->expires_unix, expires, sizeof(expires));
                table_add(&t, x->box, owner, since, expires, x->attached ? "yes" : "no", x->note);
        }
        return table_print(&t);
}

int ctl_build_takeover_return(Args *a, CtlRequest *req) {
        Sbx__TakeoverReturn *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_RETURN,
                                                  &sbx__takeover_return__descriptor);

        if (check_id("box ID", a->name) != EXIT_OK)
                return EXIT_USAGE;
        m->box = (char *) a->name;
        m->note = (char *) (a->note ?: "");
        return EXIT_OK;
}

int ctl_print_takeover_return(const Args *a, const Sbx__Reply *reply) {
        fputs("handed back box ", stdout);
        fputs_safe(a->name, stdout);
        putchar('\n');
        return EXIT_OK;
}

static void terminal_size(uint32_t *rows, uint32_t *cols) {
        struct winsize ws = {};

        if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
                return;
        *rows = MIN((uint32_t) ws.ws_row, SBX_TERMINAL_SIZE_MAX);
        *cols = MIN((uint32_t) ws.ws_col, SBX_TERMINAL_SIZE_MAX);
}

int ctl_build_takeover_attach(Args *a, CtlRequest *req) {
        Sbx__TakeoverAttach *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_TAKEOVER_ATTACH,
                                                  &sbx__takeover_attach__descriptor);

        if (check_id("box ID", a->name) != EXIT_OK)
                return EXIT_USAGE;
        m->box = (char *) a->name;
        terminal_size(&m->rows, &m->cols);
        return EXIT_OK;
}

int ctl_print_takeover_attach(const Args *a, const Sbx__Reply *reply) {
        return EXIT_OK;
}

/* The local terminal, raw while attached; restored by raw_restore. */
typedef struct RawMode {
        bool set;
        struct termios saved;
} RawMode;

static void raw_restore(RawMode *m) {
        if (m->set)
                (void) tcsetattr(STDIN_FILENO, TCSAFLUSH, &m->saved);
        m->set = false;
}

static void raw_enter(RawMode *m) {
        struct termios raw;

        if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &m->saved) < 0)
                return;
        raw = m->saved;
        cfmakeraw(&raw);
        m->set = tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) >= 0;
}

/* What an attached terminal is doing. */
typedef struct Attach {
        RawMode *raw;                   /* made raw once the terminal answers */
        int sock, sig;
        bool stdin_open;
        bool detached;
        bool ended;
        Sbx__Terminal *end;             /* the last frame (owned by end_msg) */
        Sbx__Msg *end_msg;
        int status;                     /* once the Reply came: EXIT_OK or why not */
        bool answered;
} Attach;

static int terminal_frame(Attach *at, const void *data, size_t len, uint32_t rows, uint32_t cols) {
        Sbx__Terminal t = SBX__TERMINAL__INIT;
        Sbx__Msg m;

        t.data.data = (uint8_t *) data;
        t.data.len = len;
        t.rows = rows;
        t.cols = cols;
        wire_msg_set(&m, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, &t);
        return wire_send(at->sock, &m, 1, NULL, 0);
}

/* Keys: to the box, in frames of at most SBX_TERMINAL_INPUT_MAX; Ctrl-] detaches. */
static int attach_keys(Attach *at) {
        uint8_t buf[SBX_TERMINAL_INPUT_MAX];
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
        uint8_t *detach;

        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0) {
                at->stdin_open = false;         /* no more keys; the box's output still comes */
                return 0;
        }
        detach = memchr(buf, DETACH_KEY, (size_t) n);
        if (detach) {
                n = detach - buf;
                at->detached = true;
        }
        return n > 0 ? terminal_frame(at, buf, (size_t) n, 0, 0) : 0;
}

/* A frame from sbxd: output, the end, or the Reply that closes the attach. */
static int attach_frame(Attach *at) {
        _cleanup_msg_ Sbx__Msg *msg = NULL;
        uint32_t seq;
        int r = wire_recv(at->sock, &msg, &seq, NULL, NULL);

        if (r < 0)
                return r;
        if (seq != 1)
                return 0;
        if (msg->type == SBX__MSG_TYPE__MSG_CLIENT_TERMINAL) {
                if (!at->raw->set && !msg->terminal->ended)
                        raw_enter(at->raw);
                if (msg->terminal->data.len > 0)
                        r = loop_write(STDOUT_FILENO, msg->terminal->data.data, msg->terminal->data.len);
                if (msg->terminal->ended) {
                        at->ended = true;
                        at->end = msg->terminal;
                        at->end_msg = TAKE_PTR(msg);
                }
                return r;
        }
        if (msg->type == SBX__MSG_TYPE__MSG_REPLY) {
                at->answered = true;
                at->status = ctl_reply_check("takeover attach", msg->reply, SBX__REPLY__BODY__NOT_SET, true);
        }
        return 0;
}

static int attach_signal(Attach *at) {
        struct signalfd_siginfo si;
        uint32_t rows = 0, cols = 0;

        if (read(at->sig, &si, sizeof(si)) != sizeof(si))
                return 0;
        if (si.ssi_signo != SIGWINCH) {
                at->detached = true;
                return 0;
        }
        terminal_size(&rows, &cols);
        return rows ? terminal_frame(at, NULL, 0, rows, cols) : 0;
}

static int attach_loop(Attach *at) {
        int r = 0;

        while (r >= 0 && !at->answered && !at->detached) {
                struct pollfd p[] = {
                        { .fd = at->sock, .events = POLLIN },
                        { .fd = at->sig, .events = POLLIN },
                        { .fd = at->stdin_open ? STDIN_FILENO : -1, .events = POLLIN },
                };

                if (poll(p, ELEMENTSOF(p), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (p[0].revents)
                        r = attach_frame(at);
                if (r >= 0 && p[1].revents)
                        r = attach_signal(at);
                if (r >= 0 && p[2].revents)
                        r = attach_keys(at);
        }
        return r;
}

static void attach_report(const Attach *at, const char *box) {
        fprintf(stderr, "\r\n%s: terminal of box ", program);
        fputs_safe(box, stderr);
        if (at->detached)
                fputs(": detached (the shell goes; attach again for a new one)", stderr);
        else if (at->end && at->end->reason[0]) {
                fputs(" closed: ", stderr);
                fputs_safe(at->end->reason, stderr);
        } else if (at->end && at->end->signal)
                fprintf(stderr, ": the shell ended by signal %" PRId32, at->end->signal);
        else if (at->end)
                fprintf(stderr, ": the shell exited with status %" PRId32, at->end->exit_code);
        fputs("\r\n", stderr);
}

int ctl_run_takeover_attach(int fd, const Args *a, CtlRequest *req) {
        _cleanup_(raw_restore) RawMode raw = {};
        _cleanup_close_ int sig = -EBADF;
        Attach at = { .raw = &raw, .sock = fd, .stdin_open = true, .status = EXIT_FAILED };
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGWINCH);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGQUIT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 || (sig = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
                fprintf(stderr, "%s: cannot watch for signals: %s\n", program, strerror(errno));
                return EXIT_FAILED;
        }
        at.sig = sig;
        r = wire_send(fd, &req->msg, 1, NULL, 0);
        if (r >= 0)
                r = attach_loop(&at);
        raw_restore(&raw);
        if (r < 0) {
                fprintf(stderr, "%s: the connection to sbxd failed: %s\n", program, strerror(-r));
                at.status = EXIT_FAILED;
        } else if (at.detached || at.ended) {
                attach_report(&at, a->name);
                at.status = EXIT_OK;
        }
        if (at.end_msg)
                sbx__msg__free_unpacked(at.end_msg, NULL);
        return at.status;
}
