"""`precis run --resume DIR` finishes the run that was started (issue 38, docs/robustness.md).

A run started with a recipe list and other options that decide its rows is killed (SIGKILL, and
SIGTERM on a shard) part-way; `precis run --resume DIR` without FILE.h5 or any option finishes it:
the report holds exactly the started recipes and workloads, with the started run's settings, and
the kept cases are not measured again. Options given again must agree with the journal: one that
agrees is accepted; those that differ are refused with exit 2, in one message naming each option
with the journal's and this run's value, and the directory is left as it was."""
import json
import os
import signal
import subprocess
import sys
import time

import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
from cli_checks import FAILURES, PRECIS, check

RECIPES = ["fp32", "fp16", "bf16", "int8", "fp8"]
# Each case samples for >= 60 ms, so that the signal lands in the middle of the run.
SLOW = ["--min-samples", "3", "--max-samples", "1000000", "--max-time-ms", "60", "--target-spread", "0"]


def read(path):
    with open(path) as fh:
        return fh.read()


def rows_journaled(path):
    return read(path).count("\n") - 1 if os.path.exists(path) else 0


def kill_part_way(argv, journal, sig, at_least):
    proc = subprocess.Popen([PRECIS, "run"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while rows_journaled(journal) < at_least and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    ended_early = proc.poll() is not None
    check(not ended_early, "%s: the run ended before it was stopped" % sig.name)
    if ended_early:
        print(proc.stderr.read())
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    kept = rows_journaled(journal)
    check(proc.returncode in (-sig, 128 + sig), "%s: exit %s: %s" % (sig.name, proc.returncode, err))
    return kept


def snapshot(out):
    return {f: open(os.path.join(out, f), "rb").read() for f in sorted(os.listdir(out)) if f != ".precis-lock"}


def check_finished(what, out, journal_name, kept, workloads, settings_of_run):
    report = json.loads(read(os.path.join(out, "report.json")))
    header = json.loads(read(os.path.join(out, journal_name)).split("\n")[0])
    check(report["complete"] is True, "%s: the resumed report is incomplete" % what)
    check(report["settings"]["recipes"] == RECIPES,
          "%s: report recipes %r, started %r" % (what, report["settings"]["recipes"], RECIPES))
    cases = [(r["workload"], r["recipe"]) for r in report["rows"]]
    check(sorted(cases) == sorted((w, r) for w in workloads for r in RECIPES),
          "%s: the report's cases are not exactly the started ones: %r" % (what, cases))
    check(report["environment"].get("resumed_cases_kept") == kept,
          "%s: resumed_cases_kept %r, the journal had %d" % (what, report["environment"].get("resumed_cases_kept"), kept))
    for key, value in settings_of_run.items():
        check(report["settings"].get(key) == value, "%s: settings.%s = %r, the run was started with %r"
              % (what, key, report["settings"].get(key), value))
        check(header["settings"].get(key) == value, "%s: journal settings.%s = %r" % (what, key, header["settings"].get(key)))


def main():
    work = scratch.mkdtemp(prefix="precis-resume-options-")
    suite = os.path.join(work, "s.yaml")
    with open(suite, "w") as fh:
        fh.write("seed: 7\nworkloads:\n")
        for i in range(4):
            fh.write("  - {name: w%02d, m: 40, n: 36, k: 48, batch: 2}\n" % i)
    dataset = os.path.join(work, "d.h5")
    subprocess.run([PRECIS, "gen", suite, "-o", dataset, "-q"], check=True, stdout=subprocess.DEVNULL)

    # 1. SIGKILL, a run in one part with criteria, a workload selection, a target, an int8 scale.
    out = os.path.join(work, "killed")
    journal = os.path.join(out, "journal.jsonl")
    started = [dataset, "-o", out, "--backend", "cpu", "--recipes", ",".join(RECIPES), "--workloads", "w00,w01,w03",
               "--require", "rel_fro<=0.5", "--percentile", "99.9", "--target", "sm_89", "--quiet"] + SLOW
    kept = kill_part_way(started, journal, signal.SIGKILL, 4)
    check(4 <= kept < 15, "SIGKILL: %d rows journaled" % kept)
    p = subprocess.run([PRECIS, "run", "--resume", out], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "SIGKILL: `run --resume DIR` exited %d: %s" % (p.returncode, p.stderr))
    check("%d cases kept from the journal, %d run now" % (kept, 15 - kept) in p.stderr,
          "SIGKILL: the resume does not say what it kept: %s" % p.stderr)
    check_finished("SIGKILL", out, "journal.jsonl", kept, ["w00", "w01", "w03"],
                   {"backend": "cpu", "criteria": ["rel_fro<=0.5"], "percentile": 99.9, "target": "sm_89",
                    "min_samples": 3, "max_time_ms": 60, "target_rel_spread": 0, "gate": "true"})
    print("SIGKILL: `run --resume DIR` finished the run with its recipes, workloads and settings (%d kept)" % kept)

    # 2. SIGTERM on shard 2 of 2 with --gate and the cpu's own sampling budget.
    out = os.path.join(work, "stopped")
    journal_name = "journal.part-0002-of-0002.jsonl"
    journal = os.path.join(out, journal_name)
    started = [dataset, "-o", out, "--backend", "cpu", "--recipes", ",".join(RECIPES), "--shard", "2/2", "--gate",
               "--min-samples", "3", "--max-samples", "1000000", "--target-spread", "0", "--quiet"]
    kept = kill_part_way(started, journal, signal.SIGTERM, 2)
    header = json.loads(read(journal).split("\n")[0])
    shard_cases = header["settings"]["shard"]["cases"] if isinstance(header["settings"].get("shard"), dict) else None
    check(json.loads(read(os.path.join(out, "report.json")))["complete"] is False, "SIGTERM: the report is not incomplete")

    # Options given again that differ are refused, each named with both values, and nothing changes.
    before = snapshot(out)
    p = subprocess.run([PRECIS, "run", "--resume", out, "--recipes", "fp32,fp16", "--min-samples", "4", "--target",
                        "sm_90", "--backend", "cpu", "--quiet"], capture_output=True, text=True, timeout=60)
    err = p.stderr.strip()
    check(p.returncode == 2 and len(err.splitlines()) == 1, "refusal: exit %d: %s" % (p.returncode, err))
    for said in ("cannot resume a different run",
                 "--recipes: the journal has fp32,fp16,bf16,int8,fp8, this run fp32,fp16",
                 "--min-samples: the journal has 3, this run 4",
                 "--target: the journal has none (the default), this run sm_90"):
        check(said in err, "refusal: expected %r in: %s" % (said, err))
    check("--backend" not in err, "refusal: --backend cpu agrees with the journal but is named: %s" % err)
    check(snapshot(out) == before, "refusal: the directory changed")
    for argv, said in ((["--workloads", "w00"], "--workloads: the journal has all, this run w00"),
                       (["--max-time-ms", "100"], "--max-time-ms: the journal has none (the cpu backend's budget, 100 ms), this run 100"),
                       (["--require", "rel_fro<=1"], "--require: the journal has none, this run rel_fro<=1"),
                       (["--cold"], "--cold: the journal has false, this run true"),
                       (["--percentile", "99"], "--percentile: the journal has 99.99, this run 99")):
        p = subprocess.run([PRECIS, "run", "--resume", out] + argv, capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and said in p.stderr, "refusal %r: exit %d: %s" % (argv, p.returncode, p.stderr))
    check(snapshot(out) == before, "refusals: the directory changed")
    print("SIGTERM: differing options refused, each named with both values; the directory unchanged")

    # Options that agree are accepted; the rest (the shard, --gate, the budget) come from the journal.
    p = subprocess.run([PRECIS, "run", "--resume", out, "--recipes", ",".join(RECIPES), "--min-samples", "3",
                        "--backend", "cpu", "--quiet"], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "SIGTERM: the agreeing resume exited %d: %s" % (p.returncode, p.stderr))
    total = rows_journaled(journal)
    check(shard_cases is None or total == shard_cases, "SIGTERM: %d rows, the shard has %r cases" % (total, shard_cases))
    report = json.loads(read(os.path.join(out, "report.json")))
    check(report["complete"] is True and report["settings"]["recipes"] == RECIPES and len(report["rows"]) == total,
          "SIGTERM: the resumed shard's report: complete %r, recipes %r, %d rows of %d"
          % (report["complete"], report["settings"]["recipes"], len(report["rows"]), total))
    check(report["settings"].get("gate") == "true" and report["settings"]["timing_policy"].startswith("cpu backend"),
          "SIGTERM: gate %r, timing_policy %r" % (report["settings"].get("gate"), report["settings"]["timing_policy"]))
    print("SIGTERM: agreeing options accepted; the shard finished with %d cases (%d kept)" % (total, kept))

    if FAILURES:
        print("%d failures" % len(FAILURES))
        return 1
    print("resume takes the journal's options: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
