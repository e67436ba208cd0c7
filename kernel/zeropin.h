/* SPDX-License-Identifier: GPL-2.0 */
/*
 * zeropin.h - what the parts of zeropin.ko share: the version and the
 * sysfs root every part hangs its knobs under.
 */
#ifndef ZEROPIN_H
#define ZEROPIN_H

#include <linux/kobject.h>

#define ZEROPIN_VERSION "0.1.0"

/* /sys/kernel/zeropin, created at load and removed at unload. */
extern struct kobject *zeropin_kobj;

#endif /* ZEROPIN_H */
