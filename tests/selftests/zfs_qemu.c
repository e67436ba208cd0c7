// SPDX-License-Identifier: GPL-2.0
/*
 * zfs_qemu - QEMU (the lab's Debian QEMU, and make qemu's patched build of
 * Debian 13's 10.0) backs guest RAM with zeropinfs and passes an edu device
 * through with vfio-pci, as a GPU VM would:
 *   -object memory-backend-file,mem-path=FILE,share=on,align=2M   (a file)
 *   mem-path=DIR/libvirt/qemu/1-vm          (libvirt's memory_backing_dir:
 *                                            QEMU creates and unlinks a file)
 * Debian's QEMU needs align=2M for PMD mappings; zeropin's series (make
 * qemu: patched; its patch 5 maps file-backed RAM PMD-aligned) needs no
 * option, so each layout runs under both.
 * VFIO pins all of guest RAM at start, through zeropin's backend (QEMU
 * asks for TYPE1v2 and gets zeropin); the test checks that it came from the
 * pool, that zeropin pinned all of it, that what QEMU has touched is
 * mapped with PMDs only, and that it is released when QEMU exits; and that
 * guest RAM, once all faulted in (prealloc=on), is mapped 2 MiB-aligned
 * with PMDs.
 * QEMU comes into the lab through scripts/lab-tree (tests/run-selftests).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define DEBIAN_QEMU	"/usr/bin/qemu-system-x86_64"
#define PATCHED_QEMU	"/opt/zeropin/qemu-patched/bin/qemu-system-x86_64"
#define GUEST_MIB	256
/* QEMU under TCG in a TCG guest: launch and pinning take seconds. */
#define QEMU_START_MS	120000
/* Each test: QEMU's start, its pinning and its exit, with room. */
#define TEST_S		300

FIXTURE(qemu) {
	pid_t pid;		/* QEMU, 0 when not running */
	int monitor;		/* write end of QEMU's stdin (HMP monitor) */
};

FIXTURE_VARIANT(qemu) {
	const char *qemu;	/* the binary */
	const char *align;	/* extra memory-backend-file option, or "" */
	const char *mem_path;	/* as QEMU gets it */
	bool is_dir;		/* libvirt's layout: QEMU makes its own file */
};

FIXTURE_VARIANT_ADD(qemu, mem_path_file) {
	.qemu = DEBIAN_QEMU, .align = ",align=2M",
	.mem_path = ZFS_MNT "/guest-ram", .is_dir = false,
};
FIXTURE_VARIANT_ADD(qemu, libvirt_memory_backing_dir) {
	.qemu = DEBIAN_QEMU, .align = ",align=2M",
	.mem_path = ZFS_MNT "/libvirt/qemu/1-vm", .is_dir = true,
};
FIXTURE_VARIANT_ADD(qemu, patched_mem_path_file_no_align) {
	.qemu = PATCHED_QEMU, .align = "",
	.mem_path = ZFS_MNT "/guest-ram", .is_dir = false,
};
FIXTURE_VARIANT_ADD(qemu, patched_libvirt_memory_backing_dir_no_align) {
	.qemu = PATCHED_QEMU, .align = "",
	.mem_path = ZFS_MNT "/libvirt/qemu/1-vm", .is_dir = true,
};

FIXTURE_SETUP(qemu)
{
	if (access(variant->qemu, X_OK))
		SKIP(return, "no %s in the lab image (scripts/lab-tree adds it; "
		     "make qemu builds the patched one)", variant->qemu);
	zeropin_reset();
	zeropin_load("pool_mib=256");
	zfs_mount(ZFS_MNT, "size=1G");
	ASSERT_EQ(0, pool_wait("zero_mib", GUEST_MIB, 60000));
	if (variant->is_dir) {
		ASSERT_EQ(0, mkdir(ZFS_MNT "/libvirt", 0755));
		ASSERT_EQ(0, mkdir(ZFS_MNT "/libvirt/qemu", 0755));
		ASSERT_EQ(0, mkdir(variant->mem_path, 0750));
	}
}

FIXTURE_TEARDOWN(qemu)
{
	if (self->pid > 0) {
		kill(self->pid, SIGKILL);
		waitpid(self->pid, NULL, 0);
	}
	zeropin_reset();
}

/* Start QEMU paused (-S) with the HMP monitor on a pipe. */
static pid_t start_qemu(const FIXTURE_VARIANT(qemu) *variant, const char *bdf,
			const char *extra, int *monitor)
{
	char object[512], device[320];
	int fds[2];
	pid_t pid;

	snprintf(object, sizeof(object),
		 "memory-backend-file,id=ram0,size=%dM,mem-path=%s,share=on%s%s",
		 GUEST_MIB, variant->mem_path, variant->align, extra);
	snprintf(device, sizeof(device), "vfio-pci,host=%s", bdf);
	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid)
		goto parent;
	dup2(fds[0], 0);
	close(fds[1]);
	freopen("/tmp/qemu.log", "w", stdout);
	dup2(1, 2);
	execl(variant->qemu, variant->qemu, "-machine", "q35,memory-backend=ram0", "-accel", "tcg",
	      "-m", "256M", "-nodefaults", "-display", "none", "-S", "-monitor", "stdio",
	      "-object", object, "-device", device, (char *)NULL);
	_exit(127);
parent:
	close(fds[0]);
	*monitor = fds[1];
	return pid;
}

static int quit_qemu(pid_t pid, int monitor)
{
	int status;

	if (write(monitor, "quit\n", 5) != 5)
		return -1;
	close(monitor);
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int files_in(const char *dir)
{
	struct dirent *d;
	int n = 0;
	DIR *dp = opendir(dir);

	if (!dp)
		return -1;
	while ((d = readdir(dp)))
		n += d->d_name[0] != '.';
	closedir(dp);
	return n;
}

TEST_F_TIMEOUT(qemu, guest_ram_pinned_from_the_pool, TEST_S)
{
	long zero_before = pool_counter("handed_zero"), sync_before = pool_counter("zeroed_sync");
	struct edu edu;
	int ret;

	edu_open(&edu, 0);	/* find the device; QEMU opens the group itself */
	edu_close(&edu);
	self->pid = start_qemu(variant, edu.bdf, "", &self->monitor);
	ASSERT_LT(0, self->pid);
	ret = pool_wait("inuse_mib", GUEST_MIB, QEMU_START_MS);
	ASSERT_EQ(0, ret) TH_LOG("inuse_mib %ld; QEMU's output in /tmp/qemu.log",
				 pool_read("inuse_mib"));
	/* every block of guest RAM came zeroed from the pool */
	EXPECT_EQ(zero_before + GUEST_MIB / 2, pool_counter("handed_zero"));
	EXPECT_EQ(sync_before, pool_counter("zeroed_sync"));
	/* zeropin served QEMU's container and pinned all of guest RAM */
	EXPECT_LE(GUEST_MIB * 256, iommu_counter("pages_pinned"));
	EXPECT_LE(1, iommu_counter("containers"));
	/* zeropin takes the folios from the file without faulting them in:
	 * only what QEMU touched is mapped, and all of that by PMDs */
	EXPECT_EQ(proc_smaps_kb(self->pid, ZFS_MNT, "Rss"),
		  proc_smaps_kb(self->pid, ZFS_MNT, "FilePmdMapped"));
	if (variant->is_dir) {	/* QEMU unlinks its file at once */
		EXPECT_EQ(0, files_in(variant->mem_path));
	}
	EXPECT_EQ(0, quit_qemu(self->pid, self->monitor));
	self->pid = 0;
	/* QEMU's unlinked file goes with it; a named file keeps its memory */
	EXPECT_EQ(variant->is_dir ? 0 : GUEST_MIB, pool_read("inuse_mib"));
}

/* Wait until ms pass or the file vma of pid holds kb of RSS. */
static long wait_rss_kb(pid_t pid, const char *name, long kb, int ms)
{
	long rss = proc_smaps_kb(pid, name, "Rss");

	for (; rss < kb && ms > 0; ms -= 100) {
		usleep(100000);
		rss = proc_smaps_kb(pid, name, "Rss");
	}
	return rss;
}

/* Guest RAM faulted in by QEMU itself (prealloc=on: MADV_POPULATE_WRITE
 * over all of it) is mapped by PMDs only, at a 2 MiB-aligned address. */
TEST_F_TIMEOUT(qemu, guest_ram_mapped_by_pmds, TEST_S)
{
	unsigned long start;
	struct edu edu;

	edu_open(&edu, 0);
	edu_close(&edu);
	self->pid = start_qemu(variant, edu.bdf, ",prealloc=on", &self->monitor);
	ASSERT_LT(0, self->pid);
	ASSERT_EQ(0, pool_wait("inuse_mib", GUEST_MIB, QEMU_START_MS));
	EXPECT_EQ(GUEST_MIB * 1024, wait_rss_kb(self->pid, ZFS_MNT, GUEST_MIB * 1024,
					       QEMU_START_MS));
	EXPECT_EQ(GUEST_MIB * 1024, proc_smaps_kb(self->pid, ZFS_MNT, "FilePmdMapped"));
	start = proc_vma_start(self->pid, ZFS_MNT);
	EXPECT_EQ(0, start % SZ_2M) TH_LOG("guest RAM mapped at %#lx", start);
	EXPECT_EQ(0, quit_qemu(self->pid, self->monitor));
	self->pid = 0;
}

TEST_HARNESS_MAIN
