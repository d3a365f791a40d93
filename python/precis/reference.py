"""A reference computed once (DESIGN §22, docs/verify.md "A reference computed once").

`verify --save-reference FILE` writes the reference model's input tokens and final outputs;
`verify --reference FILE` reads them instead of running the reference model, after checking that
they belong to this model and these inputs. The file is HDF5 (h5py):

  /tokens   int64 [samples, tokens]           the token ids, as the windows verify made
  /outputs  float32 (or float64 for an fp64 reference) [samples, tokens, features], exactly the
            values verify compares (no compact encoding: nothing is lost), chunked one sample per
            chunk, gzip level 4 after the byte shuffle filter
  attributes: format "precis-reference", format_version 1, kind (logits | hidden), reference
            (fp32 | fp64: how the outputs were computed), model_sha256 (model_fingerprint),
            model_name, model_class, tokens_sha256, samples, tokens_per_sample, features,
            torch and transformers versions.

Written to a temporary name and renamed. A file that does not match is refused naming the field:
model_sha256 (another model or other weights), samples / tokens_per_sample (other windows),
tokens (the first sample and position that differ), kind, features.
"""
import hashlib
import json
import os

import numpy as np

FORMAT, FORMAT_VERSION = "precis-reference", 1


class ReferenceError(ValueError):
    """A reference file that cannot be read or does not belong to this model and these inputs."""


def model_fingerprint(model):
    """SHA-256 over the model's config (transformers' JSON, keys sorted, without the
    transformers version) and every parameter and buffer: name, dtype, shape and bytes in
    state_dict order. Two models with this fingerprint compute the same function."""
    import torch

    h = hashlib.sha256()
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "to_dict"):
        d = {k: v for k, v in config.to_dict().items() if k not in ("transformers_version", "_name_or_path")}
        h.update(json.dumps(d, sort_keys=True, default=str).encode())
    h.update(type(model).__name__.encode())
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        if t.dtype == torch.bfloat16:  # NumPy has no bfloat16: hash its bits
            t = t.view(torch.int16)
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def tokens_sha256(ids):
    ids = np.ascontiguousarray(np.asarray(ids, np.int64))
    return hashlib.sha256(f"{ids.shape}".encode() + ids.tobytes()).hexdigest()


def _h5py():
    try:
        import h5py
    except ImportError as e:
        raise ReferenceError(f"reference files are HDF5 and need h5py ({e})") from None
    return h5py


def save(path, ids, outputs, *, kind, reference, fingerprint, model_name=None, model_class=None):
    h5py = _h5py()
    ids = np.asarray(ids, np.int64)
    outputs = np.asarray(outputs)
    if outputs.dtype not in (np.float32, np.float64):
        raise ReferenceError(f"{path}: outputs of dtype {outputs.dtype}: expected float32 or float64")
    if outputs.shape[:2] != ids.shape:
        raise ReferenceError(f"{path}: outputs {outputs.shape} do not line up with tokens {ids.shape}")
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        import torch
        import transformers
        versions = (str(torch.__version__), str(transformers.__version__))
    except ImportError:
        versions = ("", "")
    try:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("tokens", data=ids)
            chunk = (1,) + outputs.shape[1:]
            f.create_dataset("outputs", data=outputs, chunks=chunk, compression="gzip", compression_opts=4, shuffle=True)
            a = f.attrs
            a["format"], a["format_version"] = FORMAT, FORMAT_VERSION
            a["kind"], a["reference"] = kind, reference
            a["model_sha256"], a["model_name"], a["model_class"] = fingerprint, str(model_name or ""), str(model_class or "")
            a["tokens_sha256"] = tokens_sha256(ids)
            a["samples"], a["tokens_per_sample"] = ids.shape[0], ids.shape[1]
            a["features"] = outputs.shape[-1]
            a["torch_version"], a["transformers_version"] = versions
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class Reference:
    def __init__(self, path, ids, outputs, attrs):
        self.path, self.ids, self.outputs, self.attrs = path, ids, outputs, attrs

    @property
    def kind(self):
        return self.attrs["kind"]

    @property
    def reference(self):
        return self.attrs["reference"]


def load(path):
    h5py = _h5py()
    if not os.path.isfile(path):
        raise ReferenceError(f"--reference {path}: no such file")
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: (v.decode() if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v)
                     for k, v in f.attrs.items()}
            if attrs.get("format") != FORMAT:
                raise ReferenceError(f"--reference {path}: format {attrs.get('format')!r}: expected {FORMAT!r} "
                                     "(a file of verify --save-reference)")
            if attrs.get("format_version") != FORMAT_VERSION:
                raise ReferenceError(f"--reference {path}: format_version {attrs.get('format_version')}: this precis "
                                     f"reads {FORMAT_VERSION}")
            for name in ("tokens", "outputs"):
                if name not in f:
                    raise ReferenceError(f"--reference {path}: no /{name} dataset")
            ids = f["tokens"][()]
            outputs = f["outputs"][()]
    except OSError as e:
        raise ReferenceError(f"--reference {path}: not an HDF5 file ({e})") from None
    return Reference(path, ids, outputs, attrs)


def check(ref, *, fingerprint, ids):
    """Refuses (ReferenceError naming the field) a reference of another model or other inputs."""
    a, where = ref.attrs, f"--reference {ref.path}"
    if a.get("model_sha256") != fingerprint:
        raise ReferenceError(f"{where}: model_sha256 {str(a.get('model_sha256'))[:16]}… differs from this model's "
                             f"{fingerprint[:16]}… (the file is of {a.get('model_name') or 'another model'}: other "
                             "weights or config)")
    ids = np.asarray(ids, np.int64)
    if ref.ids.shape[0] != ids.shape[0]:
        raise ReferenceError(f"{where}: samples {ref.ids.shape[0]} in the file, {ids.shape[0]} from --inputs "
                             "(other windows: the same --inputs, --tokens and --samples make the same ones)")
    if ref.ids.shape[1] != ids.shape[1]:
        raise ReferenceError(f"{where}: tokens_per_sample {ref.ids.shape[1]} in the file, {ids.shape[1]} from --inputs "
                             "(--tokens)")
    if not np.array_equal(ref.ids, ids):
        s, t = np.argwhere(ref.ids != ids)[0]
        raise ReferenceError(f"{where}: tokens differ from --inputs' first at sample {s}, position {t} "
                             f"({int(ref.ids[s, t])} in the file, {int(ids[s, t])} now)")
    if ref.outputs.shape[:2] != ref.ids.shape:
        raise ReferenceError(f"{where}: outputs {ref.outputs.shape} do not line up with tokens {ref.ids.shape}")
