/* Counter-based random numbers for dataset generation (DESIGN §4: the same suite and seed give
 * byte-identical inputs on any machine).
 *
 * Generator: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
 * Every value is a pure function of (key, counter): the key comes from the seed and the workload
 * name, the counter from (element index, stream, attempt). Nothing depends on thread count or on
 * the order in which values are drawn.
 *
 * Transcendentals: the distributions need log and exp. libm's are not required by C to be
 * correctly rounded and differ between libm versions in the last bit, so this module carries its
 * own: range reduction by frexp/ldexp (exact) and fixed polynomials evaluated with + - * / only,
 * which IEEE 754 rounds identically everywhere. Floating-point contraction (FMA) is disabled for
 * the files that use them, so a compiler cannot change the rounding either. sqrt is IEEE-exact. */
#ifndef PRECIS_RNG_H
#define PRECIS_RNG_H

#include <stdint.h>

typedef struct precis_rng_key {
  uint32_t k[2];
} precis_rng_key;

/* One Philox4x32-10 block. */
void precis_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* The key for one workload: a 64-bit mix of the seed and of the workload's name (so that adding,
 * removing or reordering workloads in a suite never changes the data of the others). */
precis_rng_key precis_rng_key_for(uint64_t seed, const char *name);

/* Block `attempt` for element `index` of `stream`. */
static inline void precis_rng_block(precis_rng_key key, uint32_t stream, uint64_t index, uint32_t attempt,
                                    uint32_t out[4]) {
  const uint32_t counter[4] = {(uint32_t)index, (uint32_t)(index >> 32), stream, attempt};
  precis_philox4x32_10(counter, key.k, out);
}

/* A double in [0, 1) with 53 random bits from two 32-bit words. */
static inline double precis_u53(uint32_t hi, uint32_t lo) {
  uint64_t bits = ((uint64_t)hi << 21) ^ (uint64_t)(lo >> 11);
  return (double)bits * 0x1p-53;
}

/* An integer in [0, range) from 64 random bits (Lemire's multiply-shift; bias < range/2^64). */
static inline uint64_t precis_rng_below(uint32_t hi, uint32_t lo, uint64_t range) {
  uint64_t x = ((uint64_t)hi << 32) | lo;
  return (uint64_t)(((unsigned __int128)x * range) >> 64);
}

/* Reproducible natural logarithm (x > 0, finite) and exponential; relative error below 1e-15. */
double precis_rng_log(double x);
double precis_rng_exp(double x);

/* A pair of independent N(0,1) values for pair index `index` of `stream` (Marsaglia's polar
 * method: only +, -, *, /, sqrt and precis_rng_log, hence bit-reproducible). */
void precis_rng_normal_pair(precis_rng_key key, uint32_t stream, uint64_t index, double out[2]);

#endif
