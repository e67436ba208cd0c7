/* SPDX-License-Identifier: GPL-2.0 */
/*
 * backing.h - the kinds of memory a VMM backs guest RAM with, allocated the
 * way QEMU does, so tests and benchmarks pin what production pins.
 */
#ifndef BACKING_H
#define BACKING_H

#include <stdbool.h>
#include <stddef.h>

enum backing {
	BACKING_ANON_4K,	/* anonymous, MADV_NOHUGEPAGE */
	BACKING_THP,		/* anonymous, 2 MiB aligned, MADV_HUGEPAGE */
	BACKING_HUGETLB_2M,	/* MAP_HUGETLB | MAP_HUGE_2MB */
	BACKING_HUGETLB_1G,	/* MAP_HUGETLB | MAP_HUGE_1GB */
	BACKING_ZEROPINFS,	/* MAP_SHARED file on a zeropinfs mount */
};

/* Where BACKING_ZEROPINFS files are created (a zeropinfs mount). */
#define BACKING_ZEROPINFS_DIR "/mnt/zeropinfs"

struct buffer {
	void *addr;		/* start, aligned to the backing's page size */
	size_t size;		/* usable bytes from addr */
	void *raw;		/* what mmap returned (alignment slack included) */
	size_t raw_size;	/* length of that mapping */
	int fd;			/* backing file (zeropinfs), -1 otherwise */
	char path[64];		/* its name, unlinked on free */
};

/* Name used in reports and JSON ("anon4k", "thp", "hugetlb2m", "hugetlb1g",
 * "zeropinfs"). */
const char *backing_name(enum backing b);
/* The backing's page size in bytes. */
size_t backing_pagesize(enum backing b);

/* mmap size bytes; 0 or a negative errno (-ENOMEM: no hugetlb pages left). */
int __buffer_alloc(struct buffer *buf, enum backing b, size_t size);
void buffer_alloc(struct buffer *buf, enum backing b, size_t size);
/* Fault every page in by writing it ("warm"). */
void buffer_touch(struct buffer *buf);
void buffer_free(struct buffer *buf);

#endif /* BACKING_H */
