// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_stress - everything at once, for a bounded time: one process per
 * edu, each with its own container, and in each
 *   MAPPERS threads mapping and unmapping random 2 MiB slots of guest RAM
 *     (a zeropinfs file and anonymous memory) at random IOVAs,
 *   one thread mapping and unmapping a second zeropinfs file that
 *   one thread truncates to nothing and back and punches holes in,
 *   one thread faulting that file in (SIGBUS while it is truncated), and
 *   the pool refilling behind them (a small target, so the kthread runs).
 * When the time is up every slot still mapped is proven by edu DMA (a
 * round trip at its start, middle and end), everything is unmapped, and
 * the run must have left nothing pinned, in use or missing from free
 * memory. Each process has a deadline (a hang fails the run). Against
 * type1 and zeropin. Prints the line make check's reliability summary
 * reads:
 *   # stress DRIVER, edu I: N maps, N unmaps, N truncations, N slots proven by DMA, N errors
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "bounded.h"
#include "util.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

/* How long the threads run (STRESS_SECONDS=N for longer). */
#define STRESS_SECONDS_DEFAULT	20
#define MAPPERS		3
#define SLOTS		32		/* 2 MiB slots of verifiable guest RAM */
#define RAM_SIZE	(SLOTS * SZ_2M)
#define HOSTILE_SIZE	(16ul << 20)	/* the file that is truncated under use */
#define IOVA_RAM	0x100000000ull
#define IOVA_HOSTILE	0x200000000ull
#define DEADLINE_MS(s)	((s) * 1000 + 240000)	/* the run, then the DMA proofs */
#define FREE_SLACK_KB	(64 * 1024)

struct stress {
	int container;
	struct edu edu;
	struct buffer ram[2];		/* zeropinfs and anonymous, RAM_SIZE each */
	int hostile_fd;
	char *hostile;			/* HOSTILE_SIZE shared mapping of it */
	pthread_mutex_t lock;		/* slots[] */
	int slots[2][SLOTS];		/* 1: mapped at IOVA_RAM + slot (per buffer) */
	volatile int stop;
	unsigned long maps, unmaps, truncs, proven;
	int errors;
};

static uint64_t slot_iova(int b, int s)
{
	return IOVA_RAM + (uint64_t)b * RAM_SIZE + (uint64_t)s * SZ_2M;
}

/* Map or unmap one random slot; the lock only guards the bookkeeping
 * (0 free, 1 mapped, 2 an ioctl under way), not the ioctls, so that they
 * race each other. */
static void *mapper(void *arg)
{
	struct stress *st = arg;
	unsigned int seed = (unsigned int)(uintptr_t)pthread_self() ^ (unsigned int)getpid();

	while (!st->stop) {
		int b = rand_r(&seed) % 2, s = rand_r(&seed) % SLOTS, was, ret;

		pthread_mutex_lock(&st->lock);
		was = st->slots[b][s];
		if (was != 2)
			st->slots[b][s] = 2;
		pthread_mutex_unlock(&st->lock);
		if (was == 2)
			continue;
		if (!was) {
			ret = __vfio_map(st->container, (char *)st->ram[b].addr + s * SZ_2M,
					 slot_iova(b, s), SZ_2M,
					 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
			__atomic_add_fetch(&st->maps, !ret, __ATOMIC_RELAXED);
		} else {
			uint64_t unmapped = 0;

			ret = __vfio_unmap(st->container, slot_iova(b, s), SZ_2M, 0, &unmapped);
			if (!ret && unmapped != SZ_2M)
				ret = -EIO;
			__atomic_add_fetch(&st->unmaps, !ret, __ATOMIC_RELAXED);
		}
		pthread_mutex_lock(&st->lock);
		if (ret) {
			st->errors++;
			fprintf(stderr, "# stress: %s slot %d/%d: %s\n", was ? "unmap" : "map",
				b, s, strerror(-ret));
		}
		st->slots[b][s] = ret ? was : !was;
		pthread_mutex_unlock(&st->lock);
	}
	return NULL;
}

/* Map and unmap the hostile file's mapping while it changes under it:
 * the map may fail (a hole past EOF), must not hang or oops. */
static void *hostile_mapper(void *arg)
{
	struct stress *st = arg;
	uint64_t unmapped;

	while (!st->stop) {
		if (!__vfio_map(st->container, st->hostile, IOVA_HOSTILE, HOSTILE_SIZE,
				VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE)) {
			usleep(1000);
			if (__vfio_unmap(st->container, IOVA_HOSTILE, HOSTILE_SIZE, 0, &unmapped) ||
			    unmapped != HOSTILE_SIZE)
				__atomic_add_fetch(&st->errors, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

static void *truncater(void *arg)
{
	struct stress *st = arg;
	unsigned long n = 0;

	while (!st->stop) {
		if (n % 3 == 2)
			fallocate(st->hostile_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  (n % 8) * SZ_2M, SZ_2M);
		else if (ftruncate(st->hostile_fd, n % 3 ? HOSTILE_SIZE : 0))
			__atomic_add_fetch(&st->errors, 1, __ATOMIC_RELAXED);
		n++;
		usleep(500);
	}
	st->truncs = n;
	return NULL;
}

static __thread sigjmp_buf fault_jmp;
static __thread volatile int fault_armed;	/* this thread expects SIGBUS */

static void on_sigbus(int sig)
{
	if (fault_armed)
		siglongjmp(fault_jmp, 1);
	signal(SIGBUS, SIG_DFL);	/* anyone else's SIGBUS: die of it */
	raise(SIGBUS);
}

/* Touch the hostile file's pages; SIGBUS past EOF is expected. */
static void *faulter(void *arg)
{
	struct stress *st = arg;
	volatile unsigned long i = 0;

	fault_armed = 1;
	while (!st->stop) {
		if (!sigsetjmp(fault_jmp, 1))
			st->hostile[(i * 4096 * 97) % HOSTILE_SIZE] = (char)i;
		i++;
	}
	return NULL;
}

/* The end: every slot still mapped carries DMA both ways. */
static void prove_and_unmap(struct stress *st)
{
	uint64_t unmapped = 0;
	int b, s;

	for (b = 0; b < 2; b++)
		for (s = 0; s < SLOTS; s++) {
			if (st->slots[b][s] != 1)
				continue;
			if (__edu_verify(&st->edu, (char *)st->ram[b].addr + s * SZ_2M,
					 slot_iova(b, s), SZ_2M)) {
				fprintf(stderr, "# stress: slot %d/%d fails its DMA round trip\n", b, s);
				st->errors++;
			} else {
				st->proven++;
			}
		}
	if (__vfio_unmap(st->container, 0, 0, VFIO_DMA_UNMAP_FLAG_ALL, &unmapped))
		st->errors++;
}

/* One process's whole run (in a child: bounded_fork()); 0 when clean. */
static int stress_seconds(void)
{
	return env_ulong("STRESS_SECONDS", STRESS_SECONDS_DEFAULT);
}

static int stress_run(void *arg)
{
	int *index = arg, i, seconds = stress_seconds();
	struct sigaction sa = { .sa_handler = on_sigbus, .sa_flags = SA_NODEFER };
	pthread_t t[MAPPERS + 3];
	struct stress st = { 0 };
	char path[64];

	sigaction(SIGBUS, &sa, NULL);
	pthread_mutex_init(&st.lock, NULL);
	buffer_alloc(&st.ram[0], BACKING_ZEROPINFS, RAM_SIZE);
	buffer_alloc(&st.ram[1], BACKING_ANON_4K, RAM_SIZE);
	snprintf(path, sizeof(path), ZFS_MNT "/hostile%d", *index);
	st.hostile_fd = zfs_create(path, HOSTILE_SIZE);
	unlink(path);
	st.hostile = map_file(st.hostile_fd, HOSTILE_SIZE, MAP_SHARED);
	st.container = edu_setup(&st.edu, *index, VFIO_TYPE1v2_IOMMU);
	for (i = 0; i < MAPPERS; i++)
		pthread_create(&t[i], NULL, mapper, &st);
	pthread_create(&t[MAPPERS], NULL, hostile_mapper, &st);
	pthread_create(&t[MAPPERS + 1], NULL, truncater, &st);
	pthread_create(&t[MAPPERS + 2], NULL, faulter, &st);
	sleep(seconds);
	st.stop = 1;
	for (i = 0; i < MAPPERS + 3; i++)
		pthread_join(t[i], NULL);
	prove_and_unmap(&st);
	printf("# stress %s, edu %d: %lu maps, %lu unmaps, %lu truncations, %lu slots proven by DMA, %d errors\n",
	       vfio_driver_name(vfio_driver_expected()), *index, st.maps, st.unmaps, st.truncs,
	       st.proven, st.errors);
	fflush(stdout);
	edu_close(&st.edu);
	close(st.container);
	munmap(st.hostile, HOSTILE_SIZE);
	close(st.hostile_fd);
	buffer_free(&st.ram[0]);
	buffer_free(&st.ram[1]);
	return st.errors ? -EIO : 0;
}

FIXTURE(stress) {
	long free_kb;
};

FIXTURE_VARIANT(stress) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(stress, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(stress, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(stress)
{
	zfs_mount_fresh("size=512M");
	pool_write("target_mib", 0);
	ASSERT_EQ(0, pool_wait("zero_mib", 0, 60000));
	vfio_driver_use(variant->driver);
	self->free_kb = free_memory_kb();	/* with the pool empty, as at the end */
	pool_write("target_mib", 32);	/* the kthread refills beside the run */
}

FIXTURE_TEARDOWN(stress)
{
	pool_write("target_mib", 0);
}

TEST_F_TIMEOUT(stress, everything_at_once_loses_nothing, 900)
{
	int n = edu_count(), i, ret, index[2] = { 0, 1 };
	pid_t pid[2];

	ASSERT_LE(1, n);
	n = n > 2 ? 2 : n;
	/* one process per device, in parallel, each bounded */
	for (i = 0; i < n; i++) {
		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (!pid[i])
			_exit(bounded_fork(stress_run, &index[i], DEADLINE_MS(stress_seconds())) ? 1 : 0);
	}
	for (i = 0; i < n; i++) {
		int status;

		ASSERT_EQ(pid[i], waitpid(pid[i], &status, 0));
		ret = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		EXPECT_EQ(0, ret) TH_LOG("process %d (edu %d) failed or hung", i, i);
	}
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(0, iommu_counter("pages_pinned"));
		EXPECT_EQ(0, iommu_counter("containers"));
	}
	EXPECT_EQ(0, pool_read("inuse_mib"));
	/* the pool emptied, as when free memory was read (whether it could
	 * refill to its target in a fragmented lab is not the question) */
	pool_write("target_mib", 0);
	EXPECT_EQ(0, pool_wait("zero_mib", 0, 60000));
	EXPECT_EQ(0, pool_parked_settle());	/* blocks out of their files */
	EXPECT_LT(self->free_kb - FREE_SLACK_KB, free_memory_kb());
}

TEST_HARNESS_MAIN
