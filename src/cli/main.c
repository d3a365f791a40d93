/* precis: precision and quantization trade-off evaluator. */
#include "cli/cli.h"

int main(int argc, char **argv) { return precis_cli_main(argc, argv); }
