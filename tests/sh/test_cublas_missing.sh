#!/usr/bin/env bash
# precis on a machine whose cuBLAS cannot be loaded (kernels/cublas_lazy.c): before, a build with
# CUDA did not start at all there ("error while loading shared libraries"); now it starts, runs on
# the cpu backend, and `precis info` names the library and why it is missing. The libraries are
# hidden by bind-mounting /dev/null over every copy the loader could find, in a private mount
# namespace (root; skipped where that is not allowed).
# CTest sets PRECIS and PRECIS_CUDA_BUILT; by hand: PRECIS=build/precis PRECIS_CUDA_BUILT=1 bash $0
set -u
precis=${PRECIS:?PRECIS (the precis program) is not set}
if [ "${PRECIS_CUDA_BUILT:-0}" != 1 ]; then
  echo "SKIP: a build without CUDA loads no cuBLAS"
  exit 77
fi
if ! unshare -m true 2>/dev/null; then
  echo "SKIP: hiding the libraries needs a private mount namespace (unshare -m, as root)"
  exit 77
fi
# Every file the loader could open for either soname: the loader's cache, the toolkits' directories
# and LD_LIBRARY_PATH's, each link followed to its file.
ld_dirs=${LD_LIBRARY_PATH:-}
candidates=$( {
  ldconfig -p | awk '/libcublas(Lt)?\.so\.[0-9]+ /{print $NF}'
  find /usr/local/cuda*/ /usr/lib /opt ${ld_dirs//:/ } -name 'libcublas*.so.*' 2>/dev/null
} | xargs -r -n1 readlink -f | sort -u)
if [ -z "$candidates" ]; then
  echo "SKIP: no cuBLAS on this machine to hide"
  exit 77
fi
out=$(mktemp -d /tmp/precis-cublas-missing.XXXXXX)
# shellcheck disable=SC2016
unshare -m bash -c '
  for f in $1; do mount --bind /dev/null "$f" || exit 3; done
  "$2" info > "$3/info.txt" 2>&1 || exit 4
  "$2" info --json > "$3/info.json" 2>&1 || exit 5
  "$2" run --backend auto --recipes bf16 --min-samples 1 --max-samples 1 --max-time-ms 1 -o "$3/run" --force \
    > "$3/run.log" 2>&1 || exit 6
' hide "$candidates" "$precis" "$out"
rc=$?
status=0
[ $rc -eq 0 ] || { echo "FAIL: step $rc failed with cuBLAS hidden (3 mount, 4 info, 5 info --json, 6 run)"; status=1; }
grep -q "cuBLAS       not loaded: libcublas.so.[0-9]* could not be loaded" "$out/info.txt" ||
  { echo "FAIL: precis info does not say why cuBLAS is missing:"; cat "$out/info.txt"; status=1; }
python3 - "$out/info.json" <<'PY' || status=1
import json, sys
cuda = json.load(open(sys.argv[1]))["cuda"]
ok = cuda["built"] and cuda["cublas_version"] is None and "could not be loaded" in (cuda["cublas_error"] or "")
if not ok:
    print("FAIL: info --json:", cuda)
sys.exit(0 if ok else 1)
PY
[ -s "$out/run/report.json" ] || { echo "FAIL: no report from the cpu backend with cuBLAS hidden"; status=1; }
# and with cuBLAS there, no reason is given
"$precis" info --json | python3 -c 'import json, sys; c = json.load(sys.stdin)["cuda"]; sys.exit(0 if c["cublas_error"] is None and c["cublas_version"] else 1)' ||
  { echo "FAIL: info --json reports a cuBLAS error with cuBLAS present"; status=1; }
[ $status -eq 0 ] && rm -rf "$out" || echo "output kept in $out"
[ $status -eq 0 ] && echo "ok: precis runs without cuBLAS and says why it is missing"
exit $status
