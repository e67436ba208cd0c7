/* SPDX-License-Identifier: GPL-2.0 */
/* zero.h - how the pool clears a block. */
#ifndef ZEROPIN_ZERO_H
#define ZEROPIN_ZERO_H

#include <linux/mm_types.h>

/* Clear every byte of a folio; may_sleep: yield between chunks. */
void zp_zero_folio(struct folio *folio, bool may_sleep);

#endif /* ZEROPIN_ZERO_H */
