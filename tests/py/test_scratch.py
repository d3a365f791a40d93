"""tests/py/scratch.py: a test's scratch lies under the build tree and is gone however the test ends.

A child test (this file run with --child) makes scratch the way tests do (scratch.mkdtemp,
scratch.TemporaryDirectory, tempfile.NamedTemporaryFile, and a grandchild that writes under TMPDIR
and then sleeps), says where, and waits. It is then ended by SIGTERM (as a CTest timeout does), by
SIGINT, or normally; each time no scratch is left and the grandchild is gone. A child killed with
SIGKILL leaves its scratch, and the next start of the same test removes it first.

Then every Python test is checked to take its temporary directories from scratch.py, not from
tempfile directly (which puts them under /tmp, where a killed test leaves them: issue 38)."""
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("FAIL: " + what)
    return condition


def child(mode):
    sys.path.insert(0, HERE)
    import scratch
    import tempfile
    a = scratch.mkdtemp(prefix="made-")
    with open(os.path.join(a, "big.bin"), "wb") as fh:
        fh.write(b"\0" * 100000)
    ctx = scratch.TemporaryDirectory(prefix="ctx-")
    b = ctx.__enter__()
    named = tempfile.NamedTemporaryFile(delete=False)
    named.write(b"x")
    named.close()
    # A grandchild writes under its TMPDIR, as precis or `python -m precis verify` would, and lingers.
    grandchild = subprocess.Popen(["/bin/sh", "-c", 'echo data > "$TMPDIR/grandchild.txt"; exec sleep 600'])
    deadline = time.monotonic() + 10
    while not os.path.exists(os.path.join(scratch.ROOT, "grandchild.txt")) and time.monotonic() < deadline:
        time.sleep(0.01)
    print(json.dumps({"root": scratch.ROOT, "a": a, "b": b, "named": named.name, "grandchild": grandchild.pid,
                      "sigint_is_python": signal.getsignal(signal.SIGINT) is signal.default_int_handler}), flush=True)
    if mode == "exit":
        # Exit only once the parent has looked at the scratch: exiting at once removed it before the
        # parent's checks under load (a race that failed the test, not the helper).
        sys.stdin.readline()
        grandchild.kill()
        grandchild.wait()
        return 0
    time.sleep(600)
    return 1


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def start(env):
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", env.pop("MODE")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    info = json.loads(proc.stdout.readline())
    return proc, info


def run_child(mode, sig, build, while_running=None):
    env = dict(os.environ, PRECIS_BUILD_DIR=build, MODE=mode)
    env.pop("PRECIS_KEEP_SCRATCH", None)
    proc, info = start(env)
    root = info["root"]
    expected_root = os.path.join(build, "test-scratch", "py-test_scratch")
    check(root == expected_root, "%s: scratch at %s, expected %s" % (mode, root, expected_root))
    for key in ("a", "b", "named"):
        check(info[key].startswith(root + os.sep) and os.path.exists(info[key]),
              "%s: %s (%s) is not under the scratch" % (mode, key, info[key]))
    check(os.path.exists(os.path.join(root, "grandchild.txt")), "%s: the grandchild's TMPDIR is not the scratch" % mode)
    check(info["sigint_is_python"], "%s: SIGINT is no longer Python's KeyboardInterrupt (precis.main hands it back)" % mode)
    if while_running:
        while_running(info)
    if sig is not None:
        proc.send_signal(sig)
    else:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    proc.stdin.close()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        check(False, "%s: the child did not end" % mode)
    return proc, info


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2])
    build = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "."))
    # The child's scratch is this test's name under a private build root, so that the test's own
    # scratch (none) and the child's do not meet.
    fake_build = os.path.join(build, "test-scratch", "py-test_scratch-builds")
    os.makedirs(fake_build, exist_ok=True)
    try:
        for mode, sig, code in (("signal", signal.SIGTERM, -signal.SIGTERM), ("signal", signal.SIGINT, -signal.SIGINT),
                                ("signal", signal.SIGHUP, -signal.SIGHUP), ("exit", None, 0)):
            what = "SIGTERM" if sig == signal.SIGTERM else "SIGINT" if sig == signal.SIGINT else \
                "SIGHUP" if sig == signal.SIGHUP else "normal exit"
            proc, info = run_child(mode, sig, fake_build)
            check(proc.returncode == code, "%s: the child exited %s, expected %s" % (what, proc.returncode, code))
            check(not os.path.exists(info["root"]), "%s: the scratch %s was left" % (what, info["root"]))
            time.sleep(0.1)
            check(not alive(info["grandchild"]), "%s: the grandchild %d still runs" % (what, info["grandchild"]))
            print("%s: no scratch left, the grandchild stopped" % what)

        # SIGKILL cannot be caught: the scratch stays until the same test starts again.
        proc, info = run_child("signal", signal.SIGKILL, fake_build)
        check(os.path.exists(info["a"]), "SIGKILL: expected the scratch to survive a SIGKILL")
        try:
            os.kill(info["grandchild"], signal.SIGKILL)
        except OSError:
            pass
        stale = info["a"]
        check(os.path.exists(stale), "SIGKILL: the scratch did not survive")
        proc, info = run_child("signal", signal.SIGTERM, fake_build, while_running=lambda info: check(
            not os.path.exists(stale), "SIGKILL: the next start did not remove the stale scratch %s" % stale))
        check(not os.path.exists(info["root"]), "after SIGKILL: the scratch of the next run was left")
        print("SIGKILL: the stale scratch is removed when the test starts again")
    finally:
        import shutil
        shutil.rmtree(fake_build, ignore_errors=True)

    # Every Python test takes its temporary directories from scratch.py.
    source = os.path.dirname(HERE)
    direct = re.compile(r"\btempfile\.(mkdtemp|TemporaryDirectory|mkstemp)\(")
    offenders = []
    for group in ("py", "venv"):
        for name in sorted(os.listdir(os.path.join(source, group))):
            if not name.endswith(".py") or name == "scratch.py":
                continue
            with open(os.path.join(source, group, name)) as fh:
                for no, line in enumerate(fh, 1):
                    if direct.search(line):
                        offenders.append("tests/%s/%s:%d" % (group, name, no))
    check(not offenders, "temporary directories outside the build tree (use scratch.mkdtemp / "
          "scratch.TemporaryDirectory, tests/py/scratch.py): " + ", ".join(offenders))
    if FAILURES:
        print("%d failures" % len(FAILURES))
        return 1
    print("scratch: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
