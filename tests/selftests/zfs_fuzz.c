// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_fuzz - a seeded, bounded fuzzer of zeropinfs (tests/lib/fuzz.h:
 * FUZZ_SEED replays a run, FUZZ_CALLS and FUZZ_SECONDS make it longer).
 * Random calls on a few files of a small mount, many of them what an
 * ordinary process or the admin may do to a VMM's guest RAM:
 *   create, ftruncate (aligned, unaligned, negative), pwrite and pread,
 *   fallocate in every mode (supported ones and the rest), mmap, stores
 *   through the mapping (inside and past EOF), madvise with every advice
 *   that applies to a file (MADV_REMOVE, PAGEOUT, COLD, POPULATE_*,
 *   COLLAPSE, ...), mremap, munmap, VFIO MAP_DMA of the mapping through
 *   zeropin's backend (pinned) and UNMAP_DMA, link, rename and unlink while
 *   mapped or pinned, umount while busy, drop_caches;
 * the file and memory calls each in a child with a deadline (bounded.h: a
 * hang fails the run; the VFIO, name and umount calls run directly). A
 * shadow copy of every file says what it must hold: pread of any range
 * must match it at every step, and so must the edu's DMA through a pinned
 * range the file still holds. A mount that is full may refuse (ENOSPC,
 * SIGBUS on a store); nothing else may fail that the model allows.
 * After the run: every file matches its shadow, and once all is closed,
 * unmapped and unlinked, nothing is pinned, the pool holds no block in
 * use, the mount counts nothing used, and free memory is back. The boot's
 * kernel-log check fails the run on any oops, BUG or WARNING.
 *
 * Prints the line make check's reliability summary reads:
 *   # zfs_fuzz: seed S, N calls: ...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "bounded.h"
#include "fuzz.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define FUZZ_CALLS_DEFAULT	1500
#define FUZZ_SECONDS_DEFAULT	25
/* File names the calls pick from, and files alive at once (names, plus
 * unlinked ones still open). */
#define NNAMES		6
#define MAX_INODES	8
/* Files stay below MAX_FILE; the mount holds fewer blocks than the files
 * could, so ENOSPC comes up. */
#define MAX_FILE	(16ul << 20)
#define MOUNT_MIB	48
#define IOVA_BASE	0x100000000ull
#define IOVA_STRIDE	0x100000000ull	/* one IOVA window per inode */
#define SCRATCH_IOVA	0x10000000ull	/* where the DMA check lands */
/* One DMA check reads this much of a pinned file range. */
#define CHECK_LEN	EDU_DMA_MAX
/* Free memory may wander this much for reasons of its own. */
#define FREE_SLACK_KB	(64 * 1024)
#define PAGE		4096ul

struct ino {
	bool live;		/* the file exists (a name, or an open fd) */
	int fd;			/* open O_RDWR while live */
	int nlink;		/* names it has */
	size_t size;		/* the model's i_size */
	uint8_t *shadow;	/* MAX_FILE bytes: what the file holds (zero past size) */
	uint8_t *map;		/* a MAP_SHARED mapping of offset 0, or NULL */
	size_t maplen;		/* its length */
	size_t pinlen;		/* MAP_DMA'd [0, pinlen) at its IOVA window; 0: none */
	bool pin_valid;		/* no truncation or punch since: DMA sees the file */
};

FIXTURE(zfs_fuzz) {
	struct fuzz f;
	struct ino ino[MAX_INODES];
	int names[NNAMES];	/* inode index of each name, -1: none */
	struct edu edu;
	int container;
	uint8_t *scratch;	/* CHECK_LEN+ bytes mapped at SCRATCH_IOVA */
	uint8_t *buf;		/* MAX_FILE bytes for pread/pwrite */
	long free_kb;		/* free memory before the run */
	unsigned long done, refused, enospc, sigbus, dma_checks, mismatches;
};

static void name_path(int n, char *path, size_t len)
{
	snprintf(path, len, ZFS_MNT "/f%d", n);
}

/* --- risky calls, each run by bounded_call() in a child with a deadline --- */

struct call {
	int op;
	int fd;
	long a, b, c;
	void *p, *q;
	size_t len;
};

enum { C_TRUNC, C_PWRITE, C_PREAD, C_FALLOC, C_STORE, C_MADVISE, C_MREMAP };

/* Runs in the child: system calls and memcpy only. */
static int do_call(void *arg)
{
	struct call *c = arg;
	ssize_t n;

	switch (c->op) {
	case C_TRUNC:
		return ftruncate(c->fd, c->a) ? -errno : 0;
	case C_PWRITE:
		n = pwrite(c->fd, c->p, c->len, c->a);
		c->b = n;
		return n < 0 ? -errno : 0;
	case C_PREAD:
		n = pread(c->fd, c->p, c->len, c->a);
		c->b = n;
		return n < 0 ? -errno : 0;
	case C_FALLOC:
		return fallocate(c->fd, c->c, c->a, c->b) ? -errno : 0;
	case C_STORE:
		memcpy(c->p, c->q, c->len);
		return 0;
	case C_MADVISE:
		return madvise(c->p, c->len, c->a) ? -errno : 0;
	case C_MREMAP:
		c->q = mremap(c->p, c->len, c->a, MREMAP_MAYMOVE);
		return c->q == MAP_FAILED ? -errno : 0;
	}
	return -EINVAL;
}

static int bounded(struct __test_metadata *_metadata, struct call *c)
{
	int ret = bounded_call(do_call, c, BOUNDED_MS);

	if (ret == -ETIMEDOUT)
		TH_LOG("call %d hung", c->op);
	return ret;
}

/* 2 MiB blocks the mount has left (statfs counts 4 KiB pages). */
static long mount_free_blocks(void)
{
	struct statfs st;

	return statfs(ZFS_MNT, &st) ? -1 : (long)(st.f_bavail * st.f_bsize / SZ_2M);
}

/* Free blocks before the call under test (a failed write or fallocate
 * gives back what it took, so looking after the call can see room that
 * was not there). */
static long free_before;

static void note_free(void)
{
	free_before = mount_free_blocks();
}

/* Whether the model allows a refusal for lack of space for a call that
 * needs up to blocks new blocks. */
static bool may_be_full_for(size_t blocks)
{
	return free_before < (long)blocks || mount_free_blocks() <= 1;
}

static bool may_be_full(void)
{
	return may_be_full_for(1);
}

/* The 2 MiB blocks [off, off + len) spans. */
static size_t blocks_spanned(size_t off, size_t len)
{
	return len ? (off + len + SZ_2M - 1) / SZ_2M - off / SZ_2M : 0;
}

/* --- the model's view of size changes --- */

static void model_resize(struct ino *in, size_t size)
{
	if (size < in->size) {
		memset(in->shadow + size, 0, in->size - size);
		if (in->pinlen > size)
			in->pin_valid = false;	/* the pinned pages left the file */
	}
	in->size = size;
}

static void model_punch(struct ino *in, size_t off, size_t len)
{
	size_t end = off + len < in->size ? off + len : in->size;

	if (off < end)
		memset(in->shadow + off, 0, end - off);
	if (off < in->pinlen)
		in->pin_valid = false;
}

/* --- checks --- */

/* pread of [off, off + len) matches the shadow. */
static bool check_range(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self,
			int i, size_t off, size_t len)
{
	struct ino *in = &self->ino[i];
	struct call c = { .op = C_PREAD, .fd = in->fd, .p = self->buf, .len = len, .a = off };
	size_t want = off >= in->size ? 0 : (off + len > in->size ? in->size - off : len);
	int ret = bounded(_metadata, &c);

	if (ret || (size_t)c.b != want) {
		TH_LOG("inode %d: pread %zu at %zu: %s, %ld bytes (size %zu)", i, len, off,
		       bounded_str(ret), c.b, in->size);
		return false;
	}
	if (memcmp(self->buf, in->shadow + off, want)) {
		size_t k = 0;

		while (self->buf[k] == in->shadow[off + k])
			k++;
		TH_LOG("inode %d: byte %zu reads %#x, the model has %#x (size %zu)", i,
		       off + k, self->buf[k], in->shadow[off + k], in->size);
		self->mismatches++;
		return false;
	}
	return true;
}

/* The edu reads len bytes of a pinned range at off through the IOMMU
 * (into its buffer, then out to the scratch page): they match the shadow. */
static bool check_dma(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self,
		      int i, size_t off)
{
	struct ino *in = &self->ino[i];
	uint64_t iova = IOVA_BASE + i * IOVA_STRIDE + off;
	int ret;

	memset(self->scratch, 0xee, CHECK_LEN);
	ret = __edu_dma(&self->edu, iova, CHECK_LEN, false);
	if (!ret)
		ret = __edu_dma(&self->edu, SCRATCH_IOVA, CHECK_LEN, true);
	if (ret) {
		TH_LOG("inode %d: edu DMA at %#llx: %s", i, (unsigned long long)iova, strerror(-ret));
		return false;
	}
	self->dma_checks++;
	if (memcmp(self->scratch, in->shadow + off, CHECK_LEN)) {
		TH_LOG("inode %d: DMA of the pinned range at %zu differs from the file", i, off);
		self->mismatches++;
		return false;
	}
	return true;
}

/* --- the calls --- */

static int pick_live(FIXTURE_DATA(zfs_fuzz) *self)
{
	int i, start = fuzz_below(&self->f, MAX_INODES);

	for (i = 0; i < MAX_INODES; i++)
		if (self->ino[(start + i) % MAX_INODES].live)
			return (start + i) % MAX_INODES;
	return -1;
}

/* A size or offset: whole blocks mostly, else anything up to MAX_FILE. */
static size_t pick_offset(struct fuzz *f, size_t max)
{
	switch (fuzz_below(f, 4)) {
	case 0:
		return fuzz_below(f, max / SZ_2M + 1) * SZ_2M;
	case 1:
		return fuzz_below(f, max / PAGE + 1) * PAGE;
	default:
		return fuzz_below(f, max + 1);
	}
}

static bool op_create(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self)
{
	int n = fuzz_below(&self->f, NNAMES), i;
	char path[64];

	if (self->names[n] >= 0)
		return true;
	for (i = 0; i < MAX_INODES && self->ino[i].live; i++)
		;
	if (i == MAX_INODES)
		return true;
	name_path(n, path, sizeof(path));
	self->ino[i].fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (self->ino[i].fd < 0) {
		TH_LOG("create %s: %s", path, strerror(errno));
		return false;
	}
	memset(self->ino[i].shadow, 0, MAX_FILE);
	self->ino[i].live = true;
	self->ino[i].nlink = 1;
	self->ino[i].size = 0;
	self->names[n] = i;
	return true;
}

static bool op_truncate(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	long size = fuzz_below(&self->f, 8) ? (long)pick_offset(&self->f, MAX_FILE) : -SZ_2M;
	struct call c = { .op = C_TRUNC, .fd = in->fd, .a = size };
	bool aligned = size >= 0 && !(size % SZ_2M);
	int ret = bounded(_metadata, &c);

	if (ret == (aligned ? 0 : -EINVAL)) {
		if (!ret)
			model_resize(in, size);
		return true;
	}
	TH_LOG("inode %d: ftruncate to %ld: %s", i, size, bounded_str(ret));
	return false;
}

static bool op_pwrite(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	size_t off = pick_offset(&self->f, MAX_FILE - 1);
	size_t len = 1 + fuzz_below(&self->f, fuzz_below(&self->f, 4) ? 3 * PAGE : SZ_2M);
	struct call c = { .op = C_PWRITE, .fd = in->fd, .p = self->buf, .a = off };
	int ret;

	if (len > MAX_FILE - off)
		len = MAX_FILE - off;
	c.len = len;
	fuzz_fill(&self->f, self->buf, len);
	note_free();
	ret = bounded(_metadata, &c);
	if (ret == -ENOSPC && may_be_full_for(blocks_spanned(off, len))) {
		self->enospc++;
		return true;
	}
	if (ret) {
		TH_LOG("inode %d: pwrite %zu at %zu: %s", i, len, off, bounded_str(ret));
		return false;
	}
	if (c.b < (long)len && !may_be_full_for(blocks_spanned(off, len))) {
		TH_LOG("inode %d: pwrite %zu at %zu wrote %ld", i, len, off, c.b);
		return false;
	}
	memcpy(in->shadow + off, self->buf, c.b);
	if (off + c.b > in->size)
		in->size = off + c.b;
	return true;
}

static bool op_fallocate(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	int mode = FUZZ_PICK(&self->f, 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE,
			     FALLOC_FL_ZERO_RANGE, FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE,
			     FALLOC_FL_UNSHARE_RANGE);
	size_t off = pick_offset(&self->f, MAX_FILE - SZ_2M);
	size_t len = pick_offset(&self->f, MAX_FILE - off);
	struct call c = { .op = C_FALLOC, .fd = in->fd, .a = off, .b = len, .c = mode };
	bool supported = mode == 0 || mode == FALLOC_FL_KEEP_SIZE ||
			 mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
	bool aligned = !(off % SZ_2M) && !(len % SZ_2M);
	int ret;

	note_free();
	ret = bounded(_metadata, &c);

	if (!len) {
		/* the VFS refuses a zero length first */
		if (ret == -EINVAL)
			return true;
	} else if (!supported) {
		/* the VFS refuses PUNCH_HOLE without KEEP_SIZE itself */
		if (ret == -EOPNOTSUPP || (mode == FALLOC_FL_PUNCH_HOLE && ret == -EINVAL))
			return true;
	} else if (!aligned) {
		if (ret == -EINVAL)
			return true;
	} else if (ret == -ENOSPC && may_be_full_for(blocks_spanned(off, len))) {
		self->enospc++;
		return true;
	} else if (!ret) {
		if (mode & FALLOC_FL_PUNCH_HOLE)
			model_punch(in, off, len);
		else if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > in->size)
			in->size = off + len;
		return true;
	}
	TH_LOG("inode %d: fallocate mode %#x %zu at %zu: %s", i, mode, len, off, bounded_str(ret));
	return false;
}

static bool op_mmap(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	size_t len = (1 + fuzz_below(&self->f, MAX_FILE / PAGE)) * PAGE;

	if (in->map)
		return true;
	in->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, in->fd, 0);
	if (in->map == MAP_FAILED) {
		in->map = NULL;
		TH_LOG("inode %d: mmap %zu: %s", i, len, strerror(errno));
		return false;
	}
	in->maplen = len;
	return true;
}

/* A store of up to a page, within one page of the mapping. Inside EOF it
 * must land (or SIGBUS when the mount is full and the block is a hole);
 * past EOF it raises SIGBUS, or on 6.1 may land in the last block's tail,
 * which never becomes file content. */
static bool op_store(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	size_t off, len, page_end, inside;
	struct call c = { .op = C_STORE };
	int ret;

	if (!in->map)
		return true;
	off = fuzz_below(&self->f, in->maplen);
	page_end = (off / PAGE + 1) * PAGE;
	len = 1 + fuzz_below(&self->f, page_end - off);
	fuzz_fill(&self->f, self->buf, len);
	c.p = in->map + off;
	c.q = self->buf;
	c.len = len;
	note_free();
	ret = bounded(_metadata, &c);
	if (ret == BOUNDED_SIG(SIGBUS)) {
		self->sigbus++;
		if (off / PAGE * PAGE >= in->size || may_be_full())
			return true;
		TH_LOG("inode %d: SIGBUS on a store at %zu inside EOF %zu", i, off, in->size);
		return false;
	}
	if (ret) {
		TH_LOG("inode %d: store %zu at %zu: %s", i, len, off, bounded_str(ret));
		return false;
	}
	inside = off >= in->size ? 0 : (off + len > in->size ? in->size - off : len);
	memcpy(in->shadow + off, self->buf, inside);
	return true;
}

static bool op_madvise(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	int advice = FUZZ_PICK(&self->f, MADV_DONTNEED, MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED,
			       MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_REMOVE, MADV_REMOVE,
			       MADV_POPULATE_READ, MADV_POPULATE_WRITE, 25 /* MADV_COLLAPSE */,
			       MADV_FREE, MADV_SEQUENTIAL, MADV_RANDOM, MADV_DONTFORK, MADV_DOFORK);
	size_t off, len;
	struct call c = { .op = C_MADVISE, .a = advice };
	int ret;

	if (!in->map)
		return true;
	off = pick_offset(&self->f, in->maplen - PAGE) / PAGE * PAGE;
	len = (1 + fuzz_below(&self->f, (in->maplen - off) / PAGE)) * PAGE;
	c.p = in->map + off;
	c.len = len;
	ret = bounded(_metadata, &c);
	if (ret == -ETIMEDOUT || BOUNDED_IS_SIG(ret)) {
		/* POPULATE past EOF fails with an errno, never a signal */
		TH_LOG("inode %d: madvise %d %zu at %zu: %s", i, advice, len, off, bounded_str(ret));
		return false;
	}
	if (advice == MADV_REMOVE && !ret)
		model_punch(in, off, len);
	return true;
}

static bool op_mremap(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	size_t len = (1 + fuzz_below(&self->f, MAX_FILE / PAGE)) * PAGE;
	struct call c = { .op = C_MREMAP, .p = NULL, .len = 0, .a = len };
	int ret;

	if (!in->map)
		return true;
	c.p = in->map;
	c.len = in->maplen;
	ret = bounded(_metadata, &c);
	if (ret == -EFAULT)
		return true;	/* madvise split the mapping into vmas of other flags */
	if (ret) {
		TH_LOG("inode %d: mremap %zu -> %zu: %s", i, in->maplen, len, bounded_str(ret));
		return false;
	}
	in->map = c.q;
	in->maplen = len;
	return true;
}

static void op_munmap(FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];

	if (in->map)
		munmap(in->map, in->maplen);
	in->map = NULL;
}

/* MAP_DMA of the mapping's part inside EOF: the file's blocks get pinned
 * (faulted in first: ENOSPC when the mount is full). */
static bool op_pin(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	size_t len;
	int ret;

	if (!in->map || in->pinlen)
		return true;
	len = (in->maplen < in->size ? in->maplen : in->size) / PAGE * PAGE;
	if (!len)
		return true;
	note_free();
	ret = __vfio_map(self->container, in->map, IOVA_BASE + i * IOVA_STRIDE, len,
			 VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
	if (ret && may_be_full_for(blocks_spanned(0, len))) {
		self->enospc++;
		return true;
	}
	if (ret) {
		TH_LOG("inode %d: MAP_DMA %zu: %s", i, len, strerror(-ret));
		return false;
	}
	in->pinlen = len;
	in->pin_valid = true;
	return true;
}

static bool op_unpin(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];
	uint64_t unmapped = 0;
	int ret;

	if (!in->pinlen)
		return true;
	ret = __vfio_unmap(self->container, IOVA_BASE + i * IOVA_STRIDE, in->pinlen, 0, &unmapped);
	if (ret || unmapped != in->pinlen) {
		TH_LOG("inode %d: UNMAP_DMA %zu: %s, %llu bytes", i, in->pinlen, strerror(-ret),
		       (unsigned long long)unmapped);
		return false;
	}
	in->pinlen = 0;
	return true;
}

static bool op_dma_check(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];

	if (!in->pinlen || !in->pin_valid || in->pinlen < CHECK_LEN)
		return true;
	return check_dma(_metadata, self,  i,
			 fuzz_below(&self->f, (in->pinlen - CHECK_LEN) / PAGE + 1) * PAGE);
}

/* The inode loses a name; with none left and nothing open it is gone. */
static void drop_name(FIXTURE_DATA(zfs_fuzz) *self, int n)
{
	self->ino[self->names[n]].nlink--;
	self->names[n] = -1;
}

static bool op_names(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self)
{
	int a = fuzz_below(&self->f, NNAMES), b = fuzz_below(&self->f, NNAMES);
	char pa[64], pb[64];
	int kind = fuzz_below(&self->f, 3);

	name_path(a, pa, sizeof(pa));
	name_path(b, pb, sizeof(pb));
	if (self->names[a] < 0 || a == b)
		return true;
	if (kind == 0) {			/* unlink, mapped or pinned or not */
		if (unlink(pa)) {
			TH_LOG("unlink %s: %s", pa, strerror(errno));
			return false;
		}
		drop_name(self, a);
	} else if (kind == 1) {			/* link to a free name */
		if (self->names[b] >= 0)
			return true;
		if (link(pa, pb)) {
			TH_LOG("link %s %s: %s", pa, pb, strerror(errno));
			return false;
		}
		self->names[b] = self->names[a];
		self->ino[self->names[a]].nlink++;
	} else {				/* rename, over b if it exists */
		int moved = self->names[a];

		if (rename(pa, pb)) {
			TH_LOG("rename %s %s: %s", pa, pb, strerror(errno));
			return false;
		}
		if (self->names[b] == moved)
			return true;	/* two links of one inode: rename does nothing */
		if (self->names[b] >= 0)
			drop_name(self, b);
		self->names[b] = moved;
		self->names[a] = -1;
	}
	return true;
}

/* Close an inode with no name left: its mapping and pins go first, as a
 * VMM's would at exit. */
static bool forget(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	struct ino *in = &self->ino[i];

	if (!op_unpin(_metadata, self, i))
		return false;
	op_munmap(self, i);
	close(in->fd);
	in->fd = -1;
	in->live = false;
	return true;
}

static bool op_forget(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self, int i)
{
	return self->ino[i].nlink ? true : forget(_metadata, self, i);
}

/* The admin: umount while busy is refused; drop_caches loses nothing. */
static bool op_admin(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self)
{
	int fd;

	if (fuzz_below(&self->f, 2)) {
		if (pick_live(self) < 0)
			return true;	/* not busy: it would go */
		if (!umount(ZFS_MNT) || errno != EBUSY) {
			TH_LOG("umount of a busy mount: %s", strerror(errno));
			return false;
		}
		return true;
	}
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "3", 1) != 1)
			TH_LOG("drop_caches: %s", strerror(errno));
		close(fd);
	}
	return true;
}

/* One random call; false when it broke the model or hung. */
static bool fuzz_one(struct __test_metadata *_metadata, FIXTURE_DATA(zfs_fuzz) *self)
{
	int op = fuzz_below(&self->f, 100), i = pick_live(self);
	size_t off;

	if (op < 6 || i < 0)
		return op_create(_metadata, self);
	if (op < 14)
		return op_truncate(_metadata, self, i);
	if (op < 28)
		return op_pwrite(_metadata, self, i);
	if (op < 36) {
		off = pick_offset(&self->f, MAX_FILE - 1);
		return check_range(_metadata, self, i, off, 1 + fuzz_below(&self->f, MAX_FILE - off));
	}
	if (op < 46)
		return op_fallocate(_metadata, self, i);
	if (op < 51)
		return op_mmap(_metadata, self, i);
	if (op < 63)
		return op_store(_metadata, self, i);
	if (op < 71)
		return op_madvise(_metadata, self, i);
	if (op < 74)
		return op_mremap(_metadata, self, i);
	if (op < 77) {
		op_munmap(self, i);
		return true;
	}
	if (op < 81)
		return op_pin(_metadata, self, i);
	if (op < 84)
		return op_unpin(_metadata, self, i);
	if (op < 86)
		return op_dma_check(_metadata, self, i);
	if (op < 94)
		return op_names(_metadata, self);
	if (op < 98)
		return op_forget(_metadata, self, i);
	return op_admin(_metadata, self);
}

/* The test's own memory, all of it in RAM from the start (malloc and
 * memset would leave it untouched: the compiler makes that calloc), so
 * that free memory before and after the run compares. */
static uint8_t *test_memory(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

FIXTURE_SETUP(zfs_fuzz)
{
	char opts[64];
	int i;

	zeropin_reset();
	vfio_driver_use(DRIVER_ZEROPIN);
	snprintf(opts, sizeof(opts), "size=%dM", MOUNT_MIB);
	zfs_mount(ZFS_MNT, opts);
	for (i = 0; i < NNAMES; i++)
		self->names[i] = -1;
	for (i = 0; i < MAX_INODES; i++) {
		self->ino[i].fd = -1;
		self->ino[i].shadow = test_memory(MAX_FILE);
		ASSERT_NE(NULL, self->ino[i].shadow);
	}
	self->buf = test_memory(MAX_FILE);
	ASSERT_NE(NULL, self->buf);
	/* after the test's own memory is in: what the run must give back */
	self->free_kb = free_memory_kb();
	self->scratch = mmap(NULL, PAGE * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->scratch);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
	vfio_map(self->container, self->scratch, SCRATCH_IOVA, PAGE * 2);
}

FIXTURE_TEARDOWN(zfs_fuzz)
{
	int i;

	for (i = 0; i < MAX_INODES; i++)
		munmap(self->ino[i].shadow, MAX_FILE);
	munmap(self->buf, MAX_FILE);
	zeropin_reset();
}

TEST_F_TIMEOUT(zfs_fuzz, random_calls_keep_every_byte_and_leak_nothing, 600)
{
	char path[64];
	bool ok = true;
	int i, n;

	fuzz_init(&self->f, "zfs_fuzz", FUZZ_CALLS_DEFAULT, FUZZ_SECONDS_DEFAULT);
	while (ok && fuzz_next_call(&self->f))
		ok = fuzz_one(_metadata, self);
	/* every file still holds what the model says, pins included */
	for (i = 0; ok && i < MAX_INODES; i++) {
		if (!self->ino[i].live)
			continue;
		ok = check_range(_metadata, self, i, 0, MAX_FILE);
		if (ok && self->ino[i].pin_valid && self->ino[i].pinlen >= CHECK_LEN)
			ok = check_dma(_metadata, self, i, self->ino[i].pinlen / 2 / PAGE * PAGE);
	}
	printf("# zfs_fuzz: seed %llu, %lu calls: %lu refused for space (%lu ENOSPC, %lu SIGBUS), "
	       "%lu DMA checks, %lu mismatches\n", (unsigned long long)self->f.seed, self->f.calls,
	       self->enospc + self->sigbus, self->enospc, self->sigbus, self->dma_checks,
	       self->mismatches);
	/* tear down as a VMM would: names, mappings, pins, files */
	for (n = 0; n < NNAMES; n++) {
		if (self->names[n] < 0)
			continue;
		name_path(n, path, sizeof(path));
		EXPECT_EQ(0, unlink(path));
		drop_name(self, n);
	}
	for (i = 0; i < MAX_INODES; i++)
		if (self->ino[i].live)
			EXPECT_TRUE(forget(_metadata, self, i));
	edu_close(&self->edu);
	close(self->container);
	EXPECT_EQ(0, iommu_counter("pages_pinned"));
	EXPECT_EQ(0, pool_read("inuse_mib"));
	EXPECT_EQ(MOUNT_MIB / 2, mount_free_blocks());
	EXPECT_EQ(0, umount(ZFS_MNT));
	EXPECT_EQ(0, pool_parked_settle());	/* blocks out of their files */
	EXPECT_LT(self->free_kb - FREE_SLACK_KB, free_memory_kb());
	EXPECT_EQ(0, self->mismatches);
	ASSERT_TRUE(ok) TH_LOG("replay: FUZZ_SEED=%llu", (unsigned long long)self->f.seed);
}

TEST_HARNESS_MAIN
