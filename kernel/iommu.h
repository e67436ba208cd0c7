/* SPDX-License-Identifier: GPL-2.0 */
/*
 * iommu.h - zeropin's VFIO IOMMU backend: what iommu.c (the container,
 * its groups and IOMMU domains, the ioctls) and dma.c (the DMA mappings)
 * share.
 */
#ifndef ZEROPIN_IOMMU_H
#define ZEROPIN_IOMMU_H

#include <linux/atomic.h>
#include <linux/iommu.h>
#include <linux/list.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/rbtree.h>
#include <linux/vfio.h>

#include "pin.h"

/* A usable IOVA range, inclusive: apertures minus reserved regions. */
struct zp_iova_range {
	u64 start;
	u64 last;
};

/* One IOMMU page table, shared by every group whose IOMMU accepts it. */
struct zp_domain {
	struct list_head node;		/* in zp_container.domains */
	struct iommu_domain *domain;	/* the page table */
	struct list_head groups;	/* zp_group attached to it */
	bool enforce_coherency;		/* no-snoop DMA is blocked */
};

struct zp_group {
	struct list_head node;		/* in zp_domain.groups */
	struct iommu_group *group;	/* the VFIO group's IOMMU group */
};

/* One VFIO container that zeropin serves (VFIO_TYPE1v2_IOMMU). */
struct zp_container {
	struct mutex lock;		/* protects everything below */
	struct mutex revoke_lock;	/* nested in lock: taken by the MMIO
					 * revocation callback, which runs inside
					 * reclaim and under mmap_lock, so nothing
					 * that allocates memory or takes mmap_lock
					 * is done under it. Held to change domains
					 * (the list only) or a dma's mapped and
					 * revoked, and to unmap a dma the callback
					 * may have revoked */
	atomic_t revoke_waiters;	/* revocation callbacks waiting for
					 * revoke_lock: a locked write that drops
					 * it between pieces lets them in first
					 * (a mutex released and retaken at once
					 * starves a spinning waiter) */
	struct list_head domains;	/* zp_domain */
	struct zp_domain *replay_domain; /* being replayed into (zp_dma_replay()):
					 * it holds the live watched dmas up to
					 * replay_last, no other (all three under
					 * revoke_lock) */
	bool replay_some;		/* replay_last is one */
	dma_addr_t replay_last;		/* last IOVA of the last one replayed */
	struct rb_root dmas;		/* zp_dma by IOVA, never overlapping */
	struct zp_iova_range *ranges;	/* sorted usable IOVA ranges */
	unsigned int nr_ranges;		/* entries in ranges (0: no group yet) */
	unsigned long pgsize_bitmap;	/* page sizes every domain supports */
	unsigned int dma_avail;		/* mappings left under dma_entry_limit */
};

/* One VFIO_IOMMU_MAP_DMA: a contiguous IOVA range and what it pins. */
struct zp_dma {
	struct rb_node node;		/* in zp_container.dmas */
	dma_addr_t iova;		/* first IOVA */
	size_t size;			/* bytes, a multiple of PAGE_SIZE */
	unsigned long vaddr;		/* user address it was mapped from */
	int prot;			/* IOMMU_READ / IOMMU_WRITE */
	struct zp_pinned pinned;	/* the pinned runs and their charge */
	struct zp_container *c;		/* the container it belongs to */
	struct mmu_interval_notifier mmio_watch; /* MMIO (PFNMAP) ranges: told
					 * when the user's mapping goes away */
	bool watched;			/* mmio_watch is registered */
	bool mapped;			/* in every domain (under revoke_lock) */
	bool revoked;			/* MMIO mapping gone: taken out of the
					 * IOMMU, IOVA still reserved until
					 * UNMAP_DMA (under revoke_lock) */
	struct zp_domain *write_domain;	/* being written under revoke_lock, which
					 * the writer drops between pieces: the
					 * domain it got to (NULL: no such write),
					 * in a replay (c->replay_domain set) the
					 * only one not holding all of dma, in a
					 * first map the domains after it holding
					 * nothing (both under revoke_lock) */
	size_t written;			/* bytes from iova written there */
};

/* Global counters, in debugfs zeropin/iommu_counters. */
struct zp_iommu_stats {
	atomic64_t containers;		/* containers served now */
	atomic64_t domains;		/* IOMMU domains allocated now */
	atomic64_t map_ioctls;		/* MAP_DMA requests (all outcomes) */
	atomic64_t unmap_ioctls;	/* UNMAP_DMA requests (all outcomes) */
	atomic64_t pages_pinned;	/* pages pinned now */
	atomic64_t pages_pinned_total;	/* pages ever pinned */
	atomic64_t gup_calls;		/* pin_user_pages_fast() calls */
	atomic64_t runs;		/* contiguous runs ever pinned */
	atomic64_t iommu_map_calls;	/* iommu_map()/iommu_map_sg() calls */
	atomic64_t iommu_unmap_calls;	/* iommu_unmap() calls */
	atomic64_t entries_4k;		/* IOMMU entries created, by page size */
	atomic64_t entries_2m;
	atomic64_t entries_1g;
	atomic64_t pfnmap_lookups;	/* PFNMAP page-table lookups by the walk
					 * (not the BAR path's one cross-check) */
	atomic64_t bar_runs;		/* vfio-pci BAR ranges taken whole, no walk */
	atomic64_t mmio_pages;		/* MMIO (PFNMAP) pages ever mapped */
	atomic64_t mmio_revoked;	/* mappings revoked because their MMIO
					 * mapping went away */
	atomic64_t setup_failures;	/* containers and groups zeropin failed
					 * to set up (no memory, IOMMU error):
					 * VFIO_SET_IOMMU then goes to type1 */
};
extern struct zp_iommu_stats zp_iommu_stats;

#define zp_stat_add(name, n)	atomic64_add((n), &zp_iommu_stats.name)
#define zp_stat_inc(name)	atomic64_inc(&zp_iommu_stats.name)
#define zp_stat_dec(name)	atomic64_dec(&zp_iommu_stats.name)

int zp_iommu_init(struct dentry *debugfs_dir);
void zp_iommu_exit(void);

/* dma.c; every function here is called with zp_container.lock held.
 * zp_dma_replay() lists d (under revoke_lock) and maps every live mapping
 * into it; on failure d is unlisted again. */
int zp_dma_map(struct zp_container *c, struct vfio_iommu_type1_dma_map *map);
int zp_dma_unmap(struct zp_container *c, struct vfio_iommu_type1_dma_unmap *unmap);
int zp_dma_replay(struct zp_container *c, struct zp_domain *d);
void zp_dma_remove_all(struct zp_container *c);
/* Whether every mapping lies inside the given usable ranges. */
bool zp_dma_fit(struct zp_container *c, const struct zp_iova_range *r,
		unsigned int nr);

#endif /* ZEROPIN_IOMMU_H */
