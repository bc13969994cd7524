# Installation, and the operations checks (included at the end of GNUmakefile).
#
#   make install   [DESTDIR=] [PREFIX=/usr/local] [BINDIR=] [SBINDIR=] [LIBEXECDIR=]
#                  [MANDIR=] [SYSCONFDIR=/etc] [UNITDIR=/lib/systemd/system]
#                  [SYSUSERSDIR=] [TMPFILESDIR=] [BASHCOMPDIR=]
#   make uninstall (the same variables)
#   make check-install   install into a temporary DESTDIR, list, uninstall,
#                        prove nothing is left
#   make check-ops       check-install, systemd-analyze verify, mandoc on the
#                        installed pages, sbxd --check-config, sbxctl against
#                        a private sbxd (tests/check-ops.sh; TAP output)
#
# sbxd goes to SBINDIR, sbxctl, sandbox-mcp and sbx-gateway to BINDIR, sbx-worker to
# LIBEXECDIR/sbx/ (where sbxd looks for it, SBX_LIBEXECDIR). The unit, the
# example configuration and the man pages name the configured paths: their
# sources use the defaults (/usr/local/..., /etc/sbx) and are rewritten here.
# The configuration file is installed only if absent, and uninstalled only if
# unchanged, so an administrator's edits survive both.

SYSUSERSDIR ?= /usr/lib/sysusers.d
TMPFILESDIR ?= /usr/lib/tmpfiles.d
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions

INSTALL ?= install

MAN_PAGES := $(sort $(wildcard man/*.[1-9]))

# Default paths in dist/ and man/ -> the configured ones; .Os gets the version.
INSTALL_SUBST = sed -e 's|/usr/local/sbin/|$(SBINDIR)/|g' \
                    -e 's|/usr/local/bin/|$(BINDIR)/|g' \
                    -e 's|/usr/local/libexec/sbx/|$(LIBEXECDIR)/sbx/|g' \
                    -e 's|/etc/sbx/|$(SYSCONFDIR)/sbx/|g' \
                    -e 's|^\.Os$$|.Os sbx $(VERSION)|'

INSTALL_DIRS = $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)/sbx \
               $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7 \
               $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
               $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(SYSCONFDIR)/sbx $(DESTDIR)$(BASHCOMPDIR)

.PHONY: install uninstall check-install check-ops

install: all
	$(INSTALL) -d -m 0755 $(INSTALL_DIRS)
	$(INSTALL) -m 0755 $(BIN)/sbxd $(DESTDIR)$(SBINDIR)/sbxd
	$(INSTALL) -m 0755 $(BIN)/sbxctl $(BIN)/sandbox-mcp $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 0755 $(BIN)/sbx-gateway $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 0755 $(BIN)/sbx-worker $(DESTDIR)$(LIBEXECDIR)/sbx/sbx-worker
	$(INSTALL) -m 0755 $(BIN)/sbx-image-build $(DESTDIR)$(LIBEXECDIR)/sbx/sbx-image-build
	$(INSTALL) -m 0755 $(BIN)/sbx-egress $(DESTDIR)$(LIBEXECDIR)/sbx/sbx-egress
	$(INSTALL) -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/sbx/images.d
	@set -e; for f in dist/images.d/*.conf; do \
		t=$(DESTDIR)$(SYSCONFDIR)/sbx/images.d/$${f##*/}; \
		if [ -e $$t ]; then echo "keeping the existing $$t"; \
		else echo "$(INSTALL) -m 0644 $$f $$t"; $(INSTALL) -m 0644 $$f $$t; fi; \
	done
	@set -e; for m in $(MAN_PAGES); do \
		s=$${m##*.}; \
		echo "$(INSTALL_SUBST) $$m > $(DESTDIR)$(MANDIR)/man$$s/$${m#man/}"; \
		$(INSTALL_SUBST) $$m > $(DESTDIR)$(MANDIR)/man$$s/$${m#man/}; \
		chmod 0644 $(DESTDIR)$(MANDIR)/man$$s/$${m#man/}; \
	done
	$(INSTALL_SUBST) dist/sbxd.service > $(DESTDIR)$(UNITDIR)/sbxd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/sbxd.service
	$(INSTALL_SUBST) dist/sbx-gateway.service > $(DESTDIR)$(UNITDIR)/sbx-gateway.service
	$(INSTALL) -m 0644 dist/sbx-gateway.socket $(DESTDIR)$(UNITDIR)/sbx-gateway.socket
	chmod 0644 $(DESTDIR)$(UNITDIR)/sbx-gateway.service
	$(INSTALL) -m 0644 dist/sbx.sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/sbx.conf
	$(INSTALL) -m 0644 dist/sbx.tmpfiles.conf $(DESTDIR)$(TMPFILESDIR)/sbx.conf
	$(INSTALL) -m 0644 $(COMPLETION) $(DESTDIR)$(BASHCOMPDIR)/sbxctl
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/sbx/sbxd.conf ]; then \
		echo "keeping the existing $(DESTDIR)$(SYSCONFDIR)/sbx/sbxd.conf"; \
	else \
		echo "$(INSTALL_SUBST) dist/sbxd.conf > $(DESTDIR)$(SYSCONFDIR)/sbx/sbxd.conf"; \
		$(INSTALL_SUBST) dist/sbxd.conf > $(DESTDIR)$(SYSCONFDIR)/sbx/sbxd.conf && \
		chmod 0644 $(DESTDIR)$(SYSCONFDIR)/sbx/sbxd.conf; \
	fi
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/sbx/gateway.conf ]; then \
		echo "keeping the existing $(DESTDIR)$(SYSCONFDIR)/sbx/gateway.conf"; \
	else \
		echo "$(INSTALL_SUBST) dist/gateway.conf > $(DESTDIR)$(SYSCONFDIR)/sbx/gateway.conf"; \
		$(INSTALL_SUBST) dist/gateway.conf > $(DESTDIR)$(SYSCONFDIR)/sbx/gateway.conf && \
		chmod 0644 $(DESTDIR)$(SYSCONFDIR)/sbx/gateway.conf; \
	fi

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/sbxd $(DESTDIR)$(BINDIR)/sbxctl $(DESTDIR)$(BINDIR)/sandbox-mcp \
	      $(DESTDIR)$(BINDIR)/sbx-gateway $(DESTDIR)$(UNITDIR)/sbx-gateway.service \
	      $(DESTDIR)$(UNITDIR)/sbx-gateway.socket \
	      $(DESTDIR)$(LIBEXECDIR)/sbx/sbx-worker $(DESTDIR)$(LIBEXECDIR)/sbx/sbx-image-build \
	      $(DESTDIR)$(LIBEXECDIR)/sbx/sbx-egress \
	      $(foreach m,$(MAN_PAGES),$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
	      $(DESTDIR)$(UNITDIR)/sbxd.service $(DESTDIR)$(SYSUSERSDIR)/sbx.conf \
	      $(DESTDIR)$(TMPFILESDIR)/sbx.conf $(DESTDIR)$(BASHCOMPDIR)/sbxctl
	@f=$(DESTDIR)$(SYSCONFDIR)/sbx/sbxd.conf; \
	if [ -e $$f ]; then \
		if $(INSTALL_SUBST) dist/sbxd.conf | cmp -s - $$f; then \
			echo "rm -f $$f"; rm -f $$f; \
		else \
			echo "keeping $$f: it was changed after installation"; \
		fi; \
	fi
	@f=$(DESTDIR)$(SYSCONFDIR)/sbx/gateway.conf; \
	if [ -e $$f ]; then \
		if $(INSTALL_SUBST) dist/gateway.conf | cmp -s - $$f; then \
			echo "rm -f $$f"; rm -f $$f; \
		else \
			echo "keeping $$f: it was changed after installation"; \
		fi; \
	fi
	@for f in dist/images.d/*.conf; do \
		t=$(DESTDIR)$(SYSCONFDIR)/sbx/images.d/$${f##*/}; \
		if [ -e $$t ]; then \
			if cmp -s $$f $$t; then echo "rm -f $$t"; rm -f $$t; \
			else echo "keeping $$t: it was changed after installation"; fi; \
		fi; \
	done
	@for d in $(DESTDIR)$(LIBEXECDIR)/sbx $(DESTDIR)$(SYSCONFDIR)/sbx/images.d $(DESTDIR)$(SYSCONFDIR)/sbx; do \
		[ ! -d $$d ] || rmdir $$d 2>/dev/null || echo "keeping $$d: not empty"; \
	done

check-install: all
	@tests/check-ops.sh install

check-ops: all
	@tests/check-ops.sh
