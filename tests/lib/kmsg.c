// SPDX-License-Identifier: GPL-2.0
/* kmsg.c - see kmsg.h. */
#include <errno.h>
#include <stdlib.h>
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
