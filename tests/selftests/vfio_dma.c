// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_dma - a TYPE1v2 container through the lab's emulated VT-d: a mapped
 * buffer is reached by real edu DMA in both directions, an unmapped IOVA
 * is not, and the IOMMU reports the fault. Run over every backing, against
 * stock vfio_iommu_type1 and against zeropin's backend: the same contract.
 * type1_zeropinfs is the mode for hosts that leave VFIO to the kernel
 * (claim_type1v2=0): guest RAM on zeropinfs, pinned and mapped by type1.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "kmsg.h"
#include "zeropin.h"
#include "vfio_driver.h"
#include "vfio_edu.h"

/* IOVAs above 4 GiB keep clear of the x86 MSI window at 0xfee00000. */
#define IOVA_BASE	0x100000000ull
/* An IOVA that nothing maps in these tests. */
#define IOVA_UNMAPPED	0x800000000ull
/* 16 MiB: several 2 MiB pages, still quick to pin under TCG. */
#define SMALL_SIZE	(16ul << 20)
/* The zeropinfs variant's mount: the buffer and room to spare. */
#define ZFS_MOUNT_SIZE	"64M"
/* Marker written over buffers to show that a faulting DMA left them alone. */
#define POISON		0x5a

FIXTURE(vfio) {
	struct edu edu;		/* the edu device, attached and ready */
	int container;		/* its container, TYPE1v2 */
	struct buffer buf;	/* guest-RAM stand-in of the variant's backing */
};

FIXTURE_VARIANT(vfio) {
	enum vfio_driver driver;
	enum backing backing;
	size_t size;
};

/* One variant per driver and backing: type1_thp, zeropin_thp, ... */
#define VARIANT(name, drv, b, sz)						\
	FIXTURE_VARIANT_ADD(vfio, name) { .driver = drv, .backing = b, .size = sz }
VARIANT(type1_anon4k, DRIVER_TYPE1, BACKING_ANON_4K, SMALL_SIZE);
VARIANT(type1_thp, DRIVER_TYPE1, BACKING_THP, SMALL_SIZE);
VARIANT(type1_hugetlb2m, DRIVER_TYPE1, BACKING_HUGETLB_2M, SMALL_SIZE);
VARIANT(type1_hugetlb1g, DRIVER_TYPE1, BACKING_HUGETLB_1G, 1ul << 30);
VARIANT(type1_zeropinfs, DRIVER_TYPE1, BACKING_ZEROPINFS, SMALL_SIZE);
VARIANT(zeropin_anon4k, DRIVER_ZEROPIN, BACKING_ANON_4K, SMALL_SIZE);
VARIANT(zeropin_thp, DRIVER_ZEROPIN, BACKING_THP, SMALL_SIZE);
VARIANT(zeropin_hugetlb2m, DRIVER_ZEROPIN, BACKING_HUGETLB_2M, SMALL_SIZE);
VARIANT(zeropin_hugetlb1g, DRIVER_ZEROPIN, BACKING_HUGETLB_1G, 1ul << 30);

FIXTURE_SETUP(vfio)
{
	int ret;

	if (variant->backing == BACKING_ZEROPINFS)
		zfs_mount_fresh("size=" ZFS_MOUNT_SIZE);	/* loads zeropin.ko if need be */
	vfio_driver_use(variant->driver);
	ret = __buffer_alloc(&self->buf, variant->backing, variant->size);
	if (ret && variant->backing == BACKING_HUGETLB_1G &&
	    access("/sys/kernel/mm/hugepages/hugepages-1048576kB", F_OK))
		SKIP(return, "no 1 GiB pages: the lab CPU (qemu64) has no pdpe1gb");
	if (ret && variant->backing >= BACKING_HUGETLB_2M)
		SKIP(return, "no free %s pages reserved (hugepages= on the lab command line)",
		     backing_name(variant->backing));
	ASSERT_EQ(0, ret);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
}

FIXTURE_TEARDOWN(vfio)
{
	edu_close(&self->edu);
	if (self->container > 0)
		close(self->container);
	buffer_free(&self->buf);
	if (variant->backing == BACKING_ZEROPINFS)
		umount2(ZFS_MNT, MNT_DETACH);
}

TEST_F(vfio, map_dma_roundtrip_unmap)
{
	vfio_map(self->container, self->buf.addr, IOVA_BASE, self->buf.size);
	edu_verify(&self->edu, self->buf.addr, IOVA_BASE, self->buf.size);
	vfio_unmap(self->container, IOVA_BASE, self->buf.size);
}

/*
 * zeropin pins a large folio with one GUP call and maps it with IOMMU
 * entries of its size (the emulated VT-d has 2 MiB and 1 GiB pages);
 * 4 KiB memory takes 64 MiB GUP batches.
 */
TEST_F(vfio, pins_whole_folios_into_large_iommu_pages)
{
	size_t folio = backing_pagesize(variant->backing);
	long gup0 = iommu_counter("gup_calls");
	long e4k = iommu_counter("entries_4k"), e2m = iommu_counter("entries_2m");
	long e1g = iommu_counter("entries_1g");

	if (variant->driver != DRIVER_ZEROPIN)
		SKIP(return, "type1's pinning is not counted");
	buffer_touch(&self->buf);	/* THP folios exist only once touched */
	vfio_map(self->container, self->buf.addr, IOVA_BASE, self->buf.size);
	if (variant->backing == BACKING_ANON_4K) {
		EXPECT_EQ(1 + 1, iommu_counter("gup_calls") - gup0);	/* a try, one batch */
		EXPECT_EQ(self->buf.size / 4096, iommu_counter("entries_4k") - e4k);
	} else {
		EXPECT_EQ(self->buf.size / folio, iommu_counter("gup_calls") - gup0);
		EXPECT_EQ(0, iommu_counter("entries_4k") - e4k);
		EXPECT_EQ(folio == SZ_2M ? self->buf.size / folio : 0,
			  iommu_counter("entries_2m") - e2m);
		EXPECT_EQ(folio == SZ_2M ? 0 : self->buf.size / folio,
			  iommu_counter("entries_1g") - e1g);
	}
	edu_verify(&self->edu, self->buf.addr, IOVA_BASE, self->buf.size);
	vfio_unmap(self->container, IOVA_BASE, self->buf.size);
}

/*
 * A mapping that starts 1 MiB into a large folio: the IOMMU takes 4 KiB
 * entries up to the first 2 MiB boundary and large ones after it, and
 * the counters say so (the unaligned head is 256 entries of 4 KiB, not
 * one entry of a size the domain does not have).
 */
TEST_F(vfio, unaligned_head_counts_as_small_entries)
{
	size_t folio = backing_pagesize(variant->backing), len = folio - SZ_1M;
	long e4k = iommu_counter("entries_4k"), e2m = iommu_counter("entries_2m");

	if (variant->driver != DRIVER_ZEROPIN)
		SKIP(return, "type1's IOMMU entries are not counted");
	if (folio < SZ_2M)
		SKIP(return, "4 KiB memory has no unaligned head");
	buffer_touch(&self->buf);
	vfio_map(self->container, (char *)self->buf.addr + SZ_1M, IOVA_BASE + SZ_1M, len);
	EXPECT_EQ(SZ_1M / 4096, iommu_counter("entries_4k") - e4k);
	EXPECT_EQ((folio - SZ_2M) / SZ_2M, iommu_counter("entries_2m") - e2m);
	edu_verify(&self->edu, (char *)self->buf.addr + SZ_1M, IOVA_BASE + SZ_1M, len);
	vfio_unmap(self->container, IOVA_BASE + SZ_1M, len);
}

/*
 * Large folios at an IOVA only 4 KiB-congruent to them take 4 KiB IOMMU
 * entries all through. Past a GiB of them a chunk is written run by run,
 * at most a GiB per iommu_map() with a reschedule and a signal check
 * between, not in one iommu_map_sg() that would write them all at once.
 */
TEST_F_TIMEOUT(vfio, misaligned_iova_is_written_in_pieces, 180)
{
	size_t size = (1ul << 30) + 2 * SZ_2M;
	long calls = iommu_counter("iommu_map_calls"), e4k = iommu_counter("entries_4k");
	long gup = iommu_counter("gup_calls"), runs = iommu_counter("runs");
	struct buffer big;

	if (variant->driver != DRIVER_ZEROPIN || variant->backing != BACKING_THP)
		SKIP(return, "one variant shows it: zeropin over THP");
	buffer_alloc(&big, BACKING_THP, size);
	buffer_touch(&big);
	vfio_map(self->container, big.addr, IOVA_BASE + 4096, size);
	/* whole THPs (one pin each), so a few hundred runs: one chunk */
	if (iommu_counter("gup_calls") - gup != (long)(size / SZ_2M)) {
		vfio_unmap(self->container, IOVA_BASE + 4096, size);
		buffer_free(&big);
		SKIP(return, "the buffer did not get THPs all through");
	}
	runs = iommu_counter("runs") - runs;
	EXPECT_EQ(size / 4096, iommu_counter("entries_4k") - e4k);
	/* a piece per run, two for the one across IOVA 5 GiB; one call
	 * for the whole chunk before */
	EXPECT_EQ(runs + 1, iommu_counter("iommu_map_calls") - calls);
	edu_verify(&self->edu, big.addr, IOVA_BASE + 4096, size);
	vfio_unmap(self->container, IOVA_BASE + 4096, size);
	buffer_free(&big);
}

TEST_F(vfio, untouched_memory_reads_zero_through_dma)
{
	uint8_t *p = self->buf.addr;

	vfio_map(self->container, self->buf.addr, IOVA_BASE, self->buf.size);
	/* Device reads never-touched memory, then writes it back elsewhere. */
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE + 4096, 2048, false));
	memset(p, POISON, 2048);
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE, 2048, true));
	EXPECT_TRUE(all_bytes(p, 0, 2048));
	vfio_unmap(self->container, IOVA_BASE, self->buf.size);
}

TEST_F(vfio, dma_after_unmap_leaves_memory_untouched)
{
	size_t len = 2048;

	vfio_map(self->container, self->buf.addr, IOVA_BASE, self->buf.size);
	edu_verify(&self->edu, self->buf.addr, IOVA_BASE, self->buf.size);
	vfio_unmap(self->container, IOVA_BASE, self->buf.size);
	memset(self->buf.addr, POISON, len);
	/* The device buffer holds the last verify pattern: push it to RAM. */
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE, len, true));
	EXPECT_TRUE(all_bytes(self->buf.addr, POISON, len));
}

/*
 * DMA to an IOVA nothing maps: memory stays untouched and the IOMMU logs a
 * fault. Once per driver; DMAR fault reports are rate-limited (10 per 5 s).
 */
static void dma_to_unmapped_iova_faults(struct __test_metadata *_metadata,
					enum vfio_driver driver)
{
	struct buffer buf;
	struct edu edu;
	int container, faults;
	size_t size = 1ul << 20;

	vfio_driver_use(driver);
	buffer_alloc(&buf, BACKING_ANON_4K, size);
	container = edu_setup(&edu, 0, VFIO_TYPE1v2_IOMMU);
	vfio_map(container, buf.addr, IOVA_BASE, size);
	edu_verify(&edu, buf.addr, IOVA_BASE, size);
	memset(buf.addr, POISON, size);
	faults = kmsg_count("DMAR: [DMA Write");
	ASSERT_LE(0, faults);
	ASSERT_EQ(0, __edu_dma(&edu, IOVA_UNMAPPED, 4000, true));
	EXPECT_TRUE(all_bytes(buf.addr, POISON, size));
	usleep(200 * 1000);	/* the fault is reported from an interrupt */
	EXPECT_LT(faults, kmsg_count("DMAR: [DMA Write"));
	vfio_unmap(container, IOVA_BASE, size);
	edu_close(&edu);
	close(container);
	buffer_free(&buf);
}

TEST(type1_dma_to_unmapped_iova_faults)
{
	dma_to_unmapped_iova_faults(_metadata, DRIVER_TYPE1);
}

TEST(zeropin_dma_to_unmapped_iova_faults)
{
	dma_to_unmapped_iova_faults(_metadata, DRIVER_ZEROPIN);
}

TEST_HARNESS_MAIN
