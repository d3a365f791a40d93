"""precis run end to end on the cpu backend, checked with independent arithmetic (NumPy + h5py):

- every metric of every row recomputed from the dataset and the saved outputs (relative 1e-9);
- int8 outputs equal an exact integer computation of the recipe (quantize, integer GEMM, dequantize);
- an integer-valued workload gives zero error for fp32, tf32, fp16, fp16acc16 and bf16;
- random-normal workloads stay within each recipe's documented bound (the default gates pass);
- gates can fail: a --require that cannot be met exits 3, fp16 overflow fails the default gate;
- a deliberately failing row does not abort the run, and the journal keeps every row;
- a dataset written by h5py alone (DESIGN §4) runs.
"""
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

import h5py
import numpy as np

from cuda_expect import check_cuda_outcome

PRECIS = os.environ["PRECIS"]
FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(args, expect=None, env=None):
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True, env=full_env)
    if expect is not None and p.returncode != expect:
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}")
    return p


SUITE = """
seed: 7
workloads:
  - name: normal-shared-b
    m: 24
    n: 40
    k: 72
    batch: 3
    a: normal
    b: normal
  - name: normal-batched-b
    m: 9
    n: 13
    k: 33
    batch: 2
    b_batched: true
    a: {dist: normal, mean: 0, std: 2}
    b: {dist: uniform, lo: -1, hi: 1}
  - name: integers
    m: 16
    n: 12
    k: 40
    batch: 2
    a: {dist: integers, lo: -4, hi: 4}
    b: {dist: integers, lo: -4, hi: 4}
  - name: fp16-overflow
    m: 4
    n: 4
    k: 64
    batch: 1
    a: {dist: uniform, lo: 200, hi: 300}
    b: {dist: uniform, lo: 200, hi: 300}
"""

FAST = ["--min-samples", "2", "--max-samples", "3", "--max-time-ms", "5"]


def metrics(c, r, ab):
    c = c.astype(np.float64)
    d = c - r
    finite = np.isfinite(c)
    nonfinite = int((~finite).sum())
    out = {}
    rms_r = np.sqrt(np.mean(r * r))
    if nonfinite:
        return {"nonfinite": nonfinite}
    out["max_abs"] = np.max(np.abs(d))
    out["max_rel"] = np.max(np.abs(d) / np.maximum(np.abs(r), 1e-3 * rms_r))
    nr = np.linalg.norm(r)
    out["rel_fro"] = np.linalg.norm(d) / nr
    out["rmse"] = np.sqrt(np.mean(d * d))
    out["sqnr_db"] = None if out["rel_fro"] == 0 else -20 * np.log10(out["rel_fro"])
    out["cosine"] = float(np.dot(c.ravel(), r.ravel()) / (np.linalg.norm(c) * nr))
    out["mean_err"] = np.mean(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        cw = np.where(ab > 0, np.abs(d) / np.where(ab > 0, ab, 1), np.where(np.abs(d) > 0, np.inf, 0))
    out["max_cw"] = np.max(cw)
    out["nonfinite"] = 0
    return out


WORST = {"sqnr_db": min, "cosine": min, "mean_err": lambda v: max(v, key=abs)}


def close(a, b, rel=1e-9):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def int8_reference(a, b, b_batched):
    """The int8 recipe in NumPy float32: per-row A scales, per-column B scales, exact integer GEMM."""
    f32 = np.float32

    def q(x, s):
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(s > 0, np.rint(x / np.where(s > 0, s, f32(1))), f32(0))
        return np.clip(v, -127, 127).astype(np.int64)

    batch, m, k = a.shape
    rows = a.reshape(batch * m, k)
    sa = (np.max(np.abs(rows), axis=1) / f32(127)).astype(f32)
    qa = q(rows, sa[:, None]).reshape(batch, m, k)
    sa = sa.reshape(batch, m)
    bs = b if b_batched else b[None]
    sb = (np.max(np.abs(bs), axis=1) / f32(127)).astype(f32)  # [nb, n]
    qb = q(bs, sb[:, None, :])
    out = []
    for i in range(batch):
        j = i if b_batched else 0
        acc = qa[i] @ qb[j]
        assert np.abs(acc).max() < 2**31
        scale = (sa[i][:, None] * sb[j][None, :]).astype(f32)
        out.append((scale * acc.astype(f32)).astype(f32))
    return np.stack(out)


def main():
    tmp = scratch.mkdtemp(prefix="precis-e2e-")
    suite = os.path.join(tmp, "suite.yaml")
    with open(suite, "w") as f:
        f.write(SUITE)
    ds = os.path.join(tmp, "d.h5")
    run(["gen", suite, "-o", ds], expect=0)

    out_dir = os.path.join(tmp, "rep")
    saved = os.path.join(tmp, "outputs.h5")
    p = run(["run", ds, "--backend", "cpu", "-o", out_dir, "--save-outputs", saved, "--quiet"] + FAST, expect=0)
    report = json.load(open(os.path.join(out_dir, "report.json")))
    check(report["format"] == "precis-report" and report["format_version"] == 1, "report header")
    check(report["complete"] is True, "report complete")
    check(report["environment"]["backend"] == "cpu-emulation", "rows labelled cpu-emulation")
    rows = {(r["workload"], r["recipe"]): r for r in report["rows"]}
    # The default recipe list is `all`: DESIGN §3's seven and issue 16's nine (the high-precision
    # family is named on its own, --recipes high-precision).
    presets = len(json.loads(run(["recipes", "--recipes", "all", "--json"], expect=0).stdout)["recipes"])
    check(presets == 16, f"16 presets, got {presets}")
    check(len(rows) == 4 * presets, f"expected {4 * presets} rows, got {len(rows)}")
    journal = [json.loads(l) for l in open(os.path.join(out_dir, "journal.jsonl"))]
    check(journal[0].get("format") == "precis-journal", "journal starts with its header")
    check(len(journal) == 1 + 4 * presets, "journal has every row")
    for name in ("report.csv", "report.md", "report.html"):
        check(os.path.getsize(os.path.join(out_dir, name)) > 0, f"{name} written")

    with h5py.File(ds, "r") as d, h5py.File(saved, "r") as o:
        for (wl, recipe), row in rows.items():
            check(row["status"] == "ok", f"{wl}/{recipe} status {row['status']} {row.get('reason')}")
            c = o[f"/workloads/{wl}/{recipe}/c"][()]
            r = d[f"/workloads/{wl}/c_ref"][()]
            ab = d[f"/workloads/{wl}/ab_abs"][()]
            per = [metrics(c[i], r[i], ab[i]) for i in range(c.shape[0])]
            if any(pm["nonfinite"] for pm in per):
                check(row["error"]["nonfinite"]["worst"] == max(pm["nonfinite"] for pm in per),
                      f"{wl}/{recipe} nonfinite count")
                continue
            for key in ("max_abs", "max_rel", "rel_fro", "rmse", "sqnr_db", "cosine", "mean_err", "max_cw"):
                vals = [pm[key] for pm in per if pm[key] is not None]
                got = row["error"][key]
                if not vals:
                    check(got is None, f"{wl}/{recipe} {key}: expected null (exact), got {got}")
                    continue
                worst = WORST.get(key, max)(vals)
                mean = float(np.mean(vals))
                check(got is not None and close(got["worst"], worst) and close(got["mean"], mean),
                      f"{wl}/{recipe} {key}: report {got}, recomputed worst {worst} mean {mean}")

        # int8 equals the exact integer computation, bit for bit.
        for wl in ("normal-shared-b", "normal-batched-b", "integers"):
            a = d[f"/workloads/{wl}/a"][()]
            b = d[f"/workloads/{wl}/b"][()]
            ref = int8_reference(a, b, b.ndim == 3)
            got = o[f"/workloads/{wl}/int8/c"][()]
            check(np.array_equal(ref.view(np.uint32), got.view(np.uint32)),
                  f"{wl}: int8 output differs from the exact integer computation "
                  f"(max diff {np.max(np.abs(ref - got))})")

            # The integer workload is exact for every float recipe whose inputs represent it (fp8's
        # per-tensor scaling maps the integers onto values e4m3 cannot hold, so it is not exact).
        for recipe in ("fp32", "tf32", "fp16", "fp16acc16", "bf16"):
            got = o[f"/workloads/integers/{recipe}/c"][()].astype(np.float64)
            check(np.array_equal(got, d["/workloads/integers/c_ref"][()]), f"integers/{recipe} is not exact")
            check(rows[("integers", recipe)]["error"]["rel_fro"]["worst"] == 0, f"integers/{recipe} rel_fro 0")

    # Random normal data stays within each recipe's documented bound: the default gates pass.
    for wl in ("normal-shared-b", "normal-batched-b"):
        for recipe in ("fp32", "tf32", "fp16", "fp16acc16", "bf16", "fp8", "int8"):
            row = rows[(wl, recipe)]
            check(row["verdict"] == "pass", f"{wl}/{recipe}: default gate {row['verdict']} {row['verdict_detail']}")
    # fp16 overflow: counted as nonfinite and failing the default gate; --gate makes it exit 3.
    row = rows[("fp16-overflow", "fp16")]
    check(row["error"]["nonfinite"]["worst"] > 0 and row["verdict"] == "fail", "fp16 overflow fails its gate")
    check(rows[("fp16-overflow", "fp32")]["verdict"] == "pass", "fp32 does not overflow")
    p = run(["run", ds, "--backend", "cpu", "--recipes", "fp16", "--workloads", "fp16-overflow", "--gate",
             "-o", os.path.join(tmp, "gate"), "--quiet"] + FAST, expect=3)

    # A criterion that cannot be met fails the row and the exit code (gates can fail).
    p = run(["run", ds, "--backend", "cpu", "--recipes", "bf16", "--workloads", "normal-shared-b",
             "--require", "max_cw<=1e-9", "-o", os.path.join(tmp, "strict"), "--quiet"] + FAST, expect=3)
    strict = json.load(open(os.path.join(tmp, "strict", "report.json")))
    check(strict["rows"][0]["verdict"] == "fail" and "max_cw" in strict["rows"][0]["verdict_detail"],
          "strict criterion names the metric")
    check(strict["settings"]["criteria"] == ["max_cw<=1e-9"], "criteria recorded in settings")

    # A gate on a logit metric over a dataset without logit workloads judged nothing: exit 3 with why,
    # the reports still written (it applies to lm_head rows only; tests/venv/test_python_model_logits.py).
    p = run(["run", ds, "--backend", "cpu", "--recipes", "bf16", "--workloads", "normal-shared-b",
             "--require", "kl_mean<=1", "-o", os.path.join(tmp, "nologits"), "--quiet"] + FAST, expect=3)
    check("--require kl_mean<=1 judges no row" in p.stderr and "logit workload" in p.stderr
          and os.path.isfile(os.path.join(tmp, "nologits", "report.json")), f"kl_mean on no logit row: {p.stderr}")

    # Existing reports are not overwritten without --force.
    p = run(["run", ds, "--backend", "cpu", "--recipes", "bf16", "-o", os.path.join(tmp, "strict"), "--quiet"] + FAST,
            expect=2)
    check("already exists" in p.stderr, "refusal names the existing report")

    # A failing case does not abort the run.
    p = run(["run", ds, "--backend", "cpu", "--recipes", "fp32,bf16", "-o", os.path.join(tmp, "fault"), "--quiet"] + FAST,
            expect=1, env={"PRECIS_FAULT_INJECT": "normal-shared-b:fp32"})
    fault = json.load(open(os.path.join(tmp, "fault", "report.json")))
    statuses = {(r["workload"], r["recipe"]): r["status"] for r in fault["rows"]}
    check(statuses[("normal-shared-b", "fp32")] == "failed", "injected fault recorded as failed")
    check(len(statuses) == 8 and sum(s == "ok" for s in statuses.values()) == 7, "every other row ran")
    check(len(open(os.path.join(tmp, "fault", "journal.jsonl")).readlines()) == 1 + 8, "journal kept every row")

    # --backend cuda: exit 1 with a clear message without the backend or a device, 0 with both.
    p = run(["run", ds, "--backend", "cuda", "-o", os.path.join(tmp, "cuda"), "--quiet"])
    check_cuda_outcome(PRECIS, p, (0,), check, "run --backend cuda")

    # A dataset written by h5py alone, following DESIGN §4, runs.
    hand = os.path.join(tmp, "hand.h5")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 5)).astype(np.float32)
    c_ref = np.einsum("bmk,kn->bmn", a.astype(np.float64), b.astype(np.float64))
    ab_abs = np.einsum("bmk,kn->bmn", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    with h5py.File(hand, "w") as f:
        f.attrs.update(format="precis-dataset", format_version=1, generator="h5py by hand",
                       created_utc="2026-11-30T00:00:00Z", seed=0, suite="", dataset_id="hand-made")
        g = f.create_group("workloads/hand")
        g.attrs.update(kind="gemm", m=8, n=5, k=16, batch=2, description="made with h5py", a_dist="normal",
                       b_dist="normal")
        for name, arr in (("a", a), ("b", b), ("c_ref", c_ref), ("ab_abs", ab_abs)):
            g.create_dataset(name, data=arr, chunks=True, fletcher32=True)
    p = run(["run", hand, "--backend", "cpu", "--recipes", "fp32,bf16", "-o", os.path.join(tmp, "hand"), "--quiet"]
            + FAST, expect=0)
    hand_rows = json.load(open(os.path.join(tmp, "hand", "report.json")))["rows"]
    check(len(hand_rows) == 2 and all(r["status"] == "ok" for r in hand_rows), "h5py dataset runs")

    passed = 1 if not FAILURES else 0
    print(f"{passed} passed, {1 - passed} failed ({len(FAILURES)} failed checks)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
