/* What cgroup.c (the manager, the pool of session cgroups, killing and
 * removing) shares with the two backends behind its operations table,
 * cgroup-v1.c and cgroup-v2.c. Not an interface for anything else: that is
 * cgroup.h. Non-logging, like the rest of the cgroup code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "os/cgroup.h"

typedef enum CgroupController {
        CG_MEMORY,
        CG_PIDS,
        CG_CPU,
        CG_FREEZER,             /* v1 only (optional): v2 freezes with cgroup.freeze of every cgroup */
        _CG_MAX,
} CgroupController;

extern const char *const cgroup_controller_names[_CG_MAX];

typedef enum CgroupSessionState {
        CG_SESSION_IN_USE,
        CG_SESSION_FREE,        /* empty, in the pool */
        CG_SESSION_BROKEN,      /* could not be emptied; retried only by cgroup_manager_free() */
} CgroupSessionState;

/* A cgroup's directories, -EBADF where there is none: v1 has one per
 * controller present, v2 one for all of them in [0]. */
typedef int CgroupFds[_CG_MAX];

/* The cgroup of one sandbox, above its sessions' cgroups; its name is the
 * sandbox's id. */
struct CgroupSandbox {
        CgroupManager *manager;
        CgroupSandbox *next;
        char *name;
        CgroupFds fd;
        uint64_t pids_max;              /* its limit, 0: none */
};

struct CgroupSession {
        CgroupManager *manager;
        CgroupSandbox *sandbox;         /* the parent of its directories */
        CgroupSession *next;
        unsigned index;                 /* directory name s<index> */
        CgroupSessionState state;
        CgroupFds fd;
        uint64_t oom_base;
        uint64_t pids_max_base;
};

/* v1, per controller: <root>/<ctrl><own>; <that>/<instance> is the manager's top. */
typedef struct CgroupV1 {
        CgroupFds parent_fd;
        bool base_created[_CG_MAX];
} CgroupV1;

/* v2: <root><own>; <own>/sandboxes is the manager's top. */
typedef struct CgroupV2 {
        int own_fd;
        bool supervisor_created;
        bool sandboxes_created;
        bool moved;                     /* this process moved into <own>/supervisor */
        bool enabled_own[_CG_MAX];      /* we added it to <own>/cgroup.subtree_control */
} CgroupV2;

typedef struct CgroupOps CgroupOps;

struct CgroupManager {
        const CgroupOps *ops;
        bool has[_CG_MAX];              /* controller usable for sessions */
        char *instance;                 /* "sbxd-<pid>", or NULL */
        union {                         /* the backend's own, ops->setup() fills it */
                CgroupV1 v1;
                CgroupV2 v2;
        };
        /* The cgroup above all sandboxes, with their share of the host (v1
         * <instance>, v2 <own>/sandboxes); ops->setup() opens it. */
        CgroupFds top;
        uint64_t top_pids_max;          /* the limit of all sandboxes, 0: none */

        CgroupSandbox *sandboxes;
        CgroupSession *sessions;        /* of all sandboxes: in use, free and broken */
        unsigned n_sessions;
        unsigned next_index;
};

/* One backend, as crun's struct libcrun_cgroup_manager: cgroup.c calls these
 * and never asks which backend it has. Each returns 0 or -errno unless said. */
struct CgroupOps {
        CgroupBackend backend;
        /* Whether root_fd (normally /sys/fs/cgroup) is this backend's layout. */
        bool (*detect)(int root_fd);
        /* Find this process's cgroup in self_cgroup (/proc/self/cgroup), make
         * the supervisor's subtree below it, open its top into m->top and set
         * m->has[]. Initializes the backend's part of m and m->top first, so
         * teardown() may follow any failure. */
        int (*setup)(CgroupManager *m, int root_fd, const char *self_cgroup);
        /* Undo setup(), once every sandbox and session cgroup is gone. */
        void (*teardown)(CgroupManager *m);
        /* Remove (killing what is in them) the cgroups earlier supervisors
         * left behind; *count grows by the number removed. */
        int (*cleanup_stale)(CgroupManager *m, unsigned *count);
        /* Make (or adopt, when it exists) the directories named name below
         * parent and open them into ret; inner: it will have cgroups below it
         * (a sandbox's), which get the controllers of m->has[]. */
        int (*node_make)(CgroupManager *m, const CgroupFds parent, const char *name, bool inner, CgroupFds ret);
        /* Remove them again, killing what is left in them (fds closed by then). */
        int (*node_remove)(CgroupManager *m, const CgroupFds parent, const char *name);
        /* Write every limit, including the defaults of those l leaves at 0:
         * a pooled cgroup must not keep its previous session's values. */
        int (*set_limits)(CgroupManager *m, const CgroupFds fd, const CgroupLimits *l);
        int (*attach)(CgroupSession *s, pid_t pid);
        /* Which of a cgroup's directories holds its pids.* files. */
        int (*pids_fd)(const CgroupFds fd);
        /* SIGKILL everything in s; with wait, return only once it is empty.
         * A backend may always wait (when only an empty cgroup proves that
         * nothing is left that could still fork). */
        int (*kill)(CgroupSession *s, bool wait);
        /* Event counters as the kernel keeps them for the cgroup's lifetime. */
        int (*read_oom_kills)(CgroupSession *s, uint64_t *ret);
        int (*read_pids_max_hits)(CgroupSession *s, uint64_t *ret);
        /* Freeze (stop every task of) s or thaw it; -EOPNOTSUPP without a freezer. */
        int (*freeze)(CgroupSession *s, bool frozen);
};

extern const CgroupOps cgroup_v1_ops;
extern const CgroupOps cgroup_v2_ops;

/* ---- helpers for the backends (cgroup.c) ---- */

/* Open a directory below dirfd without following a symlink at its end; rel
 * may be "" for dirfd's own directory. */
int cg_open_dir_at(int dirfd, const char *rel);
bool cg_file_exists_at(int dirfd, const char *name);
/* Write value to an interface file that must exist (never created). */
int cg_write_at(int dirfd, const char *name, const char *value);
int cg_write_u64_at(int dirfd, const char *name, uint64_t v);
/* v, or "max" for 0 (v2 memory.max, pids.max in both). */
int cg_write_limit_at(int dirfd, const char *name, uint64_t v);
int cg_write_pid_at(int dirfd, pid_t pid);
/* A file holding one number (pids.current). */
int cg_read_u64_at(int dirfd, const char *file, uint64_t *ret);
/* The number after key in "key N" lines (memory.events, pids.events,
 * memory.oom_control); -ENODATA without such a line. */
int cg_read_keyed_u64_at(int dirfd, const char *file, const char *key, uint64_t *ret);
/* Whether the whitespace-separated list (cgroup.controllers, cgroup.subtree_control) has word. */
bool cg_word_in_list(const char *list, const char *word);
/* The relative path ("" for the root) of this process's cgroup in the
 * hierarchy of controller (NULL: the v2 "0::" line), from /proc/self/cgroup text. */
int cg_self_path(const char *self_cgroup, const char *controller, char **ret);
/* The union of cgroup.procs of the directories (-EBADF entries skipped),
 * sorted and without duplicates; ret_foreign (may be NULL) says whether the
 * kernel listed processes of another pid namespace (as 0, left out). */
int cg_read_pids(const int *fds, size_t n_fds, pid_t **ret, size_t *ret_n, bool *ret_foreign);
/* Kill everything in the directories and, unless use_kill_file && !wait,
 * wait until they are empty. use_kill_file writes fds[0]'s cgroup.kill (v2). */
int cg_kill_and_wait(const int *fds, size_t n_fds, bool use_kill_file, bool wait);
/* Kill what is in parent_fd/name and below, then remove it bottom-up; a
 * missing directory is fine. */
int cg_remove_tree_at(int parent_fd, const char *name);
/* cg_remove_tree_at() on each subdirectory of dirfd that pick() selects
 * (every one without pick); count may be NULL;
 * *count grows by the number removed. Returns the first error. */
int cg_remove_matching(CgroupManager *m, int dirfd, bool (*pick)(CgroupManager *m, const char *name),
                       unsigned *count);
/* Whether name is the directory of one of m's sandbox cgroups. */
bool cg_manager_has_sandbox(const CgroupManager *m, const char *name);
/* "sN", the directory name of session cgroup s in its sandbox's. */
void cg_session_name(const CgroupSession *s, char buf[static 16]);
/* The weight to write for l: its own, clamped, or the default for 0. */
uint64_t cg_cpu_weight(const CgroupLimits *l);
