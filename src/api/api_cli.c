/* libprecis: the command line as a function (include/precis/cli.h). The executable's main calls
 * precis_cli_main directly; a client that lives on in the same process (Python) needs what a
 * process exit would otherwise reset: getopt's state, the interrupt flag, the signal dispositions a
 * command installs, and the buffered output. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>

#include "base/status.h"
#include "cli/cli.h"
#include "precis/cli.h"

/* glibc keeps a pointer into the previous argv when a parse stopped inside a cluster of short
 * options ("-hx"); optind = 0 makes the next getopt start afresh, and one call on an empty argv
 * clears that pointer before a command sets optind = 1 for its own parse. */
static void reset_getopt(void) {
  static char program[] = "precis";
  char *empty[] = {program, NULL};
  optind = 0;
  opterr = 0;
  (void)getopt(1, empty, "");
  optind = 1;
}

int precis_main(int argc, char **argv) {
  if (argc < 1 || !argv) return 2;
  static const int kept[] = {SIGINT, SIGTERM, SIGXFSZ};
  struct sigaction saved[sizeof kept / sizeof kept[0]];
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) sigaction(kept[i], NULL, &saved[i]);
  precis_interrupt_signal = 0;
  precis_clear_error();
  reset_getopt();
  int code = precis_cli_main(argc, argv);
  fflush(stdout);
  fflush(stderr);
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) sigaction(kept[i], &saved[i], NULL);
  /* An interrupt the command saw is reported by its exit code (130/143); the next call starts clean. */
  precis_interrupt_signal = 0;
  return code;
}
