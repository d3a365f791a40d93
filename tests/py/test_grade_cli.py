"""precis grade (docs/high-precision.md, "BLAS-3 grading"): cuBLAS's grade_blas3 rule on the cpu
backend. Checks, on n = 16..1024 square GEMMs:
- the printed slope of every recipe is numpy.polyfit's degree-1 fit of (log n, log error) on the
  printed points (and the same for grade.json's full-precision points);
- fp64, ozaki-int8-8 and ozaki2-int8-16 (Ozaki scheme II, accurate, 16 moduli) have slope <= 1:
  Grade A, as the issue asks; the three are grade's default recipes (--help says so);
- bf16 is Grade A too, with an error of 2^42..2^45 eps at every n: the definition grades the growth
  of the componentwise error, not its size. bf16 rounds the uniform [0, 1) inputs (relative 2^-9
  each) and the output (2^-9), so the largest of n^2 errors is at least the output rounding's
  2^-10 relative (2^42 eps) and at most about 3 * 2^-9 (2^44.6 eps), at every n: a flat line;
- a slope > 1 is "not A" (the fit itself on synthetic power laws: tests/test_grading.c);
- grade.json and grade.md in -o DIR, refused without --force when they exist; bad input exits 2.
Runs with Debian's python3 + numpy; env PRECIS (binary). About 35 s idle, 60 s on a loaded machine."""
import json
import math
import os
import re
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_fixtures as fx  # noqa: E402

try:
    import numpy as np
except ImportError:
    print("numpy missing: skipped")
    sys.exit(77)

PRECIS = fx.precis_binary()
failures = []


def precis(*args):
    return subprocess.run([PRECIS, "grade"] + list(args), capture_output=True, text=True, timeout=600)


def check(cond, what, run=None):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if run is not None:
            print("stdout:\n%s\nstderr:\n%s" % (run.stdout[-3000:], run.stderr[-3000:]))


def parse_tables(text):
    """{recipe: (points [(n, k, error)], slope or None, grade)} from the printed tables."""
    out, name, points = {}, None, []
    for line in text.splitlines():
        m = re.match(r"^(\S+)  \((.*)\)$", line)
        if m:
            name, points = m.group(1), []
            continue
        m = re.match(r"^\s+(\d+)\s+(\d+)\s+(\S+)$", line)
        if m and name:
            points.append((int(m.group(1)), int(m.group(2)), float(m.group(3))))
            continue
        m = re.match(r"^slope (\S+) over (\d+) sizes: grade (.+)$", line)
        if m and name:
            slope = None if m.group(1) == "-" else float(m.group(1))
            out[name] = (points, slope, m.group(3))
            name = None
    return out


def polyfit_slope(points):
    pts = [(n, e) for n, _, e in points if e > 0 and math.isfinite(e)]
    x = np.log([float(n) for n, _ in pts])
    y = np.log([e for _, e in pts])
    return float(np.polyfit(x, y, 1)[0])


def main():
    recipes = ["fp64", "ozaki-int8-8", "ozaki2-int8-16", "bf16"]
    usage = precis("--help")
    check("default fp64,ozaki-int8-8,ozaki2-int8-16" in usage.stdout + usage.stderr,
          "grade --help: the default recipes fp64,ozaki-int8-8,ozaki2-int8-16", usage)
    with scratch.TemporaryDirectory() as tmp:
        out_dir = os.path.join(tmp, "g")
        run = precis("--recipes", ",".join(recipes), "-o", out_dir)
        check(run.returncode == 0, "grade fp64,ozaki-int8-8,ozaki2-int8-16,bf16 on 16..1024 runs", run)
        tables = parse_tables(run.stdout)
        check(sorted(tables) == sorted(recipes), "a table per recipe: %s" % sorted(tables), run)
        for name, (points, slope, grade) in tables.items():
            check([p[0] for p in points] == [16, 32, 64, 128, 256, 512, 1024] and all(p[0] == p[1] for p in points),
                  "%s: n = 16..1024 with k = n" % name)
            ref = polyfit_slope(points)
            check(slope is not None and abs(slope - ref) < 2e-6,
                  "%s: printed slope %s = numpy.polyfit %.6f" % (name, slope, ref))
            check(grade == ("A" if ref <= 1 else "not A"), "%s: grade %s follows the slope %.4f" % (name, grade, ref))
            print("     %s: errors/eps %s" % (name, ["%.3g" % p[2] for p in points]))
        for name in ("fp64", "ozaki-int8-8", "ozaki2-int8-16"):
            if name in tables:
                pts, slope, grade = tables[name]
                check(slope is not None and slope <= 1 and grade == "A", "%s: slope %s <= 1, Grade A" % (name, slope))
                # FP64-class: componentwise errors of a few eps, not growing past n eps.
                check(all(0 < e <= n for n, _, e in pts), "%s: 0 < error <= n eps at every n" % name)
        if "bf16" in tables:
            pts, slope, grade = tables["bf16"]
            check(grade == "A", "bf16: Grade A (a flat error does not grow), slope %s" % slope)
            check(all(2.0 ** 42 <= e <= 2.0 ** 45 for _, _, e in pts),
                  "bf16: error between 2^42 and 2^45 eps at every n (input and output rounding to bf16)")

        # grade.json: the same points at full precision, the same fit.
        path = os.path.join(out_dir, "grade.json")
        check(os.path.exists(path) and os.path.exists(os.path.join(out_dir, "grade.md")), "grade.json and grade.md")
        if os.path.exists(path):
            doc = json.load(open(path))
            for r in doc["recipes"]:
                pts = [(p["n"], p["k"], p["max_error"]) for p in r["points"]]
                ref = polyfit_slope(pts)
                check(abs(r["slope"] - ref) < 1e-9, "grade.json %s: slope %.12f = numpy.polyfit %.12f"
                      % (r["name"], r["slope"], ref))
                printed = tables.get(r["name"])
                if printed:
                    check(all(abs(a[2] - b[2]) <= 1e-8 * b[2] for a, b in zip(printed[0], pts)),
                          "grade.json %s: the printed points" % r["name"])
            leftovers = [f for f in os.listdir(out_dir) if f not in ("grade.json", "grade.md")]
            check(not leftovers, "no temporary files left in DIR: %s" % leftovers)
        again = precis("--recipes", "fp64", "--n", "16,32", "-o", out_dir)
        check(again.returncode == 2 and "--force" in again.stderr, "existing grade.json refused without --force", again)
        forced = precis("--recipes", "fp64", "--n", "16,32", "-o", out_dir, "--force")
        check(forced.returncode == 0 and len(json.load(open(path))["recipes"]) == 1, "--force replaces them", forced)

        # --k fixes the inner dimension; --trials takes the largest error over draws.
        fixed = precis("--recipes", "fp64", "--n", "16,32,64", "--k", "48", "--trials", "2", "--seed", "7")
        t = parse_tables(fixed.stdout).get("fp64")
        check(fixed.returncode == 0 and t is not None and all(p[1] == 48 for p in t[0]), "--k 48 --trials 2", fixed)

        for args, what in [
            (["--n", "64"], "one size"),
            (["--n", "64,64"], "no two distinct sizes"),
            (["--n", "16..x"], "a bad range"),
            (["--n", "0,16"], "a zero size"),
            (["--k", "-3"], "a negative k"),
            (["--trials", "0"], "zero trials"),
            (["--seed", "-1"], "a negative seed"),
            (["--recipes", "no-such-recipe"], "an unknown recipe"),
            (["--recipes", "int8", "--n", "16,32", "extra"], "an operand"),
            (["--recipes", "fp64-emu", "--n", "16,32"], "a recipe the cpu backend does not run"),
            (["--recipes", "a=s8@tensor,b=s8@col,acc=s32,scale=absmax", "--n", "16,32"], "a recipe needing calibration"),
            (["--nn", "16,32"], "an unknown option"),
        ]:
            bad = precis(*args)
            check(bad.returncode == 2 and "precis grade" in bad.stderr and "Traceback" not in bad.stderr,
                  "refused with exit 2: %s (%s)" % (what, bad.stderr.strip().splitlines()[-1:] if bad.stderr else ""),
                  bad)

    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all grade checks passed")


if __name__ == "__main__":
    main()
