"""One writer per output (docs/robustness.md, "One writer per output").

- two `precis run` on one report directory: exactly one proceeds; the other exits 2 at once with
  one line naming the directory and the holder (pid, host, start time); the survivor's journal
  (header + one whole line per case) and report (rows = journal rows) are intact;
- the same for one `--save-outputs` file shared by two runs with different directories, for two
  `precis gen` writing one dataset, and for two `precis accept` on one directory;
- a run killed with SIGKILL leaves its lock file; the next run on the directory takes it over
  with a message naming the dead holder;
- a lock file from another host is reported and left alone."""
import json
import os
import signal
import socket
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
import time

PRECIS = os.environ["PRECIS"]
FAILURES = []
SLOW = ["--backend", "cpu", "--recipes", "fp32,bf16,int8", "--min-samples", "3", "--max-samples", "1000000",
        "--max-time-ms", "60", "--target-spread", "0", "--quiet"]


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)


def wait_for(predicate, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc is not None and proc.poll() is not None:
            return predicate()
        time.sleep(0.01)
    return False


def journal_lines(path):
    with open(path) as fh:
        text = fh.read()
    return text, [json.loads(line) for line in text.split("\n")[:-1]]


def check_intact(out, what):
    """The journal is a header plus one whole, distinct line per case; the report has its rows."""
    text, lines = journal_lines(os.path.join(out, "journal.jsonl"))
    check(text.endswith("\n"), "%s: the journal ends in a torn line" % what)
    check(lines and lines[0].get("format") == "precis-journal", "%s: the journal has no header" % what)
    cases = [(r["workload"], r["recipe"]) for r in lines[1:]]
    check(len(cases) == 12 and len(set(cases)) == 12, "%s: journal cases %r, expected 12 distinct" % (what, cases))
    with open(os.path.join(out, "report.json")) as fh:
        report = json.load(fh)
    check(report["complete"] is True, "%s: report incomplete" % what)
    check([(r["workload"], r["recipe"]) for r in report["rows"]] == cases, "%s: report rows differ from the journal" % what)
    check(not os.path.exists(os.path.join(out, ".precis-lock")), "%s: the lock file was left behind" % what)


def race(first_argv, second_argv, lock_file, what, first_codes=(0,)):
    """Starts the first writer, waits for its lock, starts the second: the second must be refused."""
    first = subprocess.Popen(first_argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    check(wait_for(lambda: os.path.exists(lock_file), first, 60), "%s: the first writer never took its lock" % what)
    second = subprocess.run(second_argv, capture_output=True, text=True, timeout=60)
    still_running = first.poll() is None
    _, first_err = first.communicate(timeout=120)
    check(still_running, "%s: the first writer ended before the second tried: the test raced nothing" % what)
    check(first.returncode in first_codes, "%s: the first writer exited %d: %s" % (what, first.returncode, first_err))
    check(second.returncode == 2, "%s: the second writer exited %d, expected 2: %s" % (what, second.returncode,
                                                                                     second.stderr))
    lines = second.stderr.strip().splitlines()
    check(len(lines) == 1, "%s: %d lines on stderr, expected one: %r" % (what, len(lines), lines))
    line = lines[0] if lines else ""
    holder = "in use by pid %d on host %s (precis " % (first.pid, socket.gethostname())
    check(holder in line and "started 20" in line, "%s: the refusal does not name the holder: %s" % (what, line))
    print("%s: %s" % (what, line))
    return line


def main():
    with scratch.TemporaryDirectory(prefix="precis-lock-") as work:
        suite = os.path.join(work, "s.yaml")
        with open(suite, "w") as fh:
            fh.write("seed: 3\nworkloads:\n")
            for i in range(4):
                fh.write("  - {name: w%d, m: 32, n: 32, k: 32}\n" % i)
        dataset = os.path.join(work, "d.h5")
        subprocess.run([PRECIS, "gen", suite, "-o", dataset, "-q"], check=True, stdout=subprocess.DEVNULL)

        # Two runs on one report directory.
        out = os.path.join(work, "same")
        argv = [PRECIS, "run", dataset, "-o", out] + SLOW
        line = race(argv, argv, os.path.join(out, ".precis-lock"), "run -o same")
        check(line.startswith("precis run: %s: in use by" % out), "run -o same: the refusal does not name %s" % out)
        check_intact(out, "run -o same")

        # Two runs, two directories, one --save-outputs file.
        saved = os.path.join(work, "outputs.h5")
        first = [PRECIS, "run", dataset, "-o", os.path.join(work, "a"), "--save-outputs", saved] + SLOW
        second = [PRECIS, "run", dataset, "-o", os.path.join(work, "b"), "--save-outputs", saved] + SLOW
        line = race(first, second, os.path.join(work, ".outputs.h5.precis-lock"), "run --save-outputs same")
        check(line.startswith("precis run: %s: in use by" % saved), "--save-outputs: the refusal does not name %s" % saved)
        check_intact(os.path.join(work, "a"), "run --save-outputs same")
        check(not os.path.exists(os.path.join(work, "b")), "--save-outputs: the refused run left its directory")
        check(not os.path.exists(os.path.join(work, ".outputs.h5.precis-lock")), "--save-outputs: lock left behind")

        # Two gens on one dataset.
        big = os.path.join(work, "big.yaml")
        with open(big, "w") as fh:
            fh.write("seed: 1\nworkloads:\n")
            for i in range(24):
                fh.write("  - {name: g%d, m: 256, n: 256, k: 256, batch: 4}\n" % i)
        target = os.path.join(work, "g.h5")
        line = race([PRECIS, "gen", big, "-o", target, "-q"], [PRECIS, "gen", big, "-o", target, "-q", "--force"],
                    os.path.join(work, ".g.h5.precis-lock"), "gen -o same")
        check(line.startswith("precis gen: %s: in use by" % target), "gen: the refusal does not name %s" % target)
        check(not os.path.exists(os.path.join(work, ".g.h5.precis-lock")), "gen: lock left behind")

        # Two acceptance tests on one directory (exit 3 is a FAIL verdict, not a failure to run).
        out = os.path.join(work, "accept")
        argv = [PRECIS, "accept", dataset, "-o", out, "--backend", "cpu", "--recipe", "fp32,bf16", "--max-batch", "4",
                "--repeats", "2", "--min-samples", "3", "--max-samples", "1000000", "--max-time-ms", "100",
                "--target-spread", "0", "--quiet"]
        line = race(argv, argv, os.path.join(out, ".precis-lock"), "accept -o same", first_codes=(0, 3))
        check(line.startswith("precis accept: %s: in use by" % out), "accept: the refusal does not name %s" % out)
        check(sorted(os.listdir(out)) == ["accept.html", "accept.json", "accept.md"],
              "accept: files in the directory: %r" % sorted(os.listdir(out)))

        # SIGKILL: the lock file stays; the next run takes it over.
        out = os.path.join(work, "killed")
        proc = subprocess.Popen([PRECIS, "run", dataset, "-o", out] + SLOW, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        journal = os.path.join(out, "journal.jsonl")
        check(wait_for(lambda: os.path.exists(journal) and journal_lines(journal)[0].count("\n") >= 2, proc, 60),
              "kill -9: no row was journaled")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lock = os.path.join(out, ".precis-lock")
        check(os.path.exists(lock), "kill -9: no lock file left behind (nothing to take over)")
        with open(lock) as fh:
            check(fh.read().startswith("pid=%d " % proc.pid), "kill -9: the lock file does not name the killed run")
        p = subprocess.run([PRECIS, "run", dataset, "-o", out, "--force"] + SLOW, capture_output=True, text=True,
                           timeout=120)
        check(p.returncode == 0, "kill -9: the next run exited %d: %s" % (p.returncode, p.stderr))
        taken = "took over the lock left by pid %d on host %s" % (proc.pid, socket.gethostname())
        check(taken in p.stderr and "no longer running" in p.stderr,
              "kill -9: the take-over is not reported: %s" % p.stderr)
        check_intact(out, "after kill -9")
        print("kill -9: " + p.stderr.strip().splitlines()[0])

        # A lock from another host is reported and kept.
        out = os.path.join(work, "foreign")
        os.makedirs(out)
        lock = os.path.join(out, ".precis-lock")
        text = "pid=77 host=other-node.example started=2026-01-02T03:04:05Z command=precis run\n"
        with open(lock, "w") as fh:
            fh.write(text)
        p = subprocess.run([PRECIS, "run", dataset, "-o", out] + SLOW, capture_output=True, text=True, timeout=60)
        check(p.returncode == 2, "foreign lock: exit %d, expected 2" % p.returncode)
        check("pid 77 on host other-node.example" in p.stderr and "another host" in p.stderr and lock in p.stderr,
              "foreign lock: %s" % p.stderr)
        with open(lock) as fh:
            check(fh.read() == text, "foreign lock: the lock file was changed")
        check(sorted(os.listdir(out)) == [".precis-lock"], "foreign lock: files written: %r" % os.listdir(out))
    if FAILURES:
        print("%d failures" % len(FAILURES))
        return 1
    print("output locks: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
