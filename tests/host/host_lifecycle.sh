#!/bin/bash
# host_lifecycle - a zeropin host's whole life as one test, in a Debian
# lab host (scripts/lab-host: systemd on a persistent disk under TCG, the
# lab's VT-d and edu devices): zeropin's .debs from an apt repository
# (scripts/make-repo) installed, configured and the unit enabled, a reboot
# that brings pool, mount, bindings and hook back with nothing done by
# hand, a GPU VM through libvirt, the packages upgraded while it runs (it
# keeps running, zeropin stays up; the new module is used from the next
# boot), a reboot, apt remove while a VM runs (it keeps running; qemu.conf
# given back), a reboot with nothing of zeropin left running and no RAM on
# /run, purge. One line per step; the last says "host-lifecycle: N steps
# ok". The guest side of each step: tests/host/lifecycle-guest.sh.
#
# USAGE: tests/host/host_lifecycle.sh [SUITE]     (root; make check-host)
#   SUITE  trixie (Debian 13) or bookworm (Debian 12)   [DEFAULT: trixie]
#   about 25 minutes, most of it two DKMS builds and four boots under TCG
set -u
ROOT=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
. "$ROOT/scripts/lib/common.sh"
. "$ROOT/tests/lib/debs.sh"
LAB_HOST="$ROOT/scripts/lab-host"
SUITE="${1:-trixie}"
case "$SUITE" in
trixie) RELEASE=13 ;;
bookworm) RELEASE=12 ;;
*) echo "host-lifecycle: suite '$SUITE': want trixie or bookworm" >&2; exit 2 ;;
esac
WORK="$ZP_BUILD/lifecycle-$SUITE"
NAME="lifecycle-$SUITE"
STEP_TIMEOUT_S=1500	# the longest step: an apt upgrade with a DKMS build under TCG
STEPS=0

# Run a guest step: its own deadline, its output on one line.
guest() {
	timeout "$STEP_TIMEOUT_S" "$LAB_HOST" ssh --name "$NAME" "bash /root/lifecycle-guest.sh $1" 2>&1 | tr '\n' ' '
	return "${PIPESTATUS[0]}"
}

# step NAME CMD...: run it, print the step's line; a failed step ends
# the life (the later ones build on it).
step() {
	local name="$1" t0 out rc=0
	shift
	t0=$SECONDS
	out=$("$@" 2>&1) || rc=$?
	STEPS=$((STEPS + 1))
	if [ "$rc" = 0 ]; then
		echo "ok $STEPS host-lifecycle.$name ($((SECONDS - t0)) s): $(echo "$out" | tail -n 1)"
	else
		echo "not ok $STEPS host-lifecycle.$name ($((SECONDS - t0)) s)"
		echo "$out" | tail -n 15 | sed 's/^/#   /'
		finish 1
	fi
}

finish() {
	"$LAB_HOST" stop --name "$NAME" >/dev/null 2>&1
	echo "1..$STEPS"
	if [ "$1" = 0 ]; then
		echo "host-lifecycle: $STEPS steps ok"
	else
		echo "host-lifecycle: failed at step $STEPS"
	fi
	exit "$1"
}

# The packages twice: as make deb DEBIAN=13 builds them, and a newer
# build whose module differs (repack_newer), each in the repository at
# its turn.
make_packages() {
	rm -rf "$WORK" && mkdir -p "$WORK"
	make -s -C "$ROOT" deb DEBIAN="$RELEASE" >"$WORK/deb.log" 2>&1 || { tail -n 5 "$WORK/deb.log"; return 1; }
	# make deb's output: build/deb for this machine's release, else build/deb-SUITE
	if [ "$(. /etc/os-release && echo "$VERSION_ID")" = "$RELEASE" ]; then
		cp -r "$ZP_BUILD/deb" "$WORK/v1"
	else
		cp -r "$ZP_BUILD/deb-$SUITE" "$WORK/v1"
	fi
	repack_newer "$WORK/v1" "$WORK/v2" "host-lifecycle upgrade" || return 1
	"$ROOT/scripts/make-repo" "$WORK/repo" "$WORK/v1" 2>&1 | tail -n 1
}

# The repository into the guest, at /srv/zeropin.
publish() {
	tar -C "$WORK" -cf "$WORK/repo.tar" repo &&
		"$LAB_HOST" put --name "$NAME" "$WORK/repo.tar" "$ROOT/tests/host/lifecycle-guest.sh" /root/ &&
		"$LAB_HOST" ssh --name "$NAME" "rm -rf /srv/zeropin && tar -C /srv -xf /root/repo.tar && mv /srv/repo /srv/zeropin"
}

newer_in_repo() {
	"$ROOT/scripts/make-repo" "$WORK/repo" "$WORK/v2" 2>&1 | tail -n 1 && publish
}

boot() {
	"$LAB_HOST" image --suite "$SUITE" >"$WORK/image.log" 2>&1 || { tail -n 5 "$WORK/image.log"; return 1; }
	timeout 1200 "$LAB_HOST" start --name "$NAME" --suite "$SUITE" --edu 1 --mem 3072 2>&1 | tail -n 1
	return "${PIPESTATUS[0]}"
}

# The VM stopped first, as an operator drains a host (its kernel has no
# init: it would hold libvirt-guests' shutdown for its whole timeout).
reboot_host() {
	"$LAB_HOST" ssh --name "$NAME" "virsh -q destroy g1 >/dev/null 2>&1; true"
	timeout 900 "$LAB_HOST" reboot --name "$NAME" 2>&1 | tail -n 1
	return "${PIPESTATUS[0]}"
}

main() {
	[ "$(id -u)" = 0 ] || { echo "host-lifecycle: needs root"; exit 1; }
	echo "TAP version 13"
	step packages make_packages
	step boot boot
	step publish publish
	step install guest install
	step configure guest configure
	step reboot reboot_host
	step up_after_reboot guest check_up
	step gpu_vm_starts guest vm_start
	step publish_newer newer_in_repo
	step upgrade_while_vm_runs guest upgrade
	step reboot_after_upgrade reboot_host
	step new_module_after_reboot guest new_module_loaded
	step gpu_vm_starts_again guest vm_start
	step remove_while_vm_runs guest remove
	step reboot_after_remove reboot_host
	step nothing_left_running guest gone_after_reboot
	step purge guest purge
	finish 0
}

main "$@"
