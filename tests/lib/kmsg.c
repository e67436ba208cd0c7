// SPDX-License-Identifier: GPL-2.0
/* kmsg.c - see kmsg.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/klog.h>

#include "kmsg.h"

#define SYSLOG_ACTION_READ_ALL 3
#define SYSLOG_ACTION_SIZE_BUFFER 10

int kmsg_count(const char *needle)
{
	int size = klogctl(SYSLOG_ACTION_SIZE_BUFFER, NULL, 0);
	char *buf, *line, *save = NULL;
	int n, count = 0;

	if (size <= 0)
		return -errno;
	buf = malloc(size + 1);
	if (!buf)
		return -ENOMEM;
	n = klogctl(SYSLOG_ACTION_READ_ALL, buf, size);
	if (n < 0) {
		free(buf);
		return -errno;
	}
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		count += strstr(line, needle) != NULL;
	free(buf);
	return count;
}

int kmsg_mark(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (lseek(fd, 0, SEEK_END) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

int kmsg_count_since(int mark, const char *const needles[], int n)
{
	char rec[8192];
	int i, count = 0;
	ssize_t len;

	for (;;) {
		len = read(mark, rec, sizeof(rec) - 1);
		if (len < 0 && errno == EPIPE)
			continue;	/* records overwritten meanwhile: go on */
		if (len < 0)
			return errno == EAGAIN ? count : -errno;
		rec[len] = '\0';
		for (i = 0; i < n; i++)
			if (strstr(rec, needles[i])) {
				count++;
				break;
			}
	}
}
