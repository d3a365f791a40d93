"""verify's memory estimate (docs/verify.md, "Memory"; issue 40) bounds what the process holds: run in a
child process on a seeded Llama shaped like a small real one (hidden 576, 9 query heads over 3 KV
heads, tied embeddings, a vocabulary of 1000: tests/venv/tiny_llama.py), the child's peak resident
set (ru_maxrss) is within 10 % of the estimate verify printed and recorded in report.json. The estimate
counts the process's own baseline (Python, torch, the libraries: most of what a small model's verify
holds), which it left out before. --max-memory is judged against the same total: a limit the
estimate without the baseline met is now refused, naming the figure. The default batch does not
depend on the baseline (the same inputs give the same batches in any process)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "py"))
sys.path.insert(0, HERE)
import scratch  # noqa: E402
from cli_checks import FAILURES, check  # noqa: E402

try:
    import numpy as np
    import torch  # noqa: F401
    import transformers  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
import precis.torch as pt  # noqa: E402
from precis import verify  # noqa: E402
from tiny_llama import seeded_gqa_llama  # noqa: E402

CHILD = r"""
import json, os, resource, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import numpy as np
from tiny_llama import seeded_gqa_llama
from precis import verify
model = seeded_gqa_llama(layers=2)
ids = np.random.default_rng(0).integers(0, 1000, (6, 64)).astype(np.int64)
res = verify.verify(model, {"*": "int8"}, ids, out=sys.argv[3])
print(json.dumps({"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "estimate": res.report["verify"]["memory_estimate"]}))
"""


def main():
    if not os.path.exists("/proc/self/status"):
        print("SKIP: needs /proc (Linux)", file=sys.stderr)
        return 77
    tmp = scratch.mkdtemp(prefix="precis-verify-memory-")
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, STAGE, HERE, os.path.join(tmp, "out")], capture_output=True,
                           text=True, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
        check(p.returncode == 0, f"the child verify: {p.stderr[-1500:]}")
        if p.returncode == 0:
            got = json.loads(p.stdout.strip().splitlines()[-1])
            est, peak = got["estimate"], got["peak"]
            print(f"peak RSS {peak / 2**20:.0f} MiB, estimate {est['bytes'] / 2**20:.0f} MiB (process baseline "
                  f"{est['baseline'] / 2**20:.0f} MiB, weights {est['weights'] / 2**20:.0f} MiB)")
            check(est["baseline"] > 100 << 20, f"the process's baseline is counted: {est['baseline']}")
            # The estimate is a sum of terms, not a measurement: within 10 % here (allocator slack, torch's
            # temporaries), over at 135M (docs/verify.md).
            check(peak <= 1.1 * est["bytes"], f"the peak RSS {peak} is within 10 % of the estimate {est['bytes']}")
            check(est["bytes"] - est["baseline"] < peak, "without the baseline the estimate was below the peak")

        model = seeded_gqa_llama(layers=2)
        chosen = pt.resolve_plan(model, {"*": "int8"})
        modules = {n: (m, im) for n, m, im in pt.linear_layers(model)}
        est = verify.MemoryEstimate(model, False, False, list(chosen), modules, 64, 1000, True,
                                    baseline=verify.process_baseline(model))
        check(est.baseline > 0 and est.total(1) - est.baseline > 0, "a baseline and a working set")
        try:
            verify.choose_batch(est, 6, max_memory=est.total(1) - est.baseline)
            check(False, "--max-memory below the baseline + one sequence is refused")
        except verify.VerifyError as e:
            check("even one sequence" in str(e) and "process" in str(e), f"the refusal names the figure: {e}")
        check(verify.choose_batch(est, 6, max_memory=est.total(6)) == 6, "a limit that fits every sample: one batch")
        other = verify.MemoryEstimate(model, False, False, list(chosen), modules, 64, 1000, True, baseline=5 << 30)
        check(verify.choose_batch(other, 64, budget=verify.VERIFY_BATCH_BUDGET)
              == verify.choose_batch(est, 64, budget=verify.VERIFY_BATCH_BUDGET), "the default batch ignores the baseline")
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
