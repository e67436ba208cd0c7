// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_mdev - a group without a real IOMMU (an mdev: the kernel's mtty
 * sample, built from Debian's linux-source by scripts/lab-mdev) is not
 * zeropin's: its TYPE1v2 container falls through to stock type1 even with
 * claim_type1v2=1. Such a group cannot join a container zeropin already
 * serves (EINVAL; type1 would take it), which docs/module.md documents.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define EXTRA		"/lib/modules/lab/extra"
#define MDEV_UUID	"83b8f4f2-509f-382f-3c1e-e6bfe0fa1001"
#define MDEV_DEV	"/sys/bus/mdev/devices/" MDEV_UUID

FIXTURE(mdev) {
	int group;		/* the mdev's VFIO group fd */
	int container;
};

FIXTURE_VARIANT(mdev) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(mdev, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(mdev, zeropin) { .driver = DRIVER_ZEROPIN };

/* Create the mtty mdev (first supported type) and open its group. */
static int __mdev_open(void)
{
	char link[256], target[256], path[64];
	glob_t g;
	ssize_t n;
	int ret;

	ret = __insmod(EXTRA "/mdev.ko", "");
	if (!ret || ret == -EEXIST)
		ret = __insmod(EXTRA "/mtty.ko", "");
	if (ret && ret != -EEXIST)
		return ret;
	if (access(MDEV_DEV, F_OK)) {
		if (glob("/sys/class/mdev_bus/*/mdev_supported_types/*/create", 0, NULL, &g))
			return -ENODEV;
		ret = __write_file(g.gl_pathv[0], MDEV_UUID);
		globfree(&g);
		if (ret)
			return ret;
	}
	snprintf(link, sizeof(link), MDEV_DEV "/iommu_group");
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	snprintf(path, sizeof(path), "/dev/vfio/%s", strrchr(target, '/') + 1);
	ret = open(path, O_RDWR | O_CLOEXEC);
	return ret < 0 ? -errno : ret;
}

FIXTURE_SETUP(mdev)
{
	self->group = self->container = -1;
	if (access(EXTRA "/mtty.ko", F_OK))
		SKIP(return, "no mtty sample in the lab (scripts/lab-mdev builds it)");
	vfio_driver_use(variant->driver);
	self->group = __mdev_open();
	ASSERT_LE(0, self->group);
	self->container = vfio_container_open();
}

FIXTURE_TEARDOWN(mdev)
{
	if (self->group >= 0)
		close(self->group);
	if (self->container >= 0)
		close(self->container);
	__write_file(MDEV_DEV "/remove", "1");
}

TEST_F(mdev, emulated_group_container_goes_to_type1)
{
	long before = zeropin_containers();

	ASSERT_EQ(0, ioctl(self->group, VFIO_GROUP_SET_CONTAINER, &self->container));
	ASSERT_EQ(0, ioctl(self->container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU));
	EXPECT_EQ(before, zeropin_containers());
}

TEST_F(mdev, emulated_group_joins_a_container_only_on_type1)
{
	struct edu edu;
	int ret;

	edu_open(&edu, 0);
	edu_attach(&edu, self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);	/* the variant's driver */
	ret = ioctl(self->group, VFIO_GROUP_SET_CONTAINER, &self->container) ? -errno : 0;
	EXPECT_EQ(variant->driver == DRIVER_ZEROPIN ? -EINVAL : 0, ret);
	if (!ret)
		ioctl(self->group, VFIO_GROUP_UNSET_CONTAINER);
	edu_close(&edu);
}

TEST_HARNESS_MAIN
