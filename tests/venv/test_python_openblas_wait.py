"""import precis sets OPENBLAS_THREAD_TIMEOUT=4 (unless the user set it) before libprecis loads
OpenBLAS, so that OpenBLAS's idle threads sleep at once instead of spinning on sched_yield for about
0.1 s after every GEMM. Between torch's ops and beside other processes that spinning was a quarter of
an int8 verify's CPU time on the shared 2-core machine (issue 40; docs/verify.md, "Cost").

Checked in fresh processes: the variable as precis leaves it (set; a user's value kept), and the
process's CPU time while it sleeps right after threaded GEMMs (int8: OpenBLAS sgemm on the codes):
with the setting, the idle OpenBLAS threads use next to none of it."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, check  # noqa: E402

BUILD = os.environ.get("PRECIS_BUILD_DIR") or os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "build")
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")

PROBE = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import precis
a = np.random.default_rng(0).standard_normal((1, 768, 768), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((768, 768), dtype=np.float32)
idle = 0.0
for _ in range(5):
    precis.emulate(a, b, "int8")
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(0.25)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    idle += (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
print(json.dumps({"timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT"), "idle_cpu_s": idle}))
"""


def probe(extra_env):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env.update(extra_env)
    p = subprocess.run([sys.executable, "-c", PROBE, STAGE], capture_output=True, text=True, env=env, timeout=120)
    if p.returncode:
        sys.exit(f"FAIL: the probe failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ours = probe({})
    check(ours["timeout"] == "4", f"import precis sets OPENBLAS_THREAD_TIMEOUT=4 when unset (got {ours['timeout']!r})")
    users = probe({"OPENBLAS_THREAD_TIMEOUT": "28"})
    check(users["timeout"] == "28", f"a user's OPENBLAS_THREAD_TIMEOUT is kept (got {users['timeout']!r})")
    threads = int(os.environ.get("OPENBLAS_NUM_THREADS", "0") or 0) or os.cpu_count() or 1
    if threads >= 2:
        # OpenBLAS's default (2^28 cycles) spins ~0.1 s per worker after each of the 5 GEMMs: about 0.5 s
        # per worker thread when the cores are free, 0.1 s or more on a loaded 2-core machine.
        print(f"idle CPU over 5 x 0.25 s after a GEMM: {ours['idle_cpu_s']:.3f} s with precis's setting, "
              f"{users['idle_cpu_s']:.3f} s with OpenBLAS's default timeout")
        check(ours["idle_cpu_s"] < 0.05, f"OpenBLAS's idle threads sleep: {ours['idle_cpu_s']:.3f} s of CPU while the "
                                         "process slept 1.25 s after GEMMs (expected < 0.05 s)")
    else:
        print("one CPU: OpenBLAS runs no worker threads; the idle CPU is not measured")
    if FAILURES:
        sys.exit(f"FAIL: {len(FAILURES)} check(s) failed")
    print("OK")


if __name__ == "__main__":
    main()
