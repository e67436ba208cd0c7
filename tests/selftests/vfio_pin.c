// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_pin - the device reaches exactly the memory the user sees at the
 * mapped addresses, also where zeropin's cheap paths (a whole folio per
 * pin, zeropinfs folios from the page cache) must not apply: a THP with
 * one page replaced, a THP shared copy-on-write with a child, a private
 * zeropinfs mapping, read-only mappings. Against type1 and zeropin.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_BASE	0x100000000ull
#define SIZE		(8ul << 20)
#define PAGE		4096ul
#define LEN		2048	/* bytes per edu transfer in these checks */
#define RW		(VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE)

FIXTURE(pin) {
	struct edu edu;
	int container;
};

FIXTURE_VARIANT(pin) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(pin, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(pin, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(pin)
{
	vfio_driver_use(variant->driver);
	self->container = edu_setup(&self->edu, 0, VFIO_TYPE1v2_IOMMU);
}

FIXTURE_TEARDOWN(pin)
{
	edu_close(&self->edu);
	if (self->container > 0)
		close(self->container);
}

/* A fresh zeropinfs mount (zeropin loaded, whichever driver serves VFIO). */
static void mount_zeropinfs(enum vfio_driver driver)
{
	zfs_mount_fresh("size=64M");
	vfio_driver_use(driver);
}

/* The device writes LEN bytes of c at iova (through its buffer). */
static int __device_fill(struct edu *e, void *scratch, uint64_t scratch_iova,
			 uint64_t iova, int c)
{
	int ret;

	memset(scratch, c, LEN);
	ret = __edu_dma(e, scratch_iova, LEN, false);
	return ret ? ret : __edu_dma(e, iova, LEN, true);
}

TEST_F(pin, thp_with_a_replaced_page_maps_what_the_user_sees)
{
	struct buffer buf;
	uint8_t *p, *odd;

	buffer_alloc(&buf, BACKING_THP, SIZE);
	buffer_touch(&buf);
	p = buf.addr;
	/* replace one page in the middle of the second 2 MiB folio */
	odd = p + SZ_2M + 5 * PAGE;
	ASSERT_EQ(odd, mmap(odd, PAGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	memset(odd, 0x77, PAGE);
	vfio_map(self->container, p, IOVA_BASE, SIZE);
	edu_verify(&self->edu, p, IOVA_BASE, SIZE);
	/* the device reads the replacement page, and writes land there */
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE + SZ_2M + 5 * PAGE, LEN, false));
	ASSERT_EQ(0, __edu_dma(&self->edu, IOVA_BASE, LEN, true));
	EXPECT_TRUE(all_bytes(p, 0x77, LEN));
	ASSERT_EQ(0, __device_fill(&self->edu, p + PAGE, IOVA_BASE + PAGE,
				   IOVA_BASE + SZ_2M + 5 * PAGE, 0x33));
	EXPECT_TRUE(all_bytes(odd, 0x33, LEN));
	vfio_unmap(self->container, IOVA_BASE, SIZE);
	buffer_free(&buf);
}

TEST_F(pin, cow_shared_thp_dma_reaches_only_the_parents_copy)
{
	struct buffer buf;
	int to_child[2], from_child[2];
	char c = 0;
	pid_t pid;

	buffer_alloc(&buf, BACKING_THP, SIZE);
	memset(buf.addr, 0x11, SIZE);
	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(from_child));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {	/* the child keeps its view, then reports it */
		if (read(to_child[0], &c, 1) != 1)
			_exit(2);
		c = all_bytes(buf.addr, 0x11, SIZE) ? 'y' : 'n';
		_exit(write(from_child[1], &c, 1) == 1 ? 0 : 2);
	}
	/* the parent maps the memory it now shares copy-on-write */
	vfio_map(self->container, buf.addr, IOVA_BASE, SIZE);
	ASSERT_EQ(0, __device_fill(&self->edu, (char *)buf.addr + SZ_2M,
				   IOVA_BASE + SZ_2M, IOVA_BASE, 0x44));
	ASSERT_EQ(0, __device_fill(&self->edu, (char *)buf.addr + SZ_2M,
				   IOVA_BASE + SZ_2M, IOVA_BASE + SIZE - SZ_2M, 0x44));
	EXPECT_TRUE(all_bytes(buf.addr, 0x44, LEN));
	EXPECT_TRUE(all_bytes((char *)buf.addr + SIZE - SZ_2M, 0x44, LEN));
	ASSERT_EQ(1, write(to_child[1], "go", 1));
	ASSERT_EQ(1, read(from_child[0], &c, 1));
	EXPECT_EQ('y', c) TH_LOG("device DMA reached the child's memory");
	waitpid(pid, NULL, 0);
	vfio_unmap(self->container, IOVA_BASE, SIZE);
	buffer_free(&buf);
}

TEST_F(pin, private_zeropinfs_mapping_dma_does_not_reach_the_file)
{
	uint8_t back[LEN];
	uint8_t *p;
	int fd;

	mount_zeropinfs(variant->driver);
	fd = zfs_create(ZFS_MNT "/private", SIZE);
	p = map_file(fd, SIZE, MAP_PRIVATE);
	vfio_map(self->container, p, IOVA_BASE, SIZE);
	ASSERT_EQ(0, __device_fill(&self->edu, p + SZ_2M, IOVA_BASE + SZ_2M, IOVA_BASE, 0x55));
	EXPECT_TRUE(all_bytes(p, 0x55, LEN));		/* the private copy */
	ASSERT_EQ(LEN, pread(fd, back, LEN, 0));
	EXPECT_TRUE(all_bytes(back, 0, LEN));		/* not the file */
	vfio_unmap(self->container, IOVA_BASE, SIZE);
	munmap(p, SIZE);
	close(fd);
	zfs_umount(ZFS_MNT);
}

TEST_F(pin, read_only_mapping_refuses_device_writes)
{
	struct buffer buf;
	void *ro;
	int fd;

	buffer_alloc(&buf, BACKING_THP, SIZE);
	buffer_touch(&buf);
	ASSERT_EQ(0, mprotect(buf.addr, SIZE, PROT_READ));
	EXPECT_EQ(-EFAULT, __vfio_map(self->container, buf.addr, IOVA_BASE, SIZE, RW));
	EXPECT_EQ(0, __vfio_map(self->container, buf.addr, IOVA_BASE, SIZE,
				VFIO_DMA_MAP_FLAG_READ));
	vfio_unmap(self->container, IOVA_BASE, SIZE);
	buffer_free(&buf);

	mount_zeropinfs(variant->driver);
	fd = zfs_create(ZFS_MNT "/ro", SIZE);
	ro = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, ro);
	EXPECT_EQ(-EFAULT, __vfio_map(self->container, ro, IOVA_BASE, SIZE, RW));
	EXPECT_EQ(0, __vfio_map(self->container, ro, IOVA_BASE, SIZE, VFIO_DMA_MAP_FLAG_READ));
	vfio_unmap(self->container, IOVA_BASE, SIZE);
	munmap(ro, SIZE);
	close(fd);
	zfs_umount(ZFS_MNT);
}

TEST_HARNESS_MAIN
