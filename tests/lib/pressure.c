// SPDX-License-Identifier: GPL-2.0
/* pressure.c - see pressure.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/io_uring.h>

#include "pressure.h"
#include "util.h"

/* Pages of the pagemap read at once (64 KiB of entries). */
#define PAGEMAP_BATCH	8192
#define PAGE		4096ul
#define BLOCK_PAGES	512ul
#define PFN_MASK	((1ull << 55) - 1)
#define PAGE_PRESENT	(1ull << 63)
/* Physical 2 MiB blocks the fragmenter can tell apart: 2 TiB of RAM. */
#define MAX_BLOCKS	(1ul << 20)
#define TRACEFS		"/sys/kernel/tracing"
/* Registered buffers per io_uring (IORING_MAX_REG_BUFFERS). */
#define RING_BUFFERS	16384

/* Free [p + from, p + to) pages of the fill, if any. */
static void free_pages(char *p, size_t from, size_t to)
{
	if (to > from)
		madvise(p + from * PAGE, (to - from) * PAGE, MADV_DONTNEED);
}

/* Note kept page p in f->kept; -ENOMEM when the list cannot grow. */
static int note_kept(struct fragmented *f, void *p)
{
	void **more;

	if (f->nkept % 1024 == 0) {
		more = realloc(f->kept, (f->nkept + 1024) * sizeof(*more));
		if (!more)
			return -ENOMEM;
		f->kept = more;
	}
	f->kept[f->nkept++] = p;
	return 0;
}

/*
 * Keep the first page of the fill found in each physical 2 MiB block and
 * free the others, in runs of virtual pages: every block the fill touched
 * then has one page in use, noted in f->kept. The page frames come from
 * /proc/self/pagemap (root). Returns pages kept, or -errno.
 */
static long keep_one_per_block(struct fragmented *f, char *p, size_t pages)
{
	static unsigned char seen[MAX_BLOCKS / 8];
	uint64_t ent[PAGEMAP_BATCH];
	size_t i, n, run = 0;	/* run: first page of the run being freed */
	long kept = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (fd < 0)
		return -errno;
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < pages; i += n) {
		n = pages - i < PAGEMAP_BATCH ? pages - i : PAGEMAP_BATCH;
		if (pread(fd, ent, n * 8, ((uintptr_t)p / PAGE + i) * 8) != (ssize_t)(n * 8)) {
			close(fd);
			return -EIO;
		}
		for (size_t j = 0; j < n; j++) {
			uint64_t block = (ent[j] & PFN_MASK) / BLOCK_PAGES;

			if (!(ent[j] & PAGE_PRESENT) || block >= MAX_BLOCKS ||
			    (seen[block / 8] & (1 << (block % 8))))
				continue;
			seen[block / 8] |= 1 << (block % 8);
			if (note_kept(f, p + (i + j) * PAGE)) {
				close(fd);
				return -ENOMEM;
			}
			free_pages(p, run, i + j);
			run = i + j + 1;
			kept++;
		}
	}
	free_pages(p, run, pages);
	close(fd);
	return kept;
}

int __fragment_memory(struct fragmented *f, long leave_mib)
{
	/* MemAvailable, not free memory: it leaves out the pages on per-CPU
	 * lists (which only their CPU allocates from; hundreds of MiB on the
	 * two-node lab) and the zones' reserves */
	long free_kb = proc_file_kb("/proc/meminfo", "MemAvailable"), kept;
	size_t off;

	memset(f, 0, sizeof(*f));
	if (free_kb < 0)
		return free_kb;
	if (free_kb / 1024 <= leave_mib)
		return -ENOMEM;
	f->size = (size_t)(free_kb / 1024 - leave_mib) << 20;
	f->addr = mmap(NULL, f->size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (f->addr == MAP_FAILED)
		return -errno;
	if (madvise(f->addr, f->size, MADV_NOHUGEPAGE)) {
		kept = -errno;
		fragment_release(f);
		return kept;
	}
	for (off = 0; off < f->size; off += PAGE)
		((volatile char *)f->addr)[off] = 1;
	kept = keep_one_per_block(f, f->addr, f->size / PAGE);
	if (kept < 0) {
		fragment_release(f);
		return kept;
	}
	f->kept_kb = kept * PAGE / 1024;
	return 0;
}

/* Pin n pages from kept[] as one ring's registered buffers; the ring's fd
 * or -errno. */
static int pin_ring(void *const kept[], long n)
{
	struct io_uring_params params = { 0 };
	struct iovec *iov = calloc(n, sizeof(*iov));
	int fd, ret = 0;
	long i;

	if (!iov)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		iov[i].iov_base = kept[i];
		iov[i].iov_len = PAGE;
	}
	fd = syscall(__NR_io_uring_setup, 1, &params);
	if (fd < 0)
		ret = -errno;
	else if (syscall(__NR_io_uring_register, fd, IORING_REGISTER_BUFFERS, iov, n))
		ret = -errno;
	free(iov);
	if (ret && fd >= 0)
		close(fd);
	return ret ? ret : fd;
}

/* Unpin before closing: the unregister waits for the pins to go, a close
 * would leave that to a worker, after the caller had moved on. */
static void unpin_rings(struct fragmented *f)
{
	while (f->nrings > 0) {
		int fd = f->rings[--f->nrings];

		syscall(__NR_io_uring_register, fd, IORING_UNREGISTER_BUFFERS, NULL, 0);
		close(fd);
	}
}

int __fragment_pin(struct fragmented *f)
{
	long done, n;
	int fd;

	if (f->nkept > (long)FRAG_MAX_RINGS * RING_BUFFERS)
		return -E2BIG;
	for (done = 0; done < f->nkept; done += n) {
		n = f->nkept - done < RING_BUFFERS ? f->nkept - done : RING_BUFFERS;
		fd = pin_ring(f->kept + done, n);
		if (fd < 0) {
			unpin_rings(f);
			return fd;
		}
		f->rings[f->nrings++] = fd;
	}
	return 0;
}

int __fragment_pinned(struct fragmented *f, long leave_mib)
{
	int ret = __fragment_memory(f, leave_mib);

	if (ret)
		return ret;
	ret = __fragment_pin(f);
	if (ret)
		fragment_release(f);
	return ret;
}

void fragment_release(struct fragmented *f)
{
	bool held = f->addr && f->addr != MAP_FAILED;

	unpin_rings(f);
	if (held)
		munmap(f->addr, f->size);
	f->addr = NULL;
	free(f->kept);
	f->kept = NULL;
	f->nkept = 0;
	/* the blocks whole again for the tests after: what the fill and the
	 * test scattered meanwhile (page tables, slab) the buddy allocator
	 * does not merge back by itself, and a pool refill (which never
	 * compacts) then waited out its back-off (zfs_qemu timed out) */
	if (held)
		__write_file("/proc/sys/vm/compact_memory", "1");
}

long __compact_count_failures(void)
{
	long before = keyed_value("/proc/vmstat", "pgmigrate_fail");
	int ret = __write_file("/proc/sys/vm/compact_memory", "1");

	if (ret)
		return ret;
	if (before < 0)
		return -ENOENT;
	return keyed_value("/proc/vmstat", "pgmigrate_fail") - before;
}

/* tracefs/path := s (util.h's __write_file()). */
static int trace_write(const char *path, const char *s)
{
	char full[320];

	snprintf(full, sizeof(full), TRACEFS "/%s", path);
	return __write_file(full, s);
}

/* Empty the buffer: tracefs clears it when "trace" is opened to truncate. */
static int trace_clear(void)
{
	int fd = open(TRACEFS "/trace", O_WRONLY | O_TRUNC);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static int trace_events(const char *const events[], int n, const char *on)
{
	char path[256];
	int i, ret;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "events/%s/enable", events[i]);
		ret = trace_write(path, on);
		if (ret)
			return ret;
	}
	return 0;
}

int __trace_start(const char *const events[], int n)
{
	struct stat st;
	int ret;

	if (stat(TRACEFS "/trace", &st) &&
	    mount("tracefs", TRACEFS, "tracefs", 0, NULL))
		return errno == ENODEV ? -ENOENT : -errno;	/* no tracefs at all */
	/* no comm recording: it would hook sched_switch, a static key in
	 * __schedule, and multi-threaded TCG now and then tears a text patch
	 * another vCPU runs through; trace_count() finds tasks by pid too */
	ret = trace_write("tracing_on", "0") ?: trace_write("options/record-cmd", "0") ?:
	      trace_clear() ?: trace_events(events, n, "1");
	return ret ?: trace_write("tracing_on", "1");
}

void trace_stop(const char *const events[], int n)
{
	trace_write("tracing_on", "0");
	trace_events(events, n, "0");
}

/* The pids of the tasks whose comm starts with prefix (at most max). */
static int task_pids(const char *prefix, int pids[], int max)
{
	char path[300], comm[64];
	struct dirent *de;
	int n = 0, fd;
	ssize_t len;
	DIR *d = opendir("/proc");

	while (d && n < max && (de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		len = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		comm[len > 0 ? len : 0] = '\0';
		if (!strncmp(comm, prefix, strlen(prefix)))
			pids[n++] = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

/* A trace line's task: "comm-pid", or "<...>-pid" when the comm has left
 * the saved cmdlines; whether it is one of pids (or named task). */
static bool line_is_task(const char *line, const char *task, const int pids[], int npids)
{
	char want[32];
	int i;

	if (strstr(line, task))
		return true;
	for (i = 0; i < npids; i++) {
		snprintf(want, sizeof(want), "-%d ", pids[i]);
		if (strstr(line, want))
			return true;
	}
	return false;
}

int trace_count(const char *const events[], int n, const char *task)
{
	char line[512];
	int i, count = 0, pids[64], npids = task_pids(task, pids, 64);
	FILE *f;

	trace_stop(events, n);
	f = fopen(TRACEFS "/trace", "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || !line_is_task(line, task, pids, npids))
			continue;
		for (i = 0; i < n; i++)
			if (strstr(line, strchr(events[i], '/') + 1)) {
				count++;
				break;
			}
	}
	fclose(f);
	return count;
}
