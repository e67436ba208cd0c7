// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_memlock - pinned memory is charged to RLIMIT_MEMLOCK as type1 does
 * it: to the mapping task's locked_vm (VmLck), refused with ENOMEM past
 * the limit with nothing left pinned, not limited with CAP_IPC_LOCK, and
 * given back on unmap and when the container goes. Against type1 and
 * zeropin. Each test runs in its own process (the harness forks), so
 * dropping CAP_IPC_LOCK there is safe.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "util.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull
#define LIMIT		(8ul << 20)
#define BUF_SIZE	(32ul << 20)

FIXTURE(memlock) {
	struct edu edu;
	int container;
	struct buffer buf;	/* 32 MiB of THP: larger than the limit */
	long vmlck;		/* VmLck before any mapping, kB */
};

FIXTURE_VARIANT(memlock) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(memlock, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(memlock, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(memlock)
{
	vfio_driver_use(variant->driver);
	buffer_alloc(&self->buf, BACKING_THP, BUF_SIZE);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
	ASSERT_EQ(0, __set_memlock(LIMIT));
	self->vmlck = proc_status_kb("VmLck");
	ASSERT_LE(0, self->vmlck);
}

FIXTURE_TEARDOWN(memlock)
{
	edu_close(&self->edu);
	if (self->container > 0)
		close(self->container);
	buffer_free(&self->buf);
}

static long pinned(const FIXTURE_VARIANT(memlock) *variant)
{
	return variant->driver == DRIVER_ZEROPIN ? iommu_counter("pages_pinned") : 0;
}

TEST_F(memlock, over_the_limit_is_enomem_and_pins_nothing)
{
	char *p = self->buf.addr;
	uint64_t unmapped = 0;

	ASSERT_EQ(0, __drop_ipc_lock());
	vfio_map(self->container, p, IOVA_BASE, LIMIT / 2);
	EXPECT_EQ(self->vmlck + (long)(LIMIT / 2 >> 10), proc_status_kb("VmLck"));
	/* a map that would cross the limit, however large, pins nothing */
	EXPECT_EQ(-ENOMEM, __vfio_map(self->container, p + LIMIT / 2, IOVA_BASE + LIMIT / 2,
				      LIMIT, VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE));
	EXPECT_EQ(-ENOMEM, __vfio_map(self->container, p + LIMIT / 2, IOVA_BASE + LIMIT / 2,
				      BUF_SIZE - LIMIT / 2,
				      VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE));
	EXPECT_EQ(self->vmlck + (long)(LIMIT / 2 >> 10), proc_status_kb("VmLck"));
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ((long)(LIMIT / 2 / 4096), pinned(variant));
	/* up to the limit exactly is fine */
	vfio_map(self->container, p + LIMIT / 2, IOVA_BASE + LIMIT / 2, LIMIT / 2);
	edu_verify(&self->edu, p, IOVA_BASE, LIMIT);
	ASSERT_EQ(0, __vfio_unmap(self->container, 0, 0, VFIO_DMA_UNMAP_FLAG_ALL, &unmapped));
	EXPECT_EQ(LIMIT, unmapped);
	EXPECT_EQ(self->vmlck, proc_status_kb("VmLck"));
	EXPECT_EQ(0, pinned(variant));
}

TEST_F(memlock, cap_ipc_lock_is_not_limited_but_still_charged)
{
	vfio_map(self->container, self->buf.addr, IOVA_BASE, BUF_SIZE);
	EXPECT_EQ(self->vmlck + (long)(BUF_SIZE >> 10), proc_status_kb("VmLck"));
	edu_verify(&self->edu, self->buf.addr, IOVA_BASE, BUF_SIZE);
	vfio_unmap(self->container, IOVA_BASE, BUF_SIZE);
	EXPECT_EQ(self->vmlck, proc_status_kb("VmLck"));
}

TEST_F(memlock, closing_the_container_gives_the_charge_back)
{
	vfio_map(self->container, self->buf.addr, IOVA_BASE, LIMIT);
	EXPECT_EQ(self->vmlck + (long)(LIMIT >> 10), proc_status_kb("VmLck"));
	edu_close(&self->edu);
	close(self->container);
	self->container = -1;
	EXPECT_EQ(self->vmlck, proc_status_kb("VmLck"));
	EXPECT_EQ(0, pinned(variant));
}

/*
 * A mapping that fits the limit exactly is not refused, whatever order its
 * pieces come in: 63 MiB of 4 KiB pages (zeropin charges a 64 MiB credit
 * for the first GUP batch and has 1 MiB of it left) and then a 2 MiB THP,
 * which needs only the 1 MiB more the limit still allows.
 */
#define FIT_4K		(63ul << 20)
#define FIT_SIZE	(FIT_4K + (2ul << 20))

TEST_F(memlock, a_mapping_that_fits_exactly_is_not_refused)
{
	size_t span = FIT_SIZE + (4ul << 20);
	char *raw, *base;

	raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, raw);
	/* the THP part 2 MiB-aligned at the end, the 4 KiB part before it */
	base = (char *)(((uintptr_t)raw + (4ul << 20)) & ~((2ul << 20) - 1)) - (1ul << 20);
	ASSERT_EQ(0, madvise(base, FIT_4K, MADV_NOHUGEPAGE));
	ASSERT_EQ(0, madvise(base + FIT_4K, 2ul << 20, MADV_HUGEPAGE));
	memset(base, 1, FIT_SIZE);
	ASSERT_EQ(0, __set_memlock((size_t)self->vmlck * 1024 + FIT_SIZE));
	ASSERT_EQ(0, __drop_ipc_lock());
	vfio_map(self->container, base, IOVA_BASE, FIT_SIZE);
	EXPECT_EQ(self->vmlck + (long)(FIT_SIZE >> 10), proc_status_kb("VmLck"));
	vfio_unmap(self->container, IOVA_BASE, FIT_SIZE);
	EXPECT_EQ(self->vmlck, proc_status_kb("VmLck"));
	munmap(raw, span);
}

TEST_HARNESS_MAIN
