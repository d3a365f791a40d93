/* Placeholder until the cuda backend lands (issue 7): the binary links cuBLASLt but has no backend
 * table yet, so --backend cuda reports that it is not built. */
#include "backend.h"

const precis_backend *precis_backend_cuda(void) { return NULL; }
