// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_numa - the pool is per NUMA node: each node has its own zeroing
 * kthread and share of the target, and a fault takes a zero block from the
 * node of the CPU it runs on. Needs a lab with two nodes (--numa 2); skips
 * on one.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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

static int count_threads(const char *prefix)
{
	char path[64], comm[32];
	struct dirent *d;
	int n = 0;
	DIR *dp = opendir("/proc");
	FILE *f;

	while (dp && (d = readdir(dp))) {
		snprintf(path, sizeof(path), "/proc/%.16s/comm", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, prefix, strlen(prefix)))
			n++;
		fclose(f);
	}
	if (dp)
		closedir(dp);
	return n;
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
	EXPECT_EQ(NODES, count_threads("zeropin/"));
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

TEST_HARNESS_MAIN
