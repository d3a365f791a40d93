/* The cpu backend shortens OpenBLAS's idle spin (src/eval/cpu_backend.c, issue 34): after the
 * backend is opened, OPENBLAS_THREAD_TIMEOUT is 20 (2^20 cycles) where the BLAS is OpenBLAS and the
 * user set nothing, the restarted thread pool still computes an sgemm large enough to use it, and a
 * value the user set is left alone (checked in a child that starts with one). */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cblas.h>

#include "eval/backend.h"
#include "harness.h"

extern void openblas_read_env(void) __attribute__((weak));

static void open_cpu_backend(void) {
  precis_case_options o;
  precis_case_options_default(&o);
  void *ctx = NULL;
  CHECK_OK(precis_backend_cpu()->open(&ctx, &o));
  precis_backend_cpu()->close(ctx);
}

TEST(openblas_idle_spin_is_shortened_and_gemm_still_works) {
  if (!openblas_read_env) {
    printf("  the BLAS is not OpenBLAS: nothing to shorten\n");
    return;
  }
  if (getenv("OPENBLAS_THREAD_TIMEOUT")) {
    printf("  OPENBLAS_THREAD_TIMEOUT set by the environment: the user's value is kept\n");
    return;
  }
  open_cpu_backend();
  const char *value = getenv("OPENBLAS_THREAD_TIMEOUT");
  CHECK_MSG(value && strcmp(value, "20") == 0, "OPENBLAS_THREAD_TIMEOUT is %s", value ? value : "unset");
  /* 256 x 256 x 256 of ones: every element is 256, with the restarted pool. */
  enum { N = 256 };
  float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N), *c = malloc(sizeof(float) * N * N);
  for (int i = 0; i < N * N; i++) a[i] = b[i] = 1.0f, c[i] = 0;
  for (int round = 0; round < 3; round++) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    int wrong = 0;
    for (int i = 0; i < N * N; i++) wrong += c[i] != (float)N;
    CHECK_MSG(wrong == 0, "round %d: %d elements are not %d", round, wrong, N);
  }
  free(a), free(b), free(c);
  open_cpu_backend(); /* a second open changes nothing */
  CHECK_STR(getenv("OPENBLAS_THREAD_TIMEOUT"), "20");
}

TEST(a_value_the_user_set_is_kept) {
  if (!openblas_read_env) return;
  pid_t child = fork();
  if (child == 0) {
    /* A fresh process image would read it at load; here the variable is set before the first open. */
    setenv("OPENBLAS_THREAD_TIMEOUT", "25", 1);
    precis_case_options o;
    precis_case_options_default(&o);
    void *ctx = NULL;
    precis_backend_cpu()->open(&ctx, &o);
    const char *value = getenv("OPENBLAS_THREAD_TIMEOUT");
    _exit(value && strcmp(value, "25") == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the user's OPENBLAS_THREAD_TIMEOUT was replaced");
}

RUN_TESTS(T(a_value_the_user_set_is_kept), T(openblas_idle_spin_is_shortened_and_gemm_still_works))
