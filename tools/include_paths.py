#!/usr/bin/env python3
"""Rewrite bare includes of precis's own headers into by-path includes ("numerics/spec.h").

Headers under src/<subsystem>/ are reached as "<subsystem>/x.h" and headers under kernels/ as
"kernels/x.h", so that the include path of each library target (DESIGN §10, layering) decides what
it may see. Idempotent: run it again after merging a branch written with bare includes.
    python3 tools/include_paths.py [--check]
--check rewrites nothing and exits 1 when a bare include of a subsystem header remains.
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
    new = include.sub(fix, text)
    if new != text and not check:
        path.write_text(new)
if check:
    for b in bad:
        print(b)
    sys.exit(1 if bad else 0)
print(f"rewrote {len(bad)} includes")
