// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_fault_bounds - a zeropinfs fault writes page-table entries for its
 * own vma only, wherever a user places the mapping and whatever another
 * thread faults meanwhile.
 *
 * Any user who can mmap a zeropinfs file chooses the address and the file
 * offset, and what sits beside the mapping in the same 2 MiB (one page
 * table). Each variant lays out one 2 MiB-aligned window:
 *  - the zeropinfs mapping under test (T) starts at the window (aligned)
 *    or 1 MiB into it (unaligned), at a file offset congruent to its
 *    address modulo 2 MiB or not (a PMD may map it only when both hold);
 *  - a neighbour (N) fills the rest of the window: none (T is then 2 MiB
 *    long, and whatever of the window T leaves free is mapped only after
 *    the race), anonymous memory, another zeropinfs file, or a second
 *    mapping of the same file.
 * Each round empties the files and keeps the pool empty, so T's fault
 * sleeps while a block is allocated and zeroed on the spot; one task
 * faults T's first page while another, a little later each round, faults
 * (read or write: the variant) a page of the neighbour, or of T in the
 * same PMD when there is none. Then:
 *  - every page of every vma reads zero;
 *  - a tag stored through every page of every vma reads back there, and
 *    read() of each file shows exactly the tags stored through its own
 *    mappings (a file page mapped into a neighbour shows up as a tag in
 *    the wrong file, or at the wrong offset);
 *  - the kernel log gained no BUG, KASAN, "Bad page" or oops line.
 * Rounds run until FAULT_ROUNDS or FAULT_SECONDS, every race bounded
 * (bounded.h). 6.12 calls ->huge_fault without checking the vma suits a
 * PMD: before zeropin checked, a store to the anonymous neighbour reached
 * the file, and a non-congruent mapping wrote past its page table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "bounded.h"
#include "kmsg.h"
#include "tagged.h"
#include "zeropin.h"

/* The window the vmas are laid out in: 2 MiB-aligned, two PMDs. */
#define WINDOW_HINT	((void *)0x200000000000ul)
#define WINDOW_SIZE	(4 * SZ_1M)
#define RAM_PATH	ZFS_MNT "/ram"
#define RAM_SIZE	(4 * SZ_1M)
#define OTHER_PATH	ZFS_MNT "/other"
#define OTHER_SIZE	(2 * SZ_1M)
/* Where each backing's tags start (tagged.h), so a page stored through
 * one vma is never taken for another's. */
#define RAM_TAG		0ul
#define OTHER_TAG	1000000ul
#define ANON_TAG	2000000ul
/* A same-file neighbour maps the last MiB of the file: T never does. */
#define SAME_FILE_OFF	(3 * SZ_1M)
/* The racer starts (round % RACE_STEPS) steps later than T's fault, a
 * step being 1/RACE_STEPS of the time a fault that allocates and zeroes a
 * block takes here (ms under TCG, 0.1-0.2 ms on hardware). */
#define RACE_STEPS	8
/* Kernel log records that mean a fault wrote where it must not. */
static const char *const kmsg_bad[] = {
	"BUG:", "KASAN", "Bad page", "general protection", "Oops", "WARNING:",
};
#define THP_ENABLED	"/sys/kernel/mm/transparent_hugepage/enabled"

enum neighbour { NB_NONE, NB_ANON, NB_OTHER_FILE, NB_SAME_FILE };

FIXTURE(bounds) {
	int ram, other;		/* the files */
	uint8_t *window;	/* WINDOW_HINT */
	uint8_t *t, *n;		/* the mapping under test, its neighbour */
	size_t t_len, n_len;
	off_t t_off, n_off;	/* their file offsets */
	uint8_t *probe;		/* NB_NONE: the window's free part, after */
	size_t probe_len;
	long step_us;		/* RACE_STEPS of it: one block's fault */
	int kmsg;		/* the kernel log since setup */
};

FIXTURE_VARIANT(bounds) {
	bool unaligned;		/* T 1 MiB into the window */
	bool congruent;		/* T's offset = its address modulo 2 MiB */
	enum neighbour nb;
	bool write;		/* the racer's fault: a store, not a load */
};

#define BOUNDS_VARIANT(name, u, c, nbr) \
	FIXTURE_VARIANT_ADD(bounds, name##_read) { \
		.unaligned = u, .congruent = c, .nb = nbr, .write = false }; \
	FIXTURE_VARIANT_ADD(bounds, name##_write) { \
		.unaligned = u, .congruent = c, .nb = nbr, .write = true }
#define BOUNDS_VARIANTS(name, nbr) \
	BOUNDS_VARIANT(aligned_congruent_##name, false, true, nbr); \
	BOUNDS_VARIANT(aligned_offset_##name, false, false, nbr); \
	BOUNDS_VARIANT(unaligned_congruent_##name, true, true, nbr); \
	BOUNDS_VARIANT(unaligned_offset_##name, true, false, nbr)
BOUNDS_VARIANTS(alone, NB_NONE);
BOUNDS_VARIANTS(anon, NB_ANON);
BOUNDS_VARIANTS(other_file, NB_OTHER_FILE);
BOUNDS_VARIANTS(same_file, NB_SAME_FILE);

/* THP set to never: the kernel then calls no ->huge_fault at all. */
static bool thp_never(void)
{
	char buf[128] = "";
	int fd = open(THP_ENABLED, O_RDONLY);

	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) < 0)
			buf[0] = '\0';
		close(fd);
	}
	return strstr(buf, "[never]") != NULL;
}

/* How long one fault that allocates and zeroes a block takes here (the
 * pool empty): fd's first block, faulted through a fresh mapping, in us. */
static long block_fault_us(int fd)
{
	uint8_t *p = mmap(NULL, TAG_BLOCK, PROT_READ, MAP_SHARED, fd, 0);
	double t0;
	long us;

	if (p == MAP_FAILED)
		return RACE_STEPS;
	t0 = now_ms();
	(void)*(volatile uint8_t *)p;
	us = (long)((now_ms() - t0) * 1000);
	munmap(p, TAG_BLOCK);
	return us > RACE_STEPS ? us : RACE_STEPS;
}

FIXTURE_SETUP(bounds)
{
	self->kmsg = -1;
	zeropin_reset();
	zeropin_load("");
	pool_write("target_mib", 0);	/* every fault allocates and zeroes */
	zfs_mount(ZFS_MNT, "size=64M");
	self->ram = zfs_create(RAM_PATH, RAM_SIZE);
	self->other = zfs_create(OTHER_PATH, OTHER_SIZE);
	self->kmsg = kmsg_mark();
	ASSERT_LE(0, self->kmsg);
	if (thp_never())
		SKIP(return, "transparent hugepages are off (never): no fault takes the PMD path");
	self->step_us = block_fault_us(self->other) / RACE_STEPS;
	/* far below where mmap(NULL) places things, so that no allocation
	 * of the test's (a bounded call's stack) lands in the window's
	 * unmapped part */
	self->window = mmap(WINDOW_HINT, WINDOW_SIZE, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	ASSERT_EQ(WINDOW_HINT, (void *)self->window);

	/* T: 1 MiB beside a neighbour, 2 MiB alone */
	self->t = self->window + (variant->unaligned ? SZ_1M : 0);
	self->t_len = variant->nb == NB_NONE ? 2 * SZ_1M : SZ_1M;
	self->t_off = ((uintptr_t)self->t + (variant->congruent ? 0 : SZ_1M)) % TAG_BLOCK;
	/* N: the window's other MiB in T's first PMD, before T or after it */
	self->n = variant->unaligned ? self->window : self->window + SZ_1M;
	self->n_len = variant->nb == NB_NONE ? 0 : SZ_1M;
	self->n_off = variant->nb == NB_SAME_FILE ? SAME_FILE_OFF :
		      ((uintptr_t)self->n % TAG_BLOCK);
	/* alone and unaligned: the MiB before T, mapped after the race */
	self->probe = variant->nb == NB_NONE && variant->unaligned ? self->window : NULL;
	self->probe_len = self->probe ? SZ_1M : 0;
}

FIXTURE_TEARDOWN(bounds)
{
	if (self->kmsg >= 0)
		close(self->kmsg);
	munmap(self->window, WINDOW_SIZE);
	close(self->ram);
	close(self->other);
	unlink(RAM_PATH);
	unlink(OTHER_PATH);
	zeropin_reset();
}

/* Map one round's vmas into the window (T, then N), the rest unmapped
 * when there is no neighbour; 0 or -errno. */
static int __map_round(FIXTURE_DATA(bounds) *self, enum neighbour nb)
{
	int prot = PROT_READ | PROT_WRITE, fixed = MAP_SHARED | MAP_FIXED;
	void *p;

	if (munmap(self->window, WINDOW_SIZE))
		return -errno;
	p = mmap(self->t, self->t_len, prot, fixed, self->ram, self->t_off);
	if (p == MAP_FAILED)
		return -errno;
	/* THP set to madvise: the PMD path for this vma too */
	if (madvise(p, self->t_len, MADV_HUGEPAGE))
		return -errno;
	switch (nb) {
	case NB_NONE:
		return 0;
	case NB_ANON:
		p = mmap(self->n, self->n_len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0);
		break;
	case NB_OTHER_FILE:
		p = mmap(self->n, self->n_len, prot, fixed, self->other, self->n_off);
		break;
	case NB_SAME_FILE:
		p = mmap(self->n, self->n_len, prot, fixed, self->ram, self->n_off);
		break;
	}
	return p == MAP_FAILED ? -errno : 0;
}

/* Empty both files: every block of them goes, the next fault allocates. */
static int __empty_files(FIXTURE_DATA(bounds) *self)
{
	if (ftruncate(self->ram, 0) || ftruncate(self->ram, RAM_SIZE) ||
	    ftruncate(self->other, 0) || ftruncate(self->other, OTHER_SIZE))
		return -errno;
	return 0;
}

/* The race: T's first page faulted by one task, a page in the same PMD
 * by another, delay_us after the first has started. */
struct race {
	volatile uint8_t *first;	/* T's first page */
	volatile uint8_t *second;	/* the racer's page */
	bool write;			/* the racer stores */
	long delay_us;
	volatile int started;		/* the first task is about to fault */
};

static int fault_first(void *arg)
{
	struct race *r = arg;

	r->started = 1;
	return r->first[0];
}

static int fault_second(void *arg)
{
	struct race *r = arg;
	struct timespec ts = { 0, r->delay_us * 1000 };

	while (!r->started)
		;
	if (r->delay_us)
		nanosleep(&ts, NULL);
	if (r->write)
		r->second[0] = 0;	/* the page reads zero, and stays so */
	return r->second[0];
}

static int __race(struct race *r)
{
	int (*const fn[])(void *) = { fault_first, fault_second };
	void *const arg[] = { r, r };
	int ret[2] = { 0, 0 }, err;

	err = bounded_together(2, fn, arg, ret, BOUNDED_MS);
	return err ?: ret[0] ?: ret[1];
}

/* Every page of [p, p + len) zero. */
static long first_nonzero_page(const uint8_t *p, size_t len)
{
	size_t off;

	for (off = 0; off < len; off += TAG_PAGE)
		if (!all_bytes(p + off, 0, TAG_PAGE))
			return off / TAG_PAGE;
	return -1;
}

/* Store tag first + i into page i of [p, p + len). */
static void store_tags(uint8_t *p, size_t len, unsigned long first)
{
	size_t off;

	for (off = 0; off < len; off += TAG_PAGE)
		tag_fill(p + off, first + off / TAG_PAGE);
}

/* The first page of [p, p + len) without tag first + i; -1 when none. */
static long first_untagged_page(const uint8_t *p, size_t len, unsigned long first)
{
	size_t off;

	for (off = 0; off < len; off += TAG_PAGE)
		if (!tag_matches(p + off, first + off / TAG_PAGE, 0))
			return off / TAG_PAGE;
	return -1;
}

/* read() every page of fd: a page inside one of the two stored ranges
 * [off, off + len) holds tag base + its page index, every other is zero.
 * The first page that does not; -1 when none, -2 when read() fails. */
static long first_wrong_file_page(int fd, size_t size, unsigned long base,
				  off_t off1, size_t len1, off_t off2, size_t len2)
{
	uint8_t page[TAG_PAGE];
	off_t pos;

	for (pos = 0; pos < (off_t)size; pos += TAG_PAGE) {
		bool stored = (pos >= off1 && pos < off1 + (off_t)len1) ||
			      (pos >= off2 && pos < off2 + (off_t)len2);

		if (pread(fd, page, TAG_PAGE, pos) != TAG_PAGE)
			return -2;
		if (stored ? !tag_matches(page, base + pos / TAG_PAGE, 0) :
			     !all_bytes(page, 0, TAG_PAGE))
			return pos / TAG_PAGE;
	}
	return -1;
}

/* One round after the race: zero everywhere, then a tag through every
 * page of every vma, found back in its vma and in its backing only. */
static void check_round(struct __test_metadata *_metadata, FIXTURE_DATA(bounds) *self,
			const FIXTURE_VARIANT(bounds) *variant, unsigned int round)
{
	bool n_ram = variant->nb == NB_SAME_FILE, n_other = variant->nb == NB_OTHER_FILE;
	unsigned long n_tag = n_other ? OTHER_TAG + self->n_off / TAG_PAGE :
			      n_ram ? RAM_TAG + self->n_off / TAG_PAGE : ANON_TAG;
	long bad;

	bad = first_nonzero_page(self->t, self->t_len);
	ASSERT_EQ(-1, bad) TH_LOG("round %u: T page %ld not zero", round, bad);
	bad = first_nonzero_page(self->n, self->n_len);
	ASSERT_EQ(-1, bad) TH_LOG("round %u: neighbour page %ld not zero", round, bad);
	if (self->probe) {
		/* what the window leaves free, mapped only now: anonymous,
		 * zero, and its stores stay its own */
		ASSERT_EQ((void *)self->probe, mmap(self->probe, self->probe_len, PROT_READ | PROT_WRITE,
					    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
		bad = first_nonzero_page(self->probe, self->probe_len);
		ASSERT_EQ(-1, bad) TH_LOG("round %u: a new mapping beside T: page %ld not zero",
					  round, bad);
		store_tags(self->probe, self->probe_len, ANON_TAG);
	}

	store_tags(self->t, self->t_len, RAM_TAG + self->t_off / TAG_PAGE);
	store_tags(self->n, self->n_len, n_tag);
	bad = first_untagged_page(self->t, self->t_len, RAM_TAG + self->t_off / TAG_PAGE);
	ASSERT_EQ(-1, bad) TH_LOG("round %u: T page %ld lost its tag", round, bad);
	bad = first_untagged_page(self->n, self->n_len, n_tag);
	ASSERT_EQ(-1, bad) TH_LOG("round %u: neighbour page %ld lost its tag", round, bad);
	bad = first_untagged_page(self->probe, self->probe_len, ANON_TAG);
	ASSERT_EQ(-1, bad) TH_LOG("round %u: the new mapping's page %ld lost its tag", round, bad);

	bad = first_wrong_file_page(self->ram, RAM_SIZE, RAM_TAG, self->t_off, self->t_len,
				    self->n_off, n_ram ? self->n_len : 0);
	ASSERT_EQ(-1, bad) TH_LOG("round %u: read() of the file: page %ld is wrong", round, bad);
	bad = first_wrong_file_page(self->other, OTHER_SIZE, OTHER_TAG, self->n_off,
				    n_other ? self->n_len : 0, 0, 0);
	ASSERT_EQ(-1, bad) TH_LOG("round %u: read() of the other file: page %ld is wrong",
				  round, bad);
}

TEST_F_TIMEOUT(bounds, fault_maps_only_its_own_vma, 300)
{
	unsigned long rounds = env_ulong("FAULT_ROUNDS", 48);
	double deadline = now_ms() + env_ulong("FAULT_SECONDS", 20) * 1000.0;
	bool pmd_expected = !variant->unaligned && variant->congruent && variant->nb == NB_NONE;
	struct race r = { .write = variant->write };
	unsigned int round, pmd_rounds = 0;
	int ret, bad;

	r.first = self->t;
	/* the racer: the neighbour's page nearest T, else T's page 1 MiB on
	 * in the same PMD (unaligned: the last page of T's first PMD) */
	if (variant->nb != NB_NONE)
		r.second = self->n + (variant->unaligned ? self->n_len - TAG_PAGE : 0);
	else
		r.second = variant->unaligned ? self->t + SZ_1M - TAG_PAGE : self->t + SZ_1M;
	for (round = 0; round < rounds && now_ms() < deadline; round++) {
		ASSERT_EQ(0, __empty_files(self));
		ASSERT_EQ(0, __map_round(self, variant->nb));
		/* a block both tasks raced for goes back to the pool: gone
		 * again before the next round, whose faults must allocate */
		ASSERT_EQ(0, pool_wait("zero_mib", 0, 5000)) TH_LOG("the pool is not empty");
		ASSERT_EQ(0, pool_wait("dirty_mib", 0, 5000)) TH_LOG("the pool is not empty");
		r.started = 0;
		r.delay_us = (round % RACE_STEPS) * self->step_us;
		ret = __race(&r);
		ASSERT_EQ(0, ret) TH_LOG("round %u: the faults: %s", round, bounded_str(ret));
		pmd_rounds += smaps_kb(self->t, "FilePmdMapped") > 0;
		check_round(_metadata, self, variant, round);
		bad = kmsg_count_since(self->kmsg, kmsg_bad, sizeof(kmsg_bad) / sizeof(kmsg_bad[0]));
		ASSERT_EQ(0, bad) TH_LOG("round %u: the kernel log says a fault wrote where it must not",
					 round);
	}
	TH_LOG("%u rounds, the racer %ld us later at most, a PMD mapped in %u", round,
	       (RACE_STEPS - 1) * self->step_us, pmd_rounds);
	/* the PMD path ran (the kernel's THP settings let it) where it can */
	if (pmd_expected)
		EXPECT_LT(0, pmd_rounds);
	/* nothing held: the files empty, no block in use */
	ASSERT_EQ(0, munmap(self->window, WINDOW_SIZE));
	ASSERT_EQ(0, __empty_files(self));
	EXPECT_EQ(0, pool_counter("inuse"));
}

TEST_HARNESS_MAIN
