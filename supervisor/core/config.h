/* sbxd.conf: the supervisor's configuration (sbxd.conf(5)), its defaults
 * and its parser (inih). Non-logging: a failure comes back as a message
 * ("FILE:LINE: reason") for main to print. tests/fuzz/fuzz-config.c links
 * this file alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Config {
        char *state_dir;
        char *run_dir;
        char *worker_path;
        int log_level;
        uint64_t transcript_cap_bytes;
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
        uint32_t client_idle_seconds;   /* a client with no request this long is closed */
        /* images (core/imagebuild.h, sbx-images(7)) */
        char *images_dir;               /* NAME.conf definitions; default SYSCONFDIR/sbx/images.d */
        char *image_cache_dir;          /* .deb packages kept between builds; default STATE/images/cache */
        uint64_t image_disk_max;        /* all builds together at most this */
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
/* The default directories where neither the file nor the command line set them. */
int config_finish(Config *cfg);
void config_done(Config *cfg);
