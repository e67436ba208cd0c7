// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_unbind - the admin unbinds a device from vfio-pci while a VMM has it
 * open and guest memory mapped for it (a hot-unplug, a driver swap). The
 * unbind waits for the device to be let go: vfio-pci asks the VMM through
 * its request eventfd, the VMM closes the device fd, and the unbind
 * finishes (within a deadline: a hang is a failure). The group's last
 * device gone, VFIO detaches the group from the container, and the IOMMU
 * driver drops every mapping and pin with it: the container has no driver
 * any more (UNMAP_DMA: EINVAL), nothing stays pinned, as with type1. The
 * device binds to vfio-pci again and works. Against type1 and zeropin,
 * anonymous and zeropinfs memory.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "bounded.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull
#define MAP_SIZE	(64ul << 20)
/* vfio-pci asks at once and then every 10 s; the TCG lab is slow */
#define REQUEST_MS	30000
#define UNBIND_MS	60000
#define VFIO_PCI_DRV	"/sys/bus/pci/drivers/vfio-pci"

FIXTURE(unbind) {
	struct buffer buf;	/* guest RAM stand-in, mapped at IOVA_BASE */
	struct edu edu;
	int container;
	int index;		/* the last edu: the others' tests use the first */
	pid_t unbinder;		/* the admin's unbind, until it is reaped */
};

FIXTURE_VARIANT(unbind) {
	enum vfio_driver driver;
	enum backing backing;
};

FIXTURE_VARIANT_ADD(unbind, type1_anon) { .driver = DRIVER_TYPE1, .backing = BACKING_ANON_4K };
FIXTURE_VARIANT_ADD(unbind, zeropin_anon) { .driver = DRIVER_ZEROPIN, .backing = BACKING_ANON_4K };
FIXTURE_VARIANT_ADD(unbind, zeropin_zeropinfs) {
	.driver = DRIVER_ZEROPIN, .backing = BACKING_ZEROPINFS,
};

/* Write s into a sysfs file; 0 or -errno. */
static int sysfs_write(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* Wait up to ms for child pid to exit; its status 0 as 0, else -EIO, or
 * -ETIMEDOUT (then it is killed). */
static int wait_exit(pid_t pid, int ms)
{
	double end = now_ms() + ms;
	int status;

	while (waitpid(pid, &status, WNOHANG) != pid) {
		if (now_ms() > end) {
			kill_and_reap(pid, 2000);
			return -ETIMEDOUT;
		}
		usleep(10000);
	}
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -EIO;
}

/* Ask vfio-pci to tell efd when it wants the device back. */
static int __request_eventfd(int device, int efd)
{
	char buf[sizeof(struct vfio_irq_set) + sizeof(int)];
	struct vfio_irq_set *set = (void *)buf;

	set->argsz = sizeof(buf);
	set->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
	set->index = VFIO_PCI_REQ_IRQ_INDEX;
	set->start = 0;
	set->count = 1;
	memcpy(set->data, &efd, sizeof(int));
	return ioctl(device, VFIO_DEVICE_SET_IRQS, set) ? -errno : 0;
}

FIXTURE_SETUP(unbind)
{
	if (variant->backing == BACKING_ZEROPINFS)
		zfs_mount_fresh("size=256M");
	vfio_driver_use(variant->driver);
	self->index = edu_count() - 1;
	ASSERT_LE(0, self->index);
	buffer_alloc(&self->buf, variant->backing, MAP_SIZE);
	/* the unbind's child needs none of it (pinned pages are copied at fork) */
	madvise(self->buf.raw, self->buf.raw_size, MADV_DONTFORK);
	self->container = edu_setup(&self->edu, self->index, VFIO_TYPE1v2_IOMMU);
	vfio_map(self->container, self->buf.addr, IOVA_BASE, MAP_SIZE);
	edu_verify(&self->edu, self->buf.addr, IOVA_BASE, MAP_SIZE);
}

FIXTURE_TEARDOWN(unbind)
{
	char path[128];

	edu_close(&self->edu);
	if (self->container >= 0)
		close(self->container);
	buffer_free(&self->buf);
	/* a failed test's unbind finishes once the device is closed */
	if (self->unbinder > 0)
		wait_exit(self->unbinder, UNBIND_MS);
	/* bound to vfio-pci again, whatever happened (driver_override stays) */
	snprintf(path, sizeof(path), VFIO_PCI_DRV "/%s", self->edu.bdf);
	if (access(path, F_OK))
		sysfs_write("/sys/bus/pci/drivers_probe", self->edu.bdf);
}

TEST_F_TIMEOUT(unbind, unbind_while_mapped_waits_for_the_vmm_and_leaks_nothing, 300)
{
	long pinned = iommu_counter("pages_pinned");
	struct pollfd p = { .events = POLLIN };
	char bdf[sizeof(self->edu.bdf)], path[128];
	uint64_t unmapped = 0, n;
	struct edu again;
	int ret, container;
	pid_t pid;

	p.fd = eventfd(0, EFD_CLOEXEC);
	ASSERT_LE(0, p.fd);
	ASSERT_EQ(0, __request_eventfd(self->edu.device, p.fd));
	strcpy(bdf, self->edu.bdf);
	/* the admin's unbind, in a child: it blocks until the device is free */
	pid = fork();
	ASSERT_LE(0, pid);
	self->unbinder = pid;
	if (!pid) {
		/* not holding the device itself: its fd and its BAR's mapping
		 * came with the fork */
		munmap((void *)self->edu.bar0, self->edu.bar0_size);
		syscall(SYS_close_range, 3, ~0U, 0);
		_exit(-sysfs_write(VFIO_PCI_DRV "/unbind", bdf) & 0xff);
	}
	ASSERT_EQ(1, poll(&p, 1, REQUEST_MS)) TH_LOG("vfio-pci never asked for the device");
	ASSERT_EQ(sizeof(n), read(p.fd, &n, sizeof(n)));
	/* the VMM lets the device go, keeps its container and mappings */
	munmap((void *)self->edu.bar0, self->edu.bar0_size);
	self->edu.bar0 = NULL;
	close(self->edu.device);
	self->edu.device = -1;
	ret = wait_exit(pid, UNBIND_MS);
	self->unbinder = 0;
	EXPECT_EQ(0, ret) TH_LOG("the unbind did not finish after the device fd was closed");
	snprintf(path, sizeof(path), VFIO_PCI_DRV "/%s", bdf);
	EXPECT_NE(0, access(path, F_OK)) TH_LOG("%s still bound to vfio-pci", bdf);
	/* the group left the container, its mappings and pins with it */
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(pinned - (long)(MAP_SIZE / 4096), iommu_counter("pages_pinned"));
		EXPECT_EQ(0, iommu_counter("containers"));
	}
	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE, MAP_SIZE, 0, &unmapped));
	edu_close(&self->edu);
	close(self->container);
	self->container = -1;
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(pinned - (long)(MAP_SIZE / 4096), iommu_counter("pages_pinned"));
		EXPECT_EQ(0, iommu_counter("containers"));
	}
	close(p.fd);
	/* bound again, and it works */
	ASSERT_EQ(0, sysfs_write("/sys/bus/pci/drivers_probe", bdf));
	ASSERT_EQ(0, access(path, F_OK)) TH_LOG("%s did not bind to vfio-pci again", bdf);
	container = edu_setup(&again, self->index, VFIO_TYPE1v2_IOMMU);
	vfio_map(container, self->buf.addr, IOVA_BASE, MAP_SIZE);
	edu_verify(&again, self->buf.addr, IOVA_BASE, MAP_SIZE);
	edu_close(&again);
	close(container);
}

TEST_HARNESS_MAIN
