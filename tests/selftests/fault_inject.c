// SPDX-License-Identifier: GPL-2.0
/*
 * fault_inject - every allocation that VFIO_IOMMU_MAP_DMA and
 * VFIO_SET_IOMMU (type1 and zeropin), a zeropinfs write(), fallocate(),
 * page fault or mount makes may fail: the call
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
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
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

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* since 5.14; older libc headers lack it */
#endif

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

/* Pages the mount counts as used (statfs counts 4 KiB pages). */
static long zfs_used_pages(void)
{
	struct statfs st;

	if (statfs(ZFS_MNT, &st))
		return -errno;
	return (st.f_blocks - st.f_bfree) * st.f_bsize / 4096;
}

/*
 * write() and fallocate() into a new file, failing each allocation in
 * turn: afterwards the mount counts what the file's size covers, in
 * blocks or, where a block's allocation was the one failed, in 4 KiB
 * pages (the fallback of a fragmented host): no more than the size's
 * blocks, no less than its pages (a failed call leaves nothing past EOF),
 * the pool's count of blocks and fallback pages agrees, and truncating
 * the file gives everything back.
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
			ASSERT_GE((st.st_size + SZ_2M - 1) / SZ_2M * 512, zfs_used_pages())
				TH_LOG("%s, allocation %d: size %ld", op ? "fallocate" : "write", n,
				       (long)st.st_size);
			ASSERT_LE((st.st_size + 4095) / 4096, zfs_used_pages())
				TH_LOG("%s, allocation %d: size %ld", op ? "fallocate" : "write", n,
				       (long)st.st_size);
			ASSERT_EQ(zfs_used_pages(),
				  pool_read("inuse_mib") * 256 + pool_counter("fallback_pages"));
			ASSERT_EQ(0, ftruncate(fd, 0));
			ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
			ASSERT_EQ(0, zfs_used_pages());
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

/*
 * VFIO_SET_IOMMU failing each allocation in turn (a second edu, in a
 * container of its own each time): the ioctl fails with ENOMEM, or VFIO
 * moves on to the next driver that takes TYPE1v2 (zeropin failing gives
 * the container to stock type1: slower, still correct, and counted in
 * setup_failures, with a line in the kernel log, so an operator can
 * tell). Either way nothing stays behind: the group attaches again,
 * zeropin counts no container once it is closed, and the last container
 * works.
 */
TEST_F(fault, set_iommu_fails_cleanly_at_every_allocation)
{
	int n, ret, container = -1, group, group_id, failed = 0, fell_back = 0;
	long before = zeropin_containers(), setup_failures;
	char bdf[256];
	bool left;

	if (variant->backing != BACKING_ANON_4K)
		SKIP(return, "one variant per driver is enough: no memory here");
	if (edu_find(1, bdf, sizeof(bdf)))
		SKIP(return, "needs a second edu");
	ASSERT_EQ(0, vfio_group_open(bdf, &group_id, &group));
	for (n = 1; n < MAX_SITES; n++) {
		container = vfio_container_open();
		ASSERT_EQ(0, __vfio_group_attach(group, container));
		setup_failures = iommu_counter("setup_failures");
		ASSERT_EQ(0, __fail_nth(n));
		ret = ioctl(container, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) ? -errno : 0;
		left = fail_nth_left();
		if (ret) {
			failed++;
			/* type1's domain allocation fails with EIO */
			EXPECT_TRUE(ret == -ENOMEM || ret == -EIO)
				TH_LOG("allocation %d: errno %d", n, -ret);
		} else if (variant->driver == DRIVER_ZEROPIN &&
			   zeropin_containers() == before) {
			fell_back++;
			EXPECT_LT(setup_failures, iommu_counter("setup_failures"))
				TH_LOG("allocation %d: type1 took the container, setup_failures did not count it", n);
		}
		if (!ret && left)
			break;	/* no allocation left to fail */
		ASSERT_EQ(0, ioctl(group, VFIO_GROUP_UNSET_CONTAINER));
		close(container);
		ASSERT_EQ(before, zeropin_containers()) TH_LOG("allocation %d", n);
	}
	ASSERT_LT(n, MAX_SITES);
	TH_LOG("%d allocations on the path: %d failed the ioctl, %d gave the container to type1",
	       n - 1, failed, fell_back);
	/* the last try had nothing to fail: the driver the variant names */
	EXPECT_EQ(variant->driver == DRIVER_ZEROPIN ? before + 1 : before, zeropin_containers());
	ASSERT_EQ(0, ioctl(group, VFIO_GROUP_UNSET_CONTAINER));
	close(container);
	close(group);
	EXPECT_EQ(before, zeropin_containers());
}

/*
 * A fault on a zeropinfs mapping failing each allocation in turn (asked
 * through MADV_POPULATE_WRITE, which turns the fault's SIGBUS into an
 * errno): the mount and the pool count exactly the blocks (and fallback
 * pages) the file holds, and the next fault works.
 */
TEST_F(fault, zeropinfs_fault_fails_cleanly_at_every_allocation)
{
	size_t size = 2 * SZ_2M;
	int n, fd, ret, failed = 0;
	bool left;
	char *p;

	if (variant->driver != DRIVER_ZEROPIN || variant->backing != BACKING_ZEROPINFS)
		SKIP(return, "one variant is enough: no VFIO here");
	fd = zfs_create(ZFS_MNT "/fault", size);
	p = map_file(fd, size, MAP_SHARED);
	for (n = 1; n < MAX_SITES; n++) {
		ASSERT_EQ(0, __fail_nth(n));
		ret = madvise(p, size, MADV_POPULATE_WRITE) ? -errno : 0;
		left = fail_nth_left();
		if (ret) {
			failed++;
			EXPECT_TRUE(ret == -EFAULT || ret == -ENOMEM)
				TH_LOG("allocation %d: errno %d", n, -ret);
		}
		/* blocks, or 4 KiB pages where a block's allocation failed */
		ASSERT_EQ(zfs_used_pages(),
			  pool_read("inuse_mib") * 256 + pool_counter("fallback_pages"))
			TH_LOG("allocation %d", n);
		ASSERT_GE(2 * 512, zfs_used_pages()) TH_LOG("allocation %d", n);
		if (!ret && left)
			break;
		/* start over from an empty file, with nothing mapped */
		ASSERT_EQ(0, madvise(p, size, MADV_DONTNEED));
		ASSERT_EQ(0, ftruncate(fd, 0));
		ASSERT_EQ(0, ftruncate(fd, size));
		ASSERT_EQ(0, zfs_used_pages());
	}
	ASSERT_LT(n, MAX_SITES);
	TH_LOG("%d allocations on the path, %d of whose failures failed the fault", n - 1, failed);
	EXPECT_EQ(2 * 512, zfs_used_pages());
	EXPECT_TRUE(all_bytes(p, 0, size));
	munmap(p, size);
	close(fd);
	ASSERT_EQ(0, unlink(ZFS_MNT "/fault"));
	EXPECT_EQ(0, pool_counter("inuse"));
}

/*
 * mount -t zeropinfs failing each allocation in turn: a clear errno, no
 * mount left, and the module can still go (teardown unloads it).
 */
TEST_F(fault, mount_fails_cleanly_at_every_allocation)
{
	int n, ret, failed = 0;
	bool left;

	if (variant->driver != DRIVER_ZEROPIN || variant->backing != BACKING_ZEROPINFS)
		SKIP(return, "one variant is enough: no VFIO here");
	ASSERT_EQ(0, mkdir(ZFS_MNT "/m", 0700));
	for (n = 1; n < MAX_SITES; n++) {
		ASSERT_EQ(0, __fail_nth(n));
		ret = mount("none", ZFS_MNT "/m", "zeropinfs", 0, "size=16M,mode=0700") ? -errno : 0;
		left = fail_nth_left();
		if (ret) {
			failed++;
			EXPECT_EQ(-ENOMEM, ret) TH_LOG("allocation %d", n);
			continue;
		}
		ASSERT_EQ(0, umount(ZFS_MNT "/m"));
		if (left)
			break;
	}
	ASSERT_LT(n, MAX_SITES);
	TH_LOG("%d allocations on the path, %d of whose failures failed the mount", n - 1, failed);
	ASSERT_EQ(0, rmdir(ZFS_MNT "/m"));
}

TEST_HARNESS_MAIN
