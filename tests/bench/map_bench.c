// SPDX-License-Identifier: GPL-2.0
/*
 * map_bench - time VFIO_IOMMU_MAP_DMA and UNMAP_DMA of guest-RAM-like
 * buffers through one edu device, prove every mapping by edu DMA, and print
 * one JSON object per measurement (and a "#" comment line for people).
 *
 * USAGE: map_bench [--drivers type1,zeropin] [--sizes 256,1024] [--reps 3]
 *                  [--backings anon4k,thp,hugetlb2m] [--states cold,warm]
 *
 * Drivers are measured side by side: each repetition of a row runs once
 * per driver, one after the other, each in a fresh container.
 *
 * The zeropinfs backing needs zeropin.ko loaded and a zeropinfs mount at
 * /mnt/zeropinfs; its "cold" rows wait for the pool to hold the whole
 * buffer as zero blocks first (a warm pool, as on a host between VMs).
 *
 * Beside each time it records counts that do not depend on the clock: the
 * ioctls issued, the bytes mapped, the page faults taken inside MAP_DMA
 * (the task's minor faults, THP allocations from /proc/vmstat, hugetlb
 * pages taken from /proc/meminfo) and from them the memory that had to be
 * allocated and zeroed on the critical path. For the zeropin driver also
 * its own counters (debugfs zeropin/iommu_counters): pages pinned, GUP
 * calls, contiguous runs, iommu_map calls and the IOMMU entries created by
 * page size. For type1 the IOMMU map calls are about phys_runs (it maps
 * each physically contiguous chunk with one call).
 *
 * With zeropin's run_build on (pool_runs 1 in the rows), every zeropinfs
 * row of a GiB or more, cold or warm, starts from a pool emptied and
 * filled again in whole 1 GiB runs, and prints a run_build row beside it:
 * the runs built, tries failed and the time taking them cost; the map
 * row says how many runs the pool had ready (runs_ready: a failed try
 * leaves loose blocks for the rest).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "backing.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE 0x100000000ull
#define MAX_LIST 8
#define ZP_COUNTERS 7
/* Zeroing 4 GiB at TCG's ~0.4 GB/s takes ~10 s; leave a wide margin,
 * and as much again per GiB beyond (a 16 GiB row). */
#define POOL_FILL_TIMEOUT_MS 120000
#define POOL_FILL_MS_PER_GIB 30000

struct options {
	enum vfio_driver drivers[MAX_LIST];
	int ndrivers;
	unsigned long sizes[MAX_LIST];		/* MiB */
	int nsizes;
	enum backing backings[MAX_LIST];
	int nbackings;
	bool states[MAX_LIST];			/* true = warm (pre-touched) */
	int nstates;
	int reps;
};

/* Counters read around one MAP_DMA; all in their native units. */
struct counters {
	long hugetlb_free;		/* HugePages_Free (2 MiB pages) */
	long thp_fault_alloc;		/* /proc/vmstat */
	long minflt;			/* this task's minor faults */
	long pool_zeroed_sync;		/* zeropin blocks zeroed on a fault's path */
	long pool_handed_zero;		/* zeropin blocks handed out already zero */
	long runs_ready;		/* whole 1 GiB runs in the pool */
	long zp[ZP_COUNTERS];		/* zeropin iommu counters, see zp_names */
};

/* zeropin's iommu counters recorded per row (deltas over MAP_DMA). */
static const char *const zp_names[ZP_COUNTERS] = {
	"pages_pinned_total", "gup_calls", "runs", "iommu_map_calls",
	"entries_4k", "entries_2m", "entries_1g",
};

static long file_value(const char *path, const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	long val = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, klen) && (line[klen] == ':' || line[klen] == ' ')) {
			val = strtol(line + klen + 1 + (line[klen] == ':'), NULL, 10);
			break;
		}
	}
	fclose(f);
	return val;
}

static void read_counters(struct counters *c)
{
	struct rusage ru;

	c->hugetlb_free = file_value("/proc/meminfo", "HugePages_Free");
	c->thp_fault_alloc = file_value("/proc/vmstat", "thp_fault_alloc");
	getrusage(RUSAGE_SELF, &ru);
	c->minflt = ru.ru_minflt;
	c->pool_zeroed_sync = pool_counter("zeroed_sync");	/* <0: no zeropin */
	c->pool_handed_zero = pool_counter("handed_zero");
	c->runs_ready = pool_read("runs_1g") < 0 ? 0 : pool_read("runs_1g");
	for (int i = 0; i < ZP_COUNTERS; i++)
		c->zp[i] = iommu_counter(zp_names[i]);
}

/* ,"name":delta for each zeropin counter; nothing for type1 rows. */
static void emit_zeropin(enum vfio_driver d, const struct counters *before,
			 const struct counters *after)
{
	for (int i = 0; i < ZP_COUNTERS && d == DRIVER_ZEROPIN; i++)
		printf(",\"%s\":%ld", zp_names[i], after->zp[i] - before->zp[i]);
}

/* Whether the pool builds 1 GiB runs (zeropin's run_build): zeropinfs
 * rows then take whole runs; 0 without zeropin. */
static int pool_runs(void)
{
	return zeropin_param_bool("run_build") == 1;
}

static void emit(enum vfio_driver d, enum backing b, bool warm,
		 unsigned long mib, int rep, double map_ms, double unmap_ms,
		 int verify, long runs, const struct counters *before,
		 const struct counters *after)
{
	struct utsname u;
	long faults = after->minflt - before->minflt;
	long thp = after->thp_fault_alloc - before->thp_fault_alloc;
	long huge = before->hugetlb_free - after->hugetlb_free;
	/* 4K faults: what is left once the huge ones are taken out (6.1 does
	 * not count hugetlb GUP faults in the task's minflt, 6.12 does) */
	long small = faults - thp - huge > 0 ? faults - thp - huge : 0;
	long pool_sync = before->pool_zeroed_sync < 0 ? 0 :
			 after->pool_zeroed_sync - before->pool_zeroed_sync;
	long pool_zero = before->pool_handed_zero < 0 ? 0 :
			 after->pool_handed_zero - before->pool_handed_zero;
	/* every anonymous or hugetlb fault inside MAP_DMA allocated a page and
	 * zeroed it; zeropinfs faults zero only what the pool had not */
	double zeroed_mib = b == BACKING_ZEROPINFS ? pool_sync * 2.0 :
			    (thp + huge) * 2.0 + small * 4.0 / 1024;
	const char *kernel = getenv("LAB_KERNEL");

	uname(&u);
	printf("{\"bench\":\"map\",\"init_on_alloc\":%d,\"kernel\":\"%s\",\"kernel_release\":\"%s\",\"driver\":\"%s\","
	       "\"backing\":\"%s\",\"state\":\"%s\",\"size_mib\":%lu,\"rep\":%d,"
	       "\"map_ms\":%.3f,\"unmap_ms\":%.3f,\"edu_verify\":\"%s\","
	       "\"map_ioctls\":1,\"unmap_ioctls\":1,\"bytes_mapped\":%llu,"
	       "\"faults_in_map\":%ld,\"thp_faults_in_map\":%ld,"
	       "\"hugetlb_faults_in_map\":%ld,\"zeroed_in_map_mib\":%.1f,"
	       "\"pool_blocks_zero_in_map\":%ld,\"pool_blocks_zeroed_sync_in_map\":%ld,"
	       "\"phys_runs\":%ld,\"pool_runs\":%d,\"runs_ready\":%ld",
	       init_on_alloc(), kernel ? kernel : "?", u.release, vfio_driver_name(d), backing_name(b),
	       warm ? "warm" : "cold", mib, rep, map_ms, unmap_ms,
	       verify ? "fail" : "ok", (unsigned long long)mib << 20,
	       faults, thp, huge, zeroed_mib, pool_zero, pool_sync, runs, pool_runs(),
	       before->runs_ready);
	emit_zeropin(d, before, after);
	printf("}\n");
	fflush(stdout);
}

/*
 * Physically contiguous runs in [addr, addr + size), from pagemap (root
 * reads PFNs): about how many IOMMU mappings type1 needs for the range,
 * whatever the clock. 0 when pagemap cannot be read.
 */
static long phys_runs(void *addr, size_t size)
{
	size_t pages = size / 4096, i, chunk = 4096, n;
	uint64_t *pfn = malloc(chunk * sizeof(*pfn)), last = 0;
	long runs = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (fd < 0 || !pfn) {
		free(pfn);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	for (i = 0; i < pages; i += n) {
		size_t j;

		n = pages - i < chunk ? pages - i : chunk;
		if (pread(fd, pfn, n * 8, ((uintptr_t)addr / 4096 + i) * 8) != (ssize_t)(n * 8))
			break;
		for (j = 0; j < n; j++) {
			uint64_t p = pfn[j] & ((1ull << 55) - 1);

			if (!(i + j) || p != last + 1)
				runs++;
			last = p;
		}
	}
	close(fd);
	free(pfn);
	return runs;
}

/* ms left until deadline, for the lib's waits (at least 0). */
static int ms_left(double deadline)
{
	double left = deadline - now_ms();

	return left > 0 ? (int)left : 0;
}

/*
 * Runs for a row of mib: the pool emptied first (the last row's file went
 * back to the page allocator and the pool refilled with whatever it could
 * get meanwhile), then filled again to mib, in whole runs where a GiB is
 * wanted and the zone has room for it (a run never takes a zone's last
 * 1/16). Prints a run_build row: runs built in idle time, tries failed,
 * and the time taking them cost (migration and the allocator's zeroing
 * included).
 */
static int pool_fill_runs(unsigned long mib, double deadline)
{
	long built = pool_counter("runs_built"), ms = pool_counter("runs_build_ms");
	long failed = pool_counter("runs_build_failed");
	const char *kernel = getenv("LAB_KERNEL");
	double t0;

	pool_write("target_mib", 0);
	if (pool_wait_at_most("zero_mib", 0, ms_left(deadline)))
		return -ETIMEDOUT;
	t0 = now_ms();
	pool_write("target_mib", mib);
	/* every GiB in a run, or a build failed (no GiB with room: loose
	 * blocks fill the rest, and the row says how many runs it had) */
	while (pool_read("runs_1g") < (long)(mib >> 10) &&
	       pool_counter("runs_build_failed") == failed) {
		if (now_ms() > deadline)
			return -ETIMEDOUT;
		usleep(20 * 1000);
	}
	if (pool_wait_at_least("zero_mib", mib, ms_left(deadline)))
		return -ETIMEDOUT;
	built = pool_counter("runs_built") - built;
	printf("{\"bench\":\"run_build\",\"init_on_alloc\":%d,\"kernel\":\"%s\",\"size_mib\":%lu,"
	       "\"runs_built\":%ld,\"runs_build_failed\":%ld,\"build_ms\":%ld,\"fill_ms\":%.0f}\n",
	       init_on_alloc(), kernel ? kernel : "?", mib, built,
	       pool_counter("runs_build_failed") - failed, pool_counter("runs_build_ms") - ms,
	       now_ms() - t0);
	return 0;
}

/* Wait until the pool holds at least mib of zero blocks (it refills in
 * idle time after the previous measurement gave its blocks back); with
 * runs, mib's whole GiBs in runs. */
static int pool_fill(unsigned long mib)
{
	double deadline = now_ms() + POOL_FILL_TIMEOUT_MS + (mib >> 10) * POOL_FILL_MS_PER_GIB;

	if (pool_runs() && mib >= 1024)
		return pool_fill_runs(mib, deadline);
	if (pool_read("target_mib") < (long)mib)
		pool_write("target_mib", mib);
	return pool_wait_at_least("zero_mib", mib, ms_left(deadline));
}

/* One measurement: fresh buffer, (touch), map, verify, unmap, free. */
static int measure(enum vfio_driver d, struct edu *e, int container,
		   enum backing b, bool warm, unsigned long mib, int rep)
{
	struct counters before, after;
	struct buffer buf;
	double t0, map_ms, unmap_ms;
	int ret, verify;
	long runs;

	/* warm rows with runs too: their faults take a run's blocks in order */
	if (b == BACKING_ZEROPINFS && (!warm || pool_runs()) && pool_fill(mib))
		printf("# pool did not reach %lu MiB zero in time\n", mib);
	ret = __buffer_alloc(&buf, b, mib << 20);
	if (ret) {
		printf("# skip %s %lu MiB: %s\n", backing_name(b), mib, strerror(-ret));
		return 0;
	}
	if (warm)
		buffer_touch(&buf);
	read_counters(&before);
	t0 = now_ms();
	ret = __vfio_map(container, buf.addr, IOVA_BASE, buf.size,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	map_ms = now_ms() - t0;
	read_counters(&after);
	if (ret) {
		printf("# MAP_DMA %s %lu MiB failed: %s\n", backing_name(b), mib, strerror(-ret));
		buffer_free(&buf);
		return ret;
	}
	verify = __edu_verify(e, buf.addr, IOVA_BASE, buf.size);
	/* zeropin maps zeropinfs memory without faulting it into the page
	 * table, where pagemap would see nothing: read-fault it first */
	if (b == BACKING_ZEROPINFS)
		touch_range(buf.addr, buf.size, false);
	runs = phys_runs(buf.addr, buf.size);
	t0 = now_ms();
	ret = __vfio_unmap(container, IOVA_BASE, buf.size, 0, NULL);
	unmap_ms = now_ms() - t0;
	buffer_free(&buf);
	if (ret)
		return ret;
	emit(d, b, warm, mib, rep, map_ms, unmap_ms, verify, runs, &before, &after);
	return verify;
}

/* measure() in a fresh container of driver d (edu 0 in it). */
static int measure_with(enum vfio_driver d, enum backing b, bool warm,
			unsigned long mib, int rep)
{
	struct edu e;
	int container, ret;

	vfio_driver_use(d);
	container = edu_setup(&e, 0, VFIO_TYPE1v2_IOMMU);
	ret = measure(d, &e, container, b, warm, mib, rep);
	edu_close(&e);
	close(container);
	return ret;
}

static int parse_backing(const char *s, enum backing *b)
{
	enum backing i;

	for (i = BACKING_ANON_4K; i <= BACKING_ZEROPINFS; i++)
		if (!strcmp(s, backing_name(i))) {
			*b = i;
			return 0;
		}
	return -EINVAL;
}

/* Split a comma list; each item through parse(). Returns the count or -1. */
static int parse_list(char *arg, const char *what, void *out, int kind)
{
	char *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == MAX_LIST)
			return -1;
		if (kind == 0) {
			((unsigned long *)out)[n] = strtoul(tok, NULL, 10);
		} else if (kind == 3) {
			if (strcmp(tok, "type1") && strcmp(tok, "zeropin"))
				goto bad;
			((enum vfio_driver *)out)[n] = !strcmp(tok, "zeropin") ?
						       DRIVER_ZEROPIN : DRIVER_TYPE1;
		} else if (kind == 1) {
			if (parse_backing(tok, &((enum backing *)out)[n]))
				goto bad;
		} else {
			if (strcmp(tok, "cold") && strcmp(tok, "warm"))
				goto bad;
			((bool *)out)[n] = !strcmp(tok, "warm");
		}
		n++;
	}
	return n;
bad:
	fprintf(stderr, "map_bench: bad %s '%s'\n", what, tok);
	return -1;
}

static void parse_args(int argc, char **argv, struct options *o)
{
	char sizes[] = "256,1024", backings[] = "anon4k,thp,hugetlb2m", states[] = "cold,warm";
	char drivers[] = "type1";
	int i;

	*o = (struct options){ .reps = 3 };
	o->ndrivers = parse_list(drivers, "driver", o->drivers, 3);
	o->nsizes = parse_list(sizes, "size", o->sizes, 0);
	o->nbackings = parse_list(backings, "backing", o->backings, 1);
	o->nstates = parse_list(states, "state", o->states, 2);
	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--drivers"))
			o->ndrivers = parse_list(argv[i + 1], "driver", o->drivers, 3);
		else if (!strcmp(argv[i], "--sizes"))
			o->nsizes = parse_list(argv[i + 1], "size", o->sizes, 0);
		else if (!strcmp(argv[i], "--backings"))
			o->nbackings = parse_list(argv[i + 1], "backing", o->backings, 1);
		else if (!strcmp(argv[i], "--states"))
			o->nstates = parse_list(argv[i + 1], "state", o->states, 2);
		else if (!strcmp(argv[i], "--reps"))
			o->reps = atoi(argv[i + 1]);
		else
			break;
	}
	if (i != argc || o->nsizes < 1 || o->nbackings < 1 || o->nstates < 1 ||
	    o->ndrivers < 1 || o->reps < 1) {
		fprintf(stderr, "usage: map_bench [--drivers type1,zeropin] [--sizes MiB,...] [--reps N]\n"
				"       [--backings anon4k,thp,hugetlb2m,hugetlb1g,zeropinfs]\n"
				"       [--states cold,warm]\n");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct options o;
	int s, b, st, r, d, failed = 0;

	parse_args(argc, argv, &o);
	for (b = 0; b < o.nbackings; b++)
		for (st = 0; st < o.nstates; st++)
			for (s = 0; s < o.nsizes; s++)
				for (r = 1; r <= o.reps; r++)
					for (d = 0; d < o.ndrivers; d++)
						failed |= measure_with(o.drivers[d], o.backings[b],
								       o.states[st], o.sizes[s], r) != 0;
	return failed;
}
