/* precis gen / precis import: data from a suite, references in float64, written in the format of
 * DESIGN §4 through the dataset writer. */
#ifndef PRECIS_GENERATE_H
#define PRECIS_GENERATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "base/mpi_world.h"
#include "base/status.h"
#include "suite.h"

/* What computes float64 references on a device (gen --reference-device cuda). data/ sits below
 * kernels/ (src/layers.txt), so the CUDA side is handed in as these two functions by the caller
 * (kernels/cuda_api.h: precis_cuda_reference_device()); shapes and blocks as precis_reference_compute. */
typedef struct precis_reference_device {
  /* The workloads' `reference` text: device, compute capability, library versions. */
  precis_status (*describe)(int device, char *text, size_t len);
  precis_status (*compute)(int device, const float *a, const float *b, int64_t batch, int64_t m, int64_t n, int64_t k,
                           bool b_batched, double *c_ref, double *ab_abs);
} precis_reference_device;

typedef struct precis_gen_options {
  const char *output;
  bool force;
  int gzip_level; /* 0: none */
  bool progress;  /* a progress line on stderr */
  const char *command; /* names the progress lines, "precis COMMAND: ..."; NULL: "gen" */
  /* Under MPI (active), on rank 0: the references' blocks are dealt to every rank (the others run
   * precis_generate_worker), rank 0 writes the file. NULL: one process. */
  const precis_mpi_world *mpi;
  /* float64 references by this device (gen --reference-device cuda: cublasDgemm) on its device
   * reference_cuda_device instead of OpenBLAS; NULL: OpenBLAS. Refused for double-double references
   * (precis_gen_check_reference_device). */
  const precis_reference_device *reference_cuda;
  int reference_cuda_device;
} precis_gen_options;

/* Refuses --reference-device cuda for a suite with double-double references (CPU only). */
precis_status precis_gen_check_reference_device(const precis_suite *suite, bool cuda);

/* Generates every workload of the suite into options->output; dataset_id (65 bytes) receives the
 * id written. */
precis_status precis_generate(const precis_suite *suite, const precis_gen_options *options, char dataset_id[65]);
/* The same out of core (gen --tile-rows): tile_rows rows of a (and of c_ref, ab_abs) at a time,
 * rounded up to whole PRECIS_REFERENCE_BLOCK_ROWS; the
 * file is the one precis_generate writes. Peak memory ~ 12·k·n bytes (b and its float64 copy) plus
 * tile_rows·(12·k + 16·n) (+ 8·n for a double-double reference) instead of growing with m·batch.
 * Workloads whose a or b come from a file are generated in core. tile_rows 0: in core, except
 * under MPI (options->mpi), where a tile is a whole group of rows. */
precis_status precis_generate_tiled(const precis_suite *suite, const precis_gen_options *options, int64_t tile_rows,
                                    char dataset_id[65]);

/* Every MPI rank other than 0 of a gen: computes the reference blocks dealt to it (the block j of
 * the walk over the suite's generated workloads belongs to rank j mod size) from inputs it
 * generates itself, and sends them to rank 0, which runs precis_generate_tiled with options->mpi.
 * Stops when rank 0 fails; its own failure is sent to rank 0, which reports it (suite NULL: this
 * rank cannot take part, for the reason in precis_last_error()). */
precis_status precis_generate_worker(const precis_suite *suite, const precis_mpi_world *mpi,
                                     const precis_reference_device *reference_cuda, int reference_cuda_device);

/* References are computed by GEMMs of this many rows of one sample at a time (the last block of a
 * sample may be shorter); gen --tile-rows rounds its tiles up to whole blocks. */
#define PRECIS_REFERENCE_BLOCK_ROWS 256
/* ... and of this many columns of b (the last block may be narrower): a wide b is widened to
 * float64 a block at a time, 8·k·4096 bytes, not 8·k·n. Narrower b are one block, as before. */
#define PRECIS_REFERENCE_BLOCK_COLS 4096

/* c_ref = a.b and (when ab_abs is not NULL) ab_abs = |a|.|b|, accumulated in float64 by OpenBLAS
 * dgemm from the float32 values (each product of two float32 values is exact in float64).
 * a is [batch, m, k]; b is [k, n], or [batch, k, n] when b_batched. Needs 8·(256·k + k·min(n, 4096))
 * bytes of float64 copies, kept for the next call (precis_reference_release). */
precis_status precis_reference_compute(const float *a, const float *b, int64_t batch, int64_t m, int64_t n, int64_t k,
                                       bool b_batched, double *c_ref, double *ab_abs);
/* The same with b given as its transpose w [n, k] (one for the batch: a linear layer's W): the same
 * dgemm calls on the same float64 copies of b's column blocks, so the same bits. */
precis_status precis_reference_compute_nk(const float *a, const float *w, int64_t batch, int64_t m, int64_t n, int64_t k,
                                          double *c_ref, double *ab_abs);
/* Frees the float64 copies precis_reference_compute keeps between calls (of this thread). */
void precis_reference_release(void);
/* The same when they take more than keep_bytes; smaller ones stay for the next call. */
void precis_reference_trim(size_t keep_bytes);

/* The same from float64 inputs (gen --inputs float64): a and b as stored, |a| and |b| exact. */
precis_status precis_reference_compute_f64(const double *a, const double *b, int64_t batch, int64_t m, int64_t n,
                                           int64_t k, bool b_batched, double *c_ref, double *ab_abs);

/* The text stored in each workload's `reference` attribute. */
const char *precis_reference_method(void);

/* c_hi + c_lo = a.b as double-double: each product of two float32 values is exact in float64 and
 * the k products are summed by cascaded TwoSum (Ogita, Rump & Oishi 2005, Sum2) with the errors
 * kept apart, then renormalized so that |c_lo| <= ulp(c_hi)/2. |c_hi + c_lo - a.b| <=
 * precis_reference_dd_bound(k) · |a|.|b| elementwise. Shapes as precis_reference_compute. */
precis_status precis_reference_compute_dd(const float *a, const float *b, int64_t batch, int64_t m, int64_t n,
                                          int64_t k, bool b_batched, double *c_hi, double *c_lo);
/* The same from float64 inputs: each product split exactly into float64 + error by TwoProduct (fma;
 * exact unless it underflows) and both summed by cascaded TwoSum (Dot2), |c_hi + c_lo - a.b| <=
 * precis_reference_dd_bound_f64(k) · |a|.|b|. */
precis_status precis_reference_compute_dd_f64(const double *a, const double *b, int64_t batch, int64_t m, int64_t n,
                                              int64_t k, bool b_batched, double *c_hi, double *c_lo);
/* gamma_{k-1}^2 (Sum2's bound before the final rounding), gamma_k^2 (Dot2's) and gamma_k of a
 * float64 dgemm. */
double precis_reference_dd_bound(int64_t k);
double precis_reference_dd_bound_f64(int64_t k);
double precis_reference_f64_bound(int64_t k);

/* Reads a matrix for a `file` distribution: an HDF5 dataset (object starting with '/') or a
 * safetensors tensor, widened to float32. rank is 2 or 3; relative paths are taken from base_dir. */
precis_status precis_read_matrix_file(const precis_dist *d, const char *base_dir, float **data, int *rank,
                                      int64_t shape[3]);

#endif
