# sbxd, in layers (docs/architecture.md; tests/check-layers.sh enforces them):
#   sbxd.c (main) -> control*.c (requests) -> core/ (the model)
#   -> os/ (kernel areas) -> data/ (durable data) -> common/, proto/
# SUPERVISOR_MAIN_SRCS is sbxd's main alone; the rest is also linked into
# unit tests (tests/module.mk) and fuzz targets (mk/fuzz.mk).
SUPERVISOR_MAIN_SRCS += supervisor/sbxd.c

SUPERVISOR_CONTROL_SRCS += supervisor/control.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-request.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-sandboxes.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-commands.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-sessions.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-files.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-claims.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-boxfiles.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-jobs.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-images.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-runtime.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-tokens.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-boxes.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-takeover.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-secrets.c
SUPERVISOR_CONTROL_SRCS += supervisor/control-versions.c

SUPERVISOR_CORE_SRCS += supervisor/core/config.c
SUPERVISOR_CORE_SRCS += supervisor/core/egress.c
SUPERVISOR_CORE_SRCS += supervisor/core/egress-proxy.c
SUPERVISOR_CORE_SRCS += supervisor/core/server.c
SUPERVISOR_CORE_SRCS += supervisor/core/client.c
SUPERVISOR_CORE_SRCS += supervisor/core/snapshot.c
SUPERVISOR_CORE_SRCS += supervisor/core/publish.c
SUPERVISOR_CORE_SRCS += supervisor/core/layerquota.c
SUPERVISOR_CORE_SRCS += supervisor/core/kept.c
SUPERVISOR_CORE_SRCS += supervisor/core/session.c
SUPERVISOR_CORE_SRCS += supervisor/core/spare.c
SUPERVISOR_CORE_SRCS += supervisor/core/workspace.c
SUPERVISOR_CORE_SRCS += supervisor/core/sandbox.c
SUPERVISOR_CORE_SRCS += supervisor/core/owner.c
SUPERVISOR_CORE_SRCS += supervisor/core/transcripts.c
SUPERVISOR_CORE_SRCS += supervisor/core/claim.c
SUPERVISOR_CORE_SRCS += supervisor/core/job.c
SUPERVISOR_CORE_SRCS += supervisor/core/boxfiles.c
SUPERVISOR_CORE_SRCS += supervisor/core/boxwire.c
SUPERVISOR_CORE_SRCS += supervisor/core/imagebuild.c
SUPERVISOR_CORE_SRCS += supervisor/core/runtime.c
SUPERVISOR_CORE_SRCS += supervisor/core/artifacts.c
SUPERVISOR_CORE_SRCS += supervisor/core/token.c
SUPERVISOR_CORE_SRCS += supervisor/core/takeover.c
SUPERVISOR_CORE_SRCS += supervisor/core/box-config.c
SUPERVISOR_CORE_SRCS += supervisor/core/box.c
SUPERVISOR_CORE_SRCS += supervisor/core/secret.c
SUPERVISOR_CORE_SRCS += supervisor/core/version.c

SUPERVISOR_OS_SRCS += supervisor/os/cgroup.c
SUPERVISOR_OS_SRCS += supervisor/os/cgroup-v1.c
SUPERVISOR_OS_SRCS += supervisor/os/cgroup-v2.c
SUPERVISOR_OS_SRCS += supervisor/os/cgroup-util.c
SUPERVISOR_OS_SRCS += supervisor/os/ns.c
SUPERVISOR_OS_SRCS += supervisor/os/spawner.c
SUPERVISOR_OS_SRCS += supervisor/os/netns.c
SUPERVISOR_OS_SRCS += supervisor/os/livemount.c
SUPERVISOR_OS_SRCS += supervisor/os/seccomp.c
SUPERVISOR_OS_SRCS += supervisor/os/image.c
SUPERVISOR_OS_SRCS += supervisor/os/uidrange.c
SUPERVISOR_OS_SRCS += supervisor/os/workmount.c

SUPERVISOR_DATA_SRCS += supervisor/data/store.c
SUPERVISOR_DATA_SRCS += supervisor/data/layer.c
SUPERVISOR_DATA_SRCS += supervisor/data/transcript.c
SUPERVISOR_DATA_SRCS += supervisor/data/zframes.c
SUPERVISOR_DATA_SRCS += supervisor/data/fileops.c
SUPERVISOR_DATA_SRCS += supervisor/data/indexcache.c
SUPERVISOR_DATA_SRCS += supervisor/data/attribution.c
SUPERVISOR_DATA_SRCS += supervisor/data/capture.c
SUPERVISOR_DATA_SRCS += supervisor/data/claimfs.c
SUPERVISOR_DATA_SRCS += supervisor/data/renames.c
SUPERVISOR_DATA_SRCS += supervisor/data/outquery.c

SUPERVISOR_LIB_SRCS = $(SUPERVISOR_CONTROL_SRCS) $(SUPERVISOR_CORE_SRCS) $(SUPERVISOR_OS_SRCS) $(SUPERVISOR_DATA_SRCS)

SBXCTL_SRCS += supervisor/sbxctl.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-util.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-verbs.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-claims.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-boxes.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-jobs.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-tokens.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-takeover.c
SBXCTL_LIB_SRCS += supervisor/sbxctl-secrets.c
# a build tool: the bash completion, written from sbxctl's tables
SBXCTL_COMPLETION_SRCS += supervisor/sbxctl-completion.c
