// SPDX-License-Identifier: GPL-2.0
/*
 * fault_bench - time faulting in guest-RAM-like memory the way a guest's
 * first touch (or KVM's EPT faults) does: one write per 4 KiB page of a
 * never-touched buffer. Backings: zeropinfs with a warm pool, zeropinfs
 * with an empty pool (every block zeroed on the fault's path), anonymous
 * THP, hugetlbfs 2M; the empty-pool rows once per zero_method. Then how
 * long the idle kthreads take to fill an empty pool with each zero_method
 * ("bench":"pool_fill"). One JSON object per measurement. With the
 * kernel's init_on_alloc=1 (Debian's default) the page allocator does the
 * clearing and zero_method has nothing to do: compare methods on a boot
 * with init_on_alloc=0 (tests/bench/run does both).
 *
 * USAGE: fault_bench [--size MiB] [--reps N]          [DEFAULT: 1024, 3]
 * Needs zeropin.ko loaded and a zeropinfs mount at /mnt/zeropinfs; it sets
 * /sys/kernel/zeropin/pool/target_mib itself and restores it at the end.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backing.h"
#include "vfio_edu.h"
#include "zeropin.h"

/* Zeroing 4 GiB at TCG's ~0.4 GB/s takes ~10 s; leave a wide margin. */
#define POOL_SETTLE_MS 120000

struct config {
	const char *name;	/* "backing" field of the row */
	const char *pool;	/* "pool" field: warm, empty or n/a */
	enum backing backing;
	const char *method;	/* the pool's zero_method, NULL: n/a */
};

static const struct config configs[] = {
	{ "zeropinfs", "warm", BACKING_ZEROPINFS, "clear_page" },
	{ "zeropinfs", "empty", BACKING_ZEROPINFS, "clear_page" },
	{ "zeropinfs", "empty", BACKING_ZEROPINFS, "nontemporal" },
	{ "thp", "n/a", BACKING_THP, NULL },
	{ "hugetlb2m", "n/a", BACKING_HUGETLB_2M, NULL },
};

#define ZERO_METHOD "/sys/module/zeropin/parameters/zero_method"

static void set_method(const char *method)
{
	FILE *f = fopen(ZERO_METHOD, "w");

	if (f) {
		fputs(method, f);
		fclose(f);
	}
}

/* Time the idle kthreads take to fill the pool from empty to mib with one
 * zero method: their zeroing throughput (allocation included), uncapped
 * (zero_rate_mib 0: the shipped cap, 2048 MiB/s, is a policy, not the
 * method's speed; restored after). */
static void measure_fill(const char *method, unsigned long mib, int rep)
{
	long rate = zeropin_param_read("zero_rate_mib");
	double t0, ms;

	set_method(method);
	__zeropin_param_write("zero_rate_mib", 0);
	pool_write("target_mib", 0);
	pool_wait("zero_mib", 0, POOL_SETTLE_MS);
	t0 = now_ms();
	pool_write("target_mib", mib);
	if (pool_wait("zero_mib", mib, POOL_SETTLE_MS))
		printf("# pool fill %s: timed out\n", method);
	ms = now_ms() - t0;
	if (rate >= 0)
		__zeropin_param_write("zero_rate_mib", rate);
	printf("{\"bench\":\"pool_fill\",\"kernel\":\"%s\",\"init_on_alloc\":%d,"
	       "\"zero_method\":\"%s\",\"size_mib\":%lu,\"rep\":%d,\"fill_ms\":%.1f,"
	       "\"mib_per_s\":%.0f}\n",
	       getenv("LAB_KERNEL") ? getenv("LAB_KERNEL") : "?", init_on_alloc(), method,
	       mib, rep, ms, mib / (ms / 1000));
	fflush(stdout);
}

static long minflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* Bring the pool to the state the row needs: full of zero blocks, or empty. */
static int prepare_pool(const struct config *c, unsigned long mib)
{
	if (c->backing != BACKING_ZEROPINFS)
		return 0;
	if (!strcmp(c->pool, "empty")) {
		pool_write("target_mib", 0);
		return pool_wait("zero_mib", 0, POOL_SETTLE_MS);
	}
	pool_write("target_mib", mib);
	return pool_wait("zero_mib", mib, POOL_SETTLE_MS);
}

static int measure(const struct config *c, unsigned long mib, int rep)
{
	long f0, sync0, zero0;
	struct buffer buf;
	struct utsname u;
	double t0, ms;
	int ret;

	if (c->method)
		set_method(c->method);
	if (prepare_pool(c, mib))
		printf("# %s/%s: pool did not settle\n", c->name, c->pool);
	ret = __buffer_alloc(&buf, c->backing, mib << 20);
	if (ret) {
		printf("# skip %s %lu MiB: %s\n", c->name, mib, strerror(-ret));
		return 0;
	}
	sync0 = pool_counter("zeroed_sync");
	zero0 = pool_counter("handed_zero");
	f0 = minflt();
	t0 = now_ms();
	touch_range(buf.addr, buf.size, true);
	ms = now_ms() - t0;
	uname(&u);
	printf("{\"bench\":\"fault\",\"kernel\":\"%s\",\"kernel_release\":\"%s\","
	       "\"init_on_alloc\":%d,"
	       "\"backing\":\"%s\",\"pool\":\"%s\",\"zero_method\":\"%s\","
	       "\"state\":\"cold\",\"size_mib\":%lu,"
	       "\"rep\":%d,\"fault_ms\":%.3f,\"faults\":%ld,"
	       "\"pool_blocks_zero\":%ld,\"pool_blocks_zeroed_sync\":%ld,"
	       "\"file_pmd_mapped_kb\":%ld}\n",
	       getenv("LAB_KERNEL") ? getenv("LAB_KERNEL") : "?", u.release, init_on_alloc(),
	       c->name, c->pool, c->method ? c->method : "n/a", mib, rep, ms, minflt() - f0, pool_counter("handed_zero") - zero0,
	       pool_counter("zeroed_sync") - sync0,
	       c->backing == BACKING_ZEROPINFS ? smaps_kb(buf.addr, "FilePmdMapped") : 0);
	fflush(stdout);
	buffer_free(&buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long mib = 1024;
	long target = pool_read("target_mib");
	int reps = 3, i, r;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--size"))
			mib = strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
	}
	if (target < 0) {
		fprintf(stderr, "fault_bench: zeropin.ko is not loaded\n");
		return 1;
	}
	for (i = 0; i < (int)(sizeof(configs) / sizeof(configs[0])); i++)
		for (r = 1; r <= reps; r++)
			measure(&configs[i], mib, r);
	for (r = 1; r <= reps; r++) {
		measure_fill("clear_page", mib, r);
		measure_fill("nontemporal", mib, r);
	}
	set_method("clear_page");
	pool_write("target_mib", target);
	return 0;
}
