"""verify: does the model still work with the plan's formats? (DESIGN §16, docs/verify.md)

The reference model and the model with the plan's GEMMs emulated exactly (precis.torch.emulate) run
on held-out inputs. Reported:
- end to end (precis.endtoend): logits -> KL both ways, top-1 agreement, top-5 overlap,
  delta cross-entropy; hidden states -> cosine, rel_fro; per sample and over samples, with
  statistical gates (--require);
- per layer: isolated error, the layer alone on the reference model's inputs, measured by
  `precis run` on a dataset imported from those inputs (the report's rows), beside cumulative
  error, the layer's GEMM output inside the emulated model against a.W of the reference model's
  input a (float64, as c_ref); and the first layer whose cumulative error crosses a threshold.
Written as precis's report (report.json with end_to_end and per_layer, report.csv, report.md,
report.html) so that `precis compare` reads it.
"""
import argparse
import copy
import html
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from . import endtoend, kld
from . import noise as noise_mod
from . import reference as reference_file_mod

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_GATE = 0, 1, 2, 3


class VerifyError(ValueError):
    """Bad input to verify: the message names the file or argument and what was expected."""


# ----------------------------------------------------------------------------------------------
# Inputs


def load_inputs(inputs, tokenizer=None, tokens=64, samples=None):
    """Token ids [samples, tokens] (int64) from an array, a .npy file of ids, or a text file read
    with the tokenizer: its tokens (without special tokens) cut into windows of `tokens` minus the
    tokenizer's special tokens, each window given them as the model's inputs would have
    ([CLS] ... [SEP] for BERT). A last partial window is dropped; `samples` caps the windows."""
    if isinstance(inputs, (str, os.PathLike)):
        path = os.fspath(inputs)
        if not os.path.isfile(path):
            raise VerifyError(f"--inputs {path}: no such file")
        with open(path, "rb") as f:
            magic = f.read(6)
        if magic == b"\x93NUMPY":
            ids = np.load(path, allow_pickle=False)
            if ids.ndim == 1:
                ids = ids[None]
            if ids.ndim != 2 or ids.dtype.kind not in "iu":
                raise VerifyError(f"--inputs {path}: expected integer token ids [samples, tokens], found {ids.dtype} "
                                  f"{list(ids.shape)}")
            ids = ids.astype(np.int64)
        else:
            if tokenizer is None:
                raise VerifyError(f"--inputs {path}: a text file needs the model's tokenizer (none found)")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            ids = text_windows(text, tokenizer, tokens)
            if len(ids) == 0:
                raise VerifyError(f"--inputs {path}: the text has fewer tokens than one window of {tokens}")
    else:
        ids = np.asarray(inputs.cpu().numpy() if hasattr(inputs, "cpu") else inputs)
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or ids.dtype.kind not in "iu":
            raise VerifyError(f"inputs: expected integer token ids [samples, tokens], found {ids.dtype} {list(ids.shape)}")
        ids = ids.astype(np.int64)
    if samples is not None:
        ids = ids[:samples]
    return ids


def special_tokens(tokenizer):
    """The ids the tokenizer puts before and after a text ([CLS], [SEP] for BERT; BOS for Llama)."""
    bare = tokenizer("hello", add_special_tokens=False)["input_ids"]
    full = tokenizer("hello", add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(bare) + 1):
        if full[i:i + len(bare)] == bare:
            return list(full[:i]), list(full[i + len(bare):])
    return [], []


def text_windows(text, tokenizer, tokens):
    body = tokenizer(text, add_special_tokens=False)["input_ids"]
    before, after = special_tokens(tokenizer)
    width = tokens - len(before) - len(after)
    if width < 1:
        raise VerifyError(f"--tokens {tokens}: no room beside the tokenizer's {len(before) + len(after)} special tokens")
    out = [before + body[s:s + width] + after for s in range(0, len(body) - width + 1, width)]
    return np.array(out, np.int64).reshape(-1, tokens)


# ----------------------------------------------------------------------------------------------
# The precis CLI (isolated per-layer errors come from `precis run`, as for any dataset)


def precis_command():
    """How to run the precis CLI: $PRECIS (a path) when set, else this package's own
    (`python -m precis`, the same C code as emulate)."""
    env = os.environ.get("PRECIS")
    if env:
        return [env]
    return [sys.executable, "-m", "precis"]


def _cli(cmd, args, what):
    env = dict(os.environ)
    if cmd[1:] == ["-m", "precis"]:  # the subprocess imports this very package
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run(cmd + args, capture_output=True, text=True, env=env)
    if p.returncode not in (0, 3):
        raise RuntimeError(f"precis {what} failed (exit {p.returncode}): {p.stderr.strip()[-2000:]}")
    return p


# ----------------------------------------------------------------------------------------------
# Verify


class VerifyResult:
    def __init__(self, report, outputs, gates, cap_ref, cap_emulated, records, plan):
        self.report, self.outputs, self.gates = report, outputs, gates
        self.reference_capture, self.emulated_capture = cap_ref, cap_emulated
        self.gemm_outputs, self.plan = records, plan

    @property
    def end_to_end(self):
        return self.report["end_to_end"]

    @property
    def per_layer(self):
        return self.report["per_layer"]

    @property
    def passed(self):
        return all(g["verdict"] == "pass" for g in self.gates)

    def exit_code(self):
        return EXIT_OK if self.passed else EXIT_GATE


def _batches(ids, batch_size):
    import torch

    for i in range(0, len(ids), batch_size):
        yield {"input_ids": torch.from_numpy(ids[i:i + batch_size])}


def _rel_fro_per_sample(c, r):
    d = (c.astype(np.float64) - r).reshape(len(r), -1)
    nr = np.linalg.norm(r.reshape(len(r), -1), axis=1)
    nd = np.linalg.norm(d, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(nr > 0, nd / np.where(nr > 0, nr, 1), np.where(nd > 0, np.inf, 0.0))


def verify(model, plan, inputs, *, tokenizer=None, out=None, require=(), alpha=0.05, layer_threshold=0.01, tokens=64,
           samples=None, batch_size=None, reference="fp32", prefix="", precis_cli=None, isolated=True, force=False,
           model_name=None, inputs_name=None, plan_name=None, command=None, resamples=2000, score="all",
           save_reference=None, noise=None, model_fingerprint=None):
    """Reference vs emulated model on held-out inputs; returns a VerifyResult and, with out=DIR,
    writes report.json, report.csv, report.md and report.html there. model: a torch module (run on
    the CPU); plan: plan.json, a {layer glob: recipe} mapping (dict or JSON file); inputs: token
    ids [samples, tokens] (array, tensor or .npy) or a text file (with tokenizer); require:
    end-to-end gates such as "kl_mean<=0.01" judged at level alpha; layer_threshold: the
    cumulative rel_fro (worst over samples) whose first crossing is reported; reference: "fp32"
    or "fp64" (the reference model's final outputs in float64 where the model allows); batch_size:
    sequences per forward (default all: a tensor scale then spans the same rows in the emulated
    model as in the isolated run, whose dataset holds all samples as one batch)."""
    import torch

    from . import torch as pt

    started = time.time()
    saved = None  # a reference computed once (precis.reference): its tokens and outputs
    if reference not in ("fp32", "fp64"):
        if not os.path.isfile(str(reference)):
            raise VerifyError(f"--reference {reference}: expected fp32, fp64 or a file of --save-reference (no such file)")
        saved = reference_file_mod.load(str(reference))
    gates = [endtoend.parse_gate(r) for r in require]
    for text in noise or ():
        noise_mod.parse(text)
    ids = load_inputs(inputs, tokenizer, tokens, samples)
    if len(ids) == 0:
        raise VerifyError("no input samples")
    fingerprint = None
    if saved is not None or save_reference:  # model_fingerprint: the caller's, computed once for many verifies
        fingerprint = model_fingerprint or reference_file_mod.model_fingerprint(model)
    if saved is not None:
        reference_file_mod.check(saved, fingerprint=fingerprint, ids=ids)
    batch_size = batch_size or len(ids)
    chosen = pt.resolve_plan(model, plan, prefix)
    if not chosen:
        raise VerifyError("the plan selects no linear layer of the model")
    layers = list(chosen)
    modules = {n: (m, im) for n, m, im in pt.linear_layers(model, prefix)}
    if out is not None and not force and os.path.exists(os.path.join(out, "report.json")):
        raise VerifyError(f"{out}/report.json exists (--force replaces it)")

    model.eval()
    ref_model = model if all(p.dtype == torch.float32 for p in model.parameters()) else copy.deepcopy(model).float()
    with torch.no_grad():
        cap_ref = None if saved is not None else pt.capture(ref_model, _batches(ids, batch_size), layers=layers,
                                                            prefix=prefix, gradients=False, tokens=ids.shape[1])
        records = {}
        with pt.emulate(ref_model, chosen, prefix=prefix, record=records):
            cap_q = pt.capture(ref_model, _batches(ids, batch_size), layers=layers, prefix=prefix, gradients=False,
                               tokens=ids.shape[1])
        if saved is not None:
            ref_out, ref_kind = saved.outputs, saved.kind
        else:
            ref_out, ref_kind = cap_ref.output_array(), cap_ref.output_kind
        if reference == "fp64":
            # The final outputs of the model in float64 (capture would store them as float32).
            m64 = copy.deepcopy(ref_model).double()
            ref_out = np.concatenate([_final64(m64, b) for b in _batches(ids, batch_size)])
            del m64
    q_out = cap_q.output_array()
    if save_reference:
        reference_file_mod.save(save_reference, ids, ref_out, kind=ref_kind, reference=reference, fingerprint=fingerprint,
                                model_name=model_name or type(model).__name__, model_class=type(model).__name__)
    labels = None
    if ref_kind == "logits":
        labels = np.full(ids.shape, -100, np.int64)
        labels[:, :-1] = ids[:, 1:]
    outputs = endtoend.Outputs.compare(ref_out, q_out, labels=labels, kind=ref_kind, score=score)
    judged = endtoend.judge(outputs, gates, alpha=alpha, resamples=resamples) if gates else []
    noise_table = None
    if noise:  # the same formats computed another correct way (precis.noise)
        alt_metrics = {}
        for kind_, value in (noise_mod.parse(t) for t in noise):
            if kind_ == "target":
                with torch.no_grad(), pt.emulate(ref_model, chosen, prefix=prefix, target=value):
                    cap_alt = pt.capture(ref_model, _batches(ids, batch_size), layers=layers[:1], prefix=prefix,
                                         gradients=False, tokens=ids.shape[1])
                alt = endtoend.Outputs.compare(ref_out, cap_alt.output_array(), labels=labels, kind=ref_kind, score=score)
            else:
                m64 = copy.deepcopy(ref_model).double()
                r64 = np.concatenate([_final64(m64, b) for b in _batches(ids, batch_size)])
                del m64
                alt = endtoend.Outputs.compare(r64, q_out, labels=labels, kind=ref_kind, score=score)
            alt_metrics[f"{kind_}={value}"] = alt.metrics()
        noise_table = noise_mod.floors(outputs.metrics(), alt_metrics)
        noise_mod.mark_gates(judged, noise_table)

    # Per layer, cumulative: the GEMM output inside the emulated model against a.W (float64) of
    # the reference model's input.
    ref_inputs = cap_ref.arrays() if cap_ref is not None else {}
    per_layer = []
    for depth, name in enumerate(layers if cap_ref is not None else []):
        module, in_major = modules[name]
        if name not in ref_inputs or name not in records:
            per_layer.append({"layer": name, "depth": depth, "recipe": chosen[name], "called": False})
            continue
        a = ref_inputs[name]
        b = pt.weight_kn(module, in_major)
        # One 2-D product (NumPy runs a stacked 3-D matmul far slower than one BLAS call).
        c_ref = (a.reshape(-1, a.shape[-1]).astype(np.float64) @ b.astype(np.float64)).reshape(*a.shape[:-1], b.shape[1])
        c_q = np.concatenate(records[name])
        if c_q.shape != c_ref.shape:
            raise RuntimeError(f"layer {name}: emulated outputs {c_q.shape} do not line up with the reference's {c_ref.shape}")
        rel = _rel_fro_per_sample(c_q, c_ref)
        per_layer.append({"layer": name, "depth": depth, "recipe": chosen[name], "called": True,
                          "k": int(b.shape[0]), "n": int(b.shape[1]),
                          "cumulative": {"rel_fro": {"worst": float(np.max(rel)), "mean": float(np.mean(rel))}},
                          "isolated": None})

    report, csv_text = None, None
    if isolated and cap_ref is not None:
        report, csv_text = _isolated_rows(precis_cli or precis_command(), model, modules, chosen, cap_ref, per_layer)
    crossing = next((e for e in per_layer if e.get("called") and e["cumulative"]["rel_fro"]["worst"] > layer_threshold), None)
    metrics = outputs.metrics()
    reference_label = reference if saved is None else f"{saved.reference}, read from {reference}"
    e2e = {"kind": outputs.kind, "reference": reference_label, "samples": len(outputs), "tokens": outputs.tokens(),
           "tokens_per_sample": int(ids.shape[1]), "scored_positions": outputs.score,
           "metrics": metrics, "per_sample": outputs.per_sample(),
           "alpha": alpha, "method": f"percentile bootstrap over samples, {resamples} resamples, seed 0",
           "gates": judged,
           "verdict": None if not judged else ("pass" if all(g["verdict"] == "pass" for g in judged)
                                               else "fail" if any(g["verdict"] == "fail" for g in judged) else "undecided")}
    if noise_table is not None:
        e2e["noise_floor"] = {"alternatives": list(noise), "label": noise_mod.LABEL, "metrics": noise_table}
    block = outputs.block()
    if block is not None:
        e2e["llamacpp"] = block  # llama.cpp's --kl-divergence block and ExLlamaV3's figures (precis.kld)
    if report is None:
        report = {"format": "precis-report", "format_version": 1, "complete": True,
                  "tool": {"name": "precis", "version": None, "commit": None},
                  "environment": {"backend": "cpu-emulation", "device": None},
                  "dataset": {"path": None, "dataset_id": None},
                  "settings": {"recipes": sorted(set(chosen.values())), "criteria": []}, "rows": []}
    report["end_to_end"] = e2e
    report["per_layer"] = per_layer
    report["verify"] = {"model": model_name or type(model).__name__, "plan": plan_name,
                        "inputs": inputs_name, "samples": int(ids.shape[0]), "tokens": int(ids.shape[1]),
                        "layer_threshold": {"metric": "rel_fro", "of": "cumulative, worst over samples",
                                            "value": layer_threshold},
                        "first_crossing": None if crossing is None else {"layer": crossing["layer"],
                                                                         "depth": crossing["depth"],
                                                                         "rel_fro": crossing["cumulative"]["rel_fro"]["worst"]},
                        "seconds": round(time.time() - started, 3)}
    if saved is not None:
        report["verify"]["per_layer_skipped"] = ("the reference was read from a file: per-layer errors need the reference "
                                                 "model's layer inputs, which only a reference pass has")
    if command:
        report["environment"]["command"] = command
    if out is not None:
        write_report(out, report, csv_text)
    return VerifyResult(report, outputs, judged, cap_ref, cap_q, records, chosen)


def _final64(model64, batch):
    import torch

    from . import torch as pt

    kwargs = pt.as_batch(batch)
    with torch.no_grad():
        y, _ = pt.final_output(model64(**kwargs))
    return y.numpy()


def _isolated_rows(cmd, model, modules, chosen, cap_ref, per_layer):
    """`precis import --model` of the chosen layers' weights with the reference inputs, then
    `precis run` of each recipe on its layers: the isolated error as precis measures any layer."""
    from . import torch as pt

    tmp = tempfile.mkdtemp(prefix="precis-verify-")
    try:
        weights, in_major = {}, []
        arrays = cap_ref.arrays()
        called = [e["layer"] for e in per_layer if e.get("called")]
        for name in called:
            module, im = modules[name]
            weights[name + ".weight"] = module.weight.detach().float().cpu().numpy()
            if im:
                in_major.append(name)
        ckpt = os.path.join(tmp, "weights.safetensors")
        pt._write_safetensors(ckpt, weights)
        acts = os.path.join(tmp, "acts.npz")
        pt.write_arrays(acts, {n: arrays[n] for n in called}, cap_ref.meta)
        ds = os.path.join(tmp, "layers.h5")
        args = ["import", "--model", ckpt, "--activations", acts, "--in-major", "none", "-o", ds, "-q"]
        for name in called:
            args += ["--layers", name]
        for name in in_major:
            args += ["--in-major", name]
        _cli(cmd, args, "import")
        by_recipe = {}
        for name in called:
            by_recipe.setdefault(chosen[name], []).append(name)
        reports, csv_lines = [], []
        for i, (recipe, names) in enumerate(by_recipe.items()):
            rep = os.path.join(tmp, f"run-{i}")
            _cli(cmd, ["run", ds, "--backend", "cpu", "--recipes", recipe, "--workloads", ",".join(names), "-o", rep,
                       "--quiet", "--min-samples", "1", "--max-samples", "3", "--max-time-ms", "1"], "run")
            with open(os.path.join(rep, "report.json")) as f:
                reports.append(json.load(f))
            with open(os.path.join(rep, "report.csv"), newline="") as f:
                lines = f.read().split("\r\n")
            csv_lines += lines[:1] if not csv_lines else []
            csv_lines += [ln for ln in lines[1:] if ln]
        order = {n: i for i, n in enumerate(called)}
        rows = sorted((r for rep in reports for r in rep["rows"]), key=lambda r: order.get(r.get("layer") or r["workload"], 0))
        by_layer = {r.get("layer") or r["workload"]: r for r in rows}
        for e in per_layer:
            row = by_layer.get(e["layer"])
            if row is None:
                continue
            e["isolated"] = {"rel_fro": row["error"]["rel_fro"], "status": row["status"], "verdict": row["verdict"]}
            row["cumulative"] = e["cumulative"]
        report = reports[0]
        report["rows"] = rows
        report["complete"] = all(r.get("complete", True) for r in reports)
        report["settings"]["recipes"] = list(by_recipe)
        report["dataset"]["path"] = None  # a temporary dataset of the reference inputs, removed
        header, body = csv_lines[0], csv_lines[1:]
        layer_col = header.split(",").index("layer") if "layer" in header.split(",") else None
        if layer_col is not None:
            body.sort(key=lambda ln: order.get(_csv_field(ln, layer_col), 0))
        return report, "\r\n".join([header] + body) + "\r\n"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _csv_field(line, index):
    import csv

    return next(csv.reader([line]))[index]


# ----------------------------------------------------------------------------------------------
# Report files


def _fmt(x):
    if x is None:
        return "–"
    if isinstance(x, float):
        if math.isinf(x) or math.isnan(x):
            return str(x)
        if x != 0 and (abs(x) < 1e-4 or abs(x) >= 1e6):
            return f"{x:.3g}"
        return f"{x:.4g}"
    return str(x)


def _write(path, text):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def write_report(out, report, csv_text=None):
    os.makedirs(out, exist_ok=True)
    _write(os.path.join(out, "report.json"), json.dumps(report, indent=1, allow_nan=False, default=_json_default) + "\n")
    if csv_text:
        _write(os.path.join(out, "report.csv"), csv_text)
    _write(os.path.join(out, "report.md"), render_markdown(report))
    _write(os.path.join(out, "report.html"), render_html(report))


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    raise TypeError(f"not JSON: {type(x).__name__}")


def _md(text):
    s = str(text)
    for ch in "\\|`*_[]~":
        s = s.replace(ch, "\\" + ch)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _e2e_lines(e2e):
    m = e2e["metrics"]
    if e2e["kind"] == "logits":
        rows = [("KL(ref‖q) per token", "kl_mean", "kl_p99", "kl_max"), ("KL(q‖ref) per token", "rkl_mean", "rkl_p99", "rkl_max")]
        lines = ["| metric | mean | p99 | max |", "|---|---|---|---|"]
        lines += [f"| {t} | {_fmt(m[a])} | {_fmt(m[b])} | {_fmt(m[c])} |" for t, a, b, c in rows]
        lines += ["", "| top-1 agreement | top-5 overlap | CE ref | CE emulated | Δ CE |", "|---|---|---|---|---|",
                  f"| {_fmt(m['top1_agree'])} | {_fmt(m['top5_overlap'])} | {_fmt(m.get('ce_ref'))} | {_fmt(m.get('ce_q'))} "
                  f"| {_fmt(m.get('ce_delta'))} |"]
    else:
        lines = ["| cosine mean | cosine min | rel_fro mean | rel_fro max |", "|---|---|---|---|",
                 f"| {_fmt(m['cosine_mean'])} | {_fmt(m['cosine_min'])} | {_fmt(m['rel_fro_mean'])} | {_fmt(m['rel_fro_max'])} |"]
    return lines


def render_markdown(report):
    e2e, v = report["end_to_end"], report["verify"]
    out = ["# precis verify", ""]
    out.append(f"Model `{_md(v['model'])}`, plan `{_md(v['plan'])}`, inputs `{_md(v['inputs'])}`: {v['samples']} samples "
               f"of {v['tokens']} tokens; reference {e2e['reference']}; {_fmt(v['seconds'])} s.")
    if not report.get("complete", True):
        out += ["", "**INCOMPLETE**"]
    out += ["", "## End to end", "", f"The model's final outputs ({e2e['kind']}), emulated against the reference, "
            f"over {e2e['samples']} samples ({e2e['tokens']} tokens):", ""]
    out += _e2e_lines(e2e)
    if e2e.get("noise_floor"):
        nf = e2e["noise_floor"]
        out += ["", f"### Implementation noise floor ({', '.join(nf['alternatives'])})", "",
                "The same formats computed another correct way; a metric whose departure from its ideal value is within "
                f"the floor is *{nf['label']}*.", "", "| metric | value | ideal | floor | verdict |", "|---|---|---|---|---|"]
        for name, f in nf["metrics"].items():
            out.append(f"| {name} | {_fmt(f['value'])} | {_fmt(f['ideal'])} | {_fmt(f['floor'])} | "
                       f"{'**' + nf['label'] + '**' if f['noise'] else 'above the floor'} |")
    if e2e.get("llamacpp"):
        out += ["", "### llama.cpp's `--kl-divergence` block, ExLlamaV3's figures", "",
                "Definitions and sources: docs/verify.md (\"The figures users compare\"); reference = base, emulated = Q.",
                "", "```", kld.render_text(e2e["llamacpp"]), "```"]
    if e2e["gates"]:
        out += ["", f"### Gates (α = {e2e['alpha']}, {e2e['method']})", "", "| requirement | value | bound | verdict |",
                "|---|---|---|---|"]
        for g in e2e["gates"]:
            verdict = {"pass": "pass", "fail": "**FAIL**", "undecided": "**too few samples to decide**"}[g["verdict"]]
            if g.get("noise"):
                verdict += f" ({noise_mod.LABEL})"
            out.append(f"| `{g['expression']}` | {_fmt(g['value'])} | {_fmt(g['bound'])} | {verdict} |")
        out += ["", f"Verdict: **{e2e['verdict']}**."]
    fc = v["first_crossing"]
    thr = v["layer_threshold"]["value"]
    out += ["", "## Per layer", "",
            "Isolated: the layer alone on the reference model's inputs (`precis run`); cumulative: its output inside "
            "the emulated model against a·W of the reference model's input. rel_fro, worst over samples (mean).", ""]
    out.append(f"First layer whose cumulative rel_fro exceeds {_fmt(thr)}: "
               + (f"**{_md(fc['layer'])}** (depth {fc['depth']}, {_fmt(fc['rel_fro'])})." if fc else "none."))
    out += ["", "| # | layer | recipe | isolated | cumulative | cumulative / isolated |", "|---|---|---|---|---|---|"]
    for e in report["per_layer"]:
        if not e.get("called"):
            out.append(f"| {e['depth']} | {_md(e['layer'])} | {_md(e['recipe'])} | never called | | |")
            continue
        iso = e["isolated"]["rel_fro"] if e.get("isolated") else None
        cum = e["cumulative"]["rel_fro"]
        ratio = cum["worst"] / iso["worst"] if iso and iso["worst"] else None
        mark = " ✗" if cum["worst"] > thr else ""
        out.append(f"| {e['depth']} | {_md(e['layer'])} | {_md(e['recipe'])} | "
                   f"{_fmt(iso['worst']) if iso else '–'} ({_fmt(iso['mean']) if iso else '–'}) | "
                   f"{_fmt(cum['worst'])} ({_fmt(cum['mean'])}){mark} | {_fmt(ratio)} |")
    out += ["", "## Per sample", ""]
    keys = [k for k in (e2e["per_sample"][0] if e2e["per_sample"] else []) if k not in kld.GATE_METRICS]
    out += ["| sample | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for i, s in enumerate(e2e["per_sample"]):
        out.append(f"| {i} | " + " | ".join(_fmt(s.get(k)) for k in keys) + " |")
    return "\n".join(out) + "\n"


def _depth_chart(per_layer, threshold):
    pts = [e for e in per_layer if e.get("called")]
    if not pts:
        return ""
    vals = [e["cumulative"]["rel_fro"]["worst"] for e in pts]
    vals += [e["isolated"]["rel_fro"]["worst"] for e in pts if e.get("isolated") and e["isolated"]["rel_fro"]["worst"]]
    vals.append(threshold)
    pos = [v for v in vals if v and v > 0 and math.isfinite(v)]
    lo = math.floor(math.log10(min(pos))) if pos else -8
    hi = math.ceil(math.log10(max(pos))) if pos else 0
    if hi <= lo:
        hi = lo + 1
    w, h, left, right, top, bottom = 760, 300, 60, 20, 20, 50
    n = len(pts)

    def x(i):
        return left + (w - left - right) * (i / max(n - 1, 1))

    def y(v):
        v = max(v, 10.0 ** lo) if v and v > 0 else 10.0 ** lo
        if not math.isfinite(v):
            v = 10.0 ** hi
        return top + (h - top - bottom) * (hi - math.log10(v)) / (hi - lo)

    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
         f'aria-label="cumulative and isolated rel_fro along depth">']
    for d in range(lo, hi + 1):
        s.append(f'<line x1="{left}" x2="{w - right}" y1="{y(10.0 ** d):.1f}" y2="{y(10.0 ** d):.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{left - 6}" y="{y(10.0 ** d) + 4:.1f}" text-anchor="end" font-size="11">1e{d}</text>')
    s.append(f'<line x1="{left}" x2="{w - right}" y1="{y(threshold):.1f}" y2="{y(threshold):.1f}" stroke="#c00" '
             f'stroke-dasharray="6 4"/><text x="{w - right}" y="{y(threshold) - 4:.1f}" text-anchor="end" font-size="11" '
             f'fill="#c00">threshold {html.escape(_fmt(threshold))}</text>')
    cum = " ".join(f"{x(i):.1f},{y(e['cumulative']['rel_fro']['worst']):.1f}" for i, e in enumerate(pts))
    s.append(f'<polyline points="{cum}" fill="none" stroke="#1f5fa8" stroke-width="2"/>')
    iso_pts = [(i, e["isolated"]["rel_fro"]["worst"]) for i, e in enumerate(pts) if e.get("isolated")]
    if iso_pts:
        iso = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in iso_pts)
        s.append(f'<polyline points="{iso}" fill="none" stroke="#888" stroke-width="1.5" stroke-dasharray="4 3"/>')
    for i, e in enumerate(pts):
        v = e["cumulative"]["rel_fro"]["worst"]
        s.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="{4 if v > threshold else 2.5}" '
                 f'fill="{"#c00" if v > threshold else "#1f5fa8"}"><title>{html.escape(e["layer"])} '
                 f'({html.escape(e["recipe"])}): cumulative {html.escape(_fmt(v))}</title></circle>')
    s.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle" font-size="12">layer (model order, '
             f'0 … {n - 1})</text>')
    s.append(f'<text x="{left + 8}" y="{top + 12}" font-size="11" fill="#1f5fa8">cumulative</text>'
             f'<text x="{left + 90}" y="{top + 12}" font-size="11" fill="#888">isolated (dashed)</text>')
    s.append("</svg>")
    return "".join(s)


def render_html(report):
    e2e, v = report["end_to_end"], report["verify"]
    esc = html.escape
    md_tables = _e2e_lines(e2e)

    def table(lines):
        rows = [ln.strip("|").split("|") for ln in lines if ln and not ln.startswith("|---")]
        if not rows:
            return ""
        head = "".join(f"<th>{esc(c.strip())}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(f"<td>{esc(c.strip())}</td>" for c in r) + "</tr>" for r in rows[1:])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    parts = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>precis verify</title><style>",
             "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:.6em 0}"
             "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px;text-align:right}td:nth-child(2){text-align:left}"
             ".pass{color:#060}.fail{color:#b00;font-weight:bold}.undecided{color:#a60;font-weight:bold}"
             ".over{background:#fdd}", "</style></head><body>", "<h1>precis verify</h1>"]
    if not report.get("complete", True):
        parts.append("<p class=\"fail\">INCOMPLETE</p>")
    parts.append(f"<p>Model <code>{esc(str(v['model']))}</code>, plan <code>{esc(str(v['plan']))}</code>, inputs "
                 f"<code>{esc(str(v['inputs']))}</code>: {v['samples']} samples of {v['tokens']} tokens; reference "
                 f"{esc(e2e['reference'])}.</p>")
    parts.append(f"<h2>End to end ({esc(e2e['kind'])})</h2>")
    split = md_tables.index("") if "" in md_tables else len(md_tables)
    parts.append(table(md_tables[:split]))
    if split < len(md_tables):
        parts.append(table(md_tables[split + 1:]))
    if e2e.get("noise_floor"):
        nf = e2e["noise_floor"]
        parts.append(f"<h3>Implementation noise floor ({esc(', '.join(nf['alternatives']))})</h3><table><thead><tr>"
                     "<th>metric</th><th>value</th><th>ideal</th><th>floor</th><th>verdict</th></tr></thead><tbody>")
        for name, f in nf["metrics"].items():
            parts.append(f"<tr><td>{esc(name)}</td><td>{esc(_fmt(f['value']))}</td><td>{esc(_fmt(f['ideal']))}</td>"
                         f"<td>{esc(_fmt(f['floor']))}</td><td>{esc(nf['label'] if f['noise'] else 'above the floor')}</td></tr>")
        parts.append("</tbody></table>")
    if e2e.get("llamacpp"):
        parts.append("<h3>llama.cpp's --kl-divergence block, ExLlamaV3's figures</h3><pre>"
                     + esc(kld.render_text(e2e["llamacpp"])) + "</pre>")
    if e2e["gates"]:
        parts.append(f"<h3>Gates (α = {esc(str(e2e['alpha']))}, {esc(e2e['method'])})</h3><table><thead><tr><th>requirement"
                     "</th><th>value</th><th>bound</th><th>verdict</th></tr></thead><tbody>")
        for g in e2e["gates"]:
            label = {"pass": "pass", "fail": "FAIL", "undecided": "too few samples to decide"}[g["verdict"]]
            if g.get("noise"):
                label += f" ({noise_mod.LABEL})"
            parts.append(f"<tr><td>{esc(g['expression'])}</td><td>{esc(_fmt(g['value']))}</td><td>{esc(_fmt(g['bound']))}</td>"
                         f"<td class=\"{g['verdict']}\" title=\"{esc(g['detail'])}\">{esc(label)}</td></tr>")
        parts.append("</tbody></table>")
    thr = v["layer_threshold"]["value"]
    fc = v["first_crossing"]
    parts.append("<h2>Cumulative error along depth</h2>")
    parts.append(f"<p>First layer whose cumulative rel_fro exceeds {esc(_fmt(thr))}: "
                 + (f"<b>{esc(fc['layer'])}</b> (depth {fc['depth']}, {esc(_fmt(fc['rel_fro']))})" if fc else "none") + ".</p>")
    parts.append(_depth_chart(report["per_layer"], thr))
    parts.append("<h2>Per layer</h2><table><thead><tr><th>#</th><th>layer</th><th>recipe</th><th>isolated worst</th>"
                 "<th>isolated mean</th><th>cumulative worst</th><th>cumulative mean</th></tr></thead><tbody>")
    for e in report["per_layer"]:
        if not e.get("called"):
            parts.append(f"<tr><td>{e['depth']}</td><td>{esc(e['layer'])}</td><td>{esc(e['recipe'])}</td>"
                         "<td colspan=4>never called</td></tr>")
            continue
        iso = e["isolated"]["rel_fro"] if e.get("isolated") else {"worst": None, "mean": None}
        cum = e["cumulative"]["rel_fro"]
        cls = " class=\"over\"" if cum["worst"] > thr else ""
        parts.append(f"<tr{cls}><td>{e['depth']}</td><td>{esc(e['layer'])}</td><td>{esc(e['recipe'])}</td>"
                     f"<td>{esc(_fmt(iso['worst']))}</td><td>{esc(_fmt(iso['mean']))}</td><td>{esc(_fmt(cum['worst']))}</td>"
                     f"<td>{esc(_fmt(cum['mean']))}</td></tr>")
    parts.append("</tbody></table></body></html>\n")
    return "".join(parts)


# ----------------------------------------------------------------------------------------------
# python -m precis verify


USAGE = """usage: python -m precis verify --model DIR --plan PLAN --inputs FILE -o DIR [options]

Runs the model of DIR (a transformers checkpoint) as it is (the reference, fp32) and with the plan's
GEMMs emulated exactly by precis, on held-out inputs, and reports the end-to-end difference of its
outputs, each layer's isolated and cumulative error, and the first layer whose cumulative error
crosses --layer-threshold. Writes report.json, report.csv, report.md and report.html to -o DIR.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m precis verify", description=USAGE.split("\n\n", 1)[1],
                                     usage=USAGE.split("\n")[0][len("usage: "):],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a transformers checkpoint directory")
    parser.add_argument("--plan", required=True, help="plan.json of precis plan, or a JSON {layer glob: recipe} mapping")
    parser.add_argument("--inputs", required=True, help="a text file (read with the model's tokenizer) or token ids "
                        "[samples, tokens] in .npy; inputs the plan was not made on")
    parser.add_argument("-o", "--output", required=True, help="report directory")
    parser.add_argument("--require", action="append", default=[], help="end-to-end gate, repeatable: kl_mean<=0.01, "
                        "top1_agree>=0.99, cosine_min>=0.999, ... (passes only when its confidence bound meets it)")
    parser.add_argument("--alpha", type=float, default=0.05, help="one-sided level of the gates' bounds (default 0.05)")
    parser.add_argument("--reference", default="fp32", help="fp32, fp64 (the reference model's final outputs in float64) "
                        "or a file of --save-reference: its tokens and logits, reused instead of running the reference")
    parser.add_argument("--save-reference", default=None, metavar="FILE",
                        help="write the reference's tokens and logits (exact float32, HDF5) for later --reference FILE")
    parser.add_argument("--noise-floor", action="append", default=[], metavar="ALTERNATIVE",
                        help="repeatable: target=sm_80 (the plan under another accumulator model) or reference=fp64; "
                        "metrics within what it changes are marked indistinguishable from implementation noise")
    parser.add_argument("--score", default="all", choices=list(kld.SCORES),
                        help="scored positions of the logit metrics: all (default) or second-half of each window "
                        "(llama.cpp's perplexity)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per window of a text file (default 64)")
    parser.add_argument("--samples", type=int, default=None, help="at most this many samples (windows)")
    parser.add_argument("--layer-threshold", type=float, default=0.01,
                        help="cumulative rel_fro (worst over samples) whose first crossing is reported (default 0.01)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="sequences per forward (default all: a tensor scale spans the same rows as in the isolated run)")
    parser.add_argument("--prefix", default="", help="prepended to module names to give the plan's layer names")
    parser.add_argument("--force", action="store_true", help="replace a report already in DIR")
    parser.add_argument("-q", "--quiet", action="store_true")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_OK if e.code == 0 else EXIT_USAGE
    try:
        for text in args.require:  # a bad gate is refused before the model is loaded
            endtoend.parse_gate(text)
        for text in args.noise_floor:
            noise_mod.parse(text)
        model, tokenizer = load_model(args.model)
        result = verify(model, args.plan, args.inputs, tokenizer=tokenizer, out=args.output, require=args.require,
                        alpha=args.alpha, layer_threshold=args.layer_threshold, tokens=args.tokens, samples=args.samples,
                        batch_size=args.batch_size, reference=args.reference, prefix=args.prefix, force=args.force,
                        score=args.score, save_reference=args.save_reference, noise=args.noise_floor or None,
                        model_name=args.model, inputs_name=args.inputs, plan_name=args.plan,
                        command=" ".join(["python -m precis verify"] + list(argv if argv is not None else sys.argv[1:])))
    except (VerifyError, endtoend.GateError) as e:
        print(f"precis verify: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as e:  # PlanError and CaptureError are ValueErrors naming what is wrong
        print(f"precis verify: {e}", file=sys.stderr)
        return EXIT_USAGE
    if not args.quiet:
        print(summary(result.report))
    return result.exit_code()


def summary(report):
    e2e, v = report["end_to_end"], report["verify"]
    m = e2e["metrics"]
    if e2e["kind"] == "logits":
        line = (f"KL(ref||q) mean {_fmt(m['kl_mean'])} p99 {_fmt(m['kl_p99'])} max {_fmt(m['kl_max'])}; KL(q||ref) mean "
                f"{_fmt(m['rkl_mean'])}; top-1 {_fmt(m['top1_agree'])}; top-5 {_fmt(m['top5_overlap'])}")
        if "ce_delta" in m:
            line += f"; delta CE {_fmt(m['ce_delta'])}"
    else:
        line = (f"cosine mean {_fmt(m['cosine_mean'])} min {_fmt(m['cosine_min'])}; rel_fro mean {_fmt(m['rel_fro_mean'])} "
                f"max {_fmt(m['rel_fro_max'])}")
    out = [f"end to end ({e2e['kind']}, {e2e['samples']} samples x {v['tokens']} tokens): {line}"]
    fc = v["first_crossing"]
    out.append("first layer over cumulative rel_fro " + _fmt(v["layer_threshold"]["value"]) + ": "
               + (f"{fc['layer']} (depth {fc['depth']}, {_fmt(fc['rel_fro'])})" if fc else "none"))
    for g in e2e["gates"]:
        out.append(f"require {g['expression']}: {g['verdict']} ({g['detail']})")
    return "\n".join(out)


def load_model(path):
    """A transformers checkpoint directory: a causal LM (config architectures *ForCausalLM /
    *LMHeadModel) with its head, else the base model; its tokenizer when it has one."""
    try:
        import transformers
    except ImportError as e:
        raise VerifyError(f"--model: loading a checkpoint needs transformers ({e})") from None
    if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, "config.json")):
        raise VerifyError(f"--model {path}: expected a transformers checkpoint directory (with config.json)")
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    arch = " ".join(config.get("architectures") or [])
    causal = "ForCausalLM" in arch or "LMHeadModel" in arch
    cls = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    model = cls.from_pretrained(path, dtype="float32").eval()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    except Exception:  # a checkpoint without tokenizer files: token ids only
        tokenizer = None
    return model, tokenizer
