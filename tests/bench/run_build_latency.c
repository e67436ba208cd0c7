// SPDX-License-Identifier: GPL-2.0
/*
 * run_build_latency - what building 1 GiB runs costs a vCPU. Each run the
 * pool builds calls alloc_contig_range(), which drains the LRU caches and
 * the per-CPU free lists on every CPU (work queued there, IPIs) and may
 * migrate a GiB's pages; a vCPU thread on another CPU is preempted by that
 * work. A latency-sensitive loop stands in for the vCPU: a thread pinned
 * to CPU 1 reads the clock back to back and records the gaps between
 * reads (a gap is time the thread did not run), while the pool's kthread,
 * on CPU 0 (zero_cpus), fills FILL_MIB:
 *   idle      the pool has nothing to do (the loop's own floor),
 *   blocks    run_build=0: the pool fills with loose 2 MiB blocks,
 *   runs      run_build=1: the pool fills in whole runs, from free GiBs,
 *   runs-busy run_build=1 with anonymous memory (FILLER_MIB, touched) in
 *             most GiBs, so taking a GiB migrates pages first.
 * One JSON line per measurement: "bench":"run_build_latency", mode,
 * window_ms, iterations, max_gap_us, p999_gap_us (from log2 buckets: an
 * upper bound), gaps_over_100us, gaps_over_1ms, runs_built, build_ms
 * (the runs' alloc_contig_range() time, debugfs runs_build_ms) and
 * filled_mib.
 *
 * Under TCG every vCPU is a host thread: the modes compare side by side in
 * one boot; a hardware host's gaps are far smaller (LAB-NOTES). Needs two
 * CPUs, zeropin loaded with an empty pool and runs supported.
 *
 * USAGE: run_build_latency [--reps N] [--fill-mib N] [--filler-mib N]
 *        [DEFAULT: 3 repetitions, 4096 MiB filled, a 8192 MiB filler]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "zeropin.h"

#define LOOP_CPU	1
#define POOL_CPU	"0"
#define IDLE_MS		10000		/* the idle window: a fill's length */
#define FILL_TIMEOUT_MS	600000		/* TCG: runs and zeroing of 4 GiB */
#define BUCKETS		32		/* gap buckets: [2^k, 2^(k+1)) ns */

static int reps = 3, fill_mib = 4096, filler_mib = 8192;

struct gaps {
	volatile int stop;		/* set by the main thread */
	uint64_t iterations;
	uint64_t max_ns;
	uint64_t over_100us, over_1ms;
	uint64_t bucket[BUCKETS];	/* gaps by log2 of their ns */
};

static uint64_t ns_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The vCPU's stand-in: clock reads back to back on LOOP_CPU. */
static void *loop(void *arg)
{
	struct gaps *g = arg;
	uint64_t last, now, gap;
	int k;

	pin_to_cpu(LOOP_CPU);
	last = ns_now();
	while (!g->stop) {
		now = ns_now();
		gap = now - last;
		last = now;
		g->iterations++;
		if (gap > g->max_ns)
			g->max_ns = gap;
		g->over_100us += gap > 100000;
		g->over_1ms += gap > 1000000;
		k = gap ? 63 - __builtin_clzll(gap) : 0;
		g->bucket[k < BUCKETS ? k : BUCKETS - 1]++;
	}
	return NULL;
}

/* The upper edge of the bucket holding the 99.9th percentile gap, us. */
static double p999_us(const struct gaps *g)
{
	uint64_t seen = 0, want = g->iterations - g->iterations / 1000;
	int k;

	for (k = 0; k < BUCKETS; k++) {
		seen += g->bucket[k];
		if (seen >= want)
			return (double)(2ull << k) / 1000;
	}
	return (double)g->max_ns / 1000;
}

/* Fill the pool to fill_mib (runs: in whole runs), or sit IDLE_MS. */
static void pool_fill(const char *mode)
{
	if (!strcmp(mode, "idle")) {
		usleep(IDLE_MS * 1000);
		return;
	}
	__zeropin_param_write("run_build", strcmp(mode, "blocks") ? 1 : 0);
	__pool_write("target_mib", fill_mib);
	if (strcmp(mode, "blocks"))
		pool_counter_wait("runs_built", pool_counter("runs_built") + fill_mib / 1024,
				  FILL_TIMEOUT_MS);
	pool_wait("zero_mib", fill_mib, FILL_TIMEOUT_MS);
}

static void measure(const char *mode, int rep)
{
	long runs0 = pool_counter("runs_built"), ms0 = pool_counter("runs_build_ms");
	struct gaps g = { 0 };
	pthread_t t;
	struct utsname u;
	double t0;

	__pool_write("target_mib", 0);
	pool_wait("zero_mib", 0, FILL_TIMEOUT_MS);
	pthread_create(&t, NULL, loop, &g);
	usleep(100 * 1000);	/* the loop running before the pool starts */
	t0 = now_ms();
	pool_fill(mode);
	g.stop = 1;
	pthread_join(t, NULL);
	uname(&u);
	printf("{\"bench\":\"run_build_latency\",\"kernel\":\"%s\",\"kernel_release\":\"%s\","
	       "\"mode\":\"%s\",\"rep\":%d,\"window_ms\":%.0f,\"iterations\":%llu,"
	       "\"max_gap_us\":%.1f,\"p999_gap_us\":%.1f,\"gaps_over_100us\":%llu,"
	       "\"gaps_over_1ms\":%llu,\"runs_built\":%ld,\"build_ms\":%ld,\"filled_mib\":%ld}\n",
	       getenv("LAB_KERNEL") ? getenv("LAB_KERNEL") : "?", u.release, mode, rep,
	       now_ms() - t0, (unsigned long long)g.iterations, g.max_ns / 1000.0, p999_us(&g),
	       (unsigned long long)g.over_100us, (unsigned long long)g.over_1ms,
	       pool_counter("runs_built") - runs0, pool_counter("runs_build_ms") - ms0,
	       pool_read("zero_mib"));
	fflush(stdout);
}

/* Anonymous memory in most GiBs: a run taken there migrates it first. */
static void *filler(void)
{
	size_t len = (size_t)filler_mib << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t off;

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, len, MADV_NOHUGEPAGE);	/* 4 KiB pages: migration's worst */
	for (off = 0; off < len; off += 4096)
		p[off] = 1;
	return p;
}

int main(int argc, char **argv)
{
	void *fill;
	int i;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--fill-mib"))
			fill_mib = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--filler-mib"))
			filler_mib = atoi(argv[i + 1]);
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || pool_read("target_mib") < 0 ||
	    pool_counter("runs_supported") != 1) {
		fprintf(stderr, "# run_build_latency: needs 2 CPUs and zeropin loaded, runs supported\n");
		return 4;
	}
	if (__zeropin_param_set("zero_cpus", POOL_CPU))
		return 1;
	pin_to_cpu(0);	/* the main thread off the loop's CPU */
	for (i = 0; i < reps; i++) {
		measure("idle", i);
		measure("blocks", i);
		measure("runs", i);
	}
	fill = filler();
	for (i = 0; fill && i < reps; i++)
		measure("runs-busy", i);
	if (fill)
		munmap(fill, (size_t)filler_mib << 20);
	__pool_write("target_mib", 0);
	__zeropin_param_write("run_build", 0);
	__zeropin_param_set("zero_cpus", "\n");
	return 0;
}
