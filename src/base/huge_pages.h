/* Transparent huge pages for large buffers written once into fresh memory (a case's operands, a
 * workload's arrays read from the dataset): in 4 KiB pages a 64 MiB buffer costs 16384 page faults,
 * each a trip into the kernel; advised MADV_HUGEPAGE it costs 32. */
#ifndef PRECIS_HUGE_PAGES_H
#define PRECIS_HUGE_PAGES_H

#include <stddef.h>

/* Advises MADV_HUGEPAGE on the 2 MiB-aligned interior of [p, p + bytes) when bytes is at least
 * 8 MiB; call it before anything touches the block. Where the kernel has no THP (or THP is off) the
 * advice is refused and nothing changes. The block stays whatever it was (malloc'ed: free() it). */
void precis_advise_huge_pages(void *p, size_t bytes);

/* malloc(bytes), advised as above: freed with free(). */
void *precis_malloc_large(size_t bytes);

#endif
