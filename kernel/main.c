// SPDX-License-Identifier: GPL-2.0
/*
 * main.c - module entry and exit for zeropin.ko, and /sys/kernel/zeropin.
 *
 * zeropin makes VFIO guest-RAM pinning cheap on stock distro kernels: a pool
 * of pages zeroed in idle time, a filesystem that serves guest RAM from it,
 * and a VFIO IOMMU backend that pins in large batches. This file only wires
 * the parts together; each lives in its own file.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/module.h>
#include <linux/kobject.h>
#include <linux/sysfs.h>

#include "compat.h"
#include "iommu.h"
#include "pool.h"
#include "run.h"
#include "zeropin.h"
#include "zfs.h"

struct kobject *zeropin_kobj;
static struct dentry *zeropin_debugfs;	/* /sys/kernel/debug/zeropin */

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%s\n", ZEROPIN_VERSION);
}
static struct kobj_attribute version_attr = __ATTR_RO(version);

static struct attribute *zeropin_attrs[] = {
	&version_attr.attr,
	NULL,
};

static const struct attribute_group zeropin_group = {
	.attrs = zeropin_attrs,
};

/*
 * Create /sys/kernel/zeropin with the module-wide attributes. Called once
 * from zeropin_init(); no locks needed, nothing else runs yet.
 */
static int zeropin_sysfs_init(void)
{
	int ret;

	zeropin_kobj = kobject_create_and_add("zeropin", kernel_kobj);
	if (!zeropin_kobj)
		return -ENOMEM;
	ret = sysfs_create_group(zeropin_kobj, &zeropin_group);
	if (ret)
		kobject_put(zeropin_kobj);
	return ret;
}

static void zeropin_sysfs_exit(void)
{
	sysfs_remove_group(zeropin_kobj, &zeropin_group);
	kobject_put(zeropin_kobj);
}

/*
 * The parts come up in dependency order, and the filesystem last: once it
 * is registered, a mount can take a reference on the module, and a mount
 * must never outlive a load that failed afterwards. Exit is the mirror.
 */
static int __init zeropin_init(void)
{
	int ret;

	ret = zeropin_sysfs_init();
	if (ret)
		goto err;
	zeropin_debugfs = debugfs_create_dir("zeropin", NULL);
	zp_run_init();		/* before the pool, which builds runs */
	ret = zp_pool_init(zeropin_kobj, zeropin_debugfs);
	if (ret)
		goto err_sysfs;
	ret = zp_iommu_init(zeropin_debugfs);
	if (ret)
		goto err_pool;
	ret = zp_zfs_init();
	if (ret)
		goto err_iommu;
	pr_info("version %s loaded\n", ZEROPIN_VERSION);
	return 0;

err_iommu:
	zp_iommu_exit();
err_pool:
	zp_pool_exit();
err_sysfs:
	debugfs_remove(zeropin_debugfs);
	zeropin_sysfs_exit();
err:
	pr_err("load failed: %d\n", ret);
	return ret;
}

static void __exit zeropin_exit(void)
{
	zp_zfs_exit();
	zp_iommu_exit();
	zp_pool_exit();
	debugfs_remove(zeropin_debugfs);
	zeropin_sysfs_exit();
	pr_info("unloaded\n");
}

module_init(zeropin_init);
module_exit(zeropin_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("zeropin developers");
MODULE_DESCRIPTION("Fast VFIO guest-RAM pinning: pre-zeroed pool, zeropinfs, batched IOMMU backend");
MODULE_VERSION(ZEROPIN_VERSION);
