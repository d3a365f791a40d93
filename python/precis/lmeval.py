"""A bridge to lm-evaluation-harness (DESIGN §22, docs/verify.md "lm-evaluation-harness"): its tasks
run on the model with a plan's GEMMs emulated exactly (precis.torch.emulate), through its Python
API: lm_eval.simple_evaluate with an HFLM wrapping the already loaded model, inside the emulate
block, so every forward lm-eval makes runs the plan. batch_size 1 by default: a batch of padded
requests would put padding rows into a tensor-scaled GEMM (the emulated GEMM's tensor scale spans
the call's rows).

    from precis import lmeval
    res = lmeval.compare(model, tokenizer, ["my_task"], plan="plan.json", include_path="my_tasks/")
    res["tasks"]["my_task"]["acc"]  -> {"reference": 0.61, "emulated": 0.60, "delta": -0.01}

`python -m precis lm-eval --model DIR --plan PLAN --tasks T1,T2 [--include-path DIR] [--limit N] -o DIR`
writes lm_eval.json (both runs' results) and lm_eval.md.
"""
import contextlib
import json
import os


def evaluate(model, tokenizer, tasks, *, plan=None, include_path=None, batch_size=1, limit=None, prefix="", target=None,
             num_fewshot=None, log_samples=False, **kwargs):
    """lm_eval.simple_evaluate of `tasks` on the model, with `plan` emulated (None: as it is).
    Returns lm-eval's results dict."""
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError as e:
        raise ImportError(f"the lm-evaluation-harness bridge needs lm_eval (pip install lm-eval): {e}") from None
    from . import torch as pt

    model.eval()
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, device=str(next(model.parameters()).device))
    manager = TaskManager(include_path=include_path) if include_path else TaskManager()
    block = pt.emulate(model, plan, prefix=prefix, target=target) if plan is not None else contextlib.nullcontext()
    with block:
        return lm_eval.simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager, limit=limit,
                                       num_fewshot=num_fewshot, log_samples=log_samples, **kwargs)


def _numbers(results):
    out = {}
    for task, metrics in results["results"].items():
        out[task] = {k.split(",")[0] if "stderr" not in k else k.split(",")[0]: v for k, v in metrics.items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return out


def compare(model, tokenizer, tasks, plan, **kwargs):
    """The tasks on the reference model and with the plan emulated: per task and metric, both values
    and the difference (emulated minus reference)."""
    ref = evaluate(model, tokenizer, tasks, plan=None, **kwargs)
    emu = evaluate(model, tokenizer, tasks, plan=plan, **kwargs)
    a, b = _numbers(ref), _numbers(emu)
    table = {}
    for task in a:
        table[task] = {m: {"reference": a[task][m], "emulated": b.get(task, {}).get(m),
                           "delta": None if b.get(task, {}).get(m) is None else b[task][m] - a[task][m]}
                       for m in a[task]}
    return {"tasks": table, "reference": ref["results"], "emulated": emu["results"]}


def render_markdown(res, plan=None):
    lines = ["# lm-evaluation-harness, reference against the plan emulated", ""]
    if plan:
        lines += [f"Plan `{plan}`.", ""]
    lines += ["| task | metric | reference | emulated | Δ |", "|---|---|---|---|---|"]
    for task, metrics in res["tasks"].items():
        for m, v in metrics.items():
            if m.endswith("_stderr"):
                continue
            fmt = lambda x: "–" if x is None else f"{x:.4f}"  # noqa: E731
            lines.append(f"| {task} | {m} | {fmt(v['reference'])} | {fmt(v['emulated'])} | {fmt(v['delta'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    import argparse
    import sys

    from . import verify as _verify

    parser = argparse.ArgumentParser(prog="python -m precis lm-eval", description="lm-evaluation-harness tasks on the "
                                     "reference model and with a plan emulated.")
    parser.add_argument("--model", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--tasks", required=True, help="comma-separated lm-eval task names")
    parser.add_argument("--include-path", default=None, help="a directory of the user's own task YAML files")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--num-fewshot", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("-q", "--quiet", action="store_true")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    try:
        model, tokenizer = _verify.load_model(args.model)
        res = compare(model, tokenizer, args.tasks.split(","), args.plan, include_path=args.include_path,
                      limit=args.limit, num_fewshot=args.num_fewshot, batch_size=args.batch_size)
    except ValueError as e:
        print(f"precis lm-eval: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.output, exist_ok=True)
    _verify._write(os.path.join(args.output, "lm_eval.json"), json.dumps(res, indent=1, default=str) + "\n")
    _verify._write(os.path.join(args.output, "lm_eval.md"), render_markdown(res, args.plan))
    if not args.quiet:
        print(render_markdown(res, args.plan))
    return 0
