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
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vfio_edu.h"		/* edu_find(), __edu_dma() on a BAR0 mmap */
#include "zeropin.h"		/* pfn_of() */

#define PCI_DEVICES	"/sys/bus/pci/devices"
#define PCI_COMMAND	0x04
#define PCI_CMD_MEMORY	0x2
#define PCI_CMD_MASTER	0x4
#define BAR0_SIZE	(1u << 20)
#define LOW_ADDR	0xf0000		/* SeaBIOS, in the PAM area */
#define DMA_LEN		EDU_DMA_MAX
#define DEFAULT_TOGGLES	8
#define EDU_ID		0x010000ed	/* what EDU_REG_ID reads */

static int kmsg = -1;
static struct edu edu;		/* only bar0 is used: no VFIO inside L2 */

static void say(const char *fmt, ...)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "l2-edu: ");
	va_list ap;

	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (kmsg < 0 || write(kmsg, line, n) != n)
		fputs(line, stderr);
}

static void power_off(void)
{
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static void mounts(void)
{
	mkdir("/dev", 0755);
	mkdir("/proc", 0755);
	mkdir("/sys", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	kmsg = open("/dev/kmsg", O_WRONLY);
}

static int toggles_wanted(void)
{
	char cmdline[4096] = "";
	int fd = open("/proc/cmdline", O_RDONLY);
	const char *p;

	if (fd >= 0) {
		if (read(fd, cmdline, sizeof(cmdline) - 1) < 0)
			cmdline[0] = '\0';
		close(fd);
	}
	p = strstr(cmdline, "l2edu.toggles=");
	return p ? atoi(p + strlen("l2edu.toggles=")) : DEFAULT_TOGGLES;
}

/* L2's physical address of the edu's BAR0 (the resource file's first
 * field), 0 when unreadable. */
static unsigned long bar0_address(const char *dev)
{
	char path[512];
	unsigned long addr = 0;
	FILE *f;

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/resource", dev);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%lx", &addr) != 1)
			addr = 0;
		fclose(f);
	}
	return addr;
}

static int open_dev_file(const char *dev, const char *name, int flags)
{
	char path[512];

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/%s", dev, name);
	return open(path, flags);
}

static int set_command(int config, uint16_t cmd)
{
	return pwrite(config, &cmd, sizeof(cmd), PCI_COMMAND) == sizeof(cmd) ? 0 : -errno;
}

/* L2 physical address of p (mapped and locked), or 0. */
static uint64_t phys_of(const void *p)
{
	uint64_t pfn = pfn_of(p);

	return pfn ? pfn * 4096 + (uintptr_t)p % 4096 : 0;
}

/* RAM -> device -> other RAM: the pattern must arrive intact. */
static const char *check_ram(uint8_t *a, uint8_t *b)
{
	uint64_t pa = phys_of(a), pb = phys_of(b);
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
	uint64_t pb = phys_of(b);
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

	say("dma %s ram %s%s", when, why ? "FAIL " : "ok", why ? why : "");
	why = check_low(b);
	say("dma %s low %s%s", when, why ? "FAIL " : "ok", why ? why : "");
}

static int run(void)
{
	char dev[256];
	uint16_t cmd = 0;
	uint8_t *buf;
	int config, res, i, n = toggles_wanted();

	if (edu_find(0, dev, sizeof(dev)))
		return say("FAIL no edu device"), -1;
	config = open_dev_file(dev, "config", O_RDWR);
	res = open_dev_file(dev, "resource0", O_RDWR | O_SYNC);
	if (config < 0 || res < 0 || pread(config, &cmd, sizeof(cmd), PCI_COMMAND) != sizeof(cmd))
		return say("FAIL cannot open %s's config or resource0", dev), -1;
	if (set_command(config, cmd | PCI_CMD_MEMORY | PCI_CMD_MASTER))
		return say("FAIL cannot enable %s", dev), -1;
	edu.bar0 = mmap(NULL, BAR0_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, res, 0);
	/* the edu answers its low registers only to 4-byte reads */
	if (edu.bar0 == MAP_FAILED || *(volatile uint32_t *)(edu.bar0 + EDU_REG_ID) != EDU_ID)
		return say("FAIL %s's BAR0 does not read as an edu", dev), -1;
	say("bar0 %#lx", bar0_address(dev));
	buf = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_LOCKED, -1, 0);
	if (buf == MAP_FAILED)
		return say("FAIL no buffer"), -1;
	check_dma("before", buf, buf + 4096);
	cmd |= PCI_CMD_MEMORY | PCI_CMD_MASTER;
	for (i = 0; i < n; i++) {
		if (set_command(config, cmd & ~PCI_CMD_MEMORY) || set_command(config, cmd))
			return say("FAIL toggle %d", i), -1;
	}
	say("toggles %d done", n);
	check_dma("after", buf, buf + 4096);
	return 0;
}

int main(void)
{
	mounts();
	run();
	say("done");
	power_off();
	return 0;
}
