#include <string.h>

#include "fd-util.h"
#include "setup.h"

int setup_report_spawned(int sync, pid_t pid, int pidfd) {
        SetupReport rep = { .tag = SETUP_SPAWNED, .pid = pid };
        return send_with_fds(sync, &rep, sizeof(rep), &pidfd, 1);
}

int setup_report_error(int sync, int err, const char *step) {
        SetupError e = { .err = err < 0 ? err : -err };
        strlcpy(e.step, step, sizeof(e.step));
        return send_with_fds(sync, &e, sizeof(e), NULL, 0);
}
