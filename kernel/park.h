/* SPDX-License-Identifier: GPL-2.0 */
/*
 * park.h - blocks a file let go of while another holder still pins them
 * for DMA, kept until the pin goes.
 */
#ifndef ZEROPIN_PARK_H
#define ZEROPIN_PARK_H

#include <linux/mm_types.h>

/* release(folio) takes each parked block back once its only holder is
 * the reference parked with it (from a work item: may sleep). */
void zp_park_init(void (*release)(struct folio *folio));
/* Stop looking, and release every block still parked. May sleep. */
void zp_park_exit(void);

/*
 * Keep folio, with the caller's reference, while something else pins it
 * for DMA (folio_maybe_dma_pinned()): true when parked (the reference is
 * park's now); false when it is not pinned, or no room could be had
 * without sleeping (the caller keeps its reference). Does not sleep.
 */
bool zp_park(struct folio *folio);
/* Blocks parked now. */
unsigned long zp_parked(void);

#endif /* ZEROPIN_PARK_H */
