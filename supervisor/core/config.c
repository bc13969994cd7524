#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/runtime.h"
#include "core/box-config.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "sbx-limits.h"

void config_init(Config *cfg) {
        *cfg = (Config) {
                .log_level = LOG_INFO,
                .transcript_cap_bytes = SBX_TRANSCRIPT_CAP_DEFAULT,
                .sandbox_transcripts_max_bytes = SBX_SANDBOX_TRANSCRIPTS_DEFAULT,
                .owner_transcripts_max_bytes = SBX_OWNER_TRANSCRIPTS_DEFAULT,
                .transcripts_max_inodes = SBX_TRANSCRIPTS_INODES_DEFAULT,
                .default_memory_bytes = SBX_MEMORY_DEFAULT,
                .default_pids_max = SBX_PIDS_DEFAULT,
                .session_disk_bytes = SBX_SESSION_DISK_DEFAULT,
                .session_spares = SBX_SPARES_DEFAULT,
                .spare_idle_seconds = SBX_SPARE_IDLE_DEFAULT_S,
                .uid_base = SBX_UID_BASE_DEFAULT,
                .uid_count = SBX_UID_COUNT_DEFAULT,
                .socket_gid = (gid_t) -1,
                .gateway_uid = (uid_t) -1,
                .client_idle_seconds = SBX_CLIENT_IDLE_DEFAULT_S,
                .owner_sessions_max = SBX_OWNER_SESSIONS_MAX_DEFAULT,
                .owner_sandboxes_max = SBX_OWNER_SANDBOXES_MAX_DEFAULT,
                .owner_commands_max = SBX_OWNER_COMMANDS_MAX_DEFAULT,
                .failed_session_grace_seconds = SBX_FAILED_SESSION_GRACE_DEFAULT_S,
                .import_timeout_seconds = SBX_IMPORT_TIMEOUT_DEFAULT_S,
                .sandbox_layers_max_bytes = SBX_SANDBOX_LAYERS_MAX_DEFAULT,
                .owner_layers_max_bytes = SBX_OWNER_LAYERS_MAX_DEFAULT,
                .layers_max_inodes = SBX_LAYERS_MAX_INODES_DEFAULT,
                .state_reserve = SBX_STATE_RESERVE_DEFAULT,
                .sandboxes_cpu_weight = SBX_SANDBOXES_CPU_WEIGHT_DEFAULT,
                .sandboxes_memory_max = { SBX_SANDBOXES_MEMORY_PERCENT_DEFAULT, true },
                .sandboxes_pids_max = { SBX_SANDBOXES_PIDS_PERCENT_DEFAULT, true },
                .claims_per_user = SBX_CLAIMS_PER_USER_DEFAULT,
                .claim_max_lifetime = SBX_CLAIM_LIFETIME_MAX_DEFAULT_S,
                .takeover_max_seconds = SBX_TAKEOVER_MAX_DEFAULT_S,
                .image_disk_max = SBX_IMAGE_DISK_MAX_DEFAULT,
                .egress_package_hosts = { .discover = true },
                .script_output_ttl = SBX_SCRIPT_OUTPUT_TTL_DEFAULT_S,
                .script_stdout_max = SBX_SCRIPT_STDOUT_MAX_DEFAULT,
                .jobs_max = SBX_JOBS_MAX_DEFAULT,
                .owner_jobs_max = SBX_OWNER_JOBS_MAX_DEFAULT,
                .script_spares = SBX_SCRIPT_SPARES_DEFAULT,
                .runtime_allowed = SBX_RUNTIME_ALLOWED_DEFAULT,
                .runtime_max_duration_ms = SBX_RUNTIME_DURATION_DEFAULT_MS,
                .runtime_max_concurrent_jobs = SBX_RUNTIME_JOBS_DEFAULT,
                .runtime_max_stdout_bytes = SBX_RUNTIME_STDOUT_DEFAULT,
                .runtime_max_stderr_bytes = SBX_RUNTIME_STDERR_DEFAULT,
                .runtime_max_artifact_bytes = SBX_RUNTIME_ARTIFACT_DEFAULT,
                .runtime_artifact_ttl_ms = SBX_RUNTIME_TTL_DEFAULT_MS,
                .runtime_artifacts_max_bytes = SBX_ARTIFACTS_MAX_DEFAULT,
                .box_image = SBX_BOX_IMAGE_DEFAULT,
                .box_spares = SBX_BOX_SPARES_DEFAULT,
                .boxes_per_user = SBX_BOXES_PER_USER_DEFAULT,
                .box_idle_timeout_ms = SBX_BOX_IDLE_TIMEOUT_DEFAULT_MS,
        };
}

void config_done(Config *cfg) {
        for (size_t i = 0; i < cfg->n_templates; i++)
                free(cfg->templates[i].source);
        free(cfg->templates);
        cfg->templates = NULL;
        cfg->n_templates = 0;
        free(cfg->state_dir);
        free(cfg->run_dir);
        free(cfg->worker_path);
        free(cfg->images_dir);
        free(cfg->image_cache_dir);
        egress_hosts_done(&cfg->egress_package_hosts);
        free(cfg->egress_user);
        cfg->egress_user = NULL;
        free(cfg->script_allowed_paths);
        cfg->script_allowed_paths = NULL;
        cfg->state_dir = cfg->run_dir = cfg->worker_path = cfg->images_dir = cfg->image_cache_dir = NULL;
}

static int set_path(char **dst, const char *value) {
        char *copy = strdup(value);

        if (!copy)
                return -ENOMEM;
        free(*dst);
        *dst = copy;
        return 0;
}

static int templates_ensure_default(Config *cfg);

/* A user name or uid; -ESRCH for no such user. */
static int parse_user(const char *value, uid_t *ret) {
        const struct passwd *pw;
        char *end;
        unsigned long u;

        errno = 0;
        u = strtoul(value, &end, 10);
        if (value[0] >= '0' && value[0] <= '9' && !*end && !errno && u < (uid_t) -1) {
                *ret = (uid_t) u;
                return 0;
        }
        errno = 0;
        pw = getpwnam(value);
        if (!pw)
                return errno > 0 ? -errno : -ESRCH;
        *ret = pw->pw_uid;
        return 0;
}

int config_finish(Config *cfg) {
        int r;

        /* Without gateway_user: the system user dist/sbx-gateway.sysusers.conf makes, if it exists. */
        if (!cfg->gateway_user_set && parse_user("sbx-gateway", &cfg->gateway_uid) < 0)
                cfg->gateway_uid = (uid_t) -1;
        if (templates_ensure_default(cfg) < 0 || box_template_add(cfg) < 0)
                return -ENOMEM;
        if (cfg->egress_package_hosts.discover) {
                _cleanup_close_ int rootfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                if (rootfd < 0)
                        return -errno;
                r = egress_hosts_discover(&cfg->egress_package_hosts, rootfd);
                if (r < 0)
                        return r;
        }
        if (!cfg->state_dir && set_path(&cfg->state_dir, "/var/lib/sbx") < 0)
                return -ENOMEM;
        if (!cfg->run_dir && set_path(&cfg->run_dir, "/run/sbx") < 0)
                return -ENOMEM;
        if (!cfg->images_dir && set_path(&cfg->images_dir, CONFIG_IMAGES_DIR_DEFAULT) < 0)
                return -ENOMEM;
        if (!cfg->image_cache_dir && asprintf(&cfg->image_cache_dir, "%s/images/cache", cfg->state_dir) < 0) {
                cfg->image_cache_dir = NULL;
                return -ENOMEM;
        }
        return 0;
}

static int parse_group(const char *value, gid_t *ret) {
        const struct group *gr;
        char *end;
        unsigned long g;

        errno = 0;
        g = strtoul(value, &end, 10);
        if (value[0] >= '0' && value[0] <= '9' && !*end && !errno && g < (gid_t) -1) {
                *ret = (gid_t) g;
                return 0;
        }
        errno = 0;
        gr = getgrnam(value);
        if (!gr)
                return errno > 0 ? -errno : -ESRCH;
        *ret = gr->gr_gid;
        return 0;
}

/* 0600, 0660 or 0666: connecting needs read and write, and root always may. */
static int parse_socket_mode(const char *value, mode_t *ret) {
        char *end;
        unsigned long m;

        errno = 0;
        m = strtoul(value, &end, 8);
        if (errno || end == value || *end || (m != 0600 && m != 0660 && m != 0666))
                return -EINVAL;
        *ret = (mode_t) m;
        return 0;
}

uint64_t config_share_resolve(const ConfigShare *share, uint64_t host_total) {
        if (!share->percent)
                return share->value;
        /* At least 1: a share never turns into "no limit". */
        return MAX(host_total / 100u * share->value + host_total % 100u * share->value / 100u, (uint64_t) 1);
}

/* sandboxes_memory_max and sandboxes_pids_max: "max", "N%" of the host's
 * (1 to 100), or a number of at least min (sizes with K, M, G). */
static int parse_share(const char *key, const char *value, uint64_t min, ConfigShare *ret, char *err) {
        size_t n = strlen(value);
        uint64_t v;

        if (strcmp(value, "max") == 0) {
                *ret = (ConfigShare) {};
                return 0;
        }
        if (n > 1 && n < 8 && value[n - 1] == '%') {
                char digits[8];

                memcpy(digits, value, n - 1);
                digits[n - 1] = '\0';
                if (parse_u64(digits, &v) >= 0 && v >= 1 && v <= 100) {
                        *ret = (ConfigShare) { v, true };
                        return 0;
                }
        } else if (parse_size(value, &v) >= 0 && v >= min) {
                *ret = (ConfigShare) { v, false };
                return 0;
        }
        snprintf(err, CONFIG_ERROR_MAX, "%s: '%.40s' is not max, 1%% to 100%% or a number of at least %llu", key, value,
                 (unsigned long long) min);
        return -EINVAL;
}

/* script_allowed_paths: space-separated absolute paths, at most
 * SBX_SCRIPT_ROOTS_MAX, kept as one string with single spaces and no
 * trailing slashes ("" when none). */
static int set_script_roots(Config *cfg, const char *value, char *err) {
        _cleanup_free_ char *out = malloc(strlen(value) + 1);
        size_t len = 0, n = 0;

        if (!out)
                return -ENOMEM;
        for (const char *p = value + strspn(value, " \t"); *p; p += strspn(p, " \t")) {
                size_t k = strcspn(p, " \t");

                if (p[0] != '/') {
                        snprintf(err, CONFIG_ERROR_MAX, "script_allowed_paths: '%.*s' is not an absolute path",
                                 (int) MIN(k, (size_t) 80), p);
                        return -EINVAL;
                }
                if (++n > SBX_SCRIPT_ROOTS_MAX) {
                        snprintf(err, CONFIG_ERROR_MAX, "script_allowed_paths: more than %u paths", SBX_SCRIPT_ROOTS_MAX);
                        return -EINVAL;
                }
                if (len)
                        out[len++] = ' ';
                memcpy(out + len, p, k);
                len += k;
                while (k > 1 && out[len - 1] == '/')
                        len--, k--;
                p += strcspn(p, " \t");
        }
        out[len] = '\0';
        free(cfg->script_allowed_paths);
        cfg->script_allowed_paths = TAKE_PTR(out);
        return 0;
}

/* The keys that are no number; 1 if key is none of them. */
static int config_set_word(Config *cfg, const char *key, const char *value, char *err) {
        /* socket_group: its members may connect to sbxd.sock (group-owned, 0660
         * by default); unset, only root may (0600) unless socket_mode says
         * otherwise. Either way every request is authorized by SO_PEERCRED
         * against the sandbox's owner. */
        if (strcmp(key, "socket_group") == 0) {
                if (value[0] == '\0') {
                        cfg->socket_gid = (gid_t) -1;
                        return 0;
                }
                if (parse_group(value, &cfg->socket_gid) >= 0)
                        return 0;
                snprintf(err, CONFIG_ERROR_MAX, "socket_group: no such group '%.40s' (create it, e.g. with systemd-sysusers)",
                         value);
                return -EINVAL;
        }
        /* gateway_user: the one user whose connections may act for a bearer
         * token (sbx-gateway(8)); "" lets nobody. Never root. */
        if (strcmp(key, "gateway_user") == 0) {
                cfg->gateway_user_set = true;
                cfg->gateway_uid = (uid_t) -1;
                if (value[0] == '\0')
                        return 0;
                if (parse_user(value, &cfg->gateway_uid) >= 0 && cfg->gateway_uid != 0)
                        return 0;
                cfg->gateway_uid = (uid_t) -1;
                snprintf(err, CONFIG_ERROR_MAX, "gateway_user: no such user '%.40s' (or root, which may not be it)",
                         value);
                return -EINVAL;
        }
        if (strcmp(key, "socket_mode") == 0) {
                if (parse_socket_mode(value, &cfg->socket_mode) >= 0)
                        return 0;
                snprintf(err, CONFIG_ERROR_MAX, "socket_mode: '%.40s' is not 0600, 0660 or 0666", value);
                return -EINVAL;
        }
        if (strcmp(key, "state_dir") == 0 || strcmp(key, "run_dir") == 0 || strcmp(key, "worker_path") == 0 ||
            strcmp(key, "images_dir") == 0 || strcmp(key, "image_cache_dir") == 0) {
                char **dst = key[0] == 's' ? &cfg->state_dir : key[0] == 'r' ? &cfg->run_dir
                           : key[0] == 'w' ? &cfg->worker_path : key[5] == 's' ? &cfg->images_dir
                           : &cfg->image_cache_dir;
                if (value[0] == '/')
                        return set_path(dst, value);
                snprintf(err, CONFIG_ERROR_MAX, "%s must be an absolute path", key);
                return -EINVAL;
        }
        if (strcmp(key, "allow_io_uring") == 0 || strcmp(key, "egress_allow_private") == 0) {
                /* booleans; see sbx-security(7) and docs/egress.md */
                bool yes = !strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "1");
                if (!yes && strcmp(value, "no") && strcmp(value, "false") && strcmp(value, "0")) {
                        snprintf(err, CONFIG_ERROR_MAX, "%s must be yes or no", key);
                        return -EINVAL;
                }
                *(key[0] == 'a' ? &cfg->allow_io_uring : &cfg->egress_allow_private) = yes;
                return 0;
        }
        if (strcmp(key, "egress_user") == 0) {
                if (value[0] && strlen(value) <= 32 && value[0] != '-' &&
                    strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789-_") == strlen(value))
                        return set_path(&cfg->egress_user, value);
                snprintf(err, CONFIG_ERROR_MAX, "egress_user: '%.40s' is not a user name", value);
                return -EINVAL;
        }
        if (strcmp(key, "egress_package_hosts") == 0) {
                char why[EGRESS_ERROR_MAX];
                EgressHosts hosts;
                int r = egress_hosts_parse(value, &hosts, why);

                if (r < 0) {
                        snprintf(err, CONFIG_ERROR_MAX, "egress_package_hosts: %s", why);
                        return r;
                }
                egress_hosts_done(&cfg->egress_package_hosts);
                cfg->egress_package_hosts = hosts;
                return 0;
        }
        if (strcmp(key, "script_allowed_paths") == 0)
                return set_script_roots(cfg, value, err);
        if (strcmp(key, "sandboxes_memory_max") == 0)
                return parse_share(key, value, SBX_MEMORY_MIN, &cfg->sandboxes_memory_max, err);
        if (strcmp(key, "sandboxes_pids_max") == 0)
                return parse_share(key, value, SBX_PIDS_MIN, &cfg->sandboxes_pids_max, err);
        if (strcmp(key, "log_level") == 0) {
                int l = log_level_from_string(value);
                if (l < 0) {
                        snprintf(err, CONFIG_ERROR_MAX, "log_level must be one of error, warning, notice, info, debug");
                        return -EINVAL;
                }
                cfg->log_level = l;
                return 0;
        }
        int r = runtime_config_set(cfg, key, value, err);
        return r != 1 ? r : box_config_set(cfg, key, value, err);
}

/* The numeric keys, their ranges (documented in sbxd.conf(5)) and where they go. */
#define NUMERIC(k, field, lo, hi) \
        { k, offsetof(Config, field), sizeof(((Config *) NULL)->field), (lo), (hi) }
static const struct {
        const char *key;
        size_t offset, size;
        uint64_t min, max;
} numeric[] = {
        NUMERIC("transcript_cap_bytes", transcript_cap_bytes, 4096, UINT64_MAX),
        NUMERIC("sandbox_transcripts_max_bytes", sandbox_transcripts_max_bytes, 1u << 20, UINT64_MAX),
        NUMERIC("owner_transcripts_max_bytes", owner_transcripts_max_bytes, 1u << 20, UINT64_MAX),
        NUMERIC("transcripts_max_bytes", transcripts_max_bytes, 0, UINT64_MAX),
        NUMERIC("transcripts_max_inodes", transcripts_max_inodes, 16, UINT64_MAX),
        NUMERIC("default_memory_bytes", default_memory_bytes, SBX_MEMORY_MIN, UINT64_MAX),
        NUMERIC("default_pids_max", default_pids_max, SBX_PIDS_MIN, 1u << 22),
        NUMERIC("session_disk_bytes", session_disk_bytes, 1u << 20, UINT64_MAX),
        NUMERIC("uid_base", uid_base, 1000, SBX_IMAGE_BUILD_UID_BASE - SBX_UID_COUNT_DEFAULT),
        NUMERIC("uid_count", uid_count, 1, SBX_UID_COUNT_DEFAULT),
        NUMERIC("session_spares", session_spares, 0, SBX_SPARES_MAX),
        NUMERIC("session_spare_idle_seconds", spare_idle_seconds, 1, 86400),
        NUMERIC("client_idle_seconds", client_idle_seconds, 1, 86400),
        /* Issue 15e: per-owner quotas below the global caps, and failed publications. */
        NUMERIC("owner_sessions_max", owner_sessions_max, 1, SBX_MAX_LIVE_SESSIONS),
        NUMERIC("owner_sandboxes_max", owner_sandboxes_max, 1, SBX_MAX_SANDBOXES),
        NUMERIC("owner_commands_max", owner_commands_max, 1, SBX_OWNER_COMMANDS_MAX),
        NUMERIC("failed_session_grace_seconds", failed_session_grace_seconds, 0, SBX_FAILED_SESSION_GRACE_MAX_S),
        NUMERIC("import_timeout_seconds", import_timeout_seconds, 1, SBX_IMPORT_TIMEOUT_MAX_S),
        /* Layer quotas */
        NUMERIC("sandbox_layers_max_bytes", sandbox_layers_max_bytes, 1u << 20, UINT64_MAX),
        NUMERIC("owner_layers_max_bytes", owner_layers_max_bytes, 1u << 20, UINT64_MAX),
        NUMERIC("layers_max_inodes", layers_max_inodes, 1000, UINT64_MAX),
        NUMERIC("state_reserve", state_reserve, 0, UINT64_MAX),
        NUMERIC("sandboxes_cpu_weight", sandboxes_cpu_weight, 1, SBX_CPU_WEIGHT_MAX),
        NUMERIC("claims_per_user", claims_per_user, 0, SBX_MAX_SANDBOXES),
        NUMERIC("claim_max_lifetime", claim_max_lifetime, 0, 366u * 86400u),
        /* A person's takeover of a box (issue 21, core/takeover.h) */
        NUMERIC("takeover_max_seconds", takeover_max_seconds, 1, SBX_TAKEOVER_MAX_S),
        NUMERIC("image_disk_max", image_disk_max, 1u << 20, UINT64_MAX),
        /* Jobs (issue 18, core/job.h) */
        NUMERIC("script_output_ttl", script_output_ttl, 60, 366u * 86400u),
        NUMERIC("script_stdout_max", script_stdout_max, 1024, SBX_SCRIPT_STDOUT_MAX_MAX),
        NUMERIC("jobs_max", jobs_max, 1, SBX_JOBS_MAX_MAX),
        NUMERIC("owner_jobs_max", owner_jobs_max, 1, SBX_JOBS_MAX_MAX),
        NUMERIC("script_spares", script_spares, 0, SBX_SCRIPT_SPARES_MAX),
        /* runtime_execute (issue 19); the lists and the TTL: runtime_config_set */
        NUMERIC("runtime_max_duration_ms", runtime_max_duration_ms, 1, SBX_TIMEOUT_MAX_MS),
        NUMERIC("runtime_max_concurrent_jobs", runtime_max_concurrent_jobs, 1, SBX_RUNTIME_JOBS_MAX),
        NUMERIC("runtime_max_stdout_bytes", runtime_max_stdout_bytes, 1024, SBX_RUNTIME_STREAM_MAX),
        NUMERIC("runtime_max_stderr_bytes", runtime_max_stderr_bytes, 1024, SBX_RUNTIME_STREAM_MAX),
        NUMERIC("runtime_max_artifact_bytes", runtime_max_artifact_bytes, 65536, UINT64_MAX),
        NUMERIC("runtime_artifacts_max_bytes", runtime_artifacts_max_bytes, 1u << 20, UINT64_MAX),
        /* boxes (issue 21, core/box.h); box_image and box_idle_timeout_min: box_config_set */
        NUMERIC("box_spares", box_spares, 0, SBX_BOX_SPARES_MAX),
        NUMERIC("boxes_per_user", boxes_per_user, 0, SBX_MAX_SANDBOXES),
};

int config_set(Config *cfg, const char *key, const char *value, char *ret_error) {
        uint64_t v = 0;
        size_t i;
        int r;

        r = config_set_word(cfg, key, value, ret_error);
        if (r <= 0)
                return r;
        for (i = 0; i < ELEMENTSOF(numeric) && strcmp(key, numeric[i].key) != 0; i++)
                ;
        if (i == ELEMENTSOF(numeric)) {
                snprintf(ret_error, CONFIG_ERROR_MAX, "unknown key '%.40s' (see sbxd.conf(5))", key);
                return -EINVAL;
        }
        if (parse_size(value, &v) < 0) {
                snprintf(ret_error, CONFIG_ERROR_MAX, "%s: '%.40s' is not a number (suffixes K, M, G allowed)", key,
                         value);
                return -EINVAL;
        }
        if (v < numeric[i].min || v > numeric[i].max) {
                if (numeric[i].max == UINT64_MAX)
                        snprintf(ret_error, CONFIG_ERROR_MAX, "%s: %llu is out of range (at least %llu)", key,
                                 (unsigned long long) v, (unsigned long long) numeric[i].min);
                else
                        snprintf(ret_error, CONFIG_ERROR_MAX, "%s: %llu is out of range (%llu to %llu)", key,
                                 (unsigned long long) v, (unsigned long long) numeric[i].min,
                                 (unsigned long long) numeric[i].max);
                return -EINVAL;
        }
        if (numeric[i].size == sizeof(uint64_t))
                *(uint64_t *) ((char *) cfg + numeric[i].offset) = v;
        else
                *(uint32_t *) ((char *) cfg + numeric[i].offset) = (uint32_t) v;
        return 0;
}


/* ---- [template NAME] sections ------------------------------------------------ */

static Template template_default(const char *name) {
        Template t = { .cpu_weight = 100, .warm = 0, .shutdown_after_seconds = SBX_CLAIM_SHUTDOWN_DEFAULT_S };

        strlcpy(t.name, name, sizeof(t.name));
        strlcpy(t.image, SBX_IMAGE_DEFAULT_NAME, sizeof(t.image));
        return t;
}

const Template *config_template(const Config *cfg, const char *name) {
        for (size_t i = 0; i < cfg->n_templates; i++)
                if (strcmp(cfg->templates[i].name, name) == 0)
                        return &cfg->templates[i];
        return NULL;
}

/* The built-in default template (warm = 1), first, unless the file defines it. */
static int templates_ensure_default(Config *cfg) {
        Template *t;

        if (config_template(cfg, TEMPLATE_DEFAULT))
                return 0;
        t = reallocarray(cfg->templates, cfg->n_templates + 1, sizeof(Template));
        if (!t)
                return -ENOMEM;
        memmove(t + 1, t, cfg->n_templates * sizeof(Template));
        t[0] = template_default(TEMPLATE_DEFAULT);
        t[0].warm = 1;
        cfg->templates = t;
        cfg->n_templates++;
        return 0;
}

static bool template_name_valid(const char *name) {
        size_t n = strlen(name);

        if (n == 0 || n > SBX_CLAIM_NAME_MAX || name[0] == '-' || name[n - 1] == '-')
                return false;
        return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* The template a [template NAME] section's line goes to, made at its first line. */
static int template_for_section(Config *cfg, const char *name, Template **ret, char *err) {
        Template *t;

        for (size_t i = 0; i < cfg->n_templates; i++)
                if (strcmp(cfg->templates[i].name, name) == 0) {
                        *ret = &cfg->templates[i];
                        return 0;
                }
        if (strcmp(name, BOX_TEMPLATE) == 0) {
                snprintf(err, CONFIG_ERROR_MAX, "[template %s]: the name is the boxes' own (box_image, box_spares)",
                         name);
                return -EINVAL;
        }
        if (!template_name_valid(name)) {
                snprintf(err, CONFIG_ERROR_MAX,
                         "[template %.80s]: a template name is 1-%u of a-z 0-9 -, not starting or ending with -",
                         name, SBX_CLAIM_NAME_MAX);
                return -EINVAL;
        }
        if (cfg->n_templates >= SBX_TEMPLATES_MAX) {
                snprintf(err, CONFIG_ERROR_MAX, "too many templates (limit %u)", SBX_TEMPLATES_MAX);
                return -EINVAL;
        }
        t = reallocarray(cfg->templates, cfg->n_templates + 1, sizeof(Template));
        if (!t)
                return -ENOMEM;
        cfg->templates = t;
        t[cfg->n_templates] = template_default(name);
        /* The built-in default keeps one warm claim when the file redefines it without warm. */
        if (strcmp(name, TEMPLATE_DEFAULT) == 0)
                t[cfg->n_templates].warm = 1;
        *ret = &t[cfg->n_templates++];
        return 0;
}

static int template_number(const char *key, const char *value, uint64_t lo, uint64_t hi, uint64_t *ret, char *err) {
        uint64_t v;

        if (parse_size(value, &v) < 0 || v < lo || v > hi) {
                snprintf(err, CONFIG_ERROR_MAX, "%s: '%.40s' is not a number from %llu to %llu", key, value,
                         (unsigned long long) lo, (unsigned long long) hi);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

static int template_set(Template *t, const char *key, const char *value, char *err) {
        uint64_t v = 0;
        int r;

        if (strcmp(key, "image") == 0) {
                size_t n = strlen(value);

                if (n == 0 || n > SBX_NAME_MAX || value[0] == '-' ||
                    strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789-_") != n) {
                        snprintf(err, CONFIG_ERROR_MAX, "image: '%.40s' is not an image name (1-%u of a-z 0-9 - _, "
                                 "not starting with -; see sbx-images(7))", value, SBX_NAME_MAX);
                        return -EINVAL;
                }
                strlcpy(t->image, value, sizeof(t->image));
                return 0;
        }
        if (strcmp(key, "egress") == 0) {
                char why[EGRESS_ERROR_MAX];

                if (egress_policy_from_string(value, &t->egress) >= 0)
                        return 0;
                egress_policy_error(value, why);
                snprintf(err, CONFIG_ERROR_MAX, "egress: %s", why);
                return -EINVAL;
        }
        if (strcmp(key, "source") == 0) {
                if (value[0] == '\0' || strcmp(value, "none") == 0) {
                        free(t->source);
                        t->source = NULL;
                        return 0;
                }
                if (value[0] != '/' || strlen(value) > SBX_SOURCE_DIR_MAX) {
                        snprintf(err, CONFIG_ERROR_MAX, "source must be an absolute directory or none");
                        return -EINVAL;
                }
                return set_path(&t->source, value);
        }
        if (strcmp(key, "shutdown_after_seconds") == 0 && strcmp(value, "none") == 0) {
                t->no_expiry = true;
                return 0;
        }
#define TEMPLATE_NUMBER(k, field, lo, hi)                                               \
        if (strcmp(key, k) == 0) {                                                      \
                r = template_number(key, value, lo, hi, &v, err);                       \
                if (r >= 0)                                                             \
                        t->field = (__typeof__(t->field)) v;                            \
                return r;                                                               \
        }
        TEMPLATE_NUMBER("memory", memory_bytes, 16u << 20, UINT64_MAX)
        TEMPLATE_NUMBER("pids", pids_max, 8, 1u << 22)
        TEMPLATE_NUMBER("cpu_weight", cpu_weight, 1, 10000)
        TEMPLATE_NUMBER("disk", disk_bytes, 1u << 20, UINT64_MAX)
        TEMPLATE_NUMBER("warm", warm, 0, SBX_TEMPLATE_WARM_MAX)
        if (strcmp(key, "shutdown_after_seconds") == 0) {
                r = template_number(key, value, 1, UINT32_MAX, &v, err);
                if (r >= 0) {
                        t->no_expiry = false;
                        t->shutdown_after_seconds = (uint32_t) v;
                }
                return r;
        }
#undef TEMPLATE_NUMBER
        snprintf(err, CONFIG_ERROR_MAX, "unknown template key '%.40s' (image, source, memory, pids, cpu_weight, disk, "
                 "egress, warm, shutdown_after_seconds; see sbxd.conf(5))", key);
        return -EINVAL;
}

/* One line of a section: [sbxd], or [template NAME]. */
static int config_section_set(Config *cfg, const char *section, const char *key, const char *value, char *err) {
        Template *t;
        int r;

        if (strcmp(section, "sbxd") == 0)
                return config_set(cfg, key, value, err);
        if (strncmp(section, "template ", 9) != 0) {
                snprintf(err, CONFIG_ERROR_MAX, "unknown section [%.40s] (the sections are [sbxd] and [template NAME])",
                         section);
                return -EINVAL;
        }
        r = template_for_section(cfg, section + 9, &t, err);
        if (r == -ENOMEM)
                snprintf(err, CONFIG_ERROR_MAX, "out of memory");
        if (r < 0)
                return r;
        return template_set(t, key, value, err);
}

typedef struct ConfigParse {
        Config *cfg;
        FILE *f;
        int lines;              /* lines read so far: the handler's current line */
        int error_line;         /* line of the first handler error, 0 if none */
        char error[CONFIG_ERROR_MAX];
} ConfigParse;

/* inih reader that counts lines, so that "FILE:LINE: reason" pairs the first
 * error's line with its own reason even when later lines are also wrong. */
static char *config_read_line(char *buf, int size, void *stream) {
        ConfigParse *p = stream;
        char *l = fgets(buf, size, p->f);

        if (l)
                p->lines++;
        return l;
}

static int config_handler(void *user, const char *section, const char *name, const char *value) {
        ConfigParse *p = user;
        char err[CONFIG_ERROR_MAX];

        if (config_section_set(p->cfg, section, name, value, err) >= 0)
                return 1;
        if (p->error_line == 0) {
                p->error_line = p->lines;
                memcpy(p->error, err, sizeof(err));
        }
        return 0;
}

/* A template's image other than the default has a definition in images_dir
 * now (read again at each of its claims, as for sandbox create --image). */
static int templates_check_images(const Config *cfg, const char *path, char *ret_error) {
        const char *dir = cfg->images_dir ?: CONFIG_IMAGES_DIR_DEFAULT;
        char file[PATH_MAX];

        for (size_t i = 0; i < cfg->n_templates; i++) {
                const Template *t = &cfg->templates[i];

                if (strcmp(t->image, SBX_IMAGE_DEFAULT_NAME) == 0)
                        continue;
                snprintf(file, sizeof(file), "%s/%s.conf", dir, t->image);
                if (access(file, F_OK) < 0) {
                        snprintf(ret_error, CONFIG_ERROR_MAX, "%.120s: [template %s]: image: '%s' has no definition "
                                 "%s.conf in %.120s (images_dir; sbx-images(7))", path, t->name, t->image, t->image, dir);
                        return -EINVAL;
                }
        }
        return 0;
}

int config_load(Config *cfg, const char *path, bool required, char *ret_error) {
        ConfigParse p = { .cfg = cfg };
        int line;

        if (access(path, F_OK) < 0 && !required)
                return 0;
        p.f = fopen(path, "re");
        if (!p.f) {
                snprintf(ret_error, CONFIG_ERROR_MAX, "%.200s: cannot read: %s", path, strerror(errno));
                return -EINVAL;
        }
        line = ini_parse_stream(config_read_line, &p, config_handler, &p);
        fclose(p.f);
        if (line < 0) {
                snprintf(ret_error, CONFIG_ERROR_MAX, "%.200s: cannot read: %s", path, strerror(errno));
                return -EINVAL;
        }
        if (line > 0) {
                snprintf(ret_error, CONFIG_ERROR_MAX, "%.200s:%d: %.280s", path, line,
                         line == p.error_line ? p.error
                                              : "syntax error: expected 'key = value', '[sbxd]' or a comment");
                return -EINVAL;
        }
        return templates_check_images(cfg, path, ret_error);
}
