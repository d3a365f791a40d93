/* libprecis: version and memory hand-over (include/precis/status.h). */
#include <stdlib.h>

#include "precis/status.h"
#include "precis_version.h"
#include "data/generate.h"
#include "eval/host_memory.h"

void precis_free(void *p) { free(p); }
const char *precis_version(void) { return PRECIS_VERSION; }
const char *precis_commit(void) { return PRECIS_COMMIT; }

void precis_release_memory(void) {
  precis_tracked_cache_release();
  precis_reference_release(); /* the float64 copies a layer check keeps for the next (this thread's) */
  precis_release_free_memory(0); /* freed chunks inside the heap (not only its top) go back by madvise */
}
