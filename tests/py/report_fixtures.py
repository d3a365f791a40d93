"""Crafted precis reports (report.json, format_version 1) for the report, recommend and compare
tests, so that they do not depend on `precis run`."""
import json
import math
import os

METRICS = ["max_abs", "max_rel", "rel_fro", "rmse", "sqnr_db", "cosine", "mean_err", "max_cw", "nonfinite", "clipped"]


def error_block(rel_fro):
    """Every metric of DESIGN §5, consistent with rel_fro (an exact output has sqnr_db null)."""
    e = {}
    for key in METRICS:
        e[key] = None
    def pair(worst, mean=None):
        return {"worst": worst, "mean": worst * 0.8 if mean is None else mean}
    e["rel_fro"] = pair(rel_fro)
    e["max_abs"] = pair(rel_fro * 12.0)
    e["max_rel"] = pair(rel_fro * 40.0)
    e["rmse"] = pair(rel_fro * 3.0)
    e["max_cw"] = pair(rel_fro * 0.5)
    e["sqnr_db"] = None if rel_fro == 0 else pair(-20 * math.log10(rel_fro), -20 * math.log10(rel_fro * 0.8))
    e["cosine"] = pair(1 - rel_fro * rel_fro / 2, 1 - rel_fro * rel_fro / 3)
    e["mean_err"] = pair(rel_fro * 1e-3)
    e["nonfinite"] = pair(0, 0)
    e["clipped"] = pair(0, 0)
    return e


def samples(median_ms, count=40, spread=0.03):
    """Deterministic latency samples around a median (a small symmetric spread plus one slow tail)."""
    out = []
    for i in range(count):
        u = (i * 0.6180339887498949) % 1.0
        out.append(median_ms * (1 + spread * (2 * u - 1)))
    out[-1] = median_ms * (1 + 4 * spread)
    return out


def timing(median_ms, count=40, spread=0.03):
    s = samples(median_ms, count, spread)
    ordered = sorted(s)
    def pct(p):
        idx = p * (len(ordered) - 1)
        lo = int(math.floor(idx))
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (idx - lo)
    mean = sum(s) / len(s)
    return {"min_ms": ordered[0], "median_ms": median_ms, "mean_ms": mean, "p95_ms": pct(0.95),
            "p99_ms": pct(0.99), "stdev_ms": math.sqrt(sum((x - mean) ** 2 for x in s) / (len(s) - 1)),
            "samples": len(s), "calls_per_sample": 1, "convert_ms": median_ms * 0.05, "e2e_median_ms": None,
            "samples_ms": s}


RECIPE_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "fp16acc16": 2, "bf16": 2, "int8": 1, "fp8": 1}


def row(workload, recipe, rel_fro, median_ms, m=256, n=256, k=256, batch=1, status="ok", reason=None,
        criteria=("rel_fro<=0.01",), verdict=None, description="normal(0,1) inputs", peak_bytes=None):
    limit = None
    for c in criteria:
        if c.startswith("rel_fro<="):
            limit = float(c.split("<=")[1])
    if status != "ok":
        return {"workload": workload, "recipe": recipe, "description": description,
                "recipe_description": recipe + " recipe", "m": m, "n": n, "k": k, "batch": batch,
                "status": status, "reason": reason or "failed", "verdict": None, "verdict_detail": None,
                "criteria": list(criteria), "error": {key: None for key in METRICS},
                "time": {"min_ms": None, "median_ms": None, "mean_ms": None, "p95_ms": None, "p99_ms": None,
                         "stdev_ms": None, "samples": 0, "calls_per_sample": 0, "convert_ms": None,
                         "e2e_median_ms": None, "samples_ms": []},
                "tflops": None,
                "memory": {"tensor_bytes": None, "tracked_peak_bytes": None, "device_baseline_bytes": None,
                           "device_peak_bytes": None, "untracked_bytes": None, "host_peak_rss_bytes": None},
                "details": {}}
    if verdict is None:
        verdict = "pass" if (limit is None or rel_fro <= limit) else "fail"
    detail = None
    if verdict == "fail" and limit is not None:
        detail = "rel_fro=%.3g > %g (%.3gx over)" % (rel_fro, limit, rel_fro / limit)
    size = RECIPE_BYTES.get(recipe, 4)
    tensor = batch * (m * k + k * n) * size + batch * m * n * max(size, 2)
    return {"workload": workload, "recipe": recipe, "description": description,
            "recipe_description": recipe + " recipe", "m": m, "n": n, "k": k, "batch": batch,
            "status": "ok", "reason": None, "verdict": verdict, "verdict_detail": detail,
            "criteria": list(criteria), "error": error_block(rel_fro), "time": timing(median_ms),
            "tflops": 2.0 * m * n * k * batch / (median_ms * 1e-3) / 1e12,
            "memory": {"tensor_bytes": tensor, "tracked_peak_bytes": peak_bytes if peak_bytes is not None else tensor + 4096,
                       "device_baseline_bytes": None, "device_peak_bytes": None, "untracked_bytes": None,
                       "host_peak_rss_bytes": 50_000_000},
            "details": {"emulation": "cpu"}}


def report(rows, backend="cpu-emulation", complete=True, dataset_id="0123abcd", env=None):
    environment = {"backend": backend, "device": None if backend != "cuda" else "NVIDIA H100 80GB HBM3",
                   "precis_version": "0.1.0", "cpu": "Test CPU", "utc_time": "2026-01-01T00:00:00Z"}
    environment.update(env or {})
    recipes = []
    for r in rows:
        if r["recipe"] not in recipes:
            recipes.append(r["recipe"])
    return {"format": "precis-report", "format_version": 1, "complete": complete,
            "tool": {"name": "precis", "version": "0.1.0", "commit": "test"},
            "environment": environment, "dataset": {"path": "crafted.h5", "dataset_id": dataset_id},
            "settings": {"recipes": recipes, "criteria": [], "backend": backend}, "rows": rows}


def write(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def standard_rows():
    """Three workloads × five recipes with the usual shape: fp32 slow and exact, bf16/fp16 faster,
    int8 fastest with the largest error (fails the 1e-2 gate on one workload)."""
    rows = []
    for workload, scale in (("square-256", 1.0), ("tall-skinny", 0.5), ("batched", 2.0)):
        rows.append(row(workload, "fp32", 1.2e-7, 4.0 * scale))
        rows.append(row(workload, "tf32", 2.5e-4, 2.6 * scale))
        rows.append(row(workload, "fp16", 4.1e-4, 2.1 * scale))
        rows.append(row(workload, "bf16", 3.0e-3, 2.0 * scale))
        rows.append(row(workload, "int8", 2.0e-2 if workload == "batched" else 8.0e-3, 1.1 * scale))
    return rows


def precis_binary():
    path = os.environ.get("PRECIS")
    if not path or not os.path.exists(path):
        build = os.environ.get("PRECIS_BUILD_DIR", "build")
        path = os.path.join(build, "precis")
    return path
