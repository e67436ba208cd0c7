// SPDX-License-Identifier: GPL-2.0
/*
 * bar_bench - MAP_DMA and UNMAP_DMA of a whole GPU-sized BAR for
 * peer-to-peer, type1 vs zeropin, side by side in one boot: the lab's GPU
 * stand-ins (scripts/lab --gpu 4 --bar-gib 1,8,32,64), each BAR freshly
 * mmapped (never touched, as QEMU hands it over) and mapped whole at a
 * 64 GiB-aligned IOVA; every mapping proven by edu DMA at the BAR's first,
 * middle and last page before it is unmapped.
 *
 * One JSON line per measurement, shaped as map_bench's ("bench":"map",
 * "backing":"bar"), with the counts beside the times: page faults taken
 * inside MAP_DMA, and for zeropin the PFNMAP page-table lookups, BAR runs,
 * iommu_map calls and IOMMU entries by size. (type1 has no counters; by
 * its code it looks up every 4 KiB page of a PFNMAP range.)
 *
 * USAGE: bar_bench [--drivers type1,zeropin] [--reps N]
 *        [DEFAULT: both drivers, 3 repetitions, every GPU stand-in]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "backing.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "vfio_gpu.h"
#include "zeropin.h"

#define IOVA_RAM	0x100000000ull		/* the edu's staging buffer */
#define IOVA_BAR	0x2000000000ull		/* 128 GiB: aligned for any BAR <= 64 GiB */
#define RAM_SIZE	(2ul << 20)
#define ZP_COUNTERS	8

/* zeropin's iommu counters recorded per row (deltas over MAP_DMA). */
static const char *const zp_names[ZP_COUNTERS] = {
	"pfnmap_lookups", "bar_runs", "gup_calls", "runs", "iommu_map_calls",
	"entries_4k", "entries_2m", "entries_1g",
};

struct counters {
	long minflt;			/* this task's minor faults */
	long zp[ZP_COUNTERS];		/* see zp_names */
};

static void read_counters(struct counters *c)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	c->minflt = ru.ru_minflt;
	for (int i = 0; i < ZP_COUNTERS; i++)
		c->zp[i] = iommu_counter(zp_names[i]);
}

static void emit(enum vfio_driver d, uint64_t size, int rep, double map_ms, double unmap_ms,
		 int verify, const struct counters *before, const struct counters *after)
{
	const char *kernel = getenv("LAB_KERNEL");
	struct utsname u;

	uname(&u);
	printf("{\"bench\":\"map\",\"kernel\":\"%s\",\"kernel_release\":\"%s\",\"driver\":\"%s\","
	       "\"backing\":\"bar\",\"state\":\"cold\",\"size_mib\":%llu,\"rep\":%d,"
	       "\"map_ms\":%.3f,\"unmap_ms\":%.3f,\"edu_verify\":\"%s\","
	       "\"map_ioctls\":1,\"unmap_ioctls\":1,\"bytes_mapped\":%llu,"
	       "\"faults_in_map\":%ld,\"phys_runs\":1",
	       kernel ? kernel : "?", u.release, vfio_driver_name(d),
	       (unsigned long long)(size >> 20), rep, map_ms, unmap_ms, verify ? "fail" : "ok",
	       (unsigned long long)size, after->minflt - before->minflt);
	for (int i = 0; i < ZP_COUNTERS && d == DRIVER_ZEROPIN; i++)
		printf(",\"%s\":%ld", zp_names[i], after->zp[i] - before->zp[i]);
	printf("}\n");
	fflush(stdout);
}

/* One measurement on GPU g: a fresh container (edu 0 and the GPU), a fresh
 * BAR mmap, map, verify, unmap. */
static int measure(enum vfio_driver d, int g, int rep)
{
	struct counters before, after;
	struct bar_probe probe;
	struct buffer ram;
	double t0, map_ms, unmap_ms;
	struct edu e;
	struct gpu gpu;
	int container, ret, verify;
	uint8_t *bar;

	vfio_driver_use(d);
	buffer_alloc(&ram, BACKING_ANON_4K, RAM_SIZE);
	container = vfio_container_open();
	edu_open(&e, 0);
	gpu_open(&gpu, g);
	edu_attach(&e, container);
	gpu_attach(&gpu, container);
	vfio_set_iommu(container, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&e);
	gpu_get_device(&gpu);
	vfio_map(container, ram.addr, IOVA_RAM, RAM_SIZE);
	probe = (struct bar_probe){ &e, ram.addr, IOVA_RAM };
	bar = gpu_bar_mmap(&gpu, 0, gpu.bar_size, PROT_READ | PROT_WRITE);
	if (bar == MAP_FAILED)
		test_fail("mmap BAR2", -errno);

	read_counters(&before);
	t0 = now_ms();
	ret = __vfio_map(container, bar, IOVA_BAR, gpu.bar_size,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	map_ms = now_ms() - t0;
	read_counters(&after);
	if (ret) {
		printf("# MAP_DMA of a %llu MiB BAR failed: %s\n",
		       (unsigned long long)(gpu.bar_size >> 20), strerror(-ret));
	} else {
		verify = __bar_verify(&probe, bar, IOVA_BAR, gpu.bar_size);
		t0 = now_ms();
		ret = __vfio_unmap(container, IOVA_BAR, gpu.bar_size, 0, NULL);
		unmap_ms = now_ms() - t0;
		if (!ret)
			emit(d, gpu.bar_size, rep, map_ms, unmap_ms, verify, &before, &after);
		ret = ret ? ret : verify;
	}
	munmap(bar, gpu.bar_size);
	edu_close(&e);
	gpu_close(&gpu);
	close(container);
	buffer_free(&ram);
	return ret;
}

static void usage(void)
{
	fprintf(stderr, "usage: bar_bench [--drivers type1,zeropin] [--reps N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	enum vfio_driver drivers[2] = { DRIVER_TYPE1, DRIVER_ZEROPIN };
	int ndrivers = 2, reps = 3, i, g, r, d, failed = 0;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--drivers") && !strcmp(argv[i + 1], "zeropin"))
			drivers[0] = DRIVER_ZEROPIN, ndrivers = 1;
		else if (!strcmp(argv[i], "--drivers") && !strcmp(argv[i + 1], "type1"))
			ndrivers = 1;
		else if (strcmp(argv[i], "--drivers") || strcmp(argv[i + 1], "type1,zeropin"))
			usage();
	}
	if (i != argc || reps < 1)
		usage();
	if (edu_count() < 1 || gpu_count() < 1) {
		printf("# bar_bench: needs an edu and GPU stand-ins (scripts/lab --gpu N)\n");
		return 4;
	}
	for (g = 0; g < gpu_count(); g++)
		for (r = 1; r <= reps; r++)
			for (d = 0; d < ndrivers; d++)
				failed |= measure(drivers[d], g, r) != 0;
	return failed;
}
