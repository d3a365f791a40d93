#include "host_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/huge_pages.h"

/* Large buffers in transparent huge pages (base/huge_pages.h): a case writes its operands into
 * fresh memory for every recipe. */
void *precis_tracked_alloc(precis_host_tracker *t, size_t bytes) {
  void *p = NULL;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) return NULL;
  precis_advise_huge_pages(p, rounded);
  t->current += (long long)bytes;
  if (t->current > t->peak) t->peak = t->current;
  return p;
}

void precis_tracked_free(precis_host_tracker *t, void *p, size_t bytes) {
  if (!p) return;
  free(p);
  t->current -= (long long)bytes;
}

int precis_peak_rss_reset(void) {
  /* Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0). */
  FILE *fp = fopen("/proc/self/clear_refs", "w");
  if (!fp) return -1;
  int ok = fputs("5", fp) >= 0;
  if (fclose(fp) != 0) ok = 0;
  return ok ? 0 : -1;
}

long long precis_peak_rss_bytes(void) {
  FILE *fp = fopen("/proc/self/status", "r");
  if (fp) {
    char line[256];
    long long kib = -1;
    while (fgets(line, sizeof line, fp))
      if (strncmp(line, "VmHWM:", 6) == 0) {
        kib = atoll(line + 6);
        break;
      }
    fclose(fp);
    if (kib >= 0) return kib * 1024;
  }
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) return (long long)ru.ru_maxrss * 1024;
  return -1;
}
