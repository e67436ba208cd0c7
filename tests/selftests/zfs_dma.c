// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_dma - VFIO pins zeropinfs memory: a never-touched zeropinfs file
 * (QEMU's memory-backend-file, share=on) is mapped, the edu device reaches
 * it by DMA, and memory truncated out of a file while pinned is never
 * handed out again before UNMAP_DMA lets go of it. Against stock type1
 * (GUP faults the file in) and zeropin (takes the folios from the page
 * cache without faulting anything in).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "bounded.h"
#include "kmsg.h"
#include "pressure.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull
#define PINNED_SIZE	(8ul << 20)
/* New files allocated while the truncated memory is pinned: several times
 * the pinned size, and more than the pool holds, so the page allocator's
 * freshest blocks are handed out too. */
#define AFTER_SIZE	(96ul << 20)
#define PATTERN		0x3c

FIXTURE(zfs_dma) {
	struct edu edu;
	int container;
};

FIXTURE_VARIANT(zfs_dma) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(zfs_dma, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(zfs_dma, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(zfs_dma)
{
	zeropin_reset();
	zeropin_load("pool_mib=32");
	vfio_driver_use(variant->driver);
	zfs_mount(ZFS_MNT, "size=512M");
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
}

FIXTURE_TEARDOWN(zfs_dma)
{
	edu_close(&self->edu);
	close(self->container);
	zeropin_reset();
}

TEST_F(zfs_dma, maps_never_touched_file_memory)
{
	size_t size = 32ul << 20;
	int fd = zfs_create(ZFS_MNT "/ram", size);
	void *p = map_file(fd, size, MAP_SHARED);
	long gup0 = iommu_counter("gup_calls");

	vfio_map(self->container, p, IOVA_BASE, size);
	EXPECT_EQ(size >> 20, pool_read("inuse_mib"));
	if (variant->driver == DRIVER_TYPE1) {
		/* GUP faulted every folio in with a PMD and pinned it */
		EXPECT_EQ(size / 1024, smaps_kb(p, "FilePmdMapped"));
	} else {
		/* taken from the page cache: no GUP, nothing faulted in yet */
		EXPECT_EQ(0, smaps_kb(p, "FilePmdMapped"));
		EXPECT_EQ(gup0, iommu_counter("gup_calls"));
		EXPECT_EQ(size / 4096, iommu_counter("pages_pinned"));
	}
	/* the CPU's view and the device's are the same memory */
	edu_verify(&self->edu, p, IOVA_BASE, size);
	touch_range(p, size, false);
	EXPECT_EQ(size / 1024, smaps_kb(p, "FilePmdMapped"));
	vfio_unmap(self->container, IOVA_BASE, size);
	munmap(p, size);
	close(fd);
}

/*
 * QEMU splits guest RAM at the PAM areas below 1 MiB and maps RAM from
 * 1 MiB on: a range that starts inside the file's first block. zeropin
 * pins that block's tail by GUP and takes every later block whole from the
 * page cache, without faulting it in.
 */
TEST_F(zfs_dma, maps_file_memory_from_inside_a_block)
{
	size_t size = 32ul << 20, head = 1ul << 20;
	int fd = zfs_create(ZFS_MNT "/ram", size);
	char *p = map_file(fd, size, MAP_SHARED);
	long gup0 = iommu_counter("gup_calls");
	long e2m0 = iommu_counter("entries_2m");

	vfio_map(self->container, p + head, IOVA_BASE + head, size - head);
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(gup0 + 1, iommu_counter("gup_calls"));
		EXPECT_EQ((size - head) / 4096, iommu_counter("pages_pinned"));
		/* only the first block was faulted in, by GUP */
		EXPECT_GE(SZ_2M / 1024, smaps_kb(p, "Rss"));
		EXPECT_EQ(e2m0 + (size - SZ_2M) / SZ_2M, iommu_counter("entries_2m"));
	}
	edu_verify(&self->edu, p + head, IOVA_BASE + head, size - head);
	vfio_unmap(self->container, IOVA_BASE + head, size - head);
	munmap(p, size);
	close(fd);
}

/*
 * Ranges that never hold a whole block the file path could take: one
 * inside a single block, and one in a mapping that starts and ends inside
 * blocks (offset 1 MiB, 2 MiB long). Every page still reaches the device
 * at the right place.
 */
TEST_F(zfs_dma, maps_pieces_of_blocks)
{
	size_t size = 8ul << 20, piece = SZ_2M;
	int fd = zfs_create(ZFS_MNT "/ram", size);
	char *p = map_file(fd, size, MAP_SHARED);
	char *q = mmap(NULL, piece, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 1ul << 20);

	ASSERT_NE(MAP_FAILED, q);
	vfio_map(self->container, p + 4096, IOVA_BASE, (1ul << 20) - 4096);
	vfio_map(self->container, q, IOVA_BASE + SZ_2M, piece);
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ(((1ul << 20) - 4096 + piece) / 4096, iommu_counter("pages_pinned"));
	edu_verify(&self->edu, p + 4096, IOVA_BASE, (1ul << 20) - 4096);
	edu_verify(&self->edu, q, IOVA_BASE + SZ_2M, piece);
	vfio_unmap(self->container, IOVA_BASE, (1ul << 20) - 4096);
	vfio_unmap(self->container, IOVA_BASE + SZ_2M, piece);
	munmap(q, piece);
	munmap(p, size);
	close(fd);
}

TEST_F(zfs_dma, truncated_while_pinned_is_not_reused)
{
	uint64_t pinned[PINNED_SIZE / SZ_2M];
	long returned0 = pool_counter("returned");
	uint8_t *p, *q, chunk[EDU_DMA_MAX];
	size_t i, j;
	int fd, fd2;

	fd = zfs_create(ZFS_MNT "/pinned", PINNED_SIZE);
	p = map_file(fd, PINNED_SIZE, MAP_SHARED);
	vfio_map(self->container, p, IOVA_BASE, PINNED_SIZE);
	edu_verify(&self->edu, p, IOVA_BASE, PINNED_SIZE);
	for (i = 0; i < PINNED_SIZE / SZ_2M; i++)
		pinned[i] = pfn_of(p + i * SZ_2M);
	ASSERT_NE(0, pinned[0]);
	munmap(p, PINNED_SIZE);

	/* The file lets go of its folios; the IOMMU mapping still holds them. */
	ASSERT_EQ(0, ftruncate(fd, 0));
	EXPECT_EQ(returned0 + PINNED_SIZE / SZ_2M, pool_counter("returned"));
	EXPECT_EQ(0, pool_read("inuse_mib"));

	/* Everything handed out now is zero and none of it is pinned memory. */
	fd2 = zfs_create(ZFS_MNT "/after", AFTER_SIZE);
	q = map_file(fd2, AFTER_SIZE, MAP_SHARED);
	ASSERT_TRUE(all_bytes(q, 0, AFTER_SIZE));
	for (i = 0; i < AFTER_SIZE / SZ_2M; i++)
		for (j = 0; j < PINNED_SIZE / SZ_2M; j++)
			ASSERT_NE(pinned[j], pfn_of(q + i * SZ_2M)) TH_LOG("block %zu reused", i);

	/* The device still reaches the orphaned memory, and only it. */
	memset(chunk, PATTERN, sizeof(chunk));
	memcpy(q, chunk, sizeof(chunk));
	vfio_map(self->container, q, IOVA_BASE + PINNED_SIZE, SZ_2M);
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE + PINNED_SIZE, sizeof(chunk), false));
	memset(q, 0, sizeof(chunk));
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE + 4096, sizeof(chunk), true));
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE + 4096, sizeof(chunk), false));
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE + PINNED_SIZE, sizeof(chunk), true));
	EXPECT_EQ(0, memcmp(q, chunk, sizeof(chunk)));	/* round trip via orphan */
	EXPECT_TRUE(all_bytes(q + SZ_2M, 0, AFTER_SIZE - SZ_2M));
	vfio_unmap(self->container, IOVA_BASE + PINNED_SIZE, SZ_2M);
	vfio_unmap(self->container, IOVA_BASE, PINNED_SIZE);
	munmap(q, AFTER_SIZE);
	close(fd2);
	close(fd);
}

/*
 * A fragmented host: every 2 MiB of free memory holds a page pinned
 * long-term (io_uring, as VFIO pins), so neither the page allocator nor
 * compaction can make a block, the whole blocks left are taken by another
 * file, and the pool is empty. A VM's guest RAM still works: its first
 * half written by the CPU before the map (the firmware, a loaded kernel:
 * write faults), its second half mapped for DMA never touched (the VFIO
 * pin creates it). It comes in 4 KiB pages, counted as the fallback (a
 * block now and then, where one could be had after all); no SIGBUS, the
 * data and the device's view are right, compaction leaves the pages
 * alone, and fallocate, punching and the mount's accounting work page by
 * page. Nothing is left once the file goes.
 */
#define FRAG_VM_SIZE	(1ul << 30)	/* a small VM */
#define FRAG_LEAVE_MIB	256	/* see zfs_pool's fragmented fixture */
#define FRAG_FILLER_MAX	(2ul << 30)	/* whole blocks a fragmented lab may
					 * still have (the debug kernel's
					 * deferred frees left over 1 GiB) */
#define FRAG_CALL_MS	300000	/* faulting or reading the VM's RAM in TCG */
#define FRAG_FALLOC	(64ul << 20)
#define FRAG_CHECKS	8	/* 2 MiB ranges the device checks */

FIXTURE(fragmented_host) {
	struct edu edu;
	int container;
	struct fragmented frag;
	int filler_fd;		/* the file holding the whole blocks left */
	void *filler;		/* ... its mapping */
};

FIXTURE_VARIANT(fragmented_host) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(fragmented_host, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(fragmented_host, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(fragmented_host)
{
	int ret;

	zeropin_reset();
	zeropin_load("pool_mib=0");
	vfio_driver_use(variant->driver);
	long fb0;
	size_t off;

	self->filler_fd = -1;
	if (!getenv("ZP_FRAGMENTED_BOOT"))
		SKIP(return, "runs in a lab boot of its own (ZP_FRAGMENTED_BOOT=1, tests/run-selftests): it leaves unmovable pages in most 2 MiB blocks, and the pool tests after it could not refill");
	zfs_mount(ZFS_MNT, "size=4G");
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
	ret = __fragment_pinned(&self->frag, FRAG_LEAVE_MIB);
	if (ret == -ENOSYS)
		SKIP(return, "no io_uring in this kernel to pin the fragmenter's pages");
	ASSERT_EQ(0, ret) TH_LOG("fragmenting memory and pinning it: %s", strerror(-ret));
	/* a file takes block after block until the first one cannot be had */
	self->filler_fd = zfs_create(ZFS_MNT "/filler", FRAG_FILLER_MAX);
	self->filler = map_file(self->filler_fd, FRAG_FILLER_MAX, MAP_SHARED);
	fb0 = pool_counter("fallback_total");
	for (off = 0; off < FRAG_FILLER_MAX && pool_counter("fallback_total") == fb0; off += SZ_2M)
		((volatile char *)self->filler)[off] = 1;
	ASSERT_NE(fb0, pool_counter("fallback_total"))
		TH_LOG("still whole blocks after %zu MiB: the fragmenter did not fragment", off >> 20);
	TH_LOG("whole blocks left after fragmenting: %zu MiB, now in another file", off >> 20);
}

FIXTURE_TEARDOWN(fragmented_host)
{
	if (self->filler_fd >= 0) {
		munmap(self->filler, FRAG_FILLER_MAX);
		close(self->filler_fd);
	}
	fragment_release(&self->frag);
	edu_close(&self->edu);
	close(self->container);
	zeropin_reset();
}

struct vm_ram {
	uint64_t *p;		/* the mapping, as 64-bit words */
	size_t size;		/* bytes */
};

/* Store a page's index in its first and last words: a write fault on
 * every page. In a bounded call: a SIGBUS comes back as a result. */
static int ram_write_tags(void *arg)
{
	struct vm_ram *r = arg;
	size_t n, words = 4096 / 8;

	for (n = 0; n < r->size / 4096; n++) {
		r->p[n * words] = n;
		r->p[n * words + words - 1] = ~n;
	}
	return 0;
}

static int ram_check_tags(void *arg)
{
	struct vm_ram *r = arg;
	size_t n, words = 4096 / 8;

	for (n = 0; n < r->size / 4096; n++)
		if (r->p[n * words] != n || r->p[n * words + words - 1] != ~n)
			return -EIO;
	return 0;
}

static int ram_check_zero(void *arg)
{
	struct vm_ram *r = arg;
	size_t i;

	for (i = 0; i < r->size / 8; i++)
		if (r->p[i])
			return -EIO;
	return 0;
}

#define UNEVICTABLE_COMPACT	"/proc/sys/vm/compact_unevictable_allowed"

/* Page migrations that failed in one compaction of all memory; before
 * 6.11, with compaction of unevictable pages off, as docs/module.md tells a host
 * that may fall back to do. */
static long compaction_failures(void)
{
	long was = read_file_long(UNEVICTABLE_COMPACT), failed;
	char val[16];

	if (!kernel_at_least(6, 11) && was > 0)
		__write_file(UNEVICTABLE_COMPACT, "0");
	failed = __compact_count_failures();
	if (!kernel_at_least(6, 11) && was > 0) {
		snprintf(val, sizeof(val), "%ld", was);
		__write_file(UNEVICTABLE_COMPACT, val);
	}
	return failed;
}

static int ram_call(int (*fn)(void *), void *p, size_t size)
{
	struct vm_ram r = { .p = p, .size = size };

	return bounded_call(fn, &r, FRAG_CALL_MS);
}

TEST_F_TIMEOUT(fragmented_host, vm_ram_falls_back_to_pages, 1200)
{
	static const char *const sigbus[] = { "SIGBUS", "BUG", "WARNING" };
	size_t half = FRAG_VM_SIZE / 2, off, in_pages = 0;
	long fb0 = pool_counter("fallback_total"), pinned0 = iommu_counter("pages_pinned");
	long fbp0 = pool_counter("fallback_pages");	/* the filler's */
	long gup0 = iommu_counter("gup_calls"), fb_touched, fb_all, failed;
	int mark = kmsg_mark(), fd, fd2, i, kind;
	struct statvfs before, after;
	struct stat st;
	char *p, *q;

	ASSERT_LE(0, fb0);
	fd = zfs_create(ZFS_MNT "/ram", FRAG_VM_SIZE);
	p = map_file(fd, FRAG_VM_SIZE, MAP_SHARED);
	ASSERT_EQ(0, ram_call(ram_write_tags, p, half));
	fb_touched = pool_counter("fallback_total") - fb0;
	vfio_map(self->container, p, IOVA_BASE, FRAG_VM_SIZE);
	fb_all = pool_counter("fallback_total") - fb0;
	TH_LOG("fragmented (%ld MiB pinned in %ld MiB), pool empty: of %lu MiB of guest RAM, %ld MiB in 4 KiB pages (%ld MiB of the half written first); %ld MiB FilePmdMapped",
	       self->frag.kept_kb / 1024, (long)(self->frag.size >> 20), FRAG_VM_SIZE >> 20,
	       fb_all >> 8, fb_touched >> 8, smaps_kb(p, "FilePmdMapped") / 1024);
	/* both paths fell back: the write faults and the pin */
	EXPECT_LT(0, fb_touched);
	EXPECT_LT(fb_touched, fb_all);
	EXPECT_EQ(fbp0 + fb_all, pool_counter("fallback_pages"));
	EXPECT_GT(half / 1024, smaps_kb(p, "FilePmdMapped"));
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(pinned0 + FRAG_VM_SIZE / 4096, iommu_counter("pages_pinned"));
		EXPECT_LT(gup0, iommu_counter("gup_calls"));	/* the pages went by GUP */
	}
	EXPECT_EQ(0, ram_call(ram_check_tags, p, half));
	EXPECT_EQ(0, ram_call(ram_check_zero, p + half, half));
	/* the device sees what the CPU sees, in blocks and in pages */
	for (i = 0; i < FRAG_CHECKS; i++) {
		off = (FRAG_VM_SIZE / FRAG_CHECKS) * i + SZ_2M * (i % 3);
		edu_verify(&self->edu, p + off, IOVA_BASE + off, SZ_2M);
		kind = page_in_block(p + off);
		ASSERT_LE(0, kind);
		in_pages += !kind;
	}
	EXPECT_LT(0, in_pages);
	/* compaction leaves the pages where they are, without unmapping them
	 * pass after pass to fail to move them (6.11+: the module keeps it
	 * off the mapping; before, the host setting docs/module.md gives) */
	failed = compaction_failures();
	TH_LOG("a compaction of all memory: %ld page migrations failed, with %ld fallback pages in files",
	       failed, fb_all);
	EXPECT_LE(0, failed);
	EXPECT_GT(fb_all / 100, failed);
	vfio_unmap(self->container, IOVA_BASE, FRAG_VM_SIZE);

	/* fallocate, punching and statfs (in 4 KiB units), page by page */
	fb0 = pool_counter("fallback_pages");
	ASSERT_EQ(0, statvfs(ZFS_MNT, &before));
	fd2 = zfs_create(ZFS_MNT "/falloc", 0);
	ASSERT_EQ(0, fallocate(fd2, 0, 0, FRAG_FALLOC));
	ASSERT_EQ(0, fstat(fd2, &st));
	EXPECT_EQ(FRAG_FALLOC, st.st_size);
	ASSERT_EQ(0, statvfs(ZFS_MNT, &after));
	EXPECT_EQ(before.f_bfree - FRAG_FALLOC / 4096, after.f_bfree);
	/* in pages where no block was left (f_bfree counted each one) */
	TH_LOG("fallocate of %lu MiB: %ld MiB in 4 KiB pages", FRAG_FALLOC >> 20,
	       (pool_counter("fallback_pages") - fb0) >> 8);
	EXPECT_LT(fb0, pool_counter("fallback_pages"));
	q = map_file(fd2, FRAG_FALLOC, MAP_SHARED);
	EXPECT_EQ(0, ram_call(ram_check_zero, q, FRAG_FALLOC));
	munmap(q, FRAG_FALLOC);
	ASSERT_EQ(0, fallocate(fd2, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, SZ_2M, SZ_2M));
	ASSERT_EQ(0, statvfs(ZFS_MNT, &after));
	EXPECT_EQ(before.f_bfree - (FRAG_FALLOC - SZ_2M) / 4096, after.f_bfree);
	close(fd2);
	unlink(ZFS_MNT "/falloc");

	munmap(p, FRAG_VM_SIZE);
	close(fd);
	unlink(ZFS_MNT "/ram");
	EXPECT_EQ(fbp0, pool_counter("fallback_pages"));	/* nothing left behind */
	munmap(self->filler, FRAG_FILLER_MAX);
	close(self->filler_fd);
	self->filler_fd = -1;
	unlink(ZFS_MNT "/filler");
	EXPECT_EQ(0, pool_counter("fallback_pages"));
	EXPECT_EQ(0, pool_read("inuse_mib"));
	EXPECT_EQ(0, kmsg_count_since(mark, sigbus, 3));
	close(mark);
}

TEST_HARNESS_MAIN
