/* sbxd.conf: the supervisor's configuration (sbxd.conf(5)), its defaults
 * and its parser (inih). Non-logging: a failure comes back as a message
 * ("FILE:LINE: reason") for main to print. tests/fuzz/fuzz-config.c links
 * this file alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/egress.h"
#include "os/image.h"
#include "sbx-limits.h"

/* A limit of the cgroup above all sandboxes: a number, or a percentage of
 * the host's (memory, kernel.pid_max) resolved at start; 0: none. */
typedef struct ConfigShare {
        uint64_t value;
        bool percent;                   /* value is 1..100 % of the host's */
} ConfigShare;
/* A [template NAME] section: what create_sandbox's warmpool names (the
 * lifecycle set's claims, core/claim.h). */
typedef struct Template {
        char name[64];
        char image[SBX_NAME_MAX + 1];   /* "default" or a definition's name in images_dir (sbx-images(7)) */
        char *source;                   /* NULL: an empty workspace */
        uint64_t memory_bytes;          /* 0: default_memory_bytes */
        uint32_t pids_max;              /* 0: default_pids_max */
        uint32_t cpu_weight;            /* 1..10000 */
        uint64_t disk_bytes;            /* 0: session_disk_bytes */
        uint32_t warm;                  /* warm claims kept ready */
        bool no_expiry;                 /* shutdown_after_seconds = none */
        uint32_t shutdown_after_seconds;
        EgressPolicy egress;            /* its sandboxes' network policy (docs/egress.md) */
        bool box;                       /* the boxes' own (core/box.h), made from box_* settings */
} Template;

#define TEMPLATE_DEFAULT "default"
#define CONFIG_EGRESS_USER_DEFAULT "sbx-egress" /* dist/sbx.sysusers.conf makes it */
#define CONFIG_IMAGES_DIR_DEFAULT SBX_SYSCONFDIR "/sbx/images.d" /* images_dir unless set */

typedef struct Config {
        char *state_dir;
        char *run_dir;
        char *worker_path;
        int log_level;
        uint64_t transcript_cap_bytes;
        /* Budgets of all transcripts (core/transcripts.h): per sandbox, per
         * owner, of all (0: a share of the state filesystem), and their files. */
        uint64_t sandbox_transcripts_max_bytes;
        uint64_t owner_transcripts_max_bytes;
        uint64_t transcripts_max_bytes;
        uint64_t transcripts_max_inodes;
        uint64_t default_memory_bytes;
        uint32_t default_pids_max;
        uint64_t session_disk_bytes;
        uid_t uid_base;                 /* the pool of sandboxes' host ids starts here (os/uidrange.h) */
        uint32_t uid_count;             /* ids per sandbox */
        bool allow_io_uring;            /* seccomp leaves io_uring_* allowed (sbx-security(7)) */
        uint32_t session_spares;        /* spare automatic sessions per sandbox (core/spare.h) */
        uint32_t spare_idle_seconds;    /* an unused spare goes after this */
        gid_t socket_gid;               /* socket_group, or (gid_t) -1 */
        mode_t socket_mode;             /* 0: 0660 with socket_group, else 0600 */
        uid_t gateway_uid;              /* gateway_user: may act for tokens; (uid_t) -1: nobody */
        bool gateway_user_set;          /* given in sbxd.conf (else the user sbx-gateway, if it exists) */
        uint32_t client_idle_seconds;   /* a client with no request this long is closed */
        /* Issue 15e: per-owner quotas (core/owner.h) and failed publications. */
        uint32_t owner_sessions_max;    /* live workspace sessions of one owner's sandboxes */
        uint32_t owner_sandboxes_max;   /* sandboxes one uid owns */
        uint32_t owner_commands_max;    /* running commands in one owner's sandboxes */
        uint32_t failed_session_grace_seconds; /* a failed automatic publication's session is kept this long */
        uint32_t import_timeout_seconds;        /* an import running longer is killed */
        /* Layer quotas (core/layerquota.h) */
        uint64_t sandbox_layers_max_bytes;
        uint64_t owner_layers_max_bytes;
        uint64_t layers_max_inodes;
        uint64_t state_reserve;
        /* The cgroup above all sandboxes, their share of the host together
         * (docs/cgroups.md): sandboxes_cpu_weight, _memory_max, _pids_max. */
        uint32_t sandboxes_cpu_weight;
        ConfigShare sandboxes_memory_max;
        ConfigShare sandboxes_pids_max;
        uint32_t claims_per_user;       /* live claims of one uid (root exempt) */
        uint32_t claim_max_lifetime;    /* seconds a claim may live unused at most; 0: no cap */
        uint32_t takeover_max_seconds;  /* sandbox_takeover waits this long for the box back (core/takeover.h) */
        Template *templates;            /* "default" first: built in, or as [template default] says */
        size_t n_templates;
        /* images (core/imagebuild.h, sbx-images(7)) */
        char *images_dir;               /* NAME.conf definitions; default SYSCONFDIR/sbx/images.d */
        char *image_cache_dir;          /* .deb packages kept between builds; default STATE/images/cache */
        uint64_t image_disk_max;        /* all builds together at most this */
        /* egress (core/egress.h, docs/egress.md): the hosts of package-managers
         * (egress_package_hosts; "auto" found by config_finish) and whether the
         * proxy may reach loopback, link-local, private and the host's own
         * addresses (egress_allow_private, for tests). */
        EgressHosts egress_package_hosts;
        bool egress_allow_private;
        char *egress_user;              /* sbx-egress runs as this user; NULL: CONFIG_EGRESS_USER_DEFAULT */
        /* jobs: the script set (core/job.h, issue 18) */
        char *script_allowed_paths;     /* host input roots, space-separated, absolute; NULL or "": none */
        uint32_t script_output_ttl;     /* seconds an ended job's output_dir is kept */
        uint32_t script_stdout_max;     /* bytes of stdout a result carries (head and tail) */
        uint32_t jobs_max;              /* running jobs of all owners */
        uint32_t owner_jobs_max;        /* running jobs of one uid (core/owner.h) */
        uint32_t script_spares;         /* spare job sandboxes per image and egress policy (core/job.h) */
        /* runtime_execute (core/runtime.h, issue 19): lists of words, as given */
        char runtime_allowed[SBX_RUNTIME_LIST_MAX];
        char runtime_allowed_executables[SBX_RUNTIME_LIST_MAX];
        char runtime_env_allowlist[SBX_RUNTIME_LIST_MAX];
        uint64_t runtime_max_duration_ms;
        uint32_t runtime_max_concurrent_jobs;   /* running runtime_execute jobs of one owner */
        uint64_t runtime_max_stdout_bytes;
        uint64_t runtime_max_stderr_bytes;
        uint64_t runtime_max_artifact_bytes;
        uint64_t runtime_artifact_ttl_ms;       /* runtime_artifact_ttl_hours, a decimal */
        uint64_t runtime_artifacts_max_bytes;   /* all live artifacts together */
        /* boxes: the boxes set (core/box.h, issue 21) */
        char box_image[SBX_NAME_MAX + 1];       /* the image of every box */
        uint32_t box_spares;                    /* warm boxes kept ready (once boxes are in use) */
        uint32_t boxes_per_user;                /* live boxes of one uid (root exempt) */
        uint64_t box_idle_timeout_ms;           /* box_idle_timeout_min; 0: never frozen */
        EgressPolicy box_egress;                /* the boxes' network policy (box_egress; default none) */
} Config;

#define CONFIG_ERROR_MAX 512            /* bytes of a message of config_set or config_load */

/* The defaults of sbxd.conf(5); no directory is set yet (config_finish). */
void config_init(Config *cfg);
/* Set key to value as sbxd.conf would; on failure ret_error (CONFIG_ERROR_MAX
 * bytes) says why. */
int config_set(Config *cfg, const char *key, const char *value, char *ret_error);
/* Read path into cfg (a missing file is no error unless required); on
 * failure ret_error says "PATH:LINE: reason" or "PATH: reason". */
int config_load(Config *cfg, const char *path, bool required, char *ret_error);
/* What share resolves to on a host with host_total of it (bytes of memory,
 * kernel.pid_max); 0: no limit. */
uint64_t config_share_resolve(const ConfigShare *share, uint64_t host_total);
/* The default directories where neither the file nor the command line set
 * them, and the package hosts of egress_package_hosts = auto (the host's
 * apt, npm and pip configuration under "/"). */
int config_finish(Config *cfg);
void config_done(Config *cfg);
/* The template of this name, or NULL. */
const Template *config_template(const Config *cfg, const char *name);
