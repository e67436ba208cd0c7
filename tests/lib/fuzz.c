// SPDX-License-Identifier: GPL-2.0
/*
 * fuzz.c - see fuzz.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz.h"
#include "util.h"

void fuzz_init(struct fuzz *f, const char *name, unsigned long calls, unsigned int seconds)
{
	fuzz_init_fixed(f, name, env_ulong("FUZZ_CALLS", calls), env_ulong("FUZZ_SECONDS", seconds));
}

void fuzz_init_fixed(struct fuzz *f, const char *name, unsigned long calls, unsigned int seconds)
{
	struct timespec ts;
	unsigned long secs = seconds;

	clock_gettime(CLOCK_REALTIME, &ts);
	f->seed = env_ulong("FUZZ_SEED", (uint64_t)ts.tv_sec * 1000000007ull + ts.tv_nsec);
	f->state = f->seed;
	f->calls = 0;
	f->max_calls = calls;
	if (secs > FUZZ_MAX_SECONDS)
		secs = FUZZ_MAX_SECONDS;
	f->deadline_ms = now_ms() + secs * 1000.0;
	printf("# %s: seed %llu (replay: FUZZ_SEED=%llu), at most %lu calls in %lu s\n", name,
	       (unsigned long long)f->seed, (unsigned long long)f->seed, f->max_calls, secs);
	fflush(stdout);
}

bool fuzz_next_call(struct fuzz *f)
{
	if (f->calls >= f->max_calls || now_ms() >= f->deadline_ms)
		return false;
	f->calls++;
	f->state = f->seed ^ (f->calls * 0xd1b54a32d192ed03ull);
	return true;
}

/* splitmix64: small, fast, and every seed gives a full-period sequence. */
uint64_t fuzz_u64(struct fuzz *f)
{
	uint64_t z = (f->state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t fuzz_below(struct fuzz *f, uint64_t n)
{
	return n ? fuzz_u64(f) % n : 0;
}

uint64_t fuzz_pick(struct fuzz *f, const uint64_t *v, size_t n)
{
	return v[fuzz_below(f, n)];
}

void fuzz_fill(struct fuzz *f, void *p, size_t len)
{
	uint8_t *b = p;
	uint64_t r = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!(i % 8))
			r = fuzz_u64(f);
		b[i] = r >> (8 * (i % 8));
	}
}
