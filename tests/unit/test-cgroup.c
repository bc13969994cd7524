/* Unit tests for supervisor/os/cgroup.c and its two backends, cgroup-v1.c and
 * cgroup-v2.c: through the public interface, which reaches each backend
 * through its operations table, and through the tables themselves.
 *
 * v1 and v2 run against fake trees in a temporary directory: the binary is
 * linked with -Wl,--wrap=mkdirat,--wrap=unlinkat, and while a fake tree is
 * active the wrappers give a new directory the interface files the kernel
 * would (and remove them again before rmdir). The real-v1 tests use this
 * machine's /sys/fs/cgroup and skip when that is not possible (not root, no
 * v1 memory hierarchy, or a pure v2 host, where the manager would move the
 * test process around); SBX_TESTS_MUST_WORK=1 turns those skips into failures. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "os/cgroup-internal.h"
#include "fd-util.h"
#include "macro.h"
#include "sbx-limits.h"

/* ---- fake tree -------------------------------------------------------------- */

typedef enum FakeMode {
        FAKE_OFF,
        FAKE_V1,
        FAKE_V2,
} FakeMode;

static FakeMode fake_mode = FAKE_OFF;
static char fake_root[64];

int __real_mkdirat(int dirfd, const char *path, mode_t mode);
int __wrap_mkdirat(int dirfd, const char *path, mode_t mode);
int __real_unlinkat(int dirfd, const char *path, int flags);
int __wrap_unlinkat(int dirfd, const char *path, int flags);

static void put_at(int dirfd, const char *name, const char *content) {
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t) strlen(content));
        close(fd);
}

int __wrap_mkdirat(int dirfd, const char *path, mode_t mode) {
        int r = __real_mkdirat(dirfd, path, mode), fd, saved = errno;

        if (r < 0 || fake_mode == FAKE_OFF)
                return r;
        fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        put_at(fd, "cgroup.procs", "");
        if (fake_mode == FAKE_V2) {
                put_at(fd, "cgroup.subtree_control", "");
                put_at(fd, "cgroup.kill", "");
                put_at(fd, "memory.max", "max\n");
                put_at(fd, "memory.swap.max", "max\n");
                put_at(fd, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
                put_at(fd, "pids.max", "max\n");
                put_at(fd, "pids.events", "max 0\n");
                put_at(fd, "pids.current", "0\n");
                put_at(fd, "cpu.weight", "100\n");
        } else {
                put_at(fd, "memory.limit_in_bytes", "9223372036854771712\n");
                put_at(fd, "memory.memsw.limit_in_bytes", "9223372036854771712\n");
                put_at(fd, "memory.swappiness", "60\n");
                put_at(fd, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
                put_at(fd, "pids.max", "max\n");
                put_at(fd, "pids.events", "max 0\n");
                put_at(fd, "pids.current", "0\n");
                put_at(fd, "cpu.shares", "1024\n");
        }
        close(fd);
        errno = saved;
        return r;
}

int __wrap_unlinkat(int dirfd, const char *path, int flags) {
        if (fake_mode != FAKE_OFF && (flags & AT_REMOVEDIR)) {
                int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                DIR *d;

                if (fd >= 0) {
                        d = fdopendir(fd);
                        assert_non_null(d);
                        for (struct dirent *de; (de = readdir(d)); )
                                if (de->d_type == DT_REG)
                                        (void) unlinkat(fd, de->d_name, 0);
                        closedir(d);
                }
        }
        return __real_unlinkat(dirfd, path, flags);
}

static int rm_rf_cb(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) st;
        (void) ftw;
        return type == FTW_DP ? rmdir(path) : unlink(path);
}

static CgroupManager *sandbox_a_of;
static void fake_begin(FakeMode mode) {
        sandbox_a_of = NULL;
        (void) strcpy(fake_root, "/tmp/test-cgroup-XXXXXX");
        assert_non_null(mkdtemp(fake_root));
        fake_mode = mode;
}

static void fake_end(void) {
        fake_mode = FAKE_OFF;
        assert_int_equal(nftw(fake_root, rm_rf_cb, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* Paths are relative to the fake root. */
static char *fpath(const char *rel) {
        static char buf[4][512];
        static unsigned next;
        char *b = buf[next++ % 4];

        (void) snprintf(b, sizeof(buf[0]), "%s/%s", fake_root, rel);
        return b;
}

static void fput(const char *rel, const char *content) {
        put_at(AT_FDCWD, fpath(rel), content);
}

static void fmkdir(const char *rel) {
        assert_int_equal(mkdir(fpath(rel), 0755), 0);
}

static char *slurp(const char *path) {
        static char buf[4096];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        assert_true(n >= 0);
        buf[n] = '\0';
        return buf;
}

static char *fget(const char *rel) {
        char *s = slurp(fpath(rel));

        assert_non_null(s);
        return s;
}

static bool fexists(const char *rel) {
        return access(fpath(rel), F_OK) == 0;
}

static void assert_fget(const char *rel, const char *want) {
        assert_string_equal(fget(rel), want);
}

/* The cgroup above all sandboxes. */
static const CgroupLimits limits_all = { .memory_bytes = 1ull << 30, .pids_max = 1000, .cpu_weight = 50 };

#define SB_A "sb-a"

/* The sandbox cgroup SB_A of m, made at the first call for m. */
static CgroupSandbox *sandbox_a_cg;
static CgroupSandbox *sandbox_a(CgroupManager *m) {
        static const CgroupLimits l = { .memory_bytes = 256ull << 20, .pids_max = 64, .cpu_weight = 300 };

        if (m != sandbox_a_of) {
                sandbox_a_cg = NULL;
                assert_int_equal(cgroup_sandbox_new(m, SB_A, &l, &sandbox_a_cg), 0);
                sandbox_a_of = m;
        }
        return sandbox_a_cg;
}

static const CgroupLimits limits_a = { .memory_bytes = 64ull << 20, .pids_max = 16, .cpu_weight = 200 };
static const CgroupLimits limits_b = { .memory_bytes = 32ull << 20, .pids_max = 0, .cpu_weight = 0 };

/* ---- v2 ---------------------------------------------------------------------- */

#define OWN "sys.slice/sbxd.service"

static char self_v2[64] = "0::/" OWN "\n";

static void fake_v2_tree(const char *own_procs) {
        fput("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
        fmkdir("sys.slice");
        fmkdir(OWN);
        fput(OWN "/cgroup.controllers", "cpu memory pids\n");
        fput(OWN "/cgroup.subtree_control", "");
        fput(OWN "/cgroup.procs", own_procs);
}

static char *pid_line(pid_t pid) {
        static char buf[32];

        (void) snprintf(buf, sizeof(buf), "%d\n", (int) pid);
        return buf;
}

/* A fake v2 tree with this process alone in <own>, and a manager on it.
 * own_controllers and own_subtree_control replace the files' defaults. */
static CgroupManager *fake_v2_manager(const char *own_controllers, const char *own_subtree_control) {
        CgroupManager *m = NULL;

        fake_begin(FAKE_V2);
        fake_v2_tree(pid_line(getpid()));
        if (own_controllers)
                fput(OWN "/cgroup.controllers", own_controllers);
        if (own_subtree_control)
                fput(OWN "/cgroup.subtree_control", own_subtree_control);
        assert_int_equal(cgroup_manager_new(fake_root, self_v2, "sbxd-1", &limits_all, &m), 0);
        return m;
}

static void test_v2_layout_limits_pool(void **state) {
        CgroupManager *m = fake_v2_manager(NULL, NULL);
        CgroupSession *s = NULL, *s2 = NULL;
        char pid[32];
        uint64_t n;

        (void) state;
        assert_int_equal(cgroup_manager_backend(m), CGROUP_BACKEND_V2);
        assert_string_equal(cgroup_backend_to_string(cgroup_manager_backend(m)), "v2");

        /* Layout: this process moved into supervisor/, controllers enabled
         * for <own>'s children, for the sandboxes and for their sessions;
         * the limits of all sandboxes together on sandboxes/. */
        (void) snprintf(pid, sizeof(pid), "%d", (int) getpid());
        assert_fget(OWN "/supervisor/cgroup.procs", pid);
        assert_non_null(strstr(fget(OWN "/cgroup.subtree_control"), "+memory"));
        assert_non_null(strstr(fget(OWN "/cgroup.subtree_control"), "+pids"));
        assert_non_null(strstr(fget(OWN "/cgroup.subtree_control"), "+cpu"));
        assert_fget(OWN "/sandboxes/cgroup.subtree_control", "+memory +pids +cpu");
        assert_fget(OWN "/sandboxes/memory.max", "1073741824");
        assert_fget(OWN "/sandboxes/memory.swap.max", "0");
        assert_fget(OWN "/sandboxes/pids.max", "1000");
        assert_fget(OWN "/sandboxes/cpu.weight", "50");
        (void) sandbox_a(m);
        assert_fget(OWN "/sandboxes/" SB_A "/cgroup.subtree_control", "+memory +pids +cpu");
        assert_fget(OWN "/sandboxes/" SB_A "/memory.max", "268435456");
        assert_fget(OWN "/sandboxes/" SB_A "/pids.max", "64");
        assert_fget(OWN "/sandboxes/" SB_A "/cpu.weight", "300");
        /* The parent's files are never written. */
        assert_fget("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");

        /* A session with limits. */
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        assert_true(fexists(OWN "/sandboxes/" SB_A "/s0"));
        assert_fget(OWN "/sandboxes/" SB_A "/s0/memory.max", "67108864");
        assert_fget(OWN "/sandboxes/" SB_A "/s0/memory.swap.max", "0");
        assert_fget(OWN "/sandboxes/" SB_A "/s0/pids.max", "16");
        assert_fget(OWN "/sandboxes/" SB_A "/s0/cpu.weight", "200");

        assert_int_equal(cgroup_session_attach(s, 4242), 0);
        assert_fget(OWN "/sandboxes/" SB_A "/s0/cgroup.procs", "4242");
        assert_int_equal(cgroup_session_attach(s, 0), -EINVAL);
        {
                size_t procs = 99;
                assert_int_equal(cgroup_session_processes(s, &procs), 0);
                assert_int_equal(procs, 1);
                fput(OWN "/sandboxes/" SB_A "/s0/cgroup.procs", "4242\n4343\n4242\n");
                assert_int_equal(cgroup_session_processes(s, &procs), 0);
                assert_int_equal(procs, 2);     /* each process once */
                fput(OWN "/sandboxes/" SB_A "/s0/cgroup.procs", "");       /* "it exited" */
                assert_int_equal(cgroup_session_processes(s, &procs), 0);
                assert_int_equal(procs, 0);
        }

        /* Events counted from the session start. */
        assert_int_equal(cgroup_session_oom_kills(s, &n), 0);
        assert_int_equal(n, 0);
        fput(OWN "/sandboxes/" SB_A "/s0/memory.events", "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n");
        fput(OWN "/sandboxes/" SB_A "/s0/pids.events", "max 5\n");
        assert_int_equal(cgroup_session_oom_kills(s, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(cgroup_session_pids_max_hits(s, &n), 0);
        assert_int_equal(n, 5);

        /* Release pools s0; the next session reuses it with new limits and a
         * new baseline. */
        assert_null(cgroup_session_release(s));
        assert_true(fexists(OWN "/sandboxes/" SB_A "/s0"));
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_b, &s), 0);
        assert_false(fexists(OWN "/sandboxes/" SB_A "/s1"));
        assert_fget(OWN "/sandboxes/" SB_A "/s0/memory.max", "33554432");
        assert_fget(OWN "/sandboxes/" SB_A "/s0/pids.max", "max");
        assert_fget(OWN "/sandboxes/" SB_A "/s0/cpu.weight", "100");
        assert_int_equal(cgroup_session_oom_kills(s, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(cgroup_session_pids_max_hits(s, &n), 0);
        assert_int_equal(n, 0);
        fput(OWN "/sandboxes/" SB_A "/s0/memory.events", "oom_kill 3\n");
        assert_int_equal(cgroup_session_oom_kills(s, &n), 0);
        assert_int_equal(n, 1);

        /* A second live session gets its own cgroup; kill uses cgroup.kill. */
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s2), 0);
        assert_true(fexists(OWN "/sandboxes/" SB_A "/s1"));
        assert_int_equal(cgroup_session_kill(s2), 0);
        assert_fget(OWN "/sandboxes/" SB_A "/s1/cgroup.kill", "1");

        /* Stale cleanup only touches sandboxes/ entries we do not track (with
         * what is below them), and the sessions/ of the layout before. */
        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sandboxes/sb-z"), 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sandboxes/sb-z/s9"), 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sessions"), 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sessions/s3"), 0755), 0);
        assert_int_equal(cgroup_manager_cleanup_stale(m), 2);
        assert_false(fexists(OWN "/sandboxes/sb-z"));
        assert_false(fexists(OWN "/sessions"));
        assert_true(fexists(OWN "/sandboxes/" SB_A "/s0"));
        assert_true(fexists(OWN "/sandboxes/" SB_A "/s1"));

        /* Free removes everything it made and moves us back into <own>. */
        assert_null(cgroup_session_release(s2));
        assert_null(cgroup_manager_free(m));
        assert_false(fexists(OWN "/sandboxes"));
        assert_false(fexists(OWN "/supervisor"));
        assert_fget(OWN "/cgroup.procs", pid);
        assert_fget(OWN "/cgroup.subtree_control", "-memory -pids -cpu");
        assert_null(cgroup_manager_free(NULL));
        assert_null(cgroup_session_release(NULL));
        fake_end();
}

static void test_v2_busy_when_not_alone(void **state) {
        CgroupManager *m = NULL;
        char procs[64];

        (void) state;
        fake_begin(FAKE_V2);
        (void) snprintf(procs, sizeof(procs), "1\n%d\n", (int) getpid());
        fake_v2_tree(procs);
        assert_int_equal(cgroup_manager_new(fake_root, self_v2, "sbxd-1", &limits_all, &m), -EBUSY);
        assert_null(m);
        assert_false(fexists(OWN "/supervisor"));
        assert_false(fexists(OWN "/sandboxes"));
        assert_fget(OWN "/cgroup.subtree_control", "");
        /* A process from another pid namespace is listed as 0. */
        (void) snprintf(procs, sizeof(procs), "0\n%d\n", (int) getpid());
        fput(OWN "/cgroup.procs", procs);
        assert_int_equal(cgroup_manager_new(fake_root, self_v2, "sbxd-1", &limits_all, &m), -EBUSY);
        assert_false(fexists(OWN "/supervisor"));
        fake_end();
}

static void test_v2_missing_controller(void **state) {
        CgroupManager *m = NULL;

        (void) state;
        fake_begin(FAKE_V2);
        fake_v2_tree(pid_line(getpid()));
        /* The parent did not delegate pids: no limits possible, refuse. */
        fput(OWN "/cgroup.controllers", "cpu memory\n");
        assert_int_equal(cgroup_manager_new(fake_root, self_v2, "sbxd-1", &limits_all, &m), -EOPNOTSUPP);
        assert_false(fexists(OWN "/supervisor"));
        fake_end();
}

/* The parent delegated no cpu: sandboxes and sessions get memory and pids
 * only, and cpu.weight is never written. */
static void test_v2_without_cpu(void **state) {
        CgroupManager *m = fake_v2_manager("memory pids\n", NULL);
        CgroupSession *s = NULL;

        (void) state;
        assert_fget(OWN "/cgroup.subtree_control", "+memory +pids");
        assert_fget(OWN "/sandboxes/cgroup.subtree_control", "+memory +pids");
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        assert_fget(OWN "/sandboxes/" SB_A "/cgroup.subtree_control", "+memory +pids");
        assert_fget(OWN "/sandboxes/" SB_A "/cpu.weight", "100\n");
        assert_fget(OWN "/sandboxes/cpu.weight", "100\n");
        assert_fget(OWN "/sandboxes/" SB_A "/s0/pids.max", "16");
        assert_fget(OWN "/sandboxes/" SB_A "/s0/cpu.weight", "100\n");
        assert_null(cgroup_session_release(s));
        assert_null(cgroup_manager_free(m));
        assert_fget(OWN "/cgroup.subtree_control", "-memory -pids");
        fake_end();
}

/* Controllers that were on in <own> already stay on when sbxd goes: only what
 * it enabled itself is turned off again. */
static void test_v2_controllers_enabled_before(void **state) {
        CgroupManager *m = fake_v2_manager(NULL, "cpu memory pids\n");

        (void) state;
        assert_fget(OWN "/cgroup.subtree_control", "cpu memory pids\n");
        assert_fget(OWN "/sandboxes/cgroup.subtree_control", "+memory +pids +cpu");
        assert_null(cgroup_manager_free(m));
        assert_fget(OWN "/cgroup.subtree_control", "cpu memory pids\n");
        assert_false(fexists(OWN "/supervisor"));
        fake_end();
}

/* Stale sandbox cgroups in sandboxes/: untracked ones go with what is below
 * them, tracked ones stay; a sandbox directory that exists already is
 * adopted and emptied; a sandbox's pooled session cgroups are its own. */
static void test_v2_sandboxes(void **state) {
        CgroupManager *m = fake_v2_manager(NULL, NULL);
        CgroupSandbox *b = NULL, *dup = NULL;
        CgroupSession *s0 = NULL, *s1 = NULL;

        (void) state;
        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sandboxes/sb-b"), 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sandboxes/sb-b/s7"), 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sandboxes/sb-b/s7/x"), 0755), 0);
        assert_int_equal(cgroup_sandbox_new(m, "sb-b", &limits_a, &b), 0);
        assert_true(fexists(OWN "/sandboxes/sb-b"));
        assert_false(fexists(OWN "/sandboxes/sb-b/s7"));
        assert_int_equal(cgroup_sandbox_new(m, "sb-b", &limits_a, &dup), -EINVAL);
        assert_int_equal(cgroup_sandbox_new(m, "../x", &limits_a, &dup), -EINVAL);
        assert_int_equal(cgroup_sandbox_new(m, "", &limits_a, &dup), -EINVAL);
        assert_null(dup);

        /* A free cgroup of sb-b is not handed to sb-a. */
        assert_int_equal(cgroup_session_new(b, &limits_a, &s0), 0);
        assert_true(fexists(OWN "/sandboxes/sb-b/s0"));
        assert_null(cgroup_session_release(s0));
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s1), 0);
        assert_true(fexists(OWN "/sandboxes/" SB_A "/s1"));
        assert_int_equal(cgroup_session_new(b, &limits_b, &s0), 0);
        assert_fget(OWN "/sandboxes/sb-b/s0/memory.max", "33554432");

        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sandboxes/x"), 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, fpath(OWN "/sandboxes/x/y"), 0755), 0);
        assert_int_equal(cgroup_manager_cleanup_stale(m), 1);
        assert_false(fexists(OWN "/sandboxes/x"));
        assert_true(fexists(OWN "/sandboxes/sb-b/s0"));
        assert_true(fexists(OWN "/sandboxes/" SB_A "/s1"));
        assert_int_equal(cgroup_manager_cleanup_stale(m), 0);

        /* A sandbox goes with its pooled session cgroups; the manager frees
         * what is left. */
        assert_null(cgroup_session_release(s0));
        assert_null(cgroup_sandbox_free(b));
        assert_false(fexists(OWN "/sandboxes/sb-b"));
        assert_null(cgroup_sandbox_free(NULL));
        assert_null(cgroup_session_release(s1));
        assert_null(cgroup_manager_free(m));
        assert_false(fexists(OWN "/sandboxes"));
        fake_end();
}

/* A fork refused by the pids limit of the sandbox or of all sandboxes: since
 * Linux 6.12 only that cgroup's pids.events.local counts it; each session
 * below sees it. */
static void test_v2_pids_hits_of_sandbox(void **state) {
        CgroupManager *m = fake_v2_manager(NULL, NULL);
        CgroupSession *s = NULL;
        uint64_t n = 99;

        (void) state;
        (void) sandbox_a(m);
        fput(OWN "/sandboxes/" SB_A "/pids.events.local", "max 2\n");
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        assert_int_equal(cgroup_session_pids_max_hits(s, &n), 0);
        assert_int_equal(n, 0);
        fput(OWN "/sandboxes/" SB_A "/pids.events.local", "max 5\n");
        assert_int_equal(cgroup_session_pids_max_hits(s, &n), 0);
        assert_int_equal(n, 3);
        fput(OWN "/sandboxes/" SB_A "/s0/pids.events", "max 1\n");
        assert_int_equal(cgroup_session_pids_max_hits(s, &n), 0);
        assert_int_equal(n, 4);
        fput(OWN "/sandboxes/pids.events.local", "max 2\n");     /* the limit of all sandboxes */
        assert_int_equal(cgroup_session_pids_max_hits(s, &n), 0);
        assert_int_equal(n, 6);
        assert_null(cgroup_session_release(s));
        assert_null(cgroup_manager_free(m));
        fake_end();
}

/* A move is never refused by a pids limit, so attach refuses one into a full
 * sandbox (or a full cgroup of all sandboxes), and leaves the limits as they
 * were either way. */
static void test_v2_attach_below_pids_limits(void **state) {
        CgroupManager *m = fake_v2_manager(NULL, NULL);
        CgroupSession *s = NULL;
        uint64_t n = 0;

        (void) state;
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        fput(OWN "/sandboxes/" SB_A "/pids.current", "64\n");
        assert_int_equal(cgroup_sandbox_processes(sandbox_a(m), &n), 0);
        assert_int_equal(n, 64);
        assert_int_equal(cgroup_session_attach(s, 4242), -EAGAIN);
        assert_fget(OWN "/sandboxes/" SB_A "/pids.max", "64");
        assert_fget(OWN "/sandboxes/pids.max", "1000");
        assert_fget(OWN "/sandboxes/" SB_A "/s0/cgroup.procs", "");
        fput(OWN "/sandboxes/" SB_A "/pids.current", "63\n");
        fput(OWN "/sandboxes/pids.current", "1000\n");
        assert_int_equal(cgroup_session_attach(s, 4242), -EAGAIN);
        assert_fget(OWN "/sandboxes/pids.max", "1000");
        fput(OWN "/sandboxes/pids.current", "999\n");
        assert_int_equal(cgroup_session_attach(s, 4242), 0);
        assert_fget(OWN "/sandboxes/" SB_A "/s0/cgroup.procs", "4242");
        assert_fget(OWN "/sandboxes/" SB_A "/pids.max", "64");
        assert_fget(OWN "/sandboxes/pids.max", "1000");
        fput(OWN "/sandboxes/" SB_A "/s0/cgroup.procs", "");
        assert_null(cgroup_session_release(s));
        assert_null(cgroup_manager_free(m));
        fake_end();
}

/* At most SBX_MAX_LIVE_SESSIONS session cgroups per manager: at the cap a
 * free one of another sandbox goes to make room, and with none free the
 * answer is -ENOSPC. */
static void test_v2_pool_cap(void **state) {
        CgroupManager *m = fake_v2_manager(NULL, NULL);
        static CgroupSession *s[SBX_MAX_LIVE_SESSIONS];
        CgroupSandbox *b = NULL;
        CgroupSession *x = NULL;

        (void) state;
        assert_int_equal(cgroup_sandbox_new(m, "sb-b", &limits_a, &b), 0);
        for (unsigned i = 0; i < SBX_MAX_LIVE_SESSIONS; i++)
                assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s[i]), 0);
        assert_int_equal(cgroup_session_new(b, &limits_a, &x), -ENOSPC);
        assert_null(cgroup_session_release(s[7]));
        assert_true(fexists(OWN "/sandboxes/" SB_A "/s7"));
        assert_int_equal(cgroup_session_new(b, &limits_a, &x), 0);
        assert_false(fexists(OWN "/sandboxes/" SB_A "/s7"));
        assert_true(fexists(OWN "/sandboxes/sb-b/s512"));
        assert_null(cgroup_manager_free(m));
        assert_false(fexists(OWN "/sandboxes"));
        fake_end();
}

/* Until the victim has exited, then empty its fake cgroup.procs, as the
 * kernel would once it is gone. Runs in a child of the test. */
static _noreturn_ void empty_procs_when_dead(pid_t victim, const char *procs) {
        struct pollfd p = { .fd = pidfd_open(victim, 0), .events = POLLIN };
        int fd;

        if (p.fd < 0 || poll(&p, 1, 10000) != 1)
                _exit(2);
        fd = open(procs, O_WRONLY | O_TRUNC | O_CLOEXEC);
        _exit(fd < 0 ? 3 : 0);
}

/* A kernel without cgroup.kill (before 5.14): kill signals the listed
 * processes through pidfds and waits until cgroup.procs is empty, and never
 * creates a cgroup.kill. */
static void test_v2_kill_without_kill_file(void **state) {
        CgroupManager *m = fake_v2_manager(NULL, NULL);
        CgroupSession *s = NULL;
        pid_t victim, helper, got;
        int status = 0, helper_status, r;

        (void) state;
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        assert_int_equal(unlink(fpath(OWN "/sandboxes/" SB_A "/s0/cgroup.kill")), 0);

        victim = fork();
        assert_true(victim >= 0);
        if (victim == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                for (;;)
                        pause();
        }
        fput(OWN "/sandboxes/" SB_A "/s0/cgroup.procs", pid_line(victim));
        helper = fork();
        assert_true(helper >= 0);
        if (helper == 0)
                empty_procs_when_dead(victim, fpath(OWN "/sandboxes/" SB_A "/s0/cgroup.procs"));

        r = cgroup_session_kill(s);
        /* Dead already if the kill worked; else not left behind by a failure. */
        got = waitpid(victim, &status, WNOHANG);
        if (got == 0) {
                (void) kill(victim, SIGKILL);
                (void) waitpid(victim, NULL, 0);
        }
        assert_int_equal(waitpid(helper, &helper_status, 0), helper);
        assert_int_equal(r, 0);
        assert_int_equal(got, victim);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGKILL);
        assert_true(WIFEXITED(helper_status));
        assert_int_equal(WEXITSTATUS(helper_status), 0);
        assert_false(fexists(OWN "/sandboxes/" SB_A "/s0/cgroup.kill"));

        assert_null(cgroup_session_release(s));
        assert_null(cgroup_manager_free(m));
        assert_false(fexists(OWN "/sessions"));
        fake_end();
}

/* ---- detection ---------------------------------------------------------------- */

/* Each backend's table is complete, and each names its own backend. */
static void test_ops_tables(void **state) {
        const CgroupOps *const ops[] = { &cgroup_v1_ops, &cgroup_v2_ops };

        (void) state;
        assert_int_equal(cgroup_v1_ops.backend, CGROUP_BACKEND_V1);
        assert_int_equal(cgroup_v2_ops.backend, CGROUP_BACKEND_V2);
        for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
                assert_non_null(cgroup_backend_to_string(ops[i]->backend));
                assert_non_null(ops[i]->detect);
                assert_non_null(ops[i]->setup);
                assert_non_null(ops[i]->teardown);
                assert_non_null(ops[i]->cleanup_stale);
                assert_non_null(ops[i]->node_make);
                assert_non_null(ops[i]->node_remove);
                assert_non_null(ops[i]->set_limits);
                assert_non_null(ops[i]->attach);
                assert_non_null(ops[i]->kill);
                assert_non_null(ops[i]->read_oom_kills);
                assert_non_null(ops[i]->read_pids_max_hits);
        }
}

static bool detect_at(const CgroupOps *ops) {
        int fd = open(fake_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        bool r;

        assert_true(fd >= 0);
        r = ops->detect(fd);
        close(fd);
        return r;
}


static void test_detect_none(void **state) {
        CgroupManager *m = NULL;

        (void) state;
        fake_begin(FAKE_V2);
        assert_int_equal(cgroup_manager_new(fake_root, "0::/\n", "sbxd-1", &limits_all, &m), -EOPNOTSUPP);
        /* cgroup2 without memory and pids (this machine's "unified") is not v2. */
        fput("cgroup.controllers", "hugetlb\n");
        assert_int_equal(cgroup_manager_new(fake_root, "0::/\n", "sbxd-1", &limits_all, &m), -EOPNOTSUPP);
        /* memory alone is not a v1 layout either. */
        fmkdir("memory");
        fput("memory/cgroup.procs", "");
        assert_int_equal(cgroup_manager_new(fake_root, "4:memory:/\n0::/\n", "sbxd-1", &limits_all, &m),
                         -EOPNOTSUPP);
        assert_null(m);
        assert_int_equal(cgroup_manager_new(fake_root, "0::/\n", "../x", &limits_all, &m), -EINVAL);
        assert_int_equal(cgroup_manager_new(NULL, "0::/\n", "sbxd-1", &limits_all, &m), -EINVAL);
        fake_end();
}

/* ---- v1 fake -------------------------------------------------------------------- */

static const char self_v1[] =
        "9:name=systemd:/\n"
        "8:pids:/\n"
        "4:memory:/a/b\n"
        "2:cpu,cpuacct:/\n"
        "0::/\n";

static void fake_v1_tree(void) {
        fmkdir("memory");
        fput("memory/cgroup.procs", "1\n");
        fmkdir("memory/a");
        fmkdir("memory/a/b");
        fput("memory/a/b/cgroup.procs", "");
        fmkdir("pids");
        fput("pids/cgroup.procs", "1\n");
        fmkdir("cpu");
        fput("cpu/cgroup.procs", "1\n");
}

static pid_t dead_pid(void) {
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0)
                _exit(0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        return pid;
}

static void test_v1_fake(void **state) {
        CgroupManager *m = NULL;
        CgroupSession *s = NULL;
        char stale[128], stale_child[160], alive[128];
        uint64_t n;

        (void) state;
        fake_begin(FAKE_V1);
        fake_v1_tree();

        assert_int_equal(cgroup_manager_new(fake_root, self_v1, "sbxd-test", &limits_all, &m), 0);
        assert_int_equal(cgroup_manager_backend(m), CGROUP_BACKEND_V1);
        assert_string_equal(cgroup_backend_to_string(CGROUP_BACKEND_V1), "v1");
        assert_true(fexists("memory/a/b/sbxd-test"));
        assert_true(fexists("pids/sbxd-test"));
        assert_true(fexists("cpu/sbxd-test"));
        /* The instance holds all sandboxes, with their share of the host. */
        assert_fget("memory/a/b/sbxd-test/memory.limit_in_bytes", "1073741824");
        assert_fget("pids/sbxd-test/pids.max", "1000");
        assert_fget("cpu/sbxd-test/cpu.shares", "512");

        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        assert_fget("memory/a/b/sbxd-test/" SB_A "/memory.limit_in_bytes", "268435456");
        assert_fget("memory/a/b/sbxd-test/" SB_A "/memory.memsw.limit_in_bytes", "268435456");
        assert_fget("pids/sbxd-test/" SB_A "/pids.max", "64");
        assert_fget("cpu/sbxd-test/" SB_A "/cpu.shares", "3072");
        assert_fget("memory/a/b/sbxd-test/" SB_A "/s0/memory.limit_in_bytes", "67108864");
        assert_fget("memory/a/b/sbxd-test/" SB_A "/s0/memory.memsw.limit_in_bytes", "67108864");
        assert_fget("memory/a/b/sbxd-test/" SB_A "/s0/memory.swappiness", "0");
        assert_fget("pids/sbxd-test/" SB_A "/s0/pids.max", "16");
        assert_fget("cpu/sbxd-test/" SB_A "/s0/cpu.shares", "2048");

        assert_int_equal(cgroup_session_attach(s, 4242), 0);
        assert_fget("memory/a/b/sbxd-test/" SB_A "/s0/cgroup.procs", "4242");
        assert_fget("pids/sbxd-test/" SB_A "/s0/cgroup.procs", "4242");
        assert_fget("cpu/sbxd-test/" SB_A "/s0/cgroup.procs", "4242");
        fput("memory/a/b/sbxd-test/" SB_A "/s0/cgroup.procs", "");
        fput("pids/sbxd-test/" SB_A "/s0/cgroup.procs", "");
        fput("cpu/sbxd-test/" SB_A "/s0/cgroup.procs", "");

        fput("memory/a/b/sbxd-test/" SB_A "/s0/memory.oom_control",
             "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n");
        fput("pids/sbxd-test/" SB_A "/s0/pids.events", "max 3\n");
        assert_int_equal(cgroup_session_oom_kills(s, &n), 0);
        assert_int_equal(n, 4);
        assert_int_equal(cgroup_session_pids_max_hits(s, &n), 0);
        assert_int_equal(n, 3);

        /* Reuse rewrites the limits: unlimited is -1/max, weight 0 the default. */
        assert_null(cgroup_session_release(s));
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_b, &s), 0);
        assert_false(fexists("pids/sbxd-test/" SB_A "/s1"));
        assert_fget("memory/a/b/sbxd-test/" SB_A "/s0/memory.limit_in_bytes", "33554432");
        assert_fget("pids/sbxd-test/" SB_A "/s0/pids.max", "max");
        assert_fget("cpu/sbxd-test/" SB_A "/s0/cpu.shares", "1024");
        assert_int_equal(cgroup_session_oom_kills(s, &n), 0);
        assert_int_equal(n, 0);
        assert_null(cgroup_session_release(s));
        assert_int_equal(cgroup_session_new(sandbox_a(m), &(CgroupLimits) { .cpu_weight = 10000 }, &s), 0);
        assert_fget("memory/a/b/sbxd-test/" SB_A "/s0/memory.limit_in_bytes", "-1");
        assert_fget("cpu/sbxd-test/" SB_A "/s0/cpu.shares", "102400");

        /* Stale instances: a dead supervisor's tree goes, a live one and
         * foreign directories stay. */
        (void) snprintf(stale, sizeof(stale), "%s/pids/sbxd-%d", fake_root, (int) dead_pid());
        (void) snprintf(stale_child, sizeof(stale_child), "%s/s0", stale);
        (void) snprintf(alive, sizeof(alive), "%s/pids/sbxd-1", fake_root);
        assert_int_equal(mkdirat(AT_FDCWD, stale, 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, stale_child, 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, alive, 0755), 0);
        assert_int_equal(mkdirat(AT_FDCWD, fpath("pids/other"), 0755), 0);
        assert_int_equal(cgroup_manager_cleanup_stale(m), 1);
        assert_int_equal(access(stale, F_OK), -1);
        assert_int_equal(access(alive, F_OK), 0);
        assert_true(fexists("pids/other"));
        assert_true(fexists("pids/sbxd-test/" SB_A "/s0"));
        assert_int_equal(unlinkat(AT_FDCWD, alive, AT_REMOVEDIR), 0);
        assert_int_equal(unlinkat(AT_FDCWD, fpath("pids/other"), AT_REMOVEDIR), 0);

        assert_null(cgroup_manager_free(m));
        assert_false(fexists("memory/a/b/sbxd-test"));
        assert_false(fexists("pids/sbxd-test"));
        assert_false(fexists("cpu/sbxd-test"));
        assert_true(fexists("memory/a/b"));
        fake_end();
}

/* A cgroup that cannot be emptied (a listed pid that never goes away) is
 * given up on after ~2 s and not handed out again. */
static void test_v1_fake_stuck_not_reused(void **state) {
        CgroupManager *m = NULL;
        CgroupSession *s = NULL;

        (void) state;
        fake_begin(FAKE_V1);
        fake_v1_tree();
        assert_int_equal(cgroup_manager_new(fake_root, self_v1, "sbxd-test", &limits_all, &m), 0);
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        fput("pids/sbxd-test/" SB_A "/s0/cgroup.procs", "999999999\n");
        assert_null(cgroup_session_release(s));         /* gives up: -EBUSY inside */
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        assert_true(fexists("pids/sbxd-test/" SB_A "/s1"));
        fput("pids/sbxd-test/" SB_A "/s0/cgroup.procs", "");
        assert_null(cgroup_manager_free(m));
        assert_false(fexists("pids/sbxd-test"));
        assert_false(fexists("memory/a/b/sbxd-test"));
        fake_end();
}

static void test_v1_fake_without_cpu(void **state) {
        CgroupManager *m = NULL;
        CgroupSession *s = NULL;

        (void) state;
        fake_begin(FAKE_V1);
        fake_v1_tree();
        assert_int_equal(nftw(fpath("cpu"), rm_rf_cb, 4, FTW_DEPTH | FTW_PHYS), 0);
        assert_int_equal(cgroup_manager_new(fake_root, self_v1, "sbxd-test", &limits_all, &m), 0);
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        assert_fget("pids/sbxd-test/" SB_A "/s0/pids.max", "16");
        assert_null(cgroup_manager_free(m));
        assert_false(fexists("pids/sbxd-test"));
        fake_end();
}

/* ---- detection, backend by backend ------------------------------------------------ */

static void test_detect_each_backend(void **state) {
        CgroupManager *m = NULL;

        (void) state;
        fake_begin(FAKE_V1);
        fake_v1_tree();
        assert_true(detect_at(&cgroup_v1_ops));
        assert_false(detect_at(&cgroup_v2_ops));
        fake_end();

        fake_begin(FAKE_V2);
        fake_v2_tree(pid_line(getpid()));
        assert_true(detect_at(&cgroup_v2_ops));
        assert_false(detect_at(&cgroup_v1_ops));
        /* A v2 root whose cgroups are named memory and pids looks like v1
         * too: v2 is tried first. */
        fmkdir("memory");
        fput("memory/cgroup.procs", "");
        fmkdir("pids");
        fput("pids/cgroup.procs", "");
        assert_true(detect_at(&cgroup_v1_ops));
        assert_int_equal(cgroup_manager_new(fake_root, self_v2, "sbxd-1", &limits_all, &m), 0);
        assert_int_equal(cgroup_manager_backend(m), CGROUP_BACKEND_V2);
        assert_null(cgroup_manager_free(m));
        fake_end();
}

/* ---- v1 for real ------------------------------------------------------------------ */

#define REAL_ROOT "/sys/fs/cgroup"

static bool must_work(void) {
        const char *e = getenv("SBX_TESTS_MUST_WORK");
        return e && strcmp(e, "1") == 0;
}

static bool real_v1_usable(void) {
        char *c;

        if (geteuid() != 0 || access(REAL_ROOT "/memory/cgroup.procs", F_OK) < 0 ||
            access(REAL_ROOT "/pids/cgroup.procs", F_OK) < 0)
                return false;
        /* A v2 root would make the manager move this process. */
        c = slurp(REAL_ROOT "/cgroup.controllers");
        return !c || !strstr(c, "memory");
}

#define REQUIRE_REAL_V1()                                                          \
        do {                                                                      \
                if (!real_v1_usable()) {                                          \
                        if (must_work())                                          \
                                fail_msg("real cgroup v1 unavailable");           \
                        skip();                                                   \
                }                                                                 \
        } while (0)

static char self_real[4096];
static char instance_real[64];

static void real_setup(void) {
        char *c = slurp("/proc/self/cgroup");

        assert_non_null(c);
        (void) strcpy(self_real, c);
        (void) snprintf(instance_real, sizeof(instance_real), "sbxd-test-%d", (int) getpid());
}

/* <root>/<ctrl><own>/<instance>/<rel>, from our own path. */
static void real_path(const char *ctrl, const char *rel, char *buf, size_t size) {
        char key[32];
        const char *p, *nl;
        int len;

        (void) snprintf(key, sizeof(key), ":%s:", ctrl);
        p = strstr(self_real, key);
        assert_non_null(p);
        p += strlen(key);
        nl = strchr(p, '\n');
        assert_non_null(nl);
        len = (int) (nl - p);
        if (len == 1)           /* "/" */
                len = 0;
        (void) snprintf(buf, size, "%s/%s%.*s/%s/%s", REAL_ROOT, ctrl, len, p, instance_real, rel);
}

static char *real_get(const char *ctrl, const char *rel) {
        char path[1024];

        real_path(ctrl, rel, path, sizeof(path));
        return slurp(path);
}

/* A file of session cgroup s<idx> of sandbox SB_A. */
static char *real_read(const char *ctrl, unsigned idx, const char *file) {
        char rel[128];

        (void) snprintf(rel, sizeof(rel), SB_A "/s%u/%s", idx, file);
        return real_get(ctrl, rel);
}

static bool found_instance;
static int find_instance_cb(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) st;
        if (type == FTW_D && strcmp(path + ftw->base, instance_real) == 0)
                found_instance = true;
        return 0;
}

static void assert_no_instance_left(void) {
        found_instance = false;
        assert_int_equal(nftw(REAL_ROOT, find_instance_cb, 32, FTW_PHYS), 0);
        assert_false(found_instance);
}

/* Child: attach itself, report, then do what is asked. */
static pid_t spawn_in(CgroupSession *s, void (*body)(void)) {
        int p[2];
        char c = 0;
        pid_t pid;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                c = cgroup_session_attach(s, getpid()) < 0 ? 'E' : 'A';
                if (write(p[1], &c, 1) != 1)
                        _exit(5);
                if (c == 'A')
                        body();
                _exit(3);
        }
        close(p[1]);
        assert_int_equal(read(p[0], &c, 1), 1);
        close(p[0]);
        assert_int_equal(c, 'A');
        return pid;
}

static void body_sleep(void) {
        for (;;)
                pause();
}

static void body_fork_sleepers(void) {
        for (int i = 0; i < 12; i++) {
                pid_t pid = fork();

                if (pid == 0)
                        body_sleep();
        }
        body_sleep();
}

static void body_eat_memory(void) {
        size_t size = 200u << 20;
        char *p = malloc(size);

        if (!p)
                _exit(4);
        for (size_t i = 0; i < size; i += 4096)
                p[i] = 1;
        _exit(0);
}

/* A manager on the real hierarchy, with an instance name of this test's own. */
static CgroupManager *real_manager(void) {
        CgroupManager *m = NULL;

        real_setup();
        sandbox_a_of = NULL;
        assert_int_equal(cgroup_manager_new(REAL_ROOT, self_real, instance_real, &limits_all, &m), 0);
        assert_int_equal(cgroup_manager_backend(m), CGROUP_BACKEND_V1);
        return m;
}

/* Reap child, which must have died of SIGKILL. */
static void assert_reaped_killed(pid_t child) {
        int status;

        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGKILL);
}

static void test_v1_real_kill(void **state) {
        CgroupManager *m = NULL;
        CgroupSession *s = NULL;
        char want[32], *v, *cg;
        pid_t child;

        (void) state;
        REQUIRE_REAL_V1();
        m = real_manager();
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);

        child = spawn_in(s, body_sleep);
        v = real_read("memory", 0, "memory.limit_in_bytes");
        assert_non_null(v);
        assert_string_equal(v, "67108864\n");
        v = real_read("pids", 0, "pids.max");
        assert_non_null(v);
        assert_string_equal(v, "16\n");
        v = real_read("cpu", 0, "cpu.shares");
        if (v)
                assert_string_equal(v, "2048\n");
        v = real_read("pids", 0, "cgroup.procs");
        assert_non_null(v);
        (void) snprintf(want, sizeof(want), "%d\n", (int) child);
        assert_string_equal(v, want);
        (void) snprintf(want, sizeof(want), "/proc/%d/cgroup", (int) child);
        cg = slurp(want);
        assert_non_null(cg);
        assert_non_null(strstr(cg, instance_real));

        assert_int_equal(cgroup_session_kill(s), 0);
        assert_reaped_killed(child);

        assert_null(cgroup_session_release(s));
        assert_null(cgroup_manager_free(m));
        assert_no_instance_left();
}

static void test_v1_real_pids_limit_and_release(void **state) {
        static const CgroupLimits l = { .memory_bytes = 32ull << 20, .pids_max = 4 };
        CgroupManager *m = NULL;
        CgroupSession *s = NULL;
        uint64_t hits = 0;
        pid_t child;

        (void) state;
        REQUIRE_REAL_V1();
        m = real_manager();
        assert_int_equal(cgroup_session_new(sandbox_a(m), &l, &s), 0);
        child = spawn_in(s, body_fork_sleepers);
        /* Wait for the forks to hit the limit. */
        for (int i = 0; i < 2000 && hits == 0; i++) {
                assert_int_equal(cgroup_session_pids_max_hits(s, &hits), 0);
                if (hits == 0)
                        usleep(1000);
        }
        assert_true(hits >= 1);

        /* Release kills all of them (the grandchildren get reparented, but
         * stay in the cgroup) and waits until it is empty. */
        assert_null(cgroup_session_release(s));
        assert_reaped_killed(child);
        assert_string_equal(real_read("pids", 0, "cgroup.procs"), "");

        /* Reused with a new baseline, and limits raised (memsw before the
         * limit), removed, and lowered again (limit before memsw). */
        assert_int_equal(cgroup_session_new(sandbox_a(m), &limits_a, &s), 0);
        assert_int_equal(cgroup_session_pids_max_hits(s, &hits), 0);
        assert_int_equal(hits, 0);
        assert_string_equal(real_read("pids", 0, "pids.max"), "16\n");
        assert_string_equal(real_read("memory", 0, "memory.limit_in_bytes"), "67108864\n");
        assert_null(real_read("pids", 1, "pids.max"));
        assert_null(cgroup_session_release(s));
        assert_int_equal(cgroup_session_new(sandbox_a(m), &(CgroupLimits) {}, &s), 0);
        assert_string_equal(real_read("pids", 0, "pids.max"), "max\n");
        assert_string_not_equal(real_read("memory", 0, "memory.limit_in_bytes"), "67108864\n");
        assert_null(cgroup_session_release(s));
        assert_int_equal(cgroup_session_new(sandbox_a(m), &l, &s), 0);
        assert_string_equal(real_read("memory", 0, "memory.limit_in_bytes"), "33554432\n");
        if (real_read("memory", 0, "memory.memsw.limit_in_bytes"))
                assert_string_equal(real_read("memory", 0, "memory.memsw.limit_in_bytes"),
                                    "33554432\n");
        assert_null(cgroup_session_release(s));

        assert_int_equal(cgroup_manager_cleanup_stale(m), 0);
        assert_null(cgroup_manager_free(m));
        assert_no_instance_left();
}

static void test_v1_real_oom(void **state) {
        static const CgroupLimits l = { .memory_bytes = 32ull << 20, .pids_max = 16 };
        CgroupManager *m = NULL;
        CgroupSession *s = NULL;
        uint64_t kills = 0;
        pid_t child;

        (void) state;
        REQUIRE_REAL_V1();
        m = real_manager();
        assert_int_equal(cgroup_session_new(sandbox_a(m), &l, &s), 0);
        child = spawn_in(s, body_eat_memory);
        assert_reaped_killed(child);
        assert_int_equal(cgroup_session_oom_kills(s, &kills), 0);
        assert_true(kills >= 1);

        assert_null(cgroup_session_release(s));
        assert_null(cgroup_manager_free(m));
        assert_no_instance_left();
}

/* A sandbox with its own cgroup, on the real hierarchy. */
static CgroupSandbox *real_sandbox(CgroupManager *m, const CgroupLimits *l) {
        CgroupSandbox *b = NULL;

        assert_int_equal(cgroup_sandbox_new(m, SB_A, l, &b), 0);
        sandbox_a_of = m;
        sandbox_a_cg = b;
        return b;
}

/* A manager on the real hierarchy, sandbox SB_A of it, two sessions of that. */
static CgroupManager *real_two_sessions(const CgroupLimits *sandbox, const CgroupLimits *session, CgroupSession **s0,
                                        CgroupSession **s1) {
        CgroupManager *m = real_manager();
        CgroupSandbox *b = real_sandbox(m, sandbox);

        assert_int_equal(cgroup_session_new(b, session, s0), 0);
        assert_int_equal(cgroup_session_new(b, session, s1), 0);
        return m;
}

static uint64_t real_u64(const char *ctrl, const char *rel) {
        char *v = real_get(ctrl, rel);
        uint64_t n = 0;

        assert_non_null(v);
        v[strcspn(v, "\n")] = '\0';
        assert_int_equal(parse_u64(v, &n), 0);
        return n;
}

static void body_fork_sleepers_slowly(void) {
        for (int i = 0; i < 12; i++) {
                pid_t pid = fork();

                if (pid == 0)
                        body_sleep();
                usleep(2000);
        }
        body_sleep();
}

/* The sandbox's pids limit holds for its sessions together, though each
 * session's own limit is larger; the session refused a fork counts the hit. */
static void test_v1_real_sandbox_pids(void **state) {
        static const CgroupLimits sandbox = { .memory_bytes = 256ull << 20, .pids_max = 10 };
        static const CgroupLimits session = { .memory_bytes = 256ull << 20, .pids_max = 100 };
        CgroupManager *m = NULL;
        CgroupSession *s0 = NULL, *s1 = NULL;
        uint64_t hits0 = 0, hits1 = 0;
        pid_t c0, c1;

        (void) state;
        REQUIRE_REAL_V1();
        m = real_two_sessions(&sandbox, &session, &s0, &s1);
        assert_int_equal(real_u64("pids", SB_A "/pids.max"), 10);
        c0 = spawn_in(s0, body_fork_sleepers_slowly);
        c1 = spawn_in(s1, body_fork_sleepers_slowly);
        for (int i = 0; i < 3000 && (hits0 == 0 || hits1 == 0); i++) {
                assert_int_equal(cgroup_session_pids_max_hits(s0, &hits0), 0);
                assert_int_equal(cgroup_session_pids_max_hits(s1, &hits1), 0);
                usleep(1000);
        }
        assert_true(hits0 >= 1 || hits1 >= 1);
        assert_true(real_u64("pids", SB_A "/pids.current") <= 10);
        /* Full: no process is moved in (a move would pass the limit). */
        {
                CgroupSession *s2 = NULL;
                pid_t outside = fork();

                assert_true(outside >= 0);
                if (outside == 0)
                        body_sleep();
                assert_int_equal(cgroup_session_new(sandbox_a(m), &session, &s2), 0);
                for (int i = 0; i < 2000 && real_u64("pids", SB_A "/pids.current") < 10; i++)
                        usleep(1000);
                assert_int_equal(cgroup_session_attach(s2, outside), -EAGAIN);
                assert_int_equal(real_u64("pids", SB_A "/pids.max"), 10);
                assert_true(real_u64("pids", SB_A "/pids.current") <= 10);
                (void) kill(outside, SIGKILL);
                assert_reaped_killed(outside);
                assert_null(cgroup_session_release(s2));
        }
        assert_true(real_u64("pids", SB_A "/s0/pids.current") + real_u64("pids", SB_A "/s1/pids.current") <= 10);
        assert_null(cgroup_session_release(s0));
        assert_null(cgroup_session_release(s1));
        assert_reaped_killed(c0);
        assert_reaped_killed(c1);
        assert_null(cgroup_manager_free(m));
        assert_no_instance_left();
}

static void body_hold_memory(void) {
        size_t size = 40u << 20;
        char *p = malloc(size);

        if (!p)
                _exit(4);
        for (size_t i = 0; i < size; i += 4096)
                p[i] = 1;
        body_sleep();
}

/* The OOM killer's first choice (raising one's score needs no privilege). */
static void body_eat_memory_first(void) {
        int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

        if (fd < 0 || write(fd, "1000", 4) != 4)
                _exit(4);
        close(fd);
        body_eat_memory();
}

/* The sandbox's memory limit holds for its sessions together: 40 MiB held
 * in one session and 200 MiB asked for in the other, each session allowed
 * 128 MiB, the sandbox 64 MiB: the second is OOM-killed and its session
 * counts it. */
static void test_v1_real_sandbox_memory(void **state) {
        static const CgroupLimits sandbox = { .memory_bytes = 64ull << 20, .pids_max = 64 };
        static const CgroupLimits session = { .memory_bytes = 128ull << 20, .pids_max = 64 };
        CgroupManager *m = NULL;
        CgroupSession *s0 = NULL, *s1 = NULL;
        uint64_t kills0 = 0, kills1 = 0;
        pid_t holder, eater;

        (void) state;
        REQUIRE_REAL_V1();
        m = real_two_sessions(&sandbox, &session, &s0, &s1);
        assert_int_equal(real_u64("memory", SB_A "/memory.limit_in_bytes"), 64ull << 20);
        holder = spawn_in(s0, body_hold_memory);
        for (int i = 0; i < 2000 && real_u64("memory", SB_A "/s0/memory.usage_in_bytes") < (40ull << 20); i++)
                usleep(1000);
        eater = spawn_in(s1, body_eat_memory_first);
        assert_reaped_killed(eater);
        assert_int_equal(cgroup_session_oom_kills(s1, &kills1), 0);
        assert_true(kills1 >= 1);
        assert_int_equal(cgroup_session_oom_kills(s0, &kills0), 0);
        assert_int_equal(kills0, 0);
        assert_null(cgroup_session_release(s0));
        assert_reaped_killed(holder);
        assert_null(cgroup_session_release(s1));
        assert_null(cgroup_manager_free(m));
        assert_no_instance_left();
}

static char tmpfs_dir[64];
static void body_write_tmpfs(void) {
        char path[128];
        static char buf[1 << 20];
        int fd;

        (void) snprintf(path, sizeof(path), "%s/f", tmpfs_dir);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                _exit(4);
        memset(buf, 'x', sizeof(buf));
        for (int i = 0; i < 20; i++)
                if (write(fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf))
                        _exit(5);
        _exit(0);
}

/* What a session's commands wrote to a tmpfs (its upper) stays charged
 * after they are gone: to the session's cgroup, so to its sandbox, and once
 * the sandbox's cgroup is removed too, to the cgroup of all sandboxes. */
static void test_v1_real_tmpfs_charge(void **state) {
        static const CgroupLimits l = { .memory_bytes = 256ull << 20, .pids_max = 16 };
        CgroupManager *m = NULL;
        CgroupSandbox *b;
        CgroupSession *s = NULL;
        int status;
        pid_t writer;

        (void) state;
        REQUIRE_REAL_V1();
        (void) strcpy(tmpfs_dir, "/tmp/test-cgroup-tmpfs-XXXXXX");
        assert_non_null(mkdtemp(tmpfs_dir));
        assert_int_equal(mount("test-cgroup", tmpfs_dir, "tmpfs", 0, "size=64m"), 0);
        m = real_manager();
        b = real_sandbox(m, &l);
        assert_int_equal(cgroup_session_new(b, &l, &s), 0);
        writer = spawn_in(s, body_write_tmpfs);
        assert_int_equal(waitpid(writer, &status, 0), writer);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_null(cgroup_session_release(s));
        assert_true(real_u64("memory", SB_A "/s0/memory.usage_in_bytes") >= (20ull << 20));
        assert_true(real_u64("memory", SB_A "/memory.usage_in_bytes") >= (20ull << 20));
        assert_null(cgroup_sandbox_free(b));
        sandbox_a_of = NULL;
        assert_null(real_get("memory", SB_A "/memory.usage_in_bytes"));
        assert_true(real_u64("memory", "memory.usage_in_bytes") >= (20ull << 20));
        assert_int_equal(umount(tmpfs_dir), 0);
        assert_int_equal(rmdir(tmpfs_dir), 0);
        assert_true(real_u64("memory", "memory.usage_in_bytes") < (20ull << 20));
        assert_null(cgroup_manager_free(m));
        assert_no_instance_left();
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_v2_layout_limits_pool),
                cmocka_unit_test(test_v2_busy_when_not_alone),
                cmocka_unit_test(test_v2_missing_controller),
                cmocka_unit_test(test_v2_without_cpu),
                cmocka_unit_test(test_v2_controllers_enabled_before),
                cmocka_unit_test(test_v2_sandboxes),
                cmocka_unit_test(test_v2_pids_hits_of_sandbox),
                cmocka_unit_test(test_v2_pool_cap),
                cmocka_unit_test(test_v2_attach_below_pids_limits),
                cmocka_unit_test(test_v2_kill_without_kill_file),
                cmocka_unit_test(test_ops_tables),
                cmocka_unit_test(test_detect_none),
                cmocka_unit_test(test_detect_each_backend),
                cmocka_unit_test(test_v1_fake),
                cmocka_unit_test(test_v1_fake_stuck_not_reused),
                cmocka_unit_test(test_v1_fake_without_cpu),
                cmocka_unit_test(test_v1_real_kill),
                cmocka_unit_test(test_v1_real_pids_limit_and_release),
                cmocka_unit_test(test_v1_real_oom),
                cmocka_unit_test(test_v1_real_sandbox_pids),
                cmocka_unit_test(test_v1_real_sandbox_memory),
                cmocka_unit_test(test_v1_real_tmpfs_charge),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
