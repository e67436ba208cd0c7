/* SPDX-License-Identifier: GPL-2.0 */
/*
 * poison.h - memory failure reports: the kernel's memory_failure_event
 * tracepoint, watched, and a count of what it reported.
 */
#ifndef ZEROPIN_POISON_H
#define ZEROPIN_POISON_H

#include <linux/types.h>

/*
 * Call fn(pfn) for every memory failure the kernel reports from now on,
 * after zp_poison_seq() has moved. fn runs in the reporting task with
 * preemption off: it may take spinlocks, not sleep. -ENOENT when the
 * kernel has no such tracepoint (then nothing is reported).
 */
int zp_poison_watch(void (*fn)(unsigned long pfn));
/* Stop, and wait until no fn call is running. */
void zp_poison_unwatch(void);
/* Whether reports come (zp_poison_watch() succeeded). */
bool zp_poison_watched(void);
/*
 * Memory failures reported so far. Read before checking a block's pages
 * and again, under the lock fn takes, before filing it: a change means a
 * report may have come while the block was on no list, where fn could not
 * find it. memory_failure() marks the page before it reports (an atomic
 * test-and-set), so once the count has moved the mark shows.
 */
unsigned int zp_poison_seq(void);

#endif /* ZEROPIN_POISON_H */
