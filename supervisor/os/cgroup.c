/* Session cgroups for cgroup v2 (delegated subtree) and v1/hybrid hierarchies.
 * See docs/cgroups.md for the layouts and why they look like this.
 *
 * Non-logging: every function returns 0 (or a count) or -errno. Every path is
 * resolved relative to a directory fd; every fd is O_CLOEXEC. Interface files
 * are opened O_WRONLY|O_TRUNC (never O_CREAT: real cgroup files always exist,
 * and a missing one must fail instead of creating a plain file). */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "os/cgroup.h"
#include "fd-util.h"
#include "sbx-limits.h"
#include "macro.h"

/* Give up killing a cgroup's processes after this long (-EBUSY). */
#define CG_KILL_TIMEOUT_USEC (2ull * 1000000ull)
/* Upper bound on kill/wait rounds, whatever the clock says. */
#define CG_KILL_MAX_ROUNDS 20000u
/* Longest single wait on a pidfd within one round. */
#define CG_KILL_POLL_MS 50
/* Processes signalled through pidfds per round; the rest go next round. */
#define CG_KILL_BATCH 1024u
/* Nesting depth removed below a session or stale instance directory. */
#define CG_TREE_DEPTH_MAX 8
/* Session cgroups, in use or pooled, per manager. */
#define CG_SESSIONS_MAX SBX_MAX_LIVE_SESSIONS
#define CG_INSTANCE_MAX 64u
#define CG_CPU_WEIGHT_DEFAULT 100u
#define CG_CPU_WEIGHT_MAX 10000u
#define CG_V1_SHARES_MIN 2u
#define CG_V1_SHARES_MAX 262144u

typedef enum CgroupController {
        CG_MEMORY,
        CG_PIDS,
        CG_CPU,
        _CG_MAX,
} CgroupController;

static const char *const controller_names[_CG_MAX] = {
        [CG_MEMORY] = "memory",
        [CG_PIDS] = "pids",
        [CG_CPU] = "cpu",
};

typedef enum SessionState {
        SESSION_IN_USE,
        SESSION_FREE,   /* empty, in the pool */
        SESSION_BROKEN, /* could not be emptied; retried only by cgroup_manager_free() */
} SessionState;

struct CgroupSession {
        CgroupManager *manager;
        CgroupSession *next;
        unsigned index;                 /* directory name s<index> */
        SessionState state;
        /* v1: one directory per controller (-EBADF when the controller is absent);
         * v2: the one directory is fd[0]. */
        int fd[_CG_MAX];
        uint64_t oom_base;
        uint64_t pids_max_base;
};

struct CgroupManager {
        CgroupBackend backend;
        bool has[_CG_MAX];              /* controller usable for sessions */

        /* v1, per controller: <root>/<ctrl><own> and <that>/<instance>. */
        int v1_parent_fd[_CG_MAX];
        int v1_base_fd[_CG_MAX];
        bool v1_base_created[_CG_MAX];
        char *instance;

        /* v2: <root><own> and <own>/sessions. */
        int own_fd;
        int sessions_fd;
        bool supervisor_created;
        bool sessions_created;
        bool moved;                     /* this process moved into <own>/supervisor */
        bool enabled_own[_CG_MAX];      /* we added it to <own>/cgroup.subtree_control */

        CgroupSession *sessions;        /* all of them: in use, free and broken */
        unsigned n_sessions;
        unsigned next_index;
};

/* ---- small helpers --------------------------------------------------------- */

static int open_dir_at(int dirfd, const char *path) {
        int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        return fd < 0 ? -errno : fd;
}

/* One write(2), as the kernel parses each write of an interface file as a whole. */
static int write_file_at(int dirfd, const char *name, const char *value) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(value);
        ssize_t n;

        fd = openat(dirfd, name, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        do
                n = write(fd, value, len);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if ((size_t) n != len)
                return -EIO;
        return 0;
}

static int write_u64_at(int dirfd, const char *name, uint64_t v) {
        char buf[32];

        (void) snprintf(buf, sizeof(buf), "%" PRIu64, v);
        return write_file_at(dirfd, name, buf);
}

static bool file_exists_at(int dirfd, const char *name) {
        return faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
}

/* "key N" lines (memory.events, pids.events, memory.oom_control). */
static int read_keyed_u64_at(int dirfd, const char *file, const char *key, uint64_t *ret) {
        _cleanup_free_ char *text = NULL;
        size_t klen = strlen(key);
        int r;

        r = read_file_at(dirfd, file, &text);
        if (r < 0)
                return r;
        for (char *line = text; line && *line; ) {
                char *nl = strchr(line, '\n');

                if (nl)
                        *nl = '\0';
                if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
                        return parse_u64(line + klen + 1, ret);
                line = nl ? nl + 1 : NULL;
        }
        return -ENODATA;
}

/* Whitespace-separated word list (cgroup.controllers, cgroup.subtree_control). */
static bool word_in_list(const char *list, const char *word) {
        size_t wl = strlen(word);

        for (const char *p = list; *p; ) {
                size_t n;

                p += strspn(p, " \t\n");
                n = strcspn(p, " \t\n");
                if (n == wl && strncmp(p, word, n) == 0)
                        return true;
                p += n;
        }
        return false;
}

static bool instance_valid(const char *s) {
        size_t n = 0;

        for (; s[n]; n++)
                if (!isalnum((unsigned char) s[n]) && s[n] != '-' && s[n] != '_')
                        return false;
        return n > 0 && n <= CG_INSTANCE_MAX;
}

static bool path_components_safe(const char *p) {
        while (*p) {
                size_t n = strcspn(p, "/");

                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p += n;
                p += strspn(p, "/");
        }
        return true;
}

/* Find the path of a hierarchy in /proc/self/cgroup text: the "0::" line for
 * v2 (controller == NULL), else the line whose comma-separated controller list
 * holds controller. Returns the path as a relative path ("" for the root). */
static int self_cgroup_path(const char *self_cgroup, const char *controller, char **ret) {
        const char *line = self_cgroup;

        while (line && *line) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                const char *c1 = memchr(line, ':', len), *c2 = NULL;

                if (c1)
                        c2 = memchr(c1 + 1, ':', len - (size_t) (c1 + 1 - line));
                if (c1 && c2) {
                        const char *ctrls = c1 + 1, *path = c2 + 1;
                        size_t clen = (size_t) (c2 - ctrls);
                        size_t plen = len - (size_t) (path - line);
                        bool match = false;

                        if (!controller)
                                match = clen == 0 && c1 - line == 1 && line[0] == '0';
                        else
                                for (const char *p = ctrls; p < c2; ) {
                                        const char *comma = memchr(p, ',', (size_t) (c2 - p));
                                        size_t n = comma ? (size_t) (comma - p) : (size_t) (c2 - p);

                                        if (n == strlen(controller) && strncmp(p, controller, n) == 0)
                                                match = true;
                                        p += n + 1;
                                }
                        if (match) {
                                char *s;

                                if (plen == 0 || path[0] != '/')
                                        return -EINVAL;
                                while (plen > 0 && path[0] == '/')
                                        path++, plen--;
                                s = strndup(path, plen);
                                if (!s)
                                        return -ENOMEM;
                                /* The kernel's own text; still refuse to walk upwards. */
                                if (!path_components_safe(s)) {
                                        free(s);
                                        return -EINVAL;
                                }
                                *ret = s;
                                return 0;
                        }
                }
                line = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

static int open_path_at(int dirfd, const char *rel) {
        return open_dir_at(dirfd, rel[0] ? rel : ".");
}

/* ---- pid lists and killing --------------------------------------------------- */

static int cmp_pid(const void *a, const void *b) {
        pid_t x = *(const pid_t *) a, y = *(const pid_t *) b;
        return x < y ? -1 : x > y;
}

/* The union of cgroup.procs of the given directories, sorted, without
 * duplicates. The kernel lists processes outside our pid namespace as 0: they
 * are left out, and ret_foreign says whether there were any. */
static int read_pids(const int *fds, size_t n_fds, pid_t **ret, size_t *ret_n, bool *ret_foreign) {
        bool foreign = false;
        _cleanup_free_ pid_t *pids = NULL;
        size_t n = 0, cap = 0;
        int r;

        for (size_t i = 0; i < n_fds; i++) {
                _cleanup_free_ char *text = NULL;
                char *p, *end;

                if (fds[i] < 0)
                        continue;
                r = read_file_at(fds[i], "cgroup.procs", &text);
                if (r < 0)
                        return r;
                for (p = text; *p; p = end) {
                        long v;

                        errno = 0;
                        v = strtol(p, &end, 10);
                        if (end == p) {
                                end = p + 1;
                                continue;
                        }
                        if (v == 0)
                                foreign = true;
                        if (errno != 0 || v <= 0 || v > INT32_MAX)
                                continue;
                        if (n == cap) {
                                size_t nc = cap ? cap * 2 : 64;
                                pid_t *np = reallocarray(pids, nc, sizeof(pid_t));

                                if (!np)
                                        return -ENOMEM;
                                pids = np;
                                cap = nc;
                        }
                        pids[n++] = (pid_t) v;
                }
        }
        if (n > 1) {
                size_t k = 1;

                qsort(pids, n, sizeof(pid_t), cmp_pid);
                for (size_t i = 1; i < n; i++)
                        if (pids[i] != pids[k - 1])
                                pids[k++] = pids[i];
                n = k;
        }
        *ret = TAKE_PTR(pids);
        *ret_n = n;
        if (ret_foreign)
                *ret_foreign = foreign;
        return 0;
}

static bool pid_in(const pid_t *pids, size_t n, pid_t pid) {
        return n > 0 && bsearch(&pid, pids, n, sizeof(pid_t), cmp_pid);
}

static void sleep_1ms(void) {
        struct timespec ts = { .tv_sec = 0, .tv_nsec = 1000000 };
        (void) nanosleep(&ts, NULL);
}

/* Kill every process in the directories and wait until cgroup.procs of all of
 * them is empty. With use_kill_file (v2 cgroup.kill, fds[0]) the kernel does
 * the killing, recursively and race-free; otherwise each listed pid is pinned
 * with a pidfd, checked to still be listed (so a recycled pid is never hit),
 * and signalled. Processes forked meanwhile show up in the next round. Waits
 * on the pidfds, not on a timer, except where pidfds are unavailable. */
static int kill_and_wait(const int *fds, size_t n_fds, bool use_kill_file, bool wait) {
        unsigned long long deadline = now_usec() + CG_KILL_TIMEOUT_USEC;
        pid_t last_first = 0;
        int r;

        for (unsigned round = 0; round < CG_KILL_MAX_ROUNDS; round++) {
                _cleanup_free_ pid_t *before = NULL, *after = NULL;
                size_t n_before = 0, n_after = 0, n_open = 0;
                struct pollfd pfd[CG_KILL_BATCH];
                pid_t pfd_pid[CG_KILL_BATCH];
                unsigned long long now;
                bool no_pidfd = false, foreign = false;

                if (use_kill_file) {
                        r = write_file_at(fds[0], "cgroup.kill", "1");
                        if (r < 0)
                                return r;
                        if (!wait)
                                return 0;
                }

                r = read_pids(fds, n_fds, &before, &n_before, &foreign);
                if (r < 0)
                        return r;
                /* Processes we cannot even name (another pid namespace sharing
                 * a v1 hierarchy): not ours to kill, and we could not. */
                if (foreign && !use_kill_file)
                        return -EPERM;
                if (n_before == 0)
                        return 0;

                now = now_usec();
                if (now >= deadline)
                        return -EBUSY;

                for (size_t i = 0; i < n_before && n_open < CG_KILL_BATCH; i++) {
                        int fd = pidfd_open(before[i], 0);

                        if (fd < 0) {
                                if (errno != ESRCH)
                                        no_pidfd = true;
                                continue;
                        }
                        pfd_pid[n_open] = before[i];
                        pfd[n_open++] = (struct pollfd) { .fd = fd, .events = POLLIN };
                }

                if (!use_kill_file) {
                        r = read_pids(fds, n_fds, &after, &n_after, NULL);
                        if (r < 0)
                                goto close_fds;
                        for (size_t i = 0; i < n_open; i++)
                                if (pid_in(after, n_after, pfd_pid[i]))
                                        (void) pidfd_send_signal(pfd[i].fd, SIGKILL, NULL, 0);
                        if (no_pidfd)
                                /* No pidfds (seccomp, old kernel): plain kill(2)
                                 * of pids listed in both reads. */
                                for (size_t i = 0; i < n_before; i++)
                                        if (pid_in(after, n_after, before[i]))
                                                (void) kill(before[i], SIGKILL);
                }

                if (n_open > 0) {
                        long left_ms = (long) ((deadline - now) / 1000u) + 1;

                        (void) poll(pfd, n_open, (int) MIN(left_ms, (long) CG_KILL_POLL_MS));
                }
                /* Nothing to wait on, or the same process is still listed
                 * after its pidfd said it exited: don't spin. */
                if (n_open == 0 || (round > 0 && before[0] == last_first))
                        sleep_1ms();
                last_first = before[0];
                r = 0;
        close_fds:
                for (size_t i = 0; i < n_open; i++)
                        (void) safe_close(pfd[i].fd);
                if (r < 0)
                        return r;
        }
        return -EBUSY;
}

static bool is_dir_entry(int dirfd, const struct dirent *de) {
        struct stat st;

        if (de->d_type != DT_UNKNOWN)
                return de->d_type == DT_DIR;
        return fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISDIR(st.st_mode);
}

/* Kill what is in parent_fd/name and below it, then remove the directories
 * bottom-up. Missing directories are fine. */
static int remove_tree_at(int parent_fd, const char *name, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        int r, ret = 0;

        fd = open_dir_at(parent_fd, name);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;

        r = kill_and_wait(&fd, 1, file_exists_at(fd, "cgroup.kill"), true);
        if (r < 0)
                ret = r;

        if (depth < CG_TREE_DEPTH_MAX) {
                int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);

                if (dfd < 0)
                        return -errno;
                d = fdopendir(dfd);
                if (!d) {
                        r = -errno;
                        (void) safe_close(dfd);
                        return r;
                }
                for (struct dirent *de; (de = readdir(d)); ) {
                        if (de->d_name[0] == '.' || !is_dir_entry(fd, de))
                                continue;
                        r = remove_tree_at(fd, de->d_name, depth + 1);
                        if (r < 0 && ret == 0)
                                ret = r;
                }
                (void) closedir(d);
        }

        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && ret == 0)
                ret = -errno;
        return ret;
}

/* ---- detection ---------------------------------------------------------------- */

static int detect(int root_fd, CgroupBackend *ret) {
        _cleanup_free_ char *controllers = NULL;

        if (read_file_at(root_fd, "cgroup.controllers", &controllers) >= 0 &&
            word_in_list(controllers, "memory") && word_in_list(controllers, "pids")) {
                *ret = CGROUP_BACKEND_V2;
                return 0;
        }
        if (file_exists_at(root_fd, "memory/cgroup.procs") &&
            file_exists_at(root_fd, "pids/cgroup.procs")) {
                *ret = CGROUP_BACKEND_V1;
                return 0;
        }
        return -EOPNOTSUPP;
}

const char *cgroup_backend_to_string(CgroupBackend b) {
        switch (b) {
        case CGROUP_BACKEND_V1:
                return "v1";
        case CGROUP_BACKEND_V2:
                return "v2";
        }
        return NULL;
}

CgroupBackend cgroup_manager_backend(const CgroupManager *m) {
        return m->backend;
}

/* ---- manager: v1 ------------------------------------------------------------ */

static int manager_setup_v1(CgroupManager *m, int root_fd, const char *self_cgroup) {
        int r;

        if (!m->instance)
                return -EINVAL;

        for (CgroupController c = 0; c < _CG_MAX; c++) {
                _cleanup_free_ char *own = NULL;
                _cleanup_close_ int ctrl_fd = -EBADF;
                bool required = c != CG_CPU;

                ctrl_fd = open_dir_at(root_fd, controller_names[c]);
                if (ctrl_fd < 0 || !file_exists_at(ctrl_fd, "cgroup.procs")) {
                        if (required)
                                return ctrl_fd < 0 && ctrl_fd != -ENOENT ? ctrl_fd : -EOPNOTSUPP;
                        continue;
                }
                r = self_cgroup_path(self_cgroup, controller_names[c], &own);
                if (r < 0) {
                        if (required)
                                return r == -ENOENT ? -EOPNOTSUPP : r;
                        continue;
                }
                r = open_path_at(ctrl_fd, own);
                if (r < 0)
                        return r;
                m->v1_parent_fd[c] = r;

                /* EEXIST: the name holds our pid, so whoever made it is gone.
                 * Adopt it (and remove it when done). */
                r = dir_make_open_at(m->v1_parent_fd[c], m->instance, 0755, NULL);
                if (r < 0)
                        return r;
                m->v1_base_created[c] = true;
                m->v1_base_fd[c] = r;
                m->has[c] = true;
        }
        return 0;
}

/* ---- manager: v2 ------------------------------------------------------------ */

static int own_cgroup_only_us(int own_fd) {
        _cleanup_free_ pid_t *pids = NULL;
        size_t n = 0;
        pid_t self = getpid();
        bool foreign;
        int r;

        r = read_pids(&own_fd, 1, &pids, &n, &foreign);
        if (r < 0)
                return r;
        if (foreign)
                return -EBUSY;
        for (size_t i = 0; i < n; i++)
                if (pids[i] != self)
                        return -EBUSY;
        return 0;
}

/* Enable the controllers in want[] in dirfd's cgroup.subtree_control: all in
 * one write, and if the kernel refuses that, one by one so an optional one
 * (cpu) cannot take the required ones down with it. got[] says what is on. */
static int enable_controllers(int dirfd, const bool want[_CG_MAX], bool got[_CG_MAX]) {
        char buf[64] = "";
        int r;

        for (CgroupController c = 0; c < _CG_MAX; c++)
                if (want[c]) {
                        if (buf[0])
                                (void) strcat(buf, " ");
                        (void) strcat(buf, "+");
                        (void) strcat(buf, controller_names[c]);
                }
        if (!buf[0])
                return 0;
        r = write_file_at(dirfd, "cgroup.subtree_control", buf);
        if (r >= 0) {
                for (CgroupController c = 0; c < _CG_MAX; c++)
                        got[c] = got[c] || want[c];
                return 0;
        }
        for (CgroupController c = 0; c < _CG_MAX; c++) {
                char one[16];

                if (!want[c])
                        continue;
                (void) snprintf(one, sizeof(one), "+%s", controller_names[c]);
                r = write_file_at(dirfd, "cgroup.subtree_control", one);
                if (r < 0) {
                        if (c != CG_CPU)
                                return r;
                        continue;
                }
                got[c] = true;
        }
        return 0;
}

static int manager_setup_v2(CgroupManager *m, int root_fd, const char *self_cgroup) {
        _cleanup_free_ char *own = NULL, *available = NULL, *enabled = NULL;
        _cleanup_close_ int sup_fd = -EBADF;
        bool want[_CG_MAX] = {}, on_own[_CG_MAX] = {}, on_sessions[_CG_MAX] = {};
        char pidbuf[32];
        int r;

        r = self_cgroup_path(self_cgroup, NULL, &own);
        if (r < 0)
                return r == -ENOENT ? -EOPNOTSUPP : r;
        r = open_path_at(root_fd, own);
        if (r < 0)
                return r;
        m->own_fd = r;

        /* What our parent delegated to us. */
        r = read_file_at(m->own_fd, "cgroup.controllers", &available);
        if (r < 0)
                return r;
        r = read_file_at(m->own_fd, "cgroup.subtree_control", &enabled);
        if (r < 0)
                return r;
        for (CgroupController c = 0; c < _CG_MAX; c++) {
                if (!word_in_list(available, controller_names[c])) {
                        if (c != CG_CPU)
                                return -EOPNOTSUPP;
                        continue;
                }
                on_own[c] = word_in_list(enabled, controller_names[c]);
                want[c] = !on_own[c];
        }

        /* systemd's Delegate=yes hands us <own> with only our own process in it.
         * The "no internal processes" rule forbids enabling controllers for
         * children of a cgroup that holds processes, so we move ourselves into
         * the supervisor/ leaf. Processes we did not start (another daemon
         * sharing the unit, a shell someone moved here) would keep <own>
         * populated, and moving them is not ours to decide: refuse. */
        r = own_cgroup_only_us(m->own_fd);
        if (r < 0)
                return r;

        r = dir_make_open_at(m->own_fd, "supervisor", 0755, &m->supervisor_created);
        if (r < 0)
                return r;
        sup_fd = r;
        (void) snprintf(pidbuf, sizeof(pidbuf), "%d", (int) getpid());
        r = write_file_at(sup_fd, "cgroup.procs", pidbuf);
        if (r < 0)
                return r;
        m->moved = true;

        r = enable_controllers(m->own_fd, want, on_own);
        for (CgroupController c = 0; c < _CG_MAX; c++)
                m->enabled_own[c] = want[c] && on_own[c];
        if (r < 0)
                return r;

        r = dir_make_open_at(m->own_fd, "sessions", 0755, &m->sessions_created);
        if (r < 0)
                return r;
        m->sessions_fd = r;

        r = enable_controllers(m->sessions_fd, on_own, on_sessions);
        if (r < 0)
                return r;
        for (CgroupController c = 0; c < _CG_MAX; c++)
                m->has[c] = on_sessions[c];
        return 0;
}

/* ---- sessions ------------------------------------------------------------- */

static size_t session_fds(const CgroupSession *s, int ret_fds[_CG_MAX]) {
        size_t n = 0;

        for (CgroupController c = 0; c < _CG_MAX; c++)
                if (s->fd[c] >= 0)
                        ret_fds[n++] = s->fd[c];
        return n;
}

static int session_ctrl_fd(const CgroupSession *s, CgroupController c) {
        if (!s->manager->has[c])
                return -EBADF;
        return s->manager->backend == CGROUP_BACKEND_V2 ? s->fd[0] : s->fd[c];
}

static int session_kill_wait(CgroupSession *s, bool wait) {
        int fds[_CG_MAX];
        size_t n = session_fds(s, fds);
        bool kill_file = s->manager->backend == CGROUP_BACKEND_V2 &&
                         file_exists_at(s->fd[0], "cgroup.kill");

        return kill_and_wait(fds, n, kill_file, wait);
}

static int set_memory_v1(int fd, uint64_t bytes) {
        char buf[32];
        bool memsw = file_exists_at(fd, "memory.memsw.limit_in_bytes");
        int r;

        if (bytes == 0)
                (void) strcpy(buf, "-1");
        else
                (void) snprintf(buf, sizeof(buf), "%" PRIu64, bytes);

        /* The kernel keeps memsw >= limit: lower the limit first, raise memsw first. */
        r = write_file_at(fd, "memory.limit_in_bytes", buf);
        if (r == -EBUSY) {
                /* Above the new limit with pages a previous session left
                 * (page cache): the cgroup is empty, so drop them and retry. */
                (void) write_file_at(fd, "memory.force_empty", "0");
                r = write_file_at(fd, "memory.limit_in_bytes", buf);
        }
        if (r == -EINVAL && memsw) {
                r = write_file_at(fd, "memory.memsw.limit_in_bytes", buf);
                if (r < 0)
                        return r;
                r = write_file_at(fd, "memory.limit_in_bytes", buf);
        }
        if (r < 0)
                return r;
        /* Same value for memory+swap, so swap cannot extend the limit. */
        if (memsw) {
                r = write_file_at(fd, "memory.memsw.limit_in_bytes", buf);
                if (r < 0)
                        return r;
        }
        /* Best effort: a parent with use_hierarchy may refuse it. */
        (void) write_file_at(fd, "memory.swappiness", "0");
        return 0;
}

static uint64_t cpu_weight(const CgroupLimits *l) {
        /* 0 ("leave") still writes the default: a pooled cgroup must not keep
         * the weight its previous session had. */
        uint64_t w = l->cpu_weight ? l->cpu_weight : CG_CPU_WEIGHT_DEFAULT;
        return MIN(MAX(w, 1u), (uint64_t) CG_CPU_WEIGHT_MAX);
}

static int session_apply_limits(CgroupSession *s, const CgroupLimits *l) {
        CgroupManager *m = s->manager;
        int fd, r;

        if (m->backend == CGROUP_BACKEND_V2) {
                fd = s->fd[0];
                if (l->memory_bytes)
                        r = write_u64_at(fd, "memory.max", l->memory_bytes);
                else
                        r = write_file_at(fd, "memory.max", "max");
                if (r < 0)
                        return r;
                r = write_file_at(fd, "memory.swap.max", "0");
                if (r < 0 && r != -ENOENT)
                        return r;
                if (l->pids_max)
                        r = write_u64_at(fd, "pids.max", l->pids_max);
                else
                        r = write_file_at(fd, "pids.max", "max");
                if (r < 0)
                        return r;
                if (m->has[CG_CPU]) {
                        r = write_u64_at(fd, "cpu.weight", cpu_weight(l));
                        if (r < 0)
                                return r;
                }
                return 0;
        }

        r = set_memory_v1(s->fd[CG_MEMORY], l->memory_bytes);
        if (r < 0)
                return r;
        if (l->pids_max)
                r = write_u64_at(s->fd[CG_PIDS], "pids.max", l->pids_max);
        else
                r = write_file_at(s->fd[CG_PIDS], "pids.max", "max");
        if (r < 0)
                return r;
        if (m->has[CG_CPU]) {
                /* cpu.weight 100 is cpu.shares 1024, proportionally. */
                uint64_t shares = cpu_weight(l) * 1024u / 100u;

                shares = MIN(MAX(shares, (uint64_t) CG_V1_SHARES_MIN), (uint64_t) CG_V1_SHARES_MAX);
                r = write_u64_at(s->fd[CG_CPU], "cpu.shares", shares);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int read_oom_kills(CgroupSession *s, uint64_t *ret) {
        int fd = session_ctrl_fd(s, CG_MEMORY);

        if (s->manager->backend == CGROUP_BACKEND_V2)
                return read_keyed_u64_at(fd, "memory.events", "oom_kill", ret);
        return read_keyed_u64_at(fd, "memory.oom_control", "oom_kill", ret);
}

static int read_pids_max_hits(CgroupSession *s, uint64_t *ret) {
        return read_keyed_u64_at(session_ctrl_fd(s, CG_PIDS), "pids.events", "max", ret);
}

static void session_record_baselines(CgroupSession *s) {
        if (read_oom_kills(s, &s->oom_base) < 0)
                s->oom_base = 0;
        if (read_pids_max_hits(s, &s->pids_max_base) < 0)
                s->pids_max_base = 0;
}

static void session_close(CgroupSession *s) {
        for (CgroupController c = 0; c < _CG_MAX; c++)
                s->fd[c] = safe_close(s->fd[c]);
}

/* Remove the session's directories (killing what is left) and free it. */
static int session_destroy(CgroupSession *s) {
        CgroupManager *m = s->manager;
        char name[16];
        int r, ret = 0;

        (void) snprintf(name, sizeof(name), "s%u", s->index);
        session_close(s);
        if (m->backend == CGROUP_BACKEND_V2)
                ret = remove_tree_at(m->sessions_fd, name, 1);
        else
                for (CgroupController c = 0; c < _CG_MAX; c++)
                        if (m->has[c]) {
                                r = remove_tree_at(m->v1_base_fd[c], name, 1);
                                if (r < 0 && ret == 0)
                                        ret = r;
                        }
        free(s);
        return ret;
}

static void manager_unlink_session(CgroupManager *m, CgroupSession *s) {
        for (CgroupSession **p = &m->sessions; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        m->n_sessions--;
                        return;
                }
}

static int session_create(CgroupManager *m, CgroupSession **ret) {
        _cleanup_free_ CgroupSession *s = NULL;
        char name[16];
        int r;

        if (m->n_sessions >= CG_SESSIONS_MAX)
                return -ENOSPC;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->manager = m;
        s->index = m->next_index++;
        for (CgroupController c = 0; c < _CG_MAX; c++)
                s->fd[c] = -EBADF;
        (void) snprintf(name, sizeof(name), "s%u", s->index);

        for (CgroupController c = 0; c < _CG_MAX; c++) {
                int base;

                if (m->backend == CGROUP_BACKEND_V2) {
                        if (c != 0)
                                break;
                        base = m->sessions_fd;
                } else {
                        if (!m->has[c])
                                continue;
                        base = m->v1_base_fd[c];
                }
                /* EEXIST: a leftover of an earlier incarnation; adopted and
                 * emptied below. */
                r = dir_make_open_at(base, name, 0755, NULL);
                if (r < 0)
                        goto fail;
                s->fd[c] = r;
        }

        r = session_kill_wait(s, true);
        if (r < 0)
                goto fail;

        *ret = TAKE_PTR(s);
        return 0;

fail:
        s->next = NULL;
        (void) session_destroy(TAKE_PTR(s));
        return r;
}

int cgroup_session_new(CgroupManager *m, const CgroupLimits *limits, CgroupSession **ret) {
        CgroupSession *s = NULL;
        bool fresh = false;
        int r;

        if (!m || !limits || !ret)
                return -EINVAL;

        for (CgroupSession *i = m->sessions; i; i = i->next)
                if (i->state == SESSION_FREE) {
                        s = i;
                        break;
                }
        if (!s) {
                r = session_create(m, &s);
                if (r < 0)
                        return r;
                s->next = m->sessions;
                m->sessions = s;
                m->n_sessions++;
                fresh = true;
        }

        r = session_apply_limits(s, limits);
        if (r < 0) {
                if (fresh) {
                        manager_unlink_session(m, s);
                        (void) session_destroy(s);
                } else
                        s->state = SESSION_FREE;
                return r;
        }
        session_record_baselines(s);
        s->state = SESSION_IN_USE;
        *ret = s;
        return 0;
}

static const CgroupController attach_order_v1[] = { CG_PIDS, CG_MEMORY, CG_CPU };

int cgroup_session_attach(CgroupSession *s, pid_t pid) {
        char buf[32];
        int r;

        if (!s || pid <= 0 || s->state != SESSION_IN_USE)
                return -EINVAL;
        (void) snprintf(buf, sizeof(buf), "%d", (int) pid);
        if (s->manager->backend == CGROUP_BACKEND_V2)
                return write_file_at(s->fd[0], "cgroup.procs", buf);
        /* v1: pids first, so the pids limit holds before anything else can fork. */
        for (size_t i = 0; i < ELEMENTSOF(attach_order_v1); i++) {
                int fd = s->fd[attach_order_v1[i]];

                if (fd < 0)
                        continue;
                r = write_file_at(fd, "cgroup.procs", buf);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* An event counter of the cgroup, less what it counted before this session. */
static int counter_since(CgroupSession *s, int (*read_counter)(CgroupSession *s, uint64_t *ret), uint64_t base,
                         uint64_t *ret) {
        uint64_t v;
        int r;

        if (!s || !ret)
                return -EINVAL;
        r = read_counter(s, &v);
        if (r < 0)
                return r;
        *ret = v > base ? v - base : 0;
        return 0;
}

int cgroup_session_oom_kills(CgroupSession *s, uint64_t *ret) {
        return counter_since(s, read_oom_kills, s ? s->oom_base : 0, ret);
}

int cgroup_session_pids_max_hits(CgroupSession *s, uint64_t *ret) {
        return counter_since(s, read_pids_max_hits, s ? s->pids_max_base : 0, ret);
}

int cgroup_session_processes(CgroupSession *s, size_t *ret) {
        _cleanup_free_ pid_t *pids = NULL;
        int fds[_CG_MAX];
        size_t n;
        int r;

        if (!s)
                return -EINVAL;
        r = read_pids(fds, session_fds(s, fds), &pids, &n, NULL);
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

int cgroup_session_kill(CgroupSession *s) {
        if (!s)
                return -EINVAL;
        /* v2 cgroup.kill is complete when the write returns; the v1 loop has
         * to keep going until nothing is left that could still fork. */
        return session_kill_wait(s, s->manager->backend == CGROUP_BACKEND_V1);
}

CgroupSession *cgroup_session_release(CgroupSession *s) {
        if (!s)
                return NULL;
        /* A cgroup that cannot be emptied is not handed out again;
         * cgroup_manager_free() tries once more. */
        s->state = session_kill_wait(s, true) < 0 ? SESSION_BROKEN : SESSION_FREE;
        return NULL;
}

/* ---- manager ---------------------------------------------------------------- */

int cgroup_manager_new(const char *root, const char *self_cgroup, const char *instance,
                       CgroupManager **ret) {
        _cleanup_close_ int root_fd = -EBADF;
        CgroupManager *m;
        CgroupBackend backend;
        int r;

        if (!root || !self_cgroup || !ret)
                return -EINVAL;
        if (instance && !instance_valid(instance))
                return -EINVAL;

        root_fd = open_dir_at(AT_FDCWD, root);
        if (root_fd < 0)
                return root_fd;
        r = detect(root_fd, &backend);
        if (r < 0)
                return r;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->backend = backend;
        m->own_fd = m->sessions_fd = -EBADF;
        for (CgroupController c = 0; c < _CG_MAX; c++)
                m->v1_parent_fd[c] = m->v1_base_fd[c] = -EBADF;
        if (instance) {
                m->instance = strdup(instance);
                if (!m->instance) {
                        free(m);
                        return -ENOMEM;
                }
        }

        if (backend == CGROUP_BACKEND_V2)
                r = manager_setup_v2(m, root_fd, self_cgroup);
        else
                r = manager_setup_v1(m, root_fd, self_cgroup);
        if (r < 0) {
                (void) cgroup_manager_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

CgroupManager *cgroup_manager_free(CgroupManager *m) {
        if (!m)
                return NULL;

        while (m->sessions) {
                CgroupSession *s = m->sessions;

                m->sessions = s->next;
                (void) session_destroy(s);
        }
        m->n_sessions = 0;

        if (m->backend == CGROUP_BACKEND_V1) {
                for (CgroupController c = 0; c < _CG_MAX; c++) {
                        m->v1_base_fd[c] = safe_close(m->v1_base_fd[c]);
                        if (m->v1_base_created[c] && m->v1_parent_fd[c] >= 0)
                                (void) remove_tree_at(m->v1_parent_fd[c], m->instance, 1);
                        m->v1_parent_fd[c] = safe_close(m->v1_parent_fd[c]);
                }
        } else if (m->own_fd >= 0) {
                char buf[64] = "";

                m->sessions_fd = safe_close(m->sessions_fd);
                if (m->sessions_created)
                        (void) remove_tree_at(m->own_fd, "sessions", 1);

                /* Back to how we found <own>: controllers off again (a cgroup
                 * with controllers enabled for its children cannot take a
                 * process), ourselves back in it, supervisor/ gone. */
                for (CgroupController c = 0; c < _CG_MAX; c++)
                        if (m->enabled_own[c]) {
                                if (buf[0])
                                        (void) strcat(buf, " ");
                                (void) strcat(buf, "-");
                                (void) strcat(buf, controller_names[c]);
                        }
                if (buf[0])
                        (void) write_file_at(m->own_fd, "cgroup.subtree_control", buf);
                if (m->moved) {
                        char pidbuf[32];

                        (void) snprintf(pidbuf, sizeof(pidbuf), "%d", (int) getpid());
                        (void) write_file_at(m->own_fd, "cgroup.procs", pidbuf);
                }
                if (m->supervisor_created)
                        (void) unlinkat(m->own_fd, "supervisor", AT_REMOVEDIR);
                m->own_fd = safe_close(m->own_fd);
        }
        free(m->instance);
        free(m);
        return NULL;
}

/* "sbxd-<pid>" → pid, else 0. */
static pid_t instance_pid(const char *name) {
        uint64_t v;

        if (strncmp(name, "sbxd-", 5) != 0 || parse_u64(name + 5, &v) < 0)
                return 0;
        for (const char *p = name + 5; *p; p++)
                if (!isdigit((unsigned char) *p))
                        return 0;
        return v > 0 && v <= INT32_MAX ? (pid_t) v : 0;
}

static bool session_name_tracked(CgroupManager *m, const char *name) {
        uint64_t v;

        if (name[0] != 's' || parse_u64(name + 1, &v) < 0)
                return false;
        for (CgroupSession *s = m->sessions; s; s = s->next)
                if (s->index == v) {
                        char buf[16];

                        (void) snprintf(buf, sizeof(buf), "s%u", s->index);
                        return strcmp(buf, name) == 0;
                }
        return false;
}

/* Calls remove_tree_at() for each subdirectory of dirfd that pick() selects. */
static int remove_matching(CgroupManager *m, int dirfd, bool (*pick)(CgroupManager *, const char *),
                           unsigned *count) {
        DIR *d;
        int dfd, r, ret = 0;

        dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        if (dfd < 0)
                return -errno;
        d = fdopendir(dfd);
        if (!d) {
                r = -errno;
                (void) safe_close(dfd);
                return r;
        }
        rewinddir(d);
        for (struct dirent *de; (de = readdir(d)); ) {
                if (de->d_name[0] == '.' || !is_dir_entry(dirfd, de) || !pick(m, de->d_name))
                        continue;
                r = remove_tree_at(dirfd, de->d_name, 1);
                if (r < 0 && ret == 0)
                        ret = r;
                else if (r >= 0)
                        (*count)++;
        }
        (void) closedir(d);
        return ret;
}

static bool pick_stale_instance(CgroupManager *m, const char *name) {
        pid_t pid = instance_pid(name);

        if (pid <= 0 || pid == getpid() || (m->instance && strcmp(name, m->instance) == 0))
                return false;
        /* EPERM means it exists. A pid reused by an unrelated process keeps the
         * stale tree until that process is gone too; harmless. */
        return kill(pid, 0) < 0 && errno == ESRCH;
}

static bool pick_untracked_session(CgroupManager *m, const char *name) {
        return !session_name_tracked(m, name);
}

int cgroup_manager_cleanup_stale(CgroupManager *m) {
        unsigned count = 0;
        int r, ret = 0;

        if (!m)
                return -EINVAL;

        if (m->backend == CGROUP_BACKEND_V2) {
                /* The delegated subtree is ours alone and systemd removes it
                 * with the unit, so other supervisors' leftovers cannot exist
                 * here, and everything above <own> belongs to systemd. Only
                 * session cgroups an earlier incarnation of this unit left in
                 * sessions/ can remain. */
                r = remove_matching(m, m->sessions_fd, pick_untracked_session, &count);
                return r < 0 ? r : (int) count;
        }

        for (CgroupController c = 0; c < _CG_MAX; c++) {
                if (m->v1_parent_fd[c] < 0)
                        continue;
                r = remove_matching(m, m->v1_parent_fd[c], pick_stale_instance, &count);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret < 0 ? ret : (int) count;
}
