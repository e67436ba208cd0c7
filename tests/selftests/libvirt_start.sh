#!/bin/bash
# libvirt_start - the main job end to end, in the lab host: libvirt 9.0
# starts a VM with an edu passed through and guest RAM file-backed on
# zeropinfs, prepared by zeropin's libvirt hook and host program, and
# zeropin-timeline reads the start. Prints TAP.
#
#   setup_binds_devices_by_id_in_any_case  a driverless edu named 1234:11E8:
#                              bound to vfio-pci, given back by teardown
#   setup_is_idempotent        zeropin-host setup twice (runs turned off): the
#                              second changes nothing
#   zeropin_domain_starts      virsh start: RAM from the pool, pinned by zeropin;
#                              the timeline has (a), (b), (c) and the VFIO ioctls
#   qemu_runs_confined         as Debian runs it: QEMU as libvirt-qemu, in its
#                              own AppArmor profile (enforce), its RAM file
#                              on zeropinfs owned by libvirt-qemu
#   start_skips_relabels       the hook made g1's hugetlbfs folder and its
#                              RAM folder first: libvirt relabelled neither
#                              (g1's AppArmor profile loaded as often as an
#                              anonymous-memory domain's)
#   foreign_path_refused       a domain whose XML names a RAM file outside its
#                              own folder on the mount (a new one in g1's,
#                              g1's through its link, g1's file itself) does
#                              not start (AppArmor): it cannot reach other
#                              domains' RAM
#   reservations_count_concurrent_starts  four prepare hooks at once on a
#                              mount with room for three: three reserve, one
#                              is refused with the hook's sentence
#   fast_path_matches_script   the hook's compiled fast path and the script
#                              leave the same state after a prepare, a
#                              started and a release (and the release none),
#                              with the XML as libvirt writes it and with a
#                              repeated <uuid>; a NUL in zeropin.conf goes
#                              to the script
#   destroy_leaves_nothing     virsh destroy: nothing pinned, no block in use, the
#                              pool back to its target, the hook saw no leak
#   hook_refuses_without_module  no zeropin.ko to load: the start is refused with
#                              the hook's sentence
#   setup_while_libvirtd_runs_makes_the_folder  teardown + setup with
#                              libvirtd running: MOUNT/libvirt/qemu is QEMU's
#   nova_shaped_domain_starts  the memory backing Nova writes (immediate
#                              allocation, discard) starts and stops cleanly,
#                              after a teardown + setup while libvirtd ran
#   hook_follows_no_link       a hugetlbfs folder planted as a link: the fast
#                              path makes nothing through it, chowns nothing
#   zeropinfs_with_type1_starts  claim_type1v2=0: g1's RAM on zeropinfs,
#                              mapped by the kernel's type1, no zeropin pin
#   start_after_reboot         a simulated reboot (mount, module, /run gone):
#                              what zeropin.service runs, then libvirtd, then
#                              the domain starts, its RAM on zeropinfs
#   uefi_gpu_domain_starts     zeropin-domxml --uefi: OVMF (Debian's, picked
#                              by libvirt's firmware descriptors) boots the
#                              L2 kernel's bzImage with the largest GPU
#                              stand-in (scripts/lab --gpu, a 64 GiB BAR in
#                              make check) and the edu passed through, in
#                              the aperture zeropin-domxml sized; the L2
#                              kernel assigns the BAR; the timeline's (c)
#                              is the kernel's banner, after OVMF's own
#                              output on the same serial port; the
#                              timeline splits OVMF's time at its config
#                              writes to the GPU (decode went on at least
#                              once, every phase recorded)
#
# Each libvirt call has a deadline. Needs libvirt, bash and xmllint in the
# lab (make lab-userland) and the L2 kernel at /l2/vmlinux; skips otherwise.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:$PATH
VIRSH=(timeout 180 virsh -q -c qemu:///system)
MOD=/lib/zeropin/zeropin.ko
CONF=/etc/zeropin/zeropin.conf
GUEST_MIB=512
POOL_MIB=512
TAP_PREFIX=libvirt
. "$(dirname -- "$0")/../lib/tap.sh"

conf_module() {
	sed -i '/^ZEROPIN_MODULE=/d' "$CONF"
	echo "ZEROPIN_MODULE=$1" >>"$CONF"
}

# Define DOMAIN from zeropin-domxml with the given extra options.
define() {
	local name="$1"
	shift
	zeropin-domxml --name "$name" --type qemu --memory-mib "$GUEST_MIB" --vcpus 1 \
		--hostdev "$EDU" --kernel /l2/vmlinux --cmdline 'console=ttyS0 earlyprintk=serial,ttyS0 panic=-1' \
		--console-log "/tmp/$name-console.log" --timeline --emulator /usr/bin/qemu-system-x86_64 "$@" >"/tmp/$name.xml" &&
		"${VIRSH[@]}" define "/tmp/$name.xml" >/dev/null
}

# Start DOMAIN and wait (SECONDS, 60 unless given) for its kernel's first
# line.
start() {
	local wait_s="${2:-60}"
	rm -f "/tmp/$1-console.log"
	"${VIRSH[@]}" start "$1" 2>&1 || return 1
	for _ in $(seq 1 $((wait_s * 5))); do
		grep -q 'Linux version' "/tmp/$1-console.log" 2>/dev/null && return 0
		sleep 0.2
	done
	echo "no kernel line on $1's console in $wait_s s"
	return 1
}

pool() { cat "/sys/kernel/zeropin/pool/$1"; }

# Wait up to $2 s for `pool zero_mib` to reach $1.
pool_refilled() {
	for _ in $(seq 1 $(($2 * 5))); do
		[ "$(pool zero_mib)" -ge "$1" ] && return 0
		sleep 0.2
	done
	return 1
}

test_setup_is_idempotent() {
	local first second
	first=$(zeropin-host setup --module "$MOD" --size 2G --pool-mib "$POOL_MIB" --run-build 0 --device 1234:11e8 --edit-qemu-conf 2>&1)
	second=$(zeropin-host setup --module "$MOD" --size 2G --pool-mib "$POOL_MIB" --run-build 0 --device 1234:11e8 --edit-qemu-conf 2>&1)
	if echo "$first" | grep -q 'setup: [0-9]* changes' && echo "$second" | grep -q 'setup: nothing to change' &&
		[ "$(cat /sys/module/zeropin/parameters/run_build)" = N ] &&
		grep -q '^memory_backing_dir = "/run/zeropin"' /etc/libvirt/qemu.conf; then
		ok "setup_is_idempotent"
	else
		not_ok "setup_is_idempotent" "first: $first
second: $second"
	fi
	# the later starts under the default, 1 GiB runs on
	echo "# run_build: 1"
	echo 1 >/sys/module/zeropin/parameters/run_build
}

# A device without a driver, named by vendor:device in upper case: setup
# binds it to vfio-pci (checking its IOMMU group and that the host does
# not use it), teardown gives it back to no driver.
test_setup_binds_devices_by_id_in_any_case() {
	local dev="/sys/bus/pci/devices/$EDU" out rc=0 bound back
	echo "$EDU" >"$dev/driver/unbind" 2>/dev/null
	echo "" >"$dev/driver_override"
	out=$(zeropin-host setup --module "$MOD" --size 2G --pool-mib "$POOL_MIB" --device 1234:11E8 2>&1) || rc=$?
	bound=$(basename -- "$(readlink -f -- "$dev/driver" 2>/dev/null)" 2>/dev/null)
	zeropin-host teardown >/dev/null 2>&1 || rc=$?
	back=$([ -e "$dev/driver" ] && echo bound || echo none)
	if [ "$rc" = 0 ] && [ "$bound" = vfio-pci ] && [ "$back" = none ] &&
		echo "$out" | grep -q "$EDU: no driver -> vfio-pci"; then
		ok "setup_binds_devices_by_id_in_any_case"
	else
		not_ok "setup_binds_devices_by_id_in_any_case" "exit $rc, bound to '$bound', after teardown $back: $out"
	fi
	echo vfio-pci >"$dev/driver_override"
	echo "$EDU" >/sys/bus/pci/drivers_probe
}

test_zeropin_domain_starts() {
	local out inuse pinned tl want_maps='"map_ioctls":[1-9]'
	# without kprobe events (the debug lab kernel) the VFIO part is null
	zeropin-timeline --arm >/dev/null 2>&1 || want_maps='"map_ioctls":null'
	out=$(define g1 && start g1)
	inuse=$(pool inuse_mib)
	pinned=$(counter iommu_counters pages_pinned)
	tl=$(zeropin-timeline g1 --json 2>&1)
	if [ "$?" = 0 ] && [ "$inuse" -ge "$GUEST_MIB" ] && [ "$((pinned * 4 / 1024))" -ge "$GUEST_MIB" ] &&
		echo "$tl" | grep -q '"a_b_ms":[0-9]' && echo "$tl" | grep -q '"b_c_ms":[0-9]' &&
		echo "$tl" | grep -q "$want_maps"; then
		ok "zeropin_domain_starts"
		echo "# $tl"
	else
		not_ok "zeropin_domain_starts" "$out
inuse $inuse MiB, pinned $pinned pages; timeline: $tl
$(tail -n 5 /var/log/libvirt/qemu/g1.log)"
	fi
}

# The hook's reservations, with g1 running (GUEST_MIB reserved and faulted
# in) on the 2 GiB mount: four domains of 512 MiB whose prepare hooks run
# at once (no QEMU behind them: reserved, nothing faulted) fit three times
# (2048 - 512 = 1536), the fourth is refused with the hook's sentence
# (statfs alone would have let all four in: nothing of theirs is faulted);
# release gives a reservation back, and the refused one then fits.
HOOK=/etc/libvirt/hooks/qemu.d/zeropin
test_reservations_count_concurrent_starts() {
	local i rc fits=0 refused=0 again=0 out="" pids=()
	for i in 1 2 3 4; do
		zeropin-domxml --name "r$i" --type qemu --memory-mib 512 >"/tmp/r$i.xml"
	done
	for i in 1 2 3 4; do
		timeout 30 "$HOOK" "r$i" prepare begin - <"/tmp/r$i.xml" >"/tmp/r$i.out" 2>&1 &
		pids[i]=$!
	done
	for i in 1 2 3 4; do
		wait "${pids[i]}" && rc=0 || rc=$?
		if [ "$rc" = 0 ]; then
			fits=$((fits + 1))
		elif grep -q "domain r$i needs 512 MiB of guest RAM, but zeropinfs on .* can give 0 MiB" "/tmp/r$i.out"; then
			refused=$((refused + 1))
			out="r$i"
		fi
	done
	if [ "$refused" = 1 ]; then
		for i in 1 2 3 4; do
			[ "r$i" = "$out" ] || timeout 30 "$HOOK" "r$i" release end - <"/tmp/r$i.xml" >/dev/null 2>&1
		done
		timeout 30 "$HOOK" "$out" prepare begin - <"/tmp/$out.xml" >/dev/null 2>&1 && again=1
		timeout 30 "$HOOK" "$out" release end - <"/tmp/$out.xml" >/dev/null 2>&1
	fi
	if [ "$fits" = 3 ] && [ "$refused" = 1 ] && [ "$again" = 1 ] &&
		[ -z "$(ls /run/zeropin-hook/reserved | grep '^r')" ]; then
		ok "reservations_count_concurrent_starts"
	else
		not_ok "reservations_count_concurrent_starts" "$fits fit, $refused refused, again $again; reserved: $(ls /run/zeropin-hook/reserved)
$(cat /tmp/r?.out)"
		for i in 1 2 3 4; do timeout 30 "$HOOK" "r$i" release end - <"/tmp/r$i.xml" >/dev/null 2>&1; done
	fi
}

# Debian's libvirt: QEMU as libvirt-qemu (dynamic ownership), confined by
# the profile virt-aa-helper wrote for the domain; libvirt gave the RAM
# folder on the mount to QEMU's user.
# hook_xml NAME ID UUID MIB: a zeropin domain's XML as libvirt hands it
# to the hooks, with the domain's id and UUID (zeropin-domxml writes
# neither).
hook_xml() {
	zeropin-domxml --name "$1" --type qemu --memory-mib "$4" |
		sed -e "1s/<domain /<domain id='$2' /" -e "s|  <name>$1</name>|&\n  <uuid>$3</uuid>|"
}

# What a prepare, a started and a release of domain fp1 (libvirt's id 99,
# its own UUID, 1 GiB: the pool's target raised; no wait for the
# zeroing) leave on the host:
# the reservation, the pool's target and its kept base, the hugetlbfs
# and RAM folders with their modes, owners and links.
fp_state() {
	local st=/run/zeropin-hook
	echo "reserved: $(cat "$st/reserved/fp1" 2>/dev/null) started: $(ls "$st/started" 2>/dev/null | grep -x fp1)"
	echo "target: $(pool target_mib) base: $(cat "$st/target-base" 2>/dev/null)"
	local p
	# the lab's find has no -printf
	for p in "/run/zeropin/domains/libvirt-$1" "/run/zeropin/domains/libvirt-$1"/* /run/zeropin/libvirt/qemu/99-fp1 \
		/run/zeropin/libvirt/qemu/99-fp1/* /dev/hugepages/libvirt/qemu/99-fp1; do
		[ -e "$p" ] || [ -L "$p" ] || continue
		echo "$p $(stat -c '%F %a %U:%G' "$p") $(readlink "$p")"
	done
}

# The hook's compiled fast path (its #! interpreter, as libvirt runs it)
# does what the script does (bash HOOK, the reference): the same
# prepare, started and release of fp1 through each leave the same state
# (fp_state), and the release leaves nothing; the fast path does the
# prepare and the started alone (ZP_HOOK_NO_SCRIPT: it would exit 99 to
# hand them to the script). Twice: the XML as libvirt writes it, and with
# its <uuid> written twice over (<uuid><uuid>UUID</uuid>: the script's
# pattern finds the second). A zeropin.conf with a NUL (bash's read drops
# it) is the script's to read: the fast path hands the call over. The
# TAP comment gives each prepare's wall time.
test_fast_path_matches_script() {
	local uuid=5eed0000-0000-4000-8000-00000000f9a1 xml=/tmp/fp1.xml way shape t0 t1 bad="" rc
	local -A prepared released ms
	for shape in libvirt repeated; do
		hook_xml fp1 99 "$uuid" 1024 >"$xml"
		[ "$shape" = libvirt ] || sed -i 's|<uuid>|<uuid><uuid>|' "$xml"
		for way in script fast; do
			# the fast path's prepare and started in full, never the script
			local run=(env ZP_HOOK_NO_SCRIPT=1 "$HOOK")
			[ "$way" = fast ] || run=(bash "$HOOK")
			t0=${EPOCHREALTIME/./}
			ZEROPIN_HOOK_WAIT_S=0 timeout 30 "${run[@]}" fp1 prepare begin - <"$xml" >"/tmp/fp1-$way.out" 2>&1 ||
				bad="$bad $shape $way: prepare exit $?;"
			t1=${EPOCHREALTIME/./}
			ms[$shape-$way]=$(((t1 - t0) / 1000))
			timeout 30 "${run[@]}" fp1 started begin - <"$xml" >>"/tmp/fp1-$way.out" 2>&1 || bad="$bad $shape $way: started exit $?;"
			[ "$way" = script ] || run=("$HOOK")
			prepared[$way]=$(fp_state "$uuid")
			rm -rf /run/zeropin/libvirt/qemu/99-fp1	# as libvirt does at the stop, before the release
			timeout 30 "${run[@]}" fp1 release end - <"$xml" >>"/tmp/fp1-$way.out" 2>&1 || bad="$bad $shape $way: release exit $?;"
			released[$way]=$(fp_state "$uuid")
		done
		[ "${prepared[script]}" = "${prepared[fast]}" ] || bad="$bad $shape: prepared state differs:
script: ${prepared[script]}
fast:   ${prepared[fast]};"
		[ "${released[script]}" = "${released[fast]}" ] || bad="$bad $shape: released state differs;"
		# the RAM folder is made ahead only where AppArmor's rule is in
		# force (not on the debug lab kernel)
		{ [ ! -d /sys/kernel/security/apparmor ] ||
			echo "${prepared[fast]}" | grep -q "^/run/zeropin/domains/libvirt-$uuid/pc.ram regular .*file 644 libvirt-qemu:libvirt-qemu"; } &&
			echo "${prepared[fast]}" | grep -q "^reserved: 1024 99 started: fp1" || bad="$bad $shape: not prepared;"
		[ "$(echo "${released[fast]}" | grep -c "^/")" = 0 ] || bad="$bad $shape: folders left;"
	done
	printf '# a NUL\0 in a comment\n' | cat - "$CONF" >/tmp/fp1-nul.conf
	rc=0
	ZP_CONF=/tmp/fp1-nul.conf ZP_HOOK_NO_SCRIPT=1 ZEROPIN_HOOK_WAIT_S=0 timeout 30 "$HOOK" fp1 prepare begin - <"$xml" >/dev/null 2>&1 || rc=$?
	[ "$rc" = 99 ] || bad="$bad a NUL in zeropin.conf: exit $rc, not handed to the script;"
	timeout 30 "$HOOK" fp1 release end - <"$xml" >/dev/null 2>&1 || true
	if [ -z "$bad" ]; then
		ok "fast_path_matches_script"
		echo "# prepare of a 1 GiB zeropin domain: script ${ms[libvirt-script]} ms, fast path ${ms[libvirt-fast]} ms"
	else
		not_ok "fast_path_matches_script" "$bad
$(cat /tmp/fp1-script.out /tmp/fp1-fast.out)"
	fi
}

# A hugetlbfs folder for the domain that is a link to a folder of root's
# (planted before the start; on qemu.conf's hugetlbfs_mount, a folder of
# the test's: hugetlbfs itself takes no symlinks here): the fast path's
# prepare goes on alone (no script), makes nothing through it, leaves the
# target root's; the release runs clean.
test_hook_follows_no_link() {
	local xml=/tmp/fl1.xml v=/tmp/fl-victim hm=/tmp/fl-huge qc=/tmp/fl-qemu.conf rc=0 before out link
	link="$hm/libvirt/qemu/98-fl1"
	rm -rf "$v" "$hm" && mkdir -p "$v" "$hm/libvirt/qemu" && chmod 755 "$v"
	ln -s "$v" "$link"
	{ grep -v '^hugetlbfs_mount' /etc/libvirt/qemu.conf; echo "hugetlbfs_mount = \"$hm\""; } >"$qc"
	hook_xml fl1 98 5eed0000-0000-4000-8000-0000000f1a11 64 >"$xml"
	before=$(stat -c %U:%a "$v")
	out=$(ZEROPIN_QEMU_CONF="$qc" ZP_HOOK_NO_SCRIPT=1 timeout 30 "$HOOK" fl1 prepare begin - <"$xml" 2>&1) || rc=$?
	rm -rf /run/zeropin/libvirt/qemu/98-fl1	# as libvirt does at the stop, before the release
	ZEROPIN_QEMU_CONF="$qc" timeout 30 "$HOOK" fl1 release end - <"$xml" >/dev/null 2>&1
	if [ "$rc" = 0 ] && [ "$(stat -c %U:%a "$v")" = "$before" ] && [ -L "$link" ] && echo "$out" | grep -q 'could not make its hugetlbfs folders'; then
		ok "hook_follows_no_link"
	else
		not_ok "hook_follows_no_link" "exit $rc; $v was $before, now $(stat -c %U:%a "$v"): $out"
	fi
	rm -rf "$v" "$hm" "$qc"
}

test_qemu_runs_confined() {
	local pid user label ram owner
	[ -d /sys/kernel/security/apparmor ] || { ok "qemu_runs_confined # SKIP no AppArmor in this kernel (the debug lab kernel's config)"; return; }
	pid=$(cat /run/libvirt/qemu/g1.pid 2>/dev/null)
	user=$(stat -c %U "/proc/$pid" 2>/dev/null)
	label=$(cat "/proc/$pid/attr/current" 2>/dev/null | tr -d '\0')
	ram=$(find -L /run/zeropin/libvirt/qemu -type f 2>/dev/null | head -n 1)
	owner=$(stat -c %U "$ram" 2>/dev/null)
	if [ "$user" = libvirt-qemu ] && [[ "$label" =~ ^libvirt-[0-9a-f-]+\ \(enforce\)$ ]] && [ "$owner" = libvirt-qemu ]; then
		ok "qemu_runs_confined"
	else
		not_ok "qemu_runs_confined" "QEMU pid '$pid' runs as '$user' in '$label'; RAM file '$ram' owned by '$owner'"
	fi
}

# A domain that names a RAM file of its own choosing through
# <qemu:commandline>: a new file in running g1's RAM folder (libvirt-qemu's
# own and 0700: the file modes let any QEMU in), g1's RAM through the link
# in that folder, and g1's RAM file itself in g1's own folder on the mount
# (MOUNT/domains/libvirt-UUID, which the one AppArmor rule zeropin-host
# setup wrote grants to g1's profile alone). QEMU's profile allows none of
# them, so each start fails, AppArmor says so in the kernel log (naming
# the path a link leads to), and nothing is created.
test_foreign_path_refused() {
	local out rc dir g1uuid steal real denied bad=""
	[ -d /sys/kernel/security/apparmor ] || { ok "foreign_path_refused # SKIP no AppArmor in this kernel (the debug lab kernel's config)"; return; }
	dir=$(find /run/zeropin/libvirt/qemu -maxdepth 1 -type d -name '*-g1' | head -n 1)
	g1uuid=$("${VIRSH[@]}" domuuid g1)
	[ -n "$dir" ] || bad="no folder of g1's;"
	for steal in "$dir/stolen-ram" "$dir/pc.ram" "/run/zeropin/domains/libvirt-$g1uuid/pc.ram"; do
		real=$(readlink -f -- "$steal")
		zeropin-domxml --name f1 --type qemu --memory-mib 64 --vcpus 1 --anonymous --kernel /l2/vmlinux --console-log /tmp/f1-console.log \
			--timeline --emulator /usr/bin/qemu-system-x86_64 >/tmp/f1.xml
		# into --timeline's <qemu:commandline> (its namespace declared)
		sed -i "s|  </qemu:commandline>|    <qemu:arg value='-object'/>\\n    <qemu:arg value='memory-backend-file,id=steal,size=2M,share=on,mem-path=$steal'/>\\n  </qemu:commandline>|" /tmp/f1.xml
		rc=0
		out=$("${VIRSH[@]}" define /tmp/f1.xml 2>&1 && "${VIRSH[@]}" start f1 2>&1) || rc=$?
		grep -q "mem-path=$steal" /var/log/libvirt/qemu/f1.log 2>/dev/null || bad="$bad $steal: QEMU was not given the path;"
		denied=$(dmesg | grep 'apparmor="DENIED"' | grep -c "name=\"$real\"")
		if [ "$rc" = 0 ] || ! echo "$out" | grep -q "Permission denied" || [ "$denied" = 0 ]; then
			bad="$bad $steal ($real): exit $rc, $denied AppArmor denials: $out;"
			"${VIRSH[@]}" destroy f1 >/dev/null 2>&1
		fi
		[ "$steal" != "$dir/stolen-ram" ] || [ ! -e "$steal" ] || bad="$bad $steal was created;"
		"${VIRSH[@]}" undefine f1 >/dev/null 2>&1
		[ "$steal" != "$dir/stolen-ram" ] || rm -f -- "$steal"
	done
	if [ -z "$bad" ]; then
		ok "foreign_path_refused"
	else
		not_ok "foreign_path_refused" "$bad"
	fi
}

# libvirt's relabel of a folder it makes reloads the domain's AppArmor
# profile with the folder added; for file-backed RAM it makes one on
# every hugetlbfs mount too, which QEMU never opens, and the RAM folder
# on the mount. The hook made both first (the RAM folder holding a link
# to g1's own RAM file, in the folder the one rule zeropin-host setup
# wrote grants g1's profile): libvirt added neither to the profile's
# files, and g1's start loaded the profile 4 times (the domain, its two
# private folders, its master key), as an anonymous-memory domain's.
test_start_skips_relabels() {
	local uuid prof hp ram loads link
	[ -d /sys/kernel/security/apparmor ] || { ok "start_skips_relabels # SKIP no AppArmor in this kernel (the debug lab kernel's config)"; return; }
	uuid=$("${VIRSH[@]}" domuuid g1)
	prof="/etc/apparmor.d/libvirt/libvirt-$uuid"
	hp=$(find /dev/hugepages/libvirt/qemu -maxdepth 1 -type d -name '*-g1' 2>/dev/null | head -n 1)
	ram=$(find /run/zeropin/libvirt/qemu -maxdepth 1 -type d -name '*-g1' 2>/dev/null | head -n 1)
	link=$(readlink "$ram/pc.ram" 2>/dev/null)
	loads=$(dmesg | grep -c "apparmor=\"STATUS\" operation=\"profile_\(load\|replace\)\".* name=\"libvirt-$uuid\"")
	if [ -n "$hp" ] && [ "$(stat -c %U:%a "$hp")" = libvirt-qemu:700 ] && [ "$(stat -c %U:%a "$ram")" = libvirt-qemu:700 ] &&
		[ "$link" = "/run/zeropin/domains/libvirt-$uuid/pc.ram" ] && [ "$(stat -L -c %U:%a "$ram/pc.ram")" = libvirt-qemu:644 ] &&
		! grep -q '/dev/hugepages\|/run/zeropin' "$prof.files" && [ "$loads" = 4 ]; then
		ok "start_skips_relabels"
	else
		not_ok "start_skips_relabels" "hugetlbfs folder '$hp' ($(stat -c %U:%a "$hp" 2>&1)), RAM folder '$ram' ($(stat -c %U:%a "$ram" 2>&1)), its pc.ram -> '$link' ($(stat -L -c %U:%a "$ram/pc.ram" 2>&1)), $loads profile loads; files:
$(grep 'zeropin\|hugepages' "$prof.files" 2>&1)"
	fi
}

# libvirt removes the hugetlbfs folder the hook made as its own.
test_destroy_leaves_nothing() {
	local out
	out=$("${VIRSH[@]}" destroy g1 2>&1)
	[ -z "$(find /dev/hugepages/libvirt/qemu -name '*-g1' 2>/dev/null)" ] || out="$out
g1's hugetlbfs folder is still there"
	if [ "$(counter iommu_counters pages_pinned)" = 0 ] && [ "$(pool inuse_mib)" = 0 ] &&
		! echo "$out" | grep -q 'still there' &&
		pool_refilled "$POOL_MIB" 60 && [ -s /var/log/libvirt/libvirtd.log ] &&
		! grep -q 'zeropin hook: error' /var/log/libvirt/libvirtd.log &&
		[ -z "$(find /run/zeropin -type f)" ]; then
		ok "destroy_leaves_nothing"
	else
		not_ok "destroy_leaves_nothing" "$out
pinned $(counter iommu_counters pages_pinned) pages, inuse $(pool inuse_mib) MiB, zero $(pool zero_mib) MiB
$(grep 'zeropin hook' /var/log/libvirt/libvirtd.log | tail -n 3)
$(find /run/zeropin -type f)"
	fi
}

test_hook_refuses_without_module() {
	local out
	zeropin-host teardown >/dev/null 2>&1
	conf_module ""		# modprobe finds no zeropin in the lab
	out=$("${VIRSH[@]}" start g1 2>&1)
	if [ $? != 0 ] && echo "$out" | grep -q 'cannot load zeropin.ko; install it' && [ ! -d /sys/module/zeropin ]; then
		ok "hook_refuses_without_module"
	else
		not_ok "hook_refuses_without_module" "$out"
		"${VIRSH[@]}" destroy g1 >/dev/null 2>&1
	fi
	conf_module "$MOD"
	# the hook never mounts: set the host up again, as zeropin.service would
	zeropin-host setup --module "$MOD" --size 2G --pool-mib "$POOL_MIB" >/dev/null 2>&1
}

# hook_refuses_without_module tore the host down and set it up again with
# libvirtd running: setup made libvirt's folder on the new mount for
# QEMU's user, as libvirtd does when it starts (nova_shaped_domain_starts
# then starts a domain there).
# The folders 0711 (QEMU reaches its own domain's, lists none), the mount
# nosuid,nodev,noexec.
test_setup_while_libvirtd_runs_makes_the_folder() {
	local opts
	opts=$(awk '$2 == "/run/zeropin" && $3 == "zeropinfs" { print $4 }' /proc/mounts)
	if [ "$(stat -c %U:%a /run/zeropin /run/zeropin/libvirt /run/zeropin/libvirt/qemu 2>/dev/null | tr '\n' ' ')" = "root:711 root:711 libvirt-qemu:711 " ] &&
		[[ ",$opts," == *,nosuid,* && ",$opts," == *,nodev,* && ",$opts," == *,noexec,* ]]; then
		ok "setup_while_libvirtd_runs_makes_the_folder"
	else
		not_ok "setup_while_libvirtd_runs_makes_the_folder" "mount options $opts; $(ls -lad /run/zeropin /run/zeropin/libvirt /run/zeropin/libvirt/qemu 2>&1)"
	fi
}

test_nova_shaped_domain_starts() {
	local out inuse
	out=$(define n1 --nova && start n1)
	inuse=$(pool inuse_mib 2>/dev/null || echo 0)
	out="$out$("${VIRSH[@]}" destroy n1 2>&1)"
	if [ "$inuse" -ge "$GUEST_MIB" ] && [ "$(pool inuse_mib)" = 0 ] &&
		grep -q "<allocation mode='immediate'/>" /tmp/n1.xml; then
		ok "nova_shaped_domain_starts"
	else
		not_ok "nova_shaped_domain_starts" "inuse while running $inuse MiB; $out"
	fi
}

# zeropinfs with the kernel's own VFIO (claim_type1v2=0, the mode for hosts
# that leave every VFIO container to the kernel): g1 starts with its RAM
# from the pool on zeropinfs, type1 maps it (the timeline counts the
# MAP_DMAs and the MiB), zeropin pins nothing and serves no container;
# the edu's DMA through those mappings is proven by vfio_dma's type1
# variants over zeropinfs. claim_type1v2 back to 1 after.
test_zeropinfs_with_type1_starts() {
	local out rc=0 inuse pinned containers tl claim=/sys/module/zeropin/parameters/claim_type1v2
	echo 0 >"$claim"
	zeropin-timeline --arm >/dev/null 2>&1
	out=$(start g1) || rc=$?
	inuse=$(pool inuse_mib)
	pinned=$(counter iommu_counters pages_pinned)
	containers=$(counter iommu_counters containers)
	tl=$(zeropin-timeline g1 --json 2>&1)
	"${VIRSH[@]}" destroy g1 >/dev/null 2>&1
	echo 1 >"$claim"
	if [ "$rc" = 0 ] && [ "$inuse" -ge "$GUEST_MIB" ] && [ "$pinned" = 0 ] && [ "$containers" = 0 ] &&
		{ echo "$tl" | grep -q '"map_ioctls":null' || [[ "$tl" =~ \"mib_mapped\":([0-9]+) && "${BASH_REMATCH[1]}" -ge "$GUEST_MIB" ]]; }; then
		ok "zeropinfs_with_type1_starts"
		echo "# type1 over zeropinfs: $(echo "$tl" | grep -oE '"(vfio_ms|map_ioctls|mib_mapped|a_c_ms)":[0-9.a-z]+' | tr '\n' ' ')"
	else
		not_ok "zeropinfs_with_type1_starts" "exit $rc, $inuse MiB in use, zeropin pinned $pinned pages in $containers containers; timeline: $tl
$out"
	fi
}

# A reboot, short of rebooting: libvirtd stops, the mount, the module and
# what /run held go. Then what the boot runs, in its order: zeropin.service
# (zeropin-host setup, its settings from zeropin.conf alone), libvirtd;
# and the domain starts with its RAM on zeropinfs, owned by QEMU's user.
test_start_after_reboot() {
	local out rc=0 inuse
	lab-libvirtd stop
	umount /run/zeropin 2>/dev/null
	rmmod zeropin 2>/dev/null
	rm -rf /run/zeropin /run/zeropin-hook /run/zeropin-host /run/libvirt
	sed -i '/^ZEROPIN_\(MOUNT_SIZE\|POOL_MIB\)=/d' "$CONF"
	printf 'ZEROPIN_MOUNT_SIZE=2G\nZEROPIN_POOL_MIB=%s\n' "$POOL_MIB" >>"$CONF"
	out=$(zeropin-host setup 2>&1) || rc=$?
	lab-libvirtd start || rc=$?
	out="$out
$(start g1)" || rc=$?
	inuse=$(pool inuse_mib 2>/dev/null || echo 0)
	if [ "$rc" = 0 ] && [ "$inuse" -ge "$GUEST_MIB" ] &&
		[ "$(stat -c %U /run/zeropin/libvirt/qemu 2>/dev/null)" = libvirt-qemu ]; then
		ok "start_after_reboot"
	else
		not_ok "start_after_reboot" "exit $rc, $inuse MiB in use: $out
$(tail -n 5 /var/log/libvirt/qemu/g1.log)"
	fi
	"${VIRSH[@]}" destroy g1 >/dev/null 2>&1
}

UEFI_FIRST_LINE_S=600	# nested TCG: OVMF, then the bzImage decompressing itself

# The GPU stand-in with the largest BAR (MiB of its 64-bit BARs), as
# "ADDR MIB"; empty without one.
largest_gpu() {
	local d best="" most=0 mib n start end flags
	for d in $(gpu_devices); do
		mib=0 n=0
		while read -r start end flags && [ "$n" -lt 6 ]; do
			n=$((n + 1))
			[ $((flags & 0x100000)) = 0 ] || mib=$((mib + (end - start + 1) / 1048576))
		done <"/sys/bus/pci/devices/$d/resource"
		[ "$mib" -gt "$most" ] && best=$d most=$mib
	done
	[ -z "$best" ] || echo "$best $most"
}

test_uefi_gpu_domain_starts() {
	local gpu mib out tl c first log=/var/log/libvirt/qemu/u1.log bar tl_vfio
	[ -f /usr/share/OVMF/OVMF_CODE_4M.fd ] && [ -f /l2/vmlinuz ] ||
		{ ok "uefi_gpu_domain_starts # SKIP no OVMF or no L2 bzImage in the lab (make lab-userland)"; return; }
	read -r gpu mib <<<"$(largest_gpu)"
	[ -n "$gpu" ] || { ok "uefi_gpu_domain_starts # SKIP no GPU stand-in in this boot (scripts/lab --gpu)"; return; }
	out=$(define u1 --uefi --hostdev "$gpu" --kernel /l2/vmlinuz 2>&1 && start u1 "$UEFI_FIRST_LINE_S" 2>&1)
	tl=$(zeropin-timeline u1 --json 2>&1)
	c=$(echo "$tl" | sed -n 's/.*"c":\([0-9.]*\).*/\1/p')
	# OVMF's first byte on the serial port, before the kernel's
	first=$(grep -a -m1 -o '^[0-9]*@[0-9.]*:serial_write write addr 0x00' "$log" 2>/dev/null | sed 's/^[0-9]*@\([0-9.]*\):.*/\1/')
	# the kernel enumerates PCI a while after its banner
	for _ in $(seq 1 $((UEFI_FIRST_LINE_S * 5))); do
		grep -a -q 'BAR 2 \[mem ' /tmp/u1-console.log 2>/dev/null && break
		sleep 0.2
	done
	bar=$(tr -d '\r' <"/tmp/u1-console.log" 2>/dev/null | grep -a -c 'BAR 2 \[mem 0x0*[1-9a-f][0-9a-f]*-.* 64bit pref\]')
	# VFIO's time in the BARs phase comes from kprobe events, which the
	# debug lab kernel lacks: zeropin-timeline says null there
	tl_vfio=$tl
	[ -e /sys/kernel/tracing/kprobe_events ] || tl_vfio=${tl//'"fw_bars_vfio_ms":null'/'"fw_bars_vfio_ms":0'}
	if [ -n "$c" ] && [ -n "$first" ] && [ "$(echo "$c > $first" | bc)" = 1 ] && [ "$bar" -ge 1 ] &&
		grep -q "X-PciMmio64Mb,string=" /tmp/u1.xml && echo "$tl" | grep -q '"map_ioctls":' &&
		echo "$tl_vfio" | grep -q '"fw_before_pci_ms":[0-9]*,"fw_enumeration_ms":[0-9]*,"fw_bars_ms":[0-9]*,"fw_bars_vfio_ms":[0-9.]*,"fw_decode_on":[1-9][0-9]*,"fw_boot_ms":[0-9]*,'; then
		ok "uefi_gpu_domain_starts"
		echo "# $gpu ($mib MiB of BAR), aperture $(sed -n "s/.*X-PciMmio64Mb,string=\([0-9]*\)'.*/\1/p" /tmp/u1.xml) MiB: $tl"
	else
		not_ok "uefi_gpu_domain_starts" "$gpu ($mib MiB of BAR): $out
timeline: $tl; OVMF's first serial byte at ${first:-never}; the kernel's BAR 2 lines: $bar
$(tail -n 5 "$log")
$(tr -d '\r' <"/tmp/u1-console.log" 2>/dev/null | grep -a 'BAR\|Linux version' | tail -n 5)"
	fi
	"${VIRSH[@]}" destroy u1 >/dev/null 2>&1
	"${VIRSH[@]}" undefine --nvram u1 >/dev/null 2>&1
}

main() {
	local addr
	[ -x /usr/sbin/libvirtd ] && command -v zeropin-host >/dev/null || skip_all "no libvirt or zeropin host programs in the lab (make lab-userland)"
	[ -f /l2/vmlinux ] || skip_all "no L2 kernel at /l2/vmlinux (scripts/lab-l2-kernel)"
	EDU=$(edu_device)
	[ -n "$EDU" ] || skip_all "no edu device"
	# a kernel without AppArmor (the debug lab kernel): setup would refuse
	# to run QEMU unconfined; the tests that need confinement skip there
	[ -d /sys/kernel/security/apparmor ] || echo "ZEROPIN_ALLOW_UNCONFINED=1" >>"$CONF"
	# libvirt's profiles loaded, as apparmor.service does at boot before
	# zeropin.service: setup checks that libvirt will confine QEMU
	lab-libvirtd apparmor || { echo "Bail out! libvirt's AppArmor profiles did not load"; exit 1; }
	echo "TAP version 13"
	echo "1..16"
	test_setup_binds_devices_by_id_in_any_case
	test_setup_is_idempotent
	lab-libvirtd start || { echo "Bail out! libvirtd did not start"; exit 1; }
	test_zeropin_domain_starts
	test_qemu_runs_confined
	test_start_skips_relabels
	test_foreign_path_refused
	test_reservations_count_concurrent_starts
	test_fast_path_matches_script
	test_hook_follows_no_link
	test_destroy_leaves_nothing
	test_hook_refuses_without_module
	test_setup_while_libvirtd_runs_makes_the_folder
	test_nova_shaped_domain_starts
	test_zeropinfs_with_type1_starts
	test_start_after_reboot
	test_uefi_gpu_domain_starts
	for d in g1 n1; do "${VIRSH[@]}" undefine "$d" >/dev/null 2>&1; done
	lab-libvirtd stop
	zeropin-timeline --disarm
	zeropin-host teardown >/dev/null 2>&1
	# a managed hostdev's release may have left the edu without a driver
	addr="/sys/bus/pci/devices/$EDU"
	if [ ! -e "$addr/driver" ]; then
		echo vfio-pci >"$addr/driver_override"
		echo "$EDU" >/sys/bus/pci/drivers_probe
	fi
	[ "$FAILS" = 0 ]
}

main "$@"
