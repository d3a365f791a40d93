/* dataset_id: the SHA-256 (FIPS 180-4) of a canonical serialization of a dataset's inputs.
 *
 * What is hashed, in order (integers little-endian, strings as a u64 byte length then the bytes):
 *   "precis-dataset-id-v1", seed (u64), number of workloads (u64), then per workload in file order:
 *   name, kind, m, n, k, batch (i64), b batched (u8), calibration samples (i64), a_dist, b_dist,
 *   description, then the raw float32 bytes of a, b and calib/a, and of b_ref when the workload has one.
 * c_ref and ab_abs are deliberately not hashed: they are a function of a and b, but OpenBLAS's
 * summation order (hence their last bits) depends on the CPU's kernel, and the id must be the same
 * on every machine for the same inputs. Their integrity is guarded by the Fletcher32 checksums
 * and by the spot check of c_ref against a·b done on load. created_utc and generator are not
 * hashed either (they differ between runs of the same suite). */
#ifndef PRECIS_DATASET_DIGEST_H
#define PRECIS_DATASET_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"

typedef struct precis_sha256 {
  uint32_t state[8];
  uint64_t length;
  uint8_t block[64];
  size_t used;
} precis_sha256;

void precis_sha256_init(precis_sha256 *h);
void precis_sha256_update(precis_sha256 *h, const void *data, size_t len);
void precis_sha256_final(precis_sha256 *h, uint8_t digest[32]);
void precis_sha256_hex(const uint8_t digest[32], char hex[65]);
/* Whether the compression uses the CPU's SHA instructions (SHA-NI) when it has them: on by default;
 * tests turn it off to compare the two. Returns whether they are used now. */
bool precis_sha256_set_accelerated(bool on);

void precis_dataset_id_begin(precis_sha256 *h, uint64_t seed, uint64_t n_workloads);
void precis_dataset_id_add(precis_sha256 *h, const precis_workload_info *info, const precis_workload_data *data);
/* The same in pieces, for out-of-core generation: the workload's header, then a, b and calib/a as
 * consecutive runs of values (hashing is sequential, so tiles in order hash as the whole). */
void precis_dataset_id_add_header(precis_sha256 *h, const precis_workload_info *info);
void precis_dataset_id_add_floats(precis_sha256 *h, const float *values, uint64_t count);
/* After a workload's arrays: what its reference adds to the id (a double-double one's tag). */
void precis_dataset_id_add_reference(precis_sha256 *h, const precis_workload_info *info);
void precis_dataset_id_finish(precis_sha256 *h, char hex[65]);

#endif
