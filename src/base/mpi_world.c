#include "mpi_world.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PRECIS_HAVE_MPI
#include <mpi.h>
#endif

int precis_mpi_launcher_size(void) {
  /* Open MPI's mpirun; MPICH/Hydra and Slurm's PMI-2; PMIx (srun --mpi=pmix, Open MPI 5). */
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
  for (const char *const *v = vars; *v; v++) {
    const char *text = getenv(*v);
    if (text && *text) {
      long n = strtol(text, NULL, 10);
      if (n > 0 && n < INT_MAX) return (int)n;
    }
  }
  return 0;
}

#ifdef PRECIS_HAVE_MPI

bool precis_mpi_built(void) { return true; }

precis_status precis_mpi_join(precis_mpi_world *w) {
  memset(w, 0, sizeof *w);
  w->size = 1;
  if (precis_mpi_launcher_size() <= 1) return PRECIS_OK;
  if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return precis_fail(PRECIS_E_RUNTIME, "MPI_Init failed");
  w->joined = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w->size);
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_rank(node, &w->local_rank);
    MPI_Comm_free(&node);
  }
  w->active = w->size > 1;
  return PRECIS_OK;
}

void precis_mpi_leave(precis_mpi_world *w) {
  if (w->joined) MPI_Finalize();
  w->joined = w->active = false;
}

void precis_mpi_abort(const precis_mpi_world *w, int code) {
  if (w->active) MPI_Abort(MPI_COMM_WORLD, code);
}

int precis_mpi_bcast_int(const precis_mpi_world *w, int value) {
  if (!w->active) return value;
  MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return value;
}

bool precis_mpi_any(const precis_mpi_world *w, bool flag) {
  if (!w->active) return flag;
  int mine = flag, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return any != 0;
}

precis_status precis_mpi_gather_text(const precis_mpi_world *w, const char *text, size_t len, char **texts,
                                     size_t *lens) {
  precis_status st = PRECIS_OK;
  /* A journal over 2 GiB (MPI's int counts) is sent as empty; rank 0 then reads it from the file. */
  int mine = len < (size_t)INT_MAX ? (int)len : 0;
  int *counts = NULL, *offsets = NULL;
  char *all = NULL;
  if (w->rank == 0) {
    counts = calloc((size_t)w->size, sizeof *counts);
    offsets = calloc((size_t)w->size, sizeof *offsets);
    if (!counts || !offsets) st = precis_fail(PRECIS_E_NOMEM, "out of memory gathering the ranks' journals");
  }
  /* Every rank takes part in both collectives, also after a failure of rank 0, or the others hang. */
  MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
  long long total = 0;
  if (w->rank == 0 && st == PRECIS_OK) {
    for (int r = 0; r < w->size; r++) {
      offsets[r] = (int)total;
      total += counts[r];
    }
    if (total >= INT_MAX) {
      st = precis_fail(PRECIS_E_RUNTIME, "the ranks' journals (%lld bytes) exceed what one MPI_Gatherv carries", total);
      total = 0;
      memset(counts, 0, (size_t)w->size * sizeof *counts);
      memset(offsets, 0, (size_t)w->size * sizeof *offsets);
    }
    all = malloc((size_t)total + 1);
    if (!all && st == PRECIS_OK) st = precis_fail(PRECIS_E_NOMEM, "out of memory gathering the ranks' journals");
  }
  MPI_Gatherv(text, mine, MPI_CHAR, all, counts, offsets, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (w->rank == 0 && st == PRECIS_OK && texts) {
    for (int r = 0; r < w->size; r++) {
      texts[r] = malloc((size_t)counts[r] + 1);
      if (!texts[r]) {
        st = precis_fail(PRECIS_E_NOMEM, "out of memory gathering the ranks' journals");
        break;
      }
      memcpy(texts[r], all + offsets[r], (size_t)counts[r]);
      texts[r][counts[r]] = '\0';
      lens[r] = (size_t)counts[r];
    }
  }
  free(all);
  free(counts);
  free(offsets);
  return st;
}

precis_status precis_mpi_bcast_bytes(const precis_mpi_world *w, char **data, size_t *len) {
  if (!w->active) return PRECIS_OK;
  long long n = w->rank == 0 ? (long long)*len : 0;
  if (n >= INT_MAX) n = -1; /* every rank must learn of the refusal, or the others wait */
  MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  if (n < 0) return precis_fail(PRECIS_E_INPUT, "%zu bytes exceed what one MPI_Bcast carries", *len);
  char *buffer = w->rank == 0 ? *data : malloc((size_t)n + 1);
  /* A rank out of memory still takes part (into a byte of its own), then fails. */
  char spare;
  MPI_Bcast(buffer ? buffer : &spare, buffer ? (int)n : 0, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (w->rank == 0) return PRECIS_OK;
  if (!buffer) return precis_fail(PRECIS_E_NOMEM, "out of memory receiving %lld bytes from MPI rank 0", n);
  buffer[n] = '\0';
  *data = buffer;
  *len = (size_t)n;
  return PRECIS_OK;
}

precis_status precis_mpi_send(const precis_mpi_world *w, int dest, int tag, const void *data, size_t bytes) {
  if (!w->active) return precis_fail(PRECIS_E_RUNTIME, "MPI: not in a job of several ranks");
  if (bytes >= INT_MAX)
    return precis_fail(PRECIS_E_INPUT, "MPI: a message of %zu bytes is over what one MPI_Send carries (2 GiB)", bytes);
  if (MPI_Send(data, (int)bytes, MPI_BYTE, dest, tag, MPI_COMM_WORLD) != MPI_SUCCESS)
    return precis_fail(PRECIS_E_RUNTIME, "MPI_Send to rank %d failed", dest);
  return PRECIS_OK;
}

precis_status precis_mpi_recv(const precis_mpi_world *w, int source, int *tag, void *buf, size_t cap, size_t *bytes) {
  if (!w->active) return precis_fail(PRECIS_E_RUNTIME, "MPI: not in a job of several ranks");
  MPI_Status status;
  int ready = 0;
  /* A blocking MPI_Recv would not return on a signal: poll, 0.2 ms apart, the interrupt flag in
   * between (the handler only sets it). */
  for (;;) {
    if (MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &ready, &status) != MPI_SUCCESS)
      return precis_fail(PRECIS_E_RUNTIME, "MPI_Iprobe of rank %d failed", source);
    if (ready) break;
    if (precis_interrupt_signal)
      return precis_fail(PRECIS_E_INTERRUPTED, "signal %d while waiting for MPI rank %d (mpirun ends the job when a "
                         "rank dies or the job is stopped)", (int)precis_interrupt_signal, source);
    nanosleep(&(struct timespec){0, 200000}, NULL);
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  *tag = status.MPI_TAG;
  *bytes = (size_t)count;
  void *into = (size_t)count <= cap ? buf : malloc((size_t)count);
  if (!into) return precis_fail(PRECIS_E_NOMEM, "out of memory receiving %d bytes from MPI rank %d", count, source);
  int rc = MPI_Recv(into, count, MPI_BYTE, source, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (into != buf) {
    memcpy(buf, into, cap);
    free(into);
  }
  if (rc != MPI_SUCCESS) return precis_fail(PRECIS_E_RUNTIME, "MPI_Recv from rank %d failed", source);
  return PRECIS_OK;
}

bool precis_mpi_pending(const precis_mpi_world *w, int source, int tag) {
  if (!w->active) return false;
  int ready = 0;
  MPI_Iprobe(source, tag, MPI_COMM_WORLD, &ready, MPI_STATUS_IGNORE);
  return ready != 0;
}

#else

bool precis_mpi_built(void) { return false; }

precis_status precis_mpi_join(precis_mpi_world *w) {
  memset(w, 0, sizeof *w);
  w->size = 1;
  return PRECIS_OK;
}

void precis_mpi_leave(precis_mpi_world *w) { (void)w; }

void precis_mpi_abort(const precis_mpi_world *w, int code) { (void)w, (void)code; }

int precis_mpi_bcast_int(const precis_mpi_world *w, int value) {
  (void)w;
  return value;
}

bool precis_mpi_any(const precis_mpi_world *w, bool flag) {
  (void)w;
  return flag;
}

precis_status precis_mpi_gather_text(const precis_mpi_world *w, const char *text, size_t len, char **texts,
                                     size_t *lens) {
  (void)w, (void)text, (void)len, (void)texts, (void)lens;
  return precis_fail(PRECIS_E_NOT_BUILT, "this precis was built without MPI (PRECIS_MPI=OFF)");
}

precis_status precis_mpi_bcast_bytes(const precis_mpi_world *w, char **data, size_t *len) {
  (void)w, (void)data, (void)len;
  return PRECIS_OK;
}

precis_status precis_mpi_send(const precis_mpi_world *w, int dest, int tag, const void *data, size_t bytes) {
  (void)w, (void)dest, (void)tag, (void)data, (void)bytes;
  return precis_fail(PRECIS_E_NOT_BUILT, "this precis was built without MPI (PRECIS_MPI=OFF)");
}

precis_status precis_mpi_recv(const precis_mpi_world *w, int source, int *tag, void *buf, size_t cap, size_t *bytes) {
  (void)w, (void)source, (void)tag, (void)buf, (void)cap, (void)bytes;
  return precis_fail(PRECIS_E_NOT_BUILT, "this precis was built without MPI (PRECIS_MPI=OFF)");
}

bool precis_mpi_pending(const precis_mpi_world *w, int source, int tag) {
  (void)w, (void)source, (void)tag;
  return false;
}

#endif
