/* A person's takeover of a box (issue 21, docs/boxes.md "Takeover").
 *
 * sandbox_takeover (MSG_CLIENT_TAKEOVER) marks the box taken over and
 * waits, a Pending of the agent's request, until a person hands it back
 * (sbxctl takeover return: MSG_CLIENT_TAKEOVER_RETURN, whose note is the
 * answer) or takeover_max_seconds pass (sbxd.conf; the answer says expired).
 * Meanwhile the box is in state BOX_TAKEOVER (its commands are refused: the
 * seed's locked error, control-boxes.c), back to BOX_READY at the end, and the person
 * may attach a terminal (sbxctl takeover attach): a login shell on a pty of
 * the box's session (core/session.h: command_start_pty), relayed both ways
 * as TERMINAL frames with the seq of the attach request: keys and sizes in,
 * output out, then the end. One terminal at a time; it ends with the shell,
 * when the person's sbxctl goes, or when the takeover ends. Its output is a
 * command transcript of the box like any other.
 *
 * Who: the agent's own box (the caller decides, control-takeover.c);
 * attach and return: root and the box's owner uid. Takeovers live in memory
 * only: an sbxd restart ends the agent's request with the connection. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "core/box.h"
#include "core/client.h"
#include "core/server.h"
#include "core/session.h"
#include "sbx-limits.h"

struct Takeover {
        TAILQ_ENTRY(Takeover) link;
        Server *server;                 /* for the shell's observer */
        char box[SBX_NAME_MAX + 1];
        BoxState *state;                /* the box's state (BOX_TAKEOVER meanwhile), or NULL; valid
                                           until takeover_box_gone */
        char *cap;                      /* the box's takeover capability, renewed at the end; as state */
        uid_t owner;
        char *note;                     /* the agent's */
        int64_t since_unix;
        unsigned long long since_usec, deadline_usec;
        unsigned long long progress_usec;       /* the next Progress to the agent; ~0: none asked for */
        uint32_t progress_n;
        Pending agent;                  /* sandbox_takeover's request */
        Pending terminal;               /* the attached sbxctl's TAKEOVER_ATTACH, if active */
        Command *shell;                 /* the attached terminal's shell, or NULL */
        uint64_t dropped;               /* output bytes the terminal client was too slow for */
};

/* Box box (owned by owner) is taken over until handed back; the agent's
 * request (c, seq) is answered then, and meanwhile told every
 * SBX_TAKEOVER_PROGRESS_S that it waits if progress. *state (NULL: none) is
 * BOX_TAKEOVER meanwhile, BOX_READY after (if nothing else changed it); the
 * box calls takeover_box_gone before it goes. cap (SBX_TAKEOVER_CAP_HEX + 1,
 * NULL: none) is the box's capability, which gets new random digits when the
 * takeover ends. -EBUSY if it is already. */
int takeover_begin(Server *s, Client *c, uint32_t seq, const char *box, BoxState *state, char *cap, uid_t owner,
                   const char *note, bool progress);
Takeover *takeover_find(Server *s, const char *box);
/* Whether uid may attach to or return t: root and the box's owner. */
bool takeover_permitted(const Takeover *t, uid_t uid);
/* The person's shell: a login shell (bash if the image has it). */
#define TAKEOVER_SHELL "[ -x /bin/bash ] && exec /bin/bash -l; exec /bin/sh -l"
/* Whether a terminal is attached to t. */
bool takeover_attached(const Takeover *t);
/* Milliseconds until t expires (at least 1): the shell's timeout. */
uint64_t takeover_left_ms(const Takeover *t);
/* shell (a pty command of the box, just started: core/box.h
 * box_terminal_start) is the terminal of (c, seq) from now on; -EBUSY if
 * one is attached already (shell is then left alone). */
int takeover_attach(Server *s, Takeover *t, Command *shell, Client *c, uint32_t seq);
/* A TERMINAL frame from c: keys and/or a new size for its terminal (seq of
 * its attach); -ENOENT if c has no such terminal. */
int takeover_input(Server *s, Client *c, uint32_t seq, const void *data, size_t len, TerminalSize size);
/* Hand t back with the person's note (the agent's answer); t is freed. */
void takeover_return(Server *s, Takeover *t, const char *note);
/* The box is stopping or gone: its takeover (if any) ends, the agent told why. */
void takeover_box_gone(Server *s, const char *box, const char *why);
/* Takeovers whose takeover_max_seconds passed end, expired, and waiting
 * agents are told so: once per loop pass. */
unsigned long long takeovers_next_deadline(Server *s);
void takeovers_run_deadlines(Server *s);
/* sbxd stopping: every takeover ends (their clients are dropped anyway). */
void takeovers_free(Server *s);
