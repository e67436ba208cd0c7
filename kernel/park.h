/* SPDX-License-Identifier: GPL-2.0 */
/*
 * park.h - blocks a file let go of while something else still holds them
 * (a DMA mapping), kept until it lets go, then checked for poison.
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
 * Keep folio, with the caller's reference, while something else holds it
 * (pinned for DMA, or more references than a file letting go of it has):
 * true when parked (the reference is park's now); false when nothing else
 * holds it, or the park's index could not grow (an allocation that
 * failed, counted; the caller keeps its reference). Called as the file
 * lets go; may sleep.
 */
bool zp_park(struct folio *folio);
/* Look at the parked blocks now (a holder of one just let go). Does not
 * sleep. */
void zp_park_kick(void);
/* Blocks parked now; blocks not parked for want of room, since load. */
unsigned long zp_parked(void);
unsigned long zp_park_failed(void);

#endif /* ZEROPIN_PARK_H */
