"""A minimal safetensors writer for the model tests: the format is written byte by byte here, so the
tests do not depend on the reader under test nor on a PyPI package (F8_E4M3 and packed int32 have
no NumPy dtype to save from)."""
import json
import struct

import numpy as np


def write_safetensors(path, tensors):
    """tensors: name -> (dtype string, shape, raw bytes)."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_safetensors_f32(path, arrays):
    """arrays: name -> NumPy array, stored as little-endian F32."""
    write_safetensors(path, {name: ("F32", a.shape, np.ascontiguousarray(a, "<f4").tobytes())
                             for name, a in arrays.items()})
