"""Task-level acceptance (DESIGN §22, docs/verify.md "Task-level acceptance"): the user's own task
file run under the reference model and with the plan emulated, and the paired comparison.

Task file: JSON Lines, one item per line (blank lines and lines starting with # skipped):
  {"id": "q1", "type": "multiple_choice", "context": "The capital of France is", "choices": [" Paris", " Rome"],
   "answer": 0}
      scored by log-likelihood: the choice whose tokens have the largest summed log-probability
      given the context (lm-evaluation-harness's `acc`); the context is tokenized with the
      tokenizer's special tokens, each choice without. Token ids instead of text:
      "context_ids": [...], "choices_ids": [[...], ...].
  {"id": "g1", "type": "generate", "prompt": "2 + 2 =", "target": "4", "max_new_tokens": 8}
      greedy decoding of at most max_new_tokens (default 16) new tokens; correct when the text
      generated, cut at its first newline and stripped of surrounding whitespace, equals the
      target stripped. Token ids instead: "prompt_ids": [...], "target_ids": [...] (correct when
      the first len(target_ids) generated ids are those).

Paired figures over the n items (ref = the reference model, q = the plan emulated):
  acc_ref, acc_q        fraction correct
  flips                 items correct under ref only (lost) and under q only (gained), by id
  mcnemar_p             McNemar's exact test of the discordant pairs: two-sided binomial test of
                        lost against lost + gained at 1/2, p = min(1, 2 P[X <= min(lost, gained)])
                        (1 when there is no discordant pair)
  recovery              acc_q / acc_ref, with a percentile-bootstrap interval over items (paired:
                        the same resampled items for both; 2000 resamples, seed 0)
Gates: --require recovery>=0.95 (also acc_q, acc_delta = acc_q - acc_ref, lost), judged as
verify's: pass when the unfavourable one-sided bound at alpha meets the limit, fail when even the
favourable one misses it, undecided between.
"""
import json
import math
import os
import re

import numpy as np

METRICS = ("recovery", "acc_q", "acc_ref", "acc_delta", "lost")
HIGHER_IS_BETTER = {"recovery", "acc_q", "acc_ref", "acc_delta"}


class TaskError(ValueError):
    """A task file or item that cannot be run: the message names the file, line and field."""


def load(path):
    if not os.path.isfile(path):
        raise TaskError(f"--tasks {path}: no such file")
    items = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                raise TaskError(f"{path}:{lineno}: not JSON ({e.msg})") from None
            items.append(_checked(item, f"{path}:{lineno}"))
    if not items:
        raise TaskError(f"--tasks {path}: no items")
    for i, item in enumerate(items):
        item.setdefault("id", str(i))
    return items


def _checked(item, where):
    if not isinstance(item, dict):
        raise TaskError(f"{where}: expected a JSON object")
    kind = item.get("type")
    if kind == "multiple_choice":
        text = "context" in item and "choices" in item
        ids = "context_ids" in item and "choices_ids" in item
        if not (text or ids):
            raise TaskError(f"{where}: a multiple_choice item needs context and choices (or context_ids and choices_ids)")
        n = len(item["choices"] if text else item["choices_ids"])
        if n < 2:
            raise TaskError(f"{where}: choices: expected at least 2, found {n}")
        if not isinstance(item.get("answer"), int) or not 0 <= item["answer"] < n:
            raise TaskError(f"{where}: answer: expected the index of the correct choice (0..{n - 1}), found "
                            f"{item.get('answer')!r}")
    elif kind == "generate":
        if not (("prompt" in item and "target" in item) or ("prompt_ids" in item and "target_ids" in item)):
            raise TaskError(f"{where}: a generate item needs prompt and target (or prompt_ids and target_ids)")
    else:
        raise TaskError(f"{where}: type: expected multiple_choice or generate, found {kind!r}")
    return dict(item)


def _ids(tokenizer, text, special, where):
    if tokenizer is None:
        raise TaskError(f"{where}: text needs the model's tokenizer (none found); give token ids instead")
    return list(tokenizer(text, add_special_tokens=special)["input_ids"])


def _loglikelihood(model, context, continuation):
    import torch

    ids = torch.tensor([context + continuation], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].double()
    lp = torch.log_softmax(logits, -1)
    start = len(context)
    return float(sum(lp[start - 1 + j, t] for j, t in enumerate(continuation)))


def _generate(model, prompt, max_new_tokens, eos):
    import torch

    ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=max_new_tokens, pad_token_id=eos if eos is not None else 0)
    return out[0, len(prompt):].tolist()


def answers(model, items, tokenizer=None):
    """Each item's answer and whether it is correct, under the model as it runs now."""
    out = []
    eos = getattr(tokenizer, "eos_token_id", None) if tokenizer is not None else None
    for item in items:
        where = f"item {item['id']}"
        if item["type"] == "multiple_choice":
            ctx = item["context_ids"] if "context_ids" in item else _ids(tokenizer, item["context"], True, where)
            choices = item["choices_ids"] if "choices_ids" in item else [_ids(tokenizer, c, False, where)
                                                                         for c in item["choices"]]
            if not ctx or any(not c for c in choices):
                raise TaskError(f"{where}: an empty context or choice after tokenization")
            ll = [_loglikelihood(model, list(ctx), list(c)) for c in choices]
            pick = int(np.argmax(ll))
            out.append({"id": item["id"], "answer": pick, "correct": pick == item["answer"], "loglikelihoods": ll})
        else:
            prompt = item["prompt_ids"] if "prompt_ids" in item else _ids(tokenizer, item["prompt"], True, where)
            new = _generate(model, list(prompt), int(item.get("max_new_tokens", 16)), eos)
            if "target_ids" in item:
                want = list(item["target_ids"])
                correct, text = new[:len(want)] == want, None
            else:
                text = tokenizer.decode(new, skip_special_tokens=True)
                correct = text.split("\n", 1)[0].strip() == str(item["target"]).strip()
            out.append({"id": item["id"], "generated": text if text is not None else new, "correct": correct})
    return out


def mcnemar_exact(lost, gained):
    """Two-sided exact McNemar p: min(1, 2 P[Binomial(lost + gained, 1/2) <= min(lost, gained)])."""
    n = lost + gained
    if n == 0:
        return 1.0
    k = min(lost, gained)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def _figures(r, q):
    acc_r, acc_q = float(np.mean(r)), float(np.mean(q))
    return {"acc_ref": acc_r, "acc_q": acc_q, "acc_delta": acc_q - acc_r,
            "recovery": acc_q / acc_r if acc_r > 0 else (1.0 if acc_q == 0 else math.inf),
            "lost": int(np.sum(r & ~q))}


_GATE = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$")


def parse_gate(text):
    m = _GATE.match(text)
    if not m or m.group(1) not in METRICS:
        raise TaskError(f"--require {text!r}: expected METRIC OP NUMBER with METRIC one of {', '.join(METRICS)}")
    return m.group(1), m.group(2), float(m.group(3))


def compare(ref_answers, q_answers, requires=(), alpha=0.05, resamples=2000, seed=0):
    """The paired figures of two runs of the same items, and the gates."""
    r = np.array([a["correct"] for a in ref_answers], bool)
    q = np.array([a["correct"] for a in q_answers], bool)
    n = len(r)
    point = _figures(r, q)
    lost = [a["id"] for a, b in zip(ref_answers, q_answers) if a["correct"] and not b["correct"]]
    gained = [a["id"] for a, b in zip(ref_answers, q_answers) if b["correct"] and not a["correct"]]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n, size=(resamples, n)) if n >= 2 else None
    boot = [_figures(r[i], q[i]) for i in draws] if draws is not None else None
    interval = None
    if boot is not None:
        rec = np.array([b["recovery"] for b in boot])
        rec = rec[np.isfinite(rec)]
        if len(rec):
            interval = [float(np.quantile(rec, alpha / 2)), float(np.quantile(rec, 1 - alpha / 2))]
    out = {"items": n, **point, "flips": {"lost": lost, "gained": gained},
           "mcnemar_p": mcnemar_exact(len(lost), len(gained)), "recovery_interval": interval,
           "interval": f"{1 - alpha:.0%} percentile bootstrap over items (paired), {resamples} resamples, seed 0",
           "alpha": alpha, "gates": []}
    for text in requires:
        name, op, limit = parse_gate(text) if isinstance(text, str) else text
        value = point[name]
        g = {"expression": f"{name}{op}{limit:g}", "metric": name, "op": op, "limit": limit, "value": value}
        if boot is None:
            g.update(verdict="undecided", detail=f"too few items to decide ({n})")
        else:
            dist = np.array([b[name] for b in boot], np.float64)
            lo, hi = float(np.quantile(dist, alpha)), float(np.quantile(dist, 1 - alpha))
            bound, favourable = (hi, lo) if op in ("<=", "<") else (lo, hi)
            meets = lambda v: {"<=": v <= limit, "<": v < limit, ">=": v >= limit, ">": v > limit}[op]  # noqa: E731
            if meets(bound):
                g.update(verdict="pass", detail=f"{1 - alpha:.0%} bound {bound:.6g} {op} {limit:g}")
            elif not meets(favourable):
                g.update(verdict="fail", detail=f"even the favourable {1 - alpha:.0%} bound {favourable:.6g} misses")
            else:
                g.update(verdict="undecided", detail=f"too few items to decide: bounds [{lo:.6g}, {hi:.6g}] straddle "
                         f"{limit:g} ({n} items)")
            g["bound"] = bound
        out["gates"].append(g)
    out["verdict"] = None if not out["gates"] else ("pass" if all(g["verdict"] == "pass" for g in out["gates"]) else
                                                    "fail" if any(g["verdict"] == "fail" for g in out["gates"]) else
                                                    "undecided")
    return out


def run(model, plan, items, *, tokenizer=None, requires=(), alpha=0.05, prefix="", target=None):
    """The items under the reference model and with the plan emulated; returns the comparison
    with each run's answers."""
    from . import torch as pt

    model.eval()
    ref = answers(model, items, tokenizer)
    with pt.emulate(model, plan, prefix=prefix, target=target):
        q = answers(model, items, tokenizer)
    out = compare(ref, q, requires, alpha)
    out["answers"] = {"reference": ref, "emulated": q}
    return out


def render_markdown(res, title="precis tasks"):
    iv = res["recovery_interval"]
    lines = [f"# {title}", "", f"{res['items']} items: accuracy reference {res['acc_ref']:.4f}, emulated {res['acc_q']:.4f} "
             f"(Δ {res['acc_delta']:+.4f}); recovery {res['recovery']:.4f}"
             + (f" [{iv[0]:.4f}, {iv[1]:.4f}] ({res['interval']})" if iv else "") + ".", "",
             f"Flips: {len(res['flips']['lost'])} lost ({', '.join(map(str, res['flips']['lost'])) or 'none'}), "
             f"{len(res['flips']['gained'])} gained ({', '.join(map(str, res['flips']['gained'])) or 'none'}); "
             f"McNemar's exact p = {res['mcnemar_p']:.4g}."]
    if res["gates"]:
        lines += ["", "| requirement | value | bound | verdict |", "|---|---|---|---|"]
        for g in res["gates"]:
            lines.append(f"| `{g['expression']}` | {g['value']:.6g} | {g.get('bound', float('nan')):.6g} | {g['verdict']} |")
        lines += ["", f"Verdict: **{res['verdict']}**."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    import argparse
    import sys

    from . import verify as _verify

    parser = argparse.ArgumentParser(prog="python -m precis tasks", description="Task-level acceptance: the user's "
                                     "task file (JSONL) under the reference model and with the plan emulated.")
    parser.add_argument("--model", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--tasks", required=True, help="JSON Lines of multiple_choice and generate items")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--require", action="append", default=[], help="recovery>=0.95, acc_q>=0.5, lost<=2, ...")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--prefix", default="")
    parser.add_argument("-q", "--quiet", action="store_true")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    try:
        for t in args.require:
            parse_gate(t)
        items = load(args.tasks)
        model, tokenizer = _verify.load_model(args.model)
        res = run(model, args.plan, items, tokenizer=tokenizer, requires=args.require, alpha=args.alpha, prefix=args.prefix)
    except ValueError as e:
        print(f"precis tasks: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.output, exist_ok=True)
    res["tasks"], res["plan"], res["model"] = args.tasks, args.plan, args.model
    _verify._write(os.path.join(args.output, "tasks.json"), json.dumps(res, indent=1, default=_verify._json_default) + "\n")
    _verify._write(os.path.join(args.output, "tasks.md"), render_markdown(res))
    if not args.quiet:
        print(render_markdown(res))
    return 0 if res["verdict"] in (None, "pass") else 3
