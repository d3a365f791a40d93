#include <stdio.h>

#include "cli.h"

int precis_cmd_recommend(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    printf("usage: precis recommend REPORT.json [--require EXPR]... [--objective latency|memory] [--per-workload]\n\n(not built yet in this version)\n");
    return 0;
  }
  return precis_cli_not_built("recommend", "recommend a recipe (issue 6)");
}
