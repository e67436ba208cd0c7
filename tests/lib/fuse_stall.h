/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fuse_stall.h - what a hostile unprivileged user can do with FUSE: a
 * file whose reads its server never answers. The page-cache folios such
 * a read (or readahead) allocates stay locked until the connection goes:
 * folios the kernel's migration would wait for without a bound.
 * Same convention as the other helpers: __foo() returns 0 or -errno.
 */
#ifndef FUSE_STALL_H
#define FUSE_STALL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct fuse_stall {
	char dir[64];		/* the mount point */
	int dev;		/* /dev/fuse: the server's end of the connection */
	bool has_dev;		/* ... open */
	bool mounted;		/* dir is mounted */
	int file;		/* the one file, open for reading */
	bool has_file;		/* ... open */
	uint64_t size;		/* ... its size */
	pthread_t server;	/* answers everything but READ */
	bool serving;		/* the server thread runs */
	volatile int stop;	/* the server thread is to return */
	volatile long reads;	/* READ requests left unanswered */
};

/* Mount a FUSE file system of one file of size bytes at dir (made if
 * missing) with its server in a thread, and open the file. -ENODEV when
 * the kernel has no FUSE; nothing is left behind on an error. */
int __fuse_stall_start(struct fuse_stall *fs, const char *dir, uint64_t size);
/* Read ahead [off, off + len) of the file (POSIX_FADV_WILLNEED): the
 * kernel allocates its folios, locks them and asks the server, which
 * never answers. Returns at once. */
int __fuse_stall_lock(struct fuse_stall *fs, uint64_t off, uint64_t len);
/* End the connection (the pending reads fail, their folios unlocked and
 * dropped with the file system) and unmount. Idempotent; a zeroed or
 * never-started struct is fine. */
void fuse_stall_stop(struct fuse_stall *fs);

#endif /* FUSE_STALL_H */
