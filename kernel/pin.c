// SPDX-License-Identifier: GPL-2.0
/*
 * pin.c - pin a user address range for DMA and keep it as runs.
 *
 * Stock type1 walks a mapping one 4 KiB page at a time: it pins 512 pages
 * per GUP call, charges RLIMIT_MEMLOCK per contiguous chunk, and on unmap
 * looks up and unpins every page alone. Here a range is taken in the
 * largest pieces its memory allows, cheapest first:
 *
 *  1. zeropinfs (shared mapping): the folios come straight from the file's
 *     page cache, created from the pool if missing, without GUP and
 *     without faulting anything in (zp_zfs_pin_folios()). A block's range
 *     the file had to fill with 4 KiB pages goes to path 3, and path 1
 *     resumes after it.
 *  2. A whole large folio at a folio-aligned address (hugetlb; anonymous
 *     THP mapped by one PMD): one GUP pin of its first page holds the
 *     folio; the checks in zp_folio_whole() show that the address maps the
 *     whole folio, so no per-page GUP result is needed.
 *  3. Anything else: pin_user_pages_fast() over ZP_GUP_BATCH pages, folded
 *     into physically contiguous runs.
 *  4. Where GUP refuses a PFNMAP range (a device BAR mapped for
 *     peer-to-peer), its pfns are recorded; nothing is held or charged (as
 *     type1), and dma.c watches the range so the IOMMU stops reaching it
 *     when the user's mapping goes away. A vfio-pci BAR mmap is one run
 *     computed from the BAR (zp_vfio_bar_pfn()): a 64 GiB BAR costs what
 *     a 4 KiB one does, with nothing faulted in. Any other PFNMAP is
 *     looked up page by page, a whole huge leaf at a time.
 *
 * Path 1 holds each folio by a plain reference (ZP_RUN_FOLIO_REFS), not a
 * FOLL_PIN: a GUP pin's only other effect is folio_maybe_dma_pinned(),
 * which the kernel consults for anonymous memory (fork's copy, swap-out,
 * UFFDIO_MOVE), for COW mappings (NUMA hinting) and in reclaim; a
 * zeropinfs folio is none of these: shared file memory, unevictable, never
 * on a COW path. What keeps DMA safe is that the folio can neither move
 * nor be freed while the reference exists: migration and splitting freeze
 * the refcount at what they expect and fail on any extra reference, and
 * truncation only takes the folio out of the page cache, leaving it alive
 * until the last reference goes (zeropinfs' own held reference is the
 * same kind). The price is only statistics: /proc/vmstat's
 * nr_foll_pin_* do not count these, iommu_counters' pages_pinned does.
 *
 * Runs remember how their pages are held (enum zp_run_kind) and are let go
 * the same way, a folio at a time. RLIMIT_MEMLOCK is charged ahead in
 * ZP_GUP_BATCH credits, so the mm's mmap_lock is taken once per batch and
 * not once per folio.
 *
 * Accounting follows type1: pages are charged to the mapping task's mm
 * (locked_vm) against its RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, and
 * the charge is given back when the mapping goes, even from another task.
 * While a map is in progress up to ZP_GUP_BATCH pages of credit are
 * charged beyond what is pinned; near the limit the charge is exact.
 *
 * Locking: pin.c has no lock of its own; a zp_pinned belongs to one caller
 * (dma.c, under its container lock, never under revoke_lock). The charge
 * takes the mm's mmap_lock for writing, so it is never made with the
 * mmap_lock held: path 1 charges before it takes the lock for reading.
 * Paths 1 and 4 hold the mmap_lock for reading while they walk; paths 2
 * and 3 are pin_user_pages_fast(), which takes it only on its slow path.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": pin: " fmt

#include <linux/file.h>
#include <linux/hugetlb.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>

#include "compat.h"
#include "iommu.h"
#include "park.h"
#include "pin.h"
#include "zfs.h"

/*
 * Pages per pin_user_pages_fast() call, and per RLIMIT_MEMLOCK charge:
 * 64 MiB of 4 KiB pages. Large enough that the per-call cost (interrupts
 * off, the long-term pin check, the mmap_lock for the charge) vanishes
 * next to the pages; small enough that the page array stays at 128 KiB
 * and a fatal signal is seen within one batch.
 */
#define ZP_GUP_BATCH	16384

/*
 * Pages let go of between reschedule points: a run may be gigabytes long,
 * and its release must not hold the CPU for all of it. 4 KiB pages are
 * unpinned one by one: 2 MiB of them keep a call in the microseconds. A
 * large folio is one unpin: 1 GiB of them (512 folio_put()s of 2 MiB
 * folios) is as short, and a reschedule point per folio cost 10 % of a
 * 4 GiB unmap in the lab.
 */
#define ZP_UNPIN_BATCH		512
#define ZP_RELEASE_BATCH	(1UL << (30 - PAGE_SHIFT))

/* A large folio is tried whole only at an address aligned to this (the
 * smallest huge page, a PMD); other addresses go through GUP batches. */
#define ZP_FOLIO_ALIGN	PMD_SIZE

/* One zp_pin_user() call's state, passed down its paths. */
struct zp_pin_walk {
	struct zp_pinned *p;		/* where the runs go */
	unsigned int gup_flags;		/* FOLL_LONGTERM, FOLL_WRITE */
	bool write;			/* the device may write */
	bool mmio_ok;			/* PFNMAP ranges may be recorded */
	bool try_file;			/* still worth asking zeropinfs */
	unsigned long gup_calls;	/* GUP calls made, for the counters */
	unsigned long pfnmap_lookups;	/* PFNMAP page-table lookups, likewise */
	struct page **pages;		/* GUP batch array, ZP_GUP_BATCH long;
					 * allocated on first use: ranges of
					 * large folios never need it */
	unsigned long npages;		/* pages in the whole range */
	struct zp_zfs_hand hand;	/* a run zeropinfs filed for this pin,
					 * its blocks not taken yet */
};

void zp_pinned_init(struct zp_pinned *p)
{
	INIT_LIST_HEAD(&p->chunks);
	p->npages = 0;
	p->mmio_pages = 0;
	p->nruns = 0;
	p->locked = 0;
	p->credit = 0;
	p->task = get_task_struct(current->group_leader);
	p->lock_cap = capable(CAP_IPC_LOCK);
	p->mmio_foreign = false;
	p->mmio_unheld = false;
	p->nr_bar_files = 0;
	p->mm = current->mm;
	mmgrab(p->mm);
}

/*
 * Charge (npages > 0) or uncharge (< 0) the mapping's mm. Takes the mm's
 * mmap_lock for writing, as __account_locked_vm() wants; a charge gives up
 * on a fatal signal, an uncharge never does (the mm may outlive us). When
 * the mm is already gone (its tasks exited) there is nothing to uncharge.
 */
static int zp_account(struct zp_pinned *p, long npages)
{
	int ret = 0;

	if (!npages)
		return 0;
	if (!mmget_not_zero(p->mm)) {
		if (npages > 0)
			return -ESRCH;
		p->locked += npages;
		return 0;
	}
	if (npages > 0)
		ret = mmap_write_lock_killable(p->mm);
	else
		mmap_write_lock(p->mm);
	if (!ret) {
		ret = __account_locked_vm(p->mm, abs(npages), npages > 0,
					  p->task, p->lock_cap);
		mmap_write_unlock(p->mm);
	}
	mmput(p->mm);
	if (!ret)
		p->locked += npages;
	return ret;
}

/*
 * Charge n pages that are about to be pinned: from credit as far as it
 * goes, and the shortfall by charging a new batch of credit (or exactly
 * the shortfall when a whole batch would cross the limit), so a charge
 * fails only when the pages themselves do not fit. -ENOMEM over
 * RLIMIT_MEMLOCK.
 */
static int zp_charge(struct zp_pinned *p, unsigned long n)
{
	unsigned long need, want;
	int ret;

	if (p->credit < n) {
		need = n - p->credit;
		want = max_t(unsigned long, need, ZP_GUP_BATCH);
		ret = zp_account(p, want);
		if (ret == -ENOMEM && want > need) {
			want = need;
			ret = zp_account(p, want);
		}
		if (ret)
			return ret;
		p->credit += want;
	}
	p->credit -= n;
	return 0;
}

/* Give back charged pages that were not pinned after all. */
static void zp_uncharge(struct zp_pinned *p, unsigned long n)
{
	p->credit += n;
}

static void zp_return_credit(struct zp_pinned *p)
{
	zp_account(p, -(long)p->credit);
	p->credit = 0;
}

/* Append pfn..pfn+n to the runs, merging with the last run when it is of
 * the same kind and ends where this one starts. -ENOMEM when a new chunk
 * cannot be had. */
static int zp_runs_append(struct zp_pinned *p, unsigned long pfn, unsigned long n,
			  enum zp_run_kind kind)
{
	struct zp_run_chunk *c = list_empty(&p->chunks) ? NULL :
		list_last_entry(&p->chunks, struct zp_run_chunk, node);
	struct zp_run *last = c && c->nr ? &c->run[c->nr - 1] : NULL;

	if (last && last->kind == kind && last->pfn + last->npages == pfn) {
		last->npages += n;
	} else {
		if (!c || c->nr == ZP_RUNS_PER_CHUNK) {
			c = kmalloc(ZP_RUN_CHUNK_BYTES, GFP_KERNEL_ACCOUNT);
			if (!c)
				return -ENOMEM;
			c->nr = 0;
			list_add_tail(&c->node, &p->chunks);
		}
		c->run[c->nr].pfn = pfn;
		c->run[c->nr].npages = n;
		c->run[c->nr].kind = kind;
		c->nr++;
		p->nruns++;
	}
	p->npages += n;
	if (kind == ZP_RUN_MMIO)
		p->mmio_pages += n;
	return 0;
}

/* Let go of one run's pages, the way they were taken. Returns whether a
 * zeropinfs block among them had left its file (park.c holds it). */
static bool zp_run_release(const struct zp_run *run, bool dirty)
{
	unsigned long pfn = run->pfn, end = run->pfn + run->npages, nr, since = 0;
	struct folio *folio;
	struct page *head;
	bool orphan = false;

	if (run->kind == ZP_RUN_MMIO)
		return false;
	if (run->kind == ZP_RUN_PAGE_PINS) {
		for (; pfn < end; pfn += nr) {
			nr = min(end - pfn, ZP_UNPIN_BATCH);
			unpin_user_page_range_dirty_lock(pfn_to_page(pfn), nr, dirty);
			cond_resched();
		}
		return false;
	}
	for (; pfn < end; pfn += nr) {
		folio = page_folio(pfn_to_page(pfn));
		nr = folio_nr_pages(folio);	/* before the folio may be freed */
		head = &folio->page;
		if (run->kind == ZP_RUN_FOLIO_PINS) {
			unpin_user_pages_dirty_lock(&head, 1, dirty);
		} else {
			orphan |= !READ_ONCE(folio->mapping);
			folio_put(folio);
		}
		since += nr;
		if (since >= ZP_RELEASE_BATCH) {
			since = 0;
			cond_resched();
		}
	}
	return orphan;
}

bool zp_pinned_mmio_held(const struct zp_pinned *p)
{
	return !p->mmio_unheld;	/* no MMIO at all: nothing to keep */
}

/* fput() of what may be the device's last reference defers the release
 * (task work, or delayed_fput in a kthread): the caller holds its
 * container lock, which releasing a device's group would take. Never
 * __fput_sync() here. */
void zp_pinned_put_files(struct zp_pinned *p)
{
	while (p->nr_bar_files)
		fput(p->bar_files[--p->nr_bar_files]);
}

/* Hold the device file of a BAR run just recorded, once per file; a run
 * whose file finds no room is marked unheld. Caller holds the mmap lock
 * for reading, so the vma still holds file while get_file() takes it. */
static void zp_pinned_hold_file(struct zp_pinned *p, struct file *file)
{
	unsigned int i;

	for (i = 0; i < p->nr_bar_files; i++)
		if (p->bar_files[i] == file)
			return;
	if (p->nr_bar_files == ZP_PIN_BAR_FILES)
		p->mmio_unheld = true;
	else
		p->bar_files[p->nr_bar_files++] = get_file(file);
}

/*
 * Let go of every run and give the charge back. The IOMMU must no longer
 * map any of them.
 */
static void zp_pinned_release_runs(struct zp_pinned *p, bool dirty)
{
	struct zp_run_chunk *c, *tmp;
	bool orphan = false;
	unsigned int i;

	list_for_each_entry_safe(c, tmp, &p->chunks, node) {
		for (i = 0; i < c->nr; i++)
			orphan |= zp_run_release(&c->run[i], dirty);
		list_del(&c->node);
		kfree(c);
		cond_resched();
	}
	zp_stat_add(pages_pinned, -(long)(p->npages - p->mmio_pages));
	if (orphan)
		zp_park_kick();	/* a block out of its file may be free to go now */
	zp_pinned_put_files(p);
	p->mmio_unheld = false;
	p->npages = 0;
	p->mmio_pages = 0;
	p->nruns = 0;
	p->credit = 0;
	zp_account(p, -(long)p->locked);
}

void zp_pinned_release(struct zp_pinned *p, bool dirty)
{
	zp_pinned_release_runs(p, dirty);
	put_task_struct(p->task);
	mmdrop(p->mm);
}

/* --- 1. zeropinfs folios straight from the file --- */

/* zp_zfs_pin_folios() callback: record one referenced folio (charged
 * ahead by zp_pin_file(): charging takes the mmap_lock it holds). */
static int zp_take_file_folio(void *arg, struct folio *folio)
{
	return zp_runs_append(arg, folio_pfn(folio), folio_nr_pages(folio),
			      ZP_RUN_FOLIO_REFS);
}

/* Whether addr lies in a shared zeropinfs mapping path 1 can take from;
 * when it lies inside one of its blocks instead, *head is set to the pages
 * up to that block's end (for the other paths), else to 0. */
static bool zp_file_at(unsigned long addr, bool write, unsigned long *head)
{
	struct vm_area_struct *vma;
	bool ret;

	*head = 0;
	if (mmap_read_lock_killable(current->mm))
		return false;
	vma = vma_lookup(current->mm, addr);
	ret = vma && zp_zfs_vma_pinnable(vma, addr, write);
	if (vma && !ret)
		*head = zp_zfs_pages_to_block(vma, addr, write);
	mmap_read_unlock(current->mm);
	return ret;
}

/*
 * Up to a batch of pages at addr taken from a zeropinfs file; 0 if addr
 * is not in such a mapping, or (*head pages, see zp_file_at()) inside one
 * of its blocks or at a block's range the file holds in 4 KiB pages (a
 * fragmented host, see zfs_add_page()). The batch is charged before the mmap_lock is taken
 * (charging needs it for writing) and what was not taken is given back;
 * other memory is not charged here at all. A run the file filed for the
 * pin stays in w->hand from one batch to the next.
 */
static long zp_pin_file(struct zp_pin_walk *w, unsigned long addr,
			unsigned long npages, bool write, unsigned long *head)
{
	struct zp_pinned *p = w->p;
	unsigned long n = min_t(unsigned long, npages, ZP_GUP_BATCH);
	unsigned long before = p->npages;
	struct vm_area_struct *vma;
	long ret;

	if (!zp_file_at(addr, write, head))
		return 0;
	ret = zp_charge(p, n);
	if (ret)
		return ret;
	if (mmap_read_lock_killable(current->mm)) {
		zp_uncharge(p, n);
		return -EINTR;
	}
	vma = vma_lookup(current->mm, addr);
	ret = vma ? zp_zfs_pin_folios(vma, addr, n, write, zp_take_file_folio, p, head,
				      &w->hand) : 0;
	mmap_read_unlock(current->mm);
	zp_uncharge(p, n - (p->npages - before));
	return ret;
}

/* --- 2. one pin for a whole large folio --- */

/*
 * Whether pinning page (mapped at a ZP_FOLIO_ALIGN-aligned address) holds
 * a whole folio that the address range maps from its first page on:
 *  - hugetlb folios are only ever mapped whole;
 *  - an anonymous THP must be mapped exactly once, by one PMD and no PTE.
 *    The pin made it exclusive to this mm (FOLL_PIN unshares), so that
 *    one PMD is the one at our address. A later change of the user's
 *    mapping is the user's business, as with type1's per-page pins.
 */
static bool zp_folio_whole(struct folio *folio, struct page *page,
			   unsigned long npages)
{
	if (&folio->page != page || !folio_test_large(folio) ||
	    folio_nr_pages(folio) > npages)
		return false;
	if (folio_test_hugetlb(folio))
		return true;
	return folio_test_anon(folio) && zp_folio_pmd_mapped_once(folio);
}

/* Pages held by one pin of a whole folio at addr; 0 when not applicable. */
static long zp_pin_folio(struct zp_pinned *p, unsigned long addr,
			 unsigned long npages, unsigned int gup_flags,
			 unsigned long *gup_calls)
{
	struct folio *folio;
	struct page *page;
	unsigned long n;
	int ret;

	if (!IS_ALIGNED(addr, ZP_FOLIO_ALIGN) || npages < ZP_FOLIO_ALIGN / PAGE_SIZE)
		return 0;
	ret = pin_user_pages_fast(addr, 1, gup_flags, &page);
	(*gup_calls)++;
	if (ret != 1)
		return 0;	/* the batch path reports the error */
	folio = page_folio(page);
	n = folio_nr_pages(folio);
	if (!zp_folio_whole(folio, page, npages)) {
		unpin_user_page(page);
		return 0;
	}
	ret = zp_charge(p, n);
	if (!ret) {
		ret = zp_runs_append(p, folio_pfn(folio), n, ZP_RUN_FOLIO_PINS);
		if (ret)
			zp_uncharge(p, n);
	}
	if (ret) {
		unpin_user_page(page);
		return ret;
	}
	return n;
}

/* --- 4. PFNMAP ranges (path 3 hands them over) --- */

/*
 * The pfn at addr of a vfio-pci BAR mmap, and the pages from there to the
 * vma's end (all inside that BAR), without faulting the vma in or walking
 * its page tables: type1 and the walk below visit every PTE of a BAR, and
 * 6.1's vfio-pci fills all of them at the first fault (8 M PTEs for a
 * 32 GiB BAR). The vma is vfio-pci's when its file is a VFIO device file
 * whose device mmaps with vfio_pci_core_mmap() (a variant driver with its
 * own mmap, nvgrace-gpu's say, takes the walk), and its private data is
 * that device, as vfio_pci_core_mmap() sets it. Returns that device, or
 * NULL when vma is no such mapping. Caller holds the mmap lock for
 * reading: the vma stays, and with its file the device and its BARs.
 */
static struct vfio_pci_core_device *
zp_vfio_bar_pfn(struct vm_area_struct *vma, unsigned long addr, unsigned long *pfn,
		unsigned long *pages)
{
	int (*core_mmap)(struct vfio_device *vdev, struct vm_area_struct *vma);
	struct vfio_pci_core_device *vdev;
	struct vfio_device *device;
	unsigned long offset, bar_pages;
	unsigned int index;
	bool ours;

	device = zp_vfio_file_device(vma->vm_file);
	if (!device)
		return NULL;
	core_mmap = symbol_get(vfio_pci_core_mmap);
	ours = core_mmap && device->ops->mmap == core_mmap;
	if (core_mmap)
		symbol_put(vfio_pci_core_mmap);
	if (!ours)
		return NULL;
	vdev = container_of(device, struct vfio_pci_core_device, vdev);
	if (vma->vm_private_data != vdev ||
	    zp_vfio_pci_vma_bar(vma, vdev->pdev, &index, &offset) ||
	    !vdev->bar_mmap_supported[index] || !vdev->barmap[index] ||
	    !(pci_resource_flags(vdev->pdev, index) & IORESOURCE_MEM))
		return NULL;
	offset += (addr - vma->vm_start) >> PAGE_SHIFT;
	bar_pages = PFN_UP(pci_resource_len(vdev->pdev, index));
	*pages = (vma->vm_end - addr) >> PAGE_SHIFT;
	if (offset >= bar_pages || *pages > bar_pages - offset)
		return NULL;
	*pfn = (pci_resource_start(vdev->pdev, index) >> PAGE_SHIFT) + offset;
	return vdev;
}

/*
 * Whether vfio-pci would let a fault map this device's BARs now: memory
 * decode on (or a VF, whose decode is its PF's) and the device neither in
 * D3 nor in the low-power state the user can ask for. The same test as
 * vfio-pci's private __vfio_pci_memory_enabled() plus pm_runtime_engaged,
 * on both kernels. Caller holds vdev->memory_lock for reading, which
 * vfio-pci holds for writing while it changes either.
 */
static bool zp_vfio_pci_bar_accessible(struct vfio_pci_core_device *vdev)
{
	u16 cmd = le16_to_cpu(*(__le16 *)&vdev->vconfig[PCI_COMMAND]);

	return !vdev->pm_runtime_engaged && vdev->pdev->current_state < PCI_D3hot &&
	       (vdev->pdev->no_command_memory || (cmd & PCI_COMMAND_MEMORY));
}

/*
 * The BAR path: record a vfio-pci BAR mmap from addr on as one run.
 * Where vfio-pci has mapped addr already, its PTE must agree with the
 * computed pfn; if it ever does not, the walk takes over. Refused as type1
 * refuses it (type1 faults the BAR in, and vfio-pci's fault says no): a
 * mapping without the access asked for, a BAR whose memory decode is off
 * or whose device sleeps; the mapping stays if either happens later, as
 * it does with type1. Returns pages recorded, 0 when vma is no such
 * mapping (or disagrees), -EFAULT when refused. The device file is held
 * until the mapping is written (zp_pinned_hold_file()). Caller holds the
 * mmap lock for reading, and takes vdev->memory_lock under it, in the
 * order of vfio-pci's own fault handler.
 */
static long zp_pin_vfio_bar(struct zp_pin_walk *w, struct vm_area_struct *vma,
			    unsigned long addr, unsigned long npages)
{
	struct vfio_pci_core_device *vdev;
	unsigned long pfn, pages, mapped, n;
	bool accessible;
	int ret;

	vdev = zp_vfio_bar_pfn(vma, addr, &pfn, &pages);
	if (!vdev)
		return 0;
	if (!(vma->vm_flags & (w->write ? VM_WRITE : VM_READ)))
		return -EFAULT;
	down_read(&vdev->memory_lock);
	accessible = zp_vfio_pci_bar_accessible(vdev);
	up_read(&vdev->memory_lock);
	if (!accessible)
		return -EFAULT;
	if (!zp_follow_pfnmap(vma, addr, false, &mapped, &n) && mapped != pfn) {
		pr_warn_once("vfio-pci BAR at %#lx maps pfn %#lx, not %#lx: walking it\n",
			     addr, mapped, pfn);
		return 0;
	}
	if (pfn_valid(pfn) && !PageReserved(pfn_to_page(pfn)))
		return -EFAULT;	/* RAM, not a BAR: never without a pin */
	pages = min(pages, npages);
	ret = zp_runs_append(w->p, pfn, pages, ZP_RUN_MMIO);
	if (ret)
		return ret;
	zp_pinned_hold_file(w->p, vma->vm_file);
	zp_stat_inc(bar_runs);
	return pages;
}

/*
 * Record the pfns of the PFNMAP vma at addr up to the vma's end: a
 * vfio-pci BAR in one step (zp_pin_vfio_bar()), up to rest pages; anything
 * else up to npages, looking each page up and faulting them in where the
 * driver maps lazily. Only
 * memory without a struct page, or reserved, is taken, as type1 does.
 * Returns pages recorded, -ENOTBLK when the caller did not allow MMIO,
 * -EFAULT when addr is no PFNMAP or not writable as asked.
 */
static long zp_pin_pfnmap(struct zp_pin_walk *w, unsigned long addr, unsigned long npages,
			  unsigned long rest)
{
	struct mm_struct *mm = current->mm;
	unsigned long done = 0, pfn, n, a;
	struct vm_area_struct *vma;
	bool faulted = false, unlocked;
	long ret = 0;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
again:
	vma = vma_lookup(mm, addr + (done << PAGE_SHIFT));
	if (!vma || !(vma->vm_flags & VM_PFNMAP))
		ret = -EFAULT;
	else if (!w->mmio_ok)
		ret = -ENOTBLK;
	else if (!done && (ret = zp_pin_vfio_bar(w, vma, addr, rest)) > 0)
		done = ret;
	if (ret > 0)
		ret = 0;
	while (!ret && done < npages && (a = addr + (done << PAGE_SHIFT)) < vma->vm_end) {
		ret = zp_follow_pfnmap(vma, a, w->write, &pfn, &n);
		w->pfnmap_lookups++;
		if (ret == -ENOENT && !faulted) {
			unlocked = false;
			faulted = true;
			ret = fixup_user_fault(mm, a, w->write ? FAULT_FLAG_WRITE : 0, &unlocked);
			if (!ret && unlocked)
				goto again;	/* the lock was dropped: look again */
			continue;
		}
		if (!ret && pfn_valid(pfn) && !PageReserved(pfn_to_page(pfn)))
			ret = -EFAULT;
		if (ret)
			break;
		/* Only vfio-pci-core is known to fault the same pfns back in
		 * after a zap (reset, decode off), and its BARs took the path
		 * above: whatever is walked (another driver's PFNMAP, an mdev
		 * or a variant driver's mmap) may come back elsewhere, so a zap
		 * revokes it. */
		WRITE_ONCE(w->p->mmio_foreign, true);	/* before the run */
		w->p->mmio_unheld = true;
		n = min3(n, npages - done, (vma->vm_end - a) >> PAGE_SHIFT);
		ret = zp_runs_append(w->p, pfn, n, ZP_RUN_MMIO);
		done += ret ? 0 : n;
		faulted = false;
	}
	mmap_read_unlock(mm);
	if (ret == -ENOENT)
		ret = -EFAULT;
	return done ? done : ret;
}

/* --- 3. GUP batches --- */

/*
 * Fold a GUP result into runs. Returns how many of the pages now belong to
 * a run; on -ENOMEM the rest are still the caller's to unpin.
 */
static long zp_runs_add_pages(struct zp_pinned *p, struct page **pages, long nr)
{
	long i = 0, n;

	while (i < nr) {
		for (n = 1; i + n < nr; n++)
			if (pages[i + n] != zp_nth_page(pages[i], n))
				break;
		if (zp_runs_append(p, page_to_pfn(pages[i]), n, ZP_RUN_PAGE_PINS))
			break;
		i += n;
	}
	return i;
}


/*
 * Pages of a GUP result not to charge: reserved ones (the shared zero
 * page a read-only pin of untouched memory returns, among them), which
 * type1 does not charge either (is_invalid_reserved_pfn()).
 */
static long zp_count_reserved(struct page **pages, long nr)
{
	long i, n = 0;

	for (i = 0; i < nr; i++)
		n += PageReserved(pages[i]);
	return n;
}

/*
 * Pin one batch of nr pages at addr, of rest left in the range; returns
 * pages pinned and recorded, or -errno. Where GUP refuses the range
 * because it is PFNMAP, path 4 takes it: a vfio-pci BAR all of the rest
 * at once, anything else the batch.
 */
static long zp_pin_batch(struct zp_pin_walk *w, unsigned long addr, long nr,
			 unsigned long rest)
{
	struct zp_pinned *p = w->p;
	long got, used, charge;
	int ret;

	if (!w->pages) {
		w->pages = kvmalloc_array(min_t(unsigned long, w->npages, ZP_GUP_BATCH),
					  sizeof(*w->pages), GFP_KERNEL);
		if (!w->pages)
			return -ENOMEM;
	}
	got = pin_user_pages_fast(addr, nr, w->gup_flags, w->pages);
	w->gup_calls++;
	if (got == -EFAULT)
		return zp_pin_pfnmap(w, addr, nr, rest);
	if (got <= 0)
		return got ? got : -EFAULT;
	charge = got - zp_count_reserved(w->pages, got);
	ret = zp_charge(p, charge);
	used = ret ? 0 : zp_runs_add_pages(p, w->pages, got);
	if (used < got) {
		/* the whole pin fails: what was charged all comes back */
		unpin_user_pages(w->pages + used, got - used);
		if (!ret)
			zp_uncharge(p, charge);
		return ret ? ret : -ENOMEM;
	}
	return got;
}

/* Batch length at addr: up to ZP_GUP_BATCH, ending on a ZP_FOLIO_ALIGN
 * boundary where possible, so the whole-folio path can resume there. */
static long zp_batch_len(unsigned long addr, unsigned long npages)
{
	unsigned long end = addr + (min_t(unsigned long, npages, ZP_GUP_BATCH) << PAGE_SHIFT);
	unsigned long aligned = ALIGN_DOWN(end, ZP_FOLIO_ALIGN);

	if (aligned > addr)
		end = aligned;
	return (end - addr) >> PAGE_SHIFT;
}

/*
 * Pin the piece of the range starting at addr, by the cheapest path. A
 * range that starts inside a zeropinfs block (QEMU's RAM after the PAM
 * split starts at 1 MiB) has its head pinned by the other paths, and path
 * 1 takes over at the block boundary; so does a block's range in 4 KiB
 * pages.
 */
static long zp_pin_next(struct zp_pin_walk *w, unsigned long addr, unsigned long npages)
{
	unsigned long head = 0;
	long n = 0;

	if (w->try_file) {
		n = zp_pin_file(w, addr, npages, w->write, &head);
		/* once it stops outside a block's head, the rest is no zeropinfs */
		w->try_file = n > 0 || head;
		if (head)
			npages = min(npages, head);
	}
	/* no whole folio where the file path handed a head over */
	if (!n && !head)
		n = zp_pin_folio(w->p, addr, npages, w->gup_flags, &w->gup_calls);
	if (!n)
		n = zp_pin_batch(w, addr, zp_batch_len(addr, npages), npages);
	return n;
}

/*
 * Add what one zp_pin_user() call pinned to the global counters, once, not
 * per run: shared atomics stay out of the pin loop. Released runs come off
 * pages_pinned in zp_pinned_release_runs().
 */
static void zp_pin_publish(const struct zp_pinned *p, const struct zp_pin_walk *w)
{
	zp_stat_add(pages_pinned, p->npages - p->mmio_pages);
	zp_stat_add(pages_pinned_total, p->npages - p->mmio_pages);
	zp_stat_add(mmio_pages, p->mmio_pages);
	zp_stat_add(runs, p->nruns);
	zp_stat_add(gup_calls, w->gup_calls);
	zp_stat_add(pfnmap_lookups, w->pfnmap_lookups);
}

/*
 * Pages the mapping task may still lock: its RLIMIT_MEMLOCK less the mm's
 * locked_vm, read once, without the mmap_lock (all of them with
 * CAP_IPC_LOCK). A hint for zeropinfs' runs, which commit a whole GiB to
 * the mount and the memcg at a pin's first batch, where the pin charges
 * RLIMIT_MEMLOCK batch by batch: a pin that RLIMIT_MEMLOCK will stop
 * takes no run past where it must stop.
 */
static unsigned long zp_lock_room(const struct zp_pinned *p)
{
	unsigned long limit, locked;

	if (p->lock_cap)
		return ULONG_MAX;
	limit = task_rlimit(p->task, RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	locked = READ_ONCE(p->mm->locked_vm);
	return limit > locked ? limit - locked : 0;
}

int zp_pin_user(struct zp_pinned *p, unsigned long vaddr,
		unsigned long npages, bool write, bool mmio_ok)
{
	/* a run only inside the pin, and inside what RLIMIT_MEMLOCK lets it pin */
	unsigned long run_pages = min(npages, zp_lock_room(p));
	struct zp_pin_walk w = {
		.p = p,
		.gup_flags = FOLL_LONGTERM | (write ? FOLL_WRITE : 0),
		.write = write,
		.mmio_ok = mmio_ok,
		.try_file = true,
		.npages = npages,
		.hand = { .start = vaddr, .end = vaddr + (run_pages << PAGE_SHIFT) },
	};
	unsigned long done = 0;
	long got = 0;

	while (done < npages) {
		if (fatal_signal_pending(current)) {
			got = -EINTR;
			break;
		}
		got = zp_pin_next(&w, vaddr + (done << PAGE_SHIFT), npages - done);
		if (got < 0)
			break;
		done += got;
		cond_resched();
	}
	kvfree(w.pages);
	zp_zfs_hand_release(&w.hand);
	zp_return_credit(p);
	zp_pin_publish(p, &w);
	if (got >= 0)
		return 0;
	zp_pinned_release_runs(p, false);
	return got;
}
