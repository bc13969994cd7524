# sbxd; the *_LIB_ sources are also linked into unit tests.
SUPERVISOR_SRCS += supervisor/sbxd.c
SUPERVISOR_SRCS += supervisor/control.c
SUPERVISOR_SRCS += supervisor/session.c
SUPERVISOR_SRCS += supervisor/spare.c
SUPERVISOR_SRCS += supervisor/sandbox.c
SUPERVISOR_SRCS += supervisor/ns.c
SUPERVISOR_SRCS += supervisor/spawner.c
SUPERVISOR_SRCS += supervisor/seccomp.c
SUPERVISOR_SRCS += supervisor/netns.c
SUPERVISOR_SRCS += supervisor/image.c
SUPERVISOR_LIB_SRCS += supervisor/store.c
SUPERVISOR_LIB_SRCS += supervisor/uidrange.c
SUPERVISOR_LIB_SRCS += supervisor/layer.c
SUPERVISOR_LIB_SRCS += supervisor/transcript.c
SUPERVISOR_LIB_SRCS += supervisor/cgroup.c
SUPERVISOR_LIB_SRCS += supervisor/cgroup-v1.c
SUPERVISOR_LIB_SRCS += supervisor/cgroup-v2.c

SBXCTL_SRCS += supervisor/sbxctl.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-util.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-verbs.c
# a build tool: the bash completion, written from sbxctl's tables
SBXCTL_COMPLETION_SRCS += supervisor/sbxctl-completion.c
SUPERVISOR_SRCS += supervisor/snapshot.c
SUPERVISOR_SRCS += supervisor/publish.c
SUPERVISOR_LIB_SRCS += supervisor/fileops.c
SUPERVISOR_LIB_SRCS += supervisor/indexcache.c
SUPERVISOR_LIB_SRCS += supervisor/attribution.c
SUPERVISOR_SRCS += supervisor/files.c
