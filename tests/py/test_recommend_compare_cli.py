"""`precis recommend` and `precis compare` from the command line on crafted reports: output, exit
codes (0 / 3 / 2), the closest miss, --per-workload, --json, and errors that name the file and key."""
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_fixtures as fx  # noqa: E402

PRECIS = fx.precis_binary()
failures = []


def precis(*args):
    return subprocess.run([PRECIS] + list(args), capture_output=True, text=True, timeout=60)


def check(cond, what, run=None):
    if not cond:
        failures.append(what)
        if run is not None:
            print("--- %s\nstdout:\n%s\nstderr:\n%s" % (what, run.stdout, run.stderr))


def main():
    if not os.path.exists(PRECIS):
        print("FAIL: precis binary not found at %s" % PRECIS)
        return 1
    with scratch.TemporaryDirectory() as tmp:
        base = fx.write(os.path.join(tmp, "base.json"), fx.report(fx.standard_rows()))

        run = precis("recommend", base, "--require", "rel_fro<=1e-2", "--tie-threshold", "0")
        check(run.returncode == 0, "recommend: exit %d, expected 0" % run.returncode, run)
        check("recommendation: bf16" in run.stdout, "recommend: bf16 is the known winner", run)
        check("batched: rel_fro=0.02 > 0.01 (2x the limit)" in run.stdout, "recommend: int8's failing evidence", run)
        check("Pareto frontier" in run.stdout, "recommend: frontier printed", run)

        run = precis("recommend", base, "--require", "rel_fro<=1e-8")
        check(run.returncode == 3, "recommend none passing: exit %d, expected 3" % run.returncode, run)
        check("closest miss: fp32, off by a factor 12" in run.stdout, "recommend: closest miss and margin", run)

        run = precis("recommend", base, "--require", "rel_fro<=1e-2", "--tie-threshold", "0", "--per-workload", "--json")
        check(run.returncode == 0, "recommend --per-workload --json: exit %d" % run.returncode, run)
        try:
            doc = json.loads(run.stdout)
            picks = {w["workload"]: w["recommended"] for w in doc["per_workload"]}
            check(picks == {"square-256": "int8", "tall-skinny": "int8", "batched": "bf16"},
                  "per-workload picks: %s" % picks)
        except (ValueError, KeyError) as e:
            check(False, "recommend --json output is not the expected JSON: %s" % e, run)

        run = precis("recommend", base, "--require", "rel_fro<=1e-2", "--objective", "memory")
        check(run.returncode == 0 and "recommendation: int8" not in run.stdout and "recommendation: fp16" in run.stdout,
              "recommend --objective memory: fp16 (bf16 ties on bytes, fp16 has the lower error)", run)

        run = precis("recommend", base, "--require", "rel_fro<=")
        check(run.returncode == 2, "recommend bad --require: exit %d, expected 2" % run.returncode, run)

        # compare: a report with itself
        run = precis("compare", base, base)
        check(run.returncode == 0, "compare self: exit %d, expected 0" % run.returncode, run)
        check("No regression" in run.stdout, "compare self: says no regression", run)

        # one recipe's rel_fro 10x worse
        doc = fx.report(fx.standard_rows())
        for row in doc["rows"]:
            if row["workload"] == "tall-skinny" and row["recipe"] == "fp16":
                row["error"]["rel_fro"]["worst"] *= 10
        worse = fx.write(os.path.join(tmp, "worse.json"), doc)
        out_json = os.path.join(tmp, "cmp.json")
        run = precis("compare", base, worse, "--json", out_json)
        check(run.returncode == 3, "compare rel_fro 10x: exit %d, expected 3" % run.returncode, run)
        check("| tall-skinny | fp16 | accuracy | rel\\_fro worst" in run.stdout, "compare names the row", run)
        try:
            cmp = json.load(open(out_json))
            regressions = [c for c in cmp["changes"] if c["regression"]]
            check(len(regressions) == 1 and regressions[0]["recipe"] == "fp16" and regressions[0]["what"] == "rel_fro",
                  "compare --json: one rel_fro regression on fp16, found %s" % regressions)
        except (OSError, ValueError, KeyError) as e:
            check(False, "compare --json file: %s" % e)

        # a timing change inside the noise
        doc = fx.report(fx.standard_rows())
        for row in doc["rows"]:
            if row["recipe"] == "bf16":
                row["time"]["median_ms"] *= 1.03
        noisy = fx.write(os.path.join(tmp, "noisy.json"), doc)
        run = precis("compare", base, noisy)
        check(run.returncode == 0, "compare timing in the noise: exit %d, expected 0" % run.returncode, run)
        # ... and one beyond it, then accepted by a larger threshold
        for row in doc["rows"]:
            if row["recipe"] == "bf16" and row["workload"] == "batched":
                row["time"]["median_ms"] = row["time"]["median_ms"] / 1.03 * 1.5
        slow = fx.write(os.path.join(tmp, "slow.json"), doc)
        run = precis("compare", base, slow)
        check(run.returncode == 3 and "| batched | bf16 | speed |" in run.stdout, "compare 50% slower: exit 3", run)
        run = precis("compare", base, slow, "--time-threshold", "60")
        check(run.returncode == 0, "compare --time-threshold 60: exit %d, expected 0" % run.returncode, run)

        # bad input names the file and the key
        doc = fx.report(fx.standard_rows())
        doc["rows"][2]["time"]["p95_ms"] = "slow"
        bad = fx.write(os.path.join(tmp, "bad.json"), doc)
        run = precis("compare", base, bad)
        check(run.returncode == 2, "compare bad report: exit %d, expected 2" % run.returncode, run)
        check("bad.json" in run.stderr and "rows[2].time.p95_ms" in run.stderr, "error names file and key", run)
        # a criterion on a logit metric that no row carries judges nothing: refused, not passed
        run = precis("recommend", base, "--require", "top1_agree>=0.99")
        check(run.returncode == 2 and "--require top1_agree>=0.99 judges no row" in run.stderr
              and "base.json" in run.stderr, "recommend top1_agree on a report without logit rows: exit 2", run)
        run = precis("plan", base, "--require", "kl_mean<=0.01", "-o", os.path.join(tmp, "plan-kl"))
        check(run.returncode == 2 and "--require kl_mean<=0.01 judges no row" in run.stderr
              and not os.path.exists(os.path.join(tmp, "plan-kl")), "plan kl_mean on a report without logit rows: exit 2", run)
        run = precis("recommend", os.path.join(tmp, "missing.json"))
        check(run.returncode == 2 and "missing.json" in run.stderr, "recommend missing file: exit 2 naming it", run)

    for f in failures:
        print("FAIL:", f)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
