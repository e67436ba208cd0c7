#!/bin/bash
# qemu_ram_once - zeropin's QEMU series (qemu-patches/debian-13/) against
# the same Debian QEMU source built without it (make qemu), nested in the
# lab host:
# an L2 VM (q35, SeaBIOS, GUEST_MIB of RAM on zeropinfs, the edu passed
# through, an uncompressed vmlinux booted through PVH) starts and runs to
# its kernel's first line, and zeropin's own counters (debugfs) say how many
# MAP_DMA/UNMAP_DMA calls QEMU made and how many bytes it had pinned.
#
#   stock_repins_low_ram        stock QEMU: every PAM change below 1 MiB
#                               unmaps and pins all of low RAM again (the
#                               flat view merged the PAM segment with it;
#                               the counts are printed)
#   patched_maps_ram_once       with the series (RAM above 1 MiB out of
#                               the PAM segments' toggles): guest RAM is
#                               mapped once, plus the segments and the BAR
#   stock_smm_repins_low_ram, patched_smm_maps_ram_once
#                               the same L2 on Debian's OVMF Secure Boot
#                               build (SMM: q35's TSEG enabled, its
#                               blackhole splitting the RAM below it; the
#                               L2 kernel's bzImage through its EFI stub):
#                               stock unmaps and pins that RAM again, the
#                               series (the RAM under TSEG a flat range of
#                               its own) maps it once, and the 16 MiB under
#                               TSEG again after the firmware's one reset
#   type1_patched_maps_ram_once the same on stock vfio_iommu_type1 (guest
#                               RAM anonymous, zeropin not claiming type1v2;
#                               kprobes on VFIO's container ioctl count):
#                               stock re-pins, the series maps RAM once
#   stock_decode_toggles_unmap_bar, patched_decode_toggles_unmap_bar
#                               L2 runs to userspace (tests/nested/
#                               l2_edu_init.c as /init): edu DMA into L2 RAM
#                               and from the BIOS area below 1 MiB lands
#                               where L2's CPU sees it, before and after
#                               TOGGLES memory decode off/on cycles; both
#                               unmap the BAR at each (no IOMMU mapping is
#                               kept for a BAR the device does not decode).
#                               Then L2 moves the BAR: peer-to-peer DMA
#                               reaches it at the new address and no longer
#                               at the old one (no stale mapping)
#   stock_dimm_unplug_leaves_no_mapping, patched_dimm_unplug_leaves_no_mapping
#                               L2 with a DIMM on zeropinfs beside its RAM:
#                               edu DMA through it, then the monitor's
#                               device_del and L2's eject; the device must
#                               fault on its address afterwards (L2 sees
#                               the data not come back, L1's IOMMU reports
#                               the fault)
#   series_prefixes             with the builds scripts/qemu-build --each
#                               keeps (added to the lab by hand; skips
#                               without them): the L2 under each prefix
#                               of the series, SeaBIOS, SMM firmware and
#                               plain OVMF,
#                               what each patch changes (PREFIXES='2 3'
#                               picks some; --prefixes runs it alone);
#                               the RAM pinned never grows from one
#                               prefix to the next
#   dimm_placement_is_stock     a DIMM on zeropinfs is placed where stock
#                               QEMU places it, and one at an explicit
#                               4 KiB-aligned addr= (what libvirt records
#                               from a tmpfs host) is accepted by both: the
#                               series aligns only the mmap, not the
#                               region (no guest ABI change)
#
# Each QEMU run has a deadline. Skips when the lab carries no QEMU builds
# (tests/run-selftests adds them to one 6.12 boot) or no L2 kernel.
set -u
FIRST_LINE_S=240	# nested TCG: QEMU launch, SeaBIOS, the PVH entry
USERSPACE_S=900		# nested TCG: a whole L2 kernel boot, then /init
CLAIM=/sys/module/zeropin/parameters/claim_type1v2
L2_INITRD=/tests/nested/l2-edu.cpio
TOGGLES=8		# L2's memory decode off/on cycles
DIMM_MIB=128		# one memory block of L2's
TAP_PREFIX=qemu
. "$(dirname -- "$0")/../lib/tap.sh"
. "$(dirname -- "$0")/../lib/l2.sh"

# OVMF's Secure Boot build, as Debian ships it and libvirt picks it for
# <feature enabled='yes' name='secure-boot'/>: its variable store runs in
# SMM, so it needs smm=on and enables q35's TSEG.
OVMF_SMM_CODE=/usr/share/OVMF/OVMF_CODE_4M.secboot.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
SMM_FIRST_LINE_S=600	# nested TCG: OVMF with SMM to the kernel's first line
# The RAM under TSEG (q35's default extended TSEG, 16 MiB) is the series'
# alias of its own: a reset disables TSEG and shows it again, and OVMF's
# Secure Boot build resets the machine once while it boots, whatever its
# variable store (traced: the alias and the BAR mapped again, nothing
# else), so RAM once is the RAM plus that alias once more.
SMM_TSEG_MIB=16

# The L2's firmware and kernel under OVMF with SMM, into L2_KERNEL
# (l2_kernel_args' under SeaBIOS): the code and a fresh copy of the
# variable store as pflash (the code secure: only SMM writes it), the
# bzImage through its EFI stub.
l2_smm_kernel_args() {
	cp "$OVMF_VARS" /tmp/l2-vars.fd
	L2_KERNEL=(-machine smm=on -global "driver=cfi.pflash01,property=secure,value=on"
		-drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_SMM_CODE"
		-drive "if=pflash,format=raw,unit=1,file=/tmp/l2-vars.fd"
		-device "vfio-pci,host=$EDU$1" -kernel /l2/vmlinuz -append "$L2_CMDLINE")
}

# OVMF without SMM (Debian's plain build, what libvirt picks for UEFI
# without secure boot): no TSEG, PAM segments set to RAM.
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd

# The L2's firmware and kernel under plain OVMF, into L2_KERNEL.
l2_ovmf_kernel_args() {
	cp "$OVMF_VARS" /tmp/l2-vars.fd
	L2_KERNEL=(-drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE"
		-drive "if=pflash,format=raw,unit=1,file=/tmp/l2-vars.fd"
		-device "vfio-pci,host=$EDU$1" -kernel /l2/vmlinuz -append "$L2_CMDLINE")
}

# start_l2 QEMU DEVICE-OPTIONS [smm|ovmf]: run the L2 until its kernel's first
# line (under SeaBIOS; with smm, under OVMF's Secure Boot build), then
# quit through the monitor. Sets MAPS, UNMAPS, PINNED_MIB (zeropin's
# counters over the run), REPORT (QEMU's stderr) and LINE (1 when the
# kernel line came).
start_l2() {
	local qemu="$1" opts="$2" maps0 unmaps0 pinned0
	maps0=$(counter iommu_counters map_ioctls) unmaps0=$(counter iommu_counters unmap_ioctls) pinned0=$(counter iommu_counters pages_pinned_total)
	l2_base_args
	if [ "${3:-}" = smm ]; then
		l2_smm_kernel_args "$opts"
	elif [ "${3:-}" = ovmf ]; then
		l2_ovmf_kernel_args "$opts"
	else
		l2_kernel_args "$EDU" "$opts"
	fi
	l2_timed_start "$qemu" /tmp/l2.console 'Linux version' "${L2_BASE[@]}" "${L2_KERNEL[@]}"
	LINE=0
	[ -z "$RESUME_S" ] || LINE=1
	MAPS=$(($(counter iommu_counters map_ioctls) - maps0))
	UNMAPS=$(($(counter iommu_counters unmap_ioctls) - unmaps0))
	PINNED_MIB=$((($(counter iommu_counters pages_pinned_total) - pinned0) * 4 / 1024))
	REPORT=$ERR
	echo "# $(l2_flavour "$qemu")$opts${3:+ ($3)}: $MAPS MAP_DMA, $UNMAPS UNMAP_DMA, $PINNED_MIB MiB pinned for $GUEST_MIB MiB of RAM; first line: $LINE${RESUME_S:+ after $RESUME_S s}"
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

# RAM once, plus the BIOS and option ROMs below 1 MiB and at 4 GiB - 256 KiB,
# the PAM segments and SMRAM's low RAM as firmware toggles them, and the
# edu's 1 MiB BAR
ONCE_SLACK_MIB=8

test_patched() {
	start_l2 "$PATCHED" ""
	if [ "$LINE" = 1 ] && [ "$PINNED_MIB" -le $((GUEST_MIB + ONCE_SLACK_MIB)) ]; then
		ok patched_maps_ram_once
	else
		not_ok patched_maps_ram_once "first line: $LINE, $PINNED_MIB MiB pinned (at most $((GUEST_MIB + ONCE_SLACK_MIB)))
$REPORT"
	fi
}

# Under SMM firmware: stock pins more than the RAM (the RAM under TSEG
# again, at least), the series the RAM once.
test_smm() {
	local stock
	if [ ! -f "$OVMF_SMM_CODE" ] || [ ! -f /l2/vmlinuz ]; then
		ok "stock_smm_repins_low_ram # SKIP no $OVMF_SMM_CODE or /l2/vmlinuz in this lab boot"
		ok "patched_smm_maps_ram_once # SKIP no $OVMF_SMM_CODE or /l2/vmlinuz in this lab boot"
		return
	fi
	l2_setup >/dev/null
	FIRST_LINE_S=$SMM_FIRST_LINE_S start_l2 "$STOCK" "" smm
	stock="$PINNED_MIB MiB pinned, first line: $LINE"
	if [ "$LINE" = 1 ] && [ "$PINNED_MIB" -gt $((GUEST_MIB + ONCE_SLACK_MIB)) ]; then
		ok stock_smm_repins_low_ram
	else
		not_ok stock_smm_repins_low_ram "first line: $LINE, $PINNED_MIB MiB pinned (expected the TSEG re-pins: > $((GUEST_MIB + ONCE_SLACK_MIB)))
$REPORT"
	fi
	l2_setup >/dev/null
	FIRST_LINE_S=$SMM_FIRST_LINE_S start_l2 "$PATCHED" "" smm
	if [ "$LINE" = 1 ] && [ "$PINNED_MIB" -le $((GUEST_MIB + SMM_TSEG_MIB + ONCE_SLACK_MIB)) ]; then
		ok patched_smm_maps_ram_once
	else
		not_ok patched_smm_maps_ram_once "first line: $LINE, $PINNED_MIB MiB pinned (at most $((GUEST_MIB + SMM_TSEG_MIB + ONCE_SLACK_MIB)); stock: $stock)
$REPORT"
	fi
}

# prefix_start N QEMU FIRMWARE LABEL: one L2 start of prefix N under
# FIRMWARE (start_l2's: "" SeaBIOS, smm, ovmf); its counts printed, and
# into BAD when the kernel line did not come or it pinned more than the
# prefix before it under the same firmware (PREV_PINNED[FIRMWARE]).
prefix_start() {
	local n="$1" q="$2" fw="$3" label="$4" prev
	l2_setup >/dev/null
	if [ -n "$fw" ]; then
		FIRST_LINE_S=$SMM_FIRST_LINE_S start_l2 "$q" "" "$fw"
	else
		start_l2 "$q" ""
	fi
	prev=${PREV_PINNED[${fw:-seabios}]:-}
	[ "$LINE" = 1 ] || BAD="$BAD prefix $n: no first line under $label;"
	[ -z "$prev" ] || [ "$PINNED_MIB" -le "$prev" ] || BAD="$BAD prefix $n pins more than the one before under $label;"
	PREV_PINNED[${fw:-seabios}]=$PINNED_MIB
	echo "# prefix $n, $label: $MAPS MAP_DMA, $UNMAPS UNMAP_DMA, $PINNED_MIB MiB pinned"
}

# What each patch does: the L2 under every prefix of the series that
# scripts/qemu-build --each kept (/opt/zeropin/qemu-prefix-N, N the
# patches it carries; PREFIXES picks some), under SeaBIOS, the SMM
# firmware and plain OVMF, beside stock and the whole series above
# (which test the bounds). The RAM pinned never grows from one prefix to the next.
test_prefixes() {
	local n q all
	declare -gA PREV_PINNED=()
	BAD=""
	all=$(ls -d /opt/zeropin/qemu-prefix-* 2>/dev/null | sed 's/.*-//' | sort -n)
	if [ -z "$all" ]; then
		ok "series_prefixes # SKIP no prefix builds in this lab boot (scripts/qemu-build --each; scripts/lab --add build/qemu/each/root)"
		return
	fi
	for n in ${PREFIXES:-$all}; do
		q=/opt/zeropin/qemu-prefix-$n/bin/qemu-system-x86_64
		[ -x "$q" ] || { BAD="$BAD no $q;"; continue; }
		prefix_start "$n" "$q" "" SeaBIOS
		[ ! -f /l2/vmlinuz ] || [ ! -f "$OVMF_SMM_CODE" ] || prefix_start "$n" "$q" smm "OVMF Secure Boot (SMM)"
		[ ! -f /l2/vmlinuz ] || [ ! -f "$OVMF_CODE" ] || prefix_start "$n" "$q" ovmf "OVMF (no SMM)"
	done
	if [ -z "$BAD" ]; then
		ok series_prefixes
	else
		not_ok series_prefixes "$BAD"
	fi
}

# type1_counts QEMU DEVICE-OPTIONS: the L2 to its first line on stock
# type1; sets TYPE1 to "MAP_DMA UNMAP_DMA MiB-mapped", empty when no
# kernel line came, and REPORT.
type1_counts() {
	l2_base_args anonymous
	l2_kernel_args "$EDU" "$2"
	vfio_count_reset
	l2_timed_start "$1" /tmp/l2.console 'Linux version' "${L2_BASE[@]}" "${L2_KERNEL[@]}"
	vfio_count_read
	REPORT=$ERR
	TYPE1=
	[ -z "$RESUME_S" ] || TYPE1="$VFIO_MAPS $VFIO_UNMAPS $VFIO_MAP_MIB"
	echo "# $(l2_flavour "$1")$2 on type1: ${TYPE1:-no kernel line} (MAP_DMA UNMAP_DMA MiB)"
}

test_type1() {
	local stock patched
	if ! vfio_count_arm; then
		ok "type1_patched_maps_ram_once # SKIP no kprobe events in this kernel"
		return
	fi
	echo 0 >"$CLAIM"
	type1_counts "$STOCK" ""
	stock=$TYPE1
	type1_counts "$PATCHED" ""
	patched=$TYPE1
	echo 1 >"$CLAIM"
	vfio_count_disarm
	set -- $stock $patched
	if [ $# = 6 ] && [ "$3" -gt $((GUEST_MIB * 2)) ] && [ "$6" -le $((GUEST_MIB + ONCE_SLACK_MIB)) ]; then
		ok type1_patched_maps_ram_once
	else
		not_ok type1_patched_maps_ram_once "stock: ${stock:-no kernel line}; patched: ${patched:-no kernel line} (MAP_DMA UNMAP_DMA MiB; patched at most $((GUEST_MIB + ONCE_SLACK_MIB)) MiB)
$REPORT"
	fi
}

# run_l2_edu QEMU DEVICE-OPTIONS TRACE-EVENT: run the L2 to userspace with
# l2_edu_init as /init, until it powers off; QEMU traces TRACE-EVENT (an
# unmap: stock's listener delete, patched's ioctl) into /tmp/l2.trace. Sets
# L2_LOG (l2_edu_init's lines, or the console's end without them), BAR
# (L2's address of the edu's BAR0), BAR_UNMAPS (unmaps at that address),
# OLD_BAR_FAULTS (L1's IOMMU faults there: the device's read after the
# move), REPORT (QEMU's stderr); prints them.
run_l2_edu() {
	l2_retry 'l2-edu: ' boot_l2_edu "$@"
	echo "# $(l2_flavour "$1")$2: L2 BAR0 at ${BAR:-?}, $BAR_UNMAPS unmaps of it, $OLD_BAR_FAULTS IOMMU faults there after the move"
	echo "$L2_LOG" | sed 's/^/#   /'
}

# One L2 boot of run_l2_edu, bounded by USERSPACE_S; prints nothing.
boot_l2_edu() {
	local qemu="$1" opts="$2" event="$3" mark
	rm -f /tmp/l2.console /tmp/l2.trace "$MNT/l2-ram"
	mark=$(kmsg_mark)
	l2_base_args
	timeout "$USERSPACE_S" "$qemu" "${L2_BASE[@]}" -device "vfio-pci,host=$EDU$opts" -kernel /l2/vmlinux -monitor none -no-reboot -initrd "$L2_INITRD" \
		-trace "$event" -D /tmp/l2.trace \
		-append "console=ttyS0 panic=-1 oops=panic rdinit=/init l2edu.toggles=$TOGGLES" \
		</dev/null >/dev/null 2>/tmp/l2.err
	L2_STATUS=$?
	L2_LOG=$(tr -d '\r' </tmp/l2.console 2>/dev/null | grep -o 'l2-edu: .*')
	[ -n "$L2_LOG" ] || L2_LOG="(no l2-edu line; QEMU exited $L2_STATUS; the console's end:)
$(tail -n 8 /tmp/l2.console 2>/dev/null)"
	BAR=$(echo "$L2_LOG" | sed -n 's/^l2-edu: bar0 \(0x[0-9a-f]*\).*/\1/p')
	BAR_UNMAPS=0
	[ -z "$BAR" ] || BAR_UNMAPS=$(grep -cE "(iova=|region_del )$BAR[ -]" /tmp/l2.trace)
	# L1's IOMMU reports the edu's P2P read at the BAR's old address
	OLD_BAR_FAULTS=0
	[ -z "$BAR" ] || OLD_BAR_FAULTS=$(kmsg_since "$mark" | grep -c "DMAR: .*fault addr $BAR ")
	REPORT=$(grep -v 'no available reset mechanism' /tmp/l2.err)
	rm -f "$MNT/l2-ram"
}

# All of l2_edu_init's DMA checks passed and it got to the end, the BAR's
# move included (no stale mapping at its old address).
l2_dma_ok() {
	[ "$(echo "$L2_LOG" | grep -cE '^l2-edu: dma (before|after) (ram|low) ok$')" = 4 ] &&
		[ "$(echo "$L2_LOG" | grep -cE '^l2-edu: p2p (before|after) move ok$')" = 2 ] &&
		[ "$OLD_BAR_FAULTS" -ge 1 ] &&
		echo "$L2_LOG" | grep -q "^l2-edu: toggles $TOGGLES done" &&
		echo "$L2_LOG" | grep -q '^l2-edu: done'
}

# toggles_check NAME: L2's DMA checks passed and the BAR was unmapped at
# every decode toggle.
toggles_check() {
	l2_skip_if_died "$1" && return
	if l2_dma_ok && [ "$BAR_UNMAPS" -ge "$TOGGLES" ]; then
		ok "$1"
	else
		not_ok "$1" "BAR unmaps: $BAR_UNMAPS (expected >= $TOGGLES), IOMMU faults at the old BAR after the move: $OLD_BAR_FAULTS (expected >= 1)
$L2_LOG
$REPORT"
	fi
}

test_toggles() {
	run_l2_edu "$STOCK" "" vfio_listener_region_del
	toggles_check stock_decode_toggles_unmap_bar
	run_l2_edu "$PATCHED" "" vfio_legacy_dma_unmap
	toggles_check patched_decode_toggles_unmap_bar
}

# Where q35 puts the first DIMM: the device-memory area, at the first GiB
# boundary above 4 GiB and above the RAM that does not fit below 2816 MiB
# (QEMU's pc_memory_init); as 0x... for L2 and the kernel log.
dimm_addr() {
	local above=0
	[ "$GUEST_MIB" -lt 2816 ] || above=$((GUEST_MIB - 2048))
	printf '0x%x\n' $(((4096 + (above + 1023) / 1024 * 1024) * 1048576))
}

# dimm_run QEMU DEVICE-OPTIONS: the L2 with a DIMM_MIB DIMM on zeropinfs
# beside its RAM, l2_edu_init as /init (no toggles, no BAR move); once it
# has DMA'd through the DIMM, the monitor unplugs it, and L2 checks the
# device no longer reaches it. Sets L2_LOG, DIMM_FAULTS (L1's IOMMU
# faults at the DIMM's address), ERR; prints them.
dimm_run() {
	local qemu="$1" addr mark
	addr=$(dimm_addr)
	l2_setup >/dev/null
	l2_base_args
	mark=$(kmsg_mark)
	FIRST_LINE_S=$USERSPACE_S L2_THEN="device_del dimm0" L2_UNTIL='l2-edu: done' \
		l2_timed_start "$qemu" /tmp/l2.console 'l2-edu: waiting for unplug' "${L2_BASE[@]}" -no-reboot \
		-m "$GUEST_MIB,slots=1,maxmem=$((GUEST_MIB + DIMM_MIB))M" \
		-object "memory-backend-file,id=dimm0mem,size=${DIMM_MIB}M,mem-path=$MNT/l2-dimm,share=on" \
		-device "pc-dimm,id=dimm0,memdev=dimm0mem,addr=$addr" \
		-device "vfio-pci,host=$EDU$2" -kernel /l2/vmlinux -initrd "$L2_INITRD" \
		-append "console=ttyS0 panic=-1 oops=panic rdinit=/init memhp_default_state=offline l2edu.toggles=0 l2edu.move=0 l2edu.dimm=$addr"
	rm -f "$MNT/l2-dimm"
	DIMM_FAULTS=$(kmsg_since "$mark" | grep -c "DMAR: .*fault addr $addr ")
	L2_LOG=$(tr -d '\r' </tmp/l2.console 2>/dev/null | grep -o 'l2-edu: .*')
	[ -n "$L2_LOG" ] || L2_LOG="(no l2-edu line; the console's end:)
$(tail -n 8 /tmp/l2.console 2>/dev/null)"
	echo "# $(l2_flavour "$qemu")$2, DIMM at $addr: $DIMM_FAULTS IOMMU faults there after its unplug"
	echo "$L2_LOG" | sed 's/^/#   /'
}

# dimm_check NAME: L2 saw the DMA through the DIMM work before and fail
# after (QEMU had finished the unplug: L2 waited for the ACPI device to go
# away), and L1's IOMMU says why it failed - a fault, not a timeout.
dimm_check() {
	l2_skip_if_died "$1" && return
	if echo "$L2_LOG" | grep -q '^l2-edu: dimm before unplug ok$' &&
		echo "$L2_LOG" | grep -q '^l2-edu: dimm after unplug ok$' && [ "$DIMM_FAULTS" -ge 1 ]; then
		ok "$1"
	else
		not_ok "$1" "IOMMU faults at the DIMM's address after its unplug: $DIMM_FAULTS (expected >= 1)
$L2_LOG
$ERR"
	fi
}

test_dimm_unplug() {
	l2_retry 'l2-edu: ' dimm_run "$STOCK" ""
	dimm_check stock_dimm_unplug_leaves_no_mapping
	l2_retry 'l2-edu: ' dimm_run "$PATCHED" ""
	dimm_check patched_dimm_unplug_leaves_no_mapping
}

# dimm_placed QEMU [ADDR]: a paused L2 with a DIMM_MIB DIMM on zeropinfs
# (at ADDR when given) asked where the DIMM went; sets PLACED (its
# address, empty when QEMU refused it) and ERR.
dimm_placed() {
	local addr=${2:+,addr=$2}
	l2_base_args
	PLACED=$(printf 'info memory-devices\nquit\n' | timeout 60 "$1" "${L2_BASE[@]}" -S -monitor stdio \
		-m "$GUEST_MIB,slots=1,maxmem=$((GUEST_MIB + DIMM_MIB))M" \
		-object "memory-backend-file,id=dimm0mem,size=${DIMM_MIB}M,mem-path=$MNT/l2-dimm,share=on" \
		-device "pc-dimm,id=dimm0,memdev=dimm0mem$addr" 2>/tmp/l2.err | tr -d '\r' | sed -n 's/^ *addr: //p')
	ERR=$(cat /tmp/l2.err)
	rm -f "$MNT/l2-dimm" "$MNT/l2-ram"
	echo "# $(l2_flavour "$1"), DIMM${2:+ at $2}: placed at ${PLACED:-nowhere}"
}

test_dimm_placement() {
	local stock patched odd
	odd=$(printf '0x%x' $(($(dimm_addr) + 4096)))
	dimm_placed "$STOCK"
	stock=$PLACED
	dimm_placed "$PATCHED"
	patched=$PLACED
	dimm_placed "$STOCK" "$odd"
	local stock_odd=$PLACED
	dimm_placed "$PATCHED" "$odd"
	if [ -n "$stock" ] && [ "$patched" = "$stock" ] && [ "$stock_odd" = "$odd" ] && [ "$PLACED" = "$odd" ]; then
		ok dimm_placement_is_stock
	else
		not_ok dimm_placement_is_stock "DIMM placed by stock at ${stock:-nowhere}, patched at ${patched:-nowhere}; at $odd: stock ${stock_odd:-refused}, patched ${PLACED:-refused}
$ERR"
	fi
}

main() {
	l2_require
	echo "TAP version 13"
	if [ "${1:-}" = --prefixes ]; then	# series_prefixes alone
		echo "1..1"
		test_prefixes
		umount "$MNT" 2>/dev/null
		[ "$FAILS" = 0 ]
		return
	fi
	echo "1..11"
	test_stock
	test_patched
	test_smm
	test_type1
	test_toggles
	test_dimm_unplug
	test_dimm_placement
	test_prefixes
	umount "$MNT" 2>/dev/null
	[ "$FAILS" = 0 ]
}

main "$@"
