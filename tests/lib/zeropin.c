// SPDX-License-Identifier: GPL-2.0
/* zeropin.c - see zeropin.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"
#include "zeropin.h"

int __zeropin_load(const char *params)
{
	return __insmod(ZEROPIN_KO, params);
}

void zeropin_load(const char *params)
{
	int ret = __zeropin_load(params);

	if (ret)
		test_fail("load zeropin.ko", ret);
}

int __zeropin_unload(void)
{
	return syscall(SYS_delete_module, "zeropin", O_NONBLOCK) ? -errno : 0;
}

void zeropin_reset(void)
{
	umount2(ZFS_MNT, MNT_DETACH);
	pool_parked_settle();	/* a parked block holds the module */
	__zeropin_unload();
}

static int read_long(const char *path, long *val)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%ld", val) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

long pool_read(const char *name)
{
	char path[256];
	long val;
	int ret;

	snprintf(path, sizeof(path), ZEROPIN_POOL "/%s", name);
	ret = read_long(path, &val);
	return ret ? ret : val;
}

/* Write a number to a sysfs file; 0 or -errno. */
static int write_long(const char *path, long value)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld\n", value);
	return __write_file(path, buf);
}

int __pool_write(const char *name, long value)
{
	char path[256];

	snprintf(path, sizeof(path), ZEROPIN_POOL "/%s", name);
	return write_long(path, value);
}

void pool_write(const char *name, long value)
{
	int ret = __pool_write(name, value);

	if (ret)
		test_fail(name, ret);
}

/* How poll_until() compares the value read with the one wanted. */
enum poll_cmp { POLL_EQ, POLL_AT_LEAST, POLL_AT_MOST };

/* Poll read(name) until it compares to want as cmp says; 0, or
 * -ETIMEDOUT. */
static int poll_until(long (*read)(const char *), const char *name, long want,
		      enum poll_cmp cmp, int timeout_ms)
{
	double deadline = now_ms() + timeout_ms;
	long v;

	for (;;) {
		v = read(name);
		if (cmp == POLL_AT_LEAST ? v >= want : cmp == POLL_AT_MOST ? v <= want : v == want)
			return 0;
		if (now_ms() > deadline)
			return -ETIMEDOUT;
		usleep(10 * 1000);
	}
}

int pool_wait(const char *name, long want, int timeout_ms)
{
	return poll_until(pool_read, name, want, POLL_EQ, timeout_ms);
}

int pool_wait_at_least(const char *name, long want, int timeout_ms)
{
	return poll_until(pool_read, name, want, POLL_AT_LEAST, timeout_ms);
}

int pool_wait_at_most(const char *name, long want, int timeout_ms)
{
	return poll_until(pool_read, name, want, POLL_AT_MOST, timeout_ms);
}

/* A "name value" line of a debugfs counters file. */
static long counters_read(const char *file, const char *name)
{
	char line[128], key[64];
	long val, ret = -ENOENT;
	FILE *f = fopen(file, "r");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %ld", key, &val) == 2 && !strcmp(key, name))
			ret = val;
	fclose(f);
	return ret;
}

static int pfn_cmp(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

long pool_blocks_in(uint64_t first, uint64_t pages)
{
	unsigned long *pfns = NULL;
	long i, in = 0, n = pool_block_pfns(NULL, &pfns);

	for (i = 0; i < n; i++)
		in += pfns[i] >= first && pfns[i] < first + pages;
	free(pfns);
	return n < 0 ? n : in;
}

long pool_held_mib(void)
{
	return pool_read("zero_mib") + pool_read("dirty_mib");
}

long pool_block_pfns(const char *kind, unsigned long **out)
{
	unsigned long pfn, *pfns = NULL, *more;
	long n = 0, cap = 0;
	char what[16];
	FILE *f = fopen(ZEROPIN_POOL_BLOCKS, "r");
	int nid;

	if (!f)
		return -errno;
	while (fscanf(f, "%d %lx %15s", &nid, &pfn, what) == 3) {
		if (kind && strcmp(what, kind))
			continue;
		if (n == cap) {
			more = realloc(pfns, (cap = cap ? 2 * cap : 4096) * sizeof(*pfns));
			if (!more) {
				free(pfns);
				fclose(f);
				return -ENOMEM;
			}
			pfns = more;
		}
		pfns[n++] = pfn;
	}
	fclose(f);
	*out = pfns;
	return n;
}

long pool_blocks_runs(void)
{
	const unsigned long block = 512, run = 512 * block;	/* pages */
	unsigned long *pfns = NULL, i, in_run = 0;
	long runs = 0, n = pool_block_pfns("zero", &pfns);

	if (n < 0)
		return n;
	/* one node per run: node ids do not matter for consecutive pfns */
	if (n)
		qsort(pfns, n, sizeof(*pfns), pfn_cmp);
	for (i = 0; i < (unsigned long)n; i++) {
		if (pfns[i] % run == 0)
			in_run = 1;
		else if (in_run && pfns[i] == pfns[i - 1] + block)
			in_run++;
		else
			in_run = 0;
		runs += in_run == run / block;
	}
	free(pfns);
	return runs;
}

long pool_counter(const char *name)
{
	return counters_read(ZEROPIN_COUNTERS, name);
}

int pool_counter_wait(const char *name, long want, int timeout_ms)
{
	return poll_until(pool_counter, name, want, POLL_AT_LEAST, timeout_ms);
}

int pool_counter_wait_at_most(const char *name, long want, int timeout_ms)
{
	return poll_until(pool_counter, name, want, POLL_AT_MOST, timeout_ms);
}

/* park.c looks every second, and at once when zeropin unmaps. */
#define PARK_SETTLE_MS	5000

int pool_parked_settle(void)
{
	if (pool_counter("parked") < 0)	/* zeropin not loaded */
		return 0;
	return pool_counter_wait_at_most("parked", 0, PARK_SETTLE_MS);
}

long iommu_counter(const char *name)
{
	return counters_read(ZEROPIN_IOMMU_COUNTERS, name);
}

long iommu_counter_raw(const char *name)
{
	char buf[4096], *line;
	size_t len = strlen(name);
	ssize_t n;
	long val = -ENOENT;
	int fd = open(ZEROPIN_IOMMU_COUNTERS, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	for (line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *p = line + len;

		if (memcmp(line, name, len) || (*p != ' ' && *p != '\t'))
			continue;
		while (*p == ' ' || *p == '\t')
			p++;
		for (val = 0; *p >= '0' && *p <= '9'; p++)
			val = val * 10 + (*p - '0');
		break;
	}
	return val;
}

long zeropin_param_read(const char *name)
{
	char path[256];
	long val;
	int ret;

	snprintf(path, sizeof(path), "/sys/module/zeropin/parameters/%s", name);
	ret = read_long(path, &val);
	return ret ? ret : val;
}

int zeropin_param_bool(const char *name)
{
	char path[256], c = 0;
	int fd, ret;

	snprintf(path, sizeof(path), "/sys/module/zeropin/parameters/%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	ret = read(fd, &c, 1) == 1 ? 0 : -EIO;
	close(fd);
	if (ret)
		return ret;
	return c == 'Y' || c == 'y' || c == '1';
}

int __zeropin_param_write(const char *name, long value)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/module/zeropin/parameters/%s", name);
	return write_long(path, value);
}

int __zeropin_param_set(const char *name, const char *value)
{
	char path[256];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/sys/module/zeropin/parameters/%s", name);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	if (write(fd, value, strlen(value)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int __zfs_mount(const char *dir, const char *opts)
{
	mkdir("/mnt", 0755);
	mkdir(dir, 0755);
	return mount("none", dir, "zeropinfs", 0, opts) ? -errno : 0;
}

void zfs_mount(const char *dir, const char *opts)
{
	int ret = __zfs_mount(dir, opts);

	if (ret)
		test_fail("mount zeropinfs", ret);
}

void zfs_mount_fresh(const char *opts)
{
	umount2(ZFS_MNT, MNT_DETACH);
	if (access("/sys/module/zeropin", F_OK))
		zeropin_load("");
	zfs_mount(ZFS_MNT, opts);
}

void zfs_umount(const char *dir)
{
	if (umount(dir))
		test_fail("umount zeropinfs", -errno);
}

int zfs_create(const char *path, size_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		test_fail(path, -errno);
	if (ftruncate(fd, size))
		test_fail("ftruncate", -errno);
	return fd;
}

void *map_file(int fd, size_t size, int flags)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, fd, 0);

	if (p == MAP_FAILED)
		test_fail("mmap", -errno);
	return p;
}

void touch_range(void *addr, size_t size, bool write)
{
	volatile uint8_t *p = addr;
	size_t off;

	/* An atomic add of 0 is one write access: the first touch is a write
	 * fault, as a guest's first store is, not a read fault and then a
	 * write-protect fault. */
	for (off = 0; off < size; off += 4096) {
		if (write)
			__atomic_fetch_add(&p[off], 0, __ATOMIC_RELAXED);
		else
			(void)p[off];
	}
}

/* Which vma of an smaps file a lookup wants. */
struct vma_match {
	const void *addr;	/* the vma holding this address, or */
	const char *name;	/* the first whose path contains this */
};

static bool vma_matches(const char *hdr, const struct vma_match *m)
{
	unsigned long start, end;

	if (sscanf(hdr, "%lx-%lx ", &start, &end) != 2)
		return false;
	if (m->name)
		return strstr(hdr, m->name) != NULL;
	return (uintptr_t)m->addr >= start && (uintptr_t)m->addr < end;
}

/* A vma header line starts "start-end " in hex. */
static bool is_vma_header(const char *line)
{
	size_t hex = strspn(line, "0123456789abcdef");

	return hex && line[hex] == '-';
}

/* The kB value of field in the vma of smaps file path that m picks. */
static long scan_smaps(const char *path, const struct vma_match *m, const char *field)
{
	size_t flen = strlen(field);
	bool inside = false;
	long val = -ENOENT;
	char line[512];
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (is_vma_header(line)) {
			inside = vma_matches(line, m);
			continue;
		}
		if (inside && !strncmp(line, field, flen) && line[flen] == ':') {
			val = strtol(line + flen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return val;
}

long smaps_kb(const void *addr, const char *field)
{
	struct vma_match m = { .addr = addr };

	return scan_smaps("/proc/self/smaps", &m, field);
}

long proc_smaps_kb(int pid, const char *name, const char *field)
{
	struct vma_match m = { .name = name };
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	return scan_smaps(path, &m, field);
}

unsigned long proc_vma_start(int pid, const char *name)
{
	unsigned long start = 0;
	struct vma_match m = { .name = name };
	char path[64], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (vma_matches(line, &m)) {
			start = strtoul(line, NULL, 16);
			break;
		}
	}
	fclose(f);
	return start;
}

uint64_t pfn_of(const void *addr)
{
	uint64_t entry = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (fd < 0)
		return 0;
	if (pread(fd, &entry, 8, (uintptr_t)addr / 4096 * 8) != 8)
		entry = 0;
	close(fd);
	return (entry & (1ull << 63)) ? entry & ((1ull << 55) - 1) : 0;
}

/* One 64-bit word of a /proc/kpage* file for pfn; ~0 when unreadable. */
static uint64_t kpage_word(const char *file, uint64_t pfn)
{
	uint64_t word = ~0ull;
	int fd = open(file, O_RDONLY);

	if (fd < 0)
		return ~0ull;
	if (pread(fd, &word, 8, pfn * 8) != 8)
		word = ~0ull;
	close(fd);
	return word;
}

/* /proc/kpageflags bits (/proc/kpagecount counts mappings, not
 * references: a leaked block reads 0 there once unmapped). A block keeps
 * its LRU flag until its last reference goes: only then does the page
 * allocator take it off the list. */
#define KPF_LRU			5
#define KPF_ANON		12
#define KPF_BUDDY		10
#define KPF_SLAB		7
#define KPF_UNEVICTABLE		18

/* /proc/kpageflags bits: the head and the tail pages of a compound page. */
#define KPF_COMPOUND_HEAD	15
#define KPF_COMPOUND_TAIL	16

int page_in_block(const void *addr)
{
	uint64_t pfn = pfn_of(addr), flags;

	if (!pfn)
		return -ENOENT;
	flags = kpage_word("/proc/kpageflags", pfn);
	if (flags == ~0ull)
		return -EIO;
	return !!(flags & (1ull << KPF_COMPOUND_HEAD | 1ull << KPF_COMPOUND_TAIL));
}

int pfn_block_held(uint64_t pfn)
{
	uint64_t head = kpage_word("/proc/kpageflags", pfn);
	uint64_t tail = kpage_word("/proc/kpageflags", pfn + 511);
	const uint64_t not_ours = 1ull << KPF_ANON | 1ull << KPF_BUDDY | 1ull << KPF_SLAB;

	if (head == ~0ull || tail == ~0ull)
		return -EIO;
	return (head & (1ull << KPF_COMPOUND_HEAD)) && (tail & (1ull << KPF_COMPOUND_TAIL)) &&
	       !(head & not_ours) && (head & (1ull << KPF_LRU | 1ull << KPF_UNEVICTABLE));
}

int zeropin_kthread_cpus(int nid, char *buf, size_t len, int timeout_ms)
{
	char comm[32], path[64], line[256], fmt[32];
	double end = now_ms() + timeout_ms;
	int pid = 0, n, ret = -ENOENT;
	FILE *f;

	snprintf(comm, sizeof(comm), "zeropin/%d", nid);
	/* alone: the last module's may still be exiting */
	while ((n = proc_tasks_named(comm, false, &pid)) != 1 && now_ms() < end)
		usleep(10000);
	if (n != 1)
		return -ETIMEDOUT;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	snprintf(fmt, sizeof(fmt), "Cpus_allowed_list:\t%%%zus", len - 1);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, buf) == 1)
			ret = 0;
	fclose(f);
	return ret;
}

int init_on_alloc(void)
{
	char cmdline[4096] = "";
	FILE *f = fopen("/proc/cmdline", "r");

	if (f) {
		if (!fgets(cmdline, sizeof(cmdline), f))
			cmdline[0] = '\0';
		fclose(f);
	}
	return strstr(cmdline, "init_on_alloc=0") ? 0 : 1;
}
