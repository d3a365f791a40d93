/* libprecis: the public C API of precis (DESIGN §15). One core, two clients: the `precis`
 * command line and the Python package (`import precis`) call these functions, which call the same
 * code the CLI runs. Everything not declared under include/precis/ is private.
 *
 *   status.h   precis_status, precis_status_str, precis_last_error, the version
 *   spec.h     recipe specs: canonical form, the presets
 *   emulate.h  quantize an operand, emulate one batched GEMM as the cpu backend does
 *   dataset.h  open and inspect a dataset, read a workload's arrays
 *   report.h   run a dataset, read a report back
 *   layer_check.h  one layer's rows of `precis run` from inputs at hand (verify)
 *   cli.h      the command line as a function */
#ifndef PRECIS_PUBLIC_PRECIS_H
#define PRECIS_PUBLIC_PRECIS_H

#include "precis/status.h"
#include "precis/spec.h"
#include "precis/emulate.h"
#include "precis/dataset.h"
#include "precis/report.h"
#include "precis/layer_check.h"
#include "precis/token_stats.h"
#include "precis/cli.h"

#endif
