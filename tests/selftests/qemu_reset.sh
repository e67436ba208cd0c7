#!/bin/bash
# qemu_reset - the QEMU series' opt-in vfio-pci property x-skip-initial-reset
# (no VFIO device reset at the machine's initial reset, right after the
# kernel's reset on open), nested in the lab host: an emulated NVMe
# controller (scripts/lab --nvme: FLR is its reset method) is bound to
# vfio-pci, which resets it when QEMU opens it, and passed through to the
# L2 of lib/l2.sh; kprobes count VFIO_DEVICE_RESET from QEMU start to its
# quit.
#
#   stock_resets_at_initial_reset   stock QEMU resets the device again at
#                                   the machine's first reset, before the
#                                   guest ever ran: 1 VFIO_DEVICE_RESET
#   patched_resets_without_opt_in   the series without the property: the
#                                   same 1 (the default does not change)
#   patched_skips_initial_reset     the series, x-skip-initial-reset=on: 0,
#                                   its trace says why, and the L2 kernel
#                                   still comes up
#   patched_resets_on_system_reset  with it, once the guest ran, a
#                                   system_reset (monitor) resets the
#                                   device as before
#   patched_warns_without_function_reset  the opt-in on an edu (no
#                                   function reset: reset_works=0) does
#                                   nothing and says so at start, with
#                                   the reason; the L2 still comes up
#   vf_stock_resets_at_initial_reset  the controller's SR-IOV VF (the GPU-P
#   vf_patched_skips_initial_reset  stand-in) passed through instead,
#                                   L2 running l2_nvme_init.c as /init: the
#                                   same counts, zeropin's container maps
#                                   L2's RAM, and the VF's DMA (Identify
#                                   Controller into an L2 page) arrives
#                                   intact in L2
#
# Each QEMU run has a deadline. Skips without the QEMU builds, the L2
# kernel, the NVMe controller or kprobe events; the VF cases fail when the
# VF cannot be created.
set -u
FIRST_LINE_S=240	# nested TCG: QEMU launch, SeaBIOS, the PVH entry
TAP_PREFIX=qemu_reset
. "$(dirname -- "$0")/../lib/tap.sh"
. "$(dirname -- "$0")/../lib/l2.sh"
. "$(dirname -- "$0")/../lib/nvme.sh"
USERSPACE_S=900		# nested TCG: a whole L2 kernel boot, then /init
L2_INITRD=/tests/nested/l2-nvme.cpio

SKIP_OPT=",x-skip-initial-reset=on"	# the series' opt-in, on the device
SKIP_TRACE=vfio_pci_reset_initial_skipped	# its trace event
# QEMU's warning where the opt-in cannot act (hw/vfio/pci.c)
NO_EFFECT="x-skip-initial-reset=on has no effect: the device has no function reset"

# reset_run QEMU DEVICE-OPTIONS [MONITOR-COMMAND [DEVICE]]: the L2 with
# the controller (or DEVICE) passed through, to its first line (then the
# monitor command); sets RESETS (the VFIO_DEVICE_RESET calls), LINE (1
# when the kernel line came), TRACE.
reset_run() {
	local qemu="$1" trace=()
	rm -f /tmp/l2.trace
	[ "$qemu" = "$PATCHED" ] && trace=(-trace "$SKIP_TRACE" -D /tmp/l2.trace)
	l2_setup >/dev/null
	l2_base_args
	l2_kernel_args "${4:-$NVME}" "$2"
	vfio_count_reset
	L2_THEN="${3:-}" l2_timed_start "$qemu" /tmp/l2.console 'Linux version' "${L2_BASE[@]}" "${trace[@]}" "${L2_KERNEL[@]}"
	vfio_count_read
	RESETS=$VFIO_RESETS
	LINE=0
	[ -z "$RESUME_S" ] || LINE=1
	TRACE=$(cat /tmp/l2.trace 2>/dev/null)
	echo "# $(l2_flavour "$qemu")$2${3:+, then $3}: $RESETS VFIO_DEVICE_RESET, first line: $LINE, ready in $READY_S s"
}

# resets_once NAME: the L2 came up and its device was reset once.
resets_once() {
	if [ "$LINE" = 1 ] && [ "$RESETS" = 1 ]; then
		ok "$1"
	else
		not_ok "$1" "first line: $LINE, VFIO_DEVICE_RESET: $RESETS (expected 1)
$ERR"
	fi
}

test_stock() {
	reset_run "$STOCK" ""
	resets_once stock_resets_at_initial_reset
	reset_run "$PATCHED" ""
	resets_once patched_resets_without_opt_in
}

test_patched() {
	reset_run "$PATCHED" "$SKIP_OPT"
	if [ "$LINE" = 1 ] && [ "$RESETS" = 0 ] &&
		echo "$TRACE" | grep -q "$SKIP_TRACE $NVME"; then
		ok patched_skips_initial_reset
	else
		not_ok patched_skips_initial_reset "first line: $LINE, VFIO_DEVICE_RESET: $RESETS (expected 0)
$TRACE
$ERR"
	fi
}

# The edu has no function reset (reset_works=0): QEMU falls back to its
# own bus or PM reset, so the opt-in must not act, and must say so.
test_patched_warns() {
	if ! pci_bind "$EDU" vfio-pci; then
		not_ok patched_warns_without_function_reset "could not bind $EDU to vfio-pci"
		return
	fi
	reset_run "$PATCHED" "$SKIP_OPT" "" "$EDU"
	if [ "$LINE" = 1 ] && grep -q "$EDU.*$NO_EFFECT" /tmp/l2.err && [ -z "$TRACE" ]; then
		ok patched_warns_without_function_reset
	else
		not_ok patched_warns_without_function_reset "first line: $LINE, warnings: $(grep -c "$NO_EFFECT" /tmp/l2.err) (expected 1), trace: ${TRACE:-none} (expected none)
$(cat /tmp/l2.err)"
	fi
}

test_patched_system_reset() {
	reset_run "$PATCHED" "$SKIP_OPT" system_reset
	if [ "$LINE" = 1 ] && [ "$RESETS" = 1 ]; then
		ok patched_resets_on_system_reset
	else
		not_ok patched_resets_on_system_reset "first line: $LINE, VFIO_DEVICE_RESET after system_reset: $RESETS (expected 1)
$ERR"
	fi
}

# vf_run QEMU DEVICE-OPTIONS: the L2 with the VF passed through, to the end of its
# l2_nvme_init; sets RESETS, TRACE, MAPS (zeropin's MAP_DMA calls), L2_LOG
# (l2_nvme_init's lines, or the console's end without them).
vf_run() {
	local qemu="$1" maps0 trace=()
	rm -f /tmp/l2.trace /tmp/l2.console
	[ "$qemu" = "$PATCHED" ] && trace=(-trace "$SKIP_TRACE" -D /tmp/l2.trace)
	l2_setup >/dev/null
	l2_base_args
	vfio_count_reset
	maps0=$(counter iommu_counters map_ioctls)
	timeout "$USERSPACE_S" "$qemu" "${L2_BASE[@]}" "${trace[@]}" -monitor none -no-reboot \
		-device "vfio-pci,host=$VF$2" -kernel /l2/vmlinux -initrd "$L2_INITRD" \
		-append 'console=ttyS0 panic=-1 oops=panic rdinit=/init' </dev/null >/dev/null 2>/tmp/l2.err
	vfio_count_read
	RESETS=$VFIO_RESETS
	MAPS=$(($(counter iommu_counters map_ioctls) - maps0))
	TRACE=$(cat /tmp/l2.trace 2>/dev/null)
	L2_LOG=$(tr -d '\r' </tmp/l2.console 2>/dev/null | grep -o 'l2-nvme: .*')
	[ -n "$L2_LOG" ] || L2_LOG="(no l2-nvme line; the console's end:)
$(tail -n 8 /tmp/l2.console 2>/dev/null)
$(cat /tmp/l2.err)"
	rm -f "$MNT/l2-ram"
	echo "# $(l2_flavour "$qemu"), VF $VF: $RESETS VFIO_DEVICE_RESET, $MAPS MAP_DMA through zeropin"
	echo "$L2_LOG" | sed 's/^/#   /'
}

# vf_check NAME WANT-RESETS [TRACE-LINE]: the resets counted, L2's RAM
# mapped through zeropin's container, and the VF's own Identify data (its
# controller id, not the PF's) arrived in L2's page.
vf_check() {
	l2_skip_if_died "$1" && return
	if [ "$RESETS" = "$2" ] && [ "$MAPS" -gt 0 ] &&
		echo "$L2_LOG" | grep -q "^l2-nvme: identify ok sn=$NVME_SERIAL cntlid=$NVME_VF_CNTLID$" &&
		{ [ -z "${3:-}" ] || echo "$TRACE" | grep -q "$3"; }; then
		ok "$1"
	else
		not_ok "$1" "VFIO_DEVICE_RESET: $RESETS (expected $2), MAP_DMA through zeropin: $MAPS
$L2_LOG
$TRACE"
	fi
}

test_vf() {
	local why
	if ! VF=$(nvme_vf_create "$NVME" 2>/tmp/nvme_vf.err); then
		why=$(cat /tmp/nvme_vf.err)
		not_ok vf_stock_resets_at_initial_reset "no VF: $why"
		not_ok vf_patched_skips_initial_reset "no VF: $why"
	else
		sed 's/^\([^#]\)/# \1/' /tmp/nvme_vf.err
		l2_retry 'l2-nvme: ' vf_run "$STOCK" ""
		vf_check vf_stock_resets_at_initial_reset 1
		l2_retry 'l2-nvme: ' vf_run "$PATCHED" "$SKIP_OPT"
		vf_check vf_patched_skips_initial_reset 0 "$SKIP_TRACE $VF"
	fi
	rm -f /tmp/nvme_vf.err
	nvme_vf_remove "$NVME"
}

main() {
	l2_require
	NVME=$(nvme_device)
	[ -n "$NVME" ] || skip_all "no NVMe controller in the lab (scripts/lab --nvme)"
	pci_bind "$NVME" vfio-pci || skip_all "could not bind $NVME to vfio-pci"
	vfio_count_arm || skip_all "no kprobe events in this kernel"
	echo "TAP version 13"
	echo "1..7"
	test_stock
	test_patched
	test_patched_system_reset
	test_patched_warns
	test_vf
	vfio_count_disarm
	umount "$MNT" 2>/dev/null
	[ "$FAILS" = 0 ]
}

main "$@"
