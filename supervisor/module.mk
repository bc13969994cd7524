# sbxd, in layers (docs/architecture.md; tests/check-layers.sh enforces them):
#   sbxd.c (main) -> control*.c (requests) -> core/ (the model)
#   -> os/ (kernel areas) -> data/ (durable data) -> common/, proto/
# The *_LIB_ sources are also linked into unit tests.
SUPERVISOR_SRCS += supervisor/sbxd.c
SUPERVISOR_SRCS += supervisor/control.c
SUPERVISOR_SRCS += supervisor/files.c

SUPERVISOR_SRCS += supervisor/core/session.c
SUPERVISOR_SRCS += supervisor/core/spare.c
SUPERVISOR_SRCS += supervisor/core/sandbox.c
SUPERVISOR_SRCS += supervisor/core/snapshot.c
SUPERVISOR_SRCS += supervisor/core/publish.c

SUPERVISOR_SRCS += supervisor/os/ns.c
SUPERVISOR_SRCS += supervisor/os/spawner.c
SUPERVISOR_SRCS += supervisor/os/seccomp.c
SUPERVISOR_SRCS += supervisor/os/netns.c
SUPERVISOR_SRCS += supervisor/os/image.c
SUPERVISOR_LIB_SRCS += supervisor/os/uidrange.c
SUPERVISOR_LIB_SRCS += supervisor/os/cgroup.c

SUPERVISOR_LIB_SRCS += supervisor/data/store.c
SUPERVISOR_LIB_SRCS += supervisor/data/layer.c
SUPERVISOR_LIB_SRCS += supervisor/data/transcript.c
SUPERVISOR_LIB_SRCS += supervisor/data/fileops.c
SUPERVISOR_LIB_SRCS += supervisor/data/indexcache.c
SUPERVISOR_LIB_SRCS += supervisor/data/attribution.c

SBXCTL_SRCS += supervisor/sbxctl.c
