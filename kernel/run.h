/* SPDX-License-Identifier: GPL-2.0 */
/*
 * run.h - 1 GiB runs: physically contiguous, 1 GiB-aligned ranges of
 * blocks, which the IOMMU maps with one entry each.
 */
#ifndef ZEROPIN_RUN_H
#define ZEROPIN_RUN_H

#include <linux/mm_types.h>
#include <linux/types.h>

#include "pool.h"

/*
 * Whether this kernel lets the pool cut blocks out of a run: the range
 * allocator is built in and a block made by hand (zp_prep_folio()) is the
 * folio the kernel makes. Decided once, at load (zp_run_init()).
 */
extern bool zp_runs_supported;

void zp_run_init(void);

/* Is cpu isolated (isolcpus=, nohz_full=, an isolated cpuset partition)?
 * Caller holds rcu_read_lock(). */
bool zp_cpu_isolated(int cpu);

/* Are some online CPUs isolated? Then no run is built: a build waits for
 * work on every CPU. */
bool zp_run_cpus_isolated(void);

/*
 * Take a free-enough, 1 GiB-aligned GiB of node nid's ZONE_NORMAL from the
 * page allocator (what it holds is migrated away) and cut it into blocks:
 * blocks[k] is the k-th 2 MiB, or NULL where a block could not be made
 * (its pages went back to the allocator). *cursor (a pfn) says where the
 * search goes on next time. Zeroed by the allocator as its refills are
 * (init_on_alloc), else not. Returns 0, -ENOSPC when no GiB qualifies
 * (only then: the pool counts the two apart), -EBUSY also when the GiB
 * went offline after the scan, or alloc_contig_range()'s error. Slow (a migration can take hundreds of ms per GiB); sleeps; no
 * lock held.
 */
int zp_run_build(int nid, unsigned long *cursor, struct folio *blocks[ZP_RUN_BLOCKS]);

/* The gfp runs are taken with: as the pool's refills, never direct
 * reclaim (the caller decides whether the allocator zeroes). */
extern const gfp_t zp_run_gfp;

#endif /* ZEROPIN_RUN_H */
