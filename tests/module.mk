# Unit tests (cmocka): tests/unit/<name>.c, linked with <name>_DEPS and libsbx.
UNIT_TESTS += tests/unit/test-wire.c
test-wire_DEPS :=
UNIT_TESTS += tests/unit/test-fd-util.c
test-fd-util_DEPS :=
UNIT_TESTS += tests/unit/test-transcript.c
test-transcript_DEPS := supervisor/transcript.c
UNIT_TESTS += tests/unit/test-cgroup.c
test-cgroup_DEPS := supervisor/cgroup.c supervisor/cgroup-v1.c supervisor/cgroup-v2.c
test-cgroup_LDFLAGS := -Wl,--wrap=mkdirat,--wrap=unlinkat
UNIT_TESTS += tests/unit/test-msg-json.c
test-msg-json_DEPS :=
UNIT_TESTS += tests/unit/test-jsonrpc.c
test-jsonrpc_DEPS := broker/jsonrpc.c broker/jsonwrite.c broker/mcp.c
UNIT_TESTS += tests/unit/test-schema.c
test-schema_DEPS := $(BROKER_LIB_SRCS)
UNIT_TESTS += tests/unit/test-layer.c
test-layer_DEPS := supervisor/layer.c supervisor/uidrange.c supervisor/store.c
UNIT_TESTS += tests/unit/test-store.c
test-store_DEPS := supervisor/store.c supervisor/layer.c
UNIT_TESTS += tests/unit/test-attribution.c
test-attribution_DEPS := supervisor/attribution.c
UNIT_TESTS += tests/unit/test-fileops.c
test-fileops_DEPS := supervisor/fileops.c
UNIT_TESTS += tests/unit/test-indexcache.c
test-indexcache_DEPS := supervisor/indexcache.c supervisor/fileops.c
UNIT_TESTS += tests/unit/test-seccomp.c
test-seccomp_DEPS := supervisor/seccomp.c
