// SPDX-License-Identifier: GPL-2.0
/*
 * l2_edu_init - /init of the nested guest (L2) in the QEMU series' tests
 * (tests/selftests/qemu_ram_once.sh). L1's QEMU passes the lab's edu
 * through to L2; from inside L2 this program
 *   - checks that edu DMA lands where L2's CPU sees it: a page of L2 RAM
 *     (physical address from /proc/self/pagemap) to the device and back to
 *     another page, and the BIOS area at 0xf0000 below 1 MiB (after
 *     SeaBIOS's PAM changes) compared with what /dev/mem reads there;
 *   - turns the edu's memory decode off and on N times;
 *   - checks DMA again;
 *   - moves the BAR: peer-to-peer DMA (the edu reading its own ID register
 *     through L1's IOMMU at L2's BAR address) reads the ID before, reads
 *     it at the new address after, and must not reach the device at the
 *     old address any more: a mapping left there would be stale;
 *   - with a DIMM: DMA round trip through it, then waits for the test in L1
 *     to unplug it (the monitor's device_del; L2's kernel, with
 *     memhp_default_state=offline, ejects it), and checks the device can
 *     no longer reach it;
 *   - powers L2 off.
 * It reports on the kernel log (L2's serial console), one line each:
 *   l2-edu: bar0 0xADDR
 *   l2-edu: dma before ram ok | dma before ram FAIL <why>
 *   l2-edu: dma before low ok | ...
 *   l2-edu: toggles N done
 *   l2-edu: dma after ram ok, dma after low ok
 *   l2-edu: p2p before move ok | p2p before move FAIL <why>
 *   l2-edu: bar moved 0xOLD -> 0xNEW
 *   l2-edu: p2p after move ok | p2p after move FAIL <why>
 *   l2-edu: dimm before unplug ok | dimm before unplug FAIL <why>
 *   l2-edu: waiting for unplug
 *   l2-edu: dimm after unplug ok | dimm after unplug FAIL <why>
 *   l2-edu: done
 * Kernel command line: l2edu.toggles=N  decode off/on cycles [DEFAULT: 8]
 *                      l2edu.move=0|1   move the BAR       [DEFAULT: 1]
 *                      l2edu.dimm=ADDR  a DIMM's (one memory block's)
 *                                       L2 physical address [DEFAULT: none]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "l2_init.h"
#include "vfio_edu.h"		/* edu_find(), __edu_dma() on a BAR0 mmap */

#define BAR0_SIZE	(1u << 20)
#define LOW_ADDR	0xf0000		/* SeaBIOS, in the PAM area */
#define DMA_LEN		EDU_DMA_MAX
#define DEFAULT_TOGGLES	8
#define EDU_ID		0x010000ed	/* what EDU_REG_ID reads */
#define PCI_BAR0	0x10
#define HOLE_START	0x80000000ul	/* no free BAR address below: RAM */
#define P2P_FILL	0x5a5a5a5a	/* the edu's buffer before a P2P read */
#define MEMORY_SYSFS	"/sys/devices/system/memory"
#define ACPI_DEVICES	"/sys/bus/acpi/devices"
#define UNPLUG_WAIT_S	120		/* the test in L1 unplugs, L2 removes */
#define GONE_WAIT_S	30		/* L2 ejects, QEMU drops the DIMM */

static struct edu edu;		/* only bar0 is used: no VFIO inside L2 */
static int config = -1;		/* the edu's config space */
static uint16_t cmd;		/* its command register: decode, master on */

/* Before a DMA check: a holds a pattern new to each call (so that what a
 * previous check left cannot pass for it), b is cleared to clear; their
 * physical addresses into pa, pb. NULL, or the reason. */
static const char *dma_prepare(uint8_t *a, uint8_t *b, uint8_t clear, uint64_t *pa, uint64_t *pb)
{
	static uint32_t calls;
	uint32_t i, seed = (uint32_t)time(NULL) + ++calls * 7919u;

	*pa = l2_phys_of(a);
	*pb = l2_phys_of(b);
	if (!*pa || !*pb)
		return "no physical address in /proc/self/pagemap";
	for (i = 0; i < DMA_LEN; i++)
		a[i] = (uint8_t)(seed + i * 131u);
	memset(b, clear, DMA_LEN);
	return NULL;
}

/* RAM -> device -> other RAM: the pattern must arrive intact. */
static const char *check_ram(uint8_t *a, uint8_t *b)
{
	uint64_t pa, pb;
	const char *why = dma_prepare(a, b, 0, &pa, &pb);

	if (why)
		return why;
	if (__edu_dma(&edu, pa, DMA_LEN, false) || __edu_dma(&edu, pb, DMA_LEN, true))
		return "DMA timed out";
	return memcmp(a, b, DMA_LEN) ? "data differs" : NULL;
}

/* The BIOS area below 1 MiB -> device -> RAM, against /dev/mem's view. */
static const char *check_low(uint8_t *b)
{
	uint8_t want[DMA_LEN];
	uint64_t pb = l2_phys_of(b);
	int fd = open("/dev/mem", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : pread(fd, want, DMA_LEN, LOW_ADDR);

	if (fd >= 0)
		close(fd);
	if (n != DMA_LEN)
		return "cannot read /dev/mem at 0xf0000";
	if (!pb)
		return "no physical address in /proc/self/pagemap";
	memset(b, 0, DMA_LEN);
	if (__edu_dma(&edu, LOW_ADDR, DMA_LEN, false) ||
	    __edu_dma(&edu, pb, DMA_LEN, true))
		return "DMA timed out";
	return memcmp(want, b, DMA_LEN) ? "data differs" : NULL;
}

static void check_dma(const char *when, uint8_t *a, uint8_t *b)
{
	const char *why = check_ram(a, b);

	l2_say("dma %s ram %s%s", when, why ? "FAIL " : "ok", why ? why : "");
	why = check_low(b);
	l2_say("dma %s low %s%s", when, why ? "FAIL " : "ok", why ? why : "");
}

/* What the edu reads at L2 address iova, 4 bytes peer-to-peer through
 * L1's IOMMU, into val. Its buffer is filled first, so that a read that
 * faults cannot return what a previous one left there. */
static const char *p2p_read(uint64_t iova, uint8_t *a, uint8_t *b, uint32_t *val)
{
	uint64_t pa = l2_phys_of(a), pb = l2_phys_of(b);
	uint32_t fill = P2P_FILL;

	if (!pa || !pb)
		return "no physical address in /proc/self/pagemap";
	memcpy(a, &fill, 4);
	memset(b, 0, 4);
	if (__edu_dma(&edu, pa, 4, false) || __edu_dma(&edu, iova, 4, false) ||
	    __edu_dma(&edu, pb, 4, true))
		return "DMA timed out";
	memcpy(val, b, 4);
	return NULL;
}

/* True when no resource in /proc/iomem but the PCI bus windows overlaps
 * [addr, addr + BAR0_SIZE). */
static int range_free(uint64_t addr)
{
	FILE *f = fopen("/proc/iomem", "r");
	unsigned long start, end;
	char line[256];
	int unclaimed = f != NULL;

	while (f && fgets(line, sizeof(line), f)) {
		if (strstr(line, "PCI Bus") || sscanf(line, " %lx-%lx", &start, &end) != 2)
			continue;
		if (start < addr + BAR0_SIZE && end >= addr)
			unclaimed = 0;
	}
	if (f)
		fclose(f);
	return unclaimed;
}

/* Move BAR0 below old, to a BAR0_SIZE-aligned range nothing claims, with
 * memory decode off meanwhile (what a guest's PCI code does); map it
 * there through /dev/mem, as the kernel's resource0 still names the old
 * address. The new address, or 0 and the reason in why. */
static uint64_t move_bar(uint64_t old, const char **why)
{
	uint64_t new = old - BAR0_SIZE;
	uint32_t reg;
	int mem;

	while (new >= HOLE_START && !range_free(new))
		new -= BAR0_SIZE;
	if (new < HOLE_START)
		return *why = "no free range for the BAR", 0;
	reg = (uint32_t)new;
	if (l2_set_command(config, cmd & ~PCI_CMD_MEMORY) ||
	    pwrite(config, &reg, 4, PCI_BAR0) != 4 || l2_set_command(config, cmd))
		return *why = "cannot write the BAR", 0;
	munmap((void *)edu.bar0, BAR0_SIZE);
	mem = open("/dev/mem", O_RDWR | O_SYNC);
	edu.bar0 = mem < 0 ? MAP_FAILED :
		mmap(NULL, BAR0_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mem, new);
	if (mem >= 0)
		close(mem);
	if (edu.bar0 == MAP_FAILED || *(volatile uint32_t *)(edu.bar0 + EDU_REG_ID) != EDU_ID)
		return *why = "the edu does not answer at the new address", 0;
	return new;
}

/* P2P reads the edu's ID at its BAR; after a move, at the new address
 * and not at the old one. */
static void check_move(uint8_t *a, uint8_t *b, uint64_t old)
{
	const char *why;
	uint32_t val = 0;
	uint64_t new;

	why = p2p_read(old + EDU_REG_ID, a, b, &val);
	if (!why && val != EDU_ID)
		why = "the BAR is not mapped for peer-to-peer";
	l2_say("p2p before move %s%s", why ? "FAIL " : "ok", why ? why : "");
	if (why)
		return;
	new = move_bar(old, &why);
	if (new)
		l2_say("bar moved %#lx -> %#lx", (unsigned long)old, (unsigned long)new);
	if (!why) {
		why = p2p_read(new + EDU_REG_ID, a, b, &val);
		if (!why && val != EDU_ID)
			why = "the BAR is not mapped at its new address";
	}
	if (!why) {
		why = p2p_read(old + EDU_REG_ID, a, b, &val);
		if (!why && val == EDU_ID)
			why = "the old address still reaches the BAR: a stale mapping";
	}
	l2_say("p2p after move %s%s", why ? "FAIL " : "ok", why ? why : "");
}

/* RAM a -> device -> the DIMM at addr; the edu's buffer refilled; the DIMM
 * -> device -> RAM b: the pattern must come back. */
static const char *dimm_roundtrip(uint64_t addr, uint8_t *a, uint8_t *b)
{
	uint64_t pa, pb;
	const char *why = dma_prepare(a, b, 0xee, &pa, &pb);

	if (why)
		return why;
	if (__edu_dma(&edu, pa, DMA_LEN, false) || __edu_dma(&edu, addr, DMA_LEN, true) ||
	    __edu_dma(&edu, pb, DMA_LEN, false) || __edu_dma(&edu, addr, DMA_LEN, false) ||
	    __edu_dma(&edu, pb, DMA_LEN, true))
		return "DMA timed out";
	return memcmp(a, b, DMA_LEN) ? "data differs" : NULL;
}

/* The sysfs memory block holding addr: present (1) or gone (0). */
static int memory_block_present(uint64_t addr)
{
	char path[128], buf[32] = "";
	unsigned long long block;
	int fd = open(MEMORY_SYSFS "/block_size_bytes", O_RDONLY);

	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		block = 128ull << 20;
	else
		block = strtoull(buf, NULL, 16);
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), MEMORY_SYSFS "/memory%llu", addr / block);
	return access(path, F_OK) == 0;
}

/* The ACPI memory devices (PNP0C80, one per DIMM slot) all report absent
 * (_STA 0): QEMU answers so only once it has run the eject, which takes
 * the DIMM out of the memory map synchronously. */
static int dimm_slots_empty(void)
{
	DIR *dir = opendir(ACPI_DEVICES);
	struct dirent *e;
	char path[512], buf[16];
	int fd, empty = dir != NULL, seen = 0;
	ssize_t n;

	while (dir && (e = readdir(dir))) {
		if (strncmp(e->d_name, "PNP0C80:", 8))
			continue;
		snprintf(path, sizeof(path), ACPI_DEVICES "/%s/status", e->d_name);
		fd = open(path, O_RDONLY);
		n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		seen = 1;
		if (n <= 0 || strtol(buf, NULL, 0) != 0)
			empty = 0;
	}
	if (dir)
		closedir(dir);
	return empty && seen;
}

/* wait_s seconds at most for done(); its last answer. */
static int wait_until(int (*done)(void), int wait_s)
{
	int i;

	for (i = 0; i < wait_s * 10 && !done(); i++)
		usleep(100000);
	return done();
}

static uint64_t dimm;		/* the DIMM's address, for dimm_block_gone() */

static int dimm_block_gone(void) { return !memory_block_present(dimm); }

/* DMA through the DIMM at addr, its unplug awaited (L2's kernel removes
 * the memory block, ejects, QEMU then reports the slot empty), then the
 * device must not reach it: the round trip's data must not come back. */
static void check_dimm(uint64_t addr, uint8_t *a, uint8_t *b)
{
	const char *why = dimm_roundtrip(addr, a, b);

	dimm = addr;
	if (!why && !memory_block_present(addr))
		why = "no memory block at the DIMM's address";
	l2_say("dimm before unplug %s%s", why ? "FAIL " : "ok", why ? why : "");
	if (why)
		return;
	l2_say("waiting for unplug");
	if (!wait_until(dimm_block_gone, UNPLUG_WAIT_S) || !wait_until(dimm_slots_empty, GONE_WAIT_S)) {
		l2_say("dimm after unplug FAIL never unplugged");
		return;
	}
	why = dimm_roundtrip(addr, a, b);
	if (!why)
		why = "the device still reaches the DIMM's memory: a stale mapping";
	else if (!strcmp(why, "data differs"))
		why = NULL;	/* a timeout or no pagemap proves nothing */
	l2_say("dimm after unplug %s%s", why ? "FAIL " : "ok", why ? why : "");
}

static int run(void)
{
	char dev[256];
	uint8_t *buf;
	int res, i, n = l2_cmdline_int("l2edu.toggles", DEFAULT_TOGGLES);

	if (edu_find(0, dev, sizeof(dev)))
		return l2_say("FAIL no edu device"), -1;
	config = l2_open_dev_file(dev, "config", O_RDWR);
	res = l2_open_dev_file(dev, "resource0", O_RDWR | O_SYNC);
	if (config < 0 || res < 0 || pread(config, &cmd, sizeof(cmd), PCI_COMMAND) != sizeof(cmd))
		return l2_say("FAIL cannot open %s's config or resource0", dev), -1;
	cmd |= PCI_CMD_MEMORY | PCI_CMD_MASTER;
	if (l2_set_command(config, cmd))
		return l2_say("FAIL cannot enable %s", dev), -1;
	edu.bar0 = mmap(NULL, BAR0_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, res, 0);
	/* the edu answers its low registers only to 4-byte reads */
	if (edu.bar0 == MAP_FAILED || *(volatile uint32_t *)(edu.bar0 + EDU_REG_ID) != EDU_ID)
		return l2_say("FAIL %s's BAR0 does not read as an edu", dev), -1;
	l2_say("bar0 %#lx", l2_bar0_address(dev));
	buf = l2_dma_pages(2);
	if (!buf)
		return l2_say("FAIL no buffer"), -1;
	check_dma("before", buf, buf + 4096);
	for (i = 0; i < n; i++) {
		if (l2_set_command(config, cmd & ~PCI_CMD_MEMORY) || l2_set_command(config, cmd))
			return l2_say("FAIL toggle %d", i), -1;
	}
	l2_say("toggles %d done", n);
	check_dma("after", buf, buf + 4096);
	if (l2_cmdline_int("l2edu.move", 1))
		check_move(buf, buf + 4096, l2_bar0_address(dev));
	if (l2_cmdline_ull("l2edu.dimm", 0))
		check_dimm(l2_cmdline_ull("l2edu.dimm", 0), buf, buf + 4096);
	return 0;
}

int main(void)
{
	l2_mounts("l2-edu: ");
	run();
	l2_say("done");
	l2_power_off();
}
