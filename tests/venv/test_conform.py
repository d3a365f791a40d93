"""precis conform ORIGINAL CONVERTED on checkpoints written by compressed-tensors 0.20 (ct_checkpoints.py)
from the all-MiniLM-L6-v2 weights:

- untouched W4A16 (one layer ignored), W8A8 and FP8 checkpoints conform: every stored code equals the
  original re-quantized with the stored scale, every scale is the library's min-max rule to the ULP
  (precis' quantizer, written from compressed-tensors' quantize()/calculate_qparams, agrees with the
  library's own output element for element); exit 0;
- a W4A16 checkpoint with one code changed by three, one by exactly one (counted "within one", not
  equal), one scale changed and one layer taken from the conversion of another model exits 3 (that
  layer's weights are 0.76 apart in relative Frobenius norm: more than INT4's 0.5 threshold, less than
  the 0.9 of 2-3 bit codes, so it is refused only if 4-bit codes get 4-bit's threshold), and the findings name the layer, the tensor and the element of each; the
  layers left alone conform, the ignored one is reported as ignored; conform.json says the same.
"""
import json
import os
import shutil
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import FAILURES, check, run  # noqa: E402
from minilm_model import minilm_checkpoint, minilm_weights  # noqa: E402

try:
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from safetensors.torch import load_file as load_torch, save_file as save_torch
    import ct_checkpoints
except ImportError as e:
    print(f"SKIP: {e} (cmake/quickstart.sh test installs cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

LAYERS = ["encoder.layer.0.attention.self.query", "encoder.layer.0.attention.self.key",
          "encoder.layer.0.attention.self.value", "encoder.layer.0.intermediate.dense", "encoder.layer.0.output.dense"]
SELECT = ["--layers", "encoder.layer.0.attention.self.*", "--layers", "encoder.layer.0.intermediate.dense",
          "--layers", "encoder.layer.0.output.dense"]


def main():
    path = minilm_checkpoint()
    tmp = scratch.mkdtemp(prefix="precis-conform-")
    return check_all(path, tmp)


def check_all(path, tmp):
    weights = minilm_weights(LAYERS)

    for preset, ignore in (("W4A16", [LAYERS[2]]), ("W8A8", []), ("FP8", [])):
        conv, _ = ct_checkpoints.write(os.path.join(tmp, preset), weights, preset, ignore=ignore, input_scale=0.01)
        p = run(["conform", path, conv, *SELECT, "-q"])
        check(f"all {len(LAYERS)} layers conform" in p.stdout, f"{preset}: {p.stdout}")

    # One code, one scale, one foreign layer.
    good = os.path.join(tmp, "W4A16")
    bad = os.path.join(tmp, "tampered")
    shutil.copytree(good, bad)
    state = load_torch(os.path.join(bad, "model.safetensors"))
    q, k, inter = LAYERS[0], LAYERS[1], LAYERS[3]
    packed = state[q + ".weight_packed"].clone()
    word = int(packed[3, 1]) & 0xFFFFFFFF
    code = (word >> 8) & 15  # column 10: word 1, slot 2
    word = (word & ~(15 << 8)) | (((code + 3) & 15) << 8)
    packed[3, 1] = torch.tensor(np.array(word, np.uint32).view(np.int32))
    # Row 2, column 0 (word 0, slot 0): one code step up (down from the top code), counted within one.
    word = int(packed[2, 0]) & 0xFFFFFFFF
    code = word & 15
    word = (word & ~15) | (code + 1 if code < 15 else code - 1)
    packed[2, 0] = torch.tensor(np.array(word, np.uint32).view(np.int32))
    state[q + ".weight_packed"] = packed
    scale = state[k + ".weight_scale"].clone()
    scale[5, 1] *= 1.5
    state[k + ".weight_scale"] = scale
    rng = np.random.default_rng(9)
    # Another model's layer, 0.74 away before quantization (about 0.76 after): refused as foreign by
    # the 4-bit threshold 0.5, accepted by the 2-3 bit one (0.9).
    w_inter = weights[inter].astype(np.float64)
    noise = rng.standard_normal(w_inter.shape)
    other = {inter: (w_inter + 0.74 * np.linalg.norm(w_inter) / np.linalg.norm(noise) * noise).astype(np.float32)}
    _, foreign = ct_checkpoints.write(os.path.join(tmp, "other"), other, "W4A16")
    for name, value in foreign.items():
        state[name] = value
    save_torch(state, os.path.join(bad, "model.safetensors"))
    out = os.path.join(tmp, "out")
    p = run(["conform", path, bad, *SELECT, "-o", out, "-q"], expect=3)
    findings = [line for line in p.stdout.splitlines() if line.startswith("finding: ")]
    check(any(f"{q}.weight_packed[3, 10]: stored code" in f for f in findings), f"the tampered code is named: {findings}")
    check(any(f"{k}.weight_scale[5, 1]: stored" in f and "ULPs of F32" in f for f in findings),
          f"the tampered scale is named: {findings}")
    check(any(f"{inter}.weight_packed" in f and "not a conversion of this model" in f for f in findings),
          f"the foreign layer is named: {findings}")
    report = json.load(open(os.path.join(out, "conform.json")))
    status = {layer["layer"]: layer for layer in report["layers"]}
    check(any(f"{q}.weight_packed[2, 0]: stored code" in f and "(1 code apart)" in f for f in findings),
          f"the code moved by one is named: {findings}")
    check(status[q]["status"] == "differs" and status[q]["codes"]["equal"] == status[q]["codes"]["count"] - 2 and
          status[q]["codes"]["within_one"] == 1 and status[q]["codes"]["beyond"] == 1 and
          status[q]["codes"]["max_diff"] == 3, f"query: one code within one, one beyond: {status[q]}")
    check(status[k]["status"] == "differs" and status[k]["scales"]["off_by_more_than_1_ulp"] == 1, f"key: {status[k]}")
    check(status[inter]["status"] == "differs" and 0.6 < status[inter]["weight_rel_fro"] < 0.9,
          f"intermediate: a foreign INT4 layer between the 4-bit and the 2-3 bit thresholds: {status[inter]}")
    # precis import --converted refuses the same layer (the same threshold), naming it and the rel_fro.
    imp = run(["import", "--model", path, "--converted", bad, "--layers", inter, "--tokens", "4",
               "-o", os.path.join(tmp, "foreign.h5"), "-q"], expect=2)
    check(f"layer {inter}:" in imp.stderr and "is not a conversion of this model" in imp.stderr and "above 0.5" in imp.stderr,
          f"import --converted refuses the foreign INT4 layer: {imp.stderr}")
    check(status[LAYERS[4]]["status"] == "conforms" and status[LAYERS[4]]["codes"]["equal"] == status[LAYERS[4]]["codes"]["count"],
          f"output.dense conforms: {status[LAYERS[4]]}")
    check(status[LAYERS[2]]["status"] == "ignored", f"value is ignored by the producer: {status[LAYERS[2]]}")
    check(not report["conforms"] and "3 of 5 layers do not conform" in p.stdout, p.stdout)
    # Idempotence is reported: min-max symmetric INT4 scales (amax / 7.5) move when the dequantized
    # weights (at most 7 x scale) are re-quantized.
    check(status[LAYERS[4]]["requantized_dequantized"]["scales_moved"] > 0 and
          status[LAYERS[4]]["requantized_dequantized"]["codes_moved"] == 0, f"idempotence: {status[LAYERS[4]]}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
