"""Converted checkpoints written by compressed-tensors 0.20 itself (ct_checkpoints.py) from the
all-MiniLM-L6-v2 weights, and what precis import --converted / run make of them (DESIGN §18):

1. a quantized checkpoint given as --model (the --converted flag forgotten) is refused with a
   pointer to --converted (FP8: the codes would be read without their scale; W4A16 and W8A8: the
   packed / I8 layers would be skipped);
2. a conversion of a different model with the same shapes is refused as "not a conversion of this
   model" (relative Frobenius norm of the weights above 0.5), unless --force-foreign;
3. config.json's quantization_config is read: each layer's declared scheme and config group land in
   source.converted (with precis conform's verdict on the layer), an ignored layer is reported as ignored by the producer, the declared
   activations are recorded; a config that says group 64 for tensors of group 128, or weight_scale
   tensors of another group count than declared, are refused naming the declared and found values;
4. a converted run is judged by the artifact's error against the original (rel_fro <= 2^-(bits-3)
   for integer codes), not by fp32's own gate;
5. run's table shows layer names that differ only in their tail whole; --list --converted shows each
   layer's declared and stored format; a name prefix one checkpoint has and the other lacks gets the
   closest names and a --strip-prefix hint, and --strip-prefix reads it.
"""
import json
import os
import shutil
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_model import minilm_checkpoint  # noqa: E402
from cli_checks import FAILURES, check, run  # noqa: E402

try:
    import h5py
    import numpy as np
    from safetensors.numpy import load_file
    import ct_checkpoints
except ImportError as e:
    print(f"SKIP: {e} (cmake/quickstart.sh test installs cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2"]
LAYERS = ["encoder.layer.0.attention.self.query", "encoder.layer.0.attention.self.key",
          "encoder.layer.0.attention.self.value", "encoder.layer.0.intermediate.dense", "encoder.layer.0.output.dense"]


def model_file():
    return minilm_checkpoint()


def sources(ds):
    with h5py.File(ds, "r") as d:
        return {name: json.loads(g.attrs["source"]) for name, g in d["workloads"].items()}


def main():
    path = model_file()
    tmp = scratch.mkdtemp(prefix="precis-declared-")
    all_weights = load_file(path)
    weights = {n: all_weights[n + ".weight"] for n in LAYERS}
    select = ["--layers", "encoder.layer.0.attention.self.*", "--layers", "encoder.layer.0.intermediate.dense",
              "--layers", "encoder.layer.0.output.dense"]
    out = os.path.join(tmp, "out.h5")

    ckpt = {}
    ckpt["w4a16"], _ = ct_checkpoints.write(os.path.join(tmp, "w4a16"), weights, "W4A16", ignore=[LAYERS[2]])
    ckpt["fp8"], _ = ct_checkpoints.write(os.path.join(tmp, "fp8"), weights, "FP8", input_scale=0.01)
    ckpt["w8a8"], _ = ct_checkpoints.write(os.path.join(tmp, "w8a8"), weights, "W8A8")

    # 1. --model on a converted checkpoint.
    for name, conv in ckpt.items():
        p = run(["import", "--model", conv, "--tokens", "4", "-o", out, "-q"], expect=2)
        check("--converted" in p.stderr and "quantized checkpoint" in p.stderr and "compressed-tensors" in p.stderr,
              f"{name} as --model: {p.stderr}")
        check(not os.path.exists(out), f"{name} as --model: nothing written")

    # 2. A conversion of another model with the same shapes.
    rng = np.random.default_rng(5)
    foreign_w = {n: (rng.standard_normal(w.shape) * w.std()).astype(np.float32) for n, w in weights.items()}
    foreign, _ = ct_checkpoints.write(os.path.join(tmp, "foreign"), foreign_w, "W4A16")
    p = run(["import", "--model", path, *select, "--converted", foreign, "--tokens", "4", "-o", out, "-q"], expect=2)
    check("not a conversion of this model" in p.stderr and "--force-foreign" in p.stderr, f"foreign: {p.stderr}")
    check(not os.path.exists(out), "foreign: nothing written")
    run(["import", "--model", path, *select, "--converted", foreign, "--force-foreign", "--tokens", "4", "-o", out, "-q"])
    src = sources(out)
    check(all(src[n]["converted"]["weight_rel_fro"] > 1.0 for n in LAYERS), f"foreign forced: {src}")
    os.remove(out)

    # 3. The declaration, per layer.
    ds = os.path.join(tmp, "w4a16.h5")
    run(["import", "--model", path, *select, "--converted", ckpt["w4a16"], "--tokens", "8", "-o", ds, "-q"])
    src = sources(ds)
    for n in LAYERS:
        c = src[n]["converted"]
        check(c["declared_by"].startswith("compressed-tensors pack-quantized"), f"{n}: declared_by {c}")
        if n == LAYERS[2]:
            check(c["declared"] == "ignored by the producer (left unquantized)" and "criterion" not in c and
                  c["conform"]["status"] == "ignored", f"{n}: {c}")
        else:
            check(c["declared"] == "INT4 symmetric, group 128" and c["config_group"] == "group_0" and
                  c["declared_activations"] == "not quantized" and c["criterion"] == "rel_fro<=0.5", f"{n}: {c}")
            check(0.01 < c["weight_rel_fro"] < 0.5, f"{n}: weight_rel_fro {c['weight_rel_fro']}")
            check(c["conform"]["status"] == "conforms" and c["conform"]["codes_equal"] == 1 and c["conform"]["scales_off"] == 0,
                  f"{n}: the import's conform section {c['conform']}")
    ds8 = os.path.join(tmp, "w8a8.h5")
    run(["import", "--model", path, *select, "--converted", ckpt["w8a8"], "--tokens", "8", "-o", ds8, "-q"])
    c = sources(ds8)[LAYERS[0]]["converted"]
    check(c["declared"] == "INT8 symmetric, per channel" and c["declared_activations"] == "INT8 symmetric, per token, dynamic"
          and c["criterion"] == "rel_fro<=0.03125", f"w8a8: {c}")
    dsf = os.path.join(tmp, "fp8.h5")
    run(["import", "--model", path, *select, "--converted", ckpt["fp8"], "--tokens", "8", "-o", dsf, "-q"])
    c = sources(dsf)[LAYERS[0]]["converted"]
    check(c["declared"] == "FP8 E4M3, per tensor" and c["declared_activations"] == "FP8 E4M3, per tensor, static input_scale"
          and c["criterion"] == "rel_fro<=0.0625", f"fp8: {c}")

    # A declaration the tensors contradict: group 64 declared, groups of 128 stored.
    bad = os.path.join(tmp, "bad-config")
    shutil.copytree(ckpt["w4a16"], bad)
    cfg = json.load(open(os.path.join(bad, "config.json")))
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 64
    json.dump(cfg, open(os.path.join(bad, "config.json"), "w"))
    p = run(["import", "--model", path, *select, "--converted", bad, "--tokens", "4", "-o", out, "-q"], expect=2)
    check("declared groups of 64 columns" in p.stderr and "weight_scale [384, 3]" in p.stderr and
          "config_groups.group_0.weights" in p.stderr, f"group 64 declared: {p.stderr}")
    # Tensors that contradict the declaration: 6 groups of 64 stored (the scales re-cut), 128 declared.
    from safetensors.torch import load_file as load_torch, save_file as save_torch
    bad = os.path.join(tmp, "bad-scales")
    shutil.copytree(ckpt["w4a16"], bad)
    state = load_torch(os.path.join(bad, "model.safetensors"))
    key = LAYERS[0] + ".weight_scale"
    state[key] = state[key].repeat_interleave(2, dim=1).contiguous()
    save_torch(state, os.path.join(bad, "model.safetensors"))
    p = run(["import", "--model", path, *select, "--converted", bad, "--tokens", "4", "-o", out, "-q"], expect=2)
    check(LAYERS[0] in p.stderr and "declared INT4 symmetric, group 128" in p.stderr and "6 groups" in p.stderr,
          f"6 groups stored: {p.stderr}")
    check(not os.path.exists(out), "refused: nothing written")

    # 4. The converted run's default criterion; --require replaces it.
    rep = os.path.join(tmp, "rep")
    p = run(["run", ds, "--backend", "cpu", "--recipes", "fp32", "-o", rep] + FAST)
    rows = {r["workload"]: r for r in json.load(open(os.path.join(rep, "report.json")))["rows"]}
    for n in LAYERS:
        check(rows[n]["verdict"] == "pass", f"{n}: verdict {rows[n]['verdict']} ({rows[n].get('verdict_detail')})")
    check("judged by the artifact's error against the original" in p.stderr, f"run explains the criterion: {p.stderr}")
    check(rows[LAYERS[0]]["error"]["rel_fro"]["worst"] > 1e-2, "the INT4 error is measured")
    md = open(os.path.join(rep, "report.md")).read()
    check("rel\\_fro&lt;=0.5" in md, "report.md lists the criterion the converted rows were judged by")
    # 5a. run's table: query/key/value shown whole.
    for n in LAYERS:
        check(n in p.stdout, f"run's table shows {n} whole")
    rep2 = os.path.join(tmp, "rep2")
    run(["run", ds, "--backend", "cpu", "--recipes", "fp32", "--require", "rel_fro<=1e-6", "-o", rep2, "--quiet"] + FAST, expect=3)
    rows = {r["workload"]: r for r in json.load(open(os.path.join(rep2, "report.json")))["rows"]}
    check(rows[LAYERS[0]]["verdict"] == "fail", "--require replaces the converted criterion")

    # 5b. --list --converted.
    p = run(["import", "--model", path, *select, "--converted", ckpt["w4a16"], "--list"])
    lines = {line.split("\t")[0]: line.split("\t") for line in p.stdout.splitlines() if not line.startswith("#")}
    check(lines[LAYERS[0]][2] == "group_0: weights INT4 symmetric, group 128; activations not quantized" and
          lines[LAYERS[0]][3] == "INT4 packed, group 128 F32", f"--list --converted: {lines.get(LAYERS[0])}")
    check(lines[LAYERS[2]][2] == "ignored by the producer" and lines[LAYERS[2]][3] == "F32 (unquantized)",
          f"--list --converted, ignored layer: {lines.get(LAYERS[2])}")
    # 5c. A prefix the converted checkpoint's names carry ("bert." of a task model's export).
    prefixed, _ = ct_checkpoints.write(os.path.join(tmp, "prefixed"), {"bert." + n: w for n, w in weights.items()}, "W8A8")
    p = run(["import", "--model", path, *select, "--converted", prefixed, "--tokens", "4", "-o", out, "-q"], expect=2)
    check("--strip-prefix bert." in p.stderr and "closest:" in p.stderr and f'"bert.{LAYERS[0]}"' in p.stderr,
          f"prefix hint: {p.stderr}")
    run(["import", "--model", path, *select, "--converted", prefixed, "--strip-prefix", "bert.", "--tokens", "4", "-o", out,
         "-q"])
    check(sorted(sources(out)) == sorted(LAYERS), "--strip-prefix: the layers imported under the original's names")
    # 5d. --strip-prefix and the producer's ignore list: an entry carrying the prefix (as compressed-tensors
    # wrote it, naming the module of the checkpoint it saved) and one lacking it (the same checkpoint with
    # config.json's ignore rewritten to the base model's name) both name the layer stripped of the prefix.
    carrying, _ = ct_checkpoints.write(os.path.join(tmp, "carrying"), {"bert." + n: w for n, w in weights.items()}, "W4A16",
                                       ignore=["bert." + LAYERS[2]])
    lacking = os.path.join(tmp, "lacking")
    shutil.copytree(carrying, lacking)
    config_path = os.path.join(lacking, "config.json")
    config = json.load(open(config_path))
    check(config["quantization_config"]["ignore"] == ["bert." + LAYERS[2]], f"ignore as written: {config['quantization_config']}")
    config["quantization_config"]["ignore"] = [LAYERS[2]]
    json.dump(config, open(config_path, "w"))
    for name, conv in (("carrying", carrying), ("lacking", lacking)):
        p = run(["import", "--model", path, *select, "--converted", conv, "--strip-prefix", "bert.", "--list"])
        lines = {line.split("\t")[0]: line.split("\t") for line in p.stdout.splitlines() if not line.startswith("#")}
        check(lines[LAYERS[2]][2] == "ignored by the producer" and lines[LAYERS[2]][3] == "F32 (unquantized)" and
              len(lines[LAYERS[2]]) == 4, f"--strip-prefix, ignore entry {name} the prefix: {lines.get(LAYERS[2])}")
        check(lines[LAYERS[0]][2].startswith("group_0: weights INT4"), f"--strip-prefix, {name}: {lines.get(LAYERS[0])}")
        run(["import", "--model", path, *select, "--converted", conv, "--strip-prefix", "bert.", "--tokens", "4", "-o", out,
             "-q", "--force"])
        check(sources(out)[LAYERS[2]]["converted"]["declared"] == "ignored by the producer (left unquantized)",
              f"--strip-prefix import, ignore entry {name} the prefix")
        p = run(["conform", path, conv, "--strip-prefix", "bert.", *select])
        check("ignored" in p.stdout, f"conform --strip-prefix, ignore entry {name} the prefix: {p.stdout}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
