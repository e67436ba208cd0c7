// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_abi.c - compiled, never loaded: proves that kernel/compat.h's
 * declarations of VFIO's private IOMMU-backend interface match the target
 * kernel's drivers/vfio/vfio.h (from Debian's linux-source package), member
 * by member. Built by scripts/check-vfio-abi; any mismatch fails the build.
 */
#include <linux/build_bug.h>
#include <linux/stddef.h>

#include "vfio.h"		/* the kernel's own, drivers/vfio/vfio.h */
#include "compat.h"		/* ours, with ZP_VFIO_ABI_CHECK defined */

#define OURS	struct zp_vfio_iommu_driver_ops
#define THEIRS	struct vfio_iommu_driver_ops

/* Same place, same size; and the same type where no enum of ours differs
 * from theirs by name only. */
#define SAME_PLACE(m)								\
	static_assert(offsetof(OURS, m) == offsetof(THEIRS, m) &&		\
		      sizeof_field(OURS, m) == sizeof_field(THEIRS, m),	\
		      "vfio_iommu_driver_ops." #m " moved")
#define SAME_MEMBER(m)								\
	SAME_PLACE(m);								\
	static_assert(__same_type(((OURS *)0)->m, ((THEIRS *)0)->m),		\
		      "vfio_iommu_driver_ops." #m " changed type")

SAME_MEMBER(name);
SAME_MEMBER(owner);
SAME_MEMBER(open);
SAME_MEMBER(release);
SAME_MEMBER(ioctl);
SAME_PLACE(attach_group);
SAME_MEMBER(detach_group);
SAME_MEMBER(pin_pages);
SAME_MEMBER(unpin_pages);
SAME_MEMBER(register_device);
SAME_MEMBER(unregister_device);
SAME_MEMBER(dma_rw);
SAME_MEMBER(group_iommu_domain);
#ifdef ZP_VFIO_OPS_HAVE_NOTIFY
SAME_PLACE(notify);
static_assert(VFIO_IOMMU_CONTAINER_CLOSE == ZP_VFIO_IOMMU_CONTAINER_CLOSE, "notify type");
#endif
static_assert(sizeof(OURS) == sizeof(THEIRS), "vfio_iommu_driver_ops has other members");

static_assert(VFIO_IOMMU == ZP_VFIO_IOMMU, "vfio_group_type");
static_assert(VFIO_EMULATED_IOMMU == ZP_VFIO_EMULATED_IOMMU, "vfio_group_type");
static_assert(VFIO_NO_IOMMU == ZP_VFIO_NO_IOMMU, "vfio_group_type");

/* The exported entry points take the kernel's struct under our name. */
static_assert(__same_type(&vfio_register_iommu_driver,
			  int (*)(const THEIRS *)), "vfio_register_iommu_driver");
static_assert(__same_type(&vfio_unregister_iommu_driver,
			  void (*)(const THEIRS *)), "vfio_unregister_iommu_driver");

#ifdef ZP_VFIO_HAS_DEVICE_FILE
/* A device file's private data: the device is its first member. */
static_assert(offsetof(struct vfio_device_file, device) ==
	      offsetof(struct zp_vfio_device_file, device), "vfio_device_file.device moved");
static_assert(__same_type(((struct vfio_device_file *)0)->device,
			  ((struct zp_vfio_device_file *)0)->device), "vfio_device_file.device");
#endif
