/* Sandbox and session cgroups behind one small interface, for cgroup v2
 * (production, systemd Delegate=yes) and the v1/hybrid layout (memory, pids
 * and cpu controllers under ROOT/<controller>). One cgroup holds all
 * sandboxes and keeps them to their share of the host; each sandbox's cgroup
 * below it carries the sandbox's limits for all its sessions together; each
 * session's cgroup below that keeps its own limits and event counters (what
 * ends a command). Session cgroups are pooled and reused, per sandbox,
 * because removed memory cgroups linger in the kernel. Non-logging. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum CgroupBackend {
        CGROUP_BACKEND_V1,
        CGROUP_BACKEND_V2,
} CgroupBackend;

typedef struct CgroupLimits {
        uint64_t memory_bytes;      /* 0: unlimited */
        uint64_t pids_max;          /* 0: unlimited */
        uint64_t cpu_weight;        /* 1..10000, 100 = default share; 0: leave */
} CgroupLimits;

typedef struct CgroupManager CgroupManager;
typedef struct CgroupSandbox CgroupSandbox;
typedef struct CgroupSession CgroupSession;

/* Detect the backend under root ("/sys/fs/cgroup"; tests pass a fake tree)
 * and create this supervisor's subtree. self_cgroup is the content of
 * /proc/self/cgroup (tests pass their own). instance names the subtree
 * ("sbxd-<pid>") so several supervisors can run side by side. sandboxes
 * are the limits of the cgroup above all sandboxes (their share of the host).
 * On v2 the layout is <own>/supervisor (this process moves itself there) and
 * <own>/sandboxes/<sandbox>/<session>; on v1
 * <ctrl>/<own>/<instance>/<sandbox>/<session> per controller. */
int cgroup_manager_new(const char *root, const char *self_cgroup, const char *instance,
                       const CgroupLimits *sandboxes, CgroupManager **ret);
CgroupBackend cgroup_manager_backend(const CgroupManager *m);
const char *cgroup_backend_to_string(CgroupBackend b);
/* Kill everything left in the subtree, remove every cgroup it created
 * (sandboxes not freed yet included). */
CgroupManager *cgroup_manager_free(CgroupManager *m);
/* Remove subtrees left by supervisors that died (instance "sbxd-<pid>" whose
 * pid no longer runs), killing what is still in them. */
int cgroup_manager_cleanup_stale(CgroupManager *m);

/* The cgroup of one sandbox, limits applied; name (1-64 of A-Z a-z 0-9 - _)
 * is the sandbox's id. An existing directory of that name is adopted and
 * emptied. */
int cgroup_sandbox_new(CgroupManager *m, const char *name, const CgroupLimits *limits, CgroupSandbox **ret);
/* Its processes and threads (pids.current), all its sessions' together. */
int cgroup_sandbox_processes(CgroupSandbox *b, uint64_t *ret);
/* Kill what is left in it, remove it with its pooled session cgroups. Its
 * sessions must have been released. */
CgroupSandbox *cgroup_sandbox_free(CgroupSandbox *b);

/* A cgroup for one session of sandbox b (one of b's pooled ones if
 * available), limits applied. */
int cgroup_session_new(CgroupSandbox *b, const CgroupLimits *limits, CgroupSession **ret);
/* Move pid into s; -EAGAIN if its sandbox, or all sandboxes, are at their
 * pids limit (a move must not take them past it). */
int cgroup_session_attach(CgroupSession *s, pid_t pid);
/* Events counted since the session got this cgroup: an OOM kill of one of
 * its processes, a fork it was refused by its own or its sandbox's pids
 * limit. */
int cgroup_session_oom_kills(CgroupSession *s, uint64_t *ret);
int cgroup_session_pids_max_hits(CgroupSession *s, uint64_t *ret);
/* How many processes are in it now. */
int cgroup_session_processes(CgroupSession *s, size_t *ret);
/* SIGKILL every process in it (thawed first). */
int cgroup_session_kill(CgroupSession *s);
/* Freeze every task in it (v1 freezer.state, v2 cgroup.freeze): they keep
 * their memory and use no CPU until thawed; -EOPNOTSUPP on a v1 host
 * without the freezer hierarchy. Returns once the kernel took the request. */
int cgroup_session_freeze(CgroupSession *s, bool frozen);
/* Kill, wait until empty, and return the cgroup to the pool. */
CgroupSession *cgroup_session_release(CgroupSession *s);
