// SPDX-License-Identifier: GPL-2.0
/*
 * pin.c - pin a user address range for DMA and keep it as runs.
 *
 * Stock type1 walks a mapping one 4 KiB page at a time: it pins 512 pages
 * per GUP call, charges RLIMIT_MEMLOCK per contiguous chunk, and on unmap
 * looks up and unpins every page alone. Here GUP takes ZP_GUP_BATCH pages
 * at once, the pages are folded into physically contiguous runs at once
 * (a 2 MiB folio is one run, or part of a longer one), the charge is made
 * once per batch, and unpinning goes run by run, which the kernel turns
 * into one atomic per folio.
 *
 * Accounting follows type1: pages are charged to the mapping task's mm
 * (locked_vm) against its RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, and
 * the charge is given back when the mapping goes, even from another task.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": pin: " fmt

#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>

#include "compat.h"
#include "iommu.h"
#include "pin.h"

/*
 * Pages per pin_user_pages_fast() call: 64 MiB of 4 KiB pages. Large enough
 * that the per-call cost (interrupts off, the long-term pin check, the
 * locked_vm charge under mmap_lock) vanishes next to the pages; small
 * enough that the page array stays at 128 KiB and a fatal signal is seen
 * within one batch.
 */
#define ZP_GUP_BATCH	16384

void zp_pinned_init(struct zp_pinned *p)
{
	INIT_LIST_HEAD(&p->chunks);
	p->npages = 0;
	p->locked = 0;
	p->task = get_task_struct(current->group_leader);
	p->lock_cap = capable(CAP_IPC_LOCK);
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

/* Append pfn..pfn+n to the runs, merging with the last run when it ends
 * where this one starts. -ENOMEM when a new chunk cannot be had. */
static int zp_runs_append(struct zp_pinned *p, unsigned long pfn, unsigned long n)
{
	struct zp_run_chunk *c = list_empty(&p->chunks) ? NULL :
		list_last_entry(&p->chunks, struct zp_run_chunk, node);
	struct zp_run *last = c && c->nr ? &c->run[c->nr - 1] : NULL;

	if (last && last->pfn + last->npages == pfn) {
		last->npages += n;
		return 0;
	}
	if (!c || c->nr == ZP_RUNS_PER_CHUNK) {
		c = kmalloc(ZP_RUN_CHUNK_BYTES, GFP_KERNEL_ACCOUNT);
		if (!c)
			return -ENOMEM;
		c->nr = 0;
		list_add_tail(&c->node, &p->chunks);
	}
	c->run[c->nr].pfn = pfn;
	c->run[c->nr].npages = n;
	c->nr++;
	zp_stat_inc(runs);
	return 0;
}

/*
 * Fold a GUP result into runs. Returns how many of the pages now belong to
 * a run; on -ENOMEM the rest are still the caller's to unpin.
 */
static long zp_runs_add_pages(struct zp_pinned *p, struct page **pages, long nr)
{
	long i = 0, n;

	while (i < nr) {
		for (n = 1; i + n < nr; n++)
			if (pages[i + n] != nth_page(pages[i], n))
				break;
		if (zp_runs_append(p, page_to_pfn(pages[i]), n))
			break;
		p->npages += n;
		i += n;
	}
	return i;
}

/* Pin one batch at vaddr; returns pages pinned and folded, or -errno. */
static long zp_pin_batch(struct zp_pinned *p, unsigned long vaddr, long nr,
			 unsigned int gup_flags, struct page **pages)
{
	long got, used;
	int ret;

	got = pin_user_pages_fast(vaddr, nr, gup_flags, pages);
	zp_stat_inc(gup_calls);
	if (got <= 0)
		return got ? got : -EFAULT;
	ret = zp_account(p, got);
	used = ret ? 0 : zp_runs_add_pages(p, pages, got);
	if (used < got) {
		unpin_user_pages(pages + used, got - used);
		zp_account(p, -(got - used));
		return ret ? ret : -ENOMEM;
	}
	zp_stat_add(pages_pinned, got);
	zp_stat_add(pages_pinned_total, got);
	return got;
}

/*
 * Unpin every run (one atomic per folio, done by the kernel's range unpin)
 * and give the charge back. The IOMMU must no longer map any of them.
 */
static void zp_pinned_release_runs(struct zp_pinned *p, bool dirty)
{
	struct zp_run_chunk *c, *tmp;
	unsigned int i;

	list_for_each_entry_safe(c, tmp, &p->chunks, node) {
		for (i = 0; i < c->nr; i++)
			unpin_user_page_range_dirty_lock(pfn_to_page(c->run[i].pfn),
							 c->run[i].npages, dirty);
		list_del(&c->node);
		kfree(c);
		cond_resched();
	}
	zp_stat_add(pages_pinned, -(long)p->npages);
	p->npages = 0;
	zp_account(p, -(long)p->locked);
}

void zp_pinned_release(struct zp_pinned *p, bool dirty)
{
	zp_pinned_release_runs(p, dirty);
	put_task_struct(p->task);
	mmdrop(p->mm);
}

int zp_pin_user(struct zp_pinned *p, unsigned long vaddr,
		unsigned long npages, bool write)
{
	unsigned int gup_flags = FOLL_LONGTERM | (write ? FOLL_WRITE : 0);
	unsigned long done = 0;
	struct page **pages;
	long got = 0;

	pages = kvmalloc_array(min_t(unsigned long, npages, ZP_GUP_BATCH),
			       sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	while (done < npages) {
		if (fatal_signal_pending(current)) {
			got = -EINTR;
			break;
		}
		got = zp_pin_batch(p, vaddr + (done << PAGE_SHIFT),
				   min_t(unsigned long, npages - done, ZP_GUP_BATCH),
				   gup_flags, pages);
		if (got < 0)
			break;
		done += got;
		cond_resched();
	}
	kvfree(pages);
	if (got >= 0)
		return 0;
	zp_pinned_release_runs(p, false);
	return got;
}
