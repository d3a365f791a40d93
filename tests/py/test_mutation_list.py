"""tests/mutation/mutations.txt stays usable (its run is not in CI: minutes per mutation): every block
parses and is closed (a block left open swallowed the next as its replacement text, so neither was
ever applied: six such pairs were found at once), names an existing file and CTest names, and its
original text occurs exactly once in that file (a refactor that makes it stale is seen here, not
months later). Also checks that the parser refuses an unclosed block."""
import os
import shutil
import sys

import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "mutation"))
import run_mutations  # noqa: E402


def main():
    problems = []
    muts = run_mutations.parse(os.path.join(SOURCE, "tests", "mutation", "mutations.txt"))
    names = [m["name"] for m in muts]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        problems.append(f"names used twice: {dups}")
    for m in muts:
        path = os.path.join(SOURCE, m["file"])
        if not os.path.isfile(path):
            problems.append(f"{m['name']}: file {m['file']} does not exist")
            continue
        with open(path, encoding="utf-8") as f:
            count = f.read().count(m["orig"])
        if count != 1:
            problems.append(f"{m['name']} (line {m['line']}): its original text occurs {count} times in {m['file']} "
                            "(expected once: update the block)")
        if m["orig"] == m["repl"]:
            problems.append(f"{m['name']}: the replacement is the original")
    work = scratch.mkdtemp(prefix="precis-mutation-list-")
    try:
        broken = os.path.join(work, "open.txt")
        with open(broken, "w") as f:
            f.write("@@ a\nfile: x.c\ntests: t\n<<<\nx\n===\ny\n@@ b\nfile: x.c\ntests: t\n<<<\nz\n===\nw\n>>>\n")
        try:
            run_mutations.parse(broken)
            problems.append("an unclosed block followed by another was accepted")
        except SystemExit as e:
            if "not closed" not in str(e):
                problems.append(f"an unclosed block: unclear refusal {e}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for p in problems:
        print("FAIL", p)
    print(f"mutations.txt: {len(muts)} blocks, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
