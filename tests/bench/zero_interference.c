// SPDX-License-Identifier: GPL-2.0
/*
 * zero_interference - how much the pool's zeroing slows what runs on the
 * other CPUs. A job pinned to CPU 1 - CPU-bound (an integer loop) or
 * memory-bandwidth-bound (memcpy of 32 MiB buffers) - is measured for
 * WINDOW_S seconds at a time:
 *   idle     the pool has nothing to do,
 *   refill   the pool's kthread (zero_cpus=0: on CPU 0) zeroes without a
 *            cap, kept busy by a helper that empties the pool whenever it
 *            is full (target 0, then back),
 *   capped   the same with zero_rate_mib=CAP.
 * One JSON line per measurement: "bench":"interference", job, mode,
 * work_per_s (loop iterations or bytes copied), slowdown_pct against the
 * median idle row of the same repetition, zeroed_mib_per_s (what the
 * kthread zeroed meanwhile) and zeroing_ms (its zeroing_idle_ms).
 *
 * Under TCG every vCPU is a host thread and memory bandwidth is the
 * host's: the rows compare modes side by side in one boot, they do not
 * predict a socket's numbers. Needs two CPUs and zeropin loaded.
 *
 * USAGE: zero_interference [--reps N] [--cap MIB_PER_S] [--refill-mib N]
 *        [DEFAULT: 3 repetitions, a cap of 256 MiB/s, 256 MiB refills]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "util.h"
#include "zeropin.h"

#define WINDOW_S	5
#define COPY_SIZE	(32ul << 20)	/* well past the caches */
#define JOB_CPU		1
#define ZERO_CPU	"0"

static int reps = 3, cap_mib = 256, refill_mib = 256;
static volatile int helper_stop;

/* Keep the kthread zeroing: empty the pool each time it is full. The
 * helper sleeps between looks, so CPU 0 stays the kthread's. */
static void *refill_helper(void *arg)
{
	pin_to_cpu(JOB_CPU);	/* off the kthread's CPU */
	while (!helper_stop) {
		if (pool_read("zero_mib") >= refill_mib) {
			__pool_write("target_mib", 0);
			pool_wait("zero_mib", 0, 10000);
			__pool_write("target_mib", refill_mib);
		}
		usleep(50000);
	}
	return NULL;
}

/* The job for WINDOW_S seconds on JOB_CPU; work per second. */
static double run_job(const char *job, char *src, char *dst)
{
	double t0 = now_ms(), end = t0 + WINDOW_S * 1000.0, work = 0;
	uint64_t x = 88172645463325252ull;

	while (now_ms() < end) {
		if (!strcmp(job, "cpu")) {
			for (int i = 0; i < 1000000; i++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
			}
			work += 1000000;
		} else {
			memcpy(dst, src, COPY_SIZE);
			work += COPY_SIZE;
		}
	}
	if (x == 42)
		printf("#\n");	/* keep the loop */
	return work * 1000.0 / (now_ms() - t0);
}

static void measure(const char *job, const char *mode, char *src, char *dst, int rep,
		    double idle, double *out)
{
	long zeroed0 = pool_counter("zeroed_idle"), ms0 = pool_counter("zeroing_idle_ms");
	pthread_t helper;
	struct utsname u;
	double work;

	__zeropin_param_write("zero_rate_mib", strcmp(mode, "capped") ? 0 : cap_mib);
	if (strcmp(mode, "idle")) {
		helper_stop = 0;
		__pool_write("target_mib", refill_mib);
		pthread_create(&helper, NULL, refill_helper, NULL);
	}
	work = run_job(job, src, dst);
	if (strcmp(mode, "idle")) {
		helper_stop = 1;
		pthread_join(helper, NULL);
		__pool_write("target_mib", 0);
		pool_wait("zero_mib", 0, 30000);
	}
	uname(&u);
	*out = work;
	printf("{\"bench\":\"interference\",\"kernel\":\"%s\",\"kernel_release\":\"%s\","
	       "\"job\":\"%s\",\"mode\":\"%s\","
	       "\"rep\":%d,\"work_per_s\":%.0f,\"slowdown_pct\":%.2f,\"zeroed_mib_per_s\":%.1f,"
	       "\"zeroing_ms\":%ld,\"cap_mib_per_s\":%d}\n",
	       getenv("LAB_KERNEL") ? getenv("LAB_KERNEL") : "?", u.release, job, mode, rep, work,
	       idle > 0 ? (1 - work / idle) * 100 : 0,
	       (pool_counter("zeroed_idle") - zeroed0) * 2.0 / WINDOW_S,
	       pool_counter("zeroing_idle_ms") - ms0, strcmp(mode, "capped") ? 0 : cap_mib);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const char *const jobs[] = { "cpu", "mem" };
	char *src, *dst;
	int i, j;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--cap"))
			cap_mib = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--refill-mib"))
			refill_mib = atoi(argv[i + 1]);
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || pool_read("target_mib") < 0) {
		fprintf(stderr, "# zero_interference: needs 2 CPUs and zeropin loaded\n");
		return 4;
	}
	src = malloc(COPY_SIZE);
	dst = malloc(COPY_SIZE);
	if (!src || !dst)
		return 1;
	memset(src, 1, COPY_SIZE);
	memset(dst, 2, COPY_SIZE);
	if (__zeropin_param_set("zero_cpus", ZERO_CPU))
		return 1;
	pin_to_cpu(JOB_CPU);
	__pool_write("target_mib", 0);
	pool_wait("zero_mib", 0, 30000);
	for (j = 0; j < 2; j++)
		for (i = 0; i < reps; i++) {
			double idle, w;

			measure(jobs[j], "idle", src, dst, i, 0, &idle);
			measure(jobs[j], "refill", src, dst, i, idle, &w);
			measure(jobs[j], "capped", src, dst, i, idle, &w);
		}
	__zeropin_param_write("zero_rate_mib", 0);
	__zeropin_param_set("zero_cpus", "\n");
	return 0;
}
