// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_mm - what the rest of the kernel, any process or the admin can do to
 * a zeropinfs file and its mappings must never oops the host, hang a task,
 * lose data or send a device's DMA to the wrong page.
 *
 * Each case makes a 4 MiB file (two 2 MiB blocks) whose every 4 KiB page
 * carries its own index (tagged.h), written with write() and mapped shared
 * and read (one PMD per block; nothing dirtied through the mapping, so a
 * block the mm thinks clean could be dropped), applies one operation (the
 * variant), and then checks, every
 * call bounded by a deadline (bounded.h: a hang is a failure):
 *  - read() gives every page its own tag (blocks the operation punched
 *    read zero), and so does a fresh mapping;
 *  - VFIO MAP_DMA of the mapping succeeds, and edu DMA from IOVA page n
 *    reads file page n;
 *  - a page cleared with pwrite() gets its tag back from a DMA to its
 *    IOVA page, and no other page changes;
 *  - once the file is gone, the pool holds no block in use and the mount
 *    counts nothing as used.
 * Against stock type1 and zeropin's backend. The boot's kernel-log check
 * fails the run on any oops, BUG or WARNING the operations caused.
 *
 * Memory failure (MADV_HWPOISON) kills every task that maps the page: it
 * has a fixture of its own, with the poisoning done in a forked child.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/mempolicy.h>
#include <linux/userfaultfd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "bounded.h"
#include "tagged.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define FILE_SIZE	(2 * TAG_BLOCK)
#define FILE_PATH	ZFS_MNT "/ram"
#define IOVA_BASE	0x100000000ull
#define IOVA_SCRATCH	0x200000000ull
/* Pages read back by DMA: either side of the first block's end, and the
 * ends of the file (a split that shifts IOVAs shows at page 1). The page
 * written by DMA sits one after a block start: in the second block, or in
 * the first when the operation emptied the second. */
static const unsigned long dma_read_pages[] = { 1, 511, 512, 1023 };
#define DMA_WRITE_PAGE(zero_blocks)	((zero_blocks) & 2 ? 1ul : 513ul)

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE		25
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED	24
#endif
#ifndef MADV_SOFT_OFFLINE
#define MADV_SOFT_OFFLINE	101
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#define MADV_POPULATE_WRITE	23
#endif

/* What the operations work on; shared with them (bounded_call()). */
struct mm_case {
	int fd;				/* the file */
	uint8_t *p;			/* its shared mapping, FILE_SIZE */
	int other_node;			/* a NUMA node to move pages to */
	char split_cmd[128];		/* for debugfs split_huge_pages */
};

/* One thing done to the file or mapping. fn returns 0 when the kernel
 * answered as it may (success, or a refusal with a clear errno), else the
 * errno it did not expect. */
struct mm_op {
	int (*fn)(struct mm_case *c);
	unsigned long zero_blocks;	/* blocks it empties (tagged.h) */
};

/* madvise() on [p + off, + len); 0 when it did it or answered ok_errno. */
static int advise(struct mm_case *c, size_t off, size_t len, int advice, int ok_errno)
{
	if (!madvise(c->p + off, len, advice))
		return 0;
	return errno == ok_errno ? 0 : -errno;
}

/* Write s to a /proc or debugfs file. */
static int knob(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int op_nothing(struct mm_case *c)
{
	return 0;
}

/* The reported oops: part of a folio made cold, so the mm splits it. */
static int op_cold_part(struct mm_case *c)
{
	return advise(c, TAG_PAGE, TAG_PAGE, MADV_COLD, 0);
}

static int op_pageout_part(struct mm_case *c)
{
	return advise(c, TAG_PAGE, TAG_PAGE, MADV_PAGEOUT, 0);
}

static int op_cold_pageout_whole(struct mm_case *c)
{
	return advise(c, 0, FILE_SIZE, MADV_COLD, 0) ?: advise(c, 0, FILE_SIZE, MADV_PAGEOUT, 0);
}

/* Every advice an ordinary process may give (MADV_REMOVE, which punches
 * holes, has cases of its own); inapplicable ones answer EINVAL. */
static const int every_advice[] = {
	MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_WILLNEED, MADV_DONTNEED,
	MADV_FREE, MADV_DONTFORK, MADV_DOFORK, MADV_MERGEABLE, MADV_UNMERGEABLE,
	MADV_NOHUGEPAGE, MADV_HUGEPAGE, MADV_DONTDUMP, MADV_DODUMP, MADV_WIPEONFORK,
	MADV_KEEPONFORK, MADV_COLD, MADV_PAGEOUT, MADV_POPULATE_READ,
	MADV_POPULATE_WRITE, MADV_DONTNEED_LOCKED, MADV_COLLAPSE,
};

static int advise_all(struct mm_case *c, size_t off, size_t len)
{
	unsigned int i;
	int ret;

	for (i = 0; i < sizeof(every_advice) / sizeof(every_advice[0]); i++) {
		ret = advise(c, off, len, every_advice[i], EINVAL);
		if (ret)
			return ret;
	}
	return 0;
}

static int op_every_advice_part(struct mm_case *c)
{
	return advise_all(c, TAG_PAGE, TAG_PAGE);
}

static int op_every_advice_whole(struct mm_case *c)
{
	return advise_all(c, 0, FILE_SIZE);
}

/* MADV_REMOVE of less than a block is refused: it would punch a hole
 * zeropinfs cannot have. */
static int op_remove_part(struct mm_case *c)
{
	if (!madvise(c->p + TAG_PAGE, TAG_PAGE, MADV_REMOVE))
		return -EPROTO;
	return errno == EINVAL ? 0 : -errno;
}

static int op_remove_block(struct mm_case *c)
{
	return advise(c, TAG_BLOCK, TAG_BLOCK, MADV_REMOVE, 0);
}

static int op_mlock(struct mm_case *c)
{
	if (mlock(c->p + TAG_PAGE, TAG_PAGE) || munlock(c->p + TAG_PAGE, TAG_PAGE) ||
	    mlock(c->p, FILE_SIZE) || munlock(c->p, FILE_SIZE))
		return errno == ENOMEM || errno == EPERM ? 0 : -errno;
	return 0;
}

static int op_mprotect(struct mm_case *c)
{
	if (mprotect(c->p + TAG_PAGE, TAG_PAGE, PROT_READ) ||
	    mprotect(c->p, FILE_SIZE, PROT_READ) ||
	    mprotect(c->p, FILE_SIZE, PROT_READ | PROT_WRITE))
		return -errno;
	return 0;
}

/* Move the whole mapping to a new 2 MiB-aligned place, then one page of
 * it out and back (which splits the PMD mapping, not the folio). */
static int op_mremap(struct mm_case *c)
{
	uint8_t *area, *to, *page;

	area = mmap(NULL, FILE_SIZE + 2 * TAG_BLOCK, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return -errno;
	to = (uint8_t *)(((uintptr_t)area + TAG_BLOCK) & ~(TAG_BLOCK - 1));
	if (mremap(c->p, FILE_SIZE, FILE_SIZE, MREMAP_MAYMOVE | MREMAP_FIXED, to) == MAP_FAILED)
		return -errno;
	c->p = to;
	page = to + FILE_SIZE + TAG_PAGE;
	if (mremap(c->p + TAG_PAGE, TAG_PAGE, TAG_PAGE, MREMAP_MAYMOVE | MREMAP_FIXED,
		   page) == MAP_FAILED ||
	    mremap(page, TAG_PAGE, TAG_PAGE, MREMAP_MAYMOVE | MREMAP_FIXED,
		   c->p + TAG_PAGE) == MAP_FAILED)
		return -errno;
	return 0;
}

/* Private copies (a MAP_PRIVATE mapping, a child's) written: the file sees
 * none of it. A child's store through the shared mapping is the same
 * tag again. */
static int op_fork_cow(struct mm_case *c)
{
	uint8_t *priv = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, c->fd, 0);
	pid_t pid;
	int status;

	if (priv == MAP_FAILED)
		return -errno;
	memset(priv + 3 * TAG_PAGE, 0xee, TAG_PAGE);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		memset(priv + 4 * TAG_PAGE, 0xdd, TAG_PAGE);
		c->p[2 * TAG_PAGE] = 2;
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -ECHILD;
	return munmap(priv, FILE_SIZE) ? -errno : 0;
}

/* Ask for the pages on another node (the same one in a one-node lab):
 * move_pages, mbind with MPOL_MF_MOVE, migrate_pages. Migration may be
 * refused (EBUSY, EIO, EAGAIN in a page's status); the data must stay. */
static int op_migrate(struct mm_case *c)
{
	unsigned long mask = 1ul << c->other_node, all = ~0ul;
	void *pages[] = { c->p + TAG_PAGE, c->p + TAG_BLOCK + TAG_PAGE };
	int nodes[] = { c->other_node, c->other_node }, status[2];

	syscall(SYS_move_pages, 0, 2, pages, nodes, status, MPOL_MF_MOVE);
	syscall(SYS_mbind, c->p, FILE_SIZE, MPOL_BIND, &mask, 64,
		MPOL_MF_MOVE | MPOL_MF_STRICT);
	syscall(SYS_migrate_pages, 0, 64, &all, &mask);
	if (syscall(SYS_mbind, c->p, FILE_SIZE, MPOL_DEFAULT, NULL, 0, 0))
		return -errno;
	return 0;
}

/* Root: compaction migrates what it can, in every pageblock. */
static int op_compact(struct mm_case *c)
{
	return knob("/proc/sys/vm/compact_memory", "1");
}

/* Root, as operators do: drop clean page cache (zeropinfs has none). */
static int op_drop_caches(struct mm_case *c)
{
	return knob("/proc/sys/vm/drop_caches", "3");
}

static int op_cold_then_drop(struct mm_case *c)
{
	return op_cold_part(c) ?: op_drop_caches(c);
}

/* Soft-dirty tracking, as CRIU does: every PMD goes read-only, and a
 * store to each page must still return. */
static int op_soft_dirty(struct mm_case *c)
{
	unsigned long n;
	int ret = knob("/proc/self/clear_refs", "4");

	if (ret)
		return ret;
	for (n = 0; n < FILE_SIZE / TAG_PAGE; n++)
		((volatile unsigned long *)c->p)[n * TAG_PAGE / sizeof(long)] = n;
	return 0;
}

/* Root: debugfs split_huge_pages asks to split every THP in the range. */
static int op_split_debugfs(struct mm_case *c)
{
	int ret = knob("/sys/kernel/debug/split_huge_pages", c->split_cmd);

	return ret == -EINVAL || ret == -EBUSY || ret == -ENOENT ? 0 : ret;
}

/* Root: soft offline of a page in a block must not lose its data: the
 * page moves, or the request fails (EBUSY). */
static int op_soft_offline(struct mm_case *c)
{
	return advise(c, TAG_PAGE, TAG_PAGE, MADV_SOFT_OFFLINE, EBUSY);
}

static int op_truncate_regrow(struct mm_case *c)
{
	if (ftruncate(c->fd, TAG_BLOCK) || ftruncate(c->fd, FILE_SIZE))
		return -errno;
	return 0;
}

static int op_punch_block(struct mm_case *c)
{
	return fallocate(c->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, TAG_BLOCK) ?
		-errno : 0;
}

#define MM_OP(name, zero) \
	static const struct mm_op mm_##name = { .fn = op_##name, .zero_blocks = (zero) }
MM_OP(nothing, 0);
MM_OP(cold_part, 0);
MM_OP(pageout_part, 0);
MM_OP(cold_pageout_whole, 0);
MM_OP(every_advice_part, 0);
MM_OP(every_advice_whole, 0);
MM_OP(remove_part, 0);
MM_OP(remove_block, 2);
MM_OP(mlock, 0);
MM_OP(mprotect, 0);
MM_OP(mremap, 0);
MM_OP(fork_cow, 0);
MM_OP(migrate, 0);
MM_OP(compact, 0);
MM_OP(drop_caches, 0);
MM_OP(cold_then_drop, 0);
MM_OP(soft_dirty, 0);
MM_OP(split_debugfs, 0);
MM_OP(soft_offline, 0);
MM_OP(truncate_regrow, 2);
MM_OP(punch_block, 1);

FIXTURE(zfs_mm) {
	struct edu edu;
	int container;
	struct mm_case c;
	uint8_t *scratch;	/* one page the device bounces data through */
};

FIXTURE_VARIANT(zfs_mm) {
	enum vfio_driver driver;
	const struct mm_op *op;
};

#define MM_VARIANTS(name) \
	FIXTURE_VARIANT_ADD(zfs_mm, type1_##name) { \
		.driver = DRIVER_TYPE1, .op = &mm_##name }; \
	FIXTURE_VARIANT_ADD(zfs_mm, zeropin_##name) { \
		.driver = DRIVER_ZEROPIN, .op = &mm_##name }
MM_VARIANTS(nothing);
MM_VARIANTS(cold_part);
MM_VARIANTS(pageout_part);
MM_VARIANTS(cold_pageout_whole);
MM_VARIANTS(every_advice_part);
MM_VARIANTS(every_advice_whole);
MM_VARIANTS(remove_part);
MM_VARIANTS(remove_block);
MM_VARIANTS(mlock);
MM_VARIANTS(mprotect);
MM_VARIANTS(mremap);
MM_VARIANTS(fork_cow);
MM_VARIANTS(migrate);
MM_VARIANTS(compact);
MM_VARIANTS(drop_caches);
MM_VARIANTS(cold_then_drop);
MM_VARIANTS(soft_dirty);
MM_VARIANTS(split_debugfs);
MM_VARIANTS(soft_offline);
MM_VARIANTS(truncate_regrow);
MM_VARIANTS(punch_block);

/* A node other than the one we run on, if the lab has two. */
static int other_node(void)
{
	int node = 0;
	FILE *f = fopen("/sys/devices/system/node/node1/meminfo", "r");

	if (f) {
		node = 1;
		fclose(f);
	}
	return node;
}

/* What both fixtures start from: zeropin with a small pool, a mount, an
 * edu in a container of the driver's, and a scratch page the device
 * bounces data through, mapped at IOVA_SCRATCH. Returns the container. */
static int lab_setup(struct __test_metadata *_metadata, enum vfio_driver driver,
		     struct edu *e, uint8_t **scratch)
{
	int container;

	zeropin_reset();
	zeropin_load("pool_mib=16");
	vfio_driver_use(driver);
	zfs_mount(ZFS_MNT, "size=64M");
	container = edu_setup(e, 0, VFIO_TYPE1v2_IOMMU);
	*scratch = mmap(NULL, TAG_PAGE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, *scratch);
	vfio_map(container, *scratch, IOVA_SCRATCH, TAG_PAGE);
	return container;
}

FIXTURE_SETUP(zfs_mm)
{
	self->container = lab_setup(_metadata, variant->driver, &self->edu, &self->scratch);
	self->c.fd = zfs_create(FILE_PATH, FILE_SIZE);
	self->c.other_node = other_node();
}

FIXTURE_TEARDOWN(zfs_mm)
{
	edu_close(&self->edu);
	close(self->container);
	zeropin_reset();
}

/* Read file page n by DMA (IOVA page n -> device -> scratch page). */
static int __dma_read_page(struct edu *e, uint8_t *scratch, unsigned long n)
{
	memset(scratch, 0, TAG_PAGE);
	return __edu_dma(e, IOVA_BASE + n * TAG_PAGE, EDU_DMA_MAX, false) ?:
	       __edu_dma(e, IOVA_SCRATCH, EDU_DMA_MAX, true);
}

/* Write page n's tag to IOVA page n by DMA (scratch -> device -> IOVA). */
static int __dma_write_tag(struct edu *e, uint8_t *scratch, unsigned long n)
{
	tag_fill(scratch, n);
	return __edu_dma(e, IOVA_SCRATCH, EDU_DMA_MAX, false) ?:
	       __edu_dma(e, IOVA_BASE + n * TAG_PAGE, EDU_DMA_MAX, true);
}

/* A tag's first EDU_DMA_MAX bytes (what one edu DMA moves). */
static bool dma_matches(const uint8_t *got, unsigned long n, unsigned long zero_blocks)
{
	uint8_t want[TAG_PAGE];

	memset(want, 0, sizeof(want));
	if (!(zero_blocks & (1ul << (n * TAG_PAGE / TAG_BLOCK))))
		tag_fill(want, n);
	return !memcmp(got, want, EDU_DMA_MAX);
}

struct map_job {
	int container;
	void *vaddr;
	int ret;
};

static int map_job(void *arg)
{
	struct map_job *j = arg;

	return __vfio_map(j->container, j->vaddr, IOVA_BASE, FILE_SIZE,
			  VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
}

/* Clear one page of the file through write(): the part one edu DMA
 * writes back. */
struct clear_job {
	int fd;
	unsigned long n;
};

static int clear_job(void *arg)
{
	struct clear_job *j = arg;
	uint8_t page[TAG_PAGE];

	memset(page, 0, sizeof(page));
	return pwrite(j->fd, page, EDU_DMA_MAX, j->n * TAG_PAGE) == EDU_DMA_MAX ? 0 : -EIO;
}

/* Every check after the operation (see the top of the file). */
static void check_file(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_mm) *self,
		       unsigned long zero_blocks)
{
	struct map_job mj = { .container = self->container, .vaddr = self->c.p };
	struct clear_job cj = { .fd = self->c.fd, .n = DMA_WRITE_PAGE(zero_blocks) };
	uint8_t *fresh;
	unsigned int i;
	long bad;
	int ret;

	ret = __tags_check_read(self->c.fd, FILE_SIZE, zero_blocks, &bad);
	ASSERT_EQ(0, ret) TH_LOG("read(): %s, page %ld", bounded_str(ret), bad);
	fresh = map_file(self->c.fd, FILE_SIZE, MAP_SHARED);
	ret = __tags_check_map(fresh, FILE_SIZE, zero_blocks, &bad);
	ASSERT_EQ(0, ret) TH_LOG("fresh mapping: %s, page %ld", bounded_str(ret), bad);
	munmap(fresh, FILE_SIZE);

	ret = bounded_call(map_job, &mj, BOUNDED_MS);
	ASSERT_EQ(0, ret) TH_LOG("MAP_DMA: %s", bounded_str(ret));
	for (i = 0; i < sizeof(dma_read_pages) / sizeof(dma_read_pages[0]); i++) {
		ASSERT_EQ(0, __dma_read_page(&self->edu, self->scratch, dma_read_pages[i]));
		EXPECT_TRUE(dma_matches(self->scratch, dma_read_pages[i], zero_blocks))
			TH_LOG("DMA from IOVA page %lu did not read file page %lu",
			       dma_read_pages[i], dma_read_pages[i]);
	}
	ret = bounded_call(clear_job, &cj, BOUNDED_MS);
	ASSERT_EQ(0, ret) TH_LOG("pwrite(): %s", bounded_str(ret));
	ASSERT_EQ(0, __dma_write_tag(&self->edu, self->scratch, cj.n));
	vfio_unmap(self->container, IOVA_BASE, FILE_SIZE);
	/* the DMA put the cleared page's tag back there, and nowhere else */
	ret = __tags_check_read(self->c.fd, FILE_SIZE, zero_blocks, &bad);
	EXPECT_EQ(0, ret) TH_LOG("after DMA write to page %lu: %s, page %ld", cj.n,
				 bounded_str(ret), bad);
}

/* The file gone: no block in use, nothing counted against the mount. */
static void check_released(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_mm) *self)
{
	struct statfs st;

	munmap(self->c.p, FILE_SIZE);
	close(self->c.fd);
	ASSERT_EQ(0, unlink(FILE_PATH));
	EXPECT_EQ(0, pool_wait("inuse_mib", 0, 5000))
		TH_LOG("inuse_mib %ld", pool_read("inuse_mib"));
	EXPECT_EQ(0, pool_counter("inuse"));
	ASSERT_EQ(0, statfs(ZFS_MNT, &st));
	EXPECT_EQ(st.f_blocks, st.f_bfree);
}

TEST_F(zfs_mm, operation_keeps_every_page_in_place)
{
	unsigned long zero_blocks = variant->op->zero_blocks;
	int ret;

	ASSERT_EQ(0, __tags_write(self->c.fd, FILE_SIZE));
	self->c.p = map_file(self->c.fd, FILE_SIZE, MAP_SHARED);
	touch_range(self->c.p, FILE_SIZE, false);
	snprintf(self->c.split_cmd, sizeof(self->c.split_cmd), "%d,%#lx,%#lx", getpid(),
		 (unsigned long)self->c.p, (unsigned long)self->c.p + FILE_SIZE);

	ret = bounded_call((int (*)(void *))variant->op->fn, &self->c, BOUNDED_MS);
	ASSERT_EQ(0, ret) TH_LOG("operation: %s", bounded_str(ret));
	/* what the operation emptied is refilled, zero, by the checks */
	check_file(_metadata, self, zero_blocks);
	check_released(_metadata, self);
}

/*
 * A file smaller than its block: write() 4 KiB, map those 4 KiB, make them
 * cold (the mm then tries to split the block and drop the pages past EOF),
 * and write the next page. Reported as a NULL dereference in the split or
 * a write() that never returns.
 */
struct small_job {
	int fd;
	uint8_t *p;
};

static int small_cold_job(void *arg)
{
	struct small_job *j = arg;
	uint8_t page[TAG_PAGE];

	j->p[0] = 0;	/* tag 0's first byte, again: dirties the block */
	if (madvise(j->p, TAG_PAGE, MADV_COLD) && errno != EINVAL)
		return -errno;
	tag_fill(page, 1);
	return pwrite(j->fd, page, TAG_PAGE, TAG_PAGE) == TAG_PAGE ? 0 : -errno;
}

TEST(small_file_made_cold_keeps_its_pages)
{
	struct small_job j;
	uint8_t page[TAG_PAGE];
	long bad;
	int ret;

	zeropin_reset();
	zeropin_load("");
	zfs_mount(ZFS_MNT, "size=16M");
	j.fd = open(FILE_PATH, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, j.fd);
	tag_fill(page, 0);
	ASSERT_EQ(TAG_PAGE, write(j.fd, page, TAG_PAGE));
	j.p = map_file(j.fd, TAG_PAGE, MAP_SHARED);
	ret = bounded_call(small_cold_job, &j, BOUNDED_MS);
	ASSERT_EQ(0, ret) TH_LOG("MADV_COLD, then write(): %s", bounded_str(ret));
	ret = __tags_check_read(j.fd, 2 * TAG_PAGE, 0, &bad);
	EXPECT_EQ(0, ret) TH_LOG("read(): %s, page %ld", bounded_str(ret), bad);
	munmap(j.p, TAG_PAGE);
	close(j.fd);
	ASSERT_EQ(0, unlink(FILE_PATH));
	EXPECT_EQ(0, pool_counter("inuse"));
	zfs_umount(ZFS_MNT);
	zeropin_reset();
}

/*
 * A task killed while the kernel copies into its zeropinfs mapping: read()
 * of one zeropinfs file into a mapping of another whose blocks are not
 * there yet (each fault takes a block, zeroed on the spot: the pool is
 * empty; zeropinfs' read loop does not look for signals between pages). A
 * fault that sees the fatal signal must make the copy fail, not have the
 * kernel retry it forever.
 */
#define COPY_SIZE	(256ul << 20)
#define COPY_DST	ZFS_MNT "/dst"

TEST(killed_while_the_kernel_copies_into_a_mapping_exits)
{
	int src, dst, ret;
	uint8_t *p;
	pid_t pid;

	zeropin_reset();
	zeropin_load("");
	zfs_mount(ZFS_MNT, "size=1G");
	src = zfs_create(FILE_PATH, COPY_SIZE);
	dst = zfs_create(COPY_DST, COPY_SIZE);
	p = map_file(dst, COPY_SIZE, MAP_SHARED);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(read(src, p, COPY_SIZE) < 0);
	usleep(100 * 1000);
	ret = kill_and_reap(pid, BOUNDED_MS);
	EXPECT_EQ(0, ret) TH_LOG("the killed task is still there: %s", bounded_str(ret));
	munmap(p, COPY_SIZE);
	close(dst);
	close(src);
	ASSERT_EQ(0, unlink(FILE_PATH));
	ASSERT_EQ(0, unlink(COPY_DST));
	zfs_umount(ZFS_MNT);
	zeropin_reset();
}

/*
 * A store past EOF inside a file's last block: SIGBUS where the kernel
 * maps that block with PTEs (6.12); where it maps it with a PMD (6.1) the
 * store lands in the block, and must never become file content when the
 * file grows over it.
 */
static int store_past_eof_job(void *arg)
{
	((volatile uint8_t *)arg)[0] = 0xee;
	return 0;
}

TEST(store_past_eof_never_becomes_file_content)
{
	uint8_t page[TAG_PAGE], *p;
	long bad;
	int fd, ret;

	zeropin_reset();
	zeropin_load("");
	zfs_mount(ZFS_MNT, "size=16M");
	fd = open(FILE_PATH, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, fd);
	tag_fill(page, 0);
	ASSERT_EQ(TAG_PAGE, write(fd, page, TAG_PAGE));
	p = map_file(fd, TAG_BLOCK, MAP_SHARED);
	touch_range(p, TAG_PAGE, false);	/* maps the block: PTE or PMD */
	ret = bounded_call(store_past_eof_job, p + TAG_PAGE + 100, BOUNDED_MS);
	ASSERT_TRUE(ret == 0 || ret == BOUNDED_SIG(SIGBUS)) TH_LOG("%s", bounded_str(ret));
	TH_LOG("store past EOF: %s", ret ? "SIGBUS" : "landed in the block");
	/* grow the file over it: pages 1..3 read zero, as a hole must */
	tag_fill(page, 4);
	ASSERT_EQ(TAG_PAGE, pwrite(fd, page, TAG_PAGE, 4 * TAG_PAGE));
	memset(page, 0, sizeof(page));
	for (unsigned long n = 1; n < 4; n++) {
		ASSERT_EQ(TAG_PAGE, pread(fd, page, TAG_PAGE, n * TAG_PAGE));
		EXPECT_TRUE(tag_matches(page, n, 1)) TH_LOG("page %lu is not zero", n);
	}
	ret = __tags_check_read(fd, TAG_PAGE, 0, &bad);
	EXPECT_EQ(0, ret);
	munmap(p, TAG_BLOCK);
	close(fd);
	ASSERT_EQ(0, unlink(FILE_PATH));
	zfs_umount(ZFS_MNT);
	zeropin_reset();
}

/*
 * Memory failure (root, as rasdaemon or a machine check would): page 1 of
 * the file is poisoned from a forked child that maps it (memory failure
 * may kill every task mapping the page). zeropinfs keeps the block whole,
 * so the kernel cannot isolate the page: that page then gives -EIO to
 * read() and write(), SIGBUS through a new mapping, and MAP_DMA over it
 * fails as it does with type1, pinning nothing; the rest of the file
 * stays readable, writable and mappable for DMA. Once the file is gone the
 * block is set aside, never given back to the page allocator (which keeps
 * poisoned pages out of its free lists only one page at a time).
 */
FIXTURE(zfs_poison) {
	struct edu edu;
	int container;
	int fd;
	uint8_t *scratch;
};

FIXTURE_VARIANT(zfs_poison) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(zfs_poison, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(zfs_poison, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(zfs_poison)
{
	self->container = lab_setup(_metadata, variant->driver, &self->edu, &self->scratch);
	self->fd = zfs_create(FILE_PATH, FILE_SIZE);
	ASSERT_EQ(0, __tags_write(self->fd, FILE_SIZE));
}

FIXTURE_TEARDOWN(zfs_poison)
{
	edu_close(&self->edu);
	close(self->container);
	zeropin_reset();
}

/* In a forked child: map the file and poison page 1. */
static int poison_job(void *arg)
{
	int fd = *(int *)arg;
	uint8_t *p = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	(void)*(volatile uint8_t *)(p + TAG_PAGE);
	if (madvise(p + TAG_PAGE, TAG_PAGE, MADV_HWPOISON))
		return errno == EBUSY || errno == EHWPOISON ? 0 : -errno;
	return 0;
}

/* Page 1 of the file poisoned (poison_job()); the child mapping it may die
 * of the SIGBUS memory failure sends. */
static void poison_page_1(struct __test_metadata *_metadata, int fd)
{
	int ret = bounded_fork(poison_job, &fd, BOUNDED_MS);

	ASSERT_TRUE(ret == 0 || ret == BOUNDED_SIG(SIGBUS))
		TH_LOG("MADV_HWPOISON: %s", bounded_str(ret));
}

/* One page through read() or write(). */
struct page_io {
	int fd;
	unsigned long n;
	bool write;
};

static int page_io_job(void *arg)
{
	struct page_io *io = arg;
	uint8_t page[TAG_PAGE];
	ssize_t ret;

	tag_fill(page, io->n);
	if (io->write)
		ret = pwrite(io->fd, page, TAG_PAGE, io->n * TAG_PAGE);
	else
		ret = pread(io->fd, page, TAG_PAGE, io->n * TAG_PAGE);
	if (ret < 0)
		return -errno;
	return tag_matches(page, io->n, 0) ? 0 : -EILSEQ;
}

static int touch_job(void *arg)
{
	return *(volatile uint8_t *)arg;
}

/* A page of the file read through its mapping: its own tag. */
struct map_read {
	const uint8_t *p;	/* the mapping */
	unsigned long n;	/* the page */
};

static int map_read_job(void *arg)
{
	struct map_read *mr = arg;

	return tag_matches(mr->p + mr->n * TAG_PAGE, mr->n, 0) ? 0 : -EILSEQ;
}

TEST_F(zfs_poison, poisoned_page_is_refused_and_the_rest_kept)
{
	struct page_io io = { .fd = self->fd };
	struct map_job mj = { .container = self->container };
	long pinned = iommu_counter("pages_pinned"), poisoned = pool_counter("poisoned");
	static const unsigned long kept[] = { 0, 2, 511, 512, 1023 };
	uint8_t *p;
	unsigned int i;
	int ret;

	poison_page_1(_metadata, self->fd);
	io.n = 1;
	EXPECT_EQ(-EIO, bounded_call(page_io_job, &io, BOUNDED_MS));
	io.write = true;
	EXPECT_EQ(-EIO, bounded_call(page_io_job, &io, BOUNDED_MS));
	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		io.n = kept[i];
		io.write = false;
		ret = bounded_call(page_io_job, &io, BOUNDED_MS);
		EXPECT_EQ(0, ret) TH_LOG("read page %lu: %s", io.n, bounded_str(ret));
		io.write = true;
		ret = bounded_call(page_io_job, &io, BOUNDED_MS);
		EXPECT_EQ(0, ret) TH_LOG("write page %lu: %s", io.n, bounded_str(ret));
	}

	p = map_file(self->fd, FILE_SIZE, MAP_SHARED);
	ret = bounded_call(touch_job, p + TAG_PAGE, BOUNDED_MS);
	EXPECT_EQ(BOUNDED_SIG(SIGBUS), ret) TH_LOG("touching the page: %s", bounded_str(ret));
	/* the block's healthy pages map and read right (7.2's finish_fault()
	 * maps a whole block at once: not with its poisoned page in it) */
	for (i = 0; i < 3; i++) {
		struct map_read mr = { .p = p, .n = kept[i] };

		ret = bounded_call(map_read_job, &mr, BOUNDED_MS);
		EXPECT_EQ(0, ret) TH_LOG("page %lu through the mapping: %s", mr.n, bounded_str(ret));
	}
	mj.vaddr = p;
	ret = bounded_call(map_job, &mj, BOUNDED_MS);
	EXPECT_TRUE(ret == -EFAULT || ret == -EHWPOISON)
		TH_LOG("MAP_DMA over the page: %s", bounded_str(ret));
	EXPECT_EQ(pinned, iommu_counter("pages_pinned"));
	/* the other block maps and reads right by DMA */
	vfio_map(self->container, p + TAG_BLOCK, IOVA_BASE + TAG_BLOCK, TAG_BLOCK);
	ASSERT_EQ(0, __dma_read_page(&self->edu, self->scratch, 513));
	EXPECT_TRUE(dma_matches(self->scratch, 513, 0));
	vfio_unmap(self->container, IOVA_BASE + TAG_BLOCK, TAG_BLOCK);
	munmap(p, FILE_SIZE);
	close(self->fd);
	ASSERT_EQ(0, unlink(FILE_PATH));
	EXPECT_EQ(0, pool_wait("inuse_mib", 0, 5000));
	EXPECT_EQ(poisoned + 1, pool_counter("poisoned"));
}

/*
 * Threads faulting the healthy pages of a block with a poisoned one, each
 * zapping the block's PTEs (MADV_DONTNEED) before every touch: where the
 * kernel maps a whole block at once (7.2; zfs_fault_one_page()), a fault
 * that finds the block locked by another or its page already mapped maps
 * nothing, and must be retried, never SIGBUS (under KVM an -EFAULT that
 * kills the VM). Half the threads write, half read; every page keeps its
 * own tag.
 */
#define RACE_THREADS	4
#define RACE_ROUNDS	2000
/* Seconds the race test may take: past its own deadline (bounded_fork(),
 * 4 * BOUNDED_MS), which says whether the faults hung; the harness's 30 s
 * cut it short on the debug lab kernel under load. */
#define RACE_TIMEOUT	(4 * BOUNDED_MS / 1000 + 60)

struct race_thread {
	uint8_t *p;		/* the shared mapping */
	unsigned long n;	/* this thread's page, in the poisoned block */
	bool write;
	int err;		/* 0, or -EILSEQ: a wrong tag */
};

static void *race_thread_fn(void *arg)
{
	struct race_thread *t = arg;
	volatile uint8_t *b = t->p + t->n * TAG_PAGE;
	int i;

	for (i = 0; i < RACE_ROUNDS; i++) {
		madvise(t->p, TAG_BLOCK, MADV_DONTNEED);
		if (t->write)
			b[0] = b[0];
		else
			(void)b[0];
	}
	if (!tag_matches(t->p + t->n * TAG_PAGE, t->n, 0))
		t->err = -EILSEQ;
	return NULL;
}

/* In a forked child: RACE_THREADS threads over pages 2.. of the file's
 * first block (page 1 poisoned); a SIGBUS kills the child. */
static int race_job(void *arg)
{
	int fd = *(int *)arg;
	struct race_thread t[RACE_THREADS];
	pthread_t tid[RACE_THREADS];
	uint8_t *p = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int i, err = 0;

	if (p == MAP_FAILED)
		return -errno;
	for (i = 0; i < RACE_THREADS; i++) {
		t[i] = (struct race_thread){ .p = p, .n = 2 + i * 100, .write = i & 1 };
		if (pthread_create(&tid[i], NULL, race_thread_fn, &t[i]))
			return -EAGAIN;
	}
	for (i = 0; i < RACE_THREADS; i++) {
		pthread_join(tid[i], NULL);
		err = err ?: t[i].err;
	}
	return err;
}

TEST_F_TIMEOUT(zfs_poison, racing_faults_on_a_poisoned_block_never_sigbus, RACE_TIMEOUT)
{
	int ret;

	poison_page_1(_metadata, self->fd);
	ret = bounded_fork(race_job, &self->fd, 4 * BOUNDED_MS);
	EXPECT_EQ(0, ret) TH_LOG("%d threads faulting the block's healthy pages %d times each: %s",
				 RACE_THREADS, RACE_ROUNDS, bounded_str(ret));
	close(self->fd);
	ASSERT_EQ(0, unlink(FILE_PATH));
	EXPECT_EQ(0, pool_wait("inuse_mib", 0, 5000));
}

/*
 * The same block's healthy page read in a mapping userfaultfd write-protects
 * (asynchronous mode, which any memory type takes and which marks empty
 * PTEs): the fault finishes. Fault-around skips a marked PTE, so a
 * fault mapped that way (7.2, zfs_fault_one_page()) would map nothing and
 * retry for ever; finish_fault() maps the page itself there. Kernels
 * before 6.7 have no asynchronous mode: skipped.
 */
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC	(1 << 15)
#endif

static int uffd_wp_read_job(void *arg)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_WP };
	struct uffdio_writeprotect wp = { .mode = UFFDIO_WRITEPROTECT_MODE_WP };
	int fd = *(int *)arg, uffd;
	uint8_t *p = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	uffd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api))
		return -EOPNOTSUPP;
	reg.range = (struct uffdio_range){ .start = (unsigned long)p, .len = FILE_SIZE };
	if (ioctl(uffd, UFFDIO_REGISTER, &reg))
		return -EOPNOTSUPP;
	wp.range = reg.range;
	if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp))
		return -errno;
	return tag_matches(p + 2 * TAG_PAGE, 2, 0) ? 0 : -EILSEQ;
}

TEST_F(zfs_poison, uffd_write_protected_poisoned_block_faults_finish)
{
	int ret;

	poison_page_1(_metadata, self->fd);
	ret = bounded_fork(uffd_wp_read_job, &self->fd, BOUNDED_MS);
	if (ret == -EOPNOTSUPP)
		SKIP(return, "no asynchronous userfaultfd write-protect on a file mapping (6.7 on)");
	EXPECT_EQ(0, ret) TH_LOG("a healthy page read under uffd-wp: %s", bounded_str(ret));
}

/*
 * A block the file let go of while the kernel's type1 still pins it is
 * parked (park.c) to be checked for poison once the pin goes; type1's pin
 * outlives the mount, so until then the module stays: an unload would hand
 * the block to type1's unpin unchecked. Zeropin's backend holds the module
 * through its container anyway.
 */
TEST_F(zfs_poison, unload_waits_for_a_pin_on_a_parked_block)
{
	uint8_t *p;

	if (variant->driver != DRIVER_TYPE1)
		SKIP(return, "zeropin's backend holds the module through its container");
	p = map_file(self->fd, FILE_SIZE, MAP_SHARED);
	vfio_map(self->container, p, IOVA_BASE, FILE_SIZE);
	munmap(p, FILE_SIZE);
	close(self->fd);
	ASSERT_EQ(0, unlink(FILE_PATH));
	EXPECT_EQ(FILE_SIZE / TAG_BLOCK, pool_counter("parked"));
	ASSERT_EQ(0, umount2(ZFS_MNT, 0));
	EXPECT_EQ(-EAGAIN, __zeropin_unload());
	vfio_unmap(self->container, IOVA_BASE, FILE_SIZE);
	EXPECT_EQ(0, pool_parked_settle());
	EXPECT_EQ(0, __zeropin_unload());
}

/*
 * Memory failure on a block idle in the pool (root, as a patrol scrub or a
 * machine check would report it: hwpoison-inject's corrupt-pfn on a page
 * inside a zero block, by its pfn from debugfs pool_blocks). The kernel
 * cannot handle a page it does not know and only marks it; the pool must
 * set the block aside at once (counted), and files faulted in and mapped
 * for DMA afterwards, more than the pool holds, never get a page of it:
 * not mapped, not pinned, not DMA-mapped, and DMA through the mapping
 * lands where it should.
 */
#define HWPOISON_KO		"/lib/modules/lab/hwpoison/hwpoison-inject.ko"
#define HWPOISON_PFN		"/sys/kernel/debug/hwpoison/corrupt-pfn"
#define POOL_BLOCKS		"/sys/kernel/debug/zeropin/pool_blocks"
#define IDLE_POOL_MIB		16
#define IDLE_FILE_SIZE		(32ul << 20)	/* more than the pool holds */

FIXTURE(idle_poison) {
	struct edu edu;
	int container;
	uint8_t *scratch;
};

FIXTURE_VARIANT(idle_poison) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(idle_poison, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(idle_poison, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(idle_poison)
{
	int ret;

	self->container = lab_setup(_metadata, variant->driver, &self->edu, &self->scratch);
	ret = access(HWPOISON_PFN, W_OK) ? __insmod(HWPOISON_KO, "") : 0;
	if (ret && ret != -EEXIST)
		SKIP(return, "no hwpoison-inject (%s): %s", HWPOISON_KO, strerror(-ret));
	ASSERT_EQ(0, pool_wait("zero_mib", IDLE_POOL_MIB, 60000));
}

FIXTURE_TEARDOWN(idle_poison)
{
	edu_close(&self->edu);
	close(self->container);
	zeropin_reset();
}

/* The first zero block pool_blocks lists, and whether pfn's block is
 * still listed (want: that block's first pfn; 0 for the first zero one). */
static unsigned long pool_block(unsigned long want)
{
	char line[128], state[16];
	unsigned long pfn, found = 0;
	int nid;
	FILE *f = fopen(POOL_BLOCKS, "r");

	while (f && !found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%d %lx %15s", &nid, &pfn, state) == 3 &&
		    (want ? pfn == want : !strcmp(state, "zero")))
			found = pfn;
	if (f)
		fclose(f);
	return found;
}

TEST_F(idle_poison, poisoned_idle_block_is_never_handed_out)
{
	long poisoned = pool_counter("poisoned");
	unsigned long block, n, bad = 0;
	char pfn[32];
	uint8_t *p;
	int fd, ret;

	block = pool_block(0);
	ASSERT_NE(0, block) TH_LOG("no zero block in %s", POOL_BLOCKS);
	snprintf(pfn, sizeof(pfn), "%#lx", block + 1);
	ret = __write_file(HWPOISON_PFN, pfn);	/* EBUSY: a page it cannot handle */
	ASSERT_TRUE(ret == 0 || ret == -EBUSY) TH_LOG("corrupt-pfn %s: %s", pfn, strerror(-ret));
	/* set aside at once, not when it is next handed out (where the
	 * kernel reports no memory failure: a kernel without tracepoints,
	 * every block is checked page by page at hand-out instead) */
	if (pool_counter("poison_watched") == 1) {
		EXPECT_EQ(poisoned + 1, pool_counter("poisoned"));
		EXPECT_EQ(0, pool_block(block)) TH_LOG("block %#lx is still in the pool", block);
	} else {
		TH_LOG("no memory failure reports: the block goes at hand-out");
	}

	fd = zfs_create(FILE_PATH, IDLE_FILE_SIZE);
	p = map_file(fd, IDLE_FILE_SIZE, MAP_SHARED);
	touch_range(p, IDLE_FILE_SIZE, true);
	vfio_map(self->container, p, IOVA_BASE, IDLE_FILE_SIZE);
	for (n = 0; n < IDLE_FILE_SIZE / TAG_PAGE; n++) {
		uint64_t f = pfn_of(p + n * TAG_PAGE);

		if (f >= block && f < block + TAG_BLOCK / TAG_PAGE)
			bad++;
	}
	EXPECT_EQ(0, bad) TH_LOG("%lu pages of the poisoned block mapped", bad);
	edu_verify(&self->edu, p, IOVA_BASE, IDLE_FILE_SIZE);
	vfio_unmap(self->container, IOVA_BASE, IDLE_FILE_SIZE);
	munmap(p, IDLE_FILE_SIZE);
	close(fd);
	ASSERT_EQ(0, unlink(FILE_PATH));
	EXPECT_EQ(poisoned + 1, pool_counter("poisoned"));
}

/*
 * Memory failure on a block mapped for DMA whose file is gone (a VMM that
 * closed and unlinked its RAM before its container): the DMA mapping
 * holds the block's last reference (zeropin's backend) or pin (type1,
 * the pool keeping its reference until the pin goes), and at UNMAP_DMA
 * the block must be set aside (counted), not given back to the page
 * allocator with a poisoned page inside (it keeps poisoned pages out of
 * its free lists only one at a time). The pool's target is 0 meanwhile,
 * so no refill takes a freed block straight back.
 */
#define PARK_WAIT_MS		5000	/* park.c looks every second */

TEST_F(idle_poison, dma_mapped_block_poisoned_after_its_file_is_gone)
{
	long poisoned = pool_counter("poisoned");
	uint64_t block;
	char pfn[32];
	uint8_t *p;
	int fd, ret;

	fd = zfs_create(FILE_PATH, FILE_SIZE);
	p = map_file(fd, FILE_SIZE, MAP_SHARED);
	touch_range(p, FILE_SIZE, true);
	vfio_map(self->container, p, IOVA_BASE, FILE_SIZE);
	block = pfn_of(p);
	ASSERT_NE(0, block);
	ASSERT_EQ(0, block % (TAG_BLOCK / TAG_PAGE));
	pool_write("target_mib", 0);
	munmap(p, FILE_SIZE);
	close(fd);
	ASSERT_EQ(0, unlink(FILE_PATH));
	EXPECT_EQ(0, pool_wait("inuse_mib", 0, 5000));

	/* EHWPOISON: memory_failure() could not split the block, EBUSY: it
	 * could not take it; either way the page is marked */
	snprintf(pfn, sizeof(pfn), "%#lx", (unsigned long)block + 1);
	ret = __write_file(HWPOISON_PFN, pfn);
	ASSERT_TRUE(ret == 0 || ret == -EBUSY || ret == -EHWPOISON)
		TH_LOG("corrupt-pfn %s: %s", pfn, strerror(-ret));
	vfio_unmap(self->container, IOVA_BASE, FILE_SIZE);
	EXPECT_EQ(0, pool_counter_wait("poisoned", poisoned + 1, PARK_WAIT_MS))
		TH_LOG("poisoned: %ld, was %ld", pool_counter("poisoned"), poisoned);
	EXPECT_EQ(1, pfn_block_held(block))
		TH_LOG("the poisoned block at pfn %#lx went back to the page allocator",
		       (unsigned long)block);
	EXPECT_EQ(0, pool_counter("parked"));
}

TEST_HARNESS_MAIN
