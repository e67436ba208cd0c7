/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tagged.h - a file whose every 4 KiB page carries its own index, so that
 * a page that moved, vanished or was written through the wrong address
 * shows up as the wrong tag at the wrong place. Every access runs as a
 * bounded call (bounded.h): a read, write or fault that never returns is
 * reported as -ETIMEDOUT, a SIGBUS as BOUNDED_SIG(SIGBUS).
 *
 * zero_blocks: a bit per 2 MiB block whose pages must read zero instead
 * (a block an operation punched or truncated away).
 */
#ifndef TAGGED_H
#define TAGGED_H

#include <stdbool.h>
#include <stddef.h>

#define TAG_PAGE	4096ul
#define TAG_BLOCK	(2ul << 20)

/* Fill page with the tag of page index n / whether it holds it. */
void tag_fill(void *page, unsigned long n);
bool tag_matches(const void *page, unsigned long n, unsigned long zero_blocks);

/* pwrite() every page's tag into fd (size bytes from 0). */
int __tags_write(int fd, size_t size);
/* Compare through read() / through map (faulting it in); *bad is the
 * first page that differs (-1 when none), the result -EIO then. */
int __tags_check_read(int fd, size_t size, unsigned long zero_blocks, long *bad);
int __tags_check_map(const void *map, size_t size, unsigned long zero_blocks, long *bad);

#endif /* TAGGED_H */
