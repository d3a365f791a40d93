/* libprecis: version and memory hand-over (include/precis/status.h). */
#include <stdlib.h>

#include "precis/status.h"
#include "precis_version.h"

void precis_free(void *p) { free(p); }
const char *precis_version(void) { return PRECIS_VERSION; }
const char *precis_commit(void) { return PRECIS_COMMIT; }
