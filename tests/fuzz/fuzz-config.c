/* libFuzzer target: sbxd's configuration parser (supervisor/core/config.c,
 * linked alone), through the same path sbxd takes at start-up: the input is
 * written to a file and read back by config_load() (inih + config_set()). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/config.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static void remove_input(void) {
        (void) unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char err[CONFIG_ERROR_MAX];
        Config cfg;
        int fd;

        if (!path[0]) {
                snprintf(path, sizeof(path), "/tmp/sbx-fuzz-config-%d.conf", (int) getpid());
                log_set_level(-1); /* the parser's complaints are expected here */
                atexit(remove_input);
        }
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return 0;
        if (size > 0 && write(fd, data, size) != (ssize_t) size) {
                close(fd);
                return 0;
        }
        close(fd);
        config_init(&cfg);
        (void) config_load(&cfg, path, true, err);
        config_done(&cfg);
        return 0;
}
