"""KV cache formats in verify (issue 42) against an implementation written here from the documented rules
(docs/kv-cache.md), on a seeded GQA Llama (hidden 576, 9 query / 3 KV heads of 64, tied embeddings,
vocabulary 1000, not a multiple of 128):

- FP8 per tensor (e4m3@tensor): per layer, amax = the largest |K| (|V|) after rotary over the
  calibration inputs; scale = fp32(amax / 448); stored = e4m3(clamp(x / scale, ±448)) (RNE, as torch's
  float8_e4m3fn cast); read back = stored * scale in fp32;
- int8 per token and head (s8@row:sym): per (sequence, KV head, token) the head_dim values' amax,
  scale = fp32(amax / 127), q = clamp(round-half-even(x / scale), ±127), read back q * scale;
  amax 0 gives zeros.

Here they are applied by patching the attention functions themselves (the Llama module's
eager_attention_forward, the sdpa entry of transformers' table), not through precis.kvcache's
routing; verify's logits must equal this model's bit for bit, with K and V in different formats
both ways round, under eager and sdpa. Also: bytes per token, the plan file's "kv" key, the
attention restored after verify, and refusals of a bad format.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

try:
    import numpy as np
    import torch
    import transformers
    from transformers.modeling_utils import AttentionInterface
    from transformers.models.llama import modeling_llama
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
from precis import kvcache, verify  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def seeded_llama(attn):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=128,
                                      tie_word_embeddings=True, attn_implementation=attn)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # wider K and V than the default init, so that fp8 and int8 round visibly
        for name, p in model.named_parameters():
            if p.dim() == 2 and ("k_proj" in name or "v_proj" in name or "q_proj" in name):
                p.mul_(8.0)
    return model


def fp8_tensor(x, amax):
    scale = torch.tensor(amax, dtype=torch.float32) / torch.tensor(448.0, dtype=torch.float32)
    stored = torch.clamp(x / scale, -448.0, 448.0).to(torch.float8_e4m3fn)
    return stored.to(torch.float32) * scale


def int8_token_head(x):
    amax = x.abs().amax(dim=-1, keepdim=True)
    scale = amax / torch.tensor(127.0, dtype=torch.float32)
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = torch.clamp(torch.round(x / safe), -127, 127)
    return torch.where(scale == 0, torch.zeros_like(x), q * scale)


def int_groups(x, bits, rotate):
    """s{bits}@k32:sym[+had]: optionally rotate each head vector by the normalized Sylvester Hadamard
    matrix (float64 product, one rounding to fp32), then integer groups of 32 (scale amax / q, codes
    -q..q, q = 2^(bits-1) - 1: 7 for 4 bits, 1 for 2 bits), then rotate back."""
    d = x.shape[-1]
    q = float(2 ** (bits - 1) - 1)
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    h = h / d ** 0.5
    r = (x.double() @ h).float() if rotate else x
    g = r.reshape(*r.shape[:-1], d // 32, 32)
    scale = g.abs().amax(dim=-1, keepdim=True) / torch.tensor(q, dtype=torch.float32)
    safe = torch.where(scale == 0, torch.ones_like(scale), scale)
    y = torch.where(scale == 0, torch.zeros_like(g), torch.clamp(torch.round(g / safe), -q, q) * scale).reshape(r.shape)
    return (y.double() @ h.T).float() if rotate else y


def int4_groups_hadamard(x):
    """s4@k32:sym+had (int_groups with 4 bits, rotated)."""
    return int_groups(x, 4, True)


def fp8_unit(x):
    """e4m3 at scale 1.0 (vLLM's fp8 cache without scales): the saturating cast itself."""
    return torch.clamp(x, -448.0, 448.0).to(torch.float8_e4m3fn).to(torch.float32)


def nvfp4_static(x, amax):
    """e2m1@nv:static: blocks of 16 along head_dim; tensor scale s2 = fp32(amax / 2688) from calibration;
    block scale = E4M3 (saturating) of block amax / fp32(6 * s2), 0 -> 1.0; element = E2M1 (RNE,
    saturating; ml_dtypes) of x / fp32(block scale * s2); read back (e2m1 * block scale) * s2."""
    import ml_dtypes

    f32 = np.float32
    s2 = f32(amax) / f32(2688.0)
    if s2 == 0:
        s2 = f32(1.0)
    a = x.detach().numpy().astype(f32)
    g = a.reshape(*a.shape[:-1], a.shape[-1] // 16, 16)
    bmax = np.abs(g).max(axis=-1, keepdims=True)
    block = (np.clip(bmax / f32(f32(6.0) * s2), 0, 448).astype(f32).astype(ml_dtypes.float8_e4m3fn).astype(f32))
    block = np.where(block == 0, f32(1.0), block)
    divisor = np.where(bmax > 0, (block * s2).astype(f32), f32(0.0))
    safe = np.where(divisor == 0, f32(1.0), divisor)
    e = np.clip(g / safe, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(f32)
    e = np.where(divisor == 0, f32(0.0), e)
    return torch.from_numpy(((e * block).astype(f32) * s2).astype(f32).reshape(a.shape))


class Patched:
    """The model's attention functions wrapped: hook(module, key, value) -> (key, value)."""

    def __init__(self, hook):
        self.hook = hook

    def __enter__(self):
        self.eager, self.sdpa = modeling_llama.eager_attention_forward, AttentionInterface._global_mapping["sdpa"]
        eager, sdpa, hook = self.eager, self.sdpa, self.hook

        def wrap(fn):
            def attention(module, query, key, value, mask, **kw):
                key, value = hook(module, key, value)
                return fn(module, query, key, value, mask, **kw)
            return attention

        modeling_llama.eager_attention_forward = wrap(eager)
        AttentionInterface._global_mapping["sdpa"] = wrap(sdpa)
        return self

    def __exit__(self, *exc):
        modeling_llama.eager_attention_forward = self.eager
        AttentionInterface._global_mapping["sdpa"] = self.sdpa


def calibrate(model, calib_ids):
    amax = {}

    def record(module, key, value):
        k, v = amax.get(module, (0.0, 0.0))
        amax[module] = (max(k, key.abs().max().item()), max(v, value.abs().max().item()))
        return key, value

    with Patched(record), torch.no_grad():
        model(input_ids=torch.from_numpy(calib_ids))
    return amax


def independent_logits(model, ids, calib_ids, k_rule, v_rule):
    amax = calibrate(model, calib_ids)
    rules = {"fp8": lambda x, a: fp8_tensor(x, a), "int8": lambda x, a: int8_token_head(x)}

    def store(module, key, value):
        k_amax, v_amax = amax[module]
        return rules[k_rule](key, k_amax), rules[v_rule](value, v_amax)

    with Patched(store), torch.no_grad():
        return model(input_ids=torch.from_numpy(ids)).logits.numpy()


def main():
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 1000, (4, 24))
    calib_ids = rng.integers(0, 1000, (3, 24))
    names = {"fp8": "e4m3@tensor", "int8": "s8@row:sym"}
    for attn, (k_rule, v_rule) in (("eager", ("fp8", "int8")), ("sdpa", ("int8", "fp8"))):
        model = seeded_llama(attn)
        with torch.no_grad():
            plain = model(input_ids=torch.from_numpy(ids)).logits.numpy()
        expected = independent_logits(model, ids, calib_ids, k_rule, v_rule)
        kv = f"{names[k_rule]},{names[v_rule]}"
        result = verify.verify(model, None, ids, kv=kv, kv_calibration=calib_ids, isolated=False, keep_outputs=True)
        got = result.emulated_outputs
        check(got.dtype == expected.dtype and got.shape == expected.shape and np.array_equal(got, expected),
              f"{attn}: verify --kv {kv} logits equal the independent K {k_rule} / V {v_rule} cache bit for bit "
              f"(max |diff| {float(np.max(np.abs(got - expected))):.3g})")
        check(not np.array_equal(got, plain), f"{attn}: the KV formats change the logits (the test can fail)")
        with torch.no_grad():
            after = model(input_ids=torch.from_numpy(ids)).logits.numpy()
        check(np.array_equal(after, plain) and model.config._attn_implementation == attn,
              f"{attn}: after verify the model computes what it did before (attention restored)")
        # 2 layers x 3 KV heads x 64 x (8 bits + 8 bits + one fp32 scale per 64 values) / 8
        info = result.report["verify"]["kv"]
        check(info["bytes_per_token"] == 2 * 3 * 64 * (8 + 8 + 32 / 64) / 8 and info["bytes_per_token_bf16"] == 2 * 3 * 64 * 4,
              f"{attn}: bytes per token {info['bytes_per_token']} (bf16 {info['bytes_per_token_bf16']})")
        check(result.report["per_layer"] == [] and result.report["end_to_end"]["metrics"]["kl_mean"] > 0,
              f"{attn}: --kv alone quantizes no linear layer and is judged end to end")

    # The Hadamard-rotated 4-bit K and the unscaled fp8 V, through precis.kvcache directly.
    model = seeded_llama("sdpa")
    batch = torch.from_numpy(ids)
    with Patched(lambda module, k, v: (int4_groups_hadamard(k), fp8_unit(v))), torch.no_grad():
        expected = model(input_ids=batch).logits.numpy()
    with kvcache.kv_cache(model, "s4@k32:sym+had,e4m3"), torch.no_grad():
        got = model(input_ids=batch).logits.numpy()
    check(np.array_equal(got, expected), "kv_cache s4@k32:sym+had,e4m3 equals the independent rotated int4 K / "
          f"unscaled fp8 V bit for bit (max |diff| {float(np.max(np.abs(got - expected))):.3g})")

    # 2-bit K after a Hadamard rotation and 3-bit V (ternary and 7-level groups of 32), as KIVI-style
    # low-bit caches store them; the rotation is what makes 2-bit K usable (llama.cpp, QuaRot).
    with Patched(lambda module, k, v: (int_groups(k, 2, True), int_groups(v, 3, False))), torch.no_grad():
        expected = model(input_ids=batch).logits.numpy()
    with kvcache.kv_cache(model, "int2-had,s3@k32:sym"), torch.no_grad():
        got = model(input_ids=batch).logits.numpy()
    check(np.array_equal(got, expected), "kv_cache s2@k32:sym+had,s3@k32:sym equals the independent rotated 2-bit K / "
          f"3-bit V bit for bit (max |diff| {float(np.max(np.abs(got - expected))):.3g})")
    check(kvcache.KVFormat("int2-had").bits_per_value(64) == 2 + 32 / 32 and
          kvcache.KVFormat("s3@k32:sym").bits_per_value(64) == 3 + 32 / 32, "2- and 3-bit groups: bits per value")

    # NVFP4 with a calibrated tensor scale (both K and V), through precis.kvcache directly.
    amax = calibrate(model, calib_ids)
    with Patched(lambda module, k, v: (nvfp4_static(k, amax[module][0]), nvfp4_static(v, amax[module][1]))), \
            torch.no_grad():
        expected = model(input_ids=batch).logits.numpy()
    with kvcache.kv_cache(model, "nvfp4-static", calibration=[{"input_ids": torch.from_numpy(calib_ids)}]), \
            torch.no_grad():
        got = model(input_ids=batch).logits.numpy()
    check(np.array_equal(got, expected), "kv_cache e2m1@nv:static equals the independent NVFP4 with a calibrated "
          f"tensor scale bit for bit (max |diff| {float(np.max(np.abs(got - expected))):.3g})")

    # The plan file's "kv" key is --kv.
    model = seeded_llama("eager")
    with scratch.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "plan.json")
        with open(plan, "w") as f:
            json.dump({"kv": "e4m3@tensor,s8@row:sym"}, f)
        by_plan = verify.verify(model, plan, ids, kv_calibration=calib_ids, isolated=False,
                                 keep_outputs=True).emulated_outputs
    expected = independent_logits(model, ids, calib_ids, "fp8", "int8")
    check(np.array_equal(by_plan, expected), "a plan file {\"kv\": ...} gives the --kv logits")

    # Bad formats are refused, naming the format.
    for bad, why in (("e4m3@col", "spans tokens"), ("q9@row", "q9"), ("bf16+had", "+had"), ("a,b,c", "K_FORMAT,V_FORMAT")):
        try:
            kvcache.parse_kv(bad)
            check(False, f"--kv {bad} refused")
        except kvcache.KVError as e:
            check(why in str(e), f"--kv {bad} refused: {e}")
    try:
        kvcache.kv_cache(model, "e4m3@tensor")
        check(False, "a calibrated format without calibration inputs is refused")
    except kvcache.KVError as e:
        check("calibration" in str(e), f"a calibrated format without calibration inputs is refused: {e}")

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
