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
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
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

TEST_HARNESS_MAIN
