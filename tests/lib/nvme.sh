# shellcheck shell=bash
# The lab's NVMe controller (scripts/lab --nvme), sourced after tap.sh: a
# passthrough device with FLR, and its SR-IOV VF, the stand-in for an
# SR-IOV-partitioned GPU (GPU-P). The PF's driver (nvme, staged in
# /lib/modules/lab/nvme) gives the VF its queues and sets it online with
# the NVMe Virtualization Management command (tests/tools/nvme_virt_mgmt),
# as QEMU's docs/system/devices/nvme.rst does with nvme-cli.
NVME_CLASS=0x010802
NVME_MODULES=/lib/modules/lab/nvme
NVME_VIRT_MGMT=/tests/tools/nvme_virt_mgmt
NVME_SERIAL=zeropin-lab		# scripts/lab's serial=
NVME_VF_CNTLID=1		# the PF is controller 0 of its subsystem
# Virtualization Management (NVMe 1.4, 5.22): resource types and actions
VQ=0 VI=1			# queues, interrupts
PRIMARY_FLEXIBLE=1 SECONDARY_ASSIGN=8 SECONDARY_ONLINE=9
# what scripts/lab gives the VF: sriov_vq_flexible=2 (admin and one I/O
# queue), sriov_vi_flexible=1
NVME_VF_QUEUES=2
NVME_VF_INTERRUPTS=1

# The NVMe controller's (the PF's) PCI address, or nothing.
nvme_device() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ -e "$d/physfn" ] && continue
		[ "$(cat "$d/class")" = "$NVME_CLASS" ] && { echo "${d##*/}"; return; }
	done
}

# pci_bind DEV DRIVER: DEV to DRIVER (from whatever it had), by
# driver_override so that nothing else takes it.
pci_bind() {
	local d="/sys/bus/pci/devices/$1"
	[ ! -e "$d/driver" ] || echo "$1" >"$d/driver/unbind"
	echo "# echo $2 > $d/driver_override"
	echo "$2" >"$d/driver_override"
	echo "$1" >/sys/bus/pci/drivers_probe
	[ "$(basename "$(readlink "$d/driver")")" = "$2" ]
}

# pci_unbind DEV: no driver, no override.
pci_unbind() {
	local d="/sys/bus/pci/devices/$1"
	[ ! -e "$d/driver" ] || echo "$1" >"$d/driver/unbind"
	echo >"$d/driver_override"
}

# The PF's controller in L1, live (10 s at most): its /dev name.
nvme_ctrl_live() {
	local i c
	for ((i = 0; i < 100; i++)); do
		for c in "/sys/bus/pci/devices/$1/nvme/"nvme*; do
			[ "$(cat "$c/state" 2>/dev/null)" = live ] && { echo "/dev/${c##*/}"; return 0; }
		done
		sleep 0.1
	done
	return 1
}

# virt_mgmt DEV CNTLID RT ACT NR, echoed.
virt_mgmt() {
	echo "# nvme_virt_mgmt $*"
	"$NVME_VIRT_MGMT" "$@"
}

# Load the nvme driver (staged by scripts/lab) and its dependencies.
nvme_modules_load() {
	local m
	[ -x "$NVME_VIRT_MGMT" ] && [ -s "$NVME_MODULES/order" ] || { echo "no nvme modules or nvme_virt_mgmt in the lab" >&2; return 1; }
	while read -r m; do
		[ -d "/sys/module/$(echo "${m%.ko}" | tr - _)" ] || insmod "$NVME_MODULES/$m" || return 1
	done <"$NVME_MODULES/order"
}

# Unload them again, in reverse order (those something else uses stay).
nvme_modules_unload() {
	local m
	[ -s "$NVME_MODULES/order" ] || return 0
	for m in $(awk '{ l[NR] = $0 } END { for (i = NR; i > 0; i--) print l[i] }' "$NVME_MODULES/order"); do
		[ ! -d "/sys/module/$(echo "${m%.ko}" | tr - _)" ] || rmmod "${m%.ko}" 2>/dev/null
	done
	return 0
}

# nvme_primary_release PF CTRL: the primary keeps no flexible queues or
# interrupts, and a function reset makes that take effect (the VF can
# have them only then); prints the controller's /dev name again.
nvme_primary_release() {
	virt_mgmt "$2" 0 "$VI" "$PRIMARY_FLEXIBLE" 0 >&2 &&
		virt_mgmt "$2" 0 "$VQ" "$PRIMARY_FLEXIBLE" 0 >&2 || return 1
	echo "# echo 1 > /sys/bus/pci/devices/$1/reset" >&2
	echo 1 >"/sys/bus/pci/devices/$1/reset" && nvme_ctrl_live "$1" ||
		{ echo "$1: not live after its reset" >&2; return 1; }
}

# nvme_vf_online CTRL: the VF's queues and interrupt assigned, then online.
nvme_vf_online() {
	virt_mgmt "$1" "$NVME_VF_CNTLID" "$VI" "$SECONDARY_ASSIGN" "$NVME_VF_INTERRUPTS" >&2 &&
		virt_mgmt "$1" "$NVME_VF_CNTLID" "$VQ" "$SECONDARY_ASSIGN" "$NVME_VF_QUEUES" >&2 &&
		virt_mgmt "$1" "$NVME_VF_CNTLID" "$VQ" "$SECONDARY_ONLINE" 0 >&2
}

# nvme_vf_create PF: the PF on the nvme driver, its flexible resources
# moved to one VF that is online and bound to vfio-pci (no driver probes
# it first: sriov_drivers_autoprobe off meanwhile). Prints the VF's PCI
# address; non-zero (with the reason on stderr) when a step failed.
nvme_vf_create() {
	local pf="$1" d="/sys/bus/pci/devices/$1" ctrl vf
	[ -r "$d/sriov_totalvfs" ] && [ "$(cat "$d/sriov_totalvfs")" -ge 1 ] || { echo "$pf has no SR-IOV" >&2; return 1; }
	nvme_modules_load || return 1
	pci_bind "$pf" nvme >&2 && ctrl=$(nvme_ctrl_live "$pf") || { echo "$pf: no live controller on nvme" >&2; return 1; }
	ctrl=$(nvme_primary_release "$pf" "$ctrl") || return 1
	echo 0 >"$d/sriov_drivers_autoprobe"
	echo "# echo 1 > $d/sriov_numvfs" >&2
	echo 1 >"$d/sriov_numvfs" || return 1
	nvme_vf_online "$ctrl" || return 1
	vf=$(basename "$(readlink "$d/virtfn0")")
	pci_bind "$vf" vfio-pci >&2 || { echo "$vf did not bind to vfio-pci" >&2; return 1; }
	echo "$vf"
}

# nvme_vf_remove PF: whatever nvme_vf_create got to undone - the VF gone
# (QEMU's controller takes it offline with it), the PF without a driver,
# autoprobe back on, the nvme driver unloaded.
nvme_vf_remove() {
	local d="/sys/bus/pci/devices/$1" vf=""
	[ ! -e "$d/virtfn0" ] || vf=$(basename "$(readlink "$d/virtfn0")")
	[ -z "$vf" ] || pci_unbind "$vf"
	[ ! -w "$d/sriov_numvfs" ] || echo 0 >"$d/sriov_numvfs"
	[ ! -w "$d/sriov_drivers_autoprobe" ] || echo 1 >"$d/sriov_drivers_autoprobe"
	pci_unbind "$1"
	nvme_modules_unload
}
