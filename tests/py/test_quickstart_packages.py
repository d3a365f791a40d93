"""`bash cmake/quickstart.sh run` installs only what building and running need; `test` adds what
only the tests need (Python with NumPy and h5py, Chromium and a font for the HTML render test).

The script runs with stubs first on PATH: dpkg-query says every package is missing, id says the
user is not root, and sudo records what would be installed and fails, so that nothing is installed
or built (the script stops at the failed install). Also checks that .ci/run installs both lists."""
import os
import stat
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
FAILURES = []
TEST_ONLY = {"python3", "python3-numpy", "python3-h5py", "chromium", "fonts-dejavu-core"}


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def stub(directory, name, body):
    path = os.path.join(directory, name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def packages(path):
    with open(path) as fh:
        return {line.strip() for line in fh if line.strip() and not line.startswith("#")}


def requested(mode):
    """The packages quickstart.sh MODE asks sudo apt-get to install when all are missing."""
    with scratch.TemporaryDirectory(prefix="precis-quickstart-") as bin_dir:
        record = os.path.join(bin_dir, "requested.txt")
        stub(bin_dir, "dpkg-query", "exit 1")
        stub(bin_dir, "id", "echo 1000")
        # `apt-get update` succeeds; the install is recorded and fails, which ends the script.
        stub(bin_dir, "sudo", 'case "$*" in *" install "*) echo "$@" >> "%s"; exit 1;; esac; exit 0' % record)
        env = dict(os.environ, PATH=bin_dir + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
        p = subprocess.run(["bash", os.path.join(SOURCE, "cmake", "quickstart.sh"), mode], capture_output=True,
                           text=True, env=env, timeout=60)
        check(p.returncode != 0, "quickstart.sh %s went on after the stubbed install failed" % mode)
        if not os.path.exists(record):
            check(False, "quickstart.sh %s did not try to install anything: %s" % (mode, p.stderr[-2000:]))
            return set()
        with open(record) as fh:
            words = fh.read().split()
        return set(words[words.index("install") + 1:]) - {"-y", "-qq", "--no-install-recommends"} \
            if "install" in words else set()


def main():
    run_list = packages(os.path.join(SOURCE, "cmake", "debian-packages.txt"))
    test_list = packages(os.path.join(SOURCE, "cmake", "debian-packages-test.txt"))
    check(not (run_list & TEST_ONLY), "the run list holds test-only packages: %s" % sorted(run_list & TEST_ONLY))
    check(TEST_ONLY <= test_list, "the test list lacks %s" % sorted(TEST_ONLY - test_list))

    for_run = requested("run")
    check(for_run == run_list, "quickstart.sh run installs %s, expected %s" % (sorted(for_run), sorted(run_list)))
    for_test = requested("test")
    check(for_test == run_list | test_list,
          "quickstart.sh test installs %s, expected %s" % (sorted(for_test), sorted(run_list | test_list)))

    with open(os.path.join(SOURCE, ".ci", "run")) as fh:
        ci = fh.read()
    check("cmake/debian-packages.txt" in ci and "cmake/debian-packages-test.txt" in ci, ".ci/run installs both lists")

    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
