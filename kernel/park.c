// SPDX-License-Identifier: GPL-2.0
/*
 * park.c - blocks a file let go of while another holder still pins them
 * for DMA: the kernel's own type1 over zeropinfs (zeropinfs with the
 * kernel's VFIO, docs/module.md), when the VMM's RAM file goes before its
 * container (a VMM that closes and unlinks its RAM first, a hole punched
 * or a file truncated under a DMA mapping). type1's unpin would then be
 * the block's last put, and the page allocator keeps poisoned pages out
 * of its free lists one page at a time only (free_pages_prepare(), order
 * 0): a 2 MiB block with a page memory failure marked after the file let
 * go would go back whole, for another tenant or the kernel. So the pool
 * keeps its reference here until the pin has gone, and then takes the
 * block back, checked page by page for poison (pool.c: set aside for good
 * or freed). zeropin's own backend holds plain references, not pins, and
 * checks at its own puts (zp_pool_put_held()).
 *
 * A delayed work looks at the parked blocks every PARK_CHECK_MS while any
 * are parked. Locking: the xarray's own lock; the work item never runs
 * twice at once. A block is parked from the page cache's release path
 * (no sleep) and released from the work (process context).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": park: " fmt

#include <linux/atomic.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include "park.h"
#include "pool.h"

/* How often the parked blocks are looked at: a VM's pins go when its VMM
 * exits or unmaps, and a block a second late back costs nothing. */
#define PARK_CHECK_MS	1000

static DEFINE_XARRAY(parked);			/* block head pfn >> ZP_BLOCK_ORDER -> folio */
static atomic_long_t nr_parked;			/* blocks in parked */
static void (*park_release)(struct folio *folio);	/* the pool's taking back */

static void park_check(struct work_struct *work);
static DECLARE_DELAYED_WORK(park_work, park_check);

bool zp_park(struct folio *folio)
{
	if (!folio_maybe_dma_pinned(folio))
		return false;
	if (xa_is_err(xa_store(&parked, folio_pfn(folio) >> ZP_BLOCK_ORDER, folio, GFP_NOWAIT)))
		return false;
	atomic_long_inc(&nr_parked);
	schedule_delayed_work(&park_work, msecs_to_jiffies(PARK_CHECK_MS));
	return true;
}

unsigned long zp_parked(void)
{
	return atomic_long_read(&nr_parked);
}

/* Only the parked reference holds the block now: no pin, no other user.
 * A speculative reference (a pfn walker's folio_try_get()) only delays it. */
static bool park_done(struct folio *folio)
{
	return !folio_maybe_dma_pinned(folio) && folio_ref_count(folio) == 1;
}

/* Take back every block done, or (stopping) every block. */
static void park_sweep(bool all)
{
	struct folio *folio;
	unsigned long index;

	xa_for_each(&parked, index, folio) {
		if (!all && !park_done(folio))
			continue;
		xa_erase(&parked, index);
		atomic_long_dec(&nr_parked);
		park_release(folio);
		cond_resched();
	}
}

static void park_check(struct work_struct *work)
{
	park_sweep(false);
	if (!xa_empty(&parked))
		schedule_delayed_work(&park_work, msecs_to_jiffies(PARK_CHECK_MS));
}

void zp_park_init(void (*release)(struct folio *folio))
{
	park_release = release;
}

/* Called once no file can let go of a block (every mount is gone, see
 * main.c): a block still pinned then is its pinner's to free, unchecked. */
void zp_park_exit(void)
{
	cancel_delayed_work_sync(&park_work);
	park_sweep(true);
	xa_destroy(&parked);
}
