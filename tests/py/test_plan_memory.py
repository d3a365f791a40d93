"""precis plan's memory budget and serving estimate on a small Llama (DESIGN §17), end to end:
import --model (a directory with config.json, which import records), run on the cpu backend, plan.
Every number is recomputed here by hand from the shapes:

- resident weights: effective bits / 8 per layer (bf16 16 bits; int8 8 bits + a bf16 scale per
  output channel), summed over the layers;
- transient of a layer: its input and output (and scales, int8's int32 accumulators) at the
  dataset's tokens x samples; the plan's memory = resident + the largest transient, never the sum;
- a memory budget one byte below the cheapest plan's memory is refused (exit 3), at it accepted;
- the serving estimate at batch=2,context=16: weights + KV cache 2·T·B·kv_heads·head_dim·layers
  elements in the KV format + the largest transient at B·T tokens + the 32 MiB cuBLASLt workspace;
- --kv-candidates: the budget covers weights + cache; the pair chosen at a roomy budget and at the
  least memory (one byte less: exit 3), the cache's bytes by hand.
"""
import json
import math
import os
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import FAILURES, check, run  # noqa: E402
from safetensors_fixture import write_safetensors_f32  # noqa: E402

FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "1"]
CONFIG = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "hidden_size": 32, "intermediate_size": 48, "torch_dtype": "bfloat16"}
TOKENS, SAMPLES = 8, 2


def layer_shapes():
    """name -> (in, out) of a Llama with CONFIG: q, k, v, o, gate, up, down per layer."""
    h, heads, kv = CONFIG["hidden_size"], CONFIG["num_attention_heads"], CONFIG["num_key_value_heads"]
    hd, inter = h // heads, CONFIG["intermediate_size"]
    shapes = {}
    for i in range(CONFIG["num_hidden_layers"]):
        p = f"model.layers.{i}"
        shapes[f"{p}.self_attn.q_proj"] = (h, heads * hd)
        shapes[f"{p}.self_attn.k_proj"] = (h, kv * hd)
        shapes[f"{p}.self_attn.v_proj"] = (h, kv * hd)
        shapes[f"{p}.self_attn.o_proj"] = (heads * hd, h)
        shapes[f"{p}.mlp.gate_proj"] = (h, inter)
        shapes[f"{p}.mlp.up_proj"] = (h, inter)
        shapes[f"{p}.mlp.down_proj"] = (inter, h)
    return shapes


def resident(recipe, k, n):
    if recipe == "bf16":
        return k * n * 2
    assert recipe == "int8"
    return k * n + n * 2  # s8 codes + a bf16 scale per output channel


def transient(recipe, k, n, tokens):
    if recipe == "bf16":
        return tokens * k * 2 + tokens * n * 2  # bf16 input and output
    # s8 input, fp32 output, int32 accumulators, an f32 scale per row of A
    return tokens * k + tokens * n * 4 + tokens * n * 4 + tokens * 4


def main():
    tmp = scratch.mkdtemp(prefix="precis-plan-memory-")
    model = os.path.join(tmp, "llama")
    os.makedirs(model)
    json.dump(CONFIG, open(os.path.join(model, "config.json"), "w"))
    rng = np.random.default_rng(5)
    shapes = layer_shapes()
    write_safetensors_f32(os.path.join(model, "model.safetensors"),
                          {f"{name}.weight": rng.standard_normal((n, k)).astype(np.float32)
                           for name, (k, n) in shapes.items()})
    ds = os.path.join(tmp, "m.h5")
    run(["import", "--model", model, "--tokens", str(TOKENS), "--batch", str(SAMPLES), "-o", ds, "-q"])
    rep = os.path.join(tmp, "rep")
    run(["run", ds, "--backend", "cpu", "--recipes", "bf16,int8", "-o", rep] + FAST)
    report = json.load(open(os.path.join(rep, "report.json")))
    recorded = report["settings"].get("model_config")
    check(isinstance(recorded, dict) and recorded.get("num_key_value_heads") == 2 and recorded.get("hidden_size") == 32,
          f"report settings.model_config from config.json: {recorded}")

    # The cheapest plan by resident bytes puts every layer on int8 (its verdict passes the default gate).
    tokens = TOKENS * SAMPLES
    res = sum(resident("int8", k, n) for k, n in shapes.values())
    peak = max(transient("int8", k, n, tokens) for k, n in shapes.values())
    out = os.path.join(tmp, "p")
    p = run(["plan", os.path.join(rep, "report.json"), "--cost", "memory", "-o", out])
    doc = json.load(open(os.path.join(out, "plan.json")))
    check(all(l["recipe"] == "int8" for l in doc["layers"]), f"cheapest: every layer int8: {p.stdout}")
    check(doc["memory"]["resident_weights_bytes"] == res, f"resident {doc['memory']['resident_weights_bytes']} != {res}")
    check(doc["memory"]["peak_transient_bytes"] == peak, f"peak transient {doc['memory']['peak_transient_bytes']} != {peak}")
    check(doc["total_cost"] == res + peak, f"memory {doc['total_cost']} != resident + peak {res + peak}")
    summed = sum(transient("int8", k, n, tokens) for k, n in shapes.values())
    check(doc["total_cost"] < res + summed, "the activations are not summed over layers")

    # A budget: one byte short of the least memory is refused; at it, accepted. Every bf16 plan
    # holds more (bf16 weights are twice int8's), so the least memory is the all-int8 plan.
    both = {r: sum(resident(r, k, n) for k, n in shapes.values()) for r in ("bf16", "int8")}
    check(both["bf16"] > res, "bf16 weights hold more")
    plan_args = [os.path.join(rep, "report.json"), "--force", "-o", out]
    run(["plan"] + plan_args + ["--budget", f"memory={res + peak - 1}"], expect=3)
    run(["plan"] + plan_args + ["--budget", f"memory={res + peak}"])
    doc = json.load(open(os.path.join(out, "plan.json")))
    check(doc["feasible"] and doc["total_cost"] == res + peak, f"at the least memory: {doc.get('total_cost')}")

    # Serving estimate at batch 2, context 16, KV in bf16, e4m3, then the KV formats of verify --kv
    # (docs/kv-cache.md): head_dim 8 here, so int8 per token and head carries a 32-bit scale per 8
    # values (12 bits each), NVFP4 one E4M3 block scale for its 8 (5 bits) and a 2-bit group of 32 one
    # fp32 scale for the 8 values it holds (6 bits; 3-bit: 7).
    B, T = 2, 16
    for kv, bits in (("bf16", 16), ("e4m3", 8), ("fp8-tensor", 8), ("s8@row:sym", 12), ("nvfp4", 5), ("int2-had", 6),
                    ("s3@k32:sym", 7)):
        p = run(["plan"] + plan_args + ["--cost", "memory", "--serve", f"batch={B},context={T},kv={kv}"])
        doc = json.load(open(os.path.join(out, "plan.json")))
        s = doc["serving_estimate"]
        head_dim = CONFIG["hidden_size"] // CONFIG["num_attention_heads"]
        kv_bytes = 2 * T * B * CONFIG["num_key_value_heads"] * head_dim * CONFIG["num_hidden_layers"] * bits // 8
        check(s.get("kv_bits_per_value") == bits, f"serving {kv}: {s.get('kv_bits_per_value')} bits per value")
        ct = json.load(open(os.path.join(out, "compressed_tensors_config.json")))
        mo = json.load(open(os.path.join(out, "modelopt_hf_quant_config.json")))["quantization"]
        want_ct = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
        check(ct.get("kv_cache_scheme") == (want_ct if kv == "fp8-tensor" else None),
              f"serving {kv}: compressed-tensors kv_cache_scheme {ct.get('kv_cache_scheme')}")
        check(mo.get("kv_cache_quant_algo") == {"e4m3": "FP8", "fp8-tensor": "FP8", "nvfp4": "NVFP4"}.get(kv),
              f"serving {kv}: ModelOpt kv_cache_quant_algo {mo.get('kv_cache_quant_algo')}")
        serve_peak = max(transient("int8", k, n, B * T) for k, n in shapes.values())
        want = {"weights_bytes": res, "kv_cache_bytes": kv_bytes, "peak_transient_bytes": serve_peak,
                "workspace_bytes": 32 << 20, "total_bytes": res + kv_bytes + serve_peak + (32 << 20)}
        for key, value in want.items():
            check(s.get(key) == value, f"serving {kv} {key}: {s.get(key)} != {value}")
        check(s["head_dim"] == head_dim and s["num_key_value_heads"] == 2, f"serving shape: {s}")
        check("serving estimate" in p.stdout and "KV cache" in p.stdout, f"stdout shows the terms: {p.stdout}")
        md = open(os.path.join(out, "plan.md")).read()
        check("Serving estimate" in md and "an estimate until" in md, "plan.md shows the estimate")
    # The KV format as a decision (--kv-candidates): the budget covers weights + cache. With room for
    # everything the least-KL cache and the all-bf16 weights; at the least memory (all-int8 weights,
    # the 12-bit int8 cache) exactly that pair, one byte less none (exit 3).
    kv_of = {bits: 2 * T * B * CONFIG["num_key_value_heads"] * head_dim * CONFIG["num_hidden_layers"] * bits // 8
             for bits in (16, 12)}
    peak_bf16 = max(transient("bf16", k, n, tokens) for k, n in shapes.values())
    decide = ["--serve", f"batch={B},context={T}", "--kv-candidates", "bf16=0.001;s8@row:sym=0.002",
              "--objective-map", "identity", "--deploy", "none"]
    run(["plan"] + plan_args + decide + ["--budget", f"memory={both['bf16'] + peak_bf16 + kv_of[16]}"])
    doc = json.load(open(os.path.join(out, "plan.json")))
    d = doc["kv_decision"]
    check(d["chosen"]["k"] == "bf16" and d["chosen"]["kv_cache_bytes"] == kv_of[16]
          and all(l["recipe"] == "bf16" for l in doc["layers"]) and doc["serving_estimate"]["kv_format"] == "bf16",
          f"room for everything: {d['chosen']}")
    check([c["kv_cache_bytes"] for c in d["candidates"]] == [kv_of[16], kv_of[12]], f"KV bytes {d['candidates']}")
    least = res + peak + kv_of[12]
    run(["plan"] + plan_args + decide + ["--budget", f"memory={least - 1}"], expect=3)
    run(["plan"] + plan_args + decide + ["--budget", f"memory={least}"])
    doc = json.load(open(os.path.join(out, "plan.json")))
    d = doc["kv_decision"]
    check(d["chosen"]["k"] == d["chosen"]["v"] == "s8@row:sym" and all(l["recipe"] == "int8" for l in doc["layers"])
          and not d["candidates"][0]["feasible"] and doc["serving_estimate"]["kv_cache_bytes"] == kv_of[12],
          f"at the least memory: {d}")
    # Deployed on vLLM (the default) the int8-per-token cache is no candidate: vLLM stores none.
    run(["plan"] + plan_args + decide[:-2] + ["--budget", f"memory={least + 10 ** 6}"])
    doc = json.load(open(os.path.join(out, "plan.json")))
    d = doc["kv_decision"]
    check(d["chosen"]["k"] == "bf16" and not d["candidates"][1]["deployable"] and not d["candidates"][1]["feasible"]
          and "vllm has no s8@row:sym KV cache" in d["candidates"][1]["why"], f"under vllm: {d}")
    # Without a recorded config the estimate says why; a bad --serve is a usage error.
    run(["plan"] + plan_args + ["--serve", "batch=0,context=4"], expect=2)
    run(["plan"] + plan_args + ["--serve", "batch=1,context=4,kv=nope"], expect=2)
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print("ok: memory budget and serving estimate match the hand computation")


if __name__ == "__main__":
    main()
