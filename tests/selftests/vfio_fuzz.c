// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_fuzz - a seeded, bounded fuzzer of the VFIO container interface
 * (tests/lib/fuzz.h: it prints its seed, FUZZ_SEED=N replays it, and it
 * stops by itself after FUZZ_CALLS calls or FUZZ_SECONDS seconds).
 *
 * One container with an edu, against type1 and zeropin. Each call is, at
 * random: MAP_DMA with edge-case argsz, flags, iova, size and vaddr
 * (anonymous, THP, zeropinfs, read-only, a BAR mmap, a freed range, a
 * range another thread keeps replacing, NULL, kernel and unaligned
 * addresses); UNMAP_DMA of a mapping, a span, everything or garbage;
 * GET_INFO and CHECK_EXTENSION with odd sizes and arguments; any other
 * container ioctl number with random bytes; something done to the memory
 * behind mappings (MADV_DONTNEED, mprotect, a hole punched in the file,
 * the BAR mmap replaced); a forked child mapping its own copy and exiting.
 *
 * What must hold, besides no oops, BUG, WARNING or hang (the boot's
 * kernel-log check): every successful UNMAP_DMA reports exactly the bytes
 * of the whole mappings inside its range (a model of what is mapped); at
 * the end, every mapping whose memory nobody touched since is reached by
 * edu DMA both ways, UNMAP_DMA of everything reports the model's total,
 * and once the container is closed nothing stays pinned or charged
 * (zeropin's counters, VmLck) and free memory is back within a slack.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "fuzz.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull	/* above the MSI window */
#define IOVA_SLOT	(4ull << 20)	/* requests land on slots, so they collide */
#define IOVA_SLOTS	64
#define IOVA_CHILD	0x200000000ull	/* where forked children map */
#define IOVA_FINAL	0x300000000ull	/* the end's fresh mappings */
#define SRC_SIZE	(8ul << 20)	/* each source of memory */
#define MAX_LIVE	1024		/* mappings the model keeps */
#define PAGE		4096ull
/* make check's budget per driver: a short run on every lab kernel (the
 * debug one included); FUZZ_CALLS / FUZZ_SECONDS for a long one. */
#define FUZZ_CALLS_DEFAULT	1500
#define FUZZ_SECONDS_DEFAULT	25
/* A forked child's MAP_DMA of a few pages: far less than this. */
#define CHILD_MS	20000
/* Free memory may wander this much on its own (slab, page tables); a
 * leaked pin of the sources is larger. */
#define FREE_SLACK_KB	(64 * 1024)

enum source_kind { SRC_ANON, SRC_THP, SRC_ZFS, SRC_RO, SRC_BAR, SRC_HOLE, SRC_RACY, NR_SRC };

struct source {
	uint8_t *addr;		/* start of the user mapping */
	size_t size;		/* its length */
	unsigned int gen;	/* bumped whenever the memory behind it changes */
	bool ram;		/* RAM the test may write and DMA may prove */
};

struct live {
	uint64_t iova, size;	/* a mapping the container holds */
	int src;		/* its source when wholly inside one, else -1 */
	size_t off;		/* offset into that source */
	unsigned int gen;	/* the source's gen when mapped */
	uint32_t flags;		/* MAP_DMA flags */
};

FIXTURE(fuzz) {
	struct edu edu;
	int container;
	struct buffer anon, thp, zfs;
	struct source src[NR_SRC];
	uint64_t bar_offset;		/* the edu's BAR0 in its device fd */
	struct live live[MAX_LIVE];
	int nlive;
	pthread_t racer;
	volatile bool stop;		/* tells the racer to stop */
	long free_kb;			/* free memory before anything */
	struct fuzz f;
	unsigned long maps_ok, unmaps_ok, refused, verified;
};

FIXTURE_VARIANT(fuzz) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(fuzz, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(fuzz, zeropin) { .driver = DRIVER_ZEROPIN };

/* The racy source: replaced, whole, by fresh memory or by PROT_NONE, as
 * fast as the thread can, while the main thread maps from it. MAP_FIXED
 * replaces atomically, so the address range never becomes free for
 * anything else. */
static void *racer(void *arg)
{
	FIXTURE_DATA(fuzz) *self = arg;
	struct source *s = &self->src[SRC_RACY];
	int prot = PROT_NONE;

	while (!self->stop) {
		prot = prot == PROT_NONE ? PROT_READ | PROT_WRITE : PROT_NONE;
		if (mmap(s->addr, s->size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) == MAP_FAILED)
			break;
		if (prot != PROT_NONE)
			s->addr[0] = 1;
		usleep(2000);
	}
	return NULL;
}

static void *bar_mmap(FIXTURE_DATA(fuzz) *self, void *at)
{
	return mmap(at, self->src[SRC_BAR].size, PROT_READ | PROT_WRITE,
		    MAP_SHARED | (at ? MAP_FIXED : 0), self->edu.device, self->bar_offset);
}

FIXTURE_SETUP(fuzz)
{
	struct vfio_region_info bar;
	struct source *s = self->src;

	self->container = -1;
	zfs_mount_fresh("size=64M");
	vfio_driver_use(variant->driver);
	self->free_kb = free_memory_kb();
	buffer_alloc(&self->anon, BACKING_ANON_4K, SRC_SIZE);
	buffer_alloc(&self->thp, BACKING_THP, SRC_SIZE);
	buffer_alloc(&self->zfs, BACKING_ZEROPINFS, SRC_SIZE);
	buffer_touch(&self->anon);
	buffer_touch(&self->thp);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
	ASSERT_LT(0, self->container);
	ASSERT_EQ(0, vfio_region_info(self->edu.device, VFIO_PCI_BAR0_REGION_INDEX, &bar));
	self->bar_offset = bar.offset;
	s[SRC_ANON] = (struct source){ self->anon.addr, SRC_SIZE, 0, true };
	s[SRC_THP] = (struct source){ self->thp.addr, SRC_SIZE, 0, true };
	s[SRC_ZFS] = (struct source){ self->zfs.addr, SRC_SIZE, 0, true };
	s[SRC_RO].size = s[SRC_HOLE].size = s[SRC_RACY].size = 2ul << 20;
	s[SRC_RO].addr = mmap(NULL, s[SRC_RO].size, PROT_READ,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	s[SRC_HOLE].addr = mmap(NULL, s[SRC_HOLE].size, PROT_NONE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	s[SRC_RACY].addr = mmap(NULL, s[SRC_RACY].size, PROT_NONE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	s[SRC_BAR].size = bar.size;
	s[SRC_BAR].addr = bar_mmap(self, NULL);
	ASSERT_NE(MAP_FAILED, s[SRC_RO].addr);
	ASSERT_NE(MAP_FAILED, s[SRC_HOLE].addr);
	ASSERT_NE(MAP_FAILED, s[SRC_RACY].addr);
	ASSERT_NE(MAP_FAILED, s[SRC_BAR].addr);
	ASSERT_EQ(0, munmap(s[SRC_HOLE].addr, s[SRC_HOLE].size));	/* freed */
	ASSERT_EQ(0, pthread_create(&self->racer, NULL, racer, self));
}

/* Everything the fixture holds, each once: the BAR mmap holds the device
 * file, and with it the group's place in the container. */
static void release_all(FIXTURE_DATA(fuzz) *self)
{
	if (!self->stop) {
		self->stop = true;
		pthread_join(self->racer, NULL);
	}
	edu_close(&self->edu);
	if (self->container >= 0)
		close(self->container);
	self->container = -1;
	for (int i = SRC_RO; i < NR_SRC; i++) {
		if (i != SRC_HOLE && self->src[i].addr && self->src[i].addr != MAP_FAILED)
			munmap(self->src[i].addr, self->src[i].size);
		self->src[i].addr = NULL;
	}
	buffer_free(&self->anon);
	buffer_free(&self->thp);
	buffer_free(&self->zfs);
}

FIXTURE_TEARDOWN(fuzz)
{
	release_all(self);
	zfs_umount(ZFS_MNT);
}

/* --- the model of what the container maps --- */

static void live_add(FIXTURE_DATA(fuzz) *self, const struct vfio_iommu_type1_dma_map *m,
		     int src, size_t off)
{
	struct live *l = &self->live[self->nlive++];

	*l = (struct live){ m->iova, m->size, src, off, src >= 0 ? self->src[src].gen : 0,
			    m->flags };
}

/* Bytes of the mappings wholly inside [iova, last] (all of them when
 * all), removed from the model. */
static uint64_t live_take(FIXTURE_DATA(fuzz) *self, uint64_t iova, uint64_t last, bool all)
{
	uint64_t bytes = 0;
	int i = 0;

	while (i < self->nlive) {
		struct live *l = &self->live[i];

		if (all || (l->iova >= iova && l->iova + l->size - 1 <= last)) {
			bytes += l->size;
			*l = self->live[--self->nlive];
		} else {
			i++;
		}
	}
	return bytes;
}

/* --- one call of each kind; each returns false when an oracle fails --- */

static uint64_t pick_iova(struct fuzz *f)
{
	uint64_t slot = IOVA_BASE + fuzz_below(f, IOVA_SLOTS) * IOVA_SLOT;

	return FUZZ_PICK(f, slot, slot, slot, slot + fuzz_below(f, 512) * PAGE, slot + 1,
			 0, 0xfee00000ull, ~0ull & ~(PAGE - 1), fuzz_u64(f), 1ull << 63);
}

static uint64_t pick_size(struct fuzz *f, size_t room)
{
	return FUZZ_PICK(f, (fuzz_below(f, 64) + 1) * PAGE, (fuzz_below(f, 4) + 1) << 21,
			 (fuzz_below(f, 64) + 1) * PAGE, room, 0, 4095, 1ull << 40,
			 ~0ull & ~(PAGE - 1), fuzz_u64(f));
}

static void fuzz_map(FIXTURE_DATA(fuzz) *self)
{
	struct fuzz *f = &self->f;
	struct {
		struct vfio_iommu_type1_dma_map m;
		uint8_t more[4096];		/* what a large argsz may cover */
	} req;
	int src = fuzz_below(f, NR_SRC), rw = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
	size_t off = fuzz_below(f, self->src[src].size / PAGE) * PAGE;
	uint64_t base = (uintptr_t)self->src[src].addr + off;
	bool whole;

	fuzz_fill(f, &req, sizeof(req));
	req.m.argsz = FUZZ_PICK(f, sizeof(req.m), sizeof(req.m), sizeof(req.m), sizeof(req.m),
				sizeof(req.m) - 1, 0, sizeof(req), fuzz_u64(f));
	req.m.flags = FUZZ_PICK(f, rw, rw, rw, VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE,
				0, rw | VFIO_DMA_MAP_FLAG_VADDR, fuzz_u64(f));
	req.m.vaddr = FUZZ_PICK(f, base, base, base, base, base, base + 1, 0,
				0xffff888000000000ull, ~0ull & ~(PAGE - 1));
	req.m.iova = pick_iova(f);
	req.m.size = pick_size(f, self->src[src].size - off);
	if (self->nlive == MAX_LIVE)
		return;
	if (ioctl(self->container, VFIO_IOMMU_MAP_DMA, &req)) {
		self->refused++;
		return;
	}
	self->maps_ok++;
	if (req.m.flags & VFIO_DMA_MAP_FLAG_VADDR)
		return;	/* type1's new vaddr for a mapping it has: nothing new */
	whole = req.m.vaddr == base && req.m.size <= self->src[src].size - off;
	live_add(self, &req.m, whole ? src : -1, off);
}

static bool fuzz_unmap(FIXTURE_DATA(fuzz) *self, struct __test_metadata *_metadata)
{
	struct fuzz *f = &self->f;
	struct vfio_iommu_type1_dma_unmap u;
	uint64_t want, iova, last, r = fuzz_u64(f);
	bool all;

	fuzz_fill(f, &u, sizeof(u));
	u.argsz = FUZZ_PICK(f, sizeof(u), sizeof(u), sizeof(u), sizeof(u), sizeof(u) - 1, 0,
			    fuzz_u64(f));
	u.flags = FUZZ_PICK(f, 0, 0, 0, 0, VFIO_DMA_UNMAP_FLAG_ALL,
			    VFIO_DMA_UNMAP_FLAG_GET_DIRTY_BITMAP, VFIO_DMA_UNMAP_FLAG_VADDR,
			    fuzz_u64(f));
	if (self->nlive && (r & 1)) {
		struct live *l = &self->live[(r >> 1) % self->nlive];

		u.iova = l->iova;
		u.size = FUZZ_PICK(f, l->size, l->size, l->size - PAGE, l->size + IOVA_SLOT * 3);
	} else {
		u.iova = pick_iova(f);
		u.size = pick_size(f, IOVA_SLOT * 8);
	}
	if (u.flags == VFIO_DMA_UNMAP_FLAG_ALL && fuzz_below(f, 4))
		u.iova = u.size = 0;
	iova = u.iova;			/* the kernel writes back u.size */
	last = u.iova + u.size - 1;
	if (ioctl(self->container, VFIO_IOMMU_UNMAP_DMA, &u)) {
		self->refused++;
		return true;
	}
	self->unmaps_ok++;
	if (u.flags & VFIO_DMA_UNMAP_FLAG_VADDR)
		return true;	/* type1's vaddr invalidation: the mappings stay */
	all = u.flags & VFIO_DMA_UNMAP_FLAG_ALL;
	want = live_take(self, iova, last, all);
	EXPECT_EQ(want, u.size) TH_LOG("UNMAP_DMA iova %#llx flags %#x: %llu bytes reported, the model has %llu",
					(unsigned long long)iova, u.flags,
					(unsigned long long)u.size, (unsigned long long)want);
	return want == u.size;
}

static void fuzz_info(FIXTURE_DATA(fuzz) *self)
{
	struct fuzz *f = &self->f;
	uint8_t buf[4096];
	struct vfio_iommu_type1_info *info = (void *)buf;

	fuzz_fill(f, buf, sizeof(buf));
	info->argsz = FUZZ_PICK(f, 0, 8, 12, sizeof(*info), sizeof(*info) + 7, sizeof(buf),
				fuzz_u64(f) % sizeof(buf));
	if (ioctl(self->container, VFIO_IOMMU_GET_INFO, buf))
		self->refused++;
	if (ioctl(self->container, VFIO_CHECK_EXTENSION,
		  (unsigned long)FUZZ_PICK(f, 0, 1, 3, 5, 8, 9, 11, fuzz_u64(f))) < 0)
		self->refused++;
}

/* Any other container ioctl number (MAP and UNMAP have their own, with a
 * model), with random bytes or a random pointer as its argument. */
static void fuzz_other_ioctl(FIXTURE_DATA(fuzz) *self)
{
	struct fuzz *f = &self->f;
	uint8_t buf[4096];
	unsigned int nr;
	unsigned long cmd;

	do
		nr = VFIO_BASE + fuzz_below(f, 32);
	while (_IO(VFIO_TYPE, nr) == VFIO_IOMMU_MAP_DMA || _IO(VFIO_TYPE, nr) == VFIO_IOMMU_UNMAP_DMA);
	cmd = fuzz_below(f, 8) ? _IO(VFIO_TYPE, nr) : (unsigned int)fuzz_u64(f);
	fuzz_fill(f, buf, sizeof(buf));
	*(uint32_t *)buf = FUZZ_PICK(f, 16, 24, 32, sizeof(buf), fuzz_u64(f));
	if (cmd == VFIO_IOMMU_MAP_DMA || cmd == VFIO_IOMMU_UNMAP_DMA)
		return;
	if (ioctl(self->container, cmd, fuzz_below(f, 4) ? (unsigned long)buf : fuzz_u64(f)))
		self->refused++;
}

/* Change the memory behind mappings the way any process may. */
static void fuzz_mutate(FIXTURE_DATA(fuzz) *self)
{
	struct fuzz *f = &self->f;
	int k = fuzz_below(f, 6);
	struct source *s = &self->src[(int[]){ SRC_ANON, SRC_ANON, SRC_THP, SRC_ZFS, SRC_ZFS,
					       SRC_BAR }[k]];
	size_t off = s->size >> 21 ? fuzz_below(f, s->size >> 21) << 21 : 0;

	switch (k) {
	case 0:		/* new zero pages for the old ones */
	case 2:
		madvise(s->addr + off, 2ul << 20, MADV_DONTNEED);
		s->gen++;
		break;
	case 1:		/* read-only a while: the same pages afterwards */
		mprotect(s->addr, s->size, PROT_READ);
		mprotect(s->addr, s->size, PROT_READ | PROT_WRITE);
		break;
	case 3:		/* a hole in the file */
		fallocate(self->zfs.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, 2ul << 20);
		s->gen++;
		break;
	case 4:		/* the file shrinks and grows again */
		if (!ftruncate(self->zfs.fd, off) && ftruncate(self->zfs.fd, s->size))
			printf("# ftruncate back to %zu: %s\n", s->size, strerror(errno));
		s->gen++;
		break;
	case 5:		/* the BAR mmap replaced by a new one */
		if (bar_mmap(self, s->addr) == MAP_FAILED)
			printf("# BAR mmap: %s\n", strerror(errno));
		s->gen++;
		break;
	}
}

/* A forked child maps a few pages of its own copy of the anonymous source
 * and exits without unmapping: the container keeps the mapping (and the
 * dead process's pages) until UNMAP_DMA. */
static bool fuzz_fork_map(FIXTURE_DATA(fuzz) *self, struct __test_metadata *_metadata)
{
	struct fuzz *f = &self->f;
	struct vfio_iommu_type1_dma_map m = {
		.argsz = sizeof(m),
		.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
		.vaddr = (uintptr_t)self->src[SRC_ANON].addr,
		.iova = IOVA_CHILD + fuzz_below(f, 64) * IOVA_SLOT,
		.size = (fuzz_below(f, 8) + 1) * PAGE,
	};
	int status = 0, ms;
	pid_t pid;

	if (self->nlive == MAX_LIVE)
		return true;
	pid = fork();
	if (pid < 0)
		return true;	/* no child, no mapping */
	if (!pid)
		_exit(ioctl(self->container, VFIO_IOMMU_MAP_DMA, &m) ? 1 : 0);
	for (ms = 0; ms < CHILD_MS && waitpid(pid, &status, WNOHANG) == 0; ms += 10)
		usleep(10000);
	if (ms >= CHILD_MS) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		TH_LOG("a forked child's MAP_DMA of %llu bytes hung", (unsigned long long)m.size);
		return false;
	}
	if (WIFEXITED(status) && !WEXITSTATUS(status)) {
		self->maps_ok++;
		live_add(self, &m, -1, 0);
	}
	return true;
}

/* Whether mapping i maps RAM read-write that nobody changed since. */
static bool checkable(FIXTURE_DATA(fuzz) *self, int i)
{
	uint32_t rw = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
	struct live *l = &self->live[i];

	return l->src >= 0 && self->src[l->src].ram && self->src[l->src].gen == l->gen &&
	       (l->flags & rw) == rw;
}

/* Mapping i, if checkable, both ways: reached by edu DMA. Returns false
 * when the DMA did not arrive. */
static bool verify_one(FIXTURE_DATA(fuzz) *self, struct __test_metadata *_metadata, int i)
{
	struct live *l = &self->live[i];
	struct source *s = &self->src[l->src];
	int ret;

	if (!checkable(self, i))
		return true;
	ret = __edu_verify(&self->edu, s->addr + l->off, l->iova, l->size);
	EXPECT_EQ(0, ret) TH_LOG("mapping at %#llx of %llu bytes", (unsigned long long)l->iova,
				 (unsigned long long)l->size);
	self->verified++;
	return !ret;
}

/* One checkable mapping, picked by r; true when there is none. */
static bool verify_any(FIXTURE_DATA(fuzz) *self, struct __test_metadata *_metadata, uint64_t r)
{
	int idx[MAX_LIVE], n = 0;

	for (int i = 0; i < self->nlive; i++)
		if (checkable(self, i))
			idx[n++] = i;
	return !n || verify_one(self, _metadata, idx[r % n]);
}

/* Every checkable mapping; then each RAM source whole, mapped afresh at
 * IOVA_FINAL, so that every run proves at least that much by DMA. */
static bool verify_live(FIXTURE_DATA(fuzz) *self, struct __test_metadata *_metadata)
{
	int src[] = { SRC_ANON, SRC_THP, SRC_ZFS };
	struct vfio_iommu_type1_dma_map m = {
		.argsz = sizeof(m),
		.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
	};
	bool ok = true;

	for (int i = 0; i < self->nlive; i++)
		ok &= verify_one(self, _metadata, i);
	for (int k = 0; k < 3 && self->nlive < MAX_LIVE; k++) {
		m.vaddr = (uintptr_t)self->src[src[k]].addr;
		m.iova = IOVA_FINAL + k * SRC_SIZE;
		m.size = SRC_SIZE;
		if (ioctl(self->container, VFIO_IOMMU_MAP_DMA, &m)) {
			TH_LOG("MAP_DMA of source %d whole: %s", src[k], strerror(errno));
			ok = false;
			continue;
		}
		live_add(self, &m, src[k], 0);
		ok &= verify_one(self, _metadata, self->nlive - 1);
	}
	return ok;
}

TEST_F_TIMEOUT(fuzz, random_calls_lose_nothing_and_leak_nothing, 600)
{
	uint64_t total = 0, unmapped = 0;
	bool ok = true;
	int i;

	fuzz_init(&self->f, variant->driver == DRIVER_ZEROPIN ? "vfio_fuzz zeropin" :
			    "vfio_fuzz type1", FUZZ_CALLS_DEFAULT, FUZZ_SECONDS_DEFAULT);
	while (ok && fuzz_next_call(&self->f)) {
		int op = fuzz_below(&self->f, 100);

		if (op < 40)
			fuzz_map(self);
		else if (op < 66)
			ok = fuzz_unmap(self, _metadata);
		else if (op < 72)
			fuzz_info(self);
		else if (op < 82)
			fuzz_other_ioctl(self);
		else if (op < 93)
			fuzz_mutate(self);
		else if (op < 97)
			ok = verify_any(self, _metadata, fuzz_u64(&self->f));
		else if (op >= 97)
			ok = fuzz_fork_map(self, _metadata);
	}
	self->stop = true;
	pthread_join(self->racer, NULL);
	ok &= verify_live(self, _metadata);
	EXPECT_LE(3, self->verified) TH_LOG("too few mappings proven by DMA to mean anything");
	for (i = 0; i < self->nlive; i++)
		total += self->live[i].size;
	EXPECT_EQ(0, __vfio_unmap(self->container, 0, 0, VFIO_DMA_UNMAP_FLAG_ALL, &unmapped));
	EXPECT_EQ(total, unmapped);
	printf("# vfio_fuzz %s: seed %llu, %lu calls: %lu maps and %lu unmaps done, %lu refused, "
	       "%lu mappings proven by DMA\n", vfio_driver_name(variant->driver),
	       (unsigned long long)self->f.seed, self->f.calls, self->maps_ok, self->unmaps_ok,
	       self->refused, self->verified);
	/* nothing pinned or charged once the container and memory are gone */
	release_all(self);
	EXPECT_EQ(0, proc_status_kb("VmLck"));
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_EQ(0, iommu_counter("pages_pinned"));
		EXPECT_EQ(0, iommu_counter("containers"));
	}
	EXPECT_EQ(0, pool_parked_settle());	/* blocks out of their files */
	EXPECT_LT(self->free_kb - FREE_SLACK_KB, free_memory_kb());
	ASSERT_TRUE(ok) TH_LOG("replay: FUZZ_SEED=%llu", (unsigned long long)self->f.seed);
}

TEST_HARNESS_MAIN
