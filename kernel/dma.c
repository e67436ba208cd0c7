// SPDX-License-Identifier: GPL-2.0
/*
 * dma.c - the DMA mappings of a zeropin container: VFIO_IOMMU_MAP_DMA and
 * UNMAP_DMA with type1v2's semantics and errnos, and replaying them into
 * an IOMMU domain that joins later.
 *
 * A mapping is pinned once (pin.c) and then written into every domain of
 * the container. Its runs go to the IOMMU a chunk at a time through
 * iommu_map_sg(), which picks the largest page size each run allows and
 * syncs the IOTLB once per chunk rather than once per run; a chunk that
 * would write more than ZP_MAP_SG_MAX_PTES page-table entries in that one
 * call (large folios at an IOVA only 4 KiB-congruent to them) goes run by
 * run, in pieces, and the writer reschedules between chunks. Unmapping is
 * one iommu_unmap() of the whole range per domain (one IOTLB sync), then
 * the runs are unpinned.
 *
 * A mapping of MMIO (a device BAR, peer-to-peer) is watched with an
 * mmu_interval_notifier on the user's range: when that mapping goes away
 * (munmap, mremap, process exit) the IOMMU stops reaching the BAR at once
 * (zp_dma_mmio_gone()) — or, for a MAP_DMA still writing it with the
 * device file held, when that write ends (zp_dma_map_all()) — and the
 * IOVA stays reserved, unmapped, until UNMAP_DMA. A zap that leaves a
 * vfio-pci BAR mapping in place (a device reset, memory decode off) keeps
 * the IOMMU mapping, as type1 does: the user's BAR mmap holds the device
 * file, so the device cannot change hands, the same pfns come back on the
 * next access, and QEMU sees no change. Any
 * other PFNMAP (a GPU driver's VRAM mmap, say) may come back with other
 * pfns after a zap, so there a zap revokes too.
 *
 * Locking: every function here runs under zp_container.lock, which also
 * covers the pinning (as type1 pins under its container lock). The
 * revocation callback runs inside reclaim and under the mmap_lock, so it
 * takes only zp_container.revoke_lock, under which nothing may enter
 * reclaim: the standard mmu_interval_notifier pattern. A watched mapping
 * looks up its pfns after mmu_interval_read_begin(). Where its MMIO is all
 * vfio-pci BARs whose device files the pin holds (the usual case), it is
 * written outside revoke_lock with ordinary, accounted allocations (a
 * 64 GiB BAR at an IOVA only 4 KiB-congruent to it needs 128 MiB of IOMMU
 * page tables) and taken out again if revoked meanwhile; holding the files
 * keeps the devices from being released, so in between the IOMMU reaches
 * only the user's own BARs (zp_dma_map_held()). Otherwise, under
 * revoke_lock, it checks mmu_interval_read_retry() and writes the IOMMU
 * without entering reclaim (GFP_NOWAIT, accounted), dropping the lock
 * between pieces of at most 64 MiB (or one 1 GiB entry): a revocation
 * meanwhile (munmap or exit, under the VMM's mmap_lock) waits for one
 * piece, not the whole map, takes out what is written so far, and the
 * write stops (zp_dma_write_locked()); so the callback never returns
 * while the IOMMU still maps what it revoked. Mappings without MMIO are
 * never watched and are written without revoke_lock. A domain that joins
 * later gets watched mappings under revoke_lock, GFP_NOWAIT, as the pin's
 * files are long dropped: a huge BAR at a non-congruent IOVA may fail
 * that attach with -ENOMEM under memory pressure. On 6.1 the gfp is only
 * a wish: its iommu_map() allocates GFP_KERNEL, iommu_map_atomic()
 * GFP_ATOMIC, and VT-d's page tables are GFP_ATOMIC and unaccounted
 * either way, as they are for type1.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": dma: " fmt

#include <linux/rbtree.h>
#include <linux/scatterlist.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>

#include "compat.h"
#include "iommu.h"

/* Largest scatterlist entry: sg lengths are 32-bit. iommu_map_sg() joins
 * consecutive entries again, so a longer run is just split. */
#define ZP_SG_MAX_BYTES	(1UL << 30)

/* The mapping containing iova, or the first one after it; NULL if none. */
static struct zp_dma *zp_dma_find_from(struct zp_container *c, dma_addr_t iova)
{
	struct rb_node *n = c->dmas.rb_node;
	struct zp_dma *best = NULL;

	while (n) {
		struct zp_dma *dma = rb_entry(n, struct zp_dma, node);

		if (iova < dma->iova) {
			best = dma;
			n = n->rb_left;
		} else if (iova >= dma->iova + dma->size) {
			n = n->rb_right;
		} else {
			return dma;
		}
	}
	return best;
}

/* A mapping overlapping [start, last], or NULL. */
static struct zp_dma *zp_dma_find(struct zp_container *c, u64 start, u64 last)
{
	struct zp_dma *dma = zp_dma_find_from(c, start);

	return dma && dma->iova <= last ? dma : NULL;
}

static struct zp_dma *zp_dma_next(struct zp_dma *dma)
{
	struct rb_node *n = rb_next(&dma->node);

	return n ? rb_entry(n, struct zp_dma, node) : NULL;
}

static void zp_dma_link(struct zp_container *c, struct zp_dma *new)
{
	struct rb_node **link = &c->dmas.rb_node, *parent = NULL;

	while (*link) {
		struct zp_dma *dma = rb_entry(*link, struct zp_dma, node);

		parent = *link;
		link = new->iova < dma->iova ? &parent->rb_left : &parent->rb_right;
	}
	rb_link_node(&new->node, parent, link);
	rb_insert_color(&new->node, &c->dmas);
}

/* Whether [start, last] lies wholly inside one of the nr ranges r. */
static bool zp_ranges_contain(const struct zp_iova_range *r, unsigned int nr,
			      u64 start, u64 last)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		if (start >= r[i].start && last <= r[i].last)
			return true;
	return false;
}

bool zp_dma_fit(struct zp_container *c, const struct zp_iova_range *r,
		unsigned int nr)
{
	struct rb_node *n;

	for (n = rb_first(&c->dmas); n; n = rb_next(n)) {
		struct zp_dma *dma = rb_entry(n, struct zp_dma, node);

		if (!zp_ranges_contain(r, nr, dma->iova, dma->iova + dma->size - 1))
			return false;
	}
	return true;
}

/* IOMMU entries by page size, counted for a chunk and added to the
 * shared counters once: an atomic per run was ~8 % of the samples in a
 * warm THP map's kernel profile (bpftrace, lab). */
struct zp_entry_count {
	u64 e4k, e2m, e1g;	/* entries by size (other sizes: e4k) */
	u64 ptes;		/* page-table entries written for them: an
				 * entry between two levels' sizes (AMD's
				 * 8 KiB..1 MiB, say) is replicated PTEs */
};

/* Page-table entries one IOMMU entry of 2^bit bytes writes: one where
 * bit is a level's size (4 KiB, 2 MiB, 1 GiB with 512-entry tables),
 * else the copies of the level below it. */
static u64 zp_entry_ptes(int bit)
{
	return 1ULL << ((bit - PAGE_SHIFT) % 9);
}

/*
 * Count the IOMMU entries a contiguous piece takes: the largest page size
 * the domain supports wherever IOVA and physical address are aligned to
 * it together, smaller ones at the unaligned ends (what iommu_map() does).
 */
static void zp_count_entries(struct zp_entry_count *n, u64 iova, phys_addr_t phys,
			     u64 len, unsigned long pgsizes)
{
	unsigned long sz;
	u64 head, tail;
	int bit;

	for (bit = fls_long(pgsizes) - 1; len && bit >= PAGE_SHIFT; bit--) {
		sz = 1UL << bit;
		if (!(pgsizes & sz) || ((iova ^ phys) & (sz - 1)))
			continue;
		head = ALIGN(iova, sz);
		tail = ALIGN_DOWN(iova + len, sz);
		if (head >= tail)
			continue;
		if (sz == SZ_1G)
			n->e1g += (tail - head) / sz;
		else if (sz == SZ_2M)
			n->e2m += (tail - head) / sz;
		else
			n->e4k += (tail - head) / sz;
		n->ptes += (tail - head) / sz * zp_entry_ptes(bit);
		/* the ends in the domain's smaller sizes only */
		zp_count_entries(n, iova, phys, head - iova, pgsizes & (sz - 1));
		zp_count_entries(n, tail, phys + (tail - iova), iova + len - tail,
				 pgsizes & (sz - 1));
		return;
	}
}

/* The IOMMU entries a chunk's runs take at iova in d, into *n. */
static void zp_chunk_entries(struct zp_domain *d, dma_addr_t iova,
			     struct zp_run_chunk *chunk, struct zp_entry_count *n)
{
	unsigned int i;

	*n = (struct zp_entry_count){};
	for (i = 0; i < chunk->nr; i++) {
		size_t len = zp_run_bytes(&chunk->run[i]);

		zp_count_entries(n, iova, PFN_PHYS(chunk->run[i].pfn), len,
				 d->domain->pgsize_bitmap);
		iova += len;
	}
}

static void zp_publish_entries(const struct zp_entry_count *n)
{
	zp_stat_add(entries_4k, n->e4k);
	zp_stat_add(entries_2m, n->e2m);
	zp_stat_add(entries_1g, n->e1g);
}

/* Scatterlist entries a chunk's runs need (runs split at ZP_SG_MAX_BYTES). */
static unsigned int zp_chunk_nents(struct zp_run_chunk *chunk, size_t *bytes)
{
	unsigned int i, nents = 0;

	*bytes = 0;
	for (i = 0; i < chunk->nr; i++) {
		size_t len = zp_run_bytes(&chunk->run[i]);

		nents += DIV_ROUND_UP(len, ZP_SG_MAX_BYTES);
		*bytes += len;
	}
	return nents;
}

static bool zp_chunk_has_mmio(struct zp_run_chunk *chunk)
{
	unsigned int i;

	for (i = 0; i < chunk->nr; i++)
		if (chunk->run[i].kind == ZP_RUN_MMIO)
			return true;
	return false;
}

/* Largest piece of a run one iommu_map() writes: a 64 GiB BAR at an IOVA
 * only 4 KiB-congruent to it is 16 M entries; a GiB (256 K entries at
 * worst, one 1 GiB entry at best) between reschedules and fatal-signal
 * checks keeps a map of any size preemptible and killable. IOVA-aligned,
 * so no piece costs a larger entry. */
#define ZP_MAP_STEP	(1UL << 30)
/* The same under revoke_lock, which is dropped between pieces: where no
 * 1 GiB entry fits, 64 MiB (16 K entries at worst), so that a revocation
 * (munmap or exit, with the VMM's mmap_lock held and its vCPUs' faults
 * waiting behind it) waits for one such piece, not for the whole map. */
#define ZP_LOCKED_STEP	(64UL << 20)

/*
 * How a mapping's runs are written. Outside revoke_lock (c NULL): with
 * ordinary, accounted allocations. Under it (a watched mapping the
 * revocation callback may take out meanwhile, dma->write_domain set): with
 * allocations that never enter reclaim, and the lock dropped between
 * pieces; the callback takes out whatever of the mapping is written so
 * far, and the writer stops at its next piece (-ECANCELED).
 */
struct zp_writer {
	struct zp_container *c;		/* revoke_lock held, else NULL */
	struct zp_dma *dma;		/* the mapping written */
	size_t since_pause;		/* bytes written since the last pause */
};

static gfp_t zp_writer_gfp(const struct zp_writer *w)
{
	return w->c ? GFP_NOWAIT | __GFP_ACCOUNT | __GFP_NOWARN : GFP_KERNEL_ACCOUNT;
}

/* The next piece of a run at iova (physical pa) into d, left bytes to go:
 * under revoke_lock, a GiB only where it is one 1 GiB entry. */
static size_t zp_writer_piece(const struct zp_writer *w, struct zp_domain *d,
			      dma_addr_t iova, phys_addr_t pa, size_t left)
{
	size_t step = ZP_MAP_STEP;

	if (w->c && (((iova | pa) & (ZP_MAP_STEP - 1)) ||
		     !(d->domain->pgsize_bitmap & ZP_MAP_STEP)))
		step = ZP_LOCKED_STEP;
	return min_t(size_t, left, step - (iova & (step - 1)));
}

/* Between two pieces, with [dma->iova, end) written into d: reschedule,
 * dropping revoke_lock if held (having said how far the write got, for
 * zp_dma_unmap_written()) and letting every revocation that waits for it
 * go first; -ECANCELED when one took this dma out, -EINTR on a fatal
 * signal. */
static int zp_writer_pause(struct zp_writer *w, struct zp_domain *d, dma_addr_t end)
{
	w->since_pause = 0;
	if (w->c) {
		w->dma->write_domain = d;
		w->dma->written = end - w->dma->iova;
		mutex_unlock(&w->c->revoke_lock);
		wait_var_event(&w->c->revoke_waiters, !atomic_read(&w->c->revoke_waiters));
	}
	cond_resched();
	if (w->c)
		mutex_lock(&w->c->revoke_lock);
	if (w->c && w->dma->revoked)
		return -ECANCELED;
	return fatal_signal_pending(current) ? -EINTR : 0;
}

/* One run at iova, in pieces (zp_writer_piece()). Always in process
 * context under mutexes only; w says whether revoke_lock is held (and
 * dropped between pieces). Nothing stays mapped on error. */
static int zp_map_run(struct zp_domain *d, dma_addr_t iova, const struct zp_run *run,
		      int prot, struct zp_writer *w)
{
	size_t len = zp_run_bytes(run), done = 0, n;
	int ret = 0;

	might_sleep();
	while (!ret && done < len) {
		n = zp_writer_piece(w, d, iova + done, PFN_PHYS(run->pfn) + done, len - done);
		ret = zp_iommu_map(d->domain, iova + done, PFN_PHYS(run->pfn) + done, n,
				   prot | IOMMU_CACHE, zp_writer_gfp(w));
		zp_stat_inc(iommu_map_calls);
		if (!ret) {
			done += n;
			w->since_pause += n;
		}
		if (!ret && done < len)
			ret = zp_writer_pause(w, d, iova + done);
	}
	/* cancelled: the revocation took out all that was written */
	if (ret && ret != -ECANCELED && done)
		iommu_unmap(d->domain, iova, done);
	return ret;
}

/* A chunk with MMIO runs (no struct page for a scatterlist), one
 * written under revoke_lock (atomic allocations: no scatterlist table), or
 * one past ZP_MAP_SG_MAX_PTES: one zp_map_run() per run, in pieces. Few
 * mappings hold BARs or sit misaligned, so this path stays rare. */
static int zp_map_chunk_runs(struct zp_domain *d, dma_addr_t iova,
			     struct zp_run_chunk *chunk, int prot,
			     struct zp_writer *w, size_t *mapped)
{
	unsigned int i;
	int ret;

	*mapped = 0;
	for (i = 0; i < chunk->nr; i++) {
		ret = zp_map_run(d, iova + *mapped, &chunk->run[i], prot, w);
		if (!ret)
			*mapped += zp_run_bytes(&chunk->run[i]);
		/* many short runs (scattered pfns) pause as one long one */
		if (!ret && w->since_pause >= ZP_LOCKED_STEP)
			ret = zp_writer_pause(w, d, iova + *mapped);
		if (ret) {
			if (*mapped && ret != -ECANCELED)
				iommu_unmap(d->domain, iova, *mapped);
			return ret;
		}
	}
	return 0;
}

/*
 * The scatterlist a mapping's chunks are written through: one flat array,
 * grown to the largest chunk's need (at most ZP_RUNS_PER_CHUNK entries
 * plus one per GiB of long runs: ~32 KiB) and reused for every chunk of
 * the mapping. sg_alloc_table()'s chain of pages, a page per 128 entries
 * allocated and freed per chunk, was ~7 % of the samples there.
 */
struct zp_sg_buf {
	struct scatterlist *sgl;	/* kvmalloc'd, cap entries; NULL at first */
	unsigned int cap;		/* entries sgl holds */
};

/* buf's array, grown to nents entries and initialised as a table of
 * exactly that many; NULL when it cannot grow (buf left as it was).
 * Sleeps (GFP_KERNEL_ACCOUNT): never under revoke_lock. */
static struct scatterlist *zp_sg_buf_table(struct zp_sg_buf *buf, unsigned int nents)
{
	struct scatterlist *sgl;

	if (WARN_ON_ONCE(!nents))
		return NULL;
	if (nents > buf->cap) {
		sgl = kvmalloc_array(nents, sizeof(*sgl), GFP_KERNEL_ACCOUNT);
		if (!sgl)
			return NULL;
		kvfree(buf->sgl);
		buf->sgl = sgl;
		buf->cap = nents;
	}
	sg_init_table(buf->sgl, nents);
	return buf->sgl;
}

/*
 * Page-table entries one iommu_map_sg() may write: a GiB of 4 KiB ones,
 * what ZP_MAP_STEP allows one piece of a run. iommu_map_sg() neither
 * reschedules nor looks at signals, and a chunk of large folios at an IOVA
 * only 4 KiB-congruent to them takes 4 KiB entries all through (1022 runs
 * of 1 GiB hugetlb pages: 268 M of them); such a chunk goes run by run, in
 * pieces.
 */
#define ZP_MAP_SG_MAX_PTES	(ZP_MAP_STEP >> PAGE_SHIFT)

/* One chunk of runs at iova into d with one iommu_map_sg() through buf.
 * Nothing of it stays mapped on error. Caller holds the container lock,
 * not revoke_lock (the table may be allocated; iommu_map_sg() sleeps). */
static int zp_map_chunk_sg(struct zp_domain *d, dma_addr_t iova,
			   struct zp_run_chunk *chunk, int prot,
			   struct zp_sg_buf *buf, size_t *mapped)
{
	struct scatterlist *sgl, *sg;
	unsigned int i, nents;
	ssize_t ret;

	nents = zp_chunk_nents(chunk, mapped);
	sgl = zp_sg_buf_table(buf, nents);
	if (!sgl)
		return -ENOMEM;
	sg = sgl;
	for (i = 0; i < chunk->nr; i++) {
		struct page *page = pfn_to_page(chunk->run[i].pfn);
		size_t left = zp_run_bytes(&chunk->run[i]);

		while (left) {
			size_t len = min_t(size_t, left, ZP_SG_MAX_BYTES);

			sg_set_page(sg, page, len, 0);
			page = zp_nth_page(page, len >> PAGE_SHIFT);
			left -= len;
			sg = sg_next(sg);
		}
	}
	ret = zp_iommu_map_sg(d->domain, iova, sgl, nents, prot | IOMMU_CACHE);
	zp_stat_inc(iommu_map_calls);
	if (ret == *mapped)
		return 0;
	if (ret > 0)	/* short: iommu_map_sg() unmaps nothing on its own then */
		iommu_unmap(d->domain, iova, ret);
	return ret < 0 ? ret : -EFAULT;
}

/* One chunk of runs at iova into d, counted in the IOMMU counters once
 * it is all there: zp_map_chunk_sg(), or run by run under revoke_lock (no
 * sleeping allocation), with MMIO, or past ZP_MAP_SG_MAX_PTES. Caller
 * holds the container lock, and revoke_lock exactly when w->c is set;
 * nothing of the chunk stays mapped on error. */
static int zp_map_chunk(struct zp_domain *d, dma_addr_t iova,
			struct zp_run_chunk *chunk, int prot,
			struct zp_writer *w, struct zp_sg_buf *buf, size_t *mapped)
{
	struct zp_entry_count n;
	int ret;

	zp_chunk_entries(d, iova, chunk, &n);
	if (w->c || zp_chunk_has_mmio(chunk) || n.ptes > ZP_MAP_SG_MAX_PTES)
		ret = zp_map_chunk_runs(d, iova, chunk, prot, w, mapped);
	else
		ret = zp_map_chunk_sg(d, iova, chunk, prot, buf, mapped);
	if (!ret)
		zp_publish_entries(&n);
	return ret;
}

/* Write every run of dma into d. On failure nothing of dma stays in d.
 * w: whether under revoke_lock (zp_writer). Outside it the writer pauses
 * between chunks as between a run's pieces (a chunk of 4 KiB runs holds
 * ~4 MiB: a 64 GiB mapping is 16 K of them); under it the chunks go run
 * by run and pause there. */
static int zp_dma_map_domain(struct zp_dma *dma, struct zp_domain *d,
			     struct zp_writer *w)
{
	struct zp_sg_buf buf = {};
	struct zp_run_chunk *chunk;
	size_t done = 0, len;
	int ret = 0;

	zp_for_each_chunk(&dma->pinned, chunk) {
		if (done && !w->c)
			ret = zp_writer_pause(w, d, dma->iova + done);
		if (!ret)
			ret = zp_map_chunk(d, dma->iova + done, chunk, dma->prot, w, &buf, &len);
		if (ret) {
			if (done && ret != -ECANCELED)
				iommu_unmap(d->domain, dma->iova, done);
			break;
		}
		done += len;
	}
	kvfree(buf.sgl);
	return ret;
}

/* Take dma out of d. Nothing there is fine: a domain being replayed into
 * (zp_dma_replay()) is listed before every mapping is in it. Does not
 * allocate. */
static void zp_dma_unmap_domain(struct zp_dma *dma, struct zp_domain *d)
{
	size_t done = iommu_unmap(d->domain, dma->iova, dma->size);

	zp_stat_inc(iommu_unmap_calls);
	WARN_ONCE(done && done != dma->size, "unmapped %zu of %zu bytes at %pad\n",
		  done, dma->size, &dma->iova);
}

/* Take a live (mapped, not revoked) dma out of every domain that holds
 * it (not a domain being replayed into that has not got it yet) and mark
 * it no longer mapped. Only ever what is there: iommu_unmap() of a range
 * with nothing in it is not a no-op everywhere (VT-d widens it to the
 * empty level's page size, over whatever lies beside it, and past the
 * top of the address space it BUGs on 6.1). Caller holds revoke_lock (or
 * is the only one who can reach dma, its watch gone). Does not allocate. */
static void zp_dma_unmap_domains(struct zp_container *c, struct zp_dma *dma)
{
	struct zp_domain *d;

	if (!dma->mapped || dma->revoked)
		return;
	list_for_each_entry(d, &c->domains, node)
		if (d != c->replay_domain || (c->replay_some && dma->iova <= c->replay_last))
			zp_dma_unmap_domain(dma, d);
	dma->mapped = false;
}

/* Take out what a write paused under revoke_lock has put into the IOMMU,
 * exactly (see zp_dma_unmap_domains()): the whole range where it is
 * complete, what the writer said in write_domain, nothing where it has
 * not been. Caller holds revoke_lock. Does not allocate. */
static void zp_dma_unmap_written(struct zp_container *c, struct zp_dma *dma)
{
	bool complete = true;	/* a first map writes the domains in order */
	struct zp_domain *d;

	list_for_each_entry(d, &c->domains, node) {
		if (d == dma->write_domain) {
			if (dma->written)
				iommu_unmap(d->domain, dma->iova, dma->written);
			zp_stat_inc(iommu_unmap_calls);
			complete = false;
		} else if (complete || c->replay_domain) {	/* a replay: all there */
			zp_dma_unmap_domain(dma, d);
		}
	}
	dma->mapped = false;
}

/*
 * The user's mapping behind a dma with MMIO (PFNMAP) changes. When it goes
 * away (munmap, mremap, process exit), take dma out of the IOMMU now, so no
 * device reaches a BAR whose device may soon belong to someone else; the
 * IOVA stays reserved until UNMAP_DMA. A zap (MMU_NOTIFY_CLEAR) revokes
 * only where some MMIO is not a VFIO device's BAR: a vfio-pci BAR comes
 * back with the same pfns (reset, memory decode off), another driver's
 * PFNMAP may not. Protection changes and the like are ignored. Runs inside
 * reclaim and under the invalidator's mmap_lock: takes only revoke_lock,
 * and not even that once revoked; iommu_unmap() does not allocate.
 */
static bool zp_dma_mmio_gone(struct mmu_interval_notifier *watch,
			     const struct mmu_notifier_range *range,
			     unsigned long cur_seq)
{
	struct zp_dma *dma = container_of(watch, struct zp_dma, mmio_watch);
	struct zp_container *c = dma->c;

	if (range->event != MMU_NOTIFY_UNMAP && range->event != MMU_NOTIFY_RELEASE &&
	    range->event != MMU_NOTIFY_CLEAR)
		return true;
	if (READ_ONCE(dma->revoked))
		return true;
	if (mmu_notifier_range_blockable(range)) {
		atomic_inc(&c->revoke_waiters);	/* a paused writer waits */
		mutex_lock(&c->revoke_lock);
		if (atomic_dec_and_test(&c->revoke_waiters))
			wake_up_var(&c->revoke_waiters);
	} else if (!mutex_trylock(&c->revoke_lock)) {
		return false;
	}
	mmu_interval_set_seq(watch, cur_seq);
	if (range->event == MMU_NOTIFY_CLEAR && !READ_ONCE(dma->pinned.mmio_foreign)) {
		mutex_unlock(&c->revoke_lock);
		return true;
	}
	if (dma->write_domain)
		zp_dma_unmap_written(c, dma);
	else
		zp_dma_unmap_domains(c, dma);
	WRITE_ONCE(dma->revoked, true);
	mutex_unlock(&c->revoke_lock);
	zp_stat_inc(mmio_revoked);
	return true;
}

static const struct mmu_interval_notifier_ops zp_mmio_watch_ops = {
	.invalidate = zp_dma_mmio_gone,
};

/* Watch dma's user range before its MMIO pfns are looked up; returns the
 * sequence to check before the IOMMU is written. Takes the mmap_lock. */
static int zp_dma_watch(struct zp_dma *dma, unsigned long *seq)
{
	int ret = mmu_interval_notifier_insert(&dma->mmio_watch, current->mm,
					       dma->vaddr, dma->size, &zp_mmio_watch_ops);

	if (ret)
		return ret;
	dma->watched = true;
	*seq = mmu_interval_read_begin(&dma->mmio_watch);
	return 0;
}

/* Out of every domain, unpinned, uncharged and freed. The watch goes
 * first, outside revoke_lock: removing it waits for a running callback,
 * and afterwards nothing but us reaches dma. */
static void zp_dma_remove(struct zp_container *c, struct zp_dma *dma)
{
	if (dma->watched)
		mmu_interval_notifier_remove(&dma->mmio_watch);
	zp_dma_unmap_domains(c, dma);
	zp_pinned_release(&dma->pinned, dma->prot & IOMMU_WRITE);
	rb_erase(&dma->node, &c->dmas);
	kfree(dma);
	c->dma_avail++;
}

void zp_dma_remove_all(struct zp_container *c)
{
	struct rb_node *n;

	while ((n = rb_first(&c->dmas))) {
		zp_dma_remove(c, rb_entry(n, struct zp_dma, node));
		cond_resched();
	}
}

/* Map dma into every domain; on failure into none. Caller holds
 * zp_container.lock (the domains stay as they are) and, when w->c is set,
 * revoke_lock (dropped between pieces); the caller marks dma mapped. */
static int zp_dma_map_domains(struct zp_container *c, struct zp_dma *dma,
			      struct zp_writer *w)
{
	struct zp_domain *d;
	int ret;

	list_for_each_entry(d, &c->domains, node) {
		ret = zp_dma_map_domain(dma, d, w);
		if (ret)
			goto unwind;
		if (!w->c)
			cond_resched();
	}
	return 0;
unwind:
	if (ret == -ECANCELED)
		return ret;	/* the revocation took out all that was written */
	list_for_each_entry_continue_reverse(d, &c->domains, node)
		zp_dma_unmap_domain(dma, d);
	return ret;
}

/*
 * Write a watched dma under revoke_lock: into every domain (d NULL) or
 * into d alone (a replay). The lock is dropped between pieces
 * (zp_writer_pause()) with dma->write_domain set, so a revocation meanwhile
 * takes out what is written so far in every domain and the write stops:
 * that is success, the dma now revoked, as if it had gone right after.
 * Caller holds zp_container.lock and revoke_lock (held again on return).
 */
static int zp_dma_write_locked(struct zp_container *c, struct zp_dma *dma,
			       struct zp_domain *d)
{
	struct zp_writer w = { .c = c, .dma = dma };
	int ret;

	/* no revocation can come before the first pause sets write_domain:
	 * the lock is held until then */
	ret = d ? zp_dma_map_domain(dma, d, &w) : zp_dma_map_domains(c, dma, &w);
	dma->write_domain = NULL;
	return ret == -ECANCELED ? 0 : ret;
}

/*
 * A watched dma whose MMIO is all vfio-pci BARs with their device files
 * held by the pin (zp_pinned_mmio_held()): written outside revoke_lock with
 * ordinary allocations. A revocation meanwhile finds it not mapped yet and
 * only marks it revoked; it is taken out here then, before the caller
 * drops the files, so no device has been released while the IOMMU could
 * reach its BAR. Caller holds zp_container.lock.
 */
static int zp_dma_map_held(struct zp_container *c, struct zp_dma *dma)
{
	struct zp_writer w = { .dma = dma };
	struct zp_domain *d;
	int ret;

	if (READ_ONCE(dma->revoked))
		return 0;	/* gone already: nothing to write, stays revoked */
	ret = zp_dma_map_domains(c, dma, &w);
	if (ret)
		return ret;
	mutex_lock(&c->revoke_lock);
	if (dma->revoked) {
		list_for_each_entry(d, &c->domains, node)
			zp_dma_unmap_domain(dma, d);
	} else {
		dma->mapped = true;
	}
	mutex_unlock(&c->revoke_lock);
	return 0;
}

/*
 * Map dma into every domain; on failure into none. A watched dma whose
 * mapping went since its pfns were looked up (revoked by the callback, or
 * any change in seq where the MMIO is not all VFIO BARs) is not written at
 * all and stays revoked, as if it had gone right after; otherwise it is
 * written with its device files held (zp_dma_map_held()), or under
 * revoke_lock so that a revocation waits for it. Either way, by return
 * no revocation that came before has left an IOMMU entry behind, and only
 * then does the pin let go of its device files: a revocation during a
 * held write is late by the write's duration, but no device can be
 * released, its BAR given to someone else, before it is applied. Caller
 * holds zp_container.lock.
 */
static int zp_dma_map_all(struct zp_container *c, struct zp_dma *dma,
			  unsigned long seq)
{
	struct zp_writer w = { .dma = dma };
	int ret = 0;

	if (!dma->watched) {
		ret = zp_dma_map_domains(c, dma, &w);
		dma->mapped = !ret;
	} else if (zp_pinned_mmio_held(&dma->pinned)) {
		ret = zp_dma_map_held(c, dma);
	} else {
		mutex_lock(&c->revoke_lock);
		if (dma->revoked || (dma->pinned.mmio_foreign &&
				     mmu_interval_read_retry(&dma->mmio_watch, seq)))
			dma->revoked = true;
		else
			ret = zp_dma_write_locked(c, dma, NULL);
		dma->mapped = !ret && !dma->revoked;
		mutex_unlock(&c->revoke_lock);
	}
	zp_pinned_put_files(&dma->pinned);
	return ret;
}

/* Write one mapping into d, which is listed already: under revoke_lock
 * where the callback may revoke it meanwhile. */
static int zp_dma_replay_one(struct zp_container *c, struct zp_dma *dma,
			     struct zp_domain *d)
{
	struct zp_writer w = { .dma = dma };
	int ret = 0;

	if (!dma->watched)
		return zp_dma_map_domain(dma, d, &w);
	mutex_lock(&c->revoke_lock);
	if (!dma->revoked)
		ret = zp_dma_write_locked(c, dma, d);
	if (!ret) {
		c->replay_some = true;
		c->replay_last = dma->iova + dma->size - 1;	/* no overflow at 2^64 */
	}
	mutex_unlock(&c->revoke_lock);
	return ret;
}

/*
 * Write every live mapping into d, in IOVA order. d is listed first,
 * under revoke_lock, so a revocation meanwhile takes a mapping out of d
 * as well, where d has it already (up to replay_last; the replay skips a
 * revoked one). Caller holds zp_container.lock. On failure d is unlisted
 * and nothing stays in it.
 */
int zp_dma_replay(struct zp_container *c, struct zp_domain *d)
{
	struct zp_dma *dma, *failed = NULL;
	struct rb_node *n;
	int ret = 0;

	mutex_lock(&c->revoke_lock);
	list_add_tail(&d->node, &c->domains);
	c->replay_domain = d;
	c->replay_some = false;
	mutex_unlock(&c->revoke_lock);
	for (n = rb_first(&c->dmas); n && !failed; n = rb_next(n)) {
		dma = rb_entry(n, struct zp_dma, node);
		if (READ_ONCE(dma->mapped))
			ret = zp_dma_replay_one(c, dma, d);
		if (ret)
			failed = dma;	/* which took out its own part of d */
	}
	mutex_lock(&c->revoke_lock);
	/* exactly what d holds, the live dmas before the failed one, taken
	 * out while d is still listed: a revocation meanwhile would skip an
	 * unlisted d and leave its entry there */
	for (n = rb_first(&c->dmas); failed && n; n = rb_next(n)) {
		dma = rb_entry(n, struct zp_dma, node);
		if (dma == failed)
			break;
		if (dma->mapped && !dma->revoked)
			iommu_unmap(d->domain, dma->iova, dma->size);
	}
	c->replay_domain = NULL;
	if (failed)
		list_del(&d->node);
	mutex_unlock(&c->revoke_lock);
	return ret;
}

/* type1v2's checks on a MAP_DMA request, before anything is pinned. */
static int zp_map_check(struct zp_container *c, struct vfio_iommu_type1_dma_map *map,
			int *prot)
{
	size_t pgsize = 1UL << __ffs(c->pgsize_bitmap);

	/* in 7.2's type1 order: a range that wraps is ZP_EWRAP before its
	 * flags or alignment are looked at (6.1 and 6.12 say -EINVAL to
	 * each, whatever the order) */
	if ((size_t)map->size != map->size || (unsigned long)map->vaddr != map->vaddr ||
	    (dma_addr_t)map->iova != map->iova)
		return ZP_EWRAP;
	if (!map->size)
		return -EINVAL;
	if (map->iova + map->size - 1 < map->iova ||
	    map->vaddr + map->size - 1 < map->vaddr)
		return ZP_EWRAP;
	if (map->flags & VFIO_DMA_MAP_FLAG_VADDR)
		return -EINVAL;	/* VFIO_UPDATE_VADDR is not offered */
	*prot = 0;
	if (map->flags & VFIO_DMA_MAP_FLAG_READ)
		*prot |= IOMMU_READ;
	if (map->flags & VFIO_DMA_MAP_FLAG_WRITE)
		*prot |= IOMMU_WRITE;
	if (!*prot)
		return -EINVAL;
	if ((map->size | map->iova | map->vaddr) & (pgsize - 1))
		return -EINVAL;
	if (zp_dma_find(c, map->iova, map->iova + map->size - 1))
		return -EEXIST;
	if (!c->dma_avail)
		return -ENOSPC;
	if (!zp_ranges_contain(c->ranges, c->nr_ranges, map->iova,
			       map->iova + map->size - 1))
		return -EINVAL;
	return 0;
}

/*
 * Pin, then write into every domain. A range with MMIO (a BAR for
 * peer-to-peer) is pinned again under a watch that revokes it when the
 * user's mapping goes away (zp_dma_mmio_gone()).
 */
int zp_dma_map(struct zp_container *c, struct vfio_iommu_type1_dma_map *map)
{
	unsigned long seq = 0, npages = map->size >> PAGE_SHIFT;
	struct zp_dma *dma;
	int prot, ret;

	ret = zp_map_check(c, map, &prot);
	if (ret)
		return ret;
	dma = kzalloc(sizeof(*dma), GFP_KERNEL_ACCOUNT);
	if (!dma)
		return -ENOMEM;
	dma->iova = map->iova;
	dma->size = map->size;
	dma->vaddr = map->vaddr;
	dma->prot = prot;
	dma->c = c;
	zp_pinned_init(&dma->pinned);
	ret = zp_pin_user(&dma->pinned, dma->vaddr, npages, prot & IOMMU_WRITE, false);
	if (ret == -ENOTBLK) {
		ret = zp_dma_watch(dma, &seq);
		if (!ret)
			ret = zp_pin_user(&dma->pinned, dma->vaddr, npages,
					  prot & IOMMU_WRITE, true);
	}
	if (!ret)
		ret = zp_dma_map_all(c, dma, seq);
	if (ret) {
		if (dma->watched)
			mmu_interval_notifier_remove(&dma->mmio_watch);
		zp_pinned_release(&dma->pinned, false);
		kfree(dma);
		return ret;
	}
	zp_dma_link(c, dma);
	c->dma_avail--;
	return 0;
}

/*
 * type1v2's unmap: the request may cover several whole mappings, must not
 * bisect one (-EINVAL), and reports in unmap->size how much it removed;
 * VFIO_DMA_UNMAP_FLAG_ALL removes everything. Dirty bitmaps are not
 * served (see iommu.c).
 */
int zp_dma_unmap(struct zp_container *c, struct vfio_iommu_type1_dma_unmap *unmap)
{
	size_t pgsize = 1UL << __ffs(c->pgsize_bitmap);
	bool all = unmap->flags & VFIO_DMA_UNMAP_FLAG_ALL;
	u64 iova = unmap->iova, size = unmap->size, last;
	struct zp_dma *dma, *next;
	u64 unmapped = 0;

	unmap->size = 0;
	if (unmap->flags & ~VFIO_DMA_UNMAP_FLAG_ALL)
		return -EINVAL;
	if (iova & (pgsize - 1))
		return -EINVAL;
	if (all) {
		if (iova || size)
			return -EINVAL;
		last = U64_MAX;
	} else {
		if (!size || (size & (pgsize - 1)))
			return -EINVAL;
		if (iova + size - 1 < iova || size > SIZE_MAX)
			return ZP_EWRAP;
		last = iova + size - 1;
		dma = zp_dma_find(c, iova, iova);
		if (dma && dma->iova != iova)
			return -EINVAL;
		dma = zp_dma_find(c, last, last);
		if (dma && dma->iova + dma->size - 1 != last)
			return -EINVAL;
	}
	for (dma = zp_dma_find(c, iova, last); dma && dma->iova <= last; dma = next) {
		next = zp_dma_next(dma);
		unmapped += dma->size;
		zp_dma_remove(c, dma);
		cond_resched();
	}
	unmap->size = unmapped;
	return 0;
}
