"""Every command that reads an HDF5 file it did not write validates it in a child process first
(src/data/hdf5_guard.c, docs/robustness.md): inspect, run and accept (datasets), import and gen
(HDF5 sources, FILE.h5:/object). PRECIS_HDF5_GUARD_FAULT=crash|hang makes the child crash or hang
as libhdf5 does on the files of tests/corpus/libhdf5-crashes/ (those are run by test_corpus.py);
each command must then exit 2 with "FILE: corrupt file (the HDF5 library failed reading it)",
a hang within the time limit (PRECIS_HDF5_CHECK_TIMEOUT), and without the fault succeed."""
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
import time

import h5py
import numpy as np

PRECIS = os.environ["PRECIS"]
FAILURES = []
MESSAGE = "corrupt file (the HDF5 library failed reading it)"
FAST_RUN = ["--backend", "cpu", "--recipes", "fp32", "--quiet", "--min-samples", "1", "--max-samples", "1",
            "--max-time-ms", "1"]


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def main():
    with scratch.TemporaryDirectory(prefix="precis-guard-") as work:
        source = os.path.join(work, "weights.h5")
        with h5py.File(source, "w") as f:
            f.create_dataset("layer/w", data=np.random.default_rng(1).standard_normal((24, 16)).astype(np.float32),
                             chunks=(8, 16))
        dataset = os.path.join(work, "d.h5")
        p = subprocess.run([PRECIS, "import", "--b", source + ":/layer/w", "--m", "8", "-o", dataset, "-q"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            return 1
        suite = os.path.join(work, "s.yaml")
        with open(suite, "w") as fh:
            fh.write("workloads:\n  - name: w\n    m: 4\n    n: 16\n    k: 24\n"
                     "    a: normal\n    b: {dist: file, path: weights.h5, dataset: /layer/w}\n")

        def commands(n):
            out = os.path.join(work, "out%d" % n)
            return {
                "inspect": ([PRECIS, "inspect", dataset], dataset),
                "run": ([PRECIS, "run", dataset, "-o", out] + FAST_RUN, dataset),
                "accept": ([PRECIS, "accept", dataset, "--backend", "cpu", "--recipe", "fp32", "--max-batch", "1",
                            "--max-time-ms", "1", "-o", out], dataset),
                "import": ([PRECIS, "import", "--b", source + ":/layer/w", "-o", out + ".h5", "-q"], source),
                "gen": ([PRECIS, "gen", suite, "-o", out + "-gen.h5", "-q"], source),
            }

        n = 0
        for fault, limit in (("crash", "20"), ("hang", "1")):
            n += 1
            for name, (argv, named) in commands(n).items():
                env = dict(os.environ, PRECIS_HDF5_GUARD_FAULT=fault, PRECIS_HDF5_CHECK_TIMEOUT=limit)
                start = time.monotonic()
                p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work, timeout=120)
                took = time.monotonic() - start
                lines = [l for l in p.stderr.splitlines() if not l.startswith("precis: no usable CUDA device")]
                check(p.returncode == 2, "%s, child %s: exit %d, expected 2 (%s)" % (name, fault, p.returncode,
                                                                                       p.stderr.strip()))
                check(len(lines) == 1 and MESSAGE in lines[0] and named in lines[0],
                      "%s, child %s: expected one line naming %s with %r, got %r" % (name, fault, named, MESSAGE,
                                                                                   p.stderr.strip()))
                if fault == "hang":
                    check("no answer within 1 s" in p.stderr and took < 30,
                          "%s: the hang is cut at the 1 s limit (took %.1f s): %s" % (name, took, p.stderr.strip()))
                else:
                    check("signal 11 (SIGSEGV)" in p.stderr, "%s: the signal is named: %s" % (name, p.stderr.strip()))
        n += 1
        for name, (argv, _) in commands(n).items():
            env = dict(os.environ)
            env.pop("PRECIS_HDF5_GUARD_FAULT", None)
            p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work, timeout=300)
            check(p.returncode == 0, "%s without a fault: exit %d: %s" % (name, p.returncode, p.stderr.strip()[-2000:]))

    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
