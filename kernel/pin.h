/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pin.h - a user address range pinned for DMA, kept as physically
 * contiguous runs (not as one entry per 4 KiB page), with its
 * RLIMIT_MEMLOCK charge.
 */
#ifndef ZEROPIN_PIN_H
#define ZEROPIN_PIN_H

#include <linux/list.h>
#include <linux/mm_types.h>
#include <linux/sched.h>

/* How the pages of a run are held, which says how to let them go. */
enum zp_run_kind {
	ZP_RUN_PAGE_PINS,	/* a GUP pin on every page */
	ZP_RUN_FOLIO_PINS,	/* one GUP pin per (whole) folio */
	ZP_RUN_FOLIO_REFS,	/* one reference per (whole) zeropinfs folio */
	ZP_RUN_MMIO,		/* PFNMAP (a device BAR): nothing held */
};

/* Physically contiguous pinned pages, consecutive in IOVA within a mapping. */
struct zp_run {
	unsigned long pfn;		/* first page frame */
	unsigned long npages : 62;	/* length in PAGE_SIZE pages */
	unsigned long kind : 2;		/* enum zp_run_kind */
};

/* A run's length in bytes: the 62-bit field widened before the shift. */
static inline size_t zp_run_bytes(const struct zp_run *run)
{
	return (size_t)run->npages << PAGE_SHIFT;
}

/* Runs are kept in chunks of this many bytes: one chunk holds a whole
 * GiB of THP or hugetlb memory (a few hundred runs) and is the unit that
 * is mapped into the IOMMU with one IOTLB sync. */
#define ZP_RUN_CHUNK_BYTES	(16 * 1024)

struct zp_run_chunk {
	struct list_head node;		/* in zp_pinned.chunks, IOVA order */
	unsigned int nr;		/* runs used in run[] */
	struct zp_run run[];		/* ZP_RUNS_PER_CHUNK of them */
};

#define ZP_RUNS_PER_CHUNK \
	((ZP_RUN_CHUNK_BYTES - sizeof(struct zp_run_chunk)) / sizeof(struct zp_run))

/* Device files of vfio-pci BARs one pin may hold until its mapping is
 * written (zp_pinned_put_files()): a VMM maps one BAR per MAP_DMA, in a few
 * pieces around an MSI-X table at most; past this many the mapping is
 * written the cautious way (dma.c). */
#define ZP_PIN_BAR_FILES	4

struct zp_pinned {
	struct list_head chunks;	/* zp_run_chunk, in IOVA order */
	unsigned long npages;		/* pages in all runs, MMIO included */
	unsigned long mmio_pages;	/* of those, MMIO (nothing held) */
	unsigned long nruns;		/* runs recorded */
	unsigned long locked;		/* pages charged to mm->locked_vm */
	unsigned long credit;		/* of those, charged ahead, not yet pinned */
	struct mm_struct *mm;		/* charged mm, grabbed (mmgrab) */
	struct task_struct *task;	/* its group leader: whose RLIMIT_MEMLOCK */
	bool lock_cap;			/* CAP_IPC_LOCK at map time: no limit */
	bool mmio_foreign;		/* some MMIO is not a vfio-pci BAR the
					 * BAR path took: its pfns may change
					 * under a zap */
	bool mmio_unheld;		/* some MMIO run's device file is not in
					 * bar_files */
	unsigned int nr_bar_files;	/* used in bar_files */
	struct file *bar_files[ZP_PIN_BAR_FILES]; /* held (get_file) from the
					 * pin until zp_pinned_put_files() */
};

/* Start empty, charging the calling task (as type1 does at MAP_DMA). */
void zp_pinned_init(struct zp_pinned *p);
/*
 * Whether every MMIO run is a vfio-pci BAR whose device file the pin holds:
 * then no device can be released, nor its BAR change owner, until
 * zp_pinned_put_files(), whatever happens to the user's mapping meanwhile.
 */
bool zp_pinned_mmio_held(const struct zp_pinned *p);
/* Drop the device files the pin took; before the mapping is kept (a file
 * held for a mapping's life would keep its own container alive). */
void zp_pinned_put_files(struct zp_pinned *p);
/* Unpin every run, uncharge, and drop the mm and task references. */
void zp_pinned_release(struct zp_pinned *p, bool dirty);

/*
 * Pin npages pages of the caller's memory at vaddr (writable for the
 * device when write), charging RLIMIT_MEMLOCK. All or nothing: on error
 * nothing stays pinned or charged. -ENOMEM over the limit, -EFAULT for an
 * address without memory, -EINTR on a fatal signal. A PFNMAP range (a
 * device BAR) is recorded as ZP_RUN_MMIO when mmio_ok, else the call
 * fails with -ENOTBLK: the caller must watch such a range first (dma.c).
 * Sleeps; the caller may hold its container lock.
 */
int zp_pin_user(struct zp_pinned *p, unsigned long vaddr,
		unsigned long npages, bool write, bool mmio_ok);

#define zp_for_each_chunk(p, chunk) \
	list_for_each_entry(chunk, &(p)->chunks, node)

#endif /* ZEROPIN_PIN_H */
