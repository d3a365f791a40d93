/* libFuzzer target: the criteria expression parser (--require, accept/recommend). Besides not
 * crashing, a parsed criterion must survive its own printed form: format, then parse again, gives
 * the same metric, operator and value (the report prints criteria this way and compare reads them
 * back). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/criteria.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  precis_criterion parsed;
  if (precis_criterion_parse(text, &parsed) == PRECIS_OK) {
    char printed[128];
    precis_criterion_format(&parsed, printed, sizeof printed);
    precis_criterion again;
    if (precis_criterion_parse(printed, &again) != PRECIS_OK || again.metric != parsed.metric || again.op != parsed.op ||
        again.value != parsed.value)
      abort(); /* the printed form does not read back */
  }
  free(text);
  return 0;
}
