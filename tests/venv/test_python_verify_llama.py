"""precis.torch and verify on a small causal LM built here (transformers' Llama, 3 layers, hidden 64,
seeded weights, token ids as inputs). Checked independently of precis.endtoend:

- capture: each layer's inputs are what a forward pre-hook of the test's own sees; dL/dY is the
  gradient of transformers' own `labels=` loss at the layer's output (retain_grad); padded positions
  (attention mask) are never recorded; the final outputs are the logits;
- emulate: inside the block each planned layer's output is precis.emulate(its input, W^T, recipe)
  (+ bias) bit for bit; outside it the model computes exactly what it computed before;
- verify: KL(ref||q), KL(q||ref) (mean, p99, max), top-1 agreement, top-5 overlap and delta cross-
  entropy recomputed from the two models' logits with PyTorch in float64; cumulative error >=
  isolated error on the last layers; the first crossing is the first layer over the threshold;
- gates: a loose one passes, an impossible one fails with exit 3, one sample is "undecided".
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
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
# the package as the build stages it (python/CMakeLists.txt), or PRECIS_PY_STAGE: the installed wheel
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
import precis  # noqa: E402
import precis.torch as pt  # noqa: E402
from precis import endtoend, verify  # noqa: E402


from tiny_llama import tiny_llama as _tiny_llama  # noqa: E402
from report_schema import check_report_schema  # noqa: E402


def tiny_llama():
    return _tiny_llama(layers=3, tied=False)


def independent_logit_metrics(ref, q, labels):
    """From the two models' logits with PyTorch in float64 (not precis.endtoend's code)."""
    r, c = torch.from_numpy(ref).double(), torch.from_numpy(q).double()
    lp, lq = torch.log_softmax(r, -1), torch.log_softmax(c, -1)
    kl = torch.nn.functional.kl_div(lq, lp, log_target=True, reduction="none").sum(-1).flatten().numpy()
    rkl = torch.nn.functional.kl_div(lp, lq, log_target=True, reduction="none").sum(-1).flatten().numpy()
    top1 = (r.argmax(-1) == c.argmax(-1)).double().mean().item()
    # top 5 with ties to the lower token id (the logits of a bf16 output tie often)
    tr = torch.sort(r, dim=-1, descending=True, stable=True).indices[..., :5]
    tq = torch.sort(c, dim=-1, descending=True, stable=True).indices[..., :5]
    top5 = (tr.unsqueeze(-1) == tq.unsqueeze(-2)).any(-1).double().sum(-1).div(5).mean().item()
    lab = torch.from_numpy(labels)
    keep = lab >= 0
    ce_r = torch.nn.functional.cross_entropy(r[keep], lab[keep]).item()
    ce_q = torch.nn.functional.cross_entropy(c[keep], lab[keep]).item()
    return {"kl_mean": kl.mean(), "kl_p99": np.percentile(kl, 99), "kl_max": kl.max(), "rkl_mean": rkl.mean(),
            "rkl_p99": np.percentile(rkl, 99), "rkl_max": rkl.max(), "top1_agree": top1, "top5_overlap": top5,
            "ce_delta": ce_q - ce_r}


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-15


def check_capture(model):
    ids = torch.randint(0, 96, (3, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0  # sequence 1 has 9 real tokens, then padding (right padding)
    batch = {"input_ids": ids, "attention_mask": mask}
    # The test's own record: inputs by pre-hook, outputs kept with retain_grad, transformers' loss.
    seen_in, seen_out = {}, {}
    hooks = []
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_pre_hook(lambda mod, a, n=name: seen_in.__setitem__(n, a[0].detach().clone())))

            def keep(mod, a, y, n=name):
                y.retain_grad()
                seen_out[n] = y
            hooks.append(m.register_forward_hook(keep))
    labels = ids.clone()
    labels[mask == 0] = -100
    loss = model(**batch, labels=labels).loss
    loss.backward()
    for h in hooks:
        h.remove()
    model.zero_grad(set_to_none=True)

    cap = pt.capture(model, [batch], tokens=9)  # a causal LM: gradients of the next-token loss by default
    acts, grads = cap.arrays(), cap.grad_arrays()
    layers = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    check(sorted(n for n in acts if n != "@outputs") == sorted(layers), f"captured layers {sorted(acts)}")
    check(all(p.grad is None for p in model.parameters()), "capture leaves no .grad on the parameters")
    for name in layers:
        # Every sequence has >= 9 real tokens: samples are their first 9 positions, padding never included.
        want = seen_in[name][:, :9].float().numpy()
        check(acts[name].shape == want.shape and np.array_equal(acts[name], want), f"{name}: captured inputs")
        g = seen_out[name].grad[:, :9].float().numpy()
        check(grads[name].shape == g.shape and np.allclose(grads[name], g, rtol=1e-5, atol=1e-9 * np.abs(g).max()),
              f"{name}: dL/dY differs from autograd of transformers' loss (max diff {np.abs(grads[name] - g).max()})")
    logits = model(**batch).logits.detach()[:, :9].numpy()
    check(np.array_equal(cap.output_array(), logits) and cap.output_kind == "logits", "final outputs are the logits")
    # pack=True: the 12 + 9 + 12 real positions in order, cut into samples of 8 (33 -> 4 samples, 1 dropped).
    packed = pt.capture(model, [batch], tokens=8, pack=True, gradients=False)
    x = packed.arrays()["model.layers.0.self_attn.q_proj"]
    real = torch.cat([seen_in["model.layers.0.self_attn.q_proj"][i][mask[i].bool()] for i in range(3)])
    check(x.shape == (4, 8, 64) and np.array_equal(x.reshape(-1, 64), real[:32].numpy()) and packed.dropped_rows == 1,
          f"pack=True: shape {x.shape}, dropped {packed.dropped_rows}")
    # A too-short sequence is skipped (pack=False), counted.
    short = pt.capture(model, [batch], tokens=10, gradients=False)
    check(short.arrays()["lm_head"].shape[0] == 2 and short.skipped == 1, "a sequence with 9 real tokens < 10 is skipped")
    tmp = scratch.mkdtemp(prefix="precis-llama-")
    cap.save(os.path.join(tmp, "acts.npz"), grads=os.path.join(tmp, "grads.safetensors"),
             outputs=os.path.join(tmp, "logits.npy"))
    z = np.load(os.path.join(tmp, "acts.npz"))
    meta = json.loads(str(z["@capture"]))
    check(meta["model_class"] == "LlamaForCausalLM" and meta["dtype"] == "float32" and meta["loss"] == "causal_lm_loss",
          f"metadata {meta}")
    check(np.array_equal(np.load(os.path.join(tmp, "logits.npy")), logits), "outputs file")


def main():
    model = tiny_llama()
    check_capture(model)
    ids = torch.randint(0, 96, (24, 32), generator=torch.Generator().manual_seed(2)).numpy()
    layers = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    plan = {"*": "fp8"}

    # emulate: bit for bit precis.emulate(input, W^T) + bias; the model restored on exit.
    before = model(torch.from_numpy(ids[:4])).logits.detach()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    record = {}
    with torch.no_grad(), pt.emulate(model, plan, record=record) as chosen:
        cap_q = pt.capture(model, [torch.from_numpy(ids[:4])], gradients=False)
        emulated = model(torch.from_numpy(ids[:4])).logits
    check(sorted(chosen) == sorted(layers) and set(chosen.values()) == {"fp8"}, f"plan resolved to {chosen}")
    acts = cap_q.arrays()
    for name in layers:
        w = dict(model.named_modules())[name].weight.detach().numpy()
        want = precis.emulate(acts[name], np.ascontiguousarray(w.T), "fp8")
        got = record[name][0]  # the first call: inside capture
        check(got.dtype == np.float32 and np.array_equal(got.view(np.uint32), np.asarray(want, np.float32).view(np.uint32)),
              f"{name}: the emulated GEMM is not precis.emulate bit for bit")
    check(not torch.equal(emulated, before), "fp8 changes the logits")
    after = model(torch.from_numpy(ids[:4])).logits.detach()
    check(torch.equal(after, before) and all(torch.equal(state[k], v) for k, v in model.state_dict().items())
          and all("forward" not in m.__dict__ for m in model.modules()), "the model is restored exactly on exit")

    # verify against an independent computation.
    tmp = scratch.mkdtemp(prefix="precis-verify-llama-")
    res = verify.verify(model, plan, ids, out=os.path.join(tmp, "rep"), require=["kl_mean<=10", "top1_agree>=0.2"],
                        layer_threshold=0.05)
    e2e = res.end_to_end
    with torch.no_grad():
        ref = model(torch.from_numpy(ids)).logits.numpy()
        with pt.emulate(model, plan):
            q = model(torch.from_numpy(ids)).logits.numpy()
    labels = np.full(ids.shape, -100)
    labels[:, :-1] = ids[:, 1:]
    want = independent_logit_metrics(ref, q, labels)
    check(e2e["kind"] == "logits" and e2e["samples"] == 24 and e2e["tokens"] == 24 * 32, f"e2e kind/samples {e2e['kind']}")
    for key, value in want.items():
        check(close(e2e["metrics"][key], value), f"{key}: verify {e2e['metrics'][key]}, independent {value}")
    check(want["kl_mean"] > 1e-4 and want["top1_agree"] < 1, f"fp8 visibly changes the output (kl {want['kl_mean']})")
    # per sample: sample 3's KL from the independent computation
    kl3 = torch.nn.functional.kl_div(torch.log_softmax(torch.from_numpy(q[3]).double(), -1),
                                     torch.log_softmax(torch.from_numpy(ref[3]).double(), -1), log_target=True,
                                     reduction="none").sum(-1)
    check(close(e2e["per_sample"][3]["kl_mean"], kl3.mean().item()), "per-sample KL")
    check([g["verdict"] for g in e2e["gates"]] == ["pass", "pass"] and res.exit_code() == 0, f"gates {e2e['gates']}")

    per = {e["layer"]: e for e in res.per_layer}
    check(list(per) == layers, "per_layer in model order")
    first = per[layers[0]]
    check(close(first["cumulative"]["rel_fro"]["worst"], first["isolated"]["rel_fro"]["worst"], 1e-12),
          "the first layer sees the reference's inputs: cumulative == isolated")
    last = layers[-8:]  # the last block and the head
    for name in last:
        check(per[name]["cumulative"]["rel_fro"]["worst"] >= per[name]["isolated"]["rel_fro"]["worst"],
              f"{name}: cumulative {per[name]['cumulative']['rel_fro']['worst']} < isolated "
              f"{per[name]['isolated']['rel_fro']['worst']}")
    over = [n for n in layers if per[n]["cumulative"]["rel_fro"]["worst"] > 0.05]
    fc = res.report["verify"]["first_crossing"]
    check((fc is None and not over) or (fc is not None and over and fc["layer"] == over[0]), f"first crossing {fc}, over {over}")

    # The report: rows of precis run with cumulative beside, read back by precis compare.
    rep = json.load(open(os.path.join(tmp, "rep", "report.json")))
    check(len(rep["rows"]) == len(layers) and all("cumulative" in r and r["layer"] in per for r in rep["rows"]),
          "report rows: one per layer with its cumulative error")
    for f in ("report.csv", "report.md", "report.html"):
        check(os.path.getsize(os.path.join(tmp, "rep", f)) > 0, f"{f} written")
    html = open(os.path.join(tmp, "rep", "report.html")).read()
    check("<svg" in html and "cumulative" in html and "<script" not in html, "report.html has the depth chart")
    # report.json against docs/report-schema.json, with the jsonschema of Debian's python3 (CI has
    # python3-jsonschema; the venv does not need it).
    check_report_schema(os.path.join(tmp, "rep", "report.json"), check)
    p = subprocess.run([PRECIS, "compare", os.path.join(tmp, "rep", "report.json"), os.path.join(tmp, "rep", "report.json")],
                       capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 0, f"precis compare reads the verify report: {p.stderr[-500:]}")

    # --reference fp64: the reference logits from the model in float64.
    import copy
    r64 = verify.verify(model, plan, ids[:8], reference="fp64", isolated=False)
    with torch.no_grad():
        ref64 = copy.deepcopy(model).double()(torch.from_numpy(ids[:8])).logits.numpy()
        ref32 = model(torch.from_numpy(ids[:8])).logits.numpy()
        with pt.emulate(model, plan):  # 8 sequences in one forward, as verify runs them
            q8 = model(torch.from_numpy(ids[:8])).logits.numpy()
    want64 = independent_logit_metrics(ref64, q8, labels[:8])
    check(r64.end_to_end["reference"] == "fp64" and close(r64.end_to_end["metrics"]["kl_mean"], want64["kl_mean"])
          and not close(want64["kl_mean"], independent_logit_metrics(ref32, q8, labels[:8])["kl_mean"], 1e-12),
          f"fp64 reference: kl_mean {r64.end_to_end['metrics']['kl_mean']}, independent {want64['kl_mean']}")

    # Gates: impossible -> fail; one sample -> too few to decide.
    j = endtoend.judge(res.outputs, ["kl_mean<=1e-12", "top1_agree>=1"])
    check([g["verdict"] for g in j] == ["fail", "fail"], f"impossible gates: {j}")
    one = endtoend.Outputs.compare(ref[:1], q[:1], labels=labels[:1], kind="logits")
    check(endtoend.judge(one, ["kl_mean<=10"])[0]["verdict"] == "undecided", "one sample: too few samples to decide")
    # A limit inside the bootstrap interval is undecided, outside on the good side passes.
    kl_s = np.array([s["kl_mean"] for s in e2e["per_sample"]])
    mid = float(e2e["metrics"]["kl_mean"])
    j = endtoend.judge(res.outputs, [f"kl_mean<={mid}", f"kl_mean<={kl_s.max() * 2}"])
    check([g["verdict"] for g in j] == ["undecided", "pass"], f"bound semantics: {j}")

    # The command line: exit 3 when a gate is not met.
    np.save(os.path.join(tmp, "ids.npy"), ids)
    ckpt = os.path.join(tmp, "ckpt")
    model.save_pretrained(ckpt)
    json.dump(plan, open(os.path.join(tmp, "plan.json"), "w"))
    cmd = [sys.executable, "-m", "precis", "verify", "--model", ckpt, "--plan", os.path.join(tmp, "plan.json"),
           "--inputs", os.path.join(tmp, "ids.npy"), "-o", os.path.join(tmp, "cli")]
    p = subprocess.run(cmd + ["--require", "top1_agree>=0.9999"], capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 3 and "top1_agree" in p.stdout, f"CLI: exit {p.returncode}, expected 3: {p.stderr[-800:]}")
    cli = json.load(open(os.path.join(tmp, "cli", "report.json")))
    check(close(cli["end_to_end"]["metrics"]["kl_mean"], e2e["metrics"]["kl_mean"], 1e-6), "CLI and API agree")
    p = subprocess.run(cmd + ["--force", "--require", "kl_mean<=10"], capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 0, f"CLI: exit {p.returncode}, expected 0: {p.stderr[-800:]}")
    p = subprocess.run(cmd + ["--force", "--require", "klmean<=1"], capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 2 and "klmean" in p.stderr, f"CLI: a bad gate exits 2 naming it: {p.stderr[-300:]}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok: capture, emulate and verify on a small Llama checked independently")
    return 0


if __name__ == "__main__":
    sys.exit(main())
