# shellcheck shell=bash
# Helpers for the shell selftests (TAP, zeropin's counters, the edu),
# sourced from beside them (the lab has it at /tests/lib/tap.sh). The test
# sets TAP_PREFIX, the name its results carry ("qemu" gives
# "ok 1 qemu.NAME"), and ends with [ "$FAILS" = 0 ].
N=0
FAILS=0

ok() { N=$((N + 1)); echo "ok $N $TAP_PREFIX.$1"; }

# not_ok NAME [DETAILS]: DETAILS printed as TAP comments.
not_ok() {
	N=$((N + 1)); FAILS=$((FAILS + 1))
	echo "not ok $N $TAP_PREFIX.$1"
	[ -z "${2:-}" ] || echo "$2" | sed 's/^/#   /'
}

# skip NAME WHY: one result that could not be had here, saying why.
skip() { N=$((N + 1)); echo "ok $N $TAP_PREFIX.$1 # SKIP $2"; }

# The whole test skips (KSFT_SKIP), saying why.
skip_all() { printf '1..1\nok 1 %s # SKIP %s\n' "$TAP_PREFIX" "$1"; exit 4; }

# counter FILE KEY: one counter of a zeropin debugfs counters file
# (pool_counters, iommu_counters).
counter() { awk -v k="$2" '$1 == k { print $2 }' "/sys/kernel/debug/zeropin/$1"; }

# The PCI address of the first edu device (the GPU stand-in), or nothing.
edu_device() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1234:0x11e8 ] && { echo "${d##*/}"; return; }
	done
}

# The PCI addresses of the GPU stand-ins (ivshmem, scripts/lab --gpu), one
# per line.
gpu_devices() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1af4:0x1110 ] && echo "${d##*/}"
	done
	return 0
}

# kmsg_mark: put a line of its own into the kernel log and print it;
# kmsg_since MARK: the kernel log after it. (A line count taken before
# would miss lines once the log's ring wraps.)
kmsg_mark() {
	local mark="zeropin-test-mark $$ $RANDOM $SECONDS"
	echo "$mark" >/dev/kmsg
	echo "$mark"
}
kmsg_since() { dmesg | awk -v m="$1" 'seen; index($0, m) { seen = 1 }'; }
