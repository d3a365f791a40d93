#include <stdio.h>

#include "cli.h"

int precis_cmd_compare(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    printf("usage: precis compare BASE.json NEW.json\n\n(not built yet in this version)\n");
    return 0;
  }
  return precis_cli_not_built("compare", "compare two reports (issue 6)");
}
