#include <stdio.h>

#include "cli.h"

int precis_cmd_accept(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    printf("usage: precis accept [SUITE|DATASET] [--recipe R] [--max-batch B] [--concurrency N] [--latency-target MS] [--headroom PCT] [--require EXPR]...\n\n(not built yet in this version)\n");
    return 0;
  }
  return precis_cli_not_built("accept", "acceptance test (issue 8)");
}
