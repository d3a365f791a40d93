"""python -m precis capture: the inputs of a transformers model's linear layers (and dL/dY, and the
final outputs) on held-out token windows, streamed to the files `precis import --model
--activations` reads (DESIGN §16, §20; docs/verify.md "Capture").

A command over precis.torch.capture(out=...): each batch's arrays go to one temporary file per
layer beside -o as the batch runs, and the output files are made from them at the end, so memory
holds the weights, one batch and one layer, never every layer's arrays. The estimate of that peak
is printed before the first batch; --max-memory makes batches smaller or refuses with the figure.
"""
import argparse
import os
import sys

from .verify import Progress as VerifyProgress
from .verify import (EXIT_OK, EXIT_USAGE, DEFAULT_BATCH_BUDGET, VerifyError, _fmt_bytes, choose_batch, load_inputs,
                     load_model, parse_bytes)

USAGE = """usage: python -m precis capture --model DIR --inputs FILE -o ACTS [--gradients FILE] [--outputs FILE.npy] [options]

Runs the model of DIR (a transformers checkpoint, fp32) on the inputs (token ids [samples, tokens]
in .npy, or a text file cut into windows with the model's tokenizer) and writes each linear layer's
inputs [samples, tokens, in_features] to ACTS (.npz, .safetensors, else a directory of <layer>.npy),
as `precis import --model DIR --activations ACTS` reads them; --gradients the next-token
cross-entropy's dL/dY at each layer's output (`import --gradients`), --outputs the final outputs.
"""


class CaptureEstimate:
    """peak ≈ W + L + B(b) (docs/verify.md, "Capture: memory"): the weights as loaded, one layer's
    recorded input, and one batch's forward (activations, final outputs, the recorded outputs' copy
    and, with gradients, autograd's saved inputs, every layer's dL/dY and the loss's temporaries).
    Every term in bytes; total(b) for a batch of b sequences, as verify's MemoryEstimate."""

    def __init__(self, model, layers, tokens, gradients, outputs):
        self.weights = sum(p.numel() * p.element_size() for p in model.parameters() if p.device.type != "meta")
        self.weights += sum(b.numel() * b.element_size() for b in model.buffers() if b.device.type != "meta")
        self.tokens, self.gradients, self.outputs = tokens, gradients, outputs
        shapes = [(int(m.weight.shape[0 if im else 1]), int(m.weight.shape[1 if im else 0])) for _, m, im in layers]
        self.sum_k = sum(k for k, _ in shapes)
        self.sum_n = sum(n for _, n in shapes)
        self.max_k = max((k for k, _ in shapes), default=0)
        self.max_n = max((n for _, n in shapes), default=0)
        config = getattr(model, "config", None)
        self.hidden = int(getattr(config, "hidden_size", 0) or self.max_k)
        self.heads = int(getattr(config, "num_attention_heads", 0) or 1)
        self.vocab = int(getattr(config, "vocab_size", 0) or self.max_n)

    def fixed(self):
        return self.weights

    def layer(self, batch):
        """One layer's input as recorded: its float32 copy of the kept rows and the array written (b·T·k·8)."""
        return batch * self.tokens * self.max_k * 8

    def per_batch(self, batch):
        """One batch of b sequences of T tokens: the forward's activations (b·T·hidden·32, attention
        scores b·heads·T²·8, the widest layer's output b·T·n·8), the final outputs (b·T·V·4, + their
        recorded copy b·T·V·4); with gradients, autograd's saved layer inputs and outputs
        (b·T·(Σk + Σn)·4), every layer's dL/dY at once (b·T·Σn·4) and the loss's float32
        log-softmax and gradient (b·T·V·12)."""
        rows = batch * self.tokens
        forward = rows * self.hidden * 32 + batch * self.heads * self.tokens * self.tokens * 8 + rows * self.max_n * 8
        finals = rows * self.vocab * 4 * (2 if self.outputs else 1)
        grads = rows * 4 * (self.sum_k + 2 * self.sum_n) + rows * self.vocab * 12 if self.gradients else 0
        return forward + finals + grads

    def total(self, batch):
        return self.fixed() + self.layer(batch) + self.per_batch(batch)

    def describe(self, batch):
        return (f"peak memory ≈ {_fmt_bytes(self.total(batch))} (weights {_fmt_bytes(self.weights)} + one layer "
                f"{_fmt_bytes(self.layer(batch))} + one batch of {batch} x {self.tokens} tokens "
                f"{_fmt_bytes(self.per_batch(batch))})")


class Progress(VerifyProgress):
    """verify's progress lines under capture's name; precis.torch.capture reports a layer by its
    index among the captured layers."""

    def __init__(self, quiet, total_batches, total_tokens, layers):
        super().__init__(quiet, total_batches, total_tokens, command="capture")
        self.layers = layers

    def layer(self, batch, index, name):
        super().layer(batch, index, self.layers, name)


def main(argv=None):
    """The command: exit 0, 2 on bad input; a signal ends it by that signal with nothing left behind
    (precis.torch.capture removes its temporary files first)."""
    parser = argparse.ArgumentParser(prog="python -m precis capture", description=USAGE.split("\n\n", 1)[1],
                                     usage=USAGE.split("\n")[0][len("usage: "):],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a transformers checkpoint directory")
    parser.add_argument("--inputs", required=True, help="token ids [samples, tokens] in .npy, or a text file read with "
                        "the model's tokenizer")
    parser.add_argument("-o", "--output", required=True, help="the layers' inputs: ACTS.npz, ACTS.safetensors or a "
                        "directory")
    parser.add_argument("--gradients", default=None, metavar="FILE", help="also dL/dY of the next-token cross-entropy "
                        "(a causal LM) at each layer's output, in the same layout")
    parser.add_argument("--outputs", default=None, metavar="FILE.npy", help="also the final outputs (logits) [samples, "
                        "tokens, features]")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per window of a text file (default 64)")
    parser.add_argument("--samples", type=int, default=None, help="at most this many samples (windows)")
    parser.add_argument("--layers", action="append", default=[], metavar="GLOB", help="only these layers (repeatable)")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="not these layers (repeatable)")
    parser.add_argument("--prefix", default="", help="prepended to module names (a wrapper's state_dict prefix)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"sequences per forward (default: as many as fit --max-memory, or that add at most "
                             f"{_fmt_bytes(DEFAULT_BATCH_BUDGET)} to the estimate)")
    parser.add_argument("--max-memory", default=None, help="bytes the estimated peak must fit (8G, 1.5GiB): batches are "
                        "made smaller, or capture refuses with the figure")
    parser.add_argument("--force", action="store_true", help="replace files that exist")
    parser.add_argument("-q", "--quiet", action="store_true", help="no estimate and no progress on stderr")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_OK if e.code == 0 else EXIT_USAGE
    from . import torch as pt

    try:
        max_memory = parse_bytes(args.max_memory) if args.max_memory is not None else None
        for path in (args.output, args.gradients, args.outputs):
            if path is not None and os.path.exists(path) and not args.force:
                raise VerifyError(f"{path}: already exists (use --force to overwrite)")
        if args.outputs is not None and not args.outputs.endswith(".npy"):
            raise VerifyError(f"--outputs {args.outputs}: expected a .npy file")
        model, tokenizer = load_model(args.model)
        ids = load_inputs(args.inputs, tokenizer, args.tokens, args.samples)
        if len(ids) == 0:
            raise VerifyError(f"--inputs {args.inputs}: no samples")
        chosen = pt._chosen_layers(model, args.layers, args.exclude, args.prefix)
        gradients = args.gradients is not None
        if gradients and not pt.is_causal_lm(model):
            raise VerifyError(f"--gradients: {type(model).__name__} is not a causal LM (the loss is the next-token "
                              "cross-entropy); use precis.torch.capture(loss=...) from Python")
        estimate = CaptureEstimate(model, chosen, ids.shape[1], gradients, args.outputs is not None)
        batch_size = choose_batch(estimate, len(ids), args.batch_size, max_memory)
        n_batches = (len(ids) + batch_size - 1) // batch_size
        progress = Progress(args.quiet, n_batches, int(ids.size), len(chosen))
        progress.say(f"{len(ids)} samples x {ids.shape[1]} tokens in {n_batches} batches of {batch_size}; "
                     f"{len(chosen)} layers; {estimate.describe(batch_size)}")
        import torch

        batches = (torch.from_numpy(ids[i:i + batch_size]) for i in range(0, len(ids), batch_size))
        with torch.no_grad() if not gradients else torch.enable_grad():
            cap = pt.capture(model, batches, layers=args.layers, exclude=args.exclude, prefix=args.prefix,
                             gradients=gradients, outputs=args.outputs is not None, source=args.inputs,
                             out=args.output, grads_out=args.gradients, outputs_out=args.outputs, progress=progress)
    except (VerifyError, ValueError) as e:  # CaptureError is a ValueError naming the layer or file
        print(f"precis capture: {e}", file=sys.stderr)
        return EXIT_USAGE
    if not args.quiet:
        print(cap.summary())
        print(f"wrote {args.output}" + "".join(f", {p}" for p in (args.gradients, args.outputs) if p))
    return EXIT_OK
