// SPDX-License-Identifier: GPL-2.0
/*
 * l2_nvme_init - /init of the nested guest (L2) in the QEMU series' reset
 * tests (tests/selftests/qemu_reset.sh). L1's QEMU passes an NVMe
 * controller through to L2 - the lab's SR-IOV VF, the stand-in for a
 * GPU-P partition - whose cold-start reset the series skips. From inside
 * L2 this program proves the device was handed over usable and that its
 * DMA lands in L2 RAM intact: it enables the controller with an admin
 * queue pair in L2 pages (physical addresses from /proc/self/pagemap),
 * issues Identify Controller into a page filled with a pattern, polls the
 * completion, and checks what arrived. It reports on the kernel log (L2's
 * serial console):
 *   l2-nvme: bar0 0xADDR
 *   l2-nvme: identify ok sn=SERIAL cntlid=N | identify FAIL <why>
 *   l2-nvme: done
 * The test in L1 compares the serial with the lab controller's.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "l2_init.h"

#define NVME_CLASS	"0x010802"
#define BAR0_MAP	0x2000		/* registers and the admin doorbells */
#define REG_CAP		0x00		/* 64 bits: MQES, TO, DSTRD */
#define REG_INTMS	0x0c
#define REG_CC		0x14
#define REG_CSTS	0x1c
#define REG_AQA		0x24
#define REG_ASQ		0x28
#define REG_ACQ		0x30
#define REG_DOORBELL	0x1000
#define CC_EN		0x1
#define CC_IOSQES_IOCQES (6u << 16 | 4u << 20)	/* 64-byte SQ, 16-byte CQ entries */
#define CSTS_RDY	0x1
#define CSTS_CFS	0x2
#define QUEUE_ENTRIES	2		/* one command at a time, and the ring's spare */
#define OPC_IDENTIFY	0x06
#define CNS_CONTROLLER	0x01
#define ID_SN		4		/* Identify Controller: serial, 20 bytes */
#define ID_CNTLID	78
#define PATTERN		0xa5		/* what the Identify page held before */
#define IDENTIFY_MS	10000		/* nested TCG: generous */

struct sqe {				/* NVMe submission queue entry */
	uint32_t cdw0;			/* opcode, command id */
	uint32_t nsid;
	uint64_t rsvd;
	uint64_t mptr;
	uint64_t prp1;
	uint64_t prp2;
	uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};

struct cqe {				/* NVMe completion queue entry */
	uint32_t result, rsvd;
	uint16_t sq_head, sq_id;
	uint16_t cid, status;		/* status bit 0: the phase tag */
};

static volatile uint8_t *bar0;

static uint32_t rd32(unsigned int off) { return *(volatile uint32_t *)(bar0 + off); }
static void wr32(unsigned int off, uint32_t v) { *(volatile uint32_t *)(bar0 + off) = v; }

static void wr64(unsigned int off, uint64_t v)
{
	wr32(off, (uint32_t)v);
	wr32(off + 4, (uint32_t)(v >> 32));
}

static long ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until CSTS.RDY is want, at most ms; 0, or the reason. */
static const char *wait_ready(uint32_t want, long ms)
{
	long end = ms_now() + ms;

	while ((rd32(REG_CSTS) & CSTS_RDY) != want) {
		if (rd32(REG_CSTS) & CSTS_CFS)
			return "controller fatal status (CSTS.CFS)";
		if (ms_now() > end)
			return want ? "not ready in time (CSTS.RDY 0)" : "does not disable (CSTS.RDY 1)";
		usleep(1000);
	}
	return NULL;
}

/* Disable, give it the admin queue pair, enable; 0, or the reason. */
static const char *enable(uint64_t asq, uint64_t acq)
{
	uint32_t cap_hi = rd32(REG_CAP + 4), to = (rd32(REG_CAP) >> 24) & 0xff;
	long ms = (to ? to : 1) * 500L;
	const char *why;

	if (cap_hi & 0xf)
		return "doorbell stride is not 4 bytes";
	wr32(REG_CC, 0);
	why = wait_ready(0, ms);
	if (why)
		return why;
	wr32(REG_INTMS, ~0u);		/* polled: no interrupt wanted */
	wr32(REG_AQA, (QUEUE_ENTRIES - 1) << 16 | (QUEUE_ENTRIES - 1));
	wr64(REG_ASQ, asq);
	wr64(REG_ACQ, acq);
	wr32(REG_CC, CC_IOSQES_IOCQES | CC_EN);
	return wait_ready(CSTS_RDY, ms);
}

/* Identify Controller into id (pattern-filled); 0, or the reason. */
static const char *identify(struct sqe *sq, volatile struct cqe *cq, uint8_t *id)
{
	uint64_t pid = l2_phys_of(id);
	long end = ms_now() + IDENTIFY_MS;

	if (!pid)
		return "no physical address in /proc/self/pagemap";
	memset(id, PATTERN, 4096);
	memset(sq, 0, sizeof(*sq));
	sq->cdw0 = OPC_IDENTIFY | 1u << 16;	/* command id 1 */
	sq->prp1 = pid;
	sq->cdw10 = CNS_CONTROLLER;
	__sync_synchronize();
	wr32(REG_DOORBELL, 1);			/* SQ 0 tail */
	while (!(cq->status & 1)) {		/* phase tag 1 on the first pass */
		if (ms_now() > end)
			return "no completion in time";
		usleep(1000);
	}
	__sync_synchronize();
	wr32(REG_DOORBELL + 4, 1);		/* CQ 0 head */
	if (cq->status >> 1)
		return "the command failed (NVMe status)";
	if (cq->cid != 1 || cq->sq_head != 1)
		return "the completion is not the command's";
	if (id[ID_SN] == PATTERN || id[ID_SN] == 0)
		return "no serial arrived in L2 RAM";
	return NULL;
}

static int run(void)
{
	char dev[256], sn[21];
	uint8_t *mem;
	const char *why;
	int res, config, i;

	if (l2_find_class(NVME_CLASS, dev, sizeof(dev)))
		return l2_say("FAIL no NVMe device"), -1;
	res = l2_open_dev_file(dev, "resource0", O_RDWR | O_SYNC);
	config = l2_enable_device(dev);
	if (res < 0 || config < 0)
		return l2_say("FAIL cannot open or enable %s", dev), -1;
	close(config);
	bar0 = mmap(NULL, BAR0_MAP, PROT_READ | PROT_WRITE, MAP_SHARED, res, 0);
	if (bar0 == MAP_FAILED)
		return l2_say("FAIL cannot map %s's BAR0", dev), -1;
	l2_say("bar0 %#lx", l2_bar0_address(dev));
	/* one page each: SQ, CQ, the Identify data */
	mem = l2_dma_pages(3);
	if (!mem)
		return l2_say("FAIL no buffer"), -1;
	memset(mem, 0, 2 * 4096);
	if (!l2_phys_of(mem) || !l2_phys_of(mem + 4096))
		return l2_say("identify FAIL no physical address in /proc/self/pagemap"), -1;
	why = enable(l2_phys_of(mem), l2_phys_of(mem + 4096));
	if (!why)
		why = identify((struct sqe *)mem, (volatile struct cqe *)(mem + 4096), mem + 8192);
	if (why)
		return l2_say("identify FAIL %s (CSTS %#x)", why, rd32(REG_CSTS)), -1;
	memcpy(sn, mem + 8192 + ID_SN, 20);
	sn[20] = '\0';
	for (i = 19; i >= 0 && sn[i] == ' '; i--)
		sn[i] = '\0';
	l2_say("identify ok sn=%s cntlid=%u", sn,
	       (unsigned int)(mem[8192 + ID_CNTLID] | mem[8192 + ID_CNTLID + 1] << 8));
	wr32(REG_CC, 0);
	return 0;
}

int main(void)
{
	l2_mounts("l2-nvme: ");
	run();
	l2_say("done");
	l2_power_off();
}
