/* SPDX-License-Identifier: GPL-2.0 */
/*
 * l2_init - what every nested guest's /init (l2_*_init.c) needs: the
 * pseudo filesystems, one report line per finding on L2's kernel log (its
 * serial console, which the test in L1 reads), a kernel command-line knob,
 * the passed-through device's config space and BAR0 through sysfs (no VFIO
 * inside L2: L2 drives the device directly), physical addresses of its own
 * locked pages for DMA, and power-off at the end.
 */
#ifndef L2_INIT_H
#define L2_INIT_H

#include <stdint.h>

#define PCI_DEVICES	"/sys/bus/pci/devices"
#define PCI_COMMAND	0x04
#define PCI_CMD_MEMORY	0x2
#define PCI_CMD_MASTER	0x4

/* Mount /dev, /proc, /sys; report lines start with PREFIX ("l2-edu: "). */
void l2_mounts(const char *prefix);
/* One report line on the kernel log (stderr before l2_mounts()). */
void l2_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The integer after NAME= on the kernel command line (decimal, or hex
 * with 0x), or DEFAULT. */
unsigned long long l2_cmdline_ull(const char *name, unsigned long long def);
static inline int l2_cmdline_int(const char *name, int def)
{
	return (int)l2_cmdline_ull(name, (unsigned long long)def);
}
/* open() of the PCI device DEV's sysfs file NAME. */
int l2_open_dev_file(const char *dev, const char *name, int flags);
/* L2's physical address of DEV's BAR0 (its resource file), 0 if unknown. */
unsigned long l2_bar0_address(const char *dev);
/* The command register through the config fd; 0 or -errno. */
int l2_set_command(int config, uint16_t cmd);
/* Memory decode and bus mastering on for DEV; its config fd, or -1. */
int l2_enable_device(const char *dev);
/* The first PCI device whose class register reads CLASS ("0x010802"):
 * its name into dev; 0, or -1 when there is none. */
int l2_find_class(const char *class, char *dev, size_t len);
/* n pages of anonymous memory, populated and locked (their physical
 * addresses stay put for DMA), or NULL. */
void *l2_dma_pages(unsigned int n);
/* L2 physical address of p (mapped and locked), or 0. */
uint64_t l2_phys_of(const void *p);
/* sync, power off, never return. */
void l2_power_off(void) __attribute__((noreturn));

#endif
