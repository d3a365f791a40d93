#include "runner.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "deal.h"
#include "base/escape.h"
#include "host_memory.h"
#include "report/journal.h"
#include "numerics/metrics.h"
#include "report/report.h"
#include "sysinfo.h"

/* A converted checkpoint's layer (precis import --converted: b holds the artifact's weights, c_ref
 * comes from the original ones) measures the artifact's error against the original, so it is
 * judged by the criterion its import recorded for the stored weight format (source.converted.
 * criterion), not by the recipe's own gate, which would fail every quantized layer as if fp32
 * arithmetic had gone wrong. False when the workload is not such a layer. */
static bool converted_criteria(const precis_workload_info *w, precis_criteria *out) {
  if (!w->has_b_ref || !w->source) return false;
  cJSON *src = cJSON_Parse(w->source);
  const cJSON *conv = src ? cJSON_GetObjectItemCaseSensitive(src, "converted") : NULL;
  const cJSON *text = conv ? cJSON_GetObjectItemCaseSensitive(conv, "criterion") : NULL;
  precis_criterion c;
  bool ok = cJSON_IsString(text) && precis_criterion_parse(text->valuestring, &c) == PRECIS_OK;
  if (ok) {
    memset(out, 0, sizeof *out);
    out->items[out->count++] = (precis_criterion){PRECIS_METRIC_NONFINITE, PRECIS_CMP_EQ, 0};
    out->items[out->count++] = c;
  }
  cJSON_Delete(src);
  return ok;
}

void precis_row_judge(precis_row *row, const precis_criteria *criteria) {
  row->criteria = *criteria;
  free(row->verdict_detail);
  row->verdict_detail = NULL;
  if (row->status != PRECIS_ROW_OK) {
    row->verdict = PRECIS_VERDICT_NONE;
    return;
  }
  size_t failed = 0;
  double margin = 0;
  if (precis_criteria_check(criteria, row->error, &failed, &margin)) {
    row->verdict = PRECIS_VERDICT_PASS;
    return;
  }
  row->verdict = PRECIS_VERDICT_FAIL;
  const precis_criterion *c = &criteria->items[failed];
  char crit[96];
  precis_criterion_format(c, crit, sizeof crit);
  const precis_metric_value *v = &row->error[c->metric];
  if (v->present)
    row->verdict_detail = precis_asprintf("%s=%.4g fails %s (%.3gx the limit)", precis_metric_get(c->metric)->key,
                                          v->worst, crit, margin);
  else
    row->verdict_detail = precis_asprintf("%s is null, fails %s", precis_metric_get(c->metric)->key, crit);
}

/* Samples [first, last) of precis_case_sample_metrics, on one thread. */
typedef struct sample_metrics_job {
  const precis_workload_info *w;
  const precis_workload_data *d;
  const float *c;
  const double *c64;
  precis_sample_metrics *samples;
  size_t first, last;
  bool failed;
} sample_metrics_job;

static void *sample_metrics_range(void *arg) {
  sample_metrics_job *job = arg;
  const precis_workload_info *w = job->w;
  const precis_workload_data *d = job->d;
  const size_t per_sample = (size_t)(w->m * w->n);
  /* A logit workload (an lm_head): each output row is one token's logits, judged also as the
   * distribution the model outputs (KL both ways, top-1 agreement; docs/criteria.md). */
  const bool logits = w->output_kind && strcmp(w->output_kind, "logits") == 0;
  double *scratch = logits ? malloc(2 * (size_t)w->m * sizeof *scratch) : NULL;
  if (logits && !scratch) {
    job->failed = true;
    return NULL;
  }
  for (size_t b = job->first; b < job->last; b++) {
    const float *c = job->c + b * per_sample;
    const double *c64 = job->c64 ? job->c64 + b * per_sample : NULL;
    precis_metrics_sample_wide(c, c64, d->c_ref + b * per_sample, d->c_ref_lo ? d->c_ref_lo + b * per_sample : NULL,
                               d->ab_abs + b * per_sample, per_sample, &job->samples[b]);
    if (logits)
      precis_metrics_logits(c, c64, d->c_ref + b * per_sample, d->c_ref_lo ? d->c_ref_lo + b * per_sample : NULL,
                            (size_t)w->m, (size_t)w->n, scratch, &job->samples[b]);
  }
  free(scratch);
  return NULL;
}

/* Below this many outputs per thread a thread costs more than it saves. */
#define SAMPLE_METRICS_MIN_PER_THREAD ((size_t)1 << 18)
#define SAMPLE_METRICS_MAX_THREADS 16

precis_status precis_case_sample_metrics(const precis_workload_info *w, const precis_workload_data *d, const float *c,
                                         const double *c64, precis_sample_metrics *samples) {
  /* Each sample's metrics are its own (nothing is summed across samples here), so samples are
   * split across the online CPUs: the same values in any split. */
  const size_t batch = (size_t)w->batch, per_sample = (size_t)(w->m * w->n);
  size_t threads = precis_online_cpus();
  if (threads > SAMPLE_METRICS_MAX_THREADS) threads = SAMPLE_METRICS_MAX_THREADS;
  if (threads > batch) threads = batch;
  while (threads > 1 && batch * per_sample / threads < SAMPLE_METRICS_MIN_PER_THREAD) threads--;
  if (threads < 1) threads = 1;
  sample_metrics_job jobs[SAMPLE_METRICS_MAX_THREADS];
  pthread_t ids[SAMPLE_METRICS_MAX_THREADS];
  bool started[SAMPLE_METRICS_MAX_THREADS];
  for (size_t t = 0; t < threads; t++) {
    jobs[t] = (sample_metrics_job){w, d, c, c64, samples, batch * t / threads, batch * (t + 1) / threads, false};
    started[t] = t > 0 && pthread_create(&ids[t], NULL, sample_metrics_range, &jobs[t]) == 0;
  }
  for (size_t t = 0; t < threads; t++)
    if (!started[t]) sample_metrics_range(&jobs[t]);
  bool failed = false;
  for (size_t t = 0; t < threads; t++) {
    if (t > 0 && started[t]) pthread_join(ids[t], NULL);
    failed = failed || jobs[t].failed;
  }
  if (failed) return precis_fail(PRECIS_E_NOMEM, "out of memory computing the logit metrics");
  return PRECIS_OK;
}

/* The row's error metrics against the workload's references, read a block of samples at a time
 * into d (precis_dataset_read_references; the run loaded d with precis_dataset_load_blocked): each
 * sample's metrics are its own and the loss change sums the samples in order, so the values are those
 * of the whole batch at once. A reference that fails the load's checks is never used: its error is
 * returned and stops the run. Out of memory fails the row only. */
static precis_status compute_error_metrics(precis_row *row, const precis_workload_info *w, precis_dataset *ds, size_t wi,
                                           precis_workload_data *d, const float *c, const double *c64,
                                           double clipped_fraction) {
  const size_t per_sample = (size_t)(w->m * w->n);
  const int64_t block = d->ref_capacity > 0 ? d->ref_capacity : w->batch;
  precis_status st = PRECIS_OK;
  precis_sample_metrics *samples = calloc((size_t)w->batch, sizeof *samples);
  precis_loss_change *loss = &row->loss;
  if (d->grad) {
    loss->present = true;
    loss->taylor_mean = loss->fisher_mean = 0;
    loss->taylor_worst = loss->fisher_worst = 0;
  }
  for (int64_t s0 = 0; samples && s0 < w->batch; s0 += block) {
    const int64_t here = w->batch - s0 < block ? w->batch - s0 : block;
    if ((st = precis_dataset_read_references(ds, wi, s0, here, d)) != PRECIS_OK) goto done;
    precis_workload_info part = *w;
    part.batch = here;
    const size_t at = (size_t)s0 * per_sample;
    if (precis_case_sample_metrics(&part, d, c + at, c64 ? c64 + at : NULL, samples + s0) != PRECIS_OK) {
      free(samples);
      samples = NULL;
      break;
    }
    if (d->grad) {
      /* The loss change the output's error predicts (docs/criteria.md): first order and Fisher, per
       * held-out sample, in float64 against the reference (its low part too for double-double). */
      for (size_t b = 0; b < (size_t)here; b++) {
        double taylor = 0, fisher = 0;
        for (size_t i = b * per_sample; i < (b + 1) * per_sample; i++) {
          double delta = (c64 ? c64[at + i] : (double)c[at + i]) - d->c_ref[i];
          if (d->c_ref_lo) delta -= d->c_ref_lo[i];
          double gd = (double)d->grad[i] * delta;
          taylor += gd;
          fisher += gd * gd;
        }
        fisher *= 0.5;
        loss->taylor_mean += taylor / (double)w->batch;
        loss->fisher_mean += fisher / (double)w->batch;
        const bool first = s0 == 0 && b == 0;
        if (first || fabs(taylor) > fabs(loss->taylor_worst)) loss->taylor_worst = taylor;
        if (first || fisher > loss->fisher_worst) loss->fisher_worst = fisher;
      }
    }
  }
  if (!samples) {
    row->status = PRECIS_ROW_FAILED;
    row->reason = precis_strdup("out of memory computing metrics");
    memset(loss, 0, sizeof *loss);
    goto done;
  }
  precis_metrics_aggregate(samples, (size_t)w->batch, row->error);
  if (d->c_ref_lo) {
    /* Errors near fp64's are only meaningful next to the reference's own bound. */
    char text[160];
    snprintf(text, sizeof text, "double-double (c_ref + c_ref_lo), |reference - a.b| <= %.3g * ab_abs",
             w->reference_error_bound);
    precis_kv_set(&row->details, "reference", text);
  }
  if (!isnan(clipped_fraction)) {
    row->error[PRECIS_METRIC_CLIPPED] = (precis_metric_value){clipped_fraction, clipped_fraction, true};
  }
done:
  free(samples);
  return st;
}

static bool workload_selected(const precis_run_config *cfg, const char *name) {
  if (!cfg->workloads) return true;
  for (size_t i = 0; i < cfg->n_workloads; i++)
    if (strcmp(cfg->workloads[i], name) == 0) return true;
  return false;
}

static bool fault_injected(const precis_run_config *cfg, const char *workload, const char *recipe) {
  if (!cfg->fault_inject) return false;
  size_t wl = strlen(workload);
  return strncmp(cfg->fault_inject, workload, wl) == 0 && cfg->fault_inject[wl] == ':' &&
         strcmp(cfg->fault_inject + wl + 1, recipe) == 0;
}

static void progress(const precis_run_config *cfg, size_t done, size_t total, const precis_row *row) {
  if (cfg->progress_quiet) return;
  char what[256];
  if (row->status != PRECIS_ROW_OK)
    snprintf(what, sizeof what, "%s: %s", precis_row_status_str(row->status), row->reason ? row->reason : "");
  else
    snprintf(what, sizeof what, "%s, rel_fro %.3g, median %.4g ms", row->verdict == PRECIS_VERDICT_PASS ? "pass" : "FAIL",
             row->error[PRECIS_METRIC_REL_FRO].worst, row->time.median_ms);
  /* Names and reasons come from the dataset: control characters must not reach the terminal. */
  precis_buf line;
  precis_buf_init(&line);
  if (row->layer && cfg->n_recipes) {
    /* A model's dataset: cases run layer by layer, every recipe of a layer in turn. */
    precis_buf_appendf(&line, "layer %zu/%zu ", (done - 1) / cfg->n_recipes + 1, total / cfg->n_recipes);
    precis_buf_terminal(&line, row->layer, 96);
    if (strcmp(row->layer, row->workload) != 0) {
      precis_buf_append(&line, " (workload ");
      precis_buf_terminal(&line, row->workload, 64);
      precis_buf_append(&line, ")");
    }
  } else {
    precis_buf_terminal(&line, row->workload, 64);
  }
  precis_buf_append(&line, " ");
  precis_buf_terminal(&line, row->recipe, 96); /* a spec given field by field is long */
  precis_buf_append(&line, ": ");
  precis_buf_terminal(&line, what, cfg->progress_live ? 150 : 0);
  char *text = precis_buf_take(&line);
  if (cfg->progress_live)
    fprintf(stderr, "\r\033[K[%zu/%zu] %s%s", done, total, text ? text : "", done == total ? "\n" : "");
  else
    fprintf(stderr, "[%zu/%zu] %s\n", done, total, text ? text : "");
  free(text);
  fflush(stderr);
}

void precis_case_row(precis_row *row, const precis_run_config *cfg, const precis_workload_info *w,
                     const precis_recipe *recipe) {
  precis_row_init(row);
  row->workload = precis_strdup(w->name);
  row->description = precis_strdup(w->description);
  row->layer = precis_strdup(w->layer);
  row->recipe = precis_strdup(recipe->name);
  row->spec = precis_strdup(recipe->canonical);
  row->recipe_description = precis_strdup(recipe->description);
  row->m = w->m, row->n = w->n, row->k = w->k, row->batch = w->batch;
  row->host = precis_strdup(cfg->host);
  row->target = precis_strdup(cfg->target);
  row->part = cfg->part_count > 1 ? cfg->part_index : 0;
  row->rank = cfg->rank;
  row->device = cfg->device;
}

/* The index of the journal's row for this case, or SIZE_MAX. Rows are matched by
 * precis_journal_case_key only; a key taken already is NULL. */
static size_t kept_row(const precis_journal *kept, char *const *kept_keys, const precis_row *row) {
  if (!kept_keys) return SIZE_MAX;
  char *key = precis_journal_case_key(row);
  size_t found = SIZE_MAX;
  for (size_t i = 0; key && found == SIZE_MAX && i < kept->run.n_rows; i++)
    if (kept_keys[i] && strcmp(kept_keys[i], key) == 0) found = i;
  free(key);
  return found;
}

/* Runs one (workload, recipe) case into *row. Only whole-run problems are returned as errors (a
 * reference that fails its checks when a block of it is read for the metrics). */
static precis_status run_one_case(const precis_run_config *cfg, const precis_recipe *recipe, const precis_workload_info *w,
                                  precis_dataset *ds, size_t wi, precis_workload_data *d, precis_row *row, float **output,
                                  double **output64) {
  precis_status run_st = PRECIS_OK;
  precis_case_output out;
  precis_case_output_init(&out);
  char reason[512] = "";
  *output = NULL;
  *output64 = NULL;
  if (fault_injected(cfg, w->name, recipe->name)) {
    row->status = PRECIS_ROW_FAILED;
    row->reason = precis_strdup("fault injected by PRECIS_FAULT_INJECT (test of case isolation)");
    goto done;
  }
  if (!cfg->backend->supports(cfg->backend_ctx, &recipe->spec, reason, sizeof reason)) {
    row->status = PRECIS_ROW_UNSUPPORTED;
    row->reason = precis_strdup(reason);
    goto done;
  }
  precis_clear_error();
  precis_status st = cfg->backend->run_case(cfg->backend_ctx, &recipe->spec, w, d, &cfg->case_options, &out);
  if (st != PRECIS_OK && out.status == PRECIS_ROW_OK) {
    out.status = PRECIS_ROW_FAILED;
    snprintf(out.reason, sizeof out.reason, "%s", precis_last_error()[0] ? precis_last_error() : precis_status_str(st));
  }
  row->status = out.status;
  if (out.status != PRECIS_ROW_OK) row->reason = precis_strdup(out.reason[0] ? out.reason : "unknown failure");
  else if (!out.c) {
    row->status = PRECIS_ROW_FAILED;
    row->reason = precis_strdup("the backend returned no output");
  }
  row->memory = out.memory;
  row->details = out.details;
  memset(&out.details, 0, sizeof out.details);
  if (row->status == PRECIS_ROW_OK) {
    row->time = out.time;
    memset(&out.time, 0, sizeof out.time);
    if (row->time.median_ms > 0)
      row->tflops = 2.0 * (double)w->m * (double)w->n * (double)w->k * (double)w->batch / (row->time.median_ms * 1e-3) / 1e12;
    if ((run_st = compute_error_metrics(row, w, ds, wi, d, out.c, out.c64, out.clipped_fraction)) != PRECIS_OK) goto done;
    *output = out.c;
    out.c = NULL;
    *output64 = out.c64;
    out.c64 = NULL;
  } else {
    row->time.convert_ms = out.time.convert_ms;
  }
done:
  precis_case_output_free(&out);
  return run_st;
}

/* Free heap memory kept between workloads (more is returned to the system). */
#define RUN_FREE_MEMORY_KEPT ((size_t)64 << 20)

static void format_bytes(uint64_t bytes, char *out, size_t size) {
  if (bytes >= (1ull << 30)) snprintf(out, size, "%.2f GiB", (double)bytes / (double)(1ull << 30));
  else if (bytes >= (1ull << 20)) snprintf(out, size, "%.0f MiB", (double)bytes / (double)(1ull << 20));
  else snprintf(out, size, "%.0f KiB", (double)bytes / 1024.0);
}

/* Before the first case, when some workload's references are read in more than one block: what the
 * largest workload holds (its inputs whole, the output of one case, one block of references; the
 * recipe's own operand copies and accumulators come on top, and differ by recipe). */
static void print_memory_estimate(const precis_run_config *cfg, const precis_workload_info *const *selected,
                                  size_t n_selected, uint64_t budget) {
  bool wide_output = false;
  for (size_t ri = 0; ri < cfg->n_recipes; ri++) wide_output = wide_output || cfg->recipes[ri].spec.out == PRECIS_FMT_F64;
  size_t blocked = 0, worst = SIZE_MAX;
  uint64_t worst_total = 0, worst_inputs = 0, worst_output = 0, worst_refs = 0;
  int64_t worst_block = 0;
  for (size_t si = 0; si < n_selected; si++) {
    const precis_workload_info *w = selected[si];
    const int64_t block = precis_reference_block_samples(w, budget);
    const uint64_t sample = precis_reference_sample_bytes(w), outputs = (uint64_t)w->batch * (uint64_t)w->m * (uint64_t)w->n;
    const uint64_t inputs = precis_workload_bytes(w) - sample * (uint64_t)w->batch, refs = sample * (uint64_t)block,
                   output = outputs * (wide_output ? 12 : 4);
    blocked += block < w->batch;
    if (worst == SIZE_MAX || inputs + output + refs > worst_total)
      worst = si, worst_total = inputs + output + refs, worst_inputs = inputs, worst_output = output, worst_refs = refs,
      worst_block = block;
  }
  if (!blocked || cfg->progress_quiet) return;
  char limit[32], total[32], inputs[32], output[32], refs[32];
  format_bytes(budget, limit, sizeof limit);
  format_bytes(worst_total, total, sizeof total);
  format_bytes(worst_inputs, inputs, sizeof inputs);
  format_bytes(worst_output, output, sizeof output);
  format_bytes(worst_refs, refs, sizeof refs);
  precis_buf line;
  precis_buf_init(&line);
  precis_buf_appendf(&line, "precis run: references held at most %s at a time (--reference-block), %zu of %zu workloads "
                            "in blocks of samples; peak memory ≈ %s at workload ", limit, blocked, n_selected, total);
  precis_buf_terminal(&line, selected[worst]->name, 96);
  precis_buf_appendf(&line, " (inputs %s, output %s, references %s: %lld of %lld samples at a time; the recipe's own "
                            "operand copies and accumulators come on top)", inputs, output, refs, (long long)worst_block,
                     (long long)selected[worst]->batch);
  char *text = precis_buf_take(&line);
  fprintf(stderr, "%s\n", text ? text : "");
  free(text);
}

precis_status precis_run_workloads(const precis_run_config *cfg, precis_report *report) {
  const uint64_t reference_budget = cfg->reference_block_bytes ? cfg->reference_block_bytes : PRECIS_REFERENCE_BLOCK_DEFAULT;
  precis_dataset *ds = NULL;
  precis_journal_writer journal = {-1, NULL};
  precis_journal kept;
  memset(&kept, 0, sizeof kept);
  precis_report_init(&kept.run);
  char **kept_keys = NULL;
  size_t n_kept = 0;
  precis_outputs_writer *saved = NULL;
  const precis_workload_info **selected = NULL;
  int *part_of = NULL; /* per case (selected workload × recipe): the part that runs it */
  precis_status st = precis_dataset_open(cfg->dataset_path, &ds);
  if (st != PRECIS_OK) return st;
  report->dataset_path = precis_strdup(cfg->dataset_path);
  report->complete = false;
  /* The model's shape beside its layers' rows: precis plan --serve reads the KV cache's size from it. */
  if (ds->model_config) precis_kv_set_json(&report->settings, "model_config", ds->model_config);
  /* The run's dataset is its contents (the digest), whatever label its writer gave it: the journal
   * records and a resume compares the digest, so that a resume finds the same file by what it holds. */
  const char *content_id = NULL;
  if ((st = precis_dataset_content_id(ds, &content_id)) != PRECIS_OK) goto done;
  report->dataset_id = precis_strdup(content_id);
  report->dataset_label = ds->dataset_id ? precis_strdup(ds->dataset_id) : NULL;

  if (cfg->workloads) {
    for (size_t i = 0; i < cfg->n_workloads; i++) {
      bool found = false;
      for (size_t wi = 0; wi < ds->n_workloads; wi++) found = found || strcmp(ds->workloads[wi].name, cfg->workloads[i]) == 0;
      if (!found) {
        st = precis_fail(PRECIS_E_USAGE, "%s: no workload named \"%s\"", cfg->dataset_path, cfg->workloads[i]);
        goto done;
      }
    }
  }
  size_t total = 0, done_rows = 0, n_selected = 0;
  bool converted_note = false;
  selected = calloc(ds->n_workloads ? ds->n_workloads : 1, sizeof *selected);
  part_of = calloc(ds->n_workloads * cfg->n_recipes + 1, sizeof *part_of);
  if (!selected || !part_of) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (size_t wi = 0; wi < ds->n_workloads; wi++)
    if (workload_selected(cfg, ds->workloads[wi].name)) selected[n_selected++] = &ds->workloads[wi];
  int this_part = cfg->part_count > 1 ? cfg->part_index : 1;
  if ((st = precis_deal_cases(selected, n_selected, cfg->recipes, cfg->n_recipes, cfg->part_count, part_of)) != PRECIS_OK)
    goto done;
  for (size_t c = 0; c < n_selected * cfg->n_recipes; c++) total += part_of[c] == this_part;
  if (cfg->part_count > 1) {
    /* Recorded before the journal header, which holds the settings: a part resumes only itself. */
    char *shard = precis_deal_describe(cfg->part_index, cfg->part_count, total, selected, n_selected);
    if (!shard) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory");
      goto done;
    }
    precis_kv_set_json(&report->settings, "shard", shard);
    free(shard);
  }

  if (cfg->journal_path) {
    precis_journal_run this_run = {report, cfg->workloads, cfg->n_workloads, cfg->part_index, cfg->part_count};
    if (cfg->resume) {
      if ((st = precis_journal_read(cfg->journal_path, &kept)) != PRECIS_OK) goto done;
      char *difference = precis_journal_difference(&kept, &this_run);
      if (difference) {
        st = precis_fail(PRECIS_E_USAGE, "%s: cannot resume a different run: %s", cfg->journal_path, difference);
        free(difference);
        goto done;
      }
      if (kept.torn_line)
        fprintf(stderr,
                "precis run: %s: line %zu is incomplete (%zu bytes; the run was killed or the disk was full while "
                "writing it): it is dropped and its case runs again\n",
                cfg->journal_path, kept.torn_line, kept.torn_bytes);
      kept_keys = calloc(kept.run.n_rows ? kept.run.n_rows : 1, sizeof *kept_keys);
      if (!kept_keys) {
        st = precis_fail(PRECIS_E_NOMEM, "out of memory");
        goto done;
      }
      for (size_t i = 0; i < kept.run.n_rows; i++) kept_keys[i] = precis_journal_case_key(&kept.run.rows[i]);
      if ((st = precis_journal_reopen(&journal, cfg->journal_path, kept.valid_bytes)) != PRECIS_OK) goto done;
    } else if ((st = precis_journal_create(&journal, cfg->journal_path, &this_run)) != PRECIS_OK)
      goto done;
  }
  if (cfg->save_outputs) {
    st = precis_outputs_open(cfg->save_outputs, cfg->force, content_id, &saved);
    if (st != PRECIS_OK) goto done;
  }

  print_memory_estimate(cfg, selected, n_selected, reference_budget);
  for (size_t si = 0; si < n_selected && !precis_interrupt_signal; si++) {
    const precis_workload_info *w = selected[si];
    size_t wi = (size_t)(w - ds->workloads);
    const int *case_part = part_of + si * cfg->n_recipes;
    /* A workload with nothing to run here (its cases are other parts', or in the journal) is not
     * even loaded. */
    bool nothing_to_run = true;
    for (size_t ri = 0; nothing_to_run && ri < cfg->n_recipes; ri++) {
      if (case_part[ri] != this_part) continue;
      precis_row probe;
      precis_case_row(&probe, cfg, w, &cfg->recipes[ri]);
      nothing_to_run = kept_row(&kept, kept_keys, &probe) != SIZE_MAX;
      precis_row_free(&probe);
    }
    precis_workload_data data;
    memset(&data, 0, sizeof data);
    if (!nothing_to_run) {
      precis_status load = precis_dataset_load_blocked(ds, wi, precis_reference_block_samples(w, reference_budget), &data);
      if (load != PRECIS_OK) {
        /* A corrupt reference must never be used: the whole run stops with the dataset error. */
        st = load;
        goto done;
      }
    }
    for (size_t ri = 0; ri < cfg->n_recipes && !precis_interrupt_signal; ri++) {
      if (case_part[ri] != this_part) continue;
      const precis_recipe *recipe = &cfg->recipes[ri];
      precis_row row;
      precis_case_row(&row, cfg, w, recipe);
      size_t earlier = kept_row(&kept, kept_keys, &row);
      if (earlier != SIZE_MAX) {
        /* Done before with the same dataset and settings: kept as measured, not run again. */
        precis_row_free(&row);
        row = kept.run.rows[earlier];
        precis_row_init(&kept.run.rows[earlier]);
        free(kept_keys[earlier]);
        kept_keys[earlier] = NULL;
        n_kept++;
        progress(cfg, ++done_rows, total, &row);
        st = precis_report_add_row(report, &row);
        if (st != PRECIS_OK) {
          precis_row_free(&row);
          precis_workload_data_free(&data);
          goto done;
        }
        continue;
      }
      float *output = NULL;
      double *output64 = NULL;
      if ((st = run_one_case(cfg, recipe, w, ds, wi, &data, &row, &output, &output64)) != PRECIS_OK) {
        /* A reference found corrupt while its blocks were read: the whole run stops, as at the load. */
        precis_row_free(&row);
        precis_workload_data_free(&data);
        goto done;
      }
      if (precis_interrupt_signal && row.status != PRECIS_ROW_OK) {
        /* Abandoned mid-case by the interrupt: not a measurement, not journaled. */
        precis_row_free(&row);
        free(output);
        free(output64);
        break;
      }
      precis_criteria defaults;
      if (!cfg->require && converted_criteria(w, &defaults)) {
        if (!converted_note && !cfg->progress_quiet)
          fprintf(stderr, "precis run: the converted layers (b = a converted checkpoint's weights, c_ref from the original) "
                          "are judged by the artifact's error against the original, as recorded at import "
                          "(source.converted.criterion, e.g. rel_fro<=0.5 for 4-bit integer weights), not by the "
                          "recipe's own gate; --require replaces it\n");
        converted_note = true;
      } else if (!cfg->require) {
        precis_default_criteria(&recipe->spec, w->k, &defaults);
      }
      precis_row_judge(&row, cfg->require ? cfg->require : &defaults);
      if (saved && output) {
        precis_status ws = output64 ? precis_outputs_write_f64(saved, w->name, recipe->name, output64, w->batch, w->m, w->n)
                                    : precis_outputs_write(saved, w->name, recipe->name, output, w->batch, w->m, w->n);
        if (ws != PRECIS_OK) {
          free(output);
          free(output64);
          precis_row_free(&row);
          precis_workload_data_free(&data);
          st = ws;
          goto done;
        }
      }
      free(output);
      free(output64);
      if (journal.fd >= 0) {
        st = precis_journal_append(&journal, &row);
        if (st != PRECIS_OK) {
          precis_row_free(&row);
          precis_workload_data_free(&data);
          goto done;
        }
      }
      progress(cfg, ++done_rows, total, &row);
      st = precis_report_add_row(report, &row);
      if (st != PRECIS_OK) {
        precis_row_free(&row);
        precis_workload_data_free(&data);
        goto done;
      }
    }
    precis_workload_data_free(&data);
    /* The next workload's buffers have other sizes: its peak RSS should not hold this one's, nor
     * what malloc keeps of them beyond what the next one reuses (host_memory.h). */
    precis_tracked_cache_release();
    precis_release_free_memory(RUN_FREE_MEMORY_KEPT);
  }
  if (cfg->resume) {
    /* Provenance: these rows were measured by an earlier process (maybe under another load). */
    precis_kv_set_int(&report->environment, "resumed_cases_kept", (long long)n_kept);
    fprintf(stderr, "precis run: resumed %s: %zu cases kept from the journal, %zu run now\n", cfg->journal_path, n_kept,
            done_rows - n_kept);
  }
  if (precis_interrupt_signal) st = precis_fail(PRECIS_E_INTERRUPTED, "interrupted by signal %d after %zu of %zu rows",
                                                precis_interrupt_signal, done_rows, total);
  else report->complete = true;

done:
  if (saved) {
    /* Saved outputs are kept for every completed row, also after an interrupt. */
    precis_status cs = precis_outputs_close(saved, st == PRECIS_OK || st == PRECIS_E_INTERRUPTED);
    if (st == PRECIS_OK) st = cs;
  }
  precis_journal_close(&journal);
  for (size_t i = 0; kept_keys && i < kept.run.n_rows; i++) free(kept_keys[i]);
  free(kept_keys);
  precis_journal_free(&kept);
  free(selected);
  free(part_of);
  precis_dataset_close(ds);
  return st;
}
