// SPDX-License-Identifier: GPL-2.0
/*
 * iommu.c - zeropin's VFIO IOMMU backend: containers, groups, IOMMU
 * domains and the type1v2 ioctls.
 *
 * zeropin registers with VFIO's container layer beside stock
 * vfio_iommu_type1 and, with claim_type1v2=1, answers VFIO_TYPE1v2_IOMMU:
 * QEMU, libvirt and Kata keep speaking type1v2 and get zeropin's batched,
 * folio-aware pinning (pin.c, dma.c). The container tries the newest
 * registered driver first and moves on when open or group attach fails,
 * so zeropin declines what it does not serve and stock type1 takes it:
 *  - VFIO_TYPE1_IOMMU (v1) containers, and everything with claim_type1v2=0;
 *  - groups without a real IOMMU (mdev's emulated groups; no-IOMMU mode
 *    never reaches us). A container that already runs on zeropin refuses
 *    such a group later (-EINVAL); open them in a container of their own.
 *  - dirty-page tracking for migration (VFIO_IOMMU_DIRTY_PAGES, the
 *    migration capability, GET_DIRTY_BITMAP) and VFIO_UPDATE_VADDR are
 *    not served: hosts that migrate VMs with VFIO devices load zeropin
 *    with claim_type1v2=0.
 * zeropin loads vfio_iommu_type1 first, so that it registers after it and
 * is asked first.
 *
 * Locking: each container has one mutex (zp_container.lock) held across
 * every ioctl, attach and detach, including pinning and IOMMU calls.
 * VFIO's container layer serialises attach/detach/release against ioctls
 * with its own group_lock on top.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": iommu: " fmt

#include <linux/debugfs.h>
#include <linux/iommu.h>
#include <linux/kmod.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vfio.h>

#include "compat.h"
#include "iommu.h"

static bool claim_type1v2 = true;
module_param(claim_type1v2, bool, 0644);
MODULE_PARM_DESC(claim_type1v2,
	"Serve VFIO_TYPE1v2_IOMMU containers whose groups sit behind a real IOMMU; "
	"0 leaves every container to stock vfio_iommu_type1 (needed for migration "
	"with dirty-page tracking). Affects containers set up afterwards [DEFAULT: 1]");

static bool allow_unsafe_interrupts;
module_param(allow_unsafe_interrupts, bool, 0644);
MODULE_PARM_DESC(allow_unsafe_interrupts,
	"Accept groups whose MSIs are not isolated by interrupt remapping, as "
	"vfio_iommu_type1's parameter of the same name [DEFAULT: 0]");

static unsigned int dma_entry_limit = U16_MAX;
module_param(dma_entry_limit, uint, 0644);
MODULE_PARM_DESC(dma_entry_limit,
	"Most DMA mappings per container, as vfio_iommu_type1's parameter "
	"of the same name; a new container takes the value [DEFAULT: 65535]");

static bool share_domains = true;
module_param(share_domains, bool, 0644);
MODULE_PARM_DESC(share_domains,
	"Put a container's groups behind the same IOMMU into one IOMMU domain, as "
	"type1 does; 0 gives each group its own domain, every mapping written "
	"into each (for testing the replay path) [DEFAULT: 1]");

struct zp_iommu_stats zp_iommu_stats;

/* --- usable IOVA ranges: every domain's aperture minus reserved regions ---
 * Everything here runs under zp_container.lock. */

/* Remove [start, last] from the sorted ranges in r (room for one more). */
static unsigned int zp_ranges_cut(struct zp_iova_range *r, unsigned int nr,
				  u64 start, u64 last)
{
	struct zp_iova_range keep;
	unsigned int i, j;

	for (i = 0; i < nr; i++) {
		if (last < r[i].start || start > r[i].last)
			continue;
		keep = r[i];
		if (keep.start < start && keep.last > last) {
			/* split in two */
			memmove(&r[i + 1], &r[i], (nr - i) * sizeof(*r));
			r[i].last = start - 1;
			r[i + 1].start = last + 1;
			return nr + 1;
		}
		if (keep.start < start) {
			r[i].last = start - 1;
		} else if (keep.last > last) {
			r[i].start = last + 1;
		} else {	/* covered: drop it */
			for (j = i; j + 1 < nr; j++)
				r[j] = r[j + 1];
			nr--;
			i--;
		}
	}
	return nr;
}

/* Append every group's reserved regions (of the container and one new group). */
static int zp_collect_resv(struct zp_container *c, struct iommu_group *extra,
			   struct list_head *resv)
{
	struct zp_domain *d;
	struct zp_group *g;
	int ret;

	list_for_each_entry(d, &c->domains, node) {
		list_for_each_entry(g, &d->groups, node) {
			ret = iommu_get_group_resv_regions(g->group, resv);
			if (ret)
				return ret;
		}
	}
	return extra ? iommu_get_group_resv_regions(extra, resv) : 0;
}

static void zp_free_resv(struct list_head *resv)
{
	struct iommu_resv_region *r, *tmp;

	list_for_each_entry_safe(r, tmp, resv, list) {
		list_del(&r->list);
		kfree(r);
	}
}

/*
 * Build the usable IOVA ranges of the container with new_domain and
 * new_group added (either may be NULL). Returns the count in *nr, or an
 * errno; -EINVAL when nothing is usable.
 */
static int zp_ranges_build(struct zp_container *c, struct iommu_domain *new_domain,
			   struct iommu_group *new_group, struct zp_iova_range **out,
			   unsigned int *nr)
{
	u64 start = 0, last = U64_MAX;
	struct iommu_resv_region *r;
	struct zp_iova_range *ranges;
	struct zp_domain *d;
	unsigned int n = 0;
	LIST_HEAD(resv);
	int ret;

	list_for_each_entry(d, &c->domains, node) {
		start = max_t(u64, start, d->domain->geometry.aperture_start);
		last = min_t(u64, last, d->domain->geometry.aperture_end);
	}
	if (new_domain) {
		start = max_t(u64, start, new_domain->geometry.aperture_start);
		last = min_t(u64, last, new_domain->geometry.aperture_end);
	}
	ret = zp_collect_resv(c, new_group, &resv);
	list_for_each_entry(r, &resv, list)
		n++;
	ranges = kcalloc(n + 1, sizeof(*ranges), GFP_KERNEL);
	if (!ret && !ranges)
		ret = -ENOMEM;
	if (!ret && start <= last) {
		ranges[0].start = start;
		ranges[0].last = last;
		n = 1;
		list_for_each_entry(r, &resv, list) {
			if (r->type == IOMMU_RESV_DIRECT_RELAXABLE || !r->length)
				continue;
			n = zp_ranges_cut(ranges, n, r->start, r->start + r->length - 1);
		}
		if (!n)
			ret = -EINVAL;
	} else if (!ret) {
		ret = -EINVAL;
	}
	zp_free_resv(&resv);
	if (ret) {
		kfree(ranges);
		return ret;
	}
	*out = ranges;
	*nr = n;
	return 0;
}

/* Install new ranges (after zp_ranges_build() and zp_dma_fit()). */
static void zp_ranges_set(struct zp_container *c, struct zp_iova_range *r,
			  unsigned int nr)
{
	kfree(c->ranges);
	c->ranges = r;
	c->nr_ranges = nr;
}

/* Recompute the ranges after a group left; keep the old on failure. */
static void zp_ranges_refresh(struct zp_container *c)
{
	struct zp_iova_range *r;
	unsigned int nr;

	if (list_empty(&c->domains)) {
		zp_ranges_set(c, NULL, 0);
	} else if (!zp_ranges_build(c, NULL, NULL, &r, &nr)) {
		zp_ranges_set(c, r, nr);
	}
}

/* --- domains and groups ---
 * Under zp_container.lock; the domain list also changes only under
 * revoke_lock (zp_dma_replay(), zp_detach_group()), which the MMIO
 * revocation callback takes to walk it. zp_release() needs no revoke_lock:
 * every watch is gone by then. */

/* Page sizes every domain supports; PAGE_SIZE at least, as type1. */
static void zp_update_pgsizes(struct zp_container *c)
{
	unsigned long bitmap = ULONG_MAX;
	struct zp_domain *d;

	list_for_each_entry(d, &c->domains, node)
		bitmap &= d->domain->pgsize_bitmap;
	if (bitmap & ~PAGE_MASK) {
		bitmap &= PAGE_MASK;
		bitmap |= PAGE_SIZE;
	}
	c->pgsize_bitmap = bitmap;
}

static struct zp_group *zp_find_group(struct zp_container *c,
				      struct iommu_group *group,
				      struct zp_domain **domain)
{
	struct zp_domain *d;
	struct zp_group *g;

	list_for_each_entry(d, &c->domains, node) {
		list_for_each_entry(g, &d->groups, node) {
			if (g->group == group) {
				if (domain)
					*domain = d;
				return g;
			}
		}
	}
	return NULL;
}

static int zp_domain_alloc_cb(struct device *dev, void *data)
{
	struct iommu_domain **domain = data;

	*domain = zp_iommu_domain_alloc(dev);
	return 1;	/* one device is enough: stop iterating */
}

/* A new domain with group attached, or ERR_PTR. */
static struct zp_domain *zp_domain_create(struct iommu_group *group)
{
	struct iommu_domain *domain = ERR_PTR(-ENODEV);
	struct zp_domain *d;
	int ret;

	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return ERR_PTR(-ENOMEM);
	INIT_LIST_HEAD(&d->groups);
	iommu_group_for_each_dev(group, &domain, zp_domain_alloc_cb);
	if (IS_ERR(domain)) {
		ret = PTR_ERR(domain);
		goto err_free;
	}
	ret = iommu_attach_group(domain, group);
	if (ret)
		goto err_domain;
	d->domain = domain;
	if (domain->ops->enforce_cache_coherency)
		d->enforce_coherency = domain->ops->enforce_cache_coherency(domain);
	zp_stat_inc(domains);
	return d;

err_domain:
	iommu_domain_free(domain);
err_free:
	kfree(d);
	return ERR_PTR(ret);
}

static void zp_domain_destroy(struct zp_domain *d)
{
	iommu_domain_free(d->domain);
	zp_stat_dec(domains);
	kfree(d);
}

/*
 * The group is attached to the fresh domain new. If an existing domain is
 * of the same IOMMU and coherency, move the group there (one page table
 * to keep up to date instead of two). Returns that domain, or NULL.
 */
static struct zp_domain *zp_domain_share(struct zp_container *c,
					 struct zp_domain *new,
					 struct iommu_group *group)
{
	struct zp_domain *d;

	list_for_each_entry(d, &c->domains, node) {
		if (d->domain->ops != new->domain->ops ||
		    d->enforce_coherency != new->enforce_coherency)
			continue;
		iommu_detach_group(new->domain, group);
		if (!iommu_attach_group(d->domain, group))
			return d;
		if (iommu_attach_group(new->domain, group))
			return ERR_PTR(-EBUSY);
	}
	return NULL;
}

/* Software-managed MSI window (arm64 SMMU); x86 needs none. */
static int zp_domain_msi_cookie(struct zp_domain *d, struct iommu_group *group)
{
	struct iommu_resv_region *r;
	phys_addr_t base = 0;
	bool sw_msi = false;
	LIST_HEAD(resv);
	int ret;

	ret = iommu_get_group_resv_regions(group, &resv);
	list_for_each_entry(r, &resv, list) {
		if (r->type == IOMMU_RESV_MSI) {
			sw_msi = false;
			break;
		}
		if (r->type == IOMMU_RESV_SW_MSI) {
			base = r->start;
			sw_msi = true;
		}
	}
	zp_free_resv(&resv);
	if (!ret && sw_msi) {
		ret = iommu_get_msi_cookie(d->domain, base);
		if (ret == -ENODEV)
			ret = 0;
	}
	return ret;
}

/*
 * Give the new group's domain its place: share an existing domain, or
 * replay every mapping into the new one and add it. Takes ownership of
 * new (freed when shared or on failure, the group then detached). Caller
 * holds zp_container.lock; zp_dma_replay() lists the new domain under
 * revoke_lock before it writes the mappings into it, so a revocation
 * meanwhile reaches the new domain too (and unlists it on failure).
 */
static int zp_domain_place(struct zp_container *c, struct zp_domain *new,
			   struct zp_group *g)
{
	struct zp_domain *d = NULL;
	int ret;

	if (READ_ONCE(share_domains))
		d = zp_domain_share(c, new, g->group);

	if (IS_ERR(d)) {
		zp_domain_destroy(new);
		return PTR_ERR(d);
	}
	if (d) {
		list_add(&g->node, &d->groups);
		zp_domain_destroy(new);
		return 0;
	}
	ret = zp_domain_msi_cookie(new, g->group);
	if (ret)
		goto err;
	ret = zp_dma_replay(c, new);
	if (ret)
		goto err;
	list_add(&g->node, &new->groups);
	zp_update_pgsizes(c);
	return 0;
err:
	iommu_detach_group(new->domain, g->group);
	zp_domain_destroy(new);
	return ret;
}

/*
 * zeropin failing to set up (no memory, an IOMMU error) is silent in
 * VFIO_SET_IOMMU: VFIO asks its next driver, stock type1, and the VM runs
 * slower with no error anywhere. Count it and say so, so an operator can
 * tell. (Adding a group to a container that has a driver fails instead.)
 * Deliberate declines (mdev groups, MSIs not isolated, mappings outside
 * the group's IOVA ranges) are not failures and are not counted.
 * Takes no lock: called from zp_open() and zp_attach_group(), with or
 * without zp_container.lock held; returns ret for the caller to pass on.
 */
static int zp_setup_failed(struct iommu_group *group, int ret)
{
	zp_stat_inc(setup_failures);
	if (group)
		pr_warn_ratelimited("group %d: attach failed (%d); VFIO_SET_IOMMU goes on to its next driver (type1), adding a group to a container fails\n",
				    iommu_group_id(group), ret);
	else
		pr_warn_ratelimited("container: no memory; VFIO_SET_IOMMU goes on to its next driver (type1)\n");
	return ret;
}

/* A group joins (VFIO_SET_IOMMU, or a group added later). Takes
 * zp_container.lock; on failure nothing of the group stays attached. */
static int zp_attach_group(void *data, struct iommu_group *group,
			   enum zp_vfio_group_type type)
{
	struct zp_container *c = data;
	struct zp_iova_range *ranges;
	struct zp_domain *new;
	struct zp_group *g;
	unsigned int nr;
	int ret;

	if (type != ZP_VFIO_IOMMU)
		return -EINVAL;	/* emulated (mdev) groups: stock type1 */
	if (!allow_unsafe_interrupts && !zp_group_msi_isolated(group)) {
		pr_warn_ratelimited("group %d: no interrupt remapping; set allow_unsafe_interrupts=1 to use it anyway\n",
				    iommu_group_id(group));
		return -EPERM;
	}
	g = kzalloc(sizeof(*g), GFP_KERNEL);
	if (!g)
		return zp_setup_failed(group, -ENOMEM);
	g->group = group;
	mutex_lock(&c->lock);
	ret = -EINVAL;
	if (zp_find_group(c, group, NULL))
		goto err_unlock;
	new = zp_domain_create(group);
	if (IS_ERR(new)) {
		ret = zp_setup_failed(group, PTR_ERR(new));
		goto err_unlock;
	}
	ret = zp_ranges_build(c, new->domain, group, &ranges, &nr);
	if (ret)
		zp_setup_failed(group, ret);
	else if (!zp_dma_fit(c, ranges, nr)) {
		kfree(ranges);
		ret = -EINVAL;	/* a mapping outside its ranges, as type1 */
	}
	if (ret) {
		iommu_detach_group(new->domain, group);
		zp_domain_destroy(new);
		goto err_unlock;
	}
	ret = zp_domain_place(c, new, g);
	if (ret) {
		kfree(ranges);
		zp_setup_failed(group, ret);
		goto err_unlock;
	}
	zp_ranges_set(c, ranges, nr);
	mutex_unlock(&c->lock);
	return 0;

err_unlock:
	mutex_unlock(&c->lock);
	kfree(g);
	return ret;
}

/*
 * A group leaves. When its domain has no group left the domain goes; when
 * no domain is left, no device can reach any mapping: all are removed and
 * unpinned, as type1 does. Takes zp_container.lock, and revoke_lock to
 * unlink the domain (only: freeing it may allocate, detaching did).
 */
static void zp_detach_group(void *data, struct iommu_group *group)
{
	struct zp_container *c = data;
	struct zp_domain *d;
	struct zp_group *g;

	mutex_lock(&c->lock);
	g = zp_find_group(c, group, &d);
	if (WARN_ON(!g))
		goto out;
	iommu_detach_group(d->domain, group);
	list_del(&g->node);
	kfree(g);
	if (list_empty(&d->groups)) {
		if (list_is_singular(&c->domains))
			zp_dma_remove_all(c);
		mutex_lock(&c->revoke_lock);
		list_del(&d->node);
		mutex_unlock(&c->revoke_lock);
		zp_domain_destroy(d);
		zp_update_pgsizes(c);
	}
	zp_ranges_refresh(c);
out:
	mutex_unlock(&c->lock);
}

/* --- the container --- */

static void *zp_open(unsigned long arg)
{
	struct zp_container *c;

	if (arg != VFIO_TYPE1v2_IOMMU || !READ_ONCE(claim_type1v2))
		return ERR_PTR(-EINVAL);
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return ERR_PTR(zp_setup_failed(NULL, -ENOMEM));
	mutex_init(&c->lock);
	mutex_init(&c->revoke_lock);
	atomic_set(&c->revoke_waiters, 0);
	INIT_LIST_HEAD(&c->domains);
	c->dmas = RB_ROOT;
	c->pgsize_bitmap = PAGE_MASK;
	c->dma_avail = READ_ONCE(dma_entry_limit);
	zp_stat_inc(containers);
	return c;
}

/* The container goes: every mapping (and with them every watch), then
 * every domain and group. Takes zp_container.lock; with no watch left the
 * revocation callback cannot run, so the domains go without revoke_lock. */
static void zp_release(void *data)
{
	struct zp_container *c = data;
	struct zp_domain *d, *dtmp;
	struct zp_group *g, *gtmp;

	mutex_lock(&c->lock);
	zp_dma_remove_all(c);
	list_for_each_entry_safe(d, dtmp, &c->domains, node) {
		list_for_each_entry_safe(g, gtmp, &d->groups, node) {
			iommu_detach_group(d->domain, g->group);
			list_del(&g->node);
			kfree(g);
		}
		list_del(&d->node);
		zp_domain_destroy(d);
	}
	mutex_unlock(&c->lock);
	mutex_destroy(&c->revoke_lock);
	mutex_destroy(&c->lock);
	kfree(c->ranges);
	kfree(c);
	zp_stat_dec(containers);
}

static bool zp_all_coherent(struct zp_container *c)
{
	struct zp_domain *d;
	bool ret = !list_empty(&c->domains);

	mutex_lock(&c->lock);
	list_for_each_entry(d, &c->domains, node)
		ret &= d->enforce_coherency;
	mutex_unlock(&c->lock);
	return ret;
}

/* c is NULL when the container asks before any driver is set. */
static long zp_check_extension(struct zp_container *c, unsigned long ext)
{
	switch (ext) {
	case VFIO_TYPE1v2_IOMMU:
		return READ_ONCE(claim_type1v2) ? 1 : 0;
	case VFIO_UNMAP_ALL:
		return 1;
	case VFIO_DMA_CC_IOMMU:
		return c ? zp_all_coherent(c) : 0;
	default:	/* TYPE1 (v1), nesting, UPDATE_VADDR: not served */
		return 0;
	}
}

/* Append one capability to the GET_INFO chain. */
static int zp_info_cap(struct vfio_info_cap *caps, u16 id, const void *body,
		       size_t size)
{
	struct vfio_info_cap_header *h = vfio_info_cap_add(caps, size, id, 1);

	if (IS_ERR(h))
		return PTR_ERR(h);
	memcpy(h + 1, (const u8 *)body + sizeof(*h), size - sizeof(*h));
	return 0;
}

/* IOVA ranges and DMA-mappings-available; no migration capability.
 * Caller holds zp_container.lock. */
static int zp_info_caps(struct zp_container *c, struct vfio_info_cap *caps)
{
	struct vfio_iommu_type1_info_cap_iova_range *iovas;
	struct vfio_iommu_type1_info_dma_avail avail = { .avail = c->dma_avail };
	size_t size;
	unsigned int i;
	int ret;

	ret = zp_info_cap(caps, VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL, &avail, sizeof(avail));
	if (ret || !c->nr_ranges)
		return ret;
	size = struct_size(iovas, iova_ranges, c->nr_ranges);
	iovas = kzalloc(size, GFP_KERNEL);
	if (!iovas)
		return -ENOMEM;
	iovas->nr_iovas = c->nr_ranges;
	for (i = 0; i < c->nr_ranges; i++) {
		iovas->iova_ranges[i].start = c->ranges[i].start;
		iovas->iova_ranges[i].end = c->ranges[i].last;
	}
	ret = zp_info_cap(caps, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, iovas, size);
	kfree(iovas);
	return ret;
}

static long zp_get_info(struct zp_container *c, unsigned long arg)
{
	struct vfio_iommu_type1_info info = {};
	struct vfio_info_cap caps = {};
	unsigned long minsz = offsetofend(struct vfio_iommu_type1_info, iova_pgsizes);
	int ret;

	if (copy_from_user(&info, (void __user *)arg, minsz))
		return -EFAULT;
	if (info.argsz < minsz)
		return -EINVAL;
	minsz = min_t(size_t, info.argsz, sizeof(info));
	mutex_lock(&c->lock);
	info.flags = VFIO_IOMMU_INFO_PGSIZES;
	info.iova_pgsizes = c->pgsize_bitmap;
	ret = zp_info_caps(c, &caps);
	mutex_unlock(&c->lock);
	if (ret)
		goto out;
	if (caps.size) {
		info.flags |= VFIO_IOMMU_INFO_CAPS;
		if (info.argsz < sizeof(info) + caps.size) {
			info.argsz = sizeof(info) + caps.size;
		} else {
			vfio_info_cap_shift(&caps, sizeof(info));
			ret = copy_to_user((void __user *)arg + sizeof(info),
					   caps.buf, caps.size) ? -EFAULT : 0;
			info.cap_offset = sizeof(info);
		}
	}
	if (!ret && copy_to_user((void __user *)arg, &info, minsz))
		ret = -EFAULT;
out:
	kfree(caps.buf);
	return ret;
}

static long zp_ioctl_map(struct zp_container *c, unsigned long arg)
{
	unsigned long minsz = offsetofend(struct vfio_iommu_type1_dma_map, size);
	u32 mask = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
	struct vfio_iommu_type1_dma_map map;
	int ret;

	zp_stat_inc(map_ioctls);
	if (copy_from_user(&map, (void __user *)arg, minsz))
		return -EFAULT;
	if (map.argsz < minsz || map.flags & ~mask)
		return -EINVAL;
	mutex_lock(&c->lock);
	ret = zp_dma_map(c, &map);
	mutex_unlock(&c->lock);
	return ret;
}

static long zp_ioctl_unmap(struct zp_container *c, unsigned long arg)
{
	unsigned long minsz = offsetofend(struct vfio_iommu_type1_dma_unmap, size);
	struct vfio_iommu_type1_dma_unmap unmap;
	int ret;

	zp_stat_inc(unmap_ioctls);
	if (copy_from_user(&unmap, (void __user *)arg, minsz))
		return -EFAULT;
	if (unmap.argsz < minsz)
		return -EINVAL;
	mutex_lock(&c->lock);
	ret = zp_dma_unmap(c, &unmap);
	mutex_unlock(&c->lock);
	if (ret)
		return ret;
	return copy_to_user((void __user *)arg, &unmap, minsz) ? -EFAULT : 0;
}

static long zp_ioctl(void *data, unsigned int cmd, unsigned long arg)
{
	struct zp_container *c = data;

	switch (cmd) {
	case VFIO_CHECK_EXTENSION:
		return zp_check_extension(c, arg);
	case VFIO_IOMMU_GET_INFO:
		return zp_get_info(c, arg);
	case VFIO_IOMMU_MAP_DMA:
		return zp_ioctl_map(c, arg);
	case VFIO_IOMMU_UNMAP_DMA:
		return zp_ioctl_unmap(c, arg);
	case VFIO_IOMMU_DIRTY_PAGES:
		pr_warn_ratelimited("dirty-page tracking is not served; load zeropin with claim_type1v2=0 on hosts that migrate VFIO devices\n");
		return -EOPNOTSUPP;
	default:
		return -ENOTTY;
	}
}

static struct iommu_domain *zp_group_iommu_domain(void *data,
						  struct iommu_group *group)
{
	struct zp_container *c = data;
	struct iommu_domain *domain = ERR_PTR(-ENODEV);
	struct zp_domain *d;

	mutex_lock(&c->lock);
	if (zp_find_group(c, group, &d))
		domain = d->domain;
	mutex_unlock(&c->lock);
	return domain;
}

/* Only emulated (mdev) devices pin through the container; we have none. */
static void zp_unpin_pages(void *data, dma_addr_t iova, int npage)
{
	WARN_ONCE(1, "unpin_pages without pin_pages\n");
}

static const struct zp_vfio_iommu_driver_ops zp_vfio_ops = {
	.name			= "zeropin",
	.owner			= THIS_MODULE,
	.open			= zp_open,
	.release		= zp_release,
	.ioctl			= zp_ioctl,
	.attach_group		= zp_attach_group,
	.detach_group		= zp_detach_group,
	.unpin_pages		= zp_unpin_pages,
	.group_iommu_domain	= zp_group_iommu_domain,
};

static int zp_stats_show(struct seq_file *m, void *v)
{
	struct zp_iommu_stats *s = &zp_iommu_stats;

#define SHOW(f) seq_printf(m, "%-20s %lld\n", #f, (long long)atomic64_read(&s->f))
	SHOW(containers);
	SHOW(domains);
	SHOW(map_ioctls);
	SHOW(unmap_ioctls);
	SHOW(pages_pinned);
	SHOW(pages_pinned_total);
	SHOW(gup_calls);
	SHOW(runs);
	SHOW(iommu_map_calls);
	SHOW(iommu_unmap_calls);
	SHOW(entries_4k);
	SHOW(entries_2m);
	SHOW(entries_1g);
	SHOW(pfnmap_lookups);
	SHOW(bar_runs);
	SHOW(mmio_pages);
	SHOW(mmio_revoked);
	SHOW(setup_failures);
#undef SHOW
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(zp_stats);

/*
 * Register after vfio_iommu_type1 (loaded here if it is not yet), so that
 * VFIO asks zeropin first and falls back to type1 for what zeropin
 * declines.
 */
int zp_iommu_init(struct dentry *debugfs_dir)
{
	int ret;

	request_module("vfio_iommu_type1");
	ret = vfio_register_iommu_driver(&zp_vfio_ops);
	if (ret)
		return ret;
	debugfs_create_file("iommu_counters", 0400, debugfs_dir, NULL, &zp_stats_fops);
	return 0;
}

void zp_iommu_exit(void)
{
	vfio_unregister_iommu_driver(&zp_vfio_ops);
}
