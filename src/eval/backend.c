#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void precis_case_output_init(precis_case_output *out) {
  memset(out, 0, sizeof *out);
  out->status = PRECIS_ROW_OK;
  out->clipped_fraction = NAN;
  out->time.min_ms = out->time.median_ms = out->time.mean_ms = NAN;
  out->time.p95_ms = out->time.p99_ms = out->time.stdev_ms = NAN;
  out->time.convert_ms = out->time.e2e_median_ms = NAN;
  out->memory = (precis_memory){-1, -1, -1, -1, -1, -1};
}

void precis_case_output_free(precis_case_output *out) {
  free(out->c);
  free(out->c64);
  free(out->time.samples_ms);
  precis_kv_free(&out->details);
  precis_case_output_init(out);
}
