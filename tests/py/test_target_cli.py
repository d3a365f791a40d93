"""--target on the command line (issue 33): run records the target in every row and refuses or
emulates as the cuda backend would there; a bad architecture is a usage error; explain --target
prints each recipe's way and accumulator; recommend and plan --target keep that architecture's rows."""
import csv
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_fixtures as fx  # noqa: E402

PRECIS = fx.precis_binary()
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
failures = []


def precis(*args):
    return subprocess.run([PRECIS] + list(args), capture_output=True, text=True, timeout=300)


def check(cond, what, run=None):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if run is not None:
            print("stdout:\n%s\nstderr:\n%s" % (run.stdout[-2000:], run.stderr[-2000:]))


def main():
    with scratch.TemporaryDirectory() as tmp:
        suite = os.path.join(tmp, "s.yaml")
        with open(suite, "w") as f:
            f.write("seed: 1\ndescription: target\nworkloads:\n  - {name: small, m: 16, n: 32, k: 96}\n")
        ds = os.path.join(tmp, "d.h5")
        run = precis("gen", suite, "-o", ds)
        check(run.returncode == 0, "gen", run)

        rows = {}
        for target in ("sm_80", "sm_100"):
            out = os.path.join(tmp, target)
            run = precis("run", ds, "--recipes", "fp8,fp8-fast,nvfp4,bf16,int8-sq", "--target", target, "-o", out,
                         *FAST)
            check(run.returncode in (0, 3), "run --target %s: exit %d" % (target, run.returncode), run)
            doc = json.load(open(os.path.join(out, "report.json")))
            rows[target] = {r["recipe"]: r for r in doc["rows"]}
            check(all(r["target"] == target for r in doc["rows"]), "%s: every row records its target" % target)
            check(doc["settings"].get("target") == target, "%s: settings.target" % target)
            with open(os.path.join(out, "report.csv"), newline="") as f:
                csv_rows = list(csv.DictReader(f))
            check(all(r["target"] == target for r in csv_rows), "%s: report.csv target column" % target)
        r80 = rows["sm_80"]
        check(r80["fp8"]["status"] == "unsupported" and "sm_89" in r80["fp8"]["reason"],
              "sm_80 refuses fp8 as the cuda backend would: %s" % r80["fp8"].get("reason"))
        check(r80["fp8-fast"]["status"] == "unsupported", "sm_80 refuses fp8-fast")
        check(r80["nvfp4"]["status"] == "ok" and r80["nvfp4"]["details"]["target_way"] == "emulated",
              "sm_80 emulates nvfp4 (bf16 dequantization)")
        check(r80["int8-sq"]["status"] == "ok" and r80["int8-sq"]["details"]["target_way"] == "cpu-only",
              "int8-sq has no cuda route: cpu-only, run as before")
        check("24 fraction bits" in r80["bf16"]["details"]["accumulator"], "sm_80 bf16 row: 24 fraction bits")
        r100 = rows["sm_100"]
        check(r100["nvfp4"]["details"]["target_way"] == "native" and "35 fraction bits" in
              r100["nvfp4"]["details"]["accumulator"], "sm_100 nvfp4 native, 35 bits")
        check("25 fraction bits" in r100["fp8-fast"]["details"]["accumulator"], "sm_100 fp8-fast: 25 bits")
        run = precis("run", ds, "--recipes", "bf16", "--target", "sm_75", "-o", os.path.join(tmp, "bad"), *FAST)
        check(run.returncode == 2 and "--target" in run.stderr and "sm_100" in run.stderr,
              "run --target sm_75: usage error naming the choices", run)

        run = precis("explain", ds, "--target", "sm_100", "--recipes", "fp8-fast,nvfp4,mxfp8,mxfp4,fp8")
        check(run.returncode == 0, "explain --target sm_100", run)
        check(run.stdout.count("target_way             native") == 5 and "35 fraction bits" in run.stdout,
              "explain --target sm_100: five native plans with their accumulators", run)
        # Item 4 of issue 33: every new recipe's plan on sm_100, native or emulated, with its accumulator.
        run = precis("explain", ds, "--target", "sm_100", "--recipes", "fp8-block-ue8m0,mxfp6-e2m3,mxfp6-e3m2", "--json")
        check(run.returncode == 0, "explain --target sm_100 --json on the new recipes", run)
        cases = {c["recipe"]: c for c in json.loads(run.stdout)["cases"]} if run.returncode == 0 else {}
        ways = {r: (c["status"], c.get("plan", {}).get("target_way"), c.get("plan", {}).get("accumulator", ""))
                for r, c in cases.items()}
        check(ways.get("fp8-block-ue8m0", ("",))[:2] == ("native", "native") and
              "fp8 on sm_100: 25 fraction bits" in ways["fp8-block-ue8m0"][2], "fp8-block-ue8m0 native on sm_100: %s" % ways)
        check(all(ways.get(r, ("",))[:2] == ("emulated", "emulated") for r in ("mxfp6-e2m3", "mxfp6-e3m2")),
              "mxfp6 emulated on sm_100 (no cuBLASLt FP6 route): %s" % ways)
        run = precis("explain", ds, "--target", "sm_90", "--recipes", "nvfp4")
        check("target_way             emulated" in run.stdout, "explain --target sm_90: nvfp4 emulated", run)

        report80 = os.path.join(tmp, "sm_80", "report.json")
        run = precis("recommend", report80, "--target", "sm_100")
        check(run.returncode == 2 and "no rows for --target sm_100" in run.stderr, "recommend: no sm_100 rows", run)
        run = precis("recommend", report80, "--target", "sm_80")
        check(run.returncode in (0, 3) and "bf16" in run.stdout, "recommend --target sm_80", run)
        run = precis("recommend", report80, "--target", "sm_7")
        check(run.returncode == 2, "recommend --target sm_7: usage error", run)
        run = precis("plan", report80, "--target", "sm_100", "-o", os.path.join(tmp, "plan"))
        check(run.returncode == 2 and "no rows for --target sm_100" in run.stderr, "plan: no sm_100 rows", run)
    print("%d failed checks" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
