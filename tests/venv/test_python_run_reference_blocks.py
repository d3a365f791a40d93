"""precis run reads a workload's references (c_ref, ab_abs, grad) a block of samples at a time
(--reference-block, issue 40): the rows are those of a run that holds them whole, and a damaged
reference is refused with the same error whatever the block.

On a model's dataset (tests/venv/tiny_llama.py's seeded_gqa_llama: hidden 576, 9 query heads over 3
KV heads, tied embeddings, an lm_head over 1000 logits), imported from a capture with gradients
(9 held-out samples of 16 tokens, 2 calibration samples), run twice with int8, bf16 and fp64 (an
out=fp64 output): once with every reference whole (--reference-block 1G) and once with blocks of
700000 bytes, which gives lm_head blocks of 2 samples (the last one of 1), gate/up_proj blocks of 1,
q/o/down_proj blocks of 3, and k/v_proj one block. Checked:
- report.json: every row equal field by field except its timings and memory figures, the settings
  equal (the block decides no row, so a resume may change it);
- --save-outputs: the same outputs, bit for bit;
- the blocked run prints its memory estimate naming the block; the whole one prints none;
- damaged references, each refused by both runs with the same message and exit code 2: a NaN in
  lm_head's c_ref (first block) beside a NaN in its grad (last block), where a whole load reports
  grad (its check comes first); a NaN in c_ref (first block) beside a checksum failure in ab_abs's
  last chunk, where it reports ab_abs (a read error outranks a value).
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
from cli_checks import FAILURES, PRECIS, check  # noqa: E402

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
import precis.torch as pt  # noqa: E402
from tiny_llama import seeded_gqa_llama  # noqa: E402

FAST = ["--backend", "cpu", "--recipes", "int8,bf16,fp64", "--min-samples", "1", "--max-samples", "1",
        "--max-time-ms", "1"]
BLOCK = "700000"  # bytes: lm_head's sample is 16 x 1000 x (8 + 8 + 4) = 320000 bytes
MEASURED = {"time", "tflops", "memory"}  # a row's measurements, not its results


def run(args, expect=0):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == expect, f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}: {p.stderr[-1500:]}")
    return p


def compare_reports(whole, blocked):
    a, b = (json.load(open(os.path.join(d, "report.json"))) for d in (whole, blocked))
    check(len(a["rows"]) == len(b["rows"]) > 0, f"rows: {len(a['rows'])} whole, {len(b['rows'])} blocked")
    for x, y in zip(a["rows"], b["rows"]):
        for key in sorted(set(x) | set(y)):
            if key not in MEASURED:
                check(x.get(key) == y.get(key), f"{x.get('workload')} {x.get('recipe')}: {key} differs: "
                      f"{str(x.get(key))[:300]} (whole) vs {str(y.get(key))[:300]} (blocked)")
    check(a["settings"] == b["settings"], "the settings differ")
    check(a["dataset"] == b["dataset"] and a["complete"] and b["complete"], "dataset or complete")
    logit_rows = [r for r in b["rows"] if r["workload"] == "lm_head" and r["status"] == "ok"]
    check(len(logit_rows) == 3 and all((r.get("logits") or {}).get("kl_mean") for r in logit_rows),
          "lm_head's rows carry the logit metrics")
    check(all(r.get("loss_change") for r in logit_rows), "lm_head's rows carry the loss change (grad)")


def compare_outputs(whole, blocked):
    with h5py.File(whole, "r") as f, h5py.File(blocked, "r") as g:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        check(len(names) == 3 * 8, f"saved outputs: {len(names)}")
        for n in names:
            x, y = f[n][()], g[n][()]
            check(x.dtype == y.dtype and np.array_equal(x.view(np.uint8), y.view(np.uint8)), f"saved output {n} differs")


def refused_alike(ds, tmp, what, wants):
    errors = []
    for label, block in (("whole", "1G"), ("blocked", BLOCK)):
        p = run(["run", ds, "-o", os.path.join(tmp, f"bad-{label}"), "--force", "--quiet", "--reference-block", block]
                + FAST, expect=2)
        lines = [line for line in p.stderr.splitlines() if line.startswith("precis run: ") and "/workloads/" in line]
        errors.append(lines[-1] if lines else p.stderr[-500:])
    check(errors[0] == errors[1], f"{what}: whole and blocked runs refuse differently:\n  {errors[0]}\n  {errors[1]}")
    check(all(w in errors[1] for w in wants), f"{what}: the error does not say {wants}: {errors[1]}")


def main():
    tmp = scratch.mkdtemp(prefix="precis-reference-blocks-")
    try:
        model = seeded_gqa_llama(layers=1)
        ids = torch.randint(0, 1000, (11, 16), generator=torch.Generator().manual_seed(5))
        cap = pt.capture(model, [ids[:6], ids[6:]])
        cap.save(os.path.join(tmp, "acts.npz"), grads=os.path.join(tmp, "grads.safetensors"))
        ckpt = os.path.join(tmp, "ckpt")
        model.save_pretrained(ckpt)
        ds = os.path.join(tmp, "ds.h5")
        run(["import", "--model", ckpt, "--activations", os.path.join(tmp, "acts.npz"), "--gradients",
             os.path.join(tmp, "grads.safetensors"), "--calib", "2", "-o", ds, "-q"])
        with h5py.File(ds, "r") as f:
            check(f["workloads/lm_head/c_ref"].shape == (9, 16, 1000) and "grad" in f["workloads/lm_head"],
                  "lm_head: 9 samples of 16 x 1000 with grad")

        whole, blocked = os.path.join(tmp, "whole"), os.path.join(tmp, "blocked")
        p = run(["run", ds, "-o", whole, "--reference-block", "1G", "--save-outputs", whole + ".h5"] + FAST)
        check("in blocks of samples" not in p.stderr, f"a run with every reference whole prints no estimate: {p.stderr[:400]}")
        p = run(["run", ds, "-o", blocked, "--reference-block", BLOCK, "--save-outputs", blocked + ".h5"] + FAST)
        check("references held at most 684 KiB at a time" in p.stderr and "6 of 8 workloads in blocks of samples" in p.stderr,
              f"the blocked run's estimate: {p.stderr[:600]}")
        compare_reports(whole, blocked)
        compare_outputs(whole + ".h5", blocked + ".h5")

        # A NaN in c_ref's first block and one in grad's last: a whole load checks grad first.
        bad = os.path.join(tmp, "bad.h5")
        shutil.copy(ds, bad)
        with h5py.File(bad, "r+") as f:
            f["workloads/lm_head/c_ref"][0, 0, 0] = np.nan
            f["workloads/lm_head/grad"][8, 15, 999] = np.nan
        refused_alike(bad, tmp, "NaN in c_ref and in grad", ["/workloads/lm_head/grad", "[8,15,999]", "NaN"])

        # A NaN in c_ref's first block and a damaged last chunk of ab_abs: the read error comes first.
        shutil.copy(ds, bad)
        with h5py.File(bad, "r+") as f:
            f["workloads/lm_head/c_ref"][0, 0, 0] = np.nan
            chunks = f["workloads/lm_head/ab_abs"].id
            info = chunks.get_chunk_info(chunks.get_num_chunks() - 1)
            at = info.byte_offset + info.size // 2
        with open(bad, "r+b") as f:
            f.seek(at)
            byte = f.read(1)
            f.seek(at)
            f.write(bytes([byte[0] ^ 0xFF]))
        refused_alike(bad, tmp, "NaN in c_ref, checksum in ab_abs", ["/workloads/lm_head/ab_abs", "checksum failed"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
