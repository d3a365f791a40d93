"""python -m precis ...: the precis command line (the same C code, the same exit codes), and the
commands only the Python package has (they need torch and transformers)."""
import os
import sys

from . import main

# (how it is invoked, what it does): the commands the C command line does not have. The C usage
# lists its own; python -m precis --help adds these after it.
PYTHON_COMMANDS = (
    ("capture", "a model's linear-layer inputs (and dL/dY, outputs) streamed to the files import --model reads"),
    ("verify", "reference vs emulated model on held-out inputs: end-to-end gates, error per layer"),
    ("plan --validate", "plans at several budgets checked by verify: does the prediction rank them?"),
    ("tasks", "task-level acceptance: a JSONL task file under the reference and the plan, flips, McNemar"),
    ("lm-eval", "lm-evaluation-harness tasks with the plan emulated (its Python API, local task files)"),
    ("capture --attention", "each attention layer's Q, K, V, P as batched GEMM workloads for precis run"),
)


def _passive_openmp():
    """These commands run a torch model and libprecis's GEMMs in turn on the same cores. By default
    torch's OpenMP threads spin after each op, waiting for the next, while OpenBLAS's threads work:
    on 2 cores that was a seventh of a verify's CPU time (docs/verify.md, "Cost"). Passive waiting is
    set before torch is imported (libgomp reads it once), unless the user set it."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def python_command(argv):
    """The Python entry point for argv (without the program name), or None for the C command line."""
    if argv[:1] in (["verify"], ["capture"], ["lm-eval"], ["tasks"]) or (argv[:1] == ["plan"] and "--validate" in argv[1:]):
        _passive_openmp()
    if argv[:1] == ["verify"]:  # the model's output (DESIGN §16): Python, torch and transformers
        from .verify import main as verify_main
        return verify_main
    if argv[:1] == ["capture"] and "--attention" in argv[1:]:  # DESIGN §23: attention's GEMMs as workloads
        from .attention_capture import main as capture_main
        return capture_main
    if argv[:1] == ["capture"]:  # DESIGN §16, §20: precis.torch.capture streamed to files
        from .capture import main as capture_main
        return capture_main
    if argv[:1] == ["lm-eval"]:  # DESIGN §22: lm-evaluation-harness tasks with the plan emulated
        from .lmeval import main as lmeval_main
        return lmeval_main
    if argv[:1] == ["tasks"]:  # DESIGN §22: task-level acceptance
        from .tasks import main as tasks_main
        return tasks_main
    if argv[:1] == ["plan"] and "--validate" in argv[1:]:  # DESIGN §17: plans checked by verify
        from .validate import main as validate_main
        return validate_main
    return None


def python_commands_help():
    lines = ["", "commands of python -m precis only (torch, transformers; docs/verify.md; each has --help):"]
    for name, summary in PYTHON_COMMANDS:
        lines.append(f"  {name:<16} {summary}")
    return "\n".join(lines) + "\n"


def run(argv):
    entry = python_command(argv)
    if entry is not None:
        return entry(argv[1:])
    code = main(argv)
    if argv[:1] in (["-h"], ["--help"], ["help"]) or not argv:
        # After the C usage (stdout for --help, stderr when no command was given), on the same stream.
        (sys.stdout if argv else sys.stderr).write(python_commands_help())
    return code


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
