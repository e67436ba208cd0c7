# zeropin - top-level Makefile. See README.md.
#
#   make demo            the main job: a GPU VM started through libvirt in the
#                        Debian 13 lab host, stock and on zeropin (installed
#                        from its packages), beside a CPU-only VM
#                        (DEMO_STARTS, DEMO_MIB); results under build/demo/;
#                        make demo DEBIAN=12: in the Debian 12 lab, with
#                        the QEMU series' rows
#   make                 build zeropin.ko (KDIR=..., else the running kernel's
#                        build directory, else the lab's 6.12 headers)
#   make KVER=6.1|6.12   build against a lab kernel (fetched on demand)
#   make KVER=7.2        upstream's newest, Debian unstable's kernel: its
#                        headers through a private apt state, the module
#                        built in a sid root with sid's gcc, the compiler
#                        that kernel was built with (scripts/kernel-make)
#   make tests           build the selftests and benchmarks (static binaries)
#   make qemu            Debian 13's QEMU 10.0 built stock and with
#                        qemu-patches/debian-13/ (scripts/qemu-build), under
#                        build/qemu/
#   make qemu-upstream   the upstream series on its upstream release: git am,
#                        checkpatch.pl, each prefix built and its qtests run
#   make check           install deps, build for both kernels and make qemu,
#                        run every selftest in the lab on both (the QEMU
#                        series nested on 6.12), print TAP and one summary
#   make check-debug     the same suite on the debug lab kernel (6.12 with
#                        lockdep, KASAN, DEBUG_VM, kmemleak, fault
#                        injection), built first if needed
#   make check-upstream  the suite on upstream's newest kernel, Debian
#                        unstable's 7.2 (make KVER=7.2's module), in the
#                        lab: its own target, as it does not fit make
#                        check's hour beside 6.12 and 6.1
#   make check-host      the short demo on the Debian 13 lab host, then a
#                        host's life from the packages in it and in the
#                        Debian 12 one (scripts/lab-host): install, reboot,
#                        a GPU VM, upgrade while it runs, remove, purge
#   make bench           the benchmarks in the lab, both kernels and
#                        upstream's newest (7.2)
#   make install         a real host: the host programs under PREFIX, the
#                        libvirt hook and zeropin.service (enabled), the
#                        module through DKMS (signed with DKMS's MOK key,
#                        rebuilt at kernel upgrades); without dkms, into
#                        the kernel's extra/ (KDIR's kernel: the running
#                        one by default), saying what that lacks;
#                        make install-tools: the programs and hook only
#   make hook            the libvirt hook's compiled fast path (its #!
#                        interpreter, scripts/libvirt/zeropin-libvirt-hook.c)
#   make uninstall       undo make install (qemu.conf's memory_backing_dir
#                        put back first)
#   make dkms-install    a real host: install through DKMS (needs dkms)
#   make repo            an apt repository of both suites' packages under
#                        build/repo (scripts/make-repo, reprepro)
#   make deb             Debian packages zeropin-dkms and zeropin-tools
#                        (packaging/debian), checked by lintian; build/deb/;
#                        versioned VERSION-DEB_REVISION+debN for the suite
#                        they are for; make deb DEBIAN=13: trixie's, built
#                        in a trixie root, into build/deb-trixie/
#
# Every output lives under build/.

BUILD      := $(CURDIR)/build
LAB_SERIES := 6.12 6.1
DEBUG_SERIES := 6.12-debug
UPSTREAM_SERIES := 7.2
SRCS       := Kbuild kernel/Kbuild $(wildcard kernel/*.c kernel/*.h)

ifneq ($(KVER),)
  KDIR := $(BUILD)/kernels/$(KVER)/headers
  TAG  := $(KVER)
else ifneq ($(KDIR),)
  TAG  := kdir-$(notdir $(realpath $(KDIR)))
else ifneq ($(wildcard /lib/modules/$(shell uname -r)/build/Makefile),)
  KDIR := /lib/modules/$(shell uname -r)/build
  TAG  := host-$(shell uname -r)
else
  KVER := 6.12
  KDIR := $(BUILD)/kernels/$(KVER)/headers
  TAG  := $(KVER)
  NO_HOST_KERNEL := 1
endif

# Kbuild writes objects next to the sources it is given; a tree of links
# under build/ keeps the source folders clean.
MODDIR := $(BUILD)/module/$(TAG)

# A lab kernel of another Debian suite (tests/lab/kernels' fourth field)
# builds in that suite's root with its compiler (scripts/kernel-make); the
# root's make hears nothing of ours, so -s is passed on by hand.
KSUITE := $(if $(KVER),$(shell awk '$$1 == "$(KVER)" { print $$4 }' tests/lab/kernels))
KMAKE  := $(if $(KSUITE),scripts/kernel-make $(KVER) $(if $(findstring s,$(firstword -$(MAKEFLAGS))),-s),$(MAKE) -C $(KDIR))

VERSION    := $(shell sed -n 's/^\#define ZEROPIN_VERSION "\(.*\)"/\1/p' kernel/zeropin.h)
DKMS_SRC   ?= /usr/src/zeropin-$(VERSION)

.PHONY: hook check-host check-upstream deb repo all module install-module kernel-headers tests lab-userland qemu qemu-upstream check check-debug bench demo clean dkms-install dkms-uninstall install install-tools uninstall

all: module

module: kernel-headers
	@mkdir -p $(MODDIR)/kernel
	@for f in $(SRCS); do ln -sfn $(CURDIR)/$$f $(MODDIR)/$$f; done
	$(KMAKE) M=$(MODDIR) modules
	@echo "built $(MODDIR)/kernel/zeropin.ko"

kernel-headers:
ifneq ($(KVER),)
	@scripts/lab-kernel $(KVER)
endif

tests:
	$(MAKE) -C tests

# Where make qemu's stock build sits in its root (patched: s/stock/patched/),
# and in the lab.
QEMU_BIN := /opt/zeropin/qemu-stock/bin/qemu-system-x86_64

# Host programs the lab guest carries (QEMU and libvirt for nested tests,
# see tests/lab/userland), the lab's libvirt configuration and AppArmor
# profiles (scripts/lab-apparmor), zeropin's host
# programs installed as on a host, and the uncompressed kernel L2 boots;
# bpftrace (200 MB with LLVM) in a tree of its own, for one boot per kernel;
# the QEMU builds (make qemu, if made) in another, for the nested boot.
lab-userland:
	scripts/lab-tree $(BUILD)/lab/userland $$(grep -v '^\s*\(#\|$$\)' tests/lab/userland)
	cp -r tests/lab/libvirt/. $(BUILD)/lab/userland/
	scripts/lab-apparmor $(BUILD)/lab/userland
	$(MAKE) --no-print-directory install-tools DESTDIR=$(BUILD)/lab/userland PREFIX=/usr/local \
		HOOKDIR=/etc/libvirt/hooks/qemu.d CONFDIR=/etc/zeropin >/dev/null
	scripts/lab-l2-kernel >/dev/null
	scripts/lab-tree $(BUILD)/lab/bpftrace /usr/bin/bpftrace
	rm -rf $(BUILD)/lab/qemu
	if [ -x $(QEMU_BIN:%=$(BUILD)/qemu/stock/root%) ] && [ -x $(BUILD)/qemu/patched/root$(subst stock,patched,$(QEMU_BIN)) ]; then \
		scripts/lab-tree $(BUILD)/lab/qemu $(foreach f,stock patched,$(BUILD)/qemu/$(f)/root$(subst stock,$(f),$(QEMU_BIN))=$(subst stock,$(f),$(QEMU_BIN))); fi

# Debian 13's QEMU 10.0, stock and with the series, for nested tests and
# the demo (about 15 minutes cold, then only what changed).
qemu:
	scripts/qemu-build

# The series in upstream's form on the upstream release it records (not
# in make check: about 35 minutes cold): git am, checkpatch.pl, every
# prefix built and the series' qtests run on it, under build/qemu-upstream/.
qemu-upstream:
	scripts/qemu-build --upstream

# make check: Debian's two kernels. make check-debug: the debug lab kernel,
# built from Debian's linux-source-6.12 (about 12 minutes from cold; cached
# under build/, rebuilt when tests/lab/debug.config changes) and booted for
# about 20 more: together they would not fit make check's hour.
check: CHECK_SERIES := $(LAB_SERIES)
check-debug: CHECK_SERIES := $(DEBUG_SERIES)
check-upstream: CHECK_SERIES := $(UPSTREAM_SERIES)
# make check starts with a short demo, from the same clean tree: README's
# first command, in its own build order (DEMO_STARTS=1, DEMO_MIB=1024,
# one UEFI start, no second size; rows whose path another row or test
# already takes are left out: gpu-zeropinfs-type1 is libvirt_start's
# zeropinfs_with_type1_starts, gpu-zeropin+unpatched is gpu-zeropin's
# start under another binary, cpu-only-uefi and gpu-stock-uefi are
# cpu-only's and gpu-stock's under OVMF, about 3 minutes of TCG for a
# 64 GiB BAR through type1, gpu-zeropin-uefi and
# gpu-zeropin+unpatched-uefi are gpu-zeropin+qemu-uefi's start under
# other firmware or another binary), on the Debian 12 lab, with the QEMU
# series' rows: the Debian 13 lab host's image and DKMS build would take
# make check past its hour (make check-host runs the short demo there).
# make check's leaves out the UEFI row too (about 5 minutes, for the
# QEMU 10.0 build's; qemu_ram_once boots OVMF with SMM under the series
# nested).
SHORT_DEMO_SKIP := gpu-zeropinfs-type1 gpu-zeropin+unpatched cpu-only-uefi gpu-stock-uefi gpu-zeropin-uefi gpu-zeropin+unpatched-uefi
SHORT_DEMO = DEMO_STARTS=1 DEMO_MIB=1024 DEMO_UEFI_STARTS=1 DEMO_BIG_MIB=0 DEMO_SKIP='$(SHORT_DEMO_SKIP)' scripts/demo/run
check: SHORT_DEMO_SKIP += gpu-zeropin+qemu-uefi
check: CHECK_DEMO = DEMO_DEBIAN=12 $(SHORT_DEMO)
check check-debug check-upstream:
	$(CHECK_DEMO)
	scripts/install-deps
	@for k in $(CHECK_SERIES); do $(MAKE) --no-print-directory KVER=$$k module || exit 1; done
	@for k in $(CHECK_SERIES); do scripts/lab-mdev $$k || exit 1; done
	$(MAKE) qemu tests lab-userland
	tests/run-selftests $(CHECK_SERIES)

# make demo: on the Debian 13 lab host (scripts/lab-host), zeropin from its
# packages; make demo DEBIAN=12: on the Debian 12 lab.
demo:
	DEMO_DEBIAN=$(if $(filter command line,$(origin DEBIAN)),$(DEBIAN),13) scripts/demo/run

# The Debian 13 lab host, beyond make check's hour: the short demo there
# (zeropin from its packages; about 15 minutes from cold, most of it the
# lab host's image), then a host's whole life from the packages in it and
# in the Debian 12 one (tests/host/host_lifecycle.sh; about 25 minutes
# each); CHECK_HOST_SUITES picks the lives.
CHECK_HOST_SUITES ?= trixie bookworm
check-host:
	scripts/install-deps deb
	DEMO_DEBIAN=13 $(SHORT_DEMO)
	@for s in $(CHECK_HOST_SUITES); do tests/host/host_lifecycle.sh $$s || exit 1; done

bench:
	scripts/install-deps
	@for k in $(LAB_SERIES) $(UPSTREAM_SERIES); do $(MAKE) --no-print-directory KVER=$$k module || exit 1; done
	$(MAKE) qemu tests lab-userland
	tests/bench/run $(LAB_SERIES) $(UPSTREAM_SERIES)

# A real host: the sources where DKMS wants them, then build and install
# for every kernel DKMS knows (AUTOINSTALL rebuilds on kernel upgrades).
# dkms remove first: the same version with changed sources is rebuilt, not
# skipped as already installed.
dkms-install:
	-dkms remove zeropin/$(VERSION) --all 2>/dev/null
	rm -rf $(DKMS_SRC)
	mkdir -p $(DKMS_SRC)/kernel
	cp Kbuild $(DKMS_SRC)/
	cp kernel/Kbuild kernel/*.c kernel/*.h $(DKMS_SRC)/kernel/
	sed 's/@VERSION@/$(VERSION)/' kernel/dkms.conf > $(DKMS_SRC)/dkms.conf
	dkms install zeropin/$(VERSION)

dkms-uninstall:
	-dkms remove zeropin/$(VERSION) --all
	rm -rf $(DKMS_SRC)

# Debian packages (packaging/build-debs), checked by lintian of the suite
# they are for: an error or a warning fails the build. Versioned for that
# suite, as Debian versions a backport: 0.9.0-1+deb12 (bookworm) sorts
# below 0.9.0-1+deb13 (trixie), so a host upgraded from 12 to 13 takes the
# newer build. DEB_REVISION counts builds of one zeropin version (a fix to
# the packaging alone); build both suites with the same one (make repo
# does), or 0.9.0-2+deb12 would sort above 0.9.0-1+deb13. DEBIAN=12|13 builds for that release in its own
# root (scripts/buildroot) when this machine runs another, into
# build/deb-SUITE; the machine's own suite builds here, into build/deb.
HOST_RELEASE := $(shell . /etc/os-release 2>/dev/null && echo $$VERSION_ID)
DEBIAN       ?= $(HOST_RELEASE)
DEB_SUITE    := $(if $(filter 12,$(DEBIAN)),bookworm,$(if $(filter 13,$(DEBIAN)),trixie))
DEB_REVISION ?= 1
DEB_VERSION  := $(VERSION)-$(DEB_REVISION)+deb$(DEBIAN)
DEB_OUT      := $(BUILD)/deb$(if $(filter $(HOST_RELEASE),$(DEBIAN)),,-$(DEB_SUITE))
deb:
	@[ -n "$(DEB_SUITE)" ] || { echo "make deb: DEBIAN=$(DEBIAN): want 12 (bookworm) or 13 (trixie)"; exit 1; }
	scripts/install-deps deb
	packaging/build-debs $(DEB_OUT) $(DEB_VERSION) $(DEB_SUITE) $(if $(filter $(HOST_RELEASE),$(DEBIAN)),,--buildroot)

# A local apt repository (scripts/make-repo) of both suites' packages,
# each built as make deb builds it: a fleet installs and upgrades with apt.
repo:
	$(MAKE) --no-print-directory deb DEBIAN=12
	$(MAKE) --no-print-directory deb DEBIAN=13
	scripts/make-repo $(BUILD)/repo $(BUILD)/deb$(if $(filter 12,$(HOST_RELEASE)),,-bookworm) $(BUILD)/deb$(if $(filter 13,$(HOST_RELEASE)),,-trixie)
	@echo "apt source: deb [trusted=yes] file:$(BUILD)/repo SUITE main (bookworm or trixie)"

# --- the libvirt hook's fast path ---
# The installed hook's #! interpreter: it does a start's common cases
# itself and hands the rest to the script (see its header). The build
# flags are the caller's (dpkg-buildflags' in make deb). Linked
# statically (a position-independent static binary): libvirt runs it
# several times per VM start, and the dynamic loader alone costs ~25 ms
# a run under the lab's nested TCG (11 ms a run static, 56 dynamic).
HOOK_BIN := $(BUILD)/hook/zeropin-libvirt-hook
HOOK_SRC := scripts/libvirt/zeropin-libvirt-hook.c
HOOK_WARN := -Wall -Wextra -Wformat=2 -Wshadow
hook: $(HOOK_BIN)
$(HOOK_BIN): $(HOOK_SRC)
	@mkdir -p $(@D)
	$(CC) $(HOOK_WARN) $(or $(CFLAGS),-O2) $(CPPFLAGS) $(LDFLAGS) -static-pie -o $@ $<

# --- installing on a real host ---
PREFIX   ?= /usr/local
HOOKDIR  ?= /etc/libvirt/hooks/qemu.d
CONFDIR  ?= /etc/zeropin
SYSTEMDDIR ?= /lib/systemd/system
MODPROBEDIR ?= /etc/modprobe.d
KREL     := $(shell cat $(KDIR)/include/config/kernel.release 2>/dev/null)
HOST_LIB := $(PREFIX)/lib/zeropin/host.sh
HOOK_INTERP := $(PREFIX)/lib/zeropin/zeropin-libvirt-hook
# program:installed-path; each finds host.sh at HOST_LIB once installed
TOOLS    := scripts/zeropin-host:sbin/zeropin-host scripts/zeropin-domxml:bin/zeropin-domxml \
            scripts/zeropin-timeline:bin/zeropin-timeline

UNIT := zeropin.service
# What only a host's own install does: DKMS, systemctl. Off with a DESTDIR,
# or HOST_ACTIONS=0 (the tests install under a prefix of their own).
HOST_ACTIONS ?= $(if $(DESTDIR),0,1)
ON_HOST = [ "$(HOST_ACTIONS)" = 1 ]
ON_HOST_SYSTEMD = $(ON_HOST) && [ -d /run/systemd/system ]

install: install-tools
	@! $(ON_HOST) || ! dpkg-query -W -f '$${Status}' zeropin-dkms 2>/dev/null | grep -q 'ok installed' || \
		{ echo "make install: zeropin-dkms is installed from a package: upgrade it with apt (make repo), or remove it first"; exit 1; }
	@if $(ON_HOST) && command -v dkms >/dev/null; then \
		$(MAKE) --no-print-directory dkms-install; \
	else \
		echo "make install: no dkms: the module goes into the kernel's extra/, unsigned (refused under Secure Boot) and not rebuilt at kernel upgrades; apt-get install dkms and make install again to fix both"; \
		$(MAKE) --no-print-directory install-module; \
	fi
	if $(ON_HOST_SYSTEMD); then systemctl daemon-reload && systemctl enable $(UNIT); \
	else echo "make install: enable $(UNIT) on the host (systemctl enable $(UNIT)): it sets the host up at every boot"; fi

install-module: module
	@[ -z "$(NO_HOST_KERNEL)" ] || { echo "make install: no build directory for the running kernel ($(shell uname -r)): install linux-headers-$(shell uname -r), or name one with KDIR= or KVER="; exit 1; }
	@[ -n "$(KREL)" ] || { echo "make install: no kernel release in $(KDIR)"; exit 1; }
	install -D -m 644 $(MODDIR)/kernel/zeropin.ko $(DESTDIR)/lib/modules/$(KREL)/extra/zeropin.ko
	[ -n "$(DESTDIR)" ] || depmod -a $(KREL)

install-tools: $(HOOK_BIN)
	install -D -m 644 scripts/lib/host.sh $(DESTDIR)$(HOST_LIB)
	install -D -m 755 $(HOOK_BIN) $(DESTDIR)$(HOOK_INTERP)
	@for t in $(TOOLS); do \
		src=$${t%%:*}; dst=$(DESTDIR)$(PREFIX)/$${t#*:}; \
		echo "install $$src $$dst"; mkdir -p $$(dirname $$dst); \
		sed 's|^ZP_HOST_LIB=.*|ZP_HOST_LIB=$(HOST_LIB)|' $$src > $$dst && chmod 755 $$dst || exit 1; \
	done
	mkdir -p $(DESTDIR)$(HOOKDIR)
	sed -e '1s|^#!/bin/bash$$|#!$(HOOK_INTERP)|' -e 's|^ZP_HOST_LIB=.*|ZP_HOST_LIB=$(HOST_LIB)|' \
		scripts/libvirt/qemu.d/zeropin > $(DESTDIR)$(HOOKDIR)/zeropin
	chmod 755 $(DESTDIR)$(HOOKDIR)/zeropin
	[ -f $(DESTDIR)$(CONFDIR)/zeropin.conf ] || install -D -m 644 scripts/zeropin.conf $(DESTDIR)$(CONFDIR)/zeropin.conf
	install -d $(DESTDIR)$(PREFIX)/share/zeropin/bpftrace
	install -m 755 scripts/bpftrace/*.bt $(DESTDIR)$(PREFIX)/share/zeropin/bpftrace/
	install -m 644 scripts/bpftrace/*.example.txt $(DESTDIR)$(PREFIX)/share/zeropin/bpftrace/
	mkdir -p $(DESTDIR)$(SYSTEMDDIR)
	sed 's|@SBINDIR@|$(PREFIX)/sbin|g' scripts/systemd/zeropin.service > $(DESTDIR)$(SYSTEMDDIR)/zeropin.service
	chmod 644 $(DESTDIR)$(SYSTEMDDIR)/zeropin.service
	[ -f $(DESTDIR)$(MODPROBEDIR)/zeropin.conf ] || install -D -m 644 scripts/systemd/zeropin.modprobe.conf $(DESTDIR)$(MODPROBEDIR)/zeropin.conf

# qemu.conf first (the installed zeropin-host, as configured: ZP_CONF and
# ZP_STATE_DIR point it elsewhere), then the unit and DKMS on a host.
uninstall:
	[ -n "$(DESTDIR)" ] || [ ! -x $(PREFIX)/sbin/zeropin-host ] || $(PREFIX)/sbin/zeropin-host restore-qemu-conf
	if $(ON_HOST_SYSTEMD) && [ -f $(SYSTEMDDIR)/$(UNIT) ]; then systemctl disable $(UNIT); fi
	! $(ON_HOST) || ! command -v dkms >/dev/null || ! dkms status zeropin/$(VERSION) 2>/dev/null | grep -q . || \
		dpkg-query -W -f '$${Status}' zeropin-dkms 2>/dev/null | grep -q 'ok installed' || $(MAKE) --no-print-directory dkms-uninstall
	rm -f $(DESTDIR)$(HOST_LIB) $(DESTDIR)$(HOOK_INTERP) $(DESTDIR)$(HOOKDIR)/zeropin $(DESTDIR)$(SYSTEMDDIR)/zeropin.service
	rm -rf $(DESTDIR)$(PREFIX)/share/zeropin
	@for t in $(TOOLS); do rm -f $(DESTDIR)$(PREFIX)/$${t#*:}; done
	-rmdir $(DESTDIR)$(PREFIX)/lib/zeropin 2>/dev/null
	[ -z "$(KREL)" ] || rm -f $(DESTDIR)/lib/modules/$(KREL)/extra/zeropin.ko
	[ -n "$(DESTDIR)" ] || [ -z "$(KREL)" ] || depmod -a $(KREL)
	@echo "$(CONFDIR)/zeropin.conf and $(MODPROBEDIR)/zeropin.conf kept (remove them by hand)"

clean:
	rm -rf $(BUILD)/module $(BUILD)/tests $(BUILD)/lab $(BUILD)/hook
