/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pool.h - the pre-zeroed page pool: 2 MiB blocks (order-9 folios) per NUMA
 * node, zeroed in idle time, handed out only when zero.
 */
#ifndef ZEROPIN_POOL_H
#define ZEROPIN_POOL_H

#include <linux/gfp.h>
#include <linux/mm_types.h>

#define ZP_BLOCK_ORDER	9			/* one PMD: 2 MiB on x86-64 */
#define ZP_BLOCK_PAGES	(1UL << ZP_BLOCK_ORDER)
#define ZP_BLOCK_SIZE	(PAGE_SIZE << ZP_BLOCK_ORDER)
/* A 1 GiB run: physically contiguous, 1 GiB-aligned blocks, which the
 * IOMMU maps with one entry (run.c builds them). */
#define ZP_RUN_ORDER	(30 - PAGE_SHIFT)
#define ZP_RUN_PAGES	(1UL << ZP_RUN_ORDER)
#define ZP_RUN_BLOCKS	(ZP_RUN_PAGES >> ZP_BLOCK_ORDER)	/* 512 */

int zp_pool_init(struct kobject *parent, struct dentry *debugfs_dir);
void zp_pool_exit(void);

/*
 * A zeroed 2 MiB folio for a file, preferably from node nid's zero list,
 * else allocated and zeroed on the spot (counted). gfp: how hard that
 * allocation may try; after one failed, the node allocates none for a
 * second (POOL_SYNC_BACKOFF). Returns NULL when no block could be had.
 * May sleep.
 */
struct folio *zp_pool_get(int nid, gfp_t gfp);

/*
 * Whether node nid's pool holds a whole 1 GiB run now: a hint, read
 * without the lock, before a file asks for one.
 */
bool zp_pool_run_ready(int nid);

/*
 * The ZP_RUN_BLOCKS blocks of a whole 1 GiB run of node nid's pool, in
 * physical order: blocks[k] is the run's k-th 2 MiB, zero, each then as
 * one from zp_pool_get(); NULL where a block was found poisoned (set
 * aside). false, nothing taken, when the node holds no whole run. Takes
 * the node's lock; does not sleep.
 */
bool zp_pool_get_run(int nid, struct folio **blocks);

/* A run from zp_pool_get_run() of which no block became visible: every
 * block back, and the run kept whole again where all its blocks are. May
 * sleep. */
void zp_pool_put_unused_run(struct folio **blocks);
/* Count a block of a run a pin filed that left the file before the pin
 * reached it (debugfs runs_hand_stale). */
void zp_pool_count_hand_stale(void);
/* Count a run a pin did not take because its GiB would not fit the mount
 * or (memcg) the memcg (debugfs runs_unfit_mount, runs_unfit_memcg). */
void zp_pool_count_run_unfit(bool memcg);

/*
 * A zeroed 4 KiB folio from the page allocator (node nid preferred), for
 * a file whose block could not be had: memory too fragmented for an
 * order-9 page. Counted as a fallback (debugfs fallback_pages,
 * fallback_total). NULL only when the host is out of memory. May sleep.
 */
struct folio *zp_pool_get_page(int nid);

/* A folio from zp_pool_get() or zp_pool_get_page() that never became
 * visible: a block back to the pool, still zero; a page freed. */
void zp_pool_put_unused(struct folio *folio);

/* A file let go of a folio it got from the pool (page cache removal):
 * takes over the reference the file held, and drops it unless a page of
 * a block is poisoned (then the block is set aside for good); a block
 * something else still holds is parked until it lets go (park.c). May
 * sleep. */
void zp_pool_release(struct folio *folio);

#endif /* ZEROPIN_POOL_H */
