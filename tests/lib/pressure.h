/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pressure.h - memory states a long-running host gets into, made on
 * purpose, and a look at what the kernel did about them.
 * Same convention as the other helpers: __foo() returns 0 or -errno.
 */
#ifndef PRESSURE_H
#define PRESSURE_H
#include <stddef.h>

/* io_uring rings the pinned fragmenter may use, each holding up to
 * 16384 pages (the kernel's limit of registered buffers per ring): one
 * page per 2 MiB of up to 256 GiB. */
#define FRAG_MAX_RINGS	8

/* Free memory cut into pieces smaller than a 2 MiB block. */
struct fragmented {
	void *addr;		/* 4 KiB anonymous pages, one kept per 2 MiB block */
	size_t size;		/* the mapping's length */
	long kept_kb;		/* memory the kept pages hold */
	void **kept;		/* the kept pages' addresses */
	long nkept;		/* ... how many */
	int rings[FRAG_MAX_RINGS]; /* io_uring fds holding them pinned */
	int nrings;		/* ... how many */
};

/* Fill available memory (MemAvailable) down to leave_mib with 4 KiB
 * anonymous pages (MADV_NOHUGEPAGE), then free all but one page in each
 * physical 2 MiB block they took (root: the frames come from
 * /proc/self/pagemap): the page allocator then has no free 2 MiB block
 * but in the leave_mib, and an order-9 allocation beyond those finds one
 * only after compaction migrates a kept page. 0, or -errno (nothing held
 * then). */
int __fragment_memory(struct fragmented *f, long leave_mib);
/* Pin the kept pages long-term (io_uring registered buffers, FOLL_LONGTERM
 * as VFIO pins): compaction can then never free their blocks, as on a
 * long-running host whose unmovable allocations are scattered. 0, or
 * -errno (-ENOSYS: no io_uring; nothing pinned then). */
int __fragment_pin(struct fragmented *f);
/* __fragment_memory() then __fragment_pin(): a long-running host's
 * scattered unmovable memory. 0, or -errno (-ENOSYS: no io_uring); on an
 * error nothing is held. */
int __fragment_pinned(struct fragmented *f, long leave_mib);
/* Unpin (if pinned), give the pages back and compact memory, so that the
 * tests after find whole blocks again. */
void fragment_release(struct fragmented *f);

/* Compact all memory once (/proc/sys/vm/compact_memory, synchronous) and
 * return how many page migrations failed meanwhile (/proc/vmstat
 * pgmigrate_fail), or -errno. */
long __compact_count_failures(void);

/* Trace events (tracefs "system/event") enabled, the buffer emptied, for
 * trace_count() to count. 0 or -errno; -ENOENT when the kernel has no
 * tracefs or no such event. */
int __trace_start(const char *const events[], int n);
/* Tracing stopped and the events disabled (the buffer kept). */
void trace_stop(const char *const events[], int n);
/* trace_stop(), then how many lines of the buffer are one of the events
 * in a task whose comm starts with task (such as "zeropin/"; "" for any),
 * found by comm or by pid; negative errno on error. */
int trace_count(const char *const events[], int n, const char *task);
#endif /* PRESSURE_H */
