"""tests/fuzz/run_fuzzers.py, the CI stage that runs the libFuzzer targets, without clang:

- a target that ran zero executions, or that is missing, fails the stage (nothing was checked);
- a crash is attributed by the allocation site of the bad memory as well as by the first frame:
  a precis buffer overflowed inside H5Dread is precis's defect, an overflow of libhdf5's own buffer
  inside libhdf5 is upstream's, a leak with any precis frame is precis's.
The end-to-end part runs the stage over fake targets (shell scripts that print libFuzzer's final
statistics line), so it runs wherever the CPU tests run.
"""
import os
import stat
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
RUNNER = os.path.join(SOURCE, "tests", "fuzz", "run_fuzzers.py")
sys.path.insert(0, os.path.dirname(RUNNER))
import run_fuzzers  # noqa: E402

FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


HDF5_FRAMES = """    #0 0x7f0000000001 in H5D__contig_readvv_sieve_cb (/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5_serial.so.103+0x1234)
    #1 0x7f0000000002  (/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5_serial.so.103+0x5678)
    #2 0x7f0000000003 in H5Dread (/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5_serial.so.103+0x9abc)
    #3 0x555500000004 in read_array /work/precis/src/data/dataset.c:640:7
    #4 0x555500000005 in precis_dataset_load /work/precis/src/data/dataset.c:831:12
"""
PRECIS_ALLOC = """0x602000000018 is located 0 bytes to the right of 8-byte region [0x602000000010,0x602000000018)
allocated by thread T0 here:
    #0 0x555500000100 in malloc (/work/build-fuzz/fuzz/fuzz_dataset+0x4a1b2c)
    #1 0x555500000101 in precis_dataset_load /work/precis/src/data/dataset.c:818:14
    #2 0x555500000102 in LLVMFuzzerTestOneInput /work/precis/tests/fuzz/fuzz_dataset.c:30:3
"""
HDF5_ALLOC = """0x602000000018 is located 0 bytes to the right of 8-byte region [0x602000000010,0x602000000018)
allocated by thread T0 here:
    #0 0x555500000100 in malloc (/work/build-fuzz/fuzz/fuzz_dataset+0x4a1b2c)
    #1 0x7f0000000200 in H5MM_malloc (/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5_serial.so.103+0x2222)
    #2 0x7f0000000201 in H5Dread (/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5_serial.so.103+0x9abc)
    #3 0x555500000202 in read_array /work/precis/src/data/dataset.c:640:7
"""
HEADER = "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000018\nWRITE of size 4 at 0x602000000018 thread T0\n"


def attribution():
    owner = run_fuzzers.first_owner
    check(owner(HEADER + HDF5_FRAMES + PRECIS_ALLOC) == "precis",
          "a precis buffer overflowed inside H5Dread must be precis's defect")
    check(owner(HEADER + HDF5_FRAMES + HDF5_ALLOC) == "hdf5",
          "libhdf5's own buffer overflowed inside libhdf5 is upstream's (even with precis frames below)")
    check(owner("==1==ERROR: AddressSanitizer: SEGV on unknown address\n" + HDF5_FRAMES) == "hdf5",
          "a SEGV whose first frame is libhdf5's is upstream's")
    freed = HEADER.replace("heap-buffer-overflow", "heap-use-after-free") + HDF5_FRAMES + \
        PRECIS_ALLOC.replace("allocated by thread", "freed by thread")
    check(owner(freed) == "precis", "memory freed by precis and read by libhdf5 is precis's defect")
    precis_first = HEADER + "    #0 0x1 in check_finite_f32 /work/precis/src/data/dataset.c:700:9\n" + HDF5_ALLOC
    check(owner(precis_first) == "precis", "an access by precis is precis's")
    leak = ("==1==ERROR: LeakSanitizer: detected memory leaks\nDirect leak of 8 byte(s) in 1 object(s) allocated from:\n"
            + HDF5_FRAMES)
    check(owner(leak) == "precis", "a leak with a precis frame is precis's")


def write_target(path, executions, rc=0):
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho 'INFO: fake libFuzzer target'\n"
                f"echo 'stat::number_of_executed_units: {executions}'\nexit {rc}\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def stage(build):
    return subprocess.run([sys.executable, RUNNER, build, "2"], capture_output=True, text=True)


def end_to_end():
    names = [t for t, _ in run_fuzzers.TARGETS]
    check(len(names) >= 4, f"targets {names}")
    with scratch.TemporaryDirectory(prefix="precis-fuzz-runner-") as build:
        os.makedirs(os.path.join(build, "fuzz"))
        for name in names:
            write_target(os.path.join(build, "fuzz", name), 1000)
        p = stage(build)
        check(p.returncode == 0, f"every target executed: exit {p.returncode}\n{p.stdout}{p.stderr}")
        check(all(f"{n}" in p.stdout and "1000 executions" in p.stdout for n in names), f"report lists each: {p.stdout}")
        # One target that exits at once without fuzzing.
        write_target(os.path.join(build, "fuzz", names[-1]), 0)
        p = stage(build)
        check(p.returncode == 1 and f"{names[-1]} ran zero executions" in p.stdout,
              f"zero executions must fail the stage: exit {p.returncode}\n{p.stdout}")
        # One target missing from the build.
        write_target(os.path.join(build, "fuzz", names[-1]), 1000)
        os.remove(os.path.join(build, "fuzz", names[0]))
        p = stage(build)
        check(p.returncode == 1 and "no such fuzz target" in p.stdout,
              f"a missing target must fail the stage: exit {p.returncode}\n{p.stdout}{p.stderr}")


def main():
    attribution()
    end_to_end()
    passed = 1 if not FAILURES else 0
    print(f"{passed} passed, {1 - passed} failed ({len(FAILURES)} failed checks)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
