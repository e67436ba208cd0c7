// SPDX-License-Identifier: GPL-2.0
/*
 * park.c - blocks a file let go of while something else still holds them:
 * a DMA mapping, zeropin's (plain references) or the kernel's type1 over
 * zeropinfs (pins), when the VMM's RAM file goes before its container (a
 * VMM that exits closes its fds in order, the RAM's before the
 * container's; a hole punched or a file truncated under a DMA mapping).
 * That holder's put would then be the block's last, and the page
 * allocator keeps poisoned pages out of its free lists one page at a time
 * only (free_pages_prepare(), order 0): a 2 MiB block with a page memory
 * failure marked after the file let go would go back whole, for another
 * tenant or the kernel. So the pool keeps its reference here until the
 * block's only holder is that reference, and then takes it back, checked
 * page by page for poison (pool.c: set aside for good, or freed).
 *
 * Each parked block holds the module: the kernel's type1 may hold its pin
 * past the last zeropinfs mount, and an unload then would hand the block
 * to type1's unpin unchecked (rmmod answers "in use" until it lets go).
 *
 * A delayed work (unbound: a VM's whole RAM may be parked at its exit)
 * looks at the parked blocks every PARK_CHECK_MS while any are parked,
 * and at once when zeropin's backend has let go of a mapping.
 * Locking: the xarray's own lock; the work item never runs twice at once.
 * A block is parked from the page cache's release (free_folio, on the
 * truncation paths: process context, no spinlock held, the folio locked;
 * may sleep) and released from the work.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": park: " fmt

#include <linux/atomic.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include "compat.h"
#include "park.h"
#include "pool.h"

/* How often the parked blocks are looked at: a VM's mappings go when its
 * VMM exits or unmaps, and a block a second late back costs nothing. */
#define PARK_CHECK_MS	1000
/* The xarray's nodes (~4.6 MiB per TiB parked, all at a VM's exit, when
 * memory is tight): every path that lets a block go (truncation) may
 * sleep and holds no spinlock; a failure is counted, and the block given
 * back unchecked. */
#define PARK_GFP	(GFP_KERNEL | __GFP_NOWARN)

/*
 * References a block held by nobody else has while its file lets go of it
 * (zfs_free_folio()): the page cache's, one per page, the one the pool
 * keeps (zfs.c: zfs_insert_folio()), and the truncating caller's. Any
 * more, and something else holds it: a DMA mapping, or a holder for a
 * moment (a per-CPU LRU batch, a pfn walker), which only parks it for a
 * second.
 */
#define PARK_FILE_REFS(folio)	(folio_nr_pages(folio) + 2)

static DEFINE_XARRAY(parked);			/* head pfn >> ZP_BLOCK_ORDER -> folio */
static atomic_long_t nr_parked;			/* blocks in parked */
static atomic_long_t nr_park_failed;		/* ... not parked: no room for the entry */
static void (*park_release)(struct folio *folio);	/* the pool's taking back */

static void park_check(struct work_struct *work);
static DECLARE_DELAYED_WORK(park_work, park_check);

static void park_schedule(void)
{
	queue_delayed_work(zp_unbound_wq, &park_work, msecs_to_jiffies(PARK_CHECK_MS));
}

bool zp_park(struct folio *folio)
{
	if (!folio_maybe_dma_pinned(folio) && folio_ref_count(folio) <= PARK_FILE_REFS(folio))
		return false;
	atomic_long_inc(&nr_parked);	/* before a sweep can see it */
	if (xa_is_err(xa_store(&parked, folio_pfn(folio) >> ZP_BLOCK_ORDER, folio, PARK_GFP))) {
		atomic_long_dec(&nr_parked);
		atomic_long_inc(&nr_park_failed);
		return false;
	}
	__module_get(THIS_MODULE);	/* live: the file's mount holds it */
	park_schedule();
	return true;
}

void zp_park_kick(void)
{
	if (atomic_long_read(&nr_parked))
		mod_delayed_work(zp_unbound_wq, &park_work, 0);
}

unsigned long zp_parked(void)
{
	return atomic_long_read(&nr_parked);
}

unsigned long zp_park_failed(void)
{
	return atomic_long_read(&nr_park_failed);
}

/* Only the parked reference holds the block now (a pin holds a reference
 * too). A speculative reference (a pfn walker's folio_try_get()) only
 * delays it. */
static bool park_done(struct folio *folio)
{
	return folio_ref_count(folio) == 1;
}

/* Take back every block done, and put the module reference each held (the
 * last put may let an unload begin: it waits in zp_park_exit() for this
 * work to return); or, stopping, every block (none but on the load's
 * unwind, with no reference to put: the module is going). */
static void park_sweep(bool all)
{
	struct folio *folio;
	unsigned long index;

	xa_for_each(&parked, index, folio) {
		cond_resched();		/* a VM's whole RAM may be parked */
		if (!all && !park_done(folio))
			continue;
		xa_erase(&parked, index);
		atomic_long_dec(&nr_parked);
		park_release(folio);
		if (!all)
			module_put(THIS_MODULE);
	}
}

static void park_check(struct work_struct *work)
{
	park_sweep(false);
	if (!xa_empty(&parked))
		park_schedule();
}

void zp_park_init(void (*release)(struct folio *folio))
{
	park_release = release;
}

/* Called once no file can let go of a block (every mount is gone: each
 * holds the module) and, each parked block holding the module too, none is
 * parked but on the load's own unwind; a block still held then would be
 * its holder's to free, unchecked. */
void zp_park_exit(void)
{
	cancel_delayed_work_sync(&park_work);
	park_sweep(true);
	xa_destroy(&parked);
}
