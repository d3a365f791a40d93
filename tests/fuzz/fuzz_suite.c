/* libFuzzer target: the YAML suite parser (precis gen SUITE.yaml). A suite that parses is then
 * rewritten with --seed/--tokens (precis_suite_override edits the text and parses it again), which
 * must also succeed or fail cleanly. Nothing is generated: `file` operands are only parsed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/suite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 65536) return 0;
  precis_suite suite;
  memset(&suite, 0, sizeof suite);
  if (precis_suite_parse((const char *)data, size, "fuzz.yaml", ".", &suite) == PRECIS_OK) {
    if (suite.n_workloads == 0) abort(); /* a parsed suite has at least one workload */
    for (size_t i = 0; i < suite.n_workloads; i++) {
      const precis_suite_workload *w = &suite.workloads[i];
      if (w->m < 1 || w->n < 1 || w->k < 1 || w->batch < 1 || w->calib < 0 || !w->name || !w->name[0]) abort();
    }
    uint64_t seed = size;
    int64_t tokens = 1 + (int64_t)(size % 64);
    (void)precis_suite_override(&suite, &seed, (size & 1) ? &tokens : NULL);
  }
  precis_suite_free(&suite);
  return 0;
}
