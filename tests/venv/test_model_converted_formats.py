"""Converted formats in use in 2026, read by precis import --converted and checked by precis conform,
on all-MiniLM-L6-v2 layers:

written by compressed-tensors 0.20.1 itself (ct_checkpoints.py), b checked bit for bit against the
library's own fake_quantize() of the original (quantize, dequantize, with the stored scales; equal as
values, the sign of a zero aside):
- FP8_BLOCK: F8_E4M3 weights, weight_scale [out/128, in/128];
- NVFP4 (nvfp4-pack-quantized): U8 weight_packed (two E2M1 codes a byte), F8_E4M3 weight_scale per 16,
  weight_global_scale;
- W2A16 and W3A16: the dense 2/3-bit pack_to_int32 of compressed-tensors >= 0.20 (3-bit codes straddle
  int32 words);

written here from the producer's documented layout (their libraries need a GPU or are not on PyPI),
b checked against NumPy:
- DeepSeek-V3 FP8: config.json {quant_method: fp8, weight_block_size: [128, 128], activation_scheme:
  dynamic}, F8_E4M3 weight and F32 weight_scale_inv per 128x128 block, w = q x scale_inv (DeepSeek-V3's
  inference/kernel.py weight_dequant);
- ModelOpt NVFP4: hf_quant_config.json {quantization: {quant_algo: NVFP4, group_size: 16,
  exclude_modules}}, U8 weight (two E2M1 codes a byte, the even column low), F8_E4M3 weight_scale per
  16, F32 weight_scale_2 and input_scale: w = q x weight_scale x weight_scale_2.

Every one conforms (precis conform exit 0) and records its declared scheme.
"""
import json
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import FAILURES, check, run  # noqa: E402
from minilm_model import minilm_checkpoint, minilm_weights  # noqa: E402
from safetensors_fixture import write_safetensors  # noqa: E402

try:
    import h5py
    import ml_dtypes
    import numpy as np
    from safetensors.numpy import load_file
    import ct_checkpoints
except ImportError as e:
    print(f"SKIP: {e} (cmake/quickstart.sh test installs cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

LAYERS = ["encoder.layer.3.attention.self.key", "encoder.layer.3.intermediate.dense"]
f32 = np.float32
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], f32)


def e2m1_codes(x):
    """Nearest E2M1 code (ties to the even mantissa), as a 4-bit sign-magnitude nibble."""
    a = np.minimum(np.abs(x), f32(6))
    d = np.abs(a[..., None] - E2M1)
    idx = np.argmin(d + (np.arange(8) % 2) * 1e-7, axis=-1)  # ties: the even index
    return (idx | ((x < 0) & (idx > 0)) * 8).astype(np.uint8)


def imported(path, conv, tmp, name):
    ds = os.path.join(tmp, name + ".h5")
    select = [a for layer in LAYERS for a in ("--layers", layer)]
    run(["import", "--model", path, *select, "--converted", conv, "--weights-only", "--tokens", "4", "-o", ds, "-q"])
    with h5py.File(ds, "r") as d:
        return {layer: (d[f"workloads/{layer}/b"][()].T, json.loads(d[f"workloads/{layer}"].attrs["source"])["converted"])
                for layer in LAYERS}


def conforms(path, conv, what):
    select = [a for layer in LAYERS for a in ("--layers", layer)]
    p = run(["conform", path, conv, *select, "-q"], expect=None)
    check(p.returncode == 0 and f"all {len(LAYERS)} layers conform" in p.stdout, f"{what}: conform: {p.stdout}{p.stderr}")


def main():
    path = minilm_checkpoint()
    tmp = scratch.mkdtemp(prefix="precis-formats-")
    weights = minilm_weights(LAYERS)

    declared = {"FP8_BLOCK": "FP8 E4M3, block 128x128", "NVFP4": "FP4 E2M1, group 16 + global scale",
                "W2A16": "INT2 symmetric, group 128", "W3A16": "INT3 symmetric, group 128"}
    for preset, want_declared in declared.items():
        expected = {}
        conv, state = ct_checkpoints.write(os.path.join(tmp, preset), weights, preset, input_scale=1.0, expected=expected)
        got = imported(path, conv, tmp, preset)
        for layer in LAYERS:
            b, src = got[layer]
            # Equal as values: integer codes carry no sign of zero, which fake_quantize keeps (-0.0).
            check(np.array_equal(b, expected[layer]),
                  f"{preset} {layer}: b differs from compressed-tensors' fake_quantize in "
                  f"{np.count_nonzero(b != expected[layer])} elements")
            check(src["declared"] == want_declared, f"{preset} {layer}: declared {src['declared']}")
        if preset == "W3A16":
            words = state[LAYERS[0] + ".weight_packed"].shape[1]
            check(words == 384 * 3 // 32, f"W3A16: dense packing, {words} words a row")
        conforms(path, conv, preset)

    # DeepSeek-V3 FP8, block 128x128, weight_scale_inv.
    ds_dir = os.path.join(tmp, "deepseek")
    os.makedirs(ds_dir)
    tensors, want = {}, {}
    for layer, w in weights.items():
        out_f, in_f = w.shape
        blocks = np.abs(w).reshape(out_f // 128, 128, in_f // 128, 128).max(axis=(1, 3)).astype(f32)
        s = (blocks / f32(448)).astype(f32)
        s_full = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)
        q = (w / s_full).astype(f32).astype(ml_dtypes.float8_e4m3fn)
        tensors[layer + ".weight"] = ("F8_E4M3", w.shape, q.view(np.uint8).tobytes())
        tensors[layer + ".weight_scale_inv"] = ("F32", s.shape, s.astype("<f4").tobytes())
        want[layer] = (q.astype(f32) * s_full).astype(f32)
    write_safetensors(os.path.join(ds_dir, "model.safetensors"), tensors)
    json.dump({"model_type": "deepseek_v3", "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                                                                     "quant_method": "fp8", "weight_block_size": [128, 128]}},
              open(os.path.join(ds_dir, "config.json"), "w"))
    got = imported(path, ds_dir, tmp, "deepseek")
    for layer in LAYERS:
        b, src = got[layer]
        check(np.array_equal(b, want[layer]), f"deepseek {layer}: b is not q x weight_scale_inv per block")
        check(src["declared"] == "FP8 E4M3, block 128x128" and src["declared_by"].startswith("fp8 fp8 block") and
              src["declared_activations"] == "FP8 E4M3, group 128, dynamic" and "(weight_scale_inv)" in src["weights"],
              f"deepseek {layer}: {src}")
    conforms(path, ds_dir, "deepseek")

    # ModelOpt NVFP4.
    mo_dir = os.path.join(tmp, "modelopt")
    os.makedirs(mo_dir)
    tensors, want = {}, {}
    for layer, w in weights.items():
        out_f, in_f = w.shape
        amax = f32(np.abs(w).max())
        scale_2 = f32(amax / f32(6 * 448))
        groups = np.abs(w).reshape(out_f, in_f // 16, 16).max(axis=2)
        s = ((groups / f32(6)).astype(f32) / scale_2).astype(f32).astype(ml_dtypes.float8_e4m3fn)
        eff = (s.astype(f32) * scale_2).astype(f32)
        eff_full = np.repeat(eff, 16, axis=1)
        codes = e2m1_codes((w / eff_full).astype(f32))
        tensors[layer + ".weight"] = ("U8", (out_f, in_f // 2), (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).tobytes())
        tensors[layer + ".weight_scale"] = ("F8_E4M3", s.shape, s.view(np.uint8).tobytes())
        tensors[layer + ".weight_scale_2"] = ("F32", (), np.array(scale_2, "<f4").tobytes())
        tensors[layer + ".input_scale"] = ("F32", (), np.array(f32(0.01), "<f4").tobytes())
        values = np.where(codes & 8, -E2M1[codes & 7], E2M1[codes & 7]).astype(f32)
        want[layer] = (values * eff_full).astype(f32)
    write_safetensors(os.path.join(mo_dir, "model.safetensors"), tensors)
    json.dump({"producer": {"name": "modelopt", "version": "0.35.0"},
               "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                                "exclude_modules": ["lm_head"]}}, open(os.path.join(mo_dir, "hf_quant_config.json"), "w"))
    got = imported(path, mo_dir, tmp, "modelopt")
    for layer in LAYERS:
        b, src = got[layer]
        check(np.array_equal(b, want[layer]), f"modelopt {layer}: b is not q x weight_scale x weight_scale_2 "
              f"({np.count_nonzero(b != want[layer])} elements differ)")
        check(src["declared"] == "FP4 E2M1, group 16 + global scale" and src["declared_by"].startswith("modelopt NVFP4"),
              f"modelopt {layer}: {src}")
    conforms(path, mo_dir, "modelopt")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
