#!/usr/bin/env bash
# Runs one tests/venv/test_*.py with the oracle interpreter that `cmake/quickstart.sh test` sets up in
# BUILD_DIR/venv. Without it the test is skipped (77), except under CI, where a missing oracle would
# let the check pass unseen.
set -u
venv_python="$PRECIS_BUILD_DIR/venv/bin/python"
if [ ! -x "$venv_python" ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $venv_python missing (cmake/quickstart.sh test creates it from cmake/python-test-requirements.txt)" >&2
    exit 1
  fi
  echo "SKIP: $venv_python missing; run bash cmake/quickstart.sh test to create it" >&2
  exit 77
fi
exec "$venv_python" "$@"
