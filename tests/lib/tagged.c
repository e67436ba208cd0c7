// SPDX-License-Identifier: GPL-2.0
/* tagged.c - see tagged.h. Everything below the __tags_*() entry points
 * runs inside a bounded call: system calls only, no stdio or malloc. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "bounded.h"
#include "tagged.h"

/* A tag: the index in the first word, then a byte pattern of it. */
static uint8_t tag_byte(unsigned long n, size_t i)
{
	return (uint8_t)(n * 131u + i * 7u + 1u);
}

void tag_fill(void *page, unsigned long n)
{
	uint8_t *b = page;
	size_t i;

	for (i = 8; i < TAG_PAGE; i++)
		b[i] = tag_byte(n, i);
	memcpy(b, &n, sizeof(n));
}

bool tag_matches(const void *page, unsigned long n, unsigned long zero_blocks)
{
	const uint8_t *b = page;
	unsigned long head;
	size_t i;

	if (zero_blocks & (1ul << (n * TAG_PAGE / TAG_BLOCK))) {
		for (i = 0; i < TAG_PAGE; i++)
			if (b[i])
				return false;
		return true;
	}
	memcpy(&head, b, sizeof(head));
	if (head != n)
		return false;
	for (i = 8; i < TAG_PAGE; i++)
		if (b[i] != tag_byte(n, i))
			return false;
	return true;
}

struct tag_job {
	int fd;				/* the file, for read() and write() */
	const uint8_t *map;		/* or its mapping */
	size_t size;			/* bytes from offset 0 */
	unsigned long zero_blocks;	/* see tagged.h */
	long bad;			/* first page that differs, or -1 */
};

static int write_job(void *arg)
{
	struct tag_job *j = arg;
	uint8_t page[TAG_PAGE];
	unsigned long n;

	for (n = 0; n < j->size / TAG_PAGE; n++) {
		tag_fill(page, n);
		if (pwrite(j->fd, page, TAG_PAGE, n * TAG_PAGE) != TAG_PAGE)
			return -errno ? -errno : -EIO;
	}
	return 0;
}

static int read_job(void *arg)
{
	struct tag_job *j = arg;
	uint8_t page[TAG_PAGE];
	unsigned long n;

	for (n = 0; n < j->size / TAG_PAGE; n++) {
		if (pread(j->fd, page, TAG_PAGE, n * TAG_PAGE) != TAG_PAGE)
			return -errno ? -errno : -EIO;
		if (!tag_matches(page, n, j->zero_blocks)) {
			j->bad = n;
			return -EIO;
		}
	}
	return 0;
}

static int map_job(void *arg)
{
	struct tag_job *j = arg;
	unsigned long n;

	for (n = 0; n < j->size / TAG_PAGE; n++) {
		if (!tag_matches(j->map + n * TAG_PAGE, n, j->zero_blocks)) {
			j->bad = n;
			return -EIO;
		}
	}
	return 0;
}

int __tags_write(int fd, size_t size)
{
	struct tag_job j = { .fd = fd, .size = size, .bad = -1 };

	return bounded_call(write_job, &j, BOUNDED_MS);
}

int __tags_check_read(int fd, size_t size, unsigned long zero_blocks, long *bad)
{
	struct tag_job j = { .fd = fd, .size = size, .zero_blocks = zero_blocks, .bad = -1 };
	int ret = bounded_call(read_job, &j, BOUNDED_MS);

	*bad = j.bad;
	return ret;
}

int __tags_check_map(const void *map, size_t size, unsigned long zero_blocks, long *bad)
{
	struct tag_job j = { .map = map, .size = size, .zero_blocks = zero_blocks, .bad = -1 };
	int ret = bounded_call(map_job, &j, BOUNDED_MS);

	*bad = j.bad;
	return ret;
}
