// SPDX-License-Identifier: GPL-2.0
/* bounded.c - see bounded.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bounded.h"
#include "util.h"

/* The child's stack: fn may keep a page or two of buffers on it. */
#define BOUNDED_STACK	(256 * 1024)
/* How long a killed child may take to go before it counts as unkillable. */
#define BOUNDED_KILL_MS	2000

struct bounded {
	int (*fn)(void *arg);
	void *arg;
	volatile int ret;	/* fn's result, written by the child */
};

static int bounded_trampoline(void *p)
{
	struct bounded *b = p;

	b->ret = b->fn(b->arg);
	return 0;
}

/* Reap pid within ms; true when it went. */
static bool reap(pid_t pid, int *status, double ms)
{
	double deadline = now_ms() + ms;

	for (;;) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return true;
		if (now_ms() > deadline)
			return false;
		usleep(1000);
	}
}

/* Wait for pid until the deadline; kill it past that. */
static int wait_bounded(pid_t pid, struct bounded *b, int timeout_ms)
{
	int status;

	if (!reap(pid, &status, timeout_ms)) {
		kill(pid, SIGKILL);
		fprintf(stderr, "# bounded call still running after %d ms%s\n", timeout_ms,
			reap(pid, &status, BOUNDED_KILL_MS) ? "" : ", and SIGKILL does not end it");
		return -ETIMEDOUT;
	}
	if (WIFSIGNALED(status))
		return BOUNDED_SIG(WTERMSIG(status));
	return b ? b->ret : -WEXITSTATUS(status);
}

int bounded_call(int (*fn)(void *arg), void *arg, int timeout_ms)
{
	struct bounded *b = calloc(1, sizeof(*b));
	char *stack = malloc(BOUNDED_STACK);
	pid_t pid;
	int ret;

	if (!b || !stack) {
		free(b);
		free(stack);
		return -ENOMEM;
	}
	b->fn = fn;
	b->arg = arg;
	pid = clone(bounded_trampoline, stack + BOUNDED_STACK,
		    CLONE_VM | CLONE_FILES | SIGCHLD, b);
	if (pid < 0) {
		ret = -errno;
	} else {
		ret = wait_bounded(pid, b, timeout_ms);
		if (ret == -ETIMEDOUT)
			return ret;	/* a stuck child may still use both */
	}
	free(stack);
	free(b);
	return ret;
}

/* At most this many calls race in bounded_together(). */
#define BOUNDED_TOGETHER_MAX	8

int bounded_together(int n, int (*const fn[])(void *arg), void *const arg[], int ret[],
		     int timeout_ms)
{
	struct bounded *b[BOUNDED_TOGETHER_MAX] = { NULL };
	char *stack[BOUNDED_TOGETHER_MAX] = { NULL };
	pid_t pid[BOUNDED_TOGETHER_MAX];
	double deadline = now_ms() + timeout_ms;
	int i, started, err = 0;
	bool stuck = false;

	if (n < 1 || n > BOUNDED_TOGETHER_MAX)
		return -EINVAL;
	for (started = 0; started < n; started++) {
		b[started] = calloc(1, sizeof(*b[started]));
		stack[started] = malloc(BOUNDED_STACK);
		if (!b[started] || !stack[started]) {
			err = -ENOMEM;
			break;
		}
		b[started]->fn = fn[started];
		b[started]->arg = arg[started];
		pid[started] = clone(bounded_trampoline, stack[started] + BOUNDED_STACK,
				     CLONE_VM | CLONE_FILES | SIGCHLD, b[started]);
		if (pid[started] < 0) {
			err = -errno;
			break;
		}
	}
	for (i = 0; i < started; i++) {
		double left = deadline - now_ms();

		ret[i] = wait_bounded(pid[i], b[i], err ? 0 : (left > 0 ? (int)left : 0));
		stuck |= ret[i] == -ETIMEDOUT;
	}
	if (stuck)
		return err ?: -ETIMEDOUT;	/* a stuck child may still use its stack */
	for (i = 0; i < n; i++) {
		free(stack[i]);
		free(b[i]);
	}
	return err;
}

int kill_and_reap(int pid, int timeout_ms)
{
	int status;

	kill(pid, SIGKILL);
	return reap(pid, &status, timeout_ms) ? 0 : -ETIMEDOUT;
}

int bounded_fork(int (*fn)(void *arg), void *arg, int timeout_ms)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (!pid)
		_exit(-fn(arg) & 0xff);	/* 0 or errno */
	return wait_bounded(pid, NULL, timeout_ms);
}

const char *bounded_str(int ret)
{
	static char buf[96];

	if (!ret)
		return "ok";
	if (ret == -ETIMEDOUT)
		return "hung";
	if (BOUNDED_IS_SIG(ret))
		snprintf(buf, sizeof(buf), "killed by signal %d", ret & 0xff);
	else
		snprintf(buf, sizeof(buf), "errno %d (%s)", -ret, strerror(-ret));
	return buf;
}
