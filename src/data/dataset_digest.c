#include "dataset_digest.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define PRECIS_HAVE_SHA_NI_PATH 1
#else
#define PRECIS_HAVE_SHA_NI_PATH 0
#endif

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t state[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 | (uint32_t)block[4 * i + 2] << 8 | block[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

#if PRECIS_HAVE_SHA_NI_PATH
/* The x86 SHA extensions (SHA-NI: Intel since Goldmont and Ice Lake, AMD since Zen): the same
 * compression, about ten times faster, so that a run can afford the digest of its dataset's inputs
 * (hundreds of MB) at every start. STATE0 holds ABEF and STATE1 CDGH, the order sha256rnds2 takes;
 * each iteration of the inner loop does 4 rounds, with the message schedule for words 16..63
 * computed 4 at a time (sha256msg1/msg2). */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_sha_ni(uint32_t state[8], const uint8_t *data,
                                                                        size_t blocks) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128((const __m128i *)(const void *)&state[0]);
  __m128i state1 = _mm_loadu_si128((const __m128i *)(const void *)&state[4]);
  tmp = _mm_shuffle_epi32(tmp, 0xB1);          /* CDAB */
  state1 = _mm_shuffle_epi32(state1, 0x1B);    /* EFGH */
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8); /* ABEF */
  state1 = _mm_blend_epi16(state1, tmp, 0xF0); /* CDGH */
  for (; blocks > 0; blocks--, data += 64) {
    __m128i abef = state0, cdgh = state1, w[4];
    for (int j = 0; j < 4; j++)
      w[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(data + 16 * j)), byte_swap);
    for (int i = 0; i < 16; i++) {
      if (i >= 4) {
        /* W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16] for the 4 words of group i. */
        __m128i t = _mm_sha256msg1_epu32(w[i & 3], w[(i - 3) & 3]);
        t = _mm_add_epi32(t, _mm_alignr_epi8(w[(i - 1) & 3], w[(i - 2) & 3], 4));
        w[i & 3] = _mm_sha256msg2_epu32(t, w[(i - 1) & 3]);
      }
      __m128i msg = _mm_add_epi32(w[i & 3], _mm_loadu_si128((const __m128i *)(const void *)&K256[4 * i]));
      state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
      msg = _mm_shuffle_epi32(msg, 0x0E);
      state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);       /* FEBA */
  state1 = _mm_shuffle_epi32(state1, 0xB1);    /* DCHG */
  state0 = _mm_blend_epi16(tmp, state1, 0xF0); /* DCBA */
  state1 = _mm_alignr_epi8(state1, tmp, 8);    /* HGFE */
  _mm_storeu_si128((__m128i *)(void *)&state[0], state0);
  _mm_storeu_si128((__m128i *)(void *)&state[4], state1);
}

/* CPUID: SHA (leaf 7, EBX bit 29), SSSE3 and SSE4.1 (leaf 1, ECX). */
static bool cpu_has_sha_ni(void) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_SSSE3) || !(ecx & bit_SSE4_1)) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx & (1u << 29)) != 0;
}
#endif

/* -1: not decided yet; then whether compress_blocks uses SHA-NI. */
static int use_sha_ni = -1;

bool precis_sha256_set_accelerated(bool on) {
#if PRECIS_HAVE_SHA_NI_PATH
  use_sha_ni = on && cpu_has_sha_ni();
#else
  (void)on;
  use_sha_ni = 0;
#endif
  return use_sha_ni == 1;
}

static void compress_blocks(uint32_t state[8], const uint8_t *data, size_t blocks) {
  if (use_sha_ni < 0) precis_sha256_set_accelerated(true);
#if PRECIS_HAVE_SHA_NI_PATH
  if (use_sha_ni == 1) {
    compress_sha_ni(state, data, blocks);
    return;
  }
#endif
  for (; blocks > 0; blocks--, data += 64) compress(state, data);
}

void precis_sha256_init(precis_sha256 *h) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(h->state, iv, sizeof iv);
  h->length = 0;
  h->used = 0;
}

void precis_sha256_update(precis_sha256 *h, const void *data, size_t len) {
  const uint8_t *p = data;
  h->length += len;
  if (h->used) {
    size_t take = 64 - h->used < len ? 64 - h->used : len;
    memcpy(h->block + h->used, p, take);
    h->used += take;
    p += take;
    len -= take;
    if (h->used < 64) return;
    compress_blocks(h->state, h->block, 1);
    h->used = 0;
  }
  compress_blocks(h->state, p, len / 64);
  p += len / 64 * 64;
  len %= 64;
  memcpy(h->block, p, len);
  h->used = len;
}

void precis_sha256_final(precis_sha256 *h, uint8_t digest[32]) {
  uint64_t bits = h->length * 8;
  uint8_t pad = 0x80;
  precis_sha256_update(h, &pad, 1);
  uint8_t zero = 0;
  while (h->used != 56) precis_sha256_update(h, &zero, 1);
  uint8_t len_be[8];
  for (int i = 0; i < 8; i++) len_be[i] = (uint8_t)(bits >> (56 - 8 * i));
  precis_sha256_update(h, len_be, 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) digest[4 * i + j] = (uint8_t)(h->state[i] >> (24 - 8 * j));
}

void precis_sha256_hex(const uint8_t digest[32], char hex[65]) {
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

static void put_u64(precis_sha256 *h, uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(v >> (8 * i));
  precis_sha256_update(h, le, 8);
}

static void put_string(precis_sha256 *h, const char *s) {
  size_t len = s ? strlen(s) : 0;
  put_u64(h, len);
  if (len) precis_sha256_update(h, s, len);
}

/* float32 bytes in little-endian order whatever the host's order. */
static void put_floats(precis_sha256 *h, const float *v, uint64_t count) {
  if (!v) return;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  precis_sha256_update(h, v, (size_t)count * sizeof(float));
#else
  for (uint64_t i = 0; i < count; i++) {
    uint32_t bits;
    memcpy(&bits, &v[i], 4);
    uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
    precis_sha256_update(h, le, 4);
  }
#endif
}

static void put_doubles(precis_sha256 *h, const double *v, uint64_t count) {
  if (!v) return;
  for (uint64_t i = 0; i < count; i++) {
    uint64_t bits;
    memcpy(&bits, &v[i], 8);
    put_u64(h, bits); /* little-endian, like every integer of the digest */
  }
}

void precis_dataset_id_begin(precis_sha256 *h, uint64_t seed, uint64_t n_workloads) {
  precis_sha256_init(h);
  put_string(h, "precis-dataset-id-v1");
  put_u64(h, seed);
  put_u64(h, n_workloads);
}

void precis_dataset_id_add(precis_sha256 *h, const precis_workload_info *info, const precis_workload_data *data) {
  precis_dataset_id_add_header(h, info);
  uint64_t a_count = (uint64_t)info->batch * (uint64_t)info->m * (uint64_t)info->k;
  uint64_t b_count = (info->b_batched ? (uint64_t)info->batch : 1) * (uint64_t)info->k * (uint64_t)info->n;
  uint64_t calib_count = (uint64_t)info->calib_samples * (uint64_t)info->m * (uint64_t)info->k;
  /* float64 inputs hash their own bytes after a tag, so that float32 datasets keep their ids. */
  if (info->a_f64) {
    put_string(h, "a=float64");
    put_doubles(h, data->a64, a_count);
  } else {
    put_floats(h, data->a, a_count);
  }
  if (info->b_f64) {
    put_string(h, "b=float64");
    put_doubles(h, data->b64, b_count);
  } else {
    put_floats(h, data->b, b_count);
  }
  put_floats(h, data->calib_a, calib_count);
  /* Only datasets with b_ref hash it, so the ids of all others are unchanged. */
  if (data->b_ref) put_floats(h, data->b_ref, (uint64_t)info->k * (uint64_t)info->n);
  if (data->a_ref) {
    put_string(h, "a_ref");
    put_floats(h, data->a_ref, a_count);
  }
  /* Likewise the gradients, after a tag: they change every sensitivity the dataset's rows report. */
  if (data->grad) {
    put_string(h, "grad");
    put_floats(h, data->grad, (uint64_t)info->batch * (uint64_t)info->m * (uint64_t)info->n);
  }
  precis_dataset_id_add_reference(h, info);
}

void precis_dataset_id_add_reference(precis_sha256 *h, const precis_workload_info *info) {
  /* Other references, other errors: a double-double dataset is another dataset (float64 ones keep
   * the ids they always had). */
  if (info->has_c_ref_lo) put_string(h, "reference=double-double");
  /* Logit workloads add rows' KL and top-1 columns: with the attribute it is another dataset
   * (resume must not mix rows made without it); datasets without it keep their ids. */
  if (info->output_kind) {
    put_string(h, "output_kind");
    put_string(h, info->output_kind);
  }
}

void precis_dataset_id_add_floats(precis_sha256 *h, const float *values, uint64_t count) { put_floats(h, values, count); }

void precis_dataset_id_add_header(precis_sha256 *h, const precis_workload_info *info) {
  put_string(h, info->name);
  put_string(h, info->kind);
  put_u64(h, (uint64_t)info->m);
  put_u64(h, (uint64_t)info->n);
  put_u64(h, (uint64_t)info->k);
  put_u64(h, (uint64_t)info->batch);
  uint8_t batched = info->b_batched ? 1 : 0;
  precis_sha256_update(h, &batched, 1);
  put_u64(h, (uint64_t)info->calib_samples);
  put_string(h, info->a_dist);
  put_string(h, info->b_dist);
  put_string(h, info->description);
}

void precis_dataset_id_finish(precis_sha256 *h, char hex[65]) {
  uint8_t digest[32];
  precis_sha256_final(h, digest);
  precis_sha256_hex(digest, hex);
}
