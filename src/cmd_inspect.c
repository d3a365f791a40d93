#include <stdio.h>

#include "cli.h"

int precis_cmd_inspect(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    printf("usage: precis inspect FILE.h5\n\n(not built yet in this version)\n");
    return 0;
  }
  return precis_cli_not_built("inspect", "validate a dataset (issue 4)");
}
