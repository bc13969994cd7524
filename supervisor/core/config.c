#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "sbx-limits.h"

void config_init(Config *cfg) {
        *cfg = (Config) {
                .log_level = LOG_INFO,
                .transcript_cap_bytes = SBX_TRANSCRIPT_CAP_DEFAULT,
                .default_memory_bytes = SBX_MEMORY_DEFAULT,
                .default_pids_max = SBX_PIDS_DEFAULT,
                .session_disk_bytes = SBX_SESSION_DISK_DEFAULT,
                .session_spares = SBX_SPARES_DEFAULT,
                .spare_idle_seconds = SBX_SPARE_IDLE_DEFAULT_S,
                .uid_base = SBX_UID_BASE_DEFAULT,
                .uid_count = SBX_UID_COUNT_DEFAULT,
                .socket_gid = (gid_t) -1,
                .client_idle_seconds = SBX_CLIENT_IDLE_DEFAULT_S,
                .image_disk_max = SBX_IMAGE_DISK_MAX_DEFAULT,
        };
}

void config_done(Config *cfg) {
        free(cfg->state_dir);
        free(cfg->run_dir);
        free(cfg->worker_path);
        free(cfg->images_dir);
        free(cfg->image_cache_dir);
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

int config_finish(Config *cfg) {
        if (!cfg->state_dir && set_path(&cfg->state_dir, "/var/lib/sbx") < 0)
                return -ENOMEM;
        if (!cfg->run_dir && set_path(&cfg->run_dir, "/run/sbx") < 0)
                return -ENOMEM;
        if (!cfg->images_dir && set_path(&cfg->images_dir, SBX_SYSCONFDIR "/sbx/images.d") < 0)
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
        if (strcmp(key, "allow_io_uring") == 0) { /* boolean; see sbx-security(7) */
                bool yes = !strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "1");
                if (!yes && strcmp(value, "no") && strcmp(value, "false") && strcmp(value, "0")) {
                        snprintf(err, CONFIG_ERROR_MAX, "allow_io_uring must be yes or no");
                        return -EINVAL;
                }
                cfg->allow_io_uring = yes;
                return 0;
        }
        if (strcmp(key, "log_level") == 0) {
                int l = log_level_from_string(value);
                if (l < 0) {
                        snprintf(err, CONFIG_ERROR_MAX, "log_level must be one of error, warning, notice, info, debug");
                        return -EINVAL;
                }
                cfg->log_level = l;
                return 0;
        }
        return 1;
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
        NUMERIC("default_memory_bytes", default_memory_bytes, 16u << 20, UINT64_MAX),
        NUMERIC("default_pids_max", default_pids_max, 8, 1u << 22),
        NUMERIC("session_disk_bytes", session_disk_bytes, 1u << 20, UINT64_MAX),
        NUMERIC("uid_base", uid_base, 1000, SBX_IMAGE_BUILD_UID_BASE - SBX_UID_COUNT_DEFAULT),
        NUMERIC("uid_count", uid_count, 1, SBX_UID_COUNT_DEFAULT),
        NUMERIC("session_spares", session_spares, 0, SBX_SPARES_MAX),
        NUMERIC("session_spare_idle_seconds", spare_idle_seconds, 1, 86400),
        NUMERIC("client_idle_seconds", client_idle_seconds, 1, 86400),
        NUMERIC("image_disk_max", image_disk_max, 1u << 20, UINT64_MAX),
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

        if (strcmp(section, "sbxd") != 0)
                snprintf(err, sizeof(err), "unknown section [%.40s] (the only section is [sbxd])", section);
        else if (config_set(p->cfg, name, value, err) >= 0)
                return 1;
        if (p->error_line == 0) {
                p->error_line = p->lines;
                memcpy(p->error, err, sizeof(err));
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
        return 0;
}
