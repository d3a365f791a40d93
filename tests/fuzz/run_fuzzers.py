#!/usr/bin/python3
"""Runs every libFuzzer target of a fuzz build for a while and reports executions per target.

    /usr/bin/python3 tests/fuzz/run_fuzzers.py BUILD_DIR [SECONDS_PER_TARGET] [--keep DIR]

Seeds come from tests/fuzz/make_seeds.py. A crash, hang (5 s) or memory blow-up whose first stack
frame in either library is inside libhdf5 (the HDF5 C library parsing a damaged file: HDF5 1.10 does
not check every structure it reads, docs/robustness.md), or a leak whose allocation stack holds
libhdf5 frames and none of precis's, is counted as an upstream defect and fuzzing goes on. Except:
when the bad memory was allocated by precis (the first attributable frame of ASan's "allocated by
thread" / "freed by thread" stack is precis's), the defect is precis's wherever it was touched: a
precis buffer too small for what H5Dread writes into it overflows inside libhdf5 but is precis's bug.
Any other crash, leak, sanitizer report or timeout fails (exit 1), and the input that caused it is
kept (--keep DIR) for `BUILD_DIR/fuzz/TARGET INPUT`. A target that is missing, or that ran zero
executions (it did not start, or exited before fuzzing), also fails: nothing was checked.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = [("fuzz_criteria", "criteria"), ("fuzz_suite", "suite"), ("fuzz_safetensors", "safetensors"),
           ("fuzz_numpy", "numpy"), ("fuzz_dataset", "dataset")]
# libhdf5 1.10 leaks memory on some damaged files by itself, and its allocations are unwound through
# precis's calls, so a leak report cannot be attributed reliably: the dataset target runs without
# leak detection. precis's own handle hygiene on damaged files is checked with LeakSanitizer by the
# corpus test (tests/py/test_corpus.py, 59 malformed datasets) in the ASan build of .ci/run.
EXTRA_FLAGS = {"fuzz_dataset": ["-detect_leaks=0"]}
# Frames of libhdf5 itself are often unsymbolized ("#1 0x... (/lib/.../libhdf5_serial.so.103+0x...)").
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ (?:in (\S+) )?(.*)$")


def frame_owner(function, where):
    if "libhdf5" in where or (function or "").startswith(("H5", "H5_")):
        return "hdf5"
    # src/ is grouped by subsystem (src/data/dataset.c): any depth below src/.
    if re.search(r"/(src|tests/fuzz)/(?:[^/]+/)*[^/]+\.c:\d+", where):
        return "precis"
    return None


# The stacks of an ASan report after the access stack: where the memory came from or went.
MEMORY_ORIGIN = re.compile(r"\b(?:previously allocated|allocated|freed) by thread\b")


def first_owner(report):
    """'hdf5' or 'precis': who owns the defect in a sanitizer report, else None.

    A leak is precis's when any frame of its allocation stack is precis's (a handle precis did not
    close), and libhdf5's only when no frame is: HDF5 1.10 leaks on some damaged files by itself.
    Otherwise the memory's origin decides first: when the first attributable frame of an
    "allocated by" / "freed by" stack is precis's, the buffer is precis's and so is the defect,
    even if libhdf5 made the bad access (precis handed H5Dread a buffer too small). Else the first
    attributable frame of the access stack decides."""
    access, origins, current = [], [], None
    for line in report.splitlines():
        if MEMORY_ORIGIN.search(line):
            current = []
            origins.append(current)
            continue
        m = FRAME.match(line)
        if m:
            owner = frame_owner(*m.groups())
            if owner:
                (access if current is None else current).append(owner)
    if "LeakSanitizer" in report:
        owners = access + [o for stack in origins for o in stack]
        return "precis" if "precis" in owners else ("hdf5" if owners else None)
    if any(stack and stack[0] == "precis" for stack in origins):
        return "precis"
    return access[0] if access else None


def executions(output):
    m = re.findall(r"stat::number_of_executed_units: (\d+)", output)
    if m:
        return int(m[-1])
    m = re.findall(r"^#(\d+)\s", output, re.M)
    return int(m[-1]) if m else 0


def fuzz(binary, seeds, seconds, keep, extra=()):
    work = tempfile.mkdtemp(prefix="precis-fuzz-corpus-")
    artifacts = tempfile.mkdtemp(prefix="precis-fuzz-artifacts-")
    total, upstream, failure = 0, [], None
    deadline = time.monotonic() + seconds
    try:
        while failure is None:
            left = int(deadline - time.monotonic())
            if left < 1:
                break
            p = subprocess.run([binary, "-max_total_time=%d" % left, "-print_final_stats=1", "-timeout=5",
                                "-rss_limit_mb=2560", "-artifact_prefix=" + artifacts + "/", *extra, work, seeds],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
            total += executions(p.stdout)
            if p.returncode == 0:
                break
            found = sorted(os.listdir(artifacts))
            owner = first_owner(p.stdout)
            if owner == "hdf5" and found and found[-1].startswith(("crash-", "timeout-", "oom-", "leak-")):
                kept = os.path.join(keep, os.path.basename(binary) + "-hdf5-" + found[-1]) if keep else None
                if kept:
                    shutil.copy(os.path.join(artifacts, found[-1]), kept)
                summary = re.findall(r"SUMMARY: (.*)", p.stdout)
                upstream.append(summary[-1] if summary else "a crash inside libhdf5")
                for f in found:
                    os.remove(os.path.join(artifacts, f))
                continue
            kept = None
            if found and keep:
                kept = os.path.join(keep, os.path.basename(binary) + "-" + found[-1])
                shutil.copy(os.path.join(artifacts, found[-1]), kept)
            failure = (p.stdout[-6000:], kept)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(artifacts, ignore_errors=True)
    return total, upstream, failure


def main():
    args = [a for a in sys.argv[1:]]
    keep = None
    if "--keep" in args:
        i = args.index("--keep")
        keep = args[i + 1]
        del args[i:i + 2]
        os.makedirs(keep, exist_ok=True)
    if not args:
        sys.exit(__doc__)
    build = args[0]
    seconds = int(args[1]) if len(args) > 1 else 15
    status = 0
    with tempfile.TemporaryDirectory(prefix="precis-fuzz-seeds-") as seeds:
        subprocess.run([sys.executable, os.path.join(HERE, "make_seeds.py"), seeds], check=True,
                       stdout=subprocess.DEVNULL)
        for target, kind in TARGETS:
            binary = os.path.join(build, "fuzz", target)
            if not os.access(binary, os.X_OK):
                print("FAIL: %s: no such fuzz target (build it: cmake --build %s --target fuzz)" % (binary, build))
                status = 1
                continue
            started = time.monotonic()
            total, upstream, failure = fuzz(binary, os.path.join(seeds, kind), seconds, keep,
                                            EXTRA_FLAGS.get(target, ()))
            took = time.monotonic() - started
            line = "%-17s %9d executions in %4.0f s (%.0f/s)" % (target, total, took, total / max(took, 1e-9))
            if upstream:
                line += "; %d defect(s) inside libhdf5 (upstream, not precis), first: %s" % (len(upstream), upstream[0])
            print(line, flush=True)
            if total == 0 and not failure:
                print("FAIL: %s ran zero executions: nothing was fuzzed" % target)
                status = 1
            if failure:
                output, kept = failure
                print(output)
                print("FAIL: %s found a defect in precis%s" % (target, " (input kept: %s)" % kept if kept else ""))
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
