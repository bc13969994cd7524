# libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined):
#   make fuzz                 runs each target for FUZZ_SECONDS (30 s), new inputs
#                             kept under $(BUILD)/fuzz/corpus/<name>/
#   make check-fuzz-corpus    replays the seed corpora tests/fuzz/corpus/<name>/
#                             once through each target (part of make check);
#                             prints TAP and "N passed, N failed"
# Targets: tests/fuzz/fuzz-<name>.c (frames, config, JSON-RPC lines, edit
# payloads, stored attribution, sbx-egress's request heads and verdicts, digests of sandbox output, the JUnit XML reports among them). fuzz-config links sbxd's configuration
# parser (supervisor/core/config.c) alone, the very code sbxd runs.
# FUZZ_SECONDS=N sets the time per target.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ         := $(BUILD)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1
FUZZ_NAMES   := wire config jsonrpc edits attribution egress-request egress-verdict digest redact digest-junit
FUZZ_BINS    := $(patsubst %,$(FUZZ)/bin/fuzz-%,$(FUZZ_NAMES))

fuzzobj = $(patsubst %.c,$(FUZZ)/obj/%.o,$(1))
FUZZ_LIB_SRCS := $(COMMON_SRCS) $(PROTO_SRCS)

$(FUZZ)/obj/%.o: %.c $(GEN)/sbx.pb-c.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(ALL_CPPFLAGS) -std=gnu11 -Wno-unused-parameter -fsanitize=fuzzer-no-link $(FUZZ_SAN) -MMD -MP -c $< -o $@

# Header dependencies, as for the main build: an object compiled against an
# older header (a struct that changed size) would fail the replay as a
# stack-use-after-scope far from any bug.
-include $(shell find $(FUZZ)/obj -name '*.d' 2>/dev/null)

$(FUZZ)/obj/gen/sbx.pb-c.o: $(GEN)/sbx.pb-c.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(ALL_CPPFLAGS) -std=gnu11 -fsanitize=fuzzer-no-link $(FUZZ_SAN) -c $< -o $@

FUZZ_LIB_OBJS = $(call fuzzobj,$(FUZZ_LIB_SRCS)) $(FUZZ)/obj/gen/sbx.pb-c.o

$(FUZZ)/bin/fuzz-wire: $(call fuzzobj,tests/fuzz/fuzz-wire.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

$(FUZZ)/bin/fuzz-config: $(call fuzzobj,tests/fuzz/fuzz-config.c supervisor/core/config.c supervisor/core/egress.c \
		supervisor/core/runtime.c supervisor/core/box-config.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

$(FUZZ)/bin/fuzz-jsonrpc: $(call fuzzobj,tests/fuzz/fuzz-jsonrpc.c $(BROKER_LIB_SRCS)) \
		$$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

$(FUZZ)/bin/fuzz-edits: $(call fuzzobj,tests/fuzz/fuzz-edits.c supervisor/data/fileops.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

$(FUZZ)/bin/fuzz-attribution: $(call fuzzobj,tests/fuzz/fuzz-attribution.c supervisor/data/attribution.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

# sbx-egress's request heads (egress/request.c), and sbxd's decoder of its verdicts.
$(FUZZ)/bin/fuzz-egress-request: $(call fuzzobj,tests/fuzz/fuzz-egress-request.c egress/request.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

$(FUZZ)/bin/fuzz-egress-verdict: $(call fuzzobj,tests/fuzz/fuzz-egress-verdict.c supervisor/core/egress.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

# The digest parsers of the artifacts set (issue 19): sandbox output.
$(FUZZ)/bin/fuzz-digest: $(call fuzzobj,tests/fuzz/fuzz-digest.c broker/digest.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

# The streaming redactor of box output (issue 21): sandbox output and secret values.
$(FUZZ)/bin/fuzz-redact: $(call fuzzobj,tests/fuzz/fuzz-redact.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

# The digest's JUnit XML parser (libxml2): a report a sandbox printed.
$(FUZZ)/bin/fuzz-digest-junit: $(call fuzzobj,tests/fuzz/fuzz-digest-junit.c broker/digest.c) $$(FUZZ_LIB_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ $(PKG_LIBS) -o $@

.PHONY: fuzz fuzz-build check-fuzz-corpus
fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@set -e; for n in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZ)/corpus/$$n; \
	  echo "== fuzz-$$n for $(FUZZ_SECONDS) s"; \
	  $(FUZZ)/bin/fuzz-$$n -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=1 \
	    $(FUZZ)/corpus/$$n tests/fuzz/corpus/$$n 2>&1 | grep -E '^#|stat::|ERROR|SUMMARY|Done' | tail -8; \
	done

check-fuzz-corpus:
	@if ! command -v $(FUZZ_CC) >/dev/null; then \
	  echo "# skipped: $(FUZZ_CC) is not installed"; echo "0 passed, 0 failed"; exit 0; fi
	@$(MAKE) --no-print-directory -s fuzz-build >$(BUILD)/fuzz-build.log 2>&1 || { \
	  tail -20 $(BUILD)/fuzz-build.log; echo "not ok 1 - build the fuzz targets"; echo "0 passed, 1 failed"; exit 1; }
	@p=0; f=0; i=0; for n in $(FUZZ_NAMES); do \
	  i=$$((i + 1)); k=$$(ls tests/fuzz/corpus/$$n | wc -l); \
	  if $(FUZZ)/bin/fuzz-$$n -runs=1 tests/fuzz/corpus/$$n/* >$(FUZZ)/replay-$$n.log 2>&1; then \
	    echo "ok $$i - fuzz-$$n replays its $$k seed inputs"; p=$$((p + 1)); \
	  else echo "not ok $$i - fuzz-$$n on its seed corpus"; tail -30 $(FUZZ)/replay-$$n.log | sed 's/^/# /'; f=$$((f + 1)); fi; \
	done; echo "$$p passed, $$f failed"; test $$f -eq 0
