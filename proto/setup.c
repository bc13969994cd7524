#include <string.h>

#include "fd-util.h"
#include "setup.h"

int setup_report_spawned(int sync, pid_t pid, int pidfd, int egress_fd) {
        SetupReport rep = { .tag = SETUP_SPAWNED, .pid = pid };
        int fds[2] = { pidfd, egress_fd };

        return send_with_fds(sync, &rep, sizeof(rep), fds, egress_fd >= 0 ? 2 : 1);
}

int setup_report_error(int sync, int err, const char *step) {
        SetupError e = { .err = err < 0 ? err : -err };
        strlcpy(e.step, step, sizeof(e.step));
        return send_with_fds(sync, &e, sizeof(e), NULL, 0);
}
