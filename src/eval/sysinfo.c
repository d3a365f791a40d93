#include "sysinfo.h"

#include <cblas.h>
#include <hdf5.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "precis_version.h"

/* OpenBLAS extensions; declared here since not every cblas.h declares them. */
char *openblas_get_config(void);
char *openblas_get_corename(void);
int openblas_get_num_threads(void);

void precis_utc_now(char *buf, size_t len) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "unknown");
  FILE *fp = fopen("/proc/cpuinfo", "r");
  if (!fp) return;
  char line[512];
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, "model name", 10) == 0) {
      const char *colon = strchr(line, ':');
      if (colon) {
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(buf, len, "%s", colon);
        buf[strcspn(buf, "\n")] = '\0';
      }
      break;
    }
  }
  fclose(fp);
}

void precis_sysinfo_collect(precis_kv_list *env) {
  char buf[512];
  precis_kv_set(env, "precis_version", PRECIS_VERSION);
  precis_kv_set(env, "precis_commit", PRECIS_COMMIT);
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, rel);
  precis_kv_set(env, "hdf5_version", buf);
  precis_kv_set(env, "blas", "OpenBLAS");
  precis_kv_set(env, "blas_config", openblas_get_config());
  precis_kv_set(env, "blas_core", openblas_get_corename());
  precis_kv_set_int(env, "blas_threads", openblas_get_num_threads());
  cpu_model(buf, sizeof buf);
  precis_kv_set(env, "cpu", buf);
  precis_kv_set_int(env, "cpu_cores", (long long)precis_online_cpus());
  struct utsname u;
  if (uname(&u) == 0) {
    snprintf(buf, sizeof buf, "%s %s %s", u.sysname, u.release, u.machine);
    precis_kv_set(env, "os", buf);
    precis_kv_set(env, "hostname", u.nodename);
  }
  precis_utc_now(buf, sizeof buf);
  precis_kv_set(env, "utc_time", buf);
}
