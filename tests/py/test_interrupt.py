"""SIGINT and SIGTERM during `precis run` and `precis gen` (docs/robustness.md).

run: the current row is finished or abandoned, every completed row is in the journal, the reports
are written and marked incomplete (complete=false) with exactly the journal's rows, saved outputs
hold those rows, and the exit status is 130 (SIGINT) or 143 (SIGTERM).
gen: nothing under the output name (an existing file there is left as it was), no temporary file,
exit 130/143."""
import json
import os
import signal
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
import time

import h5py

PRECIS = os.environ["PRECIS"]
FAILURES = []
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)


def wait_for(predicate, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    return False


def journal_rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        text = fh.read()
    # Only whole lines count: a row is journaled when its newline is. The first line is the header.
    return [json.loads(line) for line in text.split("\n")[1:-1]]


def write_suite(path, workloads, size, batch):
    with open(path, "w") as fh:
        fh.write("seed: 5\nworkloads:\n")
        for i in range(workloads):
            fh.write("  - {name: w%02d, m: %d, n: %d, k: %d, batch: %d}\n" % (i, size, size, size, batch))


def interrupt_run(work, dataset, sig, expected_rc):
    out = os.path.join(work, "report-%d" % sig)
    saved = os.path.join(work, "outputs-%d.h5" % sig)
    journal = os.path.join(out, "journal.jsonl")
    # Each row takes at least --max-time-ms of sampling, so that rows remain when the signal comes.
    argv = [PRECIS, "run", dataset, "-o", out, "--backend", "cpu", "--recipes", "fp32,bf16,int8", "--min-samples", "3",
            "--max-samples", "1000000", "--max-time-ms", "150", "--target-spread", "0", "--save-outputs", saved]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = wait_for(lambda: len(journal_rows(journal)) >= 1, proc, 120)
    check(started, "run: no journal row appeared before the process ended")
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        check(False, "run did not stop within 60 s of signal %d" % sig)
    name = signal.Signals(sig).name
    check(proc.returncode == expected_rc, "run %s: exit %d, expected %d (%s)" % (name, proc.returncode, expected_rc, err))
    check(not any(m in err for m in SANITIZER_MARKS), "run %s: sanitizer report: %s" % (name, err))
    rows = journal_rows(journal)
    with open(os.path.join(out, "report.json")) as fh:
        report = json.load(fh)
    check(report["complete"] is False, "run %s: report.json complete=%r, expected false" % (name, report["complete"]))
    got = [(r["workload"], r["recipe"]) for r in report["rows"]]
    want = [(r["workload"], r["recipe"]) for r in rows]
    check(len(rows) >= 1 and got == want, "run %s: report rows %r differ from journal rows %r" % (name, got, want))
    check(len(got) < 4 * 3, "run %s: all %d rows completed: the signal came too late to test anything" % (name, len(got)))
    for f in ("report.csv", "report.md", "report.html"):
        check(os.path.getsize(os.path.join(out, f)) > 0, "run %s: %s missing or empty" % (name, f))
    with open(os.path.join(out, "report.csv")) as fh:
        check(len(fh.read().strip().splitlines()) == 1 + len(rows), "run %s: report.csv rows differ from the journal" % name)
    with open(os.path.join(out, "report.md")) as fh:
        check("incomplete" in fh.read().lower(), "run %s: report.md does not say the run is incomplete" % name)
    with h5py.File(saved, "r") as f:
        stored = sorted((w, r) for w in f["workloads"] for r in f["workloads"][w])
    ok_rows = sorted((r["workload"], r["recipe"]) for r in rows if r["status"] == "ok")
    check(stored == ok_rows, "run %s: saved outputs %r, expected the completed rows %r" % (name, stored, ok_rows))
    leftovers = [f for f in os.listdir(work) + os.listdir(out) if ".tmp-" in f]
    check(not leftovers, "run %s: temporary files left: %r" % (name, leftovers))
    print("run %s: exit %d after %d of 12 rows, report incomplete, journal = report" % (name, proc.returncode, len(rows)))


def interrupt_gen(work, suite, sig, expected_rc, existing):
    out_dir = os.path.join(work, "gen-%d" % sig)
    os.makedirs(out_dir)
    target = os.path.join(out_dir, "d.h5")
    if existing:
        with open(target, "wb") as fh:
            fh.write(b"an earlier file that must survive")
    argv = [PRECIS, "gen", suite, "-o", target] + (["--force"] if existing else [])
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Progress goes to stderr per workload: wait for the second workload to begin.
    seen = []

    def second_workload_started():
        line = proc.stderr.readline()
        seen.append(line)
        return "w01" in line
    started = wait_for(second_workload_started, proc, 120)
    check(started, "gen: the second workload never started: %s" % "".join(seen))
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        check(False, "gen did not stop within 60 s of signal %d" % sig)
    name = signal.Signals(sig).name
    check(proc.returncode == expected_rc, "gen %s: exit %d, expected %d (%s)" % (name, proc.returncode, expected_rc, err))
    check(not any(m in err for m in SANITIZER_MARKS), "gen %s: sanitizer report: %s" % (name, err))
    left = sorted(os.listdir(out_dir))
    if existing:
        with open(target, "rb") as fh:
            check(fh.read() == b"an earlier file that must survive", "gen %s: the existing file was changed" % name)
        check(left == ["d.h5"], "gen %s: files left: %r" % (name, left))
    else:
        check(left == [], "gen %s: files left: %r" % (name, left))
    print("gen %s: exit %d, %s" % (name, proc.returncode, "earlier file intact" if existing else "nothing written"))


def main():
    with scratch.TemporaryDirectory(prefix="precis-interrupt-") as work:
        run_suite = os.path.join(work, "run.yaml")
        write_suite(run_suite, 4, 48, 2)
        dataset = os.path.join(work, "run.h5")
        subprocess.run([PRECIS, "gen", run_suite, "-o", dataset, "-q"], check=True, stdout=subprocess.DEVNULL)
        interrupt_run(work, dataset, signal.SIGINT, 130)
        interrupt_run(work, dataset, signal.SIGTERM, 143)

        gen_suite = os.path.join(work, "gen.yaml")
        write_suite(gen_suite, 40, 256, 4)
        interrupt_gen(work, gen_suite, signal.SIGINT, 130, existing=False)
        interrupt_gen(work, gen_suite, signal.SIGTERM, 143, existing=True)
    if FAILURES:
        print("%d failures" % len(FAILURES))
        return 1
    print("interrupts: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
