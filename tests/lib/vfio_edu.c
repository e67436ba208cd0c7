// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_edu.c - see vfio_edu.h.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/pci_regs.h>
#include <linux/vfio.h>

#include "vfio_driver.h"
#include "vfio_edu.h"

/* Offsets __edu_verify() probes, per mapping: first, middle, last bytes. */
#define EDU_VERIFY_CHUNK 512

static int read_hex(const char *dir, const char *name, unsigned long *val)
{
	char path[PATH_MAX];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	ok = fscanf(f, "%lx", val) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

static bool is_pci_id(const char *dir, unsigned long vendor, unsigned long device)
{
	unsigned long v, d;

	return !read_hex(dir, "vendor", &v) && v == vendor &&
	       !read_hex(dir, "device", &d) && d == device;
}

int pci_find(unsigned long vendor, unsigned long device, int index, char *bdf, size_t len)
{
	struct dirent **names;
	char dir[PATH_MAX];
	int n, i, found = -1;

	n = scandir("/sys/bus/pci/devices", &names, NULL, alphasort);
	if (n < 0)
		return -errno;
	for (i = 0; i < n; i++) {
		snprintf(dir, sizeof(dir), "/sys/bus/pci/devices/%s", names[i]->d_name);
		if (names[i]->d_name[0] != '.' && is_pci_id(dir, vendor, device) &&
		    ++found == index)
			snprintf(bdf, len, "%s", names[i]->d_name);
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return found >= index ? 0 : -ENODEV;
}

int edu_find(int index, char *bdf, size_t len)
{
	return pci_find(EDU_VENDOR, EDU_DEVICE, index, bdf, len);
}

int edu_count(void)
{
	char bdf[256];
	int n = 0;

	while (!edu_find(n, bdf, sizeof(bdf)))
		n++;
	return n;
}

int __vfio_container_open(void)
{
	int fd = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, VFIO_GET_API_VERSION) != VFIO_API_VERSION) {
		close(fd);
		return -EPROTO;
	}
	return fd;
}

int vfio_container_open(void)
{
	int fd = __vfio_container_open();

	if (fd < 0)
		test_fail("open /dev/vfio/vfio", fd);
	return fd;
}

/*
 * SET_IOMMU, and when a test chose a driver (vfio_driver_use()), check that
 * a TYPE1v2 container went to it: -EPROTO if it did not.
 */
int __vfio_set_iommu(int container, unsigned long type)
{
	long before = zeropin_containers();
	bool zeropin;

	if (ioctl(container, VFIO_SET_IOMMU, type))
		return -errno;
	zeropin = zeropin_containers() > before;
	if (type == VFIO_TYPE1v2_IOMMU && vfio_driver_expected() >= 0 &&
	    zeropin != (vfio_driver_expected() == DRIVER_ZEROPIN))
		return -EPROTO;
	return 0;
}

void vfio_set_iommu(int container, unsigned long type)
{
	int ret = __vfio_set_iommu(container, type);

	if (ret)
		test_fail("VFIO_SET_IOMMU", ret);
}

static int group_of(const char *bdf)
{
	char link[PATH_MAX], target[PATH_MAX], *base;
	ssize_t n;

	snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s/iommu_group", bdf);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	base = strrchr(target, '/');
	return atoi(base ? base + 1 : target);
}

void edu_init(struct edu *e)
{
	memset(e, 0, sizeof(*e));
	e->group = e->device = -1;
}

int vfio_group_open(const char *bdf, int *group_id, int *group)
{
	struct vfio_group_status status = { .argsz = sizeof(status) };
	char path[64];

	*group_id = group_of(bdf);
	if (*group_id < 0)
		return *group_id;
	snprintf(path, sizeof(path), "/dev/vfio/%d", *group_id);
	*group = open(path, O_RDWR | O_CLOEXEC);
	if (*group < 0)
		return -errno;
	if (ioctl(*group, VFIO_GROUP_GET_STATUS, &status))
		return -errno;
	return (status.flags & VFIO_GROUP_FLAGS_VIABLE) ? 0 : -EBUSY;
}

int __edu_open(struct edu *e, int index)
{
	int ret;

	edu_init(e);
	ret = edu_find(index, e->bdf, sizeof(e->bdf));
	if (ret)
		return ret;
	return vfio_group_open(e->bdf, &e->group_id, &e->group);
}

void edu_open(struct edu *e, int index)
{
	int ret = __edu_open(e, index);

	if (ret)
		test_fail("open edu group", ret);
}

int __vfio_group_attach(int group, int container)
{
	return ioctl(group, VFIO_GROUP_SET_CONTAINER, &container) ? -errno : 0;
}

int __edu_attach(struct edu *e, int container)
{
	return __vfio_group_attach(e->group, container);
}

void edu_attach(struct edu *e, int container)
{
	int ret = __edu_attach(e, container);

	if (ret)
		test_fail("VFIO_GROUP_SET_CONTAINER", ret);
}

int vfio_region_info(int device, unsigned int index, struct vfio_region_info *info)
{
	memset(info, 0, sizeof(*info));
	info->argsz = sizeof(*info);
	info->index = index;
	return ioctl(device, VFIO_DEVICE_GET_REGION_INFO, info) ? -errno : 0;
}

int __vfio_pci_command(int device, uint64_t config_offset, uint16_t set, uint16_t clear)
{
	uint16_t cmd;

	if (pread(device, &cmd, sizeof(cmd), config_offset + PCI_COMMAND) != sizeof(cmd))
		return -EIO;
	cmd = (cmd | set) & ~clear;
	if (pwrite(device, &cmd, sizeof(cmd), config_offset + PCI_COMMAND) != sizeof(cmd))
		return -EIO;
	return 0;
}

int __edu_get_device(struct edu *e)
{
	struct vfio_region_info bar, cfg;
	void *p;
	int ret;

	e->device = ioctl(e->group, VFIO_GROUP_GET_DEVICE_FD, e->bdf);
	if (e->device < 0)
		return -errno;
	ret = vfio_region_info(e->device, VFIO_PCI_BAR0_REGION_INDEX, &bar);
	if (!ret)
		ret = vfio_region_info(e->device, VFIO_PCI_CONFIG_REGION_INDEX, &cfg);
	if (ret)
		return ret;
	if (!(bar.flags & VFIO_REGION_INFO_FLAG_MMAP))
		return -ENOTSUP;
	p = mmap(NULL, bar.size, PROT_READ | PROT_WRITE, MAP_SHARED, e->device, bar.offset);
	if (p == MAP_FAILED)
		return -errno;
	e->bar0 = p;
	e->bar0_size = bar.size;
	e->config_offset = cfg.offset;
	if (*(volatile uint32_t *)(e->bar0 + EDU_REG_ID) >> 16 != 0x0100)
		return -ENODEV;
	return __vfio_pci_command(e->device, e->config_offset,
				  PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, 0);
}

void edu_get_device(struct edu *e)
{
	int ret = __edu_get_device(e);

	if (ret)
		test_fail("edu device setup", ret);
}

void edu_close(struct edu *e)
{
	if (e->bar0)
		munmap((void *)e->bar0, e->bar0_size);
	if (e->device >= 0)
		close(e->device);
	if (e->group >= 0)
		close(e->group);
	e->bar0 = NULL;
	e->device = e->group = -1;
}

int edu_setup(struct edu *e, int index, unsigned long type)
{
	int container = vfio_container_open();

	edu_open(e, index);
	edu_attach(e, container);
	vfio_set_iommu(container, type);
	edu_get_device(e);
	return container;
}

int __vfio_map(int container, void *vaddr, uint64_t iova, uint64_t size,
	       uint32_t flags)
{
	struct vfio_iommu_type1_dma_map map = {
		.argsz = sizeof(map),
		.flags = flags,
		.vaddr = (uintptr_t)vaddr,
		.iova = iova,
		.size = size,
	};

	return ioctl(container, VFIO_IOMMU_MAP_DMA, &map) ? -errno : 0;
}

void vfio_map(int container, void *vaddr, uint64_t iova, uint64_t size)
{
	int ret = __vfio_map(container, vaddr, iova, size,
			     VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);

	if (ret)
		test_fail("VFIO_IOMMU_MAP_DMA", ret);
}

int __vfio_unmap(int container, uint64_t iova, uint64_t size, uint32_t flags,
		 uint64_t *unmapped)
{
	struct vfio_iommu_type1_dma_unmap unmap = {
		.argsz = sizeof(unmap),
		.flags = flags,
		.iova = iova,
		.size = size,
	};

	if (ioctl(container, VFIO_IOMMU_UNMAP_DMA, &unmap))
		return -errno;
	if (unmapped)
		*unmapped = unmap.size;
	return 0;
}

void vfio_unmap(int container, uint64_t iova, uint64_t size)
{
	uint64_t unmapped = 0;
	int ret = __vfio_unmap(container, iova, size, 0, &unmapped);

	if (!ret && unmapped != size)
		ret = -EIO;
	if (ret)
		test_fail("VFIO_IOMMU_UNMAP_DMA", ret);
}

static inline void reg_write(struct edu *e, unsigned int reg, uint64_t val)
{
	*(volatile uint64_t *)(e->bar0 + reg) = val;
}

static inline uint64_t reg_read(struct edu *e, unsigned int reg)
{
	return *(volatile uint64_t *)(e->bar0 + reg);
}

int __edu_dma(struct edu *e, uint64_t iova, uint32_t len, bool to_ram)
{
	double deadline = now_ms() + EDU_DMA_TIMEOUT_MS;

	if (!len || len > EDU_DMA_MAX)
		return -EINVAL;
	if (reg_read(e, EDU_REG_DMA_CMD) & EDU_CMD_RUN)
		return -EBUSY;
	reg_write(e, EDU_REG_DMA_SRC, to_ram ? EDU_DMA_BUF : iova);
	reg_write(e, EDU_REG_DMA_DST, to_ram ? iova : EDU_DMA_BUF);
	reg_write(e, EDU_REG_DMA_CNT, len);
	reg_write(e, EDU_REG_DMA_CMD, EDU_CMD_RUN | (to_ram ? EDU_CMD_TO_RAM : 0));
	while (reg_read(e, EDU_REG_DMA_CMD) & EDU_CMD_RUN) {
		if (now_ms() > deadline)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

/* Round trip of one chunk at off: pattern -> device -> cleared RAM. */
static int verify_at(struct edu *e, uint8_t *buf, uint64_t iova, uint64_t off,
		     uint32_t len)
{
	uint8_t want[EDU_DMA_MAX];
	uint32_t i, seed = (uint32_t)(rand() ^ off);
	int ret;

	for (i = 0; i < len; i++)
		want[i] = (uint8_t)((seed >> (i % 24)) + i * 131u);
	memcpy(buf + off, want, len);
	ret = __edu_dma(e, iova + off, len, false);
	if (ret)
		return ret;
	memset(buf + off, 0, len);
	ret = __edu_dma(e, iova + off, len, true);
	if (ret)
		return ret;
	return memcmp(buf + off, want, len) ? -EIO : 0;
}

int __edu_verify(struct edu *e, void *buf, uint64_t iova, uint64_t size)
{
	uint32_t len = size < EDU_VERIFY_CHUNK ? size : EDU_VERIFY_CHUNK;
	uint64_t offs[3] = { 0, (size / 2) & ~4095ull, size - len };
	int i, ret;

	for (i = 0; i < 3; i++) {
		ret = verify_at(e, buf, iova, offs[i], len);
		if (ret)
			return ret;
	}
	return 0;
}

void edu_verify(struct edu *e, void *buf, uint64_t iova, uint64_t size)
{
	int ret = __edu_verify(e, buf, iova, size);

	if (ret)
		test_fail("edu DMA round trip", ret);
}

int __vfio_iommu_info(int container, void *buf, uint32_t argsz)
{
	struct vfio_iommu_type1_info *info = buf;

	memset(buf, 0, argsz);
	info->argsz = argsz;
	return ioctl(container, VFIO_IOMMU_GET_INFO, info) ? -errno : 0;
}

const struct vfio_info_cap_header *vfio_info_cap(const void *buf, uint16_t id)
{
	const struct vfio_iommu_type1_info *info = buf;
	const struct vfio_info_cap_header *h;
	uint32_t off;

	if (!(info->flags & VFIO_IOMMU_INFO_CAPS))
		return NULL;
	for (off = info->cap_offset; off && off + sizeof(*h) <= info->argsz; off = h->next) {
		h = (const void *)((const char *)buf + off);
		if (h->id == id)
			return h;
	}
	return NULL;
}
