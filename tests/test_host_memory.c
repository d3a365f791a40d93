/* The tracked allocator's reuse of large blocks (src/eval/host_memory.c, issue 34): a freed large
 * block serves the next request of a similar size without new pages from the kernel, small blocks
 * and much smaller requests are not served from it, the tracker counts requested bytes whatever
 * block serves them, a block handed out may be released with free(), and
 * precis_tracked_cache_release gives everything back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval/host_memory.h"
#include "harness.h"

TEST(a_freed_large_block_serves_the_next_request) {
  precis_host_tracker t = {0, 0};
  const size_t big = (size_t)24 << 20;
  unsigned char *a = precis_tracked_alloc(&t, big);
  CHECK(a != NULL && ((uintptr_t)a & 63) == 0);
  if (!a) return;
  memset(a, 0x5a, big);
  CHECK_EQ_INT(t.current, (long long)big);
  precis_tracked_free(&t, a, big);
  CHECK_EQ_INT(t.current, 0);
  /* The same size again, and a slightly smaller one: the kept block. */
  unsigned char *b = precis_tracked_alloc(&t, big);
  CHECK_MSG(b == a, "the freed 24 MiB block was not reused");
  precis_tracked_free(&t, b, big);
  unsigned char *c = precis_tracked_alloc(&t, big - 4096);
  CHECK_MSG(c == a, "a request 4 KiB smaller was not served by the kept block");
  CHECK_EQ_INT(t.current, (long long)(big - 4096));
  CHECK_EQ_INT(t.peak, (long long)big);
  /* Handed out, it may leave with free() (the runner frees a case's output so). */
  free(c);
  precis_tracked_cache_release();
}

TEST(much_smaller_requests_and_small_blocks_get_their_own) {
  precis_host_tracker t = {0, 0};
  const size_t big = (size_t)32 << 20;
  void *a = precis_tracked_alloc(&t, big);
  CHECK(a != NULL);
  precis_tracked_free(&t, a, big);
  void *quarter = precis_tracked_alloc(&t, big / 4);
  CHECK_MSG(quarter != a, "a quarter-size request took the 32 MiB block");
  void *again = precis_tracked_alloc(&t, big);
  CHECK_MSG(again == a, "the 32 MiB block was not kept for a request of its size");
  precis_tracked_free(&t, quarter, big / 4);
  precis_tracked_free(&t, again, big);
  void *small = precis_tracked_alloc(&t, 1000);
  CHECK(small != NULL && ((uintptr_t)small & 63) == 0);
  precis_tracked_free(&t, small, 1000);
  CHECK_EQ_INT(t.current, 0);
  precis_tracked_cache_release();
  /* After a release nothing is kept: a new block may land anywhere, but the allocator still works. */
  void *fresh = precis_tracked_alloc(&t, big);
  CHECK(fresh != NULL);
  if (fresh) memset(fresh, 1, big);
  precis_tracked_free(&t, fresh, big);
  precis_tracked_cache_release();
}

RUN_TESTS(T(a_freed_large_block_serves_the_next_request), T(much_smaller_requests_and_small_blocks_get_their_own))
