# shellcheck shell=bash
# The nested L2 VM of the QEMU series' tests (qemu_ram_once,
# qemu_firmware, qemu_reset), sourced after tap.sh: both QEMU builds (make qemu; the
# lab has them under /opt/zeropin when tests/run-selftests adds them), the
# edu passed through, and GUEST_MIB of guest RAM on zeropinfs.
STOCK=/opt/zeropin/qemu-stock/bin/qemu-system-x86_64
PATCHED=/opt/zeropin/qemu-patched/bin/qemu-system-x86_64
MOD=/lib/zeropin/zeropin.ko
MNT=/mnt/zeropin-qemu
GUEST_MIB=${GUEST_MIB:-2048}

# Load zeropin with a pool for the guest and mount zeropinfs; wait (90 s at
# most) for the pool to hold the guest's RAM zeroed and to have nothing
# left to zero (the last L2's pages, back in the pool), so that no zeroing
# runs beside the next start.
l2_setup() {
	local i
	[ -d /sys/module/zeropin ] || insmod "$MOD" pool_mib=$((GUEST_MIB + 64)) || return 1
	mkdir -p "$MNT"
	grep -q " $MNT zeropinfs " /proc/mounts || mount -t zeropinfs -o size=$((GUEST_MIB * 2))M none "$MNT" || return 1
	for ((i = 0; i < 900; i++)); do
		[ "$(cat /sys/kernel/zeropin/pool/zero_mib)" -ge "$GUEST_MIB" ] &&
			[ "$(cat /sys/kernel/zeropin/pool/dirty_mib)" = 0 ] && return 0
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
# zeropinfs ($MNT/l2-ram; anonymous with "l2_base_args anonymous", the
# stock configuration), no default devices, the console in /tmp/l2.console.
l2_base_args() {
	L2_BASE=(-accel tcg -machine q35 -m "$GUEST_MIB" -nodefaults -nographic -serial file:/tmp/l2.console)
	[ "${1:-}" = anonymous ] && return
	L2_BASE+=(-object "memory-backend-file,id=ram0,size=${GUEST_MIB}M,mem-path=$MNT/l2-ram,share=on,align=2M"
		-machine memory-backend=ram0)
}

# --- L2 kernels that die while booting ---
# Nested TCG corrupts L2's state early in the L2 kernel now and then,
# the more often the busier the host: a pushf in text_poke_early (static
# calls patched in apparmor_init) reads garbage bits back (IOPL 3, NT,
# AC: R13 in the oops), a #DB WARNING for a single step nobody asked for
# follows (exc_debug_kernel), then a GPF at the IRET of its sync_core or
# a jump to nowhere; or an interrupt ends in a double fault a little
# later (net_ns_init's allocations). All of it inside start_kernel, before
# any initcall or device, with anonymous L2 RAM as with zeropinfs: about
# one boot in 30 on this machine's idle host, 7 of 8 with a second lab
# beside it, most boots on some CI hosts. A test that needs
# L2's userspace boots it again; when every boot died and each of them
# inside start_kernel, its result is a skip that says so, not a pass and
# not a failure. A boot that died any other way (an initcall, a driver,
# userspace) fails the test when no later boot gets to /init.
L2_BOOTS=6		# boots of one L2 at most, while its kernel dies before
			# its /init speaks
L2_SPARE=10		# boots again per test file at most: ~65 s each, the
			# nested boot's 3600 s bound holds them beside ~1300 s
			# of tests

# l2_died_early MARK: the last L2's kernel panicked (/tmp/l2.console) and
# its /init never printed MARK.
l2_died_early() {
	! tr -d '\r' </tmp/l2.console 2>/dev/null | grep -q "$1" &&
		grep -q 'Kernel panic' /tmp/l2.console 2>/dev/null
}

# The last L2 died of nested TCG's early-boot corruption: the stray #DB's
# WARNING, or an oops whose trace runs through start_kernel.
l2_died_of_tcg() {
	grep -q -E 'WARNING: .* exc_debug_kernel|^\[ *[0-9.]+\]  (\? )?start_kernel\+0x' /tmp/l2.console 2>/dev/null
}

# The oops of an L2 whose kernel died, as TAP comments (not the kernel
# log: the boot's check fails on any oops it holds), from its first
# WARNING, with a line saying what it died of (counted by
# tests/run-selftests' reliability line).
l2_show_death() {
	local why="another cause"
	l2_died_of_tcg && why="nested TCG's early-boot corruption"
	echo "# L2 boot died before /init, of $why: $(grep -m1 -E 'WARNING:|BUG|Kernel panic' /tmp/l2.console | tr -d '\r')"
	tr -d '\r' </tmp/l2.console | grep -B 2 -A 40 -m1 -E 'WARNING:|BUG:|Oops|general protection|Kernel panic' |
		head -n 45 | sed 's/^/#   L2: /'
}

# l2_retry MARK COMMAND...: run COMMAND (one L2 boot that leaves its
# console in /tmp/l2.console), again while l2_died_early MARK, L2_BOOTS
# runs at most and L2_SPARE in all; shows each death. Sets L2_DIED to
# the number of boots when every one died (empty when L2's /init spoke),
# and L2_DIED_OF_TCG to how many of them died of nested TCG's early-boot
# corruption.
l2_retry() {
	local mark="$1" boots=0
	shift
	L2_DIED= L2_DIED_OF_TCG=0
	while :; do
		"$@"
		boots=$((boots + 1))
		l2_died_early "$mark" || return 0
		l2_show_death
		l2_died_of_tcg && L2_DIED_OF_TCG=$((L2_DIED_OF_TCG + 1))
		[ "$boots" -lt "$L2_BOOTS" ] && [ "$L2_SPARE" -gt 0 ] || break
		L2_SPARE=$((L2_SPARE - 1))
		echo "# booting it again (boot $((boots + 1)) of $L2_BOOTS at most, $L2_SPARE more left for this test file)"
	done
	L2_DIED=$boots
}

# l2_skip_if_died NAME: when every boot of the last l2_retry died before
# L2's /init, each of nested TCG's early-boot corruption, NAME's result is a
# skip saying so (status 0); status 1, and nothing printed, otherwise.
l2_skip_if_died() {
	[ -n "${L2_DIED:-}" ] && [ "$L2_DIED_OF_TCG" = "$L2_DIED" ] || return 1
	skip "$1" "L2's kernel died before its /init in all $L2_DIED boots, inside start_kernel, of nested TCG's early-boot corruption (above)"
}

# The L2 kernel's command line: its first line on the serial console early;
# an oops panics (oops=panic, as every L2 command line here has it): an
# oopsed kworker otherwise leaves a hung L2 with no "Kernel panic" for
# l2_retry to see (one did in a clean-clone make check, with the host busy).
L2_CMDLINE='console=ttyS0 earlyprintk=serial,ttyS0 panic=-1 oops=panic'

# l2_kernel_args [HOST [DEVICE-OPTIONS]]: the device HOST (default: the
# edu) passed through with DEVICE-OPTIONS (",rombar=0", ...) and the
# L2 kernel booted through PVH with L2_CMDLINE, into L2_KERNEL.
l2_kernel_args() {
	L2_KERNEL=(-device "vfio-pci,host=${1:-$EDU}${2:-}" -kernel /l2/vmlinux -append "$L2_CMDLINE")
}

# l2_wait_for PID COMMAND...: until COMMAND succeeds, PID exits or the
# caller's FIRST_LINE_S seconds pass (wall time: TCG slows every poll);
# status 0 only when COMMAND succeeded.
l2_wait_for() {
	local pid="$1" end=$((SECONDS + FIRST_LINE_S))
	shift
	until "$@" 2>/dev/null; do
		kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.02
	done
}

# The monitor (its output in /tmp/l2.out) has answered 'info status' N times.
monitor_answered() { [ "$(grep -c 'VM status' /tmp/l2.out)" -ge "$1" ]; }

# l2_timed_start QEMU MARK-FILE MARK ARGS...: start QEMU with ARGS paused
# (-S; SeaBIOS's log, debugcon, in /tmp/l2.debugcon), resume it, wait
# (the caller's FIRST_LINE_S at most) until MARK appears in MARK-FILE, then quit. Sets
# READY_S (QEMU start until its monitor answers: realize, guest RAM mapped
# for VFIO), RESUME_S (resume to MARK, empty when it never came) and ERR
# (QEMU's stderr); removes the guest RAM file. With L2_THEN set, it sends
# that monitor command (system_reset, ...) once MARK came and waits until
# QEMU has done it; with L2_UNTIL set too, then until that appears in
# MARK-FILE (FIRST_LINE_S at most each).
l2_timed_start() {
	local qemu="$1" markfile="$2" mark="$3" t0 t1 pid
	shift 3
	rm -f /tmp/l2.console /tmp/l2.debugcon /tmp/l2.mon /tmp/l2.out "$MNT/l2-ram"
	mkfifo /tmp/l2.mon
	exec 3<>/tmp/l2.mon
	t0=$EPOCHREALTIME
	timeout $((FIRST_LINE_S * 3 + 60)) "$qemu" "$@" \
		-chardev file,id=dbg,path=/tmp/l2.debugcon -device isa-debugcon,iobase=0x402,chardev=dbg \
		-S -monitor stdio <&3 >/tmp/l2.out 2>/tmp/l2.err &
	pid=$!
	READY_S= RESUME_S=
	# the monitor prints its prompt before the machine is built; it
	# answers only from the main loop, once QEMU is ready
	echo 'info status' >&3
	l2_wait_for "$pid" monitor_answered 1
	t1=$EPOCHREALTIME
	READY_S=$(echo "$t1 - $t0" | bc)
	echo cont >&3
	l2_wait_for "$pid" grep -q "$mark" "$markfile" && RESUME_S=$(echo "$EPOCHREALTIME - $t1" | bc)
	if [ -n "${L2_THEN:-}" ] && [ -n "$RESUME_S" ]; then
		# one monitor command after MARK, waited for by a second
		# 'info status'
		printf '%s\ninfo status\n' "$L2_THEN" >&3
		l2_wait_for "$pid" monitor_answered 2
		[ -z "${L2_UNTIL:-}" ] || l2_wait_for "$pid" grep -q "$L2_UNTIL" "$markfile"
	fi
	echo quit >&3
	wait "$pid"
	exec 3>&-
	ERR=$(grep -v 'no available reset mechanism' /tmp/l2.err)
	rm -f "$MNT/l2-ram"
}

# The name of a QEMU build from its path: qemu-stock or qemu-patched.
l2_flavour() { basename "$(dirname "$(dirname "$1")")"; }

# --- VFIO ioctls, counted in the kernel ---
# Multi-threaded TCG now and then tears a text patch another vCPU is
# running through (an int3 oops in the lab kernel). So the counting turns
# comm recording off (lab only, left off for the boot): with record-cmd,
# enabling any event hooks sched_switch, a static key in __schedule, which
# every CPU runs all the time; a trace line then names its task
# "<...>-PID". record-cmd is a top-level option that a tracefs instance
# copies when it is made: before the instance's mkdir.
tracing_quiet_text() {
	echo 0 >/sys/kernel/tracing/options/record-cmd
}

VFIO_COUNT=/sys/kernel/tracing/instances/zeropin-l2
MAP_DMA=0x3b71		# VFIO_IOMMU_MAP_DMA
UNMAP_DMA=0x3b72	# VFIO_IOMMU_UNMAP_DMA
DEVICE_RESET=0x3b6f	# VFIO_DEVICE_RESET

# Record every MAP_DMA and UNMAP_DMA from now on, whichever driver serves
# the container (stock type1 or zeropin): a kprobe on VFIO's container
# ioctl (size read from the user's struct vfio_iommu_type1_dma_map), in a
# tracefs instance of its own; and every VFIO_DEVICE_RESET of a vfio-pci
# device (a kprobe on vfio_pci_core_ioctl). Needs CONFIG_KPROBE_EVENTS.
# Turns comm recording off first (tracing_quiet_text).
vfio_count_arm() {
	local t=/sys/kernel/tracing
	[ -e "$t/kprobe_events" ] || mount -t tracefs tracefs "$t" || return 1
	tracing_quiet_text || return 1
	grep -q zp_l2_ioctl "$t/kprobe_events" ||
		echo 'p:zp_l2_ioctl vfio_fops_unl_ioctl cmd=%si:x32 size=+u24(%dx):u64' >>"$t/kprobe_events" || return 1
	grep -q zp_l2_dev_ioctl "$t/kprobe_events" ||
		echo 'p:zp_l2_dev_ioctl vfio_pci_core_ioctl cmd=%si:x32' >>"$t/kprobe_events" || return 1
	mkdir -p "$VFIO_COUNT"
	echo "cmd == $MAP_DMA || cmd == $UNMAP_DMA" >"$VFIO_COUNT/events/kprobes/zp_l2_ioctl/filter" &&
		echo "cmd == $DEVICE_RESET" >"$VFIO_COUNT/events/kprobes/zp_l2_dev_ioctl/filter" &&
		echo 1 >"$VFIO_COUNT/events/kprobes/zp_l2_ioctl/enable" &&
		echo 1 >"$VFIO_COUNT/events/kprobes/zp_l2_dev_ioctl/enable"
}

# Forget what was recorded so far.
vfio_count_reset() { : >"$VFIO_COUNT/trace"; }

# What was recorded since the last reset: VFIO_MAPS, VFIO_UNMAPS,
# VFIO_MAP_MIB (MiB mapped), VFIO_RESETS (VFIO_DEVICE_RESET calls).
vfio_count_read() {
	read -r VFIO_MAPS VFIO_UNMAPS VFIO_MAP_MIB VFIO_RESETS <<<"$(awk -v map="$MAP_DMA" -v unmap="$UNMAP_DMA" '
		/zp_l2_dev_ioctl:/ { resets++ }
		/zp_l2_ioctl:/ {
			cmd = $0; sub(/.*cmd=/, "", cmd); sub(/ .*/, "", cmd)
			size = $0; sub(/.*size=/, "", size); sub(/ .*/, "", size)
			if (cmd == map) { maps++; bytes += size } else if (cmd == unmap) unmaps++
		}
		END { printf "%d %d %d %d\n", maps, unmaps, bytes / 1048576, resets }' "$VFIO_COUNT/trace")"
}

# Time inside MAP_DMA and UNMAP_DMA too (after vfio_count_arm): a return
# probe on VFIO's container ioctl, recorded beside the entries; each entry
# pairs with its thread's next return (a thread's ioctls do not overlap);
# one clock for every CPU (mono), as the two may run on different ones.
vfio_time_arm() {
	local t=/sys/kernel/tracing
	grep -q zp_l2_ioctl_ret "$t/kprobe_events" ||
		echo 'r:zp_l2_ioctl_ret vfio_fops_unl_ioctl' >>"$t/kprobe_events" || return 1
	echo mono >"$VFIO_COUNT/trace_clock" &&
		echo 1 >"$VFIO_COUNT/events/kprobes/zp_l2_ioctl_ret/enable"
}

# VFIO_MS: ms inside MAP_DMA and UNMAP_DMA since the last vfio_count_reset.
vfio_time_read() {
	VFIO_MS=$(awk '
		{
			tid = $1; sub(/.*-/, "", tid); ts = ""
			for (i = 2; i <= NF; i++)
				if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = substr($i, 1, length($i) - 1); break }
		}
		/ zp_l2_ioctl: / { start[tid] = ts }
		/ zp_l2_ioctl_ret: / && (tid in start) { total += ts - start[tid]; delete start[tid] }
		END { printf "%.0f\n", total * 1000 }' "$VFIO_COUNT/trace")
}

# Stop timing and remove the return probe (before vfio_count_disarm).
vfio_time_disarm() {
	[ -d "$VFIO_COUNT" ] || return 0
	echo 0 >"$VFIO_COUNT/events/kprobes/zp_l2_ioctl_ret/enable"
	echo '-:zp_l2_ioctl_ret' >>/sys/kernel/tracing/kprobe_events
}

# Stop recording and remove the kprobe.
vfio_count_disarm() {
	local t=/sys/kernel/tracing
	[ -d "$VFIO_COUNT" ] || return 0
	echo 0 >"$VFIO_COUNT/events/kprobes/zp_l2_ioctl/enable"
	echo 0 >"$VFIO_COUNT/events/kprobes/zp_l2_dev_ioctl/enable"
	rmdir "$VFIO_COUNT"
	echo '-:zp_l2_ioctl' >>"$t/kprobe_events"
	echo '-:zp_l2_dev_ioctl' >>"$t/kprobe_events"
}
