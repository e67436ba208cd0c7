// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_gpu.c - see vfio_gpu.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/pci_regs.h>
#include <linux/vfio.h>

#include "util.h"
#include "vfio_edu.h"
#include "vfio_gpu.h"

int gpu_count(void)
{
	char bdf[256];
	int n = 0;

	while (!pci_find(GPU_VENDOR, GPU_DEVICE, n, bdf, sizeof(bdf)))
		n++;
	return n;
}

void gpu_init(struct gpu *g)
{
	memset(g, 0, sizeof(*g));
	g->group = g->device = -1;
}

int __gpu_open(struct gpu *g, int index)
{
	int ret;

	gpu_init(g);
	ret = pci_find(GPU_VENDOR, GPU_DEVICE, index, g->bdf, sizeof(g->bdf));
	if (ret)
		return ret;
	return vfio_group_open(g->bdf, &g->group_id, &g->group);
}

void gpu_open(struct gpu *g, int index)
{
	int ret = __gpu_open(g, index);

	if (ret)
		test_fail("open GPU group", ret);
}

int __gpu_attach(struct gpu *g, int container)
{
	return __vfio_group_attach(g->group, container);
}

void gpu_attach(struct gpu *g, int container)
{
	int ret = __gpu_attach(g, container);

	if (ret)
		test_fail("VFIO_GROUP_SET_CONTAINER", ret);
}

int __gpu_get_device(struct gpu *g)
{
	struct vfio_region_info bar, cfg;
	int ret;

	g->device = ioctl(g->group, VFIO_GROUP_GET_DEVICE_FD, g->bdf);
	if (g->device < 0)
		return -errno;
	ret = vfio_region_info(g->device, VFIO_PCI_BAR2_REGION_INDEX, &bar);
	if (!ret)
		ret = vfio_region_info(g->device, VFIO_PCI_CONFIG_REGION_INDEX, &cfg);
	if (ret)
		return ret;
	if (!(bar.flags & VFIO_REGION_INFO_FLAG_MMAP) || !bar.size)
		return -ENOTSUP;
	g->bar_size = bar.size;
	g->bar_offset = bar.offset;
	g->config_offset = cfg.offset;
	/* memory decode on, as a VMM's guest would turn it */
	return __vfio_pci_command(g->device, g->config_offset, PCI_COMMAND_MEMORY, 0);
}

void gpu_get_device(struct gpu *g)
{
	int ret = __gpu_get_device(g);

	if (ret)
		test_fail("GPU device setup", ret);
}

void *gpu_bar_mmap(struct gpu *g, uint64_t off, uint64_t len, int prot)
{
	return mmap(NULL, len, prot, MAP_SHARED, g->device, g->bar_offset + off);
}

void gpu_close(struct gpu *g)
{
	if (g->device >= 0)
		close(g->device);
	if (g->group >= 0)
		close(g->group);
	g->device = g->group = -1;
}

void bar_pattern(uint8_t *p, size_t len)
{
	static uint32_t seed = 0x9e3779b9;
	size_t i;

	seed = seed * 1664525u + 1013904223u;
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)((seed >> (i % 24)) + i * 151u);
}

int __probe_dma_write(const struct bar_probe *p, uint64_t iova, const void *src, uint32_t len)
{
	int ret;

	memcpy(p->ram, src, len);
	ret = __edu_dma(p->edu, p->ram_iova, len, false);
	return ret ? ret : __edu_dma(p->edu, iova, len, true);
}

int __probe_dma_read(const struct bar_probe *p, uint64_t iova, void *dst, uint32_t len)
{
	int ret;

	memset(p->ram, 0, len);
	ret = __edu_dma(p->edu, iova, len, false);
	if (!ret)
		ret = __edu_dma(p->edu, p->ram_iova, len, true);
	if (!ret)
		memcpy(dst, p->ram, len);
	return ret;
}

/* Copy from a BAR mmap byte by byte (an uncached device mapping). */
static void bar_copy(void *dst, const volatile uint8_t *src, size_t len)
{
	uint8_t *d = dst;

	while (len--)
		*d++ = *src++;
}

int __bar_round_trip(const struct bar_probe *p, volatile uint8_t *bar, uint64_t iova,
		     uint64_t off)
{
	uint8_t want[BAR_PROBE_XFER], got[BAR_PROBE_XFER];
	size_t i;
	int ret;

	bar_pattern(want, sizeof(want));
	ret = __probe_dma_write(p, iova + off, want, sizeof(want));
	if (ret)
		return ret;
	bar_copy(got, bar + off, sizeof(got));
	if (memcmp(want, got, sizeof(want)))
		return -EIO;
	bar_pattern(want, sizeof(want));
	for (i = 0; i < sizeof(want); i++)
		bar[off + sizeof(want) + i] = want[i];
	ret = __probe_dma_read(p, iova + off + sizeof(want), got, sizeof(got));
	if (ret)
		return ret;
	return memcmp(want, got, sizeof(want)) ? -EIO : 0;
}

int __bar_verify(const struct bar_probe *p, volatile uint8_t *bar, uint64_t iova,
		 uint64_t size)
{
	uint64_t offs[3] = { 0, size / 2, size - 4096 };
	int i, ret;

	for (i = 0; i < 3; i++) {
		ret = __bar_round_trip(p, bar, iova, offs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

int bar_dma_write_lands(const struct bar_probe *p, volatile uint8_t *bar, uint64_t iova,
			uint64_t off)
{
	uint8_t want[BAR_PROBE_XFER], got[BAR_PROBE_XFER];
	size_t i;
	int ret;

	for (i = 0; i < sizeof(want); i++)
		bar[off + i] = 0;
	bar_pattern(want, sizeof(want));
	ret = __probe_dma_write(p, iova, want, sizeof(want));
	if (ret)
		return ret;
	bar_copy(got, bar + off, sizeof(got));
	return !memcmp(want, got, sizeof(want));
}
