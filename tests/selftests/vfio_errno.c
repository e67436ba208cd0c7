// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_errno - the errnos stock vfio_iommu_type1 (TYPE1v2) gives for bad
 * MAP_DMA and UNMAP_DMA requests, and type1v2's unmap rules. This is the
 * contract zeropin's backend must keep, so every test runs against both;
 * each failed request must leave nothing mapped.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "util.h"
#include "vfio_driver.h"
#include "vfio_edu.h"

#define IOVA_BASE	0x100000000ull
#define IOVA_MSI	0xfee00000ull	/* x86 MSI window: a reserved IOVA range */
#define BUF_SIZE	(4ul << 20)
#define PAGE		4096ul
#define RW		(VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE)

FIXTURE(bad_request) {
	struct edu edu;
	int container;
	struct buffer buf;	/* 4 MiB of 4K anonymous memory */
};

FIXTURE_VARIANT(bad_request) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(bad_request, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(bad_request, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(bad_request)
{
	vfio_driver_use(variant->driver);
	buffer_alloc(&self->buf, BACKING_ANON_4K, BUF_SIZE);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
}

FIXTURE_TEARDOWN(bad_request)
{
	edu_close(&self->edu);
	close(self->container);
	buffer_free(&self->buf);
}

/* Nothing is mapped anywhere: an unmap-all finds nothing. */
static void assert_nothing_mapped(struct __test_metadata *_metadata, int container)
{
	uint64_t unmapped = 1;

	ASSERT_EQ(0, __vfio_unmap(container, 0, 0, VFIO_DMA_UNMAP_FLAG_ALL, &unmapped));
	ASSERT_EQ(0, unmapped);
}

TEST_F(bad_request, map_zero_size)
{
	EXPECT_EQ(-EINVAL, __vfio_map(self->container, self->buf.addr, IOVA_BASE, 0, RW));
	assert_nothing_mapped(_metadata, self->container);
}

TEST_F(bad_request, map_unaligned)
{
	char *p = self->buf.addr;

	EXPECT_EQ(-EINVAL, __vfio_map(self->container, p, IOVA_BASE + 1, PAGE, RW));
	EXPECT_EQ(-EINVAL, __vfio_map(self->container, p + 1, IOVA_BASE, PAGE, RW));
	EXPECT_EQ(-EINVAL, __vfio_map(self->container, p, IOVA_BASE, PAGE + 1, RW));
	EXPECT_EQ(-EINVAL, __vfio_map(self->container, p, IOVA_BASE, PAGE / 2, RW));
	assert_nothing_mapped(_metadata, self->container);
}

TEST_F(bad_request, map_without_permission)
{
	EXPECT_EQ(-EINVAL, __vfio_map(self->container, self->buf.addr, IOVA_BASE, PAGE, 0));
	assert_nothing_mapped(_metadata, self->container);
}

/* A range that wraps: -EINVAL from type1 on 6.1 and 6.12, -EOVERFLOW on
 * 7.2 ("vfio/type1: handle DMA map/unmap up to the addressable limit");
 * zeropin answers as the running kernel's type1. */
static int ewrap(void)
{
	return kernel_at_least(6, 13) ? -EOVERFLOW : -EINVAL;
}

TEST_F(bad_request, map_iova_wraps)
{
	EXPECT_EQ(ewrap(), __vfio_map(self->container, self->buf.addr,
				      UINT64_MAX - PAGE + 1, 2 * PAGE, RW));
	/* the wrap is seen before the flags and the alignment (zeropin
	 * said -EINVAL to both on 7.2) */
	EXPECT_EQ(ewrap(), __vfio_map(self->container, self->buf.addr,
				      UINT64_MAX - PAGE + 1, 2 * PAGE, 0));
	EXPECT_EQ(ewrap(), __vfio_map(self->container, self->buf.addr,
				      UINT64_MAX - PAGE + 1, 2 * PAGE + 1, RW));
	assert_nothing_mapped(_metadata, self->container);
}

TEST_F(bad_request, map_reserved_iova)
{
	EXPECT_EQ(-EINVAL, __vfio_map(self->container, self->buf.addr, IOVA_MSI, PAGE, RW));
	assert_nothing_mapped(_metadata, self->container);
}

TEST_F(bad_request, map_unbacked_vaddr)
{
	void *hole = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, hole);
	ASSERT_EQ(0, munmap(hole, PAGE));
	EXPECT_EQ(-EFAULT, __vfio_map(self->container, hole, IOVA_BASE, PAGE, RW));
	assert_nothing_mapped(_metadata, self->container);
}

TEST_F(bad_request, map_overlap)
{
	char *p = self->buf.addr;
	uint64_t half = BUF_SIZE / 2;

	ASSERT_EQ(0, __vfio_map(self->container, p, IOVA_BASE, half, RW));
	/* same range, a range inside, one straddling each end, one around */
	EXPECT_EQ(-EEXIST, __vfio_map(self->container, p + half, IOVA_BASE, half, RW));
	EXPECT_EQ(-EEXIST, __vfio_map(self->container, p + half, IOVA_BASE + PAGE, PAGE, RW));
	EXPECT_EQ(-EEXIST, __vfio_map(self->container, p + half, IOVA_BASE - PAGE, 2 * PAGE, RW));
	EXPECT_EQ(-EEXIST, __vfio_map(self->container, p + half, IOVA_BASE + half - PAGE, 2 * PAGE, RW));
	EXPECT_EQ(-EEXIST, __vfio_map(self->container, p, IOVA_BASE - PAGE, half + 2 * PAGE, RW));
	vfio_unmap(self->container, IOVA_BASE, half);
	assert_nothing_mapped(_metadata, self->container);
}

TEST_F(bad_request, map_before_set_iommu)
{
	int container = vfio_container_open();

	EXPECT_EQ(-EINVAL, __vfio_map(container, self->buf.addr, IOVA_BASE, PAGE, RW));
	close(container);
}

TEST_F(bad_request, unmap_bad_requests)
{
	uint64_t unmapped;

	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE, 0, 0, &unmapped));
	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE + 1, PAGE, 0, &unmapped));
	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE, PAGE + 1, 0, &unmapped));
	EXPECT_EQ(ewrap(), __vfio_unmap(self->container, UINT64_MAX - PAGE + 1, 2 * PAGE, 0, &unmapped));
	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE, PAGE,
					VFIO_DMA_UNMAP_FLAG_ALL, &unmapped));
}

TEST_F(bad_request, unmap_nothing_mapped_is_zero_size)
{
	uint64_t unmapped = 1;

	EXPECT_EQ(0, __vfio_unmap(self->container, IOVA_BASE, BUF_SIZE, 0, &unmapped));
	EXPECT_EQ(0, unmapped);
}

TEST_F(bad_request, unmap_bisecting_a_mapping_is_refused)
{
	uint64_t unmapped = 1;

	vfio_map(self->container, self->buf.addr, IOVA_BASE, BUF_SIZE);
	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE + PAGE, PAGE, 0, &unmapped));
	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE, PAGE, 0, &unmapped));
	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE - PAGE, 2 * PAGE, 0, &unmapped));
	EXPECT_EQ(-EINVAL, __vfio_unmap(self->container, IOVA_BASE + BUF_SIZE - PAGE,
					2 * PAGE, 0, &unmapped));
	/* still whole and reachable */
	edu_verify(&self->edu, self->buf.addr, IOVA_BASE, BUF_SIZE);
	vfio_unmap(self->container, IOVA_BASE, BUF_SIZE);
}

TEST_F(bad_request, unmap_several_whole_mappings_at_once)
{
	char *p = self->buf.addr;
	uint64_t quarter = BUF_SIZE / 4, unmapped = 0;

	vfio_map(self->container, p, IOVA_BASE, quarter);
	vfio_map(self->container, p + quarter, IOVA_BASE + quarter, quarter);
	vfio_map(self->container, p + 3 * quarter, IOVA_BASE + 3 * quarter, quarter);
	EXPECT_EQ(0, __vfio_unmap(self->container, IOVA_BASE, BUF_SIZE, 0, &unmapped));
	EXPECT_EQ(3 * quarter, unmapped);
	assert_nothing_mapped(_metadata, self->container);
}

TEST_F(bad_request, unmap_all)
{
	char *p = self->buf.addr;
	uint64_t half = BUF_SIZE / 2, unmapped = 0;

	vfio_map(self->container, p, IOVA_BASE, half);
	vfio_map(self->container, p + half, IOVA_BASE + (1ull << 30), half);
	EXPECT_EQ(0, __vfio_unmap(self->container, 0, 0, VFIO_DMA_UNMAP_FLAG_ALL, &unmapped));
	EXPECT_EQ(BUF_SIZE, unmapped);
	assert_nothing_mapped(_metadata, self->container);
}

TEST_HARNESS_MAIN
