#!/bin/bash
# lifecycle-guest - the guest side of tests/host/host_lifecycle.sh: one
# step of a Debian host's life with zeropin, run inside the lab host
# (scripts/lab-host) as root. Each step does what an operator does, then
# checks what must hold; it prints what it found and exits non-zero, with
# the reason on stderr, when something does not hold.
#
# USAGE: lifecycle-guest.sh STEP      (STEP: one of the functions below)
set -eu
REPO_LIST=/etc/apt/sources.list.d/zeropin.list
VM=g1		# the GPU VM: an edu passed through, RAM on zeropinfs
VM_MIB=256
POOL_MIB=256
STATE=/root/lifecycle	# what a step leaves for a later one (QEMU's pid, srcversion)
CONSOLE="/var/log/libvirt/qemu/$VM-console.log"	# the VM's serial port (not /tmp: a daemon's may be private)

fail() { echo "lifecycle: $*" >&2; exit 1; }

# apt over zeropin's repository alone (the lab host reaches no registry)
apt_zeropin() {
	apt-get -q -o Dir::Etc::sourcelist="$REPO_LIST" -o Dir::Etc::sourceparts=- \
		-o APT::Get::List-Cleanup=0 "$@"
}

edu_addr() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1234:0x11e8 ] && { echo "${d##*/}"; return; }
	done
	fail "no edu device"
}

install() {
	mkdir -p "$STATE"
	echo "deb [trusted=yes] file:/srv/zeropin $(. /etc/os-release && echo "$VERSION_CODENAME") main" >"$REPO_LIST"
	apt_zeropin update >/dev/null
	DEBIAN_FRONTEND=noninteractive apt_zeropin install -y zeropin-dkms zeropin-tools >"$STATE/install.log" 2>&1 ||
		fail "apt-get install: $(tail -n 5 "$STATE/install.log")"
	dkms status zeropin | grep -q installed || fail "DKMS did not install the module: $(dkms status 2>&1)"
	! systemctl -q is-enabled zeropin.service || fail "zeropin.service enabled by the install"
	echo "$(dpkg-query -W -f '${Version}' zeropin-tools), DKMS: $(dkms status zeropin)"
}

# What an operator does once: the configuration, setup with qemu.conf,
# the unit enabled, libvirt restarted.
configure() {
	cat >>/etc/zeropin/zeropin.conf <<-CONF
		ZEROPIN_MOUNT_SIZE=1G
		ZEROPIN_POOL_MIB=$POOL_MIB
		ZEROPIN_DEVICES=1234:11e8
	CONF
	zeropin-host setup --edit-qemu-conf >"$STATE/setup.log" 2>&1 || fail "setup: $(cat "$STATE/setup.log")"
	systemctl enable zeropin.service 2>/dev/null
	systemctl restart libvirtd
	grep -E 'confines|changes' "$STATE/setup.log" | tr '\n' ' '
}

# After a boot: the unit set everything up, nothing done by hand.
check_up() {
	local edu opts
	edu=$(edu_addr)
	# ssh answers before the boot is over: zeropin.service may still be
	# starting (running or degraded once every start job is done)
	timeout 300 systemctl is-system-running --wait >/dev/null 2>&1 || true
	systemctl -q is-active zeropin.service || fail "zeropin.service: $(systemctl status zeropin.service 2>&1 | tail -n 5)"
	opts=$(awk '$2 == "/run/zeropin" && $3 == "zeropinfs" { print $4 }' /proc/mounts)
	[[ ",$opts," == *,nosuid,* && ",$opts," == *,nodev,* && ",$opts," == *,noexec,* ]] || fail "zeropinfs on /run/zeropin: '$opts'"
	[ "$(cat /sys/kernel/zeropin/pool/target_mib)" = "$POOL_MIB" ] || fail "pool target $(cat /sys/kernel/zeropin/pool/target_mib)"
	[ "$(basename "$(readlink -f "/sys/bus/pci/devices/$edu/driver")")" = vfio-pci ] || fail "$edu not on vfio-pci"
	grep -q '^memory_backing_dir = "/run/zeropin"' /etc/libvirt/qemu.conf || fail "qemu.conf lost memory_backing_dir"
	[ -x /etc/libvirt/hooks/qemu.d/zeropin ] || fail "no hook"
	echo "unit active, zeropinfs ($opts), pool target $POOL_MIB MiB, $edu on vfio-pci (driverctl: $(driverctl list-overrides 2>/dev/null | tr '\n' ' ')), module $(cat /sys/module/zeropin/srcversion)"
}

# The GPU VM through libvirt: its kernel's first line, RAM on zeropinfs,
# mapped by zeropin.
vm_start() {
	local i
	virsh -q undefine "$VM" >/dev/null 2>&1 || true
	zeropin-domxml --name "$VM" --type qemu --memory-mib "$VM_MIB" --vcpus 1 --hostdev "$(edu_addr)" \
		--kernel "/boot/vmlinuz-$(uname -r)" --cmdline 'console=ttyS0 panic=0' \
		--console-log "$CONSOLE" >"/tmp/$VM.xml"
	rm -f "$CONSOLE"
	virsh -q define "/tmp/$VM.xml" >/dev/null
	timeout 300 virsh -q start "$VM" || fail "virsh start: $(tail -n 3 "/var/log/libvirt/qemu/$VM.log")"
	for ((i = 0; i < 600; i++)); do
		grep -q 'Linux version' "$CONSOLE" 2>/dev/null && break
		sleep 0.5
	done
	grep -q 'Linux version' "$CONSOLE" 2>/dev/null || fail "no kernel line from $VM in 300 s"
	ls /run/zeropin/libvirt/qemu/*-"$VM"/* >/dev/null 2>&1 || fail "$VM's RAM is not on zeropinfs"
	cat "/run/libvirt/qemu/$VM.pid" >"$STATE/qemu.pid"
	echo "$VM running (QEMU $(cat "$STATE/qemu.pid")), RAM $(ls /run/zeropin/libvirt/qemu/*-"$VM"/), zeropin pinned $(awk '$1 == "pages_pinned" { print $2 * 4 / 1024 }' /sys/kernel/debug/zeropin/iommu_counters 2>/dev/null) MiB"
}

vm_running() {
	[ "$(virsh -q domstate "$VM" 2>/dev/null)" = running ] && [ "$(cat "/run/libvirt/qemu/$VM.pid" 2>/dev/null)" = "$(cat "$STATE/qemu.pid")" ] ||
		fail "$VM no longer runs the same QEMU ($(virsh -q domstate "$VM" 2>&1))"
}

# The newer packages (the repository updated by the host side) while the
# VM runs: it keeps running, zeropin stays up on the old module; the new
# module waits on disk for the next boot.
upgrade() {
	local before after
	before=$(dpkg-query -W -f '${Version}' zeropin-tools)
	cat /sys/module/zeropin/srcversion >"$STATE/old-srcversion"
	apt_zeropin update >/dev/null
	DEBIAN_FRONTEND=noninteractive apt_zeropin upgrade -y >"$STATE/upgrade.log" 2>&1 || fail "apt-get upgrade: $(tail -n 5 "$STATE/upgrade.log")"
	after=$(dpkg-query -W -f '${Version}' zeropin-tools)
	dpkg --compare-versions "$after" gt "$before" || fail "still $after"
	vm_running
	systemctl -q is-active zeropin.service || fail "zeropin.service stopped by the upgrade"
	grep -q ' /run/zeropin zeropinfs ' /proc/mounts || fail "zeropinfs unmounted by the upgrade"
	[ "$(cat /sys/module/zeropin/srcversion)" = "$(cat "$STATE/old-srcversion")" ] || fail "the loaded module changed under the VM"
	[ "$(modinfo -F srcversion zeropin)" != "$(cat "$STATE/old-srcversion")" ] || fail "DKMS did not build the new module"
	echo "$before -> $after with $VM running; loaded module $(cat /sys/module/zeropin/srcversion), new on disk $(modinfo -F srcversion zeropin) ($(modinfo -F zeropin_build zeropin))"
}

new_module_loaded() {
	check_up >/dev/null
	[ "$(cat /sys/module/zeropin/srcversion)" = "$(modinfo -F srcversion zeropin)" ] &&
		[ "$(cat /sys/module/zeropin/srcversion)" != "$(cat "$STATE/old-srcversion")" ] || fail "the old module after the reboot"
	echo "module $(cat /sys/module/zeropin/srcversion) (the upgrade's) loaded at boot"
}

# apt remove while the VM runs: it keeps running; qemu.conf given back.
remove() {
	apt-get -q remove -y zeropin-tools zeropin-dkms >"$STATE/remove.log" 2>&1 || fail "apt-get remove: $(tail -n 5 "$STATE/remove.log")"
	vm_running
	! grep -q '^[[:space:]]*memory_backing_dir' /etc/libvirt/qemu.conf || fail "qemu.conf still sets $(grep memory_backing_dir /etc/libvirt/qemu.conf)"
	! command -v zeropin-host >/dev/null || fail "zeropin-host still installed"
	echo "removed with $VM running; qemu.conf without memory_backing_dir; $(grep -c 'restore-qemu-conf\|memory_backing_dir' "$STATE/remove.log") lines of it in apt's output"
}

# After the reboot that follows the removal: nothing of zeropin runs, and
# no file-backed domain's RAM can land on /run.
gone_after_reboot() {
	! grep -q zeropinfs /proc/mounts || fail "zeropinfs mounted"
	[ ! -d /sys/module/zeropin ] || fail "zeropin loaded"
	! grep -q '^[[:space:]]*memory_backing_dir' /etc/libvirt/qemu.conf || fail "qemu.conf sets memory_backing_dir"
	[ ! -e /run/zeropin ] || fail "/run/zeropin exists"
	echo "no mount, no module, memory_backing_dir libvirt's default"
}

purge() {
	apt-get -q purge -y zeropin-tools zeropin-dkms >"$STATE/purge.log" 2>&1 || fail "apt-get purge: $(tail -n 5 "$STATE/purge.log")"
	local left
	left=$(ls -d /etc/zeropin /var/lib/zeropin /etc/libvirt/hooks/qemu.d/zeropin /usr/src/zeropin-* /var/lib/dkms/zeropin \
		/etc/modprobe.d/zeropin.conf /usr/lib/systemd/system/zeropin.service /lib/systemd/system/zeropin.service \
		/etc/systemd/system/multi-user.target.wants/zeropin.service /etc/apparmor.d/abstractions/zeropin-qemu \
		/etc/apparmor.d/abstractions/libvirt-qemu.d/zeropin 2>/dev/null || true)
	! grep -qs zeropin /etc/apparmor.d/local/abstractions/libvirt-qemu || left="$left the include in /etc/apparmor.d/local/abstractions/libvirt-qemu"
	[ -z "$left" ] || fail "left behind: $left"
	echo "nothing left"
}

case "${1:-}" in
install | configure | check_up | vm_start | vm_running | upgrade | new_module_loaded | remove | gone_after_reboot | purge) "$1" ;;
*) echo "USAGE: lifecycle-guest.sh STEP" >&2; exit 2 ;;
esac
