/* precis merge: the reports of the parts of one run (`precis run --shard I/N`, one directory each)
 * joined into the report that one run would have written (DESIGN §13, docs/scale-out.md): rows in
 * dataset order, every case exactly once, each row still saying where it ran, and each part's
 * environment kept under environment.parts. */
#ifndef PRECIS_MERGE_H
#define PRECIS_MERGE_H

#include <stddef.h>

#include "results.h"
#include "base/status.h"

/* parts[i] was read from names[i] (used in messages). Refused with PRECIS_E_INPUT and a message
 * naming the field and the parts: a report without settings.shard, parts of different splits,
 * a part missing or given twice, different datasets (dataset.dataset_id), different settings
 * (settings.KEY), a part that is incomplete, a case missing or found twice. Rows are moved out of
 * parts. *warnings receives one line per hardware or software difference between the parts
 * (malloc'ed, NULL when none). */
precis_status precis_merge_reports(precis_report *parts, const char *const *names, size_t n_parts, precis_report *out,
                                   char **warnings);

#endif
