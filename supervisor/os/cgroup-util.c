/* What both cgroup backends and the manager share: interface files, a
 * cgroup's processes, killing them, removing trees, the pool's names. Below
 * cgroup.c (the manager) and its backends cgroup-v1.c and cgroup-v2.c, so that
 * the manager's calls into the backends' tables and theirs into these helpers
 * make no circle. Non-logging, like the rest: 0 (or a count) or -errno; paths
 * relative to directory fds; every fd O_CLOEXEC. */

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
#include "os/cgroup-internal.h"
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
const char *const cgroup_controller_names[_CG_MAX] = {
        [CG_MEMORY] = "memory",
        [CG_PIDS] = "pids",
        [CG_CPU] = "cpu",
        [CG_FREEZER] = "freezer",
};

/* ---- files ----------------------------------------------------------------- */

int cg_open_dir_at(int dirfd, const char *rel) {
        int fd = openat(dirfd, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        return fd < 0 ? -errno : fd;
}

bool cg_file_exists_at(int dirfd, const char *name) {
        return faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
}

/* The kernel parses each write(2) of an interface file as a whole; values
 * this short (well under a page) are taken in one write or refused. */
int cg_write_at(int dirfd, const char *name, const char *value) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dirfd, name, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        return loop_write(fd, value, strlen(value));
}

int cg_write_u64_at(int dirfd, const char *name, uint64_t v) {
        char buf[32];

        (void) snprintf(buf, sizeof(buf), "%" PRIu64, v);
        return cg_write_at(dirfd, name, buf);
}

int cg_write_limit_at(int dirfd, const char *name, uint64_t v) {
        return v ? cg_write_u64_at(dirfd, name, v) : cg_write_at(dirfd, name, "max");
}

int cg_write_pid_at(int dirfd, pid_t pid) {
        return cg_write_u64_at(dirfd, "cgroup.procs", (uint64_t) pid);
}

int cg_read_u64_at(int dirfd, const char *file, uint64_t *ret) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = read_file_at(dirfd, file, &text);
        if (r < 0)
                return r;
        text[strcspn(text, "\n")] = '\0';
        return parse_u64(text, ret);
}

int cg_read_keyed_u64_at(int dirfd, const char *file, const char *key, uint64_t *ret) {
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

bool cg_word_in_list(const char *list, const char *word) {
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

uint64_t cg_cpu_weight(const CgroupLimits *l) {
        /* 0 ("leave") still writes the default: a pooled cgroup must not keep
         * the weight its previous session had. */
        uint64_t w = l->cpu_weight ? l->cpu_weight : SBX_CPU_WEIGHT_DEFAULT;
        return MIN(MAX(w, 1u), (uint64_t) SBX_CPU_WEIGHT_MAX);
}

/* ---- /proc/self/cgroup -------------------------------------------------------- */

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

/* Whether the controllers field (ctrls, clen bytes) of a /proc/self/cgroup
 * line "id:ctrls:path" names the hierarchy asked for: the v2 one ("0::") for
 * controller NULL, else the one whose comma-separated list holds controller. */
static bool self_line_matches(const char *line, const char *ctrls, size_t clen, const char *controller) {
        const char *end = ctrls + clen;
        size_t want;

        if (!controller)
                return clen == 0 && ctrls - line == 2 && line[0] == '0';
        want = strlen(controller);
        for (const char *p = ctrls; p < end; ) {
                const char *comma = memchr(p, ',', (size_t) (end - p));
                size_t n = comma ? (size_t) (comma - p) : (size_t) (end - p);

                if (n == want && strncmp(p, controller, n) == 0)
                        return true;
                p += n + 1;
        }
        return false;
}

int cg_self_path(const char *self_cgroup, const char *controller, char **ret) {
        for (const char *line = self_cgroup; line && *line; ) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                const char *c1 = memchr(line, ':', len), *c2 = NULL, *path;
                size_t plen;
                char *s;

                if (c1)
                        c2 = memchr(c1 + 1, ':', len - (size_t) (c1 + 1 - line));
                if (!c2 || !self_line_matches(line, c1 + 1, (size_t) (c2 - c1 - 1), controller)) {
                        line = nl ? nl + 1 : NULL;
                        continue;
                }
                path = c2 + 1;
                plen = len - (size_t) (path - line);
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
        return -ENOENT;
}

/* ---- pid lists and killing --------------------------------------------------- */

static int cmp_pid(const void *a, const void *b) {
        pid_t x = *(const pid_t *) a, y = *(const pid_t *) b;
        return x < y ? -1 : x > y;
}

/* Append the pids listed in text; a 0 (another pid namespace's) sets *foreign. */
static int parse_pids(const char *text, pid_t **pids, size_t *n, size_t *cap, bool *foreign) {
        char *end;

        for (const char *p = text; *p; p = end) {
                long v;

                errno = 0;
                v = strtol(p, &end, 10);
                if (end == p) {
                        end = (char *) p + 1;
                        continue;
                }
                if (v == 0)
                        *foreign = true;
                if (errno != 0 || v <= 0 || v > INT32_MAX)
                        continue;
                if (*n == *cap) {
                        size_t nc = *cap ? *cap * 2 : 64;
                        pid_t *np = reallocarray(*pids, nc, sizeof(pid_t));

                        if (!np)
                                return -ENOMEM;
                        *pids = np;
                        *cap = nc;
                }
                (*pids)[(*n)++] = (pid_t) v;
        }
        return 0;
}

int cg_read_pids(const int *fds, size_t n_fds, pid_t **ret, size_t *ret_n, bool *ret_foreign) {
        bool foreign = false;
        _cleanup_free_ pid_t *pids = NULL;
        size_t n = 0, cap = 0;
        int r;

        for (size_t i = 0; i < n_fds; i++) {
                _cleanup_free_ char *text = NULL;

                if (fds[i] < 0)
                        continue;
                r = read_file_at(fds[i], "cgroup.procs", &text);
                if (r < 0)
                        return r;
                r = parse_pids(text, &pids, &n, &cap, &foreign);
                if (r < 0)
                        return r;
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
int cg_kill_and_wait(const int *fds, size_t n_fds, bool use_kill_file, bool wait) {
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
                        r = cg_write_at(fds[0], "cgroup.kill", "1");
                        if (r < 0)
                                return r;
                        if (!wait)
                                return 0;
                }

                r = cg_read_pids(fds, n_fds, &before, &n_before, &foreign);
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
                        r = cg_read_pids(fds, n_fds, &after, &n_after, NULL);
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

/* ---- removing ------------------------------------------------------------------ */

static bool is_dir_entry(int dirfd, const struct dirent *de) {
        struct stat st;

        if (de->d_type != DT_UNKNOWN)
                return de->d_type == DT_DIR;
        return fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISDIR(st.st_mode);
}

static int remove_tree_depth(int parent_fd, const char *name, unsigned depth);

/* remove_tree_depth() on each subdirectory of dirfd that pick() selects (all
 * of them without pick); the first error is returned, the rest still tried. */
static int remove_children(int dirfd, unsigned depth, CgroupManager *m,
                           bool (*pick)(CgroupManager *m, const char *name), unsigned *count) {
        _cleanup_(closedirp) DIR *d = NULL;
        int r, ret = 0;

        d = opendir_at(dirfd);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d)); ) {
                if (de->d_name[0] == '.' || !is_dir_entry(dirfd, de) || (pick && !pick(m, de->d_name)))
                        continue;
                r = remove_tree_depth(dirfd, de->d_name, depth);
                if (r < 0 && ret == 0)
                        ret = r;
                else if (r >= 0 && count)
                        (*count)++;
        }
        return ret;
}

static int remove_tree_depth(int parent_fd, const char *name, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        int r, ret = 0;

        fd = cg_open_dir_at(parent_fd, name);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;

        r = cg_kill_and_wait(&fd, 1, cg_file_exists_at(fd, "cgroup.kill"), true);
        if (r < 0)
                ret = r;
        if (depth < CG_TREE_DEPTH_MAX) {
                r = remove_children(fd, depth + 1, NULL, NULL, NULL);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && ret == 0)
                ret = -errno;
        return ret;
}

int cg_remove_tree_at(int parent_fd, const char *name) {
        return remove_tree_depth(parent_fd, name, 1);
}

int cg_remove_matching(CgroupManager *m, int dirfd, bool (*pick)(CgroupManager *m, const char *name),
                       unsigned *count) {
        return remove_children(dirfd, 1, m, pick, count);
}


void cg_session_name(const CgroupSession *s, char buf[static 16]) {
        (void) snprintf(buf, 16, "s%u", s->index);
}

bool cg_manager_has_sandbox(const CgroupManager *m, const char *name) {
        for (const CgroupSandbox *b = m->sandboxes; b; b = b->next)
                if (strcmp(b->name, name) == 0)
                        return true;
        return false;
}
