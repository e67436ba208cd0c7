// SPDX-License-Identifier: GPL-2.0
/* util.c - see util.h. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include "util.h"

#define KSFT_FAIL 1

void test_fail(const char *what, int err)
{
	fprintf(stderr, "# %s: %s\n", what, strerror(-err));
	exit(KSFT_FAIL);
}

void pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

unsigned long env_ulong(const char *name, unsigned long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtoul(v, NULL, 0) : dflt;
}

bool all_bytes(const void *p, int c, size_t len)
{
	const uint64_t *w = p;
	uint64_t want = 0x0101010101010101ull * (uint8_t)c;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != want)
			return false;
	for (i = len & ~7ul; i < len; i++)
		if (((const uint8_t *)p)[i] != (uint8_t)c)
			return false;
	return true;
}

int proc_tasks_named(const char *comm, bool prefix, int *pid)
{
	char path[64], name[32];
	size_t len = strlen(comm);
	struct dirent *d;
	DIR *dp = opendir("/proc");
	int n = 0;
	FILE *f;

	while (dp && (d = readdir(dp))) {
		if (!isdigit((unsigned char)d->d_name[0]))
			continue;	/* self, thread-self: a task seen twice */
		snprintf(path, sizeof(path), "/proc/%.16s/comm", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) && !strncmp(name, comm, len) &&
		    (prefix || name[len] == '\n')) {
			if (pid)
				*pid = atoi(d->d_name);
			n++;
		}
		fclose(f);
	}
	if (dp)
		closedir(dp);
	return n;
}

long proc_file_kb(const char *path, const char *field)
{
	char line[256];
	size_t len = strlen(field);
	long kb = -ENOENT;
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len) && line[len] == ':')
			kb = strtol(line + len + 1, NULL, 10);
	fclose(f);
	return kb;
}

long proc_status_kb(const char *field)
{
	return proc_file_kb("/proc/self/status", field);
}

int __insmod(const char *path, const char *params)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return ret;
}

int __write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;
	size_t len = strlen(s);

	if (fd < 0)
		return -errno;
	if (write(fd, s, len) != (ssize_t)len)
		ret = -errno;
	close(fd);
	return ret;
}

long read_file_long(const char *path)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t len;

	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return len < 0 ? -errno : -EIO;
	buf[len] = '\0';
	return strtol(buf, NULL, 10);
}

long free_memory_kb(void)
{
	long kb = proc_file_kb("/proc/meminfo", "MemFree"), pages = 0, n;
	char line[256];
	FILE *f = fopen("/proc/zoneinfo", "r");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " count: %ld", &n) == 1)
			pages += n;
	fclose(f);
	return kb < 0 ? kb : kb + pages * 4;
}

long keyed_value(const char *path, const char *key)
{
	char name[64];
	long v, found = -1;
	FILE *f = fopen(path, "r");

	while (f && fscanf(f, "%63s %ld", name, &v) == 2)
		if (!strcmp(name, key))
			found = v;
	if (f)
		fclose(f);
	return found;
}

bool kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

#define CGROUP_ROOT	"/sys/fs/cgroup"

static int cgroup_join(const char *dir)
{
	char path[320], pid[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", getpid());
	return __write_file(path, pid);
}

int __cgroup_enable(const char *controller)
{
	char add[32];

	mkdir(CGROUP_ROOT, 0755);
	if (access(CGROUP_ROOT "/cgroup.subtree_control", F_OK) &&
	    mount("none", CGROUP_ROOT, "cgroup2", 0, NULL) && errno != EBUSY)
		return -errno;
	snprintf(add, sizeof(add), "+%s", controller);
	return __write_file(CGROUP_ROOT "/cgroup.subtree_control", add);
}

int __memcg_enter(const char *name)
{
	char dir[128];
	int ret;

	ret = __cgroup_enable("memory");
	if (ret)
		return ret;
	snprintf(dir, sizeof(dir), CGROUP_ROOT "/%s", name);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -errno;
	return cgroup_join(dir);
}

/* The path of file in memcg name's folder. */
static const char *memcg_file(char *buf, size_t len, const char *name, const char *file)
{
	snprintf(buf, len, CGROUP_ROOT "/%s/%s", name, file);
	return buf;
}

long memcg_current(const char *name)
{
	char path[256];

	return read_file_long(memcg_file(path, sizeof(path), name, "memory.current"));
}

int __memcg_set_max(const char *name, long bytes)
{
	char path[256], val[32];

	memcg_file(path, sizeof(path), name, "memory.max");
	if (bytes < 0)
		snprintf(val, sizeof(val), "max");
	else
		snprintf(val, sizeof(val), "%ld", bytes);
	return __write_file(path, val);
}

long memcg_event(const char *name, const char *key)
{
	char path[256], k[64];
	long val, ret = -ENOENT;
	FILE *f;

	f = fopen(memcg_file(path, sizeof(path), name, "memory.events"), "r");
	if (!f)
		return -errno;
	while (ret < 0 && fscanf(f, "%63s %ld", k, &val) == 2)
		if (!strcmp(k, key))
			ret = val;
	fclose(f);
	return ret;
}

int __memcg_leave(const char *name)
{
	char dir[128];
	int ret = cgroup_join(CGROUP_ROOT);

	snprintf(dir, sizeof(dir), CGROUP_ROOT "/%s", name);
	if (!ret && rmdir(dir) && errno != ENOENT && errno != EBUSY)
		ret = -errno;
	return ret;
}

int __drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	d[CAP_TO_INDEX(CAP_IPC_LOCK)].permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

int __set_memlock(size_t bytes)
{
	struct rlimit r = { .rlim_cur = bytes, .rlim_max = bytes };

	return setrlimit(RLIMIT_MEMLOCK, &r) ? -errno : 0;
}
