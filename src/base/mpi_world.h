/* MPI for `mpirun -np N precis run ...` (DESIGN §13, docs/scale-out.md). Optional: built with
 * PRECIS_MPI (CMake) when an MPI library is found; without it these functions say that MPI is not
 * built. Only the few collectives a run needs: each rank runs its part in a worker process and
 * rank 0 gathers the parts' journals (their text) and how each worker ended. */
#ifndef PRECIS_MPI_WORLD_H
#define PRECIS_MPI_WORLD_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef struct precis_mpi_world {
  bool active;    /* MPI_Init was called and the job has more than one rank */
  bool joined;    /* MPI_Init was called (MPI_Finalize is due) */
  int rank, size; /* in MPI_COMM_WORLD */
  int local_rank; /* among the ranks of this node: the GPU it drives */
} precis_mpi_world;

/* true when this binary was built with MPI. */
bool precis_mpi_built(void);
/* The number of ranks an MPI launcher (mpirun, srun) says this process is one of, from its
 * environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE... ); 0 when not started by one. Read
 * before MPI_Init, so that a plain `precis run` never initializes MPI. */
int precis_mpi_launcher_size(void);
/* Joins the job when precis_mpi_launcher_size() > 1. */
precis_status precis_mpi_join(precis_mpi_world *w);
/* MPI_Abort of the whole job with `code` (when active; else nothing): for a rank that must not
 * wait in a collective for ranks that may be gone. */
void precis_mpi_abort(const precis_mpi_world *w, int code);
/* MPI_Finalize, when joined. */
void precis_mpi_leave(precis_mpi_world *w);
/* Rank 0's value on every rank. */
int precis_mpi_bcast_int(const precis_mpi_world *w, int value);
/* The logical OR of every rank's flag, on every rank. */
bool precis_mpi_any(const precis_mpi_world *w, bool flag);
/* Every rank's text (len bytes) at rank 0: texts[r] malloc'ed and NUL-terminated, lens[r] its
 * length; both arrays have w->size entries (other ranks: untouched). texts NULL: taken part in,
 * and dropped (a rank 0 out of memory must still take part, or the others wait). */
precis_status precis_mpi_gather_text(const precis_mpi_world *w, const char *text, size_t len, char **texts,
                                     size_t *lens);

/* Rank 0's bytes on every rank (*len of them): the others receive a malloc'ed, NUL-terminated copy
 * in *data (rank 0's pointer is left as it is). */
precis_status precis_mpi_bcast_bytes(const precis_mpi_world *w, char **data, size_t *len);
/* Point to point, for gen's references (docs/scale-out.md). A message of `bytes` (< 2 GiB) to
 * `dest` with `tag`. */
precis_status precis_mpi_send(const precis_mpi_world *w, int dest, int tag, const void *data, size_t bytes);
/* The next message from `source`, any tag, into buf (cap bytes): *tag and *bytes receive its tag
 * and size (a message larger than cap is received, cut to cap, with *bytes its full size). Waits
 * by polling, so that a SIGINT or SIGTERM (mpirun ending the job because another rank died) is
 * noticed: PRECIS_E_INTERRUPTED, the message left unreceived. */
precis_status precis_mpi_recv(const precis_mpi_world *w, int source, int *tag, void *buf, size_t cap, size_t *bytes);
/* true when a message from `source` with `tag` is waiting (not received). */
bool precis_mpi_pending(const precis_mpi_world *w, int source, int tag);

#endif
