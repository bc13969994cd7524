/* sbxctl's commands: the option table, and the command table with one row,
 * one builder and one printer per command (sbxctl.h says how they fit). A
 * new object (templates, images, jobs...) is its rows here and their two
 * functions each. */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fd-util.h"
#include "msg-json.h"
#include "sbx-limits.h"
#include "sbxctl.h"
#include "wire.h"

#define _cleanup_json_ _cleanup_(json_decrefp)

/* What sbxctl --json makes of text that is not UTF-8: '?' (see msg-json.h). */
#define CTL_TEXT MSG_JSON_TEXT_ASCII

static bool str_eq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

/* ---- option values ----------------------------------------------------- */

/* BYTES, or a number with a K, M or G suffix (powers of 1024); positive. */
static int parse_positive_size(const char *s, uint64_t *ret) {
        int r = parse_size(s, ret);

        return r < 0 ? r : *ret == 0 ? -EINVAL : 0;
}

/* s as a whole decimal number: -EINVAL unless it is one, -ERANGE above max. */
static int parse_whole(const char *s, uint64_t max, uint64_t *ret) {
        uint64_t v;
        int r = parse_u64(s, &v);

        if (r >= 0 && v > max)
                r = -ERANGE;
        if (r >= 0)
                *ret = v;
        return r;
}

static int parse_positive_u32(const char *s, uint32_t *ret) {
        uint64_t v = 0;
        int r = parse_whole(s, UINT32_MAX, &v);

        if (r >= 0 && v == 0)
                r = -EINVAL;
        if (r >= 0)
                *ret = (uint32_t) v;
        return r;
}

/* A numeric uid or a user name. */
static int parse_owner(const char *s, uint32_t *ret) {
        const struct passwd *pw;
        uint64_t v;
        int r;

        r = parse_whole(s, UINT32_MAX - 1, &v);         /* (uid_t) -1 is not a uid */
        if (r != -EINVAL) {
                if (r >= 0)
                        *ret = (uint32_t) v;
                return r;
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


/* ---- options ------------------------------------------------------------- */

static int set_socket(Args *a, const char *arg) {
        if (*arg == '\0')
                return usage_error("--socket needs a path");
        a->socket_path = arg;
        return EXIT_OK;
}

static int set_json(Args *a, const char *arg) {
        a->json = true;
        return EXIT_OK;
}

static int set_source(Args *a, const char *arg) {
        a->source = arg;
        return EXIT_OK;
}

static int set_image(Args *a, const char *arg) {
        a->image = arg;
        return check_id("--image", arg);
}

/* Checked by sbxd (core/egress.h), which names the policies it knows. */
static int set_egress(Args *a, const char *arg) {
        a->egress = arg;
        return EXIT_OK;
}

static int set_memory(Args *a, const char *arg) {
        if (parse_positive_size(arg, &a->memory_bytes) < 0)
                return usage_error("invalid --memory '%s': expected a positive number of bytes, "
                                   "optionally with a K, M or G suffix", arg);
        return EXIT_OK;
}

static int set_pids(Args *a, const char *arg) {
        if (parse_positive_u32(arg, &a->pids_max) < 0)
                return usage_error("invalid --pids '%s': expected a positive integer up to %" PRIu32, arg,
                                   UINT32_MAX);
        return EXIT_OK;
}

static int set_cpu_weight(Args *a, const char *arg) {
        if (parse_positive_u32(arg, &a->cpu_weight) < 0 || a->cpu_weight > SBX_CPU_WEIGHT_MAX)
                return usage_error("invalid --cpu-weight '%s': expected 1 to %u (%u is the default share)", arg,
                                   SBX_CPU_WEIGHT_MAX, SBX_CPU_WEIGHT_DEFAULT);
        return EXIT_OK;
}

static int set_owner(Args *a, const char *arg) {
        if (parse_owner(arg, &a->owner_uid) < 0)
                return usage_error("invalid --owner '%s': expected a uid or a user name", arg);
        a->has_owner = true;
        return EXIT_OK;
}

static int set_session(Args *a, const char *arg) {
        if (check_id("--session", arg) != EXIT_OK)
                return EXIT_USAGE;
        a->session = arg;
        return EXIT_OK;
}

#define STREAMS "merged stdout stderr"

static int set_stream(Args *a, const char *arg) {
        static const char *const names[] = { [SBX__STREAM__STREAM_MERGED] = "merged",
                                             [SBX__STREAM__STREAM_STDOUT] = "stdout",
                                             [SBX__STREAM__STREAM_STDERR] = "stderr" };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (str_eq(arg, names[i])) {
                        a->stream = (int) i;
                        return EXIT_OK;
                }
        return usage_error("invalid --stream '%s': expected " STREAMS, arg);
}

#define POLICIES "publish_then_destroy destroy"

static int set_policy(Args *a, const char *arg) {
        if (!str_eq(arg, "publish_then_destroy") && !str_eq(arg, "destroy"))
                return usage_error("invalid --policy '%s': expected publish_then_destroy or destroy", arg);
        a->policy = arg;
        return EXIT_OK;
}

static int set_action(Args *a, const char *action) {
        if (a->action && !str_eq(a->action, action))
                return usage_error("--publish and --discard exclude each other");
        a->action = action;
        return EXIT_OK;
}

static int set_publish(Args *a, const char *arg) {
        return set_action(a, "publish");
}

static int set_discard(Args *a, const char *arg) {
        return set_action(a, "discard");
}

static int set_overwrite(Args *a, const char *arg) {
        a->overwrite = true;
        return EXIT_OK;
}

static int set_help(Args *a, const char *arg) {
        a->want_help = true;
        return EXIT_OK;
}

static int set_version(Args *a, const char *arg) {
        a->want_version = true;
        return EXIT_OK;
}

const CtlOption ctl_options[] = {
        { "--socket",     true,  CTL_GROUP_GLOBAL,   set_socket,     "@file" },
        { "--json",       false, CTL_GROUP_GLOBAL,   set_json,       NULL },
        { "--source",     true,  CTL_GROUP_CREATE,   set_source,     "@dir" },
        { "--image",      true,  CTL_GROUP_CREATE,   set_image,      NULL },
        { "--egress",     true,  CTL_GROUP_CREATE,   set_egress,     "none package-managers open" },
        { "--memory",     true,  CTL_GROUP_CREATE,   set_memory,     NULL },
        { "--pids",       true,  CTL_GROUP_CREATE,   set_pids,       NULL },
        { "--cpu-weight", true,  CTL_GROUP_CREATE,   set_cpu_weight, NULL },
        { "--owner",      true,  CTL_GROUP_OWNER,    set_owner,      "@user" },
        { "--session",    true,  CTL_GROUP_SESSION,  set_session,    NULL },
        { "--policy",     true,  CTL_GROUP_POLICY,   set_policy,     POLICIES },
        { "--publish",    false, CTL_GROUP_FINALIZE, set_publish,    NULL },
        { "--discard",    false, CTL_GROUP_FINALIZE, set_discard,    NULL },
        { "--overwrite",  false, CTL_GROUP_FINALIZE, set_overwrite,  NULL },
        { "--label",      true,  CTL_GROUP_LABEL,    ctl_set_label,  NULL },
        { "--name",       true,  CTL_GROUP_TOKEN,    ctl_set_token_name, NULL },
        { "--expires",    true,  CTL_GROUP_TOKEN,    ctl_set_expires, NULL },
        { "--sets",       true,  CTL_GROUP_TOKEN,    ctl_set_sets,   "runtime sessions lifecycle" },
        { "--note",       true,  CTL_GROUP_TAKEOVER, ctl_set_note,   NULL },
        { "--stream",     true,  CTL_GROUP_LINES,    set_stream,     STREAMS },
        { "--help",       false, CTL_GROUP_GLOBAL,   set_help,       NULL },
        { "--version",    false, CTL_GROUP_GLOBAL,   set_version,    NULL },
};
const size_t ctl_n_options = ELEMENTSOF(ctl_options);

/* ---- sbxctl --json: the keys of each reply ------------------------------------ */

/* sbxctl --json writes the reply's fields under their protocol names. */
static const MsgJsonMap sandbox_map = MSG_JSON_MAP_INIT(sbx__sandbox_info__descriptor,
        MSG_JSON_NAMES("name id owner_uid source_dir image memory_bytes pids_max cpu_weight layer_count live_sessions "
                       "created_unix uid_base uid_count egress layers_bytes layers_inodes layers_max_bytes"));

/* sandbox show: after sandbox_map's keys. */
static const MsgJsonMap transcripts_map = MSG_JSON_MAP_INIT(sbx__sandbox_info__descriptor,
        MSG_JSON_NAMES("transcript_bytes transcript_files transcripts_max_bytes owner_transcript_bytes "
                       "owner_transcripts_max_bytes all_transcript_bytes all_transcripts_max_bytes "
                       "all_transcript_files all_transcripts_max_inodes"));

/* sandbox create: after sandbox_map's keys. */
static const MsgJsonMap unreadable_map = MSG_JSON_MAP_INIT(sbx__sandbox_info__descriptor,
        MSG_JSON_NAMES("unreadable unreadable_paths"));

static const MsgJsonMap session_map = MSG_JSON_MAP_INIT(sbx__session_info__descriptor,
        MSG_JSON_NAMES("workspace_session sandbox finalize_policy automatic state base_layer created_unix "
                       "running_commands memory_bytes discard_unix"));

static const MsgJsonMap publication_map = MSG_JSON_MAP_INIT(sbx__publication__descriptor,
        MSG_JSON_NAMES("published layer owner changed_paths error conflicts"));

static const MsgJsonMap finalize_map = MSG_JSON_MAP_INIT(sbx__session_finalize_reply__descriptor,
        MSG_JSON_FIELD("session", "session", .sub = &session_map),
        MSG_JSON_NAMES("action"),
        MSG_JSON_FIELD("publication", "publication", .sub = &publication_map));

static const MsgJsonMap changed_path_map = MSG_JSON_MAP_INIT(sbx__changed_path__descriptor,
        MSG_JSON_NAMES("path change"));

static const MsgJsonMap diff_map = MSG_JSON_MAP_INIT(sbx__session_diff_reply__descriptor,
        MSG_JSON_FIELD("changes", "changes", .sub = &changed_path_map),
        MSG_JSON_NAMES("diff truncated"));

static const MsgJsonMap command_map = MSG_JSON_MAP_INIT(sbx__command_info__descriptor,
        MSG_JSON_NAMES("command_session workspace_session status exit_code signal end_reason started_unix_usec "
                       "ended_unix_usec cmd transcript_evicted"));

/* command show: its end and, for a sandbox with an egress policy, its egress audit (docs/egress.md). */
const MsgJsonMap ctl_egress_audit_map = MSG_JSON_MAP_INIT(sbx__egress_audit__descriptor,
        MSG_JSON_NAMES("policy contacted refused truncated"));
static const MsgJsonMap command_show_map = MSG_JSON_MAP_INIT(sbx__command_output__descriptor,
        MSG_JSON_NAMES("command_session workspace_session status exit_code signal end_reason total_lines"),
        MSG_JSON_FIELD("egress", "egress", .flags = MSG_JSON_OMIT_EMPTY, .sub = &ctl_egress_audit_map));

static const MsgJsonMap layer_map = MSG_JSON_MAP_INIT(sbx__layer_info__descriptor,
        MSG_JSON_NAMES("layer owner changed_paths created_unix"));

static const MsgJsonMap gc_map = MSG_JSON_MAP_INIT(sbx__gc_reply__descriptor,
        MSG_JSON_NAMES("transcripts_removed layers_removed sandboxes_removed images_removed bytes_freed"));

/* image list and show: "versions" is an object, program to version, added after. */
static const MsgJsonMap image_map = MSG_JSON_MAP_INIT(sbx__image_info__descriptor,
        MSG_JSON_NAMES("name description state digest size_bytes built_unix"));
static const MsgJsonMap image_detail_map = MSG_JSON_MAP_INIT(sbx__image_info__descriptor,
        MSG_JSON_NAMES("kind error step sandboxes suite packages npm env build_seconds"));

static const MsgJsonMap status_map = MSG_JSON_MAP_INIT(sbx__status_reply__descriptor,
        MSG_JSON_NAMES("version proto_version pid uptime_seconds cgroup_backend sandboxes live_sessions "
                       "spare_sessions running_commands clients state_dir run_dir caller_only "
                       "artifacts artifact_bytes artifacts_max_bytes artifact_raw_bytes"));

static const MsgJsonMap owner_quota_map = MSG_JSON_MAP_INIT(sbx__owner_quota__descriptor,
        MSG_JSON_NAMES("name what used limit bytes"));

static const MsgJsonMap owner_map = MSG_JSON_MAP_INIT(sbx__owner_usage__descriptor,
        MSG_JSON_NAMES("uid exempt"),
        MSG_JSON_FIELD("quotas", "quotas", .sub = &owner_quota_map));

static int print_object(const MsgJsonMap *map, const void *m) {
        return print_json(msg_json_object(map, m, CTL_TEXT));
}

/* m with the keys of map, then those of more. */
static int print_object_and(const MsgJsonMap *map, const MsgJsonMap *more, const void *m) {
        _cleanup_json_ json_t *j = msg_json_object(map, m, CTL_TEXT);

        if (j && msg_json_append(j, more, m, CTL_TEXT) < 0)
                json_decref(TAKE_PTR(j));
        return print_json(TAKE_PTR(j));
}

static int print_array(const MsgJsonMap *map, void *const *items, size_t n) {
        return print_json(msg_json_array(map, items, n, CTL_TEXT));
}

/* ---- sandboxes and images ------------------------------------------------------ */

static int build_sandbox_create(Args *a, CtlRequest *req) {
        Sbx__SandboxCreate *m;
        int r;

        if (!a->source)
                return usage_error("'sandbox create' needs --source DIR");
        r = parse_source(a->source, &a->source_dir);
        if (r < 0)
                return usage_error("invalid --source '%s': %s", a->source, strerror(-r));
        m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_CREATE, &sbx__sandbox_create__descriptor);
        m->name = (char *) a->name;
        m->source_dir = a->source_dir;
        m->image = (char *) (a->image ? a->image : "");
        m->egress = (char *) (a->egress ? a->egress : "");
        m->memory_bytes = a->memory_bytes;
        m->pids_max = a->pids_max;
        m->cpu_weight = a->cpu_weight;
        m->has_owner = a->has_owner;
        m->owner_uid = a->owner_uid;
        req->expect = SBX__REPLY__BODY_SANDBOX;
        return EXIT_OK;
}

/* The new sandbox, and what of its source the owner may not read (left out). */
static int print_sandbox_create(const Args *a, const Sbx__Reply *reply) {
        const Sbx__SandboxInfo *s = reply->sandbox;

        if (a->json)
                return print_object_and(&sandbox_map, &unreadable_map, s);
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

/* sandbox list and sandbox show: the whole list (show picks one). */
static int build_sandbox_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_LIST, &sbx__sandbox_list__descriptor);
        req->expect = SBX__REPLY__BODY_SANDBOX_LIST;
        return EXIT_OK;
}

static int print_sandbox_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "NAME", "OWNER", "IMAGE", "LAYERS", "SESSIONS", "MEMORY", "PIDS",
                                              "SOURCE" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__SandboxListReply *l = reply->sandbox_list;

        if (a->json)
                return print_array(&sandbox_map, (void *const *) l->sandboxes, l->n_sandboxes);
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
                table_add(&t, s->name, owner, s->image[0] ? s->image : "default", layers, sessions, memory, pids,
                          s->source_dir);
        }
        return table_print(&t);
}

/* What the transcripts store against their budgets (sbxd.conf(5)). */
static void print_transcripts(const Sbx__SandboxInfo *s) {
        char used[24], max[24];

        format_size(s->transcript_bytes, used, sizeof(used));
        format_size(s->transcripts_max_bytes, max, sizeof(max));
        printf("transcripts: %s of %s (sandbox_transcripts_max_bytes), %" PRIu64 " files\n", used, max,
               s->transcript_files);
        format_size(s->owner_transcript_bytes, used, sizeof(used));
        format_size(s->owner_transcripts_max_bytes, max, sizeof(max));
        printf("owner's transcripts: %s of %s (owner_transcripts_max_bytes)\n", used, max);
        if (s->all_transcripts_max_bytes == 0)
                return;         /* for root only */
        format_size(s->all_transcript_bytes, used, sizeof(used));
        format_size(s->all_transcripts_max_bytes, max, sizeof(max));
        printf("all transcripts: %s of %s (transcripts_max_bytes), %" PRIu64 " of %" PRIu64
               " files (transcripts_max_inodes)\n", used, max, s->all_transcript_files, s->all_transcripts_max_inodes);
}

static int print_sandbox_show(const Args *a, const Sbx__Reply *reply) {
        const Sbx__SandboxListReply *l = reply->sandbox_list;
        const Sbx__SandboxInfo *s = NULL;
        char memory[24], created[32], used[24], quota[24];

        for (size_t i = 0; i < l->n_sandboxes && !s; i++)
                if (str_eq(l->sandboxes[i]->name, a->name))
                        s = l->sandboxes[i];
        if (!s) {
                fprintf(stderr, "%s: no sandbox '", program);
                fputs_safe(a->name, stderr);
                fprintf(stderr, "' that you may see; 'sbxctl sandbox list' shows them\n");
                return EXIT_NOT_FOUND;
        }
        if (a->json)
                return print_object_and(&sandbox_map, &transcripts_map, s);

        format_size(s->memory_bytes, memory, sizeof(memory));
        format_time(s->created_unix, created, sizeof(created));
        fputs("name: ", stdout);
        fputs_safe(s->name, stdout);
        fputs("\nid: ", stdout);
        fputs_safe(s->id, stdout);
        printf("\nowner: %" PRIu32 "\n", s->owner_uid);
        fputs("source: ", stdout);
        fputs_safe(s->source_dir, stdout);
        fputs("\nimage: ", stdout);
        fputs_safe(s->image[0] ? s->image : "default", stdout);
        fputs("\negress: ", stdout);
        fputs_safe(s->egress[0] ? s->egress : "none", stdout);
        putchar('\n');
        printf("memory: %s\n", memory);
        if (s->pids_max == 0)
                printf("pids: default\n");
        else
                printf("pids: %" PRIu32 "\n", s->pids_max);
        printf("cpu weight: %" PRIu32 "\n", s->cpu_weight);
        if (s->uid_count > 0)
                printf("host ids: %" PRIu32 "-%" PRIu32 "\n", s->uid_base, s->uid_base + s->uid_count - 1);
        printf("layers: %" PRIu32 "\n", s->layer_count);
        format_size(s->layers_bytes, used, sizeof(used));
        format_size(s->layers_max_bytes, quota, sizeof(quota));
        printf("layer disk: %s of %s (sandbox_layers_max_bytes), %" PRIu64 " inodes\n", used, quota,
               s->layers_inodes);
        printf("live sessions: %" PRIu32 "\n", s->live_sessions);
        printf("created: %s\n", created);
        print_transcripts(s);
        return EXIT_OK;
}

static int build_sandbox_delete(Args *a, CtlRequest *req) {
        Sbx__SandboxDelete *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SANDBOX_DELETE,
                                                 &sbx__sandbox_delete__descriptor);

        m->name = (char *) a->name;
        return EXIT_OK;
}

static int print_sandbox_delete(const Args *a, const Sbx__Reply *reply) {
        fputs("deleted sandbox ", stdout);
        fputs_safe(a->name, stdout);
        putchar('\n');
        return EXIT_OK;
}

/* ---- images -------------------------------------------------------------------- */

static int build_image_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_IMAGE_LIST, &sbx__image_list__descriptor);
        req->expect = SBX__REPLY__BODY_IMAGE_LIST;
        return EXIT_OK;
}

/* An image as JSON: image_map's keys, versions as an object, and with
 * detail the rest. */
static json_t *image_json(const Sbx__ImageInfo *im, bool detail) {
        _cleanup_json_ json_t *j = msg_json_object(&image_map, im, CTL_TEXT);
        json_t *v = json_object();

        if (!j || !v || json_object_set_new(j, "versions", v) < 0)
                return NULL;
        for (size_t i = 0; i < im->n_versions; i++)
                if (json_object_set_new(v, im->versions[i]->program, json_string(im->versions[i]->version)) < 0)
                        return NULL;
        if (detail && msg_json_append(j, &image_detail_map, im, CTL_TEXT) < 0)
                return NULL;
        return TAKE_PTR(j);
}

/* "python=Python 3.11.2, pip=pip 23.0.1" */
static void image_versions_text(const Sbx__ImageInfo *im, char *buf, size_t size) {
        size_t len = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < im->n_versions && len < size; i++)
                len += (size_t) snprintf(buf + len, size - len, "%s%s", i ? ", " : "", im->versions[i]->version);
}

static int print_image_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "NAME", "STATE", "SIZE", "BUILT", "VERSIONS", "DESCRIPTION" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__ImageListReply *l = reply->image_list;

        if (a->json) {
                _cleanup_json_ json_t *arr = json_array();
                for (size_t i = 0; arr && i < l->n_images; i++)
                        if (json_array_append_new(arr, image_json(l->images[i], false)) < 0)
                                json_decref(TAKE_PTR(arr));
                return print_json(TAKE_PTR(arr));
        }
        for (size_t i = 0; i < l->n_images; i++) {
                const Sbx__ImageInfo *im = l->images[i];
                char size[24] = "-", built[32] = "-", versions[512];
                if (im->size_bytes)
                        format_size(im->size_bytes, size, sizeof(size));
                if (im->built_unix)
                        format_time(im->built_unix, built, sizeof(built));
                image_versions_text(im, versions, sizeof(versions));
                table_add(&t, im->name, im->state, size, built, versions[0] ? versions : "-", im->description);
        }
        return table_print(&t);
}

/* A use or a limit: a count, or bytes ("0B", "1.5G"). */
static void format_amount(uint64_t v, bool bytes, char *buf, size_t size) {
        if (!bytes)
                snprintf(buf, size, "%" PRIu64, v);
        else if (v == 0)
                snprintf(buf, size, "0B");
        else
                format_size(v, buf, size);
}

static const Sbx__ImageInfo *image_pick(const Args *a, const Sbx__ImageListReply *l) {
        for (size_t i = 0; i < l->n_images; i++)
                if (str_eq(l->images[i]->name, a->name))
                        return l->images[i];
        fprintf(stderr, "%s: no image '", program);
        fputs_safe(a->name, stderr);
        fprintf(stderr, "'; 'sbxctl image list' shows them\n");
        return NULL;
}

static int print_image(const Args *a, const Sbx__ImageInfo *im) {
        char size[24], built[32];

        if (a->json)
                return print_json(image_json(im, true));
        print_line("name", im->name);
        print_line("kind", im->kind);
        print_line("description", im->description);
        print_line("state", im->state);
        print_line("step", im->step);
        print_line("error", im->error);
        print_line("digest", im->digest);
        if (im->size_bytes) {
                format_size(im->size_bytes, size, sizeof(size));
                print_line("size", size);
        }
        if (im->built_unix) {
                format_time(im->built_unix, built, sizeof(built));
                print_line("built", built);
                printf("build time: %" PRIu64 " s\n", im->build_seconds);
        }
        for (size_t i = 0; i < im->n_versions; i++) {
                printf("version of %s: ", im->versions[i]->program);
                fputs_safe(im->versions[i]->version, stdout);
                putchar('\n');
        }
        print_line("suite", im->suite);
        print_line("packages", im->packages);
        print_line("npm", im->npm);
        for (size_t i = 0; i < im->n_env; i++)
                print_line("environment", im->env[i]);
        for (size_t i = 0; i < im->n_sandboxes; i++)
                print_line("used by sandbox", im->sandboxes[i]);
        return EXIT_OK;
}

static int print_image_show(const Args *a, const Sbx__Reply *reply) {
        const Sbx__ImageInfo *im = image_pick(a, reply->image_list);

        return im ? print_image(a, im) : EXIT_NOT_FOUND;
}

static int build_image_build(Args *a, CtlRequest *req) {
        Sbx__ImageBuild *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_IMAGE_BUILD,
                                              &sbx__image_build__descriptor);

        m->name = (char *) a->name;
        m->wait = true;
        req->expect = SBX__REPLY__BODY_IMAGE;
        return EXIT_OK;
}

static int print_image_build(const Args *a, const Sbx__Reply *reply) {
        return print_image(a, reply->image);
}

/* The image's state from the listing (seq on fd): *ret_msg owns *ret. */
static int image_poll(int fd, const Args *a, uint32_t seq, Sbx__Msg **ret_msg, const Sbx__ImageInfo **ret) {
        CtlRequest list = {};
        int r;

        build_image_list((Args *) a, &list);
        r = transact(fd, "image list", &list.msg, seq, list.expect, true, ret_msg);
        if (r != EXIT_OK)
                return r;
        *ret = image_pick(a, (*ret_msg)->reply->image_list);
        return *ret ? EXIT_OK : EXIT_NOT_FOUND;
}

/* On a terminal: start the build, then show its step and time once a
 * second until it ends. Elsewhere: one round trip that ends with it. */
static int run_image_build(int fd, const Args *a, CtlRequest *req) {
        unsigned long long t0 = now_usec();
        const Sbx__ImageInfo *im = NULL;
        Sbx__Msg *reply = NULL;
        int r;

        req->msg.image_build->wait = a->json || !isatty(STDERR_FILENO);
        r = transact(fd, a->verb->words, &req->msg, 1, req->expect, true, &reply);
        if (r != EXIT_OK || req->msg.image_build->wait || !str_eq(reply->reply->image->state, "building")) {
                if (r == EXIT_OK)
                        r = print_image_build(a, reply->reply);
                if (reply)
                        sbx__msg__free_unpacked(reply, NULL);
                return r;
        }
        for (uint32_t seq = 2;; seq++) {
                sbx__msg__free_unpacked(reply, NULL);
                reply = NULL;
                r = image_poll(fd, a, seq, &reply, &im);
                if (r != EXIT_OK || !str_eq(im->state, "building"))
                        break;
                fprintf(stderr, "\r\033[Kbuilding %s: step %s, %llu s", a->name, im->step[0] ? im->step : "start",
                        (now_usec() - t0) / 1000000);
                sleep(1);
        }
        fputs("\r\033[K", stderr);
        if (r == EXIT_OK && str_eq(im->state, "failed")) {
                fprintf(stderr, "%s: ", program);
                fputs_safe(im->error, stderr);
                fputc('\n', stderr);
                r = EXIT_FAILED;
        } else if (r == EXIT_OK)
                r = print_image(a, im);
        if (reply)
                sbx__msg__free_unpacked(reply, NULL);
        return r;
}

static int build_image_rm(Args *a, CtlRequest *req) {
        Sbx__ImageRm *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_IMAGE_RM, &sbx__image_rm__descriptor);

        m->name = (char *) a->name;
        return EXIT_OK;
}

static int print_image_rm(const Args *a, const Sbx__Reply *reply) {
        fputs("removed the build of image ", stdout);
        fputs_safe(a->name, stdout);
        putchar('\n');
        return EXIT_OK;
}

/* ---- sessions ------------------------------------------------------------------ */

static int build_session_list(Args *a, CtlRequest *req) {
        Sbx__SessionList *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SESSION_LIST,
                                               &sbx__session_list__descriptor);

        m->sandbox = (char *) a->name;
        req->expect = SBX__REPLY__BODY_SESSION_LIST;
        return EXIT_OK;
}

static int print_session_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "ID", "STATE", "POLICY", "KIND", "BASE", "RUNNING", "MEMORY", "CREATED" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__SessionListReply *l = reply->session_list;

        if (a->json)
                return print_array(&session_map, (void *const *) l->sessions, l->n_sessions);
        for (size_t i = 0; i < l->n_sessions; i++) {
                const Sbx__SessionInfo *s = l->sessions[i];
                char base[16], running[16], memory[24], created[32];

                snprintf(base, sizeof(base), "%" PRIu32, s->base_layer);
                snprintf(running, sizeof(running), "%" PRIu32, s->running_commands);
                format_amount(s->memory_bytes, true, memory, sizeof(memory));
                format_time(s->created_unix, created, sizeof(created));
                table_add(&t, s->workspace_session, s->state, s->finalize_policy,
                          s->automatic ? "automatic" : "managed", base, running, memory, created);
        }
        return table_print(&t);
}

static int build_session_create(Args *a, CtlRequest *req) {
        Sbx__SessionCreate *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SESSION_CREATE,
                                                 &sbx__session_create__descriptor);

        m->sandbox = (char *) a->name;
        m->finalize_policy = (char *) (a->policy ?: "");
        req->expect = SBX__REPLY__BODY_SESSION;
        return EXIT_OK;
}

static int print_session_create(const Args *a, const Sbx__Reply *reply) {
        if (a->json)
                return print_object(&session_map, reply->session);
        /* the id alone, so that ID=$(sbxctl session create web) works */
        fputs_safe(reply->session->workspace_session, stdout);
        putchar('\n');
        return EXIT_OK;
}

static int build_session_finalize(Args *a, CtlRequest *req) {
        Sbx__SessionFinalize *m;

        if (a->overwrite && a->action && str_eq(a->action, "discard"))
                return usage_error("--overwrite is only valid when publishing");
        m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SESSION_FINALIZE, &sbx__session_finalize__descriptor);
        m->sandbox = (char *) a->name;
        m->workspace_session = (char *) a->id;
        m->action = (char *) (a->action ?: "");
        m->overwrite = a->overwrite;
        req->expect = SBX__REPLY__BODY_SESSION_FINALIZE;
        return EXIT_OK;
}

/* A refusal by conflicts: the paths on stderr, and EXIT_CONFLICT. */
static int print_conflicts(const Sbx__Publication *p) {
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

static int print_session_finalize(const Args *a, const Sbx__Reply *reply) {
        const Sbx__SessionFinalizeReply *f = reply->session_finalize;
        bool conflict = f->action && str_eq(f->action, "conflict");
        const Sbx__Publication *p = f->publication;
        int r = EXIT_OK;

        if (a->json) {
                r = print_object(&finalize_map, f);
                return r == EXIT_OK && conflict ? EXIT_CONFLICT : r;
        }
        if (conflict)
                return print_conflicts(p);
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

static int build_session_diff(Args *a, CtlRequest *req) {
        Sbx__SessionDiff *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_SESSION_DIFF,
                                               &sbx__session_diff__descriptor);

        m->sandbox = (char *) a->name;
        m->workspace_session = (char *) a->id;
        req->expect = SBX__REPLY__BODY_SESSION_DIFF;
        return EXIT_OK;
}

static int print_session_diff(const Args *a, const Sbx__Reply *reply) {
        const Sbx__SessionDiffReply *d = reply->session_diff;

        /* the diff is file content: NUL bytes, and bytes that are not UTF-8, become '?' */
        if (a->json)
                return print_object(&diff_map, d);
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

/* ---- commands, layers, gc, status -------------------------------------------------- */

static int build_command_list(Args *a, CtlRequest *req) {
        Sbx__CommandList *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_COMMAND_LIST,
                                               &sbx__command_list__descriptor);

        m->sandbox = (char *) a->name;
        m->workspace_session = (char *) (a->session ?: "");
        req->expect = SBX__REPLY__BODY_COMMAND_LIST;
        return EXIT_OK;
}

static int print_command_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "ID", "SESSION", "STATUS", "EXIT", "END", "STARTED", "TIME", "COMMAND" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__CommandListReply *l = reply->command_list;

        if (a->json)
                return print_array(&command_map, (void *const *) l->commands, l->n_commands);
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

static int build_command_cancel(Args *a, CtlRequest *req) {
        Sbx__CommandCancel *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_COMMAND_CANCEL,
                                                 &sbx__command_cancel__descriptor);

        m->sandbox = (char *) a->name;
        m->command_session = (char *) a->id;
        return EXIT_OK;
}

static int print_command_cancel(const Args *a, const Sbx__Reply *reply) {
        if (a->json)
                return print_json(json_pack("{s:o, s:b}", "command_session",
                                            msg_json_string(a->id, strlen(a->id), CTL_TEXT), "cancelled", 1));
        fputs("cancelled command ", stdout);
        fputs_safe(a->id, stdout);
        putchar('\n');
        return EXIT_OK;
}

/* No lines: the record alone (read_command_lines of sandbox-mcp pages the transcript). */
static int build_command_show(Args *a, CtlRequest *req) {
        Sbx__ReadLines *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_READ_LINES, &sbx__read_lines__descriptor);

        m->sandbox = (char *) a->name;
        m->command_session = (char *) a->id;
        m->has_limit = true;
        m->limit = 0;
        req->expect = SBX__REPLY__BODY_COMMAND;
        return EXIT_OK;
}

static int build_command_lines(Args *a, CtlRequest *req) {
        Sbx__ReadLines *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_READ_LINES, &sbx__read_lines__descriptor);

        m->sandbox = (char *) a->name;
        m->command_session = (char *) a->id;
        m->stream = (Sbx__Stream) a->stream;
        m->has_limit = true;
        m->limit = SBX_READ_MAX_LINES;
        req->expect = SBX__REPLY__BODY_COMMAND;
        return EXIT_OK;
}

/* The sandbox's bytes as they are into a file or pipe; on a terminal its
 * control characters (but newline and tab) are shown as '?'. */
static void write_output(const uint8_t *data, size_t len, bool tty) {
        if (!tty) {
                fwrite(data, 1, len, stdout);
                return;
        }
        for (size_t i = 0; i < len; i++)
                putchar((data[i] < 0x20 && data[i] != '\n' && data[i] != '\t') || data[i] == 0x7f ? '?' : data[i]);
}

/* Every line the transcript has now, page after page, printed as each arrives. */
static int run_command_lines(int fd, const Args *a, CtlRequest *req) {
        bool tty = isatty(STDOUT_FILENO);
        int r = EXIT_OK;

        for (uint32_t seq = 1;; seq++) {
                Sbx__Msg *reply = NULL;
                const Sbx__CommandOutput *o;
                bool more;

                r = transact(fd, a->verb->words, &req->msg, seq, req->expect, true, &reply);
                if (r != EXIT_OK)
                        return r;
                o = reply->reply->command;
                write_output(o->output.data, o->output.len, tty);
                more = o->end_offset > o->start_offset && o->end_offset < o->total_lines;
                req->msg.read_lines->start_offset = o->end_offset;
                sbx__msg__free_unpacked(reply, NULL);
                if (!more)
                        break;
        }
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAILED;
}

static void print_targets(const char *label, char **targets, size_t n) {
        printf("%s:", label);
        for (size_t i = 0; i < n; i++) {
                putchar(' ');
                fputs_safe(targets[i], stdout);
        }
        putchar('\n');
}

void ctl_print_egress_audit(const Sbx__EgressAudit *audit) {
        print_targets("  contacted", audit->contacted, audit->n_contacted);
        print_targets("  refused", audit->refused, audit->n_refused);
        if (audit->truncated)
                printf("  (more than %u of either: the rest left out)\n", SBX_EGRESS_AUDIT_MAX);
}

static int print_command_show(const Args *a, const Sbx__Reply *reply) {
        const Sbx__CommandOutput *o = reply->command;

        if (a->json)
                return print_object(&command_show_map, o);
        fputs("command: ", stdout);
        fputs_safe(o->command_session, stdout);
        fputs("\nworkspace session: ", stdout);
        fputs_safe(o->workspace_session, stdout);
        fputs("\nstatus: ", stdout);
        fputs_safe(o->status, stdout);
        if (o->has_exit_code)
                printf("\nexit code: %d", o->exit_code);
        if (o->end_reason[0]) {
                fputs("\nend reason: ", stdout);
                fputs_safe(o->end_reason, stdout);
        }
        printf("\nlines: %" PRIu64 "\n", o->total_lines);
        if (!o->egress)
                return EXIT_OK;
        fputs("egress: ", stdout);
        fputs_safe(o->egress->policy, stdout);
        putchar('\n');
        ctl_print_egress_audit(o->egress);
        return EXIT_OK;
}

static int build_layer_list(Args *a, CtlRequest *req) {
        Sbx__LayerList *m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_LAYER_LIST, &sbx__layer_list__descriptor);

        m->sandbox = (char *) a->name;
        req->expect = SBX__REPLY__BODY_LAYER_LIST;
        return EXIT_OK;
}

/* One page or all of them, as one LayerListReply. */
static int print_layer_list(const Args *a, const Sbx__Reply *reply) {
        static const char *const header[] = { "LAYER", "OWNER", "CHANGED", "CREATED" };
        _cleanup_(table_done) Table t = { .n_cols = ELEMENTSOF(header), .header = header };
        const Sbx__LayerListReply *l = reply->layer_list;

        if (a->json)
                return print_array(&layer_map, (void *const *) l->layers, l->n_layers);
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

/* Every layer, page after page (a reply holds a bounded number), printed
 * as one listing. */
static int run_layer_list(int fd, const Args *a, CtlRequest *req) {
        Sbx__LayerListReply all = SBX__LAYER_LIST_REPLY__INIT;
        Sbx__Reply merged = SBX__REPLY__INIT;
        Sbx__Msg **pages = NULL;
        size_t n_pages = 0;
        int r = EXIT_OK;

        for (uint32_t seq = 1;; seq++) {
                Sbx__Msg *reply = NULL, **np;
                const Sbx__LayerListReply *l;
                Sbx__LayerInfo **layers;

                r = transact(fd, a->verb->words, &req->msg, seq, req->expect, true, &reply);
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
                req->msg.layer_list->start_layer = l->layers[l->n_layers - 1]->layer + 1;
        }
        merged.body_case = SBX__REPLY__BODY_LAYER_LIST;
        merged.layer_list = &all;
        if (r == EXIT_OK)
                r = print_layer_list(a, &merged);
        for (size_t i = 0; i < n_pages; i++)
                sbx__msg__free_unpacked(pages[i], NULL);
        free(pages);
        free(all.layers);
        return r;
}

static int build_gc(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_GC, &sbx__gc__descriptor);
        req->expect = SBX__REPLY__BODY_GC;
        return EXIT_OK;
}

static int print_gc(const Args *a, const Sbx__Reply *reply) {
        const Sbx__GcReply *g = reply->gc;
        char freed[24];

        if (a->json)
                return print_object(&gc_map, g);
        if (g->bytes_freed == 0)
                snprintf(freed, sizeof(freed), "0B");
        else
                format_size(g->bytes_freed, freed, sizeof(freed));
        printf("removed %" PRIu32 " transcript(s), %" PRIu32 " layer(s), %" PRIu32 " image build(s) and the files of %"
               PRIu32 " deleted sandbox(es), freed %s\n",
               g->transcripts_removed, g->layers_removed, g->images_removed, g->sandboxes_removed, freed);
        return EXIT_OK;
}

static int build_status(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_STATUS, &sbx__status__descriptor);
        req->expect = SBX__REPLY__BODY_STATUS;
        return EXIT_OK;
}

static int print_status(const Args *a, const Sbx__Reply *reply) {
        const Sbx__StatusReply *s = reply->status;
        char uptime[64];

        if (a->json)
                return print_object(&status_map, s);

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
        /* the artifact store (issue 19): persisted runtime_execute outputs */
        printf("artifacts: %" PRIu32 " (%" PRIu64 " of %" PRIu64 " bytes, runtime_artifacts_max_bytes; %" PRIu64
               " uncompressed)\n", s->artifacts, s->artifact_bytes, s->artifacts_max_bytes, s->artifact_raw_bytes);
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

/* ---- owners' quotas ------------------------------------------------------------------ */

/* owner list and owner show: one request (show names its owner). */
static int build_owner_list(Args *a, CtlRequest *req) {
        ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_OWNER_LIST, &sbx__owner_list__descriptor);
        req->expect = SBX__REPLY__BODY_OWNER_LIST;
        return EXIT_OK;
}

static int build_owner_show(Args *a, CtlRequest *req) {
        Sbx__OwnerList *m;
        uint32_t uid;

        if (parse_owner(a->name, &uid) < 0)
                return usage_error("invalid owner '%s': expected a uid or a user name", a->name);
        m = ctl_request_body(req, SBX__MSG_TYPE__MSG_CLIENT_OWNER_LIST, &sbx__owner_list__descriptor);
        m->has_uid = true;
        m->uid = uid;
        req->expect = SBX__REPLY__BODY_OWNER_LIST;
        return EXIT_OK;
}

/* The column of a quota: "SESSIONS" for owner_sessions_max, "LAYERS" for owner_layers_max_bytes. */
static void quota_column(const char *key, char *buf, size_t size) {
        const char *p = strncmp(key, "owner_", 6) == 0 ? key + 6 : key, *end = strstr(p, "_max");
        size_t n = end ? (size_t) (end - p) : strlen(p);

        snprintf(buf, size, "%.*s", (int) n, p);
        for (char *c = buf; *c; c++)
                *c = *c >= 'a' && *c <= 'z' ? (char) (*c - 'a' + 'A') : *c;
}

static const char *owner_name(uint32_t uid) {
        const struct passwd *pw = getpwuid((uid_t) uid);
        return pw ? pw->pw_name : NULL;
}

/* One row per owner: OWNER, USER and "used/limit" per quota ("-" for root's limits). */
static int print_owner_list(const Args *a, const Sbx__Reply *reply) {
        const Sbx__OwnerListReply *l = reply->owner_list;
        size_t n_quotas = l->n_owners ? l->owners[0]->n_quotas : 0;
        char headers[TABLE_COLS_MAX][32], cells[TABLE_COLS_MAX][64];
        const char *header[TABLE_COLS_MAX] = { "OWNER", "USER" }, *row[TABLE_COLS_MAX];
        _cleanup_(table_done) Table t = { .n_cols = 2 + MIN(n_quotas, (size_t) TABLE_COLS_MAX - 2), .header = header };

        if (a->json)
                return print_array(&owner_map, (void *const *) l->owners, l->n_owners);
        for (size_t k = 2; k < t.n_cols; k++) {
                quota_column(l->owners[0]->quotas[k - 2]->name, headers[k], sizeof(headers[k]));
                header[k] = headers[k];
        }
        for (size_t i = 0; i < l->n_owners; i++) {
                const Sbx__OwnerUsage *o = l->owners[i];

                snprintf(cells[0], sizeof(cells[0]), "%" PRIu32, o->uid);
                row[0] = cells[0];
                row[1] = owner_name(o->uid);
                for (size_t k = 2; k < t.n_cols; k++) {
                        const Sbx__OwnerQuota *q = k - 2 < o->n_quotas ? o->quotas[k - 2] : NULL;
                        char used[24] = "-", limit[24] = "-";
                        if (q)
                                format_amount(q->used, q->bytes, used, sizeof(used));
                        if (q && !o->exempt)
                                format_amount(q->limit, q->bytes, limit, sizeof(limit));
                        snprintf(cells[k], sizeof(cells[k]), "%s/%s", used, limit);
                        row[k] = cells[k];
                }
                table_add_row(&t, row);
        }
        return table_print(&t);
}

static int print_owner_show(const Args *a, const Sbx__Reply *reply) {
        const Sbx__OwnerListReply *l = reply->owner_list;
        const Sbx__OwnerUsage *o = l->n_owners == 1 ? l->owners[0] : NULL;
        const char *name;

        if (!o) {
                fprintf(stderr, "%s: sbxd answered with %zu owners for one\n", program, l->n_owners);
                return EXIT_FAILED;
        }
        if (a->json)
                return print_object(&owner_map, o);
        name = owner_name(o->uid);
        printf("owner: %" PRIu32, o->uid);
        if (name) {
                fputs(" (", stdout);
                fputs_safe(name, stdout);
                putchar(')');
        }
        puts(o->exempt ? ", exempt from the quotas" : "");
        for (size_t i = 0; i < o->n_quotas; i++) {
                const Sbx__OwnerQuota *q = o->quotas[i];
                char used[24], limit[24];

                format_amount(q->used, q->bytes, used, sizeof(used));
                format_amount(q->limit, q->bytes, limit, sizeof(limit));
                fputs_safe(q->name, stdout);
                printf(": %s ", used);
                if (!o->exempt)
                        printf("of %s ", limit);
                fputs_safe(q->what, stdout);
                if (o->exempt)
                        printf(" (limit %s, not applied)", limit);
                putchar('\n');
        }
        return EXIT_OK;
}

/* ---- the table: "NOUN VERB ARGS..." or "WORD", in the order of --help ------------ */

#define SANDBOX CTL_SANDBOX_ARG

const CtlVerb ctl_verbs[] = {
        { "sandbox create",   1, "sandbox NAME", NULL, CTL_GROUP(CTL_GROUP_CREATE) | CTL_GROUP(CTL_GROUP_OWNER), 0,
          build_sandbox_create, print_sandbox_create, NULL },
        { "sandbox list",     0, NULL, NULL, 0, 0, build_sandbox_list, print_sandbox_list, NULL },
        { "sandbox show",     1, "sandbox NAME", NULL, 0, SANDBOX, build_sandbox_list, print_sandbox_show, NULL },
        { "sandbox delete",   1, "sandbox NAME", NULL, 0, SANDBOX | CTL_NO_JSON,
          build_sandbox_delete, print_sandbox_delete, NULL },
        { "image list",       0, NULL, NULL, 0, 0, build_image_list, print_image_list, NULL },
        { "image show",       1, "image NAME", NULL, 0, 0, build_image_list, print_image_show, NULL },
        { "image build",      1, "image NAME", NULL, 0, 0, build_image_build, print_image_build, run_image_build },
        { "image rm",         1, "image NAME", NULL, 0, CTL_NO_JSON, build_image_rm, print_image_rm, NULL },
        { "session list",     1, "SANDBOX", NULL, 0, SANDBOX, build_session_list, print_session_list, NULL },
        { "session create",   1, "SANDBOX", NULL, CTL_GROUP(CTL_GROUP_POLICY), SANDBOX,
          build_session_create, print_session_create, NULL },
        { "session finalize", 2, "SANDBOX and session ID", "session ID", CTL_GROUP(CTL_GROUP_FINALIZE), SANDBOX,
          build_session_finalize, print_session_finalize, NULL },
        { "session diff",     2, "SANDBOX and session ID", "session ID", 0, SANDBOX,
          build_session_diff, print_session_diff, NULL },
        { "command list",     1, "SANDBOX", NULL, CTL_GROUP(CTL_GROUP_SESSION), SANDBOX,
          build_command_list, print_command_list, NULL },
        { "command cancel",   2, "SANDBOX and command ID", "command ID", 0, SANDBOX,
          build_command_cancel, print_command_cancel, NULL },
        { "command show",     2, "SANDBOX and command ID", "command ID", 0, SANDBOX,
          build_command_show, print_command_show, NULL },
        { "command lines",    2, "SANDBOX and command ID", "command ID", CTL_GROUP(CTL_GROUP_LINES),
          SANDBOX | CTL_NO_JSON, build_command_lines, NULL, run_command_lines },
        { "layer list",       1, "SANDBOX", NULL, 0, SANDBOX, build_layer_list, print_layer_list, run_layer_list },
        { "owner list",       0, NULL, NULL, 0, 0, build_owner_list, print_owner_list, NULL },
        { "owner show",       1, "owner UID", NULL, 0, CTL_OWNER_ARG, build_owner_show, print_owner_show, NULL },
        { "template list",    0, NULL, NULL, 0, 0, ctl_build_template_list, ctl_print_template_list, NULL },
        { "template show",    1, "template NAME", NULL, 0, 0, ctl_build_template_list, ctl_print_template_show, NULL },
        { "claim list",       0, NULL, NULL, CTL_GROUP(CTL_GROUP_LABEL), 0, ctl_build_claim_list, ctl_print_claim_list,
          NULL },
        { "claim show",       1, "claim [NAMESPACE/]NAME", NULL, 0, 0, ctl_build_claim_show, ctl_print_claim_show, NULL },
        { "claim delete",     1, "claim [NAMESPACE/]NAME", NULL, 0, CTL_NO_JSON, ctl_build_claim_delete,
          ctl_print_claim_delete, NULL },
        { "box list",         0, NULL, NULL, 0, 0, ctl_build_box_list, ctl_print_box_list, NULL },
        { "box show",         1, "box ID", NULL, 0, 0, ctl_build_box_show, ctl_print_box_show, NULL },
        { "box stop",         1, "box ID", NULL, 0, 0, ctl_build_box_stop, ctl_print_box_stop, NULL },
        { "job list",         0, NULL, NULL, 0, 0, ctl_build_job_list, ctl_print_job_list, NULL },
        { "job show",         1, "job ID", NULL, 0, 0, ctl_build_job_show, ctl_print_job_show, NULL },
        { "job rm",           1, "job ID", NULL, 0, CTL_NO_JSON, ctl_build_job_rm, ctl_print_job_rm, NULL },
        { "token create",     0, NULL, NULL, CTL_GROUP(CTL_GROUP_OWNER) | CTL_GROUP(CTL_GROUP_TOKEN), 0,
          ctl_build_token_create, ctl_print_token_create, NULL },
        { "token list",       0, NULL, NULL, 0, 0, ctl_build_token_list, ctl_print_token_list, NULL },
        { "token revoke",     1, "token ID or NAME", NULL, 0, CTL_NO_JSON, ctl_build_token_revoke,
          ctl_print_token_revoke, NULL },
        { "takeover list",    0, NULL, NULL, 0, 0, ctl_build_takeover_list, ctl_print_takeover_list, NULL },
        { "takeover attach",  1, "box ID", NULL, 0, CTL_NO_JSON, ctl_build_takeover_attach, ctl_print_takeover_attach,
          ctl_run_takeover_attach },
        { "takeover return",  1, "box ID", NULL, CTL_GROUP(CTL_GROUP_TAKEOVER), CTL_NO_JSON, ctl_build_takeover_return,
          ctl_print_takeover_return, NULL },
        { "secret set",       1, "secret NAME", NULL, CTL_GROUP(CTL_GROUP_OWNER), CTL_NO_JSON, ctl_build_secret_set,
          ctl_print_secret_set, NULL },
        { "secret list",      0, NULL, NULL, CTL_GROUP(CTL_GROUP_OWNER), 0, ctl_build_secret_list,
          ctl_print_secret_list, NULL },
        { "secret rm",        1, "secret NAME", NULL, CTL_GROUP(CTL_GROUP_OWNER), CTL_NO_JSON, ctl_build_secret_rm,
          ctl_print_secret_rm, NULL },
        { "version list",     0, NULL, NULL, 0, 0, ctl_build_version_list, ctl_print_version_list, NULL },
        { "version rm",       1, "version ID", NULL, 0, CTL_NO_JSON, ctl_build_version_rm, ctl_print_version_rm,
          NULL },
        { "gc",               0, NULL, NULL, 0, 0, build_gc, print_gc, NULL },
        { "status",           0, NULL, NULL, 0, 0, build_status, print_status, NULL },
};
const size_t ctl_n_verbs = ELEMENTSOF(ctl_verbs);
