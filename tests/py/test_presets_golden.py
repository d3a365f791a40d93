#!/usr/bin/python3
"""The seven presets reproduce the recipes of before recipe specs (issue 13) bit for bit.

tests/golden/presets.json was recorded with the precis of commit 876f832 (recipe ids, before specs)
by running this script with --record; the test reruns the same commands with the current precis and
compares, per case, the SHA-256 of the saved output (--save-outputs) and the accuracy fields of the
report row (status, verdict, every error metric).

Cases: every preset on the `default` preset dataset and on a dataset written here with h5py, and int8
with each static calibration method (--int8-act-scale absmax / percentile / mse) on the h5py one.

Issue 33 re-recorded the tf32, fp16 and bf16 cases (the golden's `rerecorded` says with which
precis): the cpu backend now sums them in sm_90's tensor-core MMA model (src/eval/cpu_gemm_mma.c)
instead of OpenBLAS sgemm; every other case was recorded again unchanged.

What the golden depends on: fp32 and fp8 sum with OpenBLAS sgemm, and the
default dataset's references come from OpenBLAS dgemm, so their bits depend on the BLAS kernels. The
test pins them: OPENBLAS_CORETYPE=Prescott (the SSE3 kernels, which every x86-64 CPU runs; needs
Debian's DYNAMIC_ARCH OpenBLAS) and OPENBLAS_NUM_THREADS=1, and compares those cases only when this
OpenBLAS is the version the golden was recorded with (0.3.21). Everything else -- int8 and fp16acc16
outputs, and every metric on the h5py dataset, whose references are exact -- is compared on any machine.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print(f"skipped: {exc}")
    sys.exit(77)

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "presets.json")
PRESETS = "fp32,tf32,fp16,fp16acc16,bf16,int8,fp8"
# Outputs that do not go through sgemm: exact integer GEMM, the fp16 accumulation loop, and the
# tensor-core MMA model of tf32/fp16/bf16 (issue 33).
BLAS_FREE = {"int8", "fp16acc16", "tf32", "fp16", "bf16"}
ENV = dict(os.environ, OPENBLAS_CORETYPE="Prescott", OPENBLAS_NUM_THREADS="1")
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]

failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def precis(*args):
    proc = subprocess.run([PRECIS, *args], capture_output=True, text=True, env=ENV)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"precis {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def blas_version():
    text = precis("info").stdout
    match = re.search(r"OpenBLAS (\d+\.\d+\.\d+)", text)
    return match.group(1) if match else "unknown"


def write_h5py_dataset(path):
    """Dyadic inputs of at most 20 significant bits: every product and sum of the references is exact
    in float64, so c_ref does not depend on any summation order."""
    def values(shape, salt):
        idx = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        ints = (idx * 7919 + salt * 104729) % 1048573 - 524286  # about +-2^19
        scale = np.where(idx % 11 == 0, 2.0 ** -12, 2.0 ** -19)  # a few larger entries: outliers
        return (ints * scale).astype(np.float32)

    shapes = [("odd-3x5x7", 3, 5, 7, 2, False), ("batched-b", 9, 17, 33, 3, True), ("square-64", 64, 64, 64, 1, False)]
    with h5py.File(path, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="test_presets_golden.py",
                       created_utc="2026-01-01T00:00:00Z", seed=0, suite="", dataset_id="golden-h5py")
        for salt, (name, m, n, k, batch, b_batched) in enumerate(shapes):
            a = values((batch, m, k), salt)
            b = values((batch, k, n) if b_batched else (k, n), salt + 7)
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            w = f.create_group(f"workloads/{name}")
            w.attrs.update(kind="gemm", m=m, n=n, k=k, batch=batch, description="golden", a_dist="dyadic",
                           b_dist="dyadic")
            w["a"] = a
            w["b"] = b
            w["c_ref"] = a64 @ b64
            w["ab_abs"] = np.abs(a64) @ np.abs(b64)
            w["calib/a"] = values((2, m, k), salt + 13)


def digests(outputs_path):
    out = {}
    with h5py.File(outputs_path, "r") as f:
        for workload in f["workloads"]:
            for recipe in f[f"workloads/{workload}"]:
                data = f[f"workloads/{workload}/{recipe}/c"][...]
                out[(workload, recipe)] = hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()
    return out


def run_cases(tmp, label, dataset, recipes, extra):
    out_dir, outputs = os.path.join(tmp, label), os.path.join(tmp, label + "-outputs.h5")
    precis("run", dataset, "--recipes", recipes, "-o", out_dir, "--save-outputs", outputs, *FAST, *extra)
    with open(os.path.join(out_dir, "report.json"), encoding="utf-8") as fp:
        report = json.load(fp)
    sha = digests(outputs)
    cases = {}
    for row in report["rows"]:
        key = f"{label}/{row['workload']}/{row['recipe']}"
        cases[key] = {"status": row["status"], "verdict": row["verdict"], "error": row["error"],
                      "output_sha256": sha.get((row["workload"], row["recipe"]))}
    return cases


def collect(tmp):
    default = os.path.join(tmp, "default.h5")
    precis("gen", "--preset", "default", "-o", default, "-q")
    handmade = os.path.join(tmp, "handmade.h5")
    write_h5py_dataset(handmade)
    cases = {}
    cases.update(run_cases(tmp, "default", default, PRESETS, []))
    cases.update(run_cases(tmp, "h5py", handmade, PRESETS, []))
    for method, extra in (("absmax", []), ("percentile", ["--percentile", "99.9"]), ("mse", [])):
        cases.update(run_cases(tmp, f"h5py-static-{method}", handmade, "int8", ["--int8-act-scale", method, *extra]))
    return cases


def blas_free(key):
    label, _, recipe = key.split("/")
    return recipe in BLAS_FREE


def main():
    tmp = scratch.mkdtemp(prefix="precis-presets-golden-")
    try:
        cases = collect(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if "--record" in sys.argv:
        golden = {"recorded_with": subprocess.run([PRECIS, "--version"], capture_output=True, text=True).stdout.strip(),
                  "openblas": blas_version(), "env": {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_NUM_THREADS": "1"},
                  "cases": cases}
        with open(GOLDEN, "w", encoding="utf-8") as fp:
            json.dump(golden, fp, indent=1, sort_keys=True)
            fp.write("\n")
        print(f"recorded {len(cases)} cases into {GOLDEN}")
        return 0
    with open(GOLDEN, encoding="utf-8") as fp:
        golden = json.load(fp)
    same_blas = golden["openblas"] == blas_version()
    if not same_blas:
        print(f"note: golden recorded with OpenBLAS {golden['openblas']}, this is {blas_version()}: "
              "only the cases that do not depend on the BLAS kernels are compared")
    check(set(cases) == set(golden["cases"]), f"the same {len(golden['cases'])} cases as the golden")
    compared = 0
    for key, want in sorted(golden["cases"].items()):
        got = cases.get(key)
        if got is None:
            continue
        label = key.split("/")[0]
        if not same_blas and not blas_free(key):
            continue
        check(got["output_sha256"] == want["output_sha256"], f"{key}: output bits")
        if same_blas or label.startswith("h5py"):
            check(got["status"] == want["status"] and got["verdict"] == want["verdict"], f"{key}: status and verdict")
            check(got["error"] == want["error"], f"{key}: every error metric")
        compared += 1
    check(compared >= 20, f"{compared} cases compared")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
