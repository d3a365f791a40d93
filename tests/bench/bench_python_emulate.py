"""precis.emulate's speed (issue 29): a 128 x 4096 x 4096 GEMM for bf16, int8 and fp8, against
  - the CLI's time for the same case (`precis run --backend cpu`: convert_ms + median_ms, the
    quantize or round step plus one warm GEMM, while emulate's one GEMM is its first), goal
    emulate <= 1.2x: the Python layer and the API add no work of their own;
  - numpy.matmul in float32 on the same arrays, goal emulate <= 2x for the float recipe (bf16: the
    cpu backend rounds the operands, then runs sgemm).

    python tests/bench/bench_python_emulate.py BUILD_DIR [M N K] [--repeat R] [--report-only]

Run with an interpreter that has NumPy (the test venv); the package is imported from
BUILD_DIR/python. Prints the times side by side, then `verdict: met|NOT met (...)` like the C
benchmarks (bench_verdict.h); --report-only exits 0 on an unmet goal (shared machines are noisy).
NumPy's OpenBLAS reads OPENBLAS_CORETYPE too: unset it (and OPENBLAS_L2_SIZE) for a fair numpy
figure where this machine sets them.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

args = [a for a in sys.argv[1:] if a != "--report-only"]
report_only = "--report-only" in sys.argv
repeat = 3
if "--repeat" in args:
    i = args.index("--repeat")
    repeat = int(args[i + 1])
    del args[i:i + 2]
if not args:
    sys.exit(__doc__)
build = pathlib.Path(args[0]).resolve()
m, n, k = (int(x) for x in args[1:4]) if len(args) >= 4 else (128, 4096, 4096)
sys.path.insert(0, str(build / "python"))
import numpy as np  # noqa: E402
import precis  # noqa: E402

RECIPES = ["bf16", "int8", "fp8"]
FLOAT = {"bf16"}

tmp = pathlib.Path(tempfile.mkdtemp(prefix="precis-bench-py-"))
(tmp / "suite.yaml").write_text(f"seed: 1\nworkloads:\n  - name: bench\n    m: {m}\n    n: {n}\n    k: {k}\n")
data = tmp / "bench.h5"
subprocess.run([str(build / "precis"), "gen", str(tmp / "suite.yaml"), "-o", str(data)], check=True,
               capture_output=True)


def cli_case_ms(recipe, round_index):
    """convert_ms + median_ms of one `precis run --backend cpu` case (None when the row is not ok)."""
    out = tmp / f"report-{recipe}-{round_index}"
    subprocess.run([str(build / "precis"), "run", str(data), "--backend", "cpu", "--recipes", recipe, "--quiet",
                    "-o", str(out), "--min-samples", "3", "--max-time-ms", "20000"], check=True)
    row = json.loads((out / "report.json").read_text())["rows"][0]
    return row["time"]["convert_ms"] + row["time"]["median_ms"] if row["status"] == "ok" else None


arrays = precis.dataset(data).arrays("bench")
a, b = arrays["a"][0], arrays["b"]


def best_of(fn):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times)


np.matmul(a, b)  # warm-up: threads, pages
numpy_ms = best_of(lambda: np.matmul(a, b))
print(f"precis.emulate on {m}x{n}x{k}, best of {repeat}; numpy.matmul float32 {numpy_ms:.1f} ms "
      f"(numpy {np.__version__})")
print(f"{'recipe':8} {'emulate ms':>11} {'CLI ms':>9} {'ratio':>7} {'goal':>5}   {'vs numpy':>8} {'goal':>5}")
goals = missed = failed = 0
for recipe in RECIPES:
    # Rounds alternate the CLI and emulate, and each keeps its best, so that load from elsewhere on
    # the machine hits both alike.
    cli_times, emulate_times = [], []
    precis.emulate(a, b, recipe)
    for r in range(2):
        cli_times.append(cli_case_ms(recipe, r))
        emulate_times.append(best_of(lambda: precis.emulate(a, b, recipe)))
    if None in cli_times:
        print(f"{recipe:8} CLI row not ok")
        failed += 1
        continue
    cli_ms, emulate_ms = min(cli_times), min(emulate_times)
    ratio = emulate_ms / cli_ms
    goals += 1
    missed += ratio > 1.2
    line = f"{recipe:8} {emulate_ms:11.1f} {cli_ms:9.1f} {ratio:7.2f} {'<=1.2':>5}"
    if recipe in FLOAT:
        vs = emulate_ms / numpy_ms
        goals += 1
        missed += vs > 2.0
        line += f"   {vs:8.2f} {'<=2':>5}"
    print(line)
if goals == 0:
    print("verdict: nothing measured")
    sys.exit(1)
if missed or failed:
    print(f"verdict: NOT met ({missed} of {goals} goals missed" + (f", {failed} rows failed)" if failed else ")"))
    sys.exit(1 if (failed or not report_only) else 0)
print(f"verdict: met ({goals} goals)")
