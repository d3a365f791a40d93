/* MPI for `mpirun -np N precis run ...` (DESIGN §13, docs/scale-out.md). Optional: built with
 * PRECIS_MPI (CMake) when an MPI library is found; without it these functions say that MPI is not
 * built. Only the few collectives a run needs: each rank runs its part in a worker process and
 * rank 0 gathers the parts' journals (their text) and how each worker ended. */
#ifndef PRECIS_MPI_WORLD_H
#define PRECIS_MPI_WORLD_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

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
/* MPI_Finalize, when joined. */
void precis_mpi_leave(precis_mpi_world *w);
/* Rank 0's value on every rank. */
int precis_mpi_bcast_int(const precis_mpi_world *w, int value);
/* The logical OR of every rank's flag, on every rank. */
bool precis_mpi_any(const precis_mpi_world *w, bool flag);
/* Every rank's text (len bytes) at rank 0: texts[r] malloc'ed and NUL-terminated, lens[r] its
 * length; both arrays have w->size entries (other ranks: untouched). */
precis_status precis_mpi_gather_text(const precis_mpi_world *w, const char *text, size_t len, char **texts,
                                     size_t *lens);

#endif
