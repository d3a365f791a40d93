/* The tensor cores' fp32-accumulating MMA (cpu_gemm_mma.h) on the CPU. The model is MMA-Sim's
 * (arXiv 2511.10909, validated bitwise on Ampere, Ada, Hopper, Blackwell and RTX Blackwell): one
 * fused dot-add aligns the exact products and the accumulator to the largest exponent among them,
 * truncates each below 2^(emax - fraction_bits), sums exactly and writes an fp32 rounded toward
 * zero. The reference follows that text one output at a time. The AVX2 kernel gives the same bits
 * with doubles, four outputs per vector:
 *
 * - 2^(ea + eb) is the product of two exact powers of two Pa = 2^max(ilogb a, emin_a) and Pb (0 for
 *   a zero operand: it never decides the maximum), so M = max(Pc, max_p Pa·Pb) = 2^emax exactly,
 *   Pc = 2^max(ilogb d, -126) taken from d's exponent bits (0 for d = 0).
 * - scale = 2^(fraction_bits - emax) is built from M's bits; a·b (at most 24 + 24 bits) and
 *   a·b·scale are exact in double, vroundpd truncates toward zero, and the truncated terms (each
 *   below 2^(fraction_bits + 2), at most 65 of them) sum exactly below 2^53.
 * - the sum times 2^(emax - fraction_bits) is exact; clearing its low 29 significand bits rounds it
 *   toward zero to fp32's 24 bits, and below 2^-126 truncation at 2^-149 keeps fp32's subnormal
 *   grid, as MMA-Sim's normalisation does.
 * The kernel runs only when that holds everywhere: every operand finite and max|a|·max|b|·k below
 * 2^126 (no partial sum reaches fp32's overflow); otherwise the reference runs (inf and NaN as
 * MMA-Sim gives them). tests/test_mma_chain.c checks the two paths bit for bit, and
 * tests/venv/test_mma_oracle.py the cpu backend's rows against an independent NumPy model. */
#include "cpu_gemm_mma.h"
#include "sysinfo.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define PRECIS_MMA_X86 1
#else
#define PRECIS_MMA_X86 0
#endif

/* The exponent a term aligns at: its own, or its format's smallest normal one when subnormal. */
static int align_exp(double x, int emin) {
  int e = ilogb(x);
  return e < emin ? emin : e;
}

/* v rounded toward zero to fp32 (24 significant bits; below 2^-126 multiples of 2^-149). */
static double rz_f32(double v) {
  if (v == 0) return 0.0;
  int e = align_exp(v, -126);
  double q = ldexp(1.0, e - 23);
  return trunc(v / q) * q;
}

/* One output's chain: row a_row (k values) against the column of B at b_col, `b_stride` apart. */
static float mma_chain_one(const float *a_row, const float *b_col, size_t b_stride, size_t k,
                           const precis_mma_shape *shape) {
  const int fb = shape->fraction_bits;
  const size_t blk = shape->block > 0 ? (size_t)shape->block : 1;
  float d = 0.0f;
  for (size_t p0 = 0; p0 < k; p0 += blk) {
    size_t p1 = k - p0 < blk ? k : p0 + blk;
    double fsum = d;
    int emax = INT_MIN;
    if (d != 0) emax = align_exp(d, -126);
    for (size_t p = p0; p < p1; p++) {
      double x = a_row[p], y = b_col[p * b_stride];
      fsum += x * y;
      if (x != 0 && y != 0) {
        int e = align_exp(x, shape->emin_a) + align_exp(y, shape->emin_b);
        if (e > emax) emax = e;
      }
    }
    if (!isfinite(fsum)) { /* inf or NaN operands: the fp64 sum, as MMA-Sim returns it */
      d = (float)fsum;
      continue;
    }
    if (emax == INT_MIN) { /* every term zero */
      d = 0.0f;
      continue;
    }
    double scale = ldexp(1.0, fb - emax);
    double s = trunc((double)d * scale);
    for (size_t p = p0; p < p1; p++) s += trunc((double)a_row[p] * (double)b_col[p * b_stride] * scale);
    d = (float)rz_f32(s / scale); /* beyond fp32's range: inf */
  }
  return d;
}

void precis_gemm_mma_reference(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                               const precis_mma_shape *shape) {
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < n; j++) c[i * n + j] = mma_chain_one(a + i * k, b + j, n, k, shape);
}

#if PRECIS_MMA_X86

#define TARGET_AVX2 __attribute__((target("avx2")))
#define MMA_TILE 8 /* columns per tile: two vectors of four doubles */
#define MMA_ROWS 2 /* rows per register block */

/* 2^max(ilogb x, emin) as a double, 0 for x = 0 (finite x), from x's bits (emin >= -126). */
static inline double pow2_align(float x, int emin) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) == 0) return 0.0;
  int e = (int)((u >> 23) & 0xffu) - 127; /* -127 for a subnormal: below any emin */
  if (e < emin) e = emin;
  uint64_t bits = (uint64_t)(e + 1023) << 52;
  double p;
  memcpy(&p, &bits, sizeof p);
  return p;
}

/* The fp32 round toward zero of four exact doubles (finite, below 2^128). */
static inline TARGET_AVX2 __m256d rz_f32_avx2(__m256d v) {
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_C(0x7fffffffffffffff)));
  const __m256d keep24 = _mm256_castsi256_pd(_mm256_set1_epi64x((int64_t)UINT64_C(0xffffffffe0000000)));
  __m256d normal = _mm256_and_pd(v, keep24);
  __m256d tiny = _mm256_cmp_pd(_mm256_and_pd(v, abs_mask), _mm256_set1_pd(0x1p-126), _CMP_LT_OQ);
  if (_mm256_movemask_pd(tiny) == 0) return normal;
  __m256d sub = _mm256_mul_pd(_mm256_round_pd(_mm256_mul_pd(v, _mm256_set1_pd(0x1p149)), _MM_FROUND_TO_ZERO |
                                                                                            _MM_FROUND_NO_EXC),
                              _mm256_set1_pd(0x1p-149));
  return _mm256_blendv_pd(normal, sub, tiny);
}

/* Pc = 2^max(ilogb d, -126) from d's exponent bits, 0 for d = 0. */
static inline TARGET_AVX2 __m256d pow2_of_acc_avx2(__m256d d) {
  const __m256d exp_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_C(0x7ff0000000000000)));
  __m256d p = _mm256_max_pd(_mm256_and_pd(d, exp_mask), _mm256_set1_pd(0x1p-126));
  return _mm256_and_pd(p, _mm256_cmp_pd(d, _mm256_setzero_pd(), _CMP_NEQ_OQ));
}

/* `nr` (1..2) rows by one tile of 8 columns over `len` products of k (a multiple of the block).
 * `ap` holds the rows' (a, Pa) pairs p-major: ap[(p * nr + r) * 2 + {0, 1}]; `bp` and `pb` the
 * tile's B values and Pb, 8 per p, `bstride` apart; `d` the rows' accumulators (fp32 values in doubles), `dstride`
 * apart, read at the start and written back. always_inline with a constant nr, so that the state
 * stays in registers. */
static inline __attribute__((always_inline)) TARGET_AVX2 void
block_avx2(const double *ap, const double *bp, const double *pb, size_t bstride, double *dp, size_t dstride, size_t len,
           size_t blk, int fb, int nr) {
  __m256d d[MMA_ROWS][2];
  for (int r = 0; r < nr; r++)
    for (int v = 0; v < 2; v++) d[r][v] = _mm256_loadu_pd(dp + (size_t)r * dstride + (size_t)v * 4);
  const __m256d floor_m = _mm256_set1_pd(0x1p-600); /* every term zero: any scale, the sum is 0 */
  /* Exponent-field arithmetic on the bit patterns, modulo 2^64 (2046 + fb does not fit the 11-bit
   * field; the subtraction below brings it back): shifted unsigned, as a signed shift would overflow. */
  const __m256i scale_bias = _mm256_set1_epi64x((int64_t)((uint64_t)(2046 + fb) << 52));
  const __m256d inv_fb = _mm256_set1_pd(ldexp(1.0, -fb));
  for (size_t p0 = 0; p0 < len; p0 += blk) {
    __m256d m[MMA_ROWS][2];
    for (int r = 0; r < nr; r++)
      for (int v = 0; v < 2; v++) m[r][v] = _mm256_max_pd(pow2_of_acc_avx2(d[r][v]), floor_m);
    for (size_t p = p0; p < p0 + blk; p++) {
      __m256d pb0 = _mm256_loadu_pd(pb + p * bstride), pb1 = _mm256_loadu_pd(pb + p * bstride + 4);
      for (int r = 0; r < nr; r++) {
        __m256d pa = _mm256_broadcast_sd(ap + (p * (size_t)nr + (size_t)r) * 2 + 1);
        m[r][0] = _mm256_max_pd(m[r][0], _mm256_mul_pd(pa, pb0));
        m[r][1] = _mm256_max_pd(m[r][1], _mm256_mul_pd(pa, pb1));
      }
    }
    __m256d scale[MMA_ROWS][2], s[MMA_ROWS][2];
    for (int r = 0; r < nr; r++)
      for (int v = 0; v < 2; v++) {
        /* 2^(fb - emax) from M = 2^emax: the biased exponents subtract. */
        scale[r][v] = _mm256_castsi256_pd(_mm256_sub_epi64(scale_bias, _mm256_castpd_si256(m[r][v])));
        s[r][v] = _mm256_round_pd(_mm256_mul_pd(d[r][v], scale[r][v]), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      }
    for (size_t p = p0; p < p0 + blk; p++) {
      __m256d b0 = _mm256_loadu_pd(bp + p * bstride), b1 = _mm256_loadu_pd(bp + p * bstride + 4);
      for (int r = 0; r < nr; r++) {
        __m256d av = _mm256_broadcast_sd(ap + (p * (size_t)nr + (size_t)r) * 2);
        __m256d t0 = _mm256_mul_pd(_mm256_mul_pd(av, b0), scale[r][0]);
        __m256d t1 = _mm256_mul_pd(_mm256_mul_pd(av, b1), scale[r][1]);
        s[r][0] = _mm256_add_pd(s[r][0], _mm256_round_pd(t0, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
        s[r][1] = _mm256_add_pd(s[r][1], _mm256_round_pd(t1, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
      }
    }
    /* s + 0: a sum that is exactly zero is +0 (-0 + +0 under round to nearest), as in the reference;
     * a nonzero one below fp32's smallest subnormal truncates to a zero of its own sign */
    for (int r = 0; r < nr; r++)
      for (int v = 0; v < 2; v++)
        d[r][v] = rz_f32_avx2(
            _mm256_mul_pd(_mm256_add_pd(s[r][v], _mm256_setzero_pd()), _mm256_mul_pd(m[r][v], inv_fb)));
  }
  for (int r = 0; r < nr; r++)
    for (int v = 0; v < 2; v++) _mm256_storeu_pd(dp + (size_t)r * dstride + (size_t)v * 4, d[r][v]);
}

typedef struct mma_job {
  const float *a;
  const double *apack; /* (a, Pa) per row block, p-major (pack_rows) */
  const float *b;
  float *c;
  double *dstate; /* rows x np accumulators */
  size_t rows, col0, col1, n, np, k, kp, kc;
  bool p_major; /* B's chunk p-major (few rows: packing is as costly as the products) else tile-major */
  const precis_mma_shape *shape;
} mma_job;

/* Four values and their 2^max(ilogb x, emin) (0 for x = 0): x as a double keeps its exponent, a
 * subnormal of fp32 included, and the maximum with 2^emin aligns every subnormal of the format. */
static inline TARGET_AVX2 void values_and_pow2_avx2(__m128 x, __m256d pmin, __m256d *value, __m256d *pow2) {
  const __m256d exp_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_C(0x7ff0000000000000)));
  __m256d v = _mm256_cvtps_pd(x);
  *value = v;
  *pow2 = _mm256_and_pd(_mm256_max_pd(_mm256_and_pd(v, exp_mask), pmin),
                        _mm256_cmp_pd(v, _mm256_setzero_pd(), _CMP_NEQ_OQ));
}

/* Rows p0..p0+len of B's columns col0..col1 (a multiple of 8 wide, zero past n and k) as doubles
 * and their Pb, read along B's rows (its pages in order). Tile-major: tile t's 8 values of row p at
 * ((t * len) + p) * 8, each tile's part contiguous for the kernel. p-major (few rows of A, a short
 * chunk): row p's at p * (col1 - col0), the writes in order too. */
static TARGET_AVX2 void pack_chunk(const float *b, size_t n, size_t k, size_t p0, size_t len, size_t col0,
                                   size_t col1, int emin, bool p_major, double *bp, double *pb) {
  const __m256d pmin = _mm256_set1_pd(ldexp(1.0, emin));
  for (size_t p = 0; p < len; p++) {
    const float *row = b + (p0 + p) * n;
    for (size_t col = col0; col < col1; col += 4) {
      __m128 x;
      if (p0 + p < k && col + 4 <= n) x = _mm_loadu_ps(row + col);
      else {
        float tmp[4] = {0, 0, 0, 0};
        for (size_t l = 0; l < 4; l++)
          if (p0 + p < k && col + l < n) tmp[l] = row[col + l];
        x = _mm_loadu_ps(tmp);
      }
      __m256d v, w;
      values_and_pow2_avx2(x, pmin, &v, &w);
      size_t t = (col - col0) / MMA_TILE;
      size_t at = p_major ? p * (col1 - col0) + (col - col0) : (t * len + p) * MMA_TILE + (col - col0) % MMA_TILE;
      _mm256_storeu_pd(bp + at, v);
      _mm256_storeu_pd(pb + at, w);
    }
  }
}

/* Columns [col0, col1) of every row, k in chunks of job->kc products: the chunk of B's columns is
 * packed once (read along B's rows), each 8-column tile of it (16 doubles per p) stays in L1 while
 * every row block goes through it; the accumulators wait in dstate between chunks. */
static TARGET_AVX2 void cols_avx2(const mma_job *job, double *bp, double *pb) {
  const size_t n = job->n, np = job->np, kp = job->kp, blk = (size_t)job->shape->block, rows = job->rows;
  const int fb = job->shape->fraction_bits;
  for (size_t i = 0; i < rows; i++) memset(job->dstate + i * np + job->col0, 0, (job->col1 - job->col0) * sizeof(double));
  for (size_t p0 = 0; p0 < kp; p0 += job->kc) {
    size_t len = kp - p0 < job->kc ? kp - p0 : job->kc;
    pack_chunk(job->b, n, job->k, p0, len, job->col0, job->col1, job->shape->emin_b, job->p_major, bp, pb);
    const size_t bstride = job->p_major ? job->col1 - job->col0 : MMA_TILE;
    for (size_t col = job->col0; col < job->col1; col += MMA_TILE) {
      size_t off = job->p_major ? col - job->col0 : (col - job->col0) * len;
      const double *bt = bp + off, *pt = pb + off;
      for (size_t i = 0; i < rows; i += MMA_ROWS) {
        int nr = rows - i >= MMA_ROWS ? MMA_ROWS : 1;
        const double *ap = job->apack + i * kp * 2 + p0 * (size_t)nr * 2;
        double *dp = job->dstate + i * np + col;
        if (nr == MMA_ROWS) block_avx2(ap, bt, pt, bstride, dp, np, len, blk, fb, MMA_ROWS);
        else block_avx2(ap, bt, pt, bstride, dp, np, len, blk, fb, 1);
      }
    }
  }
  /* every d is an fp32 value, its zero signed as the reference's (block_avx2) */
  size_t end = job->col1 < n ? job->col1 : n;
  for (size_t i = 0; i < rows; i++)
    for (size_t j = job->col0; j < end; j++) job->c[i * n + j] = (float)job->dstate[i * np + j];
}

static void *mma_thread(void *arg) {
  const mma_job *job = arg;
  size_t count = job->kc * (job->col1 - job->col0);
  double *bp = malloc(count * 2 * sizeof(double));
  if (bp) cols_avx2(job, bp, bp + count);
  else { /* no memory for the chunk: the reference on these columns, same bits, none needed */
    size_t end = job->col1 < job->n ? job->col1 : job->n;
    for (size_t i = 0; i < job->rows; i++)
      for (size_t j = job->col0; j < end; j++)
        job->c[i * job->n + j] = mma_chain_one(job->a + i * job->k, job->b + j, job->n, job->k, job->shape);
  }
  free(bp);
  return NULL;
}

/* A's rows as (a, Pa) pairs, p-major within each block of MMA_ROWS rows (the last may hold one),
 * zero past k. */
static void pack_rows(const float *a, size_t rows, size_t k, size_t kp, int emin, double *apack) {
  for (size_t i = 0; i < rows; i += MMA_ROWS) {
    size_t nr = rows - i >= MMA_ROWS ? MMA_ROWS : 1;
    double *blockp = apack + i * kp * 2;
    for (size_t p = 0; p < kp; p++)
      for (size_t r = 0; r < nr; r++) {
        float x = p < k ? a[(i + r) * k + p] : 0.0f;
        blockp[(p * nr + r) * 2] = x;
        blockp[(p * nr + r) * 2 + 1] = pow2_align(x, emin);
      }
  }
}

/* The kernel's preconditions (header comment): finite operands, max|a|·max|b|·k < 2^126. */
static bool vector_safe(const float *a, size_t na, const float *b, size_t nb, size_t k) {
  float ma = 0, mb = 0;
  for (size_t i = 0; i < na; i++) {
    float x = fabsf(a[i]);
    if (!(x <= 3.4028235e38f)) return false; /* inf or NaN */
    ma = x > ma ? x : ma;
  }
  for (size_t i = 0; i < nb; i++) {
    float x = fabsf(b[i]);
    if (!(x <= 3.4028235e38f)) return false;
    mb = x > mb ? x : mb;
  }
  return (double)ma * (double)mb * (double)(k + 1) < 0x1p126;
}

/* Threads over blocks of columns, one per online CPU, for products large enough to pay for them. */
#define MMA_MAX_THREADS 64
#define MMA_MIN_WORK_PER_THREAD (1u << 22)

static bool mma_vector(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                       const precis_mma_shape *shape) {
  size_t blk = (size_t)shape->block, kp = (k + blk - 1) / blk * blk;
  if (kp > SIZE_MAX / (rows * 2 * sizeof(double) + 1)) return false;
  size_t np = (n + MMA_TILE - 1) / MMA_TILE * MMA_TILE;
  double *apack = malloc(rows * kp * 2 * sizeof(double)), *dstate = malloc(rows * np * sizeof(double));
  if (!apack || !dstate) {
    free(apack);
    free(dstate);
    return false;
  }
  pack_rows(a, rows, k, kp, shape->emin_a, apack);
  size_t threads = precis_online_cpus();
  if (threads > MMA_MAX_THREADS) threads = MMA_MAX_THREADS;
  double work = (double)rows * (double)n * (double)k;
  while (threads > 1 && work / (double)threads < (double)MMA_MIN_WORK_PER_THREAD) threads--;
  size_t tiles = np / MMA_TILE;
  if (threads > tiles) threads = tiles;
  if (threads < 1) threads = 1;
  /* k-chunk: A's chunk within about 512 KiB (16 bytes per element; it stays in L2 while the tiles
   * go by), a tile of B's (128 bytes per p) in L1; at least one block, at most 256 products. */
  size_t kc = ((size_t)1 << 19) / (16 * rows) / blk * blk;
  if (kc < blk) kc = blk;
  if (kc > 256) kc = 256 / blk * blk;
  /* Few rows: B's chunk p-major and short (each p a page: 32 of them per chunk, not to thrash the TLB). */
  bool p_major = rows < 8;
  if (p_major) kc = blk >= 16 ? blk : 16 / blk * blk;
  if (kc > kp) kc = kp;
  mma_job jobs[MMA_MAX_THREADS];
  pthread_t ids[MMA_MAX_THREADS];
  bool started[MMA_MAX_THREADS];
  for (size_t t = 0; t < threads; t++) {
    size_t first = tiles * t / threads, last = tiles * (t + 1) / threads;
    jobs[t] = (mma_job){a, apack, b, c, dstate, rows, first * MMA_TILE, last * MMA_TILE, n, np, k, kp, kc, p_major, shape};
    started[t] = t > 0 && pthread_create(&ids[t], NULL, mma_thread, &jobs[t]) == 0;
  }
  for (size_t t = 0; t < threads; t++)
    if (!started[t]) mma_thread(&jobs[t]);
  for (size_t t = 1; t < threads; t++)
    if (started[t]) pthread_join(ids[t], NULL);
  free(apack);
  free(dstate);
  return true;
}

/* ---- The fp32 kernel: eight outputs per vector, exponents as int16, truncated terms as int32 ----
 *
 * The same arithmetic as block_avx2 above, arranged so that a product costs about what it costs a
 * BLAS micro-kernel: one fp32 multiply, one integer add, one truncating conversion and one integer
 * add per eight products, plus an int16 add and max per sixteen for the block's exponent, and the
 * accumulator's update per block in fp32 too. Exact where f32_safe (below) holds, which it checks on
 * the operands once per call. EA = max(ilogb a, emin_a), EB likewise, E = EA + EB, Pmax and Pmin
 * the largest and smallest E of nonzero operands (over all of A and all of B), fb the fraction bits.
 *
 * - Scaled domain. a' = a·2^sA, b' = b·2^sB, d' = d·2^(sA+sB) with sA = -(EAmax + 2),
 *   sB = -(EBmax + 2): every |a'|, |b'| < 1/2, a product t = a'·b' < 1/4, every exponent
 *   E' = E + sA + sB <= -4. Each operand has at most 12 significant bits (its low 12 fraction bits
 *   zero: every fp16, bf16 and tf32 value) and every nonzero t is at least 2^-125 (checked), so t
 *   is exact in fp32. Scaling by a power of two commutes with every step below while values stay
 *   normal, which the bounds here keep.
 * - Exponents. Packed biased: EA' + 127 and EB' (EXP_ZERO for a zero operand, so that a zero
 *   product never decides the maximum), so that the int16 sum is E' + 127, the biased exponent
 *   field of an fp32; emax_f = max(d's exponent field, max_p of the sums), exact integers.
 * - The term. trunc(a·b·2^(fb - emax)) = trunc(t·2^kf), kf = fb + 127 - emax_f. Multiplying by
 *   2^kf is an integer add of kf << 23 to t's bits (t normal, the result normal: kf >= 0 and
 *   t·2^kf < 2^(fb+2)). kf >= 1: f32_safe's bound on k keeps |d'| < k/4 < 2^fb. kf <= 126: the
 *   maximum starts from fb + 1, which only a block whose products are all zero does not pass
 *   (f32_safe: Pmax - Pmin <= 122 - fb, so every nonzero E' + 127 >= fb + 1) — the clamp below —
 *   and a zero t becomes ±2^(kf-127) < 1, which truncates to 0. vcvttps2dq truncates toward zero
 *   exactly (|term| < 2^(fb+2) <= 2^31/blk).
 * - The accumulator. Every nonzero d' is a multiple of the grid 2^(emax' - fb) of the block that
 *   made it, and every such grid is at least 2^-126 (every nonzero E' >= fb - 126, checked): d' is a
 *   multiple of 2^-126, so an fp32 normal (its rounding never meets fp32's subnormal grid). Its term
 *   D = trunc(d'·2^kf) is an int32 (below 2^(fb+1)), with the same clamped kf as the products': the
 *   clamp acts only on a block whose products are all zero, where it puts the grid at 2^-126, of
 *   which d' is a multiple, so D = d'·2^kf exactly, as at the finer grid 2^(e_d - fb) the model
 *   takes, and the block leaves d' as it was. A d' of 0 gives 2^(kf-127) < 1 as a zero t does,
 *   truncated to 0. One shift, kf << 23, serves the products, D and the result's power 2^-kf
 *   (normal: kf <= 126), the last as the bits (127 - kf) << 23. Where S + D fits int32 the sum starts
 *   from D.
 * - The sum. The block's products' terms, each below 2^(fb+2) in magnitude, sum exactly in int32
 *   when blk·2^(fb+2) <= 2^31 (checked: 16·2^27 for sm_90's 25 bits). T = S + D may need 33 bits:
 *   it is split into Th·256 + Tl, Th = (S >> 8) + (D >> 8) (below 2^24: an exact fp32),
 *   Tl = (S & 255) + (D & 255), and one fma under round-toward-zero (MXCSR, set for the call and
 *   restored) gives RZ_f32(T) exactly; times 2^-kf (a normal result: exact) it is the new d',
 *   MMA-Sim's normalisation. T = 0 gives +0, as the reference does. */

#define TARGET_F32 __attribute__((target("avx2,fma")))
#define F32_TILE 16 /* columns per tile: two vectors of eight floats, one of sixteen int16 */
#define F32_ROWS 4  /* rows per register block */
#define F32_MC 128      /* rows per chunk (a multiple of F32_ROWS) */
#define F32_GROUP 256   /* columns packed at a time (a multiple of F32_TILE) */
#define F32_SMALL_GROUP 4096 /* elements of a group packed on the stack */
#define F32_SMALL_CALL 2048  /* elements of packed A and of accumulators kept on the stack */
#define EXP_ZERO (-16000)
#define EXP_ZERO8 (-128) /* the AVX-512 kernel's int8 exponents (block_f32_512) */
#define F32_TILE_512 32

typedef struct f32_params {
  int fb, blk;
  bool split; /* S + D may reach 2^31: summed as Th·256 + Tl */
} f32_params;

/* D = trunc(d'·2^kf): d's bits plus kf << 23 (the comment above), truncated. */
static inline TARGET_F32 __m256i acc_term_avx2(__m256 d, __m256i shift) {
  return _mm256_cvttps_epi32(_mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(d), shift)));
}

/* d' (8 fp32 accumulators, scaled) after one block, shift its kf << 23; MXCSR rounds toward zero.
 * split: s is S, the products' terms, and D is added here; else s is S + D already (the sum
 * started from D). */
static inline TARGET_F32 __m256 block_end_avx2(__m256 d, __m256i s, __m256i shift, bool split) {
  __m256 t;
  if (split) { /* S + D may need 33 bits */
    const __m256i low8 = _mm256_set1_epi32(255), dterm = acc_term_avx2(d, shift);
    __m256i th = _mm256_add_epi32(_mm256_srai_epi32(s, 8), _mm256_srai_epi32(dterm, 8));
    __m256i tl = _mm256_add_epi32(_mm256_and_si256(s, low8), _mm256_and_si256(dterm, low8));
    t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(th), _mm256_set1_ps(256.0f), _mm256_cvtepi32_ps(tl));
  } else { /* S + D below 2^31 (f32_safe): one conversion, rounded toward zero */
    t = _mm256_cvtepi32_ps(s);
  }
  /* times 2^-kf, a normal (kf <= 126): exact, the result a normal or +0 */
  return _mm256_mul_ps(t, _mm256_castsi256_ps(_mm256_sub_epi32(_mm256_set1_epi32(127 << 23), shift)));
}

/* `nr` (1..F32_ROWS) rows by one tile of 16 columns over `len` products of k (a multiple of the
 * block). av/ae: the rows' a' and biased EA', p-major (av[p * nr + r]); bv/be: the tile's b' and
 * EB', 16 per p; d: the rows' accumulators d', `dstride` apart, read at the start and written back. */
static inline __attribute__((always_inline)) TARGET_F32 void
block_f32(const float *av, const int16_t *ae, const float *bv, const int16_t *be, float *dp, size_t dstride,
          size_t len, const f32_params *prm, int nr, size_t blk, bool split) {
  __m256 d[F32_ROWS][2];
  for (int r = 0; r < nr; r++)
    for (int v = 0; v < 2; v++) d[r][v] = _mm256_loadu_ps(dp + (size_t)r * dstride + (size_t)v * 8);
  const __m256i kconst = _mm256_set1_epi32((prm->fb + 127) << 23), exp_mask = _mm256_set1_epi32(0x7f800000);
  for (size_t p0 = 0; p0 < len; p0 += blk) {
    __m256i m[F32_ROWS];
    /* from fb + 1, the smallest sum of nonzero operands (f32_safe), not EXP_ZERO: the same maximum
     * wherever a product is nonzero, and kf <= 126 where none is (the clamp of the comment above) */
    for (int r = 0; r < nr; r++) m[r] = _mm256_set1_epi16((int16_t)(prm->fb + 1));
    for (size_t p = p0; p < p0 + blk; p++) {
      __m256i eb = _mm256_loadu_si256((const __m256i *)(be + p * F32_TILE));
      for (int r = 0; r < nr; r++)
        m[r] = _mm256_max_epi16(m[r], _mm256_add_epi16(_mm256_set1_epi16(ae[p * (size_t)nr + (size_t)r]), eb));
    }
    /* exponents as fields << 23, as d's bits hold its own: kf << 23 = (fb + 127) << 23 - emax_f << 23 */
    __m256i shift[F32_ROWS][2], s[F32_ROWS][2];
    for (int r = 0; r < nr; r++)
      for (int v = 0; v < 2; v++) {
        __m256i mp = _mm256_cvtepi16_epi32(v ? _mm256_extracti128_si256(m[r], 1) : _mm256_castsi256_si128(m[r]));
        __m256i emax = _mm256_max_epi32(_mm256_slli_epi32(mp, 23), _mm256_and_si256(_mm256_castps_si256(d[r][v]), exp_mask));
        shift[r][v] = _mm256_sub_epi32(kconst, emax); /* kf in [1, 126]: the floor above, f32_safe's bound on k */
        s[r][v] = split ? _mm256_setzero_si256() : acc_term_avx2(d[r][v], shift[r][v]);
      }
    for (size_t p = p0; p < p0 + blk; p++) {
      __m256 b0 = _mm256_loadu_ps(bv + p * F32_TILE), b1 = _mm256_loadu_ps(bv + p * F32_TILE + 8);
      for (int r = 0; r < nr; r++) {
        __m256 a = _mm256_broadcast_ss(av + p * (size_t)nr + (size_t)r);
        __m256i t0 = _mm256_add_epi32(_mm256_castps_si256(_mm256_mul_ps(a, b0)), shift[r][0]);
        __m256i t1 = _mm256_add_epi32(_mm256_castps_si256(_mm256_mul_ps(a, b1)), shift[r][1]);
        s[r][0] = _mm256_add_epi32(s[r][0], _mm256_cvttps_epi32(_mm256_castsi256_ps(t0)));
        s[r][1] = _mm256_add_epi32(s[r][1], _mm256_cvttps_epi32(_mm256_castsi256_ps(t1)));
      }
    }
    for (int r = 0; r < nr; r++)
      for (int v = 0; v < 2; v++) d[r][v] = block_end_avx2(d[r][v], s[r][v], shift[r][v], split);
  }
  for (int r = 0; r < nr; r++)
    for (int v = 0; v < 2; v++) _mm256_storeu_ps(dp + (size_t)r * dstride + (size_t)v * 8, d[r][v]);
}

/* The packed operands of one call. */
typedef struct f32_job {
  const float *av;    /* a' per block of F32_ROWS rows, p-major, kp per row */
  const int16_t *ae;  /* EA, laid out as av */
  const float *b;
  float *c;           /* the accumulators d' between k-chunks, then the result */
  float *tail;        /* rows x tile accumulators of a last tile that n cuts short, else NULL */
  size_t rows, col0, col1, n, k, kp, kc;
  float b_scale;      /* 2^sB */
  int emin_b, eb_bias; /* EB' = EB + eb_bias */
  double out_scale;   /* 2^-(sA + sB): d = d'·out_scale */
  f32_params prm;
  size_t tile;        /* columns per tile: F32_TILE (AVX2) or F32_TILE_512 */
} f32_job;

/* EB' = max(ilogb x, emin) + bias of eight fp32 values (normal or zero, by f32_safe) as int32,
 * EXP_ZERO for zero. */
static inline TARGET_F32 __m256i exp_of_operand_avx2(__m256 x, int emin, int bias, int zero) {
  __m256i bits = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
  __m256i e = _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127)),
                               _mm256_set1_epi32(emin));
  e = _mm256_add_epi32(e, _mm256_set1_epi32(bias));
  return _mm256_blendv_epi8(e, _mm256_set1_epi32(zero), _mm256_cmpeq_epi32(bits, _mm256_setzero_si256()));
}

/* Rows p0..p0+len of B's columns col0..col1 (a multiple of the tile wide, zero past n and k) as
 * b' and EB, tile-major: tile t's values of row p at (t * len + p) * tile, read along B's rows. */
static TARGET_F32 void f32_pack_group(const f32_job *job, size_t p0, size_t len, size_t col0, size_t col1, float *bv,
                                       int16_t *be) {
  const size_t tile = job->tile;
  const bool pairs8 = tile == F32_TILE_512;
  const __m256 scale = _mm256_set1_ps(job->b_scale);
  for (size_t p = 0; p < len; p++) {
    const float *row = job->b + (p0 + p) * job->n;
    /* each p a different page of a wide B (an lm_head's row is 192 KiB): the hardware prefetcher
     * stops at the page's end, so the next group's part of this row is asked for now, one line a step */
    const bool ahead = p0 + p < job->k && col1 + F32_GROUP <= job->n;
    for (size_t col = col0; col < col1; col += 8) {
      if (ahead && (col - col0) % 16 == 0) _mm_prefetch((const char *)(row + col + F32_GROUP), _MM_HINT_T1);
      __m256 x;
      if (p0 + p < job->k && col + 8 <= job->n) x = _mm256_loadu_ps(row + col);
      else if (p0 + p >= job->k || col >= job->n) x = _mm256_setzero_ps();
      else /* a masked load, not lanes stored one by one and read back (a store-forwarding stall that
            * cost small calls more than their products) */
        x = _mm256_maskload_ps(row + col, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(job->n - col)),
                                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
      size_t t = (col - col0) / tile, at = (t * len + p) * tile + (col - col0) % tile;
      _mm256_storeu_ps(bv + at, _mm256_mul_ps(x, scale));
      __m256i e = exp_of_operand_avx2(x, job->emin_b, job->eb_bias, pairs8 ? EXP_ZERO8 : EXP_ZERO);
      __m128i e16 = _mm_packs_epi32(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
      if (pairs8) /* the byte twice: one for each row of a pair (block_f32_512) */
        e16 = _mm_or_si128(_mm_and_si128(e16, _mm_set1_epi16(0xff)), _mm_slli_epi16(e16, 8));
      _mm_storeu_si128((__m128i *)(be + at), e16);
    }
  }
}

/* block_f32 with the rows, the block and the split as constants (unrolled block loops); other
 * blocks take the generic instance. */
#define F32_ROWS_CASES(BLK, SPLIT)                                                                            \
  switch (nr) {                                                                                               \
  case 4: block_f32(av, ae, bv, be, dp, dstride, len, prm, 4, BLK, SPLIT); break;                             \
  case 3: block_f32(av, ae, bv, be, dp, dstride, len, prm, 3, BLK, SPLIT); break;                             \
  case 2: block_f32(av, ae, bv, be, dp, dstride, len, prm, 2, BLK, SPLIT); break;                             \
  default: block_f32(av, ae, bv, be, dp, dstride, len, prm, 1, BLK, SPLIT); break;                            \
  }
static TARGET_F32 void block_f32_dispatch(const float *av, const int16_t *ae, const float *bv, const int16_t *be,
                                          float *dp, size_t dstride, size_t len, const f32_params *prm, int nr) {
  const bool split = prm->split;
  if (prm->blk == 16 && split) F32_ROWS_CASES(16, true)
  else if (prm->blk == 16) F32_ROWS_CASES(16, false)
  else if (prm->blk == 8 && !split) F32_ROWS_CASES(8, false)
  else if (prm->blk == 4 && !split) F32_ROWS_CASES(4, false)
  else if (split) F32_ROWS_CASES((size_t)prm->blk, true)
  else F32_ROWS_CASES((size_t)prm->blk, false)
}
#undef F32_ROWS_CASES

/* ---- The same kernel in AVX-512 (F and BW): 32 columns per tile, two vectors of sixteen floats
 * and, for two rows at once, one of 64 int8 exponents, so that a pair of rows' exponent maximum is
 * one saturating byte add and one byte max per p, and the 4 rows x 2 vectors of accumulators, sums
 * and shifts (24 registers) stay in the 32 zmm registers. The arithmetic is block_f32's, with two
 * changes that give the same values in fewer operations: the exponents in int8 (block_f32_512 says
 * why they fit); S + D past 2^31 summed modulo 2^32 and its sign taken from the operands'
 * (block_end_512), not split in two. The roundings toward zero are embedded in the instructions. */
#define TARGET_F32_512 __attribute__((target("avx512f,avx512bw,avx2,fma")))

/* D, as acc_term_avx2. */
static inline TARGET_F32_512 __m512i acc_term_512(__m512 d, __m512i shift) {
  return _mm512_cvttps_epi32(_mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(d), shift)));
}

/* d' after one block, as block_end_avx2. */
static inline TARGET_F32_512 __m512 block_end_512(__m512 d, __m512i s, __m512i shift, bool split) {
  __m512 t;
  if (split) {
    __m512i dterm = acc_term_512(d, shift);
    /* S + D may need 33 bits, but its magnitude fits 32: the wrapped int32 sum T32 is T modulo 2^32,
     * T's sign is the majority of S's, D's and T32's (equal signs of S and D decide it; unequal ones
     * cannot overflow), |T| = ±T32 modulo 2^32, converted unsigned under RZ, the sign put back. */
    __m512i t32 = _mm512_add_epi32(s, dterm);
    __m512i sign_of_t = _mm512_ternarylogic_epi32(s, dterm, t32, 0xe8);
    __mmask16 negative = _mm512_cmplt_epi32_mask(sign_of_t, _mm512_setzero_si512());
    __m512i magnitude = _mm512_mask_sub_epi32(t32, negative, _mm512_setzero_si512(), t32);
    __m512 m = _mm512_cvt_roundepu32_ps(magnitude, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    t = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(m), sign_of_t,
                                                      _mm512_set1_epi32((int)0x80000000u), 0xf8));
  } else {
    t = _mm512_cvt_roundepi32_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  }
  return _mm512_mul_ps(t, _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_set1_epi32(127 << 23), shift)));
}

/* block_f32 on a tile of 32 columns (bv: 32 per p), the exponents in int8, two rows a vector: be
 * holds each column's EB' + 64 twice (bytes 2c and 2c + 1, 64 per p), ae8 a pair of rows' EA' + 63
 * (rows 2q and 2q + 1 at ae8[p * ne + 2q + {0, 1}], ne = nr rounded up to even, EXP_ZERO8 for a
 * missing row), so that one saturating byte add and one byte max per p serve two rows: byte 2c of
 * the maximum is row 2q's E' + 127 for column c, byte 2c + 1 row 2q + 1's. The sums of nonzero
 * operands lie in [fb + 1, 123] (f32_plan: spread <= 122 - fb, every E' <= -4), a zero operand's
 * saturate at or below -66, below any of them as EXP_ZERO is in block_f32. */
static inline __attribute__((always_inline)) TARGET_F32_512 void
block_f32_512(const float *av, const int8_t *ae8, const float *bv, const int16_t *be, float *dp, size_t dstride,
              size_t len, const f32_params *prm, int nr, size_t blk, bool split) {
  const int ne = (nr + 1) & ~1, pairs = ne / 2;
  __m512 d[F32_ROWS][2];
  for (int r = 0; r < nr; r++)
    for (int v = 0; v < 2; v++) d[r][v] = _mm512_loadu_ps(dp + (size_t)r * dstride + (size_t)v * 16);
  const __m512i kconst = _mm512_set1_epi32((prm->fb + 127) << 23), exp_mask = _mm512_set1_epi32(0x7f800000);
  for (size_t p0 = 0; p0 < len; p0 += blk) {
    __m512i m[F32_ROWS / 2];
    for (int q = 0; q < pairs; q++) m[q] = _mm512_set1_epi8((char)(prm->fb + 1)); /* as block_f32's */
    for (size_t p = p0; p < p0 + blk; p++) {
      __m512i eb = _mm512_loadu_si512((const void *)(be + p * F32_TILE_512));
      for (int q = 0; q < pairs; q++) {
        int16_t pair;
        memcpy(&pair, ae8 + p * (size_t)ne + 2 * (size_t)q, sizeof pair);
        m[q] = _mm512_max_epi8(m[q], _mm512_adds_epi8(_mm512_set1_epi16(pair), eb));
      }
    }
    __m512i shift[F32_ROWS][2], s[F32_ROWS][2];
    for (int r = 0; r < nr; r++) {
      /* row r's bytes, sign-extended to int16 in column order */
      __m512i mr = r % 2 ? _mm512_srai_epi16(m[r / 2], 8) : _mm512_srai_epi16(_mm512_slli_epi16(m[r / 2], 8), 8);
      for (int v = 0; v < 2; v++) {
        __m512i mp = _mm512_cvtepi16_epi32(v ? _mm512_extracti64x4_epi64(mr, 1) : _mm512_castsi512_si256(mr));
        __m512i emax = _mm512_max_epi32(_mm512_slli_epi32(mp, 23), _mm512_and_si512(_mm512_castps_si512(d[r][v]), exp_mask));
        shift[r][v] = _mm512_sub_epi32(kconst, emax);
        s[r][v] = split ? _mm512_setzero_si512() : acc_term_512(d[r][v], shift[r][v]);
      }
    }
#if defined(__x86_64__)
    if (nr == F32_ROWS) { /* the common block, written out: GCC's loop copied every sum once a step */
      const float *bp = bv + p0 * F32_TILE_512, *ap = av + p0 * (size_t)F32_ROWS;
      const float *const bend = bp + blk * F32_TILE_512;
      /* zmm27, 28: the step's B; zmm29: a broadcast; zmm30, 31: the two terms */
#define MMA_ROW_STEP(R, OFF)                                                                                   \
  "vbroadcastss " OFF "(%[ap]), %%zmm29\n\t"                                                                  \
  "vmulps %%zmm27, %%zmm29, %%zmm30\n\t"                                                                      \
  "vmulps %%zmm28, %%zmm29, %%zmm31\n\t"                                                                      \
  "vpaddd %[h" R "0], %%zmm30, %%zmm30\n\t"                                                                   \
  "vpaddd %[h" R "1], %%zmm31, %%zmm31\n\t"                                                                   \
  "vcvttps2dq %%zmm30, %%zmm30\n\t"                                                                           \
  "vcvttps2dq %%zmm31, %%zmm31\n\t"                                                                           \
  "vpaddd %%zmm30, %[s" R "0], %[s" R "0]\n\t"                                                                \
  "vpaddd %%zmm31, %[s" R "1], %[s" R "1]\n\t"
      __asm__("1:\n\t"
              "vmovups (%[bp]), %%zmm27\n\t"
              "vmovups 64(%[bp]), %%zmm28\n\t" MMA_ROW_STEP("0", "0") MMA_ROW_STEP("1", "4") MMA_ROW_STEP("2", "8")
                  MMA_ROW_STEP("3", "12") "add $128, %[bp]\n\t"
              "add $16, %[ap]\n\t"
              "cmp %[bend], %[bp]\n\t"
              "jne 1b"
              : [s00] "+v"(s[0][0]), [s01] "+v"(s[0][1]), [s10] "+v"(s[1][0]), [s11] "+v"(s[1][1]),
                [s20] "+v"(s[2][0]), [s21] "+v"(s[2][1]), [s30] "+v"(s[3][0]), [s31] "+v"(s[3][1]), [bp] "+r"(bp),
                [ap] "+r"(ap)
              : [h00] "v"(shift[0][0]), [h01] "v"(shift[0][1]), [h10] "v"(shift[1][0]), [h11] "v"(shift[1][1]),
                [h20] "v"(shift[2][0]), [h21] "v"(shift[2][1]), [h30] "v"(shift[3][0]), [h31] "v"(shift[3][1]),
                [bend] "r"(bend)
              : "memory", "cc", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
#undef MMA_ROW_STEP
    } else
#endif
    {
#pragma GCC unroll 2
      for (size_t p = p0; p < p0 + blk; p++) {
        __m512 b0 = _mm512_loadu_ps(bv + p * F32_TILE_512), b1 = _mm512_loadu_ps(bv + p * F32_TILE_512 + 16);
        for (int r = 0; r < nr; r++) {
          __m512 a = _mm512_set1_ps(av[p * (size_t)nr + (size_t)r]);
          __m512i t0 = _mm512_add_epi32(_mm512_castps_si512(_mm512_mul_ps(a, b0)), shift[r][0]);
          __m512i t1 = _mm512_add_epi32(_mm512_castps_si512(_mm512_mul_ps(a, b1)), shift[r][1]);
          s[r][0] = _mm512_add_epi32(s[r][0], _mm512_cvttps_epi32(_mm512_castsi512_ps(t0)));
          s[r][1] = _mm512_add_epi32(s[r][1], _mm512_cvttps_epi32(_mm512_castsi512_ps(t1)));
        }
      }
    }
    for (int r = 0; r < nr; r++)
      for (int v = 0; v < 2; v++) d[r][v] = block_end_512(d[r][v], s[r][v], shift[r][v], split);
  }
  for (int r = 0; r < nr; r++)
    for (int v = 0; v < 2; v++) _mm512_storeu_ps(dp + (size_t)r * dstride + (size_t)v * 16, d[r][v]);
}

#define F32_ROWS_CASES_512(BLK, SPLIT)                                                                        \
  switch (nr) {                                                                                               \
  case 4: block_f32_512(av, ae, bv, be, dp, dstride, len, prm, 4, BLK, SPLIT); break;                         \
  case 3: block_f32_512(av, ae, bv, be, dp, dstride, len, prm, 3, BLK, SPLIT); break;                         \
  case 2: block_f32_512(av, ae, bv, be, dp, dstride, len, prm, 2, BLK, SPLIT); break;                         \
  default: block_f32_512(av, ae, bv, be, dp, dstride, len, prm, 1, BLK, SPLIT); break;                        \
  }
static TARGET_F32_512 void block_f32_512_dispatch(const float *av, const int8_t *ae, const float *bv,
                                                  const int16_t *be, float *dp, size_t dstride, size_t len,
                                                  const f32_params *prm, int nr) {
  const bool split = prm->split;
  if (prm->blk == 16 && split) F32_ROWS_CASES_512(16, true)
  else if (prm->blk == 16) F32_ROWS_CASES_512(16, false)
  else if (prm->blk == 8 && !split) F32_ROWS_CASES_512(8, false)
  else if (prm->blk == 4 && !split) F32_ROWS_CASES_512(4, false)
  else if (split) F32_ROWS_CASES_512((size_t)prm->blk, true)
  else F32_ROWS_CASES_512((size_t)prm->blk, false)
}
#undef F32_ROWS_CASES_512

/* Blocked as a BLAS micro-kernel's caller: rows in chunks of F32_MC (A's chunk, F32_MC x kc, stays
 * in L2), k in chunks of kc, the job's columns in groups of F32_GROUP packed once per (rows, k)
 * chunk (F32_GROUP x kc, in L2; one tile of it, 16 or 32 x kc, near L1 while the rows go by). The
 * accumulators d' wait in C itself between k-chunks (those of a last tile that n cuts short in
 * job->tail), scaled to d at the end: no buffer the size of C (an lm_head's C is rows x 4 x its
 * vocabulary in bytes). */
static TARGET_F32 void f32_cols(const f32_job *job, float *bv, int16_t *be) {
  const unsigned csr = _mm_getcsr();
  /* round toward zero (bits 13-14), no flush-to-zero (15) or denormals-are-zero (6) */
  _mm_setcsr((csr & ~0xe040u) | 0x6000u);
  const size_t n = job->n, kp = job->kp, rows = job->rows, tile = job->tile;
  const size_t end = job->col1 < n ? job->col1 : n, full_end = n / tile * tile; /* columns of whole tiles */
  for (size_t i = 0; i < rows; i++) memset(job->c + i * n + job->col0, 0, (end - job->col0) * sizeof(float));
  if (job->col1 > full_end) memset(job->tail, 0, rows * tile * sizeof(float));
  for (size_t i0 = 0; i0 < rows; i0 += F32_MC) {
    size_t i1 = rows - i0 < F32_MC ? rows : i0 + F32_MC;
    for (size_t p0 = 0; p0 < kp; p0 += job->kc) {
      size_t len = kp - p0 < job->kc ? kp - p0 : job->kc;
      for (size_t g0 = job->col0; g0 < job->col1; g0 += F32_GROUP) {
        size_t g1 = job->col1 - g0 < F32_GROUP ? job->col1 : g0 + F32_GROUP;
        f32_pack_group(job, p0, len, g0, g1, bv, be);
        for (size_t col = g0; col < g1; col += job->tile) {
          size_t off = (col - g0) * len;
          for (size_t i = i0; i < i1; i += F32_ROWS) {
            int nr = rows - i >= F32_ROWS ? F32_ROWS : (int)(rows - i);
            const float *av = job->av + i * kp + p0 * (size_t)nr;
            const bool whole = col < full_end;
            float *dp = whole ? job->c + i * n + col : job->tail + i * tile;
            const size_t stride = whole ? n : tile;
            if (job->tile == F32_TILE_512) {
              const int8_t *ae8 = (const int8_t *)job->ae + i * kp + p0 * (size_t)((nr + 1) & ~1);
              block_f32_512_dispatch(av, ae8, bv + off, be + off, dp, stride, len, &job->prm, nr);
            } else {
              block_f32_dispatch(av, job->ae + i * kp + p0 * (size_t)nr, bv + off, be + off, dp, stride, len, &job->prm,
                                 nr);
            }
          }
        }
      }
    }
  }
  _mm_setcsr(csr);
  for (size_t i = 0; i < rows; i++) {
    float *row = job->c + i * n;
    for (size_t j = job->col0; j < end; j++)
      row[j] = (float)((double)(j < full_end ? row[j] : job->tail[i * tile + (j - full_end)]) * job->out_scale);
  }
}

static void *f32_thread(void *arg) {
  f32_job *job = arg;
  size_t width = job->col1 - job->col0 < F32_GROUP ? job->col1 - job->col0 : F32_GROUP;
  size_t count = job->kc * width;
  /* small calls: the group on the stack (no allocation, no page faults) */
  float small[F32_SMALL_GROUP * 3 / 2];
  float *bv = count <= F32_SMALL_GROUP ? small : malloc(count * (sizeof(float) + sizeof(int16_t)));
  if (!bv) return arg; /* the caller runs the call again on the double kernel */
  f32_cols(job, bv, (int16_t *)(bv + count));
  if (bv != small) free(bv);
  return NULL;
}

/* The online CPUs, at most MMA_MAX_THREADS. */
static size_t online_cpus(void) {
  size_t cpus = precis_online_cpus();
  return cpus > MMA_MAX_THREADS ? MMA_MAX_THREADS : cpus;
}

static precis_mma_path cpu_best_path(void);

/* What f32_safe needs of an operand, in one pass over its bits. */
typedef struct operand_scan {
  bool finite;        /* no inf or NaN */
  bool narrow;        /* every nonzero value an fp32 normal with its low 12 fraction bits zero */
  bool any;           /* some value nonzero */
  uint32_t max_abs;   /* largest |x| as bits (finite values order as their bits) */
  uint32_t min_field; /* smallest exponent field of a nonzero value */
} operand_scan;

/* One pass over the bits, in the form the vector loop below takes: the OR of every value's low 12
 * bits (a zero's are zero), the largest |x| and the smallest nonzero |x| (|x| - 1 as unsigned: a
 * zero wraps to the largest); its exponent field 0 is a subnormal. */
static operand_scan scan_finish(uint32_t low_bits, uint32_t max_abs, uint32_t min_nonzero_less_1) {
  bool any = max_abs != 0;
  uint32_t min_field = any ? (min_nonzero_less_1 + 1) >> 23 : 255;
  return (operand_scan){.finite = max_abs < 0x7f800000u,
                        .narrow = (low_bits & 0xfffu) == 0 && (!any || min_field != 0),
                        .any = any,
                        .max_abs = max_abs,
                        .min_field = min_field};
}

static operand_scan scan_operand_scalar(const float *x, size_t count, uint32_t low, uint32_t max_abs, uint32_t min_nz) {
  for (size_t i = 0; i < count; i++) {
    uint32_t u;
    memcpy(&u, &x[i], sizeof u);
    uint32_t a = u & 0x7fffffffu;
    low |= u;
    max_abs = a > max_abs ? a : max_abs;
    min_nz = a - 1 < min_nz ? a - 1 : min_nz;
  }
  return scan_finish(low, max_abs, min_nz);
}

/* The same, eight values a step: a small call's scan cost more than its products. */
static TARGET_AVX2 operand_scan scan_operand_avx2(const float *x, size_t count) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
  __m256i low = _mm256_setzero_si256(), vmax = _mm256_setzero_si256(), vmin = _mm256_set1_epi32(-1);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256i u = _mm256_loadu_si256((const __m256i *)(x + i)), a = _mm256_and_si256(u, abs_mask);
    low = _mm256_or_si256(low, u);
    vmax = _mm256_max_epi32(vmax, a);
    vmin = _mm256_min_epu32(vmin, _mm256_sub_epi32(a, one));
  }
  uint32_t lv[8], mx[8], mn[8], l = 0, max_abs = 0, min_nz = UINT32_MAX;
  _mm256_storeu_si256((__m256i *)lv, low);
  _mm256_storeu_si256((__m256i *)mx, vmax);
  _mm256_storeu_si256((__m256i *)mn, vmin);
  for (int j = 0; j < 8; j++) {
    l |= lv[j];
    max_abs = mx[j] > max_abs ? mx[j] : max_abs;
    min_nz = mn[j] < min_nz ? mn[j] : min_nz;
  }
  return scan_operand_scalar(x + i, count - i, l, max_abs, min_nz);
}

static operand_scan scan_operand(const float *x, size_t count) {
  return cpu_best_path() >= PRECIS_MMA_PATH_AVX2 ? scan_operand_avx2(x, count)
                                                  : scan_operand_scalar(x, count, 0, 0, UINT32_MAX);
}

static float float_of_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* The fp32 kernel's conditions (the comment above F32_TILE) and its scales. */
typedef struct f32_plan {
  f32_params prm;
  int sa, sb;         /* sA, sB */
  int ea_bias, eb_bias; /* EA' + 127 = EA + ea_bias, EB' = EB + eb_bias */
} f32_plan;

static bool f32_safe(const operand_scan *sa, const operand_scan *sb, size_t k, const precis_mma_shape *shape,
                     f32_plan *plan) {
  const int fb = shape->fraction_bits, blk = shape->block;
  if (!sa->narrow || !sb->narrow || !sa->any || !sb->any) return false;
  if (fb < 1 || fb > 28 || ((int64_t)blk << (fb + 2)) > (INT64_C(1) << 31)) return false; /* S in int32 */
  int ea_max = (int)(sa->max_abs >> 23) - 127, eb_max = (int)(sb->max_abs >> 23) - 127;
  int ea_act_min = (int)sa->min_field - 127, eb_act_min = (int)sb->min_field - 127;
  int ea_hi = ea_max > shape->emin_a ? ea_max : shape->emin_a, eb_hi = eb_max > shape->emin_b ? eb_max : shape->emin_b;
  int ea_lo = ea_act_min > shape->emin_a ? ea_act_min : shape->emin_a;
  int eb_lo = eb_act_min > shape->emin_b ? eb_act_min : shape->emin_b;
  if ((ea_hi + eb_hi) - (ea_lo + eb_lo) > 122 - fb) return false; /* kf's upper clamp, d' normal */
  if ((ea_lo + eb_lo) - fb < -126) return false;                  /* every nonzero d normal */
  /* |d'| < k/4 < 2^fb (each |a'·b'| < 1/4, every truncation toward zero): kf >= 1 without a clamp */
  if (k >= ((size_t)1 << (fb + 2))) return false;
  int sa_exp = -(ea_hi + 2), sb_exp = -(eb_hi + 2);
  if ((ea_act_min + sa_exp) + (eb_act_min + sb_exp) < -125) return false; /* t exact and normal */
  /* no partial sum reaches fp32's overflow (as for the double kernel) */
  if ((double)float_of_bits(sa->max_abs) * (double)float_of_bits(sb->max_abs) * (double)(k + 1) >= 0x1p126) return false;
  bool split = ((int64_t)blk << (fb + 2)) + (INT64_C(1) << (fb + 1)) > (INT64_C(1) << 31);
  *plan = (f32_plan){.prm = {.fb = fb, .blk = blk, .split = split}, .sa = sa_exp, .sb = sb_exp, .ea_bias = sa_exp + 127, .eb_bias = sb_exp};
  return true;
}

/* A's rows as a' and EA' + 127, p-major within each block of F32_ROWS rows (the last may hold
 * fewer), zero (EXP_ZERO) past k; each row read eight values a step (exp_of_operand_avx2, as B's). */
static TARGET_F32 void f32_pack_rows(const float *a, size_t rows, size_t k, size_t kp, int emin, const f32_plan *plan,
                                     bool pairs8, float *av, int16_t *ae) {
  const __m256 scale = _mm256_set1_ps(ldexpf(1.0f, plan->sa));
  /* pairs8 (the AVX-512 kernel): EA' + 63 as int8 (block_f32_512), ne per p, the odd block's
   * missing row EXP_ZERO8; within the same buffer (rows·kp int16 hold (rows + 1)·kp bytes) */
  const int bias = pairs8 ? plan->sa + 63 : plan->ea_bias;
  for (size_t i = 0; i < rows; i += F32_ROWS) {
    size_t nr = rows - i >= F32_ROWS ? F32_ROWS : rows - i, ne = (nr + 1) & ~(size_t)1;
    int8_t *ae8 = (int8_t *)ae + i * kp;
    if (pairs8 && ne != nr)
      for (size_t p = 0; p < kp; p++) ae8[p * ne + nr] = EXP_ZERO8;
    for (size_t r = 0; r < nr; r++) {
      const float *row = a + (i + r) * k;
      float *avr = av + i * kp + r;
      int16_t *aer = ae + i * kp + r;
      for (size_t p = 0; p < kp; p += 8) {
        __m256 x;
        if (p + 8 <= k) x = _mm256_loadu_ps(row + p);
        else if (p >= k) x = _mm256_setzero_ps();
        else
          x = _mm256_maskload_ps(row + p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k - p)),
                                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        float values[8];
        int32_t exps[8];
        _mm256_storeu_ps(values, _mm256_mul_ps(x, scale));
        _mm256_storeu_si256((__m256i *)exps, exp_of_operand_avx2(x, emin, bias, pairs8 ? EXP_ZERO8 : EXP_ZERO));
        size_t count = kp - p < 8 ? kp - p : 8;
        for (size_t l = 0; l < count; l++) {
          avr[(p + l) * nr] = values[l];
          if (pairs8) ae8[(p + l) * ne + r] = (int8_t)exps[l];
          else aer[(p + l) * nr] = (int16_t)exps[l];
        }
      }
    }
  }
}

#define F32_KC 256 /* k-chunk in elements: A and B panels of one chunk stay within L2 (see the packing comment below) */
#define F32_MIN_WORK_PER_THREAD (1u << 21)

static bool mma_vector_f32(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                           const precis_mma_shape *shape, const operand_scan *sa, const operand_scan *sb, bool avx512) {
  const size_t tile = avx512 ? F32_TILE_512 : F32_TILE;
  f32_plan plan;
  if (!f32_safe(sa, sb, k, shape, &plan)) return false;
  size_t blk = (size_t)shape->block, kp = (k + blk - 1) / blk * blk;
  if (kp > SIZE_MAX / (rows * 8 + 1)) return false;
  size_t np = (n + tile - 1) / tile * tile;
  /* small calls: the packed A and the accumulators on the stack */
  float av_small[F32_SMALL_CALL], tail_small[F32_SMALL_CALL];
  int16_t ae_small[F32_SMALL_CALL];
  bool small = rows * kp <= F32_SMALL_CALL && rows * tile <= F32_SMALL_CALL;
  float *av = small ? av_small : malloc(rows * kp * sizeof *av);
  float *tail = n % tile == 0 ? NULL : small ? tail_small : malloc(rows * tile * sizeof *tail);
  int16_t *ae = small ? ae_small : malloc(rows * kp * sizeof *ae);
  bool ok = av && (tail || n % tile == 0) && ae;
  if (ok) {
    f32_pack_rows(a, rows, k, kp, shape->emin_a, &plan, avx512, av, ae);
    size_t threads = online_cpus();
    double work = (double)rows * (double)n * (double)k;
    while (threads > 1 && work / (double)threads < (double)F32_MIN_WORK_PER_THREAD) threads--;
    size_t tiles = np / tile;
    if (threads > tiles) threads = tiles;
    if (threads < 1) threads = 1;
    /* k-chunk: F32_MC rows of A's (6 bytes an element) and F32_GROUP columns of B's within about
     * 192 KiB each (L2); a whole number of blocks. */
    size_t kc = F32_KC / blk * blk;
    if (kc < blk) kc = blk;
    if (kc > kp) kc = kp;
    f32_job jobs[MMA_MAX_THREADS];
    pthread_t ids[MMA_MAX_THREADS];
    bool started[MMA_MAX_THREADS];
    void *failed[MMA_MAX_THREADS];
    for (size_t t = 0; t < threads; t++) {
      size_t first = tiles * t / threads, last = tiles * (t + 1) / threads;
      jobs[t] = (f32_job){av,         ae,  b,    c,     tail, rows, first * tile, last * tile, n, k, kp, kc,
                          ldexpf(1.0f, plan.sb), shape->emin_b, avx512 ? plan.sb + 64 : plan.eb_bias, ldexp(1.0, -(plan.sa + plan.sb)), plan.prm,
                          tile};
      started[t] = t > 0 && pthread_create(&ids[t], NULL, f32_thread, &jobs[t]) == 0;
    }
    for (size_t t = 0; t < threads; t++)
      if (!started[t]) failed[t] = f32_thread(&jobs[t]);
    for (size_t t = 1; t < threads; t++)
      if (started[t]) pthread_join(ids[t], &failed[t]);
    for (size_t t = 0; t < threads; t++) ok &= failed[t] == NULL;
  }
  if (!small) {
    free(av);
    free(ae);
    free(tail);
  }
  return ok;
}

/* CPUID: AVX2 and AVX-512 (leaf 7 EBX), FMA, and the OS saving the YMM (OSXSAVE, XCR0 bits 1 and 2)
 * and ZMM state. */
static precis_mma_path cpu_best_path_uncached(void) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) return PRECIS_MMA_PATH_SCALAR;
  bool fma = (ecx & bit_FMA) != 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return PRECIS_MMA_PATH_SCALAR;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  (void)xcr0_hi;
  if ((xcr0_lo & 0x6u) != 0x6u || !(ebx & bit_AVX2)) return PRECIS_MMA_PATH_SCALAR;
  if (!fma) return PRECIS_MMA_PATH_AVX2;
  /* AVX-512 F and BW, and the OS saving the opmask and zmm state (XCR0 bits 5, 6, 7) */
  if ((ebx & bit_AVX512F) && (ebx & bit_AVX512BW) && (xcr0_lo & 0xe0u) == 0xe0u) return PRECIS_MMA_PATH_AVX512_F32;
  return PRECIS_MMA_PATH_AVX2_F32;
}

/* Asked once: CPUID traps to the hypervisor in a virtual machine (microseconds, more than a small
 * GEMM). 0 = not asked yet, else path + 1. */
static precis_mma_path cpu_best_path(void) {
  static _Atomic int cached;
  int v = cached;
  if (v == 0) {
    v = (int)cpu_best_path_uncached() + 1;
    cached = v;
  }
  return (precis_mma_path)(v - 1);
}

#endif /* PRECIS_MMA_X86 */

const char *precis_mma_path_name(precis_mma_path path) {
  switch (path) {
  case PRECIS_MMA_PATH_AVX512_F32: return "avx512-f32";
  case PRECIS_MMA_PATH_AVX2_F32: return "avx2-f32";
  case PRECIS_MMA_PATH_AVX2: return "avx2";
  default: return "scalar";
  }
}

precis_mma_path precis_gemm_mma_path(void) {
  precis_mma_path best = PRECIS_MMA_PATH_SCALAR;
#if PRECIS_MMA_X86
  best = cpu_best_path();
#endif
  const char *cap = getenv("PRECIS_MMA_PATH");
  if (cap && strcmp(cap, "scalar") == 0) best = PRECIS_MMA_PATH_SCALAR;
  if (cap && strcmp(cap, "avx2") == 0 && best > PRECIS_MMA_PATH_AVX2) best = PRECIS_MMA_PATH_AVX2;
  if (cap && strcmp(cap, "avx2-f32") == 0 && best > PRECIS_MMA_PATH_AVX2_F32) best = PRECIS_MMA_PATH_AVX2_F32;
  return best;
}

precis_mma_path precis_gemm_mma_capped(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                                       const precis_mma_shape *shape, precis_mma_path cap) {
  if (rows == 0 || n == 0) return PRECIS_MMA_PATH_SCALAR;
#if PRECIS_MMA_X86
  precis_mma_path best = cpu_best_path();
  if (cap > best) cap = best;
  if (k > 0 && shape->block > 0 && shape->block <= 64 && cap >= PRECIS_MMA_PATH_AVX2) {
    operand_scan sa = scan_operand(a, rows * k), sb = scan_operand(b, k * n);
    if (sa.finite && sb.finite) {
      /* at most 16 columns: the AVX2 kernel's 16-column tile (a 32-column one would be half padding) */
      bool avx512 = cap >= PRECIS_MMA_PATH_AVX512_F32 && n > F32_TILE;
      if (cap >= PRECIS_MMA_PATH_AVX2_F32 && mma_vector_f32(a, b, c, rows, n, k, shape, &sa, &sb, avx512))
        return avx512 ? PRECIS_MMA_PATH_AVX512_F32 : PRECIS_MMA_PATH_AVX2_F32;
      if (vector_safe(a, rows * k, b, k * n, k) && mma_vector(a, b, c, rows, n, k, shape)) return PRECIS_MMA_PATH_AVX2;
    }
  }
#else
  (void)cap;
#endif
  precis_gemm_mma_reference(a, b, c, rows, n, k, shape);
  return PRECIS_MMA_PATH_SCALAR;
}

void precis_gemm_mma(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                     const precis_mma_shape *shape) {
  precis_gemm_mma_capped(a, b, c, rows, n, k, shape, precis_gemm_mma_path());
}
