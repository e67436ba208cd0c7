// SPDX-License-Identifier: GPL-2.0
/*
 * nvme_virt_mgmt - the NVMe Virtualization Management admin command
 * (opcode 0x1c), issued through the kernel nvme driver's admin passthrough
 * (NVME_IOCTL_ADMIN_CMD) on the controller's character device. It is what
 * `nvme virt-mgmt` of nvme-cli does, without nvme-cli and its libraries in
 * the lab: the lab host uses it to give its NVMe controller's SR-IOV VF
 * (the GPU-P stand-in) queues and an interrupt and to set it online
 * (tests/lib/nvme.sh).
 *
 * USAGE: nvme_virt_mgmt DEVICE CNTLID RT ACT NR
 *   DEVICE  the controller, e.g. /dev/nvme0
 *   CNTLID  controller id: 0 the primary, N a secondary (VF)
 *   RT      resource type: 0 VQ (queues), 1 VI (interrupts)
 *   ACT     action: 1 primary flexible allocation, 7 secondary offline,
 *           8 secondary assign, 9 secondary online
 *   NR      number of resources
 * Exit status 0 when the controller completed the command with success;
 * otherwise the NVMe status or the errno is printed and the status is 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define NVME_ADMIN_VIRT_MGMT	0x1c

static int number(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 0);
	return errno || *end || end == s || *out > max ? -EINVAL : 0;
}

int main(int argc, char **argv)
{
	struct nvme_admin_cmd cmd = { .opcode = NVME_ADMIN_VIRT_MGMT };
	unsigned long cntlid, rt, act, count;
	int fd, ret;

	if (argc != 6 || number(argv[2], 0xffff, &cntlid) || number(argv[3], 7, &rt) ||
	    number(argv[4], 15, &act) || number(argv[5], 0xffff, &count)) {
		fprintf(stderr, "usage: %s DEVICE CNTLID RT ACT NR\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "nvme_virt_mgmt: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	cmd.cdw10 = (uint32_t)(cntlid << 16 | rt << 8 | act);
	cmd.cdw11 = (uint32_t)count;
	cmd.timeout_ms = 5000;
	ret = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd);
	close(fd);
	if (ret < 0) {
		fprintf(stderr, "nvme_virt_mgmt: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (ret > 0) {
		fprintf(stderr, "nvme_virt_mgmt: %s: cntlid %lu rt %lu act %lu count %lu: NVMe status %#x\n",
			argv[1], cntlid, rt, act, count, ret);
		return 1;
	}
	return 0;
}
