/* Crash-proof parsing of HDF5 files precis did not write (docs/robustness.md). HDF5 1.10 does not
 * check every structure it reads: a damaged file can make the library crash or loop forever. Such a
 * file is first opened and validated in a child process; a crash or a hang there becomes a clear
 * error instead of the death of precis (and of a run's progress). */
#ifndef PRECIS_HDF5_GUARD_H
#define PRECIS_HDF5_GUARD_H

#include "base/status.h"

/* What the child runs on the file: PRECIS_OK or a clean refusal (either lets the parent go on: it
 * then gets the same answer itself, without risk). */
typedef precis_status (*precis_hdf5_check_fn)(const char *path, const void *arg);

/* Runs check(path, arg) in a child process and waits for it, at most precis_hdf5_guard_timeout_s()
 * seconds (then the child is killed). PRECIS_E_INPUT "PATH: corrupt file (the HDF5 library failed
 * reading it)..." when the child crashed (a signal, or a sanitizer's report) or did not finish in
 * time; PRECIS_OK otherwise, also when the check refused the file cleanly or the child could not be
 * started (the caller's own validation, in process, says what is wrong). */
precis_status precis_hdf5_guard(const char *path, precis_hdf5_check_fn check, const void *arg);

/* The time limit: 20 s, or PRECIS_HDF5_CHECK_TIMEOUT (seconds, > 0) from the environment. The check
 * reads metadata only (attributes, object headers, chunk indexes), not the data. */
double precis_hdf5_guard_timeout_s(void);

/* The checks: a precis dataset (the validator's open, then every chunk index of every dataset in the
 * file), and one dataset of any HDF5 file (precis import / gen sources: `object` is its path). */
precis_status precis_hdf5_check_dataset(const char *path, const void *unused);
precis_status precis_hdf5_check_object(const char *path, const void *object);

/* Walks the chunk index of every dataset under `file` (an hid_t): the B-tree nodes a read would
 * traverse, without reading the chunks. */
precis_status precis_hdf5_walk_chunk_indexes(const char *path, long long file);

#endif
