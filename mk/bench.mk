# The benchmark suite (bench/): `make bench` builds everything, then runs
# bench/run.sh, which installs the peers it compares against (apt, npm),
# prints a table and writes bench/results/latest.json. Not part of `make check`.
# BENCH_SCALE (default 1) scales the sizes and counts down for a quick run,
# e.g. `make bench BENCH_SCALE=0.1`.
BENCH_DIR   := $(BUILD)/bench
BENCH_DRIVE := $(BENCH_DIR)/mcpdrive
BENCH_MINSESS := $(BENCH_DIR)/minsess
BENCH_SCALE ?= 1
BENCH_DIGEST := $(BENCH_DIR)/digestbench
BENCH_ZSCAN := $(BENCH_DIR)/zscanbench

$(BENCH_DRIVE): bench/mcpdrive.c
	@mkdir -p $(@D)
	$(CC) -D_GNU_SOURCE -std=gnu11 -O2 -g -Wall -Wextra $< $$($(PKG_CONFIG) --cflags --libs jansson) -o $@

$(BENCH_MINSESS): bench/minsess.c
	@mkdir -p $(@D)
	$(CC) -D_GNU_SOURCE -std=gnu11 -O2 -g -Wall -Wextra $< -o $@

# The digest row (issue 19): the broker's parsers, in-process.
$(BENCH_DIGEST): bench/digestbench.c $(BUILD)/obj/broker/digest.o $(LIBSBX)
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) -std=gnu11 -O2 -g -Wall -Wextra $< $(BUILD)/obj/broker/digest.o $(LIBSBX) $(PKG_LIBS) -o $@

# The persisted scan row (issue 19): zstd frames decompressed and searched, in-process.
$(BENCH_ZSCAN): bench/zscanbench.c $(BUILD)/obj/supervisor/data/zframes.o $(LIBSBX)
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) -std=gnu11 -O2 -g -Wall -Wextra $< $(BUILD)/obj/supervisor/data/zframes.o $(LIBSBX) $(PKG_LIBS) -o $@

.PHONY: bench bench-tools
bench-tools: $(BENCH_DRIVE) $(BENCH_MINSESS) $(BENCH_DIGEST) $(BENCH_ZSCAN)

bench: all $(BENCH_DRIVE) $(BENCH_MINSESS) $(BENCH_DIGEST) $(BENCH_ZSCAN)
	@BENCH_SCALE=$(BENCH_SCALE) BENCH_BIN=$(BIN) BENCH_DRIVE=$(BENCH_DRIVE) BENCH_MINSESS=$(BENCH_MINSESS) \
	  BENCH_DIGEST=$(BENCH_DIGEST) BENCH_ZSCAN=$(BENCH_ZSCAN) bench/run.sh
