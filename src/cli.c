#include "cli.h"

#include <string.h>

int precis_cli_report_error(const char *command, precis_status status) {
  const char *msg = precis_last_error();
  fprintf(stderr, "precis %s: %s\n", command, msg[0] ? msg : precis_status_str(status));
  return precis_status_exit_code(status);
}

int precis_cli_not_built(const char *command, const char *what) {
  fprintf(stderr, "precis %s: not built yet in this version (%s)\n", command, what);
  return 2;
}

int precis_cli_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return 0;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
  }
  return 0;
}
