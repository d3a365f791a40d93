"""precis run holds a workload's references a block at a time (issue 40, docs/model.md "Running it in bounded memory").

One workload whose references (c_ref and ab_abs, float64 [48, 32, 32768]: 768 MiB) are four times
its float32 output (192 MiB), run with fp32 and --reference-block 8M (16 MiB per sample: blocks of
one sample). A run that loads them whole holds at least their 768 MiB; this one must stay below half of
that, above the process's own baseline (the peak RSS of the same run on a one-sample dataset: a
CUDA build maps cuBLAS and friends, ~150 MiB more than a CPU-only one), measured two ways, neither
disturbed by other processes on the machine:
- the process's peak RSS: VmRSS sampled every 10 ms (the load, before the case) and the kernel's
  high-water mark at exit (ru_maxrss: the case and its metrics; precis run resets the mark when a
  case starts), the larger of the two;
- the row's memory.host_peak_rss_bytes (the high-water mark while the case ran).
The estimate printed before the run names the block (1 of 48 samples). Skipped under a sanitizer
(its shadow memory and quarantine of freed blocks are not the run's).
"""
import os
import shutil
import subprocess
import sys

from rss import peak_rss  # tests/py/rss.py
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
from cli_checks import FAILURES, PRECIS, check

SUITE = """seed: 7
workloads:
  - name: wide
    m: 32
    n: 32768
    k: 64
    batch: 48
    a: normal
    b: normal
"""
REFERENCE_BYTES = 48 * 32 * 32768 * 16
BASELINE_SUITE = SUITE.replace("n: 32768", "n: 64").replace("batch: 48", "batch: 1")


def main():
    if not os.path.isdir("/proc/self"):
        print("SKIP: no /proc (the peak RSS is read there)", file=sys.stderr)
        sys.exit(77)
    with open(PRECIS, "rb") as f:
        if any(name in f.read() for name in (b"__asan_init", b"__tsan_init", b"__msan_init")):
            print("SKIP: precis is built with a sanitizer (its memory is not the run's)", file=sys.stderr)
            sys.exit(77)
    tmp = scratch.mkdtemp(prefix="precis-run-memory-")
    try:
        suite = os.path.join(tmp, "suite.yaml")
        with open(suite, "w") as f:
            f.write(SUITE)
        ds = os.path.join(tmp, "wide.h5")
        p = subprocess.run([PRECIS, "gen", suite, "-o", ds], capture_output=True, text=True)
        check(p.returncode == 0, f"gen: exit {p.returncode}: {p.stderr[-800:]}")
        small = os.path.join(tmp, "small.h5")
        with open(suite, "w") as f:
            f.write(BASELINE_SUITE)
        p = subprocess.run([PRECIS, "gen", suite, "-o", small], capture_output=True, text=True)
        check(p.returncode == 0, f"gen (baseline): exit {p.returncode}: {p.stderr[-800:]}")
        run_args = ["--backend", "cpu", "--recipes", "fp32", "--reference-block", "8M", "--min-samples", "1",
                    "--max-samples", "1", "--max-time-ms", "1"]
        rc, err, baseline = peak_rss([PRECIS, "run", small, *run_args, "-o", os.path.join(tmp, "base")])
        check(rc == 0, f"run (baseline): exit {rc}: {err[-800:]}")
        out = os.path.join(tmp, "rep")
        rc, err, peak = peak_rss([PRECIS, "run", ds, *run_args, "-o", out])
        check(rc == 0, f"run: exit {rc}: {err[-800:]}")
        check("references held at most 8 MiB at a time" in err and "1 of 48 samples at a time" in err,
              f"the estimate names the block: {err[:600]}")
        check(peak - baseline < REFERENCE_BYTES / 2,
              f"peak RSS {peak / 2**20:.0f} MiB, {(peak - baseline) / 2**20:.0f} MiB over the baseline's "
              f"{baseline / 2**20:.0f}: not below half the references' {REFERENCE_BYTES / 2**20:.0f} MiB")
        if rc == 0:
            import json
            row = json.load(open(os.path.join(out, "report.json")))["rows"][0]
            case_peak = row["memory"]["host_peak_rss_bytes"]
            check(row["status"] == "ok" and 0 < case_peak - baseline < REFERENCE_BYTES / 2,
                  f"the case's peak RSS {case_peak / 2**20:.0f} MiB, less the baseline's {baseline / 2**20:.0f}: "
                  "not below half the references'")
        print(f"peak RSS {peak / 2**20:.0f} MiB (baseline {baseline / 2**20:.0f}) for "
              f"{REFERENCE_BYTES / 2**20:.0f} MiB of references")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
