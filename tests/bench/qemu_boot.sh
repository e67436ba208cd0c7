#!/bin/bash
# qemu_boot - the QEMU series' benchmark (make bench runs it in one 6.12 lab
# boot that carries both QEMU builds): the L2 of lib/l2.sh (q35, SeaBIOS,
# GUEST_MIB of RAM, the edu passed through) started paused, resumed and run
# to its kernel's first line; stock and patched QEMU (the series with its
# defaults), each on zeropin (guest RAM on zeropinfs)
# and on stock type1 (anonymous guest RAM, zeropin not claiming type1v2),
# and without the device ("none": guest RAM on zeropinfs, no VFIO - the
# same VM as a CPU VM, what a GPU VM's start is compared with), REPS times,
# round-robin.
#
# USAGE: (in the lab) qemu_boot [--reps N]                  [DEFAULT: 3]
#
# One JSON line per start:
#   {"bench":"qemu_boot","kernel","qemu":"stock|patched","driver":
#    "none|type1|zeropin","rep","guest_mib","map_ioctls","unmap_ioctls",
#    "mib_mapped","init_ms","firmware_ms"}
# map/unmap ioctls and MiB mapped: kprobes on VFIO's container ioctl (the
# same count for every build and driver); init_ms: QEMU start
# until its monitor answers (realize, guest RAM mapped for VFIO);
# firmware_ms: resume to the kernel's first line. Timings are TCG in TCG: compare within a run.
set -u
FIRST_LINE_S=600	# nested TCG, stock type1 re-pinning all of RAM 4 times
TAP_PREFIX=qemu_boot
. "$(dirname -- "$0")/../lib/tap.sh"
. "$(dirname -- "$0")/../lib/l2.sh"
CLAIM=/sys/module/zeropin/parameters/claim_type1v2
REPS=3

die() { echo "qemu_boot: $*" >&2; exit 1; }

# One start; prints its JSON line.
start_once() {
	local qemu="$1" driver="$2" rep="$3" flavour ram="" claim=1
	flavour=$(l2_flavour "$qemu")
	flavour=${flavour#qemu-}
	if [ "$driver" = type1 ]; then
		ram=anonymous
		claim=0
	fi
	echo "# echo $claim > $CLAIM"
	echo "$claim" >"$CLAIM"
	l2_base_args $ram
	l2_kernel_args "$EDU"
	# no device: the same VM as a CPU VM, the baseline of a GPU VM's start
	[ "$driver" = none ] && L2_KERNEL=(-kernel /l2/vmlinux -append "$L2_CMDLINE")
	vfio_count_reset
	l2_timed_start "$qemu" /tmp/l2.console 'Linux version' "${L2_BASE[@]}" "${L2_KERNEL[@]}"
	[ -n "$RESUME_S" ] || die "$flavour on $driver: no kernel line in $FIRST_LINE_S s: $ERR"
	vfio_count_read
	printf '{"bench":"qemu_boot","kernel":"%s","qemu":"%s","driver":"%s","rep":%d,"guest_mib":%d,' \
		"$(uname -r | cut -d. -f1,2)" "$flavour" "$driver" "$rep" "$GUEST_MIB"
	printf '"map_ioctls":%d,"unmap_ioctls":%d,"mib_mapped":%d,' \
		"$VFIO_MAPS" "$VFIO_UNMAPS" "$VFIO_MAP_MIB"
	printf '"init_ms":%.0f,"firmware_ms":%.0f}\n' \
		"$(echo "$READY_S * 1000" | bc)" "$(echo "$RESUME_S * 1000" | bc)"
}

main() {
	local rep q d
	while [ $# -gt 0 ]; do
		case "$1" in
		--reps) REPS="$2"; shift 2 ;;
		*) die "unknown option $1 (USAGE: qemu_boot [--reps N])" ;;
		esac
	done
	[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "--reps $REPS: want a number"
	l2_require
	vfio_count_arm || die "cannot put a kprobe on vfio_fops_unl_ioctl (CONFIG_KPROBE_EVENTS?)"
	for ((rep = 1; rep <= REPS; rep++)); do
		for q in "$STOCK" "$PATCHED"; do
			for d in none type1 zeropin; do
				l2_setup >/dev/null	# the pool idle before every start
				start_once "$q" "$d" "$rep"
			done
		done
	done
	echo 1 >"$CLAIM"
	vfio_count_disarm
	umount "$MNT" 2>/dev/null
}

main "$@"
