// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_driver.c - see vfio_driver.h.
 */
#include <errno.h>
#include <unistd.h>

#include "vfio_driver.h"
#include "zeropin.h"

static int expected = -1;

const char *vfio_driver_name(enum vfio_driver d)
{
	return d == DRIVER_ZEROPIN ? "zeropin" : "type1";
}

int __vfio_driver_use(enum vfio_driver d)
{
	int ret = 0;

	if (access("/sys/module/zeropin", F_OK)) {
		if (d == DRIVER_TYPE1)
			goto out;
		ret = __zeropin_load("");
		if (ret)
			return ret;
	}
	ret = __zeropin_param_write("claim_type1v2", d == DRIVER_ZEROPIN);
out:
	if (!ret)
		expected = d;
	return ret;
}

void vfio_driver_use(enum vfio_driver d)
{
	int ret = __vfio_driver_use(d);

	if (ret)
		test_fail(vfio_driver_name(d), ret);
}

int vfio_driver_expected(void)
{
	return expected;
}

long zeropin_containers(void)
{
	long n = iommu_counter("containers");

	return n < 0 ? 0 : n;
}
