# Unit tests (cmocka): tests/unit/<name>.c, linked with <name>_DEPS and libsbx.
UNIT_TESTS += tests/unit/test-wire.c
test-wire_DEPS :=
