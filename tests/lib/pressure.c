// SPDX-License-Identifier: GPL-2.0
/* pressure.c - see pressure.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pressure.h"
#include "util.h"

/* One page kept in this many: the free pieces between kept pages (252 KiB)
 * are far below a 2 MiB block, and what is kept (1/64) costs little. */
#define FRAGMENT_STRIDE	64
#define PAGE		4096ul
#define TRACEFS		"/sys/kernel/tracing"

int __fragment_memory(struct fragmented *f, long leave_mib)
{
	long free_kb = free_memory_kb();
	size_t off, stride = FRAGMENT_STRIDE * PAGE;

	if (free_kb < 0)
		return free_kb;
	if (free_kb / 1024 <= leave_mib)
		return -ENOMEM;
	f->size = ((size_t)(free_kb / 1024 - leave_mib) << 20) / stride * stride;
	f->addr = mmap(NULL, f->size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (f->addr == MAP_FAILED)
		return -errno;
	if (madvise(f->addr, f->size, MADV_NOHUGEPAGE)) {
		munmap(f->addr, f->size);
		return -errno;
	}
	for (off = 0; off < f->size; off += PAGE)
		((volatile char *)f->addr)[off] = 1;
	for (off = 0; off < f->size; off += stride)
		madvise((char *)f->addr + off + PAGE, stride - PAGE, MADV_DONTNEED);
	f->kept_kb = f->size / stride * PAGE / 1024;
	return 0;
}

void fragment_release(struct fragmented *f)
{
	if (f->addr && f->addr != MAP_FAILED)
		munmap(f->addr, f->size);
	f->addr = NULL;
}

/* tracefs/path := s. */
static int trace_write(const char *path, const char *s, int flags)
{
	char full[256];
	int fd, ret = 0;

	snprintf(full, sizeof(full), TRACEFS "/%s", path);
	fd = open(full, O_WRONLY | flags);
	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int trace_events(const char *const events[], int n, const char *on)
{
	char path[256];
	int i, ret;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "events/%s/enable", events[i]);
		ret = trace_write(path, on, 0);
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
		return -errno;
	ret = trace_write("tracing_on", "0", 0) ?: trace_write("trace", "", O_TRUNC) ?:
	      trace_events(events, n, "1");
	return ret ?: trace_write("tracing_on", "1", 0);
}

int trace_count(const char *const events[], int n, const char *task)
{
	char line[512];
	int i, count = 0;
	FILE *f;

	trace_write("tracing_on", "0", 0);
	trace_events(events, n, "0");
	f = fopen(TRACEFS "/trace", "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || !strstr(line, task))
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
