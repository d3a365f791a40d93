"""Attention's GEMMs in verify's per-layer report (issue 42): `verify --attention fa3-fp8` on a seeded GQA
Llama (hidden 576, 9 / 3 heads of 64, tied embeddings, vocabulary 1000; tests/venv/tiny_llama.py) with its
v_proj, o_proj and MLP layers in fp8.

- every attention layer has a `.qk` and a `.pv` row, in execution order (after the layer's q/k/v
  projections, before its o_proj), with finite cumulative and isolated errors;
- the isolated rows equal, metric for metric, `precis run` on the workloads `python -m precis capture
  --attention` makes of the reference model's Q, Kᵀ, P, V (the fp32 recipe's records, imported with
  `--b-batched`), so the isolated row is what `run` judges;
- the first layer's QKᵀ sees the reference model's own Q and K (the plan leaves q_proj and k_proj
  unquantized), so its cumulative row equals its isolated row; deeper rows carry the error before them (cumulative above
  isolated at the second layer's PV);
- without --attention no such rows; with a per-(sequence, head) recipe (fa3-fp8-block) cumulative rows
  but no isolated ones (a batched A is one matrix to run).
"""
import glob
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
import precis  # noqa: E402
from precis import attention, verify  # noqa: E402
from tiny_llama import seeded_gqa_llama  # noqa: E402
from report_schema import check_report_schema  # noqa: E402

PRECIS = os.environ.get("PRECIS") or os.path.join(BUILD, "precis")
FAILURES = []
# q_proj and k_proj stay unquantized, so that the first QKᵀ sees the reference model's own Q and K.
PLAN = {"model.layers.*.self_attn.v_proj": "fp8", "model.layers.*.self_attn.o_proj": "fp8", "model.layers.*.mlp.*": "fp8"}
METRICS = ("rel_fro", "max_abs", "cosine")


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, file=sys.stderr)


def main():
    tmp = scratch.mkdtemp(prefix="precis-verify-attention-")
    model = seeded_gqa_llama(layers=2)
    # 4 x 9 = 36 (sequence, head) samples of 24 rows: the float64 reference goes in pieces of 32 samples
    # (whole blocks of 256 rows), so the second piece reads its own Bs.
    held = torch.randint(0, 1000, (4, 24), generator=torch.Generator().manual_seed(5)).numpy()
    r = verify.verify(model, PLAN, held, attention="fa3-fp8", out=os.path.join(tmp, "rep"), batch_size=len(held),
                      quiet=True)
    per_layer = r.report["per_layer"]
    names = [e["layer"] for e in per_layer]
    for i in range(2):
        at = f"model.layers.{i}.self_attn"
        check(f"{at}.qk" in names and f"{at}.pv" in names, f"layer {i}: no qk/pv rows in {names}")
        if f"{at}.qk" in names:
            check(names.index(f"{at}.v_proj") < names.index(f"{at}.qk") < names.index(f"{at}.pv")
                  < names.index(f"{at}.o_proj"), f"layer {i}: rows out of execution order: {names}")
    check([e["depth"] for e in per_layer] == list(range(len(per_layer))), "depths renumbered in order")
    att = {e["layer"]: e for e in per_layer if e.get("kind") == "attention"}
    check(len(att) == 4, f"{len(att)} attention rows")
    for name, e in att.items():
        cum, iso = e["cumulative"]["rel_fro"], e["isolated"] and e["isolated"]["rel_fro"]
        check(iso is not None and all(math.isfinite(v) and v > 0 for v in (cum["worst"], cum["mean"], iso["worst"], iso["mean"])),
              f"{name}: cumulative {cum}, isolated {iso}")
        check(e["recipe"] == "fa3-fp8" and e["k"] == 64 if name.endswith(".qk") else e["n"] == 64, f"{name}: {e}")
    qk0 = att["model.layers.0.self_attn.qk"]
    check(qk0["cumulative"]["rel_fro"] == qk0["isolated"]["rel_fro"],
          f"the first QKᵀ's cumulative equals its isolated row: {qk0['cumulative']['rel_fro']} {qk0['isolated']['rel_fro']}")
    pv1 = att["model.layers.1.self_attn.pv"]
    check(pv1["cumulative"]["rel_fro"]["worst"] > pv1["isolated"]["rel_fro"]["worst"],
          f"the second PV carries the error before it: {pv1['cumulative']['rel_fro']} {pv1['isolated']['rel_fro']}")
    on_disk = json.load(open(os.path.join(tmp, "rep", "report.json")))
    rows = {row["workload"]: row for row in on_disk["rows"]}
    check(all(n in rows for n in att), f"report.json rows: {sorted(rows)}")
    # report.json with the attention rows against docs/report-schema.json (Debian's python3-jsonschema, as
    # test_python_verify_llama.py does it).
    check_report_schema(os.path.join(tmp, "rep", "report.json"), check)
    md = open(os.path.join(tmp, "rep", "report.md")).read()
    check("model.layers.1.self\\_attn.pv" in md or "model.layers.1.self_attn.pv" in md, "report.md lists the rows")

    # The isolated rows are precis run on the captured workloads (the CLI: capture --attention, import).
    ckpt = os.path.join(tmp, "ckpt")
    model.save_pretrained(ckpt)
    np.save(os.path.join(tmp, "held.npy"), held)
    cap = os.path.join(tmp, "attn")
    p = subprocess.run([sys.executable, "-m", "precis", "capture", "--model", ckpt, "--inputs", os.path.join(tmp, "held.npy"),
                        "--attention", "-o", cap], capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 0, f"capture --attention: exit {p.returncode}: {p.stdout[-500:]} {p.stderr[-1500:]}")
    p = subprocess.run([sys.executable, "-m", "precis", "capture", "--model", ckpt, "--inputs", os.path.join(tmp, "held.npy"),
                        "--attention", "-o", cap], capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 2 and "--force" in p.stderr, f"capture into a non-empty directory: exit {p.returncode}: {p.stderr}")
    recipe = attention.AttentionRecipe("fa3-fp8")
    datasets = sorted(glob.glob(os.path.join(cap, "*.h5")))
    check(len(datasets) == 4, f"capture --attention made {datasets}")
    for ds in datasets:
        name = os.path.basename(ds)[:-3]
        spec = recipe.qk if name.endswith(".qk") else recipe.pv
        rep = precis.run(ds, recipes=[spec], backend="cpu", output=os.path.join(tmp, name + ".rep"),
                         args=["--min-samples", "1", "--max-samples", "1", "--max-time-ms", "1"])
        run_row, iso_row = rep.rows[0], rows.get(name)
        check(iso_row is not None and run_row["status"] == "ok", f"{name}: run {run_row['status']}, verify row {iso_row is not None}")
        if iso_row is None:
            continue
        for metric in METRICS:
            check(run_row["error"][metric] == iso_row["error"][metric],
                  f"{name} {metric}: precis run {run_row['error'][metric]}, verify's isolated row {iso_row['error'][metric]}")
        check((run_row["m"], run_row["n"], run_row["k"], run_row["batch"]) == (iso_row["m"], iso_row["n"], iso_row["k"], iso_row["batch"]),
              f"{name}: shapes {run_row['m'], run_row['n'], run_row['k'], run_row['batch']} vs "
              f"{iso_row['m'], iso_row['n'], iso_row['k'], iso_row['batch']}")

    # Without --attention: no attention rows; a per-(sequence, head) recipe: cumulative rows only.
    plain = verify.verify(model, PLAN, held, batch_size=len(held), quiet=True)
    check(not any(e.get("kind") == "attention" for e in plain.report["per_layer"]), "attention rows without --attention")
    block = verify.verify(model, None, held, attention="fa3-fp8-block", batch_size=len(held), quiet=True)
    rows_b = [e for e in block.report["per_layer"] if e.get("kind") == "attention"]
    check(len(rows_b) == 4 and all(e["isolated"] is None and e["cumulative"]["rel_fro"]["worst"] > 0 for e in rows_b),
          f"fa3-fp8-block: {[(e['layer'], e['isolated']) for e in rows_b]}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
