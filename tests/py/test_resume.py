"""`precis run --resume DIR` (docs/robustness.md, "Resuming a run"): an interrupted run continues from its journal.

A run is interrupted at several points -- SIGINT, SIGKILL, a file size limit (RLIMIT_FSIZE, as
`ulimit -f`: the journal write fails with EFBIG like on a full disk) and a torn last journal line --
and resumed. Each time:
- the resumed report equals an uninterrupted run's in every accuracy field (status, verdicts,
  every error metric), complete, one row per case in dataset order;
- nothing that had finished runs again: precis says how many cases it kept, that number is the
  journal's row count before the resume, the journal before the resume is a byte-for-byte prefix of
  the journal after it, and the kept rows' timing samples (which a rerun would change) are in the
  report as they were journaled.
A resume with another dataset, other settings, recipes, criteria or workloads is refused with
exit 2 and the difference named, and changes nothing."""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
import time

PRECIS = os.environ["PRECIS"]
FAILURES = []
CASES = 12
# Each case samples for >= 60 ms, so that a signal lands in the middle of the run.
SLOW = ["--backend", "cpu", "--recipes", "fp32,bf16,int8", "--min-samples", "3", "--max-samples", "1000000",
        "--max-time-ms", "60", "--target-spread", "0", "--quiet"]
# A fixed number of samples: journal lines of nearly constant length, for the file size limit.
FIXED = ["--backend", "cpu", "--recipes", "fp32,bf16,int8", "--min-samples", "3", "--max-samples", "3", "--quiet"]
ACCURACY_KEYS = ("workload", "recipe", "m", "n", "k", "batch", "status", "reason", "verdict", "verdict_detail",
                 "criteria", "error")


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def read(path, mode="r"):
    with open(path, mode) as fh:
        return fh.read()


def journal(out):
    """(text, header, rows) of the whole lines of DIR/journal.jsonl."""
    text = read(os.path.join(out, "journal.jsonl"))
    lines = [json.loads(line) for line in text.split("\n")[:-1]]
    return text, (lines[0] if lines else None), lines[1:]


def accuracy(report):
    return [{k: r[k] for k in ACCURACY_KEYS} for r in report["rows"]]


def wait_for(predicate, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    return False


def rows_journaled(out):
    path = os.path.join(out, "journal.jsonl")
    return read(path).count("\n") - 1 if os.path.exists(path) else 0


def resume(dataset, out, options, before_text, what, baseline, torn_line=None):
    """Resumes DIR and checks the report against the baseline and the journal against before_text."""
    kept_rows = before_text.count("\n") - 1
    p = subprocess.run([PRECIS, "run", dataset, "--resume", out] + options, capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "%s: resume exited %d: %s" % (what, p.returncode, p.stderr))
    said = "%d cases kept from the journal, %d run now" % (kept_rows, CASES - kept_rows)
    check(said in p.stderr, "%s: expected \"%s\" in: %s" % (what, said, p.stderr))
    if torn_line:
        check("line %d is incomplete" % torn_line in p.stderr, "%s: the torn line is not reported: %s" % (what, p.stderr))
    text, _, rows = journal(out)
    check(text.startswith(before_text), "%s: the journal before the resume is not a prefix of the journal after it" % what)
    cases = [(r["workload"], r["recipe"]) for r in rows]
    check(len(cases) == CASES and len(set(cases)) == CASES, "%s: journal cases after resume: %r" % (what, cases))
    report = json.loads(read(os.path.join(out, "report.json")))
    check(report["complete"] is True, "%s: the resumed report is incomplete" % what)
    check(report["environment"].get("resumed_cases_kept") == kept_rows,
          "%s: environment.resumed_cases_kept = %r" % (what, report["environment"].get("resumed_cases_kept")))
    check(accuracy(report) == accuracy(baseline), "%s: accuracy fields differ from the uninterrupted run" % what)
    kept = {(r["workload"], r["recipe"]): r for r in [json.loads(l) for l in before_text.split("\n")[1:-1]]}
    for row in report["rows"]:
        key = (row["workload"], row["recipe"])
        if key in kept:
            # below_min_samples is derived from the run's --min-samples when the report is written;
            # the journal holds the measurement alone.
            measured = {k: v for k, v in row["time"].items() if k != "below_min_samples"}
            check(measured == kept[key]["time"], "%s: %r was measured again (timings differ)" % (what, key))
    check(not os.path.exists(os.path.join(out, ".precis-lock")), "%s: the lock was left behind" % what)
    print("%s: resumed with %d of %d cases kept; report = uninterrupted run" % (what, kept_rows, CASES))
    return p


def start(dataset, out, options, **kwargs):
    return subprocess.Popen([PRECIS, "run", dataset, "-o", out] + options, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def main():
    with scratch.TemporaryDirectory(prefix="precis-resume-") as work:
        suite = os.path.join(work, "s.yaml")
        with open(suite, "w") as fh:
            fh.write("seed: 5\nworkloads:\n")
            for i in range(4):
                fh.write("  - {name: w%02d, m: 48, n: 40, k: 56, batch: 2}\n" % i)
        dataset = os.path.join(work, "d.h5")
        subprocess.run([PRECIS, "gen", suite, "-o", dataset, "-q"], check=True, stdout=subprocess.DEVNULL)
        base_dir = os.path.join(work, "baseline")
        subprocess.run([PRECIS, "run", dataset, "-o", base_dir] + FIXED, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        baseline = json.loads(read(os.path.join(base_dir, "report.json")))
        base_text, _, base_rows = journal(base_dir)
        check(len(base_rows) == CASES, "baseline: %d rows" % len(base_rows))

        # SIGINT: exit 130, an incomplete report; then resume.
        out = os.path.join(work, "sigint")
        proc = start(dataset, out, SLOW)
        check(wait_for(lambda: rows_journaled(out) >= 3, proc, 120), "SIGINT: three rows never appeared")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        check(proc.returncode == 130, "SIGINT: exit %d: %s" % (proc.returncode, err))
        check(json.loads(read(os.path.join(out, "report.json")))["complete"] is False, "SIGINT: report not incomplete")
        before = read(os.path.join(out, "journal.jsonl"))
        check(3 <= before.count("\n") - 1 < CASES, "SIGINT: %d rows before resuming" % (before.count("\n") - 1))
        resume(dataset, out, SLOW, before, "SIGINT", baseline)
        # Resuming a finished run keeps everything and runs nothing.
        done_text = read(os.path.join(out, "journal.jsonl"))
        resume(dataset, out, SLOW, done_text, "SIGINT, resumed again", baseline)
        check(read(os.path.join(out, "journal.jsonl")) == done_text, "a second resume changed the journal")

        # SIGKILL: no report, a lock left behind; the resume takes the lock over.
        out = os.path.join(work, "sigkill")
        proc = start(dataset, out, SLOW)
        check(wait_for(lambda: rows_journaled(out) >= 5, proc, 120), "SIGKILL: five rows never appeared")
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        check(os.path.exists(os.path.join(out, ".precis-lock")), "SIGKILL: no lock file left behind")
        check(not os.path.exists(os.path.join(out, "report.json")), "SIGKILL: a report was written")
        # A fresh run without --resume or --force takes the dead run's lock over but must not throw
        # its journal away.
        p = subprocess.run([PRECIS, "run", dataset, "-o", out] + SLOW, capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and "journal.jsonl already exists" in p.stderr and "--resume" in p.stderr,
              "SIGKILL: a fresh run on the directory: exit %d: %s" % (p.returncode, p.stderr))
        check("took over the lock left by pid %d" % proc.pid in p.stderr, "SIGKILL: no take-over message: %s" % p.stderr)
        before = read(os.path.join(out, "journal.jsonl"))
        if not before.endswith("\n"):
            before = before[:before.rfind("\n") + 1]
        resume(dataset, out, SLOW, before, "SIGKILL", baseline)

        # A file size limit in the middle of a journal line (as a full disk): exit 1, the journal
        # stays whole (the partial line is cut off), and the resume completes the run.
        out = os.path.join(work, "fsize")
        lines = base_text.split("\n")
        limit = sum(len(l) + 1 for l in lines[:5]) + len(lines[5]) // 2

        def limit_file_size():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        p = subprocess.run([PRECIS, "run", dataset, "-o", out] + FIXED, capture_output=True, text=True, timeout=120,
                           preexec_fn=limit_file_size)
        journal_path = os.path.join(out, "journal.jsonl")
        check(p.returncode == 1 and "%s: write failed: File too large" % journal_path in p.stderr,
              "file size limit: exit %d: %s" % (p.returncode, p.stderr))
        before = read(journal_path)
        check(before.endswith("\n"), "file size limit: the journal ends in a partial line (not cut off)")
        check(2 <= before.count("\n") - 1 < CASES, "file size limit: %d rows journaled" % (before.count("\n") - 1))
        resume(dataset, out, FIXED, before, "file size limit", baseline)

        # A torn last line (a writer killed inside write()): reported, dropped, its case run again.
        out = os.path.join(work, "torn")
        shutil.copytree(base_dir, out)
        kept_text = "\n".join(lines[:7]) + "\n"
        with open(os.path.join(out, "journal.jsonl"), "w") as fh:
            fh.write(kept_text + lines[7][: len(lines[7]) // 2])
        resume(dataset, out, FIXED, kept_text, "torn last line", baseline, torn_line=8)

        # Anything else that differs is refused, naming it, and nothing changes.
        other_suite = os.path.join(work, "other.yaml")
        with open(other_suite, "w") as fh:
            fh.write(read(suite).replace("seed: 5", "seed: 6"))
        other = os.path.join(work, "other.h5")
        subprocess.run([PRECIS, "gen", other_suite, "-o", other, "-q"], check=True, stdout=subprocess.DEVNULL)
        out = os.path.join(work, "mismatch")
        shutil.copytree(base_dir, out)
        with open(os.path.join(out, "journal.jsonl"), "w") as fh:
            fh.write("\n".join(lines[:4]) + "\n")
        files_before = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out)}
        refusals = [
            ([dataset] + FIXED + ["--max-samples", "4"], "--max-samples: the journal has 3, this run 4"),
            ([dataset] + FIXED + ["--recipes", "fp32,bf16"], "--recipes: the journal has fp32,bf16,int8, this run fp32,bf16"),
            ([dataset] + FIXED + ["--require", "rel_fro<=1"], "--require: the journal has none, this run rel_fro<=1"),
            ([dataset] + FIXED + ["--cold"], "--cold: the journal has false, this run true"),
            ([dataset] + FIXED + ["--workloads", "w00,w01"], "--workloads: the journal has all, this run w00,w01"),
            ([other] + FIXED, "dataset_id: the journal has \"%s\"" % baseline["dataset"]["dataset_id"]),
        ]
        for argv, expected in refusals:
            p = subprocess.run([PRECIS, "run"] + argv + ["--resume", out], capture_output=True, text=True, timeout=60)
            lines_err = p.stderr.strip().splitlines()
            check(p.returncode == 2 and len(lines_err) == 1 and "cannot resume a different run" in p.stderr and
                  expected in p.stderr, "refusal %r: exit %d: %s" % (expected, p.returncode, p.stderr))
        files_after = {f: read(os.path.join(out, f), "rb") for f in os.listdir(out)}
        check(files_after == files_before, "a refused resume changed the directory")
        print("mismatches: %d refusals, each naming the difference" % len(refusals))

        for argv, expected in [
            ([dataset, "--resume", os.path.join(work, "nowhere")] + FIXED, "no such directory"),
            ([dataset, "--resume", work] + FIXED, "no journal there to resume"),
            ([dataset, "--resume", out, "--save-outputs", os.path.join(work, "o.h5")] + FIXED, "--save-outputs"),
            ([dataset, "--resume", out, "-o", os.path.join(work, "elsewhere")] + FIXED, "names another directory"),
        ]:
            p = subprocess.run([PRECIS, "run"] + argv, capture_output=True, text=True, timeout=60)
            check(p.returncode == 2 and expected in p.stderr, "%r: exit %d: %s" % (expected, p.returncode, p.stderr))
        check(os.path.exists(os.path.join(work, "d.h5")) and not os.path.exists(os.path.join(work, ".precis-lock")),
              "--resume of a directory without a journal left a lock")
    if FAILURES:
        print("%d failures" % len(FAILURES))
        return 1
    print("resume: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
