#!/usr/bin/python3
"""The exp_spread distribution (issue 19): entries scale * (U - 0.5) * exp(phi * N(0,1)), the
exponent-spread inputs of the Ozaki-scheme papers. Checks its law on generated data (ln|x| has
mean ln(scale/2) - 1 + 0 and variance phi^2 + 1, since ln of a uniform on (0, 1) has mean -1 and
variance 1), that phi = 0 is a plain uniform, and that bad parameters are refused naming them.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import math
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print(f"skipped: {exc}")
    sys.exit(77)

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def gen(tmp, text):
    suite, data = os.path.join(tmp, "s.yaml"), os.path.join(tmp, "d.h5")
    with open(suite, "w") as f:
        f.write(text)
    proc = subprocess.run([PRECIS, "gen", suite, "-o", data, "-q", "--force"], capture_output=True, text=True)
    return proc, data


def main():
    with scratch.TemporaryDirectory() as tmp:
        proc, data = gen(tmp, """seed: 3
workloads:
  - {name: phi0, m: 200, n: 8, k: 200, a: {dist: exp_spread, phi: 0}, b: normal}
  - {name: phi2, m: 200, n: 8, k: 200, a: {dist: exp_spread, phi: 2, scale: 4}, b: normal}
  - {name: phi5, m: 200, n: 8, k: 200, a: {dist: exp_spread, phi: 5}, b: normal}
""")
        check(proc.returncode == 0, f"gen exp_spread {proc.stderr.strip()}")
        with h5py.File(data, "r") as f:
            a0 = f["workloads/phi0/a"][()].ravel().astype(np.float64)
            check(a0.min() >= -0.5 and a0.max() < 0.5 and abs(a0.mean()) < 0.01 and abs(a0.std() - math.sqrt(1 / 12)) < 0.01,
                  "phi = 0: uniform on [-0.5, 0.5)")
            for name, phi, scale in (("phi2", 2, 4), ("phi5", 5, 1)):
                x = f[f"workloads/{name}/a"][()].ravel().astype(np.float64)
                x = x[x != 0]
                logs = np.log(np.abs(x))
                mean_want = math.log(scale / 2) - 1
                std_want = math.sqrt(phi * phi + 1)
                check(abs(logs.mean() - mean_want) < 0.05 * std_want and abs(logs.std() / std_want - 1) < 0.05,
                      f"{name}: ln|x| mean {logs.mean():.3f} (want {mean_want:.3f}), std {logs.std():.3f} (want {std_want:.3f})")
                check(abs(np.mean(np.sign(x))) < 0.02, f"{name}: symmetric signs")
            check(f["workloads/phi2"].attrs["a_dist"] == "exp_spread(phi=2, scale=4)",
                  f"a_dist attribute {f['workloads/phi2'].attrs['a_dist']}")
        for bad, needle in (("phi: -1", "phi"), ("phi: 11", "phi"), ("scale: 0", "scale")):
            proc, _ = gen(tmp, "workloads:\n  - {name: w, m: 2, n: 2, k: 2, a: {dist: exp_spread, %s}}\n" % bad)
            check(proc.returncode == 2 and needle in proc.stderr and "exp_spread" in proc.stderr,
                  f"exp_spread {bad} refused: {proc.stderr.strip()[:160]}")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
