"""The figures users compare (issue 41, DESIGN §22): llama.cpp's --kl-divergence block, ExLlamaV3's
KL by reference confidence and label-in-top-K, Jensen-Shannon, the scored positions, a reference
saved once and reused, and the implementation-noise floor.

Every figure is recomputed here from the saved logits, independently of precis.kld (SciPy's
log_softmax and jensenshannon, NumPy's var/cov/corrcoef/percentile), the standard errors by their
textbook forms, which equal llama.cpp's sum formulas algebraically:
  mean_and_uncertainty's SE  sqrt((E[x^2] - E[x]^2)/(n-1)) = std(x, ddof=1)/sqrt(n)
  covariance                 (E[ab] - E[a]E[b])/(n-1)      = cov(a, b, ddof=1)/n
  ln PPL ratio SE            sqrt(se_q^2 + se_b^2 - 2 cov)  = std(nll_q - nll_b, ddof=1)/sqrt(n)
  Cor(ln PPL(Q), ln PPL(base)) = cov/(se_q se_b)            = Pearson's r of the two nll
  RMS dp SE                  0.5/rms * SE(dp^2)
  same top SE                sqrt(p(1-p)/(n-1))
"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
from cli_checks import FAILURES, check  # noqa: E402

try:
    import numpy as np
    import scipy.spatial.distance
    import scipy.special
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
from precis import endtoend, kld, noise, reference, verify  # noqa: E402
from report_schema import check_report_schema  # noqa: E402  (tests/venv, the script's own directory)
from tiny_llama import sampled_tokens  # noqa: E402


def close(a, b, rel=1e-9, abs_=1e-12):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b)) + abs_


def independent(ref, q, labels, second_half=False):
    """The figures from [samples, tokens, vocab] logits, not precis.kld's code."""
    rows = []
    for s in range(ref.shape[0]):
        n = ref.shape[1]
        first = n // 2 if second_half else 0
        for j in range(first, n):
            if labels[s, j] >= 0:
                rows.append((s, j))
    s_idx, j_idx = np.array(rows).T
    r = ref[s_idx, j_idx].astype(np.float64)
    c = q[s_idx, j_idx].astype(np.float64)
    lab = labels[s_idx, j_idx]
    lp, lq = scipy.special.log_softmax(r, axis=-1), scipy.special.log_softmax(c, axis=-1)
    p, pq = np.exp(lp), np.exp(lq)
    n = len(lab)
    kl = np.sum(scipy.special.rel_entr(p, pq), axis=-1)
    nll_b, nll_q = -lp[np.arange(n), lab], -lq[np.arange(n), lab]
    d = nll_q - nll_b
    se = lambda x: np.std(x, ddof=1) / math.sqrt(len(x))  # noqa: E731
    out = {"n": n, "ppl_q": math.exp(nll_q.mean()), "ppl_base": math.exp(nll_b.mean()),
           "ppl_q_se": math.exp(nll_q.mean()) * se(nll_q), "ln_ratio": d.mean(), "ln_ratio_se": se(d),
           "cor": np.corrcoef(nll_q, nll_b)[0, 1], "cov": np.cov(nll_q, nll_b)[0, 1] / n}
    out["ratio"], out["ratio_se"] = math.exp(d.mean()), math.exp(d.mean()) * se(d)
    out["diff"] = out["ppl_q"] - out["ppl_base"]
    out["diff_se"] = math.sqrt(out["ppl_q_se"] ** 2 + (out["ppl_base"] * se(nll_b)) ** 2
                               - 2 * out["ppl_q"] * out["ppl_base"] * out["cov"])
    out["kl_mean"], out["kl_se"] = kl.mean(), se(kl)
    out["kl_pct"] = {f: np.percentile(kl, 100 * f) for f in (0.999, 0.99, 0.95, 0.9, 0.1, 0.05, 0.01, 0.001)}
    out["kl_median"], out["kl_max"], out["kl_min"] = np.median(kl), kl.max(), kl.min()
    dp = np.exp(-nll_q) - np.exp(-nll_b)
    out["dp_mean"], out["dp_se"] = dp.mean(), se(dp)
    out["dp_pct"] = {f: np.percentile(dp, 100 * f) for f in (0.999, 0.99, 0.95, 0.9, 0.75, 0.25, 0.1, 0.05, 0.01, 0.001)}
    out["dp_median"] = np.median(dp)
    rms = math.sqrt(np.mean(dp ** 2))
    out["rms"], out["rms_se"] = rms, 0.5 / rms * se(dp ** 2)
    top = (np.argmax(r, -1) == np.argmax(c, -1)).mean()
    out["same_top"], out["same_top_se"] = top, math.sqrt(top * (1 - top) / (n - 1))
    out["jsd"] = np.array([scipy.spatial.distance.jensenshannon(p[i], pq[i]) ** 2 for i in range(n)])
    conf = p.max(-1)
    out["bins"] = []
    for lo, hi in ((0, .25), (.25, .5), (.5, .75), (.75, .95), (.95, 1.0)):
        sel = (conf >= lo) & ((conf < hi) if hi < 1 else (conf <= 1))
        out["bins"].append((int(sel.sum()), kl[sel].mean() if sel.any() else None))
    order_r, order_q = np.argsort(-r, -1, kind="stable"), np.argsort(-c, -1, kind="stable")
    out["topk_ref"] = [float(np.mean([lab[i] in order_r[i, :k] for i in range(n)])) for k in range(1, 6)]
    out["topk_q"] = [float(np.mean([lab[i] in order_q[i, :k] for i in range(n)])) for k in range(1, 6)]
    return out


def check_block(b, want, what):
    check(b["tokens"] == want["n"], f"{what}: {b['tokens']} scored tokens, expected {want['n']}")
    pairs = [("ppl_q", b["ppl_q"]["value"], want["ppl_q"]), ("ppl_q se", b["ppl_q"]["se"], want["ppl_q_se"]),
             ("ppl_base", b["ppl_base"]["value"], want["ppl_base"]),
             ("ln ratio", b["ln_ppl_ratio"]["value"], want["ln_ratio"]),
             ("ln ratio se (covariance-corrected)", b["ln_ppl_ratio"]["se"], want["ln_ratio_se"]),
             ("ratio", b["ppl_ratio"]["value"], want["ratio"]), ("ratio se", b["ppl_ratio"]["se"], want["ratio_se"]),
             ("ppl diff", b["ppl_diff"]["value"], want["diff"]), ("ppl diff se", b["ppl_diff"]["se"], want["diff_se"]),
             ("Cor(ln PPL)", b["cor_ln_ppl"], want["cor"]), ("KL mean", b["kl"]["mean"]["value"], want["kl_mean"]),
             ("KL se", b["kl"]["mean"]["se"], want["kl_se"]), ("KL median", b["kl"]["median"], want["kl_median"]),
             ("KL max", b["kl"]["max"], want["kl_max"]), ("KL min", b["kl"]["min"], want["kl_min"]),
             ("dp mean", b["dp"]["mean"]["value"], want["dp_mean"]), ("dp se", b["dp"]["mean"]["se"], want["dp_se"]),
             ("dp median", b["dp"]["median"], want["dp_median"]), ("RMS dp", b["rms_dp"]["value"], want["rms"]),
             ("RMS dp se", b["rms_dp"]["se"], want["rms_se"]), ("same top", b["same_top"]["value"], want["same_top"]),
             ("same top se", b["same_top"]["se"], want["same_top_se"]),
             ("JSD mean", b["jsd"]["mean"], float(want["jsd"].mean())), ("JSD max", b["jsd"]["max"], float(want["jsd"].max()))]
    for name, f in kld.KL_PERCENTILES:
        pairs.append((f"KL {name}", b["kl"][name], want["kl_pct"][f]))
    for name, f in kld.DP_PERCENTILES:
        pairs.append((f"dp {name}", b["dp"][name], want["dp_pct"][f]))
    for name, got, exp in pairs:
        # 1e-7: the SEs subtract sums (llama.cpp's form) where NumPy's std subtracts the mean first
        check(close(got, float(exp), rel=1e-7, abs_=1e-13), f"{what}: {name} {got!r}, independent {exp!r}")
    for (k, m), e in zip(want["bins"], b["kl_by_confidence"]):
        check(e["tokens"] == k and (m is None or close(e["kl_mean"], m, 1e-9)), f"{what}: bin {e['bin']}: {e} vs {k}, {m}")
    check(b["label_in_top_k"]["ref"] == want["topk_ref"] and b["label_in_top_k"]["q"] == want["topk_q"],
          f"{what}: label in top-K {b['label_in_top_k']} vs {want['topk_ref']}, {want['topk_q']}")


def check_block_on_logits():
    rng = np.random.default_rng(7)
    S, T, V = 6, 40, 300
    # A reference spread over all five confidence bins: the temperature varies by position.
    temp = rng.uniform(0.3, 6.0, size=(S, T, 1))
    ref = (rng.standard_normal((S, T, V)) * temp).astype(np.float32)
    q = (ref + 0.3 * rng.standard_normal((S, T, V))).astype(np.float32)
    ids = rng.integers(0, V, (S, T))
    labels = np.full((S, T), -100)
    labels[:, :-1] = ids[:, 1:]
    for score in ("all", "second-half"):
        out = endtoend.Outputs.compare(ref, q, labels=labels, kind="logits", score=score)
        want = independent(ref, q, labels, second_half=(score == "second-half"))
        b = out.block()
        check(b["scored"] == score, f"block scored {b['scored']}")
        check_block(b, want, f"score={score}")
        check(all(e["tokens"] > 0 for e in b["kl_by_confidence"]), f"every confidence bin populated: {b['kl_by_confidence']}")
    # second half: of each sample's 40 tokens positions 20..38 carry a label (19 per sample)
    out = endtoend.Outputs.compare(ref, q, labels=labels, kind="logits", score="second-half")
    check(out.block()["tokens"] == S * 19 and out.tokens() == S * 20, f"second half: {out.block()['tokens']}, {out.tokens()}")
    # llama.cpp's small-count rules: no SE with 10 or fewer tokens, no covariance under 10
    small = kld.block(np.ones(8) * 0.1, np.arange(8.0), np.arange(8.0) + 0.5, np.ones(8))
    check(small["kl"]["mean"]["se"] == 0.0 and small["ln_ppl_ratio"]["se"] == 0.0, f"n=8: SEs {small['kl']['mean']}")
    # gates on the new figures, with the bootstrap over samples
    g = endtoend.judge(endtoend.Outputs.compare(ref, q, labels=labels, kind="logits"),
                       ["same_top>=0.01", "ppl_ratio<=100", "jsd_mean<=0"], resamples=200)
    check([x["verdict"] for x in g] == ["pass", "pass", "fail"], f"gates on the block's figures: {g}")
    try:
        endtoend.parse_gate("kl_p42<=1")
        check(False, "an unknown figure is refused")
    except endtoend.GateError as e:
        check("same_top" in str(e), f"the refusal lists the figures: {e}")


def seeded_llama(seed=0):
    """Llama-like: GQA (9 heads, 3 KV heads), hidden 576, tied embeddings, a 4096-token head."""
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=4096, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=128,
                                      tie_word_embeddings=True)
    return transformers.LlamaForCausalLM(config).eval()


def check_reference_file(model, tmp):
    ids = np.random.default_rng(3).integers(0, 4096, (4, 32))
    path = os.path.join(tmp, "ref.h5")
    first = verify.verify(model, {"*": "bf16"}, ids, isolated=False, save_reference=path, score="second-half",
                          keep_outputs=True)
    again = verify.verify(model, {"*": "bf16"}, ids, isolated=False, reference=path, score="second-half")
    e1, e2 = first.report["end_to_end"], again.report["end_to_end"]
    check(e1["metrics"] == e2["metrics"] and e1["llamacpp"] == e2["llamacpp"] and e1["per_sample"] == e2["per_sample"],
          "--reference FILE gives identical metrics")
    check(e2["scored_positions"] == "second-half" and "read from" in e2["reference"], f"report says {e2['reference']}")
    import h5py
    with h5py.File(path) as f:
        check(f["outputs"].dtype == np.float32 and f["outputs"].compression == "gzip" and f["outputs"].chunks[0] == 1,
              "reference outputs: float32, gzip, one sample per chunk")
        check(np.array_equal(f["outputs"][()], first.reference_outputs), "saved logits are exact")
    # refused, naming the field
    for what, args, field in (
            ("other tokens", dict(model=model, inputs=np.where(np.arange(32) == 5, 7, ids)), "tokens"),
            ("other windows", dict(model=model, inputs=ids[:, :16]), "tokens_per_sample"),
            ("fewer samples", dict(model=model, inputs=ids[:3]), "samples"),
            ("another model", dict(model=seeded_llama(1), inputs=ids), "model_sha256")):
        try:
            verify.verify(args["model"], {"*": "bf16"}, args["inputs"], isolated=False, reference=path)
            check(False, f"{what}: refused")
        except reference.ReferenceError as e:
            check(field in str(e), f"{what}: the refusal names {field}: {e}")


def seeded_llama_x3():
    """The same architecture with every matrix x3 (sharper logits, larger activations)."""
    model = seeded_llama(2)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    return model


def independent_logits(model, ids, how):
    """The model's logits with every linear layer computed as noise.OperandGemm's `how` would, built
    here without precis: the bf16 plan's operands rounded by torch's own bfloat16 cast, then
    summed in float64 (NumPy) or multiplied by torch's bfloat16 matmul, the output rounded to bf16."""
    def forward(module):
        def f(x):
            a = x.detach().float().to(torch.bfloat16).float()
            b = module.weight.detach().float().t().to(torch.bfloat16).float()
            if how == "sum=fp64":
                c = torch.from_numpy(np.matmul(a.numpy().astype(np.float64), b.numpy().astype(np.float64)).astype(np.float32))
                return c.to(torch.bfloat16).float()
            return torch.matmul(a.to(torch.bfloat16), b.to(torch.bfloat16)).float()
        return f
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    for m in linears:
        m.forward = forward(m)
    try:
        with torch.no_grad():
            return model(input_ids=torch.from_numpy(ids)).logits.float().numpy()
    finally:
        for m in linears:
            del m.forward


def check_operands():
    """precis.emulate_operands against independent roundings: bf16 operands are torch's bfloat16
    cast bit for bit; w4a16's, summed exactly and rounded to bf16, give the plan's own output
    (precis.emulate) but for rare ties of the float32 sum; acc=fp16 is refused, naming acc."""
    import precis
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 6, 300)).astype(np.float32)
    b = rng.standard_normal((300, 70)).astype(np.float32)
    av, bv, alpha = precis.emulate_operands(a, b, "bf16")
    check(alpha == 1.0 and np.array_equal(av, torch.from_numpy(a).bfloat16().float().numpy()) and
          np.array_equal(bv, torch.from_numpy(b).bfloat16().float().numpy()), "bf16 operands: torch's bfloat16 cast")
    av, bv, alpha = precis.emulate_operands(a, b, "w4a16")
    exact = torch.from_numpy((av.astype(np.float64) @ bv.astype(np.float64)).astype(np.float32)).bfloat16().float().numpy()
    plan = precis.emulate(a, b, "w4a16")
    check(np.array_equal(bv, torch.from_numpy(bv).bfloat16().float().numpy()) and len(np.unique(bv[:128, 0])) <= 16,
          "w4a16's B: at most 16 levels per group of 128, rounded to A's bf16")
    check(np.mean(exact == plan) > 0.99 and np.max(np.abs(exact - plan) / (np.abs(plan) + 1e-3)) < 2 ** -7,
          f"w4a16 operands summed exactly give the plan's output: {np.mean(exact == plan)}")
    try:
        precis.emulate_operands(a, b, "a=bf16,b=bf16,acc=fp16,out=bf16")
        check(False, "acc=fp16 refused")
    except precis.UnsupportedError as e:
        check("acc=fp16" in str(e), f"the refusal names acc: {e}")


def independent_interval(ref, q, labels, alpha=0.05, resamples=2000):
    """Delta CE's and KL mean's two-sided 1 - alpha sampling intervals, the alpha/2 and 1 - alpha/2
    quantiles over the bootstrap draws verify makes (numpy's default_rng(0), samples with replacement), from per-sample
    sums of the per-token values computed here (SciPy), not by precis.endtoend."""
    n = ref.shape[0]
    sums = {"d": np.zeros(n), "labelled": np.zeros(n), "kl": np.zeros(n), "all": np.zeros(n)}
    for s in range(n):  # delta CE over the labelled positions, KL over all
        lp = scipy.special.log_softmax(ref[s].astype(np.float64), axis=-1)
        lq = scipy.special.log_softmax(q[s].astype(np.float64), axis=-1)
        keep = labels[s] >= 0
        rows, lab = np.flatnonzero(keep), labels[s][keep]
        sums["d"][s], sums["labelled"][s] = np.sum(lp[rows, lab] - lq[rows, lab]), keep.sum()
        sums["kl"][s], sums["all"][s] = np.sum(scipy.special.rel_entr(np.exp(lp), np.exp(lq))), len(lp)
    draws = np.random.default_rng(0).integers(0, n, size=(resamples, n))
    out = {}
    for metric, key, count in (("ce_delta", "d", "labelled"), ("kl_mean", "kl", "all")):
        dist = sums[key][draws].sum(1) / sums[count][draws].sum(1)
        out[metric] = [np.quantile(dist, alpha / 2), np.quantile(dist, 1 - alpha / 2)]
    return out


RESAMPLES = 500  # verify's bootstrap (its default 2000) is a third of each verify's time on this model


def check_noise_floor(model, name, ids, check_alternatives=False, plans=("bf16", "w4a16")):
    """The floor under the default alternatives (another accumulator, an exact sum, PyTorch's GEMM):
    the spread (max - min) of each metric over the plan and the alternatives, both flags following
    from it and from the sampling interval (checked against one recomputed from the logits), each
    alternative a computation of its own (bf16's delta CE moves under every one), w4a16's KL far above
    its floor and its interval. With check_alternatives the new alternatives' delta CE is recomputed
    without precis. Returns {plan: the noise_floor metrics}."""
    tables = {}
    lab = np.full(ids.shape, -100)
    lab[:, :-1] = ids[:, 1:]
    for plan in plans:
        r = verify.verify(model, {"*": plan}, ids, isolated=False, noise=["default"], require=["ce_delta<=1"],
                          keep_outputs=True, resamples=RESAMPLES)
        e2e = r.report["end_to_end"]
        nf = e2e["noise_floor"]
        check(nf["alternatives"] == list(noise.DEFAULT) and not nf["computed_as_plan"],
              f"{name} {plan}: default alternatives {nf['alternatives']}, as plan {nf['computed_as_plan']}")
        for metric, f in nf["metrics"].items():
            spread = max([0.0] + list(f["by"].values())) - min([0.0] + list(f["by"].values()))
            check(f["floor"] == spread, f"{name} {plan}: {metric} floor {f['floor']} is the spread {spread}")
            check(f["noise"] == (abs(f["value"] - f["ideal"]) <= f["floor"]), f"{name} {plan}: {metric} flag {f}")
            lo, hi = f["interval"]
            within = min(lo, f["value"]) - f["floor"] <= f["ideal"] <= max(hi, f["value"]) + f["floor"]
            check(f["noise_and_sampling"] == within and (within or not f["noise"]),
                  f"{name} {plan}: {metric} flag with sampling {f}")
        want = independent_interval(r.reference_outputs, r.emulated_outputs, lab, resamples=RESAMPLES)
        for metric, iv in want.items():
            got = nf["metrics"][metric]["interval"]
            check(close(got[0], iv[0], abs_=1e-13) and close(got[1], iv[1], abs_=1e-13),
                  f"{name} {plan}: {metric} sampling interval {got} vs independent {iv}")
        f = nf["metrics"]["ce_delta"]
        tables[plan] = nf["metrics"]
        g = e2e["gates"][0]
        check(g["noise"] == f["noise"] and g["noise_and_sampling"] == f["noise_and_sampling"] and
              f["interval"][0] <= g["favourable_bound"] <= g["bound"] <= f["interval"][1],
              f"{name} {plan}: the gate carries both flags; its one-sided bounds lie inside the interval: {g} {f}")
        check((noise.LABEL in g["detail"]) == f["noise"] and
              (noise.LABEL_WITH_SAMPLING in g["detail"]) == (f["noise_and_sampling"] and not f["noise"]),
              f"{name} {plan}: the gate's detail names its flag: {g['detail']}")
        if check_alternatives and plan == "bf16":
            ce_plan = independent(r.reference_outputs, r.emulated_outputs, lab)["ln_ratio"]
            check(close(ce_plan, f["value"], rel=1e-9, abs_=1e-12), f"{name}: plan delta CE {f['value']} vs {ce_plan}")
            for how in ("sum=fp64", "gemm=torch"):
                want = independent(r.reference_outputs, independent_logits(model, ids, how), lab)["ln_ratio"]
                got = f["value"] + f["by"][how]
                check(close(got, want, rel=1e-9, abs_=1e-12), f"{name}: {how} delta CE {got} vs independent {want}")
    b = tables["bf16"]["ce_delta"]
    check(all(d != 0 for d in b["by"].values()), f"{name}: every alternative moves bf16's delta CE: {b['by']}")
    if "w4a16" not in tables:
        return tables
    i = tables["w4a16"]["ce_delta"]
    check(i["by"]["target=sm_80"] == 0 and i["by"]["sum=fp64"] != 0,
          f"{name}: w4a16 has no target-dependent accumulator, an exact sum moves it: {i['by']}")
    k = tables["w4a16"]["kl_mean"]
    check(not k["noise"] and not k["noise_and_sampling"] and k["value"] > 100 * k["floor"],
          f"{name}: w4a16 KL mean far above its floor and its interval: {k}")
    return tables


def check_done_when(model, name, sets=2):
    """Issue 41's done-when on the seeded Llama (weights x3: int4's KL 0.29, near the 0.295 the issue
    measured on a trained 135M model): on each of `sets` sets of 8 x 48 tokens of the model's own text
    (tiny_llama.sampled_tokens, seeds 200..; on it delta CE's expectation is KL(reference || plan), as
    on a trained model's data), bf16's delta CE is indistinguishable from noise (implementation and
    sampling) and w4a16's is not. The floor alone does not make it hold on every set: its verdicts are
    printed (docs/decisions.md, "The noise floor", has the sweep of both rules)."""
    old = []
    for draw in range(sets):
        ids = sampled_tokens(model, 8, 48, 200 + draw)
        t = check_noise_floor(model, f"{name}, own text {draw}", ids)
        b, i = t["bf16"]["ce_delta"], t["w4a16"]["ce_delta"]
        check(b["noise_and_sampling"] and not i["noise_and_sampling"] and i["interval"][0] - i["floor"] > 0,
              f"{name}, own text {draw}: bf16's delta CE marked as noise, w4a16's not: bf16 {b}, w4a16 {i}")
        old.append(b["noise"] and not i["noise"])
        print(f"{name}, own text {draw}: delta CE bf16 {b['value']:+.2e} (floor {b['floor']:.1e}, interval "
              f"[{b['interval'][0]:+.1e}, {b['interval'][1]:+.1e}]), w4a16 {i['value']:+.2e} (floor {i['floor']:.1e}, "
              f"interval [{i['interval'][0]:+.1e}, {i['interval'][1]:+.1e}]); the floor alone: "
              f"{'holds' if old[-1] else 'fails'}")


def check_noise_as_plan(model):
    """A recipe without an fp32 accumulator (int8: exact s32 sums, scales after them) runs as the plan
    under sum=fp64 -- its delta CE does not move -- and the report says why."""
    ids = np.random.default_rng(6).integers(0, 4096, (2, 16))
    r = verify.verify(model, {"*": "int8"}, ids, isolated=False, noise=["sum=fp64"])
    nf = r.report["end_to_end"]["noise_floor"]
    as_plan = nf["computed_as_plan"].get("sum=fp64", {})
    check(list(as_plan) == ["int8"] and "acc=s32" in as_plan["int8"], f"int8 computed as the plan under sum=fp64: {as_plan}")
    check(nf["metrics"]["ce_delta"]["by"]["sum=fp64"] == 0, f"and its delta CE unmoved: {nf['metrics']['ce_delta']}")


def check_cli(model, tmp):
    ckpt = os.path.join(tmp, "ckpt")
    model.save_pretrained(ckpt)
    ids = np.random.default_rng(3).integers(0, 4096, (4, 32))
    np.save(os.path.join(tmp, "ids.npy"), ids)
    with open(os.path.join(tmp, "plan.json"), "w") as f:
        json.dump({"*": "bf16"}, f)
    out = os.path.join(tmp, "cli")
    cmd = [sys.executable, "-m", "precis", "verify", "--model", ckpt, "--plan", os.path.join(tmp, "plan.json"),
           "--inputs", os.path.join(tmp, "ids.npy"), "-o", out, "--score", "second-half", "-q",
           "--save-reference", os.path.join(tmp, "cli_ref.h5")]
    p = subprocess.run(cmd + ["--noise-floor"], capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 0, f"verify --score second-half exit {p.returncode}: {p.stderr[-800:]}")
    with open(os.path.join(out, "report.json")) as f:
        rep = json.load(f)
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    check(rep["end_to_end"]["noise_floor"]["alternatives"] == list(noise.DEFAULT) and "Implementation noise floor" in md,
          "--noise-floor without a value: the default alternatives, in report.md")
    with open(os.path.join(out, "report.html")) as f:
        html = f.read()
    ce = rep["end_to_end"]["noise_floor"]["metrics"]["ce_delta"]
    row = next((line for line in md.splitlines() if line.startswith("| ce_delta |")), "")
    check(ce["interval"] is not None and noise.verdict(ce) in row and "sampling interval" in md and
          noise.LABEL_WITH_SAMPLING in md and noise.LABEL_WITH_SAMPLING in html and noise.verdict(ce) in html,
          f"report.md/html show the sampling interval and both verdicts: {row}")
    check_report_schema(os.path.join(out, "report.json"), check)
    check(rep["end_to_end"]["llamacpp"]["scored"] == "second-half" and "Same top p" in md and
          "scored positions: second-half" in md and "[0.95, 1.00]" in md, "report.md has the block and its positions")
    p = subprocess.run(cmd[:-2] + ["--reference", os.path.join(tmp, "cli_ref.h5"), "--force"], capture_output=True,
                       text=True, env=SUBPROCESS_ENV)
    with open(os.path.join(out, "report.json")) as f:
        rep2 = json.load(f)
    check(p.returncode == 0 and rep2["end_to_end"]["metrics"] == rep["end_to_end"]["metrics"],
          f"verify --reference FILE from the command line: exit {p.returncode} {p.stderr[-500:]}")
    check(rep2["end_to_end"]["reference"].startswith("fp32, read from "), f"the reference's label: {rep2['end_to_end']}")
    check_report_schema(os.path.join(out, "report.json"), check)  # the label of a reference read from a file
    p = subprocess.run(cmd[:-2] + ["--noise-floor", "target=sm_70", "--force"], capture_output=True, text=True,
                       env=SUBPROCESS_ENV)
    check(p.returncode == 2 and "--noise-floor" in p.stderr and "sum=fp64" in p.stderr,
          f"a bad --noise-floor: exit {p.returncode} {p.stderr[-300:]}")


def check_pieces_do_not_change_values():
    """endtoend.logit_token_stats takes a sample's tokens ROWS_PER_PIECE at a time on a thread pool:
    every per-token figure must be the same bits whatever the pieces (one piece, 16, 5; a partial
    last piece), ties from bf16-rounded logits and unlabelled tokens included."""
    rng = np.random.default_rng(11)
    ref = (rng.standard_normal((37, 3000)) * 3).astype(np.float32)
    q = ((ref + rng.standard_normal(ref.shape).astype(np.float32) * 0.1).view(np.uint32) & 0xFFFF0000).view(np.float32)
    labels = rng.integers(0, 3000, 37)
    labels[::7] = -100
    saved = endtoend.ROWS_PER_PIECE
    try:
        results = {}
        for rows in (1000, 16, 5):
            endtoend.ROWS_PER_PIECE = rows
            results[rows] = endtoend.logit_token_stats(ref, q, labels)
    finally:
        endtoend.ROWS_PER_PIECE = saved
    whole = results[1000]
    for rows in (16, 5):
        for key, v in whole.items():
            got = results[rows][key]
            check(got.dtype == v.dtype and got.shape == v.shape and got.tobytes() == v.tobytes(),
                  f"logit_token_stats {key}: pieces of {rows} rows differ from one piece")


def main():
    check_block_on_logits()
    check_pieces_do_not_change_values()
    model = seeded_llama()
    tmp = scratch.mkdtemp(prefix="precis-figures-")
    try:
        check_reference_file(model, tmp)
        check_cli(model, tmp)
        check_operands()
        check_noise_floor(model, "vocabulary 4096", np.random.default_rng(5).integers(0, 4096, (4, 32)),
                          check_alternatives=True, plans=("bf16",))
        check_noise_as_plan(model)
        check_done_when(seeded_llama_x3(), "vocabulary 4096, weights x3")
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"FAIL: {len(FAILURES)} checks", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
