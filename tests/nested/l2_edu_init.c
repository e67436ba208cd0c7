// SPDX-License-Identifier: GPL-2.0
/*
 * l2_edu_init - /init of the nested guest (L2) in the QEMU series' tests
 * (tests/selftests/qemu_iova_cache.sh). L1's QEMU passes the lab's edu
 * through to L2; from inside L2 this program
 *   - checks that edu DMA lands where L2's CPU sees it: a page of L2 RAM
 *     (physical address from /proc/self/pagemap) to the device and back to
 *     another page, and the BIOS area at 0xf0000 below 1 MiB (after
 *     SeaBIOS's PAM changes) compared with what /dev/mem reads there;
 *   - turns the edu's memory decode off and on N times;
 *   - checks DMA again, then powers L2 off.
 * It reports on the kernel log (L2's serial console), one line each:
 *   l2-edu: bar0 0xADDR
 *   l2-edu: dma before ram ok | dma before ram FAIL <why>
 *   l2-edu: dma before low ok | ...
 *   l2-edu: toggles N done
 *   l2-edu: dma after ram ok, dma after low ok
 *   l2-edu: done
 * Kernel command line: l2edu.toggles=N  decode off/on cycles [DEFAULT: 8]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
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

static struct edu edu;		/* only bar0 is used: no VFIO inside L2 */

/* RAM -> device -> other RAM: the pattern must arrive intact. */
static const char *check_ram(uint8_t *a, uint8_t *b)
{
	uint64_t pa = l2_phys_of(a), pb = l2_phys_of(b);
	uint32_t i, seed = (uint32_t)time(NULL);

	if (!pa || !pb)
		return "no physical address in /proc/self/pagemap";
	for (i = 0; i < DMA_LEN; i++)
		a[i] = (uint8_t)(seed + i * 131u);
	memset(b, 0, DMA_LEN);
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

static int run(void)
{
	char dev[256];
	uint16_t cmd = 0;
	uint8_t *buf;
	int config, res, i, n = l2_cmdline_int("l2edu.toggles", DEFAULT_TOGGLES);

	if (edu_find(0, dev, sizeof(dev)))
		return l2_say("FAIL no edu device"), -1;
	config = l2_open_dev_file(dev, "config", O_RDWR);
	res = l2_open_dev_file(dev, "resource0", O_RDWR | O_SYNC);
	if (config < 0 || res < 0 || pread(config, &cmd, sizeof(cmd), PCI_COMMAND) != sizeof(cmd))
		return l2_say("FAIL cannot open %s's config or resource0", dev), -1;
	if (l2_set_command(config, cmd | PCI_CMD_MEMORY | PCI_CMD_MASTER))
		return l2_say("FAIL cannot enable %s", dev), -1;
	edu.bar0 = mmap(NULL, BAR0_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, res, 0);
	/* the edu answers its low registers only to 4-byte reads */
	if (edu.bar0 == MAP_FAILED || *(volatile uint32_t *)(edu.bar0 + EDU_REG_ID) != EDU_ID)
		return l2_say("FAIL %s's BAR0 does not read as an edu", dev), -1;
	l2_say("bar0 %#lx", l2_bar0_address(dev));
	buf = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_LOCKED, -1, 0);
	if (buf == MAP_FAILED)
		return l2_say("FAIL no buffer"), -1;
	check_dma("before", buf, buf + 4096);
	cmd |= PCI_CMD_MEMORY | PCI_CMD_MASTER;
	for (i = 0; i < n; i++) {
		if (l2_set_command(config, cmd & ~PCI_CMD_MEMORY) || l2_set_command(config, cmd))
			return l2_say("FAIL toggle %d", i), -1;
	}
	l2_say("toggles %d done", n);
	check_dma("after", buf, buf + 4096);
	return 0;
}

int main(void)
{
	l2_mounts("l2-edu: ");
	run();
	l2_say("done");
	l2_power_off();
}
