// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_msi - without interrupt remapping a device's MSIs are not isolated,
 * and VFIO must refuse its group (EPERM) unless the administrator allows
 * unsafe interrupts, with each driver's own allow_unsafe_interrupts
 * parameter. Runs in a lab booted with --no-intremap (tests/run-selftests
 * does one such boot); skips where interrupt remapping is on.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "kmsg.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull
#define SIZE		(1ul << 20)
#define TYPE1_UNSAFE "/sys/module/vfio_iommu_type1/parameters/allow_unsafe_interrupts"

FIXTURE(msi) {
	struct edu edu;
	int container;
};

FIXTURE_VARIANT(msi) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(msi, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(msi, zeropin) { .driver = DRIVER_ZEROPIN };

static int __write_param(const char *path, int value)
{
	return __write_file(path, value ? "Y" : "N");
}

FIXTURE_SETUP(msi)
{
	self->container = -1;
	edu_init(&self->edu);
	if (kmsg_count("Enabled IRQ remapping") > 0)
		SKIP(return, "interrupt remapping is on (the --no-intremap lab boot runs this)");
	vfio_driver_use(variant->driver);
	/* type1 stays strict in both variants: a group zeropin refuses
	 * falls through to type1, which must refuse it as well */
	ASSERT_EQ(0, __write_param(TYPE1_UNSAFE, 0));
	if (variant->driver == DRIVER_ZEROPIN)
		ASSERT_EQ(0, __zeropin_param_write("allow_unsafe_interrupts", 0));
	edu_open(&self->edu, 0);
	self->container = vfio_container_open();
	edu_attach(&self->edu, self->container);
}

FIXTURE_TEARDOWN(msi)
{
	edu_close(&self->edu);
	if (self->container >= 0)
		close(self->container);
	__write_param(TYPE1_UNSAFE, 0);
	__zeropin_param_write("allow_unsafe_interrupts", 0);
}

TEST_F(msi, group_without_isolated_msi_is_refused_unless_allowed)
{
	long containers = zeropin_containers();
	struct buffer buf;

	EXPECT_EQ(-EPERM, __vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU));
	EXPECT_EQ(containers, zeropin_containers());
	if (variant->driver == DRIVER_ZEROPIN) {
		ASSERT_EQ(0, __zeropin_param_write("allow_unsafe_interrupts", 1));
	} else {
		ASSERT_EQ(0, __write_param(TYPE1_UNSAFE, 1));
	}
	/* allowed: the container goes to the variant's driver, and works */
	ASSERT_EQ(0, __vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU));
	edu_get_device(&self->edu);
	buffer_alloc(&buf, BACKING_ANON_4K, SIZE);
	vfio_map(self->container, buf.addr, IOVA_BASE, SIZE);
	edu_verify(&self->edu, buf.addr, IOVA_BASE, SIZE);
	vfio_unmap(self->container, IOVA_BASE, SIZE);
	buffer_free(&buf);
}

TEST_HARNESS_MAIN
