/* fp16-accumulation GEMM (recipe fp16acc16 on the cpu backend). The emulation rounds every partial
 * sum to fp16, so it cannot be handed to a BLAS; the scalar loop in double took 3.6 s for one
 * 128x4096x4096 call, most of the default run. The vectorized kernel gives the same bits:
 *
 * - A and B hold fp16 values, so a product has at most 22 significant bits and lies between
 *   2^-48 and 2^32 in magnitude: it is exact in float32 as in double.
 * - The reference adds in double, where acc + product is exact for every finite fp16 result (a span
 *   of at most 2^15..2^-48 is 64 bits only when the sum overflows fp16 anyway), then rounds to fp16
 *   with ties to even. So the result is RNE_fp16(exact sum).
 * - In float32 the sum may be inexact, so it is rounded to odd: the odd one of the sum rounded down
 *   and rounded up (AVX-512: embedded rounding; AVX2: MXCSR rounding down, and rounding up as the
 *   negation of the negated sum rounded down). Rounding to odd at 24 bits and then
 *   to nearest at 11 bits (13 >= 2 extra bits, and fp16's grid, subnormals included, is a coarsening
 *   of float32's in this range) equals rounding the exact value to nearest once (Boldo & Melquiond,
 *   "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd", 2008).
 *   The rounding to fp16 is F16C's vcvtps2ph (RNE, subnormals, overflow to inf).
 * - The reference's rounding gives +0 for every sum that rounds to zero; vcvtps2ph keeps the sign,
 *   so -0 is turned into +0 when storing. NaN and inf propagate alike (the two roundings of an
 *   infinite sum are equal, of a NaN unordered: the sum itself is kept).
 * tests/test_fp16acc.c checks bit identity against the reference on random and adversarial inputs. */
#include "cpu_gemm_fp16acc.h"
#include "sysinfo.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The reference's Veltkamp split is exact only without contraction into FMA (t - (t - x) with t = x*s
 * fused is not a split): ISO C mode keeps GCC from contracting; clang contracts within an expression
 * by default, so say it here too. The vector kernels are exact either way (every product is exact). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define PRECIS_FP16ACC_X86 1
#else
#define PRECIS_FP16ACC_X86 0
#endif

/* Rounds a double to the nearest fp16 value (RNE, subnormals kept, overflow to inf) in double.
 * Exact: Veltkamp splitting for normal values, a fixed quantum of 2^-24 in the subnormal range.
 * Infinity passes through: Veltkamp's split of inf is inf - inf = NaN, which turned an overflowed
 * partial sum into NaN at the next step (fp16 hardware keeps inf + finite = inf). */
static inline double round_to_f16(double x) {
  if (isinf(x)) return x;
  double ax = fabs(x);
  double r;
  if (ax < 0x1p-14) {
    const double magic = 0x1.8p28; /* 1.5 * 2^52 * 2^-24: adding it rounds to a multiple of 2^-24 */
    r = (x + magic) - magic;
  } else {
    const double split = 0x1p42 + 1.0; /* keeps 53 - 42 = 11 significant bits */
    double t = x * split;
    r = t - (t - x);
  }
  return fabs(r) > 65504.0 ? copysign(INFINITY, x) : r;
}

void precis_gemm_fp16acc_reference(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                                   double *acc) {
  for (size_t i = 0; i < rows; i++) {
    for (size_t j = 0; j < n; j++) acc[j] = 0.0;
    for (size_t p = 0; p < k; p++) {
      double aip = a[i * k + p];
      const float *brow = b + p * n;
      for (size_t j = 0; j < n; j++) acc[j] = round_to_f16(acc[j] + aip * (double)brow[j]);
    }
    for (size_t j = 0; j < n; j++) c[i * n + j] = (float)acc[j];
  }
}

#if PRECIS_FP16ACC_X86

/* Rows per block: 4, times two vectors of columns: 8 independent accumulator chains hide the latency
 * of one update (tens of cycles through the conversions). */
#define BLOCK_ROWS 4

/* The sign of a zero partial sum never changes a later nonzero one (x + ±0 = x), and the reference
 * never produces -0, so the kernels fix the sign once, when storing (adding +0 turns -0 into +0). */

/* ---- AVX2 + F16C: the rounding to odd from the two directed roundings of the sum ----
 * Of RD(x) and RU(x), equal when x is exact and adjacent floats otherwise, the odd one is RO(x).
 * AVX2 has no per-instruction rounding, so the block runs with MXCSR rounding down and gets RU(x)
 * as -RD(-x): the negated product (-a)*b is exact like a*b. */

#define TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define TILE_AVX2 16

/* One step acc = RNE_fp16(acc + prod) for 8 lanes, under MXCSR rounding down. hi is taken only where
 * lo < hi (inexact: they are adjacent) and lo is even; equal or unordered (NaN), lo is the IEEE sum. */
static inline TARGET_AVX2 __m256 step_avx2(__m256 acc, __m256 prod, __m256 neg_prod) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 lo = _mm256_add_ps(acc, prod);
  __m256 hi = _mm256_xor_ps(_mm256_add_ps(_mm256_xor_ps(acc, sign), neg_prod), sign);
  __m256 lo_odd = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(lo), 31));
  __m256 take_hi = _mm256_andnot_ps(lo_odd, _mm256_cmp_ps(lo, hi, _CMP_LT_OQ));
  __m256 odd = _mm256_blendv_ps(lo, hi, take_hi);
  /* The conversion's rounding comes from its immediate (RNE), not from MXCSR. */
  return _mm256_cvtph_ps(_mm256_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* -0 -> +0 by the sign bit, whatever the rounding mode (an addition of +0 gives -0 rounding down). */
static inline TARGET_AVX2 __m256 positive_zero_avx2(__m256 x) {
  __m256 zero_sign = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ), _mm256_set1_ps(-0.0f));
  return _mm256_andnot_ps(zero_sign, x);
}

/* Lanes [0, width) of a vector are live; a masked load reads zeros elsewhere (and never past the row). */
static inline TARGET_AVX2 __m256i lanes_avx2(size_t width) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(width > 8 ? 8 : width)), index);
}

/* One block of `nr` (1..4) rows by one tile of `width` (1..16) columns. `bp` walks the tile's column
 * of B, `b_stride` floats from one row to the next. always_inline with constant nr and full, so that
 * the accumulators stay in registers. */
static inline __attribute__((always_inline)) TARGET_AVX2 void
block_avx2(const float *a, const float *bp, size_t b_stride, float *c, size_t n, size_t k, size_t width, int nr,
           int full) {
  __m256 acc[BLOCK_ROWS][2];
  for (int r = 0; r < nr; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  __m256i mask0 = _mm256_set1_epi32(-1), mask1 = mask0;
  if (!full) {
    mask0 = lanes_avx2(width);
    mask1 = lanes_avx2(width > 8 ? width - 8 : 0);
  }
  /* Rounding down for the loop only. The empty asm statements keep the compiler from moving the
   * loop's loads above the switch, or its last additions below the switch back. */
  const unsigned saved_csr = _mm_getcsr();
  _mm_setcsr((saved_csr & ~(unsigned)_MM_ROUND_MASK) | _MM_ROUND_DOWN);
  __asm__ volatile("" ::: "memory");
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (size_t p = 0; p < k; p++, bp += b_stride) {
    __m256 b0, b1;
    if (full) {
      b0 = _mm256_loadu_ps(bp);
      b1 = _mm256_loadu_ps(bp + 8);
    } else {
      b0 = _mm256_maskload_ps(bp, mask0);
      b1 = width > 8 ? _mm256_maskload_ps(bp + 8, mask1) : _mm256_setzero_ps();
    }
    for (int r = 0; r < nr; r++) {
      __m256 ar = _mm256_broadcast_ss(a + (size_t)r * k + p), neg_ar = _mm256_xor_ps(ar, sign);
      acc[r][0] = step_avx2(acc[r][0], _mm256_mul_ps(ar, b0), _mm256_mul_ps(neg_ar, b0));
      acc[r][1] = step_avx2(acc[r][1], _mm256_mul_ps(ar, b1), _mm256_mul_ps(neg_ar, b1));
    }
  }
  for (int r = 0; r < nr; r++) __asm__ volatile("" : "+x"(acc[r][0]), "+x"(acc[r][1]));
  _mm_setcsr(saved_csr);
  __asm__ volatile("" ::: "memory");
  for (int r = 0; r < nr; r++) {
    float *cr = c + (size_t)r * n;
    __m256 c0 = positive_zero_avx2(acc[r][0]), c1 = positive_zero_avx2(acc[r][1]);
    if (full) {
      _mm256_storeu_ps(cr, c0);
      _mm256_storeu_ps(cr + 8, c1);
    } else {
      _mm256_maskstore_ps(cr, mask0, c0);
      if (width > 8) _mm256_maskstore_ps(cr + 8, mask1, c1);
    }
  }
}

/* ---- AVX-512F: the rounding to odd from the two directed roundings of the sum ----
 * Of RD(x) and RU(x), equal when x is exact and adjacent floats otherwise, the odd one is RO(x);
 * AVX-512's embedded rounding gives both without touching MXCSR. 5 instructions per 16 lanes. */

#define TARGET_AVX512 __attribute__((target("avx512f")))
#define TILE_AVX512 32

static inline TARGET_AVX512 __m512 step_avx512(__m512 acc, __m512 prod) {
  __m512 down = _mm512_add_round_ps(acc, prod, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 up = _mm512_add_round_ps(acc, prod, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
  __mmask16 down_is_odd = _mm512_test_epi32_mask(_mm512_castps_si512(down), _mm512_set1_epi32(1));
  __m512 odd = _mm512_mask_blend_ps(down_is_odd, up, down);
  return _mm512_cvtph_ps(_mm512_cvtps_ph(odd, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static inline __attribute__((always_inline)) TARGET_AVX512 void
block_avx512(const float *a, const float *bp, size_t b_stride, float *c, size_t n, size_t k, size_t width, int nr,
             int full) {
  __m512 acc[BLOCK_ROWS][2];
  for (int r = 0; r < nr; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  __mmask16 mask0 = 0xffff, mask1 = 0xffff;
  if (!full) {
    mask0 = (__mmask16)(width >= 16 ? 0xffffu : (1u << width) - 1u);
    mask1 = (__mmask16)(width <= 16 ? 0u : (1u << (width - 16)) - 1u);
  }
  for (size_t p = 0; p < k; p++, bp += b_stride) {
    __m512 b0, b1;
    if (full) {
      b0 = _mm512_loadu_ps(bp);
      b1 = _mm512_loadu_ps(bp + 16);
    } else {
      b0 = _mm512_maskz_loadu_ps(mask0, bp);
      b1 = _mm512_maskz_loadu_ps(mask1, bp + 16);
    }
    for (int r = 0; r < nr; r++) {
      __m512 ar = _mm512_set1_ps(a[(size_t)r * k + p]);
      acc[r][0] = step_avx512(acc[r][0], _mm512_mul_ps(ar, b0));
      acc[r][1] = step_avx512(acc[r][1], _mm512_mul_ps(ar, b1));
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  for (int r = 0; r < nr; r++) {
    float *cr = c + (size_t)r * n;
    __m512 c0 = _mm512_add_ps(acc[r][0], zero), c1 = _mm512_add_ps(acc[r][1], zero);
    if (full) {
      _mm512_storeu_ps(cr, c0);
      _mm512_storeu_ps(cr + 16, c1);
    } else {
      _mm512_mask_storeu_ps(cr, mask0, c0);
      _mm512_mask_storeu_ps(cr + 16, mask1, c1);
    }
  }
}

/* Copies one tile's column of B (k x tile floats) into `packed`: read in place, each step of k lands
 * on another page of B (n floats apart), and the TLB misses cost more than the arithmetic. The
 * packed column stays in cache across the row blocks. */
static void pack_tile(const float *b, size_t n, size_t k, size_t col, size_t tile, float *packed) {
  for (size_t p = 0; p < k; p++) memcpy(packed + p * tile, b + p * n + col, tile * sizeof *packed);
}

/* Rows [row0, row1) of C, tile by tile. Full tiles read B packed when `packed` is given; the last,
 * partial tile reads it in place through masks. */
#define FP16ACC_ROWS(name, target, tile, block)                                                            \
  static target void name(const float *a, const float *b, float *c, size_t row0, size_t row1, size_t n, size_t k, \
                          float *packed) {                                                                  \
    for (size_t col = 0; col < n; col += (tile)) {                                                          \
      size_t width = n - col < (tile) ? n - col : (tile);                                                   \
      const float *bp = b + col;                                                                            \
      size_t stride = n;                                                                                    \
      if (packed && width == (tile)) {                                                                      \
        pack_tile(b, n, k, col, (tile), packed);                                                            \
        bp = packed;                                                                                        \
        stride = (tile);                                                                                    \
      }                                                                                                     \
      size_t i = row0;                                                                                      \
      if (width == (tile)) {                                                                                \
        for (; i + BLOCK_ROWS <= row1; i += BLOCK_ROWS)                                                     \
          block(a + i * k, bp, stride, c + i * n + col, n, k, width, BLOCK_ROWS, 1);                        \
        for (; i < row1; i++) block(a + i * k, bp, stride, c + i * n + col, n, k, width, 1, 1);             \
      } else {                                                                                              \
        for (; i + BLOCK_ROWS <= row1; i += BLOCK_ROWS)                                                     \
          block(a + i * k, bp, stride, c + i * n + col, n, k, width, BLOCK_ROWS, 0);                        \
        for (; i < row1; i++) block(a + i * k, bp, stride, c + i * n + col, n, k, width, 1, 0);             \
      }                                                                                                     \
    }                                                                                                       \
  }

FP16ACC_ROWS(rows_avx2, TARGET_AVX2, TILE_AVX2, block_avx2)
FP16ACC_ROWS(rows_avx512, TARGET_AVX512, TILE_AVX512, block_avx512)

typedef struct fp16acc_job {
  const float *a, *b;
  float *c;
  size_t row0, row1, n, k;
  precis_fp16acc_path path;
} fp16acc_job;

/* Each thread packs its own copy of B's tile; without memory for it, B is read in place (slower, same
 * results). */
static void *fp16acc_thread(void *arg) {
  const fp16acc_job *job = arg;
  size_t tile = job->path == PRECIS_FP16ACC_AVX512 ? TILE_AVX512 : TILE_AVX2;
  float *packed = job->k <= SIZE_MAX / (tile * sizeof(float)) ? malloc(job->k * tile * sizeof(float)) : NULL;
  if (job->path == PRECIS_FP16ACC_AVX512) rows_avx512(job->a, job->b, job->c, job->row0, job->row1, job->n, job->k, packed);
  else rows_avx2(job->a, job->b, job->c, job->row0, job->row1, job->n, job->k, packed);
  free(packed);
  return NULL;
}

/* Threads over blocks of rows, one per online CPU, for products large enough to pay for them (about
 * 50 us to start a thread against ~1 ns per element update). A thread that cannot be started leaves
 * its rows to the calling thread. */
#define FP16ACC_MAX_THREADS 64
#define FP16ACC_MIN_WORK_PER_THREAD (1u << 22)

static void fp16acc_vector(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                           precis_fp16acc_path path) {
  size_t threads = precis_online_cpus();
  if (threads > FP16ACC_MAX_THREADS) threads = FP16ACC_MAX_THREADS;
  double work = (double)rows * (double)n * (double)k;
  while (threads > 1 && work / (double)threads < (double)FP16ACC_MIN_WORK_PER_THREAD) threads--;
  size_t blocks = (rows + BLOCK_ROWS - 1) / BLOCK_ROWS;
  if (threads > blocks) threads = blocks;
  if (threads <= 1) {
    fp16acc_job whole = {a, b, c, 0, rows, n, k, path};
    fp16acc_thread(&whole);
    return;
  }
  fp16acc_job jobs[FP16ACC_MAX_THREADS];
  pthread_t ids[FP16ACC_MAX_THREADS];
  bool started[FP16ACC_MAX_THREADS];
  for (size_t t = 0; t < threads; t++) {
    size_t first = blocks * t / threads, last = blocks * (t + 1) / threads;
    jobs[t] = (fp16acc_job){a, b, c, first * BLOCK_ROWS, last * BLOCK_ROWS < rows ? last * BLOCK_ROWS : rows, n, k, path};
    started[t] = t > 0 && pthread_create(&ids[t], NULL, fp16acc_thread, &jobs[t]) == 0;
  }
  for (size_t t = 0; t < threads; t++)
    if (!started[t]) fp16acc_thread(&jobs[t]);
  for (size_t t = 1; t < threads; t++)
    if (started[t]) pthread_join(ids[t], NULL);
}

#endif /* PRECIS_FP16ACC_X86 */

const char *precis_fp16acc_path_name(precis_fp16acc_path path) {
  return path == PRECIS_FP16ACC_AVX512 ? "avx512" : path == PRECIS_FP16ACC_AVX2 ? "avx2" : "scalar";
}

#if PRECIS_FP16ACC_X86
/* CPUID rather than __builtin_cpu_supports, which clang 14 (the fuzzing build) lacks for "f16c": the
 * instructions (leaf 1 ECX: F16C, OSXSAVE; leaf 7 EBX: AVX2, AVX-512F) and the OS saving the YMM
 * (XCR0 bits 1, 2) and ZMM (bits 5, 6, 7) state. */
static precis_fp16acc_path cpu_best_path(void) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return PRECIS_FP16ACC_SCALAR;
  bool f16c = (ecx & bit_F16C) != 0, osxsave = (ecx & bit_OSXSAVE) != 0;
  if (!osxsave || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return PRECIS_FP16ACC_SCALAR;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  (void)xcr0_hi;
  bool ymm = (xcr0_lo & 0x6u) == 0x6u, zmm = ymm && (xcr0_lo & 0xe0u) == 0xe0u;
  if (zmm && (ebx & bit_AVX512F)) return PRECIS_FP16ACC_AVX512;
  if (ymm && f16c && (ebx & bit_AVX2)) return PRECIS_FP16ACC_AVX2;
  return PRECIS_FP16ACC_SCALAR;
}
#endif

precis_fp16acc_path precis_gemm_fp16acc_path(void) {
  precis_fp16acc_path best = PRECIS_FP16ACC_SCALAR;
#if PRECIS_FP16ACC_X86
  best = cpu_best_path();
#endif
  const char *cap = getenv("PRECIS_FP16ACC_PATH");
  if (cap) {
    for (int p = PRECIS_FP16ACC_SCALAR; p <= PRECIS_FP16ACC_AVX512; p++)
      if (strcmp(cap, precis_fp16acc_path_name((precis_fp16acc_path)p)) == 0 && (precis_fp16acc_path)p < best)
        best = (precis_fp16acc_path)p;
  }
  return best;
}

void precis_gemm_fp16acc(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k, double *scratch) {
  precis_fp16acc_path path = precis_gemm_fp16acc_path();
#if PRECIS_FP16ACC_X86
  if (path != PRECIS_FP16ACC_SCALAR) {
    fp16acc_vector(a, b, c, rows, n, k, path);
    return;
  }
#endif
  precis_gemm_fp16acc_reference(a, b, c, rows, n, k, scratch);
}
