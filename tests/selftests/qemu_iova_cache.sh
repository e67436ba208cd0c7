#!/bin/bash
# qemu_iova_cache - zeropin's QEMU series (qemu-patches/) against the same
# Debian QEMU source built without it (make qemu), nested in the lab host:
# an L2 VM (q35, SeaBIOS, GUEST_MIB of RAM on zeropinfs, the edu passed
# through, an uncompressed vmlinux booted through PVH) starts and runs to
# its kernel's first line, and zeropin's own counters (debugfs) say how many
# MAP_DMA/UNMAP_DMA calls QEMU made and how many bytes it had pinned.
#
#   stock_repins_low_ram        stock QEMU: every PAM/SMRAM change below 1 MiB
#                               unmaps and pins all of low RAM again (the
#                               counts are printed)
#   patched_pins_ram_once       with the series: guest RAM and the BAR are
#                               pinned once; QEMU's own report says 0 bytes
#                               were mapped again with the same translation
#   cache_off_is_stock          with iova-cache=off: the very same ioctls and
#                               bytes as stock
#
# Each QEMU run has a deadline. Skips when the lab carries no QEMU builds
# (tests/run-selftests adds them to one 6.12 boot) or no L2 kernel.
set -u
STOCK=/opt/zeropin/qemu-stock/bin/qemu-system-x86_64
PATCHED=/opt/zeropin/qemu-patched/bin/qemu-system-x86_64
MOD=/lib/zeropin/zeropin.ko
MNT=/mnt/zeropin-qemu
COUNTERS=/sys/kernel/debug/zeropin/iommu_counters
GUEST_MIB=2048
FIRST_LINE_S=240	# nested TCG: QEMU launch, SeaBIOS, the PVH entry
TAP_PREFIX=qemu
. "$(dirname -- "$0")/../lib/tap.sh"

counter() {
	awk -v k="$1" '$1 == k { print $2 }' "$COUNTERS"
}

# Load zeropin with a pool for the guest and mount zeropinfs; wait (90 s at
# most) for the pool to hold the guest's RAM zeroed.
setup() {
	local i
	[ -d /sys/module/zeropin ] || insmod "$MOD" pool_mib=$((GUEST_MIB + 64)) || return 1
	mkdir -p "$MNT"
	grep -q " $MNT zeropinfs " /proc/mounts || mount -t zeropinfs -o size=$((GUEST_MIB * 2))M none "$MNT" || return 1
	for ((i = 0; i < 900; i++)); do
		[ "$(cat /sys/kernel/zeropin/pool/zero_mib)" -ge "$GUEST_MIB" ] && return 0
		sleep 0.1
	done
	echo "# the pool did not zero $GUEST_MIB MiB in 90 s"
}

# start_l2 QEMU DEVICE-OPTIONS: run the L2 until its kernel's first line,
# then quit through the monitor. Sets MAPS, UNMAPS, PINNED_MIB (zeropin's
# counters over the run), REPORT (QEMU's stderr) and LINE (1 when the
# kernel line came).
start_l2() {
	local qemu="$1" opts="$2" maps0 unmaps0 pinned0 pid i
	rm -f /tmp/l2.console "$MNT/l2-ram" /tmp/l2.mon
	mkfifo /tmp/l2.mon
	exec 3<>/tmp/l2.mon
	maps0=$(counter map_ioctls) unmaps0=$(counter unmap_ioctls) pinned0=$(counter pages_pinned_total)
	timeout $((FIRST_LINE_S + 60)) "$qemu" -accel tcg -machine q35 -m "$GUEST_MIB" -nodefaults -nographic \
		-object "memory-backend-file,id=ram0,size=${GUEST_MIB}M,mem-path=$MNT/l2-ram,share=on,align=2M" \
		-machine memory-backend=ram0 -serial file:/tmp/l2.console -monitor stdio \
		-device "vfio-pci,host=$EDU$opts" -kernel /l2/vmlinux \
		-append 'console=ttyS0 earlyprintk=serial,ttyS0 panic=-1' <&3 >/dev/null 2>/tmp/l2.err &
	pid=$!
	LINE=0
	for ((i = 0; i < FIRST_LINE_S * 10; i++)); do
		grep -q 'Linux version' /tmp/l2.console 2>/dev/null && { LINE=1; break; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo quit >&3
	wait "$pid"
	exec 3>&-
	MAPS=$(($(counter map_ioctls) - maps0))
	UNMAPS=$(($(counter unmap_ioctls) - unmaps0))
	PINNED_MIB=$((($(counter pages_pinned_total) - pinned0) * 4 / 1024))
	REPORT=$(grep -v 'no available reset mechanism' /tmp/l2.err)
	rm -f "$MNT/l2-ram"
	echo "# $(basename "$(dirname "$(dirname "$qemu")")")$opts: $MAPS MAP_DMA, $UNMAPS UNMAP_DMA, $PINNED_MIB MiB pinned for $GUEST_MIB MiB of RAM; first line: $LINE"
}

test_stock() {
	start_l2 "$STOCK" ""
	STOCK_COUNTS="$MAPS $UNMAPS $PINNED_MIB"
	if [ "$LINE" = 1 ] && [ "$PINNED_MIB" -gt $((GUEST_MIB * 2)) ]; then
		ok stock_repins_low_ram
	else
		not_ok stock_repins_low_ram "first line: $LINE, $PINNED_MIB MiB pinned (expected the PAM re-pins: > 2x RAM)
$REPORT"
	fi
}

test_patched() {
	start_l2 "$PATCHED" ",iova-cache-report=on"
	# RAM once, plus the BIOS and option ROMs below 1 MiB and at 4 GiB - 256 KiB
	# and the edu's 1 MiB BAR
	if [ "$LINE" = 1 ] && [ "$PINNED_MIB" -le $((GUEST_MIB + 4)) ] &&
		echo "$REPORT" | grep -q 'cache on;.* bytes re-pinned 0;'; then
		ok patched_pins_ram_once
	else
		not_ok patched_pins_ram_once "first line: $LINE, $PINNED_MIB MiB pinned (at most $((GUEST_MIB + 4)))
$REPORT"
	fi
	echo "$REPORT" | sed 's/^/# /'
}

test_cache_off() {
	start_l2 "$PATCHED" ",iova-cache=off"
	if [ "$LINE" = 1 ] && [ "$MAPS $UNMAPS $PINNED_MIB" = "$STOCK_COUNTS" ]; then
		ok cache_off_is_stock
	else
		not_ok cache_off_is_stock "first line: $LINE; MAP_DMA UNMAP_DMA MiB: $MAPS $UNMAPS $PINNED_MIB, stock: $STOCK_COUNTS
$REPORT"
	fi
}

main() {
	[ -x "$STOCK" ] && [ -x "$PATCHED" ] || skip_all "no QEMU builds in this lab boot (make qemu; tests/run-selftests adds them to the 6.12 boot)"
	[ -f /l2/vmlinux ] || skip_all "no L2 kernel at /l2/vmlinux (make lab-userland)"
	EDU=$(edu_device)
	[ -n "$EDU" ] || skip_all "no edu device"
	setup || skip_all "zeropin would not load or mount"
	echo "TAP version 13"
	echo "1..3"
	test_stock
	test_patched
	test_cache_off
	umount "$MNT" 2>/dev/null
	[ "$FAILS" = 0 ]
}

main "$@"
