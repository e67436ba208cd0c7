#!/bin/bash
# bpftrace_tools - zeropin's bpftrace tools (scripts/bpftrace) attach on the
# lab kernel and report what a workload did: pin-latency.bt sees MAP_DMA
# ioctls and both drivers' pin paths, iommu-map-size.bt sees the IOMMU
# maps and 2 MiB entries. The workload is map_bench mapping 64 MiB of THP
# and of 4 KiB memory with type1 and with zeropin. Prints TAP; skips where
# the lab carries no bpftrace (only the bpftrace boot of tests/run-selftests
# does: it is 200 MB).
set -u
TOOLS=/usr/local/share/zeropin/bpftrace
WORK="/tests/bench/map_bench --drivers type1,zeropin --sizes 64 --backings thp,anon4k --reps 1"
N=0
FAILS=0

# Run one tool over the workload, with a deadline; its histograms (not the
# workload's JSON lines) in OUT.
run_tool() {
	OUT=$(timeout 300 bpftrace -c "$WORK" "$TOOLS/$1" 2>&1 | grep -v '^{')
}

# expect NAME PATTERN...: ok when every pattern is in OUT.
expect() {
	local name="$1" p missing=""
	shift
	for p in "$@"; do
		echo "$OUT" | grep -q -- "$p" || missing="$missing '$p'"
	done
	N=$((N + 1))
	if [ -z "$missing" ]; then
		echo "ok $N bpftrace.$name"
	else
		FAILS=$((FAILS + 1))
		echo "not ok $N bpftrace.$name"
		echo "#   missing:$missing"
		echo "$OUT" | head -n 20 | sed 's/^/#   /'
	fi
}

main() {
	command -v bpftrace >/dev/null && [ -d "$TOOLS" ] ||
		{ printf '1..1\nok 1 bpftrace # SKIP no bpftrace in this lab boot (the bpftrace boot carries it)\n'; exit 4; }
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
	[ -d /sys/module/zeropin ] || insmod /lib/zeropin/zeropin.ko
	echo "TAP version 13"
	echo "1..3"
	run_tool pin-latency.bt
	expect pin_latency_sees_both_drivers '@map_dma_us:' '@type1_pin_us:' \
		'@type1_pages_per_call:' '@zeropin_pin_us:' '@zeropin_pages_per_call:'
	run_tool iommu-map-size.bt
	expect iommu_map_size_sees_2m_entries '@iommu_map_bytes:' '@iommu_map_sg_bytes:' \
		'@entries_by_size\[2097152\]: [1-9]' '@entries_by_size\[4096\]: [1-9]'
	# a host whose kernel has no Intel IOMMU driver (an AMD host on a
	# kernel built without it): the same script, the Intel probe renamed
	# to a function that exists nowhere, still runs and reports the maps
	sed 's/intel_iommu_map_pag\*/zz_absent_iommu_map_pag*/' "$TOOLS/iommu-map-size.bt" >/tmp/no-intel.bt
	OUT=$(timeout 300 bpftrace -c "$WORK" /tmp/no-intel.bt 2>&1 | grep -v '^{')
	expect iommu_map_size_runs_without_intel_driver '@iommu_map_bytes:' '@iommu_map_sg_bytes:'
	[ "$FAILS" = 0 ]
}

main "$@"
