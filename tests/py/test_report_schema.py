"""report.json validated against docs/report-schema.json (JSON Schema 2020-12) with jsonschema:

- reports of `precis run` on the cpu backend covering ok rows of every recipe, a failed row
  (PRECIS_FAULT_INJECT), non-finite outputs with a failing gate, static int8 scales and criteria;
- the schema itself is valid, and it is not vacuous: reports broken on purpose (a required key
  removed, a wrong type, an unknown status) are rejected.

jsonschema comes from Debian's python3-jsonschema (cmake/debian-packages.txt). Without it the test
is skipped (77), except under CI (CI=true, set by .ci/run), where a missing validator is a failure:
the schema must be checked there.
"""
import copy
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

try:
    import jsonschema
except ImportError:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        print("FAIL: python3-jsonschema is not installed, and CI must validate report.json against its schema")
        sys.exit(1)
    print("skipped: python3-jsonschema is not installed (apt-get install python3-jsonschema)")
    sys.exit(77)

PRECIS = os.environ["PRECIS"]
SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
FAILURES = []
FAST = ["--min-samples", "2", "--max-samples", "2", "--max-time-ms", "2", "--quiet"]

SUITE = """
seed: 11
workloads:
  - {name: normal, m: 8, n: 12, k: 32, batch: 2, calib: 2, a: normal, b: normal}
  - {name: overflow, m: 4, n: 4, k: 64, batch: 1, a: {dist: uniform, lo: 200, hi: 300}, b: {dist: uniform, lo: 200, hi: 300}}
"""


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(args, expect, env=None):
    full = dict(os.environ)
    full.update(env or {})
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True, env=full)
    if p.returncode not in expect:
        print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}")
    return p


def errors(validator, doc):
    return sorted(validator.iter_errors(doc), key=lambda e: list(e.path))


def main():
    with open(os.path.join(SOURCE, "docs", "report-schema.json")) as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)
    tmp = scratch.mkdtemp(prefix="precis-schema-")
    suite = os.path.join(tmp, "suite.yaml")
    with open(suite, "w") as f:
        f.write(SUITE)
    ds = os.path.join(tmp, "d.h5")
    run(["gen", suite, "-o", ds, "-q"], (0,))
    reports = {
        "all recipes, default gates": (["run", ds, "--backend", "cpu", "--recipes", "all"], (0, 3), None),
        "a failed row": (["run", ds, "--backend", "cpu", "--recipes", "fp32,bf16", "--workloads", "normal"], (1,),
                         {"PRECIS_FAULT_INJECT": "normal:fp32"}),
        "static int8 and criteria": (["run", ds, "--backend", "cpu", "--recipes", "int8", "--workloads", "normal",
                                      "--int8-act-scale", "mse", "--require", "rel_fro<=0.05",
                                      "--require", "sqnr_db>=20"], (0, 3), None),
    }
    valid = None
    for label, (args, expect, env) in reports.items():
        out = os.path.join(tmp, label.replace(" ", "-").replace(",", ""))
        run(args + ["-o", out] + FAST, expect, env)
        with open(os.path.join(out, "report.json")) as f:
            doc = json.load(f)
        check(len(doc.get("rows", [])) > 0, f"{label}: report has rows")
        errs = errors(validator, doc)
        check(not errs, f"{label}: report.json does not match the schema: " +
              "; ".join(f"{list(e.path)}: {e.message}" for e in errs[:5]))
        statuses = {r["status"] for r in doc["rows"]}
        if label == "a failed row":
            check("failed" in statuses, f"{label}: statuses {statuses}")
        if label == "all recipes, default gates":
            check(any(r["error"]["nonfinite"] and r["error"]["nonfinite"]["worst"] for r in doc["rows"]),
                  "the overflow workload has non-finite outputs")
            valid = doc

    # The schema rejects broken reports (so that the check above can fail).
    if valid:
        broken = []
        d = copy.deepcopy(valid)
        del d["rows"]
        broken.append(("rows removed", d))
        d = copy.deepcopy(valid)
        d["format_version"] = "1"
        broken.append(("format_version a string", d))
        d = copy.deepcopy(valid)
        d["rows"][0]["status"] = "fine"
        broken.append(("unknown row status", d))
        d = copy.deepcopy(valid)
        d["rows"][0]["error"]["rel_fro"] = {"worst": "small"}
        broken.append(("a metric value of the wrong type", d))
        for label, doc in broken:
            check(bool(errors(validator, doc)), f"the schema accepts a report with {label}")
    else:
        check(False, "no valid report to break")

    passed = 1 if not FAILURES else 0
    print(f"{passed} passed, {1 - passed} failed ({len(FAILURES)} failed checks)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
