#!/usr/bin/env python3
"""Applies small deliberate bugs (mutations) to the sources one at a time, rebuilds, runs the tests
expected to catch each, and reports which were caught, which survived and which are stale.

    /usr/bin/python3 tests/mutation/run_mutations.py [--build DIR] [--list FILE] [--only NAME ...]

The list (default tests/mutation/mutations.txt) holds blocks:

    @@ name
    file: src/eval/cpu_backend.c          (relative to the repository root)
    tests: py_test_float_recipes test_x   (ctest names, run as an exact-name -R filter)
    <<<
    original text, exact, once in the file
    ===
    replacement text
    >>>

A mutation whose original text is not in the file (the code was refactored) is reported as stale,
not as an error; text found more than once is reported as ambiguous. Neither is applied.

Restoring: before a file is modified its original bytes are written next to it as FILE.mutation-orig;
they are written back in a `finally`, on SIGINT/SIGTERM, and, if a previous run was killed outright
(SIGKILL, power loss), at the start of the next run. A mutation that does not compile is reported as
build-failed (a broken mutation, not a caught bug). The build directory must already be configured.

Exit status: 0 when every applied mutation was caught, 1 when any survived or failed to build,
2 on usage errors. Not run in CI (each mutation rebuilds and runs tests: minutes each).
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BACKUP_SUFFIX = ".mutation-orig"


def parse(path):
    muts, cur, mode = [], None, None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for lineno, line in enumerate(lines, 1):
        if mode in ("orig", "repl"):
            if line == "===" and mode == "orig":
                mode = "repl"
                continue
            if line == ">>>" and mode == "repl":
                mode = None
                continue
            if line.startswith("@@ "):  # a block left open would swallow this one as its text
                raise SystemExit(f"{path}:{lineno}: block {cur['name']!r} (line {cur['line']}) is not closed with >>> "
                                 f"before the next block")
            cur[mode].append(line)
            continue
        if line.startswith("@@ "):
            cur = {"name": line[3:].strip(), "file": None, "tests": [], "orig": [], "repl": [], "line": lineno}
            muts.append(cur)
        elif line.startswith("file:") and cur:
            cur["file"] = line[5:].strip()
        elif line.startswith("tests:") and cur:
            cur["tests"] = line[6:].split()
        elif line == "<<<" and cur:
            mode = "orig"
        elif line.strip() and not line.startswith("#"):
            raise SystemExit(f"{path}:{lineno}: unexpected line {line!r}")
    if mode is not None:
        raise SystemExit(f"{path}: the last block is not closed with >>>")
    for m in muts:
        if not m["file"] or not m["tests"] or not m["orig"]:
            raise SystemExit(f"{path}:{m['line']}: mutation {m['name']!r} needs file:, tests: and <<< text ===")
        m["orig"] = "\n".join(m["orig"])
        m["repl"] = "\n".join(m["repl"])
    return muts


def restore_leftovers():
    """Writes back originals left by a run that was killed before it could restore them."""
    for d, _, files in os.walk(ROOT):
        if "/.git" in d or "/build" in d:
            continue
        for name in files:
            if name.endswith(BACKUP_SUFFIX):
                backup = os.path.join(d, name)
                target = backup[: -len(BACKUP_SUFFIX)]
                with open(backup, "rb") as f:
                    data = f.read()
                with open(target, "wb") as f:
                    f.write(data)
                os.remove(backup)
                print(f"restored {os.path.relpath(target, ROOT)} from a previous interrupted run", file=sys.stderr)


class Applied:
    """The mutated file, restored from its original bytes on exit, exception or signal."""

    def __init__(self, path, original):
        self.path, self.original = path, original

    def __enter__(self):
        with open(self.path + BACKUP_SUFFIX, "wb") as f:
            f.write(self.original)
            f.flush()
            os.fsync(f.fileno())
        return self

    def restore(self):
        with open(self.path, "wb") as f:
            f.write(self.original)
        if os.path.exists(self.path + BACKUP_SUFFIX):
            os.remove(self.path + BACKUP_SUFFIX)

    def __exit__(self, *exc):
        self.restore()
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--list", default=os.path.join(ROOT, "tests", "mutation", "mutations.txt"))
    ap.add_argument("--only", nargs="*", help="run only the mutations with these names")
    ap.add_argument("--jobs", default="2")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.build, "CTestTestfile.cmake")):
        print(f"run_mutations: {args.build} is not a configured build directory", file=sys.stderr)
        return 2
    muts = parse(args.list)
    if args.only:
        unknown = set(args.only) - {m["name"] for m in muts}
        if unknown:
            print(f"run_mutations: no mutation named {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        muts = [m for m in muts if m["name"] in args.only]

    # A signal becomes an exception, so that the `with` block restores the file before exiting.
    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    restore_leftovers()

    results = []
    for m in muts:
        path = os.path.join(ROOT, m["file"])
        t0 = time.time()
        if not os.path.exists(path):
            results.append((m, "stale", "file not found"))
            print(f"[stale]     {m['name']}: {m['file']} does not exist", flush=True)
            continue
        with open(path, "rb") as f:
            original = f.read()
        text = original.decode("utf-8")
        count = text.count(m["orig"])
        if count != 1:
            verdict = "stale" if count == 0 else "ambiguous"
            results.append((m, verdict, f"original text found {count} times"))
            print(f"[{verdict}] {m['name']}: original text found {count} times in {m['file']}", flush=True)
            continue
        with Applied(path, original):
            with open(path, "wb") as f:
                f.write(text.replace(m["orig"], m["repl"]).encode("utf-8"))
            b = subprocess.run(["nice", "cmake", "--build", args.build, "-j", args.jobs], capture_output=True, text=True)
            if b.returncode != 0:
                verdict, detail = "build-failed", b.stdout[-400:] + b.stderr[-400:]
            else:
                regex = "^(" + "|".join(m["tests"]) + ")$"
                listing = subprocess.run(["ctest", "-N", "-R", regex], cwd=args.build, capture_output=True, text=True)
                # ctest pads the number: "Test  #8:" below 10, "Test #12:" above.
                found = sum(1 for line in listing.stdout.splitlines() if re.match(r"\s*Test\s+#\d+:", line))
                if found != len(m["tests"]):
                    verdict, detail = "bad-test-name", f"{found} of {len(m['tests'])} tests exist: {m['tests']}"
                else:
                    t = subprocess.run(["nice", "ctest", "-R", regex, "--no-tests=error", "-j", args.jobs],
                                       cwd=args.build, capture_output=True, text=True)
                    failed = [l.strip() for l in t.stdout.splitlines() if "***Failed" in l or "(Failed)" in l
                              or "***Timeout" in l or "Exception" in l]
                    verdict = "caught" if t.returncode != 0 else "survived"
                    detail = "; ".join(failed[:3]) if failed else ""
        # The restored file needs the objects rebuilt before the next mutation: the next build does it.
        results.append((m, verdict, detail))
        print(f"[{verdict}] {m['name']} ({m['file']}; {' '.join(m['tests'])}) {time.time() - t0:.0f}s"
              + (f": {detail}" if detail and verdict != "caught" else ""), flush=True)

    # Leave the build matching the restored sources.
    subprocess.run(["nice", "cmake", "--build", args.build, "-j", args.jobs], capture_output=True)
    counts = {}
    for _, v, _ in results:
        counts[v] = counts.get(v, 0) + 1
    applied = counts.get("caught", 0) + counts.get("survived", 0)
    print("\nmutation score: %d caught of %d applied (%s)" % (
        counts.get("caught", 0), applied, ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))))
    for m, v, _ in results:
        if v != "caught":
            print(f"  {v}: {m['name']} ({m['file']})")
    bad = counts.get("survived", 0) + counts.get("build-failed", 0) + counts.get("bad-test-name", 0)
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\nrun_mutations: interrupted; the mutated file was restored", file=sys.stderr)
        sys.exit(130)
