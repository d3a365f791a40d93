"""The schemes precis plan writes to compressed_tensors_config.json, compared with compressed-tensors'
own (the venv's library, not a copy of its values):

- nvfp4, mxfp4 and mxfp8 plans: each layer's weights and input_activations QuantizationArgs equal
  the library's preset_name_to_scheme("NVFP4" / "MXFP4" / "MXFP8") in every field that decides the
  computation (num_bits, type, symmetric, strategy, group_size, block_structure, dynamic and
  scale_dtype): NVFP4 activations are dynamic "local" (per-16 scales at run time under a static
  global scale) with strategy tensor_group, not dynamic true; the scale dtypes are E4M3 (NVFP4) and
  E8M0 as uint8 (MX), without which the library rounds no scale to them and makes no MX power-of-two
  scale (should_generate_mx_scales);
- a non-square block (B blocked 192 along k by 64 along n: `b=e4m3@192x64`) is the weight's
  [out, in] block [64, 192]: apply_quantization_config gives every layer a weight_scale of
  (out / 64, in / 192), the grid of precis' scales, on a model whose widths (576, 192, 1536) tell
  the two orders apart.

The model is a seeded Llama-like causal LM (hidden 576, 9 heads, 3 KV heads, tied embeddings, a
vocabulary of 1000) saved with transformers.
"""
import json
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py"))
from cli_checks import FAILURES, check, run  # noqa: E402
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

try:
    import torch
    import transformers
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config, preset_name_to_scheme
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    raise SystemExit(1 if os.environ.get("CI") == "true" else 77)

FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "1"]
FIELDS = ("num_bits", "type", "symmetric", "strategy", "group_size", "block_structure", "dynamic", "scale_dtype")
PRESETS = {"nvfp4": ("NVFP4", "nvfp4-pack-quantized"), "mxfp4": ("MXFP4", "mxfp4-pack-quantized"),
           "mxfp8": ("MXFP8", "mxfp8-quantized")}
BLOCK_R, BLOCK_C = 192, 64  # along k (the weight's in), along n (its out)
BLOCK_SPEC = f"a=bf16,b=e4m3@{BLOCK_R}x{BLOCK_C},acc=fp32,out=bf16"


def llama_config():
    return transformers.LlamaConfig(vocab_size=1000, hidden_size=576, intermediate_size=1536, num_hidden_layers=1,
                                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=64,
                                    tie_word_embeddings=True)


def value(v):
    return v.value if hasattr(v, "value") else v


def differences(ours, theirs):
    """The computation-deciding fields in which two QuantizationArgs (or None) differ."""
    if ours is None or theirs is None:
        return [] if ours is None and theirs is None else [("present", ours is not None, theirs is not None)]
    return [(f, value(getattr(ours, f)), value(getattr(theirs, f))) for f in FIELDS
            if str(value(getattr(ours, f))) != str(value(getattr(theirs, f)))]


def plan_config(tmp, ds, recipe, name):
    rep = os.path.join(tmp, f"rep-{name}")
    run(["run", ds, "--backend", "cpu", "--recipes", recipe, "-o", rep, "-q"] + FAST)
    out = os.path.join(tmp, f"plan-{name}")
    # --deploy none: the args each scheme is written with are checked here, on any architecture (vLLM
    # runs NVFP4 on sm_100/sm_120 only, and plan's default target is vllm on sm_90: test_python_plan_deploy_shapes).
    run(["plan", os.path.join(rep, "report.json"), "--require", "rel_fro<=1", "--deploy", "none", "-o", out])
    plan = json.load(open(os.path.join(out, "plan.json")))
    check(plan["layers"] and len({e["recipe"] for e in plan["layers"]}) == 1,
          f"{name}: every layer on the one recipe run: {[e['recipe'] for e in plan['layers']]}")
    return plan, json.load(open(os.path.join(out, "compressed_tensors_config.json")))


def check_all(tmp):
    torch.manual_seed(0)
    ckpt = os.path.join(tmp, "llama")
    transformers.LlamaForCausalLM(llama_config()).save_pretrained(ckpt, safe_serialization=True)
    ds = os.path.join(tmp, "m.h5")
    run(["import", "--model", ckpt, "--tokens", "8", "-o", ds, "-q"])

    for recipe, (preset, fmt) in PRESETS.items():
        plan, doc = plan_config(tmp, ds, recipe, recipe)
        config = QuantizationConfig.model_validate(doc)
        check(len(config.config_groups) == 1, f"{recipe}: one scheme: {list(config.config_groups)}")
        want = preset_name_to_scheme(preset, ["Linear"])
        for name, scheme in config.config_groups.items():
            check(doc["config_groups"][name].get("format", doc.get("format")) == fmt,
                  f"{recipe}: format {doc['config_groups'][name].get('format')}, expected {fmt}")
            for what in ("weights", "input_activations"):
                diff = differences(getattr(scheme, what), getattr(want, what))
                check(not diff, f"{recipe}: {what} differ from compressed-tensors' {preset} preset in (field, precis, "
                                f"library): {diff}")
        entry = plan["deployment"]["compressed_tensors"]["recipes"][recipe]
        check(entry["mapping"] == "scheme", f"{recipe}: {entry}")

    plan, doc = plan_config(tmp, ds, BLOCK_SPEC, "block")
    config = QuantizationConfig.model_validate(doc)
    model = transformers.LlamaForCausalLM(llama_config())
    apply_quantization_config(model, config)
    scaled = {n: m for n, m in model.named_modules() if hasattr(m, "weight_scale")}
    check(set(scaled) == {e["layer"] for e in plan["layers"]}, f"block: the quantized layers {sorted(scaled)}")
    shapes = {tuple(m.weight.shape) for m in scaled.values()}
    check({(576, 576), (192, 576), (1536, 576), (576, 1536)} <= shapes, f"widths that tell [R, C] from [C, R]: {shapes}")
    for name, module in scaled.items():
        out_features, in_features = module.weight.shape
        want = (math.ceil(out_features / BLOCK_C), math.ceil(in_features / BLOCK_R))
        check(tuple(module.weight_scale.shape) == want,
              f"{name} [{out_features}, {in_features}]: compressed-tensors' weight_scale grid "
              f"{tuple(module.weight_scale.shape)}, precis' {BLOCK_R}x{BLOCK_C} blocks of B = W^T are {want} "
              f"(block_structure {module.quantization_scheme.weights.block_structure}, expected [{BLOCK_C}, {BLOCK_R}])")


def main():
    tmp = scratch.mkdtemp(prefix="precis-deploy-schemes-")
    try:
        check_all(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print("ok: nvfp4, mxfp4, mxfp8 and a non-square block are compressed-tensors' own schemes")


if __name__ == "__main__":
    main()
