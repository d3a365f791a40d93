"""precis conform ORIGINAL CONVERTED on checkpoints written by compressed-tensors 0.20 (ct_checkpoints.py)
from the all-MiniLM-L6-v2 weights:

- untouched W4A16 (one layer ignored), W8A8 and FP8 checkpoints conform: every stored code equals the
  original re-quantized with the stored scale, every scale is the library's min-max rule to the ULP
  (precis' quantizer, written from compressed-tensors' quantize()/calculate_qparams, agrees with the
  library's own output element for element); exit 0;
- a W4A16 checkpoint with one code changed, one scale changed and one layer taken from the conversion
  of another model exits 3, and the findings name the layer, the tensor and the element of each; the
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
    state[q + ".weight_packed"] = packed
    scale = state[k + ".weight_scale"].clone()
    scale[5, 1] *= 1.5
    state[k + ".weight_scale"] = scale
    rng = np.random.default_rng(9)
    other = {inter: (rng.standard_normal(weights[inter].shape) * weights[inter].std()).astype(np.float32)}
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
    check(status[q]["status"] == "differs" and status[q]["codes"]["equal"] == status[q]["codes"]["count"] - 1 and
          status[q]["codes"]["beyond"] == 1 and status[q]["codes"]["max_diff"] == 3, f"query: {status[q]}")
    check(status[k]["status"] == "differs" and status[k]["scales"]["off_by_more_than_1_ulp"] == 1, f"key: {status[k]}")
    check(status[inter]["status"] == "differs" and status[inter]["weight_rel_fro"] > 0.5, f"intermediate: {status[inter]}")
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
