"""python -m precis --help lists every command python -m precis runs: the C command line's list (the
same as precis --help) and, after it, the commands only the Python package has (verify, plan
--validate), which were found only in the docs. Each listed Python command answers its own --help;
`python -m precis` without a command prints the same lists on stderr and exits 2.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, PRECIS, check  # noqa: E402

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
PYTHON_ONLY = {"capture": ["capture", "--help"], "verify": ["verify", "--help"], "plan --validate": ["plan", "--validate", "--help"],
               "tasks": ["tasks", "--help"], "lm-eval": ["lm-eval", "--help"],
               "capture --attention": ["capture", "--attention", "--help"]}


def python_m(args):
    return subprocess.run([sys.executable, "-m", "precis", *args], capture_output=True, text=True, env=ENV)


def commands(text):
    """The names of the "  name  summary" lines of a usage text's command lists."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("commands"):
            inside = True
            continue
        if inside and not line.strip():
            inside = False
        if inside and line.startswith("  ") and not line.startswith("   "):
            words = line.split()
            names.append(" ".join(words[:2]) if words[1:2] in (["--validate"], ["--attention"]) else words[0])
    return names


def main():
    c_help = subprocess.run([PRECIS, "--help"], capture_output=True, text=True).stdout
    c_commands = commands(c_help)
    check(len(c_commands) >= 10 and "plan" in c_commands and "verify" not in c_commands, f"C commands {c_commands}")
    p = python_m(["--help"])
    check(p.returncode == 0, f"python -m precis --help: exit {p.returncode}: {p.stderr}")
    listed = commands(p.stdout)
    check(p.stdout.startswith(c_help), "python -m precis --help begins with the C usage")
    check(listed[:len(c_commands)] == c_commands, f"the C commands {c_commands}, listed {listed}")
    check(sorted(listed[len(c_commands):]) == sorted(PYTHON_ONLY),
          f"the Python-only commands {sorted(PYTHON_ONLY)} after them: {listed[len(c_commands):]}")
    for name, args in PYTHON_ONLY.items():
        q = python_m(args)
        check(q.returncode == 0 and q.stdout.startswith(f"usage: python -m precis {name.split()[0]}"),
              f"python -m precis {' '.join(args)}: exit {q.returncode}: {q.stdout[:200]} {q.stderr[-500:]}")
    bare = python_m([])
    check(bare.returncode == 2 and commands(bare.stderr) == listed, f"python -m precis alone: exit {bare.returncode}, "
          f"lists {commands(bare.stderr)}")
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print(f"ok: python -m precis --help lists {len(c_commands)} C commands and {len(PYTHON_ONLY)} Python ones")


if __name__ == "__main__":
    main()
