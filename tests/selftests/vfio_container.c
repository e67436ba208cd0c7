// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_container - containers, groups and IOMMU domains: which driver a
 * container gets, what it reports (CHECK_EXTENSION, GET_INFO), two edu
 * devices in one container, a device that joins after mappings exist, a
 * second container, everything unpinned when the last group leaves, and
 * dirty-page tracking refused by zeropin with the container still serving.
 * Each case runs against stock type1 and against zeropin, and once more
 * with zeropin giving every group its own IOMMU domain (share_domains=0),
 * which makes a joining device take the replay path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull
#define BUF_SIZE	(4ul << 20)
#define INFO_SIZE	4096

FIXTURE(container) {
	struct edu edu[2];	/* both edus, groups open, not attached */
	int container;		/* a fresh container, no IOMMU set */
	struct buffer buf;	/* 4 MiB of 4K anonymous memory */
};

FIXTURE_VARIANT(container) {
	enum vfio_driver driver;
	bool separate_domains;	/* zeropin share_domains=0 */
};

FIXTURE_VARIANT_ADD(container, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(container, zeropin) { .driver = DRIVER_ZEROPIN };
FIXTURE_VARIANT_ADD(container, zeropin_separate_domains) {
	.driver = DRIVER_ZEROPIN, .separate_domains = true };

FIXTURE_SETUP(container)
{
	self->container = -1;
	edu_init(&self->edu[0]);
	edu_init(&self->edu[1]);
	if (edu_count() < 2)
		SKIP(return, "needs two edu devices (scripts/lab --edu 2)");
	vfio_driver_use(variant->driver);
	if (variant->driver == DRIVER_ZEROPIN)
		ASSERT_EQ(0, __zeropin_param_write("share_domains", !variant->separate_domains));
	buffer_alloc(&self->buf, BACKING_ANON_4K, BUF_SIZE);
	edu_open(&self->edu[0], 0);
	edu_open(&self->edu[1], 1);
	self->container = vfio_container_open();
}

FIXTURE_TEARDOWN(container)
{
	edu_close(&self->edu[0]);
	edu_close(&self->edu[1]);
	if (self->container >= 0)
		close(self->container);
	buffer_free(&self->buf);
	__zeropin_param_write("share_domains", 1);
}

/* IOMMU domains zeropin holds now; -1 for type1 (not ours to count). */
static long domains(const FIXTURE_VARIANT(container) *variant)
{
	return variant->driver == DRIVER_ZEROPIN ? iommu_counter("domains") : -1;
}

TEST_F(container, two_devices_one_container)
{
	edu_attach(&self->edu[0], self->container);
	edu_attach(&self->edu[1], self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&self->edu[0]);
	edu_get_device(&self->edu[1]);
	vfio_map(self->container, self->buf.addr, IOVA_BASE, BUF_SIZE);
	edu_verify(&self->edu[0], self->buf.addr, IOVA_BASE, BUF_SIZE);
	edu_verify(&self->edu[1], self->buf.addr, IOVA_BASE, BUF_SIZE);
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ(variant->separate_domains ? 2 : 1, domains(variant));
	vfio_unmap(self->container, IOVA_BASE, BUF_SIZE);
}

TEST_F(container, device_added_after_mappings_reaches_them)
{
	edu_attach(&self->edu[0], self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&self->edu[0]);
	vfio_map(self->container, self->buf.addr, IOVA_BASE, BUF_SIZE / 2);
	vfio_map(self->container, (char *)self->buf.addr + BUF_SIZE / 2,
		 IOVA_BASE + (1ull << 30), BUF_SIZE / 2);
	edu_attach(&self->edu[1], self->container);
	edu_get_device(&self->edu[1]);
	edu_verify(&self->edu[1], self->buf.addr, IOVA_BASE, BUF_SIZE / 2);
	edu_verify(&self->edu[1], (char *)self->buf.addr + BUF_SIZE / 2,
		   IOVA_BASE + (1ull << 30), BUF_SIZE / 2);
	edu_verify(&self->edu[0], self->buf.addr, IOVA_BASE, BUF_SIZE / 2);
	/* and an unmap now reaches both */
	vfio_unmap(self->container, IOVA_BASE, BUF_SIZE / 2);
	memset(self->buf.addr, 0x5a, 2048);
	ASSERT_EQ(0, __edu_dma(&self->edu[1], IOVA_BASE, 2048, true));
	EXPECT_TRUE(all_bytes(self->buf.addr, 0x5a, 2048));
	vfio_unmap(self->container, IOVA_BASE + (1ull << 30), BUF_SIZE / 2);
}

TEST_F(container, second_container_is_isolated)
{
	struct buffer other;
	int second;
	uint8_t *a, *b;

	buffer_alloc(&other, BACKING_ANON_4K, BUF_SIZE);
	edu_attach(&self->edu[0], self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&self->edu[0]);
	second = vfio_container_open();
	edu_attach(&self->edu[1], second);
	vfio_set_iommu(second, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&self->edu[1]);
	/* the same IOVA, a different buffer in each container */
	vfio_map(self->container, self->buf.addr, IOVA_BASE, BUF_SIZE);
	vfio_map(second, other.addr, IOVA_BASE, BUF_SIZE);
	a = self->buf.addr;
	b = other.addr;
	memset(a, 0x11, 8192);
	memset(b, 0x22, 8192);
	/* edu0 copies its container's first page onto its second page */
	ASSERT_EQ(0, __edu_dma(&self->edu[0], IOVA_BASE, 2048, false));
	ASSERT_EQ(0, __edu_dma(&self->edu[0], IOVA_BASE + 4096, 2048, true));
	EXPECT_TRUE(all_bytes(a + 4096, 0x11, 2048));
	EXPECT_TRUE(all_bytes(b, 0x22, 8192));
	vfio_unmap(second, IOVA_BASE, BUF_SIZE);
	vfio_unmap(self->container, IOVA_BASE, BUF_SIZE);
	edu_close(&self->edu[1]);
	close(second);
	buffer_free(&other);
}

TEST_F(container, last_group_leaving_unpins_everything)
{
	long before = proc_status_kb("VmLck");

	edu_attach(&self->edu[0], self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&self->edu[0]);
	vfio_map(self->container, self->buf.addr, IOVA_BASE, BUF_SIZE);
	EXPECT_EQ(before + (long)(BUF_SIZE >> 10), proc_status_kb("VmLck"));
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ(BUF_SIZE / 4096, iommu_counter("pages_pinned"));
	edu_close(&self->edu[0]);	/* the last group leaves the container */
	EXPECT_EQ(before, proc_status_kb("VmLck"));
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(0, iommu_counter("pages_pinned"));
		EXPECT_EQ(0, iommu_counter("containers"));
		EXPECT_EQ(0, iommu_counter("domains"));
	}
}

TEST_F(container, get_info_reports_iova_ranges_and_avail)
{
	char buf[INFO_SIZE];
	struct vfio_iommu_type1_info *info = (void *)buf;
	const struct vfio_iommu_type1_info_cap_iova_range *ranges;
	const struct vfio_iommu_type1_info_dma_avail *avail;
	uint32_t i, msi_excluded = 1, before;

	edu_attach(&self->edu[0], self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	ASSERT_EQ(0, __vfio_iommu_info(self->container, buf, sizeof(*info)));
	/* too small for the chain: the needed size comes back, no offset */
	EXPECT_TRUE(info->flags & VFIO_IOMMU_INFO_CAPS);
	EXPECT_LT(sizeof(*info), info->argsz);
	EXPECT_EQ(0, info->cap_offset);
	ASSERT_EQ(0, __vfio_iommu_info(self->container, buf, sizeof(buf)));
	EXPECT_TRUE(info->flags & VFIO_IOMMU_INFO_PGSIZES);
	EXPECT_TRUE(info->iova_pgsizes & 4096);
	EXPECT_EQ(0, info->iova_pgsizes & 4095);
	ranges = (const void *)vfio_info_cap(buf, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE);
	ASSERT_NE(NULL, ranges);
	ASSERT_LE(2, ranges->nr_iovas);	/* at least: below and above the MSI window */
	for (i = 0; i < ranges->nr_iovas; i++)
		if (ranges->iova_ranges[i].start <= 0xfee00000ull &&
		    ranges->iova_ranges[i].end >= 0xfee00000ull)
			msi_excluded = 0;
	EXPECT_TRUE(msi_excluded);
	avail = (const void *)vfio_info_cap(buf, VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL);
	ASSERT_NE(NULL, avail);
	before = avail->avail;
	vfio_map(self->container, self->buf.addr, IOVA_BASE, BUF_SIZE);
	ASSERT_EQ(0, __vfio_iommu_info(self->container, buf, sizeof(buf)));
	avail = (const void *)vfio_info_cap(buf, VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL);
	ASSERT_NE(NULL, avail);
	EXPECT_EQ(before - 1, avail->avail);
	/* zeropin serves no dirty tracking: no migration capability */
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(NULL, vfio_info_cap(buf, VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION));
	} else {
		EXPECT_NE(NULL, vfio_info_cap(buf, VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION));
	}
	vfio_unmap(self->container, IOVA_BASE, BUF_SIZE);
}

/*
 * A VFIO user that is not QEMU asks for dirty-page tracking (a migration
 * tool, a user-space driver that checkpoints): with claim_type1v2 zeropin
 * takes every type1v2 container on the host, so it must refuse cleanly
 * (EOPNOTSUPP, the migration capability already absent from GET_INFO)
 * and keep serving the container: its mapping still reaches RAM by DMA,
 * and unmaps. type1 starts and stops tracking.
 */
TEST_F(container, dirty_tracking_refused_container_still_serves)
{
	struct vfio_iommu_type1_dirty_bitmap db = {
		.argsz = sizeof(db), .flags = VFIO_IOMMU_DIRTY_PAGES_FLAG_START };
	int ret;

	edu_attach(&self->edu[0], self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&self->edu[0]);
	vfio_map(self->container, self->buf.addr, IOVA_BASE, BUF_SIZE);
	ret = ioctl(self->container, VFIO_IOMMU_DIRTY_PAGES, &db);
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(-1, ret);
		EXPECT_EQ(EOPNOTSUPP, errno);
	} else {
		EXPECT_EQ(0, ret);
		db.flags = VFIO_IOMMU_DIRTY_PAGES_FLAG_STOP;
		EXPECT_EQ(0, ioctl(self->container, VFIO_IOMMU_DIRTY_PAGES, &db));
	}
	edu_verify(&self->edu[0], self->buf.addr, IOVA_BASE, BUF_SIZE);
	vfio_unmap(self->container, IOVA_BASE, BUF_SIZE);
}

/* What QEMU and the KVM-VFIO device ask: same answers as type1's. */
TEST_F(container, check_extension)
{
	edu_attach(&self->edu[0], self->container);
	EXPECT_EQ(1, ioctl(self->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU));
	EXPECT_EQ(1, ioctl(self->container, VFIO_CHECK_EXTENSION, VFIO_UNMAP_ALL));
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	EXPECT_EQ(1, ioctl(self->container, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU));
	EXPECT_EQ(1, ioctl(self->container, VFIO_CHECK_EXTENSION, VFIO_UNMAP_ALL));
	EXPECT_LE(0, ioctl(self->container, VFIO_CHECK_EXTENSION, VFIO_DMA_CC_IOMMU));
	EXPECT_EQ(0, ioctl(self->container, VFIO_CHECK_EXTENSION, 0x7fff));
}

/* Set up a container of type for edu 0; whether zeropin took it. */
static bool served_by_zeropin(struct __test_metadata *_metadata, unsigned long type)
{
	long before = zeropin_containers();
	bool zeropin;
	struct edu edu;
	int c;

	edu_open(&edu, 0);
	c = vfio_container_open();
	edu_attach(&edu, c);
	EXPECT_EQ(0, __vfio_set_iommu(c, type));
	zeropin = zeropin_containers() > before;
	edu_close(&edu);
	close(c);
	EXPECT_EQ(before, zeropin_containers());	/* released with the group */
	return zeropin;
}

/*
 * claim_type1v2 decides where TYPE1v2 containers go, and v1 (VFIO_TYPE1_IOMMU)
 * always stays with stock type1.
 */
TEST(claim_type1v2_routes_containers)
{
	if (access("/sys/module/zeropin", F_OK))
		zeropin_load("");
	ASSERT_EQ(0, __zeropin_param_write("claim_type1v2", 1));
	EXPECT_FALSE(served_by_zeropin(_metadata, VFIO_TYPE1_IOMMU));
	EXPECT_TRUE(served_by_zeropin(_metadata, VFIO_TYPE1v2_IOMMU));
	ASSERT_EQ(0, __zeropin_param_write("claim_type1v2", 0));
	EXPECT_FALSE(served_by_zeropin(_metadata, VFIO_TYPE1v2_IOMMU));
	ASSERT_EQ(0, __zeropin_param_write("claim_type1v2", 1));
}

TEST_HARNESS_MAIN
