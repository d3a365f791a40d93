"""precis plan's deployable output (DESIGN §17) read by the real frameworks' code, in the test venv
(torch, transformers, compressed-tensors):

- a small Llama (transformers LlamaForCausalLM, random weights) saved as a checkpoint; precis
  import / run (cpu: bf16, w4a16, fp8-rowwise) / plan under an effective-bits budget that
  forces a mix of schemes;
- compressed_tensors_config.json is parsed by compressed_tensors.QuantizationConfig, its format is
  mixed-precision (schemes of several formats: pack-quantized and float-quantized), and apply_quantization_config on the model gives a
  quantization_scheme to exactly the plan's quantized layers, each with its recipe's weights
  (num_bits, type, strategy, group_size) and activations, and none to the unquantized ones (ignore);
- modelopt_hf_quant_config.json's quantized_layers name exactly the layers on recipes that have a
  ModelOpt quant_algo (fp8-rowwise), and plan.json says w4a16 has none there (not silently
  replaced): those layers appear in neither the quantized layers nor exclude_modules;
- a recipe with no compressed-tensors equivalent (int8-sq's smoothing: a run of two layers in
  int8-sq only) is reported as such in plan.json and its layers are left out of the config.
"""
import json
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
from cli_checks import FAILURES, check, run  # noqa: E402

try:
    import torch
    import transformers
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    raise SystemExit(77)

FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "1"]
# What each recipe is in compressed-tensors' QuantizationArgs.
WANT = {"w8a16": ({"num_bits": 8, "type": "int", "strategy": "channel"}, None),
        "w4a16": ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}, None),
        "fp8-rowwise": ({"num_bits": 8, "type": "float", "strategy": "channel"},
                        {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True})}


def small_llama(path):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(path, safe_serialization=True)
    return transformers.LlamaForCausalLM(config)


def args_match(args, want):
    return all(str(getattr(args, k).value if hasattr(getattr(args, k), "value") else getattr(args, k)) == str(v)
               for k, v in want.items())


def main():
    tmp = scratch.mkdtemp(prefix="precis-deploy-")
    ckpt = os.path.join(tmp, "llama")
    fresh = small_llama(ckpt)
    ds = os.path.join(tmp, "m.h5")
    run(["import", "--model", ckpt, "--tokens", "8", "-o", ds, "-q"])
    rep = os.path.join(tmp, "rep")
    run(["run", ds, "--backend", "cpu", "--recipes", "bf16,w4a16,fp8-rowwise", "-o", rep] + FAST, expect=None)
    out = os.path.join(tmp, "plan")
    # 6 effective bits per weight on average: neither all-fp8 nor all-bf16 fits, so the plan mixes.
    run(["plan", os.path.join(rep, "report.json"), "--require", "rel_fro<=1", "--budget", "bits=6", "-o", out])
    plan = json.load(open(os.path.join(out, "plan.json")))
    chosen = {e["layer"]: e["recipe"] for e in plan["layers"]}
    used = set(chosen.values())
    check({"w4a16", "fp8-rowwise"} <= used, f"the plan mixes schemes of two formats: {sorted(used)}")

    doc = json.load(open(os.path.join(out, "compressed_tensors_config.json")))
    config = QuantizationConfig.model_validate(doc)
    check(doc["format"] == "mixed-precision", f"several schemes: format {doc['format']}")
    apply_quantization_config(fresh, config)
    schemes = {name: m.quantization_scheme for name, m in fresh.named_modules()
               if getattr(m, "quantization_scheme", None) is not None}
    want_quantized = {l for l, r in chosen.items() if r in WANT}
    check(set(schemes) == want_quantized,
          f"quantized modules {sorted(set(schemes) ^ want_quantized)} differ from the plan's")
    for layer, scheme in schemes.items():
        w, a = WANT[chosen[layer]]
        check(args_match(scheme.weights, w), f"{layer} ({chosen[layer]}): weights {scheme.weights}")
        if a is None:
            check(scheme.input_activations is None, f"{layer}: weight-only, input_activations {scheme.input_activations}")
        else:
            check(scheme.input_activations is not None and args_match(scheme.input_activations, a),
                  f"{layer}: input_activations {scheme.input_activations}")
    check(set(doc["ignore"]) == {l for l, r in chosen.items() if r == "bf16"}, f"ignore: {doc['ignore']}")

    ct = plan["deployment"]["compressed_tensors"]
    for r in used & set(WANT):
        entry = ct["recipes"][r]
        check(entry["mapping"] == "scheme" and entry["exact"], f"{r}: {entry}")
    mo = json.load(open(os.path.join(out, "modelopt_hf_quant_config.json")))["quantization"]
    check(mo["quant_algo"] == "MIXED_PRECISION", "ModelOpt MIXED_PRECISION")
    algo = {"w8a16": "W8A16", "fp8-rowwise": "FP8_PER_CHANNEL_PER_TOKEN"}
    want_mo = {l: algo[r] for l, r in chosen.items() if r in algo}
    check({l: e["quant_algo"] for l, e in mo["quantized_layers"].items()} == want_mo,
          f"ModelOpt quantized_layers {mo['quantized_layers']}")
    w4 = [l for l, r in chosen.items() if r == "w4a16"]
    if w4:
        entry = plan["deployment"]["modelopt"]["recipes"]["w4a16"]
        check(entry["mapping"] == "none" and "INT4_AWQ" in entry["note"], f"w4a16 has no ModelOpt equivalent: {entry}")
        check(set(w4) <= set(plan["deployment"]["modelopt"]["layers_without_equivalent"]),
              "w4a16 layers named as without equivalent")
        check(not set(w4) & (set(mo["quantized_layers"]) | set(mo.get("exclude_modules", []))),
              "w4a16 layers are neither quantized nor excluded in the ModelOpt file")

    # Every layer on int8-sq: compressed-tensors has no equivalent, the config carries none of them.
    ds2 = os.path.join(tmp, "sq.h5")
    run(["import", "--model", ckpt, "--tokens", "8", "--layers", "model.layers.0.mlp.*", "-o", ds2, "-q"])
    rep2 = os.path.join(tmp, "rep-sq")
    run(["run", ds2, "--backend", "cpu", "--recipes", "int8-sq", "-o", rep2] + FAST, expect=None)
    out2 = os.path.join(tmp, "plan-sq")
    # --deploy none: the exploration target lets the plan take a recipe no engine runs, and the
    # deployment section says so (under the default vllm target int8-sq is dropped: no plan).
    run(["plan", os.path.join(rep2, "report.json"), "--require", "rel_fro<=1", "-o", out2 + "-vllm"], expect=3)
    run(["plan", os.path.join(rep2, "report.json"), "--require", "rel_fro<=1", "--deploy", "none", "-o", out2])
    plan2 = json.load(open(os.path.join(out2, "plan.json")))
    check(all(e["recipe"] == "int8-sq" for e in plan2["layers"]), "every layer on int8-sq")
    if True:
        ct2 = plan2["deployment"]["compressed_tensors"]
        check(not ct2["complete"] and len(ct2["layers_without_equivalent"]) == 3, "int8-sq layers reported without equivalent")
        entry = ct2["recipes"]["int8-sq"]
        check(entry["mapping"] == "none" and "SmoothQuant" in entry["note"], f"int8-sq has no equivalent: {entry}")
        doc2 = json.load(open(os.path.join(out2, "compressed_tensors_config.json")))
        sq = {e["layer"] for e in plan2["layers"] if e["recipe"] == "int8-sq"}
        targets = {t for g in doc2["config_groups"].values() for t in g["targets"]}
        check(not sq & (targets | set(doc2["ignore"])), "int8-sq layers are in neither config_groups nor ignore")
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print("ok: the plan's quantization_config is parsed and applied by compressed-tensors, layer for layer")


if __name__ == "__main__":
    main()
