#!/usr/bin/env python3
"""How often does issue 41's done-when hold -- bf16's delta cross-entropy marked as noise, w4a16's
not -- on seeded Llamas, under the implementation floor alone (the old rule) and under the floor of
the sampling interval (noise_and_sampling, the rule the done-when is judged by)? A measurement across
token sets, not a test (docs/verify.md, "The implementation-noise floor").

    build/venv/bin/python tests/bench/noise_floor_sweep.py [--build build] [--configs 4096:1:0,4096:3:0,...]
                                                           [--draws 5] [--shape 8x48] [--tokens sampled,random]
                                                           [--per-token]

A config is VOCAB:WEIGHT_SCALE:WEIGHT_SEED: a LlamaForCausalLM of 2 layers, hidden 576, intermediate
1536, 9 heads over 3 KV heads, tied embeddings, every matrix times WEIGHT_SCALE. Each draw is a set
of tokens (seed 200 + draw): `sampled`, drawn from the model itself (tiny_llama.sampled_tokens: the
model's own text, on which delta CE's expectation is KL(reference || plan) as on a trained model's
data), or `random`, uniform over the vocabulary. Per draw it prints, for both plans under
`verify(noise=["default"])`, delta CE, |delta CE| / floor (<= 1: the old flag), the sampling
interval and the new flag (and, for comparison, the same rule on the gates' one-sided 95% bounds,
a two-sided 90% interval), and w4a16's KL mean flags; per config and token kind how often the
done-when held under each rule, side by side. --per-token adds the per-token size of the format's
own effect against an implementation's (RMS over tokens of plan - reference and of sum=fp64 - plan
in log-likelihood; one more forward). Exit status 0 either way."""
import argparse
import os
import sys
import time

import numpy as np


def llama(vocab, scale, seed):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=128,
                                      tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(scale)
    return model


def nll(logits, ids):
    x = logits[:, :-1].astype(np.float64)
    m = x.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))[..., 0]
    return lse - np.take_along_axis(x, ids[:, 1:, None], -1)[..., 0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--configs", default="4096:1:0,4096:3:0,4096:3:2,16384:1:0,49152:1:0")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--shape", default="8x48")
    ap.add_argument("--tokens", default="sampled,random", help="token kinds, comma-separated: sampled, random")
    ap.add_argument("--per-token", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "venv"))
    import torch

    from precis import noise, verify
    from precis import torch as pt
    from tiny_llama import sampled_tokens
    torch.set_num_threads(1)
    samples, tokens = (int(x) for x in args.shape.split("x"))
    kinds = args.tokens.split(",")
    totals = {(k, rule): 0 for k in kinds for rule in ("old", "new", "90%")}
    summary = []
    print(f"load {os.getloadavg()[0]:.1f}; default alternatives {', '.join(noise.DEFAULT)}; {samples}x{tokens} tokens")
    for cfg in args.configs.split(","):
        vocab, scale, wseed = cfg.split(":")
        model = llama(int(vocab), float(scale), int(wseed))
        for kind in kinds:
            held = {"old": 0, "new": 0, "90%": 0}
            for draw in range(args.draws):
                t0 = time.time()
                ids = (sampled_tokens(model, samples, tokens, 200 + draw) if kind == "sampled"
                       else np.random.default_rng(200 + draw).integers(0, int(vocab), (samples, tokens)))
                row, flags = [], {}
                for plan in ("bf16", "w4a16"):
                    r = verify.verify(model, {"*": plan}, ids, isolated=False, noise=["default"], require=["ce_delta<=1"],
                                      keep_outputs=args.per_token and plan == "bf16")
                    e2e = r.report["end_to_end"]
                    f, k = e2e["noise_floor"]["metrics"]["ce_delta"], e2e["noise_floor"]["metrics"]["kl_mean"]
                    g = e2e["gates"][0]  # its one-sided 95% bounds: a two-sided 90% interval, for comparison
                    at90 = min(g["favourable_bound"], f["value"]) - f["floor"] <= 0 <= max(g["bound"], f["value"]) + f["floor"]
                    flags[plan] = (f["noise"], f["noise_and_sampling"], k["noise"], k["noise_and_sampling"], at90)
                    lo, hi = f["interval"]
                    row.append(f"{plan} dCE {f['value']:+.2e} /floor {abs(f['value']) / f['floor']:.2f} interval "
                               f"[{lo:+.1e}, {hi:+.1e}] old {'N' if f['noise'] else '-'} new "
                               f"{'N' if f['noise_and_sampling'] else '-'} (90% {'N' if at90 else '-'})")
                    if plan == "w4a16":
                        row.append(f"w4a16 KL {k['value']:.2e} old {'N' if k['noise'] else '-'} new "
                                   f"{'N' if k['noise_and_sampling'] else '-'}; CE ref {e2e['metrics']['ce_ref']:.2f}")
                    if args.per_token and plan == "bf16":
                        ref, q = r.reference_outputs, r.emulated_outputs
                ok = {"old": flags["bf16"][0] and not flags["w4a16"][0],
                      "new": flags["bf16"][1] and not flags["w4a16"][1],
                      "90%": flags["bf16"][4] and not flags["w4a16"][4]}
                for rule in ok:
                    held[rule] += ok[rule]
                extra = ""
                if args.per_token:
                    with torch.no_grad(), pt.emulate(model, {"*": "bf16"}, gemm=noise.OperandGemm("sum=fp64")):
                        alt = model(input_ids=torch.from_numpy(ids)).logits.float().numpy()
                    n_ref, n_q, n_alt = nll(ref, ids), nll(q, ids), nll(alt, ids)
                    extra = (f"; per token RMS plan-ref {np.sqrt(np.mean((n_q - n_ref) ** 2)):.2e}, "
                             f"sum=fp64-plan {np.sqrt(np.mean((n_alt - n_q) ** 2)):.2e}")
                print(f"{cfg} {kind} {draw}: {'; '.join(row)}; done-when old {'holds' if ok['old'] else 'fails'}, "
                      f"new {'holds' if ok['new'] else 'fails'}{extra} ({time.time() - t0:.0f} s)", flush=True)
            summary.append(f"{cfg:>12} {kind:>8}: done-when held on {held['old']} of {args.draws} token sets under the "
                           f"floor alone, {held['new']} of {args.draws} under the floor of the sampling interval "
                           f"({held['90%']} with a 90% interval)")
            print(summary[-1], flush=True)
            for rule in held:
                totals[(kind, rule)] += held[rule]
    n = args.draws * len(args.configs.split(","))
    print("\n".join(["", "summary"] + summary))
    for kind in kinds:
        print(f"overall, {kind} tokens: floor alone {totals[(kind, 'old')]} of {n}, "
              f"floor of the sampling interval {totals[(kind, 'new')]} of {n} ({totals[(kind, '90%')]} with a 90% interval)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
