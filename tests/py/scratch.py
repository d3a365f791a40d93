"""Scratch space of a Python test, under the build tree and never left behind.

Every test under tests/py and tests/venv takes its temporary files from here instead of the system's
temporary directory: `scratch.mkdtemp(prefix=...)` and `scratch.TemporaryDirectory(prefix=...)` work
as tempfile's do, inside one directory per test,

    $PRECIS_BUILD_DIR/test-scratch/<py|venv>-<test name>/

which is
- removed when the test starts (what a killed earlier run of the same test left: SIGKILL cannot be
  caught), so a day of mutation runs leaves at most one test's scratch per test;
- removed when the test ends, normally or by an uncaught exception;
- removed on SIGTERM (a CTest timeout, `--stop-on-failure`) and SIGHUP, after the test's own child
  processes were stopped, and then the test dies of the signal as it would have;
- removed on SIGINT too, which stays Python's (KeyboardInterrupt: tests check that precis.main hands
  Ctrl-C back to Python): the interrupted test exits through the same end-of-test cleanup.

tempfile's default directory and TMPDIR of the child processes point into it too, so the temporary
files of a library or of a `precis`/`python -m precis` child are cleaned up with it.
Without PRECIS_BUILD_DIR (a test run by hand) the directory is made under the system's temporary
directory instead, with the same cleanup. PRECIS_KEEP_SCRATCH=1 keeps it at the end (not on a
signal) to look at what a failing test wrote; the path is printed then."""
import atexit
import os
import shutil
import signal
import sys
import tempfile as _tempfile
import time

_OWNER = os.getpid()
_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _test_name():
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    group = os.path.basename(os.path.dirname(script)) or "tests"
    return "%s-%s" % (group, os.path.splitext(os.path.basename(script))[0])


def _make_root():
    build = os.environ.get("PRECIS_BUILD_DIR")
    if build and os.path.isdir(build):
        root = os.path.join(os.path.abspath(build), "test-scratch", _test_name())
        shutil.rmtree(root, ignore_errors=True)  # a killed earlier run's
        os.makedirs(root)
        return root
    return _tempfile.mkdtemp(prefix="precis-%s-" % _test_name())


ROOT = _make_root()
# Everything that asks tempfile or TMPDIR for a place, in this process and its children.
_tempfile.tempdir = ROOT
os.environ["TMPDIR"] = ROOT


def mkdtemp(prefix="tmp", suffix=""):
    """A new directory under the test's scratch (tempfile.mkdtemp's arguments)."""
    return _tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=ROOT)


class TemporaryDirectory(_tempfile.TemporaryDirectory):
    """tempfile.TemporaryDirectory under the test's scratch."""

    def __init__(self, suffix=None, prefix=None, dir=None):
        super().__init__(suffix=suffix, prefix=prefix, dir=dir or ROOT)


def _children():
    """The pids of this process's children, whichever thread started them (Linux /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[1] == str(_OWNER):
            pids.append(int(entry))
    return pids


def _stop_children():
    """SIGTERM to the test's children, so that none keeps writing into the scratch; SIGKILL to those
    still there after 10 s (precis ends within a case on SIGTERM)."""
    pids = _children()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        for pid in list(pids):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                pids.remove(pid)
        time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def remove():
    """Removes the scratch now (the test's own process only, not a forked child)."""
    if os.getpid() == _OWNER:
        shutil.rmtree(ROOT, ignore_errors=True)


def _at_exit():
    if os.getpid() != _OWNER:
        return
    _stop_children()  # none normally; a Ctrl-C leaves the running one
    if os.environ.get("PRECIS_KEEP_SCRATCH") == "1":
        print("scratch kept: %s" % ROOT, file=sys.stderr)
        return
    remove()


def _on_signal(signum, frame):
    if os.getpid() != _OWNER:
        os._exit(128 + signum)
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    _stop_children()
    remove()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


atexit.register(_at_exit)
for _s in _SIGNALS:
    # A signal already ignored (nohup) stays ignored.
    if signal.getsignal(_s) is not signal.SIG_IGN:
        signal.signal(_s, _on_signal)
