/* The cgroup v1 backend (v1 and hybrid hosts): memory, pids and, when
 * present, cpu and freezer hierarchies, each mounted at <root>/<controller>. The
 * instance directory holds all sandboxes, a sandbox and each of its sessions
 * get one directory per controller,
 * <root>/<ctrl><own>/<instance>/<sandbox>/s<N>. v1 has no delegation contract
 * and no internal-process rule, so sbxd stays in its own cgroups.
 * docs/cgroups.md. */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/cgroup-internal.h"
#include "fd-util.h"
#include "macro.h"

#define V1_SHARES_MIN 2u
#define V1_SHARES_MAX 262144u

/* pids first, so the pids limit holds before anything else can fork. */
static const CgroupController attach_order[] = { CG_PIDS, CG_MEMORY, CG_CPU, CG_FREEZER };

static bool v1_detect(int root_fd) {
        return cg_file_exists_at(root_fd, "memory/cgroup.procs") && cg_file_exists_at(root_fd, "pids/cgroup.procs");
}

static int v1_setup(CgroupManager *m, int root_fd, const char *self_cgroup) {
        CgroupV1 *v1 = &m->v1;
        int r;

        for (CgroupController c = 0; c < _CG_MAX; c++)
                v1->parent_fd[c] = -EBADF;
        if (!m->instance)
                return -EINVAL;

        for (CgroupController c = 0; c < _CG_MAX; c++) {
                _cleanup_free_ char *own = NULL;
                _cleanup_close_ int ctrl_fd = -EBADF;
                bool required = c != CG_CPU && c != CG_FREEZER;

                ctrl_fd = cg_open_dir_at(root_fd, cgroup_controller_names[c]);
                if (ctrl_fd < 0 || !cg_file_exists_at(ctrl_fd, "cgroup.procs")) {
                        if (required)
                                return ctrl_fd < 0 && ctrl_fd != -ENOENT ? ctrl_fd : -EOPNOTSUPP;
                        continue;
                }
                r = cg_self_path(self_cgroup, cgroup_controller_names[c], &own);
                if (r < 0) {
                        if (required)
                                return r == -ENOENT ? -EOPNOTSUPP : r;
                        continue;
                }
                r = cg_open_dir_at(ctrl_fd, own);
                if (r < 0)
                        return r;
                v1->parent_fd[c] = r;

                /* EEXIST: the name holds our pid, so whoever made it is gone.
                 * Adopt it (and remove it when done). */
                r = dir_make_open_at(v1->parent_fd[c], m->instance, 0755, NULL);
                if (r < 0)
                        return r;
                v1->base_created[c] = true;
                m->top[c] = r;
                m->has[c] = true;
        }
        return 0;
}

static void v1_teardown(CgroupManager *m) {
        CgroupV1 *v1 = &m->v1;

        for (CgroupController c = 0; c < _CG_MAX; c++) {
                m->top[c] = safe_close(m->top[c]);
                if (v1->base_created[c] && v1->parent_fd[c] >= 0)
                        (void) cg_remove_tree_at(v1->parent_fd[c], m->instance);
                v1->parent_fd[c] = safe_close(v1->parent_fd[c]);
        }
}

/* "sbxd-<pid>" → pid, else 0. */
static pid_t instance_pid(const char *name) {
        uint64_t v;

        if (strncmp(name, "sbxd-", 5) != 0 || parse_u64(name + 5, &v) < 0)
                return 0;
        return v > 0 && v <= INT32_MAX ? (pid_t) v : 0;
}

static bool pick_stale_instance(CgroupManager *m, const char *name) {
        pid_t pid = instance_pid(name);

        if (pid <= 0 || pid == getpid() || (m->instance && strcmp(name, m->instance) == 0))
                return false;
        /* EPERM means it exists. A pid reused by an unrelated process keeps the
         * stale tree until that process is gone too; harmless. */
        return kill(pid, 0) < 0 && errno == ESRCH;
}

/* The siblings of <instance> that dead supervisors left, per controller. */
static int v1_cleanup_stale(CgroupManager *m, unsigned *count) {
        int r, ret = 0;

        for (CgroupController c = 0; c < _CG_MAX; c++) {
                if (m->v1.parent_fd[c] < 0)
                        continue;
                r = cg_remove_matching(m, m->v1.parent_fd[c], pick_stale_instance, count);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

static int v1_node_make(CgroupManager *m, const CgroupFds parent, const char *name, bool inner, CgroupFds ret) {
        for (CgroupController c = 0; c < _CG_MAX; c++) {
                int r;

                if (!m->has[c])
                        continue;
                r = dir_make_open_at(parent[c], name, 0755, NULL);
                if (r < 0)
                        return r;
                ret[c] = r;
        }
        return 0;
}

static int v1_node_remove(CgroupManager *m, const CgroupFds parent, const char *name) {
        int r, ret = 0;

        for (CgroupController c = 0; c < _CG_MAX; c++)
                if (m->has[c]) {
                        r = cg_remove_tree_at(parent[c], name);
                        if (r < 0 && ret == 0)
                                ret = r;
                }
        return ret;
}

static int set_memory(int fd, uint64_t bytes) {
        char buf[32];
        bool memsw = cg_file_exists_at(fd, "memory.memsw.limit_in_bytes");
        int r;

        if (bytes == 0)
                (void) strcpy(buf, "-1");
        else
                (void) snprintf(buf, sizeof(buf), "%" PRIu64, bytes);

        /* The kernel keeps memsw >= limit: lower the limit first, raise memsw first. */
        r = cg_write_at(fd, "memory.limit_in_bytes", buf);
        if (r == -EBUSY) {
                /* Above the new limit with pages a previous session left
                 * (page cache): the cgroup is empty, so drop them and retry. */
                (void) cg_write_at(fd, "memory.force_empty", "0");
                r = cg_write_at(fd, "memory.limit_in_bytes", buf);
        }
        if (r == -EINVAL && memsw) {
                r = cg_write_at(fd, "memory.memsw.limit_in_bytes", buf);
                if (r < 0)
                        return r;
                r = cg_write_at(fd, "memory.limit_in_bytes", buf);
        }
        if (r < 0)
                return r;
        /* Same value for memory+swap, so swap cannot extend the limit. */
        if (memsw) {
                r = cg_write_at(fd, "memory.memsw.limit_in_bytes", buf);
                if (r < 0)
                        return r;
        }
        /* Best effort: a parent with use_hierarchy may refuse it. */
        (void) cg_write_at(fd, "memory.swappiness", "0");
        return 0;
}

static int v1_set_limits(CgroupManager *m, const CgroupFds fd, const CgroupLimits *l) {
        int r;

        r = set_memory(fd[CG_MEMORY], l->memory_bytes);
        if (r < 0)
                return r;
        r = cg_write_limit_at(fd[CG_PIDS], "pids.max", l->pids_max);
        if (r < 0)
                return r;
        if (m->has[CG_CPU]) {
                /* cpu.weight 100 is cpu.shares 1024, proportionally. */
                uint64_t shares = cg_cpu_weight(l) * 1024u / 100u;

                shares = MIN(MAX(shares, (uint64_t) V1_SHARES_MIN), (uint64_t) V1_SHARES_MAX);
                r = cg_write_u64_at(fd[CG_CPU], "cpu.shares", shares);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int v1_attach(CgroupSession *s, pid_t pid) {
        for (size_t i = 0; i < ELEMENTSOF(attach_order); i++) {
                int fd = s->fd[attach_order[i]], r;

                if (fd < 0)
                        continue;
                r = cg_write_pid_at(fd, pid);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int v1_pids_fd(const CgroupFds fd) {
        return fd[CG_PIDS];
}

/* No cgroup.kill: pid by pid, and only an empty cgroup proves that nothing
 * is left that could still fork, so this always waits. */
static int v1_freeze(CgroupSession *s, bool frozen) {
        if (s->fd[CG_FREEZER] < 0)
                return -EOPNOTSUPP;
        return cg_write_at(s->fd[CG_FREEZER], "freezer.state", frozen ? "FROZEN" : "THAWED");
}

static int v1_kill(CgroupSession *s, bool wait) {
        /* A frozen task takes SIGKILL only once thawed. */
        (void) v1_freeze(s, false);
        return cg_kill_and_wait(s->fd, _CG_MAX, false, true);
}

static int v1_read_oom_kills(CgroupSession *s, uint64_t *ret) {
        return cg_read_keyed_u64_at(s->fd[CG_MEMORY], "memory.oom_control", "oom_kill", ret);
}

/* v1 counts a refused fork in the forking cgroup, whichever limit (the
 * session's or its sandbox's) refused it. */
static int v1_read_pids_max_hits(CgroupSession *s, uint64_t *ret) {
        return cg_read_keyed_u64_at(s->fd[CG_PIDS], "pids.events", "max", ret);
}

const CgroupOps cgroup_v1_ops = {
        .backend = CGROUP_BACKEND_V1,
        .detect = v1_detect,
        .setup = v1_setup,
        .teardown = v1_teardown,
        .cleanup_stale = v1_cleanup_stale,
        .node_make = v1_node_make,
        .node_remove = v1_node_remove,
        .set_limits = v1_set_limits,
        .attach = v1_attach,
        .pids_fd = v1_pids_fd,
        .kill = v1_kill,
        .read_oom_kills = v1_read_oom_kills,
        .read_pids_max_hits = v1_read_pids_max_hits,
        .freeze = v1_freeze,
};
