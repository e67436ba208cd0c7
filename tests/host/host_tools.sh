#!/bin/bash
# Host-side tests of zeropin's host programs, no VFIO needed: the libvirt
# hook against sample domain XMLs (a zeropin domain, other domains,
# malformed XML, a missing module), the domain XML generator against
# libvirt's schema, and the programs' usage errors. Prints TAP.
#
# USAGE: tests/host/host_tools.sh
# The lab tests (tests/lab/libvirt-guest) start real domains through libvirt.
set -eu
ROOT=$(CDPATH="" cd -- "$(dirname -- "$0")/../.." && pwd)
HOOK="$ROOT/scripts/libvirt/qemu.d/zeropin"
# ZP_HOOK_FRONT=PROGRAM: run the hook through its compiled fast path, as
# the kernel does for the installed hook's #! line (make check: both ways)
HOOK_RUN=("$HOOK")
[ -z "${ZP_HOOK_FRONT:-}" ] || HOOK_RUN=("$ZP_HOOK_FRONT" "$HOOK")
DOMXML="$ROOT/scripts/zeropin-domxml"
HOST="$ROOT/scripts/zeropin-host"
TMP=$(mktemp -d)
trap 'rm -rf -- "$TMP"' EXIT
N=0
FAILS=0

ok() {
	N=$((N + 1))
	echo "ok $N - $1"
}

not_ok() {
	N=$((N + 1))
	FAILS=$((FAILS + 1))
	echo "not ok $N - $1"
	[ -z "${2:-}" ] || echo "$2" | sed 's/^/#   /'
}

# Run the hook with a deadline: XML file, operation, sub-operation. Sets
# RC, OUT (stdout+stderr) and MS (wall time).
run_hook() {
	local start end
	start=$(date +%s%N)
	RC=0
	OUT=$(timeout 10 "${HOOK_RUN[@]}" vm1 "$2" "$3" - <"$1" 2>&1) || RC=$?
	end=$(date +%s%N)
	MS=$(((end - start) / 1000000))
}

# A sandbox: a qemu.conf whose memory_backing_dir is the configured mount
# (an empty folder: zeropinfs is not mounted on this host), a module path
# that does not exist, and a configuration file naming both.
sandbox() {
	mkdir -p "$TMP/mnt"
	echo "memory_backing_dir = \"$TMP/mnt\"" >"$TMP/qemu.conf"
	cat >"$TMP/zeropin.conf" <<-EOF
		# sample configuration
		ZEROPIN_MOUNT=$TMP/mnt
		ZEROPIN_QEMU_CONF=$TMP/qemu.conf
		ZEROPIN_MODULE=$TMP/missing/zeropin.ko
		ZEROPIN_HOOK_WAIT_S=1
	EOF
	export ZP_CONF="$TMP/zeropin.conf"
	export ZP_STATE_DIR="$TMP/state"	# setup's records: never this host's /var/lib/zeropin
	"$DOMXML" --name vm1 --memory-mib 2048 --hostdev 0000:65:00.0 >"$TMP/zeropin.xml"
	"$DOMXML" --name vm1 --memory-mib 2048 --anonymous >"$TMP/anon.xml"
	"$DOMXML" --name vm1 --memory-mib 2048 --nova >"$TMP/nova.xml"
	head -c 200 "$TMP/zeropin.xml" >"$TMP/broken.xml"
}

test_other_domain_passes() {
	run_hook "$TMP/anon.xml" prepare begin
	if [ "$RC" = 0 ] && [ -z "$OUT" ]; then
		ok "hook: a domain with anonymous memory passes untouched and silent (${MS} ms)"
	else
		not_ok "hook: a domain with anonymous memory passes untouched" "exit $RC: $OUT"
	fi
}

test_file_domain_elsewhere_passes() {
	run_hook "$TMP/zeropin.xml" prepare begin
	local rc_ours="$RC"
	ZEROPIN_QEMU_CONF=/nonexistent/qemu.conf run_hook "$TMP/zeropin.xml" prepare begin
	if [ "$RC" = 0 ] && [ -z "$OUT" ] && [ "$rc_ours" != 0 ]; then
		ok "hook: a file-backed domain whose memory_backing_dir is not zeropin's passes untouched"
	else
		not_ok "hook: a file-backed domain elsewhere passes untouched" "exit $RC: $OUT"
	fi
}

# The hook refuses `prepare begin` of the domain in XML file $1, with a
# message matching $2; $3 names the test.
expect_hook_refuses() {
	run_hook "$1" prepare begin
	if [ "$RC" != 0 ] && echo "$OUT" | grep -q "$2"; then
		ok "hook: $3"
	else
		not_ok "hook: $3" "exit $RC: $OUT"
	fi
}

# The hook takes the domain in XML file $1 for zeropin's and, with no
# module to load in the sandbox, refuses it with its sentence. Where zeropin
# is loaded on this host the hook would use it for real: skipped.
expect_refused_without_module() {
	if [ -d /sys/module/zeropin ]; then
		ok "hook: $2 # SKIP zeropin is loaded on this host (the hook would use it)"
		return
	fi
	expect_hook_refuses "$1" "domain vm1: cannot load zeropin.ko; install it" "$2"
}

test_missing_module_refused() {
	expect_refused_without_module "$TMP/zeropin.xml" \
		"a zeropin domain is refused with a clear message when the module is missing"
}

test_nova_domain_is_ours() {
	expect_refused_without_module "$TMP/nova.xml" "a Nova-shaped file-backed domain is recognised as zeropin's"
}

test_malformed_xml() {
	expect_hook_refuses "$TMP/broken.xml" "does not parse" "malformed domain XML is refused with a clear message"
}

# The fast path (ZP_HOOK_FRONT) does the common calls alone: a domain
# that is not zeropin's, started begin, operations the hook ignores
# (ZP_HOOK_NO_SCRIPT: it exits 99 where it would run the script); a
# zeropin domain's prepare that it cannot do (no zeropinfs here) goes to
# the script.
test_fast_path_alone() {
	local op bad="" rc
	[ -n "${ZP_HOOK_FRONT:-}" ] || { ok "hook fast path: # SKIP ZP_HOOK_FRONT not set (the script alone)"; return; }
	for op in "prepare begin" "started begin" "start begin" "stopped end" "migrate begin"; do
		rc=0
		# shellcheck disable=SC2086 # op is two words
		ZP_HOOK_NO_SCRIPT=1 timeout 10 "${HOOK_RUN[@]}" vm1 $op - <"$TMP/anon.xml" >/dev/null 2>&1 || rc=$?
		[ "$rc" = 0 ] || bad="$bad anonymous $op: exit $rc;"
	done
	rc=0
	ZP_HOOK_NO_SCRIPT=1 timeout 10 "${HOOK_RUN[@]}" vm1 prepare begin - <"$TMP/zeropin.xml" >/dev/null 2>&1 || rc=$?
	[ "$rc" = 99 ] || bad="$bad zeropin prepare without zeropinfs: exit $rc, not handed to the script;"
	rc=0
	ZP_HOOK_NO_SCRIPT=1 timeout 10 "${HOOK_RUN[@]}" vm1 release end - <"$TMP/zeropin.xml" >/dev/null 2>&1 || rc=$?
	[ "$rc" = 99 ] || bad="$bad release: exit $rc, not handed to the script;"
	if [ -z "$bad" ]; then
		ok "hook fast path: other domains' prepare, started and ignored operations never run the script; release and what it cannot do go to it"
	else
		not_ok "hook fast path: alone for the common calls" "$bad"
	fi
}

test_other_operations_pass() {
	local op bad=""
	for op in "start begin" "started begin" "stopped end" "migrate begin" "reconnect begin" "attach begin"; do
		# shellcheck disable=SC2086 # op is two words
		run_hook "$TMP/zeropin.xml" $op
		[ "$RC" = 0 ] && [ -z "$OUT" ] || bad="$bad $op: exit $RC $OUT;"
	done
	if [ -z "$bad" ]; then
		ok "hook: operations other than prepare/begin and release/end pass, even for a zeropin domain"
	else
		not_ok "hook: other operations pass" "$bad"
	fi
}

test_release_of_unmounted_passes() {
	run_hook "$TMP/zeropin.xml" release end
	if [ "$RC" = 0 ]; then
		ok "hook: release/end with the module never loaded finds nothing leaked"
	else
		not_ok "hook: release/end without the module" "exit $RC: $OUT"
	fi
}

# A broken configuration stops zeropin's domains with the reason, and no
# other domain: not a memfd (virtiofs) one, not a hugepages one.
test_bad_config() {
	local out_ours rc_ours=0 out_memfd rc_memfd=0
	sed 's/^ZEROPIN_HOOK_WAIT_S=1$/ZEROPIN_NO_SUCH_KEY=1/' "$TMP/zeropin.conf" >"$TMP/bad.conf"
	out_ours=$(ZP_CONF="$TMP/bad.conf" timeout 10 "${HOOK_RUN[@]}" vm1 prepare begin - <"$TMP/zeropin.xml" 2>&1) || rc_ours=$?
	sed "s|<source type='file'/>|<source type='memfd'/>|" "$TMP/zeropin.xml" >"$TMP/memfd.xml"
	sed "s|<source type='file'/>|<hugepages/>|" "$TMP/zeropin.xml" >"$TMP/huge.xml"
	out_memfd=$(ZP_CONF="$TMP/bad.conf" PATH=/nonexistent:/usr/bin:/bin timeout 10 "${HOOK_RUN[@]}" vm1 prepare begin - <"$TMP/memfd.xml" 2>&1) || rc_memfd=$?
	out_memfd="$out_memfd$(ZP_CONF="$TMP/bad.conf" timeout 10 "${HOOK_RUN[@]}" vm1 prepare begin - <"$TMP/huge.xml" 2>&1)" || rc_memfd=$?
	if [ "$rc_ours" != 0 ] && echo "$out_ours" | grep -q "unknown setting ZEROPIN_NO_SUCH_KEY" &&
		[ "$rc_memfd" = 0 ] && [ -z "$out_memfd" ]; then
		ok "hook: a broken configuration stops zeropin's domains with the reason, and passes memfd and hugepages domains"
	else
		not_ok "hook: a broken configuration" "ours: exit $rc_ours: $out_ours; others: exit $rc_memfd: $out_memfd"
	fi
}

# release/end finds the guest RAM libvirt should have removed: a leftover
# file in the domain's folder (ID-NAME, NAME cut to 20 characters) is a
# leak; another domain's folder, or one whose name only starts the same,
# is not.
test_release_finds_leftover_ram() {
	local rc_leak=0 rc_other=0 out
	mkdir -p "$TMP/mnt/libvirt/qemu/3-vm1" "$TMP/mnt/libvirt/qemu/4-vm10"
	touch "$TMP/mnt/libvirt/qemu/4-vm10/pc.ram"
	timeout 10 "${HOOK_RUN[@]}" vm1 release end - <"$TMP/zeropin.xml" >/dev/null 2>&1 || rc_other=$?
	touch "$TMP/mnt/libvirt/qemu/3-vm1/pc.ram"
	out=$(timeout 10 "${HOOK_RUN[@]}" vm1 release end - <"$TMP/zeropin.xml" 2>&1) || rc_leak=$?
	rm -rf "$TMP/mnt/libvirt"
	if [ "$rc_other" = 0 ] && [ "$rc_leak" != 0 ] && echo "$out" | grep -q "3-vm1/pc.ram"; then
		ok "hook: release/end reports the domain's leftover guest RAM, and only the domain's"
	else
		not_ok "hook: release/end leak check" "other domain's file: exit $rc_other; own file: exit $rc_leak: $out"
	fi
}

test_domxml_validates() {
	local f bad=""
	command -v virt-xml-validate >/dev/null || { ok "domxml: # SKIP virt-xml-validate missing (libvirt-clients)"; return; }
	"$DOMXML" --name t --type qemu --kernel /k --initrd /i --cmdline 'console=ttyS0' \
		--hostdev 0000:00:03.0 --console-log /tmp/c.log --timeline --emulator /usr/bin/qemu-system-x86_64 >"$TMP/full.xml"
	"$DOMXML" --name f --type qemu --kernel /k --skip-initial-reset --hostdev 0000:00:03.0 --hostdev 0000:00:04.0 \
		--emulator /opt/zeropin/qemu-patched/bin/qemu-system-x86_64 >"$TMP/skip.xml"
	[ "$(grep -c "<qemu:property name='x-skip-initial-reset' type='bool' value='true'/>" "$TMP/skip.xml")" = 2 ] &&
		grep -q "<qemu:device alias='ua-hostdev1'>" "$TMP/skip.xml" &&
		grep -q "<alias name='ua-hostdev1'/>" "$TMP/skip.xml" || bad="$bad skip-no-override"
	"$DOMXML" --name s --type qemu --kernel /k --secure-boot >"$TMP/secboot.xml"
	grep -q "<os firmware='efi'>" "$TMP/secboot.xml" && grep -q "<smm state='on'/>" "$TMP/secboot.xml" &&
		grep -q "<feature enabled='yes' name='secure-boot'/>" "$TMP/secboot.xml" || bad="$bad secboot-elements"
	for f in zeropin anon nova full skip secboot; do
		virt-xml-validate "$TMP/$f.xml" domain >/dev/null 2>&1 || bad="$bad $f"
	done
	if [ -z "$bad" ]; then
		ok "domxml: zeropin, anonymous, Nova-shaped, timeline, skip-initial-reset and secure-boot XMLs validate against libvirt's schema"
	else
		not_ok "domxml: XMLs validate against libvirt's schema" "invalid:$bad"
	fi
}

# Every XML special character and a quote, in a name (text) and a disk
# path (an attribute): the XML is valid and the values come back exactly.
# Bash 5.2's patsub_replacement once turned < into <lt; and ' into 'apos;.
# A fake sysfs device with a 64-bit BAR of $2 MiB (sysfs resource format).
fake_pci_device() {
	mkdir -p "$TMP/pci/$1"
	{
		echo "0x0000000000000000 0x0000000000000000 0x0000000000000000"
		printf '0x%016x 0x%016x 0x000000000014220c\n' $((0xc000000000)) $((0xc000000000 + $2 * 1048576 - 1))
		printf '0x%016x 0x%016x 0x0000000000040200\n' $((0xfe000000)) $((0xfeffffff))
		for _ in 1 2 3 4; do echo "0x0000000000000000 0x0000000000000000 0x0000000000000000"; done
	} >"$TMP/pci/$1/resource"
}

test_domxml_uefi() {
	local bad="" x
	fake_pci_device 0000:01:00.0 65536	# an H100-sized BAR1 in half
	fake_pci_device 0000:02:00.0 16384
	fake_pci_device 0000:03:00.0 256
	ZP_PCI_SYSFS="$TMP/pci" "$DOMXML" --name u --uefi --kernel /k --hostdev 0000:01:00.0 --hostdev 0000:02:00.0 >"$TMP/uefi.xml"
	grep -q "<os firmware='efi'>" "$TMP/uefi.xml" || bad="$bad no-efi"
	grep -q "<feature enabled='no' name='secure-boot'/>" "$TMP/uefi.xml" || bad="$bad secure-boot"
	# 80 GiB of BARs: 128 GiB rounded, twice that
	grep -q "<qemu:arg value='name=opt/ovmf/X-PciMmio64Mb,string=262144'/>" "$TMP/uefi.xml" || bad="$bad aperture"
	virt-xml-validate "$TMP/uefi.xml" domain >/dev/null 2>&1 || bad="$bad invalid"
	# OVMF's default 32 GiB holds a 256 MiB BAR: no fw_cfg entry
	x=$(ZP_PCI_SYSFS="$TMP/pci" "$DOMXML" --name u --uefi --hostdev 0000:03:00.0)
	echo "$x" | grep -q X-PciMmio64Mb && bad="$bad small-bar-entry"
	x=$("$DOMXML" --name u --uefi --mmio64-mib 65536)
	echo "$x" | grep -q "X-PciMmio64Mb,string=65536'" || bad="$bad explicit"
	"$DOMXML" --name u --uefi --mmio64-mib 3000 >/dev/null 2>&1 && bad="$bad not-pow2-taken"
	"$DOMXML" --name u --mmio64-mib 4096 >/dev/null 2>&1 && bad="$bad seabios-aperture-taken"
	x=$("$DOMXML" --name u --kernel /k)
	echo "$x" | grep -q -e efi -e X-PciMmio64Mb && bad="$bad seabios-has-efi"
	if [ -z "$bad" ]; then
		ok "domxml: --uefi boots OVMF without secure boot and sizes its 64-bit aperture from the devices' BARs"
	else
		not_ok "domxml: --uefi" "wrong:$bad"
	fi
}

test_domxml_escapes() {
	local name="bob's <vm> & \"x\"" disk="/img/bob's & <1>.qcow2" got_name got_disk bad=""
	"$DOMXML" --name "$name" --type qemu --disk "$disk" >"$TMP/esc.xml"
	xmllint --noout "$TMP/esc.xml" 2>/dev/null || bad="$bad not-well-formed"
	got_name=$(xmllint --xpath 'string(/domain/name)' "$TMP/esc.xml" 2>/dev/null) || true
	got_disk=$(xmllint --xpath 'string(/domain/devices/disk/source/@file)' "$TMP/esc.xml" 2>/dev/null) || true
	[ "$got_name" = "$name" ] || bad="$bad name=[$got_name]"
	[ "$got_disk" = "$disk" ] || bad="$bad disk=[$got_disk]"
	if command -v virt-xml-validate >/dev/null; then
		virt-xml-validate "$TMP/esc.xml" domain >/dev/null 2>&1 || bad="$bad schema"
	fi
	if [ -z "$bad" ]; then
		ok "domxml: & < > ' \" in a name and a disk path are escaped and come back exactly"
	else
		not_ok "domxml: special characters escaped" "$bad"
	fi
}

# The hook's RAM size from XML as libvirt formats it: <metadata> keeps the
# user's markup verbatim (a comment holding a fake <memory> comes first);
# a size that would overflow, or 0, is refused; a leading 0 is decimal.
test_hook_reads_ram_as_libvirt_writes_it() {
	local bad="" got
	ram_of() {
		(
			# shellcheck source=../../scripts/libvirt/qemu.d/zeropin
			. "$HOOK"
			DOMAIN=vm1
			XML="<domain type='kvm'>
  <name>vm1</name>
  <metadata>
    <x:a xmlns:x=\"urn:x\"><!--<memory unit='KiB'>1</memory>--></x:a>
  </metadata>
  <memory unit='$1'>$2</memory>
  <memoryBacking><source type='file'/></memoryBacking>
</domain>"
			read_ram 2>&1 && echo "$RAM_MIB"
		)
	}
	got=$(ram_of KiB 16777216)
	[ "$got" = 16384 ] || bad="$bad metadata:[$got]"
	got=$(ram_of KiB 010)
	[ "$got" = 1 ] || bad="$bad leading-zero:[$got]"
	ram_of KiB 9007199254740992 | grep -q "cannot read" || bad="$bad overflow:[$(ram_of KiB 9007199254740992)]"
	ram_of TiB 99999999 | grep -q "cannot read" || bad="$bad tib-overflow"
	ram_of KiB 0 | grep -q "is 0" || bad="$bad zero"
	if [ -z "$bad" ]; then
		ok "hook: RAM read from libvirt's XML past <metadata>; overflow and 0 refused"
	else
		not_ok "hook: RAM size from libvirt's XML" "$bad"
	fi
}

# qemu.conf as libvirt reads it: the first setting of a key wins, strings
# in either quotes, a one-line list's items; several keys in one pass.
test_qemu_conf_read() {
	local got
	printf '%s\n' '#user = "commented"' 'user = "+0"' 'security_driver = [ "apparmor", '"'"'selinux'"'"' ]' \
		"memory_backing_dir = '/run/a' # a comment" 'memory_backing_dir = "/run/b"' 'hugetlbfs_mount=["/dev/hp"]' \
		>"$TMP/read.conf"
	got=$(
		# shellcheck source=../../scripts/lib/host.sh
		. "$ROOT/scripts/lib/host.sh"
		zp_qemu_conf_read "$TMP/read.conf" user group security_driver memory_backing_dir hugetlbfs_mount
		echo "$ZP_QC_user|$ZP_QC_group|$ZP_QC_security_driver|$ZP_QC_memory_backing_dir|$ZP_QC_hugetlbfs_mount"
	)
	if [ "$got" = "+0||apparmor selinux|/run/a|/dev/hp" ]; then
		ok "host.sh: qemu.conf read as libvirt reads it (first wins, either quotes, lists, unset empty)"
	else
		not_ok "host.sh: qemu.conf read as libvirt reads it" "got '$got'"
	fi
}

# libvirt reads qemu.conf's first memory_backing_dir, in either quotes:
# the hook must agree, or a domain on the mount is not seen as zeropin's.
test_hook_reads_qemu_conf_as_libvirt() {
	local saved="$TMP/qemu.conf.saved"
	cp "$TMP/qemu.conf" "$saved"
	printf "memory_backing_dir='%s'\nmemory_backing_dir = \"/elsewhere\"\n" "$TMP/mnt" >"$TMP/qemu.conf"
	run_hook "$TMP/zeropin.xml" prepare begin
	cp "$saved" "$TMP/qemu.conf"
	if [ "$RC" != 0 ] && echo "$OUT" | grep -q "cannot load zeropin.ko"; then
		ok "hook: a single-quoted first memory_backing_dir is read as libvirt reads it"
	else
		not_ok "hook: qemu.conf read as libvirt reads it" "exit $RC: $OUT"
	fi
}

# zeropin-host's qemu.conf edit ($1: file to start from; $2: extra
# settings; $3: expected editor). Runs setup_libvirt twice and
# restore_libvirt in a subshell over a symlinked copy, and prints what
# went wrong.
qemu_conf_round_trip() {
	local dir="$TMP/qc" orig="$1"
	rm -rf "$dir" && mkdir -p "$dir/etc" "$dir/state"
	cp "$orig" "$dir/etc/real.conf"
	ln -s real.conf "$dir/etc/qemu.conf"
	(
		# shellcheck source=../../scripts/zeropin-host
		. "$HOST"
		ZP_PROG=zeropin-host
		ZEROPIN_QEMU_CONF="$dir/etc/qemu.conf" ZEROPIN_MOUNT=/run/zeropin-test
		QEMU_CONF_SAVED="$dir/state/qemu-conf" EDIT_QEMU_CONF=1 FORCE=${2:-0}
		out=$(setup_libvirt 2>&1) || { echo "setup refused: $out"; exit 0; }
		echo "$out" | grep -q "edited by $3" || echo "editor: $out"
		[ -L "$ZEROPIN_QEMU_CONF" ] || echo "the symlink was replaced"
		[ "$(zp_backing_dir_setting)" = /run/zeropin-test ] || echo "libvirt reads $(zp_backing_dir_setting)"
		CHANGED=0
		setup_libvirt >/dev/null 2>&1
		[ "$CHANGED" = 0 ] || echo "the second setup changed something"
		restore_libvirt >/dev/null 2>&1
		cmp -s "$orig" "$dir/etc/real.conf" || echo "teardown left: $(diff "$orig" "$dir/etc/real.conf" | tr '\n' ' ')"
		[ ! -e "$QEMU_CONF_SAVED" ] || echo "the saved value was kept"
	)
}

test_qemu_conf_edit() {
	local bad=""
	if command -v augtool >/dev/null; then
		printf '# libvirt qemu.conf\n#memory_backing_dir = "/var/lib/libvirt/qemu/ram"\nuser = "root"\n' >"$TMP/qc-plain.conf"
		bad=$(qemu_conf_round_trip "$TMP/qc-plain.conf" 0 augeas)
	fi
	printf "user = 'root'\nmemory_backing_dir = '/var/lib/libvirt/qemu/ram'\nmemory_backing_dir = \"/run/later\"\n" >"$TMP/qc-single.conf"
	bad="$bad$(qemu_conf_round_trip "$TMP/qc-single.conf" 0 zeropin)"
	if [ -z "$bad" ]; then
		ok "zeropin-host: qemu.conf edited $(command -v augtool >/dev/null && echo 'through augeas, and ')in place where augeas cannot read it; symlink kept, idempotent, teardown restores it byte for byte"
	else
		not_ok "zeropin-host: qemu.conf edit and restore" "$bad"
	fi
}

test_qemu_conf_other_dir_needs_force() {
	local bad="" out
	printf 'memory_backing_dir = "/srv/ram"\n' >"$TMP/qc-other.conf"
	out=$(qemu_conf_round_trip "$TMP/qc-other.conf" 0 x)
	echo "$out" | grep -q 'setup refused: .*"/srv/ram", not libvirt.s default.*--force' || bad="without --force: $out"
	cmp -s "$TMP/qc-other.conf" "$TMP/qc/etc/real.conf" || bad="$bad; refused, yet the file changed"
	command -v augtool >/dev/null && bad="$bad$(qemu_conf_round_trip "$TMP/qc-other.conf" 1 augeas)"
	if [ -z "$bad" ]; then
		ok "zeropin-host: a non-default memory_backing_dir is replaced only with --force, and teardown puts it back"
	else
		not_ok "zeropin-host: a non-default memory_backing_dir needs --force" "$bad"
	fi
}

# setup, then the admin points libvirt elsewhere, then setup --force:
# teardown puts back the admin's folder, not what the first setup saw; a
# folder changed since setup is left alone, and the saved value kept.
test_qemu_conf_saved_value_follows_setup() {
	local dir="$TMP/qs" bad=""
	rm -rf "$dir" && mkdir -p "$dir"
	printf '# qemu.conf\n' >"$dir/qemu.conf"
	bad=$(
		# shellcheck source=../../scripts/zeropin-host
		. "$HOST"
		ZP_PROG=zeropin-host
		ZEROPIN_QEMU_CONF="$dir/qemu.conf" ZEROPIN_MOUNT=/run/zeropin-test
		QEMU_CONF_SAVED="$dir/saved" EDIT_QEMU_CONF=1 FORCE=0
		setup_libvirt >/dev/null 2>&1
		qemu_conf_write /srv/other
		FORCE=1 setup_libvirt >/dev/null 2>&1
		restore_libvirt >/dev/null 2>&1
		[ "$(zp_backing_dir_setting)" = /srv/other ] || echo "teardown restored '$(zp_backing_dir_setting)'"
		FORCE=1 setup_libvirt >/dev/null 2>&1
		qemu_conf_write /srv/changed-since
		out=$(restore_libvirt 2>&1)
		[ "$(zp_backing_dir_setting)" = /srv/changed-since ] && [ -f "$QEMU_CONF_SAVED" ] &&
			echo "$out" | grep -q "no longer /run/zeropin-test" || echo "changed since setup: $out"
	)
	if [ -z "$bad" ]; then
		ok "zeropin-host: teardown restores the folder the last setup replaced, and leaves one changed since"
	else
		not_ok "zeropin-host: saved qemu.conf value" "$bad"
	fi
}

test_usage_errors() {
	local bad=""
	"$DOMXML" --memory-mib 1 >/dev/null 2>&1 && bad="$bad domxml-without-name"
	"$DOMXML" --name x --hostdev 65:00 >/dev/null 2>&1 && bad="$bad domxml-bad-address"
	"$HOST" frobnicate >/dev/null 2>&1 && bad="$bad host-unknown-command"
	"$HOST" setup --pool-mib >/dev/null 2>&1 && bad="$bad host-missing-value"
	"$HOST" setup --run-build yes 2>&1 | grep -q 'ZEROPIN_RUN_BUILD=yes: want 1' || bad="$bad host-bad-run-build"
	echo "ZEROPIN_RUN_BUILD=on" >"$TMP/runs.conf"
	ZP_CONF="$TMP/runs.conf" "$HOST" status 2>&1 | grep -q 'ZEROPIN_RUN_BUILD=on: want 1' ||
		bad="$bad host-bad-run-build-conf"
	"${HOOK_RUN[@]}" >/dev/null 2>&1 && bad="$bad hook-no-arguments"
	for p in "$HOOK" "$DOMXML" "$HOST"; do
		"$p" --help | grep -q "USAGE" || bad="$bad $(basename "$p")-help"
	done
	if [ -z "$bad" ]; then
		ok "usage: bad arguments exit non-zero, --help prints a USAGE"
	else
		not_ok "usage errors" "$bad"
	fi
}

# serial_write trace lines for text $2 sent by pid $1, a byte every ms from
# second $3 (the first byte exactly then).
serial_text() {
	local i t
	for ((i = 0; i < ${#2}; i++)); do
		t=$(printf '%d.%06d' "${3%.*}" $((${3#*.} + i * 1000)))
		printf '%s@%s:serial_write write addr 0x00 val 0x%02x\n' "$1" "$t" "'${2:i:1}"
	done
}

# timeline_json INSTANCE LOG-DIR DOMAIN: zeropin-timeline's JSON report of
# DOMAIN from a trace instance and libvirt log folder of the test's own
# (its errors too, for the failure message).
timeline_json() {
	ZP_TIMELINE_INSTANCE="$1" LIBVIRT_LOG_DIR="$2" "$ROOT/scripts/zeropin-timeline" "$3" --json 2>&1 || true
}

# A libvirt log with two starts; the report is about the last one. In it,
# firmware sets the port up and prints (SeaBIOS, then GRUB's "Loading
# Linux"), and with the divisor latch set even the bytes of a whole
# banner go to register 0 (divisor values, not text); (c) is the "L" of
# the kernel's "Linux version" only.
test_timeline_reads_last_start() {
	local out want='"a":1795462105.079,"b":1795462105.579000,"c":1795462106.579000,"a_b_ms":500,"b_c_ms":1000,"a_c_ms":1500'
	mkdir -p "$TMP/logs"
	{
		echo "2026-11-23 19:20:00.000+0000: starting up libvirt version: 9.0.0"
		echo "123@1795461000.000000:qmp_enter_cont {}"
		serial_text 123 "Linux version 6.1" 1795461001.000000
		echo "2026-11-23 19:28:25.079+0000: starting up libvirt version: 9.0.0, package: 9.0.0-4+deb12u2 (Debian)"
		echo "-msg timestamp=on \\"
		echo "232@1795462105.579000:qmp_enter_cont {}"
		echo "232@1795462105.600000:serial_update_parameters baudrate=115200 parity=78 data=8 stop=1"
		serial_text 232 "SeaBIOS (version 1.16.2)" 1795462105.700000
		serial_text 232 "Loading Linux 6.1.0-56-amd64 ..." 1795462105.800000
		echo "232@1795462106.400000:serial_write write addr 0x03 val 0x83"
		serial_text 232 "Linux version 9" 1795462106.500000
		echo "232@1795462106.520000:serial_write write addr 0x03 val 0x03"
		serial_text 232 "Linux version 6.1.0" 1795462106.579000
	} >"$TMP/logs/vm1.log"
	# the VFIO ioctls recorded (record-tgid: "comm-tid (tgid) [cpu]"):
	# those of vm1's QEMU (pid 232) count, another QEMU's beside it not
	mkdir -p "$TMP/instance"
	cat >"$TMP/instance/trace" <<-EOF
		 zeropin-timeli-99    (     99) [000] .....   100.000000: tracing_mark_write: zeropin-timeline realtime=1795462105.000000
		 qemu-system-x86-240  (    232) [001] .....   100.200000: zp_tl_ioctl: (vfio_fops_unl_ioctl+0x0/0x20) cmd=0x3b71 size=1073741824
		 qemu-system-x86-240  (    232) [001] .....   100.210000: zp_tl_ioctl_ret: (vfio_fops_unl_ioctl+0x0/0x20) ret=0
		 qemu-system-x86-990  (    990) [000] .....   100.300000: zp_tl_ioctl: (vfio_fops_unl_ioctl+0x0/0x20) cmd=0x3b71 size=2147483648
		 qemu-system-x86-990  (    990) [000] .....   100.330000: zp_tl_ioctl_ret: (vfio_fops_unl_ioctl+0x0/0x20) ret=0
	EOF
	out=$(timeline_json "$TMP/instance" "$TMP/logs" vm1)
	if [[ "$out" == *"$want"* ]] && [[ "$out" == *'"map_ioctls":1,"unmap_ioctls":0,"vfio_ms":10.0,"mib_mapped":1024'* ]]; then
		ok "timeline: (a), (b), (c) of the last start from a libvirt log, in UTC; the VFIO ioctls of its QEMU only"
	else
		not_ok "timeline: the last start from a libvirt log" "got: $out"
	fi
}

# Where (s)->(a) goes (--since): zeropin's hook runs and virt-aa-helper's,
# exec to exit, paired by pid; a run before (s) and a hook's subshell (an
# exit without its exec) do not count; the rest is libvirt's own.
test_timeline_splits_preparation() {
	local out want='"s":1795462103.000,"s_a_ms":2079,"hook_ms":300.0,"hook_runs":2,"aa_ms":1200.0,"aa_runs":2,"prep_other_ms":579'
	mkdir -p "$TMP/prep/logs" "$TMP/prep/instance"
	echo "2026-11-23 19:28:25.079+0000: starting up libvirt version: 11.3.0" >"$TMP/prep/logs/vm1.log"
	cat >"$TMP/prep/instance/trace" <<-EOF
		 zeropin-timeli-99    (     99) [000] .....   100.000000: tracing_mark_write: zeropin-timeline realtime=1795462105.000000
		 virt-aa-helper-290   (    290) [001] .....    97.500000: sched_process_exec: filename=/usr/lib/libvirt/virt-aa-helper pid=290 old_pid=290
		 virt-aa-helper-290   (    290) [001] .....    97.900000: sched_process_exit: comm=virt-aa-helper pid=290 prio=120
		 zeropin-300          (    300) [000] .....    98.100000: sched_process_exec: filename=/etc/libvirt/hooks/qemu.d/zeropin pid=300 old_pid=300
		 zeropin-305          (    305) [001] .....    98.200000: sched_process_exit: comm=zeropin pid=305 prio=120
		 zeropin-300          (    300) [000] .....    98.300000: sched_process_exit: comm=zeropin pid=300 prio=120
		 virt-aa-helper-301   (    301) [001] .....    98.500000: sched_process_exec: filename=/usr/lib/libvirt/virt-aa-helper pid=301 old_pid=301
		 virt-aa-helper-301   (    301) [001] .....    99.500000: sched_process_exit: comm=virt-aa-helper pid=301 prio=120
		 zeropin-310          (    310) [000] .....    99.600000: sched_process_exec: filename=/etc/libvirt/hooks/qemu.d/zeropin pid=310 old_pid=310
		 zeropin-310          (    310) [000] .....    99.700000: sched_process_exit: comm=zeropin pid=310 prio=120
		 virt-aa-helper-311   (    311) [001] .....    99.800000: sched_process_exec: filename=/usr/lib/libvirt/virt-aa-helper pid=311 old_pid=311
		 virt-aa-helper-311   (    311) [001] .....   100.000000: sched_process_exit: comm=virt-aa-helper pid=311 prio=120
	EOF
	out=$(ZP_TIMELINE_INSTANCE="$TMP/prep/instance" LIBVIRT_LOG_DIR="$TMP/prep/logs" "$ROOT/scripts/zeropin-timeline" vm1 --json --since 1795462103.000 2>&1 || true)
	if [[ "$out" == *"$want"* ]]; then
		ok "timeline: (s)->(a) split into zeropin's hook, AppArmor's profile loads and the rest, runs paired by pid within the window"
	else
		not_ok "timeline: the preparation before (a)" "want $want, got: $out"
	fi
}

# A UEFI start with two devices passed through, in the trace as OVMF
# drives them: the first config write 1 s after (b), memory decode on for
# one device 2 s after, off and on again (the other device's writes
# between, decode off there, do not change the first's state), a map of
# 1 s after the last write; (c) 2 s after that map. Then the same start
# with no config write before (c): no firmware phases.
test_timeline_splits_firmware() {
	local out want='"fw_before_pci_ms":1000,"fw_enumeration_ms":1000,"fw_bars_ms":2000,"fw_bars_vfio_ms":1000.0,"fw_decode_on":2,"fw_boot_ms":2000,'
	mkdir -p "$TMP/fwlogs" "$TMP/fwinstance"
	{
		echo "2026-11-23 19:28:25.000+0000: starting up libvirt version: 9.0.0"
		echo "300@1795462106.000000:qmp_enter_cont {}"
		serial_text 301 "BdsDxe: loading Boot0001" 1795462106.100000
		echo "301@1795462107.000000:vfio_pci_write_config  (0000:00:05.0, @0x4, 0x100, len=0x2)"
		echo "301@1795462107.500000:vfio_pci_write_config  (0000:00:05.0, @0x10, 0xffffffff, len=0x4)"
		echo "301@1795462108.000000:vfio_pci_write_config  (0000:00:05.0, @0x4, 0x103, len=0x2)"
		echo "301@1795462108.100000:vfio_pci_write_config  (0000:00:06.0, @0x4, 0x100, len=0x2)"
		echo "301@1795462108.200000:vfio_pci_write_config  (0000:00:05.0, @0x4, 0x107, len=0x2)"
		echo "301@1795462108.500000:vfio_pci_write_config  (0000:00:05.0, @0x4, 0x100, len=0x2)"
		echo "301@1795462109.000000:vfio_pci_write_config  (0000:00:05.0, @0x4, 0x107, len=0x2)"
		serial_text 301 "Linux version 6.12" 1795462112.000000
		echo "301@1795462112.500000:vfio_pci_write_config  (0000:00:05.0, @0x4, 0x100, len=0x2)"
	} >"$TMP/fwlogs/vm2.log"
	cat >"$TMP/fwinstance/trace" <<-EOF
		 zeropin-timeli-99    (     99) [000] .....   100.000000: tracing_mark_write: zeropin-timeline realtime=1795462105.000000
		 CPU 0/TCG-301        (    300) [001] .....   104.000000: zp_tl_ioctl: (vfio_fops_unl_ioctl+0x0/0x20) cmd=0x3b71 size=68719476736
		 CPU 0/TCG-301        (    300) [001] .....   105.000000: zp_tl_ioctl_ret: (vfio_fops_unl_ioctl+0x0/0x20) ret=0
	EOF
	out=$(timeline_json "$TMP/fwinstance" "$TMP/fwlogs" vm2)
	if [[ "$out" == *"$want"* ]] && [[ "$out" == *'"b_c_ms":6000,'* ]]; then
		sed -i '/vfio_pci_write_config/d' "$TMP/fwlogs/vm2.log"
		out=$(timeline_json "$TMP/fwinstance" "$TMP/fwlogs" vm2)
		if [[ "$out" == *'"fw_before_pci_ms":null,"fw_enumeration_ms":null,"fw_bars_ms":null,"fw_bars_vfio_ms":null,"fw_decode_on":null,"fw_boot_ms":null,'* ]]; then
			ok "timeline: the firmware's phases from its config writes to the passed-through devices, decode per device, the BAR maps counted in"
		else
			not_ok "timeline: no config write, no firmware phases" "got: $out"
		fi
	else
		not_ok "timeline: the firmware's phases" "want $want, got: $out"
	fi
}

# make install-tools under a prefix: the installed programs find their
# library there and work.
# The boot unit as installed: systemd-analyze verify in a root that holds
# it, the programs it runs and systemd's own targets, with no warning.
test_systemd_unit() {
	local r="$TMP/root" out rc=0
	command -v systemd-analyze >/dev/null && [ -d /lib/systemd/system ] ||
		{ ok "systemd: # SKIP no systemd-analyze here"; return; }
	make -s -C "$ROOT" install-tools DESTDIR="$r" PREFIX=/usr >/dev/null 2>&1 || rc=$?
	cp /lib/systemd/system/*.target "$r/lib/systemd/system/" 2>/dev/null || true
	cp /lib/systemd/system/systemd-modules-load.service "$r/lib/systemd/system/" 2>/dev/null || true
	out=$(systemd-analyze verify --man=no --root="$r" "$r/lib/systemd/system/zeropin.service" 2>&1) || rc=$?
	grep -q '^Before=.*libvirtd.service.*virtqemud.service' "$r/lib/systemd/system/zeropin.service" || rc=1
	# item 37.1/37.3: no stop action (a shutdown or an upgrade tears
	# nothing down), a start that cannot hold libvirt back for ever
	! grep -q '^ExecStop' "$r/lib/systemd/system/zeropin.service" || { rc=1; out="$out ExecStop;"; }
	grep -q '^TimeoutStartSec=[1-9]' "$r/lib/systemd/system/zeropin.service" || { rc=1; out="$out no TimeoutStartSec;"; }
	grep -q '^After=.*apparmor.service' "$r/lib/systemd/system/zeropin.service" || { rc=1; out="$out not after apparmor;"; }
	if [ "$rc" = 0 ] && [ -z "$out" ]; then
		ok "systemd: zeropin.service verifies (systemd-analyze), runs before libvirtd and virtqemud, after AppArmor, bounded by TimeoutStartSec, and has no stop action"
	else
		not_ok "systemd: zeropin.service" "exit $rc: $out"
	fi
}

test_install_tools() {
	local p="$TMP/prefix" out rc=0 saved="$TMP/qemu.conf.install"
	cp "$TMP/qemu.conf" "$saved"
	make -s -C "$ROOT" install-tools PREFIX="$p/usr" HOOKDIR="$p/hooks" CONFDIR="$p/etc" \
		SYSTEMDDIR="$p/systemd" MODPROBEDIR="$p/modprobe.d" >/dev/null 2>&1 || rc=$?
	out=$("$p/hooks/zeropin" vm1 prepare begin <"$TMP/anon.xml" 2>&1) || rc=$?
	# the hook runs through its fast path, installed beside host.sh
	[ "$(head -n 1 "$p/hooks/zeropin")" = "#!$p/usr/lib/zeropin/zeropin-libvirt-hook" ] &&
		[ -x "$p/usr/lib/zeropin/zeropin-libvirt-hook" ] || { rc=1; out="$out hook's #! line;"; }
	"$p/usr/sbin/zeropin-host" --help | grep -q USAGE || rc=1
	[ -f "$p/etc/zeropin.conf" ] && [ -f "$p/modprobe.d/zeropin.conf" ] || rc=1
	grep -q "^ExecStart=$p/usr/sbin/zeropin-host setup$" "$p/systemd/zeropin.service" || rc=1
	# uninstall first gives libvirt's memory_backing_dir back (the sandbox's
	# qemu.conf points at the sandbox's mount, with no record of setup's)
	# HOST_ACTIONS=0: this host's DKMS and systemd are not the test's; the
	# sandbox's ZP_CONF and ZP_STATE_DIR keep zeropin-host on its files
	make -s -C "$ROOT" uninstall PREFIX="$p/usr" HOOKDIR="$p/hooks" CONFDIR="$p/etc" \
		SYSTEMDDIR="$p/systemd" MODPROBEDIR="$p/modprobe.d" KDIR=/nonexistent HOST_ACTIONS=0 >/dev/null 2>&1 || rc=$?
	[ ! -e "$p/hooks/zeropin" ] && [ ! -e "$p/usr/sbin/zeropin-host" ] && [ ! -e "$p/usr/lib/zeropin" ] &&
		[ ! -e "$p/systemd/zeropin.service" ] || rc=1
	grep -q memory_backing_dir "$TMP/qemu.conf" && out="$out uninstall left memory_backing_dir in qemu.conf"
	cp "$saved" "$TMP/qemu.conf"
	if [ "$rc" = 0 ] && [ -z "$out" ]; then
		ok "install: make install-tools under a prefix works there, make uninstall removes it and gives libvirt's memory_backing_dir back"
	else
		not_ok "install: make install-tools / uninstall" "exit $rc: $out"
	fi
}

# make deb: both packages build and pass lintian (errors fail make deb);
# unpacked, zeropin-tools holds what make install-tools installs under
# /usr (the lab's libvirt tests run that copy), its man pages render, its
# /etc files are conffiles; zeropin-dkms's sources build through DKMS
# against both lab kernels.
test_deb_packages() {
	local r="$TMP/deb" bad="" out v k rel m
	out=$(make -s -C "$ROOT" deb 2>&1) || { not_ok "deb: make deb" "$(echo "$out" | tail -n 20)"; return; }
	mkdir -p "$r/root" "$r/dkms"
	for m in "$ROOT"/build/deb/*.deb; do dpkg-deb -x "$m" "$r/root"; done
	[ -x "$r/root/usr/sbin/zeropin-host" ] && [ -x "$r/root/usr/bin/zeropin-domxml" ] || bad="$bad programs"
	grep -q '^ExecStart=/usr/sbin/zeropin-host setup$' "$r/root/lib/systemd/system/zeropin.service" || bad="$bad unit"
	grep -q '^ZP_HOST_LIB=/usr/lib/zeropin/host.sh$' "$r/root/etc/libvirt/hooks/qemu.d/zeropin" || bad="$bad hook"
	[ "$(head -n 1 "$r/root/etc/libvirt/hooks/qemu.d/zeropin")" = "#!/usr/lib/zeropin/zeropin-libvirt-hook" ] &&
		[ -x "$r/root/usr/lib/zeropin/zeropin-libvirt-hook" ] || bad="$bad hook-interpreter"
	for m in man8/zeropin-host.8 man8/zeropin-timeline.8 man8/zeropin-libvirt-hook.8 man1/zeropin-domxml.1; do
		zcat "$r/root/usr/share/man/$m.gz" 2>/dev/null | man -l - 2>/dev/null | grep -q USAGE || bad="$bad $m"
	done
	out=$(dpkg-deb --ctrl-tarfile "$ROOT"/build/deb/zeropin-tools_*.deb | tar -xO ./conffiles)
	for m in /etc/zeropin/zeropin.conf /etc/modprobe.d/zeropin.conf /etc/libvirt/hooks/qemu.d/zeropin; do
		echo "$out" | grep -qxF "$m" || bad="$bad conffile:$m"
	done
	# an upgrade neither stops nor restarts zeropin.service (item 37.1); the
	# removal gives qemu.conf back (37.2); versioned for this suite
	for m in preinst postinst prerm postrm; do
		dpkg-deb --ctrl-tarfile "$ROOT"/build/deb/zeropin-tools_*.deb | tar -xO "./$m" 2>/dev/null |
			grep -q 'deb-systemd-invoke' && bad="$bad $m-invokes-systemd"
	done
	dpkg-deb --ctrl-tarfile "$ROOT"/build/deb/zeropin-tools_*.deb | tar -xO ./prerm | grep -q 'restore-qemu-conf' || bad="$bad prerm"
	v=$(. /etc/os-release && echo "$VERSION_ID")
	dpkg-deb -f "$ROOT"/build/deb/zeropin-tools_*.deb Version | grep -qE "^[0-9.]+-[0-9]+\+deb$v\$" || bad="$bad version"
	v=$(ls "$r/root/usr/src")
	v=${v#zeropin-}
	if ! command -v dkms >/dev/null; then
		bad="$bad no-dkms"
	elif dkms add -m zeropin -v "$v" --sourcetree "$r/root/usr/src" --dkmstree "$r/dkms" >/dev/null 2>&1; then
		for k in 6.12 6.1; do
			rel=$(cat "$ROOT/build/kernels/$k/abi" 2>/dev/null) || { bad="$bad no-headers-$k"; continue; }
			dkms build -m zeropin -v "$v" -k "$rel" --kernelsourcedir "$ROOT/build/kernels/$k/headers" \
				--sourcetree "$r/root/usr/src" --dkmstree "$r/dkms" >"$r/dkms-$k.log" 2>&1 &&
				[ -f "$r/dkms/zeropin/$v/$rel/x86_64/module/zeropin.ko" ] || bad="$bad dkms-build-$k($(tail -n 3 "$r/dkms-$k.log" | tr '\n' ' '))"
		done
	else
		bad="$bad dkms-add"
	fi
	if [ -z "$bad" ]; then
		ok "deb: make deb builds zeropin-dkms and zeropin-tools, lintian-clean; the tools, unit, hook, conffiles and man pages are in place; DKMS builds the module for 6.12 and 6.1"
	else
		not_ok "deb: packages" "$bad"
	fi
}

# The memlock report reads libvirt's defined domains: a GPU domain whose
# <hard_limit> is below its RAM is named with what to raise it to.
test_memlock_report() {
	local out
	mkdir -p "$TMP/doms"
	"$DOMXML" --name fits --memory-mib 2048 --hostdev 0000:65:00.0 >"$TMP/doms/fits.xml"
	"$DOMXML" --name capped --memory-mib 4096 --hostdev 0000:66:00.0 |
		sed "s|<vcpu>|<memtune><hard_limit unit='GiB'>2</hard_limit></memtune><vcpu>|" >"$TMP/doms/capped.xml"
	out=$(LIBVIRT_QEMU_XML_DIR="$TMP/doms" timeout 10 "$HOST" status 2>&1) || true
	if echo "$out" | grep -q "memlock: fits (1 PCI devices, 2048 MiB RAM): libvirt sets QEMU's limit to 3072 MiB" &&
		echo "$out" | grep -q "capped pins 4096 MiB of RAM but <hard_limit> caps its memlock at 2048 MiB.*at least 5120 MiB"; then
		ok "zeropin-host: the memlock report names a GPU domain whose hard_limit is too small"
	else
		not_ok "zeropin-host: the memlock report" "$out"
	fi
}

# Two domains whose names share libvirt's 20-character short name: the
# stop of one checks its own RAM folder (ID-NAME, the id its prepare
# recorded), never the running other's; without a record, the other's
# id is read from libvirt's status file. Its own leftover is still a leak.
test_release_matches_exact_id() {
	local st="$TMP/hs" run="$TMP/librun" q="$TMP/mnt/libvirt/qemu" a=tenant-a-gpu-worker-01 rc1=0 rc2=0 rc3=0 out
	rm -rf "$st" "$run" && mkdir -p "$st/reserved" "$run" "$q/5-tenant-a-gpu-worker-" "$q/6-tenant-a-gpu-worker-"
	touch "$q/6-tenant-a-gpu-worker-/pc.ram" "$run/tenant-a-gpu-worker-02.pid"
	printf "<domstatus state='running' reason='booted' pid='99'>\n  <domain type='kvm' id='6'>\n" >"$run/tenant-a-gpu-worker-02.xml"
	echo "2048 5" >"$st/reserved/$a"
	ZP_HOOK_STATE="$st" ZP_LIBVIRT_RUN="$run" timeout 10 "${HOOK_RUN[@]}" "$a" release end - <"$TMP/zeropin.xml" >/dev/null 2>&1 || rc1=$?
	ZP_HOOK_STATE="$st" ZP_LIBVIRT_RUN="$run" timeout 10 "${HOOK_RUN[@]}" "$a" release end - <"$TMP/zeropin.xml" >/dev/null 2>&1 || rc2=$?
	touch "$q/5-tenant-a-gpu-worker-/pc.ram"
	echo "2048 5" >"$st/reserved/$a"
	out=$(ZP_HOOK_STATE="$st" ZP_LIBVIRT_RUN="$run" timeout 10 "${HOOK_RUN[@]}" "$a" release end - <"$TMP/zeropin.xml" 2>&1) || rc3=$?
	# libvirt cuts 20 characters, not bytes: a name of non-ASCII letters,
	# the hook run as libvirt runs it (LC_ALL=C)
	local u="ünïcödé-tenant-gpu-worker-01" rc4=0
	mkdir -p "$q/7-ünïcödé-tenant-gpu-w" && touch "$q/7-ünïcödé-tenant-gpu-w/pc.ram"
	echo "512 7" >"$st/reserved/$u"
	LC_ALL=C ZP_HOOK_STATE="$st" ZP_LIBVIRT_RUN="$run" timeout 10 "${HOOK_RUN[@]}" "$u" release end - <"$TMP/zeropin.xml" >/dev/null 2>&1 || rc4=$?
	if [ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ -f "$q/6-tenant-a-gpu-worker-/pc.ram" ] && [ "$rc3" != 0 ] &&
		echo "$out" | grep -q "5-tenant-a-gpu-worker-/pc.ram" && ! echo "$out" | grep -q "6-tenant" && [ "$rc4" != 0 ]; then
		ok "hook: the stop of tenant-a-gpu-worker-01 checks its own RAM folder by id, not the running -02's (recorded id, or libvirt's status files)"
	else
		not_ok "hook: release matches the domain's folder by id" "recorded: exit $rc1; from status files: exit $rc2; own leftover: exit $rc3: $out; non-ASCII name's leftover: exit $rc4"
	fi
	rm -rf "$TMP/mnt/libvirt" "$st" "$run"
}

# A hugetlbfs ID-NAME that is a link (planted by whoever may write
# libvirt's folder there): the script's premake_folders makes nothing
# through it and chowns nothing it leads to; it warns and the start goes
# on (libvirt makes its own). (The fast path's make_qemu_folder: the lab's
# libvirt_start, hook_follows_no_link.)
test_hook_follows_no_hugetlbfs_link() {
	local h="$TMP/hl-huge" v="$TMP/hl-victim" out before after
	rm -rf "$h" "$v" && mkdir -p "$h/libvirt/qemu" "$v" && chmod 755 "$v"
	ln -s "$v" "$h/libvirt/qemu/7-vm1"
	before=$(stat -c %U:%G:%a "$v")
	out=$( (. "$HOOK"; XML="" DOMAIN=vm1 DOMAIN_ID=7 ZP_QC_hugetlbfs_mount="$h" ZP_QC_user=nobody ZP_QC_group=nogroup
		premake_folders) 2>&1) || true
	after=$(stat -c %U:%G:%a "$v")
	if [ "$before" = "$after" ] && [ -L "$h/libvirt/qemu/7-vm1" ] && echo "$out" | grep -q 'could not make its hugetlbfs folders'; then
		ok "hook: a hugetlbfs folder that is a link is not made through nor its target chowned; a warning, the start goes on"
	else
		not_ok "hook: a hugetlbfs folder that is a link" "victim $before -> $after: $out"
	fi
	rm -rf "$h" "$v"
}

# The RAM folder the hook makes before libvirt (premake_ram_folder): where
# setup's AppArmor rule for the mount is in force (AppArmor on, the rule
# included from libvirt's abstraction), MOUNT/domains/libvirt-UUID with an
# empty file per memory backend (pc.ram; ram-nodeN per NUMA cell), and
# libvirt's MOUNT/libvirt/qemu/ID-NAME with a link to each; a stale folder
# of links from a start that never got its release is replaced. Nothing
# for a DIMM, a static seclabel, a rule naming another mount or not
# included, AppArmor off. The release removes the domain's own folder even
# when the domain is no longer the mount's (qemu.conf changed since).
test_hook_premakes_ram_folder() {
	local bad="" aa="$TMP/rf-aa" sec="$TMP/rf-sec" mnt="$TMP/rf-mnt" uuid=8f0c2a4e-1b2c-4d3e-9f00-0123456789ab xml
	rm -rf "$aa" "$sec" "$mnt" && mkdir -p "$aa/abstractions/libvirt-qemu.d" "$sec/apparmor" "$mnt/libvirt/qemu"
	printf '# zeropin\n"%s/domains/@{profile_name}/{,**}" rwk,\n' "$mnt" >"$aa/abstractions/zeropin-qemu"
	printf '  include if exists <abstractions/libvirt-qemu.d>\n' >"$aa/abstractions/libvirt-qemu"
	echo "include if exists <abstractions/zeropin-qemu>" >"$aa/abstractions/libvirt-qemu.d/zeropin"
	xml=$(sed "1s|^<domain |<domain id='7' |; s|<name>vm1</name>|<name>vm1</name><uuid>$uuid</uuid>|" "$TMP/zeropin.xml")
	# premake XML [release]: the sourced hook, the figures is_ours() would set
	premake() {
		(ZP_APPARMOR_D="$aa" ZP_SECURITYFS="$sec"; . "$HOOK"; XML="$1" DOMAIN=vm1 DOMAIN_ID=7 BACKING_DIR="$mnt" ZEROPIN_MOUNT="$mnt"
			ZP_QC_user=root ZP_QC_group=root ZP_QC_security_driver=""
			if [ "${2:-}" = release ]; then rm -rf "$mnt/libvirt/qemu/7-vm1"; release_own_folder; else premake_ram_folder; fi) 2>/dev/null
	}
	made() { [ "$(readlink "$mnt/libvirt/qemu/7-vm1/pc.ram" 2>/dev/null)" = "$mnt/domains/libvirt-$uuid/pc.ram" ]; }
	premake "$xml"
	made && [ -f "$mnt/domains/libvirt-$uuid/pc.ram" ] && [ ! -s "$mnt/domains/libvirt-$uuid/pc.ram" ] &&
		[ "$(stat -c %a "$mnt/domains/libvirt-$uuid" "$mnt/libvirt/qemu/7-vm1" "$mnt/domains" | tr '\n' ' ')" = "700 700 711 " ] ||
		bad="$bad plain: $(cd "$mnt" && find . -printf '%p %m %l; ')"
	# libvirtd killed mid-start: the links stay, their targets go; the next start replaces them
	rm -rf "$mnt/domains/libvirt-$uuid"
	premake "$xml"
	made && [ -f "$mnt/domains/libvirt-$uuid/pc.ram" ] || bad="$bad stale links not replaced;"
	premake "$xml" release
	[ ! -e "$mnt/domains/libvirt-$uuid" ] || bad="$bad release left $mnt/domains/libvirt-$uuid;"
	premake "$(echo "$xml" | sed "s|<vcpu>2</vcpu>|<vcpu>2</vcpu><cpu><numa><cell id='0' cpus='0' memory='1' unit='GiB'/><cell id='1' cpus='1' memory='1' unit='GiB'/></numa></cpu>|")"
	[ "$(ls "$mnt/libvirt/qemu/7-vm1" 2>/dev/null | tr '\n' ' ')" = "ram-node0 ram-node1 " ] || bad="$bad numa: $(ls "$mnt/libvirt/qemu/7-vm1" 2>&1);"
	premake "$xml" release
	for variant in dimm static; do
		case "$variant" in
		dimm) premake "$(echo "$xml" | sed "s|</devices>|<memory model='dimm'><target><size unit='MiB'>512</size><node>0</node></target></memory></devices>|")" ;;
		static) premake "$(echo "$xml" | sed "s|</devices>|</devices><seclabel type='static' model='apparmor' relabel='no'><label>libvirt-x</label></seclabel>|")" ;;
		esac
		[ ! -e "$mnt/libvirt/qemu/7-vm1" ] || { bad="$bad $variant: made;"; rm -rf "$mnt/libvirt/qemu/7-vm1"; }
	done
	printf '  # nothing included\n' >"$aa/abstractions/libvirt-qemu"
	premake "$xml"
	[ ! -e "$mnt/libvirt/qemu/7-vm1" ] || { bad="$bad rule not included: made;"; rm -rf "$mnt/libvirt/qemu/7-vm1"; }
	printf '  include if exists <abstractions/libvirt-qemu.d>\n' >"$aa/abstractions/libvirt-qemu"
	rmdir "$sec/apparmor"
	premake "$xml"
	[ ! -e "$mnt/libvirt/qemu/7-vm1" ] || { bad="$bad AppArmor off: made;"; rm -rf "$mnt/libvirt/qemu/7-vm1"; }
	mkdir "$sec/apparmor"
	sed -i "s|$mnt/domains|/elsewhere/domains|" "$aa/abstractions/zeropin-qemu"
	premake "$xml"
	[ ! -e "$mnt/libvirt/qemu/7-vm1" ] || bad="$bad another mount's rule: made;"
	if [ -z "$bad" ]; then
		ok "hook: the RAM folder made before libvirt where setup's AppArmor rule is in force, a link per memory backend (pc.ram, ram-nodeN) into MOUNT/domains/libvirt-UUID, a stale one replaced, removed at the release; not for a DIMM, a static label, a rule not included or naming another mount, AppArmor off"
	else
		not_ok "hook: the RAM folder made before libvirt" "$bad"
	fi
	rm -rf "$aa" "$sec" "$mnt"
}

# setup's AppArmor rule: written once (a second setup changes nothing),
# included from libvirt's abstraction.d (Debian 13's libvirt) or from the
# local override (Debian 12's); restore-qemu-conf's removal takes the
# include away first, then the rule.
test_setup_apparmor_rule() {
	local bad="" aa="$TMP/sr-aa" out
	rule() {
		(ZP_APPARMOR_D="$aa"; . "$HOST"; ZP_PROG=zeropin-host ZEROPIN_MOUNT=/run/zp-test CONFINED_BY=AppArmor
			"$1" 2>/dev/null; echo "changed $CHANGED")
	}
	for variant in 13 12; do
		rm -rf "$aa" && mkdir -p "$aa/abstractions"
		if [ "$variant" = 13 ]; then
			printf '  include if exists <abstractions/libvirt-qemu.d>\n' >"$aa/abstractions/libvirt-qemu"
		else
			printf '  #include <local/abstractions/libvirt-qemu>\n' >"$aa/abstractions/libvirt-qemu"
		fi
		out=$(rule setup_apparmor_rule)
		[[ "$out" == *"changed 2" ]] && grep -qxF '"/run/zp-test/domains/@{profile_name}/{,**}" rwk,' "$aa/abstractions/zeropin-qemu" ||
			bad="$bad $variant first: $out;"
		if [ "$variant" = 13 ]; then
			[ "$(cat "$aa/abstractions/libvirt-qemu.d/zeropin" 2>&1)" = "include if exists <abstractions/zeropin-qemu>" ] || bad="$bad 13: no .d include;"
		else
			grep -qxF "include if exists <abstractions/zeropin-qemu>" "$aa/local/abstractions/libvirt-qemu" || bad="$bad 12: no local include;"
		fi
		out=$(rule setup_apparmor_rule)
		[[ "$out" == *"changed 0" ]] || bad="$bad $variant again: $out;"
		out=$(rule remove_apparmor_rule)
		[ ! -e "$aa/abstractions/zeropin-qemu" ] && [ ! -e "$aa/abstractions/libvirt-qemu.d/zeropin" ] &&
			! grep -q zeropin "$aa/local/abstractions/libvirt-qemu" 2>/dev/null || bad="$bad $variant removal: $out;"
	done
	if [ -z "$bad" ]; then
		ok "zeropin-host: setup writes the AppArmor rule for the hook's RAM folders once, included from libvirt's abstraction.d (13) or local override (12); restore-qemu-conf removes it"
	else
		not_ok "zeropin-host: the AppArmor rule" "$bad"
	fi
	rm -rf "$aa"
}

# <hugepages/> with <source type='file'/>: libvirt puts the RAM on
# hugetlbfs, so the hook neither reserves room on zeropinfs nor refuses.
test_file_hugepages_domain_passes() {
	sed "s|<source type='file'/>|<hugepages/><source type='file'/>|" "$TMP/zeropin.xml" >"$TMP/filehuge.xml"
	run_hook "$TMP/filehuge.xml" prepare begin
	if grep -q '<hugepages/><source type=.file./>' "$TMP/filehuge.xml" && [ "$RC" = 0 ] && [ -z "$OUT" ]; then
		ok "hook: a file-backed <hugepages/> domain (its RAM on hugetlbfs) passes untouched"
	else
		not_ok "hook: a file-backed hugepages domain passes" "exit $RC: $OUT"
	fi
}

# setup had pointed memory_backing_dir at the mount (its record), and the
# file lost the setting (a libvirt upgrade's qemu.conf taken): a
# file-backed domain is refused, saying why, instead of starting with its
# RAM on disk; with no record, nothing is refused.
test_lost_qemu_conf_refused() {
	local st="$TMP/zs" rc_rec=0 out rc_none=0
	rm -rf "$st" && mkdir -p "$st"
	echo '# the maintainer'"'"'s qemu.conf' >"$TMP/fresh-qemu.conf"
	printf '%s\n%s\n%s\n%s\n' "$TMP/fresh-qemu.conf" "$TMP/mnt" "" unset >"$st/qemu-conf"
	out=$(ZP_STATE_DIR="$st" ZEROPIN_QEMU_CONF="$TMP/fresh-qemu.conf" timeout 10 "${HOOK_RUN[@]}" vm1 prepare begin - <"$TMP/zeropin.xml" 2>&1) || rc_rec=$?
	# the admin chose another folder since: the admin's, not refused
	echo 'memory_backing_dir = "/srv/ram"' >"$TMP/admin-qemu.conf"
	printf '%s\n%s\n%s\n%s\n' "$TMP/admin-qemu.conf" "$TMP/mnt" "" unset >"$st/qemu-conf"
	ZP_STATE_DIR="$st" ZEROPIN_QEMU_CONF="$TMP/admin-qemu.conf" timeout 10 "${HOOK_RUN[@]}" vm1 prepare begin - <"$TMP/zeropin.xml" >/dev/null 2>&1 || rc_none=$?
	rm -f "$st/qemu-conf"
	ZP_STATE_DIR="$st" ZEROPIN_QEMU_CONF="$TMP/fresh-qemu.conf" timeout 10 "${HOOK_RUN[@]}" vm1 prepare begin - <"$TMP/zeropin.xml" >/dev/null 2>&1 || rc_none=$?
	if [ "$rc_rec" != 0 ] && echo "$out" | grep -q "not zeropin's mount .*zeropin-host setup --edit-qemu-conf" && [ "$rc_none" = 0 ]; then
		ok "hook: a qemu.conf that lost setup's memory_backing_dir to libvirt's default refuses file-backed domains, saying so; one the admin pointed elsewhere does not"
	else
		not_ok "hook: a lost memory_backing_dir" "with setup's record: exit $rc_rec: $out; without: exit $rc_none"
	fi
}

# <seclabel type='none'/> runs QEMU unconfined: refused unless allowed.
test_unconfined_domain_refused() {
	local rc_allowed=0 out_allowed
	sed "s|</domain>|<seclabel type='none'/></domain>|" "$TMP/zeropin.xml" >"$TMP/noseclabel.xml"
	expect_hook_refuses "$TMP/noseclabel.xml" "runs its QEMU unconfined" "a domain with <seclabel type='none'/> is refused"
	sed "s|</domain>|<seclabel type='none' model='dac'/><seclabel type='none' model='apparmor'/></domain>|" "$TMP/zeropin.xml" >"$TMP/noseclabel2.xml"
	expect_hook_refuses "$TMP/noseclabel2.xml" "runs its QEMU unconfined" "a domain with AppArmor off behind a DAC <seclabel type='none'/> is refused"
	out_allowed=$(ZEROPIN_ALLOW_UNCONFINED=1 timeout 10 "${HOOK_RUN[@]}" vm1 prepare begin - <"$TMP/noseclabel.xml" 2>&1) || rc_allowed=$?
	if ! echo "$out_allowed" | grep -q unconfined; then
		ok "hook: ZEROPIN_ALLOW_UNCONFINED=1 lets a <seclabel type='none'/> domain through"
	else
		not_ok "hook: ZEROPIN_ALLOW_UNCONFINED=1" "exit $rc_allowed: $out_allowed"
	fi
}

# The stop lowers the target the start raised: to the base the first
# raise kept, or to the domains still starting (summed; one libvirt ran
# `started begin` for no longer counts); ZEROPIN_POOL_MIB, when set, is
# the base.
test_release_lowers_target() {
	local st="$TMP/ts" sys="$TMP/sysfs" got=""
	rm -rf "$st" "$sys" && mkdir -p "$st/reserved" "$sys/pool"
	stop_vm1() { ZP_SYSFS="$sys" ZP_HOOK_STATE="$st" ZP_LIBVIRT_RUN="$TMP/none" timeout 10 "${HOOK_RUN[@]}" vm1 release end - <"$TMP/zeropin.xml" >/dev/null 2>&1; }
	echo 8192 >"$sys/pool/target_mib"
	echo 1024 >"$st/target-base"
	echo "2048 9" >"$st/reserved/starting1"
	echo "1536 10" >"$st/reserved/starting2"
	echo "4096 11" >"$st/reserved/running"
	ZP_HOOK_STATE="$st" timeout 10 "${HOOK_RUN[@]}" running started begin - </dev/null
	stop_vm1
	got="$(cat "$sys/pool/target_mib")"
	ZP_HOOK_STATE="$st" timeout 10 "${HOOK_RUN[@]}" starting1 started begin - </dev/null
	ZP_HOOK_STATE="$st" timeout 10 "${HOOK_RUN[@]}" starting2 started begin - </dev/null
	stop_vm1
	got="$got $(cat "$sys/pool/target_mib") $([ -e "$st/target-base" ] && echo kept || echo gone)"
	echo 4096 >"$sys/pool/target_mib"
	ZEROPIN_POOL_MIB=512 stop_vm1
	got="$got $(cat "$sys/pool/target_mib")"
	if [ "$got" = "3584 1024 gone 512" ]; then
		ok "hook: a stop lowers the pool's target to its base, or to the domains still starting"
	else
		not_ok "hook: a stop lowers the pool's target" "targets after the stops: '$got' (want '3584 1024 gone 512')"
	fi
}

# setup refuses, changing nothing, where libvirt would run QEMU
# unconfined; --allow-unconfined goes on with a warning; AppArmor on
# with libvirt's profiles satisfies it. (The kernel's LSMs and the
# profile folder are the test's own.)
test_setup_requires_confinement() {
	local sec="$TMP/secfs" aa="$TMP/aa" bad="" out
	[ ! -d /sys/module/zeropin ] || { ok "zeropin-host: setup requires a security driver # SKIP zeropin is loaded on this host (setup would use it)"; return; }
	rm -rf "$sec" "$aa" && mkdir -p "$sec" "$aa/libvirt"
	printf 'security_driver = "none"\n' >"$TMP/sd-none.conf"
	printf '# no security_driver: libvirt picks\n' >"$TMP/sd-auto.conf"
	setup_out() { ZP_SECURITYFS="$sec" ZP_APPARMOR_D="$aa" ZP_SELINUXFS="$TMP/none" timeout 20 "$HOST" setup --qemu-conf "$@" 2>&1; }
	out=$(setup_out "$TMP/sd-none.conf") && bad="$bad none-accepted"
	echo "$out" | grep -q 'unconfined: .*security_driver = "none".*nothing was changed' && ! echo "$out" | grep -q 'cannot load' || bad="$bad none: $out;"
	out=$(setup_out "$TMP/sd-auto.conf") && bad="$bad no-lsm-accepted"
	echo "$out" | grep -q 'AppArmor off in the kernel' || bad="$bad no-lsm: $out;"
	out=$(setup_out "$TMP/sd-none.conf" --allow-unconfined) || true
	echo "$out" | grep -q 'warning: QEMU runs unconfined' && echo "$out" | grep -q 'cannot load zeropin.ko' || bad="$bad allowed: $out;"
	# the profiles installed, libvirt's daemon profile not loaded (aa-disable,
	# apparmor.service off): libvirt would not confine; then loaded
	mkdir -p "$sec/apparmor" && touch "$aa/libvirt/TEMPLATE.qemu" "$aa/usr.sbin.virtqemud"
	printf '/usr/bin/man (enforce)\nvirtqemud (complain)\n' >"$sec/apparmor/profiles"
	out=$(setup_out "$TMP/sd-auto.conf") && bad="$bad not-loaded-accepted"
	echo "$out" | grep -q 'daemon profile is not loaded in enforce mode' || bad="$bad not-loaded: $out;"
	printf '/usr/bin/man (enforce)\nvirtqemud (enforce)\n' >"$sec/apparmor/profiles"
	out=$(setup_out "$TMP/sd-auto.conf") || true
	echo "$out" | grep -q 'confines each QEMU with AppArmor' && echo "$out" | grep -q 'cannot load zeropin.ko' || bad="$bad apparmor: $out;"
	printf 'security_default_confined = 0   # 1 elsewhere\n' >"$TMP/sd-default.conf"
	out=$(setup_out "$TMP/sd-default.conf") && bad="$bad default-unconfined-accepted"
	echo "$out" | grep -q 'security_default_confined = 0' || bad="$bad default-unconfined: $out;"
	if [ -z "$bad" ]; then
		ok "zeropin-host: setup refuses where QEMU would run unconfined (security_driver none, security_default_confined 0, no LSM, libvirt's profile not enforcing), goes on with --allow-unconfined or AppArmor enforcing"
	else
		not_ok "zeropin-host: setup requires a security driver" "$bad"
	fi
}

# A GPU the host still uses through DRM (a display server, a compute
# client) or NVIDIA's node (nvidia-persistenced): host_use names it and
# who holds it; once let go, nothing.
test_host_use_sees_gpu_clients() {
	local bad="" dev=0000:99:00.0 p1 p2 out
	mkdir -p "$TMP/pci/$dev/drm/card7" "$TMP/dev/dri" "$TMP/nv/gpus/$dev"
	: >"$TMP/dev/dri/card7"
	: >"$TMP/dev/nvidia3"
	printf 'Model:           NVIDIA H100\nDevice Minor:    3\n' >"$TMP/nv/gpus/$dev/information"
	sleep 30 3<"$TMP/dev/dri/card7" &
	p1=$!
	use() { (ZP_PCI_SYSFS="$TMP/pci" ZP_DEV_DIR="$TMP/dev" ZP_NVIDIA_PROC="$TMP/nv" ZP_CONF=/nonexistent; . "$HOST"; host_use "$dev"); }
	out=$(use)
	[[ "$out" == "$TMP/dev/dri/card7 is open by $p1(sleep)" ]] || bad="$bad drm: '$out';"
	kill "$p1"; wait "$p1" 2>/dev/null || true
	sleep 30 4<"$TMP/dev/nvidia3" &
	p2=$!
	out=$(use)
	[[ "$out" == "$TMP/dev/nvidia3 is open by $p2(sleep)" ]] || bad="$bad nvidia: '$out';"
	kill "$p2"; wait "$p2" 2>/dev/null || true
	out=$(use)
	[ -z "$out" ] || bad="$bad free: '$out'"
	if [ -z "$bad" ]; then
		ok "zeropin-host: a GPU held open through DRM or NVIDIA's node is in use by the host, and free once let go"
	else
		not_ok "zeropin-host: host_use sees GPU clients" "$bad"
	fi
}

# teardown's check that nothing is in use: VFIO group 3 is not group 30
# (a prefix is not a path), and a RAM file in a domain's folder under the
# mount counts.
test_node_users_exact() {
	local bad="" p out
	mkdir -p "$TMP/nu/vfio" "$TMP/nu/mnt/libvirt/qemu/1-vm"
	: >"$TMP/nu/vfio/30"
	: >"$TMP/nu/mnt/libvirt/qemu/1-vm/pc.ram"
	sleep 30 3<"$TMP/nu/vfio/30" 4<"$TMP/nu/mnt/libvirt/qemu/1-vm/pc.ram" &
	p=$!
	users() { (ZP_CONF=/nonexistent; . "$HOST"; node_users "$1"); }
	out=$(users "$TMP/nu/vfio/3")
	[ -z "$out" ] || bad="$bad group 3: '$out';"
	out=$(users "$TMP/nu/vfio/30")
	[ "$out" = "$p(sleep)" ] || bad="$bad group 30: '$out';"
	out=$(users "$TMP/nu/mnt/*")
	[ "$out" = "$p(sleep)" ] || bad="$bad mount: '$out';"
	kill "$p"; wait "$p" 2>/dev/null || true
	if [ -z "$bad" ]; then
		ok "zeropin-host: who holds a VFIO group or the mount: the exact group (3 is not 30), any file under the mount"
	else
		not_ok "zeropin-host: node_users" "$bad"
	fi
}

# restore-qemu-conf (the package's prerm, make uninstall): without a
# record of setup's, a memory_backing_dir that still is the mount goes
# (libvirt's default); one elsewhere stays.
test_restore_without_record() {
	local dir="$TMP/rr" bad=""
	rm -rf "$dir" && mkdir -p "$dir"
	bad=$(
		# shellcheck source=../../scripts/zeropin-host
		. "$HOST"
		ZP_PROG=zeropin-host ZEROPIN_MOUNT=/run/zeropin-test QEMU_CONF_SAVED="$dir/none"
		ZEROPIN_QEMU_CONF="$dir/qemu.conf"
		printf '# qemu.conf\nmemory_backing_dir = "/run/zeropin-test"\nuser = "x"\n' >"$ZEROPIN_QEMU_CONF"
		cmd_restore_qemu_conf >/dev/null 2>&1
		[ -z "$(zp_backing_dir_setting)" ] && grep -q '^user = "x"$' "$ZEROPIN_QEMU_CONF" || echo "the mount's setting stayed: $(cat "$ZEROPIN_QEMU_CONF")"
		printf 'memory_backing_dir = "/srv/ram"\n' >"$ZEROPIN_QEMU_CONF"
		cmd_restore_qemu_conf >/dev/null 2>&1
		[ "$(zp_backing_dir_setting)" = /srv/ram ] || echo "another folder was changed"
	)
	if [ -z "$bad" ]; then
		ok "zeropin-host: restore-qemu-conf removes a memory_backing_dir that still is the mount, keeps another"
	else
		not_ok "zeropin-host: restore-qemu-conf without a record" "$bad"
	fi
}

main() {
	sandbox
	test_other_domain_passes
	test_file_domain_elsewhere_passes
	test_missing_module_refused
	test_nova_domain_is_ours
	test_malformed_xml
	test_other_operations_pass
	test_fast_path_alone
	test_hook_follows_no_hugetlbfs_link
	test_release_of_unmounted_passes
	test_bad_config
	test_release_finds_leftover_ram
	test_release_matches_exact_id
	test_file_hugepages_domain_passes
	test_lost_qemu_conf_refused
	test_unconfined_domain_refused
	test_release_lowers_target
	test_domxml_validates
	test_domxml_escapes
	test_domxml_uefi
	test_hook_reads_ram_as_libvirt_writes_it
	test_hook_reads_qemu_conf_as_libvirt
	test_qemu_conf_read
	test_qemu_conf_edit
	test_qemu_conf_other_dir_needs_force
	test_qemu_conf_saved_value_follows_setup
	test_usage_errors
	test_setup_requires_confinement
	test_host_use_sees_gpu_clients
	test_node_users_exact
	test_hook_premakes_ram_folder
	test_setup_apparmor_rule
	test_restore_without_record
	test_timeline_reads_last_start
	test_timeline_splits_firmware
	test_timeline_splits_preparation
	test_install_tools
	test_systemd_unit
	test_memlock_report
	test_deb_packages
	echo "1..$N"
	[ "$FAILS" = 0 ]
}

main "$@"
