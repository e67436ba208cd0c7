// SPDX-License-Identifier: GPL-2.0
/*
 * poison.c - memory failure reports for the pool.
 *
 * memory_failure() handles pages it knows: on the LRU, free, hugetlb. A
 * pool block is none of these (a compound page held by zeropin), so on a
 * page of an idle block it only marks that one page poisoned, and the
 * folio flag the kernel's fault and pin paths read (has_hwpoisoned) stays
 * clear: handed out, the block would be mapped into a guest and written
 * into the IOMMU, poison and all. Patrol scrubbing finds exactly this kind
 * of memory: idle. Checking every page of every block at hand-out would
 * double the cost of mapping never-touched guest RAM, so the pool listens
 * instead: every memory_failure() ends in its memory_failure_event
 * tracepoint (action_result(), the page already marked), and a probe on it
 * takes the block off the pool at once. The tracepoint is not exported by
 * name; for_each_kernel_tracepoint() finds it.
 *
 * Locking: none of its own. Registration and unregistration run in module
 * init and exit; the probe runs with preemption off in the task that
 * reports the failure (tracepoint rules), under the kernel's mf_mutex.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": poison: " fmt

#include <linux/atomic.h>
#include <linux/string.h>
#include <linux/tracepoint.h>

#include "poison.h"

#define MF_TRACEPOINT	"memory_failure_event"

static struct tracepoint *mf_tp;		/* found and probed, else NULL */
static void (*mf_fn)(unsigned long pfn);	/* what the probe calls */
static atomic_t mf_seq;				/* failures reported */

/* The tracepoint's TP_PROTO (include/ras/ras_event.h in 6.1 and 6.12,
 * include/trace/events/memory-failure.h in 7.2, the same name and
 * arguments): pfn, enum mf_action_page_type, enum mf_result. */
static void mf_probe(void *data, unsigned long pfn, int type, int result)
{
	atomic_inc(&mf_seq);	/* before fn takes its lock: see poison.h */
	mf_fn(pfn);
}

static void mf_find(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, MF_TRACEPOINT))
		*(struct tracepoint **)priv = tp;
}

int zp_poison_watch(void (*fn)(unsigned long pfn))
{
	struct tracepoint *tp = NULL;
	int ret;

	/* fn takes spinlocks, which sleep on PREEMPT_RT; the probe may not */
	if (IS_ENABLED(CONFIG_PREEMPT_RT))
		return -EOPNOTSUPP;
	for_each_kernel_tracepoint(mf_find, &tp);
	if (!tp) {
		pr_warn("no %s tracepoint: every block is checked page by page when handed out\n",
			MF_TRACEPOINT);
		return -ENOENT;
	}
	mf_fn = fn;
	ret = tracepoint_probe_register(tp, mf_probe, NULL);
	if (ret)
		return ret;
	mf_tp = tp;
	return 0;
}

void zp_poison_unwatch(void)
{
	if (!mf_tp)
		return;
	tracepoint_probe_unregister(mf_tp, mf_probe, NULL);
	tracepoint_synchronize_unregister();
	mf_tp = NULL;
}

bool zp_poison_watched(void)
{
	return mf_tp;
}

unsigned int zp_poison_seq(void)
{
	return atomic_read_acquire(&mf_seq);	/* before the page flags it guards */
}
