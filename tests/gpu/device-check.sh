#!/usr/bin/env bash
# The first-GPU-session check of the cuda backend, in one go (docs/cuda-backend.md, "Running the
# device check"). Run on the GPU machine from the project's root, after the programs were built and
# packed on a development machine (/work/shared/device/pack.sh):
#
#   source .device/env.sh && bash tests/gpu/device-check.sh OUTDIR [--sanitize] [--sizes 4096]
#
# Steps, each with its own time limit, its exit status and its full output kept:
#   1. nvidia-smi (and the clocks/memory queries), precis info (text and --json)
#   2. every gpu_test_* program through tests/gpu/run-all.sh (bit-exact conversions, backend vs cpu)
#   3. gpu_bench_matmul (precis's timing vs a plain cublasLtMatmul loop), 4096^3 unless --sizes
#   4. precis gen --preset default, then precis run --backend cuda with a short sampling budget,
#      one short run with --cold --autotune 4, and precis accept --concurrency 2 (two workers, each
#      with its own stream, events and cuBLASLt handle, running at once)
#      and (issue 19) precis run --backend cuda --recipes high-precision on ozaki-phi --inputs float64
#   5. with --sanitize: compute-sanitizer memcheck over a small precis run (every recipe, padded
#      and batched shapes): out-of-bounds writes by the conversion kernels or cuBLASLt show there
#
# OUTDIR receives few files (the device tool brings back at most 8): summary.txt (every step's
# status and the important output, written as the steps finish), device-check.tar.gz (every log,
# the reports and the GPU test logs; rewritten after each step), report.md of the cuda run. Exit
# status: 0 when every step passed, 1 otherwise. A normal run takes 3-5 minutes on an H200; each
# step has its own limit, so give the call 540 s or more.
#
# Programs are taken from PRECIS_BIN_DIR, else from the folder holding `precis` on PATH (.device/bin
# after env.sh), else build/ and build/tests/gpu of this checkout.
set -u
usage() { echo "usage: $0 OUTDIR [--sanitize] [--sizes N[,N...]]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1
shift
sanitize=0
sizes=4096
while [ $# -gt 0 ]; do
  case $1 in
    --sanitize) sanitize=1 ;;
    --sizes) [ $# -ge 2 ] || usage; sizes=$2; shift ;;
    *) usage ;;
  esac
  shift
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/precis-device-check.XXXXXX)
summary="$out/summary.txt"
: >"$summary"
failed=0

find_program() { # NAME: the first of PRECIS_BIN_DIR, precis's folder on PATH, the build tree
  local name=$1 dir
  for dir in ${PRECIS_BIN_DIR:-} "$(dirname "$(command -v precis 2>/dev/null || echo /nonexistent/x)")" \
    "$root/build" "$root/build/tests/gpu"; do
    [ -n "$dir" ] && [ -x "$dir/$name" ] && [ -f "$dir/$name" ] && { echo "$dir/$name"; return 0; }
  done
  return 1
}

note() { echo "$*" | tee -a "$summary"; }

# The archive is rewritten after every step, so that a call cut short at its time limit still
# brings back every log written so far (the dataset is left out: regenerated in seconds).
archive() { tar -C "$work" --exclude=default.h5 -czf "$out/device-check.tar.gz" . 2>/dev/null; }

# step NAME LIMIT_S [--show N] CMD...: runs CMD with a time limit, output to $work/NAME.log; the
# summary gets the status and the last N lines (all of it when N is 0; default 40).
step() {
  local name=$1 limit=$2 show=40
  shift 2
  if [ "${1:-}" = --show ]; then show=$2; shift 2; fi
  local log="$work/$name.log" t0 rc secs
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  local verdict=ok
  if [ $rc -ne 0 ]; then verdict=FAILED; failed=1; fi
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict="FAILED (timed out after ${limit}s)"
  {
    echo
    echo "=== $name: exit $rc, ${secs}s: $verdict"
    echo "    \$ $*"
    if [ "$show" -eq 0 ]; then cat "$log"; else tail -n "$show" "$log"; fi
  } >>"$summary"
  echo "=== $name: exit $rc, ${secs}s: $verdict"
  archive
  return $rc
}

note "precis device check, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname), $(uname -srm)"
note "checkout: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') $(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')"
precis=$(find_program precis) || { note "no precis program found (PRECIS_BIN_DIR, PATH, build/)"; exit 1; }
bench=$(find_program gpu_bench_matmul) || bench=
test_dir=$(dirname "$(find_program gpu_test_cuda_backend || echo /nonexistent/x)")
note "programs: precis=$precis tests=$test_dir bench=${bench:-none}"
note "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"

# 1. The machine.
step nvidia-smi 60 --show 0 nvidia-smi
step nvidia-smi-query 60 --show 0 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
step ldd-precis 30 --show 0 ldd "$precis"
step precis-info 120 --show 0 "$precis" info
step precis-info-json 120 --show 0 "$precis" info --json

# 2. The GPU test programs (each must pass; 77 = skipped counts as a failure here, since this
#    machine has a device).
mkdir -p "$work/gpu-tests"
step gpu-tests 420 --show 0 env LOG_DIR="$work/gpu-tests" GPU_TEST_TIMEOUT=200 bash "$here/run-all.sh" "$test_dir"
if grep -q '^SKIP' "$work/gpu-tests.log"; then
  note "    a GPU test was SKIPPED on a machine with a device: treated as a failure"
  failed=1
fi
# How the tensor cores did against the bound (gpu_test_cuda_backend): per recipe, the worst ratio of
# |gpu-cpu| to the bound (fails above 1) and the worst accumulation excess, the part not explained
# by output rounding in units of the bound's accumulation term (the figure to tune the model from).
if [ -f "$work/gpu-tests/gpu_test_cuda_backend.log" ]; then
  {
    echo
    echo "=== gpu_test_cuda_backend: per recipe, max over shapes of |gpu-cpu|/bound and of the accumulation excess"
    awk '/worst \|gpu-cpu\|\/bound = / { r = $1; split($0, x, "/bound = "); v = x[2] + 0; e = $NF + 0;
           if (!(r in m) || v > m[r]) m[r] = v; if (!(r in ex) || e > ex[r]) ex[r] = e }
         END { for (r in m) printf "    %-10s ratio %.3g, excess %.3g\n", r, m[r], ex[r] }' \
      "$work/gpu-tests/gpu_test_cuda_backend.log"
    echo "=== gpu_test_cuda_backend: failed checks (first 40)"
    grep -E 'CHECK|FAIL' "$work/gpu-tests/gpu_test_cuda_backend.log" | head -40
  } >>"$summary"
fi

# 3. The benchmark.
if [ -n "$bench" ]; then
  step gpu-bench 240 --show 0 "$bench" --sizes "$sizes"
else
  note "=== gpu-bench: gpu_bench_matmul not found: FAILED"
  failed=1
fi

# 4. The command line on a preset, with a short sampling budget.
data="$work/default.h5"
if step gen-default 180 "$precis" gen --preset default -o "$data" --force; then
  step run-cuda 240 --show 80 "$precis" run "$data" --backend cuda --max-time-ms 150 --min-samples 5 \
    -o "$work/report-cuda" --force
  [ -f "$work/report-cuda/report.md" ] && cp "$work/report-cuda/report.md" "$out/report.md"
  # One line per row: status, error, time and the cuBLASLt mapping, so that the summary alone says
  # which (workload, recipe) misbehaved and why.
  if [ -f "$work/report-cuda/report.json" ] && command -v python3 >/dev/null 2>&1; then
    {
      echo
      echo "=== run-cuda rows: status (reason) | rel_fro worst | max_cw worst | median ms | TFLOP/s | lt_op lt_types | algo"
      python3 - "$work/report-cuda/report.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
def get(d, *path):
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d
counts = {}
for r in doc.get("rows", []):
    st = r.get("status")
    counts[st] = counts.get(st, 0) + 1
    det = r.get("details") or {}
    print(f"    {r.get('workload')}/{r.get('recipe')}: {st}"
          + (f" ({r.get('reason')})" if st != "ok" else "")
          + f" | {get(r, 'error', 'rel_fro', 'worst')} | {get(r, 'error', 'max_cw', 'worst')}"
          + f" | {get(r, 'time', 'median_ms')} | {r.get('tflops')} | {det.get('lt_op')} {det.get('lt_types')}"
          + f" | algo {det.get('algo_id')} tile {det.get('algo_tile')} splitk {det.get('algo_splitk')}")
print("    rows by status:", counts)
PY
    } >>"$summary" 2>&1
    grep -q '"status": *"\(unsupported\|failed\|does-not-fit\)"' "$work/report-cuda/report.json" &&
      { note "    a row of the cuda run is not ok on this device: treated as a failure"; failed=1; }
  fi
  step run-cuda-cold-autotune 180 --show 40 "$precis" run "$data" --backend cuda --workloads square-1024,decode-m1 \
    --recipes fp16,bf16,int8,fp8 --cold --autotune 4 --max-time-ms 100 --min-samples 5 -o "$work/report-cold" --force
  # The concurrency path: two workers at once (decode-m1: int8 rows padded to 32 as well); each
  # 2-worker point must be ok, and its overlap says the workers really ran together.
  step accept-cuda-concurrency 240 --show 40 "$precis" accept "$data" --backend cuda --workload decode-m1 \
    --recipes bf16,int8,fp8 --concurrency 2 --max-batch 2 --repeats 2 --max-time-ms 100 --min-samples 5 \
    -o "$work/accept-cuda" --force
  if [ -f "$work/accept-cuda/accept.json" ] && command -v python3 >/dev/null 2>&1; then
    {
      echo
      echo "=== accept-cuda-concurrency points: recipe batch x workers: status | overlap | p95 ms | TFLOP/s | device peak"
      python3 - "$work/accept-cuda/accept.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = 0
for r in doc.get("recipes", []):
    for p in r.get("points", []):
        st = p.get("status")
        if st != "ok" or (p.get("workers", 1) > 1 and not (p.get("overlap") or 0) > 0):
            bad += 1
        lat = p.get("latency") or {}
        mem = (p.get("memory") or {}).get("measured") or {}
        print(f"    {r.get('recipe')} {p.get('batch')} x {p.get('workers')}: {st} | {p.get('overlap')} | "
              f"{lat.get('p95_ms')} | {p.get('throughput_tflops')} | {mem.get('device_peak_bytes')}"
              + (f" ({p.get('reason')})" if st != "ok" else ""))
    print(f"    {r.get('recipe')}: {r.get('verdict')} {r.get('reasons')}")
print("    points not ok or not overlapping:", bad)
sys.exit(1 if bad else 0)
PY
    } >>"$summary" 2>&1 || { note "    a 2-worker point failed or did not overlap: treated as a failure"; failed=1; }
  fi
  step run-cuda-int8-static 120 --show 30 "$precis" run "$data" --backend cuda --workloads llm-128x4096x4096 \
    --recipes int8 --int8-act-scale percentile --max-time-ms 100 --min-samples 5 -o "$work/report-static" --force
fi

# Issue 19: the high-precision recipes on 53-bit phi data (fp64-emu is unsupported below sm_100, and
# says why); the slices curve and times land in the report's sweep table.
if step gen-phi64 120 "$precis" gen --preset ozaki-phi --inputs float64 -o "$work/phi64.h5" --force; then
  step run-cuda-hiprec 240 --show 60 "$precis" run "$work/phi64.h5" --backend cuda --recipes high-precision \
    --max-time-ms 100 --min-samples 5 -o "$work/report-hiprec" --force
fi
if [ -f "$work/gpu-tests/gpu_test_hiprec.log" ]; then
  {
    echo
    echo "=== gpu_test_hiprec: worst |gpu-cpu|/bound per recipe and shape, failed checks (first 40)"
    grep -E 'worst|unsupported here|fp64-emu' "$work/gpu-tests/gpu_test_hiprec.log" | head -60
    grep -E 'CHECK|FAIL' "$work/gpu-tests/gpu_test_hiprec.log" | head -40
  } >>"$summary"
fi
# Issue 16: mxfp8/mxfp4/nvfp4 (native on sm_100+, emulated below) against the cpu backend.
if [ -f "$work/gpu-tests/gpu_test_blockscale.log" ]; then
  {
    echo
    echo "=== gpu_test_blockscale: worst |gpu-cpu|/bound per preset and shape (native or emulated), failed checks"
    grep -E 'worst|unsupported here' "$work/gpu-tests/gpu_test_blockscale.log" | head -30
    grep -E 'CHECK|FAIL' "$work/gpu-tests/gpu_test_blockscale.log" | head -40
  } >>"$summary"
fi

# 5. Optional: memcheck over a small run (slow; run it when time is left).
if [ $sanitize -eq 1 ]; then
  if command -v compute-sanitizer >/dev/null 2>&1 && [ -f "$data" ]; then
    step memcheck 480 --show 40 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
      "$precis" run "$data" --backend cuda --workloads square-256,decode-m1,integers-exact --max-time-ms 5 \
      --min-samples 2 --max-samples 3 -o "$work/report-memcheck" --force
  else
    note "=== memcheck: compute-sanitizer or the dataset is missing: FAILED"
    failed=1
  fi
fi

archive || note "could not write device-check.tar.gz"
note ""
note "device check: $([ $failed -eq 0 ] && echo 'every step passed' || echo 'AT LEAST ONE STEP FAILED') (full logs in device-check.tar.gz)"
rm -rf "$work"
exit $failed
