#include <stdio.h>

#include "cli.h"

int precis_cmd_run(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    printf("usage: precis run [FILE.h5] [--recipes LIST] [--backend auto|cuda|cpu] [--require EXPR]... [-o DIR] [--save-outputs FILE.h5]\n\n(not built yet in this version)\n");
    return 0;
  }
  return precis_cli_not_built("run", "evaluate recipes (issue 5)");
}
