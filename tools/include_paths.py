#!/usr/bin/env python3
"""Rewrite bare includes of precis's own headers into by-path includes ("numerics/spec.h"), and
by-path includes of a header that has moved to another subsystem into its new path.

Headers under src/<subsystem>/ are reached as "<subsystem>/x.h" and headers under kernels/ as
"kernels/x.h", so that the include path of each library target (DESIGN §10, layering) decides what
it may see. Idempotent: run it again after merging a branch written with bare includes, or with the old path of
a header that `git mv` moved (e.g. "eval/plan.h" -> "report/plan.h"; src/layers.txt says which
subsystem may include which, tools/check_layers.py checks it).
    python3 tools/include_paths.py [--check]
--check rewrites nothing and exits 1 when a bare or stale include of a subsystem header remains.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
owner = {}
for sub in sorted((root / "src").iterdir()):
    if sub.is_dir():
        for h in sub.glob("*.h"):
            owner[h.name] = f"{sub.name}/{h.name}"
for h in list((root / "kernels").glob("*.h")) + list((root / "kernels").glob("*.cuh")):
    owner[h.name] = f"kernels/{h.name}"

include = re.compile(r'^(\s*#\s*include\s+")([^"/]+)(")', re.M)
# "subsystem/name.h" where no such file exists (the header moved): the path of the header of that name now
by_path = re.compile(r'^(\s*#\s*include\s+")((?:[a-z_]+)/([^"/]+))(")', re.M)
layer_dirs = {p.name for p in (root / "src").iterdir() if p.is_dir()} | {"kernels"}


def exists(included):
    top = included.split("/")[0]
    return (root / ("" if top == "kernels" else "src") / included).exists()
check = "--check" in sys.argv
bad = []
for path in list(root.glob("src/**/*")) + list(root.glob("kernels/**/*")) + list(root.glob("tests/**/*")) + list(root.glob("python/**/*")):
    if path.suffix not in (".c", ".h", ".cu", ".cuh") or not path.is_file():
        continue
    text = path.read_text()
    def fix(m):
        name = m.group(2)
        # a test's own helper header (tests/harness.h) shadows nothing under src/
        if name not in owner or (path.parent / name).exists() and path.parent != (root / owner[name]).parent:
            return m.group(0)
        bad.append(f"{path.relative_to(root)}: \"{name}\" -> \"{owner[name]}\"")
        return m.group(1) + owner[name] + m.group(3)
    def fix_moved(m):
        included, name = m.group(2), m.group(3)
        if included.split("/")[0] not in layer_dirs or exists(included) or name not in owner:
            return m.group(0)
        bad.append(f"{path.relative_to(root)}: \"{included}\" -> \"{owner[name]}\" (moved)")
        return m.group(1) + owner[name] + m.group(4)
    new = by_path.sub(fix_moved, include.sub(fix, text))
    if new != text and not check:
        path.write_text(new)
if check:
    for b in bad:
        print(b)
    sys.exit(1 if bad else 0)
print(f"rewrote {len(bad)} includes")
