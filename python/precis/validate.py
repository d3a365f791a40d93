"""plan --validate: does the plan's predicted loss change rank plans as the model does? (DESIGN §17)

`python -m precis plan REPORT.json --validate --model DIR --inputs FILE [plan options] -o DIR` makes
the plan (the C `precis plan`, the same code and files), then a sweep of plans at several budgets,
each with the plan's objective and, for comparison, with rel_fro (--validate-against), and runs
verify (reference vs emulated model on the held-out inputs) on every distinct plan. Each plan is a
point: predicted = the objective summed over its layers (the chosen plan's cells, so that every
point is predicted by the same objective; for a plan made with that objective it is the plan's own
predicted_loss_change), measured = verify's end-to-end quantity paired with the objective:

  logits (causal LM)   fisher, rel_fro -> kl_mean (KL(ref||q) per token, the loss change a Fisher
                       term estimates to second order); taylor -> ce_delta (the first-order change of
                       the cross-entropy of the next tokens)
  hidden (embeddings)  every objective -> rel_fro_mean (||q - r||_F / ||r||_F of the output, mean over
                       samples; the Fisher term of output_projection_loss gradients estimates half
                       its square)

Spearman's rank correlation (ties: mean ranks) and Pearson's over the points, and per budget the
objective's plan beside the rel_fro plan at the same budget (effective bits when the budget is
bits), are written into plan.json ("validation"), plan.md and plan.html (a scatter plot).
"""
import argparse
import html
import json
import math
import os
import shutil
import sys

import numpy as np

from . import reference as _reference
from . import verify as _verify

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_GATE = 0, 1, 2, 3

MEASURES = {("logits", "fisher"): "kl_mean", ("logits", "rel_fro"): "kl_mean", ("logits", "taylor"): "ce_delta",
            ("hidden", "fisher"): "rel_fro_mean", ("hidden", "rel_fro"): "rel_fro_mean",
            ("hidden", "taylor"): "rel_fro_mean"}


class ValidateError(ValueError):
    """Bad input to plan --validate: the message names the option and what was expected. code: the
    exit status (2 for usage and input; 3 when the plan is infeasible; a failed plan's own code)."""

    def __init__(self, message, code=EXIT_USAGE):
        super().__init__(message)
        self.code = code


def fit_map(xs, ys):
    """The map from predicted to measured over the validated plans: a least-squares line in
    log-log, log10 m = a + b log10 p, over points where both are positive. Its error is the RMS of
    the log10 residuals, also given as a factor 10^rms (the typical ratio measured/fitted).
    None with fewer than 2 such points."""
    pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None and x > 0 and y > 0]
    if len(pts) < 2 or len({x for x, _ in pts}) < 2:
        return None
    lx = np.log10([x for x, _ in pts])
    ly = np.log10([y for _, y in pts])
    b, a = np.polyfit(lx, ly, 1)
    resid = ly - (a + b * lx)
    rms = float(np.sqrt(np.mean(resid ** 2)))
    return {"form": "log10(measured) = a + b log10(predicted)", "a": float(a), "b": float(b), "points": len(pts),
            "rms_log10_residual": rms, "factor": 10.0 ** rms, "max_factor": float(10.0 ** np.max(np.abs(resid)))}


def fitted(fit, predicted):
    return None if fit is None or predicted is None or predicted <= 0 else 10.0 ** (fit["a"] + fit["b"] * math.log10(predicted))


def measured_budget(points, fit, limit, measure):
    """A budget asked in the measured metric (e.g. kl_mean <= limit): the validated plan with the
    fewest effective bits (else the lowest cost) whose measured value meets it, and the predicted
    objective at which the fitted map reaches the limit (for plans outside the sweep)."""
    ok = [p for p in points if p.get("measured") is not None and p["measured"] <= limit]
    key = lambda p: (p["effective_bits"] if p.get("effective_bits") is not None else math.inf,  # noqa: E731
                     p["cost"] if p.get("cost") is not None else math.inf, p["measured"])
    best = min(ok, key=key) if ok else None
    out = {"measure": measure, "limit": limit, "met": best is not None,
           "predicted_at_limit": (10.0 ** ((math.log10(limit) - fit["a"]) / fit["b"])
                                  if fit and fit["b"] != 0 and limit > 0 else None)}
    if best is not None:
        out.update({"plan": best["plan"], "label": best["label"], "effective_bits": best["effective_bits"],
                    "cost": best["cost"], "measured": best["measured"], "predicted": best["predicted"]})
    else:
        lowest = min((p for p in points if p.get("measured") is not None), key=lambda p: p["measured"], default=None)
        out["lowest_measured"] = None if lowest is None else {"label": lowest["label"], "measured": lowest["measured"]}
    return out


def _round_up(v, digits=6):
    """v rounded up to `digits` significant figures (a budget never below the cost it came from)."""
    if v <= 0 or not math.isfinite(v):
        return v
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(v)))
    return math.ceil(v * scale * (1 - 1e-12)) / scale


def parse_budgets(text):
    """'bits=5,6,7.5' -> ('bits', [5.0, 6.0, 7.5])."""
    if "=" not in text:
        raise ValidateError(f"--validate-budgets {text!r}: expected KIND=V1,V2,... with KIND bits, memory or latency")
    kind, values = text.split("=", 1)
    if kind not in ("bits", "memory", "latency"):
        raise ValidateError(f"--validate-budgets {text!r}: {kind!r} is not bits, memory or latency")
    try:
        vals = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise ValidateError(f"--validate-budgets {text!r}: expected numbers after {kind}=") from None
    if len(vals) < 2 or any(not math.isfinite(v) or v <= 0 for v in vals):
        raise ValidateError(f"--validate-budgets {text!r}: expected at least two positive numbers")
    return kind, sorted(set(vals))


def ranks(x):
    """Ranks 1..n, ties given their mean rank."""
    x = np.asarray(x, np.float64)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        r[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return r


def pearson(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(x) < 3:
        return None
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float(np.sum(dx * dx) * np.sum(dy * dy)))
    return float(np.sum(dx * dy) / den) if den > 0 else None


def spearman(x, y):
    return pearson(ranks(x), ranks(y)) if len(x) >= 3 else None


def _strip(args, names_with_value, flags=()):
    """args without the options named (and their values, `--opt V` or `--opt=V`)."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        key = a.split("=", 1)[0]
        if key in names_with_value:
            i += 1 if "=" in a else 2
            continue
        if a in flags:
            i += 1
            continue
        out.append(a)
        i += 1
    return out


def _plan(args, out, quiet=False):
    """The C `precis plan` (in this process, through libprecis); returns (exit code, plan.json or None).
    quiet: its summary on stdout is dropped (the sweep's plans; errors on stderr still show)."""
    from . import main as precis_main

    saved = None
    if quiet:
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    try:
        code = precis_main(["plan"] + list(args) + ["-o", out, "--force"])
    finally:
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
    path = os.path.join(out, "plan.json")
    if code not in (0, 3) or not os.path.isfile(path):
        return code, None
    with open(path) as f:
        return code, json.load(f)


def _assignment(plan):
    return {e["layer"]: e["recipe"] for e in plan["layers"]}


def _effective_bits(plan):
    """Average effective bits per weight of a plan whose cost is bits (None otherwise): its total
    over the weights the budget counts (the bits budget's capacity / value, MoE weighting included)."""
    if plan.get("cost") != "bits" or plan.get("total_cost") is None:
        return None
    b = plan.get("budget") or {}
    if b.get("kind") == "bits" and b.get("capacity") and b.get("value"):
        return plan["total_cost"] * b["value"] / b["capacity"]
    weights = sum(e["weights"] for e in plan["layers"] if e.get("weights"))
    return plan["total_cost"] / weights if weights else None


def _predicted(cells, assignment):
    """The objective summed over layers, from the chosen plan's cells (None where a cell has none)."""
    total = 0.0
    for layer, recipe in assignment.items():
        cell = cells.get(layer, {}).get(recipe) if recipe else None
        if cell is None or cell.get("error") is None:
            return None
        total += cell["error"]
    return total


def _fmt(v):
    return _verify._fmt(v)


def validate(model, inputs, *, plan_args, out, tokenizer=None, budgets=None, against="rel_fro", measure=None, max_measured=None,
             tokens=64, samples=None, batch_size=None, prefix="", force=False, quiet=False, command=None):
    """Makes the plan of `precis plan REPORT plan_args -o out`, the sweep, and verify of each
    distinct plan; returns the validation dict also written into out/plan.json, plan.md, plan.html.
    budgets: (kind, [values]) or None (six bits budgets between the cheapest plan's effective bits
    and those of the least-error plan, geometrically spaced)."""
    plan_args = [os.fspath(a) for a in plan_args]
    if os.path.exists(os.path.join(out, "plan.json")) and not force:
        raise ValidateError(f"{out}/plan.json exists (--force replaces it)")
    code, chosen = _plan(plan_args, out)
    if chosen is None:
        raise ValidateError(f"precis plan failed (exit {code}); see its message above", code=code or EXIT_RUNTIME)
    if not chosen.get("feasible", True):
        raise ValidateError(f"the plan is not feasible ({chosen.get('why')}); nothing to validate", code=EXIT_GATE)
    objective = chosen["objective"]["kind"]
    key = "predicted_loss_change" if "predicted_loss_change" in chosen["objective"] else "total"
    cells = {e["layer"]: e.get("recipes", {}) for e in chosen["layers"]}
    sweep_args = _strip(plan_args, {"--budget", "--objective", "-o", "--output"}, flags=("--force",))
    work = os.path.join(out, "validate")
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)

    if budgets is None:
        _, top = _plan(sweep_args + ["--budget", "bits=64", "--objective", objective], os.path.join(work, "probe"), quiet=True)
        if top is None or not top.get("feasible"):
            raise ValidateError("--validate-budgets: could not derive budgets (a plan at bits=64 failed); give them")
        # The plan's costs are total bits; a bits budget is bits per weight (capacity = value x the
        # weights the budget counts), so the ends are converted as _effective_bits converts a plan's.
        per_weight = float(top["budget"]["value"]) / float(top["budget"]["capacity"])
        lo, hi = float(top["cheapest_total_cost"]) * per_weight, float(top["total_cost"]) * per_weight
        shutil.rmtree(os.path.join(work, "probe"), ignore_errors=True)
        if not hi > lo:
            raise ValidateError(f"--validate-budgets: every plan has {lo:.6g} effective bits; nothing to sweep")
        budgets = ("bits", sorted({_round_up(lo * (hi / lo) ** (i / 5)) for i in range(6)}))
    kind, values = budgets

    ids = _verify.load_inputs(inputs, tokenizer, tokens, samples)
    objectives = [objective] + ([against] if against and against != objective else [])
    verified = {}  # frozen assignment -> verify summary
    points = []
    # The reference is computed once for the whole sweep: the first verify saves its outputs, the
    # others read them (precis.reference), with the model's fingerprint computed once.
    reference_path = os.path.join(work, "reference.h5")
    fingerprint = _reference.model_fingerprint(model)

    def measure_of(assignment, label):
        frozen = tuple(sorted(assignment.items()))
        if frozen not in verified:
            if any(r is None for r in assignment.values()):
                return None
            have_reference = os.path.isfile(reference_path)
            res = _verify.verify(model, assignment, ids, isolated=False, batch_size=batch_size, prefix=prefix,
                                 out=os.path.join(work, label, "verify"), force=True, tokens=tokens,
                                 plan_name=os.path.join(label, "plan.json"), model_fingerprint=fingerprint,
                                 reference=reference_path if have_reference else "fp32",
                                 save_reference=None if have_reference else reference_path)
            e2e = res.end_to_end
            verified[frozen] = {"kind": e2e["kind"], "metrics": e2e["metrics"], "verify": os.path.join("validate", label, "verify")}
            if not quiet:
                print(f"precis plan --validate: {label}: " + ", ".join(f"{k} {_fmt(v)}" for k, v in e2e["metrics"].items()
                                                                        if k in ("kl_mean", "ce_delta", "rel_fro_mean", "cosine_mean")),
                      file=sys.stderr)
        return verified[frozen]

    def point(label, plan, obj, budget):
        assignment = _assignment(plan)
        got = measure_of(assignment, label)
        if got is None:
            return None
        p = {"label": label, "objective": obj, "budget": budget, "plan": os.path.join("validate", label, "plan.json")
             if label != "chosen" else "plan.json", "cost": plan.get("total_cost"), "cost_unit": plan.get("cost_unit"),
             "effective_bits": _effective_bits(plan),
             "predicted": _predicted(cells, assignment), "kind": got["kind"], "metrics": got["metrics"],
             "verify": got["verify"], "recipes": dict(sorted(_count(assignment).items()))}
        points.append(p)
        return p

    # The chosen plan first: its verify report goes beside the sweep's.
    chosen_point = point("chosen", chosen, objective, chosen.get("budget"))
    pairs = []
    for v in values:
        row = {"budget": {"kind": kind, "value": v}}
        for obj in objectives:
            label = f"{obj}-{kind}{v:g}"
            code, plan = _plan(sweep_args + ["--budget", f"{kind}={v:g}", "--objective", obj], os.path.join(work, label), quiet=True)
            if plan is None or not plan.get("feasible"):
                row[obj] = {"feasible": False, "why": None if plan is None else plan.get("why")}
                continue
            p = point(label, plan, obj, {"kind": kind, "value": v})
            row[obj] = {"feasible": True, "point": label} if p else {"feasible": False, "why": "a layer has no recipe"}
        pairs.append(row)

    if not points:
        raise ValidateError("no plan of the sweep could be verified (each has a layer with no passing recipe); "
                            "give --validate-budgets that leave every layer a recipe", code=EXIT_GATE)
    out_kind = points[0]["kind"]
    measure = measure or MEASURES[(out_kind, objective)]
    if measure not in points[0]["metrics"]:
        raise ValidateError(f"--validate-measure {measure}: not measured on {out_kind} outputs "
                            f"(there: {', '.join(points[0]['metrics'])})")
    for p in points:
        p["measured"] = p["metrics"].get(measure)
    # One point per distinct plan (the chosen plan often equals a sweep plan).
    distinct, seen = [], set()
    for p in points:
        sig = (p["predicted"], p["measured"], tuple(sorted(p["recipes"].items())))
        if sig not in seen and p["predicted"] is not None and p["measured"] is not None:
            seen.add(sig)
            distinct.append(p)
    xs, ys = [p["predicted"] for p in distinct], [p["measured"] for p in distinct]
    own = [p for p in distinct if p["objective"] == objective]
    comparison = []
    for row in pairs:
        a, b = row.get(objective, {}), row.get(against, {}) if against and against != objective else {}
        if a.get("feasible") and b.get("feasible"):
            pa = next(p for p in points if p["label"] == a["point"])
            pb = next(p for p in points if p["label"] == b["point"])
            if pa["measured"] is None or pb["measured"] is None:
                continue
            comparison.append({"budget": row["budget"], objective: {"cost": pa["cost"], "effective_bits": pa["effective_bits"], "predicted": pa["predicted"],
                                                                   "measured": pa["measured"]},
                               against: {"cost": pb["cost"], "effective_bits": pb["effective_bits"], "predicted": pb["predicted"], "measured": pb["measured"]},
                               "no_worse": pa["measured"] <= pb["measured"]})
    validation = {
        "objective": objective, "predicted": f"the {objective} objective summed over the plan's layers ({key} of a plan "
                                             f"made with it; the chosen plan's cells for any other)",
        "measure": measure, "output_kind": out_kind,
        "measured": f"verify's {measure} of the emulated model against the reference on the held-out inputs",
        "inputs": None if not isinstance(inputs, (str, os.PathLike)) else os.fspath(inputs),
        "samples": int(ids.shape[0]), "tokens": int(ids.shape[1]),
        "budgets": {"kind": kind, "values": values}, "against": against if against != objective else None,
        "points": points, "distinct_points": len(distinct),
        "spearman": spearman(xs, ys), "pearson": pearson(xs, ys),
        "spearman_own_objective": spearman([p["predicted"] for p in own], [p["measured"] for p in own]),
        "comparison": comparison, "command": command,
        "units": (f"predicted: the {objective} objective's units ({OBJECTIVE_UNITS.get(objective, '')}); it ranks plans "
                  f"and is not an estimate of {measure}: the fitted map below converts it"),
        "fit": fit_map(xs, ys),
    }
    for p in points:
        p["fitted"] = fitted(validation["fit"], p["predicted"])
    if max_measured is not None:
        validation["measured_budget"] = measured_budget(distinct, validation["fit"], max_measured, measure)
    _write_back(out, validation, chosen_point)
    return validation


OBJECTIVE_UNITS = {
    "fisher": "nats of the captured loss, ½ Σ (g ⊙ ΔC)² summed over layers: a second-order estimate of the loss change "
              "of each layer alone, added",
    "taylor": "nats of the captured loss, Σ g · ΔC summed over layers: a first-order estimate",
    "rel_fro": "dimensionless, relative Frobenius errors of the layers' outputs summed",
}


def _count(assignment):
    c = {}
    for r in assignment.values():
        c[str(r)] = c.get(str(r), 0) + 1
    return c


# ----------------------------------------------------------------------------------------------
# Writing into the plan's files


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _write_back(out, validation, chosen_point):
    path = os.path.join(out, "plan.json")
    with open(path) as f:
        plan = json.load(f)
    plan["validation"] = validation
    _write(path, json.dumps(plan, indent=1, allow_nan=False, default=_verify._json_default) + "\n")
    md_path = os.path.join(out, "plan.md")
    md = open(md_path, encoding="utf-8").read() if os.path.isfile(md_path) else ""
    _write(md_path, md.rstrip("\n") + "\n\n" + render_markdown(validation) + "\n")
    html_path = os.path.join(out, "plan.html")
    if os.path.isfile(html_path):
        page = open(html_path, encoding="utf-8").read()
        section = render_html(validation)
        at = page.rfind("</body>")
        page = page[:at] + section + page[at:] if at >= 0 else page + section
        _write(html_path, page)


def _bits_or_cost(side):
    return side["effective_bits"] if side.get("effective_bits") is not None else side["cost"]


def _corr_line(v):
    return (f"Spearman rank correlation {_fmt(v['spearman'])}, Pearson {_fmt(v['pearson'])} over {v['distinct_points']} "
            f"distinct plans" + (f" (Spearman over the {v['objective']} plans alone: {_fmt(v['spearman_own_objective'])})"
                                 if v.get("against") else ""))


def render_markdown(v):
    out = ["## Validation: predicted against measured", "",
           f"Predicted: {v['predicted']}. Measured: {v['measured']} ({v['samples']} samples of {v['tokens']} tokens"
           + (f", `{_verify._md(v['inputs'])}`" if v.get("inputs") else "") + ").", "", _corr_line(v) + ".", "",
           f"| plan | objective | budget | effective bits | cost | predicted | measured {v['measure']} | recipes |", "|---|---|---|---|---|---|---|---|"]
    for p in v["points"]:
        b = p["budget"]
        budget = f"{b['kind']}={_fmt(b['value'])}" if b else "–"
        out.append(f"| {_verify._md(p['label'])} | {p['objective']} | {budget} | {_fmt(p['effective_bits'])} | {_fmt(p['cost'])} | "
                   f"{_fmt(p['predicted'])} | {_fmt(p['measured'])} | "
                   + ", ".join(f"{_verify._md(r)} ×{n}" for r, n in p["recipes"].items()) + " |")
    out += ["", f"Units: {v['units']}."]
    f = v.get("fit")
    if f:
        out += ["", f"Fitted map over {f['points']} plans: log10({v['measure']}) = {f['a']:.4g} + {f['b']:.4g} · "
                f"log10(predicted); error: RMS of the log10 residuals {f['rms_log10_residual']:.3g} (a typical factor "
                f"{f['factor']:.3g}, at most {f['max_factor']:.3g})."]
    mb = v.get("measured_budget")
    if mb:
        if mb["met"]:
            out += ["", f"Budget asked in measured {mb['measure']} ≤ {_fmt(mb['limit'])}: **{_verify._md(mb['label'])}** "
                    f"(`{_verify._md(mb['plan'])}`), {_fmt(mb['effective_bits'])} effective bits, measured {_fmt(mb['measured'])}."]
        else:
            low = mb.get("lowest_measured") or {}
            out += ["", f"Budget asked in measured {mb['measure']} ≤ {_fmt(mb['limit'])}: **no validated plan meets it** "
                    f"(lowest: {_verify._md(low.get('label'))}, {_fmt(low.get('measured'))})."]
        if mb.get("predicted_at_limit") is not None:
            out[-1] += f" The fitted map reaches it at a predicted {_fmt(mb['predicted_at_limit'])}."
    if v["comparison"]:
        o, a = v["objective"], v["against"]
        out += ["", f"At equal budgets, the {o} plan against the {a} plan (measured {v['measure']}; lower is better):", "",
                f"| budget | {o} effective bits | {o} measured | {a} effective bits | {a} measured | {o} no worse |", "|---|---|---|---|---|---|"]
        for c in v["comparison"]:
            out.append(f"| {c['budget']['kind']}={_fmt(c['budget']['value'])} | {_fmt(_bits_or_cost(c[o]))} | {_fmt(c[o]['measured'])} | "
                       f"{_fmt(_bits_or_cost(c[a]))} | {_fmt(c[a]['measured'])} | {'yes' if c['no_worse'] else '**no**'} |")
    return "\n".join(out)


def scatter_svg(v):
    """Predicted (x) against measured (y), log-log where every value is positive."""
    pts = [p for p in v["points"] if p["predicted"] is not None and p["measured"] is not None]
    if not pts:
        return ""
    xs, ys = [p["predicted"] for p in pts], [p["measured"] for p in pts]
    logx, logy = all(x > 0 for x in xs), all(y > 0 for y in ys)

    def axis(vals, log):
        t = [math.log10(x) for x in vals] if log else list(vals)
        lo, hi = min(t), max(t)
        if hi <= lo:
            lo, hi = lo - 1, hi + 1
        pad = (hi - lo) * 0.08
        return lo - pad, hi + pad

    (x0, x1), (y0, y1) = axis(xs, logx), axis(ys, logy)
    w, h, left, right, top, bottom = 620, 380, 80, 20, 20, 50

    def sx(x):
        t = math.log10(x) if logx else x
        return left + (w - left - right) * (t - x0) / (x1 - x0)

    def sy(y):
        t = math.log10(y) if logy else y
        return top + (h - top - bottom) * (y1 - t) / (y1 - y0)

    esc = html.escape
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
         f'aria-label="predicted against measured loss change">',
         f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" fill="none" stroke="#ccc"/>']
    for i in range(5):
        fx, fy = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
        vx, vy = (10 ** fx if logx else fx), (10 ** fy if logy else fy)
        px, py = left + (w - left - right) * i / 4, top + (h - top - bottom) * (1 - i / 4)
        s.append(f'<text x="{px:.1f}" y="{h - bottom + 16}" text-anchor="middle" font-size="11">{esc(f"{vx:.3g}")}</text>')
        s.append(f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end" font-size="11">{esc(f"{vy:.3g}")}</text>')
    colours = {v["objective"]: "#1f5fa8"}
    if v.get("against"):
        colours[v["against"]] = "#c06000"
    for p in pts:
        c = colours.get(p["objective"], "#555")
        shape = (f'<rect x="{sx(p["predicted"]) - 5:.1f}" y="{sy(p["measured"]) - 5:.1f}" width="10" height="10" fill="none" '
                 f'stroke="#000" stroke-width="2">' if p["label"] == "chosen" else
                 f'<circle cx="{sx(p["predicted"]):.1f}" cy="{sy(p["measured"]):.1f}" r="4" fill="{c}">')
        s.append(shape + f'<title>{esc(p["label"])}: predicted {esc(_fmt(p["predicted"]))}, measured '
                 f'{esc(_fmt(p["measured"]))}</title>' + ("</rect>" if p["label"] == "chosen" else "</circle>"))
    s.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle" font-size="12">predicted '
             f'({esc(v["objective"])} summed over layers{", log" if logx else ""})</text>')
    s.append(f'<text x="14" y="{(top + h - bottom) / 2}" text-anchor="middle" font-size="12" transform="rotate(-90 14 '
             f'{(top + h - bottom) / 2})">measured {esc(v["measure"])}{", log" if logy else ""}</text>')
    legend = [(f'{o} plans', c) for o, c in colours.items()]
    for i, (t, c) in enumerate(legend):
        s.append(f'<circle cx="{left + 12}" cy="{top + 14 + 16 * i}" r="4" fill="{c}"/><text x="{left + 22}" '
                 f'y="{top + 18 + 16 * i}" font-size="11">{esc(t)}</text>')
    s.append(f'<rect x="{left + 7}" y="{top + 9 + 16 * len(legend)}" width="10" height="10" fill="none" stroke="#000" '
             f'stroke-width="2"/><text x="{left + 22}" y="{top + 18 + 16 * len(legend)}" font-size="11">the chosen plan</text>')
    s.append("</svg>")
    return "".join(s)


def render_html(v):
    esc = html.escape
    parts = ["<h2>Validation: predicted against measured</h2>",
             f"<p>Predicted: {esc(v['predicted'])}. Measured: {esc(v['measured'])} ({v['samples']} samples of {v['tokens']} "
             f"tokens).</p>", f"<p><b>{esc(_corr_line(v))}</b>.</p>", scatter_svg(v),
             "<table><thead><tr><th>plan</th><th>objective</th><th>budget</th><th>effective bits</th><th>cost</th><th>predicted</th>"
             f"<th>measured {esc(v['measure'])}</th></tr></thead><tbody>"]
    for p in v["points"]:
        b = p["budget"]
        parts.append(f"<tr><td>{esc(p['label'])}</td><td>{esc(p['objective'])}</td>"
                     f"<td>{esc(b['kind'] + '=' + _fmt(b['value']) if b else '–')}</td><td>{esc(_fmt(p['effective_bits']))}</td>"
                     f"<td>{esc(_fmt(p['cost']))}</td>"
                     f"<td>{esc(_fmt(p['predicted']))}</td><td>{esc(_fmt(p['measured']))}</td></tr>")
    parts.append("</tbody></table>")
    if v["comparison"]:
        o, a = v["objective"], v["against"]
        parts.append(f"<p>At equal budgets, the {esc(o)} plan against the {esc(a)} plan (measured {esc(v['measure'])}, "
                     "lower is better):</p><table><thead><tr><th>budget</th>"
                     f"<th>{esc(o)} effective bits</th><th>{esc(o)} measured</th><th>{esc(a)} effective bits</th><th>{esc(a)} measured</th>"
                     f"<th>{esc(o)} no worse</th></tr></thead><tbody>")
        for c in v["comparison"]:
            parts.append(f"<tr><td>{esc(c['budget']['kind'])}={esc(_fmt(c['budget']['value']))}</td>"
                         f"<td>{esc(_fmt(_bits_or_cost(c[o])))}</td><td>{esc(_fmt(c[o]['measured']))}</td>"
                         f"<td>{esc(_fmt(_bits_or_cost(c[a])))}</td><td>{esc(_fmt(c[a]['measured']))}</td>"
                         f"<td>{'yes' if c['no_worse'] else '<b>no</b>'}</td></tr>")
        parts.append("</tbody></table>")
    return "".join(parts)


# ----------------------------------------------------------------------------------------------
# python -m precis plan --validate


USAGE = """usage: python -m precis plan REPORT.json --validate --model DIR --inputs FILE [plan options] -o DIR

Makes the plan as `precis plan REPORT.json [plan options] -o DIR` does, then plans at each of
--validate-budgets with the plan's objective and with --validate-against, runs verify (the reference
against the emulated model, on --inputs, which the report's dataset was not made from) on every
distinct plan, and writes the predicted against the measured loss change, their Spearman and Pearson
correlations and the comparison at equal budgets into plan.json ("validation"), plan.md and plan.html.
Every other option is precis plan's (precis plan --help).
"""


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m precis plan --validate", description=USAGE.split("\n\n", 1)[1],
                                     usage=USAGE.split("\n")[0][len("usage: "):],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--validate", action="store_true", required=True)
    parser.add_argument("--model", required=True, help="a transformers checkpoint directory (the model the report's layers are of)")
    parser.add_argument("--inputs", required=True, help="held-out inputs: a text file or token ids [samples, tokens] in .npy")
    parser.add_argument("-o", "--output", required=True, help="the plan's directory")
    parser.add_argument("--validate-budgets", default=None, metavar="KIND=V1,V2,...",
                        help="the sweep's budgets (default: six bits budgets from the cheapest plan to the least-error one)")
    parser.add_argument("--validate-against", default="rel_fro", help="the objective planned beside at each budget "
                        "(fisher, taylor, rel_fro; none: no comparison; default rel_fro)")
    parser.add_argument("--validate-measure", default=None, help="verify's metric paired with the prediction (default: "
                        "kl_mean for a causal LM, ce_delta with taylor, rel_fro_mean for hidden states)")
    parser.add_argument("--validate-max", type=float, default=None, metavar="LIMIT",
                        help="a budget asked in the measured metric (kl_mean for a causal LM): the validated plan with "
                        "the fewest effective bits whose measured value is at most LIMIT")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("-q", "--quiet", action="store_true")
    if any(a in ("-h", "--help") for a in argv):
        parser.print_help()
        return EXIT_OK
    try:
        args, plan_args = parser.parse_known_args(argv)
    except SystemExit as e:
        return EXIT_OK if e.code == 0 else EXIT_USAGE
    try:
        against = None if args.validate_against == "none" else args.validate_against
        if against not in (None, "fisher", "taylor", "rel_fro"):
            raise ValidateError(f"--validate-against {args.validate_against}: expected fisher, taylor, rel_fro or none")
        budgets = parse_budgets(args.validate_budgets) if args.validate_budgets else None
        if any(a.split("=", 1)[0] in ("--kv-candidates", "--objective-map") for a in plan_args):
            # verify measures the weights' plans here; a KV decision would change the budget each
            # plan's weights get without the cache being in the measurement (docs/kv-cache.md).
            raise ValidateError("--kv-candidates: plan --validate fits the weights' map (the one --objective-map "
                                "reads); validate without --kv-candidates, then plan with them")
        model, tokenizer = _verify.load_model(args.model)
        v = validate(model, args.inputs, plan_args=plan_args, out=args.output, tokenizer=tokenizer, budgets=budgets,
                     against=against, measure=args.validate_measure, max_measured=args.validate_max, tokens=args.tokens, samples=args.samples,
                     batch_size=args.batch_size, prefix=args.prefix, force=args.force, quiet=args.quiet,
                     command=" ".join(["python -m precis plan"] + argv))
    except ValueError as e:  # ValidateError, VerifyError, PlanError: each names what is wrong
        print(f"precis plan --validate: {e}", file=sys.stderr)
        return getattr(e, "code", EXIT_USAGE)
    if not args.quiet:
        print(_corr_line(v))
        for c in v["comparison"]:
            o, a = v["objective"], v["against"]
            print(f"{c['budget']['kind']}={c['budget']['value']:g}: measured {v['measure']} {o} {_fmt(c[o]['measured'])} "
                  f"({_fmt(_bits_or_cost(c[o]))}), {a} {_fmt(c[a]['measured'])} ({_fmt(_bits_or_cost(c[a]))})")
    return EXIT_OK
