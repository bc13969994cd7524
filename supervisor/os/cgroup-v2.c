/* The cgroup v2 backend (production: systemd, Delegate=yes). sbxd moves
 * itself into <own>/supervisor and makes the sandboxes in
 * <own>/sandboxes/<id> and their sessions below them, <id>/s<N>, one
 * directory for all controllers, as systemd's CGROUP_DELEGATION.md asks; it
 * writes nothing above <own>. docs/cgroups.md. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/cgroup-internal.h"
#include "fd-util.h"
#include "macro.h"

static bool v2_detect(int root_fd) {
        _cleanup_free_ char *controllers = NULL;

        return read_file_at(root_fd, "cgroup.controllers", &controllers) >= 0 &&
               cg_word_in_list(controllers, "memory") && cg_word_in_list(controllers, "pids");
}

static int own_cgroup_only_us(int own_fd) {
        _cleanup_free_ pid_t *pids = NULL;
        size_t n = 0;
        pid_t self = getpid();
        bool foreign;
        int r;

        r = cg_read_pids(&own_fd, 1, &pids, &n, &foreign);
        if (r < 0)
                return r;
        if (foreign)
                return -EBUSY;
        for (size_t i = 0; i < n; i++)
                if (pids[i] != self)
                        return -EBUSY;
        return 0;
}

/* "+memory +pids" (sign '+') or "-memory -pids" of the controllers in which[]. */
static void controller_list(char buf[static 64], const bool which[_CG_MAX], char sign) {
        size_t len = 0;

        buf[0] = '\0';
        for (CgroupController c = 0; c < _CG_MAX; c++)
                if (which[c])
                        len += (size_t) snprintf(buf + len, 64 - len, "%s%c%s", len ? " " : "", sign,
                                                 cgroup_controller_names[c]);
}

/* Enable the controllers in want[] in dirfd's cgroup.subtree_control: all in
 * one write, and if the kernel refuses that, one by one so an optional one
 * (cpu) cannot take the required ones down with it. got[] says what is on. */
static int enable_controllers(int dirfd, const bool want[_CG_MAX], bool got[_CG_MAX]) {
        char buf[64];
        int r;

        controller_list(buf, want, '+');
        if (!buf[0])
                return 0;
        r = cg_write_at(dirfd, "cgroup.subtree_control", buf);
        if (r >= 0) {
                for (CgroupController c = 0; c < _CG_MAX; c++)
                        got[c] = got[c] || want[c];
                return 0;
        }
        for (CgroupController c = 0; c < _CG_MAX; c++) {
                char one[16];

                if (!want[c])
                        continue;
                (void) snprintf(one, sizeof(one), "+%s", cgroup_controller_names[c]);
                r = cg_write_at(dirfd, "cgroup.subtree_control", one);
                if (r < 0) {
                        if (c != CG_CPU)
                                return r;
                        continue;
                }
                got[c] = true;
        }
        return 0;
}

/* What <own>'s parent delegated (want[]: to be enabled by us, on_own[]:
 * enabled already); memory and pids are required. */
static int delegated_controllers(int own_fd, bool want[_CG_MAX], bool on_own[_CG_MAX]) {
        _cleanup_free_ char *available = NULL, *enabled = NULL;
        int r;

        r = read_file_at(own_fd, "cgroup.controllers", &available);
        if (r < 0)
                return r;
        r = read_file_at(own_fd, "cgroup.subtree_control", &enabled);
        if (r < 0)
                return r;
        for (CgroupController c = 0; c < _CG_MAX; c++) {
                if (c == CG_FREEZER)
                        continue;       /* not a controller here: cgroup.freeze is in every cgroup */
                if (!cg_word_in_list(available, cgroup_controller_names[c])) {
                        if (c != CG_CPU)
                                return -EOPNOTSUPP;
                        continue;
                }
                on_own[c] = cg_word_in_list(enabled, cgroup_controller_names[c]);
                want[c] = !on_own[c];
        }
        return 0;
}

static int v2_setup(CgroupManager *m, int root_fd, const char *self_cgroup) {
        CgroupV2 *v2 = &m->v2;
        _cleanup_free_ char *own = NULL;
        _cleanup_close_ int sup_fd = -EBADF;
        bool want[_CG_MAX] = {}, on_own[_CG_MAX] = {}, on_below[_CG_MAX] = {};
        int r;

        v2->own_fd = -EBADF;
        r = cg_self_path(self_cgroup, NULL, &own);
        if (r < 0)
                return r == -ENOENT ? -EOPNOTSUPP : r;
        v2->own_fd = cg_open_dir_at(root_fd, own);
        if (v2->own_fd < 0)
                return v2->own_fd;

        r = delegated_controllers(v2->own_fd, want, on_own);
        if (r < 0)
                return r;

        /* systemd's Delegate=yes hands us <own> with only our own process in it.
         * The "no internal processes" rule forbids enabling controllers for
         * children of a cgroup that holds processes, so we move ourselves into
         * the supervisor/ leaf. Processes we did not start (another daemon
         * sharing the unit, a shell someone moved here) would keep <own>
         * populated, and moving them is not ours to decide: refuse. */
        r = own_cgroup_only_us(v2->own_fd);
        if (r < 0)
                return r;

        r = dir_make_open_at(v2->own_fd, "supervisor", 0755, &v2->supervisor_created);
        if (r < 0)
                return r;
        sup_fd = r;
        r = cg_write_pid_at(sup_fd, getpid());
        if (r < 0)
                return r;
        v2->moved = true;

        r = enable_controllers(v2->own_fd, want, on_own);
        for (CgroupController c = 0; c < _CG_MAX; c++)
                v2->enabled_own[c] = want[c] && on_own[c];
        if (r < 0)
                return r;

        r = dir_make_open_at(v2->own_fd, "sandboxes", 0755, &v2->sandboxes_created);
        if (r < 0)
                return r;
        m->top[0] = r;

        r = enable_controllers(m->top[0], on_own, on_below);
        if (r < 0)
                return r;
        for (CgroupController c = 0; c < _CG_MAX; c++)
                m->has[c] = on_below[c];
        return 0;
}

static void v2_teardown(CgroupManager *m) {
        CgroupV2 *v2 = &m->v2;
        char buf[64];

        if (v2->own_fd < 0)
                return;
        m->top[0] = safe_close(m->top[0]);
        if (v2->sandboxes_created)
                (void) cg_remove_tree_at(v2->own_fd, "sandboxes");

        /* Back to how we found <own>: controllers off again (a cgroup with
         * controllers enabled for its children cannot take a process),
         * ourselves back in it, supervisor/ gone. */
        controller_list(buf, v2->enabled_own, '-');
        if (buf[0])
                (void) cg_write_at(v2->own_fd, "cgroup.subtree_control", buf);
        if (v2->moved)
                (void) cg_write_pid_at(v2->own_fd, getpid());
        if (v2->supervisor_created)
                (void) unlinkat(v2->own_fd, "supervisor", AT_REMOVEDIR);
        v2->own_fd = safe_close(v2->own_fd);
}

static bool pick_untracked_sandbox(CgroupManager *m, const char *name) {
        return !cg_manager_has_sandbox(m, name);
}

/* The delegated subtree is ours alone and systemd removes it with the unit,
 * so other supervisors' leftovers cannot exist here, and everything above
 * <own> belongs to systemd. Only sandbox cgroups (with their sessions') an
 * earlier incarnation of this unit left in sandboxes/ can remain, and the
 * sessions/ of the layout before sandbox cgroups. */
static int v2_cleanup_stale(CgroupManager *m, unsigned *count) {
        int r = cg_remove_matching(m, m->top[0], pick_untracked_sandbox, count);

        if (cg_file_exists_at(m->v2.own_fd, "sessions")) {
                int k = cg_remove_tree_at(m->v2.own_fd, "sessions");

                if (k >= 0)
                        (*count)++;
                else if (r >= 0)
                        r = k;
        }
        return r;
}

static int v2_node_make(CgroupManager *m, const CgroupFds parent, const char *name, bool inner, CgroupFds ret) {
        bool got[_CG_MAX] = {};
        int r = dir_make_open_at(parent[0], name, 0755, NULL);

        if (r < 0)
                return r;
        ret[0] = r;
        /* The sandbox's cgroup holds no process, only its sessions' cgroups. */
        return inner ? enable_controllers(ret[0], m->has, got) : 0;
}

static int v2_node_remove(CgroupManager *m, const CgroupFds parent, const char *name) {
        return cg_remove_tree_at(parent[0], name);
}

static int v2_set_limits(CgroupManager *m, const CgroupFds fds, const CgroupLimits *l) {
        int fd = fds[0], r;

        r = cg_write_limit_at(fd, "memory.max", l->memory_bytes);
        if (r < 0)
                return r;
        r = cg_write_at(fd, "memory.swap.max", "0");
        if (r < 0 && r != -ENOENT)
                return r;
        r = cg_write_limit_at(fd, "pids.max", l->pids_max);
        if (r < 0)
                return r;
        if (m->has[CG_CPU]) {
                r = cg_write_u64_at(fd, "cpu.weight", cg_cpu_weight(l));
                if (r < 0)
                        return r;
        }
        return 0;
}

static int v2_pids_fd(const CgroupFds fd) {
        return fd[0];
}

static int v2_attach(CgroupSession *s, pid_t pid) {
        return cg_write_pid_at(s->fd[0], pid);
}

/* cgroup.kill (kernel 5.14 and later) kills the whole subtree at once,
 * including what forks meanwhile: done when the write returns. Without it,
 * the pid by pid loop, which always waits. */
static int v2_freeze(CgroupSession *s, bool frozen) {
        return cg_write_at(s->fd[0], "cgroup.freeze", frozen ? "1" : "0");
}

static int v2_kill(CgroupSession *s, bool wait) {
        (void) v2_freeze(s, false);
        return cg_kill_and_wait(&s->fd[0], 1, cg_file_exists_at(s->fd[0], "cgroup.kill"), wait);
}

static int v2_read_oom_kills(CgroupSession *s, uint64_t *ret) {
        return cg_read_keyed_u64_at(s->fd[0], "memory.events", "oom_kill", ret);
}

/* A fork refused by the limit of the sandbox or of all sandboxes: kernels
 * before 6.12 count it in the forking session's pids.events; later ones
 * (without the pids_localevents mount option) only in the pids.events.local
 * of the cgroup whose limit it hit, which the sum holds for each session
 * below: a limit above it was hit while it ran. */
static int v2_read_pids_max_hits(CgroupSession *s, uint64_t *ret) {
        const int above[] = { s->sandbox->fd[0], s->manager->top[0] };
        uint64_t sum, v;
        int r;

        r = cg_read_keyed_u64_at(s->fd[0], "pids.events", "max", &sum);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(above); i++)
                if (cg_read_keyed_u64_at(above[i], "pids.events.local", "max", &v) >= 0)
                        sum += v;
        *ret = sum;
        return 0;
}

const CgroupOps cgroup_v2_ops = {
        .backend = CGROUP_BACKEND_V2,
        .detect = v2_detect,
        .setup = v2_setup,
        .teardown = v2_teardown,
        .cleanup_stale = v2_cleanup_stale,
        .node_make = v2_node_make,
        .node_remove = v2_node_remove,
        .set_limits = v2_set_limits,
        .attach = v2_attach,
        .pids_fd = v2_pids_fd,
        .kill = v2_kill,
        .read_oom_kills = v2_read_oom_kills,
        .read_pids_max_hits = v2_read_pids_max_hits,
        .freeze = v2_freeze,
};
