"""`mpirun -np 3 precis gen` (docs/scale-out.md): references dealt to the ranks, one file by rank 0.

- The dataset equals a single-process `precis gen`'s bit for bit in every array (a, b, c_ref,
  ab_abs, c_ref_lo of a double-double workload, calib/a), attribute and dataset_id, with and
  without --tile-rows, for a suite with several reference blocks per workload (shared and batched
  b, a calibration split, a double-double reference, a workload whose b is read from a file, which
  rank 0 makes alone).
- An output that exists (no --force): exit 2 from every rank, before any work.
- A rank other than 0 that fails (PRECIS_FAULT_INJECT=gen-rank:2) or dies (gen-rank-kill:1, a
  SIGKILL while rank 0 is writing): mpirun exits non-zero with an error naming the rank, no dataset
  and no temporary file is left, and a dataset already at the path (--force) is kept as it was.
Skipped (77) when precis was built without MPI, mpirun is missing, or h5py/numpy are missing.
"""
import os
import shutil
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
# Blocks of 256 rows: tall has 5 over its shared-b stack, batched 2 per sample, dd 2; with 3 ranks
# every rank gets blocks of every kind.
SUITE = """seed: 9
workloads:
  - {name: tall, m: 600, n: 24, k: 40, batch: 2, calib: 2, a: normal, b: normal}
  - {name: batched, m: 300, n: 16, k: 33, batch: 3, b_batched: true, a: cancellation, b: spikes}
  - {name: dd, m: 300, n: 12, k: 50, batch: 1, a: exp_spread, b: normal, reference: double-double}
  - {name: small, m: 5, n: 7, k: 9, batch: 2, a: student_t, b: log_uniform}
  - {name: fromfile, m: 260, n: 8, k: 16, batch: 1, a: normal, b: {dist: file, path: w.h5, dataset: /w}}
"""


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def compare(reference, candidate, label):
    with h5py.File(reference, "r") as a, h5py.File(candidate, "r") as b:
        check(a.attrs["dataset_id"] == b.attrs["dataset_id"], "%s: dataset_id differs" % label)
        arrays = []

        def walk(x, y, path):
            check(sorted(x.keys()) == sorted(y.keys()), "%s: %s holds %r, single gen %r" % (label, path, list(y), list(x)))
            skip = {"created_utc", "generator"} if path == "/" else set()
            xa = {k: v for k, v in x.attrs.items() if k not in skip}
            ya = {k: v for k, v in y.attrs.items() if k not in skip}
            check(set(xa) == set(ya) and all(np.array_equal(xa[k], ya[k]) for k in xa),
                  "%s: %s attributes differ" % (label, path))
            for key in x:
                if key not in y:
                    continue
                if isinstance(x[key], h5py.Dataset):
                    p, q = x[key][()], y[key][()]
                    arrays.append(path + key)
                    check(p.dtype == q.dtype and p.shape == q.shape and p.tobytes() == q.tobytes(),
                          "%s: %s%s differs from the single gen (%s elements differ)" % (
                              label, path, key, np.count_nonzero(p != q) if p.shape == q.shape else "shape"))
                else:
                    walk(x[key], y[key], path + key + "/")

        walk(a, b, "/")
        check("/workloads/dd/c_ref_lo" in arrays and "/workloads/tall/calib/a" in arrays,
              "%s: compared %r" % (label, arrays))


def mpirun(mpiexec, args, inject=None):
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    env["ASAN_OPTIONS"] = ":".join(o for o in (os.environ.get("ASAN_OPTIONS"), "detect_leaks=0") if o)
    env.pop("PRECIS_FAULT_INJECT", None)
    if inject:
        env["PRECIS_FAULT_INJECT"] = inject
    return subprocess.run([mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", "3", PRECIS, "gen"] + args,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=300)


def main():
    if os.environ.get("PRECIS_MPI_BUILT") != "1":
        print("skipped: precis was built without MPI (PRECIS_MPI)")
        return 77
    mpiexec = os.environ.get("MPIEXEC") or shutil.which("mpirun")
    if not mpiexec or not os.path.exists(mpiexec):
        print("skipped: no mpirun (Debian: openmpi-bin)")
        return 77
    with scratch.TemporaryDirectory(prefix="precis-mpi-gen-") as work:
        with h5py.File(os.path.join(work, "w.h5"), "w") as f:
            f["w"] = np.random.default_rng(4).standard_normal((16, 8)).astype(np.float32)
        suite = os.path.join(work, "s.yaml")
        with open(suite, "w") as fh:
            fh.write(SUITE)
        single = os.path.join(work, "single.h5")
        subprocess.run([PRECIS, "gen", suite, "-o", single, "-q"], check=True, stdout=subprocess.DEVNULL)

        for label, extra in (("mpirun -np 3 gen", []), ("mpirun -np 3 gen --tile-rows 300", ["--tile-rows", "300"])):
            out = os.path.join(work, "mpi.h5")
            p = mpirun(mpiexec, [suite, "-o", out, "-q", "--force"] + extra)
            if check(p.returncode == 0, "%s: exit %d: %s" % (label, p.returncode, p.stderr)):
                compare(single, out, label)

        # float64 inputs (gen --inputs float64): made in core by rank 0; the others only wait.
        single64, out64 = os.path.join(work, "single64.h5"), os.path.join(work, "mpi64.h5")
        subprocess.run([PRECIS, "gen", suite, "--inputs", "float64", "-o", single64, "-q"], check=True,
                       stdout=subprocess.DEVNULL)
        p = mpirun(mpiexec, [suite, "--inputs", "float64", "-o", out64, "-q"])
        if check(p.returncode == 0, "mpirun gen --inputs float64: exit %d: %s" % (p.returncode, p.stderr)):
            compare(single64, out64, "mpirun -np 3 gen --inputs float64")

        # Refused by rank 0 before any work (the file exists, no --force): every rank ends, exit 2.
        p = mpirun(mpiexec, [suite, "-o", single, "-q"])
        check(p.returncode == 2 and "already exists" in p.stderr, "existing file under mpirun: exit %d: %s" % (
            p.returncode, p.stderr))

        # A rank that fails, one that dies: no dataset, no temporary file, the old file kept.
        for inject, expect in (("gen-rank:2", "MPI rank 2: workload"), ("gen-rank-kill:1", "MPI rank 1")):
            label = "PRECIS_FAULT_INJECT=" + inject
            fresh = os.path.join(work, "fresh", "d.h5")
            os.makedirs(os.path.dirname(fresh), exist_ok=True)
            p = mpirun(mpiexec, [suite, "-o", fresh, "-q"], inject)
            check(p.returncode != 0 and expect in p.stderr, "%s: exit %d: %s" % (label, p.returncode, p.stderr))
            check(os.listdir(os.path.dirname(fresh)) == [],
                  "%s: left %r behind" % (label, os.listdir(os.path.dirname(fresh))))
            kept = os.path.join(work, "kept", "d.h5")
            os.makedirs(os.path.dirname(kept), exist_ok=True)
            shutil.copyfile(single, kept)
            p = mpirun(mpiexec, [suite, "-o", kept, "-q", "--force"], inject)
            check(p.returncode != 0, "%s --force: exit %d" % (label, p.returncode))
            with open(single, "rb") as x, open(kept, "rb") as y:
                check(x.read() == y.read(), "%s --force: the dataset already there was changed" % label)
            check(os.listdir(os.path.dirname(kept)) == ["d.h5"],
                  "%s --force: left %r behind" % (label, os.listdir(os.path.dirname(kept))))

    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("mpirun -np 3 gen = one gen bit for bit (in core and tiled); a failed or dead rank leaves no file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
