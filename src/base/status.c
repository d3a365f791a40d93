#include "status.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[2048];

const char *precis_status_str(precis_status status) {
  switch (status) {
  case PRECIS_OK: return "ok";
  case PRECIS_E_USAGE: return "bad usage";
  case PRECIS_E_INPUT: return "bad input";
  case PRECIS_E_EXISTS: return "output exists";
  case PRECIS_E_NOT_BUILT: return "not built";
  case PRECIS_E_IO: return "i/o error";
  case PRECIS_E_NOMEM: return "out of host memory";
  case PRECIS_E_RUNTIME: return "runtime failure";
  case PRECIS_E_NO_DEVICE: return "no usable CUDA device";
  case PRECIS_E_UNSUPPORTED: return "unsupported";
  case PRECIS_E_DOES_NOT_FIT: return "does not fit";
  case PRECIS_E_CRITERIA: return "criteria not met";
  case PRECIS_E_INTERRUPTED: return "interrupted";
  }
  return "unknown status";
}

volatile int precis_interrupt_signal = 0;

int precis_status_exit_code(precis_status status) {
  switch (status) {
  case PRECIS_OK: return 0;
  case PRECIS_E_USAGE:
  case PRECIS_E_INPUT:
  case PRECIS_E_EXISTS:
  case PRECIS_E_NOT_BUILT: return 2;
  case PRECIS_E_CRITERIA: return 3;
  case PRECIS_E_INTERRUPTED: return precis_interrupt_signal == SIGTERM ? 143 : 130;
  default: return 1;
  }
}

precis_status precis_fail(precis_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

void precis_error_prefix(const char *fmt, ...) {
  char prefix[1024], old[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, last_error, sizeof old);
  /* Truncation of an overlong message is acceptable; the prefix comes first. */
  size_t used = strlen(prefix);
  if (used > sizeof last_error - 3) used = sizeof last_error - 3;
  memcpy(last_error, prefix, used);
  memcpy(last_error + used, ": ", 2);
  size_t rest = sizeof last_error - used - 3;
  size_t old_len = strnlen(old, rest);
  memcpy(last_error + used + 2, old, old_len);
  last_error[used + 2 + old_len] = '\0';
}

const char *precis_last_error(void) { return last_error; }
void precis_clear_error(void) { last_error[0] = '\0'; }

static void on_signal(int sig) {
  if (precis_interrupt_signal) {
    /* A second signal: the user insists. Restore the default action and re-raise. */
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  precis_interrupt_signal = sig;
}

void precis_install_signal_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}
