"""The deployed scheme of a converted checkpoint (DESIGN §18): precis import --converted makes `a` the
activations the served layer multiplies, quantized as config.json's quantization_config declares
(checkpoints written by compressed-tensors 0.20, ct_checkpoints.py, from all-MiniLM-L6-v2):

- FP8 with a static input_scale: a = e4m3(clip(x / input_scale)) x input_scale, the checkpoint's own
  scale (not one recomputed from the data);
- FP8_DYNAMIC: per token, scale = amax / 448; W8A8: INT8 per token, scale = amax / 127.5 (compressed-
  tensors' calculate_qparams), codes clamped to [-128, 127];
- a_ref keeps the activations as given, c_ref comes from a_ref and the original weights, and the
  fp32 run's rel_fro equals ||a_q . W_q - a . W|| / ||a . W|| recomputed in NumPy;
- --weights-only keeps a as given (no a_ref); source.converted.measures says which recipe each is.
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

try:
    import h5py
    import ml_dtypes
    import numpy as np
    from safetensors.numpy import load_file
    import ct_checkpoints
except ImportError as e:
    print(f"SKIP: {e} (cmake/quickstart.sh test installs cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2"]
LAYERS = ["encoder.layer.2.attention.self.query", "encoder.layer.2.intermediate.dense"]
f32 = np.float32


def fp8(x):
    return np.clip(x, f32(-448), f32(448)).astype(ml_dtypes.float8_e4m3fn).astype(f32)


def deployed(x, kind, input_scale):
    """x: [batch, m, k] float32 -> the fake-quantized activations."""
    if kind == "FP8":
        s = f32(input_scale)
        return (fp8((x / s).astype(f32)) * s).astype(f32)
    amax = np.max(np.abs(x), axis=2, keepdims=True).astype(f32)
    if kind == "FP8_DYNAMIC":
        s = (amax / f32(448)).astype(f32)
        return (fp8((x / s).astype(f32)) * s).astype(f32)
    s = (amax / f32(127.5)).astype(f32)
    return (np.clip(np.rint((x / s).astype(f32)), -128, 127).astype(f32) * s).astype(f32)


def main():
    path = minilm_checkpoint()
    tmp = scratch.mkdtemp(prefix="precis-deployed-")
    weights = minilm_weights(LAYERS)
    select = ["--layers", LAYERS[0], "--layers", LAYERS[1], "--tokens", "16", "--batch", "2"]
    input_scale = 0.02
    for kind in ("FP8", "FP8_DYNAMIC", "W8A8"):
        conv, _ = ct_checkpoints.write(os.path.join(tmp, kind), weights, kind, input_scale=input_scale)
        ds, ds_w = os.path.join(tmp, kind + ".h5"), os.path.join(tmp, kind + "-weights.h5")
        run(["import", "--model", path, *select, "--converted", conv, "-o", ds, "-q"])
        run(["import", "--model", path, *select, "--converted", conv, "--weights-only", "-o", ds_w, "-q"])
        check("(matches the contents)" in run(["inspect", ds]).stdout, f"{kind}: inspect accepts a_ref")
        rows = {}
        for name, d in (("deployed", ds), ("weights", ds_w)):
            rep = os.path.join(tmp, f"rep-{kind}-{name}")
            run(["run", d, "--backend", "cpu", "--recipes", "fp32", "-o", rep, "--quiet"] + FAST)
            rows[name] = {r["workload"]: r for r in json.load(open(os.path.join(rep, "report.json")))["rows"]}
        with h5py.File(ds, "r") as d, h5py.File(ds_w, "r") as dw:
            for layer in LAYERS:
                g, gw = d[f"workloads/{layer}"], dw[f"workloads/{layer}"]
                x = gw["a"][()]
                check("a_ref" not in gw and np.array_equal(g["a_ref"][()], x), f"{kind} {layer}: a_ref is a as given")
                want = deployed(x, kind, input_scale)
                check(np.array_equal(g["a"][()].view(np.uint32), want.view(np.uint32)),
                      f"{kind} {layer}: a is not the declared quantization of a_ref "
                      f"({np.count_nonzero(g['a'][()] != want)} elements differ)")
                check(np.array_equal(g["c_ref"][()], gw["c_ref"][()]), f"{kind} {layer}: c_ref is the same in both")
                b = g["b"][()].astype(np.float64)
                ref = x.astype(np.float64) @ weights[layer].T.astype(np.float64)
                for name, a in (("deployed", want), ("weights", x)):
                    err = max(np.linalg.norm(a[i].astype(np.float64) @ b - ref[i]) / np.linalg.norm(ref[i])
                              for i in range(a.shape[0]))
                    got = rows[name][layer]["error"]["rel_fro"]["worst"]
                    check(abs(got - err) <= 1e-3 * err, f"{kind} {layer} {name}: rel_fro {got}, NumPy {err}")
                src = json.loads(g.attrs["source"])["converted"]
                check(src["measures"].startswith("the deployed scheme: weights as stored, activations ") and
                      "input_activations" in src["measures"], f"{kind}: measures {src['measures']}")
                check(json.loads(gw.attrs["source"])["converted"]["measures"].startswith("weights only"), f"{kind}: weights only")
            check(rows["deployed"][LAYERS[0]]["error"]["rel_fro"]["worst"] != rows["weights"][LAYERS[0]]["error"]["rel_fro"]["worst"],
                  f"{kind}: the activations' quantization shows")
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
