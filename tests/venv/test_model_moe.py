"""Mixture-of-experts checkpoints whose experts are fused into 3-D tensors, read by precis import --model
as one workload per expert ("<tensor>[<e>]"), and gpt-oss's MXFP4 experts read by --converted and
checked by precis conform.

- gpt-oss (written by transformers' own GptOssForCausalLM.save_pretrained, a 1-layer model with 4
  experts, seeded): model.layers.0.mlp.experts.gate_up_proj [experts, in, out] and down_proj, used as
  x @ W[e]. Each expert workload's b is the slice W[e] bit for bit, and the expert's forward computed
  from the dataset's b (gpt-oss's clamped SwiGLU on the interleaved gate/up columns) equals
  GptOssExperts.forward with every token routed to that expert.
- Qwen3-MoE: transformers 5.24 saves Qwen3MoeForCausalLM per expert (experts.<e>.gate_proj.weight,
  2-D, imported as ordinary layers), but holds the experts in memory fused as [experts, out, in]
  (F.linear(x, W[e])); that fused layout is written here with safetensors from the module's own
  parameters, b checked against W[e]^T and the forward against Qwen3MoeExperts.forward.
- gpt-oss MXFP4, written here from the layout transformers' integrations/mxfp4.py documents
  (convert_moe_packed_tensors: <t>_blocks U8 [experts, out, in/32, 16], two E2M1 codes a byte, the
  even column in the low nibble; <t>_scales U8 [experts, out, in/32], E8M0), the codes made from the
  original with the OCP MX floor rule in NumPy/ml_dtypes. The dequantized b equals transformers' own
  convert_moe_packed_tensors(dtype=float32) bit for bit; precis conform passes it, and flags a copy
  with one tampered code and one tampered scale, naming each.
- plan --moe-active weights these expert layers (their names hold ".experts.").
"""
import json
import os
import shutil
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, check, run  # noqa: E402

try:
    import h5py
    import ml_dtypes
    import numpy as np
    import torch
    from safetensors.numpy import load_file, save_file
    from transformers import GptOssConfig, GptOssForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
except ImportError as e:
    print(f"SKIP: {e} (cmake/quickstart.sh test installs cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

E, H, I = 4, 64, 64  # experts, hidden, intermediate (in/32 blocks: H and I multiples of 32)
GU, DN = "model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.experts.down_proj"


def workloads(ds):
    with h5py.File(ds, "r") as d:
        return {name: {"b": g["b"][()], "k": int(g.attrs["k"]), "n": int(g.attrs["n"]),
                       "source": json.loads(g.attrs["source"]), "description": g.attrs["description"]}
                for name, g in d["workloads"].items()}


def gpt_oss(tmp):
    torch.manual_seed(3)
    cfg = GptOssConfig(hidden_size=H, intermediate_size=I, num_hidden_layers=1, num_attention_heads=2,
                       num_key_value_heads=1, head_dim=16, num_local_experts=E, num_experts_per_tok=2, vocab_size=64)
    model = GptOssForCausalLM(cfg).eval()
    with torch.no_grad():  # non-zero biases, so that the forward check sees them placed right
        experts = model.model.layers[0].mlp.experts
        experts.gate_up_proj_bias.normal_(0, 0.1)
        experts.down_proj_bias.normal_(0, 0.1)
    path = os.path.join(tmp, "gpt-oss")
    model.save_pretrained(path)
    return model, path


def check_gpt_oss(model, path, tmp):
    stored = load_file(os.path.join(path, "model.safetensors"))
    check(stored[GU].shape == (E, H, 2 * I) and stored[DN].shape == (E, I, H),
          f"transformers saves gpt-oss's experts fused [experts, in, out]: {stored[GU].shape} {stored[DN].shape}")
    ds = os.path.join(tmp, "gpt-oss.h5")
    p = run(["import", "--model", path, "--tokens", "4", "-o", ds, "-q"])
    check("[experts, in, out]" in p.stderr and f"its {2 * E} expert layers" in p.stderr, f"the layout said: {p.stderr}")
    w = workloads(ds)
    for e in range(E):
        for tensor, k, n in ((GU, H, 2 * I), (DN, I, H)):
            name = f"{tensor}[{e}]"
            check(name in w, f"workload {name} (of {sorted(w)})")
            if name not in w:
                continue
            check(w[name]["k"] == k and w[name]["n"] == n, f"{name}: k, n = {w[name]['k']}, {w[name]['n']}")
            check(np.array_equal(w[name]["b"], stored[tensor][e]), f"{name}: b is W[e] as stored, bit for bit")
            check(w[name]["source"]["tensor"] == tensor and "x @ W[e]" in w[name]["description"], f"{name}: source")
    check("model.layers.0.mlp.router" in w and "lm_head" in w, "the 2-D layers are still there")
    # Orientation: the expert's forward from the dataset's b against the module's own forward.
    experts = model.model.layers[0].mlp.experts
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, H)).astype(np.float32)
    e = 2
    with torch.no_grad():
        want = experts(torch.from_numpy(x), torch.full((5, 1), e), torch.ones(5, 1)).numpy().astype(np.float64)
    bias_gu = experts.gate_up_proj_bias[e].detach().numpy().astype(np.float64)
    bias_dn = experts.down_proj_bias[e].detach().numpy().astype(np.float64)
    gate_up = x.astype(np.float64) @ w[f"{GU}[{e}]"]["b"].astype(np.float64) + bias_gu
    gate, up = np.minimum(gate_up[:, ::2], experts.limit), np.clip(gate_up[:, 1::2], -experts.limit, experts.limit)
    glu = gate / (1 + np.exp(-gate * experts.alpha))
    got = ((up + 1) * glu) @ w[f"{DN}[{e}]"]["b"].astype(np.float64) + bias_dn
    err = np.abs(got - want).max() / np.abs(want).max()
    check(err < 1e-5, f"gpt-oss expert {e}: x @ b reproduces GptOssExperts.forward (relative error {err:.2g})")
    # --layers picks experts by their names; --list shows them.
    p = run(["import", "--model", path, "--layers", "*experts.down_proj*", "--list"])
    listed = [line.split("\t")[0] for line in p.stdout.splitlines()]
    check(listed == [f"{DN}[{e}]" for e in range(E)], f"--list --layers '*experts.down_proj*': {listed}")
    # Captured activations hold no expert inputs (experts are no nn.Linear): the error names the
    # expert and the way out, and --exclude takes it.
    acts = os.path.join(tmp, "acts.npz")
    np.savez(acts, **{"model.layers.0.mlp.router": rng.standard_normal((3, 4, H)).astype(np.float32)})
    p = run(["import", "--model", path, "--layers", "*mlp.*", "--activations", acts, "-o", os.path.join(tmp, "a.h5"),
             "-q"], expect=2)
    check(any(f"expert layer {t}[0]" in p.stderr and f"--exclude '{t}*'" in p.stderr for t in (GU, DN)),
          f"missing expert inputs: {p.stderr}")
    run(["import", "--model", path, "--layers", "*mlp.*", "--exclude", "*experts*", "--activations", acts,
         "-o", os.path.join(tmp, "a.h5"), "-q"])
    check(list(workloads(os.path.join(tmp, "a.h5"))) == ["model.layers.0.mlp.router"], "--exclude '*experts*': the router alone")
    return ds


def check_qwen3_moe(tmp):
    torch.manual_seed(5)
    cfg = Qwen3MoeConfig(hidden_size=H, moe_intermediate_size=I, intermediate_size=2 * I, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_experts=E, num_experts_per_tok=2,
                         vocab_size=64)
    model = Qwen3MoeForCausalLM(cfg).eval()
    experts = model.model.layers[0].mlp.experts
    gu, dn = experts.gate_up_proj.detach().numpy(), experts.down_proj.detach().numpy()
    check(gu.shape == (E, 2 * I, H) and dn.shape == (E, H, I), f"Qwen3MoeExperts holds [experts, out, in]: {gu.shape}")
    path = os.path.join(tmp, "qwen3-moe")
    os.makedirs(path)
    save_file({GU: np.ascontiguousarray(gu), DN: np.ascontiguousarray(dn)}, os.path.join(path, "model.safetensors"))
    cfg.save_pretrained(path)  # config.json: model_type qwen3_moe
    ds = os.path.join(tmp, "qwen3-moe.h5")
    run(["import", "--model", path, "--tokens", "4", "-o", ds, "-q"])
    w = workloads(ds)
    for e in range(E):
        check(np.array_equal(w[f"{GU}[{e}]"]["b"], gu[e].T) and np.array_equal(w[f"{DN}[{e}]"]["b"], dn[e].T),
              f"qwen3_moe expert {e}: b = W[e]^T bit for bit")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, H)).astype(np.float32)
    e = 1
    with torch.no_grad():
        want = experts(torch.from_numpy(x), torch.full((5, 1), e), torch.ones(5, 1)).numpy().astype(np.float64)
    gate_up = x.astype(np.float64) @ w[f"{GU}[{e}]"]["b"].astype(np.float64)
    gate, up = gate_up[:, :I], gate_up[:, I:]
    got = (gate / (1 + np.exp(-gate)) * up) @ w[f"{DN}[{e}]"]["b"].astype(np.float64)
    err = np.abs(got - want).max() / np.abs(want).max()
    check(err < 1e-5, f"qwen3_moe expert {e}: x @ b reproduces Qwen3MoeExperts.forward (relative error {err:.2g})")


def mxfp4_quantize(w_out_in):
    """[experts, out, in] -> (blocks [experts, out, in/32, 16] U8, scales [experts, out, in/32] U8): OCP MX
    floor rule (scale 2^(floor(log2(amax)) - 2)), codes E2M1 round to nearest even (ml_dtypes), saturated at 6."""
    e, out, n = w_out_in.shape
    blocks32 = w_out_in.reshape(e, out, n // 32, 32).astype(np.float32)
    amax = np.abs(blocks32).max(axis=-1)
    exponent = np.floor(np.log2(np.where(amax > 0, amax, 1.0))).astype(np.int32) - 2
    scales = (exponent + 127).astype(np.uint8)
    scaled = blocks32 / np.ldexp(np.float32(1), exponent)[..., None]
    codes = np.clip(scaled, -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 15
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return blocks, scales


def check_mxfp4(path, tmp):
    original = load_file(os.path.join(path, "model.safetensors"))
    conv = os.path.join(tmp, "gpt-oss-mxfp4")
    os.makedirs(conv)
    tensors = {n: t for n, t in original.items() if n not in (GU, DN)}
    for name in (GU, DN):
        blocks, scales = mxfp4_quantize(np.ascontiguousarray(original[name].transpose(0, 2, 1)))  # [E, out, in]
        tensors[name + "_blocks"], tensors[name + "_scales"] = blocks, scales
    save_file(tensors, os.path.join(conv, "model.safetensors"))
    config = json.load(open(os.path.join(path, "config.json")))
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    json.dump(config, open(os.path.join(conv, "config.json"), "w"))

    p = run(["import", "--model", conv, "--tokens", "4", "-o", os.path.join(tmp, "x.h5"), "-q"], expect=2)
    check("--converted" in p.stderr and "mxfp4" in p.stderr, f"the MXFP4 checkpoint as --model: {p.stderr}")
    p = run(["import", "--model", path, "--converted", conv, "--list"])
    lines = {line.split("\t")[0]: line.split("\t") for line in p.stdout.splitlines() if not line.startswith("#")}
    check(lines[f"{GU}[0]"][2].startswith("mxfp4: weights FP4 E2M1, group 32") and
          lines[f"{GU}[0]"][3] == "FP4 E2M1 packed, group 32 E8M0", f"--list --converted: {lines.get(GU + '[0]')}")
    check(lines["model.layers.0.self_attn.q_proj"][2] == "ignored by the producer",
          f"modules_to_not_convert 'model.layers.*.self_attn' names q_proj: {lines.get('model.layers.0.self_attn.q_proj')}")
    ds = os.path.join(tmp, "mxfp4.h5")
    run(["import", "--model", path, "--converted", conv, "--tokens", "4", "-o", ds, "-q"])
    w = workloads(ds)
    for name in (GU, DN):
        t = load_file(os.path.join(conv, "model.safetensors"))
        oracle = convert_moe_packed_tensors(torch.from_numpy(t[name + "_blocks"]), torch.from_numpy(t[name + "_scales"]),
                                            dtype=torch.float32).numpy()  # [E, in, out], transformers' own
        for e in range(E):
            got = w[f"{name}[{e}]"]
            check(np.array_equal(got["b"], oracle[e]), f"{name}[{e}]: b = convert_moe_packed_tensors, bit for bit")
            c = got["source"]["converted"]
            check(c["conform"]["status"] == "conforms" and c["declared"].startswith("FP4 E2M1") and
                  "E8M0" in c["weights"], f"{name}[{e}]: source.converted {c}")
    check(w["model.layers.0.self_attn.q_proj"]["source"]["converted"]["declared"] ==
          "ignored by the producer (left unquantized)", "q_proj ignored by the producer")
    p = run(["conform", path, conv])
    check("all" in p.stdout and "conform" in p.stdout, f"conform on the untouched MXFP4 checkpoint: {p.stdout[-500:]}")

    # One tampered code (expert 1 of gate_up_proj, row 3, column 6: the low nibble of byte 3) and one
    # tampered scale (expert 2 of down_proj, row 5, block 1: doubled).
    bad = os.path.join(tmp, "tampered")
    shutil.copytree(conv, bad)
    t = load_file(os.path.join(bad, "model.safetensors"))
    blocks = t[GU + "_blocks"].copy()
    low = blocks[1, 3, 0, 3] & 15
    blocks[1, 3, 0, 3] = (blocks[1, 3, 0, 3] & 0xF0) | (low ^ 1 if low & 7 not in (0, 7) else low ^ 2)
    scales = t[DN + "_scales"].copy()
    scales[2, 5, 1] += 1
    t[GU + "_blocks"], t[DN + "_scales"] = blocks, scales
    save_file(t, os.path.join(bad, "model.safetensors"))
    p = run(["conform", path, bad], expect=3)
    check(f"{GU}_blocks[1][3, 6]" in p.stdout + p.stderr, f"conform names the tampered code: {p.stdout[-1500:]}")
    check(f"{DN}_scales[2][5, 1]" in p.stdout + p.stderr, f"conform names the tampered scale: {p.stdout[-1500:]}")
    check("2 of" in p.stdout, f"two layers do not conform: {p.stdout[-300:]}")
    return ds


def check_moe_active(ds, tmp):
    """plan --moe-active 2/4 weighs the 2 * E expert workloads by 1/2 in a bits budget: the capacity is
    12 bits x (the other layers' weights + half the experts' E x 3 x H x I)."""
    rep = os.path.join(tmp, "rep")
    run(["run", ds, "--backend", "cpu", "--recipes", "fp32,bf16,fp8", "-o", rep, "--quiet"])
    plans = {}
    for active in (None, "2/4"):
        out = os.path.join(tmp, "plan-" + str(active).replace("/", "_"))
        run(["plan", os.path.join(rep, "report.json"), "--budget", "bits=12", "-o", out] +
            (["--moe-active", active] if active else []))
        plans[active] = json.load(open(os.path.join(out, "plan.json")))
    layers = plans[None]["layers"]
    expert = {l["layer"]: l["weights"] for l in layers if l["layer"].startswith(("model.layers.0.mlp.experts.gate_up_proj[",
                                                                                 "model.layers.0.mlp.experts.down_proj["))}
    others = sum(l["weights"] for l in layers if l["layer"] not in expert)
    check(len(expert) == 2 * E and sum(expert.values()) == E * 3 * H * I, f"the expert layers in the plan: {expert}")
    check(plans[None]["budget"]["capacity"] == 12 * (others + E * 3 * H * I), f"capacity without: {plans[None]['budget']}")
    check(plans["2/4"]["budget"]["moe_active"] == 0.5 and
          plans["2/4"]["budget"]["capacity"] == 12 * (others + E * 3 * H * I // 2),
          f"--moe-active 2/4 weighs the fused experts by 1/2: {plans['2/4']['budget']}")


def main():
    tmp = scratch.mkdtemp(prefix="precis-moe-")
    model, path = gpt_oss(tmp)
    check_moe_active(check_gpt_oss(model, path, tmp), tmp)
    check_qwen3_moe(tmp)
    check_mxfp4(path, tmp)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    shutil.rmtree(tmp)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
