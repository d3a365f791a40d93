"""tools/check_layers.py can fail (the CTest check_layers runs it on the real tree): on a small tree
with the layers `base: ` and `numerics: base`, each kind of upward edge is reported and nothing else:

- an upward include ("numerics/..." from base/), a ".." include, a bare include of another layer's
  header, a src/ folder without a line, a table with a cycle or a line that omits what its layers use;
- an upward call through a hand-written declaration (no #include), from the libraries' symbols:
  base's archive calling numerics' function, which the compiler and a static link accept;
- the same tree without those edges passes, and a downward call passes.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

SOURCE = pathlib.Path(os.environ.get("PRECIS_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CHECK = SOURCE / "tools" / "check_layers.py"
FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def run(tree, *args):
    p = subprocess.run([sys.executable, str(CHECK), "--root", str(tree), *args], capture_output=True, text=True)
    return p.returncode, p.stdout


def write(tree, rel, text):
    path = tree / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def clean_tree(tree):
    write(tree, "src/layers.txt", "# test table\nbase:\nnumerics: base\n")
    write(tree, "src/base/status.h", "#ifndef S_H\n#define S_H\nint base_status(void);\n#endif\n")
    write(tree, "src/base/status.c", '#include "status.h"\nint base_status(void) { return 0; }\n')
    write(tree, "src/numerics/spec.h", '#include "base/status.h"\nint numerics_spec(void);\n')
    write(tree, "src/numerics/spec.c",
          '#include "spec.h"\n#include "base/status.h"\nint numerics_spec(void) { return base_status(); }\n')
    (tree / "kernels").mkdir(exist_ok=True)


def expect_one(tree, needle, what):
    rc, out = run(tree)
    check(rc == 1 and needle in out, f"{what}: exit {rc}, output {out!r} (expected {needle!r})")


def main():
    with scratch.TemporaryDirectory() as tmp:
        tree = pathlib.Path(tmp) / "t"
        clean_tree(tree)
        rc, out = run(tree)
        check(rc == 0 and out == "", f"clean tree: exit {rc}, {out!r}")

        write(tree, "src/base/status.c", '#include "status.h"\n#include "numerics/spec.h"\nint base_status(void) { return 0; }\n')
        expect_one(tree, 'src/base/status.c:2: "numerics/spec.h": base may not include numerics', "upward include")
        clean_tree(tree)
        write(tree, "src/numerics/spec.c", '#include "../base/status.h"\nint numerics_spec(void) { return 0; }\n')
        expect_one(tree, 'no ".." in includes', "'..' include")
        clean_tree(tree)
        write(tree, "src/numerics/spec.c", '#include "status.h"\nint numerics_spec(void) { return 0; }\n')
        expect_one(tree, '"status.h" is not a header of numerics/', "bare include of another layer's header")
        clean_tree(tree)
        write(tree, "src/api/x.c", "int x;\n")
        expect_one(tree, "src/api/: no line in src/layers.txt", "folder without a line")
        shutil.rmtree(tree / "src" / "api")
        write(tree, "src/layers.txt", "base: numerics\nnumerics: base\n")
        expect_one(tree, "base uses numerics, which is not a line above it", "cycle")
        write(tree, "src/layers.txt", "base:\nnumerics: base\ndata: numerics\n")
        (tree / "src" / "data").mkdir()
        expect_one(tree, "data uses numerics, which uses base: data's line must list it too", "incomplete line")
        shutil.rmtree(tree / "src" / "data")
        clean_tree(tree)

        # Symbols: base calls numerics through its own declaration; only the archives show it.
        cc = shutil.which("cc") or shutil.which("gcc")
        ar = shutil.which("ar")
        if not cc or not ar:
            print("SKIP symbol check: no cc/ar")
        else:
            def archive(layer, source):
                obj, lib = tree / f"{layer}.o", tree / f"libprecis_{layer}.a"
                subprocess.run([cc, "-c", "-I", str(tree / "src"), "-o", str(obj), str(source)], check=True)
                if lib.exists():
                    lib.unlink()
                subprocess.run([ar, "rcs", str(lib), str(obj)], check=True)
                return f"{layer}={lib}"
            libs = ["--lib", archive("numerics", tree / "src/numerics/spec.c")]
            rc, out = run(tree, *libs, "--lib", archive("base", tree / "src/base/status.c"))
            check(rc == 0 and out == "", f"downward call: exit {rc}, {out!r}")
            write(tree, "upward.c", "int numerics_spec(void); /* declared by hand */\n"
                                    "int base_status(void) { return numerics_spec(); }\n")
            rc, out = run(tree, *libs, "--lib", archive("base", tree / "upward.c"))
            check(rc == 1 and "libprecis_base.a: calls numerics_spec, defined by numerics, which base may not use" in out,
                  f"upward call: exit {rc}, {out!r}")

    # The real tree passes (CTest check_layers adds the libraries).
    p = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True)
    check(p.returncode == 0, f"the repository's own sources: exit {p.returncode}, {p.stdout!r}")
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
