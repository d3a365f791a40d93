"""The cpu backend's timing policy (docs/decisions.md): its timings are CPU timings of an emulation,
so `precis run` samples each case for at most 100 ms unless --max-time-ms says otherwise, and the
report says so (settings.max_time_ms, settings.timing_policy).

- without --max-time-ms on the cpu backend: max_time_ms is 100 and the policy names the cpu backend;
- every row's samples stop once the budget is spent: the samples before the last one took less than
  max_time_ms in all (the sampler may keep up to 3 samples however long they are);
- --max-time-ms given: that value is used, also on the cpu backend.
"""
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

PRECIS = os.environ["PRECIS"]
FAILURES = []

SUITE = """
seed: 3
workloads:
  - name: small
    m: 64
    n: 64
    k: 64
    a: normal
    b: normal
  - name: medium
    m: 192
    n: 160
    k: 256
    a: normal
    b: normal
"""


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(args):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
        raise SystemExit("precis %s: exit %d" % (" ".join(args), p.returncode))
    return p


def report(out):
    with open(os.path.join(out, "report.json"), encoding="utf-8") as fh:
        return json.load(fh)


def main():
    with scratch.TemporaryDirectory(prefix="precis-timing-policy-") as work:
        suite = os.path.join(work, "s.yaml")
        with open(suite, "w") as fh:
            fh.write(SUITE)
        data = os.path.join(work, "d.h5")
        run(["gen", suite, "-o", data, "-q"])

        out = os.path.join(work, "cpu-default")
        run(["run", data, "-o", out, "--backend", "cpu", "--recipes", "fp32,fp16acc16,int8", "--quiet"])
        doc = report(out)
        settings = doc["settings"]
        check(settings.get("max_time_ms") == 100, "cpu default budget: max_time_ms %r, expected 100" %
              settings.get("max_time_ms"))
        policy = settings.get("timing_policy", "")
        check("cpu backend" in policy and "not GPU figures" in policy, "timing_policy says why: %r" % policy)
        for row in doc["rows"]:
            samples = row["time"]["samples_ms"]
            calls = row["time"]["calls_per_sample"]
            before_last = sum(samples[:-1]) * calls
            check(len(samples) <= 3 or before_last < settings["max_time_ms"],
                  "%s/%s: %d samples, %.1f ms before the last one, past the %s ms budget" %
                  (row["workload"], row["recipe"], len(samples), before_last, settings["max_time_ms"]))

        out = os.path.join(work, "cpu-given")
        run(["run", data, "-o", out, "--backend", "cpu", "--recipes", "fp32", "--quiet", "--max-time-ms", "250"])
        settings = report(out)["settings"]
        check(settings.get("max_time_ms") == 250, "--max-time-ms 250 kept: %r" % settings.get("max_time_ms"))
        check("cpu backend" not in settings.get("timing_policy", ""), "a given budget is not the cpu default")

    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
