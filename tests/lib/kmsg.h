/* SPDX-License-Identifier: GPL-2.0 */
/* kmsg.h - read the guest kernel's log from tests. */
#ifndef KMSG_H
#define KMSG_H

/* How many lines of the kernel log contain needle; negative errno on error. */
int kmsg_count(const char *needle);

/* The kernel log from now on: a /dev/kmsg reader at its end (-errno on
 * error), for kmsg_count_since(); close() it when done. Unlike
 * kmsg_count(), not fooled by old lines leaving a full ring buffer. */
int kmsg_mark(void);
/* Records logged since mark that contain any of the n needles (each record
 * read once: the mark moves on); negative errno on error. */
int kmsg_count_since(int mark, const char *const needles[], int n);

#endif /* KMSG_H */
