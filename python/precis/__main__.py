"""python -m precis ...: the precis command line (the same C code, the same exit codes)."""
import sys

from . import main

if __name__ == "__main__":
    if sys.argv[1:2] == ["verify"]:  # the model's output (DESIGN §16): Python, torch and transformers
        from .verify import main as verify_main
        sys.exit(verify_main(sys.argv[2:]))
    if sys.argv[1:2] == ["lm-eval"]:  # DESIGN §22: lm-evaluation-harness tasks with the plan emulated
        from .lmeval import main as lmeval_main
        sys.exit(lmeval_main(sys.argv[2:]))
    if sys.argv[1:2] == ["tasks"]:  # DESIGN §22: task-level acceptance
        from .tasks import main as tasks_main
        sys.exit(tasks_main(sys.argv[2:]))
    if sys.argv[1:2] == ["plan"] and "--validate" in sys.argv[2:]:  # DESIGN §17: plans checked by verify
        from .validate import main as validate_main
        sys.exit(validate_main(sys.argv[2:]))
    sys.exit(main())
