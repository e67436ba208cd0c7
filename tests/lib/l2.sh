# shellcheck shell=bash
# The nested L2 VM of the QEMU series' tests (qemu_iova_cache,
# qemu_firmware), sourced after tap.sh: both QEMU builds (make qemu; the
# lab has them under /opt/zeropin when tests/run-selftests adds them), the
# edu passed through, and GUEST_MIB of guest RAM on zeropinfs.
STOCK=/opt/zeropin/qemu-stock/bin/qemu-system-x86_64
PATCHED=/opt/zeropin/qemu-patched/bin/qemu-system-x86_64
MOD=/lib/zeropin/zeropin.ko
MNT=/mnt/zeropin-qemu
GUEST_MIB=2048

# Load zeropin with a pool for the guest and mount zeropinfs; wait (90 s at
# most) for the pool to hold the guest's RAM zeroed.
l2_setup() {
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

# Skip the whole test unless the lab carries both QEMU builds, the L2
# kernel and an edu, and zeropin is ready; sets EDU.
l2_require() {
	[ -x "$STOCK" ] && [ -x "$PATCHED" ] || skip_all "no QEMU builds in this lab boot (make qemu; tests/run-selftests adds them to the 6.12 boot)"
	[ -f /l2/vmlinux ] || skip_all "no L2 kernel at /l2/vmlinux (make lab-userland)"
	EDU=$(edu_device)
	[ -n "$EDU" ] || skip_all "no edu device"
	l2_setup || skip_all "zeropin would not load or mount"
}

# The arguments every L2 shares, into L2_BASE: TCG, q35, guest RAM on
# zeropinfs ($MNT/l2-ram), no default devices, the console in
# /tmp/l2.console.
l2_base_args() {
	L2_BASE=(-accel tcg -machine q35 -m "$GUEST_MIB" -nodefaults -nographic
		-object "memory-backend-file,id=ram0,size=${GUEST_MIB}M,mem-path=$MNT/l2-ram,share=on,align=2M"
		-machine memory-backend=ram0 -serial file:/tmp/l2.console)
}

# The name of a QEMU build from its path: qemu-stock or qemu-patched.
l2_flavour() { basename "$(dirname "$(dirname "$1")")"; }
