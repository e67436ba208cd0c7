// SPDX-License-Identifier: GPL-2.0
/*
 * backing.c - see backing.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backing.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#define MAP_HUGE_2MB_FLAG (21 << MAP_HUGE_SHIFT)
#define MAP_HUGE_1GB_FLAG (30 << MAP_HUGE_SHIFT)

#define SZ_2M (2ul << 20)

const char *backing_name(enum backing b)
{
	static const char *const names[] = {
		[BACKING_ANON_4K] = "anon4k",
		[BACKING_THP] = "thp",
		[BACKING_HUGETLB_2M] = "hugetlb2m",
		[BACKING_HUGETLB_1G] = "hugetlb1g",
		[BACKING_ZEROPINFS] = "zeropinfs",
	};
	return names[b];
}

size_t backing_pagesize(enum backing b)
{
	switch (b) {
	case BACKING_THP:
	case BACKING_HUGETLB_2M:
	case BACKING_ZEROPINFS:
		return SZ_2M;
	case BACKING_HUGETLB_1G:
		return 1ul << 30;
	default:
		return 4096;
	}
}

/* Anonymous memory with the start rounded up to 2 MiB, as QEMU aligns RAM. */
static int alloc_anon(struct buffer *buf, size_t size, int advice)
{
	uintptr_t start;

	buf->raw_size = size + SZ_2M;
	buf->raw = mmap(NULL, buf->raw_size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (buf->raw == MAP_FAILED)
		return -errno;
	start = ((uintptr_t)buf->raw + SZ_2M - 1) & ~(SZ_2M - 1);
	buf->addr = (void *)start;
	buf->size = size;
	return madvise(buf->addr, size, advice) ? -errno : 0;
}

static int alloc_hugetlb(struct buffer *buf, size_t size, int sizeflag)
{
	buf->raw_size = size;
	buf->raw = mmap(NULL, size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | sizeflag, -1, 0);
	if (buf->raw == MAP_FAILED)
		return -errno;
	buf->addr = buf->raw;
	buf->size = size;
	return 0;
}

/* A file on zeropinfs mapped shared, as QEMU's memory-backend-file does. */
static int alloc_zeropinfs(struct buffer *buf, size_t size)
{
	static int seq;

	snprintf(buf->path, sizeof(buf->path), BACKING_ZEROPINFS_DIR "/buf-%d-%d",
		 getpid(), seq++);
	buf->fd = open(buf->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (buf->fd < 0)
		return -errno;
	if (ftruncate(buf->fd, size))
		return -errno;
	buf->raw_size = size;
	buf->raw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, buf->fd, 0);
	if (buf->raw == MAP_FAILED)
		return -errno;
	buf->addr = buf->raw;
	buf->size = size;
	return 0;
}

static void close_file(struct buffer *buf)
{
	if (buf->fd >= 0)
		close(buf->fd);
	if (buf->path[0])
		unlink(buf->path);
}

int __buffer_alloc(struct buffer *buf, enum backing b, size_t size)
{
	int ret;

	memset(buf, 0, sizeof(*buf));
	buf->fd = -1;
	if (size % backing_pagesize(b))
		return -EINVAL;
	switch (b) {
	case BACKING_ANON_4K:
		ret = alloc_anon(buf, size, MADV_NOHUGEPAGE);
		break;
	case BACKING_THP:
		ret = alloc_anon(buf, size, MADV_HUGEPAGE);
		break;
	case BACKING_HUGETLB_2M:
		ret = alloc_hugetlb(buf, size, MAP_HUGE_2MB_FLAG);
		break;
	case BACKING_HUGETLB_1G:
		ret = alloc_hugetlb(buf, size, MAP_HUGE_1GB_FLAG);
		break;
	case BACKING_ZEROPINFS:
		ret = alloc_zeropinfs(buf, size);
		break;
	default:
		ret = -EINVAL;
	}
	if (ret) {
		if (buf->raw && buf->raw != MAP_FAILED)
			munmap(buf->raw, buf->raw_size);
		close_file(buf);
		memset(buf, 0, sizeof(*buf));
		buf->fd = -1;
	}
	return ret;
}

void buffer_alloc(struct buffer *buf, enum backing b, size_t size)
{
	int ret = __buffer_alloc(buf, b, size);

	if (ret) {
		fprintf(stderr, "# allocate %zu bytes of %s: %s\n", size,
			backing_name(b), strerror(-ret));
		exit(1);
	}
}

void buffer_touch(struct buffer *buf)
{
	volatile char *p = buf->addr;
	size_t off;

	for (off = 0; off < buf->size; off += 4096)
		p[off] = 1;
}

void buffer_free(struct buffer *buf)
{
	if (buf->raw)
		munmap(buf->raw, buf->raw_size);
	close_file(buf);
	memset(buf, 0, sizeof(*buf));
	buf->fd = -1;
}
