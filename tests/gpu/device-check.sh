#!/usr/bin/env bash
# The first-GPU-session check of the cuda backend, in one go (docs/cuda-backend.md, "Running the
# device check"). Run on the GPU machine from the project's root, after the programs were built and
# packed on a development machine (/work/shared/device/pack.sh):
#
#   source .device/env.sh && bash tests/gpu/device-check.sh OUTDIR [--sanitize] [--sizes 4096]
#   bash tests/gpu/device-check.sh OUTDIR --dry-run      # here, without a GPU (CTest runs it)
#
# A device is lent once, for 15 minutes with its start-up, so this script must fail only for a GPU
# reason. Its steps, each with a time limit, the limits adding to at most 480 s (checked before
# anything runs; a global deadline cuts every step to what is left of the 480 s):
#   machine      nvidia-smi and its clock/memory query, ldd, precis info (text and --json), the
#                cuBLASLt version at run time against the one the plan assumes
#   selftest     the checks below on made-up inputs (each must pass good input and fail bad input)
#   gpu-tests    every gpu_test_* through run-all.sh (PRECIS exported), a SKIP counts as a failure
#   gpu-bench    gpu_bench_matmul 4096^3 (interleaved precis/plain samples), and a TFLOP/s floor
#                for bf16 4096^3 on sm_90
#   gen/explain  precis gen --preset default; precis explain on the device's capability (every
#                unsupported case on the allow-list, reduction-scheme masks, l2_resident)
#   run-cuda     every recipe of `all` on the dataset; not-ok rows only as the allow-list
#                (tests/gpu/expected-unsupported.txt) expects them, with their reason
#   compare-cpu  the cpu backend on long-k-16384 and llm-128x4096x4096: rel_fro per recipe within
#                the bounds of tests/gpu/rel-fro-bounds.txt
#   int8-rows    an int8 case above 65,536 rows (cuBLASLt 13.1's row split) against the cpu
#   accept       accept --concurrency 2: every point ok, 2-worker / 1-worker throughput >= 1.2
#   cold/static  --cold --autotune 4, and static int8 activation scales
#   hiprec       the high-precision recipes on 53-bit phi data
# With --sanitize: compute-sanitizer memcheck over a small run instead of the long steps.
#
# --dry-run: every step's own logic on this machine. The cuda steps run against the cpu backend on
# the same workload names at small shapes (the explain check plans for sm_90 as on the H200), the
# steps that need a device report `skipped (no device)` (the GPU programs must then exit 77), and
# the archive is built and checked exactly as on the device. Exits 0 only when the script itself is
# sound: allow-list entries with reasons, the archive under 15 MiB holding every log and report,
# the step limits adding to at most 480 s.
#
# OUTDIR receives few files (the device tool brings back at most 8, each under 16 MiB):
# summary.txt (every step's status and important output, written as the steps finish),
# device-check.tar.gz (every log and report, no dataset: rewritten after each step and checked to
# stay under 15 MiB), report.md of the cuda run. Exit status: 0 when every step passed, 1 otherwise.
#
# Programs are taken from PRECIS_BIN_DIR, else from the folder holding `precis` on PATH (.device/bin
# after env.sh), else build/ and build/tests/gpu of this checkout.
set -u
usage() { echo "usage: $0 OUTDIR [--sanitize] [--sizes N[,N...]] | $0 --dry-run [OUTDIR]" >&2; exit 2; }
out=
sanitize=0 dry=0
sizes=4096
while [ $# -gt 0 ]; do
  case $1 in
    --sanitize) sanitize=1 ;;
    --dry-run) dry=1 ;;
    --sizes) [ $# -ge 2 ] || usage; sizes=$2; shift ;;
    -*) usage ;;
    *) [ -z "$out" ] || usage; out=$1 ;;
  esac
  shift
done
# The dry run may go without an output folder: a temporary one, named in the first line.
if [ -z "$out" ]; then
  [ $dry -eq 1 ] || usage
  out=$(mktemp -d /tmp/precis-device-check-dry.XXXXXX)
  echo "output folder: $out"
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
checks="$here/device_checks.py"
allow="$here/expected-unsupported.txt"
bounds="$here/rel-fro-bounds.txt"
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/precis-device-check.XXXXXX)
summary="$out/summary.txt"
: >"$summary"
failed=0
# The GPU machine's environment has no PRECIS; one inherited from CTest (the dry run) must not hide
# a missing export: gpu_test_devices gets the one exported below.
unset PRECIS

readonly BUDGET_S=480 ARCHIVE_MAX_MIB=15
# Every step and its limit in seconds, in the order they run. The real run and the dry run share it;
# --sanitize swaps the long steps for memcheck.
if [ $sanitize -eq 1 ]; then
  plan="nvidia-smi 8 nvidia-smi-query 8 ldd-precis 4 precis-info 10 precis-info-json 10 gen-default 25 memcheck 300"
else
  plan="nvidia-smi 8 nvidia-smi-query 8 ldd-precis 4 precis-info 10 precis-info-json 10 selftest 5
        gpu-test-expectations 5 gpu-tests 120 gpu-bench 45 gen-default 25 explain-cuda 10 cublaslt-version 5 run-cuda 70 compare-cpu 35
        int8-rows 20 accept-cuda-concurrency 25 run-cuda-cold-autotune 20 run-cuda-int8-static 10 gen-phi64 15
        run-cuda-hiprec 25"
fi
declare -A limit
: >"$work/limits.txt"
set -- $plan
while [ $# -ge 2 ]; do
  limit[$1]=$2
  echo "$1 $2" >>"$work/limits.txt"
  shift 2
done

find_program() { # NAME: the first of PRECIS_BIN_DIR, precis's folder on PATH, the build tree
  local name=$1 dir
  for dir in ${PRECIS_BIN_DIR:-} ${PRECIS_BIN_DIR:+$PRECIS_BIN_DIR/tests $PRECIS_BIN_DIR/tests/gpu} \
    "$(dirname "$(command -v precis 2>/dev/null || echo /nonexistent/x)")" "$root/build" "$root/build/tests" \
    "$root/build/tests/gpu"; do
    [ -n "$dir" ] && [ -x "$dir/$name" ] && [ -f "$dir/$name" ] && { echo "$dir/$name"; return 0; }
  done
  return 1
}

note() { echo "$*" | tee -a "$summary"; }

# The archive holds every log and report and no dataset (*.h5: default.h5 and phi64.h5 are
# regenerated in seconds; phi64.h5 alone is 23 MB, past the device tool's 16 MiB per file, which
# would drop the archive and with it every log). Rewritten after every step, so that a call cut
# short still brings back every log written so far.
archive() { tar -C "$work" --exclude='*.h5' -czf "$out/device-check.tar.gz" . 2>/dev/null; }

# The dry run gives every step (and the budget) 3x its device limit: this development machine (2
# shared cores) is slower than the GPU machine's 16; the limits checked above are the device's.
stretch=1
[ $dry -eq 1 ] && stretch=3
deadline=$(( $(date +%s) + BUDGET_S * stretch ))
# step NAME [--show N] CMD...: runs CMD with the step's limit (cut to what is left of the budget),
# output to $work/NAME.log; the summary gets the status and the last N lines (all when 0; default 40).
step() {
  local name=$1 show=40
  shift
  if [ "${1:-}" = --show ]; then show=$2; shift 2; fi
  local lim=${limit[$name]:-}
  if [ -z "$lim" ]; then note "=== $name: not in the step plan: FAILED"; failed=1; return 1; fi
  lim=$(( lim * stretch ))
  local left=$(( deadline - $(date +%s) ))
  [ "$left" -lt "$lim" ] && lim=$left
  local log="$work/$name.log" t0 rc secs
  if [ "$lim" -le 0 ]; then note "=== $name: FAILED (the ${BUDGET_S} s budget is spent)"; failed=1; return 1; fi
  t0=$(date +%s.%N)
  timeout --kill-after=5 "$lim" "$@" >"$log" 2>&1
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  local verdict=ok
  if [ $rc -ne 0 ]; then verdict=FAILED; failed=1; fi
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && verdict="FAILED (timed out after ${lim}s)"
  {
    echo
    echo "=== $name: exit $rc, ${secs}s (limit ${lim}s): $verdict"
    echo "    \$ $*"
    if [ "$show" -eq 0 ]; then cat "$log"; else tail -n "$show" "$log"; fi
  } >>"$summary"
  echo "=== $name: exit $rc, ${secs}s: $verdict"
  archive
  return $rc
}

# skipped NAME WHY: a step that needs a device, in the dry run.
skipped() { note "=== $1: skipped (no device): $2"; }

# check NAME CMD...: a check of what a step wrote (device_checks.py); its output goes to the summary.
check() {
  local name=$1
  shift
  { echo; echo "=== $name"; } >>"$summary"
  if "$@" >>"$summary" 2>&1; then echo "=== $name: ok"; else
    note "=== $name: FAILED"
    failed=1
    return 1
  fi
}

note "precis device check$([ $dry -eq 1 ] && echo ' (DRY RUN: no device; cuda steps on the cpu backend)'), $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname), $(uname -srm)"
note "checkout: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') $(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')"
command -v python3 >/dev/null 2>&1 || { note "python3 is missing: the checks need it: FAILED"; exit 1; }
check step-limits python3 "$checks" limits "$work/limits.txt" --budget "$BUDGET_S" ||
  { note "the step limits exceed the ${BUDGET_S} s budget: nothing run"; archive; exit 1; }
precis=$(find_program precis) || { note "no precis program found (PRECIS_BIN_DIR, PATH, build/)"; exit 1; }
bench=$(find_program gpu_bench_matmul) || bench=
test_dir=$(dirname "$(find_program gpu_test_cuda_backend || echo /nonexistent/x)")
note "programs: precis=$precis tests=$test_dir bench=${bench:-none}"
note "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
if [ $dry -eq 1 ]; then
  backend=cpu
  # The cuda steps' options on the cpu backend: short sampling budgets.
  quick="--max-time-ms 5 --min-samples 2 --max-samples 3"
else
  backend=cuda
  quick="--max-time-ms 50 --min-samples 5"
fi

# 1. The machine.
if [ $dry -eq 1 ]; then
  skipped nvidia-smi "nvidia-smi and its query"
else
  step nvidia-smi --show 0 nvidia-smi
  step nvidia-smi-query --show 0 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,memory.used,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
fi
step ldd-precis --show 0 ldd "$precis"
step precis-info --show 0 "$precis" info
step precis-info-json --show 0 "$precis" info --json
# The device's capability for explain (sm_90 in the dry run, the H200's).
cc=90
if [ $dry -eq 0 ] && [ -s "$work/precis-info-json.log" ]; then
  cc=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["cuda"]["devices"][0]["compute_capability"].replace(".", ""))' \
    "$work/precis-info-json.log" 2>/dev/null || echo 90)
fi
if [ $sanitize -eq 0 ]; then
  step selftest python3 "$checks" selftest

  # What gpu_test_cuda_backend expects the backend to refuse (nvfp4's per-b tensor scales, scale
  #    tensors with a b per batch element), checked against the cpu side's own refusals: a GPU test
  #    that expects `ok` where the emulation must refuse fails here, before any device time is spent.
  if expectations=$(find_program test_cuda_expectations); then
    step gpu-test-expectations --show 5 "$expectations"
  else
    note "=== gpu-test-expectations: test_cuda_expectations not found (pack it with the GPU tests): FAILED"
    failed=1
  fi

  # 2. The GPU test programs (PRECIS exported for gpu_test_devices). On the device every program must
  #    pass (a SKIP is a failure); in the dry run every one must skip for want of a device.
  mkdir -p "$work/gpu-tests"
  step gpu-tests --show 0 env PRECIS="$precis" LOG_DIR="$work/gpu-tests" GPU_TEST_TIMEOUT=100 bash "$here/run-all.sh" "$test_dir"
  if [ $dry -eq 0 ] && grep -q '^SKIP' "$work/gpu-tests.log"; then
    note "    a GPU test was SKIPPED on a machine with a device: treated as a failure"
    failed=1
  fi
  if [ $dry -eq 1 ] && grep '^SKIP' "$work/gpu-tests.log" | grep -qv 'no CUDA device\|cudaGetDeviceCount'; then
    note "    a GPU test skipped for another reason than the missing device: treated as a failure"
    failed=1
  fi
  if [ -f "$work/gpu-tests/gpu_test_cuda_backend.log" ]; then
    {
      echo
      echo "=== gpu_test_cuda_backend: per recipe, max over shapes of |gpu-cpu|/bound and of the accumulation excess"
      awk '/worst \|gpu-cpu\|\/bound = / { r = $1; split($0, x, "/bound = "); v = x[2] + 0; e = $NF + 0;
             if (!(r in m) || v > m[r]) m[r] = v; if (!(r in ex) || e > ex[r]) ex[r] = e }
           END { for (r in m) printf "    %-10s ratio %.3g, excess %.3g\n", r, m[r], ex[r] }' \
        "$work/gpu-tests/gpu_test_cuda_backend.log"
      echo "=== gpu_test_cuda_backend: refusals as expected, failed checks (first 40)"
      grep -E 'refused as expected' "$work/gpu-tests/gpu_test_cuda_backend.log" | head -20
      grep -E 'CHECK|FAIL' "$work/gpu-tests/gpu_test_cuda_backend.log" | head -40
      for t in gpu_test_hiprec gpu_test_blockscale; do
        [ -f "$work/gpu-tests/$t.log" ] || continue
        echo "=== $t: worst |gpu-cpu|/bound, failed checks"
        grep -E 'worst|unsupported here|fp64-emu' "$work/gpu-tests/$t.log" | head -40
        grep -E 'CHECK|FAIL' "$work/gpu-tests/$t.log" | head -40
      done
    } >>"$summary"
  fi

  # 3. The benchmark (exits 77 without a device: the dry run's expected answer) and the TFLOP/s floor.
  if [ -z "$bench" ]; then
    note "=== gpu-bench: gpu_bench_matmul not found: FAILED"
    failed=1
  elif [ $dry -eq 1 ]; then
    "$bench" --sizes 64 >"$work/gpu-bench.log" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then skipped gpu-bench "gpu_bench_matmul exited 77 (no device), as it must here"; else
      note "=== gpu-bench: exit $rc without a device (77 expected): FAILED"
      failed=1
    fi
  else
    step gpu-bench --show 0 "$bench" --sizes "$sizes"
    # bf16 4096^3 on an H100/H200 runs at 600+ TFLOP/s in cuBLASLt; under 300 the GEMM is not on the
    # tensor cores at full rate (clocks, another process, a wrong algorithm).
    if [ "$cc" = 90 ] && [[ ",$sizes," == *,4096,* ]]; then
      check gpu-bench-tflops-floor python3 "$checks" bench "$work/gpu-bench.log" --floor bf16:4096:300
    else
      note "=== gpu-bench-tflops-floor: no floor stated for sm_$cc (recorded only)"
    fi
  fi
fi

# 4. The command line on a dataset: the default preset on the device; in the dry run the same
#    workload names at small shapes, so that every selection below is the same.
data="$work/default.h5"
if [ $dry -eq 1 ]; then
  cat >"$work/dry-suite.yaml" <<'YAML'
seed: 27
description: "device-check --dry-run: the default preset's workload names at small shapes"
workloads:
  - {name: square-256, m: 32, n: 32, k: 32, batch: 2}
  - {name: square-1024, m: 48, n: 40, k: 64}
  - {name: llm-128x4096x4096, m: 16, n: 64, k: 128, calib: 4, a: {dist: outlier_channels, fraction: 0.05, lo: 6, hi: 60}, b: {dist: normal, std: 0.02}}
  - {name: decode-m1, m: 1, n: 64, k: 64, batch: 4}
  - {name: long-k-16384, m: 8, n: 8, k: 2048, a: {dist: relu}}
  - {name: integers-exact, m: 16, n: 16, k: 16, batch: 2, a: {dist: integers, lo: -2, hi: 2}, b: {dist: integers, lo: -1, hi: 1}}
YAML
  step gen-default "$precis" gen "$work/dry-suite.yaml" -o "$data" --force
else
  step gen-default "$precis" gen --preset default -o "$data" --force
fi
if [ -f "$data" ]; then
  if [ $sanitize -eq 1 ]; then
    if command -v compute-sanitizer >/dev/null 2>&1 && [ $dry -eq 0 ]; then
      step memcheck --show 40 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
        "$precis" run "$data" --backend cuda --workloads square-256,decode-m1,integers-exact --max-time-ms 5 \
        --min-samples 2 --max-samples 3 -o "$work/report-memcheck" --force
    else
      [ $dry -eq 1 ] && skipped memcheck "compute-sanitizer" || { note "=== memcheck: compute-sanitizer is missing: FAILED"; failed=1; }
    fi
  else
    # The plans for the device's capability: every unsupported case on the allow-list, every plan
    # with its reduction-scheme mask, term strides and l2_resident.
    step explain-cuda --show 3 bash -c '"$1" explain "$2" --cc "$3" --json >"$4"' explain "$precis" "$data" "$cc" \
      "$work/explain.json"
    # The cuBLASLt that runs against the one explain planned for, and what the plan assumes of it.
    step cublaslt-version python3 "$checks" version "$work/precis-info-json.log" "$work/explain.json"
    check explain-allow-list-and-plans python3 "$checks" explain "$work/explain.json" --allow "$allow"

    step run-cuda --show 10 "$precis" run "$data" --backend "$backend" $quick -o "$work/report-cuda" --force
    [ -f "$work/report-cuda/report.md" ] && cp "$work/report-cuda/report.md" "$out/report.md"
    [ -f "$work/report-cuda/report.json" ] || { note "    run-cuda wrote no report.json: FAILED"; failed=1; }
    [ -f "$work/report-cuda/report.json" ] &&
      check run-cuda-rows python3 "$checks" rows "$work/report-cuda/report.json" --allow "$allow"

    # cuda against cpu on the long-k and LLM shapes: rel_fro per recipe within its stated bound.
    step compare-cpu --show 5 "$precis" run "$data" --backend cpu --workloads long-k-16384,llm-128x4096x4096 \
      --max-time-ms 1 --min-samples 1 --max-samples 1 -o "$work/report-cpu" --force
    [ -f "$work/report-cuda/report.json" ] && [ -f "$work/report-cpu/report.json" ] &&
      check compare-cpu-rel-fro python3 "$checks" compare "$work/report-cuda/report.json" "$work/report-cpu/report.json" \
        --bounds "$bounds" --workloads long-k-16384,llm-128x4096x4096 --allow "$allow"

    # One int8 case above 65,536 rows (cuBLASLt 13.1 splits cuBLASLt's n into calls of at most
    # 65,536): planned, run on the device and on the cpu (int8 is bit-exact: bound 1.0001).
    cat >"$work/int8-rows.yaml" <<'YAML'
seed: 65
description: "device-check: int8 above 65,536 rows (cuBLASLt 13.1's row split)"
workloads:
  - {name: int8-rows-65600, m: 65600, n: 256, k: 256}
YAML
    [ $dry -eq 1 ] && sed -i 's/n: 256, k: 256/n: 16, k: 32/' "$work/int8-rows.yaml"
    step int8-rows --show 20 bash -c '
      set -e
      "$1" gen "$2/int8-rows.yaml" -o "$2/int8-rows.h5" --force -q
      "$1" explain "$2/int8-rows.h5" --recipes int8 --json >"$2/explain-int8-rows.json"
      "$1" run "$2/int8-rows.h5" --backend "$3" --recipes int8 --max-time-ms 20 --min-samples 2 -o "$2/report-int8-rows" --force --quiet
      "$1" run "$2/int8-rows.h5" --backend cpu --recipes int8 --max-time-ms 1 --min-samples 1 --max-samples 1 -o "$2/report-int8-rows-cpu" --force --quiet
      python3 "$4" int8rows "$2/explain-int8-rows.json" "$2/report-int8-rows/report.json"
      python3 "$4" compare "$2/report-int8-rows/report.json" "$2/report-int8-rows-cpu/report.json" --bounds "$5" --workloads int8-rows-65600
    ' int8-rows "$precis" "$work" "$backend" "$checks" "$bounds"

    # Two workers at once, each with its own stream, events and cuBLASLt handle: every point ok, and
    # 2-worker throughput at least 1.2x the 1-worker one on decode-m1 (small GEMMs that leave most
    # of the GPU idle): evidence that their kernels ran at once on the GPU, not merely that the host
    # threads overlapped. On the cpu backend (dry run) the ratio is printed, not judged.
    step accept-cuda-concurrency --show 20 "$precis" accept "$data" --backend "$backend" --workload decode-m1 \
      --recipes bf16,int8,fp8 --concurrency 2 --max-batch 2 --repeats 2 $quick -o "$work/accept-cuda" --force
    if [ -f "$work/accept-cuda/accept.json" ]; then
      if [ $dry -eq 1 ]; then
        check accept-concurrency-points python3 "$checks" accept "$work/accept-cuda/accept.json"
      else
        check accept-concurrency-points python3 "$checks" accept "$work/accept-cuda/accept.json" --min-ratio 1.2
      fi
    else
      note "    accept wrote no accept.json: FAILED"
      failed=1
    fi
    step run-cuda-cold-autotune --show 20 "$precis" run "$data" --backend "$backend" --workloads square-1024,decode-m1 \
      --recipes fp16,bf16,int8,fp8 --cold --autotune 4 $quick -o "$work/report-cold" --force
    step run-cuda-int8-static --show 20 "$precis" run "$data" --backend "$backend" --workloads llm-128x4096x4096 \
      --recipes int8 --int8-act-scale percentile $quick -o "$work/report-static" --force
  fi
fi

# Issue 19: the high-precision recipes on 53-bit phi data (fp64-emu is unsupported below sm_100,
# and says why: on the allow-list). The dry run generates the same 23 MB dataset (the archive must
# leave it out) and runs two recipes on one workload.
if [ $sanitize -eq 0 ] && step gen-phi64 "$precis" gen --preset ozaki-phi --inputs float64 -o "$work/phi64.h5" --force; then
  if [ $dry -eq 1 ]; then
    step run-cuda-hiprec --show 20 "$precis" run "$work/phi64.h5" --backend cpu --workloads phi-0.5 --recipes fp64,3xtf32 \
      $quick -o "$work/report-hiprec" --force
  else
    step run-cuda-hiprec --show 30 "$precis" run "$work/phi64.h5" --backend cuda --recipes high-precision \
      --max-time-ms 100 --min-samples 5 -o "$work/report-hiprec" --force
  fi
  [ -f "$work/report-hiprec/report.json" ] &&
    check run-cuda-hiprec-rows python3 "$checks" rows "$work/report-hiprec/report.json" --allow "$allow"
  # The split plans: one GEMM per partial product, terms at 256-byte strides.
  "$precis" explain "$work/phi64.h5" --recipes high-precision --cc "$cc" --json >"$work/explain-hiprec.json" \
    2>"$work/explain-hiprec.log"
  check explain-hiprec-plans python3 "$checks" explain "$work/explain-hiprec.json" --allow "$allow"
fi

archive || note "could not write device-check.tar.gz"
check archive python3 "$checks" archive "$out/device-check.tar.gz" "$work" --max-mib "$ARCHIVE_MAX_MIB"
note ""
note "device check$([ $dry -eq 1 ] && echo ' (dry run)'): $([ $failed -eq 0 ] && echo 'every step passed' || echo 'AT LEAST ONE STEP FAILED') (full logs in device-check.tar.gz)"
rm -rf "$work"
exit $failed
