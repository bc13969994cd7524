# Installation paths and build knobs; override on the command line.
VERSION    ?= 0.1.0
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBEXECDIR ?= $(PREFIX)/libexec
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
UNITDIR    ?= /lib/systemd/system

CC         ?= cc
PKG_CONFIG ?= pkg-config
PKGS       := inih libnl-3.0 libnl-route-3.0 libcap libprotobuf-c libbsd-overlay jansson libseccomp sqlite3 libgit2 \
              nettle libmicrohttpd libarchive libxml-2.0 \
              libzstd
TEST_PKGS  := cmocka

# The Debian package of each pkg-config module above (and of the one build
# tool outside them): the build names it when a module is missing, and
# tests/check-deps.sh proves that tests/deps.sh installs each one.
PKG_DEBS   := inih:libinih-dev libnl-3.0:libnl-3-dev libnl-route-3.0:libnl-route-3-dev \
              libcap:libcap-dev libprotobuf-c:libprotobuf-c-dev libbsd-overlay:libbsd-dev \
              jansson:libjansson-dev libseccomp:libseccomp-dev sqlite3:libsqlite3-dev \
              libgit2:libgit2-dev cmocka:libcmocka-dev nettle:nettle-dev libmicrohttpd:libmicrohttpd-dev \
              libarchive:libarchive-dev libxml-2.0:libxml2-dev \
              libzstd:libzstd-dev
TOOL_DEBS  := protoc-c:protobuf-c-compiler

# sbx-worker is exec'd once per workspace session: linked statically it skips
# the dynamic loader (about a millisecond per session). "no" links it like the
# others (the sanitizer build does, since ASan needs the dynamic runtime).
WORKER_STATIC ?= yes
WORKER_PKGS := libprotobuf-c libbsd-overlay

CFLAGS     ?= -O2 -g
WARNFLAGS  := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wformat=2 \
              -Werror=implicit-function-declaration -Wno-unused-parameter
HARDEN     := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
