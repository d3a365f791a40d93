"""Output safety (docs/robustness.md): an existing report or dataset is never replaced without
--force (gen, import, run -o, run --save-outputs, accept -o, compare --json/--markdown); files are
written under a temporary name and renamed, so no temporary file survives; a write error (here a
file size limit, RLIMIT_FSIZE as `ulimit -f` sets it, with SIGXFSZ at its default action so that
precis itself must ignore it) gives exit 1 and one clear line naming the file, and leaves the
earlier file intact."""
import os
import resource
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

PRECIS = os.environ["PRECIS"]
FAILURES = []
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")
FAST = ["--backend", "cpu", "--min-samples", "1", "--max-samples", "2", "--max-time-ms", "1", "--quiet"]


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)


def run(argv, cwd, fsize=None):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    # restore_signals (the default) leaves SIGXFSZ at its default action (terminate) in the child.
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=300,
                       preexec_fn=limit if fsize else None)
    check(p.returncode >= 0, "%s: killed by signal %d" % (" ".join(argv[1:3]), -p.returncode))
    check(not any(m in p.stderr for m in SANITIZER_MARKS), "%s: sanitizer report: %s" % (argv[1], p.stderr))
    return p


def snapshot(paths):
    out = {}
    for p in paths:
        with open(p, "rb") as fh:
            out[p] = fh.read()
    return out


def temporaries(*dirs):
    return [os.path.join(d, f) for d in dirs for f in os.listdir(d) if ".tmp-" in f]


def refused_without_force(name, argv, cwd, protected):
    before = snapshot(protected)
    p = run(argv, cwd)
    check(p.returncode == 2, "%s without --force: exit %d, expected 2 (%s)" % (name, p.returncode, p.stderr))
    check("--force" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          "%s without --force: expected one line that mentions --force, got %r" % (name, p.stderr))
    check(snapshot(protected) == before, "%s without --force changed %s" % (name, ", ".join(protected)))
    print("%-24s refused without --force: %s" % (name, p.stderr.strip()))


def main():
    with scratch.TemporaryDirectory(prefix="precis-output-safety-") as work:
        suite = os.path.join(work, "s.yaml")
        with open(suite, "w") as fh:
            fh.write("workloads:\n  - {name: w, m: 16, n: 16, k: 32, batch: 2}\n  - {name: v, m: 8, n: 8, k: 16}\n")
        big_suite = os.path.join(work, "big.yaml")
        with open(big_suite, "w") as fh:
            fh.write("workloads:\n  - {name: w, m: 64, n: 64, k: 64, batch: 4}\n")
        dataset = os.path.join(work, "d.h5")
        check(run([PRECIS, "gen", suite, "-o", dataset, "-q"], work).returncode == 0, "gen failed")
        reports = os.path.join(work, "r")
        p = run([PRECIS, "run", dataset, "-o", reports, "--recipes", "fp32,int8", "--save-outputs",
                 os.path.join(work, "out.h5")] + FAST, work)
        check(p.returncode == 0, "run failed: %s" % p.stderr)
        report_files = [os.path.join(reports, f) for f in ("report.json", "report.csv", "report.md", "report.html")]

        # --- nothing replaced without --force ----------------------------------------------------
        refused_without_force("gen -o", [PRECIS, "gen", suite, "-o", dataset, "-q"], work, [dataset])
        refused_without_force("import -o", [PRECIS, "import", "--b", dataset + ":/workloads/w/b", "-o", dataset, "-q"],
                              work, [dataset])
        refused_without_force("run -o", [PRECIS, "run", dataset, "-o", reports, "--recipes", "fp32"] + FAST, work,
                              report_files)
        refused_without_force("run --save-outputs", [PRECIS, "run", dataset, "-o", os.path.join(work, "r2"), "--recipes",
                              "fp32", "--save-outputs", os.path.join(work, "out.h5")] + FAST, work,
                              [os.path.join(work, "out.h5")])
        check(not os.path.exists(os.path.join(work, "r2", "report.json")), "run --save-outputs refused, yet reports written")
        cmp_json, cmp_md = os.path.join(work, "c.json"), os.path.join(work, "c.md")
        p = run([PRECIS, "compare", report_files[0], report_files[0], "--json", cmp_json, "--markdown", cmp_md], work)
        check(p.returncode == 0, "compare failed: %s" % p.stderr)
        refused_without_force("compare --json", [PRECIS, "compare", report_files[0], report_files[0], "--json", cmp_json],
                              work, [cmp_json])
        refused_without_force("compare --markdown", [PRECIS, "compare", report_files[0], report_files[0], "--markdown",
                              cmp_md], work, [cmp_md])
        accept_dir = os.path.join(work, "acc")
        accept = [PRECIS, "accept", dataset, "-o", accept_dir, "--workload", "v", "--max-batch", "1", "--repeats", "1",
                  "--backend", "cpu", "--min-samples", "1", "--max-samples", "2", "--max-time-ms", "1", "--quiet"]
        p = run(accept, work)
        check(p.returncode in (0, 3), "accept failed: %s" % p.stderr)
        accept_files = [os.path.join(accept_dir, f) for f in os.listdir(accept_dir)]
        check(accept_files, "accept wrote nothing")
        refused_without_force("accept -o", accept, work, accept_files)

        # --force replaces, through a temporary name.
        for argv in ([PRECIS, "gen", suite, "-o", dataset, "-q", "--force"],
                     [PRECIS, "run", dataset, "-o", reports, "--recipes", "fp32", "--force"] + FAST,
                     [PRECIS, "compare", report_files[0], report_files[0], "--json", cmp_json, "--force"]):
            p = run(argv, work)
            check(p.returncode == 0, "%s --force: exit %d: %s" % (argv[1], p.returncode, p.stderr))
        check(not temporaries(work, reports, accept_dir), "temporary files left: %r" % temporaries(work, reports, accept_dir))

        # --- write errors: a file size limit ------------------------------------------------------
        before = snapshot([dataset])
        p = run([PRECIS, "gen", big_suite, "-o", dataset, "-q", "--force"], work, fsize=20 * 1024)
        check(p.returncode == 1, "gen past the file size limit: exit %d, expected 1 (%s)" % (p.returncode, p.stderr))
        check("d.h5" in p.stderr and "too large" in p.stderr.lower() and len(p.stderr.strip().splitlines()) == 1,
              "gen past the file size limit: expected one line naming d.h5 and the error, got %r" % p.stderr)
        check(snapshot([dataset]) == before, "gen past the file size limit changed the earlier dataset")
        print("gen past a 20 KiB file size limit: %s" % p.stderr.strip())

        # report.html (about 20 KiB) is the largest report: it cannot be written under 15 KiB.
        html = os.path.join(reports, "report.html")
        before = snapshot([html])
        p = run([PRECIS, "run", dataset, "-o", reports, "--recipes", "fp32,int8", "--force"] + FAST, work,
                fsize=15 * 1024)
        check(p.returncode == 1, "run past the file size limit: exit %d, expected 1 (%s)" % (p.returncode, p.stderr))
        check("report.html" in p.stderr and "too large" in p.stderr.lower(),
              "run past the file size limit: the message does not name report.html and the error: %r" % p.stderr)
        check(snapshot([html]) == before, "run past the file size limit changed the earlier report.html")
        print("run past a 15 KiB file size limit: %s" % p.stderr.strip().splitlines()[-1])

        before = snapshot([cmp_json])
        p = run([PRECIS, "compare", report_files[0], report_files[0], "--json", cmp_json, "--force"], work, fsize=64)
        check(p.returncode == 1, "compare past the file size limit: exit %d, expected 1 (%s)" % (p.returncode, p.stderr))
        check("c.json" in p.stderr, "compare past the file size limit: the message does not name c.json: %r" % p.stderr)
        check(snapshot([cmp_json]) == before, "compare past the file size limit changed the earlier c.json")
        print("compare past a 64 B file size limit: %s" % p.stderr.strip().splitlines()[-1])

        # 64 KiB of outputs do not fit under 30 KiB; the reports of one row do.
        big = os.path.join(work, "big.h5")
        check(run([PRECIS, "gen", big_suite, "-o", big, "-q"], work).returncode == 0, "gen big failed")
        outputs = os.path.join(work, "out.h5")
        before = snapshot([outputs])
        p = run([PRECIS, "run", big, "-o", os.path.join(work, "r3"), "--recipes", "fp32", "--save-outputs", outputs,
                 "--force"] + FAST, work, fsize=30 * 1024)
        check(p.returncode == 1, "run --save-outputs past the limit: exit %d, expected 1 (%s)" % (p.returncode, p.stderr))
        check("out.h5" in p.stderr, "run --save-outputs past the limit: the message does not name out.h5: %r" % p.stderr)
        check(snapshot([outputs]) == before, "run --save-outputs past the limit changed the earlier out.h5")
        print("run --save-outputs past a 30 KiB limit: %s" % p.stderr.strip().splitlines()[-1])

        check(not temporaries(work, reports), "temporary files left: %r" % temporaries(work, reports))
    if FAILURES:
        print("%d failures" % len(FAILURES))
        return 1
    print("output safety: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
