# make check-vm: the README's "Install and run as a service" on a real systemd
# host with pure cgroup v2 (included at the end of GNUmakefile). A Debian 12
# guest under QEMU's software emulation installs the binaries of
# VM_BUILD_DIR with `make install`, runs sbxd.service and one MCP session
# against it; tests/vm/run.sh, docs/check-vm.md.
#
#   make check-vm [VM_BUILD_DIR=build] [VM_CACHE_DIR=/var/cache/sbx-ci/vm]
#                 [VM_TIMEOUT=900] [VM_POWEROFF=forced|clean]
#
# VM_BUILD_DIR is the build directory whose bin/ and obj/ are installed: this
# tree's build/ (built first) or one made elsewhere from the same sources.

VM_BUILD_DIR ?= $(BUILD)
VM_CACHE_DIR ?= /var/cache/sbx-ci/vm
VM_TIMEOUT   ?= 900
VM_POWEROFF  ?= forced

.PHONY: check-vm

check-vm: deps
	$(if $(filter $(BUILD),$(VM_BUILD_DIR)),@$(MAKE) --no-print-directory all)
	@VM_BUILD_DIR='$(VM_BUILD_DIR)' VM_CACHE_DIR='$(VM_CACHE_DIR)' VM_TIMEOUT='$(VM_TIMEOUT)' \
		VM_POWEROFF='$(VM_POWEROFF)' tests/vm/run.sh
