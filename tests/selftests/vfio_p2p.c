// SPDX-License-Identifier: GPL-2.0
/*
 * vfio_p2p - peer-to-peer: BAR0 of one edu, mmap'ed through vfio-pci (a
 * PFNMAP range), is mapped into the container, and the other edu's DMA
 * engine reads and writes that BAR's registers through the IOMMU. Against
 * type1 and zeropin. With zeropin, the mapping stops reaching the BAR the
 * moment the user's BAR mapping goes away (here: munmap), so no device
 * can reach a BAR that may be handed to someone else. A zap that leaves
 * the mapping in place (memory decode off and on, which vfio-pci handles
 * as it handles a device reset) keeps the peer-to-peer mapping, with both
 * drivers.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "backing.h"
#include "kmsg.h"
#include "vfio_driver.h"
#include "vfio_edu.h"
#include "zeropin.h"

#define IOVA_RAM	0x100000000ull
#define IOVA_BAR	0x200000000ull
#define RAM_SIZE	(2ul << 20)
#define EDU_ID		0x010000ed	/* what edu's register 0x00 reads */
#define EDU_LIVENESS	0x04		/* reads back the complement of a write */
#define RW		(VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE)

FIXTURE(p2p) {
	struct edu edu[2];	/* edu[0] does DMA, edu[1] is the peer */
	int container;
	struct buffer ram;	/* where edu[0] lands what it read */
};

FIXTURE_VARIANT(p2p) {
	enum vfio_driver driver;
};

FIXTURE_VARIANT_ADD(p2p, type1) { .driver = DRIVER_TYPE1 };
FIXTURE_VARIANT_ADD(p2p, zeropin) { .driver = DRIVER_ZEROPIN };

FIXTURE_SETUP(p2p)
{
	self->container = -1;
	edu_init(&self->edu[0]);
	edu_init(&self->edu[1]);
	if (edu_count() < 2)
		SKIP(return, "needs two edu devices (scripts/lab --edu 2)");
	vfio_driver_use(variant->driver);
	buffer_alloc(&self->ram, BACKING_ANON_4K, RAM_SIZE);
	self->container = vfio_container_open();
	edu_open(&self->edu[0], 0);
	edu_open(&self->edu[1], 1);
	edu_attach(&self->edu[0], self->container);
	edu_attach(&self->edu[1], self->container);
	vfio_set_iommu(self->container, VFIO_TYPE1v2_IOMMU);
	edu_get_device(&self->edu[0]);
	edu_get_device(&self->edu[1]);
	vfio_map(self->container, self->ram.addr, IOVA_RAM, RAM_SIZE);
}

FIXTURE_TEARDOWN(p2p)
{
	edu_close(&self->edu[0]);
	edu_close(&self->edu[1]);
	if (self->container >= 0)
		close(self->container);
	buffer_free(&self->ram);
}

/* edu[0] reads 4 bytes at iova (into its buffer), then lands them in RAM;
 * returns what it read, or poison when the read never reached anything. */
static uint32_t peer_read32(struct __test_metadata *_metadata, struct edu *e,
			    void *ram, uint64_t iova)
{
	uint32_t v;

	memset(ram, 0xa5, 4096);
	/* clear the device buffer first, from poison in RAM */
	EXPECT_EQ(0, __edu_dma(e, IOVA_RAM, 4, false));
	EXPECT_EQ(0, __edu_dma(e, iova, 4, false));
	EXPECT_EQ(0, __edu_dma(e, IOVA_RAM + 64, 4, true));
	memcpy(&v, (char *)ram + 64, 4);
	return v;
}

TEST_F(p2p, dma_reads_and_writes_a_peer_bar)
{
	uint32_t x = 0x12345678;

	ASSERT_EQ(0, __vfio_map(self->container, (void *)self->edu[1].bar0, IOVA_BAR,
				self->edu[1].bar0_size, RW));
	EXPECT_EQ(EDU_ID, peer_read32(_metadata, &self->edu[0], self->ram.addr, IOVA_BAR));
	/* write the peer's liveness register by DMA; the CPU reads ~x back */
	memcpy(self->ram.addr, &x, 4);
	ASSERT_EQ(0, __edu_dma(&self->edu[0], IOVA_RAM, 4, false));
	ASSERT_EQ(0, __edu_dma(&self->edu[0], IOVA_BAR + EDU_LIVENESS, 4, true));
	EXPECT_EQ(~x, *(volatile uint32_t *)(self->edu[1].bar0 + EDU_LIVENESS));
	if (variant->driver == DRIVER_ZEROPIN) {
		EXPECT_LE(self->edu[1].bar0_size / 4096, iommu_counter("mmio_pages"));
	}
	vfio_unmap(self->container, IOVA_BAR, self->edu[1].bar0_size);
	/* nothing charged for MMIO, and the RAM mapping still works */
	edu_verify(&self->edu[0], self->ram.addr, IOVA_RAM, RAM_SIZE);
}

TEST_F(p2p, read_only_bar_mapping_refuses_device_writes)
{
	void *ro = mmap(NULL, self->edu[1].bar0_size, PROT_READ, MAP_SHARED,
			self->edu[1].device, 0);	/* BAR0: region index 0, offset 0 */

	ASSERT_NE(MAP_FAILED, ro);
	EXPECT_EQ(-EFAULT, __vfio_map(self->container, ro, IOVA_BAR,
				      self->edu[1].bar0_size, RW));
	EXPECT_EQ(0, __vfio_map(self->container, ro, IOVA_BAR, self->edu[1].bar0_size,
				VFIO_DMA_MAP_FLAG_READ));
	EXPECT_EQ(EDU_ID, peer_read32(_metadata, &self->edu[0], self->ram.addr, IOVA_BAR));
	vfio_unmap(self->container, IOVA_BAR, self->edu[1].bar0_size);
	munmap(ro, self->edu[1].bar0_size);
}

/* zeropin only: type1 keeps reaching the BAR after the user's mapping
 * went away (its known gap, which this closes). */
TEST_F(p2p, bar_mapping_gone_means_no_more_dma)
{
	size_t size = self->edu[1].bar0_size;
	uint64_t unmapped = 0;
	void *bar;
	long revoked;
	int faults;

	if (variant->driver != DRIVER_ZEROPIN)
		SKIP(return, "type1 does not track the BAR mapping's lifetime");
	bar = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, self->edu[1].device, 0);
	ASSERT_NE(MAP_FAILED, bar);
	ASSERT_EQ(0, __vfio_map(self->container, bar, IOVA_BAR, size, RW));
	EXPECT_EQ(EDU_ID, peer_read32(_metadata, &self->edu[0], self->ram.addr, IOVA_BAR));
	faults = kmsg_count("DMAR: [DMA Read");
	ASSERT_LE(0, faults);
	revoked = iommu_counter("mmio_revoked");
	ASSERT_EQ(0, munmap(bar, size));
	EXPECT_EQ(revoked + 1, iommu_counter("mmio_revoked"));
	/* the read now faults in the IOMMU and brings the register back no more */
	EXPECT_NE(EDU_ID, peer_read32(_metadata, &self->edu[0], self->ram.addr, IOVA_BAR));
	usleep(200 * 1000);	/* the fault is reported from an interrupt */
	EXPECT_LT(faults, kmsg_count("DMAR: [DMA Read"));
	/* the IOVA stays taken until UNMAP_DMA, which reports it whole */
	EXPECT_EQ(-EEXIST, __vfio_map(self->container, self->ram.addr, IOVA_BAR, 4096, RW));
	ASSERT_EQ(0, __vfio_unmap(self->container, IOVA_BAR, size, 0, &unmapped));
	EXPECT_EQ(size, unmapped);
}

TEST_F(p2p, bar_mapping_survives_zaps_that_keep_it)
{
	size_t size = self->edu[1].bar0_size;
	long revoked = iommu_counter("mmio_revoked");
	void *bar;

	bar = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, self->edu[1].device, 0);
	ASSERT_NE(MAP_FAILED, bar);
	ASSERT_EQ(0, __vfio_map(self->container, bar, IOVA_BAR, size, RW));
	EXPECT_EQ(EDU_ID, peer_read32(_metadata, &self->edu[0], self->ram.addr, IOVA_BAR));
	EXPECT_EQ(-1, madvise(bar, size, MADV_DONTNEED));	/* EINVAL on PFNMAP */
	ASSERT_EQ(0, __vfio_pci_command(self->edu[1].device, self->edu[1].config_offset, 0,
						PCI_COMMAND_MEMORY));
	ASSERT_EQ(0, __vfio_pci_command(self->edu[1].device, self->edu[1].config_offset,
						PCI_COMMAND_MEMORY, 0));
	EXPECT_EQ(EDU_ID, *(volatile uint32_t *)bar);	/* faults back in */
	EXPECT_EQ(EDU_ID, peer_read32(_metadata, &self->edu[0], self->ram.addr, IOVA_BAR));
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ(revoked, iommu_counter("mmio_revoked"));
	vfio_unmap(self->container, IOVA_BAR, size);
	munmap(bar, size);
}

/*
 * One mapping of RAM followed by a BAR (as a VMM may place them): ordinary
 * events in the RAM part (MADV_DONTNEED zaps it) leave the whole mapping
 * alone, RAM and BAR; with type1 as with zeropin.
 */
TEST_F(p2p, ram_events_leave_a_mixed_mapping_alone)
{
	size_t bar_size = self->edu[1].bar0_size, ram_size = 2ul << 20;
	long revoked = iommu_counter("mmio_revoked");
	char *area, *bar;

	area = mmap(NULL, ram_size + bar_size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, area);
	bar = mmap(area + ram_size, bar_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		   self->edu[1].device, 0);
	ASSERT_EQ(area + ram_size, bar);
	memset(area, 0x11, ram_size);
	ASSERT_EQ(0, __vfio_map(self->container, area, IOVA_BAR, ram_size + bar_size, RW));
	ASSERT_EQ(0, madvise(area, ram_size, MADV_DONTNEED));
	EXPECT_EQ(EDU_ID, peer_read32(_metadata, &self->edu[0], self->ram.addr,
				      IOVA_BAR + ram_size));
	if (variant->driver == DRIVER_ZEROPIN)
		EXPECT_EQ(revoked, iommu_counter("mmio_revoked"));
	vfio_unmap(self->container, IOVA_BAR, ram_size + bar_size);
	munmap(area, ram_size + bar_size);
}

TEST_HARNESS_MAIN
