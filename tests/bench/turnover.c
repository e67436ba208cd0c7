// SPDX-License-Identifier: GPL-2.0
/*
 * turnover - a VM stopped and one of the same size started at once: its
 * predecessor's RAM not yet re-zeroed, the pool it emptied refilling.
 * Guest RAM is a never-touched zeropinfs file of SIZE mapped for DMA
 * through zeropin's backend (edu 0, every mapping proven by edu DMA), in
 * three pool states:
 *   full      the pool holds the whole file zero (a start on an idle host),
 *   turnover  a predecessor of the same size mapped, unmapped and its file
 *             deleted just before (its blocks back to the page allocator,
 *             the pool empty and its kthread refilling from now on),
 *   empty     the pool emptied (target 0) and its target raised back just
 *             before the map: the cold-pool start the demo's
 *             gpu-zeropin-cold makes through the hook.
 * One JSON line per measurement: "bench":"turnover", mode, size_mib,
 * map_ms, zeroed_sync (blocks zeroed on the map's own path), handed_zero
 * (blocks the pool handed out zero), zero_mib_before (what the pool held
 * as the map began).
 *
 * Needs zeropin.ko loaded (run_build=0: blocks, not runs, so the states
 * differ only in what the pool holds), a zeropinfs mount at
 * /mnt/zeropinfs and one edu device.
 *
 * USAGE: turnover [--sizes 1024,4096] [--reps N]   [DEFAULT: 1024,4096; 3]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "util.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull
#define RAM_PATH	ZFS_MNT "/turnover-ram"
#define MAX_SIZES	4
/* TCG zeroes ~0.4 GB/s: a full pool of 4 GiB is ~10 s; a wide margin. */
#define FILL_TIMEOUT_MS	300000

static unsigned long sizes[MAX_SIZES] = { 1024, 4096 };
static int nsizes = 2, reps = 3;

/* A never-touched zeropinfs file of mib, mapped shared; NULL on failure. */
static void *ram_create(unsigned long mib, int *fd)
{
	size_t len = mib << 20;
	void *p;

	*fd = zfs_create(RAM_PATH, len);
	if (*fd < 0)
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void ram_delete(void *p, unsigned long mib, int fd)
{
	munmap(p, mib << 20);
	close(fd);
	unlink(RAM_PATH);
}

/* The predecessor: a VM of the same size that took the pool and stopped. */
static int predecessor(int container, unsigned long mib)
{
	int fd, ret;
	void *p = ram_create(mib, &fd);

	if (!p)
		return -ENOMEM;
	ret = __vfio_map(container, p, IOVA_BASE, mib << 20,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	if (!ret)
		ret = __vfio_unmap(container, IOVA_BASE, mib << 20, 0, NULL);
	ram_delete(p, mib, fd);
	return ret;
}

/* The pool as the mode wants it just before the measured map. */
static int pool_set(const char *mode, int container, unsigned long mib)
{
	pool_write("target_mib", mib);
	if (pool_wait_at_least("zero_mib", mib, FILL_TIMEOUT_MS))
		return -ETIMEDOUT;
	if (!strcmp(mode, "turnover"))
		return predecessor(container, mib);
	if (!strcmp(mode, "empty")) {
		pool_write("target_mib", 0);
		if (pool_wait_at_most("zero_mib", 0, FILL_TIMEOUT_MS))
			return -ETIMEDOUT;
		pool_write("target_mib", mib);
	}
	return 0;
}

static int measure(struct edu *e, int container, const char *mode, unsigned long mib, int rep)
{
	long sync0, zero0, held;
	struct utsname u;
	double t0, map_ms;
	int fd, ret, verify;
	void *p;

	ret = pool_set(mode, container, mib);
	if (ret)
		return ret;
	p = ram_create(mib, &fd);
	if (!p)
		return -ENOMEM;
	held = pool_read("zero_mib");
	sync0 = pool_counter("zeroed_sync");
	zero0 = pool_counter("handed_zero");
	t0 = now_ms();
	ret = __vfio_map(container, p, IOVA_BASE, mib << 20,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	map_ms = now_ms() - t0;
	if (!ret) {
		verify = __edu_verify(e, p, IOVA_BASE, mib << 20);
		ret = __vfio_unmap(container, IOVA_BASE, mib << 20, 0, NULL) ?: verify;
	}
	ram_delete(p, mib, fd);
	uname(&u);
	printf("{\"bench\":\"turnover\",\"kernel\":\"%s\",\"kernel_release\":\"%s\","
	       "\"mode\":\"%s\",\"size_mib\":%lu,\"rep\":%d,\"map_ms\":%.3f,"
	       "\"zeroed_sync\":%ld,\"handed_zero\":%ld,\"zero_mib_before\":%ld,"
	       "\"edu_verify\":\"%s\"}\n",
	       getenv("LAB_KERNEL") ? getenv("LAB_KERNEL") : "?", u.release, mode, mib, rep,
	       map_ms, pool_counter("zeroed_sync") - sync0, pool_counter("handed_zero") - zero0,
	       held, ret ? "fail" : "ok");
	fflush(stdout);
	return ret;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { "full", "turnover", "empty" };
	struct edu e;
	int container, s, r, m, i, failed = 0;
	char *tok;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--reps")) {
			reps = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--sizes")) {
			nsizes = 0;
			for (tok = strtok(argv[i + 1], ","); tok && nsizes < MAX_SIZES;
			     tok = strtok(NULL, ","))
				sizes[nsizes++] = strtoul(tok, NULL, 10);
		}
	}
	if (pool_read("target_mib") < 0) {
		fprintf(stderr, "# turnover: needs zeropin loaded and zeropinfs at %s\n", ZFS_MNT);
		return 4;
	}
	__zeropin_param_write("run_build", 0);
	vfio_driver_use(DRIVER_ZEROPIN);
	container = edu_setup(&e, 0, VFIO_TYPE1v2_IOMMU);
	for (s = 0; s < nsizes; s++)
		for (r = 0; r < reps; r++)
			for (m = 0; m < 3; m++)
				if (measure(&e, container, modes[m], sizes[s], r)) {
					printf("# turnover %s %lu MiB failed\n", modes[m], sizes[s]);
					failed = 1;
				}
	edu_close(&e);
	close(container);
	pool_write("target_mib", 0);
	return failed;
}
