// SPDX-License-Identifier: GPL-2.0
/* fuse_stall.c - see fuse_stall.h. A FUSE server of the kernel's wire
 * protocol (linux/fuse.h), answering what a mount, a lookup and an open
 * need, and never a READ. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fuse_stall.h"
#include "util.h"

#define STALL_INO	2	/* the file's node id (the root's is FUSE_ROOT_ID) */
#define STALL_NAME	"f"
#define STALL_TTL	3600	/* seconds the kernel may cache names and attributes */
/* A request as /dev/fuse hands it over: the kernel wants room for
 * FUSE_MIN_READ_BUFFER at least, and for max_write (STALL_MAX_WRITE) and
 * the headers; no WRITE comes (the file is read-only). */
#define STALL_MAX_WRITE	4096
#define STALL_BUF	(FUSE_MIN_READ_BUFFER + STALL_MAX_WRITE)
/* Pages per READ: FUSE's upper limit (fuse_max_pages_limit), so that a
 * readahead is few requests. */
#define STALL_MAX_PAGES	256
/* A WILLNEED reads one readahead window at most: FUSE's is what the
 * kernel offers at INIT (VM_READAHEAD_PAGES, 128 KiB), so the range is
 * asked for a window at a time. */
#define STALL_RA_STEP	(128u << 10)
/* How often the server looks at stop while no request comes. */
#define STALL_POLL_MS	100
/* Where FUSE is a module (6.1), scripts/lab stages it here. */
#define FUSE_KO		"/lib/modules/lab/fuse/fuse.ko"
/* How long /dev/fuse may take to appear once the module is in. */
#define FUSE_DEV_WAIT_MS 2000

static int reply(int dev, uint64_t unique, int error, const void *arg, size_t len)
{
	struct fuse_out_header out = {
		.len = sizeof(out) + len, .error = error, .unique = unique,
	};
	struct iovec iov[2] = { { &out, sizeof(out) }, { (void *)arg, len } };

	return writev(dev, iov, len ? 2 : 1) < 0 ? -errno : 0;
}

static void attr_of(const struct fuse_stall *fs, uint64_t ino, struct fuse_attr *a)
{
	bool root = ino == FUSE_ROOT_ID;

	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->mode = root ? S_IFDIR | 0755 : S_IFREG | 0444;
	a->nlink = root ? 2 : 1;
	a->size = root ? 0 : fs->size;
	a->blocks = a->size / 512;
	a->blksize = 4096;
}

static void answer_init(const struct fuse_stall *fs, const struct fuse_in_header *in,
			const struct fuse_init_in *init)
{
	struct fuse_init_out out = {
		.major = FUSE_KERNEL_VERSION,
		.minor = init->minor < FUSE_KERNEL_MINOR_VERSION ? init->minor
								 : FUSE_KERNEL_MINOR_VERSION,
		.max_readahead = init->max_readahead,
		/* reads in the background (a readahead does not wait for
		 * them), large ones */
		.flags = init->flags & (FUSE_ASYNC_READ | FUSE_MAX_PAGES),
		/* every read queued, none held back (root may ask) */
		.max_background = UINT16_MAX,
		.congestion_threshold = UINT16_MAX,
		.max_write = STALL_MAX_WRITE,
		.max_pages = STALL_MAX_PAGES,
	};

	reply(fs->dev, in->unique, 0, &out, sizeof(out));
}

static void answer(struct fuse_stall *fs, const struct fuse_in_header *in, const void *arg)
{
	struct fuse_entry_out entry = { .nodeid = STALL_INO, .entry_valid = STALL_TTL,
					.attr_valid = STALL_TTL };
	struct fuse_attr_out attr = { .attr_valid = STALL_TTL };
	struct fuse_open_out open = { .fh = 1 };

	switch (in->opcode) {
	case FUSE_INIT:
		answer_init(fs, in, arg);
		break;
	case FUSE_LOOKUP:
		if (in->nodeid != FUSE_ROOT_ID || strcmp(arg, STALL_NAME)) {
			reply(fs->dev, in->unique, -ENOENT, NULL, 0);
			break;
		}
		attr_of(fs, STALL_INO, &entry.attr);
		reply(fs->dev, in->unique, 0, &entry, sizeof(entry));
		break;
	case FUSE_GETATTR:
		attr_of(fs, in->nodeid, &attr.attr);
		reply(fs->dev, in->unique, 0, &attr, sizeof(attr));
		break;
	case FUSE_OPEN:
		reply(fs->dev, in->unique, 0, &open, sizeof(open));
		break;
	case FUSE_READ:
		fs->reads++;	/* the point: never answered */
		break;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		break;		/* no answer expected */
	case FUSE_FLUSH:
	case FUSE_RELEASE:
		reply(fs->dev, in->unique, 0, NULL, 0);
		break;
	default:
		reply(fs->dev, in->unique, -ENOSYS, NULL, 0);
	}
}

static void *serve(void *arg)
{
	struct fuse_stall *fs = arg;
	struct pollfd p = { .fd = fs->dev, .events = POLLIN };
	static char buf[STALL_BUF];	/* one server per process at a time */
	ssize_t n;

	while (!fs->stop) {
		if (poll(&p, 1, STALL_POLL_MS) <= 0)
			continue;
		n = read(fs->dev, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOENT))
			continue;	/* ENOENT: a request interrupted meanwhile */
		if (n < 0)
			break;		/* ENODEV: the connection is gone */
		if ((size_t)n >= sizeof(struct fuse_in_header))
			answer(fs, (void *)buf, buf + sizeof(struct fuse_in_header));
	}
	return NULL;
}

/* /dev/fuse, its module loaded first where FUSE is one (6.1: scripts/lab
 * stages it); -ENODEV when the kernel has no FUSE. */
static int open_fuse_dev(void)
{
	double end = now_ms() + FUSE_DEV_WAIT_MS;
	int fd, ret;

	if (access("/dev/fuse", F_OK)) {
		ret = __insmod(FUSE_KO, "");
		if (ret && ret != -EEXIST)
			return -ENODEV;
	}
	/* devtmpfs makes the node as the module registers it */
	while ((fd = open("/dev/fuse", O_RDWR | O_CLOEXEC)) < 0 && errno == ENOENT &&
	       now_ms() < end)
		usleep(10000);
	if (fd < 0)
		return errno == ENOENT ? -ENODEV : -errno;
	return fd;
}

int __fuse_stall_start(struct fuse_stall *fs, const char *dir, uint64_t size)
{
	char opts[128], path[96];
	int ret;

	memset(fs, 0, sizeof(*fs));
	snprintf(fs->dir, sizeof(fs->dir), "%s", dir);
	fs->size = size;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	fs->dev = open_fuse_dev();
	if (fs->dev < 0)
		return fs->dev;
	fs->has_dev = true;
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fs->dev);
	if (mount("zp-stall", dir, "fuse", MS_NOSUID | MS_NODEV, opts)) {
		ret = -errno;
		goto fail;
	}
	fs->mounted = true;
	ret = -pthread_create(&fs->server, NULL, serve, fs);
	if (ret)
		goto fail;
	fs->serving = true;
	snprintf(path, sizeof(path), "%s/" STALL_NAME, dir);
	fs->file = open(path, O_RDONLY | O_CLOEXEC);
	if (fs->file < 0) {
		ret = -errno;
		goto fail;
	}
	fs->has_file = true;
	return 0;
fail:
	fuse_stall_stop(fs);
	return ret;
}

int __fuse_stall_lock(struct fuse_stall *fs, uint64_t off, uint64_t len)
{
	uint64_t at;
	int ret = 0;

	for (at = off; at < off + len && !ret; at += STALL_RA_STEP)
		ret = posix_fadvise(fs->file, at, STALL_RA_STEP, POSIX_FADV_WILLNEED);
	return -ret;
}

void fuse_stall_stop(struct fuse_stall *fs)
{
	/* first: the device's last close (the mount holds none) aborts the
	 * connection, the reads end with an error and their folios are
	 * unlocked, and the file's close below gets its FLUSH answered with
	 * ENOTCONN whatever became of the server */
	if (fs->has_dev)
		close(fs->dev);
	fs->has_dev = false;
	if (fs->serving) {
		fs->stop = 1;
		pthread_join(fs->server, NULL);
		fs->serving = false;
	}
	if (fs->has_file)
		close(fs->file);
	fs->has_file = false;
	if (fs->mounted)
		umount2(fs->dir, MNT_DETACH);
	fs->mounted = false;
}
