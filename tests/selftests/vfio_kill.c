// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_kill - a VMM killed with SIGKILL in the middle of a large MAP_DMA
 * leaves nothing behind: every pin is released (zeropin's pages_pinned
 * back to 0, free memory back to its baseline), and the device can be set
 * up again at once. Against type1 and zeropin.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull
/* Never-touched 4K memory: under TCG its MAP_DMA takes over a second,
 * so the kill lands inside it, with some 300 MiB already pinned. */
#define MAP_SIZE	(1ul << 30)
#define KILL_AFTER_MS	400
/* Free memory may wander this much for reasons of its own (slab, the
 * test's own page tables); a leak of what was pinned is several times it. */
#define FREE_SLACK_KB	(64 * 1024)

FIXTURE(kill) {
	long memfree;		/* free memory before the child, kB (free_memory_kb()) */
};

FIXTURE_VARIANT(kill) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(kill, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(kill, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(kill)
{
	vfio_driver_use(variant->driver);
	self->memfree = free_memory_kb();
	ASSERT_LT(0, self->memfree);
}

FIXTURE_TEARDOWN(kill)
{
}

/* The child: set up edu 0, say "ready" on fd, map 1 GiB, say "mapped". */
static void child_map(int fd)
{
	struct buffer buf;
	struct edu edu;
	int container;

	buffer_alloc(&buf, BACKING_ANON_4K, MAP_SIZE);
	container = edu_setup(&edu, 0, VFIO_TYPE1v2_IOMMU);
	if (write(fd, "r", 1) != 1)
		_exit(1);
	vfio_map(container, buf.addr, IOVA_BASE, MAP_SIZE);
	if (write(fd, "m", 1) != 1)
		_exit(1);
	pause();
	_exit(0);
}

TEST_F(kill, sigkill_during_a_large_map_releases_every_pin)
{
	char said[2] = { 0 };
	struct edu edu;
	int fds[2], status, container;
	pid_t pid;

	ASSERT_EQ(0, pipe(fds));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(fds[0]);
		child_map(fds[1]);
	}
	close(fds[1]);
	ASSERT_EQ(1, read(fds[0], said, 1));
	ASSERT_EQ('r', said[0]);
	usleep(KILL_AFTER_MS * 1000);
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	/* the kill must have landed inside MAP_DMA, or this tested nothing */
	EXPECT_EQ(0, read(fds[0], said + 1, 1)) TH_LOG("MAP_DMA finished before the kill");
	close(fds[0]);
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(0, iommu_counter("pages_pinned"));
		EXPECT_EQ(0, iommu_counter("containers"));
	}
	EXPECT_LT(self->memfree - FREE_SLACK_KB, free_memory_kb());
	/* the device is free again */
	container = edu_setup(&edu, 0, VFIO_TYPE1v2_IOMMU);
	edu_close(&edu);
	close(container);
}

TEST_HARNESS_MAIN
