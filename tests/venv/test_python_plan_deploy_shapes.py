"""Plans that vLLM's checkpoint library accepts (issue 39, DESIGN §21), checked with the library itself.

A seeded Llama built with transformers' LlamaConfig the way real small models are: hidden 576 (4.5 x
128), intermediate 960 (7.5 x 128), 9 heads over 3 KV heads (GQA), tied embeddings, a vocabulary of
3001 (not a multiple of 128). Its layers' input widths (576, 960) are not multiples of 128, so
w4a16's groups of 128 cannot be compressed: compressed-tensors raises "tensor column shape must be
divisble by the given group_size".

- precis import --model --activations (the tied lm_head included), run on the cpu: bf16, w4a16
  (group 128), w4a16 with groups of 64 (a spec), fp8-rowwise;
- plans under several bits budgets with the default target (vllm): no layer gets w4a16 g128, which
  plan.json lists as dropped on every layer, with groups of 64 as the nearest that deploys; q/k/v and
  gate/up share a recipe in every layer; the config is parsed, applied to the real model (bf16),
  weight scales set with the library's calculate_qparams, ModelCompressor.compress_model, saved,
  reloaded with transformers (AutoModelForCausalLM), and every module's scheme equals the plan's;
- --deploy none may take w4a16 g128: its deployment section then says complete false and names the
  layers the library would reject (exact false), instead of "exact: true";
- the tied head: unquantized it costs 0 (it is the embedding table); on a report with quantized
  recipes only the plan quantizes it and charges its copy: the plan's bytes for lm_head equal the
  bytes of lm_head's tensors in the saved checkpoint (weight_packed + weight_scale; its
  weight_shape's 16 bytes aside), and the file is that much larger than the same plan with lm_head
  in ignore.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, PRECIS, check  # noqa: E402
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

try:
    import torch
    import transformers
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, QuantizationStrategy, apply_quantization_config
    from compressed_tensors.quantization.utils import calculate_qparams
    from safetensors import safe_open
except ImportError as e:
    print(f"SKIP: {e}", file=sys.stderr)
    raise SystemExit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
import precis.torch as pt  # noqa: E402

G64 = "a=bf16,b=s4@k64:sym-half,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none"
FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "1"]
# Each recipe as compressed-tensors' QuantizationArgs: (weights, input activations).
WANT = {"w4a16": ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}, None),
        G64: ({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 64}, None),
        "w8a16": ({"num_bits": 8, "type": "int", "strategy": "channel"}, None),
        "fp8-rowwise": ({"num_bits": 8, "type": "float", "strategy": "channel"},
                        {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True})}


# ModelOpt's hf_quant_config.json, as its export writes it (NVIDIA/TensorRT-Model-Optimizer commit
# 5a4242f, modelopt/torch/export/quant_utils.py: get_quant_config, process_layer_quant_config): ModelOpt
# is not installable here, so its schema is written from that source. The per-layer quant_algo values
# its export writes; MIXED_PRECISION when the layers use several formats, else one format flat with
# exclude_modules.
MODELOPT_LAYER_ALGOS = {"FP8", "FP8_PER_CHANNEL_PER_TOKEN", "W4A16_AWQ", "W4A8_AWQ", "W8A16", "W8A8_SQ_PER_CHANNEL",
                        "NVFP4", "NVFP4_AWQ", "W4A8_NVFP4_FP8", "W4A8_MXFP4_FP8"}
MODELOPT_GROUPED = {"W4A16_AWQ", "W4A8_AWQ", "NVFP4", "NVFP4_AWQ", "W4A8_NVFP4_FP8", "W4A8_MXFP4_FP8"}
MODELOPT_KV = {None, "FP8", "INT8", "NVFP4", "NVFP4_AFFINE"}


def modelopt_schema_errors(doc):
    errors = []
    if set(doc) != {"producer", "quantization"} or not isinstance(doc["producer"].get("name"), str):
        errors.append(f"top level {sorted(doc)}")
    q = doc.get("quantization", {})
    if q.get("kv_cache_quant_algo", "missing") not in MODELOPT_KV:
        errors.append(f"kv_cache_quant_algo {q.get('kv_cache_quant_algo', 'missing')}")
    entries = []
    if q.get("quant_algo") == "MIXED_PRECISION":
        if set(q) != {"quant_algo", "kv_cache_quant_algo", "quantized_layers"}:
            errors.append(f"MIXED_PRECISION keys {sorted(q)}")
        entries = list(q.get("quantized_layers", {}).values())
        if len({json.dumps(e, sort_keys=True) for e in entries}) < 2:
            errors.append("MIXED_PRECISION with fewer than two formats")
    elif q.get("quant_algo") is not None:
        entries = [{k: v for k, v in q.items() if k in ("quant_algo", "group_size")}]
        if not isinstance(q.get("exclude_modules"), list) or "quantized_layers" in q:
            errors.append(f"one format: keys {sorted(q)}")
    for e in entries:
        if e.get("quant_algo") not in MODELOPT_LAYER_ALGOS:
            errors.append(f"quant_algo {e.get('quant_algo')}")
        if (e.get("quant_algo") in MODELOPT_GROUPED) != isinstance(e.get("group_size"), int):
            errors.append(f"group_size of {e}")
    return errors


def run(args, expect=0):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True)
    if expect is not None and p.returncode != expect:
        print(p.stdout[-3000:], p.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"precis {' '.join(args)}: exit {p.returncode}, expected {expect}")
    return p


def build_model(path):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=3001, hidden_size=576, intermediate_size=960, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=64,
                                      tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 3001, (2, 16), generator=torch.Generator().manual_seed(1))
    model.save_pretrained(path, safe_serialization=True)
    return model, ids


def value(x):
    return x.value if hasattr(x, "value") else x


def args_match(args, want):
    return args is not None and all(str(value(getattr(args, k))) == str(v) for k, v in want.items())


def minmax(w, args):
    s = args.strategy
    if s == QuantizationStrategy.CHANNEL:
        return w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    if s == QuantizationStrategy.GROUP:
        g = w.unflatten(-1, (-1, args.group_size))
        return g.amin(-1), g.amax(-1)
    if s == QuantizationStrategy.TENSOR:
        return w.min().reshape(1), w.max().reshape(1)
    raise ValueError(f"strategy {s}")


def compress_and_save(ckpt, doc, out):
    """The written quantization_config applied to the real model by compressed-tensors, weights
    calibrated min/max with its calculate_qparams, compressed, saved; returns the safetensors path."""
    model = transformers.LlamaForCausalLM.from_pretrained(ckpt, torch_dtype=torch.bfloat16)
    config = QuantizationConfig.model_validate(doc)
    apply_quantization_config(model, config)
    for _, module in model.named_modules():
        scheme = getattr(module, "quantization_scheme", None)
        if scheme is None or scheme.weights is None:
            continue
        w = module.weight.data
        lo, hi = minmax(w, scheme.weights)
        s, z = calculate_qparams(torch.minimum(lo, torch.zeros_like(lo)), torch.maximum(hi, torch.zeros_like(hi)),
                                 scheme.weights)
        module.weight_scale.data.copy_(s.reshape(module.weight_scale.shape))
        if hasattr(module, "weight_zero_point"):
            module.weight_zero_point.data.copy_(z.reshape(module.weight_zero_point.shape))
    compressor = ModelCompressor(quantization_config=config)
    compressor.compress_model(model)  # raises on a group that does not divide a layer's width
    os.makedirs(out, exist_ok=True)
    if any("lm_head" in g["targets"] for g in doc["config_groups"].values()):
        # A quantized tied head is stored as its own copy: the checkpoint is no longer tied (what
        # llm-compressor writes when it quantizes a tied head, and what plan.json's tied_head says).
        model.config.tie_word_embeddings = False
    model.config.save_pretrained(out)
    from safetensors.torch import save_file
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    path = os.path.join(out, "model.safetensors")
    save_file(state, path, metadata={"format": "pt"})
    compressor.update_config(out)
    return path


def tensor_bytes(path, prefix):
    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k).numel() * f.get_tensor(k).element_size() for k in f.keys() if k.startswith(prefix)}


def check_plan(tmp, ckpt, plan_dir, label):
    plan = json.load(open(os.path.join(plan_dir, "plan.json")))
    chosen = {e["layer"]: e["recipe"] for e in plan["layers"]}
    for i in range(2):
        p = f"model.layers.{i}."
        qkv = {chosen[p + f"self_attn.{x}_proj"] for x in "qkv"}
        gu = {chosen[p + "mlp.gate_proj"], chosen[p + "mlp.up_proj"]}
        check(len(qkv) == 1 and len(gu) == 1, f"{label}: layer {i} q/k/v {qkv} and gate/up {gu} share one recipe")
    check("w4a16" not in chosen.values(), f"{label}: no layer on w4a16 group 128 (widths 576, 960)")
    ct = plan["deployment"]["compressed_tensors"]
    check(ct["complete"] and not ct["layers_rejected_by_shape"], f"{label}: compressed-tensors complete: {ct}")
    doc = json.load(open(os.path.join(plan_dir, "compressed_tensors_config.json")))
    saved = compress_and_save(ckpt, doc, os.path.join(tmp, "saved-" + label))
    # Reloaded by transformers (its compressed-tensors quantizer applies the config from config.json).
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(os.path.dirname(saved), torch_dtype=torch.bfloat16)
    schemes = {n: m.quantization_scheme for n, m in reloaded.named_modules()
               if getattr(m, "quantization_scheme", None) is not None}
    want_quantized = {l for l, r in chosen.items() if r in WANT}
    check(set(schemes) == want_quantized, f"{label}: reloaded quantized modules differ from the plan's: "
                                          f"{sorted(set(schemes) ^ want_quantized)}")
    for layer, scheme in schemes.items():
        w, a = WANT[chosen[layer]]
        check(args_match(scheme.weights, w), f"{label}: {layer} ({chosen[layer]}) weights {scheme.weights}")
        check((a is None and scheme.input_activations is None) or args_match(scheme.input_activations, a),
              f"{label}: {layer} activations {scheme.input_activations}")
    return plan, chosen, doc, saved


def main():
    tmp = scratch.mkdtemp(prefix="precis-deploy-shapes-")
    try:
        body(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print("ok: every plan's config compresses, saves and reloads with the plan's schemes; fused layers share one")


def body(tmp):
    ckpt = os.path.join(tmp, "llama")
    model, ids = build_model(ckpt)
    acts = os.path.join(tmp, "acts.npz")
    pt.capture(model, [ids], gradients=False).save(acts)
    ds = os.path.join(tmp, "m.h5")
    p = run(["import", "--model", ckpt, "--activations", acts, "-o", ds, "-q"])
    check("tied to the input embeddings" in p.stdout, f"lm_head imported as the tied head: {p.stdout}")
    rep = os.path.join(tmp, "rep")
    run(["run", ds, "--backend", "cpu", "--recipes", f"bf16,w4a16,{G64},fp8-rowwise", "-o", rep] + FAST, expect=None)
    report = os.path.join(rep, "report.json")

    for bits in ("5", "9"):
        out = os.path.join(tmp, f"plan-{bits}")
        run(["plan", report, "--require", "rel_fro<=1", "--objective", "rel_fro", "--budget", f"bits={bits}", "-o", out])
        plan, chosen, doc, _ = check_plan(tmp, ckpt, out, f"bits={bits}")
        target = plan["deploy_target"]
        check(target["engine"] == "vllm", f"default target vllm: {target['engine']}")
        dropped = {(d["layer"], d["recipe"]): d for d in target["dropped"]}
        check({l for l, r in dropped if r == "w4a16"} == set(chosen), "w4a16 g128 dropped on every layer")
        d = dropped.get(("model.layers.0.mlp.down_proj", "w4a16"))
        check(d is not None and "960" in d["why"] and "b=s4@k64" in (d["nearest_deployable"] or ""),
              f"why and the nearest that deploys: {d}")
        tied = target["tied_head"]
        check(tied and tied["layer"] == "lm_head" and tied["charged_quantized_copy"], f"tied head: {tied}")
        check(plan["layers"][-1]["layer"] == "lm_head" or "lm_head" in chosen, "lm_head planned")
        head = next(e for e in plan["layers"] if e["layer"] == "lm_head")
        check(head["recipes"]["bf16"]["cost"] == 0, f"an unquantized tied head costs 0: {head['recipes']['bf16']}")
        groups = target["fused_groups"]
        check(len(groups) == 4 and all(len(g) in (2, 3) for g in groups), f"fused groups: {groups}")

    # TensorRT-LLM: ModelOpt's file, checked against its export's schema; fused layers on one quant_algo.
    out = os.path.join(tmp, "plan-trtllm")
    run(["plan", report, "--require", "rel_fro<=1", "--objective", "rel_fro", "--budget", "bits=12", "--deploy", "trtllm",
         "-o", out])
    plan = json.load(open(os.path.join(out, "plan.json")))
    chosen = {e["layer"]: e["recipe"] for e in plan["layers"]}
    check(set(chosen.values()) == {"bf16", "fp8-rowwise"}, f"trtllm: w4a16 (INT4_AWQ only) dropped: {set(chosen.values())}")
    mo = json.load(open(os.path.join(out, "modelopt_hf_quant_config.json")))
    errors = modelopt_schema_errors(mo)
    check(not errors, f"modelopt_hf_quant_config.json against ModelOpt's export schema: {errors}")
    q = mo["quantization"]
    algo = {l: q["quant_algo"] for l, r in chosen.items() if r == "fp8-rowwise"}
    check(q["quant_algo"] == "FP8_PER_CHANNEL_PER_TOKEN" and set(q["exclude_modules"]) == {l for l, r in chosen.items()
                                                                                           if r == "bf16"},
          f"one format written flat, the bf16 layers excluded: {q}")
    for i in range(2):
        p = f"model.layers.{i}."
        check(len({chosen[p + f"self_attn.{x}_proj"] for x in "qkv"}) == 1, f"trtllm: layer {i} q/k/v share one recipe")
    check(plan["deployment"]["modelopt"]["complete"] and algo, f"trtllm: complete {plan['deployment']['modelopt']}")

    # Exploration: w4a16 g128 may be chosen, and the deployment section says the library rejects it.
    out = os.path.join(tmp, "plan-none")
    run(["plan", report, "--require", "rel_fro<=1", "--objective", "rel_fro", "--budget", "bits=4.2", "--deploy", "none",
         "-o", out])
    plan = json.load(open(os.path.join(out, "plan.json")))
    chosen = {e["layer"]: e["recipe"] for e in plan["layers"]}
    ct = plan["deployment"]["compressed_tensors"]
    on_g128 = {l for l, r in chosen.items() if r == "w4a16"}
    check(bool(on_g128), f"--deploy none takes w4a16 g128 at 4.2 bits: {sorted(set(chosen.values()))}")
    check(not ct["complete"] and {e["layer"] for e in ct["layers_rejected_by_shape"]} == on_g128
          and not ct["recipes"]["w4a16"]["exact"], f"--deploy none: the library's refusal is reported: {ct}")
    head = next(e for e in plan["layers"] if e["layer"] == "lm_head")
    check(head["recipes"]["bf16"]["cost"] == 16 * 576 * 3001, "--deploy none counts the head as its own matrix")

    # The tied head quantized: its charge is what the saved checkpoint adds.
    rep2 = os.path.join(tmp, "rep-q")
    run(["run", ds, "--backend", "cpu", "--recipes", f"{G64},fp8-rowwise", "-o", rep2] + FAST, expect=None)
    out = os.path.join(tmp, "plan-q")
    run(["plan", os.path.join(rep2, "report.json"), "--require", "rel_fro<=1", "--objective", "rel_fro", "-o", out])
    plan, chosen, doc, saved = check_plan(tmp, ckpt, out, "quantized-head")
    head = next(e for e in plan["layers"] if e["layer"] == "lm_head")
    check(chosen["lm_head"] == G64, f"the head on groups of 64: {chosen['lm_head']}")
    stored = tensor_bytes(saved, "lm_head.")
    data = sum(v for k, v in stored.items() if k != "lm_head.weight_shape")
    check(data == head["recipes"][G64]["resident_bytes"],
          f"lm_head's bytes in the checkpoint {stored} equal the plan's {head['recipes'][G64]['resident_bytes']}")
    # The same plan with lm_head in ignore: the file is smaller by the head's tensors (and their
    # few header bytes), the embedding table being in both.
    doc_ignore = json.loads(json.dumps(doc))
    for g in doc_ignore["config_groups"].values():
        g["targets"] = [t for t in g["targets"] if t != "lm_head"]
    doc_ignore["ignore"] = doc_ignore.get("ignore", []) + ["lm_head"]
    saved_ignore = compress_and_save(ckpt, doc_ignore, os.path.join(tmp, "saved-ignore"))
    check("lm_head.weight" not in tensor_bytes(saved_ignore, "lm_head."), "an unquantized tied head adds no tensor")
    added = os.path.getsize(saved) - os.path.getsize(saved_ignore)
    check(0 <= added - sum(stored.values()) <= 512,
          f"the file grows by the head's copy: {added} bytes for {sum(stored.values())} bytes of lm_head tensors")


if __name__ == "__main__":
    main()
