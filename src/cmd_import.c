#include <stdio.h>

#include "cli.h"

int precis_cmd_import(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    printf("usage: precis import --b FILE:DATASET [--a DIST|FILE:DATASET] -o FILE.h5\n\n(not built yet in this version)\n");
    return 0;
  }
  return precis_cli_not_built("import", "import user matrices (issue 4)");
}
