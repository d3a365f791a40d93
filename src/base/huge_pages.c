#include "huge_pages.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)
#define HUGE_MIN ((size_t)8 << 20)

void precis_advise_huge_pages(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  if (!p || bytes < HUGE_MIN) return;
  uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  uintptr_t end = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
  if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

void *precis_malloc_large(size_t bytes) {
  void *p = malloc(bytes);
  precis_advise_huge_pages(p, bytes);
  return p;
}
