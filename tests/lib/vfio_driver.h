/* SPDX-License-Identifier: GPL-2.0 */
/*
 * vfio_driver.h - which VFIO IOMMU backend serves the TYPE1v2 containers a
 * test sets up: stock vfio_iommu_type1, or zeropin's backend. The VFIO
 * selftests are the contract both must keep, so each runs over both
 * (FIXTURE_VARIANT) and checks that the container really went to the
 * driver the variant names.
 */
#ifndef VFIO_DRIVER_H
#define VFIO_DRIVER_H

#include <stdbool.h>

enum vfio_driver {
	DRIVER_TYPE1,		/* zeropin not loaded, or claim_type1v2=0 */
	DRIVER_ZEROPIN,		/* zeropin loaded with claim_type1v2=1 */
};

const char *vfio_driver_name(enum vfio_driver d);

/* Route the next TYPE1v2 containers to d: load zeropin if needed and set
 * its claim_type1v2 parameter. vfio_set_iommu() then checks the outcome. */
int __vfio_driver_use(enum vfio_driver d);
void vfio_driver_use(enum vfio_driver d);

/* The driver the next TYPE1v2 containers must get, or -1 when no test
 * asked (then nothing is checked). */
int vfio_driver_expected(void);

/* Containers zeropin serves now (0 when it is not loaded). */
long zeropin_containers(void);

#endif /* VFIO_DRIVER_H */
