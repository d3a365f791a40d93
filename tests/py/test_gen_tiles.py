"""`precis gen --tile-rows R` (out of core, DESIGN §13): the file equals the in-core one.

Workloads larger than a tile (several tiles per sample, tiles across samples with a shared b, a
batched b, a calibration split, a tile of one row rounded up to a reference block, a tile larger
than the workload, a double-double workload, which stays in core), with every generated distribution: every array (a, b, c_ref, ab_abs, calib/a)
bit for bit, every attribute, and the dataset_id are those of the in-core `precis gen`; and
`precis inspect` validates the tiled file. Needs Debian's python3-h5py and python3-numpy."""
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print("skipped: %s" % exc)
    sys.exit(77)

PRECIS = os.environ["PRECIS"]
FAILURES = []
SUITE = """seed: 21
workloads:
  - {name: tall, m: 700, n: 96, k: 160, batch: 2, calib: 2, a: normal, b: normal}
  - {name: stack, m: 100, n: 33, k: 65, batch: 7, a: outlier_channels, b: cancellation}
  - {name: batched, m: 300, n: 40, k: 70, batch: 3, b_batched: true, a: cancellation, b: spikes}
  - {name: small, m: 5, n: 7, k: 9, batch: 2, calib: 3, a: student_t, b: log_uniform}
  - {name: misc, m: 260, n: 17, k: 31, batch: 1, a: relu, b: integers}
  - {name: unif, m: 257, n: 9, k: 11, batch: 2, a: spikes, b: uniform}
  - {name: spread, m: 300, n: 12, k: 24, batch: 1, a: exp_spread, b: exp_spread}
  - {name: dd, m: 40, n: 8, k: 16, batch: 1, a: exp_spread, b: normal, reference: double-double}
"""


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def compare(reference, candidate, label):
    with h5py.File(reference, "r") as a, h5py.File(candidate, "r") as b:
        check(a.attrs["dataset_id"] == b.attrs["dataset_id"], "%s: dataset_id %s != %s" % (
            label, b.attrs["dataset_id"], a.attrs["dataset_id"]))

        def walk(x, y, path):
            check(sorted(x.keys()) == sorted(y.keys()), "%s: %s holds %r, in core %r" % (label, path, list(y), list(x)))
            skip = {"created_utc", "generator"} if path == "/" else set()
            xa = {k: v for k, v in x.attrs.items() if k not in skip}
            ya = {k: v for k, v in y.attrs.items() if k not in skip}
            check(set(xa) == set(ya) and all(np.array_equal(xa[k], ya[k]) for k in xa),
                  "%s: %s attributes differ" % (label, path))
            for key in x:
                if key not in y:
                    continue
                if isinstance(x[key], h5py.Dataset):
                    p, q = x[key], y[key]
                    same = p.dtype == q.dtype and p.shape == q.shape and np.array_equal(p[()], q[()])
                    check(same, "%s: %s%s differs from the in-core file (%d elements differ)" % (
                        label, path, key, 0 if p.shape != q.shape else int(np.sum(p[()] != q[()]))))
                    check(q.fletcher32 and p.chunks == q.chunks, "%s: %s%s storage differs" % (label, path, key))
                else:
                    walk(x[key], y[key], path + key + "/")
        walk(a, b, "/")


def main():
    with scratch.TemporaryDirectory(prefix="precis-tiles-") as work:
        suite = os.path.join(work, "s.yaml")
        with open(suite, "w") as fh:
            fh.write(SUITE)
        in_core = os.path.join(work, "in_core.h5")
        p = subprocess.run([PRECIS, "gen", suite, "-o", in_core, "-q"], capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, "in-core gen: exit %d: %s" % (p.returncode, p.stderr))
        for tile in ("1", "256", "300", "512", "100000"):
            out = os.path.join(work, "tiled-%s.h5" % tile)
            p = subprocess.run([PRECIS, "gen", suite, "-o", out, "-q", "--tile-rows", tile], capture_output=True,
                               text=True, timeout=300)
            if not check(p.returncode == 0, "gen --tile-rows %s: exit %d: %s" % (tile, p.returncode, p.stderr)):
                continue
            compare(in_core, out, "--tile-rows %s" % tile)
            p = subprocess.run([PRECIS, "inspect", out], capture_output=True, text=True, timeout=300)
            check(p.returncode == 0, "inspect of the tiled file: exit %d: %s" % (p.returncode, p.stderr))
        for bad in ("0", "-3", "x"):
            p = subprocess.run([PRECIS, "gen", suite, "-o", os.path.join(work, "bad.h5"), "--tile-rows", bad],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 2 and "--tile-rows" in p.stderr, "--tile-rows %s: exit %d" % (bad, p.returncode))
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("gen --tile-rows 1/256/300/512/100000 = in-core gen, bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
