/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vfio_edu.h - the lab's GPU stand-in: QEMU's edu PCI device driven through
 * VFIO. Tests and benchmarks use it to prove that an IOVA mapping is real,
 * by letting the device DMA through the IOMMU.
 *
 * Convention: __foo() returns 0 or a negative errno and never exits;
 * foo() calls __foo() and, on failure, prints why and exits with KSFT_FAIL,
 * which the kselftest harness reports as a failed test.
 */
#ifndef VFIO_EDU_H
#define VFIO_EDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/vfio.h>

#include "util.h"

#define EDU_VENDOR	0x1234
#define EDU_DEVICE	0x11e8

/* edu BAR0 registers (hw/misc/edu.c) */
#define EDU_REG_ID	0x00	/* reads 0x010000ed */
#define EDU_REG_DMA_SRC	0x80
#define EDU_REG_DMA_DST	0x88
#define EDU_REG_DMA_CNT	0x90
#define EDU_REG_DMA_CMD	0x98
#define EDU_CMD_RUN	0x1
#define EDU_CMD_TO_RAM	0x2	/* direction: device buffer -> RAM */

/* The device's DMA buffer is 4 KiB at this device address, but a transfer of
 * the full 4096 bytes hits an off-by-one in QEMU 7.2's edu and aborts QEMU. */
#define EDU_DMA_BUF	0x40000
#define EDU_DMA_MAX	4095

/* How long one edu DMA may take: it completes after a 100 ms virtual-clock
 * timer, slow TCG guests need a good margin. */
#define EDU_DMA_TIMEOUT_MS 10000

struct edu {
	char bdf[256];			/* PCI address, e.g. "0000:00:03.0" */
	int group_id;			/* IOMMU group number (/dev/vfio/N) */
	int group;			/* group fd, -1 when closed */
	int device;			/* device fd, -1 until __edu_get_device() */
	volatile uint8_t *bar0;		/* BAR0 mmap, NULL until mapped */
	size_t bar0_size;		/* length of that mmap */
	uint64_t config_offset;		/* config space offset in the device fd */
};

/* The index-th PCI device with this vendor:device id (in address order);
 * -ENODEV when there are fewer. */
int pci_find(unsigned long vendor, unsigned long device, int index, char *bdf, size_t len);
/* Open the VFIO group of PCI device bdf; -EBUSY when it is not viable. */
int vfio_group_open(const char *bdf, int *group_id, int *group);
/* VFIO_GROUP_SET_CONTAINER. */
int __vfio_group_attach(int group, int container);
/* Set, then clear, bits of a vfio-pci device's PCI command register
 * (memory decode, bus mastering) through its config region. vfio-pci zaps
 * every mmap of its BARs when memory decode goes off. */
int __vfio_pci_command(int device, uint64_t config_offset, uint16_t set, uint16_t clear);
/* VFIO_DEVICE_GET_REGION_INFO of one region, without capabilities. */
int vfio_region_info(int device, unsigned int index, struct vfio_region_info *info);

/* Number of edu devices bound to vfio-pci. */
int edu_count(void);
/* Fill bdf with the index-th edu in sorted PCI order; 0 or -ENODEV. */
int edu_find(int index, char *bdf, size_t len);

/* Container: /dev/vfio/vfio. Returns an fd or a negative errno. */
int __vfio_container_open(void);
int vfio_container_open(void);
int __vfio_set_iommu(int container, unsigned long type);
void vfio_set_iommu(int container, unsigned long type);

/* Mark e closed, so edu_close() is safe on it before any edu_open(). */
void edu_init(struct edu *e);

/* Find the index-th edu device and open its group (not yet in a container). */
int __edu_open(struct edu *e, int index);
void edu_open(struct edu *e, int index);
int __edu_attach(struct edu *e, int container);
void edu_attach(struct edu *e, int container);
/* Get the device fd, map BAR0, enable bus mastering. Needs an IOMMU set. */
int __edu_get_device(struct edu *e);
void edu_get_device(struct edu *e);
void edu_close(struct edu *e);

/* One-call setup: new container, index-th edu attached, IOMMU type set,
 * device ready. Returns the container fd. */
int edu_setup(struct edu *e, int index, unsigned long type);

/* VFIO_IOMMU_MAP_DMA / UNMAP_DMA; flags as in linux/vfio.h. */
int __vfio_map(int container, void *vaddr, uint64_t iova, uint64_t size,
	       uint32_t flags);
void vfio_map(int container, void *vaddr, uint64_t iova, uint64_t size);
int __vfio_unmap(int container, uint64_t iova, uint64_t size, uint32_t flags,
		 uint64_t *unmapped);
void vfio_unmap(int container, uint64_t iova, uint64_t size);

/* One edu DMA. to_ram: device buffer -> RAM at iova; else RAM at iova ->
 * device buffer. Polls for completion. -ETIMEDOUT if it never completes. */
int __edu_dma(struct edu *e, uint64_t iova, uint32_t len, bool to_ram);

/*
 * Prove that [iova, iova + size) maps buf: at a few offsets (start, middle,
 * end) write a fresh pattern into buf, DMA it RAM -> device, clear buf,
 * DMA it back device -> RAM, and compare. -EIO on a mismatch.
 */
int __edu_verify(struct edu *e, void *buf, uint64_t iova, uint64_t size);
void edu_verify(struct edu *e, void *buf, uint64_t iova, uint64_t size);

/* VFIO_IOMMU_GET_INFO into buf (argsz bytes, at least the fixed part). */
int __vfio_iommu_info(int container, void *buf, uint32_t argsz);
/* The capability id in a GET_INFO result, or NULL when absent. */
const struct vfio_info_cap_header *vfio_info_cap(const void *buf, uint16_t id);

#endif /* VFIO_EDU_H */
