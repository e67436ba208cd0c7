/* SPDX-License-Identifier: GPL-2.0 */
/* util.h - small helpers every test library and test shares. */
#ifndef TEST_UTIL_H
#define TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* Print "# what: strerror(-err)" and exit with KSFT_FAIL, which the
 * kselftest harness reports as a failed test: what foo() does when its
 * __foo() returned an errno. */
void test_fail(const char *what, int err) __attribute__((noreturn));

/* Run the calling thread on cpu only (a benchmark's job or loop). */
void pin_to_cpu(int cpu);

/* Milliseconds on CLOCK_MONOTONIC, for benchmarks. */
double now_ms(void);

/* A test's budget (a count, seconds, a size) from the environment variable
 * name, else dflt: make check and make check-debug set smaller ones. */
unsigned long env_ulong(const char *name, unsigned long dflt);

/* True when every byte of [p, p + len) is c. */
bool all_bytes(const void *p, int c, size_t len);

/* A "Field: N kB" line of a /proc file (e.g. /proc/meminfo "MemFree"), in
 * kB, or a negative errno; proc_status_kb() reads /proc/self/status
 * (e.g. "VmLck"). */
long proc_file_kb(const char *path, const char *field);
/* How many tasks are named comm (/proc/PID/comm), or whose name starts
 * with it when prefix; the last one's pid into *pid (when not NULL). */
int proc_tasks_named(const char *comm, bool prefix, int *pid);
long proc_status_kb(const char *field);
/* Free memory in kB: MemFree plus the pages parked on the per-CPU free
 * lists (/proc/zoneinfo "count:"), which MemFree leaves out and which 6.12
 * grows to tens of MiB right after a large free (a dead child's, say). */
long free_memory_kb(void);

/* One "name value" line of a cgroup or /proc file (memory.events,
 * /proc/vmstat); -1 when absent. */
long keyed_value(const char *path, const char *key);
/* Whether the running kernel is at least major.minor. */
bool kernel_at_least(int major, int minor);

/* A file holding one number (a sysctl), or a negative errno. */
long read_file_long(const char *path);
/* Write s to a (sysfs, procfs) file in one write(); 0 or -errno. */
int __write_file(const char *path, const char *s);

/* Load a kernel module file with a parameter string ("" for defaults);
 * 0 or -errno (-EEXIST when it is loaded already). */
int __insmod(const char *path, const char *params);

/* cgroup v2 at /sys/fs/cgroup (mounted when it is not) with controller
 * ("memory", "cpuset") enabled for the root's children; 0 or -errno. */
int __cgroup_enable(const char *controller);

/* Move this process into the cgroup v2 memory cgroup /sys/fs/cgroup/name
 * (mounting cgroup2 and enabling the memory controller when needed), so
 * what it charges can be read back; 0 or -errno. memcg_current() reads
 * its memory.current in bytes (or -errno); __memcg_leave() moves the
 * process back to the root cgroup and removes name. */
int __memcg_enter(const char *name);
long memcg_current(const char *name);
int __memcg_leave(const char *name);
/* Set that memcg's memory.max (bytes; negative: no limit); 0 or -errno. */
int __memcg_set_max(const char *name, long bytes);
/* One count of that memcg's memory.events ("oom_kill", "max"), or -errno. */
long memcg_event(const char *name, const char *key);

/* Drop CAP_IPC_LOCK from this process for good, so RLIMIT_MEMLOCK
 * applies to it; set that limit (bytes). 0 or -errno. */
int __drop_ipc_lock(void);
int __set_memlock(size_t bytes);

#endif /* TEST_UTIL_H */
