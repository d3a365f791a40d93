#!/usr/bin/env bash
# Runs every GPU test program in a folder and prints one PASS/FAIL/SKIP line each, so the GPU
# tests can be run where CTest's recorded paths are not valid (a GPU machine with a copied tree).
#
#   tests/gpu/run-all.sh                         # build/tests/gpu of this checkout
#   tests/gpu/run-all.sh build/tests/gpu         # every gpu_test_* program in that folder
#   tests/gpu/run-all.sh build/tests/gpu/gpu_test_cuda_backend [...]   # the folder of the first one
#
# Exit status: 0 when nothing failed (skips allowed), 1 when any program failed, 2 when there was
# nothing to run. The full output of each program goes to $LOG_DIR (default: a temporary folder).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -ge 1 ]; then
  if [ -d "$1" ]; then dir=$1; else dir=$(dirname "$1"); fi
else
  dir="$here/../../build/tests/gpu"
fi
if [ ! -d "$dir" ]; then
  echo "run-all.sh: no such folder: $dir (build first: cmake -S . -B build && cmake --build build)" >&2
  exit 2
fi
# gpu_test_devices runs the precis program named by PRECIS, which only CTest sets: export it here
# (given, else PRECIS_BIN_DIR's, else the one on PATH, else the build tree's next to this folder).
if [ -z "${PRECIS:-}" ]; then
  for candidate in "${PRECIS_BIN_DIR:-/nonexistent}/precis" "$(command -v precis 2>/dev/null || true)" \
    "$dir/../../precis"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && [ -f "$candidate" ]; then
      PRECIS=$(cd "$(dirname "$candidate")" && pwd)/precis
      break
    fi
  done
fi
if [ -n "${PRECIS:-}" ]; then export PRECIS; echo "PRECIS=$PRECIS"; else echo "PRECIS: no precis program found (gpu_test_devices will fail)"; fi
log_dir=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$log_dir"
limit=${GPU_TEST_TIMEOUT:-600}
pass=0 fail=0 skip=0
shopt -s nullglob
programs=("$dir"/gpu_test_*)
if [ ${#programs[@]} -eq 0 ]; then
  echo "run-all.sh: no gpu_test_* program in $dir" >&2
  exit 2
fi
for prog in "${programs[@]}"; do
  [ -x "$prog" ] && [ -f "$prog" ] || continue
  name=$(basename "$prog")
  log="$log_dir/$name.log"
  start=$(date +%s.%N)
  timeout "$limit" "$prog" >"$log" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) pass=$((pass + 1)); echo "PASS $name (${secs}s)" ;;
    77)
      skip=$((skip + 1))
      why=$(grep -m1 -i 'skip' "$log" | sed 's/^SKIP: *//')
      [ -n "$why" ] || why=$(tail -n1 "$log")
      echo "SKIP $name: $why" ;;
    124) fail=$((fail + 1)); echo "FAIL $name: timed out after ${limit}s (log: $log)" ;;
    *) fail=$((fail + 1)); echo "FAIL $name: exit $rc (log: $log)"; grep -E 'CHECK failed|FAIL' "$log" | head -20 | sed 's/^/    /' ;;
  esac
done
echo "$pass passed, $fail failed, $skip skipped (logs in $log_dir)"
[ $fail -eq 0 ]
