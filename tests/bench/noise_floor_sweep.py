#!/usr/bin/env python3
"""How often does issue 41's done-when hold -- bf16's delta cross-entropy marked as implementation
noise, w4a16's not -- on seeded Llamas? A measurement across token sets, not a test (docs/verify.md,
"The implementation-noise floor").

    build/venv/bin/python tests/bench/noise_floor_sweep.py [--build build] [--configs 4096:1:0,4096:3:0,...]
                                                           [--draws 5] [--shape 8x48]

A config is VOCAB:WEIGHT_SCALE:WEIGHT_SEED: a LlamaForCausalLM of 2 layers, hidden 576, intermediate
1536, 9 heads over 3 KV heads, tied embeddings, every matrix times WEIGHT_SCALE. Each draw is a set
of uniformly random tokens (seed 200 + draw). Per draw it prints |delta CE| / floor of both plans
under `verify(noise=["default"])` (<= 1: marked as noise), and per config and overall how often the
done-when held. Also the per-token size of the format's own effect against the implementations':
RMS over tokens of (plan - reference) and of (sum=fp64 - plan) in delta log-likelihood. Exit
status 0 either way."""
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
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    import torch

    from precis import noise, verify
    from precis import torch as pt
    torch.set_num_threads(1)
    samples, tokens = (int(x) for x in args.shape.split("x"))
    held = total = 0
    print(f"load {os.getloadavg()[0]:.1f}; default alternatives {', '.join(noise.DEFAULT)}")
    for cfg in args.configs.split(","):
        vocab, scale, wseed = cfg.split(":")
        model = llama(int(vocab), float(scale), int(wseed))
        held_c = 0
        for draw in range(args.draws):
            t0 = time.time()
            ids = np.random.default_rng(200 + draw).integers(0, int(vocab), (samples, tokens))
            ratio = {}
            for plan in ("bf16", "w4a16"):
                r = verify.verify(model, {"*": plan}, ids, isolated=False, noise=["default"], keep_outputs=plan == "bf16")
                f = r.report["end_to_end"]["noise_floor"]["metrics"]["ce_delta"]
                ratio[plan] = abs(f["value"]) / f["floor"]
                if plan == "bf16":
                    ref, q = r.reference_outputs, r.emulated_outputs
            with torch.no_grad(), pt.emulate(model, {"*": "bf16"}, gemm=noise.OperandGemm("sum=fp64")):
                alt = model(input_ids=torch.from_numpy(ids)).logits.float().numpy()
            n_ref, n_q, n_alt = nll(ref, ids), nll(q, ids), nll(alt, ids)
            own, impl = np.sqrt(np.mean((n_q - n_ref) ** 2)), np.sqrt(np.mean((n_alt - n_q) ** 2))
            ok = ratio["bf16"] <= 1 and ratio["w4a16"] > 1
            held_c += ok
            print(f"{cfg} draw {draw}: |dCE|/floor bf16 {ratio['bf16']:.2f}, w4a16 {ratio['w4a16']:.1f}; per token RMS "
                  f"plan-ref {own:.2e}, sum=fp64-plan {impl:.2e}; done-when {'holds' if ok else 'fails'} "
                  f"({time.time() - t0:.0f} s)", flush=True)
        print(f"{cfg}: done-when held on {held_c} of {args.draws} token sets")
        held, total = held + held_c, total + args.draws
    print(f"overall: {held} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
