#!/usr/bin/env python3
"""Capture the inputs of a PyTorch model's linear layers, for `precis import --model CKPT
--activations OUT` (docs/model.md, "Capturing real activations").

A forward pre-hook on every chosen torch.nn.Linear records its input x (the `a` of the GEMM
x @ W^T that precis evaluates). Each layer's array is written as float32
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
padded positions of a batch are recorded as any others, so feed unpadded or equal-length sequences.

OUT is written when the `with` block ends without an exception, to a temporary name then renamed:
  *.npz          np.savez, one array per layer name   (precis: --activations OUT.npz)
  *.safetensors  one F32 tensor per layer name         (precis: --activations OUT.safetensors)
  anything else  a directory of <layer>.npy files      (precis: --activations OUT)

Needs NumPy and PyTorch. `python3 capture_activations.py --help` prints this text.
"""
import fnmatch
import json
import os
import shutil
import struct
import sys

import numpy as np


class CaptureError(ValueError):
    """A capture that cannot give precis what it reads: the message names the layer and the shapes."""


class Capture:
    def __init__(self, model, out, tokens=None, layers=None, exclude=None, max_samples=None, prefix=""):
        self.model, self.out, self.tokens = model, os.fspath(out), tokens
        self.layers, self.exclude = list(layers or []), list(exclude or [])
        self.max_samples, self.prefix = max_samples, prefix
        self.chunks = {}   # layer -> list of float32 arrays [s, tokens, k]
        self.samples = {}  # layer -> samples recorded
        self.in_features = {}
        self.handles = []
        if tokens is not None and tokens < 1:
            raise CaptureError(f"tokens must be positive, not {tokens}")

    def _chosen(self, name):
        if self.layers and not any(fnmatch.fnmatchcase(name, g) for g in self.layers):
            return False
        return not any(fnmatch.fnmatchcase(name, g) for g in self.exclude)

    def __enter__(self):
        import torch

        for module_name, module in self.model.named_modules():
            name = self.prefix + module_name
            if isinstance(module, torch.nn.Linear) and module_name and self._chosen(name):
                self.in_features[name] = module.in_features
                self.chunks[name], self.samples[name] = [], 0
                self.handles.append(module.register_forward_pre_hook(self._hook(name)))
        if not self.handles:
            self._remove()
            raise CaptureError("no torch.nn.Linear module of the model matches "
                               f"layers={self.layers or ['*']} exclude={self.exclude}")
        return self

    def _hook(self, name):
        def hook(module, inputs):
            if not inputs:
                raise CaptureError(f"layer {name}: called with its input as a keyword argument, which a forward "
                                   "pre-hook does not see; call it positionally")
            self._record(name, inputs[0])
        return hook

    def _record(self, name, x):
        k = self.in_features[name]
        if x.shape[-1] != k:
            raise CaptureError(f"layer {name}: input of shape {list(x.shape)}, expected [..., {k}]")
        if self.max_samples is not None and self.samples[name] >= self.max_samples:
            return
        x = x.detach()
        if x.dim() <= 2:
            x = x.reshape(-1, 1, k)
        else:
            x = x.reshape(-1, x.shape[-2], k)
            if self.tokens is None:
                self.tokens = x.shape[1]
            if x.shape[1] < self.tokens:
                raise CaptureError(f"layer {name}: a sequence of {x.shape[1]} positions, fewer than tokens={self.tokens} "
                                   "(every sample must have the same number of tokens: feed equal-length inputs "
                                   "or pass a smaller tokens=)")
            x = x[:, :self.tokens, :]
        if self.max_samples is not None:
            x = x[:self.max_samples - self.samples[name]]
        # float32 holds bfloat16 and float16 exactly; precis reads float32.
        self.chunks[name].append(x.float().cpu().numpy().astype(np.float32, copy=False))
        self.samples[name] += x.shape[0]

    def _remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    def __exit__(self, exc_type, exc, tb):
        self._remove()
        if exc_type is None:
            self.write()
        return False

    def arrays(self):
        """layer -> float32 [samples, tokens, in_features], for the layers that ran."""
        return {name: np.concatenate(parts) for name, parts in self.chunks.items() if parts}

    def missed(self):
        """Layers chosen that the forward passes never reached (precis would find no array for them)."""
        return [name for name, parts in self.chunks.items() if not parts]

    def write(self):
        arrays = self.arrays()
        if not arrays:
            raise CaptureError(f"{self.out}: no layer was called: run the model inside the `with` block")
        parent = os.path.dirname(os.path.abspath(self.out))
        tmp = os.path.join(parent, f".{os.path.basename(self.out)}.tmp-{os.getpid()}")
        if self.out.endswith(".npz"):
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
        elif self.out.endswith(".safetensors"):
            write_safetensors(tmp, arrays)
        else:
            os.makedirs(tmp)
            for name, x in arrays.items():
                np.save(os.path.join(tmp, name + ".npy"), x)
            if os.path.isdir(self.out):
                shutil.rmtree(self.out)
        os.replace(tmp, self.out)

    def summary(self):
        lines = [f"{self.out}: {len(self.arrays())} layers, tokens={self.tokens} (1 for 2-D inputs)"]
        for name, x in self.arrays().items():
            lines.append(f"  {name}: [{', '.join(map(str, x.shape))}]")
        for name in self.missed():
            lines.append(f"  {name}: never called (not written; exclude it from precis import with --exclude)")
        return "\n".join(lines)


def capture(model, out, tokens=None, layers=None, exclude=None, max_samples=None, prefix=""):
    """A context manager recording the inputs of model's nn.Linear modules; writes `out` on exit.

    layers / exclude: fnmatch globs on the layer names (any of / none of); prefix: prepended to
    each module name (for a checkpoint saved from a wrapper, e.g. "model.")."""
    return Capture(model, out, tokens, layers, exclude, max_samples, prefix)


def write_safetensors(path, arrays):
    """name -> float32 array, as the safetensors format lays it out (header JSON, then the data)."""
    header, offset, blobs = {}, 0, []
    for name, x in arrays.items():
        raw = np.ascontiguousarray(x, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)


if __name__ == "__main__":
    print(__doc__)
    sys.exit(0 if any(a in ("-h", "--help") for a in sys.argv[1:]) else 2)
