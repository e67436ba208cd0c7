#!/bin/bash
# libvirt_reset - the QEMU series' x-skip-initial-reset as an operator
# uses it: libvirt 9.0 starts a VM with the lab's NVMe controller (FLR is
# its reset method) passed through as a managed <hostdev>, under make
# qemu's patched build (the domain's <emulator>), with and without
# zeropin-domxml --skip-initial-reset (the property, on the -device
# libvirt writes); kprobes count QEMU's VFIO_DEVICE_RESET calls between
# `virsh start` and the guest kernel's first line, and time them.
#
#   stock_start_resets_once    without the property: one VFIO_DEVICE_RESET
#                              per start (the machine's initial reset,
#                              right after vfio-pci's own reset on open)
#   skip_start_resets_none     with it: none, and QEMU warns of nothing
#                              (the controller qualifies)
#
# STARTS starts of each, alternating; prints each start's resets, the ms
# inside them and zeropin-timeline's phases. Not in make check's boots
# (it needs --nvme beside libvirt and the QEMU builds; it skips in every
# boot without them):
#   scripts/lab run --kernel 6.12 --edu 2 --mem 6144 --hugepages 0 \
#     --hugepages-1g 0 --nvme --add build/lab/userland --add build/lab/qemu \
#     --add build/lab/l2:/l2 -- /tests/selftests/libvirt_reset
set -u
export PATH=/usr/local/sbin:/usr/local/bin:$PATH
VIRSH=(timeout 180 virsh -q -c qemu:///system)
PATCHED=/opt/zeropin/qemu-patched/bin/qemu-system-x86_64
TRACEFS=/sys/kernel/tracing
INSTANCE=$TRACEFS/instances/zp-libvirt-reset
DEVICE_RESET=0x3b6f	# VFIO_DEVICE_RESET
STARTS=${STARTS:-3}
FIRST_LINE_S=120	# nested TCG: libvirt's launch, SeaBIOS, the PVH entry
TAP_PREFIX=libvirt_reset
. "$(dirname -- "$0")/../lib/tap.sh"
. "$(dirname -- "$0")/../lib/nvme.sh"

# Entry and return probes on vfio-pci's device ioctl; a reset's time is
# from its entry to the next return on the same task.
arm() {
	[ -e "$TRACEFS/kprobe_events" ] || mount -t tracefs tracefs "$TRACEFS" || return 1
	echo 'p:zp_lr_ioctl vfio_pci_core_ioctl cmd=%si:x32' >>"$TRACEFS/kprobe_events" &&
		echo 'r:zp_lr_ioctl_ret vfio_pci_core_ioctl' >>"$TRACEFS/kprobe_events" &&
		mkdir -p "$INSTANCE" &&
		echo 1 >"$INSTANCE/events/kprobes/zp_lr_ioctl/enable" &&
		echo 1 >"$INSTANCE/events/kprobes/zp_lr_ioctl_ret/enable"
}

disarm() {
	echo 0 >"$INSTANCE/events/kprobes/zp_lr_ioctl/enable"
	echo 0 >"$INSTANCE/events/kprobes/zp_lr_ioctl_ret/enable"
	rmdir "$INSTANCE"
	echo '-:zp_lr_ioctl_ret' >>"$TRACEFS/kprobe_events"
	echo '-:zp_lr_ioctl' >>"$TRACEFS/kprobe_events"
}

# "RESETS MS" recorded since the trace was emptied.
resets() {
	awk -v cmd="cmd=$DEVICE_RESET" '
		/zp_lr_ioctl:/ && index($0, cmd) {
			match($0, /[0-9]+\.[0-9]+: zp_lr_ioctl:/); t0 = substr($0, RSTART, RLENGTH - 14) + 0
			task = $1; open = 1; n++; next
		}
		/zp_lr_ioctl_ret:/ && open && $1 == task {
			match($0, /[0-9]+\.[0-9]+: zp_lr_ioctl_ret:/); ms += (substr($0, RSTART, RLENGTH - 18) - t0) * 1000
			open = 0
		}
		END { printf "%d %.1f\n", n, ms }' "$INSTANCE/trace"
}

# define NAME [OPTION...]: the domain from zeropin-domxml (512 MiB on
# zeropinfs, the NVMe passed through, the L2 kernel, the patched QEMU).
define() {
	local name="$1"
	shift
	zeropin-domxml --name "$name" --type qemu --memory-mib 512 --vcpus 1 --hostdev "$NVME" \
		--kernel /l2/vmlinux --cmdline 'console=ttyS0 earlyprintk=serial,ttyS0 panic=-1' \
		--console-log "/tmp/$name-console.log" --timeline --emulator "$PATCHED" "$@" >"/tmp/$name.xml" &&
		"${VIRSH[@]}" define "/tmp/$name.xml" >/dev/null
}

# start_once NAME: virsh start, the kernel's first line, then destroy.
# Sets RESETS, RESET_MS, PHASES (zeropin-timeline's), LINE (1 when the
# kernel line came).
start_once() {
	local s
	: >"$INSTANCE/trace"
	rm -f "/tmp/$1-console.log"
	s=$EPOCHREALTIME
	LINE=0
	if "${VIRSH[@]}" start "$1" >/dev/null 2>"/tmp/$1.err"; then
		for _ in $(seq 1 $((FIRST_LINE_S * 5))); do
			grep -q 'Linux version' "/tmp/$1-console.log" 2>/dev/null && { LINE=1; break; }
			sleep 0.2
		done
	fi
	read -r RESETS RESET_MS <<<"$(resets)"
	PHASES=$(zeropin-timeline "$1" --json --since "$s" 2>/dev/null |
		grep -o '"\(s_a\|a_b\|b_c\|a_c\)_ms":[0-9.]*' | tr -d '"' | tr '\n' ' ')
	"${VIRSH[@]}" destroy "$1" >/dev/null 2>&1
	echo "# $1: $RESETS VFIO_DEVICE_RESET ($RESET_MS ms inside), first line: $LINE; $PHASES"
}

setup() {
	local q=$PATCHED
	lab-libvirtd apparmor || return 1
	# the build under /opt, allowed as an admin would (docs/qemu-series.md)
	grep -qxF "$q PUx," /etc/apparmor.d/local/usr.sbin.libvirtd 2>/dev/null ||
		echo "$q PUx," >>/etc/apparmor.d/local/usr.sbin.libvirtd
	grep -qxF "$q rmix," /etc/apparmor.d/local/abstractions/libvirt-qemu 2>/dev/null ||
		echo "$q rmix," >>/etc/apparmor.d/local/abstractions/libvirt-qemu
	zeropin-host setup --module /lib/zeropin/zeropin.ko --size 2G --pool-mib 1024 --edit-qemu-conf \
		>/tmp/libvirt_reset-setup.log 2>&1 || { cat /tmp/libvirt_reset-setup.log; return 1; }
	lab-libvirtd start && zeropin-timeline --arm >/dev/null
}

teardown() {
	local d
	for d in lr-stock lr-skip; do "${VIRSH[@]}" undefine "$d" >/dev/null 2>&1; done
	lab-libvirtd stop
	zeropin-timeline --disarm
	zeropin-host teardown >/dev/null 2>&1
}

main() {
	local i stock="" bad_stock="" bad_skip=""
	[ -x /usr/sbin/libvirtd ] && command -v zeropin-host >/dev/null || skip_all "no libvirt or zeropin host programs in the lab (make lab-userland)"
	[ -x "$PATCHED" ] || skip_all "no patched QEMU in this lab boot (make qemu; scripts/lab --add build/lab/qemu)"
	[ -f /l2/vmlinux ] || skip_all "no L2 kernel at /l2/vmlinux (scripts/lab-l2-kernel)"
	NVME=$(nvme_device)
	[ -n "$NVME" ] || skip_all "no NVMe controller in the lab (scripts/lab --nvme)"
	[ -d /sys/kernel/security/apparmor ] || skip_all "no AppArmor in this kernel (libvirt would run QEMU unconfined)"
	arm || skip_all "no kprobe events in this kernel"
	setup || { echo "Bail out! libvirt or zeropin setup failed"; disarm; exit 1; }
	echo "TAP version 13"
	echo "1..2"
	define lr-stock && define lr-skip --skip-initial-reset ||
		{ echo "Bail out! defining the domains failed"; teardown; disarm; exit 1; }
	for ((i = 1; i <= STARTS; i++)); do
		start_once lr-stock
		[ "$LINE" = 1 ] && [ "$RESETS" = 1 ] || bad_stock="$bad_stock start $i: $RESETS resets, first line $LINE;"
		stock="$stock $RESET_MS"
		start_once lr-skip
		[ "$LINE" = 1 ] && [ "$RESETS" = 0 ] || bad_skip="$bad_skip start $i: $RESETS resets, first line $LINE;"
		! grep -q 'x-skip-initial-reset=on has no effect' "/var/log/libvirt/qemu/lr-skip.log" 2>/dev/null ||
			bad_skip="$bad_skip QEMU warned that the property has no effect;"
	done
	echo "# ms inside VFIO_DEVICE_RESET per start without the property:$stock"
	if [ -z "$bad_stock" ]; then ok stock_start_resets_once; else not_ok stock_start_resets_once "$bad_stock"; fi
	if [ -z "$bad_skip" ]; then ok skip_start_resets_none; else not_ok skip_start_resets_none "$bad_skip"; fi
	teardown
	disarm
	[ "$FAILS" = 0 ]
}

main "$@"
