#!/bin/bash
# qemu_reset - the QEMU series' patch 7 (no VFIO device reset at the
# machine's cold start), nested in the lab host: an emulated NVMe
# controller (scripts/lab --nvme: FLR is its reset method) is bound to
# vfio-pci, which resets it when QEMU opens it, and passed through to the
# L2 of lib/l2.sh; kprobes count VFIO_DEVICE_RESET from QEMU start to its
# quit.
#
#   stock_resets_at_cold_start      stock QEMU resets the device again at
#                                   the machine's first reset, before the
#                                   guest ever ran: 1 VFIO_DEVICE_RESET
#   patched_skips_cold_start_reset  the series: 0, its trace says why, and
#                                   the L2 kernel still comes up
#   patched_resets_on_system_reset  once the guest ran, a system_reset
#                                   (monitor) resets the device as before
#
# Each QEMU run has a deadline. Skips without the QEMU builds, the L2
# kernel, the NVMe controller or kprobe events.
set -u
FIRST_LINE_S=240	# nested TCG: QEMU launch, SeaBIOS, the PVH entry
TAP_PREFIX=qemu_reset
. "$(dirname -- "$0")/../lib/tap.sh"
. "$(dirname -- "$0")/../lib/l2.sh"
NVME_CLASS=0x010802

# The NVMe controller's PCI address, or nothing.
nvme_device() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/class")" = "$NVME_CLASS" ] && { echo "${d##*/}"; return; }
	done
}

# Bind the controller to vfio-pci (it has no driver in the lab).
nvme_to_vfio() {
	local d="/sys/bus/pci/devices/$NVME"
	echo "# echo vfio-pci > $d/driver_override"
	echo vfio-pci >"$d/driver_override"
	echo "$NVME" >/sys/bus/pci/drivers_probe
	[ "$(basename "$(readlink "$d/driver")")" = vfio-pci ]
}

# reset_run QEMU [MONITOR-COMMAND]: the L2 with the controller passed
# through, to its first line (then the monitor command); sets RESETS (the
# VFIO_DEVICE_RESET calls), LINE (1 when the kernel line came), TRACE.
reset_run() {
	local qemu="$1" trace=()
	rm -f /tmp/l2.trace
	[ "$qemu" = "$PATCHED" ] && trace=(-trace vfio_pci_reset_cold_skipped -D /tmp/l2.trace)
	l2_setup >/dev/null
	l2_base_args
	vfio_count_reset
	L2_THEN="${2:-}" l2_timed_start "$qemu" /tmp/l2.console 'Linux version' "${L2_BASE[@]}" "${trace[@]}" \
		-device "vfio-pci,host=$NVME" -kernel /l2/vmlinux -append 'console=ttyS0 earlyprintk=serial,ttyS0 panic=-1'
	vfio_count_read
	RESETS=$VFIO_RESETS
	LINE=0
	[ -z "$RESUME_S" ] || LINE=1
	TRACE=$(cat /tmp/l2.trace 2>/dev/null)
	echo "# $(l2_flavour "$qemu")${2:+, then $2}: $RESETS VFIO_DEVICE_RESET, first line: $LINE, ready in $READY_S s"
}

test_stock() {
	reset_run "$STOCK"
	if [ "$LINE" = 1 ] && [ "$RESETS" = 1 ]; then
		ok stock_resets_at_cold_start
	else
		not_ok stock_resets_at_cold_start "first line: $LINE, VFIO_DEVICE_RESET: $RESETS (expected 1)
$ERR"
	fi
}

test_patched() {
	reset_run "$PATCHED"
	if [ "$LINE" = 1 ] && [ "$RESETS" = 0 ] &&
		echo "$TRACE" | grep -q "vfio_pci_reset_cold_skipped $NVME"; then
		ok patched_skips_cold_start_reset
	else
		not_ok patched_skips_cold_start_reset "first line: $LINE, VFIO_DEVICE_RESET: $RESETS (expected 0)
$TRACE
$ERR"
	fi
}

test_patched_system_reset() {
	reset_run "$PATCHED" system_reset
	if [ "$LINE" = 1 ] && [ "$RESETS" = 1 ]; then
		ok patched_resets_on_system_reset
	else
		not_ok patched_resets_on_system_reset "first line: $LINE, VFIO_DEVICE_RESET after system_reset: $RESETS (expected 1)
$ERR"
	fi
}

main() {
	l2_require
	NVME=$(nvme_device)
	[ -n "$NVME" ] || skip_all "no NVMe controller in the lab (scripts/lab --nvme)"
	nvme_to_vfio || skip_all "could not bind $NVME to vfio-pci"
	vfio_count_arm || skip_all "no kprobe events in this kernel"
	echo "TAP version 13"
	echo "1..3"
	test_stock
	test_patched
	test_patched_system_reset
	vfio_count_disarm
	umount "$MNT" 2>/dev/null
	[ "$FAILS" = 0 ]
}

main "$@"
