"""verify: does the model still work with the plan's formats? (DESIGN §16, docs/verify.md)

The reference model and the model with the plan's GEMMs emulated exactly (precis.torch.emulate) run
on held-out inputs. Reported:
- end to end (precis.endtoend): logits -> KL both ways, top-1 agreement, top-5 overlap,
  delta cross-entropy; hidden states -> cosine, rel_fro; per sample and over samples, with
  statistical gates (--require);
- per layer: isolated error, the layer alone on the reference model's inputs, measured by
  `precis run` on a dataset imported from those inputs (the report's rows), beside cumulative
  error, the layer's GEMM output inside the emulated model against a.W of the reference model's
  input a (float64, as c_ref); and the first layer whose cumulative error crosses a threshold.
Written as precis's report (report.json with end_to_end and per_layer, report.csv, report.md,
report.html) so that `precis compare` reads it.
"""
import argparse
import contextlib
import copy
import functools
import html
import json
import math
import os
import sys
import time

import numpy as np

from . import endtoend, kld
from . import noise as noise_mod
from . import reference as reference_file_mod

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_GATE = 0, 1, 2, 3


class VerifyError(ValueError):
    """Bad input to verify: the message names the file or argument and what was expected."""


# ----------------------------------------------------------------------------------------------
# Inputs


def load_inputs(inputs, tokenizer=None, tokens=64, samples=None):
    """Token ids [samples, tokens] (int64) from an array, a .npy file of ids, or a text file read
    with the tokenizer: its tokens (without special tokens) cut into windows of `tokens` minus the
    tokenizer's special tokens, each window given them as the model's inputs would have
    ([CLS] ... [SEP] for BERT). A last partial window is dropped; `samples` caps the windows."""
    if isinstance(inputs, (str, os.PathLike)):
        path = os.fspath(inputs)
        if not os.path.isfile(path):
            raise VerifyError(f"--inputs {path}: no such file")
        with open(path, "rb") as f:
            magic = f.read(6)
        if magic == b"\x93NUMPY":
            ids = np.load(path, allow_pickle=False)
            if ids.ndim == 1:
                ids = ids[None]
            if ids.ndim != 2 or ids.dtype.kind not in "iu":
                raise VerifyError(f"--inputs {path}: expected integer token ids [samples, tokens], found {ids.dtype} "
                                  f"{list(ids.shape)}")
            ids = ids.astype(np.int64)
        else:
            if tokenizer is None:
                raise VerifyError(f"--inputs {path}: a text file needs the model's tokenizer (none found)")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            ids = text_windows(text, tokenizer, tokens)
            if len(ids) == 0:
                raise VerifyError(f"--inputs {path}: the text has fewer tokens than one window of {tokens}")
    else:
        ids = np.asarray(inputs.cpu().numpy() if hasattr(inputs, "cpu") else inputs)
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or ids.dtype.kind not in "iu":
            raise VerifyError(f"inputs: expected integer token ids [samples, tokens], found {ids.dtype} {list(ids.shape)}")
        ids = ids.astype(np.int64)
    if samples is not None:
        ids = ids[:samples]
    return ids


def special_tokens(tokenizer):
    """The ids the tokenizer puts before and after a text ([CLS], [SEP] for BERT; BOS for Llama)."""
    bare = tokenizer("hello", add_special_tokens=False)["input_ids"]
    full = tokenizer("hello", add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(bare) + 1):
        if full[i:i + len(bare)] == bare:
            return list(full[:i]), list(full[i + len(bare):])
    return [], []


def text_windows(text, tokenizer, tokens):
    body = tokenizer(text, add_special_tokens=False)["input_ids"]
    before, after = special_tokens(tokenizer)
    width = tokens - len(before) - len(after)
    if width < 1:
        raise VerifyError(f"--tokens {tokens}: no room beside the tokenizer's {len(before) + len(after)} special tokens")
    out = [before + body[s:s + width] + after for s in range(0, len(body) - width + 1, width)]
    return np.array(out, np.int64).reshape(-1, tokens)


# ----------------------------------------------------------------------------------------------
# Memory: what a verify holds at its peak (docs/verify.md, "Memory")

GiB = 1 << 30
DEFAULT_BATCH_BUDGET = GiB // 2  # what capture's batch adds when neither --batch-size nor --max-memory is given
# verify's: its fixed part (the process, the weights, the head's B-side copies) leaves less beside
# the fp32 weights + 1.5 GB of issue 40 (docs/decisions.md, "verify's memory and --layer-rows").
VERIFY_BATCH_BUDGET = 384 << 20
REFERENCE_BLOCK_COLS = 4096  # PRECIS_REFERENCE_BLOCK_COLS: b's columns widened to float64 at a time


def parse_bytes(text):
    """'8G', '1.5GiB', '500M', '123456' -> bytes (powers of 1024)."""
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?[bB])?\s*", str(text))
    if not m:
        raise VerifyError(f"--max-memory {text}: expected bytes such as 8G, 1.5GiB or 500M")
    return int(float(m.group(1)) * 1024 ** " KMGT".index((m.group(2) or " ").upper()))


def _fmt_bytes(n):
    return f"{n / GiB:.2f} GiB" if n >= GiB / 4 else f"{n / (1 << 20):.0f} MiB"


def process_baseline(model):
    """Bytes the process holds before verify adds anything, its weights aside: its resident set
    (Python, torch and the libraries, whatever the caller holds) less the parameters resident in
    it. Parameters in a file mapping (safetensors loads them so) count as not yet resident: they
    are read in by the first forward, and the estimate's weights term counts them whole; others
    (in anonymous memory) are resident and counted once, by that term. 0 where /proc is absent."""
    for _ in range(3):  # /proc/self/maps is read while other threads map and unmap: a torn read is retried
        try:
            return _process_baseline(model)
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return 0


def _process_baseline(model):
    import bisect

    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            maps.append((lo, hi, len(fields) >= 6 and fields[5].startswith("/")))
    maps.sort()
    starts = [lo for lo, _, _ in maps]
    resident = 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.device.type != "cpu" or t.numel() == 0:
            continue
        i = bisect.bisect_right(starts, t.data_ptr()) - 1
        in_file = i >= 0 and maps[i][0] <= t.data_ptr() < maps[i][1] and maps[i][2]
        resident += 0 if in_file else t.numel() * t.element_size()
    return max(0, rss - resident)


def _b_copies(recipe, k, n):
    """The bytes the cpu backend holds for one layer's B while it emulates `recipe` on W [n, k]
    (precis_emulate_b_bytes); 8 per weight without a recipe or when libprecis cannot say."""
    from . import _precis

    if recipe is None:
        return k * n * 8
    try:
        return int(_precis.emulate_b_bytes(recipe, k, n, None)) or k * n * 8
    except _precis.Error:  # a recipe verify refuses later, with its own message
        return k * n * 8


class MemoryEstimate:
    """peak ≈ the process's baseline (process_baseline) + weights as loaded (+ the float32 reference copy and the float64 model of --reference
    fp64 where made) + one layer's working set + one batch's activations, emulated GEMM outputs and
    final outputs. Every term in bytes; `total(batch)` for a batch of `batch` sequences."""

    def __init__(self, model, ref_copy, fp64, layers, modules, tokens, out_features, isolated, check_tokens=None,
                 baseline=0, recipes=None, head=None, alternatives=0):
        # Weights offloaded by accelerate (to the CPU's disk) are meta tensors here: not held.
        params = sum(p.numel() * p.element_size() for p in model.parameters() if p.device.type != "meta")
        params += sum(b.numel() * b.element_size() for b in model.buffers() if b.device.type != "meta")
        fp32 = sum(p.numel() * 4 for p in model.parameters())
        self.weights = params
        self.baseline = baseline
        self.reference_copy = fp32 if ref_copy else 0
        self.fp64_model = 2 * fp32 if fp64 else 0
        self.tokens = tokens
        self.check_tokens = tokens if check_tokens is None else check_tokens  # --layer-rows: rows per sequence checked
        self.out_features = out_features
        self.fp64 = fp64
        shapes = []
        # The cpu backend's copies of each planned layer's B (libprecis's figure for its recipe and
        # shape: codes or rounded values, a head's a block of columns at a time where the recipe
        # allows); without the recipes, a [k, n] copy and one quantized copy (8 bytes per weight).
        self.b_copies = 0
        for name in layers:
            module, in_major = modules[name]
            k, n = (module.weight.shape if in_major else module.weight.shape[::-1])
            shapes.append((int(k), int(n)))
            self.b_copies = max(self.b_copies, _b_copies(recipes.get(name) if recipes else None, int(k), int(n)))
        self.sum_n = sum(n for _, n in shapes)
        self.max_kn = max((k * n for k, n in shapes), default=0)
        self.max_n = max((n for _, n in shapes), default=0)
        self.max_k = max((k for k, _ in shapes), default=0)
        # head: the logits layer verify computes a chunk of sequences at a time (verify's
        # _head_in_chunks), None when the whole batch's outputs are made at once.
        self.head = head
        self.head_n = _weight_shape(modules[head])[1] if head is not None else 0
        self.body_max_n = max((n for name, (_, n) in zip(layers, shapes) if name != head), default=0)
        self.alternatives = alternatives  # the noise floor's emulated alternatives: a held hidden state each
        self.max_chunk = None  # sequences per head chunk: choose_batch sets it (None: the whole batch)
        self.isolated = isolated
        config = getattr(model, "config", None)
        self.hidden = int(getattr(config, "hidden_size", 0) or self.max_k)
        self.heads = int(getattr(config, "num_attention_heads", 0) or 1)

    def fixed(self):
        return self.baseline + self.weights + self.reference_copy + self.fp64_model

    def layer(self, batch):
        """One layer at a time: the emulation's copies of its B (b_copies: libprecis's figure; W itself
        is read as the layer holds it), the float64 copy of one block of at most 4096 of its columns
        (the reference dgemm, data/generate.h), the isolated output and its quantized inputs, and the
        reference of one block of 256 rows (c_ref and ab_abs, float64)."""
        rows = batch * self.check_tokens
        per_weight = self.b_copies + self.max_k * min(self.max_n, REFERENCE_BLOCK_COLS) * 8
        iso = rows * self.max_n * 4 * 2 if self.isolated else 0
        ref = max(256, self.tokens) * self.max_n * 16
        if self.check_tokens != self.tokens:  # whole 256-row blocks of the samples' rows (api_layer_check.c)
            ref = min(rows, math.lcm(self.check_tokens, 256)) * self.max_n * 16
        return per_weight + iso + ref + rows * self.max_k * 8

    def chunk(self, batch):
        """Sequences per head chunk for a batch of `batch`: the whole batch unless the head is chunked."""
        if self.head is None or self.max_chunk is None:
            return batch
        return min(batch, self.max_chunk)

    def head_bytes(self, chunk):
        """One head chunk of `chunk` sequences: the head's emulated output and its accumulators, both
        models' final outputs of the chunk (+ float64 ones) and the end-to-end metrics' temporaries
        (four float64 rows of the vocabulary per thread, one sample's kept rows), and one noise-floor
        alternative's outputs at a time."""
        if chunk <= 0:
            return 0
        rows = chunk * self.tokens
        emulated = rows * self.head_n * 8
        finals = rows * self.out_features * (4 + 4 + (8 if self.fp64 else 0) + (4 if self.alternatives else 0))
        metrics = endtoend.workers() * 4 * self.out_features * 8 + self.tokens * self.out_features * 8
        return emulated + finals + metrics

    def per_batch(self, batch):
        """One batch: the emulated model's GEMM outputs of every planned layer (float32, kept until
        the reference pass reaches the layer; of the stated tokens only with --layer-rows), the widest
        one's working set while it is computed, both models' final outputs (+ float64 ones), the
        forward's own activations (hidden states, attention scores) and the end-to-end metrics'
        temporaries (four float64 rows of the vocabulary per thread, one sample's kept rows). With
        the head in chunks: the body's forward, or the held hidden states (one per model) and one head
        chunk (head_bytes), whichever is larger, beside the recorded outputs."""
        rows = batch * self.tokens
        recorded = batch * self.check_tokens * self.sum_n * 4  # --layer-rows: only the stated tokens are kept
        if self.head is not None and self.max_chunk is not None and batch > 0:
            forward = rows * self.hidden * 4 * 8 + batch * self.heads * self.tokens * self.tokens * 4 * 2
            body = forward + rows * self.body_max_n * 8
            # the head's input of each model run (the float64 model's: twice the bytes)
            held = rows * self.hidden * 4 * (2 + self.alternatives + (2 if self.fp64 else 0))
            return recorded + held + max(body, self.head_bytes(self.chunk(batch)))
        # The widest planned GEMM of the emulated model (the head's): the cpu backend's output and
        # its accumulators beside the output handed back (counted in finals); a head emulated a
        # block of columns at a time writes the output handed back (int8: no int32 accumulators
        # for k <= 1024), so this bounds it.
        emulated = rows * self.max_n * 8
        finals = rows * self.out_features * (4 + 4 + (8 if self.fp64 else 0))
        forward = rows * self.hidden * 4 * 8 + batch * self.heads * self.tokens * self.tokens * 4 * 2
        # endtoend.logit_token_stats: libprecis's four float64 rows of the vocabulary per worker in
        # flight, and one sample's kept rows of both outputs where a mask drops tokens (a copy).
        metrics = endtoend.workers() * 4 * self.out_features * 8 + self.tokens * self.out_features * 8
        return recorded + emulated + finals + forward + metrics

    def total(self, batch):
        return self.fixed() + self.layer(batch) + self.per_batch(batch)

    def describe(self, batch):
        parts = [f"process {_fmt_bytes(self.baseline)}", f"weights {_fmt_bytes(self.weights)}"]
        if self.reference_copy:
            parts.append(f"float32 reference copy {_fmt_bytes(self.reference_copy)}")
        if self.fp64_model:
            parts.append(f"float64 model {_fmt_bytes(self.fp64_model)}")
        parts.append(f"one layer {_fmt_bytes(self.layer(batch))}")
        chunk = self.chunk(batch)
        parts.append(f"one batch of {batch} x {self.tokens} tokens" + (f" (the head {chunk} at a time)" if chunk < batch else "")
                     + f" {_fmt_bytes(self.per_batch(batch))}")
        return f"peak memory ≈ {_fmt_bytes(self.total(batch))} (" + " + ".join(parts) + ")"

    def as_dict(self, batch):
        return {"bytes": int(self.total(batch)), "baseline": int(self.baseline), "weights": int(self.weights), "reference_copy": int(self.reference_copy),
                "fp64_model": int(self.fp64_model), "layer": int(self.layer(batch)), "batch": int(self.per_batch(batch)),
                "batch_size": int(batch), "head_chunk": int(self.chunk(batch)), "formula": "the process's baseline + weights + one layer's working set + one batch's GEMM outputs, "
                                                     "final outputs and activations (docs/verify.md)"}


def choose_batch(estimate, samples, batch_size=None, max_memory=None, budget=DEFAULT_BATCH_BUDGET):
    """Sequences per forward: --batch-size when given (refused when over --max-memory); else the most
    (at most all samples) whose estimate fits --max-memory, or whose batch adds at most
    `budget` (capture's DEFAULT_BATCH_BUDGET, verify's VERIFY_BATCH_BUDGET) to the estimate when no limit is given. Refuses with the figure when one sequence does not fit."""
    def fits(b):
        if max_memory is not None:
            return estimate.total(b) <= max_memory
        return estimate.total(b) - estimate.total(0) <= budget
    if getattr(estimate, "head", None) is not None:
        # The head's outputs a chunk of sequences at a time: as many as fit half of what a batch
        # may add (at least one), so that the body's batch, whose GEMMs repeat their work on the
        # weights once per batch, can be large (docs/decisions.md, "the head in chunks").
        room = budget if max_memory is None else max_memory - estimate.total(0)
        chunk = 1
        while chunk < samples and estimate.head_bytes(chunk + 1) <= room / 2:
            chunk += 1
        estimate.max_chunk = chunk
    if batch_size is not None:
        if batch_size < 1:
            raise VerifyError(f"--batch-size {batch_size}: expected at least 1")
        batch_size = min(batch_size, samples)
        if max_memory is not None and not fits(batch_size):
            raise VerifyError(f"--max-memory {_fmt_bytes(max_memory)}: --batch-size {batch_size} needs "
                              f"{estimate.describe(batch_size)}")
        return batch_size
    if not fits(1):
        if max_memory is None:
            return 1
        raise VerifyError(f"--max-memory {_fmt_bytes(max_memory)}: even one sequence per batch needs "
                          f"{estimate.describe(1)}")
    lo, hi = 1, samples
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


# ----------------------------------------------------------------------------------------------
# Progress on stderr (quiet under -q)


class Progress:
    """'verify: batch i/N, layer j/L, tokens t/T, elapsed, left' lines on stderr; a live line on a
    terminal, one line per batch otherwise; nothing when quiet."""

    def __init__(self, quiet, total_batches, total_tokens, command="verify"):
        self.quiet, self.total_batches, self.total_tokens = quiet, total_batches, total_tokens
        self.command = command
        self.started = time.time()
        self.live = not quiet and sys.stderr.isatty()
        self.done_tokens = 0

    def say(self, text):
        if not self.quiet:
            print(f"precis {self.command}: {text}", file=sys.stderr, flush=True)

    def layer(self, batch, index, total, name):
        if self.live:
            sys.stderr.write(f"\r\033[Kprecis {self.command}: batch {batch + 1}/{self.total_batches}, layer {index + 1}/{total} "
                             f"{name[:60]}")
            sys.stderr.flush()

    def batch_done(self, batch, tokens):
        self.done_tokens += tokens
        if self.quiet:
            return
        elapsed = time.time() - self.started
        left = elapsed / self.done_tokens * (self.total_tokens - self.done_tokens) if self.done_tokens else 0
        line = (f"batch {batch + 1}/{self.total_batches}: tokens {self.done_tokens}/{self.total_tokens}, "
                f"{elapsed:.0f} s elapsed, about {left:.0f} s left")
        if self.live:
            sys.stderr.write("\r\033[K")
        self.say(line)


# ----------------------------------------------------------------------------------------------
# Per layer: one libprecis check per planned layer, fed a batch at a time


class _LayerChecks:
    """Per planned layer, precis_layer_check (include/precis/layer_check.h): the isolated row of
    `precis run` from the reference model's inputs, and the emulated model's GEMM output measured
    against the same c_ref (the cumulative row). Nothing numeric here."""

    def __init__(self, chosen, modules, isolated, logits_layer):
        self.chosen, self.modules, self.isolated, self.logits_layer = chosen, modules, isolated, logits_layer
        self.checks = {}

    def add(self, name, a, other):
        from . import _precis
        from . import torch as pt

        k, n = _weight_shape(self.modules[name])
        if name not in self.checks:
            self.checks[name] = _precis.layer_check_open(self.chosen[name], name, k, n, name == self.logits_layer,
                                                         bool(self.isolated))
        # W as the layer holds it (an nn.Linear's [n, k]: read transposed, no copy), per call as the emulation's
        w, transposed = pt.weight_operand(*self.modules[name])
        _precis.layer_check_add(self.checks[name], np.ascontiguousarray(a, np.float32), a.shape[0], a.shape[1], k, n, w,
                                None if other is None else np.ascontiguousarray(other, np.float32), False, None,
                                transposed)

    def rows(self, name):
        """(isolated row, cumulative row) as `precis run` writes rows, or (None, None) when never called."""
        from . import _precis

        if name not in self.checks:
            return None, None
        iso, other = _precis.layer_check_rows(self.checks.pop(name))
        return (json.loads(iso) if iso else None), (json.loads(other) if other else None)


def _release_memory():
    """libprecis's blocks kept for reuse and the allocator's free pages back to the system
    (precis_release_memory): at a verify's peaks they were a third of its memory above the weights."""
    from . import _precis

    _precis.release_memory()


# The per-layer rows' default token rows (--layer-rows): each measured row costs the layer's
# isolated emulation and two float64 GEMMs (c_ref and |a|·|b|, four float32 GEMMs' worth), so every
# row of every layer made a verify 10x (int8) to 15x (bf16) a plain forward on a 135M model
# (docs/decisions.md, "verify's per-layer rows by default on 256 token rows"). The end-to-end figures
# and gates use every token whatever this is; None (--layer-rows all) measures every row.
DEFAULT_LAYER_ROWS = 256


def parse_layer_rows(text):
    """--layer-rows: a count of at least 1, or "all" (None: every row)."""
    if str(text).strip().lower() == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        raise VerifyError(f"--layer-rows {text}: expected a number of token rows (at least 1) or all") from None
    if n < 1:
        raise VerifyError(f"--layer-rows {text}: expected at least 1 (or all)")
    return n


def layer_rows_positions(layer_rows, samples, tokens):
    """--layer-rows N: the token positions of every window whose rows the per-layer checks measure,
    r = N // samples of them (at least 1), spread evenly over the window: floor((2j + 1)·T / 2r) for
    j < r (the same positions in each window, so that every sample of a layer's row has r rows).
    None (every row) when N is None or r reaches the window's T tokens (docs/verify.md)."""
    if layer_rows is None:
        return None
    if layer_rows < 1:
        raise VerifyError(f"--layer-rows {layer_rows}: expected at least 1")
    per_window = max(1, layer_rows // samples)
    if per_window >= tokens:
        return None
    return [(2 * j + 1) * tokens // (2 * per_window) for j in range(per_window)]


def _layer_rows_setting(layer_rows, positions, samples, tokens):
    """report.json's verify.layer_rows: what the per-layer rows were measured on."""
    if positions is None:
        return {"requested": layer_rows, "rows": samples * tokens, "of": samples * tokens, "positions": "all"}
    return {"requested": layer_rows, "rows": samples * len(positions), "of": samples * tokens,
            "per_window": len(positions), "positions": positions}


def _layer_rows_text(v):
    """The per-layer section's statement of the rows measured (md and html)."""
    lr = v.get("layer_rows")
    if not lr or lr["positions"] == "all":
        return None
    return (f"Per-layer rows (isolated and cumulative) on a subsample (--layer-rows {lr['requested']}): tokens "
            f"{', '.join(map(str, lr['positions']))} of each window, {lr['rows']} of {lr['of']} rows; "
            "the end-to-end figures and gates use every token.")


def _weight_shape(entry):
    module, in_major = entry
    k, n = module.weight.shape if in_major else module.weight.shape[::-1]
    return int(k), int(n)


def _as_samples(x, k):
    """A layer's input as [sequences, tokens, k], as capture and emulate see it (a 2-D input [n, k]: n samples of one token)."""
    x = x.detach().to(dtype=__import__("torch").float32)
    return x.reshape(-1, x.shape[-2] if x.dim() >= 3 else 1, k).cpu().numpy()


# ----------------------------------------------------------------------------------------------
# Verify


class VerifyResult:
    def __init__(self, report, outputs, gates, plan):
        self.report, self.outputs, self.gates, self.plan = report, outputs, gates, plan
        self.reference_outputs = self.emulated_outputs = None  # verify(keep_outputs=True) fills them

    @property
    def end_to_end(self):
        return self.report["end_to_end"]

    @property
    def per_layer(self):
        return self.report["per_layer"]

    @property
    def passed(self):
        return all(g["verdict"] == "pass" for g in self.gates)

    def exit_code(self):
        return EXIT_OK if self.passed else EXIT_GATE


def _batches(ids, batch_size):
    import torch

    for i in range(0, len(ids), batch_size):
        yield {"input_ids": torch.from_numpy(ids[i:i + batch_size])}


def _emulated_outputs(ref_model, batch, chosen, prefix, kv_ctx, target=None, gemm=None):
    """The emulated model's final outputs of one batch under another --target or another GEMM (the
    noise floor's alternative correct implementations of the same formats, precis.noise)."""
    import torch

    from . import torch as pt

    with torch.no_grad(), pt.emulate(ref_model, chosen, prefix=prefix, target=target, gemm=gemm), \
            kv_ctx or contextlib.nullcontext():
        y, _ = pt.final_output(ref_model(**pt.as_batch(batch)))
    return y.detach().float().cpu().numpy()


class _TokenRecords(dict):
    """The emulated model's GEMM outputs (precis.torch.emulate's record=) of the stated tokens only
    (--layer-rows): what the cumulative rows measure; the rest is not held until the reference pass."""

    def __init__(self, positions, tokens):
        super().__init__()
        self.positions, self.tokens = positions, tokens

    def setdefault(self, name, default=None):
        if name not in self:
            self[name] = _TokenList(self.positions, self.tokens)
        return self[name]


class _TokenList(list):
    def __init__(self, positions, tokens):
        super().__init__()
        self.positions, self.tokens = positions, tokens

    def append(self, c):
        list.append(self, np.ascontiguousarray(c[:, self.positions]) if c.shape[1] == self.tokens else c)


def _reference_tap(records, checks, modules, batch, positions, progress, index, order):
    """The reference pass's tap: each planned layer's input handed to its check with the emulated
    output of the same call (records), which is dropped once measured."""
    seen = {}
    tokens = batch["input_ids"].shape[1]

    def tap(name, module, x):
        k = _weight_shape(modules[name])[0]
        a = _as_samples(x, k)
        call = seen.get(name, 0)
        seen[name] = call + 1
        calls = records.get(name, [])
        other = calls[call] if call < len(calls) else None
        if call < len(calls):
            calls[call] = None  # measured: its memory goes now
        if positions is not None and a.shape[1] == tokens:  # --layer-rows: the stated tokens
            a = a[:, positions]  # (other was recorded at them: _TokenRecords)
        progress.layer(index, order.index(name), len(order), name)
        if name == checks.logits_layer:
            _release_memory()  # the peak of a verify: the head's check; the reference pass's freed memory goes first
        checks.add(name, a, other)
    return tap


def _run_batch(ref_model, m64, batch, chosen, modules, prefix, checks, isolated, progress, index, kv_ctx=None,
               saved_out=None, positions=None):
    """One batch: the emulated model first (its GEMM outputs recorded per layer and call), then the
    reference model, whose forward pre-hooks hand each planned layer's input with the emulated
    output of the same call to its check, and drop that output. Returns (reference final outputs,
    emulated final outputs, kind)."""
    import torch

    from . import torch as pt

    kwargs = pt.as_batch(batch)
    records = {} if positions is None else _TokenRecords(positions, batch["input_ids"].shape[1])
    _release_memory()  # what the batch before freed (docs/verify.md, "Memory")
    with torch.no_grad():
        with pt.emulate(ref_model, chosen, prefix=prefix, record=records), kv_ctx or contextlib.nullcontext():
            q_out, kind = pt.final_output(ref_model(**kwargs))
        q_out = q_out.detach().float().cpu().numpy()
        _release_memory()  # the emulation's cached blocks of the widest layer (the head's) go before the reference pass
        if saved_out is not None:  # a reference read from --reference FILE: no reference pass, no layer checks
            return saved_out, q_out, kind
        tap = _reference_tap(records, checks, modules, batch, positions, progress, index, list(chosen))
        with pt.tapped({name: modules[name][0] for name in chosen}, tap):
            ref_out, ref_kind = pt.final_output(ref_model(**kwargs))
        ref_out = ref_out.detach().float().cpu().numpy()
        if m64 is not None:
            ref_out = _final64(m64, batch)
    return ref_out, q_out, ref_kind


# ----------------------------------------------------------------------------------------------
# The head in chunks: a batch's body at once, its logits a few sequences at a time


def _head_in_chunks(model, head, modules, ids):
    """Whether verify may compute the logits layer `head` apart from the model's forward: a forward of
    one sequence's first tokens with the head deferred (precis.torch.deferred) returns the head's
    output unchanged as the model's logits. A model that transforms them after the head (soft-capping,
    a cast, a copy) is run whole, batch by batch, as before."""
    import torch

    from . import torch as pt

    if head is None:
        return False
    module = modules[head][0]
    probe = {"input_ids": torch.from_numpy(np.ascontiguousarray(ids[:1, :min(2, ids.shape[1])]))}
    try:
        with torch.no_grad(), pt.deferred(module, _weight_shape(modules[head])[1]) as held:
            out = model(**probe)
        y, kind = pt.final_output(out)
    except Exception:  # e.g. an in-place op on the logits, which the placeholder refuses: run whole
        return False
    return (kind == "logits" and held.returned_as_is(y) and held.input.dim() == 3
            and tuple(held.input.shape[:2]) == tuple(probe["input_ids"].shape))


def _body(model, kwargs, module, n_out):
    """The model's forward with its head deferred: the head's input (its last hidden states)."""
    from . import torch as pt

    with pt.deferred(module, n_out) as held:
        out = model(**kwargs)
    y, _ = pt.final_output(out)
    if not held.returned_as_is(y) or tuple(held.input.shape[:2]) != tuple(kwargs["input_ids"].shape):  # the probe (_head_in_chunks) found them so: a forward that differs per input
        raise VerifyError(f"the model's logits for {kwargs['input_ids'].shape[0]} sequences are not its head's output "
                          "unchanged, as they were for the probe of one sequence's first tokens: verify cannot compute "
                          "this model's head apart from its forward (its logits a chunk of sequences at a time)")
    return held.input


def _chunked_batch(ref_model, m64, batch, chosen, modules, prefix, checks, progress, index, head, chunk,
                   saved_out=None, positions=None, alternatives=()):
    """One batch with its head in chunks: the emulated model's body (every planned layer but the head
    emulated, their outputs recorded), the noise floor's emulated alternatives' bodies, then the
    reference body (its layers' checks as in _run_batch) and the float64 model's; then, `chunk`
    sequences at a time, the head on each model's held last hidden states. Yields (lo, hi, reference
    outputs, emulated outputs, alt_of) per chunk, alt_of(key) computing an alternative's outputs of
    the chunk when asked; the head's own check, on the batch's rows, after the last chunk."""
    import torch

    from . import torch as pt

    kwargs = pt.as_batch(batch)
    ids = batch["input_ids"]
    sequences, tokens = ids.shape[0], ids.shape[1]
    # The emulated outputs the checks measure; none with a saved reference (no checks then).
    records = None if saved_out is not None else {} if positions is None else _TokenRecords(positions, tokens)
    module = modules[head][0]
    k, n_out = _weight_shape(modules[head])
    head_recipe = chosen.get(head)
    body_layers = {name: r for name, r in chosen.items() if name != head}
    _release_memory()  # what the batch before freed (docs/verify.md, "Memory")
    with torch.no_grad():
        with pt.emulate(ref_model, chosen, prefix=prefix, record=records):
            h_q = _body(ref_model, kwargs, module, n_out)
        h_alt = {}
        for key, (target, gemm) in alternatives:
            with pt.emulate(ref_model, chosen, prefix=prefix, target=target, gemm=gemm):
                h_alt[key] = _body(ref_model, kwargs, module, n_out)
        _release_memory()
        h_ref = h64 = head64 = None
        if saved_out is None:
            tap = _reference_tap(records, checks, modules, batch, positions, progress, index, list(chosen))
            with pt.tapped({name: modules[name][0] for name in body_layers}, tap):
                h_ref = _body(ref_model, kwargs, module, n_out)
            if m64 is not None:  # the float64 model's body too, where it returns its head's output unchanged
                head64 = {n: m for n, m, _ in pt.linear_layers(m64, prefix)}[head]
                try:
                    h64 = _body(m64, kwargs, head64, n_out)
                except VerifyError:  # (a cast of float64 logits, say): its whole forward per chunk
                    h64 = None

        def emulated_head(h, lo, hi, target=None, gemm=None, record=None):
            if head_recipe is None:
                return module(h[lo:hi])
            with pt.emulate(ref_model, {head: head_recipe}, prefix=prefix, target=target, gemm=gemm, record=record):
                return module(h[lo:hi])

        def alternative(key, lo, hi):
            target, gemm = dict(alternatives)[key]
            return emulated_head(h_alt[key], lo, hi, target, gemm).detach().float().cpu().numpy()

        head_rows = []  # the reference head's inputs at the checked tokens: its check runs once per batch
        for lo in range(0, sequences, chunk):
            hi = min(sequences, lo + chunk)
            q = emulated_head(h_q, lo, hi, record=records).detach().float().cpu().numpy()
            if saved_out is not None:
                ref = saved_out[lo:hi]
            else:
                if head_recipe is not None:
                    a = _as_samples(h_ref[lo:hi], k)
                    head_rows.append(np.ascontiguousarray(a[:, positions]) if positions is not None else a)
                ref = module(h_ref[lo:hi]).detach().float().cpu().numpy()
                if h64 is not None:
                    ref = head64(h64[lo:hi]).numpy()
                elif m64 is not None:
                    ref = _final64(m64, {"input_ids": ids[lo:hi]})
            yield lo, hi, ref, q, functools.partial(alternative, lo=lo, hi=hi)
            del ref, q
        del h_q, h_alt, h_ref, h64
        if head_rows:
            a = np.concatenate(head_rows)
            del head_rows
            recorded = records.pop(head, None)
            other = np.concatenate(recorded) if recorded else None
            del recorded  # the chunks' arrays go; only their concatenation is measured
            progress.layer(index, list(chosen).index(head), len(chosen), head)
            _release_memory()  # the peak of a verify: the head's check
            checks.add(head, a, other)


def verify(model, plan, inputs, *, tokenizer=None, out=None, require=(), alpha=0.05, layer_threshold=0.01, tokens=64,
           samples=None, batch_size=None, reference="fp32", prefix="", isolated=True, force=False, max_memory=None,
           quiet=True, model_name=None, inputs_name=None, plan_name=None, command=None, resamples=2000, kv=None,
           attention=None, kv_calibration=None, keep_outputs=False, score="all", save_reference=None, noise=None,
           model_fingerprint=None, layer_rows=DEFAULT_LAYER_ROWS):
    """Reference vs emulated model on held-out inputs; returns a VerifyResult and, with out=DIR,
    writes report.json, report.csv, report.md and report.html there. model: a torch module (its
    layers where accelerate's device_map put them); plan: plan.json, a {layer glob: recipe} mapping
    (dict or JSON file); inputs: token ids [samples, tokens] (array, tensor or .npy) or a text file
    (with tokenizer); require: end-to-end gates such as "kl_mean<=0.01" judged at level alpha;
    layer_threshold: the cumulative rel_fro (worst over samples) whose first crossing is reported;
    reference: "fp32" or "fp64"; isolated: True (each layer's isolated row computed in the reference
    pass), False or "skip" (none), or the path of a report.json of `precis run` on the same inputs
    (its rows are taken); batch_size: sequences per forward (default: as many as fit, see
    choose_batch; a tensor scale spans one batch in both the isolated and the emulated GEMMs);
    max_memory: bytes the estimate must fit (docs/verify.md, "Memory"); quiet: no progress on stderr.
    kv ("K[,V]", precis.kvcache) and attention (a recipe, precis.attention) emulate the KV cache and
    attention's GEMMs too, or alone with plan None; a plan file's "kv"/"attention" keys do the same.
    kv_calibration: inputs whose K and V calibrate static KV scales (default: inputs).
    keep_outputs: the result also holds both models' final outputs (reference_outputs,
    emulated_outputs: float32 [samples, ...]), for a caller that checks them bit for bit; off by
    default, since they are the one thing verify otherwise drops per batch.
    layer_rows: the per-layer rows (isolated and cumulative) on about this many token rows, the same
    evenly spread positions of every window (layer_rows_positions; default DEFAULT_LAYER_ROWS, 256);
    end-to-end figures use every token. None: every row."""
    import torch

    from . import attention_check, kvcache
    from . import torch as pt

    started, cpu_started = time.time(), time.process_time()
    saved = None  # a reference computed once (precis.reference): its tokens and outputs
    if reference not in ("fp32", "fp64"):
        if not os.path.isfile(str(reference)):
            raise VerifyError(f"--reference {reference}: expected fp32, fp64 or a file of --save-reference (no such file)")
        saved = reference_file_mod.load(str(reference))
    gates = [endtoend.parse_gate(r) for r in require]
    noise = noise_mod.expand(noise)  # "default" (or None) stands for noise.DEFAULT; each parsed here
    ids = load_inputs(inputs, tokenizer, tokens, samples)
    if len(ids) == 0:
        raise VerifyError("no input samples")
    fingerprint = None
    if saved is not None or save_reference:  # model_fingerprint: the caller's, computed once for many verifies
        fingerprint = model_fingerprint or reference_file_mod.model_fingerprint(model)
    if saved is not None:
        reference_file_mod.check(saved, fingerprint=fingerprint, ids=ids)
    plan, plan_kv, plan_attention = kvcache.split_plan(plan)
    kv, attention = kv or plan_kv, attention or plan_attention
    chosen = pt.resolve_plan(model, plan, prefix) if plan is not None else {}
    if not chosen and not kv and not attention:
        raise VerifyError("the plan selects no linear layer of the model (and no --kv or --attention)")
    layers = list(chosen)
    modules = {n: (m, im) for n, m, im in pt.linear_layers(model, prefix)}
    if out is not None and not force and os.path.exists(os.path.join(out, "report.json")):
        raise VerifyError(f"{out}/report.json exists (--force replaces it)")
    from_report = isolated if isinstance(isolated, (str, os.PathLike)) and isolated != "skip" else None
    compute_isolated = isolated is True and bool(chosen) and saved is None
    taken = _rows_from_report(from_report, chosen) if from_report else None

    model.eval()
    ref_copy = not all(p.dtype == torch.float32 for p in model.parameters())
    out_features = _output_features(model)
    logits_layer = _logits_layer(model, modules, prefix)
    if isinstance(layer_rows, str):
        layer_rows = parse_layer_rows(layer_rows)
    positions = layer_rows_positions(layer_rows, len(ids), ids.shape[1])
    # The logits layer apart from the forward, a chunk of sequences at a time, where the model returns
    # its output unchanged (docs/decisions.md, "the head in chunks"); with --kv or --attention the
    # model runs whole, batch by batch (their records follow one forward's calls).
    noise_emulated = sum(1 for t in noise or () if not t.startswith("reference="))
    baseline = process_baseline(model)  # before the probe's forward reads in weights mapped from their file
    chunk_head = (logits_layer if not (kv or attention) and _head_in_chunks(model, logits_layer, modules, ids)
                  else None)
    estimate = MemoryEstimate(model, ref_copy, reference == "fp64", layers, modules, ids.shape[1], out_features,
                              compute_isolated, check_tokens=None if positions is None else len(positions),
                              baseline=baseline, recipes=chosen, head=chunk_head,
                              alternatives=noise_emulated)
    batch_size = choose_batch(estimate, len(ids), batch_size, max_memory, budget=VERIFY_BATCH_BUDGET)
    head_chunk = estimate.chunk(batch_size) if chunk_head is not None else None
    n_batches = (len(ids) + batch_size - 1) // batch_size
    progress = Progress(quiet, n_batches, int(ids.size))
    progress.say(f"{len(ids)} samples x {ids.shape[1]} tokens in {n_batches} batches of {batch_size}"
                 + ("" if head_chunk is None or head_chunk >= batch_size else f" (the head {head_chunk} at a time)")
                 + f"; {len(layers)} planned "
                 f"layers" + ("" if positions is None else f", their rows on {len(ids) * len(positions)} of {ids.size} token "
                              f"rows (--layer-rows {layer_rows})") + f"; {estimate.describe(batch_size)}")
    ref_model = model if not ref_copy else copy.deepcopy(model).float()
    if ref_model is not model:  # the modules that run: the float32 copy's (hooks on the original's would never fire)
        modules = {n: (m, im) for n, m, im in pt.linear_layers(ref_model, prefix)}
    m64 = copy.deepcopy(ref_model).double() if reference == "fp64" and saved is None else None
    checks = _LayerChecks(chosen, modules, compute_isolated, logits_layer)
    kv_ctx, att_emulated = None, []
    if kv or attention:
        # Calibrated KV scales come from a pass of their own, once; the context is then entered
        # around each batch's emulated forward only.
        calib = ids if kv_calibration is None else load_inputs(kv_calibration, tokenizer, tokens, samples)
        kv_ctx = kvcache.kv_cache(ref_model, kv, attention=attention, calibration=list(_batches(calib, batch_size)),
                                  record=att_emulated if attention and saved is None else None)
    att_checks = None
    if kv_ctx is not None and kv_ctx.recipe is not None and saved is None:  # attention's QKᵀ and PV rows
        att_checks = attention_check.AttentionChecks(kv_ctx.recipe, isolated is True)
    noise_alts = [noise_mod.parse(t) for t in noise or ()]
    alt_parts = {f"{k}={v}": [] for k, v in noise_alts}
    alt_gemms = {f"{k}={v}": noise_mod.OperandGemm(f"{k}={v}") for k, v in noise_alts if k in ("sum", "gemm")}
    m64_noise = None
    if any(k == "reference" for k, _ in noise_alts):
        m64_noise = m64 if m64 is not None else copy.deepcopy(ref_model).double()
    parts, kind, kept, to_save = [], None, ([], []), []

    def take(ref_c, q_c, ids_c, kind, alt_of):
        """One batch's or head chunk's outputs into the end-to-end figures, the noise floor's, and what
        is kept or saved; alt_of(key) gives an emulated alternative's outputs of the same sequences."""
        lab = None
        if kind == "logits":
            lab = np.full(ids_c.shape, -100, np.int64)
            lab[:, :-1] = ids_c[:, 1:]
        parts.append(endtoend.Outputs.compare(ref_c, q_c, labels=lab, kind=kind, score=score))
        for k, v in noise_alts:
            if k != "reference":
                alt = endtoend.Outputs.compare(ref_c, alt_of(f"{k}={v}"), labels=lab, kind=kind, score=score)
            else:
                alt = endtoend.Outputs.compare(_final64(m64_noise, {"input_ids": torch.from_numpy(np.ascontiguousarray(ids_c))}),
                                               q_c, labels=lab, kind=kind, score=score)
            alt_parts[f"{k}={v}"].append(alt)
        if save_reference:
            to_save.append(ref_c)  # the one part of verify that holds every batch's outputs: asked for
        if keep_outputs:
            kept[0].append(np.asarray(ref_c, np.float32))
            kept[1].append(q_c)

    # The emulated alternatives of the noise floor, computed as the plan is (precis.noise).
    alternatives = [(f"{k}={v}", (v if k == "target" else None, alt_gemms.get(f"{k}={v}")))
                    for k, v in noise_alts if k != "reference"]
    for index, batch in enumerate(_batches(ids, batch_size)):
        lo = index * batch_size
        b_ids = batch["input_ids"].numpy()
        saved_b = None if saved is None else np.asarray(saved.outputs[lo:lo + len(b_ids)])
        if head_chunk is not None:
            for c_lo, c_hi, ref_c, q_c, alt_of in _chunked_batch(ref_model, m64, batch, chosen, modules, prefix, checks,
                                                                 progress, index, logits_layer, head_chunk, saved_b,
                                                                 positions, alternatives):
                kind = "logits"
                take(ref_c, q_c, b_ids[c_lo:c_hi], kind, alt_of)
                del ref_c, q_c
        else:
            att_emulated.clear()
            ref_b, q_b, kind = _run_batch(ref_model, m64, batch, chosen, modules, prefix, checks, compute_isolated,
                                          progress, index, kv_ctx, saved_b, positions)
            if att_checks is not None:  # the emulated pass recorded its attention calls into att_emulated
                att_checks.add(att_checks.reference_records(ref_model, batch, {n: modules[n][0] for n in chosen}),
                               att_emulated)
                att_emulated.clear()
            take(ref_b, q_b, b_ids, kind,
                 lambda key, batch=batch: _emulated_outputs(ref_model, batch, chosen, prefix, kv_ctx, *dict(alternatives)[key]))
            del ref_b, q_b
        progress.batch_done(index, int(b_ids.size))
    del m64, m64_noise
    outputs = endtoend.Outputs(kind, [st for p in parts for st in p.stats], parts[0].score)
    if save_reference:
        reference_file_mod.save(save_reference, ids, np.concatenate(to_save), kind=kind, reference=reference,
                                fingerprint=fingerprint, model_name=model_name or type(model).__name__,
                                model_class=type(model).__name__)
        del to_save
    # One bootstrap over samples for the gates' bounds and the noise floor's sampling interval.
    boot = endtoend.bootstrap(outputs, resamples) if gates or noise_alts else None
    judged = endtoend.judge(outputs, gates, alpha=alpha, resamples=resamples, boot=boot) if gates else []
    noise_table = None
    if noise_alts:  # the same formats computed another correct way (precis.noise), batch by batch above
        alt_metrics = {key: endtoend.Outputs(kind, [st for p in ps for st in p.stats], outputs.score).metrics()
                       for key, ps in alt_parts.items()}
        noise_table = noise_mod.floors(outputs.metrics(), alt_metrics, boot=boot, alpha=alpha)
        noise_mod.mark_gates(judged, noise_table)
    del boot

    per_layer, rows = _per_layer(layers, chosen, modules, checks, taken) if saved is None else ([], [])
    if att_checks is not None:
        per_layer, rows = attention_check.merge(per_layer, rows, att_checks)
    crossing = next((e for e in per_layer if e.get("called") and e["cumulative"]["rel_fro"]["worst"] > layer_threshold), None)
    reference_label = reference if saved is None else f"{saved.reference}, read from {reference}"
    e2e = {"kind": outputs.kind, "reference": reference_label, "samples": len(outputs), "tokens": outputs.tokens(),
           "tokens_per_sample": int(ids.shape[1]), "scored_positions": outputs.score,
           "metrics": outputs.metrics(), "per_sample": outputs.per_sample(),
           "alpha": alpha, "method": f"percentile bootstrap over samples, {resamples} resamples, seed 0",
           "gates": judged,
           "verdict": None if not judged else ("pass" if all(g["verdict"] == "pass" for g in judged)
                                               else "fail" if any(g["verdict"] == "fail" for g in judged) else "undecided")}
    if noise_table is not None:
        e2e["noise_floor"] = {"alternatives": list(noise), "label": noise_mod.LABEL,
                              "label_with_sampling": noise_mod.LABEL_WITH_SAMPLING,
                              "floor": "max - min of each metric over the plan and the alternatives",
                              "interval": (f"two-sided {1 - alpha:.0%}: the {alpha / 2:g} and {1 - alpha / 2:g} quantiles "
                                           f"of the metric's percentile bootstrap over samples ({resamples} resamples, "
                                           "seed 0, the gates' draws)"),
                              "with_sampling": "the ideal value within [min(lo, value) - floor, max(hi, value) + floor]",
                              "computed_as_plan": {alt: g.as_plan for alt, g in alt_gemms.items() if g.as_plan},
                              "metrics": noise_table}
    block = outputs.block()
    if block is not None:
        e2e["llamacpp"] = block  # llama.cpp's --kl-divergence block and ExLlamaV3's figures (precis.kld)
    report = _report_skeleton(chosen, rows, from_report)
    report["end_to_end"] = e2e
    report["per_layer"] = per_layer
    report["verify"] = {"model": model_name or type(model).__name__, "plan": plan_name,
                        "inputs": inputs_name, "samples": int(ids.shape[0]), "tokens": int(ids.shape[1]),
                        "batch_size": int(batch_size),
                        "head_chunk": None if head_chunk is None else int(head_chunk),
                        "layer_rows": _layer_rows_setting(layer_rows, positions, len(ids), int(ids.shape[1])),
                        "isolated": ("computed in the reference pass" if compute_isolated else
                                     f"taken from {os.fspath(from_report)}" if from_report else "skipped"),
                        "memory_estimate": estimate.as_dict(batch_size),
                        "layer_threshold": {"metric": "rel_fro", "of": "cumulative, worst over samples",
                                            "value": layer_threshold},
                        "first_crossing": None if crossing is None else {"layer": crossing["layer"],
                                                                         "depth": crossing["depth"],
                                                                         "rel_fro": crossing["cumulative"]["rel_fro"]["worst"]},
                        "seconds": round(time.time() - started, 3),
                        "cpu_seconds": round(time.process_time() - cpu_started, 3)}
    if kv_ctx is not None:
        report["verify"]["kv"] = None if not kv else {
            "k": kv_ctx.k_fmt.text, "v": kv_ctx.v_fmt.text,
            "bytes_per_token": kvcache.bytes_per_token(ref_model, kv_ctx.k_fmt, kv_ctx.v_fmt),
            "bytes_per_token_bf16": kvcache.bytes_per_token(ref_model, kvcache.KVFormat("bf16"), kvcache.KVFormat("bf16")),
            "calibration": None if not (kv_ctx.k_fmt.calibrated or kv_ctx.v_fmt.calibrated)
            else ("inputs" if kv_calibration is None else str(kv_calibration))}
        report["verify"]["attention"] = None if kv_ctx.recipe is None else {
            "recipe": kv_ctx.recipe.text, "qk": kv_ctx.recipe.qk, "pv": kv_ctx.recipe.pv}
    if saved is not None:
        report["verify"]["per_layer_skipped"] = ("the reference was read from a file: per-layer errors need the reference "
                                                 "model's layer inputs, which only a reference pass has")
    if command:
        report["environment"]["command"] = command
    if out is not None:
        write_report(out, report)
    result = VerifyResult(report, outputs, judged, chosen)
    if keep_outputs:
        result.reference_outputs, result.emulated_outputs = (np.concatenate(k) for k in kept)
    return result


def _output_features(model):
    config = getattr(model, "config", None)
    for key in ("vocab_size", "hidden_size"):
        v = getattr(config, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return max((m.weight.shape[0] for m in model.modules() if isinstance(m, __import__("torch").nn.Linear)), default=1)


def _logits_layer(model, modules, prefix):
    """The planned layer whose outputs are logits, by the rule `precis import --model` marks them
    (output_kind "logits"): named lm_head or *.lm_head; None when the model has none."""
    return next((n for n in modules if n == "lm_head" or n.endswith(".lm_head")), None)


def _rows_from_report(path, chosen):
    """layer -> row of a `precis run` report (report.json) of the same inputs, for each planned layer
    with its recipe; a planned layer without one is refused."""
    path = os.fspath(path)
    try:
        with open(path) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        raise VerifyError(f"--isolated {path}: cannot read the report: {e}") from None
    if rep.get("format") != "precis-report" or not isinstance(rep.get("rows"), list):
        raise VerifyError(f"--isolated {path}: not a precis report (format precis-report with rows)")
    import precis

    by = {}
    for r in rep["rows"]:
        by[(r.get("layer") or r.get("workload"), r.get("spec"))] = r
    out = {}
    for name, recipe in chosen.items():
        row = by.get((name, precis.spec(recipe)))
        if row is None:
            raise VerifyError(f"--isolated {path}: no row of layer {name} with recipe {recipe} ({precis.spec(recipe)})")
        out[name] = row
    return out


def _per_layer(layers, chosen, modules, checks, taken):
    per_layer, rows = [], []
    for depth, name in enumerate(layers):
        iso_row, cum_row = checks.rows(name)
        if taken is not None:
            iso_row = dict(taken[name])
        if cum_row is None:
            per_layer.append({"layer": name, "depth": depth, "recipe": chosen[name], "called": False})
            continue
        k, n = _weight_shape(modules[name])
        cumulative = {"rel_fro": dict(cum_row["error"]["rel_fro"]), "error": cum_row["error"]}
        if "logits" in cum_row:
            cumulative["logits"] = cum_row["logits"]
        entry = {"layer": name, "depth": depth, "recipe": chosen[name], "called": True, "k": k, "n": n,
                 "cumulative": cumulative, "isolated": None}
        if iso_row is not None:
            entry["isolated"] = {"rel_fro": iso_row["error"]["rel_fro"], "status": iso_row["status"],
                                 "verdict": iso_row["verdict"]}
            iso_row["cumulative"] = {"rel_fro": cumulative["rel_fro"]}
            rows.append(iso_row)
        per_layer.append(entry)
    return per_layer, rows


def _report_skeleton(chosen, rows, from_report):
    import precis

    version, commit = precis.__version__, precis.__commit__
    return {"format": "precis-report", "format_version": 1, "complete": True,
            "tool": {"name": "precis", "version": version, "commit": commit},
            "environment": {"backend": "cpu-emulation", "device": None},
            "dataset": {"path": None if not from_report else os.fspath(from_report), "dataset_id": None},
            "settings": {"recipes": list(dict.fromkeys(chosen.values())), "criteria": []}, "rows": rows}


def _final64(model64, batch):
    import torch

    from . import torch as pt

    kwargs = pt.as_batch(batch)
    with torch.no_grad():
        y, _ = pt.final_output(model64(**kwargs))
    return y.numpy()


# ----------------------------------------------------------------------------------------------
# Report files


def _fmt(x):
    if x is None:
        return "–"
    if isinstance(x, float):
        if math.isinf(x) or math.isnan(x):
            return str(x)
        if x != 0 and (abs(x) < 1e-4 or abs(x) >= 1e6):
            return f"{x:.3g}"
        return f"{x:.4g}"
    return str(x)


def _write(path, text):
    """Written to a temporary name, renamed; the temporary file is removed whatever stops the write
    (an interrupt included)."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


CSV_COLUMNS = ("workload", "layer", "recipe", "spec", "m", "n", "k", "batch", "status", "verdict", "rel_fro_worst",
               "rel_fro_mean", "max_abs_worst", "max_cw_worst", "cumulative_rel_fro_worst", "cumulative_rel_fro_mean")


def render_csv(report):
    """The rows (isolated, with the cumulative rel_fro beside), one line each (RFC 4180, CRLF)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(CSV_COLUMNS)
    for r in report["rows"]:
        err = r.get("error") or {}

        def worst(key, part="worst"):
            v = err.get(key)
            return "" if not v else v.get(part)
        cum = (r.get("cumulative") or {}).get("rel_fro") or {}
        w.writerow([r.get("workload"), r.get("layer"), r.get("recipe"), r.get("spec"), r.get("m"), r.get("n"), r.get("k"),
                    r.get("batch"), r.get("status"), r.get("verdict") or "", worst("rel_fro"), worst("rel_fro", "mean"),
                    worst("max_abs"), worst("max_cw"), cum.get("worst", ""), cum.get("mean", "")])
    return buf.getvalue()


def write_report(out, report):
    os.makedirs(out, exist_ok=True)
    _write(os.path.join(out, "report.json"), json.dumps(report, indent=1, allow_nan=False, default=_json_default) + "\n")
    _write(os.path.join(out, "report.csv"), render_csv(report))
    _write(os.path.join(out, "report.md"), render_markdown(report))
    _write(os.path.join(out, "report.html"), render_html(report))


def _json_default(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    raise TypeError(f"not JSON: {type(x).__name__}")


def _md(text):
    s = str(text)
    for ch in "\\|`*_[]~":
        s = s.replace(ch, "\\" + ch)
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _e2e_lines(e2e):
    m = e2e["metrics"]
    if e2e["kind"] == "logits":
        rows = [("KL(ref‖q) per token", "kl_mean", "kl_p99", "kl_max"), ("KL(q‖ref) per token", "rkl_mean", "rkl_p99", "rkl_max")]
        lines = ["| metric | mean | p99 | max |", "|---|---|---|---|"]
        lines += [f"| {t} | {_fmt(m[a])} | {_fmt(m[b])} | {_fmt(m[c])} |" for t, a, b, c in rows]
        lines += ["", "| top-1 agreement | top-5 overlap | CE ref | CE emulated | Δ CE |", "|---|---|---|---|---|",
                  f"| {_fmt(m['top1_agree'])} | {_fmt(m['top5_overlap'])} | {_fmt(m.get('ce_ref'))} | {_fmt(m.get('ce_q'))} "
                  f"| {_fmt(m.get('ce_delta'))} |"]
    else:
        lines = ["| cosine mean | cosine min | rel_fro mean | rel_fro max |", "|---|---|---|---|",
                 f"| {_fmt(m['cosine_mean'])} | {_fmt(m['cosine_min'])} | {_fmt(m['rel_fro_mean'])} | {_fmt(m['rel_fro_max'])} |"]
    return lines


def render_markdown(report):
    e2e, v = report["end_to_end"], report["verify"]
    out = ["# precis verify", ""]
    out.append(f"Model `{_md(v['model'])}`, plan `{_md(v['plan'])}`, inputs `{_md(v['inputs'])}`: {v['samples']} samples "
               f"of {v['tokens']} tokens; reference {e2e['reference']}; {_fmt(v['seconds'])} s.")
    if not report.get("complete", True):
        out += ["", "**INCOMPLETE**"]
    out += ["", "## End to end", "", f"The model's final outputs ({e2e['kind']}), emulated against the reference, "
            f"over {e2e['samples']} samples ({e2e['tokens']} tokens):", ""]
    out += _e2e_lines(e2e)
    if e2e.get("noise_floor"):
        nf = e2e["noise_floor"]
        out += ["", f"### Implementation noise floor ({', '.join(nf['alternatives'])})", "",
                "The same formats computed other correct ways; the floor is the spread of each metric across them and "
                "the plan (max − min); a metric whose departure from its ideal value is within the floor is "
                f"*{nf['label']}*; one whose ideal value is within the floor of its sampling interval ({nf['interval']}) "
                f"is *{nf['label_with_sampling']}*.", "",
                "| metric | value | ideal | floor | sampling interval | verdict |", "|---|---|---|---|---|---|"]
        for name, f in nf["metrics"].items():
            iv = "—" if f.get("interval") is None else f"[{_fmt(f['interval'][0])}, {_fmt(f['interval'][1])}]"
            words = noise_mod.verdict(f)
            out.append(f"| {name} | {_fmt(f['value'])} | {_fmt(f['ideal'])} | {_fmt(f['floor'])} | {iv} | "
                       f"{'**' + words + '**' if f['noise'] or f.get('noise_and_sampling') else words} |")
        for alt, recipes in nf.get("computed_as_plan", {}).items():
            for recipe, why in recipes.items():
                out.append(f"\n{alt}: layers of {recipe} computed as the plan ({why}).")
    if e2e.get("llamacpp"):
        out += ["", "### llama.cpp's `--kl-divergence` block, ExLlamaV3's figures", "",
                "Definitions and sources: docs/verify.md (\"The figures users compare\"); reference = base, emulated = Q.",
                "", "```", kld.render_text(e2e["llamacpp"]), "```"]
    if e2e["gates"]:
        out += ["", f"### Gates (α = {e2e['alpha']}, {e2e['method']})", "", "| requirement | value | bound | verdict |",
                "|---|---|---|---|"]
        for g in e2e["gates"]:
            verdict = {"pass": "pass", "fail": "**FAIL**", "undecided": "**too few samples to decide**"}[g["verdict"]]
            if g.get("noise"):
                verdict += f" ({noise_mod.LABEL})"
            elif g.get("noise_and_sampling"):
                verdict += f" ({noise_mod.LABEL_WITH_SAMPLING})"
            out.append(f"| `{g['expression']}` | {_fmt(g['value'])} | {_fmt(g['bound'])} | {verdict} |")
        out += ["", f"Verdict: **{e2e['verdict']}**."]
    fc = v["first_crossing"]
    thr = v["layer_threshold"]["value"]
    out += ["", "## Per layer", "",
            "Isolated: the layer alone on the reference model's inputs (`precis run`); cumulative: its output inside "
            "the emulated model against a·W of the reference model's input. rel_fro, worst over samples (mean).", ""]
    if _layer_rows_text(v):
        out += [_md(_layer_rows_text(v)), ""]
    out.append(f"First layer whose cumulative rel_fro exceeds {_fmt(thr)}: "
               + (f"**{_md(fc['layer'])}** (depth {fc['depth']}, {_fmt(fc['rel_fro'])})." if fc else "none."))
    out += ["", "| # | layer | recipe | isolated | cumulative | cumulative / isolated |", "|---|---|---|---|---|---|"]
    for e in report["per_layer"]:
        if not e.get("called"):
            out.append(f"| {e['depth']} | {_md(e['layer'])} | {_md(e['recipe'])} | never called | | |")
            continue
        iso = e["isolated"]["rel_fro"] if e.get("isolated") else None
        cum = e["cumulative"]["rel_fro"]
        ratio = cum["worst"] / iso["worst"] if iso and iso["worst"] else None
        mark = " ✗" if cum["worst"] > thr else ""
        out.append(f"| {e['depth']} | {_md(e['layer'])} | {_md(e['recipe'])} | "
                   f"{_fmt(iso['worst']) if iso else '–'} ({_fmt(iso['mean']) if iso else '–'}) | "
                   f"{_fmt(cum['worst'])} ({_fmt(cum['mean'])}){mark} | {_fmt(ratio)} |")
    out += ["", "## Per sample", ""]
    keys = [k for k in (e2e["per_sample"][0] if e2e["per_sample"] else []) if k not in kld.GATE_METRICS]
    out += ["| sample | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for i, s in enumerate(e2e["per_sample"]):
        out.append(f"| {i} | " + " | ".join(_fmt(s.get(k)) for k in keys) + " |")
    return "\n".join(out) + "\n"


def _depth_chart(per_layer, threshold):
    pts = [e for e in per_layer if e.get("called")]
    if not pts:
        return ""
    vals = [e["cumulative"]["rel_fro"]["worst"] for e in pts]
    vals += [e["isolated"]["rel_fro"]["worst"] for e in pts if e.get("isolated") and e["isolated"]["rel_fro"]["worst"]]
    vals.append(threshold)
    pos = [v for v in vals if v and v > 0 and math.isfinite(v)]
    lo = math.floor(math.log10(min(pos))) if pos else -8
    hi = math.ceil(math.log10(max(pos))) if pos else 0
    if hi <= lo:
        hi = lo + 1
    w, h, left, right, top, bottom = 760, 300, 60, 20, 20, 50
    n = len(pts)

    def x(i):
        return left + (w - left - right) * (i / max(n - 1, 1))

    def y(v):
        v = max(v, 10.0 ** lo) if v and v > 0 else 10.0 ** lo
        if not math.isfinite(v):
            v = 10.0 ** hi
        return top + (h - top - bottom) * (hi - math.log10(v)) / (hi - lo)

    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
         f'aria-label="cumulative and isolated rel_fro along depth">']
    for d in range(lo, hi + 1):
        s.append(f'<line x1="{left}" x2="{w - right}" y1="{y(10.0 ** d):.1f}" y2="{y(10.0 ** d):.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{left - 6}" y="{y(10.0 ** d) + 4:.1f}" text-anchor="end" font-size="11">1e{d}</text>')
    s.append(f'<line x1="{left}" x2="{w - right}" y1="{y(threshold):.1f}" y2="{y(threshold):.1f}" stroke="#c00" '
             f'stroke-dasharray="6 4"/><text x="{w - right}" y="{y(threshold) - 4:.1f}" text-anchor="end" font-size="11" '
             f'fill="#c00">threshold {html.escape(_fmt(threshold))}</text>')
    cum = " ".join(f"{x(i):.1f},{y(e['cumulative']['rel_fro']['worst']):.1f}" for i, e in enumerate(pts))
    s.append(f'<polyline points="{cum}" fill="none" stroke="#1f5fa8" stroke-width="2"/>')
    iso_pts = [(i, e["isolated"]["rel_fro"]["worst"]) for i, e in enumerate(pts) if e.get("isolated")]
    if iso_pts:
        iso = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in iso_pts)
        s.append(f'<polyline points="{iso}" fill="none" stroke="#888" stroke-width="1.5" stroke-dasharray="4 3"/>')
    for i, e in enumerate(pts):
        v = e["cumulative"]["rel_fro"]["worst"]
        s.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="{4 if v > threshold else 2.5}" '
                 f'fill="{"#c00" if v > threshold else "#1f5fa8"}"><title>{html.escape(e["layer"])} '
                 f'({html.escape(e["recipe"])}): cumulative {html.escape(_fmt(v))}</title></circle>')
    s.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle" font-size="12">layer (model order, '
             f'0 … {n - 1})</text>')
    s.append(f'<text x="{left + 8}" y="{top + 12}" font-size="11" fill="#1f5fa8">cumulative</text>'
             f'<text x="{left + 90}" y="{top + 12}" font-size="11" fill="#888">isolated (dashed)</text>')
    s.append("</svg>")
    return "".join(s)


def render_html(report):
    e2e, v = report["end_to_end"], report["verify"]
    esc = html.escape
    md_tables = _e2e_lines(e2e)

    def table(lines):
        rows = [ln.strip("|").split("|") for ln in lines if ln and not ln.startswith("|---")]
        if not rows:
            return ""
        head = "".join(f"<th>{esc(c.strip())}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(f"<td>{esc(c.strip())}</td>" for c in r) + "</tr>" for r in rows[1:])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    parts = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>precis verify</title><style>",
             "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:.6em 0}"
             "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px;text-align:right}td:nth-child(2){text-align:left}"
             ".pass{color:#060}.fail{color:#b00;font-weight:bold}.undecided{color:#a60;font-weight:bold}"
             ".over{background:#fdd}", "</style></head><body>", "<h1>precis verify</h1>"]
    if not report.get("complete", True):
        parts.append("<p class=\"fail\">INCOMPLETE</p>")
    parts.append(f"<p>Model <code>{esc(str(v['model']))}</code>, plan <code>{esc(str(v['plan']))}</code>, inputs "
                 f"<code>{esc(str(v['inputs']))}</code>: {v['samples']} samples of {v['tokens']} tokens; reference "
                 f"{esc(e2e['reference'])}.</p>")
    parts.append(f"<h2>End to end ({esc(e2e['kind'])})</h2>")
    split = md_tables.index("") if "" in md_tables else len(md_tables)
    parts.append(table(md_tables[:split]))
    if split < len(md_tables):
        parts.append(table(md_tables[split + 1:]))
    if e2e.get("noise_floor"):
        nf = e2e["noise_floor"]
        parts.append(f"<h3>Implementation noise floor ({esc(', '.join(nf['alternatives']))})</h3><table><thead><tr>"
                     "<th>metric</th><th>value</th><th>ideal</th><th>floor</th><th>sampling interval</th><th>verdict</th>"
                     "</tr></thead><tbody>")
        for name, f in nf["metrics"].items():
            iv = "—" if f.get("interval") is None else f"[{_fmt(f['interval'][0])}, {_fmt(f['interval'][1])}]"
            parts.append(f"<tr><td>{esc(name)}</td><td>{esc(_fmt(f['value']))}</td><td>{esc(_fmt(f['ideal']))}</td>"
                         f"<td>{esc(_fmt(f['floor']))}</td><td>{esc(iv)}</td><td>{esc(noise_mod.verdict(f))}</td></tr>")
        parts.append("</tbody></table><p>The floor: the spread (max − min) of each metric over the plan and the "
                     f"alternatives; the sampling interval: {esc(nf['interval'])}; {esc(nf['label_with_sampling'])}: "
                     f"{esc(nf['with_sampling'])}.</p>")
        for alt, recipes in nf.get("computed_as_plan", {}).items():
            for recipe, why in recipes.items():
                parts.append(f"<p>{esc(alt)}: layers of {esc(recipe)} computed as the plan ({esc(why)}).</p>")
    if e2e.get("llamacpp"):
        parts.append("<h3>llama.cpp's --kl-divergence block, ExLlamaV3's figures</h3><pre>"
                     + esc(kld.render_text(e2e["llamacpp"])) + "</pre>")
    if e2e["gates"]:
        parts.append(f"<h3>Gates (α = {esc(str(e2e['alpha']))}, {esc(e2e['method'])})</h3><table><thead><tr><th>requirement"
                     "</th><th>value</th><th>bound</th><th>verdict</th></tr></thead><tbody>")
        for g in e2e["gates"]:
            label = {"pass": "pass", "fail": "FAIL", "undecided": "too few samples to decide"}[g["verdict"]]
            if g.get("noise"):
                label += f" ({noise_mod.LABEL})"
            elif g.get("noise_and_sampling"):
                label += f" ({noise_mod.LABEL_WITH_SAMPLING})"
            parts.append(f"<tr><td>{esc(g['expression'])}</td><td>{esc(_fmt(g['value']))}</td><td>{esc(_fmt(g['bound']))}</td>"
                         f"<td class=\"{g['verdict']}\" title=\"{esc(g['detail'])}\">{esc(label)}</td></tr>")
        parts.append("</tbody></table>")
    thr = v["layer_threshold"]["value"]
    fc = v["first_crossing"]
    parts.append("<h2>Cumulative error along depth</h2>")
    parts.append(f"<p>First layer whose cumulative rel_fro exceeds {esc(_fmt(thr))}: "
                 + (f"<b>{esc(fc['layer'])}</b> (depth {fc['depth']}, {esc(_fmt(fc['rel_fro']))})" if fc else "none") + ".</p>")
    parts.append(_depth_chart(report["per_layer"], thr))
    parts.append("<h2>Per layer</h2>")
    if _layer_rows_text(v):
        parts.append(f"<p>{esc(_layer_rows_text(v))}</p>")
    parts.append("<table><thead><tr><th>#</th><th>layer</th><th>recipe</th><th>isolated worst</th>"
                 "<th>isolated mean</th><th>cumulative worst</th><th>cumulative mean</th></tr></thead><tbody>")
    for e in report["per_layer"]:
        if not e.get("called"):
            parts.append(f"<tr><td>{e['depth']}</td><td>{esc(e['layer'])}</td><td>{esc(e['recipe'])}</td>"
                         "<td colspan=4>never called</td></tr>")
            continue
        iso = e["isolated"]["rel_fro"] if e.get("isolated") else {"worst": None, "mean": None}
        cum = e["cumulative"]["rel_fro"]
        cls = " class=\"over\"" if cum["worst"] > thr else ""
        parts.append(f"<tr{cls}><td>{e['depth']}</td><td>{esc(e['layer'])}</td><td>{esc(e['recipe'])}</td>"
                     f"<td>{esc(_fmt(iso['worst']))}</td><td>{esc(_fmt(iso['mean']))}</td><td>{esc(_fmt(cum['worst']))}</td>"
                     f"<td>{esc(_fmt(cum['mean']))}</td></tr>")
    parts.append("</tbody></table></body></html>\n")
    return "".join(parts)


# ----------------------------------------------------------------------------------------------
# python -m precis verify


USAGE = """usage: python -m precis verify --model DIR [--plan PLAN] [--kv K[,V]] [--attention RECIPE] --inputs FILE -o DIR [options]
       python -m precis verify --model DIR --inputs FILE --kv-sweep [FORMATS] [-o DIR]

Runs the model of DIR (a transformers checkpoint) as it is (the reference, fp32) and with the plan's
GEMMs emulated exactly by precis, on held-out inputs, and reports the end-to-end difference of its
outputs, each layer's isolated and cumulative error, and the first layer whose cumulative error
crosses --layer-threshold. Writes report.json, report.csv, report.md and report.html to -o DIR.
"""


def main(argv=None):
    """The command; SIGINT/SIGTERM stop it with nothing left behind and exit 128 + the signal."""
    from .signals import Stopped, stopped_by_signals

    try:
        with stopped_by_signals():
            return _main(argv)
    except Stopped as e:
        print(f"precis verify: interrupted by signal {e.signum}; no file left behind", file=sys.stderr)
        return 128 + e.signum


def _main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m precis verify", description=USAGE.split("\n\n", 1)[1],
                                     usage=USAGE.split("\n")[0][len("usage: "):],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a transformers checkpoint directory")
    parser.add_argument("--plan", default=None, help="plan.json of precis plan, or a JSON {layer glob: recipe} mapping "
                        "(its \"kv\" and \"attention\" keys as --kv and --attention)")
    parser.add_argument("--kv", default=None, help="KV cache format K[,V] (docs/kv-cache.md): e4m3 (scale 1.0), "
                        "e4m3@tensor / e4m3@head (calibrated), s8@row:sym, e2m1@nv, s4@k32:sym+had, ...")
    parser.add_argument("--attention", default=None, help="attention GEMM recipe: bf16, fp16, fp16acc16, fa3-fp8, "
                        "fa3-fp8-block, fa3-fp8-fast, "
                        "or QK_RECIPE|PV_RECIPE")
    parser.add_argument("--kv-calib", default=None, help="inputs whose K and V calibrate static KV scales "
                        "(default: --inputs)")
    parser.add_argument("--kv-sweep", nargs="?", const="", default=None, metavar="FORMATS",
                        help="print a K x V table of KL (mean, p99) and bytes per token over the formats "
                        "(';'-separated; default a standard list) instead of verifying a plan")
    parser.add_argument("--inputs", required=True, help="a text file (read with the model's tokenizer) or token ids "
                        "[samples, tokens] in .npy; inputs the plan was not made on")
    parser.add_argument("-o", "--output", default=None, help="report directory (required unless --kv-sweep)")
    parser.add_argument("--require", action="append", default=[], help="end-to-end gate, repeatable: kl_mean<=0.01, "
                        "top1_agree>=0.99, cosine_min>=0.999, ... (passes only when its confidence bound meets it)")
    parser.add_argument("--alpha", type=float, default=0.05, help="one-sided level of the gates' bounds (default 0.05)")
    parser.add_argument("--reference", default="fp32", help="fp32, fp64 (the reference model's final outputs in float64) "
                        "or a file of --save-reference: its tokens and logits, reused instead of running the reference")
    parser.add_argument("--save-reference", default=None, metavar="FILE",
                        help="write the reference's tokens and logits (exact float32, HDF5) for later --reference FILE")
    parser.add_argument("--noise-floor", action="append", nargs="?", const="default", default=[], metavar="ALTERNATIVE",
                        help="repeatable: the same formats computed another correct way -- target=sm_80 (another "
                        "accumulator model), sum=fp64 (exact sums of the plan's operands), gemm=torch (PyTorch's "
                        "matmul of them), reference=fp64; without a value: " + ", ".join(noise_mod.DEFAULT) + ". "
                        "A metric within the spread across them is marked indistinguishable from implementation noise; "
                        "one whose ideal value is within that spread of its bootstrap interval, indistinguishable from "
                        "noise (implementation and sampling)")
    parser.add_argument("--score", default="all", choices=list(kld.SCORES),
                        help="scored positions of the logit metrics: all (default) or second-half of each window "
                        "(llama.cpp's perplexity)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per window of a text file (default 64)")
    parser.add_argument("--samples", type=int, default=None, help="at most this many samples (windows)")
    parser.add_argument("--layer-threshold", type=float, default=0.01,
                        help="cumulative rel_fro (worst over samples) whose first crossing is reported (default 0.01)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="sequences per forward (default: as many as fit --max-memory, or add at most 384 MiB to the estimate; "
                             "a tensor scale spans one batch)")
    parser.add_argument("--max-memory", default=None,
                        help="bytes the estimated peak must fit (8G, 1.5GiB): batches are made smaller, or verify refuses "
                             "with the figure")
    parser.add_argument("--isolated", default="compute", metavar="compute|skip|REPORT.json",
                        help="each layer's isolated row: computed in the reference pass (default), skipped, or taken from a "
                             "report.json of precis run on the same inputs")
    parser.add_argument("--layer-rows", default=str(DEFAULT_LAYER_ROWS), metavar="N|all",
                        help="per-layer rows (isolated and cumulative) on about N token rows: N // samples evenly spaced "
                             f"positions of every window (default {DEFAULT_LAYER_ROWS}; all: every row); end-to-end "
                             "figures and gates use every token")
    parser.add_argument("--prefix", default="", help="prepended to module names to give the plan's layer names")
    parser.add_argument("--force", action="store_true", help="replace a report already in DIR")
    parser.add_argument("-q", "--quiet", action="store_true")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_OK if e.code == 0 else EXIT_USAGE
    try:
        for text in args.require:  # a bad gate is refused before the model is loaded
            endtoend.parse_gate(text)
        noise_mod.expand(args.noise_floor)
        if args.kv_sweep is not None:
            return _kv_sweep_main(args)
        if args.output is None:
            raise VerifyError("-o/--output: the report directory is required")
        if args.plan is None and args.kv is None and args.attention is None:
            raise VerifyError("give --plan, --kv or --attention (or --kv-sweep)")
        max_memory = parse_bytes(args.max_memory) if args.max_memory is not None else None
        layer_rows = parse_layer_rows(args.layer_rows)
        isolated = {"compute": True, "skip": False}.get(args.isolated, args.isolated)
        if isinstance(isolated, str) and not os.path.isfile(isolated):
            raise VerifyError(f"--isolated {isolated}: expected compute, skip or a report.json of precis run")
        model, tokenizer = load_model(args.model)
        result = verify(model, args.plan, args.inputs, tokenizer=tokenizer, out=args.output, require=args.require,
                        alpha=args.alpha, layer_threshold=args.layer_threshold, tokens=args.tokens, samples=args.samples,
                        batch_size=args.batch_size, reference=args.reference, prefix=args.prefix, force=args.force,
                        isolated=isolated, max_memory=max_memory, quiet=args.quiet,
                        model_name=args.model, inputs_name=args.inputs, plan_name=args.plan, kv=args.kv,
                        attention=args.attention, kv_calibration=args.kv_calib,
                        score=args.score, save_reference=args.save_reference, noise=args.noise_floor or None,
                        layer_rows=layer_rows,
                        command=" ".join(["python -m precis verify"] + list(argv if argv is not None else sys.argv[1:])))
    except (VerifyError, endtoend.GateError) as e:
        print(f"precis verify: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as e:  # PlanError and CaptureError are ValueErrors naming what is wrong
        print(f"precis verify: {e}", file=sys.stderr)
        return EXIT_USAGE
    if not args.quiet:
        print(summary(result.report))
    return result.exit_code()


def _kv_sweep_main(args):
    """verify --kv-sweep: the K x V table of KL and bytes per token (precis.kvcache.sweep)."""
    from . import kvcache

    model, tokenizer = load_model(args.model)
    ids = load_inputs(args.inputs, tokenizer, args.tokens, args.samples)
    batch_size = args.batch_size or len(ids)
    batches = list(_batches(ids, batch_size))
    calib = None
    if args.kv_calib:
        calib = list(_batches(load_inputs(args.kv_calib, tokenizer, args.tokens, args.samples), batch_size))
    formats = [f for f in args.kv_sweep.split(";") if f] if args.kv_sweep else None
    labels = None
    if "ForCausalLM" in type(model).__name__ or "LMHead" in type(model).__name__:
        labels = np.full(ids.shape, -100, np.int64)
        labels[:, :-1] = ids[:, 1:]
    result = kvcache.sweep(model, batches, formats, calibration=calib, labels=labels)
    table = kvcache.sweep_table(result)
    print(table)
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        rows = [{"k": k, "v": v, **m} for (k, v), m in result["cells"].items()]
        _write(os.path.join(args.output, "kv-sweep.json"),
               json.dumps({"kind": result["kind"], "k": result["k"], "v": result["v"], "cells": rows}, indent=1) + "\n")
        _write(os.path.join(args.output, "kv-sweep.md"), table + "\n")
    return EXIT_OK


def summary(report):
    e2e, v = report["end_to_end"], report["verify"]
    m = e2e["metrics"]
    if e2e["kind"] == "logits":
        line = (f"KL(ref||q) mean {_fmt(m['kl_mean'])} p99 {_fmt(m['kl_p99'])} max {_fmt(m['kl_max'])}; KL(q||ref) mean "
                f"{_fmt(m['rkl_mean'])}; top-1 {_fmt(m['top1_agree'])}; top-5 {_fmt(m['top5_overlap'])}")
        if "ce_delta" in m:
            line += f"; delta CE {_fmt(m['ce_delta'])}"
    else:
        line = (f"cosine mean {_fmt(m['cosine_mean'])} min {_fmt(m['cosine_min'])}; rel_fro mean {_fmt(m['rel_fro_mean'])} "
                f"max {_fmt(m['rel_fro_max'])}")
    out = [f"end to end ({e2e['kind']}, {e2e['samples']} samples x {v['tokens']} tokens): {line}"]
    if v.get("kv"):
        out.append(f"KV cache K {v['kv']['k']}, V {v['kv']['v']}: {v['kv']['bytes_per_token']:.0f} bytes per token "
                   f"(bf16: {v['kv']['bytes_per_token_bf16']:.0f})")
    if v.get("attention"):
        out.append(f"attention {v['attention']['recipe']}: QK {v['attention']['qk']}; PV {v['attention']['pv']}")
    fc = v["first_crossing"]
    out.append("first layer over cumulative rel_fro " + _fmt(v["layer_threshold"]["value"]) + ": "
               + (f"{fc['layer']} (depth {fc['depth']}, {_fmt(fc['rel_fro'])})" if fc else "none"))
    lr = v.get("layer_rows")
    if lr and lr["positions"] != "all":
        out[-1] += f" (per-layer rows on {lr['rows']} of {lr['of']} token rows, --layer-rows {lr['requested']})"
    for g in e2e["gates"]:
        out.append(f"require {g['expression']}: {g['verdict']} ({g['detail']})")
    return "\n".join(out)


def load_model(path):
    """A transformers checkpoint directory: a causal LM (config architectures *ForCausalLM /
    *LMHeadModel) with its head, else the base model; its tokenizer when it has one."""
    try:
        import transformers
    except ImportError as e:
        raise VerifyError(f"--model: loading a checkpoint needs transformers ({e})") from None
    if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, "config.json")):
        raise VerifyError(f"--model {path}: expected a transformers checkpoint directory (with config.json)")
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    arch = " ".join(config.get("architectures") or [])
    causal = "ForCausalLM" in arch or "LMHeadModel" in arch
    cls = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    model = cls.from_pretrained(path, dtype="float32").eval()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    except Exception:  # a checkpoint without tokenizer files: token ids only
        tokenizer = None
    return model, tokenizer
