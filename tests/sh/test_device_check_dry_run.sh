#!/usr/bin/env bash
# tests/gpu/device-check.sh --dry-run (issue 27): the device check's own logic on this machine, the
# cuda steps against the cpu backend, the archive built and checked as on the GPU machine. Fails
# when the script would report FAILED on a GPU for a reason of its own: an expected `unsupported`
# counted as a failure, an archive that loses the logs, step limits over 480 s, PRECIS not exported,
# a GPU test expecting what the backend refuses (the gpu-test-expectations step).
# CTest sets PRECIS and PRECIS_BUILD_DIR; run by hand: PRECIS=build/precis PRECIS_BUILD_DIR=build bash $0
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${PRECIS_BUILD_DIR:?PRECIS_BUILD_DIR (the build folder) is not set}
if [ ! -x "$build/tests/gpu/gpu_test_devices" ]; then
  echo "SKIP: a build without CUDA has no GPU programs to run dry"
  exit 77
fi
out=$(mktemp -d /tmp/precis-dry-run.XXXXXX)
PRECIS_BIN_DIR="$build" bash "$here/../gpu/device-check.sh" "$out" --dry-run
rc=$?
status=0
[ $rc -eq 0 ] || { echo "FAIL: device-check.sh --dry-run exited $rc"; status=1; }
# What the device tool brings back: the summary and the archive, every step in the summary.
for f in summary.txt device-check.tar.gz report.md; do
  [ -s "$out/$f" ] || { echo "FAIL: $f missing from the output folder"; status=1; }
done
for name in step-limits gpu-test-expectations gpu-tests explain-allow-list-and-plans run-cuda-rows compare-cpu-rel-fro int8-rows \
  accept-concurrency-points explain-hiprec-plans archive; do
  grep -q "^=== $name" "$out/summary.txt" || { echo "FAIL: no $name in summary.txt"; status=1; }
done
[ $status -eq 0 ] && rm -rf "$out" || echo "output kept in $out"
exit $status
