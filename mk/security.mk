# The isolation battery (tests/security/): a probe binary that the battery
# copies into a sandbox's workspace and runs there, then node --test files.
SEC_PROBE := $(BIN)/tests/sbx-sec-probe

$(SEC_PROBE): tests/security/probe.c
	@mkdir -p $(@D)
	$(CC) -D_GNU_SOURCE -std=gnu11 -O2 -g -Wall -Wextra $< -o $@

.PHONY: check-security
check-security: all $(SEC_PROBE)
	@tests/security/run.sh
