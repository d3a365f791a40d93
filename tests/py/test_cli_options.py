#!/usr/bin/python3
"""Options read alike on every command (issue 34; src/cli/cli.h, precis_cli_check_options):

- a long option is its exact name: for every option of every command, the exact name is accepted and
  every shorter prefix of it (an abbreviation, `--target` for `--target-spread`) is refused with exit
  2, "unknown option", the options it could mean and the list of the command's options; so is an
  unknown name and an unknown one-letter option;
- the options a command's --help describes are the options it accepts (the table in src/cli/cli_main.c
  and the parsers agree with the help text);
- the one-letter forms are the same everywhere: -q on every command with --quiet (`precis run -q`
  was refused), -o on every command with --output, -h everywhere.

Nothing is run: each option is given after --help, which every command answers first, so that a
dummy value is never used. Runs with Debian's python3; env PRECIS."""
import os
import re
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

PRECIS = os.environ["PRECIS"]
COMMANDS = ["info", "gen", "inspect", "import", "run", "recommend", "plan", "conform", "compare", "merge", "recipes",
            "explain", "accept", "grade"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL " + what)
    return cond


def precis(*args, cwd=None):
    return subprocess.run([PRECIS, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def listed_options(command):
    """{name: takes_value} and the set of one-letter forms, from the list an unknown option prints."""
    p = precis(command, "--no-such-option")
    check(p.returncode == 2 and "unknown option --no-such-option" in p.stderr,
          f"{command} --no-such-option: exit {p.returncode}: {p.stderr}")
    m = re.search(r"options of this command:(.*)", p.stderr)
    if not check(m is not None, f"{command}: no list of options in: {p.stderr}"):
        return {}, set()
    options, shorts = {}, set()
    for item in m.group(1).split(","):
        item = item.strip()
        if re.fullmatch(r"-[a-z]", item):
            shorts.add(item[1])
        elif item.startswith("--"):
            name, _, value = item[2:].partition(" ")
            options[name] = value == "VALUE"
    return options, shorts


def help_options(command):
    """The options --help describes: lines that start with an option, e.g. "  -o, --output DIR"."""
    p = precis(command, "--help")
    check(p.returncode == 0, f"{command} --help: exit {p.returncode}")
    found = set()
    for line in p.stdout.splitlines():
        m = re.match(r"\s+(?:-[a-z], )?--([a-z0-9-]+)", line)
        if m:
            found.add(m.group(1))
    return found - {"help"}


def main():
    with scratch.TemporaryDirectory() as tmp:
        for command in COMMANDS:
            options, shorts = listed_options(command)
            if not options:
                continue
            described = help_options(command)
            missing = described - set(options)
            check(not missing, f"{command}: --help describes options the command refuses: {sorted(missing)}")
            for name, takes_value in options.items():
                value = ["1"] if takes_value else []
                p = precis(command, "--help", "--" + name, *value, cwd=tmp)
                check(p.returncode == 0 and "unknown option" not in p.stderr,
                      f"{command} --{name}: the exact name is refused: exit {p.returncode}: {p.stderr[:300]}")
                # The shortest, a middle and the longest abbreviation (all of them: minutes of processes).
                for cut in sorted({1, len(name) // 2, len(name) - 1} - {0}):
                    prefix = name[:cut]
                    if prefix in options:
                        continue  # itself an option (--recipe of --recipes)
                    p = precis(command, "--help", "--" + prefix, *value, cwd=tmp)
                    ok = (p.returncode == 2 and f"unknown option --{prefix}" in p.stderr
                          and "options of this command:" in p.stderr and f"--{name}" in p.stderr)
                    check(ok, f"{command} --{prefix} (abbreviates --{name}): exit {p.returncode}: {p.stderr[:300]}")
                # --name=VALUE is the same option.
                if takes_value:
                    p = precis(command, "--help", f"--{name}=1", cwd=tmp)
                    check(p.returncode == 0, f"{command} --{name}=1: exit {p.returncode}: {p.stderr[:200]}")
            # The same one-letter forms everywhere.
            for letter, long_name in (("q", "quiet"), ("o", "output")):
                has = long_name in options
                check((letter in shorts) == has, f"{command}: -{letter} listed {letter in shorts}, --{long_name} {has}")
                p = precis(command, "--help", "-" + letter, *(["x"] if letter == "o" else []), cwd=tmp)
                if has:
                    check(p.returncode == 0, f"{command} -{letter}: refused although --{long_name} exists: {p.stderr}")
                else:
                    check(p.returncode == 2 and f"unknown option -{letter}" in p.stderr,
                          f"{command} -{letter}: exit {p.returncode} without --{long_name}: {p.stderr[:200]}")
            p = precis(command, "-h", cwd=tmp)
            check(p.returncode == 0 and "usage" in p.stdout, f"{command} -h: exit {p.returncode}")
            p = precis(command, "--help", "-z", cwd=tmp)
            check(p.returncode == 2 and "unknown option -z" in p.stderr, f"{command} -z: exit {p.returncode}")
            print(f"ok   {command}: {len(options)} options exact, abbreviations refused; -q/-o as --quiet/--output")

        # -q works on run as on import: nothing on stdout.
        suite = os.path.join(tmp, "s.yaml")
        with open(suite, "w") as f:
            f.write("seed: 1\nworkloads:\n  - {name: w, m: 8, n: 8, k: 8}\n")
        data = os.path.join(tmp, "d.h5")
        p = precis("gen", suite, "-o", data, "-q", cwd=tmp)
        check(p.returncode == 0, f"gen -q: exit {p.returncode}: {p.stderr}")
        p = precis("run", data, "-q", "-o", os.path.join(tmp, "r"), "--backend", "cpu", "--recipes", "fp32",
                   "--min-samples", "1", "--max-samples", "1", cwd=tmp)
        check(p.returncode == 0 and p.stdout == "", f"run -q: exit {p.returncode}, stdout {p.stdout!r}, {p.stderr}")
        # The case that was reported: --target was read as --target-spread. It is now an option of its
        # own (the architecture, DESIGN §19), and a prefix of both is refused naming both.
        p = precis("run", data, "--targ", "sm_90", "-q", "-o", os.path.join(tmp, "r2"), cwd=tmp)
        check(p.returncode == 2 and "--target-spread" in p.stderr and "--target " in p.stderr + " ",
              f"run --targ: exit {p.returncode}: {p.stderr[:300]}")
        p = precis("run", data, "--target", "sm_100", "-q", "-o", os.path.join(tmp, "r3"), "--backend", "cpu",
                   "--recipes", "fp32", "--min-samples", "1", "--max-samples", "1", cwd=tmp)
        rows = []
        if check(p.returncode == 0, f"run --target sm_100: exit {p.returncode}: {p.stderr[:300]}"):
            import json
            rows = json.load(open(os.path.join(tmp, "r3", "report.json")))["rows"]
        check(rows and all(r.get("target") == "sm_100" for r in rows), f"run --target sm_100: rows {[r.get('target') for r in rows]}")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
