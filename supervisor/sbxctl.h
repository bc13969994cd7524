/* sbxctl's command table and the helpers its rows use. A command is one row
 * of ctl_verbs[] (sbxctl-verbs.c), in the manner of OpenSMTPD's smtpctl:
 * its words, its arguments and options, a builder that turns the parsed
 * command line into the request for sbxd, and a printer that turns the
 * reply into text or --json. sbxctl.c parses argv against the tables and
 * runs the row; sbxctl-completion.c writes the bash completion from them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "macro.h"
#include "msg-json.h"
#include "sbx.pb-c.h"

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

/* Options other than the global ones belong to a group, and a group to the
 * one command that takes it: "--memory is only valid with 'sandbox create'". */
typedef enum CtlGroup {
        CTL_GROUP_GLOBAL,       /* --socket, --json, --help, --version */
        CTL_GROUP_CREATE,       /* --source, --memory, --pids, --cpu-weight */
        CTL_GROUP_SESSION,      /* --session */
        CTL_GROUP_POLICY,       /* --policy */
        CTL_GROUP_FINALIZE,     /* --publish, --discard, --overwrite */
        CTL_GROUP_LABEL,        /* --label (claim list) */
        CTL_GROUP_OWNER,        /* --owner (sandbox create, token create, secret *) */
        CTL_GROUP_TOKEN,        /* --name, --expires, --sets (token create) */
        CTL_GROUP_TAKEOVER,     /* --note (takeover return) */
        CTL_GROUP_LINES,        /* --stream (command lines) */
        CTL_GROUP_COUNT_,
} CtlGroup;

#define CTL_GROUP(g) (1u << (g))

/* The command line, parsed. */
typedef struct Args {
        const struct CtlVerb *verb;
        bool want_help, want_version;
        const char *socket_path;
        bool json;
        const char *name;       /* the first argument: the sandbox */
        const char *id;         /* the second: the session or command */
        const char *source;     /* --source as given */
        const char *image;      /* sandbox create --image */
        const char *egress;     /* sandbox create --egress */
        char *source_dir;       /* --source made absolute, owned */
        uint64_t memory_bytes;
        uint32_t pids_max;
        uint32_t cpu_weight;
        bool has_owner;
        uint32_t owner_uid;
        const char *session;    /* command list --session */
        const char *policy;     /* session create --policy */
        const char *action;     /* session finalize --publish/--discard */
        bool overwrite;
        const char *labels[8];  /* claim list --label KEY=VALUE */
        size_t n_labels;
        char label_keys[8][256];
        Sbx__Label label_msgs[8];
        Sbx__Label *label_ptrs[8];
        char claim_ns[64];      /* NAMESPACE of a NAMESPACE/NAME claim */
        const char *token_name; /* token create --name */
        int64_t expires_seconds; /* token create --expires; 0: never */
        const char *sets;       /* token create --sets */
        const char *note;       /* takeover return --note */
        int stream;             /* command lines --stream: a Sbx__Stream */
        /* per group, the last of its options given, for the usage error */
        const char *group_option[CTL_GROUP_COUNT_];
} Args;

/* Room for the request message a row builds (ctl_request_body() checks). */
#define CTL_REQUEST_BODY_SIZE 256

typedef struct CtlRequest {
        Sbx__Msg msg;
        Sbx__Reply__BodyCase expect;    /* the reply body the printer needs; NOT_SET: any */
        union {
                max_align_t align;
                unsigned char bytes[CTL_REQUEST_BODY_SIZE];
        } body;
} CtlRequest;

/* One option: its name, its argument, its group and what it sets. */
typedef struct CtlOption {
        const char *name;       /* "--socket" */
        bool has_arg;
        CtlGroup group;
        /* Store arg in a; EXIT_OK, or EXIT_USAGE after saying why. */
        int (*set)(Args *a, const char *arg);
        /* How the shell completes the value: "@file", "@dir", "@user", or a
         * space-separated list of words; NULL: not at all. */
        const char *complete;
} CtlOption;

typedef enum CtlVerbFlags {
        CTL_NO_JSON = 1u << 1,          /* --json is a usage error */
        CTL_SANDBOX_ARG = 1u << 2,      /* the first argument names an existing sandbox */
        CTL_OWNER_ARG = 1u << 3,        /* the first argument is a uid or a user name */
} CtlVerbFlags;

typedef struct CtlVerb {
        const char *words;      /* "sandbox create", or one word: "gc" */
        unsigned n_args;        /* positional arguments after the words (0 to 2) */
        const char *missing;    /* what "missing ..." names when some lack */
        const char *id_what;    /* the second argument in its errors: "session ID" */
        unsigned groups;        /* CTL_GROUP() of the option groups it takes */
        unsigned flags;         /* CtlVerbFlags */
        /* The request for sbxd from the command line: EXIT_OK, or EXIT_USAGE
         * after saying why (it runs before sbxd is contacted). */
        int (*build)(Args *a, CtlRequest *req);
        /* Print the reply on stdout; the exit status. */
        int (*print)(const Args *a, const Sbx__Reply *reply);
        /* Instead of one round trip and print (a listing of several pages). */
        int (*run)(int fd, const Args *a, CtlRequest *req);
} CtlVerb;

#define CTL_LABELS_MAX 8u

/* sbxctl-boxes.c: box list|show|stop (the boxes set). */
int ctl_build_box_list(Args *a, CtlRequest *req);
int ctl_print_box_list(const Args *a, const Sbx__Reply *reply);
int ctl_build_box_show(Args *a, CtlRequest *req);
int ctl_print_box_show(const Args *a, const Sbx__Reply *reply);
int ctl_build_box_stop(Args *a, CtlRequest *req);
int ctl_print_box_stop(const Args *a, const Sbx__Reply *reply);
/* sbxctl-claims.c: template list|show, claim list|show|delete. */
int ctl_set_label(Args *a, const char *arg);
int ctl_build_template_list(Args *a, CtlRequest *req);
int ctl_print_template_list(const Args *a, const Sbx__Reply *reply);
int ctl_print_template_show(const Args *a, const Sbx__Reply *reply);
int ctl_build_claim_list(Args *a, CtlRequest *req);
int ctl_print_claim_list(const Args *a, const Sbx__Reply *reply);
int ctl_build_claim_show(Args *a, CtlRequest *req);
int ctl_print_claim_show(const Args *a, const Sbx__Reply *reply);
int ctl_build_claim_delete(Args *a, CtlRequest *req);
int ctl_print_claim_delete(const Args *a, const Sbx__Reply *reply);

/* sbxctl-jobs.c: job list|show|rm (the script set's jobs). */
/* sbxctl-verbs.c: a command's or a job's egress audit (docs/egress.md),
 * for --json, and its target lines under an "egress: POLICY" line. */
extern const MsgJsonMap ctl_egress_audit_map;
void ctl_print_egress_audit(const Sbx__EgressAudit *audit);
int ctl_build_job_list(Args *a, CtlRequest *req);
int ctl_print_job_list(const Args *a, const Sbx__Reply *reply);
int ctl_build_job_show(Args *a, CtlRequest *req);
int ctl_print_job_show(const Args *a, const Sbx__Reply *reply);
int ctl_build_job_rm(Args *a, CtlRequest *req);
int ctl_print_job_rm(const Args *a, const Sbx__Reply *reply);
/* sbxctl-tokens.c: token create|list|revoke (sbx-gateway's bearer tokens). */
int ctl_set_token_name(Args *a, const char *arg);
int ctl_set_expires(Args *a, const char *arg);
int ctl_set_sets(Args *a, const char *arg);
int ctl_build_token_create(Args *a, CtlRequest *req);
int ctl_print_token_create(const Args *a, const Sbx__Reply *reply);
int ctl_build_token_list(Args *a, CtlRequest *req);
int ctl_print_token_list(const Args *a, const Sbx__Reply *reply);
int ctl_build_token_revoke(Args *a, CtlRequest *req);
int ctl_print_token_revoke(const Args *a, const Sbx__Reply *reply);
/* sbxctl-takeover.c: takeover list|attach|return (a person's takeover of a box). */
int ctl_set_note(Args *a, const char *arg);
int ctl_build_takeover_list(Args *a, CtlRequest *req);
int ctl_print_takeover_list(const Args *a, const Sbx__Reply *reply);
int ctl_build_takeover_attach(Args *a, CtlRequest *req);
int ctl_print_takeover_attach(const Args *a, const Sbx__Reply *reply);
int ctl_run_takeover_attach(int fd, const Args *a, CtlRequest *req);
int ctl_build_takeover_return(Args *a, CtlRequest *req);
int ctl_print_takeover_return(const Args *a, const Sbx__Reply *reply);

/* sbxctl-secrets.c: secret set|list|rm (the boxes set's secrets) ... */
int ctl_build_secret_set(Args *a, CtlRequest *req);
int ctl_print_secret_set(const Args *a, const Sbx__Reply *reply);
int ctl_build_secret_list(Args *a, CtlRequest *req);
int ctl_print_secret_list(const Args *a, const Sbx__Reply *reply);
int ctl_build_secret_rm(Args *a, CtlRequest *req);
int ctl_print_secret_rm(const Args *a, const Sbx__Reply *reply);
/* ... and version list|rm (the boxes set's versions). */
int ctl_build_version_list(Args *a, CtlRequest *req);
int ctl_print_version_list(const Args *a, const Sbx__Reply *reply);
int ctl_build_version_rm(Args *a, CtlRequest *req);
int ctl_print_version_rm(const Args *a, const Sbx__Reply *reply);

extern const CtlOption ctl_options[];
extern const size_t ctl_n_options;
extern const CtlVerb ctl_verbs[];
extern const size_t ctl_n_verbs;

/* ---- helpers (sbxctl-util.c) ------------------------------------------------ */

extern const char *const program;

/* A command's words: the length of the first ("session" of "session
 * list"), and the second, or NULL for a one-word command ("gc"). */
size_t ctl_noun_len(const char *words);
const char *ctl_second_word(const char *words);

_printf_(1, 2) int usage_error(const char *fmt, ...);

/* A server- or host-supplied string with control characters replaced, so
 * that a reply cannot drive the terminal; multi-line text (a diff) keeps its
 * newlines and tabs. */
void fputs_safe(const char *s, FILE *f);
void fwrite_text_safe(const uint8_t *s, size_t n, FILE *f);
/* "key: value" (made safe as fputs_safe does) on a line of its own; nothing when value is empty. */
void print_line(const char *key, const char *value);

void format_size(uint64_t bytes, char *buf, size_t size);
void format_uptime(double seconds, char *buf, size_t size);
void format_time(int64_t unix_seconds, char *buf, size_t size);
void format_duration(int64_t from_usec, int64_t to_usec, char *buf, size_t size);

/* Print j (taking it) on stdout, indented, then a newline; NULL is the
 * failure to build it. The exit status. */
int print_json(json_t *j);

/* A table of text cells: columns padded to their widest cell and separated
 * by two spaces, the last column unpadded. Cells are copied with control
 * characters replaced. */
typedef struct Table {
        size_t n_cols, n_rows, allocated;
        const char *const *header;
        char **cells;           /* n_rows * n_cols */
        bool oom;
} Table;

#define TABLE_COLS_MAX 16         /* columns of a table_add row */

void table_done(Table *t);
/* One row of n_cols strings (NULL is printed as "-"). */
void table_add(Table *t, ...);
/* The same from an array of n_cols strings (a table whose columns come from the reply). */
void table_add_row(Table *t, const char *const *cells);
int table_print(Table *t);

/* A session or command id from the command line: non-empty and at most
 * SBX_NAME_MAX bytes; EXIT_OK, or EXIT_USAGE after saying why. */
int check_id(const char *what, const char *s);

/* A new request of message type desc carrying its (initialized) body. */
void *ctl_request_body(CtlRequest *req, Sbx__MsgType type, const ProtobufCMessageDescriptor *desc);

int connect_sbxd(const char *path, int *ret_fd);

/* The one request/reply round trip: send req with seq, wait for the
 * MSG_REPLY carrying the same seq (other frames are skipped), and check it.
 * A refusal (err < 0) prints errmsg and maps err to an exit status when
 * map_err is set, otherwise exits EXIT_FAILED. On success the reply carries
 * the body `expect` (unless BODY__NOT_SET) and *ret_msg owns it.
 * Returns EXIT_OK or the exit status, having said why on stderr. */
/* transact's checks of a reply to the request what: EXIT_OK, or the exit
 * status having said why on stderr. */
int ctl_reply_check(const char *what, const Sbx__Reply *reply, Sbx__Reply__BodyCase expect, bool map_err);
int transact(int fd, const char *what, const Sbx__Msg *req, uint32_t seq, Sbx__Reply__BodyCase expect,
             bool map_err, Sbx__Msg **ret_msg);
