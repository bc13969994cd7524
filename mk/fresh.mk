# make check-fresh: the README's two commands (make run, then make check-quick)
# in a fresh Debian 12 root filesystem built by mmdebstrap from the host's apt
# sources, with a git archive of HEAD in it (tests/fresh/run.sh, which says
# what is mounted and carried in). Needs root and the network; installs its
# host tools first (tests/deps.sh --fresh). Part of .ci/run, not of make check.
#   FRESH_CACHE  .deb packages kept between runs (the root filesystem never is)
#   FRESH_OUT    logs, inner test results, and build/: the build directory made inside,
#                for later stages (FRESH_OUT/commit names their commit)
#   FRESH_WORK   where the root filesystem is built, and removed afterwards
FRESH_CACHE ?= /var/cache/sbx-ci/fresh/archives
FRESH_OUT   ?= $(BUILD)/fresh
FRESH_WORK  ?= /var/tmp

.PHONY: check-fresh
check-fresh:
	@tests/deps.sh --fresh
	@FRESH_CACHE='$(FRESH_CACHE)' FRESH_OUT='$(FRESH_OUT)' FRESH_WORK='$(FRESH_WORK)' tests/fresh/run.sh
