# shellcheck shell=bash
# The lab's GPU stand-ins, shared by scripts/lab and scripts/lab-host:
# ivshmem-plain devices with a GPU-sized BAR, and the address bits they
# need. Reads GPU (how many), BAR_GIB (G[,G...]: the i-th device's BAR, or
# the last size given) and MEM (the guest's MiB); appends QEMU options to
# the caller's array edu_args.

# check_gpu_options: every --bar-gib a power of two (a PCI BAR's size).
check_gpu_options() {
	local n
	for n in "$GPU" ${BAR_GIB//,/ }; do
		case "$n" in '' | *[!0-9]*) die "'$n' is not a number" ;; esac
	done
	for n in ${BAR_GIB//,/ }; do
		[ "$n" -ge 1 ] && [ $((n & (n - 1))) = 0 ] ||
			die "--bar-gib $n: want a power of 2 (a PCI BAR's size)"
	done
}

# gpu_args: the devices, whose BAR2 is a RAM backend L0 never reserves, so
# a 64 GiB BAR costs the host only what is touched; the 64-bit hole twice
# their total (alignment) plus room for the rest. Appends to edu_args;
# sets GPU_TOP_GIB, the top of the address space they need (RAM, the
# 32-bit hole and the 64-bit one).
gpu_args() {
	local i size total=0 sizes hole
	GPU_TOP_GIB=0
	[ "$GPU" -gt 0 ] || return 0
	IFS=, read -r -a sizes <<<"$BAR_GIB"
	for ((i = 0; i < GPU; i++)); do
		size="${sizes[i]:-${sizes[-1]}}"
		total=$((total + size))
		edu_args+=(-object "memory-backend-ram,id=gpubar$i,size=${size}G,reserve=off"
			-device "ivshmem-plain,memdev=gpubar$i")
	done
	hole=$((total * 2 + 64))
	edu_args+=(-global "q35-pcihost.pci-hole64-size=${hole}G")
	GPU_TOP_GIB=$((4 + MEM / 1024 + 1 + hole))
	# qemu64 is an AMD CPU to QEMU: past 1012 GiB (the HyperTransport
	# hole) it moves the RAM above 4 GiB to 1 TiB, the hole after it
	[ "$GPU_TOP_GIB" -lt 1012 ] || GPU_TOP_GIB=$((1024 + MEM / 1024 + 1 + hole))
}

# address_bits: the bits for GPU_TOP_GIB GiB, the CPU's (TCG's default,
# 40, holds 1 TiB) and the emulated VT-d's (its default 39 holds 512 GiB
# of IOVA, and VFIO maps each BAR at its guest address for peer-to-peer).
# Sets CPU_BITS and IOMMU_BITS, the -cpu and intel-iommu options to add
# (or nothing).
address_bits() {
	local bits=30
	CPU_BITS="" IOMMU_BITS=""
	while [ $((1 << (bits - 30))) -lt "$GPU_TOP_GIB" ]; do bits=$((bits + 1)); done
	[ "$bits" -le 39 ] && return 0
	[ "$bits" -le 48 ] || die "--gpu $GPU --bar-gib $BAR_GIB: $GPU_TOP_GIB GiB of address space is more than VT-d's 48 bits"
	IOMMU_BITS=",aw-bits=48"
	[ "$bits" -le 40 ] || CPU_BITS=",phys-bits=$bits"
}
