// SPDX-License-Identifier: GPL-2.0
/*
 * zero.c - how the pool clears a block, selectable because it matters:
 * one core zeroes 10-20 GB/s with cached stores (the kernel's clear_page:
 * rep stosb/stosq) and 25-67 GB/s with non-temporal stores on recent x86
 * server parts, and non-temporal stores do not evict the cache of whatever
 * else runs. The pool zeroes ahead of use, so nothing gains from the
 * cleared lines being cached.
 *
 *   zero_method=clear_page   the kernel's clear_page() per 4 KiB page
 *   zero_method=nontemporal  movnti stores, one sfence per block (x86-64)
 *
 * Writable at run time by root (/sys/module/zeropin/parameters/zero_method);
 * a block being zeroed finishes with the method it started with.
 */
#include <linux/highmem.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/string.h>

#include "pool.h"
#include "zero.h"

/* Pages cleared between yields: 64 x 4 KiB = 256 KiB, well under a
 * millisecond of CPU on hardware. */
#define ZERO_CHUNK_PAGES	64

enum zero_method { ZERO_CLEAR_PAGE, ZERO_NONTEMPORAL };

static const char *const method_names[] = {
	[ZERO_CLEAR_PAGE] = "clear_page",
	[ZERO_NONTEMPORAL] = "nontemporal",
};

/* Non-temporal where the CPU has movnti: in the lab it zeroed 1.3x (idle
 * fill) to 1.6x (on a fault's path) faster than clear_page, and on
 * hardware it leaves the caches to the running VMs. */
static int zero_method = IS_ENABLED(CONFIG_X86_64) ? ZERO_NONTEMPORAL : ZERO_CLEAR_PAGE;

static int method_set(const char *val, const struct kernel_param *kp)
{
	int i = sysfs_match_string(method_names, val);

	if (i < 0)
		return -EINVAL;
	if (i == ZERO_NONTEMPORAL && !IS_ENABLED(CONFIG_X86_64))
		return -EOPNOTSUPP;
	WRITE_ONCE(zero_method, i);
	return 0;
}

static int method_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n", method_names[READ_ONCE(zero_method)]);
}

static const struct kernel_param_ops method_ops = {
	.set = method_set,
	.get = method_get,
};
module_param_cb(zero_method, &method_ops, NULL, 0644);
MODULE_PARM_DESC(zero_method,
	"How the pool clears blocks: clear_page (the kernel's clear_page) or "
	"nontemporal (movnti stores that bypass the cache, x86-64) "
	"[DEFAULT: nontemporal on x86-64, else clear_page]");

#ifdef CONFIG_X86_64
/* One 4 KiB page with 8-byte non-temporal stores; the caller fences. */
static void clear_page_nt(void *addr)
{
	unsigned long *p = addr, *end = p + PAGE_SIZE / sizeof(*p);

	for (; p < end; p += 8) {
		asm volatile("movnti %1, 0(%0)\n\t"
			     "movnti %1, 8(%0)\n\t"
			     "movnti %1, 16(%0)\n\t"
			     "movnti %1, 24(%0)\n\t"
			     "movnti %1, 32(%0)\n\t"
			     "movnti %1, 40(%0)\n\t"
			     "movnti %1, 48(%0)\n\t"
			     "movnti %1, 56(%0)\n\t"
			     : : "r"(p), "r"(0UL) : "memory");
	}
}
#else
static void clear_page_nt(void *addr)
{
	clear_page(addr);
}
#endif

static void clear_one(struct page *page, int method)
{
	void *addr;

	if (method == ZERO_CLEAR_PAGE) {
		clear_highpage(page);
		return;
	}
	addr = kmap_local_page(page);
	clear_page_nt(addr);
	kunmap_local(addr);
}

void zp_zero_folio(struct folio *folio, bool may_sleep)
{
	int method = READ_ONCE(zero_method);
	unsigned long i, n = folio_nr_pages(folio);

	for (i = 0; i < n; i++) {
		clear_one(folio_page(folio, i), method);
		if (may_sleep && (i % ZERO_CHUNK_PAGES) == ZERO_CHUNK_PAGES - 1)
			cond_resched();
	}
	if (method == ZERO_NONTEMPORAL)
		wmb();	/* sfence: the zeroes are visible before anyone gets the block */
}
