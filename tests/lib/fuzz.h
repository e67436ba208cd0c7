/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fuzz.h - seeded, bounded fuzzing for the selftests: a PRNG whose seed is
 * printed (a failing run replays with FUZZ_SEED=N), and a budget of calls
 * and seconds after which a fuzzer stops by itself.
 *
 * Environment: FUZZ_SEED  the seed           [DEFAULT: from the clock]
 *              FUZZ_CALLS calls per run      [DEFAULT: the fuzzer's own]
 *              FUZZ_SECONDS seconds per run, at most FUZZ_MAX_SECONDS
 *                                            [DEFAULT: the fuzzer's own]
 * Each call's draws start from (seed, call number), so a run's requests
 * stay the same when timing changes what earlier calls achieved.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A fuzzing test's harness timeout is 600 s; the run stops in time for
 * the checks after it. Longer: more runs, each with its own seed. */
#define FUZZ_MAX_SECONDS	540

struct fuzz {
	uint64_t seed;			/* what the run started from */
	uint64_t state;			/* splitmix64 state */
	unsigned long calls;		/* calls made so far */
	unsigned long max_calls;	/* budget: calls */
	double deadline_ms;		/* budget: now_ms() at which to stop */
};

/* Seed (FUZZ_SEED or the clock) and budget (the environment, else the
 * defaults given); prints "# NAME: seed N, at most C calls in S s". */
void fuzz_init(struct fuzz *f, const char *name, unsigned long calls, unsigned int seconds);
/* The same with the budget given, whatever FUZZ_CALLS and FUZZ_SECONDS say:
 * for a test that only wants replayable random draws (vfio_kill's kill
 * points, whose count is KILL_TRIALS). */
void fuzz_init_fixed(struct fuzz *f, const char *name, unsigned long calls, unsigned int seconds);
/* Whether the budget has room for one more call (and counts it). */
bool fuzz_next_call(struct fuzz *f);
/* A uniformly random 64-bit value. */
uint64_t fuzz_u64(struct fuzz *f);
/* A random value in [0, n); 0 when n is 0. */
uint64_t fuzz_below(struct fuzz *f, uint64_t n);
/* One of the n values v, at random. */
uint64_t fuzz_pick(struct fuzz *f, const uint64_t *v, size_t n);
#define FUZZ_PICK(f, ...) \
	fuzz_pick((f), (const uint64_t[]){ __VA_ARGS__ }, \
		  sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))
/* Fill len bytes with random ones. */
void fuzz_fill(struct fuzz *f, void *p, size_t len);

#endif /* FUZZ_H */
