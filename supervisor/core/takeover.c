/* A person's takeover of a box: see takeover.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/takeover.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "msg.h"

Takeover *takeover_find(Server *s, const char *box) {
        Takeover *t;

        TAILQ_FOREACH(t, &s->takeovers, link)
                if (strcmp(t->box, box) == 0)
                        return t;
        return NULL;
}

bool takeover_permitted(const Takeover *t, uid_t uid) {
        return uid == 0 || uid == t->owner;
}

static void terminal_send(Server *s, Takeover *t, Sbx__Terminal *frame) {
        pending_send(s, &t->terminal, SBX__MSG_TYPE__MSG_CLIENT_TERMINAL, frame);
}

/* The terminal's last frame (why it ended: reason, or the shell's exit), then its answer. */
static void terminal_end(Server *s, Takeover *t, const Command *shell, const char *reason) {
        Sbx__Terminal end = SBX__TERMINAL__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;

        end.ended = true;
        end.reason = (char *) (reason ?: "");
        if (shell && !reason) {
                end.exit_code = shell->rec.has_exit_code ? shell->rec.exit_code : 0;
                end.signal = shell->rec.signal;
        }
        terminal_send(s, t, &end);
        pending_answer(s, &t->terminal, &reply);
}

static void shell_output(void *userdata, TranscriptStream stream, const void *data, size_t len) {
        Takeover *t = userdata;
        Server *s = t->server;
        Sbx__Terminal out = SBX__TERMINAL__INIT;
        char note[96];

        if (!pending_active(&t->terminal) || len == 0)
                return;
        /* A client that does not keep up loses output, as a serial line would, rather than its terminal. */
        if (t->terminal.client->queued >= SBX_TERMINAL_BACKLOG) {
                t->dropped += len;
                return;
        }
        if (t->dropped) {
                int n = snprintf(note, sizeof(note), "\r\n[sbx: %llu bytes of output dropped: the terminal was slow]\r\n",
                                 (unsigned long long) t->dropped);
                out.data.data = (uint8_t *) note;
                out.data.len = (size_t) MIN(n, (int) sizeof(note) - 1);
                terminal_send(s, t, &out);
                t->dropped = 0;
        }
        out.data.data = (uint8_t *) data;
        out.data.len = len;
        terminal_send(s, t, &out);
}

static void shell_ended(Command *c, void *userdata) {
        Takeover *t = userdata;

        c->observer = NULL;
        t->shell = NULL;
        terminal_end(t->server, t, c, NULL);
}

static const CommandObserver shell_observer = {
        .output = shell_output,
        .ended = shell_ended,
};

/* The shell goes (killed if it still runs), and the terminal is answered with reason. */
static void terminal_close(Server *s, Takeover *t, const char *reason) {
        Command *shell = TAKE_PTR(t->shell);

        if (shell) {
                shell->observer = NULL;
                command_cancel(s, shell);
        }
        terminal_end(s, t, NULL, reason);
}

static void terminal_abandon(Server *s, Pending *p, bool cancelled) {
        Takeover *t = container_of(p, Takeover, terminal);

        log_info("Takeover of box %s: the terminal was %s", t->box, cancelled ? "cancelled" : "closed");
        terminal_close(s, t, "closed");
}

static void takeover_free(Server *s, Takeover *t) {
        /* The URL of this takeover dies with it. */
        if (t->cap && random_hex(t->cap, SBX_TAKEOVER_CAP_HEX) < 0)
                log_warning("Box %s keeps its takeover capability: no random bytes", t->box);
        if (t->state && *t->state == BOX_TAKEOVER)
                *t->state = BOX_READY;
        TAILQ_REMOVE(&s->takeovers, t, link);
        pending_stop(&t->agent);
        free(t->note);
        free(t);
}

/* t ends: the terminal is told reason, the agent gets reply (NULL: an error saying why). */
static void takeover_end(Server *s, Takeover *t, Sbx__Reply *reply, const char *reason) {
        terminal_close(s, t, reason);
        if (reply)
                pending_answer(s, &t->agent, reply);
        else
                pending_answer_error(s, &t->agent, -ECONNABORTED, "the takeover of box %s ended: %s", t->box, reason);
        takeover_free(s, t);
}

static void agent_abandon(Server *s, Pending *p, bool cancelled) {
        Takeover *t = container_of(p, Takeover, agent);

        log_info("Takeover of box %s ended: the agent %s", t->box, cancelled ? "cancelled it" : "went away");
        takeover_end(s, t, NULL, "the agent stopped waiting");
}

int takeover_begin(Server *s, Client *c, uint32_t seq, const char *box, BoxState *state, char *cap, uid_t owner,
                   const char *note, bool progress) {
        Takeover *t;

        if (strlen(box) > SBX_NAME_MAX || strlen(note) > SBX_TAKEOVER_NOTE_MAX)
                return -EINVAL;
        if (takeover_find(s, box))
                return -EBUSY;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->note = strdup(note);
        if (!t->note) {
                free(t);
                return -ENOMEM;
        }
        strlcpy(t->box, box, sizeof(t->box));
        t->server = s;
        t->state = state;
        t->cap = cap;
        if (state)
                *state = BOX_TAKEOVER;
        t->owner = owner;
        t->since_unix = now_unix_usec() / 1000000;
        t->since_usec = now_usec();
        t->deadline_usec = t->since_usec + s->cfg.takeover_max_seconds * 1000000ull;
        t->progress_usec = progress ? t->since_usec + SBX_TAKEOVER_PROGRESS_S * 1000000ull : ~0ull;
        TAILQ_INSERT_TAIL(&s->takeovers, t, link);
        pending_start(&t->agent, c, seq, agent_abandon);
        log_info("Box %s taken over (owner %u), for at most %u s", box, (unsigned) owner, s->cfg.takeover_max_seconds);
        return 0;
}

bool takeover_attached(const Takeover *t) {
        return t->shell || pending_active(&t->terminal);
}

uint64_t takeover_left_ms(const Takeover *t) {
        unsigned long long now = now_usec();

        return t->deadline_usec > now ? (t->deadline_usec - now) / 1000 + 1 : 1;
}

int takeover_attach(Server *s, Takeover *t, Command *shell, Client *c, uint32_t seq) {
        if (takeover_attached(t))
                return -EBUSY;
        shell->observer = &shell_observer;
        shell->observer_data = t;
        t->shell = shell;
        t->dropped = 0;
        pending_start(&t->terminal, c, seq, terminal_abandon);
        log_info("Takeover of box %s: terminal attached by uid %u (%s)", t->box, (unsigned) c->uid, shell->rec.id);
        return 0;
}

int takeover_input(Server *s, Client *c, uint32_t seq, const void *data, size_t len, TerminalSize size) {
        Takeover *t;
        int r = 0;

        TAILQ_FOREACH(t, &s->takeovers, link)
                if (t->terminal.client == c && t->terminal.seq == seq)
                        break;
        if (!t || !t->shell)
                return -ENOENT;
        if (size.rows || size.cols)
                r = command_resize(t->shell, size);
        if (r >= 0 && len > 0)
                r = command_send_stdin(t->shell, data, len, false);
        return r;
}

static void agent_answer(Server *s, Takeover *t, const char *note, bool expired) {
        Sbx__TakeoverReply body = SBX__TAKEOVER_REPLY__INIT;
        Sbx__Reply reply = SBX__REPLY__INIT;

        body.note = (char *) note;
        body.expired = expired;
        body.seconds = (double) (now_usec() - t->since_usec) / 1e6;
        (void) msg_reply_set(&reply, SBX__REPLY__BODY_TAKEOVER, &body);
        takeover_end(s, t, &reply, expired ? "expired" : "returned");
}

void takeover_return(Server *s, Takeover *t, const char *note) {
        log_info("Box %s handed back", t->box);
        agent_answer(s, t, note, false);
}

void takeover_box_gone(Server *s, const char *box, const char *why) {
        Takeover *t = takeover_find(s, box);

        if (t)
                takeover_end(s, t, NULL, why);
}

unsigned long long takeovers_next_deadline(Server *s) {
        unsigned long long next = ~0ull;
        Takeover *t;

        TAILQ_FOREACH(t, &s->takeovers, link)
                next = MIN(next, MIN(t->deadline_usec, t->progress_usec));
        return next;
}

void takeovers_run_deadlines(Server *s) {
        unsigned long long now = now_usec();
        Takeover *t, *next;

        for (t = TAILQ_FIRST(&s->takeovers); t; t = next) {
                next = TAILQ_NEXT(t, link);
                if (t->progress_usec <= now) {
                        char text[160];

                        snprintf(text, sizeof(text), "box %s: waiting for a person to hand it back (%llu s)", t->box,
                                 (now - t->since_usec) / 1000000);
                        pending_progress(s, &t->agent, text, ++t->progress_n);
                        t->progress_usec = now + SBX_TAKEOVER_PROGRESS_S * 1000000ull;
                }
                if (t->deadline_usec > now)
                        continue;
                log_info("Takeover of box %s expired after %u s", t->box, s->cfg.takeover_max_seconds);
                agent_answer(s, t, "", true);
        }
}

void takeovers_free(Server *s) {
        Takeover *t;

        while ((t = TAILQ_FIRST(&s->takeovers))) {
                if (t->shell)
                        t->shell->observer = NULL;
                pending_stop(&t->terminal);
                takeover_free(s, t);
        }
}
