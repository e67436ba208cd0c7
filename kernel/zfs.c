// SPDX-License-Identifier: GPL-2.0
/*
 * zfs.c - zeropinfs: a small RAM filesystem whose files' page cache holds
 * 2 MiB folios from the pre-zeroed pool, so that QEMU (mem-path) and libvirt
 * (memory_backing_dir) get guest RAM that is already zero when VFIO pins it.
 *
 *   mount -t zeropinfs -o size=SIZE,mode=MODE,uid=UID,gid=GID none DIR
 *
 * Memory comes in whole 2 MiB blocks: ftruncate and fallocate take only
 * multiples of 2 MiB (EINVAL otherwise), so truncation and hole punching
 * always drop whole folios and a 2 MiB-aligned mapping maps each folio with
 * a single PMD. write() extends a file to exactly where it ends, as on any
 * filesystem, but still takes a whole block for it; a folio that crosses
 * such an EOF is mapped with PTEs. MAP_SHARED and MAP_PRIVATE (copy-on-write
 * into 4 KiB private copies) both work. Access past EOF raises SIGBUS.
 *
 * A failed write or fallocate leaves no block of its own past EOF; blocks
 * reserved there earlier (FALLOC_FL_KEEP_SIZE) stay.
 *
 * Every block stays a whole 2 MiB folio for as long as it is in the page
 * cache, whatever the rest of the mm tries, and stays there until the
 * file lets go of it: zfs_file_folio() files it dirty (RAM, the only copy:
 * reclaim, drop_caches and memory failure's eviction leave dirty folios
 * alone) and holds one extra reference on it, dropped in zfs_free_folio().
 * split_huge_page() insists that the reference count be exactly mappings
 * + page cache + caller, so the extra reference makes every split
 * (MADV_COLD/PAGEOUT on part of a folio, memory failure, soft offline, the
 * split_huge_pages debugfs file) fail with -EBUSY/-EAGAIN before anything
 * is unmapped. Migration (move_pages, mbind MPOL_MF_MOVE, compaction,
 * alloc_contig_range) unmaps the folio, finds it dirty with no way to
 * write it back (and the reference count off), and maps it back where it
 * was: a bounded number of tries, the data never moves. Memory offlining
 * retries that until it is interrupted, as it does for memory pinned for
 * DMA: zeropinfs memory cannot be offlined while in a file (a
 * ->migrate_folio for blocks nobody pins would allow it; not done yet).
 * 6.12's mapping_set_folio_min_order() is not used: split_huge_page()
 * asks for order 0 and a DEBUG_VM kernel then warns.
 *
 * A fragmented host: when neither the pool nor one bounded try of the
 * page allocator (ZFS_GFP_SYNC) gives a block, that block's range of the
 * file is filled with zeroed 4 KiB pages instead, each filed and held the
 * same way (zfs_add_page()): the VM lives on, mapped there with PTEs and
 * pinned there by GUP, and the pool counts the pages (fallback_pages).
 * A range is either one block or 4 KiB pages, never both; it stays in
 * pages until it is punched or truncated. A file that never fell back
 * adds its blocks without looking for pages (ZFS_PAGES_FILED). The mount is charged by the
 * page (size= is still a whole number of blocks).
 *
 * On 6.1 the core may map a folio that crosses EOF with a PMD (6.12 falls
 * back to PTEs), so a store past EOF inside the last block of a file whose
 * size is not a multiple of 2 MiB does not raise SIGBUS there; whatever
 * lies past EOF is cleared when the file grows over it
 * (zfs_clear_past_eof()), so such stores never become file content.
 *
 * Locking: inode_lock serialises size changes, writes and fallocate;
 * mapping->invalidate_lock is taken shared by faults that add folios (they
 * check EOF under it) and exclusively by truncation and hole punching, so
 * that used_pages, kept from the page cache's nrpages, is exact and no
 * fault leaves a block past EOF.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": zeropinfs: " fmt

#include <linux/fs.h>
#include <linux/falloc.h>
#include <linux/fs_context.h>
#include <linux/fs_parser.h>
#include <linux/huge_mm.h>
#include <linux/memcontrol.h>
#include <linux/mempolicy.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/statfs.h>
#include <linux/uio.h>
#include <linux/userfaultfd_k.h>

#include "compat.h"
#include "pool.h"
#include "zfs.h"

/*
 * How hard a fault may try for a block when the pool is empty: one round
 * of direct compaction and reclaim, no retries (a costly order without
 * __GFP_RETRY_MAYFAIL: the allocator gives up after the first round and
 * never calls the OOM killer for it). On a fragmented host retrying cost
 * seconds per block and still failed; the file then takes 4 KiB pages
 * for that block's range instead (zfs_add_page()).
 */
#define ZFS_GFP_SYNC	(GFP_HIGHUSER | __GFP_NOWARN)
/* The same for what filemap_add_folio() charges to the memcg: the block
 * itself (a costly order: the memcg's OOM killer never runs for it, the
 * charge fails) and the page cache's xarray node (order 0: without
 * __GFP_RETRY_MAYFAIL a charge past memory.max would OOM-kill in the
 * memcg). A VMM whose guest RAM outgrows its memory.max gets SIGBUS or
 * ENOMEM for the block; guest RAM here is never reclaimable. */
#define ZFS_GFP_CHARGE	(GFP_KERNEL | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)
/* Without size=, a mount may hold half of RAM, as tmpfs does. */
#define ZFS_DEFAULT_SHARE 2

struct zfs_sb_info {
	unsigned long max_pages;	/* size= in pages, a whole number of blocks */
	atomic_long_t used_pages;	/* pages in this mount's files */
};

/*
 * A file's inode->i_private holds flags (no other use here):
 * ZFS_PAGES_FILED: some range of the file went to 4 KiB pages
 * (zfs_add_page()), for the file's life; until then no range holds any,
 * and a block is added without looking (zfs_range_in_pages()).
 */
#define ZFS_PAGES_FILED	1UL

struct zfs_fs_context {
	unsigned long long size;	/* bytes; 0 when size= was not given */
	umode_t mode;			/* of the root directory */
	kuid_t uid;			/* owner of the root directory */
	kgid_t gid;			/* group of the root directory */
};

static const struct inode_operations zfs_dir_iops;
static const struct inode_operations zfs_file_iops;
static const struct file_operations zfs_file_fops;
static const struct address_space_operations zfs_aops;
static const struct super_operations zfs_sops;

static struct zfs_sb_info *ZFS_SB(struct super_block *sb)
{
	return sb->s_fs_info;
}

/* --- blocks: charge the mount, take from the pool, add to page cache --- */

static bool charge_pages(struct super_block *sb, unsigned long pages)
{
	struct zfs_sb_info *sbi = ZFS_SB(sb);

	if (atomic_long_add_return(pages, &sbi->used_pages) <= sbi->max_pages)
		return true;
	atomic_long_sub(pages, &sbi->used_pages);
	return false;
}

static void uncharge_pages(struct super_block *sb, unsigned long pages)
{
	atomic_long_sub(pages, &ZFS_SB(sb)->used_pages);
}

/* The first page index past EOF. */
static pgoff_t eof_index(struct inode *inode)
{
	return DIV_ROUND_UP(i_size_read(inode), PAGE_SIZE);
}

/*
 * Drop the blocks of [start, end] (end < 0: everything from start on) from
 * the page cache, and from the mount's count. Takes invalidate_lock
 * exclusively, so no fault adds a block meanwhile and nrpages tells exactly
 * what left. Caller holds inode_lock and has already moved i_size where it
 * shrinks the file: a fault checks EOF under invalidate_lock (shared), so
 * it either sees the new size or adds a block this drop then removes.
 */
static void zfs_drop_blocks(struct inode *inode, loff_t start, loff_t end)
{
	struct address_space *mapping = inode->i_mapping;
	unsigned long before;

	filemap_invalidate_lock(mapping);
	before = mapping->nrpages;
	if (end < 0)
		truncate_pagecache(inode, start);
	else
		truncate_pagecache_range(inode, start, end);
	uncharge_pages(inode->i_sb, before - mapping->nrpages);
	filemap_invalidate_unlock(mapping);
}

/* Drop the blocks of page indices [*run, end) and end the run. */
static void zfs_drop_run(struct inode *inode, pgoff_t *run, pgoff_t end)
{
	zfs_drop_blocks(inode, (loff_t)*run << PAGE_SHIFT, ((loff_t)end << PAGE_SHIFT) - 1);
	*run = ULONG_MAX;
}

/*
 * write() and fallocate() mark the folios they add (PG_checked, which a
 * filesystem may use on its page cache folios) until the call ends. Then
 * zfs_settle_new_blocks() clears the marks over [start, end), and, for a
 * call that failed, takes back the marked folios that lie past EOF: there
 * nothing could reach them but they would still count against the mount.
 * Folios that were there before the call (reserved past EOF with
 * FALLOC_FL_KEEP_SIZE) stay. Only holders of inode_lock add folios past
 * EOF (faults and pins stop at EOF), so the marks there are the call's
 * own. Every folio of the range is visited (blocks, and the 4 KiB pages
 * of a range that could not have one); runs of marked folios go in one
 * zfs_drop_blocks() each, holes inside a run going with it. s_maxbytes
 * is a whole number of blocks, so no offset here wraps. Caller holds
 * inode_lock.
 */
static void zfs_settle_new_blocks(struct inode *inode, loff_t start, loff_t end, bool failed)
{
	pgoff_t eof = round_up(i_size_read(inode), ZP_BLOCK_SIZE) >> PAGE_SHIFT;
	pgoff_t index = round_down(start, ZP_BLOCK_SIZE) >> PAGE_SHIFT;
	pgoff_t last = DIV_ROUND_UP(end, PAGE_SIZE) - 1;
	pgoff_t run = ULONG_MAX;	/* first index of the run to drop */
	pgoff_t run_end = 0;		/* index past its last folio */
	struct folio_batch fbatch;
	struct folio *folio;
	unsigned int i;
	bool drop;

	if (end <= start)
		return;
	folio_batch_init(&fbatch);
	while (filemap_get_folios(inode->i_mapping, &index, last, &fbatch)) {
		for (i = 0; i < folio_batch_count(&fbatch); i++) {
			folio = fbatch.folios[i];
			drop = folio_test_checked(folio) && failed && folio->index >= eof;
			folio_clear_checked(folio);
			if (drop) {
				if (run == ULONG_MAX)
					run = folio->index;
				run_end = folio_next_index(folio);
			} else if (run != ULONG_MAX) {
				zfs_drop_run(inode, &run, folio->index);	/* one of before ends it */
			}
		}
		folio_batch_release(&fbatch);
		cond_resched();
	}
	if (run != ULONG_MAX)
		zfs_drop_run(inode, &run, run_end);
}

/* The n-th node (from 0) set in a nodemask. */
static int nth_node(const nodemask_t *mask, unsigned int n)
{
	int nid;

	for_each_node_mask(nid, *mask)
		if (!n--)
			return nid;
	return numa_node_id();
}

/*
 * The node a new block for file offset index should come from: the
 * mapping's memory policy (mbind: what libvirt's numatune sets through
 * QEMU), else the task's (set_mempolicy, numactl), else the node of the CPU
 * that asks. Interleaving goes block by block (*interleaved: then a GiB
 * is not one node's run). vma may be NULL (write,
 * fallocate); when given, the caller holds the mmap lock or (a 6.12
 * fault) the vma's own lock, either of which keeps vma->vm_policy stable
 * (mbind changes it with both taken for writing). The policy's nodemask is read once into a copy:
 * a cpuset change rebinds it in place (under task_lock, not ours), and a
 * mask that changed between reads could send nth_node() past its end.
 */
static int zfs_block_node(struct vm_area_struct *vma, pgoff_t index, bool *interleaved)
{
	int local = numa_node_id();
#ifdef CONFIG_NUMA
	struct mempolicy *pol = vma && vma->vm_policy ? vma->vm_policy : current->mempolicy;
	unsigned short mode;
	nodemask_t nodes;

	*interleaved = false;
	if (!pol)
		return local;
	mode = READ_ONCE(pol->mode);
	nodes = pol->nodes;
	if (nodes_empty(nodes))
		return local;
	*interleaved = ZP_MPOL_IS_INTERLEAVE(mode);
	if (*interleaved)
		return nth_node(&nodes, (index / ZP_BLOCK_PAGES) % nodes_weight(nodes));
	if (mode == MPOL_BIND || mode == MPOL_PREFERRED || mode == MPOL_PREFERRED_MANY)
		return node_isset(local, nodes) ? local : first_node(nodes);
#else
	*interleaved = false;
#endif
	return local;
}

/*
 * zfs_get_folio() finds no folio at an index, tries to add one there, and
 * is told one exists (-EEXIST): another task added it first, and the next
 * lookup finds it. A block's range that holds 4 KiB pages gets 4 KiB
 * pages, so finding nothing again and again cannot happen; after this
 * many tries the caller gets -EIO instead of a loop all the same.
 */
#define ZFS_ADD_TRIES	4

/* Folio (zero) into the page cache at index, uptodate and dirty, with the
 * extra reference that keeps it whole (see the top of this file): 0 with
 * the folio locked, or filemap_add_folio()'s error and nothing done. */
static int zfs_insert_folio(struct inode *inode, struct folio *folio, pgoff_t index)
{
	int ret;

	folio_mark_uptodate(folio);
	ret = filemap_add_folio(inode->i_mapping, folio, index, ZFS_GFP_CHARGE);
	if (ret)
		return ret;
	folio_get(folio);		/* held until zfs_free_folio() */
	folio_mark_dirty(folio);
	return 0;
}

/*
 * File folio (charged to the mount by the caller, zero) at index: dirty,
 * and held by the extra reference that keeps it whole (see the top of
 * this file). Returns 0 with *out locked and referenced; on an error the
 * charge and the folio are given back.
 */
static int zfs_file_folio(struct inode *inode, struct folio *folio, pgoff_t index,
			  struct folio **out)
{
	int ret = zfs_insert_folio(inode, folio, index);

	if (ret) {
		uncharge_pages(inode->i_sb, folio_nr_pages(folio));
		zp_pool_put_unused(folio);
		return ret;
	}
	*out = folio;
	return 0;
}

/*
 * Take a zeroed block from node nid's pool (zfs_block_node() for index)
 * into the page cache at the block holding index, charged to the mount
 * (zfs_file_folio()). Returns 0 with *out locked and referenced (the
 * caller's reference, besides the held one), -ENOSPC (mount full),
 * -ENOMEM (no block, or the memcg refused its charge), or -EEXIST (a
 * folio is in the range already). Caller holds inode_lock or
 * invalidate_lock (shared), and the mmap lock or the vma's lock when
 * there is a vma.
 */
static int zfs_add_block(struct inode *inode, pgoff_t index, int nid, struct folio **out)
{
	struct folio *folio;

	if (!charge_pages(inode->i_sb, ZP_BLOCK_PAGES))
		return -ENOSPC;
	folio = zp_pool_get(nid, ZFS_GFP_SYNC);
	if (!folio) {
		uncharge_pages(inode->i_sb, ZP_BLOCK_PAGES);
		return -ENOMEM;
	}
	return zfs_file_folio(inode, folio, round_down(index, ZP_BLOCK_PAGES), out);
}

/*
 * The fallback for a block's range when no block could be had (memory
 * too fragmented for an order-9 page): a zeroed 4 KiB page at index,
 * filed like a block, and every later page of that range the same way
 * (zfs_get_folio()), so the range never mixes a block with pages. The VM
 * lives on; that range is mapped with PTEs and pinned by GUP page by page
 * (zp_zfs_pin_folios() hands it over), which costs TLB reach and IOMMU
 * entries, not correctness. Counted by the pool (fallback_pages). Same
 * contract as zfs_add_block().
 */
static int zfs_add_page(struct inode *inode, pgoff_t index, int nid, struct folio **out)
{
	struct folio *folio;

	if (!charge_pages(inode->i_sb, 1))
		return -ENOSPC;
	/* before the page is in the xarray: a block added in its range
	 * meanwhile fails there (-EEXIST, under the xarray's lock), and its
	 * retry sees the flag */
	WRITE_ONCE(inode->i_private, (void *)ZFS_PAGES_FILED);
	folio = zp_pool_get_page(nid);
	if (!folio) {
		uncharge_pages(inode->i_sb, 1);
		return -ENOMEM;
	}
	return zfs_file_folio(inode, folio, index, out);
}

/*
 * Whether the memcg a block filed now is charged to (the task's, as
 * filemap_add_folio() picks it) and each of its ancestors have room for
 * pages below their limit (the root's is none). A hint read without
 * locks: a charge racing past it still fails the block it hits.
 */
static bool zfs_memcg_has_room(unsigned long pages)
{
#ifdef CONFIG_MEMCG
	struct mem_cgroup *memcg = get_mem_cgroup_from_mm(NULL), *m;
	bool room = true;

	for (m = memcg; m && room; m = parent_mem_cgroup(m))
		room = page_counter_read(&m->memory) + pages <= READ_ONCE(m->memory.max);
	mem_cgroup_put(memcg);
	return room;
#else
	return true;
#endif
}

/*
 * Whether a run fits the file before it is taken from the pool: the mount
 * and the memcg have room for the whole GiB now. A run taken and then
 * refused block by block would come apart, and a run may have cost a GiB
 * of migration (run.c). Both are hints, read without charging: charging
 * the GiB ahead would make a racing fault in another file of a shared
 * mount fail within a GiB of full. A charge racing past them still fails
 * the block it hits (the rest of the run goes back block by block). The
 * memcg's check cannot see what reclaim would free below its limit: a
 * memcg full of page cache gets blocks, not a run (runs_unfit_memcg).
 */
static bool zfs_run_fits(struct inode *inode)
{
	struct zfs_sb_info *sbi = ZFS_SB(inode->i_sb);

	if (atomic_long_read(&sbi->used_pages) + ZP_RUN_PAGES > sbi->max_pages) {
		zp_pool_count_run_unfit(false);
		return false;
	}
	if (!zfs_memcg_has_room(ZP_RUN_PAGES)) {
		zp_pool_count_run_unfit(true);
		return false;
	}
	return true;
}

/*
 * File block k of a whole run in the file's GiB from first, charged to
 * the mount (zfs_insert_folio()). Returns 0 with the folio locked and
 * referenced, or the error (nothing charged; the block is the caller's to
 * give back).
 */
static int zfs_file_run_block(struct inode *inode, struct folio *folio, pgoff_t first,
			      unsigned long k)
{
	int ret;

	if (!charge_pages(inode->i_sb, ZP_BLOCK_PAGES))
		return -ENOSPC;
	ret = zfs_insert_folio(inode, folio, first + k * ZP_BLOCK_PAGES);
	if (ret)
		uncharge_pages(inode->i_sb, ZP_BLOCK_PAGES);
	return ret;
}

/*
 * The run a VFIO pin filed (struct zp_zfs_hand, zfs.h) saves its walk 511
 * page cache lookups per GiB, each a walk of the xarray and a lock of the
 * folio, on a never-touched GiB's map path. The walk drops the mmap lock
 * and invalidate_lock between batches, so a block it holds may have left
 * the file meanwhile (truncate, hole punch): zfs_hand_take() checks.
 */
void zp_zfs_hand_release(struct zp_zfs_hand *hand)
{
	unsigned long k;

	if (!hand->blocks)
		return;
	for (k = 0; k < ZP_RUN_BLOCKS; k++)
		if (hand->blocks[k])
			folio_put(hand->blocks[k]);
	kfree(hand->blocks);
	hand->blocks = NULL;
}

/*
 * The hand's block at index of mapping (referenced, unlocked: the
 * caller's now), or NULL when the hand has none there, or the block left
 * the file since it was filed (its reference is dropped then, and the
 * caller looks the index up). Caller holds invalidate_lock (shared): every
 * path that takes a block out of a file takes it exclusively (eviction
 * cannot run while the pin's vma holds the file; reclaim, migration,
 * splits and memory failure leave a held, dirty block where it is), so a
 * block whose mapping and index still match is the file's block there
 * right now, and stays so while the lock is held. hand->mapping is only
 * compared: it may be the address of an inode evicted since and reused by
 * another, whose blocks the hand cannot hold (a block out of its file has
 * ->mapping NULL, and the hand's reference keeps it from being reused).
 */
static struct folio *zfs_hand_take(struct zp_zfs_hand *hand, struct address_space *mapping,
				   pgoff_t index)
{
	unsigned long k;
	struct folio *folio;

	if (!hand->blocks || hand->mapping != mapping || index < hand->first ||
	    !IS_ALIGNED(index, ZP_BLOCK_PAGES))
		return NULL;
	k = (index - hand->first) / ZP_BLOCK_PAGES;
	if (k >= ZP_RUN_BLOCKS)
		return NULL;
	folio = hand->blocks[k];
	hand->blocks[k] = NULL;
	if (folio && (READ_ONCE(folio->mapping) != mapping || folio->index != index)) {
		zp_pool_count_hand_stale();
		folio_put(folio);
		return NULL;
	}
	return folio;
}

/*
 * Whether the GiB at file index first lies wholly inside the mapping and
 * inside the pin's own range (hand): a run commits the whole GiB to the
 * mount and the memcg, which only a pin of the whole GiB asks for (guest
 * RAM mapped whole; not virtio-mem's 2 MiB plugs, nor a vIOMMU's buffers).
 */
static bool zfs_run_in_pin(pgoff_t first, struct vm_area_struct *vma,
			   const struct zp_zfs_hand *hand)
{
	unsigned long addr;

	if (first < vma->vm_pgoff || first + ZP_RUN_PAGES > vma->vm_pgoff + vma_pages(vma))
		return false;
	addr = vma->vm_start + ((first - vma->vm_pgoff) << PAGE_SHIFT);
	return addr >= hand->start && addr + (ZP_RUN_PAGES << PAGE_SHIFT) <= hand->end;
}

/*
 * Whether a VFIO pin at index should take a whole run for its GiB: the
 * GiB lies wholly before EOF, inside the mapping and inside the pin
 * (zfs_run_in_pin()), the node's pool has a run, and the GiB holds no
 * folio yet.
 */
static bool zfs_run_wanted(struct inode *inode, pgoff_t first, struct vm_area_struct *vma,
			   int nid, const struct zp_zfs_hand *hand)
{
	return first + ZP_RUN_PAGES <= eof_index(inode) && zfs_run_in_pin(first, vma, hand) &&
	       zp_pool_run_ready(nid) &&
	       !filemap_range_has_page(inode->i_mapping, (loff_t)first << PAGE_SHIFT,
				       ((loff_t)(first + ZP_RUN_PAGES) << PAGE_SHIFT) - 1);
}

/*
 * A whole 1 GiB run from the pool for the GiB of the file holding index,
 * asked by a VFIO pin (memory pinned for DMA is used whole; a fault or a
 * write takes one block): its blocks filed in order, so the GiB is
 * physically contiguous and 1 GiB-aligned, and the IOMMU maps it with one
 * entry where the IOVA is aligned too (QEMU maps file offset 0 and the RAM
 * above 4 GiB at GiB-aligned guest addresses). The block for index goes
 * first: if it cannot be filed, the run goes back whole. A run is taken
 * only when the whole GiB fits the mount and the memcg (zfs_run_fits());
 * each block is charged to the mount as it is filed. Returns 0 with *out
 * the block holding index, locked and referenced; -EAGAIN when no run was filed
 * (the caller takes one block, or finds the one a racing task filed). A
 * later block a racing task filed first stays, and that run block goes
 * back to the pool (2 MiB entries there). The blocks filed after index go
 * to hand, referenced (a run it held before is released first). Caller
 * holds invalidate_lock (shared) and the mmap lock.
 */
static int zfs_add_run(struct inode *inode, pgoff_t index, struct vm_area_struct *vma,
		       int nid, struct zp_zfs_hand *hand, struct folio **out)
{
	pgoff_t first = round_down(index, ZP_RUN_PAGES);
	unsigned long mine = (index - first) / ZP_BLOCK_PAGES, k;
	struct folio **blocks;
	int err = 0;

	if (!zfs_run_wanted(inode, first, vma, nid, hand) || !zfs_run_fits(inode))
		return -EAGAIN;
	blocks = kmalloc_array(ZP_RUN_BLOCKS, sizeof(*blocks), GFP_KERNEL);
	if (!blocks)
		return -EAGAIN;
	if (!zp_pool_get_run(nid, blocks)) {
		kfree(blocks);
		return -EAGAIN;
	}
	if (!blocks[mine] || zfs_file_run_block(inode, blocks[mine], first, mine)) {
		zp_pool_put_unused_run(blocks);
		kfree(blocks);
		return -EAGAIN;
	}
	*out = blocks[mine];
	blocks[mine] = NULL;
	for (k = 0; k < ZP_RUN_BLOCKS; k++) {
		if (!blocks[k])
			continue;
		/* a memcg at its limit refuses the rest too: not asked again
		 * (a charge that raced past zfs_run_fits()) */
		if (err != -ENOMEM)
			err = zfs_file_run_block(inode, blocks[k], first, k);
		if (err) {
			zp_pool_put_unused(blocks[k]);
			blocks[k] = NULL;
			continue;
		}
		folio_unlock(blocks[k]);
		/* the pin's walk only goes up: one before index is the file's
		 * alone; the rest hand their reference to hand */
		if (k < mine) {
			folio_put(blocks[k]);
			blocks[k] = NULL;
		}
	}
	zp_zfs_hand_release(hand);
	hand->mapping = inode->i_mapping;
	hand->first = first;
	hand->blocks = blocks;
	return 0;
}

/* Whether the block's range holding index already holds 4 KiB pages
 * (or, in a race, a block another task just added). */
static bool zfs_range_has_folio(struct address_space *mapping, pgoff_t index)
{
	loff_t start = (loff_t)round_down(index, ZP_BLOCK_PAGES) << PAGE_SHIFT;

	return filemap_range_has_page(mapping, start, start + ZP_BLOCK_SIZE - 1);
}

/* Whether the range may be in 4 KiB pages: only looked for once the
 * file has filed any (a walk of the xarray per block otherwise costs the
 * never-touched map ~10 % for nothing). */
static bool zfs_range_in_pages(struct inode *inode, pgoff_t index)
{
	return ((unsigned long)READ_ONCE(inode->i_private) & ZFS_PAGES_FILED) &&
	       zfs_range_has_folio(inode->i_mapping, index);
}

/*
 * A block at index where the range is empty (for a VFIO pin, a whole run
 * where its GiB is empty: zfs_add_run()), else (no block to be had, or the
 * range already in 4 KiB pages) a 4 KiB page; said on the kernel log once
 * in a while when a range starts falling back. Same contract as
 * zfs_add_block(); hand: a VFIO pin's (else NULL), for zfs_add_run().
 */
static int zfs_add_folio(struct inode *inode, pgoff_t index, struct vm_area_struct *vma,
			 struct zp_zfs_hand *hand, struct folio **out)
{
	bool interleaved;
	int nid = zfs_block_node(vma, index, &interleaved), ret;

	if (zfs_range_in_pages(inode, index))
		return zfs_add_page(inode, index, nid, out);
	if (hand && !interleaved && !zfs_add_run(inode, index, vma, nid, hand, out))
		return 0;
	ret = zfs_add_block(inode, index, nid, out);
	/* full, but another task filed the range meanwhile (its charge
	 * made ours fail): the caller looks again */
	if (ret == -ENOSPC && zfs_range_has_folio(inode->i_mapping, index)) {
		/* seen without the xarray's lock: the retry must see the
		 * flag set before the page went in (pairs with xas_store()) */
		smp_rmb();
		return -EEXIST;
	}
	if (ret != -ENOMEM)
		return ret;
	/* compaction gives up on a dying task: no reason to fall back */
	if (fatal_signal_pending(current))
		return -EINTR;
	ret = zfs_add_page(inode, index, nid, out);
	if (!ret)
		pr_warn_ratelimited("inode %llu: no 2 MiB block for page %lu (memory fragmented, or the memcg near its limit): 4 KiB pages for that range\n",
				    (unsigned long long)inode->i_ino, index);
	return ret;
}

/*
 * The locked folio holding index, added by zfs_add_folio() (a block, or a
 * 4 KiB page where none can be had) if the file has none there yet.
 * Returns 0 with *out referenced and locked, or -ENOSPC (mount full),
 * -ENOMEM (not even a page), -EINTR (fatal signal), -EIO (no folio after
 * ZFS_ADD_TRIES: a defence). Caller holds inode_lock or invalidate_lock (shared),
 * which keeps truncation out. Without a vma (write, fallocate: inode_lock
 * held) a folio added here is marked new, and the caller ends with
 * zfs_settle_new_blocks(). hand: a VFIO pin asks (with a vma; else
 * NULL), which may take a whole run (zfs_add_run()).
 */
static int zfs_get_folio(struct inode *inode, pgoff_t index, struct vm_area_struct *vma,
			 struct zp_zfs_hand *hand, struct folio **out)
{
	int tries, ret;

	for (tries = 0; tries < ZFS_ADD_TRIES; tries++) {
		*out = zp_filemap_lookup(inode->i_mapping, index, FGP_LOCK);
		if (*out)
			return 0;
		if (fatal_signal_pending(current))
			return -EINTR;
		ret = zfs_add_folio(inode, index, vma, hand, out);
		if (!ret && !vma)
			folio_set_checked(*out);	/* see zfs_settle_new_blocks() */
		if (ret != -EEXIST)
			return ret;
	}
	pr_warn_ratelimited("inode %llu: no folio could be added at page %lu\n",
			    (unsigned long long)inode->i_ino, index);
	return -EIO;
}

/*
 * The page cache let go of a folio (truncate, hole punch, the inode's
 * eviction): the reference zfs_file_folio() held goes to the pool, which
 * drops it (or keeps it for good when a page is poisoned). The page
 * cache's own references are dropped after this, so the folio is not
 * freed here.
 */
static void zfs_free_folio(struct folio *folio)
{
	zp_pool_release(folio);
}

static const struct address_space_operations zfs_aops = {
	.dirty_folio	= noop_dirty_folio,	/* RAM: nothing to write back */
	.free_folio	= zfs_free_folio,
};

/* --- inodes --- */

static struct inode *zfs_get_inode(struct super_block *sb, const struct inode *dir,
				   umode_t mode)
{
	struct inode *inode = new_inode(sb);

	if (!inode)
		return NULL;
	inode->i_ino = get_next_ino();
	inode_init_owner(ZP_NOP_IDMAP, inode, dir, mode);
	inode->i_mapping->a_ops = &zfs_aops;
	mapping_set_gfp_mask(inode->i_mapping, GFP_HIGHUSER);
	mapping_set_unevictable(inode->i_mapping);
	zp_mapping_set_unmovable(inode->i_mapping);	/* compaction: hands off */
	mapping_set_large_folios(inode->i_mapping);
	zp_inode_init_times(inode);
	if (S_ISDIR(mode)) {
		inode->i_op = &zfs_dir_iops;
		inode->i_fop = &simple_dir_operations;
		inc_nlink(inode);	/* "." */
	} else {
		inode->i_op = &zfs_file_iops;
		inode->i_fop = &zfs_file_fops;
	}
	return inode;
}

static int zfs_new_entry(struct inode *dir, struct dentry *dentry, umode_t mode)
{
	struct inode *inode = zfs_get_inode(dir->i_sb, dir, mode);

	if (!inode)
		return -ENOSPC;
	zp_d_make_persistent(dentry, inode);	/* pinned in the dcache, as on ramfs */
	zp_inode_touch(dir);
	return 0;
}

static int zfs_create(zp_idmap_t *idmap, struct inode *dir, struct dentry *dentry,
		      umode_t mode, bool excl)
{
	return zfs_new_entry(dir, dentry, (mode & ~S_IFMT) | S_IFREG);
}

static zp_mkdir_ret_t zfs_mkdir(zp_idmap_t *idmap, struct inode *dir, struct dentry *dentry,
				umode_t mode)
{
	int ret = zfs_new_entry(dir, dentry, (mode & ~S_IFMT) | S_IFDIR);

	if (!ret)
		inc_nlink(dir);	/* the new directory's ".." */
	return ZP_MKDIR_RET(ret);
}

/*
 * A symlink, its target in i_link (simple_get_link() reads it, in RCU
 * walks too: zfs_free_inode() frees it after a grace period). The libvirt
 * hook links libvirt's RAM folder to the domain's own, which AppArmor
 * resolves to a path naming the domain's profile (see the hook's
 * premake_ram_folder()). The target is charged to the caller's memcg.
 * Called by the VFS with dir's inode_lock held (exclusive), as ->mkdir;
 * takes no lock of its own. On a failed kmemdup() the half-made inode is
 * put: evict and zfs_free_inode() free nothing more (i_link is NULL).
 */
static int zfs_symlink(zp_idmap_t *idmap, struct inode *dir, struct dentry *dentry,
		       const char *symname)
{
	size_t len = strlen(symname) + 1;
	struct inode *inode;

	if (len > PAGE_SIZE)
		return -ENAMETOOLONG;
	inode = zfs_get_inode(dir->i_sb, dir, S_IFLNK | 0777);
	if (!inode)
		return -ENOSPC;
	inode->i_link = kmemdup(symname, len, GFP_KERNEL_ACCOUNT);
	if (!inode->i_link) {
		iput(inode);
		return -ENOMEM;
	}
	inode->i_op = &simple_symlink_inode_operations;
	inode->i_fop = NULL;
	inode->i_size = len - 1;
	zp_d_make_persistent(dentry, inode);	/* pinned in the dcache, as on ramfs */
	zp_inode_touch(dir);
	return 0;
}

/* After the RCU grace period (an RCU callback: no lock, may not sleep):
 * a symlink's target (zfs_symlink()), then the inode. */
static void zfs_free_inode(struct inode *inode)
{
	if (S_ISLNK(inode->i_mode))
		kfree(inode->i_link);
	free_inode_nonrcu(inode);
}

/* Last reference to a file: its blocks leave the page cache. */
static void zfs_evict_inode(struct inode *inode)
{
	unsigned long pages = inode->i_mapping->nrpages;

	truncate_inode_pages_final(&inode->i_data);
	uncharge_pages(inode->i_sb, pages);
	clear_inode(inode);
}

/* Clear len bytes of folio from off, but no page memory failure marked
 * poisoned (touching it raises another machine check). */
static void zfs_clear_range(struct folio *folio, size_t off, size_t len)
{
	size_t end = off + len, n;
	struct page *page;

	for (; off < end; off += n) {
		page = folio_page(folio, off >> PAGE_SHIFT);
		n = min_t(size_t, end - off, PAGE_SIZE - offset_in_page(off));
		if (!PageHWPoison(page))
			memzero_page(page, offset_in_page(off), n);
	}
}

/*
 * The file grows from old_size to new_size: clear what its last block
 * holds past old_size, up to new_size (on 6.1 a PMD mapping can store
 * there, see the top of this file), so it reads as zero once inside EOF.
 * Caller holds inode_lock.
 */
static void zfs_clear_past_eof(struct inode *inode, loff_t old_size, loff_t new_size)
{
	loff_t end = min_t(loff_t, round_up(old_size, ZP_BLOCK_SIZE), new_size);
	struct folio *folio;
	size_t off;

	if (old_size >= end)
		return;
	folio = zp_filemap_lookup(inode->i_mapping, old_size >> PAGE_SHIFT, 0);
	if (!folio)
		return;
	off = offset_in_folio(folio, old_size);
	zfs_clear_range(folio, off, min_t(size_t, end - old_size, folio_size(folio) - off));
	folio_put(folio);
}

/* Shrink or grow to new_size (a multiple of 2 MiB). Caller holds inode_lock. */
static void zfs_resize(struct inode *inode, loff_t new_size)
{
	loff_t old_size = i_size_read(inode);

	if (new_size > old_size)
		zfs_clear_past_eof(inode, old_size, new_size);
	i_size_write(inode, new_size);
	if (new_size < old_size)
		zfs_drop_blocks(inode, new_size, -1);
	zp_inode_touch(inode);
}

static int zfs_setattr(zp_idmap_t *idmap, struct dentry *dentry, struct iattr *attr)
{
	struct inode *inode = d_inode(dentry);
	int ret;

	ret = setattr_prepare(idmap, dentry, attr);
	if (ret)
		return ret;
	if (attr->ia_valid & ATTR_SIZE) {
		if (!IS_ALIGNED(attr->ia_size, ZP_BLOCK_SIZE))
			return -EINVAL;
		ret = inode_newsize_ok(inode, attr->ia_size);
		if (ret)
			return ret;
		if (attr->ia_size != i_size_read(inode))
			zfs_resize(inode, attr->ia_size);
	}
	setattr_copy(idmap, inode, attr);
	return 0;
}

/*
 * stat() of a file reports the block as st_blksize, as tmpfs with huge
 * pages reports its PMD size: the I/O size that fills whole blocks, and
 * the alignment a program that mmaps by st_blksize needs for PMD maps.
 * No lock: the inode's fields are read as generic_fillattr() reads them.
 */
static int zfs_getattr(zp_idmap_t *idmap, const struct path *path,
		       struct kstat *stat, u32 request_mask,
		       unsigned int query_flags)
{
	zp_generic_fillattr(idmap, request_mask, d_inode(path->dentry), stat);
	stat->blksize = ZP_BLOCK_SIZE;
	return 0;
}

static const struct inode_operations zfs_dir_iops = {
	.create		= zfs_create,
	.lookup		= simple_lookup,
	.link		= simple_link,
	.unlink		= simple_unlink,
	.mkdir		= zfs_mkdir,
	.symlink	= zfs_symlink,
	.rmdir		= simple_rmdir,
	.rename		= simple_rename,
	.setattr	= zfs_setattr,
};

static const struct inode_operations zfs_file_iops = {
	.setattr	= zfs_setattr,
	.getattr	= zfs_getattr,
};

/* --- file I/O --- */

/* Copy one page's worth out of the file; holes read as zero, a page that
 * memory failure marked poisoned gives -EIO (reading it could raise
 * another machine check). */
static ssize_t read_chunk(struct address_space *mapping, loff_t pos, size_t len,
			  struct iov_iter *to)
{
	pgoff_t index = pos >> PAGE_SHIFT;
	struct folio *folio = zp_filemap_lookup(mapping, index, 0);
	struct page *page;
	ssize_t copied;

	if (!folio)
		return iov_iter_zero(len, to);
	page = folio_file_page(folio, index);
	if (PageHWPoison(page))
		copied = -EIO;
	else
		copied = copy_page_to_iter(page, offset_in_page(pos), len, to);
	folio_put(folio);
	return copied;
}

static ssize_t zfs_read_iter(struct kiocb *iocb, struct iov_iter *to)
{
	struct inode *inode = file_inode(iocb->ki_filp);
	loff_t pos = iocb->ki_pos, size = i_size_read(inode);
	ssize_t done = 0;

	while (iov_iter_count(to) && pos < size) {
		size_t len = min3((size_t)(PAGE_SIZE - offset_in_page(pos)),
				  (size_t)(size - pos), iov_iter_count(to));
		ssize_t copied = read_chunk(inode->i_mapping, pos, len, to);

		if (copied < 0) {
			if (!done)
				return copied;
			break;
		}
		pos += copied;
		done += copied;
		if (copied < len) {
			if (!done)
				return -EFAULT;
			break;
		}
		cond_resched();
	}
	iocb->ki_pos = pos;
	file_accessed(iocb->ki_filp);
	return done;
}

/* Copy one page's worth into the file, allocating its block if needed
 * (*added set when a block this call added is met); -EIO for a page
 * memory failure marked poisoned. Caller holds
 * inode_lock; the folio is not kept locked while copying, so a source
 * buffer mapped from this very file cannot deadlock. */
static ssize_t write_chunk(struct inode *inode, loff_t pos, size_t len,
			   struct iov_iter *from, bool *added)
{
	pgoff_t index = pos >> PAGE_SHIFT;
	struct folio *folio;
	struct page *page;
	ssize_t copied;
	int ret;

	ret = zfs_get_folio(inode, index, NULL, NULL, &folio);
	if (ret)
		return ret;
	*added |= folio_test_checked(folio);
	folio_unlock(folio);
	page = folio_file_page(folio, index);
	if (PageHWPoison(page))
		copied = -EIO;
	else
		copied = copy_page_from_iter(page, offset_in_page(pos), len, from);
	folio_put(folio);
	return copied;
}

static ssize_t zfs_write_iter(struct kiocb *iocb, struct iov_iter *from)
{
	struct inode *inode = file_inode(iocb->ki_filp);
	ssize_t ret, done = 0;
	loff_t pos, reach = 0;	/* reach: the end of the last chunk tried */
	bool added = false;	/* a block was added (and marked) */

	inode_lock(inode);
	ret = generic_write_checks(iocb, from);
	if (ret <= 0)
		goto out;
	ret = file_remove_privs(iocb->ki_filp);
	if (ret)
		goto out;
	pos = iocb->ki_pos;
	zfs_clear_past_eof(inode, i_size_read(inode), pos);
	while (iov_iter_count(from)) {
		size_t len = min_t(size_t, PAGE_SIZE - offset_in_page(pos), iov_iter_count(from));

		reach = pos + len;
		ret = write_chunk(inode, pos, len, from, &added);
		if (ret <= 0) {
			if (!ret)
				ret = -EFAULT;
			break;
		}
		pos += ret;
		done += ret;
		if (ret < len)
			break;
		cond_resched();
	}
	if (done && pos > i_size_read(inode))
		i_size_write(inode, pos);
	if (added)
		zfs_settle_new_blocks(inode, iocb->ki_pos, reach, ret < 0);
	if (done) {
		iocb->ki_pos = pos;
		zp_inode_touch(inode);
		ret = done;
	}
out:
	inode_unlock(inode);
	return ret;
}

/* Allocate every block of [offset, offset + len) (every page, where a
 * range falls back to 4 KiB pages); on failure nothing this
 * call added stays past EOF (what lies inside EOF is simply allocated
 * early, and what was reserved before stays). Caller holds inode_lock. */
static int zfs_allocate(struct inode *inode, int mode, loff_t offset, loff_t len)
{
	loff_t pos, end = offset + len;
	bool added = false;	/* a block was added (and marked) */
	struct folio *folio;
	int ret;

	ret = inode_newsize_ok(inode, end);
	if (ret)
		return ret;
	for (pos = offset; pos < end; ) {
		ret = zfs_get_folio(inode, pos >> PAGE_SHIFT, NULL, NULL, &folio);
		if (ret)
			break;
		added |= folio_test_checked(folio);
		pos = (loff_t)folio_next_index(folio) << PAGE_SHIFT;	/* a block, or a page */
		folio_unlock(folio);
		folio_put(folio);
		cond_resched();
	}
	if (added)
		zfs_settle_new_blocks(inode, offset, pos, ret != 0);
	if (ret)
		return ret;
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > i_size_read(inode)) {
		zfs_clear_past_eof(inode, i_size_read(inode), end);
		i_size_write(inode, end);
	}
	return 0;
}

static long zfs_fallocate(struct file *file, int mode, loff_t offset, loff_t len)
{
	struct inode *inode = file_inode(file);
	long ret;

	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
		return -EOPNOTSUPP;
	if (!IS_ALIGNED(offset, ZP_BLOCK_SIZE) || !IS_ALIGNED(len, ZP_BLOCK_SIZE))
		return -EINVAL;
	inode_lock(inode);
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		zfs_drop_blocks(inode, offset, offset + len - 1);
		ret = 0;
	} else {
		ret = zfs_allocate(inode, mode, offset, len);
	}
	if (!ret)
		zp_inode_touch(inode);
	inode_unlock(inode);
	return ret;
}

/* --- mmap --- */

/*
 * The locked, referenced folio for a fault at vmf->pgoff, allocated if the
 * file has none there; the fault needs pages up to last inside EOF. EOF is
 * checked under invalidate_lock (shared), which truncation takes
 * exclusively after moving i_size, so no fault leaves a block past EOF.
 * Caller holds the mmap lock, or on 6.12 the vma's own lock (per-VMA lock
 * faults); either keeps the vma's memory policy stable.
 * Returns 0, -ERANGE past EOF, -ENOSPC (mount full), -ENOMEM, -EINTR
 * (fatal signal) or -EIO (see ZFS_ADD_TRIES).
 */
static int zfs_fault_folio(struct vm_fault *vmf, pgoff_t last, struct folio **out)
{
	struct inode *inode = file_inode(vmf->vma->vm_file);
	struct address_space *mapping = inode->i_mapping;
	int ret = -ERANGE;

	filemap_invalidate_lock_shared(mapping);
	if (last < eof_index(inode))
		ret = zfs_get_folio(inode, vmf->pgoff, vmf->vma, NULL, out);
	filemap_invalidate_unlock_shared(mapping);
	return ret;
}

/*
 * A fault that cannot be served is SIGBUS, whatever the cause:
 *  - -ENOMEM too (not even a 4 KiB page: the host is out of memory, or
 *    the memcg is at its limit; a missing block alone falls back to
 *    pages). VM_FAULT_OOM would leave it to an OOM
 *    kill that never comes for a __GFP_RETRY_MAYFAIL allocation or
 *    charge, and the core would retry the fault without end. Said once in
 *    a while on the kernel log, since the allocations are __GFP_NOWARN.
 *  - -EINTR (a fatal signal) too, not NOPAGE: a kernel access
 *    (copy_from_user() in write(), GUP) would retry a NOPAGE fault
 *    forever, while SIGBUS makes it fail with -EFAULT; a user task is
 *    dying anyway.
 * GUP turns it into -EFAULT for its callers (MADV_POPULATE_*, pinning).
 */
static vm_fault_t fault_error(int err)
{
	if (err == -ENOMEM)
		pr_warn_ratelimited("%s[%d]: no memory for a page (host out of memory, or the memcg at its limit): SIGBUS\n",
				    current->comm, task_pid_nr(current));
	return VM_FAULT_SIGBUS;
}

/* A private mapping's write fault: the core maps its copy, not the file's. */
static bool zfs_fault_copies(struct vm_fault *vmf)
{
	return (vmf->flags & FAULT_FLAG_WRITE) && !(vmf->vma->vm_flags & VM_SHARED);
}

/*
 * A healthy page of a block with a poisoned one, on a kernel whose
 * finish_fault() maps a whole large folio with PTEs (ZP_FAULT_MAPS_FOLIO)
 * and checks only the faulting page for poison (the core refuses a
 * poisoned vmf->page itself): map it the way fault-around does, which
 * skips poisoned pages and, the block flagged, declines the PMD
 * (__do_fault() preallocated the page table). Like finish_fault(), 7.2's
 * filemap_map_folio_range() then maps every healthy page of a block that
 * lies within the vma and one page table, writable and dirty on a shared
 * write fault; the guest keeps the block's other 511 pages.
 *
 * Not where userfaultfd is armed (zfs_fault()). Mapping nothing is not an
 * error: another fault holds the folio lock
 * (fault-around only trylocks) or mapped the page first, or a punch took
 * the block once its lock was dropped. The fault is retried, and the next
 * one finds the page mapped, a new block, EOF (SIGBUS) or the page
 * poisoned meanwhile (the core's VM_FAULT_HWPOISON). Takes the folio
 * locked and referenced, lets go of both.
 */
static vm_fault_t zfs_fault_one_page(struct vm_fault *vmf, struct folio *folio)
{
	folio_unlock(folio);
	filemap_map_pages(vmf, vmf->pgoff, vmf->pgoff);
	folio_put(folio);
	return VM_FAULT_NOPAGE;
}

/*
 * The page-sized fault: hand the core the locked, referenced folio;
 * finish_fault() maps a whole 2 MiB folio with one PMD when the address
 * and offset line up. Truncation waits for the folio lock before it
 * removes the folio, and unmaps it after.
 */
static vm_fault_t zfs_fault(struct vm_fault *vmf)
{
	struct folio *folio;
	int err = zfs_fault_folio(vmf, vmf->pgoff, &folio);

	if (err)
		return fault_error(err);
	vmf->page = folio_file_page(folio, vmf->pgoff);
	/* where userfaultfd is armed, finish_fault() maps the one page itself
	 * (uffd's per-page semantics), and fault-around would skip its empty
	 * PTEs' write-protect markers, map nothing and retry for ever */
	if (ZP_FAULT_MAPS_FOLIO && zp_folio_has_hwpoisoned(folio) && !PageHWPoison(vmf->page) &&
	    !zfs_fault_copies(vmf) && !userfaultfd_armed(vmf->vma))
		return zfs_fault_one_page(vmf, folio);
	return VM_FAULT_LOCKED;
}

/*
 * The file pages a fault at vmf may map around itself: at most a block,
 * and never outside the vma nor past the page table of vmf->address, the
 * same clamp the core's do_fault_around() puts on what it hands to
 * ->map_pages. filemap_map_pages() trusts its range: it writes the entries
 * from the address of first on, so an unclamped range would fill a
 * neighbour vma's entries (PTEs the file's rmap never sees) or run off the
 * end of the page-table page. Arithmetic only; the caller holds the
 * fault's mmap lock or vma lock, which keeps the vma's bounds.
 */
static void zfs_fault_range(struct vm_fault *vmf, pgoff_t *first, pgoff_t *last)
{
	pgoff_t pte_off = pte_index(vmf->address);
	pgoff_t vma_off = vmf->pgoff - vmf->vma->vm_pgoff;	/* fault's page in the vma */
	pgoff_t from, to;

	BUILD_BUG_ON(ZP_BLOCK_PAGES != PTRS_PER_PTE || ZP_BLOCK_PAGES != HPAGE_PMD_NR);
	from = max(ALIGN_DOWN(pte_off, ZP_BLOCK_PAGES), pte_off - min(pte_off, vma_off));
	to = min3(from + ZP_BLOCK_PAGES, (pgoff_t)PTRS_PER_PTE,
		  pte_off + vma_pages(vmf->vma) - vma_off) - 1;
	*first = vmf->pgoff + from - pte_off;
	*last = vmf->pgoff + to - pte_off;
}

/*
 * The PMD fault, tried before the page-sized path: make sure the folio is
 * in the page cache, then let filemap_map_pages() map it with one PMD. This
 * skips the generic path's page-table preallocation and shared-fault
 * bookkeeping, which were half the cost of a fault in the lab. Anything it
 * cannot map with a PMD falls back to zfs_fault(): a private mapping, a
 * block crossing EOF, and a vma that does not suit a PMD at the address
 * (the PMD's 2 MiB not all inside the vma, or the file offset not
 * congruent to the address modulo 2 MiB). 6.12's core calls ->huge_fault
 * without checking that: the check is the handler's, and the range it
 * maps is clamped to the vma all the same (zfs_fault_range()). The block
 * allocation sleeps, and another thread may give the PMD a page table
 * meanwhile: then the generic path maps the page. On 6.1 the handler
 * declines at once (ZP_HUGE_FAULT_MAPS: its core never calls it for a
 * file vma, and its filemap_map_pages() could make a fault repeat).
 *
 * The core also calls it for a write to a PMD that is mapped read-only
 * (soft-dirty tracking after clear_refs, as CRIU does; write-protection
 * for fork). filemap_map_pages() leaves a present PMD alone, so that fault
 * would repeat forever: it falls back instead, the core takes the PMD
 * away (a file PMD is not split into PTEs) and the fault that follows
 * maps the block again, writable. Caller holds
 * the mmap lock, or on 6.12 the vma's own lock (per-VMA lock faults):
 * either keeps the vma's bounds and offset as they are across the sleep.
 */
static vm_fault_t zfs_huge_fault(struct vm_fault *vmf, zp_fault_size_t size)
{
	struct vm_area_struct *vma = vmf->vma;
	pgoff_t first, last;
	struct folio *folio;
	vm_fault_t ret;
	int err;

	/* Private mappings take the generic path: a write there must copy,
	 * and filemap_map_pages() would map the file's own folio writable
	 * (VM_SHARED, not VM_MAYSHARE: a read-only shared mapping too). */
	if (!ZP_HUGE_FAULT_MAPS || !ZP_FAULT_IS_PMD(size) || !(vma->vm_flags & VM_SHARED) ||
	    !zp_vma_suits_pmd(vma, vmf->address) || !pmd_none(READ_ONCE(*vmf->pmd)))
		return VM_FAULT_FALLBACK;
	zfs_fault_range(vmf, &first, &last);	/* the whole block, for a suitable vma */
	err = zfs_fault_folio(vmf, last, &folio);
	if (err == -ERANGE)
		return VM_FAULT_FALLBACK;	/* a block crossing EOF: PTEs */
	if (err)
		return fault_error(err);
	folio_unlock(folio);
	/* Another thread gave the PMD an entry while this one slept: the
	 * generic path takes it from here. filemap_map_pages() would map
	 * PTEs into that table on a write fault all writable and dirty, as
	 * only a read fault's fault-around should. The same for a range in
	 * 4 KiB pages (zfs_add_page()): PTEs, by the generic path. */
	if (!pmd_none(READ_ONCE(*vmf->pmd)) || folio_nr_pages(folio) != ZP_BLOCK_PAGES) {
		folio_put(folio);
		return VM_FAULT_FALLBACK;
	}
	ret = filemap_map_pages(vmf, first, last);
	folio_put(folio);
	return ret == VM_FAULT_NOPAGE ? ret : VM_FAULT_FALLBACK;
}

static const struct vm_operations_struct zfs_vm_ops = {
	.fault		= zfs_fault,
	.huge_fault	= zfs_huge_fault,
	.map_pages	= filemap_map_pages,	/* maps present folios, PMDs included */
};

/*
 * DMA pinning without GUP (see pin.c): reference the folios behind
 * [addr, addr + nr pages) of a shared zeropinfs mapping straight from the
 * page cache, creating from the pool what the file lacks, as a fault
 * would, without mapping anything. A shared file mapping shows exactly the
 * file's pages, so these are the pages the user sees there. Only whole
 * 2 MiB folios that start at the file offset asked for are taken, so the
 * walk advances by exactly the pages fn records; it stops at EOF, the
 * vma's end, a block's range held in 4 KiB pages (zfs_add_page(); when
 * it is the first, *head is set to its pages, which the caller pins by
 * GUP before it asks again past them), a folio of any other size or
 * place (a defence: GUP then takes the rest page by page), a folio with
 * a page memory failure marked poisoned (-EHWPOISON, what GUP gives for
 * it), or fn's error. fn(arg, folio) gets each folio with a reference of
 * its own. Caller holds the mmap lock (read). zp_zfs_vma_pinnable() says
 * beforehand whether vma qualifies at addr. Returns the pages covered; 0
 * when vma is not a shared zeropinfs mapping with the needed access or
 * nothing could be taken (past EOF, mount full, a hole, 4 KiB pages: the
 * caller's GUP fallback then pins them, or fails the way type1 would);
 * -ENOMEM, -EINTR or fn's error.
 */
static bool zfs_vma_shared(struct vm_area_struct *vma, bool write)
{
	return vma->vm_ops == &zfs_vm_ops && (vma->vm_flags & VM_SHARED) &&
	       (vma->vm_flags & (write ? VM_WRITE : VM_READ));
}

bool zp_zfs_vma_pinnable(struct vm_area_struct *vma, unsigned long addr, bool write)
{
	pgoff_t index = vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT);

	return zfs_vma_shared(vma, write) && IS_ALIGNED(index, ZP_BLOCK_PAGES);
}

/*
 * Pages from addr to the next block boundary of the file, when vma is a
 * shared zeropinfs mapping with the needed access and addr is inside a
 * block; else 0. QEMU splits guest RAM at the legacy PAM areas below
 * 1 MiB, so it maps ranges that start a few pages into the file's first
 * block: the caller pins those pages another way and takes whole blocks
 * from the boundary on. Caller holds the mmap lock (read).
 */
unsigned long zp_zfs_pages_to_block(struct vm_area_struct *vma, unsigned long addr, bool write)
{
	pgoff_t index = vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT);

	if (!zfs_vma_shared(vma, write) || IS_ALIGNED(index, ZP_BLOCK_PAGES))
		return 0;
	return min_t(unsigned long, ZP_BLOCK_PAGES - index % ZP_BLOCK_PAGES,
		     (vma->vm_end - addr) >> PAGE_SHIFT);
}

long zp_zfs_pin_folios(struct vm_area_struct *vma, unsigned long addr,
		       unsigned long nr, bool write,
		       int (*fn)(void *arg, struct folio *folio), void *arg,
		       unsigned long *head, struct zp_zfs_hand *hand)
{
	pgoff_t index = vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT);
	unsigned long done = 0, max;
	struct address_space *mapping;
	struct inode *inode;
	struct folio *folio;
	int ret = 0;

	*head = 0;
	if (!zp_zfs_vma_pinnable(vma, addr, write))
		return 0;
	inode = file_inode(vma->vm_file);
	mapping = inode->i_mapping;
	max = min(nr, (vma->vm_end - addr) >> PAGE_SHIFT);
	filemap_invalidate_lock_shared(mapping);
	while (done + ZP_BLOCK_PAGES <= max &&
	       index + done + ZP_BLOCK_PAGES <= eof_index(inode)) {
		folio = zfs_hand_take(hand, mapping, index + done);
		if (!folio) {
			ret = zfs_get_folio(inode, index + done, vma, hand, &folio);
			if (ret)
				break;
			folio_unlock(folio);
		}
		if (folio->mapping != mapping || folio->index != index + done ||
		    folio_nr_pages(folio) != ZP_BLOCK_PAGES) {
			/* a range in 4 KiB pages (zfs_add_page()) right here: the
			 * caller pins it by GUP, then asks again past it */
			if (!done && folio_nr_pages(folio) < ZP_BLOCK_PAGES)
				*head = ZP_BLOCK_PAGES;
			folio_put(folio);
			break;
		}
		if (zp_folio_has_hwpoisoned(folio)) {
			folio_put(folio);
			ret = -EHWPOISON;
			break;
		}
		ret = fn(arg, folio);
		if (ret) {
			folio_put(folio);
			break;
		}
		done += ZP_BLOCK_PAGES;
	}
	filemap_invalidate_unlock_shared(mapping);
	if (done)
		return done;
	/* full, or a hole: GUP then fails as type1 does */
	return ret == -ENOSPC || ret == -EIO ? 0 : ret;
}

static int zfs_mmap(struct file *file, struct vm_area_struct *vma)
{
	file_accessed(file);
	vma->vm_ops = &zfs_vm_ops;
	return 0;
}

static const struct file_operations zfs_file_fops = {
	.read_iter		= zfs_read_iter,
	.write_iter		= zfs_write_iter,
	.mmap			= zfs_mmap,
	.get_unmapped_area	= thp_get_unmapped_area,	/* 2 MiB-aligned */
	.fallocate		= zfs_fallocate,
	.llseek			= generic_file_llseek,
	.fsync			= noop_fsync,
};

/* --- superblock --- */

static int zfs_statfs(struct dentry *dentry, struct kstatfs *buf)
{
	struct zfs_sb_info *sbi = ZFS_SB(dentry->d_sb);
	unsigned long used = atomic_long_read(&sbi->used_pages);

	buf->f_type = ZEROPINFS_MAGIC;
	buf->f_bsize = PAGE_SIZE;
	buf->f_namelen = NAME_MAX;
	buf->f_blocks = sbi->max_pages;
	buf->f_bfree = buf->f_bavail = sbi->max_pages - min(used, sbi->max_pages);
	return 0;
}

static int zfs_show_options(struct seq_file *m, struct dentry *root)
{
	struct zfs_sb_info *sbi = ZFS_SB(root->d_sb);
	struct inode *inode = d_inode(root);

	seq_printf(m, ",size=%luk", sbi->max_pages * (PAGE_SIZE >> 10));
	seq_printf(m, ",mode=%o", inode->i_mode & 07777);
	if (!uid_eq(inode->i_uid, GLOBAL_ROOT_UID))
		seq_printf(m, ",uid=%u", from_kuid_munged(&init_user_ns, inode->i_uid));
	if (!gid_eq(inode->i_gid, GLOBAL_ROOT_GID))
		seq_printf(m, ",gid=%u", from_kgid_munged(&init_user_ns, inode->i_gid));
	return 0;
}

static const struct super_operations zfs_sops = {
	.statfs		= zfs_statfs,
	.drop_inode	= ZP_DROP_INODE,
	.evict_inode	= zfs_evict_inode,
	.free_inode	= zfs_free_inode,
	.show_options	= zfs_show_options,
};

/* --- mount options --- */

enum { OPT_SIZE, OPT_MODE, OPT_UID, OPT_GID };

static const struct fs_parameter_spec zfs_params[] = {
	fsparam_string("size", OPT_SIZE),
	fsparam_u32oct("mode", OPT_MODE),
	fsparam_u32("uid", OPT_UID),
	fsparam_u32("gid", OPT_GID),
	{}
};

static int parse_size(struct fs_context *fc, const char *s, unsigned long long *size)
{
	char *rest;

	*size = memparse(s, &rest);
	if (*rest || !*s)
		return invalfc(fc, "size=%s: not a number (K, M, G, T suffixes allowed)", s);
	if (!*size || !IS_ALIGNED(*size, ZP_BLOCK_SIZE))
		return invalfc(fc, "size=%s: must be a non-zero multiple of 2 MiB", s);
	return 0;
}

static int zfs_parse_param(struct fs_context *fc, struct fs_parameter *param)
{
	struct zfs_fs_context *ctx = fc->fs_private;
	struct fs_parse_result result;
	int opt;

	opt = fs_parse(fc, zfs_params, param, &result);
	if (opt < 0)
		return opt;
	switch (opt) {
	case OPT_SIZE:
		return parse_size(fc, param->string, &ctx->size);
	case OPT_MODE:
		if (result.uint_32 & ~07777)
			return invalfc(fc, "mode=%o: not a permission mode", result.uint_32);
		ctx->mode = result.uint_32;
		return 0;
	case OPT_UID:
		ctx->uid = make_kuid(current_user_ns(), result.uint_32);
		if (!uid_valid(ctx->uid))
			return invalfc(fc, "uid=%u: not a valid user", result.uint_32);
		return 0;
	case OPT_GID:
		ctx->gid = make_kgid(current_user_ns(), result.uint_32);
		if (!gid_valid(ctx->gid))
			return invalfc(fc, "gid=%u: not a valid group", result.uint_32);
		return 0;
	}
	return -EINVAL;
}

static unsigned long default_pages(void)
{
	return round_down(totalram_pages() / ZFS_DEFAULT_SHARE, ZP_BLOCK_PAGES);
}

/* size= in pages: a whole number of blocks. */
static unsigned long size_pages(unsigned long long size)
{
	return (size / ZP_BLOCK_SIZE) * ZP_BLOCK_PAGES;
}

static int zfs_fill_super(struct super_block *sb, struct fs_context *fc)
{
	struct zfs_fs_context *ctx = fc->fs_private;
	struct zfs_sb_info *sbi;
	struct inode *root;

	sbi = kzalloc(sizeof(*sbi), GFP_KERNEL);
	if (!sbi)
		return -ENOMEM;
	sbi->max_pages = ctx->size ? size_pages(ctx->size) : default_pages();
	sb->s_fs_info = sbi;
	/* whole blocks: no block's end, nor round_up(i_size), wraps */
	sb->s_maxbytes = round_down(MAX_LFS_FILESIZE, ZP_BLOCK_SIZE);
	sb->s_blocksize = PAGE_SIZE;
	sb->s_blocksize_bits = PAGE_SHIFT;
	sb->s_magic = ZEROPINFS_MAGIC;
	sb->s_op = &zfs_sops;
	sb->s_time_gran = 1;
	root = zfs_get_inode(sb, NULL, S_IFDIR | ctx->mode);
	if (!root)
		return -ENOMEM;
	root->i_uid = ctx->uid;
	root->i_gid = ctx->gid;
	sb->s_root = d_make_root(root);
	return sb->s_root ? 0 : -ENOMEM;
}

static int zfs_get_tree(struct fs_context *fc)
{
	return get_tree_nodev(fc, zfs_fill_super);
}

/* remount: only size= changes, and never below what the files hold. */
static int zfs_reconfigure(struct fs_context *fc)
{
	struct zfs_fs_context *ctx = fc->fs_private;
	struct zfs_sb_info *sbi = ZFS_SB(fc->root->d_sb);

	if (!ctx->size)
		return 0;
	if (size_pages(ctx->size) < atomic_long_read(&sbi->used_pages))
		return invalfc(fc, "size: smaller than what the files already use");
	sbi->max_pages = size_pages(ctx->size);
	return 0;
}

static void zfs_free_fc(struct fs_context *fc)
{
	kfree(fc->fs_private);
}

static const struct fs_context_operations zfs_context_ops = {
	.free		= zfs_free_fc,
	.parse_param	= zfs_parse_param,
	.get_tree	= zfs_get_tree,
	.reconfigure	= zfs_reconfigure,
};

static int zfs_init_fs_context(struct fs_context *fc)
{
	struct zfs_fs_context *ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);

	if (!ctx)
		return -ENOMEM;
	ctx->mode = 0755;
	ctx->uid = current_fsuid();
	ctx->gid = current_fsgid();
	fc->fs_private = ctx;
	fc->ops = &zfs_context_ops;
	return 0;
}

static void zfs_kill_sb(struct super_block *sb)
{
	struct zfs_sb_info *sbi = ZFS_SB(sb);

	zp_kill_persistent_super(sb);
	WARN_ON(sbi && atomic_long_read(&sbi->used_pages));
	kfree(sbi);
}

static struct file_system_type zfs_type = {
	.owner			= THIS_MODULE,
	.name			= "zeropinfs",
	.init_fs_context	= zfs_init_fs_context,
	.parameters		= zfs_params,
	.kill_sb		= zfs_kill_sb,
};
MODULE_ALIAS_FS("zeropinfs");

int zp_zfs_init(void)
{
	return register_filesystem(&zfs_type);
}

/*
 * Every zeropinfs inode is freed by an RCU callback into this module
 * (zfs_free_inode()): wait for the last of them before the module's code
 * goes (free_module()'s synchronize_rcu() does not wait for callbacks).
 */
void zp_zfs_exit(void)
{
	unregister_filesystem(&zfs_type);
	rcu_barrier();
}
