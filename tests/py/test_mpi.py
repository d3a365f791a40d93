"""`mpirun -np 3 precis run` on the cpu backend (docs/scale-out.md, DESIGN §13).

- The report rank 0 writes equals a single-process run's in every accuracy field, every case exactly
  once, in dataset order; each rank keeps its own part journal; rows record host, part and rank.
- A rank's worker killed (SIGKILL) in the middle: mpirun still ends with one report (exit 1) in
  which that rank's unfinished cases are failed rows naming the rank and the signal, and every
  other row is intact (equal to the single run's).
- `mpirun ... --resume DIR` then continues each rank from its own journal: the report equals the
  single run's and the cases journaled before are not run again.
Skipped (77) when precis was built without MPI or mpirun is missing.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
import time

PRECIS = os.environ["PRECIS"]
FAILURES = []
ACCURACY_KEYS = ("workload", "recipe", "spec", "m", "n", "k", "batch", "status", "reason", "verdict",
                 "verdict_detail", "criteria", "error")
FIXED = ["--backend", "cpu", "--recipes", "fp32,bf16,int8", "--min-samples", "3", "--max-samples", "3", "--quiet"]
# Each case samples for 300 ms, so that the kill lands while the rank still has cases to run.
SLOW = ["--backend", "cpu", "--recipes", "fp32,bf16,int8", "--min-samples", "3", "--max-samples", "1000000",
        "--max-time-ms", "300", "--target-spread", "0", "--quiet"]


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def load(path):
    if not check(os.path.exists(path), "%s was not written" % path):
        return {"rows": [], "environment": {}, "settings": None, "complete": None}
    with open(path) as fh:
        return json.load(fh)


def accuracy(rows):
    return [{k: r[k] for k in ACCURACY_KEYS} for r in rows]


def mpirun(mpiexec, args, **kwargs):
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    # Under AddressSanitizer (the CI's sanitizer build): Open MPI's allocations still held at
    # MPI_Finalize are reported as leaks from components it has dlclose'd, which no suppression can
    # name. Leak checking is off for the ranks only; every other sanitizer check stays on.
    env["ASAN_OPTIONS"] = ":".join(o for o in (os.environ.get("ASAN_OPTIONS"), "detect_leaks=0") if o)
    return subprocess.Popen([mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", "3", PRECIS, "run"] + args,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, **kwargs)


def journal_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        text = fh.read()
    return [json.loads(line) for line in text.split("\n")[:-1]]


def main():
    if os.environ.get("PRECIS_MPI_BUILT") != "1":
        print("skipped: precis was built without MPI (PRECIS_MPI)")
        return 77
    mpiexec = os.environ.get("MPIEXEC") or shutil.which("mpirun")
    if not mpiexec or not os.path.exists(mpiexec):
        print("skipped: no mpirun (Debian: openmpi-bin)")
        return 77
    with scratch.TemporaryDirectory(prefix="precis-mpi-") as work:
        suite = os.path.join(work, "s.yaml")
        with open(suite, "w") as fh:
            fh.write("seed: 3\nworkloads:\n")
            for i, (m, n, k) in enumerate([(48, 40, 56), (96, 40, 56), (16, 16, 16), (64, 64, 64), (32, 8, 128)]):
                fh.write("  - {name: w%d, m: %d, n: %d, k: %d, batch: 2}\n" % (i, m, n, k))
        dataset = os.path.join(work, "d.h5")
        subprocess.run([PRECIS, "gen", suite, "-o", dataset, "-q"], check=True, stdout=subprocess.DEVNULL)
        single_dir = os.path.join(work, "single")
        subprocess.run([PRECIS, "run", dataset, "-o", single_dir] + FIXED, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        single = load(os.path.join(single_dir, "report.json"))
        cases = [(r["workload"], r["recipe"]) for r in single["rows"]]

        # Three ranks = one process.
        out = os.path.join(work, "mpi")
        proc = mpirun(mpiexec, [dataset, "-o", out] + FIXED)
        _, err = proc.communicate(timeout=300)
        check(proc.returncode == 0, "mpirun -np 3: exit %d: %s" % (proc.returncode, err))
        report = load(os.path.join(out, "report.json"))
        check([(r["workload"], r["recipe"]) for r in report["rows"]] == cases,
              "mpirun -np 3: cases %r" % [(r["workload"], r["recipe"]) for r in report["rows"]])
        check(accuracy(report["rows"]) == accuracy(single["rows"]), "mpirun -np 3: accuracy fields differ from one process")
        check(report["complete"] is True and report["settings"] == single["settings"], "mpirun -np 3: complete/settings")
        check(all(r["rank"] == r["part"] - 1 and r["host"] == socket.gethostname() and r["device"] is None
                  for r in report["rows"]) and {r["rank"] for r in report["rows"]} == {0, 1, 2},
              "mpirun -np 3: rows' rank/part/host: %r" % [(r["part"], r["rank"], r["host"]) for r in report["rows"]])
        parts = report["environment"].get("parts")
        check(isinstance(parts, list) and [p["rank"] for p in parts] == [0, 1, 2], "environment.parts: %r" % parts)
        for p in (1, 2, 3):
            lines = journal_lines(os.path.join(out, "journal.part-%04d-of-0003.jsonl" % p))
            check(lines and lines[0]["part"] == {"index": p, "count": 3} and
                  len(lines) - 1 == sum(r["part"] == p for r in report["rows"]),
                  "rank %d's journal does not hold its rows" % (p - 1))

        # Rank 1's worker killed in the middle.
        out = os.path.join(work, "killed")
        victim = os.path.join(out, "journal.part-0002-of-0003.jsonl")
        proc = mpirun(mpiexec, [dataset, "-o", out] + SLOW)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(journal_lines(victim)) < 2 and proc.poll() is None:
            time.sleep(0.02)
        lines = journal_lines(victim)
        check(len(lines) >= 2, "rank 1 never journaled a row")
        if len(lines) >= 2:
            os.kill(lines[0]["pid"], signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        check(proc.returncode != 0 and "the worker of part 2 of 3 was killed by signal 9" in err,
              "killed rank: exit %d: %s" % (proc.returncode, err))
        report = load(os.path.join(out, "report.json"))
        kept = journal_lines(victim)[1:]
        check([(r["workload"], r["recipe"]) for r in report["rows"]] == cases, "killed rank: not every case once")
        failed = [r for r in report["rows"] if r["status"] == "failed"]
        check(failed and all(r["part"] == 2 and r["rank"] == 1 and "MPI rank 1" in r["reason"] and
                             "killed by signal 9" in r["reason"] for r in failed),
              "killed rank: failed rows %r" % [(r["workload"], r["recipe"], r["reason"]) for r in failed])
        check(len(failed) + len(kept) == sum(r["part"] == 2 for r in report["rows"]) and len(failed) >= 1,
              "killed rank: %d failed + %d journaled != rank 1's cases" % (len(failed), len(kept)))
        intact = [r for r in report["rows"] if r["status"] != "failed"]
        by_case = {(r["workload"], r["recipe"]): r for r in single["rows"]}
        check(accuracy(intact) == accuracy([by_case[(r["workload"], r["recipe"])] for r in intact]),
              "killed rank: the other rows are not intact")
        check(report["complete"] is True, "killed rank: report marked incomplete")

        # Resume: each rank continues its own journal.
        before = {p: journal_lines(os.path.join(out, "journal.part-%04d-of-0003.jsonl" % p)) for p in (1, 2, 3)}
        proc = mpirun(mpiexec, [dataset, "--resume", out] + SLOW)
        _, err = proc.communicate(timeout=300)
        check(proc.returncode == 0, "resume under mpirun: exit %d: %s" % (proc.returncode, err))
        report = load(os.path.join(out, "report.json"))
        check(accuracy(report["rows"]) == accuracy(single["rows"]), "resume under mpirun: report differs from one process")
        after = {p: journal_lines(os.path.join(out, "journal.part-%04d-of-0003.jsonl" % p)) for p in (1, 2, 3)}
        for p in (1, 2, 3):
            check(after[p][:len(before[p])] == before[p], "resume: rank %d's journal was rewritten" % (p - 1))
        check(len(after[2]) > len(before[2]) and len(after[1]) == len(before[1]),
              "resume ran %d cases of rank 1 and %d of rank 0" % (len(after[2]) - len(before[2]),
                                                                 len(after[1]) - len(before[1])))

    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("mpirun -np 3 = one process; a killed rank leaves failed rows and the rest; --resume per rank")
    return 0


if __name__ == "__main__":
    sys.exit(main())
