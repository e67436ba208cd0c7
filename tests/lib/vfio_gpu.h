/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vfio_gpu.h - the lab's GPU stand-ins (scripts/lab --gpu N --bar-gib G):
 * ivshmem-plain devices bound to vfio-pci, whose 64-bit prefetchable BAR2
 * is GPU-sized (1-64 GiB of RAM that the lab's host backs only where it
 * is touched). What a VMM does with a GPU's BAR for peer-to-peer: open the
 * group, attach it to a container, mmap BAR2 through the device fd.
 */
#ifndef VFIO_GPU_H
#define VFIO_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "vfio_edu.h"

#define GPU_VENDOR	0x1af4	/* Red Hat, Inc. */
#define GPU_DEVICE	0x1110	/* Inter-VM shared memory */

struct gpu {
	char bdf[256];			/* PCI address, e.g. "0000:00:04.0" */
	int group_id;			/* IOMMU group number (/dev/vfio/N) */
	int group;			/* group fd, -1 when closed */
	int device;			/* device fd, -1 until __gpu_get_device() */
	uint64_t bar_size;		/* BAR2's size in bytes */
	uint64_t bar_offset;		/* BAR2's offset in the device fd */
	uint64_t config_offset;		/* config space's offset in the device fd */
};

int gpu_count(void);
void gpu_init(struct gpu *g);
/* Open the index-th GPU's group; -ENODEV when there is none. */
int __gpu_open(struct gpu *g, int index);
void gpu_open(struct gpu *g, int index);
int __gpu_attach(struct gpu *g, int container);
void gpu_attach(struct gpu *g, int container);
/* The device fd and BAR2's place in it; memory decode on. */
int __gpu_get_device(struct gpu *g);
void gpu_get_device(struct gpu *g);
/* mmap len bytes of BAR2 from off with prot; MAP_FAILED (errno) on error. */
void *gpu_bar_mmap(struct gpu *g, uint64_t off, uint64_t len, int prot);
void gpu_close(struct gpu *g);

/*
 * Proving a BAR mapping by DMA: an edu in the same container, with a
 * staging buffer of its own mapped at ram_iova, copies through the IOMMU
 * between that buffer and the BAR, and the CPU checks through the BAR's
 * mmap. __foo() returns 0 or -errno; -EIO when a transfer did not arrive.
 */
struct bar_probe {
	struct edu *edu;		/* whose DMA engine goes through the IOMMU */
	uint8_t *ram;			/* its staging buffer, >= 4 KiB */
	uint64_t ram_iova;		/* where ram is mapped */
};

#define BAR_PROBE_XFER	256		/* bytes per transfer */

/* The edu writes len bytes of src to iova (staging buffer -> device -> iova). */
int __probe_dma_write(const struct bar_probe *p, uint64_t iova, const void *src, uint32_t len);
/* The edu reads len bytes at iova into dst (iova -> device -> staging buffer). */
int __probe_dma_read(const struct bar_probe *p, uint64_t iova, void *dst, uint32_t len);
/* Both ways at BAR offset off of the BAR mapped at iova (mmapped at bar):
 * a DMA write the CPU reads back, a CPU write a DMA read brings back. */
int __bar_round_trip(const struct bar_probe *p, volatile uint8_t *bar, uint64_t iova,
		     uint64_t off);
/* Round trips at the BAR's first, middle and last page. */
int __bar_verify(const struct bar_probe *p, volatile uint8_t *bar, uint64_t iova,
		 uint64_t size);
/* Whether a DMA write to iova lands at BAR offset off: 1, 0, or -errno. */
int bar_dma_write_lands(const struct bar_probe *p, volatile uint8_t *bar, uint64_t iova,
			uint64_t off);
/* A byte pattern no two calls share. */
void bar_pattern(uint8_t *p, size_t len);

#endif /* VFIO_GPU_H */
