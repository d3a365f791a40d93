#!/usr/bin/env python3
"""Capture the inputs of a PyTorch model's linear layers, for `precis import --model CKPT
--activations OUT` (docs/model.md, "Capturing real activations").

A thin command over precis.torch (python/precis/torch.py, docs/verify.md): a forward pre-hook on
every chosen torch.nn.Linear (and transformers' Conv1D) records its input x (the `a` of the GEMM
x @ W^T that precis evaluates); precis.torch.capture(model, batches) is the fuller form (attention
masks, gradients, the final outputs). Each layer's array is written as float32
[samples, tokens, in_features], named after the module (its name in model.named_modules(), which is
the checkpoint's tensor name without ".weight" when the checkpoint was saved from the same module
tree; `prefix` adds what a wrapper's state_dict puts in front):

    import sys; sys.path.insert(0, "PATH/TO/precis/tools")
    from capture_activations import capture

    model.eval()
    with torch.no_grad(), capture(model, "acts.npz", tokens=64) as cap:
        for batch in batches:          # e.g. tokenized text, [batch, seq_len] ids
            model(batch)
    print(cap.summary())

Samples and tokens: an input [batch, seq, k] gives `batch` samples of its first `tokens` positions
(default: the first sequence's length; a later shorter sequence is an error, not padding); an input
with more leading dimensions flattens them into samples; a 2-D input [n, k] (a pooler on the first
token, an MLP on vectors) is n samples of one token each, so its samples line up with the others'.
`max_samples` stops recording a layer once it has that many. Choose the positions you care about:
padded positions of a batch are recorded as any others, so feed unpadded or equal-length sequences
(precis.torch.capture drops padding by the attention mask).

OUT is written when the `with` block ends without an exception, to a temporary name then renamed:
  *.npz          np.savez, one array per layer name   (precis: --activations OUT.npz)
  *.safetensors  one F32 tensor per layer name         (precis: --activations OUT.safetensors)
  anything else  a directory of <layer>.npy files      (precis: --activations OUT)
each with the capture's metadata (model, dtype, tokens) beside the arrays: the .npz member
"@capture", the safetensors header's __metadata__["precis.capture"], capture.json in the directory.

Needs NumPy, PyTorch and precis's Python package: an installed one (pip install precis-eval) is
used first; else the staged copy a build makes, from $PRECIS_PY_STAGE, $PRECIS_BUILD_DIR/python,
or build/python beside this tools/ directory. `python3 capture_activations.py --help` prints this
text.
"""
import contextlib
import os
import sys


def _import_precis_torch():
    """precis.torch: installed, else the build's staged package (see the text above)."""
    try:
        import precis.torch as pt
        return pt
    except ImportError as first:
        here = os.path.dirname(os.path.abspath(__file__))
        stages = [os.environ.get("PRECIS_PY_STAGE"),
                  os.path.join(os.environ["PRECIS_BUILD_DIR"], "python") if os.environ.get("PRECIS_BUILD_DIR") else None,
                  os.path.join(here, "..", "build", "python")]
        for stage in stages:
            if stage and os.path.isfile(os.path.join(stage, "precis", "torch.py")):
                sys.path.insert(0, os.path.abspath(stage))
                sys.modules.pop("precis", None)
                import precis.torch as pt
                return pt
        raise ImportError(f"capture_activations needs precis's Python package ({first}): pip install precis-eval, "
                          "or build precis and set PRECIS_BUILD_DIR (its staged package is BUILD_DIR/python)") from first


if __name__ != "__main__":
    _pt = _import_precis_torch()
    CaptureError = _pt.CaptureError


@contextlib.contextmanager
def capture(model, out, tokens=None, layers=None, exclude=None, max_samples=None, prefix=""):
    """A context manager recording the inputs of model's linear layers while the block runs the
    model; writes `out` when the block ends without an exception. Yields precis.torch's Captured
    (.arrays(), .missed(), .summary()).

    layers / exclude: fnmatch globs on the layer names (any of / none of); prefix: prepended to
    each module name (for a checkpoint saved from a wrapper, e.g. "model.")."""
    with _pt.recording(model, tokens=tokens, layers=layers, exclude=exclude, max_samples=max_samples,
                       prefix=prefix, source="tools/capture_activations.py") as cap:
        yield cap
    # Every sample has `tokens` rows: a sequence shorter than that is an error here, not a sample
    # left out silently (precis.torch.capture counts such sequences as skipped).
    short = [name for name in cap.in_features if cap.skipped_by.get(name)]
    if short:
        raise CaptureError(f"layer {short[0]}: {cap.skipped_by[short[0]]} sequence(s) of fewer than tokens={cap.tokens} "
                           "positions (every sample must have the same number of tokens: feed equal-length inputs or "
                           "pass a smaller tokens=)")
    cap.save(out)


if __name__ == "__main__":
    print(__doc__)
    sys.exit(0 if any(a in ("-h", "--help") for a in sys.argv[1:]) else 2)
