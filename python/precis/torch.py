"""precis on a PyTorch model (DESIGN §16, docs/verify.md): capture what each linear layer sees,
run the model with a plan's GEMMs emulated exactly, and compare its output with the reference.

    import precis.torch as pt
    cap = pt.capture(model, batches, grads="grads.npz")      # inputs, dL/dY, final outputs
    cap.save("acts.npz")                                       # precis import --model --activations acts.npz
    with pt.emulate(model, "plan.json"):                       # every planned Linear via precis.emulate
        y = model(ids)

torch is imported by this module only (precis itself does not need it). A *linear layer* is a
`torch.nn.Linear` (y = x @ W^T + bias, W [out, in]) or transformers' `Conv1D` (GPT-2: y = x @ W +
bias, W stored [in, out]); its name is its name in `model.named_modules()` with `prefix` in front.
"""
import contextlib
import functools
import fnmatch
import json
import os
import shutil
import struct

import numpy as np
import torch

__all__ = ["CaptureError", "PlanError", "Captured", "capture", "recording", "emulate", "linear_layers", "load_plan",
           "write_arrays", "causal_lm_loss", "output_projection_loss"]


class CaptureError(ValueError):
    """A capture that cannot give precis what it reads: the message names the layer and the shapes."""


class PlanError(ValueError):
    """A plan that does not fit the model: the message names the plan entry or layer."""


def _is_conv1d(module):
    # transformers.pytorch_utils.Conv1D, without importing transformers: weight [in, out], attribute nf.
    return type(module).__name__ == "Conv1D" and hasattr(module, "nf") and getattr(module, "weight", None) is not None \
        and module.weight.dim() == 2


def linear_layers(model, prefix=""):
    """[(name, module, in_major)] of the model's linear layers, in module order."""
    out = []
    for module_name, module in model.named_modules():
        if not module_name:
            continue
        if isinstance(module, torch.nn.Linear):
            out.append((prefix + module_name, module, False))
        elif _is_conv1d(module):
            out.append((prefix + module_name, module, True))
    return out


def _chosen(name, layers, exclude):
    if layers and not any(fnmatch.fnmatchcase(name, g) for g in layers):
        return False
    return not any(fnmatch.fnmatchcase(name, g) for g in exclude or [])


def weight_operand(module, in_major):
    """(w, transposed): the layer's weight as float32 host memory in the layout it is held in, for
    precis.emulate(..., b_transposed=transposed) and the layer checks: W [n, k] of an nn.Linear
    (transposed: B = Wᵀ, no copy of a float32 CPU weight), W [k, n] of a Conv1D."""
    w = module.weight.detach().to(torch.float32).cpu()
    return np.ascontiguousarray(w.numpy()), not in_major


def weight_kn(module, in_major):
    """b of the GEMM as a dataset stores it: float32 [k, n] (W^T of an nn.Linear, W of a Conv1D)."""
    w = module.weight.detach().to(torch.float32)
    # torch's contiguous() transposes in cache blocks on every core; NumPy's strided copy of the
    # transposed view took ~6 % of a verify (lm_head's 49152 x 576, per call). The same values.
    return np.ascontiguousarray((w if in_major else w.t().contiguous()).cpu().numpy())


# ----------------------------------------------------------------------------------------------
# Capture


def causal_lm_loss(outputs, batch):
    """Next-token cross-entropy, the mean over the batch's predicted positions whose target the
    attention mask keeps (transformers' `labels=` loss): logits[:, t] predicts ids[:, t + 1]."""
    logits = outputs.logits if hasattr(outputs, "logits") else outputs[0]
    ids = batch["input_ids"]
    target = ids[:, 1:].clone()
    mask = batch.get("attention_mask")
    if mask is not None:
        target[mask[:, 1:] == 0] = -100
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                             target.reshape(-1), ignore_index=-100)


def output_projection_loss(seed=0):
    """A loss for a model without one (an embedding model): L = sum over samples of r.y / ||y||_F, y
    the final output of the sample, r a fixed-seed standard normal of y's shape drawn anew per
    batch, ||y|| held constant. Its gradient g = J^T r / ||y|| makes the Fisher term of a layer,
    1/2 sum (g * dC)^2, an unbiased estimate (over r) of 1/2 the diagonal part of ||J dC||^2 / ||y||^2:
    the squared relative end-to-end output change the layer's error dC causes to first order, what
    verify measures as rel_fro of the output (DESIGN §17, docs/criteria.md). The Taylor term has
    mean zero over r and predicts nothing here. Returns loss(outputs, batch) for capture(loss=)."""
    generator = torch.Generator().manual_seed(seed)

    def loss(outputs, batch):
        y, _ = final_output(outputs)
        y = y.float()
        r = torch.randn(y.shape, generator=generator, dtype=torch.float32)
        mask = batch.get("attention_mask") if isinstance(batch, dict) else None
        if mask is not None:
            r = r * mask[..., None].to(r.dtype)
            y_kept = y * mask[..., None].to(y.dtype)
        else:
            y_kept = y
        norm = torch.linalg.vector_norm(y_kept.detach().reshape(len(y), -1), dim=1).clamp_min(1e-30)
        return ((r * y).reshape(len(y), -1).sum(1) / norm).sum()

    loss.__name__ = f"output_projection_loss(seed={seed})"
    return loss


def is_causal_lm(model):
    name = type(model).__name__
    return name.endswith("ForCausalLM") or name.endswith("LMHeadModel")


def final_output(outputs):
    """The model's final output tensor: logits, else the last hidden states, else the tensor."""
    if torch.is_tensor(outputs):
        return outputs, "hidden"
    for key, kind in (("logits", "logits"), ("last_hidden_state", "hidden")):
        value = getattr(outputs, key, None)
        if value is None and isinstance(outputs, dict):
            value = outputs.get(key)
        if value is not None:
            return value, kind
    if isinstance(outputs, (tuple, list)) and outputs and torch.is_tensor(outputs[0]):
        return outputs[0], "hidden"
    raise CaptureError(f"cannot find the model's final output in a {type(outputs).__name__} "
                       "(expected logits, last_hidden_state or a tensor)")


def as_batch(batch):
    """A batch as keyword arguments: a tensor (or array) of token ids [batch, seq] becomes
    {'input_ids': ids}; a dict is passed as it is."""
    if isinstance(batch, dict):
        return dict(batch)
    if isinstance(batch, np.ndarray):
        batch = torch.from_numpy(np.asarray(batch, np.int64))
    if torch.is_tensor(batch):
        if batch.dim() == 1:
            batch = batch[None]
        return {"input_ids": batch}
    raise CaptureError(f"a batch must be a tensor of token ids or a dict of model inputs, not {type(batch).__name__}")


class _Selector:
    """Which positions of a [batch, seq, ...] tensor become samples, by the attention mask.

    pack=False: a sample is one sequence's first `tokens` kept positions; a sequence with fewer
    kept positions is skipped (counted in `skipped`). pack=True: the kept positions of every
    sequence, one after another, are cut into samples of `tokens` rows (a last partial one is
    dropped, counted in `dropped_rows`)."""

    def __init__(self, tokens, pack):
        self.tokens, self.pack = tokens, pack

    def rows(self, x, mask):
        """x [batch, seq, f] -> list of per-sequence kept rows [t_i, f]."""
        if mask is None:
            return list(x)
        return [x[i][mask[i].bool()[: x.shape[1]]] for i in range(x.shape[0])]


class _Chunks:
    """One kind of captured array (inputs, or dL/dY) per layer, as it arrives a batch at a time: held
    in memory (a list of chunks per layer), or appended to one raw float32 file per layer in
    `spill` (a directory), so that capture holds one batch, never every layer's arrays. Layers keep
    the order of their first call."""

    def __init__(self, spill=None):
        self.spill = spill
        self.order = []  # names in the order of their first call (a layer never given a sample included)
        self.parts = {}  # in memory: name -> [float32 [s, t, f]]
        self.files = {}  # spilled: name -> (path, open file)
        self.shapes = {}  # name -> [samples, t, f]

    def register(self, name):
        if name not in self.shapes and name not in self.order:
            self.order.append(name)

    def samples(self, name):
        return self.shapes[name][0] if name in self.shapes else 0

    def append(self, name, chunk):
        chunk = np.ascontiguousarray(chunk, np.float32)
        shape = self.shapes.get(name)
        if shape is not None and list(chunk.shape[1:]) != shape[1:]:
            raise CaptureError(f"layer {name}: a call gave samples of shape {list(chunk.shape[1:])} after "
                               f"{shape[1:]} (every sample of a layer must have the same tokens and features)")
        if self.spill is None:
            self.parts.setdefault(name, []).append(chunk)
        else:
            if name not in self.files:
                path = os.path.join(self.spill, f"{len(self.files)}.f32")
                self.files[name] = (path, open(path, "wb"))
            self.files[name][1].write(memoryview(chunk).cast("B"))
        if shape is None:
            self.shapes[name] = [0] + list(chunk.shape[1:])
        self.shapes[name][0] += chunk.shape[0]

    def names(self):
        """Layers with at least one sample, in the order of their first call."""
        return [n for n in self.order if self.samples(n)]

    def shape(self, name):
        return tuple(self.shapes[name])

    def array(self, name):
        """The layer's float32 [samples, t, f] (read back from the spill file when spilled)."""
        if self.spill is None:
            return np.concatenate(self.parts[name])
        path, f = self.files[name]
        f.flush()
        return np.fromfile(path, np.float32).reshape(self.shape(name))

    def copy_to(self, name, out, block=16 << 20):
        """Writes the layer's bytes (float32, C order) to the file object `out`, 16 MiB at a time."""
        if self.spill is None:
            for part in self.parts[name]:
                out.write(memoryview(part).cast("B"))
            return
        path, f = self.files[name]
        f.flush()
        with open(path, "rb") as src:
            shutil.copyfileobj(src, out, block)

    def close(self):
        for _, f in self.files.values():
            f.close()


class _Arrays:
    """A dict of arrays seen the way the writers read a _Chunks: names, shape, copy_to."""

    def __init__(self, arrays):
        self.arrays = {n: np.ascontiguousarray(x, "<f4") for n, x in arrays.items()}

    def names(self):
        return list(self.arrays)

    def shape(self, name):
        return self.arrays[name].shape

    def copy_to(self, name, out):
        out.write(memoryview(self.arrays[name]).cast("B"))


class _Subset:
    """Some names of a _Chunks (the layers' inputs without the final outputs)."""

    def __init__(self, chunks, names):
        self.chunks, self._names = chunks, names

    def names(self):
        return list(self._names)

    def shape(self, name):
        return self.chunks.shape(name)

    def copy_to(self, name, out):
        self.chunks.copy_to(name, out)


class Captured:
    """What capture() recorded: per layer its inputs (and dL/dY), the model's final outputs. Held in
    memory, or spilled to disk a batch at a time while capture(out=...) runs (docs/verify.md)."""

    def __init__(self, tokens, pack, meta, spill=None):
        self.tokens, self.pack, self.meta = tokens, pack, meta
        self.inputs = _Chunks(os.path.join(spill, "inputs") if spill else None)  # layer -> float32 [s, tokens, f]
        self.grads = _Chunks(os.path.join(spill, "grads") if spill else None)
        for chunks in (self.inputs, self.grads):
            if chunks.spill:
                os.makedirs(chunks.spill)
        self._pending_in, self._pending_grad = {}, {}  # pack=True: rows not yet a full sample
        self.output_kind = None  # "logits" | "hidden"; the outputs are inputs["@outputs"]
        self.skipped_by = {}  # name -> sequences with fewer kept positions than tokens (pack=False)
        self.in_features = {}
        self.written = None  # capture(out=...): the files written (the spill is gone then)

    @property
    def skipped(self):
        return max(self.skipped_by.values(), default=0)

    @property
    def dropped_rows(self):
        return max((p.shape[0] for p in self._pending_in.values()), default=0)

    # -- recording ------------------------------------------------------------------------------
    def _take(self, name, x, mask, store, pending, max_samples):
        """Turns one call's tensor into samples of `tokens` rows, appended to store (a _Chunks)."""
        x = x.detach()
        f = x.shape[-1]
        store.register(name)
        have = store.samples(name)
        if max_samples is not None and have >= max_samples:
            return
        if x.dim() <= 2:  # [n, f]: n samples of one token (a pooler on the first position)
            chunk = x.reshape(-1, 1, f)
        else:
            lead = x.shape[:-1]
            use_mask = mask is not None and tuple(lead) == tuple(mask.shape)
            if not use_mask:
                x = x.reshape(-1, x.shape[-2], f)
            seqs = _Selector(self.tokens, self.pack).rows(x, mask if use_mask else None)
            if self.tokens is None:
                self.tokens = int(seqs[0].shape[0])
            t = self.tokens
            if self.pack:
                rows = torch.cat([pending.pop(name)] + seqs if name in pending else seqs)
                full = rows.shape[0] // t
                if rows.shape[0] > full * t:
                    pending[name] = rows[full * t:]
                chunk = rows[: full * t].reshape(full, t, f)
            else:
                kept = [s[:t] for s in seqs if s.shape[0] >= t]
                if store is self.inputs:
                    self.skipped_by[name] = self.skipped_by.get(name, 0) + len(seqs) - len(kept)
                if not kept:
                    return
                chunk = torch.stack(kept)
        if max_samples is not None:
            chunk = chunk[: max_samples - have]
        if chunk.shape[0]:
            # float32 holds bfloat16 and float16 exactly; precis reads float32.
            store.append(name, chunk.to(torch.float32).cpu().numpy())

    def _readable(self):
        if self.written is not None:
            raise CaptureError(f"this capture was streamed to {self.written}: read the arrays from there")

    # -- results --------------------------------------------------------------------------------
    def arrays(self):
        """layer -> float32 [samples, tokens, in_features], for the layers that ran."""
        self._readable()
        return {n: self.inputs.array(n) for n in self.inputs.names()}

    def grad_arrays(self):
        """layer -> float32 [samples, tokens, out_features]: dL/dY at the layer's output."""
        self._readable()
        return {n: self.grads.array(n) for n in self.grads.names()}

    def output_array(self):
        """The model's final outputs [samples, tokens, features] (logits or hidden states), or None."""
        self._readable()
        return self.inputs.array("@outputs") if self.inputs.samples("@outputs") else None

    def missed(self):
        """Layers chosen that the forward passes never reached (precis would find no array for them)."""
        return [n for n in self.in_features if not self.inputs.samples(n)]

    def summary(self):
        names = [n for n in self.inputs.names() if n != "@outputs"]
        lines = [f"{len(names)} layers, tokens={self.tokens} (1 for 2-D inputs)"
                 + (f", {self.skipped} sequences shorter than tokens skipped" if self.skipped else "")
                 + (f", {self.dropped_rows} rows of a last partial sample dropped" if self.dropped_rows else "")]
        for name in self.inputs.names():
            lines.append(f"  {name}: [{', '.join(map(str, self.inputs.shape(name)))}]")
        for name in self.missed():
            lines.append(f"  {name}: never called (not written; exclude it from precis import with --exclude)")
        return "\n".join(lines)

    def save(self, path, grads=None, outputs=None):
        """Writes the inputs where `precis import --model CKPT --activations PATH` reads them (.npz,
        .safetensors, else a directory of <layer>.npy), the gradients to `grads` (same layout,
        dL/dY [samples, tokens, out_features] per layer: `import --gradients`) and the final
        outputs to `outputs` (.npy). Each file records the capture's metadata (model, inputs,
        dtype, tokens, loss). Each array is copied into the file a chunk at a time (no
        concatenated copy is made); the files are the ones np.savez / np.save / write_arrays write
        of arrays(), byte for byte (an .npz's members: the zip entries' times differ)."""
        self._readable()
        names = [n for n in self.inputs.names() if n != "@outputs"]
        if not names:
            raise CaptureError(f"{path}: no layer was called: nothing to write")
        if grads is not None and not self.grads.names():
            raise CaptureError(f"{grads}: no gradient was captured (capture(..., loss=...) computes them)")
        if outputs is not None and not self.inputs.samples("@outputs"):
            raise CaptureError(f"{outputs}: the final outputs were not captured")
        _write_source(path, _Subset(self.inputs, names), self.meta)
        if grads is not None:
            _write_source(grads, self.grads, dict(self.meta, arrays="dL/dY at each layer's output"))
        if outputs is not None:
            def write(tmp):
                with open(tmp, "wb") as f:
                    _npy_header(f, self.inputs.shape("@outputs"))
                    self.inputs.copy_to("@outputs", f)
            _atomic(outputs, write)


_OUTER_GUARDS = []  # spill directories of capture(out=...) in progress


def _atomic(path, write):
    """write(tmp) then rename to path. The temporary file (or directory) is removed whatever stops
    the write; a SIGINT/SIGTERM meanwhile ends the process by that signal once it is removed."""
    from .signals import Stopped, die_by, stopped_by_signals

    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with stopped_by_signals():
            write(tmp)
            if os.path.isdir(path) and not os.path.isdir(tmp):
                raise CaptureError(f"{path} is a directory")
            if os.path.isdir(tmp) and os.path.isdir(path):
                shutil.rmtree(path)
            os.replace(tmp, path)
    except Stopped as e:
        _remove(tmp)
        if _OUTER_GUARDS:  # a streaming capture's spill is removed by its own handler first
            raise
        die_by(e.signum)
    finally:
        _remove(tmp)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def write_arrays(path, arrays, meta=None):
    """name -> float32 array into PATH: *.npz (np.savez, plus a member '@capture' holding the JSON
    metadata), *.safetensors (F32 tensors; metadata under __metadata__['precis.capture']), anything
    else a directory of <name>.npy (metadata in capture.json). Written to a temporary name, renamed."""
    path = os.fspath(path)
    text = json.dumps(meta or {}, sort_keys=True)

    def write(tmp):
        if path.endswith(".npz"):
            with open(tmp, "wb") as f:
                np.savez(f, **arrays, **{"@capture": np.array(text)})
        elif path.endswith(".safetensors"):
            _write_safetensors(tmp, arrays, {"precis.capture": text})
        else:
            os.makedirs(tmp)
            for name, x in arrays.items():
                np.save(os.path.join(tmp, name + ".npy"), x)
            with open(os.path.join(tmp, "capture.json"), "w") as f:
                f.write(text + "\n")

    _atomic(path, write)


def _npy_header(f, shape):
    """The header np.save writes before a C-order float32 array of `shape` (format 1.0)."""
    np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": tuple(shape)})


def _write_source(path, source, meta):
    """write_arrays' files, byte for byte, from a source of float32 arrays read a chunk at a time
    (a _Chunks: names(), shape(name), copy_to(name, file)): np.savez's members (stored, zip64, in
    the same order, then '@capture'), the same safetensors file, the same directory."""
    import zipfile

    path = os.fspath(path)
    text = json.dumps(meta or {}, sort_keys=True)

    def write(tmp):
        if path.endswith(".npz"):
            with open(tmp, "wb") as f, zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED,
                                                       allowZip64=True) as z:
                for name in source.names():
                    with z.open(name + ".npy", "w", force_zip64=True) as member:
                        _npy_header(member, source.shape(name))
                        source.copy_to(name, member)
                with z.open("@capture.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.array(text))
        elif path.endswith(".safetensors"):
            _write_safetensors(tmp, source, {"precis.capture": text})
        else:
            os.makedirs(tmp)
            for name in source.names():
                with open(os.path.join(tmp, name + ".npy"), "wb") as f:
                    _npy_header(f, source.shape(name))
                    source.copy_to(name, f)
            with open(os.path.join(tmp, "capture.json"), "w") as f:
                f.write(text + "\n")

    _atomic(path, write)


def _write_safetensors(path, arrays, metadata=None):
    """F32 tensors (a dict of arrays, or a source as _write_source reads) into a safetensors file."""
    source = arrays if hasattr(arrays, "copy_to") else _Arrays(arrays)
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name in source.names():
        shape = source.shape(name)
        size = 4 * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name in source.names():
            source.copy_to(name, f)


def _model_meta(model, source):
    config = getattr(model, "config", None)
    dtypes = sorted({str(p.dtype).replace("torch.", "") for p in model.parameters()})
    return {"model": getattr(config, "_name_or_path", None) or type(model).__name__,
            "model_class": type(model).__name__,
            "model_type": getattr(config, "model_type", None),
            "dtype": dtypes[0] if len(dtypes) == 1 else dtypes,
            "inputs": source, "torch": torch.__version__}


def _chosen_layers(model, layers, exclude, prefix):
    chosen = [(n, m, im) for n, m, im in linear_layers(model, prefix) if _chosen(n, layers, exclude)]
    if not chosen:
        raise CaptureError(f"no nn.Linear or Conv1D of the model matches layers={layers or ['*']} exclude={exclude or []}")
    return chosen


def _input_hook(cap, name, state, max_samples):
    """A forward pre-hook (with_kwargs) recording the layer's input into cap; state["mask"] is the
    running batch's attention mask or None."""
    def hook(module, args, kwargs):
        x = args[0] if args else kwargs.get("input", kwargs.get("x"))
        if x is None:
            raise CaptureError(f"layer {name}: called without a positional input")
        k = cap.in_features[name]
        if x.shape[-1] != k:
            raise CaptureError(f"layer {name}: input of shape {list(x.shape)}, expected [..., {k}]")
        progress = state.get("progress")
        if progress is not None:
            progress.layer(state["batch"], state["order"].setdefault(name, len(state["order"])), name)
        cap._take(name, x, state["mask"], cap.inputs, cap._pending_in, max_samples)
    return hook


@contextlib.contextmanager
def recording(model, *, tokens=None, layers=None, exclude=None, max_samples=None, prefix="", pack=False, source=None):
    """The inputs of the chosen linear layers while the caller runs the model inside the block, as
    capture() records them but without its batches: no attention mask (every position of a call is
    recorded), no gradients, no final outputs. Yields a Captured (.arrays(), .save(PATH));
    tools/capture_activations.py is a command over it.

        with torch.no_grad(), pt.recording(model, tokens=64) as cap:
            for ids in batches:
                model(ids)
        cap.save("acts.npz")"""
    chosen = _chosen_layers(model, layers, exclude, prefix)
    if tokens is not None and tokens < 1:
        raise CaptureError(f"tokens must be positive, not {tokens}")
    meta = _model_meta(model, source)
    meta.update({"pack": pack, "mask": "none: every position of each call recorded", "loss": None})
    cap = Captured(tokens, pack, meta)
    for name, module, in_major in chosen:
        cap.in_features[name] = module.weight.shape[0 if in_major else 1]
    state = {"mask": None}
    handles = []
    try:
        for name, module, _ in chosen:
            handles.append(module.register_forward_pre_hook(_input_hook(cap, name, state, max_samples), with_kwargs=True))
        yield cap
    finally:
        for h in handles:
            h.remove()


def capture(model, batches, *, tokens=None, layers=None, exclude=None, max_samples=None, prefix="", loss="auto",
            gradients=None, outputs=True, pack=False, source=None, out=None, grads_out=None, outputs_out=None,
            progress=None):
    """Runs the model on each batch and records, per linear layer (nn.Linear, Conv1D), its inputs
    [samples, tokens, in_features]; with gradients, dL/dY at its output [samples, tokens,
    out_features] of a scalar loss; with outputs, the model's final output (logits, else the last
    hidden states) [samples, tokens, features]. Returns a Captured; .save(PATH) writes the file
    `precis import --model --activations PATH` reads.

    batches: an iterable of token-id tensors/arrays [batch, seq] or dicts of model inputs (passed
      as model(**batch)); a dict's attention_mask says which positions are real: padding is never
      recorded.
    tokens: rows per sample (default: the first sequence's kept length). pack=False: a sample is a
      sequence's first `tokens` kept positions (shorter sequences skipped, counted); pack=True:
      the kept positions of all sequences in order, cut into samples of `tokens`.
    layers / exclude: fnmatch globs on layer names; prefix: prepended to module names (a wrapper's
      state_dict prefix, e.g. "model.").
    gradients: None (default: True for a causal LM, whose loss is the next-token cross-entropy;
      else only when loss is a callable), True or False.
    loss: "auto" (causal_lm_loss for *ForCausalLM / *LMHeadModel) or a callable
      loss(outputs, batch) -> scalar tensor.
    max_samples: stop recording once a layer has that many samples. source: a description of the
      inputs recorded in the file's metadata (e.g. the text file's name).
    out (grads_out, outputs_out): stream to these files instead of holding the arrays: each batch's
      arrays are appended to one temporary file per layer beside `out` as the batch runs, and the
      files save(out, grads_out, outputs_out) would write are made from them at the end (the same
      bytes); memory holds one batch. Streamed, gradients (default) and final outputs are computed
      only when grads_out / outputs_out name their file. A signal or an error removes every temporary file. The
      returned Captured then has the shapes (summary()) but not the arrays.
    progress: an object with layer(batch, index, name) and batch_done(batch, tokens), told as the
      batches run (python -m precis capture prints it)."""
    chosen = _chosen_layers(model, layers, exclude, prefix)
    if loss == "auto":
        loss_fn = causal_lm_loss if is_causal_lm(model) else None
    elif callable(loss) or loss is None:
        loss_fn = loss
    else:
        raise CaptureError(f"loss must be 'auto', None or a callable, not {loss!r}")
    if out is not None:
        # Streamed: compute and record only what is written (no spill of arrays nobody reads).
        if gradients is None:
            gradients = grads_out is not None
        elif gradients and grads_out is None:
            raise CaptureError("gradients=True with out=: give grads_out= (the file they are written to)")
        outputs = outputs and outputs_out is not None
    if gradients is None:
        gradients = loss_fn is not None
    if gradients and loss_fn is None:
        raise CaptureError("gradients need a loss: pass loss=callable(outputs, batch) -> scalar "
                           f"({type(model).__name__} is not a causal LM, whose default is next-token cross-entropy)")
    if tokens is not None and tokens < 1:
        raise CaptureError(f"tokens must be positive, not {tokens}")
    if out is None and (grads_out is not None or outputs_out is not None):
        raise CaptureError("grads_out and outputs_out stream beside out: give out too")
    if grads_out is not None and not gradients:
        raise CaptureError(f"{grads_out}: gradients are not computed (gradients=False, or no loss)")
    if outputs_out is not None and not outputs:
        raise CaptureError(f"{outputs_out}: the final outputs are not recorded (outputs=False)")
    meta = _model_meta(model, source)
    meta.update({"pack": pack, "mask": "attention_mask positions excluded",
                 "loss": None if not gradients else getattr(loss_fn, "__name__", repr(loss_fn))})
    if out is None:
        return _capture_into(Captured(tokens, pack, meta), model, batches, chosen, gradients, loss_fn, outputs,
                             max_samples, progress)

    from .signals import Stopped, die_by, stopped_by_signals

    out = os.fspath(out)
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise CaptureError(f"{out}: no directory {parent}")
    spill = os.path.join(parent, f".{os.path.basename(out)}.spill-{os.getpid()}")
    cap = None
    _OUTER_GUARDS.append(spill)  # _atomic re-raises a signal to here, which removes the spill too
    try:
        with stopped_by_signals():
            os.makedirs(spill)
            cap = Captured(tokens, pack, meta, spill=spill)
            _capture_into(cap, model, batches, chosen, gradients, loss_fn, outputs, max_samples, progress)
            cap.save(out, grads=grads_out, outputs=outputs_out)
            cap.written = out
    except Stopped as e:
        _close_and_remove(cap, spill)
        die_by(e.signum)
    finally:
        _OUTER_GUARDS.remove(spill)
        _close_and_remove(cap, spill)
    return cap


def _close_and_remove(cap, spill):
    if cap is not None:
        cap.inputs.close()
        cap.grads.close()
    _remove(spill)


def _capture_into(cap, model, batches, chosen, gradients, loss_fn, outputs, max_samples, progress):
    for name, module, in_major in chosen:
        cap.in_features[name] = module.weight.shape[0 if in_major else 1]

    state = {"mask": None, "outs": {}, "progress": progress, "batch": 0, "order": {}}

    def post_hook(name):
        def hook(module, args, output):
            if gradients and output.requires_grad:
                state["outs"][name] = output
        return hook

    handles, grad_flags = [], []
    try:
        for name, module, _ in chosen:
            handles.append(module.register_forward_pre_hook(_input_hook(cap, name, state, max_samples), with_kwargs=True))
            if gradients:
                handles.append(module.register_forward_hook(post_hook(name)))
                grad_flags.append((module.weight, module.weight.requires_grad))
                module.weight.requires_grad_(True)  # so that each output is in the loss's graph
        for index, batch in enumerate(batches):
            kwargs = as_batch(batch)
            state["mask"] = kwargs.get("attention_mask")
            state["outs"] = {}
            state["batch"] = index
            with torch.set_grad_enabled(bool(gradients)):
                result = model(**kwargs)
                final, kind = final_output(result)
                if outputs:
                    cap.output_kind = kind
                    cap._take("@outputs", final, state["mask"], cap.inputs, cap._pending_in, max_samples)
                if gradients:
                    value = loss_fn(result, kwargs)
                    names = list(state["outs"])
                    got = torch.autograd.grad(value, [state["outs"][n] for n in names], allow_unused=True)
                    for n, g in zip(names, got):
                        if g is None:
                            g = torch.zeros_like(state["outs"][n])
                        cap._take(n, g, state["mask"], cap.grads, cap._pending_grad, max_samples)
                    del got
                del result, final
            state["outs"] = {}
            if progress is not None:
                mask = kwargs.get("attention_mask")
                ids = kwargs.get("input_ids")
                progress.batch_done(index, int(mask.sum()) if mask is not None else
                                    int(ids.numel()) if ids is not None else 0)
    finally:
        for h in handles:
            h.remove()
        for w, flag in grad_flags:
            w.requires_grad_(flag)
    return cap


# ----------------------------------------------------------------------------------------------
# Emulate


def load_plan(plan):
    """A plan as [(glob or layer, recipe or None)], in order: plan.json of `precis plan` (its
    layers' {layer, recipe}; a layer with no passing recipe, recipe null, is refused), a JSON file
    or dict {layer glob: recipe} (first matching glob wins; recipe null leaves the layer as it is),
    or such a list. Returns (entries, exact) where exact says the names are layers, not globs."""
    source = "the plan"
    if isinstance(plan, (str, os.PathLike)):
        source = os.fspath(plan)
        try:
            with open(source) as f:
                plan = json.load(f)
        except (OSError, ValueError) as e:
            raise PlanError(f"{source}: cannot read the plan: {e}") from None
    if isinstance(plan, dict) and isinstance(plan.get("layers"), list):
        entries = []
        for i, e in enumerate(plan["layers"]):
            if not isinstance(e, dict) or not isinstance(e.get("layer"), str):
                raise PlanError(f"{source}: layers[{i}]: expected an object with a string \"layer\"")
            if e.get("recipe") is None:
                raise PlanError(f"{source}: layers[{i}] ({e['layer']}): no recipe (the plan found none passing); "
                                "no model can run this plan")
            entries.append((e["layer"], e["recipe"]))
        return entries, True
    if isinstance(plan, dict):
        items = list(plan.items())
    elif isinstance(plan, (list, tuple)):
        items = [tuple(x) for x in plan]
    else:
        raise PlanError(f"{source}: expected plan.json of precis plan or a {{layer glob: recipe}} mapping")
    for glob, recipe in items:
        if not isinstance(glob, str) or not (recipe is None or isinstance(recipe, str)):
            raise PlanError(f"{source}: {glob!r}: expected a layer glob mapped to a recipe name or null")
    return items, False


def resolve_plan(model, plan, prefix=""):
    """layer name -> recipe for the model's linear layers the plan selects (in model order)."""
    entries, exact = load_plan(plan)
    found = linear_layers(model, prefix)
    names = [n for n, _, _ in found]
    chosen = {}
    if exact:
        known = set(names)
        for layer, recipe in entries:
            if layer not in known:
                close = [n for n in names if n.endswith(layer) or layer.endswith(n)]
                hint = f" (did you mean prefix=? e.g. {close[0]})" if close else ""
                raise PlanError(f"plan layer {layer} is not a linear layer of the model{hint}")
            chosen[layer] = recipe
    else:
        used = set()
        for n in names:
            for i, (glob, recipe) in enumerate(entries):
                if fnmatch.fnmatchcase(n, glob):
                    used.add(i)
                    if recipe is not None:
                        chosen[n] = recipe
                    break
        unused = [entries[i][0] for i in range(len(entries)) if i not in used]
        if unused:
            raise PlanError(f"plan glob(s) {', '.join(unused)} match no linear layer of the model "
                            f"(its first layers: {', '.join(names[:3])})")
    return {n: chosen[n] for n in names if n in chosen}


def _out_format(recipe):
    import precis

    spec = precis.spec(recipe)
    fields = dict(f.split("=", 1) for f in spec.split(","))
    return fields["out"]


_OUT_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


_BACKENDS = (None, "cpu", "cuda")


def _route(name, x, backend, target, custom_gemm):
    """Where one call of layer `name` computes: "cuda" (its CUDA input and weight in place, libprecis's
    cuda backend, no host copy) or "cpu" (a host copy, the cpu backend's exact emulation). backend
    None: a CUDA input computes in place when the package was built with CUDA and nothing asks for
    the cpu backend's arithmetic (target=, gemm=); otherwise on the host, as before the device path
    existed. backend="cuda" insists, and is refused naming why when it cannot be honoured."""
    import precis

    on_cuda = x.device.type == "cuda"
    if backend == "cpu" or not on_cuda and backend is None:
        return "cpu"
    if backend is None:
        return "cuda" if precis.cuda_built() and not custom_gemm and target is None else "cpu"
    if not on_cuda:
        raise PlanError(f"layer {name}: backend='cuda' takes CUDA tensors; its input is on {x.device}")
    if custom_gemm:
        raise PlanError(f"layer {name}: backend='cuda' with gemm=: gemm= replaces precis.emulate on host arrays; "
                        "pass backend='cpu' (a host copy per layer) or leave backend out")
    if target is not None:
        raise PlanError(f"layer {name}: backend='cuda' with target={target}: the target is the cpu backend's emulation "
                        "of an architecture, and a CUDA device runs its own arithmetic; pass backend='cpu' (a host "
                        "copy per layer) to emulate the target, or leave target out")
    if not precis.cuda_built():
        raise PlanError(f"layer {name}: backend='cuda', and this precis package was built without CUDA "
                        "(PRECIS_CUDA=OFF): rebuild it with CUDA for the cuda backend on the tensors in place, or "
                        "leave backend out (or pass 'cpu') to emulate on the host (a copy of each layer's input and "
                        "weight)")
    return "cuda"


class _Emulated:
    def __init__(self, name, module, in_major, recipe, record, target=None, gemm=None, backend=None):
        import precis

        if backend not in _BACKENDS:
            raise PlanError(f"backend={backend!r}: expected None (by the tensors' device), 'cpu' or 'cuda'")
        self.name, self.module, self.recipe, self.record = name, module, recipe, record
        self.backend, self.target, self.custom_gemm = backend, target, gemm is not None
        self.gemm = gemm or (precis.emulate if target is None else functools.partial(precis.emulate, target=target))
        self.in_major = in_major
        # W is read per call, never copied to be held: a float32 copy of every planned layer at once
        # would double the model's weights in memory (docs/verify.md, "Memory").
        w = module.weight
        self.k, self.n = (int(w.shape[0]), int(w.shape[1])) if in_major else (int(w.shape[1]), int(w.shape[0]))
        out = _out_format(recipe)
        if out not in _OUT_DTYPES:
            raise PlanError(f"layer {name}: recipe {recipe} outputs {out}; adding the bias in that format is not supported "
                            "(fp32, bf16, fp16 are)")
        self.out_dtype = _OUT_DTYPES[out]

    def forward(self, x, *args, **kwargs):
        if x.shape[-1] != self.k:
            raise PlanError(f"layer {self.name}: input of shape {list(x.shape)}, expected [..., {self.k}]")
        if _route(self.name, x, self.backend, self.target, self.custom_gemm) == "cuda":
            return self._forward_cuda(x)
        lead = x.shape[:-1]
        # One GEMM of all the call's rows, as a deployment's [batch*seq, k] x [k, n]: passed as
        # [batch, seq, k] (a 2-D input [n, k] as [n, 1, k], as capture records it), which precis.emulate
        # computes as one A (a tensor scale spans the whole batch, row scales are per token).
        a = x.detach().to(torch.float32).reshape(-1, x.shape[-2] if x.dim() >= 3 else 1, self.k).cpu().numpy()
        if self.custom_gemm:  # gemm=(a, b, recipe) takes b as [k, n]
            c = np.asarray(self.gemm(np.ascontiguousarray(a), weight_kn(self.module, self.in_major), self.recipe),
                           np.float32)
        else:  # W as the layer holds it: precis.emulate reads it transposed, the same bits as Wᵀ
            w, transposed = weight_operand(self.module, self.in_major)
            c = np.asarray(self.gemm(np.ascontiguousarray(a), w, self.recipe, b_transposed=transposed), np.float32)
            del w
        if self.record is not None:
            self.record.setdefault(self.name, []).append(c.reshape(-1, a.shape[1], self.n))
        y = torch.from_numpy(c.reshape(*lead, self.n))
        # Read per call, as the weights: under accelerate they exist only while the layer runs.
        bias = getattr(self.module, "bias", None)
        if bias is not None:
            # The bias is added to the GEMM's output in float32 and the sum rounded to the output
            # format (round to nearest even), as an epilogue-less GEMM followed by a bias add does.
            y = y + bias.detach().to(torch.float32).cpu()
            if self.out_dtype is not None:
                y = y.to(self.out_dtype).to(torch.float32)
        return y.to(device=x.device, dtype=x.dtype)

    def _forward_cuda(self, x):
        """The same GEMM by libprecis's cuda backend on the layer's device (NOT YET RUN ON A GPU): A and
        B handed over by DLPack, the output allocated there; nothing passes through host memory but
        what `record` asks for."""
        import precis

        lead = x.shape[:-1]
        a = x.detach().to(torch.float32).reshape(-1, x.shape[-2] if x.dim() >= 3 else 1, self.k).contiguous()
        w = self.module.weight.detach().to(device=x.device, dtype=torch.float32)
        # B [k, n] dense, as the backend reads it: W^T of an nn.Linear is a transposed view, made
        # dense by a copy on the device (a transposed-B plan would save it; docs/verify.md).
        b = (w if self.in_major else w.t()).contiguous()
        c = precis.emulate(a, b, self.recipe)
        del b
        if self.record is not None:
            self.record.setdefault(self.name, []).append(c.reshape(-1, a.shape[1], self.n).cpu().numpy())
        y = c.reshape(*lead, self.n)
        bias = getattr(self.module, "bias", None)
        if bias is not None:
            y = y + bias.detach().to(device=x.device, dtype=torch.float32)
            if self.out_dtype is not None:
                y = y.to(self.out_dtype).to(torch.float32)
        return y.to(dtype=x.dtype)


@contextlib.contextmanager
def emulate(model, plan, prefix="", record=None, target=None, gemm=None, backend=None):
    """Within the block, each linear layer the plan selects computes x @ W^T (Conv1D: x @ W) by
    precis.emulate with its recipe, bias added after in the recipe's output format; every other
    op runs as the model defines it. On exit the modules' forward methods are restored (the
    parameters are never changed). plan: plan.json of `precis plan`, a {layer glob: recipe} mapping
    (dict or JSON file) or a list of pairs. record: a dict that receives, per emulated layer, the
    GEMM outputs (before the bias) of each call, float32 [sequences, seq, out]. target: the
    architecture whose arithmetic precis.emulate stands for (sm_80 ... sm_120; None: sm_90). gemm:
    a function (a, b, recipe) -> float32 C that replaces precis.emulate (the noise floor's
    alternative implementations, precis.noise.OperandGemm). backend: None, a layer whose input is on a
    CUDA device computes there by libprecis's cuda backend (the tensors in place through DLPack, the
    device's own arithmetic, not the cpu backend's emulation; NOT YET RUN ON A GPU, docs/verify.md
    "Beyond one machine") when the package was built with CUDA and neither target nor gemm is given,
    any other on the host (a CUDA input copied there, as before);
    "cpu": every layer on the host (a copy of its input and weight per call), the cpu backend's exact
    bits; "cuda": every layer on its CUDA device, a CPU input refused.

    Yields the mapping layer -> recipe in force."""
    chosen = resolve_plan(model, plan, prefix)
    modules = {n: (m, im) for n, m, im in linear_layers(model, prefix)}
    undo = []
    try:
        for name, recipe in chosen.items():
            module, in_major = modules[name]
            emu = _Emulated(name, module, in_major, recipe, record, target, gemm, backend)
            undo.append(_replace_forward(module, emu.forward))
        yield dict(chosen)
    finally:
        for restore in reversed(undo):
            restore()


def _replace_forward(module, forward):
    """Makes `forward` the module's computation and returns the function that undoes it. Under
    accelerate (a device_map: the module has an `_hf_hook` and its `_old_forward`), `_old_forward` is
    replaced, so that the hook's wrapper stays in front: it brings the weights (offloaded to the CPU
    or disk) and the inputs to the layer's execution device before `forward` runs, and offloads
    them again after."""
    hooked = getattr(module, "_hf_hook", None) is not None and "_old_forward" in module.__dict__
    attr = "_old_forward" if hooked else "forward"
    had = attr in module.__dict__
    old = module.__dict__.get(attr)
    setattr(module, attr, forward)

    def undo():
        if had:
            setattr(module, attr, old)
        else:
            delattr(module, attr)
    return undo


@contextlib.contextmanager
def tapped(modules, tap):
    """Within the block, each module of {name: module} calls tap(name, module, x) with its input x
    (weights in place, under accelerate too) before computing as it did."""
    undo = []

    def make(name, module, inner):
        def forward(x, *args, **kwargs):
            tap(name, module, x)
            return inner(x, *args, **kwargs)
        return forward
    try:
        for name, module in modules.items():
            hooked = getattr(module, "_hf_hook", None) is not None and "_old_forward" in module.__dict__
            inner = module._old_forward if hooked else module.forward
            undo.append(_replace_forward(module, make(name, module, inner)))
        yield
    finally:
        for restore in reversed(undo):
            restore()


class _Held:
    """What a deferred module's one call left: its input and the placeholder it returned."""

    def __init__(self):
        self.input, self.output, self.calls = None, None, 0

    def returned_as_is(self, y):
        """Whether y, the model's final output, is the placeholder itself: the module's output went
        out of the model unchanged (no soft-capping, no cast, no copy), so that computing the module
        later on the held input gives the model's final output."""
        p = self.output
        return (self.calls == 1 and torch.is_tensor(y) and y.data_ptr() == p.data_ptr() and y.shape == p.shape
                and y.stride() == p.stride() and y.dtype == p.dtype)


@contextlib.contextmanager
def deferred(module, out_features):
    """Within the block, the module computes nothing: its call keeps its input x and returns a
    placeholder of the output's shape [..., out_features] that holds no memory (one zero, expanded),
    so that a model runs to its end without its widest output (a large vocabulary's logits, which
    verify computes afterwards a few sequences at a time). Yields the _Held record. Under
    accelerate the hook's wrapper stays in front, as for emulate."""
    held = _Held()

    def forward(x, *args, **kwargs):
        held.calls += 1
        held.input = x
        held.output = x.new_zeros(()).expand(*x.shape[:-1], int(out_features))
        return held.output
    undo = _replace_forward(module, forward)
    try:
        yield held
    finally:
        undo()
