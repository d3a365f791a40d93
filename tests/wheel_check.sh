#!/usr/bin/env bash
# The Python package as a user installs it (issue 29, DESIGN §15): `pip install ./python` into a fresh
# venv (scikit-build-core from PyPI builds the repository's CMake), then, with that interpreter, a CLI
# row's saved output reproduced bit for bit by precis.emulate and the CLI's report read back.
#   bash tests/wheel_check.sh BUILD_DIR      (BUILD_DIR holds the precis executable; .ci/run runs it)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
build=$(cd "$1" && pwd)
venv="$build/wheel-venv"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check ./python h5py
cat > "$work/suite.yaml" <<'YAML'
seed: 30
workloads:
  - name: odd
    m: 37
    n: 21
    k: 80
    batch: 3
YAML
"$build/precis" gen "$work/suite.yaml" -o "$work/odd.h5" >/dev/null
"$build/precis" run "$work/odd.h5" --backend cpu --recipes bf16,int8,fp8,nvfp4 --quiet --max-time-ms 5 \
  --save-outputs "$work/out.h5" -o "$work/report"
cd "$work"  # not the repository: `import precis` must find the installed package
"$venv/bin/python" - "$work" <<'PY'
import json, sys, h5py, numpy as np, precis
work = sys.argv[1]
assert "site-packages" in precis.__file__, precis.__file__
ds = precis.dataset(f"{work}/odd.h5")
arrays = ds.arrays("odd")
with h5py.File(f"{work}/out.h5") as saved:
    for recipe in ("bf16", "int8", "fp8", "nvfp4"):
        c = precis.emulate(arrays["a"], arrays["b"], recipe)
        ref = saved[f"workloads/odd/{recipe}/c"][...]
        assert c.shape == ref.shape and np.array_equal(c.view(np.uint32), ref.view(np.uint32)), recipe
report = precis.read_report(f"{work}/report/report.json")
assert report.rows == json.load(open(f"{work}/report/report.json"))["rows"] and len(report.rows) == 4
print(f"wheel check: precis {precis.__version__} from {precis.__file__}: 4 saved outputs reproduced bit for bit, "
      f"{len(report.rows)} report rows read back")
PY

# The package's own tests (tests/venv/test_python_*.py, precis.torch's included) against the installed
# wheel: its `precis` folder alone, copied out of the fresh venv, imported by the test venv's
# interpreter (which has torch and transformers; the wheel is abi3), never the build tree's copy.
if [ -x "$build/venv/bin/python" ]; then
  site=$("$venv/bin/python" -c 'import os, precis; print(os.path.dirname(precis.__file__))')
  mkdir -p "$work/stage" && cp -r "$site" "$work/stage/precis"
  cd "$build/tests"  # where ctest runs them
  for t in $(cd "$root" && ls tests/venv/test_python_*.py); do
    echo "wheel check: $t against the installed package"
    PRECIS_PY_STAGE="$work/stage" PRECIS="$build/precis" PRECIS_BUILD_DIR="$build" \
      PRECIS_QUANT_DRIVER="$build/tests/quantize_driver" PRECIS_SOURCE_DIR="$root" \
      "$build/venv/bin/python" "$root/$t" > "$work/test.log" 2>&1 || { cat "$work/test.log"; exit 1; }
    tail -n 1 "$work/test.log"
  done
fi
