/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bounded.h - a risky call with a deadline. A call the kernel may never
 * return from (a fault that repeats forever, a loop that ignores SIGKILL)
 * runs in a child process; the caller waits until a deadline and, if the
 * child is still there, kills it and reports -ETIMEDOUT. A hang becomes a
 * failed test instead of a stuck suite (the boot's kernel-log check then
 * shows what the kernel said about it).
 *
 * bounded_call() shares the caller's memory and file table (clone with
 * CLONE_VM | CLONE_FILES): madvise, mremap, mlock, stores and ioctls act
 * on the test's own mappings and files. fn must then stick to system
 * calls (no malloc, no stdio: the child runs on a stack of its own but
 * with the caller's libc state). bounded_fork() runs fn in a forked copy,
 * for what may take down every process that maps the memory (memory
 * failure kills all of them).
 *
 * Results: fn's own return value (0 or a negative errno), BOUNDED_SIG(n)
 * when signal n killed the child (a SIGBUS, say), or -ETIMEDOUT.
 */
#ifndef BOUNDED_H
#define BOUNDED_H

#include <stdbool.h>

#define BOUNDED_SIG(n)		(0x100 | (n))
#define BOUNDED_IS_SIG(ret)	((ret) > 0 && ((ret) & 0x100))

/* Deadline for one call that should take well under a second in the lab
 * (TCG is slow, and a split or a migration attempt walks 512 pages). */
#define BOUNDED_MS		20000

int bounded_call(int (*fn)(void *arg), void *arg, int timeout_ms);
int bounded_fork(int (*fn)(void *arg), void *arg, int timeout_ms);

/* n calls at once, each run as bounded_call() runs one (a race between
 * tasks that share the memory), all waited for until one deadline;
 * ret[i] gets call i's result. Returns 0, -ETIMEDOUT when any call was
 * still running at the deadline (each such one is killed and its ret[i]
 * says so), or -errno when a call could not be started. */
int bounded_together(int n, int (*const fn[])(void *arg), void *const arg[], int ret[],
		     int timeout_ms);
/* SIGKILL pid (a child) and reap it: 0 once it is gone, -ETIMEDOUT when
 * it is still there after timeout_ms (stuck in the kernel). */
int kill_and_reap(int pid, int timeout_ms);

/* "ok", "errno N (text)", "killed by signal N" or "hung": for TH_LOG. */
const char *bounded_str(int ret);

#endif /* BOUNDED_H */
