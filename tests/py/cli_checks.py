"""The check/run pair the tests that drive the precis binary share (the model tests first): a
failed check is recorded in FAILURES and printed, and the test goes on to report every failure;
a precis command whose exit code is not the one expected ends the test with its output."""
import os
import subprocess
import sys

PRECIS = os.environ["PRECIS"]
FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(args, expect=0):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True)
    if expect is not None and p.returncode != expect:
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}")
    return p
