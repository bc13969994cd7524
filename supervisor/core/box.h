/* Boxes: the sandboxes of the boxes set (sandbox-mcp --set boxes, issue 21,
 * shared/seeds/003). A box is a claim (core/claim.h) of the boxes' own
 * template (BOX_TEMPLATE, made from box_image and box_spares in sbxd.conf):
 * a long-lived workspace session of a sandbox of its own, whose files and
 * background processes persist between commands, owned by the uid and the
 * MCP session identity of the client that started it, exactly as a claim
 * (only that client's requests find it by id; root without an MCP session,
 * sbxctl, finds every box). The warm pool of the template is the spares
 * (`startedFrom: spare`); without a ready one the box starts cold.
 *
 * Its id is SBX_BOX_ID_PREFIX and 12 hex digits; its working directory is
 * /work (SBX_BOX_WORKDIR) in the session's writable root, made when the box
 * is claimed, with /work/.sbx for the logs of background commands.
 *
 * States (the seed's): spare (a warm claim, no Box yet) -> claimed (being
 * made cold) -> ready -> takeover (a person holds it, core of wt-21c) ->
 * stopping -> terminated, with frozen beside ready (box_thaw) and
 * interrupted (with a reason) from any state. A stopped box is remembered
 * as terminated (SBX_BOXES_GONE_MAX of them) so that sandbox_status can say
 * so. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/claim.h"
#include "core/client.h"
#include "core/server.h"
#include "core/session.h"

typedef enum BoxState {
        BOX_CLAIMED,            /* its claim's first session is being made (a cold start) */
        BOX_READY,
        BOX_TAKEOVER,           /* a person holds it: sandbox_exec is locked */
        BOX_STOPPING,
        BOX_TERMINATED,         /* stopped; its sandbox is gone */
        BOX_INTERRUPTED,        /* lost what it ran (interrupted says why); its files may be there */
} BoxState;

struct Box {
        TAILQ_ENTRY(Box) link;
        char id[SBX_NAME_MAX + 1];
        BoxState state;
        bool frozen;                    /* its session's cgroup is frozen (a ready box, idle) */
        Claim *claim;                   /* NULL once terminated */
        uid_t uid;
        char mcp_session[33];
        bool from_spare;                /* startedFrom spare, else cold */
        Sbx__BoxService **services;     /* name, port (as sandbox_start gave them) */
        size_t n_services;
        char *external_base_url;        /* "" when not given */
        char **secrets;                 /* names given to sandbox_start (values: wt-21b's store) */
        size_t n_secrets;
        uint64_t idle_timeout_ms;       /* 0: never frozen */
        unsigned long long last_call_usec; /* the last tool call that named it */
        int64_t created_unix;
        int64_t last_used_unix;
        double ready_seconds;
        bool has_display;               /* its image has /usr/bin/Xvfb: DISPLAY=:99 */
        char interrupted[256];          /* why it is interrupted or terminated, "" if neither */
        char takeover_url[96];          /* "sbxctl takeover attach <id>" */
        char *no_proxy[2];              /* "no_proxy=…", "NO_PROXY=…" of its commands when it has egress (its
                                           services wired box added), or NULL: set before the next tool call
                                           runs in it (control-boxes.c box_no_proxy_ensure) */
        char takeover_cap[SBX_TAKEOVER_CAP_HEX + 1]; /* the gateway's takeoverUrl's c=: while a takeover is
                                                        pending or held (core/takeover.h), a new one after it */
        char version[SBX_VERSION_ID_SIZE]; /* the version its /work was filled from (core/version.h), or "" */
        Pending starter;                /* sandbox_start of a cold box, answered once it runs */
        unsigned restarts_seen;         /* its claim's session restarts it knows of */
        uint64_t work_serial;           /* the session whose /work it made (WorkspaceSession.serial) */
        bool display_started;           /* Xvfb was started in its session (has_display) */
};

/* "box-" and 12 hex digits. */
bool box_id_is_valid(const char *id);
/* The box id names that c may use (ownership as claims'), or NULL. */
Box *box_find(Server *s, const Client *c, const char *id);
/* The box id, whoever owns it (a takeover's, core/takeover.h), or NULL. */
Box *box_by_id(Server *s, const char *id);
/* Live (not terminated) boxes of uid. */
unsigned boxes_of_uid(Server *s, uid_t uid);
/* The box's running session, or NULL (not ready, frozen or not, or gone). */
WorkspaceSession *box_session(Server *s, const Box *box);
/* Its state as the seed names it: "frozen" for a frozen one. */
const char *box_state_name(const Box *box);

/* A box for c as req asks: from a spare at once (returns 0, *ret ready), or
 * cold (returns BOX_DEFERRED: *ret answered to (c, seq) once it runs). On
 * failure err says why. */
#define BOX_DEFERRED 1
int box_start(Server *s, Client *c, uint32_t seq, const Sbx__BoxStart *req, Box **ret, char *err, size_t errsize);
/* sandbox_wire changed its /etc/hosts: its no_proxy goes until set again. */
void box_wiring_changed(Box *box);
/* Its commands' no_proxy and NO_PROXY, when it has egress (core/boxwire.h box_no_proxy). */
int box_set_no_proxy(Box *box, const char *value);
/* A tool call named the box (every one but sandbox_status): it counts as
 * used from now, and a frozen box is thawed first. */
int box_use(Server *s, Box *box);
/* Stop it: its processes and sandbox go, it is remembered as terminated. */
void box_stop(Server *s, Box *box, const char *why);

/* Start cmd in the box's session: cwd_rel (relative to /work, "" for /work;
 * checked to exist, lexically inside /work) as its directory, the box's
 * variables (DISPLAY, the secrets it names) in its environment. Answer it
 * with command_capture + command_add_waiter (a ClaimExecReply), or observe
 * it (c->observer). -errno with err saying why. */
int box_command_start(Server *s, Box *box, const char *cmd, const char *cwd_rel, uint64_t timeout_ms,
                      Command **ret, char *err, size_t errsize);
/* The same in /work on a pty of size (a takeover's terminal, core/takeover.h). */
int box_terminal_start(Server *s, Box *box, const char *cmd, uint64_t timeout_ms, TerminalSize size, Command **ret,
                       char *err, size_t errsize);
/* The path below the session's root of cwd_rel (relative to /work) into
 * out (SBX_PATH_MAX + 1): "work" or "work/<normalized>"; -EINVAL with err
 * for one that climbs out of /work. */
int box_path(const char *cwd_rel, char *out, char *err, size_t errsize);

/* The box as a reply shows it (everything borrowed from box). */
void box_info(Server *s, const Box *box, Sbx__BoxInfo *ret);
/* Its takeoverUrl for client c: through sbx-gateway (c->gateway_url),
 * <gateway_url>/takeover/<id>?c=<takeover_cap> made in buf, else the sbxctl
 * command line. */
const char *box_takeover_url(const Box *box, const Client *c, char *buf, size_t size);
#define BOX_TAKEOVER_URL_MAX (SBX_GATEWAY_URL_MAX + SBX_NAME_MAX + SBX_TAKEOVER_CAP_HEX + 16)

/* After claims_load: the boxes of sbx.db, interrupted (supervisor_lost):
 * their files are kept, their processes are gone. */
int boxes_load(Server *s);
void boxes_free(Server *s);
unsigned long long boxes_next_deadline(Server *s);
/* Once per loop pass: start Xvfb on :99 in a ready box whose image has
 * /usr/bin/Xvfb (again after an interruption), and freeze boxes idle for
 * their idle timeout (not while a foreground call waits for one of their
 * commands). */
void boxes_run_deadlines(Server *s);
