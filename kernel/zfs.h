/* SPDX-License-Identifier: GPL-2.0 */
/* zfs.h - zeropinfs, the filesystem that serves guest RAM from the pool. */
#ifndef ZEROPIN_ZFS_H
#define ZEROPIN_ZFS_H

#define ZEROPINFS_MAGIC 0x7a70696e	/* "zpin" */

int zp_zfs_init(void);
void zp_zfs_exit(void);

#endif /* ZEROPIN_ZFS_H */
