// SPDX-License-Identifier: GPL-2.0
/*
 * fault_inject - every allocation that VFIO_IOMMU_MAP_DMA (type1 and
 * zeropin), a zeropinfs write() or a fallocate() makes may fail: the call
 * then fails with an errno, leaves nothing pinned, charged or counted, and
 * the next call works (kmemleak, in the debug lab kernel, finds anything
 * left allocated). The kernel's fail-nth (/proc/thread-self/fail-nth) makes
 * the n-th allocation of the calling task fail, for n = 1, 2, ... until a
 * call goes through with none left to fail: every allocation site on the
 * path, in order.
 *
 * Needs fault injection (failslab, fail_page_alloc), which the debug lab
 * kernel has and Debian's kernels do not: elsewhere it skips.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define DEBUGFS		"/sys/kernel/debug"
#define IOVA_BASE	0x100000000ull
#define MAP_SIZE	(8ul << 20)
#define WRITE_SIZE	(4ul << 20)
/* No path has this many allocations: a loop that gets here never found a
 * call with no failure left to inject. */
#define MAX_SITES	4000

/* Let fail-nth reach every allocation: those that may sleep, highmem
 * (GFP_HIGHUSER blocks) and single pages too; no stack dump per failure. */
static const char *const fault_knobs[][2] = {
	{ DEBUGFS "/failslab/ignore-gfp-wait", "N" },
	{ DEBUGFS "/failslab/verbose", "0" },
	{ DEBUGFS "/fail_page_alloc/ignore-gfp-wait", "N" },
	{ DEBUGFS "/fail_page_alloc/ignore-gfp-highmem", "N" },
	{ DEBUGFS "/fail_page_alloc/min-order", "0" },
	{ DEBUGFS "/fail_page_alloc/verbose", "0" },
};

static bool have_fault_injection(void)
{
	return !access(DEBUGFS "/failslab", F_OK) && !access(DEBUGFS "/fail_page_alloc", F_OK);
}

static int __fault_setup(void)
{
	unsigned int i;
	int ret;

	for (i = 0; i < sizeof(fault_knobs) / sizeof(fault_knobs[0]); i++) {
		ret = __write_file(fault_knobs[i][0], fault_knobs[i][1]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Make this task's n-th allocation from now fail (0: none). */
static int __fail_nth(int n)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d", n);
	return __write_file("/proc/thread-self/fail-nth", buf);
}

/* Whether the failure asked for is still to come (the call made fewer
 * allocations than that); clears it. */
static bool fail_nth_left(void)
{
	char buf[16] = "";
	int fd = open("/proc/thread-self/fail-nth", O_RDONLY);

	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) < 0)
			buf[0] = 0;
		close(fd);
	}
	__fail_nth(0);
	return atoi(buf) > 0;
}

FIXTURE(fault) {
	struct edu edu;
	int container;
	struct buffer buf;
};

FIXTURE_VARIANT(fault) {
	enum vfio_driver driver;
	enum backing backing;
};

FIXTURE_VARIANT_ADD(fault, type1_anon4k) { .driver = DRIVER_TYPE1, .backing = BACKING_ANON_4K };
FIXTURE_VARIANT_ADD(fault, zeropin_anon4k) { .driver = DRIVER_ZEROPIN, .backing = BACKING_ANON_4K };
FIXTURE_VARIANT_ADD(fault, type1_zeropinfs) {
	.driver = DRIVER_TYPE1, .backing = BACKING_ZEROPINFS };
FIXTURE_VARIANT_ADD(fault, zeropin_zeropinfs) {
	.driver = DRIVER_ZEROPIN, .backing = BACKING_ZEROPINFS };

FIXTURE_SETUP(fault)
{
	self->container = -1;
	edu_init(&self->edu);
	if (!have_fault_injection())
		SKIP(return, "no fault injection in this kernel (the debug lab kernel has it)");
	ASSERT_EQ(0, __fault_setup());
	zeropin_reset();
	zeropin_load("pool_mib=16");
	vfio_driver_use(variant->driver);
	zfs_mount(ZFS_MNT, "size=64M");
	buffer_alloc(&self->buf, variant->backing, MAP_SIZE);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
}

FIXTURE_TEARDOWN(fault)
{
	edu_close(&self->edu);
	if (self->container >= 0) {
		close(self->container);
		buffer_free(&self->buf);
	}
	zeropin_reset();
}

static long pinned_now(const FIXTURE_VARIANT(fault) *variant)
{
	return variant->driver == DRIVER_ZEROPIN ? iommu_counter("pages_pinned") : 0;
}

TEST_F(fault, map_dma_fails_cleanly_at_every_allocation)
{
	long vmlck = proc_status_kb("VmLck"), pinned = pinned_now(variant);
	int n, ret, failed = 0;
	bool left;

	for (n = 1; n < MAX_SITES; n++) {
		ASSERT_EQ(0, __fail_nth(n));
		ret = __vfio_map(self->container, self->buf.addr, IOVA_BASE, MAP_SIZE,
				 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
		left = fail_nth_left();
		if (!ret) {
			vfio_unmap(self->container, IOVA_BASE, MAP_SIZE);
			if (left)
				break;	/* no allocation left to fail */
			continue;	/* a failure the path got around */
		}
		failed++;
		EXPECT_TRUE(ret == -ENOMEM || ret == -EFAULT || ret == -EAGAIN)
			TH_LOG("allocation %d: MAP_DMA errno %d", n, -ret);
		ASSERT_EQ(vmlck, proc_status_kb("VmLck")) TH_LOG("allocation %d", n);
		ASSERT_EQ(pinned, pinned_now(variant)) TH_LOG("allocation %d", n);
	}
	ASSERT_LT(n, MAX_SITES);
	TH_LOG("%d allocations on the path, %d of whose failures failed MAP_DMA", n - 1, failed);
	vfio_map(self->container, self->buf.addr, IOVA_BASE, MAP_SIZE);
	edu_verify(&self->edu, self->buf.addr, IOVA_BASE, MAP_SIZE);
	vfio_unmap(self->container, IOVA_BASE, MAP_SIZE);
	EXPECT_EQ(vmlck, proc_status_kb("VmLck"));
}

/* Blocks the mount counts as used; pool blocks in files. */
static long zfs_used_blocks(void)
{
	struct statfs st;

	if (statfs(ZFS_MNT, &st))
		return -errno;
	return (st.f_blocks - st.f_bfree) * st.f_bsize / SZ_2M;
}

/*
 * write() and fallocate() into a new file, failing each allocation in
 * turn: afterwards the mount counts exactly the blocks the file's size
 * covers (a failed call leaves no block past EOF), the pool agrees, and
 * truncating the file gives everything back.
 */
TEST_F(fault, zeropinfs_write_and_fallocate_fail_cleanly)
{
	static char data[WRITE_SIZE];
	int n, fd, ret, sites[2] = { 0, 0 };
	unsigned int op;
	struct stat st;
	bool left;

	if (variant->driver != DRIVER_ZEROPIN || variant->backing != BACKING_ZEROPINFS)
		SKIP(return, "one variant is enough: no VFIO here");
	memset(data, 0x5a, sizeof(data));
	fd = open(ZFS_MNT "/inject", O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	for (op = 0; op < 2; op++) {
		for (n = 1; n < MAX_SITES; n++) {
			ASSERT_EQ(0, __fail_nth(n));
			if (op == 0)
				ret = write(fd, data, sizeof(data)) == sizeof(data) ? 0 : -1;
			else
				ret = fallocate(fd, 0, 0, WRITE_SIZE);
			left = fail_nth_left();
			ASSERT_EQ(0, fstat(fd, &st));
			ASSERT_EQ((st.st_size + SZ_2M - 1) / SZ_2M, zfs_used_blocks())
				TH_LOG("%s, allocation %d: size %ld", op ? "fallocate" : "write", n,
				       (long)st.st_size);
			ASSERT_EQ(zfs_used_blocks() * 2, pool_read("inuse_mib"));
			ASSERT_EQ(0, ftruncate(fd, 0));
			ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
			ASSERT_EQ(0, zfs_used_blocks());
			if (!ret && left)
				break;
		}
		ASSERT_LT(n, MAX_SITES);
		sites[op] = n - 1;
	}
	TH_LOG("write: %d allocations, fallocate: %d", sites[0], sites[1]);
	close(fd);
	ASSERT_EQ(0, unlink(ZFS_MNT "/inject"));
	EXPECT_EQ(0, pool_counter("inuse"));
}

TEST_HARNESS_MAIN
