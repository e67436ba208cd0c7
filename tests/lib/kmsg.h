/* SPDX-License-Identifier: GPL-2.0 */
/* kmsg.h - read the guest kernel's log from tests. */
#ifndef KMSG_H
#define KMSG_H

/* How many lines of the kernel log contain needle; negative errno on error. */
int kmsg_count(const char *needle);

#endif /* KMSG_H */
