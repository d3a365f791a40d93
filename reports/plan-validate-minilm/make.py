"""Remakes this example: plan --validate on all-MiniLM-L6-v2 with real text (issue 31).

Gradients of precis.torch.output_projection_loss(0) captured on docs/model.md (12 windows of 64
tokens), `precis import --model --gradients`, `precis run` of seven recipes, then a Fisher plan at
bits=6 validated by `python -m precis plan --validate` at five bits budgets on held-out text (the
repository's LICENSE, 8 windows of 64 tokens). The same steps as
tests/venv/test_python_plan_validate_minilm.py, which checks the figures independently.

    build/venv/bin/python reports/plan-validate-minilm/make.py     (after bash cmake/quickstart.sh test)
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "..")
BUILD = os.environ.get("PRECIS_BUILD_DIR", os.path.join(SOURCE, "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "venv"))

import torch  # noqa: E402

import precis.torch as pt  # noqa: E402
from minilm_model import load_minilm, minilm_dir  # noqa: E402
from precis import verify  # noqa: E402

PRECIS = os.path.join(BUILD, "precis")
FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2", "--quiet"]


def main():
    tmp = tempfile.mkdtemp(prefix="precis-example-validate-")
    model, tokenizer = load_minilm()
    calib = verify.load_inputs(os.path.join(SOURCE, "docs", "model.md"), tokenizer, 64, 12)
    cap = pt.capture(model, [torch.from_numpy(calib)], loss=pt.output_projection_loss(0), source="docs/model.md")
    cap.save(os.path.join(tmp, "acts.npz"), grads=os.path.join(tmp, "grads.npz"))
    ds = os.path.join(tmp, "ds.h5")
    subprocess.run([PRECIS, "import", "--model", os.path.join(minilm_dir(), "model.safetensors"), "--activations",
                    os.path.join(tmp, "acts.npz"), "--gradients", os.path.join(tmp, "grads.npz"), "--calib", "3",
                    "-o", ds, "-q"], check=True)
    rep = os.path.join(tmp, "rep")
    subprocess.run([PRECIS, "run", ds, "--backend", "cpu", "--recipes", "fp32,bf16,fp8,int8,nvfp4,mxfp4,w4a16",
                    "-o", rep] + FAST, check=True)
    out = os.path.join(tmp, "plan")
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), PRECIS_CLI=PRECIS)
    subprocess.run([sys.executable, "-m", "precis", "plan", os.path.join(rep, "report.json"), "--validate", "--model",
                    minilm_dir(), "--inputs", os.path.join(SOURCE, "LICENSE"), "--samples", "8", "--budget", "bits=6",
                    "--validate-budgets", "bits=4.5,5,6,8,10", "-o", out], check=True, env=env)
    for name in sorted(os.listdir(out)):
        if os.path.isfile(os.path.join(out, name)):
            shutil.copy(os.path.join(out, name), os.path.join(HERE, name))
    print("copied", sorted(n for n in os.listdir(HERE) if n != "make.py"))


if __name__ == "__main__":
    main()
