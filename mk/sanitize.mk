# make check-sanitize: everything rebuilt in $(SAN_BUILD) with AddressSanitizer
# and UndefinedBehaviorSanitizer (any report aborts), then the unit tests, the
# integration suite and the isolation battery run against those binaries
# (tests/worker/run.sh builds from build/ only and is not part of it). Leak
# checking is off (daemons exit with memory still held).
SAN_BUILD ?= build-asan
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_ENV   := ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0 \
             UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 SBX_BIN_DIR=$(CURDIR)/$(SAN_BUILD)/bin

.PHONY: sanitize-build check-sanitize
sanitize-build:
	@$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) CFLAGS="-O1 -g" WORKER_STATIC=no \
	  EXTRA_CFLAGS="$(SAN_FLAGS)" EXTRA_LDFLAGS="$(SAN_FLAGS)" all \
	  $(patsubst tests/unit/%.c,$(SAN_BUILD)/bin/tests/%,$(UNIT_TESTS)) $(SAN_BUILD)/bin/tests/sbx-sec-probe

check-sanitize: all sanitize-build
	@rc=0; \
	$(SAN_ENV) tests/run-unit.sh $(patsubst tests/unit/%.c,$(SAN_BUILD)/bin/tests/%,$(UNIT_TESTS)) || rc=1; \
	$(SAN_ENV) SBX_RESULTS_DIR=$(CURDIR)/$(SAN_BUILD)/test-results tests/run-integration.sh || rc=1; \
	$(SAN_ENV) SBX_RESULTS_DIR=$(CURDIR)/$(SAN_BUILD)/test-results tests/security/run.sh || rc=1; \
	$(SAN_ENV) tests/proto/run.sh || rc=1; \
	if [ $$rc -eq 0 ]; then echo "check-sanitize: clean"; else echo "check-sanitize: FAILED"; fi; exit $$rc
