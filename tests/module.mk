# Unit tests (cmocka): tests/unit/<name>.c, linked with <name>_DEPS and libsbx.
UNIT_TESTS += tests/unit/test-wire.c
test-wire_DEPS :=
UNIT_TESTS += tests/unit/test-transcript.c
test-transcript_DEPS := supervisor/data/transcript.c
UNIT_TESTS += tests/unit/test-cgroup.c
test-cgroup_DEPS := supervisor/os/cgroup.c
test-cgroup_LDFLAGS := -Wl,--wrap=mkdirat,--wrap=unlinkat
UNIT_TESTS += tests/unit/test-jsonrpc.c
test-jsonrpc_DEPS := broker/jsonrpc.c broker/jsonwrite.c broker/mcp.c
UNIT_TESTS += tests/unit/test-schema.c
test-schema_DEPS := broker/schema.c broker/tools.c broker/jsonwrite.c
UNIT_TESTS += tests/unit/test-layer.c
test-layer_DEPS := supervisor/data/layer.c supervisor/os/uidrange.c supervisor/data/store.c
UNIT_TESTS += tests/unit/test-store.c
test-store_DEPS := supervisor/data/store.c supervisor/data/layer.c
UNIT_TESTS += tests/unit/test-attribution.c
test-attribution_DEPS := supervisor/data/attribution.c
UNIT_TESTS += tests/unit/test-fileops.c
test-fileops_DEPS := supervisor/data/fileops.c
UNIT_TESTS += tests/unit/test-indexcache.c
test-indexcache_DEPS := supervisor/data/indexcache.c supervisor/data/fileops.c
UNIT_TESTS += tests/unit/test-seccomp.c
test-seccomp_DEPS := supervisor/os/seccomp.c
UNIT_TESTS += tests/unit/test-common.c
test-common_DEPS := supervisor/data/layer.c
