// SPDX-License-Identifier: GPL-2.0
/*
 * run.c - 1 GiB runs of blocks.
 *
 * The IOMMU maps guest RAM with one 1 GiB entry where a 1 GiB-aligned
 * range of IOVA is backed by a physically contiguous, 1 GiB-aligned range
 * of memory. The page allocator's largest order is 4 MiB, so such a range
 * comes only from alloc_contig_range(), as 512 order-0 pages; the pool
 * makes them 512 blocks (order-9 folios) by hand, as __folio_alloc()
 * would have (compat.h: zp_prep_folio()), so every later step (zeropinfs'
 * page cache, PMD maps, pins, the free path) sees an ordinary block.
 *
 * Making compound pages by hand mirrors private kernel code, which moves
 * between series. So before any run is built, the load checks the mirror
 * against the kernel: one block the kernel made and one made by hand
 * from a split order-9 page must agree in every field the kernel reads
 * (flags, order, counts, the tails' links); both are then freed through
 * the kernel's own checks (bad_page() under CONFIG_DEBUG_VM). Any
 * difference turns runs off for this load (debugfs runs_supported 0) and
 * says which field.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": run: " fmt

#include <linux/hugetlb.h>
#include <linux/memory_hotplug.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/page_ref.h>
#include <linux/poison.h>
#include <linux/rcupdate.h>
#include <linux/sched/isolation.h>
#include <linux/vmstat.h>

#include "compat.h"
#include "pool.h"
#include "run.h"

bool zp_runs_supported;

/*
 * Runs are taken as the pool's refills are: never direct reclaim or
 * compaction in the pool's kthread (see pool.c, POOL_GFP_REFILL), never a
 * warning. Only kernels with upstream f6037a4a6865 ("mm/page_alloc: sort
 * out the alloc_contig_range() gfp flags mess": mainline, and 6.12.78 on, so
 * Debian's 6.12.85-1 on) hand these bits to the migration of what the GiB
 * held as well; 6.1 and 6.12 before .78 migrate with GFP_USER |
 * __GFP_RETRY_MAYFAIL of their own, which may reclaim directly. That is
 * why, on every kernel, a GiB is taken only where the zone has the room
 * for what must move (run_room()).
 */
const gfp_t zp_run_gfp = (GFP_KERNEL & ~__GFP_DIRECT_RECLAIM) | __GFP_NOWARN;

/*
 * Whether cpu is kept free of the kernel's housekeeping now: isolcpus=,
 * nohz_full= (housekeeping's DOMAIN and TICK masks) or an isolated cpuset
 * partition (7.2: in the DOMAIN mask; 6.12: cpuset's own,
 * zp_cpuset_cpu_isolated(); 6.1: not seen). The masks, not housekeeping's
 * flags: 7.2 keeps the DOMAIN flag set once a partition has been. Caller
 * holds rcu_read_lock() (7.2's housekeeping masks are RCU pointers).
 */
bool zp_cpu_isolated(int cpu)
{
	RCU_LOCKDEP_WARN(!rcu_read_lock_any_held(), "zp_cpu_isolated() without RCU");
	return !housekeeping_test_cpu(cpu, HK_TYPE_DOMAIN) ||
	       !housekeeping_test_cpu(cpu, HK_TYPE_TICK) ||
	       zp_cpuset_cpu_isolated(cpu);
}

/* Some online CPU in an isolated cpuset partition that housekeeping does
 * not show (6.12: one call per online CPU; elsewhere nothing to ask). */
static bool cpuset_isolates_online(void)
{
	int cpu;

	if (!ZP_CPUSET_ISOLATES_APART)
		return false;
	for_each_online_cpu(cpu)
		if (zp_cpuset_cpu_isolated(cpu))
			return true;
	return false;
}

/*
 * Some online CPU isolated (zp_cpu_isolated())? A build's
 * lru_cache_disable() and the per-CPU list drain queue work on each CPU
 * whose LRU caches or free lists hold pages (a CPU whose vCPU faulted
 * memory in does) and wait for it, after an expedited RCU grace period
 * that interrupts every CPU; on such a CPU a SCHED_FIFO vCPU stands in
 * the work's way: the build waits until the fair server preempts the
 * vCPU for it (6.12 and 7.2), on 6.1 with RT throttling off for ever (the
 * kthread in D state, rmmod with it). Hosts set up this way run
 * latency-bound guests, so they get loose blocks only (the pool asks at
 * every build: a partition can come at run time). Any context, np->lock
 * held or not (asked several times per kthread wake-up): a hint read
 * without the hotplug lock (a CPU coming or going is seen at the next
 * ask); the online mask against housekeeping's two masks word by word,
 * and on 6.12 cpuset's mask CPU by CPU; takes rcu_read_lock().
 */
bool zp_run_cpus_isolated(void)
{
	bool isolated;

	rcu_read_lock();	/* 7.2's housekeeping masks are RCU pointers */
	isolated = !cpumask_subset(cpu_online_mask, housekeeping_cpumask(HK_TYPE_DOMAIN)) ||
		   !cpumask_subset(cpu_online_mask, housekeeping_cpumask(HK_TYPE_TICK));
	rcu_read_unlock();
	return isolated || cpuset_isolates_online();
}

/* GiBs looked at per build: a scan reads 262144 struct pages (about a
 * millisecond each); 16 finds a free one on any host that has one nearby
 * and bounds the time a kthread spends looking. */
#define RUN_SCAN_GIB	16
/* A zone keeps this share of its memory free beside its high watermark
 * when a run is taken (1/16, the pool's reserve). */
#define RUN_RESERVE_SHIFT	4

/*
 * How many of the GiB's pages are free, or -1 when it cannot become a run
 * or should not: offline or another zone's memory, reserved pages, hugetlb
 * pages, unevictable pages (zeropinfs' own folios, mlocked memory: 6.1's
 * alloc_contig_range() would unmap and fail to move them, over and over),
 * pages pinned for DMA, non-LRU pages in use (slab, drivers, blocks of
 * this pool) that do not move, and folios locked or under writeback now.
 * Reads struct pages without locks: a hint, alloc_contig_range() decides
 * (a folio locked after the scan is still waited for). Caller holds no
 * lock; may reschedule.
 */
static long run_free_pages(struct zone *zone, unsigned long start)
{
	unsigned long pfn = start, end = start + ZP_RUN_PAGES, order, nr, off;
	unsigned long section = ULONG_MAX;
	struct folio *folio;
	struct page *page;
	long free = 0;

	while (pfn < end) {
		/* every section the walk enters: a step past a racing buddy
		 * or folio may land anywhere in one */
		if (pfn_to_section_nr(pfn) != section) {
			section = pfn_to_section_nr(pfn);
			page = pfn_to_online_page(pfn);
			if (!page || page_zone(page) != zone)
				return -1;
			cond_resched();
		}
		page = pfn_to_page(pfn);
		if (PageBuddy(page)) {
			order = READ_ONCE(page_private(page));
			nr = order <= ZP_MAX_BUDDY_ORDER ? 1UL << order : 1;
			free += nr;
			pfn += min(nr, end - pfn);
			continue;
		}
		if (PageReserved(page) || PageHuge(page))
			return -1;
		folio = page_folio(page);
		/* long-term pins (other tenants' VFIO, RDMA) do not move */
		if (folio_test_unevictable(folio) || folio_maybe_dma_pinned(folio))
			return -1;
		if (!folio_test_lru(folio) && folio_ref_count(folio))
			return -1;
		/* the migration waits for a folio's lock and its writeback,
		 * without a bound (a read a FUSE server never answers, a
		 * write to a stalled device), with LRU caching off on every
		 * CPU meanwhile: one held now may be held for long */
		if (folio_test_locked(folio) || folio_test_writeback(folio))
			return -1;
		if (!folio_ref_count(folio))
			free++;		/* on a per-CPU free list */
		/* past the rest of the folio; a folio that changed under
		 * the read is stepped over page by page */
		nr = folio_nr_pages(folio);
		off = pfn - folio_pfn(folio);
		nr = off < nr ? nr - off : 1;
		pfn += min(nr, end - pfn);
	}
	return free;
}

/*
 * Room in the zone to take a GiB with used pages in it: they move within
 * the node, so the zone must have free the GiB, what moves, its high
 * watermark and 1/2^RUN_RESERVE_SHIFT of its memory: a run never takes a
 * node's last memory.
 */
static bool run_room(struct zone *zone, long free)
{
	unsigned long want = 2 * ZP_RUN_PAGES - free + high_wmark_pages(zone) +
			     (zone_managed_pages(zone) >> RUN_RESERVE_SHIFT);

	return zone_page_state(zone, NR_FREE_PAGES) >= want;
}

/* The freest GiB among RUN_SCAN_GIB from *cursor on (wrapping at the zone's
 * end), with room to take it; 0 when none. */
static unsigned long run_pick(struct zone *zone, unsigned long *cursor)
{
	unsigned long first = ALIGN(zone->zone_start_pfn, ZP_RUN_PAGES);
	unsigned long last = zone_end_pfn(zone), pfn, best = 0, n;
	long free, best_free = -1;

	if (first + ZP_RUN_PAGES > last)
		return 0;
	pfn = clamp(ALIGN(*cursor, ZP_RUN_PAGES), first, last);
	for (n = 0; n < RUN_SCAN_GIB; n++, pfn += ZP_RUN_PAGES) {
		if (pfn + ZP_RUN_PAGES > last)
			pfn = first;
		free = run_free_pages(zone, pfn);
		if (free > best_free && run_room(zone, free)) {
			best = pfn;
			best_free = free;
		}
		if (free >= (long)ZP_RUN_PAGES)
			break;
	}
	*cursor = best ? best + ZP_RUN_PAGES : pfn;
	return best;
}

/* A block's pages that could not be made a block (a tail still held by a
 * transient reference) back one by one: free_contig_range() would warn
 * about the held one. */
static void run_free_pages_of(unsigned long pfn)
{
	unsigned long i;

	for (i = 0; i < ZP_BLOCK_PAGES; i++)
		__free_page(pfn_to_page(pfn + i));
}

/* Is every section of the GiB at start online and still in zone? A
 * memory block (128 MiB and up) goes offline on its own, not with the
 * GiB's ends. */
static bool run_online(struct zone *zone, unsigned long start)
{
	unsigned long pfn;
	struct page *page;

	for (pfn = start; pfn < start + ZP_RUN_PAGES; pfn += PAGES_PER_SECTION) {
		page = pfn_to_online_page(pfn);
		if (!page || page_zone(page) != zone)
			return false;
	}
	return true;
}

int zp_run_build(int nid, unsigned long *cursor, struct folio *blocks[ZP_RUN_BLOCKS])
{
	struct zone *zone = &NODE_DATA(nid)->node_zones[ZONE_NORMAL];
	unsigned long start, k, pfn;
	int ret;

	if (!zp_runs_supported || !populated_zone(zone))
		return -ENOSPC;
	start = run_pick(zone, cursor);
	if (!start)
		return -ENOSPC;
	/* the scan slept: part of the GiB may have gone offline since (the
	 * hotplug lock is not exported; upstream's alloc_contig_pages() has
	 * the same window) */
	if (!run_online(zone, start))
		return -EBUSY;
	ret = zp_alloc_contig_range(start, start + ZP_RUN_PAGES, zp_run_gfp);
	if (ret)	/* -ENOSPC is ours alone: no GiB picked */
		return ret == -ENOSPC ? -EBUSY : ret;
	for (k = 0; k < ZP_RUN_BLOCKS; k++) {
		pfn = start + k * ZP_BLOCK_PAGES;
		blocks[k] = NULL;
		if (zp_prep_folio(pfn_to_page(pfn), ZP_BLOCK_ORDER))
			blocks[k] = pfn_folio(pfn);	/* the pool checks it for poison */
		else
			run_free_pages_of(pfn);
	}
	return 0;
}

/* The folio-wide fields of ours against the kernel's; NULL when they agree. */
static const char *run_check_folio(struct folio *ours, struct folio *kern)
{
	if (!folio_test_large(ours) || folio_order(ours) != ZP_BLOCK_ORDER)
		return "order";
	if (folio_nr_pages(ours) != folio_nr_pages(kern))
		return "nr_pages";
	if (folio_ref_count(ours) != folio_ref_count(kern))
		return "refcount";
	if (zp_folio_large_mapcount(ours) != zp_folio_large_mapcount(kern) ||
	    folio_entire_mapcount(ours) != folio_entire_mapcount(kern))
		return "mapcount";
	if (folio_maybe_dma_pinned(ours) != folio_maybe_dma_pinned(kern))
		return "pincount";
	if (zp_folio_mm_ids(ours) != zp_folio_mm_ids(kern))
		return "mm ids";
	if (zp_folio_thp_prepped(ours) != zp_folio_thp_prepped(kern))
		return "large folio prep";
	if (list_empty(zp_folio_deferred_list(ours)) != list_empty(zp_folio_deferred_list(kern)))
		return "deferred list";
	if (ours->mapping != kern->mapping || folio_get_private(ours) != folio_get_private(kern))
		return "head mapping";
	return NULL;
}

/* Page i of ours against page i of the kernel's; NULL when they agree. */
static const char *run_check_page(struct folio *ours, struct folio *kern, unsigned long i)
{
	struct page *o = folio_page(ours, i), *k = folio_page(kern, i);

	if ((zp_page_flags(o) ^ zp_page_flags(k)) & PAGEFLAGS_MASK)
		return "page flags";
	if (i == 0)
		return NULL;
	if (!PageTail(o) || compound_head(o) != &ours->page)
		return "compound_head";
	if (page_ref_count(o) != page_ref_count(k))
		return "tail refcount";
	if (atomic_read(&o->_mapcount) != atomic_read(&k->_mapcount))
		return "tail mapcount";
	if ((o->mapping == TAIL_MAPPING) != (k->mapping == TAIL_MAPPING) ||
	    page_private(o) != page_private(k))
		return "tail mapping";
	return NULL;
}

/* Tries at the self-check's block: a tail may hold a transient reference
 * (a speculative lookup) just when it is frozen; three in a row would be
 * more than chance. */
#define RUN_CHECK_TRIES	3

/* An order-9 page split into 512 order-0 pages of refcount 1 (what
 * alloc_contig_range() leaves) made into a block by hand, or NULL (no
 * memory: *busy false; a tail referenced RUN_CHECK_TRIES times: true). */
static struct folio *run_check_block(bool *busy)
{
	const gfp_t gfp = GFP_KERNEL | __GFP_NOWARN;
	struct page *page;
	int tries;

	*busy = false;
	for (tries = 0; tries < RUN_CHECK_TRIES; tries++) {
		page = alloc_pages_node(numa_mem_id(), gfp, ZP_BLOCK_ORDER);
		if (!page)
			return NULL;
		split_page(page, ZP_BLOCK_ORDER);
		if (zp_prep_folio(page, ZP_BLOCK_ORDER))
			return page_folio(page);
		run_free_pages_of(page_to_pfn(page));
	}
	*busy = true;
	return NULL;
}

/*
 * One block made by hand against one the kernel made, field by field;
 * then both freed, and a complaint of the kernel's free-time checks
 * (bad_page() taints the kernel) counts as a difference too. Returns 0;
 * -EOPNOTSUPP (and says which field) when they differ; -EBUSY when no
 * block could be made; -ENOMEM without memory to check with. Called once
 * at load; sleeps.
 */
static int run_selfcheck(void)
{
	bool tainted = test_taint(TAINT_BAD_PAGE), busy;
	struct folio *kern, *ours;
	const char *bad;
	unsigned long i;

	kern = zp_folio_alloc_node(GFP_KERNEL | __GFP_NOWARN, ZP_BLOCK_ORDER, numa_mem_id());
	if (!kern)
		return -ENOMEM;
	ours = run_check_block(&busy);
	if (!ours) {
		folio_put(kern);
		return busy ? -EBUSY : -ENOMEM;
	}
	bad = run_check_folio(ours, kern);
	for (i = 0; !bad && i < ZP_BLOCK_PAGES; i++)
		bad = run_check_page(ours, kern, i);
	folio_put(ours);
	folio_put(kern);
	if (!bad && !tainted && test_taint(TAINT_BAD_PAGE))
		bad = "the kernel's free-time checks";
	if (!bad)
		return 0;
	pr_warn("a block made by hand differs from the kernel's (%s): no 1 GiB runs\n", bad);
	return -EOPNOTSUPP;
}

/* Decide zp_runs_supported. Never fails the load: without runs the pool
 * serves blocks as before. */
void zp_run_init(void)
{
	if (!ZP_HAVE_CONTIG_ALLOC || !ZP_HAVE_PREP_FOLIO) {
		pr_info("no 1 GiB runs on this kernel (CONFIG_CONTIG_ALLOC, or a series zeropin does not make blocks by hand for)\n");
		return;
	}
	/* alloc tags would follow split_page() into 511 tails that the free
	 * of the block never clears */
	if (IS_ENABLED(CONFIG_MEM_ALLOC_PROFILING)) {
		pr_info("no 1 GiB runs with CONFIG_MEM_ALLOC_PROFILING\n");
		return;
	}
	/* tag-based KASAN tags each chunk alloc_contig_range() took on its
	 * own: a block spanning two would carry two tags, and an access
	 * through the folio's address across them would fault */
	if (IS_ENABLED(CONFIG_KASAN_SW_TAGS) || IS_ENABLED(CONFIG_KASAN_HW_TAGS)) {
		pr_info("no 1 GiB runs with tag-based KASAN\n");
		return;
	}
	switch (run_selfcheck()) {
	case 0:
		zp_runs_supported = true;
		break;
	case -ENOMEM:
		pr_warn("no memory for the self-check at load: no 1 GiB runs\n");
		break;
	case -EBUSY:
		pr_warn("the self-check's block stayed referenced: no 1 GiB runs\n");
		break;
	}
}
