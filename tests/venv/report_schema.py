"""A report.json checked against docs/report-schema.json with the jsonschema of Debian's python3 (CI installs
python3-jsonschema; the venv does not need it). Outside CI a python3 without jsonschema is noted, not failed."""
import os
import subprocess
import sys

_VALIDATE = ("import json, sys, jsonschema; s = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2]));"
             "e = list(jsonschema.Draft202012Validator(s).iter_errors(d)); print([x.message[:300] for x in e]);"
             "sys.exit(1 if e else 0)")


def check_report_schema(report_json, check):
    """check(condition, message) is the calling test's own failure recorder."""
    schema = os.path.join(os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                          "docs", "report-schema.json")
    p = subprocess.run(["/usr/bin/python3", "-c", _VALIDATE, schema, report_json], capture_output=True, text=True)
    if "No module named 'jsonschema'" in p.stderr and os.environ.get("CI") != "true":
        print("note: /usr/bin/python3 has no jsonschema; report.json not validated here", file=sys.stderr)
    else:
        check(p.returncode == 0, f"{report_json} does not match docs/report-schema.json: {p.stdout[-800:]} {p.stderr[-300:]}")
