#!/bin/bash
# gpu_start - what each GPU adds to a GPU VM's start (make bench runs it in
# one 6.12 lab boot with --gpu 4 --bar-gib 16): the L2 of lib/l2.sh (q35,
# SeaBIOS, GUEST_MIB of RAM) with 1, 2 and 4 GPU stand-ins passed through
# (ivshmem, a 16 GiB BAR each, mapped for peer-to-peer as QEMU maps every
# BAR), started paused, resumed and run to its kernel's first line, with
# Debian's QEMU (stock): on stock type1 (anonymous guest RAM, zeropin not
# claiming type1v2), on zeropin (guest RAM on zeropinfs, the pool in 2 MiB
# blocks) and on zeropin-runs (the same with run_build on and the pool
# refilled in whole 1 GiB runs first: the guest RAM's 1 GiB-aligned GiBs
# map as 1 GiB IOMMU entries); and once with no GPU at all ("none", guest
# RAM on zeropinfs: the same VM as a CPU VM). REPS times, round-robin.
#
# USAGE: (in the lab) gpu_start [--reps N] [--gpus N,N...] [--drivers D,D...]
#        [DEFAULT: 1 repetition; 1,2,4; type1,zeropin,zeropin-runs]
#
# One JSON line per start:
#   {"bench":"gpu_start","kernel","qemu":"stock",
#    "driver":"none|type1|zeropin|zeropin-runs","gpus","bar_gib","rep",
#    "guest_mib","map_ioctls","unmap_ioctls","mib_mapped","vfio_ms",
#    "ram_entries_1g","init_ms","firmware_ms"}
# map/unmap ioctls, MiB mapped and vfio_ms (time inside MAP_DMA and
# UNMAP_DMA): kprobes on VFIO's container ioctl; ram_entries_1g: zeropin's
# 1 GiB IOMMU entries for guest RAM made during the start (its 1 GiB
# entries less the BARs', bar_gib per GPU; 0 on type1); init_ms: QEMU start until
# its monitor answers (a->b: realize, guest RAM mapped); firmware_ms:
# resume to the kernel's first line (b->c: SeaBIOS sizes and places the
# BARs, QEMU maps each one as the guest turns its decode on). Timings are
# TCG in TCG: compare within a run.
set -u
FIRST_LINE_S=900	# nested TCG, type1 walking 4 x 16 GiB of BAR several times
TAP_PREFIX=gpu_start
. "$(dirname -- "$0")/../lib/tap.sh"
. "$(dirname -- "$0")/../lib/l2.sh"
CLAIM=/sys/module/zeropin/parameters/claim_type1v2
RUN_BUILD=/sys/module/zeropin/parameters/run_build
POOL=/sys/kernel/zeropin/pool
REPS=1
GPU_COUNTS=1,2,4
DRIVERS=type1,zeropin,zeropin-runs

die() { echo "gpu_start: $*" >&2; exit 1; }

# The L2's devices: the first N GPU stand-ins, and a 64-bit PCI hole that
# holds their BARs (twice their total, for alignment, plus room).
gpu_args() {
	local n="$1" bdf i=0 bar_gib hole top bits
	GPU_ARGS=()
	[ "$n" -gt 0 ] || return 0
	bar_gib=$((GPU_BAR_BYTES >> 30))
	for bdf in $GPUS; do
		[ "$i" -lt "$n" ] || break
		GPU_ARGS+=(-device "vfio-pci,host=$bdf")
		i=$((i + 1))
	done
	hole=$((n * bar_gib * 2 + 64))
	GPU_ARGS+=(-global "q35-pcihost.pci-hole64-size=${hole}G")
	# TCG's 40 physical address bits hold 1 TiB; eight 128 GiB BARs need 42
	# (past 1012 GiB QEMU moves the RAM above 4 GiB to 1 TiB: qemu64 is AMD)
	top=$((4 + GUEST_MIB / 1024 + 1 + hole))
	[ "$top" -lt 1012 ] || top=$((1024 + GUEST_MIB / 1024 + 1 + hole))
	bits=40
	while [ $((1 << (bits - 30))) -lt "$top" ]; do bits=$((bits + 1)); done
	[ "$bits" = 40 ] || GPU_ARGS+=(-cpu "qemu64,phys-bits=$bits")
}

# wait_pool FILE MIB: until the pool's FILE reads MIB or more (at most:
# "le"), 120 s at most.
wait_pool() {
	local file="$1" mib="$2" cmp="${3:-ge}" i
	for ((i = 0; i < 1200; i++)); do
		[ "$(cat "$POOL/$file")" -"$cmp" "$mib" ] && return 0
		sleep 0.1
	done
	echo "# the pool's $file did not reach $mib in 120 s"
	return 1
}

# The pool emptied (target 0) before a refill of another kind.
pool_empty() {
	echo 0 >"$POOL/target_mib"
	wait_pool zero_mib 0 le
}

# run_build on, the pool emptied and filled again to the guest's RAM, its
# whole GiBs in runs (the blocks of the last start went back to the page
# allocator and the refill after it took loose blocks) as far as the
# lab's ZONE_NORMAL has room for them: until every GiB is a run or a
# build fails (loose blocks then fill the rest).
pool_in_runs() {
	local want=$((GUEST_MIB + 64)) failed i
	echo "# echo 1 > $RUN_BUILD; echo 0, then $want > $POOL/target_mib"
	echo 1 >"$RUN_BUILD"
	pool_empty
	failed=$(counter pool_counters runs_build_failed)
	echo "$want" >"$POOL/target_mib"
	for ((i = 0; i < 1200; i++)); do
		[ "$(cat "$POOL/runs_1g")" -ge $((GUEST_MIB >> 10)) ] && break
		[ "$(counter pool_counters runs_build_failed)" = "$failed" ] || break
		sleep 0.1
	done
	wait_pool zero_mib "$GUEST_MIB"
	echo "# runs ready: $(cat "$POOL/runs_1g") of $((GUEST_MIB >> 10))"
}

# The pool without runs (a zeropin-runs start before may have left some):
# run_build off, and the pool emptied and refilled if it holds a run.
pool_in_blocks() {
	echo "# echo 0 > $RUN_BUILD"
	echo 0 >"$RUN_BUILD"
	wait_pool zero_mib "$GUEST_MIB" || true
	[ "$(cat "$POOL/runs_1g")" = 0 ] && return 0
	echo "# echo 0, then $((GUEST_MIB + 64)) > $POOL/target_mib (no runs)"
	pool_empty
	echo $((GUEST_MIB + 64)) >"$POOL/target_mib"
	wait_pool zero_mib "$GUEST_MIB"
}

# One start; prints its JSON line.
start_once() {
	local driver="$1" n="$2" rep="$3" ram="" claim=1 e1g
	[ "$driver" = type1 ] && { ram=anonymous; claim=0; }
	[ "$driver" = zeropin ] && pool_in_blocks
	[ "$driver" = zeropin-runs ] && pool_in_runs
	echo "# echo $claim > $CLAIM"
	echo "$claim" >"$CLAIM"
	e1g=$(counter iommu_counters entries_1g)
	l2_base_args $ram
	gpu_args "$n"
	vfio_count_reset
	l2_timed_start "$STOCK" /tmp/l2.console 'Linux version' "${L2_BASE[@]}" "${GPU_ARGS[@]}" \
		-kernel /l2/vmlinux -append "$L2_CMDLINE"
	[ -n "$RESUME_S" ] || die "$driver with $n GPUs: no kernel line in $FIRST_LINE_S s: $ERR"
	vfio_count_read
	vfio_time_read
	# the guest RAM's: each GPU's BAR maps as bar_gib entries of 1 GiB
	e1g=$(($(counter iommu_counters entries_1g) - e1g - n * (GPU_BAR_BYTES >> 30)))
	[ "$driver" != type1 ] || e1g=0
	if [ "$driver" = zeropin-runs ]; then
		echo "# echo 0 > $RUN_BUILD"
		echo 0 >"$RUN_BUILD"
	fi
	printf '{"bench":"gpu_start","kernel":"%s","qemu":"stock","driver":"%s","gpus":%d,"bar_gib":%d,' \
		"$(uname -r | cut -d. -f1,2)" "$driver" "$n" "$((GPU_BAR_BYTES >> 30))"
	printf '"rep":%d,"guest_mib":%d,"map_ioctls":%d,"unmap_ioctls":%d,"mib_mapped":%d,"vfio_ms":%d,' \
		"$rep" "$GUEST_MIB" "$VFIO_MAPS" "$VFIO_UNMAPS" "$VFIO_MAP_MIB" "$VFIO_MS"
	printf '"ram_entries_1g":%d,' "$e1g"
	printf '"init_ms":%.0f,"firmware_ms":%.0f}\n' \
		"$(echo "$READY_S * 1000" | bc)" "$(echo "$RESUME_S * 1000" | bc)"
}

parse_args() {
	while [ $# -gt 0 ]; do
		case "$1" in
		--reps) REPS="$2"; shift 2 ;;
		--gpus) GPU_COUNTS="$2"; shift 2 ;;
		--drivers) DRIVERS="$2"; shift 2 ;;
		*) die "unknown option $1 (USAGE: gpu_start [--reps N] [--gpus N,N...] [--drivers D,D...])" ;;
		esac
	done
	[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "--reps $REPS: want a number"
	[[ "$GPU_COUNTS" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--gpus $GPU_COUNTS: want counts"
	[[ ",$DRIVERS," =~ ^(,(type1|zeropin|zeropin-runs))+,$ ]] ||
		die "--drivers $DRIVERS: want type1, zeropin or zeropin-runs, comma-separated"
}

main() {
	local rep n d first start end
	parse_args "$@"
	[ -x "$STOCK" ] || die "no stock QEMU at $STOCK (make qemu)"
	[ -f /l2/vmlinux ] || die "no L2 kernel at /l2/vmlinux (make lab-userland)"
	GPUS=$(gpu_devices)
	first=${GPUS%%$'\n'*}
	[ -n "$first" ] || die "no GPU stand-ins (scripts/lab --gpu N)"
	# BAR2's line of sysfs' resource file: start end flags, in hex
	read -r start end _ <<<"$(sed -n 3p "/sys/bus/pci/devices/$first/resource")"
	GPU_BAR_BYTES=$((end - start + 1))
	for n in ${GPU_COUNTS//,/ }; do
		[ "$n" -le "$(echo "$GPUS" | wc -l)" ] || die "--gpus $n: only $(echo "$GPUS" | wc -l) GPU stand-ins"
	done
	l2_setup || die "zeropin would not load or mount"
	vfio_count_arm || die "cannot put a kprobe on vfio_fops_unl_ioctl (CONFIG_KPROBE_EVENTS?)"
	vfio_time_arm || die "cannot put a return probe on vfio_fops_unl_ioctl"
	for ((rep = 1; rep <= REPS; rep++)); do
		l2_setup >/dev/null
		start_once none 0 "$rep"
		for n in ${GPU_COUNTS//,/ }; do
			for d in ${DRIVERS//,/ }; do
				l2_setup >/dev/null	# the pool idle before every start
				start_once "$d" "$n" "$rep"
			done
		done
	done
	echo 1 >"$CLAIM"
	vfio_time_disarm
	vfio_count_disarm
	umount "$MNT" 2>/dev/null
}

main "$@"
