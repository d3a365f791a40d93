"""Attention GEMMs as recipes and as workloads (issue 42), on a seeded GQA Llama (hidden 576, 9 / 3 heads,
tied embeddings, vocabulary 1000):

- the fa3-fp8 recipe inside the model equals `precis run --save-outputs` on the captured Q, Kᵀ and P, V
  workloads (precis.attention_capture -> precis import, batched B) bit for bit, for every layer's QKᵀ
  and PV;
- the fp32 recipe reproduces the model's own attention (eager and sdpa; padding; Mistral's sliding
  window, whose outputs differ from the same model without the window) to float32 rounding, so the
  masks are the model's;
- `verify --kv-sweep` prints the K x V table with bytes per token and writes kv-sweep.json whose
  cells are verify --kv's KL.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
import shutil

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
from precis import attention, attention_capture, kvcache, verify  # noqa: E402

PRECIS = os.environ.get("PRECIS") or os.path.join(BUILD, "precis")
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def seeded_llama(attn="eager"):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=128,
                                      tie_word_embeddings=True, attn_implementation=attn)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(6.0)  # sharper attention: P far from uniform
    return model


def workloads_bit_for_bit(tmp):
    model = seeded_llama()
    ids = torch.from_numpy(np.random.default_rng(3).integers(0, 1000, (2, 21)))
    records = attention_capture.capture_attention(model, [ids], "fa3-fp8")
    check([r["layer"] for r in records] == ["model.layers.0.self_attn", "model.layers.1.self_attn"]
          and records[0]["q"].shape == (18, 21, 64) and records[0]["kt"].shape == (18, 64, 21),
          "capture: one record per layer, Q [batch*heads, tokens, head_dim], Kᵀ with the KV heads repeated")
    made = attention_capture.import_attention(records, tmp, precis_cli=[PRECIS])
    recipe = attention.AttentionRecipe("fa3-fp8")
    for name, ds in made:
        spec = recipe.qk if name.endswith(".qk") else recipe.pv
        saved = os.path.join(tmp, name + ".out.h5")
        report = precis.run(ds, recipes=[spec], backend="cpu", save_outputs=saved, output=os.path.join(tmp, name + ".rep"),
                            args=["--min-samples", "1", "--max-samples", "1", "--max-time-ms", "1"])
        with h5py.File(saved, "r") as f:
            c = f[f"workloads/{name}/{spec}/c"][...]
        rec = records[0 if ".layers.0." in name else 1]["s" if name.endswith(".qk") else "o"]
        row = report.rows[0]
        check(c.dtype == rec.dtype and c.shape == rec.shape and np.array_equal(c.view(np.uint32), rec.view(np.uint32))
              and row["status"] == "ok" and 0 < row["error"]["rel_fro"]["worst"] < 0.2,
              f"{name}: the model's fa3-fp8 GEMM equals precis run --save-outputs bit for bit "
              f"(rel_fro vs float64 {row['error']['rel_fro']['worst']:.3g})")
    # fa3-fp8-block: one scale per 128 rows of each head's Q and per 128 tokens of its K; with 21 tokens
    # a block is the whole (sequence, head) matrix, so S is a per-matrix tensor-scaled product.
    blocks = attention_capture.capture_attention(model, [ids], "fa3-fp8-block")
    per_head = np.stack([precis.emulate(blocks[0]["q"][i], blocks[0]["kt"][i], "a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=fp32")
                         for i in range(blocks[0]["q"].shape[0])])
    check(np.array_equal(blocks[0]["s"], per_head) and not np.array_equal(blocks[0]["s"], records[0]["s"]),
          "fa3-fp8-block: each (sequence, head) scaled on its own, unlike fa3-fp8's one tensor scale")
    # The P dataset's reference is P·V in float64 of the recorded P: the fp32 run is nearly exact.
    name, ds = made[1]
    report = precis.run(ds, recipes=["fp32"], backend="cpu", output=os.path.join(tmp, "fp32.rep"),
                        args=["--min-samples", "1", "--max-samples", "1", "--max-time-ms", "1"])
    check(report.rows[0]["error"]["rel_fro"]["worst"] < 1e-6, f"{name}: fp32 against the float64 reference "
          f"{report.rows[0]['error']['rel_fro']['worst']:.3g}")


def masks_are_the_models():
    ids = torch.from_numpy(np.random.default_rng(4).integers(0, 1000, (3, 20)))
    mask = torch.ones_like(ids)
    mask[1, :6] = 0  # left padding
    mask[2, 15:] = 0  # right padding
    cases = [("llama", lambda a: seeded_llama(a))]

    def mistral(a, window=6):
        torch.manual_seed(1)
        cfg = transformers.MistralConfig(vocab_size=1000, hidden_size=192, intermediate_size=384, num_hidden_layers=2,
                                         num_attention_heads=6, num_key_value_heads=2, sliding_window=window,
                                         attn_implementation=a)
        return transformers.MistralForCausalLM(cfg).eval()

    cases.append(("mistral sliding window 6", mistral))
    for label, make in cases:
        for attn in ("eager", "sdpa"):
            model = make(attn)
            with torch.no_grad():
                ref = model(input_ids=ids, attention_mask=mask).logits
                with kvcache.kv_cache(model, attention="fp32"):
                    got = model(input_ids=ids, attention_mask=mask).logits
            keep = mask.bool()
            err = float(((got - ref)[keep]).abs().max() / ref[keep].abs().max())
            check(err < 1e-5, f"{label}, {attn}: the fp32 attention recipe gives the model's logits ({err:.2g})")
    with torch.no_grad():
        windowed = mistral("eager")(input_ids=ids).logits
        full = mistral("eager", window=None)(input_ids=ids).logits
    check(float((windowed - full).abs().max()) > 1e-3, "the sliding window changes Mistral's logits (the check can fail)")


def sweep_cli(tmp):
    model = seeded_llama()
    model.save_pretrained(os.path.join(tmp, "llama"))
    ids = np.random.default_rng(5).integers(0, 1000, (3, 16))
    np.save(os.path.join(tmp, "ids.npy"), ids)
    out = os.path.join(tmp, "sweep")
    r = subprocess.run([sys.executable, "-m", "precis", "verify", "--model", os.path.join(tmp, "llama"), "--inputs",
                        os.path.join(tmp, "ids.npy"), "--kv-sweep", "bf16;e4m3;s8@row:sym", "-o", out],
                       capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(r.returncode == 0 and "| `e4m3` |" in r.stdout and "bytes/token" in r.stdout,
          f"verify --kv-sweep prints the K x V table (exit {r.returncode}) {r.stderr[-300:]}")
    with open(os.path.join(out, "kv-sweep.json")) as f:
        cells = {(c["k"], c["v"]): c for c in json.load(f)["cells"]}
    check(len(cells) == 9 and cells[("bf16", "bf16")]["bytes_per_token"] == 2 * 3 * 64 * 4
          and cells[("e4m3", "s8@row:sym")]["bytes_per_token"] == 2 * 3 * 64 * (1 + 1 + 4 / 64),
          "kv-sweep.json: 3 x 3 cells with bytes per token")
    loaded, _ = verify.load_model(os.path.join(tmp, "llama"))  # as the command loads it (its attention: sdpa)
    direct = verify.verify(loaded, None, ids, kv="e4m3,s8@row:sym", isolated=False).report["end_to_end"]["metrics"]
    check(cells[("e4m3", "s8@row:sym")]["kl_mean"] == direct["kl_mean"],
          f"the sweep's cell is verify --kv's KL ({direct['kl_mean']:.3g})")
    check(cells[("bf16", "bf16")]["kl_mean"] < cells[("e4m3", "e4m3")]["kl_mean"], "bf16 KV is closer than e4m3 KV")


def main():
    tmp = scratch.mkdtemp(prefix="precis-attention-")
    try:
        workloads_bit_for_bit(tmp)
        masks_are_the_models()
        sweep_cli(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
