"""Every malformed input of tests/corpus/make_corpus.py is refused cleanly by every command that
reads it: exit status 2, one line on stderr naming the file, the object and what was expected, no
signal, no sanitizer report, and nothing left behind (no report files, no dataset, no temporary
file). Runs in the normal and the ASan/UBSan build alike (.ci/run runs the README test command in
both). Checked-in files that crash or hang libhdf5 1.10.8 itself must give the same clean refusal
("corrupt file (the HDF5 library failed reading it)"). `--verbose` prints every message."""
import json
import os
import re
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "corpus"))
import make_corpus  # noqa: E402

PRECIS = os.environ.get("PRECIS")
VERBOSE = "--verbose" in sys.argv
SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
                       r"HDF5-DIAG|Segmentation|Aborted")
# Files that hang libhdf5 (tests/corpus/libhdf5-crashes/) cost the child-process check's whole time
# limit: a short one keeps the test fast. A valid corpus file answers in milliseconds.
os.environ["PRECIS_HDF5_CHECK_TIMEOUT"] = "5"
CASE_TIMEOUT_S = 60
FAST_RUN = ["--backend", "cpu", "--recipes", "fp32", "--quiet", "--min-samples", "1", "--max-samples", "1",
            "--max-time-ms", "1"]


def command_line(case, cmd, path, work):
    if cmd == "inspect":
        return [PRECIS, "inspect", path], None
    if cmd == "run":
        out = os.path.join(work, "report")
        return [PRECIS, "run", path, "-o", out] + FAST_RUN, out
    if cmd == "gen":
        out = os.path.join(work, "out", "d.h5")
        os.makedirs(os.path.dirname(out))
        return [PRECIS, "gen", path, "-o", out, "-q"], os.path.dirname(out)
    if cmd == "import":
        out = os.path.join(work, "out", "d.h5")
        os.makedirs(os.path.dirname(out))
        return [PRECIS, "import", "--b", path + ":" + case["tensor"], "-o", out, "-q"], os.path.dirname(out)
    raise AssertionError(cmd)


# `precis run` creates DIR/journal.jsonl before it loads the first workload, so a dataset refused
# at load time (non-finite values, checksums, references) leaves an empty journal (no rows, no
# report). Tolerated until the runner removes it; any byte in it, or any report file, fails.
EMPTY_JOURNAL_TOLERATED = False


def leftovers(out):
    """Files a refused command left behind (an empty report directory is not output)."""
    if out is None or not os.path.exists(out):
        return []
    found = []
    for root, _, files in os.walk(out):
        for f in files:
            path = os.path.join(root, f)
            if EMPTY_JOURNAL_TOLERATED and f == "journal.jsonl" and os.path.getsize(path) == 0:
                continue
            found.append(os.path.relpath(path, out))
    return found


def check(case, cmd, corpus_dir):
    path = os.path.join(corpus_dir, case["file"])
    with scratch.TemporaryDirectory(prefix="precis-corpus-") as work:
        argv, out = command_line(case, cmd, path, work)
        try:
            p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=CASE_TIMEOUT_S, cwd=work)
        except subprocess.TimeoutExpired:
            print("%-28s %-7s FAIL: no answer within %d s" % (case["name"], cmd, CASE_TIMEOUT_S))
            return False
        err = p.stderr.strip()
        problems = []
        if p.returncode != 2:
            problems.append("exit status %d, expected 2" % p.returncode)
        if SANITIZER.search(p.stderr):
            problems.append("crash or sanitizer report")
        lines = err.splitlines()
        if len(lines) != 1:
            problems.append("%d lines on stderr, expected one" % len(lines))
        if case["file"] not in err:
            problems.append("the message does not name the file %s" % case["file"])
        for fragment in case["expect"]:
            if not re.search(fragment, err):
                problems.append("the message lacks /%s/" % fragment)
        left = leftovers(out)
        if left:
            problems.append("left behind: %s" % ", ".join(left))
        if VERBOSE or problems:
            print("%-28s %-7s rc=%d  %s" % (case["name"], cmd, p.returncode, err if len(err) < 2000 else err[:2000]))
        for problem in problems:
            print("    FAIL: " + problem)
        return not problems


def legal_inputs(work):
    """Positive controls: extra attributes are legal; markup in names is legal and escaped everywhere."""
    problems = []
    extra = os.path.join(work, "extra-attributes.h5")
    make_corpus.write_extra_attributes(extra)
    for argv in ([PRECIS, "inspect", extra], [PRECIS, "run", extra, "-o", os.path.join(work, "extra")] + FAST_RUN):
        p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=120, cwd=work)
        if p.returncode != 0 or SANITIZER.search(p.stderr):
            problems.append("%s on a dataset with extra attributes: exit %d: %s" % (argv[1], p.returncode, p.stderr))

    markup = os.path.join(work, "markup.h5")
    make_corpus.write_markup_dataset(markup)
    out = os.path.join(work, "markup")
    p = subprocess.run([PRECIS, "run", markup, "-o", out, "--backend", "cpu", "--recipes", "fp32,int8", "--min-samples",
                        "1", "--max-samples", "1", "--max-time-ms", "1"],
                       capture_output=True, timeout=120, cwd=work)
    if p.returncode != 0 or SANITIZER.search(p.stderr.decode("utf-8", "replace")):
        problems.append("run on the markup dataset: exit %d: %s" % (p.returncode, p.stderr.decode("utf-8", "replace")))
        return problems
    if b"\x1b" in p.stdout:
        problems.append("the terminal table holds a raw escape character")
    with open(os.path.join(out, "report.json"), encoding="utf-8") as fh:
        report = json.load(fh)
    names = sorted({row["workload"] for row in report["rows"]})
    if names != sorted(make_corpus.MARKUP_NAMES):
        problems.append("report.json: workload names do not round-trip: %r" % names)
    if any(row["description"] != make_corpus.MARKUP_DESCRIPTION for row in report["rows"] if "description" in row):
        problems.append("report.json: descriptions do not round-trip")
    for file in ("report.html", "report.md"):
        with open(os.path.join(out, file), encoding="utf-8") as fh:
            text = fh.read()
        for raw in ("<img src=x", "<script>", "\x1b"):
            if raw in text:
                problems.append("%s holds the raw markup %r" % (file, raw))
        if "&lt;img src=x onerror=alert(1)&gt;" not in text:
            problems.append("%s does not show the escaped name" % file)
    import csv
    with open(os.path.join(out, "report.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    csv_names = sorted({row["workload"] for row in rows})
    # A field that starts with = is neutralized with a leading quote (CSV injection); the rest is verbatim.
    expected = sorted(("'" + n) if n[0] in "=+-@" else n for n in make_corpus.MARKUP_NAMES)
    if csv_names != expected:
        problems.append("report.csv: workload fields %r, expected %r" % (csv_names, expected))
    return problems


def main():
    if not PRECIS:
        print("PRECIS is not set (the path of the precis binary)")
        return 1
    with scratch.TemporaryDirectory(prefix="precis-corpus-files-") as corpus_dir:
        cases = make_corpus.build(corpus_dir)
        with open(os.path.join(corpus_dir, "manifest.json")) as fh:
            assert json.load(fh) == cases
        failures, runs = 0, 0
        for case in cases:
            for cmd in case["commands"]:
                runs += 1
                failures += not check(case, cmd, corpus_dir)
        legal = legal_inputs(corpus_dir)
        for problem in legal:
            print("    FAIL (legal input): " + problem)
        failures += len(legal)
        kinds = {}
        for case in cases:
            kinds[case["kind"]] = kinds.get(case["kind"], 0) + 1
        print("corpus: %d cases (%s), %d command runs, %d failed" %
              (len(cases), ", ".join("%d %s" % (v, k) for k, v in sorted(kinds.items())), runs, failures))
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
