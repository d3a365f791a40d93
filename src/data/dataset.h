/* Datasets: HDF5 format_version 1 (DESIGN §4, docs/dataset-format.md). Opening validates every
 * attribute, type, rank and shape and reports the first mismatch by path; data are read one
 * workload at a time (Fletcher32 checksums are verified by HDF5 on every read). */
#ifndef PRECIS_DATASET_H
#define PRECIS_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define PRECIS_DATASET_FORMAT "precis-dataset"
#define PRECIS_DATASET_FORMAT_VERSION 1

typedef struct precis_workload_info {
  char *name;
  char *kind;        /* "gemm" */
  char *description; /* may be empty, never NULL */
  char *a_dist;
  char *b_dist;
  int64_t m, n, k, batch;
  bool b_batched;        /* b is [batch, k, n] (else [k, n], shared across the batch) */
  int64_t calib_samples; /* rows of /calib/a's first dimension; 0 when absent */
  /* Optional attribute `reference` (how c_ref was computed); "" when the file does not say. */
  char *reference;
  /* Optional attributes of a model's layer (precis import --model); NULL when absent. `layer` is
   * the PyTorch module name, `source` a JSON object {file, tensor, dtype, sha256} of its weight. */
  char *layer;
  char *source;
  /* Optional attribute output_kind: "logits" when each row of the output [m, n] is one token's logits
   * over a vocabulary of n (a model's lm_head, precis import --model): rows of a run then also carry
   * KL divergence and top-1 agreement (docs/criteria.md). NULL when absent. */
  char *output_kind;
  bool has_grad;  /* /grad exists: dL/dY of the model's loss at this layer's output, [batch, m, n] float32 (import --gradients) */
  bool has_b_ref; /* /b_ref exists: c_ref and ab_abs come from it, not from b (precis import --converted) */
  bool has_a_ref; /* /a_ref exists: c_ref and ab_abs come from it, not from a (the deployed scheme's activations) */
  /* How good c_ref is (docs/high-precision.md): "float64" (dgemm; also when the file does not say)
   * or "double-double" (c_ref + c_ref_lo, then has_c_ref_lo); reference_error_bound: B with
   * |reference - exact a·b| <= B · ab_abs elementwise (NaN when the file does not say). */
  char *reference_precision;
  double reference_error_bound;
  bool has_c_ref_lo;
  /* a / b stored as float64 (DESIGN §13): the loaded data hold them in a64 / b64, and in a / b
   * their float32 rounding (RNE), which is what recipes with narrower inputs read. */
  bool a_f64, b_f64;
  bool checksummed;       /* every dataset of the workload has the Fletcher32 filter */
  bool compressed;        /* some dataset is gzip-compressed */
  uint64_t stored_bytes;  /* bytes the workload's datasets occupy in the file */
} precis_workload_info;

typedef struct precis_workload_data {
  float *a;       /* [batch, m, k] */
  float *b;       /* [k, n] or [batch, k, n] */
  double *c_ref;  /* [batch, m, n] */
  double *ab_abs; /* [batch, m, n] */
  float *calib_a; /* [calib_samples, m, k] or NULL */
  float *b_ref;   /* [k, n] or NULL: the weights c_ref was computed from when b holds others (a
                     converted checkpoint's weights evaluated against the original's references) */
  float *a_ref;   /* [batch, m, k] or NULL: the activations c_ref was computed from when a holds others (a
                     converted checkpoint's deployed scheme: a quantized as its producer declared) */
  float *grad;    /* [batch, m, n] dL/dY per held-out sample (info has_grad), or NULL */
  double *c_ref_lo; /* [batch, m, n] low part of a double-double reference (c_ref + c_ref_lo), or NULL */
  double *a64, *b64; /* float64 inputs as stored (info a_f64 / b_f64), else NULL */
  /* b (and b64) hold each matrix as [n, k], B's transpose (W of a linear layer, as libprecis's callers
   * hand it over) rather than [k, n]. Only precis_cpu_emulate(_target) reads it; a dataset never has it. */
  int b_nk;
  /* c_ref, ab_abs, c_ref_lo and grad hold samples [ref_first, ref_first + ref_samples) of the batch,
   * in room for ref_capacity samples: all of them after precis_dataset_load, one block after
   * precis_dataset_load_blocked (precis_dataset_read_references reads another). Data made
   * otherwise hold the whole batch and may leave these 0. */
  int64_t ref_first, ref_samples, ref_capacity;
} precis_workload_data;

typedef struct precis_dataset {
  char *path;
  char *dataset_id;      /* the writer's label (the root attribute dataset_id), or NULL when it has none;
                            precis's own datasets label themselves with the digest of their contents */
  char content_id[65];   /* the digest of the contents once precis_dataset_content_id computed it, else "" */
  char *generator;
  char *created_utc;
  uint64_t seed;
  char *suite;   /* the YAML text it was made from (may be empty) */
  char *model_config; /* optional root attribute: the model's config.json in brief (import --model); NULL when absent */
  size_t n_workloads;
  precis_workload_info *workloads;
  int64_t file_handle; /* hid_t, kept opaque here */
} precis_dataset;

/* Opens and validates the whole structure (not the data: see precis_dataset_verify_data). The file is
 * first opened and validated in a child process (src/data/hdf5_guard.h): a damaged file that crashes
 * or hangs libhdf5 there is refused with PRECIS_E_INPUT "PATH: corrupt file (the HDF5 library failed
 * reading it)". */
precis_status precis_dataset_open(const char *path, precis_dataset **out);
/* The same in this process, without the child (what the child runs). */
precis_status precis_dataset_open_in_process(const char *path, precis_dataset **out);
/* Reads every dataset in full so that each chunk's checksum is verified (precis inspect). */
precis_status precis_dataset_verify_data(precis_dataset *ds);
/* The same, and recomputes dataset_id from the contents (dataset_digest.h) into id_hex. */
precis_status precis_dataset_verify_data_id(precis_dataset *ds, char id_hex[65]);
/* The dataset's identity: the SHA-256 digest of its contents (dataset_digest.h, docs/dataset-format.md)
 * in hex, computed from the inputs on the first call (one read of a, b and calib/a; the references
 * are not read) and kept in ds->content_id. *id points into ds. A journal and a report identify
 * their dataset by it, whatever label the writer gave the file. */
precis_status precis_dataset_content_id(precis_dataset *ds, const char **id);
/* Bytes the workload's arrays take in memory (a, b, c_ref, ab_abs, calib/a). */
uint64_t precis_workload_bytes(const precis_workload_info *info);
/* Reads a workload whole and checks it: inputs finite, c_ref_lo a low part, grad finite, c_ref and
 * ab_abs finite and, at a spread of entries, what a float64 accumulation of the inputs gives. The
 * first failing check is the error (PRECIS_E_INPUT naming the file, the array and the element). */
precis_status precis_dataset_load(precis_dataset *ds, size_t index, precis_workload_data *out);
/* Bytes of one sample's references in memory: c_ref and ab_abs, c_ref_lo and grad when present. */
uint64_t precis_reference_sample_bytes(const precis_workload_info *w);
/* Samples per block when the references may take `budget` bytes: at least 1, at most the batch. */
int64_t precis_reference_block_samples(const precis_workload_info *w, uint64_t budget);
/* precis_dataset_load with the references (c_ref, ab_abs, c_ref_lo, grad) held `block` samples at a
 * time (block < 1 or above the batch: all of them): the inputs are read whole, the references block
 * by block, and every check of precis_dataset_load is made with the same error (the one a whole
 * load reports first, whatever the block). out keeps the last block read. */
precis_status precis_dataset_load_blocked(precis_dataset *ds, size_t index, int64_t block, precis_workload_data *out);
/* Reads samples [first, first + count) of the references into out (loaded by precis_dataset_load_blocked,
 * count at most its block), checked as the load checks them; nothing when out holds them already. */
precis_status precis_dataset_read_references(precis_dataset *ds, size_t index, int64_t first, int64_t count,
                                             precis_workload_data *out);
void precis_workload_data_free(precis_workload_data *d);
void precis_dataset_close(precis_dataset *ds);

/* Writer used by gen and import: the file is created under a temporary name next to path and
 * renamed into place by precis_dataset_writer_commit; abort (or any failure) removes it. */
typedef struct precis_dataset_writer precis_dataset_writer;
typedef struct precis_dataset_write_options {
  bool force;     /* replace an existing file */
  int gzip_level; /* 0: no compression; 1..9: deflate */
} precis_dataset_write_options;
typedef struct precis_dataset_root_attrs {
  const char *generator;
  const char *created_utc;
  uint64_t seed;
  const char *suite;
  const char *dataset_id;
  const char *model_config; /* NULL, or the model's config.json in brief (precis_model_read_config) */
} precis_dataset_root_attrs;
precis_status precis_dataset_writer_open(const char *path, const precis_dataset_write_options *options,
                                         precis_dataset_writer **out);
/* Writes /workloads/<info->name> (name, kind, m, n, k, batch, b_batched, calib_samples,
 * description, a_dist, b_dist, reference, layer and source are used) with data->calib_a when
 * calib_samples > 0 and data->b_ref when not NULL with data->calib_a when calib_samples > 0. */
precis_status precis_dataset_writer_add(precis_dataset_writer *w, const precis_workload_info *info,
                                        const precis_workload_data *data);
/* Out-of-core writing of one workload (gen --tile-rows, import --model): begin creates its group, attributes and
 * empty datasets (a, b, c_ref, ab_abs, calib/a when calib_samples > 0, c_ref_lo when has_c_ref_lo,
 * grad when has_grad); write_rows fills rows [first_row, first_row + n_rows) of sample `sample` of
 * one of them ("a", "b", "c_ref", "ab_abs", "calib/a", "c_ref_lo", "grad"; a 2-D b ignores sample);
 * end closes them. Stored as writer_add stores the whole. */
precis_status precis_dataset_writer_begin(precis_dataset_writer *w, const precis_workload_info *info);
precis_status precis_dataset_writer_rows(precis_dataset_writer *w, const char *array, int64_t sample, int64_t first_row,
                                         int64_t n_rows, const void *values);
precis_status precis_dataset_writer_end(precis_dataset_writer *w);
/* The next begin stores no a (nor calib/a) of its own: they become hard links to those of workload
 * `from`, written before with the same values (import --model: q/k/v and gate/up share an input),
 * so each is stored once and read the same under every name. */
precis_status precis_dataset_writer_share_a(precis_dataset_writer *w, const char *from);
precis_status precis_dataset_writer_commit(precis_dataset_writer *w, const precis_dataset_root_attrs *root);
void precis_dataset_writer_abort(precis_dataset_writer *w);
/* Workload names become HDF5 group names: non-empty, no '/', not made of dots only. */
precis_status precis_dataset_check_name(const char *name);

/* Writer for evaluated outputs (--save-outputs): /workloads/<name>/<recipe>/c as float32
 * [batch, m, n], written to a temporary file and renamed by close when ok. */
typedef struct precis_outputs_writer precis_outputs_writer;
precis_status precis_outputs_open(const char *path, bool force, const char *dataset_id, precis_outputs_writer **out);
precis_status precis_outputs_write(precis_outputs_writer *w, const char *workload, const char *recipe, const float *c,
                                   int64_t batch, int64_t m, int64_t n);
/* The same for a float64 output (out=fp64): c is written as float64. */
precis_status precis_outputs_write_f64(precis_outputs_writer *w, const char *workload, const char *recipe,
                                       const double *c, int64_t batch, int64_t m, int64_t n);
/* commit: rename into place (true) or discard the temporary file (false). */
precis_status precis_outputs_close(precis_outputs_writer *w, bool commit);

#endif
