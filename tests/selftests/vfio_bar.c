// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_bar - a GPU-sized BAR mapped for peer-to-peer: the lab's GPU
 * stand-ins (scripts/lab --gpu 2 --bar-gib 1,64: ivshmem BAR2s of 1 and
 * 64 GiB, bound to vfio-pci) share a container with an edu, whose DMA
 * engine writes into the BAR through the IOMMU and reads it back; the CPU
 * checks each transfer through the BAR's mmap. Against type1 and zeropin
 * on the 1 GiB BAR, and zeropin on the 64 GiB one (type1 takes ~20 s to
 * map it: make bench has the "bar" rows).
 *
 * zeropin maps a vfio-pci BAR without looking at a single page-table
 * entry (pfnmap_lookups stays put) as one run, in 1 GiB IOMMU entries
 * where the BAR and the IOVA allow; charges nothing to RLIMIT_MEMLOCK, as
 * type1; and takes the whole mapping out of the IOMMU at once when the
 * user's BAR mapping goes away, however large.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "bounded.h"
#include "kmsg.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "vfio_gpu.h"
#include "zeropin.h"

#define IOVA_RAM	0x100000000ull		/* 4 GiB */
#define IOVA_BAR	0x2000000000ull		/* 128 GiB: 1 GiB (and 64 GiB) aligned */
#define RAM_SIZE	(2ul << 20)
#define SZ_1G		(1ull << 30)
#define RW		(VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE)

FIXTURE(bar) {
	struct edu edu;		/* does the DMA */
	struct gpu gpu;		/* the peer whose BAR2 is mapped */
	int container;
	struct buffer ram;	/* the edu's staging area, at IOVA_RAM */
	uint8_t *bar;		/* BAR2, mmapped whole, read-write */
	uint64_t size;		/* BAR2's size */
	struct bar_probe probe;	/* edu and ram: proves a mapping by DMA */
};

FIXTURE_VARIANT(bar) {
	enum vfio_driver driver;
	int gpu;		/* which GPU stand-in: 0 (1 GiB), 1 (64 GiB) */
};

FIXTURE_VARIANT_ADD(bar, type1_1g) { .driver = DRIVER_TYPE1, .gpu = 0 };
FIXTURE_VARIANT_ADD(bar, zeropin_1g) { .driver = DRIVER_ZEROPIN, .gpu = 0 };
FIXTURE_VARIANT_ADD(bar, zeropin_64g) { .driver = DRIVER_ZEROPIN, .gpu = 1 };

FIXTURE_SETUP(bar)
{
	self->container = -1;
	self->bar = MAP_FAILED;
	edu_init(&self->edu);
	gpu_init(&self->gpu);
	if (edu_count() < 1 || gpu_count() <= variant->gpu)
		SKIP(return, "needs an edu and %d GPU stand-ins (scripts/lab --gpu 2 --bar-gib 1,64)",
		     variant->gpu + 1);
	vfio_driver_use(variant->driver);
	buffer_alloc(&self->ram, BACKING_ANON_4K, RAM_SIZE);
	self->container = vfio_container_open();
	edu_open(&self->edu, 0);
	gpu_open(&self->gpu, variant->gpu);
	edu_attach(&self->edu, self->container);
	gpu_attach(&self->gpu, self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&self->edu);
	gpu_get_device(&self->gpu);
	self->size = self->gpu.bar_size;
	self->bar = gpu_bar_mmap(&self->gpu, 0, self->size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, self->bar);
	vfio_map(self->container, self->ram.addr, IOVA_RAM, RAM_SIZE);
	self->probe = (struct bar_probe){ &self->edu, self->ram.addr, IOVA_RAM };
}

FIXTURE_TEARDOWN(bar)
{
	if (self->bar != MAP_FAILED)
		munmap(self->bar, self->size);
	edu_close(&self->edu);
	gpu_close(&self->gpu);
	if (self->container >= 0)
		close(self->container);
	buffer_free(&self->ram);
}

#define bar_round_trip(iova, off) \
	ASSERT_EQ(0, __bar_round_trip(&self->probe, self->bar, (iova), (off)))
#define dma_write_lands(iova, off) bar_dma_write_lands(&self->probe, self->bar, (iova), (off))

TEST_F(bar, whole_bar_dma_at_first_middle_and_last_page)
{
	long lookups = 0, runs = 0, entries_1g = 0, mmio = 0;

	if (variant->driver == DRIVER_ZEROPIN) {
		lookups = iommu_counter("pfnmap_lookups");
		runs = iommu_counter("bar_runs");
		entries_1g = iommu_counter("entries_1g");
		mmio = iommu_counter("mmio_pages");
	}
	ASSERT_EQ(0, __vfio_map(self->container, self->bar, IOVA_BAR, self->size, RW));
	ASSERT_EQ(0, __bar_verify(&self->probe, self->bar, IOVA_BAR, self->size));
	if (variant->driver == DRIVER_ZEROPIN) {
		/* not one PTE looked at, nothing faulted in: one run, 1 GiB entries */
		EXPECT_EQ(lookups, iommu_counter("pfnmap_lookups"));
		EXPECT_EQ(runs + 1, iommu_counter("bar_runs"));
		EXPECT_EQ(mmio + (long)(self->size >> 12), iommu_counter("mmio_pages"));
		EXPECT_EQ(entries_1g + (long)(self->size / SZ_1G), iommu_counter("entries_1g"));
	}
	vfio_unmap(self->container, IOVA_BAR, self->size);
}

TEST_F(bar, unmap_leaves_no_way_in)
{
	uint64_t last = self->size - 4096, unmapped = 0;
	long unmaps = iommu_counter("iommu_unmap_calls");

	ASSERT_EQ(0, __vfio_map(self->container, self->bar, IOVA_BAR, self->size, RW));
	bar_round_trip(IOVA_BAR, last);
	ASSERT_EQ(0, __vfio_unmap(self->container, IOVA_BAR, self->size, 0, &unmapped));
	EXPECT_EQ(self->size, unmapped);
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ(unmaps + 1, iommu_counter("iommu_unmap_calls"));	/* at once */
	EXPECT_EQ(0, dma_write_lands(IOVA_BAR + last, last));
	EXPECT_EQ(0, dma_write_lands(IOVA_BAR, 0));
}

/* zeropin only: type1 keeps reaching the BAR after the user's mapping
 * went away (its known gap, which vfio_p2p shows on a small BAR). */
TEST_F(bar, bar_mapping_gone_revokes_it_whole)
{
	uint64_t last = self->size - 4096, unmapped = 0;
	long revoked = iommu_counter("mmio_revoked");
	long unmaps = iommu_counter("iommu_unmap_calls");

	if (variant->driver != DRIVER_ZEROPIN)
		SKIP(return, "type1 does not track the BAR mapping's lifetime");
	ASSERT_EQ(0, __vfio_map(self->container, self->bar, IOVA_BAR, self->size, RW));
	bar_round_trip(IOVA_BAR, last);
	/* the device fd goes first: the mmap alone keeps the device open */
	close(self->gpu.device);
	self->gpu.device = -1;
	bar_round_trip(IOVA_BAR, last);
	ASSERT_EQ(0, munmap(self->bar, self->size));
	EXPECT_EQ(revoked + 1, iommu_counter("mmio_revoked"));
	EXPECT_EQ(unmaps + 1, iommu_counter("iommu_unmap_calls"));	/* 64 GiB at once */
	/* a new mmap (of a new device fd) sees no DMA arrive any more */
	gpu_get_device(&self->gpu);
	self->bar = gpu_bar_mmap(&self->gpu, 0, self->size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, self->bar);
	EXPECT_EQ(0, dma_write_lands(IOVA_BAR + last, last));
	EXPECT_EQ(0, dma_write_lands(IOVA_BAR, 0));
	/* the IOVA stays taken until UNMAP_DMA, which reports it whole */
	EXPECT_EQ(-EEXIST, __vfio_map(self->container, self->ram.addr, IOVA_BAR, 4096, RW));
	ASSERT_EQ(0, __vfio_unmap(self->container, IOVA_BAR, self->size, 0, &unmapped));
	EXPECT_EQ(self->size, unmapped);
}

/* BARs are not memory the process holds: nothing charged, as type1. */
TEST_F(bar, memlock_is_not_charged)
{
	long vmlck = proc_status_kb("VmLck");
	long pinned = iommu_counter("pages_pinned");

	ASSERT_EQ(0, __vfio_map(self->container, self->bar, IOVA_BAR, self->size, RW));
	EXPECT_EQ(vmlck, proc_status_kb("VmLck"));
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ(pinned, iommu_counter("pages_pinned"));
	bar_round_trip(IOVA_BAR, self->size / 2);
	vfio_unmap(self->container, IOVA_BAR, self->size);
	EXPECT_EQ(vmlck, proc_status_kb("VmLck"));
}

/*
 * Part of a partial mmap: the BAR mmapped from a quarter of the way in
 * (an mmap offset), and only the middle of that mmap mapped for DMA (an
 * address inside the vma). DMA reaches exactly that part of the BAR, at
 * its first and last page, and nothing on either side.
 */
TEST_F(bar, part_of_a_partial_mmap)
{
	uint64_t win = self->size / 4, win_len = 8ul << 20;
	uint64_t part = 2ul << 20, part_len = 4ul << 20;
	uint8_t *w;

	w = gpu_bar_mmap(&self->gpu, win, win_len, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, w);
	ASSERT_EQ(0, __vfio_map(self->container, w + part, IOVA_BAR, part_len, RW));
	bar_round_trip(IOVA_BAR - win - part, win + part);
	bar_round_trip(IOVA_BAR - win - part, win + part + part_len - 4096);
	/* just outside, on both sides: unmapped IOVA */
	EXPECT_EQ(0, dma_write_lands(IOVA_BAR - 4096, win + part - 4096));
	EXPECT_EQ(0, dma_write_lands(IOVA_BAR + part_len, win + part + part_len));
	vfio_unmap(self->container, IOVA_BAR, part_len);
	munmap(w, win_len);
}

TEST_F(bar, read_only_bar_mapping_refuses_device_writes)
{
	uint64_t last = self->size - 4096;
	uint8_t want[BAR_PROBE_XFER], got[BAR_PROBE_XFER];
	uint8_t *ro;

	ro = gpu_bar_mmap(&self->gpu, 0, self->size, PROT_READ);
	ASSERT_NE(MAP_FAILED, ro);
	EXPECT_EQ(-EFAULT, __vfio_map(self->container, ro, IOVA_BAR, self->size, RW));
	ASSERT_EQ(0, __vfio_map(self->container, ro, IOVA_BAR, self->size,
				VFIO_DMA_MAP_FLAG_READ));
	bar_pattern(want, sizeof(want));
	memcpy(self->bar + last, want, sizeof(want));
	ASSERT_EQ(0, __probe_dma_read(&self->probe, IOVA_BAR + last, got, sizeof(got)));
	EXPECT_EQ(0, memcmp(want, got, sizeof(want)));
	EXPECT_EQ(0, dma_write_lands(IOVA_BAR + last, last));
	vfio_unmap(self->container, IOVA_BAR, self->size);
	munmap(ro, self->size);
}

/*
 * An IOVA only 4 KiB-congruent to the BAR: the IOMMU needs 4 KiB entries,
 * 16 M of them (128 MiB of page tables) for the 64 GiB BAR, which zeropin
 * allocates the ordinary, accounted way with the device file held rather
 * than atomically. DMA reaches the first, middle and last page.
 */
TEST_F(bar, iova_only_page_congruent_to_the_bar)
{
	uint64_t iova = IOVA_BAR + 4096;
	long entries_4k = iommu_counter("entries_4k");

	ASSERT_EQ(0, __vfio_map(self->container, self->bar, iova, self->size, RW));
	ASSERT_EQ(0, __bar_verify(&self->probe, self->bar, iova, self->size));
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ(entries_4k + (long)(self->size >> 12), iommu_counter("entries_4k"));
	vfio_unmap(self->container, iova, self->size);
}

/*
 * With memory decode off vfio-pci lets no fault map the BAR: type1 fails
 * the map (EFAULT), and zeropin, which needs no fault, refuses it the
 * same way. Once decode is back on, the map works and DMA reaches the BAR.
 * (A mapping whose decode goes off later stays, with both: vfio_p2p.)
 */
TEST_F(bar, refused_while_memory_decode_is_off)
{
	int ret;

	ASSERT_EQ(0, __vfio_pci_command(self->gpu.device, self->gpu.config_offset, 0,
					PCI_COMMAND_MEMORY));
	ret = __vfio_map(self->container, self->bar, IOVA_BAR, self->size, RW);
	ASSERT_EQ(0, __vfio_pci_command(self->gpu.device, self->gpu.config_offset,
					PCI_COMMAND_MEMORY, 0));
	ASSERT_EQ(-EFAULT, ret);
	ASSERT_EQ(0, __vfio_map(self->container, self->bar, IOVA_BAR, self->size, RW));
	bar_round_trip(IOVA_BAR, self->size - 4096);
	vfio_unmap(self->container, IOVA_BAR, self->size);
}

/* A BAR mmap the process may not even read (PROT_NONE): refused for
 * reading and writing alike, as type1's fault refuses it; nothing stays
 * taken. */
TEST_F(bar, bar_mapping_without_access_is_refused)
{
	uint8_t *none;

	none = gpu_bar_mmap(&self->gpu, 0, self->size, PROT_NONE);
	ASSERT_NE(MAP_FAILED, none);
	EXPECT_EQ(-EFAULT, __vfio_map(self->container, none, IOVA_BAR, self->size,
				      VFIO_DMA_MAP_FLAG_READ));
	EXPECT_EQ(-EFAULT, __vfio_map(self->container, none, IOVA_BAR, self->size, RW));
	ASSERT_EQ(0, __vfio_map(self->container, self->bar, IOVA_BAR, self->size, RW));
	bar_round_trip(IOVA_BAR, 0);
	vfio_unmap(self->container, IOVA_BAR, self->size);
	munmap(none, self->size);
}

/*
 * One MAP_DMA over a BAR mmapped in pieces, each through a device fd of
 * its own, more of them than zeropin holds device files for (4): it
 * writes such a mapping the cautious way, under its revocation lock,
 * without reclaim, in 1 GiB steps. DMA reaches every piece; with zeropin
 * the munmap of one piece takes the whole mapping out.
 */
#define BAR_PIECES	5

TEST_F(bar, bar_mapped_through_more_device_fds_than_are_held)
{
	uint64_t piece = self->size / 8, len = piece * BAR_PIECES, unmapped = 0;
	int fds[BAR_PIECES], i;
	uint8_t *area;

	area = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, area);
	for (i = 0; i < BAR_PIECES; i++) {
		fds[i] = ioctl(self->gpu.group, VFIO_GROUP_GET_DEVICE_FD, self->gpu.bdf);
		ASSERT_LE(0, fds[i]);
		ASSERT_NE(MAP_FAILED, mmap(area + i * piece, piece, PROT_READ | PROT_WRITE,
					   MAP_SHARED | MAP_FIXED, fds[i],
					   self->gpu.bar_offset + i * piece));
	}
	ASSERT_EQ(0, __vfio_map(self->container, area, IOVA_BAR, len, RW));
	for (i = 0; i < BAR_PIECES; i++) {
		bar_round_trip(IOVA_BAR, i * piece);
		bar_round_trip(IOVA_BAR, (i + 1) * piece - 4096);
	}
	if (variant->driver == DRIVER_ZEROPIN) {
		long revoked = iommu_counter("mmio_revoked");

		ASSERT_EQ(0, munmap(area + 2 * piece, piece));
		EXPECT_EQ(revoked + 1, iommu_counter("mmio_revoked"));
		EXPECT_EQ(0, dma_write_lands(IOVA_BAR, 0));
		EXPECT_EQ(0, dma_write_lands(IOVA_BAR + len - 4096, len - 4096));
	}
	ASSERT_EQ(0, __vfio_unmap(self->container, IOVA_BAR, len, 0, &unmapped));
	EXPECT_EQ(len, unmapped);
	munmap(area, len);
	for (i = 0; i < BAR_PIECES; i++)
		close(fds[i]);
}

/*
 * A PFNMAP that no vfio-pci BAR path took (the other GPU stand-in's BAR2
 * mapped through sysfs resource2, as any other driver's mmap would be) is
 * written into the IOMMU under the revocation lock, which the write drops
 * between pieces: a munmap meanwhile (the VMM's mmap_lock held, its vCPUs'
 * faults waiting behind it) waits for one piece at most, not the whole
 * map, takes out exactly what is written, and the write stops (zeropin
 * only). The IOMMU must then hold nothing of it and everything of its
 * neighbours: VT-d widens an unmap of an empty range to the page size of
 * the empty level, over whatever lies beside it.
 */
#define FOREIGN_SIZE	SZ_1G
#define FOREIGN_PIECES	17	/* 64 MiB pieces of IOVA, the first 4 KiB short */
#define FOREIGN_SLACK	4	/* pieces a munmap may wait for: the one being
				 * written, one taken before it got the lock, and
				 * what the writer finishes between the test
				 * reading the counter and the munmap reaching the
				 * revocation (1 more seen on 6.1 under nested
				 * TCG; 4 on the debug lab kernel, lockdep and
				 * KASAN, which tests/run-selftests gives
				 * FOREIGN_SLACK=6): still far below a write that
				 * keeps the munmap out (17 pieces) */
/* Kernel log records that say the IOMMU was left with a stale entry. */
static const char *const iommu_bad[] = { "WARNING:", "DMA PTE", "BUG:" };

struct foreign_race {
	int container;
	void *map;		/* what MAP_DMA maps */
	uint64_t iova;
	uint64_t size;
	void *unmap;		/* what the racer munmaps */
	uint64_t unmap_size;
	long calls0;		/* iommu_map_calls before the map */
	long calls_munmap;	/* when the munmap began and ended */
	long calls_unmapped;
};

/* Times the race is run until the munmap comes while the write goes on
 * (it may come before or after: TCG schedules as it likes). */
#define FOREIGN_TRIES	5
/* Seconds a race test may take: up to FOREIGN_TRIES maps of 256 K entries
 * of 4 KiB and a DMA check of a GiB (the harness's default, 30 s, cut the
 * first short on the debug lab kernel with a demo running beside it, and
 * the next test found the group still held). */
#define FOREIGN_TIMEOUT	300

static int foreign_map_job(void *arg)
{
	struct foreign_race *r = arg;

	return __vfio_map(r->container, r->map, r->iova, r->size, RW);
}

/* Once the map has written two pieces, munmap what it maps. */
static int foreign_munmap_job(void *arg)
{
	struct foreign_race *r = arg;

	while ((r->calls_munmap = iommu_counter_raw("iommu_map_calls")) < r->calls0 + 2)
		sched_yield();
	if (munmap(r->unmap, r->unmap_size))
		return -errno;
	r->calls_unmapped = iommu_counter_raw("iommu_map_calls");
	return 0;
}

/*
 * One try: MAP_DMA of r->map racing a munmap of r->unmap. Both succeed,
 * the mapping ends revoked, its IOVA taken until UNMAP_DMA (done here,
 * which reports it whole), and the munmap waited for FOREIGN_SLACK pieces
 * at most. Returns whether the munmap came while the write was going on:
 * fewer than pieces written.
 */
static bool foreign_try(struct __test_metadata *_metadata, struct foreign_race *r, long pieces)
{
	int (*const fn[])(void *) = { foreign_map_job, foreign_munmap_job };
	void *const arg[] = { r, r };
	long revoked = iommu_counter("mmio_revoked"), written;
	uint64_t unmapped = 0;
	int ret[2], err;

	r->calls0 = iommu_counter("iommu_map_calls");
	err = bounded_together(2, fn, arg, ret, 4 * BOUNDED_MS);
	EXPECT_EQ(0, err) TH_LOG("%s", bounded_str(err));
	EXPECT_EQ(0, ret[0]) TH_LOG("MAP_DMA: %s", bounded_str(ret[0]));
	EXPECT_EQ(0, ret[1]) TH_LOG("munmap: %s", bounded_str(ret[1]));
	if (err || ret[0] || ret[1])
		return true;	/* failed already: no more tries */
	written = iommu_counter("iommu_map_calls") - r->calls0;
	TH_LOG("pieces written: %ld when the munmap began, %ld when it ended, %ld of %ld in all",
	       r->calls_munmap - r->calls0, r->calls_unmapped - r->calls0, written, pieces);
	EXPECT_EQ(revoked + 1, iommu_counter("mmio_revoked"));
	EXPECT_GE((long)env_ulong("FOREIGN_SLACK", FOREIGN_SLACK), r->calls_unmapped - r->calls_munmap);
	EXPECT_EQ(0, __vfio_unmap(r->container, r->iova, r->size, 0, &unmapped));
	EXPECT_EQ(r->size, unmapped);
	return written < pieces;
}

/* The other GPU stand-in's BAR2 through sysfs, len bytes from off, at
 * addr (NULL: anywhere); MAP_FAILED with errno when it cannot be had. */
static void *foreign_mmap(const FIXTURE_VARIANT(bar) *variant, void *addr, uint64_t len,
			  uint64_t off)
{
	char bdf[256], path[320];
	void *p;
	int fd;

	/* the GPU this variant has not opened through VFIO: no region
	 * vfio-pci requested, which sysfs would refuse */
	if (pci_find(GPU_VENDOR, GPU_DEVICE, !variant->gpu, bdf, sizeof(bdf)))
		return MAP_FAILED;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource2", bdf);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return MAP_FAILED;
	p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | (addr ? MAP_FIXED : 0), fd, off);
	close(fd);
	return p;
}

#define FOREIGN_SKIP(variant) do { \
	if ((variant)->driver != DRIVER_ZEROPIN) \
		SKIP(return, "type1 does not track a PFNMAP's lifetime"); \
	if (gpu_count() < 2) \
		SKIP(return, "needs a second GPU stand-in (scripts/lab --gpu 2)"); \
} while (0)

/* 1 GiB at an IOVA only 4 KiB-congruent to it: 256 K entries, 17 pieces.
 * Afterwards no entry is left anywhere in the range: 4 KiB pages of RAM
 * mapped over all of it are reached by DMA, and the kernel log has no
 * "DMA PTE already set". */
TEST_F_TIMEOUT(bar, foreign_pfnmap_munmap_waits_for_one_piece, FOREIGN_TIMEOUT)
{
	struct foreign_race r = { .container = self->container, .iova = IOVA_BAR + 4096,
				  .size = FOREIGN_SIZE, .unmap_size = FOREIGN_SIZE };
	int kmsg = kmsg_mark(), tries;
	bool cut = false;
	struct buffer ram;

	FOREIGN_SKIP(variant);
	for (tries = 0; tries < FOREIGN_TRIES && !cut; tries++) {
		r.map = foreign_mmap(variant, NULL, FOREIGN_SIZE, 0);
		if (r.map == MAP_FAILED)
			SKIP(return, "no sysfs mapping of a BAR here: %s", strerror(errno));
		r.unmap = r.map;
		cut = foreign_try(_metadata, &r, FOREIGN_PIECES);
	}
	EXPECT_TRUE(cut) TH_LOG("in %d tries the munmap never came during the write", tries);

	buffer_alloc(&ram, BACKING_ANON_4K, FOREIGN_SIZE);
	ASSERT_EQ(0, __vfio_map(self->container, ram.addr, r.iova, FOREIGN_SIZE, RW));
	edu_verify(&self->edu, ram.addr, r.iova, FOREIGN_SIZE);
	vfio_unmap(self->container, r.iova, FOREIGN_SIZE);
	buffer_free(&ram);
	EXPECT_EQ(0, kmsg_count_since(kmsg, iommu_bad, 3));
	close(kmsg);
}

/*
 * The revocation takes out exactly what was written, not a whole IOMMU
 * level around it: a 1 GiB mapping at a 1 GiB-aligned IOVA made of two
 * runs of the BAR, the first (512 MiB from its start) written in one
 * piece, the second (512 MiB from 4 KiB in: 4 KiB entries, 8 pieces) cut
 * short by a munmap, with RAM mapped right after it. The RAM is reached
 * by DMA afterwards, at its first, middle and last page.
 */
#define NEIGHBOUR_PIECES	9

TEST_F_TIMEOUT(bar, foreign_revocation_leaves_the_neighbours_mapped, FOREIGN_TIMEOUT)
{
	uint64_t half = FOREIGN_SIZE / 2;
	struct foreign_race r = { .container = self->container, .iova = IOVA_BAR,
				  .size = FOREIGN_SIZE, .unmap_size = half };
	int kmsg = kmsg_mark(), tries;
	bool cut = false;
	struct buffer ram;
	uint8_t *area;

	FOREIGN_SKIP(variant);
	buffer_alloc(&ram, BACKING_ANON_4K, half);
	vfio_map(self->container, ram.addr, IOVA_BAR + FOREIGN_SIZE, half);
	for (tries = 0; tries < FOREIGN_TRIES && !cut; tries++) {
		area = mmap(NULL, FOREIGN_SIZE, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		ASSERT_NE(MAP_FAILED, area);
		/* two pieces of the BAR side by side: two runs */
		if (foreign_mmap(variant, area, half, 0) == MAP_FAILED ||
		    foreign_mmap(variant, area + half, half, 4096) == MAP_FAILED)
			SKIP(return, "no sysfs mapping of a BAR here: %s", strerror(errno));
		r.map = area;
		r.unmap = area + half;
		cut = foreign_try(_metadata, &r, NEIGHBOUR_PIECES);
		edu_verify(&self->edu, ram.addr, IOVA_BAR + FOREIGN_SIZE, half);
		munmap(area, FOREIGN_SIZE);
	}
	EXPECT_TRUE(cut) TH_LOG("in %d tries the munmap never came during the write", tries);
	vfio_unmap(self->container, IOVA_BAR + FOREIGN_SIZE, half);
	buffer_free(&ram);
	EXPECT_EQ(0, kmsg_count_since(kmsg, iommu_bad, 3));
	close(kmsg);
}

/*
 * A BAR mapping replayed into an IOMMU domain that joins later (zeropin
 * only): with share_domains=0 the edu's group gets a domain of its own
 * when it joins a container whose mapping is the whole 64 GiB BAR (the
 * largest GPU stand-in). The replay writes it without the pin's device
 * file, under revoke_lock, without reclaim, in 1 GiB steps; at an IOVA
 * only 4 KiB-congruent to the BAR that is 16 M entries, 128 MiB of page
 * tables. The edu's DMA then reaches the BAR's first, middle and last
 * page through its own domain.
 */
FIXTURE(bar_replay) {
	struct edu edu;
	struct gpu gpu;
	int container;
	struct buffer ram;
	uint8_t *bar;
};

FIXTURE_VARIANT(bar_replay) {
	uint64_t iova;		/* where the BAR is mapped */
};

FIXTURE_VARIANT_ADD(bar_replay, gib_aligned) { .iova = IOVA_BAR };
FIXTURE_VARIANT_ADD(bar_replay, page_congruent) { .iova = IOVA_BAR + 4096 };

FIXTURE_SETUP(bar_replay)
{
	self->container = -1;
	self->bar = MAP_FAILED;
	edu_init(&self->edu);
	gpu_init(&self->gpu);
	if (edu_count() < 1 || gpu_count() < 1)
		SKIP(return, "needs an edu and a GPU stand-in (scripts/lab --gpu N)");
	vfio_driver_use(DRIVER_ZEROPIN);
	buffer_alloc(&self->ram, BACKING_ANON_4K, RAM_SIZE);
	self->container = vfio_container_open();
	gpu_open(&self->gpu, gpu_count() - 1);
	gpu_attach(&self->gpu, self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	gpu_get_device(&self->gpu);
	self->bar = gpu_bar_mmap(&self->gpu, 0, self->gpu.bar_size, PROT_READ | PROT_WRITE);
	ASSERT_NE(MAP_FAILED, self->bar);
}

FIXTURE_TEARDOWN(bar_replay)
{
	if (self->bar != MAP_FAILED)
		munmap(self->bar, self->gpu.bar_size);
	edu_close(&self->edu);
	gpu_close(&self->gpu);
	if (self->container >= 0)
		close(self->container);
	buffer_free(&self->ram);
	__zeropin_param_write("share_domains", 1);
}

TEST_F(bar_replay, bar_mapping_replayed_into_a_joining_domain)
{
	struct bar_probe probe = { &self->edu, self->ram.addr, IOVA_RAM };
	uint64_t size = self->gpu.bar_size;
	long domains;

	ASSERT_EQ(0, __vfio_map(self->container, self->bar, variant->iova, size, RW));
	ASSERT_EQ(0, __zeropin_param_write("share_domains", 0));
	domains = iommu_counter("domains");
	edu_open(&self->edu, 0);
	edu_attach(&self->edu, self->container);
	EXPECT_EQ(domains + 1, iommu_counter("domains"));
	edu_get_device(&self->edu);
	vfio_map(self->container, self->ram.addr, IOVA_RAM, RAM_SIZE);
	ASSERT_EQ(0, __bar_verify(&probe, self->bar, variant->iova, size));
	vfio_unmap(self->container, variant->iova, size);
}

TEST_HARNESS_MAIN
