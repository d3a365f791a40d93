/* One writer per output. Two processes writing the same report directory, dataset or saved-outputs
 * file would interleave their journals and replace each other's files without anyone being told;
 * every command that writes takes a lock on each of its outputs before it writes anything and holds
 * it to the end (docs/robustness.md, "One writer per output").
 *
 * The lock is a small file next to the output (inside it for a directory) that names its holder:
 * pid, host, start time (UTC) and command. It is created whole (written under a temporary name,
 * then link()ed into place, which fails when the name exists) and flock()ed for as long as the
 * holder lives, so the kernel drops the flock when the holder dies however it dies (SIGKILL
 * included). A later writer that finds the file but can take the flock knows the holder is gone;
 * on this host it takes the lock over (with a message), from another host it refuses, because a
 * shared filesystem may not carry flocks between machines. */
#ifndef PRECIS_OUTPUT_LOCK_H
#define PRECIS_OUTPUT_LOCK_H

#include <stdbool.h>

#include "status.h"

typedef struct precis_output_lock {
  int fd;          /* -1 when not held */
  char *lock_path; /* malloc'ed */
} precis_output_lock;

void precis_output_lock_init(precis_output_lock *lock);

/* The lock file of an output: "DIR/.precis-lock" for a directory (is_dir), "<dir>/.<name>.precis-lock"
 * for a file. malloc'ed. */
char *precis_output_lock_path(const char *output, bool is_dir);

/* Takes the lock of `output` for `command` ("run", "gen", ...). A directory must exist already. Fails
 * with PRECIS_E_EXISTS (exit 2) and one message naming the output and the holder when another live
 * process holds it, or when the holder is on another host. A lock left by a dead process on this
 * host is taken over; *taken_over (may be NULL) then holds a malloc'ed sentence naming the old
 * holder, for the caller to print. */
precis_status precis_output_lock_acquire(precis_output_lock *lock, const char *output, bool is_dir, const char *command,
                                         char **taken_over);

/* Removes the lock file and drops the flock. Safe to call on a lock never taken or already released. */
void precis_output_lock_release(precis_output_lock *lock);

#endif
