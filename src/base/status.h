/* One status type for every library function, and a per-thread message that says what failed
 * (file, object, what was expected). Library code returns a status and never calls exit(). */
#ifndef PRECIS_STATUS_H
#define PRECIS_STATUS_H

typedef enum precis_status {
  PRECIS_OK = 0,
  PRECIS_E_USAGE,        /* bad command line                                   exit 2 */
  PRECIS_E_INPUT,        /* malformed input file or data                       exit 2 */
  PRECIS_E_EXISTS,       /* output exists and --force was not given            exit 2 */
  PRECIS_E_NOT_BUILT,    /* command or backend not built into this binary      exit 2 */
  PRECIS_E_IO,           /* read or write failure (disk full, permissions)    exit 1 */
  PRECIS_E_NOMEM,        /* host allocation failed                            exit 1 */
  PRECIS_E_RUNTIME,      /* a library or backend failed                        exit 1 */
  PRECIS_E_NO_DEVICE,    /* no usable CUDA device                              exit 1 */
  PRECIS_E_UNSUPPORTED,  /* recipe not supported on this device (row status)   exit 1 */
  PRECIS_E_DOES_NOT_FIT, /* device or host memory exhausted (row status)       exit 1 */
  PRECIS_E_CRITERIA,     /* accuracy criteria not met / regression found       exit 3 */
  PRECIS_E_INTERRUPTED,  /* SIGINT (exit 130) or SIGTERM (exit 143)                   */
} precis_status;

const char *precis_status_str(precis_status status);
/* The process exit code DESIGN §7 assigns to a status. */
int precis_status_exit_code(precis_status status);

/* Records a message for the calling thread and returns status, so that `return precis_fail(...)`
 * reads naturally. The message should name the file, the object and what was expected. */
precis_status precis_fail(precis_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message ("context: message"), for callers that know the file name. */
void precis_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *precis_last_error(void);
void precis_clear_error(void);

/* Set by the signal handler; long loops poll it and stop at a row boundary. 0, SIGINT or SIGTERM. */
extern volatile int precis_interrupt_signal;
void precis_install_signal_handlers(void);

#endif
