# sbxd; the *_LIB_ sources are also linked into unit tests.
SUPERVISOR_SRCS += supervisor/sbxd.c
SUPERVISOR_LIB_SRCS += supervisor/transcript.c
SUPERVISOR_LIB_SRCS += supervisor/cgroup.c

SBXCTL_SRCS += supervisor/sbxctl.c
