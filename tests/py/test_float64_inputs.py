#!/usr/bin/python3
"""Datasets with float64 a/b (DESIGN §13, issue 19), written with h5py as an HPC user would.

fp64 and the Ozaki recipes must see all 53 bits (their error against an exact double-double
reference is near 1e-16, where float32 inputs would give 1e-8), the Ozaki output must match the
oracle of test_split_oracle.py bit for bit on the float64 values, fp32 recipes read the float32
rounding, `precis inspect` accepts the file and its dataset_id covers the float64 bytes, and a
non-finite float64 input is refused naming the element.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import json
import os
import re
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
from fractions import Fraction

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print(f"skipped: {exc}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_split_oracle import ozaki_gemm  # noqa: E402  the same independent oracle

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([PRECIS, *args], capture_output=True, text=True)


def write(path, a, b, dd=True):
    batch, m, k = a.shape
    n = b.shape[1]
    exact = [[[sum(Fraction(float(a[s, i, p])) * Fraction(float(b[p, j])) for p in range(k)) for j in range(n)]
              for i in range(m)] for s in range(batch)]
    hi = np.array([[[float(v) for v in row] for row in mat] for mat in exact])
    lo = np.array([[[float(v - Fraction(float(v))) for v in row] for row in mat] for mat in exact])
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "precis-dataset"
        f.attrs["format_version"] = 1
        f.attrs["generator"] = "test_float64_inputs"
        f.attrs["created_utc"] = "2026-12-01T00:00:00Z"
        f.attrs["seed"] = 0
        f.attrs["suite"] = ""
        f.attrs["dataset_id"] = "hand-written"
        w = f.create_group("workloads/hpc")
        w.attrs["kind"] = "gemm"
        w.attrs["m"], w.attrs["n"], w.attrs["k"], w.attrs["batch"] = m, n, k, batch
        w.attrs["description"] = "float64 inputs"
        w.attrs["a_dist"] = w.attrs["b_dist"] = "float64 normal"
        w.attrs["reference_precision"] = "double-double" if dd else "float64"
        arrays = [("a", a), ("b", b), ("c_ref", hi), ("ab_abs", np.abs(a) @ np.abs(b))]
        if dd:
            arrays.append(("c_ref_lo", lo))
        for name, data in arrays:
            w.create_dataset(name, data=data, chunks=True, fletcher32=True)
    return hi


def main():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 5, 12))  # float64: 53-bit significands
    b = rng.standard_normal((12, 4)) * np.exp(rng.standard_normal((12, 4)))
    with scratch.TemporaryDirectory() as tmp:
        data, out, saved = (os.path.join(tmp, x) for x in ("d.h5", "r", "o.h5"))
        exact_hi = write(data, a, b)
        proc = run("inspect", data)
        check(proc.returncode == 0, f"inspect accepts float64 a/b ({proc.stderr.strip()[:200]})")
        proc = run("run", data, "--recipes", "fp32,fp64,ozaki-int8-4,ozaki-int8-8", "-o", out, "--save-outputs", saved,
                   *FAST)
        check(proc.returncode in (0, 1), f"run ({proc.returncode}) {proc.stderr.strip()[:200]}")
        report = json.load(open(os.path.join(out, "report.json")))
        rows = {r["recipe"]: r for r in report["rows"]}
        # The run's dataset_id is the digest of the contents (float64 bytes included), the one inspect
        # recomputes, and the file's own label is kept beside it.
        contents = re.search(r"contents +([0-9a-f]{64})", run("inspect", data).stdout)
        check(contents is not None and report["dataset"]["dataset_id"] == contents.group(1)
              and report["dataset"]["label"] == "hand-written",
              f"report dataset {report['dataset']} is not the digest inspect prints")
        fro = {name: rows[name]["error"]["rel_fro"]["worst"] for name in rows}
        check(fro["fp64"] is not None and fro["fp64"] < 1e-15, f"fp64 sees 53-bit inputs: rel_fro {fro['fp64']}")
        check(fro["ozaki-int8-8"] < 1e-14, f"ozaki-int8-8 on float64 inputs: rel_fro {fro['ozaki-int8-8']}")
        check(fro["fp32"] > 1e-9, f"fp32 reads the float32 rounding: rel_fro {fro['fp32']}")
        with h5py.File(saved, "r") as o:
            for slices in (4, 8):
                c = o[f"workloads/hpc/ozaki-int8-{slices}/c"][()]
                same = all(np.array_equal(c[s].view(np.uint64), ozaki_gemm(a[s], b, slices).view(np.uint64))
                           for s in range(a.shape[0]))
                check(same, f"ozaki-int8-{slices} on float64 inputs: bit for bit with the oracle")
            c = o["workloads/hpc/fp32/c"][()]
            want = (a.astype(np.float32).astype(np.float64) @ b.astype(np.float32).astype(np.float64))
            check(np.max(np.abs(c - want)) < 1e-4 * np.max(np.abs(want)), "fp32 computed from the float32 rounding")
        # The contents digest covers the float64 bytes: one ulp of one input changes it.
        def contents():
            proc = run("inspect", data)
            line = [x for x in proc.stdout.splitlines() if x.strip().startswith("contents")]
            return proc.returncode, line[0].split()[1] if line else None
        rc1, digest1 = contents()
        b2 = b.copy()
        b2[0, 0] = np.nextafter(b2[0, 0], np.inf)
        check(np.float32(b2[0, 0]) == np.float32(b[0, 0]), "the change is invisible in float32")
        write(data, a, b2)
        rc2, digest2 = contents()
        check(rc1 == 0 and rc2 == 0 and digest1 and digest2 and digest1 != digest2,
              f"contents digest covers float64 bytes ({digest1} vs {digest2})")
        # A NaN in a float64 input is refused, naming the dataset and element.
        write(data, a, b, dd=False)
        with h5py.File(data, "r+") as f:
            f["workloads/hpc/a"][1, 2, 3] = np.nan
        proc = run("run", data, "--recipes", "fp64", "-o", os.path.join(tmp, "r2"), *FAST)
        check(proc.returncode == 2 and "/workloads/hpc/a" in proc.stderr and "[1,2,3]" in proc.stderr,
              f"NaN in float64 a refused: {proc.stderr.strip()[:200]}")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
