/* The command line (DESIGN §7). Each command lives in cmd_<name>.c and returns a process exit
 * code; library code below it returns statuses. */
#ifndef PRECIS_CLI_H
#define PRECIS_CLI_H

#include <stdio.h>

#include "status.h"

int precis_cmd_info(int argc, char **argv);
int precis_cmd_gen(int argc, char **argv);
int precis_cmd_inspect(int argc, char **argv);
int precis_cmd_import(int argc, char **argv);
int precis_cmd_run(int argc, char **argv);
int precis_cmd_recommend(int argc, char **argv);
int precis_cmd_compare(int argc, char **argv);
int precis_cmd_accept(int argc, char **argv);

/* Prints "precis <command>: <message>" (the last error) to stderr and returns the exit code. */
int precis_cli_report_error(const char *command, precis_status status);
/* "precis COMMAND: not built yet in this version (...)" and exit code 2. */
int precis_cli_not_built(const char *command, const char *what);
/* True when argv holds -h or --help (before any "--"). */
int precis_cli_wants_help(int argc, char **argv);

#endif
