/* precis merge DIR... -o DIR: the reports of a split run's parts (precis run --shard I/N) joined into
 * the report one run would have written (src/report/merge.h says what is checked). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "base/fileio.h"
#include "report/merge.h"
#include "base/output_lock.h"
#include "report/report.h"

static const char usage_text[] =
    "usage: precis merge DIR|REPORT.json... -o DIR [--force] [--quiet]\n"
    "\n"
    "Joins the reports of the N parts of one run (precis run --shard I/N -o DIR_I) into one report\n"
    "directory: rows in dataset order, every case exactly once, each row with the host (and device)\n"
    "that measured it, and each part's environment under environment.parts. Refused, naming the field:\n"
    "parts of different datasets (dataset_id) or settings, a part missing, given twice or incomplete,\n"
    "a case missing or in two parts. A warning names every hardware or software difference between\n"
    "the parts (device, driver, CPU, precis version, ...). compare and recommend read the result.\n"
    "\n"
    "  -o, --output DIR   where report.json, report.csv, report.md and report.html go\n"
    "  --force            replace reports already in DIR\n"
    "  --quiet            no table on stdout\n"
    "\n"
    "Exit codes: 0 merged, 2 bad usage or parts that are not one complete run, 1 a write failed.\n";

int precis_cmd_merge(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    fputs(usage_text, stdout);
    return 0;
  }
  const char *out_dir = NULL;
  bool force = false, quiet = false;
  char **names = calloc((size_t)argc, sizeof *names);
  precis_report *parts = calloc((size_t)argc, sizeof *parts);
  size_t n = 0;
  precis_report merged;
  precis_report_init(&merged);
  precis_output_lock lock;
  precis_output_lock_init(&lock);
  char *warnings = NULL;
  int rc = 2;
  if (!names || !parts) {
    fprintf(stderr, "precis merge: out of memory\n");
    rc = 1;
    goto done;
  }
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "precis merge: %s needs a directory\n", arg);
        goto done;
      }
      out_dir = argv[++i];
    } else if (strcmp(arg, "--force") == 0) {
      force = true;
    } else if (strcmp(arg, "--quiet") == 0) {
      quiet = true;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      fprintf(stderr, "precis merge: unknown option \"%s\" (try precis merge --help)\n", arg);
      goto done;
    } else {
      /* A directory stands for its report.json. */
      struct stat sb;
      bool is_dir = stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode);
      names[n++] = is_dir ? precis_asprintf("%s/report.json", arg) : precis_strdup(arg);
    }
  }
  if (!out_dir || n == 0) {
    fputs(usage_text, stderr);
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    precis_status st = precis_report_read_json(names[i], &parts[i]);
    if (st != PRECIS_OK) {
      rc = precis_cli_report_error("merge", st);
      goto done;
    }
  }
  precis_status st = precis_merge_reports(parts, (const char *const *)names, n, &merged, &warnings);
  if (warnings) fprintf(stderr, "precis merge: warning: %s", warnings);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("merge", st);
    goto done;
  }
  if ((st = precis_mkdirs(out_dir)) != PRECIS_OK) {
    rc = precis_cli_report_error("merge", st);
    goto done;
  }
  if ((rc = precis_cli_lock_output("merge", &lock, out_dir, true)) != 0) goto done;
  st = precis_report_write_all(&merged, out_dir, force);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("merge", st);
    goto done;
  }
  if (!quiet) precis_report_print_table(&merged, stdout);
  fprintf(stderr, "precis merge: %zu parts, %zu rows: reports written to %s/\n", n, merged.n_rows, out_dir);
  rc = 0;
done:
  precis_output_lock_release(&lock);
  for (size_t i = 0; i < n; i++) {
    free(names[i]);
    precis_report_free(&parts[i]);
  }
  free(names);
  free(parts);
  precis_report_free(&merged);
  free(warnings);
  return rc;
}
