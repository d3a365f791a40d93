/* libprecis: the command line as a function, for clients that are themselves a CLI (`python -m
 * precis`). */
#ifndef PRECIS_PUBLIC_CLI_H
#define PRECIS_PUBLIC_CLI_H

#ifdef __cplusplus
extern "C" {
#endif

/* Runs `precis argv[1] ...` exactly as the executable does (argv[0] is the program name) and
 * returns its exit code (DESIGN §7) instead of exiting. Output goes to the process's stdout and
 * stderr, flushed on return. The signal dispositions the command changes (SIGINT and SIGTERM, which
 * stop a run at a row boundary; SIGXFSZ) are restored on return. */
int precis_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
