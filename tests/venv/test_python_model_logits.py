"""Logit workloads in plain runs (issue 30): precis import --model --activations with the captured
inputs of lm_head (the final hidden states, as precis.torch.capture records them), then precis run:
the lm_head rows carry KL(ref||q), KL(q||ref) (mean, p99, max per token) and top-1 agreement.

Checked independently of precis's C code, on a small Llama built here (seeded weights):
- the dataset's c_ref is the model's own logits (lm_head of the captured hidden states);
- each lm_head row's logit metrics equal a NumPy computation from the dataset's arrays: C by
  precis.emulate(a, b, recipe) (bit for bit what the run evaluates), softmax in float64, KL both
  ways per token, NumPy's percentile, argmax agreement; worst and mean over held-out samples;
- with only lm_head emulated, verify's end-to-end KL is the same quantity from the model's fp32
  logits: it agrees to a few parts in 1e4 or better;
- --require kl_mean / top1_agree judge the lm_head rows only; compare reads the rows back;
- a model with tied embeddings (no lm_head.weight in the checkpoint) gets its lm_head from
  model.embed_tokens.weight, and the import says so;
- a capture without lm_head imports as before: no logit workload.
"""
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, PRECIS, check  # noqa: E402

try:
    import h5py
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
import precis  # noqa: E402
import precis.torch as pt  # noqa: E402
from precis import verify  # noqa: E402

RECIPES = ["bf16", "fp8", "int8"]
KEYS = ["kl_mean", "kl_p99", "kl_max", "rkl_mean", "rkl_p99", "rkl_max", "top1_agree"]


from tiny_llama import tiny_llama as _tiny_llama  # noqa: E402
from report_schema import check_report_schema  # noqa: E402


def tiny_llama(tied):
    return _tiny_llama(layers=2, tied=tied)


def run(args, expect=0):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == expect, f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}: {p.stderr[-1500:]}")
    return p


def numpy_logit_metrics(c, r):
    """Per sample [tokens, vocab] -> dict of the 7 metrics, in float64 with NumPy."""
    c, r = c.astype(np.float64), r.astype(np.float64)

    def log_softmax(x):
        z = x - x.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))
    lp, lq = log_softmax(r), log_softmax(c)
    kl = np.maximum((np.exp(lp) * (lp - lq)).sum(-1), 0)
    rkl = np.maximum((np.exp(lq) * (lq - lp)).sum(-1), 0)
    return {"kl_mean": kl.mean(), "kl_p99": np.percentile(kl, 99), "kl_max": kl.max(), "rkl_mean": rkl.mean(),
            "rkl_p99": np.percentile(rkl, 99), "rkl_max": rkl.max(),
            "top1_agree": float(np.mean(np.argmax(r, -1) == np.argmax(c, -1)))}


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def main():
    tmp = scratch.mkdtemp(prefix="precis-logits-")
    model = tiny_llama(tied=False)
    ids = torch.randint(0, 96, (12, 32), generator=torch.Generator().manual_seed(3))
    cap = pt.capture(model, [ids], gradients=False)
    acts = os.path.join(tmp, "acts.npz")
    cap.save(acts)
    ckpt = os.path.join(tmp, "ckpt")
    model.save_pretrained(ckpt)
    ds = os.path.join(tmp, "llama.h5")
    p = run(["import", "--model", ckpt, "--activations", acts, "-o", ds, "-q"])
    check("lm_head: the output projection" in p.stdout and "logits" in p.stdout, f"import summary: {p.stdout}")

    with h5py.File(ds, "r") as f:
        g = f["workloads/lm_head"]
        check(g.attrs.get("output_kind") in ("logits", b"logits"), f"lm_head output_kind {g.attrs.get('output_kind')}")
        check("output_kind" not in f["workloads/model.layers.0.self_attn.q_proj"].attrs, "q_proj is not a logit workload")
        a, b, c_ref = g["a"][()], g["b"][()], g["c_ref"][()]
    with torch.no_grad():
        logits = model(ids).logits.double().numpy()
    check(a.shape == (12, 32, 64) and b.shape == (64, 96) and c_ref.shape == (12, 32, 96), f"shapes {a.shape} {b.shape}")
    # c_ref is the model's own logits (fp32 forward vs float64 GEMM of the same hidden states)
    check(np.allclose(c_ref, logits, rtol=1e-4, atol=1e-4 * np.abs(logits).max()),
          f"c_ref vs the model's logits: max diff {np.abs(c_ref - logits).max()}")

    out = os.path.join(tmp, "rep")
    run(["run", ds, "--recipes", ",".join(RECIPES), "-o", out, "-q"])
    rep = json.load(open(os.path.join(out, "report.json")))
    rows = {(r["workload"], r["recipe"]): r for r in rep["rows"]}
    check(all("logits" not in r for r in rep["rows"] if r["workload"] != "lm_head"), "only lm_head rows carry logits")
    measured = {}
    for recipe in RECIPES:
        row = rows[("lm_head", recipe)]
        check("logits" in row, f"lm_head {recipe}: no logits in the row")
        if "logits" not in row:
            continue
        c = np.asarray(precis.emulate(a, b, recipe), np.float64)
        per = [numpy_logit_metrics(c[s], c_ref[s]) for s in range(a.shape[0])]
        for key in KEYS:
            vals = np.array([m[key] for m in per])
            worst = vals.min() if key == "top1_agree" else vals.max()
            got = row["logits"][key]
            check(close(got["worst"], worst, 1e-9) and close(got["mean"], vals.mean(), 1e-9),
                  f"lm_head {recipe} {key}: precis worst {got['worst']} mean {got['mean']}, NumPy {worst} {vals.mean()}")
        measured[recipe] = row["logits"]
    # The formats order as expected: bf16 closest to the reference, and fp8 visibly changes the output.
    if len(measured) == len(RECIPES):
        check(measured["bf16"]["kl_mean"]["mean"] < measured["fp8"]["kl_mean"]["mean"],
              f"bf16 KL {measured['bf16']['kl_mean']} >= fp8 {measured['fp8']['kl_mean']}")
        check(measured["fp8"]["kl_mean"]["mean"] > 1e-6, f"fp8 KL {measured['fp8']['kl_mean']}")
    for f in ("report.csv", "report.md", "report.html"):
        text = open(os.path.join(out, f)).read()
        check("kl_mean" in text and "top1_agree" in text, f"{f} shows the logit metrics")

    # verify with only lm_head emulated: the same logits C against the fp32 model's (not float64's).
    res = verify.verify(model, {"lm_head": "fp8"}, ids.numpy(), isolated=False)
    e2e = res.end_to_end["metrics"]
    mean_over_tokens = measured["fp8"]["kl_mean"]["mean"]  # every sample has 32 tokens
    print(f"fp8 lm_head: run kl_mean {mean_over_tokens:.6g} rkl_mean {measured['fp8']['rkl_mean']['mean']:.6g} "
          f"top1 {measured['fp8']['top1_agree']['mean']:.6g}; verify (lm_head only) kl_mean {e2e['kl_mean']:.6g} "
          f"rkl_mean {e2e['rkl_mean']:.6g} top1 {e2e['top1_agree']:.6g}")
    check(close(mean_over_tokens, e2e["kl_mean"], 1e-3), f"run's kl_mean {mean_over_tokens} vs verify's {e2e['kl_mean']}")
    check(close(measured["fp8"]["top1_agree"]["mean"], e2e["top1_agree"], 1e-2), "top-1 agreement: run vs verify")

    # Gates on logit metrics judge the lm_head rows only.
    loose = os.path.join(tmp, "loose")
    run(["run", ds, "--recipes", "fp8", "--require", "kl_mean<=10", "--require", "top1_agree>=0", "-o", loose, "-q"])
    strict = os.path.join(tmp, "strict")
    run(["run", ds, "--recipes", "fp8", "--require", "kl_mean<=1e-12", "-o", strict, "-q"], expect=3)
    srows = json.load(open(os.path.join(strict, "report.json")))["rows"]
    check([r["workload"] for r in srows if r["verdict"] == "fail"] == ["lm_head"],
          f"kl_mean<=1e-12 fails only lm_head: {[(r['workload'], r['verdict']) for r in srows]}")
    # accept judges the lm_head's logits too: an unmeetable KL fails it, a loose one passes.
    acc = ["accept", ds, "--workload", "lm_head", "--recipe", "fp8", "--max-batch", "1", "--repeats", "1",
           "--min-samples", "1", "--max-samples", "2", "--backend", "cpu", "--quiet"]
    run(acc + ["--require", "kl_mean<=1e-12", "-o", os.path.join(tmp, "acc-strict")], expect=3)
    strict_acc = open(os.path.join(tmp, "acc-strict", "accept.md")).read()
    check("kl_mean" in strict_acc, "accept.md names the failed kl_mean")
    run(acc + ["--require", "kl_mean<=10", "-o", os.path.join(tmp, "acc-loose")])
    p = run(["compare", os.path.join(out, "report.json"), os.path.join(out, "report.json")])
    check(p.returncode == 0, "compare reads the logit rows back")
    # A report whose fp8 head agrees on top-1 far less often: compare flags it (exit 3, naming it).
    worse = json.load(open(os.path.join(out, "report.json")))
    for r in worse["rows"]:
        if r["workload"] == "lm_head" and r["recipe"] == "fp8":
            r["logits"]["top1_agree"]["worst"] = 0.5 * r["logits"]["top1_agree"]["worst"]
    with open(os.path.join(tmp, "worse.json"), "w") as f:
        json.dump(worse, f)
    p = run(["compare", os.path.join(out, "report.json"), os.path.join(tmp, "worse.json")], expect=3)
    check("top1_agree worst" in p.stdout.replace("\\_", "_"), f"compare names the top-1 drop: {p.stdout[-600:]}")

    # report.json against the schema, with Debian's python3 jsonschema when it has it.
    check_report_schema(os.path.join(out, "report.json"), check)

    # Tied embeddings: no lm_head.weight; the head comes from model.embed_tokens.weight.
    tied = tiny_llama(tied=True)
    tied_ckpt = os.path.join(tmp, "tied")
    tied.save_pretrained(tied_ckpt)
    from safetensors import safe_open
    with safe_open(os.path.join(tied_ckpt, "model.safetensors"), "np") as f:
        names = list(f.keys())
        embed = f.get_tensor("model.embed_tokens.weight")
    check("lm_head.weight" not in names, "the tied checkpoint holds no lm_head.weight")
    tied_acts = os.path.join(tmp, "tied_acts")  # a directory of <layer>.npy this time
    pt.capture(tied, [ids], gradients=False).save(tied_acts)
    tied_ds = os.path.join(tmp, "tied.h5")
    p = run(["import", "--model", tied_ckpt, "--activations", tied_acts, "-o", tied_ds, "-q"])
    check("tied to the input embeddings" in p.stdout and "model.embed_tokens.weight" in p.stdout,
          f"the import says the head is tied: {p.stdout}")
    with h5py.File(tied_ds, "r") as f:
        g = f["workloads/lm_head"]
        check(np.array_equal(g["b"][()], embed.T), "tied lm_head: b = E^T")
        src = json.loads(g.attrs["source"])
        check(src.get("tensor") == "model.embed_tokens.weight", f"source {src}")
        ta, tref = g["a"][()], g["c_ref"][()]
    with torch.no_grad():
        tlogits = tied(ids).logits.double().numpy()
    check(np.allclose(tref, tlogits, rtol=1e-4, atol=1e-4 * np.abs(tlogits).max()), "tied: c_ref is the model's logits")
    tied_out = os.path.join(tmp, "tied_rep")
    run(["run", tied_ds, "--recipes", "fp8", "--workloads", "lm_head", "-o", tied_out, "-q"])
    trow = json.load(open(os.path.join(tied_out, "report.json")))["rows"][0]
    tc = np.asarray(precis.emulate(ta, np.ascontiguousarray(embed.T), "fp8"), np.float64)
    want = max(numpy_logit_metrics(tc[s], tref[s])["kl_max"] for s in range(ta.shape[0]))
    check(close(trow["logits"]["kl_max"]["worst"], want, 1e-9), f"tied: kl_max {trow['logits']['kl_max']} vs NumPy {want}")

    # Without lm_head in the capture: as before, no logit workload (and the tied head is not added).
    no_head = os.path.join(tmp, "no_head.npz")
    pt.capture(tied, [ids], gradients=False, exclude=["lm_head"]).save(no_head)
    nh_ds = os.path.join(tmp, "no_head.h5")
    p = run(["import", "--model", tied_ckpt, "--activations", no_head, "-o", nh_ds, "-q"])
    with h5py.File(nh_ds, "r") as f:
        check("lm_head" not in f["workloads"] and "output projection" not in p.stdout, "no lm_head captured: none imported")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok: lm_head logit workloads checked against NumPy and verify")
    return 0


if __name__ == "__main__":
    sys.exit(main())
