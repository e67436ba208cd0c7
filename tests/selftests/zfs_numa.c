// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_numa - the pool is per NUMA node: each node has its own zeroing
 * kthread and share of the target, and a fault takes a zero block from the
 * node of the CPU it runs on, unless a memory policy says otherwise: the
 * mapping's (mbind, as libvirt's numatune sets it through QEMU) or the
 * task's (set_mempolicy, numactl). Needs a lab with two nodes (--numa 2);
 * skips on one.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mempolicy.h>

#include "kselftest_harness.h"
#include "zeropin.h"

#define NODES		2
#define POOL_MIB	64	/* 32 MiB, 16 blocks, per node */

/* First CPU of a node, from sysfs cpulist ("0", "2-3", ...); -1 if none. */
static int node_first_cpu(int node)
{
	char path[96];
	int cpu = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &cpu) != 1)
		cpu = -1;
	fclose(f);
	return cpu;
}

static int bind_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

/* The node a page sits on (move_pages with no target nodes only asks). */
static int node_of(void *addr)
{
	int status = -1;

	if (syscall(SYS_move_pages, 0, 1UL, &addr, NULL, &status, 0))
		return -errno;
	return status;
}

FIXTURE(numa) {
	int unused;
};

FIXTURE_SETUP(numa)
{
	if (access("/sys/devices/system/node/node1", F_OK))
		SKIP(return, "one NUMA node: the lab runs this with --numa 2");
	zeropin_reset();
	zeropin_load("pool_mib=64");
	zfs_mount(ZFS_MNT, "size=256M");
	ASSERT_EQ(0, pool_wait("zero_mib", POOL_MIB, 60000));
}

FIXTURE_TEARDOWN(numa)
{
	zeropin_reset();
}

TEST_F(numa, one_zeroing_thread_per_node)
{
	EXPECT_EQ(NODES, proc_tasks_named("zeropin/", true, NULL));
}

TEST_F(numa, a_fault_takes_a_zero_block_from_its_own_node)
{
	char path[64];
	int node, cpu, fd;
	long zero0, sync0;
	char *p;

	for (node = 0; node < NODES; node++) {
		cpu = node_first_cpu(node);
		ASSERT_LE(0, cpu);
		ASSERT_EQ(0, bind_to_cpu(cpu));
		snprintf(path, sizeof(path), ZFS_MNT "/node%d", node);
		fd = zfs_create(path, SZ_2M);
		p = map_file(fd, SZ_2M, MAP_SHARED);
		zero0 = pool_counter("handed_zero");
		sync0 = pool_counter("zeroed_sync");
		touch_range(p, SZ_2M, true);
		EXPECT_EQ(node, node_of(p));
		EXPECT_EQ(zero0 + 1, pool_counter("handed_zero"));
		EXPECT_EQ(sync0, pool_counter("zeroed_sync"));
		munmap(p, SZ_2M);
		close(fd);
	}
}

/* Each node holds its share: draining one node's 16 blocks takes them all
 * zero, and the 17th block on that node is zeroed on the spot. */
TEST_F(numa, the_target_is_split_between_nodes)
{
	size_t share = (POOL_MIB / NODES) << 20;
	long zero0, sync0;
	char *p;
	int fd;

	ASSERT_EQ(0, bind_to_cpu(node_first_cpu(1)));
	fd = zfs_create(ZFS_MNT "/share", share + SZ_2M);
	p = map_file(fd, share + SZ_2M, MAP_SHARED);
	zero0 = pool_counter("handed_zero");
	sync0 = pool_counter("zeroed_sync");
	touch_range(p, share + SZ_2M, true);
	EXPECT_EQ(zero0 + share / SZ_2M, pool_counter("handed_zero"));
	EXPECT_EQ(sync0 + 1, pool_counter("zeroed_sync"));
	EXPECT_EQ(1, node_of(p + share));
	munmap(p, share + SZ_2M);
	close(fd);
}

static long mbind_nodes(void *addr, size_t len, int mode, unsigned long nodes)
{
	return syscall(SYS_mbind, addr, len, mode, &nodes, sizeof(nodes) * 8, 0) ? -errno : 0;
}

/* A mapping bound to node 1, faulted from a CPU of node 0. */
TEST_F(numa, mbind_bind_beats_the_local_node)
{
	size_t size = 2 * SZ_2M;
	int fd = zfs_create(ZFS_MNT "/bound", size);
	char *p = map_file(fd, size, MAP_SHARED);

	ASSERT_EQ(0, bind_to_cpu(node_first_cpu(0)));
	ASSERT_EQ(0, mbind_nodes(p, size, MPOL_BIND, 1ul << 1));
	touch_range(p, size, true);
	EXPECT_EQ(1, node_of(p));
	EXPECT_EQ(1, node_of(p + SZ_2M));
	munmap(p, size);
	close(fd);
}

/* Interleaving spreads the file block by block over the nodes. */
TEST_F(numa, mbind_interleave_alternates_blocks)
{
	size_t size = 4 * SZ_2M, i;
	int fd = zfs_create(ZFS_MNT "/interleaved", size);
	char *p = map_file(fd, size, MAP_SHARED);

	ASSERT_EQ(0, mbind_nodes(p, size, MPOL_INTERLEAVE, 0x3));
	touch_range(p, size, true);
	for (i = 0; i < size / SZ_2M; i++)
		EXPECT_EQ((int)(i % 2), node_of(p + i * SZ_2M)) TH_LOG("block %zu", i);
	munmap(p, size);
	close(fd);
}

/* write() follows the task's policy (numactl --membind). */
TEST_F(numa, task_policy_places_written_blocks)
{
	unsigned long nodes = 1ul << 1;
	char buf[4096] = { 1 };
	char *p;
	int fd;

	ASSERT_EQ(0, bind_to_cpu(node_first_cpu(0)));
	ASSERT_EQ(0, syscall(SYS_set_mempolicy, MPOL_BIND, &nodes, sizeof(nodes) * 8));
	fd = zfs_create(ZFS_MNT "/written", SZ_2M);
	ASSERT_EQ(sizeof(buf), pwrite(fd, buf, sizeof(buf), 0));
	ASSERT_EQ(0, syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0));
	p = map_file(fd, SZ_2M, MAP_SHARED);
	EXPECT_EQ(1, p[0]);	/* maps the block write() placed */
	EXPECT_EQ(1, node_of(p));
	munmap(p, SZ_2M);
	close(fd);
}

TEST_HARNESS_MAIN
