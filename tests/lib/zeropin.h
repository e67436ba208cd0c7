/* SPDX-License-Identifier: GPL-2.0 */
/*
 * zeropin.h - drive zeropin.ko from tests: load/unload, pool knobs and
 * counters, zeropinfs mounts, files and mappings.
 * Same convention as vfio_edu.h: __foo() returns 0 or -errno, foo() exits
 * the test with KSFT_FAIL on error.
 */
#ifndef ZEROPIN_TEST_H
#define ZEROPIN_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define ZEROPIN_KO	"/lib/zeropin/zeropin.ko"
#define ZEROPIN_SYSFS	"/sys/kernel/zeropin"
#define ZEROPIN_POOL	ZEROPIN_SYSFS "/pool"
#define ZEROPIN_COUNTERS "/sys/kernel/debug/zeropin/pool_counters"
#define ZEROPIN_IOMMU_COUNTERS "/sys/kernel/debug/zeropin/iommu_counters"
#define ZEROPIN_POOL_BLOCKS "/sys/kernel/debug/zeropin/pool_blocks"
#define ZFS_MNT		"/mnt/zeropinfs"
#define SZ_1M		(1ul << 20)
#define SZ_2M		(2ul << 20)

/* finit_module with a parameter string ("" for defaults). */
int __zeropin_load(const char *params);
void zeropin_load(const char *params);
int __zeropin_unload(void);
/* Unload if loaded, unmounting our test mount first: a clean start. */
void zeropin_reset(void);

/* /sys/kernel/zeropin/pool/NAME as a number, or a negative errno. */
long pool_read(const char *name);
int __pool_write(const char *name, long value);
void pool_write(const char *name, long value);
/* Poll pool/NAME until it equals want; 0, or -ETIMEDOUT. */
int pool_wait(const char *name, long want, int timeout_ms);
/* ... until it is want or more; want or less. */
int pool_wait_at_least(const char *name, long want, int timeout_ms);
int pool_wait_at_most(const char *name, long want, int timeout_ms);
/* A counter from debugfs zeropin/pool_counters, or a negative errno. */
long pool_counter(const char *name);
/* Poll that counter until it reaches at least want; 0, or -ETIMEDOUT. */
int pool_counter_wait(const char *name, long want, int timeout_ms);
int pool_counter_wait_at_most(const char *name, long want, int timeout_ms);
/* Wait (bounded) until no block is parked (a block a file let go of while
 * a DMA mapping held it goes back to the page allocator a moment after
 * the mapping lets go): before a test reads free memory. 0 or -ETIMEDOUT. */
int pool_parked_settle(void);
/* A counter from debugfs zeropin/iommu_counters (the VFIO backend). */
long iommu_counter(const char *name);
/* The same with system calls only, for a bounded call (bounded.h). */
long iommu_counter_raw(const char *name);
/* 1 GiB runs among the zero blocks debugfs pool_blocks lists: 512 blocks
 * of one node at consecutive pfns from a 1 GiB-aligned one. Negative errno
 * when the list cannot be read. */
long pool_blocks_runs(void);
/* First pfns of the blocks the pool holds (kind "zero" or "dirty", NULL:
 * all), in a malloc()ed *pfns; how many, or -errno. */
long pool_block_pfns(const char *kind, unsigned long **pfns);
/* Blocks the pool holds (zero or dirty, any node) whose first pfn lies in
 * [first, first + pages); negative errno when the list cannot be read. */
long pool_blocks_in(uint64_t first, uint64_t pages);
/* What the pool holds, zeroed or not (zero_mib + dirty_mib), in MiB. */
long pool_held_mib(void);
/* /sys/module/zeropin/parameters/NAME as a number, or a negative errno. */
long zeropin_param_read(const char *name);
/* A bool module parameter: 1 (Y), 0 (N), or -errno (no zeropin). */
int zeropin_param_bool(const char *name);
/* Write /sys/module/zeropin/parameters/NAME; 0 or -errno. */
int __zeropin_param_write(const char *name, long value);
/* The same with a string value (a CPU list, a method name). */
int __zeropin_param_set(const char *name, const char *value);

int __zfs_mount(const char *dir, const char *opts);
void zfs_mount(const char *dir, const char *opts);
void zfs_umount(const char *dir);
/* A fresh mount at ZFS_MNT, zeropin loaded first if it is not (whichever
 * driver serves VFIO: a type1 test may pin zeropinfs memory too). */
void zfs_mount_fresh(const char *opts);

/* Create (O_RDWR, truncate) path and size it; returns the fd. */
int zfs_create(const char *path, size_t size);
/* mmap(NULL, size, RW, flags, fd, 0) or exit. */
void *map_file(int fd, size_t size, int flags);
/* Fault in one byte per 4 KiB page (write when write is set). */
void touch_range(void *addr, size_t size, bool write);
/* A field of /proc/self/smaps (e.g. "FilePmdMapped") for the vma holding
 * addr, in kB; negative errno when not found. */
long smaps_kb(const void *addr, const char *field);
/* The same for another process's mapping whose path contains name. */
long proc_smaps_kb(int pid, const char *name, const char *field);
/* Start address of the first vma of process pid whose path contains name
 * (0: none). */
unsigned long proc_vma_start(int pid, const char *name);
/* Physical frame of the page at addr, 0 when not present (root reads PFNs
 * from /proc/self/pagemap). */
uint64_t pfn_of(const void *addr);
/* 1 when the page mapped at addr is part of a large folio (a zeropinfs
 * block), 0 when it is a page of its own (the fallback of a fragmented
 * host), -ENOENT when nothing is mapped there (root: /proc/kpageflags). */
int page_in_block(const void *addr);
/* 1 when the page at pfn still heads a 2 MiB folio on an LRU list and not
 * anonymous (a zeropinfs block not given back to the page allocator,
 * whether a file still holds it or a reference was leaked), 0 when not,
 * negative errno when it cannot be read (root: /proc/kpageflags). */
int pfn_block_held(uint64_t pfn);

/* The CPU list node nid's kthread (zeropin/NID) may run on
 * (Cpus_allowed_list), into buf; polled until the kthread is found, alone
 * (the last module's may still be exiting), for up to timeout_ms. 0,
 * -ETIMEDOUT, or -errno. */
int zeropin_kthread_cpus(int nid, char *buf, size_t len, int timeout_ms);

/* 0 when the guest kernel was booted with init_on_alloc=0, else 1 (the
 * Debian default: the page allocator clears every page it hands out). */
int init_on_alloc(void);

#endif /* ZEROPIN_TEST_H */
