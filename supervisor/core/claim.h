/* Claims: the sandboxes of the lifecycle set (sandbox-mcp --set lifecycle).
 * A claim is a long-lived workspace session of a sandbox of its own, made
 * from a template of sbxd.conf ([template NAME]): files written anywhere in
 * its root and processes left in the background persist between commands
 * until the claim is deleted or expires, as in a pod.
 *
 * Ownership: a claim belongs to the uid and the MCP session identity
 * (ClientHello.mcp_session) of the client that created it. Only that
 * client's requests find it by namespace and name; every other one is told
 * it is not found. Root without an MCP session (sbxctl) finds every claim.
 *
 * Warm pool: each template keeps `warm` claims ready ahead (a sandbox and a
 * running session, owned by nobody); a create takes one and makes the next
 * in the tick. Without a ready one the claim is made cold.
 *
 * Expiry is durable: a claim's row (sbx.db) holds its last use; the tick
 * deletes a claim unused for shutdown_after_seconds or older than
 * claim_max_lifetime, before and after a restart of sbxd, and remembers why
 * (a tombstone) for get_sandbox_status. A claim's files outlive an sbxd
 * restart: at stop its session is kept whole (core/kept.h: the workspace,
 * the root's writes, /tmp), and its next session is filled from that copy
 * before it starts. Its processes do not: get_sandbox_status says so. A
 * session lost while sbxd runs (its init died) is made anew without them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/queue.h>

#include "core/box-config.h"
#include "core/client.h"
#include "core/config.h"
#include "core/sandbox.h"
#include "core/server.h"
#include "core/session.h"

typedef enum ClaimState {
        CLAIM_MAKING,           /* its sandbox or its first session is being made */
        CLAIM_READY,            /* its session runs (or is being made again) */
        CLAIM_GONE,             /* deleted while being made: freed once its sandbox comes */
} ClaimState;

typedef enum ClaimAgain {
        CLAIM_FIRST,            /* its session is the first one */
        CLAIM_AGAIN_KEPT,       /* made again after sbxd restarted, with the files kept */
        CLAIM_AGAIN_LOST,       /* made again without them (lost, or nothing could be kept) */
        CLAIM_AGAIN_UNKEPT,     /* made again after sbxd restarted, empty: the kept files could not be put back */
} ClaimAgain;

/* Told of a claim's life by whoever made it with claim_create_observed
 * (a box, core/box.h): its session runs for the first time, or the claim
 * goes (why: NULL when deleted on purpose). */
typedef struct ClaimObserver {
        void (*ready)(Server *s, Claim *cl, void *data);
        void (*gone)(Server *s, Claim *cl, void *data, const char *why);
        /* At every tick while its session runs (ws->seed: the kept one its files came from, until the
         * tick after this one): what the observer adds to a session it has not seen yet. */
        void (*resumed)(Server *s, Claim *cl, void *data, WorkspaceSession *ws);
} ClaimObserver;

struct Claim {
        TAILQ_ENTRY(Claim) link;
        ClaimState state;
        bool warm;                      /* made ahead, nobody's yet */
        Sandbox *sandbox;               /* NULL while its import runs */
        char namespace_[64];
        char name[64];
        char template_[64];
        int64_t uid;                    /* -1 while warm */
        char mcp_session[33];
        bool from_warm;                 /* started_from warm */
        bool no_expiry;
        uint32_t shutdown_after_seconds;
        int64_t created_unix;
        int64_t last_used_unix;
        double ready_seconds;
        unsigned long long make_start_usec;
        unsigned long long ready_deadline_usec;
        unsigned restarts;              /* sessions made again after one was lost */
        ClaimAgain again;               /* how its session last came back, for get_sandbox_status */
        char start_error[300];          /* why its last session could not be started, or "" */
        char fill_error[128];           /* why its kept files could not be put back, until a session goes
                                         * without them, or "" */
        char again_message[400];        /* get_sandbox_status's message for CLAIM_AGAIN_UNKEPT */
        unsigned long long restart_usec; /* no new session before this (the last one failed to start) */
        Pending creator;                /* create_sandbox of a cold claim, answered once it runs */
        uint8_t *labels;                /* a packed ClaimInfo with only its three label lists */
        size_t labels_len;
        const ClaimObserver *observer;  /* NULL: answered to creator */
        void *observer_data;
};

/* A claim of the boxes' template (core/box.h): never the lifecycle set's. */
static inline bool claim_is_box(const Claim *cl) {
        return strcmp(cl->template_, BOX_TEMPLATE) == 0;
}

/* A warm claim's sandbox: made ahead, nobody's; listed and counted by nobody
 * but sbxctl template (inline: owner.c, which claim.c calls, counts with it). */
static inline bool sandbox_is_warm_claim(const Sandbox *sb) {
        return sb->claim && sb->claim->warm;
}

/* After sandboxes_load: the claims of sbx.db; their sessions come in the tick. */
int claims_load(Server *s);
void claims_free(Server *s);

/* Names: 1-63 of a-z 0-9 -, starting and ending with a letter or digit. */
bool claim_name_is_valid(const char *name);

/* The claim named ns/name that c may use (claim.h: ownership), or NULL. */
Claim *claim_find(Server *s, const Client *c, const char *ns, const char *name);
/* A tool call named it: its expiry counts from now. */
void claim_touch(Server *s, Claim *cl);
/* Its session, if it runs (READY), else NULL. */
WorkspaceSession *claim_session(Server *s, const Claim *cl);
/* Live (claimed, not warm) claims of uid. */
unsigned claims_of_uid(Server *s, uid_t uid);

/* A claim for c from template t: a warm one at once (answered into
 * *ret_info, returns 0), else a cold one answered later to (c, seq)
 * (returns REPLY_DEFERRED_CLAIM). On failure err says why. */
#define CLAIM_DEFERRED 1
int claim_create(Server *s, Client *c, uint32_t seq, const Template *t, const Sbx__ClaimCreate *req, Claim **ret,
                 char *err, size_t errsize);
/* The same for a claim that o (with data) is told about instead of answering
 * a client: a warm one (returns 0) or a cold one (CLAIM_DEFERRED), whose
 * ready() comes later. */
int claim_create_observed(Server *s, Client *c, const Template *t, const Sbx__ClaimCreate *req,
                          const ClaimObserver *o, void *data, Claim **ret, char *err, size_t errsize);
/* Whether c may use cl (ownership as above; not a warm one). */
bool claim_owned_by(const Claim *cl, const Client *c);
/* Delete the claim and everything of it; reason goes into its tombstone. */
void claim_delete(Server *s, Claim *cl, const char *reason);
/* The claim as a reply shows it (strings borrowed from cl; labels unpacked
 * into *ret_labels, which the caller frees with claim_info_done). */
int claim_info(Server *s, const Claim *cl, Sbx__ClaimInfo *ret, Sbx__ClaimInfo **ret_labels);
void claim_info_done(Sbx__ClaimInfo *labels);
/* Why the claim ns/name of c went, if it is remembered (-ENOENT if not). */
int claim_tombstone(Server *s, const Client *c, const char *ns, const char *name, char *ret, size_t size);
/* Warm claims ready now of template name, and claims made from it. */
void claims_count(Server *s, const char *template_name, unsigned *ret_warm, unsigned *ret_claimed);

/* The back-off of template name's warm claims (core/server.h), or NULL if none failed. */
const WarmBackoff *claim_warm_backoff(Server *s, const char *template_name);

unsigned long long claims_next_deadline(Server *s);
/* Once per loop pass: answer claims that became ready, delete expired ones,
 * restart lost sessions, keep the warm pools full. */
void claims_run_deadlines(Server *s);
