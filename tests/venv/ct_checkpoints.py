"""Converted checkpoints written by compressed-tensors itself (the library llm-compressor saves with),
for the tests of precis import --converted / precis conform.

write(out_dir, weights, preset) builds a torch module tree named like the checkpoint's layers, applies
the preset scheme with compressed-tensors' apply_quantization_config, sets each weight's scale (and
zero point, global scale) from its min/max with compressed-tensors' own calculate_qparams (what the
"minmax" observer llm-compressor uses computes, without a calibration loop), compresses with
ModelCompressor.compress_model, and saves the state dict and config.json (quantization_config) as
save_pretrained would: the tensors and the declaration are the library's, not this file's.
"""
import json
import os

import numpy as np
import torch
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.quantization import (QuantizationConfig, QuantizationScheme, QuantizationStrategy,
                                             apply_quantization_config, preset_name_to_scheme)
from compressed_tensors.quantization.lifecycle.forward import fake_quantize
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
from safetensors.torch import save_file


def module_tree(weights):
    """A torch.nn.Module whose named_modules() are the layers of `weights` ({name: [out, in] array})."""
    root = torch.nn.Module()
    for name, w in weights.items():
        parent = root
        parts = name.split(".")
        for part in parts[:-1]:
            if not hasattr(parent, part):
                parent.add_module(part, torch.nn.Module())
            parent = getattr(parent, part)
        linear = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
        linear.weight.data = torch.from_numpy(np.ascontiguousarray(w, np.float32))
        parent.add_module(parts[-1], linear)
    return root


def _minmax(w, args):
    s = args.strategy
    if s == QuantizationStrategy.TENSOR:
        return w.min().reshape(1), w.max().reshape(1)
    if s == QuantizationStrategy.CHANNEL:
        return w.amin(1, keepdim=True), w.amax(1, keepdim=True)
    if s in (QuantizationStrategy.GROUP, QuantizationStrategy.TENSOR_GROUP):
        g = w.unflatten(-1, (-1, args.group_size))
        return g.amin(-1), g.amax(-1)
    if s == QuantizationStrategy.BLOCK:
        br, bc = args.block_structure
        g = w.unflatten(0, (-1, br)).unflatten(-1, (-1, bc))
        return g.amin((1, 3)), g.amax((1, 3))
    raise ValueError(f"strategy {s}")


def write(out_dir, weights, preset, ignore=(), input_scale=None, scale_dtype=None, model_type="bert", expected=None):
    """Writes out_dir/model.safetensors and out_dir/config.json; returns (out_dir, the state dict). When
    `expected` is a dict, it receives each quantized layer's weights as the library's own
    fake_quantize() makes them (quantize, then dequantize, with the scales stored)."""
    model = module_tree(weights)
    scheme = preset_name_to_scheme(preset, ["Linear"]) if isinstance(preset, str) else QuantizationScheme(targets=["Linear"], **preset)
    config = QuantizationConfig(config_groups={"group_0": scheme}, ignore=list(ignore))
    apply_quantization_config(model, config, show_progress=False)
    for module_name, module in model.named_modules():
        qs = getattr(module, "quantization_scheme", None)
        if qs is None or qs.weights is None:
            continue
        args = qs.weights
        w = module.weight.data
        lo, hi = _minmax(w, args)
        gs = None
        if args.strategy == QuantizationStrategy.TENSOR_GROUP:
            gs = generate_gparam(w.min(), w.max())
            module.weight_global_scale.data.copy_(gs)
        s, z = calculate_qparams(torch.minimum(lo, torch.zeros_like(lo)), torch.maximum(hi, torch.zeros_like(hi)), args,
                                 global_scale=gs)
        if scale_dtype is not None:
            module.weight_scale.data = module.weight_scale.data.to(scale_dtype)
        module.weight_scale.data.copy_(s.reshape(module.weight_scale.shape))
        if hasattr(module, "weight_zero_point"):
            module.weight_zero_point.data.copy_(z.reshape(module.weight_zero_point.shape))
        if expected is not None:
            zp = getattr(module, "weight_zero_point", None)
            expected[module_name] = fake_quantize(w, module.weight_scale.data, None if zp is None else zp.data, args,
                                                  global_scale=gs).float().numpy()
        if hasattr(module, "input_scale") and input_scale is not None:
            module.input_scale.data.fill_(input_scale)
        if hasattr(module, "input_global_scale") and input_scale is not None:
            module.input_global_scale.data.fill_(input_scale)
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    os.makedirs(out_dir, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(out_dir, "model.safetensors"))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({"model_type": model_type}, f)
    compressor.update_config(out_dir)
    return out_dir, state

