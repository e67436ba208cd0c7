// SPDX-License-Identifier: GPL-2.0
/*
 * pool.c - the pre-zeroed page pool.
 *
 * Creating a GPU VM pins all of its RAM, and every page not yet faulted in
 * is allocated and cleared on that critical path. The pool moves the
 * clearing off it: it owns 2 MiB blocks, one list of dirty and one of zero
 * blocks per NUMA node, and a SCHED_IDLE kthread per node that zeroes dirty
 * blocks only when its CPU has nothing else to do. zeropinfs takes zero
 * blocks for guest RAM; when none is left it zeroes one synchronously.
 *
 * Life of a block: allocated from the page allocator (dirty; or zero at
 * once when the allocator clears pages itself, init_on_alloc=1) -> zeroing ->
 * zero -> in use (in a zeropinfs file's page cache) -> released. A released
 * folio goes back to the page allocator when its last user lets go (page
 * cache, user mappings, DMA pins): a folio still pinned for DMA is never
 * reused while the pin exists, because nothing but the kernel's own
 * refcount frees it. The kthread then refills the pool with a fresh block,
 * dirty again, to the admin's target. (Taking the same folio straight back
 * would need LRU isolation and memcg uncharging, which modules cannot do.)
 *
 * Memory failure: a block with a page marked hardware-poisoned is never
 * handed out, zeroed or freed again; it is set aside for good (counted as
 * poisoned), as the kernel sets poisoned pages aside. The page allocator
 * only keeps poisoned single pages out of its free lists, so every block
 * is checked page by page before it goes back there (pool_free()) and when
 * it comes from the allocator. memory_failure() on an idle block marks
 * only the failing page (it cannot handle a page it does not know), so the
 * pool listens to its reports (poison.c): the block leaves its list at
 * once (pool_memory_failure()), and a block that was on no list meanwhile
 * is checked page by page before it is filed (file_block_locked()). At
 * hand-out, on the fault path, only the folio's own flags are looked at
 * then; page by page where the kernel has no report to listen to. A block
 * handed out between memory_failure() marking a page and reporting it
 * (milliseconds: the report waits for LRU drains on every CPU) gets the
 * folio flag the kernel's fault and pin paths refuse (flag_handed_out());
 * what it was mapped or pinned for in that window stays, as for memory
 * that fails while in use.
 *
 * Staying out of the VMs' way: the kthreads run SCHED_IDLE, on their node's
 * CPUs that no isolation (isolcpus=, nohz_full=, an isolated cpuset
 * partition) keeps for vCPUs, or on the CPUs the admin names (zero_cpus),
 * at most zero_rate_mib MiB/s each (an idle CPU is not an idle memory bus:
 * non-temporal zeroing can take a socket's bandwidth from the VMs on the
 * other cores). The time spent zeroing (wall clock around it: a kthread
 * preempted by a VM, or a refill that reclaims, counts), in the kthreads
 * and on faults' paths, is counted (debugfs zeroing_idle_ms,
 * zeroing_sync_ms); the kthreads' CPU time is their own (zeropin/N in ps).
 * If every CPU listed goes offline the scheduler moves a kthread elsewhere
 * and the binding is not restored: write zero_cpus again (so too after an
 * isolated cpuset partition is made or changed, which puts every unbound
 * kthread of the root cpuset on the CPUs left outside partitions; the
 * default is computed at load and at each zero_cpus write). Another CPU
 * coming online leaves the binding as it is.
 *
 * Budget: module parameter pool_mib, then /sys/kernel/zeropin/pool/target_mib.
 * A shrinker hands zero and dirty blocks back under memory pressure and the
 * refill then waits POOL_SHRINK_BACKOFF before taking memory again.
 *
 * Locking: each node's lists and counts are under its spinlock, never held
 * across zeroing or allocation. pool_mutex serialises target and zero_cpus
 * changes (which walk node_pools[]) with init/exit creating and destroying
 * the nodes; kthread_stop() runs under it, so nothing a kthread does (nor
 * the shrinker, which reclaim may run in it) may take pool_mutex.
 * zero_cpus is applied under cpus_read_lock() as well. Counters are atomics.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": pool: " fmt

#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/freezer.h>
#include <linux/highmem.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/nodemask.h>
#include <linux/sched.h>
#include <uapi/linux/sched/types.h>
#include <linux/seq_file.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "compat.h"
#include "park.h"
#include "poison.h"
#include "pool.h"
#include "run.h"
#include "zero.h"

/* After the shrinker took blocks back, the pool does not refill for this
 * long: memory pressure comes in bursts, and refilling into it would only
 * make reclaim take the same memory again. */
#define POOL_SHRINK_BACKOFF	(10 * HZ)
/* A node refills only after its last hand-out is this long past: a VM
 * start takes blocks in a burst, and refilling into the burst competes with
 * it for the zone lock and memory bandwidth. Zeroing dirty blocks goes on. */
#define POOL_REFILL_QUIET	(HZ / 5)
/* After a failed refill allocation (memory is fragmented or short),
 * doubled at each failure in a row up to the MAX: every failure wakes
 * kswapd for a 2 MiB order, whose reclaim and compaction cost the host
 * (and whose shrinking takes the pool's own blocks), so a host that cannot
 * make blocks is asked less and less often. A success or a new target
 * starts again from the first. */
#define POOL_ALLOC_BACKOFF	(1 * HZ)
#define POOL_ALLOC_BACKOFF_MAX	(64 * HZ)
/* After a fault's own block allocation failed, the node's faults take
 * blocks only from the pool for this long (zeropinfs then gives 4 KiB
 * pages): each try costs a round of direct compaction and reclaim and
 * wakes kswapd for a 2 MiB order, and a VM start on a fragmented host
 * would pay that for every 2 MiB of its RAM. One try a second still
 * notices when blocks can be had again. */
#define POOL_SYNC_BACKOFF	(1 * HZ)
/* After a run could not be built (no free-enough GiB, or one that would
 * not move), doubled at each failure in a row up to the MAX: every try
 * scans struct pages and may migrate memory. A success or a new target
 * starts again from the first; loose blocks fill the pool meanwhile. */
#define POOL_RUN_BACKOFF	(30 * HZ)
#define POOL_RUN_BACKOFF_MAX	(30 * 60 * HZ)
/* Refill never takes the last 1/2^N of RAM (1/16: about 6 %). */
#define POOL_RESERVE_SHIFT	4

/*
 * Refill allocations: never OOM, never warn, stay on the node, and never
 * reclaim or compact directly. The kthread runs SCHED_IDLE: in direct
 * reclaim or compaction it would take i_mmap_rwsem and anon_vma locks in
 * rmap walks and, with the CPUs busy running VMs, starve while holding
 * them, stalling every task that waits for them (a priority inversion).
 * Without __GFP_DIRECT_RECLAIM the allocation only wakes kswapd (which
 * wakes kcompactd for a high order); the refill backs off (from
 * POOL_ALLOC_BACKOFF, doubling) and tries again once they have done their
 * work.
 */
#define POOL_GFP_REFILL	((GFP_HIGHUSER & ~__GFP_DIRECT_RECLAIM) | __GFP_NOWARN | __GFP_THISNODE)
/*
 * A fallback page (zp_pool_get_page()): zeroed by the allocator, from any
 * node if the asked one has none (a VM that runs beats one that dies for
 * locality), reclaiming as long as reclaim makes progress, but never the
 * OOM killer: an order-0 page fails only when the host is really out of
 * memory, and then the fault fails (SIGBUS) instead of killing another
 * tenant. Unmovable, as blocks are: a file holds it for good.
 */
#define POOL_GFP_PAGE	(GFP_HIGHUSER | __GFP_ZERO | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

static unsigned int pool_mib;
module_param(pool_mib, uint, 0444);
MODULE_PARM_DESC(pool_mib,
	"Initial size of the pre-zeroed pool, in MiB, split across NUMA nodes; "
	"change at run time in /sys/kernel/zeropin/pool/target_mib [DEFAULT: 0]");

/*
 * The default cap, from one measurement on real hardware (a 16-core Xeon,
 * one thread zeroing 2 MiB blocks with non-temporal stores beside a
 * memory-bandwidth-bound job, STREAM triad, on 8 and on 15 other cores):
 * uncapped, the job ran 10-12 % slower; at 4096 MiB/s 3-5 %; at 2048 MiB/s
 * at most 2.3 %; at 1024 MiB/s within noise. 2048 keeps a bandwidth-bound
 * tenant within a few per cent and still refills a 64 GiB pool in 32 s.
 */
#define POOL_ZERO_RATE_DEFAULT	2048

static unsigned int zero_rate_mib = POOL_ZERO_RATE_DEFAULT;
module_param(zero_rate_mib, uint, 0644);
MODULE_PARM_DESC(zero_rate_mib,
	"Cap on each zeroing kthread's (one per NUMA node) idle-time zeroing, "
	"in MiB/s; 0 for none. Zeroing on a fault's path is never held back. "
	"Writable at run time by root [DEFAULT: 2048: a memory-bound job on "
	"other cores slowed <= 2.3 % on real hardware, 10-12 % uncapped]");

/*
 * On by default (issue 40). What a build costs the host, per GiB built
 * and per failed try that got as far as alloc_contig_range(): an
 * expedited RCU grace period on every CPU (lru_cache_disable()), work on
 * each CPU whose LRU caches or per-CPU free lists hold pages (drained:
 * a CPU whose vCPU faulted memory in), the migration of
 * what the GiB held (other tenants' movable memory: page cache, THP of
 * guests not on zeropinfs), by the pool's kthread at nice 19 and only
 * after run_quiet_ms without hand-outs; and, where the kernel clears at
 * allocation (init_on_alloc=1, Debian's default), the GiB cleared inside
 * alloc_contig_range() in one pass, a burst zero_rate_mib evens out only
 * afterwards. A vCPU beside it showed no gap above nested TCG's own floor
 * (max gap 29-39 ms building runs, 25-33 ms idle; docs/benchmarks.md,
 * tests/bench/run_build_latency.c); not yet measured on hardware.
 */
static bool run_build = true;
module_param(run_build, bool, 0644);
MODULE_PARM_DESC(run_build,
	"Build 1 GiB runs (physically contiguous, 1 GiB-aligned blocks, which "
	"the IOMMU maps with one entry each) in idle time where a node's pool "
	"is a GiB or more short of its target; loose blocks fill the rest and "
	"wherever a run cannot be had. A VFIO pin in an empty GiB of a file "
	"takes a whole run. None while some CPUs are isolated (isolcpus=, "
	"nohz_full=, an isolated cpuset partition, which 6.1 does not show): "
	"a build waits for work on the CPUs. Writable at run time by root "
	"[DEFAULT: Y. Per GiB built, after run_quiet_ms without hand-outs: "
	"an expedited RCU grace period on every CPU and an LRU and per-CPU "
	"list drain on each CPU holding such pages, the migration of what "
	"the GiB held at nice 19 (on 6.1 and on 6.12 before 6.12.78, Debian's "
	"before 6.12.85-1, it may reclaim directly), and with init_on_alloc=1 "
	"the GiB cleared in one burst; no vCPU gap above nested TCG's 25-33 ms "
	"floor measured. N where other tenants' memory must never move]");

/* A run migrates whatever the GiB held (page cache, anonymous memory):
 * a cost to the host, paid only when the node's last hand-out (a VM
 * start) is this long past. */
static unsigned int run_quiet_ms = 2000;
module_param(run_quiet_ms, uint, 0644);
MODULE_PARM_DESC(run_quiet_ms,
	"Time after a node's last hand-out before it builds a 1 GiB run, in "
	"ms; a VM start takes blocks in a burst and a run's migration must not "
	"compete with it. A node that hands blocks out without such a pause "
	"for 5 periods (guests faulting RAM in) fills a GiB of its shortfall "
	"with loose blocks per 5 periods meanwhile. Writable at run time by "
	"root [DEFAULT: 2000]");
/* How many quiet periods a GiB of shortfall waits for a run while hand-outs
 * go on without pause, before loose blocks fill one GiB of it: a VM
 * start's burst (seconds at most) passes within it, but guests that fault
 * their RAM in over minutes would otherwise leave the pool that short for
 * as long, and every fault would zero on its own path. One GiB per wait,
 * so that the end of a long busy stretch (loose refill may start 200 ms
 * after the last hand-out, a run only run_quiet_ms after) does not take
 * the room of every run. */
#define RUN_WAIT_QUIETS		5

static struct cpumask zero_cpus_mask;	/* zero_cpus as parsed; empty: the default */
static int zero_cpus_set(const char *val, const struct kernel_param *kp);
static int zero_cpus_get(char *buf, const struct kernel_param *kp);
static const struct kernel_param_ops zero_cpus_ops = {
	.set = zero_cpus_set,
	.get = zero_cpus_get,
};
module_param_cb(zero_cpus, &zero_cpus_ops, NULL, 0644);
MODULE_PARM_DESC(zero_cpus,
	"CPUs the zeroing kthreads may run on, as a CPU list (0-3,8); each "
	"node's kthread takes those of its node, or all listed when none is; "
	"empty for the default. Writable at run time by root "
	"[DEFAULT: empty, each kthread on its node's CPUs less the isolated "
	"ones (isolcpus=, nohz_full=, an isolated cpuset partition at load)]");

struct node_pool {
	int nid;			/* NUMA node the blocks come from */
	struct completion started;	/* the kthread runs: its CPUs may be set */
	spinlock_t lock;		/* protects the lists and counts below */
	struct xarray zero;		/* zeroed blocks by physical block number
					 * (pfn >> 9), ready to hand out */
	unsigned long next_block;	/* hand out this block next if zero */
	struct xarray runs;		/* runs built whole whose blocks are all
					 * still in zero, by GiB (block number
					 * / ZP_RUN_BLOCKS); kept for files that
					 * take a GiB at once */
	unsigned long nr_runs;		/* entries in runs */
	struct list_head dirty;		/* blocks waiting to be zeroed */
	unsigned long nr_zero;		/* blocks in zero */
	unsigned long nr_dirty;		/* blocks on dirty */
	unsigned long nr_zeroing;	/* blocks the kthread is zeroing */
	unsigned long target;		/* blocks this node should hold */
	unsigned long backoff_until;	/* jiffies: no refill before this */
	unsigned long alloc_backoff;	/* jiffies the next failed refill waits
					 * (0: POOL_ALLOC_BACKOFF) */
	unsigned long last_get;		/* jiffies of the last hand-out */
	unsigned long sync_backoff_until; /* jiffies: faults allocate no block
					 * before this (POOL_SYNC_BACKOFF);
					 * 0: no back-off */
	unsigned long run_cursor;	/* pfn where the next run search starts */
	unsigned long run_backoff_until; /* jiffies: no run built before this */
	unsigned long run_backoff;	/* jiffies the next failed build waits
					 * (0: POOL_RUN_BACKOFF) */
	unsigned long run_wait_from;	/* jiffies: the later of the start of
					 * the node's hand-outs without a quiet
					 * period, its going a GiB short of
					 * target and its last loose refill
					 * that began a GiB (run_wait_until()) */
	bool idle;			/* the kthread sleeps until woken */
	struct task_struct *thread;	/* the node's zeroing kthread */
	wait_queue_head_t wait;		/* the kthread sleeps here */
};

/* Event counters, exported in debugfs (zeropin/pool_counters). */
struct pool_counters {
	atomic_long_t zeroed_idle;	/* blocks zeroed by the idle kthreads */
	atomic_long_t zeroed_alloc;	/* refill blocks the page allocator zeroed */
	atomic_long_t zeroed_sync;	/* blocks zeroed on a fault's path */
	atomic_long_t alloc_sync;	/* blocks allocated on a fault's path */
	atomic_long_t alloc_sync_failed; /* ... tries that failed */
	atomic_long_t handed_out;	/* blocks given to files */
	atomic_long_t handed_zero;	/* ... of which came from the zero list */
	atomic_long_t returned;		/* blocks files let go of */
	atomic_long_t unused_back;	/* blocks handed out but never used */
	atomic_long_t shrunk;		/* blocks given back by the shrinker */
	atomic_long_t refill_failed;	/* refill allocations that failed */
	atomic_long_t inuse;		/* blocks in files right now */
	atomic_long_t poisoned;		/* blocks set aside: a page was poisoned */
	atomic_long_t fallback_pages;	/* 4 KiB pages in files right now, given
					 * where no block could be had */
	atomic_long_t fallback_total;	/* ... given since load */
	atomic64_t zeroing_idle_ns;	/* CPU time the kthreads spent zeroing */
	atomic64_t zeroing_sync_ns;	/* ... and faults' paths spent zeroing */
	atomic64_t throttled_ns;	/* time the kthreads slept for zero_rate_mib */
	atomic_long_t runs_built;	/* 1 GiB runs built in idle time */
	atomic_long_t runs_build_no_gib; /* ... tries that picked no GiB (none
					  * looked at qualified, or no room);
					  * runs_build_failed: the two summed */
	atomic_long_t runs_build_not_taken; /* ... tries whose GiB could not be
					     * taken (a page would not move) or
					     * that ran out of memory */
	atomic64_t runs_build_ns;	/* time spent taking them (migration included) */
	atomic_long_t runs_handed_out;	/* whole runs given to files */
	atomic_long_t runs_broken;	/* runs whose blocks went one by one */
	atomic_long_t runs_hand_stale;	/* blocks of a run a pin filed that left
					 * the file before the pin reached them
					 * (zfs.c: zfs_hand_take()) */
	atomic_long_t runs_unfit_mount;	/* runs a pin did not take: the GiB would
					 * not fit the mount... */
	atomic_long_t runs_unfit_memcg;	/* ... or the memcg, below its limit */
};

static struct node_pool *node_pools[MAX_NUMNODES];
static struct pool_counters counters;
static DEFINE_MUTEX(pool_mutex);	/* target and zero_cpus changes vs init/exit */
static unsigned long target_blocks;	/* the admin's budget, in blocks */
static struct shrinker *pool_shrinker;
static struct kobject *pool_kobj;
static struct dentry *counters_dentry;	/* debugfs pool_counters */
static struct dentry *blocks_dentry;	/* debugfs pool_blocks */

static struct node_pool *pool_of(int nid)
{
	if (nid >= 0 && nid < MAX_NUMNODES && node_pools[nid])
		return node_pools[nid];
	nid = numa_node_id();
	if (node_pools[nid])
		return node_pools[nid];
	for_each_node_state(nid, N_MEMORY)
		if (node_pools[nid])
			return node_pools[nid];
	return NULL;
}

/* Blocks the node holds or is working on. Caller holds np->lock. */
static unsigned long node_held(struct node_pool *np)
{
	return np->nr_zero + np->nr_dirty + np->nr_zeroing;
}

/*
 * Zero blocks are kept by physical address so that a burst of faults (a VM
 * start, a VFIO pin walking guest RAM upwards) gets physically consecutive
 * blocks where the pool has them: the block right after the last one handed
 * out, else the lowest. Contiguous runs let VFIO map one IOMMU entry per
 * run instead of one per block (in the lab this halved type1's MAP_DMA of
 * never-touched zeropinfs memory on boots where the pool was scattered).
 */

/* File a zero block. Caller holds np->lock; false if no xarray node could
 * be had (GFP_NOWAIT under the spinlock: a pool is no reason to dip into
 * the atomic reserves), and the caller frees the block. */
static bool zero_add_locked(struct node_pool *np, struct folio *folio)
{
	if (xa_err(xa_store(&np->zero, folio_pfn(folio) >> ZP_BLOCK_ORDER, folio,
			    GFP_NOWAIT | __GFP_NOWARN)))
		return false;
	np->nr_zero++;
	return true;
}

/* The block at index leaves zero; a run it was part of is no longer
 * whole. Caller holds np->lock. */
static struct folio *zero_erase_locked(struct node_pool *np, unsigned long index)
{
	struct folio *folio = xa_erase(&np->zero, index);

	if (!folio)
		return NULL;
	np->nr_zero--;
	/* without runs (run_build off), nothing more on the fault path */
	if (np->nr_runs && xa_erase(&np->runs, index / ZP_RUN_BLOCKS)) {
		np->nr_runs--;
		atomic_long_inc(&counters.runs_broken);
	}
	return folio;
}

/* The lowest zero block outside the whole runs, at *index; NULL when
 * every zero block is in one. One step per run at most. Caller holds
 * np->lock. */
static struct folio *loose_find_locked(struct node_pool *np, unsigned long *index)
{
	unsigned long i = 0;
	struct folio *folio;

	while ((folio = xa_find(&np->zero, &i, ULONG_MAX, XA_PRESENT))) {
		if (!np->nr_runs || !xa_load(&np->runs, i / ZP_RUN_BLOCKS)) {
			*index = i;
			return folio;
		}
		i = round_up(i + 1, ZP_RUN_BLOCKS);	/* past the run */
		if (!i)
			break;
	}
	return NULL;
}

/*
 * Take a zero block: the one after the last (a burst gets physically
 * consecutive blocks), else the lowest loose one, and a whole run's only
 * when nothing else is left (a file may take the run whole, for one IOMMU
 * entry). Caller holds np->lock.
 */
static struct folio *zero_take_locked(struct node_pool *np)
{
	unsigned long index = np->next_block;
	struct folio *folio = xa_load(&np->zero, index);

	if (!folio || (np->nr_runs && xa_load(&np->runs, index / ZP_RUN_BLOCKS))) {
		folio = loose_find_locked(np, &index);
		if (!folio) {
			index = 0;
			folio = xa_find(&np->zero, &index, ULONG_MAX, XA_PRESENT);
			if (!folio)
				return NULL;
		}
	}
	zero_erase_locked(np, index);
	np->next_block = index + 1;
	return folio;
}

/*
 * Does the page allocator hand out a gfp allocation already zeroed? With
 * init_on_alloc (Debian's default) it clears every page it hands out, so a
 * second pass would only double the work. With init_on_free the clearing
 * happens at free time instead; the pool does not rely on that and zeroes.
 */
static bool allocator_zeroes(gfp_t gfp)
{
	return want_init_on_alloc(gfp) && !want_init_on_free();
}

/*
 * Whether memory failure marked any page of the block poisoned (it marks
 * the one page it was told about, and no more when it cannot take the
 * block from its owner): 512 page flags, read off the fault path only (in
 * the lab it doubled the cost of handing out a block).
 */
static bool block_poisoned(struct folio *folio)
{
	unsigned long i;

	for (i = 0; i < folio_nr_pages(folio); i++)
		if (PageHWPoison(folio_page(folio, i)))
			return true;
	return false;
}

/*
 * The check at hand-out: the head page, and the flag memory failure sets
 * on a folio it found mapped. A page poisoned while its block waits in the
 * pool and no more is caught when the block leaves the file (and by the
 * fault path, which checks every page it maps).
 */
static bool block_poisoned_quick(struct folio *folio)
{
	return PageHWPoison(&folio->page) || zp_folio_has_hwpoisoned(folio);
}

/*
 * A poisoned block is set aside, for good: never handed out, zeroed (on
 * hardware, touching it raises another machine check) or freed (the page
 * allocator only checks single pages for poison when freeing). Returns
 * poisoned.
 */
static bool set_aside(struct folio *folio, bool poisoned)
{
	if (poisoned) {
		pr_warn_ratelimited("block at pfn %#lx has a poisoned page: set aside\n",
				    folio_pfn(folio));
		atomic_long_inc(&counters.poisoned);
	}
	return poisoned;
}

/*
 * File a block, zero or waiting to be zeroed, unless a page of it is
 * poisoned: checked again page by page when a memory failure was reported
 * since seq (zp_poison_seq(), read before the block was last checked or
 * taken off a list), since pool_memory_failure() cannot find a block that
 * is on no list. Caller holds np->lock. Returns 0; -EHWPOISON, and the
 * caller sets the block aside; -ENOMEM (no xarray node for a zero block),
 * and the caller frees it or files it dirty.
 */
static int file_block_locked(struct node_pool *np, struct folio *folio, bool zero,
			     unsigned int seq)
{
	if (zp_poison_seq() != seq && block_poisoned(folio))
		return -EHWPOISON;
	if (zero)
		return zero_add_locked(np, folio) ? 0 : -ENOMEM;
	list_add_tail(&folio->lru, &np->dirty);
	np->nr_dirty++;
	return 0;
}

/* Give a block back to the page allocator, unless it is poisoned. */
static void pool_free(struct folio *folio)
{
	if (!set_aside(folio, block_poisoned(folio)))
		folio_put(folio);
}

/* --- the per-node kthread: refill, zero, trim --- */

/* Enough free memory left to take another block for the pool? The pool
 * never takes the last 1/2^POOL_RESERVE_SHIFT of RAM, whatever the target. */
static bool have_room(void)
{
	return si_mem_available() > (long)(ZP_BLOCK_PAGES +
					   (totalram_pages() >> POOL_RESERVE_SHIFT));
}

/* Would the node be a GiB or more short of its target holding held
 * blocks? Caller holds np->lock. */
static bool gib_short(struct node_pool *np, unsigned long held)
{
	return held + ZP_RUN_BLOCKS <= np->target;
}

/* May runs be built on this host now: on, possible here, no CPU isolated
 * (said once on the kernel log)? */
static bool runs_allowed(void)
{
	if (!READ_ONCE(run_build) || !zp_runs_supported)
		return false;
	if (zp_run_cpus_isolated()) {
		pr_info_once("no 1 GiB runs: some CPUs are isolated (isolcpus=, nohz_full= or an isolated cpuset partition), and a build would wait for work on each; loose blocks only\n");
		return false;
	}
	return true;
}

/* Does the node want a 1 GiB run: runs allowed, a GiB or more below its
 * target, no failed build waiting out its back-off? Caller holds
 * np->lock. */
static bool runs_wanted(struct node_pool *np)
{
	return runs_allowed() && gib_short(np, node_held(np)) &&
	       !time_before(jiffies, np->run_backoff_until);
}

/* When loose blocks may begin a whole GiB of a shortfall: RUN_WAIT_QUIETS
 * quiet periods after run_wait_from (clamped: no wrap for any
 * run_quiet_ms). Caller holds np->lock. */
static unsigned long run_wait_until(struct node_pool *np)
{
	unsigned long quiet = msecs_to_jiffies(READ_ONCE(run_quiet_ms));

	return np->run_wait_from + min(quiet, MAX_JIFFY_OFFSET / RUN_WAIT_QUIETS) * RUN_WAIT_QUIETS;
}

/*
 * Taken blocks (a hand-out, the shrinker, a memory failure) that just left
 * the node a GiB or more short of its target start its wait for runs anew
 * (run_wait_until()); one already short waits on. Caller holds np->lock,
 * the blocks already off the node's counts.
 */
static void note_taken_locked(struct node_pool *np, unsigned long taken)
{
	if (gib_short(np, node_held(np)) && !gib_short(np, node_held(np) + taken))
		np->run_wait_from = jiffies;
}

static unsigned long run_quiet_until(struct node_pool *np)
{
	return np->last_get + msecs_to_jiffies(READ_ONCE(run_quiet_ms));
}

/* May the node build a run now? Not while the shrinker's back-off holds
 * (memory pressure: a run would migrate into it). Caller holds np->lock. */
static bool may_build_run(struct node_pool *np)
{
	return runs_wanted(np) && !time_before(jiffies, run_quiet_until(np)) &&
	       !time_before(jiffies, np->backoff_until);
}

/*
 * Is a loose block wanted? Below target, and, where runs are wanted, only
 * for the part of the shortfall below a whole GiB: the rest waits for
 * runs (loose blocks taking it first would leave no room for them), until
 * run_wait_until(): a node that hands blocks out without a quiet period
 * for that long fills a GiB with loose blocks (refill_one() then starts
 * the wait again for the next). Caller holds np->lock.
 */
static bool loose_wanted(struct node_pool *np)
{
	return node_held(np) < np->target &&
	       (!runs_wanted(np) || (np->target - node_held(np)) % ZP_RUN_BLOCKS ||
		!time_before(jiffies, run_wait_until(np)));
}

/* May the node refill with a loose block now? Caller holds np->lock. */
static bool may_refill(struct node_pool *np)
{
	return loose_wanted(np) && !time_before(jiffies, np->backoff_until) &&
	       !time_before(jiffies, np->last_get + POOL_REFILL_QUIET);
}

/*
 * Hold the kthread to zero_rate_mib: a block that took less than its share
 * of a second is followed by a sleep for the rest, once the block is in the
 * pool (usable and reclaimable meanwhile). kthread_stop() and the freezer
 * wake the sleep early; the freezer then gets the kthread here. Kthread
 * only, no lock held.
 */
static void zero_throttle(u64 took_ns)
{
	unsigned int rate = READ_ONCE(zero_rate_mib);
	u64 share_ns, start;
	ktime_t rest;

	if (!rate)
		return;
	/* 2 MiB in ns at rate MiB/s; any uint rate, no 32-bit product */
	share_ns = div_u64((u64)ZP_BLOCK_SIZE * NSEC_PER_SEC >> 20, rate);
	if (share_ns <= took_ns)
		return;
	rest = ns_to_ktime(share_ns - took_ns);
	start = ktime_get_ns();
	set_current_state(TASK_INTERRUPTIBLE);
	if (!kthread_should_stop())
		schedule_hrtimeout(&rest, HRTIMER_MODE_REL);
	__set_current_state(TASK_RUNNING);
	atomic64_add(ktime_get_ns() - start, &counters.throttled_ns);
	try_to_freeze();
}

/* Take one fresh block from the page allocator if the node may refill.
 * Kthread only; takes np->lock, drops it around the allocation. */
static bool refill_one(struct node_pool *np)
{
	unsigned int seq = zp_poison_seq();
	struct folio *folio;
	bool zero, tried, begins_gib;
	u64 t0, took;
	int ret;

	spin_lock(&np->lock);
	if (!may_refill(np)) {
		spin_unlock(&np->lock);
		return false;
	}
	begins_gib = !((np->target - node_held(np)) % ZP_RUN_BLOCKS);
	spin_unlock(&np->lock);
	t0 = ktime_get_ns();
	tried = have_room();
	folio = tried ? zp_folio_alloc_node(POOL_GFP_REFILL, ZP_BLOCK_ORDER, np->nid) : NULL;
	took = ktime_get_ns() - t0;
	if (folio && allocator_zeroes(POOL_GFP_REFILL))
		/* the allocator zeroed it here: the same bandwidth */
		atomic64_add(took, &counters.zeroing_idle_ns);
	else
		took = 0;	/* nothing zeroed yet: no share of the rate */
	if (folio && set_aside(folio, block_poisoned(folio)))
		return true;
	spin_lock(&np->lock);
	if (!folio) {
		/* only a real failure (kswapd woken) doubles the wait */
		if (tried)
			np->alloc_backoff = clamp(np->alloc_backoff * 2, POOL_ALLOC_BACKOFF,
						  POOL_ALLOC_BACKOFF_MAX);
		np->backoff_until = jiffies + max(np->alloc_backoff, POOL_ALLOC_BACKOFF);
		spin_unlock(&np->lock);
		atomic_long_inc(&counters.refill_failed);
		return false;
	}
	np->alloc_backoff = 0;
	zero = allocator_zeroes(POOL_GFP_REFILL);
	ret = file_block_locked(np, folio, zero, seq);
	if (ret == -ENOMEM) {
		zero = false;
		ret = file_block_locked(np, folio, false, seq);
	}
	/* a block that began a whole GiB of the shortfall (runs waited out:
	 * loose_wanted()) lets the rest of that GiB follow; the next GiB
	 * waits again. Still one block into a GiB now: hand-outs while the
	 * lock was dropped may have undone the beginning. */
	if (!ret && begins_gib && node_held(np) < np->target &&
	    (np->target - node_held(np)) % ZP_RUN_BLOCKS == ZP_RUN_BLOCKS - 1)
		np->run_wait_from = jiffies;
	spin_unlock(&np->lock);
	if (ret)
		set_aside(folio, true);		/* -EHWPOISON */
	else if (zero)
		atomic_long_inc(&counters.zeroed_alloc);
	if (took)
		zero_throttle(took);
	return true;
}

/*
 * File a block the kthread holds (counted in nr_zeroing) zero: zeroed here
 * first unless it already is (zeroed: the allocator did), set aside if
 * poisoned, freed if it cannot be filed. Returns whether it was filed;
 * *took, the ns spent zeroing (for zero_throttle()). Kthread only; takes
 * np->lock, not held across the zeroing.
 */
static bool zero_and_file(struct node_pool *np, struct folio *folio, bool zeroed,
			  unsigned int seq, u64 *took)
{
	bool poisoned = set_aside(folio, block_poisoned(folio));
	int ret = 0;
	u64 t0;

	*took = 0;
	if (!poisoned && !zeroed) {
		t0 = ktime_get_ns();
		zp_zero_folio(folio, true);
		*took = ktime_get_ns() - t0;
		atomic64_add(*took, &counters.zeroing_idle_ns);
	}
	spin_lock(&np->lock);
	np->nr_zeroing--;
	if (!poisoned)
		ret = file_block_locked(np, folio, true, seq);
	spin_unlock(&np->lock);
	if (ret == -EHWPOISON)
		set_aside(folio, true);
	else if (ret)
		pool_free(folio);
	return !poisoned && !ret;
}

/* File block of a run just built (NULL: it could not be made), counted in
 * nr_zeroing since the build began. Kthread only; takes np->lock. */
static bool file_run_block(struct node_pool *np, struct folio *folio, bool zeroed,
			   unsigned int seq)
{
	u64 took;

	if (!folio) {
		spin_lock(&np->lock);
		np->nr_zeroing--;
		spin_unlock(&np->lock);
		return false;
	}
	if (!zero_and_file(np, folio, zeroed, seq, &took))
		return false;
	atomic_long_inc(zeroed ? &counters.zeroed_alloc : &counters.zeroed_idle);
	if (took)
		zero_throttle(took);
	return true;
}

/*
 * Keep the run of GiB gib whole for a file that takes a GiB at once
 * (zp_pool_get_run()) if all its blocks were filed (whole) and are still
 * in zero (a fault may have taken one while the others were being filed);
 * else let its reserved entry go. The entry was reserved (xa_reserve()):
 * no allocation under the lock. Takes np->lock.
 */
static void keep_run(struct node_pool *np, unsigned long gib, bool whole)
{
	unsigned long k;

	spin_lock(&np->lock);
	for (k = 0; whole && k < ZP_RUN_BLOCKS; k++)
		whole = xa_load(&np->zero, gib * ZP_RUN_BLOCKS + k);
	if (whole && !xa_err(xa_store(&np->runs, gib, xa_mk_value(gib), GFP_NOWAIT)))
		np->nr_runs++;
	else
		xa_release(&np->runs, gib);
	spin_unlock(&np->lock);
}

/*
 * Whether blocks[] is a whole run (a block that could not be made, or was
 * set aside, leaves it in pieces) whose entry in np->runs could be
 * reserved for keep_run(); *gib, its GiB. May sleep; no lock held.
 */
static bool run_reserve(struct node_pool *np, struct folio **blocks, unsigned long *gib)
{
	unsigned long k;

	for (k = 0; k < ZP_RUN_BLOCKS; k++)
		if (!blocks[k])
			return false;
	*gib = folio_pfn(blocks[0]) >> ZP_RUN_ORDER;
	return !xa_reserve(&np->runs, *gib, GFP_KERNEL);
}

/* File a run's blocks just built, in physical order, and keep the run
 * whole where every block made it (keep_run()). Kthread only. */
static void file_run(struct node_pool *np, struct folio **blocks, unsigned int seq)
{
	bool zeroed = allocator_zeroes(zp_run_gfp), whole = true, reserved;
	unsigned long k, gib = 0;

	reserved = run_reserve(np, blocks, &gib);
	for (k = 0; k < ZP_RUN_BLOCKS; k++)
		whole &= file_run_block(np, blocks[k], zeroed, seq);
	if (reserved)
		keep_run(np, gib, whole);
}

/* zp_run_build() at SCHED_NORMAL, nice 19: migrating the GiB's pages
 * takes rmap and page locks, which a SCHED_IDLE task must not hold while
 * VMs keep every CPU busy (the priority inversion POOL_GFP_REFILL avoids). */
static int run_build_unidle(int nid, unsigned long *cursor, struct folio **blocks)
{
	struct sched_attr normal = { .size = sizeof(normal), .sched_policy = SCHED_NORMAL,
				     .sched_nice = MAX_NICE };
	struct sched_attr idle = { .size = sizeof(idle), .sched_policy = SCHED_IDLE };
	int ret;

	sched_setattr_nocheck(current, &normal);
	ret = zp_run_build(nid, cursor, blocks);
	sched_setattr_nocheck(current, &idle);
	return ret;
}

/*
 * Build one 1 GiB run when the node wants one and its last hand-out is
 * run_quiet_ms past, and file its 512 blocks zero, in physical order,
 * where a burst of hand-outs takes them in order (zero_take_locked()).
 * They count as held (nr_zeroing) from the start, so no loose refill
 * takes their room meanwhile. A failure backs off (POOL_RUN_BACKOFF,
 * doubling), and loose blocks fill the pool meanwhile. Kthread only; no
 * lock held across the build, np->lock taken around the counts.
 */
static bool build_run(struct node_pool *np)
{
	unsigned int seq = zp_poison_seq();
	struct folio **blocks;
	unsigned long cursor;
	u64 t0;
	int ret;

	spin_lock(&np->lock);
	if (!may_build_run(np)) {
		spin_unlock(&np->lock);
		return false;
	}
	cursor = np->run_cursor;
	np->nr_zeroing += ZP_RUN_BLOCKS;
	spin_unlock(&np->lock);
	blocks = kmalloc_array(ZP_RUN_BLOCKS, sizeof(*blocks), GFP_KERNEL);
	t0 = ktime_get_ns();
	ret = blocks ? run_build_unidle(np->nid, &cursor, blocks) : -ENOMEM;
	atomic64_add(ktime_get_ns() - t0, &counters.runs_build_ns);
	spin_lock(&np->lock);
	np->run_cursor = cursor;
	if (ret) {
		np->nr_zeroing -= ZP_RUN_BLOCKS;
		np->run_backoff = clamp(np->run_backoff * 2, POOL_RUN_BACKOFF, POOL_RUN_BACKOFF_MAX);
		np->run_backoff_until = jiffies + np->run_backoff;
	} else {
		np->run_backoff = 0;
	}
	spin_unlock(&np->lock);
	if (ret) {
		atomic_long_inc(ret == -ENOSPC ? &counters.runs_build_no_gib :
						 &counters.runs_build_not_taken);
	} else {
		file_run(np, blocks, seq);
		atomic_long_inc(&counters.runs_built);
	}
	kfree(blocks);
	return true;
}

/* Zero one dirty block. Kthread only; np->lock is dropped while zeroing
 * (the block is counted in nr_zeroing meanwhile). */
static bool zero_one(struct node_pool *np)
{
	unsigned int seq = zp_poison_seq();
	struct folio *folio;
	u64 took;

	spin_lock(&np->lock);
	folio = list_first_entry_or_null(&np->dirty, struct folio, lru);
	if (folio) {
		list_del(&folio->lru);
		np->nr_dirty--;
		np->nr_zeroing++;
	}
	spin_unlock(&np->lock);
	if (!folio)
		return false;
	if (zero_and_file(np, folio, false, seq, &took)) {
		atomic_long_inc(&counters.zeroed_idle);
		zero_throttle(took);
	}
	return true;
}

/* Take one block off the node, dirty ones first. Caller holds np->lock. */
static struct folio *take_block_locked(struct node_pool *np)
{
	struct folio *folio;

	folio = list_first_entry_or_null(&np->dirty, struct folio, lru);
	if (!folio)
		return zero_take_locked(np);
	np->nr_dirty--;
	list_del(&folio->lru);
	return folio;
}

/* Give one block back if the node holds more than its target. Takes and
 * drops np->lock; the block is freed outside it. */
static bool trim_one(struct node_pool *np)
{
	struct folio *folio = NULL;

	spin_lock(&np->lock);
	if (node_held(np) > np->target)
		folio = take_block_locked(np);
	spin_unlock(&np->lock);
	if (folio)
		pool_free(folio);
	return folio;
}

static bool node_has_work(struct node_pool *np)
{
	bool work;

	spin_lock(&np->lock);
	work = np->nr_dirty || node_held(np) > np->target || may_refill(np) ||
	       may_build_run(np);
	spin_unlock(&np->lock);
	return work;
}

/*
 * How long to sleep when there is no work now: until the end of a backoff
 * or quiet period, or, with nothing pending, until woken (idle: the next
 * hand-out wakes the thread).
 */
static long node_sleep_time(struct node_pool *np)
{
	unsigned long until;
	long t = MAX_SCHEDULE_TIMEOUT;

	spin_lock(&np->lock);
	if (loose_wanted(np)) {
		until = max(np->backoff_until, np->last_get + POOL_REFILL_QUIET);
		if (time_before(jiffies, until))
			t = until - jiffies + 1;
	}
	if (runs_wanted(np)) {
		until = max(run_quiet_until(np), np->backoff_until);
		if (time_before(jiffies, until))
			t = min_t(long, t, until - jiffies + 1);
		until = run_wait_until(np);	/* loose blocks may fill then */
		if (time_before(jiffies, until))
			t = min_t(long, t, until - jiffies + 1);
	}
	np->idle = t == MAX_SCHEDULE_TIMEOUT;
	spin_unlock(&np->lock);
	return t;
}

static bool node_woken(struct node_pool *np)
{
	return !READ_ONCE(np->idle) || node_has_work(np) || kthread_should_stop();
}

static void node_sleep(struct node_pool *np)
{
	long t = node_sleep_time(np);

	if (t == MAX_SCHEDULE_TIMEOUT)
		wait_event_freezable(np->wait, node_woken(np));
	else
		wait_event_freezable_timeout(np->wait,
					     node_has_work(np) || kthread_should_stop(), t);
}

static int pool_thread(void *data)
{
	struct node_pool *np = data;
	struct sched_attr attr = { .size = sizeof(attr), .sched_policy = SCHED_IDLE };

	sched_setattr_nocheck(current, &attr);
	set_freezable();
	complete(&np->started);
	while (!kthread_should_stop()) {
		bool did = trim_one(np);

		did |= zero_one(np);	/* a dirty block first: it is already paid for */
		if (!did)
			did = build_run(np);
		if (!did)
			did = refill_one(np);
		if (did) {
			cond_resched();
			try_to_freeze();	/* a long refill must not hold up suspend */
			continue;
		}
		node_sleep(np);
	}
	return 0;
}

/* --- handing blocks out and taking note of returns --- */

/* A hand-out of taken blocks off the node's lists (0: a fresh block from
 * the page allocator): the quiet periods count from now, and an idle
 * kthread is to be woken (returns whether), once per burst. Caller holds
 * np->lock. */
static bool handed_out_locked(struct node_pool *np, unsigned long taken)
{
	bool wake = np->idle;

	if (!time_before(jiffies, run_quiet_until(np)))
		np->run_wait_from = jiffies;	/* hand-outs after a quiet period */
	note_taken_locked(np, taken);
	np->last_get = jiffies;
	np->idle = false;
	return wake;
}

/* The poison check at hand-out: a fresh block, or one where no memory
 * failure report comes (zp_poison_watched()), page by page; the pool's
 * own (checked page by page when filed) by their folio flags. */
static bool hand_out_poisoned(struct folio *folio, bool fresh)
{
	return fresh || !zp_poison_watched() ? block_poisoned(folio) :
					       block_poisoned_quick(folio);
}

/*
 * Take a zero block from the node, else a dirty one (*zero says which).
 * Takes and drops np->lock; wakes the kthread once per burst of hand-outs
 * (it then sleeps out the quiet period by itself: a wake-up per block cost
 * an IPI each).
 */
static struct folio *node_take(struct node_pool *np, bool *zero)
{
	struct folio *folio;
	bool wake;

	spin_lock(&np->lock);
	folio = zero_take_locked(np);
	*zero = folio != NULL;
	if (!folio) {
		folio = list_first_entry_or_null(&np->dirty, struct folio, lru);
		if (folio) {
			np->nr_dirty--;
			list_del(&folio->lru);
		}
	}
	wake = handed_out_locked(np, folio ? 1 : 0);
	spin_unlock(&np->lock);
	if (wake)
		wake_up(&np->wait);
	return folio;
}

/*
 * A fresh block for a fault. After a failure the node backs off
 * (sync_backoff_until, 0 when it does not): no fault tries before the
 * deadline, and at the deadline one fault claims the next try (cmpxchg),
 * the others still take none. A dying task neither tries (compaction
 * gives up on it at once) nor sets the back-off for the others.
 */
static struct folio *alloc_sync(struct node_pool *np, gfp_t gfp)
{
	unsigned long until = np ? READ_ONCE(np->sync_backoff_until) : 0;
	struct folio *folio;

	if (fatal_signal_pending(current))
		return NULL;
	if (until && (time_before(jiffies, until) ||
		      cmpxchg(&np->sync_backoff_until, until, jiffies + POOL_SYNC_BACKOFF) != until))
		return NULL;
	folio = zp_folio_alloc_node(gfp, ZP_BLOCK_ORDER, np ? np->nid : numa_mem_id());
	if (folio) {
		atomic_long_inc(&counters.alloc_sync);
		if (until)
			WRITE_ONCE(np->sync_backoff_until, 0);
		return folio;
	}
	atomic_long_inc(&counters.alloc_sync_failed);
	if (np && !fatal_signal_pending(current))
		WRITE_ONCE(np->sync_backoff_until, (jiffies + POOL_SYNC_BACKOFF) ?: 1);
	return NULL;
}

/* A block from the node's lists, else from the page allocator (*fresh);
 * NULL when neither has one. Poisoned blocks are set aside on the way:
 * fresh ones checked page by page, the pool's own (checked page by page
 * when they came in) by their folio flags. */
static struct folio *pool_take(struct node_pool *np, gfp_t gfp, bool *zero, bool *fresh)
{
	struct folio *folio;

	do {
		folio = np ? node_take(np, zero) : NULL;
		*fresh = !folio;
		if (!folio) {
			folio = alloc_sync(np, gfp);
			if (!folio)
				return NULL;
		}
	} while (set_aside(folio, hand_out_poisoned(folio, *fresh)));
	return folio;
}

struct folio *zp_pool_get(int nid, gfp_t gfp)
{
	bool zero = false, fresh = false;
	struct folio *folio = pool_take(pool_of(nid), gfp, &zero, &fresh);

	if (!folio)
		return NULL;
	if (zero) {
		atomic_long_inc(&counters.handed_zero);
	} else {
		/* zeroed on this fault's path, by the allocator or here */
		if (!(fresh && allocator_zeroes(gfp))) {
			u64 t0 = ktime_get_ns();

			zp_zero_folio(folio, true);
			atomic64_add(ktime_get_ns() - t0, &counters.zeroing_sync_ns);
		}
		atomic_long_inc(&counters.zeroed_sync);
	}
	atomic_long_inc(&counters.handed_out);
	atomic_long_inc(&counters.inuse);
	return folio;
}

bool zp_pool_run_ready(int nid)
{
	struct node_pool *np = pool_of(nid);

	return np && READ_ONCE(np->nr_runs);
}

/* The lowest whole run's blocks off zero into blocks[]. Caller holds
 * np->lock. */
static bool run_take_locked(struct node_pool *np, struct folio **blocks)
{
	unsigned long gib = 0, k;

	if (!xa_find(&np->runs, &gib, ULONG_MAX, XA_PRESENT))
		return false;
	xa_erase(&np->runs, gib);
	np->nr_runs--;
	for (k = 0; k < ZP_RUN_BLOCKS; k++)
		blocks[k] = zero_erase_locked(np, gib * ZP_RUN_BLOCKS + k);
	return true;
}

bool zp_pool_get_run(int nid, struct folio **blocks)
{
	struct node_pool *np = pool_of(nid);
	unsigned long k, n = 0;
	bool wake, taken;

	if (!np)
		return false;
	spin_lock(&np->lock);
	taken = run_take_locked(np, blocks);
	wake = taken && handed_out_locked(np, ZP_RUN_BLOCKS);
	spin_unlock(&np->lock);
	if (!taken)
		return false;
	if (wake)
		wake_up(&np->wait);
	for (k = 0; k < ZP_RUN_BLOCKS; k++) {
		if (blocks[k] && set_aside(blocks[k], hand_out_poisoned(blocks[k], false)))
			blocks[k] = NULL;
		n += blocks[k] != NULL;
	}
	atomic_long_add(n, &counters.handed_out);
	atomic_long_add(n, &counters.handed_zero);
	atomic_long_add(n, &counters.inuse);
	atomic_long_inc(&counters.runs_handed_out);
	return true;
}

struct folio *zp_pool_get_page(int nid)
{
	struct folio *folio = zp_folio_alloc_node(POOL_GFP_PAGE, 0, nid);

	if (!folio)
		return NULL;
	atomic_long_inc(&counters.fallback_pages);
	atomic_long_inc(&counters.fallback_total);
	return folio;
}

/* A fallback page goes back to the page allocator, which keeps a page
 * memory failure marked out of its free lists by itself (order 0). */
static bool page_put(struct folio *folio)
{
	if (folio_order(folio) == ZP_BLOCK_ORDER)
		return false;
	atomic_long_dec(&counters.fallback_pages);
	folio_put(folio);
	return true;
}

/* Off every list since it was handed out: checked page by page again. */
void zp_pool_put_unused(struct folio *folio)
{
	struct node_pool *np;
	unsigned int seq;
	int ret;

	if (page_put(folio))
		return;
	np = pool_of(folio_nid(folio));
	seq = zp_poison_seq();
	atomic_long_dec(&counters.inuse);
	atomic_long_inc(&counters.unused_back);
	if (!np || set_aside(folio, block_poisoned(folio))) {
		if (!np)
			pool_free(folio);
		return;
	}
	spin_lock(&np->lock);
	ret = file_block_locked(np, folio, true, seq);
	spin_unlock(&np->lock);
	if (ret == -EHWPOISON)
		set_aside(folio, true);
	else if (ret)
		pool_free(folio);
	if (ret)
		return;
	wake_up(&np->wait);	/* may now be over target */
}

void zp_pool_put_unused_run(struct folio **blocks)
{
	struct node_pool *np = blocks[0] ? pool_of(folio_nid(blocks[0])) : NULL;
	unsigned long k, gib = 0;
	bool reserved = np && run_reserve(np, blocks, &gib);

	for (k = 0; k < ZP_RUN_BLOCKS; k++)
		if (blocks[k])
			zp_pool_put_unused(blocks[k]);
	if (reserved)
		keep_run(np, gib, true);
	atomic_long_dec(&counters.runs_handed_out);
}

void zp_pool_count_hand_stale(void)
{
	atomic_long_inc(&counters.runs_hand_stale);
}

void zp_pool_count_run_unfit(bool memcg)
{
	atomic_long_inc(memcg ? &counters.runs_unfit_memcg : &counters.runs_unfit_mount);
}

/* Nothing for the kthread here: the folio goes to the page allocator once
 * its last user (a mapping, a DMA pin) lets go, and the pool's own count
 * did not change. A block something else still holds (a DMA mapping,
 * zeropin's or type1's) is parked until it lets go (park.c), since that
 * last put would give a poisoned block back unchecked. Called by the page
 * cache's release (free_folio, on truncation) with no spinlock held; may
 * sleep (park.c). */
void zp_pool_release(struct folio *folio)
{
	if (page_put(folio))
		return;
	atomic_long_dec(&counters.inuse);
	atomic_long_inc(&counters.returned);
	if (!zp_park(folio))
		pool_free(folio);
}

/* --- memory failure (poison.c) --- */

/* The dirty block at pfn head, taken off its list; NULL when it is not
 * there. Caller holds np->lock. */
static struct folio *dirty_take_locked(struct node_pool *np, unsigned long head)
{
	struct folio *folio;

	list_for_each_entry(folio, &np->dirty, lru) {
		if (folio_pfn(folio) != head)
			continue;
		list_del(&folio->lru);
		np->nr_dirty--;
		return folio;
	}
	return NULL;
}

/* The block at pfn head, taken off np's lists; NULL when not there.
 * Takes np->lock. */
static struct folio *node_take_block(struct node_pool *np, unsigned long head)
{
	struct folio *folio;

	spin_lock(&np->lock);
	folio = zero_erase_locked(np, head >> ZP_BLOCK_ORDER);
	if (!folio)
		folio = dirty_take_locked(np, head);
	note_taken_locked(np, folio ? 1 : 0);
	spin_unlock(&np->lock);
	if (folio)
		wake_up(&np->wait);	/* below target now: refill */
	return folio;
}

/*
 * A block taken from its list between memory_failure() marking the page
 * and reporting it (milliseconds: the report waits for LRU drains on every
 * CPU), now in a file: the large folio holding pfn gets the flag
 * memory_failure() sets on the large folios it handles, so the fault path
 * (do_set_pmd()) and the pin path refuse it from now on. Only a 2 MiB
 * folio that still holds the poisoned page, referenced meanwhile. From
 * the probe (preemption off): takes a folio reference, no lock.
 */
static void flag_handed_out(unsigned long pfn)
{
	struct page *page = pfn_to_page(pfn);
	struct folio *folio = page_folio(page);

	if (!folio_try_get(folio))
		return;
	if (page_folio(page) == folio && folio_order(folio) == ZP_BLOCK_ORDER &&
	    PageHWPoison(page))
		zp_folio_set_has_hwpoisoned(folio);
	folio_put(folio);
}

/*
 * A memory failure reported at pfn: a block of the pool holding it leaves
 * its list at once and is set aside. A block on no list (being zeroed or
 * filed) is not found here: the paths that file blocks check
 * zp_poison_seq() (file_block_locked()). A block handed out meanwhile gets
 * its folio flagged (flag_handed_out()). Called with preemption off (a
 * tracepoint probe) in process context; takes each pool's lock in turn.
 */
static void pool_memory_failure(unsigned long pfn)
{
	unsigned long head = ALIGN_DOWN(pfn, ZP_BLOCK_PAGES);
	struct folio *folio = NULL;
	int nid;

	if (!pfn_valid(pfn))
		return;
	/* its node's pool first; a block given back unused may sit in
	 * another one (pool_of() falls back to the local node) */
	nid = pfn_to_nid(pfn);
	if (nid >= 0 && nid < MAX_NUMNODES && node_pools[nid])
		folio = node_take_block(node_pools[nid], head);
	for_each_node_state(nid, N_MEMORY)
		if (!folio && node_pools[nid])
			folio = node_take_block(node_pools[nid], head);
	if (folio)
		set_aside(folio, true);
	else
		flag_handed_out(pfn);
}

/* debugfs zeropin/pool_blocks: every block the pool holds, "node pfn
 * state", for RAS tools (which physical memory is idle in the pool) and
 * the tests. Takes each node's lock for its dirty list only. */
static int blocks_show(struct seq_file *m, void *v)
{
	struct folio *folio;
	unsigned long index;
	int nid;

	for_each_node_state(nid, N_MEMORY) {
		struct node_pool *np = node_pools[nid];

		if (!np)
			continue;
		/* the xarray under RCU, as full_runs() reads it; the dirty
		 * list (short: blocks waiting for the kthread) locked */
		xa_for_each(&np->zero, index, folio)
			seq_printf(m, "%d %#lx zero\n", nid, index << ZP_BLOCK_ORDER);
		spin_lock(&np->lock);
		list_for_each_entry(folio, &np->dirty, lru)
			seq_printf(m, "%d %#lx dirty\n", nid, folio_pfn(folio));
		spin_unlock(&np->lock);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(blocks);

/* --- budget --- */

/* Split the budget across nodes with memory, and wake the threads.
 * Caller holds pool_mutex. */
static void set_target_locked(unsigned long blocks)
{
	unsigned long nodes = 0, share, extra;
	int nid;

	target_blocks = blocks;
	for_each_node_state(nid, N_MEMORY)
		nodes += node_pools[nid] != NULL;
	if (!nodes)
		return;
	share = blocks / nodes;
	extra = blocks % nodes;
	for_each_node_state(nid, N_MEMORY) {
		struct node_pool *np = node_pools[nid];
		bool was_short;

		if (!np)
			continue;
		spin_lock(&np->lock);
		/* a node already short waits on from when it went short:
		 * still one loose GiB per wait at most */
		was_short = gib_short(np, node_held(np));
		np->target = share + (extra ? 1 : 0);
		if (!was_short && gib_short(np, node_held(np)))
			np->run_wait_from = jiffies;
		np->backoff_until = jiffies;
		np->alloc_backoff = 0;
		np->run_backoff_until = jiffies;
		np->run_backoff = 0;
		np->idle = false;	/* a run may wait for a quiet period */
		spin_unlock(&np->lock);
		if (extra)
			extra--;
		wake_up(&np->wait);
	}
}

/* --- shrinker --- */

static unsigned long pool_count(struct shrinker *s, struct shrink_control *sc)
{
	struct node_pool *np = node_pools[sc->nid];
	unsigned long n;

	if (!np)
		return 0;
	spin_lock(&np->lock);
	n = (np->nr_zero + np->nr_dirty) * ZP_BLOCK_PAGES;
	spin_unlock(&np->lock);
	return n ? n : SHRINK_EMPTY;
}

/* Free blocks of node sc->nid, dirty first, one np->lock section per
 * block; never sleeps. Refill then backs off POOL_SHRINK_BACKOFF, and
 * the kthread is woken to time its sleep to the back-off's end. */
static unsigned long pool_scan(struct shrinker *s, struct shrink_control *sc)
{
	struct node_pool *np = node_pools[sc->nid];
	unsigned long freed = 0;
	struct folio *folio;

	if (!np)
		return SHRINK_STOP;
	while (freed < sc->nr_to_scan) {
		spin_lock(&np->lock);
		folio = take_block_locked(np);
		note_taken_locked(np, folio ? 1 : 0);
		np->backoff_until = jiffies + POOL_SHRINK_BACKOFF;
		np->idle = false;	/* see below */
		spin_unlock(&np->lock);
		if (!folio)
			break;
		pool_free(folio);
		atomic_long_inc(&counters.shrunk);
		freed += ZP_BLOCK_PAGES;
	}
	/* an idle kthread sleeps until woken, and woken only when not idle
	 * (node_woken()): it must time its sleep to the back-off's end, or
	 * the pool would stay short until the next hand-out */
	if (freed)
		wake_up(&np->wait);
	return freed ? freed : SHRINK_STOP;
}

/* --- sysfs: /sys/kernel/zeropin/pool --- */

#define BLOCKS_TO_MIB(n) ((n) * (ZP_BLOCK_SIZE >> 20))

static unsigned long sum_nodes(size_t offset)
{
	unsigned long sum = 0;
	int nid;

	for_each_node_state(nid, N_MEMORY) {
		struct node_pool *np = node_pools[nid];

		if (!np)
			continue;
		spin_lock(&np->lock);
		sum += *(unsigned long *)((char *)np + offset);
		spin_unlock(&np->lock);
	}
	return sum;
}

static ssize_t target_mib_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%lu\n", BLOCKS_TO_MIB(READ_ONCE(target_blocks)));
}

static ssize_t target_mib_store(struct kobject *k, struct kobj_attribute *a,
				const char *buf, size_t len)
{
	unsigned long mib;
	int ret = kstrtoul(buf, 0, &mib);

	if (ret)
		return ret;
	if (mib > (totalram_pages() << PAGE_SHIFT >> 20))
		return -EINVAL;
	mutex_lock(&pool_mutex);
	set_target_locked(DIV_ROUND_UP(mib, ZP_BLOCK_SIZE >> 20));
	mutex_unlock(&pool_mutex);
	return len;
}

static ssize_t zero_mib_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%lu\n", BLOCKS_TO_MIB(sum_nodes(offsetof(struct node_pool, nr_zero))));
}

static ssize_t dirty_mib_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%lu\n",
			  BLOCKS_TO_MIB(sum_nodes(offsetof(struct node_pool, nr_dirty)) +
					sum_nodes(offsetof(struct node_pool, nr_zeroing))));
}

static ssize_t inuse_mib_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%lu\n", BLOCKS_TO_MIB(atomic_long_read(&counters.inuse)));
}

/*
 * 1 GiB-aligned physical ranges wholly made of a node's zero blocks, counted
 * when asked rather than kept up to date on every hand-out. The zero
 * xarray is walked under RCU without np->lock: a statistic, not a promise.
 */
static unsigned long full_runs(void)
{
	unsigned long index, run, n, full = 0;
	struct folio *folio;
	int nid;

	for_each_node_state(nid, N_MEMORY) {
		struct node_pool *np = node_pools[nid];

		if (!np)
			continue;
		run = ULONG_MAX;
		n = 0;
		xa_for_each(&np->zero, index, folio) {
			cond_resched();	/* a large pool is a long walk */
			if (index / ZP_RUN_BLOCKS != run) {
				run = index / ZP_RUN_BLOCKS;
				n = 0;
			}
			full += ++n == ZP_RUN_BLOCKS;
		}
	}
	return full;
}

static ssize_t runs_1g_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%lu\n", full_runs());
}

static struct kobj_attribute target_mib_attr = __ATTR(target_mib, 0644, target_mib_show, target_mib_store);
/* The statistics tell how much guest RAM other tenants' VMs took and when:
 * root only (0400), like the debugfs counters. */
static struct kobj_attribute zero_mib_attr = __ATTR(zero_mib, 0400, zero_mib_show, NULL);
static struct kobj_attribute dirty_mib_attr = __ATTR(dirty_mib, 0400, dirty_mib_show, NULL);
static struct kobj_attribute inuse_mib_attr = __ATTR(inuse_mib, 0400, inuse_mib_show, NULL);
static struct kobj_attribute runs_1g_attr = __ATTR(runs_1g, 0400, runs_1g_show, NULL);

static struct attribute *pool_attrs[] = {
	&target_mib_attr.attr,
	&zero_mib_attr.attr,
	&dirty_mib_attr.attr,
	&inuse_mib_attr.attr,
	&runs_1g_attr.attr,
	NULL,
};

static const struct attribute_group pool_group = { .attrs = pool_attrs };

/* --- debugfs: zeropin/pool_counters, one "name value" per line --- */

static int counters_show(struct seq_file *m, void *v)
{
#define SHOW(f) seq_printf(m, "%s %ld\n", #f, atomic_long_read(&counters.f))
	SHOW(zeroed_idle);
	SHOW(zeroed_alloc);
	SHOW(zeroed_sync);
	SHOW(alloc_sync);
	SHOW(alloc_sync_failed);
	SHOW(handed_out);
	SHOW(handed_zero);
	SHOW(returned);
	SHOW(unused_back);
	SHOW(shrunk);
	SHOW(refill_failed);
	SHOW(inuse);
	SHOW(poisoned);
	SHOW(fallback_pages);
	SHOW(fallback_total);
	SHOW(runs_built);
	seq_printf(m, "runs_build_failed %ld\n",
		   atomic_long_read(&counters.runs_build_no_gib) +
		   atomic_long_read(&counters.runs_build_not_taken));
	SHOW(runs_build_no_gib);
	SHOW(runs_build_not_taken);
	SHOW(runs_handed_out);
	SHOW(runs_broken);
	SHOW(runs_hand_stale);
	SHOW(runs_unfit_mount);
	SHOW(runs_unfit_memcg);
#undef SHOW
#define SHOW_MS(f, name) seq_printf(m, "%s %llu\n", name, \
				    div_u64(atomic64_read(&counters.f), NSEC_PER_MSEC))
	SHOW_MS(zeroing_idle_ns, "zeroing_idle_ms");
	SHOW_MS(zeroing_sync_ns, "zeroing_sync_ms");
	SHOW_MS(throttled_ns, "throttled_ms");
	SHOW_MS(runs_build_ns, "runs_build_ms");
#undef SHOW_MS
	seq_printf(m, "runs_1g %lu\n", full_runs());
	seq_printf(m, "parked %lu\n", zp_parked());
	seq_printf(m, "park_failed %lu\n", zp_park_failed());
	seq_printf(m, "runs_supported %d\n", zp_runs_supported);
	seq_printf(m, "runs_cpus_isolated %d\n", zp_run_cpus_isolated());
	/* whether memory failure reports come (poison.c), and how many */
	seq_printf(m, "poison_watched %d\n", zp_poison_watched());
	seq_printf(m, "poison_reports %u\n", zp_poison_seq());
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(counters);

/* --- zero_cpus: where the kthreads run --- */

/*
 * The default binding, into mask: node nid's CPUs that no isolation keeps
 * free (zp_cpu_isolated(): an isolated core is a vCPU's, not the
 * zeroing's), else the housekeeping CPUs elsewhere (this node's memory
 * zeroed remotely), else, every CPU isolated, the node's CPUs. Takes
 * rcu_read_lock(); a hint read without the hotplug lock.
 */
static void default_cpus(struct cpumask *mask, int nid)
{
	int cpu;

	rcu_read_lock();	/* zp_cpu_isolated()'s contract */
	for_each_online_cpu(cpu)
		if (!zp_cpu_isolated(cpu))
			cpumask_set_cpu(cpu, mask);
	rcu_read_unlock();
	if (cpumask_intersects(mask, cpumask_of_node(nid)))
		cpumask_and(mask, mask, cpumask_of_node(nid));
	else if (cpumask_empty(mask))
		cpumask_copy(mask, cpumask_of_node(nid));
}

/*
 * Bind a node's kthread to the CPUs of want on its node, else to all of
 * want (housekeeping CPUs elsewhere zero this node's memory remotely),
 * else (want empty: the default) to default_cpus(). What the admin lists
 * is taken as it is, isolated or not. Caller holds pool_mutex (init's
 * create_node() too); may sleep.
 */
static void node_set_cpus(struct node_pool *np, const struct cpumask *want)
{
	cpumask_var_t mask;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL)) {
		set_cpus_allowed_ptr(np->thread, cpumask_of_node(np->nid));
		return;
	}
	if (cpumask_empty(want))
		default_cpus(mask, np->nid);
	else if (!cpumask_and(mask, want, cpumask_of_node(np->nid)))
		cpumask_copy(mask, want);
	/* no online CPU in it (a CPU-less node, every other CPU isolated):
	 * any online CPU rather than where the kthread happened to be */
	if (set_cpus_allowed_ptr(np->thread, mask))
		set_cpus_allowed_ptr(np->thread, cpu_online_mask);
	free_cpumask_var(mask);
}

/*
 * Parse and apply zero_cpus. A list with no online CPU is refused
 * (-EINVAL), as the kthreads could not run. Takes pool_mutex: the node
 * pools may be coming or going (at load, this runs before they exist).
 */
static int zero_cpus_set(const char *val, const struct kernel_param *kp)
{
	cpumask_var_t mask;
	char *list;
	int nid, ret;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	list = kstrdup(val, GFP_KERNEL);
	ret = list ? cpulist_parse(strim(list), mask) : -ENOMEM;
	kfree(list);
	cpus_read_lock();	/* no CPU goes between the check and the binding */
	if (!ret && !cpumask_empty(mask) && !cpumask_intersects(mask, cpu_online_mask))
		ret = -EINVAL;
	if (!ret) {
		mutex_lock(&pool_mutex);
		cpumask_copy(&zero_cpus_mask, mask);
		for (nid = 0; nid < MAX_NUMNODES; nid++)
			if (node_pools[nid])
				node_set_cpus(node_pools[nid], mask);
		mutex_unlock(&pool_mutex);
	}
	cpus_read_unlock();
	free_cpumask_var(mask);
	return ret;
}

static int zero_cpus_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%*pbl\n", cpumask_pr_args(&zero_cpus_mask));
}

/* --- init and exit --- */

static void destroy_node(struct node_pool *np)
{
	struct folio *folio;

	if (np->thread)
		kthread_stop(np->thread);
	while ((folio = take_block_locked(np)))
		pool_free(folio);
	xa_destroy(&np->runs);
	xa_destroy(&np->zero);
	node_pools[np->nid] = NULL;
	kfree(np);
}

static int create_node(int nid)
{
	struct node_pool *np = kzalloc_node(sizeof(*np), GFP_KERNEL, nid);

	if (!np)
		return -ENOMEM;
	np->nid = nid;
	np->run_wait_from = jiffies;
	spin_lock_init(&np->lock);
	xa_init(&np->zero);
	xa_init(&np->runs);
	INIT_LIST_HEAD(&np->dirty);
	init_waitqueue_head(&np->wait);
	init_completion(&np->started);
	node_pools[nid] = np;
	np->thread = kthread_create_on_node(pool_thread, np, ZP_KTHREAD_NODE(nid), "zeropin/%d", nid);
	if (IS_ERR(np->thread)) {
		int ret = PTR_ERR(np->thread);

		np->thread = NULL;
		destroy_node(np);
		return ret;
	}
	/* bound once it runs: since 6.14 a kthread takes the CPUs of its node
	 * (ZP_KTHREAD_NODE()), or the housekeeping ones, as it starts, over
	 * what was set before */
	wake_up_process(np->thread);
	wait_for_completion(&np->started);
	node_set_cpus(np, &zero_cpus_mask);
	return 0;
}

static void destroy_nodes(void)
{
	int nid;

	for (nid = 0; nid < MAX_NUMNODES; nid++)
		if (node_pools[nid])
			destroy_node(node_pools[nid]);
}

static int create_nodes(void)
{
	int nid, ret;

	for_each_node_state(nid, N_MEMORY) {
		ret = create_node(nid);
		if (ret) {
			destroy_nodes();
			return ret;
		}
	}
	return 0;
}

int zp_pool_init(struct kobject *parent, struct dentry *debugfs_dir)
{
	int ret;

	mutex_lock(&pool_mutex);	/* zero_cpus_set() walks the nodes */
	ret = create_nodes();
	mutex_unlock(&pool_mutex);
	if (ret)
		goto err;
	pool_shrinker = zp_shrinker_create("zeropin-pool", pool_count, pool_scan);
	if (IS_ERR(pool_shrinker)) {
		ret = PTR_ERR(pool_shrinker);
		goto err_nodes;
	}
	pool_kobj = kobject_create_and_add("pool", parent);
	if (!pool_kobj) {
		ret = -ENOMEM;
		goto err_shrinker;
	}
	ret = sysfs_create_group(pool_kobj, &pool_group);
	if (ret)
		goto err_kobj;
	counters_dentry = debugfs_create_file("pool_counters", 0400, debugfs_dir, NULL,
					      &counters_fops);
	blocks_dentry = debugfs_create_file("pool_blocks", 0400, debugfs_dir, NULL,
					    &blocks_fops);
	zp_park_init(pool_free);
	zp_poison_watch(pool_memory_failure);	/* -ENOENT: checked at hand-out */
	mutex_lock(&pool_mutex);
	set_target_locked(DIV_ROUND_UP(pool_mib, ZP_BLOCK_SIZE >> 20));
	mutex_unlock(&pool_mutex);
	return 0;

err_kobj:
	kobject_put(pool_kobj);
err_shrinker:
	zp_shrinker_destroy(pool_shrinker);
err_nodes:
	mutex_lock(&pool_mutex);
	destroy_nodes();
	mutex_unlock(&pool_mutex);
err:
	return ret;
}

void zp_pool_exit(void)
{
	debugfs_remove(blocks_dentry);		/* before the nodes they read */
	debugfs_remove(counters_dentry);
	zp_poison_unwatch();
	zp_park_exit();
	sysfs_remove_group(pool_kobj, &pool_group);
	kobject_put(pool_kobj);
	zp_shrinker_destroy(pool_shrinker);
	mutex_lock(&pool_mutex);
	destroy_nodes();
	mutex_unlock(&pool_mutex);
}
