"""precis import --model --converted on a compressed-tensors "pack-quantized" checkpoint (what
llm-compressor saves for W4A16/W8A16), written here with NumPy alone:

- the quantization and the int32 packing are done here independently of precis, from the
  layout compressed-tensors documents (pack_to_int32: 32/bits values per int32 along the row,
  the first in the lowest bits, each stored as value + 2^(bits-1); zero points packed along the
  rows; weight_shape [out, in]; weight_scale [out, groups]);
- layers: INT4 symmetric with F32 scales and in_features not a multiple of 8 (padding in the last
  word), INT4 asymmetric with BF16 scales and packed zero points (out not a multiple of 8), INT4
  with activation ordering (weight_g_idx) and F16 scales, INT8 packed per channel, and a layer left
  unconverted;
- b must equal (q - zero_point) * scale rounded once to float32, transposed, bit for bit; c_ref comes
  from the original weights, b_ref is W^T; precis run --recipes fp32 reports each layer's rel_fro
  equal to the conversion's error recomputed in NumPy;
- malformed checkpoints exit 2 naming the tensor and what was expected: a packed width that fits
  neither 4 nor 8 bits, a weight_shape unlike the original, groups that do not divide in_features,
  a g_idx naming a group that does not exist, zero points of the wrong shape, no weight_scale.
"""
import json
import os
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import FAILURES, PRECIS, check, run  # noqa: E402
from safetensors_fixture import write_safetensors  # noqa: E402

FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2"]


def bf16_round(x):
    """float32 -> the nearest bfloat16 value (ties to even), as float32; and its bits."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32), bits


def pack_rows(q, bits):
    """q: int [rows, cols] in [-2^(bits-1), 2^(bits-1)); 32/bits per int32 along each row, zero-padded."""
    per = 32 // bits
    rows, cols = q.shape
    words = -(-cols // per)
    u = np.zeros((rows, words * per), np.uint64)
    u[:, :cols] = (q.astype(np.int64) + (1 << (bits - 1))).astype(np.uint64)
    packed = np.zeros((rows, words), np.uint64)
    for word in range(words):
        for slot in range(per):
            packed[:, word] |= u[:, word * per + slot] << np.uint64(bits * slot)
    return packed.astype(np.uint32).view(np.int32)


def quantize_groups(w, groups, bits, symmetric, group_of=None):
    """Per (row, group) scales from the group's range; returns q, scale [out, groups] (float32), zp [out, groups]."""
    out, k = w.shape
    if group_of is None:
        group_of = np.arange(k) // (k // groups)
    lo_q, hi_q = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    scale = np.zeros((out, groups), np.float32)
    zp = np.zeros((out, groups), np.int64)
    for g in range(groups):
        cols = w[:, group_of == g]
        if symmetric:
            scale[:, g] = np.abs(cols).max(axis=1) / np.float32(hi_q)
        else:
            mn, mx = np.minimum(cols.min(axis=1), 0), np.maximum(cols.max(axis=1), 0)
            scale[:, g] = (mx - mn) / np.float32(hi_q - lo_q)
            zp[:, g] = np.clip(np.rint(lo_q - mn / scale[:, g]), lo_q, hi_q)
    return scale, zp, group_of


def finish_quant(w, scale, zp, group_of, bits):
    lo_q, hi_q = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    s = scale[:, group_of]
    q = np.clip(np.rint(w / s) + zp[:, group_of], lo_q, hi_q).astype(np.int64)
    # (q - zp) * scale: exact in float64, rounded once to float32.
    deq = ((q - zp[:, group_of]).astype(np.float64) * s.astype(np.float64)).astype(np.float32)
    return q, deq


def main():
    tmp = scratch.mkdtemp(prefix="precis-model-int4-")
    rng = np.random.default_rng(17)
    shapes = {"dec.0.sym": (10, 44), "dec.0.asym": (12, 64), "dec.1.gidx": (8, 32), "dec.1.int8": (6, 20), "dec.2.plain": (4, 8)}
    weights = {name: (rng.standard_normal(shape) * 0.05).astype(np.float32) for name, shape in shapes.items()}
    ckpt = os.path.join(tmp, "model.safetensors")
    write_safetensors(ckpt, {f"{n}.weight": ("F32", w.shape, w.astype("<f4").tobytes()) for n, w in weights.items()})

    tensors, deq = {}, {}

    def shape_tensor(name, w):
        tensors[f"{name}.weight_shape"] = ("I64", (2,), np.array(w.shape, "<i8").tobytes())

    # INT4 symmetric, 4 groups of 11 columns, F32 scales: 44 columns are 5.5 words, the last padded.
    n, w = "dec.0.sym", weights["dec.0.sym"]
    scale, zp, group_of = quantize_groups(w, 4, 4, True)
    q, deq[n] = finish_quant(w, scale, zp, group_of, 4)
    tensors[f"{n}.weight_packed"] = ("I32", (10, 6), pack_rows(q, 4).astype("<i4").tobytes())
    tensors[f"{n}.weight_scale"] = ("F32", scale.shape, scale.astype("<f4").tobytes())
    shape_tensor(n, w)
    # INT4 asymmetric, 4 groups of 16, BF16 scales, zero points packed along the 12 rows (2 words).
    n, w = "dec.0.asym", weights["dec.0.asym"]
    scale, zp, group_of = quantize_groups(w, 4, 4, False)
    scale, scale_bits = bf16_round(scale)
    q, deq[n] = finish_quant(w, scale, zp, group_of, 4)
    check(np.any(zp != 0), "the asymmetric layer has non-zero zero points")
    tensors[f"{n}.weight_packed"] = ("I32", (12, 8), pack_rows(q, 4).astype("<i4").tobytes())
    tensors[f"{n}.weight_scale"] = ("BF16", scale.shape, scale_bits.astype("<u2").tobytes())
    tensors[f"{n}.weight_zero_point"] = ("I32", (2, 4), np.ascontiguousarray(pack_rows(zp.T, 4).T).astype("<i4").tobytes())
    shape_tensor(n, w)
    # INT4, activation ordering: a permutation of the columns into 4 groups, F16 scales.
    n, w = "dec.1.gidx", weights["dec.1.gidx"]
    group_of = rng.permutation(np.arange(32) // 8)
    scale, zp, _ = quantize_groups(w, 4, 4, True, group_of)
    scale = scale.astype(np.float16).astype(np.float32)
    q, deq[n] = finish_quant(w, scale, zp, group_of, 4)
    tensors[f"{n}.weight_packed"] = ("I32", (8, 4), pack_rows(q, 4).astype("<i4").tobytes())
    tensors[f"{n}.weight_scale"] = ("F16", scale.shape, scale.astype("<f2").tobytes())
    tensors[f"{n}.weight_g_idx"] = ("I32", (32,), group_of.astype("<i4").tobytes())
    shape_tensor(n, w)
    # INT8 packed 4 per int32, one F32 scale per output channel ([out, 1]).
    n, w = "dec.1.int8", weights["dec.1.int8"]
    scale, zp, group_of = quantize_groups(w, 1, 8, True)
    q, deq[n] = finish_quant(w, scale, zp, group_of, 8)
    tensors[f"{n}.weight_packed"] = ("I32", (6, 5), pack_rows(q, 8).astype("<i4").tobytes())
    tensors[f"{n}.weight_scale"] = ("F32", (6, 1), scale.astype("<f4").tobytes())
    shape_tensor(n, w)
    # Left unconverted.
    n, w = "dec.2.plain", weights["dec.2.plain"]
    tensors[f"{n}.weight"] = ("F32", w.shape, w.astype("<f4").tobytes())
    deq[n] = w
    conv = os.path.join(tmp, "converted.safetensors")
    write_safetensors(conv, tensors)

    ds = os.path.join(tmp, "conv.h5")
    run(["import", "--model", ckpt, "--converted", conv, "--tokens", "6", "-o", ds, "-q"])
    check("(matches the contents)" in run(["inspect", ds]).stdout, "inspect: the dataset_id matches the contents")
    rep = os.path.join(tmp, "rep")
    run(["run", ds, "--backend", "cpu", "--recipes", "fp32", "-o", rep, "--quiet"] + FAST)
    rows = {r["workload"]: r for r in json.load(open(os.path.join(rep, "report.json")))["rows"]}
    with h5py.File(ds, "r") as d:
        for layer, w in weights.items():
            g = d[f"workloads/{layer}"]
            check(np.array_equal(g["b"][()].view(np.uint32), np.ascontiguousarray(deq[layer].T).view(np.uint32)),
                  f"{layer}: b is not (q - zero_point) x scale, transposed")
            check(np.array_equal(g["b_ref"][()], w.T), f"{layer}: b_ref is not the original W^T")
            a = g["a"][()].astype(np.float64)
            ref = a @ w.T.astype(np.float64)
            check(np.allclose(g["c_ref"][()], ref, rtol=1e-12, atol=1e-12), f"{layer}: c_ref is not from the original")
            want = np.linalg.norm(a[0] @ deq[layer].T.astype(np.float64) - ref[0]) / np.linalg.norm(ref[0])
            got = rows[layer]["error"]["rel_fro"]["worst"]
            tol = 1e-3 * want if layer != "dec.2.plain" else 1e-6
            check(abs(got - want) <= tol, f"{layer}: converted rel_fro {got}, NumPy {want}")
        src = {layer: json.loads(d[f"workloads/{layer}"].attrs["source"])["converted"]["weights"] for layer in weights}
        check(src["dec.0.asym"] == "INT4 packed x BF16 scales, 4 groups of 16 columns, zero points", f"source: {src}")
        check(src["dec.1.gidx"].endswith("(weight_g_idx)") and src["dec.1.int8"].startswith("INT8 packed x per-channel"),
              f"source: {src}")
    check(rows["dec.0.sym"]["error"]["rel_fro"]["worst"] > 1e-2, "the INT4 conversion error is visible")

    # Malformed checkpoints.
    out = os.path.join(tmp, "bad.h5")

    def refused(changes, needles, what):
        bad = dict(tensors)
        for name, value in changes.items():
            if value is None:
                del bad[name]
            else:
                bad[name] = value
        path = os.path.join(tmp, "bad.safetensors")
        write_safetensors(path, bad)
        p = run(["import", "--model", ckpt, "--converted", path, "-o", out, "-q"], expect=2)
        check(all(s in p.stderr for s in needles), f"{what}: {p.stderr}")

    packed = np.frombuffer(tensors["dec.0.sym.weight_packed"][2], "<i4").reshape(10, 6)
    refused({"dec.0.sym.weight_packed": ("I32", (10, 7), np.pad(packed, ((0, 0), (0, 1))).tobytes())},
            ["dec.0.sym.weight_packed", "[10, 6]", "[10, 11]"], "a packed width that fits no bit width")
    refused({"dec.0.sym.weight_shape": ("I64", (2,), np.array([10, 40], "<i8").tobytes())},
            ["dec.0.sym.weight_shape", "[10, 40]", "[10, 44]"], "a weight_shape unlike the original")
    refused({"dec.0.sym.weight_scale": ("F32", (10, 3), np.ones((10, 3), "<f4").tobytes())},
            ["dec.0.sym.weight_scale", "3 groups", "in_features = 44"], "groups that do not divide in_features")
    bad_gidx = group_of_g = np.frombuffer(tensors["dec.1.gidx.weight_g_idx"][2], "<i4").copy()
    bad_gidx[5] = 4
    refused({"dec.1.gidx.weight_g_idx": ("I32", (32,), bad_gidx.tobytes())},
            ["dec.1.gidx.weight_g_idx", "element 5 is 4"], "a g_idx naming a missing group")
    del group_of_g
    refused({"dec.0.asym.weight_zero_point": ("I32", (12, 4), np.zeros((12, 4), "<i4").tobytes())},
            ["dec.0.asym.weight_zero_point", "[2, 4]"], "zero points of the wrong shape")
    refused({"dec.1.int8.weight_scale": None}, ["dec.1.int8.weight_scale"], "no weight_scale")
    check(not os.path.exists(out) and not [n for n in os.listdir(tmp) if ".tmp-" in n], "no output left behind")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
