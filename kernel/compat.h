/* SPDX-License-Identifier: GPL-2.0 */
/*
 * compat.h - every difference between the supported kernel series
 * (Debian 12: 6.1 and 6.12; upstream's newest as Debian unstable ships
 * it: 7.2) lives here, behind one name each, so the rest of the module
 * reads as if there were one kernel.
 */
#ifndef ZEROPIN_COMPAT_H
#define ZEROPIN_COMPAT_H

#include <linux/version.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/iommu.h>
#include <linux/irqdomain.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/scatterlist.h>
/* struct folio_batch: linux/pagevec.h, renamed linux/folio_batch.h after
 * 6.12 once the last pagevec was gone ("mm: rename pagevec.h to
 * folio_batch.h"); asked of the headers, not of a version */
#if __has_include(<linux/folio_batch.h>)
#include <linux/folio_batch.h>
#else
#include <linux/pagevec.h>
#endif
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/vfio.h>
#include <linux/vfio_pci_core.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "zeropin supports Linux 6.1 and newer (Debian 12: 6.1 and 6.12)"
#endif

/* --- page allocation: 6.10 renamed the exported allocators (_noprof) --- */
static inline struct folio *zp_folio_alloc_node(gfp_t gfp, unsigned int order, int nid)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
	return __folio_alloc_noprof(gfp, order, nid, NULL);
#else
	return __folio_alloc(gfp, order, nid, NULL);
#endif
}

/* --- 1 GiB runs: alloc_contig_range() (EXPORT_SYMBOL; _noprof since
 * 6.10) takes a physical range from the page allocator, migrating what
 * it holds, and leaves every page of it an order-0 page of refcount 1.
 * alloc_contig_pages(), which would search for the range, is exported on
 * neither series. Needs CONFIG_CONTIG_ALLOC (Debian: both series). --- */
#ifdef CONFIG_CONTIG_ALLOC
#define ZP_HAVE_CONTIG_ALLOC	1
/* Since 6.16 ("mm/page_isolation: remove migratetype parameter from more
 * functions") the third argument is acr_flags_t, not a migratetype: a
 * plain integer either way, so passing MIGRATE_MOVABLE (1) there would
 * still compile and mean ACR_FLAGS_CMA (isolation for a CMA area).
 * ACR_FLAGS_NONE is the ordinary request MIGRATE_MOVABLE was. */
static inline int zp_alloc_contig_range(unsigned long start, unsigned long end, gfp_t gfp)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 16, 0)
	return alloc_contig_range_noprof(start, end, ACR_FLAGS_NONE, gfp);
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
	return alloc_contig_range_noprof(start, end, MIGRATE_MOVABLE, gfp);
#else
	return alloc_contig_range(start, end, MIGRATE_MOVABLE, gfp);
#endif
}
#else
#define ZP_HAVE_CONTIG_ALLOC	0
static inline int zp_alloc_contig_range(unsigned long start, unsigned long end, gfp_t gfp)
{
	return -EOPNOTSUPP;
}
#endif

/* --- the largest order a free page in the buddy allocator has: MAX_ORDER
 * was exclusive until 6.4 and MAX_PAGE_ORDER, inclusive, since 6.8 --- */
#ifdef MAX_PAGE_ORDER
#define ZP_MAX_BUDDY_ORDER	MAX_PAGE_ORDER
#elif LINUX_VERSION_CODE < KERNEL_VERSION(6, 4, 0)
#define ZP_MAX_BUDDY_ORDER	(MAX_ORDER - 1)
#else
#define ZP_MAX_BUDDY_ORDER	MAX_ORDER
#endif

/* --- 2^order order-0 pages of refcount 1 (what alloc_contig_range()
 * leaves) made into the folio __folio_alloc() returns, so a block cut from
 * a run is a block like any other from then on, freed by folio_put().
 * The kernel's own steps are private (mm/internal.h): prep_compound_page()
 * (tails: refcount 0, TAIL_MAPPING, compound_head, private 0; head: PG_head
 * and the folio's order and counts) and what __folio_alloc() adds for an
 * order > 1 (6.1: prep_transhuge_page(), the THP destructor and deferred
 * list; 6.12 and 7.2: page_rmappable_folio()). They move between series:
 * run.c compares the result with a folio the kernel made before the pool
 * builds any run. Mirrored for 6.1.y, 6.12.y and 7.2.y only, with order >= 2
 * (the THP parts): elsewhere false, and runs are off. false, nothing
 * changed, also when a tail is referenced (a transient reference: a
 * speculative lookup, memory failure's probe). --- */
/* Mirrored for exactly these series; anywhere else runs are off. 7.2's
 * (mm/internal.h: prep_compound_tail(), prep_compound_head(),
 * folio_set_order(), page_rmappable_folio()) differs from 6.12's in three
 * places: a tail's compound_info (set_compound_head() takes the order, a
 * mask under HVO), _nr_pages only where NR_PAGES_IN_LARGE_FOLIO, and the
 * rmap's _mm_id words, set under CONFIG_MM_ID. alloc_contig_frozen_range()
 * with __GFP_COMP would make one compound page of the whole GiB, which no
 * exported call cuts into blocks; 512 calls of 2 MiB would drain every
 * CPU's lists 512 times a run. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0) && LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0)
#define ZP_PREP_FOLIO_612	1
#define ZP_HAVE_PREP_FOLIO	1
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(7, 2, 0) && LINUX_VERSION_CODE < KERNEL_VERSION(7, 3, 0)
#define ZP_PREP_FOLIO_72	1
#define ZP_HAVE_PREP_FOLIO	1
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 1, 0) && LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0) && \
	defined(CONFIG_TRANSPARENT_HUGEPAGE)
#define ZP_HAVE_PREP_FOLIO	1
#else
#define ZP_HAVE_PREP_FOLIO	0
#endif

static inline struct list_head *zp_folio_deferred_list(struct folio *folio)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
	return &folio->_deferred_list;
#else
	return page_deferred_list(&folio->page);
#endif
}

/* A large folio's mapping and pin counts as the kernel keeps them beside
 * the pages' own, folded into one number to compare: 6.12's large
 * mapcount, pages mapped and pincount; 6.1's compound mapcount and
 * pincount (folio_mapcount() is not exported there). */
static inline int zp_folio_large_mapcount(struct folio *folio)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 2, 0)
	/* _nr_pages_mapped is kept only under CONFIG_PAGE_MAPCOUNT there */
	int mapped = IS_ENABLED(CONFIG_PAGE_MAPCOUNT) ? atomic_read(&folio->_nr_pages_mapped) : 0;

	return folio_large_mapcount(folio) * 65536 + mapped * 256 + atomic_read(&folio->_pincount);
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
	return folio_large_mapcount(folio) * 65536 + atomic_read(&folio->_nr_pages_mapped) * 256 +
	       atomic_read(&folio->_pincount);
#else
	return folio_entire_mapcount(folio) * 65536 + atomic_read(compound_pincount_ptr(&folio->page));
#endif
}

/* A large folio's rmap owners (CONFIG_MM_ID: the _mm_id words and their
 * mapcounts, 7.2), folded into one number to compare; 0 elsewhere. */
static inline u64 zp_folio_mm_ids(struct folio *folio)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 2, 0)
	/* without CONFIG_MM_ID the words are page 1's stale index, set by
	 * neither the kernel nor the mirror */
	if (!IS_ENABLED(CONFIG_MM_ID))
		return 0;
	return (u64)folio->_mm_ids ^ ((u64)(u32)folio->_mm_id_mapcount[0] << 32) ^
	       (u32)folio->_mm_id_mapcount[1];
#else
	return 0;
#endif
}

/* Whether a large folio carries what __folio_alloc() adds to a compound
 * page: 6.12's large_rmappable flag, 6.1's THP destructor. */
static inline bool zp_folio_thp_prepped(struct folio *folio)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
	return folio_test_large_rmappable(folio);
#else
	return folio->_folio_dtor == TRANSHUGE_PAGE_DTOR;
#endif
}

static inline bool zp_prep_folio(struct page *head, unsigned int order)
{
#if ZP_HAVE_PREP_FOLIO
	struct folio *folio __maybe_unused = (struct folio *)head;
	unsigned int i, nr = 1U << order;

	if (WARN_ON_ONCE(order < 2 || !IS_ALIGNED(page_to_pfn(head), nr)))
		return false;
	for (i = 1; i < nr; i++)
		if (!page_ref_freeze(head + i, 1))
			goto unfreeze;
	set_page_private(head, 0);
	clear_page_pfmemalloc(head);
	__SetPageHead(head);
	for (i = 1; i < nr; i++) {
		head[i].mapping = TAIL_MAPPING;
#ifdef ZP_PREP_FOLIO_72
		set_compound_head(head + i, head, order);
#else
		set_compound_head(head + i, head);
#endif
		set_page_private(head + i, 0);
	}
#if defined(ZP_PREP_FOLIO_72)
	folio->_flags_1 = (folio->_flags_1 & ~0xffUL) | order;
#ifdef NR_PAGES_IN_LARGE_FOLIO
	folio->_nr_pages = nr;
#endif
	atomic_set(&folio->_large_mapcount, -1);
	if (IS_ENABLED(CONFIG_PAGE_MAPCOUNT))
		atomic_set(&folio->_nr_pages_mapped, 0);
	if (IS_ENABLED(CONFIG_MM_ID)) {
		folio->_mm_ids = 0;
		folio->_mm_id_mapcount[0] = -1;
		folio->_mm_id_mapcount[1] = -1;
	}
	atomic_set(&folio->_pincount, 0);
	atomic_set(&folio->_entire_mapcount, -1);
	INIT_LIST_HEAD(&folio->_deferred_list);
	folio_set_large_rmappable(folio);
#elif defined(ZP_PREP_FOLIO_612)
	folio->_flags_1 = (folio->_flags_1 & ~0xffUL) | order;
	folio->_folio_nr_pages = nr;
	atomic_set(&folio->_large_mapcount, -1);
	atomic_set(&folio->_entire_mapcount, -1);
	atomic_set(&folio->_nr_pages_mapped, 0);
	atomic_set(&folio->_pincount, 0);
	INIT_LIST_HEAD(&folio->_deferred_list);
	folio_set_large_rmappable(folio);
#else
	set_compound_page_dtor(head, COMPOUND_PAGE_DTOR);
	set_compound_order(head, order);
	atomic_set(compound_mapcount_ptr(head), -1);
	atomic_set(compound_pincount_ptr(head), 0);
	INIT_LIST_HEAD(page_deferred_list(head));
	set_compound_page_dtor(head, TRANSHUGE_PAGE_DTOR);
#endif
	return true;

unfreeze:
	while (--i >= 1)
		page_ref_unfreeze(head + i, 1);
#endif
	return false;
}

/* --- a page's flags word: memdesc_flags_t, a struct around it, since
 * 6.18 ("mm: introduce memdesc_flags_t") --- */
static inline unsigned long zp_page_flags(const struct page *page)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 18, 0)
	return page->flags.f;
#else
	return page->flags;
#endif
}

/* --- the page n pages after page, physically: nth_page() until 6.18,
 * which removed it ("mm: remove nth_page()") once no folio spans a gap
 * in the memmap. Runs and BAR ranges here are physically contiguous but
 * not one folio, so step by pfn, as nth_page() did where the memmap has
 * gaps (SPARSEMEM without VMEMMAP); with VMEMMAP (Debian's x86-64) both
 * are page + n. --- */
static inline struct page *zp_nth_page(struct page *page, unsigned long n)
{
	return pfn_to_page(page_to_pfn(page) + n);
}

/* --- page cache lookup: NULL on a miss before 6.3, ERR_PTR after --- */
static inline struct folio *zp_filemap_lookup(struct address_space *mapping,
					      pgoff_t index, int fgp_flags)
{
	struct folio *folio = __filemap_get_folio(mapping, index, fgp_flags, 0);

	return IS_ERR_OR_NULL(folio) ? NULL : folio;
}

/* --- shrinkers: allocated objects since 6.7, static structs before.
 * NUMA-aware: count and scan are asked per node (sc->nid). --- */
static inline struct shrinker *
zp_shrinker_create(const char *name,
		   unsigned long (*count)(struct shrinker *, struct shrink_control *),
		   unsigned long (*scan)(struct shrinker *, struct shrink_control *))
{
	struct shrinker *s;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
	s = shrinker_alloc(SHRINKER_NUMA_AWARE, "%s", name);
	if (!s)
		return ERR_PTR(-ENOMEM);
	s->count_objects = count;
	s->scan_objects = scan;
	shrinker_register(s);
#else
	int ret;

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return ERR_PTR(-ENOMEM);
	s->count_objects = count;
	s->scan_objects = scan;
	s->seeks = DEFAULT_SEEKS;
	s->flags = SHRINKER_NUMA_AWARE;
	ret = register_shrinker(s, "%s", name);
	if (ret) {
		kfree(s);
		return ERR_PTR(ret);
	}
#endif
	return s;
}

static inline void zp_shrinker_destroy(struct shrinker *s)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
	shrinker_free(s);
#else
	unregister_shrinker(s);
	kfree(s);
#endif
}

/* --- VFS: idmapped mounts pass a struct mnt_idmap since 6.3 --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
typedef struct mnt_idmap zp_idmap_t;
#define ZP_NOP_IDMAP (&nop_mnt_idmap)
#else
typedef struct user_namespace zp_idmap_t;
#define ZP_NOP_IDMAP (&init_user_ns)
#endif

/* --- VFS: generic_fillattr() takes the statx request mask since 6.6 --- */
static inline void zp_generic_fillattr(zp_idmap_t *idmap, u32 request_mask,
				       struct inode *inode, struct kstat *stat)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 6, 0)
	generic_fillattr(idmap, request_mask, inode, stat);
#else
	generic_fillattr(idmap, inode, stat);
#endif
}

/* --- VFS: inode timestamps behind accessors since 6.6/6.7 --- */
static inline void zp_inode_init_times(struct inode *inode)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
	simple_inode_init_ts(inode);
#else
	inode->i_atime = inode->i_mtime = inode->i_ctime = current_time(inode);
#endif
}

/* mtime and ctime to now: the inode's content or its directory changed. */
static inline void zp_inode_touch(struct inode *inode)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
	inode_set_mtime_to_ts(inode, inode_set_ctime_current(inode));
#else
	inode->i_mtime = inode->i_ctime = current_time(inode);
#endif
}

/* --- VFS: ->mkdir returns the dentry it made (NULL: the one it was
 * given) since 6.15 ("Change inode_operations.mkdir to return struct
 * dentry *"); an int before --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 15, 0)
typedef struct dentry *zp_mkdir_ret_t;
#define ZP_MKDIR_RET(err)	ERR_PTR(err)
#else
typedef int zp_mkdir_ret_t;
#define ZP_MKDIR_RET(err)	(err)
#endif

/* --- VFS: an inode dropped at its last iput() (a RAM filesystem keeps
 * nothing unreferenced): generic_delete_inode(), renamed
 * inode_just_drop() in 6.18 ("fs: rename generic_delete_inode() and
 * generic_drop_inode()") --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 18, 0)
#define ZP_DROP_INODE	inode_just_drop
#else
#define ZP_DROP_INODE	generic_delete_inode
#endif

/* --- VFS: a name that lives in the dcache until unlinked, as on ramfs.
 * Until 6.19 an extra reference (d_instantiate() + dget()), dropped by
 * simple_unlink()/simple_rmdir() and, at unmount, by kill_litter_super().
 * Since 6.19 ("new helper: d_make_persistent()", Al Viro's series that
 * then removed kill_litter_super()) the dentry is marked persistent:
 * simple_unlink()/simple_rmdir() drop it through d_make_discardable(),
 * which WARNs on a dentry not made so, and unmount's
 * shrink_dcache_for_umount() drops the rest under plain
 * kill_anon_super(). simple_link() follows the same rule on each. --- */
static inline void zp_d_make_persistent(struct dentry *dentry, struct inode *inode)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 19, 0)
	d_make_persistent(dentry, inode);
#else
	d_instantiate(dentry, inode);
	dget(dentry);
#endif
}

static inline void zp_kill_persistent_super(struct super_block *sb)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 19, 0)
	kill_anon_super(sb);
#else
	kill_litter_super(sb);
#endif
}

/* --- ->huge_fault: an entry size before 6.6, a page order since --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 6, 0)
typedef unsigned int zp_fault_size_t;
#define ZP_FAULT_IS_PMD(size) ((size) == PMD_ORDER)
#else
typedef enum page_entry_size zp_fault_size_t;
#define ZP_FAULT_IS_PMD(size) ((size) == PE_SIZE_PMD)
#endif

/* --- may a PMD map the file at addr in vma? Inside the vma, and the
 * vma's file offset congruent to its address modulo 2 MiB. Named
 * thp_vma_suitable_order() since 6.8 --- */
static inline bool zp_vma_suits_pmd(struct vm_area_struct *vma, unsigned long addr)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0)
	return thp_vma_suitable_order(vma, addr, PMD_ORDER);
#else
	return transhuge_vma_suitable(vma, addr);
#endif
}

/* --- may ->huge_fault map a file folio with filemap_map_pages()? 6.12's
 * fault path calls a file vma's handler (it trusts the handler to check
 * the vma); 6.1's never does (hugepage_vma_check() refuses file vmas in
 * the fault path, and a write to a present PMD falls back at once), and
 * there filemap_map_pages() answers NOPAGE, having mapped nothing, for a
 * none PMD whose folio do_set_pmd() refuses (a poisoned page): a fault
 * that would repeat forever. On 6.1 the handler declines outright --- */
#define ZP_HUGE_FAULT_MAPS	(LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0))
/* 7.2's fault path calls a file vma's ->huge_fault only where the THP
 * sysfs policy allows (vma_can_map_huge_file(): "always", Debian's
 * default, or "madvise" with MADV_HUGEPAGE on the vma); elsewhere the PMD
 * comes from the page-sized path (finish_fault() -> do_set_pmd(), which
 * does not read that policy) and ->map_pages, as on 6.1. No code
 * differs: only the fast path is skipped. */

/* --- keeping compaction away from a file's folios ---
 * zeropinfs folios never move (dirty, no ->migrate_folio, an extra
 * reference), but sync compaction still isolates a 4 KiB page of an
 * unevictable mapping, unmaps it everywhere (TLB shootdowns, the KVM
 * mapping zapped through the MMU notifier), fails to move it and maps it
 * back, pass after pass. 6.11 added AS_INACCESSIBLE (guest_memfd's):
 * compaction skips such a mapping's folios before isolating them. In
 * 6.12 the flag is read in three places only: that skip, the migration
 * of a folio (-EOPNOTSUPP, where ours fails anyway) and the zeroing of a
 * folio a truncation cuts through (zeropinfs cuts whole folios only).
 * 6.8-6.10 had the same as AS_UNMOVABLE (mapping_set_unmovable(); no
 * Debian 12 kernel). On 6.1 nothing says so; the host's
 * vm.compact_unevictable_allowed = 0 does (README). Blocks are compound
 * pages, which compaction skips anyway. Recheck for every new series: a
 * split of AS_UNMOVABLE back out of AS_INACCESSIBLE has been proposed
 * (7.2 checked: the same three readers, the same flag). --- */
static inline void zp_mapping_set_unmovable(struct address_space *mapping)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
	mapping_set_inaccessible(mapping);
#endif
}

/* --- memory policies: weighted interleave since 6.9 --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 9, 0)
#define ZP_MPOL_IS_INTERLEAVE(mode) \
	((mode) == MPOL_INTERLEAVE || (mode) == MPOL_WEIGHTED_INTERLEAVE)
#else
#define ZP_MPOL_IS_INTERLEAVE(mode) ((mode) == MPOL_INTERLEAVE)
#endif

/* --- a large folio mapped exactly once, by one PMD and no PTE ---
 * 6.2 replaced 6.1's DoubleMap flag (set while a THP is mapped by PTEs as
 * well as a PMD) with a total mapcount. */
static inline bool zp_folio_pmd_mapped_once(struct folio *folio)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
	return folio_entire_mapcount(folio) == 1 && folio_mapcount(folio) == 1;
#else
	return folio_entire_mapcount(folio) == 1 && !PageDoubleMap(&folio->page);
#endif
}

/* --- a VFIO device (or group) file: what a vfio-pci BAR mmap maps.
 * vfio_file_is_valid() in 6.12; 6.1 has a helper for group files only,
 * so there the file's owner module is compared by name --- */
static inline bool zp_file_is_vfio(struct file *file)
{
	if (!file)
		return false;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0)
	return vfio_file_is_valid(file);
#else
	return file->f_op && file->f_op->owner && !strcmp(file->f_op->owner->name, "vfio");
#endif
}

/* --- memory failure marked a page of a large folio: a flag of the folio's
 * second page; folio accessors since 6.2 --- */
static inline bool zp_folio_has_hwpoisoned(struct folio *folio)
{
	/* the flag lives in the second page: an order-0 folio's is the next
	 * page's own (7.2: its PG_active), as the kernel's callers know */
	if (!folio_test_large(folio))
		return false;
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
	return folio_test_has_hwpoisoned(folio);
#else
	return PageHasHWPoisoned(&folio->page);
#endif
}

static inline void zp_folio_set_has_hwpoisoned(struct folio *folio)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
	folio_set_has_hwpoisoned(folio);
#else
	SetPageHasHWPoisoned(&folio->page);
#endif
}

/* --- finish_fault() maps a whole large file folio with PTEs where it
 * cannot with a PMD (7.2: every file, "mm/memory: do not populate page
 * table entries beyond i_size"; 6.1 and 6.12 map the one page, and the
 * whole folio for shmem only): it checks only the faulting page for
 * poison, so a block with a poisoned page must not be handed to it. Any
 * kernel after 6.12 is taken to do so. --- */
#define ZP_FAULT_MAPS_FOLIO	(LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0))

/* --- VFIO_IOMMU_MAP_DMA/UNMAP_DMA of a range that wraps, or a field that
 * does not fit: type1 says -EOVERFLOW on 7.2 ("vfio/type1: handle DMA
 * map/unmap up to the addressable limit"), -EINVAL on 6.1 and 6.12;
 * zeropin answers as the kernel's own type1 does. Any kernel after 6.12
 * is taken to say -EOVERFLOW. --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
#define ZP_EWRAP		(-EOVERFLOW)
#else
#define ZP_EWRAP		(-EINVAL)
#endif

/* --- the unbound system workqueue: system_dfl_wq since 6.17, which
 * warns of system_unbound_wq as deprecated on 7.2 --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 17, 0)
#define zp_unbound_wq		system_dfl_wq
#else
#define zp_unbound_wq		system_unbound_wq
#endif

/* --- the node a kthread is made on: since 6.14 a kthread made on a node
 * takes that node's CPUs as it starts, and again each time a CPU comes
 * online (kthreads_online_cpu()), over a binding set since (zero_cpus).
 * One made on no node is left alone at CPU online; its stack is then
 * allocated anywhere, not on the node it zeroes for (the memory it
 * zeroes is the node's all the same). --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 14, 0)
#define ZP_KTHREAD_NODE(nid)	NUMA_NO_NODE
#else
#define ZP_KTHREAD_NODE(nid)	(nid)
#endif

/* --- PFNMAP (device BAR) lookup: follow_pfnmap_start() since 6.12 ---
 * The pfn mapped at addr in a VM_PFNMAP vma (caller holds the mmap lock)
 * and how many pages from addr on are sure to follow it contiguously: the
 * rest of a huge (PMD or PUD) leaf, which 6.12 shows as no PTE pointer
 * (a leaf-size mask only came in 6.15); 6.1 maps BARs with PTEs only.
 * -ENOENT when nothing is mapped there yet, -EFAULT when write is asked of
 * a read-only mapping. */
static inline int zp_follow_pfnmap(struct vm_area_struct *vma, unsigned long addr,
				   bool write, unsigned long *pfn, unsigned long *contig)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
	struct follow_pfnmap_args args = { .vma = vma, .address = addr };
	int ret = 0;

	if (follow_pfnmap_start(&args))
		return -ENOENT;
	if (write && !args.writable) {
		ret = -EFAULT;
	} else {
		*pfn = args.pfn;
		*contig = args.ptep ? 1 : (PMD_SIZE - (addr & ~PMD_MASK)) >> PAGE_SHIFT;
	}
	follow_pfnmap_end(&args);
	return ret;
#else
	spinlock_t *ptl;
	pte_t *ptep;
	int ret = 0;

	if (follow_pte(vma->vm_mm, addr, &ptep, &ptl))
		return -ENOENT;
	if (write && !pte_write(*ptep)) {
		ret = -EFAULT;
	} else {
		*pfn = pte_pfn(*ptep);
		*contig = 1;
	}
	pte_unmap_unlock(ptep, ptl);
	return ret;
#endif
}

/* --- the VFIO device behind a device file ---
 * 6.1 keeps the device itself in the file's private data; since 6.2 it is
 * a struct vfio_device_file (drivers/vfio/vfio.h, private: declared here
 * under our name, checked against the kernel by scripts/check-vfio-abi).
 * A VFIO file that backs a vma is a device file (group and container files
 * have no mmap); group files are ruled out by their file operations as
 * well. The caller keeps file open (a vma's, under the mmap lock): the
 * device lives as long. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
#define ZP_VFIO_HAS_DEVICE_FILE 1
struct zp_vfio_device_file {
	struct vfio_device *device;	/* the kernel's first member */
};
#endif

static inline struct vfio_device *zp_vfio_file_device(struct file *file)
{
	if (!zp_file_is_vfio(file) || vfio_file_is_group(file))
		return NULL;
#ifdef ZP_VFIO_HAS_DEVICE_FILE
	return ((struct zp_vfio_device_file *)file->private_data)->device;
#else
	return file->private_data;
#endif
}

/* --- a vfio-pci BAR mmap: its pfns follow from the BAR ---
 * vfio_pci_core_mmap() maps a BAR linearly. 6.1 rewrites vm_pgoff to the
 * BAR's first pfn plus the page offset (and its first fault fills the
 * whole vma with 4 KiB PTEs); 6.12 keeps VFIO's region encoding, index <<
 * (VFIO_PCI_OFFSET_SHIFT - PAGE_SHIFT) | page offset, and computes each
 * fault's pfn from the BAR's resource. Either way the pfn at any address
 * is known without a fault or a page-table walk. The kernels between
 * (not supported) say no here and take the walk. On 6.1 the rewrite is
 * recognised by its vm_ops, not by the version alone: the vm_pgoff
 * rewrite came with vfio-pci's own list of BAR vmas, kept by .open and
 * .close, and upstream's move to unmap_mapping_range() (6.12) dropped the
 * rewrite, the list and both callbacks together. A 6.1.y that took that
 * change keeps the region encoding in vm_pgoff, which could read as a
 * plausible pfn (index 1 is 1 TiB): its vma has no .close, and takes the
 * walk. Returns the BAR's first pfn and the page offset into it of
 * vma->vm_start; -ENODEV when vma's pfn layout is not known this way. */
static inline int zp_vfio_pci_vma_bar(struct vm_area_struct *vma, struct pci_dev *pdev,
				      unsigned int *index, unsigned long *offset)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0)
	*index = vma->vm_pgoff >> (VFIO_PCI_OFFSET_SHIFT - PAGE_SHIFT);
	*offset = vma->vm_pgoff & ((1UL << (VFIO_PCI_OFFSET_SHIFT - PAGE_SHIFT)) - 1);
	return *index < PCI_STD_NUM_BARS ? 0 : -ENODEV;
#elif LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
	if (!vma->vm_ops || !vma->vm_ops->open || !vma->vm_ops->close)
		return -ENODEV;
	for (*index = 0; *index < PCI_STD_NUM_BARS; (*index)++) {
		unsigned long first = pci_resource_start(pdev, *index) >> PAGE_SHIFT;

		if (pci_resource_len(pdev, *index) && vma->vm_pgoff >= first) {
			*offset = vma->vm_pgoff - first;
			if (*offset < PFN_UP(pci_resource_len(pdev, *index)))
				return 0;
		}
	}
	return -ENODEV;
#else
	return -ENODEV;
#endif
}

/* --- IOMMU API: map calls take a gfp since 6.3; before, a second entry
 * point allocates atomically --- */
static inline int zp_iommu_map(struct iommu_domain *domain, unsigned long iova,
			       phys_addr_t paddr, size_t size, int prot, gfp_t gfp)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	return iommu_map(domain, iova, paddr, size, prot, gfp);
#else
	if (!gfpflags_allow_blocking(gfp))
		return iommu_map_atomic(domain, iova, paddr, size, prot);
	return iommu_map(domain, iova, paddr, size, prot);
#endif
}

static inline ssize_t zp_iommu_map_sg(struct iommu_domain *domain, unsigned long iova,
				      struct scatterlist *sg, unsigned int nents, int prot)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	return iommu_map_sg(domain, iova, sg, nents, prot, GFP_KERNEL_ACCOUNT);
#else
	return iommu_map_sg(domain, iova, sg, nents, prot);
#endif
}

/* --- IOMMU API: a paging domain for a device; by bus before 6.11 --- */
static inline struct iommu_domain *zp_iommu_domain_alloc(struct device *dev)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
	return iommu_paging_domain_alloc(dev);
#else
	struct iommu_domain *domain = iommu_domain_alloc(dev->bus);

	return domain ? domain : ERR_PTR(-ENODEV);
#endif
}

/*
 * --- An isolated cpuset partition's CPUs, where housekeeping does not say ---
 * 6.7 to 6.19 keep them in cpuset's own mask (cpuset_cpu_is_isolated(),
 * exported, lockless). From 7.0 housekeeping's DOMAIN mask leaves them
 * out and the helper is gone ("cpuset: Remove cpuset_cpu_is_isolated()",
 * the series that made that mask follow partitions). 6.1 has isolated
 * partitions too, but neither helper: nothing it exports names their
 * CPUs, so there they are not seen (docs/module.md, run_build).
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0) && LINUX_VERSION_CODE < KERNEL_VERSION(7, 0, 0)
#include <linux/cpuset.h>
#define ZP_CPUSET_ISOLATES_APART	1
#define zp_cpuset_cpu_isolated(cpu)	cpuset_cpu_is_isolated(cpu)
#else
#define ZP_CPUSET_ISOLATES_APART	0
#define zp_cpuset_cpu_isolated(cpu)	((void)(cpu), false)
#endif

/* --- MSI isolation (interrupt remapping) of a group; a helper since 6.2 --- */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
static inline bool zp_group_msi_isolated(struct iommu_group *group)
{
	return iommu_group_has_isolated_msi(group);
}
#else
static inline int zp_dev_intr_remap(struct device *dev, void *unused)
{
	return device_iommu_capable(dev, IOMMU_CAP_INTR_REMAP);
}

static inline bool zp_group_msi_isolated(struct iommu_group *group)
{
	return irq_domain_check_msi_remap() ||
	       iommu_group_for_each_dev(group, NULL, zp_dev_intr_remap);
}
#endif

/*
 * --- VFIO's IOMMU-backend interface ---
 * drivers/vfio/vfio.h is private to the kernel and in no headers package, so
 * what the backend needs from it is declared here, under our own names, and
 * checked member by member against the target kernel's source by
 * scripts/check-vfio-abi (part of make check). 6.1 has a trailing notify().
 */
struct iommu_domain;
struct iommu_group;
struct vfio_device;

enum zp_vfio_group_type {
	ZP_VFIO_IOMMU,			/* a physical device behind a real IOMMU */
	ZP_VFIO_EMULATED_IOMMU,		/* mdev: the core fakes up an iommu_group */
	ZP_VFIO_NO_IOMMU,		/* vfio-noiommu: no DMA protection at all */
};

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
#define ZP_VFIO_OPS_HAVE_NOTIFY 1
enum zp_vfio_iommu_notify_type {
	ZP_VFIO_IOMMU_CONTAINER_CLOSE = 0,	/* the container fd is closing */
};
#endif

struct zp_vfio_iommu_driver_ops {
	char		*name;
	struct module	*owner;
	void		*(*open)(unsigned long arg);
	void		(*release)(void *iommu_data);
	long		(*ioctl)(void *iommu_data, unsigned int cmd, unsigned long arg);
	int		(*attach_group)(void *iommu_data, struct iommu_group *group,
					enum zp_vfio_group_type type);
	void		(*detach_group)(void *iommu_data, struct iommu_group *group);
	int		(*pin_pages)(void *iommu_data, struct iommu_group *group,
				     dma_addr_t user_iova, int npage, int prot,
				     struct page **pages);
	void		(*unpin_pages)(void *iommu_data, dma_addr_t user_iova, int npage);
	void		(*register_device)(void *iommu_data, struct vfio_device *vdev);
	void		(*unregister_device)(void *iommu_data, struct vfio_device *vdev);
	int		(*dma_rw)(void *iommu_data, dma_addr_t user_iova, void *data,
				  size_t count, bool write);
	struct iommu_domain *(*group_iommu_domain)(void *iommu_data,
						   struct iommu_group *group);
#ifdef ZP_VFIO_OPS_HAVE_NOTIFY
	void		(*notify)(void *iommu_data, enum zp_vfio_iommu_notify_type event);
#endif
};

#ifndef ZP_VFIO_ABI_CHECK	/* the check sees the kernel's own prototypes */
int vfio_register_iommu_driver(const struct zp_vfio_iommu_driver_ops *ops);
void vfio_unregister_iommu_driver(const struct zp_vfio_iommu_driver_ops *ops);
#endif

#endif /* ZEROPIN_COMPAT_H */
