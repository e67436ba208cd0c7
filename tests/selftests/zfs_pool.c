// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_pool - the pre-zeroed pool behind zeropinfs: nothing it hands out is
 * ever non-zero (over many reuse cycles, from a warm pool and from an empty
 * one), its statistics move as blocks are handed out and returned, target
 * changes are honoured, and it gives memory back under pressure without
 * anything being OOM-killed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "kmsg.h"
#include "vfio_edu.h"
#include "zeropin.h"

/* Reuse cycles of the zero guarantee test (the issue asks for >= 1000). */
#define REUSE_CYCLES	1000
/* Blocks per cycle: a few, so blocks cycle through the pool many times. */
#define CYCLE_BLOCKS	4
/* How long the idle kthread may take to reach a target in the lab (TCG). */
#define POOL_SETTLE_MS	60000

FIXTURE(pool) {
	int unused;
};

FIXTURE_VARIANT(pool) {
	const char *params;	/* module parameters */
	bool empty;		/* pool_mib=0: every block zeroed on the fault's path */
};

/* Both zero methods, each with a warm and an empty pool. */
FIXTURE_VARIANT_ADD(pool, warm_nontemporal) {
	.params = "pool_mib=32 zero_method=nontemporal", .empty = false,
};
FIXTURE_VARIANT_ADD(pool, empty_nontemporal) {
	.params = "pool_mib=0 zero_method=nontemporal", .empty = true,
};
FIXTURE_VARIANT_ADD(pool, warm_clear_page) {
	.params = "pool_mib=32 zero_method=clear_page", .empty = false,
};
FIXTURE_VARIANT_ADD(pool, empty_clear_page) {
	.params = "pool_mib=0 zero_method=clear_page", .empty = true,
};

FIXTURE_SETUP(pool)
{
	zeropin_reset();
	zeropin_load(variant->params);
	zfs_mount(ZFS_MNT, "size=64M");
	if (!variant->empty)
		ASSERT_EQ(0, pool_wait("zero_mib", 32, POOL_SETTLE_MS));
}

FIXTURE_TEARDOWN(pool)
{
	zeropin_reset();
}

/* One cycle: new file, check every byte zero (mmap and read()), fill it
 * with a pattern, let it go. */
static bool reuse_cycle(int cycle, uint8_t *readbuf)
{
	size_t size = CYCLE_BLOCKS * SZ_2M;
	char path[64];
	bool zero;
	uint8_t *p;
	int fd;

	snprintf(path, sizeof(path), ZFS_MNT "/f%d", cycle % 3);
	fd = zfs_create(path, size);
	if (cycle % 2) {
		zero = pread(fd, readbuf, size, 0) == (ssize_t)size && all_bytes(readbuf, 0, size);
		p = map_file(fd, size, MAP_SHARED);
	} else {
		p = map_file(fd, size, MAP_SHARED);
		zero = all_bytes(p, 0, size);
	}
	memset(p, 0xa5 ^ cycle, size);
	munmap(p, size);
	close(fd);
	if (cycle % 3 == 2)
		unlink(path);	/* else the next O_TRUNC releases the blocks */
	return zero;
}

/* REUSE_CYCLES x CYCLE_BLOCKS blocks (8000 MiB) written and compared:
 * seconds on the Debian kernels under TCG, many times that on the debug
 * kernel of a busy machine, where the harness's default 30 s ran out. */
TEST_F_TIMEOUT(pool, handed_out_memory_is_always_zero, 300)
{
	uint8_t *readbuf = malloc(CYCLE_BLOCKS * SZ_2M);
	long handed, zero_from_pool, sync;
	int cycle;

	ASSERT_NE(NULL, readbuf);
	handed = pool_counter("handed_out");
	for (cycle = 0; cycle < REUSE_CYCLES; cycle++) {
		ASSERT_TRUE(reuse_cycle(cycle, readbuf)) {
			TH_LOG("cycle %d: non-zero memory handed out", cycle);
		}
	}
	EXPECT_LE(handed + REUSE_CYCLES * CYCLE_BLOCKS, pool_counter("handed_out"));
	zero_from_pool = pool_counter("handed_zero");
	sync = pool_counter("zeroed_sync");
	TH_LOG("handed_out %ld: %ld from the zero list, %ld zeroed on the spot",
	       pool_counter("handed_out"), zero_from_pool, sync);
	if (variant->empty) {
		EXPECT_EQ(0, zero_from_pool);	/* all on the synchronous path */
	} else {
		EXPECT_LT(0, zero_from_pool);
	}
	free(readbuf);
}

TEST_F(pool, statistics_follow_use)
{
	size_t size = 8 * SZ_2M;
	long handed_zero0 = pool_counter("handed_zero"), sync0 = pool_counter("zeroed_sync");
	long returned0 = pool_counter("returned");
	int fd = zfs_create(ZFS_MNT "/stats", size);
	char *p = map_file(fd, size, MAP_SHARED);

	touch_range(p, size, true);
	EXPECT_EQ(16, pool_read("inuse_mib"));
	if (variant->empty) {
		EXPECT_EQ(sync0 + 8, pool_counter("zeroed_sync"));
		EXPECT_EQ(handed_zero0, pool_counter("handed_zero"));
	} else {
		EXPECT_EQ(handed_zero0 + 8, pool_counter("handed_zero"));
		EXPECT_EQ(sync0, pool_counter("zeroed_sync"));
		/* after the burst the pool refills by itself, nothing else happening */
		EXPECT_EQ(0, pool_wait("zero_mib", 32, POOL_SETTLE_MS));
	}
	munmap(p, size);
	ASSERT_EQ(0, ftruncate(fd, 0));
	EXPECT_EQ(0, pool_read("inuse_mib"));
	EXPECT_EQ(returned0 + 8, pool_counter("returned"));
	close(fd);
	/* the pool refills to its target in idle time */
	EXPECT_EQ(0, pool_wait("zero_mib", variant->empty ? 0 : 32, POOL_SETTLE_MS));
	EXPECT_EQ(0, pool_read("dirty_mib"));
}

TEST_F(pool, target_changes_are_honoured)
{
	/* blocks made zero in idle time: by the kthread, or by the page
	 * allocator as the kthread took them (init_on_alloc=1) */
	long idle0 = pool_counter("zeroed_idle") + pool_counter("zeroed_alloc");

	pool_write("target_mib", 64);
	EXPECT_EQ(64, pool_read("target_mib"));
	EXPECT_EQ(0, pool_wait("zero_mib", 64, POOL_SETTLE_MS));
	EXPECT_LE(idle0 + 16, pool_counter("zeroed_idle") + pool_counter("zeroed_alloc"));
	pool_write("target_mib", 3);	/* rounded up to whole 2 MiB blocks */
	EXPECT_EQ(4, pool_read("target_mib"));
	EXPECT_EQ(0, pool_wait("zero_mib", 4, POOL_SETTLE_MS));
	pool_write("target_mib", 0);
	EXPECT_EQ(0, pool_wait("zero_mib", 0, POOL_SETTLE_MS));
	EXPECT_EQ(-EINVAL, __pool_write("target_mib", -1));
	EXPECT_EQ(-EINVAL, __pool_write("target_mib", 1L << 40));	/* more than RAM */
	EXPECT_EQ(0, pool_read("target_mib"));
}

static long meminfo_kb(const char *key)
{
	char line[128];
	long val = -1;
	size_t len = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, len) && line[len] == ':')
			val = strtol(line + len + 1, NULL, 10);
	if (f)
		fclose(f);
	return val;
}

/* A child takes most of the memory the pool holds; the shrinker must hand
 * blocks back, and the child must finish, not be OOM-killed. */
TEST_F(pool, gives_memory_back_under_pressure)
{
	long pool_mib, hog_mib, shrunk0 = pool_counter("shrunk");
	int status;
	pid_t pid;

	if (variant->empty)
		SKIP(return, "nothing to give back from an empty pool");
	pool_write("target_mib", 1024);
	ASSERT_EQ(0, pool_wait("zero_mib", 1024, 4 * POOL_SETTLE_MS));
	pool_mib = pool_read("zero_mib");
	hog_mib = meminfo_kb("MemAvailable") / 1024 + pool_mib / 2;
	TH_LOG("pool %ld MiB, MemAvailable %ld MiB, hog %ld MiB", pool_mib,
	       meminfo_kb("MemAvailable") / 1024, hog_mib);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		char *p = mmap(NULL, hog_mib << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		_exit(p == MAP_FAILED ? 2 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status)) TH_LOG("hog killed by signal %d", WTERMSIG(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_LT(shrunk0, pool_counter("shrunk"));
	EXPECT_GT(pool_mib, pool_read("zero_mib") + pool_read("dirty_mib"));
	EXPECT_EQ(0, kmsg_count("Killed process"));
}

/* The statistics show when and how much other tenants' VMs took: root
 * only. An unprivileged reader is refused. */
TEST_F(pool, statistics_are_root_only)
{
	static const char *const stats[] = { "zero_mib", "dirty_mib", "inuse_mib", "runs_1g" };
	char path[128];
	struct stat st;
	unsigned int i;
	pid_t pid;
	int status;

	for (i = 0; i < sizeof(stats) / sizeof(stats[0]); i++) {
		snprintf(path, sizeof(path), ZEROPIN_POOL "/%s", stats[i]);
		ASSERT_EQ(0, stat(path, &st));
		EXPECT_EQ(0400, st.st_mode & 07777) TH_LOG("%s", path);
	}
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (setgid(65534) || setuid(65534))
			_exit(2);
		_exit(open(ZEROPIN_POOL "/inuse_mib", O_RDONLY) < 0 && errno == EACCES ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_HARNESS_MAIN
