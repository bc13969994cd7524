# Unit tests (cmocka): tests/unit/<name>.c, linked with <name>_DEPS and libsbx.
UNIT_TESTS += tests/unit/test-wire.c
test-wire_DEPS :=
UNIT_TESTS += tests/unit/test-fd-util.c
test-fd-util_DEPS :=
UNIT_TESTS += tests/unit/test-transcript.c
test-transcript_DEPS := supervisor/data/transcript.c
UNIT_TESTS += tests/unit/test-cgroup.c
test-cgroup_DEPS := supervisor/os/cgroup.c supervisor/os/cgroup-v1.c supervisor/os/cgroup-v2.c supervisor/os/cgroup-util.c
test-cgroup_LDFLAGS := -Wl,--wrap=mkdirat,--wrap=unlinkat
UNIT_TESTS += tests/unit/test-msg-json.c
test-msg-json_DEPS :=
UNIT_TESTS += tests/unit/test-jsonrpc.c
test-jsonrpc_DEPS := broker/jsonrpc.c broker/jsonwrite.c broker/mcp.c
UNIT_TESTS += tests/unit/test-schema.c
test-schema_DEPS := $(BROKER_LIB_SRCS)
UNIT_TESTS += tests/unit/test-layer.c
test-layer_DEPS := supervisor/data/layer.c supervisor/os/uidrange.c supervisor/data/store.c
UNIT_TESTS += tests/unit/test-store.c
test-store_DEPS := supervisor/data/store.c supervisor/data/layer.c
UNIT_TESTS += tests/unit/test-attribution.c
test-attribution_DEPS := supervisor/data/attribution.c
UNIT_TESTS += tests/unit/test-workpool.c
test-workpool_DEPS :=
UNIT_TESTS += tests/unit/test-renames.c
test-renames_DEPS := supervisor/data/renames.c
UNIT_TESTS += tests/unit/test-fileops.c
test-fileops_DEPS := supervisor/data/fileops.c
UNIT_TESTS += tests/unit/test-indexcache.c
test-indexcache_DEPS := supervisor/data/indexcache.c supervisor/data/fileops.c
UNIT_TESTS += tests/unit/test-seccomp.c
test-seccomp_DEPS := supervisor/os/seccomp.c
UNIT_TESTS += tests/unit/test-claim.c
test-claim_DEPS := supervisor/data/capture.c supervisor/data/claimfs.c
UNIT_TESTS += tests/unit/test-common.c
test-common_DEPS := supervisor/data/layer.c
# The model and the request layer, with a fake spawner (tests/unit/fake-sbxd.h).
FAKE_SBXD_DEPS = $(SUPERVISOR_LIB_SRCS) tests/unit/fake-sbxd.c
FAKE_SBXD_LDFLAGS := -Wl,--wrap=session_spawn_begin,--wrap=session_spawn_continue
UNIT_TESTS += tests/unit/test-session.c
test-session_DEPS = $(FAKE_SBXD_DEPS)
test-session_LDFLAGS := $(FAKE_SBXD_LDFLAGS)
UNIT_TESTS += tests/unit/test-spare.c
test-spare_DEPS = $(FAKE_SBXD_DEPS)
test-spare_LDFLAGS := $(FAKE_SBXD_LDFLAGS)
UNIT_TESTS += tests/unit/test-control.c
test-control_DEPS = $(FAKE_SBXD_DEPS)
test-control_LDFLAGS := $(FAKE_SBXD_LDFLAGS)
