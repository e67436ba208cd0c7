// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_runs - 1 GiB runs in the pool (issue 25): in idle time the pool takes
 * 1 GiB-aligned, physically contiguous GiBs from the page allocator and
 * cuts them into blocks; never while a node is handing blocks out
 * (run_quiet_ms), never when run_build is off. A VFIO pin in an empty GiB
 * of a file takes a whole run for it (a fault takes one block), so the GiB
 * is physically contiguous and 1 GiB-aligned, every block zero, and
 * zeropin's backend maps it with one 1 GiB IOMMU entry, proven by edu DMA;
 * QEMU's q35 layout of a 4 GiB VM gets three. A pin of part of a GiB
 * takes no run (it commits what it asks for), nor does one into a mount or memcg
 * the GiB would not fit; one a hole is punched under keeps no block once
 * the file lets go. A run a file lets go of while
 * it is pinned is not handed out again; on a fragmented lab (a long-term
 * pin in every 2 MiB) no run is built and the pool falls back to blocks,
 * nor on a host with isolated CPUs (a boot of its own, isolcpus=1).
 *
 * Runs in a lab boot of its own (ZP_RUNS_BOOT=1, tests/run-selftests):
 * 10 GiB, no hugetlb reserve, so ZONE_NORMAL has free GiBs; init_on_alloc=0,
 * so only the pool's zeroing stands between a run's old data and a file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <linux/falloc.h>

#include "kselftest_harness.h"
#include "kmsg.h"
#include "fuse_stall.h"
#include "pressure.h"
#include "util.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

/* The pool of the build test: two runs. */
#define RUNS_POOL_MIB	2048
/* How long the lab (TCG) may take to build and zero the runs. */
#define RUNS_SETTLE_MS	300000
/* The quiet test: a block taken every TAKE_EVERY_MS for TAKE_FOR_MS, with
 * run_quiet_ms at QUIET_MS, builds no run until QUIET_MS after the last. */
#define QUIET_MS	3000
#define TAKE_EVERY_MS	100
#define TAKE_FOR_MS	6000
/* The busy test: a VM start takes the pool's two GiBs, then its guest
 * faults a block in every BUSY_EVERY_MS, never a quiet period (BUSY_QUIET_MS,
 * run_quiet_ms) long: five quiet periods without a loose block for the
 * GiBs, then one GiB of them per five. */
#define BUSY_QUIET_MS	4000
#define BUSY_EVERY_MS	1000
#define BUSY_POOL_MIB	2048
#define BUSY_FOR_MS	180000
#define SZ_1G		(1ul << 30)
#define PAGES_1G	(SZ_1G / 4096)
/* The DMA tests' file: a 4 GiB VM's RAM, the pool's four runs. */
#define VM_SIZE		(4ul << 30)
/* The reuse test: a file faulted in after a pinned run was let go of. */
#define AFTER_SIZE	(64ul << 20)
#define PATTERN		0x5a

FIXTURE(runs) {
	int unused;
};

FIXTURE_SETUP(runs)
{
	if (!getenv("ZP_RUNS_BOOT"))
		SKIP(return, "runs in a lab boot of its own (ZP_RUNS_BOOT=1, tests/run-selftests): free GiBs in ZONE_NORMAL need 8 GiB and no hugetlb reserve");
	zeropin_reset();
}

FIXTURE_TEARDOWN(runs)
{
	zeropin_reset();
}

/* A pool of two GiBs fills with two runs, run_build at its default (on):
 * each 512 blocks at consecutive pfns from a 1 GiB-aligned one (read back
 * from pool_blocks), built in idle time and zeroed by the pool
 * (init_on_alloc=0), then handed to a file that reads zero throughout.
 * Prints
 *   # runs: N built in M ms, K listed
 */
TEST_F_TIMEOUT(runs, runs_are_built_in_idle_time, 600)
{
	long built, listed, ms;
	uint8_t *p;
	int fd;

	zeropin_load("pool_mib=2048");	/* RUNS_POOL_MIB */
	ASSERT_EQ(1, pool_counter("runs_supported"));
	ASSERT_EQ(1, zeropin_param_bool("run_build"));
	ASSERT_EQ(0, pool_wait("zero_mib", RUNS_POOL_MIB, RUNS_SETTLE_MS));
	/* the last run's last block is in zero a moment before the kthread
	 * keeps the run and counts it */
	pool_counter_wait("runs_built", RUNS_POOL_MIB >> 10, 10000);
	built = pool_counter("runs_built");
	listed = pool_blocks_runs();
	ms = pool_counter("runs_build_ms");
	TH_LOG("runs: %ld built in %ld ms, %ld listed, %ld tries failed", built, ms, listed,
	       pool_counter("runs_build_failed"));
	printf("# runs: %ld built in %ld ms, %ld listed\n", built, ms, listed);
	EXPECT_EQ(RUNS_POOL_MIB >> 10, built);
	EXPECT_EQ(RUNS_POOL_MIB >> 10, listed);
	EXPECT_EQ(listed, pool_counter("runs_1g"));

	zfs_mount(ZFS_MNT, "size=2048M");
	fd = zfs_create(ZFS_MNT "/ram", (size_t)RUNS_POOL_MIB << 20);
	p = map_file(fd, (size_t)RUNS_POOL_MIB << 20, MAP_SHARED);
	EXPECT_TRUE(all_bytes(p, 0, (size_t)RUNS_POOL_MIB << 20));
	EXPECT_EQ(RUNS_POOL_MIB / 2, pool_counter("handed_zero"));
	munmap(p, (size_t)RUNS_POOL_MIB << 20);
	close(fd);
}

/* run_build=0: the same pool fills with loose blocks, and no run is tried. */
TEST_F_TIMEOUT(runs, run_build_off_fills_with_blocks, 600)
{
	zeropin_load("run_build=0 pool_mib=1024");
	ASSERT_EQ(0, pool_wait("zero_mib", 1024, RUNS_SETTLE_MS));
	EXPECT_EQ(0, pool_counter("runs_built"));
	EXPECT_EQ(0, pool_counter("runs_build_failed"));
}

/* While a node hands blocks out (a VM start), it builds no run: the
 * migration a run may need would compete with the start. A block taken
 * every TAKE_EVERY_MS for TAKE_FOR_MS with run_quiet_ms=QUIET_MS, the pool
 * a GiB short all along: no run until the takes stop, then one. */
TEST_F_TIMEOUT(runs, no_run_while_blocks_are_taken, 600)
{
	double start, last_take = 0;
	size_t off = 0;
	int fd;

	zeropin_load("run_build=1 run_quiet_ms=3000 pool_mib=0");	/* QUIET_MS */
	zfs_mount(ZFS_MNT, "size=512M");
	fd = zfs_create(ZFS_MNT "/burst", 512ul << 20);
	start = now_ms();
	while (now_ms() - start < TAKE_FOR_MS) {
		ASSERT_EQ(0, fallocate(fd, 0, off, SZ_2M));
		last_take = now_ms();
		off += SZ_2M;	/* 60 blocks of the file's 256 */
		if (off == SZ_2M)	/* the burst has begun: now a GiB short */
			pool_write("target_mib", 1024);
		usleep(TAKE_EVERY_MS * 1000);
	}
	EXPECT_EQ(0, pool_counter("runs_built"));
	EXPECT_EQ(0, pool_counter("runs_build_failed"));
	ASSERT_EQ(0, pool_counter_wait("runs_built", 1, RUNS_SETTLE_MS));
	TH_LOG("first run %.0f ms after the last take (run_quiet_ms %d)", now_ms() - last_take, QUIET_MS);
	close(fd);
}

/*
 * A node kept busy two GiBs short (a VM start took them, its guest faults
 * RAM in without a quiet period: never the pause a run waits for) fills
 * with loose blocks rather than leave every fault to zero its own block,
 * but one GiB per five quiet periods, keeping room for runs: none in the
 * first three periods, then at most one GiB in the three after the first
 * loose block, and no run built while the takes go on. Prints
 *   # busy: the first loose block N ms after the start, M MiB 3 periods on
 */
TEST_F_TIMEOUT(runs, busy_node_fills_a_gib_at_a_time, 600)
{
	double start, last, gap = 0, first = 0;
	long early = -1, later = -1, built, held;
	size_t off = (size_t)BUSY_POOL_MIB << 20;
	int fd;

	/* filled with loose blocks, runs on only then: no build tried, so no
	 * failed build's back-off (loose blocks then fill all) bears on it */
	zeropin_load("run_build=0 run_quiet_ms=4000 pool_mib=2048");	/* BUSY_ */
	ASSERT_EQ(1, pool_counter("runs_supported"));
	ASSERT_EQ(0, pool_wait("zero_mib", BUSY_POOL_MIB, RUNS_SETTLE_MS));
	ASSERT_EQ(0, __zeropin_param_write("run_build", 1));
	zfs_mount(ZFS_MNT, "size=2560M");
	fd = zfs_create(ZFS_MNT "/busy", 2560ul << 20);
	ASSERT_EQ(0, pool_read("target_mib") % 1024);	/* no part below a GiB to refill */
	start = now_ms();
	ASSERT_EQ(0, fallocate(fd, 0, 0, off));	/* the start: two GiBs short */
	last = now_ms();
	built = pool_counter("runs_built");	/* none: runs went on with the pool full */
	while (now_ms() - start < BUSY_FOR_MS && later < 0 && off < (2560ul << 20)) {
		usleep(BUSY_EVERY_MS * 1000);
		ASSERT_EQ(0, fallocate(fd, 0, off, SZ_2M));
		off += SZ_2M;
		if (now_ms() - last > gap)
			gap = now_ms() - last;
		last = now_ms();
		held = pool_held_mib();
		if (early < 0 && last - start >= 3 * BUSY_QUIET_MS)
			early = held;
		if (!first && held)
			first = last;
		if (first && last - first >= 3 * BUSY_QUIET_MS)
			later = held;
	}
	TH_LOG("longest gap between takes %.0f ms (a run waits for %d)", gap, BUSY_QUIET_MS);
	if (gap >= BUSY_QUIET_MS)
		SKIP(goto out, "a take took a quiet period (%.0f ms): the node was not kept busy", gap);
	EXPECT_EQ(0, early) TH_LOG("loose blocks within three quiet periods of the start");
	ASSERT_LT(0, first) TH_LOG("no loose block in %d ms of takes", BUSY_FOR_MS);
	EXPECT_LE(0, later);
	EXPECT_GE(1024, later) TH_LOG("more than a GiB within three quiet periods of the first loose block");
	EXPECT_EQ(built, pool_counter("runs_built"));
	printf("# busy: the first loose block %.0f ms after the start, %ld MiB 3 periods on\n",
	       first - start, later);
out:
	close(fd);
}

/* The shrinker takes the pool back (drop_caches runs every shrinker) and
 * holds refills off for its back-off; then, with nothing handed out, the
 * kthread wakes by itself and fills the pool again: with a run where the
 * shrinker took the whole GiB, with loose blocks for a shortfall below a
 * GiB (the kernel's drop_caches loop may stop short of everything). */
TEST_F_TIMEOUT(runs, pool_comes_back_after_the_shrinker, 600)
{
	long left;

	zeropin_load("run_build=1 pool_mib=1024");
	ASSERT_EQ(0, pool_wait("runs_1g", 1, RUNS_SETTLE_MS));
	ASSERT_EQ(0, __write_file("/proc/sys/vm/drop_caches", "2"));
	left = pool_read("zero_mib");
	EXPECT_LT(0, pool_counter("shrunk"));
	EXPECT_GT(1024, left);
	EXPECT_EQ(0, pool_read("runs_1g"));
	ASSERT_EQ(0, pool_wait("zero_mib", 1024, RUNS_SETTLE_MS))
		TH_LOG("pool %ld MiB of 1024 (%ld left by the shrinker)", pool_read("zero_mib"), left);
	/* the whole GiB taken: a run was tried again (one GiB just freed
	 * may still be busy, and loose blocks then fill the pool) */
	if (!left) {
		/* the run is counted a moment after its last block is zero
		 * (6.1's make check read 1, and 2 a line later) */
		pool_counter_wait("runs_built", 2, 10000);
		EXPECT_LE(2, pool_counter("runs_built") + pool_counter("runs_build_failed"));
	}
	TH_LOG("shrinker left %ld MiB; pool back, %ld run(s) built in all, %ld tries failed", left,
	       pool_counter("runs_built"), pool_counter("runs_build_failed"));
}

FIXTURE(runs_dma) {
	struct edu edu;
	int container;
	int fd;
	uint8_t *ram;		/* VM_SIZE of a zeropinfs file, never touched */
};

FIXTURE_SETUP(runs_dma)
{
	if (!getenv("ZP_RUNS_BOOT"))
		SKIP(return, "runs in a lab boot of its own (ZP_RUNS_BOOT=1, tests/run-selftests): four free GiBs in ZONE_NORMAL need 10 GiB and no hugetlb reserve");
	zeropin_reset();
	zeropin_load("run_build=1 pool_mib=4096");
	vfio_driver_use(DRIVER_ZEROPIN);
	ASSERT_EQ(0, pool_wait("runs_1g", VM_SIZE / SZ_1G, RUNS_SETTLE_MS));
	ASSERT_EQ(0, pool_wait("zero_mib", VM_SIZE >> 20, RUNS_SETTLE_MS));
	zfs_mount(ZFS_MNT, "size=4096M");
	self->fd = zfs_create(ZFS_MNT "/ram", VM_SIZE);
	self->ram = map_file(self->fd, VM_SIZE, MAP_SHARED);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
}

FIXTURE_TEARDOWN(runs_dma)
{
	if (!getenv("ZP_RUNS_BOOT"))
		return;
	edu_close(&self->edu);
	close(self->container);
	if (self->ram)
		munmap(self->ram, VM_SIZE);
	close(self->fd);
	zeropin_reset();
}

/* The GiB at p is one run: 1 GiB-aligned, its blocks at consecutive pfns
 * (the first, second, middle and last looked at). Faults them in (read). */
static void expect_one_run(struct __test_metadata *_metadata, const uint8_t *p)
{
	static const unsigned long ks[] = { 1, 255, 511 };
	uint64_t base;
	size_t i;

	touch_range((void *)p, 4096, false);
	base = pfn_of(p);
	ASSERT_NE(0, base);
	EXPECT_EQ(0, base % PAGES_1G);
	for (i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		touch_range((void *)(p + ks[i] * SZ_2M), 4096, false);
		EXPECT_EQ(base + ks[i] * 512, pfn_of(p + ks[i] * SZ_2M)) TH_LOG("block %lu", ks[i]);
	}
}

/* A fault takes one block, not a run: memory that is not pinned for DMA
 * may stay sparse (virtio-mem, a balloon), and a store commits 2 MiB, not
 * a GiB. The runs stay whole for the pin. */
TEST_F_TIMEOUT(runs_dma, fault_takes_one_block, 600)
{
	long handed = pool_counter("runs_handed_out"), broken = pool_counter("runs_broken");
	struct statvfs before, after;

	ASSERT_EQ(0, statvfs(ZFS_MNT, &before));
	self->ram[SZ_1G + 4096] = 1;
	ASSERT_EQ(0, statvfs(ZFS_MNT, &after));
	EXPECT_EQ(handed, pool_counter("runs_handed_out"));
	EXPECT_EQ(SZ_2M, (before.f_bfree - after.f_bfree) * before.f_bsize);
	/* the pool held runs only: the block came out of one */
	EXPECT_EQ(broken + 1, pool_counter("runs_broken"));
	EXPECT_EQ(VM_SIZE / SZ_1G - 1, pool_read("runs_1g"));
}

/* A pin of never-touched memory takes whole runs: 2 GiB at a 1 GiB-aligned
 * IOVA is two 1 GiB IOMMU entries and nothing smaller, and the device
 * reaches the memory the CPU sees. */
TEST_F_TIMEOUT(runs_dma, maps_runs_with_1g_entries, 600)
{
	long e1g = iommu_counter("entries_1g"), e2m = iommu_counter("entries_2m");
	long pinned = iommu_counter("pages_pinned"), handed = pool_counter("runs_handed_out");
	struct statvfs before, after;
	uint64_t iova = 4ul << 30;

	ASSERT_EQ(0, statvfs(ZFS_MNT, &before));
	vfio_map(self->container, self->ram, iova, 2 * SZ_1G);
	ASSERT_EQ(0, statvfs(ZFS_MNT, &after));
	/* the mount is charged what was filed, block by block: 2 GiB */
	EXPECT_EQ(2 * SZ_1G, (before.f_bfree - after.f_bfree) * before.f_bsize);
	EXPECT_EQ(e1g + 2, iommu_counter("entries_1g"));
	EXPECT_EQ(e2m, iommu_counter("entries_2m"));
	EXPECT_EQ(pinned + (long)(2 * PAGES_1G), iommu_counter("pages_pinned"));
	EXPECT_EQ(handed + 2, pool_counter("runs_handed_out"));
	EXPECT_EQ(0, smaps_kb(self->ram, "Rss"));	/* nothing faulted in */
	EXPECT_TRUE(all_bytes(self->ram + SZ_1G, 0, SZ_1G));
	edu_verify(&self->edu, self->ram, iova, 2 * SZ_1G);
	expect_one_run(_metadata, self->ram);
	expect_one_run(_metadata, self->ram + SZ_1G);
	vfio_unmap(self->container, iova, 2 * SZ_1G);
}

/* QEMU's q35 layout of a 4 GiB VM (RAM below 4 GiB split at 2 GiB, the
 * legacy areas below 1 MiB left out; the rest above 4 GiB): three 1 GiB
 * entries, [1G,2G) and [4G,6G); every range reaches the device. */
TEST_F_TIMEOUT(runs_dma, qemu_q35_layout, 600)
{
	long e1g = iommu_counter("entries_1g");
	static const struct { uint64_t off, iova, len; } r[] = {
		{ 0, 0, 640ul << 10 },
		{ 1ul << 20, 1ul << 20, 2 * SZ_1G - (1ul << 20) },
		{ 2 * SZ_1G, 4 * SZ_1G, 2 * SZ_1G },
	};
	size_t i;

	for (i = 0; i < 3; i++)
		vfio_map(self->container, self->ram + r[i].off, r[i].iova, r[i].len);
	EXPECT_EQ(e1g + 3, iommu_counter("entries_1g"));
	TH_LOG("q35 4 GiB: %ld 1 GiB entries, %ld runs handed out", iommu_counter("entries_1g") - e1g,
	       pool_counter("runs_handed_out"));
	for (i = 0; i < 3; i++)
		edu_verify(&self->edu, self->ram + r[i].off, r[i].iova, r[i].len);
	for (i = 0; i < 3; i++)
		vfio_unmap(self->container, r[i].iova, r[i].len);
}

/* The memcg the VMM (this test) runs in, to read what a pin charged. */
#define RUNS_MEMCG	"zfs-runs"
/* Besides the blocks, a pin charges its memcg kernel memory (the pin's
 * run records, xarray nodes): far less than this. */
#define MEMCG_SLACK	(8ul << 20)

/* Bytes of the mount in use (statfs), or -errno. */
static long mount_used(void)
{
	struct statvfs st;

	if (statvfs(ZFS_MNT, &st))
		return -errno;
	return (long)((st.f_blocks - st.f_bfree) * st.f_bsize);
}

/*
 * A pin commits what it asks for, no more (issue 40): 2 MiB mapped for DMA
 * into a never-touched GiB (virtio-mem plugging a block, a guest's vIOMMU
 * mapping a buffer) files one block, 2 MiB charged to the mount and to
 * the VMM's memcg, and takes no run; half a GiB from a GiB's middle files
 * 256 blocks. Only a pin of a whole GiB takes its run (the other tests).
 * Every range reaches the device.
 */
TEST_F_TIMEOUT(runs_dma, pin_of_part_of_a_gib_takes_no_run, 600)
{
	long handed = pool_counter("runs_handed_out"), pinned = iommu_counter("pages_pinned");
	long used, cg, ret;
	uint64_t iova = SZ_1G;

	ret = __memcg_enter(RUNS_MEMCG);
	if (ret)
		SKIP(return, "no memory cgroup to read the charge from: %s", strerror((int)-ret));
	used = mount_used();
	ASSERT_LE(0, used);
	cg = memcg_current(RUNS_MEMCG);
	ASSERT_LE(0, cg);
	vfio_map(self->container, self->ram + SZ_1G, iova, SZ_2M);
	EXPECT_EQ(SZ_2M, mount_used() - used);
	cg = memcg_current(RUNS_MEMCG) - cg;
	EXPECT_LE(SZ_2M, cg);
	EXPECT_GT(SZ_2M + MEMCG_SLACK, cg) TH_LOG("the memcg was charged %ld MiB", cg >> 20);
	EXPECT_EQ(handed, pool_counter("runs_handed_out"));
	EXPECT_EQ(pinned + (long)(SZ_2M / 4096), iommu_counter("pages_pinned"));
	edu_verify(&self->edu, self->ram + SZ_1G, iova, SZ_2M);
	vfio_unmap(self->container, iova, SZ_2M);

	used = mount_used();
	iova = 2 * SZ_1G + SZ_1G / 2;
	vfio_map(self->container, self->ram + iova, iova, SZ_1G / 2);
	EXPECT_EQ(SZ_1G / 2, mount_used() - used);
	EXPECT_EQ(handed, pool_counter("runs_handed_out"));
	edu_verify(&self->edu, self->ram + iova, iova, SZ_1G / 2);
	vfio_unmap(self->container, iova, SZ_1G / 2);
	EXPECT_EQ(pinned, iommu_counter("pages_pinned"));
	EXPECT_EQ(0, __memcg_leave(RUNS_MEMCG));
}

/* A mount of a GiB less a block, for the full-mount test. */
#define SMALL_MNT	"/mnt/zeropinfs-small"
#define SMALL_OPTS	"size=1022M"
/* Loose blocks beside the runs for the blocks a refused pin takes. */
#define LOOSE_MIB	1024

/* What a refused pin of a GiB must leave as it was (counters read before). */
struct runs_whole {
	long pinned;	/* iommu pages_pinned */
	long handed;	/* runs_handed_out */
	long broken;	/* runs_broken */
	long unfit;	/* runs_unfit_mount or runs_unfit_memcg, as named */
	const char *unfit_name;
};

/* Loose blocks beside the fixture's runs, so a pin that is refused a run
 * takes those and no run need break; then the counters read. */
static void runs_whole_before(struct __test_metadata *_metadata, struct runs_whole *w,
			      const char *unfit_name)
{
	ASSERT_EQ(0, __zeropin_param_write("run_build", 0));
	pool_write("target_mib", (VM_SIZE >> 20) + LOOSE_MIB);
	ASSERT_EQ(0, pool_wait("zero_mib", (VM_SIZE >> 20) + LOOSE_MIB, RUNS_SETTLE_MS));
	w->pinned = iommu_counter("pages_pinned");
	w->handed = pool_counter("runs_handed_out");
	w->broken = pool_counter("runs_broken");
	w->unfit_name = unfit_name;
	w->unfit = pool_counter(unfit_name);
}

/* The pin failed, pinned nothing, was counted unfit once, and every run
 * is still whole in the pool. */
static void runs_whole_after(struct __test_metadata *_metadata, const struct runs_whole *w,
			     int ret)
{
	EXPECT_NE(0, ret);
	EXPECT_EQ(w->pinned, iommu_counter("pages_pinned"));
	EXPECT_EQ(w->unfit + 1, pool_counter(w->unfit_name));
	EXPECT_EQ(w->handed, pool_counter("runs_handed_out"));
	EXPECT_EQ(w->broken, pool_counter("runs_broken"));
	EXPECT_EQ(VM_SIZE / SZ_1G, pool_read("runs_1g"));
}

/*
 * A pin of a whole GiB into a mount that cannot hold it takes no run
 * (runs_unfit_mount): it takes loose blocks until the mount is full, fails as
 * type1 over the same file would, pins nothing, and every run stays
 * whole in the pool. (Taking the run first would hand it out and break it
 * block by block at -ENOSPC: a GiB that may have cost a migration.)
 */
TEST_F_TIMEOUT(runs_dma, nearly_full_mount_keeps_runs_whole, 600)
{
	struct runs_whole w;
	uint8_t *p;
	int fd, ret;

	zfs_mount(SMALL_MNT, SMALL_OPTS);
	fd = zfs_create(SMALL_MNT "/ram", SZ_1G);
	p = map_file(fd, SZ_1G, MAP_SHARED);
	runs_whole_before(_metadata, &w, "runs_unfit_mount");

	ret = __vfio_map(self->container, p, 8 * SZ_1G, SZ_1G,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	TH_LOG("MAP_DMA of a GiB into a mount of 1022 MiB: %s", strerror(-ret));
	runs_whole_after(_metadata, &w, ret);
	munmap(p, SZ_1G);
	close(fd);
	zfs_umount(SMALL_MNT);
}

/* The memcg of the full-memcg test, and the room its limit leaves: half
 * a GiB of blocks, and a MiB over for what the pin's own kernel memory
 * takes (a limit met to the page would have the next accounted
 * allocation call the memcg's OOM killer on this process). */
#define FULL_MEMCG	"zfs-runs-full"
#define MEMCG_ROOM	(SZ_1G / 2)
#define MEMCG_SPARE	(1ul << 20)

/*
 * The same for a memcg that cannot hold the GiB (runs_unfit_memcg): the
 * pin takes loose blocks until the memcg's limit refuses one (a 2 MiB
 * charge fails without the memcg's OOM killer: costly order), fails,
 * pins nothing, and every run stays whole in the pool. The memcg was
 * charged up to its limit (the pin got that far) and killed nothing.
 */
TEST_F_TIMEOUT(runs_dma, nearly_full_memcg_keeps_runs_whole, 600)
{
	uint64_t iova = 8 * SZ_1G;	/* clear of x86's MSI window below 4 GiB */
	struct runs_whole w;
	long cg, ooms;
	int ret;

	runs_whole_before(_metadata, &w, "runs_unfit_memcg");
	ret = __memcg_enter(FULL_MEMCG);
	if (ret)
		SKIP(return, "no memory cgroup to limit: %s", strerror(-ret));
	cg = memcg_current(FULL_MEMCG);
	ooms = memcg_event(FULL_MEMCG, "oom_kill");
	ASSERT_LE(0, cg);
	ASSERT_LE(0, ooms);
	ASSERT_EQ(0, __memcg_set_max(FULL_MEMCG, cg + MEMCG_ROOM + MEMCG_SPARE));

	ret = __vfio_map(self->container, self->ram + 3 * SZ_1G, iova, SZ_1G,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	/* the limit lifted before anything else is allocated */
	EXPECT_EQ(0, __memcg_set_max(FULL_MEMCG, -1));
	TH_LOG("MAP_DMA of a GiB in a memcg with %lu MiB of room: %s", MEMCG_ROOM >> 20,
	       strerror(-ret));
	runs_whole_after(_metadata, &w, ret);
	EXPECT_LE(MEMCG_ROOM - MEMCG_SLACK, memcg_current(FULL_MEMCG) - cg)
		TH_LOG("the pin charged the memcg %ld MiB", (memcg_current(FULL_MEMCG) - cg) >> 20);
	EXPECT_EQ(ooms, memcg_event(FULL_MEMCG, "oom_kill"));
	EXPECT_EQ(0, __memcg_leave(FULL_MEMCG));
}

/* RLIMIT_MEMLOCK for the failed pin: it stops halfway into its GiB. */
#define MEMLOCK_HALF	(SZ_1G / 2)
/* How long a block a mapping held may stay parked once it lets go (the
 * pool looks every second, park.c). */
#define PARK_WAIT_MS	5000

/*
 * How many blocks of pfns[n] are still allocated (pfn_block_held()) once
 * no block is parked (a block a DMA mapping held when its file let go is
 * freed a moment after the mapping lets go, park.c); -errno when one
 * cannot be read.
 */
static long blocks_held_once_unparked(const unsigned long *pfns, long n)
{
	long held = 0, i;
	int ret;

	pool_counter_wait_at_most("parked", 0, PARK_WAIT_MS);
	for (i = 0; i < n; i++) {
		ret = pfn_block_held(pfns[i]);
		if (ret < 0)
			return ret;
		held += ret;
	}
	return held;
}

/*
 * The tail of the failed-pin tests: the pool lets go of what it holds and
 * takes nothing more, the file of everything; then how many of pfns[n]
 * (the pool's blocks before the pin) are still allocated.
 */
static long runs_blocks_held_after(struct __test_metadata *_metadata,
				   FIXTURE_DATA(runs_dma) *self, const unsigned long *pfns, long n)
{
	long held;

	EXPECT_EQ(0, __zeropin_param_write("run_build", 0));
	pool_write("target_mib", 0);
	EXPECT_EQ(0, pool_wait_at_most("zero_mib", 0, RUNS_SETTLE_MS));
	EXPECT_EQ(0, pool_wait_at_most("dirty_mib", 0, RUNS_SETTLE_MS));
	munmap(self->ram, VM_SIZE);
	self->ram = NULL;
	EXPECT_EQ(0, ftruncate(self->fd, 0));
	held = blocks_held_once_unparked(pfns, n);
	EXPECT_EQ(0, pool_counter("parked"));
	EXPECT_LE(0, held);
	return held;
}

/*
 * A pin of a whole GiB that RLIMIT_MEMLOCK will stop halfway (half a GiB,
 * CAP_IPC_LOCK dropped: -ENOMEM) takes no run: a run commits the whole GiB
 * to the mount and the memcg at the pin's first batch, where the pin may
 * lock only half. It takes loose blocks as far as it gets, pins nothing,
 * leaves every run whole in the pool and keeps no block: once the file
 * lets go, none is parked and every block of the pool's runs is back in
 * the page allocator.
 */
TEST_F_TIMEOUT(runs_dma, memlock_stopped_pin_takes_no_run, 600)
{
	long handed = pool_counter("runs_handed_out"), used = mount_used(), held, nblocks;
	unsigned long *pfns = NULL;
	int ret;

	nblocks = pool_block_pfns(NULL, &pfns);
	ASSERT_NE(NULL, pfns);
	ASSERT_EQ(VM_SIZE / SZ_2M, nblocks);
	ASSERT_LE(0, used);
	ASSERT_EQ(0, __set_memlock(MEMLOCK_HALF));
	ASSERT_EQ(0, __drop_ipc_lock());
	ret = __vfio_map(self->container, self->ram, 4 * SZ_1G, SZ_1G,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	EXPECT_EQ(-ENOMEM, ret) TH_LOG("MAP_DMA over RLIMIT_MEMLOCK: %s", strerror(-ret));
	/* the pool holds runs only: the blocks it took came out of one
	 * (runs_broken), none was handed out whole */
	EXPECT_EQ(handed, pool_counter("runs_handed_out"));
	EXPECT_GE(MEMLOCK_HALF, mount_used() - used)
		TH_LOG("the mount was charged %ld MiB", (mount_used() - used) >> 20);
	EXPECT_EQ(0, iommu_counter("pages_pinned"));
	held = runs_blocks_held_after(_metadata, self, pfns, nblocks);
	EXPECT_EQ(0, held) TH_LOG("%ld of the runs' %ld blocks still allocated", held, nblocks);
	free(pfns);
}

/*
 * A pin of the whole file (four GiBs) killed (SIGKILL) once it filed the
 * first GiB's run, while it walks the runs' blocks 64 MiB a batch: the
 * blocks of the run it is in that it has not reached, filed and held by
 * the walk (struct zp_zfs_hand), are let go with it, so once the file lets
 * go of everything none is parked and every block of the pool's runs is
 * back in the page allocator. A GiB takes milliseconds, so the kill lands
 * in one of the later three; whether it lands before the walk ends is up
 * to the lab's vCPUs: printed.
 */
TEST_F_TIMEOUT(runs_dma, killed_whole_gib_pin_keeps_no_block, 600)
{
	long held, nblocks, pinned;
	unsigned long *pfns = NULL;
	unsigned char vec = 0;
	int status = 0;
	pid_t pid;

	nblocks = pool_block_pfns(NULL, &pfns);
	ASSERT_NE(NULL, pfns);
	ASSERT_EQ(VM_SIZE / SZ_2M, nblocks);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(-__vfio_map(self->container, self->ram, 4 * SZ_1G, VM_SIZE,
				  VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE));
	/* a run is filed whole at the first batch of its GiB */
	while (!mincore(self->ram + SZ_1G - SZ_2M, 4096, &vec) && !(vec & 1) &&
	       waitpid(pid, &status, WNOHANG) == 0)
		;
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	pinned = iommu_counter("pages_pinned");
	printf("# killed pin: %s (%ld pages pinned)\n",
	       pinned ? "done before the kill" : "killed mid-walk", pinned);
	if (pinned)
		vfio_unmap(self->container, 4 * SZ_1G, VM_SIZE);
	held = runs_blocks_held_after(_metadata, self, pfns, nblocks);
	EXPECT_EQ(0, held) TH_LOG("%ld of the runs' %ld blocks still allocated", held, nblocks);
	free(pfns);
}

/* The block the puncher takes out of the file's first GiB while the pin
 * walks it: far enough in that the walk (64 MiB batches) has not reached
 * it when the first batch ends. */
#define PUNCH_BLOCK	500

struct puncher {
	int fd;
	uint8_t *ram;		/* the file's mapping (for mincore()) */
	volatile int stop;
	int punched;		/* 0, or fallocate()'s result + 1 */
};

/*
 * Once PUNCH_BLOCK is in the page cache (the pin filed its GiB's run),
 * punch it out, once: the walk, 64 MiB a batch, is then still far from
 * it. Gives up when told to stop.
 */
static void *punch_blocks(void *arg)
{
	struct puncher *pu = arg;
	unsigned char vec = 0;

	while (!pu->stop) {
		if (mincore(pu->ram + PUNCH_BLOCK * SZ_2M, 4096, &vec) || !(vec & 1))
			continue;
		pu->punched = 1 + fallocate(pu->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					    (off_t)PUNCH_BLOCK * SZ_2M, SZ_2M);
		break;
	}
	return NULL;
}

/* A hole is punched in the first GiB of a never-touched file while a pin
 * of the whole file walks it. The walk keeps the run it filed across its
 * batches (struct zp_zfs_hand; the mmap lock and invalidate_lock dropped
 * between them; the punch, waiting for invalidate_lock, gets it as a batch
 * ends): a punched block it has not reached must be looked up again
 * (runs_hand_stale), not pinned from the hand, so the device reaches the
 * block the file holds there now. Whether the punch lands before the walk
 * reaches the block is up to the lab's vCPUs (it did not, twice, with two
 * labs sharing the host): the count is printed. Nothing is kept: once the
 * file lets go of everything, every block of the pool's four runs is back
 * in the page allocator, and the kernel warned of nothing. */
TEST_F_TIMEOUT(runs_dma, punched_while_pinning_keeps_no_block, 600)
{
	static const char *const bad[] = { "BUG:", "WARNING:", "Bad page" };
	struct puncher pu = { .fd = self->fd, .ram = self->ram };
	long stale = pool_counter("runs_hand_stale");
	unsigned long *pfns = NULL;
	long nblocks = pool_block_pfns(NULL, &pfns), held;
	uint64_t iova = 4ul << 30;
	int mark = kmsg_mark(), ret;
	pthread_t t;

	ASSERT_NE(NULL, pfns);
	ASSERT_EQ(VM_SIZE / SZ_2M, nblocks);
	ASSERT_LE(0, mark);
	ASSERT_EQ(0, pthread_create(&t, NULL, punch_blocks, &pu));
	ret = __vfio_map(self->container, self->ram, iova, VM_SIZE,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	pu.stop = 1;
	pthread_join(t, NULL);
	stale = pool_counter("runs_hand_stale") - stale;
	TH_LOG("map: %s; punch: %s; blocks the walk found gone: %ld", strerror(-ret),
	       pu.punched ? (pu.punched == 1 ? "done" : "failed") : "never", stale);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(1, pu.punched);
	/* the walk found the block gone: the device reaches the block the
	 * file holds there now. (A punch that only landed after the walk
	 * had pinned the block parts them, as under type1.) */
	if (stale)
		edu_verify(&self->edu, self->ram + PUNCH_BLOCK * SZ_2M,
			   iova + PUNCH_BLOCK * SZ_2M, SZ_2M);

	/* the pool lets go of what it holds and takes nothing more */
	ASSERT_EQ(0, __zeropin_param_write("run_build", 0));
	pool_write("target_mib", 0);
	ASSERT_EQ(0, pool_wait_at_most("zero_mib", 0, RUNS_SETTLE_MS));
	ASSERT_EQ(0, pool_wait_at_most("dirty_mib", 0, RUNS_SETTLE_MS));
	vfio_unmap(self->container, iova, VM_SIZE);
	EXPECT_EQ(0, iommu_counter("pages_pinned"));
	munmap(self->ram, VM_SIZE);
	self->ram = NULL;
	ASSERT_EQ(0, ftruncate(self->fd, 0));
	/* a block punched after the walk pinned it left the file mapped for
	 * DMA: parked until the unmap let go of it, then freed (park.c) */
	held = blocks_held_once_unparked(pfns, nblocks);
	EXPECT_EQ(0, pool_counter("parked"));
	ASSERT_LE(0, held);
	EXPECT_EQ(0, held) TH_LOG("%ld of the runs' %ld blocks still allocated", held, nblocks);
	EXPECT_EQ(0, kmsg_count_since(mark, bad, 3));
	close(mark);
	free(pfns);
}

/* A run pinned for DMA whose file lets go of it (truncate) is not handed
 * out again while the device may still reach it: a file faulted in after
 * (faults take loose blocks first, runs last, so a GiB wrongly back in
 * the pool would be the first taken) gets none of its pages and reads
 * zero, and the device still reaches the orphaned GiB. The unmap lets it
 * go. */
TEST_F_TIMEOUT(runs_dma, truncated_run_is_not_reused_while_pinned, 600)
{
	long e1g = iommu_counter("entries_1g"), returned = pool_counter("returned");
	long pinned = iommu_counter("pages_pinned");
	uint8_t chunk[EDU_DMA_MAX], *q;
	uint64_t base, pfn, iova = SZ_1G, q_iova = 8 * SZ_1G;
	size_t off;
	int fd;

	vfio_map(self->container, self->ram, iova, SZ_1G);
	ASSERT_EQ(e1g + 1, iommu_counter("entries_1g"));
	touch_range(self->ram, 4096, false);
	base = pfn_of(self->ram);
	ASSERT_NE(0, base);
	ASSERT_EQ(0, base % PAGES_1G);
	munmap(self->ram, VM_SIZE);
	self->ram = NULL;

	/* the file lets go of the run's 512 blocks; the IOMMU still holds
	 * them, and the pool has none of them */
	ASSERT_EQ(0, ftruncate(self->fd, 0));
	EXPECT_EQ(returned + (long)(SZ_1G / SZ_2M), pool_counter("returned"));
	EXPECT_EQ(pinned + (long)PAGES_1G, iommu_counter("pages_pinned"));
	EXPECT_EQ(0, pool_blocks_in(base, PAGES_1G));

	fd = zfs_create(ZFS_MNT "/after", AFTER_SIZE);
	q = map_file(fd, AFTER_SIZE, MAP_SHARED);
	ASSERT_TRUE(all_bytes(q, 0, AFTER_SIZE));
	for (off = 0; off < AFTER_SIZE; off += SZ_2M) {
		pfn = pfn_of(q + off);
		ASSERT_NE(0, pfn);
		ASSERT_FALSE(pfn >= base && pfn < base + PAGES_1G)
			TH_LOG("block at %zu MiB is the pinned run's", off >> 20);
	}

	/* the pool refilled meanwhile (a run taken is a GiB short): still
	 * none of the pinned GiB */
	EXPECT_EQ(0, pool_wait("zero_mib", VM_SIZE >> 20, RUNS_SETTLE_MS))
		TH_LOG("pool %ld MiB of %lu", pool_read("zero_mib"), VM_SIZE >> 20);
	EXPECT_EQ(0, pool_blocks_in(base, PAGES_1G));

	/* the device still reaches the orphaned GiB: q -> device -> orphan,
	 * q cleared, orphan -> device -> q */
	memset(chunk, PATTERN, sizeof(chunk));
	memcpy(q, chunk, sizeof(chunk));
	vfio_map(self->container, q, q_iova, SZ_2M);
	ASSERT_EQ(0, __edu_dma(&self->edu, q_iova, sizeof(chunk), false));
	ASSERT_EQ(0, __edu_dma(&self->edu, iova + SZ_2M, sizeof(chunk), true));
	memset(q, 0, sizeof(chunk));
	ASSERT_EQ(0, __edu_dma(&self->edu, iova + SZ_2M, sizeof(chunk), false));
	ASSERT_EQ(0, __edu_dma(&self->edu, q_iova, sizeof(chunk), true));
	EXPECT_EQ(0, memcmp(q, chunk, sizeof(chunk)));
	vfio_unmap(self->container, q_iova, SZ_2M);
	vfio_unmap(self->container, iova, SZ_1G);
	EXPECT_EQ(pinned, iommu_counter("pages_pinned"));
	munmap(q, AFTER_SIZE);
	close(fd);
}

/*
 * A host with isolated CPUs (a lab boot of its own with isolcpus=1,
 * ZP_ISOLATED_BOOT=1, tests/run-selftests) builds no run, run_build at its
 * default: a build's LRU drain waits for work on every CPU, where an
 * isolated one runs a latency-bound vCPU. The pool fills with loose blocks
 * all the same, and the kernel log says why, once.
 */
#define ISOLATED_POOL_MIB	1024

FIXTURE(runs_isolated) {
	int unused;
};

FIXTURE_SETUP(runs_isolated)
{
	if (!getenv("ZP_ISOLATED_BOOT"))
		SKIP(return, "runs in a lab boot of its own with isolcpus=1 (ZP_ISOLATED_BOOT=1, tests/run-selftests)");
	zeropin_reset();
}

FIXTURE_TEARDOWN(runs_isolated)
{
	zeropin_reset();
}

TEST_F_TIMEOUT(runs_isolated, no_run_while_cpus_are_isolated, 600)
{
	static const char *const why[] = { "no 1 GiB runs: some CPUs are isolated" };
	int mark = kmsg_mark();

	ASSERT_LE(0, mark);
	zeropin_load("pool_mib=1024");	/* ISOLATED_POOL_MIB: a GiB short, a run wanted */
	ASSERT_EQ(1, pool_counter("runs_supported"));
	ASSERT_EQ(1, zeropin_param_bool("run_build"));
	EXPECT_EQ(1, pool_counter("runs_cpus_isolated"));
	ASSERT_EQ(0, pool_wait("zero_mib", ISOLATED_POOL_MIB, RUNS_SETTLE_MS))
		TH_LOG("pool %ld MiB of %d", pool_read("zero_mib"), ISOLATED_POOL_MIB);
	EXPECT_EQ(0, pool_counter("runs_built"));
	EXPECT_EQ(0, pool_counter("runs_build_failed"));
	EXPECT_EQ(0, pool_read("runs_1g"));
	EXPECT_EQ(1, kmsg_count_since(mark, why, 1));
	close(mark);
}

/*
 * The zeroing kthread stays off the isolated CPU by default (it read 0-1,
 * its node's CPUs, before the default left isolated CPUs out); a list the
 * admin writes is taken as written.
 */
TEST_F(runs_isolated, kthread_keeps_off_isolated_cpus)
{
	char cpus[256] = "";

	zeropin_load("pool_mib=0");
	ASSERT_EQ(0, zeropin_kthread_cpus(0, cpus, sizeof(cpus), RUNS_SETTLE_MS));
	EXPECT_STREQ("0", cpus);
	ASSERT_EQ(0, __zeropin_param_set("zero_cpus", "1"));
	ASSERT_EQ(0, zeropin_kthread_cpus(0, cpus, sizeof(cpus), RUNS_SETTLE_MS));
	EXPECT_STREQ("1", cpus);
	ASSERT_EQ(0, __zeropin_param_set("zero_cpus", "\n"));
	ASSERT_EQ(0, zeropin_kthread_cpus(0, cpus, sizeof(cpus), RUNS_SETTLE_MS));
	EXPECT_STREQ("0", cpus);
}

/*
 * A hostile user's FUSE server that never answers a read: the page-cache
 * folios of its file stay locked (tests/lib/fuse_stall.h). Islands of
 * them through free memory, STALL_ISLAND_MIB after every STALL_EVERY_MIB
 * of anonymous memory, which then goes: a run build's migration would
 * wait for their locks without a bound, LRU caching off on every CPU
 * meanwhile. The build keeps off every GiB with one, and the pool fills
 * (the module before the fix blocked in the migration, the pool empty).
 */
#define STALL_EVERY_MIB		62
#define STALL_ISLAND_MIB	2
#define STALL_LEAVE_MIB		512	/* free memory the fill leaves */
#define STALL_MAX_CHUNKS	1024	/* 62 GiB of anonymous memory at most */
#define STALL_DIR		"/tmp/zp-stall"

FIXTURE(runs_stalled) {
	struct fuse_stall fs;
};

FIXTURE_SETUP(runs_stalled)
{
	int ret;

	memset(&self->fs, 0, sizeof(self->fs));
	if (!getenv("ZP_RUNS_BOOT"))
		SKIP(return, "runs in a lab boot of its own (ZP_RUNS_BOOT=1, tests/run-selftests): it fills most of the lab's memory");
	zeropin_reset();
	zeropin_load("pool_mib=0");
	ret = __fuse_stall_start(&self->fs, STALL_DIR, (uint64_t)STALL_MAX_CHUNKS * SZ_2M);
	if (ret == -ENODEV)
		SKIP(return, "no FUSE in this kernel");
	ASSERT_EQ(0, ret) TH_LOG("FUSE server at %s: %s", STALL_DIR, strerror(-ret));
}

FIXTURE_TEARDOWN(runs_stalled)
{
	fuse_stall_stop(&self->fs);
	zeropin_reset();
}

/* Anonymous memory with an island of locked folios after each chunk, down
 * to STALL_LEAVE_MIB free, then the anonymous memory given back; how many
 * islands, or -errno (what was made stays until the connection goes). */
static long stall_islands(struct fuse_stall *fs)
{
	static void *chunk[STALL_MAX_CHUNKS];
	const size_t len = (size_t)STALL_EVERY_MIB << 20;
	long n = 0, i, ret = 0;

	while (n < STALL_MAX_CHUNKS && free_memory_kb() > (STALL_LEAVE_MIB + STALL_EVERY_MIB) << 10) {
		chunk[n] = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (chunk[n] == MAP_FAILED) {
			ret = -errno;
			break;
		}
		/* 4 KiB pages, as the folios of the islands: from the same
		 * stream of the page allocator, so islands lie all through */
		if (madvise(chunk[n], len, MADV_NOHUGEPAGE) ||
		    madvise(chunk[n], len, MADV_POPULATE_WRITE)) {
			ret = -errno;
			munmap(chunk[n], len);
			break;
		}
		ret = __fuse_stall_lock(fs, (uint64_t)n * SZ_2M, (uint64_t)STALL_ISLAND_MIB << 20);
		n++;
		if (ret)
			break;
	}
	for (i = 0; i < n; i++)
		munmap(chunk[i], len);
	return ret ?: n;
}

TEST_F_TIMEOUT(runs_stalled, locked_folios_keep_the_build_off_their_gib, 900)
{
	long islands = stall_islands(&self->fs);

	ASSERT_LT(0, islands) TH_LOG("islands of locked folios: %s", strerror(-islands));
	TH_LOG("%ld islands of %d MiB asked for, %ld reads unanswered, %ld MiB free", islands,
	       STALL_ISLAND_MIB, self->fs.reads, free_memory_kb() >> 10);
	pool_write("target_mib", 1024);
	ASSERT_EQ(0, pool_wait("zero_mib", 1024, RUNS_SETTLE_MS))
		TH_LOG("pool %ld MiB of 1024: %ld runs built, %ld tries failed", pool_read("zero_mib"),
		       pool_counter("runs_built"), pool_counter("runs_build_failed"));
	TH_LOG("pool full: %ld runs built, %ld tries failed (%ld found no GiB)",
	       pool_counter("runs_built"), pool_counter("runs_build_failed"),
	       pool_counter("runs_build_no_gib"));
	/* every GiB the fill reached holds an island: none was picked, none
	 * picked and then given up, and the islands were really locked
	 */
	EXPECT_LT(0, self->fs.reads);
	EXPECT_EQ(0, pool_counter("runs_built"));
	EXPECT_EQ(0, pool_counter("runs_build_not_taken"));
	EXPECT_LE(1, pool_counter("runs_build_no_gib"));
}

/*
 * A fragmented host: a page pinned long-term in every 2 MiB of memory a
 * filler took (tests/lib/pressure.h: io_uring, as another tenant's VFIO
 * or RDMA pins), FRAG_LEAVE_MIB left whole. Free memory is plenty but no
 * GiB of it can become a run: the pool tries, fails, backs off
 * (POOL_RUN_BACKOFF) and fills with loose blocks meanwhile, and a VM's
 * RAM pinned for DMA maps in 2 MiB entries, every one reaching the
 * device. Last in this file: the teardown gives the memory back.
 */
#define FRAG_LEAVE_MIB	2048	/* whole blocks for the pool's GiB, and room */

FIXTURE(runs_fragmented) {
	struct edu edu;
	int container;
	struct fragmented frag;
};

FIXTURE_SETUP(runs_fragmented)
{
	int ret;

	memset(&self->frag, 0, sizeof(self->frag));
	self->container = -1;
	if (!getenv("ZP_RUNS_BOOT"))
		SKIP(return, "runs in a lab boot of its own (ZP_RUNS_BOOT=1, tests/run-selftests): it fragments most of the lab's memory");
	zeropin_reset();
	zeropin_load("run_build=0 pool_mib=0");
	vfio_driver_use(DRIVER_ZEROPIN);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
	ret = __fragment_pinned(&self->frag, FRAG_LEAVE_MIB);
	if (ret == -ENOSYS)
		SKIP(return, "no io_uring in this kernel to pin the fragmenter's pages");
	ASSERT_EQ(0, ret) TH_LOG("fragmenting memory and pinning it: %s", strerror(-ret));
	TH_LOG("fragmented: %ld pages pinned, one per 2 MiB of %zu MiB", self->frag.nkept,
	       self->frag.size >> 20);
}

FIXTURE_TEARDOWN(runs_fragmented)
{
	if (!getenv("ZP_RUNS_BOOT"))
		return;
	fragment_release(&self->frag);
	if (self->container >= 0) {
		edu_close(&self->edu);
		close(self->container);
	}
	zeropin_reset();
}

TEST_F_TIMEOUT(runs_fragmented, falls_back_to_blocks, 900)
{
	long e1g = iommu_counter("entries_1g"), e2m = iommu_counter("entries_2m");
	uint8_t *ram;
	int fd;

	ASSERT_EQ(0, __zeropin_param_write("run_build", 1));
	pool_write("target_mib", 1024);
	ASSERT_EQ(0, pool_counter_wait("runs_build_failed", 1, RUNS_SETTLE_MS));
	ASSERT_EQ(0, pool_wait("zero_mib", 1024, RUNS_SETTLE_MS))
		TH_LOG("pool %ld MiB of 1024", pool_read("zero_mib"));
	EXPECT_EQ(0, pool_counter("runs_built"));
	EXPECT_EQ(0, pool_read("runs_1g"));
	/* every GiB holds a long-term pin: none is even picked */
	EXPECT_LE(1, pool_counter("runs_build_no_gib"));
	EXPECT_EQ(pool_counter("runs_build_failed"),
		  pool_counter("runs_build_no_gib") + pool_counter("runs_build_not_taken"));
	TH_LOG("no run: %ld tries failed in %ld ms (%ld found no GiB, %ld could not take one); the pool filled with loose blocks",
	       pool_counter("runs_build_failed"), pool_counter("runs_build_ms"),
	       pool_counter("runs_build_no_gib"), pool_counter("runs_build_not_taken"));

	zfs_mount(ZFS_MNT, "size=1024M");
	fd = zfs_create(ZFS_MNT "/ram", SZ_1G);
	ram = map_file(fd, SZ_1G, MAP_SHARED);
	vfio_map(self->container, ram, SZ_1G, SZ_1G);
	EXPECT_EQ(e1g, iommu_counter("entries_1g"));
	EXPECT_EQ(e2m + (long)(SZ_1G / SZ_2M), iommu_counter("entries_2m"));
	edu_verify(&self->edu, ram, SZ_1G, SZ_1G);
	vfio_unmap(self->container, SZ_1G, SZ_1G);
	munmap(ram, SZ_1G);
	close(fd);
}

TEST_HARNESS_MAIN
