/* SPDX-License-Identifier: GPL-2.0 */
/*
 * compat.h - every difference between the supported kernel series
 * (Debian 12: 6.1 and 6.12) lives here, behind one name each, so the rest
 * of the module reads as if there were one kernel.
 */
#ifndef ZEROPIN_COMPAT_H
#define ZEROPIN_COMPAT_H

#include <linux/version.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "zeropin supports Linux 6.1 and newer (Debian 12: 6.1 and 6.12)"
#endif

#endif /* ZEROPIN_COMPAT_H */
