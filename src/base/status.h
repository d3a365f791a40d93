/* One status type for every library function, and a per-thread message that says what failed
 * (file, object, what was expected). Library code returns a status and never calls exit(). */
#ifndef PRECIS_STATUS_H
#define PRECIS_STATUS_H

/* The status type, precis_status_str, precis_status_exit_code and precis_last_error are the public
 * API's own (include/precis/status.h): one definition for the library and its clients. */
#include "precis/status.h"

/* Records a message for the calling thread and returns status, so that `return precis_fail(...)`
 * reads naturally. The message should name the file, the object and what was expected. */
precis_status precis_fail(precis_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message ("context: message"), for callers that know the file name. */
void precis_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void precis_clear_error(void);

/* Set by the signal handler; long loops poll it and stop at a row boundary. 0, SIGINT or SIGTERM. */
extern volatile int precis_interrupt_signal;
void precis_install_signal_handlers(void);

#endif
