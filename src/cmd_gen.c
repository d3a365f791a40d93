#include <stdio.h>

#include "cli.h"

int precis_cmd_gen(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    printf("usage: precis gen [SUITE.yaml | --preset NAME] -o FILE.h5\n\n(not built yet in this version)\n");
    return 0;
  }
  return precis_cli_not_built("gen", "build a dataset (issue 4)");
}
