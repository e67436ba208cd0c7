// SPDX-License-Identifier: GPL-2.0
/* l2_init - the common part of the nested guests' /init; see l2_init.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <unistd.h>

#include "l2_init.h"
#include "zeropin.h"		/* pfn_of() */

static int kmsg = -1;
static const char *say_prefix = "l2: ";

void l2_say(const char *fmt, ...)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%s", say_prefix);
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

void l2_power_off(void)
{
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

void l2_mounts(const char *prefix)
{
	say_prefix = prefix;
	mkdir("/dev", 0755);
	mkdir("/proc", 0755);
	mkdir("/sys", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	kmsg = open("/dev/kmsg", O_WRONLY);
}

unsigned long long l2_cmdline_ull(const char *name, unsigned long long def)
{
	char cmdline[4096] = "", key[128];
	int fd = open("/proc/cmdline", O_RDONLY);
	const char *p;

	if (fd >= 0) {
		if (read(fd, cmdline, sizeof(cmdline) - 1) < 0)
			cmdline[0] = '\0';
		close(fd);
	}
	snprintf(key, sizeof(key), "%s=", name);
	p = strstr(cmdline, key);
	return p ? strtoull(p + strlen(key), NULL, 0) : def;
}

int l2_open_dev_file(const char *dev, const char *name, int flags)
{
	char path[512];

	snprintf(path, sizeof(path), PCI_DEVICES "/%s/%s", dev, name);
	return open(path, flags);
}

unsigned long l2_bar0_address(const char *dev)
{
	char buf[64] = "";
	int fd = l2_open_dev_file(dev, "resource", O_RDONLY);

	if (fd < 0)
		return 0;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	close(fd);
	return strtoul(buf, NULL, 16);
}

int l2_set_command(int config, uint16_t cmd)
{
	return pwrite(config, &cmd, sizeof(cmd), PCI_COMMAND) == sizeof(cmd) ? 0 : -errno;
}

int l2_enable_device(const char *dev)
{
	int config = l2_open_dev_file(dev, "config", O_RDWR);
	uint16_t cmd = 0;

	if (config < 0)
		return -1;
	if (pread(config, &cmd, sizeof(cmd), PCI_COMMAND) != sizeof(cmd) ||
	    l2_set_command(config, cmd | PCI_CMD_MEMORY | PCI_CMD_MASTER)) {
		close(config);
		return -1;
	}
	return config;
}

int l2_find_class(const char *class, char *dev, size_t len)
{
	DIR *dir = opendir(PCI_DEVICES);
	struct dirent *e;
	char buf[16];
	int fd, found = -1;
	ssize_t n;

	while (dir && found && (e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		fd = l2_open_dev_file(e->d_name, "class", O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0 && !strncmp(buf, class, strlen(class))) {
			snprintf(dev, len, "%s", e->d_name);
			found = 0;
		}
	}
	if (dir)
		closedir(dir);
	return found;
}

uint64_t l2_phys_of(const void *p)
{
	uint64_t pfn = pfn_of(p);

	return pfn ? pfn * 4096 + (uintptr_t)p % 4096 : 0;
}

void *l2_dma_pages(unsigned int n)
{
	void *p = mmap(NULL, (size_t)n * 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_LOCKED, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}
