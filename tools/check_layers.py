#!/usr/bin/env python3
"""Checks the layering of src/layers.txt (DESIGN §10, §15) over the sources and, given the built
libraries, over their symbols. Prints one line per violation and exits 1; prints nothing and exits
0 when every edge runs down the table.

    python3 tools/check_layers.py [--lib LAYER=PATH/libprecis_LAYER.a ...]

Sources: every #include "..." of src/<layer>/ and kernels/ (.c .h .cu .cuh) must name its own
folder's header by bare name, a header of its own layer or of a layer its line allows by path
("numerics/spec.h"), or a generated header (precis_version.h); never "..". Every folder of src/ must
have a line. The table itself: a layer may only use layers of lines above it (no cycle), and must
list what those use in turn (their headers include their own dependencies).

Libraries (--lib, from CTest): every symbol a layer's library leaves undefined and another layer's
library defines must come from a layer it may use, so that an upward call through a hand-written
declaration (no #include) fails here although the static link of the program would accept it.
"""
import argparse
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent  # --root: another tree (tests/py/test_check_layers.py)
GENERATED = {"precis_version.h"}
SUFFIXES = (".c", ".h", ".cu", ".cuh")


def read_table(path):
    order, uses, problems = [], {}, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([a-z_]+):\s*(.*)", line)
        if not m:
            problems.append(f"{path.name}:{number}: expected 'layer: used layers', got {line!r}")
            continue
        layer, used = m.group(1), m.group(2).split()
        for u in used:
            if u not in uses:
                problems.append(f"{path.name}:{number}: {layer} uses {u}, which is not a line above it (cycle or typo)")
        order.append(layer)
        uses[layer] = set(used)
    for layer in order:
        for u in sorted(uses[layer]):
            missing = uses.get(u, set()) - uses[layer]
            if missing:
                problems.append(f"{path.name}: {layer} uses {u}, which uses {' '.join(sorted(missing))}: "
                                f"{layer}'s line must list {'them' if len(missing) > 1 else 'it'} too")
    return order, uses, problems


def layer_dir(layer):
    return root / "kernels" if layer == "kernels" else root / "src" / layer


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def check_sources(order, uses):
    problems = []
    for sub in sorted((root / "src").iterdir()):
        if sub.is_dir() and sub.name not in uses:
            problems.append(f"src/{sub.name}/: no line in src/layers.txt (add one, with the layers it uses)")
    for layer in order:
        folder = layer_dir(layer)
        if not folder.is_dir():
            problems.append(f"src/layers.txt names {layer}, which has no folder {folder.relative_to(root)}")
            continue
        visible = {layer} | uses[layer]
        for path in sorted(folder.iterdir()):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            text = path.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                included = m.group(1)
                line = text.count("\n", 0, m.start(1)) + 1
                where = f"{path.relative_to(root)}:{line}"
                if ".." in included.split("/"):
                    problems.append(f'{where}: "{included}": no ".." in includes; reach a header by its layer\'s path')
                elif "/" not in included:
                    if included not in GENERATED and not (path.parent / included).exists():
                        problems.append(f'{where}: "{included}" is not a header of {layer}/; name a header of '
                                        f'another layer by path ("numerics/spec.h")')
                else:
                    top = included.split("/", 1)[0]
                    if top == "precis":
                        # include/precis/: the public API. Its status type is every layer's status
                        # (base/status.h includes it); the rest is implemented by api/ alone.
                        if included != "precis/status.h" and layer != "api":
                            problems.append(f'{where}: "{included}": only api/ implements the public '
                                            f'API; {layer} may include precis/status.h alone')
                    elif top in uses and top not in visible:
                        problems.append(f'{where}: "{included}": {layer} may not include {top} '
                                        f'(src/layers.txt: {layer}: {" ".join(sorted(uses[layer])) or "nothing"})')
                    elif top not in uses:
                        problems.append(f'{where}: "{included}": {top}/ is not a layer of src/layers.txt')
    return problems


def symbols(lib):
    out = subprocess.run(["nm", "-g", "--no-sort", str(lib)], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] not in ("U", "w", "v"):
            defined.add(parts[2])
    return defined, undefined - defined


def check_libraries(libs, uses):
    problems = []
    tables = {layer: symbols(path) for layer, path in libs.items()}
    owner = {}
    for layer, (defined, _) in tables.items():
        for s in defined:
            owner.setdefault(s, layer)
    for layer, (_, undefined) in sorted(tables.items()):
        for s in sorted(undefined):
            other = owner.get(s)
            if other and other != layer and other not in uses.get(layer, set()):
                problems.append(f"{pathlib.Path(libs[layer]).name}: calls {s}, defined by {other}, "
                                f"which {layer} may not use (src/layers.txt)")
    return problems


def main():
    global root
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", action="append", default=[], metavar="LAYER=PATH")
    parser.add_argument("--root", default=str(root), help="the source tree (default: this repository)")
    args = parser.parse_args()
    root = pathlib.Path(args.root).resolve()
    order, uses, problems = read_table(root / "src" / "layers.txt")
    problems += check_sources(order, uses)
    libs = dict(item.split("=", 1) for item in args.lib)
    for layer in libs:
        if layer not in uses:
            problems.append(f"--lib {layer}: not a layer of src/layers.txt")
    problems += check_libraries(libs, uses)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} edge(s) against src/layers.txt", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
