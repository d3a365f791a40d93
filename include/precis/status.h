/* libprecis, the public C API (DESIGN §15): status codes and the message of the last failure.
 * Every function of the API that can fail returns a precis_status; on failure
 * precis_last_error() holds a message for the calling thread that names the file, field or
 * argument and what was expected. */
#ifndef PRECIS_PUBLIC_STATUS_H
#define PRECIS_PUBLIC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum precis_status {
  PRECIS_OK = 0,
  PRECIS_E_USAGE,        /* bad argument or option                             exit 2 */
  PRECIS_E_INPUT,        /* malformed input file or data                       exit 2 */
  PRECIS_E_EXISTS,       /* output exists and --force was not given            exit 2 */
  PRECIS_E_NOT_BUILT,    /* command or backend not built into this binary      exit 2 */
  PRECIS_E_IO,           /* read or write failure (disk full, permissions)    exit 1 */
  PRECIS_E_NOMEM,        /* host allocation failed                            exit 1 */
  PRECIS_E_RUNTIME,      /* a library or backend failed                        exit 1 */
  PRECIS_E_NO_DEVICE,    /* no usable CUDA device                              exit 1 */
  PRECIS_E_UNSUPPORTED,  /* recipe not supported on this backend (row status) exit 1 */
  PRECIS_E_DOES_NOT_FIT, /* device or host memory exhausted (row status)       exit 1 */
  PRECIS_E_CRITERIA,     /* accuracy criteria not met / regression found       exit 3 */
  PRECIS_E_INTERRUPTED,  /* SIGINT (exit 130) or SIGTERM (exit 143)                   */
} precis_status;

/* The element type of an array handed to or returned by the API. */
typedef enum precis_dtype { PRECIS_DTYPE_F32 = 0, PRECIS_DTYPE_F64 = 1 } precis_dtype;

/* "ok", "bad usage", ... (a fixed string). */
const char *precis_status_str(precis_status status);
/* The process exit code DESIGN §7 assigns to a status (what the CLI would exit with). */
int precis_status_exit_code(precis_status status);
/* The calling thread's message for its last failure ("" when none). */
const char *precis_last_error(void);
/* Frees what the API hands over as malloc'ed (messages, texts). */
void precis_free(void *p);
/* "0.1.0" and the git commit it was built from. */
const char *precis_version(void);
const char *precis_commit(void);
/* Returns to the system the memory libprecis keeps for reuse between calls (the cpu backend's
 * cache of large freed blocks, up to 1 GiB, which spares the next call of the same shapes the
 * kernel's page zeroing) and the allocator's free pages (glibc's malloc_trim). Values are never
 * affected; the next call of the same shapes pays the page faults again. For a caller that streams
 * layers of very different sizes (verify: the lm_head after the decoder's layers) and bounds its
 * peak memory. Safe to call at any time from any thread. */
void precis_release_memory(void);

#ifdef __cplusplus
}
#endif

#endif
