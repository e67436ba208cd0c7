#!/bin/bash
# deb_install - zeropin's Debian packages installed as an operator installs
# them: into a minimal Debian of their suite (12 or 13) made by debootstrap
# from the registry this machine installs from, with apt resolving their
# dependencies; then what an operator runs, an upgrade, remove and purge.
# Prints TAP.
#
#   install          apt installs zeropin-tools and zeropin-dkms by name from
#                    a repository scripts/make-repo made (as a fleet does);
#                    DKMS knows the module; zeropin.service is neither
#                    enabled nor started
#   programs_run     zeropin-host, zeropin-domxml and zeropin-timeline run
#                    from /usr, their library found; the XML validates
#   setup_says_why   zeropin-host setup where no module is built for the
#                    running kernel stops at the module, saying so
#   upgrade_keeps_configuration  a newer build of both in the repository,
#                    apt upgrade takes it: the admin's zeropin.conf kept,
#                    DKMS has the module
#   remove_keeps_configuration  remove: the programs go, the configuration
#                    and the hook stay (conffiles), the hook no longer
#                    executable (its #! interpreter went: libvirt skips
#                    it); qemu.conf's memory_backing_dir goes back to what
#                    zeropin-host setup found (no guest RAM on /run after
#                    the next boot); installed again, the hook runs and
#                    passes domains
#   purge_removes_everything    purge: the conffiles and /var/lib/zeropin go
#
# USAGE: tests/host/deb_install.sh [SUITE]   (root; SUITE: bookworm or
#        trixie [DEFAULT: this machine's]; the packages from make deb, or
#        make deb DEBIAN=13 for trixie on a Debian 12 machine)
# Skips when debootstrap is missing or the registry cannot be reached. The
# chroot stays in build/deb-chroot/SUITE for the next run (its base only;
# the packages are installed afresh), so a run costs a download once.
set -u
ROOT=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
. "$ROOT/scripts/lib/common.sh"
HOST_SUITE=$(. /etc/os-release && echo "$VERSION_CODENAME")
SUITE="${1:-$HOST_SUITE}"
DEBS="$ROOT/build/deb"	# make deb's, for this machine's suite
[ "$SUITE" = "$HOST_SUITE" ] || DEBS="$ROOT/build/deb-$SUITE"
CHROOT="$ROOT/build/deb-chroot/$SUITE/root"	# outside build/deb, which make deb empties
BASE_TGZ="$ROOT/build/deb-chroot/$SUITE/base.tar"	# the debootstrapped base, reused
TAP_PREFIX="deb.$SUITE"
. "$ROOT/tests/lib/tap.sh"
. "$ROOT/tests/lib/debs.sh"

in_chroot() {
	timeout 600 chroot "$CHROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"
}

cleanup() {
	umount "$CHROOT/proc" 2>/dev/null
	return 0
}

# A fresh chroot from the saved base, or a debootstrap (saved for next time).
make_chroot() {
	local m
	rm -rf -- "$CHROOT"
	mkdir -p "$CHROOT"
	if [ -s "$BASE_TGZ" ]; then
		tar -xf "$BASE_TGZ" -C "$CHROOT" && return 0
	fi
	m=$(debian_mirror)
	[ -n "$m" ] || return 1
	timeout 1200 debootstrap --variant=minbase "$SUITE" "$CHROOT" "$m" >"${CHROOT%/*}/debootstrap.log" 2>&1 || return 1
	tar -cf "$BASE_TGZ" -C "$CHROOT" .
}

# The packages in $1 (a folder in the chroot) into the chroot's zeropin
# repository, and apt's lists updated.
publish() {
	"$ROOT/scripts/make-repo" "$CHROOT/srv/zeropin" "$CHROOT$1" >/dev/null 2>"${CHROOT%/*}/make-repo.log" &&
		echo "deb [trusted=yes] file:/srv/zeropin $SUITE main" >"$CHROOT/etc/apt/sources.list.d/zeropin.list" &&
		in_chroot apt-get update -q >/dev/null 2>&1
}

test_install() {
	local out rc=0
	publish /tmp/debs || { not_ok "install" "could not make the repository (scripts/make-repo)"; return; }
	out=$(in_chroot apt-get install -y -q --no-install-recommends zeropin-tools zeropin-dkms 2>&1) || rc=$?
	if [ "$rc" = 0 ] && in_chroot dkms status 2>/dev/null | grep -q '^zeropin/' &&
		[ ! -e "$CHROOT/etc/systemd/system/multi-user.target.wants/zeropin.service" ] &&
		[ -f "$CHROOT/lib/systemd/system/zeropin.service" ]; then
		ok "install"
	else
		not_ok "install" "exit $rc: $(echo "$out" | tail -n 15)
dkms: $(in_chroot dkms status 2>&1)"
	fi
}

test_programs_run() {
	local bad=""
	in_chroot zeropin-host --help | grep -q 'USAGE' || bad="$bad zeropin-host"
	in_chroot zeropin-timeline --help | grep -q 'USAGE' || bad="$bad zeropin-timeline"
	in_chroot zeropin-domxml --name vm1 --hostdev 0000:65:00.0 >"$CHROOT/tmp/vm1.xml" &&
		in_chroot xmllint --noout /tmp/vm1.xml || bad="$bad zeropin-domxml"
	in_chroot /etc/libvirt/hooks/qemu.d/zeropin --help | grep -q 'prepare begin' || bad="$bad hook"
	if [ -z "$bad" ]; then
		ok "programs_run"
	else
		not_ok "programs_run" "failed:$bad"
	fi
}

# No module for this machine's kernel in the chroot: setup must stop at
# the module and say what to do, before it touches anything. (Where this
# machine has zeropin loaded, setup would go on and mount on it: skipped.)
test_setup_says_why() {
	local out rc=0
	[ ! -d /sys/module/zeropin ] || { skip setup_says_why "zeropin is loaded on this machine: setup would use it"; return; }
	out=$(in_chroot zeropin-host setup 2>&1) || rc=$?
	if [ "$rc" != 0 ] && echo "$out" | grep -q 'cannot load zeropin.ko: install it' && ! grep -qs zeropinfs /proc/mounts; then
		ok "setup_says_why"
	else
		not_ok "setup_says_why" "exit $rc: $out"
	fi
}

test_upgrade_keeps_configuration() {
	local out rc=0 before after
	before=$(in_chroot dpkg-query -W -f '${Version}' zeropin-tools)
	echo "ZEROPIN_HOOK_WAIT_S=3	# the admin's" >>"$CHROOT/etc/zeropin/zeropin.conf"
	repack_newer "$CHROOT/tmp/debs" "$CHROOT/tmp/debs2" && publish /tmp/debs2 || { not_ok "upgrade_keeps_configuration" "could not repack and publish the packages"; return; }
	out=$(in_chroot apt-get upgrade -y -q 2>&1 </dev/null) || rc=$?
	after=$(in_chroot dpkg-query -W -f '${Version}' zeropin-tools)
	if [ "$rc" = 0 ] && [ "$after" != "$before" ] && dpkg --compare-versions "$after" gt "$before" &&
		grep -q "^ZEROPIN_HOOK_WAIT_S=3" "$CHROOT/etc/zeropin/zeropin.conf" &&
		in_chroot dkms status 2>/dev/null | grep -q '^zeropin/'; then
		ok "upgrade_keeps_configuration"
		echo "# $before -> $after"
	else
		not_ok "upgrade_keeps_configuration" "exit $rc, $before -> $after: $(echo "$out" | tail -n 10)"
	fi
}

test_remove_keeps_configuration() {
	local out rc=0 hook_rc=0 qc="$CHROOT/etc/libvirt/qemu.conf"
	# as zeropin-host setup --edit-qemu-conf leaves libvirt's qemu.conf
	printf '# qemu.conf
user = "libvirt-qemu"
memory_backing_dir = "/run/zeropin"
' >"$qc"
	mkdir -p "$CHROOT/var/lib/zeropin"
	printf '/etc/libvirt/qemu.conf
/run/zeropin

unset
' >"$CHROOT/var/lib/zeropin/qemu-conf"
	local hook="$CHROOT/etc/libvirt/hooks/qemu.d/zeropin" after_remove=""
	out=$(in_chroot apt-get remove -y -q zeropin-tools 2>&1) || rc=$?
	[ -f "$hook" ] && [ ! -x "$hook" ] && after_remove=ok
	if [ "$rc" = 0 ] && [ ! -e "$CHROOT/usr/sbin/zeropin-host" ] && [ -f "$CHROOT/etc/zeropin/zeropin.conf" ] &&
		[ "$after_remove" = ok ] && ! grep -q memory_backing_dir "$qc" && grep -q '^user = "libvirt-qemu"$' "$qc"; then
		# installed again (dpkg keeps the conffile as it is): executable
		in_chroot apt-get install -y -q --no-install-recommends zeropin-tools >/dev/null 2>&1 </dev/null || rc=$?
		in_chroot /etc/libvirt/hooks/qemu.d/zeropin vm1 prepare begin - <"$CHROOT/tmp/vm1.xml" >/dev/null 2>&1 || hook_rc=$?
		in_chroot apt-get remove -y -q zeropin-tools >/dev/null 2>&1 || rc=$?
	fi
	if [ "$rc" = 0 ] && [ "$after_remove" = ok ] && [ "$hook_rc" = 0 ] && [ ! -x "$hook" ] &&
		! grep -q memory_backing_dir "$qc" && grep -q '^user = "libvirt-qemu"$' "$qc"; then
		ok "remove_keeps_configuration"
	else
		not_ok "remove_keeps_configuration" "exit $rc, the hook's ${after_remove:-still executable after remove}, after reinstall $hook_rc; qemu.conf: $(tr '\n' ' ' <"$qc"): $(echo "$out" | tail -n 5)"
	fi
}

test_purge_removes_everything() {
	local out rc=0
	mkdir -p "$CHROOT/var/lib/zeropin" && echo saved >"$CHROOT/var/lib/zeropin/qemu-conf"
	out=$(in_chroot apt-get purge -y -q zeropin-tools zeropin-dkms 2>&1) || rc=$?
	if [ "$rc" = 0 ] && [ ! -e "$CHROOT/etc/zeropin/zeropin.conf" ] && [ ! -e "$CHROOT/etc/libvirt/hooks/qemu.d/zeropin" ] &&
		[ ! -e "$CHROOT/var/lib/zeropin" ] && [ ! -e "$CHROOT/usr/src/zeropin-"* ]; then
		ok "purge_removes_everything"
	else
		not_ok "purge_removes_everything" "exit $rc: $(echo "$out" | tail -n 5)"
	fi
}

main() {
	[ "$(id -u)" = 0 ] || skip_all "needs root (chroot)"
	command -v debootstrap >/dev/null || skip_all "no debootstrap (scripts/install-deps deb)"
	ls "$DEBS"/zeropin-tools_*.deb "$DEBS"/zeropin-dkms_*.deb >/dev/null 2>&1 || skip_all "no packages for $SUITE in $DEBS (make deb)"
	trap cleanup EXIT
	make_chroot || skip_all "debootstrap from the registry failed (see ${CHROOT%/*}/debootstrap.log)"
	mkdir -p "$CHROOT/tmp/debs" && cp "$DEBS"/zeropin-*.deb "$CHROOT/tmp/debs/"
	command -v reprepro >/dev/null || skip_all "no reprepro (scripts/install-deps deb)"
	mount -t proc proc "$CHROOT/proc"
	cp /etc/resolv.conf "$CHROOT/etc/resolv.conf" 2>/dev/null
	in_chroot apt-get update -q >/dev/null 2>&1 || skip_all "apt-get update in the chroot failed: no registry"
	echo "TAP version 13"
	echo "1..6"
	test_install
	test_programs_run
	test_setup_says_why
	test_upgrade_keeps_configuration
	test_remove_keeps_configuration
	test_purge_removes_everything
	[ "$FAILS" = 0 ]
}

main "$@"
