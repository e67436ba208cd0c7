// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_fs - zeropinfs as a filesystem: files, directories, symlinks, sizes in whole
 * 2 MiB blocks, PMD-mapped folios, SIGBUS past EOF, hole punching,
 * copy-on-write private mappings, clear errnos for every bad option, size
 * and offset, memcg charging, and module unload refused while in use.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/falloc.h>

#include "kselftest_harness.h"
#include "bounded.h"
#include "zeropin.h"

#define ZEROPINFS_MAGIC	0x7a70696e
#define MOUNT_SIZE	(256ul << 20)
#define FILE_SIZE	(64ul << 20)

FIXTURE(zfs) {
	int fd;		/* ZFS_MNT/file, FILE_SIZE bytes */
};

FIXTURE_SETUP(zfs)
{
	zeropin_reset();
	zeropin_load("pool_mib=128");
	zfs_mount(ZFS_MNT, "size=256M,mode=0755");
	self->fd = zfs_create(ZFS_MNT "/file", FILE_SIZE);
}

FIXTURE_TEARDOWN(zfs)
{
	close(self->fd);
	zeropin_reset();
}

static long used_kb(void)
{
	struct statfs st;

	if (statfs(ZFS_MNT, &st))
		return -errno;
	return (long)(st.f_blocks - st.f_bfree) * (st.f_bsize / 1024);
}

TEST_F(zfs, statfs_reports_type_and_size)
{
	struct statfs st;

	ASSERT_EQ(0, statfs(ZFS_MNT, &st));
	EXPECT_EQ(ZEROPINFS_MAGIC, st.f_type);
	EXPECT_EQ(MOUNT_SIZE, st.f_blocks * st.f_bsize);
	EXPECT_EQ(0, used_kb());	/* ftruncate allocates nothing */
}

/* st_blksize is the 2 MiB block, as tmpfs with huge pages reports its PMD size. */
TEST_F(zfs, stat_reports_the_block_as_blksize)
{
	struct stat st;

	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(2ul << 20, st.st_blksize);
	EXPECT_EQ(FILE_SIZE, st.st_size);
}

TEST_F(zfs, directories_rename_unlink)
{
	struct stat st;
	int fd;

	ASSERT_EQ(0, mkdir(ZFS_MNT "/d", 0700));
	ASSERT_EQ(0, mkdir(ZFS_MNT "/d/e", 0700));
	fd = zfs_create(ZFS_MNT "/d/e/f", SZ_2M);
	close(fd);
	ASSERT_EQ(0, rename(ZFS_MNT "/d/e/f", ZFS_MNT "/d/g"));
	ASSERT_EQ(0, stat(ZFS_MNT "/d/g", &st));
	EXPECT_EQ(SZ_2M, st.st_size);
	EXPECT_EQ(-1, rmdir(ZFS_MNT "/d"));
	EXPECT_EQ(ENOTEMPTY, errno);
	ASSERT_EQ(0, unlink(ZFS_MNT "/d/g"));
	ASSERT_EQ(0, rmdir(ZFS_MNT "/d/e"));
	ASSERT_EQ(0, rmdir(ZFS_MNT "/d"));
}

/*
 * Symlinks (the libvirt hook links libvirt's RAM folder to the domain's
 * own): readlink gives the target back, a mapping opened through the link
 * is the target's file, the link survives the target's rename as a
 * dangling one, chown -h owns the link, and unlinking it leaves the
 * target. The targets go with the mount (kmemleak's check after the run).
 */
TEST_F(zfs, symlinks_resolve_and_go)
{
	char buf[PATH_MAX], longname[PATH_MAX + 1];
	struct stat st;
	ssize_t n;
	char *p;
	int fd;

	ASSERT_EQ(0, mkdir(ZFS_MNT "/own", 0700));
	fd = zfs_create(ZFS_MNT "/own/pc.ram", SZ_2M);
	p = mmap(NULL, SZ_2M, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	p[0] = 42;
	ASSERT_EQ(0, munmap(p, SZ_2M));
	close(fd);
	ASSERT_EQ(0, symlink(ZFS_MNT "/own/pc.ram", ZFS_MNT "/link"));
	n = readlink(ZFS_MNT "/link", buf, sizeof(buf));
	ASSERT_EQ((ssize_t)strlen(ZFS_MNT "/own/pc.ram"), n);
	EXPECT_EQ(0, memcmp(buf, ZFS_MNT "/own/pc.ram", n));
	ASSERT_EQ(0, lstat(ZFS_MNT "/link", &st));
	EXPECT_TRUE(S_ISLNK(st.st_mode));
	EXPECT_EQ(n, st.st_size);
	fd = open(ZFS_MNT "/link", O_RDWR);
	ASSERT_LE(0, fd);
	p = mmap(NULL, SZ_2M, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(42, p[0]);
	munmap(p, SZ_2M);
	close(fd);
	ASSERT_EQ(0, lchown(ZFS_MNT "/link", 64055, 64055));
	ASSERT_EQ(0, lstat(ZFS_MNT "/link", &st));
	EXPECT_EQ(64055u, st.st_uid);
	ASSERT_EQ(0, rename(ZFS_MNT "/own/pc.ram", ZFS_MNT "/own/moved"));
	EXPECT_EQ(-1, open(ZFS_MNT "/link", O_RDWR));
	EXPECT_EQ(ENOENT, errno);
	ASSERT_EQ(0, unlink(ZFS_MNT "/link"));
	ASSERT_EQ(0, stat(ZFS_MNT "/own/moved", &st));
	/* one past the longest target the syscall takes, and the longest */
	memset(longname, 'x', sizeof(longname));
	longname[PATH_MAX] = 0;
	EXPECT_EQ(-1, symlink(longname, ZFS_MNT "/long"));
	EXPECT_EQ(ENAMETOOLONG, errno);
	longname[PATH_MAX - 1] = 0;
	ASSERT_EQ(0, symlink(longname, ZFS_MNT "/long"));
	ASSERT_EQ(0, lstat(ZFS_MNT "/long", &st));
	EXPECT_EQ(PATH_MAX - 1, st.st_size);
	n = readlink(ZFS_MNT "/long", buf, sizeof(buf));
	EXPECT_EQ(PATH_MAX - 1, n);
	ASSERT_EQ(0, unlink(ZFS_MNT "/long"));
	ASSERT_EQ(0, unlink(ZFS_MNT "/own/moved"));
	ASSERT_EQ(0, rmdir(ZFS_MNT "/own"));
}

TEST_F(zfs, write_read_back)
{
	char buf[8192], out[8192];
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7);
	ASSERT_EQ(sizeof(buf), pwrite(self->fd, buf, sizeof(buf), SZ_2M - 4096));
	ASSERT_EQ(sizeof(out), pread(self->fd, out, sizeof(out), SZ_2M - 4096));
	EXPECT_EQ(0, memcmp(buf, out, sizeof(buf)));
	EXPECT_EQ(2 * SZ_2M / 1024, used_kb());	/* the write spans two blocks */
	/* a hole reads as zero and allocates nothing */
	ASSERT_EQ(sizeof(out), pread(self->fd, out, sizeof(out), 16 * SZ_2M));
	EXPECT_TRUE(all_bytes(out, 0, sizeof(out)));
	EXPECT_EQ(2 * SZ_2M / 1024, used_kb());
}

TEST_F(zfs, write_past_eof_extends_exactly)
{
	struct stat st;

	ASSERT_EQ(5, pwrite(self->fd, "hello", 5, FILE_SIZE));
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(FILE_SIZE + 5, st.st_size);
}

TEST_F(zfs, mapping_is_pmd_mapped)
{
	char *p = map_file(self->fd, FILE_SIZE, MAP_SHARED);

	EXPECT_EQ(0, (uintptr_t)p % SZ_2M);	/* 2 MiB-aligned like tmpfs huge */
	touch_range(p, FILE_SIZE, true);
	EXPECT_EQ(FILE_SIZE / 1024, smaps_kb(p, "FilePmdMapped"));
	EXPECT_TRUE(all_bytes(p, 0, FILE_SIZE));
	munmap(p, FILE_SIZE);
}

TEST_F(zfs, shared_mapping_writes_reach_the_file)
{
	char *p = map_file(self->fd, FILE_SIZE, MAP_SHARED), out[4];

	memcpy(p + SZ_2M + 100, "abcd", 4);
	ASSERT_EQ(4, pread(self->fd, out, 4, SZ_2M + 100));
	EXPECT_EQ(0, memcmp(out, "abcd", 4));
	munmap(p, FILE_SIZE);
}

TEST_F(zfs, private_mapping_is_copy_on_write)
{
	char *p = map_file(self->fd, FILE_SIZE, MAP_PRIVATE), out[4];

	ASSERT_EQ(4, pwrite(self->fd, "file", 4, 0));
	EXPECT_EQ(0, memcmp(p, "file", 4));	/* sees the file ... */
	memcpy(p, "priv", 4);			/* ... until it writes */
	ASSERT_EQ(4, pread(self->fd, out, 4, 0));
	EXPECT_EQ(0, memcmp(out, "file", 4));
	EXPECT_EQ(0, memcmp(p, "priv", 4));
	/* a write as the very first touch of a block must copy too */
	memcpy(p + 4 * SZ_2M, "priv", 4);
	ASSERT_EQ(4, pread(self->fd, out, 4, 4 * SZ_2M));
	EXPECT_TRUE(all_bytes(out, 0, 4));
	munmap(p, FILE_SIZE);
}

static sigjmp_buf sigbus_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(sigbus_jmp, 1);
}

/* 1 when touching p raises SIGBUS, 0 when it does not. */
static int touch_raises_sigbus(volatile char *p)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int hit = 0;

	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(sigbus_jmp, 1))
		hit = 1;
	else
		(void)*p;
	sigaction(SIGBUS, &old, NULL);
	return hit;
}

TEST_F(zfs, sigbus_past_eof)
{
	char *p;

	ASSERT_EQ(0, ftruncate(self->fd, SZ_2M));
	p = map_file(self->fd, 2 * SZ_2M, MAP_SHARED);
	EXPECT_EQ(0, touch_raises_sigbus(p + SZ_2M - 1));
	EXPECT_EQ(1, touch_raises_sigbus(p + SZ_2M));
	EXPECT_EQ(1, touch_raises_sigbus(p + 2 * SZ_2M - 1));
	munmap(p, 2 * SZ_2M);
}

TEST_F(zfs, punch_hole_frees_and_reads_zero)
{
	char *p = map_file(self->fd, 4 * SZ_2M, MAP_SHARED);
	long before;

	memset(p, 0xab, 4 * SZ_2M);
	before = used_kb();
	EXPECT_EQ(4 * SZ_2M / 1024, before);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			       SZ_2M, 2 * SZ_2M));
	EXPECT_EQ(before - 2 * SZ_2M / 1024, used_kb());
	EXPECT_TRUE(all_bytes(p, 0xab, SZ_2M));
	EXPECT_TRUE(all_bytes(p + SZ_2M, 0, 2 * SZ_2M));
	EXPECT_TRUE(all_bytes(p + 3 * SZ_2M, 0xab, SZ_2M));
	munmap(p, 4 * SZ_2M);
}

TEST_F(zfs, fallocate_allocates)
{
	struct stat st;

	ASSERT_EQ(0, fallocate(self->fd, 0, FILE_SIZE, 2 * SZ_2M));
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(FILE_SIZE + 2 * SZ_2M, st.st_size);
	EXPECT_EQ(2 * SZ_2M / 1024, used_kb());
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_KEEP_SIZE, 0, SZ_2M));
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(FILE_SIZE + 2 * SZ_2M, st.st_size);
	EXPECT_EQ(3 * SZ_2M / 1024, used_kb());
}

TEST_F(zfs, bad_sizes_and_offsets)
{
	EXPECT_EQ(-1, ftruncate(self->fd, SZ_2M + 4096));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, fallocate(self->fd, 0, 4096, SZ_2M));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, fallocate(self->fd, 0, 0, SZ_2M + 4096));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, SZ_2M));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, fallocate(self->fd, FALLOC_FL_COLLAPSE_RANGE, 0, SZ_2M));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(-1, fallocate(self->fd, FALLOC_FL_ZERO_RANGE, 0, SZ_2M));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(-1, ftruncate(self->fd, -SZ_2M));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, used_kb());	/* nothing left behind */
}

TEST_F(zfs, mount_size_is_enforced)
{
	char *p;

	/* more than the mount holds: ENOSPC, and nothing stays past EOF */
	EXPECT_EQ(-1, fallocate(self->fd, 0, 0, MOUNT_SIZE + SZ_2M));
	EXPECT_EQ(ENOSPC, errno);
	EXPECT_EQ(FILE_SIZE / 1024, used_kb());
	ASSERT_EQ(0, fallocate(self->fd, 0, 0, MOUNT_SIZE));
	EXPECT_EQ(MOUNT_SIZE / 1024, used_kb());
	EXPECT_EQ(-1, pwrite(self->fd, "x", 1, MOUNT_SIZE + SZ_2M));
	EXPECT_EQ(ENOSPC, errno);
	ASSERT_EQ(0, ftruncate(self->fd, MOUNT_SIZE + 2 * SZ_2M));
	p = map_file(self->fd, MOUNT_SIZE + 2 * SZ_2M, MAP_SHARED);
	EXPECT_EQ(1, touch_raises_sigbus(p + MOUNT_SIZE + SZ_2M));
	munmap(p, MOUNT_SIZE + 2 * SZ_2M);
	EXPECT_EQ(MOUNT_SIZE / 1024, used_kb());
	ASSERT_EQ(0, ftruncate(self->fd, 0));
	EXPECT_EQ(0, used_kb());
}

/* A write past EOF whose copy faults takes a block and gives it back. */
TEST_F(zfs, failed_write_leaves_no_block)
{
	void *volatile unmapped = (void *)8;

	EXPECT_EQ(-1, pwrite(self->fd, unmapped, 4096, FILE_SIZE + 4 * SZ_2M));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(0, used_kb());
}

/* Blocks reserved past EOF with FALLOC_FL_KEEP_SIZE stay reserved when a
 * later write or fallocate fails over them: the failed call takes back
 * only the blocks it added itself. */
TEST_F(zfs, failed_calls_keep_earlier_reservations)
{
	void *volatile unmapped = (void *)8;
	struct stat st;
	char *p;

	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_KEEP_SIZE, FILE_SIZE, 2 * SZ_2M));
	ASSERT_EQ(2 * SZ_2M / 1024, used_kb());
	/* a copy that faults into a reserved block, then into a new one */
	EXPECT_EQ(-1, pwrite(self->fd, unmapped, 4096, FILE_SIZE));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, pwrite(self->fd, unmapped, 4096, FILE_SIZE + 4 * SZ_2M));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(2 * SZ_2M / 1024, used_kb());
	/* a fallocate over the reservation that runs out of room */
	EXPECT_EQ(-1, fallocate(self->fd, 0, FILE_SIZE, MOUNT_SIZE + 2 * SZ_2M));
	EXPECT_EQ(ENOSPC, errno);
	EXPECT_EQ(2 * SZ_2M / 1024, used_kb());
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(FILE_SIZE, st.st_size);
	/* the reserved blocks serve the file once it grows over them: zero */
	ASSERT_EQ(0, ftruncate(self->fd, FILE_SIZE + 2 * SZ_2M));
	EXPECT_EQ(2 * SZ_2M / 1024, used_kb());
	p = map_file(self->fd, FILE_SIZE + 2 * SZ_2M, MAP_SHARED);
	EXPECT_TRUE(all_bytes(p + FILE_SIZE, 0, 2 * SZ_2M));
	EXPECT_EQ(2 * SZ_2M / 1024, used_kb());
	munmap(p, FILE_SIZE + 2 * SZ_2M);
}

/* The last block a file can have: writes there work, past it they get
 * EFBIG (not an offset that wraps, which looped for 2^43 steps under
 * inode_lock after a write at LLONG_MAX - 1). */
TEST_F(zfs, writes_at_the_largest_offsets)
{
	const off_t max = LLONG_MAX & ~(off_t)(SZ_2M - 1);	/* s_maxbytes */
	void *volatile unmapped = NULL;
	struct stat st;
	char c = 0;

	EXPECT_EQ(-1, pwrite(self->fd, "x", 1, LLONG_MAX - 1));
	EXPECT_EQ(EFBIG, errno);
	EXPECT_EQ(-1, fallocate(self->fd, 0, max, SZ_2M));
	EXPECT_EQ(EFBIG, errno);
	EXPECT_EQ(-1, pwrite(self->fd, unmapped, 1, max - 1));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(0, used_kb());
	ASSERT_EQ(1, pwrite(self->fd, "x", 1, max - 1));
	ASSERT_EQ(0, fstat(self->fd, &st));
	EXPECT_EQ(max, st.st_size);
	EXPECT_EQ(1, pread(self->fd, &c, 1, max - 1));
	EXPECT_EQ('x', c);
	EXPECT_EQ(SZ_2M / 1024, used_kb());
	ASSERT_EQ(0, ftruncate(self->fd, FILE_SIZE));
	EXPECT_EQ(0, used_kb());
}

TEST_F(zfs, bad_mount_options)
{
	static const char *const bad[] = {
		"size=3M", "size=0", "size=abc", "size=", "size=2M+", "mode=99999",
		"mode=abc", "uid=4294967295", "gid=4294967295", "uid=x", "bogus=1", "bogus",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_EQ(-EINVAL, __zfs_mount("/mnt/zfs-bad", bad[i])) TH_LOG("%s", bad[i]);
	EXPECT_EQ(0, __zfs_mount("/mnt/zfs-ok", "size=2M,mode=1777,uid=1000,gid=1000"));
	EXPECT_EQ(0, umount("/mnt/zfs-ok"));
}

TEST_F(zfs, mount_options_apply)
{
	struct stat st;

	ASSERT_EQ(0, __zfs_mount("/mnt/zfs-opts", "size=4M,mode=1770,uid=1000,gid=2000"));
	ASSERT_EQ(0, stat("/mnt/zfs-opts", &st));
	EXPECT_EQ(01770, st.st_mode & 07777);
	EXPECT_EQ(1000, st.st_uid);
	EXPECT_EQ(2000, st.st_gid);
	EXPECT_EQ(0, umount("/mnt/zfs-opts"));
}

/* delete_module(O_NONBLOCK) answers EWOULDBLOCK (EAGAIN) while in use. */
TEST_F(zfs, unload_refused_while_mounted_or_mapped)
{
	char *p = map_file(self->fd, SZ_2M, MAP_SHARED);

	p[0] = 1;
	EXPECT_EQ(-EAGAIN, __zeropin_unload());
	ASSERT_EQ(0, umount2(ZFS_MNT, MNT_DETACH));
	close(self->fd);
	self->fd = -1;
	EXPECT_EQ(-EAGAIN, __zeropin_unload());	/* still mapped */
	munmap(p, SZ_2M);
	EXPECT_EQ(0, __zeropin_unload());
	EXPECT_EQ(-1, access(ZEROPIN_SYSFS, F_OK));
}

/* Folios are charged to the memory cgroup of the task that faults them. */
TEST_F(zfs, faults_charge_the_memcg)
{
	char cg[] = "/sys/fs/cgroup/zfs-test", path[128], buf[32];
	long current;
	char *p;
	FILE *f;
	int fd;

	mkdir("/sys/fs/cgroup", 0755);
	if (mount("none", "/sys/fs/cgroup", "cgroup2", 0, NULL) && errno != EBUSY)
		SKIP(return, "no cgroup2: %s", strerror(errno));
	fd = open("/sys/fs/cgroup/cgroup.subtree_control", O_WRONLY);
	ASSERT_LE(0, fd);
	write(fd, "+memory", 7);
	close(fd);
	ASSERT_EQ(0, mkdir(cg, 0755) && errno != EEXIST);
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	fd = open(path, O_WRONLY);
	ASSERT_LE(0, fd);
	snprintf(buf, sizeof(buf), "%d", getpid());
	ASSERT_LT(0, write(fd, buf, strlen(buf)));
	close(fd);
	p = map_file(self->fd, FILE_SIZE, MAP_SHARED);
	touch_range(p, FILE_SIZE, true);
	snprintf(path, sizeof(path), "%s/memory.current", cg);
	f = fopen(path, "r");
	ASSERT_NE(NULL, f);
	ASSERT_EQ(1, fscanf(f, "%ld", &current));
	fclose(f);
	EXPECT_LE(FILE_SIZE, current);
	munmap(p, FILE_SIZE);
}

/* A memcg-limited VMM: what it may keep of a zeropinfs file. */
#define MEMCG_MAX	(32ul << 20)
#define MEMCG_FILE	(128ul << 20)
#define MEMCG_DIR	"/sys/fs/cgroup/zfs-limit"

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* The limited VMM's two ways in, each in a child moved into the cgroup:
 * stores through a shared mapping, and write(). */
static int enter_limited(void);

static int limited_stores(void *arg)
{
	int fd = *(int *)arg;
	char *p;

	if (enter_limited())
		return -EPERM;
	p = mmap(NULL, MEMCG_FILE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	touch_range(p, MEMCG_FILE, true);	/* SIGBUS past the limit */
	return -E2BIG;				/* it all fit: the limit did nothing */
}

static int limited_writes(void *arg)
{
	static char chunk[1 << 20];
	int fd = *(int *)arg;
	size_t off;

	if (enter_limited())
		return -EPERM;
	memset(chunk, 0x5a, sizeof(chunk));
	for (off = 0; off < MEMCG_FILE; ) {
		ssize_t n = pwrite(fd, chunk, sizeof(chunk), off);

		/* ENOMEM past the limit; a write the limit cut short (4 KiB
		 * pages: a block no longer fits) comes back short first */
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		off += n;
	}
	return -E2BIG;
}

/* Into the limited cgroup, without a core dump to charge there. */
static int enter_limited(void)
{
	struct rlimit none = { 0, 0 };
	char pid[16];

	setrlimit(RLIMIT_CORE, &none);
	snprintf(pid, sizeof(pid), "%d", getpid());
	return write_str(MEMCG_DIR "/cgroup.procs", pid);
}

/* A VMM in a memcg whose limit is below its guest RAM hits the limit
 * cleanly: near it, 4 KiB pages are charged where a block no longer fits
 * (the fallback of a fragmented host); past it a store gets SIGBUS,
 * write() ENOMEM; the memcg's OOM killer never runs, nor the host's (guest RAM on
 * zeropinfs is never reclaimable: an OOM kill would be the only way out,
 * and a fault that reports OOM without one would retry forever). */
TEST_F(zfs, memcg_limit_gives_sigbus_and_enomem_not_oom)
{
	char max[32];
	long oom0 = keyed_value("/proc/vmstat", "oom_kill");
	int fd, ret;

	mkdir("/sys/fs/cgroup", 0755);
	if (mount("none", "/sys/fs/cgroup", "cgroup2", 0, NULL) && errno != EBUSY)
		SKIP(return, "no cgroup2: %s", strerror(errno));
	write_str("/sys/fs/cgroup/cgroup.subtree_control", "+memory");
	rmdir(MEMCG_DIR);	/* a failed run's, empty: its children are gone */
	ASSERT_EQ(0, mkdir(MEMCG_DIR, 0755) && errno != EEXIST);
	snprintf(max, sizeof(max), "%lu", MEMCG_MAX);
	ASSERT_EQ(0, write_str(MEMCG_DIR "/memory.max", max));
	fd = zfs_create(ZFS_MNT "/limited", MEMCG_FILE);
	ret = bounded_fork(limited_stores, &fd, BOUNDED_MS * 3);
	EXPECT_EQ(BOUNDED_SIG(SIGBUS), ret) TH_LOG("stores past the limit: %s", bounded_str(ret));
	ASSERT_EQ(0, ftruncate(fd, 0));
	ASSERT_EQ(0, ftruncate(fd, MEMCG_FILE));
	ret = bounded_fork(limited_writes, &fd, BOUNDED_MS * 3);
	EXPECT_EQ(-ENOMEM, ret) TH_LOG("writes past the limit: %s", bounded_str(ret));
	/* the limit is what refused, and nothing was killed for it */
	EXPECT_LT(0, keyed_value(MEMCG_DIR "/memory.events", "max"));
	EXPECT_EQ(0, keyed_value(MEMCG_DIR "/memory.events", "oom_kill"));
	EXPECT_EQ(oom0, keyed_value("/proc/vmstat", "oom_kill"));
	close(fd);
	unlink(ZFS_MNT "/limited");
	EXPECT_EQ(0, rmdir(MEMCG_DIR));
}

TEST_HARNESS_MAIN
