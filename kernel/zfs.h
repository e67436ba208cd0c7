/* SPDX-License-Identifier: GPL-2.0 */
/* zfs.h - zeropinfs, the filesystem that serves guest RAM from the pool. */
#ifndef ZEROPIN_ZFS_H
#define ZEROPIN_ZFS_H

#define ZEROPINFS_MAGIC 0x7a70696e	/* "zpin" */

struct folio;
struct vm_area_struct;

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
		       unsigned long *head);

#endif /* ZEROPIN_ZFS_H */
