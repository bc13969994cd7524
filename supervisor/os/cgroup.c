/* Session cgroups: the manager and the pool of session cgroups. What differs
 * between cgroup v2 (delegated subtree) and v1/hybrid hierarchies is behind
 * CgroupOps, in cgroup-v2.c and cgroup-v1.c; what all three share (files,
 * killing, removing) is in cgroup-util.c, below them. See docs/cgroups.md for the layouts and why
 * they look like this.
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

#include "os/cgroup-internal.h"
#include "fd-util.h"
#include "sbx-limits.h"
#include "macro.h"

/* Session cgroups, in use or pooled, per manager. */
#define CG_SESSIONS_MAX SBX_MAX_LIVE_SESSIONS
#define CG_NAME_MAX 64u                /* bytes of an instance or sandbox name */

/* In the order they are tried: a v2 root may hold cgroups named memory and
 * pids, which look like v1 hierarchies. */
static const CgroupOps *const backends[] = { &cgroup_v2_ops, &cgroup_v1_ops };

static bool name_valid(const char *s) {
        size_t n = 0;

        for (; s[n]; n++)
                if (!isalnum((unsigned char) s[n]) && s[n] != '-' && s[n] != '_')
                        return false;
        return n > 0 && n <= CG_NAME_MAX;
}

/* ---- the pool of session cgroups ------------------------------------------------ */

static void pool_record_baselines(CgroupSession *s) {
        if (s->manager->ops->read_oom_kills(s, &s->oom_base) < 0)
                s->oom_base = 0;
        if (s->manager->ops->read_pids_max_hits(s, &s->pids_max_base) < 0)
                s->pids_max_base = 0;
}

static void fds_close(CgroupFds fd) {
        for (CgroupController c = 0; c < _CG_MAX; c++)
                fd[c] = safe_close(fd[c]);
}

static void fds_init(CgroupFds fd) {
        for (CgroupController c = 0; c < _CG_MAX; c++)
                fd[c] = -EBADF;
}

/* Remove the session's directories (killing what is left) and free it. */
static int pool_destroy(CgroupSession *s) {
        char name[16];
        int r;

        cg_session_name(s, name);
        fds_close(s->fd);
        r = s->manager->ops->node_remove(s->manager, s->sandbox->fd, name);
        free(s);
        return r;
}

static void pool_unlink(CgroupManager *m, CgroupSession *s) {
        for (CgroupSession **p = &m->sessions; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        m->n_sessions--;
                        return;
                }
}

/* Room for one more session cgroup: at the cap, a free one of any sandbox goes. */
static int pool_make_room(CgroupManager *m) {
        if (m->n_sessions < CG_SESSIONS_MAX)
                return 0;
        for (CgroupSession *i = m->sessions; i; i = i->next)
                if (i->state == CG_SESSION_FREE) {
                        pool_unlink(m, i);
                        (void) pool_destroy(i);
                        return 0;
                }
        return -ENOSPC;
}

/* A new session cgroup of b, emptied, on its manager's list. */
static int pool_add(CgroupSandbox *b, CgroupSession **ret) {
        CgroupManager *m = b->manager;
        _cleanup_free_ CgroupSession *s = NULL;
        char name[16];
        int r;

        r = pool_make_room(m);
        if (r < 0)
                return r;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->manager = m;
        s->sandbox = b;
        s->index = m->next_index++;
        fds_init(s->fd);
        cg_session_name(s, name);

        /* An existing directory is a leftover of an earlier incarnation:
         * adopted, and emptied here. */
        r = m->ops->node_make(m, b->fd, name, false, s->fd);
        if (r >= 0)
                r = m->ops->kill(s, true);
        if (r < 0) {
                (void) pool_destroy(TAKE_PTR(s));
                return r;
        }
        s->next = m->sessions;
        m->sessions = s;
        m->n_sessions++;
        *ret = TAKE_PTR(s);
        return 0;
}

int cgroup_session_new(CgroupSandbox *b, const CgroupLimits *limits, CgroupSession **ret) {
        CgroupManager *m;
        CgroupSession *s = NULL;
        bool fresh = false;
        int r;

        if (!b || !limits || !ret)
                return -EINVAL;
        m = b->manager;
        for (CgroupSession *i = m->sessions; i; i = i->next)
                if (i->sandbox == b && i->state == CG_SESSION_FREE) {
                        s = i;
                        break;
                }
        if (!s) {
                r = pool_add(b, &s);
                if (r < 0)
                        return r;
                fresh = true;
        }

        r = m->ops->set_limits(m, s->fd, limits);
        if (r < 0) {
                if (fresh) {
                        pool_unlink(m, s);
                        (void) pool_destroy(s);
                } else
                        s->state = CG_SESSION_FREE;
                return r;
        }
        pool_record_baselines(s);
        s->state = CG_SESSION_IN_USE;
        *ret = s;
        return 0;
}

/* The kernel checks a pids limit when a process forks, never when one is
 * moved in: a session's first process, moved into a full sandbox, would take
 * it past its limit. So for the move the limits of the sandbox and of all
 * sandboxes are one lower, which no fork can race past, and a full one
 * refuses the move (-EAGAIN). */
int cgroup_session_attach(CgroupSession *s, pid_t pid) {
        CgroupManager *m;
        size_t i;
        int r = 0;

        if (!s || pid <= 0 || s->state != CG_SESSION_IN_USE)
                return -EINVAL;
        m = s->manager;
        const struct {
                int fd;
                uint64_t max;
        } lim[] = {
                { m->ops->pids_fd(s->sandbox->fd), s->sandbox->pids_max },
                { m->ops->pids_fd(m->top), m->top_pids_max },
        };
        for (i = 0; i < ELEMENTSOF(lim) && r >= 0; i++)
                if (lim[i].max > 0) {
                        uint64_t current;

                        r = cg_write_u64_at(lim[i].fd, "pids.max", lim[i].max - 1);
                        if (r >= 0)
                                r = cg_read_u64_at(lim[i].fd, "pids.current", &current);
                        if (r >= 0 && current >= lim[i].max)
                                r = -EAGAIN;
                }
        if (r >= 0)
                r = m->ops->attach(s, pid);
        while (i-- > 0)
                if (lim[i].max > 0)
                        (void) cg_write_u64_at(lim[i].fd, "pids.max", lim[i].max);
        return r;
}

/* An event counter of the cgroup, less what it counted before this session. */
static int counter_since(CgroupSession *s, int (*read_counter)(CgroupSession *s, uint64_t *ret), uint64_t base,
                         uint64_t *ret) {
        uint64_t v;
        int r;

        r = read_counter(s, &v);
        if (r < 0)
                return r;
        *ret = v > base ? v - base : 0;
        return 0;
}

int cgroup_session_oom_kills(CgroupSession *s, uint64_t *ret) {
        if (!s || !ret)
                return -EINVAL;
        return counter_since(s, s->manager->ops->read_oom_kills, s->oom_base, ret);
}

int cgroup_session_pids_max_hits(CgroupSession *s, uint64_t *ret) {
        if (!s || !ret)
                return -EINVAL;
        return counter_since(s, s->manager->ops->read_pids_max_hits, s->pids_max_base, ret);
}

int cgroup_session_processes(CgroupSession *s, size_t *ret) {
        _cleanup_free_ pid_t *pids = NULL;
        size_t n;
        int r;

        if (!s)
                return -EINVAL;
        r = cg_read_pids(s->fd, _CG_MAX, &pids, &n, NULL);
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

int cgroup_session_kill(CgroupSession *s) {
        if (!s)
                return -EINVAL;
        return s->manager->ops->kill(s, false);
}

int cgroup_session_freeze(CgroupSession *s, bool frozen) {
        if (!s)
                return -EINVAL;
        return s->manager->ops->freeze(s, frozen);
}

CgroupSession *cgroup_session_release(CgroupSession *s) {
        if (!s)
                return NULL;
        /* A cgroup that cannot be emptied is not handed out again;
         * cgroup_manager_free() tries once more. */
        s->state = s->manager->ops->kill(s, true) < 0 ? CG_SESSION_BROKEN : CG_SESSION_FREE;
        return NULL;
}

/* ---- sandbox cgroups ------------------------------------------------------------ */

static void sandbox_unlink(CgroupManager *m, CgroupSandbox *b) {
        for (CgroupSandbox **p = &m->sandboxes; *p; p = &(*p)->next)
                if (*p == b) {
                        *p = b->next;
                        return;
                }
}

/* Its session cgroups and its directories go, and it. */
static int sandbox_destroy(CgroupSandbox *b) {
        CgroupManager *m = b->manager;
        int r, ret = 0;

        for (CgroupSession **p = &m->sessions; *p; ) {
                CgroupSession *s = *p;

                if (s->sandbox != b) {
                        p = &s->next;
                        continue;
                }
                *p = s->next;
                m->n_sessions--;
                r = pool_destroy(s);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        fds_close(b->fd);
        r = m->ops->node_remove(m, m->top, b->name);
        if (r < 0 && ret == 0)
                ret = r;
        free(b->name);
        free(b);
        return ret;
}

int cgroup_sandbox_new(CgroupManager *m, const char *name, const CgroupLimits *limits, CgroupSandbox **ret) {
        CgroupSandbox *b;
        int r;

        if (!m || !name || !limits || !ret || !name_valid(name) || cg_manager_has_sandbox(m, name))
                return -EINVAL;
        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->manager = m;
        fds_init(b->fd);
        b->name = strdup(name);
        if (!b->name) {
                free(b);
                return -ENOMEM;
        }
        /* A directory an earlier incarnation left (cleanup_stale removes them
         * at start) is adopted: whatever is below it goes. */
        r = m->ops->node_make(m, m->top, name, true, b->fd);
        for (CgroupController c = 0; r >= 0 && c < _CG_MAX; c++)
                if (b->fd[c] >= 0)
                        r = cg_remove_matching(m, b->fd[c], NULL, NULL);
        if (r >= 0)
                r = m->ops->set_limits(m, b->fd, limits);
        if (r < 0) {
                (void) sandbox_destroy(b);
                return r;
        }
        b->pids_max = limits->pids_max;
        b->next = m->sandboxes;
        m->sandboxes = b;
        *ret = b;
        return 0;
}

int cgroup_sandbox_processes(CgroupSandbox *b, uint64_t *ret) {
        if (!b || !ret)
                return -EINVAL;
        return cg_read_u64_at(b->manager->ops->pids_fd(b->fd), "pids.current", ret);
}

CgroupSandbox *cgroup_sandbox_free(CgroupSandbox *b) {
        if (!b)
                return NULL;
        sandbox_unlink(b->manager, b);
        (void) sandbox_destroy(b);
        return NULL;
}

/* ---- manager ---------------------------------------------------------------- */

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
        return m->ops->backend;
}

static const CgroupOps *detect(int root_fd) {
        for (size_t i = 0; i < ELEMENTSOF(backends); i++)
                if (backends[i]->detect(root_fd))
                        return backends[i];
        return NULL;
}

int cgroup_manager_new(const char *root, const char *self_cgroup, const char *instance,
                       const CgroupLimits *sandboxes, CgroupManager **ret) {
        _cleanup_close_ int root_fd = -EBADF;
        const CgroupOps *ops;
        CgroupManager *m;
        int r;

        if (!root || !self_cgroup || !sandboxes || !ret)
                return -EINVAL;
        if (instance && !name_valid(instance))
                return -EINVAL;

        root_fd = cg_open_dir_at(AT_FDCWD, root);
        if (root_fd < 0)
                return root_fd;
        ops = detect(root_fd);
        if (!ops)
                return -EOPNOTSUPP;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->ops = ops;
        fds_init(m->top);
        if (instance) {
                m->instance = strdup(instance);
                if (!m->instance) {
                        free(m);
                        return -ENOMEM;
                }
        }
        r = ops->setup(m, root_fd, self_cgroup);
        if (r >= 0)
                r = ops->set_limits(m, m->top, sandboxes);
        m->top_pids_max = sandboxes->pids_max;
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

        while (m->sandboxes) {
                CgroupSandbox *b = m->sandboxes;

                m->sandboxes = b->next;
                (void) sandbox_destroy(b);
        }
        m->ops->teardown(m);
        free(m->instance);
        free(m);
        return NULL;
}

int cgroup_manager_cleanup_stale(CgroupManager *m) {
        unsigned count = 0;
        int r;

        if (!m)
                return -EINVAL;
        r = m->ops->cleanup_stale(m, &count);
        return r < 0 ? r : (int) count;
}
