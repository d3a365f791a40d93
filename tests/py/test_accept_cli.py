"""precis accept end to end on the cpu backend:

- PASS: exit 0, accept.json/md/html written, the sweep grid and the repeats all present, the memory
  budget of every point equal to an independent computation of the tensors (fp32: 4 bytes per
  element of a, b and c) times the workers, the measured tracked view equal to it for fp32, and the
  outputs at the acceptance point exact on an integer workload (each tile against its reference);
- FAIL: a memory limit that cannot be met exits 3 and names the memory reason (stdout and JSON);
  a latency target that cannot be met names the latency reason;
- bad usage and bad input exit 2; --backend cuda exits 1 in a build without CUDA or a machine
  without a device, and succeeds with both (tests/py/cuda_expect.py).
"""
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

from cuda_expect import check_cuda_outcome

PRECIS = os.environ["PRECIS"]
FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(args, expect=None):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True)
    if expect is not None and p.returncode != expect:
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}")
    return p


SUITE = """
seed: 3
workloads:
  - name: small
    m: 4
    n: 8
    k: 8
    batch: 1
  - name: ints
    m: 8
    n: 48
    k: 64
    batch: 2
    a: integers
    b: integers
"""

QUICK = ["--backend", "cpu", "--max-time-ms", "30", "--min-samples", "5", "--quiet"]


def main():
    with scratch.TemporaryDirectory() as tmp:
        suite = os.path.join(tmp, "suite.yaml")
        with open(suite, "w") as f:
            f.write(SUITE)
        dataset = os.path.join(tmp, "d.h5")
        run(["gen", suite, "-o", dataset, "-q"], expect=0)

        # PASS, with the largest workload chosen by default (ints), a sweep of 2 batches x 2
        # concurrency levels and 2 runs of the acceptance point.
        out = os.path.join(tmp, "pass")
        p = run(["accept", dataset, "--recipe", "fp32", "--batches", "1,4", "--concurrency", "2",
                 "--latency-target", "10000", "--repeats", "2", "-o", out] + QUICK, expect=0)
        for name in ("accept.json", "accept.md", "accept.html"):
            check(os.path.exists(os.path.join(out, name)), f"{name} written")
        with open(os.path.join(out, "accept.json")) as f:
            doc = json.load(f)
        check(doc["format"] == "precis-accept" and doc["verdict"] == "pass", "verdict pass")
        check(doc["workload"]["name"] == "ints", "the largest workload is chosen by default")
        check(doc["settings"]["batches"] == [1, 4] and doc["settings"]["concurrency"] == [1, 2], "sweep settings")
        rec = doc["recipes"][0]
        check(rec["verdict"] == "pass" and rec["reasons"] == [], "recipe passes with no reason")
        pts = rec["points"]
        grid = sorted((q["batch"], q["workers"], q["repeat"]) for q in pts)
        check(grid == [(1, 1, 0), (1, 2, 0), (4, 1, 0), (4, 2, 0), (4, 2, 1)], f"points {grid}")
        m, n, k, batch = 8, 48, 64, 2
        for q in pts:
            rows = m * q["batch"]
            tensors = 4 * (batch * rows * k + k * n + batch * rows * n)
            budget, measured = q["memory"]["budget"], q["memory"]["measured"]
            check(q["rows"] == rows, "rows = m x batch")
            check(budget["tensor_bytes_per_worker"] == tensors, f"tensor bytes {budget['tensor_bytes_per_worker']} vs {tensors}")
            check(budget["predicted_tracked_bytes"] == tensors * q["workers"], "predicted tracked = tensors x workers")
            check(measured["tracked_peak_bytes"] == tensors * q["workers"], "fp32 tracks exactly its tensors")
            check(budget["predicted_peak_bytes"] == budget["baseline_bytes"] + tensors * q["workers"], "predicted peak")
            check(measured["peak_view"] == "host_peak_rss" and measured["peak_bytes"] > 0, "peak measured")
            check(measured["untracked_bytes"] == measured["peak_bytes"] - budget["baseline_bytes"]
                  - measured["tracked_peak_bytes"], "untracked = peak - baseline - tracked (signed)")
            check(q["memory"]["difference"]["peak_minus_predicted_bytes"]
                  == measured["peak_bytes"] - budget["predicted_peak_bytes"], "difference reported")
            lat = q["latency"]
            check(lat["samples"] >= 5 * q["workers"], "every worker's samples pooled")
            check(lat["min_ms"] <= lat["median_ms"] <= lat["p95_ms"] <= lat["p99_ms"] <= lat["max_ms"], "latency order")
        acc = rec["acceptance"]
        check(acc["batch"] == 4 and acc["workers"] == 2 and acc["runs"] == 2, "acceptance point")
        check(acc["accuracy"]["checked"] and acc["accuracy"]["error"]["max_abs"]["worst"] == 0.0,
              "integer workload: fp32 exact on every tile of the acceptance point")
        check(acc["memory"]["fits"] and acc["memory"]["peak_spread_bytes"] >= 0, "memory judged")
        check(rec["largest_batch_meeting_latency_target"] == {"1": 4, "2": 4}, "largest batch per concurrency")
        check("PASS" in open(os.path.join(out, "accept.md")).read(), "accept.md verdict")
        check("<svg" in open(os.path.join(out, "accept.html")).read(), "accept.html chart")

        # The same output directory again without --force is refused before any work.
        p = run(["accept", dataset, "--batches", "1", "-o", out] + QUICK, expect=2)
        check("already exists" in p.stderr, "existing output refused")

        # FAIL: memory limit that cannot be met.
        out2 = os.path.join(tmp, "fail-memory")
        p = subprocess.run([PRECIS, "accept", dataset, "--workload", "small", "--batches", "1", "--repeats", "1",
                            "--memory-limit", "1M", "-o", out2, "--backend", "cpu", "--max-time-ms", "20"],
                           capture_output=True, text=True)
        check(p.returncode == 3, f"memory FAIL exits 3 (got {p.returncode})")
        check("FAIL" in p.stdout and "memory: peak" in p.stdout, "memory reason on stdout")
        with open(os.path.join(out2, "accept.json")) as f:
            doc = json.load(f)
        check(doc["verdict"] == "fail", "verdict fail")
        check(any(r.startswith("memory:") and "exceeds" in r for r in doc["recipes"][0]["reasons"]), "memory reason in JSON")
        check(doc["settings"]["memory_limit_bytes"] == 1 << 20, "limit recorded")

        # FAIL: latency target that cannot be met.
        out3 = os.path.join(tmp, "fail-latency")
        p = run(["accept", dataset, "--workload", "small", "--batches", "1,2", "--repeats", "1",
                 "--latency-target", "1e-9", "-o", out3] + QUICK, expect=3)
        with open(os.path.join(out3, "accept.json")) as f:
            doc = json.load(f)
        check(any(r.startswith("latency:") for r in doc["recipes"][0]["reasons"]), "latency reason")
        check(doc["recipes"][0]["largest_batch_meeting_latency_target"] == {"1": None}, "no batch meets it")

        # Bad usage / input: exit 2 with a message naming what was wrong.
        bad = [
            (["--headroom", "150"], "--headroom"),
            (["--batches", "4,2"], "ascending"),
            (["--max-batch", "4", "--batches", "1,2"], "either"),
            (["--memory-limit", "12X"], "12X"),
            (["--workload", "nope"], "nope"),
            (["--recipe", "fp99"], "fp99"),
            (["--require", "rel_fro<<1"], "rel_fro"),
        ]
        for args, needle in bad:
            p = run(["accept", dataset, "-o", os.path.join(tmp, "bad")] + args + QUICK)
            check(p.returncode == 2, f"{args}: exit {p.returncode}, expected 2")
            check(needle in p.stderr, f"{args}: message names {needle!r}: {p.stderr.strip()}")
        p = run(["accept", os.path.join(tmp, "missing.h5"), "-o", os.path.join(tmp, "bad")] + QUICK)
        check(p.returncode == 2 and "missing.h5" in p.stderr, f"missing dataset: {p.returncode} {p.stderr.strip()}")

        # Where a GPU is usable this runs (0 or 3); elsewhere it must fail as a runtime failure.
        q = run(["accept", dataset, "--backend", "cuda", "--batches", "1", "--repeats", "1",
                 "-o", os.path.join(tmp, "cuda"), "--quiet", "--max-time-ms", "20"])
        check_cuda_outcome(PRECIS, q, (0, 3), check, "accept --backend cuda")

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
