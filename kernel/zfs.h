/* SPDX-License-Identifier: GPL-2.0 */
/* zfs.h - zeropinfs, the filesystem that serves guest RAM from the pool. */
#ifndef ZEROPIN_ZFS_H
#define ZEROPIN_ZFS_H

#define ZEROPINFS_MAGIC 0x7a70696e	/* "zpin" */

struct address_space;
struct folio;
struct vm_area_struct;

/*
 * A whole run a VFIO pin took for a file's GiB (zfs.c: zfs_add_run()),
 * whose blocks are not pinned yet: the pin's walk keeps it across
 * zp_zfs_pin_folios() calls (each a batch of the range) and takes the
 * blocks from it instead of looking each up again in the page cache.
 * Zeroed before first use but for the pin's range; zp_zfs_hand_release()
 * when the walk ends.
 */
struct zp_zfs_hand {
	unsigned long start, end;	/* the pin's user range, cut where
					 * RLIMIT_MEMLOCK stops it: a run only
					 * for a GiB inside it, so a pin commits
					 * no more than it asks for and may pin */
	struct address_space *mapping;	/* the file's the run was filed in */
	unsigned long first;		/* file index of the run's first block */
	struct folio **blocks;		/* ZP_RUN_BLOCKS: filed and referenced,
					 * or NULL (not filed, or taken);
					 * NULL: no run held */
};

int zp_zfs_init(void);
void zp_zfs_exit(void);

/* The folios behind a shared zeropinfs mapping, for pinning without GUP
 * (caller holds the mmap lock); whether vma at addr qualifies; *head:
 * pages at addr to pin by GUP first (a range in 4 KiB pages). */
bool zp_zfs_vma_pinnable(struct vm_area_struct *vma, unsigned long addr, bool write);
unsigned long zp_zfs_pages_to_block(struct vm_area_struct *vma, unsigned long addr, bool write);
long zp_zfs_pin_folios(struct vm_area_struct *vma, unsigned long addr,
		       unsigned long nr, bool write,
		       int (*fn)(void *arg, struct folio *folio), void *arg,
		       unsigned long *head, struct zp_zfs_hand *hand);	/* hand: not NULL */
/* Drop the references to the hand's blocks not taken; no lock needed. */
void zp_zfs_hand_release(struct zp_zfs_hand *hand);

#endif /* ZEROPIN_ZFS_H */
