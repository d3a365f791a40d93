/* `precis run --devices` on the GPUs of this machine (docs/scale-out.md): one worker process per
 * device, one report. Runs the precis binary (env PRECIS) on a small generated dataset with
 * --devices all and once on the cuda backend alone, and checks that the split report has every case
 * once, in dataset order, each row with its part and the device ordinal of that part, a journal per
 * part, and the same status and verdict per case as the single-process run.
 * Skipped (77) only on a machine without a CUDA device (gpu_probe.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_probe.h"
#include "harness.h"
#include "report/journal.h"
#include "report/report.h"

static int shell(const char *fmt, const char *a, const char *b, const char *c) {
  char command[4096];
  snprintf(command, sizeof command, fmt, a, b, c);
  printf("$ %s\n", command);
  fflush(stdout);
  int rc = system(command);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

int main(void) {
  /* Checked before the device probe, so that a runner that forgets to export PRECIS (CTest sets it;
   * tests/gpu/run-all.sh exports it) fails on any machine, not only on one with a GPU. */
  const char *precis = getenv("PRECIS");
  if (!precis || !*precis || access(precis, X_OK) != 0) {
    printf("FAIL: PRECIS (the precis binary) is %s%s%s: set by CTest, exported by tests/gpu/run-all.sh\n",
           precis ? "\"" : "not set", precis ? precis : "", precis ? "\", not an executable" : "");
    return 1;
  }
  int probe = precis_gpu_probe();
  if (probe) return probe;
  int count = 0;
  cudaGetDeviceCount(&count);
  char dir[] = "/tmp/precis-devices-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char suite[512], dataset[512], split[512], single[512], path[600];
  snprintf(suite, sizeof suite, "%s/s.yaml", dir);
  snprintf(dataset, sizeof dataset, "%s/d.h5", dir);
  snprintf(split, sizeof split, "%s/split", dir);
  snprintf(single, sizeof single, "%s/single", dir);
  FILE *f = fopen(suite, "w");
  if (!f) return 1;
  fputs("seed: 4\nworkloads:\n", f);
  for (int i = 0; i < 6; i++) fprintf(f, "  - {name: w%d, m: %d, n: 256, k: 512, batch: 2}\n", i, 64 * (i + 1));
  fclose(f);
  const char *options = "--recipes fp32,bf16,int8 --min-samples 3 --max-samples 20 --max-time-ms 50 --quiet";
  CHECK_EQ_INT(shell("\"%s\" gen %s -o %s -q", precis, suite, dataset), 0);
  char devices_options[512];
  snprintf(devices_options, sizeof devices_options, "--devices all %s", options);
  snprintf(path, sizeof path, "%s -o %s", devices_options, split);
  CHECK_EQ_INT(shell("\"%s\" run %s %s", precis, dataset, path), 0);
  snprintf(path, sizeof path, "--backend cuda %s -o %s", options, single);
  CHECK_EQ_INT(shell("\"%s\" run %s %s", precis, dataset, path), 0);

  precis_report a, b;
  snprintf(path, sizeof path, "%s/report.json", split);
  CHECK_OK(precis_report_read_json(path, &a));
  snprintf(path, sizeof path, "%s/report.json", single);
  CHECK_OK(precis_report_read_json(path, &b));
  CHECK(a.complete);
  CHECK_EQ_INT(a.n_rows, 18);
  CHECK_EQ_INT(a.n_rows, b.n_rows);
  for (size_t i = 0; i < a.n_rows && i < b.n_rows; i++) {
    const precis_row *r = &a.rows[i], *s = &b.rows[i];
    CHECK_STR(r->workload, s->workload);
    CHECK_STR(r->recipe, s->recipe);
    /* --devices all: part p runs on device p - 1. */
    CHECK_MSG(r->part >= 1 && r->part <= count && r->device == r->part - 1, "%s %s: part %d, device %d", r->workload,
              r->recipe, r->part, r->device);
    CHECK_MSG(r->status == s->status && r->verdict == s->verdict, "%s %s: status/verdict differ from one process",
              r->workload, r->recipe);
  }
  for (int p = 1; p <= count; p++) {
    char *name = precis_journal_name(p, count);
    snprintf(path, sizeof path, "%s/%s", split, name ? name : "?");
    free(name);
    CHECK_MSG(access(path, R_OK) == 0, "no journal %s", path);
  }
  printf("%d device(s): --devices all = one process in status and verdict, every row on its part's device\n", count);
  precis_report_free(&a);
  precis_report_free(&b);
  if (harness_failures == 0) shell("rm -rf '%s'%s%s", dir, "", "");
  printf("%d checks, %d failed\n", harness_checks, harness_failures);
  return harness_failures ? 1 : 0;
}
