/* precis info: versions, devices, and which recipes each device supports. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "cli.h"
#include "kernels/cuda_api.h"
#include "numerics/recipe.h"
#include "report/results.h"
#include "eval/sysinfo.h"

static void version_string(int v, char *buf, size_t len) {
  /* CUDA encodes 1000*major + 10*minor */
  if (v <= 0) snprintf(buf, len, "unknown");
  else snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

static cJSON *kv_to_json(const precis_kv_list *list) {
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; i < list->count; i++) {
    const precis_kv *kv = &list->items[i];
    if (!kv->value) cJSON_AddNullToObject(o, kv->key);
    else if (kv->is_number) cJSON_AddItemToObject(o, kv->key, cJSON_CreateRaw(kv->value));
    else cJSON_AddStringToObject(o, kv->key, kv->value);
  }
  return o;
}

static int print_json(const precis_kv_list *host, const precis_cuda_inventory *inv) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddItemToObject(root, "host", kv_to_json(host));
  cJSON *cuda = cJSON_AddObjectToObject(root, "cuda");
  cJSON_AddBoolToObject(cuda, "built", inv->built);
  char buf[64];
  if (inv->driver_version) { version_string(inv->driver_version, buf, sizeof buf); cJSON_AddStringToObject(cuda, "driver_version", buf); }
  else cJSON_AddNullToObject(cuda, "driver_version");
  if (inv->runtime_version) { version_string(inv->runtime_version, buf, sizeof buf); cJSON_AddStringToObject(cuda, "runtime_version", buf); }
  else cJSON_AddNullToObject(cuda, "runtime_version");
  if (inv->cublas_version) cJSON_AddNumberToObject(cuda, "cublas_version", inv->cublas_version);
  else cJSON_AddNullToObject(cuda, "cublas_version");
  if (inv->cublaslt_version) cJSON_AddNumberToObject(cuda, "cublaslt_version", (double)inv->cublaslt_version);
  else cJSON_AddNullToObject(cuda, "cublaslt_version");
  if (inv->cublas_error[0]) cJSON_AddStringToObject(cuda, "cublas_error", inv->cublas_error);
  else cJSON_AddNullToObject(cuda, "cublas_error");
  cJSON_AddNumberToObject(cuda, "device_count", inv->device_count);
  if (inv->error[0]) cJSON_AddStringToObject(cuda, "error", inv->error);
  else cJSON_AddNullToObject(cuda, "error");
  cJSON *devs = cJSON_AddArrayToObject(cuda, "devices");
  for (int d = 0; d < inv->device_count; d++) {
    const precis_device_info *dev = &inv->devices[d];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", dev->index);
    cJSON_AddStringToObject(o, "name", dev->name);
    snprintf(buf, sizeof buf, "%d.%d", dev->cc_major, dev->cc_minor);
    cJSON_AddStringToObject(o, "compute_capability", buf);
    cJSON_AddNumberToObject(o, "sm_count", dev->sm_count);
    cJSON_AddNumberToObject(o, "memory_total_bytes", (double)dev->mem_total_bytes);
    cJSON_AddNumberToObject(o, "memory_free_bytes", (double)dev->mem_free_bytes);
    cJSON_AddNumberToObject(o, "l2_bytes", (double)dev->l2_bytes);
    cJSON *recs = cJSON_AddObjectToObject(o, "recipes");
    for (size_t r = 0; r < precis_recipe_preset_count(); r++) {
      cJSON *ro = cJSON_AddObjectToObject(recs, precis_recipe_preset_at(r)->name);
      cJSON_AddBoolToObject(ro, "supported", dev->recipe_supported[r]);
      if (dev->recipe_supported[r]) cJSON_AddNullToObject(ro, "reason");
      else cJSON_AddStringToObject(ro, "reason", dev->recipe_reason[r]);
    }
    cJSON_AddItemToArray(devs, o);
  }
  cJSON *cpu = cJSON_AddObjectToObject(root, "cpu_backend");
  cJSON_AddStringToObject(cpu, "label", "cpu-emulation");
  cJSON *recs = cJSON_AddArrayToObject(cpu, "recipes");
  for (size_t r = 0; r < precis_recipe_preset_count(); r++)
    cJSON_AddItemToArray(recs, cJSON_CreateString(precis_recipe_preset_at(r)->name));
  cJSON_AddStringToObject(root, "default_backend", inv->device_count > 0 ? "cuda" : "cpu");
  char *text = cJSON_Print(root);
  int rc = 0;
  if (!text || printf("%s\n", text) < 0) rc = 1;
  free(text);
  cJSON_Delete(root);
  return rc;
}

static int print_text(const precis_kv_list *host, const precis_cuda_inventory *inv) {
  printf("precis %s (commit %s)\n", precis_kv_get(host, "precis_version"), precis_kv_get(host, "precis_commit"));
  printf("  HDF5         %s\n", precis_kv_get(host, "hdf5_version"));
  printf("  BLAS         OpenBLAS (%s; %s threads)\n", precis_kv_get(host, "blas_config"),
         precis_kv_get(host, "blas_threads"));
  printf("  CPU          %s, %s cores\n", precis_kv_get(host, "cpu"), precis_kv_get(host, "cpu_cores"));
  char drv[32], rt[32];
  version_string(inv->driver_version, drv, sizeof drv);
  version_string(inv->runtime_version, rt, sizeof rt);
  printf("CUDA backend   %s\n", inv->built ? "built" : "not built");
  if (inv->built) {
    printf("  driver       %s\n  runtime      %s\n", inv->driver_version ? drv : "none (no driver found)", rt);
    if (inv->cublas_version) printf("  cuBLAS       %d\n", inv->cublas_version);
    if (inv->cublaslt_version) printf("  cuBLASLt     %lld\n", inv->cublaslt_version);
    if (inv->cublas_error[0]) printf("  cuBLAS       not loaded: %s\n", inv->cublas_error);
  }
  if (inv->device_count == 0) {
    printf("CUDA devices   none: %s\n", inv->error[0] ? inv->error : "no device found");
    printf("backend        cpu (emulation of every recipe; timings are CPU timings, labelled cpu-emulation)\n");
    return 0;
  }
  for (int d = 0; d < inv->device_count; d++) {
    const precis_device_info *dev = &inv->devices[d];
    printf("device %d       %s, sm_%d%d, %d SMs, %.1f GiB (%.1f GiB free), L2 %.0f MiB\n", dev->index, dev->name,
           dev->cc_major, dev->cc_minor, dev->sm_count, dev->mem_total_bytes / 1073741824.0,
           dev->mem_free_bytes / 1073741824.0, dev->l2_bytes / 1048576.0);
    for (size_t r = 0; r < precis_recipe_preset_count(); r++)
      printf("  %-10s %s%s%s\n", precis_recipe_preset_at(r)->name, dev->recipe_supported[r] ? "yes" : "no",
             dev->recipe_supported[r] ? "" : ": ", dev->recipe_supported[r] ? "" : dev->recipe_reason[r]);
  }
  printf("backend        cuda (device 0)\n");
  return 0;
}

/* The compute-capability rule is necessary, not sufficient: the backend also asks cuBLASLt for an
 * algorithm for each recipe, so that info gives the same answer a run will (device 0, the one the
 * backend uses). */
static void refine_with_backend(precis_cuda_inventory *inv) {
  const precis_backend *cuda = precis_backend_cuda();
  if (!cuda || inv->device_count == 0) return;
  precis_case_options options;
  precis_case_options_default(&options);
  void *ctx = NULL;
  if (cuda->open(&ctx, &options) != PRECIS_OK) {
    snprintf(inv->error, sizeof inv->error, "the cuda backend did not open: %s", precis_last_error());
    return;
  }
  precis_device_info *dev = &inv->devices[0];
  for (size_t r = 0; r < precis_recipe_preset_count(); r++) {
    precis_recipe preset;
    if (!dev->recipe_supported[r] || precis_recipe_from_preset(precis_recipe_preset_at(r), &preset) != PRECIS_OK) continue;
    dev->recipe_supported[r] = cuda->supports(ctx, &preset.spec, dev->recipe_reason[r], sizeof dev->recipe_reason[r]);
  }
  cuda->close(ctx);
}

int precis_cmd_info(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf("usage: precis info [--json]\n\n"
             "Versions (precis, CUDA driver and runtime, cuBLAS, cuBLASLt, HDF5, BLAS), the CPU, every CUDA\n"
             "device with which recipes it supports and why not. Exits 0 when no device is usable and says\n"
             "that the cpu backend (emulation) will be used.\n");
      return 0;
    }
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else {
      fprintf(stderr, "precis info: unknown option \"%s\" (expected --json)\n", argv[i]);
      return 2;
    }
  }
  precis_kv_list host = {0};
  precis_sysinfo_collect(&host);
  precis_cuda_inventory inv;
  precis_status st = precis_cuda_inventory_get(&inv);
  refine_with_backend(&inv);
  int rc;
  if (st != PRECIS_OK) rc = precis_cli_report_error("info", st);
  else rc = json ? print_json(&host, &inv) : print_text(&host, &inv);
  precis_cuda_inventory_free(&inv);
  precis_kv_free(&host);
  return rc;
}
